//! Memory plan per join (issue 10): the peak device memory of every join algorithm as a formula
//! of its input and output sizes, and [`peak_bytes`] / [`working_bytes`] to evaluate it.
//!
//! Every device allocation of gpujoin comes from the device's stream-ordered pool
//! ([`gpujoin_device::Stream::alloc`], CUB's temporary storage included), so the peak of a join is
//! the pool's high-water mark ([`gpujoin_device::Device::peak_memory`]) while it runs. It is made of
//! - the **inputs**, resident before the call: [`JoinSizes::input_bytes`] (key columns, their
//!   validity bitmaps, the payload columns named in the sizes);
//! - the **working memory** of the call, its output included: [`working_bytes`], the formulas
//!   below plus a fixed allowance for small buffers and CUB's scratch
//!   (`16 MiB + N/4 + O/64` bytes).
//!
//! [`peak_bytes`] is their sum: what the device must hold for the join to run. The formulas
//! follow the allocation sequence of each algorithm (what is alive at the same time) and take the
//! largest phase; where the path depends on the data (skewed merge tiles, keys whose low bits
//! crowd one partition, rows with NULL or NaN keys), the worst path is assumed, so the bound
//! holds for any data of the given sizes.
//!
//! # Formulas
//!
//! Working bytes (without the allowance) of an **inner join on one non-null integer key column
//! of `k` bytes**. `L`, `R`: rows of the left and right side; `N = L + R`; `S = min(L, R)`,
//! `M = max(L, R)` (the hash joins build on the smaller side and probe with the larger);
//! `O`: output rows; `p_l`, `p_r`: payload bytes per row of a side (wide joins). A CUB radix sort
//! of `n` items of `b` bytes (key and value) needs `n·b` bytes of alternate buffers when it makes
//! more than one 8-bit pass: every sort below does, except the partitioned hash join's
//! partitioning, which makes one pass while `S ≤ 2^18` (`x = 0`, else `x = 1`). The sort-merge,
//! interleave and chunked joins sort in place (`sort_pairs_owned`): the alternate buffers are all
//! they add.
//!
//! | algorithm | `k = 4` | `k = 8` |
//! |---|---|---|
//! | [`sorted_merge_join`](crate::sorted_merge_join) (sorted keys) | `max(20L, 16L + 8O)` | same |
//! | [`sort_merge_join`](crate::sort_merge_join) | `max(18L, 8L + 18R, 8N + 20L, 8N + 16L + 8O)` | `max(24L, 12L + 24R, 12N + 20L, 12N + 16L + 8O)` |
//! | [`sort_merge_join_size`](crate::sort_merge_join_size) | `max(18L, 8L + 18R, 8N + 20L)` | `max(24L, 12L + 24R, 12N + 20L)` |
//! | [`interleave_join`](crate::interleave_join) | `max(36N, 28N + 8O)` | `max(46N, 38N + 8O, 10N + 17O)` (64 key bits exceed its 63-bit budget: hashed, verified) |
//! | [`non_partitioned_hash_join`](crate::non_partitioned_hash_join) (NPHJ) | `max(20S, 12S + 8M + 16T, 12S + 16M + 8O)` | `max(28S, 16S + 8M + 16T, 16S + 16M + 8O)` |
//! | [`partitioned_hash_join`](crate::partitioned_hash_join) (maps) | `4N + max((12 + 8x)L, 8L + (12 + 8x)R, 8N + 8·max(O, M)) + W` | `8N + max((16 + 12x)L, 12L + (16 + 12x)R, 12N + 8·max(O, M)) + W` |
//! | [`partitioned_hash_join_with_payloads`](crate::partitioned_hash_join_with_payloads), PHJ-UM | the row above and `kN + 8·max(O, M) + O(p_l + p_r)` | same |
//! | PHJ-OM, one 4-byte payload column a side (more: see below) | `4N + max(8L(1 + x), 8L + 8R(1 + x), 8N + 8·max(O, M)) + W` | `8N + max(12L(1 + x), 12L + 12R(1 + x), 12N + 8·max(O, M)) + W` |
//! | [`wide::join`](crate::wide::join) SMJ-UM | `max(20L, 8L + 20R, 8N + 20L, 8N + 16L + 8O, 4N + 12O, 8O + O(p_l + p_r))` | `max(28L, 12L + 28R, 12N + 20L, 12N + 16L + 8O, 4N + 12O, 8O + O(p_l + p_r))` |
//! | `wide::join` SMJ-OM, first payload column `w` bytes a side | `max(2(4 + w)M, (4 + w)M + 2(4 + w)S, (4 + w)N + 20L, (4 + w)N + 16L + 8O, wN + 8O + O(p_l + p_r) + D)` | the same with `8` for `4` |
//! | `wide::join` PHJ-UM, PHJ-OM | as `partitioned_hash_join_with_payloads` | |
//! | `wide::join` NPHJ | `non_partitioned_hash_join`'s and `8O + O(p_l + p_r)` | |
//! | [`indexed_nested_loop`](crate::indexed_nested_loop) (numeric), `I` indexed rows, `P` probe rows | `max(24I, 8I + 20P + 8O)` | `max(36I, 12I + 20P + 8O)` |
//! | [`theta::theta_join`](crate::theta::theta_join), sorted path (one inequality or band) | `max(24R, 8R + 16L, 4R + 16L + 8O)` | `max(36R, 12R + 16L, 4R + 16L + 8O)` |
//! | `theta_join`, nested loop | `12E + 9L + R/8 + 8O` | same |
//! | `theta_join`, mixed (equality + residual), `P` rows of the equality join | `max(hash_join's with O := P, 17P)` | same |
//! | [`chunked::EquiChunkSource`](crate::chunked::EquiChunkSource) and one chunk of `C` rows | `max(30N, 4N + 32L, 4N + 28L + 8C)` | same |
//! | [`Join::aggregate`](crate::plan::Join::aggregate) of an equi-join, a column of a side of `A` rows (the other `B`; no output) | `max(4A + 30N, 16A + 4N, 8A + 4N + 8B)` | `max(4A + 30N, 20A + 8N, 8A + 8N + 16B)` |
//!
//! `wide::join` with one 8-byte integer key column (`i64`, `u64`) takes the larger of its `k = 8`
//! formula and `4N` plus its `k = 4` formula: where both sides' keys span less than 2^32 it joins
//! 32-bit offsets from the smallest key (key compression), `4N` bytes alive throughout.
//!
//! The aggregate ([`PeakAlgorithm::EquiAggregate`]) writes no pairs: the match counts of the
//! aggregated side's rows (`4A`, alive throughout), its rows' scalar keys sorted with their row
//! ids (`8A` with the counts, CUB's alternate buffers `8A`), the other side's keys sorted alone
//! (`4B` and a sorted copy with its alternate buffer), the two bounds (`8A`); then the column
//! folded by weight (`4A` where it is widened to 4 bytes, its validity repacked). Its COUNT of
//! rows is [`sort_merge_join_size`](crate::sort_merge_join_size). The allowance takes no `O/64`.
//!
//! where `T = next_power_of_two(2S)` (NPHJ's table slots, 16 bytes each; its unique-build table,
//! `T` slots of 8 bytes (`k = 4`) or 16, probed into `5M` bytes of hits, stays under the sorted
//! path's phases, so the formula is the sorted path's); `W = 48·I + 48·2^b`
//! (the PHJ's work items `I ≤ 2^b + S/2048 + M/16384 + (S/2048 + 1)(M/16384 + 1)` and `2^b`
//! partitions, `b = ⌈log2(S/1024)⌉` clamped to 1..24: well under a byte a row); `E = L·chunks`
//! (the nested loop's per-left-row, per-chunk counts; `chunks ≤ min(⌈4096/⌈L/256⌉⌉, ⌈R/32⌉,
//! max(1, 2^27/L))`, at least 1); `D` the scratch of SMJ-OM's later payload columns
//! (`2(k + w)n` for a side of `n < 2^18` rows, `1.25(k + w)n` from `2^18` rows on, with `w` the
//! column's width; 0 with one column a side).
//!
//! The partitioned hash join counts `kN` of mixed keys throughout: keys whose low bits crowd one
//! partition are mixed and partitioned again, which the data decide. The merge terms
//! (`20L`, `16L + 8O`) are the general merge path's; the fused one, taken when no merge tile's
//! output is too large, needs less. Its one pass allocates maps for a bound of the output before
//! it runs (`max(L, R)` rows for inner joins, `L + R` for outer ones), only where that bound is
//! at most `2L`: `16L` bytes, within the same terms.
//!
//! PHJ-OM ([`Materialization::Clustered`]) with one 4-byte payload column a side: the transform
//! partitions the keys with that column (`(k + 4)` bytes a row and the sort's alternate buffers),
//! the match writes both first columns (`4·max(O, M)` each, no maps), so
//! `kN + max((k + 4)L + x(k + 4)L, (k + 4)N + x(k + 4)R, (k + 4)N + 8·max(O, M)) + W`. More
//! columns add the maps of the sides with later columns (`4·max(O, M)` each), their outputs and
//! one column's chunked transform (the column, `1/8` of the side's keys and values, and the
//! sort's buffers); an 8-byte first column partitions the keys alone and transforms every column
//! at materialization. [`working_bytes`] evaluates all of it.
//!
//! # Other keys, other join types
//!
//! [`working_bytes`] covers every case the entry points take:
//! - **Key images.** Keys other than one non-null integer column first get images, `10 + 8c`
//!   bytes a row for `c` key columns (the sort-merge, interleave and chunked joins image every
//!   key): the sort-merge join and its size one side at a time, keeping only the side's derived
//!   keys; the others both sides at once. Exact plans (key bits within 64; 63 for the interleave
//!   join) sort 4-byte derived keys up to 32 bits and 8-byte ones beyond; wider composite keys
//!   are hashed and their candidate pairs verified against the images (`17P` while the
//!   verification runs), or ranked exactly (the chunked join).
//! - **NULL and NaN.** Nullable or floating-point keys may have rows that match nothing; these
//!   are set aside (row lists of `4N`, gathered keys) and the join runs on the rest; the bound
//!   takes the larger of both paths. With nullable keys both null equalities are assumed
//!   possible (the null bit per column can make an exact plan hashed).
//! - **Join types.** Outer joins append the unmatched rows (`16O + 9U` where the algorithm builds
//!   them from inner pairs, `U` the rows of the sides kept); semi and anti joins return one map.
//!   Some algorithms build every matching pair first even for semi and anti joins (NPHJ; the
//!   sort-merge join on hashed or NULL-filtered keys): they take [`JoinSizes::pair_rows`].
//!
//! ```
//! use gpujoin_join::memory::{peak_bytes, working_bytes, JoinSizes, KeyShape, PeakAlgorithm};
//! // 2^20 x 2^20 unique 4-byte keys, 2^20 output rows.
//! let sizes = JoinSizes::inner(1 << 20, 1 << 20, KeyShape::integer(4), 1 << 20);
//! assert_eq!(sizes.input_bytes(), 8 << 20);
//! // sorted_merge_join: max(20L, 16L + 8O) = 24 MiB, plus 16 MiB + N/4 + O/64.
//! let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
//! assert_eq!(mib(working_bytes(PeakAlgorithm::SortedMergeJoin, &sizes)), 24.0 + 16.0 + 0.5 + 1.0 / 64.0);
//! assert_eq!(peak_bytes(PeakAlgorithm::SortedMergeJoin, &sizes), sizes.input_bytes() + working_bytes(PeakAlgorithm::SortedMergeJoin, &sizes));
//! // sort_merge_join: max(18L, 8L + 18R, 8N + 20L, 8N + 16L + 8O) = 40 MiB.
//! assert_eq!(mib(working_bytes(PeakAlgorithm::SortMergeJoin, &sizes)), 40.0 + 16.0 + 0.5 + 1.0 / 64.0);
//! ```

