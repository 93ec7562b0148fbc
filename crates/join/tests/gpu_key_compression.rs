//! Key compression (issue 14): one 8-byte integer key column (`Int64`, `UInt64`, `Date64`,
//! `Timestamp`) whose valid keys on both sides span less than 2^32 is joined as 32-bit offsets
//! from the smallest key. Property tests with fixed seeds against the CPU reference
//! (`gpujoin_testkit::table_reference`): keys spanning just below and just above 2^32, negative
//! keys, keys at `i64::MIN` / `i64::MAX`, `u64` keys above `i64::MAX`, NULL keys (with extreme
//! values under the null slots, which must not widen the range) under both null equalities,
//! every join type, Auto and every explicit equi-join algorithm, `count` and `chunks`; sizes 0,
//! 1, odd, all-duplicate keys, no matches, one side empty. Each case asserts through the join's
//! reason that the compressed path was taken exactly when both sides' valid keys span less than
//! 2^32, that the materialized key columns hold the original 8-byte values, and, for the
//! algorithms whose order is documented (sort-merge, indexed nested loop), that the maps come in
//! the same order as with compression switched off (`TestingOptions::no_key_compression`).
//! The wide joins (the clustered gathers, PHJ-UM, NPHJ and Auto through the front door, the
//! path of the `paper_pkfk` benchmark rows) are checked the same way with a row-id payload on
//! each side, the pairs read from the materialized row ids.
//!
//! Under `GPUJOIN_TEST_SIZE=small` (compute-sanitizer) the property tests run 2 cases each and
//! the edges test one edge in five (and the three special ones).

use gpujoin_device::testing::{cases as case_count, device_or_skip, reduced, Sample};
use gpujoin_device::Stream;
use gpujoin_join::chunked::ChunkBudget;
use gpujoin_join::plan::{Algorithm, Gather, Join};
use gpujoin_join::table::{DataType, HostColumn, HostTable, Table, TimeUnit, Value};
use gpujoin_join::{JoinType, NanEquality, NullEquality, RowId, TestingOptions};
use gpujoin_testkit::table_reference;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

type Pairs = Vec<(Option<u32>, Option<u32>)>;

fn stream(test: &str) -> Option<Stream> {
    device_or_skip(test).map(|d| d.new_stream().expect("stream"))
}

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, max_shrink_iters: 32, ..Config::default() });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

fn from_maps(l: &[RowId], r: &[RowId]) -> Pairs {
    let n = l.len().max(r.len());
    let mut v: Pairs = (0..n).map(|k| (l.get(k).and_then(|x| x.get()), r.get(k).and_then(|x| x.get()))).collect();
    v.sort();
    v
}

/// The 8-byte key types of the front door.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Int64,
    UInt64,
    Timestamp,
    Date64,
}

impl Kind {
    fn signed(self) -> bool {
        self != Kind::UInt64
    }
}

/// Where the keys lie: `base` (as i128: u64 bases above i64::MAX included) and the span of the
/// keys drawn (every key in `[base, base + span]`, both ends drawn on some side when the sides
/// have rows).
#[derive(Debug, Clone)]
struct Case {
    kind: Kind,
    base: i128,
    span: u64,
    left: Vec<Option<u64>>,
    right: Vec<Option<u64>>,
}

/// Offsets (from base) of keys, `None` a null row.
fn offsets(n: usize, span: u64, pattern: u8, null_pct: u32) -> impl Strategy<Value = Vec<Option<u64>>> {
    let domain = prop_oneof![Just(0u64), Just(span), 0..=span, Just(span / 2)];
    prop::collection::vec((domain, 0u32..100), n).prop_map(move |v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (x, p))| {
                if p < null_pct {
                    None
                } else {
                    Some(match pattern {
                        0 => x,             // anything in the range
                        1 => span / 3,      // all duplicates
                        _ => x % 7 + i as u64 % 2 * (span - span.min(6)), // few distinct keys
                    })
                }
            })
            .collect()
    })
}

