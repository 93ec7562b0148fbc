//! GPU tests of the sort-based theta join through the front door (`plan::Join` with a filter,
//! `Algorithm::ThetaSorted`, on `table::Table`s) against the CPU reference
//! (`gpujoin_testkit::table_reference`): every inequality and the band, every numeric type, NaN,
//! ±inf, -0.0/0.0, integer extremes, duplicates, empty relations, selectivity 0 and 1, band
//! widths negative/zero/huge/NaN, all join types, aggregates in total and per left row (each left
//! row's aggregate alone: the front door has no per-left-row aggregate), sizes, the prepared join
//! of `Join::chunks` producing ranges of left rows, and materialization (`Join::select`,
//! `Join::gather`). Every call poisons the sorted path's outputs (`TestingOptions::
//! theta_poison_outputs`: 0xFF before the kernels write them, so that unwritten elements show).
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer property cases, a smaller
//! `theta_sort_large`, fewer right-side sizes on the small aggregate path (still across its
//! 4096-row runs and its 65536-row threshold) and fewer left rows' aggregates alone.
mod common;
mod theta_common;

use gpujoin_device::testing::{cases, pick, rows};
use gpujoin_device::{Error, Stream};
use gpujoin_join::chunked::{ChunkBudget, ChunkRange, ChunkSource};
use gpujoin_join::plan::{Algorithm, Join};
use gpujoin_join::predicate::{col_l, col_r, lit, CmpOp, Expr, Predicate, Scalar, Side};
use gpujoin_join::table::{DataType, HostColumn, HostTable, Table, Value};
use gpujoin_join::theta::{Agg, AggValue};
use gpujoin_join::{GatherMaps, JoinType, TestingOptions, ThetaAggregatePath};
use gpujoin_testkit::table_reference;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use theta_common::{agg_arg, aggregate_of, aggregate_per_left_row_of, aggregate_rows, diff, ordered, pairs, pairs_of, reference, rows_in_order, rows_to_check, table, table_rows_in_order};

const TYPES: [DataType; 6] = [DataType::Int32, DataType::Int64, DataType::UInt32, DataType::UInt64, DataType::Float32, DataType::Float64];
const JOIN_TYPES: [JoinType; 8] = JoinType::ALL;

/// The most right rows of the sorted path's small aggregate path (the test checks the hand-over
/// at it: the forced small path takes 65536 right rows and refuses 65537).
const SMALL_RIGHT_MAX: usize = 65536;

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, max_shrink_iters: 32, ..Config::default() });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

fn stream(name: &str) -> Option<Stream> {
    common::stream(name)
}

// Every call of the sort-based theta join runs with its outputs poisoned (0xFF before the
// kernels write them, so that unwritten elements show): the test-only `TestingOptions`.

const POISONED: TestingOptions = TestingOptions { theta_poison_outputs: true, ..TestingOptions::DEFAULT };

/// The sorted theta join of `l` and `r` on `pred` (poisoned outputs).
fn sorted<'a>(l: &'a Table, r: &'a Table, pred: &Predicate, jt: JoinType) -> Join<'a> {
    Join::new(jt).tables(l, r).filter(pred.clone()).algorithm(Algorithm::ThetaSorted).testing(POISONED)
}

/// The sorted path's aggregate of the inner join, with `testing` (its aggregate path).
fn sorted_aggregate(s: &Stream, l: &Table, r: &Table, pred: &Predicate, agg: Agg, col: Option<(Side, usize)>, testing: TestingOptions) -> gpujoin_device::Result<AggValue> {
    let arg = agg_arg(col);
    sorted(l, r, pred, JoinType::Inner).testing(testing).aggregate(s, agg, arg.as_ref().map(|(side, n)| (*side, n.as_str())))
}