use crate::hash_join::Materialization;
use crate::table::{ColumnView, TableView};
use crate::maps::Side;
use crate::types::JoinType;
use crate::wide::{Algorithm, Output};

/// The fixed part of the allowance [`working_bytes`] adds to every formula: small buffers
/// (counters, pointer tables, row counts read back), CUB's bookkeeping and allocation rounding.
pub const FIXED_ALLOWANCE: u64 = 16 << 20;

/// The key columns of a join, as far as memory goes.
///
/// ```
/// use gpujoin_join::memory::KeyShape;
/// let k = KeyShape::integer(8);
/// assert_eq!((k.columns, k.bytes, k.floats, k.nullable), (1, 8, false, false));
/// // Two nullable 4-byte columns, one of them f32.
/// let c = KeyShape { columns: 2, bytes: 8, floats: true, nullable: true };
/// assert_ne!(c, k);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyShape {
    /// Key columns (1 to 4).
    pub columns: u32,
    /// Bytes of one row's key columns together (4 or 8 per column).
    pub bytes: u32,
    /// Some key column is `f32` or `f64` (NaN may match nothing; no integer fast path).
    pub floats: bool,
    /// Some key column has a validity bitmap (NULL may match nothing).
    pub nullable: bool,
}

impl KeyShape {
    /// One non-null integer key column of `bytes` (4 or 8) bytes.
    pub const fn integer(bytes: u32) -> KeyShape {
        KeyShape { columns: 1, bytes, floats: false, nullable: false }
    }

    /// The shape of `keys` (either side: both sides of a join have the same column types).
    pub fn of(keys: &TableView<'_>) -> KeyShape {
        let cols = keys.columns();
        KeyShape {
            columns: cols.len() as u32,
            bytes: cols.iter().map(|c| crate::keys::width(c) as u32).sum(),
            floats: cols.iter().any(|c| c.data_type().is_float()),
            nullable: cols.iter().any(|c| c.validity().is_some()),
        }
    }

    /// One non-null integer column: the keys as they are, no images (hash joins, wide SMJ).
    fn plain(&self) -> bool {
        self.columns == 1 && !self.floats && !self.nullable
    }

    /// Rows may be set aside as matching nothing (NULL, NaN).
    fn may_filter(&self) -> bool {
        self.floats || self.nullable
    }
}

/// The payload columns of one side (4- or 8-byte columns).
///
/// ```
/// use gpujoin_join::memory::Payloads;
/// let p = Payloads::of_widths(&[4, 8, 8]);
/// assert_eq!((p.columns(), p.bytes_per_row(), p.first_width(), p.widest()), (3, 20, 4, 8));
/// assert_eq!(Payloads::NONE.bytes_per_row(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Payloads {
    columns: u32,
    bytes: u32,
    first: u32,
    widest: u32,
}

impl Payloads {
    /// No payload column.
    pub const NONE: Payloads = Payloads { columns: 0, bytes: 0, first: 0, widest: 0 };

    /// Columns of the given widths in bytes, in order.
    pub fn of_widths(widths: &[u32]) -> Payloads {
        Payloads {
            columns: widths.len() as u32,
            bytes: widths.iter().sum(),
            first: widths.first().copied().unwrap_or(0),
            widest: widths.iter().copied().max().unwrap_or(0),
        }
    }

    /// The payload columns of a side.
    pub fn of(columns: &[ColumnView<'_>]) -> Payloads {
        let widths: Vec<u32> = columns.iter().map(|c| crate::keys::width(c) as u32).collect();
        Payloads::of_widths(&widths)
    }

    /// Number of columns.
    pub fn columns(&self) -> u32 {
        self.columns
    }

    /// Bytes of one row of all columns.
    pub fn bytes_per_row(&self) -> u32 {
        self.bytes
    }

    /// Width of the first column (0 without columns).
    pub fn first_width(&self) -> u32 {
        self.first
    }

    /// Width of the widest column (0 without columns).
    pub fn widest(&self) -> u32 {
        self.widest
    }
}

/// The sizes a join's peak depends on.
///
/// ```
/// use gpujoin_join::memory::{JoinSizes, KeyShape, Payloads};
/// use gpujoin_join::JoinType;
/// // A left join of 2^18 primary keys with 2^21 foreign keys, 2^21 pairs, every left row matched.
/// let s = JoinSizes::inner(1 << 18, 1 << 21, KeyShape::integer(4), 1 << 21)
///     .with_join_type(JoinType::Left, 1 << 21, 1 << 21)
///     .with_payloads(Payloads::of_widths(&[8]), Payloads::of_widths(&[4, 4]));
/// assert_eq!(s.input_bytes(), (4 + 8) * (1 << 18) + (4 + 8) * (1 << 21));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JoinSizes {
    /// Rows of the left side.
    pub left_rows: u64,
    /// Rows of the right side.
    pub right_rows: u64,
    /// The key columns (for [`PeakAlgorithm::IndexedNestedLoop`] and the theta joins: the
    /// compared columns of one side).
    pub keys: KeyShape,
    /// Payload columns of the left side (wide joins, PHJ with payloads).
    pub left_payloads: Payloads,
    /// Payload columns of the right side.
    pub right_payloads: Payloads,
    /// The join type.
    pub join_type: JoinType,
    /// Rows the join returns ([`PeakAlgorithm::ChunkedEqui`]: rows of the chunk produced).
    pub output_rows: u64,
    /// Matching pairs (the rows of the inner join on the same keys; for the mixed theta join, of
    /// the equality conjuncts alone). Equal to `output_rows` for inner joins.
    pub pair_rows: u64,
}

