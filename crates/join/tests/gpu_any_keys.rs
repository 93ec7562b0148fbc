//! Every path takes every key (issue 9): the clustered gathers (SMJ-OM, PHJ-OM) and the indexed
//! nested loop through the front door, on keys they join as ranks (one `u32` match key a side:
//! keys wider than 64 bits, nullable keys, NaN under both equalities, composite and decimal
//! keys), against a CPU reference: every join type x both `NullEquality` x both `NanEquality` x
//! keys of nullable `Int32`, nullable `Int64` over a wide range, `Float32` / `Float64` with NaN,
//! -NaN, -0.0, 0.0 and infinities, `(Int64, Int64)`, `(Utf8, Int32)`, `Decimal128`; sizes 0, 1,
//! odd and about 5000 rows; all-duplicate keys, no matches, all keys NULL. Pairs are compared
//! through row-id columns materialized beside the payloads (as multisets; exactly, in the
//! documented order, for the indexed nested loop's maps), and every materialized column against
//! the reference's rows. `GPUJOIN_TEST_SIZE=small` runs a few small cases (compute-sanitizer).

use std::collections::HashMap;

use gpujoin_device::testing::{device_or_skip, pick, rows};
use gpujoin_device::Stream;
use gpujoin_join::plan::{Algorithm, Gather, Join};
use gpujoin_join::table::{DataType, HostColumn, HostTable, Table, Value};
use gpujoin_join::{JoinType, NanEquality, NullEquality, RowId};
use gpujoin_testkit::table_reference;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn stream(test: &str) -> Option<Stream> {
    device_or_skip(test).map(|d| d.new_stream().expect("stream"))
}

// ---- Keys ---------------------------------------------------------------------------------------

/// The key shapes of the issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    I32,
    /// `Int64` keys spanning more than 2^32 (never compressed to 32-bit offsets).
    I64Wide,
    F32,
    F64,
    /// `(Int64, Int64)`: 128 bits.
    I64Pair,
    /// `(Utf8, Int32)`: 64 bits (the strings as 32-bit ranks).
    StrI32,
    /// `Decimal128(38, 2)`: two key words.
    Decimal,
}

const KINDS: [Kind; 7] = [Kind::I32, Kind::I64Wide, Kind::F32, Kind::F64, Kind::I64Pair, Kind::StrI32, Kind::Decimal];

/// Special values come first: draws below `SPECIALS` map to them (NaN, -0.0, MIN, MAX, ...),
/// the rest to distinct ordinary values, so disjoint ranges of draws above it never match.
const SPECIALS: i64 = 6;

impl Kind {
    fn names(self) -> &'static [&'static str] {
        match self {
            Kind::I64Pair | Kind::StrI32 => &["k", "k2"],
            _ => &["k"],
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Kind::F32 | Kind::F64)
    }

    /// Whether the keys prepare to more than 64 bits (the clustered gathers rank them).
    fn wide(self) -> bool {
        matches!(self, Kind::I64Pair | Kind::Decimal)
    }

    /// The key columns of `n` rows from the draws `xs` (one vector a key column), null where
    /// `valid` says so (`None`: no validity bitmap).
    fn columns(self, xs: &[Vec<i64>], valid: Option<&[bool]>) -> Vec<(&'static str, HostColumn)> {
        let i32_of = |x: i64| match x {
            0 => i32::MIN,
            1 => i32::MAX,
            2 => 0,
            3 => -1,
            4 => 1,
            5 => -7,
            x => (x * 37 - 1000) as i32,
        };
        let i64_of = |x: i64| match x {
            0 => i64::MIN,
            1 => i64::MAX,
            2 => 0,
            3 => -1,
            4 => 1 << 40,
            5 => -(1 << 50),
            x => (x - 500) * (1 << 36) + 3,
        };
        let f64_of = |x: i64| match x {
            0 => f64::NAN,
            1 => -0.0,
            2 => 0.0,
            3 => -f64::NAN,
            4 => f64::INFINITY,
            5 => f64::NEG_INFINITY,
            x => x as f64 * 0.5 - 40.0,
        };
        let str_of = |x: i64| match x {
            0 => String::new(),
            1 => "é".into(),
            2 => "k".repeat(40),
            3 => format!("{}x", "k".repeat(40)),
            4 => "key\u{0}".into(),
            5 => "key".into(),
            x => format!("key-{x}"),
        };
        let nullable = |c: HostColumn| match valid {
            Some(v) => c.with_validity(v).unwrap(),
            None => c,
        };
        let col = match self {
            Kind::I32 => HostColumn::from_values(xs[0].iter().map(|&x| i32_of(x)).collect()),
            Kind::I64Wide | Kind::I64Pair => HostColumn::from_values(xs[0].iter().map(|&x| i64_of(x)).collect()),
            Kind::F32 => HostColumn::from_values(xs[0].iter().map(|&x| f64_of(x) as f32).collect()),
            Kind::F64 => HostColumn::from_values(xs[0].iter().map(|&x| f64_of(x)).collect()),
            Kind::StrI32 => HostColumn::utf8_options(xs[0].iter().enumerate().map(|(i, &x)| valid.is_none_or(|v| v[i]).then(|| str_of(x)))),
            Kind::Decimal => HostColumn::from_values(xs[0].iter().map(|&x| (x as i128 - 3) * (1i128 << 70) + 7).collect()).with_type(DataType::Decimal128(38, 2)).unwrap(),
        };
        let mut cols = vec![("k", if self == Kind::StrI32 { col } else { nullable(col) })];
        match self {
            // The second column without nulls: a key is NULL where its first column is.
            Kind::I64Pair => cols.push(("k2", HostColumn::from_values(xs[1].iter().map(|&x| i64_of(x)).collect()))),
            Kind::StrI32 => cols.push(("k2", nullable(HostColumn::from_values(xs[1].iter().map(|&x| i32_of(x)).collect())))),
            _ => {}
        }
        cols
    }
}

