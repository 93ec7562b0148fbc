// C ABI of gpujoin's table kernels (cuda/join/table.cu): the device side of the one columnar
// model (Arrow's layout). Bindings: crates/join/src/kernels/sys/table.rs (`cargo xtask bindgen`).
//
// Conventions as in gpujoin_join.h: a stream, a cudaError_t return code, 64-bit counts,
// two-phase temporary storage where needed (temp == NULL: write the bytes needed into
// *temp_bytes); row ids are uint32_t with 0xFFFFFFFF = no row. Bitmaps are Arrow's: bit i of a
// bitmap is bit (i % 8) of byte (i / 8), 1 = set; a bitmap read at a bit offset starts there.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_tb_stream_t;

/* A string column in Arrow's layout: string i (0 <= i < rows) is
 * bytes[offsets[offset + i] .. offsets[offset + i + 1]], the offsets int32_t (wide_offsets == 0)
 * or int64_t (wide_offsets != 0). */
typedef struct gj_tb_strings {
  const void *offsets;
  int wide_offsets;
  int64_t offset;
  int64_t rows;
  const uint8_t *bytes;
} gj_tb_strings;

/* Narrow source kinds of gj_tb_widen. */
typedef enum gj_tb_narrow {
  GJ_TB_I8 = 0,
  GJ_TB_I16 = 1,
  GJ_TB_U8 = 2,
  GJ_TB_U16 = 3,
  GJ_TB_BOOL = 4
} gj_tb_narrow;

/* out[i] = element (offset + i) of `values` widened to 32 bits (signed kinds sign-extended;
 * GJ_TB_BOOL reads bit (offset + i) of a bitmap and writes 0 or 1), for i < n. */
int gj_tb_widen(const void *values, gj_tb_narrow kind, int64_t offset, int64_t n, uint32_t *out,
                gj_tb_stream_t stream);

/* out_words (ceil(n / 32) words) = bits [bit_offset, bit_offset + n) of `bits`, bit i of the
 * result in bit (i % 32) of word (i / 32); the bits past n in the last word are zero. */
int gj_tb_repack_bits(const uint8_t *bits, int64_t bit_offset, int64_t n, uint32_t *out_words,
                      gj_tb_stream_t stream);

/* out[k] = element (offset + map[k]) of a column of `width`-byte elements (1, 2, 4, 8 or 16)
 * and `len` rows, or zero bytes where map[k] is no row or not below len; k < n. */
int gj_tb_gather_fixed(const void *values, int width, int64_t offset, int64_t len, const uint32_t *map, int64_t n,
                       void *out, gj_tb_stream_t stream);

/* Bit k of out_words (ceil(n / 32) words) = map[k] is a row below len and bit
 * (bit_offset + map[k]) of `bits` is set (`bits` NULL: every row's bit is set). */
int gj_tb_gather_bits(const uint8_t *bits, int64_t bit_offset, int64_t len, const uint32_t *map, int64_t n,
                      uint32_t *out_words, gj_tb_stream_t stream);

/* lengths[k] = the byte length of string map[k] of `col` (0 where map[k] is no row or not below
 * col.rows), for k < n; lengths[n] = 0 (so an exclusive scan of n + 1 entries gives offsets). */
int gj_tb_string_lengths(gj_tb_strings col, const uint32_t *map, int64_t n, int64_t *lengths,
                         gj_tb_stream_t stream);

/* Copies string map[k] of `col` to out_bytes[out_offsets[k] ..] for every k < n (nothing where
 * map[k] is no row); out_offsets from gj_tb_string_lengths and an exclusive scan. */
int gj_tb_gather_string_bytes(gj_tb_strings col, const uint32_t *map, int64_t n, const int64_t *out_offsets,
                              uint8_t *out_bytes, gj_tb_stream_t stream);

/* out[i] = (int32_t)in[i] for i < n (offsets known to fit). */
int gj_tb_narrow_offsets(const int64_t *in, int64_t n, int32_t *out, gj_tb_stream_t stream);

/* Exact dense ranks of the strings of two columns under byte-wise order: equal strings (on either
 * side) get equal ranks, and rank order is string order. ranks_a[i] / ranks_b[i] for the rows of
 * a / b; *distinct (device memory) = the number of distinct strings. a.rows + b.rows must be
 * below 2^32. Two-phase temporary storage. */
int gj_tb_string_ranks(void *temp, size_t *temp_bytes, gj_tb_strings a, gj_tb_strings b, uint32_t *ranks_a,
                       uint32_t *ranks_b, uint32_t *distinct, gj_tb_stream_t stream);

/* hi[i] / lo[i] = the high (signed) and low 64 bits of the 16-byte little-endian element
 * (offset + i) of `values` (a Decimal128 column), for i < n. */
int gj_tb_split_decimal(const void *values, int64_t offset, int64_t n, int64_t *hi, uint64_t *lo,
                        gj_tb_stream_t stream);

/* Numeric kinds of gj_tb_count_descents. */
typedef enum gj_tb_numeric {
  GJ_TB_NUM_I32 = 0,
  GJ_TB_NUM_I64 = 1,
  GJ_TB_NUM_U32 = 2,
  GJ_TB_NUM_U64 = 3,
  GJ_TB_NUM_F32 = 4,
  GJ_TB_NUM_F64 = 5
} gj_tb_numeric;

/* *count (device memory, zeroed by the caller) += the number of i in [1, n) with
 * values[i] < values[i - 1] (floats in the order -0.0 == 0.0, NaN last). */
int gj_tb_count_descents(const void *values, gj_tb_numeric kind, int64_t n, unsigned long long *count,
                         gj_tb_stream_t stream);

#ifdef __cplusplus
}
#endif
