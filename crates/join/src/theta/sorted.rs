//! Sort-based theta joins for a single inequality `l.a op r.b` (`op` in `<`, `<=`, `>`, `>=`) or
//! a band `r.b - w <= l.a <= r.b + w`, over numeric columns of the same type
//! ([`RangeCondition`], from [`CheckedPredicate::band_or_inequality`]).
//!
//! The algorithm, as steps:
//! 1. sort the right key column with row ids (`-0.0` made `0.0` so equal values are adjacent;
//!    NaN keys made one NaN that sorts last, outside the searched range: they match nothing);
//! 2. for each left row, find the matching positions `[lo, hi)` of the sorted right side by
//!    binary search with the predicate itself (a NaN left key matches nothing; integer bands are
//!    exact in 128 bits, float bands round in the column's type exactly as the predicate does);
//! 3. counts `hi - lo` per left row, their exclusive scan (output offsets) and the total;
//! 4. either expand each left row's contiguous run of sorted right rows (gather maps, or output
//!    columns written directly with coalesced stores), or aggregate without pairs: prefix sums of
//!    a right column in sorted order (128-bit integer sums; floats in `f64` with NaN/inf counts),
//!    running MIN/MAX (an inequality's ranges are prefixes or suffixes) or a sparse table (bands);
//!    a left column's value times the count;
//! 5. right and full joins add the right rows covered by no range (difference array + scan).
//!
//! Aggregates fuse steps 2 and 4 into one kernel (each left row searches its range and adds its
//! cell; the last block to finish reduces the block partials). For right sides of at most
//! [`SMALL_RIGHT_MAX`] rows (all aggregates but MIN/MAX of a right column), step 1 and the prefix
//! sums take two kernels and one workspace allocation: one block per run of 4096 rows sorts it
//! (`cub::BlockRadixSort` on the key bits that differ within the run) with its prefix sums, then
//! every element finds its place in the whole order by binary search in the other runs. An
//! aggregate is then three launches, one allocation and one read-back.
//!
//! **Output order.** `Inner`/`Left`/`LeftSemi`/`LeftAnti`: by left row ascending; within a left
//! row, right rows in ascending order of the right key (ties by right row id); a left-join row
//! without matches has one row `(l, NONE)`. `Right`/`Full`: those rows first (the left-outer
//! ones for `Full`), then the unmatched right rows in ascending key order (NaN keys last).
//! `RightSemi`/`RightAnti`: right rows in ascending key order (ties by row id, NaN keys last).
//!
//! ```no_run
//! use gpujoin_join::device_relation::upload;
//! use gpujoin_join::predicate::{col_l, col_r, schema_of, Side};
//! use gpujoin_join::table::{HostColumn, HostTable};
//! use gpujoin_join::theta::sorted::{sorted_theta_aggregate, sorted_theta_join};
//! use gpujoin_join::theta::{Agg, AggValue};
//! use gpujoin_join::JoinType;
//! # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! // SUM(S.x) WHERE R.a > S.a
//! let r = HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![5, 1]))])?;
//! let t = HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![3, 4, 9])), ("c1", HostColumn::from_values::<i64>(vec![10, 20, 30]))])?;
//! let p = col_l(0).greater(col_r(0)).check(&schema_of(&r)?, &schema_of(&t)?)?;
//! let (dr, dt) = (upload(s, &r)?, upload(s, &t)?);
//! let (dr, dt) = (dr.view(), dt.view());
//! assert_eq!(sorted_theta_aggregate(s, &dr, &dt, &p, Agg::Sum, Some((Side::Right, 1)))?, AggValue::Int(30));
//! let pairs = sorted_theta_join(s, &dr, &dt, &p, JoinType::Inner)?.pairs()?; // (0,0) (0,1)
//! assert_eq!(pairs.len(), 2);
//! # Ok(()) }
//! ```

use std::ffi::c_void;
use std::ops::Range;

use gpujoin_cub_sys::result::launch;
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Pod, Result, Stream};
use gpujoin_primitives::{exclusive_sum_in_place, inclusive_sum, select_by_flag, sort_pairs, SortOrder};

use crate::device_relation::{alloc_column, kernel_type_of, relation_schema, RelationRef};
use crate::table::{Column, ColumnView, TableView};
use crate::kernels::sys::theta_sort as ffi;
use crate::maps::{GatherMaps, Side};
use crate::predicate::{CheckedPredicate, CmpOp, DataType, RangeCondition, Scalar};
use super::{Agg, AggValue};
use crate::types::{JoinType, RowId};

/// A new output buffer of `n` elements; `poison` (tests, `SortedTesting::poison_outputs`):
/// filled with 0xFF bytes before the kernels write it, so that unwritten elements show.
fn alloc_out<T: Pod>(stream: &Stream, n: usize, poison: bool) -> Result<DeviceBuffer<T>> {
    let mut b = stream.alloc::<T>(n)?;
    if poison {
        stream.memset_bytes(&mut b.view_mut(), 0xFF)?;
    }
    Ok(b)
}

// ------------------------------------------------------------------------------------------------
// Plain host-side helpers (CPU-tested)
// ------------------------------------------------------------------------------------------------

/// The kernel type code of a numeric kernel type; `None` for strings (and types that are no
/// kernel type).
fn type_code(t: DataType) -> Option<i32> {
    Some(match t {
        DataType::Int32 => ffi::GJ_TS_I32,
        DataType::Int64 => ffi::GJ_TS_I64,
        DataType::UInt32 => ffi::GJ_TS_U32,
        DataType::UInt64 => ffi::GJ_TS_U64,
        DataType::Float32 => ffi::GJ_TS_F32,
        DataType::Float64 => ffi::GJ_TS_F64,
        _ => return None,
    } as i32)
}

/// The kernel condition code and band width of a condition (`width` of the columns' type).
fn condition_code(cond: &RangeCondition) -> Result<(i32, ffi::gj_ts_width)> {
    let zero = ffi::gj_ts_width { i: 0, u: 0, f: 0.0 };
    Ok(match cond {
        RangeCondition::Inequality { op, .. } => {
            let c = match op {
                CmpOp::Lt => ffi::GJ_TS_LT,
                CmpOp::Le => ffi::GJ_TS_LE,
                CmpOp::Gt => ffi::GJ_TS_GT,
                CmpOp::Ge => ffi::GJ_TS_GE,
                op => return Err(Error::invalid(format!("sorted theta join: operator {} is not an inequality", op.symbol()))),
            };
            (c as i32, zero)
        }
        RangeCondition::Band { width, .. } => {
            let w = match *width {
                Scalar::I32(v) => ffi::gj_ts_width { i: v as i64, ..zero },
                Scalar::I64(v) => ffi::gj_ts_width { i: v, ..zero },
                Scalar::U32(v) => ffi::gj_ts_width { u: v as u64, ..zero },
                Scalar::U64(v) => ffi::gj_ts_width { u: v, ..zero },
                Scalar::F32(v) => ffi::gj_ts_width { f: v as f64, ..zero },
                Scalar::F64(v) => ffi::gj_ts_width { f: v, ..zero },
                Scalar::Utf8(_) => return Err(Error::invalid("sorted theta join: a band width must be a number")),
            };
            (ffi::GJ_TS_BAND as i32, w)
        }
    })
}

