// Hash join: partition offsets, work items and the chunked stable partition (see hash.cuh).
#include "hash.cuh"

namespace {
using namespace gj;
using namespace gj::hash;

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// C ABI
// ---------------------------------------------------------------------------------------------
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

