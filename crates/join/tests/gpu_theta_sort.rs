//! GPU tests of the sort-based theta join (crates/join/src/theta/sorted.rs) against the CPU
//! reference (theta_reference): every inequality and the band, every numeric type, NaN, ±inf,
//! -0.0/0.0, integer extremes, duplicates, empty relations, selectivity 0 and 1, band widths
//! negative/zero/huge/NaN, all join types, aggregates in total and per left row, sizes, chunked
//! production and direct materialization. `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs
//! fewer property cases, a smaller `theta_sort_large` and fewer right-side sizes on the small
//! aggregate path (still across its 4096-row runs and its 65536-row threshold).
mod common;

use gpujoin_device::testing::{cases, pick, rows};
use gpujoin_device::Stream;
use gpujoin_join::device_relation::{DeviceColumnData, DeviceRelation};
use gpujoin_join::predicate::{col_l, col_r, lit, CheckedPredicate, CmpOp, ColumnData, DataType, Predicate, RangeCondition, Relation, Scalar, Side};
use gpujoin_join::theta::sorted::{AggregatePath, SortedTesting, SortedThetaJoin, SMALL_RIGHT_MAX};
use gpujoin_join::theta::{Agg, AggValue};
use gpujoin_join::{GatherMaps, JoinType, RowId};
use gpujoin_testkit::theta_reference::{theta_aggregate, theta_aggregate_per_left_row, theta_join, theta_join_size};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TYPES: [DataType; 6] = [DataType::I32, DataType::I64, DataType::U32, DataType::U64, DataType::F32, DataType::F64];
const JOIN_TYPES: [JoinType; 8] = [
    JoinType::Inner,
    JoinType::Left,
    JoinType::Right,
    JoinType::Full,
    JoinType::LeftSemi,
    JoinType::LeftAnti,
    JoinType::RightSemi,
    JoinType::RightAnti,
];

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, max_shrink_iters: 32, ..Config::default() });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

fn stream(name: &str) -> Option<Stream> {
    common::stream(name)
}

// Every entry point of the sort-based theta join runs with its outputs poisoned (0xFF before the
// kernels write them, so that unwritten elements show): the test-only `SortedTesting` options.

const POISONED: SortedTesting = SortedTesting { poison_outputs: true, aggregate_path: AggregatePath::Auto };

type R<T> = gpujoin_device::Result<T>;

fn sorted_theta_join(s: &Stream, l: &DeviceRelation, r: &DeviceRelation, p: &CheckedPredicate, jt: JoinType) -> R<GatherMaps> {
    POISONED.join(s, l, r, p, jt)
}

fn sorted_theta_join_size(s: &Stream, l: &DeviceRelation, r: &DeviceRelation, p: &CheckedPredicate, jt: JoinType) -> R<u64> {
    POISONED.join_size(s, l, r, p, jt)
}

fn sorted_theta_aggregate(s: &Stream, l: &DeviceRelation, r: &DeviceRelation, p: &CheckedPredicate, agg: Agg, col: Option<(Side, usize)>) -> R<AggValue> {
    POISONED.aggregate(s, l, r, p, agg, col)
}

fn sorted_theta_aggregate_per_left_row(s: &Stream, l: &DeviceRelation, r: &DeviceRelation, p: &CheckedPredicate, agg: Agg, col: Option<(Side, usize)>) -> R<Vec<AggValue>> {
    POISONED.aggregate_per_left_row(s, l, r, p, agg, col)
}

fn sorted_theta_materialize(s: &Stream, l: &DeviceRelation, r: &DeviceRelation, p: &CheckedPredicate, lc: &[usize], rc: &[usize]) -> R<Vec<DeviceColumnData>> {
    POISONED.materialize(s, l, r, p, lc, rc)
}

fn prepare<'a>(s: &Stream, l: &'a DeviceRelation, r: &'a DeviceRelation, cond: &RangeCondition, jt: JoinType) -> R<SortedThetaJoin<'a>> {
    POISONED.prepare(s, l, r, cond, jt)
}

/// The aggregate on `cond` through `path`.
#[allow(clippy::too_many_arguments)]
fn aggregate_via(
    s: &Stream,
    l: &DeviceRelation,
    r: &DeviceRelation,
    cond: &RangeCondition,
    agg: Agg,
    col: Option<(Side, usize)>,
    per_row: bool,
    path: AggregatePath,
) -> R<(AggValue, Vec<AggValue>)> {
    SortedTesting { aggregate_path: path, ..POISONED }.aggregate_on_condition(s, l, r, cond, agg, col, per_row)
}

