/* gpujoin_kernels.h - plain C declarations of gpujoin's own primitive kernels (cuda/kernels).
 * Same conventions as gpujoin_cub.h: two-phase temporary storage where needed (temp == NULL
 * asks for *temp_bytes), a stream, a cudaError_t return code, 64-bit counts. Row indices are
 * uint32_t with 0xFFFFFFFF meaning "no row". Rust declarations: crates/primitives/src/ffi.rs
 * (`cargo xtask bindgen`). */
#ifndef GPUJOIN_KERNELS_H
#define GPUJOIN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_k_stream_t;

/* Vectorized sorted search of sorted A into sorted B (both in radix-sort order).
 * upper == 0: a_index[i] = lower_bound(A[i] in B); a_match[i] = B has A[i];
 *             b_match[j] = A has B[j].
 * upper != 0: a_index[i] = upper_bound(A[i] in B); the flags likewise.
 * Any output may be NULL. b_len must be < 2^32. */
#define GJ_K_DECL_SEARCH(TN, T)                                                                    \
  int gj_k_sorted_search_##TN(void *temp, size_t *temp_bytes, const T *a, int64_t a_len,            \
                              const T *b, int64_t b_len, int upper, uint32_t *a_index,              \
                              uint8_t *a_match, uint8_t *b_match, gj_k_stream_t stream);           \
  int gj_k_merge_path_partitions_##TN(const T *a, int64_t a_len, const T *b, int64_t b_len,       \
                                      int64_t tile, int a_first_on_ties, int64_t *partitions,     \
                                      gj_k_stream_t stream);
GJ_K_DECL_SEARCH(u32, uint32_t)
GJ_K_DECL_SEARCH(u64, uint64_t)
GJ_K_DECL_SEARCH(i32, int32_t)
GJ_K_DECL_SEARCH(i64, int64_t)
GJ_K_DECL_SEARCH(f32, float)
GJ_K_DECL_SEARCH(f64, double)

/* Load-balancing search: given offsets = exclusive scan of per-segment counts (num_segments of
 * them) and total = their sum, writes for each item k < total its segment and its rank within
 * the segment. Either output may be NULL. */
int gj_k_load_balancing_search(void *temp, size_t *temp_bytes, const uint64_t *offsets,
                               int64_t num_segments, int64_t total, uint32_t *segments,
                               uint32_t *ranks, gj_k_stream_t stream);

/* Run-length encode in one pass (decoupled look-back): unique[r] repeated counts[r] times, for
 * r < *num_runs (one device int64). n < 2^32 - 1 (positions are 32-bit). Same contract as
 * gj_cub_run_length_encode_* with a larger limit and one read of the input. */
int gj_k_run_length_encode_u32(void *temp, size_t *temp_bytes, const uint32_t *in, uint32_t *unique,
                               uint32_t *counts, int64_t *num_runs, int64_t n, gj_k_stream_t stream);
int gj_k_run_length_encode_u64(void *temp, size_t *temp_bytes, const uint64_t *in, uint64_t *unique,
                               uint32_t *counts, int64_t *num_runs, int64_t n, gj_k_stream_t stream);

/* out[i] = idx[i] == 0xFFFFFFFF ? fill : src[idx[i]]. An index >= src_len also writes `fill`
 * and sets *out_of_range to 1 (when out_of_range is not NULL). */
int gj_k_gather_b32(const uint32_t *src, int64_t src_len, const uint32_t *idx, uint32_t *out,
                    int64_t n, uint32_t fill, uint32_t *out_of_range, gj_k_stream_t stream);
int gj_k_gather_b64(const uint64_t *src, int64_t src_len, const uint32_t *idx, uint64_t *out,
                    int64_t n, uint64_t fill, uint32_t *out_of_range, gj_k_stream_t stream);
/* out[idx[i]] = src[i]; indices >= out_len (or 0xFFFFFFFF) are skipped and set *out_of_range. */
int gj_k_scatter_b32(const uint32_t *src, const uint32_t *idx, uint32_t *out, int64_t out_len,
                     int64_t n, uint32_t *out_of_range, gj_k_stream_t stream);
int gj_k_scatter_b64(const uint64_t *src, const uint32_t *idx, uint64_t *out, int64_t out_len,
                     int64_t n, uint32_t *out_of_range, gj_k_stream_t stream);
/* out[i] = start + i. */
int gj_k_iota_u32(uint32_t *out, int64_t n, uint32_t start, gj_k_stream_t stream);
int gj_k_iota_u64(uint64_t *out, int64_t n, uint64_t start, gj_k_stream_t stream);
/* out[i] = value. */
int gj_k_fill_b32(uint32_t *out, int64_t n, uint32_t value, gj_k_stream_t stream);
int gj_k_fill_b64(uint64_t *out, int64_t n, uint64_t value, gj_k_stream_t stream);

