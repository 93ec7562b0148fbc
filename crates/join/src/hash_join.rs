//! Hash joins of the PVLDB paper "Efficiently Processing Large Relational Joins on GPUs"
//! (seed 002): the partitioned hash join with unoptimized (PHJ-UM, "gather from untransformed
//! relations") or optimized (PHJ-OM, "gather from transformed relations") materialization, and a
//! non-partitioned hash join as the baseline.
//!
//! # Partitioned hash join ([`partitioned_hash_join`], [`partitioned_hash_join_with_payloads`])
//!
//! 1. **Transform.** Both sides are partitioned by the low `b` bits of their keys with a stable
//!    radix partition (CUB's one-sweep radix sort restricted to those bits: a histogram, prefix
//!    sums and a stable scatter; no atomic decides a position, so every run gives the same
//!    order). `b` is chosen so that the smaller (build) side has about 1024 rows per partition
//!    (16 bits for 2^26 rows; one sort pass per 8 bits); the partition offsets are then found
//!    by binary search in the partitioned keys. Single integer key columns are partitioned on
//!    their own bits; when that leaves a build partition over the chunk size (keys with equal
//!    low bits), and for every other key (floats, nullable or composite keys, turned into one derived key per row as
//!    [`sort_merge_join`](crate::sort_merge_join) does), the keys are first passed through a
//!    bijective mix (murmur3's finalizer), so equal keys stay equal and the low bits spread.
//!    PHJ-UM carries the row ids through the partitioning; PHJ-OM carries the first payload
//!    column (Algorithm 1 of the paper) and transforms the others one at a time at
//!    materialization, each by the same stable partition of the same keys. When a side's first
//!    payload column has 8 bytes, PHJ-OM partitions the keys alone and transforms every column
//!    at materialization (8-byte columns sorted with the keys would take more memory than
//!    PHJ-UM's 4-byte row ids).
//! 2. **Match.** The co-partitions are cut into work items: a chunk of at most 2048 build rows
//!    (a partition larger than that, which only heavy key duplication produces, is split into
//!    several chunks, each joined with all of the co-partition's probe rows, like a block nested
//!    loop) and a range of at most 16384 probe rows (skewed probe partitions are split over
//!    several blocks). One block per item builds a hash table of the chunk in shared memory
//!    (4096 slots of distinct keys with their row count; rows of a duplicated key grouped in
//!    partition order) and probes it with its probe rows. A count pass gives each item's pairs
//!    and the match flags of both sides; after an exclusive scan, a write pass writes each
//!    item's pairs at its offset: probe rows in partition order and, for each, its build
//!    matches in partition order. Inner joins first try a single pass that takes the items in
//!    order and finds each item's offset by decoupled look-back over its predecessors' counts
//!    (exact when no build chunk has a duplicate key, so that the pairs are at most the probe
//!    rows; otherwise the two passes run). Outer joins append the unmatched rows (from the
//!    flags), semi and anti joins return the flagged rows.
//! 3. **Materialize.** PHJ-UM returns maps into the input rows and gathers the payload columns
//!    through them (unclustered gathers). PHJ-OM writes the first payload column of each side
//!    straight from the match (the matching rows are at hand there; when both sides have
//!    further columns, only the probe side's, to keep the match's memory at PHJ-UM's; when a
//!    first column has 8 bytes, none: the match writes positions for every column), and
//!    gathers the other columns from their transformed copies through positions in the
//!    transformed relations, which are clustered: the probe side's columns first, then the
//!    build side's, each side's map dropped after its columns. A later column is transformed
//!    in chunks of rows (each chunk sorted on the partition bits, then scattered to its
//!    partitions' running offsets), so that it needs about half a column of scratch: PHJ-OM's
//!    peak stays at or below PHJ-UM's.
//!
//! Rows whose keys can match nothing (nulls, NaN under
//! [`NanEquality::NanNeverEqual`](crate::NanEquality)) are set aside before partitioning and
//! come back as unmatched rows. Composite keys wider than 64 bits are hashed; the candidate
//! pairs are then verified against the full keys through maps into the input rows, so PHJ-OM
//! (clustered gathers) refuses such keys with [`Error::Unsupported`] before any device work.
//!
//! Output order (deterministic): pairs grouped by work item, i.e. by partition of the probe side
//! (the larger one; the left side on ties); then unmatched left rows, then unmatched right rows.
//! Semi and anti joins return rows in partition order.
//!
//! # Non-partitioned hash join ([`non_partitioned_hash_join`])
//!
//! First the unique-build table: every build (smaller side) row claims one 4-byte slot of a
//! global open-addressing table of 32-byte buckets (8 slots, at most 60% of them used) by
//! compare-and-swap; a slot holds the row's position and a tag of its key's hash, not the key,
//! so the table takes 4 bytes a slot whatever the key and more of it stays in the L2. Every
//! probe row reads its home bucket (one sector), compares its key with the build keys of equal
//! tags only, and the hits are compacted in probe order. No sort, about one random sector a row
//! on each side. Dense build keys (one reduction finds their span `max - min + 1`; dense where
//! that many 4-byte slots take at most 32 bytes a build row, a span of at most 8 keys a row)
//! take a direct-address table instead: the build row of key `k` sits in slot `k - min`, so
//! nothing is hashed or compared, and a probe key outside the span is a miss without a memory
//! access (keys `[12, 10, 13]`: table `[1, -, 0, 2]` from 10); from 2^18 build rows, below which
//! the hash table stays in L2. When a build key repeats (the insert sees it already in a slot
//! and raises a flag, read by one host wait), the table is dropped and the sorted path runs:
//! the build side is sorted by key with its row ids; each run of equal keys goes into one global
//! open-addressing table as (key, first position, count). Every probe row looks its key up (count
//! pass), a scan gives the offsets, and a load-balancing search writes the pairs. Both paths
//! give the same output: probe rows in input order, each with its build matches in input order.

use gpujoin_cub_sys::result::{launch, with_temp};
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Pod, Result, Stream};
use gpujoin_primitives::{count_offsets, gather_into_unchecked, sort_keys, sort_pairs, PartitionKey, RadixKey, SortOrder, SortPairsWith};

use crate::common::{any_never_match, concat, from_inner_pairs, iota, offsets_u64, rows_where, verify};
use crate::kernels::sys::hash as ffi;
use crate::keys::{check_comparable, check_payloads, images, values, KeyImages, KeyPlan};
use crate::kernels::TypedValues;
use crate::table::{ColumnView, Table, TableView};
use crate::maps::{side_table, GatherMaps, Side};
use crate::table::Column;
use crate::types::{JoinOptions, JoinType};

/// How a partitioned hash join materializes payload columns.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::{ColumnView, TableView}; use gpujoin_device::*;
/// # fn f(s: &Stream, l: &TableView, lp: &[ColumnView], r: &TableView, rp: &[ColumnView]) -> Result<()> {
/// // High match ratio, many payload columns: gather from the transformed relations.
/// let out = partitioned_hash_join_with_payloads(s, l, lp, r, rp, JoinType::Inner, JoinOptions::default(), Materialization::Clustered)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Materialization {
    /// PHJ-UM (GFUR): row ids travel through the partitioning; payloads are gathered from the
    /// input columns through maps into the input rows (unclustered gathers).
    #[default]
    Unclustered,
    /// PHJ-OM (GFTR): payload columns are partitioned like the keys, one at a time, and gathered
    /// from these transformed copies through positions in them (clustered gathers).
    Clustered,
}

/// Per-phase device times and peak device memory of one join.
///
/// Times come from events recorded on the join's stream at the phase boundaries (milliseconds);
/// the peak is the high-water mark of the device's memory pool during the call, which includes
/// what was allocated before it (the inputs, for instance).
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::{ColumnView, TableView}; use gpujoin_device::*;
/// # fn f(s: &Stream, l: &TableView, r: &TableView) -> Result<()> {
/// let st = partitioned_hash_join(s, l, r, JoinType::Inner, JoinOptions::default())?.stats;
/// println!("transform {} ms, match {} ms, peak {} bytes", st.transform_ms, st.match_ms, st.peak_memory_bytes);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct JoinStats {
    /// Key preparation and partitioning (PHJ), or the sort and table build (non-partitioned).
    pub transform_ms: f32,
    /// Count and write passes, unmatched rows.
    pub match_ms: f32,
    /// Payload transforms and gathers (0 when no payload is materialized).
    pub materialize_ms: f32,
    /// The three phases together.
    pub total_ms: f32,
    /// High-water mark of the device pool during the join, in bytes.
    pub peak_memory_bytes: u64,
    /// Radix bits of the partitioning (0 for the non-partitioned join).
    pub partition_bits: u32,
    /// Work items (blocks) of the match kernels.
    pub work_items: u64,
    /// The side the hash tables were built on.
    pub build_side: Option<Side>,
    /// Whether the keys went through the bijective mix before partitioning.
    pub mixed_keys: bool,
    /// Whether the match ran as one speculative pass (inner joins whose build chunks have
    /// unique keys) instead of a count pass and a write pass.
    pub single_pass: bool,
    /// PHJ-OM: whether the probe side's output rows were its partitioned rows, each once and in
    /// order (every probe row matched exactly one build row, as in a foreign-key join whose keys
    /// all match), so that its transformed columns became the output without a gather.
    pub probe_rows_in_place: bool,
}

/// Gather maps and the join's statistics.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::{ColumnView, TableView}; use gpujoin_device::*;
/// # fn f(s: &Stream, l: &TableView, r: &TableView) -> Result<()> {
/// let HashJoinOutput { maps, stats } = non_partitioned_hash_join_with_stats(s, l, r, JoinType::Left, JoinOptions::default())?;
/// assert_eq!(stats.partition_bits, 0); // not partitioned
/// # let _ = maps; Ok(()) }
/// ```
pub struct HashJoinOutput {
    pub maps: GatherMaps,
    pub stats: JoinStats,
}

/// The output relation of a join with payloads.
///
/// `left` / `right` hold the payload columns of that side, in the order given (an empty list
/// when none was given); `None` where the join type has no such side (`LeftSemi`/`LeftAnti`:
/// no right side; `RightSemi`/`RightAnti`: no left side). `maps` are the gather maps into the
/// input rows when the algorithm produced them (PHJ-UM), `None`
/// for PHJ-OM, which works with positions in the transformed relations instead.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::{ColumnView, TableView}; use gpujoin_device::*;
/// # fn f(s: &Stream, l: &TableView, lp: &[ColumnView], r: &TableView, rp: &[ColumnView]) -> Result<()> {
/// let out = partitioned_hash_join_with_payloads(s, l, lp, r, rp, JoinType::Left, JoinOptions::default(), Materialization::Clustered)?;
/// let right = out.right.as_ref().unwrap();
/// assert!(right.columns()[0].view().validity().is_some()); // unmatched left rows have a null right side
/// assert_eq!(right.columns().len(), rp.len());
/// # Ok(()) }
/// ```
pub struct JoinedRelation {
    pub join_type: JoinType,
    pub rows: u64,
    pub left: Option<Table>,
    pub right: Option<Table>,
    pub maps: Option<GatherMaps>,
    pub stats: JoinStats,
}

// ---------------------------------------------------------------------------------------------
// Tuning
// ---------------------------------------------------------------------------------------------

/// Average build rows per partition the partition bits aim at (half a chunk).
const TARGET_ROWS: usize = 1024;
/// Probe rows per work item at most.
const PROBE_SPLIT: u32 = 16384;

