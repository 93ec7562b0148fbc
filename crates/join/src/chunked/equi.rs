//! The equi-join as a [`ChunkSource`]: the sort-merge join (seed 000) on any keys the equi-joins
//! take (1 to 4 columns of any key type, NULLs under either [`NullEquality`](crate::NullEquality),
//! floats under either [`NanEquality`](crate::NanEquality)), whose per-left-row counts come from
//! two sorted searches, so any range of its output rows can be written on its own.
//!
//! Steps (those of [`crate::sort_merge_join`], the expansion restricted to a chunk):
//! 0. one scalar key per row: the packed key images when they fit 64 bits, else the dense rank of
//!    the full key among both sides' rows (exact: no hash, nothing to verify); rows that can match
//!    nothing (a NULL key under `NullNotEqual`, NaN under `NanNeverEqual`) are set aside;
//! 1. sort each side's remaining rows by key with their row ids (stable: equal keys keep row
//!    order); keys of at most 32 bits are sorted as `u32`;
//! 2. sorted search: lower and upper bound of every sorted left key in the sorted right keys
//!    (and, for right and full joins, which right rows match at all);
//! 3. counts `upper - lower` (1 for an unmatched left row of left and full joins), scanned into
//!    the offsets; the rows no left row owns form the tail;
//! 4. per chunk: the chunk's slice of the lower bounds (the first one advanced past the rows of
//!    a split row that earlier chunks wrote), its counts (the last one cut where the chunk ends
//!    inside a row), their scan, and the load-balancing expansion into the chunk's maps.
//!
//! Output order (the concatenated chunks): matches by key, then left row, then right row, with an
//! unmatched left row at its key's place; then the tail: the left rows that can match nothing
//! (left and full joins), in row order; the unmatched right rows in key order; the right rows that
//! can match nothing, in row order (right and full joins). For one key column without NULL or NaN
//! this is [`crate::sort_merge_join`]'s order. Semi and anti joins (at most one row per input row)
//! are computed whole by [`crate::sort_merge_join`] and delivered as the tail in chunks.

use std::ops::Range;

use gpujoin_cub_sys::result::{launch, with_temp};
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};
use gpujoin_primitives::{exclusive_sum, sorted_search, Bound, SearchOutputs, SortPairsOwned};

use super::host::{stream_to_host, HostChunk, HostStreamOptions, StreamStats};
use super::tail::Tail;
use super::{ChunkBudget, ChunkRange, ChunkSource, JoinChunks};
use crate::common::rows_where;
use crate::kernels::sys::join as ffi;
use crate::keys::{scalar_keys, ScalarKeys};
use crate::table::TableView;
use crate::maps::GatherMaps;
use crate::sort_merge::{merge_offsets, sort_merge_join, sort_with_rows, SortedKey};
use crate::types::{JoinOptions, JoinType, RowId};

/// An equi-join, ready to be produced in chunks (see the module docs).
///
/// Holds the sorted row ids of both sides, the bounds and offsets (about 20 bytes per left row
/// and 5 per right row) and the tail's row ids; not the output.
pub struct EquiChunkSource {
    join_type: JoinType,
    /// Left row ids in key order (rows that can match).
    left_rows: DeviceBuffer<u32>,
    /// Right row ids in key order (rows that can match).
    right_rows: DeviceBuffer<u32>,
    lower: DeviceBuffer<u32>,
    upper: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u64>,
    /// The rows no left row owns (or the one map of a semi/anti join).
    tail: Tail,
}

/// Sorted keys, bounds, counts and the unmatched right rows in key order (steps 1-3).
struct Merged {
    left_rows: DeviceBuffer<u32>,
    right_rows: DeviceBuffer<u32>,
    lower: DeviceBuffer<u32>,
    upper: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u64>,
    unmatched_right: Option<DeviceBuffer<u32>>,
}

