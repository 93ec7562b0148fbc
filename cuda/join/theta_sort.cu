// Sort-based theta joins for a single inequality `l.a op r.b` or a band `r.b - w <= l.a <= r.b + w`
// (seed 004 and the sort-based path of issue 5).
//
// The right side is sorted by its key with row ids (keys normalized first: -0.0 -> +0.0 so equal
// values are adjacent, every NaN -> the canonical +NaN so NaN rows sort last, outside the searched
// range [0, n_valid)). Every left row then finds its matching sorted positions [lo, hi) by binary
// search with the predicate itself (so float bands round exactly as the predicate does, and integer
// bands are exact in 128 bits). From the ranges:
//   * counts, their scan (offsets) and an expansion of each left row's contiguous run of sorted
//     right rows into gather maps or directly into output columns (tiles of output rows per block,
//     each output row finding its left row by binary search on the offsets of the tile's rows);
//   * aggregates without pairs: prefix sums (128-bit integers; floats as a finite sum plus NaN/inf
//     counts), running MIN/MAX (inequality ranges are prefixes or suffixes) or a sparse table
//     (bands), all over the right column in sorted order;
//   * the right rows covered by no range (difference array + scan) for right/full joins.
#include <cuda_runtime.h>
#include <math.h>

#include <type_traits>

#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_theta_sort.h"

namespace {
using namespace gj;

typedef __int128 i128;
constexpr int THREADS = 256;
constexpr int AGG_PARTIALS = 1024;
constexpr int EXPAND_TILE = THREADS * 8;
constexpr uint64_t SIGN64 = 0x8000000000000000ull;

inline int grid_for(int64_t n, int per_block = THREADS * 4) { return blocks_for_sms(n, per_block, tuning::kStreamBlocksPerSm); }

__device__ __forceinline__ bool is_float_type(int t) { return t == GJ_TS_F32 || t == GJ_TS_F64; }
__device__ __forceinline__ bool is_signed_int(int t) { return t == GJ_TS_I32 || t == GJ_TS_I64; }

__device__ __forceinline__ i128 read_int(int type, const void *col, uint64_t row) {
  switch (type) {
    case GJ_TS_I32: return (i128)((const int32_t *)col)[row];
    case GJ_TS_I64: return (i128)((const int64_t *)col)[row];
    case GJ_TS_U32: return (i128)((const uint32_t *)col)[row];
    default: return (i128)((const uint64_t *)col)[row];
  }
}
__device__ __forceinline__ double read_f(int type, const void *col, uint64_t row) {
  return type == GJ_TS_F32 ? (double)((const float *)col)[row] : ((const double *)col)[row];
}
// Order-preserving 64-bit image of an integer column value (signed: sign bit flipped).
__device__ __forceinline__ uint64_t int_image(int type, const void *col, uint64_t row) {
  switch (type) {
    case GJ_TS_I32: return (uint64_t)(int64_t)((const int32_t *)col)[row] ^ SIGN64;
    case GJ_TS_I64: return (uint64_t)((const int64_t *)col)[row] ^ SIGN64;
    case GJ_TS_U32: return (uint64_t)((const uint32_t *)col)[row];
    default: return ((const uint64_t *)col)[row];
  }
}
__device__ __forceinline__ i128 int_from_image(int type, uint64_t img) {
  return is_signed_int(type) ? (i128)(int64_t)(img ^ SIGN64) : (i128)img;
}

// ---------------------------------------------------------------------------------------------
// Key preparation
// ---------------------------------------------------------------------------------------------
template <class K>
__device__ __forceinline__ K normalize(K x) { return x; }
template <>
__device__ __forceinline__ float normalize(float x) { return isnan(x) ? __int_as_float(0x7fc00000) : (x == 0.0f ? 0.0f : x); }
template <>
__device__ __forceinline__ double normalize(double x) {
  return isnan(x) ? __longlong_as_double(0x7ff8000000000000ll) : (x == 0.0 ? 0.0 : x);
}

template <class K>
__global__ void prepare_keys_kernel(const K *keys, int64_t n, K *out, uint32_t *ids) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = normalize(keys[i]);
    ids[i] = (uint32_t)i;
  }
}

// First j in [0, n) with !pred(s[j]), for a predicate that is true on a prefix.
template <class K, class P>
__device__ __forceinline__ int64_t partition_point(const K *s, int64_t n, P pred) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + ((hi - lo) >> 1);
    if (pred(s[mid])) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

template <class K>
__device__ __forceinline__ bool key_is_nan(K x) { return false; }
template <>
__device__ __forceinline__ bool key_is_nan(float x) { return isnan(x); }
template <>
__device__ __forceinline__ bool key_is_nan(double x) { return isnan(x); }

template <class K>
__global__ void valid_count_kernel(const K *sorted, int64_t n, uint64_t *out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = (uint64_t)partition_point(sorted, n, [](K x) { return !key_is_nan(x); });
}

// ---------------------------------------------------------------------------------------------
// Ranges
// ---------------------------------------------------------------------------------------------
template <class K, bool FLOAT>
struct Band;
template <class K>
struct Band<K, false> {
  // lo: first b with b + w >= a; hi: first b with b - w > a (exact in 128 bits).
  static __device__ void range(const K *s, int64_t m, K a, i128 w, double, int64_t &lo, int64_t &hi) {
    const i128 ai = (i128)a;
    lo = partition_point(s, m, [=](K b) { return (i128)b + w < ai; });
    hi = partition_point(s, m, [=](K b) { return (i128)b - w <= ai; });
  }
};
template <class K>
struct Band<K, true> {
  // In the column's own type, rounding as the predicate does: fl(b - w) <= a and a <= fl(b + w)
  // are monotone in b (a prefix and a suffix of the sorted keys) for w not NaN and not -inf.
  static __device__ void range(const K *s, int64_t m, K a, i128, double wd, int64_t &lo, int64_t &hi) {
    const K w = (K)wd;
    if (isnan(w) || (w < (K)0 && isinf(w))) {
      lo = hi = 0;
      return;
    }
    lo = partition_point(s, m, [=](K b) { return !(a <= (K)(b + w)); });
    hi = partition_point(s, m, [=](K b) { return (K)(b - w) <= a; });
  }
};