/// How one side's keys are drawn.
#[derive(Debug, Clone, Copy)]
enum Draw {
    /// From the specials and `0..domain` above them, nulls at `pct` percent.
    Mixed { domain: i64, pct: u32 },
    /// Every key the same ordinary value.
    Same,
    /// Ordinary values from `lo..lo + 50` (disjoint ranges never match).
    Range { lo: i64 },
    /// Every key NULL.
    AllNull,
}

/// A side of `n` rows: the key columns, a row id and a payload composed by row id (left: `id`
/// Int64 and `s` nullable Utf8; right: `id` UInt32 and `f` nullable Float64).
fn side(rng: &mut StdRng, kind: Kind, n: usize, draw: Draw, left: bool) -> HostTable {
    let ncols = kind.names().len();
    // Specials in 30% of the rows (1.2% of large sides: each special value repeats, and the
    // output of a value is the product of its rows on both sides).
    let special_per_mille = if n > 1000 { 12 } else { 300 };
    let x = |rng: &mut StdRng| -> i64 {
        match draw {
            Draw::Mixed { domain, .. } => {
                if rng.gen_range(0..1000) < special_per_mille {
                    rng.gen_range(0..SPECIALS)
                } else {
                    SPECIALS + rng.gen_range(0..domain.max(1))
                }
            }
            Draw::Same => SPECIALS + 7,
            Draw::Range { lo } => SPECIALS + lo + rng.gen_range(0..50),
            Draw::AllNull => SPECIALS,
        }
    };
    let xs: Vec<Vec<i64>> = (0..ncols).map(|_| (0..n).map(|_| x(rng)).collect()).collect();
    let valid: Option<Vec<bool>> = match draw {
        Draw::Mixed { pct, .. } if pct > 0 => Some((0..n).map(|_| rng.gen_range(0..100) >= pct).collect()),
        Draw::AllNull => Some(vec![false; n]),
        _ => None,
    };
    let mut cols = kind.columns(&xs, valid.as_deref());
    if left {
        cols.push(("id", HostColumn::from_values((0..n as i64).collect())));
        cols.push(("s", HostColumn::utf8_options((0..n).map(|i| (i % 5 != 0).then(|| format!("s{i}"))))));
    } else {
        cols.push(("id", HostColumn::from_values((0..n as u32).collect())));
        cols.push(("f", HostColumn::from_options((0..n).map(|i| (i % 4 != 1).then_some(i as f64 * 0.25)).collect())));
    }
    HostTable::new(cols).unwrap()
}

// ---- The reference ------------------------------------------------------------------------------

/// A key value under the equalities (`None`: it can match nothing).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum K {
    Null,
    Nan,
    Int(i128),
    Float(u64),
    Str(Vec<u8>),
}

