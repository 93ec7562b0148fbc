/* gpujoin_hash.h - plain C declarations of the hash-join kernels (cuda/join/hash.cu).
 * Conventions as in gpujoin_join.h: a stream, a cudaError_t return code, 64-bit counts, two-phase
 * temporary storage where needed; row ids are uint32_t with 0xFFFFFFFF = no row.
 * Rust declarations: crates/join/src/kernels/sys/hash.rs (`cargo xtask bindgen`). */
#ifndef GPUJOIN_HASH_H
#define GPUJOIN_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_h_stream_t;

/* ---- Key preparation. ----
 * out[i] = mix(in[rows[i]]) (rows may be NULL: in[i]); mix is a bijection (murmur3's
 * finalizer), so equal keys stay equal and distinct keys distinct, and its low bits are well
 * spread whatever the keys. gj_h_narrow_mix takes the low 32 bits of 64-bit keys first. */
int gj_h_mix_u32(const uint32_t *in, const uint32_t *rows, int64_t n, uint32_t *out,
                 gj_h_stream_t stream);
int gj_h_mix_u64(const uint64_t *in, const uint32_t *rows, int64_t n, uint64_t *out,
                 gj_h_stream_t stream);
int gj_h_narrow_mix(const uint64_t *in, const uint32_t *rows, int64_t n, uint32_t *out,
                    gj_h_stream_t stream);

/* ---- Partitioned hash join. ----
 * Partition p of keys sorted (stably) on their low `bits` bits is offsets[p]..offsets[p + 1];
 * offsets has 2^bits + 1 entries. */
int gj_h_part_offsets_u32(const uint32_t *keys, int64_t n, int bits, uint64_t *offsets,
                          gj_h_stream_t stream);
int gj_h_part_offsets_u64(const uint64_t *keys, int64_t n, int bits, uint64_t *offsets,
                          gj_h_stream_t stream);

/* One block's work in the match kernels: a chunk of at most gj_h_chunk_rows() build rows of a
 * partition and a range of the co-partition's probe rows (positions in the partitioned arrays). */
typedef struct gj_h_item {
  uint32_t build_begin;
  uint32_t build_len;
  uint32_t probe_begin;
  uint32_t probe_len;
} gj_h_item;

/* Build rows per chunk (the shared-memory hash table's capacity). */
int64_t gj_h_chunk_rows(void);

/* Work items of the co-partitions: partition p (parts of them) with nb build and np probe rows
 * yields ceil(nb / chunk) * ceil(np / probe_split) items (none when nb or np is 0), chunk-major.
 * gj_h_count_items writes the item count of every partition and raises *max_build to the
 * largest nb; gj_h_fill_items writes them at item_start (exclusive scan of the counts). */
int gj_h_count_items(const uint64_t *build_offsets, const uint64_t *probe_offsets, int64_t parts,
                     uint32_t probe_split, uint64_t *items_per_part, uint32_t *max_build,
                     gj_h_stream_t stream);
int gj_h_fill_items(const uint64_t *build_offsets, const uint64_t *probe_offsets, int64_t parts,
                    uint32_t probe_split, const uint64_t *item_start, gj_h_item *items,
                    gj_h_stream_t stream);

/* What the write pass writes for one side at each match, at output row k:
 * out_ids[k] = ids[pos] (ids NULL: pos, the partitioned position) when out_ids is not NULL;
 * out_vals[k] = vals[pos] (val_width 4 or 8 bytes) when out_vals is not NULL.
 * moved (probe side only; may be NULL): set to 1 unless every work item wrote each of its probe
 * rows exactly once, in order, at output row base + i = probe_begin + i. Left 0, the probe
 * side's output rows are its partitioned positions: out_ids is the identity on the pairs. */
typedef struct gj_h_side {
  const uint32_t *ids;
  uint32_t *out_ids;
  const void *vals;
  int val_width;
  void *out_vals;
  uint32_t *moved;
} gj_h_side;

/* Count pass: item_rows[w] = matching pairs of item w; build_hit / probe_hit (may be NULL) get
 * 1 at the positions of rows with a match (never cleared: zero them first).
 * Write pass: writes the pairs of item w at item_offsets[w] (exclusive scan of item_rows), probe
 * rows in order and, for each, its build matches in partition order.
 * Speculative single pass (inner joins): ticket (one zeroed word) orders the items, status
 * (num_items zeroed words) carries the decoupled look-back; writes at most `capacity` pairs.
 * When some build chunk has a duplicate key, or the pairs exceed capacity, *overflow becomes
 * non-zero and the output is incomplete (run the two passes). Otherwise status[num_items - 1]
 * & ((1 << 62) - 1) is the number of pairs. */
