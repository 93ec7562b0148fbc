//! Evaluation on the host: [`CheckedPredicate::evaluate`] on one pair of rows of two host tables,
//! with the comparison semantics of the [module docs](super), reading each column as the theta
//! kernels do (its values as the type it is checked as; a null row's slot as it is).

use std::cmp::Ordering;

use super::{CheckedPredicate, Expr, Predicate, Scalar, Side};
use crate::table::{DataType, HostColumn, HostTable};

impl Scalar {
    fn value(&self) -> Value<'_> {
        match self {
            Scalar::I32(v) => Value::Int(*v as i128),
            Scalar::I64(v) => Value::Int(*v as i128),
            Scalar::U32(v) => Value::Int(*v as i128),
            Scalar::U64(v) => Value::Int(*v as i128),
            Scalar::F32(v) => Value::F32(*v),
            Scalar::F64(v) => Value::F64(*v),
            Scalar::Utf8(s) => Value::Str(s.as_bytes()),
        }
    }
}

impl Expr {
    fn value<'a>(&'a self, left: &'a HostTable, l_row: usize, right: &'a HostTable, r_row: usize) -> Value<'a> {
        match self {
            Expr::Column { side, index } => {
                let (rel, row) = match side {
                    Side::Left => (left, l_row),
                    Side::Right => (right, r_row),
                };
                match rel.columns().get(*index) {
                    Some(c) => column_value(c, row),
                    None => Value::Invalid,
                }
            }
            Expr::Literal(s) => s.value(),
            Expr::Add(a, b) | Expr::Sub(a, b) => {
                let add = matches!(self, Expr::Add(..));
                match (a.value(left, l_row, right, r_row), b.value(left, l_row, right, r_row)) {
                    (Value::Int(x), Value::Int(y)) => {
                        let v = if add { x.checked_add(y) } else { x.checked_sub(y) };
                        v.map_or(Value::Invalid, Value::Int)
                    }
                    (Value::F32(x), Value::F32(y)) => Value::F32(if add { x + y } else { x - y }),
                    (Value::F64(x), Value::F64(y)) => Value::F64(if add { x + y } else { x - y }),
                    _ => Value::Invalid,
                }
            }
        }
    }
}

/// A value during evaluation: integers exactly as `i128`, floats in their own type, strings as
/// UTF-8 bytes. `Invalid` only arises for relations that do not match the checked schemas.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Int(i128),
    F32(f32),
    F64(f64),
    Str(&'a [u8]),
    Invalid,
}

/// Row `row` of a column as the kernels read it: its slot's value whatever its validity, narrow
/// integers and booleans as integers, `Float32` in its own type; `Decimal128` (which filters
/// refuse) and rows past the end are `Invalid`.
fn column_value(c: &HostColumn, row: usize) -> Value<'_> {
    if row >= c.len() {
        return Value::Invalid;
    }
    let (v, i) = (c.values_buffer(), c.offset() + row);
    fn le<const W: usize>(v: &[u8], i: usize) -> [u8; W] {
        v[i * W..(i + 1) * W].try_into().expect("W bytes")
    }
    match c.data_type() {
        DataType::Int8 => Value::Int(i8::from_le_bytes(le::<1>(v, i)) as i128),
        DataType::Int16 => Value::Int(i16::from_le_bytes(le::<2>(v, i)) as i128),
        DataType::Int32 | DataType::Date32 => Value::Int(i32::from_le_bytes(le::<4>(v, i)) as i128),
        DataType::Int64 | DataType::Date64 | DataType::Timestamp(_) => Value::Int(i64::from_le_bytes(le::<8>(v, i)) as i128),
        DataType::UInt8 => Value::Int(v[i] as i128),
        DataType::UInt16 => Value::Int(u16::from_le_bytes(le::<2>(v, i)) as i128),
        DataType::UInt32 => Value::Int(u32::from_le_bytes(le::<4>(v, i)) as i128),
        DataType::UInt64 => Value::Int(u64::from_le_bytes(le::<8>(v, i)) as i128),
        DataType::Boolean => Value::Int((v[i / 8] >> (i % 8) & 1) as i128),
        DataType::Float32 => Value::F32(f32::from_le_bytes(le::<4>(v, i))),
        DataType::Float64 => Value::F64(f64::from_le_bytes(le::<8>(v, i))),
        DataType::Utf8 | DataType::LargeUtf8 => {
            let o = c.offsets_buffer();
            let at = |k: usize| -> usize {
                if c.data_type() == DataType::Utf8 { u32::from_le_bytes(le::<4>(o, k)) as usize } else { u64::from_le_bytes(le::<8>(o, k)) as usize }
            };
            v.get(at(i)..at(i + 1)).map_or(Value::Invalid, Value::Str)
        }
        DataType::Decimal128(..) => Value::Invalid,
    }
}