// The matching sorted positions [lo, hi) of left key `a` among the first m sorted keys (a NaN
// left key matches nothing).
template <class K, bool FLOAT>
__device__ __forceinline__ void find_range(const K *s, int64_t m, K a, int cond, i128 wi, double wf, int64_t &lo,
                                           int64_t &hi) {
  lo = 0;
  hi = 0;
  if (key_is_nan(a)) return;
  switch (cond) {
    case GJ_TS_LT: lo = partition_point(s, m, [=](K b) { return b <= a; }); hi = m; break;
    case GJ_TS_LE: lo = partition_point(s, m, [=](K b) { return b < a; }); hi = m; break;
    case GJ_TS_GT: lo = 0; hi = partition_point(s, m, [=](K b) { return b < a; }); break;
    case GJ_TS_GE: lo = 0; hi = partition_point(s, m, [=](K b) { return b <= a; }); break;
    default: Band<K, FLOAT>::range(s, m, a, wi, wf, lo, hi); break;
  }
  if (hi < lo) hi = lo;
}

template <class K, bool FLOAT>
__global__ void ranges_kernel(const K *left, int64_t n_left, const K *s, int64_t n_right, const uint64_t *n_valid,
                              int cond, i128 wi, double wf, uint32_t *lo_out, uint32_t *hi_out, uint64_t *counts,
                              int count_mode) {
  const int64_t m = n_valid ? (int64_t)*n_valid : n_right;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i <= n_left; i += stride) {
    if (i == n_left) {
      if (counts) counts[n_left] = 0;
      continue;
    }
    int64_t lo, hi;
    find_range<K, FLOAT>(s, m, left[i], cond, wi, wf, lo, hi);
    lo_out[i] = (uint32_t)lo;
    hi_out[i] = (uint32_t)hi;
    if (counts) {
      const uint64_t c = (uint64_t)(hi - lo);
      uint64_t v;
      switch (count_mode) {
        case GJ_TS_COUNT_INNER: v = c; break;
        case GJ_TS_COUNT_LEFT_OUTER: v = c ? c : 1; break;
        case GJ_TS_COUNT_SEMI: v = c != 0; break;
        default: v = c == 0; break;
      }
      counts[i] = v;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Expansion of each left row's run of sorted right rows
// ---------------------------------------------------------------------------------------------
// The last row i in [a, b] with offsets[i] <= g (offsets[a] <= g).
__device__ __forceinline__ int64_t row_of(const uint64_t *offsets, int64_t a, int64_t b, uint64_t g) {
  while (a < b) {
    int64_t mid = a + ((b - a + 1) >> 1);
    if (offsets[mid] <= g) a = mid;
    else b = mid - 1;
  }
  return a;
}

// Tiles of EXPAND_TILE output rows; thread 0 finds the first and last left row of the tile, every
// output row then searches between them (monotone per thread). Writes are coalesced.
template <class Emit>
__global__ void expand_kernel(const uint64_t *offsets, int64_t row_begin, int64_t row_end, uint64_t out_begin,
                              uint64_t out_count, Emit emit) {
  __shared__ int64_t tile_rows[2];
  const uint64_t tiles = (out_count + EXPAND_TILE - 1) / EXPAND_TILE;
  for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const uint64_t k0 = tile * EXPAND_TILE;
    const uint64_t k1 = min(k0 + (uint64_t)EXPAND_TILE, out_count);
    if (threadIdx.x == 0) {
      tile_rows[0] = row_of(offsets, row_begin, row_end - 1, out_begin + k0);
      tile_rows[1] = row_of(offsets, tile_rows[0], row_end - 1, out_begin + k1 - 1);
    }
    __syncthreads();
    int64_t a = tile_rows[0];
    const int64_t b = tile_rows[1];
    for (uint64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
      const uint64_t g = out_begin + k;
      a = row_of(offsets, a, b, g);
      emit(k, a, g - offsets[a]);
    }
    __syncthreads();
  }
}

struct MapEmit {
  const uint32_t *lo, *hi, *perm;
  uint32_t *left_out, *right_out;
  __device__ void operator()(uint64_t k, int64_t i, uint64_t t) const {
    left_out[k] = (uint32_t)i;
    if (right_out) right_out[k] = hi[i] > lo[i] ? perm[lo[i] + t] : kNone;
  }
};

struct OutCols {
  gj_ts_out_col c[GJ_TS_MAX_OUT_COLS];
  int n;
};

struct ColumnEmit {
  const uint32_t *lo;
  OutCols cols;
  __device__ void operator()(uint64_t k, int64_t i, uint64_t t) const {
    const uint64_t j = (uint64_t)lo[i] + t;
#pragma unroll
    for (int c = 0; c < GJ_TS_MAX_OUT_COLS; ++c) {
      if (c >= cols.n) break;
      const gj_ts_out_col &col = cols.c[c];
      const uint64_t src = col.from_right ? j : (uint64_t)i;
      if (col.elem_bytes == 4) ((uint32_t *)col.dst)[k] = ((const uint32_t *)col.src)[src];
      else ((uint64_t *)col.dst)[k] = ((const uint64_t *)col.src)[src];
    }
  }
};

__global__ void gather_kernel(const void *src, const uint32_t *perm, int64_t n, int bytes, void *dst) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
    if (bytes == 4) ((uint32_t *)dst)[j] = ((const uint32_t *)src)[perm[j]];
    else ((uint64_t *)dst)[j] = ((const uint64_t *)src)[perm[j]];
  }
}

__global__ void cover_diff_kernel(const uint32_t *lo, const uint32_t *hi, int64_t n_left, unsigned long long *diff) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_left; i += stride) {
    if (hi[i] > lo[i]) {
      atomicAdd(diff + lo[i], 1ull);
      atomicAdd(diff + hi[i], ~0ull);  // -1 mod 2^64
    }
  }
}

__global__ void cover_flags_kernel(const uint64_t *cover, int64_t n, uint8_t *flags) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) flags[j] = cover[j] != 0;
}

// ---------------------------------------------------------------------------------------------
// A device-wide scan for any value type: out[0] = identity, out[p + 1] = op(in[0..=p]), through
// a store functor (which may place position p anywhere). CUB's DeviceScan::InclusiveScan reads
// src(j) through a counting iterator and hands position j's inclusive value to store(j + 1, .);
// a one-thread kernel stores the identity at position 0. Integer sums and MIN/MAX are exact; the
// double part of a float sum is pseudo-associative, so (as CUB documents) its rounding follows the
// look-back order and may differ in the last bits from run to run.
// ---------------------------------------------------------------------------------------------
// A block-wide inclusive scan over THREADS values in shared memory `sh` (the small sort's).
template <class T, class Op>
__device__ T block_inclusive_scan(T v, T *sh, Op op) {
  const int tid = threadIdx.x;
  sh[tid] = v;
  __syncthreads();
  for (int d = 1; d < (int)blockDim.x; d <<= 1) {
    const bool has = tid >= d;
    T other = op.identity();
    if (has) other = sh[tid - d];
    __syncthreads();
    if (has) {
      v = op(other, v);
      sh[tid] = v;
    }
    __syncthreads();
  }
  return v;
}

