//! GPU tests of the indexed nested-loop join (`gpujoin_join::indexed_nested_loop`) against CPU
//! references, every key type, every join type, both index sides.
//!
//! The reference here ([`expected`]) follows `predicate.rs`'s `=`: integers by value, floats by
//! IEEE `==` (`-0.0 == 0.0`, NaN equals nothing), strings by their bytes. It produces the
//! module's documented output order (probe rows ascending, index rows ascending within a probe
//! row, unmatched probe rows in place, unmatched index rows appended ascending; semi/anti rows
//! ascending), so outputs are compared in order, not only as multisets. For numeric keys it is
//! itself cross-checked against `reference::join` (hash join, `NanNeverEqual`) as a multiset.
//!
//! Seeds are fixed; the device pool is poisoned before every join so unwritten output shows.
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer cases and 2^13-row larger joins.

mod common;
use common::{canonical_pairs, diff, fail, stream};

use std::collections::HashMap;

use gpujoin_device::testing::{cases, reduced, rows};
use gpujoin_device::{DeviceBuffer, Error, Stream};
use gpujoin_join::device_relation::DeviceColumnData;
use gpujoin_join::indexed_nested_loop::{indexed_nested_loop_join, indexed_nested_loop_join_size, SortedIndex};
use gpujoin_join::predicate::ColumnData;
use gpujoin_join::{HostColumn, HostKeys, JoinOptions, JoinType, NanEquality, NullEquality, RowId, Side};
use gpujoin_testkit::reference;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const POISON: u8 = 0xAB;
const SIDES: [Side; 2] = [Side::Left, Side::Right];

fn poison(s: &Stream, rows: usize) {
    let mut b: DeviceBuffer<u8> = s.alloc(rows * 48 + (1 << 16)).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
}

fn id(i: usize) -> RowId {
    RowId::new(i as u32).unwrap()
}

fn other(side: Side) -> Side {
    if side == Side::Left { Side::Right } else { Side::Left }
}

// ---------------------------------------------------------------------------------------------
// CPU reference
// ---------------------------------------------------------------------------------------------

/// A key under `=`: `None` for NaN (equals nothing); floats with `-0.0` folded into `0.0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key<'a> {
    Int(i128),
    Float(u64),
    Str(&'a [u8]),
}

fn key(c: &ColumnData, i: usize) -> Option<Key<'_>> {
    let float = |x: f64| if x.is_nan() { None } else { Some(Key::Float(if x == 0.0 { 0 } else { x.to_bits() })) };
    match c {
        ColumnData::I32(v) => Some(Key::Int(v[i] as i128)),
        ColumnData::I64(v) => Some(Key::Int(v[i] as i128)),
        ColumnData::U32(v) => Some(Key::Int(v[i] as i128)),
        ColumnData::U64(v) => Some(Key::Int(v[i] as i128)),
        ColumnData::F32(v) => float(v[i] as f64), // exact widening: equal f32s give equal f64s
        ColumnData::F64(v) => float(v[i]),
        ColumnData::Utf8 { .. } => Some(Key::Str(c.str_bytes(i).unwrap())),
    }
}

/// A row's key, `None` where it is NaN or null (`valid[i]` false): it equals nothing.
fn key_v<'a>(c: &'a ColumnData, valid: Option<&[bool]>, i: usize) -> Option<Key<'a>> {
    if valid.is_some_and(|v| !v[i]) {
        return None;
    }
    key(c, i)
}

/// The join of `left` and `right` with the `index_side` indexed, in the documented order.
fn expected(left: &ColumnData, right: &ColumnData, jt: JoinType, index_side: Side) -> Vec<(RowId, RowId)> {
    expected_v(left, None, right, None, jt, index_side)
}

