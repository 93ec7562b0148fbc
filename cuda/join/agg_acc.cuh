// The running state of COUNT/SUM/MIN/MAX, written once for the equi-join aggregates
// (equi_agg.cu) and the theta nested loop (theta_nlj.cuh, theta_agg.cu): integers exactly as
// i128 with a signed-overflow flag, floats as f64, `count` rows, `has` = a value was seen (SUM,
// MIN and MAX over no values are NULL).
//
// Example: SUM of 5 taken twice and 7 once: push_int(a, kSum, 5, 2), push_int(a, kSum, 7, 1)
// -> a.i = 17, a.has; MIN of the floats 2.0 and NaN: NaN under Nan::Poisons, 2.0 under
// Nan::OnlyIfAll.
#pragma once

#include <math.h>
#include <stdint.h>

namespace gj {
namespace agg {

// The aggregate codes of both C ABIs (GJ_J_AGG_* and GJ_T_AGG_*; their users assert equality).
constexpr int kCount = 0, kSum = 1, kMin = 2, kMax = 3;

// Float MIN/MAX over NaN: NaN once any value is NaN (the equi-join aggregates), or NaN only
// when every value is (the theta joins' `Agg`).
enum class Nan { Poisons, OnlyIfAll };

struct Acc {
  __int128 i;
  double f;
  uint64_t count;
  bool has;
  bool overflow;
};

__device__ __forceinline__ void acc_init(Acc &a) {
  a.i = 0;
  a.f = 0.0;
  a.count = 0;
  a.has = false;
  a.overflow = false;
}

// a.i += x, flagging a signed overflow (both operands of one sign, the sum of the other).
__device__ __forceinline__ void add_checked(Acc &a, __int128 x) {
  const __int128 s = (__int128)((unsigned __int128)a.i + (unsigned __int128)x);
  if ((a.i < 0) == (x < 0) && (s < 0) != (a.i < 0)) a.overflow = true;
  a.i = s;
}

// The fold of one integer value taken m (> 0) times. |x| < 2^64 and m < 2^32: x * m fits.
__device__ __forceinline__ void push_int(Acc &a, int agg, __int128 x, uint32_t m) {
  if (agg == kSum) add_checked(a, x * (__int128)m);
  else if (agg == kMin) a.i = (!a.has || x < a.i) ? x : a.i;
  else if (agg == kMax) a.i = (!a.has || x > a.i) ? x : a.i;
  a.has = true;
}

// The fold of one float value taken m (> 0) times.
template <Nan N>
__device__ __forceinline__ void push_float(Acc &a, int agg, double x, uint32_t m) {
  if (agg == kSum) {
    a.f += m == 1 ? x : x * (double)m;
  } else if (agg == kMin || agg == kMax) {
    if (N == Nan::Poisons) {
      if (isnan(x) || (a.has && isnan(a.f))) a.f = NAN;
      else if (!a.has) a.f = x;
      else a.f = agg == kMin ? fmin(a.f, x) : fmax(a.f, x);
    } else {
      const bool better = agg == kMin ? x < a.f : x > a.f;
      if (!a.has || (isnan(a.f) && !isnan(x)) || better) a.f = x;
    }
  }
  a.has = true;
}

// a (earlier in the fold's order) merged with b (later).
template <Nan N>
__device__ __forceinline__ void merge(Acc &a, const Acc &b, int agg, bool is_float) {
  a.count += b.count;
  a.overflow = a.overflow || b.overflow;
  if (agg == kCount || !b.has) return;
  if (is_float) {
    push_float<N>(a, agg, b.f, 1);
  } else if (agg == kSum) {
    add_checked(a, b.i);
    a.has = true;
  } else {
    push_int(a, agg, b.i, 1);
  }
}

// To and from a C ABI's accumulator struct (fields ilo, ihi, f, count, has, overflow).
template <class G>
__device__ __forceinline__ G store(const Acc &a) {
  G g;
  g.ilo = (uint64_t)a.i;
  g.ihi = (int64_t)(a.i >> 64);
  g.f = a.f;
  g.count = a.count;
  g.has = a.has ? 1u : 0u;
  g.overflow = a.overflow ? 1u : 0u;
  return g;
}

template <class G>
__device__ __forceinline__ Acc load(const G &g) {
  Acc a;
  a.i = (__int128)(((unsigned __int128)(uint64_t)g.ihi << 64) | (unsigned __int128)g.ilo);
  a.f = g.f;
  a.count = g.count;
  a.has = g.has != 0;
  a.overflow = g.overflow != 0;
  return a;
}

}  // namespace agg
}  // namespace gj
