// Launch helpers shared by the multi-GPU kernels (C++ only; not part of the C ABI).
#pragma once
#include <cstdint>

#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_multi.h"

namespace gj::multi {

constexpr int NT = 256;

inline cudaStream_t cs(gj_m_stream_t s) { return static_cast<cudaStream_t>(s); }

// Element-wise grid-stride kernels: about 4 items a thread, capped per SM.
inline int grid(int64_t n) { return blocks_for(n, NT * 4, grid_cap(tuning::kStreamBlocksPerSm)); }

}  // namespace gj::multi

#define GJ_M_GRID_STRIDE(i, n)                                                                              \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, _stride = (int64_t)gridDim.x * blockDim.x; \
       i < (n); i += _stride)