#define GJ_H_DECL_MATCH(KN, K)                                                                    \
  int gj_h_match_count_##KN(const K *build_keys, const K *probe_keys, const gj_h_item *items,     \
                            int64_t num_items, uint64_t *item_rows, uint8_t *build_hit,           \
                            uint8_t *probe_hit, gj_h_stream_t stream);                            \
  int gj_h_match_write_##KN(const K *build_keys, const K *probe_keys, const gj_h_item *items,     \
                            int64_t num_items, const uint64_t *item_offsets,                      \
                            const gj_h_side *build, const gj_h_side *probe, gj_h_stream_t stream); \
  int gj_h_match_spec_##KN(const K *build_keys, const K *probe_keys, const gj_h_item *items,      \
                           int64_t num_items, uint32_t *ticket, uint64_t *status, int64_t capacity, \
                           uint32_t *overflow, const gj_h_side *build, const gj_h_side *probe,      \
                           gj_h_stream_t stream);
GJ_H_DECL_MATCH(u32, uint32_t)
GJ_H_DECL_MATCH(u64, uint64_t)

/* ---- Non-partitioned hash join: one global open-addressing table of distinct build keys. ----
 * flags[i] = 1 where sorted[i] starts a run of equal keys. */
#define GJ_H_DECL_GLOBAL(KN, K)                                                                   \
  int gj_h_run_flags_##KN(const K *sorted, int64_t n, uint8_t *flags, gj_h_stream_t stream);     \
  int gj_h_table_insert_##KN(const K *sorted, int64_t n, const uint32_t *run_starts,            \
                             int64_t runs, uint32_t *table, int64_t capacity,                     \
                             gj_h_stream_t stream);                                               \
  int gj_h_table_probe_##KN(const uint32_t *table, int64_t capacity, const K *probe, int64_t n,  \
                            uint32_t *start, uint32_t *count, gj_h_stream_t stream);
GJ_H_DECL_GLOBAL(u32, uint32_t)
GJ_H_DECL_GLOBAL(u64, uint64_t)
/* table: capacity (a power of two) slots of 4 words each, zeroed. Insert puts each run of the
 * sorted build keys (run_starts: its first positions) in it; probe writes for every probe key
 * the first sorted position and the number of equal build keys (0 where none). */

/* ---- Non-partitioned hash join, unique build keys: one slot a build row, no sort. ----
 * table: buckets (a power of two, with 8 * buckets >= n) buckets of 8 uint32 slots (one 32-byte
 * sector each), every byte 0xff (empty). A slot holds a build position i (the index into keys)
 * in its low bits and up to 8 bits of the key's hash above them (a tag: only keys of equal tags
 * are compared); the key itself stays in keys. Insert puts every position i of keys[0..n) into
 * the first bucket from its key's home bucket on that has a free slot; it raises bit 0 of *flags
 * when a key repeats (take the sorted path). Probe writes for every probe key the build row of
 * an equal build key (build_ids[i], or i when build_ids is null) in match and hit = 1, or hit =
 * 0 where none; build_keys / nb are the keys inserted. Same n (nb) for insert and probe: the
 * slot layout depends on it.
 * Example: keys [12, 10] -> two slots holding 0 and 1 (with their tags), anywhere in the
 * table; probe [10, 7] -> match [1, 0], hit [1, 0]. */
#define GJ_H_DECL_UNIQUE(KN, K)                                                                   \
  int gj_h_unique_insert_##KN(const K *keys, int64_t n, uint32_t *table, int64_t buckets,        \
                              uint32_t *flags, gj_h_stream_t stream);                             \
  int gj_h_unique_probe_##KN(const uint32_t *table, int64_t buckets, const K *build_keys,        \
                             int64_t nb, const uint32_t *build_ids, const K *probe, int64_t n,   \
                             uint32_t *match, uint8_t *hit, gj_h_stream_t stream);
GJ_H_DECL_UNIQUE(u32, uint32_t)
GJ_H_DECL_UNIQUE(u64, uint64_t)