/// Small-domain values (shifted by `shift`), with 12% specials when `specials`.
fn gen_column(rng: &mut StdRng, t: DataType, n: usize, shift: i64, specials: bool) -> ColumnData {
    let small = |rng: &mut StdRng| rng.gen_range(-6i64..=6) + shift;
    let special = |rng: &mut StdRng| specials && rng.gen_bool(0.12);
    match t {
        DataType::I32 => ColumnData::I32((0..n).map(|_| if special(rng) { [i32::MIN, i32::MAX][rng.gen_range(0..2)] } else { small(rng) as i32 }).collect()),
        DataType::I64 => ColumnData::I64((0..n).map(|_| if special(rng) { [i64::MIN, i64::MAX][rng.gen_range(0..2)] } else { small(rng) }).collect()),
        DataType::U32 => ColumnData::U32((0..n).map(|_| if special(rng) { [0, u32::MAX][rng.gen_range(0..2)] } else { (small(rng) + 200) as u32 }).collect()),
        DataType::U64 => ColumnData::U64((0..n).map(|_| if special(rng) { [0, u64::MAX][rng.gen_range(0..2)] } else { (small(rng) + 200) as u64 }).collect()),
        DataType::F32 => {
            let sp = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, 1e30, -1e30];
            ColumnData::F32((0..n).map(|_| if special(rng) { sp[rng.gen_range(0..sp.len())] } else { small(rng) as f32 / 2.0 }).collect())
        }
        DataType::F64 => {
            let sp = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 1e300, -1e300, -f64::NAN];
            ColumnData::F64((0..n).map(|_| if special(rng) { sp[rng.gen_range(0..sp.len())] } else { small(rng) as f64 / 2.0 }).collect())
        }
        DataType::Utf8 => unreachable!(),
    }
}

/// Band widths worth testing for a type: negative, zero, small, huge (overflow), NaN, ±inf.
fn widths(t: DataType) -> Vec<Scalar> {
    match t {
        DataType::I32 => vec![Scalar::I32(-1), Scalar::I32(0), Scalar::I32(2), Scalar::I32(i32::MAX), Scalar::I32(i32::MIN)],
        DataType::I64 => vec![Scalar::I64(-1), Scalar::I64(0), Scalar::I64(3), Scalar::I64(i64::MAX), Scalar::I64(i64::MIN)],
        DataType::U32 => vec![Scalar::U32(0), Scalar::U32(1), Scalar::U32(u32::MAX)],
        DataType::U64 => vec![Scalar::U64(0), Scalar::U64(2), Scalar::U64(u64::MAX)],
        DataType::F32 => vec![Scalar::F32(-1.0), Scalar::F32(0.0), Scalar::F32(-0.0), Scalar::F32(1.5), Scalar::F32(f32::INFINITY), Scalar::F32(f32::NEG_INFINITY), Scalar::F32(f32::NAN), Scalar::F32(1e30)],
        DataType::F64 => vec![Scalar::F64(-0.5), Scalar::F64(0.0), Scalar::F64(1.0), Scalar::F64(f64::INFINITY), Scalar::F64(f64::NEG_INFINITY), Scalar::F64(f64::NAN), Scalar::F64(1e300)],
        DataType::Utf8 => unreachable!(),
    }
}

struct Case {
    left: Relation,
    right: Relation,
    pred: CheckedPredicate,
    desc: String,
}

/// A random case: key column 0 of type `t` on both sides, value column 1 of type `vt`.
/// cond 0..4: <, <=, >, >=; 4: a band. mode: 0 overlapping, 1 left above right (selectivity 0
/// or 1), 2 left below right, 3 all keys equal (duplicates).
fn make_case(seed: u64, nl: usize, nr: usize, t: DataType, vt: DataType, cond: usize, mode: usize) -> Case {
    let mut rng = StdRng::seed_from_u64(seed);
    let (ls, rs) = match mode {
        1 => (40, 0),
        2 => (0, 40),
        _ => (0, 0),
    };
    let specials = mode == 0;
    let (mut lk, mut rk) = (gen_column(&mut rng, t, nl, ls, specials), gen_column(&mut rng, t, nr, rs, specials));
    if mode == 3 {
        let one = gen_column(&mut StdRng::seed_from_u64(1), t, 1, 0, false);
        lk = repeat(&one, nl);
        rk = repeat(&one, nr);
    }
    let left = Relation::new(vec![lk, gen_column(&mut rng, vt, nl, 0, true)]).unwrap();
    let right = Relation::new(vec![rk, gen_column(&mut rng, vt, nr, 0, true)]).unwrap();
    let (pred, desc) = if cond < 4 {
        let op = [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge][cond];
        // Either operand order.
        let p = if rng.gen_bool(0.5) { Predicate::cmp(op, col_l(0), col_r(0)) } else { Predicate::cmp(op.flipped(), col_r(0), col_l(0)) };
        (p, format!("l.0 {} r.0", op.symbol()))
    } else {
        let ws = widths(t);
        let w = ws[rng.gen_range(0..ws.len())].clone();
        let p = (col_r(0) - lit(w.clone())).less_eq(col_l(0)).and(col_l(0).less_eq(col_r(0) + lit(w.clone())));
        (p, format!("band width {w:?}"))
    };
    let pred = pred.check(&left.schema(), &right.schema()).unwrap();
    assert!(pred.band_or_inequality().is_some());
    Case { desc: format!("{t} keys, {vt} values, {nl} x {nr}, mode {mode}, {desc}"), left, right, pred }
}

