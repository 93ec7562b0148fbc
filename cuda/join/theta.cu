// Nested-loop theta joins (seeds 003 and 004): one outer (left) row per thread, tiles of the
// inner (right) rows' leaf values in shared memory, leaves evaluated 32 inner rows at a time into
// 32-bit match masks and combined by a boolean program; count pass, prefix sum (host side),
// write pass with warp-cooperative coalesced stores, and an input-bound aggregate pass.
#include <cstring>

#include "gpujoin/common.cuh"
#include "gpujoin_theta.h"

namespace {
using namespace gj;
constexpr int BS = GJ_T_BLOCK;

// ---------------------------------------------------------------------------------------------
// The interpreter (slow path: MIXED leaves, per-row side expressions, pair filters).

union Val {
  __int128 i;
  double d;
  float f;
  struct {
    const uint8_t *p;
    int64_t n;
  } s;
};

__device__ __forceinline__ int str_cmp(const uint8_t *a, int64_t na, const uint8_t *b, int64_t nb) {
  const int64_t n = na < nb ? na : nb;
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t x = a[k], y = b[k];
    if (x != y) return x < y ? -1 : 1;
  }
  return na < nb ? -1 : (na > nb ? 1 : 0);
}

template <class T>
__device__ __forceinline__ bool cmp_op(int op, T a, T b) {
  switch (op) {
    case GJ_T_EQ: return a == b;
    case GJ_T_NE: return a != b;
    case GJ_T_LT: return a < b;
    case GJ_T_LE: return a <= b;
    case GJ_T_GT: return a > b;
    default: return a >= b;
  }
}

__device__ __forceinline__ __int128 make_i128(uint64_t lo, int64_t hi) {
  return (__int128)(((unsigned __int128)(uint64_t)hi << 64) | (unsigned __int128)lo);
}

__device__ Val load_col(const gj_t_column &c, int64_t row) {
  Val v;
  v.i = 0;
  switch (c.dtype) {
    case GJ_T_I32: v.i = ((const int32_t *)c.data)[row]; break;
    case GJ_T_I64: v.i = ((const int64_t *)c.data)[row]; break;
    case GJ_T_U32: v.i = ((const uint32_t *)c.data)[row]; break;
    case GJ_T_U64: v.i = ((const uint64_t *)c.data)[row]; break;
    case GJ_T_F32: v.f = ((const float *)c.data)[row]; break;
    case GJ_T_F64: v.d = ((const double *)c.data)[row]; break;
    default: {
      const int64_t a = c.offsets[row], b = c.offsets[row + 1];
      v.s.p = (const uint8_t *)c.data + a;
      v.s.n = b - a;
    }
  }
  return v;
}

