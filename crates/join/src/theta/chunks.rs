//! Theta joins in chunks that fit a memory budget ([`crate::chunked`]): the prepared sorted or
//! nested-loop join counts every left row's output, the chunk planner cuts the output rows, and
//! each chunk is written on demand.

use std::ops::Range;

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};

use super::mixed_chunks::MixedChunks;
use super::nested_loop::NestedLoopJoin;
use super::sorted::SortedThetaJoin;
use super::{check_columns, choose_path, gather_columns, ThetaPath};
use crate::chunked::{ChunkBudget, ChunkRange, ChunkSource, JoinChunks};
use crate::device_relation::{check_relation, copy_column_rows, relation_schema, RelationRef};
use crate::table::TableView;
use crate::table::Column;
use crate::maps::GatherMaps;
use crate::predicate::CheckedPredicate;
use crate::types::JoinType;

enum Prepared<'a> {
    Sorted(Box<SortedThetaJoin<'a>>),
    /// Equality conjuncts joined like an equi-join, the rest a filter ([`super::mixed_chunks`]).
    Mixed(Box<MixedChunks<'a>>),
    /// `unmatched`: the right rows without a match (`Right`/`Full`), the tail of the output.
    NestedLoop { join: Box<NestedLoopJoin<'a>>, unmatched: Option<DeviceBuffer<u32>> },
    /// Semi and anti joins the prepared joins do not produce per left row: computed whole
    /// (their output is at most one side's rows) and handed out as tail chunks.
    Whole { maps: GatherMaps, no_offsets: DeviceBuffer<u64> },
}

/// A theta join whose gather maps come in chunks ([`ChunkSource`]).
///
/// Paths: the sorted join ([`ThetaPath::Sorted`]) for `Inner`, `Left`, `LeftSemi` and
/// `LeftAnti`; for predicates with fixed-width equality conjuncts ([`ThetaPath::Mixed`]) and
/// `Inner`/`Left`/`Right`/`Full`, an equi-join on them with the rest of the predicate as a filter
/// ([`super::mixed_chunks`]); the nested loop for every other predicate and for `Right`/`Full`
/// (pairs per left row, then the unmatched right rows as the tail); semi and anti joins the
/// prepared joins do not produce per left row are computed whole — they hold at most one side's
/// rows — and handed out as tail chunks. Row order: the path's, as documented in
/// [`super::sorted`], [`super::mixed_chunks`] and [`super::nested_loop`].
pub struct ThetaChunkSource<'a> {
    join_type: JoinType,
    prepared: Prepared<'a>,
}

impl<'a> ThetaChunkSource<'a> {
    /// Counts the output of every left row (the first step of seed 004 §3.3).
    ///
    /// `left` and `right` are relations ([`crate::device_relation::check_relation`]) borrowed
    /// for the source's life ([`crate::plan::Join::chunks`]' sources own what they read).
    pub fn new(stream: &Stream, left: &'a TableView<'a>, right: &'a TableView<'a>, pred: &CheckedPredicate, join_type: JoinType) -> Result<Self> {
        Self::new_with(stream, left.into(), right.into(), pred, join_type, false, false)
    }

    /// [`ThetaChunkSource::new`]; `poison_sorted`: the sorted path fills its outputs with 0xFF
    /// bytes before writing them (tests: the front door's `TestingOptions::theta_poison_outputs`);
    /// `nested_loop`: the nested loop whatever the predicate's shape (the front door's explicit
    /// `Algorithm::ThetaNestedLoop`): prepared for INNER/LEFT/RIGHT/FULL, whole otherwise.
    pub(crate) fn new_with(stream: &Stream, left: RelationRef<'a>, right: RelationRef<'a>, pred: &CheckedPredicate, join_type: JoinType, poison_sorted: bool, nested_loop: bool) -> Result<Self> {
        let (lv, rv) = (left.view(), right.view());
        check_relation(&lv)?;
        check_relation(&rv)?;
        pred.check_schemas(&relation_schema(&lv)?, &relation_schema(&rv)?)?;
        let path = choose_path(pred);
        let mixed_keys = super::nested_loop::mixed_keys(&lv, &rv, pred, super::nested_loop::Strategy::Auto);
        drop((lv, rv));
        if nested_loop {
            use super::nested_loop::{nested_loop_join_with, Strategy};
            let prepared = if matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
                let join = NestedLoopJoin::prepare_with(stream, left, right, pred, join_type)?;
                let unmatched = if join_type.keeps_unmatched_right() { Some(join.unmatched_right(stream)?) } else { None };
                Prepared::NestedLoop { join: Box::new(join), unmatched }
            } else {
                Prepared::Whole { maps: nested_loop_join_with(stream, &left.view(), &right.view(), pred, join_type, Strategy::NestedLoop)?, no_offsets: stream.alloc_zeroed::<u64>(1)? }
            };
            return Ok(ThetaChunkSource { join_type, prepared });
        }
        let prepared = match (path, join_type, mixed_keys) {
            (ThetaPath::Sorted(cond), JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti, _) => {
                Prepared::Sorted(Box::new(SortedThetaJoin::prepare_with(stream, left, right, &cond, join_type, poison_sorted)?))
            }
            (ThetaPath::Mixed, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full, Some(keys)) => {
                Prepared::Mixed(Box::new(MixedChunks::prepare(stream, left, right, pred, &keys, join_type, ChunkBudget::FromFreeMemory)?))
            }
            (_, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full, _) => {
                let join = NestedLoopJoin::prepare_with(stream, left, right, pred, join_type)?;
                let unmatched = if join_type.keeps_unmatched_right() { Some(join.unmatched_right(stream)?) } else { None };
                Prepared::NestedLoop { join: Box::new(join), unmatched }
            }
            _ => Prepared::Whole { maps: super::theta_join(stream, &left.view(), &right.view(), pred, join_type)?, no_offsets: stream.alloc_zeroed::<u64>(1)? },
        };
        Ok(ThetaChunkSource { join_type, prepared })
    }

    /// The join type.
    pub fn join_type(&self) -> JoinType {
        self.join_type
    }

    /// Which prepared join produces the chunks: `"sorted"`, `"mixed"`, `"nested loop"` or
    /// `"whole"`.
    pub fn path(&self) -> &'static str {
        match self.prepared {
            Prepared::Sorted(_) => "sorted",
            Prepared::Mixed(_) => "mixed",
            Prepared::NestedLoop { .. } => "nested loop",
            Prepared::Whole { .. } => "whole",
        }
    }

    /// The output rows of whole left rows `rows`.
    fn produce_rows(&self, stream: &Stream, rows: Range<u64>) -> Result<GatherMaps> {
        match &self.prepared {
            Prepared::Sorted(j) => j.produce(stream, rows),
            Prepared::Mixed(j) => j.produce_rows(stream, rows),
            Prepared::NestedLoop { join, .. } => join.produce(stream, rows),
            Prepared::Whole { .. } => Err(Error::invalid("internal: a whole theta join has no left-row chunks")),
        }
    }
}

