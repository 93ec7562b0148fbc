// Shared helpers of the CUB wrappers (C++ side only).
#pragma once
#include <cstdint>
#include <cuda_runtime.h>
#include "gpujoin_cub.h"

#define GJ_STREAM(s) (static_cast<cudaStream_t>(s))
#define GJ_CALL(expr) return static_cast<int>(expr)

// Wraps a body that may throw (CUB's host code can, e.g. std::bad_alloc) so no exception crosses
// the C ABI.
#define GJ_NOEXCEPT(body)                         \
  try {                                           \
    body;                                         \
  } catch (...) {                                 \
    return static_cast<int>(cudaErrorUnknown);    \
  }
