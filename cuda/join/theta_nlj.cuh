// Nested-loop theta joins: leaf masks, aggregates, the general and fast nested-loop kernels and
// their launch, shared by the count, write and aggregate passes (see theta.cuh).
#pragma once
#include "theta.cuh"
#include "agg_acc.cuh"

namespace {
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

// The accumulator (agg_acc.cuh); float MIN/MAX are NaN only when every value is.
using gj::agg::Acc;
using gj::agg::acc_init;
using gj::agg::push_int;
static_assert(GJ_T_AGG_COUNT == gj::agg::kCount && GJ_T_AGG_SUM == gj::agg::kSum && GJ_T_AGG_MIN == gj::agg::kMin &&
                  GJ_T_AGG_MAX == gj::agg::kMax,
              "one set of aggregate codes");

__device__ __forceinline__ void push_float(Acc &a, int k, double x, uint32_t m) { gj::agg::push_float<gj::agg::Nan::OnlyIfAll>(a, k, x, m); }
__device__ __forceinline__ void merge(Acc &a, const Acc &b, int k, bool is_float) { gj::agg::merge<gj::agg::Nan::OnlyIfAll>(a, b, k, is_float); }
__device__ __forceinline__ Acc acc_load(const gj_t_acc &g) { return gj::agg::load(g); }
__device__ __forceinline__ gj_t_acc acc_store(const Acc &a) { return gj::agg::store<gj_t_acc>(a); }

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

// ---------------------------------------------------------------------------------------------
// The fast path: one or two SEP leaves over 32-bit integer keys, combined by AND or OR, with no
// interpreter in the inner loop. Keys are mapped on load so one signed compare of four kinds
// (EQ, NE, LT, LE) covers every operator and type: u32 keys get the sign bit flipped (order
// preserving), GT/GE become LT/LE of the complemented keys (~x = -1 - x reverses the order).
// The pair predicate then compiles to one ISETP per leaf (the second folding in the first's
// predicate) and one predicated instruction that accumulates it.

enum { F_EQ = 0, F_NE = 1, F_LT = 2, F_LE = 3 };
// What a fast kernel computes: count pass, write pass, aggregate pass from the match count
// alone (COUNT, or an aggregate of a left column), aggregate pass summing a right 32-bit column.
enum { FM_COUNT = 0, FM_WRITE = 1, FM_AGG_COUNT = 2, FM_AGG_SUM = 3 };

struct FastParams {
  int64_t n_right, chunk_rows;
  int32_t chunks, tile_rows;
  const uint32_t *outer[2];
  const uint32_t *inner[2];
  uint32_t key_xor[2];
  int32_t key_smem[2];
  int32_t agg_smem;
  int32_t agg_signed;  // FM_AGG_SUM: the right column is i32 (else u32)
  const void *agg_col;
  int32_t agg, agg_side, agg_dtype;
};

// The pair predicate and what accumulates it, as inline PTX: left to itself the compiler adds
// speculatively and selects (SEL + IADD3 for mask bits, DADD + 2 FSEL or IADD3 + IADD3.X + SEL
// for 64-bit sums; ptxas also if-converts predicated 64-bit adds that way). Here a mask bit is
// one predicated add (@P VIADD) and a SUM two predicated 32-bit adds (see FM_AGG_SUM): one
// ISETP per leaf plus one or two instructions per pair.
template <int NL, int OP0, int OP1, bool ANY>
struct FastPair;

// PM / PS: the predicate p from the operands (o0, s0, o1, s1) at %1..%4 / %2..%5.
#define GJ_FAST_PAIR(NL_, OP0_, OP1_, ANY_, PM, PS)                                                       \
  template <>                                                                                         \
  struct FastPair<NL_, OP0_, OP1_, ANY_> {                                                            \
    /* Bit BIT of m. */                                                                               \
    template <uint32_t BIT>                                                                           \
    static __device__ __forceinline__ void set(uint32_t &m, int32_t o0, int32_t s0, int32_t o1, int32_t s1) { \
      asm("{\n\t.reg .pred p;\n\t" PM "@p or.b32 %0, %0, %5;\n\t}"                                    \
          : "+r"(m)                                                                                   \
          : "r"(o0), "r"(s0), "r"(o1), "r"(s1), "n"(BIT));                                            \
    }                                                                                                 \
    /* lo += vlo, hi += vhi. */                                                                       \
    static __device__ __forceinline__ void add(uint32_t &lo, int32_t &hi, int32_t o0, int32_t s0, int32_t o1, \
                                               int32_t s1, int2 v) {                                  \
      asm("{\n\t.reg .pred p;\n\t" PS "@p add.u32 %0, %0, %6;\n\t@p add.s32 %1, %1, %7;\n\t}"         \
          : "+r"(lo), "+r"(hi)                                                                        \
          : "r"(o0), "r"(s0), "r"(o1), "r"(s1), "r"(v.x), "r"(v.y));                                  \
    }                                                                                                 \
  };
#define GJ_P1(A, X, Y) "setp." A ".s32 p, " X ", " Y ";\n\t"
#define GJ_P2(A, B, C, X, Y, Z, W) GJ_P1(A, X, Y) "setp." B "." C ".s32 p, " Z ", " W ", p;\n\t"
#define GJ_FAST_PAIR1(OP_, A) GJ_FAST_PAIR(1, OP_, OP_, false, GJ_P1(A, "%1", "%2"), GJ_P1(A, "%2", "%3"))
#define GJ_FAST_PAIR2C(OP0_, A, OP1_, B, ANY_, C) \
  GJ_FAST_PAIR(2, OP0_, OP1_, ANY_, GJ_P2(A, B, C, "%1", "%2", "%3", "%4"), GJ_P2(A, B, C, "%2", "%3", "%4", "%5"))
#define GJ_FAST_PAIR2(OP0_, A, OP1_, B)          \
  GJ_FAST_PAIR2C(OP0_, A, OP1_, B, false, "and") \
  GJ_FAST_PAIR2C(OP0_, A, OP1_, B, true, "or")
GJ_FAST_PAIR1(F_EQ, "eq")
GJ_FAST_PAIR1(F_NE, "ne")
GJ_FAST_PAIR1(F_LT, "lt")
GJ_FAST_PAIR1(F_LE, "le")
GJ_FAST_PAIR2(F_EQ, "eq", F_EQ, "eq")
GJ_FAST_PAIR2(F_EQ, "eq", F_NE, "ne")
GJ_FAST_PAIR2(F_EQ, "eq", F_LT, "lt")
GJ_FAST_PAIR2(F_EQ, "eq", F_LE, "le")
GJ_FAST_PAIR2(F_NE, "ne", F_NE, "ne")
GJ_FAST_PAIR2(F_NE, "ne", F_LT, "lt")
GJ_FAST_PAIR2(F_NE, "ne", F_LE, "le")
GJ_FAST_PAIR2(F_LT, "lt", F_LT, "lt")
GJ_FAST_PAIR2(F_LT, "lt", F_LE, "le")
GJ_FAST_PAIR2(F_LE, "le", F_LE, "le")
#undef GJ_FAST_PAIR2
#undef GJ_FAST_PAIR2C
#undef GJ_FAST_PAIR1
#undef GJ_P2
#undef GJ_P1
#undef GJ_FAST_PAIR

// FM_AGG_SUM: a right value x (i32 or u32, as a 64-bit integer X) is stored as the pair
// lo = (X & 0xFFFF) + 2^23 (the low 16 bits, tagged with one count unit) and hi = X >> 16 (its
// arithmetic high part, |hi| < 2^16), so X = hi * 2^16 + (lo - 2^23). Over a group of at most
// kSumGroup = 128 inner rows the 32-bit sums cannot overflow: sum(lo) < 128 * (2^16 + 2^23) < 2^31
// and |sum(hi)| < 2^23; the match count is sum(lo) >> 23 (the low parts add up to below 2^23),
// and the group's exact value sum is sum(hi) * 2^16 + (sum(lo) & (2^23 - 1)).
constexpr int kSumGroup = 128;
constexpr int kSumCountShift = 23;

__device__ __forceinline__ int2 sum_word(int64_t x) {
  return make_int2((int32_t)((uint32_t)(x & 0xFFFF) + (1u << kSumCountShift)), (int32_t)(x >> 16));
}

// Loads rows [t0, t0 + tn) of the mapped keys (and the biased SUM words) into shared memory;
// rows up to the next multiple of 32 get key 0 (masked out) and SUM word 0 (adds nothing).
template <int MODE, int NL>
__device__ __forceinline__ void fast_load_tile(const FastParams &F, int64_t t0, int tn, unsigned char *smem) {
  const int tn32 = (tn + 31) & ~31;
#pragma unroll
  for (int k = 0; k < NL; ++k) {
    uint32_t *dst = (uint32_t *)(smem + F.key_smem[k]);
    const uint32_t *src = F.inner[k] + t0;
    const uint32_t x = F.key_xor[k];
    for (int e = threadIdx.x; e < tn32; e += BS) dst[e] = e < tn ? src[e] ^ x : 0u;
  }
  if (MODE == FM_AGG_SUM) {
    int2 *dst = (int2 *)(smem + F.agg_smem);
    for (int e = threadIdx.x; e < tn32; e += BS) {
      int2 v = make_int2(0, 0);
      if (e < tn) {
        const uint32_t raw = ((const uint32_t *)F.agg_col)[t0 + e];
        v = sum_word(F.agg_signed ? (int64_t)(int32_t)raw : (int64_t)raw);
      }
      dst[e] = v;
    }
  }
}

// Bits J .. J + 3 of the match mask: inner keys a (leaf 0) and b (leaf 1) of 4 rows.
template <int NL, int OP0, int OP1, bool ANY, int J>
__device__ __forceinline__ void fast_mask4(uint32_t &even, uint32_t &odd, int32_t o0, int32_t o1, int4 a, int4 b) {
  using P = FastPair<NL, OP0, OP1, ANY>;
  P::template set<1u << J>(even, o0, a.x, o1, b.x);
  P::template set<1u << (J + 1)>(odd, o0, a.y, o1, b.y);
  P::template set<1u << (J + 2)>(even, o0, a.z, o1, b.z);
  P::template set<1u << (J + 3)>(odd, o0, a.w, o1, b.w);
}

// The match mask of 32 inner rows (keys s0[0..32), s1[0..32)) for outer keys (o0, o1).
template <int NL, int OP0, int OP1, bool ANY, int Q = 0>
__device__ __forceinline__ void fast_mask32_from(uint32_t &even, uint32_t &odd, int32_t o0, int32_t o1,
                                                 const int4 *s0, const int4 *s1) {
  if constexpr (Q < 8) {
    const int4 a = s0[Q];
    const int4 b = NL == 2 ? s1[Q] : a;
    fast_mask4<NL, OP0, OP1, ANY, 4 * Q>(even, odd, o0, o1, a, b);
    fast_mask32_from<NL, OP0, OP1, ANY, Q + 1>(even, odd, o0, o1, s0, s1);
  }
}

template <int NL, int OP0, int OP1, bool ANY>
__device__ __forceinline__ uint32_t fast_mask32(int32_t o0, int32_t o1, const int4 *s0, const int4 *s1) {
  uint32_t even = 0, odd = 0;  // two chains of predicated ORs
  fast_mask32_from<NL, OP0, OP1, ANY>(even, odd, o0, o1, s0, s1);
  return even | odd;
}

// Adds the SUM words of the matching rows among 32 inner rows to the group sums (two chains).
template <int NL, int OP0, int OP1, bool ANY>
__device__ __forceinline__ void fast_sum32(int32_t o0, int32_t o1, const int4 *s0, const int4 *s1, const int4 *v,
                                           uint32_t (&lo)[2], int32_t (&hi)[2]) {
  using P = FastPair<NL, OP0, OP1, ANY>;
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const int4 a = s0[q];
    const int4 b = NL == 2 ? s1[q] : a;
    const int4 v01 = v[2 * q], v23 = v[2 * q + 1];
    P::add(lo[0], hi[0], o0, a.x, o1, b.x, make_int2(v01.x, v01.y));
    P::add(lo[1], hi[1], o0, a.y, o1, b.y, make_int2(v01.z, v01.w));
    P::add(lo[0], hi[0], o0, a.z, o1, b.z, make_int2(v23.x, v23.y));
    P::add(lo[1], hi[1], o0, a.w, o1, b.w, make_int2(v23.z, v23.w));
  }
}

