//! Shape analysis of a checked predicate, for the faster join paths: its equality parts
//! ([`CheckedPredicate::equality_parts`]), the rest ([`CheckedPredicate::residual`]), and a
//! single inequality or band ([`CheckedPredicate::band_or_inequality`], [`RangeCondition`]).

use super::{CheckedPredicate, CmpOp, Expr, Predicate, Scalar, Side};

impl Expr {
    fn as_column(&self) -> Option<(Side, usize)> {
        match self {
            Expr::Column { side, index } => Some((*side, *index)),
            _ => None,
        }
    }
}

/// The shape of a predicate that a sort-based join can take: see
/// [`CheckedPredicate::band_or_inequality`]. Columns are numeric (integers or floats) and of the
/// same type on both sides.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeCondition {
    /// `l.left_col op r.right_col` with `op` one of `<`, `<=`, `>`, `>=`.
    Inequality { left_col: usize, op: CmpOp, right_col: usize },
    /// `r.right_col - width <= l.left_col <= r.right_col + width` (both ends inclusive; `width`
    /// has the columns' type; a negative or NaN width gives an empty result).
    Band { left_col: usize, right_col: usize, width: Scalar },
}

impl CheckedPredicate {
    /// The `(left column, right column)` pairs of the equalities `l.a = r.b` (either operand
    /// order) that are top-level conjuncts of the predicate (nested `And`s count; `Or`/`Not` do
    /// not). Every pair of rows satisfying the predicate satisfies each of them, so a join can
    /// hash or sort on these columns and apply the predicate as a filter (a mixed join). For
    /// float columns the equality is IEEE (`-0.0 == 0.0`, NaN equals nothing), i.e. an equi-join
    /// with [`NanEquality::NanNeverEqual`](crate::types::NanEquality::NanNeverEqual). Pairs keep
    /// the order of the predicate; duplicates are removed.
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, DataType};
    /// let s = [DataType::Int32, DataType::Int32];
    /// let p = col_r(1).equals(col_l(0)).and(col_l(1).less(col_r(0)));
    /// assert_eq!(p.check(&s, &s)?.equality_parts(), vec![(0, 1)]);
    /// let p = col_l(0).equals(col_r(0)).or(col_l(1).equals(col_r(1)));
    /// assert!(p.check(&s, &s)?.equality_parts().is_empty());
    /// # Ok::<(), gpujoin_device::Error>(())
    /// ```
    pub fn equality_parts(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut conjuncts = Vec::new();
        flatten_and(&self.pred, &mut conjuncts);
        for p in conjuncts {
            if let Some(pair) = equality_pair(p) {
                if !out.contains(&pair) {
                    out.push(pair);
                }
            }
        }
        out
    }

    /// The predicate without its [equality parts](CheckedPredicate::equality_parts): the filter
    /// a mixed join applies after matching on them (`True` when nothing is left).
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, DataType, Predicate};
    /// let s = [DataType::Int64, DataType::Int64];
    /// let c = col_l(0).equals(col_r(0)).and(col_l(1).less(col_r(1))).check(&s, &s)?;
    /// assert_eq!(c.residual().predicate(), &Predicate::And(vec![col_l(1).less(col_r(1))]));
    /// # Ok::<(), gpujoin_device::Error>(())
    /// ```
    pub fn residual(&self) -> CheckedPredicate {
        let mut conjuncts = Vec::new();
        flatten_and(&self.pred, &mut conjuncts);
        let rest: Vec<Predicate> =
            conjuncts.into_iter().filter(|p| equality_pair(p).is_none()).cloned().collect();
        let pred = if rest.is_empty() { Predicate::True } else { Predicate::And(rest) };
        CheckedPredicate { pred, left_schema: self.left_schema.clone(), right_schema: self.right_schema.clone() }
    }

    /// The [`RangeCondition`] the predicate is, if it has exactly one of these shapes over numeric
    /// columns of the same type:
    ///
    /// * a single comparison `l.a op r.b` or `r.b op l.a` with `op` in `<`, `<=`, `>`, `>=`
    ///   (returned with the left column first, the operator flipped as needed);
    /// * a band: an `And` of exactly two comparisons `l.a >= r.b - c` and `l.a <= r.b + c`
    ///   (either order, either operand order, the same literal `c`).
    ///
    /// Floats keep IEEE semantics: a sort-based path must drop rows whose key is NaN.
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, lit, CmpOp, DataType, RangeCondition, Scalar};
    /// let s = [DataType::Int32];
    /// let c = col_r(0).greater(col_l(0)).check(&s, &s)?;
    /// assert_eq!(c.band_or_inequality(), Some(RangeCondition::Inequality { left_col: 0, op: CmpOp::Lt, right_col: 0 }));
    /// let band = (col_r(0) - lit(2)).less_eq(col_l(0)).and(col_l(0).less_eq(col_r(0) + lit(2)));
    /// assert_eq!(
    ///     band.check(&s, &s)?.band_or_inequality(),
    ///     Some(RangeCondition::Band { left_col: 0, right_col: 0, width: Scalar::I32(2) })
    /// );
    /// # Ok::<(), gpujoin_device::Error>(())
    /// ```
    pub fn band_or_inequality(&self) -> Option<RangeCondition> {
        let numeric = |l: usize, r: usize| {
            let (tl, tr) = (self.left_schema.get(l)?, self.right_schema.get(r)?);
            (tl == tr && tl.is_numeric()).then_some(())
        };
        match &self.pred {
            Predicate::Cmp { op, left, right } => {
                if !matches!(op, CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge) {
                    return None;
                }
                let (op, l, r) = match (left.as_column()?, right.as_column()?) {
                    ((Side::Left, l), (Side::Right, r)) => (*op, l, r),
                    ((Side::Right, r), (Side::Left, l)) => (op.flipped(), l, r),
                    _ => return None,
                };
                numeric(l, r)?;
                Some(RangeCondition::Inequality { left_col: l, op, right_col: r })
            }
            Predicate::And(v) if v.len() == 2 => {
                let a = band_bound(&v[0])?;
                let b = band_bound(&v[1])?;
                let (lo, hi) = match (a.0, b.0) {
                    (BandEnd::Lower, BandEnd::Upper) => (a, b),
                    (BandEnd::Upper, BandEnd::Lower) => (b, a),
                    _ => return None,
                };
                if lo.1 != hi.1 || lo.2 != hi.2 || !same_literal(&lo.3, &hi.3) {
                    return None;
                }
                numeric(lo.1, lo.2)?;
                if lo.3.data_type() != self.left_schema[lo.1] {
                    return None;
                }
                Some(RangeCondition::Band { left_col: lo.1, right_col: lo.2, width: lo.3 })
            }
            _ => None,
        }
    }
}

