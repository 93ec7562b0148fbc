//! Helpers of the theta-join tests (gpu_theta.rs, gpu_theta_nlj.rs, gpu_theta_sort.rs), which run
//! through the front door (`plan::Join` over `table::Table`) against
//! `gpujoin_testkit::table_reference`: tables of columns `c0`, `c1`, .. (so that `col_l(i)` /
//! `col_r(i)` is column `c{i}`), output pairs as `(Option<u32>, Option<u32>)` (`None`: no row on
//! that side), the aggregates' CPU reference (the semantics of `theta::Agg`) on host tables, and
//! aggregates per left row through the front door as the aggregate of each left row alone (a
//! one-row slice of the left table: the front door has no per-left-row aggregate).
#![allow(dead_code)]

use gpujoin_device::testing::pick;
use gpujoin_device::Stream;
use gpujoin_join::plan::{Algorithm, Join};
use gpujoin_join::predicate::{Predicate, Side};
use gpujoin_join::table::{HostColumn, HostTable, Table, Value};
use gpujoin_join::theta::{Agg, AggValue};
use gpujoin_join::{GatherMaps, JoinType, NanEquality, NullEquality, RowId, TestingOptions};
use gpujoin_testkit::{reference, table_reference};
use proptest::test_runner::TestCaseError;

/// One output row: (left row, right row), `None` where the join gives no row of that side.
pub type Pair = (Option<u32>, Option<u32>);

/// An aggregated column: (side, column index), `None` for COUNT(*).
pub type AggCol = Option<(Side, usize)>;

pub fn fail(msg: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(msg.into())
}

/// The name of column `i` of these tests' tables.
pub fn name(i: usize) -> String {
    format!("c{i}")
}

/// A host table of the columns `c0`, `c1`, .. in order.
pub fn table(columns: Vec<HostColumn>) -> HostTable {
    HostTable::new(columns.into_iter().enumerate().map(|(i, c)| (name(i), c)).collect()).unwrap()
}

/// The aggregate's column argument of [`Join::aggregate`] (by name).
pub fn agg_arg(col: AggCol) -> Option<(Side, String)> {
    col.map(|(side, i)| (side, name(i)))
}

/// The pure theta join of `l` and `r` on `pred` (SQL's NULL and NaN semantics; these tables have
/// no nulls), as sorted pairs.
pub fn reference(l: &HostTable, r: &HostTable, pred: &Predicate, jt: JoinType) -> Vec<Pair> {
    table_reference::join(l, &[], r, &[], Some(pred), jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan)
}

fn opt(p: (RowId, RowId)) -> Pair {
    (p.0.get(), p.1.get())
}

/// The maps as sorted pairs, after checking their shape (semi/anti joins one map, the others
/// two of equal length) and `rows()`.
pub fn pairs(maps: &GatherMaps, jt: JoinType) -> Result<Vec<Pair>, TestCaseError> {
    let mut v: Vec<Pair> = crate::common::canonical_pairs(maps, jt)?.into_iter().map(opt).collect();
    v.sort();
    Ok(v)
}

/// Host maps (of join type `jt`) as sorted pairs, after checking their shape.
pub fn pairs_of(l: &[RowId], r: &[RowId], jt: JoinType) -> Result<Vec<Pair>, TestCaseError> {
    let p = reference::try_pairs_from_maps(l, r, jt).map_err(|e| fail(format!("{jt:?}: malformed gather maps ({} left, {} right entries): {e}", l.len(), r.len())))?;
    let mut v: Vec<Pair> = p.into_iter().map(opt).collect();
    v.sort();
    Ok(v)
}

/// The maps' rows in output order (an absent map reads as `None`).
pub fn ordered(maps: &GatherMaps) -> Vec<Pair> {
    maps.pairs().unwrap().into_iter().map(opt).collect()
}

/// What differs between two sorted pair lists.
pub fn diff(got: &[Pair], want: &[Pair]) -> String {
    let (mut i, mut j) = (0, 0);
    let (mut missing, mut extra) = (Vec::new(), Vec::new());
    while i < got.len() || j < want.len() {
        if j == want.len() || (i < got.len() && got[i] < want[j]) {
            extra.push(got[i]);
            i += 1;
        } else if i == got.len() || want[j] < got[i] {
            missing.push(want[j]);
            j += 1;
        } else {
            i += 1;
            j += 1;
        }
    }
    let head = |v: &[Pair]| format!("{:?}", &v[..v.len().min(12)]);
    format!("{} rows, expected {}; {} missing (first {}), {} extra (first {})", got.len(), want.len(), missing.len(), head(&missing), extra.len(), head(&extra))
}

/// The selected columns' values of each pair, one printed tuple a row, in the pairs' order (the
/// in-order counterpart of `table_reference::rows_of_pairs`).
pub fn rows_in_order(pairs: &[Pair], l: &HostTable, ls: &[&str], r: &HostTable, rs: &[&str]) -> Vec<String> {
    pairs
        .iter()
        .map(|&(a, b)| {
            let mut vals = Vec::new();
            for n in ls {
                vals.push(a.map_or(Value::Null, |i| l.column(n).unwrap().value(i as usize)));
            }
            for n in rs {
                vals.push(b.map_or(Value::Null, |j| r.column(n).unwrap().value(j as usize)));
            }
            format!("{vals:?}")
        })
        .collect()
}