fn cases() -> impl Strategy<Value = Case> {
    let kind = prop_oneof![Just(Kind::Int64), Just(Kind::UInt64), Just(Kind::Timestamp), Just(Kind::Date64)];
    let span = prop_oneof![Just(0u64), Just(1), Just(1000), Just(u32::MAX as u64 - 1), Just(u32::MAX as u64), Just(1u64 << 32), Just((1u64 << 32) + 1), Just(1u64 << 40)];
    let sizes = prop_oneof![Just((0usize, 0usize)), Just((0, 5)), Just((7, 0)), Just((1, 1)), Just((1, 37)), (2usize..80, 2usize..80), Just((301, 255))];
    (kind, span, sizes, 0u8..3, prop_oneof![Just(0u32), Just(20)], 0u8..6, any::<bool>()).prop_flat_map(|(kind, span, (nl, nr), pattern, null_pct, anchor, disjoint)| {
        let base: i128 = match (kind.signed(), anchor) {
            (_, 0) => 0,
            (true, 1) => -(1i128 << 40) - 3,
            (true, 2) => i64::MIN as i128,
            (true, 3) => i64::MAX as i128 - span as i128,
            (true, _) => -(span as i128 / 2),
            (false, 1) => (1i128 << 63) + 12345, // above i64::MAX
            (false, 2) => u64::MAX as i128 - span as i128,
            (false, _) => (1i128 << 63) - span as i128 / 2, // across i64::MAX
        };
        let base = base.max(if kind.signed() { i64::MIN as i128 } else { 0 });
        (Just(kind), Just(base), Just(span), offsets(nl, span, pattern, null_pct), offsets(nr, span, pattern, null_pct), Just(disjoint)).prop_map(
            |(kind, base, span, mut left, mut right, disjoint)| {
                // Both ends of the range somewhere (when there are rows), so that the span is exact.
                if let Some(x) = left.first_mut() {
                    *x = Some(0);
                }
                if let Some(x) = right.last_mut() {
                    *x = Some(span);
                }
                if disjoint && span >= 2 {
                    // No matches: left keys even, right keys odd offsets, all within [0, span].
                    let odd = |x: u64| if x | 1 <= span { x | 1 } else { (x - 1) | 1 };
                    left.iter_mut().flatten().for_each(|x| *x &= !1);
                    right.iter_mut().flatten().for_each(|x| *x = odd(*x));
                }
                Case { kind, base, span, left, right }
            },
        )
    })
}

impl Case {
    /// The keys' values (two's complement bits for signed kinds); null rows hold an extreme
    /// value, which must not widen the range.
    fn values(&self, side: &[Option<u64>]) -> Vec<u64> {
        side.iter()
            .enumerate()
            .map(|(i, o)| match o {
                Some(x) => (self.base + *x as i128) as u64, // two's complement for negative i64
                None if i % 2 == 0 => i64::MIN as u64,
                None => u64::MAX >> (self.kind.signed() as u32), // i64::MAX or u64::MAX
            })
            .collect()
    }

    fn column(&self, side: &[Option<u64>]) -> HostColumn {
        let v = self.values(side);
        let c = match self.kind {
            Kind::UInt64 => HostColumn::from_values(v),
            Kind::Int64 => HostColumn::from_values(v.iter().map(|&x| x as i64).collect()),
            Kind::Timestamp => HostColumn::timestamps(TimeUnit::Microsecond, v.iter().map(|&x| x as i64).collect()),
            Kind::Date64 => HostColumn::from_values(v.iter().map(|&x| x as i64).collect()).with_type(DataType::Date64).unwrap(),
        };
        if side.iter().any(Option::is_none) {
            c.with_validity(&side.iter().map(Option::is_some).collect::<Vec<_>>()).unwrap()
        } else {
            c
        }
    }

    fn table(&self, side: &[Option<u64>]) -> HostTable {
        let p: Vec<u32> = (0..side.len() as u32).map(|i| i * 7 + 1).collect();
        HostTable::new(vec![("k", self.column(side)), ("p", HostColumn::from_values(p))]).unwrap()
    }

