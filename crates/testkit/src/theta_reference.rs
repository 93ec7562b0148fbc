//! CPU reference theta joins: every left row against every right row under a
//! [`CheckedPredicate`] (see [`predicate`](gpujoin_join::predicate) for the comparison semantics). The
//! GPU nested-loop, theta and sort-based joins are checked against these.
//!
//! * [`theta_join`] returns `(left row, right row)` pairs for any [`JoinType`], with the same
//!   outer/semi/anti conventions and canonical order as the equi-join [`reference`](crate::reference):
//!   sorted by `(left, right)`, [`RowId::NONE`] last.
//! * [`theta_join_size`] counts them without materializing.
//! * [`theta_aggregate`] and [`theta_aggregate_per_left_row`] compute COUNT, SUM, MIN or MAX of a
//!   numeric column of either side over the matching pairs (an inner join) without materializing
//!   them.
//!
//! ```
//! use gpujoin_join::predicate::{col_l, col_r, ColumnData, DataType, Relation};
//! use gpujoin_join::{JoinType, RowId};
//! use gpujoin_testkit::theta_reference::theta_join;
//! let l = Relation::new(vec![ColumnData::I32(vec![1, 5])])?;
//! let r = Relation::new(vec![ColumnData::I32(vec![3])])?;
//! let p = col_l(0).greater(col_r(0)).check(&l.schema(), &r.schema())?;
//! let id = |i| RowId::new(i).unwrap();
//! assert_eq!(theta_join(&l, &r, &p, JoinType::Inner)?, vec![(id(1), id(0))]);
//! assert_eq!(theta_join(&l, &r, &p, JoinType::LeftAnti)?, vec![(id(0), RowId::NONE)]);
//! # Ok::<(), gpujoin_device::Error>(())
//! ```

use gpujoin_device::{Error, Result};
use gpujoin_join::predicate::{CheckedPredicate, ColumnData, Relation, Side};
/// The aggregates and their results: the library's own types ([`gpujoin_join::theta::Agg`]),
/// re-exported so that a test can name them next to the reference functions.
pub use gpujoin_join::theta::{Agg, AggValue};
use gpujoin_join::types::{JoinType, RowId};

use crate::reference::sort_pairs;

/// Joins `left` and `right` on `pred` and returns the pairs in canonical order.
///
/// `Inner`/`Left`/`Right`/`Full` return every matching pair plus (for outer joins) unmatched
/// rows paired with [`RowId::NONE`]; `LeftSemi`/`LeftAnti` return `(l, NONE)` for each left row
/// with / without a match, `RightSemi`/`RightAnti` `(NONE, r)` likewise.
///
/// Errors: [`Error::InvalidArgument`] when a relation is invalid or its schema differs from the
/// one `pred` was checked against ([`CheckedPredicate::check_relations`]); [`Error::TooLarge`]
/// when the output cannot be held in host memory.
///
/// ```
/// use gpujoin_join::predicate::{col_l, col_r, ColumnData, Relation};
/// use gpujoin_join::{JoinType, RowId};
/// use gpujoin_testkit::theta_reference::theta_join;
/// let l = Relation::new(vec![ColumnData::utf8(["b", "é"])])?;
/// let r = Relation::new(vec![ColumnData::utf8(["a", "z"])])?;
/// let p = col_l(0).less(col_r(0)).check(&l.schema(), &r.schema())?;
/// let id = |i| RowId::new(i).unwrap();
/// assert_eq!(
///     theta_join(&l, &r, &p, JoinType::Full)?,
///     vec![(id(0), id(1)), (id(1), RowId::NONE), (RowId::NONE, id(0))] // "é" > "z" byte-wise
/// );
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn theta_join(
    left: &Relation,
    right: &Relation,
    pred: &CheckedPredicate,
    join_type: JoinType,
) -> Result<Vec<(RowId, RowId)>> {
    let rows = theta_join_size(left, right, pred, join_type)?;
    let too_large = || Error::too_large("reference theta join output pairs", rows, (isize::MAX as u64) / 8);
    let capacity = usize::try_from(rows).map_err(|_| too_large())?;
    let mut pairs = Vec::new();
    pairs.try_reserve_exact(capacity).map_err(|_| too_large())?;
    walk(left, right, pred, join_type, |l, r| pairs.push((l, r)));
    sort_pairs(&mut pairs);
    Ok(pairs)
}