fn repeat(c: &ColumnData, n: usize) -> ColumnData {
    match c {
        ColumnData::I32(v) => ColumnData::I32(vec![v[0]; n]),
        ColumnData::I64(v) => ColumnData::I64(vec![v[0]; n]),
        ColumnData::U32(v) => ColumnData::U32(vec![v[0]; n]),
        ColumnData::U64(v) => ColumnData::U64(vec![v[0]; n]),
        ColumnData::F32(v) => ColumnData::F32(vec![v[0]; n]),
        ColumnData::F64(v) => ColumnData::F64(vec![v[0]; n]),
        ColumnData::Utf8 { .. } => unreachable!(),
    }
}

fn case_strategy(max: usize) -> impl Strategy<Value = (u64, usize, usize, usize, usize, usize, usize)> {
    (any::<u64>(), 0..=max, 0..=max, 0..6usize, 0..6usize, 0..5usize, 0..4usize)
}

fn build((seed, nl, nr, ti, vi, cond, mode): (u64, usize, usize, usize, usize, usize, usize)) -> Case {
    make_case(seed, nl, nr, TYPES[ti], TYPES[vi], cond, mode)
}

fn e<T>(r: gpujoin_device::Result<T>, what: &str) -> Result<T, TestCaseError> {
    r.map_err(|e| common::fail(format!("{what}: {e}")))
}

fn upload(s: &Stream, c: &Case) -> Result<(DeviceRelation, DeviceRelation), TestCaseError> {
    Ok((e(DeviceRelation::upload(s, &c.left), "upload")?, e(DeviceRelation::upload(s, &c.right), "upload")?))
}

fn check_joins(s: &Stream, c: &Case) -> Result<(), TestCaseError> {
    let (dl, dr) = upload(s, c)?;
    for jt in JOIN_TYPES {
        let want = theta_join(&c.left, &c.right, &c.pred, jt).unwrap();
        let maps = e(sorted_theta_join(s, &dl, &dr, &c.pred, jt), "join")?;
        let got = common::canonical_pairs(&maps, jt)?;
        prop_assert!(got == want, "{}: {:?}: {}", c.desc, jt, common::diff(&got, &want));
        let size = e(sorted_theta_join_size(s, &dl, &dr, &c.pred, jt), "size")?;
        prop_assert_eq!(size, theta_join_size(&c.left, &c.right, &c.pred, jt).unwrap(), "{}: {:?} size", c.desc, jt);
        prop_assert_eq!(size, maps.rows(), "{}: {:?} size vs rows", c.desc, jt);
        if jt == JoinType::Inner {
            check_inner_order(&maps, c)?;
        }
    }
    Ok(())
}

/// Inner output order: left rows ascending; within one, right keys ascending.
fn check_inner_order(maps: &gpujoin_join::GatherMaps, c: &Case) -> Result<(), TestCaseError> {
    let (l, r) = maps.to_host().unwrap();
    for k in 1..l.len() {
        prop_assert!(l[k - 1] <= l[k], "{}: left rows not ascending at {k}", c.desc);
        if l[k - 1] == l[k] {
            let (a, b) = (key_f64(&c.right.columns[0], r[k - 1]), key_f64(&c.right.columns[0], r[k]));
            prop_assert!(a <= b, "{}: right keys not ascending within a left row at {k}", c.desc);
        }
    }
    Ok(())
}

fn key_f64(col: &ColumnData, row: RowId) -> f64 {
    let i = row.get().unwrap() as usize;
    match col {
        ColumnData::I32(v) => v[i] as f64,
        ColumnData::I64(v) => v[i] as f64,
        ColumnData::U32(v) => v[i] as f64,
        ColumnData::U64(v) => v[i] as f64,
        ColumnData::F32(v) => v[i] as f64,
        ColumnData::F64(v) => v[i],
        ColumnData::Utf8 { .. } => unreachable!(),
    }
}

