// Device-side helpers shared by gpujoin's kernels (C++ only; not part of the C ABI).
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace gj {

constexpr uint32_t kNone = 0xFFFFFFFFu;  // RowId::NONE

// Order-preserving unsigned image of a key, matching CUB radix-sort order:
// integers by value; floats -NaN < -inf < ... < -0.0 == +0.0 < ... < +inf < +NaN (CUB treats
// the two zeros as one key).
__device__ __forceinline__ uint32_t ordered(uint32_t x) { return x; }
__device__ __forceinline__ uint64_t ordered(uint64_t x) { return x; }
__device__ __forceinline__ uint32_t ordered(int32_t x) { return static_cast<uint32_t>(x) ^ 0x80000000u; }
__device__ __forceinline__ uint64_t ordered(int64_t x) {
  return static_cast<uint64_t>(x) ^ 0x8000000000000000ull;
}
__device__ __forceinline__ uint32_t ordered(float x) {
  uint32_t b = x == 0.0f ? 0u : __float_as_uint(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ uint64_t ordered(double x) {
  uint64_t b = x == 0.0 ? 0ull : static_cast<uint64_t>(__double_as_longlong(x));
  return (b & 0x8000000000000000ull) ? ~b : (b | 0x8000000000000000ull);
}

template <class T>
__device__ __forceinline__ bool less(T a, T b) { return ordered(a) < ordered(b); }
template <class T>
__device__ __forceinline__ bool less_eq(T a, T b) { return ordered(a) <= ordered(b); }

// MurmurHash3's finalizers: bijective mixes of all input bits.
__device__ __forceinline__ uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
__device__ __forceinline__ uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

// The lanes of the warp below this one (bit i set for lane i < this lane).
__device__ __forceinline__ uint32_t lanemask_lt() {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

inline int blocks_for(int64_t n, int per_block, int cap = 1 << 30) {
  int64_t b = (n + per_block - 1) / per_block;
  if (b < 1) b = 1;
  if (b > cap) b = cap;
  return static_cast<int>(b);
}

inline int launch_status() { return static_cast<int>(cudaGetLastError()); }

}  // namespace gj
