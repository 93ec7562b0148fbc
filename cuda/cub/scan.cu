// DeviceScan::ExclusiveSum / InclusiveSum.
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/transform_iterator.h>
#include "common.cuh"

namespace {
struct WidenU64 {
  __host__ __device__ uint64_t operator()(uint32_t x) const { return x; }
};
template <class TO, class TI>
auto widen(const TI *in) {
  if constexpr (sizeof(TO) == sizeof(TI)) {
    return in;
  } else {
    return thrust::make_transform_iterator(in, WidenU64{});
  }
}
}  // namespace

#define GJ_DEF_SCAN(NAME, TI, TO)                                                                   \
  extern "C" int gj_cub_exclusive_sum_##NAME(void *temp, size_t *temp_bytes, const TI *in, TO *out, \
                                             int64_t n, gj_stream_t stream) {                      \
    GJ_NOEXCEPT(GJ_CALL(cub::DeviceScan::ExclusiveSum(temp, *temp_bytes, widen<TO>(in), out, n,    \
                                                      GJ_STREAM(stream))))                         \
  }                                                                                                 \
  extern "C" int gj_cub_inclusive_sum_##NAME(void *temp, size_t *temp_bytes, const TI *in, TO *out, \
                                             int64_t n, gj_stream_t stream) {                      \
    GJ_NOEXCEPT(GJ_CALL(cub::DeviceScan::InclusiveSum(temp, *temp_bytes, widen<TO>(in), out, n,    \
                                                      GJ_STREAM(stream))))                         \
  }
GJ_DEF_SCAN(u32, uint32_t, uint32_t)
GJ_DEF_SCAN(u64, uint64_t, uint64_t)
GJ_DEF_SCAN(u32_u64, uint32_t, uint64_t)
