/* gpujoin_cub.h - plain C declarations of gpujoin's wrappers over CUB device algorithms.
 *
 * Every function:
 *  - takes caller-provided temporary storage (`temp`, `*temp_bytes`): called with temp == NULL it
 *    only writes the bytes it needs into *temp_bytes (CUB's two-phase protocol);
 *  - runs on `stream` (a cudaStream_t / CUstream) and returns a cudaError_t code (0 = success);
 *  - never throws.
 * Counts are 64-bit except where CUB takes 32-bit counts (run-length encode: n <= INT32_MAX).
 * The Rust declarations in crates/cub-sys/src/bindings.rs are generated from this file by
 * `cargo xtask bindgen`. */
#ifndef GPUJOIN_CUB_H
#define GPUJOIN_CUB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_stream_t;

/* Comparison of selection predicates: item OP value. */
typedef enum gj_cmp_op {
  GJ_CMP_LT = 0,
  GJ_CMP_LE = 1,
  GJ_CMP_GT = 2,
  GJ_CMP_GE = 3,
  GJ_CMP_EQ = 4,
  GJ_CMP_NE = 5
} gj_cmp_op;

/* Name of a cudaError_t code, e.g. "cudaErrorMemoryAllocation". */
const char *gj_cuda_error_name(int code);
/* Returns and clears the last CUDA runtime error of this thread. */
int gj_cuda_get_last_error(void);

/* ---- DeviceRadixSort::SortPairs / SortPairsDescending on bits [begin_bit, end_bit). ---- */
#define GJ_DECL_SORT_PAIRS(KN, K, VN, V)                                                        \
  int gj_cub_sort_pairs_##KN##_##VN(void *temp, size_t *temp_bytes, const K *keys_in, K *keys_out, \
                                     const V *values_in, V *values_out, int64_t n, int begin_bit, \
                                     int end_bit, int descending, gj_stream_t stream);
#define GJ_DECL_SORT_PAIRS_ALL_VALUES(KN, K) \
  GJ_DECL_SORT_PAIRS(KN, K, u32, uint32_t)   \
  GJ_DECL_SORT_PAIRS(KN, K, u64, uint64_t)
GJ_DECL_SORT_PAIRS_ALL_VALUES(u32, uint32_t)
GJ_DECL_SORT_PAIRS_ALL_VALUES(u64, uint64_t)
GJ_DECL_SORT_PAIRS_ALL_VALUES(i32, int32_t)
GJ_DECL_SORT_PAIRS_ALL_VALUES(i64, int64_t)
GJ_DECL_SORT_PAIRS_ALL_VALUES(f32, float)
GJ_DECL_SORT_PAIRS_ALL_VALUES(f64, double)

/* ---- DeviceRadixSort::SortPairs (ascending) over a cub::DoubleBuffer: keys/values and their
 * alternates are the ping-pong buffers (both overwritten); *selector = 0 when the result is in
 * keys/values, 1 when in keys_alt/values_alt. Temporary storage is a few KiB. ---- */
int gj_cub_sort_pairs_db_u32_u32(void *temp, size_t *temp_bytes, uint32_t *keys, uint32_t *keys_alt,
                                 uint32_t *values, uint32_t *values_alt, int64_t n, int begin_bit,
                                 int end_bit, int *selector, gj_stream_t stream);
int gj_cub_sort_pairs_db_u64_u32(void *temp, size_t *temp_bytes, uint64_t *keys, uint64_t *keys_alt,
                                 uint32_t *values, uint32_t *values_alt, int64_t n, int begin_bit,
                                 int end_bit, int *selector, gj_stream_t stream);

/* ---- DeviceRadixSort::SortKeys / SortKeysDescending. ---- */
#define GJ_DECL_SORT_KEYS(KN, K)                                                                 \
  int gj_cub_sort_keys_##KN(void *temp, size_t *temp_bytes, const K *keys_in, K *keys_out, int64_t n, \
                            int begin_bit, int end_bit, int descending, gj_stream_t stream);
GJ_DECL_SORT_KEYS(u32, uint32_t)
GJ_DECL_SORT_KEYS(u64, uint64_t)
GJ_DECL_SORT_KEYS(i32, int32_t)
GJ_DECL_SORT_KEYS(i64, int64_t)
GJ_DECL_SORT_KEYS(f32, float)
GJ_DECL_SORT_KEYS(f64, double)

