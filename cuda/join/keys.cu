// Key images, derived (packed or hashed) keys, verification of hashed matches, and row flags.
#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_join.h"

namespace {
using namespace gj;

__device__ __forceinline__ uint64_t image_of(uint32_t x) { return x; }
__device__ __forceinline__ uint64_t image_of(uint64_t x) { return x; }
__device__ __forceinline__ uint64_t image_of(int32_t x) { return ordered(x); }
__device__ __forceinline__ uint64_t image_of(int64_t x) { return ordered(x); }
__device__ __forceinline__ uint64_t image_of(float x) {
  if (x != x) x = __uint_as_float(0x7FC00000u);  // one NaN
  return ordered(x);                             // ordered() maps -0.0 to +0.0
}
__device__ __forceinline__ uint64_t image_of(double x) {
  if (x != x) x = __longlong_as_double(0x7FF8000000000000ll);
  return ordered(x);
}
__device__ __forceinline__ bool is_nan(float x) { return x != x; }
__device__ __forceinline__ bool is_nan(double x) { return x != x; }
template <class T>
__device__ __forceinline__ bool is_nan(T) { return false; }

template <class T>
__global__ void image_kernel(const T *col, const uint32_t *validity, int64_t n, int column, uint64_t *image,
                             uint8_t *flags) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    bool valid = !validity || ((validity[i >> 5] >> (i & 31)) & 1);
    T v = col[i];
    image[i] = valid ? image_of(v) : 0;
    uint8_t f = (valid ? 0 : 1) | (valid && is_nan(v) ? 2 : 0);
    if (f) flags[i] |= (uint8_t)(f << (2 * column));
  }
}

__global__ void derive_key_kernel(const uint64_t *img0, const uint64_t *img1, const uint64_t *img2,
                                  const uint64_t *img3, int w0, int w1, int w2, int w3, int ncols,
                                  const uint8_t *flags, int64_t n, bool hash, bool null_equal, bool nan_never,
                                  uint64_t hash_mask, uint64_t *key, uint8_t *never) {
  const uint64_t *imgs[4] = {img0, img1, img2, img3};
  const int widths[4] = {w0, w1, w2, w3};
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint8_t f = flags ? flags[i] : 0;
    uint64_t k = hash ? 0x9E3779B97F4A7C15ull : 0;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (c >= ncols) break;
      uint64_t v = imgs[c][i];
      uint64_t null_bit = (f >> (2 * c)) & 1;
      if (hash) {
        k = fmix64(k ^ (v + 0x9E3779B97F4A7C15ull + (k << 6) + (k >> 2)));
        if (null_equal) k = fmix64(k ^ (null_bit * 0xD6E8FEB86659FD93ull));
      } else {
        k = widths[c] >= 64 ? v : ((k << widths[c]) | v);
        if (null_equal) k = (k << 1) | null_bit;
      }
    }
    key[i] = hash ? (k & hash_mask) : k;
    bool any_null = (f & 0x55) != 0, any_nan = (f & 0xAA) != 0;
    never[i] = (any_null && !null_equal) || (any_nan && nan_never);
  }
}

__global__ void verify_kernel(const uint32_t *a, const uint32_t *b, int64_t n, const uint64_t *const *ia,
                              const uint64_t *const *ib, int ncols, const uint8_t *fa, const uint8_t *fb, uint8_t *ok) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t x = a[i], y = b[i];
    bool eq = x != kNone && y != kNone;
    if (eq) {
      uint8_t f1 = fa ? fa[x] : 0, f2 = fb ? fb[y] : 0;
      eq = (f1 & 0x55) == (f2 & 0x55);
      for (int c = 0; c < ncols && eq; ++c) eq = ia[c][x] == ib[c][y];
    }
    ok[i] = eq;
  }
}

// The null bits of each row's flags (one bit per column), as a u32 sort key; rows[i] picks the row.
__global__ void null_bits_kernel(const uint8_t *flags, const uint32_t *rows, int64_t n, uint32_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = flags ? (uint32_t)(flags[rows ? rows[i] : (uint32_t)i] & 0x55) : 0u;
}

// heads[i] = 1 where sorted row ids[i] has another key than ids[i - 1] (0 at i = 0).
__global__ void run_heads_kernel(const uint32_t *ids, int64_t n, const uint64_t *const *imgs, int ncols,
                                 const uint32_t *null_bits, uint32_t *heads) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    bool differs = false;
    if (i > 0) {
      uint32_t x = ids[i], y = ids[i - 1];
      differs = null_bits[x] != null_bits[y];
      for (int c = 0; c < ncols && !differs; ++c) differs = imgs[c][x] != imgs[c][y];
    }
    heads[i] = differs;
  }
}

__global__ void narrow_kernel(const uint64_t *in, int64_t n, uint32_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = (uint32_t)in[i];
}

// One warp ballot per 32 map entries.
__global__ void map_validity_kernel(const uint32_t *map, int64_t n, uint32_t *words) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const int64_t n_pad = (n + 31) & ~31ll;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_pad; i += stride) {
    bool valid = i < n && map[i] != kNone;
    uint32_t w = __ballot_sync(0xffffffffu, valid);
    if ((threadIdx.x & 31) == 0) words[i >> 5] = w;
  }
}