/// [`expected`] with validities (`None`: all valid): null keys equal nothing (NullEqualsNothing).
fn expected_v(left: &ColumnData, lv: Option<&[bool]>, right: &ColumnData, rv: Option<&[bool]>, jt: JoinType, index_side: Side) -> Vec<(RowId, RowId)> {
    let (index, probe) = if index_side == Side::Left { (left, right) } else { (right, left) };
    let (index_v, probe_v) = if index_side == Side::Left { (lv, rv) } else { (rv, lv) };
    let probe_side = other(index_side);
    let mut by_key: HashMap<Key, Vec<usize>> = HashMap::new();
    for j in 0..index.len() {
        if let Some(k) = key_v(index, index_v, j) {
            by_key.entry(k).or_default().push(j);
        }
    }
    let mut index_hit = vec![false; index.len()];
    let mut probe_hit = vec![false; probe.len()];
    let mut pairs_in_probe_order = Vec::new();
    let (keep_l, keep_r) = (jt.keeps_unmatched_left(), jt.keeps_unmatched_right());
    let (keep_probe, keep_index) = if probe_side == Side::Left { (keep_l, keep_r) } else { (keep_r, keep_l) };
    let orient = |p: RowId, x: RowId| if probe_side == Side::Left { (p, x) } else { (x, p) };
    for (i, hit) in probe_hit.iter_mut().enumerate() {
        let matches = key_v(probe, probe_v, i).and_then(|k| by_key.get(&k));
        match matches {
            Some(rows) => {
                *hit = true;
                for &j in rows {
                    index_hit[j] = true;
                    pairs_in_probe_order.push(orient(id(i), id(j)));
                }
            }
            None if keep_probe => pairs_in_probe_order.push(orient(id(i), RowId::NONE)),
            None => {}
        }
    }
    let rows_where = |hits: &[bool], want: bool, side: Side| -> Vec<(RowId, RowId)> {
        hits.iter()
            .enumerate()
            .filter(|(_, &h)| h == want)
            .map(|(r, _)| if side == Side::Left { (id(r), RowId::NONE) } else { (RowId::NONE, id(r)) })
            .collect()
    };
    let (left_hits, right_hits) = if probe_side == Side::Left { (&probe_hit, &index_hit) } else { (&index_hit, &probe_hit) };
    match jt {
        JoinType::LeftSemi => rows_where(left_hits, true, Side::Left),
        JoinType::LeftAnti => rows_where(left_hits, false, Side::Left),
        JoinType::RightSemi => rows_where(right_hits, true, Side::Right),
        JoinType::RightAnti => rows_where(right_hits, false, Side::Right),
        _ => {
            let mut out = pairs_in_probe_order;
            if keep_index {
                out.extend(rows_where(&index_hit, false, index_side));
            }
            out
        }
    }
}

fn host_keys(c: &ColumnData) -> Option<HostKeys> {
    Some(HostKeys::single(match c {
        ColumnData::I32(v) => HostColumn::I32(v.clone()),
        ColumnData::I64(v) => HostColumn::I64(v.clone()),
        ColumnData::U32(v) => HostColumn::U32(v.clone()),
        ColumnData::U64(v) => HostColumn::U64(v.clone()),
        ColumnData::F32(v) => HostColumn::F32(v.clone()),
        ColumnData::F64(v) => HostColumn::F64(v.clone()),
        ColumnData::Utf8 { .. } => return None,
    }))
}

/// For numeric keys: the test reference agrees with the crate's hash-join reference.
fn cross_check_reference(left: &ColumnData, right: &ColumnData, jt: JoinType, want: &[(RowId, RowId)]) -> Result<(), TestCaseError> {
    cross_check_reference_v(left, None, right, None, jt, want)
}

