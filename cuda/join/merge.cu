// Sort-merge (ModernGPU RelationalJoin) kernels: equality counts and the Cartesian expansion
// by load-balancing search.
#include "gpujoin/lbs.cuh"
#include "gpujoin_join.h"

namespace {
using namespace gj;
constexpr int NT = 256, VT = 8, NV = NT * VT;

__global__ void merge_counts_kernel(const uint32_t *lb, const uint32_t *ub, int64_t n, bool keep_unmatched,
                                    uint32_t *counts) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t c = ub[i] - lb[i];
    counts[i] = (c == 0 && keep_unmatched) ? 1u : c;
  }
}

__global__ void __launch_bounds__(NT) merge_expand_kernel(const uint64_t *offsets, int64_t n, int64_t total,
                                                          const int64_t *parts, const uint32_t *lb,
                                                          const uint32_t *ub, const uint32_t *a_rows,
                                                          const uint32_t *b_rows, uint32_t *out_a,
                                                          uint32_t *out_b) {
  __shared__ uint64_t shared[NV + 2];
  lbs_tile<NT, VT>(offsets, n, total, parts, shared, [&](int64_t item, int64_t seg, uint64_t rank) {
    uint32_t l = lb[seg], u = ub[seg];
    out_a[item] = a_rows ? a_rows[seg] : (uint32_t)seg;
    uint32_t j = l + (uint32_t)rank;
    out_b[item] = u > l ? (b_rows ? b_rows[j] : j) : kNone;
  });
}
}  // namespace

extern "C" int gj_j_merge_counts(const uint32_t *lb, const uint32_t *ub, int64_t n, int keep_unmatched,
                                 uint32_t *counts, gj_j_stream_t s) {
  if (n <= 0) return 0;
  merge_counts_kernel<<<blocks_for(n, 256 * 4, 132 * 32), 256, 0, (cudaStream_t)s>>>(lb, ub, n, keep_unmatched != 0,
                                                                                    counts);
  return launch_status();
}

extern "C" int gj_j_merge_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t n, int64_t total,
                                 const uint32_t *lb, const uint32_t *ub, const uint32_t *a_rows,
                                 const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b, gj_j_stream_t s) {
  int64_t tiles = (total + n + NV - 1) / NV;
  size_t need = sizeof(int64_t) * (tiles + 1);
  if (!temp) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return (int)cudaErrorInvalidValue;
  if (total == 0) return 0;
  int64_t *parts = (int64_t *)temp;
  int rc = lbs_partition(offsets, n, total, NV, parts, (cudaStream_t)s);
  if (rc) return rc;
  merge_expand_kernel<<<(unsigned)tiles, NT, 0, (cudaStream_t)s>>>(offsets, n, total, parts, lb, ub, a_rows, b_rows,
                                                                   out_a, out_b);
  return launch_status();
}
