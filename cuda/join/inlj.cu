// Indexed nested-loop join (seed 003, algorithm 2): a sorted index over one key column, probed
// by binary search from the other. Build (images / string merge sort), probe (equal ranges),
// expansion of the ranges into gather maps, and the index rows that some probe hit.
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin/lbs.cuh"
#include "gpujoin_inlj.h"

namespace {
using namespace gj;

constexpr int NT = 256;
constexpr int EXPAND_VT = 8, EXPAND_NV = NT * EXPAND_VT;

inline cudaStream_t cs(gj_i_stream_t s) { return static_cast<cudaStream_t>(s); }
inline int grid(int64_t n) { return blocks_for_sms(n, NT * 4, tuning::kStreamBlocksPerSm); }
inline size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

// Unsigned image type of a numeric key.
template <class T>
struct Image;
template <> struct Image<int32_t> { using type = uint32_t; };
template <> struct Image<uint32_t> { using type = uint32_t; };
template <> struct Image<float> { using type = uint32_t; };
template <> struct Image<int64_t> { using type = uint64_t; };
template <> struct Image<uint64_t> { using type = uint64_t; };
template <> struct Image<double> { using type = uint64_t; };

// Row i of a validity bitmap (NULL: all valid).
__device__ __forceinline__ bool is_valid(const uint32_t *validity, int64_t i) {
  return validity == nullptr || ((validity[i >> 5] >> (i & 31)) & 1u) != 0;
}

// Sum of a 64-bit value over the warp, added to *out by lane 0 (all lanes must call it).
__device__ __forceinline__ void warp_add(unsigned long long v, unsigned long long *out) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0 && v != 0) atomicAdd(out, v);
}

// ---- Strings ----------------------------------------------------------------------------------

struct Str {
  const uint8_t *p;
  int64_t len;
};

__device__ __forceinline__ Str load_str(const int64_t *offsets, const uint8_t *bytes, int64_t row) {
  int64_t a = offsets[row], b = offsets[row + 1];
  return Str{bytes + a, b - a};
}

// The first 8 bytes big-endian, zero padded: prefix(a) < prefix(b) implies a < b byte-wise
// (where padded prefixes first differ, either both strings have real bytes, or the padded one
// is a proper prefix of the other, whose byte there is non-zero).
__device__ __forceinline__ uint64_t prefix8(Str s) {
  uint64_t v = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) v = (v << 8) | (k < s.len ? (uint64_t)s.p[k] : 0ull);
  return v;
}

// Byte-wise comparison (-1, 0, 1) of two strings whose prefixes are equal: their first
// min(8, |a|, |b|) bytes are then equal, so the comparison starts there.
__device__ __forceinline__ int compare_tail(Str a, Str b) {
  int64_t n = a.len < b.len ? a.len : b.len;
  for (int64_t k = n < 8 ? n : 8; k < n; ++k) {
    uint8_t x = a.p[k], y = b.p[k];
    if (x != y) return x < y ? -1 : 1;
  }
  return a.len < b.len ? -1 : (a.len > b.len ? 1 : 0);
}

struct StrKey {
  uint64_t prefix;
  uint32_t row;
  uint32_t pad;
};

// Byte-wise string order, ties by row id (a total order, so the sort needs no stability).
struct StrKeyLess {
  const int64_t *offsets;
  const uint8_t *bytes;
  __device__ __forceinline__ bool operator()(const StrKey &a, const StrKey &b) const {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    if (a.row == b.row) return false;
    int c = compare_tail(load_str(offsets, bytes, a.row), load_str(offsets, bytes, b.row));
    return c != 0 ? c < 0 : a.row < b.row;
  }
};

__global__ void string_keys_kernel(gj_i_column col, StrKey *keys) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < col.rows; i += stride) {
    keys[i] = StrKey{prefix8(load_str(col.offsets, col.bytes, i)), (uint32_t)i, 0u};
  }
}