fn abs_sum(col: &ColumnData) -> f64 {
    let n = col.len();
    (0..n).map(|i| key_f64(col, RowId::new(i as u32).unwrap()).abs()).filter(|x| x.is_finite()).sum()
}

fn agg_close(got: AggValue, want: AggValue, tol: f64) -> bool {
    match (got, want) {
        (AggValue::Int(a), AggValue::Int(b)) => a == b,
        (AggValue::None, AggValue::None) => true,
        (AggValue::Float(a), AggValue::Float(b)) => a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol,
        _ => false,
    }
}

fn check_aggregates(s: &Stream, c: &Case) -> Result<(), TestCaseError> {
    let (dl, dr) = upload(s, c)?;
    let cols = [None, Some((Side::Left, 0)), Some((Side::Left, 1)), Some((Side::Right, 0)), Some((Side::Right, 1))];
    let n = c.left.rows().max(c.right.rows()).max(1) as f64;
    for agg in [Agg::Count, Agg::Sum, Agg::Min, Agg::Max] {
        for col in cols {
            if agg != Agg::Count && col.is_none() {
                prop_assert!(sorted_theta_aggregate(s, &dl, &dr, &c.pred, agg, col).is_err());
                continue;
            }
            let tol = match (agg, col) {
                (Agg::Sum, Some((side, i))) => {
                    let rel = if side == Side::Left { &c.left } else { &c.right };
                    1e-9 * (1.0 + abs_sum(&rel.columns[i]) * n)
                }
                _ => 0.0,
            };
            let want = theta_aggregate(&c.left, &c.right, &c.pred, agg, col).unwrap();
            let got = e(sorted_theta_aggregate(s, &dl, &dr, &c.pred, agg, col), "aggregate")?;
            prop_assert!(agg_close(got, want, tol), "{}: {agg:?} of {col:?}: got {got:?}, want {want:?}", c.desc);
            let want = theta_aggregate_per_left_row(&c.left, &c.right, &c.pred, agg, col).unwrap();
            let got = e(sorted_theta_aggregate_per_left_row(s, &dl, &dr, &c.pred, agg, col), "aggregate per row")?;
            prop_assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                prop_assert!(agg_close(*g, *w, tol), "{}: {agg:?} of {col:?}, left row {i}: got {g:?}, want {w:?}", c.desc);
            }
        }
    }
    Ok(())
}

/// produce() over a split of the left rows concatenates to the one-shot maps; materialize()
/// equals the one-shot columns gathered through the maps.
fn check_chunks_and_materialize(s: &Stream, c: &Case, seed: u64) -> Result<(), TestCaseError> {
    let (dl, dr) = upload(s, c)?;
    let cond: RangeCondition = c.pred.band_or_inequality().unwrap();
    let n = c.left.rows() as u64;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cuts = [0, rng.gen_range(0..=n), rng.gen_range(0..=n), n];
    cuts.sort();
    for jt in [JoinType::Inner, JoinType::Left, JoinType::LeftSemi, JoinType::LeftAnti] {
        let join = e(prepare(s, &dl, &dr, &cond, jt), "prepare")?;
        prop_assert_eq!(join.left_rows(), c.left.rows());
        let offsets = join.offsets().to_vec_for_test(s);
        prop_assert_eq!(offsets.len(), c.left.rows() + 1);
        let whole = e(join.produce(s, 0..n), "produce")?;
        let (wl, wr) = whole.to_host().unwrap();
        prop_assert_eq!(*offsets.last().unwrap(), wl.len() as u64);
        let (mut cl, mut cr) = (Vec::new(), Vec::new());
        for w in cuts.windows(2) {
            let part = e(join.produce(s, w[0]..w[1]), "produce part")?;
            let (l, r) = part.to_host().unwrap();
            prop_assert_eq!(l.len() as u64, offsets[w[1] as usize] - offsets[w[0] as usize]);
            cl.extend(l);
            cr.extend(r);
        }
        prop_assert!(cl == wl && cr == wr, "{}: {:?}: chunked production differs from one-shot", c.desc, jt);
        prop_assert!(join.produce(s, 0..n + 1).is_err());
        if jt == JoinType::Inner {
            // Materialize the whole and in parts; compare with the maps gathered on the host.
            let want = gather_host(c, &wl, &wr);
            let got = e(sorted_theta_materialize(s, &dl, &dr, &c.pred, &[0, 1], &[0, 1]), "materialize")?;
            let got: Vec<ColumnData> = got.iter().map(|d| d.to_host().unwrap()).collect();
            prop_assert!(same_columns(&got, &want), "{}: materialized columns differ", c.desc);
            let mut parts: Vec<Vec<ColumnData>> = Vec::new();
            for w in cuts.windows(2) {
                let p = e(join.materialize(s, w[0]..w[1], &[1], &[0, 1]), "materialize part")?;
                parts.push(p.iter().map(|d| d.to_host().unwrap()).collect());
            }
            for (k, col) in [1usize, 2, 3].iter().enumerate() {
                let cat = concat(parts.iter().map(|p| &p[k]));
                prop_assert!(same_columns(&[cat], &[want[*col].clone()]), "{}: materialized part column {k} differs", c.desc);
            }
        } else {
            prop_assert!(join.materialize(s, 0..n, &[0], &[0]).is_err());
        }
    }
    Ok(())
}

