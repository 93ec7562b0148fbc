// Interleave join kernels: derived keys of the concatenated tables, per-run output counts after
// the stable sort and run-length encoding, and the expansion of the selected runs.
#include "gpujoin/launch.cuh"
#include "gpujoin/lbs.cuh"
#include "gpujoin_join.h"

namespace {
using namespace gj;
constexpr int NT = 256, VT = 8, NV = NT * VT;

__global__ void derive_kernel(const uint64_t *image, int64_t n, int tbits, uint64_t table, uint64_t *keys) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    keys[i] = (image[i] << tbits) | table;
}

// Two tables: tid = low bit. An L run (tid 0) followed by an R run (tid 1) of the same key is a
// matched pair of runs; everything else is unmatched.
__device__ __forceinline__ bool l_run_matched(const uint64_t *runs, int64_t g, int64_t num_runs) {
  return g + 1 < num_runs && (runs[g] & 1) == 0 && runs[g + 1] == (runs[g] | 1);
}
__device__ __forceinline__ bool r_run_matched(const uint64_t *runs, int64_t g) {
  return g > 0 && (runs[g] & 1) == 1 && runs[g - 1] == (runs[g] & ~1ull);
}

__global__ void counts_kernel(const uint64_t *runs, const uint32_t *len, int64_t num_runs, gj_j_kind kind,
                              uint64_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < num_runs; g += stride) {
    bool is_left = (runs[g] & 1) == 0;
    uint64_t c = 0;
    if (is_left) {
      bool m = l_run_matched(runs, g, num_runs);
      switch (kind) {
        case GJ_J_INNER: case GJ_J_RIGHT: c = m ? (uint64_t)len[g] * len[g + 1] : 0; break;
        case GJ_J_LEFT: case GJ_J_FULL: c = m ? (uint64_t)len[g] * len[g + 1] : len[g]; break;
        case GJ_J_LEFT_SEMI: c = m ? len[g] : 0; break;
        case GJ_J_LEFT_ANTI: c = m ? 0 : len[g]; break;
        default: c = 0;
      }
    } else {
      bool m = r_run_matched(runs, g);
      switch (kind) {
        case GJ_J_RIGHT: case GJ_J_FULL: c = m ? 0 : len[g]; break;
        case GJ_J_RIGHT_SEMI: c = m ? len[g] : 0; break;
        case GJ_J_RIGHT_ANTI: c = m ? 0 : len[g]; break;
        default: c = 0;
      }
    }
    out[g] = c;
  }
}

__global__ void __launch_bounds__(NT) expand_kernel(const uint64_t *offsets, int64_t num_runs, int64_t total,
                                                    const int64_t *parts, const uint64_t *runs, const uint32_t *len,
                                                    const uint32_t *start, const uint32_t *ids, uint32_t n_left,
                                                    gj_j_kind kind, uint32_t *out_a, uint32_t *out_b) {
  __shared__ uint64_t shared[NV + 2];
  lbs_tile<NT, VT>(offsets, num_runs, total, parts, shared, [&](int64_t item, int64_t g, uint64_t rank) {
    bool is_left = (runs[g] & 1) == 0;
    uint32_t a = kNone, b = kNone;
    if (is_left && l_run_matched(runs, g, num_runs) && kind != GJ_J_LEFT_SEMI) {
      uint64_t nr = len[g + 1];
      a = ids[start[g] + (uint32_t)(rank / nr)];
      b = ids[start[g + 1] + (uint32_t)(rank % nr)] - n_left;
    } else if (is_left) {
      a = ids[start[g] + (uint32_t)rank];
    } else {
      b = ids[start[g] + (uint32_t)rank] - n_left;
    }
    if (out_a) out_a[item] = a;
    if (out_b) out_b[item] = b;
  });
}

// N tables: a run g with table 0 starts a match when runs g..g+N-1 hold tables 0..N-1 of one key.
__device__ __forceinline__ bool n_matched(const uint64_t *runs, int64_t g, int64_t num_runs, int tables, int tbits) {
  uint64_t mask = (1ull << tbits) - 1;
  if ((runs[g] & mask) != 0 || g + tables > num_runs) return false;
  uint64_t key = runs[g] >> tbits;
  for (int t = 1; t < tables; ++t)
    if (runs[g + t] != ((key << tbits) | (uint64_t)t)) return false;
  return true;
}