__device__ Val interpret(const gj_t_interp &ip, int start, int len, int64_t lrow, int64_t rrow) {
  Val st[GJ_T_MAX_STACK];
  int sp = 0;
  for (int pc = start; pc < start + len; ++pc) {
    const gj_t_instr in = ip.code[pc];
    switch (in.op) {
      case GJ_T_OP_COL:
        st[sp++] = in.a == 0 ? load_col(ip.left_cols[in.b], lrow) : load_col(ip.right_cols[in.b], rrow);
        break;
      case GJ_T_OP_LIT: {
        const gj_t_literal L = ip.lits[in.a];
        Val v;
        v.i = 0;
        switch (in.c) {
          case GJ_T_CLASS_INT: v.i = make_i128((uint64_t)L.lo, L.hi); break;
          case GJ_T_CLASS_F32: v.f = __int_as_float((int)(uint32_t)(uint64_t)L.lo); break;
          case GJ_T_CLASS_F64: v.d = __longlong_as_double(L.lo); break;
          default:
            v.s.p = ip.lit_bytes + L.lo;
            v.s.n = L.hi;
        }
        st[sp++] = v;
        break;
      }
      case GJ_T_OP_ADD:
      case GJ_T_OP_SUB: {
        const Val b = st[--sp];
        Val &a = st[sp - 1];
        const bool add = in.op == GJ_T_OP_ADD;
        switch (in.c) {
          case GJ_T_CLASS_INT: a.i = add ? a.i + b.i : a.i - b.i; break;
          case GJ_T_CLASS_F32: a.f = add ? __fadd_rn(a.f, b.f) : __fsub_rn(a.f, b.f); break;
          default: a.d = add ? __dadd_rn(a.d, b.d) : __dsub_rn(a.d, b.d);
        }
        break;
      }
      case GJ_T_OP_CMP: {
        const Val b = st[--sp];
        const Val a = st[sp - 1];
        bool r;
        switch (in.c) {
          case GJ_T_CLASS_INT: r = cmp_op(in.a, a.i, b.i); break;
          case GJ_T_CLASS_F32: r = cmp_op(in.a, a.f, b.f); break;
          case GJ_T_CLASS_F64: r = cmp_op(in.a, a.d, b.d); break;
          default: r = cmp_op(in.a, str_cmp(a.s.p, a.s.n, b.s.p, b.s.n), 0);
        }
        st[sp - 1].i = r ? 1 : 0;
        break;
      }
      case GJ_T_OP_AND: {
        const Val b = st[--sp];
        st[sp - 1].i = (st[sp - 1].i != 0 && b.i != 0) ? 1 : 0;
        break;
      }
      case GJ_T_OP_OR: {
        const Val b = st[--sp];
        st[sp - 1].i = (st[sp - 1].i != 0 || b.i != 0) ? 1 : 0;
        break;
      }
      case GJ_T_OP_NOT: st[sp - 1].i = st[sp - 1].i != 0 ? 0 : 1; break;
      default: st[sp++].i = 1;
    }
  }
  return st[sp - 1];
}

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

// ---------------------------------------------------------------------------------------------
// Leaf masks.

struct StrRef {
  const uint8_t *p;
  int64_t n;
};

// A leaf's outer value in registers: 4- and 8-byte values in `a`, i128 as (a, b) = (lo, hi),
// strings as (pointer, length); LBOOL: the flag in `a`.
struct Outer {
  uint64_t a, b;
};

__device__ __forceinline__ int kind_width(int kind) {
  switch (kind) {
    case GJ_T_I32:
    case GJ_T_U32:
    case GJ_T_F32: return 4;
    case GJ_T_I128:
    case GJ_T_UTF8: return 16;
    default: return 8;
  }
}

template <class T>
__device__ __forceinline__ T outer_as(const Outer &o);
template <>
__device__ __forceinline__ int32_t outer_as<int32_t>(const Outer &o) { return (int32_t)(uint32_t)o.a; }
template <>
__device__ __forceinline__ uint32_t outer_as<uint32_t>(const Outer &o) { return (uint32_t)o.a; }
template <>
__device__ __forceinline__ int64_t outer_as<int64_t>(const Outer &o) { return (int64_t)o.a; }
template <>
__device__ __forceinline__ uint64_t outer_as<uint64_t>(const Outer &o) { return o.a; }
template <>
__device__ __forceinline__ float outer_as<float>(const Outer &o) { return __uint_as_float((uint32_t)o.a); }
template <>
__device__ __forceinline__ double outer_as<double>(const Outer &o) { return __longlong_as_double((long long)o.a); }
template <>
__device__ __forceinline__ __int128 outer_as<__int128>(const Outer &o) { return make_i128(o.a, (int64_t)o.b); }

__device__ __forceinline__ Outer load_outer(const gj_t_leaf &lf, int64_t l) {
  Outer o{0, 0};
  if (lf.type == GJ_T_LEAF_LBOOL) {
    o.a = lf.left_flags[l];
  } else if (lf.type == GJ_T_LEAF_SEP) {
    switch (lf.kind) {
      case GJ_T_I32:
      case GJ_T_U32:
      case GJ_T_F32: o.a = ((const uint32_t *)lf.outer)[l]; break;
      case GJ_T_I128:
        o.a = ((const uint64_t *)lf.outer)[2 * l];
        o.b = ((const uint64_t *)lf.outer)[2 * l + 1];
        break;
      case GJ_T_UTF8: {
        const int64_t s = lf.outer_offsets[l], e = lf.outer_offsets[l + 1];
        o.a = (uint64_t)((const uint8_t *)lf.outer + s);
        o.b = (uint64_t)(e - s);
        break;
      }
      default: o.a = ((const uint64_t *)lf.outer)[l];
    }
  }
  return o;
}