/// The (left column, right column, type) of a condition, checked against the two schemas: both
/// columns exist, are numeric and of the same type (and the band width has that type).
fn check_condition(cond: &RangeCondition, left: &[DataType], right: &[DataType]) -> Result<(usize, usize, DataType)> {
    let (l, r) = match cond {
        RangeCondition::Inequality { left_col, right_col, .. } | RangeCondition::Band { left_col, right_col, .. } => (*left_col, *right_col),
    };
    let lt = *left.get(l).ok_or_else(|| Error::invalid(format!("sorted theta join: left column {l} does not exist")))?;
    let rt = *right.get(r).ok_or_else(|| Error::invalid(format!("sorted theta join: right column {r} does not exist")))?;
    if lt != rt || !lt.is_numeric() {
        return Err(Error::invalid(format!("sorted theta join: columns of types {lt} and {rt}; need one numeric type")));
    }
    if let RangeCondition::Band { width, .. } = cond {
        if width.data_type() != lt {
            return Err(Error::invalid(format!("sorted theta join: band width {width:?} is not of the columns' type {lt}")));
        }
    }
    Ok((l, r, lt))
}

/// Levels of a sparse table over `n` values: `floor(log2 n) + 1` (0 for none).
fn sparse_levels(n: usize) -> i32 {
    if n == 0 {
        0
    } else {
        (usize::BITS - n.leading_zeros()) as i32
    }
}

/// How MIN/MAX of a right column is answered per range: inequality ranges are prefixes
/// (`>`, `>=`: `[0, hi)`) or suffixes (`<`, `<=`: `[lo, n_valid)`); band ranges need a sparse table.
fn minmax_structure(cond: &RangeCondition) -> i32 {
    (match cond {
        RangeCondition::Inequality { op: CmpOp::Gt | CmpOp::Ge, .. } => ffi::GJ_TS_STRUCT_PREFIX,
        RangeCondition::Inequality { .. } => ffi::GJ_TS_STRUCT_SUFFIX,
        RangeCondition::Band { .. } => ffi::GJ_TS_STRUCT_SPARSE,
    }) as i32
}

/// A result cell (`gj_ts_cell` as four words) as an [`AggValue`].
fn cell_value(cell: [u64; 4], agg: Agg, float: bool) -> AggValue {
    let int = ((cell[1] as i64 as i128) << 64) | cell[0] as i128;
    let present = (cell[3] & 0xFFFF_FFFF) != 0;
    match agg {
        Agg::Count => AggValue::Int(int),
        _ if !present => AggValue::None,
        _ if float => AggValue::Float(f64::from_bits(cell[2])),
        _ => AggValue::Int(int),
    }
}

fn agg_code(agg: Agg) -> i32 {
    (match agg {
        Agg::Count => ffi::GJ_TS_AGG_COUNT,
        Agg::Sum => ffi::GJ_TS_AGG_SUM,
        Agg::Min => ffi::GJ_TS_AGG_MIN,
        Agg::Max => ffi::GJ_TS_AGG_MAX,
    }) as i32
}

fn count_mode(join_type: JoinType) -> i32 {
    (match join_type {
        JoinType::Left | JoinType::Full => ffi::GJ_TS_COUNT_LEFT_OUTER,
        JoinType::LeftSemi => ffi::GJ_TS_COUNT_SEMI,
        JoinType::LeftAnti => ffi::GJ_TS_COUNT_ANTI,
        _ => ffi::GJ_TS_COUNT_INNER,
    }) as i32
}

fn check_rows(side: &str, n: usize) -> Result<()> {
    if n as u64 > RowId::MAX_ROWS {
        return Err(Error::too_large(format!("{side} rows"), n as u64, RowId::MAX_ROWS));
    }
    Ok(())
}

fn check_range(rows: &Range<u64>, n: usize) -> Result<()> {
    if rows.start > rows.end || rows.end > n as u64 {
        return Err(Error::invalid(format!("left row range {}..{} outside 0..{n}", rows.start, rows.end)));
    }
    Ok(())
}

fn output_len(n: u64) -> Result<usize> {
    usize::try_from(n).ok().filter(|&n| n <= isize::MAX as usize / 8).ok_or_else(|| Error::too_large("theta join output rows", n, (isize::MAX / 8) as u64))
}

// ------------------------------------------------------------------------------------------------
// Device columns
// ------------------------------------------------------------------------------------------------

/// (type code, pointer, element bytes) of a numeric column of a relation (its offset applied).
fn raw(c: &ColumnView<'_>) -> Result<(i32, *const c_void, i32)> {
    let code = type_code(kernel_type_of(c)).ok_or_else(|| Error::invalid("sorted theta join: string columns are not supported here"))?;
    let w = c.data_type().byte_width().expect("a numeric kernel type");
    Ok((code, c.values().slice(c.offset() * w..).as_ptr() as *const c_void, w as i32))
}

/// The values of a column made on the device (offset 0), for writing.
fn raw_mut(c: &mut Column) -> *mut c_void {
    c.values_ptr_mut()
}

/// Step 1: the right key column normalized and sorted with row ids: (sorted keys, of the
/// column's type; perm).
fn sort_right(stream: &Stream, col: ColumnView<'_>) -> Result<(Column, DeviceBuffer<u32>)> {
    macro_rules! go {
        ($t:ty) => {{
            let n = col.len();
            let code = type_code(kernel_type_of(&col)).unwrap();
            let mut norm = stream.alloc::<$t>(n)?;
            let mut ids = stream.alloc::<u32>(n)?;
            let src = raw(&col)?.1;
            let (dst, idp) = (norm.view_mut().as_mut_ptr() as *mut c_void, ids.view_mut().as_mut_ptr());
            // SAFETY: src, dst and ids hold n elements of the named type.
            launch(stream, "gj_ts_prepare_keys", || unsafe { ffi::gj_ts_prepare_keys(code, src, n as i64, dst, idp, stream.raw()) })?;
            let mut sorted = stream.alloc::<$t>(n)?;
            let mut perm = stream.alloc::<u32>(n)?;
            sort_pairs(stream, &norm.view(), &ids.view(), &mut sorted.view_mut(), &mut perm.view_mut(), SortOrder::Ascending, None)?;
            (Column::from_buffers(col.data_type(), n, sorted.into_bytes(), None, None)?, perm)
        }};
    }
    Ok(match kernel_type_of(&col) {
        DataType::Int32 => go!(i32),
        DataType::Int64 => go!(i64),
        DataType::UInt32 => go!(u32),
        DataType::UInt64 => go!(u64),
        DataType::Float32 => go!(f32),
        DataType::Float64 => go!(f64),
        DataType::LargeUtf8 => return Err(Error::invalid("sorted theta join: string keys are not supported")),
        t => return Err(Error::invalid(format!("internal: sorted theta join over {t}, not a kernel type"))),
    })
}

/// Steps 1-3: the sorted right side and each left row's matching range.
struct Ranges {
    perm: DeviceBuffer<u32>,
    lo: DeviceBuffer<u32>,
    hi: DeviceBuffer<u32>,
    /// Per-left-row counts (by the count mode), `left_rows + 1` entries, the last 0.
    counts: Option<DeviceBuffer<u64>>,
    right_rows: usize,
}