/// Small-domain values (shifted by `shift`), with 12% specials when `specials`.
fn gen_column(rng: &mut StdRng, t: DataType, n: usize, shift: i64, specials: bool) -> HostColumn {
    let small = |rng: &mut StdRng| rng.gen_range(-6i64..=6) + shift;
    let special = |rng: &mut StdRng| specials && rng.gen_bool(0.12);
    match t {
        DataType::Int32 => HostColumn::from_values((0..n).map(|_| if special(rng) { [i32::MIN, i32::MAX][rng.gen_range(0..2)] } else { small(rng) as i32 }).collect()),
        DataType::Int64 => HostColumn::from_values((0..n).map(|_| if special(rng) { [i64::MIN, i64::MAX][rng.gen_range(0..2)] } else { small(rng) }).collect()),
        DataType::UInt32 => HostColumn::from_values((0..n).map(|_| if special(rng) { [0, u32::MAX][rng.gen_range(0..2)] } else { (small(rng) + 200) as u32 }).collect()),
        DataType::UInt64 => HostColumn::from_values((0..n).map(|_| if special(rng) { [0, u64::MAX][rng.gen_range(0..2)] } else { (small(rng) + 200) as u64 }).collect()),
        DataType::Float32 => {
            let sp = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, 1e30, -1e30];
            HostColumn::from_values((0..n).map(|_| if special(rng) { sp[rng.gen_range(0..sp.len())] } else { small(rng) as f32 / 2.0 }).collect())
        }
        DataType::Float64 => {
            let sp = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 1e300, -1e300, -f64::NAN];
            HostColumn::from_values((0..n).map(|_| if special(rng) { sp[rng.gen_range(0..sp.len())] } else { small(rng) as f64 / 2.0 }).collect())
        }
        t => unreachable!("{t}"),
    }
}

/// Band widths worth testing for a type: negative, zero, small, huge (overflow), NaN, ±inf.
fn widths(t: DataType) -> Vec<Scalar> {
    match t {
        DataType::Int32 => vec![Scalar::I32(-1), Scalar::I32(0), Scalar::I32(2), Scalar::I32(i32::MAX), Scalar::I32(i32::MIN)],
        DataType::Int64 => vec![Scalar::I64(-1), Scalar::I64(0), Scalar::I64(3), Scalar::I64(i64::MAX), Scalar::I64(i64::MIN)],
        DataType::UInt32 => vec![Scalar::U32(0), Scalar::U32(1), Scalar::U32(u32::MAX)],
        DataType::UInt64 => vec![Scalar::U64(0), Scalar::U64(2), Scalar::U64(u64::MAX)],
        DataType::Float32 => vec![Scalar::F32(-1.0), Scalar::F32(0.0), Scalar::F32(-0.0), Scalar::F32(1.5), Scalar::F32(f32::INFINITY), Scalar::F32(f32::NEG_INFINITY), Scalar::F32(f32::NAN), Scalar::F32(1e30)],
        DataType::Float64 => vec![Scalar::F64(-0.5), Scalar::F64(0.0), Scalar::F64(1.0), Scalar::F64(f64::INFINITY), Scalar::F64(f64::NEG_INFINITY), Scalar::F64(f64::NAN), Scalar::F64(1e300)],
        t => unreachable!("{t}"),
    }
}

/// The band `r.0 - w <= l.0 <= r.0 + w`.
fn band(w: Scalar) -> Predicate {
    (col_r(0) - lit(w.clone())).less_eq(col_l(0)).and(col_l(0).less_eq(col_r(0) + lit(w)))
}

struct Case {
    left: HostTable,
    right: HostTable,
    pred: Predicate,
    desc: String,
}

/// A random case: key column c0 of type `t` on both sides, value column c1 of type `vt`.
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
    let left = table(vec![lk, gen_column(&mut rng, vt, nl, 0, true)]);
    let right = table(vec![rk, gen_column(&mut rng, vt, nr, 0, true)]);
    let (pred, desc) = if cond < 4 {
        let op = [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge][cond];
        // Either operand order.
        let p = if rng.gen_bool(0.5) { Predicate::cmp(op, col_l(0), col_r(0)) } else { Predicate::cmp(op.flipped(), col_r(0), col_l(0)) };
        (p, format!("l.0 {} r.0", op.symbol()))
    } else {
        let ws = widths(t);
        let w = ws[rng.gen_range(0..ws.len())].clone();
        (band(w.clone()), format!("band width {w:?}"))
    };
    Case { desc: format!("{t} keys, {vt} values, {nl} x {nr}, mode {mode}, {desc}"), left, right, pred }
}

