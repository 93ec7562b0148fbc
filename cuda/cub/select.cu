// DeviceSelect::Flagged / If and DevicePartition::Flagged.
#include <cub/device/device_partition.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include "common.cuh"

namespace {
template <class T>
struct Compare {
  gj_cmp_op op;
  T value;
  __host__ __device__ bool operator()(const T &x) const {
    switch (op) {
      case GJ_CMP_LT: return x < value;
      case GJ_CMP_LE: return x <= value;
      case GJ_CMP_GT: return x > value;
      case GJ_CMP_GE: return x >= value;
      case GJ_CMP_EQ: return x == value;
      default: return x != value;
    }
  }
};
struct FlagIs {
  bool want;
  __host__ __device__ bool operator()(uint8_t f) const { return (f != 0) == want; }
};
}  // namespace

extern "C" int gj_cub_select_by_flag_u32(void *temp, size_t *temp_bytes, const uint32_t *in,
                                         const uint8_t *flags, int want, uint32_t *out,
                                         int64_t *num_selected, int64_t n, gj_stream_t stream) {
  auto f = thrust::make_transform_iterator(flags, FlagIs{want != 0});
  if (in) {
    GJ_NOEXCEPT(GJ_CALL(cub::DeviceSelect::Flagged(temp, *temp_bytes, in, f, out, num_selected, n,
                                                   GJ_STREAM(stream))))
  }
  GJ_NOEXCEPT(GJ_CALL(cub::DeviceSelect::Flagged(temp, *temp_bytes, thrust::counting_iterator<uint32_t>(0), f, out,
                                                 num_selected, n, GJ_STREAM(stream))))
}

#define GJ_DEF_SELECT(TN, T)                                                                        \
  extern "C" int gj_cub_select_flagged_##TN(void *temp, size_t *temp_bytes, const T *in,          \
                                            const uint8_t *flags, T *out, int64_t *num_selected,  \
                                            int64_t n, gj_stream_t stream) {                      \
    GJ_NOEXCEPT(GJ_CALL(cub::DeviceSelect::Flagged(temp, *temp_bytes, in, flags, out, num_selected, \
                                                   n, GJ_STREAM(stream))))                        \
  }                                                                                                \
  extern "C" int gj_cub_select_if_##TN(void *temp, size_t *temp_bytes, const T *in, T *out,       \
                                       int64_t *num_selected, int64_t n, gj_cmp_op op, T value,   \
                                       gj_stream_t stream) {                                      \
    GJ_NOEXCEPT(GJ_CALL(cub::DeviceSelect::If(temp, *temp_bytes, in, out, num_selected, n,        \
                                              Compare<T>{op, value}, GJ_STREAM(stream))))         \
  }                                                                                                \
  extern "C" int gj_cub_partition_flagged_##TN(void *temp, size_t *temp_bytes, const T *in,       \
                                               const uint8_t *flags, T *out,                      \
                                               int64_t *num_selected, int64_t n,                  \
                                               gj_stream_t stream) {                              \
    GJ_NOEXCEPT(GJ_CALL(cub::DevicePartition::Flagged(temp, *temp_bytes, in, flags, out,          \
                                                      num_selected, n, GJ_STREAM(stream))))       \
  }
GJ_DEF_SELECT(u32, uint32_t)
GJ_DEF_SELECT(u64, uint64_t)