__global__ void split_keys_kernel(const StrKey *keys, int64_t n, uint64_t *prefixes, uint32_t *rows) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    StrKey k = keys[i];
    prefixes[i] = k.prefix;
    rows[i] = k.row;
  }
}

// ---- Numeric build ----------------------------------------------------------------------------

template <class T>
__global__ void build_images_kernel(const T *values, int64_t n, typename Image<T>::type *images, uint32_t *rows,
                                    unsigned long long *nan_rows) {
  using U = typename Image<T>::type;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  unsigned long long nans = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    T x = values[i];
    bool nan = x != x;
    nans += nan;
    images[i] = nan ? ~U(0) : ordered(x);
    rows[i] = (uint32_t)i;
  }
  warp_add(nans, nan_rows);
}

// ---- Binary search ----------------------------------------------------------------------------

// cmp(j) compares index entry j with the probe key: < 0, 0 or > 0.
template <class Cmp>
__device__ __forceinline__ int64_t first_not_less(int64_t lo, int64_t hi, const Cmp &cmp) {
  int64_t len = hi - lo;
  while (len > 0) {
    int64_t half = len >> 1;
    if (cmp(lo + half) < 0) {
      lo += half + 1;
      len -= half + 1;
    } else {
      len = half;
    }
  }
  return lo;
}

template <class Cmp>
__device__ __forceinline__ int64_t first_greater(int64_t lo, int64_t hi, const Cmp &cmp) {
  int64_t len = hi - lo;
  while (len > 0) {
    int64_t half = len >> 1;
    if (cmp(lo + half) <= 0) {
      lo += half + 1;
      len -= half + 1;
    } else {
      len = half;
    }
  }
  return lo;
}

template <class U>
struct NumCmp {
  const U *keys;
  U q;
  __device__ __forceinline__ int operator()(int64_t j) const {
    U k = keys[j];
    return k < q ? -1 : (k > q ? 1 : 0);
  }
};

struct StrCmp {
  const uint64_t *keys;
  const uint32_t *rows;
  const int64_t *offsets;
  const uint8_t *bytes;
  Str q;
  uint64_t q_prefix;
  __device__ __forceinline__ int operator()(int64_t j) const {
    uint64_t k = keys[j];
    if (k != q_prefix) return k < q_prefix ? -1 : 1;
    return compare_tail(load_str(offsets, bytes, rows[j]), q);
  }
};

struct ProbeOut {
  bool keep_unmatched;
  uint32_t *lo;
  uint64_t *counts;
  uint8_t *matched;
};

// The equal range of probe row i among index entries [0, m), written to the outputs.
template <class Cmp>
__device__ __forceinline__ void equal_range(int64_t i, const Cmp &cmp, int64_t m, const ProbeOut &out) {
  int64_t a = first_not_less(0, m, cmp), b = a;
  if (a < m && cmp(a) == 0) b = first_greater(a + 1, m, cmp);
  uint64_t c = (uint64_t)(b - a);
  if (out.lo) out.lo[i] = c ? (uint32_t)a : kNone;
  if (out.counts) out.counts[i] = (c == 0 && out.keep_unmatched) ? 1ull : c;
  if (out.matched) out.matched[i] = c != 0;
}

template <class T>
__global__ void probe_numeric_kernel(const typename Image<T>::type *keys, int64_t m, const T *probe,
                                     const uint32_t *validity, int64_t n, ProbeOut out) {
  using U = typename Image<T>::type;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    T x = probe[i];
    bool none = x != x || !is_valid(validity, i);  // NaN and null equal nothing: an empty range
    NumCmp<U> cmp{keys, none ? U(0) : ordered(x)};
    equal_range(i, cmp, none ? 0 : m, out);
  }
}

__global__ void probe_utf8_kernel(gj_i_index idx, gj_i_column probe, const uint32_t *validity, ProbeOut out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < probe.rows; i += stride) {
    Str q = load_str(probe.offsets, probe.bytes, i);
    StrCmp cmp{static_cast<const uint64_t *>(idx.keys), idx.rows, idx.column.offsets, idx.column.bytes, q, prefix8(q)};
    equal_range(i, cmp, is_valid(validity, i) ? idx.size : 0, out);  // a null row: an empty range
  }
}

