// Merge path (Green, McColl, Bader; ModernGPU): splitting the merge of sorted A and B into
// equal-sized tiles by binary search along cross diagonals.
//
// Tie rule: with `a_first_on_ties`, A[i] precedes B[j] when A[i] <= B[j] (A's equal keys come
// first: counting B items consumed before A[i] gives lower_bound(A[i] in B)); otherwise A[i]
// precedes B[j] only when A[i] < B[j] (upper_bound).
#pragma once
#include "common.cuh"

namespace gj {

// Returns how many A items are among the first `diag` items of the merge.
template <class AIt, class BIt, class Less>
__device__ __forceinline__ int64_t merge_path(AIt a, int64_t a_len, BIt b, int64_t b_len, int64_t diag,
                                              bool a_first_on_ties, Less less_fn) {
  int64_t lo = diag > b_len ? diag - b_len : 0;
  int64_t hi = diag < a_len ? diag : a_len;
  while (lo < hi) {
    int64_t mid = (lo + hi) >> 1;
    auto av = a[mid];
    auto bv = b[diag - 1 - mid];
    // Is A[mid] among the first `diag`? Yes when it precedes B[diag-1-mid].
    bool a_goes_first = a_first_on_ties ? !less_fn(bv, av) : less_fn(av, bv);
    if (a_goes_first) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// partitions[p] = A items before diagonal min(p * nv, a_len + b_len), for p in [0, num_parts].
template <class AIt, class BIt, class Less>
__global__ void merge_path_partition_kernel(AIt a, int64_t a_len, BIt b, int64_t b_len, int64_t nv,
                                            bool a_first_on_ties, Less less_fn, int64_t *partitions,
                                            int64_t num_parts) {
  int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (p > num_parts) return;
  int64_t diag = p * nv;
  if (diag > a_len + b_len) diag = a_len + b_len;
  partitions[p] = merge_path(a, a_len, b, b_len, diag, a_first_on_ties, less_fn);
}

struct CountingIt {
  int64_t base;
  __device__ __forceinline__ int64_t operator[](int64_t i) const { return base + i; }
};

struct LessU64 {
  __device__ __forceinline__ bool operator()(uint64_t a, uint64_t b) const { return a < b; }
  __device__ __forceinline__ bool operator()(int64_t a, uint64_t b) const { return (uint64_t)a < b; }
  __device__ __forceinline__ bool operator()(uint64_t a, int64_t b) const { return a < (uint64_t)b; }
};

template <class T>
struct OrderedLess {
  __device__ __forceinline__ bool operator()(T a, T b) const { return less(a, b); }
};

}  // namespace gj
