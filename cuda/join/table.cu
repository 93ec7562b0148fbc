// Table kernels: the device side of the one columnar model (Arrow's layout). Widening narrow
// keys, repacking bitmaps read at a bit offset, gathers of every physical layout (fixed width,
// bits, strings), exact dense ranks of strings, and a sortedness check.
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_table.h"

namespace {
using namespace gj;

constexpr int NT = 256;

inline cudaStream_t cs(gj_tb_stream_t s) { return static_cast<cudaStream_t>(s); }
inline int grid(int64_t n) { return blocks_for(n, NT * 4, grid_cap(tuning::kStreamBlocksPerSm)); }
inline size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

#define GRID_STRIDE(i, n)                                                                \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, _stride = (int64_t)gridDim.x * blockDim.x; \
       i < (n); i += _stride)

__device__ __forceinline__ bool bit_at(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

// ---- Widening and bitmaps --------------------------------------------------------------------

template <class T>
__global__ void widen_kernel(const T *values, int64_t offset, int64_t n, uint32_t *out) {
  GRID_STRIDE(i, n) {
    if constexpr (std::is_signed<T>::value) {
      out[i] = (uint32_t)(int32_t)values[offset + i];
    } else {
      out[i] = (uint32_t)values[offset + i];
    }
  }
}

__global__ void widen_bits_kernel(const uint8_t *bits, int64_t offset, int64_t n, uint32_t *out) {
  GRID_STRIDE(i, n) { out[i] = bit_at(bits, offset + i) ? 1u : 0u; }
}

// One thread per output word.
__global__ void repack_bits_kernel(const uint8_t *bits, int64_t bit_offset, int64_t n, uint32_t *out) {
  const int64_t words = (n + 31) / 32;
  GRID_STRIDE(w, words) {
    uint32_t v = 0;
    const int64_t base = w * 32;
    const int lim = (int)((n - base) < 32 ? (n - base) : 32);
    for (int b = 0; b < lim; ++b) v |= (uint32_t)bit_at(bits, bit_offset + base + b) << b;
    out[w] = v;
  }
}

__global__ void split_decimal_kernel(const uint64_t *values, int64_t offset, int64_t n, int64_t *hi, uint64_t *lo) {
  GRID_STRIDE(i, n) {
    lo[i] = values[2 * (offset + i)];
    hi[i] = (int64_t)values[2 * (offset + i) + 1];
  }
}

// ---- Gathers ---------------------------------------------------------------------------------

struct B16 {
  uint64_t lo, hi;
};

template <class T>
__global__ void gather_fixed_kernel(const T *values, int64_t offset, int64_t len, const uint32_t *map, int64_t n,
                                    T *out) {
  GRID_STRIDE(k, n) {
    uint32_t r = map[k];
    T v{};
    if (r != kNone && (int64_t)r < len) v = values[offset + r];
    out[k] = v;
  }
}

__global__ void gather_bits_kernel(const uint8_t *bits, int64_t bit_offset, int64_t len, const uint32_t *map,
                                   int64_t n, uint32_t *out) {
  const int64_t words = (n + 31) / 32;
  GRID_STRIDE(w, words) {
    uint32_t v = 0;
    const int64_t base = w * 32;
    const int lim = (int)((n - base) < 32 ? (n - base) : 32);
    for (int b = 0; b < lim; ++b) {
      uint32_t r = map[base + b];
      bool set = r != kNone && (int64_t)r < len && (bits == nullptr || bit_at(bits, bit_offset + r));
      v |= (uint32_t)set << b;
    }
    out[w] = v;
  }
}

struct Str {
  const uint8_t *p;
  int64_t len;
};

__device__ __forceinline__ Str load_str(const gj_tb_strings &c, int64_t row) {
  int64_t a, b;
  if (c.wide_offsets) {
    const int64_t *o = static_cast<const int64_t *>(c.offsets) + c.offset;
    a = o[row];
    b = o[row + 1];
  } else {
    const int32_t *o = static_cast<const int32_t *>(c.offsets) + c.offset;
    a = o[row];
    b = o[row + 1];
  }
  return Str{c.bytes + a, b - a};
}

__global__ void string_lengths_kernel(gj_tb_strings col, const uint32_t *map, int64_t n, int64_t *lengths) {
  GRID_STRIDE(k, n + 1) {
    int64_t l = 0;
    if (k < n) {
      uint32_t r = map[k];
      if (r != kNone && (int64_t)r < col.rows) l = load_str(col, r).len;
    }
    lengths[k] = l;
  }
}

// One warp per output string.
__global__ void gather_string_bytes_kernel(gj_tb_strings col, const uint32_t *map, int64_t n,
                                           const int64_t *out_offsets, uint8_t *out) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t k = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; k < n; k += warps) {
    uint32_t r = map[k];
    if (r == kNone || (int64_t)r >= col.rows) continue;
    Str s = load_str(col, r);
    uint8_t *dst = out + out_offsets[k];
    for (int64_t b = lane; b < s.len; b += 32) dst[b] = s.p[b];
  }
}

