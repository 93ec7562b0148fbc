//! Theta joins and nested-loop joins on the GPU (issue 5, seeds 003 and 004): arbitrary
//! predicates ([`crate::predicate`]) evaluated on the device, a sort-based path for single
//! inequalities and bands, aggregates without materializing pairs, and output in chunks for
//! results larger than device memory.
//!
//! * [`theta_join`], [`theta_join_size`], [`theta_aggregate`],
//!   [`theta_aggregate_per_left_row`], [`theta_materialize`]: pick the path ([`choose_path`])
//!   and run it;
//! * [`sorted`]: a single inequality or a band by sorting one side, sorted search, prefix sums
//!   and load-balancing search;
//! * [`nested_loop`]: the predicate compiled to a device program; tiles of the inner relation in
//!   shared memory, count / prefix sum / write, aggregates, mixed (equality + residual) joins;
//! * [`theta_join_chunks`], [`theta_materialize_chunks`] and [`ThetaChunkSource`]: the same joins
//!   cut into chunks that fit a memory budget ([`crate::chunked`]), on the device or streamed to
//!   host memory ([`crate::chunked::stream_to_host`]).
//!
//! ```no_run
//! use gpujoin_join::device_relation::upload;
//! use gpujoin_join::predicate::{col_l, col_r, schema_of};
//! use gpujoin_join::table::{HostColumn, HostTable};
//! use gpujoin_join::theta::{choose_path, theta_aggregate, theta_join, Agg, AggValue, ThetaPath};
//! use gpujoin_join::{JoinType, Side};
//! # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let r = HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![5, 1]))])?;
//! let t = HostTable::new(vec![("c0", HostColumn::from_values::<i32>(vec![3, 4, 9])), ("c1", HostColumn::from_values::<i64>(vec![10, 20, 30]))])?;
//! let p = col_l(0).greater(col_r(0)).check(&schema_of(&r)?, &schema_of(&t)?)?;
//! assert!(matches!(choose_path(&p), ThetaPath::Sorted(_)));
//! let (dr, dt) = (upload(s, &r)?, upload(s, &t)?);
//! let (dr, dt) = (dr.view(), dt.view());
//! assert_eq!(theta_join(s, &dr, &dt, &p, JoinType::Inner)?.rows(), 2); // (0,0) (0,1)
//! assert_eq!(theta_aggregate(s, &dr, &dt, &p, Agg::Sum, Some((Side::Right, 1)))?, AggValue::Int(30));
//! # Ok(()) }
//! ```

mod aggregate;
mod chunks;
mod mixed_chunks;
pub mod nested_loop;
pub mod sorted;

use gpujoin_device::{Error, Result, Stream};

use crate::table::TableView;
use crate::table::Column;
use crate::maps::{GatherMaps, Side};
use crate::predicate::{CheckedPredicate, RangeCondition};
use crate::types::JoinType;

pub use aggregate::{Agg, AggValue};
pub use chunks::{theta_join_chunks, theta_materialize_chunks, ThetaChunkSource, ThetaColumnsSource};

/// The algorithm a theta join runs ([`choose_path`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ThetaPath {
    /// A single inequality or band between two numeric columns: sort the right side, find each
    /// left row's range by sorted search ([`sorted`]). Work is `O((|L| + |R|) log |R|)` plus
    /// the output.
    Sorted(RangeCondition),
    /// Fixed-width equality conjuncts: a hash join on them, the rest of the predicate filtering
    /// the candidate pairs on the GPU ([`nested_loop::Strategy::Auto`]).
    Mixed,
    /// Everything else: the nested loop over all `|L| x |R|` pairs ([`nested_loop`]).
    NestedLoop,
}

impl ThetaPath {
    /// Why this path: one line for logs and benchmark reports.
    pub fn reason(&self) -> &'static str {
        match self {
            ThetaPath::Sorted(_) => "single inequality or band: sort one side, sorted search, prefix sums",
            ThetaPath::Mixed => "equality conjuncts: hash join on them, the residual predicate as a filter",
            ThetaPath::NestedLoop => "general predicate: nested loop over tiles of the right side in shared memory",
        }
    }
}

/// The path [`theta_join`] and friends take for `pred`: the sort-based one whenever the
/// predicate is a single inequality or band ([`CheckedPredicate::band_or_inequality`]), the mixed
/// one when it has fixed-width equality conjuncts, else the nested loop.
///
/// ```
/// use gpujoin_join::predicate::{col_l, col_r, DataType};
/// use gpujoin_join::theta::{choose_path, ThetaPath};
/// let s = [DataType::Int32, DataType::Int32];
/// let gt = col_l(0).greater(col_r(0)).check(&s, &s)?;
/// assert!(matches!(choose_path(&gt), ThetaPath::Sorted(_)));
/// let eq_and = col_l(1).equals(col_r(1)).and(col_l(0).less(col_r(0))).check(&s, &s)?;
/// assert_eq!(choose_path(&eq_and), ThetaPath::Mixed);
/// let or = col_l(0).greater(col_r(0)).or(col_l(1).equals(col_r(1))).check(&s, &s)?;
/// assert_eq!(choose_path(&or), ThetaPath::NestedLoop);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn choose_path(pred: &CheckedPredicate) -> ThetaPath {
    if let Some(cond) = pred.band_or_inequality() {
        return ThetaPath::Sorted(cond);
    }
    let fixed = |t: crate::predicate::DataType| t.is_numeric();
    let mixed = pred.equality_parts().iter().any(|&(l, r)| fixed(pred.left_schema()[l]) && fixed(pred.right_schema()[r]));
    if mixed {
        ThetaPath::Mixed
    } else {
        ThetaPath::NestedLoop
    }
}