/// A copy of `src[rows]`.
fn copy_rows(stream: &Stream, src: &DeviceView<'_, u32>, rows: Range<usize>) -> Result<DeviceBuffer<u32>> {
    if rows.start > rows.end || rows.end > src.len() {
        return Err(Error::invalid(format!("internal: chunk rows {rows:?} outside {} rows", src.len())));
    }
    stream.copy_from_device(&src.slice(rows))
}

/// Rows `skip..skip + len` of `maps` as maps of type `jt` (an absent side stays absent).
fn slice_maps(stream: &Stream, maps: GatherMaps, jt: JoinType, skip: u64, len: u64) -> Result<GatherMaps> {
    let (l, r) = maps.into_raw();
    let cut = |b: DeviceBuffer<u32>| -> Result<DeviceBuffer<u32>> {
        if b.is_empty() || (skip == 0 && len == b.len() as u64) {
            return Ok(b);
        }
        copy_rows(stream, &b.view(), skip as usize..(skip + len) as usize)
    };
    Ok(GatherMaps::new(jt, cut(l)?, cut(r)?))
}

impl ChunkSource for ThetaChunkSource<'_> {
    type Output = GatherMaps;

    fn left_rows(&self) -> u64 {
        match &self.prepared {
            Prepared::Sorted(j) => j.left_rows() as u64,
            Prepared::Mixed(j) => j.left_rows(),
            Prepared::NestedLoop { join, .. } => join.left_rows(),
            Prepared::Whole { .. } => 0,
        }
    }

    fn offsets(&self) -> DeviceView<'_, u64> {
        match &self.prepared {
            Prepared::Sorted(j) => j.offsets(),
            Prepared::Mixed(j) => j.offsets(),
            Prepared::NestedLoop { join, .. } => join.offsets(),
            Prepared::Whole { no_offsets, .. } => no_offsets.view(),
        }
    }

    fn bytes_per_row(&self) -> u64 {
        8
    }

    fn produce(&self, stream: &Stream, range: &ChunkRange) -> Result<GatherMaps> {
        // A chunk that starts or ends inside a left row (only when that row alone is larger
        // than the budget) is cut from the row's whole output.
        let maps = self.produce_rows(stream, range.rows.clone())?;
        slice_maps(stream, maps, self.join_type, range.skip_in_first_row(), range.len())
    }

    fn tail_rows(&self) -> u64 {
        match &self.prepared {
            Prepared::NestedLoop { unmatched: Some(u), .. } => u.len() as u64,
            Prepared::Mixed(j) => j.tail_rows(),
            Prepared::Whole { maps, .. } => maps.rows(),
            _ => 0,
        }
    }

    fn produce_tail(&self, stream: &Stream, range: Range<u64>) -> Result<GatherMaps> {
        let (a, e) = (range.start as usize, range.end as usize);
        match &self.prepared {
            Prepared::Mixed(j) => j.produce_tail(stream, range),
            Prepared::NestedLoop { unmatched: Some(u), .. } => {
                let mut l = stream.alloc::<u32>(e - a)?;
                stream.fill_u32_bits(&mut l.view_mut(), u32::MAX)?;
                Ok(GatherMaps::new(self.join_type, l, copy_rows(stream, &u.view(), a..e)?))
            }
            Prepared::Whole { maps, .. } => {
                let part = |m: Option<DeviceView<'_, crate::RowId>>| -> Result<DeviceBuffer<u32>> {
                    match m {
                        None => stream.alloc::<u32>(0),
                        Some(v) => copy_rows(stream, &v.cast::<u32>(), a..e),
                    }
                };
                Ok(GatherMaps::new(self.join_type, part(maps.left())?, part(maps.right())?))
            }
            _ => Err(Error::invalid(format!("this theta join has no tail rows (asked for {range:?})"))),
        }
    }
}

