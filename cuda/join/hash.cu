// Hash-join kernels (seed 002, "Efficiently Processing Large Relational Joins on GPUs").
//
// Partitioned hash join: the keys of both sides are stably radix-partitioned elsewhere (CUB's
// one-sweep sort on the low partition bits); here the partition offsets are read off the
// partitioned keys, the co-partitions are cut into work items (a chunk of at most CAP build rows
// and a range of probe rows; oversized partitions become several items), and one block per item
// builds a shared-memory hash table on the build chunk and probes it with the probe rows. The
// match runs twice: a count pass (pairs per item, match flags) and, after an exclusive scan of
// the item counts, a write pass that writes each item's pairs at its offset. Nothing decides an
// output position by an atomic, so the output is the same on every run.
//
// The shared-memory table holds the distinct keys of the chunk: slot word = owner (chunk index
// + 1 of the row that claimed the slot, 16 bits) | count of rows with that key (15 bits) << 16 |
// a "matched" bit. When the chunk has no duplicate key, the owner is the only row of its key.
// Otherwise the write pass groups the chunk's rows by slot in chunk order (a scan of the slot
// counts, then one warp walks the rows in order), so that the matches of a probe row come in
// build partition order.
//
// Non-partitioned hash join: the build side sorted by key; every run of equal keys goes into one
// global open-addressing table (key, first sorted position, count); probe rows look their key
// up, and the pairs are expanded by load-balancing search.
#include "gpujoin/launch.cuh"
#include "gpujoin/lbs.cuh"
#include "gpujoin_hash.h"

namespace {
using namespace gj;

constexpr uint32_t FULL = 0xffffffffu;

// Slot of a key in a shared-memory table: all bits of the key count, so keys that share their
// low (partition) bits still spread.
__device__ __forceinline__ uint32_t slot_hash(uint32_t k) { return fmix32(k ^ 0x9E3779B9u); }
__device__ __forceinline__ uint32_t slot_hash(uint64_t k) { return (uint32_t)fmix64(k ^ 0x9E3779B97F4A7C15ull); }

inline int grid(int64_t n) { return blocks_for_sms(n, 256 * 4, tuning::kStreamBlocksPerSm); }

// ---------------------------------------------------------------------------------------------
// Key preparation
// ---------------------------------------------------------------------------------------------
__global__ void mix32_kernel(const uint32_t *in, const uint32_t *rows, int64_t n, uint32_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fmix32(in[rows ? rows[i] : i]);
}
__global__ void mix64_kernel(const uint64_t *in, const uint32_t *rows, int64_t n, uint64_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fmix64(in[rows ? rows[i] : i]);
}
__global__ void narrow_mix_kernel(const uint64_t *in, const uint32_t *rows, int64_t n, uint32_t *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fmix32((uint32_t)in[rows ? rows[i] : i]);
}

// ---------------------------------------------------------------------------------------------
// Partition offsets and work items
// ---------------------------------------------------------------------------------------------
// off[p] = the first position whose digit is >= p (binary search; the keys are sorted by digit).
template <class K>
__global__ void part_offsets_kernel(const K *keys, int64_t n, uint64_t mask, int64_t parts, uint64_t *off) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p <= parts; p += stride) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) >> 1;
      if ((int64_t)((uint64_t)keys[mid] & mask) < p) lo = mid + 1;
      else hi = mid;
    }
    off[p] = (uint64_t)lo;
  }
}

constexpr uint32_t CAP = 2048;  // build rows per chunk
constexpr int SLOTS = 4096;     // shared-memory table slots (power of two, >= 2 * CAP)

__global__ void count_items_kernel(const uint64_t *bo, const uint64_t *po, int64_t parts, uint32_t split,
                                   uint64_t *items_per_part, uint32_t *max_build) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  uint32_t mx = 0;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < parts; p += stride) {
    uint64_t nb = bo[p + 1] - bo[p], np = po[p + 1] - po[p];
    items_per_part[p] = (nb && np) ? ((nb + CAP - 1) / CAP) * ((np + split - 1) / split) : 0;
    if (nb > mx) mx = (uint32_t)nb;
  }
  mx = __reduce_max_sync(FULL, mx);
  if ((threadIdx.x & 31) == 0 && mx) atomicMax(max_build, mx);
}

__global__ void fill_items_kernel(const uint64_t *bo, const uint64_t *po, int64_t parts, uint32_t split,
                                  const uint64_t *item_start, gj_h_item *items) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < parts; p += stride) {
    uint64_t nb = bo[p + 1] - bo[p], np = po[p + 1] - po[p];
    if (!nb || !np) continue;
    uint64_t chunks = (nb + CAP - 1) / CAP, splits = (np + split - 1) / split, at = item_start[p];
    for (uint64_t c = 0; c < chunks; ++c)
      for (uint64_t q = 0; q < splits; ++q) {
        gj_h_item it;
        it.build_begin = (uint32_t)(bo[p] + c * CAP);
        it.build_len = (uint32_t)(nb - c * CAP < CAP ? nb - c * CAP : CAP);
        it.probe_begin = (uint32_t)(po[p] + q * split);
        it.probe_len = (uint32_t)(np - q * split < split ? np - q * split : split);
        items[at + c * splits + q] = it;
      }
  }
}

