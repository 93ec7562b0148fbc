// Stable one-pass radix partition of (key, value) pairs by a digit of up to 12 bits ("wide"
// fan-out: up to 4096 partitions), for partitions small enough to be joined in shared memory.
//
// The onesweep of partition.cu moves 8 bits per pass and writes each tile's digit runs wherever
// the decoupled look-back puts them: runs of ~16 rows per digit per tile, written as partial
// sectors. Here every block owns one contiguous chunk of the input, so that each block writes
// each digit's rows to ONE contiguous region of the output, front after front:
//
//   1. histogram: a grid of B persistent blocks (a few per SM); block b counts the digits of its
//      chunk (whole tiles) in shared memory and writes counts[digit * B + b] (digit-major);
//   2. an exclusive sum of the digit-major counts (CUB DeviceScan) is each (digit, block)
//      region's start in the output; the starts of block 0 are the partition offsets;
//   3. scatter: each block re-reads its chunk tile by tile, in order (cp.async, a pipeline of
//      STAGES tiles so that the next tile's reads overlap the current tile's work), sorts the tile
//      stably by digit in shared memory (one or two match_any ranking passes of <= 6 bits, as
//      CUB's BlockRadixRankMatch), and writes each item to cursor[digit] + its rank within the
//      digit's run in the tile; cursor[digit] (shared) then advances by the run's length.
//
// Consecutive tiles of a block extend the same 2^bits write fronts, so partial sectors written by
// one tile are completed by the next ones. Two ways to combine them ("writes"):
//
//   * WRITES_L2: items go straight to global memory, and the partial sectors of the B x 2^bits
//     fronts (132 x 4096 x 32 B = 17 MB per output array at 12 bits on an H100) are combined in
//     the 50 MB L2 before they reach DRAM. Input reads carry an L2 evict-first hint so that the
//     stream of inputs does not push the fronts out.
//   * WRITES_SHARED: software write-combining. Each digit has a shared buffer of S items per
//     output array; output positions are grouped into aligned groups of S items (S * sizeof(K) =
//     32 or 16 bytes: a sector or half of one). An item whose group lies inside its tile's run is
//     written directly (whole groups, coalesced across the warp); the rest go to the digit's
//     buffer, and a group that completes is written from the buffer as one vector store per 16
//     bytes by one thread; partial groups are written at the end of the chunk (and at the start of
//     a region, whose first group is shared with the region before it). It needs
//     2^bits x S x (sizeof K + sizeof V) bytes of shared memory: at 12 bits u32/u32 only half
//     sectors fit (S = 4), and with 8-byte values nothing fits at 12 bits (WRITES_L2 runs).
//
// No atomics decide positions: the order within a digit is the input order (chunks in block
// order, tiles in chunk order, items in tile order), so the output is the same as a stable sort
// by the digit, i.e. CUB's radix sort on that bit range. Up to 2^32 rows: positions are 32-bit
// in the kernels (a position is < n <= 2^32; counters wrap harmlessly past the last row), the
// region starts and partition offsets 64-bit.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/transform_iterator.h>
#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_kernels.h"