    /// Both sides' valid keys span less than 2^32 (no valid key: span 0).
    fn compressible(&self) -> bool {
        let valid: Vec<u64> = self.left.iter().chain(&self.right).flatten().copied().collect();
        match (valid.iter().min(), valid.iter().max()) {
            (Some(a), Some(b)) => b - a <= u32::MAX as u64,
            _ => true,
        }
    }

    fn nullable(&self) -> bool {
        self.left.iter().chain(&self.right).any(Option::is_none)
    }
}

const EQUI: [Algorithm; 8] = [
    Algorithm::Auto,
    Algorithm::SortMerge(Gather::Unclustered),
    Algorithm::SortMerge(Gather::Clustered),
    Algorithm::Interleave,
    Algorithm::Hash,
    Algorithm::PartitionedHash(Gather::Unclustered),
    Algorithm::PartitionedHash(Gather::Clustered),
    Algorithm::IndexedNestedLoop,
];

const NO_COMPRESSION: TestingOptions = TestingOptions { no_key_compression: true, ..TestingOptions::DEFAULT };

fn fail(what: &str, msg: String) -> TestCaseError {
    TestCaseError::fail(format!("{what}: {msg}"))
}

/// One case through the front door: every join type, both null equalities, every equi
/// algorithm, `count` and `chunks`.
fn front_door_case(s: &Stream, c: &Case, sample: &mut Sample) -> Result<(), TestCaseError> {
    let (hl, hr) = (c.table(&c.left), c.table(&c.right));
    let (lt, rt) = (Table::upload(s, &hl).unwrap(), Table::upload(s, &hr).unwrap());
    let compressible = c.compressible();
    for jt in JoinType::ALL {
        let (ls, rs): (Vec<&str>, Vec<&str>) = match jt {
            JoinType::LeftSemi | JoinType::LeftAnti => (vec!["k", "p"], vec![]),
            JoinType::RightSemi | JoinType::RightAnti => (vec![], vec!["k", "p"]),
            _ => (vec!["k", "p"], vec!["k"]),
        };
        for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
            if nulls == NullEquality::NullEqualsNull && !c.nullable() {
                continue;
            }
            let want = table_reference::join(&hl, &["k"], &hr, &["k"], None, jt, nulls, NanEquality::NanEqualsNan);
            let want_rows = table_reference::rows_of_pairs(&want, &hl, &ls, &hr, &rs);
            for alg in EQUI {
                if !sample.take() {
                    continue;
                }
                let what = format!("{:?} base {} span {} {}x{} {jt:?} {nulls:?} {}", c.kind, c.base, c.span, c.left.len(), c.right.len(), alg.name());
                let join = Join::new(jt).on(&lt, &["k"], &rt, &["k"]).null_equality(nulls).algorithm(alg).select(&ls, &rs);
                // Every algorithm takes nullable keys (the clustered gathers, and the indexed
                // nested loop under NullEqualsNull, as ranks of the compressed keys).
                let out = match join.run(s) {
                    Ok(o) => o,
                    Err(e) => return Err(fail(&what, format!("error {e}"))),
                };
                let noted = out.reason.contains("32-bit offsets");
                if noted != compressible {
                    return Err(fail(&what, format!("compressed {noted}, expected {compressible}: {}", out.reason)));
                }
                if !compressible && !out.reason.contains("more than 32 bits") {
                    return Err(fail(&what, format!("no note on the kept keys: {}", out.reason)));
                }
                if out.rows != want.len() as u64 {
                    return Err(fail(&what, format!("{} rows, expected {} ({})", out.rows, want.len(), out.reason)));
                }
                if let Some(m) = &out.maps {
                    let (l, r) = m.to_host().unwrap();
                    prop_assert_eq!(from_maps(&l, &r), want.clone(), "{}: pairs", what);
                    // The documented orders: the same maps as without compression. (The
                    // interleave join hashes 8-byte keys, whose order is the hash's, and joins
                    // offsets exactly, by key; the hash joins' order is not part of the contract;
                    // under NullEqualsNull 8-byte nullable keys are hashed too.)
                    let ordered = matches!(alg, Algorithm::SortMerge(Gather::Unclustered) | Algorithm::IndexedNestedLoop);
                    if ordered && nulls == NullEquality::NullEqualsNothing {
                        let plain = join.clone().testing(NO_COMPRESSION).run(s).unwrap();
                        prop_assert!(!plain.reason.contains("32-bit offsets"), "{}: compressed although switched off", what);
                        let (pl, pr) = plain.maps.as_ref().unwrap().to_host().unwrap();
                        prop_assert!(pl == l && pr == r, "{}: order differs from the uncompressed join", what);
                    }
                }
                let table = out.table.to_host().unwrap();
                // The key columns are the original 8-byte values.
                prop_assert_eq!(table_reference::rows_of_table(&table), want_rows.clone(), "{}: materialized rows ({})", what, out.reason);
            }
            let join = Join::new(jt).on(&lt, &["k"], &rt, &["k"]).null_equality(nulls);
            prop_assert_eq!(join.count(s).unwrap(), want.len() as u64, "count {:?} {:?}", jt, nulls);
            let mut got = Vec::new();
            for chunk in join.chunks(s, ChunkBudget::Bytes(16 << 10)).unwrap().take(100_000) {
                let (l, r) = chunk.unwrap().data.to_host().unwrap();
                got.extend(from_maps(&l, &r));
            }
            got.sort();
            prop_assert_eq!(got, want.clone(), "chunks {:?} {:?}", jt, nulls);
        }
    }
    Ok(())
}

