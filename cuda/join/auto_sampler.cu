// Hash join: the sampled match ratio of Algorithm::Auto (see hash.cuh).
#include "hash.cuh"

namespace {
using namespace gj;
using namespace gj::hash;

// ---------------------------------------------------------------------------------------------
// Sampled match ratio (Algorithm::Auto)
// ---------------------------------------------------------------------------------------------
constexpr int SAMPLE_MAX = 4096, SAMPLE_SLOTS = 2 * SAMPLE_MAX, SNT = 256, SVT = 8;
// The bit filter of the sample keys: 2^16 bits (8 KiB).
constexpr int FILTER_BITS = 1 << 16;
// One wave: each block holds the sample set and the filter (40 KiB of shared memory for 4-byte
// keys, 56 KiB for 8-byte ones); three fit an SM either way.
constexpr int SAMPLE_BLOCKS_PER_SM = 3;

// out[i] = keys[i * n / m].
template <class K>
__global__ void sample_gather_kernel(const K *keys, int64_t n, int64_t m, K *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += stride)
    out[i] = keys[i * (n / m) + (i * (n % m)) / m];  // floor(i * n / m) without overflow
}

// The key as the join compares it; false: it matches nothing. mode 0: integer bits; 1: f32;
// 2: f64 (-0.0 is 0.0; NaN: one value, or nothing when nan_never).
template <class K>
__device__ __forceinline__ bool canon(K k, int mode, int nan_never, K &out) {
  if (mode == 1) {
    uint32_t b = (uint32_t)k;
    if ((b & 0x7fffffffu) == 0) b = 0;
    else if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu)) {
      if (nan_never) return false;
      b = 0x7fc00000u;
    }
    out = (K)b;
  } else if (mode == 2) {
    uint64_t b = (uint64_t)k;
    if ((b & 0x7fffffffffffffffull) == 0) b = 0;
    else if ((b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (b & 0x000fffffffffffffull)) {
      if (nan_never) return false;
      b = 0x7ff8000000000000ull;
    }
    out = (K)b;
  } else {
    out = k;
  }
  return true;
}

// One hash of a canonical key: its low bits pick the set's slot, its high bits the filter's bit.
__device__ __forceinline__ uint64_t sample_hash(uint64_t k) { return fmix64(k ^ 0x51ED27A3C4B2F6D1ull); }
__device__ __forceinline__ uint32_t sample_slot(uint64_t h) { return (uint32_t)h & (SAMPLE_SLOTS - 1); }
__device__ __forceinline__ uint32_t filter_bit(uint64_t h) { return (uint32_t)(h >> 40) & (FILTER_BITS - 1); }

// The dynamic shared memory of a block: the sample keys, the set's slots and the filter's words.
template <class K>
struct SampleSmem {
  static constexpr size_t slot = sizeof(K) * SAMPLE_MAX;
  static constexpr size_t filter = slot + 2 * SAMPLE_SLOTS;
  static constexpr size_t bytes = filter + FILTER_BITS / 8;
};

