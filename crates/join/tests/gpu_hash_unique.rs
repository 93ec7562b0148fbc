//! The non-partitioned hash join's two build paths (`Algorithm::Hash` through the front door):
//! the unique-build table (every build row its own slot, no sort) and the sorted path it falls
//! back to when a build key repeats. The hash table's slots hold build positions and 8-bit tags
//! of the keys' hashes, so that keys of equal tags (about one in 256 slots a probe reads)
//! compare their keys in the build column; the shapes of about 3000 rows meet dozens of such
//! pairs a join. Both must give the reference's pairs in the documented order: inner pairs
//! by probe row (the larger side; the right side on ties), each with its build matches in row
//! order; then unmatched left rows, then unmatched right rows; semi and anti rows in row order.
//!
//! Shapes: unique build keys with matches, none, all; the all-ones key in the build side and only
//! in the probe side (an empty slot is all ones: it must match nothing); one repeated
//! build key among unique ones (falls back); all-equal keys; sizes 0, 1, odd and about 3000;
//! Dense unique build keys (a span of at most 8 keys a row, the `distinct` draws and the
//! `dense` shapes) take the direct-address table, sparse ones (`U64Wide`, the all-ones key) the
//! hash table; both fall back to the sorted path on a repeated key.
//! `UInt32`, `UInt64` spanning more than 2^32 (never compressed) and `UInt64` over a small span
//! above 2^40 (not compressed here either), nullable `Int32` under both
//! NULL equalities, `(Int64, Int64)` (hashed to 64 bits, candidates verified) and `Float64` with
//! NaN and -0.0. Order is checked exactly where no key can be set aside (no nulls, no NaN).

mod common;

use common::stream;
use gpujoin_device::testing::pick;
use gpujoin_device::Stream;
use gpujoin_join::plan::{Algorithm, Join};
use gpujoin_join::table::{HostColumn, HostTable, Table};
use gpujoin_join::{JoinType, NanEquality, NullEquality, RowId, TestingOptions, UniqueBuildTable};
use gpujoin_testkit::table_reference;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const JOIN_TYPES: [JoinType; 8] = JoinType::ALL;


#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    U32,
    U64Wide,
    /// `2^40 + draw`: 8-byte keys over a small span (dense: the direct-address table).
    U64Dense,
    NullableI32,
    I64Pair,
    F64,
}

/// Key columns named `k` (and `k2`) from draws: `u64::MAX` draws become the type's all-ones key
/// (`u32::MAX`, `u64::MAX`; for the other kinds just a large value), `None` a null (nullable kind
/// only; the others use a fixed value).
fn table(kind: Kind, draws: &[Option<u64>]) -> HostTable {
    let v = |d: &Option<u64>| d.unwrap_or(7);
    let cols = match kind {
        Kind::U32 => vec![("k", HostColumn::from_values(draws.iter().map(|d| if v(d) == u64::MAX { u32::MAX } else { v(d) as u32 }).collect::<Vec<u32>>()))],
        Kind::U64Wide => vec![("k", HostColumn::from_values(draws.iter().map(|d| if v(d) == u64::MAX { u64::MAX } else { v(d) * 0x1_0000_0001 }).collect::<Vec<u64>>()))],
        Kind::U64Dense => vec![("k", HostColumn::from_values(draws.iter().map(|d| if v(d) == u64::MAX { u64::MAX } else { (1u64 << 40) + v(d) }).collect::<Vec<u64>>()))],
        Kind::NullableI32 => vec![("k", HostColumn::from_options(draws.iter().map(|d| d.map(|x| if x == u64::MAX { -1 } else { x as i32 })).collect::<Vec<Option<i32>>>()))],
        Kind::I64Pair => vec![
            ("k", HostColumn::from_values(draws.iter().map(|d| (v(d) % 5) as i64 - 2).collect::<Vec<i64>>())),
            ("k2", HostColumn::from_values(draws.iter().map(|d| (v(d) / 5) as i64 * 0x7_0000_0001).collect::<Vec<i64>>())),
        ],
        Kind::F64 => vec![(
            "k",
            HostColumn::from_values(
                draws
                    .iter()
                    .map(|d| match v(d) {
                        0 => -0.0,
                        1 => f64::NAN,
                        u64::MAX => f64::INFINITY,
                        x => x as f64 * 0.5,
                    })
                    .collect::<Vec<f64>>(),
            ),
        )],
    };
    HostTable::new(cols).unwrap()
}