impl Merged {
    /// The chunk source of the merged rows; `never_left` and `never_right` (rows that can match
    /// nothing, kept by the join type) go to the tail, the right ones after the unmatched right rows.
    fn into_source(self, stream: &Stream, join_type: JoinType, never_left: DeviceBuffer<u32>, never_right: DeviceBuffer<u32>) -> Result<EquiChunkSource> {
        let tail_right = match self.unmatched_right {
            Some(u) if !never_right.is_empty() => crate::common::concat(stream, &[u.view(), never_right.view()])?,
            Some(u) => u,
            None => never_right,
        };
        Ok(EquiChunkSource {
            join_type,
            left_rows: self.left_rows,
            right_rows: self.right_rows,
            lower: self.lower,
            upper: self.upper,
            offsets: self.offsets,
            tail: Tail { left: never_left, right: tail_right },
        })
    }
}

fn merge_bounds<K: SortedKey + SortPairsOwned>(
    stream: &Stream,
    (left_keys, left_rows): (DeviceBuffer<K>, DeviceBuffer<u32>),
    (right_keys, right_rows): (DeviceBuffer<K>, DeviceBuffer<u32>),
    bits: u32,
    join_type: JoinType,
) -> Result<Merged> {
    // 1. Sort both sides with row ids.
    let (lk, left_rows) = sort_with_rows(stream, left_keys, Some(left_rows), bits)?;
    let (rk, right_rows) = sort_with_rows(stream, right_keys, Some(right_rows), bits)?;
    // 2. Lower bounds (with the right rows' match flags) and upper bounds.
    let keeps_right = join_type.keeps_unmatched_right();
    let lower = sorted_search(stream, &lk.view(), &rk.view(), Bound::Lower, SearchOutputs { a_index: true, a_match: false, b_match: keeps_right })?;
    let upper = sorted_search(stream, &lk.view(), &rk.view(), Bound::Upper, SearchOutputs::INDEX)?.a_index.unwrap();
    drop((lk, rk));
    // 3. Counts and offsets; the unmatched right rows.
    let (lb, b_match) = (lower.a_index.unwrap(), lower.b_match);
    let (offsets, _total) = merge_offsets(stream, &lb.view(), &upper.view(), join_type.keeps_unmatched_left())?;
    let unmatched_right = b_match.map(|m| rows_where(stream, &m.view(), false, Some(&right_rows.view()))).transpose()?;
    Ok(Merged { left_rows, right_rows, lower: lb, upper, offsets, unmatched_right })
}

impl EquiChunkSource {
    /// Prepares the keys, sorts, searches and counts (steps 0-3). Waits for the stream a few
    /// times (whether any key can match nothing, the total).
    ///
    /// Errors: keys whose column counts or types differ, more than [`RowId::MAX_ROWS`] rows a
    /// side, and (wide composite keys only) both sides together at `u32::MAX` rows or more.
    pub fn new(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions) -> Result<Self> {
        crate::keys::check_comparable(left, right)?;
        // The output comes in chunks: an output budget does not apply.
        let opts = JoinOptions { output_budget: None, ..opts };
        for (side, n) in [("left", left.rows()), ("right", right.rows())] {
            if n as u64 > RowId::MAX_ROWS {
                return Err(Error::too_large(format!("{side} rows"), n as u64, RowId::MAX_ROWS));
            }
        }
        let empty = || stream.alloc::<u32>(0);
        if !matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
            // Semi and anti joins: at most one row per input row; computed whole, served as tail.
            let (l, r) = sort_merge_join(stream, left, right, join_type, opts)?.into_raw();
            let (tail_left, tail_right) = if join_type.has_left_map() { (l, empty()?) } else { (empty()?, r) };
            return Ok(EquiChunkSource {
                join_type,
                left_rows: empty()?,
                right_rows: empty()?,
                lower: empty()?,
                upper: empty()?,
                offsets: stream.alloc_zeroed::<u64>(1)?,
                tail: Tail { left: tail_left, right: tail_right },
            });
        }
        // 0. One scalar key per row that can match; the rows that cannot.
        let keeps = (join_type.keeps_unmatched_left(), join_type.keeps_unmatched_right());
        let z = scalar_keys(stream, left, right, opts, keeps, true)?;
        let (never_left, never_right) = (z.never_left, z.never_right);
        let merged = match z.keys {
            ScalarKeys::U32(l, r, bits) => merge_bounds(stream, (l.keys, l.rows), (r.keys, r.rows), bits, join_type)?,
            ScalarKeys::U64(l, r, bits) => merge_bounds(stream, (l.keys, l.rows), (r.keys, r.rows), bits, join_type)?,
        };
        merged.into_source(stream, join_type, never_left, never_right)
    }

    /// The join type.
    pub fn join_type(&self) -> JoinType {
        self.join_type
    }

    fn is_semi_or_anti(&self) -> bool {
        !matches!(self.join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full)
    }

    /// The left rows that can match, in key order (position `i` of [`ChunkSource::offsets`]
    /// is left row `sorted_left_rows()[i]`).
    pub(crate) fn sorted_left_rows(&self) -> DeviceView<'_, u32> {
        self.left_rows.view()
    }
}

