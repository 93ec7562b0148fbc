// Hash join: the partitioned join's match passes, one block per work item building a
// shared-memory table on its build chunk and probing it (see hash.cuh).
#include "gpujoin/look_back.cuh"
#include "hash.cuh"

namespace {
using namespace gj;
using namespace gj::hash;

// Slot of a key in a shared-memory table: all bits of the key count, so keys that share their
// low (partition) bits still spread.
__device__ __forceinline__ uint32_t slot_hash(uint32_t k) { return fmix32(k ^ 0x9E3779B9u); }
__device__ __forceinline__ uint32_t slot_hash(uint64_t k) { return (uint32_t)fmix64(k ^ 0x9E3779B97F4A7C15ull); }

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

// Raises the probe side's `moved` flag (one store per work item that moved rows).
__device__ __forceinline__ void note_moved(const gj_h_side &pside, bool in_place) {
  if (pside.moved && !in_place && threadIdx.x == 0) *pside.moved = 1;
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
  // Whether this item's pairs are its probe rows, each once, in order, from row probe_begin
  // (block-uniform: `multi` and `tile_total` are).
  bool in_place = base == it.probe_begin;
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
    const uint32_t tile_rows = min((uint32_t)TILE, it.probe_len - t0);
    if (tile_total == 0) {  // the same for every thread
      in_place = false;
      continue;
    }
    const bool tile_multi = __syncthreads_or(multi);
    in_place = in_place && !tile_multi && tile_total == tile_rows;
    if (!tile_multi) {
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
  note_moved(pside, in_place || it.probe_len == 0);
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
// (the caller then runs the two passes); status[num_items - 1] ends as the total
// (gpujoin/look_back.cuh).
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
    if (s_abort) look_back_abandon(status, s_item);
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
    // At most one match a row: every row matched is every row written in order.
    note_moved(pside, (base == it.probe_begin && total == it.probe_len) || it.probe_len == 0);
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// C ABI
// ---------------------------------------------------------------------------------------------
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