/// Literal identity: floats by bits, so a NaN width equals itself.
fn same_literal(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => x.to_bits() == y.to_bits(),
        (Scalar::F64(x), Scalar::F64(y)) => x.to_bits() == y.to_bits(),
        (a, b) => a == b,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BandEnd {
    Lower,
    Upper,
}

/// Recognizes `l.a >= r.b - c` (Lower) or `l.a <= r.b + c` (Upper), in either operand order.
fn band_bound(p: &Predicate) -> Option<(BandEnd, usize, usize, Scalar)> {
    let Predicate::Cmp { op, left, right } = p else { return None };
    // Normalize to `l.a op' other`.
    let (op, other, l) = match (left.as_column(), right.as_column()) {
        (Some((Side::Left, l)), _) => (*op, right, l),
        (_, Some((Side::Left, l))) => (op.flipped(), left, l),
        _ => return None,
    };
    let (end, a, b) = match (op, other) {
        (CmpOp::Ge, Expr::Sub(a, b)) => (BandEnd::Lower, a, b),
        (CmpOp::Le, Expr::Add(a, b)) => (BandEnd::Upper, a, b),
        _ => return None,
    };
    let (Some((Side::Right, r)), Expr::Literal(c)) = (a.as_column(), b.as_ref()) else { return None };
    Some((end, l, r, c.clone()))
}

fn flatten_and<'a>(p: &'a Predicate, out: &mut Vec<&'a Predicate>) {
    match p {
        Predicate::And(v) => v.iter().for_each(|q| flatten_and(q, out)),
        p => out.push(p),
    }
}