// Every block puts the m sample keys in a shared-memory set (slot: 1 + the index of the first
// sample entry of that key to claim it) and a one-hash bit filter of them, then streams its share
// of the build keys; a build key in the set flags that entry. Duplicate sample keys are resolved
// by the caller (by key). The filter turns most build keys away after one shared-memory read
// (4096 keys in 2^16 bits: 6% pass by chance), so that the lanes of a warp seldom walk the set
// together; a warp's walk lasts as long as its longest probe sequence.
template <class K>
__global__ void __launch_bounds__(SNT) sample_match_kernel(const K *sample, int64_t m, const K *build, int64_t n,
                                                           int mode, int nan_never, uint8_t *flags) {
  extern __shared__ __align__(16) unsigned char smem[];
  K *skey = (K *)smem;
  unsigned short *slot = (unsigned short *)(smem + SampleSmem<K>::slot);
  uint32_t *filter = (uint32_t *)(smem + SampleSmem<K>::filter);
  for (int i = threadIdx.x; i < SAMPLE_SLOTS; i += SNT) slot[i] = 0;
  for (int i = threadIdx.x; i < FILTER_BITS / 32; i += SNT) filter[i] = 0;
  for (int i = threadIdx.x; i < m; i += SNT) skey[i] = sample[i];
  __syncthreads();
  for (int i = threadIdx.x; i < m; i += SNT) {
    K k;
    if (!canon<K>(skey[i], mode, nan_never, k)) continue;
    const uint64_t h = sample_hash((uint64_t)k);
    const uint32_t b = filter_bit(h);
    atomicOr(&filter[b >> 5], 1u << (b & 31));
    uint32_t s = sample_slot(h);
    while (true) {
      const unsigned short prev = atomicCAS(&slot[s], (unsigned short)0, (unsigned short)(i + 1));
      if (prev == 0) break;
      K other;
      canon<K>(skey[prev - 1], mode, nan_never, other);
      if (other == k) break;
      s = (s + 1) & (SAMPLE_SLOTS - 1);
    }
  }
  __syncthreads();
  // SVT loads a thread in flight before any lookup.
  const int64_t stride = (int64_t)gridDim.x * SNT;
  for (int64_t j0 = (int64_t)blockIdx.x * SNT + threadIdx.x; j0 < n; j0 += stride * SVT) {
    K kv[SVT];
#pragma unroll
    for (int v = 0; v < SVT; ++v) {
      const int64_t j = j0 + v * stride;
      if (j < n) kv[v] = build[j];
    }
#pragma unroll
    for (int v = 0; v < SVT; ++v) {
      K k;
      if (j0 + v * stride >= n || !canon<K>(kv[v], mode, nan_never, k)) continue;
      const uint64_t h = sample_hash((uint64_t)k);
      const uint32_t b = filter_bit(h);
      if (!(filter[b >> 5] & (1u << (b & 31)))) continue;
      uint32_t s = sample_slot(h);
      while (true) {
        const unsigned short e = slot[s];
        if (e == 0) break;
        K other;
        canon<K>(skey[e - 1], mode, nan_never, other);
        if (other == k) {
          if (!flags[e - 1]) flags[e - 1] = 1;
          break;
        }
        s = (s + 1) & (SAMPLE_SLOTS - 1);
      }
    }
  }
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// C ABI
// ---------------------------------------------------------------------------------------------
extern "C" int64_t gj_h_sample_max(void) { return SAMPLE_MAX; }

#define GJ_H_DEF_SAMPLE(KN, K)                                                                            \
  extern "C" int gj_h_sample_gather_##KN(const K *keys, int64_t n, int64_t m, K *out, gj_h_stream_t s) { \
    if (n < 0 || m < 0 || m > n) return (int)cudaErrorInvalidValue;                                      \
    if (m == 0) return 0;                                                                                 \
    sample_gather_kernel<K><<<grid(m), 256, 0, (cudaStream_t)s>>>(keys, n, m, out);                       \
    return launch_status();                                                                               \
  }                                                                                                       \
  extern "C" int gj_h_sample_match_##KN(const K *sample, int64_t m, const K *build, int64_t n, int mode,  \
                                        int nan_never, uint8_t *flags, gj_h_stream_t s) {                 \
    if (m < 0 || m > SAMPLE_MAX || n < 0 || mode < 0 || mode > 2) return (int)cudaErrorInvalidValue;      \
    if (m == 0 || n == 0) return 0;                                                                       \
    const int blocks = blocks_for_sms(n, SNT * 16, SAMPLE_BLOCKS_PER_SM);                                 \
    const size_t smem = SampleSmem<K>::bytes;                                                             \
    cudaError_t e = cudaFuncSetAttribute(sample_match_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                         (int)smem);                                                      \
    if (e != cudaSuccess) return (int)e;                                                                  \
    sample_match_kernel<K><<<blocks, SNT, smem, (cudaStream_t)s>>>(sample, m, build, n, mode, nan_never,  \
                                                               flags);                                   \
    return launch_status();                                                                               \
  }
GJ_H_DEF_SAMPLE(u32, uint32_t)
GJ_H_DEF_SAMPLE(u64, uint64_t)

