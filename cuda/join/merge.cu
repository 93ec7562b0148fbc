// Sort-merge (ModernGPU RelationalJoin) kernels: equality counts and the Cartesian expansion
// by load-balancing search.
#include "gpujoin/launch.cuh"
#include "gpujoin/lbs.cuh"
#include "gpujoin/look_back.cuh"
#include "gpujoin_join.h"

namespace {
using namespace gj;
constexpr int NT = 256, VT = 8, NV = NT * VT;

__global__ void merge_counts_kernel(const uint32_t *lb, const uint32_t *ub, int64_t n, bool keep_unmatched,
                                    uint32_t *counts) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t c = ub[i] - lb[i];
    counts[i] = (c == 0 && keep_unmatched) ? 1u : c;
  }
}

__global__ void __launch_bounds__(NT) merge_expand_kernel(const uint64_t *offsets, int64_t n, int64_t total,
                                                          const int64_t *parts, const uint32_t *lb,
                                                          const uint32_t *ub, const uint32_t *a_rows,
                                                          const uint32_t *b_rows, uint32_t *out_a,
                                                          uint32_t *out_b) {
  __shared__ uint64_t shared[NV + 2];
  lbs_tile<NT, VT>(offsets, n, total, parts, shared, [&](int64_t item, int64_t seg, uint64_t rank) {
    uint32_t l = lb[seg], u = ub[seg];
    out_a[item] = a_rows ? a_rows[seg] : (uint32_t)seg;
    uint32_t j = l + (uint32_t)rank;
    out_b[item] = u > l ? (b_rows ? b_rows[j] : j) : kNone;
  });
}
}  // namespace

extern "C" int gj_j_merge_counts(const uint32_t *lb, const uint32_t *ub, int64_t n, int keep_unmatched,
                                 uint32_t *counts, gj_j_stream_t s) {
  if (n <= 0) return 0;
  merge_counts_kernel<<<blocks_for_sms(n, 256 * 4, tuning::kStreamBlocksPerSm), 256, 0, (cudaStream_t)s>>>(lb, ub, n, keep_unmatched != 0,
                                                                                    counts);
  return launch_status();
}

extern "C" int gj_j_merge_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t n, int64_t total,
                                 const uint32_t *lb, const uint32_t *ub, const uint32_t *a_rows,
                                 const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b, gj_j_stream_t s) {
  int64_t *parts = nullptr, tiles = 0;
  int rc = lbs_setup(temp, temp_bytes, offsets, n, total, NV, (cudaStream_t)s, &parts, &tiles);
  if (rc != 0) return rc < 0 ? 0 : rc;
  merge_expand_kernel<<<(unsigned)tiles, NT, 0, (cudaStream_t)s>>>(offsets, n, total, parts, lb, ub, a_rows, b_rows,
                                                                   out_a, out_b);
  return launch_status();
}