impl Ranges {
    fn compute(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, cond: &RangeCondition, mode: Option<i32>) -> Result<Ranges> {
        let (lc, rc, t) = check_condition(cond, &relation_schema(left)?, &relation_schema(right)?)?;
        check_rows("left", left.rows())?;
        check_rows("right", right.rows())?;
        let (code, width) = condition_code(cond)?;
        let (key_type, left_ptr, _) = raw(&left.columns()[lc])?;
        let (sorted, perm) = sort_right(stream, right.columns()[rc])?;
        let (n_left, n_right) = (left.rows(), right.rows());
        let mut n_valid = None;
        if t.is_float() {
            let mut nv = stream.alloc::<u64>(1)?;
            let p = nv.view_mut().as_mut_ptr();
            let (_, s, _) = raw(&sorted.view())?;
            // SAFETY: s holds n_right keys; p one u64.
            launch(stream, "gj_ts_valid_count", || unsafe { ffi::gj_ts_valid_count(key_type, s, n_right as i64, p, stream.raw()) })?;
            n_valid = Some(nv);
        }
        let mut lo = stream.alloc::<u32>(n_left)?;
        let mut hi = stream.alloc::<u32>(n_left)?;
        let mut counts = match mode {
            Some(_) => Some(stream.alloc::<u64>(n_left + 1)?),
            None => None,
        };
        let (_, s, _) = raw(&sorted.view())?;
        let nv = n_valid.as_ref().map_or(std::ptr::null(), |b| b.view().as_ptr());
        let (lop, hip) = (lo.view_mut().as_mut_ptr(), hi.view_mut().as_mut_ptr());
        let cp = counts.as_mut().map_or(std::ptr::null_mut(), |c| c.view_mut().as_mut_ptr());
        // SAFETY: left has n_left keys, s n_right sorted keys of the same type; lo/hi n_left
        // entries; counts (if any) n_left + 1.
        launch(stream, "gj_ts_ranges", || unsafe {
            ffi::gj_ts_ranges(key_type, left_ptr, n_left as i64, s, n_right as i64, nv, code, width, lop, hip, cp, mode.unwrap_or(0), stream.raw())
        })?;
        // The sorted keys and the valid count are freed stream-ordered, after the kernel.
        drop((sorted, n_valid));
        Ok(Ranges { perm, lo, hi, counts, right_rows: n_right })
    }

    /// Turns the counts into their exclusive scan (output offsets) and returns the total.
    fn scan_counts(&mut self, stream: &Stream) -> Result<(DeviceBuffer<u64>, u64)> {
        let mut c = self.counts.take().ok_or_else(|| Error::invalid("no counts"))?;
        exclusive_sum_in_place(stream, &mut c.view_mut())?;
        let n = c.len();
        let total = stream.copy_to_host(&c.slice(n - 1..))?[0];
        Ok((c, total))
    }

    /// Flags (sorted right positions) of the right rows some range covers.
    fn cover_flags(&self, stream: &Stream, n_left: usize) -> Result<DeviceBuffer<u8>> {
        let n = self.right_rows;
        let mut diff = stream.alloc_zeroed::<u64>(n + 1)?;
        let d = diff.view_mut().as_mut_ptr();
        let (lo, hi) = (self.lo.view().as_ptr(), self.hi.view().as_ptr());
        // SAFETY: lo/hi have n_left entries <= n; diff n + 1.
        launch(stream, "gj_ts_cover_diff", || unsafe { ffi::gj_ts_cover_diff(lo, hi, n_left as i64, d, stream.raw()) })?;
        let mut cover = stream.alloc::<u64>(n + 1)?;
        inclusive_sum(stream, &diff.view(), &mut cover.view_mut())?;
        let mut flags = stream.alloc::<u8>(n)?;
        let (c, f) = (cover.view().as_ptr(), flags.view_mut().as_mut_ptr());
        // SAFETY: cover n + 1 entries, flags n.
        launch(stream, "gj_ts_cover_flags", || unsafe { ffi::gj_ts_cover_flags(c, n as i64, f, stream.raw()) })?;
        Ok(flags)
    }
}

/// Writes the gather maps of output rows `[out_begin, out_begin + n)`, produced by left rows `rows`.
#[allow(clippy::too_many_arguments)]
fn expand_into(
    stream: &Stream,
    offsets: &DeviceView<'_, u64>,
    r: &Ranges,
    rows: Range<u64>,
    out_begin: u64,
    n: u64,
    left_out: *mut u32,
    right_out: *mut u32,
) -> Result<()> {
    let (o, lo, hi, perm) = (offsets.as_ptr(), r.lo.view().as_ptr(), r.hi.view().as_ptr(), r.perm.view().as_ptr());
    // SAFETY: offsets covers rows.end; the outputs hold n entries (right_out may be null).
    launch(stream, "gj_ts_expand", || unsafe {
        ffi::gj_ts_expand(o, lo, hi, perm, rows.start as i64, rows.end as i64, out_begin, n, left_out, right_out, stream.raw())
    })
}

fn check_schemas(left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate) -> Result<RangeCondition> {
    pred.check_schemas(&relation_schema(left)?, &relation_schema(right)?)?;
    pred.band_or_inequality().ok_or_else(|| Error::invalid("sorted theta join: the predicate is neither a single inequality nor a band"))
}

// ------------------------------------------------------------------------------------------------
// The prepared join (chunked output)
// ------------------------------------------------------------------------------------------------

/// A sort-based theta join with its ranges and output offsets computed, producing its output for
/// any range of left rows (for a chunking driver). Join types `Inner`, `Left`, `LeftSemi` and
/// `LeftAnti` (the ones whose output is a concatenation over left rows).
///
/// ```no_run
/// use gpujoin_join::device_relation::upload;
/// use gpujoin_join::predicate::{schema_of, CmpOp, RangeCondition};
/// use gpujoin_join::table::{HostColumn, HostTable};
/// use gpujoin_join::theta::sorted::SortedThetaJoin;
/// use gpujoin_join::JoinType;
/// # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
/// let l = upload(s, &HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![1, 5, 9]))])?)?;
/// let l = l.view();
/// let r = upload(s, &HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![4, 8]))])?)?;
/// let r = r.view();
/// let cond = RangeCondition::Inequality { left_col: 0, op: CmpOp::Gt, right_col: 0 };
/// let join = SortedThetaJoin::prepare(s, &l, &r, &cond, JoinType::Inner)?;
/// assert_eq!(join.offsets().len(), 4); // counts 0, 1, 2 -> offsets 0, 0, 1, 3
/// let first = join.produce(s, 0..2)?; // (1, 0)
/// let rest = join.produce(s, 2..3)?; // (2, 0) (2, 1)
/// assert_eq!(first.rows() + rest.rows(), 3);
/// # Ok(()) }
/// ```
pub struct SortedThetaJoin<'a> {
    left: RelationRef<'a>,
    right: RelationRef<'a>,
    join_type: JoinType,
    ranges: Ranges,
    offsets: DeviceBuffer<u64>,
    total: u64,
    /// Poison the outputs (tests).
    poison: bool,
}