/// [`cross_check_reference`] with validities (NullEqualsNothing).
fn cross_check_reference_v(left: &ColumnData, lv: Option<&[bool]>, right: &ColumnData, rv: Option<&[bool]>, jt: JoinType, want: &[(RowId, RowId)]) -> Result<(), TestCaseError> {
    let (Some(mut l), Some(mut r)) = (host_keys(left), host_keys(right)) else { return Ok(()) };
    l.validity = vec![lv.map(<[bool]>::to_vec)];
    r.validity = vec![rv.map(<[bool]>::to_vec)];
    let opts = JoinOptions { null_equality: NullEquality::NullEqualsNothing, nan_equality: NanEquality::NanNeverEqual, ..JoinOptions::DEFAULT };
    let crate_ref = reference::join(&l, &r, jt, opts).unwrap();
    let mut mine = want.to_vec();
    reference::sort_pairs(&mut mine);
    if mine != crate_ref {
        return Err(fail(format!("test reference disagrees with reference::join for {jt:?}: {}", diff(&mine, &crate_ref))));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Running and checking
// ---------------------------------------------------------------------------------------------

fn describe(l: &ColumnData, r: &ColumnData) -> String {
    if l.len() + r.len() <= 24 {
        format!("\nleft {l:?}\nright {r:?}")
    } else {
        format!(" ({:?}, {} x {} rows)", l.data_type(), l.len(), r.len())
    }
}

/// Checks maps against the expected output: shape, `rows()`, and the exact order.
fn check_maps(maps: &gpujoin_join::GatherMaps, want: &[(RowId, RowId)], jt: JoinType, what: &str) -> Result<(), TestCaseError> {
    canonical_pairs(maps, jt)?; // shape and rows()
    let got = maps.pairs().map_err(|e| fail(format!("{what}: reading the maps: {e}")))?;
    if got != want {
        let (mut gs, mut ws) = (got.clone(), want.to_vec());
        reference::sort_pairs(&mut gs);
        reference::sort_pairs(&mut ws);
        if gs == ws {
            let k = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
            return Err(fail(format!("{what}: right rows, wrong order: at output row {k}: {:?} instead of {:?}", got.get(k), want.get(k))));
        }
        return Err(fail(format!("{what}: {}", diff(&gs, &ws))));
    }
    Ok(())
}

thread_local! {
    static ROTATION: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The join types one check covers: all eight normally; under `GPUJOIN_TEST_SIZE=small` two,
/// rotating from check to check of the test's thread, so that any four consecutive checks
/// cover all eight (a sanitizer run cannot afford every input times every join type).
fn join_types() -> Vec<JoinType> {
    if !reduced() {
        return JoinType::ALL.to_vec();
    }
    let i = ROTATION.with(|r| r.replace(r.get() + 1));
    vec![JoinType::ALL[i % 8], JoinType::ALL[(i + 5) % 8]]
}

/// Every join type, both index sides: one index per side reused for all join types (and the
/// size calls), plus the free functions for one join type (reduced: see [`join_types`]).
fn check_all(s: &Stream, left: &ColumnData, right: &ColumnData) -> Result<(), TestCaseError> {
    let (dl, dr) = (DeviceColumnData::upload(s, left).unwrap(), DeviceColumnData::upload(s, right).unwrap());
    let what0 = describe(left, right);
    for index_side in SIDES {
        let (indexed, probe) = if index_side == Side::Left { (&dl, &dr) } else { (&dr, &dl) };
        poison(s, left.len() + right.len());
        let index = SortedIndex::build(s, indexed).map_err(|e| fail(format!("build: {e}{what0}")))?;
        let n_nan = (0..indexed.len()).filter(|&j| key(if index_side == Side::Left { left } else { right }, j).is_none()).count();
        prop_assert_eq!(index.entries(), indexed.len() - n_nan, "entries{}", what0);
        for jt in join_types() {
            let what = format!("{jt:?}, index {index_side:?}{what0}");
            let want = expected(left, right, jt, index_side);
            if index_side == Side::Right {
                cross_check_reference(left, right, jt, &want)?;
            }
            poison(s, want.len() + left.len() + right.len());
            let maps = index.join(s, probe, other(index_side), jt).map_err(|e| fail(format!("{what}: {e}")))?;
            check_maps(&maps, &want, jt, &what)?;
            poison(s, left.len() + right.len());
            let size = index.join_size(s, probe, other(index_side), jt).map_err(|e| fail(format!("{what}: size: {e}")))?;
            prop_assert_eq!(size, want.len() as u64, "join_size {}", what);
        }
        let jt = if index_side == Side::Left { JoinType::Full } else { JoinType::Left };
        let maps = indexed_nested_loop_join(s, &dl, &dr, jt, index_side).map_err(|e| fail(format!("free fn: {e}")))?;
        check_maps(&maps, &expected(left, right, jt, index_side), jt, &format!("indexed_nested_loop_join {jt:?} {index_side:?}{what0}"))?;
        let size = indexed_nested_loop_join_size(s, &dl, &dr, jt, index_side).unwrap();
        prop_assert_eq!(size, maps.rows());
    }
    Ok(())
}

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, max_shrink_iters: 32, ..Config::default() });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    Utf8,
}
const TYPES: [Ty; 7] = [Ty::I32, Ty::I64, Ty::U32, Ty::U64, Ty::F32, Ty::F64, Ty::Utf8];

/// The string of code `k`: empty, short, shared prefixes of 7, 8 and 9 bytes, longer than 64
/// bytes, non-ASCII, embedded NUL, proper prefixes of each other.
fn string_of(k: u64) -> String {
    match k % 9 {
        0 if k < 9 => String::new(),
        0 => format!("{}", k),
        1 => format!("k{k}"),
        2 => format!("pre_fix{k:03}"),   // 7-byte shared prefix
        3 => format!("prefix8_{k}"),    // 8-byte shared prefix
        4 => format!("{}{k}", "long-shared-prefix/".repeat(4)), // > 64 bytes
        5 => format!("é{k}ü日本"),
        6 => format!("a{}", "b".repeat((k % 40) as usize)), // proper prefixes of each other
        7 => format!("nul\0{k}"),
        _ => format!("{}{}", "z".repeat(70), k % 13), // long, duplicates beyond byte 64
    }
}