impl ChunkSource for EquiChunkSource {
    type Output = GatherMaps;

    fn left_rows(&self) -> u64 {
        self.offsets.len() as u64 - 1
    }

    fn offsets(&self) -> DeviceView<'_, u64> {
        self.offsets.view()
    }

    fn bytes_per_row(&self) -> u64 {
        if self.is_semi_or_anti() {
            4
        } else {
            8
        }
    }

    fn produce(&self, stream: &Stream, range: &ChunkRange) -> Result<GatherMaps> {
        let (r0, r1) = (range.rows.start as usize, range.rows.end as usize);
        if r0 >= r1 || r1 > self.lower.len() || range.is_empty() {
            return Err(Error::invalid(format!("chunk {range:?} of an equi-join with {} left rows", self.lower.len())));
        }
        let rows = usize::try_from(range.len()).map_err(|_| Error::too_large("chunk rows", range.len(), usize::MAX as u64))?;
        let n = r1 - r0;
        // The chunk's lower bounds; the first advanced past rows that earlier chunks wrote.
        let mut lb = stream.copy_from_device(&self.lower.slice(r0..r1))?;
        let skip = range.skip_in_first_row();
        if skip > 0 {
            let first = stream.copy_to_host(&self.lower.slice(r0..r0 + 1))?[0] as u64;
            stream.copy_host_to_device(&[(first + skip) as u32], &mut lb.slice_mut(..1))?;
        }
        // Counts of the chunk's rows; the last cut where the chunk ends inside it.
        let ub = self.upper.slice(r0..r1);
        let mut counts = stream.alloc::<u32>(n)?;
        let (l, u, c) = (lb.view().as_ptr(), ub.as_ptr(), counts.view_mut().as_mut_ptr());
        let keep = self.join_type.keeps_unmatched_left() as i32;
        // SAFETY: n entries each.
        launch(stream, "chunked merge counts", || unsafe { ffi::gj_j_merge_counts(l, u, n as i64, keep, c, stream.raw()) })?;
        if let Some(take) = range.take_in_last_row() {
            let before = if n == 1 { skip } else { 0 };
            stream.copy_host_to_device(&[(take - before) as u32], &mut counts.slice_mut(n - 1..))?;
        }
        // Chunk-local offsets: the scan of the counts, then the chunk's row count.
        let mut offsets = stream.alloc::<u64>(n + 1)?;
        exclusive_sum(stream, &counts.view(), &mut offsets.slice_mut(..n))?;
        stream.copy_host_to_device(&[rows as u64], &mut offsets.slice_mut(n..))?;
        drop(counts);
        let (mut out_a, mut out_b) = crate::common::alloc_output_maps(stream, rows as u64, 2)?;
        {
            let (oa, ob) = (out_a.view_mut().as_mut_ptr(), out_b.view_mut().as_mut_ptr());
            let (o, ar, br) = (offsets.view().as_ptr(), self.left_rows.slice(r0..r1).as_ptr(), self.right_rows.view().as_ptr());
            // SAFETY: offsets has n + 1 entries, lb/ub/ar n entries; the bounds index right_rows;
            // the outputs hold `rows` rows, the last offset.
            with_temp(stream, "chunked merge expand", |t, tb| unsafe {
                ffi::gj_j_merge_expand(t, tb, o, n as i64, rows as i64, l, u, ar, br, oa, ob, stream.raw())
            })?;
        }
        Ok(GatherMaps::new(self.join_type, out_a, out_b))
    }

    fn tail_rows(&self) -> u64 {
        self.tail.rows()
    }

    fn produce_tail(&self, stream: &Stream, range: Range<u64>) -> Result<GatherMaps> {
        self.tail.produce(stream, self.join_type, range)
    }
}