fn canon(v: Value<'_>, nulls: NullEquality, nans: NanEquality) -> Option<K> {
    Some(match v {
        Value::Null if nulls == NullEquality::NullEqualsNull => K::Null,
        Value::Null => return None,
        Value::Float(x) if x.is_nan() && nans == NanEquality::NanEqualsNan => K::Nan,
        Value::Float(x) if x.is_nan() => return None,
        Value::Float(x) => K::Float(if x == 0.0 { 0.0f64.to_bits() } else { x.to_bits() }),
        Value::Int(x) => K::Int(x),
        Value::Bool(b) => K::Int(b as i128),
        Value::Str(s) => K::Str(s.to_vec()),
    })
}

fn row_keys(t: &HostTable, names: &[&str], nulls: NullEquality, nans: NanEquality) -> Vec<Option<Vec<K>>> {
    let cols: Vec<Vec<Value<'_>>> = names.iter().map(|n| t.column(n).unwrap().values()).collect();
    (0..t.rows()).map(|i| cols.iter().map(|c| canon(c[i], nulls, nans)).collect::<Option<Vec<K>>>()).collect()
}

/// The join's output in the indexed nested loop's documented order: pair joins give the left
/// rows in order, each with its right rows in row order (or alone, where the join keeps an
/// unmatched left row), then the unmatched right rows in order; semi and anti joins their rows
/// in order. Linear (hashing), for sizes the quadratic `table_reference::join` is slow at.
fn reference(l: &HostTable, r: &HostTable, names: &[&str], jt: JoinType, nulls: NullEquality, nans: NanEquality) -> Vec<(Option<u32>, Option<u32>)> {
    let (lk, rk) = (row_keys(l, names, nulls, nans), row_keys(r, names, nulls, nans));
    let mut by_key: HashMap<&Vec<K>, Vec<u32>> = HashMap::new();
    for (j, k) in rk.iter().enumerate() {
        if let Some(k) = k {
            by_key.entry(k).or_default().push(j as u32);
        }
    }
    let mut right_matched = vec![false; r.rows()];
    let mut out = Vec::new();
    for (i, k) in lk.iter().enumerate() {
        let js = k.as_ref().and_then(|k| by_key.get(k)).map_or(&[][..], |v| v.as_slice());
        js.iter().for_each(|&j| right_matched[j as usize] = true);
        let i = Some(i as u32);
        match jt {
            JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                out.extend(js.iter().map(|&j| (i, Some(j))));
                if js.is_empty() && jt.keeps_unmatched_left() {
                    out.push((i, None));
                }
            }
            JoinType::LeftSemi if !js.is_empty() => out.push((i, None)),
            JoinType::LeftAnti if js.is_empty() => out.push((i, None)),
            _ => {}
        }
    }
    let right = |want: bool| (0..r.rows()).filter(move |&j| right_matched[j] == want).map(|j| (None, Some(j as u32)));
    match jt {
        JoinType::Right | JoinType::Full => out.extend(right(false)),
        JoinType::RightSemi => out.extend(right(true)),
        JoinType::RightAnti => out.extend(right(false)),
        _ => {}
    }
    out
}

fn sorted(mut v: Vec<(Option<u32>, Option<u32>)>) -> Vec<(Option<u32>, Option<u32>)> {
    v.sort();
    v
}

fn pairs_of(l: &[RowId], r: &[RowId]) -> Vec<(Option<u32>, Option<u32>)> {
    (0..l.len().max(r.len())).map(|k| (l.get(k).and_then(|x| x.get()), r.get(k).and_then(|x| x.get()))).collect()
}

// ---- One case -----------------------------------------------------------------------------------

const ALGORITHMS: [Algorithm; 3] = [Algorithm::SortMerge(Gather::Clustered), Algorithm::PartitionedHash(Gather::Clustered), Algorithm::IndexedNestedLoop];

/// Whether `alg` should join these keys as ranks (the front door's rule, restated).
fn expect_ranks(alg: Algorithm, kind: Kind, nullable: bool, nulls: NullEquality, nans: NanEquality) -> bool {
    match alg {
        Algorithm::IndexedNestedLoop => kind.names().len() > 1 || kind == Kind::Decimal || (nullable && nulls == NullEquality::NullEqualsNull) || (kind.is_float() && nans == NanEquality::NanEqualsNan),
        _ => kind.wide() || nullable || (kind.is_float() && nans == NanEquality::NanNeverEqual),
    }
}