/// A column of `ty` from codes: equal codes give equal keys; some codes give special values
/// (NaN, ±inf, -0.0 / 0.0, integer extremes).
fn column(ty: Ty, codes: &[u64]) -> ColumnData {
    let f = |k: u64| -> f64 {
        match k % 13 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => -0.0,
            4 => 0.0,
            _ => (k as f64 - 500.0) * 0.5,
        }
    };
    match ty {
        Ty::I32 => ColumnData::I32(codes.iter().map(|&k| if k % 17 == 1 { i32::MIN } else if k % 17 == 2 { i32::MAX } else { k as i32 - 300 }).collect()),
        Ty::I64 => ColumnData::I64(codes.iter().map(|&k| if k % 17 == 1 { i64::MIN } else if k % 17 == 2 { i64::MAX } else { (k as i64 - 300) << 33 }).collect()),
        Ty::U32 => ColumnData::U32(codes.iter().map(|&k| if k % 17 == 1 { u32::MAX } else { k as u32 }).collect()),
        Ty::U64 => ColumnData::U64(codes.iter().map(|&k| if k % 17 == 1 { u64::MAX } else { k.wrapping_mul(0x9E37_79B9_7F4A_7C15) }).collect()),
        Ty::F32 => ColumnData::F32(codes.iter().map(|&k| f(k) as f32).collect()),
        Ty::F64 => ColumnData::F64(codes.iter().map(|&k| f(k)).collect()),
        Ty::Utf8 => ColumnData::utf8(codes.iter().map(|&k| string_of(k))),
    }
}

#[derive(Debug, Clone, Copy)]
enum Dist {
    Uniform,
    /// Most rows on a few keys.
    Skewed,
    /// Every row the same key.
    OneKey,
    /// Left even codes, right odd codes.
    Disjoint,
}

fn codes(rng: &mut StdRng, n: usize, domain: u64, dist: Dist, right: bool) -> Vec<u64> {
    (0..n)
        .map(|_| match dist {
            Dist::Uniform => rng.gen_range(0..domain),
            Dist::Skewed => (rng.gen::<f64>().powi(6) * domain as f64) as u64,
            Dist::OneKey => 7,
            Dist::Disjoint => 2 * rng.gen_range(0..domain) + right as u64,
        })
        .collect()
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..3, 3usize..80, 80usize..700, 1000usize..2500]
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn random_columns_every_type_join_and_side() {
    let Some(s) = stream("random_columns_every_type_join_and_side") else { return };
    let dist = prop_oneof![Just(Dist::Uniform), Just(Dist::Skewed), Just(Dist::OneKey), Just(Dist::Disjoint)];
    let domain = prop_oneof![1u64..4, 4u64..64, 64u64..5000];
    let strat = (0usize..TYPES.len(), size(), size(), domain, dist, any::<u64>());
    run(cases(32, 8), 0x1A1F_0003, strat, |(t, nl, nr, domain, dist, seed)| {
        let mut rng = StdRng::seed_from_u64(seed);
        // Keep the all-duplicate products modest.
        let cap = match dist {
            Dist::OneKey => 600,
            Dist::Skewed => 1500,
            _ if domain < 64 => 1500,
            _ => usize::MAX,
        };
        let (nl, nr) = (nl.min(cap), nr.min(cap));
        let l = column(TYPES[t], &codes(&mut rng, nl, domain, dist, false));
        let r = column(TYPES[t], &codes(&mut rng, nr, domain, dist, true));
        check_all(&s, &l, &r)
    });
}

#[test]
fn sizes_zero_one_and_odd_for_every_type() {
    let Some(s) = stream("sizes_zero_one_and_odd_for_every_type") else { return };
    let mut rng = StdRng::seed_from_u64(5);
    for ty in TYPES {
        for (nl, nr) in [(0, 0), (0, 1), (1, 0), (1, 1), (0, 7), (7, 0), (1, 513), (513, 1), (257, 1023)] {
            let l = column(ty, &codes(&mut rng, nl, 9, Dist::Uniform, false));
            let r = column(ty, &codes(&mut rng, nr, 9, Dist::Uniform, false));
            check_all(&s, &l, &r).unwrap_or_else(|e| panic!("{ty:?} {nl} x {nr}: {e}"));
        }
    }
}

#[test]
fn float_special_values() {
    let Some(s) = stream("float_special_values") else { return };
    let (nan, inf) = (f64::NAN, f64::INFINITY);
    let l = vec![nan, -0.0, 0.0, inf, -inf, 1.5, nan, -1.5, f64::MIN_POSITIVE, f64::MAX];
    let r = vec![0.0, nan, inf, inf, -0.0, -inf, 2.5, -nan, f64::MAX, 1.5];
    check_all(&s, &ColumnData::F64(l.clone()), &ColumnData::F64(r.clone())).unwrap();
    let f = |v: &[f64]| ColumnData::F32(v.iter().map(|&x| x as f32).collect());
    check_all(&s, &f(&l), &f(&r)).unwrap();
    // Spot checks against hand-written answers (index on the right, probe order).
    let (dl, dr) = (DeviceColumnData::upload(&s, &ColumnData::F64(l)).unwrap(), DeviceColumnData::upload(&s, &ColumnData::F64(r)).unwrap());
    let pairs = indexed_nested_loop_join(&s, &dl, &dr, JoinType::Inner, Side::Right).unwrap().pairs().unwrap();
    let want = [(1, 0), (1, 4), (2, 0), (2, 4), (3, 2), (3, 3), (4, 5), (5, 9), (9, 8)];
    assert_eq!(pairs, want.iter().map(|&(a, b)| (id(a), id(b))).collect::<Vec<_>>());
    // An all-NaN index: no entries, everything unmatched.
    let nans = DeviceColumnData::upload(&s, &ColumnData::F32(vec![f32::NAN; 5])).unwrap();
    let index = SortedIndex::build(&s, &nans).unwrap();
    assert_eq!(index.entries(), 0);
    assert_eq!(index.join_size(&s, &nans, Side::Left, JoinType::Full).unwrap(), 10);
}