trait ToVecForTest {
    fn to_vec_for_test(&self, s: &Stream) -> Vec<u64>;
}
impl ToVecForTest for gpujoin_device::DeviceView<'_, u64> {
    fn to_vec_for_test(&self, s: &Stream) -> Vec<u64> {
        s.copy_to_host(self).unwrap()
    }
}

fn gather_host(c: &Case, l: &[RowId], r: &[RowId]) -> Vec<ColumnData> {
    let g = |col: &ColumnData, rows: &[RowId]| -> ColumnData {
        let idx: Vec<usize> = rows.iter().map(|x| x.get().unwrap() as usize).collect();
        match col {
            ColumnData::I32(v) => ColumnData::I32(idx.iter().map(|&i| v[i]).collect()),
            ColumnData::I64(v) => ColumnData::I64(idx.iter().map(|&i| v[i]).collect()),
            ColumnData::U32(v) => ColumnData::U32(idx.iter().map(|&i| v[i]).collect()),
            ColumnData::U64(v) => ColumnData::U64(idx.iter().map(|&i| v[i]).collect()),
            ColumnData::F32(v) => ColumnData::F32(idx.iter().map(|&i| v[i]).collect()),
            ColumnData::F64(v) => ColumnData::F64(idx.iter().map(|&i| v[i]).collect()),
            ColumnData::Utf8 { .. } => unreachable!(),
        }
    };
    vec![g(&c.left.columns[0], l), g(&c.left.columns[1], l), g(&c.right.columns[0], r), g(&c.right.columns[1], r)]
}

fn concat<'a>(parts: impl Iterator<Item = &'a ColumnData>) -> ColumnData {
    let mut out: Option<ColumnData> = None;
    for p in parts {
        out = Some(match (out, p) {
            (None, p) => p.clone(),
            (Some(ColumnData::I32(mut a)), ColumnData::I32(b)) => { a.extend(b); ColumnData::I32(a) }
            (Some(ColumnData::I64(mut a)), ColumnData::I64(b)) => { a.extend(b); ColumnData::I64(a) }
            (Some(ColumnData::U32(mut a)), ColumnData::U32(b)) => { a.extend(b); ColumnData::U32(a) }
            (Some(ColumnData::U64(mut a)), ColumnData::U64(b)) => { a.extend(b); ColumnData::U64(a) }
            (Some(ColumnData::F32(mut a)), ColumnData::F32(b)) => { a.extend(b); ColumnData::F32(a) }
            (Some(ColumnData::F64(mut a)), ColumnData::F64(b)) => { a.extend(b); ColumnData::F64(a) }
            _ => unreachable!(),
        });
    }
    out.unwrap()
}

/// Bit-exact equality, except that -0.0 may stand for the sorted key 0.0 and any NaN for a NaN.
fn same_columns(a: &[ColumnData], b: &[ColumnData]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (ColumnData::F32(x), ColumnData::F32(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits() || p == q || (p.is_nan() && q.is_nan())),
            (ColumnData::F64(x), ColumnData::F64(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits() || p == q || (p.is_nan() && q.is_nan())),
            (x, y) => x == y,
        })
}

/// The case generator itself (runs without a GPU): every case is a band or an inequality and the
/// reference runs on it.
#[test]
fn theta_sort_case_generator() {
    run(200, 0x7e7a_0000, case_strategy(12), |p| {
        let c = build(p);
        prop_assert!(c.pred.band_or_inequality().is_some());
        theta_join(&c.left, &c.right, &c.pred, JoinType::Full).unwrap();
        Ok(())
    });
}

