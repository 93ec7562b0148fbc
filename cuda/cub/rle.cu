// DeviceRunLengthEncode::Encode (32-bit item counts: the caller checks n <= INT32_MAX).
#include <cub/device/device_run_length_encode.cuh>
#include "common.cuh"

#define GJ_DEF_RLE(KN, K)                                                                          \
  extern "C" int gj_cub_run_length_encode_##KN(void *temp, size_t *temp_bytes, const K *in,       \
                                               K *unique_out, uint32_t *counts_out,                \
                                               int64_t *num_runs, int64_t n, gj_stream_t stream) { \
    if (n < 0 || n > INT32_MAX) return static_cast<int>(cudaErrorInvalidValue);                    \
    GJ_NOEXCEPT(GJ_CALL(cub::DeviceRunLengthEncode::Encode(temp, *temp_bytes, in, unique_out,      \
                                                           counts_out, num_runs,                   \
                                                           static_cast<int>(n), GJ_STREAM(stream)))) \
  }
GJ_DEF_RLE(u32, uint32_t)
GJ_DEF_RLE(u64, uint64_t)