// Same work split as nlj_kernel: block = (outer block, right chunk), one outer row per thread.
// FM_AGG_SUM sums the tagged words of sum_word() per group of kSumGroup inner rows and moves
// each group's exact count and value sum into 64-/128-bit totals.
template <int MODE, int NL, int OP0, int OP1, bool ANY>
__global__ void __launch_bounds__(BS, 8) nlj_fast_kernel(const FastParams F, const PassArgs A) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = F.chunks;
  const int64_t item = blockIdx.x;
  const int64_t ob = A.ob_begin + item / C;
  const int c = (int)(item % C);
  const int64_t l = ob * BS + threadIdx.x;
  const bool live = l >= A.l_begin && l < A.l_end;
  const int lane = threadIdx.x & 31;
  const int64_t r_begin = (int64_t)c * F.chunk_rows;
  const int64_t r_end = r_begin + F.chunk_rows < F.n_right ? r_begin + F.chunk_rows : F.n_right;

  int32_t o0 = 0, o1 = 0;
  if (live) {
    o0 = (int32_t)(F.outer[0][l] ^ F.key_xor[0]);
    if (NL == 2) o1 = (int32_t)(F.outer[1][l] ^ F.key_xor[1]);
  }
  uint64_t cnt = 0;
  uint64_t pos = 0;
  __int128 sum = 0;
  if (MODE == FM_WRITE && live) {
    pos = A.offsets[l * C + c] - A.out_base;
    if (A.keep_unmatched && c == 0 && !A.left_matched[l]) {
      A.out_l[pos] = (uint32_t)l;
      A.out_r[pos] = kNone;
    }
  }

  for (int64_t t0 = r_begin; t0 < r_end; t0 += F.tile_rows) {
    const int tn = (int)(r_end - t0 < F.tile_rows ? r_end - t0 : F.tile_rows);
    const int tn32 = (tn + 31) & ~31;
    __syncthreads();
    fast_load_tile<MODE, NL>(F, t0, tn, smem);
    __syncthreads();
    const int4 *k0 = (const int4 *)(smem + F.key_smem[0]);
    const int4 *k1 = (const int4 *)(smem + F.key_smem[NL == 2 ? 1 : 0]);
    if (MODE == FM_AGG_SUM) {
      const int4 *vals = (const int4 *)(smem + F.agg_smem);
      for (int g = 0; g < tn32; g += kSumGroup) {
        const int g_end = g + kSumGroup < tn32 ? g + kSumGroup : tn32;
        uint32_t lo[2] = {0, 0};
        int32_t hi[2] = {0, 0};
        for (int w = g; w < g_end; w += 32)
          fast_sum32<NL, OP0, OP1, ANY>(o0, o1, k0 + w / 4, k1 + w / 4, vals + w / 2, lo, hi);
        const uint32_t los = lo[0] + lo[1];
        cnt += los >> kSumCountShift;
        sum += (__int128)((int64_t)(hi[0] + hi[1]) * 65536 + (int64_t)(los & ((1u << kSumCountShift) - 1)));
      }
      continue;
    }
    // The match mask M of rows w .. w + 31 (only real rows, only for a live outer row).
    auto consume = [&](uint32_t M, int w) {
      if (MODE == FM_COUNT) {
        cnt += __popc(M);
        if (A.right_bits) {
          const uint32_t any = __reduce_or_sync(0xFFFFFFFFu, live ? M : 0u);
          if (lane == 0 && any) atomicOr(&A.right_bits[(t0 + w) >> 5], any);
        }
      } else if (MODE == FM_WRITE) {
        if (!live) M = 0;
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
        cnt += __popc(M);  // a dead row's count is never stored
      }
    };
    // Whole groups of 32 rows, then the partial last group under a mask.
    const int full = tn & ~31;
    for (int w = 0; w < full; w += 32) consume(fast_mask32<NL, OP0, OP1, ANY>(o0, o1, k0 + w / 4, k1 + w / 4), w);
    if (full < tn)
      consume(fast_mask32<NL, OP0, OP1, ANY>(o0, o1, k0 + full / 4, k1 + full / 4) & ((1u << (tn - full)) - 1u), full);
  }
  if (!live) return;
  if (MODE == FM_COUNT) A.counts[l * C + c] = (uint32_t)cnt;
  if (MODE == FM_AGG_COUNT || MODE == FM_AGG_SUM) {
    Acc acc;
    acc_init(acc);
    acc.count = cnt;
    if (MODE == FM_AGG_SUM) {
      acc.i = sum;
      acc.has = cnt != 0;
    } else if (F.agg != GJ_T_AGG_COUNT && cnt != 0) {
      // An aggregate of a left column: the row's value, `cnt` times.
      push_word(acc, F.agg, F.agg_dtype, agg_word(F.agg_dtype, F.agg_col, l), (uint32_t)cnt);
    }
    A.partials[l * C + c] = acc_store(acc);
  }
}

