//! GPU tests of the nested-loop theta join through the front door (`plan::Join` with a filter,
//! `Algorithm::ThetaNestedLoop`; `Algorithm::ThetaMixed` for equality conjuncts, the nested
//! loop's `Strategy::Auto`) against the CPU reference (`gpujoin_testkit::table_reference`).
//!
//! They run on the GPU when one is present, print `SKIPPED` when none is, and fail loudly with
//! GPUJOIN_REQUIRE_GPU=1. Seeds are fixed; the device pool is poisoned (0xAB bytes) before each
//! call so that an output or internal buffer a kernel forgets to write shows up as garbage.
//! Pairs compare as canonical (sorted) lists; the documented nested-loop order (by left row,
//! right rows ascending, unmatched right rows last) is checked in order as well. Aggregates per
//! left row are each left row's aggregate alone (a one-row slice of the left table: the front
//! door has no per-left-row aggregate). `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs
//! fewer property cases and fewer left rows in the fast-path test (the right side, which is
//! tiled, keeps its size).

mod common;
mod theta_common;
use common::stream;

use gpujoin_device::testing::{cases, rows};
use gpujoin_device::{DeviceBuffer, Error, Stream};
use gpujoin_join::chunked::{ChunkBudget, ChunkRange, ChunkSource};
use gpujoin_join::plan::{Algorithm, Join};
use gpujoin_join::predicate::{col_l, col_r, lit, CmpOp, Expr, Predicate, Scalar, Side};
use gpujoin_join::table::{HostColumn, HostTable, Table};
use gpujoin_join::theta::{Agg, AggValue};
use gpujoin_join::{GatherMaps, JoinType, RowId, TestingOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use theta_common::{agg_arg, aggregate_of, aggregate_per_left_row_of, aggregate_rows, diff, fail, ordered, pairs, reference, rows_to_check, table, Pair};

const POISON: u8 = 0xAB;

fn poison(s: &Stream, bytes: usize) {
    let mut b: DeviceBuffer<u8> = s.alloc(bytes.max(1 << 16)).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
}

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, max_shrink_iters: 32, ..Config::default() });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

// ---- value domains: every type, with NaN, infinities, zeros of both signs, extreme integers,
// ---- empty, long, shared-prefix and non-ASCII strings ----

// Finite values are multiples of 0.5 below 2^40: float sums of them are exact in any order, so a
// SUM in another order than the reference still agrees (infinities and NaN are order-free).
const F: [f64; 10] = [f64::NAN, f64::NEG_INFINITY, -1.5, -0.0, 0.0, 2.5, f64::INFINITY, 1e12, -7.0, 3.0];

/// The f32 domain: `F` with 1e6 in place of 1e12. The device computes `+`/`-` on f32 in f32 (as
/// the predicate module documents), while `table_reference::eval` computes them in f64, so the
/// f32 values keep every sum of up to four of them exact in f32 (below 2^21, multiples of 0.5):
/// both agree.
fn f32_at(k: usize) -> f32 {
    if F[k] == 1e12 {
        1e6
    } else {
        F[k] as f32
    }
}

fn long(c: char, n: usize, tail: &str) -> String {
    format!("{}{tail}", c.to_string().repeat(n))
}

fn strings() -> Vec<String> {
    vec![
        String::new(),
        "a".into(),
        "ab".into(),
        "abc".into(),
        "é".into(),
        "z".into(),
        "aé".into(),
        long('a', 300, ""),
        long('a', 300, "b"),
        "日本".into(),
    ]
}

const DOMAIN: usize = 10;
const I32S: [i32; DOMAIN] = [i32::MIN, -3, -1, 0, 1, 2, 3, i32::MAX, 7, -7];
const I64S: [i64; DOMAIN] = [i64::MIN, -3, -1, 0, 1, 2, 3, i64::MAX, 7, -7];
const U32S: [u32; DOMAIN] = [0, 1, 2, 3, 4, 5, 6, u32::MAX, 7, u32::MAX - 1];
const U64S: [u64; DOMAIN] = [0, 1, 2, 3, 4, 5, 6, u64::MAX, 7, u64::MAX - 1];

