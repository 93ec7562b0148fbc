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
//!
//! For larger equi-joins without a filter, [`equi_join`] gives the same pairs by hashing the
//! rows' keys, and [`equi_join_count`] counts them without building them (linear in the rows).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use gpujoin_join::predicate::{Expr, Predicate, Scalar, Side};
use gpujoin_join::table::{HostColumn, HostTable, Value};
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

/// One key value as [`key_eq`] compares it, hashable: `-0.0` as `0.0`, every NaN as one NaN
/// (only where NaN equals NaN), NULL as a value of its own (only where NULL equals NULL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum KeyValue<'a> {
    Null,
    Bool(bool),
    /// An `i128` as its low and high halves (half the alignment of `i128`).
    Int(u64, u64),
    Float(u64),
    Str(&'a [u8]),
}

/// Row `i`'s value of `c` as a [`KeyValue`], or `None` when the row matches nothing (a NULL
/// under `NullEqualsNothing`, a NaN under `NanNeverEqual`).
fn key_value<'a>(c: &'a HostColumn, i: usize, nulls: NullEquality, nans: NanEquality) -> Option<KeyValue<'a>> {
    Some(match c.value(i) {
        Value::Null if nulls == NullEquality::NullEqualsNull => KeyValue::Null,
        Value::Null => return None,
        Value::Bool(b) => KeyValue::Bool(b),
        Value::Int(x) => KeyValue::Int(x as u64, (x >> 64) as u64),
        Value::Float(x) if x.is_nan() && nans == NanEquality::NanEqualsNan => KeyValue::Float(f64::NAN.to_bits()),
        Value::Float(x) if x.is_nan() => return None,
        Value::Float(x) => KeyValue::Float(if x == 0.0 { 0 } else { x.to_bits() }),
        Value::Str(s) => KeyValue::Str(s),
    })
}

/// A fast deterministic hasher (SplitMix64's finalizer on every word); HashDoS is no concern for
/// a test reference.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, x: u64) {
        let mut z = (self.0 ^ x).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = z ^ (z >> 31);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Both tables grouped by key: the right rows of each distinct right key, and the group of every
/// left and right row (`None`: its key is in no group, or it matches nothing).
struct Groups {
    right_rows: Vec<Vec<u32>>,
    of_left: Vec<Option<usize>>,
    of_right: Vec<Option<usize>>,
}

impl Groups {
    fn build(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], nulls: NullEquality, nans: NanEquality) -> Groups {
        assert_eq!(lk.len(), rk.len(), "key columns in pairs");
        let lc: Vec<&HostColumn> = lk.iter().map(|n| l.column(n).expect("left key")).collect();
        let rc: Vec<&HostColumn> = rk.iter().map(|n| r.column(n).expect("right key")).collect();
        if lc.len() == 1 {
            // One column: the value is the whole key (no vector a row).
            Self::build_by(&lc, l.rows(), &rc, r.rows(), |cols: &[&HostColumn], i| key_value(cols[0], i, nulls, nans))
        } else {
            Self::build_by(&lc, l.rows(), &rc, r.rows(), |cols: &[&HostColumn], i| cols.iter().map(|c| key_value(c, i, nulls, nans)).collect::<Option<Vec<_>>>())
        }
    }

    fn build_by<'a, K: Hash + Eq>(lc: &[&'a HostColumn], nl: usize, rc: &[&'a HostColumn], nr: usize, key_of: impl Fn(&[&'a HostColumn], usize) -> Option<K>) -> Groups {
        let mut group_of_key: HashMap<K, usize, BuildHasherDefault<KeyHasher>> = HashMap::with_capacity_and_hasher(nr, BuildHasherDefault::default());
        let mut right_rows: Vec<Vec<u32>> = Vec::new();
        let of_right = (0..nr)
            .map(|j| {
                let key = key_of(rc, j)?;
                let next = right_rows.len();
                let g = *group_of_key.entry(key).or_insert(next);
                if g == next {
                    right_rows.push(Vec::new());
                }
                right_rows[g].push(j as u32);
                Some(g)
            })
            .collect();
        let of_left = (0..nl).map(|i| group_of_key.get(&key_of(lc, i)?).copied()).collect();
        Groups { right_rows, of_left, of_right }
    }

    /// Sends the join's output to `sink`: each left row's matches (or the row alone where the
    /// join type keeps it), then the right rows the join type keeps alone.
    fn walk(&self, jt: JoinType, sink: &mut impl FnMut(Option<u32>, &[u32], Option<u32>)) {
        let mut matched = vec![false; self.right_rows.len()];
        for (i, &g) in self.of_left.iter().enumerate() {
            if let Some(g) = g {
                matched[g] = true;
            }
            let rights: &[u32] = g.map_or(&[], |g| &self.right_rows[g]);
            let i = Some(i as u32);
            match jt {
                JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                    sink(i, rights, None);
                    if rights.is_empty() && matches!(jt, JoinType::Left | JoinType::Full) {
                        sink(i, &[], Some(u32::MAX));
                    }
                }
                JoinType::LeftSemi if !rights.is_empty() => sink(i, &[], Some(u32::MAX)),
                JoinType::LeftAnti if rights.is_empty() => sink(i, &[], Some(u32::MAX)),
                _ => {}
            }
        }
        for (j, g) in self.of_right.iter().enumerate() {
            let m = g.is_some_and(|g| matched[g]);
            let keep = match jt {
                JoinType::Right | JoinType::Full | JoinType::RightAnti => !m,
                JoinType::RightSemi => m,
                _ => false,
            };
            if keep {
                sink(None, &[j as u32], None);
            }
        }
    }
}