/* ---- Non-partitioned hash join, dense unique build keys: a direct-address table. ----
 * table: span uint32 slots (span = max - min + 1 of the build keys, see gj_j_key_range_*), every
 * byte 0xff (empty). Insert puts build row ids[i] (or i when ids is null) in slot keys[i] - min
 * (every build key must lie in [min, min + span)); it raises bit 0 of *flags when the slot was
 * taken (a key repeats: take the sorted path). Probe writes for every probe key whose slot (keys
 * outside the span have none) holds a row: match = that row and hit = 1; hit = 0 elsewhere.
 * Example: build [12, 10, 13], min 10, span 4 -> table [1, empty, 0, 2]; probe [13, 11, 9] ->
 * match [2, 0, 0], hit [1, 0, 0]. */
#define GJ_H_DECL_DIRECT(KN, K)                                                                   \
  int gj_h_direct_insert_##KN(const K *keys, const uint32_t *ids, int64_t n, K min, uint32_t *table, \
                              int64_t span, uint32_t *flags, gj_h_stream_t stream);               \
  int gj_h_direct_probe_##KN(const uint32_t *table, K min, int64_t span, const K *probe, int64_t n, \
                             uint32_t *match, uint8_t *hit, gj_h_stream_t stream);
GJ_H_DECL_DIRECT(u32, uint32_t)
GJ_H_DECL_DIRECT(u64, uint64_t)

/* Expands probe row i into count[i] pairs (offsets: exclusive scan of count, total its sum):
 * out_probe = probe_ids[i] (or i), out_build = build_ids[start[i] + r]. */
int gj_h_expand(void *temp, size_t *temp_bytes, const uint64_t *offsets, int64_t n, int64_t total,
                const uint32_t *start, const uint32_t *count, const uint32_t *probe_ids,
                const uint32_t *build_ids, uint32_t *out_probe, uint32_t *out_build,
                gj_h_stream_t stream);

/* ---- Chunked stable partition (PHJ-OM's later payload columns, in bounded memory). ----
 * One chunk of a side's rows, sorted stably on its low `bits` key bits (sorted_keys,
 * sorted_vals, n rows; local_offsets: its gj_h_part_offsets, 2^bits + 1 entries):
 * out[cursor[p] + (j - local_offsets[p])] = sorted_vals[j] for its row j of partition p.
 * gj_h_advance_cursor then adds the chunk's partition sizes to cursor (2^bits entries), which
 * starts as the whole side's partition offsets: chunks taken in row order give the stable
 * partition of the whole column. */
#define GJ_H_DECL_SCATTER(KN, K, VN, V)                                                             \
  int gj_h_chunk_scatter_##KN##_##VN(const K *sorted_keys, const V *sorted_vals, int64_t n,        \
                                     int bits, const uint64_t *local_offsets,                      \
                                     const uint64_t *cursor, V *out, gj_h_stream_t stream);
GJ_H_DECL_SCATTER(u32, uint32_t, u32, uint32_t)
GJ_H_DECL_SCATTER(u32, uint32_t, u64, uint64_t)
GJ_H_DECL_SCATTER(u64, uint64_t, u32, uint32_t)
GJ_H_DECL_SCATTER(u64, uint64_t, u64, uint64_t)
int gj_h_advance_cursor(const uint64_t *local_offsets, int64_t parts, uint64_t *cursor,
                        gj_h_stream_t stream);

/* ---- Sampled match ratio (Algorithm::Auto). ----
 * gj_h_sample_gather: out[i] = keys[floor(i * n / m)], 0 <= m <= n.
 * gj_h_sample_match: flags (m bytes, zeroed, m <= gj_h_sample_max()) get 1 at the first sample
 * entry of each distinct sample key that some build key equals, under `mode` (0: integer bits;
 * 1: f32, 2: f64, where -0.0 equals 0.0 and NaNs equal each other, or nothing when nan_never).
 * Which entry of a duplicated key is flagged is unspecified: compare by key. One pass over the
 * build keys; the sample set lives in shared memory. */
int64_t gj_h_sample_max(void);
#define GJ_H_DECL_SAMPLE(KN, K)                                                                      \
  int gj_h_sample_gather_##KN(const K *keys, int64_t n, int64_t m, K *out, gj_h_stream_t stream);   \
  int gj_h_sample_match_##KN(const K *sample, int64_t m, const K *build, int64_t n, int mode,      \
                             int nan_never, uint8_t *flags, gj_h_stream_t stream);
GJ_H_DECL_SAMPLE(u32, uint32_t)
GJ_H_DECL_SAMPLE(u64, uint64_t)

/* ---- Output helpers. ----
 * Validity bitmap of n rows (ceil(n / 32) words): bit k set unless null_begin <= k < null_end. */
int gj_h_range_validity(uint32_t *words, int64_t n, int64_t null_begin, int64_t null_end,
                        gj_h_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GPUJOIN_HASH_H */
