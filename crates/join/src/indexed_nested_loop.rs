//! Indexed nested-loop join (issue 5, seed 003 algorithm 2): a sorted index over one relation's
//! key column, probed by binary search from the other; integer, floating-point and string keys.
//!
//! The paper's steps, on the GPU:
//!
//! 1. **Index** ([`SortedIndex::build`]): the row ids of the indexed column sorted by key
//!    (numeric keys: radix sort of their order-preserving images, `-0.0` and `0.0` one key, NaN
//!    rows left out since NaN equals nothing; strings: merge sort on 8-byte big-endian prefixes,
//!    ties resolved byte-wise on the strings). Built once, probed any number of times.
//! 2. **Search**: every probe row binary-searches the equal range `[lo, hi)` of its key in the
//!    index (one thread per probe row; strings compared byte-wise on the device) and counts
//!    `hi - lo` (`u64`).
//! 3. **Scan**: an exclusive scan of the counts gives each probe row's place in the output and
//!    the total, from which the host allocates the maps.
//! 4. **Write**: each probe row's matches are a contiguous run of the index, expanded into the
//!    gather maps by a load-balancing search (skewed runs are split evenly across the GPU).
//!
//! Null keys (validity bitmaps, [`SortedIndex::build_with_validity`] and
//! [`SortedIndex::join_with_validity`]) follow SQL's `NullEqualsNothing`: a null row matches
//! nothing, like a NaN row. Null index rows are left out of the index (after the sort, the
//! entries of null rows are dropped); a null probe row gets an empty range. Both still appear
//! as unmatched rows where the join keeps those (`Left`, `Full`, anti joins, ...). Nulls that
//! equal each other (`NullEqualsNull`) are not supported by this module's functions; the front
//! door's `Algorithm::IndexedNestedLoop` takes them by joining ranks of the keys (see
//! [`crate::plan`]).
//!
//! Outer, semi and anti joins come from the same ranges: unmatched probe rows count as one row
//! paired with [`RowId::NONE`]; index rows that no probe hit are found by marking the first entry
//! of every hit range and spreading the mark over its run of equal keys.
//!
//! # Semantics
//!
//! As [`crate::predicate`] says for `=`: no implicit casts (both columns must have the same
//! [`DataType`], else [`Error::InvalidArgument`]); integers by value; floats by IEEE equality
//! (`-0.0 == 0.0`, a NaN equals nothing, `±inf` equal themselves); strings equal when their UTF-8
//! bytes are equal.
//!
//! # Output order
//!
//! * Pair joins (`Inner`, `Left`, `Right`, `Full`): probe rows in ascending order; within a probe
//!   row its matching index rows in ascending row order; a probe row without a match, when the
//!   join keeps it, in its place with [`RowId::NONE`]; then, when the join keeps them, the
//!   unmatched index rows in ascending order with [`RowId::NONE`].
//! * Semi and anti joins: the qualifying rows in ascending order.
//!
//! ```no_run
//! use gpujoin_join::indexed_nested_loop::{indexed_nested_loop_join, SortedIndex};
//! use gpujoin_join::table::{Column, HostColumn};
//! use gpujoin_join::{JoinType, Side};
//! # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let large = |v: &[&str]| Column::upload(s, &HostColumn::large_utf8_options(v.iter().map(Some)));
//! let (orders, names) = (large(&["b", "a", "c", "a"])?, large(&["a", "b", "z"])?);
//! // Index the names (the right side) and probe them with the orders, in order of the orders.
//! let maps = indexed_nested_loop_join(s, &orders.view(), &names.view(), JoinType::Inner, Side::Right)?;
//! let pairs: Vec<_> = maps.pairs()?.iter().map(|(l, r)| (l.get(), r.get())).collect();
//! assert_eq!(pairs, [(Some(0), Some(1)), (Some(1), Some(0)), (Some(3), Some(0))]);
//! // One index, several probes.
//! let index = SortedIndex::build(s, names.view())?;
//! assert_eq!(index.join_size(s, &orders.view(), Side::Left, JoinType::Full)?, 5); // + "c" and "z"
//! # Ok(()) }
//! ```

use std::ffi::c_void;

