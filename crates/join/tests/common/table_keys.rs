//! A hash-based CPU reference over host tables (`gpujoin_join::table::HostTable`) for sizes the
//! quadratic `gpujoin_testkit::table_reference::join` cannot take, with the same semantics
//! (which the CPU tests of gpu_hash_joins.rs and gpu_inlj.rs cross-check), and helpers to read
//! front-door outputs on the host.
//!
//! Two rows match when every key column is equal: integers by value, floats by IEEE `==` with
//! `-0.0 == 0.0` and NaN equal to NaN under `NanEqualsNan` only, strings by their bytes; NULL
//! equals NULL under `NullEqualsNull` only. Pairs come back in the canonical order of
//! `reference::sort_pairs` (by left row, then right row, `RowId::NONE` last), so they compare
//! with `common::canonical_pairs` of a join's maps.
//!
//! Included with `#[path = "common/table_keys.rs"] mod table_keys;` (not through `common`).
#![allow(dead_code)]

use std::collections::HashMap;

use gpujoin_join::table::{HostColumn, HostTable, Value};
use gpujoin_join::{JoinType, NanEquality, NullEquality, RowId};

/// One key value as the reference hashes it; `None` from [`token`]: the row matches nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Tok<'a> {
    Null,
    Int(i128),
    /// The bits of a non-NaN float, `-0.0` folded into `0.0`.
    Float(u64),
    Nan,
    Bool(bool),
    Str(&'a [u8]),
}

fn token(v: Value<'_>, nulls: NullEquality, nans: NanEquality) -> Option<Tok<'_>> {
    Some(match v {
        Value::Null if nulls == NullEquality::NullEqualsNull => Tok::Null,
        Value::Null => return None,
        Value::Float(x) if x.is_nan() => {
            if nans == NanEquality::NanEqualsNan {
                Tok::Nan
            } else {
                return None;
            }
        }
        Value::Float(x) => Tok::Float(if x == 0.0 { 0 } else { x.to_bits() }),
        Value::Int(x) => Tok::Int(x),
        Value::Bool(b) => Tok::Bool(b),
        Value::Str(s) => Tok::Str(s),
    })
}

fn row_id(i: usize) -> RowId {
    RowId::new(i as u32).expect("a row id")
}

fn key_of<'a>(cols: &[&'a HostColumn], i: usize, nulls: NullEquality, nans: NanEquality) -> Option<Vec<Tok<'a>>> {
    cols.iter().map(|c| token(c.value(i), nulls, nans)).collect()
}

/// The join's pairs by hashing: each right row's key in a map, probed by every left row; then
/// the unmatched rows the join type keeps. `count_only`: no pairs, their number.
#[allow(clippy::too_many_arguments)]
fn walk(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], jt: JoinType, nulls: NullEquality, nans: NanEquality, mut out: Option<&mut Vec<(RowId, RowId)>>) -> u64 {
    assert_eq!(lk.len(), rk.len(), "key columns in pairs");
    let lc: Vec<&HostColumn> = lk.iter().map(|n| l.column(n).expect("left key")).collect();
    let rc: Vec<&HostColumn> = rk.iter().map(|n| r.column(n).expect("right key")).collect();
    for (a, b) in lc.iter().zip(&rc) {
        assert!(a.data_type().is_comparable_with(b.data_type()), "key types {} and {}", a.data_type(), b.data_type());
    }
    let mut by_key: HashMap<Vec<Tok<'_>>, Vec<usize>> = HashMap::new();
    for j in 0..r.rows() {
        if let Some(k) = key_of(&rc, j, nulls, nans) {
            by_key.entry(k).or_default().push(j);
        }
    }
    let mut right_hit = vec![false; r.rows()];
    let mut n = 0u64;
    let pairs = matches!(jt, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full);
    let mut push = |p: (RowId, RowId), n: &mut u64| {
        *n += 1;
        if let Some(o) = out.as_mut() {
            o.push(p);
        }
    };
    for i in 0..l.rows() {
        let rows = key_of(&lc, i, nulls, nans).and_then(|k| by_key.get(&k));
        match rows {
            Some(rows) => {
                for &j in rows {
                    right_hit[j] = true;
                    if pairs {
                        push((row_id(i), row_id(j)), &mut n);
                    }
                }
                if jt == JoinType::LeftSemi {
                    push((row_id(i), RowId::NONE), &mut n);
                }
            }
            None if matches!(jt, JoinType::Left | JoinType::Full | JoinType::LeftAnti) => push((row_id(i), RowId::NONE), &mut n),
            None => {}
        }
    }
    for (j, &hit) in right_hit.iter().enumerate() {
        let keep = match jt {
            JoinType::Right | JoinType::Full | JoinType::RightAnti => !hit,
            JoinType::RightSemi => hit,
            _ => false,
        };
        if keep {
            push((RowId::NONE, row_id(j)), &mut n);
        }
    }
    n
}

/// The join of `l` and `r` on the key columns `lk = rk` (pairwise) as canonical pairs.
#[allow(clippy::too_many_arguments)]
pub fn join(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], jt: JoinType, nulls: NullEquality, nans: NanEquality) -> Vec<(RowId, RowId)> {
    let mut pairs = Vec::new();
    walk(l, lk, r, rk, jt, nulls, nans, Some(&mut pairs));
    pairs.sort_unstable();
    pairs
}

/// The number of pairs [`join`] returns (a key on `a` left and `b` right rows counts `a * b`
/// one at a time: for outputs of a few million rows).
#[allow(clippy::too_many_arguments)]
pub fn join_count(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], jt: JoinType, nulls: NullEquality, nans: NanEquality) -> u64 {
    walk(l, lk, r, rk, jt, nulls, nans, None)
}

/// Canonical pairs as `table_reference::join` gives them (`None`: no row; sorted with `None`
/// first).
pub fn as_options(pairs: &[(RowId, RowId)]) -> Vec<(Option<u32>, Option<u32>)> {
    let mut v: Vec<(Option<u32>, Option<u32>)> = pairs.iter().map(|&(a, b)| (a.get(), b.get())).collect();
    v.sort_unstable();
    v
}

/// The raw little-endian bits of every row of a 4- or 8-byte column (4-byte values zero-extended),
/// whatever its validity says.
pub fn raw_bits(c: &HostColumn) -> Vec<u64> {
    let w = c.data_type().byte_width().expect("a fixed-width column");
    assert!(w == 4 || w == 8, "a 4- or 8-byte column, not {}", c.data_type());
    let b = &c.values_buffer()[c.offset() * w..(c.offset() + c.len()) * w];
    b.chunks_exact(w)
        .map(|x| if w == 4 { u32::from_le_bytes(x.try_into().unwrap()) as u64 } else { u64::from_le_bytes(x.try_into().unwrap()) })
        .collect()
}
