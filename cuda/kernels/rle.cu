// Single-pass run-length encode: head flags, then a scan with decoupled look-back (CUB's
// ScanTileState) over (runs so far, start of the last run) pairs. A run's length is written
// when the next run's head is found (the previous run's start comes with the scan prefix), the
// last run's by the thread holding the last item. Keys are read once; unique keys and lengths
// are written once.
#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include "gpujoin/common.cuh"
#include "gpujoin_kernels.h"

namespace {
using namespace gj;
constexpr int NT = 256, IPT = 8, NV = NT * IPT;
using TileState = cub::ScanTileState<uint64_t>;

// (count << 32 | last head position): counts add, the later non-empty side's position wins.
struct RunOp {
  __device__ __forceinline__ uint64_t operator()(uint64_t a, uint64_t b) const {
    uint64_t cb = b >> 32;
    return (((a >> 32) + cb) << 32) | (cb ? (b & 0xFFFFFFFFull) : (a & 0xFFFFFFFFull));
  }
};

__global__ void init_kernel(TileState st, int tiles) { st.InitializeStatus(tiles); }

template <class K>
__global__ void __launch_bounds__(NT) rle_kernel(const K *in, int64_t n, K *unique, uint32_t *counts, int64_t *num_runs,
                                                 TileState st) {
  using Load = cub::BlockLoad<K, NT, IPT, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Disc = cub::BlockDiscontinuity<K, NT>;
  using Scan = cub::BlockScan<uint64_t, NT>;
  using Prefix = cub::TilePrefixCallbackOp<uint64_t, RunOp, TileState>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Disc::TempStorage disc;
    typename Scan::TempStorage scan;
  } ts;
  __shared__ typename Prefix::TempStorage prefix_storage;
  const int tile = blockIdx.x;
  const int64_t tile_start = (int64_t)tile * NV;
  const int valid = (int)(n - tile_start < NV ? n - tile_start : NV);
  K keys[IPT];
  Load(ts.load).Load(in + tile_start, keys, valid, in[n - 1]);
  __syncthreads();
  int heads[IPT];
  auto differ = [](K a, K b) { return a != b; };
  if (tile == 0) Disc(ts.disc).FlagHeads(heads, keys, differ);
  else Disc(ts.disc).FlagHeads(heads, keys, differ, in[tile_start - 1]);
  __syncthreads();
  const int64_t first = tile_start + (int64_t)threadIdx.x * IPT;
  uint64_t agg = 0;
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    if (first + j < n && heads[j]) agg = RunOp{}(agg, (1ull << 32) | (uint64_t)(first + j));
  }
  uint64_t state;
  if (tile == 0) {
    uint64_t block_agg;
    Scan(ts.scan).ExclusiveScan(agg, state, 0ull, RunOp{}, block_agg);
    if (threadIdx.x == 0) st.SetInclusive(0, block_agg);
  } else {
    Prefix prefix(st, prefix_storage, RunOp{}, tile);
    Scan(ts.scan).ExclusiveScan(agg, state, RunOp{}, prefix);
  }
  // The tile's runs are staged in shared memory and written out coalesced. Run r's length is
  // known when run r + 1's head is seen: inside the tile it goes to the staging area; for the
  // tile's first head it belongs to the previous tile's last run and goes straight to memory.
  __shared__ K s_unique[NV];
  __shared__ uint32_t s_count[NV];
  __shared__ uint32_t s_first_run, s_end_run;
  if (threadIdx.x == 0) s_first_run = (uint32_t)(state >> 32);
  __syncthreads();
  const uint32_t r0 = s_first_run;
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    const int64_t i = first + j;
    if (i < n && heads[j]) {
      uint32_t r = (uint32_t)(state >> 32);
      if (r > 0) {
        uint32_t len = (uint32_t)(i - (int64_t)(state & 0xFFFFFFFFull));
        if (r - 1 >= r0) s_count[r - 1 - r0] = len;
        else counts[r - 1] = len;
      }
      s_unique[r - r0] = keys[j];
      state = ((uint64_t)(r + 1) << 32) | (uint64_t)i;
    }
    if (i == n - 1) {
      uint32_t runs = (uint32_t)(state >> 32);
      uint32_t len = (uint32_t)(n - (int64_t)(state & 0xFFFFFFFFull));
      if (runs - 1 >= r0) s_count[runs - 1 - r0] = len;
      else counts[runs - 1] = len;
      *num_runs = runs;
    }
  }
  if (threadIdx.x == NT - 1) s_end_run = (uint32_t)(state >> 32);
  __syncthreads();
  const uint32_t tile_runs = s_end_run - r0;
  // The last run's length is written by the next tile, except in the last tile.
  const bool last_tile = tile_start + NV >= n;
  const uint32_t counted = last_tile ? tile_runs : (tile_runs > 0 ? tile_runs - 1 : 0);
  for (uint32_t k = threadIdx.x; k < tile_runs; k += NT) {
    unique[r0 + k] = s_unique[k];
    if (k < counted) counts[r0 + k] = s_count[k];
  }
}

template <class K>
int rle(void *temp, size_t *temp_bytes, const K *in, K *unique, uint32_t *counts, int64_t *num_runs, int64_t n,
        cudaStream_t s) {
  if (n < 0 || n >= 0xFFFFFFFFll) return (int)cudaErrorInvalidValue;
  int tiles = (int)((n + NV - 1) / NV);
  size_t need = 0;
  TileState::AllocationSize(tiles > 0 ? tiles : 1, need);
  if (!temp) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return (int)cudaErrorInvalidValue;
  if (n == 0) return (int)cudaMemsetAsync(num_runs, 0, sizeof(int64_t), s);
  TileState st;
  int rc = (int)st.Init(tiles, temp, need);
  if (rc) return rc;
  init_kernel<<<blocks_for(tiles + 32, 256), 256, 0, s>>>(st, tiles);
  rle_kernel<K><<<tiles, NT, 0, s>>>(in, n, unique, counts, num_runs, st);
  return launch_status();
}
}  // namespace

extern "C" int gj_k_run_length_encode_u32(void *temp, size_t *temp_bytes, const uint32_t *in, uint32_t *unique,
                                          uint32_t *counts, int64_t *num_runs, int64_t n, gj_k_stream_t s) {
  return rle<uint32_t>(temp, temp_bytes, in, unique, counts, num_runs, n, (cudaStream_t)s);
}
extern "C" int gj_k_run_length_encode_u64(void *temp, size_t *temp_bytes, const uint64_t *in, uint64_t *unique,
                                          uint32_t *counts, int64_t *num_runs, int64_t n, gj_k_stream_t s) {
  return rle<uint64_t>(temp, temp_bytes, in, unique, counts, num_runs, n, (cudaStream_t)s);
}
