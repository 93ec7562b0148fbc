// DeviceReduce::Sum and DeviceHistogram::HistogramEven over radix digits.
#include <cub/device/device_histogram.cuh>
#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/transform_iterator.h>
#include "common.cuh"

namespace {
struct WidenU64 {
  __host__ __device__ uint64_t operator()(uint32_t x) const { return x; }
};
template <class K>
struct Digit {
  int shift;
  K mask;
  __host__ __device__ int operator()(K k) const { return static_cast<int>((k >> shift) & mask); }
};
}  // namespace

#define GJ_DEF_REDUCE(NAME, TI, TO, INPUT)                                                          \
  extern "C" int gj_cub_reduce_sum_##NAME(void *temp, size_t *temp_bytes, const TI *in, TO *out,  \
                                          int64_t n, gj_stream_t stream) {                        \
    GJ_NOEXCEPT(GJ_CALL(cub::DeviceReduce::Sum(temp, *temp_bytes, INPUT, out, n, GJ_STREAM(stream)))) \
  }
GJ_DEF_REDUCE(u32_u64, uint32_t, uint64_t, thrust::make_transform_iterator(in, WidenU64{}))
GJ_DEF_REDUCE(u64, uint64_t, uint64_t, in)
GJ_DEF_REDUCE(i64, int64_t, int64_t, in)
GJ_DEF_REDUCE(f64, double, double, in)

#define GJ_DEF_RADIX_HIST(KN, K)                                                                    \
  extern "C" int gj_cub_radix_histogram_##KN(void *temp, size_t *temp_bytes, const K *keys,       \
                                             uint32_t *hist, int64_t n, int shift, int bits,      \
                                             gj_stream_t stream) {                                \
    if (bits < 1 || bits > 16 || shift < 0 || shift >= (int)(8 * sizeof(K)))                      \
      return static_cast<int>(cudaErrorInvalidValue);                                              \
    const int bins = 1 << bits;                                                                    \
    auto digits = thrust::make_transform_iterator(keys, Digit<K>{shift, static_cast<K>(bins - 1)}); \
    GJ_NOEXCEPT(GJ_CALL(cub::DeviceHistogram::HistogramEven(temp, *temp_bytes, digits, hist,       \
                                                            bins + 1, 0, bins, n,                  \
                                                            GJ_STREAM(stream))))                   \
  }
GJ_DEF_RADIX_HIST(u32, uint32_t)
GJ_DEF_RADIX_HIST(u64, uint64_t)