impl<'a> SortedThetaJoin<'a> {
    /// Sorts the right side, finds every left row's range and scans the output counts.
    /// Errors: `InvalidArgument` for another join type, missing or mistyped columns.
    pub fn prepare(stream: &Stream, left: &'a TableView<'a>, right: &'a TableView<'a>, cond: &RangeCondition, join_type: JoinType) -> Result<Self> {
        Self::prepare_with(stream, left.into(), right.into(), cond, join_type, false)
    }

    pub(crate) fn prepare_with(stream: &Stream, left: RelationRef<'a>, right: RelationRef<'a>, cond: &RangeCondition, join_type: JoinType, poison: bool) -> Result<Self> {
        if !matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti) {
            return Err(Error::invalid(format!("SortedThetaJoin::prepare: join type {join_type:?} is not produced per left row; use sorted_theta_join")));
        }
        let mut ranges = Ranges::compute(stream, &left.view(), &right.view(), cond, Some(count_mode(join_type)))?;
        let (offsets, total) = ranges.scan_counts(stream)?;
        Ok(SortedThetaJoin { left, right, join_type, ranges, offsets, total, poison })
    }

    /// Left rows of the join.
    pub fn left_rows(&self) -> usize {
        self.left.rows()
    }

    /// The join type.
    pub fn join_type(&self) -> JoinType {
        self.join_type
    }

    /// Output rows of the whole join.
    pub fn total_rows(&self) -> u64 {
        self.total
    }

    /// Exclusive scan of the per-left-row output counts: `left_rows() + 1` entries; the output of
    /// left rows `a..b` is rows `offsets[a]..offsets[b]`.
    pub fn offsets(&self) -> DeviceView<'_, u64> {
        self.offsets.view()
    }

    fn output_span(&self, stream: &Stream, rows: &Range<u64>) -> Result<(u64, u64)> {
        check_range(rows, self.left_rows())?;
        if rows.start == rows.end {
            return Ok((0, 0));
        }
        let a = stream.copy_to_host(&self.offsets.slice(rows.start as usize..rows.start as usize + 1))?[0];
        let b = stream.copy_to_host(&self.offsets.slice(rows.end as usize..rows.end as usize + 1))?[0];
        Ok((a, b - a))
    }

    /// The gather maps of left rows `rows` (in the order of the [module docs](self)); the
    /// concatenation over consecutive ranges equals the whole join.
    pub fn produce(&self, stream: &Stream, rows: Range<u64>) -> Result<GatherMaps> {
        let (begin, n) = self.output_span(stream, &rows)?;
        let len = output_len(n)?;
        let mut left_map = alloc_out::<u32>(stream, len, self.poison)?;
        let with_right = matches!(self.join_type, JoinType::Inner | JoinType::Left);
        let mut right_map = alloc_out::<u32>(stream, if with_right { len } else { 0 }, self.poison)?;
        if n > 0 {
            let lp = left_map.view_mut().as_mut_ptr();
            let rp = if with_right { right_map.view_mut().as_mut_ptr() } else { std::ptr::null_mut() };
            expand_into(stream, &self.offsets.view(), &self.ranges, rows, begin, n, lp, rp)?;
        }
        Ok(GatherMaps::new(self.join_type, left_map, right_map))
    }

    /// Output columns of left rows `rows` of an `Inner` join, written directly (no gather maps):
    /// `left_cols` of the left relation, then `right_cols` of the right one, in the row order of
    /// [`SortedThetaJoin::produce`]. Numeric columns only.
    pub fn materialize(&self, stream: &Stream, rows: Range<u64>, left_cols: &[usize], right_cols: &[usize]) -> Result<Vec<Column>> {
        if self.join_type != JoinType::Inner {
            return Err(Error::invalid("SortedThetaJoin::materialize: inner joins only"));
        }
        let (lv, rv) = (self.left.view(), self.right.view());
        for (side, cols, rel) in [("left", left_cols, &lv), ("right", right_cols, &rv)] {
            for &c in cols {
                if c >= rel.columns().len() {
                    return Err(Error::invalid(format!("materialize: {side} column {c} does not exist")));
                }
                raw(&rel.columns()[c])?;
            }
        }
        let (begin, n) = self.output_span(stream, &rows)?;
        let len = output_len(n)?;
        // Right columns in sorted order, so each left row's run reads consecutive values.
        let n_right = self.right.rows();
        let mut sorted_cols = Vec::with_capacity(right_cols.len());
        for &c in right_cols {
            let col = rv.columns()[c];
            let mut out = alloc_column(stream, col.data_type(), n_right, self.poison)?;
            let (_, src, bytes) = raw(&col)?;
            let (dst, perm) = (raw_mut(&mut out), self.ranges.perm.view().as_ptr());
            // SAFETY: src and dst hold n_right elements of `bytes` bytes; perm n_right rows.
            launch(stream, "gj_ts_gather", || unsafe { ffi::gj_ts_gather(src, perm, n_right as i64, bytes, dst, stream.raw()) })?;
            sorted_cols.push(out);
        }
        let mut outputs = Vec::with_capacity(left_cols.len() + right_cols.len());
        let mut descs = Vec::new();
        for &c in left_cols {
            let col = lv.columns()[c];
            let mut out = alloc_column(stream, col.data_type(), len, self.poison)?;
            let (_, src, bytes) = raw(&col)?;
            descs.push(ffi::gj_ts_out_col { src, dst: raw_mut(&mut out), elem_bytes: bytes, from_right: 0 });
            outputs.push(out);
        }
        for col in &sorted_cols {
            let mut out = alloc_column(stream, col.data_type(), len, self.poison)?;
            let (_, src, bytes) = raw(&col.view())?;
            descs.push(ffi::gj_ts_out_col { src, dst: raw_mut(&mut out), elem_bytes: bytes, from_right: 1 });
            outputs.push(out);
        }
        if n > 0 {
            let (o, lo) = (self.offsets.view().as_ptr(), self.ranges.lo.view().as_ptr());
            for chunk in descs.chunks(ffi::GJ_TS_MAX_OUT_COLS as usize) {
                // SAFETY: every destination holds n rows; sources cover the rows and ranges.
                launch(stream, "gj_ts_materialize", || unsafe {
                    ffi::gj_ts_materialize(o, lo, rows.start as i64, rows.end as i64, begin, n, chunk.as_ptr(), chunk.len() as i32, stream.raw())
                })?;
            }
        }
        // The sorted right columns must outlive the kernels: stream-ordered frees keep that.
        drop(sorted_cols);
        Ok(outputs)
    }
}

// ------------------------------------------------------------------------------------------------
// Entry points
// ------------------------------------------------------------------------------------------------

/// The sort-based theta join of `left` and `right` on `pred` (a single inequality or a band,
/// [`CheckedPredicate::band_or_inequality`]), any join type; row order in the [module docs](self).
///
/// Errors: `InvalidArgument` when the predicate has neither shape or the relations' schemas are
/// not the checked ones; `TooLarge` for more than `RowId::MAX_ROWS` rows on a side.
pub fn sorted_theta_join(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, join_type: JoinType) -> Result<GatherMaps> {
    let cond = check_schemas(left, right, pred)?;
    join_on_condition(stream, left, right, &cond, join_type)
}