/// Runs every join type, equality and algorithm on one pair of tables; returns the runs made.
/// Under `GPUJOIN_TEST_SIZE=small` (compute-sanitizer), one run in 13 of every test's runs
/// (rotating through join types, equalities and algorithms); every run otherwise.
fn sampled() -> bool {
    thread_local!(static SAMPLE: std::cell::RefCell<gpujoin_device::testing::Sample> = std::cell::RefCell::new(gpujoin_device::testing::Sample::new(13)));
    SAMPLE.with(|s| s.borrow_mut().take())
}

fn check_tables(s: &Stream, kind: Kind, hl: &HostTable, hr: &HostTable, algorithms: &[Algorithm], what: &str) -> usize {
    let (lt, rt) = (Table::upload(s, hl).unwrap(), Table::upload(s, hr).unwrap());
    let names = kind.names();
    let nullable = names.iter().any(|n| lt.view().column(n).unwrap().validity().is_some() || rt.view().column(n).unwrap().validity().is_some());
    let mut runs = 0;
    for jt in JoinType::ALL {
        let (ls, rs): (&[&str], &[&str]) = match jt {
            JoinType::LeftSemi | JoinType::LeftAnti => (&["id", "s"], &[]),
            JoinType::RightSemi | JoinType::RightAnti => (&[], &["id", "f"]),
            _ => (&["id", "s"], &["id", "f"]),
        };
        for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
            // (The NaN equality changes nothing for other keys: both in the full run only.)
            let nans_all = [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual];
            let nans_list = if kind.is_float() || !gpujoin_device::testing::reduced() { &nans_all[..] } else { &nans_all[..1] };
            for &nans in nans_list {
                let want = reference(hl, hr, names, jt, nulls, nans);
                let want_rows = table_reference::rows_of_pairs(&want, hl, ls, hr, rs);
                for &alg in algorithms {
                    if !sampled() {
                        continue;
                    }
                    let what = format!("{what} {kind:?} {}x{} {jt:?} {nulls:?} {nans:?} {}", hl.rows(), hr.rows(), alg.name());
                    let join = Join::new(jt).on(&lt, names, &rt, names).null_equality(nulls).nan_equality(nans).algorithm(alg).select(ls, rs);
                    let explain = join.explain().unwrap_or_else(|e| panic!("{what}: explain: {e}"));
                    let out = join.run(s).unwrap_or_else(|e| panic!("{what}: {e}"));
                    if alg != Algorithm::Auto {
                        assert_eq!(out.algorithm, alg, "{what}: ran {} ({})", out.algorithm.name(), out.reason);
                        assert!(out.reason.starts_with(&explain.reason), "{what}: run says {:?}, explain {:?}", out.reason, explain.reason);
                        let ranked = out.reason.contains("keys joined as ranks");
                        assert_eq!(ranked, expect_ranks(alg, kind, nullable, nulls, nans), "{what}: {}", out.reason);
                    }
                    assert_eq!(out.rows, want.len() as u64, "{what}: rows ({})", out.reason);
                    if let Some(m) = &out.maps {
                        let (l, r) = m.to_host().unwrap();
                        let got = pairs_of(&l, &r);
                        if alg == Algorithm::IndexedNestedLoop {
                            // The documented order, exactly.
                            assert!(got == want, "{what}: pairs (in order) differ: got {:?}, want {:?}", &got[..got.len().min(8)], &want[..want.len().min(8)]);
                        } else {
                            assert!(sorted(got) == sorted(want.clone()), "{what}: pairs differ");
                        }
                    }
                    // The row ids and payloads, materialized: the pairs as a multiset, and every
                    // selected column's values.
                    let table = out.table.to_host().unwrap();
                    let got_rows = table_reference::rows_of_table(&table);
                    assert!(got_rows == want_rows, "{what}: materialized rows differ ({}): got {:?}, want {:?}", out.reason, &got_rows[..got_rows.len().min(4)], &want_rows[..want_rows.len().min(4)]);
                    runs += 1;
                }
            }
        }
    }
    runs
}

fn algorithms() -> Vec<Algorithm> {
    let mut v = ALGORITHMS.to_vec();
    if !gpujoin_device::testing::reduced() {
        v.push(Algorithm::Auto); // stays correct on these keys
    }
    v
}