// bit j = (o OP s[j]) for 32 inner values.
template <class T, int OP>
__device__ __forceinline__ uint32_t sep_mask_op(T o, const T *s) {
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const T x = s[j];
    bool b;
    if (OP == GJ_T_EQ) b = o == x;
    else if (OP == GJ_T_NE) b = o != x;
    else if (OP == GJ_T_LT) b = o < x;
    else if (OP == GJ_T_LE) b = o <= x;
    else if (OP == GJ_T_GT) b = o > x;
    else b = o >= x;
    m |= (uint32_t)b << j;
  }
  return m;
}

template <class T>
__device__ __forceinline__ uint32_t sep_mask(int op, const Outer &ov, const unsigned char *tile) {
  const T o = outer_as<T>(ov);
  const T *s = (const T *)tile;
  switch (op) {
    case GJ_T_EQ: return sep_mask_op<T, GJ_T_EQ>(o, s);
    case GJ_T_NE: return sep_mask_op<T, GJ_T_NE>(o, s);
    case GJ_T_LT: return sep_mask_op<T, GJ_T_LT>(o, s);
    case GJ_T_LE: return sep_mask_op<T, GJ_T_LE>(o, s);
    case GJ_T_GT: return sep_mask_op<T, GJ_T_GT>(o, s);
    default: return sep_mask_op<T, GJ_T_GE>(o, s);
  }
}

__device__ __noinline__ uint32_t str_mask(int op, const Outer &ov, const StrRef *s, int valid) {
  uint32_t m = 0;
  for (int j = 0; j < valid; ++j) {
    const int c = str_cmp((const uint8_t *)ov.a, (int64_t)ov.b, s[j].p, s[j].n);
    m |= (uint32_t)cmp_op(op, c, 0) << j;
  }
  return m;
}

__device__ __noinline__ uint32_t mixed_mask(const gj_t_interp &ip, int start, int len, int64_t l, int64_t r0,
                                            int valid) {
  uint32_t m = 0;
  for (int j = 0; j < valid; ++j) m |= (uint32_t)(interpret(ip, start, len, l, r0 + j).i != 0) << j;
  return m;
}

// The mask of leaf `lf` over tile rows w .. w + 31 (global right rows r0 ..), `valid` of them real.
__device__ __forceinline__ uint32_t leaf_mask(const gj_t_nlj &P, const gj_t_leaf &lf, const Outer &ov,
                                              const unsigned char *smem, int w, int64_t r0, int valid, int64_t l,
                                              bool live) {
  switch (lf.type) {
    case GJ_T_LEAF_SEP: {
      const unsigned char *tile = smem + lf.smem_offset + (size_t)w * kind_width(lf.kind);
      switch (lf.kind) {
        case GJ_T_I32: return sep_mask<int32_t>(lf.op, ov, tile);
        case GJ_T_U32: return sep_mask<uint32_t>(lf.op, ov, tile);
        case GJ_T_I64: return sep_mask<int64_t>(lf.op, ov, tile);
        case GJ_T_U64: return sep_mask<uint64_t>(lf.op, ov, tile);
        case GJ_T_F32: return sep_mask<float>(lf.op, ov, tile);
        case GJ_T_F64: return sep_mask<double>(lf.op, ov, tile);
        case GJ_T_I128: return sep_mask<__int128>(lf.op, ov, tile);
        default: return str_mask(lf.op, ov, (const StrRef *)tile, valid);
      }
    }
    case GJ_T_LEAF_LBOOL: return ov.a ? 0xFFFFFFFFu : 0u;
    case GJ_T_LEAF_RBOOL: return lf.right_bits[r0 >> 5];  // r0 is a multiple of 32
    default: return live ? mixed_mask(P.interp, lf.code_start, lf.code_len, l, r0, valid) : 0u;
  }
}

