/* gpujoin_join.h - plain C declarations of the join kernels (cuda/join). Conventions as in
 * gpujoin_kernels.h: a stream, a cudaError_t return code, 64-bit counts, two-phase temporary
 * storage where needed; row ids are uint32_t with 0xFFFFFFFF = no row.
 * Rust declarations: crates/join/src/kernels/sys/join.rs (`cargo xtask bindgen`). */
#ifndef GPUJOIN_JOIN_H
#define GPUJOIN_JOIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_j_stream_t;

/* Join kinds, in the order of gpujoin's JoinType. */
typedef enum gj_j_kind {
  GJ_J_INNER = 0,
  GJ_J_LEFT = 1,
  GJ_J_RIGHT = 2,
  GJ_J_FULL = 3,
  GJ_J_LEFT_SEMI = 4,
  GJ_J_LEFT_ANTI = 5,
  GJ_J_RIGHT_SEMI = 6,
  GJ_J_RIGHT_ANTI = 7
} gj_j_kind;

/* ---- Sort-merge (ModernGPU) join on sorted keys. ----
 * counts[i] = ub[i] - lb[i], or 1 where that is 0 and keep_unmatched (left/full joins). */
int gj_j_merge_counts(const uint32_t *lb, const uint32_t *ub, int64_t n, int keep_unmatched,
                      uint32_t *counts, gj_j_stream_t stream);
/* Expands each A row i into counts[i] output rows by load-balancing search over offsets
 * (exclusive scan of counts, total = sum): out_a = a_rows[i] (or i), out_b = b_rows[lb[i] + r]
 * (or lb[i] + r), or no row where ub[i] == lb[i]. a_rows / b_rows may be NULL. */
int gj_j_merge_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t n,
                      int64_t total, const uint32_t *lb, const uint32_t *ub, const uint32_t *a_rows,
                      const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b,
                      gj_j_stream_t stream);

/* Fused two-pass merge join on sorted keys. parts: merge-path partitions of (A, B) with A first
 * on ties and gj_j_merge_tile_items() items per tile. Pass 1 writes each tile's output rows
 * (tile_rows, one per tile), sets *over_cap to 1 if a tile's rows pass `cap` and, when b_match
 * is not NULL, 1 for each B row that has a match. When `unsorted` is not NULL it also checks
 * the order of both sides (every adjacent pair, in the same pass): it ORs 1 into *unsorted for a
 * descent in A, 2 for one in B, 3 where the partitions themselves show unsorted keys (which also
 * sets *over_cap; the maps of such a pass mean nothing).
 * Pass 2 writes the maps at tile_offsets (exclusive scan of tile_rows, one more entry holding the
 * total); it needs every tile's rows <= 4 * gj_j_merge_tile_items() (else use merge_expand).
 * One pass (single): tiles taken in order from ctl[0] count their rows, learn where they start by
 * decoupled look-back and write them into maps of `capacity` rows. ctl: tiles + 3 words, zeroed:
 * [0] ticket, [1] flags (below), [2] the rows in all when no flag is set, then one look-back
 * status word per tile. A flag set means the maps mean nothing: GJ_J_MERGE_OVER_CAP (a tile's rows
 * pass `cap`, or unsorted partitions), GJ_J_MERGE_OVERFLOW (the rows pass `capacity`; ctl[2] is
 * not written), GJ_J_MERGE_UNSORTED_A / _B (check_order: a descent in A / B). b_match as for the
 * count pass. single_match: the pass for keys of which one side has at most one row (key by key:
 * PK-FK joins, either side the key), each merged item giving at most one row; a key with several
 * rows on both sides sets GJ_J_MERGE_MANY_TO_MANY (and nothing else is meant: run the pass again
 * with single_match 0, on zeroed ctl). Both write the same rows in the same order. */
