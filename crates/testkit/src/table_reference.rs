//! The CPU reference of the front door ([`gpujoin_join::plan::Join`]) on host tables: one
//! reference for equi-joins, theta joins and both together, every column type, NULL keys under
//! both [`NullEquality`], NaN under both [`NanEquality`] (`-0.0 == 0.0` always), and a typed
//! predicate as the filter. Quadratic: for test sizes.
//!
//! ```
//! use gpujoin_join::table::{HostColumn, HostTable};
//! use gpujoin_join::{JoinType, NanEquality, NullEquality};
//! use gpujoin_testkit::table_reference::join;
//! let l = HostTable::new(vec![("k", HostColumn::from_options(vec![Some(1i32), None, Some(2)]))])?;
//! let r = HostTable::new(vec![("k", HostColumn::from_values(vec![2i32, 1, 1]))])?;
//! let pairs = join(&l, &["k"], &r, &["k"], None, JoinType::Left, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
//! assert_eq!(pairs, [(Some(0), Some(1)), (Some(0), Some(2)), (Some(1), None), (Some(2), Some(0))]);
//! # Ok::<(), gpujoin_device::Error>(())
//! ```

use gpujoin_join::predicate::{Expr, Predicate, Scalar, Side};
use gpujoin_join::table::{HostTable, Value};
use gpujoin_join::{JoinType, NanEquality, NullEquality};

/// Whether two key values are equal under the options.
pub fn key_eq(a: Value<'_>, b: Value<'_>, nulls: NullEquality, nans: NanEquality) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => nulls == NullEquality::NullEqualsNull,
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Float(x), Value::Float(y)) => {
            if x.is_nan() || y.is_nan() {
                x.is_nan() && y.is_nan() && nans == NanEquality::NanEqualsNan
            } else {
                x == y
            }
        }
        (x, y) => x == y,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
enum V<'a> {
    I(i128),
    F(f64),
    S(&'a [u8]),
}

fn eval_expr<'a>(e: &'a Expr, l: &'a HostTable, i: usize, r: &'a HostTable, j: usize) -> Option<V<'a>> {
    Some(match e {
        Expr::Column { side, index } => {
            let v = if *side == Side::Left { l.columns()[*index].value(i) } else { r.columns()[*index].value(j) };
            match v {
                Value::Int(x) => V::I(x),
                Value::Bool(b) => V::I(b as i128),
                Value::Float(x) => V::F(x),
                Value::Str(s) => V::S(s),
                Value::Null => return None,
            }
        }
        Expr::Literal(s) => match s {
            Scalar::I32(x) => V::I(*x as i128),
            Scalar::I64(x) => V::I(*x as i128),
            Scalar::U32(x) => V::I(*x as i128),
            Scalar::U64(x) => V::I(*x as i128),
            Scalar::F32(x) => V::F(*x as f64),
            Scalar::F64(x) => V::F(*x),
            Scalar::Utf8(s) => V::S(s.as_bytes()),
        },
        Expr::Add(a, b) | Expr::Sub(a, b) => {
            let sign = if matches!(e, Expr::Add(..)) { 1 } else { -1 };
            match (eval_expr(a, l, i, r, j)?, eval_expr(b, l, i, r, j)?) {
                (V::I(x), V::I(y)) => V::I(x + sign as i128 * y),
                (V::F(x), V::F(y)) => V::F(x + sign as f64 * y),
                _ => panic!("arithmetic on strings does not type-check"),
            }
        }
    })
}

/// The predicate on left row `i` and right row `j` (SQL: a comparison with a NULL is unknown,
/// which a filter treats as false; NOT, AND and OR follow three-valued logic).
pub fn eval(p: &Predicate, l: &HostTable, i: usize, r: &HostTable, j: usize) -> bool {
    eval3(p, l, i, r, j) == Some(true)
}