fn scalar(t: usize, k: usize) -> Scalar {
    match t {
        0 => Scalar::I32(I32S[k]),
        1 => Scalar::I64(I64S[k]),
        2 => Scalar::U32(U32S[k]),
        3 => Scalar::U64(U64S[k]),
        4 => Scalar::F32(f32_at(k)),
        5 => Scalar::F64(F[k]),
        _ => Scalar::Utf8(strings()[k].clone()),
    }
}

/// A table with one column of every type (c0: Int32, c1: Int64, c2: UInt32, c3: UInt64,
/// c4: Float32, c5: Float64, c6: Utf8); `rows[i][t]` indexes type t's domain.
fn relation(rows: &[Vec<usize>]) -> HostTable {
    let ks = |t: usize| rows.iter().map(move |r| r[t]);
    let strs = strings();
    table(vec![
        HostColumn::from_values(ks(0).map(|k| I32S[k]).collect()),
        HostColumn::from_values(ks(1).map(|k| I64S[k]).collect()),
        HostColumn::from_values(ks(2).map(|k| U32S[k]).collect()),
        HostColumn::from_values(ks(3).map(|k| U64S[k]).collect()),
        HostColumn::from_values(ks(4).map(f32_at).collect()),
        HostColumn::from_values(ks(5).map(|k| F[k]).collect()),
        HostColumn::utf8(ks(6).map(|k| strs[k].as_str())),
    ])
}

fn arb_expr(t: usize) -> BoxedStrategy<Expr> {
    let leaf = (0..5usize, 0..DOMAIN).prop_map(move |(kind, k)| match kind {
        0 | 1 => col_l(t),
        2 | 3 => col_r(t),
        _ => Expr::Literal(scalar(t, k)),
    });
    if t == 6 {
        return leaf.boxed();
    }
    leaf.prop_recursive(2, 6, 2, |inner| (inner.clone(), inner, any::<bool>()).prop_map(|(a, b, add)| if add { a + b } else { a - b })).boxed()
}

fn arb_cmp() -> impl Strategy<Value = Predicate> {
    (0..7usize, 0..6usize).prop_flat_map(|(t, op)| (arb_expr(t), arb_expr(t)).prop_map(move |(a, b)| Predicate::cmp(CmpOp::ALL[op], a, b)))
}

fn arb_pred() -> impl Strategy<Value = Predicate> {
    let leaf = prop_oneof![1 => Just(Predicate::True), 12 => arb_cmp()];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Predicate::And),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Predicate::Or),
            inner.prop_map(|p| !p),
        ]
    })
}

fn arb_rows(max: usize) -> impl Strategy<Value = Vec<Vec<usize>>> {
    prop::collection::vec(prop::collection::vec(0..DOMAIN, 7), 0..max)
}

fn upload(s: &Stream, t: &HostTable) -> Table {
    Table::upload(s, t).unwrap()
}

/// The join of `l` and `r` on `pred` by `alg`.
fn join<'a>(l: &'a Table, r: &'a Table, pred: &Predicate, jt: JoinType, alg: Algorithm) -> Join<'a> {
    Join::new(jt).tables(l, r).filter(pred.clone()).algorithm(alg)
}

