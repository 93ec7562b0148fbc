// Equi-join aggregates without pairs (crates/join/src/plan/aggregate.rs): the match counts of
// the sorted rows scattered back to row order, then COUNT/SUM/MIN/MAX of one column with each
// row weighted by how many output rows it is in.
//
// Example: a left join, left values [5, 7, NULL] with match counts [2, 0, 1]: multiplicities
// [2, 1 (unmatched, kept), 1]; SUM = 5 * 2 + 7 * 1 = 17 (the NULL skipped), COUNT = 3, MIN 5,
// MAX 7.
#include <math.h>

#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_join.h"
#include "agg_acc.cuh"

namespace {
using namespace gj;

constexpr int kThreads = 256;

using agg::Acc;
using agg::acc_init;
using agg::push_int;
static_assert(GJ_J_AGG_COUNT == agg::kCount && GJ_J_AGG_SUM == agg::kSum && GJ_J_AGG_MIN == agg::kMin &&
                  GJ_J_AGG_MAX == agg::kMax,
              "one set of aggregate codes");

// Float MIN/MAX: NaN once any value is NaN.
__device__ __forceinline__ void push_float(Acc &a, int k, double x, uint32_t m) { agg::push_float<agg::Nan::Poisons>(a, k, x, m); }
__device__ __forceinline__ void merge(Acc &a, const Acc &b, int k, bool is_float) { agg::merge<agg::Nan::Poisons>(a, b, k, is_float); }
__device__ __forceinline__ gj_j_agg acc_store(const Acc &a) { return agg::store<gj_j_agg>(a); }
__device__ __forceinline__ Acc acc_load(const gj_j_agg &g) { return agg::load(g); }

__host__ __device__ __forceinline__ bool is_float_type(int type) { return type == GJ_J_AGG_F32 || type == GJ_J_AGG_F64; }

// Row i's value into the accumulator, m times.
__device__ __forceinline__ void push_row(Acc &a, int agg, int type, const void *values, int64_t i, uint32_t m) {
  a.count += m;
  if (agg == GJ_J_AGG_COUNT) return;
  switch (type) {
    case GJ_J_AGG_I32: push_int(a, agg, (__int128)((const int32_t *)values)[i], m); break;
    case GJ_J_AGG_U32: push_int(a, agg, (__int128)((const uint32_t *)values)[i], m); break;
    case GJ_J_AGG_I64: push_int(a, agg, (__int128)((const int64_t *)values)[i], m); break;
    case GJ_J_AGG_U64: push_int(a, agg, (__int128)((const uint64_t *)values)[i], m); break;
    case GJ_J_AGG_F32: push_float(a, agg, (double)((const float *)values)[i], m); break;
    default: push_float(a, agg, ((const double *)values)[i], m); break;
  }
}

// The block's accumulators merged pairwise in shared memory (a tree over thread order); thread
// 0 writes the result.
__device__ __forceinline__ void block_merge(Acc a, int agg, bool is_float, gj_j_agg *out) {
  __shared__ gj_j_agg sh[kThreads];
  sh[threadIdx.x] = acc_store(a);
  __syncthreads();
  for (int s = 1; s < kThreads; s <<= 1) {
    if ((threadIdx.x % (2 * s)) == 0) {
      Acc x = acc_load(sh[threadIdx.x]);
      merge(x, acc_load(sh[threadIdx.x + s]), agg, is_float);
      sh[threadIdx.x] = acc_store(x);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = sh[0];
}

__global__ void scatter_counts_kernel(const uint32_t *lb, const uint32_t *ub, const uint32_t *rows, int64_t n,
                                      uint32_t *counts) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) counts[rows[i]] = ub[i] - lb[i];
}

// One partial per block: its threads fold their grid-stride rows, the block merges them.
__global__ void __launch_bounds__(kThreads) partials_kernel(const void *values, int type, const uint32_t *validity,
                                                            const uint32_t *counts, int64_t n, int matched,
                                                            int unmatched, int agg, gj_j_agg *partials) {
  Acc a;
  acc_init(a);
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (validity && !((validity[i >> 5] >> (i & 31)) & 1)) continue;
    const uint32_t c = counts ? counts[i] : 0u;
    const uint32_t m = c > 0 ? (matched == 2 ? c : (uint32_t)matched) : (uint32_t)unmatched;
    if (m == 0) continue;
    push_row(a, agg, type, values, i, m);
  }
  block_merge(a, agg, is_float_type(type), &partials[blockIdx.x]);
}

// out[0] = the n partials merged (one block; n may be 0).
__global__ void __launch_bounds__(kThreads) merge_partials_kernel(const gj_j_agg *partials, int64_t n, int agg,
                                                                  bool is_float, gj_j_agg *out) {
  Acc a;
  acc_init(a);
  // Each thread merges a contiguous range in order, the block the ranges in thread order.
  const int64_t per = (n + kThreads - 1) / kThreads;
  int64_t b = (int64_t)threadIdx.x * per, e = b + per;
  if (e > n) e = n;
  for (int64_t i = b; i < e; ++i) merge(a, acc_load(partials[i]), agg, is_float);
  block_merge(a, agg, is_float, out);
}
}  // namespace

extern "C" int gj_j_agg_scatter_counts(const uint32_t *lb, const uint32_t *ub, const uint32_t *rows, int64_t n,
                                       uint32_t *counts, gj_j_stream_t s) {
  if (n <= 0) return 0;
  scatter_counts_kernel<<<blocks_for_sms(n, kThreads * 4, tuning::kStreamBlocksPerSm), kThreads, 0, (cudaStream_t)s>>>(
      lb, ub, rows, n, counts);
  return launch_status();
}

extern "C" int gj_j_agg_column(const void *values, int32_t type, const uint32_t *validity, const uint32_t *counts,
                               int64_t n, int32_t matched, int32_t unmatched, int32_t agg, gj_j_agg *partials,
                               gj_j_agg *out, gj_j_stream_t s) {
  if (type < GJ_J_AGG_I32 || type > GJ_J_AGG_F64 || agg < GJ_J_AGG_COUNT || agg > GJ_J_AGG_MAX ||
      matched < 0 || matched > 2 || unmatched < 0 || unmatched > 1 || n < 0 || (values == nullptr && agg != GJ_J_AGG_COUNT && n > 0))
    return (int)cudaErrorInvalidValue;
  const bool is_float = is_float_type(type);
  int blocks = 0;
  if (n > 0) {
    blocks = blocks_for_sms(n, kThreads * 4, tuning::kStreamBlocksPerSm);
    if (blocks > GJ_J_AGG_MAX_BLOCKS) blocks = GJ_J_AGG_MAX_BLOCKS;
    partials_kernel<<<blocks, kThreads, 0, (cudaStream_t)s>>>(values, type, validity, counts, n, matched, unmatched, agg,
                                                             partials);
    const int rc = launch_status();
    if (rc != 0) return rc;
  }
  merge_partials_kernel<<<1, kThreads, 0, (cudaStream_t)s>>>(partials, blocks, agg, is_float, out);
  return launch_status();
}