__global__ void counts_n_kernel(const uint64_t *runs, const uint32_t *len, int64_t num_runs, int tables, int tbits,
                                uint64_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < num_runs; g += stride) {
    uint64_t c = 0;
    if (n_matched(runs, g, num_runs, tables, tbits)) {
      c = 1;
      for (int t = 0; t < tables; ++t) c *= len[g + t];
    }
    out[g] = c;
  }
}

__global__ void __launch_bounds__(NT) expand_n_kernel(const uint64_t *offsets, int64_t num_runs, int64_t total,
                                                      const int64_t *parts, const uint32_t *len, const uint32_t *start,
                                                      const uint32_t *ids, const uint32_t *table_base, int tables,
                                                      uint32_t *out) {
  __shared__ uint64_t shared[NV + 2];
  lbs_tile<NT, VT>(offsets, num_runs, total, parts, shared, [&](int64_t item, int64_t g, uint64_t rank) {
    // Mixed-radix digits of the rank, last table fastest (so rows come out ordered by table 0).
    for (int t = tables - 1; t >= 0; --t) {
      uint64_t n = len[g + t];
      uint32_t r = (uint32_t)(rank % n);
      rank /= n;
      out[(int64_t)t * total + item] = ids[start[g + t] + r] - table_base[t];
    }
  });
}

}  // namespace

extern "C" int gj_j_interleave_derive(const uint64_t *image, int64_t n, int tbits, uint64_t table, uint64_t *keys,
                                      gj_j_stream_t s) {
  if (n <= 0) return 0;
  derive_kernel<<<blocks_for_sms(n, 256 * 4, tuning::kStreamBlocksPerSm), 256, 0, (cudaStream_t)s>>>(image, n, tbits, table, keys);
  return launch_status();
}

extern "C" int gj_j_interleave_counts(const uint64_t *runs, const uint32_t *len, int64_t num_runs, gj_j_kind kind,
                                      uint64_t *out, gj_j_stream_t s) {
  if (num_runs <= 0) return 0;
  counts_kernel<<<blocks_for_sms(num_runs, 256 * 4, tuning::kStreamBlocksPerSm), 256, 0, (cudaStream_t)s>>>(runs, len, num_runs, kind, out);
  return launch_status();
}

extern "C" int gj_j_interleave_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t num_runs,
                                      int64_t total, const uint64_t *runs, const uint32_t *len, const uint32_t *start,
                                      const uint32_t *ids, uint32_t n_left, gj_j_kind kind, uint32_t *out_a,
                                      uint32_t *out_b, gj_j_stream_t s) {
  int64_t *parts = nullptr, tiles = 0;
  int rc = lbs_setup(temp, temp_bytes, offsets, num_runs, total, NV, (cudaStream_t)s, &parts, &tiles);
  if (rc != 0) return rc < 0 ? 0 : rc;
  expand_kernel<<<(unsigned)tiles, NT, 0, (cudaStream_t)s>>>(offsets, num_runs, total, parts, runs, len, start, ids,
                                                             n_left, kind, out_a, out_b);
  return launch_status();
}

extern "C" int gj_j_interleave_counts_n(const uint64_t *runs, const uint32_t *len, int64_t num_runs, int tables,
                                        int tbits, uint64_t *out, gj_j_stream_t s) {
  if (num_runs <= 0) return 0;
  counts_n_kernel<<<blocks_for_sms(num_runs, 256 * 4, tuning::kStreamBlocksPerSm), 256, 0, (cudaStream_t)s>>>(runs, len, num_runs, tables,
                                                                                       tbits, out);
  return launch_status();
}

extern "C" int gj_j_interleave_expand_n(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t num_runs,
                                        int64_t total, const uint32_t *len, const uint32_t *start, const uint32_t *ids,
                                        const uint32_t *table_base, int tables, uint32_t *out, gj_j_stream_t s) {
  int64_t *parts = nullptr, tiles = 0;
  int rc = lbs_setup(temp, temp_bytes, offsets, num_runs, total, NV, (cudaStream_t)s, &parts, &tiles);
  if (rc != 0) return rc < 0 ? 0 : rc;
  expand_n_kernel<<<(unsigned)tiles, NT, 0, (cudaStream_t)s>>>(offsets, num_runs, total, parts, len, start, ids,
                                                               table_base, tables, out);
  return launch_status();
}
