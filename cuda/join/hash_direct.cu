// Hash join: the non-partitioned join's direct-address table, for dense unique build keys (see
// hash.cuh). When the build keys span few values (max - min + 1 slots of 4 bytes take no more
// memory than the unique-build hash table), the key itself is the slot: slot keys[i] - min holds
// the build row, nothing is hashed, nothing is probed twice, no key is stored.
//
// Example: build keys [12, 10, 13] (min 10, span 4) give the table [1, EMPTY, 0, 2]; the probe
// keys [13, 11, 9] give match [2, 0, 0] and hit [1, 0, 0].
#include "hash.cuh"

namespace {
using namespace gj;
using namespace gj::hash;

constexpr uint32_t EMPTY = 0xffffffffu;

// The slot of `key`, or `span` and above where the key lies outside [min, min + span) (unsigned
// wrapping subtraction: keys below min wrap to large offsets).
__device__ __forceinline__ uint64_t slot_of(uint32_t key, uint32_t min) { return (uint64_t)(uint32_t)(key - min); }
__device__ __forceinline__ uint64_t slot_of(uint64_t key, uint64_t min) { return key - min; }

template <class K>
__global__ void direct_insert_kernel(const K *keys, const uint32_t *ids, int64_t n, K min, uint32_t *table,
                                     uint32_t *flags) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const volatile uint32_t *seen = flags;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    // Once a key repeated the table is dropped: stop (and raise the flag only where not yet up,
    // so that many repeated keys do not serialize on one word).
    if (*seen != 0u) return;
    const uint32_t row = ids ? ids[i] : (uint32_t)i;
    if (atomicExch(&table[slot_of(keys[i], min)], row) != EMPTY) {
      if ((*seen & 1u) == 0u) atomicOr(flags, 1u);
    }
  }
}

template <class K>
__global__ void direct_probe_kernel(const uint32_t *table, K min, uint64_t span, const K *probe, int64_t n,
                                    uint32_t *match, uint8_t *hit) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t s = slot_of(probe[i], min);
    const uint32_t row = s < span ? table[s] : EMPTY;
    match[i] = row == EMPTY ? 0u : row;
    hit[i] = row != EMPTY;
  }
}
}  // namespace

#define GJ_H_DEF_DIRECT(KN, K)                                                                              \
  extern "C" int gj_h_direct_insert_##KN(const K *keys, const uint32_t *ids, int64_t n, K min, uint32_t *table, \
                                         int64_t span, uint32_t *flags, gj_h_stream_t s) {                  \
    if (span <= 0) return (int)cudaErrorInvalidValue;                                                       \
    if (n <= 0) return 0;                                                                                   \
    direct_insert_kernel<K><<<grid(n), 256, 0, (cudaStream_t)s>>>(keys, ids, n, min, table, flags);         \
    return launch_status();                                                                                 \
  }                                                                                                         \
  extern "C" int gj_h_direct_probe_##KN(const uint32_t *table, K min, int64_t span, const K *probe, int64_t n, \
                                        uint32_t *match, uint8_t *hit, gj_h_stream_t s) {                   \
    if (span <= 0) return (int)cudaErrorInvalidValue;                                                       \
    if (n <= 0) return 0;                                                                                   \
    direct_probe_kernel<K><<<grid(n), 256, 0, (cudaStream_t)s>>>(table, min, (uint64_t)span, probe, n, match, \
                                                                hit);                                       \
    return launch_status();                                                                                 \
  }
GJ_H_DEF_DIRECT(u32, uint32_t)
GJ_H_DEF_DIRECT(u64, uint64_t)
