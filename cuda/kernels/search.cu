// Vectorized sorted search by merge path (ModernGPU's SortedSearch).
#include "gpujoin/merge_path.cuh"
#include "gpujoin_kernels.h"

namespace {
using namespace gj;

constexpr int NT = 256, VT = 8, NV = NT * VT;

template <class T>
__device__ __forceinline__ bool eq(T a, T b) { return ordered(a) == ordered(b); }

template <class T>
__global__ void __launch_bounds__(NT) sorted_search_kernel(const T *a, int64_t a_len, const T *b, int64_t b_len,
                                                           bool upper, const int64_t *partitions,
                                                           uint32_t *a_index, uint8_t *a_match,
                                                           uint8_t *b_match) {
  __shared__ T keys[NV];
  __shared__ uint32_t idx_out[NV];
  __shared__ uint8_t amatch_out[NV];
  __shared__ uint8_t bmatch_out[NV];
  const int64_t tile = blockIdx.x;
  const int tid = threadIdx.x;
  int64_t d0 = tile * NV, d1 = d0 + NV;
  if (d1 > a_len + b_len) d1 = a_len + b_len;
  const int64_t a0 = partitions[tile], a1 = partitions[tile + 1];
  const int64_t b0 = d0 - a0, b1 = d1 - a1;
  const int na = (int)(a1 - a0), nb = (int)(b1 - b0);
  T *ta = keys, *tb = keys + na;
  for (int i = tid; i < na + nb; i += NT) keys[i] = i < na ? a[a0 + i] : b[b0 + (i - na)];
  __syncthreads();
  int diag = tid * VT;
  if (diag > na + nb) diag = na + nb;
  // Binary search on the tile's merge path (ties: A first for lower bounds).
  int lo = diag > nb ? diag - nb : 0, hi = diag < na ? diag : na;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    T av = ta[mid], bv = tb[diag - 1 - mid];
    bool a_first = upper ? less(av, bv) : !less(bv, av);
    if (a_first) lo = mid + 1;
    else hi = mid;
  }
  int pa = lo, pb = diag - lo;
#pragma unroll
  for (int s = 0; s < VT; ++s) {
    if (pa + pb >= na + nb) break;
    bool take_a = pb >= nb || (pa < na && (upper ? less(ta[pa], tb[pb]) : !less(tb[pb], ta[pa])));
    if (take_a) {
      T av = ta[pa];
      idx_out[pa] = (uint32_t)(b0 + pb);
      if (a_match) {
        bool m;
        if (!upper) {  // B[b0+pb] is the first B item not below A
          int64_t j = b0 + pb;
          m = j < b_len && eq(pb < nb ? tb[pb] : b[j], av);
        } else {  // B[b0+pb-1] is the last B item not above A
          int64_t j = b0 + pb - 1;
          m = j >= 0 && eq(pb > 0 ? tb[pb - 1] : b[j], av);
        }
        amatch_out[pa] = m;
      }
      ++pa;
    } else {
      T bv = tb[pb];
      if (b_match) {
        bool m;
        if (!upper) {  // equal A items all precede B[j]: look at the last A consumed
          int64_t i = a0 + pa - 1;
          m = i >= 0 && eq(pa > 0 ? ta[pa - 1] : a[i], bv);
        } else {  // equal A items all follow B[j]: look at the next A
          int64_t i = a0 + pa;
          m = i < a_len && eq(pa < na ? ta[pa] : a[i], bv);
        }
        bmatch_out[pb] = m;
      }
      ++pb;
    }
  }
  __syncthreads();
  for (int i = tid; i < na; i += NT) {
    if (a_index) a_index[a0 + i] = idx_out[i];
    if (a_match) a_match[a0 + i] = amatch_out[i];
  }
  if (b_match)
    for (int i = tid; i < nb; i += NT) b_match[b0 + i] = bmatch_out[i];
}

template <class T>
int sorted_search(void *temp, size_t *temp_bytes, const T *a, int64_t a_len, const T *b, int64_t b_len,
                  int upper, uint32_t *a_index, uint8_t *a_match, uint8_t *b_match, cudaStream_t stream) {
  int64_t num_tiles = (a_len + b_len + NV - 1) / NV;
  size_t need = sizeof(int64_t) * (num_tiles + 1);
  if (!temp) {
    *temp_bytes = need;
    return 0;
  }
  if (*temp_bytes < need || b_len >= 0xFFFFFFFFll) return (int)cudaErrorInvalidValue;
  if (num_tiles == 0) return 0;
  int64_t *parts = static_cast<int64_t *>(temp);
  merge_path_partition_kernel<<<blocks_for(num_tiles + 1, 256), 256, 0, stream>>>(
      a, a_len, b, b_len, (int64_t)NV, !upper, OrderedLess<T>{}, parts, num_tiles);
  sorted_search_kernel<T><<<(unsigned)num_tiles, NT, 0, stream>>>(a, a_len, b, b_len, upper != 0, parts, a_index,
                                                                  a_match, b_match);
  return launch_status();
}

template <class T>
int partitions(const T *a, int64_t a_len, const T *b, int64_t b_len, int64_t tile, int a_first,
               int64_t *out, cudaStream_t stream) {
  if (tile <= 0) return (int)cudaErrorInvalidValue;
  int64_t num_parts = (a_len + b_len + tile - 1) / tile;
  merge_path_partition_kernel<<<blocks_for(num_parts + 1, 256), 256, 0, stream>>>(
      a, a_len, b, b_len, tile, a_first != 0, OrderedLess<T>{}, out, num_parts);
  return launch_status();
}
}  // namespace

#define GJ_K_DEF_SEARCH(TN, T)                                                                       \
  extern "C" int gj_k_sorted_search_##TN(void *temp, size_t *temp_bytes, const T *a, int64_t a_len, \
                                         const T *b, int64_t b_len, int upper, uint32_t *a_index,    \
                                         uint8_t *a_match, uint8_t *b_match, gj_k_stream_t stream) { \
    return sorted_search<T>(temp, temp_bytes, a, a_len, b, b_len, upper, a_index, a_match, b_match,   \
                            static_cast<cudaStream_t>(stream));                                       \
  }                                                                                                   \
  extern "C" int gj_k_merge_path_partitions_##TN(const T *a, int64_t a_len, const T *b, int64_t b_len, \
                                                 int64_t tile, int a_first_on_ties,                  \
                                                 int64_t *partitions_out, gj_k_stream_t stream) {    \
    return partitions<T>(a, a_len, b, b_len, tile, a_first_on_ties, partitions_out,                   \
                         static_cast<cudaStream_t>(stream));                                          \
  }
GJ_K_DEF_SEARCH(u32, uint32_t)
GJ_K_DEF_SEARCH(u64, uint64_t)
GJ_K_DEF_SEARCH(i32, int32_t)
GJ_K_DEF_SEARCH(i64, int64_t)
GJ_K_DEF_SEARCH(f32, float)
GJ_K_DEF_SEARCH(f64, double)