template <class Op, class Store>
__global__ void scan_head_kernel(Op op, Store store) {
  store(0, op.identity());
}

// Hands position j's inclusive value to store(j + 1, .).
template <class T, class Store>
struct ShiftedStore {
  Store store;
  __device__ void operator()(int64_t j, const T &v) const { store(j + 1, v); }
};

// Item j as the old tile scan folded it, op(identity, src(j)): the same values for every
// associative op here, and the same bits where op(identity, x) is not x itself (a float sum's
// -0.0 becomes +0.0, a MIN/MAX of a NaN the canonical NaN).
template <class T, class Src, class Op>
struct SeededSrc {
  Src src;
  Op op;
  __device__ T operator()(int64_t j) const { return op(op.identity(), src(j)); }
};

// The CUB scan's input and output iterators.
template <class T, class Src, class Op>
auto scan_input(Src src, Op op) {
  return thrust::make_transform_iterator(thrust::make_counting_iterator<int64_t>(0), SeededSrc<T, Src, Op>{src, op});
}
template <class T, class Store>
auto scan_output(Store store) {
  return thrust::tabulate_output_iterator<ShiftedStore<T, Store>, thrust::use_default, int64_t>(ShiftedStore<T, Store>{store});
}

// CUB's temporary storage for a scan of n items of type T (temp == NULL: only the size).
template <class T, class Op, class Src, class Store>
cudaError_t cub_inclusive_scan(void *temp, size_t &temp_bytes, Src src, int64_t n, Op op, Store store, cudaStream_t s) {
  return cub::DeviceScan::InclusiveScan(temp, temp_bytes, scan_input<T>(src, op), scan_output<T>(store), op, n, s);
}

// `temp` holds gj_ts_scan_temp_bytes(n) bytes (at least what CUB asks for this scan).
template <class T, class Op, class Src, class Store>
int device_scan(Src src, int64_t n, Op op, Store store, void *temp, cudaStream_t s) {
  if (n == 0) return 0;  // the single entry (position 0) is never read: every range is empty
  size_t temp_bytes = 0;
  int rc = (int)cub_inclusive_scan<T>(nullptr, temp_bytes, src, n, op, store, s);
  if (rc) return rc;
  scan_head_kernel<Op, Store><<<1, 1, 0, s>>>(op, store);
  if ((rc = launch_status())) return rc;
  if ((rc = (int)cub_inclusive_scan<T>(temp, temp_bytes, src, n, op, store, s))) return rc;
  return launch_status();
}

// Sum of 128-bit integers.
struct SumI128 {
  __device__ i128 identity() const { return 0; }
  __device__ i128 operator()(i128 a, i128 b) const { return a + b; }
};
struct IntSrc {
  int type;
  const void *col;
  const uint32_t *perm;
  __device__ i128 operator()(int64_t j) const { return read_int(type, col, perm[j]); }
};
template <class T>
struct PrefixStore {
  T *out;
  __device__ void operator()(int64_t p, T v) const { out[p] = v; }
};

// Float sums: the finite values summed in double, NaN and infinities counted.
struct FSum {
  double s;
  uint64_t nan, pinf, ninf;
};
struct SumF {
  __device__ FSum identity() const { return FSum{0.0, 0, 0, 0}; }
  __device__ FSum operator()(const FSum &a, const FSum &b) const {
    return FSum{a.s + b.s, a.nan + b.nan, a.pinf + b.pinf, a.ninf + b.ninf};
  }
};
__device__ __forceinline__ FSum fsum_of(double x) {
  if (isnan(x)) return FSum{0.0, 1, 0, 0};
  if (isinf(x)) return x > 0 ? FSum{0.0, 0, 1, 0} : FSum{0.0, 0, 0, 1};
  return FSum{x, 0, 0, 0};
}
struct FloatSrc {
  int type;
  const void *col;
  const uint32_t *perm;
  __device__ FSum operator()(int64_t j) const { return fsum_of(read_f(type, col, perm[j])); }
};

// MIN/MAX over 8-byte images: integers as order-preserving uint64, floats as double bits with
// NaN ignored unless every value is NaN.
struct MinMax {
  int is_float, is_max;
  __device__ uint64_t identity() const {
    if (is_float) return 0x7ff8000000000000ull;
    return is_max ? 0ull : ~0ull;
  }
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const {
    if (is_float) {
      const double x = __longlong_as_double((long long)a), y = __longlong_as_double((long long)b);
      return (uint64_t)__double_as_longlong(is_max ? fmax(x, y) : fmin(x, y));
    }
    return is_max ? (a > b ? a : b) : (a < b ? a : b);
  }
};
__device__ __forceinline__ uint64_t image_of(int type, const void *col, uint64_t row) {
  return is_float_type(type) ? (uint64_t)__double_as_longlong(read_f(type, col, row)) : int_image(type, col, row);
}
struct MinMaxSrc {
  int type;
  const void *col;
  const uint32_t *perm;
  const uint64_t *n_valid;  // non-NULL: reversed over [0, n_valid)
  MinMax op;
  __device__ uint64_t operator()(int64_t t) const {
    if (!n_valid) return image_of(type, col, perm[t]);
    const int64_t m = (int64_t)*n_valid;
    return t < m ? image_of(type, col, perm[m - 1 - t]) : op.identity();
  }
};
struct SuffixStore {
  uint64_t *out;
  const uint64_t *n_valid;
  __device__ void operator()(int64_t p, uint64_t v) const {
    const int64_t m = (int64_t)*n_valid;
    if (p <= m) out[m - p] = v;
  }
};

__global__ void sparse_level0_kernel(int type, const void *col, const uint32_t *perm, int64_t n, uint64_t *t) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) t[j] = image_of(type, col, perm[j]);
}
__global__ void sparse_level_kernel(uint64_t *table, int64_t n, int level, MinMax op) {
  const int64_t half = 1ll << (level - 1);
  const int64_t len = n - 2 * half + 1;
  const uint64_t *prev = table + (level - 1) * n;
  uint64_t *cur = table + level * n;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < len; j += stride) cur[j] = op(prev[j], prev[j + half]);
}