// ---------------------------------------------------------------------------------------------
// Match kernels
// ---------------------------------------------------------------------------------------------
constexpr int MNT = 512, MVT = 4, TILE = MNT * MVT;
static_assert(CAP % MNT == 0 && SLOTS % MNT == 0, "chunk and table are whole rounds of the block");
constexpr uint32_t OWNER = 0xFFFFu, CNT_SHIFT = 16, CNT_MASK = 0x7FFFu, HIT = 0x80000000u;

__device__ __forceinline__ uint32_t cnt_of(uint32_t w) { return (w >> CNT_SHIFT) & CNT_MASK; }

// Shared-memory layout (byte offsets). The count pass needs the first part only. Chunks without
// duplicate keys need neither slot_of (after the build) nor cursor / grouped: the write passes
// stage the chunk's build payload there (`staged`, CAP values of up to 8 bytes).
template <class K>
struct Layout {
  static constexpr size_t misc = 0;                                // u32[64]: flags, warp sums
  static constexpr size_t bkey = misc + 4 * 64;                    // K[CAP]: the chunk's keys
  static constexpr size_t word = bkey + sizeof(K) * CAP;           // u32[SLOTS]: the table
  static constexpr size_t slot_of = word + 4 * SLOTS;              // u16[CAP]: slot of each row
  static constexpr size_t count_bytes = slot_of + 2 * CAP;
  static constexpr size_t cursor = count_bytes;                    // u16[SLOTS]: group ends
  static constexpr size_t grouped = cursor + 2 * SLOTS;            // u16[CAP]: rows by slot
  static constexpr size_t tile_off = grouped + 2 * CAP;            // u32[TILE]: row offsets
  static constexpr size_t tile_slot = tile_off + 4 * TILE;         // u16[TILE]: row slots
  static constexpr size_t write_bytes = tile_slot + 2 * TILE;
  static constexpr size_t staged = slot_of;                        // u32/u64[CAP], aliases the above
  static_assert(tile_off - staged >= 8 * CAP, "staged build payload fits");
  static_assert(staged % 8 == 0, "staged build payload aligned");
};

// Exclusive scan of one value per thread across the block; `ws` holds MNT / 32 words.
__device__ __forceinline__ uint32_t block_excl_scan(uint32_t v, uint32_t &total, uint32_t *ws) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    uint32_t y = __shfl_up_sync(FULL, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) ws[warp] = x;
  __syncthreads();
  if (warp == 0) {
    uint32_t w = lane < MNT / 32 ? ws[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      uint32_t y = __shfl_up_sync(FULL, w, o);
      if (lane >= o) w += y;
    }
    if (lane < MNT / 32) ws[lane] = w;
  }
  __syncthreads();
  total = ws[MNT / 32 - 1];
  uint32_t r = (warp ? ws[warp - 1] : 0) + x - v;
  __syncthreads();
  return r;
}

// Loads the chunk's keys and inserts them: every row ends up in the slot of its key.
// misc[0] becomes 1 when some key occurs more than once.
template <class K>
__device__ __forceinline__ void build_table(const K *build_keys, const gj_h_item &it, K *bkey, uint32_t *word,
                                            uint16_t *slot_of, uint32_t *misc) {
  for (int s = threadIdx.x; s < SLOTS; s += MNT) word[s] = 0;
  {
    // All of this thread's keys in flight at once.
    constexpr int PER = CAP / MNT;
    K k[PER];
#pragma unroll
    for (int q = 0; q < PER; ++q) {
      const uint32_t i = threadIdx.x + q * MNT;
      if (i < it.build_len) k[q] = build_keys[it.build_begin + i];
    }
#pragma unroll
    for (int q = 0; q < PER; ++q) {
      const uint32_t i = threadIdx.x + q * MNT;
      if (i < it.build_len) bkey[i] = k[q];
    }
  }
  if (threadIdx.x == 0) misc[0] = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < it.build_len; i += MNT) {
    const K k = bkey[i];
    uint32_t s = slot_hash(k) & (SLOTS - 1);
    while (true) {
      uint32_t old = atomicCAS(&word[s], 0u, (i + 1) | (1u << CNT_SHIFT));
      if (old == 0) break;
      if (bkey[(old & OWNER) - 1] == k) {
        atomicAdd(&word[s], 1u << CNT_SHIFT);
        misc[0] = 1;
        break;
      }
      s = (s + 1) & (SLOTS - 1);
    }
    slot_of[i] = (uint16_t)s;
  }
  __syncthreads();
}

template <class K>
__device__ __forceinline__ int lookup(K k, const K *bkey, const uint32_t *word) {
  uint32_t s = slot_hash(k) & (SLOTS - 1);
  while (true) {
    uint32_t o = word[s] & OWNER;
    if (o == 0) return -1;
    if (bkey[o - 1] == k) return (int)s;
    s = (s + 1) & (SLOTS - 1);
  }
}