/* Stable LSD radix partition of (key, value) pairs by the key bits [begin_bit, end_bit)
 * (cuda/kernels/partition.cu, a onesweep radix sort): the output is ordered by
 * (key >> begin_bit) & (2^(end_bit - begin_bit) - 1) only, equal digits in input order; the same
 * output as gj_cub_sort_pairs_* ascending on that bit range. 0 <= begin_bit < end_bit <=
 * key bits; 0 <= n <= 2^32. Two-phase temporary storage (it holds a key and value buffer of n
 * items when the range spans more than 8 bits). The inputs are never written; inputs and outputs
 * must not overlap. portion_tiles: 0, or (tests) fewer tiles per kernel launch than the
 * default 2^30 / tile items, to exercise the hand-over of digit offsets between launches. */
#define GJ_K_DECL_PART(KN, K, VN, V)                                                                \
  int gj_k_part_partition_pairs_##KN##_##VN(void *temp, size_t *temp_bytes, const K *keys_in,        \
                                            const V *vals_in, K *keys_out, V *vals_out, int64_t n,  \
                                            int begin_bit, int end_bit, int64_t portion_tiles,      \
                                            gj_k_stream_t stream);
GJ_K_DECL_PART(k32, uint32_t, v32, uint32_t)
GJ_K_DECL_PART(k32, uint32_t, v64, uint64_t)
GJ_K_DECL_PART(k64, uint64_t, v32, uint32_t)
GJ_K_DECL_PART(k64, uint64_t, v64, uint64_t)
/* Items per onesweep tile for keys of key_bytes (4 or 8) bytes (host-only; for tests). */
int gj_k_part_tile_items(int key_bytes);

/* Stable one-pass radix partition of (key, value) pairs by a digit of 1 to 12 bits, the key bits
 * [begin_bit, end_bit) (cuda/kernels/partition_wide.cu): a histogram of each block's chunk, an
 * exclusive sum, and one scatter in which every block writes each digit's rows of its chunk to
 * one contiguous region. The same output as gj_cub_sort_pairs_* ascending on that bit range;
 * deterministic. offsets (device, 2^(end_bit - begin_bit) + 1 entries) receives the partition
 * offsets: partition d is [offsets[d], offsets[d + 1]). 0 <= n <= 2^32. Two-phase temporary
 * storage (about 12 bytes per digit per block). The inputs are never written; inputs and outputs
 * must not overlap.
 * writes: how the scatter combines partial sectors, one of GJ_K_PARTW_WRITES_*: AUTO (SHARED
 * above 8 bits where it can run, else L2), L2 (straight to global memory; the L2 combines the
 * sectors of each block's write fronts), SHARED (software write-combining in shared-memory
 * buffers; runs only when n < 2^32, keys_out and vals_out are 16-byte aligned and the buffers
 * fit, and falls back to L2 otherwise).
 * blocks: 0 (the device's SM count times the tuning's blocks per SM), or (tests) the number of
 * chunks; capped at the number of tiles, and at least 2 when there are 2 tiles or more. */
#define GJ_K_PARTW_WRITES_AUTO 0
#define GJ_K_PARTW_WRITES_L2 1
#define GJ_K_PARTW_WRITES_SHARED 2
#define GJ_K_DECL_PARTW(KN, K, VN, V)                                                              \
  int gj_k_partw_partition_pairs_##KN##_##VN(void *temp, size_t *temp_bytes, const K *keys_in,      \
                                             const V *vals_in, K *keys_out, V *vals_out,           \
                                             uint64_t *offsets, int64_t n, int begin_bit,          \
                                             int end_bit, int writes, int blocks,                  \
                                             gj_k_stream_t stream);
GJ_K_DECL_PARTW(k32, uint32_t, v32, uint32_t)
GJ_K_DECL_PARTW(k32, uint32_t, v64, uint64_t)
GJ_K_DECL_PARTW(k64, uint64_t, v32, uint32_t)
GJ_K_DECL_PARTW(k64, uint64_t, v64, uint64_t)
/* The plan gj_k_partw_partition_pairs_* follows for these arguments (host-only; asks the current
 * device): the write mode it runs (L2 or SHARED), the items per write-combining group (1 for L2),
 * the items per tile and the number of blocks (chunks). Any output may be NULL. */
int gj_k_partw_plan(int key_bytes, int value_bytes, int64_t n, int bits, int writes,
                    int outputs_aligned, int blocks, int *writes_used, int *group, int *tile_items,
                    int *grid_blocks);

#ifdef __cplusplus
}
#endif
#endif /* GPUJOIN_KERNELS_H */