__global__ void narrow_offsets_kernel(const int64_t *in, int64_t n, int32_t *out) {
  GRID_STRIDE(i, n) { out[i] = (int32_t)in[i]; }
}

// ---- String ranks ----------------------------------------------------------------------------

// The first 8 bytes big-endian, zero padded: prefix(a) < prefix(b) implies a < b byte-wise.
__device__ __forceinline__ uint64_t prefix8(Str s) {
  uint64_t v = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) v = (v << 8) | (k < s.len ? (uint64_t)s.p[k] : 0ull);
  return v;
}

// Byte-wise comparison of two strings whose 8-byte prefixes are equal.
__device__ __forceinline__ int compare_tail(Str a, Str b) {
  int64_t n = a.len < b.len ? a.len : b.len;
  for (int64_t k = n < 8 ? n : 8; k < n; ++k) {
    uint8_t x = a.p[k], y = b.p[k];
    if (x != y) return x < y ? -1 : 1;
  }
  return a.len < b.len ? -1 : (a.len > b.len ? 1 : 0);
}

// A string of either column: id < a.rows is row id of a, else row id - a.rows of b.
struct RankKey {
  uint64_t prefix;
  uint64_t id;
};

struct TwoColumns {
  gj_tb_strings a, b;
  __device__ __forceinline__ Str at(uint64_t id) const {
    return id < (uint64_t)a.rows ? load_str(a, (int64_t)id) : load_str(b, (int64_t)(id - (uint64_t)a.rows));
  }
  __device__ __forceinline__ int compare(const RankKey &x, const RankKey &y) const {
    if (x.prefix != y.prefix) return x.prefix < y.prefix ? -1 : 1;
    return compare_tail(at(x.id), at(y.id));
  }
};

struct RankKeyLess {
  TwoColumns cols;
  __device__ __forceinline__ bool operator()(const RankKey &x, const RankKey &y) const {
    int c = cols.compare(x, y);
    return c != 0 ? c < 0 : x.id < y.id;
  }
};

__global__ void rank_keys_kernel(TwoColumns cols, int64_t n, RankKey *keys) {
  GRID_STRIDE(i, n) { keys[i] = RankKey{prefix8(cols.at((uint64_t)i)), (uint64_t)i}; }
}

__global__ void rank_heads_kernel(TwoColumns cols, const RankKey *keys, int64_t n, uint32_t *heads) {
  GRID_STRIDE(i, n) { heads[i] = (i == 0 || cols.compare(keys[i - 1], keys[i]) != 0) ? 1u : 0u; }
}

__global__ void rank_scatter_kernel(TwoColumns cols, const RankKey *keys, const uint32_t *ranks, int64_t n,
                                    uint32_t *ranks_a, uint32_t *ranks_b, uint32_t *distinct) {
  GRID_STRIDE(i, n) {
    uint64_t id = keys[i].id;
    uint32_t r = ranks[i] - 1;  // inclusive scan of heads: 1-based
    if (id < (uint64_t)cols.a.rows) {
      ranks_a[id] = r;
    } else {
      ranks_b[id - (uint64_t)cols.a.rows] = r;
    }
    if (i == n - 1) *distinct = ranks[i];
  }
}

// ---- Sortedness ------------------------------------------------------------------------------

template <class T>
__device__ __forceinline__ auto image(T x) {
  if constexpr (std::is_floating_point<T>::value) {
    using U = decltype(ordered(x));
    return x != x ? ~U(0) : ordered(x);
  } else {
    return ordered(x);
  }
}