// Groups the rows of a chunk with duplicate keys by slot, each group in chunk order:
// rows of slot s are grouped[cursor[s] - count(s) .. cursor[s]).
__device__ __forceinline__ void group_rows(const uint32_t *word, const uint16_t *slot_of, uint16_t *cursor,
                                           uint16_t *grouped, uint32_t nb, uint32_t *ws) {
  constexpr int PER = SLOTS / MNT;
  uint32_t local[PER];
  uint32_t run = 0;
#pragma unroll
  for (int q = 0; q < PER; ++q) {
    local[q] = run;
    run += cnt_of(word[threadIdx.x * PER + q]);
  }
  uint32_t total;
  uint32_t off = block_excl_scan(run, total, ws);
#pragma unroll
  for (int q = 0; q < PER; ++q) cursor[threadIdx.x * PER + q] = (uint16_t)(off + local[q]);
  __syncthreads();
  if (threadIdx.x < 32) {
    const uint32_t lane = threadIdx.x;
    for (uint32_t b = 0; b < nb; b += 32) {
      const uint32_t i = b + lane;
      const bool valid = i < nb;
      const uint32_t s = valid ? slot_of[i] : 0xFFFFFFFFu;
      const uint32_t mask = __match_any_sync(FULL, s);
      const uint32_t c = valid ? cursor[s] : 0;
      __syncwarp();
      if (valid) {
        grouped[c + __popc(mask & ((1u << lane) - 1))] = (uint16_t)i;
        if (lane == 31u - __clz(mask)) cursor[s] = (uint16_t)(c + __popc(mask));
      }
      __syncwarp();
    }
  }
  __syncthreads();
}

template <class K>
__global__ void __launch_bounds__(MNT, 4) match_count_kernel(const K *build_keys, const K *probe_keys,
                                                          const gj_h_item *items, uint64_t *item_rows,
                                                          uint8_t *build_hit, uint8_t *probe_hit) {
  extern __shared__ __align__(16) unsigned char smem[];
  using L = Layout<K>;
  K *bkey = (K *)(smem + L::bkey);
  uint32_t *word = (uint32_t *)(smem + L::word);
  uint16_t *slot_of = (uint16_t *)(smem + L::slot_of);
  uint32_t *misc = (uint32_t *)(smem + L::misc);
  const gj_h_item it = items[blockIdx.x];
  build_table<K>(build_keys, it, bkey, word, slot_of, misc);
  uint32_t rows = 0;
  for (uint32_t r0 = 0; r0 < it.probe_len; r0 += TILE) {
    K k[MVT];
#pragma unroll
    for (int v = 0; v < MVT; ++v) {
      const uint32_t r = r0 + v * MNT + threadIdx.x;
      if (r < it.probe_len) k[v] = probe_keys[it.probe_begin + r];
    }
#pragma unroll
    for (int v = 0; v < MVT; ++v) {
      const uint32_t r = r0 + v * MNT + threadIdx.x;
      if (r >= it.probe_len) break;
      int s = lookup<K>(k[v], bkey, word);
      if (s >= 0) {
        rows += cnt_of(word[s]);
        if (probe_hit) probe_hit[it.probe_begin + r] = 1;
        if (build_hit) atomicOr(&word[s], HIT);
      }
    }
  }
  uint32_t total;
  block_excl_scan(rows, total, misc + 1);
  if (threadIdx.x == 0) item_rows[blockIdx.x] = total;
  if (build_hit) {
    for (uint32_t i = threadIdx.x; i < it.build_len; i += MNT)
      if (word[slot_of[i]] & HIT) build_hit[it.build_begin + i] = 1;
  }
}

__device__ __forceinline__ void put(const gj_h_side &side, uint64_t k, uint32_t pos) {
  if (side.out_ids) side.out_ids[k] = side.ids ? side.ids[pos] : pos;
  if (side.out_vals) {
    if (side.val_width == 8) ((uint64_t *)side.out_vals)[k] = ((const uint64_t *)side.vals)[pos];
    else ((uint32_t *)side.out_vals)[k] = ((const uint32_t *)side.vals)[pos];
  }
}

// put() for the build side, whose payload may be staged in shared memory (`staged[row]`, row =
// pos - build_begin): a gather from a 2048-row chunk in global memory wastes most of each sector.
__device__ __forceinline__ void put_build(const gj_h_side &side, uint64_t k, uint32_t pos, const void *staged,
                                          uint32_t row) {
  if (!staged) return put(side, k, pos);
  if (side.out_ids) side.out_ids[k] = side.ids ? side.ids[pos] : pos;
  if (side.val_width == 8) ((uint64_t *)side.out_vals)[k] = ((const uint64_t *)staged)[row];
  else ((uint32_t *)side.out_vals)[k] = ((const uint32_t *)staged)[row];
}

// The chunk's build payload, loaded into registers (issued early; see store_build_vals).
struct BuildVals {
  static constexpr int PER = CAP / MNT;
  uint64_t v[PER];
};

__device__ __forceinline__ bool stages(const gj_h_side &side) { return side.out_vals && side.vals; }