impl JoinSizes {
    /// An inner join of `left_rows` and `right_rows` rows returning `output_rows` rows, without
    /// payload columns.
    pub fn inner(left_rows: u64, right_rows: u64, keys: KeyShape, output_rows: u64) -> JoinSizes {
        JoinSizes {
            left_rows,
            right_rows,
            keys,
            left_payloads: Payloads::NONE,
            right_payloads: Payloads::NONE,
            join_type: JoinType::Inner,
            output_rows,
            pair_rows: output_rows,
        }
    }

    /// The same sizes for another join type returning `output_rows` rows, of `pair_rows`
    /// matching pairs.
    pub fn with_join_type(self, join_type: JoinType, output_rows: u64, pair_rows: u64) -> JoinSizes {
        JoinSizes { join_type, output_rows, pair_rows, ..self }
    }

    /// The same sizes with payload columns.
    pub fn with_payloads(self, left: Payloads, right: Payloads) -> JoinSizes {
        JoinSizes { left_payloads: left, right_payloads: right, ..self }
    }

    /// Bytes of the inputs: both sides' key columns (and their validity bitmaps) and payloads.
    pub fn input_bytes(&self) -> u64 {
        let side = |rows: u64, p: &Payloads| -> u64 {
            let validity = if self.keys.nullable { self.keys.columns as u64 * 4 * rows.div_ceil(32) } else { 0 };
            rows * (self.keys.bytes as u64 + p.bytes as u64) + validity
        };
        side(self.left_rows, &self.left_payloads) + side(self.right_rows, &self.right_payloads)
    }
}

/// The theta join paths of [`theta::choose_path`](crate::theta::choose_path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThetaKind {
    /// One inequality or a band: sort the right side, sorted search, prefix sums.
    Sorted,
    /// A general predicate on plain columns (computed expressions add their width per row).
    NestedLoop,
    /// Equality conjuncts by hash join, the rest as a filter.
    Mixed,
}

/// The algorithm (entry point) whose peak is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeakAlgorithm {
    /// [`crate::sorted_merge_join`]: keys already sorted.
    SortedMergeJoin,
    /// [`crate::sort_merge_join`].
    SortMergeJoin,
    /// [`crate::sort_merge_join_size`].
    SortMergeJoinSize,
    /// [`crate::interleave_join`].
    InterleaveJoin,
    /// [`crate::non_partitioned_hash_join`] / [`crate::non_partitioned_hash_join_with_stats`] (NPHJ, maps).
    HashJoin,
    /// [`crate::partitioned_hash_join`] (maps; the row ids travel through the partitioning).
    PartitionedHashJoin,
    /// [`crate::partitioned_hash_join_with_payloads`].
    PartitionedHashJoinWithPayloads(Materialization),
    /// [`crate::wide::join`] with an algorithm and an output (`Auto`: the largest of the five and
    /// the sample).
    Wide(Algorithm, Output),
    /// [`crate::indexed_nested_loop::indexed_nested_loop_join`] on numeric columns: the index
    /// built on `index` side, probed by the other ([`crate::indexed_nested_loop::SortedIndex`]
    /// build and join).
    IndexedNestedLoop { index: Side },
    /// [`crate::theta::theta_join`] on the given path.
    Theta(ThetaKind),
    /// [`crate::chunked::EquiChunkSource::new`] and the production of one chunk of
    /// [`JoinSizes::output_rows`] rows (the source stays alive while chunks are produced).
    ChunkedEqui,
    /// [`crate::plan::Join::aggregate`] of an equi-join without a filter (SUM/MIN/MAX, or COUNT
    /// of a column) of a column of `side`: match counts, no pairs; [`JoinSizes::output_rows`]
    /// does not count.
    EquiAggregate { side: Side },
}

/// Bytes of device memory `algorithm` needs at its peak on `sizes`: the inputs
/// ([`JoinSizes::input_bytes`]) and its working memory ([`working_bytes`]).
pub fn peak_bytes(algorithm: PeakAlgorithm, sizes: &JoinSizes) -> u64 {
    sizes.input_bytes().saturating_add(working_bytes(algorithm, sizes))
}

/// Bytes `algorithm` allocates at its peak on `sizes`, its output included and its inputs not:
/// the formula of the [module docs](self) and the allowance `16 MiB + N/4 + O/64`.
pub fn working_bytes(algorithm: PeakAlgorithm, sizes: &JoinSizes) -> u64 {
    let c = Ctx::of(algorithm, sizes);
    let v = formula(algorithm, &c) + allowance(&c);
    v.min(u64::MAX as u128) as u64
}

// ---------------------------------------------------------------------------------------------
// The formulas, in bytes (u128: no overflow for any row count).

type B = u128;

fn allowance(c: &Ctx) -> B {
    FIXED_ALLOWANCE as B + c.n / 4 + c.o / 64
}

fn formula(algorithm: PeakAlgorithm, c: &Ctx) -> B {
    match algorithm {
        PeakAlgorithm::SortedMergeJoin => merge(c.jt, c.l, c.r, c.o),
        PeakAlgorithm::SortMergeJoin => sort_merge(c),
        PeakAlgorithm::SortMergeJoinSize => sort_merge_size(c),
        PeakAlgorithm::InterleaveJoin => interleave(c),
        PeakAlgorithm::HashJoin => nphj(c, false),
        PeakAlgorithm::PartitionedHashJoin => phj(c, false, Materialization::Unclustered),
        PeakAlgorithm::PartitionedHashJoinWithPayloads(mode) => phj(c, true, mode),
        PeakAlgorithm::Wide(a, out) => wide_compressible(c, a, out),
        PeakAlgorithm::IndexedNestedLoop { index } => inlj(c, index),
        PeakAlgorithm::Theta(ThetaKind::Sorted) => theta_sorted(c),
        PeakAlgorithm::Theta(ThetaKind::NestedLoop) => theta_nested_loop(c),
        PeakAlgorithm::Theta(ThetaKind::Mixed) => theta_mixed(c),
        PeakAlgorithm::ChunkedEqui => chunked_equi(c),
        PeakAlgorithm::EquiAggregate { side } => equi_aggregate(c, side),
    }
}

/// The sizes as numbers.
#[derive(Clone, Copy)]
struct Ctx {
    l: B,
    r: B,
    n: B,
    /// The smaller (build) side.
    s: B,
    /// The larger (probe) side.
    m: B,
    o: B,
    p: B,
    /// Key bytes a row.
    k: B,
    /// Image bytes a row: 10 + 8 per key column.
    i: B,
    keys: KeyShape,
    jt: JoinType,
    lp: Payloads,
    rp: Payloads,
}

impl Ctx {
    /// The sizes for `algorithm` (the aggregate has no output rows).
    fn of(algorithm: PeakAlgorithm, s: &JoinSizes) -> Ctx {
        let mut c = Ctx::new(s);
        if matches!(algorithm, PeakAlgorithm::EquiAggregate { .. }) {
            c.o = 0;
        }
        c
    }

    fn new(s: &JoinSizes) -> Ctx {
        let (l, r) = (s.left_rows as B, s.right_rows as B);
        Ctx {
            l,
            r,
            n: l + r,
            s: l.min(r),
            m: l.max(r),
            o: s.output_rows as B,
            p: s.pair_rows as B,
            k: s.keys.bytes as B,
            i: 10 + 8 * s.keys.columns as B,
            keys: s.keys,
            jt: s.join_type,
            lp: s.left_payloads,
            rp: s.right_payloads,
        }
    }

    /// Payload bytes a row of the sides the join type keeps.
    fn payload_bytes(&self) -> B {
        let l = if self.jt.has_left_map() { self.lp.bytes as B } else { 0 };
        let r = if self.jt.has_right_map() { self.rp.bytes as B } else { 0 };
        l + r
    }

    /// Validity bitmaps of the output's nullable sides (outer joins).
    fn out_validity(&self) -> B {
        let sides = self.jt.keeps_unmatched_left() as B + self.jt.keeps_unmatched_right() as B;
        sides * (self.o / 8 + 8)
    }

    /// Rows of the sides whose unmatched rows the join keeps.
    fn unmatched_sides(&self) -> B {
        let mut u = 0;
        if self.jt.keeps_unmatched_left() {
            u += self.l;
        }
        if self.jt.keeps_unmatched_right() {
            u += self.r;
        }
        u
    }

    /// The rows of the one side a semi or anti join returns.
    fn semi_side(&self) -> B {
        if self.jt.has_left_map() {
            self.l
        } else {
            self.r
        }
    }

