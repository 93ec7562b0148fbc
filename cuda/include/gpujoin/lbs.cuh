// Load-balancing search (ModernGPU): for each output item k in [0, total), the segment that
// generated it, seg = upper_bound(offsets, k) - 1, and its rank k - offsets[seg], given the
// exclusive scan `offsets` of the segments' counts. Work is split by merge path over
// (items 0..total, offsets) so every block handles NT*VT items + segment starts, however the
// counts are skewed.
#pragma once
#include "merge_path.cuh"

namespace gj {

// Partition for a load-balancing search: merge of items [0,total) (A) with offsets (B); a
// segment start offsets[j] precedes item k when offsets[j] <= k (ties go to B).
inline int lbs_partition(const uint64_t *offsets, int64_t num_segments, int64_t total, int64_t nv,
                         int64_t *partitions, cudaStream_t stream) {
  int64_t num_tiles = (total + num_segments + nv - 1) / nv;
  int threads = 256;
  merge_path_partition_kernel<<<blocks_for(num_tiles + 1, threads), threads, 0, stream>>>(
      CountingIt{0}, total, offsets, num_segments, nv, false, LessU64{}, partitions, num_tiles);
  return launch_status();
}

// The two-phase set-up every load-balancing-search expansion shares: with temp == NULL it writes
// the partition bytes needed into *temp_bytes; otherwise it partitions the merge of items and
// segment offsets into tiles of nv. Returns < 0 when there is nothing to launch (size query or no
// items), 0 when the caller launches *tiles blocks over *parts, or a cudaError_t.
inline int lbs_setup(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t num_segments, int64_t total,
                     int64_t nv, cudaStream_t stream, int64_t **parts, int64_t *tiles) {
  *tiles = (total + num_segments + nv - 1) / nv;
  size_t need = sizeof(int64_t) * (*tiles + 1);
  if (!temp) {
    *temp_bytes = need;
    return -1;
  }
  if (*temp_bytes < need) return (int)cudaErrorInvalidValue;
  if (total == 0) return -1;
  *parts = static_cast<int64_t *>(temp);
  return lbs_partition(offsets, num_segments, total, nv, *parts, stream);
}

// One block's share of a load-balancing search. For each item it calls
// emit(item, segment, rank). `shared` must hold NT*VT + 2 uint64_t.
template <int NT, int VT, class Emit>
__device__ __forceinline__ void lbs_tile(const uint64_t *offsets, int64_t num_segments, int64_t total,
                                         const int64_t *partitions, uint64_t *shared, Emit emit) {
  constexpr int NV = NT * VT;
  const int64_t tile = blockIdx.x;
  const int tid = threadIdx.x;
  int64_t d0 = tile * NV, d1 = d0 + NV;
  if (d1 > total + num_segments) d1 = total + num_segments;
  const int64_t i0 = partitions[tile], i1 = partitions[tile + 1];  // items
  const int64_t j0 = d0 - i0, j1 = d1 - i1;                          // segment starts
  const int n_items = (int)(i1 - i0), n_segs = (int)(j1 - j0);
  // shared[0] = offset of segment j0-1 (the one open at the tile's start); then offsets[j0..j1).
  uint64_t *seg_shared = shared + 1;
  for (int i = tid; i < n_segs; i += NT) seg_shared[i] = offsets[j0 + i];
  if (tid == 0) shared[0] = j0 > 0 ? offsets[j0 - 1] : 0;
  __syncthreads();
  // This thread's starting point on the tile's merge path (items are implicit: i0 + ia).
  int diag = tid * VT;
  if (diag > n_items + n_segs) diag = n_items + n_segs;
  int lo = diag > n_segs ? diag - n_segs : 0, hi = diag < n_items ? diag : n_items;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    uint64_t item = (uint64_t)(i0 + mid);
    if (item < seg_shared[diag - 1 - mid]) lo = mid + 1;
    else hi = mid;
  }
  int ia = lo, jb = diag - lo;
  int64_t seg = j0 + jb - 1;
  uint64_t seg_start = jb > 0 ? seg_shared[jb - 1] : shared[0];
#pragma unroll
  for (int s = 0; s < VT; ++s) {
    if (ia + jb >= n_items + n_segs) break;
    bool take_item = jb >= n_segs || (ia < n_items && (uint64_t)(i0 + ia) < seg_shared[jb]);
    if (take_item) {
      int64_t item = i0 + ia;
      emit(item, seg, (uint64_t)item - seg_start);
      ++ia;
    } else {
      seg = j0 + jb;
      seg_start = seg_shared[jb];
      ++jb;
    }
  }
}

}  // namespace gj