#define GJ_J_MERGE_UNSORTED_A 1u
#define GJ_J_MERGE_UNSORTED_B 2u
#define GJ_J_MERGE_OVER_CAP 4u
#define GJ_J_MERGE_OVERFLOW 8u
#define GJ_J_MERGE_MANY_TO_MANY 16u
int64_t gj_j_merge_tile_items(void);
#define GJ_J_DECL_FUSED(KN, K)                                                                   \
  int gj_j_merge_count_##KN(const K *a, int64_t a_len, const K *b, int64_t b_len,               \
                            const int64_t *parts, int keep_unmatched, uint64_t *tile_rows,      \
                            uint8_t *b_match, uint64_t cap, uint32_t *over_cap,                 \
                            uint32_t *unsorted, gj_j_stream_t stream);                          \
  int gj_j_merge_write_##KN(const K *a, int64_t a_len, const K *b, int64_t b_len,               \
                            const int64_t *parts, int keep_unmatched,                           \
                            const uint64_t *tile_offsets, const uint32_t *a_rows,               \
                            const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b,           \
                            gj_j_stream_t stream);                                              \
  int gj_j_merge_single_##KN(const K *a, int64_t a_len, const K *b, int64_t b_len,              \
                             const int64_t *parts, int keep_unmatched, uint64_t *ctl,           \
                             uint64_t cap, uint64_t capacity, uint8_t *b_match,                 \
                             int check_order, int single_match, const uint32_t *a_rows,         \
                             const uint32_t *b_rows, uint32_t *out_a, uint32_t *out_b,          \
                             gj_j_stream_t stream);
GJ_J_DECL_FUSED(u32, uint32_t)
GJ_J_DECL_FUSED(u64, uint64_t)
GJ_J_DECL_FUSED(i32, int32_t)
GJ_J_DECL_FUSED(i64, int64_t)

/* ---- Interleave join. ----
 * Derived keys of the concatenation: keys[i] = (image[i] << tbits) | table, for the rows of one
 * table (written at keys + offset). */
int gj_j_interleave_derive(const uint64_t *image, int64_t n, int tbits, uint64_t table,
                           uint64_t *keys, gj_j_stream_t stream);
/* Output rows of each (key, table) run g of the sorted derived keys (runs[g], run_len[g],
 * G runs, 2 tables): the Cartesian product for an L run followed by an R run with the same key,
 * unmatched runs as the join kind keeps them. */
int gj_j_interleave_counts(const uint64_t *runs, const uint32_t *run_len, int64_t num_runs,
                           gj_j_kind kind, uint64_t *out_counts, gj_j_stream_t stream);
/* Expands the runs into gather maps: ids are the sorted row ids (L rows 0..n_left, R rows
 * n_left..), run_start the exclusive scan of run_len, offsets the exclusive scan of out_counts. */
int gj_j_interleave_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t num_runs,
                           int64_t total, const uint64_t *runs, const uint32_t *run_len,
                           const uint32_t *run_start, const uint32_t *ids, uint32_t n_left,
                           gj_j_kind kind, uint32_t *out_a, uint32_t *out_b, gj_j_stream_t stream);
/* N-way inner interleave join on one key (N <= 16 tables, tbits = ceil(log2 N)): counts are the
 * products of the run lengths of N consecutive runs t = 0..N-1 with equal keys (counted at the
 * first), and expansion writes N maps (out[t] = out + t * total). table_base[t] is the first
 * global row id of table t. */
int gj_j_interleave_counts_n(const uint64_t *runs, const uint32_t *run_len, int64_t num_runs,
                             int tables, int tbits, uint64_t *out_counts, gj_j_stream_t stream);
int gj_j_interleave_expand_n(void *temp, size_t *temp_bytes, const uint64_t *offsets,
                             int64_t num_runs, int64_t total, const uint32_t *run_len,
                             const uint32_t *run_start, const uint32_t *ids,
                             const uint32_t *table_base, int tables, uint32_t *out,
                             gj_j_stream_t stream);

/* ---- Keys. ----
 * Image of a key column under the join's equality, in a u64 whose order is the value order:
 * integers order-preserving, floats with -0.0 -> +0.0 and every NaN -> one NaN. For key column
 * `column` (0..3), flags |= 1 << 2*column for a null row (validity: Arrow bitmap, LSB first, may
 * be NULL; null rows get image 0) and |= 2 << 2*column for NaN. */