use gpujoin_cub_sys::result::{launch, read_scalar, with_temp};
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};
use gpujoin_primitives::{reduce_sum, select_by_flag, select_flagged, sort_pairs_new, SortOrder, SortPairsWith, NO_ROW};

use crate::common::{alloc_output_maps, offsets_u64};
use crate::device_relation::{in_place_type, kernel_type_of, Source};
use crate::table::{Column, ColumnView};
use crate::kernels::sys::inlj as ffi;
use crate::maps::{GatherMaps, Side};
use crate::predicate::DataType;
use crate::types::{JoinType, RowId};

/// The sorted keys beside the index's row ids: order-preserving images (numeric columns) or
/// 8-byte big-endian prefixes (strings).
enum IndexKeys {
    B32(DeviceBuffer<u32>),
    B64(DeviceBuffer<u64>),
}

/// A sorted index over one device key column: its row ids in key order. It borrows the column
/// (string comparisons read it), so the column outlives the index.
///
/// Within a key, rows are in ascending row order. NaN rows of a float column, and null rows
/// where the index was built with a validity bitmap ([`SortedIndex::build_with_validity`]), are
/// not in the index ([`SortedIndex::entries`] counts the rest): they match nothing, and an
/// outer or anti join still reports them as unmatched.
///
/// ```no_run
/// use gpujoin_join::indexed_nested_loop::SortedIndex;
/// use gpujoin_join::table::{Column, HostColumn};
/// use gpujoin_join::{JoinType, Side};
/// # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
/// let col = Column::upload(s, &HostColumn::from_values(vec![2.0f64, f64::NAN, -0.0, 2.0]))?;
/// let index = SortedIndex::build(s, col.view())?;
/// assert_eq!(index.entries(), 3);
/// let rows: Vec<_> = s.copy_to_host(&index.sorted_rows())?.iter().map(|r| r.get().unwrap()).collect();
/// assert_eq!(rows, [2, 0, 3]); // -0.0, then the two 2.0 in row order
/// let probe = Column::upload(s, &HostColumn::from_values(vec![0.0f64, 2.0]))?;
/// let maps = index.join(s, &probe.view(), Side::Left, JoinType::Inner)?;
/// assert_eq!(maps.rows(), 3); // (0, 2), (1, 0), (1, 3)
/// # Ok(()) }
/// ```
pub struct SortedIndex<'a> {
    column: IndexedColumn<'a>,
    keys: IndexKeys,
    rows: DeviceBuffer<u32>,
}

/// The indexed column, read in place or owned by the index.
type IndexedColumn<'a> = Source<'a>;

/// The column as the index kernels read it: of a [`in_place_type`] (`InvalidArgument` otherwise).
fn checked_column<'c>(what: &str, c: ColumnView<'c>) -> Result<ColumnView<'c>> {
    match in_place_type(c.data_type()) {
        Some(_) => Ok(c),
        None => Err(Error::invalid(format!("indexed nested-loop join: the {what} is {}; it reads 32- and 64-bit numbers, dates, timestamps and LargeUtf8 strings", c.data_type()))),
    }
}

impl SortedIndex<'static> {
    /// [`SortedIndex::build`] over a column the index keeps.
    pub fn build_owned(stream: &Stream, column: Column) -> Result<SortedIndex<'static>> {
        Self::build_owned_with_validity(stream, column, None)
    }

    /// [`SortedIndex::build_with_validity`] over a column the index keeps (the validity is only
    /// read while building).
    pub fn build_owned_with_validity(stream: &Stream, column: Column, validity: Option<DeviceView<'_, u32>>) -> Result<SortedIndex<'static>> {
        SortedIndex::build_from(stream, Source::Owned(column), validity)
    }
}

fn sort_index(stream: &Stream, column: ColumnView<'_>, validity: Option<DeviceView<'_, u32>>) -> Result<(IndexKeys, DeviceBuffer<u32>)> {
    check_rows("indexed column", column.len())?;
    check_validity("indexed column", column.len(), validity.as_ref())?;
    let (keys, rows) = sort_all(stream, &column)?;
    match validity {
        Some(v) => drop_null_rows(stream, keys, rows, &v),
        None => Ok((keys, rows)),
    }
}