template <class T>
__global__ void descents_kernel(const T *v, int64_t n, unsigned long long *count) {
  unsigned long long c = 0;
  GRID_STRIDE(i, n) {
    if (i > 0 && image(v[i]) < image(v[i - 1])) ++c;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0 && c != 0) atomicAdd(count, c);
}

}  // namespace

extern "C" int gj_tb_widen(const void *values, gj_tb_narrow kind, int64_t offset, int64_t n, uint32_t *out,
                           gj_tb_stream_t stream) {
  if (n <= 0) return 0;
  cudaStream_t s = cs(stream);
  switch (kind) {
    case GJ_TB_I8: widen_kernel<<<grid(n), NT, 0, s>>>(static_cast<const int8_t *>(values), offset, n, out); break;
    case GJ_TB_I16: widen_kernel<<<grid(n), NT, 0, s>>>(static_cast<const int16_t *>(values), offset, n, out); break;
    case GJ_TB_U8: widen_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint8_t *>(values), offset, n, out); break;
    case GJ_TB_U16: widen_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint16_t *>(values), offset, n, out); break;
    case GJ_TB_BOOL: widen_bits_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint8_t *>(values), offset, n, out); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return launch_status();
}

extern "C" int gj_tb_split_decimal(const void *values, int64_t offset, int64_t n, int64_t *hi, uint64_t *lo,
                                   gj_tb_stream_t stream) {
  if (n <= 0) return 0;
  split_decimal_kernel<<<grid(n), NT, 0, cs(stream)>>>(static_cast<const uint64_t *>(values), offset, n, hi, lo);
  return launch_status();
}

extern "C" int gj_tb_repack_bits(const uint8_t *bits, int64_t bit_offset, int64_t n, uint32_t *out_words,
                                 gj_tb_stream_t stream) {
  if (n <= 0) return 0;
  repack_bits_kernel<<<grid((n + 31) / 32), NT, 0, cs(stream)>>>(bits, bit_offset, n, out_words);
  return launch_status();
}

extern "C" int gj_tb_gather_fixed(const void *values, int width, int64_t offset, int64_t len, const uint32_t *map,
                                  int64_t n, void *out, gj_tb_stream_t stream) {
  if (n <= 0) return 0;
  cudaStream_t s = cs(stream);
  switch (width) {
    case 1: gather_fixed_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint8_t *>(values), offset, len, map, n, static_cast<uint8_t *>(out)); break;
    case 2: gather_fixed_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint16_t *>(values), offset, len, map, n, static_cast<uint16_t *>(out)); break;
    case 4: gather_fixed_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint32_t *>(values), offset, len, map, n, static_cast<uint32_t *>(out)); break;
    case 8: gather_fixed_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint64_t *>(values), offset, len, map, n, static_cast<uint64_t *>(out)); break;
    case 16: gather_fixed_kernel<<<grid(n), NT, 0, s>>>(static_cast<const B16 *>(values), offset, len, map, n, static_cast<B16 *>(out)); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return launch_status();
}

extern "C" int gj_tb_gather_bits(const uint8_t *bits, int64_t bit_offset, int64_t len, const uint32_t *map, int64_t n,
                                 uint32_t *out_words, gj_tb_stream_t stream) {
  if (n <= 0) return 0;
  gather_bits_kernel<<<grid((n + 31) / 32), NT, 0, cs(stream)>>>(bits, bit_offset, len, map, n, out_words);
  return launch_status();
}

extern "C" int gj_tb_string_lengths(gj_tb_strings col, const uint32_t *map, int64_t n, int64_t *lengths,
                                    gj_tb_stream_t stream) {
  if (n < 0) return (int)cudaErrorInvalidValue;
  string_lengths_kernel<<<grid(n + 1), NT, 0, cs(stream)>>>(col, map, n, lengths);
  return launch_status();
}

extern "C" int gj_tb_gather_string_bytes(gj_tb_strings col, const uint32_t *map, int64_t n, const int64_t *out_offsets,
                                         uint8_t *out_bytes, gj_tb_stream_t stream) {
  if (n <= 0) return 0;
  gather_string_bytes_kernel<<<blocks_for(n, NT / 32, grid_cap(tuning::kStreamBlocksPerSm)), NT, 0, cs(stream)>>>(col, map, n, out_offsets,
                                                                                     out_bytes);
  return launch_status();
}