// ---------------------------------------------------------------------------------------------
// Aggregates
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ i128 cell_int(const gj_ts_cell &c) {
  return (i128)(((unsigned __int128)(uint64_t)c.hi << 64) | (unsigned __int128)c.lo);
}
__device__ __forceinline__ void set_int(gj_ts_cell &c, i128 v) {
  c.lo = (uint64_t)v;
  c.hi = (int64_t)(v >> 64);
}

struct CellOp {
  int agg, is_float;
  __device__ gj_ts_cell identity() const {
    gj_ts_cell c;
    c.lo = 0;
    c.hi = 0;
    c.f = 0.0;
    c.present = 0;
    c.pad = 0;
    return c;
  }
  __device__ gj_ts_cell operator()(const gj_ts_cell &a, const gj_ts_cell &b) const {
    if (agg == GJ_TS_AGG_COUNT || agg == GJ_TS_AGG_SUM) {
      gj_ts_cell r = identity();
      r.present = a.present | b.present;
      if (is_float) r.f = a.f + b.f;
      else set_int(r, cell_int(a) + cell_int(b));
      return r;
    }
    if (!a.present) return b;
    if (!b.present) return a;
    gj_ts_cell r = a;
    const bool mx = agg == GJ_TS_AGG_MAX;
    if (is_float) r.f = mx ? fmax(a.f, b.f) : fmin(a.f, b.f);
    else {
      const i128 x = cell_int(a), y = cell_int(b);
      set_int(r, mx ? (x > y ? x : y) : (x < y ? x : y));
    }
    return r;
  }
};

struct AggArgs {
  int agg, col_type, col_side, structure_kind, levels, is_float;
  const void *left_col;
  const void *structure;
  int64_t n_right;
};

__device__ gj_ts_cell row_cell(const AggArgs &a, int64_t i, uint32_t lo, uint32_t hi) {
  gj_ts_cell c;
  c.lo = 0;
  c.hi = 0;
  c.f = 0.0;
  c.pad = 0;
  const uint64_t n = hi - lo;
  c.present = n > 0;
  if (a.agg == GJ_TS_AGG_COUNT) {
    set_int(c, (i128)n);
    return c;
  }
  if (n == 0) return c;
  if (a.col_side == 1) {  // a left column: the row's value, n times
    if (a.agg == GJ_TS_AGG_SUM) {
      if (a.is_float) c.f = read_f(a.col_type, a.left_col, i) * (double)n;
      else set_int(c, read_int(a.col_type, a.left_col, i) * (i128)n);
    } else {
      if (a.is_float) c.f = read_f(a.col_type, a.left_col, i);
      else set_int(c, read_int(a.col_type, a.left_col, i));
    }
    return c;
  }
  if (a.agg == GJ_TS_AGG_SUM) {
    if (a.is_float) {
      const FSum *p = (const FSum *)a.structure;
      const FSum x = p[hi], y = p[lo];
      const uint64_t nan = x.nan - y.nan, pinf = x.pinf - y.pinf, ninf = x.ninf - y.ninf;
      if (nan || (pinf && ninf)) c.f = __longlong_as_double(0x7ff8000000000000ll);
      else if (pinf) c.f = __longlong_as_double(0x7ff0000000000000ll);
      else if (ninf) c.f = -__longlong_as_double(0x7ff0000000000000ll);
      else c.f = x.s - y.s;
    } else {
      const i128 *p = (const i128 *)a.structure;
      set_int(c, p[hi] - p[lo]);
    }
    return c;
  }
  const uint64_t *s = (const uint64_t *)a.structure;
  uint64_t img;
  if (a.structure_kind == GJ_TS_STRUCT_PREFIX) img = s[hi];
  else if (a.structure_kind == GJ_TS_STRUCT_SUFFIX) img = s[lo];
  else {
    const int k = 63 - __clzll((long long)n);
    MinMax op{a.is_float, a.agg == GJ_TS_AGG_MAX};
    img = op(s[(int64_t)k * a.n_right + lo], s[(int64_t)k * a.n_right + hi - (1ull << k)]);
  }
  if (a.is_float) c.f = __longlong_as_double((long long)img);
  else set_int(c, int_from_image(a.col_type, img));
  return c;
}

// The block's cells reduced into sh[0] (every thread must call; blockDim.x == THREADS).
__device__ void block_reduce_cells(gj_ts_cell acc, gj_ts_cell *sh, const CellOp &op) {
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int d = blockDim.x / 2; d > 0; d >>= 1) {
    if ((int)threadIdx.x < d) sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + d]);
    __syncthreads();
  }
}

__device__ __forceinline__ gj_ts_cell load_cell_uncached(const gj_ts_cell *p) {
  gj_ts_cell c;
  const unsigned long long *w = (const unsigned long long *)p;
  unsigned long long *o = (unsigned long long *)&c;
#pragma unroll
  for (int k = 0; k < 4; ++k) o[k] = __ldcg(w + k);
  return c;
}

// Steps 2 and 4 fused: each left row finds its range [lo, hi) among the sorted right keys (the
// first n_valid of them: NaN keys sort last and match nothing) and turns it into a cell through
// the structure; cells go to rows_out (optional) and/or into the total: one partial per block,
// the last block to finish (counter `done`, zero on entry, left zero) reduces the partials.
template <class K, bool FLOAT>
__global__ void __launch_bounds__(THREADS)
    range_agg_kernel(const K *left, int64_t n_left, const K *sorted, int64_t n_right, int cond, i128 wi, double wf,
                     AggArgs args, gj_ts_cell *rows_out, gj_ts_cell *partials, unsigned *done, gj_ts_cell *total_out) {
  __shared__ gj_ts_cell sh[THREADS];
  __shared__ int64_t valid;
  __shared__ bool last;
  if (threadIdx.x == 0)
    valid = FLOAT ? partition_point(sorted, n_right, [](K x) { return !key_is_nan(x); }) : n_right;
  __syncthreads();
  const int64_t m = valid;
  CellOp op{args.agg, args.is_float};
  gj_ts_cell acc = op.identity();
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_left; i += stride) {
    int64_t lo, hi;
    find_range<K, FLOAT>(sorted, m, left[i], cond, wi, wf, lo, hi);
    const gj_ts_cell c = row_cell(args, i, (uint32_t)lo, (uint32_t)hi);
    if (rows_out) rows_out[i] = c;
    acc = op(acc, c);
  }
  if (!total_out) return;
  block_reduce_cells(acc, sh, op);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sh[0];
    __threadfence();
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  acc = op.identity();
  for (int j = threadIdx.x; j < (int)gridDim.x; j += blockDim.x) acc = op(acc, load_cell_uncached(partials + j));
  block_reduce_cells(acc, sh, op);
  if (threadIdx.x == 0) {
    *total_out = sh[0];
    *done = 0;
  }
}