/// Checks one join by `alg` against the reference: canonical pairs, `count`, and (the nested
/// loop) the documented order.
fn check_join(s: &Stream, l: &HostTable, r: &HostTable, pred: &Predicate, jt: JoinType, alg: Algorithm, what: &str) -> Result<(), TestCaseError> {
    let (lt, rt) = (upload(s, l), upload(s, r));
    let j = join(&lt, &rt, pred, jt, alg);
    poison(s, (l.rows() * r.rows() * 8).min(1 << 26));
    let out = j.run(s).map_err(|e| fail(format!("{what} {jt:?} {}: {e}", alg.name())))?;
    if alg != Algorithm::Auto {
        prop_assert_eq!(out.algorithm, alg, "{} {:?}: {}", what, jt, out.reason);
    }
    let maps = out.maps.as_ref().expect("theta joins return maps");
    let got = pairs(maps, jt)?;
    let want = reference(l, r, pred, jt);
    prop_assert!(got == want, "{} {:?} {}: {}", what, jt, alg.name(), diff(&got, &want));
    poison(s, 1 << 20);
    let size = j.count(s).map_err(|e| fail(format!("{e}")))?;
    prop_assert_eq!(size, want.len() as u64, "{} {:?} size", what, jt);
    if alg == Algorithm::ThetaNestedLoop {
        check_order(maps, jt)?;
    }
    Ok(())
}

/// The nested-loop order: pairs sorted by (left, right) with unmatched-left rows in place, then
/// unmatched right rows ascending; semi/anti rows ascending.
fn check_order(maps: &GatherMaps, jt: JoinType) -> Result<(), TestCaseError> {
    let pairs = maps.pairs().unwrap();
    let (head, tail): (Vec<_>, Vec<_>) = pairs.iter().partition(|p| !p.0.is_none());
    let sorted = |v: &[(RowId, RowId)]| v.windows(2).all(|w| w[0] < w[1]);
    prop_assert!(sorted(&head), "{:?}: left part out of order", jt);
    prop_assert!(sorted(&tail), "{:?}: right part out of order", jt);
    if let Some(first_tail) = pairs.iter().position(|p| p.0.is_none()) {
        prop_assert!(pairs[first_tail..].iter().all(|p| p.0.is_none()), "{:?}: unmatched right rows not last", jt);
    }
    Ok(())
}

#[test]
fn random_predicates_every_type_and_join_type() {
    let Some(s) = stream("random_predicates_every_type_and_join_type") else { return };
    run(cases(160, 24), 0x7E7A_0001, (arb_rows(40), arb_rows(70), arb_pred(), 0..8usize), |(l, r, p, jt)| {
        let (l, r) = (relation(&l), relation(&r));
        check_join(&s, &l, &r, &p, JoinType::ALL[jt], Algorithm::ThetaNestedLoop, &format!("{p:?}"))
    });
}

#[test]
fn mixed_equality_and_residual() {
    let Some(s) = stream("mixed_equality_and_residual") else { return };
    // Equality conjuncts on every fixed-width type (NaN never equal, -0.0 == 0.0) plus a residual.
    let strat = (arb_rows(60), arb_rows(60), prop::collection::vec(0..6usize, 1..3), arb_pred(), 0..8usize);
    run(cases(120, 16), 0x7E7A_0002, strat, |(l, r, eqs, p, jt)| {
        let (l, r) = (relation(&l), relation(&r));
        let mut conj: Vec<Predicate> = eqs.iter().map(|&t| col_l(t).equals(col_r(t))).collect();
        conj.push(p);
        let c = Predicate::And(conj);
        let jt = JoinType::ALL[jt];
        check_join(&s, &l, &r, &c, jt, Algorithm::ThetaMixed, "mixed")?;
        check_join(&s, &l, &r, &c, jt, Algorithm::ThetaNestedLoop, "mixed as nested loop")
    });
}

fn same_agg(got: AggValue, want: AggValue) -> bool {
    match (got, want) {
        (AggValue::Float(a), AggValue::Float(b)) => {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
        }
        (a, b) => a == b,
    }
}

/// The nested loop's aggregate (`Join::aggregate` with `Algorithm::ThetaNestedLoop`).
fn nested_loop_aggregate(s: &Stream, l: &Table, r: &Table, pred: &Predicate, agg: Agg, col: Option<(Side, usize)>) -> gpujoin_device::Result<AggValue> {
    let arg = agg_arg(col);
    join(l, r, pred, JoinType::Inner, Algorithm::ThetaNestedLoop).aggregate(s, agg, arg.as_ref().map(|(side, n)| (*side, n.as_str())))
}

