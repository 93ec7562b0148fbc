// C ABI of gpujoin's indexed nested-loop join kernels (cuda/join/inlj*.cu). Bindings:
// crates/join/src/kernels/sys/inlj.rs (`cargo xtask bindgen`).
//
// Conventions as in gpujoin_join.h: a stream, a cudaError_t return code, 64-bit counts,
// two-phase temporary storage where needed (temp == NULL: write the bytes needed into
// *temp_bytes); row ids are uint32_t with 0xFFFFFFFF = no row.
//
// A sorted index over a key column holds its row ids in key order (`rows`) and, beside them,
// sorted 4- or 8-byte keys (`keys`): for numeric columns the order-preserving unsigned image of
// each value (uint32_t for i32/u32/f32, uint64_t for i64/u64/f64; -0.0 and 0.0 have one image;
// NaN rows are left out of the index, and so are null rows, see gj_i_valid_entries), for strings the first 8 bytes big-endian, zero padded
// (uint64_t), ties resolved by comparing the strings byte-wise.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_i_stream_t;

/* Element type of a key column. */
typedef enum gj_i_type {
  GJ_I_I32 = 0,
  GJ_I_I64 = 1,
  GJ_I_U32 = 2,
  GJ_I_U64 = 3,
  GJ_I_F32 = 4,
  GJ_I_F64 = 5,
  GJ_I_UTF8 = 6
} gj_i_type;

/* A device key column: `values` (numeric types), or `offsets` (rows + 1 entries) and `bytes`
 * (GJ_I_UTF8: string i is bytes[offsets[i]..offsets[i + 1]]). */
typedef struct gj_i_column {
  gj_i_type type;
  int64_t rows;
  const void *values;
  const int64_t *offsets;
  const uint8_t *bytes;
} gj_i_column;

/* A sorted index: `size` entries of sorted `keys` (see above) and their row ids of `column`. */
typedef struct gj_i_index {
  gj_i_column column;
  const void *keys;
  const uint32_t *rows;
  int64_t size;
} gj_i_index;

/* Index build, numeric columns: images[i] = the order-preserving image of row i (all ones for a
 * NaN), rows[i] = i; *nan_rows (zeroed by the caller) is increased by the number of NaN rows. The
 * caller then radix-sorts (images, rows); the NaN rows sort last and are cut off. */
int gj_i_build_images(gj_i_column column, void *images, uint32_t *rows, unsigned long long *nan_rows,
                      gj_i_stream_t stream);

/* Index build, string columns: the rows sorted byte-wise (ties by row id), with their 8-byte
 * big-endian prefixes (merge sort over (prefix, row) with a string comparator). Two-phase. */
int gj_i_sort_strings(void *temp, size_t *temp_bytes, gj_i_column column, uint64_t *prefixes, uint32_t *rows,
                      gj_i_stream_t stream);

/* Null rows of an index (validity: bit i % 32 of word i / 32 = row i valid): flags[j] = 1 when
 * row rows[j] is valid, 0 when it is null, for j < m. The caller drops the flagged-0 entries
 * (keys and rows alike) from a sorted index, so null rows match nothing, like NaN rows. */
int gj_i_valid_entries(const uint32_t *rows, int64_t m, const uint32_t *validity, uint8_t *flags,
                       gj_i_stream_t stream);

/* Probe: for each row i of `probe` (same type as the index), the equal range [lo, hi) of its
 * key in the index, found by binary search. lo[i] = lo, or 0xFFFFFFFF when the range is empty;
 * counts[i] = hi - lo, or 1 where that is 0 and keep_unmatched; matched[i] = (hi > lo). Any of the
 * three outputs may be NULL. NaN probe keys match nothing; so do null probe rows: probe_validity
 * (NULL: every row valid) holds bit i % 32 of word i / 32 = probe row i valid, and a null row's
 * range is empty. */
int gj_i_probe(gj_i_index index, gj_i_column probe, const uint32_t *probe_validity, int keep_unmatched,
               uint32_t *lo, uint64_t *counts, uint8_t *matched, gj_i_stream_t stream);

/* Writes the output pairs: probe row i yields counts[i] rows at offsets[i] (exclusive scan of
 * counts, `total` their sum): out_probe = i, out_index = index.rows[lo[i] + r] for r < counts[i],
 * or no row where lo[i] is 0xFFFFFFFF. Load-balanced over the output rows. Two-phase. */
int gj_i_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t n, int64_t total,
                const uint32_t *lo, const uint32_t *index_rows, uint32_t *out_probe, uint32_t *out_index,
                gj_i_stream_t stream);

/* Index rows hit by some probe: matched_rows[r] = 1 for each row r of the index's column whose
 * key equals the key of a probe row with lo[i] != 0xFFFFFFFF (lo from gj_i_probe, n probe rows).
 * matched_rows (index.column.rows entries) must be zeroed by the caller; rows not in the index
 * (NaN and null rows) stay 0.
 * Two-phase. */
int gj_i_index_matched(void *temp, size_t *temp_bytes, gj_i_index index, const uint32_t *lo, int64_t n,
                       uint8_t *matched_rows, gj_i_stream_t stream);

/* *count (zeroed by the caller) += the number of flags that are non-zero (want != 0) or zero. */
int gj_i_count_flags(const uint8_t *flags, int64_t n, int want, unsigned long long *count,
                     gj_i_stream_t stream);

#ifdef __cplusplus
}
#endif