/* ---- DeviceScan::ExclusiveSum / InclusiveSum; in-place (in == out) is allowed. ---- */
#define GJ_DECL_SCAN(NAME, TI, TO)                                                                \
  int gj_cub_exclusive_sum_##NAME(void *temp, size_t *temp_bytes, const TI *in, TO *out, int64_t n, \
                                  gj_stream_t stream);                                            \
  int gj_cub_inclusive_sum_##NAME(void *temp, size_t *temp_bytes, const TI *in, TO *out, int64_t n, \
                                  gj_stream_t stream);
GJ_DECL_SCAN(u32, uint32_t, uint32_t)
GJ_DECL_SCAN(u64, uint64_t, uint64_t)
/* u32 inputs summed in 64 bits (counts whose total may pass 2^32). */
GJ_DECL_SCAN(u32_u64, uint32_t, uint64_t)

/* ---- DeviceRunLengthEncode::Encode (n <= INT32_MAX). num_runs is one device int64. ---- */
#define GJ_DECL_RLE(KN, K)                                                                       \
  int gj_cub_run_length_encode_##KN(void *temp, size_t *temp_bytes, const K *in, K *unique_out,  \
                                    uint32_t *counts_out, int64_t *num_runs, int64_t n,           \
                                    gj_stream_t stream);
GJ_DECL_RLE(u32, uint32_t)
GJ_DECL_RLE(u64, uint64_t)

/* ---- DeviceSelect::Flagged, DeviceSelect::If (item OP value), DevicePartition::Flagged. ----
 * num_selected is one device int64. Partition writes selected items in order at the front and
 * the rest in reverse order at the back (CUB's contract). */
#define GJ_DECL_SELECT(TN, T)                                                                      \
  int gj_cub_select_flagged_##TN(void *temp, size_t *temp_bytes, const T *in, const uint8_t *flags, \
                                 T *out, int64_t *num_selected, int64_t n, gj_stream_t stream);   \
  int gj_cub_select_if_##TN(void *temp, size_t *temp_bytes, const T *in, T *out,                  \
                            int64_t *num_selected, int64_t n, gj_cmp_op op, T value,              \
                            gj_stream_t stream);                                                  \
  int gj_cub_partition_flagged_##TN(void *temp, size_t *temp_bytes, const T *in,                  \
                                    const uint8_t *flags, T *out, int64_t *num_selected,          \
                                    int64_t n, gj_stream_t stream);
GJ_DECL_SELECT(u32, uint32_t)
GJ_DECL_SELECT(u64, uint64_t)

/* DeviceSelect::Flagged of row ids by flag value: out = the items of `in` (or the indices
 * 0..n-1 when in == NULL) whose flag is non-zero (want != 0) or zero (want == 0), in order. */
int gj_cub_select_by_flag_u32(void *temp, size_t *temp_bytes, const uint32_t *in, const uint8_t *flags,
                              int want, uint32_t *out, int64_t *num_selected, int64_t n,
                              gj_stream_t stream);

/* ---- DeviceReduce::Sum into one device value. ---- */
#define GJ_DECL_REDUCE(NAME, TI, TO)                                                              \
  int gj_cub_reduce_sum_##NAME(void *temp, size_t *temp_bytes, const TI *in, TO *out, int64_t n, \
                               gj_stream_t stream);
GJ_DECL_REDUCE(u32_u64, uint32_t, uint64_t)
GJ_DECL_REDUCE(u64, uint64_t, uint64_t)
GJ_DECL_REDUCE(i64, int64_t, int64_t)
GJ_DECL_REDUCE(f64, double, double)

/* ---- DeviceHistogram::HistogramEven of radix digits: bin of key k is
 * (k >> shift) & ((1 << bits) - 1); hist has 1 << bits counters. ---- */
#define GJ_DECL_RADIX_HIST(KN, K)                                                                 \
  int gj_cub_radix_histogram_##KN(void *temp, size_t *temp_bytes, const K *keys, uint32_t *hist,  \
                                  int64_t n, int shift, int bits, gj_stream_t stream);
GJ_DECL_RADIX_HIST(u32, uint32_t)
GJ_DECL_RADIX_HIST(u64, uint64_t)

#ifdef __cplusplus
}
#endif
#endif /* GPUJOIN_CUB_H */