// ---------------------------------------------------------------------------------------------
// Fused merge join on sorted keys (the fast path of the ModernGPU join).
// Tiles are merge-path tiles of (A, B) with A first on ties, so the B items consumed before A[i]
// number lower_bound(A[i] in B). One pass (fused_single_kernel): each tile counts its rows,
// scans them in the CTA, learns where its rows start by decoupled look-back and writes them,
// into maps of a guessed capacity. Two passes (when the output passes that capacity): pass 1
// counts each tile's output rows (and flags matched B rows); pass 2 recomputes the counts, scans
// them in the CTA and writes the tile's rows at offsets scanned between the passes.
namespace {
constexpr int FNT = 256, FVT = 8, FNV = FNT * FVT;

template <class K>
struct FusedShared {
  K keys[FNV];
  uint32_t lb[FNV];     // lower bound of each A item of the tile (global B index)
  uint32_t cnt[FNV];    // equal B items per A item
  uint64_t tail;        // B items equal to the first B key after the tile, from there on
  uint64_t red[FNT / 32];
};

// The write passes also scan the tile's output rows, in the counts' place (tile_row_scan).
template <class K>
struct FusedWriteShared : FusedShared<K> {
  uint64_t warp_rows[FNT / 32];
};

// Blocks an SM the fused passes are compiled for: 8 (all of an SM's threads) for 4-byte keys, at
// most 32 registers (no spill on sm_90 but a few words in the order-checking pass) and 24.7 KiB
// of shared memory a block, as the passes wait on shared-memory and barrier latency more than on
// bytes; 6 for 8-byte keys, whose 33 KiB of shared memory allow no more.
template <class K>
constexpr int fused_blocks_per_sm() { return sizeof(K) == 4 ? 8 : 6; }

// A scanned word (tile_row_scan): the A item's first output row in the tile, and this bit where
// its one row has no B row (an unmatched A row of a left or full join).
constexpr uint32_t kNoMatch = 0x80000000u;

template <class K>
__device__ __forceinline__ bool keq(K x, K y) { return !less(x, y) && !less(y, x); }

// A merge-path tile's parts of A and B: A[a0, a1) and B[b0, b1), na + nb <= FNV items.
struct TileParts {
  int64_t a0, a1, b0, b1;
  int na, nb;
};

__device__ __forceinline__ TileParts tile_parts(const int64_t *parts, int64_t tile, int64_t a_len, int64_t b_len) {
  int64_t d0 = tile * FNV, d1 = d0 + FNV;
  if (d1 > a_len + b_len) d1 = a_len + b_len;
  TileParts t;
  t.a0 = parts[tile];
  t.a1 = parts[tile + 1];
  t.b0 = d0 - t.a0;
  t.b1 = d1 - t.a1;
  t.na = (int)(t.a1 - t.a0);
  t.nb = (int)(t.b1 - t.b0);
  return t;
}

// The tile's keys into `keys` (its A part, then its B part); no barrier. All of a thread's loads
// are in flight at once (a loop over them would wait for each in turn).
template <class K>
__device__ __forceinline__ void tile_load_keys(const K *a_part, int na, const K *b_part, int nb, K *keys) {
  K v[FVT];
#pragma unroll
  for (int k = 0; k < FVT; ++k) {
    const int i = threadIdx.x + k * FNT;
    if (i < na + nb) v[k] = i < na ? a_part[i] : b_part[i - na];
  }
#pragma unroll
  for (int k = 0; k < FVT; ++k) {
    const int i = threadIdx.x + k * FNT;
    if (i < na + nb) keys[i] = v[k];
  }
}

// Where this thread's FVT merged items start in the tile (A first on ties): the A items before
// its diagonal; the B items before it are the diagonal less those. (fused_tile keeps the same
// search written out: as a call, ptxas spills more of its count and order-checking passes.)
template <class K>
__device__ __forceinline__ int thread_split(const K *ta, int na, const K *tb, int nb, int diag) {
  int lo = diag > nb ? diag - nb : 0, hi = diag < na ? diag : na;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (!less(tb[diag - 1 - mid], ta[mid])) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Loads the tile, merges it (lower bounds, B match flags) and counts equal B items per A item.
// CHECK (the count pass asked to check the order; `unsorted` not null): the merge walk also
// checks the order, and holds its lower bounds in registers until the check passed (the walks of
// unsorted keys may overlap; their writes would race). Each thread compares every key it merges with the one before it on its side
// (its first one with the key before it, in the tile or before the tile), and the threads' walks
// must tile the merge (each ends where the next one starts), so together they compare every
// adjacent pair of the tile's part of each side, the part's first key with the key before it.
// Tiles cover both sides, so every pair of the input is compared. A tile out of order ORs bit 0
// (A), 1 (B) or both (walks that do not tile: unsorted keys somewhere) into *unsorted and returns
// false (block-uniform) before the counts, which assume sorted keys.
template <class K, bool CHECK>
__device__ __forceinline__ bool fused_tile(const K *a, int64_t a_len, const K *b, int64_t b_len, const int64_t *parts,
                                           int64_t tile, FusedShared<K> &sh, int64_t &a0, int &na, uint8_t *b_match,
                                           uint32_t *unsorted) {
  const int tid = threadIdx.x;
  int64_t d0 = tile * FNV, d1 = d0 + FNV;
  if (d1 > a_len + b_len) d1 = a_len + b_len;
  a0 = parts[tile];
  const int64_t a1 = parts[tile + 1], b0 = d0 - a0, b1 = d1 - a1;
  na = (int)(a1 - a0);
  const int nb = (int)(b1 - b0);
  K *ta = sh.keys, *tb = sh.keys + na;
  // The probes of the tail search are issued with the tile loads rather than after them.
  const bool may_continue = tid == 0 && b1 < b_len && na > 0;
  K last_a = K(), next_b = K(), next_b1 = K();
  if (may_continue) {
    last_a = a[a1 - 1];
    next_b = b[b1];
    if (b1 + 1 < b_len) next_b1 = b[b1 + 1];
  }
  tile_load_keys(a + a0, na, b + b0, nb, sh.keys);
  if (tid == 0) {
    // Galloping count of the B run that continues past the tile (only its key can continue).
    uint64_t t = 0;
    if (may_continue && keq(last_a, next_b)) {
      const K key = next_b;
      if (!(b1 + 1 < b_len && keq(next_b1, key))) {
        t = 1;  // the prefetched second probe ends the run: no further load
      } else {
        int64_t lo = b1 + 1, step = 2, hi = lo + step;  // B[lo] == key
        while (hi < b_len && keq(b[hi], key)) {
          lo = hi;
          step <<= 1;
          hi = lo + step;
        }
        if (hi > b_len) hi = b_len;
        while (hi - lo > 1) {  // B[lo] == key, B[hi] != key or hi == b_len
          int64_t mid = (lo + hi) >> 1;
          if (keq(b[mid], key)) lo = mid;
          else hi = mid;
        }
        t = (uint64_t)(lo + 1 - b1);
      }
    }
    sh.tail = t;
  }
  __syncthreads();
  int diag = tid * FVT;
  if (diag > na + nb) diag = na + nb;
  int lo = diag > nb ? diag - nb : 0, hi = diag < na ? diag : na;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (!less(tb[diag - 1 - mid], ta[mid])) lo = mid + 1;
    else hi = mid;
  }
  int pa = lo, pb = diag - lo;
  const int pa_start = pa;
  // The merge heads stay in registers: one shared-memory read per step.
  K va = pa < na ? ta[pa] : K(), vb = pb < nb ? tb[pb] : K();
  // CHECK: the key before each side's next one (none before a side's first key).
  uint32_t bad = 0;
  int held_at[FVT];         // CHECK: the A item of each step's lower bound (-1: a B step)
  uint32_t held_lb[FVT];
  bool has_prev_a = false, has_prev_b = false;
  K prev_a = K(), prev_b = K();
  if (CHECK) {
    if (pa > 0 || a0 > 0) {
      prev_a = pa > 0 ? ta[pa - 1] : a[a0 - 1];
      has_prev_a = true;
    }
    if (pb > 0 || b0 > 0) {
      prev_b = pb > 0 ? tb[pb - 1] : b[b0 - 1];
      has_prev_b = true;
    }
  }
#pragma unroll
  for (int s = 0; s < FVT; ++s) {
    if (CHECK) held_at[s] = -1;
    if (pa + pb >= na + nb) continue;
    if (pb >= nb || (pa < na && !less(vb, va))) {
      if (CHECK) {
        if (has_prev_a && less(va, prev_a)) bad |= 1u;
        prev_a = va;
        has_prev_a = true;
        held_at[s] = pa;
        held_lb[s] = (uint32_t)(b0 + pb);
      } else {
        sh.lb[pa] = (uint32_t)(b0 + pb);
      }
      ++pa;
      if (pa < na) va = ta[pa];
    } else {
      if (CHECK) {
        if (has_prev_b && less(vb, prev_b)) bad |= 2u;
        prev_b = vb;
        has_prev_b = true;
      }
      if (b_match) {
        int64_t i = a0 + pa - 1;
        b_match[b0 + pb] = i >= 0 && keq(pa > 0 ? ta[pa - 1] : a[i], vb);
      }
      ++pb;
      if (pb < nb) vb = tb[pb];
    }
  }
  if (CHECK) sh.cnt[tid] = (uint32_t)pa_start;  // cnt is written by the counts below, after barriers
  __syncthreads();
  if (CHECK) {
    // The walks tile the merge: this one ends where the next starts, the last at the end of A.
    if (pa != (tid + 1 < FNT ? (int)sh.cnt[tid + 1] : na)) bad |= 3u;
    if (bad) atomicOr(unsorted, bad);  // rare: unsorted input only
    if (__syncthreads_or(bad != 0)) return false;
#pragma unroll
    for (int s = 0; s < FVT; ++s)
      if (held_at[s] >= 0) sh.lb[held_at[s]] = held_lb[s];
    __syncthreads();
  }
  // Equal B items per A item: a galloping search from the lower bound (one or two probes when
  // keys are unique, O(log run) otherwise).
  for (int i = tid; i < na; i += FNT) {
    K key = ta[i];
    int j0 = (int)(sh.lb[i] - b0);
    int l = j0;  // one past the last tile B item equal to key
    if (j0 < nb && keq(tb[j0], key)) {
      int lo = j0, step = 1, hi = j0 + 1;  // tb[lo] == key
      while (hi < nb && keq(tb[hi], key)) {
        lo = hi;
        step <<= 1;
        hi = lo + step;
      }
      if (hi > nb) hi = nb;
      while (hi - lo > 1) {
        int m = (lo + hi) >> 1;
        if (keq(tb[m], key)) lo = m;
        else hi = m;
      }
      l = lo + 1;
    }
    uint64_t c = (uint64_t)(l - j0);
    if (l == nb && b1 < b_len && keq(key, b[b1])) c += sh.tail;
    sh.cnt[i] = (uint32_t)c;  // <= |B| < 2^32
  }
  __syncthreads();
  return true;
}

// Merge-path partitions of unsorted keys need not be monotone; such a tile would not fit its
// shared memory. Block-uniform.
__device__ __forceinline__ bool tile_parts_fit(const int64_t *parts, int64_t tile, int64_t a_len, int64_t b_len) {
  const int64_t p0 = parts[tile], p1 = parts[tile + 1];
  const int64_t d0 = tile * FNV;
  int64_t d1 = d0 + FNV;
  if (d1 > a_len + b_len) d1 = a_len + b_len;
  return !(p1 < p0 || (d1 - p1) < (d0 - p0));
}

__device__ __forceinline__ uint64_t block_sum(uint64_t v, uint64_t *red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  uint64_t t = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < FNT / 32; ++w) t += red[w];
  return t;
}