/// The sorted index with the entries of null rows dropped (order kept).
fn drop_null_rows(stream: &Stream, keys: IndexKeys, rows: DeviceBuffer<u32>, validity: &DeviceView<'_, u32>) -> Result<(IndexKeys, DeviceBuffer<u32>)> {
    let m = rows.len();
    let mut flags = stream.alloc::<u8>(m)?;
    let (r, v, f) = (rows.view().as_ptr(), validity.as_ptr(), flags.view_mut().as_mut_ptr());
    // SAFETY: rows holds m row ids < the column's rows; the validity covers them (checked);
    // flags holds m entries.
    launch(stream, "inlj: null index rows", || unsafe { ffi::gj_i_valid_entries(r, m as i64, v, f, stream.raw()) })?;
    let keys = match keys {
        IndexKeys::B32(k) => IndexKeys::B32(select_flagged(stream, &k.view(), &flags.view())?),
        IndexKeys::B64(k) => IndexKeys::B64(select_flagged(stream, &k.view(), &flags.view())?),
    };
    Ok((keys, select_flagged(stream, &rows.view(), &flags.view())?))
}

/// Every row of `column` (but NaN rows) sorted by key.
fn sort_all(stream: &Stream, column: &ColumnView<'_>) -> Result<(IndexKeys, DeviceBuffer<u32>)> {
    let desc = column_desc(column);
    let n = column.len();
    Ok(match kernel_type_of(column) {
        DataType::LargeUtf8 => {
            let mut prefixes = stream.alloc::<u64>(n)?;
            let mut rows = stream.alloc::<u32>(n)?;
            let (p, r) = (prefixes.view_mut().as_mut_ptr(), rows.view_mut().as_mut_ptr());
            // SAFETY: the column's offsets and bytes are live; outputs hold n entries.
            with_temp(stream, "inlj: sort strings", |t, tb| unsafe { ffi::gj_i_sort_strings(t, tb, desc, p, r, stream.raw()) })?;
            (IndexKeys::B64(prefixes), rows)
        }
        DataType::Int64 | DataType::UInt64 | DataType::Float64 => {
            let (k, r) = sorted_images::<u64>(stream, column)?;
            (IndexKeys::B64(k), r)
        }
        DataType::Int32 | DataType::UInt32 | DataType::Float32 => {
            let (k, r) = sorted_images::<u32>(stream, column)?;
            (IndexKeys::B32(k), r)
        }
        t => return Err(Error::invalid(format!("internal: an index over {t}, not a kernel type"))),
    })
}

impl<'a> SortedIndex<'a> {
    /// Sorts the rows of `column` by key. Waits for the stream for float columns (to learn how
    /// many NaN rows to leave out). Errors: [`Error::TooLarge`] when the column has more than
    /// [`RowId::MAX_ROWS`] rows; device errors.
    pub fn build(stream: &Stream, column: ColumnView<'a>) -> Result<SortedIndex<'a>> {
        Self::build_with_validity(stream, column, None)
    }

    /// [`SortedIndex::build`] with the column's validity (`None`: every row valid): bit `i % 32`
    /// of word `i / 32` is 1 where row `i` is valid. Null rows are left out of the index like
    /// NaN rows: they match no probe row (SQL's `NullEqualsNothing`), and joins that keep
    /// unmatched index rows report them. The validity is only read while building; it waits for
    /// the stream when given. Errors as [`SortedIndex::build`], and [`Error::InvalidArgument`]
    /// when the validity has fewer than `ceil(rows / 32)` words.
    pub fn build_with_validity(stream: &Stream, column: ColumnView<'a>, validity: Option<DeviceView<'_, u32>>) -> Result<SortedIndex<'a>> {
        SortedIndex::build_from(stream, Source::InPlace(column), validity)
    }

