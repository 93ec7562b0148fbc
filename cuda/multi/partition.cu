// Where each row of a multi-GPU join goes: a hash of its key columns that every GPU computes
// alike (strings by their bytes, floats normalized), a strided sample of it for the host's skew
// check, and the destination part of each row (hash partitioned, heavy keys split or replicated).
#include "multi.cuh"

namespace {
using namespace gj;
using namespace gj::multi;

struct KeyColumns {
  gj_m_key_column c[GJ_M_MAX_KEYS];
  int n;
};

__device__ __forceinline__ bool bit_at(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

__device__ __forceinline__ uint64_t combine(uint64_t h, uint64_t v) { return fmix64(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))); }

// The bytes of one string, 8 at a time (unaligned reads by bytes), then the length.
__device__ uint64_t hash_bytes(const uint8_t *p, int64_t len) {
  uint64_t h = 0x84222325cbf29ce4ull;
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w = 0;
#pragma unroll
    for (int b = 0; b < 8; ++b) w |= (uint64_t)p[i + b] << (8 * b);
    h = combine(h, w);
  }
  if (i < len) {
    uint64_t w = 0;
    for (int b = 0; i + b < len; ++b) w |= (uint64_t)p[i + b] << (8 * b);
    h = combine(h, w);
  }
  return combine(h, (uint64_t)len);
}

// The value of row `row` of column `c` as 64 bits equal for equal keys; *nan where it is a NaN.
__device__ uint64_t value_image(const gj_m_key_column &c, int64_t row, bool *nan) {
  const int64_t i = c.offset + row;
  switch (c.kind) {
    case GJ_M_INT:
      switch (c.width) {
        case 1: return (uint64_t)(int64_t)((const int8_t *)c.values)[i];
        case 2: return (uint64_t)(int64_t)((const int16_t *)c.values)[i];
        case 4: return (uint64_t)(int64_t)((const int32_t *)c.values)[i];
        default: return (uint64_t)((const int64_t *)c.values)[i];
      }
    case GJ_M_UINT:
      switch (c.width) {
        case 1: return ((const uint8_t *)c.values)[i];
        case 2: return ((const uint16_t *)c.values)[i];
        case 4: return ((const uint32_t *)c.values)[i];
        default: return ((const uint64_t *)c.values)[i];
      }
    case GJ_M_FLOAT:
      if (c.width == 4) {
        const float f = ((const float *)c.values)[i];
        if (f != f) {
          *nan = true;
          return 0x7fc00000ull;
        }
        return f == 0.0f ? 0ull : (uint64_t)__float_as_uint(f);
      } else {
        const double d = ((const double *)c.values)[i];
        if (d != d) {
          *nan = true;
          return 0x7ff8000000000000ull;
        }
        return d == 0.0 ? 0ull : (uint64_t)__double_as_longlong(d);
      }
    case GJ_M_BOOL: return bit_at((const uint8_t *)c.values, i) ? 1ull : 0ull;
    case GJ_M_DECIMAL: {
      const uint64_t *w = (const uint64_t *)c.values;
      return combine(w[2 * i], w[2 * i + 1]);
    }
    default: {  // GJ_M_STRING
      int64_t a, b;
      if (c.width == 4) {
        a = ((const int32_t *)c.offsets)[i];
        b = ((const int32_t *)c.offsets)[i + 1];
      } else {
        a = ((const int64_t *)c.offsets)[i];
        b = ((const int64_t *)c.offsets)[i + 1];
      }
      return hash_bytes((const uint8_t *)c.values + a, b - a);
    }
  }
}