fn compare(a: Value<'_>, b: Value<'_>) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(&y)),
        (Value::F32(x), Value::F32(y)) => x.partial_cmp(&y),
        (Value::F64(x), Value::F64(y)) => x.partial_cmp(&y),
        // Slices of u8 compare byte-wise lexicographically, a proper prefix first.
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

impl CheckedPredicate {
    /// Evaluates the predicate on left row `l_row` and right row `r_row` (see the
    /// [module docs](super) for the comparison semantics).
    ///
    /// The tables must have the checked schemas ([`CheckedPredicate::check_tables`]) and the
    /// rows must exist; otherwise comparisons that touch a missing or mistyped value are false
    /// (and `<>` true), never a panic.
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, DataType};
    /// use gpujoin_join::table::{HostColumn, HostTable};
    /// let c = col_l(0).not_equals(col_r(0)).check(&[DataType::Float64], &[DataType::Float64])?;
    /// let l = HostTable::new(vec![("x", HostColumn::from_values(vec![f64::NAN, -0.0]))])?;
    /// let r = HostTable::new(vec![("y", HostColumn::from_values(vec![0.0f64]))])?;
    /// assert!(c.evaluate(&l, 0, &r, 0)); // NaN <> 0 is true
    /// assert!(!c.evaluate(&l, 1, &r, 0)); // -0.0 == 0.0
    /// # Ok::<(), gpujoin_device::Error>(())
    /// ```
    pub fn evaluate(&self, left: &HostTable, l_row: usize, right: &HostTable, r_row: usize) -> bool {
        eval(&self.pred, left, l_row, right, r_row)
    }
}

