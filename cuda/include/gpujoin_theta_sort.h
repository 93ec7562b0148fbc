// C ABI of gpujoin's sort-based theta-join kernels (cuda/join/theta_sort.cu). Bindings: crates/join/src/kernels/sys/theta_sort.rs
// (`cargo xtask bindgen`).
//
// Conventions: a stream, a cudaError_t return code, 64-bit counts, row ids uint32_t with
// 0xFFFFFFFF = no row. Column types are gj_ts_type codes; columns are passed as untyped device
// pointers of that type. The right side is sorted ascending by its key (-0.0 made +0.0, every NaN
// made the canonical +NaN so that NaN rows sort last); `perm` maps sorted positions to right rows
// and `n_valid` (device scalar) counts the sorted keys that are not NaN.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_ts_stream_t;

/* Column types. */
enum { GJ_TS_I32 = 0, GJ_TS_I64 = 1, GJ_TS_U32 = 2, GJ_TS_U64 = 3, GJ_TS_F32 = 4, GJ_TS_F64 = 5 };
/* Conditions `l.a cond r.b`; BAND: r.b - w <= l.a <= r.b + w. */
enum { GJ_TS_LT = 0, GJ_TS_LE = 1, GJ_TS_GT = 2, GJ_TS_GE = 3, GJ_TS_BAND = 4 };
/* What gj_ts_ranges writes into `counts` per left row. */
enum { GJ_TS_COUNT_INNER = 0, GJ_TS_COUNT_LEFT_OUTER = 1, GJ_TS_COUNT_SEMI = 2, GJ_TS_COUNT_ANTI = 3 };
/* Aggregates. */
enum { GJ_TS_AGG_COUNT = 0, GJ_TS_AGG_SUM = 1, GJ_TS_AGG_MIN = 2, GJ_TS_AGG_MAX = 3 };
/* How an aggregate of a right column is answered per range. */
enum { GJ_TS_STRUCT_PREFIX = 0, GJ_TS_STRUCT_SUFFIX = 1, GJ_TS_STRUCT_SPARSE = 2 };

/* A band width: `i` for signed integer columns, `u` for unsigned ones, `f` for floats (an f32
 * width converted exactly to double). */
typedef struct gj_ts_width {
  int64_t i;
  uint64_t u;
  double f;
} gj_ts_width;

/* One aggregate result: integers as a two's-complement 128-bit value (lo, hi words), floats in
 * `f`; `present` is 1 when at least one pair contributed. */
typedef struct gj_ts_cell {
  uint64_t lo;
  int64_t hi;
  double f;
  uint32_t present;
  uint32_t pad;
} gj_ts_cell;

/* Bytes of one element of the prefix-sum structure of a column of `type` (16 for integers: a
 * 128-bit sum; 32 for floats: finite sum plus NaN/+inf/-inf counts). */
int64_t gj_ts_prefix_sum_elem_bytes(int type);

/* keys_out[i] = normalized keys[i] (-0.0 -> +0.0, NaN -> +NaN), ids_out[i] = i. */
int gj_ts_prepare_keys(int type, const void *keys, int64_t n, void *keys_out, uint32_t *ids_out,
                       gj_ts_stream_t stream);

/* *n_valid = the number of non-NaN keys of the sorted (normalized) keys. */
int gj_ts_valid_count(int type, const void *sorted, int64_t n, uint64_t *n_valid, gj_ts_stream_t stream);

/* For each left row i the matching sorted positions [lo[i], hi[i]) (lo <= hi <= n_valid).
 * counts (optional, n_left + 1 entries, the last written 0): per count_mode. */
int gj_ts_ranges(int type, const void *left, int64_t n_left, const void *sorted_right, int64_t n_right,
                 const uint64_t *n_valid, int cond, gj_ts_width width, uint32_t *lo, uint32_t *hi,
                 uint64_t *counts, int count_mode, gj_ts_stream_t stream);

/* Output rows [out_begin, out_begin + out_count) (global positions in the scan `offsets` of the
 * counts), all produced by left rows [row_begin, row_end): for output g of left row i (rank
 * t = g - offsets[i]) writes left_out[g - out_begin] = i and, if right_out is not NULL,
 * right_out[...] = perm[lo[i] + t], or no row when hi[i] == lo[i] (a left-outer row). */
int gj_ts_expand(const uint64_t *offsets, const uint32_t *lo, const uint32_t *hi, const uint32_t *perm,
                 int64_t row_begin, int64_t row_end, uint64_t out_begin, uint64_t out_count,
                 uint32_t *left_out, uint32_t *right_out, gj_ts_stream_t stream);

/* A column of a fused materialization: for a left column dst[g] = src[i]; for a right column
 * (src already in sorted order) dst[g] = src[lo[i] + t]. elem_bytes is 4 or 8. */
typedef struct gj_ts_out_col {
  const void *src;
  void *dst;
  int32_t elem_bytes;
  int32_t from_right;
} gj_ts_out_col;
#define GJ_TS_MAX_OUT_COLS 8

