// Error helpers of the CUDA runtime that CUB uses.
#include "common.cuh"
extern "C" const char *gj_cuda_error_name(int code) {
  return cudaGetErrorName(static_cast<cudaError_t>(code));
}
extern "C" int gj_cuda_get_last_error(void) { return static_cast<int>(cudaGetLastError()); }