namespace {
using namespace gj;

constexpr int MAX_BITS = 12;
constexpr int SUB_BITS = 6;  // bits of one in-tile ranking pass (two passes sort 12 bits)
constexpr int SUB_DIGITS = 1 << SUB_BITS;
constexpr int COUNT_ROW = SUB_DIGITS + 1;  // per-warp ranking counters, padded against bank conflicts
constexpr int64_t MAX_ITEMS = 1ll << 32;

// Scatter kernel shape per key/value width and write mode (CUB-style policy: data, not constants
// in the code). One block of NT threads per SM: every block is a set of 2^bits write fronts, so
// more blocks mean more open fronts; the cp.async pipeline supplies the memory parallelism.
template <class K, class V, bool WC>
struct ScatterTuning {
  static constexpr int NT = 512;          // threads per block (16 warps)
  static constexpr int IPT = WC ? 4 : 8;  // items per thread per tile (WC: room for the buffers)
  static constexpr int NV = NT * IPT;     // items per tile (< 2^16: 16-bit in-tile indices)
  static constexpr int STAGES = 2;        // tiles in shared memory: the current one and the next
  static constexpr int BLOCKS_PER_SM = 1;
};

// Histogram kernel shape: as many keys in flight as the scatter has, 64 bytes per thread.
constexpr int HIST_NT = 1024;
template <class K>
struct HistTuning {
  static constexpr int UNROLL = 64 / (int)sizeof(K);  // keys per thread per step
};

// Write combining: groups of S = GROUP_BYTES / sizeof(K) keys; full sectors where they fit.
constexpr int FULL_GROUP_BYTES = 32;
constexpr int HALF_GROUP_BYTES = 16;

// Block b's chunk is tiles [chunk_tile(b), chunk_tile(b + 1)) (balanced to one tile).
__host__ __device__ __forceinline__ int64_t chunk_tile(int64_t tiles, int blocks, int b) {
  return tiles * b / blocks;
}

template <class K>
__device__ __forceinline__ uint32_t digit_of(K key, int shift, uint32_t mask) {
  return static_cast<uint32_t>(key >> shift) & mask;
}


// An L2 policy that evicts these lines first: the inputs are read once per pass.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// Asynchronous copy of one 4- or 8-byte element from global to shared memory.
template <class T>
__device__ __forceinline__ void cp_async(T *smem_dst, const T *global_src, uint64_t policy) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cp.async element of 4 or 8 bytes");
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], %2, %3;" ::"r"(dst), "l"(global_src),
               "n"((int)sizeof(T)), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// ---------------------------------------------------------------------------------------------
// 1. Histogram: counts[d * B + b] = #keys of block b's chunk with digit d.
template <class K>
__global__ void __launch_bounds__(HIST_NT) wide_histogram_kernel(const K *__restrict__ keys, int64_t n, int tile_items,
                                                                 int shift, uint32_t mask,
                                                                 uint32_t *__restrict__ counts) {
  constexpr int U = HistTuning<K>::UNROLL;
  __shared__ uint32_t s_hist[1 << MAX_BITS];
  const int digits = (int)mask + 1, b = blockIdx.x, blocks = gridDim.x;
  for (int d = threadIdx.x; d < digits; d += HIST_NT) s_hist[d] = 0;
  __syncthreads();
  const int64_t tiles = (n + tile_items - 1) / tile_items;
  const int64_t begin = chunk_tile(tiles, blocks, b) * tile_items;
  const int64_t end = min(n, chunk_tile(tiles, blocks, b + 1) * tile_items);
  // A chunk holds < 2^32 keys (the host keeps B >= 2 for inputs of 2^32 rows), so the 32-bit
  // shared counters hold.
  for (int64_t base = begin + threadIdx.x; base < end; base += (int64_t)HIST_NT * U) {
    K k[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int64_t i = base + (int64_t)j * HIST_NT;
      k[j] = i < end ? __ldcs(keys + i) : K(0);
    }
#pragma unroll
    for (int j = 0; j < U; ++j)
      if (base + (int64_t)j * HIST_NT < end) atomicAdd(&s_hist[digit_of(k[j], shift, mask)], 1u);
  }
  __syncthreads();
  for (int d = threadIdx.x; d < digits; d += HIST_NT) counts[(int64_t)d * blocks + b] = s_hist[d];
}

// ---------------------------------------------------------------------------------------------
// 3. Scatter.
//
// Dynamic shared memory, in this order (every part a multiple of 16 bytes):
//   keys[STAGES][NV], values[STAGES][NV]   the tiles in input order (cp.async)
//   tags[NV]                              the tile sorted by digit: digit << 16 | item index
//   cursor[D]                             next output position of each digit of this block
//   delta[D]                              output position of sorted slot j of digit d: delta[d] + j
//   (WC only) run_end[D] (u16), first_slot[D] (u8), buffer keys[D][S], buffer values[D][S]
struct ScatterLayout {
  size_t keys, vals, tags, cursor, delta, run_end, first_slot, wc_keys, wc_vals, bytes;
};
__host__ __device__ __forceinline__ size_t align16(size_t x) { return (x + 15) & ~size_t(15); }