/* As gj_ts_expand, writing column values (ncols <= GJ_TS_MAX_OUT_COLS) for inner rows. */
int gj_ts_materialize(const uint64_t *offsets, const uint32_t *lo, int64_t row_begin, int64_t row_end,
                      uint64_t out_begin, uint64_t out_count, const gj_ts_out_col *cols, int ncols,
                      gj_ts_stream_t stream);

/* dst[j] = src[perm[j]] for elements of elem_bytes (4 or 8). */
int gj_ts_gather(const void *src, const uint32_t *perm, int64_t n, int elem_bytes, void *dst,
                 gj_ts_stream_t stream);

/* diff (n_right + 1 entries, zeroed): +1 at lo[i], -1 (mod 2^64) at hi[i] for non-empty ranges. */
int gj_ts_cover_diff(const uint32_t *lo, const uint32_t *hi, int64_t n_left, uint64_t *diff, gj_ts_stream_t stream);
/* flags[j] = cover[j] != 0 (cover: the inclusive scan of diff), j < n_right. */
int gj_ts_cover_flags(const uint64_t *cover, int64_t n_right, uint8_t *flags, gj_ts_stream_t stream);

/* Prefix sums of a right column in sorted order: out[j] = sum of col[perm[0..j)], n + 1 entries of
 * gj_ts_prefix_sum_elem_bytes(type) bytes. temp: gj_ts_scan_temp_bytes(n, 32) bytes. */
int64_t gj_ts_scan_temp_bytes(int64_t n);
int gj_ts_prefix_sum(int type, const void *col, const uint32_t *perm, int64_t n, void *out, void *temp,
                     gj_ts_stream_t stream);
/* Running MIN or MAX (is_max) of a right column in sorted order, 8-byte elements, n + 1 entries:
 * PREFIX: out[j] = op(col[perm[0..j)]); SUFFIX: out[j] = op(col[perm[j..n_valid)]) for j <= n_valid.
 * Integers are stored order-preserving as uint64 images, floats as double (NaN ignored unless
 * alone). */
int gj_ts_running_minmax(int type, const void *col, const uint32_t *perm, int64_t n, const uint64_t *n_valid,
                         int is_max, int suffix, uint64_t *out, void *temp, gj_ts_stream_t stream);
/* Sparse table for range MIN/MAX: levels * n 8-byte elements (level k, position j: op over
 * col[perm[j .. j + 2^k)]). */
int gj_ts_sparse_table(int type, const void *col, const uint32_t *perm, int64_t n, int levels, int is_max,
                       uint64_t *table, gj_ts_stream_t stream);

/* Steps 2 and 4 of an aggregate fused: each left row finds its range [lo, hi) among the sorted
 * right keys (`type`, `cond`, `width` as gj_ts_ranges; NaN keys, sorted last, match nothing) and
 * aggregates over it. col_side: 0 = none (COUNT), 1 = left column `left_col`, 2 = right column
 * through `structure` (of `structure_kind`; for SUM the prefix sums). rows_out (optional): one cell
 * per left row. total_out (optional): the aggregate over all rows, with partials
 * (gj_ts_agg_partials() cells of scratch) and `done`, a counter that must be zero on entry (it is
 * left zero). One launch; nothing when n_left is 0. */
int gj_ts_agg_partials(void);
int gj_ts_range_agg(int type, const void *left, int64_t n_left, const void *sorted_right, int64_t n_right, int cond,
                    gj_ts_width width, int agg, int col_type, int col_side, const void *left_col, const void *structure,
                    int structure_kind, int levels, gj_ts_cell *rows_out, gj_ts_cell *partials, uint32_t *done,
                    gj_ts_cell *total_out, gj_ts_stream_t stream);

/* Small right sides (at most GJ_TS_SMALL_MAX rows): the sort and the prefix sums in two kernels.
 * Runs of GJ_TS_SMALL_TILE rows are sorted each by one block; every element then finds its place
 * in the whole order by binary search in the other runs. Writes sorted_keys (n normalized keys of
 * key_type, ascending, NaN last, as gj_ts_prepare_keys + a stable sort) and, when sum_type >= 0
 * (a column type), prefix (n + 1 elements of gj_ts_prefix_sum_elem_bytes(sum_type) bytes: the
 * prefix sums of `sum_col` in sorted order, as gj_ts_prefix_sum). Scratch: run_img (n elements
 * of the key's width), run_row (n), run_incl (n prefix elements; unused without a sum). Sets
 * *done to 0 (for a following gj_ts_range_agg) when done is not NULL. */
#define GJ_TS_SMALL_TILE 4096
#define GJ_TS_SMALL_MAX 65536
int gj_ts_small_sort(int key_type, const void *keys, int64_t n, int sum_type, const void *sum_col, void *run_img,
                     uint32_t *run_row, void *run_incl, void *sorted_keys, void *prefix, uint32_t *done,
                     gj_ts_stream_t stream);

#ifdef __cplusplus
}
#endif
