// Key compression of 8-byte integer keys: the range of the valid keys (one reduction a side,
// folded into one two-word result) and the keys as 32-bit offsets from the smallest.
//
// Example: keys [-5, 7, NULL, -3] give range {min -5, max 7}; with min -5 the offsets are
// [0, 12, 0, 2] (a NULL row's offset is 0; its validity bit stays the judge).
#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_join.h"

namespace {
using namespace gj;

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// Merges the range [a_lo, a_hi] into [lo, hi] (an empty range has lo > hi and changes nothing).
template <class T>
__device__ __forceinline__ void merge(T a_lo, T a_hi, T &lo, T &hi) {
  lo = a_lo < lo ? a_lo : lo;
  hi = a_hi > hi ? a_hi : hi;
}
__device__ __forceinline__ void publish(int64_t *range, int64_t lo, int64_t hi) {
  atomicMin(reinterpret_cast<long long *>(&range[0]), (long long)lo);
  atomicMax(reinterpret_cast<long long *>(&range[1]), (long long)hi);
}
__device__ __forceinline__ void publish(uint32_t *range, uint32_t lo, uint32_t hi) {
  atomicMin(&range[0], lo);
  atomicMax(&range[1], hi);
}
__device__ __forceinline__ void publish(uint64_t *range, uint64_t lo, uint64_t hi) {
  atomicMin(reinterpret_cast<unsigned long long *>(&range[0]), (unsigned long long)lo);
  atomicMax(reinterpret_cast<unsigned long long *>(&range[1]), (unsigned long long)hi);
}

// Each thread folds its grid-stride rows, each warp its threads (shuffles), each block its warps
// (shared memory); one atomic min and one atomic max per block. `empty_lo` / `empty_hi`: the
// empty range (the type's largest / smallest value).
template <class T>
__global__ void __launch_bounds__(kThreads) range_kernel(const T *col, const uint32_t *validity, int64_t n, T empty_lo,
                                                         T empty_hi, T *range) {
  T lo = empty_lo, hi = empty_hi;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  // kUnroll independent loads in flight per thread (the grid is only as large as what stays
  // resident, so each thread has many rows).
  for (int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; first < n; first += stride * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = first + u * stride;
      if (i < n && (!validity || ((validity[i >> 5] >> (i & 31)) & 1))) {
        const T v = col[i];
        merge(v, v, lo, hi);
      }
    }
  }
  for (int d = 16; d > 0; d >>= 1) {
    T other_lo = __shfl_down_sync(0xFFFFFFFFu, lo, d), other_hi = __shfl_down_sync(0xFFFFFFFFu, hi, d);
    merge(other_lo, other_hi, lo, hi);
  }
  __shared__ T los[kThreads / 32], his[kThreads / 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) {
    los[warp] = lo;
    his[warp] = hi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      merge(los[w], his[w], lo, hi);
    }
    if (lo <= hi) publish(range, lo, hi);
  }
}

__global__ void offset_kernel(const uint64_t *col, const uint32_t *validity, int64_t n, uint64_t min, uint32_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    bool valid = !validity || ((validity[i >> 5] >> (i & 31)) & 1);
    out[i] = valid ? (uint32_t)(col[i] - min) : 0u;
  }
}

// The blocks that stay resident (8 of 256 threads per SM): each thread folds many rows, and the
// blocks' atomics (two each) stay few.
inline int range_grid(int64_t n) { return blocks_for_sms(n, kThreads * kUnroll, 8); }
inline int offset_grid(int64_t n) { return blocks_for_sms(n, kThreads * 4, tuning::kStreamBlocksPerSm); }
}  // namespace

extern "C" int gj_j_key_range_i64(const int64_t *col, const uint32_t *validity, int64_t n, int64_t *range,
                                  gj_j_stream_t s) {
  if (n <= 0) return 0;
  range_kernel<int64_t><<<range_grid(n), kThreads, 0, (cudaStream_t)s>>>(col, validity, n, INT64_MAX, INT64_MIN, range);
  return launch_status();
}

extern "C" int gj_j_key_range_u64(const uint64_t *col, const uint32_t *validity, int64_t n, uint64_t *range,
                                  gj_j_stream_t s) {
  if (n <= 0) return 0;
  range_kernel<uint64_t><<<range_grid(n), kThreads, 0, (cudaStream_t)s>>>(col, validity, n, UINT64_MAX, 0, range);
  return launch_status();
}

extern "C" int gj_j_key_range_u32(const uint32_t *col, const uint32_t *validity, int64_t n, uint32_t *range,
                                  gj_j_stream_t s) {
  if (n <= 0) return 0;
  range_kernel<uint32_t><<<range_grid(n), kThreads, 0, (cudaStream_t)s>>>(col, validity, n, UINT32_MAX, 0, range);
  return launch_status();
}

extern "C" int gj_j_key_offsets(const uint64_t *col, const uint32_t *validity, int64_t n, uint64_t min, uint32_t *out,
                                gj_j_stream_t s) {
  if (n <= 0) return 0;
  offset_kernel<<<offset_grid(n), kThreads, 0, (cudaStream_t)s>>>(col, validity, n, min, out);
  return launch_status();
}
