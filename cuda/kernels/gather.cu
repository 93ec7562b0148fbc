// Gather, scatter, iota and fill.
#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_kernels.h"

namespace {
using namespace gj;
constexpr int NT = 256;
constexpr int ITEMS = 4;  // items per thread per grid-stride step

template <class T>
__global__ void __launch_bounds__(NT) gather_kernel(const T *__restrict__ src, int64_t src_len,
                                                    const uint32_t *__restrict__ idx, T *__restrict__ out,
                                                    int64_t n, T fill, uint32_t *oob) {
  const int64_t stride = (int64_t)gridDim.x * NT * ITEMS;
  for (int64_t base = (int64_t)blockIdx.x * NT * ITEMS + threadIdx.x; base < n; base += stride) {
    uint32_t ix[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      int64_t i = base + k * NT;
      ix[k] = i < n ? __ldcs(idx + i) : kNone;
    }
    T v[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      bool ok = ix[k] != kNone && (int64_t)ix[k] < src_len;
      v[k] = ok ? src[ix[k]] : fill;
      if (!ok && ix[k] != kNone && oob && base + k * NT < n) *oob = 1;
    }
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      int64_t i = base + k * NT;
      if (i < n) __stcs(out + i, v[k]);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(NT) scatter_kernel(const T *__restrict__ src, const uint32_t *__restrict__ idx,
                                                     T *__restrict__ out, int64_t out_len, int64_t n, uint32_t *oob) {
  const int64_t stride = (int64_t)gridDim.x * NT;
  for (int64_t i = (int64_t)blockIdx.x * NT + threadIdx.x; i < n; i += stride) {
    uint32_t j = idx[i];
    if ((int64_t)j < out_len && j != kNone) out[j] = src[i];
    else if (oob) *oob = 1;
  }
}

template <class T>
__global__ void iota_kernel(T *out, int64_t n, T start) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = start + (T)i;
}

template <class T>
__global__ void fill_kernel(T *out, int64_t n, T value) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = value;
}

int grid_for(int64_t n, int per_thread) {
  return blocks_for_sms(n, NT * per_thread, tuning::kTileBlocksPerSm);
}
}  // namespace

#define GJ_DEF_GATHER(NAME, T)                                                                       \
  extern "C" int gj_k_gather_##NAME(const T *src, int64_t src_len, const uint32_t *idx, T *out,     \
                                    int64_t n, T fill, uint32_t *oob, gj_k_stream_t s) {            \
    if (n <= 0) return 0;                                                                            \
    gather_kernel<T><<<grid_for(n, ITEMS), NT, 0, static_cast<cudaStream_t>(s)>>>(src, src_len, idx, out, n, fill, oob); \
    return launch_status();                                                                          \
  }                                                                                                  \
  extern "C" int gj_k_scatter_##NAME(const T *src, const uint32_t *idx, T *out, int64_t out_len,    \
                                     int64_t n, uint32_t *oob, gj_k_stream_t s) {                   \
    if (n <= 0) return 0;                                                                            \
    scatter_kernel<T><<<grid_for(n, 4), NT, 0, static_cast<cudaStream_t>(s)>>>(src, idx, out, out_len, n, oob); \
    return launch_status();                                                                          \
  }                                                                                                  \
  extern "C" int gj_k_fill_##NAME(T *out, int64_t n, T value, gj_k_stream_t s) {                    \
    if (n <= 0) return 0;                                                                            \
    fill_kernel<T><<<grid_for(n, 4), NT, 0, static_cast<cudaStream_t>(s)>>>(out, n, value);         \
    return launch_status();                                                                          \
  }
GJ_DEF_GATHER(b32, uint32_t)
GJ_DEF_GATHER(b64, uint64_t)

extern "C" int gj_k_iota_u32(uint32_t *out, int64_t n, uint32_t start, gj_k_stream_t s) {
  if (n <= 0) return 0;
  iota_kernel<uint32_t><<<grid_for(n, 4), NT, 0, static_cast<cudaStream_t>(s)>>>(out, n, start);
  return launch_status();
}
extern "C" int gj_k_iota_u64(uint64_t *out, int64_t n, uint64_t start, gj_k_stream_t s) {
  if (n <= 0) return 0;
  iota_kernel<uint64_t><<<grid_for(n, 4), NT, 0, static_cast<cudaStream_t>(s)>>>(out, n, start);
  return launch_status();
}