/// The partition bits for `build_rows` build rows (`forced`: tests,
/// [`JoinOptions::forced_partition_bits`]).
fn partition_bits(build_rows: usize, forced: Option<u32>) -> u32 {
    if let Some(bits) = forced {
        return bits;
    }
    let parts = build_rows.div_ceil(TARGET_ROWS).max(1);
    (usize::BITS - (parts - 1).leading_zeros()).clamp(1, 24)
}

// ---------------------------------------------------------------------------------------------
// Key types of the core
// ---------------------------------------------------------------------------------------------

type OffsetsFn<K> = unsafe extern "C" fn(*const K, i64, i32, *mut u64, ffi::gj_h_stream_t) -> i32;
type CountFn<K> = unsafe extern "C" fn(*const K, *const K, *const ffi::gj_h_item, i64, *mut u64, *mut u8, *mut u8, ffi::gj_h_stream_t) -> i32;
type WriteFn<K> =
    unsafe extern "C" fn(*const K, *const K, *const ffi::gj_h_item, i64, *const u64, *const ffi::gj_h_side, *const ffi::gj_h_side, ffi::gj_h_stream_t) -> i32;
type SpecFn<K> = unsafe extern "C" fn(
    *const K,
    *const K,
    *const ffi::gj_h_item,
    i64,
    *mut u32,
    *mut u64,
    i64,
    *mut u32,
    *const ffi::gj_h_side,
    *const ffi::gj_h_side,
    ffi::gj_h_stream_t,
) -> i32;
type RunFlagsFn<K> = unsafe extern "C" fn(*const K, i64, *mut u8, ffi::gj_h_stream_t) -> i32;
type InsertFn<K> = unsafe extern "C" fn(*const K, i64, *const u32, i64, *mut u32, i64, ffi::gj_h_stream_t) -> i32;
type ProbeFn<K> = unsafe extern "C" fn(*const u32, i64, *const K, i64, *mut u32, *mut u32, ffi::gj_h_stream_t) -> i32;
type UniqueInsertFn<K> = unsafe extern "C" fn(*const K, i64, *mut u32, i64, *mut u32, ffi::gj_h_stream_t) -> i32;
type UniqueProbeFn<K> = unsafe extern "C" fn(*const u32, i64, *const K, i64, *const u32, *const K, i64, *mut u32, *mut u8, ffi::gj_h_stream_t) -> i32;
type DirectInsertFn<K> = unsafe extern "C" fn(*const K, *const u32, i64, K, *mut u32, i64, *mut u32, ffi::gj_h_stream_t) -> i32;
type DirectProbeFn<K> = unsafe extern "C" fn(*const u32, K, i64, *const K, i64, *mut u32, *mut u8, ffi::gj_h_stream_t) -> i32;
type RangeFn<K> = unsafe extern "C" fn(*const K, *const u32, i64, *mut K, crate::kernels::sys::join::gj_j_stream_t) -> i32;
type MixFn<K> = unsafe extern "C" fn(*const K, *const u32, i64, *mut K, ffi::gj_h_stream_t) -> i32;
type ScatterFn<K, V> = unsafe extern "C" fn(*const K, *const V, i64, i32, *const u64, *const u64, *mut V, ffi::gj_h_stream_t) -> i32;

/// A key type of the hash-join core: `u32` or `u64` (raw bits; equality is bit equality).
pub(crate) trait HashKey: PartitionKey + RadixKey + SortPairsWith<u32> + SortPairsWith<u64> {
    const OFFSETS: OffsetsFn<Self>;
    const COUNT: CountFn<Self>;
    const WRITE: WriteFn<Self>;
    const SPEC: SpecFn<Self>;
    const RUN_FLAGS: RunFlagsFn<Self>;
    const INSERT: InsertFn<Self>;
    const PROBE: ProbeFn<Self>;
    const UNIQUE_INSERT: UniqueInsertFn<Self>;
    const UNIQUE_PROBE: UniqueProbeFn<Self>;
    const DIRECT_INSERT: DirectInsertFn<Self>;
    const DIRECT_PROBE: DirectProbeFn<Self>;
    const RANGE: RangeFn<Self>;
    /// The largest and the smallest value (the empty range: minimum `MAX`, maximum `MIN`).
    const MAX: Self;
    const MIN: Self;
    /// The value zero-extended to `u64` (to subtract two keys without overflow).
    fn to_u64(self) -> u64;
    const MIX: MixFn<Self>;
    const SCATTER32: ScatterFn<Self, u32>;
    const SCATTER64: ScatterFn<Self, u64>;
}

macro_rules! hash_key {
    ($t:ty, $o:ident, $c:ident, $w:ident, $sp:ident, $rf:ident, $ins:ident, $pr:ident, $uins:ident, $upr:ident, $dins:ident, $dpr:ident, $range:ident, $mix:ident, $s32:ident, $s64:ident) => {
        impl HashKey for $t {
            const OFFSETS: OffsetsFn<Self> = ffi::$o;
            const COUNT: CountFn<Self> = ffi::$c;
            const WRITE: WriteFn<Self> = ffi::$w;
            const SPEC: SpecFn<Self> = ffi::$sp;
            const RUN_FLAGS: RunFlagsFn<Self> = ffi::$rf;
            const INSERT: InsertFn<Self> = ffi::$ins;
            const PROBE: ProbeFn<Self> = ffi::$pr;
            const UNIQUE_INSERT: UniqueInsertFn<Self> = ffi::$uins;
            const UNIQUE_PROBE: UniqueProbeFn<Self> = ffi::$upr;
            const DIRECT_INSERT: DirectInsertFn<Self> = ffi::$dins;
            const DIRECT_PROBE: DirectProbeFn<Self> = ffi::$dpr;
            const RANGE: RangeFn<Self> = crate::kernels::sys::join::$range;
            const MAX: Self = <$t>::MAX;
            const MIN: Self = <$t>::MIN;
            fn to_u64(self) -> u64 {
                self as u64
            }
            const MIX: MixFn<Self> = ffi::$mix;
            const SCATTER32: ScatterFn<Self, u32> = ffi::$s32;
            const SCATTER64: ScatterFn<Self, u64> = ffi::$s64;
        }
    };
}
hash_key!(u32, gj_h_part_offsets_u32, gj_h_match_count_u32, gj_h_match_write_u32, gj_h_match_spec_u32, gj_h_run_flags_u32, gj_h_table_insert_u32, gj_h_table_probe_u32, gj_h_unique_insert_u32, gj_h_unique_probe_u32, gj_h_direct_insert_u32, gj_h_direct_probe_u32, gj_j_key_range_u32, gj_h_mix_u32, gj_h_chunk_scatter_u32_u32, gj_h_chunk_scatter_u32_u64);
hash_key!(u64, gj_h_part_offsets_u64, gj_h_match_count_u64, gj_h_match_write_u64, gj_h_match_spec_u64, gj_h_run_flags_u64, gj_h_table_insert_u64, gj_h_table_probe_u64, gj_h_unique_insert_u64, gj_h_unique_probe_u64, gj_h_direct_insert_u64, gj_h_direct_probe_u64, gj_j_key_range_u64, gj_h_mix_u64, gj_h_chunk_scatter_u64_u32, gj_h_chunk_scatter_u64_u64);

// ---------------------------------------------------------------------------------------------
// Payload columns as raw bits
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Bits<'a> {
    B32(DeviceView<'a, u32>),
    B64(DeviceView<'a, u64>),
}

enum BitsBuf {
    B32(DeviceBuffer<u32>),
    B64(DeviceBuffer<u64>),
}

impl<'a> Bits<'a> {
    fn slice(self, begin: usize, end: usize) -> Bits<'a> {
        match self {
            Bits::B32(v) => Bits::B32(v.slice(begin..end)),
            Bits::B64(v) => Bits::B64(v.slice(begin..end)),
        }
    }
    /// A checked payload or key column's values as raw bits (4 or 8 bytes).
    fn of(c: &ColumnView<'a>) -> Bits<'a> {
        match c.typed::<u32>() {
            Some(v) => Bits::B32(v),
            None => Bits::B64(c.typed::<u64>().expect("a checked column holds 4- or 8-byte values")),
        }
    }
}

impl BitsBuf {
    fn alloc(stream: &Stream, like: Bits<'_>, n: usize) -> Result<BitsBuf> {
        Ok(match like {
            Bits::B32(_) => BitsBuf::B32(stream.alloc(n)?),
            Bits::B64(_) => BitsBuf::B64(stream.alloc(n)?),
        })
    }
    fn bits(&self) -> Bits<'_> {
        match self {
            BitsBuf::B32(b) => Bits::B32(b.view()),
            BitsBuf::B64(b) => Bits::B64(b.view()),
        }
    }
    fn width(&self) -> i32 {
        match self {
            BitsBuf::B32(_) => 4,
            BitsBuf::B64(_) => 8,
        }
    }
    fn ptr(&self) -> *const std::ffi::c_void {
        match self {
            BitsBuf::B32(b) => b.view().as_ptr() as *const _,
            BitsBuf::B64(b) => b.view().as_ptr() as *const _,
        }
    }
    fn ptr_mut(&mut self) -> *mut std::ffi::c_void {
        match self {
            BitsBuf::B32(b) => b.view_mut().as_mut_ptr() as *mut _,
            BitsBuf::B64(b) => b.view_mut().as_mut_ptr() as *mut _,
        }
    }
    /// The column with the element type of `like`.
    fn into_payload(self, like: &ColumnView<'_>) -> Column {
        let bytes = match self {
            BitsBuf::B32(b) => b.into_bytes(),
            BitsBuf::B64(b) => b.into_bytes(),
        };
        Column::of_fixed_width(like.data_type(), bytes)
    }
}

/// `out[at + i] = src[idx[i]]` (0 where `idx[i]` is NONE).
fn gather_bits(stream: &Stream, src: Bits<'_>, idx: &DeviceView<'_, u32>, out: &mut BitsBuf, at: usize) -> Result<()> {
    let n = idx.len();
    match (src, out) {
        (Bits::B32(s), BitsBuf::B32(o)) => gather_into_unchecked(stream, &s, idx, &mut o.slice_mut(at..at + n), 0u32),
        (Bits::B64(s), BitsBuf::B64(o)) => gather_into_unchecked(stream, &s, idx, &mut o.slice_mut(at..at + n), 0u64),
        _ => Err(Error::invalid("internal: gather between columns of different widths")),
    }
}

fn gathered(stream: &Stream, src: Bits<'_>, idx: &DeviceView<'_, u32>) -> Result<BitsBuf> {
    let mut out = BitsBuf::alloc(stream, src, idx.len())?;
    gather_bits(stream, src, idx, &mut out, 0)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Key preparation
// ---------------------------------------------------------------------------------------------

enum KeySrc<'a, K: Pod> {
    View(DeviceView<'a, K>),
    Owned(DeviceBuffer<K>),
}

impl<K: Pod> KeySrc<'_, K> {
    fn view(&self) -> DeviceView<'_, K> {
        match self {
            KeySrc::View(v) => *v,
            KeySrc::Owned(b) => b.view(),
        }
    }
}