#[test]
fn string_edge_cases() {
    let Some(s) = stream("string_edge_cases") else { return };
    let long = "x".repeat(100);
    let l = ColumnData::utf8([
        "", "a", "a\0", "ab", "abcdefgh", "abcdefg", "abcdefghi", "abcdefgh\0", "é", "z", "", "日本語",
        &format!("{long}1"), &format!("{long}2"), &long, "ab", "ABCDEFGH",
    ]);
    let r = ColumnData::utf8([
        "ab", "", "abcdefghi", "é", &format!("{long}2"), "abcdefgh", "e\u{301}", "a", &long, "日本", "z", "abcdefgh\0", "",
    ]);
    check_all(&s, &l, &r).unwrap();
    // The index order is byte-wise, ties by row.
    let d = DeviceColumnData::upload(&s, &l).unwrap();
    let index = SortedIndex::build(&s, &d).unwrap();
    let got: Vec<usize> = s.copy_to_host(&index.sorted_rows()).unwrap().iter().map(|r| r.get().unwrap() as usize).collect();
    let mut want: Vec<usize> = (0..l.len()).collect();
    want.sort_by(|&a, &b| l.str_bytes(a).unwrap().cmp(l.str_bytes(b).unwrap()).then(a.cmp(&b)));
    assert_eq!(got, want);
}

#[test]
fn index_order_for_every_type() {
    let Some(s) = stream("index_order_for_every_type") else { return };
    let mut rng = StdRng::seed_from_u64(77);
    for ty in TYPES {
        let c = column(ty, &codes(&mut rng, 3001, 200, Dist::Uniform, false));
        let d = DeviceColumnData::upload(&s, &c).unwrap();
        poison(&s, 3001);
        let index = SortedIndex::build(&s, &d).unwrap();
        let got: Vec<usize> = s.copy_to_host(&index.sorted_rows()).unwrap().iter().map(|r| r.get().unwrap() as usize).collect();
        // Sorted by key (NaN rows left out), ties in row order: keys must not decrease and the
        // rows of a key must ascend; every non-NaN row exactly once.
        let mut seen: Vec<usize> = got.clone();
        seen.sort_unstable();
        let want: Vec<usize> = (0..c.len()).filter(|&j| key(&c, j).is_some()).collect();
        assert_eq!(seen, want, "{ty:?}: index rows");
        let cmp = |a: usize, b: usize| match (&c, key(&c, a).unwrap(), key(&c, b).unwrap()) {
            (ColumnData::F32(v), _, _) => (v[a] + 0.0).partial_cmp(&(v[b] + 0.0)).unwrap(),
            (ColumnData::F64(v), _, _) => (v[a] + 0.0).partial_cmp(&(v[b] + 0.0)).unwrap(),
            (_, Key::Int(x), Key::Int(y)) => x.cmp(&y),
            (_, Key::Str(x), Key::Str(y)) => x.cmp(y),
            _ => unreachable!(),
        };
        for w in got.windows(2) {
            let o = cmp(w[0], w[1]);
            assert!(o.is_lt() || (o.is_eq() && w[0] < w[1]), "{ty:?}: rows {} then {} out of order", w[0], w[1]);
        }
    }
}

#[test]
fn index_reused_for_two_probes() {
    let Some(s) = stream("index_reused_for_two_probes") else { return };
    let mut rng = StdRng::seed_from_u64(9);
    for ty in [Ty::U32, Ty::F64, Ty::Utf8] {
        let x = column(ty, &codes(&mut rng, 1500, 300, Dist::Uniform, false));
        let p1 = column(ty, &codes(&mut rng, 900, 300, Dist::Skewed, false));
        let p2 = column(ty, &codes(&mut rng, 2100, 600, Dist::Uniform, false));
        let (dx, d1, d2) = (DeviceColumnData::upload(&s, &x).unwrap(), DeviceColumnData::upload(&s, &p1).unwrap(), DeviceColumnData::upload(&s, &p2).unwrap());
        let index = SortedIndex::build(&s, &dx).unwrap();
        for (p, dp) in [(&p1, &d1), (&p2, &d2), (&p1, &d1)] {
            for jt in [JoinType::Inner, JoinType::Full, JoinType::RightAnti] {
                poison(&s, 5000);
                let maps = index.join(&s, dp, Side::Left, jt).unwrap();
                check_maps(&maps, &expected(p, &x, jt, Side::Right), jt, &format!("{ty:?} {jt:?} reuse")).unwrap();
            }
        }
    }
}