template <class K>
__global__ void __launch_bounds__(FNT, fused_blocks_per_sm<K>()) fused_count_kernel(const K *a, int64_t a_len, const K *b, int64_t b_len,
                                                          const int64_t *parts, bool keep_unmatched, uint64_t *tile_rows,
                                                          uint8_t *b_match, uint64_t cap, uint32_t *over_cap,
                                                          uint32_t *unsorted) {
  __shared__ FusedShared<K> sh;
  if (!tile_parts_fit(parts, blockIdx.x, a_len, b_len)) {
    if (threadIdx.x == 0) {
      if (unsorted) atomicOr(unsorted, 3u);
      atomicOr(over_cap, 1u);
      tile_rows[blockIdx.x] = 0;
    }
    return;
  }
  int64_t a0;
  int na;
  const bool counted = unsorted ? fused_tile<K, true>(a, a_len, b, b_len, parts, blockIdx.x, sh, a0, na, b_match, unsorted)
                                 : fused_tile<K, false>(a, a_len, b, b_len, parts, blockIdx.x, sh, a0, na, b_match, nullptr);
  if (!counted) {
    if (threadIdx.x == 0) tile_rows[blockIdx.x] = 0;
    return;
  }
  uint64_t s = 0;
  for (int i = threadIdx.x; i < na; i += FNT) {
    uint32_t c = sh.cnt[i];
    s += (c == 0 && keep_unmatched) ? 1 : c;
  }
  uint64_t t = block_sum(s, sh.red);
  if (threadIdx.x == 0) {
    tile_rows[blockIdx.x] = t;
    if (t > cap) atomicOr(over_cap, 1u);  // rare; no contention otherwise
  }
}