/// [`sorted_theta_join`] on a [`RangeCondition`] directly.
pub fn join_on_condition(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, cond: &RangeCondition, join_type: JoinType) -> Result<GatherMaps> {
    join_on_condition_with(stream, left, right, cond, join_type, false)
}

fn join_on_condition_with(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, cond: &RangeCondition, join_type: JoinType, poison: bool) -> Result<GatherMaps> {
    if matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti) {
        let join = SortedThetaJoin::prepare_with(stream, RelationRef::Borrowed(left), RelationRef::Borrowed(right), cond, join_type, poison)?;
        return join.produce(stream, 0..left.rows() as u64);
    }
    let n_left = left.rows();
    let mut r = Ranges::compute(stream, left, right, cond, Some(count_mode(join_type)))?;
    let flags = r.cover_flags(stream, n_left)?;
    let empty = || stream.alloc::<u32>(0);
    match join_type {
        JoinType::RightSemi | JoinType::RightAnti => {
            let rows = select_by_flag(stream, Some(&r.perm.view()), &flags.view(), join_type == JoinType::RightSemi)?;
            Ok(GatherMaps::new(join_type, empty()?, rows))
        }
        _ => {
            let unmatched = select_by_flag(stream, Some(&r.perm.view()), &flags.view(), false)?;
            let (offsets, first) = r.scan_counts(stream)?;
            let total = first + unmatched.len() as u64;
            let len = output_len(total)?;
            let mut lmap = alloc_out::<u32>(stream, len, poison)?;
            let mut rmap = alloc_out::<u32>(stream, len, poison)?;
            if first > 0 {
                let (lp, rp) = (lmap.view_mut().as_mut_ptr(), rmap.view_mut().as_mut_ptr());
                expand_into(stream, &offsets.view(), &r, 0..n_left as u64, 0, first, lp, rp)?;
            }
            let f = first as usize;
            stream.copy_device_to_device(&unmatched.view(), &mut rmap.slice_mut(f..))?;
            stream.fill_u32_bits(&mut lmap.slice_mut(f..), u32::MAX)?;
            Ok(GatherMaps::new(join_type, lmap, rmap))
        }
    }
}

/// The number of rows [`sorted_theta_join`] returns, without materializing them.
pub fn sorted_theta_join_size(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, join_type: JoinType) -> Result<u64> {
    let cond = check_schemas(left, right, pred)?;
    let n_left = left.rows();
    let mut r = Ranges::compute(stream, left, right, &cond, Some(count_mode(join_type)))?;
    let unmatched_right = |r: &Ranges, want: bool| -> Result<u64> {
        let flags = r.cover_flags(stream, n_left)?;
        Ok(select_by_flag(stream, None, &flags.view(), want)?.len() as u64)
    };
    Ok(match join_type {
        JoinType::RightSemi => unmatched_right(&r, true)?,
        JoinType::RightAnti => unmatched_right(&r, false)?,
        JoinType::Right | JoinType::Full => {
            let extra = unmatched_right(&r, false)?;
            r.scan_counts(stream)?.1 + extra
        }
        _ => r.scan_counts(stream)?.1,
    })
}

/// `agg` of `column` over the pairs of the inner sort-based theta join, without materializing
/// them (semantics of [`Agg`], those of the CPU reference
/// the CPU reference folded over `gpujoin_testkit::table_reference::join`'s pairs; float sums may round differently: prefix
/// sums in `f64`).
pub fn sorted_theta_aggregate(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<AggValue> {
    let cond = check_schemas(left, right, pred)?;
    Ok(aggregate_on_condition(stream, left, right, &cond, agg, column, false)?.0)
}

/// For each left row, `agg` of `column` over its matching right rows (semantics of the CPU
/// reference's fold, per left row).
pub fn sorted_theta_aggregate_per_left_row(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<Vec<AggValue>> {
    let cond = check_schemas(left, right, pred)?;
    Ok(aggregate_on_condition(stream, left, right, &cond, agg, column, true)?.1)
}

/// The aggregate (total, or per left row when `per_row`) on a [`RangeCondition`].
pub fn aggregate_on_condition(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    cond: &RangeCondition,
    agg: Agg,
    column: Option<(Side, usize)>,
    per_row: bool,
) -> Result<(AggValue, Vec<AggValue>)> {
    aggregate_via(stream, left, right, cond, agg, column, per_row, AggregatePath::Auto, false)
}

/// Private, so that [`AggregatePath`] is public only with the feature `testing`.
mod aggregate_path {
    /// How an aggregate sorts the right side and builds its structure (tests choose it:
    /// `SortedTesting::aggregate_path`; public only with the feature `testing`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub enum AggregatePath {
        /// [`AggregatePath::Small`] where it applies, else [`AggregatePath::General`].
        #[default]
        Auto,
        /// Right sides of at most [`SMALL_RIGHT_MAX`](super::SMALL_RIGHT_MAX) rows, aggregates other than MIN/MAX of a right
        /// column: sort and prefix sums in two kernels, one allocation (`InvalidArgument` elsewhere).
        Small,
        /// CUB radix sort, then the structure (prefix sums, running MIN/MAX or a sparse table).
        General,
    }
}
#[cfg(feature = "testing")]
pub use aggregate_path::AggregatePath;
#[cfg(not(feature = "testing"))]
use aggregate_path::AggregatePath;

/// The most right rows of the small aggregate path.
pub const SMALL_RIGHT_MAX: usize = ffi::GJ_TS_SMALL_MAX as usize;

/// Whether the small path can answer `agg` over `n_right` right rows (`col_side`: 0 none,
/// 1 left column, 2 right column): it builds prefix sums only, so not MIN/MAX of a right column.
fn small_path_applies(n_right: usize, agg: Agg, col_side: i32) -> bool {
    n_right <= SMALL_RIGHT_MAX && !(col_side == 2 && matches!(agg, Agg::Min | Agg::Max))
}

/// Byte offsets of the pieces of an aggregate's one workspace allocation (each 256-byte aligned):
/// for the small path's `n` right rows the run images, run row ids, run prefix sums, sorted keys
/// and prefix sums (`n + 1`), then for the total the partial cells, the total cell and the
/// last-block counter. `key_bytes`: the key's width; `sum_bytes`: a prefix element's (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AggLayout {
    run_img: usize,
    run_row: usize,
    run_incl: usize,
    sorted: usize,
    prefix: usize,
    partials: usize,
    total: usize,
    done: usize,
    bytes: usize,
}

const CELL_BYTES: usize = std::mem::size_of::<ffi::gj_ts_cell>();