#[test]
fn larger_joins_size_equals_rows() {
    let Some(s) = stream("larger_joins_size_equals_rows") else { return };
    let mut rng = StdRng::seed_from_u64(2024);
    for ty in [Ty::U32, Ty::I64, Ty::F32, Ty::Utf8] {
        let n = rows(1 << 16, 1 << 13);
        let x = column(ty, &codes(&mut rng, n, n as u64 / 2, Dist::Uniform, false));
        let p = column(ty, &codes(&mut rng, n + 3, n as u64 / 2, Dist::Skewed, false));
        let (dx, dp) = (DeviceColumnData::upload(&s, &x).unwrap(), DeviceColumnData::upload(&s, &p).unwrap());
        let index = SortedIndex::build(&s, &dx).unwrap();
        for jt in [JoinType::Inner, JoinType::Left, JoinType::Full, JoinType::LeftAnti, JoinType::RightSemi] {
            poison(&s, 4 * n);
            let maps = index.join(&s, &dp, Side::Left, jt).unwrap();
            check_maps(&maps, &expected(&p, &x, jt, Side::Right), jt, &format!("{ty:?} {jt:?} {n} rows")).unwrap();
            assert_eq!(index.join_size(&s, &dp, Side::Left, jt).unwrap(), maps.rows());
        }
    }
}

#[test]
fn all_duplicate_keys() {
    let Some(s) = stream("all_duplicate_keys") else { return };
    for ty in [Ty::I32, Ty::Utf8] {
        let x = column(ty, &vec![4; 1200]);
        let p = column(ty, &vec![4; 1199]);
        check_all(&s, &p, &x).unwrap();
    }
}

#[test]
fn type_mismatch_is_invalid_argument() {
    let Some(s) = stream("type_mismatch_is_invalid_argument") else { return };
    let a = DeviceColumnData::upload(&s, &ColumnData::I32(vec![1, 2])).unwrap();
    let b = DeviceColumnData::upload(&s, &ColumnData::I64(vec![1, 2])).unwrap();
    let c = DeviceColumnData::upload(&s, &ColumnData::utf8(["1"])).unwrap();
    for (l, r) in [(&a, &b), (&b, &a), (&a, &c), (&c, &b)] {
        for side in SIDES {
            assert!(matches!(indexed_nested_loop_join(&s, l, r, JoinType::Inner, side), Err(Error::InvalidArgument(_))));
            assert!(matches!(indexed_nested_loop_join_size(&s, l, r, JoinType::Full, side), Err(Error::InvalidArgument(_))));
        }
    }
    let index = SortedIndex::build(&s, &a).unwrap();
    assert!(matches!(index.join(&s, &c, Side::Left, JoinType::Left), Err(Error::InvalidArgument(_))));
}

/// Runs without a GPU: the test reference agrees with `reference::join` on numeric keys (so a
/// GPU failure points at the join, not at the reference), and follows the documented order.
#[test]
fn cpu_reference_agrees_with_crate_reference() {
    let mut rng = StdRng::seed_from_u64(31);
    for ty in [Ty::I32, Ty::I64, Ty::U32, Ty::U64, Ty::F32, Ty::F64] {
        for dist in [Dist::Uniform, Dist::Skewed, Dist::OneKey, Dist::Disjoint] {
            let l = column(ty, &codes(&mut rng, 300, 40, dist, false));
            let r = column(ty, &codes(&mut rng, 200, 40, dist, true));
            for jt in JoinType::ALL {
                for side in SIDES {
                    let want = expected(&l, &r, jt, side);
                    cross_check_reference(&l, &r, jt, &want).unwrap_or_else(|e| panic!("{ty:?} {dist:?} {jt:?} {side:?}: {e}"));
                    let probe_side = other(side);
                    if matches!(jt, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
                        let probe_of = |p: &(RowId, RowId)| if probe_side == Side::Left { p.0 } else { p.1 };
                        let firsts: Vec<RowId> = want.iter().map(probe_of).take_while(|x| !x.is_none()).collect();
                        assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "{ty:?} {jt:?}: probe order");
                    }
                }
            }
        }
    }
    // Strings: byte-wise equality, including NUL and non-ASCII.
    let l = ColumnData::utf8(["a", "a\0", "é", "", "e\u{301}"]);
    let r = ColumnData::utf8(["a\0", "", "é", "a"]);
    let pairs = expected(&l, &r, JoinType::Inner, Side::Right);
    assert_eq!(pairs, vec![(id(0), id(3)), (id(1), id(0)), (id(2), id(2)), (id(3), id(1))]);
}

