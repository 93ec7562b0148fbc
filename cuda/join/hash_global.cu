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
// Buckets of 8 four-byte slots (one 32-byte sector: a lookup is one sector read); a slot holds
// a build position (the index into the build keys) in its low `row_bits` and a tag of the key's
// hash (its top bits, at most 8) above; every bit set marks an empty slot, which no slot can hold
// since the positions stay below 2^row_bits - 1. Only slots of the probe key's tag compare keys,
// loaded from the build keys themselves (no key in the table: 4 bytes a build row instead of 12
// or 16, so that more of the table stays in the L2). The home bucket is the hash's low bits;
// where it is full the next bucket takes the row, and a lookup stops at the key or at the first
// bucket with an empty slot.
struct SlotLayout {
  int row_bits;  // positions below 2^row_bits - 1
  int tag_bits;  // 0..8
  __device__ __forceinline__ uint32_t tag(uint64_t h) const {
    return (uint32_t)(((h >> 56) >> (8 - tag_bits)) << row_bits);
  }
  __device__ __forceinline__ uint32_t row(uint32_t slot) const {
    return (uint32_t)(slot & ((1ull << row_bits) - 1));
  }
};

inline SlotLayout slot_layout(int64_t n) {
  int bits = 1;
  while (bits < 32 && (1ll << bits) <= n) ++bits;  // 2^bits > n: positions < n <= 2^bits - 1
  return SlotLayout{bits, 32 - bits < 8 ? 32 - bits : 8};
}

constexpr int kBucketSlots = 8;
constexpr uint32_t kEmptySlot = 0xFFFFFFFFu;

__device__ __forceinline__ void load_bucket(const uint32_t *at, uint32_t (&v)[kBucketSlots], bool coherent) {
  const uint4 *q = reinterpret_cast<const uint4 *>(at);
  // Insert reads through the L2 (other blocks' claims land there); probe after the insert.
  const uint4 lo = coherent ? __ldcg(q) : __ldg(q), hi = coherent ? __ldcg(q + 1) : __ldg(q + 1);
  v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}

template <class K>
__global__ void unique_insert_kernel(const K *keys, int64_t n, uint32_t *table, uint64_t bucket_mask, SlotLayout L,
                                     uint32_t *flags) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const volatile uint32_t *seen = flags;
  const uint32_t tag_mask = ~(uint32_t)((1ull << L.row_bits) - 1);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    // Once a flag is up the table is dropped: stop. Flags are raised only where not yet up, so
    // that many repeated keys do not serialize on one word.
    if (*seen != 0u) return;
    const K key = keys[i];
    const uint64_t h = global_hash((uint64_t)key);
    const uint32_t tag = L.tag(h), mine = (uint32_t)i | tag;
    uint64_t b = h & bucket_mask;
    bool placed = false;
    while (!placed) {
      uint32_t *bucket = table + b * kBucketSlots;
      uint32_t v[kBucketSlots];
      load_bucket(bucket, v, true);
#pragma unroll
      for (int j = 0; j < kBucketSlots; ++j) {
        uint32_t w = v[j];
        if (w == kEmptySlot) {
          w = atomicCAS(bucket + j, kEmptySlot, mine);
          if (w == kEmptySlot) {
            placed = true;
            break;
          }
        }
        // Taken (before, or by the claim that beat this one): the same key there repeats.
        if ((w & tag_mask) == tag && keys[L.row(w)] == key) {
          if ((*seen & 1u) == 0u) atomicOr(flags, 1u);
          return;
        }
      }
      b = (b + 1) & bucket_mask;
    }
  }
}

template <class K>
__global__ void unique_probe_kernel(const uint32_t *table, uint64_t bucket_mask, SlotLayout L, const K *build_keys,
                                    const uint32_t *build_ids, const K *probe, int64_t n, uint32_t *match,
                                    uint8_t *hit) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const uint32_t tag_mask = ~(uint32_t)((1ull << L.row_bits) - 1);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const K key = probe[i];
    const uint64_t h = global_hash((uint64_t)key);
    const uint32_t tag = L.tag(h);
    uint64_t b = h & bucket_mask;
    uint32_t m = 0;
    uint8_t found = 0;
    while (true) {
      uint32_t v[kBucketSlots];
      load_bucket(table + b * kBucketSlots, v, false);
      bool empty = false;
#pragma unroll
      for (int j = 0; j < kBucketSlots; ++j) {
        if (v[j] == kEmptySlot) empty = true;
        else if (!found && (v[j] & tag_mask) == tag && build_keys[L.row(v[j])] == key) {
          found = 1;
          m = L.row(v[j]);
        }
      }
      if (found || empty) break;
      b = (b + 1) & bucket_mask;
    }
    match[i] = found && build_ids ? build_ids[m] : m;
    hit[i] = found;
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
  extern "C" int gj_h_unique_insert_##KN(const K *keys, int64_t n, uint32_t *table, int64_t buckets,       \
                                         uint32_t *flags, gj_h_stream_t s) {                              \
    if (buckets <= 0 || (buckets & (buckets - 1)) || n > buckets * kBucketSlots || n >= 0xFFFFFFFFll)     \
      return (int)cudaErrorInvalidValue;                                                                  \
    if (n <= 0) return 0;                                                                                 \
    unique_insert_kernel<K><<<grid(n), 256, 0, (cudaStream_t)s>>>(keys, n, table, (uint64_t)(buckets - 1), \
                                                                 slot_layout(n), flags);                  \
    return launch_status();                                                                               \
  }                                                                                                       \
  extern "C" int gj_h_unique_probe_##KN(const uint32_t *table, int64_t buckets, const K *build_keys,      \
                                        int64_t nb, const uint32_t *build_ids, const K *probe, int64_t n, \
                                        uint32_t *match, uint8_t *hit, gj_h_stream_t s) {                 \
    if (buckets <= 0 || (buckets & (buckets - 1)) || nb >= 0xFFFFFFFFll) return (int)cudaErrorInvalidValue; \
    if (n <= 0) return 0;                                                                                 \
    unique_probe_kernel<K><<<grid(n), 256, 0, (cudaStream_t)s>>>(table, (uint64_t)(buckets - 1),          \
                                                                slot_layout(nb), build_keys, build_ids,   \
                                                                probe, n, match, hit);                    \
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

