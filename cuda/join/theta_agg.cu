// Nested-loop theta joins: the aggregate pass and the merges of its partials (see theta.cuh).
#include "theta_nlj.cuh"

namespace {
__global__ void agg_rows_kernel(const gj_t_acc *parts, int64_t n, int C, int agg, bool is_float, gj_t_acc *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < n; l += stride) {
    Acc a = acc_load(parts[l * C]);
    for (int c = 1; c < C; ++c) merge(a, acc_load(parts[l * C + c]), agg, is_float);
    out[l] = acc_store(a);
  }
}

// Each thread merges a contiguous range in order; the block then merges neighbours pairwise in
// order (a tree over contiguous ranges), so the result is the in-order merge.
__global__ void __launch_bounds__(BS) agg_reduce_kernel(const gj_t_acc *in, int64_t n, int agg, bool is_float,
                                                        gj_t_acc *out) {
  __shared__ gj_t_acc sh[BS];
  const int64_t threads = (int64_t)gridDim.x * BS;
  const int64_t per = (n + threads - 1) / threads;
  const int64_t g = (int64_t)blockIdx.x * BS + threadIdx.x;
  int64_t b = g * per, e = b + per;
  if (e > n) e = n;
  Acc a;
  acc_init(a);
  for (int64_t i = b; i < e; ++i) merge(a, acc_load(in[i]), agg, is_float);
  sh[threadIdx.x] = acc_store(a);
  __syncthreads();
  for (int s = 1; s < BS; s <<= 1) {
    if ((threadIdx.x % (2 * s)) == 0) {
      Acc x = acc_load(sh[threadIdx.x]);
      merge(x, acc_load(sh[threadIdx.x + s]), agg, is_float);
      sh[threadIdx.x] = acc_store(x);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}
}  // namespace

extern "C" int gj_t_nlj_agg(const gj_t_nlj *p, gj_t_acc *partials, gj_t_stream_t s) {
  PassArgs a = no_args();
  a.l_begin = 0;
  a.l_end = p->n_left;
  a.partials = partials;
  const int64_t obs = (p->n_left + BS - 1) / BS;
  return launch_nlj<PASS_AGG>(*p, obs * p->chunks, a, (cudaStream_t)s);
}

extern "C" int gj_t_agg_rows(const gj_t_acc *parts, int64_t n, int32_t chunks, int32_t agg, int32_t is_float,
                             gj_t_acc *out, gj_t_stream_t s) {
  if (n <= 0) return 0;
  agg_rows_kernel<<<blocks_for_sms(n, 256, tuning::kTileBlocksPerSm), 256, 0, (cudaStream_t)s>>>(parts, n, chunks, agg, is_float != 0,
                                                                             out);
  return launch_status();
}

extern "C" int gj_t_agg_reduce(const gj_t_acc *in, int64_t n, int32_t agg, int32_t is_float, int32_t blocks,
                               gj_t_acc *out, gj_t_stream_t s) {
  if (blocks < 1 || blocks > 1024) return (int)cudaErrorInvalidValue;
  agg_reduce_kernel<<<blocks, BS, 0, (cudaStream_t)s>>>(in, n, agg, is_float != 0, out);
  return launch_status();
}