fn eval(p: &Predicate, left: &HostTable, l_row: usize, right: &HostTable, r_row: usize) -> bool {
    match p {
        Predicate::True => true,
        Predicate::Not(q) => !eval(q, left, l_row, right, r_row),
        Predicate::And(v) => v.iter().all(|q| eval(q, left, l_row, right, r_row)),
        Predicate::Or(v) => v.iter().any(|q| eval(q, left, l_row, right, r_row)),
        Predicate::Cmp { op, left: a, right: b } => {
            let va = a.value(left, l_row, right, r_row);
            let vb = b.value(left, l_row, right, r_row);
            op.holds(compare(va, vb))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicate::{col_l, col_r, lit, CmpOp};

    fn eval1(p: Predicate, l: HostColumn, r: HostColumn) -> Vec<Vec<bool>> {
        let t = |c: &HostColumn| crate::plan::filter::lowered_type(c.data_type());
        let c = p.check(&[t(&l)], &[t(&r)]).unwrap();
        let (l, r) = (HostTable::new(vec![("c", l)]).unwrap(), HostTable::new(vec![("c", r)]).unwrap());
        (0..l.rows()).map(|i| (0..r.rows()).map(|j| c.evaluate(&l, i, &r, j)).collect()).collect()
    }

    #[test]
    fn string_comparisons() {
        let long_a = "a".repeat(1000);
        let long_b = format!("{}b", "a".repeat(999));
        let vals = ["", "a", "ab", "abc", "b", "z", "é", "zz", long_a.as_str(), long_b.as_str(), "aé"];
        let col = || HostColumn::utf8(vals);
        for op in CmpOp::ALL {
            let got = eval1(Predicate::cmp(op, col_l(0), col_r(0)), col(), col());
            for (i, a) in vals.iter().enumerate() {
                for (j, b) in vals.iter().enumerate() {
                    let want = op.holds(Some(a.as_bytes().cmp(b.as_bytes())));
                    assert_eq!(got[i][j], want, "{a:?} {op:?} {b:?}");
                }
            }
        }
        let lt = |a: &str, b: &str| eval1(col_l(0).less(col_r(0)), HostColumn::utf8([a]), HostColumn::utf8([b]))[0][0];
        assert!(lt("", "a"));
        assert!(!lt("", ""));
        assert!(lt("ab", "abc"));
        assert!(lt("z", "é")); // 0x7a < 0xc3
        assert!(lt("aa", "aé"));
        assert!(lt(&long_a, &long_b));
        assert!(!lt(&long_b, &long_a));
        let eq_lit = eval1(col_l(0).equals(lit("é")), HostColumn::utf8(["é", "e", ""]), HostColumn::utf8(["x"]));
        assert_eq!(eq_lit, vec![vec![true], vec![false], vec![false]]);
    }

    #[test]
    fn nan_and_infinities() {
        let vals = [f64::NAN, f64::NEG_INFINITY, -1.0, -0.0, 0.0, 1.0, f64::INFINITY, -f64::NAN];
        for op in CmpOp::ALL {
            let got = eval1(Predicate::cmp(op, col_l(0), col_r(0)), HostColumn::from_values::<f64>(vals.to_vec()), HostColumn::from_values::<f64>(vals.to_vec()));
            let got32 = eval1(
                Predicate::cmp(op, col_l(0), col_r(0)),
                HostColumn::from_values::<f32>(vals.iter().map(|&v| v as f32).collect()),
                HostColumn::from_values::<f32>(vals.iter().map(|&v| v as f32).collect()),
            );
            for (i, a) in vals.iter().enumerate() {
                for (j, b) in vals.iter().enumerate() {
                    let want = match op {
                        CmpOp::Eq => a == b,
                        CmpOp::Ne => a != b,
                        CmpOp::Lt => a < b,
                        CmpOp::Le => a <= b,
                        CmpOp::Gt => a > b,
                        CmpOp::Ge => a >= b,
                    };
                    assert_eq!(got[i][j], want, "{a} {op:?} {b}");
                    assert_eq!(got32[i][j], want, "f32 {a} {op:?} {b}");
                }
            }
        }
        // -0.0 == 0.0; NaN: only <> holds; NOT(NaN < x) holds.
        let one = |p: Predicate, a: f64, b: f64| eval1(p, HostColumn::from_values::<f64>(vec![a]), HostColumn::from_values::<f64>(vec![b]))[0][0];
        assert!(one(col_l(0).equals(col_r(0)), -0.0, 0.0));
        assert!(!one(col_l(0).equals(col_r(0)), f64::NAN, f64::NAN));
        assert!(one(col_l(0).not_equals(col_r(0)), f64::NAN, f64::NAN));
        assert!(one(!col_l(0).less(col_r(0)), f64::NAN, 1.0));
        assert!(one(col_l(0).less(col_r(0)), f64::NEG_INFINITY, f64::MIN));
        assert!(one(col_l(0).equals(col_r(0) + lit(f64::INFINITY)), f64::INFINITY, 1.0));
        assert!(!one(col_l(0).equals(col_r(0) - lit(f64::INFINITY)), f64::NAN, f64::INFINITY));
    }

    #[test]
    fn integers_compare_exactly() {
        let one = |p: Predicate, l: HostColumn, r: HostColumn| eval1(p, l, r)[0][0];
        assert!(one(col_l(0).greater(col_r(0)), HostColumn::from_values::<u64>(vec![u64::MAX]), HostColumn::from_values::<u64>(vec![0])));
        assert!(one(col_l(0).less(col_r(0)), HostColumn::from_values::<i64>(vec![i64::MIN]), HostColumn::from_values::<i64>(vec![-1])));
        // Exact arithmetic: no wrap-around.
        assert!(!one(col_l(0).greater(col_r(0) + lit(1u64)), HostColumn::from_values::<u64>(vec![0]), HostColumn::from_values::<u64>(vec![u64::MAX])));
        assert!(one(col_l(0).less(col_r(0) + lit(1i32)), HostColumn::from_values::<i32>(vec![i32::MAX]), HostColumn::from_values::<i32>(vec![i32::MAX])));
        assert!(one(col_l(0).greater(col_r(0) - lit(1u32)), HostColumn::from_values::<u32>(vec![0]), HostColumn::from_values::<u32>(vec![0])));
    }
}