    /// [`SortedIndex::build_with_validity`] over a column read in place or owned by the index.
    pub(crate) fn build_from(stream: &Stream, column: Source<'a>, validity: Option<DeviceView<'_, u32>>) -> Result<SortedIndex<'a>> {
        let (keys, rows) = sort_index(stream, checked_column("indexed column", column.view())?, validity)?;
        Ok(SortedIndex { column, keys, rows })
    }

    /// The indexed column.
    pub fn column(&self) -> ColumnView<'_> {
        self.column.view()
    }

    /// The key type.
    pub fn data_type(&self) -> DataType {
        kernel_type_of(&self.column.view())
    }

    /// Rows of the indexed column (NaN and null rows included).
    pub fn rows(&self) -> usize {
        self.column.view().len()
    }

    /// Rows in the index: all but the NaN rows and the null rows.
    pub fn entries(&self) -> usize {
        self.rows.len()
    }

    /// The indexed rows in key order (ascending row order within a key).
    pub fn sorted_rows(&self) -> DeviceView<'_, RowId> {
        self.rows.view().cast::<RowId>()
    }

    /// Joins the index with `probe`, the key column of the other relation, which is the
    /// `probe_side` of the join (the index is the other side). See the [module docs](self) for
    /// the output order. Waits for the stream (to size the output).
    ///
    /// Errors: [`Error::InvalidArgument`] when the probe's type differs from the index's;
    /// [`Error::TooLarge`] for more than [`RowId::MAX_ROWS`] probe rows;
    /// [`Error::OutputTooLarge`] when the maps do not fit on the device.
    pub fn join(&self, stream: &Stream, probe: &ColumnView<'_>, probe_side: Side, join_type: JoinType) -> Result<GatherMaps> {
        self.join_with_validity(stream, probe, None, probe_side, join_type)
    }

    /// [`SortedIndex::join`] with the probe column's validity (`None`: every row valid; bit
    /// `i % 32` of word `i / 32` is 1 where probe row `i` is valid). A null probe row matches
    /// nothing (SQL's `NullEqualsNothing`): it appears only where the join keeps unmatched probe
    /// rows, paired with [`RowId::NONE`]. Errors as [`SortedIndex::join`], and
    /// [`Error::InvalidArgument`] when the validity has fewer than `ceil(rows / 32)` words.
    pub fn join_with_validity(&self, stream: &Stream, probe: &ColumnView<'_>, probe_validity: Option<DeviceView<'_, u32>>, probe_side: Side, join_type: JoinType) -> Result<GatherMaps> {
        self.check_probe(probe, probe_validity.as_ref())?;
        let pv = probe_validity.as_ref();
        let one_map = |rows: DeviceBuffer<u32>, side: Side| -> Result<GatherMaps> {
            let empty = stream.alloc::<u32>(0)?;
            Ok(match side {
                Side::Left => GatherMaps::new(join_type, rows, empty),
                Side::Right => GatherMaps::new(join_type, empty, rows),
            })
        };
        match Plan::of(join_type, probe_side) {
            Plan::ProbeRows { semi } => {
                let matched = self.search(stream, probe, pv, Wanted::MATCHED)?.matched.expect("asked for");
                one_map(select_by_flag(stream, None, &matched.view(), semi)?, probe_side)
            }
            Plan::IndexRows { semi } => {
                let lo = self.search(stream, probe, pv, Wanted::LO)?.lo.expect("asked for");
                let matched = self.index_matched(stream, &lo.view())?;
                one_map(select_by_flag(stream, None, &matched.view(), semi)?, other(probe_side))
            }
            Plan::Pairs { keep_probe, keep_index } => {
                let found = self.search(stream, probe, pv, Wanted { lo: true, counts: true, matched: false, keep_unmatched: keep_probe })?;
                let (lo, counts) = (found.lo.expect("asked for"), found.counts.expect("asked for"));
                let (offsets, total) = offsets_u64(stream, &counts.view())?;
                let unmatched_index = if keep_index {
                    let matched = self.index_matched(stream, &lo.view())?;
                    Some(select_by_flag(stream, None, &matched.view(), false)?)
                } else {
                    None
                };
                let extra = unmatched_index.as_ref().map_or(0, |u| u.len() as u64);
                let rows = total.checked_add(extra).ok_or_else(|| Error::too_large("output rows", u64::MAX, u64::MAX - 1))?;
                let (mut probe_map, mut index_map) = alloc_output_maps(stream, rows, 2)?;
                let pairs = total as usize; // fits: the maps were allocated
                let (o, l, r) = (offsets.view().as_ptr(), lo.view().as_ptr(), self.rows.view().as_ptr());
                let op = probe_map.slice_mut(..pairs).as_mut_ptr();
                let ox = index_map.slice_mut(..pairs).as_mut_ptr();
                let n = probe.len() as i64;
                // SAFETY: offsets and lo hold n entries (offsets at least 1), the index rows its
                // entries; the outputs `total` entries.
                with_temp(stream, "inlj: write pairs", |t, tb| unsafe {
                    ffi::gj_i_expand(t, tb, o, n, total as i64, l, r, op, ox, stream.raw())
                })?;
                if let Some(u) = unmatched_index {
                    stream.fill_u32_bits(&mut probe_map.slice_mut(pairs..), NO_ROW)?;
                    stream.copy_device_to_device(&u.view(), &mut index_map.slice_mut(pairs..))?;
                }
                Ok(match probe_side {
                    Side::Left => GatherMaps::new(join_type, probe_map, index_map),
                    Side::Right => GatherMaps::new(join_type, index_map, probe_map),
                })
            }
        }
    }

    /// The exact number of rows [`SortedIndex::join`] returns, without writing the maps (it
    /// still searches every probe row). Waits for the stream. Errors as [`SortedIndex::join`]
    /// (without the output-size one).
    pub fn join_size(&self, stream: &Stream, probe: &ColumnView<'_>, probe_side: Side, join_type: JoinType) -> Result<u64> {
        self.join_size_with_validity(stream, probe, None, probe_side, join_type)
    }

    /// The exact number of rows [`SortedIndex::join_with_validity`] returns, without writing
    /// the maps. Errors as that (without the output-size one).
    pub fn join_size_with_validity(&self, stream: &Stream, probe: &ColumnView<'_>, probe_validity: Option<DeviceView<'_, u32>>, probe_side: Side, join_type: JoinType) -> Result<u64> {
        self.check_probe(probe, probe_validity.as_ref())?;
        let pv = probe_validity.as_ref();
        match Plan::of(join_type, probe_side) {
            Plan::ProbeRows { semi } => {
                let matched = self.search(stream, probe, pv, Wanted::MATCHED)?.matched.expect("asked for");
                count_flags(stream, &matched.view(), semi)
            }
            Plan::IndexRows { semi } => {
                let lo = self.search(stream, probe, pv, Wanted::LO)?.lo.expect("asked for");
                count_flags(stream, &self.index_matched(stream, &lo.view())?.view(), semi)
            }
            Plan::Pairs { keep_probe, keep_index } => {
                let found = self.search(stream, probe, pv, Wanted { lo: keep_index, counts: true, matched: false, keep_unmatched: keep_probe })?;
                let pairs = reduce_sum(stream, &found.counts.expect("asked for").view())?;
                let extra = match found.lo {
                    Some(lo) => count_flags(stream, &self.index_matched(stream, &lo.view())?.view(), false)?,
                    None => 0,
                };
                Ok(pairs + extra)
            }
        }
    }

    fn check_probe(&self, probe: &ColumnView<'_>, validity: Option<&DeviceView<'_, u32>>) -> Result<()> {
        checked_column("probe column", *probe)?;
        check_same_type(self.data_type(), kernel_type_of(probe))?;
        check_rows("probe column", probe.len())?;
        check_validity("probe column", probe.len(), validity)
    }

    fn desc(&self) -> ffi::gj_i_index {
        let keys = match &self.keys {
            IndexKeys::B32(k) => k.view().as_ptr() as *const c_void,
            IndexKeys::B64(k) => k.view().as_ptr() as *const c_void,
        };
        ffi::gj_i_index { column: column_desc(&self.column.view()), keys, rows: self.rows.view().as_ptr(), size: self.rows.len() as i64 }
    }

    /// Step 2: the equal range of every probe row's key.
    fn search(&self, stream: &Stream, probe: &ColumnView<'_>, validity: Option<&DeviceView<'_, u32>>, wanted: Wanted) -> Result<Found> {
        let n = probe.len();
        let mut found = Found {
            lo: wanted.lo.then(|| stream.alloc::<u32>(n)).transpose()?,
            counts: wanted.counts.then(|| stream.alloc::<u64>(n)).transpose()?,
            matched: wanted.matched.then(|| stream.alloc::<u8>(n)).transpose()?,
        };
        let lo = found.lo.as_mut().map_or(std::ptr::null_mut(), |b| b.view_mut().as_mut_ptr());
        let counts = found.counts.as_mut().map_or(std::ptr::null_mut(), |b| b.view_mut().as_mut_ptr());
        let matched = found.matched.as_mut().map_or(std::ptr::null_mut(), |b| b.view_mut().as_mut_ptr());
        let (idx, p, keep) = (self.desc(), column_desc(probe), wanted.keep_unmatched as i32);
        let v = validity.map_or(std::ptr::null(), |v| v.as_ptr());
        // SAFETY: both columns and the index are live; the validity is null or covers the n
        // probe rows (checked); every output holds n entries or is null.
        launch(stream, "inlj: search", || unsafe { ffi::gj_i_probe(idx, p, v, keep, lo, counts, matched, stream.raw()) })?;
        Ok(found)
    }

    /// 1 for every row of the indexed column whose key some probe row (`lo` from the search)
    /// matched.
    fn index_matched(&self, stream: &Stream, lo: &DeviceView<'_, u32>) -> Result<DeviceBuffer<u8>> {
        let mut flags = stream.alloc_zeroed::<u8>(self.rows())?;
        let f = flags.view_mut().as_mut_ptr();
        let (idx, l, n) = (self.desc(), lo.as_ptr(), lo.len() as i64);
        // SAFETY: lo holds n entries < entries() or NONE; flags one per indexed row, zeroed.
        with_temp(stream, "inlj: index rows matched", |t, tb| unsafe { ffi::gj_i_index_matched(t, tb, idx, l, n, f, stream.raw()) })?;
        Ok(flags)
    }
}

