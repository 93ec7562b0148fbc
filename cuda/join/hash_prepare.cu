// Hash join: key preparation (see hash.cuh).
#include "hash.cuh"

namespace {
using namespace gj;
using namespace gj::hash;

// ---------------------------------------------------------------------------------------------
// Key preparation
// ---------------------------------------------------------------------------------------------
__global__ void mix32_kernel(const uint32_t *in, const uint32_t *rows, int64_t n, uint32_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fmix32(in[rows ? rows[i] : i]);
}
__global__ void mix64_kernel(const uint64_t *in, const uint32_t *rows, int64_t n, uint64_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fmix64(in[rows ? rows[i] : i]);
}
__global__ void narrow_mix_kernel(const uint64_t *in, const uint32_t *rows, int64_t n, uint32_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fmix32((uint32_t)in[rows ? rows[i] : i]);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// C ABI
// ---------------------------------------------------------------------------------------------
extern "C" int gj_h_mix_u32(const uint32_t *in, const uint32_t *rows, int64_t n, uint32_t *out, gj_h_stream_t s) {
  if (n <= 0) return 0;
  mix32_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(in, rows, n, out);
  return launch_status();
}

extern "C" int gj_h_mix_u64(const uint64_t *in, const uint32_t *rows, int64_t n, uint64_t *out, gj_h_stream_t s) {
  if (n <= 0) return 0;
  mix64_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(in, rows, n, out);
  return launch_status();
}

extern "C" int gj_h_narrow_mix(const uint64_t *in, const uint32_t *rows, int64_t n, uint32_t *out, gj_h_stream_t s) {
  if (n <= 0) return 0;
  narrow_mix_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(in, rows, n, out);
  return launch_status();
}