// After fused_tile: the exclusive scan of the tile's output rows per A item (each
// thread a run of FNV / FNT items, then the warps); returns the tile's rows on every thread.
// 64-bit: counts may sum past 2^32; the scan is exact when the rows fit 31 bits (the callers
// write only tiles of at most `cap` rows). The scan replaces the counts in sh.cnt, with
// kNoMatch on the A items whose row has no B row; an item's rows run to the next one's start
// (`rows` for the last).
// Example: counts 2, 0, 3 give scan 0, 2, 2 and 5 rows; in a left join 0, 2, 3|kNoMatch, 6 rows.
template <class K>
__device__ __forceinline__ uint64_t tile_row_scan(FusedWriteShared<K> &sh, int na, bool keep_unmatched) {
  const int tid = threadIdx.x;
  constexpr int PER = FNV / FNT;  // items per thread, contiguous
  uint32_t local[PER];
  uint64_t run = 0;
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    int i = tid * PER + k;
    uint32_t c = i < na ? sh.cnt[i] : 0;
    const bool no_match = c == 0 && keep_unmatched && i < na;
    if (no_match) c = 1;
    local[k] = (uint32_t)run | (no_match ? kNoMatch : 0u);
    run += c;
  }
  uint64_t x = run;
  const int lane = tid & 31, warp = tid >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    uint64_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) sh.warp_rows[warp] = x;
  __syncthreads();
  uint64_t warp_off = 0, rows = 0;
  for (int w = 0; w < FNT / 32; ++w) {
    if (w < warp) warp_off += sh.warp_rows[w];
    rows += sh.warp_rows[w];
  }
  const uint32_t thread_off = (uint32_t)(warp_off + x - run);
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    int i = tid * PER + k;
    if (i < na) sh.cnt[i] = thread_off + local[k];  // the flag bit passes through: offsets < 2^31
  }
  __syncthreads();
  return rows;
}

// After tile_row_scan: writes the tile's `rows` output rows from `base` on, each row finding the A
// item whose range holds it by a binary search of the scan (any number of rows).
template <class K>
__device__ __forceinline__ void tile_write_searched(const FusedWriteShared<K> &sh, int na, int64_t a0, uint64_t base,
                                                    uint32_t rows, const uint32_t *a_rows, const uint32_t *b_rows,
                                                    uint32_t *out_a, uint32_t *out_b) {
  for (uint32_t k = threadIdx.x; k < rows; k += FNT) {
    // The A item whose output range holds k: last i whose rows start at or before k.
    int l = 0, h = na;
    while (h - l > 1) {
      int m = (l + h) >> 1;
      if ((sh.cnt[m] & ~kNoMatch) <= k) l = m;
      else h = m;
    }
    const uint32_t w = sh.cnt[l];
    uint32_t rank = k - (w & ~kNoMatch);
    uint32_t ai = (uint32_t)(a0 + l);
    uint32_t bj = sh.lb[l] + rank;
    out_a[base + k] = a_rows ? a_rows[ai] : ai;
    out_b[base + k] = (w & kNoMatch) ? kNone : (b_rows ? b_rows[bj] : bj);
  }
}

// Tiles of at most FNV rows (every tile of a join where either side's keys are unique) stage
// their rows in shared memory instead: each A item writes its own rows' (item, rank) words where
// the scan puts them (the keys' space, dead once counted), then the rows go out in order,
// coalesced. Example: counts 1, 0, 2 stage (0,0) (2,0) (2,1).
constexpr uint32_t kStagedRows = FNV;

template <class K>
__device__ __forceinline__ uint32_t *staged_rows(FusedWriteShared<K> &sh) {
  static_assert(sizeof(sh.keys) >= kStagedRows * sizeof(uint32_t), "staged rows fit the keys' space");
  return reinterpret_cast<uint32_t *>(sh.keys);
}

