// Nested-loop theta joins: the write pass (see theta.cuh).
#include "theta_nlj.cuh"

extern "C" int gj_t_nlj_write(const gj_t_nlj *p, int64_t l_begin, int64_t l_end, const uint64_t *offsets,
                              uint64_t out_base, const uint8_t *left_matched, int32_t keep_unmatched,
                              uint32_t *out_l, uint32_t *out_r, gj_t_stream_t s) {
  if (l_end <= l_begin) return 0;
  PassArgs a = no_args();
  a.ob_begin = l_begin / BS;
  a.l_begin = l_begin;
  a.l_end = l_end;
  a.offsets = offsets;
  a.out_base = out_base;
  a.left_matched = left_matched;
  a.keep_unmatched = keep_unmatched;
  a.out_l = out_l;
  a.out_r = out_r;
  const int64_t ob_end = (l_end + BS - 1) / BS;
  return launch_nlj<PASS_WRITE>(*p, (ob_end - a.ob_begin) * p->chunks, a, (cudaStream_t)s);
}