__device__ __forceinline__ void load_build_vals(const gj_h_side &side, const gj_h_item &it, BuildVals &b) {
  if (!stages(side)) return;
#pragma unroll
  for (int q = 0; q < BuildVals::PER; ++q) {
    const uint32_t i = threadIdx.x + q * MNT;
    if (i < it.build_len)
      b.v[q] = side.val_width == 8 ? ((const uint64_t *)side.vals)[it.build_begin + i]
                                   : ((const uint32_t *)side.vals)[it.build_begin + i];
  }
}

// Stores the loaded payload at `dst` and returns it (nullptr when the side writes no values).
// The caller synchronizes the block before the values are read.
__device__ __forceinline__ const void *store_build_vals(const gj_h_side &side, const gj_h_item &it,
                                                        const BuildVals &b, unsigned char *dst) {
  if (!stages(side)) return nullptr;
#pragma unroll
  for (int q = 0; q < BuildVals::PER; ++q) {
    const uint32_t i = threadIdx.x + q * MNT;
    if (i < it.build_len) {
      if (side.val_width == 8) ((uint64_t *)dst)[i] = b.v[q];
      else ((uint32_t *)dst)[i] = (uint32_t)b.v[q];
    }
  }
  return dst;
}

// Shared-memory pointers of the write passes.
template <class K>
struct WriteSmem {
  K *bkey;
  uint32_t *word;
  uint16_t *slot_of;
  uint32_t *misc;
  uint16_t *cursor;
  uint16_t *grouped;
  uint32_t *tile_off;
  uint16_t *tile_slot;
  __device__ explicit WriteSmem(unsigned char *smem) {
    using L = Layout<K>;
    bkey = (K *)(smem + L::bkey);
    word = (uint32_t *)(smem + L::word);
    slot_of = (uint16_t *)(smem + L::slot_of);
    misc = (uint32_t *)(smem + L::misc);
    cursor = (uint16_t *)(smem + L::cursor);
    grouped = (uint16_t *)(smem + L::grouped);
    tile_off = (uint32_t *)(smem + L::tile_off);
    tile_slot = (uint16_t *)(smem + L::tile_slot);
  }
};

// Writes the pairs of item `it` from output row `base` on (the table is built; `dup` says
// whether the rows are grouped).
template <class K>
__device__ __forceinline__ void write_tiles(const K *probe_keys, const gj_h_item &it, const WriteSmem<K> &sm, bool dup,
                                            uint64_t base, const gj_h_side &bside, const gj_h_side &pside,
                                            const void *bstaged) {
  // Build row (chunk index) of match j of slot s.
  auto build_row = [&](uint32_t s, uint32_t j) -> uint32_t {
    uint32_t w = sm.word[s];
    return dup ? (uint32_t)sm.grouped[sm.cursor[s] - cnt_of(w) + j] : (w & OWNER) - 1;
  };
  for (uint32_t t0 = 0; t0 < it.probe_len; t0 += TILE) {
    int sl[MVT];
    uint32_t m[MVT];
    uint32_t sum = 0;
    bool multi = false;
    K k[MVT];
#pragma unroll
    for (int v = 0; v < MVT; ++v) {
      const uint32_t r = t0 + threadIdx.x * MVT + v;
      if (r < it.probe_len) k[v] = probe_keys[it.probe_begin + r];
    }
#pragma unroll
    for (int v = 0; v < MVT; ++v) {
      const uint32_t r = t0 + threadIdx.x * MVT + v;
      sl[v] = -1;
      m[v] = 0;
      if (r < it.probe_len) {
        int s = lookup<K>(k[v], sm.bkey, sm.word);
        if (s >= 0) {
          sl[v] = s;
          m[v] = cnt_of(sm.word[s]);
        }
      }
      sum += m[v];
      multi |= m[v] > 1;
    }
    uint32_t tile_total;
    uint32_t off = block_excl_scan(sum, tile_total, sm.misc + 1);
    if (tile_total == 0) continue;  // the same for every thread
    if (!__syncthreads_or(multi)) {
      // At most one match per probe row: stage the tile's pairs (row in the tile << 16 | build
      // row) in shared memory, then write them out coalesced.
#pragma unroll
      for (int v = 0; v < MVT; ++v) {
        if (m[v]) {
          sm.tile_off[off] = ((threadIdx.x * MVT + v) << 16) | build_row((uint32_t)sl[v], 0);
          ++off;
        }
      }
      __syncthreads();
      for (uint32_t k = threadIdx.x; k < tile_total; k += MNT) {
        const uint32_t w = sm.tile_off[k];
        put(pside, base + k, it.probe_begin + t0 + (w >> 16));
        put_build(bside, base + k, it.build_begin + (w & 0xFFFFu), bstaged, w & 0xFFFFu);
      }
      __syncthreads();
    } else {
      // Expand the tile's pairs evenly over the block: pair k belongs to the last row whose
      // offset is <= k.
#pragma unroll
      for (int v = 0; v < MVT; ++v) {
        sm.tile_off[threadIdx.x * MVT + v] = off;
        sm.tile_slot[threadIdx.x * MVT + v] = (uint16_t)(sl[v] >= 0 ? sl[v] : 0);
        off += m[v];
      }
      __syncthreads();
      for (uint32_t k = threadIdx.x; k < tile_total; k += MNT) {
        int lo = 0, hi = TILE;
        while (hi - lo > 1) {
          int mid = (lo + hi) >> 1;
          if (sm.tile_off[mid] <= k) lo = mid;
          else hi = mid;
        }
        const uint32_t j = k - sm.tile_off[lo];
        put(pside, base + k, it.probe_begin + t0 + (uint32_t)lo);
        const uint32_t brow = build_row(sm.tile_slot[lo], j);
        put_build(bside, base + k, it.build_begin + brow, bstaged, brow);
      }
      __syncthreads();
    }
    base += tile_total;
  }
}