/// Joins `left` and `right` on key equality by indexing the `index_side` column
/// ([`SortedIndex::build`]) and probing it with the other ([`SortedIndex::join`]; the output
/// is in probe order, see the [module docs](self)).
///
/// ```no_run
/// use gpujoin_join::indexed_nested_loop::indexed_nested_loop_join;
/// use gpujoin_join::table::{Column, HostColumn};
/// use gpujoin_join::{JoinType, Side};
/// # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
/// let l = Column::upload(s, &HostColumn::from_values(vec![1i32, 2, 2]))?;
/// let r = Column::upload(s, &HostColumn::from_values(vec![2i32, 3]))?;
/// let maps = indexed_nested_loop_join(s, &l.view(), &r.view(), JoinType::Full, Side::Right)?;
/// let pairs: Vec<_> = maps.pairs()?.iter().map(|(a, b)| (a.get(), b.get())).collect();
/// assert_eq!(pairs, [(Some(0), None), (Some(1), Some(0)), (Some(2), Some(0)), (None, Some(1))]);
/// # Ok(()) }
/// ```
pub fn indexed_nested_loop_join(stream: &Stream, left: &ColumnView<'_>, right: &ColumnView<'_>, join_type: JoinType, index_side: Side) -> Result<GatherMaps> {
    check_same_type(kernel_type_of(&checked_column("left column", *left)?), kernel_type_of(&checked_column("right column", *right)?))?;
    let (indexed, probe) = pick(left, right, index_side);
    SortedIndex::build(stream, *indexed)?.join(stream, probe, other(index_side), join_type)
}