template <class K, class V, bool WC>
__host__ __device__ __forceinline__ ScatterLayout scatter_layout(int digits, int group) {
  using T = ScatterTuning<K, V, WC>;
  ScatterLayout l{};
  size_t at = 0;
  l.keys = at;
  at += align16((size_t)T::STAGES * T::NV * sizeof(K));
  l.vals = at;
  at += align16((size_t)T::STAGES * T::NV * sizeof(V));
  l.tags = at;
  at += align16((size_t)T::NV * sizeof(uint32_t));
  l.cursor = at;
  at += align16((size_t)digits * sizeof(uint32_t));
  l.delta = at;
  at += align16((size_t)digits * sizeof(uint32_t));
  if (WC) {
    l.run_end = at;
    at += align16((size_t)digits * sizeof(uint16_t));
    l.first_slot = at;
    at += align16((size_t)digits);
    l.wc_keys = at;
    at += align16((size_t)digits * group * sizeof(K));
    l.wc_vals = at;
    at += align16((size_t)digits * group * sizeof(V));
  }
  l.bytes = at;
  return l;
}

// The block scan of the ranking counters (warp scans: a small TempStorage, which leaves the
// shared memory to the tiles and the write-combining buffers).
template <int NT>
using WarpScansBlockScan = cub::BlockScan<uint32_t, NT, cub::BLOCK_SCAN_WARP_SCANS>;

// Ranks the tile's items (tag[k] of thread (warp, lane) is in-order item warp*32*IPT + k*32 +
// lane) stably by the sub-digit (tag >> sub_shift) & (2^sub_bits - 1) and stores each tag at its
// rank in s_tags. Items keep their order among equal sub-digits. Callers may read s_tags before
// the call (the first barrier separates those reads from the stores).
template <int NT, int IPT>
__device__ __forceinline__ void rank_and_place(const uint32_t (&tag)[IPT], int sub_shift, int sub_bits,
                                               uint32_t *s_counts,
                                               typename WarpScansBlockScan<NT>::TempStorage &scan_temp,
                                               uint32_t *s_tags) {
  constexpr int W = NT / 32;
  static_assert(W * SUB_DIGITS == 2 * NT, "two ranking counters per thread in the scan");
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const uint32_t sub_mask = (1u << sub_bits) - 1;
  for (int i = tid; i < W * COUNT_ROW; i += NT) s_counts[i] = 0;
  __syncthreads();
  // Rank within the warp: peers share a sub-digit; the warp's counter holds its count so far.
  uint32_t *my_counts = s_counts + warp * COUNT_ROW;
  const uint32_t lt = lanemask_lt();
  uint32_t rank[IPT];
#pragma unroll
  for (int k = 0; k < IPT; ++k) {
    const uint32_t sub = (tag[k] >> sub_shift) & sub_mask;
    const uint32_t peers = __match_any_sync(0xFFFFFFFFu, sub);
    const uint32_t before = my_counts[sub];
    __syncwarp();
    if (lane == 31 - __clz(peers)) my_counts[sub] = before + __popc(peers);
    __syncwarp();
    rank[k] = before + __popc(peers & lt);
  }
  __syncthreads();
  // Exclusive sum over (sub-digit, warp), sub-digit major: the start of warp w's items of
  // sub-digit s in the tile. Thread t holds entries 2t and 2t+1: one sub-digit, warps w and w+1.
  const int e = 2 * tid, sub = e / W, w = e % W;
  uint32_t *c0 = s_counts + w * COUNT_ROW + sub, *c1 = c0 + COUNT_ROW;
  const uint32_t n0 = *c0, n1 = *c1;
  uint32_t start;
  WarpScansBlockScan<NT>(scan_temp).ExclusiveSum(n0 + n1, start);
  *c0 = start;
  *c1 = start + n0;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < IPT; ++k) rank[k] += my_counts[(tag[k] >> sub_shift) & sub_mask];
#pragma unroll
  for (int k = 0; k < IPT; ++k) s_tags[rank[k]] = tag[k];
  __syncthreads();
}

// Copies one aligned group of S items from shared memory to global memory in vector stores.
template <class T, int S>
__device__ __forceinline__ void store_group(T *__restrict__ dst, const T *src) {
  constexpr int BYTES = S * (int)sizeof(T);
  if constexpr (BYTES % 16 == 0) {
#pragma unroll
    for (int c = 0; c < BYTES / 16; ++c) reinterpret_cast<uint4 *>(dst)[c] = reinterpret_cast<const uint4 *>(src)[c];
  } else if constexpr (BYTES == 8) {
    *reinterpret_cast<uint2 *>(dst) = *reinterpret_cast<const uint2 *>(src);
  } else {
#pragma unroll
    for (int s = 0; s < S; ++s) dst[s] = src[s];
  }
}