// ---- Expansion --------------------------------------------------------------------------------

__global__ void __launch_bounds__(NT) expand_kernel(const uint64_t *offsets, int64_t n, int64_t total,
                                                    const int64_t *parts, const uint32_t *lo, const uint32_t *rows,
                                                    uint32_t *out_probe, uint32_t *out_index) {
  __shared__ uint64_t shared[EXPAND_NV + 2];
  lbs_tile<NT, EXPAND_VT>(offsets, n, total, parts, shared, [&](int64_t item, int64_t seg, uint64_t rank) {
    uint32_t l = lo[seg];
    out_probe[item] = (uint32_t)seg;
    out_index[item] = l == kNone ? kNone : rows[(uint64_t)l + rank];
  });
}

// ---- Index rows hit by the probe --------------------------------------------------------------

__global__ void mark_runs_kernel(const uint32_t *lo, int64_t n, uint8_t *mark) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t l = lo[i];
    if (l != kNone) mark[l] = 1;  // every hit range starts at its key's first entry
  }
}

// v[j] = (j << 1 | mark[j]) at the first entry of each run of equal keys, else 0; a running
// maximum then gives every entry its run's first entry and mark.
template <class U>
__global__ void run_heads_numeric_kernel(const U *keys, int64_t m, const uint8_t *mark, uint64_t *v) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride) {
    bool head = j == 0 || keys[j] != keys[j - 1];
    v[j] = head ? ((uint64_t)j << 1) | (mark[j] ? 1ull : 0ull) : 0ull;
  }
}

__global__ void run_heads_utf8_kernel(gj_i_index idx, const uint8_t *mark, uint64_t *v) {
  const uint64_t *keys = static_cast<const uint64_t *>(idx.keys);
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < idx.size; j += stride) {
    bool head = j == 0 || keys[j] != keys[j - 1] ||
                compare_tail(load_str(idx.column.offsets, idx.column.bytes, idx.rows[j - 1]),
                             load_str(idx.column.offsets, idx.column.bytes, idx.rows[j])) != 0;
    v[j] = head ? ((uint64_t)j << 1) | (mark[j] ? 1ull : 0ull) : 0ull;
  }
}

struct MaxU64 {
  __device__ __forceinline__ uint64_t operator()(uint64_t a, uint64_t b) const { return a > b ? a : b; }
};

__global__ void scatter_matched_kernel(const uint64_t *v, const uint32_t *rows, int64_t m, uint8_t *matched_rows) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride) {
    matched_rows[rows[j]] = (uint8_t)(v[j] & 1ull);
  }
}

__global__ void valid_entries_kernel(const uint32_t *rows, int64_t m, const uint32_t *validity, uint8_t *flags) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride) {
    flags[j] = is_valid(validity, (int64_t)rows[j]) ? 1 : 0;
  }
}

__global__ void count_flags_kernel(const uint8_t *flags, int64_t n, bool want, unsigned long long *count) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  unsigned long long c = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) c += ((flags[i] != 0) == want);
  warp_add(c, count);
}

template <class T>
int build_images(const gj_i_column &col, void *images, uint32_t *rows, unsigned long long *nan_rows, cudaStream_t s) {
  build_images_kernel<T><<<grid(col.rows), NT, 0, s>>>(static_cast<const T *>(col.values), col.rows,
                                                       static_cast<typename Image<T>::type *>(images), rows, nan_rows);
  return launch_status();
}

template <class T>
int probe_numeric(const gj_i_index &idx, const gj_i_column &probe, const uint32_t *validity, const ProbeOut &out,
                  cudaStream_t s) {
  probe_numeric_kernel<T><<<grid(probe.rows), NT, 0, s>>>(static_cast<const typename Image<T>::type *>(idx.keys),
                                                          idx.size, static_cast<const T *>(probe.values), validity,
                                                          probe.rows, out);
  return launch_status();
}