#[test]
fn front_door_compresses_exactly_the_narrow_ranges() {
    let Some(s) = stream("front_door_compresses_exactly_the_narrow_ranges") else { return };
    run(case_count(48, 2), 1401, cases(), |c| front_door_case(&s, &c, &mut Sample::new(1)));
}

/// The edges, each in its own case: a span of 2^32 - 1 (compressed) and 2^32 (kept) at both
/// ends of `i64` and of `u64`, the whole `i64` range, and NULL rows whose values lie far outside
/// the valid keys' range.
#[test]
fn front_door_edges() {
    let Some(s) = stream("front_door_edges") else { return };
    let max32 = u32::MAX as u64;
    let mut edges = Vec::new();
    for kind in [Kind::Int64, Kind::UInt64, Kind::Timestamp] {
        let bases: Vec<i128> = if kind.signed() { vec![i64::MIN as i128, i64::MAX as i128 - max32 as i128 - 1, -1, -(1 << 31)] } else { vec![0, u64::MAX as i128 - max32 as i128 - 1, (1 << 63) - 7] };
        for base in bases {
            for span in [max32, max32 + 1] {
                let left = vec![Some(0), Some(span), None, Some(span / 2), Some(1)];
                let right = vec![Some(span), None, Some(0), Some(span / 2 + 1), Some(span)];
                edges.push(Case { kind, base, span, left, right });
            }
        }
    }
    // The whole i64 range (kept), one valid key a side and nulls (compressed: span 0).
    edges.push(Case { kind: Kind::Int64, base: i64::MIN as i128, span: u64::MAX, left: vec![Some(0), Some(u64::MAX)], right: vec![Some(u64::MAX), Some(0), Some(3)] });
    edges.push(Case { kind: Kind::Int64, base: 5, span: 0, left: vec![None, Some(0), None], right: vec![None, Some(0)] });
    // No valid key at all: nothing matches but NULL under NullEqualsNull.
    edges.push(Case { kind: Kind::UInt64, base: 0, span: 0, left: vec![None, None, None], right: vec![None] });
    let n = edges.len();
    // GPUJOIN_TEST_SIZE=small (compute-sanitizer): one edge in five and the last three, and a
    // rotating third of their (join type, NULL rule, algorithm) joins (3 is prime to the 8
    // algorithms, so every algorithm runs).
    let mut sample = Sample::new(3);
    for (i, c) in edges.into_iter().enumerate() {
        if reduced() && i % 5 != 0 && i + 3 < n {
            continue;
        }
        if let Err(e) = front_door_case(&s, &c, &mut sample) {
            panic!("{c:?}: {e}");
        }
    }
}