#[test]
fn clustered_and_indexed_nested_loop_take_every_key() {
    let Some(s) = stream("clustered_and_indexed_nested_loop_take_every_key") else { return };
    let mut rng = StdRng::seed_from_u64(0x1_55E9);
    let big = rows(5000, 40);
    // (left rows, right rows, null percent)
    let sizes: Vec<(usize, usize, u32)> = pick(vec![(0, 0, 0), (0, 5, 20), (3, 0, 0), (1, 1, 0), (1, 1, 100), (37, 51, 15), (333, 290, 0), (big, big - 1, 1)], vec![(0, 3, 20), (37, 51, 15)]);
    let mut runs = 0;
    for kind in KINDS {
        for &(nl, nr, pct) in &sizes {
            let domain = (nl.max(nr) as i64 / 3).max(2);
            let draw = Draw::Mixed { domain, pct };
            let (hl, hr) = (side(&mut rng, kind, nl, draw, true), side(&mut rng, kind, nr, draw, false));
            runs += check_tables(&s, kind, &hl, &hr, &algorithms(), &format!("nulls {pct}%"));
        }
    }
    println!("{runs} runs matched the reference");
}

#[test]
fn duplicates_no_matches_and_all_null_keys() {
    let Some(s) = stream("duplicates_no_matches_and_all_null_keys") else { return };
    let mut rng = StdRng::seed_from_u64(0x1_55E9_0002);
    let n = rows(61, 9);
    let mut runs = 0;
    for kind in KINDS {
        let cases = [
            ("all duplicates", Draw::Same, Draw::Same),
            ("all null", Draw::AllNull, Draw::AllNull),
            ("no matches", Draw::Range { lo: 0 }, Draw::Range { lo: 50 }),
            ("null left, duplicates right", Draw::AllNull, Draw::Same),
        ];
        for (what, dl, dr) in cases.into_iter().take(pick(4, 2)) {
            let (hl, hr) = (side(&mut rng, kind, n, dl, true), side(&mut rng, kind, n + 2, dr, false));
            runs += check_tables(&s, kind, &hl, &hr, &algorithms(), what);
        }
    }
    println!("{runs} runs matched the reference");
}

/// `JoinIndex` (built once, probed many times) under both equalities: probes where NULL equals
/// NULL or NaN equals NaN join ranks (the reason says so), the others the prebuilt index; the
/// maps in the documented order (probe rows in order, each one's index rows in row order, then
/// the unmatched index rows) and the materialized columns against the reference.
#[test]
fn join_index_under_both_equalities() {
    use gpujoin_join::plan::JoinIndex;
    let Some(s) = stream("join_index_under_both_equalities") else { return };
    let mut rng = StdRng::seed_from_u64(0x1_55E9_0004);
    let sizes: Vec<(usize, usize, u32)> = pick(vec![(0, 4, 20), (1, 1, 100), (37, 51, 15), (700, 900, 10), (300, 200, 0)], vec![(37, 51, 15)]);
    let mut runs = 0;
    // (Utf8 keys: the first key column of the (Utf8, Int32) tables.)
    for kind in [Kind::I32, Kind::I64Wide, Kind::F32, Kind::F64, Kind::StrI32] {
        for &(np, ni, pct) in &sizes {
            let domain = (np.max(ni) as i64 / 3).max(2);
            let draw = Draw::Mixed { domain, pct };
            let (hp, hi) = (side(&mut rng, kind, np, draw, true), side(&mut rng, kind, ni, draw, false));
            let (pt, it) = (Table::upload(&s, &hp).unwrap(), Table::upload(&s, &hi).unwrap());
            let nullable = pt.view().column("k").unwrap().validity().is_some() || it.view().column("k").unwrap().validity().is_some();
            let built = JoinIndex::build(&s, &it, "k").unwrap();
            assert_eq!((built.null_equality(), built.nan_equality()), (NullEquality::NullEqualsNothing, NanEquality::NanNeverEqual));
            let mut index = Some(built);
            for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                for nans in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
                    let ix = index.take().unwrap().with_null_equality(nulls).with_nan_equality(nans);
                    for jt in JoinType::ALL {
                        if !sampled() {
                            continue;
                        }
                        let (ls, rs): (&[&str], &[&str]) = match jt {
                            JoinType::LeftSemi | JoinType::LeftAnti => (&["id", "s"], &[]),
                            JoinType::RightSemi | JoinType::RightAnti => (&[], &["id", "f"]),
                            _ => (&["id", "s", "k"], &["id", "f", "k"]),
                        };
                        let what = format!("index {kind:?} {np}x{ni} {pct}% {jt:?} {nulls:?} {nans:?}");
                        let want = reference(&hp, &hi, &["k"], jt, nulls, nans);
                        let out = ix.probe(&s, &pt, "k", jt, ls, rs).unwrap_or_else(|e| panic!("{what}: {e}"));
                        let ranked = (nulls == NullEquality::NullEqualsNull && nullable) || (nans == NanEquality::NanEqualsNan && kind.is_float());
                        assert_eq!(out.reason.contains("keys joined as ranks"), ranked, "{what}: {}", out.reason);
                        let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                        let got = pairs_of(&l, &r);
                        assert!(got == want, "{what}: pairs (in order) differ: got {:?}, want {:?}", &got[..got.len().min(8)], &want[..want.len().min(8)]);
                        let table = out.table.to_host().unwrap();
                        assert_eq!(table_reference::rows_of_table(&table), table_reference::rows_of_pairs(&want, &hp, ls, &hi, rs), "{what}: materialized rows");
                        runs += 1;
                    }
                    index = Some(ix);
                }
            }
        }
    }
    println!("{runs} probes matched the reference");
}