// WC: S items per group (a power of two); L2: S is unused (1).
template <class K, class V, bool WC, int S>
__global__ void __launch_bounds__(ScatterTuning<K, V, WC>::NT, 1)
    wide_scatter_kernel(const K *__restrict__ keys_in, const V *__restrict__ vals_in, K *__restrict__ keys_out,
                        V *__restrict__ vals_out, int64_t n, int shift, int bits,
                        const unsigned long long *__restrict__ starts, unsigned long long *__restrict__ offsets) {
  using T = ScatterTuning<K, V, WC>;
  constexpr int NT = T::NT, IPT = T::IPT, NV = T::NV, STAGES = T::STAGES, W = NT / 32;
  static_assert(NV <= 65536 && NV % NT == 0, "16-bit in-tile indices");
  static_assert(!WC || (S >= 1 && (S & (S - 1)) == 0), "groups of a power of two items");
  using Scan = WarpScansBlockScan<NT>;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ uint32_t s_counts[W * COUNT_ROW];
  __shared__ typename Scan::TempStorage scan_temp;

  const uint32_t mask = (1u << bits) - 1;
  const int digits = 1 << bits;
  const ScatterLayout l = scatter_layout<K, V, WC>(digits, S);
  K *s_keys = reinterpret_cast<K *>(smem + l.keys);
  V *s_vals = reinterpret_cast<V *>(smem + l.vals);
  uint32_t *s_tags = reinterpret_cast<uint32_t *>(smem + l.tags);
  uint32_t *s_cursor = reinterpret_cast<uint32_t *>(smem + l.cursor);
  uint32_t *s_delta = reinterpret_cast<uint32_t *>(smem + l.delta);
  uint16_t *s_run_end = reinterpret_cast<uint16_t *>(smem + l.run_end);
  uint8_t *s_first_slot = reinterpret_cast<uint8_t *>(smem + l.first_slot);
  K *s_wc_keys = reinterpret_cast<K *>(smem + l.wc_keys);
  V *s_wc_vals = reinterpret_cast<V *>(smem + l.wc_vals);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int b = blockIdx.x, blocks = gridDim.x;
  const int64_t tiles = (n + NV - 1) / NV;
  const int64_t first_tile = chunk_tile(tiles, blocks, b), end_tile = chunk_tile(tiles, blocks, b + 1);

  // The partition offsets: the regions of block 0 start each digit.
  if (b == 0) {
    for (int d = tid; d < digits; d += NT) offsets[d] = starts[(int64_t)d * blocks];
    if (tid == 0) offsets[digits] = (unsigned long long)n;
  }
  // This block's write fronts. A position is < n <= 2^32; the start of a digit this block has no
  // rows of may be n = 2^32, which wraps to 0 and is never used.
  for (int d = tid; d < digits; d += NT) {
    const uint32_t start = (uint32_t)starts[(int64_t)d * blocks + b];
    s_cursor[d] = start;
    // The region's first group may begin with the previous region's rows: its slots below the
    // start are not this block's to write.
    if constexpr (WC) s_first_slot[d] = (uint8_t)(start & (S - 1));
  }

  // Issues the copies of a tile into its stage and commits them as one group (an empty group past
  // the chunk, so that every iteration waits for the same count).
  const uint64_t policy = evict_first_policy();
  auto load_tile = [&](int64_t tile) {
    if (tile < end_tile) {
      const int stage = (int)((tile - first_tile) % STAGES);
      const int64_t base = tile * NV;
      const int valid = (int)min((int64_t)NV, n - base);
      K *dk = s_keys + stage * NV;
      V *dv = s_vals + stage * NV;
      for (int i = tid; i < valid; i += NT) {
        cp_async(dk + i, keys_in + base + i, policy);
        cp_async(dv + i, vals_in + base + i, policy);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_tile(first_tile + s);

  // Ranking passes: one for digits of <= 6 bits, else the low half then the high half.
  const int lo_bits = bits <= SUB_BITS ? bits : (bits + 1) / 2;
  const int warp_first = warp * 32 * IPT;

  for (int64_t tile = first_tile; tile < end_tile; ++tile) {
    cp_async_wait<STAGES - 2>();
    // This tile is in shared memory for every thread, and every thread is done with the previous
    // tile (its stage is refilled next; its cursors are visible).
    __syncthreads();
    load_tile(tile + STAGES - 1);
    const int stage = (int)((tile - first_tile) % STAGES);
    const K *tk = s_keys + stage * NV;
    const V *tv = s_vals + stage * NV;
    const int valid = (int)min((int64_t)NV, n - tile * NV);

    // Tags in input order (warp-striped: item k of lane l of warp w is item w*32*IPT + k*32 + l,
    // so that the ranking order (warp, k, lane) is input order). Past the end of the last tile,
    // items get the largest digit: as the last items in input order they sort after every real
    // item, to slots >= valid that are never written out.
    uint32_t tag[IPT];
#pragma unroll
    for (int k = 0; k < IPT; ++k) {
      const int i = warp_first + k * 32 + lane;
      const uint32_t d = i < valid ? digit_of(tk[i], shift, mask) : mask;
      tag[k] = d << 16 | (uint32_t)i;
    }
    rank_and_place<NT, IPT>(tag, 16, lo_bits, s_counts, scan_temp, s_tags);
    if (bits > lo_bits) {
#pragma unroll
      for (int k = 0; k < IPT; ++k) tag[k] = s_tags[warp_first + k * 32 + lane];
      rank_and_place<NT, IPT>(tag, 16 + lo_bits, bits - lo_bits, s_counts, scan_temp, s_tags);
    }
    // s_tags[0, valid) is the tile sorted stably by digit. Consecutive threads take consecutive
    // sorted slots j, so each digit's run is written to consecutive addresses.
    uint32_t sorted[IPT];
    uint32_t run_start = 0, run_end = 0;  // bit k: slot k*NT + tid starts / ends its digit's run
#pragma unroll
    for (int k = 0; k < IPT; ++k) {
      const int j = k * NT + tid;
      if (j < valid) {
        sorted[k] = s_tags[j];
        const uint32_t d = sorted[k] >> 16;
        if (j == 0 || (s_tags[j - 1] >> 16) != d) {
          run_start |= 1u << k;
          s_delta[d] = s_cursor[d] - (uint32_t)j;
        }
        if (j == valid - 1 || (s_tags[j + 1] >> 16) != d) {
          run_end |= 1u << k;
          if constexpr (WC) s_run_end[d] = (uint16_t)(j + 1);
        }
      }
    }
    __syncthreads();

    if constexpr (!WC) {
      (void)run_start;
#pragma unroll
      for (int k = 0; k < IPT; ++k) {
        const int j = k * NT + tid;
        if (j < valid) {
          const uint32_t d = sorted[k] >> 16, idx = sorted[k] & 0xFFFFu;
          const uint32_t pos = s_delta[d] + (uint32_t)j;
          keys_out[pos] = tk[idx];
          vals_out[pos] = tv[idx];
          if (run_end >> k & 1) s_cursor[d] = pos + 1;
        }
      }
    } else {
      // Positions [p, e) of digit d get this tile's run; group g = [g0, g0 + S) with g0 = pos
      // rounded down to S. A group inside [p, e) is written directly; the group holding p, when
      // it began before p (its earlier items are buffered) and ends by e, is written whole from
      // the buffer and the tile by the run's first thread; a group still open at e is buffered.
      // Here n < 2^32, so e = delta + run_end does not wrap; a group's end g0 + S may reach 2^32,
      // so it is 64-bit.
      uint32_t to_buffer = 0;
#pragma unroll
      for (int k = 0; k < IPT; ++k) {
        const int j = k * NT + tid;
        if (j < valid) {
          const uint32_t d = sorted[k] >> 16, idx = sorted[k] & 0xFFFFu;
          const uint32_t delta = s_delta[d], p = s_cursor[d], e = delta + s_run_end[d];
          const uint32_t pos = delta + (uint32_t)j, g0 = pos & ~(uint32_t)(S - 1);
          const uint64_t g_end = (uint64_t)g0 + S;
          if (g0 >= p && g_end <= e) {
            keys_out[pos] = tk[idx];
            vals_out[pos] = tv[idx];
          } else if (g_end > e) {
            to_buffer |= 1u << k;
          }
          if ((run_start >> k & 1) && g0 < p && g_end <= e) {
            // pos == p: complete the head group in the buffer from the tile, then write it.
            K *bk = s_wc_keys + (size_t)d * S;
            V *bv = s_wc_vals + (size_t)d * S;
            for (uint64_t q = p; q < g_end; ++q) {
              const uint32_t i = s_tags[(uint32_t)q - delta] & 0xFFFFu;
              bk[q - g0] = tk[i];
              bv[q - g0] = tv[i];
            }
            const int first = s_first_slot[d];
            if (first == 0) {
              store_group<K, S>(keys_out + g0, bk);
              store_group<V, S>(vals_out + g0, bv);
            } else {
              for (int s = first; s < S; ++s) {
                keys_out[g0 + s] = bk[s];
                vals_out[g0 + s] = bv[s];
              }
              s_first_slot[d] = 0;
            }
          }
        }
      }
      // The head groups are read out of the buffers before the tails overwrite them.
      __syncthreads();
#pragma unroll
      for (int k = 0; k < IPT; ++k) {
        const int j = k * NT + tid;
        if (j < valid) {
          const uint32_t d = sorted[k] >> 16, idx = sorted[k] & 0xFFFFu;
          const uint32_t delta = s_delta[d], pos = delta + (uint32_t)j;
          if (to_buffer >> k & 1) {
            s_wc_keys[(size_t)d * S + (pos & (S - 1))] = tk[idx];
            s_wc_vals[(size_t)d * S + (pos & (S - 1))] = tv[idx];
          }
          if (run_end >> k & 1) s_cursor[d] = pos + 1;
        }
      }
    }
  }

  if constexpr (WC) {
    // The groups still open at the end of the chunk: slots [first, p - g0) of each digit.
    __syncthreads();
    for (int d = tid; d < digits; d += NT) {
      const uint32_t p = s_cursor[d], g0 = p & ~(uint32_t)(S - 1);
      for (uint32_t s = s_first_slot[d]; s < p - g0; ++s) {
        keys_out[g0 + s] = s_wc_keys[(size_t)d * S + s];
        vals_out[g0 + s] = s_wc_vals[(size_t)d * S + s];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: the plan (write mode, tile, grid) and the launches.

struct WidenU64 {
  __host__ __device__ unsigned long long operator()(uint32_t x) const { return x; }
};

template <class K, class V, bool WC, int S>
int scatter_static_smem(size_t *bytes) {
  cudaFuncAttributes a{};
  const int rc = (int)cudaFuncGetAttributes(&a, wide_scatter_kernel<K, V, WC, S>);
  *bytes = a.sharedSizeBytes;
  return rc;
}

// Whether the scatter of this shape fits the device's shared memory for one block.
template <class K, class V, bool WC, int S>
int scatter_fits(int digits, bool *fits) {
  size_t static_bytes = 0;
  int rc = scatter_static_smem<K, V, WC, S>(&static_bytes);
  if (rc) return rc;
  int dev = 0, optin = 0;
  if ((rc = (int)cudaGetDevice(&dev))) return rc;
  if ((rc = (int)cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev))) return rc;
  *fits = scatter_layout<K, V, WC>(digits, S).bytes + static_bytes <= (size_t)optin;
  return 0;
}

template <class K>
constexpr int full_group() {
  return FULL_GROUP_BYTES / (int)sizeof(K);
}
template <class K>
constexpr int half_group() {
  return HALF_GROUP_BYTES / (int)sizeof(K);
}

struct Plan {
  int writes;      // GJ_K_PARTW_WRITES_L2 or GJ_K_PARTW_WRITES_SHARED
  int group;       // items per write-combining group (1 for L2)
  int tile_items;  // NV of the chosen kernel
  int blocks;      // B
};

// Chooses the write mode (see gpujoin_kernels.h), the group size and the grid. WRITES_SHARED
// needs n < 2^32 (its group arithmetic is 32-bit), outputs aligned to 16 bytes (vector stores)
// and the buffers in shared memory; otherwise the scatter writes through L2.
template <class K, class V>
int plan_partition(int64_t n, int bits, int writes, bool outputs_aligned, int blocks_wanted, Plan *plan) {
  if (writes < GJ_K_PARTW_WRITES_AUTO || writes > GJ_K_PARTW_WRITES_SHARED || bits < 1 || bits > MAX_BITS ||
      blocks_wanted < 0)
    return (int)cudaErrorInvalidValue;
  const int digits = 1 << bits;
  // Auto: write-combining above 8 bits (runs of one or two rows per digit per tile), where the
  // L2 would see a partial sector per row; at <= 8 bits the runs are long enough for L2.
  // (A first guess, to be replaced by measurements on the H100.)
  const bool want_wc = writes == GJ_K_PARTW_WRITES_SHARED || (writes == GJ_K_PARTW_WRITES_AUTO && bits > 8);
  int group = 1;
  if (want_wc && n < MAX_ITEMS && outputs_aligned) {
    bool fits = false;
    int rc = scatter_fits<K, V, true, full_group<K>()>(digits, &fits);
    if (rc) return rc;
    if (fits) {
      group = full_group<K>();
    } else {
      if ((rc = scatter_fits<K, V, true, half_group<K>()>(digits, &fits))) return rc;
      if (fits) group = half_group<K>();
    }
  }
  plan->writes = group > 1 ? GJ_K_PARTW_WRITES_SHARED : GJ_K_PARTW_WRITES_L2;
  plan->group = group;
  plan->tile_items = group > 1 ? ScatterTuning<K, V, true>::NV : ScatterTuning<K, V, false>::NV;
  const int64_t tiles = (n + plan->tile_items - 1) / plan->tile_items;
  int64_t blocks = blocks_wanted > 0 ? blocks_wanted
                                     : (int64_t)sm_count() * (group > 1 ? ScatterTuning<K, V, true>::BLOCKS_PER_SM
                                                                         : ScatterTuning<K, V, false>::BLOCKS_PER_SM);
  if (blocks > tiles) blocks = tiles;
  // A chunk must hold < 2^32 rows (32-bit histogram counters): two blocks at least for 2^32.
  if (blocks < 2 && tiles >= 2) blocks = 2;
  if (blocks < 1) blocks = 1;
  plan->blocks = (int)blocks;
  return 0;
}

template <class K, class V, bool WC, int S>
int launch_scatter(const K *keys_in, const V *vals_in, K *keys_out, V *vals_out, int64_t n, int shift, int bits,
                   int blocks, const unsigned long long *starts, unsigned long long *offsets, cudaStream_t s) {
  using T = ScatterTuning<K, V, WC>;
  const size_t smem = scatter_layout<K, V, WC>(1 << bits, S).bytes;
  int rc = (int)cudaFuncSetAttribute(wide_scatter_kernel<K, V, WC, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)smem);
  if (rc) return rc;
  wide_scatter_kernel<K, V, WC, S><<<blocks, T::NT, smem, s>>>(keys_in, vals_in, keys_out, vals_out, n, shift, bits,
                                                               starts, offsets);
  return launch_status();
}

size_t align256(size_t x) { return (x + 255) & ~size_t(255); }

template <class K, class V>
int partition_wide(void *temp, size_t *temp_bytes, const K *keys_in, const V *vals_in, K *keys_out, V *vals_out,
                   unsigned long long *offsets, int64_t n, int begin_bit, int end_bit, int writes, int blocks_wanted,
                   cudaStream_t s) {
  if (!temp_bytes || !offsets || n < 0 || n > MAX_ITEMS || begin_bit < 0 || end_bit > (int)(8 * sizeof(K)) ||
      begin_bit >= end_bit || end_bit - begin_bit > MAX_BITS)
    return (int)cudaErrorInvalidValue;
  const int bits = end_bit - begin_bit, digits = 1 << bits;
  const bool aligned = ((uintptr_t)keys_out | (uintptr_t)vals_out) % 16 == 0;
  Plan plan{};
  int rc = plan_partition<K, V>(n, bits, writes, aligned, blocks_wanted, &plan);
  if (rc) return rc;
  // Temporary layout: counts (u32, digit-major) | region starts (u64) | the scan's storage.
  const int64_t entries = (int64_t)digits * plan.blocks;
  const size_t counts_bytes = align256((size_t)entries * sizeof(uint32_t));
  const size_t starts_bytes = align256((size_t)entries * sizeof(unsigned long long));
  auto widened = thrust::make_transform_iterator(static_cast<const uint32_t *>(nullptr), WidenU64{});
  size_t scan_bytes = 0;
  if ((rc = (int)cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, widened,
                                               static_cast<unsigned long long *>(nullptr), entries, s)))
    return rc;
  const size_t need = counts_bytes + starts_bytes + align256(scan_bytes);
  if (!temp) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return (int)cudaErrorInvalidValue;
  if (n == 0) return (int)cudaMemsetAsync(offsets, 0, (size_t)(digits + 1) * sizeof(unsigned long long), s);
  char *t = static_cast<char *>(temp);
  auto *counts = reinterpret_cast<uint32_t *>(t);
  auto *starts = reinterpret_cast<unsigned long long *>(t + counts_bytes);
  void *scan_temp = t + counts_bytes + starts_bytes;

  const uint32_t mask = (uint32_t)digits - 1;
  wide_histogram_kernel<K><<<plan.blocks, HIST_NT, 0, s>>>(keys_in, n, plan.tile_items, begin_bit, mask, counts);
  if ((rc = launch_status())) return rc;
  if ((rc = (int)cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes,
                                               thrust::make_transform_iterator(static_cast<const uint32_t *>(counts),
                                                                               WidenU64{}),
                                               starts, entries,
                                               s)))
    return rc;
  if (plan.writes == GJ_K_PARTW_WRITES_L2)
    return launch_scatter<K, V, false, 1>(keys_in, vals_in, keys_out, vals_out, n, begin_bit, bits, plan.blocks,
                                          starts, offsets, s);
  if (plan.group == full_group<K>())
    return launch_scatter<K, V, true, full_group<K>()>(keys_in, vals_in, keys_out, vals_out, n, begin_bit, bits,
                                                       plan.blocks, starts, offsets, s);
  return launch_scatter<K, V, true, half_group<K>()>(keys_in, vals_in, keys_out, vals_out, n, begin_bit, bits,
                                                     plan.blocks, starts, offsets, s);
}

template <class K, class V>
int plan_c(int64_t n, int bits, int writes, int outputs_aligned, int blocks, int *writes_used, int *group,
           int *tile_items, int *grid_blocks) {
  if (n < 0 || n > MAX_ITEMS) return (int)cudaErrorInvalidValue;
  Plan p{};
  const int rc = plan_partition<K, V>(n, bits, writes, outputs_aligned != 0, blocks, &p);
  if (rc) return rc;
  if (writes_used) *writes_used = p.writes;
  if (group) *group = p.group;
  if (tile_items) *tile_items = p.tile_items;
  if (grid_blocks) *grid_blocks = p.blocks;
  return 0;
}
}  // namespace

#define GJ_DEF_PARTW(KN, K, VN, V)                                                                               \
  extern "C" int gj_k_partw_partition_pairs_##KN##_##VN(                                                         \
      void *temp, size_t *temp_bytes, const K *keys_in, const V *vals_in, K *keys_out, V *vals_out,              \
      uint64_t *offsets, int64_t n, int begin_bit, int end_bit, int writes, int blocks, gj_k_stream_t stream) {  \
    return partition_wide<K, V>(temp, temp_bytes, keys_in, vals_in, keys_out, vals_out,                          \
                                reinterpret_cast<unsigned long long *>(offsets), n, begin_bit, end_bit, writes,  \
                                blocks, static_cast<cudaStream_t>(stream));                                     \
  }
GJ_DEF_PARTW(k32, uint32_t, v32, uint32_t)
GJ_DEF_PARTW(k32, uint32_t, v64, uint64_t)
GJ_DEF_PARTW(k64, uint64_t, v32, uint32_t)
GJ_DEF_PARTW(k64, uint64_t, v64, uint64_t)

extern "C" int gj_k_partw_plan(int key_bytes, int value_bytes, int64_t n, int bits, int writes, int outputs_aligned,
                               int blocks, int *writes_used, int *group, int *tile_items, int *grid_blocks) {
  if (key_bytes == 4 && value_bytes == 4)
    return plan_c<uint32_t, uint32_t>(n, bits, writes, outputs_aligned, blocks, writes_used, group, tile_items,
                                      grid_blocks);
  if (key_bytes == 4 && value_bytes == 8)
    return plan_c<uint32_t, uint64_t>(n, bits, writes, outputs_aligned, blocks, writes_used, group, tile_items,
                                      grid_blocks);
  if (key_bytes == 8 && value_bytes == 4)
    return plan_c<uint64_t, uint32_t>(n, bits, writes, outputs_aligned, blocks, writes_used, group, tile_items,
                                      grid_blocks);
  if (key_bytes == 8 && value_bytes == 8)
    return plan_c<uint64_t, uint64_t>(n, bits, writes, outputs_aligned, blocks, writes_used, group, tile_items,
                                      grid_blocks);
  return (int)cudaErrorInvalidValue;
}