__global__ void row_hash_kernel(KeyColumns cols, int64_t n, int null_equal, int nan_equal, uint64_t *hash,
                                uint8_t *never_match) {
  GJ_M_GRID_STRIDE(row, n) {
    uint64_t h = 0x2545f4914f6cdd1dull;
    bool never = false;
    for (int k = 0; k < cols.n; ++k) {
      const gj_m_key_column &c = cols.c[k];
      if (c.validity && !bit_at(c.validity, c.offset + row)) {
        if (!null_equal) never = true;
        h = combine(h, 0x6e756c6c00000000ull + (uint64_t)k);  // the null marker of column k
        continue;
      }
      bool nan = false;
      const uint64_t v = value_image(c, row, &nan);
      if (nan && !nan_equal) never = true;
      h = combine(h, v);
    }
    hash[row] = h;
    never_match[row] = never ? 1 : 0;
  }
}

__global__ void sample_kernel(const uint64_t *hash, const uint8_t *never_match, int64_t stride, int64_t count,
                              uint64_t *sample, uint8_t *sample_never) {
  GJ_M_GRID_STRIDE(j, count) {
    sample[j] = hash[j * stride];
    sample_never[j] = never_match[j * stride];
  }
}

__device__ __forceinline__ int64_t find(const uint64_t *heavy, int64_t n, uint64_t h) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (heavy[mid] < h) lo = mid + 1; else hi = mid;
  }
  return lo < n && heavy[lo] == h ? lo : -1;
}

__global__ void destinations_kernel(const uint64_t *hash, const uint8_t *never_match, int64_t n, uint64_t row_base,
                                    uint32_t parts, const uint64_t *heavy, const uint8_t *split, int64_t n_heavy,
                                    uint32_t *dest) {
  GJ_M_GRID_STRIDE(i, n) {
    const uint64_t h = hash[i];
    // High bits of a second mix: independent of the bits the local join's partitioning uses.
    const uint32_t spread = (uint32_t)((fmix64((row_base + (uint64_t)i) ^ 0x5851f42d4c957f2dull) >> 32) % parts);
    uint32_t d;
    if (never_match[i]) {
      d = spread;
    } else {
      const int64_t k = n_heavy > 0 ? find(heavy, n_heavy, h) : -1;
      if (k >= 0) d = split[k] ? spread : parts;
      else d = (uint32_t)((fmix64(h ^ 0x14057b7ef767814full) >> 32) % parts);
    }
    dest[i] = d;
  }
}

}  // namespace

extern "C" int gj_m_row_hash(const gj_m_key_column *cols, int ncols, int64_t n, int null_equal, int nan_equal,
                             uint64_t *hash, uint8_t *never_match, gj_m_stream_t stream) {
  if (ncols < 0 || ncols > GJ_M_MAX_KEYS) return (int)cudaErrorInvalidValue;
  if (n <= 0) return 0;
  KeyColumns k{};
  for (int c = 0; c < ncols; ++c) k.c[c] = cols[c];
  k.n = ncols;
  row_hash_kernel<<<grid(n), NT, 0, cs(stream)>>>(k, n, null_equal, nan_equal, hash, never_match);
  return launch_status();
}

extern "C" int gj_m_sample(const uint64_t *hash, const uint8_t *never_match, int64_t stride, int64_t count,
                           uint64_t *sample, uint8_t *sample_never, gj_m_stream_t stream) {
  if (count <= 0) return 0;
  sample_kernel<<<grid(count), NT, 0, cs(stream)>>>(hash, never_match, stride, count, sample, sample_never);
  return launch_status();
}

extern "C" int gj_m_destinations(const uint64_t *hash, const uint8_t *never_match, int64_t n, uint64_t row_base,
                                 uint32_t parts, const uint64_t *heavy, const uint8_t *split, int64_t n_heavy,
                                 uint32_t *dest, gj_m_stream_t stream) {
  if (parts == 0) return (int)cudaErrorInvalidValue;
  if (n <= 0) return 0;
  destinations_kernel<<<grid(n), NT, 0, cs(stream)>>>(hash, never_match, n, row_base, parts, heavy, split, n_heavy,
                                                       dest);
  return launch_status();
}