/// The nested loop's aggregate of each of the left `rows` alone.
fn nested_loop_aggregate_rows(s: &Stream, l: &Table, r: &Table, pred: &Predicate, agg: Agg, col: Option<(Side, usize)>, rows: &[usize]) -> gpujoin_device::Result<Vec<AggValue>> {
    aggregate_rows(s, l, r, pred, Algorithm::ThetaNestedLoop, TestingOptions::DEFAULT, agg, col, rows)
}

#[test]
fn aggregates_total_and_per_left_row() {
    let Some(s) = stream("aggregates_total_and_per_left_row") else { return };
    let strat = (arb_rows(50), arb_rows(80), arb_pred(), 0..4usize, 0..2usize, 0..6usize);
    run(cases(160, 24), 0x7E7A_0003, strat, |(l, r, p, agg, side, t)| {
        let (l, r) = (relation(&l), relation(&r));
        let agg = [Agg::Count, Agg::Sum, Agg::Min, Agg::Max][agg];
        let col = if agg == Agg::Count && t == 5 { None } else { Some((if side == 0 { Side::Left } else { Side::Right }, t)) };
        let (lt, rt) = (upload(&s, &l), upload(&s, &r));
        let inner = reference(&l, &r, &p, JoinType::Inner);
        poison(&s, 1 << 20);
        let got = nested_loop_aggregate(&s, &lt, &rt, &p, agg, col).map_err(|e| fail(format!("{e}")))?;
        let want = aggregate_of(&l, &r, &inner, agg, col);
        prop_assert!(same_agg(got, want), "{:?} {:?} {:?}: {:?} vs {:?}", p, agg, col, got, want);
        poison(&s, 1 << 20);
        let rows = rows_to_check(l.rows(), 64);
        let per = nested_loop_aggregate_rows(&s, &lt, &rt, &p, agg, col, &rows).map_err(|e| fail(format!("{e}")))?;
        let want = aggregate_per_left_row_of(&l, &r, &inner, agg, col);
        prop_assert_eq!(per.len(), rows.len());
        for (g, &i) in per.iter().zip(&rows) {
            prop_assert!(same_agg(*g, want[i]), "row {}: {:?} vs {:?} ({:?} {:?})", i, g, want[i], p, agg);
        }
        Ok(())
    });
}

// ---- bigger relations: integers and floats drawn at random, a few thousand rows per side ----

/// A table of (c0: i32, c1: i64, c2: f64 with NaN, c3: u32, c4: Utf8).
fn numeric(rng: &mut StdRng, n: usize, domain: i64) -> HostTable {
    let a: Vec<i32> = (0..n).map(|_| rng.gen_range(0..domain) as i32).collect();
    let x: Vec<i64> = (0..n).map(|_| rng.gen_range(-domain..domain)).collect();
    let f: Vec<f64> = (0..n).map(|i| if i % 97 == 5 { f64::NAN } else { rng.gen_range(-1.0..1.0) * domain as f64 }).collect();
    let u: Vec<u32> = (0..n).map(|_| rng.gen_range(0..domain as u32)).collect();
    let st: Vec<String> = (0..n).map(|_| format!("k{:03}", rng.gen_range(0..domain.min(500)))).collect();
    table(vec![HostColumn::from_values(a), HostColumn::from_values(x), HostColumn::from_values(f), HostColumn::from_values(u), HostColumn::utf8(st)])
}

fn big_predicates() -> Vec<(&'static str, Predicate)> {
    vec![
        ("lt", col_l(0).less(col_r(0))),
        ("ge", col_l(0).greater_eq(col_r(0))),
        ("ne", col_l(3).not_equals(col_r(3))),
        ("eq i32", col_l(0).equals(col_r(0))),
        ("or", col_l(0).greater(col_r(0)).or(col_l(1).equals(col_r(1)))),
        ("band", (col_r(1) - lit(3i64)).less_eq(col_l(1)).and(col_l(1).less_eq(col_r(1) + lit(3i64)))),
        ("not float", !col_l(2).less(col_r(2))),
        ("strings", col_l(4).less(col_r(4)).and(col_l(0).less(lit(30)))),
        ("mixed expr", (col_l(0) + col_r(0)).equals(lit(40)).or(col_r(3).less(lit(2u32)))),
        ("eq + residual", col_l(3).equals(col_r(3)).and(col_l(2).less(col_r(2)))),
        ("nothing", col_l(0).less(lit(i32::MIN))),
        ("everything", Predicate::True),
    ]
}

