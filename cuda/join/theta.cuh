// Nested-loop theta joins (seeds 003 and 004): one outer (left) row per thread, tiles of the
// inner (right) rows' leaf values in shared memory, leaves evaluated 32 inner rows at a time into
// 32-bit match masks and combined by a boolean program; count pass, prefix sum (host side),
// write pass with warp-cooperative coalesced stores, and an input-bound aggregate pass.
// Predicates of one or two comparisons of i32/u32 values under AND/OR take specialized kernels
// (nlj_fast_kernel: one compare per leaf plus one or two instructions per pair); the rest take
// the general nlj_kernel.
//
// The kernels live in one file per phase: theta_eval.cu (the interpreter over rows and pairs),
// theta_count.cu (count pass and its fix-ups), theta_write.cu (write pass) and theta_agg.cu
// (aggregate pass and the merges of its partials). This header holds the interpreter;
// theta_nlj.cuh the nested-loop kernels the three passes share.
#pragma once
#include <cstring>
#include <utility>

#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
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
}  // namespace