impl AggLayout {
    fn new(n: usize, key_bytes: usize, sum_bytes: usize, parts: usize) -> Result<AggLayout> {
        let mut end = 0usize;
        let mut piece = |bytes: Option<usize>| -> Result<usize> {
            let bytes = bytes.ok_or_else(|| Error::too_large("aggregate workspace bytes", n as u64, usize::MAX as u64))?;
            let at = end.checked_next_multiple_of(256).ok_or_else(|| Error::too_large("aggregate workspace bytes", n as u64, usize::MAX as u64))?;
            end = at.checked_add(bytes).ok_or_else(|| Error::too_large("aggregate workspace bytes", n as u64, usize::MAX as u64))?;
            Ok(at)
        };
        let run_img = piece(n.checked_mul(key_bytes))?;
        let run_row = piece(n.checked_mul(4))?;
        let run_incl = piece(n.checked_mul(sum_bytes))?;
        let sorted = piece(n.checked_mul(key_bytes))?;
        let prefix = piece(if sum_bytes == 0 { Some(0) } else { (n + 1).checked_mul(sum_bytes) })?;
        let partials = piece(parts.checked_mul(CELL_BYTES))?;
        let total = piece(Some(CELL_BYTES))?;
        let done = piece(Some(4))?;
        Ok(AggLayout { run_img, run_row, run_incl, sorted, prefix, partials, total, done, bytes: end })
    }
}

/// A cell read back as its four words.
fn cell_words(bytes: &[u8]) -> [u64; 4] {
    let mut w = [0u64; 4];
    for (k, c) in bytes.chunks_exact(8).take(4).enumerate() {
        w[k] = u64::from_le_bytes(c.try_into().unwrap());
    }
    w
}

/// [`aggregate_on_condition`] through a chosen [`AggregatePath`], outputs poisoned or not.
#[allow(clippy::too_many_arguments)]
fn aggregate_via(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    cond: &RangeCondition,
    agg: Agg,
    column: Option<(Side, usize)>,
    per_row: bool,
    path: AggregatePath,
    poison: bool,
) -> Result<(AggValue, Vec<AggValue>)> {
    // The column: checked like the reference does.
    let col = match column {
        None if agg == Agg::Count => None,
        None => return Err(Error::invalid(format!("theta join {agg:?} needs a column"))),
        Some((side, index)) => {
            let rel = if side == Side::Left { left } else { right };
            if index >= rel.columns().len() {
                return Err(Error::invalid(format!("theta join {agg:?}: {side:?} column {index} does not exist")));
            }
            if agg == Agg::Count {
                None
            } else {
                raw(&rel.columns()[index])?;
                Some((side, rel.columns()[index]))
            }
        }
    };
    let (lc, rc, _) = check_condition(cond, &relation_schema(left)?, &relation_schema(right)?)?;
    check_rows("left", left.rows())?;
    check_rows("right", right.rows())?;
    let (code, width) = condition_code(cond)?;
    let (key_type, left_keys, _) = raw(&left.columns()[lc])?;
    let (_, right_keys, key_bytes) = raw(&right.columns()[rc])?;
    let (n_left, n_right) = (left.rows(), right.rows());
    let (col_type, col_side, col_ptr, float) = match col {
        None => (0, 0, std::ptr::null(), false),
        Some((side, c)) => {
            let (t, p, _) = raw(&c)?;
            (t, if side == Side::Left { 1 } else { 2 }, p, kernel_type_of(&c).is_float())
        }
    };
    let small = match path {
        AggregatePath::Auto => small_path_applies(n_right, agg, col_side),
        AggregatePath::General => false,
        AggregatePath::Small if small_path_applies(n_right, agg, col_side) => true,
        AggregatePath::Small => return Err(Error::invalid(format!("the small aggregate path does not answer {agg:?} over {n_right} right rows"))),
    };
    // No pairs: nothing to launch.
    if n_left == 0 || n_right == 0 {
        let empty = cell_value([0; 4], agg, float);
        return Ok(if per_row { (AggValue::None, vec![empty; n_left]) } else { (empty, Vec::new()) });
    }
    // SAFETY: constants and pure size computations.
    let parts = unsafe { ffi::gj_ts_agg_partials() } as usize;
    let sums = col_side == 2 && agg == Agg::Sum;
    // SAFETY: as above.
    let sum_bytes = if sums { (unsafe { ffi::gj_ts_prefix_sum_elem_bytes(col_type) }) as usize } else { 0 };
    let layout = if small { AggLayout::new(n_right, key_bytes as usize, sum_bytes, parts)? } else { AggLayout::new(0, 0, 0, parts)? };
    let mut ws = stream.alloc::<u8>(layout.bytes)?;
    let base = ws.view_mut().as_mut_ptr();
    // SAFETY: every offset lies within the workspace of layout.bytes bytes.
    let at = |offset: usize| unsafe { base.add(offset) } as *mut c_void;
    let done = at(layout.done) as *mut u32;

    // Steps 1 and 4 (the structure over the right column in sorted order).
    let mut general: Option<(Column, DeviceBuffer<u32>)> = None;
    let mut structure_buf: Option<DeviceBuffer<u8>> = None;
    let mut nv_buf: Option<DeviceBuffer<u64>> = None;
    let (sorted_ptr, structure, kind, levels): (*const c_void, *const c_void, i32, i32) = if small {
        let sum_type = if sums { col_type } else { -1 };
        let sum_col = if sums { col_ptr } else { std::ptr::null() };
        let dp = if per_row { std::ptr::null_mut() } else { done };
        // SAFETY: right keys and the summed column hold n_right rows; the pieces are sized by the
        // layout for n_right rows of key_bytes keys and sum_bytes prefix elements.
        launch(stream, "gj_ts_small_sort", || unsafe {
            ffi::gj_ts_small_sort(key_type, right_keys, n_right as i64, sum_type, sum_col, at(layout.run_img), at(layout.run_row) as *mut u32, at(layout.run_incl), at(layout.sorted), at(layout.prefix), dp, stream.raw())
        })?;
        let structure = if sums { at(layout.prefix) as *const c_void } else { std::ptr::null() };
        (at(layout.sorted) as *const c_void, structure, 0, 0)
    } else {
        if !per_row {
            stream.memset_bytes(&mut ws.slice_mut(layout.done..layout.done + 4), 0)?;
        }
        let (sorted, perm) = sort_right(stream, right.columns()[rc])?;
        let sp = raw(&sorted.view())?.1;
        let perm_ptr = perm.view().as_ptr();
        let mut kind = 0;
        let mut levels = 0;
        if col_side == 2 {
            let scan_temp = || -> Result<DeviceBuffer<u8>> {
                // SAFETY: a pure size computation.
                stream.alloc::<u8>(unsafe { ffi::gj_ts_scan_temp_bytes(n_right as i64) } as usize)
            };
            if agg == Agg::Sum {
                let mut s = stream.alloc::<u8>(sum_bytes * (n_right + 1))?;
                let mut temp = scan_temp()?;
                let (s_ptr, tp) = (s.view_mut().as_mut_ptr() as *mut c_void, temp.view_mut().as_mut_ptr() as *mut c_void);
                // SAFETY: col and perm n_right entries; s n_right + 1 elements; temp as sized.
                launch(stream, "gj_ts_prefix_sum", || unsafe { ffi::gj_ts_prefix_sum(col_type, col_ptr, perm_ptr, n_right as i64, s_ptr, tp, stream.raw()) })?;
                structure_buf = Some(s);
            } else {
                kind = minmax_structure(cond);
                let is_max = (agg == Agg::Max) as i32;
                if kind == ffi::GJ_TS_STRUCT_SPARSE as i32 {
                    levels = sparse_levels(n_right);
                    let mut s = stream.alloc::<u8>(8 * n_right * levels as usize)?;
                    let s_ptr = s.view_mut().as_mut_ptr() as *mut u64;
                    // SAFETY: levels * n_right 8-byte elements.
                    launch(stream, "gj_ts_sparse_table", || unsafe { ffi::gj_ts_sparse_table(col_type, col_ptr, perm_ptr, n_right as i64, levels, is_max, s_ptr, stream.raw()) })?;
                    structure_buf = Some(s);
                } else {
                    let suffix = (kind == ffi::GJ_TS_STRUCT_SUFFIX as i32) as i32;
                    let mut nv = stream.alloc::<u64>(1)?;
                    let nvp = nv.view_mut().as_mut_ptr();
                    // SAFETY: sp holds n_right sorted keys; nvp one u64.
                    launch(stream, "gj_ts_valid_count", || unsafe { ffi::gj_ts_valid_count(key_type, sp, n_right as i64, nvp, stream.raw()) })?;
                    let mut s = stream.alloc::<u8>(8 * (n_right + 1))?;
                    let mut temp = scan_temp()?;
                    let (s_ptr, tp) = (s.view_mut().as_mut_ptr() as *mut u64, temp.view_mut().as_mut_ptr() as *mut c_void);
                    let nvc = nv.view().as_ptr();
                    // SAFETY: n_right + 1 8-byte elements; temp as sized; nvc one u64.
                    launch(stream, "gj_ts_running_minmax", || unsafe {
                        ffi::gj_ts_running_minmax(col_type, col_ptr, perm_ptr, n_right as i64, nvc, is_max, suffix, s_ptr, tp, stream.raw())
                    })?;
                    structure_buf = Some(s);
                    nv_buf = Some(nv);
                }
            }
        }
        general = Some((sorted, perm));
        let structure = structure_buf.as_ref().map_or(std::ptr::null(), |s| s.view().as_ptr() as *const c_void);
        (sp, structure, kind, levels)
    };

    // Steps 2 and 4: ranges and the aggregate in one kernel.
    let agg_code = agg_code(agg);
    let left_col = if col_side == 1 { col_ptr } else { std::ptr::null() };
    let run = |rows_out: *mut ffi::gj_ts_cell, total: *mut ffi::gj_ts_cell| {
        // SAFETY: left keys n_left, sorted keys n_right of the key type; the structure covers
        // positions 0..=n_right; rows_out (if any) n_left cells; partials, done and total as laid out.
        launch(stream, "gj_ts_range_agg", || unsafe {
            ffi::gj_ts_range_agg(
                key_type, left_keys, n_left as i64, sorted_ptr, n_right as i64, code, width, agg_code, col_type, col_side, left_col, structure, kind, levels,
                rows_out, at(layout.partials) as *mut ffi::gj_ts_cell, done, total, stream.raw(),
            )
        })
    };
    let result = if per_row {
        let mut rows = alloc_out::<[u64; 4]>(stream, n_left, poison)?;
        run(rows.view_mut().as_mut_ptr() as *mut ffi::gj_ts_cell, std::ptr::null_mut())?;
        let cells = rows.to_vec()?;
        (AggValue::None, cells.into_iter().map(|c| cell_value(c, agg, float)).collect())
    } else {
        if poison {
            stream.memset_bytes(&mut ws.slice_mut(layout.total..layout.total + CELL_BYTES), 0xFF)?;
        }
        run(std::ptr::null_mut(), at(layout.total) as *mut ffi::gj_ts_cell)?;
        let cell = stream.copy_to_host(&ws.slice(layout.total..layout.total + CELL_BYTES))?;
        (cell_value(cell_words(&cell), agg, float), Vec::new())
    };
    // Device buffers the kernels read are freed stream-ordered after them.
    drop((general, structure_buf, nv_buf));
    Ok(result)
}

