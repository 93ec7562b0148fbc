// Nested-loop theta joins: the count pass, its fix-ups and the offsets of its rows (see theta.cuh).
#include "theta_nlj.cuh"

namespace {
__global__ void fixup_kernel(uint32_t *counts, int64_t n, int C, int keep, uint8_t *matched) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < n; l += stride) {
    bool any = false;
    for (int c = 0; c < C; ++c) any |= counts[l * C + c] != 0;
    matched[l] = any ? 1 : 0;
    if (keep && !any) counts[l * C] = 1;
  }
}

__global__ void finish_scan_kernel(uint64_t *off, const uint32_t *counts, int64_t n) {
  off[n] = off[n - 1] + counts[n - 1];
}

__global__ void row_offsets_kernel(const uint64_t *off, int64_t n, int C, uint64_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l <= n; l += stride) out[l] = off[l * C];
}
}  // namespace

extern "C" int gj_t_nlj_count(const gj_t_nlj *p, int64_t ob_begin, int64_t ob_end, uint32_t *counts,
                              uint32_t *right_bits, gj_t_stream_t s) {
  PassArgs a = no_args();
  a.ob_begin = ob_begin;
  a.l_begin = 0;
  a.l_end = p->n_left;
  a.counts = counts;
  a.right_bits = right_bits;
  return launch_nlj<PASS_COUNT>(*p, (ob_end - ob_begin) * p->chunks, a, (cudaStream_t)s);
}

extern "C" int gj_t_nlj_fixup(uint32_t *counts, int64_t n, int32_t chunks, int32_t keep, uint8_t *matched,
                              gj_t_stream_t s) {
  if (n <= 0) return 0;
  fixup_kernel<<<blocks_for_sms(n, 256, tuning::kTileBlocksPerSm), 256, 0, (cudaStream_t)s>>>(counts, n, chunks, keep, matched);
  return launch_status();
}

extern "C" int gj_t_finish_scan(uint64_t *off, const uint32_t *counts, int64_t n, gj_t_stream_t s) {
  if (n <= 0) return 0;
  finish_scan_kernel<<<1, 1, 0, (cudaStream_t)s>>>(off, counts, n);
  return launch_status();
}

extern "C" int gj_t_row_offsets(const uint64_t *off, int64_t n, int32_t chunks, uint64_t *out, gj_t_stream_t s) {
  row_offsets_kernel<<<blocks_for_sms(n + 1, 256, tuning::kTileBlocksPerSm), 256, 0, (cudaStream_t)s>>>(off, n, chunks, out);
  return launch_status();
}