// Host side of the fast path: whether `P` qualifies for pass `mode`, and its FastParams with the
// leaves ordered so that op[0] <= op[1] (AND and OR commute; halves the instantiations).
struct FastPlan {
  FastParams F;
  int nl, op[2];
  bool any;
};

bool fast_plan(const gj_t_nlj &P, int mode, FastPlan &out) {
  if (P.nleaves < 1 || P.nleaves > 2) return false;
  if (P.combine_mode != GJ_T_COMBINE_ALL && !(P.combine_mode == GJ_T_COMBINE_ANY && P.nleaves == 2)) return false;
  FastPlan fp;
  memset(&fp, 0, sizeof fp);
  FastParams &F = fp.F;
  for (int k = 0; k < P.nleaves; ++k) {
    const gj_t_leaf &lf = P.leaves[k];
    if (lf.type != GJ_T_LEAF_SEP || (lf.kind != GJ_T_I32 && lf.kind != GJ_T_U32)) return false;
    uint32_t x = lf.kind == GJ_T_U32 ? 0x80000000u : 0u;
    int op;
    switch (lf.op) {
      case GJ_T_EQ: op = F_EQ; break;
      case GJ_T_NE: op = F_NE; break;
      case GJ_T_LT: op = F_LT; break;
      case GJ_T_LE: op = F_LE; break;
      case GJ_T_GT: op = F_LT; x ^= 0xFFFFFFFFu; break;
      case GJ_T_GE: op = F_LE; x ^= 0xFFFFFFFFu; break;
      default: return false;
    }
    fp.op[k] = op;
    F.outer[k] = (const uint32_t *)lf.outer;
    F.inner[k] = (const uint32_t *)lf.inner;
    F.key_xor[k] = x;
    F.key_smem[k] = lf.smem_offset;
  }
  fp.nl = P.nleaves;
  fp.any = P.combine_mode == GJ_T_COMBINE_ANY;
  if (fp.nl == 2 && fp.op[1] < fp.op[0]) {
    std::swap(fp.op[0], fp.op[1]);
    std::swap(F.outer[0], F.outer[1]);
    std::swap(F.inner[0], F.inner[1]);
    std::swap(F.key_xor[0], F.key_xor[1]);
    std::swap(F.key_smem[0], F.key_smem[1]);
  }
  F.n_right = P.n_right;
  F.chunk_rows = P.chunk_rows;
  F.chunks = P.chunks;
  F.tile_rows = P.tile_rows;
  F.agg = P.agg;
  F.agg_side = P.agg_side;
  F.agg_dtype = P.agg_dtype;
  F.agg_col = P.agg_col;
  F.agg_smem = P.agg_smem_offset;
  if (mode == FM_AGG_SUM) {
    if (P.agg != GJ_T_AGG_SUM || P.agg_side != 1 || (P.agg_dtype != GJ_T_I32 && P.agg_dtype != GJ_T_U32))
      return false;
    F.agg_signed = P.agg_dtype == GJ_T_I32;
  } else if (mode == FM_AGG_COUNT) {
    if (P.agg != GJ_T_AGG_COUNT && P.agg_side != 0) return false;
  }
  out = fp;
  return true;
}