/// One side's keys, ready to partition.
struct SideKeys<'a, K: Pod> {
    /// All rows of the side.
    n: usize,
    /// The keys of the rows that can match, in row order.
    keys: KeySrc<'a, K>,
    /// The rows that can match (`None`: all rows).
    kept: Option<DeviceBuffer<u32>>,
    /// The rows that match nothing (`None`: no such row).
    never: Option<DeviceBuffer<u32>>,
}

impl<K: Pod> SideKeys<'_, K> {
    fn kept_len(&self) -> usize {
        self.kept.as_ref().map_or(self.n, |k| k.len())
    }
}

struct Prepared<'a, K: Pod> {
    left: SideKeys<'a, K>,
    right: SideKeys<'a, K>,
    /// The keys went through the bijective mix.
    mixed: bool,
    /// Hashed composite keys: the images, to verify candidate pairs with.
    verify: Option<(KeyImages, KeyImages)>,
}

enum AnyPrepared<'a> {
    U32(Prepared<'a, u32>),
    U64(Prepared<'a, u64>),
}

fn mixed<K: HashKey>(stream: &Stream, keys: &DeviceView<'_, K>, rows: Option<&DeviceBuffer<u32>>) -> Result<DeviceBuffer<K>> {
    let n = rows.map_or(keys.len(), |r| r.len());
    let mut out = stream.alloc::<K>(n)?;
    let (k, r, o) = (keys.as_ptr(), rows.map_or(std::ptr::null(), |r| r.view().as_ptr()), out.view_mut().as_mut_ptr());
    // SAFETY: rows index keys (or n = keys.len()); out holds n keys.
    launch(stream, "mix keys", || unsafe { K::MIX(k, r, n as i64, o, stream.raw()) })?;
    Ok(out)
}

impl<K: HashKey> Prepared<'_, K> {
    /// Replaces raw keys by mixed ones (both sides).
    fn mix(&mut self, stream: &Stream) -> Result<()> {
        if self.mixed {
            return Ok(());
        }
        for side in [&mut self.left, &mut self.right] {
            let m = mixed(stream, &side.keys.view(), None)?;
            side.keys = KeySrc::Owned(m);
        }
        self.mixed = true;
        Ok(())
    }
}

fn side_of_fast<'a, K: Pod>(n: usize, v: DeviceView<'a, K>) -> SideKeys<'a, K> {
    SideKeys { n, keys: KeySrc::View(v), kept: None, never: None }
}

/// Single non-null integer columns: the keys as they are (raw bits).
fn prepare_fast<'a>(left: &TableView<'a>, right: &TableView<'a>) -> Option<AnyPrepared<'a>> {
    if left.columns().len() != 1 || left.columns()[0].validity().is_some() || right.columns()[0].validity().is_some() {
        return None;
    }
    let (l, r) = (values(&left.columns()[0]), values(&right.columns()[0]));
    let (nl, nr) = (left.rows(), right.rows());
    let p32 = |a: DeviceView<'a, u32>, b: DeviceView<'a, u32>| {
        AnyPrepared::U32(Prepared { left: side_of_fast(nl, a), right: side_of_fast(nr, b), mixed: false, verify: None })
    };
    let p64 = |a: DeviceView<'a, u64>, b: DeviceView<'a, u64>| {
        AnyPrepared::U64(Prepared { left: side_of_fast(nl, a), right: side_of_fast(nr, b), mixed: false, verify: None })
    };
    match (l, r) {
        (TypedValues::U32(a), TypedValues::U32(b)) => Some(p32(a, b)),
        (TypedValues::I32(a), TypedValues::I32(b)) => Some(p32(a.cast(), b.cast())),
        (TypedValues::U64(a), TypedValues::U64(b)) => Some(p64(a, b)),
        (TypedValues::I64(a), TypedValues::I64(b)) => Some(p64(a.cast(), b.cast())),
        _ => None,
    }
}

/// The rows that can match and the rows that match nothing (`None`: all rows / no row).
type RowLists = (Option<DeviceBuffer<u32>>, Option<DeviceBuffer<u32>>);