/// The inner sort-based theta join's output columns written directly on the device (no gather
/// maps): `left_cols` of `left`, then `right_cols` of `right`, rows in the order of the
/// [module docs](self). Numeric columns only.
pub fn sorted_theta_materialize(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    left_cols: &[usize],
    right_cols: &[usize],
) -> Result<Vec<Column>> {
    let cond = check_schemas(left, right, pred)?;
    let join = SortedThetaJoin::prepare(stream, left, right, &cond, JoinType::Inner)?;
    join.materialize(stream, 0..left.rows() as u64, left_cols, right_cols)
}

/// Test-only knobs of the sort-based theta join (the feature `testing`), and its entry points
/// that take them: each method is the function of the same name without them
/// ([`sorted_theta_join`], [`sorted_theta_join_size`], [`sorted_theta_aggregate`],
/// [`sorted_theta_aggregate_per_left_row`], [`sorted_theta_materialize`],
/// [`SortedThetaJoin::prepare`], [`aggregate_on_condition`]). The default changes nothing.
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SortedTesting {
    /// Fill every output buffer with 0xFF bytes before the kernels write it, so that unwritten
    /// elements show.
    pub poison_outputs: bool,
    /// How aggregates sort the right side and build their structure (`Small` where it does not
    /// apply is an `InvalidArgument` error).
    pub aggregate_path: AggregatePath,
}

#[cfg(feature = "testing")]
impl SortedTesting {
    /// The knobs the front door's [`crate::TestingOptions`] set
    /// (`theta_poison_outputs`, `theta_aggregate_path`).
    pub(crate) fn of(t: &crate::types::TestingOptions) -> SortedTesting {
        use crate::types::ThetaAggregatePath as P;
        let aggregate_path = match t.theta_aggregate_path {
            P::Auto => AggregatePath::Auto,
            P::Small => AggregatePath::Small,
            P::General => AggregatePath::General,
        };
        SortedTesting { poison_outputs: t.theta_poison_outputs, aggregate_path }
    }

    /// [`sorted_theta_join`].
    pub fn join(&self, stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, join_type: JoinType) -> Result<GatherMaps> {
        let cond = check_schemas(left, right, pred)?;
        join_on_condition_with(stream, left, right, &cond, join_type, self.poison_outputs)
    }

    /// [`sorted_theta_join_size`] (which writes no output).
    pub fn join_size(&self, stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, join_type: JoinType) -> Result<u64> {
        sorted_theta_join_size(stream, left, right, pred, join_type)
    }

    /// [`SortedThetaJoin::prepare`].
    pub fn prepare<'a>(&self, stream: &Stream, left: &'a TableView<'a>, right: &'a TableView<'a>, cond: &RangeCondition, join_type: JoinType) -> Result<SortedThetaJoin<'a>> {
        SortedThetaJoin::prepare_with(stream, left.into(), right.into(), cond, join_type, self.poison_outputs)
    }

    /// [`sorted_theta_aggregate`].
    pub fn aggregate(&self, stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, agg: Agg, column: Option<(Side, usize)>) -> Result<AggValue> {
        let cond = check_schemas(left, right, pred)?;
        Ok(self.aggregate_on_condition(stream, left, right, &cond, agg, column, false)?.0)
    }

    /// [`sorted_theta_aggregate_per_left_row`].
    pub fn aggregate_per_left_row(
        &self,
        stream: &Stream,
        left: &TableView<'_>,
        right: &TableView<'_>,
        pred: &CheckedPredicate,
        agg: Agg,
        column: Option<(Side, usize)>,
    ) -> Result<Vec<AggValue>> {
        let cond = check_schemas(left, right, pred)?;
        Ok(self.aggregate_on_condition(stream, left, right, &cond, agg, column, true)?.1)
    }