/// A table's rows printed as tuples, in order (the in-order counterpart of
/// `table_reference::rows_of_table`).
pub fn table_rows_in_order(t: &HostTable) -> Vec<String> {
    (0..t.rows()).map(|k| format!("{:?}", t.columns().iter().map(|c| c.value(k)).collect::<Vec<_>>())).collect()
}

// ---- The aggregates' CPU reference (`theta::Agg`'s semantics) -----------------------------------

#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

/// One aggregate, fed values in canonical pair order: COUNT counts pairs; SUM of integers exactly,
/// of floats in `f64` in that order; MIN/MAX ignore NaN unless every value is NaN, and keep the
/// first of `-0.0` and `0.0`.
struct Acc {
    agg: Agg,
    count: u64,
    value: AggValue,
}

impl Acc {
    fn new(agg: Agg) -> Acc {
        Acc { agg, count: 0, value: AggValue::None }
    }

    fn push(&mut self, v: Option<Num>) {
        self.count += 1;
        let Some(v) = v else { return };
        self.value = match (self.agg, self.value, v) {
            (Agg::Count, ..) => return,
            (_, AggValue::None, Num::Int(x)) => AggValue::Int(x),
            (_, AggValue::None, Num::Float(x)) => AggValue::Float(x),
            (Agg::Sum, AggValue::Int(a), Num::Int(x)) => AggValue::Int(a.checked_add(x).expect("integer SUM within i128")),
            (Agg::Sum, AggValue::Float(a), Num::Float(x)) => AggValue::Float(a + x),
            (Agg::Min, AggValue::Int(a), Num::Int(x)) => AggValue::Int(a.min(x)),
            (Agg::Max, AggValue::Int(a), Num::Int(x)) => AggValue::Int(a.max(x)),
            (Agg::Min | Agg::Max, AggValue::Float(a), Num::Float(x)) => {
                let better = if self.agg == Agg::Min { x < a } else { x > a };
                AggValue::Float(if (a.is_nan() && !x.is_nan()) || better { x } else { a })
            }
            (_, value, v) => panic!("one column has one type: {value:?} and {v:?}"),
        };
    }

    fn finish(&self) -> AggValue {
        match self.agg {
            Agg::Count => AggValue::Int(self.count as i128),
            _ => self.value,
        }
    }
}

fn num(v: Value<'_>) -> Num {
    match v {
        Value::Int(x) => Num::Int(x),
        Value::Float(x) => Num::Float(x),
        v => panic!("an aggregate of a non-numeric value {v:?}"),
    }
}

fn value_of(l: &HostTable, r: &HostTable, col: AggCol, (a, b): Pair) -> Option<Num> {
    let (side, i) = col?;
    Some(match side {
        Side::Left => num(l.columns()[i].value(a.unwrap() as usize)),
        Side::Right => num(r.columns()[i].value(b.unwrap() as usize)),
    })
}

/// `agg` of `col` over the inner pairs `inner` (sorted: canonical pair order).
pub fn aggregate_of(l: &HostTable, r: &HostTable, inner: &[Pair], agg: Agg, col: AggCol) -> AggValue {
    let mut acc = Acc::new(agg);
    for &p in inner {
        acc.push(value_of(l, r, col, p));
    }
    acc.finish()
}

/// `agg` of `col` for each left row over its pairs in `inner` (sorted): one value a left row
/// (COUNT 0 and `AggValue::None` where nothing matches).
pub fn aggregate_per_left_row_of(l: &HostTable, r: &HostTable, inner: &[Pair], agg: Agg, col: AggCol) -> Vec<AggValue> {
    let mut accs: Vec<Acc> = (0..l.rows()).map(|_| Acc::new(agg)).collect();
    for &p in inner {
        accs[p.0.unwrap() as usize].push(value_of(l, r, col, p));
    }
    accs.iter().map(Acc::finish).collect()
}

/// `agg` of `col` over the inner theta join of `l` and `r` on `pred`.
pub fn aggregate(l: &HostTable, r: &HostTable, pred: &Predicate, agg: Agg, col: AggCol) -> AggValue {
    aggregate_of(l, r, &reference(l, r, pred, JoinType::Inner), agg, col)
}

// ---- Aggregates per left row through the front door --------------------------------------------

/// The left rows whose per-left-row aggregate a test checks: all of them up to `cap` (evenly
/// spread beyond, first and last included); 4 under `GPUJOIN_TEST_SIZE=small`.
pub fn rows_to_check(n: usize, cap: usize) -> Vec<usize> {
    let cap = pick(cap, 4).max(2);
    if n <= cap {
        return (0..n).collect();
    }
    let mut v: Vec<usize> = (0..cap).map(|k| k * (n - 1) / (cap - 1)).collect();
    v.dedup();
    v
}

/// `agg` of `col` for each of the left `rows` through the front door: the inner join of that
/// left row alone (a one-row slice of `lt`) with `rt` on `pred`, by `alg` with `testing`.
#[allow(clippy::too_many_arguments)]
pub fn aggregate_rows(
    s: &Stream,
    lt: &Table,
    rt: &Table,
    pred: &Predicate,
    alg: Algorithm,
    testing: TestingOptions,
    agg: Agg,
    col: AggCol,
    rows: &[usize],
) -> gpujoin_device::Result<Vec<AggValue>> {
    let arg = agg_arg(col);
    rows.iter()
        .map(|&i| {
            let one = lt.view().slice(i, 1)?;
            Join::new(JoinType::Inner).tables(one, rt).filter(pred.clone()).algorithm(alg).testing(testing).aggregate(s, agg, arg.as_ref().map(|(side, n)| (*side, n.as_str())))
        })
        .collect()
}
