//! Aggregates of equi-joins without pairs ([`Join::aggregate`](super::Join::aggregate) on keys
//! without a filter): every output row of an inner or outer equi-join is a matched pair or a row
//! kept without a partner, so a row of the aggregated side is in `c` output rows where it has
//! `c > 0` partners, and in one (outer joins that keep it) or none where it has none. Semi and
//! anti joins keep each qualifying row of their side once. COUNT/SUM/MIN/MAX of a column of one
//! side are then its values weighted by those multiplicities, folded on the device.
//!
//! Example: a LEFT join of left keys `[1, 1, 2, 3]` (values `[10, 20, NULL, 5]`) with right keys
//! `[1, 1, 1, 2]`: left match counts `[3, 3, 1, 0]`, multiplicities `[3, 3, 1, 1]` (row 3 kept
//! once, unmatched); SUM = 10 * 3 + 20 * 3 + 5 = 95 (the NULL skipped), COUNT = 7, MIN 5, MAX 20.
//!
//! The match counts come from the sort-merge join's steps ([`crate::chunked::EquiChunkSource`]):
//! one scalar key per row that can match (the packed key images, or dense ranks for wider
//! composite keys; NULL keys under `NullEqualsNothing` and NaN under `NanNeverEqual` match
//! nothing), a sort of each side, and the lower and upper bound of every sorted row of the
//! aggregated side in the other side's sorted keys. A right column's counts are the same search
//! the other way round (right rows in left keys).
//!
//! Memory: the scalar keys and row ids of both sides (sorted with CUB's double buffers), the
//! bounds and one count per row of the aggregated side, and the column widened to 4 bytes where
//! it is narrower: O(left + right rows), never the output's maps (see [`crate::memory`]).

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};
use gpujoin_primitives::{sort_keys, sorted_search, Bound, SearchKey, SearchOutputs, SortOrder, SortPairsOwned};

use crate::kernels::aggregate::{aggregate_column, scatter_counts, AggColumn, Matched, Multiplicity};
use crate::kernels::TypedValues;
use crate::keys::{scalar_keys, ScalarKeys};
use crate::maps::Side;
use crate::sort_merge::sort_with_rows;
use crate::table::{ColumnView, DataType, TableView};
use crate::theta::{Agg, AggValue};
use crate::types::{JoinOptions, JoinType};

/// How many output rows of `join_type` a row of `side` is in, by its match count; an error where
/// the join returns no rows of that side (semi and anti joins of the other side).
fn multiplicity(join_type: JoinType, side: Side) -> Result<Multiplicity> {
    use JoinType::*;
    let left = side == Side::Left;
    let m = |matched, unmatched| Ok(Multiplicity { matched, unmatched });
    match join_type {
        Inner => m(Matched::Count, false),
        Left => m(Matched::Count, left),
        Right => m(Matched::Count, !left),
        Full => m(Matched::Count, true),
        LeftSemi if left => m(Matched::Once, false),
        LeftAnti if left => m(Matched::Zero, true),
        RightSemi if !left => m(Matched::Once, false),
        RightAnti if !left => m(Matched::Zero, true),
        _ => Err(Error::invalid(format!("a {join_type:?} join has no {side:?} rows to aggregate"))),
    }
}

/// `agg` of `column` (of the `side` table) over the output rows of the equi-join of the
/// prepared keys `left` and `right`, without pairs (see the module docs). Integer SUM is exact
/// (`i128`; an overflow is an [`Error::TooLarge`]), float SUM is added in the device's order
/// (not the output's: it may round differently from a pair-by-pair sum).
#[allow(clippy::too_many_arguments)]
pub(super) fn equi_aggregate(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions, agg: Agg, side: Side, column: &ColumnView<'_>) -> Result<AggValue> {
    crate::keys::check_comparable(left, right)?;
    let mult = multiplicity(join_type, side)?;
    let (a, b) = if side == Side::Left { (left, right) } else { (right, left) };
    if a.rows() != column.len() {
        return Err(Error::invalid(format!("a column of {} rows aggregated over a side of {} rows", column.len(), a.rows())));
    }
    let counts = match_counts(stream, a, b, JoinOptions { output_budget: None, ..opts })?;
    with_agg_column(stream, column, agg, |col| aggregate_column(stream, col, Some(&counts.view()), mult, agg))
}

/// `agg` of `column`'s rows, each once (NULLs skipped), on the device with one read back: the
/// fold of a column gathered by a join's map (NULL where the map has no row).
///
/// Example: `[5, NULL, 7]`: SUM = 12, COUNT = 2, MIN = 5.
pub(super) fn aggregate_rows(stream: &Stream, agg: Agg, column: &ColumnView<'_>) -> Result<AggValue> {
    with_agg_column(stream, column, agg, |col| aggregate_column(stream, col, None, Multiplicity::ONCE, agg))
}