// ---------------------------------------------------------------------------------------------
// NULL keys (NullEqualsNothing)
// ---------------------------------------------------------------------------------------------

/// Validity words: bit `i % 32` of word `i / 32` set where row `i` is valid.
fn validity_words(valid: &[bool]) -> Vec<u32> {
    let mut w = vec![0u32; valid.len().div_ceil(32)];
    for (i, &v) in valid.iter().enumerate() {
        if v {
            w[i / 32] |= 1 << (i % 32);
        }
    }
    w
}

/// Every join type (reduced: see [`join_types`]), both index sides, with validities on both
/// columns (`None`: no bitmap):
/// `build_with_validity` + `join_with_validity` / `join_size_with_validity` against
/// [`expected_v`] (cross-checked with `reference::join` for numeric keys).
fn check_all_nullable(s: &Stream, left: &ColumnData, lv: Option<&[bool]>, right: &ColumnData, rv: Option<&[bool]>) -> Result<(), TestCaseError> {
    let (dl, dr) = (DeviceColumnData::upload(s, left).unwrap(), DeviceColumnData::upload(s, right).unwrap());
    let up = |v: Option<&[bool]>| v.map(|v| s.copy_from_host(&validity_words(v)).unwrap());
    let (wl, wr) = (up(lv), up(rv));
    let what0 = format!("{}\nleft valid {lv:?}\nright valid {rv:?}", describe(left, right));
    for index_side in SIDES {
        let (indexed, probe) = if index_side == Side::Left { (&dl, &dr) } else { (&dr, &dl) };
        let (iw, pw) = if index_side == Side::Left { (&wl, &wr) } else { (&wr, &wl) };
        let (ic, iv) = if index_side == Side::Left { (left, lv) } else { (right, rv) };
        poison(s, left.len() + right.len());
        let index = SortedIndex::build_with_validity(s, indexed, iw.as_ref().map(|b| b.view())).map_err(|e| fail(format!("build: {e}{what0}")))?;
        let n_out = (0..indexed.len()).filter(|&j| key_v(ic, iv, j).is_none()).count();
        prop_assert_eq!(index.entries(), indexed.len() - n_out, "entries{}", what0);
        for jt in join_types() {
            let what = format!("{jt:?}, index {index_side:?}{what0}");
            let want = expected_v(left, lv, right, rv, jt, index_side);
            if index_side == Side::Right {
                cross_check_reference_v(left, lv, right, rv, jt, &want)?;
            }
            poison(s, want.len() + left.len() + right.len());
            let pv = pw.as_ref().map(|b| b.view());
            let maps = index.join_with_validity(s, probe, pv, other(index_side), jt).map_err(|e| fail(format!("{what}: {e}")))?;
            check_maps(&maps, &want, jt, &what)?;
            poison(s, left.len() + right.len());
            let size = index.join_size_with_validity(s, probe, pv, other(index_side), jt).map_err(|e| fail(format!("{what}: size: {e}")))?;
            prop_assert_eq!(size, want.len() as u64, "join_size {}", what);
        }
    }
    Ok(())
}

fn random_valid(rng: &mut StdRng, n: usize, null_pct: u32) -> Vec<bool> {
    (0..n).map(|_| rng.gen_range(0..100) >= null_pct).collect()
}

#[test]
fn null_keys_sizes_zero_one_odd_all_null_every_type() {
    let Some(s) = stream("null_keys_sizes_zero_one_odd_all_null_every_type") else { return };
    let mut rng = StdRng::seed_from_u64(0x9_0011);
    for (ti, ty) in TYPES.into_iter().enumerate() {
        for (si, (nl, nr)) in [(0, 0), (0, 1), (1, 0), (1, 1), (0, 7), (7, 0), (1, 513), (513, 1), (257, 1023), (33, 65)].into_iter().enumerate() {
            let l = column(ty, &codes(&mut rng, nl, 9, Dist::Uniform, false));
            let r = column(ty, &codes(&mut rng, nr, 9, Dist::Uniform, false));
            // Reduced: two of the five null mixes a size, rotating.
            let mixes = [(30, 30), (100, 0), (0, 100), (100, 100), (50, 101)];
            let k = (ti + si) % 5;
            let mixes: Vec<(u32, u32)> = if reduced() { vec![mixes[k], mixes[(k + 2) % 5]] } else { mixes.to_vec() };
            for (pl, pr) in mixes {
                // 101: no bitmap on that side.
                let (vl, vr) = (random_valid(&mut rng, nl, pl), random_valid(&mut rng, nr, pr));
                let lv = (pl <= 100).then_some(vl.as_slice());
                let rv = (pr <= 100).then_some(vr.as_slice());
                check_all_nullable(&s, &l, lv, &r, rv).unwrap_or_else(|e| panic!("{ty:?} {nl} x {nr}, {pl}% / {pr}% null: {e}"));
            }
            // A bitmap without nulls behaves as none.
            check_all_nullable(&s, &l, Some(&vec![true; nl]), &r, Some(&vec![true; nr])).unwrap_or_else(|e| panic!("{ty:?} {nl} x {nr} all valid: {e}"));
        }
    }
}