#[test]
fn bigger_relations_and_chunked_inner_side() {
    let Some(s) = stream("bigger_relations_and_chunked_inner_side") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A_0004);
    // (left rows, right rows, domain): few left rows split the right side into several chunks.
    for (nl, nr, domain) in [(7usize, 3000usize, 50i64), (1, 2500, 10), (600, 500, 60), (257, 800, 1000)] {
        let (l, r) = (numeric(&mut rng, nl, domain), numeric(&mut rng, nr, domain));
        for (name, p) in big_predicates() {
            for jt in [JoinType::Inner, JoinType::Left, JoinType::Full, JoinType::RightAnti, JoinType::LeftSemi] {
                if name == "everything" && jt != JoinType::Inner {
                    continue;
                }
                check_join(&s, &l, &r, &p, jt, Algorithm::ThetaNestedLoop, name).unwrap_or_else(|e| panic!("{nl}x{nr} {name}: {e}"));
            }
            // The front door's own choice (sorted, mixed or nested loop by the predicate's shape).
            check_join(&s, &l, &r, &p, JoinType::Inner, Algorithm::Auto, name).unwrap_or_else(|e| panic!("{nl}x{nr} {name} auto: {e}"));
            let (lt, rt) = (upload(&s, &l), upload(&s, &r));
            let inner = reference(&l, &r, &p, JoinType::Inner);
            for col in [Some((Side::Right, 1)), Some((Side::Left, 2)), Some((Side::Right, 2))] {
                for agg in [Agg::Sum, Agg::Max] {
                    let got = nested_loop_aggregate(&s, &lt, &rt, &p, agg, col).unwrap();
                    let want = aggregate_of(&l, &r, &inner, agg, col);
                    assert!(same_agg(got, want), "{nl}x{nr} {name} {agg:?} {col:?}: {got:?} vs {want:?}");
                }
            }
        }
    }
}

/// Output rows `off[a]..off[b]` of the whole left rows `a..b`.
fn left_rows(off: &[u64], a: u64, b: u64) -> ChunkRange {
    ChunkRange { output: off[a as usize]..off[b as usize], rows: a..b, first_row_offset: off[a as usize], last_row_offset: None }
}