bool is_wide(gj_i_type t) { return t == GJ_I_I64 || t == GJ_I_U64 || t == GJ_I_F64 || t == GJ_I_UTF8; }

}  // namespace

extern "C" int gj_i_build_images(gj_i_column col, void *images, uint32_t *rows, unsigned long long *nan_rows,
                                 gj_i_stream_t stream) {
  if (col.rows <= 0) return 0;
  cudaStream_t s = cs(stream);
  switch (col.type) {
    case GJ_I_I32: return build_images<int32_t>(col, images, rows, nan_rows, s);
    case GJ_I_I64: return build_images<int64_t>(col, images, rows, nan_rows, s);
    case GJ_I_U32: return build_images<uint32_t>(col, images, rows, nan_rows, s);
    case GJ_I_U64: return build_images<uint64_t>(col, images, rows, nan_rows, s);
    case GJ_I_F32: return build_images<float>(col, images, rows, nan_rows, s);
    case GJ_I_F64: return build_images<double>(col, images, rows, nan_rows, s);
    default: return (int)cudaErrorInvalidValue;
  }
}

extern "C" int gj_i_sort_strings(void *temp, size_t *temp_bytes, gj_i_column col, uint64_t *prefixes, uint32_t *rows,
                                 gj_i_stream_t stream) {
  if (col.type != GJ_I_UTF8) return (int)cudaErrorInvalidValue;
  const int64_t n = col.rows;
  if (n <= 0) {
    if (!temp) *temp_bytes = 1;
    return 0;
  }
  cudaStream_t s = cs(stream);
  StrKeyLess less{col.offsets, col.bytes};
  const size_t key_bytes = align256(sizeof(StrKey) * (size_t)n);
  size_t sort_bytes = 0;
  cudaError_t e = cub::DeviceMergeSort::SortKeys(nullptr, sort_bytes, static_cast<StrKey *>(nullptr), n, less, s);
  if (e != cudaSuccess) return (int)e;
  if (!temp) {
    *temp_bytes = key_bytes + sort_bytes;
    return 0;
  }
  if (*temp_bytes < key_bytes + sort_bytes) return (int)cudaErrorInvalidValue;
  StrKey *keys = static_cast<StrKey *>(temp);
  string_keys_kernel<<<grid(n), NT, 0, s>>>(col, keys);
  if (int rc = launch_status()) return rc;
  e = cub::DeviceMergeSort::SortKeys(static_cast<char *>(temp) + key_bytes, sort_bytes, keys, n, less, s);
  if (e != cudaSuccess) return (int)e;
  split_keys_kernel<<<grid(n), NT, 0, s>>>(keys, n, prefixes, rows);
  return launch_status();
}

extern "C" int gj_i_valid_entries(const uint32_t *rows, int64_t m, const uint32_t *validity, uint8_t *flags,
                                  gj_i_stream_t stream) {
  if (m <= 0) return 0;
  valid_entries_kernel<<<grid(m), NT, 0, cs(stream)>>>(rows, m, validity, flags);
  return launch_status();
}

extern "C" int gj_i_probe(gj_i_index idx, gj_i_column probe, const uint32_t *probe_validity, int keep_unmatched,
                          uint32_t *lo, uint64_t *counts, uint8_t *matched, gj_i_stream_t stream) {
  if (probe.type != idx.column.type) return (int)cudaErrorInvalidValue;
  if (probe.rows <= 0) return 0;
  cudaStream_t s = cs(stream);
  ProbeOut out{keep_unmatched != 0, lo, counts, matched};
  switch (probe.type) {
    case GJ_I_I32: return probe_numeric<int32_t>(idx, probe, probe_validity, out, s);
    case GJ_I_I64: return probe_numeric<int64_t>(idx, probe, probe_validity, out, s);
    case GJ_I_U32: return probe_numeric<uint32_t>(idx, probe, probe_validity, out, s);
    case GJ_I_U64: return probe_numeric<uint64_t>(idx, probe, probe_validity, out, s);
    case GJ_I_F32: return probe_numeric<float>(idx, probe, probe_validity, out, s);
    case GJ_I_F64: return probe_numeric<double>(idx, probe, probe_validity, out, s);
    case GJ_I_UTF8:
      probe_utf8_kernel<<<grid(probe.rows), NT, 0, s>>>(idx, probe, probe_validity, out);
      return launch_status();
    default: return (int)cudaErrorInvalidValue;
  }
}