    fn semi_anti(&self) -> bool {
        !self.jt.has_left_map() || !self.jt.has_right_map()
    }

    /// Runtime row filtering (NULL/NaN set aside): both when the keys allow it.
    fn filters(&self) -> &'static [bool] {
        if self.keys.may_filter() {
            &[false, true]
        } else {
            &[false]
        }
    }

    /// The key plans a join may make within `budget` bits (both null equalities when nullable).
    fn plans(&self, budget: u32) -> Vec<Plan> {
        let base = 8 * self.keys.bytes;
        let plan = |bits: u32| Plan { exact: bits <= budget, bits: if bits <= budget { bits } else { 64 } };
        let mut v = vec![plan(base)];
        if self.keys.nullable {
            v.push(plan(base + self.keys.columns));
        }
        v
    }
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    exact: bool,
    /// Significant bits of the derived key (64 when hashed).
    bits: u32,
}

fn max(v: &[B]) -> B {
    v.iter().copied().max().unwrap_or(0)
}

/// CUB's alternate buffers for a radix sort of `n` items of `bytes` bytes (keys and values) on
/// `bits` bits: none in one 8-bit pass.
fn alt(n: B, bytes: B, bits: u32) -> B {
    if bits > 8 {
        n * bytes
    } else {
        0
    }
}

/// Any join type from `p` verified inner pairs (`common::from_inner_pairs`), the pairs included.
fn from_pairs(c: &Ctx, p: B) -> B {
    match c.jt {
        JoinType::Inner => 8 * p,
        JoinType::LeftSemi | JoinType::LeftAnti => 8 * p + 5 * c.l,
        JoinType::RightSemi | JoinType::RightAnti => 8 * p + 5 * c.r,
        JoinType::Left | JoinType::Right | JoinType::Full => 16 * c.o.max(p) + 9 * c.unmatched_sides(),
    }
}

/// Hashed candidates: the verification (flags and the kept pairs beside the candidates, which
/// stay alive) and then any join type.
fn verified(c: &Ctx, p: B) -> B {
    8 * p + max(&[9 * p, from_pairs(c, p)])
}

/// The merge of two sorted sides of `a` and `b` rows into `o` rows of type `jt` (the general path:
/// bounds, counts, offsets, maps; unmatched right rows for right and full joins).
fn merge(jt: JoinType, a: B, b: B, o: B) -> B {
    match jt {
        JoinType::LeftSemi | JoinType::LeftAnti => 5 * a,
        JoinType::RightSemi | JoinType::RightAnti => 5 * b,
        _ => {
            let ro = jt.keeps_unmatched_right() as B;
            max(&[20 * a + ro * b, 16 * a + 5 * ro * b + 8 * o])
        }
    }
}

/// `sort_merge_join`.
fn sort_merge(c: &Ctx) -> B {
    let mut worst = 0;
    for plan in c.plans(64) {
        for &f in c.filters() {
            worst = worst.max(sort_merge_plan(c, plan, f));
        }
    }
    worst
}

fn sort_merge_plan(c: &Ctx, plan: Plan, f: bool) -> B {
    let (l, r, n) = (c.l, c.r, c.n);
    if plan.exact {
        // One side at a time (`exact_side`), then the merge of the sorted sides.
        let w: B = if plan.bits <= 32 { 4 } else { 8 };
        let (pl, rl) = exact_side(l, c.i, f, w, plan.bits);
        let (pr, _) = exact_side(r, c.i, f, w, plan.bits);
        let matched = if f {
            // Rows that match nothing: inner pairs, the sorted sides dropped, then the join type.
            max(&[(w + 4) * n + merge(JoinType::Inner, l, r, c.p), from_pairs(c, c.p)])
        } else {
            (w + 4) * n + merge(c.jt, l, r, c.o)
        };
        return max(&[pl, rl + pr, matched]);
    }
    // Hashed keys: both sides' images stay for the verification; the hashes of one side at a
    // time (copied or gathered) are narrowed and sorted with row ids in place.
    let rows = if f { 4 * n } else { 0 };
    let side = |x: B| if f { max(&[12 * x, 4 * x + alt(x, 8, 32)]) } else { max(&[12 * x, 8 * x + alt(x, 8, 32)]) };
    let kept = |x: B| if f { 4 * x } else { 8 * x };
    max(&[
        c.i * n + rows + side(l),
        c.i * n + rows + kept(l) + side(r),
        c.i * n + rows + kept(l) + kept(r) + merge(JoinType::Inner, l, r, c.p),
        c.i * n + verified(c, c.p),
    ])
}

/// One side of the sort-merge join on exact keys (`sort_merge::exact_side`): its images; the
/// derived keys alone (gathered to the rows that can match when some cannot); narrowed to
/// `w = 4` bytes or kept at 8; sorted with row ids in place (`sort_pairs_owned`: one more key
/// and row buffer). Returns the peak and what stays: the sorted keys and rows.
fn exact_side(x: B, i: B, filtered: bool, w: B, bits: u32) -> (B, B) {
    let sort = alt(x, w + 4, bits);
    let body = match (filtered, w == 4) {
        (false, true) => max(&[12 * x, 8 * x + sort]),
        (false, false) => 12 * x + sort,
        (true, true) => max(&[24 * x, 16 * x + sort]),
        (true, false) => 20 * x + sort,
    };
    (max(&[i * x, body]), (w + 4) * x)
}

/// `sort_merge_join_size`.
fn sort_merge_size(c: &Ctx) -> B {
    let (l, r, n) = (c.l, c.r, c.n);
    let mut worst = 0;
    for plan in c.plans(64) {
        for &f in c.filters() {
            if !plan.exact {
                worst = worst.max(sort_merge_plan(c, plan, f));
                continue;
            }
            // Both sides sorted as for the join, then searches and counts on the sorted keys.
            let w: B = if plan.bits <= 32 { 4 } else { 8 };
            let (pl, rl) = exact_side(l, c.i, f, w, plan.bits);
            let (pr, _) = exact_side(r, c.i, f, w, plan.bits);
            worst = worst.max(max(&[pl, rl + pr, (w + 4) * n + max(&[9 * l + r, 4 * l + 5 * r, 20 * l])]));
        }
    }
    worst
}

/// `interleave_join`.
fn interleave(c: &Ctx) -> B {
    let n = c.n;
    let mut worst = 0;
    for plan in c.plans(63) {
        let key_bits = if plan.exact { plan.bits } else { 63 };
        // The concatenation (taking the inputs), its in-place sort with ids, run-length
        // encoding, run starts; counts and offsets of the runs; the maps.
        let runs = |o: B| max(&[16 * n, 12 * n + alt(n, 12, key_bits + 1), 28 * n, 36 * n, 28 * n + 8 * o]);
        for &f in c.filters() {
            let v = if plan.exact && !f {
                max(&[c.i * n, runs(c.o)])
            } else if f {
                // Row lists and gathered keys; the candidates mapped back to input rows.
                let kept = if plan.exact { 10 * n } else { c.i * n };
                let post = if plan.exact { from_pairs(c, c.p) } else { verified(c, c.p) };
                max(&[c.i * n + 12 * n, kept + 4 * n + runs(c.p), kept + 24 * n + 16 * c.p, kept + post])
            } else {
                // Hashed: the images without the hashes, which go into the concatenation.
                let kept = c.i * n - 8 * n;
                max(&[c.i * n, kept + runs(c.p), kept + verified(c, c.p)])
            };
            worst = worst.max(v);
        }
    }
    worst
}

/// How a hash join prepares its keys.
struct HashPrep {
    /// Peak while preparing.
    peak: B,
    /// Alive for the rest of the join.
    base: B,
    /// Bytes of a prepared key.
    kh: B,
    /// Candidates are verified.
    hashed: bool,
    /// Rows were set aside (kept row lists replace row ids).
    filtered: bool,
}

/// The key preparations a hash join may make; `mix`: the raw keys may be mixed into a copy
/// (PHJ, when their low bits crowd one partition).
fn hash_preps(c: &Ctx, mix: bool) -> Vec<HashPrep> {
    if c.keys.plain() {
        let base = if mix { c.k * c.n } else { 0 };
        return vec![HashPrep { peak: 0, base, kh: c.k, hashed: false, filtered: false }];
    }
    let n = c.n;
    let mut v = Vec::new();
    for plan in c.plans(64) {
        for &f in c.filters() {
            let h: B = if plan.exact && plan.bits <= 32 { 4 } else { 8 };
            let rows = if f { 8 * n } else { 0 };
            let images = if plan.exact { 0 } else { c.i * n };
            v.push(HashPrep { peak: c.i * n + rows + h * n, base: h * n + rows + images, kh: h, hashed: !plan.exact, filtered: f });
        }
    }
    v
}