#[test]
fn prepared_produce_ranges_concatenate_to_the_join() {
    let Some(s) = stream("prepared_produce_ranges_concatenate_to_the_join") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A_0005);
    // Reduced: the largest case keeps several blocks of left rows and a right side of chunks.
    // The prepared join is the source of `Join::chunks` (the nested loop for this predicate);
    // its ranges of left rows are produced directly (`ChunkSource::produce`).
    for (nl, nr) in [(0usize, 10usize), (600, 0), (5, 2000), (rows(1000, 400), rows(700, 300))] {
        let (l, r) = (numeric(&mut rng, nl, 40), numeric(&mut rng, nr, 40));
        let p = col_l(0).greater(col_r(0)).or(col_l(1).equals(col_r(1)));
        let (lt, rt) = (upload(&s, &l), upload(&s, &r));
        for jt in [JoinType::Inner, JoinType::Left] {
            poison(&s, 1 << 24);
            let whole = ordered(join(&lt, &rt, &p, jt, Algorithm::ThetaNestedLoop).run(&s).unwrap().maps.as_ref().unwrap());
            let chunks = join(&lt, &rt, &p, jt, Algorithm::Auto).chunks(&s, ChunkBudget::Bytes(1 << 30)).unwrap();
            let prepared = chunks.source();
            assert_eq!(prepared.path(), "nested loop");
            assert_eq!(prepared.left_rows(), nl as u64);
            assert_eq!(prepared.tail_rows(), 0);
            let off = s.copy_to_host(&prepared.offsets()).unwrap();
            assert_eq!(off.len(), nl + 1);
            assert_eq!(*off.last().unwrap(), whole.len() as u64);
            assert!(off.windows(2).all(|w| w[0] <= w[1]));
            // Random cuts.
            let mut cuts: Vec<u64> = (0..rng.gen_range(0..6)).map(|_| rng.gen_range(0..=nl as u64)).collect();
            cuts.extend([0, nl as u64]);
            cuts.sort();
            let mut cat = Vec::new();
            for w in cuts.windows(2) {
                poison(&s, 1 << 22);
                let part = prepared.produce(&s, &left_rows(&off, w[0], w[1])).unwrap();
                assert_eq!(part.rows(), off[w[1] as usize] - off[w[0] as usize]);
                cat.extend(ordered(&part));
            }
            assert_eq!(cat, whole, "{nl}x{nr} {jt:?}");
            let want = reference(&l, &r, &p, jt);
            assert_eq!(whole, want, "{nl}x{nr} {jt:?}: the nested-loop order is the canonical order here");
            let past_the_end = ChunkRange { output: whole.len() as u64..whole.len() as u64, rows: 0..nl as u64 + 1, first_row_offset: 0, last_row_offset: None };
            assert!(prepared.produce(&s, &past_the_end).is_err());
        }
    }
}

#[test]
fn selectivity_zero_and_one_and_empty_relations() {
    let Some(s) = stream("selectivity_zero_and_one_and_empty_relations") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A_0006);
    // Reduced: the largest case still spans several blocks; only the full run's 2000 x 1999
    // (4M pairs) passes the 2^21-pair cap below and counts without materializing.
    for (nl, nr) in [(0usize, 0usize), (0, 33), (33, 0), (1, 1), (31, 33), (rows(2000, 600), rows(1999, 599))] {
        let (l, r) = (numeric(&mut rng, nl, 100), numeric(&mut rng, nr, 100));
        let (lt, rt) = (upload(&s, &l), upload(&s, &r));
        for p in [Predicate::True, Predicate::Or(vec![]), col_l(0).less(lit(-1)), col_l(0).greater_eq(lit(0))] {
            for jt in JoinType::ALL {
                let j = join(&lt, &rt, &p, jt, Algorithm::ThetaNestedLoop);
                let want = reference(&l, &r, &p, jt);
                poison(&s, 1 << 24);
                let size = j.count(&s).unwrap();
                assert_eq!(size, want.len() as u64, "{nl}x{nr} {p:?} {jt:?}");
                if want.len() > 1 << 21 {
                    continue;
                }
                let got = pairs(j.run(&s).unwrap().maps.as_ref().unwrap(), jt).unwrap();
                assert!(got == want, "{nl}x{nr} {p:?} {jt:?}: {}", diff(&got, &want));
            }
        }
    }
}