#[test]
fn theta_sort_joins_match_the_reference() {
    let Some(s) = stream("theta_sort_joins_match_the_reference") else { return };
    run(cases(96, 16), 0x7e7a_0001, case_strategy(40), |p| check_joins(&s, &build(p)));
}

#[test]
fn theta_sort_aggregates_match_the_reference() {
    let Some(s) = stream("theta_sort_aggregates_match_the_reference") else { return };
    run(cases(64, 12), 0x7e7a_0002, case_strategy(40), |p| check_aggregates(&s, &build(p)));
}

#[test]
fn theta_sort_chunks_and_materialization() {
    let Some(s) = stream("theta_sort_chunks_and_materialization") else { return };
    run(cases(48, 8), 0x7e7a_0003, case_strategy(60), |p| check_chunks_and_materialize(&s, &build(p), p.0));
}

/// Every type with every condition at least once (a deterministic sweep), with and without
/// empty sides.
#[test]
fn theta_sort_every_type_and_condition() {
    let Some(s) = stream("theta_sort_every_type_and_condition") else { return };
    // GPUJOIN_TEST_SIZE=small (compute-sanitizer): a rotating third of the cases.
    let mut sample = gpujoin_device::testing::Sample::new(3);
    for (ti, &t) in TYPES.iter().enumerate() {
        for cond in 0..5 {
            for (nl, nr) in [(0, 5), (5, 0), (1, 1), (17, 23)] {
                if !sample.take() {
                    continue;
                }
                let c = make_case(ti as u64 * 31 + cond as u64, nl, nr, t, TYPES[(ti + cond) % 6], cond, 0);
                check_joins(&s, &c).unwrap();
                check_aggregates(&s, &c).unwrap();
            }
            // Every band width of the type.
            if cond == 4 {
                for w in widths(t) {
                    if !sample.take() {
                        continue;
                    }
                    let mut c = make_case(7, 19, 21, t, t, 4, 0);
                    let p = (col_r(0) - lit(w.clone())).less_eq(col_l(0)).and(col_l(0).less_eq(col_r(0) + lit(w.clone())));
                    c.pred = p.check(&c.left.schema(), &c.right.schema()).unwrap();
                    c.desc = format!("{t} band width {w:?}");
                    check_joins(&s, &c).unwrap();
                    check_aggregates(&s, &c).unwrap();
                }
            }
        }
    }
}

/// Larger inputs against cheaper oracles: sizes, COUNT/SUM and a spot check of the pairs.
#[test]
fn theta_sort_large() {
    let Some(s) = stream("theta_sort_large") else { return };
    let mut rng = StdRng::seed_from_u64(99);
    let (nl, nr) = (rows(3000, 1000), rows(2500, 900));
    let a: Vec<i32> = (0..nl).map(|_| rng.gen_range(0..1 << 20)).collect();
    let b: Vec<i32> = (0..nr).map(|_| rng.gen_range(0..1 << 20)).collect();
    let x: Vec<i64> = (0..nr).map(|_| rng.gen_range(-1_000_000_000_000..1_000_000_000_000)).collect();
    let left = Relation::new(vec![ColumnData::I32(a.clone())]).unwrap();
    let right = Relation::new(vec![ColumnData::I32(b.clone()), ColumnData::I64(x.clone())]).unwrap();
    let (dl, dr) = (DeviceRelation::upload(&s, &left).unwrap(), DeviceRelation::upload(&s, &right).unwrap());
    for (op, w) in [(Some(CmpOp::Gt), 0), (Some(CmpOp::Le), 0), (None, 5000)] {
        let p = match op {
            Some(op) => Predicate::cmp(op, col_l(0), col_r(0)),
            None => (col_r(0) - lit(w)).less_eq(col_l(0)).and(col_l(0).less_eq(col_r(0) + lit(w))),
        };
        let pred = p.check(&left.schema(), &right.schema()).unwrap();
        let holds = |i: usize, j: usize| pred.evaluate(&left, i, &right, j);
        let mut count = 0u64;
        let mut sum = 0i128;
        let mut per_row = vec![0u64; nl];
        for (i, row) in per_row.iter_mut().enumerate() {
            for (j, &xj) in x.iter().enumerate() {
                if holds(i, j) {
                    count += 1;
                    sum += xj as i128;
                    *row += 1;
                }
            }
        }
        assert_eq!(sorted_theta_join_size(&s, &dl, &dr, &pred, JoinType::Inner).unwrap(), count);
        assert_eq!(sorted_theta_aggregate(&s, &dl, &dr, &pred, Agg::Count, None).unwrap(), AggValue::Int(count as i128));
        assert_eq!(sorted_theta_aggregate(&s, &dl, &dr, &pred, Agg::Sum, Some((Side::Right, 1))).unwrap(), AggValue::Int(sum));
        let rows = sorted_theta_aggregate_per_left_row(&s, &dl, &dr, &pred, Agg::Count, None).unwrap();
        assert!(rows.iter().zip(&per_row).all(|(g, w)| *g == AggValue::Int(*w as i128)));
        let maps = sorted_theta_join(&s, &dl, &dr, &pred, JoinType::Inner).unwrap();
        let (l, r) = maps.to_host().unwrap();
        assert_eq!(l.len() as u64, count);
        for k in (0..l.len()).step_by(997) {
            assert!(holds(l[k].get().unwrap() as usize, r[k].get().unwrap() as usize));
        }
        // Materialized (l.a, r.a, r.x) equal the maps gathered.
        let cols = sorted_theta_materialize(&s, &dl, &dr, &pred, &[0], &[0, 1]).unwrap();
        let DeviceColumnData::I64(mx) = &cols[2] else { panic!("type") };
        let mx = mx.to_vec().unwrap();
        assert!(r.iter().zip(&mx).all(|(rr, v)| x[rr.get().unwrap() as usize] == *v));
    }
}