template <class K, bool F>
int launch_range_agg(const void *left, int64_t n_left, const void *sorted, int64_t n_right, int cond, gj_ts_width w,
                     const AggArgs &args, gj_ts_cell *rows_out, gj_ts_cell *partials, unsigned *done,
                     gj_ts_cell *total_out, cudaStream_t s) {
  const i128 wi = std::is_signed<K>::value ? (i128)w.i : (i128)w.u;
  const int g = blocks_for(n_left, THREADS * 4, AGG_PARTIALS);
  range_agg_kernel<K, F><<<g, THREADS, 0, s>>>((const K *)left, n_left, (const K *)sorted, n_right, cond, wi, w.f, args,
                                              rows_out, partials, done, total_out);
  return launch_status();
}

// ---------------------------------------------------------------------------------------------
// Small right sides: sort and prefix sums in two kernels
// ---------------------------------------------------------------------------------------------
// Run sort: each block sorts a run of SMALL_TILE consecutive right rows by key image (stable,
// cub::BlockRadixSort in registers and shared memory, on the key bits that differ within the run)
// and writes, in run order, the images, the row ids and (for SUM) the inclusive prefix sums of
// the summed column. Run merge: every element finds its position in the whole sorted order by
// binary search in every other run (ties: earlier runs first, so the sort is stable) and writes
// its normalized key there and, for SUM, its exclusive prefix sum (its run's prefix plus, per
// other run, the prefix of the elements that precede it).
constexpr int SMALL_THREADS = 256;
constexpr int SMALL_ITEMS = GJ_TS_SMALL_TILE / SMALL_THREADS;
static_assert(SMALL_ITEMS * SMALL_THREADS == GJ_TS_SMALL_TILE, "tile");
static_assert(SMALL_THREADS == THREADS, "block_inclusive_scan sizes its shared memory by THREADS");

// The order-preserving image of a normalized key of `type` (4-byte types in U = uint32_t, 8-byte
// ones in uint64_t) and the key's normalized bits.
template <class U>
__device__ __forceinline__ U key_image(int type, const void *keys, int64_t row, U &bits);
template <>
__device__ __forceinline__ uint32_t key_image(int type, const void *keys, int64_t row, uint32_t &bits) {
  switch (type) {
    case GJ_TS_I32: { const int32_t k = ((const int32_t *)keys)[row]; bits = (uint32_t)k; return ordered(k); }
    case GJ_TS_U32: { const uint32_t k = ((const uint32_t *)keys)[row]; bits = k; return k; }
    default: { const float k = normalize(((const float *)keys)[row]); bits = __float_as_uint(k); return ordered(k); }
  }
}
template <>
__device__ __forceinline__ uint64_t key_image(int type, const void *keys, int64_t row, uint64_t &bits) {
  switch (type) {
    case GJ_TS_I64: { const int64_t k = ((const int64_t *)keys)[row]; bits = (uint64_t)k; return ordered(k); }
    case GJ_TS_U64: { const uint64_t k = ((const uint64_t *)keys)[row]; bits = k; return k; }
    default: {
      const double k = normalize(((const double *)keys)[row]);
      bits = (uint64_t)__double_as_longlong(k);
      return ordered(k);
    }
  }
}

// What the small path sums: nothing (COUNT, left columns), integers (128-bit) or floats.
struct NoSum {
  typedef int T;
  static constexpr bool on = false;
  struct Op {
    __device__ int identity() const { return 0; }
  };
};
struct IntSum {
  typedef i128 T;
  static constexpr bool on = true;
  typedef SumI128 Op;
  __device__ static i128 value(int type, const void *col, uint32_t row) { return read_int(type, col, row); }
};
struct FloatSum {
  typedef FSum T;
  static constexpr bool on = true;
  typedef SumF Op;
  __device__ static FSum value(int type, const void *col, uint32_t row) { return fsum_of(read_f(type, col, row)); }
};

// One past the highest set bit of x (0 for 0).
__device__ __forceinline__ int highest_bit_end(uint32_t x) { return 32 - __clz((int)x); }
__device__ __forceinline__ int highest_bit_end(uint64_t x) { return 64 - __clzll((long long)x); }
__device__ __forceinline__ void atomic_or(uint32_t *p, uint32_t v) { atomicOr((unsigned *)p, (unsigned)v); }
__device__ __forceinline__ void atomic_or(uint64_t *p, uint64_t v) {
  atomicOr((unsigned long long *)p, (unsigned long long)v);
}