/// The theta join of `left` and `right` on `pred`, any join type, by the path of
/// [`choose_path`]. Row order: the chosen path's ([`sorted`] or [`nested_loop`] module docs);
/// compare results as multisets across paths.
pub fn theta_join(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, join_type: JoinType) -> Result<GatherMaps> {
    match choose_path(pred) {
        ThetaPath::Sorted(_) => sorted::sorted_theta_join(stream, left, right, pred, join_type),
        ThetaPath::Mixed | ThetaPath::NestedLoop => nested_loop::nested_loop_join(stream, left, right, pred, join_type),
    }
}

/// The exact output rows of [`theta_join`], without writing pairs where the path can count
/// (sorted path and nested loop; the mixed path runs the join to count).
pub fn theta_join_size(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, pred: &CheckedPredicate, join_type: JoinType) -> Result<u64> {
    match choose_path(pred) {
        ThetaPath::Sorted(_) => sorted::sorted_theta_join_size(stream, left, right, pred, join_type),
        ThetaPath::Mixed | ThetaPath::NestedLoop => nested_loop::nested_loop_join_size(stream, left, right, pred, join_type),
    }
}

/// `agg` of `column` over the matching pairs, without materializing them (COUNT needs no
/// column). Semantics as [`Agg`] (those of the CPU reference
/// the CPU reference folded over `gpujoin_testkit::table_reference::join`'s pairs); float sums may round differently
/// (another summation order).
pub fn theta_aggregate(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<AggValue> {
    match choose_path(pred) {
        ThetaPath::Sorted(_) => sorted::sorted_theta_aggregate(stream, left, right, pred, agg, column),
        ThetaPath::Mixed | ThetaPath::NestedLoop => nested_loop::nested_loop_aggregate(stream, left, right, pred, agg, column),
    }
}

/// [`theta_aggregate`] per left row: one value per left row (COUNT 0 and `AggValue::None`
/// where nothing matches).
pub fn theta_aggregate_per_left_row(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<Vec<AggValue>> {
    match choose_path(pred) {
        ThetaPath::Sorted(_) => sorted::sorted_theta_aggregate_per_left_row(stream, left, right, pred, agg, column),
        ThetaPath::Mixed | ThetaPath::NestedLoop => nested_loop::nested_loop_aggregate_per_left_row(stream, left, right, pred, agg, column),
    }
}

/// The inner theta join's output relation: columns `left_cols` of `left`, then `right_cols` of
/// `right` (fixed-width columns), in the chosen path's row order. The sorted path writes the
/// columns directly; the others gather them through the join's maps.
pub fn theta_materialize(
    stream: &Stream,
    left: &TableView<'_>,
    right: &TableView<'_>,
    pred: &CheckedPredicate,
    left_cols: &[usize],
    right_cols: &[usize],
) -> Result<Vec<Column>> {
    check_columns(left, left_cols, "left")?;
    check_columns(right, right_cols, "right")?;
    match choose_path(pred) {
        ThetaPath::Sorted(_) => sorted::sorted_theta_materialize(stream, left, right, pred, left_cols, right_cols),
        ThetaPath::Mixed | ThetaPath::NestedLoop => {
            let maps = nested_loop::nested_loop_join(stream, left, right, pred, JoinType::Inner)?;
            gather_columns(stream, &maps, left, right, left_cols, right_cols)
        }
    }
}

/// Checks that `cols` name fixed-width columns of `rel`.
fn check_columns(rel: &TableView<'_>, cols: &[usize], side: &str) -> Result<()> {
    for &c in cols {
        if c >= rel.columns().len() {
            return Err(Error::invalid(format!("{side} column {c} does not exist ({} columns)", rel.columns().len())));
        }
        if rel.columns()[c].data_type().byte_width().is_none() {
            return Err(Error::invalid(format!("{side} column {c} is a string column: materialize its row ids (the gather maps) instead")));
        }
    }
    Ok(())
}

/// Left columns then right columns gathered through `maps`.
fn gather_columns(stream: &Stream, maps: &GatherMaps, left: &TableView<'_>, right: &TableView<'_>, left_cols: &[usize], right_cols: &[usize]) -> Result<Vec<Column>> {
    let mut out = Vec::with_capacity(left_cols.len() + right_cols.len());
    for (rel, cols, map) in [(left, left_cols, maps.left()), (right, right_cols, maps.right())] {
        if cols.is_empty() {
            continue;
        }
        let map = map.ok_or_else(|| Error::invalid("internal: an inner join without a map"))?.cast::<u32>();
        for &c in cols {
            out.push(crate::kernels::table::gather(stream, &rel.columns()[c], &map, false)?);
        }
    }
    Ok(out)
}
