// Hash join: the non-partitioned join (global table build and probe, expansion; the unique-build
// table) (see hash.cuh).
#include "hash.cuh"

namespace {
using namespace gj;
using namespace gj::hash;

// ---------------------------------------------------------------------------------------------
// Non-partitioned hash join
// ---------------------------------------------------------------------------------------------
struct __align__(16) GSlot {
  uint64_t key;
  uint32_t start;
  uint32_t count;  // 0: empty
};

__device__ __forceinline__ uint64_t global_hash(uint64_t k) { return fmix64(k ^ 0x2545F4914F6CDD1Dull); }

template <class K>
__global__ void run_flags_kernel(const K *sorted, int64_t n, uint8_t *flags) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    flags[i] = i == 0 || sorted[i] != sorted[i - 1];
}

template <class K>
__global__ void table_insert_kernel(const K *sorted, int64_t n, const uint32_t *starts, int64_t runs, GSlot *table,
                                    uint64_t mask) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < runs; r += stride) {
    const uint32_t st = starts[r];
    const uint64_t en = r + 1 < runs ? (uint64_t)starts[r + 1] : (uint64_t)n;
    const uint64_t key = (uint64_t)sorted[st];
    uint64_t s = global_hash(key) & mask;
    // Runs have distinct keys: any empty slot will do.
    while (atomicCAS(&table[s].count, 0u, (uint32_t)(en - st)) != 0u) s = (s + 1) & mask;
    table[s].key = key;
    table[s].start = st;
  }
}

template <class K>
__global__ void table_probe_kernel(const GSlot *table, uint64_t mask, const K *probe, int64_t n, uint32_t *start,
                                   uint32_t *count) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t key = (uint64_t)probe[i];
    uint64_t s = global_hash(key) & mask;
    uint32_t st = 0, c = 0;
    while (true) {
      const GSlot e = table[s];
      if (e.count == 0) break;
      if (e.key == key) {
        st = e.start;
        c = e.count;
        break;
      }
      s = (s + 1) & mask;
    }
    start[i] = st;
    count[i] = c;
  }
}

// ---------------------------------------------------------------------------------------------
// Non-partitioned hash join, unique build keys: one slot a build row, no sort
// ---------------------------------------------------------------------------------------------
// A slot holds a build key and its row; a key of all ones marks an empty slot (the table is
// filled with 0xff bytes). Insertion claims a slot by compare-and-swap on the key, so two rows
// of one key meet in the same slot: the second raises bit 0 of *flags (a build key repeats)
// and a key of all ones raises bit 1 (it cannot be stored); the caller then takes the sorted
// path. Probing stops at the key or at the first empty slot.
template <class K>
struct UniqueSlot;
template <>
struct __align__(8) UniqueSlot<uint32_t> {
  uint32_t key;
  uint32_t row;
};
template <>
struct __align__(16) UniqueSlot<uint64_t> {
  unsigned long long key;
  uint32_t row;
  uint32_t pad;
};

__device__ __forceinline__ uint32_t cas_key(uint32_t *at, uint32_t expected, uint32_t key) {
  return atomicCAS(at, expected, key);
}
__device__ __forceinline__ uint64_t cas_key(unsigned long long *at, uint64_t expected, uint64_t key) {
  return (uint64_t)atomicCAS(at, (unsigned long long)expected, (unsigned long long)key);
}

template <class K>
__global__ void unique_insert_kernel(const K *keys, const uint32_t *ids, int64_t n, UniqueSlot<K> *table,
                                     uint64_t mask, uint32_t *flags) {
  constexpr K EMPTY = ~K(0);
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const volatile uint32_t *seen = flags;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    // Once a flag is up the table is dropped: stop. Flags are raised only where not yet up, so
    // that many repeated keys do not serialize on one word.
    if (*seen != 0u) return;
    const K key = keys[i];
    if (key == EMPTY) {
      atomicOr(flags, 2u);
      continue;
    }
    uint64_t s = global_hash((uint64_t)key) & mask;
    while (true) {
      const K prev = (K)cas_key(&table[s].key, EMPTY, key);
      if (prev == EMPTY) {
        table[s].row = ids ? ids[i] : (uint32_t)i;
        break;
      }
      if (prev == key) {
        if ((*seen & 1u) == 0u) atomicOr(flags, 1u);
        break;
      }
      s = (s + 1) & mask;
    }
  }
}

template <class K>
__global__ void unique_probe_kernel(const UniqueSlot<K> *table, uint64_t mask, const K *probe, int64_t n,
                                    uint32_t *match, uint8_t *hit) {
  constexpr K EMPTY = ~K(0);
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const K key = probe[i];
    uint32_t m = 0;
    uint8_t h = 0;
    if (key != EMPTY) {
      uint64_t s = global_hash((uint64_t)key) & mask;
      while (true) {
        const UniqueSlot<K> e = table[s];
        if ((K)e.key == EMPTY) break;
        if ((K)e.key == key) {
          m = e.row;
          h = 1;
          break;
        }
        s = (s + 1) & mask;
      }
    }
    match[i] = m;
    hit[i] = h;
  }
}

constexpr int ENT = 256, EVT = 8, ENV = ENT * EVT;

__global__ void __launch_bounds__(ENT) expand_kernel(const uint64_t *offsets, int64_t n, int64_t total,
                                                     const int64_t *parts, const uint32_t *start,
                                                     const uint32_t *count, const uint32_t *probe_ids,
                                                     const uint32_t *build_ids, uint32_t *out_probe,
                                                     uint32_t *out_build) {
  __shared__ uint64_t shared[ENV + 2];
  lbs_tile<ENT, EVT>(offsets, n, total, parts, shared, [&](int64_t item, int64_t seg, uint64_t rank) {
    out_probe[item] = probe_ids ? probe_ids[seg] : (uint32_t)seg;
    out_build[item] = build_ids[start[seg] + (uint32_t)rank];
  });
}