/// The exact row count of [`indexed_nested_loop_join`], without writing the maps.
pub fn indexed_nested_loop_join_size(stream: &Stream, left: &ColumnView<'_>, right: &ColumnView<'_>, join_type: JoinType, index_side: Side) -> Result<u64> {
    check_same_type(kernel_type_of(&checked_column("left column", *left)?), kernel_type_of(&checked_column("right column", *right)?))?;
    let (indexed, probe) = pick(left, right, index_side);
    SortedIndex::build(stream, *indexed)?.join_size(stream, probe, other(index_side), join_type)
}

/// How a join type is computed from the probe: which rows or pairs it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Semi (`semi`) or anti join returning probe rows.
    ProbeRows { semi: bool },
    /// Semi (`semi`) or anti join returning index rows.
    IndexRows { semi: bool },
    /// Matching pairs, plus the unmatched probe and/or index rows.
    Pairs { keep_probe: bool, keep_index: bool },
}

impl Plan {
    fn of(join_type: JoinType, probe_side: Side) -> Plan {
        let rows_side = match join_type {
            JoinType::LeftSemi | JoinType::LeftAnti => Some(Side::Left),
            JoinType::RightSemi | JoinType::RightAnti => Some(Side::Right),
            _ => None,
        };
        let semi = matches!(join_type, JoinType::LeftSemi | JoinType::RightSemi);
        match rows_side {
            Some(s) if s == probe_side => Plan::ProbeRows { semi },
            Some(_) => Plan::IndexRows { semi },
            None => {
                let (l, r) = (join_type.keeps_unmatched_left(), join_type.keeps_unmatched_right());
                let (keep_probe, keep_index) = if probe_side == Side::Left { (l, r) } else { (r, l) };
                Plan::Pairs { keep_probe, keep_index }
            }
        }
    }
}