#[test]
fn null_keys_random_columns() {
    let Some(s) = stream("null_keys_random_columns") else { return };
    let dist = prop_oneof![Just(Dist::Uniform), Just(Dist::Skewed), Just(Dist::OneKey)];
    let strat = (0usize..TYPES.len(), size(), size(), 1u64..200, dist, 0u32..=100, 0u32..=100, any::<u64>());
    run(cases(24, 6), 0x1A1F_0009, strat, |(t, nl, nr, domain, dist, pl, pr, seed)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let (nl, nr) = (nl.min(1500), nr.min(1500));
        let l = column(TYPES[t], &codes(&mut rng, nl, domain, dist, false));
        let r = column(TYPES[t], &codes(&mut rng, nr, domain, dist, true));
        let (vl, vr) = (random_valid(&mut rng, nl, pl), random_valid(&mut rng, nr, pr));
        check_all_nullable(&s, &l, Some(&vl), &r, Some(&vr))
    });
}

#[test]
fn null_keys_hand_written() {
    let Some(s) = stream("null_keys_hand_written") else { return };
    // Index on the right: rows 1 (null 5) and 3 (NaN) are not in the index.
    let r = ColumnData::F64(vec![5.0, 5.0, 7.0, f64::NAN, 7.0]);
    let rv = [true, false, true, true, true];
    let l = ColumnData::F64(vec![7.0, 5.0, 5.0, f64::NAN]);
    let lv = [true, true, false, true]; // left row 2 (5.0) is null
    let (dl, dr) = (DeviceColumnData::upload(&s, &l).unwrap(), DeviceColumnData::upload(&s, &r).unwrap());
    let (wl, wr) = (s.copy_from_host(&validity_words(&lv)).unwrap(), s.copy_from_host(&validity_words(&rv)).unwrap());
    let index = SortedIndex::build_with_validity(&s, &dr, Some(wr.view())).unwrap();
    assert_eq!(index.entries(), 3);
    let pairs = index.join_with_validity(&s, &dl, Some(wl.view()), Side::Left, JoinType::Full).unwrap().pairs().unwrap();
    let n = RowId::NONE;
    assert_eq!(pairs, vec![(id(0), id(2)), (id(0), id(4)), (id(1), id(0)), (id(2), n), (id(3), n), (n, id(1)), (n, id(3))]);
    // Strings, the null rows holding a value equal to a valid one.
    let r = ColumnData::utf8(["a", "a", "bb", ""]);
    let l = ColumnData::utf8(["a", "", "bb", "a"]);
    check_all_nullable(&s, &l, Some(&[true, true, false, false]), &r, Some(&[false, true, true, false])).unwrap();
    // Too short a bitmap is an InvalidArgument.
    let d = DeviceColumnData::upload(&s, &ColumnData::I32(vec![1; 33])).unwrap();
    let one = s.copy_from_host(&[u32::MAX]).unwrap();
    assert!(matches!(SortedIndex::build_with_validity(&s, &d, Some(one.view())), Err(Error::InvalidArgument(_))));
    let index = SortedIndex::build(&s, &d).unwrap();
    assert!(matches!(index.join_with_validity(&s, &d, Some(one.view()), Side::Left, JoinType::Inner), Err(Error::InvalidArgument(_))));
}

/// Runs without a GPU: with validities, the test reference agrees with `reference::join`
/// (NullEqualsNothing).
#[test]
fn cpu_reference_with_nulls_agrees_with_crate_reference() {
    let mut rng = StdRng::seed_from_u64(32);
    for ty in [Ty::I32, Ty::U64, Ty::F32, Ty::F64] {
        for (nl, nr) in [(0, 3), (1, 1), (120, 77)] {
            let l = column(ty, &codes(&mut rng, nl, 20, Dist::Uniform, false));
            let r = column(ty, &codes(&mut rng, nr, 20, Dist::Uniform, false));
            for pct in [0, 40, 100] {
                let (vl, vr) = (random_valid(&mut rng, nl, pct), random_valid(&mut rng, nr, pct));
                for jt in JoinType::ALL {
                    for side in SIDES {
                        let want = expected_v(&l, Some(&vl), &r, Some(&vr), jt, side);
                        cross_check_reference_v(&l, Some(&vl), &r, Some(&vr), jt, &want).unwrap_or_else(|e| panic!("{ty:?} {nl}x{nr} {pct}% {jt:?} {side:?}: {e}"));
                    }
                }
            }
        }
    }
}