fn eval3(p: &Predicate, l: &HostTable, i: usize, r: &HostTable, j: usize) -> Option<bool> {
    match p {
        Predicate::Cmp { op, left, right } => {
            let (a, b) = (eval_expr(left, l, i, r, j)?, eval_expr(right, l, i, r, j)?);
            Some(op.holds(a.partial_cmp(&b)))
        }
        Predicate::And(v) => {
            let vals: Vec<Option<bool>> = v.iter().map(|q| eval3(q, l, i, r, j)).collect();
            if vals.contains(&Some(false)) {
                Some(false)
            } else if vals.contains(&None) {
                None
            } else {
                Some(true)
            }
        }
        Predicate::Or(v) => {
            let vals: Vec<Option<bool>> = v.iter().map(|q| eval3(q, l, i, r, j)).collect();
            if vals.contains(&Some(true)) {
                Some(true)
            } else if vals.contains(&None) {
                None
            } else {
                Some(false)
            }
        }
        Predicate::Not(q) => eval3(q, l, i, r, j).map(|b| !b),
        Predicate::True => Some(true),
    }
}

/// The join's output as sorted `(left row, right row)` pairs (`None`: no row on that side):
/// pairs whose key columns `lk` / `rk` are equal and that pass `filter`, plus the unmatched rows
/// the join type keeps; semi and anti joins give each kept row once.
#[allow(clippy::too_many_arguments)]
pub fn join(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], filter: Option<&Predicate>, jt: JoinType, nulls: NullEquality, nans: NanEquality) -> Vec<(Option<u32>, Option<u32>)> {
    let lc: Vec<Vec<Value<'_>>> = lk.iter().map(|n| l.column(n).expect("left key").values()).collect();
    let rc: Vec<Vec<Value<'_>>> = rk.iter().map(|n| r.column(n).expect("right key").values()).collect();
    let (nl, nr) = (l.rows(), r.rows());
    let (mut lm, mut rm, mut pairs) = (vec![false; nl], vec![false; nr], Vec::new());
    for i in 0..nl {
        for j in 0..nr {
            if lc.iter().zip(&rc).all(|(a, b)| key_eq(a[i], b[j], nulls, nans)) && filter.is_none_or(|p| eval(p, l, i, r, j)) {
                lm[i] = true;
                rm[j] = true;
                if matches!(jt, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
                    pairs.push((Some(i as u32), Some(j as u32)));
                }
            }
        }
    }
    let lrows = |want: bool| (0..nl).filter(move |&i| lm[i] == want).map(|i| (Some(i as u32), None));
    let rrows = |want: bool| (0..nr).filter(move |&j| rm[j] == want).map(|j| (None, Some(j as u32)));
    match jt {
        JoinType::Left => pairs.extend(lrows(false)),
        JoinType::Right => pairs.extend(rrows(false)),
        JoinType::Full => {
            pairs.extend(lrows(false));
            pairs.extend(rrows(false));
        }
        JoinType::LeftSemi => pairs.extend(lrows(true)),
        JoinType::LeftAnti => pairs.extend(lrows(false)),
        JoinType::RightSemi => pairs.extend(rrows(true)),
        JoinType::RightAnti => pairs.extend(rrows(false)),
        JoinType::Inner => {}
    }
    pairs.sort();
    pairs
}

/// The output rows the pairs give when `ls` columns of the left and `rs` of the right table are
/// selected, each printed as a tuple, sorted (to compare materialized tables as multisets).
pub fn rows_of_pairs(pairs: &[(Option<u32>, Option<u32>)], l: &HostTable, ls: &[&str], r: &HostTable, rs: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = pairs
        .iter()
        .map(|&(a, b)| {
            let mut vals = Vec::new();
            for n in ls {
                vals.push(a.map_or(Value::Null, |i| l.column(n).expect("left column").value(i as usize)));
            }
            for n in rs {
                vals.push(b.map_or(Value::Null, |j| r.column(n).expect("right column").value(j as usize)));
            }
            format!("{vals:?}")
        })
        .collect();
    v.sort();
    v
}

/// A table's rows printed as tuples, sorted (the other side of [`rows_of_pairs`]).
pub fn rows_of_table(t: &HostTable) -> Vec<String> {
    let mut v: Vec<String> = (0..t.rows()).map(|k| format!("{:?}", t.columns().iter().map(|c| c.value(k)).collect::<Vec<_>>())).collect();
    v.sort();
    v
}