/// `non_partitioned_hash_join` (NPHJ); `gather`: then the wide join's payload gathers.
fn nphj(c: &Ctx, gather: bool) -> B {
    let (s, m) = (c.s, c.m);
    let t = (2 * s).max(2).next_power_of_two();
    let mut worst = 0;
    for prep in hash_preps(c, false) {
        let kh = prep.kh;
        let ids = if prep.filtered { 0 } else { 4 * s };
        let post = if prep.hashed { verified(c, c.p) } else { from_pairs(c, c.p) };
        let phases = [
            prep.peak,
            prep.base + ids + (kh + 4) * s + alt(s, kh + 4, 8 * kh as u32),
            prep.base + ids + (kh + 4) * s + 5 * s,
            prep.base + ids + (kh + 4) * s + 4 * s + 16 * t,
            prep.base + ids + (kh + 4) * s + 16 * t + 8 * m,
            prep.base + ids + (kh + 4) * s + 16 * m + 8 * c.p,
            prep.base + ids + post,
        ];
        worst = worst.max(max(&phases));
    }
    if gather {
        worst = worst.max(8 * c.o + c.o * c.payload_bytes() + c.out_validity());
    }
    worst
}

/// The partition bits of the PHJ for `build` rows (about 1024 build rows a partition).
fn partition_bits(build: B) -> u32 {
    let parts = build.div_ceil(1024).max(1);
    (B::BITS - (parts - 1).leading_zeros()).clamp(1, 24)
}

/// `partitioned_hash_join` (`payloads` false) and `partitioned_hash_join_with_payloads`.
fn phj(c: &Ctx, payloads: bool, mode: Materialization) -> B {
    let (l, r, s, m, o) = (c.l, c.r, c.s, c.m, c.o);
    let bits = partition_bits(s);
    let parts: B = 1 << bits;
    let items = parts + s / 2048 + m / 16384 + (s / 2048 + 1) * (m / 16384 + 1);
    let work = 48 * items + 48 * parts;
    let alt_p = |x: B, bytes: B| alt(x, bytes, bits);
    let none = Payloads::NONE;
    let lp = if payloads && c.jt.has_left_map() { c.lp } else { none };
    let rp = if payloads && c.jt.has_right_map() { c.rp } else { none };
    let out_cols = if payloads { o * c.payload_bytes() + c.out_validity() } else { 0 };
    let mut worst = 0;
    for prep in hash_preps(c, true) {
        let (kh, f) = (prep.kh, prep.filtered);
        let verifying = prep.hashed;
        let om = mode == Materialization::Clustered && payloads && !verifying;
        let om_maps = om && (lp.first == 8 || rp.first == 8);
        let carry = om && !om_maps;
        // Transform of one side: (peak, retained).
        let transform = |x: B, p: &Payloads| -> (B, B) {
            let w1 = p.first as B;
            if !om {
                let ids = if f { 0 } else { 4 * x };
                (ids + (kh + 4) * x + alt_p(x, kh + 4), (kh + 4) * x)
            } else if carry && w1 > 0 {
                let compact = if f { w1 * x } else { 0 };
                (compact + (kh + w1) * x + alt_p(x, kh + w1), (kh + w1) * x)
            } else {
                (kh * x + alt_p(x, kh), kh * x)
            }
        };
        let (tl, ret_l) = transform(l, &lp);
        let (tr, ret_r) = transform(r, &rp);
        let base = prep.base + work;
        let mut phases = vec![prep.peak, base + tl, base + ret_l + tr];
        let retained = base + ret_l + ret_r;
        let flags = if verifying {
            0
        } else {
            (if c.jt.keeps_unmatched_left() || matches!(c.jt, JoinType::LeftSemi | JoinType::LeftAnti) { l } else { 0 })
                + (if c.jt.keeps_unmatched_right() || matches!(c.jt, JoinType::RightSemi | JoinType::RightAnti) { r } else { 0 })
        };
        if verifying {
            // Candidates (no speculative pass), then verification and any join type, then gathers
            // with the candidates still alive.
            let p = c.p;
            phases.push(retained + 8 * p);
            phases.push(base + verified(c, p));
            if payloads {
                phases.push(base + 8 * p + 8 * o + out_cols);
            }
            worst = worst.max(max(&phases));
            continue;
        }
        if c.semi_anti() {
            let x = c.semi_side();
            let p_side = if c.jt.has_left_map() { &lp } else { &rp };
            phases.push(retained + flags + 9 * x);
            if om {
                let col0 = if carry { p_side.first as B * x } else { 0 };
                phases.push(base + col0 + 4 * x + o * p_side.bytes as B + om_scratch(x, kh, p_side, f, bits) + c.out_validity());
            } else {
                phases.push(base + 4 * x + out_cols);
            }
            worst = worst.max(max(&phases));
            continue;
        }
        let ocap = if c.jt == JoinType::Inner { o.max(m) } else { o };
        let both_wide = lp.columns > 1 && rp.columns > 1;
        let build_left = l < r;
        let full_l = !om || om_maps || lp.columns > 1;
        let full_r = !om || om_maps || rp.columns > 1;
        let fuse_l = carry && lp.columns >= 1 && (!both_wide || !build_left);
        let fuse_r = carry && rp.columns >= 1 && (!both_wide || build_left);
        let maps = (full_l as B + full_r as B) * 4 * ocap;
        let fused = (if fuse_l { lp.first as B } else { 0 } + if fuse_r { rp.first as B } else { 0 }) * ocap;
        let u = c.unmatched_sides();
        phases.push(retained + flags + maps + fused + 9 * u + 4 * m * (u > 0) as B);
        if !om {
            phases.push(base + 8 * ocap + out_cols);
        } else {
            // The transformed first columns of sides whose first column the match did not write;
            // every output column; one later column's chunked transform.
            let col0 = (if carry && !fuse_l { lp.first as B * l } else { 0 }) + (if carry && !fuse_r { rp.first as B * r } else { 0 });
            let rest = (lp.bytes as B - if fuse_l { lp.first as B } else { 0 }) + (rp.bytes as B - if fuse_r { rp.first as B } else { 0 });
            let later = |x: B, p: &Payloads| if (om_maps && p.columns >= 1) || p.columns > 1 { om_scratch(x, kh, p, f, bits) } else { 0 };
            let scratch = later(l, &lp).max(later(r, &rp));
            phases.push(base + col0 + maps + fused + o * rest + scratch + c.out_validity());
        }
        worst = worst.max(max(&phases));
    }
    worst
}

/// PHJ-OM's transform of one later column of a side of `x` rows (`transform_column_chunked`):
/// the column and a chunk of keys and values with the sort's buffers.
fn om_scratch(x: B, kh: B, p: &Payloads, filtered: bool, bits: u32) -> B {
    let w = p.widest as B;
    let chunk = x.min(x.div_ceil(8).max(1 << 16));
    let compact = if filtered { w * chunk } else { 0 };
    w * x + compact + (kh + w) * chunk + alt(chunk, kh + w, bits) + (16 << bits)
}

/// `wide::join`, whose one 8-byte integer key column may be compressed to 32-bit offsets (the
/// data decide: both sides' keys spanning less than 2^32): the larger of the join on the keys as
/// given and `4N` of offsets (alive throughout) with the join on 4-byte keys.
fn wide_compressible(c: &Ctx, a: Algorithm, out: Output) -> B {
    let given = wide(c, a, out);
    if c.keys.columns == 1 && c.keys.bytes == 8 && !c.keys.floats {
        let c4 = Ctx { k: 4, keys: KeyShape { bytes: 4, ..c.keys }, ..*c };
        given.max(4 * c.n + wide(&c4, a, out))
    } else {
        given
    }
}

/// `wide::join` on the keys as given.
fn wide(c: &Ctx, a: Algorithm, out: Output) -> B {
    let maps_only = out == Output::MapsOnly;
    match a {
        Algorithm::Auto => {
            let all = Algorithm::EXPLICIT.iter().map(|&e| wide(c, e, out)).max().unwrap_or(0);
            // The sample: a few KiB for one plain column; otherwise a join of the build side with
            // SAMPLE_ROWS probe keys.
            let sample = if c.keys.plain() {
                0
            } else {
                let r = c.m.min(crate::wide::SAMPLE_ROWS as B);
                let sub = Ctx { l: c.s, r, n: c.s + r, s: c.s.min(r), m: c.s.max(r), o: c.p, jt: JoinType::Inner, ..*c };
                sort_merge(&sub)
            };
            all.max(sample)
        }
        Algorithm::SmjUm => wide_smj(c, false, maps_only),
        Algorithm::SmjOm => wide_smj(c, !maps_only, maps_only),
        Algorithm::PhjUm | Algorithm::PhjOm if maps_only => phj(c, false, Materialization::Unclustered),
        Algorithm::PhjUm => phj(c, true, Materialization::Unclustered),
        Algorithm::PhjOm => phj(c, true, Materialization::Clustered),
        Algorithm::Nphj => nphj(c, !maps_only),
    }
}