#define GJ_J_DECL_IMAGE(TN, T)                                                                   \
  int gj_j_image_##TN(const T *col, const uint32_t *validity, int64_t n, int column,           \
                      uint64_t *image, uint8_t *flags, gj_j_stream_t stream);
GJ_J_DECL_IMAGE(u32, uint32_t)
GJ_J_DECL_IMAGE(u64, uint64_t)
GJ_J_DECL_IMAGE(i32, int32_t)
GJ_J_DECL_IMAGE(i64, int64_t)
GJ_J_DECL_IMAGE(f32, float)
GJ_J_DECL_IMAGE(f64, double)

/* One derived key per row from up to 4 column images (unused ones NULL):
 *  exact (hash == 0): the images packed, column 0 highest, widths[c] bits each, plus one null
 *   bit per column above its value when null_equal (the caller checks the total fits 64 bits);
 *  hash != 0: a 64-bit mix of images and null bits, ANDed with hash_mask (all ones normally;
 *   tests narrow it to force collisions, which verification filters).
 * Null rows keep image 0. never_match[i] = 1 where a null (unless null_equal) or a NaN (when
 * nan_never_equal) means the row matches nothing. */
int gj_j_derive_key(const uint64_t *img0, const uint64_t *img1, const uint64_t *img2,
                    const uint64_t *img3, const int *widths, int ncols, const uint8_t *flags,
                    int64_t n, int hash, int null_equal, int nan_never_equal, uint64_t hash_mask, uint64_t *key,
                    uint8_t *never_match, gj_j_stream_t stream);

/* ok[i] = the pair (a[i], b[i]) is a true match: every column image equal and null flags equal.
 * imgs_a / imgs_b are arrays of ncols device pointers (in device memory). */
int gj_j_verify_pairs(const uint32_t *a, const uint32_t *b, int64_t n, const uint64_t *const *imgs_a,
                      const uint64_t *const *imgs_b, int ncols, const uint8_t *flags_a,
                      const uint8_t *flags_b, uint8_t *ok, gj_j_stream_t stream);

/* counts[at[i]] += 1 for every i with keep[i] != 0 (keep NULL: every i); atomic. */
int gj_j_count_at(const uint32_t *at, const uint8_t *keep, int64_t n, uint32_t *counts, gj_j_stream_t stream);

/* out[i] = the null bits (0x55 mask) of flags[rows[i]] (rows NULL: of flags[i]); flags NULL: 0. */
int gj_j_null_bits(const uint8_t *flags, const uint32_t *rows, int64_t n, uint32_t *out, gj_j_stream_t stream);

/* heads[i] = 1 where row ids[i] differs from row ids[i - 1] in null_bits or any of the ncols
 * images (imgs: an array of ncols device pointers, in device memory); heads[0] = 0. */
int gj_j_run_heads(const uint32_t *ids, int64_t n, const uint64_t *const *imgs, int ncols,
                   const uint32_t *null_bits, uint32_t *heads, gj_j_stream_t stream);

/* out[i] = (uint32_t)in[i] (derived keys known to fit 32 bits). */
int gj_j_narrow_keys(const uint64_t *in, int64_t n, uint32_t *out, gj_j_stream_t stream);

/* Validity bitmap of a gather map (Arrow layout, LSB first): bit i = map[i] != no row;
 * words = ceil(n / 32). */
int gj_j_map_validity(const uint32_t *map, int64_t n, uint32_t *words, gj_j_stream_t stream);

/* flags[rows[i]] = 1 for rows[i] != no row. */
int gj_j_mark_rows(const uint32_t *rows, int64_t n, uint8_t *flags, gj_j_stream_t stream);
/* out[i] = rows ? rows[i] : i, mapped through `map` when map != NULL (out[i] = map[...]). */
int gj_j_map_rows(const uint32_t *rows, const uint32_t *map, int64_t n, uint32_t *out,
                  gj_j_stream_t stream);

/* Key compression of 8-byte integer keys (key_range.cu). The range of the valid rows of col
 * (validity NULL: every row), signed for _i64, unsigned for _u64 and _u32 (also the direct-address
 * table of the non-partitioned hash join, gpujoin_hash.h), folded into range[0] (min) and
 * range[1] (max) with atomics: start from the empty range (type max, type min) and call once a
 * side for both sides' range. Example: [-5, 7, NULL, -3] -> {-5, 7}. */