template <class K>
__global__ void __launch_bounds__(MNT, 4) match_write_kernel(const K *build_keys, const K *probe_keys,
                                                          const gj_h_item *items, const uint64_t *item_offsets,
                                                          gj_h_side bside, gj_h_side pside) {
  extern __shared__ __align__(16) unsigned char smem[];
  const WriteSmem<K> sm(smem);
  const gj_h_item it = items[blockIdx.x];
  build_table<K>(build_keys, it, sm.bkey, sm.word, sm.slot_of, sm.misc);
  const bool dup = sm.misc[0] != 0;
  const void *staged = nullptr;
  if (dup) {
    group_rows(sm.word, sm.slot_of, sm.cursor, sm.grouped, it.build_len, sm.misc + 1);
  } else {
    BuildVals b;
    load_build_vals(bside, it, b);
    staged = store_build_vals(bside, it, b, smem + Layout<K>::staged);
    __syncthreads();
  }
  write_tiles<K>(probe_keys, it, sm, dup, item_offsets[blockIdx.x], bside, pside, staged);
}

// One pass instead of count + write, for inner joins whose build chunks have unique keys (at
// most one match per probe row, so at most `capacity` = probe rows pairs): items are taken in
// order from a ticket counter, each counts its pairs, learns its output offset from its
// predecessors by decoupled look-back over `status` (zeroed; flag bits 63 = inclusive prefix,
// 62 = own count), and writes. A chunk with a duplicate key sets *overflow and writes nothing
// (the caller then runs the two passes); status[num_items - 1] ends as the total.
constexpr uint64_t ST_PREFIX = 1ull << 63, ST_AGG = 1ull << 62, ST_VALUE = ST_AGG - 1;

// Warp 0's decoupled look-back over `status` for item `item`, whose own count is `total`:
// 32 predecessors per step, up to the nearest one that has published its inclusive prefix (a
// virtual prefix of 0 before item 0). Publishes this item's inclusive prefix; returns (on lane 0)
// the exclusive one. Waiting lanes back off so that the other blocks on the SM keep issuing.
__device__ __forceinline__ uint64_t look_back(unsigned long long *status, uint32_t item, uint32_t total) {
  const int lane = threadIdx.x;
  uint64_t excl = 0;
  if (item > 0) {
    if (lane == 0) atomicExch(&status[item], ST_AGG | (unsigned long long)total);
    int64_t end = (int64_t)item - 1;
    while (true) {
      const int64_t j = end - lane;
      unsigned long long st = j >= 0 ? ((volatile unsigned long long *)status)[j] : ST_PREFIX;
      unsigned sleep = 32;
      while (__any_sync(FULL, st == 0)) {
        __nanosleep(sleep);
        sleep = sleep < 512 ? sleep * 2 : sleep;
        if (st == 0) st = ((volatile unsigned long long *)status)[j];
      }
      const unsigned pmask = __ballot_sync(FULL, (st & ST_PREFIX) != 0);
      uint64_t v = st & ST_VALUE;
      if (pmask && lane > __ffs(pmask) - 1) v = 0;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
      excl += v;
      if (pmask) break;
      end -= 32;
    }
  }
  if (lane == 0) atomicExch(&status[item], ST_PREFIX | (unsigned long long)(excl + total));
  return excl;
}