/// `n` copies of row 0 of `c`.
fn repeat(c: &HostColumn, n: usize) -> HostColumn {
    match (c.data_type(), c.value(0)) {
        (DataType::Int32, Value::Int(v)) => HostColumn::from_values(vec![v as i32; n]),
        (DataType::Int64, Value::Int(v)) => HostColumn::from_values(vec![v as i64; n]),
        (DataType::UInt32, Value::Int(v)) => HostColumn::from_values(vec![v as u32; n]),
        (DataType::UInt64, Value::Int(v)) => HostColumn::from_values(vec![v as u64; n]),
        (DataType::Float32, Value::Float(v)) => HostColumn::from_values(vec![v as f32; n]),
        (DataType::Float64, Value::Float(v)) => HostColumn::from_values(vec![v; n]),
        (t, v) => unreachable!("{t} {v:?}"),
    }
}

/// Whether `p` has one of the shapes the sorted path takes, as the generator writes them: a
/// single `<`, `<=`, `>`, `>=` between `l.0` and `r.0` (either operand order), or the band
/// `r.0 - w <= l.0 AND l.0 <= r.0 + w` (one literal `w`). The front door decides the shape
/// itself (`Algorithm::ThetaSorted` refuses any other, checked on the GPU).
fn band_or_inequality(p: &Predicate) -> bool {
    let col = |e: &Expr, side: Side| matches!(e, Expr::Column { side: s, index: 0 } if *s == side);
    match p {
        Predicate::Cmp { op, left, right } => {
            matches!(op, CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge) && ((col(left, Side::Left) && col(right, Side::Right)) || (col(left, Side::Right) && col(right, Side::Left)))
        }
        Predicate::And(v) if v.len() == 2 => match (&v[0], &v[1]) {
            (Predicate::Cmp { op: CmpOp::Le, left: Expr::Sub(a, w1), right: l1 }, Predicate::Cmp { op: CmpOp::Le, left: l2, right: Expr::Add(b, w2) }) => {
                let same_literal = matches!((&**w1, &**w2), (Expr::Literal(x), Expr::Literal(y)) if format!("{x:?}") == format!("{y:?}"));
                col(a, Side::Right) && col(l1, Side::Left) && col(l2, Side::Left) && col(b, Side::Right) && same_literal
            }
            _ => false,
        },
        _ => false,
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

fn upload(s: &Stream, c: &Case) -> Result<(Table, Table), TestCaseError> {
    Ok((e(Table::upload(s, &c.left), "upload")?, e(Table::upload(s, &c.right), "upload")?))
}

fn check_joins(s: &Stream, c: &Case) -> Result<(), TestCaseError> {
    let (lt, rt) = upload(s, c)?;
    for jt in JOIN_TYPES {
        let want = reference(&c.left, &c.right, &c.pred, jt);
        let j = sorted(&lt, &rt, &c.pred, jt);
        let out = e(j.run(s), "join")?;
        prop_assert_eq!(out.algorithm, Algorithm::ThetaSorted, "{}: {:?}: {}", c.desc, jt, out.reason);
        let maps = out.maps.as_ref().expect("theta joins return maps");
        let got = pairs(maps, jt)?;
        prop_assert!(got == want, "{}: {:?}: {}", c.desc, jt, diff(&got, &want));
        let size = e(j.count(s), "size")?;
        prop_assert_eq!(size, want.len() as u64, "{}: {:?} size", c.desc, jt);
        prop_assert_eq!(size, maps.rows(), "{}: {:?} size vs rows", c.desc, jt);
        if jt == JoinType::Inner {
            check_inner_order(maps, c)?;
        }
    }
    Ok(())
}

/// Inner output order: left rows ascending; within one, right keys ascending.
fn check_inner_order(maps: &GatherMaps, c: &Case) -> Result<(), TestCaseError> {
    let (l, r) = maps.to_host().unwrap();
    let keys = &c.right.columns()[0];
    for k in 1..l.len() {
        prop_assert!(l[k - 1] <= l[k], "{}: left rows not ascending at {k}", c.desc);
        if l[k - 1] == l[k] {
            let (a, b) = (key_f64(keys, r[k - 1].get().unwrap() as usize), key_f64(keys, r[k].get().unwrap() as usize));
            prop_assert!(a <= b, "{}: right keys not ascending within a left row at {k}", c.desc);
        }
    }
    Ok(())
}

fn key_f64(col: &HostColumn, i: usize) -> f64 {
    match col.value(i) {
        Value::Int(v) => v as f64,
        Value::Float(v) => v,
        v => unreachable!("{v:?}"),
    }
}

fn abs_sum(col: &HostColumn) -> f64 {
    (0..col.len()).map(|i| key_f64(col, i).abs()).filter(|x| x.is_finite()).sum()
}

fn agg_close(got: AggValue, want: AggValue, tol: f64) -> bool {
    match (got, want) {
        (AggValue::Int(a), AggValue::Int(b)) => a == b,
        (AggValue::None, AggValue::None) => true,
        (AggValue::Float(a), AggValue::Float(b)) => a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol,
        _ => false,
    }
}

/// The tolerance of a float SUM (another summation order than the reference's).
fn tolerance(c: &Case, agg: Agg, col: Option<(Side, usize)>) -> f64 {
    let n = c.left.rows().max(c.right.rows()).max(1) as f64;
    match (agg, col) {
        (Agg::Sum, Some((side, i))) => {
            let t = if side == Side::Left { &c.left } else { &c.right };
            1e-9 * (1.0 + abs_sum(&t.columns()[i]) * n)
        }
        _ => 0.0,
    }
}

fn check_aggregates(s: &Stream, c: &Case) -> Result<(), TestCaseError> {
    let (lt, rt) = upload(s, c)?;
    let inner = reference(&c.left, &c.right, &c.pred, JoinType::Inner);
    let cols = [None, Some((Side::Left, 0)), Some((Side::Left, 1)), Some((Side::Right, 0)), Some((Side::Right, 1))];
    let rows = rows_to_check(c.left.rows(), 64);
    for agg in [Agg::Count, Agg::Sum, Agg::Min, Agg::Max] {
        for col in cols {
            if agg != Agg::Count && col.is_none() {
                prop_assert!(matches!(sorted_aggregate(s, &lt, &rt, &c.pred, agg, col, POISONED), Err(Error::InvalidArgument(_))));
                continue;
            }
            let tol = tolerance(c, agg, col);
            let want = aggregate_of(&c.left, &c.right, &inner, agg, col);
            let got = e(sorted_aggregate(s, &lt, &rt, &c.pred, agg, col, POISONED), "aggregate")?;
            prop_assert!(agg_close(got, want, tol), "{}: {agg:?} of {col:?}: got {got:?}, want {want:?}", c.desc);
            let want = aggregate_per_left_row_of(&c.left, &c.right, &inner, agg, col);
            let got = e(aggregate_rows(s, &lt, &rt, &c.pred, Algorithm::ThetaSorted, POISONED, agg, col, &rows), "aggregate per row")?;
            prop_assert_eq!(got.len(), rows.len());
            for (g, &i) in got.iter().zip(&rows) {
                prop_assert!(agg_close(*g, want[i], tol), "{}: {agg:?} of {col:?}, left row {i}: got {g:?}, want {:?}", c.desc, want[i]);
            }
        }
    }
    Ok(())
}

/// Output rows `off[a]..off[b]` of the whole left rows `a..b`.
fn left_rows(off: &[u64], a: u64, b: u64) -> ChunkRange {
    ChunkRange { output: off[a as usize]..off[b as usize], rows: a..b, first_row_offset: off[a as usize], last_row_offset: None }
}

/// The prepared sorted join (the source of `Join::chunks`) over a split of the left rows
/// concatenates to the whole, which is the one-shot join's order; the one-shot materialized
/// columns (`Join::select`) and each part's maps gathered (`Join::gather`) equal the whole's
/// pairs gathered on the host.
fn check_chunks_and_materialize(s: &Stream, c: &Case, seed: u64) -> Result<(), TestCaseError> {
    let (lt, rt) = upload(s, c)?;
    let n = c.left.rows() as u64;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cuts = [0, rng.gen_range(0..=n), rng.gen_range(0..=n), n];
    cuts.sort();
    for jt in [JoinType::Inner, JoinType::Left, JoinType::LeftSemi, JoinType::LeftAnti] {
        let j = sorted(&lt, &rt, &c.pred, jt);
        let chunks = e(j.chunks(s, ChunkBudget::Bytes(1 << 30)), "prepare")?;
        let join = chunks.source();
        prop_assert_eq!(join.path(), "sorted", "{}: {:?}", c.desc, jt);
        prop_assert_eq!(join.left_rows(), n);
        let offsets = e(s.copy_to_host(&join.offsets()), "offsets")?;
        prop_assert_eq!(offsets.len(), c.left.rows() + 1);
        let whole = ordered(&e(join.produce(s, &left_rows(&offsets, 0, n)), "produce")?);
        prop_assert_eq!(*offsets.last().unwrap(), whole.len() as u64);
        let one_shot = e(j.run(s), "one shot")?;
        prop_assert!(ordered(one_shot.maps.as_ref().expect("maps")) == whole, "{}: {:?}: the one-shot join's order differs from the prepared join's", c.desc, jt);
        let mut cat = Vec::new();
        let mut parts = Vec::new();
        for w in cuts.windows(2) {
            let part = e(join.produce(s, &left_rows(&offsets, w[0], w[1])), "produce part")?;
            prop_assert_eq!(part.rows(), offsets[w[1] as usize] - offsets[w[0] as usize]);
            cat.extend(ordered(&part));
            parts.push(part);
        }
        prop_assert!(cat == whole, "{}: {:?}: chunked production differs from one-shot", c.desc, jt);
        let past_the_end = ChunkRange { output: whole.len() as u64..whole.len() as u64, rows: 0..n + 1, first_row_offset: 0, last_row_offset: None };
        prop_assert!(join.produce(s, &past_the_end).is_err());
        if matches!(jt, JoinType::Inner | JoinType::Left) {
            // Materialize the whole and in parts; compare with the pairs gathered on the host,
            // in order (a LEFT join's unmatched rows read NULL on the right).
            let (ls, rs) = (["c0", "c1"], ["c0", "c1"]);
            let out = e(j.clone().select(&ls, &rs).run(s), "materialize")?;
            let got = table_rows_in_order(&e(out.table.to_host(), "to host")?);
            prop_assert!(got == rows_in_order(&whole, &c.left, &ls, &c.right, &rs), "{}: {:?}: materialized columns differ", c.desc, jt);
            let jp = j.clone().select(&["c1"], &rs);
            let mut got = Vec::new();
            for part in &parts {
                got.extend(table_rows_in_order(&e(e(jp.gather(s, part), "gather part")?.to_host(), "to host")?));
            }
            prop_assert!(got == rows_in_order(&whole, &c.left, &["c1"], &c.right, &rs), "{}: {:?}: materialized parts differ", c.desc, jt);
        } else {
            // Semi and anti joins give no right rows: selecting right columns is refused.
            prop_assert!(matches!(j.clone().select(&["c0"], &["c0"]).run(s), Err(Error::InvalidArgument(_))));
        }
    }
    Ok(())
}

/// The case generator itself (runs without a GPU): every case is a band or an inequality and the
/// reference runs on it.
#[test]
fn theta_sort_case_generator() {
    run(200, 0x7e7a_0000, case_strategy(12), |p| {
        let c = build(p);
        prop_assert!(band_or_inequality(&c.pred), "{}: {:?}", c.desc, c.pred);
        reference(&c.left, &c.right, &c.pred, JoinType::Full);
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
                    c.pred = band(w.clone());
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
    let left = table(vec![HostColumn::from_values(a.clone())]);
    let right = table(vec![HostColumn::from_values(b.clone()), HostColumn::from_values(x.clone())]);
    let (lt, rt) = (Table::upload(&s, &left).unwrap(), Table::upload(&s, &right).unwrap());
    for (op, w) in [(Some(CmpOp::Gt), 0), (Some(CmpOp::Le), 0), (None, 5000)] {
        let pred = match op {
            Some(op) => Predicate::cmp(op, col_l(0), col_r(0)),
            None => (col_r(0) - lit(w)).less_eq(col_l(0)).and(col_l(0).less_eq(col_r(0) + lit(w))),
        };
        let holds = |i: usize, j: usize| table_reference::eval(&pred, &left, i, &right, j);
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
        let j = sorted(&lt, &rt, &pred, JoinType::Inner);
        assert_eq!(j.count(&s).unwrap(), count);
        assert_eq!(j.aggregate(&s, Agg::Count, None).unwrap(), AggValue::Int(count as i128));
        assert_eq!(j.aggregate(&s, Agg::Sum, Some((Side::Right, "c1"))).unwrap(), AggValue::Int(sum));
        let sampled = rows_to_check(nl, 256);
        let got = aggregate_rows(&s, &lt, &rt, &pred, Algorithm::ThetaSorted, POISONED, Agg::Count, None, &sampled).unwrap();
        assert!(got.iter().zip(&sampled).all(|(g, &i)| *g == AggValue::Int(per_row[i] as i128)));
        // The maps and the materialized (l.a, r.a, r.x) of one run: r.x equals the maps gathered.
        let out = j.clone().select(&["c0"], &["c0", "c1"]).run(&s).unwrap();
        let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
        assert_eq!(l.len() as u64, count);
        for k in (0..l.len()).step_by(997) {
            assert!(holds(l[k].get().unwrap() as usize, r[k].get().unwrap() as usize));
        }
        let t = out.table.to_host().unwrap();
        let mx = t.column("c1").unwrap();
        assert_eq!(mx.len(), r.len());
        assert!(r.iter().enumerate().all(|(k, rr)| mx.value(k) == Value::Int(x[rr.get().unwrap() as usize] as i128)));
    }
}

#[test]
fn theta_sort_rejects_other_predicates() {
    let Some(s) = stream("theta_sort_rejects_other_predicates") else { return };
    let rel = table(vec![HostColumn::from_values(vec![1i32, 2])]);
    let d = Table::upload(&s, &rel).unwrap();
    let eq = col_l(0).equals(col_r(0));
    assert!(matches!(sorted(&d, &d, &eq, JoinType::Inner).run(&s), Err(Error::Unsupported { .. })));
    assert!(matches!(sorted(&d, &d, &eq, JoinType::Inner).aggregate(&s, Agg::Count, None), Err(Error::Unsupported { .. })));
    // FULL is not produced per left row by the sorted path: its chunks take the nested loop.
    let lt = col_l(0).less(col_r(0));
    let chunks = sorted(&d, &d, &lt, JoinType::Full).chunks(&s, ChunkBudget::Bytes(1)).unwrap();
    assert_eq!(chunks.source().path(), "nested loop");
    let mut got = Vec::new();
    for c in chunks {
        let (a, b) = c.unwrap().data.to_host().unwrap();
        got.extend(pairs_of(&a, &b, JoinType::Full).unwrap());
    }
    got.sort();
    assert_eq!(got, reference(&rel, &rel, &lt, JoinType::Full));
    // Schema mismatch: an i64 compared with an i32 (no implicit casts).
    let other = Table::upload(&s, &table(vec![HostColumn::from_values(vec![1i64])])).unwrap();
    assert!(matches!(sorted(&other, &d, &lt, JoinType::Inner).run(&s), Err(Error::InvalidArgument(_))));
}

/// Keys over the whole range of the type (all bits vary; f32 from random bit patterns, NaN and
/// ±inf included), for the small path's sort on the bits that differ.
fn wide_column(rng: &mut StdRng, t: DataType, n: usize) -> HostColumn {
    match t {
        DataType::Int32 => HostColumn::from_values((0..n).map(|_| rng.gen::<i32>()).collect()),
        DataType::Int64 => HostColumn::from_values((0..n).map(|_| rng.gen::<i64>()).collect()),
        DataType::UInt32 => HostColumn::from_values((0..n).map(|_| rng.gen::<u32>()).collect()),
        DataType::UInt64 => HostColumn::from_values((0..n).map(|_| rng.gen::<u64>()).collect()),
        DataType::Float32 => HostColumn::from_values((0..n).map(|_| f32::from_bits(rng.gen())).collect()),
        // Magnitudes below 2^60 (and a few specials), so that sums of them cannot overflow.
        DataType::Float64 => HostColumn::from_values(
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
        t => unreachable!("{t}"),
    }
}

/// The small aggregate path (right sides up to SMALL_RIGHT_MAX rows, sorted in runs of 4096)
/// against the general one (forced: `TestingOptions::theta_aggregate_path`), and both against
/// the reference where it is cheap: every aggregate and column, in total and per left row (each
/// sampled left row's aggregate alone).
fn check_paths(s: &Stream, c: &Case, with_reference: bool) -> Result<(), TestCaseError> {
    let (lt, rt) = upload(s, c)?;
    let cols = [None, Some((Side::Left, 1)), Some((Side::Right, 1)), Some((Side::Right, 0))];
    let inner = with_reference.then(|| reference(&c.left, &c.right, &c.pred, JoinType::Inner));
    let rows = rows_to_check(c.left.rows(), 16);
    let forced = |path| TestingOptions { theta_aggregate_path: path, ..POISONED };
    for agg in [Agg::Count, Agg::Sum, Agg::Min, Agg::Max] {
        for col in cols {
            if agg != Agg::Count && col.is_none() {
                continue;
            }
            let small_applies = !(matches!(agg, Agg::Min | Agg::Max) && matches!(col, Some((Side::Right, _))));
            let via = |path| sorted_aggregate(s, &lt, &rt, &c.pred, agg, col, forced(path));
            let via_rows = |path| aggregate_rows(s, &lt, &rt, &c.pred, Algorithm::ThetaSorted, forced(path), agg, col, &rows);
            if !small_applies {
                prop_assert!(matches!(via(ThetaAggregatePath::Small), Err(Error::InvalidArgument(_))), "{}: {agg:?} of {col:?} on the small path", c.desc);
                continue;
            }
            let tol = tolerance(c, agg, col);
            let small = e(via(ThetaAggregatePath::Small), "small total")?;
            let general = e(via(ThetaAggregatePath::General), "general total")?;
            prop_assert!(agg_close(small, general, tol), "{}: {agg:?} of {col:?}: small {small:?}, general {general:?}", c.desc);
            if let Some(inner) = &inner {
                let want = aggregate_of(&c.left, &c.right, inner, agg, col);
                prop_assert!(agg_close(small, want, tol), "{}: {agg:?} of {col:?}: small {small:?}, want {want:?}", c.desc);
            }
            let rows_small = e(via_rows(ThetaAggregatePath::Small), "small per row")?;
            let rows_general = e(via_rows(ThetaAggregatePath::General), "general per row")?;
            prop_assert_eq!(rows_small.len(), rows.len());
            prop_assert_eq!(rows_general.len(), rows.len());
            for ((a, b), i) in rows_small.iter().zip(&rows_general).zip(&rows) {
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
    let sizes: &[usize] = pick(&[1, 2, 255, 4095, 4096, 4097, 8191, 12289, 65535, 65536], &[1, 255, 4095, 4096, 4097, 8191, 65536]);
    assert_eq!(sizes.last(), Some(&SMALL_RIGHT_MAX));
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
        let right = table(vec![wide_column(&mut rng, t, nr), gen_column(&mut rng, DataType::Int64, nr, 0, true)]);
        let left = table(vec![wide_column(&mut rng, t, 45), gen_column(&mut rng, DataType::Float64, 45, 0, true)]);
        for op in [CmpOp::Gt, CmpOp::Le] {
            let pred = Predicate::cmp(op, col_l(0), col_r(0));
            let c = Case { desc: format!("wide {t} keys, 45 x {nr}, l.0 {} r.0", op.symbol()), left: left.clone(), right: right.clone(), pred };
            check_paths(&s, &c, false).unwrap();
        }
    }
    // Above the threshold: the small path refuses, Auto takes the general one.
    let c = make_case(5, 20, SMALL_RIGHT_MAX + 1, DataType::Int32, DataType::Int64, 2, 0);
    let (lt, rt) = upload(&s, &c).unwrap();
    let col = Some((Side::Right, 1));
    let via = |path| sorted_aggregate(&s, &lt, &rt, &c.pred, Agg::Sum, col, TestingOptions { theta_aggregate_path: path, ..POISONED });
    assert!(matches!(via(ThetaAggregatePath::Small), Err(Error::InvalidArgument(_))));
    let auto = via(ThetaAggregatePath::Auto).unwrap();
    let general = via(ThetaAggregatePath::General).unwrap();
    assert_eq!(auto, general);
}