/// Calls `f` with `column` as the aggregate kernel reads it: 32- and 64-bit values as they are,
/// narrow integers and booleans widened to 32 bits, no values for COUNT (which reads only the
/// validity), and the validity as words.
fn with_agg_column<R>(stream: &Stream, column: &ColumnView<'_>, agg: Agg, f: impl FnOnce(&AggColumn<'_>) -> Result<R>) -> Result<R> {
    let widened;
    let values = if agg == Agg::Count {
        None
    } else {
        let err = || Error::Unsupported { what: format!("{agg:?} of a {} column", column.data_type()), reason: "aggregates take integer, date, timestamp and float columns".into() };
        use DataType::*;
        Some(match column.data_type() {
            Int8 | Int16 => {
                widened = crate::kernels::table::widen(stream, column)?;
                TypedValues::I32(widened.view().cast())
            }
            UInt8 | UInt16 | Boolean => {
                widened = crate::kernels::table::widen(stream, column)?;
                TypedValues::U32(widened.view())
            }
            // Read in place (a misaligned buffer, strings and decimals: refused).
            _ => TypedValues::of(column).ok_or_else(err)?,
        })
    };
    let validity = crate::kernels::table::validity_words(stream, column)?;
    let col = AggColumn { values, validity: validity.as_ref().map(|v| v.view()), rows: column.len() };
    f(&col)
}

/// Per row of `a` (in row order), the number of rows of `b` whose key equals it under `opts`
/// (0 for a row whose key can match nothing). Example: `a` keys `[1, NULL, 2]`, `b` keys
/// `[2, 1, 1]` (NULL equals nothing) -> `[2, 0, 1]`.
pub(crate) fn match_counts(stream: &Stream, a: &TableView<'_>, b: &TableView<'_>, opts: JoinOptions) -> Result<DeviceBuffer<u32>> {
    let mut counts = stream.alloc_zeroed::<u32>(a.rows())?;
    if a.rows() == 0 || b.rows() == 0 {
        return Ok(counts);
    }
    // Step 0 (the right side's row ids are not needed: each left row's count is all).
    match scalar_keys(stream, a, b, opts, (false, false), false)?.keys {
        ScalarKeys::U32(a, b, bits) if !a.keys.is_empty() && !b.keys.is_empty() => count_sorted(stream, (a.keys, a.rows), b.keys, bits, &mut counts)?,
        ScalarKeys::U64(a, b, bits) if !a.keys.is_empty() && !b.keys.is_empty() => count_sorted(stream, (a.keys, a.rows), b.keys, bits, &mut counts)?,
        _ => {}
    }
    Ok(counts)
}

/// Sorts `a`'s scalar keys with their row ids and `b`'s keys (the low `bits` bits), and writes
/// each `a` row's number of equal `b` keys into `counts` at its row id.
fn count_sorted<K: SortPairsOwned + SearchKey>(stream: &Stream, (a_keys, a_rows): (DeviceBuffer<K>, DeviceBuffer<u32>), b_keys: DeviceBuffer<K>, bits: u32, counts: &mut DeviceBuffer<u32>) -> Result<()> {
    let (ka, rows) = sort_with_rows(stream, a_keys, Some(a_rows), bits)?;
    let mut kb = stream.alloc::<K>(b_keys.len())?;
    sort_keys(stream, &b_keys.view(), &mut kb.view_mut(), SortOrder::Ascending, Some(0..bits.clamp(1, K::BITS)))?;
    drop(b_keys);
    let lower = sorted_search(stream, &ka.view(), &kb.view(), Bound::Lower, SearchOutputs::INDEX)?.a_index.ok_or_else(|| Error::invalid("internal: no lower bounds"))?;
    let upper = sorted_search(stream, &ka.view(), &kb.view(), Bound::Upper, SearchOutputs::INDEX)?.a_index.ok_or_else(|| Error::invalid("internal: no upper bounds"))?;
    drop((ka, kb));
    scatter_counts(stream, &lower.view(), &upper.view(), &rows.view(), &mut counts.view_mut())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplicities_follow_the_join_type() {
        use JoinType::*;
        let m = |jt, side| multiplicity(jt, side).map(|m| (m.matched, m.unmatched)).ok();
        assert_eq!(m(Inner, Side::Left), Some((Matched::Count, false)));
        assert_eq!(m(Inner, Side::Right), Some((Matched::Count, false)));
        assert_eq!(m(Left, Side::Left), Some((Matched::Count, true)));
        assert_eq!(m(Left, Side::Right), Some((Matched::Count, false)));
        assert_eq!(m(Right, Side::Left), Some((Matched::Count, false)));
        assert_eq!(m(Right, Side::Right), Some((Matched::Count, true)));
        assert_eq!(m(Full, Side::Left), Some((Matched::Count, true)));
        assert_eq!(m(Full, Side::Right), Some((Matched::Count, true)));
        assert_eq!(m(LeftSemi, Side::Left), Some((Matched::Once, false)));
        assert_eq!(m(LeftAnti, Side::Left), Some((Matched::Zero, true)));
        assert_eq!(m(RightSemi, Side::Right), Some((Matched::Once, false)));
        assert_eq!(m(RightAnti, Side::Right), Some((Matched::Zero, true)));
        for (jt, side) in [(LeftSemi, Side::Right), (LeftAnti, Side::Right), (RightSemi, Side::Left), (RightAnti, Side::Left)] {
            assert!(matches!(multiplicity(jt, side), Err(Error::InvalidArgument(_))), "{jt:?} {side:?}");
        }
    }
}