fn names(kind: Kind) -> &'static [&'static str] {
    if kind == Kind::I64Pair {
        &["k", "k2"]
    } else {
        &["k"]
    }
}

/// The documented order of the reference's pairs: inner pairs by probe row, then unmatched left
/// rows, then unmatched right rows (semi/anti: row order, as the reference gives them).
fn documented_order(pairs: &[(Option<u32>, Option<u32>)], build_left: bool) -> Vec<(Option<u32>, Option<u32>)> {
    let mut inner: Vec<_> = pairs.iter().copied().filter(|p| p.0.is_some() && p.1.is_some()).collect();
    if build_left {
        inner.sort_by_key(|&(l, r)| (r, l));
    }
    let left_only = pairs.iter().copied().filter(|p| p.1.is_none());
    let right_only = pairs.iter().copied().filter(|p| p.0.is_none());
    inner.into_iter().chain(left_only).chain(right_only).collect()
}

fn opt(r: RowId) -> Option<u32> {
    r.get()
}

/// Runs the hash join with each unique-build table and compares with the reference (exact order
/// when `ordered`).
#[allow(clippy::too_many_arguments)]
fn check(s: &Stream, kind: Kind, l: &[Option<u64>], r: &[Option<u64>], jt: JoinType, nulls: NullEquality, ordered: bool, what: &str) {
    for build_table in [UniqueBuildTable::Hash, UniqueBuildTable::DirectWhereDense] {
        check_with(s, kind, l, r, jt, nulls, ordered, &format!("{what} ({build_table:?})"), build_table);
    }
}

#[allow(clippy::too_many_arguments)]
fn check_with(s: &Stream, kind: Kind, l: &[Option<u64>], r: &[Option<u64>], jt: JoinType, nulls: NullEquality, ordered: bool, what: &str, build_table: UniqueBuildTable) {
    let (hl, hr) = (table(kind, l), table(kind, r));
    let (tl, tr) = (Table::upload(s, &hl).unwrap(), Table::upload(s, &hr).unwrap());
    let testing = TestingOptions { no_key_compression: true, unique_build_table: build_table, ..TestingOptions::DEFAULT };
    let out = Join::new(jt)
        .on(&tl, names(kind), &tr, names(kind))
        .algorithm(Algorithm::Hash)
        .null_equality(nulls)
        .nan_equality(NanEquality::NanEqualsNan)
        .testing(testing)
        .run(s)
        .unwrap_or_else(|e| panic!("{what} {kind:?} {jt:?}: {e}"));
    assert_eq!(out.algorithm, Algorithm::Hash, "{what}");
    let maps = out.maps.expect("maps");
    let (lm, rm) = maps.to_host().unwrap();
    let got: Vec<(Option<u32>, Option<u32>)> = match (jt.has_left_map(), jt.has_right_map()) {
        (true, true) => lm.iter().zip(&rm).map(|(&a, &b)| (opt(a), opt(b))).collect(),
        (true, false) => lm.iter().map(|&a| (opt(a), None)).collect(),
        (false, true) => rm.iter().map(|&b| (None, opt(b))).collect(),
        (false, false) => unreachable!(),
    };
    assert_eq!(out.rows, got.len() as u64, "{what} {kind:?} {jt:?}: rows");
    let want = table_reference::join(&hl, names(kind), &hr, names(kind), None, jt, nulls, NanEquality::NanEqualsNan);
    let mut sorted = got.clone();
    sorted.sort();
    let ctx = || format!("{what} {kind:?} {jt:?} {nulls:?}, {} x {} rows", l.len(), r.len());
    assert_eq!(sorted.len(), want.len(), "{}: {} rows, expected {}", ctx(), sorted.len(), want.len());
    assert!(sorted == want, "{}: pairs differ (first got {:?}, want {:?})", ctx(), &sorted[..sorted.len().min(8)], &want[..want.len().min(8)]);
    if ordered {
        let expected = documented_order(&want, l.len() <= r.len());
        if let Some(k) = got.iter().zip(&expected).position(|(a, b)| a != b) {
            panic!("{}: right pairs, wrong order: first difference at output row {k}: {:?} instead of {:?}", ctx(), got[k], expected[k]);
        }
    }
}

/// `n` distinct draws from `0..domain` in random order.
fn distinct(rng: &mut StdRng, n: usize, domain: u64) -> Vec<Option<u64>> {
    let mut v: Vec<u64> = (0..domain.max(n as u64)).collect();
    v.shuffle(rng);
    v.truncate(n);
    v.into_iter().map(Some).collect()
}