/// The wide joins (Auto, SMJ-UM, SMJ-OM, PHJ-UM, PHJ-OM, NPHJ) through the front door on the
/// 8-byte keys (with validity), each side selecting its row ids (`lid`, `rid`: `u32` payloads
/// that the clustered gathers carry through the join), so the materialized columns give the
/// pairs; the reason says whether the keys were compressed. Every algorithm takes every case
/// (nullable keys: the clustered gathers join them as ranks).
#[test]
fn wide_joins_compress_exactly_the_narrow_ranges() {
    let Some(s) = stream("wide_joins_compress_exactly_the_narrow_ranges") else { return };
    const WIDE: [Algorithm; 6] = [
        Algorithm::Auto,
        Algorithm::SortMerge(Gather::Unclustered),
        Algorithm::SortMerge(Gather::Clustered),
        Algorithm::PartitionedHash(Gather::Unclustered),
        Algorithm::PartitionedHash(Gather::Clustered),
        Algorithm::Hash,
    ];
    run(case_count(32, 2), 1402, cases(), |c| {
        let table = |side: &[Option<u64>], id: &str| {
            let ids: Vec<u32> = (0..side.len() as u32).collect();
            HostTable::new(vec![("k", c.column(side)), (id, HostColumn::from_values(ids))]).unwrap()
        };
        let (hl, hr) = (table(&c.left, "lid"), table(&c.right, "rid"));
        let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
        for jt in JoinType::ALL {
            let ls: &[&str] = if jt.has_left_map() { &["lid"] } else { &[] };
            let rs: &[&str] = if jt.has_right_map() { &["rid"] } else { &[] };
            for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                let want = table_reference::join(&hl, &["k"], &hr, &["k"], None, jt, nulls, NanEquality::NanEqualsNan);
                for a in WIDE {
                    let what = format!("{:?} base {} span {} {}x{} {jt:?} {nulls:?} {}", c.kind, c.base, c.span, c.left.len(), c.right.len(), a.name());
                    let join = Join::new(jt).on(&lt, &["k"], &rt, &["k"]).null_equality(nulls).algorithm(a).select(ls, rs);
                    let out = match join.run(&s) {
                        Ok(o) => o,
                        Err(e) => return Err(fail(&what, format!("error {e}"))),
                    };
                    if a != Algorithm::Auto {
                        prop_assert_eq!(out.algorithm, a, "{}: {}", what, out.reason);
                    }
                    let noted = out.reason.contains("32-bit offsets");
                    prop_assert_eq!(noted, c.compressible(), "{}: {}", what, out.reason);
                    let t = out.table.to_host().unwrap();
                    let ids = |name: &str| -> Option<Vec<Option<u32>>> {
                        let col = t.column(name).ok()?;
                        Some((0..col.len()).map(|i| match col.value(i) {
                            Value::Int(v) => Some(v as u32),
                            _ => None,
                        }).collect())
                    };
                    let (gl, gr) = (ids("lid"), ids("rid"));
                    prop_assert_eq!(gl.is_some(), jt.has_left_map(), "{}: left row ids", what);
                    prop_assert_eq!(gr.is_some(), jt.has_right_map(), "{}: right row ids", what);
                    let n = out.rows as usize;
                    prop_assert_eq!(t.rows(), n, "{}: materialized rows", what);
                    let mut got: Pairs = (0..n).map(|i| (gl.as_ref().and_then(|v| v[i]), gr.as_ref().and_then(|v| v[i]))).collect();
                    got.sort();
                    prop_assert_eq!(got, want.clone(), "{}: pairs ({})", what, out.reason);
                }
            }
        }
        Ok(())
    });
}