/// SMJ-UM and SMJ-OM of the wide joins.
fn wide_smj(c: &Ctx, om: bool, maps_only: bool) -> B {
    let n = c.n;
    let gathers = if maps_only { 0 } else { c.o * c.payload_bytes() + c.out_validity() };
    // The general path (hashed keys, keys that match nothing): sort_merge_join and gathers.
    let general = || max(&[sort_merge(c), 8 * c.o + gathers]);
    // The scalar path: (preparation peak, key buffers alive, sort-key width).
    let mut scalar: Vec<(B, B, B)> = Vec::new();
    let mut worst = 0;
    if c.keys.plain() {
        scalar.push((0, 0, c.k));
    } else {
        for plan in c.plans(64) {
            if plan.exact {
                let w: B = if plan.bits <= 32 { 4 } else { 8 };
                scalar.push((c.i * n + if w == 4 { 4 * n } else { 0 }, w * n, w));
            }
            if !plan.exact || c.keys.may_filter() {
                worst = worst.max(general());
            }
        }
    }
    for (prep, base, w) in scalar {
        let v = if om { smj_om(c, base, w, gathers) } else { smj_um(c, base, w, gathers) };
        worst = worst.max(prep).max(v);
    }
    worst
}

fn smj_um(c: &Ctx, base: B, w: B, gathers: B) -> B {
    let (l, r, n, o) = (c.l, c.r, c.n, c.o);
    let side = |x: B| 4 * x + (w + 4) * x + alt(x, w + 4, 8 * w as u32);
    max(&[
        base + side(l),
        base + (w + 4) * l + side(r),
        base + (w + 4) * n + merge(c.jt, l, r, o),
        base + 4 * n + 12 * o,
        base + 8 * o + gathers,
    ])
}

fn smj_om(c: &Ctx, base: B, w: B, gathers: B) -> B {
    let (l, r, o) = (c.l, c.r, c.o);
    let lp = if c.jt.has_left_map() { c.lp } else { Payloads::NONE };
    let rp = if c.jt.has_right_map() { c.rp } else { Payloads::NONE };
    let (w1l, w1r) = (lp.first as B, rp.first as B);
    let side = |x: B, w1: B| w * x + w1 * x + alt(x, w + w1, 8 * w as u32);
    let (first, second) = if l > r { ((l, w1l), (r, w1r)) } else { ((r, w1r), (l, w1l)) };
    let scratch = |x: B, p: &Payloads| -> B {
        if p.columns <= 1 {
            return 0;
        }
        let wj = p.widest as B;
        if x >= 1 << 18 {
            (wj + w) * x + (w + wj) * x / 4
        } else {
            2 * (w + wj) * x + (w + wj) * x / 4
        }
    };
    max(&[
        base + side(first.0, first.1),
        base + (w + first.1) * first.0 + side(second.0, second.1),
        base + (w + w1l) * l + (w + w1r) * r + merge(c.jt, l, r, o),
        base + w1l * l + w1r * r + 8 * o + gathers + scratch(l, &lp).max(scratch(r, &rp)),
    ])
}

/// `indexed_nested_loop_join` on numeric columns.
fn inlj(c: &Ctx, index: Side) -> B {
    let k = c.k;
    let (ix, pr) = if index == Side::Left { (c.l, c.r) } else { (c.r, c.l) };
    let probe_side = if index == Side::Left { Side::Right } else { Side::Left };
    let build = 2 * (k + 4) * ix + alt(ix, k + 4, 8 * k as u32);
    let idx = (k + 4) * ix;
    let rows_side = match c.jt {
        JoinType::LeftSemi | JoinType::LeftAnti => Some(Side::Left),
        JoinType::RightSemi | JoinType::RightAnti => Some(Side::Right),
        _ => None,
    };
    let join = match rows_side {
        Some(s) if s == probe_side => idx + 5 * pr,
        Some(_) => idx + 4 * pr + 5 * ix,
        None => {
            let (kl, kr) = (c.jt.keeps_unmatched_left(), c.jt.keeps_unmatched_right());
            let keep_index = if probe_side == Side::Left { kr } else { kl };
            idx + 20 * pr + if keep_index { 5 * ix } else { 0 } + 8 * c.o
        }
    };
    max(&[build, join])
}

/// The sorted theta join (one inequality or a band on a key column of `k` bytes).
fn theta_sorted(c: &Ctx) -> B {
    let (l, r, o, k) = (c.l, c.r, c.o, c.k);
    let sort = 2 * (k + 4) * r + alt(r, k + 4, 8 * k as u32);
    let ranges = (k + 4) * r + 16 * l;
    let out = match c.jt {
        JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti => 4 * r + 16 * l + 8 * o,
        _ => max(&[4 * r + 16 * l + 17 * r, 4 * r + 16 * l + 5 * r + 8 * o]),
    };
    max(&[sort, ranges, out])
}

/// The nested-loop theta join on plain columns.
fn theta_nested_loop(c: &Ctx) -> B {
    let (l, r, o) = (c.l, c.r, c.o);
    let outer_blocks = l.div_ceil(256).max(1);
    let want = 4096u128.div_ceil(outer_blocks);
    let max_chunks = r.div_ceil(32).max(1).min(((1u128 << 27) / l.max(1)).max(1));
    let chunks = want.clamp(1, max_chunks);
    let e = l * chunks;
    let prepared = 12 * e + 9 * l + 64 + r / 8;
    prepared
        + match c.jt {
            JoinType::Inner | JoinType::Left => 8 * o,
            JoinType::Right | JoinType::Full => 9 * r + 16 * o,
            JoinType::LeftSemi | JoinType::LeftAnti => 4 * l,
            JoinType::RightSemi | JoinType::RightAnti => 5 * r,
        }
}

/// The mixed theta join: a hash join on the equality conjuncts (`pair_rows` pairs), the residual
/// predicate as a filter, then the join type.
fn theta_mixed(c: &Ctx) -> B {
    let inner = Ctx { o: c.p, jt: JoinType::Inner, ..*c };
    max(&[nphj(&inner, false), 9 * c.p + from_pairs(c, c.p)])
}

/// `EquiChunkSource::new` and one chunk of `output_rows` rows.
fn chunked_equi(c: &Ctx) -> B {
    let (l, r, n, o) = (c.l, c.r, c.n, c.o);
    if c.semi_anti() {
        // Computed whole by sort_merge_join, served from the tail.
        return max(&[sort_merge(c), 4 * c.semi_side() + 4 * o]);
    }
    let ro = c.jt.keeps_unmatched_right() as B;
    let never = if c.jt.keeps_unmatched_left() { 4 * l } else { 0 } + 4 * ro * r;
    let mut worst = 0;
    for plan in c.plans(64) {
        // (peak of the key preparation, keys and rows alive at the sorts, key bytes a row, sort bits)
        let (prep, base, w, bits) = if plan.exact {
            // Images, row lists, gathered derived keys; the images go; narrowed keys.
            let narrow = plan.bits <= 32;
            let w: B = if narrow { 4 } else { 8 };
            let prep = max(&[c.i * n + 4 * n + never + 8 * n, if narrow { 16 * n + never } else { 0 }]);
            (prep, (w + 4) * n + never, w, plan.bits)
        } else {
            // Dense ranks: the rows' images side by side, ids, one column's keys sorted at a time.
            let cols = c.keys.columns as B;
            let prep = c.i * n + 4 * n + never + 4 * n + 8 * cols * n + 12 * n + 16 * n + alt(n, 12, 64);
            (prep, 8 * n + 4 * r + never, 4, 32)
        };
        worst = worst.max(max(&[
            prep,
            base + alt(l, w + 4, bits),
            base + alt(r, w + 4, bits),
            base + 8 * l + ro * r,
            base + 20 * l + 5 * ro * r,
        ]));
    }
    let source = 4 * n + 16 * l + never + 8 * ro * r;
    worst.max(source + max(&[16 * l, 12 * l + 8 * o]))
}

