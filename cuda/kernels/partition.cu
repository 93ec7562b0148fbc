// Stable LSD radix partition of (key, value) pairs by a bit range, as a onesweep radix sort
// (Adinets & Merrill, "Onesweep: A Faster Least Significant Digit Radix Sort for GPUs", 2022):
//
//   1. one histogram kernel reads the keys once and counts every 8-bit digit pass at the same
//      time (shared-memory counters, one copy per warp or pair of warps);
//   2. a tiny kernel turns each pass's 256 counts into exclusive digit offsets;
//   3. per pass, one kernel: tiles are taken in order from an atomic ticket; a tile ranks its
//      keys stably (warp-level __match_any_sync ranking, CUB's BlockRadixRankMatch), publishes
//      its per-digit counts, stages keys and values in shared memory in digit order, finds its
//      per-digit global prefix by decoupled look-back (one thread per digit), and writes each
//      digit's run of staged items contiguously.
//
// Passes ping-pong between the outputs and a temporary pair so that the last pass lands in the
// outputs; the inputs are never written. Inputs of more than PORTION_TILES tiles run each pass
// as several launches ("portions"), so that a 30-bit count in a look-back status word suffices;
// the last tile of a portion hands the running digit offsets to the next portion.
#include <cub/block/block_scan.cuh>
#include "gpujoin/common.cuh"
#include "gpujoin/launch.cuh"
#include "gpujoin_kernels.h"