/// An inner theta join whose output relation (chosen fixed-width columns of each side) comes in
/// chunks: the sorted path writes each chunk's columns directly, the nested loop gathers them
/// through the chunk's maps. Columns: `left_cols` of the left relation, then `right_cols`.
pub struct ThetaColumnsSource<'a> {
    maps: ThetaChunkSource<'a>,
    left: &'a TableView<'a>,
    right: &'a TableView<'a>,
    left_cols: Vec<usize>,
    right_cols: Vec<usize>,
    bytes_per_row: u64,
}

impl<'a> ThetaColumnsSource<'a> {
    /// Counts the output of every left row; errors for string or missing columns.
    pub fn new(
        stream: &Stream,
        left: &'a TableView<'a>,
        right: &'a TableView<'a>,
        pred: &CheckedPredicate,
        left_cols: &[usize],
        right_cols: &[usize],
    ) -> Result<Self> {
        check_columns(left, left_cols, "left")?;
        check_columns(right, right_cols, "right")?;
        let width = |rel: &TableView<'_>, cols: &[usize]| cols.iter().map(|&c| rel.columns()[c].data_type().byte_width().unwrap_or(0) as u64).sum::<u64>();
        let bytes_per_row = (width(left, left_cols) + width(right, right_cols)).max(1);
        let maps = ThetaChunkSource::new(stream, left, right, pred, JoinType::Inner)?;
        Ok(ThetaColumnsSource { maps, left, right, left_cols: left_cols.to_vec(), right_cols: right_cols.to_vec(), bytes_per_row })
    }