/// Which outputs of the search to compute.
#[derive(Clone, Copy)]
struct Wanted {
    lo: bool,
    counts: bool,
    matched: bool,
    /// Count an unmatched probe row as one output row.
    keep_unmatched: bool,
}

impl Wanted {
    const LO: Wanted = Wanted { lo: true, counts: false, matched: false, keep_unmatched: false };
    const MATCHED: Wanted = Wanted { lo: false, counts: false, matched: true, keep_unmatched: false };
}

struct Found {
    lo: Option<DeviceBuffer<u32>>,
    counts: Option<DeviceBuffer<u64>>,
    matched: Option<DeviceBuffer<u8>>,
}

fn other(side: Side) -> Side {
    match side {
        Side::Left => Side::Right,
        Side::Right => Side::Left,
    }
}

/// (indexed column, probe column).
fn pick<'c, 'v>(left: &'c ColumnView<'v>, right: &'c ColumnView<'v>, index_side: Side) -> (&'c ColumnView<'v>, &'c ColumnView<'v>) {
    match index_side {
        Side::Left => (left, right),
        Side::Right => (right, left),
    }
}

fn check_same_type(index: DataType, probe: DataType) -> Result<()> {
    if index != probe {
        return Err(Error::invalid(format!(
            "indexed nested-loop join: the indexed column is {index} but the probe column is {probe} (no implicit casts)"
        )));
    }
    Ok(())
}

fn check_rows(what: &str, rows: usize) -> Result<()> {
    if rows as u64 > RowId::MAX_ROWS {
        return Err(Error::too_large(format!("indexed nested-loop join: {what} rows"), rows as u64, RowId::MAX_ROWS));
    }
    Ok(())
}

/// A validity bitmap, when given, has a bit for every row.
fn check_validity(what: &str, rows: usize, validity: Option<&DeviceView<'_, u32>>) -> Result<()> {
    match validity {
        Some(v) if v.len() < rows.div_ceil(32) => Err(Error::invalid(format!(
            "indexed nested-loop join: the {what}'s validity has {} words for {rows} rows (needs {})",
            v.len(),
            rows.div_ceil(32)
        ))),
        _ => Ok(()),
    }
}

fn column_desc(column: &ColumnView<'_>) -> ffi::gj_i_column {
    let t = kernel_type_of(column);
    if t == DataType::LargeUtf8 {
        return ffi::gj_i_column {
            type_: ffi::gj_i_type_GJ_I_UTF8,
            rows: column.len() as i64,
            values: std::ptr::null(),
            offsets: column.offsets().expect("strings have offsets").slice(column.offset() * 8..).as_ptr() as *const i64,
            bytes: column.values().as_ptr(),
        };
    }
    let type_ = match t {
        DataType::Int32 => ffi::gj_i_type_GJ_I_I32,
        DataType::Int64 => ffi::gj_i_type_GJ_I_I64,
        DataType::UInt32 => ffi::gj_i_type_GJ_I_U32,
        DataType::UInt64 => ffi::gj_i_type_GJ_I_U64,
        DataType::Float32 => ffi::gj_i_type_GJ_I_F32,
        _ => ffi::gj_i_type_GJ_I_F64,
    };
    let w = column.data_type().byte_width().expect("a numeric kernel type");
    ffi::gj_i_column { type_, rows: column.len() as i64, values: column.values().slice(column.offset() * w..).as_ptr() as *const c_void, offsets: std::ptr::null(), bytes: std::ptr::null() }
}