template <class U, class S>
__global__ void __launch_bounds__(SMALL_THREADS)
    small_run_sort_kernel(int key_type, const void *keys, int64_t n, int sum_type, const void *sum_col, U *run_img,
                          uint32_t *run_row, typename S::T *run_incl, unsigned *done) {
  typedef cub::BlockRadixSort<U, SMALL_THREADS, SMALL_ITEMS, uint32_t> Sort;
  typedef typename S::T T;
  __shared__ typename Sort::TempStorage sort_storage;
  __shared__ T scan_sh[SMALL_THREADS];
  __shared__ U differ;
  const int64_t base = (int64_t)blockIdx.x * GJ_TS_SMALL_TILE;
  const int len = (int)(n - base < GJ_TS_SMALL_TILE ? n - base : GJ_TS_SMALL_TILE);
  if (blockIdx.x == 0 && threadIdx.x == 0 && done) *done = 0;
  if (threadIdx.x == 0) differ = 0;
  U bits;
  const U first = key_image<U>(key_type, keys, base, bits);
  U img[SMALL_ITEMS];
  uint32_t row[SMALL_ITEMS];
  U my_differ = 0;
#pragma unroll
  for (int k = 0; k < SMALL_ITEMS; ++k) {
    const int r = threadIdx.x * SMALL_ITEMS + k;
    img[k] = first;
    row[k] = kNone;
    if (r < len) {
      img[k] = key_image<U>(key_type, keys, base + r, bits);
      row[k] = (uint32_t)(base + r);
      my_differ |= img[k] ^ first;
    }
  }
  __syncthreads();
  if (my_differ) atomic_or(&differ, my_differ);
  __syncthreads();
  // Sort on bits [0, end): every key of the run shares the bits above. Padding (past len) gets
  // the largest value of those bits, so it sorts after every key (and stays after equal ones).
  int end = highest_bit_end(differ);
  if (end == 0) end = 1;
  const U low = end >= (int)(sizeof(U) * 8) ? ~(U)0 : (((U)1 << end) - 1);
#pragma unroll
  for (int k = 0; k < SMALL_ITEMS; ++k)
    if ((int)threadIdx.x * SMALL_ITEMS + k >= len) img[k] = first | low;
  Sort(sort_storage).Sort(img, row, 0, end);
  // Blocked arrangement: this thread holds run positions threadIdx.x * SMALL_ITEMS + k.
  const int r0 = threadIdx.x * SMALL_ITEMS;
  typename S::Op op;
  T vals[SMALL_ITEMS];
  T mine = op.identity();
  if constexpr (S::on) {
#pragma unroll
    for (int k = 0; k < SMALL_ITEMS; ++k) {
      vals[k] = r0 + k < len ? S::value(sum_type, sum_col, row[k]) : op.identity();
      mine = op(mine, vals[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < SMALL_ITEMS; ++k) {
    if (r0 + k < len) {
      run_img[base + r0 + k] = img[k];
      run_row[base + r0 + k] = row[k];
    }
  }
  if constexpr (S::on) {
    const T inclusive = block_inclusive_scan(mine, scan_sh, op);
    T run = threadIdx.x ? scan_sh[threadIdx.x - 1] : op.identity();
    (void)inclusive;
#pragma unroll
    for (int k = 0; k < SMALL_ITEMS; ++k) {
      run = op(run, vals[k]);
      if (r0 + k < len) run_incl[base + r0 + k] = run;
    }
  }
}

template <class U, class S>
__global__ void __launch_bounds__(THREADS)
    small_run_merge_kernel(const void *keys, int64_t n, const U *run_img, const uint32_t *run_row,
                           const typename S::T *run_incl, U *sorted, typename S::T *prefix, int key_type) {
  typedef typename S::T T;
  typename S::Op op;
  const int64_t runs = (n + GJ_TS_SMALL_TILE - 1) / GJ_TS_SMALL_TILE;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += stride) {
    const int64_t k = g / GJ_TS_SMALL_TILE;
    const int64_t i = g - k * GJ_TS_SMALL_TILE;
    const U b = run_img[g];
    int64_t p = i;
    T pre = op.identity();
    if constexpr (S::on) {
      if (i > 0) pre = run_incl[g - 1];
    }
    for (int64_t j = 0; j < runs; ++j) {
      if (j == k) continue;
      const int64_t start = j * GJ_TS_SMALL_TILE;
      const int64_t len = n - start < GJ_TS_SMALL_TILE ? n - start : GJ_TS_SMALL_TILE;
      const int64_t c = j < k ? partition_point(run_img + start, len, [=](U x) { return x <= b; })
                              : partition_point(run_img + start, len, [=](U x) { return x < b; });
      p += c;
      if constexpr (S::on) {
        if (c > 0) pre = op(pre, run_incl[start + c - 1]);
      }
    }
    U bits;
    key_image<U>(key_type, keys, run_row[g], bits);
    sorted[p] = bits;
    if constexpr (S::on) {
      prefix[p] = pre;
      if (g == 0) {
        T total = op.identity();
        for (int64_t j = 0; j < runs; ++j) {
          const int64_t start = j * GJ_TS_SMALL_TILE;
          const int64_t len = n - start < GJ_TS_SMALL_TILE ? n - start : GJ_TS_SMALL_TILE;
          total = op(total, run_incl[start + len - 1]);
        }
        prefix[n] = total;
      }
    }
  }
}

template <class U, class S>
int launch_small_sort(int key_type, const void *keys, int64_t n, int sum_type, const void *sum_col, void *run_img,
                      uint32_t *run_row, void *run_incl, void *sorted, void *prefix, unsigned *done, cudaStream_t s) {
  typedef typename S::T T;
  const int runs = (int)((n + GJ_TS_SMALL_TILE - 1) / GJ_TS_SMALL_TILE);
  small_run_sort_kernel<U, S><<<runs, SMALL_THREADS, 0, s>>>(key_type, keys, n, sum_type, sum_col, (U *)run_img, run_row,
                                                             (T *)run_incl, done);
  small_run_merge_kernel<U, S><<<blocks_for(n, THREADS), THREADS, 0, s>>>(keys, n, (const U *)run_img, run_row,
                                                                          (const T *)run_incl, (U *)sorted, (T *)prefix,
                                                                          key_type);
  return launch_status();
}

template <class K, bool F>
int launch_ranges(const void *left, int64_t n_left, const void *sorted, int64_t n_right, const uint64_t *n_valid,
                  int cond, gj_ts_width w, uint32_t *lo, uint32_t *hi, uint64_t *counts, int mode, cudaStream_t s) {
  const i128 wi = std::is_signed<K>::value ? (i128)w.i : (i128)w.u;
  ranges_kernel<K, F><<<grid_for(n_left + 1), THREADS, 0, s>>>((const K *)left, n_left, (const K *)sorted, n_right,
                                                                n_valid, cond, wi, w.f, lo, hi, counts, mode);
  return launch_status();
}

}  // namespace

extern "C" {

int64_t gj_ts_prefix_sum_elem_bytes(int type) {
  return (type == GJ_TS_F32 || type == GJ_TS_F64) ? (int64_t)sizeof(FSum) : 16;
}

int gj_ts_prepare_keys(int type, const void *keys, int64_t n, void *keys_out, uint32_t *ids_out, gj_ts_stream_t stream) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  const int g = grid_for(n);
  switch (type) {
    case GJ_TS_I32: prepare_keys_kernel<<<g, THREADS, 0, s>>>((const int32_t *)keys, n, (int32_t *)keys_out, ids_out); break;
    case GJ_TS_I64: prepare_keys_kernel<<<g, THREADS, 0, s>>>((const int64_t *)keys, n, (int64_t *)keys_out, ids_out); break;
    case GJ_TS_U32: prepare_keys_kernel<<<g, THREADS, 0, s>>>((const uint32_t *)keys, n, (uint32_t *)keys_out, ids_out); break;
    case GJ_TS_U64: prepare_keys_kernel<<<g, THREADS, 0, s>>>((const uint64_t *)keys, n, (uint64_t *)keys_out, ids_out); break;
    case GJ_TS_F32: prepare_keys_kernel<<<g, THREADS, 0, s>>>((const float *)keys, n, (float *)keys_out, ids_out); break;
    case GJ_TS_F64: prepare_keys_kernel<<<g, THREADS, 0, s>>>((const double *)keys, n, (double *)keys_out, ids_out); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return launch_status();
}

int gj_ts_valid_count(int type, const void *sorted, int64_t n, uint64_t *n_valid, gj_ts_stream_t stream) {
  cudaStream_t s = (cudaStream_t)stream;
  switch (type) {
    case GJ_TS_F32: valid_count_kernel<<<1, 1, 0, s>>>((const float *)sorted, n, n_valid); break;
    case GJ_TS_F64: valid_count_kernel<<<1, 1, 0, s>>>((const double *)sorted, n, n_valid); break;
    case GJ_TS_I32: valid_count_kernel<<<1, 1, 0, s>>>((const int32_t *)sorted, n, n_valid); break;
    case GJ_TS_I64: valid_count_kernel<<<1, 1, 0, s>>>((const int64_t *)sorted, n, n_valid); break;
    case GJ_TS_U32: valid_count_kernel<<<1, 1, 0, s>>>((const uint32_t *)sorted, n, n_valid); break;
    case GJ_TS_U64: valid_count_kernel<<<1, 1, 0, s>>>((const uint64_t *)sorted, n, n_valid); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return launch_status();
}

int gj_ts_ranges(int type, const void *left, int64_t n_left, const void *sorted_right, int64_t n_right,
                 const uint64_t *n_valid, int cond, gj_ts_width width, uint32_t *lo, uint32_t *hi, uint64_t *counts,
                 int count_mode, gj_ts_stream_t stream) {
  if (n_left < 0 || n_right < 0) return (int)cudaErrorInvalidValue;
  cudaStream_t s = (cudaStream_t)stream;
  switch (type) {
    case GJ_TS_I32: return launch_ranges<int32_t, false>(left, n_left, sorted_right, n_right, n_valid, cond, width, lo, hi, counts, count_mode, s);
    case GJ_TS_I64: return launch_ranges<int64_t, false>(left, n_left, sorted_right, n_right, n_valid, cond, width, lo, hi, counts, count_mode, s);
    case GJ_TS_U32: return launch_ranges<uint32_t, false>(left, n_left, sorted_right, n_right, n_valid, cond, width, lo, hi, counts, count_mode, s);
    case GJ_TS_U64: return launch_ranges<uint64_t, false>(left, n_left, sorted_right, n_right, n_valid, cond, width, lo, hi, counts, count_mode, s);
    case GJ_TS_F32: return launch_ranges<float, true>(left, n_left, sorted_right, n_right, n_valid, cond, width, lo, hi, counts, count_mode, s);
    case GJ_TS_F64: return launch_ranges<double, true>(left, n_left, sorted_right, n_right, n_valid, cond, width, lo, hi, counts, count_mode, s);
    default: return (int)cudaErrorInvalidValue;
  }
}

int gj_ts_expand(const uint64_t *offsets, const uint32_t *lo, const uint32_t *hi, const uint32_t *perm, int64_t row_begin,
                 int64_t row_end, uint64_t out_begin, uint64_t out_count, uint32_t *left_out, uint32_t *right_out,
                 gj_ts_stream_t stream) {
  if (out_count == 0 || row_end <= row_begin) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  const int64_t tiles = (int64_t)((out_count + EXPAND_TILE - 1) / EXPAND_TILE);
  MapEmit emit{lo, hi, perm, left_out, right_out};
  expand_kernel<<<blocks_for_sms(tiles, 1, tuning::kTileBlocksPerSm), THREADS, 0, s>>>(offsets, row_begin, row_end, out_begin, out_count, emit);
  return launch_status();
}

int gj_ts_materialize(const uint64_t *offsets, const uint32_t *lo, int64_t row_begin, int64_t row_end, uint64_t out_begin,
                      uint64_t out_count, const gj_ts_out_col *cols, int ncols, gj_ts_stream_t stream) {
  if (ncols < 0 || ncols > GJ_TS_MAX_OUT_COLS) return (int)cudaErrorInvalidValue;
  for (int c = 0; c < ncols; ++c)
    if (cols[c].elem_bytes != 4 && cols[c].elem_bytes != 8) return (int)cudaErrorInvalidValue;
  if (out_count == 0 || row_end <= row_begin || ncols == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  ColumnEmit emit;
  emit.lo = lo;
  emit.cols.n = ncols;
  for (int c = 0; c < GJ_TS_MAX_OUT_COLS; ++c) emit.cols.c[c] = c < ncols ? cols[c] : gj_ts_out_col{nullptr, nullptr, 4, 0};
  const int64_t tiles = (int64_t)((out_count + EXPAND_TILE - 1) / EXPAND_TILE);
  expand_kernel<<<blocks_for_sms(tiles, 1, tuning::kTileBlocksPerSm), THREADS, 0, s>>>(offsets, row_begin, row_end, out_begin, out_count, emit);
  return launch_status();
}

int gj_ts_gather(const void *src, const uint32_t *perm, int64_t n, int elem_bytes, void *dst, gj_ts_stream_t stream) {
  if (elem_bytes != 4 && elem_bytes != 8) return (int)cudaErrorInvalidValue;
  if (n <= 0) return 0;
  gather_kernel<<<grid_for(n), THREADS, 0, (cudaStream_t)stream>>>(src, perm, n, elem_bytes, dst);
  return launch_status();
}

int gj_ts_cover_diff(const uint32_t *lo, const uint32_t *hi, int64_t n_left, uint64_t *diff, gj_ts_stream_t stream) {
  if (n_left <= 0) return 0;
  cover_diff_kernel<<<grid_for(n_left), THREADS, 0, (cudaStream_t)stream>>>(lo, hi, n_left, (unsigned long long *)diff);
  return launch_status();
}

int gj_ts_cover_flags(const uint64_t *cover, int64_t n_right, uint8_t *flags, gj_ts_stream_t stream) {
  if (n_right <= 0) return 0;
  cover_flags_kernel<<<grid_for(n_right), THREADS, 0, (cudaStream_t)stream>>>(cover, n_right, flags);
  return launch_status();
}

// The most CUB asks for any of the scans of gj_ts_prefix_sum and gj_ts_running_minmax over n items
// (0 if it cannot be asked; the scan then fails with the same error).
int64_t gj_ts_scan_temp_bytes(int64_t n) {
  if (n <= 0) return 0;
  cudaStream_t s = 0;
  size_t most = 0, b = 0;
  const MinMax mm{0, 0};
  if (cub_inclusive_scan<FSum>(nullptr, b = 0, FloatSrc{GJ_TS_F64, nullptr, nullptr}, n, SumF{},
                               PrefixStore<FSum>{nullptr}, s) == cudaSuccess && b > most)
    most = b;
  if (cub_inclusive_scan<i128>(nullptr, b = 0, IntSrc{GJ_TS_I64, nullptr, nullptr}, n, SumI128{},
                               PrefixStore<i128>{nullptr}, s) == cudaSuccess && b > most)
    most = b;
  if (cub_inclusive_scan<uint64_t>(nullptr, b = 0, MinMaxSrc{GJ_TS_I64, nullptr, nullptr, nullptr, mm}, n, mm,
                                   PrefixStore<uint64_t>{nullptr}, s) == cudaSuccess && b > most)
    most = b;
  if (cub_inclusive_scan<uint64_t>(nullptr, b = 0, MinMaxSrc{GJ_TS_I64, nullptr, nullptr, nullptr, mm}, n, mm,
                                   SuffixStore{nullptr, nullptr}, s) == cudaSuccess && b > most)
    most = b;
  return (int64_t)most;
}

int gj_ts_prefix_sum(int type, const void *col, const uint32_t *perm, int64_t n, void *out, void *temp,
                     gj_ts_stream_t stream) {
  if (n < 0) return (int)cudaErrorInvalidValue;
  cudaStream_t s = (cudaStream_t)stream;
  if (type == GJ_TS_F32 || type == GJ_TS_F64)
    return device_scan<FSum>(FloatSrc{type, col, perm}, n, SumF{}, PrefixStore<FSum>{(FSum *)out}, temp, s);
  return device_scan<i128>(IntSrc{type, col, perm}, n, SumI128{}, PrefixStore<i128>{(i128 *)out}, temp, s);
}

int gj_ts_running_minmax(int type, const void *col, const uint32_t *perm, int64_t n, const uint64_t *n_valid, int is_max,
                         int suffix, uint64_t *out, void *temp, gj_ts_stream_t stream) {
  if (n < 0) return (int)cudaErrorInvalidValue;
  cudaStream_t s = (cudaStream_t)stream;
  MinMax op{type == GJ_TS_F32 || type == GJ_TS_F64, is_max != 0};
  if (suffix)
    return device_scan<uint64_t>(MinMaxSrc{type, col, perm, n_valid, op}, n, op, SuffixStore{out, n_valid}, temp, s);
  return device_scan<uint64_t>(MinMaxSrc{type, col, perm, nullptr, op}, n, op, PrefixStore<uint64_t>{out}, temp, s);
}

int gj_ts_sparse_table(int type, const void *col, const uint32_t *perm, int64_t n, int levels, int is_max,
                       uint64_t *table, gj_ts_stream_t stream) {
  if (n <= 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  MinMax op{type == GJ_TS_F32 || type == GJ_TS_F64, is_max != 0};
  sparse_level0_kernel<<<grid_for(n), THREADS, 0, s>>>(type, col, perm, n, table);
  for (int k = 1; k < levels; ++k) {
    const int64_t len = n - (1ll << k) + 1;
    if (len <= 0) break;
    sparse_level_kernel<<<grid_for(len), THREADS, 0, s>>>(table, n, k, op);
  }
  return launch_status();
}

int gj_ts_agg_partials(void) { return AGG_PARTIALS; }

int gj_ts_range_agg(int type, const void *left, int64_t n_left, const void *sorted_right, int64_t n_right, int cond,
                    gj_ts_width width, int agg, int col_type, int col_side, const void *left_col, const void *structure,
                    int structure_kind, int levels, gj_ts_cell *rows_out, gj_ts_cell *partials, uint32_t *done,
                    gj_ts_cell *total_out, gj_ts_stream_t stream) {
  if (n_left < 0 || n_right < 0) return (int)cudaErrorInvalidValue;
  if (total_out && (!partials || !done)) return (int)cudaErrorInvalidValue;
  if (n_left == 0 || (!rows_out && !total_out)) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  const int is_float = col_side != 0 && (col_type == GJ_TS_F32 || col_type == GJ_TS_F64);
  AggArgs args{agg, col_type, col_side, structure_kind, levels, is_float, left_col, structure, n_right};
  switch (type) {
    case GJ_TS_I32: return launch_range_agg<int32_t, false>(left, n_left, sorted_right, n_right, cond, width, args, rows_out, partials, done, total_out, s);
    case GJ_TS_I64: return launch_range_agg<int64_t, false>(left, n_left, sorted_right, n_right, cond, width, args, rows_out, partials, done, total_out, s);
    case GJ_TS_U32: return launch_range_agg<uint32_t, false>(left, n_left, sorted_right, n_right, cond, width, args, rows_out, partials, done, total_out, s);
    case GJ_TS_U64: return launch_range_agg<uint64_t, false>(left, n_left, sorted_right, n_right, cond, width, args, rows_out, partials, done, total_out, s);
    case GJ_TS_F32: return launch_range_agg<float, true>(left, n_left, sorted_right, n_right, cond, width, args, rows_out, partials, done, total_out, s);
    case GJ_TS_F64: return launch_range_agg<double, true>(left, n_left, sorted_right, n_right, cond, width, args, rows_out, partials, done, total_out, s);
    default: return (int)cudaErrorInvalidValue;
  }
}

int gj_ts_small_sort(int key_type, const void *keys, int64_t n, int sum_type, const void *sum_col, void *run_img,
                     uint32_t *run_row, void *run_incl, void *sorted_keys, void *prefix, uint32_t *done,
                     gj_ts_stream_t stream) {
  if (n < 0 || n > GJ_TS_SMALL_MAX || key_type < GJ_TS_I32 || key_type > GJ_TS_F64 || sum_type > GJ_TS_F64)
    return (int)cudaErrorInvalidValue;
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  const bool wide = key_type == GJ_TS_I64 || key_type == GJ_TS_U64 || key_type == GJ_TS_F64;
  const bool float_sum = sum_type == GJ_TS_F32 || sum_type == GJ_TS_F64;
#define GJ_TS_SMALL(U, S) \
  launch_small_sort<U, S>(key_type, keys, n, sum_type, sum_col, run_img, run_row, run_incl, sorted_keys, prefix, done, s)
  if (wide) {
    if (sum_type < 0) return GJ_TS_SMALL(uint64_t, NoSum);
    return float_sum ? GJ_TS_SMALL(uint64_t, FloatSum) : GJ_TS_SMALL(uint64_t, IntSum);
  }
  if (sum_type < 0) return GJ_TS_SMALL(uint32_t, NoSum);
  return float_sum ? GJ_TS_SMALL(uint32_t, FloatSum) : GJ_TS_SMALL(uint32_t, IntSum);
#undef GJ_TS_SMALL
}

}  // extern "C"
