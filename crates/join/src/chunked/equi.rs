//! The equi-join as a [`ChunkSource`]: the sort-merge join (seed 000) on one fixed-width key
//! column, whose per-left-row counts come from two sorted searches, so any range of its output
//! rows can be written on its own.
//!
//! Steps (those of [`crate::sort_merge`], the expansion restricted to a chunk):
//! 1. sort each side by key with its row ids (stable: equal keys keep row order);
//! 2. sorted search: lower and upper bound of every sorted left key in the sorted right keys
//!    (and, for right and full joins, which right rows match at all);
//! 3. counts `upper - lower` (1 for an unmatched left row of left and full joins), scanned into
//!    the offsets; the unmatched right rows form the tail;
//! 4. per chunk: the chunk's slice of the lower bounds (the first one advanced past the rows of
//!    a split row that earlier chunks wrote), its counts (the last one cut where the chunk ends
//!    inside a row), their scan, and the load-balancing expansion into the chunk's maps.
//!
//! Output order (the concatenated chunks): matches by key, then left row, then right row; an
//! unmatched left row at its key's place; then the unmatched right rows in key order (the tail).
//! This is [`crate::sort_merge_join`]'s order for a single key column without nulls. Semi and
//! anti joins (at most one row per input row) are computed whole by [`crate::sort_merge_join`]
//! and delivered as the tail in chunks.

use std::ops::Range;

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};
use gpujoin_primitives::cuda::{launch, with_temp};
use gpujoin_primitives::{
    count_offsets, exclusive_sum, iota_u32, sort_pairs, sorted_search, Bound, SearchOutputs, SortOrder, SortPairsWith,
};

use super::host::{stream_to_host, HostChunk, HostStreamOptions, StreamStats};
use super::{ChunkBudget, ChunkRange, ChunkSource, JoinChunks};
use crate::common::rows_where;
use crate::ffi;
use crate::keys::{DeviceColumn, Keys};
use crate::maps::GatherMaps;
use crate::sort_merge::{sort_merge_join, SortedKey};
use crate::types::{JoinOptions, JoinType, RowId};

