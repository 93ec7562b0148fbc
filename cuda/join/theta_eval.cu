// Nested-loop theta joins: the interpreter over rows (side expressions) and pairs (filters) (see theta.cuh).
#include "theta.cuh"

namespace {
__global__ void eval_rows_kernel(const gj_t_interp ip, int start, int len, int side, int64_t n, int out_kind,
                                 void *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  if (out_kind == GJ_T_BITS) {
    // Whole warps over 32-row words.
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    for (int64_t base = warp * 32; base < n; base += stride) {
      const int64_t i = base + lane;
      bool b = false;
      if (i < n) b = interpret(ip, start, len, side == 0 ? i : 0, side == 1 ? i : 0).i != 0;
      const uint32_t m = __ballot_sync(0xFFFFFFFFu, b);
      if (lane == 0) ((uint32_t *)out)[base >> 5] = m;
    }
    return;
  }
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const Val v = interpret(ip, start, len, side == 0 ? i : 0, side == 1 ? i : 0);
    switch (out_kind) {
      case GJ_T_I32: ((int32_t *)out)[i] = (int32_t)v.i; break;
      case GJ_T_U32: ((uint32_t *)out)[i] = (uint32_t)v.i; break;
      case GJ_T_I64: ((int64_t *)out)[i] = (int64_t)v.i; break;
      case GJ_T_U64: ((uint64_t *)out)[i] = (uint64_t)v.i; break;
      case GJ_T_I128: ((__int128 *)out)[i] = v.i; break;
      case GJ_T_F32: ((float *)out)[i] = v.f; break;
      case GJ_T_F64: ((double *)out)[i] = v.d; break;
      default: ((uint8_t *)out)[i] = v.i != 0 ? 1 : 0;
    }
  }
}

__global__ void filter_pairs_kernel(const gj_t_interp ip, int start, int len, const uint32_t *a, const uint32_t *b,
                                    int64_t n, uint8_t *keep) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    keep[i] = interpret(ip, start, len, a[i], b[i]).i != 0 ? 1 : 0;
}

__global__ void bits_to_flags_kernel(const uint32_t *bits, int64_t n, uint8_t *flags) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    flags[i] = (bits[i >> 5] >> (i & 31)) & 1u;
}
}  // namespace

extern "C" int gj_t_eval_rows(const gj_t_interp *ip, int32_t start, int32_t len, int32_t side, int64_t n,
                              int32_t out_kind, void *out, gj_t_stream_t s) {
  if (n <= 0) return 0;
  eval_rows_kernel<<<blocks_for_sms(n, 256, tuning::kTileBlocksPerSm), 256, 0, (cudaStream_t)s>>>(*ip, start, len, side, n, out_kind,
                                                                               out);
  return launch_status();
}

extern "C" int gj_t_filter_pairs(const gj_t_interp *ip, int32_t start, int32_t len, const uint32_t *a,
                                 const uint32_t *b, int64_t n, uint8_t *keep, gj_t_stream_t s) {
  if (n <= 0) return 0;
  filter_pairs_kernel<<<blocks_for_sms(n, 256, tuning::kTileBlocksPerSm), 256, 0, (cudaStream_t)s>>>(*ip, start, len, a, b, n, keep);
  return launch_status();
}

extern "C" int gj_t_bits_to_flags(const uint32_t *bits, int64_t n, uint8_t *flags, gj_t_stream_t s) {
  if (n <= 0) return 0;
  bits_to_flags_kernel<<<blocks_for_sms(n, 256, tuning::kTileBlocksPerSm), 256, 0, (cudaStream_t)s>>>(bits, n, flags);
  return launch_status();
}