__global__ void mark_kernel(const uint32_t *rows, int64_t n, uint8_t *flags) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t r = rows[i];
    if (r != kNone) flags[r] = 1;
  }
}

// counts[at[i]] += 1 for every i with keep[i] (keep NULL: every i).
__global__ void count_at_kernel(const uint32_t *at, const uint8_t *keep, int64_t n, uint32_t *counts) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    if (!keep || keep[i]) atomicAdd(&counts[at[i]], 1u);
}

__global__ void map_rows_kernel(const uint32_t *rows, const uint32_t *map, int64_t n, uint32_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t r = rows ? rows[i] : (uint32_t)i;
    out[i] = (map && r != kNone) ? map[r] : r;
  }
}

inline int grid(int64_t n) { return blocks_for_sms(n, 256 * 4, tuning::kStreamBlocksPerSm); }
}  // namespace

#define GJ_J_DEF_IMAGE(TN, T)                                                                          \
  extern "C" int gj_j_image_##TN(const T *col, const uint32_t *validity, int64_t n, int column,      \
                                 uint64_t *image, uint8_t *flags, gj_j_stream_t s) {                  \
    if (n <= 0) return 0;                                                                              \
    if (column < 0 || column > 3) return (int)cudaErrorInvalidValue;                                   \
    image_kernel<T><<<grid(n), 256, 0, (cudaStream_t)s>>>(col, validity, n, column, image, flags);     \
    return launch_status();                                                                            \
  }
GJ_J_DEF_IMAGE(u32, uint32_t)
GJ_J_DEF_IMAGE(u64, uint64_t)
GJ_J_DEF_IMAGE(i32, int32_t)
GJ_J_DEF_IMAGE(i64, int64_t)
GJ_J_DEF_IMAGE(f32, float)
GJ_J_DEF_IMAGE(f64, double)

extern "C" int gj_j_derive_key(const uint64_t *img0, const uint64_t *img1, const uint64_t *img2, const uint64_t *img3,
                               const int *widths, int ncols, const uint8_t *flags, int64_t n, int hash, int null_equal,
                               int nan_never_equal, uint64_t hash_mask, uint64_t *key, uint8_t *never_match,
                               gj_j_stream_t s) {
  if (ncols < 1 || ncols > 4) return (int)cudaErrorInvalidValue;
  if (n <= 0) return 0;
  int w[4] = {0, 0, 0, 0};
  for (int c = 0; c < ncols; ++c) w[c] = widths[c];
  derive_key_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(img0, img1, img2, img3, w[0], w[1], w[2], w[3], ncols, flags,
                                                          n, hash != 0, null_equal != 0, nan_never_equal != 0,
                                                          hash_mask, key, never_match);
  return launch_status();
}

extern "C" int gj_j_verify_pairs(const uint32_t *a, const uint32_t *b, int64_t n, const uint64_t *const *ia,
                                 const uint64_t *const *ib, int ncols, const uint8_t *fa, const uint8_t *fb,
                                 uint8_t *ok, gj_j_stream_t s) {
  if (n <= 0) return 0;
  verify_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(a, b, n, ia, ib, ncols, fa, fb, ok);
  return launch_status();
}

extern "C" int gj_j_mark_rows(const uint32_t *rows, int64_t n, uint8_t *flags, gj_j_stream_t s) {
  if (n <= 0) return 0;
  mark_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(rows, n, flags);
  return launch_status();
}

extern "C" int gj_j_count_at(const uint32_t *at, const uint8_t *keep, int64_t n, uint32_t *counts, gj_j_stream_t s) {
  if (n <= 0) return 0;
  count_at_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(at, keep, n, counts);
  return launch_status();
}

extern "C" int gj_j_map_rows(const uint32_t *rows, const uint32_t *map, int64_t n, uint32_t *out, gj_j_stream_t s) {
  if (n <= 0) return 0;
  map_rows_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(rows, map, n, out);
  return launch_status();
}

extern "C" int gj_j_null_bits(const uint8_t *flags, const uint32_t *rows, int64_t n, uint32_t *out, gj_j_stream_t s) {
  if (n <= 0) return 0;
  null_bits_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(flags, rows, n, out);
  return launch_status();
}

extern "C" int gj_j_run_heads(const uint32_t *ids, int64_t n, const uint64_t *const *imgs, int ncols,
                              const uint32_t *null_bits, uint32_t *heads, gj_j_stream_t s) {
  if (ncols < 1 || ncols > 4) return (int)cudaErrorInvalidValue;
  if (n <= 0) return 0;
  run_heads_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(ids, n, imgs, ncols, null_bits, heads);
  return launch_status();
}

extern "C" int gj_j_narrow_keys(const uint64_t *in, int64_t n, uint32_t *out, gj_j_stream_t s) {
  if (n <= 0) return 0;
  narrow_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(in, n, out);
  return launch_status();
}

extern "C" int gj_j_map_validity(const uint32_t *map, int64_t n, uint32_t *words, gj_j_stream_t s) {
  if (n <= 0) return 0;
  // Whole warps stay in step: the grid-stride loop covers n rounded up to 32 with a block size
  // that is a multiple of 32.
  map_validity_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(map, n, words);
  return launch_status();
}