// The staging half (no barrier): threads take A items in turn (consecutive threads, consecutive
// items: their rows land in consecutive words).
template <class K>
__device__ __forceinline__ void tile_stage(FusedWriteShared<K> &sh, int na, uint32_t rows, int first_thread) {
  uint32_t *st = staged_rows(sh);
  for (int i = (int)threadIdx.x - first_thread; i < na; i += FNT - first_thread) {
    if (i < 0) continue;
    const uint32_t at = sh.cnt[i] & ~kNoMatch, end = i + 1 < na ? sh.cnt[i + 1] & ~kNoMatch : rows;
    for (uint32_t r = 0; at + r < end; ++r) st[at + r] = (uint32_t)i | (r << 16);
  }
}

// The writing half, after a barrier: the staged rows from `base` on.
template <class K>
__device__ __forceinline__ void tile_write_staged(FusedWriteShared<K> &sh, int64_t a0, uint64_t base, uint32_t rows,
                                                  const uint32_t *a_rows, const uint32_t *b_rows, uint32_t *out_a,
                                                  uint32_t *out_b) {
  const uint32_t *st = staged_rows(sh);
  for (uint32_t k = threadIdx.x; k < rows; k += FNT) {
    const uint32_t w = st[k], l = w & 0xFFFFu, rank = w >> 16;
    const uint32_t ai = (uint32_t)(a0 + l), bj = sh.lb[l] + rank;
    out_a[base + k] = a_rows ? a_rows[ai] : ai;
    out_b[base + k] = (sh.cnt[l] & kNoMatch) ? kNone : (b_rows ? b_rows[bj] : bj);
  }
}

template <class K>
__global__ void __launch_bounds__(FNT, fused_blocks_per_sm<K>()) fused_write_kernel(const K *a, int64_t a_len, const K *b, int64_t b_len,
                                                          const int64_t *parts, bool keep_unmatched,
                                                          const uint64_t *tile_offsets, const uint32_t *a_rows,
                                                          const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b) {
  __shared__ FusedWriteShared<K> sh;
  int64_t a0;
  int na;
  fused_tile<K, false>(a, a_len, b, b_len, parts, blockIdx.x, sh, a0, na, nullptr, nullptr);
  tile_row_scan(sh, na, keep_unmatched);
  const uint64_t base = tile_offsets[blockIdx.x];
  const uint32_t rows = (uint32_t)(tile_offsets[blockIdx.x + 1] - base);
  if (rows > kStagedRows) {
    tile_write_searched(sh, na, a0, base, rows, a_rows, b_rows, out_a, out_b);
    return;
  }
  tile_stage(sh, na, rows, 0);
  __syncthreads();
  tile_write_staged(sh, a0, base, rows, a_rows, b_rows, out_a, out_b);
}

// The one passes' start: the block takes its tile from the ticket (ctl[0]), so that every tile
// before it has started, broadcast through the kernel's `s_tile` (a shared word of the kernel's
// own: ptxas then allocates the passes as before). kNoTile (block-uniform) where a flag is up
// already or the tile's partitions show unsorted keys (flagged here); the tile has then given
// up its look-back.
constexpr uint32_t kNoTile = 0xFFFFFFFFu;

template <bool CHECK>
__device__ __forceinline__ uint32_t take_tile(unsigned long long *ctl, const int64_t *parts, int64_t a_len, int64_t b_len,
                                              uint32_t &s_tile) {
  unsigned long long *const flags = ctl + 1, *const status = ctl + 3;
  if (threadIdx.x == 0) {
    uint32_t t = (uint32_t)atomicAdd(ctl, 1ull);
    bool abort = *(volatile unsigned long long *)flags != 0;
    if (!abort && !tile_parts_fit(parts, t, a_len, b_len)) {
      atomicOr(flags, (unsigned long long)(GJ_J_MERGE_OVER_CAP | (CHECK ? GJ_J_MERGE_UNSORTED_A | GJ_J_MERGE_UNSORTED_B : 0)));
      abort = true;
    }
    if (abort) look_back_abandon(status, t);
    s_tile = abort ? kNoTile : t;
  }
  __syncthreads();
  return s_tile;
}

// Warp 0 of a one pass's tile of `rows` rows: where they start (decoupled look-back, into
// *base on thread 0), GJ_J_MERGE_OVERFLOW where they pass `capacity`, and the rows in all
// (ctl[2]) from the last tile.
__device__ __forceinline__ void tile_rows_start(unsigned long long *ctl, uint32_t tile, uint64_t rows, uint64_t capacity,
                                                int64_t items, uint64_t *base) {
  const uint64_t excl = look_back(ctl + 3, tile, rows);
  if (threadIdx.x == 0) {
    *base = excl;
    if (excl + rows > capacity) atomicOr(ctl + 1, (unsigned long long)GJ_J_MERGE_OVERFLOW);
    if ((int64_t)tile == (items - 1) / FNV) ctl[2] = excl + rows;
  }
}