template <class K>
__global__ void __launch_bounds__(MNT, 4) match_spec_kernel(const K *build_keys, const K *probe_keys,
                                                         const gj_h_item *items, uint32_t *ticket,
                                                         unsigned long long *status, uint64_t capacity,
                                                         uint32_t *overflow, gj_h_side bside, gj_h_side pside) {
  extern __shared__ __align__(16) unsigned char smem[];
  const WriteSmem<K> sm(smem);
  __shared__ uint32_t s_item, s_abort;
  __shared__ uint64_t s_base;
  if (threadIdx.x == 0) {
    s_item = atomicAdd(ticket, 1u);
    // Once some chunk has overflowed, the output is thrown away: publish an empty prefix (so
    // that later items never wait on this one) and stop.
    s_abort = *(volatile uint32_t *)overflow != 0;
    if (s_abort) atomicExch(&status[s_item], ST_PREFIX);
  }
  __syncthreads();
  if (s_abort) return;
  const uint32_t item = s_item;
  const gj_h_item it = items[item];
  build_table<K>(build_keys, it, sm.bkey, sm.word, sm.slot_of, sm.misc);
  const bool dup = sm.misc[0] != 0;
  BuildVals bv;
  if (!dup) load_build_vals(bside, it, bv);  // in flight during the count

  if (!dup && it.probe_len <= TILE) {
    // One tile: look every probe row up once, stage its pair (row in the tile << 16 | build row)
    // in probe order, learn the offset, write. Unique build keys: at most one match per row.
    K k[MVT];
#pragma unroll
    for (int v = 0; v < MVT; ++v) {
      const uint32_t r = threadIdx.x * MVT + v;
      if (r < it.probe_len) k[v] = probe_keys[it.probe_begin + r];
    }
    uint32_t pair[MVT];
    uint32_t sum = 0;
#pragma unroll
    for (int v = 0; v < MVT; ++v) {
      const uint32_t r = threadIdx.x * MVT + v;
      pair[v] = 0xFFFFFFFFu;
      if (r < it.probe_len) {
        const int sl = lookup<K>(k[v], sm.bkey, sm.word);
        if (sl >= 0) {
          pair[v] = (r << 16) | ((sm.word[sl] & OWNER) - 1);
          ++sum;
        }
      }
    }
    uint32_t total;
    uint32_t off = block_excl_scan(sum, total, sm.misc + 1);
#pragma unroll
    for (int v = 0; v < MVT; ++v)
      if (pair[v] != 0xFFFFFFFFu) sm.tile_off[off++] = pair[v];
    if (threadIdx.x < 32) {
      const uint64_t excl = look_back(status, item, total);
      if (threadIdx.x == 0) {
        s_base = excl;
        if (excl + total > capacity) atomicOr(overflow, 1u);
      }
    }
    const void *staged = store_build_vals(bside, it, bv, smem + Layout<K>::staged);
    __syncthreads();
    const uint64_t base = s_base;
    if (base + total > capacity) return;
    for (uint32_t q = threadIdx.x; q < total; q += MNT) {
      const uint32_t w = sm.tile_off[q];
      put(pside, base + q, it.probe_begin + (w >> 16));
      put_build(bside, base + q, it.build_begin + (w & 0xFFFFu), staged, w & 0xFFFFu);
    }
    return;
  }

  uint32_t rows = 0;
  if (!dup) {
    for (uint32_t r0 = 0; r0 < it.probe_len; r0 += TILE) {
      K k[MVT];
#pragma unroll
      for (int v = 0; v < MVT; ++v) {
        const uint32_t r = r0 + v * MNT + threadIdx.x;
        if (r < it.probe_len) k[v] = probe_keys[it.probe_begin + r];
      }
#pragma unroll
      for (int v = 0; v < MVT; ++v)
        if (r0 + v * MNT + threadIdx.x < it.probe_len) rows += lookup<K>(k[v], sm.bkey, sm.word) >= 0;
    }
  }
  uint32_t total;
  block_excl_scan(rows, total, sm.misc + 1);
  if (threadIdx.x < 32) {
    const uint64_t excl = look_back(status, item, total);
    if (threadIdx.x == 0) {
      s_base = excl;
      if (dup || excl + total > capacity) atomicOr(overflow, 1u);
    }
  }
  __syncthreads();
  const uint64_t base = s_base;
  if (dup || base + total > capacity) return;
  // slot_of is dead once the table is built (no duplicates): the payload goes there.
  const void *staged = store_build_vals(bside, it, bv, smem + Layout<K>::staged);
  __syncthreads();
  write_tiles<K>(probe_keys, it, sm, false, base, bside, pside, staged);
}

template <class K>
int match_count(const K *bk, const K *pk, const gj_h_item *items, int64_t num_items, uint64_t *item_rows,
                uint8_t *build_hit, uint8_t *probe_hit, cudaStream_t s) {
  if (num_items <= 0) return 0;
  if (num_items > 0x7FFFFFFF) return (int)cudaErrorInvalidValue;
  const size_t smem = Layout<K>::count_bytes;
  cudaError_t e = cudaFuncSetAttribute(match_count_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return (int)e;
  match_count_kernel<K><<<(unsigned)num_items, MNT, smem, s>>>(bk, pk, items, item_rows, build_hit, probe_hit);
  return launch_status();
}

template <class K>
int match_write(const K *bk, const K *pk, const gj_h_item *items, int64_t num_items, const uint64_t *item_offsets,
                const gj_h_side *b, const gj_h_side *p, cudaStream_t s) {
  if (num_items <= 0) return 0;
  if (num_items > 0x7FFFFFFF || !b || !p) return (int)cudaErrorInvalidValue;
  const size_t smem = Layout<K>::write_bytes;
  cudaError_t e = cudaFuncSetAttribute(match_write_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return (int)e;
  match_write_kernel<K><<<(unsigned)num_items, MNT, smem, s>>>(bk, pk, items, item_offsets, *b, *p);
  return launch_status();
}

template <class K>
int match_spec(const K *bk, const K *pk, const gj_h_item *items, int64_t num_items, uint32_t *ticket,
               uint64_t *status, int64_t capacity, uint32_t *overflow, const gj_h_side *b, const gj_h_side *p,
               cudaStream_t s) {
  if (num_items <= 0) return 0;
  if (num_items > 0x7FFFFFFF || !b || !p) return (int)cudaErrorInvalidValue;
  const size_t smem = Layout<K>::write_bytes;
  cudaError_t e = cudaFuncSetAttribute(match_spec_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return (int)e;
  match_spec_kernel<K><<<(unsigned)num_items, MNT, smem, s>>>(bk, pk, items, ticket, (unsigned long long *)status,
                                                             (uint64_t)capacity, overflow, *b, *p);
  return launch_status();
}

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

// ---------------------------------------------------------------------------------------------
// Chunked stable partition (the later payload columns of PHJ-OM)
// ---------------------------------------------------------------------------------------------
// One chunk of rows, sorted on its partition bits: its row j of partition p goes to
// cursor[p] + (j - local[p]) (cursor[p]: where the chunk's rows of partition p start in the
// whole transformed column).
template <class K, class V>
__global__ void chunk_scatter_kernel(const K *keys, const V *vals, int64_t n, uint64_t mask, const uint64_t *local,
                                     const uint64_t *cursor, V *out) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
    const uint64_t p = (uint64_t)keys[j] & mask;
    out[cursor[p] + ((uint64_t)j - local[p])] = vals[j];
  }
}

__global__ void advance_cursor_kernel(const uint64_t *local, int64_t parts, uint64_t *cursor) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < parts; p += stride)
    cursor[p] += local[p + 1] - local[p];
}