fn draws(rng: &mut StdRng, n: usize, domain: u64) -> Vec<Option<u64>> {
    (0..n).map(|_| Some(rng.gen_range(0..domain.max(1)))).collect()
}

#[test]
fn unique_and_sorted_builds_match_the_reference_in_the_documented_order() {
    let Some(s) = stream("unique_and_sorted_builds_match_the_reference_in_the_documented_order") else { return };
    let mut rng = StdRng::seed_from_u64(0x4A5E_0001);
    let big = pick(3001usize, 301);
    for kind in [Kind::U32, Kind::U64Wide, Kind::U64Dense, Kind::NullableI32, Kind::I64Pair, Kind::F64] {
        // (what, left, right): the smaller side builds (the left one where strictly smaller).
        let mut shapes: Vec<(&str, Vec<Option<u64>>, Vec<Option<u64>>)> = vec![
            ("empty both", vec![], vec![]),
            ("empty build", vec![], draws(&mut rng, 5, 4)),
            ("empty probe", draws(&mut rng, 3, 4), vec![]),
            ("one x one", vec![Some(3)], vec![Some(3)]),
            ("unique pk-fk", distinct(&mut rng, big / 3, big as u64), draws(&mut rng, big, big as u64)),
            ("unique, right builds", draws(&mut rng, big, 200), distinct(&mut rng, 101, 400)),
            ("unique, equal sizes", distinct(&mut rng, 777, 2000), distinct(&mut rng, 777, 2000)),
            ("equal sizes, the right side repeats (the left builds)", distinct(&mut rng, 555, 1500), draws(&mut rng, 555, 1500)),
            ("equal sizes, the left side repeats", draws(&mut rng, 555, 1500), distinct(&mut rng, 555, 1500)),
            ("unique, no matches", (0..97).map(|i| Some(2 * i)).collect(), (0..301).map(|i| Some(2 * i + 1)).collect()),
            ("one repeated build key", { let mut v = distinct(&mut rng, 499, 5000); v[17] = v[400]; v }, draws(&mut rng, 1501, 5000)),
            ("all-equal keys", vec![Some(5); 40], vec![Some(5); 61]),
            // Dense build keys (the direct-address table): probe keys below, inside and above
            // the build keys' span; one repeated key among dense ones (falls back).
            ("dense build, probe around its span", (100..300).map(Some).collect(), draws(&mut rng, 901, 400)),
            ("dense build, one repeated key", { let mut v: Vec<Option<u64>> = (0..400).map(Some).collect(); v.shuffle(&mut rng); v[17] = v[300]; v }, draws(&mut rng, 777, 450)),
            ("dense build of one key, probe of others", vec![Some(9)], vec![Some(8), Some(10), Some(9), Some(0)]),
        ];
        // The all-ones key: in the build side, and only in the probe side (it must not match an
        // empty slot, whose bits are all set).
        let mut with_max = distinct(&mut rng, 200, 1000);
        with_max[33] = Some(u64::MAX);
        shapes.push(("all-ones key in the build", with_max.clone(), draws(&mut rng, 900, 1000)));
        let mut probe_max = draws(&mut rng, 700, 300);
        for k in (0..700).step_by(7) {
            probe_max[k] = Some(u64::MAX);
        }
        shapes.push(("all-ones key in the probe only", distinct(&mut rng, 150, 300), probe_max));
        if kind == Kind::NullableI32 {
            let mut l = distinct(&mut rng, 300, 900);
            for k in (0..300).step_by(5) {
                l[k] = None;
            }
            let mut r = draws(&mut rng, 800, 900);
            for k in (0..800).step_by(9) {
                r[k] = None;
            }
            shapes.push(("nulls on both sides, unique build", l, r));
            shapes.push(("one null build row", vec![None, Some(1), Some(2)], vec![None, Some(2), Some(2), Some(9)]));
        }
        for (what, l, r) in &shapes {
            // Keys that can be set aside (nulls, and NaN under NanNeverEqual, not used here) make
            // the kept rows, not the rows, decide the build side: compare as multisets there.
            let ordered = !l.iter().chain(r).any(Option::is_none);
            for jt in JOIN_TYPES {
                check(&s, kind, l, r, jt, NullEquality::NullEqualsNothing, ordered, what);
                if kind == Kind::NullableI32 {
                    check(&s, kind, l, r, jt, NullEquality::NullEqualsNull, ordered, what);
                }
            }
        }
    }
}