fn equality_pair(p: &Predicate) -> Option<(usize, usize)> {
    let Predicate::Cmp { op: CmpOp::Eq, left, right } = p else { return None };
    match (left.as_column()?, right.as_column()?) {
        ((Side::Left, l), (Side::Right, r)) | ((Side::Right, r), (Side::Left, l)) => Some((l, r)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicate::{col_l, col_r, lit, DataType};
    use DataType::*;

    #[test]
    fn equality_parts_and_ranges() {
        let s = [Int32, Float64, LargeUtf8];
        let c = col_l(0)
            .equals(col_r(0))
            .and(col_r(2).equals(col_l(2)).and(col_l(1).less(col_r(1))))
            .and(col_l(0).equals(lit(3)))
            .and(col_l(0).equals(col_l(0)))
            .and(col_l(0).equals(col_r(0)))
            .check(&s, &s)
            .unwrap();
        assert_eq!(c.equality_parts(), vec![(0, 0), (2, 2)]);
        assert_eq!(c.residual().equality_parts(), vec![]);
        assert_eq!(col_l(0).equals(col_r(0)).check(&s, &s).unwrap().residual().predicate(), &Predicate::True);
        let neg = (!col_l(0).equals(col_r(0))).check(&s, &s).unwrap();
        assert!(neg.equality_parts().is_empty());
        assert!(Predicate::True.check(&s, &s).unwrap().equality_parts().is_empty());

        // Inequalities.
        for op in [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge] {
            let c = Predicate::cmp(op, col_l(1), col_r(1)).check(&s, &s).unwrap();
            assert_eq!(c.band_or_inequality(), Some(RangeCondition::Inequality { left_col: 1, op, right_col: 1 }));
            let c = Predicate::cmp(op, col_r(0), col_l(0)).check(&s, &s).unwrap();
            assert_eq!(
                c.band_or_inequality(),
                Some(RangeCondition::Inequality { left_col: 0, op: op.flipped(), right_col: 0 })
            );
        }
        for p in [
            col_l(0).equals(col_r(0)),
            col_l(0).not_equals(col_r(0)),
            col_l(2).less(col_r(2)),
            col_l(0).less(lit(3)),
            col_l(0).less(col_l(0)),
            !col_l(0).less(col_r(0)),
            col_l(0).less(col_r(0)).and(Predicate::True),
        ] {
            assert_eq!(p.check(&s, &s).unwrap().band_or_inequality(), None, "{p:?}");
        }
        // Bands, in several spellings.
        let want = Some(RangeCondition::Band { left_col: 1, right_col: 1, width: Scalar::F64(0.5) });
        let lo = (col_r(1) - lit(0.5f64)).less_eq(col_l(1));
        let lo2 = col_l(1).greater_eq(col_r(1) - lit(0.5f64));
        let hi = col_l(1).less_eq(col_r(1) + lit(0.5f64));
        let hi2 = (col_r(1) + lit(0.5f64)).greater_eq(col_l(1));
        for (a, b) in [(&lo, &hi), (&hi, &lo), (&lo2, &hi2), (&hi2, &lo)] {
            let c = a.clone().and(b.clone()).check(&s, &s).unwrap();
            assert_eq!(c.band_or_inequality(), want);
        }
        // Not bands: different widths, strict bound, same end twice, different columns.
        for p in [
            lo.clone().and(col_l(1).less_eq(col_r(1) + lit(0.25f64))),
            lo.clone().and(col_l(1).less(col_r(1) + lit(0.5f64))),
            lo.clone().and(lo.clone()),
            lo.clone().and(col_l(1).less_eq(col_l(1) + lit(0.5f64))),
            lo.clone().and(hi.clone()).and(Predicate::True),
        ] {
            assert_eq!(p.check(&s, &s).unwrap().band_or_inequality(), None, "{p:?}");
        }
    }
}