// ---------------------------------------------------------------------------------------------
// Sampled match ratio (Algorithm::Auto)
// ---------------------------------------------------------------------------------------------
constexpr int SAMPLE_MAX = 4096, SAMPLE_SLOTS = 2 * SAMPLE_MAX, SNT = 256;

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

__device__ __forceinline__ uint32_t sample_slot(uint64_t k) {
  return (uint32_t)fmix64(k ^ 0x51ED27A3C4B2F6D1ull) & (SAMPLE_SLOTS - 1);
}

// Every block puts the m sample keys in a shared-memory set (slot: 1 + the index of the first
// sample entry of that key to claim it), then streams its share of the build keys; a build key
// in the set flags that entry. Duplicate sample keys are resolved by the caller (by key).
template <class K>
__global__ void __launch_bounds__(SNT) sample_match_kernel(const K *sample, int64_t m, const K *build, int64_t n,
                                                           int mode, int nan_never, uint8_t *flags) {
  __shared__ K skey[SAMPLE_MAX];
  __shared__ unsigned short slot[SAMPLE_SLOTS];
  for (int i = threadIdx.x; i < SAMPLE_SLOTS; i += SNT) slot[i] = 0;
  for (int i = threadIdx.x; i < m; i += SNT) skey[i] = sample[i];
  __syncthreads();
  for (int i = threadIdx.x; i < m; i += SNT) {
    K k;
    if (!canon<K>(skey[i], mode, nan_never, k)) continue;
    uint32_t s = sample_slot((uint64_t)k);
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
  const int64_t stride = (int64_t)gridDim.x * SNT;
  for (int64_t j = (int64_t)blockIdx.x * SNT + threadIdx.x; j < n; j += stride) {
    K k;
    if (!canon<K>(build[j], mode, nan_never, k)) continue;
    uint32_t s = sample_slot((uint64_t)k);
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
}  // namespace

// ---------------------------------------------------------------------------------------------
// C ABI
// ---------------------------------------------------------------------------------------------
extern "C" int gj_h_mix_u32(const uint32_t *in, const uint32_t *rows, int64_t n, uint32_t *out, gj_h_stream_t s) {
  if (n <= 0) return 0;
  mix32_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(in, rows, n, out);
  return launch_status();
}

extern "C" int gj_h_mix_u64(const uint64_t *in, const uint32_t *rows, int64_t n, uint64_t *out, gj_h_stream_t s) {
  if (n <= 0) return 0;
  mix64_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(in, rows, n, out);
  return launch_status();
}

extern "C" int gj_h_narrow_mix(const uint64_t *in, const uint32_t *rows, int64_t n, uint32_t *out, gj_h_stream_t s) {
  if (n <= 0) return 0;
  narrow_mix_kernel<<<grid(n), 256, 0, (cudaStream_t)s>>>(in, rows, n, out);
  return launch_status();
}

#define GJ_H_DEF_OFFSETS(KN, K)                                                                           \
  extern "C" int gj_h_part_offsets_##KN(const K *keys, int64_t n, int bits, uint64_t *offsets,           \
                                        gj_h_stream_t s) {                                                \
    if (bits < 0 || bits > 30 || n < 0) return (int)cudaErrorInvalidValue;                                \
    const int64_t parts = (int64_t)1 << bits;                                                             \
    part_offsets_kernel<K><<<grid(parts + 1), 256, 0, (cudaStream_t)s>>>(keys, n, (uint64_t)(parts - 1), parts, \
                                                                    offsets);                            \
    return launch_status();                                                                               \
  }
GJ_H_DEF_OFFSETS(u32, uint32_t)
GJ_H_DEF_OFFSETS(u64, uint64_t)

extern "C" int64_t gj_h_chunk_rows(void) { return CAP; }

extern "C" int gj_h_count_items(const uint64_t *build_offsets, const uint64_t *probe_offsets, int64_t parts,
                                uint32_t probe_split, uint64_t *items_per_part, uint32_t *max_build,
                                gj_h_stream_t s) {
  if (parts <= 0) return 0;
  if (probe_split == 0) return (int)cudaErrorInvalidValue;
  count_items_kernel<<<grid(parts), 256, 0, (cudaStream_t)s>>>(build_offsets, probe_offsets, parts, probe_split,
                                                              items_per_part, max_build);
  return launch_status();
}

extern "C" int gj_h_fill_items(const uint64_t *build_offsets, const uint64_t *probe_offsets, int64_t parts,
                               uint32_t probe_split, const uint64_t *item_start, gj_h_item *items,
                               gj_h_stream_t s) {
  if (parts <= 0) return 0;
  if (probe_split == 0) return (int)cudaErrorInvalidValue;
  fill_items_kernel<<<grid(parts), 256, 0, (cudaStream_t)s>>>(build_offsets, probe_offsets, parts, probe_split,
                                                             item_start, items);
  return launch_status();
}

#define GJ_H_DEF_MATCH(KN, K)                                                                             \
  extern "C" int gj_h_match_count_##KN(const K *build_keys, const K *probe_keys, const gj_h_item *items,  \
                                       int64_t num_items, uint64_t *item_rows, uint8_t *build_hit,        \
                                       uint8_t *probe_hit, gj_h_stream_t s) {                             \
    return match_count<K>(build_keys, probe_keys, items, num_items, item_rows, build_hit, probe_hit,      \
                          (cudaStream_t)s);                                                               \
  }                                                                                                       \
  extern "C" int gj_h_match_write_##KN(const K *build_keys, const K *probe_keys, const gj_h_item *items,  \
                                       int64_t num_items, const uint64_t *item_offsets,                   \
                                       const gj_h_side *build, const gj_h_side *probe, gj_h_stream_t s) { \
    return match_write<K>(build_keys, probe_keys, items, num_items, item_offsets, build, probe,          \
                          (cudaStream_t)s);                                                               \
  }                                                                                                       \
  extern "C" int gj_h_match_spec_##KN(const K *build_keys, const K *probe_keys, const gj_h_item *items,   \
                                      int64_t num_items, uint32_t *ticket, uint64_t *status,              \
                                      int64_t capacity, uint32_t *overflow, const gj_h_side *build,       \
                                      const gj_h_side *probe, gj_h_stream_t s) {                          \
    return match_spec<K>(build_keys, probe_keys, items, num_items, ticket, status, capacity, overflow,   \
                         build, probe, (cudaStream_t)s);                                                  \
  }