fn prepare<'a>(stream: &Stream, left: &TableView<'a>, right: &TableView<'a>, opts: JoinOptions) -> Result<AnyPrepared<'a>> {
    check_comparable(left, right)?;
    if let Some(p) = prepare_fast(left, right) {
        return Ok(p);
    }
    let plan = KeyPlan::new(left, right, opts, 64);
    let (il, ir) = (images(stream, left, plan)?, images(stream, right, plan)?);
    let filtered = any_never_match(stream, &il.never_match.view())? || any_never_match(stream, &ir.never_match.view())?;
    let rows = |img: &KeyImages| -> Result<RowLists> {
        if !filtered {
            return Ok((None, None));
        }
        let kept = rows_where(stream, &img.never_match.view(), false, None)?;
        let never = rows_where(stream, &img.never_match.view(), true, None)?;
        Ok((Some(kept), (!never.is_empty()).then_some(never)))
    };
    let ((kl, ql), (kr, qr)) = (rows(&il)?, rows(&ir)?);
    let (nl, nr) = (left.rows(), right.rows());
    if plan.exact && plan.bits <= 32 {
        let narrow = |img: &KeyImages, kept: Option<&DeviceBuffer<u32>>| -> Result<DeviceBuffer<u32>> {
            let n = kept.map_or(img.derived.len(), |k| k.len());
            let mut out = stream.alloc::<u32>(n)?;
            let (d, r, o) = (img.derived.view().as_ptr(), kept.map_or(std::ptr::null(), |k| k.view().as_ptr()), out.view_mut().as_mut_ptr());
            // SAFETY: kept rows index the derived keys; out holds n keys.
            launch(stream, "narrow and mix keys", || unsafe { ffi::gj_h_narrow_mix(d, r, n as i64, o, stream.raw()) })?;
            Ok(out)
        };
        let (xl, xr) = (narrow(&il, kl.as_ref())?, narrow(&ir, kr.as_ref())?);
        Ok(AnyPrepared::U32(Prepared {
            left: SideKeys { n: nl, keys: KeySrc::Owned(xl), kept: kl, never: ql },
            right: SideKeys { n: nr, keys: KeySrc::Owned(xr), kept: kr, never: qr },
            mixed: true,
            verify: None,
        }))
    } else {
        let (xl, xr) = (mixed::<u64>(stream, &il.derived.view(), kl.as_ref())?, mixed::<u64>(stream, &ir.derived.view(), kr.as_ref())?);
        Ok(AnyPrepared::U64(Prepared {
            left: SideKeys { n: nl, keys: KeySrc::Owned(xl), kept: kl, never: ql },
            right: SideKeys { n: nr, keys: KeySrc::Owned(xr), kept: kr, never: qr },
            mixed: true,
            verify: (!plan.exact).then_some((il, ir)),
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Phase clock
// ---------------------------------------------------------------------------------------------

pub(crate) use crate::common::Clock;

// ---------------------------------------------------------------------------------------------
// Partitioned hash join: transform
// ---------------------------------------------------------------------------------------------

/// One side after the transform phase.
struct Transformed<K: Pod> {
    /// Partitioned keys of the kept rows.
    keys: DeviceBuffer<K>,
    /// `2^bits + 1` partition offsets.
    offsets: DeviceBuffer<u64>,
    /// PHJ-UM: the input row of every partitioned position.
    ids: Option<DeviceBuffer<u32>>,
    /// PHJ-OM: the first payload column, transformed (kept rows partitioned, then the rows that
    /// match nothing in row order: `n` rows).
    col0: Option<BitsBuf>,
}

/// The transformed relation's copy of a payload column: the kept rows partitioned like the keys,
/// then the rows that match nothing; also returns the partitioned keys.
fn transform_column<K: HashKey>(stream: &Stream, side: &SideKeys<'_, K>, col: Bits<'_>, bits: u32) -> Result<(DeviceBuffer<K>, BitsBuf)> {
    let nk = side.kept_len();
    let compact = side.kept.as_ref().map(|k| gathered(stream, col, &k.view())).transpose()?;
    let src = compact.as_ref().map_or(col, |c| c.bits());
    let mut out = BitsBuf::alloc(stream, col, side.n)?;
    let mut keys_out = stream.alloc::<K>(nk)?;
    let keys = side.keys.view();
    match (src, &mut out) {
        (Bits::B32(s), BitsBuf::B32(o)) => sort_pairs(stream, &keys, &s, &mut keys_out.view_mut(), &mut o.slice_mut(..nk), SortOrder::Ascending, Some(0..bits))?,
        (Bits::B64(s), BitsBuf::B64(o)) => sort_pairs(stream, &keys, &s, &mut keys_out.view_mut(), &mut o.slice_mut(..nk), SortOrder::Ascending, Some(0..bits))?,
        _ => return Err(Error::invalid("internal: column widths differ")),
    }
    drop(compact);
    if let Some(never) = &side.never {
        gather_bits(stream, col, &never.view(), &mut out, nk)?;
    }
    Ok((keys_out, out))
}

/// Chunks of a [`transform_column_chunked`]: at most this many, of at least
/// [`MIN_TRANSFORM_CHUNK`] rows.
const TRANSFORM_CHUNKS: usize = 8;
const MIN_TRANSFORM_CHUNK: usize = 1 << 16;

/// The same transformed copy as [`transform_column`], in bounded memory: the kept rows are
/// taken in chunks of about 1/8 of the side; each chunk is sorted on the partition bits (stable)
/// into chunk-sized buffers and its rows of partition `p` are written at `cursor[p]`, which
/// starts at the side's partition offsets (`offsets`, from the transform) and moves on by the
/// chunk's partition sizes. Chunks in row order and stable chunk sorts give the stable partition
/// of the whole column. Beyond the output, it needs about half a column (the chunk's sorted keys
/// and values and CUB's alternate buffers) instead of three columns.
fn transform_column_chunked<K: HashKey>(stream: &Stream, side: &SideKeys<'_, K>, offsets: &DeviceView<'_, u64>, col: Bits<'_>, bits: u32) -> Result<BitsBuf> {
    let nk = side.kept_len();
    let parts = 1usize << bits;
    let mut out = BitsBuf::alloc(stream, col, side.n)?;
    if nk > 0 {
        gpujoin_device::check_same_len("partition offsets", parts + 1, "offsets", offsets.len())?;
        let mut cursor = stream.copy_from_device(&offsets.slice(..parts))?;
        let chunk = nk.div_ceil(TRANSFORM_CHUNKS).max(MIN_TRANSFORM_CHUNK);
        let keys = side.keys.view();
        let mut begin = 0;
        while begin < nk {
            let end = (begin + chunk).min(nk);
            let len = end - begin;
            let compact = side.kept.as_ref().map(|k| gathered(stream, col, &k.slice(begin..end))).transpose()?;
            let src = match &compact {
                Some(c) => c.bits(),
                None => col.slice(begin, end),
            };
            let chunk_keys = keys.slice(begin..end);
            let mut sk = stream.alloc::<K>(len)?;
            let mut sv = BitsBuf::alloc(stream, col, len)?;
            match (src, &mut sv) {
                (Bits::B32(s), BitsBuf::B32(o)) => sort_pairs(stream, &chunk_keys, &s, &mut sk.view_mut(), &mut o.view_mut(), SortOrder::Ascending, Some(0..bits))?,
                (Bits::B64(s), BitsBuf::B64(o)) => sort_pairs(stream, &chunk_keys, &s, &mut sk.view_mut(), &mut o.view_mut(), SortOrder::Ascending, Some(0..bits))?,
                _ => return Err(Error::invalid("internal: column widths differ")),
            }
            drop(compact);
            let local = part_offsets(stream, &sk.view(), bits)?;
            let (k, l, c) = (sk.view().as_ptr(), local.view().as_ptr(), cursor.view().as_ptr());
            let (v, o, w) = (sv.ptr(), out.ptr_mut(), sv.width());
            // SAFETY: len sorted keys and values; 2^bits + 1 local offsets; the cursor and the
            // chunk's local offsets place every row inside the kept part of `out` (nk rows).
            launch(stream, "scatter partitioned chunk", || unsafe {
                match w {
                    4 => K::SCATTER32(k, v as *const u32, len as i64, bits as i32, l, c, o as *mut u32, stream.raw()),
                    _ => K::SCATTER64(k, v as *const u64, len as i64, bits as i32, l, c, o as *mut u64, stream.raw()),
                }
            })?;
            let cm = cursor.view_mut().as_mut_ptr();
            // SAFETY: 2^bits + 1 local offsets, 2^bits cursors.
            launch(stream, "advance partition cursor", || unsafe { ffi::gj_h_advance_cursor(l, parts as i64, cm, stream.raw()) })?;
            begin = end;
        }
    }
    if let Some(never) = &side.never {
        gather_bits(stream, col, &never.view(), &mut out, nk)?;
    }
    Ok(out)
}

fn part_offsets<K: HashKey>(stream: &Stream, keys: &DeviceView<'_, K>, bits: u32) -> Result<DeviceBuffer<u64>> {
    let mut off = stream.alloc::<u64>((1usize << bits) + 1)?;
    let (k, o) = (keys.as_ptr(), off.view_mut().as_mut_ptr());
    // SAFETY: keys.len() keys; 2^bits + 1 offsets.
    launch(stream, "partition offsets", || unsafe { K::OFFSETS(k, keys.len() as i64, bits as i32, o, stream.raw()) })?;
    Ok(off)
}

/// Partitions one side: keys with row ids (UM), with the first payload (OM), or alone.
fn transform_side<K: HashKey>(stream: &Stream, side: &SideKeys<'_, K>, om: bool, first: Option<&ColumnView<'_>>, bits: u32) -> Result<Transformed<K>> {
    let nk = side.kept_len();
    let keys = side.keys.view();
    let (pk, ids, col0) = if !om {
        let iota_ids;
        let ids_in = match &side.kept {
            Some(k) => k.view(),
            None => {
                iota_ids = iota(stream, nk)?;
                iota_ids.view()
            }
        };
        let mut pk = stream.alloc::<K>(nk)?;
        let mut pi = stream.alloc::<u32>(nk)?;
        sort_pairs(stream, &keys, &ids_in, &mut pk.view_mut(), &mut pi.view_mut(), SortOrder::Ascending, Some(0..bits))?;
        (pk, Some(pi), None)
    } else if let Some(c) = first {
        let (pk, col) = transform_column(stream, side, Bits::of(c), bits)?;
        (pk, None, Some(col))
    } else {
        let mut pk = stream.alloc::<K>(nk)?;
        sort_keys(stream, &keys, &mut pk.view_mut(), SortOrder::Ascending, Some(0..bits))?;
        (pk, None, None)
    };
    let offsets = part_offsets(stream, &pk.view(), bits)?;
    Ok(Transformed { keys: pk, offsets, ids, col0 })
}

/// The work items of the match kernels.
struct Work {
    items: DeviceBuffer<u32>,
    count: usize,
    max_build: u32,
}

impl Work {
    fn ptr(&self) -> *const ffi::gj_h_item {
        self.items.view().as_ptr() as *const ffi::gj_h_item
    }
}

/// `split`: the most probe rows of a work item.
fn work_items<K: Pod>(stream: &Stream, build: &Transformed<K>, probe: &Transformed<K>, bits: u32, split: u32) -> Result<Work> {
    let parts = 1usize << bits;
    let mut per_part = stream.alloc::<u64>(parts)?;
    let mut max_build = stream.alloc_zeroed::<u32>(1)?;
    let (bo, po) = (build.offsets.view().as_ptr(), probe.offsets.view().as_ptr());
    let (pp, mb) = (per_part.view_mut().as_mut_ptr(), max_build.view_mut().as_mut_ptr());
    // SAFETY: offsets hold parts + 1 entries; per_part holds parts.
    launch(stream, "count work items", || unsafe { ffi::gj_h_count_items(bo, po, parts as i64, split, pp, mb, stream.raw()) })?;
    let (start, count) = offsets_u64(stream, &per_part.view())?;
    let count = usize::try_from(count).map_err(|_| Error::too_large("work items", count, usize::MAX as u64))?;
    if count as u64 > i32::MAX as u64 {
        return Err(Error::too_large("hash-join work items", count as u64, i32::MAX as u64));
    }
    let max_build = stream.copy_to_host(&max_build.view())?[0];
    let mut items = stream.alloc::<u32>(count * 4)?;
    let (st, it) = (start.view().as_ptr(), items.view_mut().as_mut_ptr() as *mut ffi::gj_h_item);
    // SAFETY: item_start has parts entries; items holds `count` items of 4 words.
    launch(stream, "fill work items", || unsafe { ffi::gj_h_fill_items(bo, po, parts as i64, split, st, it, stream.raw()) })?;
    Ok(Work { items, count, max_build })
}

// ---------------------------------------------------------------------------------------------
// Partitioned hash join: match and output
// ---------------------------------------------------------------------------------------------

/// What the write pass writes for one side.
#[derive(Default)]
struct WriteSide {
    ids: Option<*const u32>,
    out_ids: Option<*mut u32>,
    vals: Option<(*const std::ffi::c_void, i32)>,
    out_vals: Option<*mut std::ffi::c_void>,
    moved: Option<*mut u32>,
}

impl WriteSide {
    fn raw(&self) -> ffi::gj_h_side {
        ffi::gj_h_side {
            ids: self.ids.unwrap_or(std::ptr::null()),
            out_ids: self.out_ids.unwrap_or(std::ptr::null_mut()),
            vals: self.vals.map_or(std::ptr::null(), |v| v.0),
            val_width: self.vals.map_or(0, |v| v.1),
            out_vals: self.out_vals.unwrap_or(std::ptr::null_mut()),
            moved: self.moved.unwrap_or(std::ptr::null_mut()),
        }
    }
}

/// One side's map in the id space of the algorithm (input rows for UM, positions in the
/// transformed relation for OM), covering output rows `start..` (`start` > 0 when the inner
/// part was not needed).
struct SideMap {
    map: DeviceBuffer<u32>,
    start: usize,
}

/// The unmatched (or, for semi joins, matched) rows of one side in the algorithm's id space:
/// flagged kept rows, then (for unmatched) the rows that match nothing.
fn side_rows<K: Pod>(stream: &Stream, side: &SideKeys<'_, K>, t: &Transformed<K>, hit: &DeviceBuffer<u8>, matched: bool, om: bool) -> Result<DeviceBuffer<u32>> {
    let kept = rows_where(stream, &hit.view(), matched, t.ids.as_ref().map(|i| i.view()).as_ref())?;
    if matched {
        return Ok(kept);
    }
    let Some(never) = &side.never else { return Ok(kept) };
    if !om {
        return concat(stream, &[kept.view(), never.view()]);
    }
    // Positions of the rows that match nothing: after the kept rows in the transformed relation.
    let mut at = stream.alloc::<u32>(never.len())?;
    gpujoin_primitives::iota_u32(stream, &mut at.view_mut(), side.kept_len() as u32)?;
    concat(stream, &[kept.view(), at.view()])
}

fn range_validity(stream: &Stream, n: usize, null_begin: usize, null_end: usize) -> Result<DeviceBuffer<u32>> {
    let mut w = stream.alloc::<u32>(n.div_ceil(32))?;
    let p = w.view_mut().as_mut_ptr();
    // SAFETY: ceil(n / 32) words.
    launch(stream, "range validity", || unsafe { ffi::gj_h_range_validity(p, n as i64, null_begin as i64, null_end as i64, stream.raw()) })?;
    Ok(w)
}

/// The request of one partitioned join.
struct Request<'p, 'a> {
    join_type: JoinType,
    mode: Materialization,
    left_payloads: &'p [ColumnView<'a>],
    right_payloads: &'p [ColumnView<'a>],
    /// Materialize (possibly zero) payload columns; false: maps only.
    with_payloads: bool,
}

fn phj<K: HashKey>(stream: &Stream, mut p: Prepared<'_, K>, req: &Request<'_, '_>, opts: JoinOptions, mut clock: Clock) -> Result<JoinedRelation> {
    let jt = req.join_type;
    let verifying = p.verify.is_some();
    let om = req.mode == Materialization::Clustered;
    if om && verifying {
        // `run_phj` refuses this before any device work (`clustered_unsupported`).
        return Err(Error::invalid("internal: PHJ-OM reached with hashed keys"));
    }
    let lp: &[ColumnView<'_>] = if jt.has_left_map() { req.left_payloads } else { &[] };
    let rp: &[ColumnView<'_>] = if jt.has_right_map() { req.right_payloads } else { &[] };
    // OM with an 8-byte first payload column (on either side): the transform partitions the
    // keys alone and the match writes both maps; every column is transformed at materialization
    // (see `fuse_l` below for why).
    let first_is_wide = |cols: &[ColumnView<'_>]| cols.first().is_some_and(|c| matches!(Bits::of(c), Bits::B64(_)));
    let om_maps = om && (first_is_wide(lp) || first_is_wide(rp));
    let carry_first = om && !om_maps;
    let (nl, nr) = (p.left.kept_len(), p.right.kept_len());
    let build_left = nl < nr;
    let forced_bits = opts.forced_partition_bits();
    let split = opts.forced_probe_split().unwrap_or(PROBE_SPLIT);
    let bits = partition_bits(nl.min(nr), forced_bits);
    let mut stats = JoinStats { partition_bits: bits, build_side: Some(if build_left { Side::Left } else { Side::Right }), ..JoinStats::default() };

    // 1. Transform.
    let chunk = {
        // SAFETY: a constant.
        unsafe { ffi::gj_h_chunk_rows() as u32 }
    };
    let (tl, tr, work) = loop {
        let tl = transform_side(stream, &p.left, om, lp.first().filter(|_| carry_first), bits)?;
        let tr = transform_side(stream, &p.right, om, rp.first().filter(|_| carry_first), bits)?;
        let work = if build_left { work_items(stream, &tl, &tr, bits, split)? } else { work_items(stream, &tr, &tl, bits, split)? };
        // Raw keys whose low bits crowd one partition: mix them and partition again.
        if work.max_build > chunk && !p.mixed && forced_bits.is_none() {
            drop((tl, tr, work));
            p.mix(stream)?;
            continue;
        }
        break (tl, tr, work);
    };
    stats.mixed_keys = p.mixed;
    stats.work_items = work.count as u64;
    clock.mark(stream)?;

    // 2. Match.
    let flags_left = !verifying && matches!(jt, JoinType::Left | JoinType::Full | JoinType::LeftSemi | JoinType::LeftAnti);
    let flags_right = !verifying && matches!(jt, JoinType::Right | JoinType::Full | JoinType::RightSemi | JoinType::RightAnti);
    let (tb, tp) = if build_left { (&tl, &tr) } else { (&tr, &tl) };
    let semi_anti = !jt.has_left_map() || !jt.has_right_map();
    // UM (and verification) needs whole maps; OM needs positions of the inner rows only for the
    // columns it does not write in the match (all but the first; all when `om_maps`).
    let full_l = !om || om_maps || lp.len() > 1;
    let full_r = !om || om_maps || rp.len() > 1;
    // OM with 4-byte first columns: the match writes the first payload column of a side itself
    // ("fused"), except, when both sides have further columns, on the build side: its first
    // column is gathered after the match like the others. The match then holds the transformed
    // keys and first columns, both maps and one output column (|R| + |S| + |R| + |S| + 3 |out|
    // column bytes), no more than PHJ-UM's transform (|R| ids and keys, then |S| ids, keys,
    // sorted copies of both and CUB's alternate buffers) when |out| = |S|.
    // With an 8-byte first column, its sorted copies, CUB's alternate buffers and the fused
    // 8-byte outputs weigh more than PHJ-UM's 4-byte row ids and maps (|S| = |out| = 2|R|,
    // 4-byte keys: 68 bytes per |R| row against 48). `om_maps` then partitions the keys alone
    // (5k bytes per |R| row for k-byte keys: both sides' keys and CUB's alternate buffer), the
    // match writes both maps (3k + 16 bytes), and
    // materialization transforms each column in chunks and gathers it, the probe side first:
    // its map goes before the build side's columns. Per |R| row, for c columns of w bytes a
    // side: the probe side's last gather holds both maps, its outputs and its transformed column
    // (16 + 2w (c + 1)), the build side's last one the build map, all outputs and its
    // transformed column (8 + 4cw + w); PHJ-UM's gathers hold both maps and all outputs
    // (16 + 4cw), so OM's peak is at most UM's for w <= 8.
    let both_wide = lp.len() > 1 && rp.len() > 1;
    let probe_left = !build_left;
    let fuse_l = carry_first && !lp.is_empty() && (!both_wide || probe_left);
    let fuse_r = carry_first && !rp.is_empty() && (!both_wide || build_left);
    // Output buffers for `total` rows of which the first `inner` are pairs (`None`: not known
    // yet, and `total` is a capacity for the pairs: the speculative pass).
    let alloc_outputs = |inner: Option<usize>, total: usize| -> Result<Outputs> {
        let side_map = |full: bool| -> Result<SideMap> {
            Ok(match (full, inner) {
                (true, _) => SideMap { map: stream.alloc::<u32>(total)?, start: 0 },
                (false, Some(i)) => SideMap { map: stream.alloc::<u32>(total - i)?, start: i },
                (false, None) => SideMap { map: stream.alloc::<u32>(0)?, start: usize::MAX },
            })
        };
        let out0 = |fuse: bool, cols: &[ColumnView<'_>]| -> Result<Option<BitsBuf>> {
            if fuse {
                cols.first().map(|c| BitsBuf::alloc(stream, Bits::of(c), total)).transpose()
            } else {
                Ok(None)
            }
        };
        Ok(Outputs { map_l: side_map(full_l)?, map_r: side_map(full_r)?, out0_l: out0(fuse_l, lp)?, out0_r: out0(fuse_r, rp)? })
    };
    // What the write passes write for each side; `moved`: the probe side's flag (OM), raised
    // unless the probe rows land in place (the kernels' `gj_h_side::moved`).
    let writers = |o: &mut Outputs, moved: &mut Option<DeviceBuffer<u32>>| -> (ffi::gj_h_side, ffi::gj_h_side) {
        let moved = moved.as_mut().map(|f| f.view_mut().as_mut_ptr());
        let side_w = |t: &Transformed<K>, m: &mut SideMap, out0: &mut Option<BitsBuf>, probe: bool| -> ffi::gj_h_side {
            let mut w = WriteSide { moved: moved.filter(|_| probe), ..WriteSide::default() };
            if m.start == 0 {
                w.out_ids = Some(m.map.view_mut().as_mut_ptr());
                w.ids = t.ids.as_ref().map(|i| i.view().as_ptr());
            }
            if let (Some(o), Some(c)) = (out0.as_mut(), t.col0.as_ref()) {
                w.vals = Some((c.ptr(), c.width()));
                w.out_vals = Some(o.ptr_mut());
            }
            w.raw()
        };
        let wl = side_w(&tl, &mut o.map_l, &mut o.out0_l, !build_left);
        let wr = side_w(&tr, &mut o.map_r, &mut o.out0_r, build_left);
        if build_left {
            (wl, wr)
        } else {
            (wr, wl)
        }
    };
    let (bk, pk, it) = (tb.keys.view().as_ptr(), tp.keys.view().as_ptr(), work.ptr());

    // Inner joins first try one speculative pass (exact when the build chunks have unique keys).
    let moved_flag = || -> Result<Option<DeviceBuffer<u32>>> { om.then(|| stream.alloc_zeroed::<u32>(1)).transpose() };
    let mut spec: Option<(usize, Outputs, Option<DeviceBuffer<u32>>)> = None;
    if jt == JoinType::Inner && !verifying && work.count > 0 {
        let cap = tp.keys.len();
        let mut o = alloc_outputs(None, cap)?;
        let mut moved = moved_flag()?;
        let (b, pr) = writers(&mut o, &mut moved);
        let mut ticket = stream.alloc_zeroed::<u32>(2)?;
        let mut status = stream.alloc_zeroed::<u64>(work.count)?;
        let (tk, st) = (ticket.view_mut().as_mut_ptr(), status.view_mut().as_mut_ptr());
        // SAFETY: outputs hold `cap` rows, the kernel writes no more; ticket[1] is the overflow flag.
        launch(stream, "hash match (one pass)", || unsafe { K::SPEC(bk, pk, it, work.count as i64, tk, st, cap as i64, tk.add(1), &b, &pr, stream.raw()) })?;
        let last = stream.copy_to_host(&status.slice(work.count - 1..))?[0];
        let overflow = stream.copy_to_host(&ticket.slice(1..))?[0];
        if overflow == 0 {
            let inner = (last & ((1u64 << 62) - 1)) as usize;
            o.truncate(inner);
            spec = Some((inner, o, moved));
            stats.single_pass = true;
        }
    }

    let (inner, mut o, hits, moved) = match spec {
        Some((inner, o, moved)) => (inner, o, (None, None), moved),
        None => {
            // Count pass.
            let mut hit_left = if flags_left { Some(stream.alloc_zeroed::<u8>(nl)?) } else { None };
            let mut hit_right = if flags_right { Some(stream.alloc_zeroed::<u8>(nr)?) } else { None };
            let mut item_rows = stream.alloc::<u64>(work.count)?;
            {
                let hp = |h: &mut Option<DeviceBuffer<u8>>| h.as_mut().map_or(std::ptr::null_mut(), |b| b.view_mut().as_mut_ptr());
                let (hl, hr) = (hp(&mut hit_left), hp(&mut hit_right));
                let (bh, ph) = if build_left { (hl, hr) } else { (hr, hl) };
                let ir = item_rows.view_mut().as_mut_ptr();
                // SAFETY: items index the partitioned keys and the flags (of kept rows per side).
                launch(stream, "hash match count", || unsafe { K::COUNT(bk, pk, it, work.count as i64, ir, bh, ph, stream.raw()) })?;
            }
            if semi_anti && !verifying {
                (0, Outputs::none(stream)?, (hit_left, hit_right), None)
            } else {
                let (item_off, inner) = offsets_u64(stream, &item_rows.view())?;
                drop(item_rows);
                let inner = usize::try_from(inner).map_err(|_| Error::too_large("join output rows", inner, usize::MAX as u64))?;
                // The unmatched rows come after the pairs: size the outputs for them too.
                let extra = |side: &SideKeys<'_, K>, hit: &Option<DeviceBuffer<u8>>| -> Result<usize> {
                    Ok(match hit {
                        Some(h) => rows_where(stream, &h.view(), false, None)?.len() + side.never.as_ref().map_or(0, |n| n.len()),
                        None => 0,
                    })
                };
                let total = if verifying || jt == JoinType::Inner {
                    inner
                } else {
                    inner + if jt.keeps_unmatched_left() { extra(&p.left, &hit_left)? } else { 0 } + if jt.keeps_unmatched_right() { extra(&p.right, &hit_right)? } else { 0 }
                };
                let mut o = alloc_outputs(Some(inner), total)?;
                let mut moved = moved_flag()?;
                if inner > 0 {
                    let (b, pr) = writers(&mut o, &mut moved);
                    let io = item_off.view().as_ptr();
                    // SAFETY: outputs hold at least `inner` rows; ids / vals cover the partitioned rows.
                    launch(stream, "hash match write", || unsafe { K::WRITE(bk, pk, it, work.count as i64, io, &b, &pr, stream.raw()) })?;
                }
                (inner, o, (hit_left, hit_right), moved)
            }
        }
    };
    let (hit_left, hit_right) = hits;

    if verifying {
        // Hashed composite keys: candidate pairs in input rows, verified, then any join type.
        drop((tl, tr, work));
        let (a, b) = (o.map_l.map, o.map_r.map);
        let (il, ir) = p.verify.as_ref().expect("verifying");
        let (a, b) = verify(stream, &a.view(), &b.view(), il, ir)?;
        let maps = from_inner_pairs(stream, a, b, p.left.n, p.right.n, jt)?;
        clock.mark(stream)?;
        return finish_um(stream, maps, req, clock, stats);
    }

    if semi_anti {
        // One side's rows from its flags.
        let left_side = jt.has_left_map();
        let semi = matches!(jt, JoinType::LeftSemi | JoinType::RightSemi);
        let (side, t, hit) = if left_side { (&p.left, &tl, &hit_left) } else { (&p.right, &tr, &hit_right) };
        let rows = side_rows(stream, side, t, hit.as_ref().expect("flags"), semi, om)?;
        let rows_n = rows.len();
        let empty = stream.alloc::<u32>(0)?;
        let (ml, mr) = if left_side { (rows, empty) } else { (empty, rows) };
        drop((work, tl.keys, tl.ids, tr.keys, tr.ids));
        clock.mark(stream)?;
        if !om {
            return finish_um(stream, GatherMaps::new(jt, ml, mr), req, clock, stats);
        }
        let (map, pay, sidek, col0, offsets) = if left_side { (ml, lp, &p.left, tl.col0, tl.offsets) } else { (mr, rp, &p.right, tr.col0, tr.offsets) };
        let m = materialize_om(stream, sidek, &offsets.view(), pay, col0, None, SideMap { map, start: 0 }, rows_n, None, bits, false)?;
        let (left, right) = if left_side { (Some(m), None) } else { (None, Some(m)) };
        clock.mark(stream)?;
        clock.finish(&mut stats)?;
        return Ok(JoinedRelation { join_type: jt, rows: rows_n as u64, left, right, maps: None, stats });
    }

    // Inner and outer joins: [inner pairs][unmatched left, NONE][NONE, unmatched right].
    let ul = if jt.keeps_unmatched_left() { Some(side_rows(stream, &p.left, &tl, hit_left.as_ref().expect("flags"), false, om)?) } else { None };
    let ur = if jt.keeps_unmatched_right() { Some(side_rows(stream, &p.right, &tr, hit_right.as_ref().expect("flags"), false, om)?) } else { None };
    drop((hit_left, hit_right));
    let (nul, nur) = (ul.as_ref().map_or(0, |u| u.len()), ur.as_ref().map_or(0, |u| u.len()));
    let total = inner + nul + nur;
    {
        let none = gpujoin_primitives::NO_ROW;
        let (sl, sr) = (o.map_l.start, o.map_r.start);
        if let Some(u) = &ul {
            stream.copy_device_to_device(&u.view(), &mut o.map_l.map.slice_mut(inner - sl..inner - sl + nul))?;
            stream.fill_u32_bits(&mut o.map_r.map.slice_mut(inner - sr..inner - sr + nul), none)?;
        }
        if let Some(u) = &ur {
            stream.fill_u32_bits(&mut o.map_l.map.slice_mut(inner + nul - sl..), none)?;
            stream.copy_device_to_device(&u.view(), &mut o.map_r.map.slice_mut(inner + nul - sr..))?;
        }
    }
    drop((ul, ur, work));
    // OM: when the pairs are all the probe side's rows in their partitioned order, its
    // transformed columns are its output as they stand (asked of the device only when the side
    // has a column left to gather).
    let (probe, probe_cols, probe_fused) = if build_left { (&p.right, rp, o.out0_r.is_some()) } else { (&p.left, lp, o.out0_l.is_some()) };
    let in_place = match &moved {
        Some(f) if inner == total && total == probe.n && probe_cols.len() > probe_fused as usize => stream.copy_to_host(&f.view())?[0] == 0,
        _ => false,
    };
    drop(moved);
    stats.probe_rows_in_place = in_place;
    let (col0_l, col0_r) = (tl.col0, tr.col0);
    let (offsets_l, offsets_r) = (tl.offsets, tr.offsets);
    drop((tl.keys, tl.ids, tr.keys, tr.ids));
    clock.mark(stream)?;

    if !om {
        let maps = GatherMaps::new(jt, o.map_l.map, o.map_r.map);
        return finish_um(stream, maps, req, clock, stats);
    }
    // 3. Materialize from the transformed relations.
    let nulls_l = jt.keeps_unmatched_right().then_some((inner + nul, total));
    let nulls_r = jt.keeps_unmatched_left().then_some((inner, inner + nul));
    // The fused first columns get their rows after the pairs; their transformed copies go.
    let col0_l = finish_fused(stream, col0_l, &mut o.out0_l, &o.map_l, inner)?;
    let col0_r = finish_fused(stream, col0_r, &mut o.out0_r, &o.map_r, inner)?;
    // Then the probe (larger) side's columns, while the output has the fewest columns, and its
    // map goes; then the build side's.
    let Outputs { map_l, map_r, out0_l, out0_r } = o;
    let (left, right) = if build_left {
        let right = materialize_om(stream, &p.right, &offsets_r.view(), rp, col0_r, out0_r, map_r, total, nulls_r, bits, in_place)?;
        let left = materialize_om(stream, &p.left, &offsets_l.view(), lp, col0_l, out0_l, map_l, total, nulls_l, bits, false)?;
        (left, right)
    } else {
        let left = materialize_om(stream, &p.left, &offsets_l.view(), lp, col0_l, out0_l, map_l, total, nulls_l, bits, in_place)?;
        let right = materialize_om(stream, &p.right, &offsets_r.view(), rp, col0_r, out0_r, map_r, total, nulls_r, bits, false)?;
        (left, right)
    };
    clock.mark(stream)?;
    clock.finish(&mut stats)?;
    Ok(JoinedRelation { join_type: jt, rows: total as u64, left: Some(left), right: Some(right), maps: None, stats })
}

/// The output buffers of the match: both sides' maps and the first payload columns (OM).
struct Outputs {
    map_l: SideMap,
    map_r: SideMap,
    out0_l: Option<BitsBuf>,
    out0_r: Option<BitsBuf>,
}

impl Outputs {
    fn none(stream: &Stream) -> Result<Outputs> {
        let m = || -> Result<SideMap> { Ok(SideMap { map: stream.alloc::<u32>(0)?, start: 0 }) };
        Ok(Outputs { map_l: m()?, map_r: m()?, out0_l: None, out0_r: None })
    }
    /// Keeps the first `rows` rows (of buffers allocated from row 0).
    fn truncate(&mut self, rows: usize) {
        for m in [&mut self.map_l, &mut self.map_r] {
            if m.start == 0 {
                m.map.truncate(rows);
            } else {
                m.start = rows;
                m.map.truncate(0);
            }
        }
        for o in [&mut self.out0_l, &mut self.out0_r].into_iter().flatten() {
            match o {
                BitsBuf::B32(b) => b.truncate(rows),
                BitsBuf::B64(b) => b.truncate(rows),
            }
        }
    }
}

/// A fused first column (`out0`, whose inner rows the match wrote): the rows after the inner
/// ones gathered through the map's tail, and its transformed copy dropped. Returns the
/// transformed first column of a side whose first column is not fused.
fn finish_fused(stream: &Stream, col0: Option<BitsBuf>, out0: &mut Option<BitsBuf>, m: &SideMap, inner: usize) -> Result<Option<BitsBuf>> {
    match (col0, out0.as_mut()) {
        (Some(t0), Some(o0)) => {
            let tail = m.map.slice(inner - m.start..);
            gather_bits(stream, t0.bits(), &tail, o0, inner)?;
            Ok(None)
        }
        (c, _) => Ok(c),
    }
}

/// OM materialization of one side: `out0`, the complete first column when the match wrote it;
/// otherwise `col0`, its transformed copy, when the transform made it. Every other column is
/// transformed ([`transform_column_chunked`]), gathered through the map (clustered) and dropped
/// before the next; the map is dropped at the end. `in_place`: the map is the identity over all
/// `rows` = the side's rows, so each transformed column is the output itself.
#[allow(clippy::too_many_arguments)]
fn materialize_om<K: HashKey>(
    stream: &Stream,
    side: &SideKeys<'_, K>,
    offsets: &DeviceView<'_, u64>,
    cols: &[ColumnView<'_>],
    mut col0: Option<BitsBuf>,
    out0: Option<BitsBuf>,
    m: SideMap,
    rows: usize,
    nulls: Option<(usize, usize)>,
    bits: u32,
    in_place: bool,
) -> Result<Table> {
    let mut columns = Vec::with_capacity(cols.len());
    if let Some(o0) = out0 {
        columns.push(o0.into_payload(&cols[0]));
    }
    for c in &cols[columns.len()..] {
        let t = match col0.take() {
            Some(t) => t,
            None => transform_column_chunked(stream, side, offsets, Bits::of(c), bits)?,
        };
        if in_place {
            debug_assert_eq!(rows, side.n);
            columns.push(t.into_payload(c));
            continue;
        }
        debug_assert_eq!(m.start, 0);
        let mut out = BitsBuf::alloc(stream, Bits::of(c), rows)?;
        gather_bits(stream, t.bits(), &m.map.view(), &mut out, 0)?;
        drop(t);
        columns.push(out.into_payload(c));
    }
    drop(m);
    let validity = nulls.map(|(b, e)| range_validity(stream, rows, b, e)).transpose()?;
    side_table(stream, columns, validity)
}

/// Maps into the input rows: gathers every payload column through them (UM).
fn finish_um(stream: &Stream, maps: GatherMaps, req: &Request<'_, '_>, mut clock: Clock, mut stats: JoinStats) -> Result<JoinedRelation> {
    let jt = maps.join_type();
    let gather_side = |side: Side, cols: &[ColumnView<'_>]| -> Result<Option<Table>> {
        let Some(map) = maps.side(side) else { return Ok(None) };
        let idx = map.cast::<u32>();
        let mut columns = Vec::with_capacity(cols.len());
        for c in cols {
            let mut out = BitsBuf::alloc(stream, Bits::of(c), idx.len())?;
            gather_bits(stream, Bits::of(c), &idx, &mut out, 0)?;
            columns.push(out.into_payload(c));
        }
        let validity = if maps.nullable(side) { Some(crate::maps::map_validity(stream, &idx)?) } else { None };
        Ok(Some(side_table(stream, columns, validity)?))
    };
    let (left, right) = if req.with_payloads {
        (gather_side(Side::Left, req.left_payloads)?, gather_side(Side::Right, req.right_payloads)?)
    } else {
        (None, None)
    };
    clock.mark(stream)?;
    clock.finish(&mut stats)?;
    Ok(JoinedRelation { join_type: jt, rows: maps.rows(), left, right, maps: Some(maps), stats })
}

fn run_phj(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, opts: JoinOptions, req: &Request<'_, '_>) -> Result<JoinedRelation> {
    check_payloads("left", left.rows(), req.left_payloads)?;
    check_payloads("right", right.rows(), req.right_payloads)?;
    check_comparable(left, right)?;
    if req.with_payloads && req.mode == Materialization::Clustered {
        if let Some(e) = clustered_unsupported(left, right, opts) {
            return Err(e);
        }
    }
    crate::common::check_output_budget(stream, left, right, req.join_type, opts)?;
    let clock = Clock::start(stream, opts.stats)?;
    match prepare(stream, left, right, opts)? {
        AnyPrepared::U32(p) => phj::<u32>(stream, p, req, opts, clock),
        AnyPrepared::U64(p) => phj::<u64>(stream, p, req, opts, clock),
    }
}

/// Why PHJ-OM ([`Materialization::Clustered`]) cannot serve these keys, decided from the key
/// types alone (no device work): composite keys wider than 64 bits are hashed, and the candidate
/// pairs must then be verified against the full keys through maps into the input rows, which
/// the clustered gathers from the partitioned relations do not have. `None`: PHJ-OM serves them
/// (nulls and NaN that match nothing included: they come back as unmatched rows).
pub(crate) fn clustered_unsupported(left: &TableView<'_>, right: &TableView<'_>, opts: JoinOptions) -> Option<Error> {
    (!KeyPlan::new(left, right, opts, 64).exact).then(|| Error::Unsupported {
        what: "PHJ-OM (clustered gathers)".to_string(),
        reason: "composite keys wider than 64 bits are hashed and every candidate pair is verified against the full keys through maps into the input rows, which PHJ-OM does not keep; use Materialization::Unclustered (PHJ-UM)".to_string(),
    })
}

/// Partitioned hash join (PHJ) of any keys, returning gather maps into the input rows with the
/// join's statistics.
///
/// Keys may have 1 to 4 columns of any supported type, with nulls and float equality as `opts`
/// says. No payload is materialized, so there is no [`Materialization`] to choose: the row ids
/// travel through the partitioning (PHJ-UM's transform), and the maps are what either mode of
/// [`partitioned_hash_join_with_payloads`] would match. See the
/// [module docs](self) for the algorithm and the output order, which is the same on every run.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::{ColumnView, TableView}; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// let r = s.copy_from_host(&[3u32, 1, 2])?; // primary keys
/// let f = s.copy_from_host(&[2u32, 2, 3, 9])?; // foreign keys
/// let out = partitioned_hash_join(s, &TableView::single(r.view()), &TableView::single(f.view()), JoinType::Inner, JoinOptions::default())?;
/// let mut pairs = out.maps.pairs()?;
/// pairs.sort();
/// let id = |i| RowId::new(i).unwrap();
/// assert_eq!(pairs, vec![(id(0), id(2)), (id(2), id(0)), (id(2), id(1))]);
/// println!("match phase: {} ms", out.stats.match_ms);
/// # Ok(()) }
/// ```
pub fn partitioned_hash_join(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions) -> Result<HashJoinOutput> {
    let req = Request { join_type, mode: Materialization::Unclustered, left_payloads: &[], right_payloads: &[], with_payloads: false };
    let out = run_phj(stream, left, right, opts, &req)?;
    let maps = out.maps.ok_or_else(|| Error::invalid("internal: PHJ-UM produced no maps"))?;
    Ok(HashJoinOutput { maps, stats: out.stats })
}

/// Partitioned hash join that also materializes payload columns of both sides (4- or 8-byte
/// types, any number, each as long as its side's keys).
///
/// With [`Materialization::Unclustered`] (PHJ-UM) the payloads are gathered from the input
/// columns through the gather maps, which are returned too. With
/// [`Materialization::Clustered`] (PHJ-OM, the paper's Algorithm 1) the first payload column of
/// each side is partitioned with the keys and written by the match itself, the others are
/// partitioned one at a time and gathered with clustered accesses; no maps are returned.
/// PHJ-OM takes any keys that pack into 64 bits; composite keys wider than that are hashed and
/// verified through maps into the input rows, and a `Clustered` request for them is an
/// [`Error::Unsupported`] (before any device work), never a silent PHJ-UM.
/// Outer-join rows with no partner on a side read zero there, and that side's
/// each column's validity marks them null.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::{ColumnView, TableView}; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// let rk = s.copy_from_host(&[1u32, 2, 3])?;
/// let price = s.copy_from_host(&[10.0f64, 20.0, 30.0])?;
/// let sk = s.copy_from_host(&[3u32, 3, 1])?;
/// let qty = s.copy_from_host(&[7i32, 8, 9])?;
/// let out = partitioned_hash_join_with_payloads(
///     s, &TableView::single(rk.view()), &[price.view().into()], &TableView::single(sk.view()), &[qty.view().into()],
///     JoinType::Inner, JoinOptions::default(), Materialization::Clustered)?;
/// assert_eq!(out.rows, 3);
/// let p = out.left.as_ref().unwrap().columns()[0].view().typed::<f64>().unwrap(); // a Float64 column
/// let mut p = s.copy_to_host(&p)?;
/// p.sort_by(f64::total_cmp);
/// assert_eq!(p, vec![10.0, 30.0, 30.0]);
/// # Ok(()) }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn partitioned_hash_join_with_payloads(
    stream: &Stream,
    left: &TableView<'_>,
    left_payloads: &[ColumnView<'_>],
    right: &TableView<'_>,
    right_payloads: &[ColumnView<'_>],
    join_type: JoinType,
    opts: JoinOptions,
    materialization: Materialization,
) -> Result<JoinedRelation> {
    let req = Request { join_type, mode: materialization, left_payloads, right_payloads, with_payloads: true };
    run_phj(stream, left, right, opts, &req)
}

// ---------------------------------------------------------------------------------------------
// Non-partitioned hash join
// ---------------------------------------------------------------------------------------------

fn nphj<K: HashKey>(stream: &Stream, p: Prepared<'_, K>, join_type: JoinType, direct_from: Option<usize>, mut clock: Clock) -> Result<HashJoinOutput> {
    let (nl, nr) = (p.left.kept_len(), p.right.kept_len());
    // The left side builds on ties (the probe side is the larger one, the right one on ties).
    let build_left = nl <= nr;
    let (bs, ps) = if build_left { (&p.left, &p.right) } else { (&p.right, &p.left) };
    let pairs = match unique_build_pairs(stream, bs, ps, direct_from, &mut clock)? {
        Some(pairs) => pairs,
        None => sorted_build_pairs(stream, bs, ps, &mut clock)?,
    };
    nphj_output(stream, &p, build_left, pairs, join_type, clock)
}

/// The non-partitioned hash join's output from its `(probe, build)` row pairs: verified against
/// hashed keys, turned into the join type's maps, the statistics finished.
fn nphj_output<K: HashKey>(stream: &Stream, p: &Prepared<'_, K>, build_left: bool, (probe_rows, build_rows): (DeviceBuffer<u32>, DeviceBuffer<u32>), join_type: JoinType, mut clock: Clock) -> Result<HashJoinOutput> {
    let mut stats = JoinStats { build_side: Some(if build_left { Side::Left } else { Side::Right }), mixed_keys: p.mixed, ..JoinStats::default() };
    let (a, b) = if build_left { (build_rows, probe_rows) } else { (probe_rows, build_rows) };
    let (a, b) = match &p.verify {
        Some((il, ir)) => verify(stream, &a.view(), &b.view(), il, ir)?,
        None => (a, b),
    };
    let maps = from_inner_pairs(stream, a, b, p.left.n, p.right.n, join_type)?;
    clock.mark(stream)?;
    clock.finish(&mut stats)?;
    Ok(HashJoinOutput { maps, stats })
}

/// `Algorithm::Auto`'s unique-build join: the non-partitioned hash join on one of its two tables,
/// run only where that table is known to win, `None` (after at most a reduction, an insert pass
/// and two host reads) where neither applies:
/// - a single key column without nulls of a 4- or 8-byte integer type (its raw bits);
/// - no output budget in `opts`;
/// - the direct-address table: at least `opts`' direct-address minimum of build rows (2^18), and
///   dense build keys, whose span `max - min + 1` takes at most `max_direct_bytes` of 4-byte
///   slots (and at most [`DIRECT_TABLE_BYTES_PER_BUILD_ROW`] a build row, as in the join itself);
/// - otherwise the hash table, where it takes at most `max_hash_bytes`;
/// - unique build keys (a repeated key stops the attempt after the insert pass).
///
/// The output is [`non_partitioned_hash_join`]'s (order included). Build keys `[12, 10, 13]`
/// with `max_direct_bytes` 16: table `[1, -, 0, 2]` from 10, probe rows in order.
pub(crate) fn nphj_where_unique(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions, max_direct_bytes: usize, max_hash_bytes: usize) -> Result<Option<UniqueJoin>> {
    check_comparable(left, right)?;
    // With an output budget the algorithm that runs instead counts the output first.
    if opts.output_budget.is_some() || !opts.auto_asks_unique() {
        return Ok(None);
    }
    let Some(prepared) = prepare_fast(left, right) else { return Ok(None) };
    let bs_rows = left.rows().min(right.rows());
    let direct = opts.direct_address_min_rows().is_some_and(|m| bs_rows >= m.max(1)) && bs_rows.saturating_mul(4) <= max_direct_bytes;
    let hash = bs_rows > 0 && unique_hash_table_bytes(bs_rows) <= max_hash_bytes;
    if !direct && !hash {
        return Ok(None);
    }
    let limits = UniqueLimits { direct: direct.then_some(max_direct_bytes), hash };
    let clock = Clock::start(stream, opts.stats)?;
    match prepared {
        AnyPrepared::U32(p) => nphj_unique::<u32>(stream, p, join_type, limits, clock),
        AnyPrepared::U64(p) => nphj_unique::<u64>(stream, p, join_type, limits, clock),
    }
}

/// Which tables [`nphj_where_unique`] may take: the direct-address table within `direct` bytes,
/// the hash table.
#[derive(Clone, Copy)]
struct UniqueLimits {
    direct: Option<usize>,
    hash: bool,
}

/// What [`nphj_where_unique`] ran: the join's output and its table.
pub(crate) struct UniqueJoin {
    pub out: HashJoinOutput,
    pub table: UniqueTableUsed,
}

/// The table of a [`UniqueJoin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UniqueTableUsed {
    /// The direct-address table of `span` 4-byte slots (the build keys' `max - min + 1`).
    Direct { span: u64 },
    /// The hash table of `bytes` bytes.
    Hash { bytes: u64 },
}

fn nphj_unique<K: HashKey>(stream: &Stream, p: Prepared<'_, K>, join_type: JoinType, limits: UniqueLimits, mut clock: Clock) -> Result<Option<UniqueJoin>> {
    let build_left = p.left.kept_len() <= p.right.kept_len();
    let (bs, ps) = if build_left { (&p.left, &p.right) } else { (&p.right, &p.left) };
    let nb = bs.kept_len();
    let dense = match limits.direct {
        Some(max) => dense_span(stream, bs, direct_table_max_bytes(nb).min(max))?,
        None => None,
    };
    let (table, used) = match dense {
        Some((min, span)) => (UniqueTable::Direct { min, span }, UniqueTableUsed::Direct { span }),
        None if limits.hash => (UniqueTable::Hash { buckets: unique_hash_buckets(nb) }, UniqueTableUsed::Hash { bytes: unique_hash_table_bytes(nb) as u64 }),
        None => return Ok(None),
    };
    let Some(pairs) = table.pairs(stream, bs, ps, &mut clock)? else { return Ok(None) };
    let out = nphj_output(stream, &p, build_left, pairs, join_type, clock)?;
    Ok(Some(UniqueJoin { out, table: used }))
}

/// The most bytes a build row the direct-address table may take (8 slots of 4 bytes: a span of
/// at most 8 keys a build row). Measured on the H100 (`libcudf/i64_dense_10m_30pct_nphj`, 10M
/// build keys over a span of 4 a row): the 160 MB direct-address table 1.03 ms, the 64 MiB hash
/// table 1.33 ms.
pub(crate) const DIRECT_TABLE_BYTES_PER_BUILD_ROW: usize = 32;

/// The most bytes of a direct-address table for `nb` build rows.
fn direct_table_max_bytes(nb: usize) -> usize {
    nb.saturating_mul(DIRECT_TABLE_BYTES_PER_BUILD_ROW)
}

/// Buckets of the unique-build hash table for `nb` build rows: 8 four-byte slots a bucket (one
/// 32-byte sector), at least 5/3 slots a build row (at most 60% full), a power of two: 10M build
/// rows take 2^21 buckets, 64 MiB.
fn unique_hash_buckets(nb: usize) -> usize {
    (nb.saturating_mul(5).div_ceil(3)).div_ceil(UNIQUE_BUCKET_SLOTS).max(1).next_power_of_two()
}

/// Slots of a bucket of the unique-build hash table (`hash_global.cu`).
const UNIQUE_BUCKET_SLOTS: usize = 8;

/// Bytes of the unique-build hash table for `nb` build rows.
fn unique_hash_table_bytes(nb: usize) -> usize {
    unique_hash_buckets(nb) * UNIQUE_BUCKET_SLOTS * 4
}

/// The unique-build path of the non-partitioned hash join: one table slot a build row (no sort),
/// one lookup a probe row, the hits compacted in probe order. The `(probe, build)` row pairs, or
/// `None` when a build key repeats (the sorted path then runs; the attempt
/// costs one pass over the build keys and one host read). From `direct_from` build rows
/// ([`JoinOptions`]'s testing options; 2^18 otherwise), dense build keys take the direct-address
/// table ([`dense_span`]: one more reduction and host read).
fn unique_build_pairs<K: HashKey>(stream: &Stream, bs: &SideKeys<'_, K>, ps: &SideKeys<'_, K>, direct_from: Option<usize>, clock: &mut Clock) -> Result<Option<(DeviceBuffer<u32>, DeviceBuffer<u32>)>> {
    let nb = bs.kept_len();
    let dense = match direct_from {
        Some(rows) if nb >= rows => dense_span(stream, bs, direct_table_max_bytes(nb))?,
        _ => None,
    };
    let table = match dense {
        Some((min, span)) => UniqueTable::Direct { min, span },
        None => UniqueTable::Hash { buckets: unique_hash_buckets(nb) },
    };
    table.pairs(stream, bs, ps, clock)
}

/// The table of the unique-build path: one slot a build row.
enum UniqueTable<K> {
    /// Open addressing on the key's hash: `buckets` buckets of 8 four-byte slots, each slot a
    /// build position and a tag of its key's hash (the keys stay in the build side's column).
    Hash { buckets: usize },
    /// Direct addressing: `span` slots of a `u32` row, key `k` in slot `k - min`.
    Direct { min: K, span: u64 },
}

impl<K: HashKey> UniqueTable<K> {
    /// Inserts every build row, reads the repeat flag (`None`: a key repeats), looks every probe
    /// key up and compacts the hits in probe order.
    fn pairs(&self, stream: &Stream, bs: &SideKeys<'_, K>, ps: &SideKeys<'_, K>, clock: &mut Clock) -> Result<Option<(DeviceBuffer<u32>, DeviceBuffer<u32>)>> {
        let bytes = match *self {
            UniqueTable::Hash { buckets } => buckets * UNIQUE_BUCKET_SLOTS * 4,
            UniqueTable::Direct { span, .. } => span as usize * 4,
        };
        let mut table = stream.alloc::<u8>(bytes)?;
        stream.memset_bytes(&mut table.view_mut(), 0xff)?;
        let mut flags = stream.alloc_zeroed::<u32>(1)?;
        let nb = bs.kept_len();
        {
            let (k, t, f) = (bs.keys.view().as_ptr(), table.view_mut().as_mut_ptr(), flags.view_mut().as_mut_ptr());
            let ids = bs.kept.as_ref().map_or(std::ptr::null(), |k| k.view().as_ptr());
            match *self {
                // SAFETY: nb keys; the table holds `buckets` buckets of 8 four-byte slots, at
                // least 5/3 slots a key.
                UniqueTable::Hash { buckets } => launch(stream, "unique hash table insert", || unsafe { K::UNIQUE_INSERT(k, nb as i64, t.cast(), buckets as i64, f, stream.raw()) })?,
                // SAFETY: nb keys (and row ids), each in [min, min + span); the table holds span
                // 4-byte slots.
                UniqueTable::Direct { min, span } => launch(stream, "direct-address table insert", || unsafe { K::DIRECT_INSERT(k, ids, nb as i64, min, t.cast(), span as i64, f, stream.raw()) })?,
            }
        }
        if stream.copy_to_host(&flags.view())?[0] != 0 {
            return Ok(None);
        }
        clock.mark(stream)?;
        let np = ps.kept_len();
        let mut matched = stream.alloc::<u32>(np)?;
        let mut hit = stream.alloc::<u8>(np)?;
        {
            let (t, pk, m, h) = (table.view().as_ptr(), ps.keys.view().as_ptr(), matched.view_mut().as_mut_ptr(), hit.view_mut().as_mut_ptr());
            let (bk, ids) = (bs.keys.view().as_ptr(), bs.kept.as_ref().map_or(std::ptr::null(), |k| k.view().as_ptr()));
            match *self {
                // SAFETY: np probe keys, np outputs each; the table as inserted above from the nb
                // build keys (and their row ids where some rows were set aside).
                UniqueTable::Hash { buckets } => launch(stream, "unique hash table probe", || unsafe { K::UNIQUE_PROBE(t.cast(), buckets as i64, bk, nb as i64, ids, pk, np as i64, m, h, stream.raw()) })?,
                // SAFETY: as above.
                UniqueTable::Direct { min, span } => launch(stream, "direct-address table probe", || unsafe { K::DIRECT_PROBE(t.cast(), min, span as i64, pk, np as i64, m, h, stream.raw()) })?,
            }
        }
        drop(table);
        compact_hits(stream, ps, matched, hit).map(Some)
    }
}

/// The `(probe, build)` row pairs of the probe rows whose `hit` is set, in probe order, from each
/// probe row's build row (`matched`).
fn compact_hits<K: HashKey>(stream: &Stream, ps: &SideKeys<'_, K>, matched: DeviceBuffer<u32>, hit: DeviceBuffer<u8>) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
    let at = rows_where(stream, &hit.view(), true, None)?;
    drop(hit);
    let build = gpujoin_primitives::gather(stream, &matched.view(), &at.view(), 0)?;
    drop(matched);
    let probe = match &ps.kept {
        Some(k) => gpujoin_primitives::gather(stream, &k.view(), &at.view(), 0)?,
        None => at,
    };
    Ok((probe, build))
}

/// The smallest build key and the span `max - min + 1` of the build keys, when a direct-address
/// table of that many 4-byte slots takes at most `max_table_bytes` (the unique-build hash
/// table's size, and for Auto also its share of the L2): build keys `[12, 10, 13]` give
/// `(10, 4)`. One reduction over the build keys and one host read.
fn dense_span<K: HashKey>(stream: &Stream, bs: &SideKeys<'_, K>, max_table_bytes: usize) -> Result<Option<(K, u64)>> {
    let nb = bs.kept_len();
    if nb == 0 {
        return Ok(None);
    }
    let mut range = stream.copy_from_host(&[K::MAX, K::MIN])?;
    {
        let (k, r) = (bs.keys.view().as_ptr(), range.view_mut().as_mut_ptr());
        // SAFETY: nb keys, no validity (the kept keys); two words of range, the empty range.
        launch(stream, "build key range", || unsafe { K::RANGE(k, std::ptr::null(), nb as i64, r, stream.raw()) })?;
    }
    let folded = stream.copy_to_host(&range.view())?;
    let (min, max) = (folded[0], folded[1]);
    // At least one key: min <= max.
    let span = (max.to_u64() - min.to_u64()).checked_add(1);
    Ok(span.filter(|&s| s.saturating_mul(4) <= max_table_bytes as u64).map(|s| (min, s)))
}

/// The sorted path of the non-partitioned hash join (any build keys): the build side sorted by
/// key with its row ids, each run of equal keys one table slot; every probe row looks its key up,
/// a scan gives the offsets, and a load-balancing search writes the `(probe, build)` row pairs.
fn sorted_build_pairs<K: HashKey>(stream: &Stream, bs: &SideKeys<'_, K>, ps: &SideKeys<'_, K>, clock: &mut Clock) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
    // Transform: the build side sorted by key with its row ids, runs of equal keys in a table.
    let nb = bs.kept_len();
    let iota_ids;
    let ids = match &bs.kept {
        Some(k) => k.view(),
        None => {
            iota_ids = iota(stream, nb)?;
            iota_ids.view()
        }
    };
    let mut sk = stream.alloc::<K>(nb)?;
    let mut sid = stream.alloc::<u32>(nb)?;
    sort_pairs(stream, &bs.keys.view(), &ids, &mut sk.view_mut(), &mut sid.view_mut(), SortOrder::Ascending, None)?;
    let mut flags = stream.alloc::<u8>(nb)?;
    let (k, f) = (sk.view().as_ptr(), flags.view_mut().as_mut_ptr());
    // SAFETY: nb keys and flags.
    launch(stream, "run flags", || unsafe { K::RUN_FLAGS(k, nb as i64, f, stream.raw()) })?;
    let starts = rows_where(stream, &flags.view(), true, None)?;
    drop(flags);
    let runs = starts.len();
    let capacity = (2 * runs).max(2).next_power_of_two();
    let mut table = stream.alloc_zeroed::<u32>(capacity * 4)?;
    let (st, tb) = (starts.view().as_ptr(), table.view_mut().as_mut_ptr());
    // SAFETY: runs start positions into nb sorted keys; the table holds `capacity` slots.
    launch(stream, "hash table insert", || unsafe { K::INSERT(k, nb as i64, st, runs as i64, tb, capacity as i64, stream.raw()) })?;
    drop(starts);
    clock.mark(stream)?;
    // Match: look up every probe key, scan the counts, expand the pairs.
    let np = ps.kept_len();
    let mut start = stream.alloc::<u32>(np)?;
    let mut count = stream.alloc::<u32>(np)?;
    let (pk, so, co, tp) = (ps.keys.view().as_ptr(), start.view_mut().as_mut_ptr(), count.view_mut().as_mut_ptr(), table.view().as_ptr());
    // SAFETY: np probe keys, np outputs each.
    launch(stream, "hash table probe", || unsafe { K::PROBE(tp, capacity as i64, pk, np as i64, so, co, stream.raw()) })?;
    drop(table);
    let (offsets, total) = count_offsets(stream, &count.view())?;
    let total = usize::try_from(total).map_err(|_| Error::too_large("join output rows", total, usize::MAX as u64))?;
    let mut out_p = stream.alloc::<u32>(total)?;
    let mut out_b = stream.alloc::<u32>(total)?;
    {
        let (o, s, c) = (offsets.view().as_ptr(), start.view().as_ptr(), count.view().as_ptr());
        let pids = ps.kept.as_ref().map_or(std::ptr::null(), |k| k.view().as_ptr());
        let (bids, op, ob) = (sid.view().as_ptr(), out_p.view_mut().as_mut_ptr(), out_b.view_mut().as_mut_ptr());
        // SAFETY: offsets/start/count cover np rows; outputs hold `total` pairs.
        with_temp(stream, "hash join expand", |t, tbytes| unsafe { ffi::gj_h_expand(t, tbytes, o, np as i64, total as i64, s, c, pids, bids, op, ob, stream.raw()) })?;
    }
    drop((offsets, start, count, sk, sid));
    Ok((out_p, out_b))
}

/// Non-partitioned hash join with its statistics (see [`non_partitioned_hash_join`]; collected whatever
/// [`JoinOptions::stats`] says).
pub fn non_partitioned_hash_join_with_stats(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions) -> Result<HashJoinOutput> {
    nphj_with(stream, left, right, join_type, JoinOptions { stats: true, ..opts })
}

/// The non-partitioned hash join, statistics when [`JoinOptions::stats`].
pub(crate) fn nphj_with(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions) -> Result<HashJoinOutput> {
    check_comparable(left, right)?;
    crate::common::check_output_budget(stream, left, right, join_type, opts)?;
    let clock = Clock::start(stream, opts.stats)?;
    match prepare(stream, left, right, opts)? {
        AnyPrepared::U32(p) => nphj::<u32>(stream, p, join_type, opts.direct_address_min_rows(), clock),
        AnyPrepared::U64(p) => nphj::<u64>(stream, p, join_type, opts.direct_address_min_rows(), clock),
    }
}

/// Non-partitioned hash join: one global hash table of the smaller side's distinct keys, probed
/// by every row of the other side. Any keys and join type, as [`partitioned_hash_join`].
///
/// Output order: inner pairs by probe row (the larger side; the right side on ties) in input
/// order, each with its build matches in input order; then unmatched left rows, then unmatched
/// right rows, each in input order. Semi and anti joins return rows in input order.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::{ColumnView, TableView}; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// let a = s.copy_from_host(&[5i64, 7])?;
/// let b = s.copy_from_host(&[7i64, 7, 8])?;
/// let maps = non_partitioned_hash_join(s, &TableView::single(a.view()), &TableView::single(b.view()), JoinType::Full, JoinOptions::default())?;
/// assert_eq!(maps.rows(), 4); // (1,0) (1,1) (0,-) (-,2)
/// # Ok(()) }
/// ```
pub fn non_partitioned_hash_join(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions) -> Result<GatherMaps> {
    Ok(nphj_with(stream, left, right, join_type, opts)?.maps)
}