namespace {
using namespace gj;

constexpr int RADIX_BITS = 8;
constexpr int RADIX = 1 << RADIX_BITS;
constexpr int NT = 256;  // onesweep threads per block; one thread per digit in the look-back
constexpr int NWARPS = NT / 32;
static_assert(NT == RADIX, "one thread per digit");

// Look-back status word: 2 flag bits, 30 count bits.
constexpr uint32_t FLAG_AGGREGATE = 1u << 30;  // the tile's own count of the digit
constexpr uint32_t FLAG_INCLUSIVE = 2u << 30;  // count over the portion's tiles up to this one
constexpr uint32_t COUNT_MASK = (1u << 30) - 1;

// Histogram kernel shape.
constexpr int HIST_NT = 256;
constexpr int HIST_ITEMS = 8;

constexpr int64_t MAX_ITEMS = 1ll << 32;

template <class K>
struct Tuning {
  static constexpr int IPT = sizeof(K) == 8 ? 12 : 16;  // items per thread (<= 64 registers)
  static constexpr int NV = NT * IPT;            // items per tile
  static constexpr int MAX_PASSES = sizeof(K);   // 8-bit digit passes over the whole key
  static constexpr int HIST_COPIES = 32 / sizeof(K);  // shared histogram copies (32 KB in all)
  // Tiles per launch: every in-portion count stays below 2^30.
  static constexpr int64_t PORTION_TILES = ((1ll << 30) - 1) / NV;
};

__device__ __forceinline__ uint32_t ld_relaxed(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed(uint32_t *p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <class K>
__device__ __forceinline__ uint32_t digit_of(K key, int shift, uint32_t mask) {
  return static_cast<uint32_t>(key >> shift) & mask;
}

// ---------------------------------------------------------------------------------------------
// 1. Histogram of every pass: hist[p * 256 + d] += #keys whose pass-p digit is d.
template <class K>
__global__ void __launch_bounds__(HIST_NT) histogram_kernel(const K *__restrict__ keys, int64_t n, int begin_bit,
                                                            int end_bit, int passes,
                                                            unsigned long long *__restrict__ hist) {
  using T = Tuning<K>;
  __shared__ uint32_t s_hist[T::HIST_COPIES][T::MAX_PASSES * RADIX];
  const int used = passes * RADIX;
  for (int i = threadIdx.x; i < used; i += HIST_NT) {
#pragma unroll
    for (int c = 0; c < T::HIST_COPIES; ++c) s_hist[c][i] = 0;
  }
  __syncthreads();
  uint32_t *mine = s_hist[(threadIdx.x / 32) % T::HIST_COPIES];
  const int64_t stride = (int64_t)gridDim.x * HIST_NT * HIST_ITEMS;
  for (int64_t base = (int64_t)blockIdx.x * HIST_NT * HIST_ITEMS + threadIdx.x; base < n; base += stride) {
    K k[HIST_ITEMS];
#pragma unroll
    for (int j = 0; j < HIST_ITEMS; ++j) {
      const int64_t i = base + (int64_t)j * HIST_NT;
      k[j] = i < n ? keys[i] : K(0);
    }
#pragma unroll
    for (int j = 0; j < HIST_ITEMS; ++j) {
      if (base + (int64_t)j * HIST_NT < n) {
        for (int p = 0; p < passes; ++p) {
          const int shift = begin_bit + p * RADIX_BITS;
          const int bits = min(RADIX_BITS, end_bit - shift);
          atomicAdd(&mine[p * RADIX + digit_of(k[j], shift, (1u << bits) - 1)], 1u);
        }
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < used; i += HIST_NT) {
    uint32_t sum = 0;
#pragma unroll
    for (int c = 0; c < T::HIST_COPIES; ++c) sum += s_hist[c][i];  // < 2^32: a block sees <= 2^30 keys
    if (sum) atomicAdd(&hist[i], (unsigned long long)sum);
  }
}

// 2. Per pass (one block each): bins[p][0][d] = exclusive sum of hist[p][0..d].
__global__ void __launch_bounds__(RADIX) scan_bins_kernel(const unsigned long long *__restrict__ hist,
                                                          unsigned long long *__restrict__ bins, int64_t bins_stride) {
  using Scan = cub::BlockScan<unsigned long long, RADIX>;
  __shared__ typename Scan::TempStorage temp;
  const int p = blockIdx.x;
  unsigned long long v = hist[p * RADIX + threadIdx.x], excl;
  Scan(temp).ExclusiveSum(v, excl);
  bins[p * bins_stride + threadIdx.x] = excl;
}

// ---------------------------------------------------------------------------------------------
// 3. One onesweep pass over the items [portion_begin, portion_end).
//
// Shared memory (dynamic): region A holds the per-warp digit counters while ranking, then the
// staged keys; region B the staged values.
template <class K, class V>
constexpr size_t onesweep_smem() {
  using T = Tuning<K>;
  constexpr size_t a = T::NV * sizeof(K) > NWARPS * RADIX * 4 ? T::NV * sizeof(K) : NWARPS * RADIX * 4;
  return a + T::NV * sizeof(V);
}
template <class K, class V>
constexpr int onesweep_min_blocks() {
  return onesweep_smem<K, V>() > 56 * 1024 ? 3 : 4;
}

template <class K, class V>
__global__ void __launch_bounds__(NT, onesweep_min_blocks<K, V>())
    onesweep_kernel(const K *__restrict__ keys_in, const V *__restrict__ vals_in, K *__restrict__ keys_out,
                    V *__restrict__ vals_out, int64_t portion_begin, int64_t portion_end, int shift, uint32_t mask,
                    const unsigned long long *__restrict__ bins_in, unsigned long long *__restrict__ bins_out,
                    uint32_t *__restrict__ status, uint32_t *__restrict__ ticket) {
  using T = Tuning<K>;
  constexpr int IPT = T::IPT, NV = T::NV;
  using Scan = cub::BlockScan<uint32_t, NT>;
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t(*warp_counts)[RADIX] = reinterpret_cast<uint32_t(*)[RADIX]>(smem);  // [warp][digit]
  K *s_keys = reinterpret_cast<K *>(smem);
  constexpr size_t region_a = onesweep_smem<K, V>() - NV * sizeof(V);
  V *s_vals = reinterpret_cast<V *>(smem + region_a);
  __shared__ unsigned long long s_base[RADIX];  // out index of staged slot j of digit d = s_base[d] + j
  __shared__ typename Scan::TempStorage scan_temp;
  __shared__ uint32_t s_tile;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid == 0) s_tile = atomicAdd(ticket, 1u);
#pragma unroll
  for (int w = 0; w < NWARPS; ++w) warp_counts[w][tid] = 0;
  __syncthreads();
  const int64_t tile = s_tile;
  const int64_t tile_begin = portion_begin + tile * NV;
  const int valid = (int)min((int64_t)NV, portion_end - tile_begin);
  const bool last_tile = tile_begin + NV >= portion_end;

  // Load keys warp-striped: item k of lane l of warp w is tile item w*32*IPT + k*32 + l, so the
  // ranking order (warp, item, lane) is input order. Past the end of a partial tile, items are
  // all-ones keys: their digit is the pass's largest, `mask`, and as the last items in ranking
  // order they rank after every real item, at staged slots >= valid that are never written out.
  // Only the published count of digit `mask` leaves them out.
  const int warp_first = warp * 32 * IPT;
  K key[IPT];
#pragma unroll
  for (int k = 0; k < IPT; ++k) {
    const int i = warp_first + k * 32 + lane;
    key[k] = i < valid ? __ldcs(keys_in + tile_begin + i) : ~K(0);
  }

  // Rank within the warp: peers share a digit; the counter holds the warp's count so far.
  // Ranks are < NV <= 2^16, so two share a register (rank of item k: bits 16*(k%2) of rank2[k/2]).
  static_assert(NV <= 65536 && IPT % 2 == 0, "packed 16-bit ranks");
  uint32_t rank2[IPT / 2];
  const uint32_t lt = lanemask_lt();
  uint32_t *my_counts = warp_counts[warp];
#pragma unroll
  for (int k = 0; k < IPT; ++k) {
    const uint32_t d = digit_of(key[k], shift, mask);
    const uint32_t peers = __match_any_sync(0xFFFFFFFFu, d);
    const uint32_t before = my_counts[d];
    __syncwarp();
    if (lane == 31 - __clz(peers)) my_counts[d] = before + __popc(peers);
    __syncwarp();
    const uint32_t r = before + __popc(peers & lt);
    rank2[k / 2] = k % 2 ? rank2[k / 2] | (r << 16) : r;
  }
  __syncthreads();

  // Thread d: the tile's count of digit d, its start in the tile (digit-major, then warp).
  const int d = tid;
  uint32_t tile_count = 0;
#pragma unroll
  for (int w = 0; w < NWARPS; ++w) {
    const uint32_t c = warp_counts[w][d];
    warp_counts[w][d] = tile_count;
    tile_count += c;
  }
  // Publish the aggregate early so that later tiles' look-backs can pass this tile. The padding
  // items stay in the in-tile layout (digit_start) but not in the count.
  const uint32_t padded_count = tile_count;
  if ((uint32_t)d == mask) tile_count -= NV - valid;
  uint32_t *my_status = status + tile * RADIX + d;
  st_relaxed(my_status, (tile == 0 ? FLAG_INCLUSIVE : FLAG_AGGREGATE) | tile_count);
  uint32_t digit_start;
  Scan(scan_temp).ExclusiveSum(padded_count, digit_start);
#pragma unroll
  for (int w = 0; w < NWARPS; ++w) warp_counts[w][d] += digit_start;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < IPT; ++k) rank2[k / 2] += my_counts[digit_of(key[k], shift, mask)] << (16 * (k % 2));
  __syncthreads();  // the counters are overwritten by the staged keys

  // Stage keys, then values, in digit order.
#pragma unroll
  for (int k = 0; k < IPT; ++k) s_keys[(rank2[k / 2] >> (16 * (k % 2))) & 0xFFFFu] = key[k];
  // Values in groups, so that at most 16 registers of them are live.
  constexpr int VGROUP = sizeof(V) == 8 ? IPT / 2 : IPT;
#pragma unroll
  for (int g = 0; g < IPT; g += VGROUP) {
    V val[VGROUP];
#pragma unroll
    for (int k = 0; k < VGROUP; ++k) {
      const int i = warp_first + (g + k) * 32 + lane;
      val[k] = i < valid ? __ldcs(vals_in + tile_begin + i) : V(0);
    }
#pragma unroll
    for (int k = 0; k < VGROUP; ++k) {
      const int kk = g + k;
      s_vals[(rank2[kk / 2] >> (16 * (kk % 2))) & 0xFFFFu] = val[k];
    }
  }

  // Decoupled look-back for digit d over the portion's earlier tiles.
  uint32_t exclusive = 0;
  if (tile > 0) {
    for (int64_t t = tile - 1;; --t) {
      const uint32_t *p = status + t * RADIX + d;
      uint32_t s = ld_relaxed(p);
      unsigned ns = 8;
      while ((s & ~COUNT_MASK) == 0) {
        __nanosleep(ns);
        ns = ns < 256 ? ns * 2 : ns;
        s = ld_relaxed(p);
      }
      exclusive += s & COUNT_MASK;
      if (s & FLAG_INCLUSIVE) break;
    }
    st_relaxed(my_status, FLAG_INCLUSIVE | (exclusive + tile_count));
  }
  const unsigned long long global = bins_in[d] + exclusive;
  s_base[d] = global - digit_start;  // wraps; s_base[d] + j >= global for staged slots j of d
  if (last_tile) bins_out[d] = global + tile_count;
  __syncthreads();

  // Write out: consecutive threads take consecutive staged items, so each digit's run is one
  // contiguous range of the output.
#pragma unroll 4
  for (int k = 0; k < IPT; ++k) {
    const int j = k * NT + tid;
    if (j < valid) {
      const K kk = s_keys[j];
      const unsigned long long o = s_base[digit_of(kk, shift, mask)] + j;
      keys_out[o] = kk;
      vals_out[o] = s_vals[j];
    }
  }
}

size_t align_up(size_t x) { return (x + 255) & ~size_t(255); }

template <class K, class V>
int partition_pairs(void *temp, size_t *temp_bytes, const K *keys_in, const V *vals_in, K *keys_out, V *vals_out,
                    int64_t n, int begin_bit, int end_bit, int64_t portion_tiles, cudaStream_t s) {
  using T = Tuning<K>;
  if (!temp_bytes || n < 0 || n > MAX_ITEMS || begin_bit < 0 || end_bit > (int)(8 * sizeof(K)) ||
      begin_bit >= end_bit)
    return (int)cudaErrorInvalidValue;
  const int passes = (end_bit - begin_bit + RADIX_BITS - 1) / RADIX_BITS;
  const int64_t tiles = (n + T::NV - 1) / T::NV;
  // Tiles per launch (tests ask for fewer to exercise the hand-over between portions).
  const int64_t pt = portion_tiles > 0 && portion_tiles < T::PORTION_TILES ? portion_tiles : T::PORTION_TILES;
  const int64_t portion_items = pt * T::NV;
  const int64_t portions = (tiles + pt - 1) / pt;
  const int64_t max_portion_tiles = tiles < pt ? tiles : pt;
  // Temporary layout: hist | tickets (zeroed together) | bins | status | key and value buffers.
  const size_t hist_bytes = (size_t)passes * RADIX * sizeof(unsigned long long);
  const size_t ticket_bytes = align_up((size_t)(passes * portions + 1) * sizeof(uint32_t));
  const size_t bins_bytes = align_up((size_t)passes * (portions + 1) * RADIX * sizeof(unsigned long long));
  const size_t status_bytes = align_up((size_t)(max_portion_tiles + 1) * RADIX * sizeof(uint32_t));
  const size_t tmp_keys_bytes = passes > 1 ? align_up((size_t)n * sizeof(K)) : 0;
  const size_t tmp_vals_bytes = passes > 1 ? align_up((size_t)n * sizeof(V)) : 0;
  const size_t need = hist_bytes + ticket_bytes + bins_bytes + status_bytes + tmp_keys_bytes + tmp_vals_bytes;
  if (!temp) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need) return (int)cudaErrorInvalidValue;
  if (n == 0) return 0;
  char *t = static_cast<char *>(temp);
  auto *hist = reinterpret_cast<unsigned long long *>(t);
  auto *tickets = reinterpret_cast<uint32_t *>(t + hist_bytes);
  auto *bins = reinterpret_cast<unsigned long long *>(t + hist_bytes + ticket_bytes);
  auto *status = reinterpret_cast<uint32_t *>(t + hist_bytes + ticket_bytes + bins_bytes);
  K *tmp_keys = reinterpret_cast<K *>(t + hist_bytes + ticket_bytes + bins_bytes + status_bytes);
  V *tmp_vals = reinterpret_cast<V *>(t + hist_bytes + ticket_bytes + bins_bytes + status_bytes + tmp_keys_bytes);

  int rc = (int)cudaMemsetAsync(t, 0, hist_bytes + ticket_bytes, s);
  if (rc) return rc;
  const int sms = sm_count();
  // A histogram block counts at most n / (4 * sms) <= 2^30 keys, so 32-bit shared counters hold.
  histogram_kernel<K><<<blocks_for(n, HIST_NT * HIST_ITEMS, sms * tuning::kHistogramBlocksPerSm), HIST_NT, 0, s>>>(keys_in, n, begin_bit, end_bit,
                                                                                      passes, hist);
  const int64_t bins_stride = (portions + 1) * RADIX;
  scan_bins_kernel<<<passes, RADIX, 0, s>>>(hist, bins, bins_stride);
  if ((rc = launch_status())) return rc;

  constexpr size_t smem = onesweep_smem<K, V>();
  if ((rc = (int)cudaFuncSetAttribute(onesweep_kernel<K, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
    return rc;
  const K *src_k = keys_in;
  const V *src_v = vals_in;
  for (int p = 0; p < passes; ++p) {
    // The last pass writes the outputs; earlier ones alternate so that no pass reads its output.
    const bool to_out = (passes - 1 - p) % 2 == 0;
    K *dst_k = to_out ? keys_out : tmp_keys;
    V *dst_v = to_out ? vals_out : tmp_vals;
    const int shift = begin_bit + p * RADIX_BITS;
    const int bits = end_bit - shift < RADIX_BITS ? end_bit - shift : RADIX_BITS;
    const uint32_t mask = (1u << bits) - 1;
    for (int64_t q = 0; q < portions; ++q) {
      const int64_t begin = q * portion_items;
      const int64_t end = n - begin < portion_items ? n : begin + portion_items;
      const int64_t portion_tiles = (end - begin + T::NV - 1) / T::NV;
      if ((rc = (int)cudaMemsetAsync(status, 0, (size_t)portion_tiles * RADIX * sizeof(uint32_t), s))) return rc;
      const unsigned long long *b_in = bins + p * bins_stride + q * RADIX;
      onesweep_kernel<K, V><<<(unsigned)portion_tiles, NT, smem, s>>>(
          src_k, src_v, dst_k, dst_v, begin, end, shift, mask, b_in, bins + p * bins_stride + (q + 1) * RADIX, status,
          tickets + p * portions + q);
      if ((rc = launch_status())) return rc;
    }
    src_k = dst_k;
    src_v = dst_v;
  }
  return 0;
}
}  // namespace

#define GJ_DEF_PARTITION(KN, K, VN, V)                                                                           \
  extern "C" int gj_k_part_partition_pairs_##KN##_##VN(void *temp, size_t *temp_bytes, const K *keys_in,         \
                                                       const V *vals_in, K *keys_out, V *vals_out, int64_t n,   \
                                                       int begin_bit, int end_bit, int64_t portion_tiles,       \
                                                       gj_k_stream_t stream) {                                  \
    return partition_pairs<K, V>(temp, temp_bytes, keys_in, vals_in, keys_out, vals_out, n, begin_bit, end_bit, \
                                 portion_tiles, static_cast<cudaStream_t>(stream));                             \
  }
GJ_DEF_PARTITION(k32, uint32_t, v32, uint32_t)
GJ_DEF_PARTITION(k32, uint32_t, v64, uint64_t)
GJ_DEF_PARTITION(k64, uint64_t, v32, uint32_t)
GJ_DEF_PARTITION(k64, uint64_t, v64, uint64_t)

extern "C" int gj_k_part_tile_items(int key_bytes) {
  return key_bytes == 8 ? Tuning<uint64_t>::NV : Tuning<uint32_t>::NV;
}
