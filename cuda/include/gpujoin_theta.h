// C ABI of gpujoin's nested-loop theta-join kernels (cuda/join/theta.cu). Bindings:
// crates/join/src/kernels/sys/theta.rs (`cargo xtask bindgen`). Conventions as gpujoin_join.h:
// a stream, a cudaError_t return code, 64-bit counts; row ids are uint32_t with 0xFFFFFFFF =
// no row.
//
// A predicate arrives lowered (crates/join/src/theta/nested_loop/program.rs):
//  * leaves (at most GJ_T_MAX_LEAVES), each giving a 32-bit match mask over 32 inner (right) rows
//    for one outer (left) row: SEP (outer value op inner value, values pre-evaluated per row),
//    LBOOL (a left-only condition, one flag per left row), RBOOL (a right-only condition, one bit
//    per right row) or MIXED (a comparison whose operands mix both sides, interpreted per pair);
//  * a boolean program combining the leaf masks (AND/OR/NOT on 32-bit words);
//  * an interpreter program (stack machine, gj_t_instr) for MIXED leaves, for the per-row
//    pre-evaluation of side expressions, and for filtering candidate pairs.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *gj_t_stream_t;

#define GJ_T_MAX_LEAVES 8
#define GJ_T_MAX_COMBINE 32
#define GJ_T_MAX_COMBINE_STACK 16
#define GJ_T_MAX_STACK 48
#define GJ_T_BLOCK 256

// Element types (columns and pre-evaluated values). I128 only for pre-evaluated integers.
enum {
  GJ_T_I32 = 0,
  GJ_T_I64 = 1,
  GJ_T_U32 = 2,
  GJ_T_U64 = 3,
  GJ_T_F32 = 4,
  GJ_T_F64 = 5,
  GJ_T_UTF8 = 6,
  GJ_T_I128 = 7,
  // Outputs of gj_t_eval_rows for boolean programs.
  GJ_T_FLAGS = 8,  // one uint8_t per row
  GJ_T_BITS = 9    // one bit per row, uint32_t words (bit i % 32 of word i / 32)
};

// Comparison operators, in the order of CmpOp::ALL.
enum { GJ_T_EQ = 0, GJ_T_NE = 1, GJ_T_LT = 2, GJ_T_LE = 3, GJ_T_GT = 4, GJ_T_GE = 5 };

// Value classes of interpreter arithmetic and comparisons.
enum { GJ_T_CLASS_INT = 0, GJ_T_CLASS_F32 = 1, GJ_T_CLASS_F64 = 2, GJ_T_CLASS_STR = 3 };

// Interpreter opcodes. COL: a = side (0 left, 1 right), b = column. LIT: a = literal index,
// c = class. ADD/SUB: c = class. CMP: a = operator, c = class. AND/OR pop two booleans, NOT one,
// TRUE pushes true.
enum {
  GJ_T_OP_COL = 0,
  GJ_T_OP_LIT = 1,
  GJ_T_OP_ADD = 2,
  GJ_T_OP_SUB = 3,
  GJ_T_OP_CMP = 4,
  GJ_T_OP_AND = 5,
  GJ_T_OP_OR = 6,
  GJ_T_OP_NOT = 7,
  GJ_T_OP_TRUE = 8
};

typedef struct gj_t_instr {
  int32_t op;
  int32_t a;
  int32_t b;
  int32_t c;
} gj_t_instr;

// A literal: integers as i128 (lo, hi words), f32/f64 as bits in lo, strings as (byte offset into
// the literal bytes, length).
typedef struct gj_t_literal {
  int64_t lo;
  int64_t hi;
} gj_t_literal;

// A device column: data (strings: the bytes), offsets (strings only: rows + 1 int64 entries).
typedef struct gj_t_column {
  const void *data;
  const int64_t *offsets;
  int32_t dtype;
  int32_t pad;
} gj_t_column;

typedef struct gj_t_interp {
  const gj_t_instr *code;
  const gj_t_literal *lits;
  const uint8_t *lit_bytes;
  const gj_t_column *left_cols;
  const gj_t_column *right_cols;
} gj_t_interp;

enum { GJ_T_LEAF_SEP = 0, GJ_T_LEAF_LBOOL = 1, GJ_T_LEAF_RBOOL = 2, GJ_T_LEAF_MIXED = 3 };

// One leaf. SEP: `outer[l] op inner[r]` on values of element type `kind` (outer/inner: arrays of
// that type, or bytes + offsets for UTF8); the inner values of a tile live in shared memory at
// `smem_offset`. LBOOL: `left_flags[l]`. RBOOL: bit r of `right_bits`. MIXED: the interpreter
// program code[code_start .. code_start + code_len] per pair.
typedef struct gj_t_leaf {
  int32_t type;
  int32_t kind;
  int32_t op;
  int32_t smem_offset;
  const void *outer;
  const int64_t *outer_offsets;
  const void *inner;
  const int64_t *inner_offsets;
  const uint8_t *left_flags;
  const uint32_t *right_bits;
  int32_t code_start;
  int32_t code_len;
} gj_t_leaf;

// Boolean program over the leaf masks: entries (opcode << 8) | leaf.
enum { GJ_T_B_LEAF = 0, GJ_T_B_AND = 1, GJ_T_B_OR = 2, GJ_T_B_NOT = 3, GJ_T_B_TRUE = 4, GJ_T_B_FALSE = 5 };
// Combine modes: the program, the AND of all leaves, the OR of all leaves.
enum { GJ_T_COMBINE_PROGRAM = 0, GJ_T_COMBINE_ALL = 1, GJ_T_COMBINE_ANY = 2 };