// The one pass. ctl (zeroed): [0] ticket, [1] flags (GJ_J_MERGE_* of gpujoin_join.h), [2] rows
// in all (written by the last tile), then one look-back status word per tile. Once a flag is set
// the output is thrown away: later tiles abandon their look-back and stop.
template <class K, bool CHECK>
__global__ void __launch_bounds__(FNT, fused_blocks_per_sm<K>()) fused_single_kernel(const K *a, int64_t a_len, const K *b, int64_t b_len,
                                                           const int64_t *parts, bool keep_unmatched,
                                                           unsigned long long *ctl, uint64_t cap, uint64_t capacity,
                                                           uint8_t *b_match, const uint32_t *a_rows,
                                                           const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b) {
  __shared__ FusedWriteShared<K> sh;
  __shared__ uint64_t s_base;
  unsigned long long *const flags = ctl + 1, *const status = ctl + 3;
  __shared__ uint32_t s_tile;
  const uint32_t tile = take_tile<CHECK>(ctl, parts, a_len, b_len, s_tile);
  if (tile == kNoTile) return;
  int64_t a0;
  int na;
  // The unsorted bits are the flag word's low bits (little-endian: its first 32-bit word).
  uint32_t *const unsorted = CHECK ? reinterpret_cast<uint32_t *>(flags) : nullptr;
  if (!fused_tile<K, CHECK>(a, a_len, b, b_len, parts, tile, sh, a0, na, b_match, unsorted)) {
    if (threadIdx.x == 0) look_back_abandon(status, tile);
    return;
  }
  const uint64_t rows = tile_row_scan(sh, na, keep_unmatched);
  if (rows > cap) {
    if (threadIdx.x == 0) {
      atomicOr(flags, (unsigned long long)GJ_J_MERGE_OVER_CAP);
      look_back_abandon(status, tile);
    }
    return;
  }
  // Warp 0 learns where the rows start while the other warps stage them.
  const bool staged = rows <= kStagedRows;
  if (threadIdx.x < 32) {
    tile_rows_start(ctl, tile, rows, capacity, a_len + b_len, &s_base);
  } else if (staged) {
    tile_stage(sh, na, (uint32_t)rows, 32);
  }
  __syncthreads();
  const uint64_t base = s_base;
  if (base + rows > capacity) return;
  if (staged) tile_write_staged(sh, a0, base, (uint32_t)rows, a_rows, b_rows, out_a, out_b);
  else tile_write_searched(sh, na, a0, base, (uint32_t)rows, a_rows, b_rows, out_a, out_b);
}

// ---------------------------------------------------------------------------------------------
// The one pass where, key by key, one side has at most one row (PK-FK joins, either side the
// key). Key k's items in the merge (A first on ties) are a run a_1..a_α, then b_1..b_β. Its
// rows fall where the general pass puts them (by A, then B), each at one merged item:
//   α == 1:          each B item b_j gives (a_1, b_j), at b_j (a_1 is the A item before it);
//   α >= 2, β == 1:  each A item a_i gives (a_i, b_1), at a_i (b_1 is the head of B there);
//   β == 0:          each A item gives (a_i, none) in left and full joins, at a_i.
// A key with α >= 2 and β >= 2 (seen at its second B item) sets GJ_J_MERGE_MANY_TO_MANY: the
// maps mean nothing and the general one pass runs instead. So each merged item gives at most one
// row and a tile at most FNV: each thread keeps its rows in shared memory as it walks, the block
// scans one count a thread, and the rows go out coalesced; no lower bounds, no equal-range
// searches, no tail run.
// Example: A = 1 2 2 3, B = 2 3 3 merge as 1a 2a 2a 2b 3a 3b 3b; the rows are (1,0) (2,0) at the
// A items of key 2 (α = 2, β = 1) and (3,1) (3,2) at the B items of key 3 (α = 1).
template <class K>
struct SingleMatchShared {
  K keys[FNV];                 // the tile's keys; then its staged rows (u32 words)
  uint32_t rows[FVT][FNT];     // thread t's s-th row at [s][t] (no bank conflicts)
  int walk_start[FNT];         // CHECK: the A item where each thread's walk starts
  uint32_t warp_rows[FNT / 32];
  K a_before[2], a_after, b_before, b_after;  // the keys next to the tile's parts (that exist)
};

// A row word: the A item + 1 relative to the tile's first (0: the A item before the tile) in
// the low half, the B item relative to the tile's first (nb: the one after it) or kNoRow above.
constexpr uint32_t kNoRow = 0xFFFFu;