#[test]
fn theta_sort_rejects_other_predicates() {
    let Some(s) = stream("theta_sort_rejects_other_predicates") else { return };
    let rel = Relation::new(vec![ColumnData::I32(vec![1, 2])]).unwrap();
    let d = DeviceRelation::upload(&s, &rel).unwrap();
    let eq = col_l(0).equals(col_r(0)).check(&rel.schema(), &rel.schema()).unwrap();
    assert!(sorted_theta_join(&s, &d, &d, &eq, JoinType::Inner).is_err());
    assert!(sorted_theta_aggregate(&s, &d, &d, &eq, Agg::Count, None).is_err());
    let lt = col_l(0).less(col_r(0)).check(&rel.schema(), &rel.schema()).unwrap();
    let cond = lt.band_or_inequality().unwrap();
    assert!(prepare(&s, &d, &d, &cond, JoinType::Full).is_err());
    // Schema mismatch.
    let other = DeviceRelation::upload(&s, &Relation::new(vec![ColumnData::I64(vec![1])]).unwrap()).unwrap();
    assert!(sorted_theta_join(&s, &other, &d, &lt, JoinType::Inner).is_err());
}

/// Keys over the whole range of the type (all bits vary; f32 from random bit patterns, NaN and
/// ±inf included), for the small path's sort on the bits that differ.
fn wide_column(rng: &mut StdRng, t: DataType, n: usize) -> ColumnData {
    match t {
        DataType::I32 => ColumnData::I32((0..n).map(|_| rng.gen()).collect()),
        DataType::I64 => ColumnData::I64((0..n).map(|_| rng.gen()).collect()),
        DataType::U32 => ColumnData::U32((0..n).map(|_| rng.gen()).collect()),
        DataType::U64 => ColumnData::U64((0..n).map(|_| rng.gen()).collect()),
        DataType::F32 => ColumnData::F32((0..n).map(|_| f32::from_bits(rng.gen())).collect()),
        // Magnitudes below 2^60 (and a few specials), so that sums of them cannot overflow.
        DataType::F64 => ColumnData::F64(
            (0..n)
                .map(|_| match rng.gen_range(0..100) {
                    0 => f64::NAN,
                    1 => f64::INFINITY,
                    2 => f64::NEG_INFINITY,
                    3 => -0.0,
                    _ => (rng.gen::<f64>() - 0.5) * 2f64.powi(rng.gen_range(-60..60)),
                })
                .collect(),
        ),
        DataType::Utf8 => unreachable!(),
    }
}