template <int MAXL>
__device__ __forceinline__ uint32_t pick(const uint32_t (&m)[MAXL], int k) {
  uint32_t v = m[0];
#pragma unroll
  for (int i = 1; i < MAXL; ++i)
    if (k == i) v = m[i];
  return v;
}

template <int MAXL>
__device__ __forceinline__ uint32_t combine(const gj_t_nlj &P, const uint32_t (&m)[MAXL]) {
  if (P.combine_mode == GJ_T_COMBINE_ALL) {
    uint32_t r = 0xFFFFFFFFu;
#pragma unroll
    for (int k = 0; k < MAXL; ++k)
      if (k < P.nleaves) r &= m[k];
    return r;
  }
  if (P.combine_mode == GJ_T_COMBINE_ANY) {
    uint32_t r = 0;
#pragma unroll
    for (int k = 0; k < MAXL; ++k)
      if (k < P.nleaves) r |= m[k];
    return r;
  }
  uint32_t st[GJ_T_MAX_COMBINE_STACK];
  int sp = 0;
  for (int pc = 0; pc < P.combine_len; ++pc) {
    const int code = P.combine[pc], op = code >> 8;
    switch (op) {
      case GJ_T_B_LEAF: st[sp++] = pick<MAXL>(m, code & 0xFF); break;
      case GJ_T_B_AND: --sp; st[sp - 1] &= st[sp]; break;
      case GJ_T_B_OR: --sp; st[sp - 1] |= st[sp]; break;
      case GJ_T_B_NOT: st[sp - 1] = ~st[sp - 1]; break;
      case GJ_T_B_TRUE: st[sp++] = 0xFFFFFFFFu; break;
      default: st[sp++] = 0u;
    }
  }
  return st[0];
}

// ---------------------------------------------------------------------------------------------
// Aggregates.

struct Acc {
  __int128 i;
  double f;
  uint64_t count;
  bool has;
};

__device__ __forceinline__ void acc_init(Acc &a) {
  a.i = 0;
  a.f = 0.0;
  a.count = 0;
  a.has = false;
}

__device__ __forceinline__ void push_int(Acc &a, int agg, __int128 x, uint32_t times) {
  if (agg == GJ_T_AGG_SUM) a.i = a.has ? a.i + x * (__int128)times : x * (__int128)times;
  else if (agg == GJ_T_AGG_MIN) a.i = (!a.has || x < a.i) ? x : a.i;
  else a.i = (!a.has || x > a.i) ? x : a.i;
  a.has = true;
}

__device__ __forceinline__ void push_float(Acc &a, int agg, double x, uint32_t times) {
  if (agg == GJ_T_AGG_SUM) {
    const double v = times == 1 ? x : x * (double)times;
    a.f = a.has ? a.f + v : v;
  } else {
    const bool better = agg == GJ_T_AGG_MIN ? x < a.f : x > a.f;
    if (!a.has || (isnan(a.f) && !isnan(x)) || better) a.f = x;
  }
  a.has = true;
}

// a (earlier in canonical order) merged with b (later).
__device__ __forceinline__ void merge(Acc &a, const Acc &b, int agg, bool is_float) {
  a.count += b.count;
  if (agg == GJ_T_AGG_COUNT || !b.has) return;
  if (is_float) push_float(a, agg, b.f, 1);
  else if (agg == GJ_T_AGG_SUM) {
    a.i = a.has ? a.i + b.i : b.i;
    a.has = true;
  } else push_int(a, agg, b.i, 1);
}

__device__ __forceinline__ Acc acc_load(const gj_t_acc &g) {
  Acc a;
  a.i = make_i128(g.ilo, g.ihi);
  a.f = g.f;
  a.count = g.count;
  a.has = g.has != 0;
  return a;
}

__device__ __forceinline__ gj_t_acc acc_store(const Acc &a) {
  gj_t_acc g;
  g.ilo = (uint64_t)a.i;
  g.ihi = (int64_t)(a.i >> 64);
  g.f = a.f;
  g.count = a.count;
  g.has = a.has ? 1u : 0u;
  g.pad = 0;
  return g;
}