template <class K, bool CHECK>
__global__ void __launch_bounds__(FNT, fused_blocks_per_sm<K>()) single_match_kernel(const K *a, int64_t a_len, const K *b, int64_t b_len,
                                                           const int64_t *parts, bool keep_unmatched,
                                                           unsigned long long *ctl, uint64_t capacity,
                                                           uint8_t *b_match, const uint32_t *a_rows,
                                                           const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b) {
  __shared__ SingleMatchShared<K> sh;
  __shared__ uint64_t s_base;
  unsigned long long *const flags = ctl + 1, *const status = ctl + 3;
  // The flag bits are the flag word's low bits (little-endian: its first 32-bit word).
  uint32_t *const flag_bits = reinterpret_cast<uint32_t *>(flags);
  const int tid = threadIdx.x;
  __shared__ uint32_t s_tile;
  const uint32_t tile = take_tile<CHECK>(ctl, parts, a_len, b_len, s_tile);
  if (tile == kNoTile) return;
  const TileParts t = tile_parts(parts, tile, a_len, b_len);
  const int na = t.na, nb = t.nb;
  const K *ta = sh.keys, *tb = sh.keys + na;
  if (tid == 0) {
    if (t.a0 >= 1) sh.a_before[0] = a[t.a0 - 1];
    if (t.a0 >= 2) sh.a_before[1] = a[t.a0 - 2];
    if (t.a1 < a_len) sh.a_after = a[t.a1];
    if (t.b0 >= 1) sh.b_before = b[t.b0 - 1];
    if (t.b1 < b_len) sh.b_after = b[t.b1];
  }
  tile_load_keys(a + t.a0, na, b + t.b0, nb, sh.keys);
  __syncthreads();
  int diag = tid * FVT;
  if (diag > na + nb) diag = na + nb;
  int pa = thread_split(ta, na, tb, nb, diag), pb = diag - pa;
  if (CHECK) sh.walk_start[tid] = pa;
  // A items by tile index, -2 and -1 before the tile, na after it (where they exist).
  auto key_a = [&](int i) { return i >= 0 ? (i < na ? ta[i] : sh.a_after) : sh.a_before[-1 - i]; };
  const bool has_a_after = t.a1 < a_len, has_b_after = t.b1 < b_len;
  // The merge heads; the A item before this walk's (`last_a`), whether it ends a run of two or
  // more (`last_a_run`); the B item before this walk's (`last_b`).
  K va = pa < na ? ta[pa] : K(), vb = pb < nb ? tb[pb] : K();
  bool has_last_a = t.a0 + pa >= 1, has_last_b = t.b0 + pb >= 1;
  K last_a = has_last_a ? key_a(pa - 1) : K();
  bool last_a_run = t.a0 + pa >= 2 && keq(key_a(pa - 2), last_a);
  K last_b = has_last_b ? (pb > 0 ? tb[pb - 1] : sh.b_before) : K();
  const K b_after = sh.b_after;
  uint32_t n = 0, bad = 0;
  bool many = false;
#pragma unroll
  for (int s = 0; s < FVT; ++s) {
    if (pa + pb >= na + nb) continue;
    if (pb >= nb || (pa < na && !less(vb, va))) {
      // A step: the next A key (the run's look-ahead) and the head of B.
      const bool has_next = pa + 1 < na || has_a_after;
      const K next = pa + 1 < na ? ta[pa + 1] : sh.a_after;
      const bool match = (pb < nb || has_b_after) && keq(pb < nb ? vb : b_after, va);
      const bool run = (has_last_a && keq(last_a, va)) || (has_next && keq(next, va));
      if (CHECK && has_last_a && less(va, last_a)) bad |= GJ_J_MERGE_UNSORTED_A;
      if (match ? run : keep_unmatched) sh.rows[n++][tid] = (uint32_t)(pa + 1) | ((match ? (uint32_t)pb : kNoRow) << 16);
      last_a_run = has_last_a && keq(last_a, va);
      last_a = va;
      has_last_a = true;
      ++pa;
      va = next;
    } else {
      // B step: the A item before it is its only match unless its key's A run is longer.
      const bool match = has_last_a && keq(last_a, vb);
      if (CHECK && has_last_b && less(vb, last_b)) bad |= GJ_J_MERGE_UNSORTED_B;
      if (match) {
        if (!last_a_run) sh.rows[n++][tid] = (uint32_t)pa | ((uint32_t)pb << 16);
        else if (has_last_b && keq(last_b, vb)) many = true;
      }
      if (b_match) b_match[t.b0 + pb] = match;
      last_b = vb;
      has_last_b = true;
      ++pb;
      if (pb < nb) vb = tb[pb];
    }
  }
  // The block's scan of the rows, one count a thread.
  const int lane = tid & 31, warp = tid >> 5;
  uint32_t x = n;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) sh.warp_rows[warp] = x;
  if (many) atomicOr(flag_bits, GJ_J_MERGE_MANY_TO_MANY);  // once a thread, where a key has many rows on both sides
  bool give_up = many;
  if (CHECK) {
    __syncthreads();
    // The walks tile the merge: this one ends where the next starts, the last at the end of A.
    if (pa != (tid + 1 < FNT ? sh.walk_start[tid + 1] : na)) bad |= GJ_J_MERGE_UNSORTED_A | GJ_J_MERGE_UNSORTED_B;
    if (bad) atomicOr(flag_bits, bad);  // rare: unsorted input only
    give_up |= bad != 0;
  }
  if (__syncthreads_or(give_up)) {
    if (tid == 0) look_back_abandon(status, tile);
    return;
  }
  uint32_t warp_off = 0, rows = 0;
#pragma unroll
  for (int w = 0; w < FNT / 32; ++w) {
    const uint32_t r = sh.warp_rows[w];
    if (w < warp) warp_off += r;
    rows += r;
  }
  // Staged in the keys' space, dead now that every walk is done.
  uint32_t *const staged = reinterpret_cast<uint32_t *>(sh.keys);
  const uint32_t at = warp_off + x - n;