/// Key types of the chunked equi-join: `u32, u64, i32, i64`.
pub trait ChunkKey: SortedKey + SortPairsWith<u32> {
    /// The column as a key column of the general joins (e.g. for [`Keys::single`]).
    fn column(v: DeviceView<'_, Self>) -> DeviceColumn<'_>;
}
macro_rules! chunk_key {
    ($($t:ty),*) => {$(
        impl ChunkKey for $t {
            fn column(v: DeviceView<'_, Self>) -> DeviceColumn<'_> {
                v.into()
            }
        }
    )*};
}
chunk_key!(u32, u64, i32, i64);

/// An equi-join on one key column, ready to be produced in chunks (see the module docs).
///
/// Holds the sorted row ids of both sides, the bounds and offsets (about 20 bytes per left row
/// and 5 per right row); not the output.
pub struct EquiChunkSource {
    join_type: JoinType,
    /// Left row ids in key order.
    left_rows: DeviceBuffer<u32>,
    /// Right row ids in key order.
    right_rows: DeviceBuffer<u32>,
    lower: DeviceBuffer<u32>,
    upper: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u64>,
    /// Unmatched right rows (right/full joins), or the one map of a semi/anti join.
    tail: Option<DeviceBuffer<u32>>,
}

fn sorted_with_rows<K: ChunkKey>(stream: &Stream, keys: &DeviceView<'_, K>) -> Result<(DeviceBuffer<K>, DeviceBuffer<u32>)> {
    let n = keys.len();
    let mut ids = stream.alloc::<u32>(n)?;
    iota_u32(stream, &mut ids.view_mut(), 0)?;
    let mut sk = stream.alloc::<K>(n)?;
    let mut sr = stream.alloc::<u32>(n)?;
    sort_pairs(stream, keys, &ids.view(), &mut sk.view_mut(), &mut sr.view_mut(), SortOrder::Ascending, None)?;
    Ok((sk, sr))
}

impl EquiChunkSource {
    /// Sorts, searches and counts (steps 1-3). Waits for the stream once (the total).
    pub fn new<K: ChunkKey>(stream: &Stream, left: &DeviceView<'_, K>, right: &DeviceView<'_, K>, join_type: JoinType) -> Result<Self> {
        for (side, n) in [("left", left.len()), ("right", right.len())] {
            if n as u64 > RowId::MAX_ROWS {
                return Err(Error::too_large(format!("{side} rows"), n as u64, RowId::MAX_ROWS));
            }
        }
        let empty = || stream.alloc::<u32>(0);
        if !matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
            // Semi and anti joins: at most one row per input row; computed whole, served as tail.
            let maps = sort_merge_join(
                stream,
                &Keys::single(K::column(*left)),
                &Keys::single(K::column(*right)),
                join_type,
                JoinOptions::default(),
            )?;
            let (l, r) = maps.into_raw();
            let tail = if join_type.has_left_map() { l } else { r };
            return Ok(EquiChunkSource {
                join_type,
                left_rows: empty()?,
                right_rows: empty()?,
                lower: empty()?,
                upper: empty()?,
                offsets: stream.alloc_zeroed::<u64>(1)?,
                tail: Some(tail),
            });
        }
        // 1. Sort both sides with row ids.
        let (lk, left_rows) = sorted_with_rows(stream, left)?;
        let (rk, right_rows) = sorted_with_rows(stream, right)?;
        // 2. Lower bounds (with the right rows' match flags) and upper bounds.
        let keeps_right = join_type.keeps_unmatched_right();
        let lower = sorted_search(
            stream,
            &lk.view(),
            &rk.view(),
            Bound::Lower,
            SearchOutputs { a_index: true, a_match: false, b_match: keeps_right },
        )?;
        let upper = sorted_search(stream, &lk.view(), &rk.view(), Bound::Upper, SearchOutputs::INDEX)?.a_index.unwrap();
        drop((lk, rk));
        // 3. Counts and offsets; the unmatched right rows.
        let n = left.len();
        let (lb, b_match) = (lower.a_index.unwrap(), lower.b_match);
        let mut counts = stream.alloc::<u32>(n)?;
        let c = counts.view_mut().as_mut_ptr();
        let keep = join_type.keeps_unmatched_left() as i32;
        // SAFETY: n entries each.
        launch(stream, "chunked merge counts", || unsafe {
            ffi::gj_j_merge_counts(lb.view().as_ptr(), upper.view().as_ptr(), n as i64, keep, c, stream.raw())
        })?;
        let (offsets, _total) = count_offsets(stream, &counts.view())?;
        drop(counts);
        let tail = match b_match {
            Some(m) => Some(rows_where(stream, &m.view(), false, Some(&right_rows.view()))?),
            None => None,
        };
        Ok(EquiChunkSource { join_type, left_rows, right_rows, lower: lb, upper, offsets, tail })
    }

    /// The join type.
    pub fn join_type(&self) -> JoinType {
        self.join_type
    }

    fn is_semi_or_anti(&self) -> bool {
        !matches!(self.join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full)
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
        let mut lb = stream.alloc::<u32>(n)?;
        stream.copy_device_to_device(&self.lower.slice(r0..r1), &mut lb.view_mut())?;
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
        self.tail.as_ref().map_or(0, |t| t.len() as u64)
    }

    fn produce_tail(&self, stream: &Stream, range: Range<u64>) -> Result<GatherMaps> {
        let tail = self.tail.as_ref().ok_or_else(|| Error::invalid("this equi-join has no tail rows"))?;
        if range.start >= range.end || range.end > tail.len() as u64 {
            return Err(Error::invalid(format!("tail rows {range:?} of {}", tail.len())));
        }
        let (s, e) = (range.start as usize, range.end as usize);
        let mut rows = stream.alloc::<u32>(e - s)?;
        stream.copy_device_to_device(&tail.slice(s..e), &mut rows.view_mut())?;
        let jt = self.join_type;
        if self.is_semi_or_anti() {
            let none = stream.alloc::<u32>(0)?;
            return Ok(if jt.has_left_map() { GatherMaps::new(jt, rows, none) } else { GatherMaps::new(jt, none, rows) });
        }
        let mut left = stream.alloc::<u32>(e - s)?;
        stream.fill_u32_bits(&mut left.view_mut(), gpujoin_primitives::NO_ROW)?;
        Ok(GatherMaps::new(jt, left, rows))
    }
}

/// The chunks of an equi-join of one key column, each holding at most `budget` bytes of maps,
/// produced on `stream` as the iterator advances. Concatenated, they are the join's output in
/// the order of the module docs; the total is exactly [`crate::join_size`]'s.
///
/// ```no_run
/// # use gpujoin_join::chunked::*; use gpujoin_join::JoinType;
/// # fn f(s: &gpujoin_device::Stream, a: &gpujoin_device::DeviceBuffer<i64>, b: &gpujoin_device::DeviceBuffer<i64>) -> gpujoin_device::Result<()> {
/// for chunk in join_chunks(s, &a.view(), &b.view(), JoinType::Left, ChunkBudget::Bytes(256 << 20))? {
///     let maps = chunk?.data; // at most 2^25 rows
/// }
/// # Ok(()) }
/// ```
pub fn join_chunks<K: ChunkKey>(
    stream: &Stream,
    left: &DeviceView<'_, K>,
    right: &DeviceView<'_, K>,
    join_type: JoinType,
    budget: ChunkBudget,
) -> Result<JoinChunks<EquiChunkSource>> {
    let source = EquiChunkSource::new(stream, left, right, join_type)?;
    JoinChunks::new(stream, source, budget)
}

/// The same chunks streamed into pinned host memory (see [`stream_to_host`]): `consume` gets
/// each chunk's left and right maps as host slices ([`HostChunk::maps`]), in order.
///
/// ```no_run
/// # use gpujoin_join::chunked::*; use gpujoin_join::JoinType;
/// # fn f(s: &gpujoin_device::Stream, a: &gpujoin_device::DeviceBuffer<u32>, b: &gpujoin_device::DeviceBuffer<u32>) -> gpujoin_device::Result<()> {
/// let mut rows = 0u64;
/// let stats = join_chunks_to_host(s, &a.view(), &b.view(), JoinType::Inner, ChunkBudget::default(), HostStreamOptions::default(), |chunk| {
///     let (left, right) = chunk.maps()?;
///     rows += left.len() as u64;
///     Ok(())
/// })?;
/// println!("{rows} rows, copies {:.0}% overlapped", 100.0 * stats.overlap());
/// # Ok(()) }
/// ```
pub fn join_chunks_to_host<K: ChunkKey>(
    stream: &Stream,
    left: &DeviceView<'_, K>,
    right: &DeviceView<'_, K>,
    join_type: JoinType,
    budget: ChunkBudget,
    options: HostStreamOptions,
    consume: impl FnMut(HostChunk<'_>) -> Result<()>,
) -> Result<StreamStats> {
    let source = EquiChunkSource::new(stream, left, right, join_type)?;
    stream_to_host(stream, &source, budget, options, consume)
}