// A value of the aggregated column as 8 bytes: signed ints as i64, u32/u64 as u64, floats as f64.
__device__ __forceinline__ uint64_t agg_word(int dtype, const void *col, int64_t row) {
  switch (dtype) {
    case GJ_T_I32: return (uint64_t)(int64_t)((const int32_t *)col)[row];
    case GJ_T_U32: return (uint64_t)((const uint32_t *)col)[row];
    case GJ_T_F32: return (uint64_t)__double_as_longlong((double)((const float *)col)[row]);
    case GJ_T_F64: return (uint64_t)__double_as_longlong(((const double *)col)[row]);
    default: return ((const uint64_t *)col)[row];  // i64, u64
  }
}

__device__ __forceinline__ void push_word(Acc &a, int agg, int dtype, uint64_t w, uint32_t times) {
  if (dtype == GJ_T_F32 || dtype == GJ_T_F64) push_float(a, agg, __longlong_as_double((long long)w), times);
  else if (dtype == GJ_T_U32 || dtype == GJ_T_U64) push_int(a, agg, (__int128)w, times);
  else push_int(a, agg, (__int128)(int64_t)w, times);
}

// ---------------------------------------------------------------------------------------------
// The nested-loop kernel: PASS 0 counts, 1 writes, 2 aggregates.

enum { PASS_COUNT = 0, PASS_WRITE = 1, PASS_AGG = 2 };

struct PassArgs {
  int64_t ob_begin;
  int64_t l_begin, l_end;
  uint32_t *counts;
  uint32_t *right_bits;
  const uint64_t *offsets;
  uint64_t out_base;
  const uint8_t *left_matched;
  int keep_unmatched;
  uint32_t *out_l, *out_r;
  gj_t_acc *partials;
};

// Loads the inner values of rows [t0, t0 + tn) into shared memory (rows up to the next multiple
// of 32 zeroed, so string references past the end are empty).
__device__ __forceinline__ void load_tile(const gj_t_nlj &P, int64_t t0, int tn, unsigned char *smem, bool agg) {
  const int tn32 = (tn + 31) & ~31;
  for (int k = 0; k < P.nleaves; ++k) {
    const gj_t_leaf &lf = P.leaves[k];
    if (lf.type != GJ_T_LEAF_SEP) continue;
    unsigned char *dst = smem + lf.smem_offset;
    switch (kind_width(lf.kind)) {
      case 4:
        for (int e = threadIdx.x; e < tn32; e += BS)
          ((uint32_t *)dst)[e] = e < tn ? ((const uint32_t *)lf.inner)[t0 + e] : 0u;
        break;
      case 8:
        for (int e = threadIdx.x; e < tn32; e += BS)
          ((uint64_t *)dst)[e] = e < tn ? ((const uint64_t *)lf.inner)[t0 + e] : 0ull;
        break;
      default:
        if (lf.kind == GJ_T_UTF8) {
          for (int e = threadIdx.x; e < tn32; e += BS) {
            StrRef s{nullptr, 0};
            if (e < tn) {
              const int64_t a = lf.inner_offsets[t0 + e], b = lf.inner_offsets[t0 + e + 1];
              s.p = (const uint8_t *)lf.inner + a;
              s.n = b - a;
            }
            ((StrRef *)dst)[e] = s;
          }
        } else {
          for (int e = threadIdx.x; e < tn32; e += BS) {
            ulonglong2 v = make_ulonglong2(0, 0);
            if (e < tn) v = ((const ulonglong2 *)lf.inner)[t0 + e];
            ((ulonglong2 *)dst)[e] = v;
          }
        }
    }
  }
  if (agg) {
    uint64_t *dst = (uint64_t *)(smem + P.agg_smem_offset);
    for (int e = threadIdx.x; e < tn; e += BS) dst[e] = agg_word(P.agg_dtype, P.agg_col, t0 + e);
  }
}

template <int PASS, int MAXL>
__global__ void __launch_bounds__(BS) nlj_kernel(const gj_t_nlj P, const PassArgs A) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = P.chunks;
  const int64_t item = blockIdx.x;
  const int64_t ob = A.ob_begin + item / C;
  const int c = (int)(item % C);
  const int64_t l = ob * BS + threadIdx.x;
  const bool live = l >= A.l_begin && l < A.l_end;
  const int lane = threadIdx.x & 31;
  const int64_t r_begin = (int64_t)c * P.chunk_rows;
  const int64_t r_end = r_begin + P.chunk_rows < P.n_right ? r_begin + P.chunk_rows : P.n_right;

  Outer ov[MAXL];
