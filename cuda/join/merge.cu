// Sort-merge (ModernGPU RelationalJoin) kernels: equality counts and the Cartesian expansion
// by load-balancing search.
#include "gpujoin/launch.cuh"
#include "gpujoin/lbs.cuh"
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
// Fused two-pass merge join on sorted keys (the fast path of the ModernGPU join).
// Tiles are merge-path tiles of (A, B) with A first on ties, so the B items consumed before A[i]
// number lower_bound(A[i] in B). Pass 1 counts each tile's output rows (and flags matched B
// rows); pass 2 recomputes the counts, scans them in the CTA and writes the tile's rows.
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

// The write pass also scans the tile's output rows.
template <class K>
struct FusedWriteShared : FusedShared<K> {
  uint32_t scan[FNV];   // exclusive scan of output rows per A item
};

template <class K>
__device__ __forceinline__ bool keq(K x, K y) { return !less(x, y) && !less(y, x); }

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
                                           FusedShared<K> &sh, int64_t &a0, int &na, uint8_t *b_match,
                                           uint32_t *unsorted) {
  const int64_t tile = blockIdx.x;
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
  for (int i = tid; i < na + nb; i += FNT) sh.keys[i] = i < na ? a[a0 + i] : b[b0 + (i - na)];
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
__global__ void __launch_bounds__(FNT) fused_count_kernel(const K *a, int64_t a_len, const K *b, int64_t b_len,
                                                          const int64_t *parts, bool keep_unmatched, uint64_t *tile_rows,
                                                          uint8_t *b_match, uint64_t cap, uint32_t *over_cap,
                                                          uint32_t *unsorted) {
  __shared__ FusedShared<K> sh;
  {
    // Merge-path partitions of unsorted keys need not be monotone; such a tile would not fit
    // its shared memory. Block-uniform, before any barrier.
    const int64_t p0 = parts[blockIdx.x], p1 = parts[blockIdx.x + 1];
    const int64_t d0 = (int64_t)blockIdx.x * FNV;
    int64_t d1 = d0 + FNV;
    if (d1 > a_len + b_len) d1 = a_len + b_len;
    if (p1 < p0 || (d1 - p1) < (d0 - p0)) {
      if (threadIdx.x == 0) {
        if (unsorted) atomicOr(unsorted, 3u);
        atomicOr(over_cap, 1u);
        tile_rows[blockIdx.x] = 0;
      }
      return;
    }
  }
  int64_t a0;
  int na;
  const bool counted = unsorted ? fused_tile<K, true>(a, a_len, b, b_len, parts, sh, a0, na, b_match, unsorted)
                                 : fused_tile<K, false>(a, a_len, b, b_len, parts, sh, a0, na, b_match, nullptr);
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

template <class K>
__global__ void __launch_bounds__(FNT) fused_write_kernel(const K *a, int64_t a_len, const K *b, int64_t b_len,
                                                          const int64_t *parts, bool keep_unmatched,
                                                          const uint64_t *tile_offsets, const uint32_t *a_rows,
                                                          const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b) {
  __shared__ FusedWriteShared<K> sh;
  int64_t a0;
  int na;
  fused_tile<K, false>(a, a_len, b, b_len, parts, sh, a0, na, nullptr, nullptr);
  // CTA-wide exclusive scan of output rows per A item (serial per warp chunk, then warps).
  const int tid = threadIdx.x;
  constexpr int PER = FNV / FNT;  // items per thread, contiguous
  uint32_t local[PER];
  uint32_t run = 0;
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    int i = tid * PER + k;
    uint32_t c = i < na ? sh.cnt[i] : 0;
    if (c == 0 && keep_unmatched && i < na) c = 1;
    local[k] = run;
    run += c;
  }
  // Exclusive scan of `run` across the block.
  uint32_t x = run;
  const int lane = tid & 31, warp = tid >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  __shared__ uint32_t warp_tot[FNT / 32];
  if (lane == 31) warp_tot[warp] = x;
  __syncthreads();
  uint32_t warp_off = 0;
  for (int w = 0; w < warp; ++w) warp_off += warp_tot[w];
  uint32_t thread_off = warp_off + x - run;
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    int i = tid * PER + k;
    if (i < na) sh.scan[i] = thread_off + local[k];
  }
  __syncthreads();
  const uint64_t base = tile_offsets[blockIdx.x];
  const uint32_t rows = (uint32_t)(tile_offsets[blockIdx.x + 1] - base);
  for (uint32_t k = tid; k < rows; k += FNT) {
    // The A item whose output range holds k: last i with scan[i] <= k.
    int l = 0, h = na;
    while (h - l > 1) {
      int m = (l + h) >> 1;
      if (sh.scan[m] <= k) l = m;
      else h = m;
    }
    uint32_t rank = k - sh.scan[l];
    uint32_t ai = (uint32_t)(a0 + l);
    uint32_t bj = sh.lb[l] + rank;
    out_a[base + k] = a_rows ? a_rows[ai] : ai;
    out_b[base + k] = sh.cnt[l] ? (b_rows ? b_rows[bj] : bj) : kNone;
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
  }
GJ_J_DEF_FUSED(u32, uint32_t)
GJ_J_DEF_FUSED(u64, uint64_t)
GJ_J_DEF_FUSED(i32, int32_t)
GJ_J_DEF_FUSED(i64, int64_t)

extern "C" int64_t gj_j_merge_tile_items(void) { return FNV; }