int gj_j_key_range_i64(const int64_t *col, const uint32_t *validity, int64_t n, int64_t *range, gj_j_stream_t stream);
int gj_j_key_range_u64(const uint64_t *col, const uint32_t *validity, int64_t n, uint64_t *range, gj_j_stream_t stream);
int gj_j_key_range_u32(const uint32_t *col, const uint32_t *validity, int64_t n, uint32_t *range, gj_j_stream_t stream);

/* out[i] = (uint32_t)(col[i] - min) for valid rows (64-bit wrapping subtraction: the caller
 * checked that every valid key lies in [min, min + 2^32)), 0 for null rows. An i64 column is
 * passed as its bits. Example: [-5, 7, NULL, -3] with min -5 -> [0, 12, 0, 2]. */
int gj_j_key_offsets(const uint64_t *col, const uint32_t *validity, int64_t n, uint64_t min, uint32_t *out,
                     gj_j_stream_t stream);

/* ---- Equi-join aggregates without pairs (equi_agg.cu). ----
 * One accumulator of COUNT/SUM/MIN/MAX: the integer value as two words (i128: ilo the low,
 * ihi the high word), the float value, the weighted count of the values, whether any value was
 * seen and whether an integer SUM overflowed i128. */
typedef struct gj_j_agg {
  uint64_t ilo;
  int64_t ihi;
  double f;
  uint64_t count;
  uint32_t has;
  uint32_t overflow;
} gj_j_agg;

/* The aggregate (the order of gpujoin's theta::Agg) and the aggregated column's value type
 * (1- and 2-byte integers and booleans come widened to 32 bits; dates and timestamps as their
 * integer type). */
typedef enum gj_j_agg_kind { GJ_J_AGG_COUNT = 0, GJ_J_AGG_SUM = 1, GJ_J_AGG_MIN = 2, GJ_J_AGG_MAX = 3 } gj_j_agg_kind;
typedef enum gj_j_agg_type {
  GJ_J_AGG_I32 = 0,
  GJ_J_AGG_U32 = 1,
  GJ_J_AGG_I64 = 2,
  GJ_J_AGG_U64 = 3,
  GJ_J_AGG_F32 = 4,
  GJ_J_AGG_F64 = 5
} gj_j_agg_type;

/* Partials that gj_j_agg_column takes (it uses at most this many). */
#define GJ_J_AGG_MAX_BLOCKS 1024

/* counts[rows[i]] = ub[i] - lb[i] for i < n (the other entries untouched): the match counts of
 * sorted rows scattered back to row order. Example: lb [0, 2], ub [2, 3], rows [1, 0] ->
 * counts [1, 2]. */
int gj_j_agg_scatter_counts(const uint32_t *lb, const uint32_t *ub, const uint32_t *rows, int64_t n,
                            uint32_t *counts, gj_j_stream_t stream);

/* out[0] = agg over the n rows of `values` (type `type`), each valid row (validity: bit i of
 * word i / 32; NULL: every row) taken m times: with c = counts[i] (counts NULL: c = 0),
 * m = c > 0 ? (matched == 2 ? c : matched) : unmatched (matched 0, 1 or 2; unmatched 0 or 1).
 * COUNT: the sum of m; SUM: of value * m (integers in i128, overflow flagged; floats in f64);
 * MIN/MAX: of the values with m > 0 (floats: NaN if any is NaN). has = 0 when no value counts.
 * values may be NULL for COUNT. partials: GJ_J_AGG_MAX_BLOCKS entries of scratch.
 * Example: values [5, 7, NULL], counts [2, 0, 1], matched 2, unmatched 1 -> SUM 17, COUNT 3. */
int gj_j_agg_column(const void *values, int32_t type, const uint32_t *validity, const uint32_t *counts, int64_t n,
                    int32_t matched, int32_t unmatched, int32_t agg, gj_j_agg *partials, gj_j_agg *out,
                    gj_j_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* GPUJOIN_JOIN_H */