#pragma unroll
  for (int k = 0; k < MAXL; ++k) {
    ov[k] = Outer{0, 0};
    if (k < P.nleaves && live) ov[k] = load_outer(P.leaves[k], l);
  }

  // Pass state.
  uint32_t cnt = 0;
  uint64_t pos = 0;
  Acc acc;
  acc_init(acc);
  const bool agg_inner = PASS == PASS_AGG && P.agg != GJ_T_AGG_COUNT && P.agg_side == 1;
  const bool sum_small_int =
      agg_inner && P.agg == GJ_T_AGG_SUM && (P.agg_dtype == GJ_T_I32 || P.agg_dtype == GJ_T_U32);
  uint64_t agg_outer = 0;
  if (PASS == PASS_AGG && P.agg != GJ_T_AGG_COUNT && P.agg_side == 0 && live)
    agg_outer = agg_word(P.agg_dtype, P.agg_col, l);
  if (PASS == PASS_WRITE && live) {
    pos = A.offsets[l * C + c] - A.out_base;
    if (A.keep_unmatched && c == 0 && !A.left_matched[l]) {
      A.out_l[pos] = (uint32_t)l;
      A.out_r[pos] = kNone;
    }
  }

  for (int64_t t0 = r_begin; t0 < r_end; t0 += P.tile_rows) {
    const int tn = (int)(r_end - t0 < P.tile_rows ? r_end - t0 : P.tile_rows);
    __syncthreads();
    load_tile(P, t0, tn, smem, agg_inner);
    __syncthreads();
    for (int w = 0; w < tn; w += 32) {
      const int valid = tn - w >= 32 ? 32 : tn - w;
      const uint32_t valid_mask = valid == 32 ? 0xFFFFFFFFu : ((1u << valid) - 1u);
      uint32_t m[MAXL];
#pragma unroll
      for (int k = 0; k < MAXL; ++k) {
        m[k] = 0;
        if (k < P.nleaves) m[k] = leaf_mask(P, P.leaves[k], ov[k], smem, w, t0 + w, valid, l, live);
      }
      uint32_t M = combine<MAXL>(P, m) & valid_mask;
      if (!live) M = 0;
      if (PASS == PASS_COUNT) {
        cnt += __popc(M);
        if (A.right_bits) {
          const uint32_t any = __reduce_or_sync(0xFFFFFFFFu, M);
          if (lane == 0 && any) atomicOr(&A.right_bits[(t0 + w) >> 5], any);
        }
      } else if (PASS == PASS_WRITE) {
        // Warp-cooperative write: each lane's up to 32 matches go out as one contiguous run,
        // stored by the whole warp (coalesced), lane by lane.
        uint32_t act = __ballot_sync(0xFFFFFFFFu, M != 0);
        while (act) {
          const int src = __ffs(act) - 1;
          act &= act - 1;
          const uint32_t mm = __shfl_sync(0xFFFFFFFFu, M, src);
          const uint64_t p = __shfl_sync(0xFFFFFFFFu, pos, src);
          const int64_t ll = __shfl_sync(0xFFFFFFFFu, l, src);
          if ((mm >> lane) & 1u) {
            const uint64_t at = p + __popc(mm & ((1u << lane) - 1u));
            A.out_l[at] = (uint32_t)ll;
            A.out_r[at] = (uint32_t)(t0 + w + lane);
          }
        }
        pos += __popc(M);
      } else {
        if (P.agg == GJ_T_AGG_COUNT) {
          acc.count += __popc(M);
        } else if (agg_inner) {
          const uint64_t *vals = (const uint64_t *)(smem + P.agg_smem_offset) + w;
          acc.count += __popc(M);
          if (sum_small_int) {
            // 32-bit integers: at most 32 of them sum exactly in 64 bits, then once into i128.
            if (M) {
              int64_t part = 0;
              while (M) {
                const int j = __ffs(M) - 1;
                M &= M - 1;
                part += (int64_t)vals[j];
              }
              acc.i = acc.has ? acc.i + (__int128)part : (__int128)part;
              acc.has = true;
            }
          }
          while (M) {
            const int j = __ffs(M) - 1;
            M &= M - 1;
            push_word(acc, P.agg, P.agg_dtype, vals[j], 1);
          }
        } else if (M) {
          const uint32_t n = __popc(M);
          acc.count += n;
          push_word(acc, P.agg, P.agg_dtype, agg_outer, n);
        }
      }
    }
  }
  if (!live) return;
  if (PASS == PASS_COUNT) A.counts[l * C + c] = cnt;
  if (PASS == PASS_AGG) A.partials[l * C + c] = acc_store(acc);
}