// Aggregates (Agg order) and the class of the aggregated values.
enum { GJ_T_AGG_COUNT = 0, GJ_T_AGG_SUM = 1, GJ_T_AGG_MIN = 2, GJ_T_AGG_MAX = 3 };

// The nested-loop join: outer = left rows, one per thread, GJ_T_BLOCK per block; the right rows
// split into `chunks` chunks of `chunk_rows` (a multiple of tile_rows, itself a multiple of 32);
// block b handles outer block b / chunks and chunk b % chunks.
typedef struct gj_t_nlj {
  int64_t n_left;
  int64_t n_right;
  int64_t chunk_rows;
  int32_t chunks;
  int32_t tile_rows;
  int32_t smem_bytes;
  int32_t nleaves;
  gj_t_leaf leaves[GJ_T_MAX_LEAVES];
  int32_t combine_mode;
  int32_t combine_len;
  int32_t combine[GJ_T_MAX_COMBINE];
  gj_t_interp interp;
  // Aggregate: agg (GJ_T_AGG_*), the column (agg_side 0 left / 1 right, its dtype, data), and
  // where a right column's tile lives in shared memory (8 bytes per row).
  int32_t agg;
  int32_t agg_side;
  int32_t agg_dtype;
  int32_t agg_smem_offset;
  const void *agg_col;
} gj_t_nlj;

// An aggregate's running state: integers exactly as i128 (lo, hi), floats as f64; `count` pairs;
// `has` = a value was seen (SUM/MIN/MAX over no pairs is NULL).
typedef struct gj_t_acc {
  uint64_t ilo;
  int64_t ihi;
  double f;
  uint64_t count;
  uint32_t has;
  uint32_t overflow;  // 1: an integer SUM left i128
} gj_t_acc;

// Evaluates code[code_start ..+ code_len] for each row of one side (0 left, 1 right) and stores
// the result as out_kind (I32..I128, FLAGS or BITS; BITS needs ceil(n / 32) words).
int gj_t_eval_rows(const gj_t_interp *interp, int32_t code_start, int32_t code_len, int32_t side, int64_t n,
                   int32_t out_kind, void *out, gj_t_stream_t stream);

// Count pass over outer blocks [ob_begin, ob_end): counts[l * chunks + c] = matches of left row l
// in right chunk c. right_bits (may be NULL): bit r set (atomicOr) where right row r matches.
int gj_t_nlj_count(const gj_t_nlj *p, int64_t ob_begin, int64_t ob_end, uint32_t *counts, uint32_t *right_bits,
                   gj_t_stream_t stream);

// Per left row: left_matched[l] = any count of l non-zero; if keep_unmatched and none, sets
// counts[l * chunks] = 1 (the row's (l, NONE) output slot).
int gj_t_nlj_fixup(uint32_t *counts, int64_t n_left, int32_t chunks, int32_t keep_unmatched, uint8_t *left_matched,
                   gj_t_stream_t stream);

// offsets[n] = offsets[n - 1] + counts[n - 1] (n >= 1): the total after an exclusive scan.
int gj_t_finish_scan(uint64_t *offsets, const uint32_t *counts, int64_t n, gj_t_stream_t stream);

// out[l] = offsets[l * chunks] for l = 0 ..= n_left.
int gj_t_row_offsets(const uint64_t *offsets, int64_t n_left, int32_t chunks, uint64_t *out, gj_t_stream_t stream);

// Write pass for left rows [l_begin, l_end): the pairs of (l, c) at offsets[l * chunks + c] -
// out_base, right rows ascending; with keep_unmatched, (l, NONE) for rows with !left_matched[l].
int gj_t_nlj_write(const gj_t_nlj *p, int64_t l_begin, int64_t l_end, const uint64_t *offsets, uint64_t out_base,
                   const uint8_t *left_matched, int32_t keep_unmatched, uint32_t *out_l, uint32_t *out_r,
                   gj_t_stream_t stream);

// Aggregate pass: partials[l * chunks + c] = the aggregate of (l, chunk c).
int gj_t_nlj_agg(const gj_t_nlj *p, gj_t_acc *partials, gj_t_stream_t stream);

// out[l] = the partials of row l merged in chunk order.
int gj_t_agg_rows(const gj_t_acc *partials, int64_t n_left, int32_t chunks, int32_t agg, int32_t is_float,
                  gj_t_acc *out, gj_t_stream_t stream);

// Ordered reduction of n accumulators into `blocks` (<= 1024) accumulators, one per block.
int gj_t_agg_reduce(const gj_t_acc *in, int64_t n, int32_t agg, int32_t is_float, int32_t blocks, gj_t_acc *out,
                    gj_t_stream_t stream);

// keep[i] = the boolean program code[code_start ..+ code_len] on the pair (a[i], b[i]).
int gj_t_filter_pairs(const gj_t_interp *interp, int32_t code_start, int32_t code_len, const uint32_t *a,
                      const uint32_t *b, int64_t n, uint8_t *keep, gj_t_stream_t stream);

// flags[i] = bit i of bits, for i < n.
int gj_t_bits_to_flags(const uint32_t *bits, int64_t n, uint8_t *flags, gj_t_stream_t stream);

#ifdef __cplusplus
}
#endif