/// The chunks of an equi-join, each holding at most `budget` bytes of maps, produced on `stream`
/// as the iterator advances. Concatenated, they are the join's output in the order of the module
/// docs; the total is exactly [`crate::join_size`]'s.
///
/// ```no_run
/// # use gpujoin_join::chunked::*; use gpujoin_join::{JoinOptions, JoinType}; use gpujoin_join::table::TableView;
/// # fn f(s: &gpujoin_device::Stream, a: &gpujoin_device::DeviceBuffer<i64>, b: &gpujoin_device::DeviceBuffer<i64>) -> gpujoin_device::Result<()> {
/// let (l, r) = (TableView::single(a.view()), TableView::single(b.view()));
/// for chunk in join_chunks(s, &l, &r, JoinType::Left, JoinOptions::default(), ChunkBudget::Bytes(256 << 20))? {
///     let maps = chunk?.data; // at most 2^25 rows
/// }
/// # Ok(()) }
/// ```
pub fn join_chunks(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    join_type: JoinType,
    opts: JoinOptions,
    budget: ChunkBudget,
) -> Result<JoinChunks<EquiChunkSource>> {
    let source = EquiChunkSource::new(stream, left, right, join_type, opts)?;
    JoinChunks::new(stream, source, budget)
}

/// The same chunks streamed into pinned host memory (see [`stream_to_host`]): `consume` gets
/// each chunk's left and right maps as host slices ([`HostChunk::maps`]), in order.
///
/// ```no_run
/// # use gpujoin_join::chunked::*; use gpujoin_join::{JoinOptions, JoinType}; use gpujoin_join::table::TableView;
/// # fn f(s: &gpujoin_device::Stream, a: &gpujoin_device::DeviceBuffer<u32>, b: &gpujoin_device::DeviceBuffer<u32>) -> gpujoin_device::Result<()> {
/// let mut rows = 0u64;
/// let (l, r) = (TableView::single(a.view()), TableView::single(b.view()));
/// let stats = join_chunks_to_host(s, &l, &r, JoinType::Inner, JoinOptions::default(), ChunkBudget::default(), HostStreamOptions::default(), |chunk| {
///     let (left, right) = chunk.maps()?;
///     rows += left.len() as u64;
///     Ok(())
/// })?;
/// println!("{rows} rows, copies {:.0}% overlapped", 100.0 * stats.overlap());
/// # Ok(()) }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn join_chunks_to_host(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    join_type: JoinType,
    opts: JoinOptions,
    budget: ChunkBudget,
    options: HostStreamOptions,
    consume: impl FnMut(HostChunk<'_>) -> Result<()>,
) -> Result<StreamStats> {
    let source = EquiChunkSource::new(stream, left, right, join_type, opts)?;
    stream_to_host(stream, &source, budget, options, consume)
}