template <int PASS>
int launch_nlj(const gj_t_nlj &P, int64_t blocks, const PassArgs &A, cudaStream_t s) {
  if (blocks <= 0) return 0;
  if (blocks > 0x7FFFFFFF) return (int)cudaErrorInvalidConfiguration;
  if (P.nleaves <= 2)
    nlj_kernel<PASS, 2><<<(unsigned)blocks, BS, P.smem_bytes, s>>>(P, A);
  else
    nlj_kernel<PASS, GJ_T_MAX_LEAVES><<<(unsigned)blocks, BS, P.smem_bytes, s>>>(P, A);
  return launch_status();
}

PassArgs no_args() {
  PassArgs a;
  memset(&a, 0, sizeof a);
  return a;
}

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
  eval_rows_kernel<<<blocks_for(n, 256, 132 * 16), 256, 0, (cudaStream_t)s>>>(*ip, start, len, side, n, out_kind,
                                                                               out);
  return launch_status();
}

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
  fixup_kernel<<<blocks_for(n, 256, 132 * 16), 256, 0, (cudaStream_t)s>>>(counts, n, chunks, keep, matched);
  return launch_status();
}

extern "C" int gj_t_finish_scan(uint64_t *off, const uint32_t *counts, int64_t n, gj_t_stream_t s) {
  if (n <= 0) return 0;
  finish_scan_kernel<<<1, 1, 0, (cudaStream_t)s>>>(off, counts, n);
  return launch_status();
}

extern "C" int gj_t_row_offsets(const uint64_t *off, int64_t n, int32_t chunks, uint64_t *out, gj_t_stream_t s) {
  row_offsets_kernel<<<blocks_for(n + 1, 256, 132 * 16), 256, 0, (cudaStream_t)s>>>(off, n, chunks, out);
  return launch_status();
}

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
  agg_rows_kernel<<<blocks_for(n, 256, 132 * 16), 256, 0, (cudaStream_t)s>>>(parts, n, chunks, agg, is_float != 0,
                                                                             out);
  return launch_status();
}

extern "C" int gj_t_agg_reduce(const gj_t_acc *in, int64_t n, int32_t agg, int32_t is_float, int32_t blocks,
                               gj_t_acc *out, gj_t_stream_t s) {
  if (blocks < 1 || blocks > 1024) return (int)cudaErrorInvalidValue;
  agg_reduce_kernel<<<blocks, BS, 0, (cudaStream_t)s>>>(in, n, agg, is_float != 0, out);
  return launch_status();
}

extern "C" int gj_t_filter_pairs(const gj_t_interp *ip, int32_t start, int32_t len, const uint32_t *a,
                                 const uint32_t *b, int64_t n, uint8_t *keep, gj_t_stream_t s) {
  if (n <= 0) return 0;
  filter_pairs_kernel<<<blocks_for(n, 256, 132 * 16), 256, 0, (cudaStream_t)s>>>(*ip, start, len, a, b, n, keep);
  return launch_status();
}

extern "C" int gj_t_bits_to_flags(const uint32_t *bits, int64_t n, uint8_t *flags, gj_t_stream_t s) {
  if (n <= 0) return 0;
  bits_to_flags_kernel<<<blocks_for(n, 256, 132 * 16), 256, 0, (cudaStream_t)s>>>(bits, n, flags);
  return launch_status();
}