/// `Join::aggregate` of an equi-join over a column of `side` (`a` its rows, `b` the other
/// side's; `plan::aggregate::match_counts`, then the fold): no output.
fn equi_aggregate(c: &Ctx, side: Side) -> B {
    let (a, b) = if side == Side::Left { (c.l, c.r) } else { (c.r, c.l) };
    let n = c.n;
    let mut worst = 0;
    for plan in c.plans(64) {
        // (peak of the key preparation, key bytes a row, sort bits); the counts (4a) throughout.
        let (prep, w, bits) = if plan.exact {
            // Images, row lists and the gathered derived keys of both sides; the images go;
            // narrowed keys.
            let narrow = plan.bits <= 32;
            (max(&[4 * a + c.i * n + 12 * n, if narrow { 8 * a + 12 * n } else { 0 }]), if narrow { 4 } else { 8 }, plan.bits)
        } else {
            // Dense ranks (as the chunked join's).
            let cols = c.keys.columns as B;
            (4 * a + c.i * n + 8 * n + 8 * cols * n + 28 * n + alt(n, 12, 64), 4, 32)
        };
        // Counts, the side's row ids and both sides' keys; the sorts; the other side's sorted
        // copy; the bounds.
        let base = 8 * a + w * n;
        worst = worst.max(max(&[prep, base + alt(a, w + 4, bits), base + w * b + alt(b, w, bits), base + 8 * a]));
    }
    // The fold: counts, the column widened to 4 bytes, its validity repacked.
    worst.max(8 * a + a / 8 + 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: B = 1 << 20;

    fn sizes(l: u64, r: u64, k: u32, o: u64) -> JoinSizes {
        JoinSizes::inner(l, r, KeyShape::integer(k), o)
    }

    /// The formula alone (no allowance).
    fn f(a: PeakAlgorithm, s: &JoinSizes) -> B {
        let c = Ctx::of(a, s);
        working_bytes(a, s) as B - allowance(&c)
    }

    const SHAPES: [(u64, u64, u64); 6] =
        [(1 << 20, 1 << 20, 1 << 20), (1 << 18, 1 << 21, 1 << 21), (1 << 21, 1 << 18, 1 << 21), (1 << 16, 1 << 16, 1 << 24), (3000, 70_000, 5), (1 << 12, 1 << 12, 1 << 12)];

    #[test]
    fn table_rows_match_the_code() {
        for &(l, r, o) in &SHAPES {
            let (lb, rb, ob) = (l as B, r as B, o as B);
            let (n, s, m) = (lb + rb, lb.min(rb), lb.max(rb));
            let t = (2 * s).max(2).next_power_of_two();
            let x: B = (s > 1 << 18) as B;
            for k in [4u32, 8] {
                let sz = sizes(l, r, k, o);
                let kb = k as B;
                let what = format!("L {l} R {r} O {o} k {k}");
                assert_eq!(f(PeakAlgorithm::SortedMergeJoin, &sz), max(&[20 * lb, 16 * lb + 8 * ob]), "{what}");
                let (sw, s1) = if k == 4 { (8, 18) } else { (12, 24) };
                let smj = max(&[s1 * lb, sw * lb + s1 * rb, sw * n + 20 * lb, sw * n + 16 * lb + 8 * ob]);
                assert_eq!(f(PeakAlgorithm::SortMergeJoin, &sz), smj, "{what}");
                assert_eq!(f(PeakAlgorithm::SortMergeJoinSize, &sz), max(&[s1 * lb, sw * lb + s1 * rb, sw * n + 20 * lb]), "{what}");
                let il = if k == 4 { max(&[36 * n, 28 * n + 8 * ob]) } else { max(&[46 * n, 38 * n + 8 * ob, 10 * n + 17 * ob]) };
                assert_eq!(f(PeakAlgorithm::InterleaveJoin, &sz), il, "{what}");
                let nphj = max(&[(2 * kb + 12) * s, (kb + 8) * s + 8 * m + 16 * t, (kb + 8) * s + 16 * m + 8 * ob]);
                assert_eq!(f(PeakAlgorithm::HashJoin, &sz), nphj, "{what}");
                let bits = partition_bits(s);
                let items = (1 << bits) + s / 2048 + m / 16384 + (s / 2048 + 1) * (m / 16384 + 1);
                let w = 48 * items + 48 * (1 << bits);
                let side = |y: B| (kb + 8) * y + x * (kb + 4) * y;
                let phj = kb * n + max(&[side(lb), (kb + 4) * lb + side(rb), (kb + 4) * n + 8 * ob.max(m)]) + w;
                assert_eq!(f(PeakAlgorithm::PartitionedHashJoin, &sz), phj, "{what}");
                let smj_um = max(&[
                    (2 * kb + 12) * lb,
                    (kb + 4) * lb + (2 * kb + 12) * rb,
                    (kb + 4) * n + 20 * lb,
                    (kb + 4) * n + 16 * lb + 8 * ob,
                    4 * n + 12 * ob,
                    8 * ob,
                ]);
                let smj_um_k4 = max(&[20 * lb, 8 * lb + 20 * rb, 8 * n + 20 * lb, 8 * n + 16 * lb + 8 * ob, 4 * n + 12 * ob, 8 * ob]);
                // 8-byte keys may be compressed to 32-bit offsets (4N) and joined as 4-byte keys.
                let smj_um = if k == 8 { smj_um.max(4 * n + smj_um_k4) } else { smj_um };
                assert_eq!(f(PeakAlgorithm::Wide(Algorithm::SmjUm, Output::Relation), &sz), smj_um, "{what}");
                for index in [Side::Left, Side::Right] {
                    let (ix, pr) = if index == Side::Left { (lb, rb) } else { (rb, lb) };
                    assert_eq!(f(PeakAlgorithm::IndexedNestedLoop { index }, &sz), max(&[3 * (kb + 4) * ix, (kb + 4) * ix + 20 * pr + 8 * ob]), "{what}");
                }
                assert_eq!(f(PeakAlgorithm::Theta(ThetaKind::Sorted), &sz), max(&[3 * (kb + 4) * rb, (kb + 4) * rb + 16 * lb, 4 * rb + 16 * lb + 8 * ob]), "{what}");
                let chunked = max(&[30 * n, 4 * n + 32 * lb, 4 * n + 28 * lb + 8 * ob]);
                assert_eq!(f(PeakAlgorithm::ChunkedEqui, &sz), chunked, "{what}");
            }
        }
    }

    #[test]
    fn payloads_add_their_outputs() {
        let base = sizes(1 << 18, 1 << 21, 4, 1 << 21);
        let with = base.with_payloads(Payloads::of_widths(&[4]), Payloads::of_widths(&[4]));
        let (n, o, m) = ((1u128 << 18) + (1 << 21), 1u128 << 21, 1u128 << 21);
        // PHJ-UM: the maps-only phases, and kN + 8 max(O, M) + O (p_l + p_r).
        let bits = partition_bits(1 << 18);
        assert_eq!(bits, 8);
        let items = (1u128 << bits) + (1 << 18) / 2048 + (1 << 21) / 16384 + ((1 << 18) / 2048 + 1) * ((1 << 21) / 16384 + 1);
        let w = 48 * items + 48 * (1 << bits);
        let um = f(PeakAlgorithm::PartitionedHashJoinWithPayloads(Materialization::Unclustered), &with);
        assert_eq!(um, f(PeakAlgorithm::PartitionedHashJoin, &base).max(4 * n + w + 8 * o.max(m) + 8 * o));
        // PHJ-OM with one 4-byte column a side: no maps, the match writes both columns.
        let om = f(PeakAlgorithm::PartitionedHashJoinWithPayloads(Materialization::Clustered), &with);
        let (l, r) = (1u128 << 18, 1u128 << 21);
        assert_eq!(om, 4 * n + w + max(&[8 * l, 8 * l + 8 * r, 8 * n + 8 * o.max(m)]));
        assert!(om <= um, "PHJ-OM {om} > PHJ-UM {um}");
        // Wide NPHJ: hash_join's and the gathers.
        let nphj = f(PeakAlgorithm::Wide(Algorithm::Nphj, Output::Relation), &with);
        assert_eq!(nphj, f(PeakAlgorithm::HashJoin, &base).max(16 * o));
        assert_eq!(f(PeakAlgorithm::Wide(Algorithm::Nphj, Output::MapsOnly), &with), f(PeakAlgorithm::HashJoin, &base));
        // Wide PHJ maps only is partitioned_hash_join.
        assert_eq!(f(PeakAlgorithm::Wide(Algorithm::PhjOm, Output::MapsOnly), &with), f(PeakAlgorithm::PartitionedHashJoin, &base));
        // Auto is the largest explicit one (plain keys: no sample).
        let auto = f(PeakAlgorithm::Wide(Algorithm::Auto, Output::Relation), &with);
        let most = Algorithm::EXPLICIT.iter().map(|&a| f(PeakAlgorithm::Wide(a, Output::Relation), &with)).max().unwrap();
        assert_eq!(auto, most);
        // SMJ-OM with one 4-byte column a side: sorted keys and columns, then the gathers.
        let om = f(PeakAlgorithm::Wide(Algorithm::SmjOm, Output::Relation), &with);
        assert_eq!(om, max(&[16 * r, 8 * r + 16 * l, 8 * n + 20 * l, 8 * n + 16 * l + 8 * o, 4 * n + 16 * o]));
    }

    #[test]
    fn inputs_and_allowance() {
        let s = sizes(1 << 20, 1 << 20, 8, 1 << 22);
        assert_eq!(s.input_bytes(), 16 << 20);
        let k = KeyShape { columns: 2, bytes: 8, floats: false, nullable: true };
        let n = JoinSizes::inner(100, 64, k, 0);
        // 8 bytes a row and one validity word per 32 rows and column.
        assert_eq!(n.input_bytes(), 164 * 8 + 2 * 4 * (4 + 2));
        for a in [PeakAlgorithm::SortedMergeJoin, PeakAlgorithm::HashJoin, PeakAlgorithm::ChunkedEqui] {
            let w = working_bytes(a, &s) as B;
            assert_eq!(w - f(a, &s), 16 * MIB + (2 << 20) / 4 + (4 << 20) / 64);
            assert_eq!(peak_bytes(a, &s), s.input_bytes() + working_bytes(a, &s));
        }
        // Empty inputs need the allowance only.
        let e = sizes(0, 0, 4, 0);
        assert_eq!(working_bytes(PeakAlgorithm::SortMergeJoin, &e), FIXED_ALLOWANCE);
        // (the PHJ's two partitions and their work items: a few hundred bytes)
        assert!(working_bytes(PeakAlgorithm::Wide(Algorithm::Auto, Output::Relation), &e) < FIXED_ALLOWANCE + 1024);
    }

    #[test]
    fn wide_joins_bound_compressed_keys() {
        // One 8-byte integer key column may be joined as 32-bit offsets (4N alive): the bound
        // covers that path and the 8-byte one; floats and composites are never compressed.
        for &(l, r, o) in &SHAPES {
            let n = (l + r) as B;
            for a in [Algorithm::Auto, Algorithm::SmjUm, Algorithm::SmjOm, Algorithm::PhjUm, Algorithm::PhjOm, Algorithm::Nphj] {
                for out in [Output::Relation, Output::MapsOnly] {
                    let w = PeakAlgorithm::Wide(a, out);
                    let p = |k: KeyShape| JoinSizes::inner(l, r, k, o).with_payloads(Payloads::of_widths(&[8]), Payloads::of_widths(&[8, 4]));
                    let c8 = Ctx::new(&p(KeyShape::integer(8)));
                    let (k8, k4) = (f(w, &p(KeyShape::integer(8))), f(w, &p(KeyShape::integer(4))));
                    assert_eq!(k8, wide(&c8, a, out).max(4 * n + k4), "{a:?} {out:?} L {l} R {r}");
                    let nullable = KeyShape { nullable: true, ..KeyShape::integer(8) };
                    assert!(f(w, &p(nullable)) >= 4 * n + f(w, &p(KeyShape { nullable: true, ..KeyShape::integer(4) })), "{a:?} {out:?} nullable");
                    let floats = KeyShape { floats: true, ..KeyShape::integer(8) };
                    assert_eq!(f(w, &p(floats)), wide(&Ctx::new(&p(floats)), a, out), "{a:?} {out:?} floats");
                }
            }
        }
    }

    #[test]
    fn harder_keys_and_join_types_never_need_less() {
        let all = [
            PeakAlgorithm::SortMergeJoin,
            PeakAlgorithm::SortMergeJoinSize,
            PeakAlgorithm::InterleaveJoin,
            PeakAlgorithm::HashJoin,
            PeakAlgorithm::PartitionedHashJoin,
            PeakAlgorithm::PartitionedHashJoinWithPayloads(Materialization::Unclustered),
            PeakAlgorithm::PartitionedHashJoinWithPayloads(Materialization::Clustered),
            PeakAlgorithm::Wide(Algorithm::SmjUm, Output::Relation),
            PeakAlgorithm::Wide(Algorithm::SmjOm, Output::Relation),
            PeakAlgorithm::Wide(Algorithm::Nphj, Output::Relation),
            PeakAlgorithm::ChunkedEqui,
            PeakAlgorithm::EquiAggregate { side: Side::Left },
            PeakAlgorithm::EquiAggregate { side: Side::Right },
        ];
        let nullable = KeyShape { nullable: true, ..KeyShape::integer(4) };
        let floats = KeyShape { floats: true, ..KeyShape::integer(8) };
        let wide = KeyShape { columns: 3, bytes: 12, floats: false, nullable: false };
        for &(l, r, o) in &SHAPES {
            for a in all {
                let plain4 = f(a, &sizes(l, r, 4, o));
                let plain8 = f(a, &sizes(l, r, 8, o));
                let with = |k: KeyShape| f(a, &JoinSizes::inner(l, r, k, o));
                assert!(with(nullable) >= plain4, "{a:?} nullable");
                assert!(with(floats) >= plain8, "{a:?} floats");
                assert!(with(wide) >= plain8.min(plain4), "{a:?} hashed composite");
                // The same inner pairs as a full join: at least the inner join's working memory.
                let full = JoinSizes::inner(l, r, KeyShape::integer(4), o).with_join_type(JoinType::Full, o + l + r, o);
                assert!(f(a, &full) >= plain4, "{a:?} full");
            }
        }
    }

    #[test]
    fn the_aggregate_needs_no_maps() {
        // 3000 x 3000 rows of one key: 9M output rows. The aggregate's working memory does not
        // grow with them; the sort-merge join's maps take 72 MB.
        let agg = PeakAlgorithm::EquiAggregate { side: Side::Right };
        let many = sizes(3000, 3000, 4, 9_000_000);
        assert_eq!(f(agg, &many), f(agg, &sizes(3000, 3000, 4, 0)));
        assert!(f(PeakAlgorithm::SortMergeJoin, &many) >= 72_000_000);
        assert!(f(agg, &many) < 1_000_000, "{}", f(agg, &many));
        // One 4-byte key, 2^20 x 2^10: the images of both sides lead (A = 2^20 right rows).
        let (a, b) = (1u128 << 20, 1u128 << 10);
        let s = JoinSizes::inner(b as u64, a as u64, KeyShape::integer(4), 0);
        assert_eq!(f(agg, &s), 4 * a + 18 * (a + b) + 12 * (a + b));
        assert_eq!(working_bytes(agg, &s) as u128, f(agg, &s) + FIXED_ALLOWANCE as B + (a + b) / 4);
    }

    #[test]
    fn partition_bits_follow_the_hash_join() {
        assert_eq!(partition_bits(1), 1);
        assert_eq!(partition_bits(1 << 18), 8);
        assert_eq!(partition_bits((1 << 18) + 1), 9);
        assert_eq!(partition_bits(1 << 20), 10);
        assert_eq!(partition_bits(1 << 40), 24);
    }

    #[test]
    fn nested_loop_chunks_are_bounded() {
        // 2^13 x 2^14: 32 outer blocks, at most 128 chunks of the right side.
        let s = JoinSizes::inner(1 << 13, 1 << 14, KeyShape { columns: 2, bytes: 8, floats: false, nullable: false }, 1 << 25);
        let e = (1u128 << 13) * 128;
        assert_eq!(f(PeakAlgorithm::Theta(ThetaKind::NestedLoop), &s), 12 * e + 9 * (1 << 13) + 64 + (1 << 14) / 8 + 8 * (1 << 25));
        // Huge left sides: one chunk.
        let s = JoinSizes::inner(1 << 28, 1 << 10, KeyShape::integer(4), 0);
        assert_eq!(f(PeakAlgorithm::Theta(ThetaKind::NestedLoop), &s), 12 * (1 << 28) + 9 * (1 << 28) + 64 + (1 << 10) / 8);
    }

    #[test]
    fn shapes_of_keys_and_payloads() {
        assert!(KeyShape::integer(4).plain());
        assert!(!KeyShape { floats: true, ..KeyShape::integer(4) }.plain());
        assert!(KeyShape { nullable: true, ..KeyShape::integer(4) }.may_filter());
        let p = Payloads::of_widths(&[8, 4]);
        assert_eq!((p.columns(), p.bytes_per_row(), p.first_width(), p.widest()), (2, 12, 8, 8));
        assert_eq!(Payloads::of_widths(&[]), Payloads::NONE);
    }
}