/// The number of pairs [`theta_join`] returns, counted without materializing them.
///
/// Errors as [`theta_join`] (without the output-size one).
///
/// ```
/// use gpujoin_join::predicate::{ColumnData, Predicate, Relation};
/// use gpujoin_join::JoinType;
/// use gpujoin_testkit::theta_reference::theta_join_size;
/// let l = Relation::new(vec![ColumnData::U32(vec![0; 300])])?;
/// let r = Relation::new(vec![ColumnData::U32(vec![0; 200])])?;
/// let p = Predicate::True.check(&l.schema(), &r.schema())?;
/// assert_eq!(theta_join_size(&l, &r, &p, JoinType::Inner)?, 60_000);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn theta_join_size(left: &Relation, right: &Relation, pred: &CheckedPredicate, join_type: JoinType) -> Result<u64> {
    pred.check_relations(left, right)?;
    let mut n = 0u64;
    walk(left, right, pred, join_type, |_, _| n += 1);
    Ok(n)
}

fn row_id(i: usize) -> RowId {
    // Relations are validated to hold at most RowId::MAX_ROWS rows, so `i < u32::MAX`.
    RowId::from_option(Some(i as u32))
}

/// Emits the output rows of `join_type` in an unspecified order.
fn walk(left: &Relation, right: &Relation, pred: &CheckedPredicate, join_type: JoinType, mut emit: impl FnMut(RowId, RowId)) {
    let pairs = matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full);
    let mut right_matched = vec![false; right.rows()];
    for l in 0..left.rows() {
        let mut l_matched = false;
        for (r, r_matched) in right_matched.iter_mut().enumerate() {
            if pred.evaluate(left, l, right, r) {
                l_matched = true;
                *r_matched = true;
                if pairs {
                    emit(row_id(l), row_id(r));
                }
            }
        }
        let keep = match join_type {
            JoinType::Left | JoinType::Full | JoinType::LeftAnti => !l_matched,
            JoinType::LeftSemi => l_matched,
            _ => false,
        };
        if keep {
            emit(row_id(l), RowId::NONE);
        }
    }
    for (r, &matched) in right_matched.iter().enumerate() {
        let keep = match join_type {
            JoinType::Right | JoinType::Full | JoinType::RightAnti => !matched,
            JoinType::RightSemi => matched,
            _ => false,
        };
        if keep {
            emit(RowId::NONE, row_id(r));
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

fn num(c: &ColumnData, row: usize) -> Option<Num> {
    Some(match c {
        ColumnData::I32(v) => Num::Int(*v.get(row)? as i128),
        ColumnData::I64(v) => Num::Int(*v.get(row)? as i128),
        ColumnData::U32(v) => Num::Int(*v.get(row)? as i128),
        ColumnData::U64(v) => Num::Int(*v.get(row)? as i128),
        ColumnData::F32(v) => Num::Float(*v.get(row)? as f64),
        ColumnData::F64(v) => Num::Float(*v.get(row)?),
        ColumnData::Utf8 { .. } => return None,
    })
}

struct Acc {
    agg: Agg,
    count: u64,
    value: AggValue,
}

impl Acc {
    fn new(agg: Agg) -> Acc {
        Acc { agg, count: 0, value: AggValue::None }
    }

    fn push(&mut self, v: Option<Num>) -> Result<()> {
        self.count += 1;
        let Some(v) = v else { return Ok(()) };
        self.value = match (self.agg, self.value, v) {
            (Agg::Count, ..) => return Ok(()),
            (_, AggValue::None, Num::Int(x)) => AggValue::Int(x),
            (_, AggValue::None, Num::Float(x)) => AggValue::Float(x),
            (Agg::Sum, AggValue::Int(a), Num::Int(x)) => AggValue::Int(
                a.checked_add(x).ok_or_else(|| Error::invalid("theta join integer SUM overflows i128"))?,
            ),
            (Agg::Sum, AggValue::Float(a), Num::Float(x)) => AggValue::Float(a + x),
            (Agg::Min, AggValue::Int(a), Num::Int(x)) => AggValue::Int(a.min(x)),
            (Agg::Max, AggValue::Int(a), Num::Int(x)) => AggValue::Int(a.max(x)),
            (Agg::Min | Agg::Max, AggValue::Float(a), Num::Float(x)) => {
                let better = if self.agg == Agg::Min { x < a } else { x > a };
                AggValue::Float(if (a.is_nan() && !x.is_nan()) || better { x } else { a })
            }
            // Unreachable: one column has one type.
            (_, value, _) => value,
        };
        Ok(())
    }

    fn finish(&self) -> AggValue {
        match self.agg {
            Agg::Count => AggValue::Int(self.count as i128),
            _ => self.value,
        }
    }
}

fn agg_column<'a>(
    left: &'a Relation,
    right: &'a Relation,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<Option<(Side, &'a ColumnData)>> {
    pred.check_relations(left, right)?;
    let Some((side, index)) = column else {
        return match agg {
            Agg::Count => Ok(None),
            _ => Err(Error::invalid(format!("theta join {agg:?} needs a column"))),
        };
    };
    let (name, rel) = match side {
        Side::Left => ("left", left),
        Side::Right => ("right", right),
    };
    let col = rel.columns.get(index).ok_or_else(|| {
        Error::invalid(format!(
            "theta join {agg:?}: {name} column {index} does not exist (the {name} relation has {} columns)",
            rel.columns.len()
        ))
    })?;
    if agg != Agg::Count && !col.data_type().is_numeric() {
        return Err(Error::invalid(format!(
            "theta join {agg:?}: {name} column {index} is {}, not a number",
            col.data_type()
        )));
    }
    Ok(Some((side, col)))
}

fn value_of(col: Option<(Side, &ColumnData)>, l: usize, r: usize) -> Option<Num> {
    let (side, c) = col?;
    num(c, if side == Side::Left { l } else { r })
}

/// `agg` of `column` (`(side, index)`; may be `None` for [`Agg::Count`]) over every pair
/// `(l, r)` with `pred(l, r)` true (an inner theta join), without materializing the pairs.
///
/// Errors: as [`theta_join_size`]; [`Error::InvalidArgument`] when SUM/MIN/MAX has no column,
/// the column does not exist or is a string column, or an integer SUM overflows `i128`.
///
/// ```
/// use gpujoin_join::predicate::{col_l, col_r, ColumnData, Relation, Side};
/// use gpujoin_testkit::theta_reference::{theta_aggregate, Agg, AggValue};
/// // SUM(S.x) WHERE R.a > S.a
/// let r = Relation::new(vec![ColumnData::I32(vec![5, 1])])?;
/// let s = Relation::new(vec![ColumnData::I32(vec![3, 4, 9]), ColumnData::I64(vec![10, 20, 30])])?;
/// let p = col_l(0).greater(col_r(0)).check(&r.schema(), &s.schema())?;
/// assert_eq!(theta_aggregate(&r, &s, &p, Agg::Sum, Some((Side::Right, 1)))?, AggValue::Int(30));
/// assert_eq!(theta_aggregate(&r, &s, &p, Agg::Count, None)?, AggValue::Int(2));
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn theta_aggregate(
    left: &Relation,
    right: &Relation,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<AggValue> {
    let col = agg_column(left, right, pred, agg, column)?;
    let mut acc = Acc::new(agg);
    for l in 0..left.rows() {
        for r in 0..right.rows() {
            if pred.evaluate(left, l, right, r) {
                acc.push(value_of(col, l, r))?;
            }
        }
    }
    Ok(acc.finish())
}

/// For each left row `l`, `agg` of `column` over the right rows `r` with `pred(l, r)` true:
/// one value per left row (COUNT 0 and `AggValue::None` for SUM/MIN/MAX where nothing matches).
///
/// Errors as [`theta_aggregate`].
///
/// ```
/// use gpujoin_join::predicate::{col_l, col_r, ColumnData, Relation, Side};
/// use gpujoin_testkit::theta_reference::{theta_aggregate_per_left_row, Agg, AggValue};
/// let l = Relation::new(vec![ColumnData::F64(vec![5.0, 0.0])])?;
/// let r = Relation::new(vec![ColumnData::F64(vec![1.5, 2.5, f64::NAN])])?;
/// let p = col_l(0).greater(col_r(0)).check(&l.schema(), &r.schema())?;
/// assert_eq!(
///     theta_aggregate_per_left_row(&l, &r, &p, Agg::Max, Some((Side::Right, 0)))?,
///     vec![AggValue::Float(2.5), AggValue::None]
/// );
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn theta_aggregate_per_left_row(
    left: &Relation,
    right: &Relation,
    pred: &CheckedPredicate,
    agg: Agg,
    column: Option<(Side, usize)>,
) -> Result<Vec<AggValue>> {
    let col = agg_column(left, right, pred, agg, column)?;
    let mut out = Vec::with_capacity(left.rows());
    for l in 0..left.rows() {
        let mut acc = Acc::new(agg);
        for r in 0..right.rows() {
            if pred.evaluate(left, l, right, r) {
                acc.push(value_of(col, l, r))?;
            }
        }
        out.push(acc.finish());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpujoin_join::predicate::{col_l, col_r, lit, CmpOp, DataType, Expr, Predicate, Scalar};
    use proptest::prelude::*;
    use proptest::test_runner::{Config as ProptestConfig, RngSeed};

    fn id(i: usize) -> RowId {
        RowId::new(i as u32).unwrap()
    }

    // ---- an independent brute force: native Rust comparisons straight from the definition ----

    #[derive(Debug, Clone, PartialEq, PartialOrd)]
    enum TV {
        I32(i32),
        I64(i64),
        U32(u32),
        U64(u64),
        F32(f32),
        F64(f64),
        S(String),
    }

    fn tv_col(c: &ColumnData, i: usize) -> TV {
        match c {
            ColumnData::I32(v) => TV::I32(v[i]),
            ColumnData::I64(v) => TV::I64(v[i]),
            ColumnData::U32(v) => TV::U32(v[i]),
            ColumnData::U64(v) => TV::U64(v[i]),
            ColumnData::F32(v) => TV::F32(v[i]),
            ColumnData::F64(v) => TV::F64(v[i]),
            ColumnData::Utf8 { offsets, bytes } => {
                TV::S(String::from_utf8(bytes[offsets[i] as usize..offsets[i + 1] as usize].to_vec()).unwrap())
            }
        }
    }

    fn tv_expr(e: &Expr, l: &Relation, i: usize, r: &Relation, j: usize) -> TV {
        match e {
            Expr::Column { side: Side::Left, index } => tv_col(&l.columns[*index], i),
            Expr::Column { side: Side::Right, index } => tv_col(&r.columns[*index], j),
            Expr::Literal(Scalar::I32(v)) => TV::I32(*v),
            Expr::Literal(Scalar::I64(v)) => TV::I64(*v),
            Expr::Literal(Scalar::U32(v)) => TV::U32(*v),
            Expr::Literal(Scalar::U64(v)) => TV::U64(*v),
            Expr::Literal(Scalar::F32(v)) => TV::F32(*v),
            Expr::Literal(Scalar::F64(v)) => TV::F64(*v),
            Expr::Literal(Scalar::Utf8(v)) => TV::S(v.clone()),
            _ => unimplemented!("the brute force has no arithmetic"),
        }
    }

    fn brute_eval(p: &Predicate, l: &Relation, i: usize, r: &Relation, j: usize) -> bool {
        match p {
            Predicate::True => true,
            Predicate::Not(q) => !brute_eval(q, l, i, r, j),
            Predicate::And(v) => v.iter().all(|q| brute_eval(q, l, i, r, j)),
            Predicate::Or(v) => v.iter().any(|q| brute_eval(q, l, i, r, j)),
            Predicate::Cmp { op, left, right } => {
                let (a, b) = (tv_expr(left, l, i, r, j), tv_expr(right, l, i, r, j));
                // Same variant (type-checked), so derived PartialEq/PartialOrd compare the native
                // values: IEEE for floats, lexicographic bytes for String.
                match op {
                    CmpOp::Eq => a == b,
                    CmpOp::Ne => a != b,
                    CmpOp::Lt => a < b,
                    CmpOp::Le => a <= b,
                    CmpOp::Gt => a > b,
                    CmpOp::Ge => a >= b,
                }
            }
        }
    }

    fn brute_join(l: &Relation, r: &Relation, p: &Predicate, jt: JoinType) -> Vec<(RowId, RowId)> {
        let matches = |i: usize, j: usize| brute_eval(p, l, i, r, j);
        let mut out = Vec::new();
        for i in 0..l.rows() {
            let any = (0..r.rows()).any(|j| matches(i, j));
            match jt {
                JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                    out.extend((0..r.rows()).filter(|&j| matches(i, j)).map(|j| (id(i), id(j))));
                    if !any && jt.keeps_unmatched_left() {
                        out.push((id(i), RowId::NONE));
                    }
                }
                JoinType::LeftSemi if any => out.push((id(i), RowId::NONE)),
                JoinType::LeftAnti if !any => out.push((id(i), RowId::NONE)),
                _ => {}
            }
        }
        for j in 0..r.rows() {
            let any = (0..l.rows()).any(|i| matches(i, j));
            let keep = match jt {
                JoinType::Right | JoinType::Full | JoinType::RightAnti => !any,
                JoinType::RightSemi => any,
                _ => false,
            };
            if keep {
                out.push((RowId::NONE, id(j)));
            }
        }
        out
    }

    fn brute_agg(l: &Relation, r: &Relation, p: &Predicate, agg: Agg, col: Option<(Side, usize)>, only_left: Option<usize>) -> AggValue {
        let mut vals = Vec::new();
        let mut count = 0i128;
        for i in 0..l.rows() {
            if only_left.is_some_and(|k| k != i) {
                continue;
            }
            for j in 0..r.rows() {
                if brute_eval(p, l, i, r, j) {
                    count += 1;
                    if let Some((side, c)) = col {
                        let (rel, row) = if side == Side::Left { (l, i) } else { (r, j) };
                        vals.push(tv_col(&rel.columns[c], row));
                    }
                }
            }
        }
        if agg == Agg::Count {
            return AggValue::Int(count);
        }
        if vals.is_empty() {
            return AggValue::None;
        }
        let as_int = |v: &TV| match v {
            TV::I32(x) => Some(*x as i128),
            TV::I64(x) => Some(*x as i128),
            TV::U32(x) => Some(*x as i128),
            TV::U64(x) => Some(*x as i128),
            _ => None,
        };
        let as_f = |v: &TV| match v {
            TV::F32(x) => *x as f64,
            TV::F64(x) => *x,
            _ => unreachable!(),
        };
        if as_int(&vals[0]).is_some() {
            let ints = vals.iter().map(|v| as_int(v).unwrap());
            return AggValue::Int(match agg {
                Agg::Sum => ints.sum(),
                Agg::Min => ints.min().unwrap(),
                _ => ints.max().unwrap(),
            });
        }
        let fs: Vec<f64> = vals.iter().map(as_f).collect();
        if agg == Agg::Sum {
            return AggValue::Float(fs.iter().fold(0.0, |a, b| a + b));
        }
        let non_nan: Vec<f64> = fs.iter().copied().filter(|x| !x.is_nan()).collect();
        if non_nan.is_empty() {
            return AggValue::Float(f64::NAN);
        }
        let m = if agg == Agg::Min {
            non_nan.iter().copied().fold(f64::INFINITY, f64::min)
        } else {
            non_nan.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        };
        AggValue::Float(m)
    }

    fn same_agg(a: AggValue, b: AggValue) -> bool {
        match (a, b) {
            (AggValue::Float(x), AggValue::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
            (a, b) => a == b,
        }
    }

    // ---- fixed examples ----

    fn example() -> (Relation, Relation) {
        let l = Relation::new(vec![
            ColumnData::I32(vec![1, 5, 3, -2]),
            ColumnData::F64(vec![0.5, f64::NAN, -0.0, f64::INFINITY]),
            ColumnData::utf8(["a", "é", "", "ab"]),
        ])
        .unwrap();
        let r = Relation::new(vec![
            ColumnData::I32(vec![3, 3, 10]),
            ColumnData::F64(vec![0.0, f64::NEG_INFINITY, 1.0]),
            ColumnData::utf8(["z", "a", "abc"]),
        ])
        .unwrap();
        (l, r)
    }

    #[test]
    fn every_join_type_matches_brute_force_on_examples() {
        let (l, r) = example();
        let s = l.schema();
        let preds = vec![
            Predicate::True,
            !Predicate::True,
            Predicate::Or(vec![]),
            col_l(0).greater(col_r(0)),
            col_l(0).equals(col_r(0)),
            col_l(1).equals(col_r(1)),
            col_l(1).not_equals(col_r(1)),
            col_l(1).less(col_r(1)),
            col_l(2).less(col_r(2)),
            col_l(2).greater_eq(col_r(2)).or(col_l(0).equals(lit(5))),
            !(col_l(0).less_eq(col_r(0)).and(col_l(2).not_equals(lit("")))),
            col_l(0).greater(lit(100)),
        ];
        for p in &preds {
            let c = p.check(&s, &s).unwrap();
            for jt in JoinType::ALL {
                let got = theta_join(&l, &r, &c, jt).unwrap();
                let mut want = brute_join(&l, &r, p, jt);
                sort_pairs(&mut want);
                assert_eq!(got, want, "{p:?} {jt:?}");
                assert_eq!(theta_join_size(&l, &r, &c, jt).unwrap(), got.len() as u64);
            }
        }
        // Selectivity 1 and 0 on the Full join.
        let all = Predicate::True.check(&s, &s).unwrap();
        assert_eq!(theta_join(&l, &r, &all, JoinType::Inner).unwrap().len(), 12);
        let none = Predicate::Or(vec![]).check(&s, &s).unwrap();
        assert_eq!(theta_join(&l, &r, &none, JoinType::Full).unwrap().len(), 7);
        // Empty relations.
        let empty = Relation::new(vec![ColumnData::I32(vec![]), ColumnData::F64(vec![]), ColumnData::utf8(Vec::<&str>::new())]).unwrap();
        for jt in JoinType::ALL {
            let got = theta_join(&empty, &r, &all, jt).unwrap();
            let want = if jt.keeps_unmatched_right() || jt == JoinType::RightAnti { 3 } else { 0 };
            assert_eq!(got.len(), want, "{jt:?}");
        }
    }

    #[test]
    fn schema_mismatch_is_an_error() {
        let (l, r) = example();
        let c = col_l(0).less(col_r(0)).check(&[DataType::I32], &[DataType::I32]).unwrap();
        assert!(matches!(theta_join(&l, &r, &c, JoinType::Inner), Err(Error::InvalidArgument(_))));
        let bad = Relation { columns: vec![ColumnData::I32(vec![1]), ColumnData::I32(vec![])] };
        let c = Predicate::True.check(&bad.schema(), &bad.schema()).unwrap();
        assert!(theta_join_size(&bad, &bad, &c, JoinType::Inner).is_err());
        let s = l.schema();
        let c = Predicate::True.check(&s, &s).unwrap();
        assert!(theta_aggregate(&l, &r, &c, Agg::Sum, None).is_err());
        assert!(theta_aggregate(&l, &r, &c, Agg::Sum, Some((Side::Left, 2))).is_err());
        assert!(theta_aggregate(&l, &r, &c, Agg::Max, Some((Side::Right, 9))).is_err());
        assert_eq!(theta_aggregate(&l, &r, &c, Agg::Count, Some((Side::Left, 2))).unwrap(), AggValue::Int(12));
    }

    #[test]
    fn aggregates_match_brute_force() {
        let (l, r) = example();
        let s = l.schema();
        let big = Relation::new(vec![ColumnData::U64(vec![u64::MAX; 3])]).unwrap();
        let bs = big.schema();
        let all = Predicate::True.check(&bs, &bs).unwrap();
        assert_eq!(
            theta_aggregate(&big, &big, &all, Agg::Sum, Some((Side::Right, 0))).unwrap(),
            AggValue::Int(9 * u64::MAX as i128)
        );
        for p in [Predicate::True, col_l(0).greater(col_r(0)), col_l(1).less(col_r(1)), col_l(0).greater(lit(100))] {
            let c = p.check(&s, &s).unwrap();
            for agg in [Agg::Count, Agg::Sum, Agg::Min, Agg::Max] {
                for col in [None, Some((Side::Left, 0)), Some((Side::Right, 0)), Some((Side::Left, 1)), Some((Side::Right, 1))] {
                    if col.is_none() && agg != Agg::Count {
                        continue;
                    }
                    let got = theta_aggregate(&l, &r, &c, agg, col).unwrap();
                    let want = brute_agg(&l, &r, &p, agg, col, None);
                    assert!(same_agg(got, want), "{p:?} {agg:?} {col:?}: {got:?} vs {want:?}");
                    let per = theta_aggregate_per_left_row(&l, &r, &c, agg, col).unwrap();
                    assert_eq!(per.len(), l.rows());
                    for (i, g) in per.iter().enumerate() {
                        let w = brute_agg(&l, &r, &p, agg, col, Some(i));
                        assert!(same_agg(*g, w), "row {i} {p:?} {agg:?} {col:?}: {g:?} vs {w:?}");
                    }
                }
            }
        }
        // NaN handling: MIN ignores NaN, SUM propagates it, all-NaN MIN is NaN.
        let f = Relation::new(vec![ColumnData::F32(vec![f32::NAN, 2.0, -1.0])]).unwrap();
        let one = Relation::new(vec![ColumnData::F32(vec![0.0])]).unwrap();
        let c = Predicate::True.check(&f.schema(), &one.schema()).unwrap();
        assert_eq!(theta_aggregate(&f, &one, &c, Agg::Min, Some((Side::Left, 0))).unwrap(), AggValue::Float(-1.0));
        assert_eq!(theta_aggregate(&f, &one, &c, Agg::Max, Some((Side::Left, 0))).unwrap(), AggValue::Float(2.0));
        assert!(theta_aggregate(&f, &one, &c, Agg::Sum, Some((Side::Left, 0))).unwrap().as_f64().unwrap().is_nan());
        let per = theta_aggregate_per_left_row(&f, &one, &c, Agg::Min, Some((Side::Left, 0))).unwrap();
        assert!(per[0].as_f64().unwrap().is_nan());
        let c = col_l(0).less(col_r(0)).check(&f.schema(), &one.schema()).unwrap();
        assert_eq!(
            theta_aggregate_per_left_row(&f, &one, &c, Agg::Sum, Some((Side::Right, 0))).unwrap(),
            vec![AggValue::None, AggValue::None, AggValue::Float(0.0)]
        );
    }

    // ---- property tests ----

    const TYPES: [DataType; 7] =
        [DataType::I32, DataType::I64, DataType::U32, DataType::U64, DataType::F32, DataType::F64, DataType::Utf8];
    const F64S: [f64; 8] = [f64::NAN, f64::NEG_INFINITY, -1.5, -0.0, 0.0, 1.0, 2.0, f64::INFINITY];
    const STRS: [&str; 8] = ["", "a", "ab", "abc", "b", "z", "é", "aé"];

    fn scalar(t: usize, k: usize) -> Scalar {
        match t {
            0 => Scalar::I32([i32::MIN, -3, -1, 0, 1, 2, 3, i32::MAX][k]),
            1 => Scalar::I64([i64::MIN, -3, -1, 0, 1, 2, 3, i64::MAX][k]),
            2 => Scalar::U32([0, 1, 2, 3, 4, 5, 6, u32::MAX][k]),
            3 => Scalar::U64([0, 1, 2, 3, 4, 5, 6, u64::MAX][k]),
            4 => Scalar::F32(F64S[k] as f32),
            5 => Scalar::F64(F64S[k]),
            _ => Scalar::Utf8(STRS[k].to_string()),
        }
    }

    /// A relation with one column of every type; `rows[i][t]` indexes the value domain of type t.
    fn relation(rows: &[Vec<usize>]) -> Relation {
        let rows: Vec<Vec<Scalar>> = rows.iter().map(|r| (0..7).map(|t| scalar(t, r[t])).collect()).collect();
        Relation::from_rows(&TYPES, &rows).unwrap()
    }

    fn operand(t: usize, kind: usize, k: usize) -> Expr {
        match kind {
            0 | 1 => col_l(t),
            2 | 3 => col_r(t),
            _ => Expr::Literal(scalar(t, k)),
        }
    }

    fn arb_leaf() -> impl Strategy<Value = Predicate> {
        prop_oneof![
            1 => Just(Predicate::True),
            12 => (0..7usize, 0..6usize, 0..5usize, 0..5usize, 0..8usize).prop_map(|(t, op, a, b, k)| {
                Predicate::cmp(CmpOp::ALL[op], operand(t, a, k), operand(t, b, 7 - k))
            }),
        ]
    }

    fn arb_pred() -> impl Strategy<Value = Predicate> {
        arb_leaf().prop_recursive(3, 24, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Predicate::And),
                prop::collection::vec(inner.clone(), 0..4).prop_map(Predicate::Or),
                inner.prop_map(|p| !p),
            ]
        })
    }

    fn arb_rows() -> impl Strategy<Value = Vec<Vec<usize>>> {
        prop::collection::vec(prop::collection::vec(0..8usize, 7), 0..7)
    }

    fn config(cases: u32, seed: u64) -> ProptestConfig {
        ProptestConfig { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, ..ProptestConfig::default() }
    }

    fn depth(p: &Predicate) -> usize {
        match p {
            Predicate::And(v) | Predicate::Or(v) => 1 + v.iter().map(depth).max().unwrap_or(0),
            Predicate::Not(q) => 1 + depth(q),
            _ => 0,
        }
    }

    proptest! {
        #![proptest_config(config(400, 0x7E7A_5EED))]

        #[test]
        fn theta_join_matches_brute_force(l in arb_rows(), r in arb_rows(), p in arb_pred(), jt in 0..8usize) {
            prop_assert!(depth(&p) <= 3);
            let (l, r) = (relation(&l), relation(&r));
            let c = p.check(&TYPES, &TYPES).unwrap();
            let jt = JoinType::ALL[jt];
            let got = theta_join(&l, &r, &c, jt).unwrap();
            let mut want = brute_join(&l, &r, &p, jt);
            sort_pairs(&mut want);
            prop_assert_eq!(&got, &want, "{:?} {:?}", p, jt);
            prop_assert_eq!(theta_join_size(&l, &r, &c, jt).unwrap(), got.len() as u64);
        }

        #[test]
        fn equality_parts_are_sound(
            l in arb_rows(),
            r in arb_rows(),
            eqs in prop::collection::vec(0..7usize, 0..3),
            p in arb_pred(),
        ) {
            let (l, r) = (relation(&l), relation(&r));
            let mut conj: Vec<Predicate> = eqs.iter().map(|&t| col_l(t).equals(col_r(t))).collect();
            conj.push(p);
            let full = Predicate::And(conj);
            for pred in [&full, &full.clone().and(Predicate::True)] {
                let c = pred.check(&TYPES, &TYPES).unwrap();
                let parts = c.equality_parts();
                for &t in &eqs {
                    prop_assert!(parts.contains(&(t, t)));
                }
                let residual = c.residual();
                for i in 0..l.rows() {
                    for j in 0..r.rows() {
                        let sat = c.evaluate(&l, i, &r, j);
                        let eq_ok = parts.iter().all(|&(a, b)| {
                            let e = col_l(a).equals(col_r(b)).check(&TYPES, &TYPES).unwrap();
                            e.evaluate(&l, i, &r, j)
                        });
                        if sat {
                            prop_assert!(eq_ok);
                        }
                        // Equalities plus residual are the predicate.
                        prop_assert_eq!(sat, eq_ok && residual.evaluate(&l, i, &r, j));
                    }
                }
            }
        }

        #[test]
        fn aggregates_match_brute_force_random(
            l in arb_rows(),
            r in arb_rows(),
            p in arb_pred(),
            agg in 0..4usize,
            side in 0..2usize,
            t in 0..6usize,
        ) {
            let (l, r) = (relation(&l), relation(&r));
            let c = p.check(&TYPES, &TYPES).unwrap();
            let agg = [Agg::Count, Agg::Sum, Agg::Min, Agg::Max][agg];
            let col = Some((if side == 0 { Side::Left } else { Side::Right }, t));
            let got = theta_aggregate(&l, &r, &c, agg, col).unwrap();
            let want = brute_agg(&l, &r, &p, agg, col, None);
            prop_assert!(same_agg(got, want), "{:?} vs {:?}", got, want);
            let per = theta_aggregate_per_left_row(&l, &r, &c, agg, col).unwrap();
            for (i, g) in per.iter().enumerate() {
                let w = brute_agg(&l, &r, &p, agg, col, Some(i));
                prop_assert!(same_agg(*g, w), "row {}: {:?} vs {:?}", i, g, w);
            }
        }

        #[test]
        fn band_and_inequality_shapes_mean_what_they_say(
            l in arb_rows(),
            r in arb_rows(),
            t in 0..6usize,
            op in 2..6usize,
            w in 0..8usize,
            band in any::<bool>(),
        ) {
            let (l, r) = (relation(&l), relation(&r));
            let width = scalar(t, w);
            let p = if band {
                (col_r(t) - Expr::Literal(width.clone())).less_eq(col_l(t))
                    .and(col_l(t).less_eq(col_r(t) + Expr::Literal(width.clone())))
            } else {
                Predicate::cmp(CmpOp::ALL[op], col_r(t), col_l(t))
            };
            let c = p.check(&TYPES, &TYPES).unwrap();
            let shape = c.band_or_inequality();
            prop_assert!(shape.is_some());
            for i in 0..l.rows() {
                for j in 0..r.rows() {
                    let (a, b) = (tv_col(&l.columns[t], i), tv_col(&r.columns[t], j));
                    let want = match shape.clone().unwrap() {
                        gpujoin_join::predicate::RangeCondition::Inequality { op, .. } => match op {
                            CmpOp::Lt => a < b,
                            CmpOp::Le => a <= b,
                            CmpOp::Gt => a > b,
                            CmpOp::Ge => a >= b,
                            _ => unreachable!(),
                        },
                        gpujoin_join::predicate::RangeCondition::Band { width, .. } => {
                            // Exact integer band; floats in the column's type.
                            match (a, b, width) {
                                (TV::F32(a), TV::F32(b), Scalar::F32(c)) => b - c <= a && a <= b + c,
                                (TV::F64(a), TV::F64(b), Scalar::F64(c)) => b - c <= a && a <= b + c,
                                (a, b, c) => {
                                    let int = |v: &TV| match v {
                                        TV::I32(x) => *x as i128,
                                        TV::I64(x) => *x as i128,
                                        TV::U32(x) => *x as i128,
                                        TV::U64(x) => *x as i128,
                                        _ => unreachable!(),
                                    };
                                    let c = match c {
                                        Scalar::I32(x) => x as i128,
                                        Scalar::I64(x) => x as i128,
                                        Scalar::U32(x) => x as i128,
                                        Scalar::U64(x) => x as i128,
                                        _ => unreachable!(),
                                    };
                                    int(&b) - c <= int(&a) && int(&a) <= int(&b) + c
                                }
                            }
                        }
                    };
                    prop_assert_eq!(c.evaluate(&l, i, &r, j), want, "{:?}", p);
                }
            }
        }
    }
}
