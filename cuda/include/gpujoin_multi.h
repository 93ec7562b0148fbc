// C ABI of gpujoin's multi-GPU kernels (cuda/multi/*.cu): the device side of the joins across
// the GPUs of one host (crates/multi-gpu). Bindings: crates/multi-gpu/src/kernels/sys.rs
// (`cargo xtask bindgen`).
//
// Conventions as in gpujoin_table.h: a stream, a cudaError_t return code, 64-bit counts; bitmaps
// are Arrow's (bit i is bit (i % 8) of byte (i / 8), 1 = set).
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_m_stream_t;

/* The most key columns gj_m_row_hash takes. */
#define GJ_M_MAX_KEYS 16

/* How a key column's values are read and normalized for hashing. */
typedef enum gj_m_kind {
  GJ_M_INT = 0,     /* signed integer of `width` bytes (1, 2, 4, 8), sign-extended */
  GJ_M_UINT = 1,    /* unsigned integer of `width` bytes (1, 2, 4, 8) */
  GJ_M_FLOAT = 2,   /* IEEE float of `width` bytes (4, 8): -0.0 as 0.0, every NaN one value */
  GJ_M_BOOL = 3,    /* bit-packed values */
  GJ_M_DECIMAL = 4, /* 16-byte little-endian integers */
  GJ_M_STRING = 5   /* UTF-8 bytes; offsets of `width` bytes (4: int32, 8: int64) */
} gj_m_kind;

/* One key column in Arrow's layout, read from element `offset`. */
typedef struct gj_m_key_column {
  int kind;
  int width;
  int64_t offset;
  const void *values;
  const void *offsets;     /* strings only */
  const uint8_t *validity; /* NULL: every row valid */
} gj_m_key_column;

/* hash[i] = a 64-bit hash of row i's key (columns cols[0..ncols), a host array) for i < n, equal
 * for rows whose keys are equal under the join's equalities, the same on every GPU and for both
 * string types; never_match[i] = 1 where the row can match nothing (a null key column unless
 * null_equal, a NaN unless nan_equal), else 0. A null column under null_equal hashes as a null
 * marker of its own. */
int gj_m_row_hash(const gj_m_key_column *cols, int ncols, int64_t n, int null_equal, int nan_equal,
                  uint64_t *hash, uint8_t *never_match, gj_m_stream_t stream);

/* sample[j] = hash[j * stride], sample_never[j] = never_match[j * stride], for j < count. */
int gj_m_sample(const uint64_t *hash, const uint8_t *never_match, int64_t stride, int64_t count,
                uint64_t *sample, uint8_t *sample_never, gj_m_stream_t stream);

/* The part each row goes to, for i < n, with `parts` parts and the row's global index
 * row_base + i:
 *  - a row that can match nothing, or whose hash is heavy[k] with split[k] != 0: spread by a mix
 *    of its global index;
 *  - a row whose hash is heavy[k] with split[k] == 0: `parts` (every part: replicated);
 *  - any other row: by a mix of its hash.
 * heavy: n_heavy hashes in ascending order (device memory), split beside them. */
int gj_m_destinations(const uint64_t *hash, const uint8_t *never_match, int64_t n, uint64_t row_base,
                      uint32_t parts, const uint64_t *heavy, const uint8_t *split, int64_t n_heavy,
                      uint32_t *dest, gj_m_stream_t stream);

/* Bits [0, n) of src, read from bit src_bit (src NULL: n set bits), are ORed into bits
 * [dst_bit, dst_bit + n) of the words dst (zeroed by the caller). */
int gj_m_copy_bits(const uint8_t *src, int64_t src_bit, int64_t n, uint32_t *dst, int64_t dst_bit,
                   gj_m_stream_t stream);

/* dst[i] = src[i] - src[0] + base for i < count; offsets of `width` bytes (4: int32, 8: int64)
 * both. */
int gj_m_rebase_offsets(const void *src, int width, int64_t count, int64_t base, void *dst, gj_m_stream_t stream);

#ifdef __cplusplus
}
#endif