GJ_H_DEF_MATCH(u32, uint32_t)
GJ_H_DEF_MATCH(u64, uint64_t)

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

#define GJ_H_DEF_SCATTER(KN, K, VN, V)                                                                    \
  extern "C" int gj_h_chunk_scatter_##KN##_##VN(const K *sorted_keys, const V *sorted_vals, int64_t n,   \
                                                int bits, const uint64_t *local_offsets,                  \
                                                const uint64_t *cursor, V *out, gj_h_stream_t s) {        \
    if (bits < 0 || bits > 30 || n < 0) return (int)cudaErrorInvalidValue;                                \
    if (n == 0) return 0;                                                                                 \
    chunk_scatter_kernel<K, V><<<grid(n), 256, 0, (cudaStream_t)s>>>(                                     \
        sorted_keys, sorted_vals, n, (uint64_t)(((int64_t)1 << bits) - 1), local_offsets, cursor, out);  \
    return launch_status();                                                                               \
  }
GJ_H_DEF_SCATTER(u32, uint32_t, u32, uint32_t)
GJ_H_DEF_SCATTER(u32, uint32_t, u64, uint64_t)
GJ_H_DEF_SCATTER(u64, uint64_t, u32, uint32_t)
GJ_H_DEF_SCATTER(u64, uint64_t, u64, uint64_t)

extern "C" int gj_h_advance_cursor(const uint64_t *local_offsets, int64_t parts, uint64_t *cursor,
                                   gj_h_stream_t s) {
  if (parts <= 0) return 0;
  advance_cursor_kernel<<<grid(parts), 256, 0, (cudaStream_t)s>>>(local_offsets, parts, cursor);
  return launch_status();
}

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
    const int64_t want = (n + (int64_t)SNT * 16 - 1) / ((int64_t)SNT * 16);                               \
    const int blocks = (int)(want < 1024 ? want : 1024);                                                  \
    sample_match_kernel<K><<<blocks, SNT, 0, (cudaStream_t)s>>>(sample, m, build, n, mode, nan_never,     \
                                                               flags);                                   \
    return launch_status();                                                                               \
  }
GJ_H_DEF_SAMPLE(u32, uint32_t)
GJ_H_DEF_SAMPLE(u64, uint64_t)
