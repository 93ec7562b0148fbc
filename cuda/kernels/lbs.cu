// Load-balancing search (ModernGPU's LoadBalanceSearch) as a standalone primitive.
#include "gpujoin/lbs.cuh"
#include "gpujoin_kernels.h"

namespace {
using namespace gj;
constexpr int NT = 256, VT = 8, NV = NT * VT;

__global__ void __launch_bounds__(NT) lbs_kernel(const uint64_t *offsets, int64_t num_segments, int64_t total,
                                                 const int64_t *partitions, uint32_t *segments, uint32_t *ranks) {
  __shared__ uint64_t shared[NV + 2];
  lbs_tile<NT, VT>(offsets, num_segments, total, partitions, shared,
                   [&](int64_t item, int64_t seg, uint64_t rank) {
                     if (segments) segments[item] = (uint32_t)seg;
                     if (ranks) ranks[item] = (uint32_t)rank;
                   });
}
}  // namespace

extern "C" int gj_k_load_balancing_search(void *temp, size_t *temp_bytes, const uint64_t *offsets,
                                          int64_t num_segments, int64_t total, uint32_t *segments,
                                          uint32_t *ranks, gj_k_stream_t s) {
  int64_t *parts = nullptr, num_tiles = 0;
  int rc = lbs_setup(temp, temp_bytes, offsets, num_segments, total, NV, static_cast<cudaStream_t>(s), &parts, &num_tiles);
  if (rc != 0) return rc < 0 ? 0 : rc;
  lbs_kernel<<<(unsigned)num_tiles, NT, 0, static_cast<cudaStream_t>(s)>>>(offsets, num_segments, total, parts, segments, ranks);
  return launch_status();
}