extern "C" int gj_tb_narrow_offsets(const int64_t *in, int64_t n, int32_t *out, gj_tb_stream_t stream) {
  if (n <= 0) return 0;
  narrow_offsets_kernel<<<grid(n), NT, 0, cs(stream)>>>(in, n, out);
  return launch_status();
}

extern "C" int gj_tb_string_ranks(void *temp, size_t *temp_bytes, gj_tb_strings a, gj_tb_strings b, uint32_t *ranks_a,
                                  uint32_t *ranks_b, uint32_t *distinct, gj_tb_stream_t stream) {
  const int64_t n = a.rows + b.rows;
  if (a.rows < 0 || b.rows < 0 || n >= ((int64_t)1 << 32)) return (int)cudaErrorInvalidValue;
  cudaStream_t s = cs(stream);
  if (n == 0) {
    if (!temp) {
      *temp_bytes = 1;
      return 0;
    }
    return (int)cudaMemsetAsync(distinct, 0, sizeof(uint32_t), s);
  }
  TwoColumns cols{a, b};
  RankKeyLess less{cols};
  const size_t key_bytes = align256(sizeof(RankKey) * (size_t)n);
  const size_t u32_bytes = align256(sizeof(uint32_t) * (size_t)n);
  size_t sort_bytes = 0, scan_bytes = 0;
  cudaError_t e = cub::DeviceMergeSort::SortKeys(nullptr, sort_bytes, static_cast<RankKey *>(nullptr), n, less, s);
  if (e != cudaSuccess) return (int)e;
  e = cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, static_cast<uint32_t *>(nullptr),
                                    static_cast<uint32_t *>(nullptr), n, s);
  if (e != cudaSuccess) return (int)e;
  const size_t work = align256(sort_bytes > scan_bytes ? sort_bytes : scan_bytes);
  const size_t need = key_bytes + 2 * u32_bytes + work;
  if (!temp) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return (int)cudaErrorInvalidValue;
  char *t = static_cast<char *>(temp);
  RankKey *keys = reinterpret_cast<RankKey *>(t);
  uint32_t *heads = reinterpret_cast<uint32_t *>(t + key_bytes);
  uint32_t *ranks = reinterpret_cast<uint32_t *>(t + key_bytes + u32_bytes);
  void *w = t + key_bytes + 2 * u32_bytes;
  rank_keys_kernel<<<grid(n), NT, 0, s>>>(cols, n, keys);
  if (int rc = launch_status()) return rc;
  size_t wb = work;
  e = cub::DeviceMergeSort::SortKeys(w, wb, keys, n, less, s);
  if (e != cudaSuccess) return (int)e;
  rank_heads_kernel<<<grid(n), NT, 0, s>>>(cols, keys, n, heads);
  if (int rc = launch_status()) return rc;
  wb = work;
  e = cub::DeviceScan::InclusiveSum(w, wb, heads, ranks, n, s);
  if (e != cudaSuccess) return (int)e;
  rank_scatter_kernel<<<grid(n), NT, 0, s>>>(cols, keys, ranks, n, ranks_a, ranks_b, distinct);
  return launch_status();
}

extern "C" int gj_tb_count_descents(const void *values, gj_tb_numeric kind, int64_t n, unsigned long long *count,
                                    gj_tb_stream_t stream) {
  if (n <= 1) return 0;
  cudaStream_t s = cs(stream);
  switch (kind) {
    case GJ_TB_NUM_I32: descents_kernel<<<grid(n), NT, 0, s>>>(static_cast<const int32_t *>(values), n, count); break;
    case GJ_TB_NUM_I64: descents_kernel<<<grid(n), NT, 0, s>>>(static_cast<const int64_t *>(values), n, count); break;
    case GJ_TB_NUM_U32: descents_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint32_t *>(values), n, count); break;
    case GJ_TB_NUM_U64: descents_kernel<<<grid(n), NT, 0, s>>>(static_cast<const uint64_t *>(values), n, count); break;
    case GJ_TB_NUM_F32: descents_kernel<<<grid(n), NT, 0, s>>>(static_cast<const float *>(values), n, count); break;
    case GJ_TB_NUM_F64: descents_kernel<<<grid(n), NT, 0, s>>>(static_cast<const double *>(values), n, count); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return launch_status();
}