#pragma unroll
  for (int s = 0; s < FVT; ++s)
    if ((uint32_t)s < n) staged[at + s] = sh.rows[s][tid];
  if (tid < 32) tile_rows_start(ctl, tile, rows, capacity, a_len + b_len, &s_base);
  __syncthreads();
  const uint64_t base = s_base;
  if (base + rows > capacity) return;
  for (uint32_t k = tid; k < rows; k += FNT) {
    const uint32_t w = staged[k], bi = w >> 16;
    const uint32_t ai = (uint32_t)(t.a0 + (w & 0xFFFFu) - 1);
    out_a[base + k] = a_rows ? a_rows[ai] : ai;
    out_b[base + k] = bi == kNoRow ? kNone : (b_rows ? b_rows[t.b0 + bi] : (uint32_t)(t.b0 + bi));
  }
}
}  // namespace

#define GJ_J_DEF_FUSED(KN, K)                                                                          \
  extern "C" int gj_j_merge_count_##KN(const K *a, int64_t a_len, const K *b, int64_t b_len,          \
                                       const int64_t *parts, int keep_unmatched, uint64_t *tile_rows, \
                                       uint8_t *b_match, uint64_t cap, uint32_t *over_cap,            \
                                       uint32_t *unsorted, gj_j_stream_t s) {                         \
    int64_t tiles = (a_len + b_len + FNV - 1) / FNV;                                                   \
    if (tiles == 0) return 0;                                                                          \
    fused_count_kernel<K><<<(unsigned)tiles, FNT, 0, (cudaStream_t)s>>>(a, a_len, b, b_len, parts,     \
                                                                        keep_unmatched != 0, tile_rows, \
                                                                        b_match, cap, over_cap, unsorted); \
    return launch_status();                                                                            \
  }                                                                                                    \
  extern "C" int gj_j_merge_write_##KN(const K *a, int64_t a_len, const K *b, int64_t b_len,          \
                                       const int64_t *parts, int keep_unmatched,                      \
                                       const uint64_t *tile_offsets, const uint32_t *a_rows,          \
                                       const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b,      \
                                       gj_j_stream_t s) {                                             \
    int64_t tiles = (a_len + b_len + FNV - 1) / FNV;                                                   \
    if (tiles == 0) return 0;                                                                          \
    fused_write_kernel<K><<<(unsigned)tiles, FNT, 0, (cudaStream_t)s>>>(                               \
        a, a_len, b, b_len, parts, keep_unmatched != 0, tile_offsets, a_rows, b_rows, out_a, out_b);   \
    return launch_status();                                                                            \
  }                                                                                                    \
  extern "C" int gj_j_merge_single_##KN(const K *a, int64_t a_len, const K *b, int64_t b_len,         \
                                        const int64_t *parts, int keep_unmatched, uint64_t *ctl,      \
                                        uint64_t cap, uint64_t capacity, uint8_t *b_match,            \
                                        int check_order, int single_match, const uint32_t *a_rows,    \
                                        const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b,     \
                                        gj_j_stream_t s) {                                            \
    int64_t tiles = (a_len + b_len + FNV - 1) / FNV;                                                   \
    if (tiles == 0) return 0;                                                                          \
    auto *c = (unsigned long long *)ctl;                                                               \
    if (single_match && check_order)                                                                   \
      single_match_kernel<K, true><<<(unsigned)tiles, FNT, 0, (cudaStream_t)s>>>(                      \
          a, a_len, b, b_len, parts, keep_unmatched != 0, c, capacity, b_match, a_rows, b_rows, out_a, \
          out_b);                                                                                      \
    else if (single_match)                                                                             \
      single_match_kernel<K, false><<<(unsigned)tiles, FNT, 0, (cudaStream_t)s>>>(                     \
          a, a_len, b, b_len, parts, keep_unmatched != 0, c, capacity, b_match, a_rows, b_rows, out_a, \
          out_b);                                                                                      \
    else if (check_order)                                                                              \
      fused_single_kernel<K, true><<<(unsigned)tiles, FNT, 0, (cudaStream_t)s>>>(                      \
          a, a_len, b, b_len, parts, keep_unmatched != 0, c, cap, capacity, b_match, a_rows, b_rows,   \
          out_a, out_b);                                                                               \
    else                                                                                               \
      fused_single_kernel<K, false><<<(unsigned)tiles, FNT, 0, (cudaStream_t)s>>>(                     \
          a, a_len, b, b_len, parts, keep_unmatched != 0, c, cap, capacity, b_match, a_rows, b_rows,   \
          out_a, out_b);                                                                               \
    return launch_status();                                                                            \
  }
GJ_J_DEF_FUSED(u32, uint32_t)
GJ_J_DEF_FUSED(u64, uint64_t)
GJ_J_DEF_FUSED(i32, int32_t)
GJ_J_DEF_FUSED(i64, int64_t)

extern "C" int64_t gj_j_merge_tile_items(void) { return FNV; }