/// The same pairs as [`join`] without a filter, by hashing the rows' keys (right rows grouped by
/// key, left rows looked up): linear in the rows and the output, for inputs too large for the
/// quadratic [`join`].
///
/// ```
/// use gpujoin_join::table::{HostColumn, HostTable};
/// use gpujoin_join::{JoinType, NanEquality, NullEquality};
/// use gpujoin_testkit::table_reference::{equi_join, equi_join_count, join};
/// let l = HostTable::new(vec![("k", HostColumn::from_values(vec![1.0f64, -0.0, f64::NAN]))])?;
/// let r = HostTable::new(vec![("k", HostColumn::from_values(vec![0.0f64, f64::NAN, 2.0]))])?;
/// let (nulls, nans) = (NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
/// let pairs = equi_join(&l, &["k"], &r, &["k"], JoinType::Full, nulls, nans);
/// assert_eq!(pairs, [(None, Some(2)), (Some(0), None), (Some(1), Some(0)), (Some(2), Some(1))]);
/// assert_eq!(pairs, join(&l, &["k"], &r, &["k"], None, JoinType::Full, nulls, nans));
/// assert_eq!(equi_join_count(&l, &["k"], &r, &["k"], JoinType::Full, nulls, nans), 4);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn equi_join(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], jt: JoinType, nulls: NullEquality, nans: NanEquality) -> Vec<(Option<u32>, Option<u32>)> {
    let groups = Groups::build(l, lk, r, rk, nulls, nans);
    let mut pairs = Vec::new();
    groups.walk(jt, &mut |i, rights, alone| match (i, alone) {
        (Some(i), None) => pairs.extend(rights.iter().map(|&j| (Some(i), Some(j)))),
        (Some(i), Some(_)) => pairs.push((Some(i), None)),
        (None, _) => pairs.extend(rights.iter().map(|&j| (None, Some(j)))),
    });
    pairs.sort_unstable();
    pairs
}

/// The number of pairs [`equi_join`] gives, counted without building them (a key on `a` left and
/// `b` right rows adds `a * b` at once).
pub fn equi_join_count(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], jt: JoinType, nulls: NullEquality, nans: NanEquality) -> u64 {
    let groups = Groups::build(l, lk, r, rk, nulls, nans);
    let mut rows = 0u64;
    groups.walk(jt, &mut |_, rights, alone| rows += if alone.is_some() { 1 } else { rights.len() as u64 });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A random key column of `kind` (0: Int32, 1: Float64 with NaN, -0.0 and infinities, 2:
    /// Utf8, 3: Boolean, 4: Decimal128), a third of its tables with nulls.
    fn column(rng: &mut StdRng, kind: u8, n: usize, nullable: bool) -> HostColumn {
        let valid: Vec<bool> = (0..n).map(|_| !nullable || rng.gen_ratio(3, 4)).collect();
        let c = match kind {
            0 => HostColumn::from_values((0..n).map(|_| rng.gen_range(-2..3i32)).collect()),
            1 => {
                const F: [f64; 6] = [0.0, -0.0, f64::NAN, 1.5, f64::INFINITY, f64::NEG_INFINITY];
                HostColumn::from_values((0..n).map(|_| if rng.gen_ratio(1, 8) { -f64::NAN } else { F[rng.gen_range(0..F.len())] }).collect())
            }
            2 => HostColumn::utf8((0..n).map(|_| ["", "a", "ab", "b"][rng.gen_range(0..4)])),
            3 => HostColumn::from_bools(&(0..n).map(|_| rng.gen_bool(0.5)).collect::<Vec<_>>()),
            _ => HostColumn::from_values((0..n).map(|_| [i128::MIN, -1, 0, 1 << 70][rng.gen_range(0..4)]).collect()),
        };
        if nullable {
            c.with_validity(&valid).unwrap()
        } else {
            c
        }
    }

    #[test]
    fn equi_join_agrees_with_the_quadratic_join() {
        let mut rng = StdRng::seed_from_u64(0x7AB1_E001);
        for case in 0..300 {
            let ncols = rng.gen_range(1..=3);
            let kinds: Vec<u8> = (0..ncols).map(|_| rng.gen_range(0..5)).collect();
            let (nl, nr) = (rng.gen_range(0..25), rng.gen_range(0..25));
            let names: Vec<String> = (0..ncols).map(|c| format!("k{c}")).collect();
            let table = |rng: &mut StdRng, n| HostTable::new(names.iter().zip(&kinds).map(|(name, &k)| {
                let nullable = rng.gen_ratio(1, 3);
                (name.clone(), column(rng, k, n, nullable))
            }).collect()).unwrap();
            let (l, r) = (table(&mut rng, nl), table(&mut rng, nr));
            let on: Vec<&str> = names.iter().map(String::as_str).collect();
            for jt in JoinType::ALL {
                for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                    for nans in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
                        let want = join(&l, &on, &r, &on, None, jt, nulls, nans);
                        assert_eq!(equi_join(&l, &on, &r, &on, jt, nulls, nans), want, "case {case} {jt:?} {nulls:?} {nans:?}\n{l}\n{r}");
                        assert_eq!(equi_join_count(&l, &on, &r, &on, jt, nulls, nans), want.len() as u64, "case {case} {jt:?} {nulls:?} {nans:?}");
                    }
                }
            }
        }
    }
}