__global__ void range_validity_kernel(uint32_t *words, int64_t n, int64_t null_begin, int64_t null_end) {
  const int64_t nw = (n + 31) / 32;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t w = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; w < nw; w += stride) {
    uint32_t bits = 0;
    for (int b = 0; b < 32; ++b) {
      const int64_t k = w * 32 + b;
      if (k < n && !(k >= null_begin && k < null_end)) bits |= 1u << b;
    }
    words[w] = bits;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// C ABI
// ---------------------------------------------------------------------------------------------
#define GJ_H_DEF_GLOBAL(KN, K)                                                                            \
  extern "C" int gj_h_run_flags_##KN(const K *sorted, int64_t n, uint8_t *flags, gj_h_stream_t s) {      \
    if (n <= 0) return 0;                                                                                 \
    run_flags_kernel<K><<<grid(n), 256, 0, (cudaStream_t)s>>>(sorted, n, flags);                          \
    return launch_status();                                                                               \
  }                                                                                                       \
  extern "C" int gj_h_table_insert_##KN(const K *sorted, int64_t n, const uint32_t *run_starts,          \
                                        int64_t runs, uint32_t *table, int64_t capacity,                  \
                                        gj_h_stream_t s) {                                                \
    if (capacity <= 0 || (capacity & (capacity - 1)) || runs > capacity) return (int)cudaErrorInvalidValue; \
    if (runs <= 0) return 0;                                                                              \
    table_insert_kernel<K><<<grid(runs), 256, 0, (cudaStream_t)s>>>(sorted, n, run_starts, runs,          \
                                                                   (GSlot *)table,                        \
                                                                   (uint64_t)(capacity - 1));            \
    return launch_status();                                                                               \
  }                                                                                                       \
  extern "C" int gj_h_table_probe_##KN(const uint32_t *table, int64_t capacity, const K *probe,          \
                                       int64_t n, uint32_t *start, uint32_t *count, gj_h_stream_t s) {   \
    if (capacity <= 0 || (capacity & (capacity - 1))) return (int)cudaErrorInvalidValue;                  \
    if (n <= 0) return 0;                                                                                 \
    table_probe_kernel<K><<<grid(n), 256, 0, (cudaStream_t)s>>>((const GSlot *)table,                     \
                                                               (uint64_t)(capacity - 1), probe, n, start, \
                                                               count);                                    \
    return launch_status();                                                                               \
  }
GJ_H_DEF_GLOBAL(u32, uint32_t)
GJ_H_DEF_GLOBAL(u64, uint64_t)

#define GJ_H_DEF_UNIQUE(KN, K)                                                                            \
  extern "C" int64_t gj_h_unique_slot_bytes_##KN(void) { return (int64_t)sizeof(UniqueSlot<K>); }       \
  extern "C" int gj_h_unique_insert_##KN(const K *keys, const uint32_t *ids, int64_t n, void *table,      \
                                         int64_t capacity, uint32_t *flags, gj_h_stream_t s) {            \
    if (capacity <= 0 || (capacity & (capacity - 1)) || n > capacity) return (int)cudaErrorInvalidValue;  \
    if (n <= 0) return 0;                                                                                 \
    unique_insert_kernel<K><<<grid(n), 256, 0, (cudaStream_t)s>>>(keys, ids, n, (UniqueSlot<K> *)table,   \
                                                                 (uint64_t)(capacity - 1), flags);        \
    return launch_status();                                                                               \
  }                                                                                                       \
  extern "C" int gj_h_unique_probe_##KN(const void *table, int64_t capacity, const K *probe, int64_t n,  \
                                        uint32_t *match, uint8_t *hit, gj_h_stream_t s) {                 \
    if (capacity <= 0 || (capacity & (capacity - 1))) return (int)cudaErrorInvalidValue;                  \
    if (n <= 0) return 0;                                                                                 \
    unique_probe_kernel<K><<<grid(n), 256, 0, (cudaStream_t)s>>>((const UniqueSlot<K> *)table,            \
                                                                (uint64_t)(capacity - 1), probe, n,       \
                                                                match, hit);                              \
    return launch_status();                                                                               \
  }
GJ_H_DEF_UNIQUE(u32, uint32_t)
GJ_H_DEF_UNIQUE(u64, uint64_t)

extern "C" int gj_h_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t n, int64_t total,
                           const uint32_t *start, const uint32_t *count, const uint32_t *probe_ids,
                           const uint32_t *build_ids, uint32_t *out_probe, uint32_t *out_build, gj_h_stream_t s) {
  (void)count;
  int64_t *parts = nullptr, tiles = 0;
  int rc = lbs_setup(temp, temp_bytes, offsets, n, total, ENV, (cudaStream_t)s, &parts, &tiles);
  if (rc != 0) return rc < 0 ? 0 : rc;
  expand_kernel<<<(unsigned)tiles, ENT, 0, (cudaStream_t)s>>>(offsets, n, total, parts, start, count, probe_ids,
                                                             build_ids, out_probe, out_build);
  return launch_status();
}

extern "C" int gj_h_range_validity(uint32_t *words, int64_t n, int64_t null_begin, int64_t null_end,
                                   gj_h_stream_t s) {
  if (n <= 0) return 0;
  range_validity_kernel<<<grid((n + 31) / 32), 256, 0, (cudaStream_t)s>>>(words, n, null_begin, null_end);
  return launch_status();
}