// ---- CPU only -----------------------------------------------------------------------------------

/// The linear reference above agrees with the quadratic `table_reference::join` (as multisets),
/// on every kind, join type and equality.
#[test]
fn linear_reference_matches_the_testkit() {
    let mut rng = StdRng::seed_from_u64(0x1_55E9_0003);
    for kind in KINDS {
        for (nl, nr, draw) in [(0, 4, Draw::Mixed { domain: 3, pct: 20 }), (17, 23, Draw::Mixed { domain: 5, pct: 25 }), (40, 31, Draw::Mixed { domain: 30, pct: 0 }), (6, 7, Draw::AllNull), (5, 9, Draw::Same)] {
            let (hl, hr) = (side(&mut rng, kind, nl, draw, true), side(&mut rng, kind, nr, draw, false));
            for jt in JoinType::ALL {
                for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                    for nans in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
                        let names = kind.names();
                        let want = table_reference::join(&hl, names, &hr, names, None, jt, nulls, nans);
                        assert_eq!(sorted(reference(&hl, &hr, names, jt, nulls, nans)), want, "{kind:?} {nl}x{nr} {draw:?} {jt:?} {nulls:?} {nans:?}");
                    }
                }
            }
        }
    }
}

/// The generators give what the cases rely on: NaN and -0.0 among float keys, NULLs where
/// asked, keys wider than 32 bits among the wide `Int64` ones, disjoint ranges.
#[test]
fn generators_cover_the_special_keys() {
    let mut rng = StdRng::seed_from_u64(5);
    let t = side(&mut rng, Kind::F64, 400, Draw::Mixed { domain: 100, pct: 10 }, true);
    let v = t.column("k").unwrap().values();
    assert!(v.iter().any(|x| matches!(x, Value::Float(f) if f.is_nan())));
    assert!(v.iter().any(|x| matches!(x, Value::Float(f) if *f == 0.0 && f.is_sign_negative())));
    assert!(v.contains(&Value::Null));
    let t = side(&mut rng, Kind::I64Wide, 400, Draw::Mixed { domain: 100, pct: 0 }, false);
    let v = t.column("k").unwrap().values();
    let ints: Vec<i128> = v.iter().map(|x| if let Value::Int(i) = x { *i } else { panic!("{x:?}") }).collect();
    assert!(ints.iter().max().unwrap() - ints.iter().min().unwrap() > u32::MAX as i128);
    for kind in KINDS {
        let (a, b) = (side(&mut rng, kind, 50, Draw::Range { lo: 0 }, true), side(&mut rng, kind, 50, Draw::Range { lo: 50 }, false));
        for nans in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
            assert!(reference(&a, &b, kind.names(), JoinType::Inner, NullEquality::NullEqualsNull, nans).is_empty(), "{kind:?}");
        }
        let t = side(&mut rng, kind, 5, Draw::AllNull, true);
        assert!(t.column("k").unwrap().values().iter().all(|x| *x == Value::Null), "{kind:?}");
    }
}