#[test]
fn schema_mismatches_and_bad_aggregates_are_errors() {
    let Some(s) = stream("schema_mismatches_and_bad_aggregates_are_errors") else { return };
    let l = table(vec![HostColumn::from_values(vec![1i32, 2]), HostColumn::utf8(["a", "b"])]);
    let r = table(vec![HostColumn::from_values(vec![1i64])]);
    let (lt, rt) = (upload(&s, &l), upload(&s, &r));
    // An i32 compared with an i64: no implicit casts.
    let c = col_l(0).less(col_r(0));
    let j = join(&lt, &rt, &c, JoinType::Inner, Algorithm::ThetaNestedLoop);
    assert!(matches!(j.run(&s), Err(Error::InvalidArgument(_))));
    assert!(matches!(j.chunks(&s, ChunkBudget::Bytes(1 << 20)), Err(Error::InvalidArgument(_))));
    let c = col_l(0).less(lit(5));
    let j = join(&lt, &rt, &c, JoinType::Inner, Algorithm::ThetaNestedLoop);
    assert!(matches!(j.aggregate(&s, Agg::Sum, None), Err(Error::InvalidArgument(_))), "SUM needs a column");
    assert!(matches!(j.aggregate(&s, Agg::Sum, Some((Side::Left, "c1"))), Err(Error::Unsupported { .. })), "SUM of a string column");
    assert!(matches!(j.aggregate(&s, Agg::Max, Some((Side::Right, "c3"))), Err(Error::UnknownColumn { .. })), "a missing column");
    assert_eq!(j.aggregate(&s, Agg::Count, None).unwrap(), AggValue::Int(2));
    // A semi join is computed whole (no output per left row): left rows cannot be produced.
    let chunks = join(&lt, &rt, &c, JoinType::LeftSemi, Algorithm::Auto).chunks(&s, ChunkBudget::Bytes(1 << 20)).unwrap();
    assert_eq!(chunks.source().path(), "whole");
    let one_row = ChunkRange { output: 0..1, rows: 0..1, first_row_offset: 0, last_row_offset: None };
    assert!(chunks.source().produce(&s, &one_row).is_err());
}

// ---- the fast path (one or two comparisons of i32/u32 columns under AND/OR; its SUM of a right
// ---- i32/u32 column adds exact 32-bit halves per group of 128 right rows) against a native oracle ----

fn edgy_i32(rng: &mut StdRng) -> i32 {
    match rng.gen_range(0..4) {
        0 => [i32::MIN, i32::MIN + 1, -65_536, -1, 0, 1, 65_535, i32::MAX - 1, i32::MAX][rng.gen_range(0..9)],
        1 => rng.gen_range(-20..20),
        _ => rng.gen(),
    }
}

fn edgy_u32(rng: &mut StdRng) -> u32 {
    match rng.gen_range(0..4) {
        0 => [0, 1, 65_535, 65_536, 0x7FFF_FFFF, 0x8000_0000, u32::MAX - 1, u32::MAX][rng.gen_range(0..8)],
        1 => rng.gen_range(0..20),
        _ => rng.gen(),
    }
}

fn cmp_native<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