/// Step 1 for numeric columns: (image, row) pairs radix-sorted by image, NaN rows cut off the
/// end (their image is all ones, above every other float image).
fn sorted_images<U: SortPairsWith<u32>>(stream: &Stream, column: &ColumnView<'_>) -> Result<(DeviceBuffer<U>, DeviceBuffer<u32>)> {
    let n = column.len();
    let mut images = stream.alloc::<U>(n)?;
    let mut rows = stream.alloc::<u32>(n)?;
    let mut nans = stream.alloc_zeroed::<u64>(1)?;
    let (desc, i, r, c) = (column_desc(column), images.view_mut().as_mut_ptr() as *mut c_void, rows.view_mut().as_mut_ptr(), nans.view_mut().as_mut_ptr());
    // SAFETY: the column holds n values of the width of U; outputs hold n entries.
    launch(stream, "inlj: key images", || unsafe { ffi::gj_i_build_images(desc, i, r, c, stream.raw()) })?;
    let (mut keys, mut sorted) = sort_pairs_new(stream, &images.view(), &rows.view(), SortOrder::Ascending)?;
    if kernel_type_of(column).is_float() {
        let keep = n - read_scalar(stream, &nans)? as usize;
        keys.truncate(keep);
        sorted.truncate(keep);
    }
    Ok((keys, sorted))
}

/// The number of zero (`want == false`) or non-zero flags. Waits for the stream.
fn count_flags(stream: &Stream, flags: &DeviceView<'_, u8>, want: bool) -> Result<u64> {
    let mut count = stream.alloc_zeroed::<u64>(1)?;
    let c = count.view_mut().as_mut_ptr();
    let (f, n) = (flags.as_ptr(), flags.len() as i64);
    // SAFETY: n flags; one zeroed counter.
    launch(stream, "inlj: count flags", || unsafe { ffi::gj_i_count_flags(f, n, want as i32, c, stream.raw()) })?;
    read_scalar(stream, &count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_every_join_type_and_probe_side() {
        use JoinType::*;
        let pairs = |keep_probe, keep_index| Plan::Pairs { keep_probe, keep_index };
        let cases = [
            (Inner, Side::Left, pairs(false, false)),
            (Inner, Side::Right, pairs(false, false)),
            (Left, Side::Left, pairs(true, false)),
            (Left, Side::Right, pairs(false, true)),
            (Right, Side::Left, pairs(false, true)),
            (Right, Side::Right, pairs(true, false)),
            (Full, Side::Left, pairs(true, true)),
            (Full, Side::Right, pairs(true, true)),
            (LeftSemi, Side::Left, Plan::ProbeRows { semi: true }),
            (LeftSemi, Side::Right, Plan::IndexRows { semi: true }),
            (LeftAnti, Side::Left, Plan::ProbeRows { semi: false }),
            (LeftAnti, Side::Right, Plan::IndexRows { semi: false }),
            (RightSemi, Side::Left, Plan::IndexRows { semi: true }),
            (RightSemi, Side::Right, Plan::ProbeRows { semi: true }),
            (RightAnti, Side::Left, Plan::IndexRows { semi: false }),
            (RightAnti, Side::Right, Plan::ProbeRows { semi: false }),
        ];
        for (jt, side, want) in cases {
            assert_eq!(Plan::of(jt, side), want, "{jt:?} probing from the {side:?}");
        }
    }

    #[test]
    fn type_mismatch_is_invalid_argument() {
        assert!(check_same_type(DataType::Int32, DataType::Int32).is_ok());
        for (a, b) in [(DataType::Int32, DataType::Int64), (DataType::LargeUtf8, DataType::UInt64), (DataType::Float32, DataType::Float64)] {
            assert!(matches!(check_same_type(a, b), Err(Error::InvalidArgument(_))), "{a} vs {b}");
        }
    }

    #[test]
    fn row_limit() {
        assert!(check_rows("x", RowId::MAX_ROWS as usize).is_ok());
        assert!(matches!(check_rows("x", RowId::MAX_ROWS as usize + 1), Err(Error::TooLarge { .. })));
    }
}