extern "C" int gj_i_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t n, int64_t total,
                           const uint32_t *lo, const uint32_t *index_rows, uint32_t *out_probe, uint32_t *out_index,
                           gj_i_stream_t stream) {
  int64_t *parts = nullptr, tiles = 0;
  int rc = lbs_setup(temp, temp_bytes, offsets, n, total, EXPAND_NV, cs(stream), &parts, &tiles);
  if (rc != 0) return rc < 0 ? 0 : rc;
  expand_kernel<<<(unsigned)tiles, NT, 0, cs(stream)>>>(offsets, n, total, parts, lo, index_rows, out_probe,
                                                        out_index);
  return launch_status();
}

extern "C" int gj_i_index_matched(void *temp, size_t *temp_bytes, gj_i_index idx, const uint32_t *lo, int64_t n,
                                  uint8_t *matched_rows, gj_i_stream_t stream) {
  const int64_t m = idx.size;
  if (m <= 0 || n <= 0) {  // nothing can be hit: the zeroed flags are the answer
    if (!temp) *temp_bytes = 1;
    return 0;
  }
  cudaStream_t s = cs(stream);
  const size_t mark_bytes = align256((size_t)m), v_bytes = align256(sizeof(uint64_t) * (size_t)m);
  size_t scan_bytes = 0;
  cudaError_t e = cub::DeviceScan::InclusiveScan(nullptr, scan_bytes, static_cast<uint64_t *>(nullptr),
                                                 static_cast<uint64_t *>(nullptr), MaxU64{}, m, s);
  if (e != cudaSuccess) return (int)e;
  const size_t need = mark_bytes + 2 * v_bytes + scan_bytes;
  if (!temp) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return (int)cudaErrorInvalidValue;
  char *t = static_cast<char *>(temp);
  uint8_t *mark = reinterpret_cast<uint8_t *>(t);
  uint64_t *v = reinterpret_cast<uint64_t *>(t + mark_bytes);
  uint64_t *w = reinterpret_cast<uint64_t *>(t + mark_bytes + v_bytes);
  void *scan_temp = t + mark_bytes + 2 * v_bytes;
  if ((e = cudaMemsetAsync(mark, 0, (size_t)m, s)) != cudaSuccess) return (int)e;
  mark_runs_kernel<<<grid(n), NT, 0, s>>>(lo, n, mark);
  if (int rc = launch_status()) return rc;
  if (idx.column.type == GJ_I_UTF8) {
    run_heads_utf8_kernel<<<grid(m), NT, 0, s>>>(idx, mark, v);
  } else if (is_wide(idx.column.type)) {
    run_heads_numeric_kernel<uint64_t><<<grid(m), NT, 0, s>>>(static_cast<const uint64_t *>(idx.keys), m, mark, v);
  } else {
    run_heads_numeric_kernel<uint32_t><<<grid(m), NT, 0, s>>>(static_cast<const uint32_t *>(idx.keys), m, mark, v);
  }
  if (int rc = launch_status()) return rc;
  e = cub::DeviceScan::InclusiveScan(scan_temp, scan_bytes, v, w, MaxU64{}, m, s);
  if (e != cudaSuccess) return (int)e;
  scatter_matched_kernel<<<grid(m), NT, 0, s>>>(w, idx.rows, m, matched_rows);
  return launch_status();
}

extern "C" int gj_i_count_flags(const uint8_t *flags, int64_t n, int want, unsigned long long *count,
                                gj_i_stream_t stream) {
  if (n <= 0) return 0;
  count_flags_kernel<<<grid(n), NT, 0, cs(stream)>>>(flags, n, want != 0, count);
  return launch_status();
}