template <int MODE, int NL, int OP0, int OP1, bool ANY>
int launch_fast_kernel(const FastPlan &fp, int64_t blocks, int smem, const PassArgs &A, cudaStream_t s) {
  nlj_fast_kernel<MODE, NL, OP0, OP1, ANY><<<(unsigned)blocks, BS, smem, s>>>(fp.F, A);
  return launch_status();
}

template <int MODE, int NL, int OP0>
int launch_fast_op1(const FastPlan &fp, int64_t blocks, int smem, const PassArgs &A, cudaStream_t s) {
  if constexpr (NL == 1) {
    return launch_fast_kernel<MODE, 1, OP0, OP0, false>(fp, blocks, smem, A, s);
  } else {
#define GJ_FAST_OP1(OP1)                                                                  \
  if (fp.op[1] == OP1) {                                                                  \
    if constexpr (OP1 >= OP0) {                                                           \
      if (fp.any) return launch_fast_kernel<MODE, 2, OP0, OP1, true>(fp, blocks, smem, A, s); \
      return launch_fast_kernel<MODE, 2, OP0, OP1, false>(fp, blocks, smem, A, s);        \
    }                                                                                     \
  }
  GJ_FAST_OP1(F_EQ)
  GJ_FAST_OP1(F_NE)
  GJ_FAST_OP1(F_LT)
  GJ_FAST_OP1(F_LE)
#undef GJ_FAST_OP1
    return (int)cudaErrorInvalidValue;  // unreachable: fast_plan orders the leaves
  }
}