    /// [`aggregate_on_condition`].
    #[allow(clippy::too_many_arguments)]
    pub fn aggregate_on_condition(
        &self,
        stream: &Stream,
        left: &TableView<'_>,
        right: &TableView<'_>,
        cond: &RangeCondition,
        agg: Agg,
        column: Option<(Side, usize)>,
        per_row: bool,
    ) -> Result<(AggValue, Vec<AggValue>)> {
        aggregate_via(stream, left, right, cond, agg, column, per_row, self.aggregate_path, self.poison_outputs)
    }

    /// [`sorted_theta_materialize`].
    pub fn materialize(&self, stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, left_cols: &[usize], right_cols: &[usize]) -> Result<Vec<Column>> {
        let cond = check_schemas(left, right, pred)?;
        let join = self.prepare(stream, left, right, &cond, JoinType::Inner)?;
        join.materialize(stream, 0..left.rows() as u64, left_cols, right_cols)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_levels_cover_the_longest_range() {
        assert_eq!(sparse_levels(0), 0);
        assert_eq!(sparse_levels(1), 1);
        assert_eq!(sparse_levels(2), 2);
        assert_eq!(sparse_levels(3), 2);
        assert_eq!(sparse_levels(4), 3);
        assert_eq!(sparse_levels(1 << 20), 21);
        for n in 1..200usize {
            // The largest power of two <= n must be a level.
            let k = (usize::BITS - 1 - n.leading_zeros()) as i32;
            assert!(k < sparse_levels(n));
        }
    }

    #[test]
    fn cells_become_values() {
        let cell = |v: i128, f: f64, present: u32| [v as u64, ((v >> 64) as i64) as u64, f.to_bits(), present as u64];
        assert_eq!(cell_value(cell(-5, 0.0, 1), Agg::Sum, false), AggValue::Int(-5));
        assert_eq!(cell_value(cell(i128::MAX - 3, 0.0, 1), Agg::Sum, false), AggValue::Int(i128::MAX - 3));
        assert_eq!(cell_value(cell(0, 0.0, 0), Agg::Count, false), AggValue::Int(0));
        assert_eq!(cell_value(cell(0, 0.0, 0), Agg::Min, true), AggValue::None);
        assert_eq!(cell_value(cell(0, 2.5, 1), Agg::Max, true), AggValue::Float(2.5));
        // The padding word is ignored.
        assert_eq!(cell_value([7, 0, 0, 1 | (0xFFFF_FFFF << 32)], Agg::Sum, false), AggValue::Int(7));
        assert_eq!(cell_value([7, 0, 0, 0xFFFF_FFFF << 32], Agg::Sum, false), AggValue::None);
    }

    #[test]
    fn conditions_are_checked() {
        use DataType::*;
        let ineq = RangeCondition::Inequality { left_col: 0, op: CmpOp::Lt, right_col: 1 };
        assert_eq!(check_condition(&ineq, &[Int64], &[LargeUtf8, Int64]).unwrap(), (0, 1, Int64));
        assert!(check_condition(&ineq, &[Int64], &[Int64]).is_err());
        assert!(check_condition(&ineq, &[Int32], &[Int32, Int64]).is_err());
        assert!(check_condition(&ineq, &[LargeUtf8], &[LargeUtf8, LargeUtf8]).is_err());
        let band = RangeCondition::Band { left_col: 0, right_col: 0, width: Scalar::F32(1.0) };
        assert!(check_condition(&band, &[Float32], &[Float32]).is_ok());
        assert!(check_condition(&band, &[Float64], &[Float64]).is_err());
        let ne = RangeCondition::Inequality { left_col: 0, op: CmpOp::Ne, right_col: 0 };
        assert!(condition_code(&ne).is_err());
        let (c, w) = condition_code(&RangeCondition::Band { left_col: 0, right_col: 0, width: Scalar::U64(u64::MAX) }).unwrap();
        assert_eq!((c, w.u), (ffi::GJ_TS_BAND as i32, u64::MAX));
        let (c, w) = condition_code(&RangeCondition::Band { left_col: 0, right_col: 0, width: Scalar::I32(-3) }).unwrap();
        assert_eq!((c, w.i), (ffi::GJ_TS_BAND as i32, -3));
    }

    #[test]
    fn aggregate_workspace_pieces_are_aligned_and_disjoint() {
        for (n, key, sum) in [(0, 0, 0), (1, 4, 0), (25_000, 4, 16), (4097, 8, 32), (SMALL_RIGHT_MAX, 8, 32)] {
            let l = AggLayout::new(n, key, sum, 1024).unwrap();
            let prefix_len = if sum == 0 { 0 } else { (n + 1) * sum };
            let pieces = [
                (l.run_img, n * key),
                (l.run_row, n * 4),
                (l.run_incl, n * sum),
                (l.sorted, n * key),
                (l.prefix, prefix_len),
                (l.partials, 1024 * CELL_BYTES),
                (l.total, CELL_BYTES),
                (l.done, 4),
            ];
            for w in pieces.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "{n}: overlapping pieces {w:?}");
            }
            assert!(pieces.iter().all(|p| p.0 % 256 == 0));
            assert_eq!(l.bytes, l.done + 4);
        }
        assert!(AggLayout::new(usize::MAX / 2, 8, 32, 1024).is_err());
        assert_eq!(CELL_BYTES, 32);
    }

    #[test]
    fn small_path_takes_small_right_sides_without_right_min_max() {
        assert!(small_path_applies(25_000, Agg::Sum, 2));
        assert!(small_path_applies(SMALL_RIGHT_MAX, Agg::Count, 0));
        assert!(!small_path_applies(SMALL_RIGHT_MAX + 1, Agg::Count, 0));
        assert!(small_path_applies(10, Agg::Min, 1));
        assert!(!small_path_applies(10, Agg::Min, 2));
        assert!(!small_path_applies(10, Agg::Max, 2));
        let mut bytes = Vec::new();
        for w in [1u64, 2, 3, 4] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(cell_words(&bytes), [1, 2, 3, 4]);
    }

    #[test]
    fn structures_follow_the_range_shape() {
        let ineq = |op| RangeCondition::Inequality { left_col: 0, op, right_col: 0 };
        assert_eq!(minmax_structure(&ineq(CmpOp::Gt)), ffi::GJ_TS_STRUCT_PREFIX as i32);
        assert_eq!(minmax_structure(&ineq(CmpOp::Ge)), ffi::GJ_TS_STRUCT_PREFIX as i32);
        assert_eq!(minmax_structure(&ineq(CmpOp::Lt)), ffi::GJ_TS_STRUCT_SUFFIX as i32);
        assert_eq!(minmax_structure(&ineq(CmpOp::Le)), ffi::GJ_TS_STRUCT_SUFFIX as i32);
        let band = RangeCondition::Band { left_col: 0, right_col: 0, width: Scalar::I32(1) };
        assert_eq!(minmax_structure(&band), ffi::GJ_TS_STRUCT_SPARSE as i32);
    }
}