    /// See [`ThetaChunkSource::path`].
    pub fn path(&self) -> &'static str {
        self.maps.path()
    }
}

impl ChunkSource for ThetaColumnsSource<'_> {
    type Output = Vec<Column>;

    fn left_rows(&self) -> u64 {
        self.maps.left_rows()
    }

    fn offsets(&self) -> DeviceView<'_, u64> {
        self.maps.offsets()
    }

    fn bytes_per_row(&self) -> u64 {
        self.bytes_per_row
    }

    fn produce(&self, stream: &Stream, range: &ChunkRange) -> Result<Vec<Column>> {
        let columns = match &self.maps.prepared {
            Prepared::Sorted(j) => j.materialize(stream, range.rows.clone(), &self.left_cols, &self.right_cols)?,
            _ => {
                let maps = self.maps.produce_rows(stream, range.rows.clone())?;
                gather_columns(stream, &maps, self.left, self.right, &self.left_cols, &self.right_cols)?
            }
        };
        if range.is_row_aligned() {
            return Ok(columns);
        }
        let (a, e) = (range.skip_in_first_row() as usize, (range.skip_in_first_row() + range.len()) as usize);
        columns.iter().map(|c| copy_column_rows(stream, &c.view(), a..e)).collect()
    }
}

/// The gather maps of a theta join in chunks of at most `budget` ([`ThetaChunkSource`]);
/// concatenated, the chunks are the whole join in the path's order.
///
/// ```no_run
/// # use gpujoin_join::{chunked::ChunkBudget, device_relation::upload, table::TableView, predicate::CheckedPredicate, theta::theta_join_chunks, JoinType};
/// # fn f(s: &gpujoin_device::Stream, l: &TableView<'_>, r: &TableView<'_>, p: &CheckedPredicate) -> gpujoin_device::Result<()> {
/// let mut rows = 0;
/// for chunk in theta_join_chunks(s, l, r, p, JoinType::Inner, ChunkBudget::Bytes(64 << 20))? {
///     rows += chunk?.data.rows(); // at most 2^23 pairs per chunk
/// }
/// # Ok(()) }
/// ```
pub fn theta_join_chunks<'a>(
    stream: &Stream,
    left: &'a TableView<'a>,
    right: &'a TableView<'a>,
    pred: &CheckedPredicate,
    join_type: JoinType,
    budget: ChunkBudget,
) -> Result<JoinChunks<ThetaChunkSource<'a>>> {
    JoinChunks::new(stream, ThetaChunkSource::new(stream, left, right, pred, join_type)?, budget)
}

/// The inner theta join's output columns in chunks of at most `budget` ([`ThetaColumnsSource`]).
/// Stream them to host memory with [`crate::chunked::stream_to_host`] on the source.
pub fn theta_materialize_chunks<'a>(
    stream: &Stream,
    left: &'a TableView<'a>,
    right: &'a TableView<'a>,
    pred: &CheckedPredicate,
    left_cols: &[usize],
    right_cols: &[usize],
    budget: ChunkBudget,
) -> Result<JoinChunks<ThetaColumnsSource<'a>>> {
    JoinChunks::new(stream, ThetaColumnsSource::new(stream, left, right, pred, left_cols, right_cols)?, budget)
}