/// The small aggregate path (right sides up to SMALL_RIGHT_MAX rows, sorted in runs of 4096)
/// against the general one, and both against the reference where it is cheap: every aggregate
/// and column, in total and per left row.
fn check_paths(s: &Stream, c: &Case, with_reference: bool) -> Result<(), TestCaseError> {
    let (dl, dr) = upload(s, c)?;
    let cond = c.pred.band_or_inequality().unwrap();
    let cols = [None, Some((Side::Left, 1)), Some((Side::Right, 1)), Some((Side::Right, 0))];
    let n = c.left.rows().max(c.right.rows()).max(1) as f64;
    for agg in [Agg::Count, Agg::Sum, Agg::Min, Agg::Max] {
        for col in cols {
            if agg != Agg::Count && col.is_none() {
                continue;
            }
            let small_applies = !(matches!(agg, Agg::Min | Agg::Max) && matches!(col, Some((Side::Right, _))));
            let via = |path, per_row| aggregate_via(s, &dl, &dr, &cond, agg, col, per_row, path);
            if !small_applies {
                prop_assert!(via(AggregatePath::Small, false).is_err(), "{}: {agg:?} of {col:?} on the small path", c.desc);
                continue;
            }
            let tol = match (agg, col) {
                (Agg::Sum, Some((side, i))) => {
                    let rel = if side == Side::Left { &c.left } else { &c.right };
                    1e-9 * (1.0 + abs_sum(&rel.columns[i]) * n)
                }
                _ => 0.0,
            };
            let small = e(via(AggregatePath::Small, false), "small total")?.0;
            let general = e(via(AggregatePath::General, false), "general total")?.0;
            prop_assert!(agg_close(small, general, tol), "{}: {agg:?} of {col:?}: small {small:?}, general {general:?}", c.desc);
            if with_reference {
                let want = theta_aggregate(&c.left, &c.right, &c.pred, agg, col).unwrap();
                prop_assert!(agg_close(small, want, tol), "{}: {agg:?} of {col:?}: small {small:?}, want {want:?}", c.desc);
            }
            let rows_small = e(via(AggregatePath::Small, true), "small per row")?.1;
            let rows_general = e(via(AggregatePath::General, true), "general per row")?.1;
            prop_assert_eq!(rows_small.len(), c.left.rows());
            prop_assert_eq!(rows_general.len(), c.left.rows());
            for (i, (a, b)) in rows_small.iter().zip(&rows_general).enumerate() {
                prop_assert!(agg_close(*a, *b, tol), "{}: {agg:?} of {col:?}, left row {i}: small {a:?}, general {b:?}", c.desc);
            }
        }
    }
    Ok(())
}

/// The small aggregate path around its run size (4096) and its threshold, with duplicates across
/// runs, all-equal keys, NaN/±0.0/extremes, keys over the whole range, and the hand-over to the
/// general path above the threshold.
#[test]
fn theta_sort_small_aggregate_path() {
    let Some(s) = stream("theta_sort_small_aggregate_path") else { return };
    assert_eq!(SMALL_RIGHT_MAX, 65536);
    let sizes: &[usize] = pick(&[1, 2, 255, 4095, 4096, 4097, 8191, 12289, 65535, 65536], &[1, 255, 4095, 4096, 4097, 8191, 65536]);
    for (k, &nr) in sizes.iter().enumerate() {
        let t = TYPES[k % 6];
        let vt = TYPES[(k + 2) % 6];
        let cond = k % 5;
        let mode = if nr > 4000 && k % 3 == 0 { 3 } else { 0 };
        let nl = if nr > 5000 { 37 } else { 61 };
        let c = make_case(1000 + k as u64, nl, nr, t, vt, cond, mode);
        check_paths(&s, &c, nr <= 5000).unwrap();
    }
    // Every key type over its whole range, across several runs.
    for (k, &t) in TYPES.iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(77 + k as u64);
        let nr = [4097, 9000, rows(20000, 12289)][k % 3];
        let right = Relation::new(vec![wide_column(&mut rng, t, nr), gen_column(&mut rng, DataType::I64, nr, 0, true)]).unwrap();
        let left = Relation::new(vec![wide_column(&mut rng, t, 45), gen_column(&mut rng, DataType::F64, 45, 0, true)]).unwrap();
        for op in [CmpOp::Gt, CmpOp::Le] {
            let pred = Predicate::cmp(op, col_l(0), col_r(0)).check(&left.schema(), &right.schema()).unwrap();
            let c = Case { desc: format!("wide {t} keys, 45 x {nr}, l.0 {} r.0", op.symbol()), left: left.clone(), right: right.clone(), pred };
            check_paths(&s, &c, false).unwrap();
        }
    }
    // Above the threshold: the small path refuses, Auto takes the general one.
    let c = make_case(5, 20, SMALL_RIGHT_MAX + 1, DataType::I32, DataType::I64, 2, 0);
    let (dl, dr) = upload(&s, &c).unwrap();
    let cond = c.pred.band_or_inequality().unwrap();
    let col = Some((Side::Right, 1));
    assert!(aggregate_via(&s, &dl, &dr, &cond, Agg::Sum, col, false, AggregatePath::Small).is_err());
    let auto = aggregate_via(&s, &dl, &dr, &cond, Agg::Sum, col, false, AggregatePath::Auto).unwrap().0;
    let general = aggregate_via(&s, &dl, &dr, &cond, Agg::Sum, col, false, AggregatePath::General).unwrap().0;
    assert_eq!(auto, general);
}