#[test]
fn fast_path_32_bit_comparisons_and_sums() {
    let Some(s) = stream("fast_path_32_bit_comparisons_and_sums") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A_0005);
    // Several 1024-row tiles and 128-row groups per chunk with a partial last group; one and three
    // left rows split the right side into many chunks.
    for (nl, nr) in [(rows(700, 70), 2300usize), (1, 2900), (3, 1000)] {
        let (li, lu): (Vec<i32>, Vec<u32>) = (0..nl).map(|_| (edgy_i32(&mut rng), edgy_u32(&mut rng))).unzip();
        let (ri, ru): (Vec<i32>, Vec<u32>) = (0..nr).map(|_| (edgy_i32(&mut rng), edgy_u32(&mut rng))).unzip();
        let l = table(vec![HostColumn::from_values(li.clone()), HostColumn::from_values(lu.clone())]);
        let r = table(vec![HostColumn::from_values(ri.clone()), HostColumn::from_values(ru.clone())]);
        let (lt, rt) = (upload(&s, &l), upload(&s, &r));
        // (leaves as (column, operator), OR?): every operator on each type, then pairs of them.
        let mut cases: Vec<(Vec<(usize, CmpOp)>, bool)> = Vec::new();
        for op in CmpOp::ALL {
            cases.push((vec![(0, op)], false));
            cases.push((vec![(1, op)], false));
        }
        for (i, &op) in CmpOp::ALL.iter().enumerate() {
            let other = CmpOp::ALL[(i * 5 + 2) % 6];
            cases.push((vec![(0, op), (1, other)], i % 2 == 0));
            cases.push((vec![(1, other), (0, op)], i % 2 == 1));
        }
        for (k, (leaves, any)) in cases.iter().enumerate() {
            let leaf_pred = |&(c, op): &(usize, CmpOp)| Predicate::cmp(op, col_l(c), col_r(c));
            let p = if leaves.len() == 1 {
                leaf_pred(&leaves[0])
            } else if *any {
                leaf_pred(&leaves[0]).or(leaf_pred(&leaves[1]))
            } else {
                leaf_pred(&leaves[0]).and(leaf_pred(&leaves[1]))
            };
            let matches = |a: usize, b: usize| {
                let leaf = |&(col, op): &(usize, CmpOp)| if col == 0 { cmp_native(op, li[a], ri[b]) } else { cmp_native(op, lu[a], ru[b]) };
                if *any { leaves.iter().any(leaf) } else { leaves.iter().all(leaf) }
            };
            // Per left row: (count, sum of right i32, sum of right u32).
            let per: Vec<(u64, i128, i128)> = (0..nl)
                .map(|a| {
                    (0..nr).filter(|&b| matches(a, b)).fold((0, 0, 0), |(n, x, y), b| (n + 1, x + ri[b] as i128, y + ru[b] as i128))
                })
                .collect();
            let total = per.iter().fold((0u64, 0i128, 0i128), |t, p| (t.0 + p.0, t.1 + p.1, t.2 + p.2));
            let what = format!("{nl}x{nr} {p:?}");
            let sum_or_none = |n: u64, v: i128| if n == 0 { AggValue::None } else { AggValue::Int(v) };
            for (col, want) in [(0usize, sum_or_none(total.0, total.1)), (1, sum_or_none(total.0, total.2))] {
                poison(&s, 1 << 20);
                let got = nested_loop_aggregate(&s, &lt, &rt, &p, Agg::Sum, Some((Side::Right, col))).unwrap();
                assert_eq!(got, want, "{what}: SUM of right column {col}");
            }
            poison(&s, 1 << 20);
            let got = nested_loop_aggregate(&s, &lt, &rt, &p, Agg::Count, None).unwrap();
            assert_eq!(got, AggValue::Int(total.0 as i128), "{what}: COUNT");
            // A left column's aggregate comes from the match count alone.
            let want_left: i128 = (0..nl).map(|a| per[a].0 as i128 * lu[a] as i128).sum();
            let got = nested_loop_aggregate(&s, &lt, &rt, &p, Agg::Sum, Some((Side::Left, 1))).unwrap();
            assert_eq!(got, sum_or_none(total.0, want_left), "{what}: SUM of left column 1");
            poison(&s, 1 << 20);
            let col = k % 2;
            let rows = rows_to_check(nl, 64);
            let got = nested_loop_aggregate_rows(&s, &lt, &rt, &p, Agg::Sum, Some((Side::Right, col)), &rows).unwrap();
            let want: Vec<AggValue> = rows.iter().map(|&a| per[a]).map(|(n, x, y)| sum_or_none(n, if col == 0 { x } else { y })).collect();
            assert_eq!(got, want, "{what}: per-row SUM of right column {col} (left rows {rows:?})");
            // The join (count and write passes; FULL also marks the matched right rows).
            let jt = if k % 3 == 0 { JoinType::Full } else { JoinType::Inner };
            poison(&s, 1 << 24);
            let out = join(&lt, &rt, &p, jt, Algorithm::ThetaNestedLoop).run(&s).unwrap();
            let mut want: Vec<Pair> = Vec::new();
            let mut right_matched = vec![false; nr];
            for a in 0..nl {
                let before = want.len();
                for b in (0..nr).filter(|&b| matches(a, b)) {
                    want.push((Some(a as u32), Some(b as u32)));
                    right_matched[b] = true;
                }
                if jt == JoinType::Full && want.len() == before {
                    want.push((Some(a as u32), None));
                }
            }
            if jt == JoinType::Full {
                want.extend((0..nr).filter(|&b| !right_matched[b]).map(|b| (None, Some(b as u32))));
            }
            let got = ordered(out.maps.as_ref().unwrap());
            assert_eq!(got.len(), want.len(), "{what} {jt:?}: rows");
            assert!(got == want, "{what} {jt:?}: pairs differ (in the documented order)");
        }
    }
}
