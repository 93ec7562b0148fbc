// Decoupled look-back (Merrill and Garland, "Single-pass Parallel Prefix Scan with Decoupled
// Look-back"), for one-pass kernels whose blocks must learn where their output starts.
//
// Items (tiles, work items) are taken in order from a ticket counter, so every item's
// predecessors have started. Each item publishes its own count in `status[item]` (zeroed before
// the launch), looks back over its predecessors up to the nearest one that has published its
// inclusive prefix, then publishes its own inclusive prefix. A status word packs a flag and the
// value in 64 bits, so it is read and written whole:
//   0                                   nothing yet
//   kLookBackAggregate | count          the item's own count
//   kLookBackPrefix    | inclusive      rows of items 0..=item
// Example: counts 3, 0, 2 end as status = [P|3, P|3, P|5]; item 2's exclusive prefix is 3.
#pragma once
#include <cstdint>

namespace gj {

constexpr uint64_t kLookBackPrefix = 1ull << 63, kLookBackAggregate = 1ull << 62,
                   kLookBackValue = kLookBackAggregate - 1;

// Called by the 32 lanes of one warp (lane = threadIdx.x, so warp 0) for item `item` whose own
// count is `total`: 32 predecessors per step, up to the nearest one that has published its
// inclusive prefix (a virtual prefix of 0 before item 0). Publishes this item's inclusive prefix;
// returns the exclusive one (on every lane). Waiting lanes back off so that the other blocks on
// the SM keep issuing.
__device__ __forceinline__ uint64_t look_back(unsigned long long *status, uint32_t item, uint64_t total) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x;
  uint64_t excl = 0;
  if (item > 0) {
    if (lane == 0) atomicExch(&status[item], kLookBackAggregate | (unsigned long long)total);
    int64_t end = (int64_t)item - 1;
    while (true) {
      const int64_t j = end - lane;
      unsigned long long st = j >= 0 ? ((volatile unsigned long long *)status)[j] : kLookBackPrefix;
      unsigned sleep = 32;
      while (__any_sync(kAll, st == 0)) {
        __nanosleep(sleep);
        sleep = sleep < 512 ? sleep * 2 : sleep;
        if (st == 0) st = ((volatile unsigned long long *)status)[j];
      }
      const unsigned pmask = __ballot_sync(kAll, (st & kLookBackPrefix) != 0);
      uint64_t v = st & kLookBackValue;
      if (pmask && lane > __ffs(pmask) - 1) v = 0;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kAll, v, o);
      excl += v;
      if (pmask) break;
      end -= 32;
    }
  }
  if (lane == 0) atomicExch(&status[item], kLookBackPrefix | (unsigned long long)(excl + total));
  return excl;
}

// For an item that gives up (its output is thrown away): an empty inclusive prefix, so that
// later items never wait on it.
__device__ __forceinline__ void look_back_abandon(unsigned long long *status, uint32_t item) {
  atomicExch(&status[item], kLookBackPrefix);
}

}  // namespace gj