template <int MODE, int NL>
int launch_fast_nl(const FastPlan &fp, int64_t blocks, int smem, const PassArgs &A, cudaStream_t s) {
  switch (fp.op[0]) {
    case F_EQ: return launch_fast_op1<MODE, NL, F_EQ>(fp, blocks, smem, A, s);
    case F_NE: return launch_fast_op1<MODE, NL, F_NE>(fp, blocks, smem, A, s);
    case F_LT: return launch_fast_op1<MODE, NL, F_LT>(fp, blocks, smem, A, s);
    default: return launch_fast_op1<MODE, NL, F_LE>(fp, blocks, smem, A, s);
  }
}

template <int MODE>
int launch_fast(const FastPlan &fp, int64_t blocks, int smem, const PassArgs &A, cudaStream_t s) {
  return fp.nl == 1 ? launch_fast_nl<MODE, 1>(fp, blocks, smem, A, s) : launch_fast_nl<MODE, 2>(fp, blocks, smem, A, s);
}

template <int PASS>
int launch_nlj(const gj_t_nlj &P, int64_t blocks, const PassArgs &A, cudaStream_t s) {
  if (blocks <= 0) return 0;
  if (blocks > 0x7FFFFFFF) return (int)cudaErrorInvalidConfiguration;
  FastPlan fp;
  if (PASS == PASS_COUNT && fast_plan(P, FM_COUNT, fp)) return launch_fast<FM_COUNT>(fp, blocks, P.smem_bytes, A, s);
  if (PASS == PASS_WRITE && fast_plan(P, FM_WRITE, fp)) return launch_fast<FM_WRITE>(fp, blocks, P.smem_bytes, A, s);
  if (PASS == PASS_AGG && fast_plan(P, FM_AGG_SUM, fp)) return launch_fast<FM_AGG_SUM>(fp, blocks, P.smem_bytes, A, s);
  if (PASS == PASS_AGG && fast_plan(P, FM_AGG_COUNT, fp))
    return launch_fast<FM_AGG_COUNT>(fp, blocks, P.smem_bytes, A, s);
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
}  // namespace
