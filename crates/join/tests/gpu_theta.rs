//! GPU tests of theta joins through the front door (`plan::Join` with a filter and no keys, on
//! `table::Table`s) and of theta joins in chunks (`Join::chunks`), against the CPU reference
//! (`gpujoin_testkit::table_reference`): predicates of each path's shape (single inequality or
//! band -> sorted; equality conjuncts -> mixed; anything else -> nested loop, as
//! `Join::explain` says), every join type, aggregates in total and per left row (the latter as
//! the aggregate of each left row alone), materialized columns (`Join::select`), and chunked
//! output (budgets far below the output, a budget below one left row's output, host streaming
//! of the chunks' maps) equal to the one-shot result. `GPUJOIN_TEST_SIZE=small` (for
//! compute-sanitizer) runs fewer property cases.
mod common;
mod theta_common;

use gpujoin_device::testing::{cases, pick};
use gpujoin_device::{Error, Stream};
use gpujoin_join::chunked::{stream_to_host, ChunkBudget, ChunkSource, HostStreamOptions};
use gpujoin_join::plan::{Algorithm, Join};
use gpujoin_join::predicate::{col_l, col_r, lit, Predicate, Side};
use gpujoin_join::table::{HostColumn, HostTable, Table, Value};
use gpujoin_join::theta::{Agg, AggValue};
use gpujoin_join::{JoinType, TestingOptions};
use gpujoin_testkit::table_reference::{rows_of_pairs, rows_of_table};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use theta_common::{aggregate, aggregate_per_left_row_of, aggregate_rows, diff, fail, pairs, pairs_of, reference, rows_to_check, table, Pair};

const JOIN_TYPES: [JoinType; 8] = JoinType::ALL;

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, max_shrink_iters: 32, ..Config::default() });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

fn e<T>(r: gpujoin_device::Result<T>, what: &str) -> Result<T, TestCaseError> {
    r.map_err(|err| fail(format!("{what}: {err}")))
}

/// Two tables of (c0 = a: i32, c1 = x: i32, c2 = s: i64) with values in `0..domain` (a few
/// duplicates).
fn relation(rng: &mut StdRng, n: usize, domain: i32) -> HostTable {
    let a: Vec<i32> = (0..n).map(|_| rng.gen_range(0..domain.max(1))).collect();
    let x: Vec<i32> = (0..n).map(|_| rng.gen_range(0..8)).collect();
    let s: Vec<i64> = (0..n).map(|_| rng.gen_range(-1000..1000)).collect();
    table(vec![HostColumn::from_values(a), HostColumn::from_values(x), HostColumn::from_values(s)])
}

/// Predicates of the three paths' shapes.
fn predicates() -> Vec<(Predicate, &'static str)> {
    vec![
        (col_l(0).greater(col_r(0)), "sorted"),
        (col_l(0).less_eq(col_r(0) + lit(3)).and(col_l(0).greater_eq(col_r(0) - lit(3))), "sorted-or-loop"),
        (col_l(1).equals(col_r(1)).and(col_l(0).less(col_r(0))), "mixed"),
        (col_l(0).greater(col_r(0)).or(col_l(1).equals(col_r(1))), "loop"),
        (!(col_l(0).less(col_r(0))).and(col_l(2).greater(lit(0i64))), "loop"),
    ]
}

fn stream(name: &str) -> Option<Stream> {
    common::stream(name)
}

fn upload(s: &Stream, t: &HostTable) -> Result<Table, TestCaseError> {
    e(Table::upload(s, t), "upload")
}

/// The materialized columns of the tests: (l.a, l.s, r.a, r.x).
const LEFT_COLS: [&str; 2] = ["c0", "c2"];
const RIGHT_COLS: [&str; 2] = ["c0", "c1"];

/// The path a theta join takes, as `Join::chunks`' source names it.
fn path_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::ThetaSorted => "sorted",
        Algorithm::ThetaMixed => "mixed",
        _ => "nested loop",
    }
}

#[test]
fn entry_points_match_the_reference() {
    let Some(s) = stream("entry_points_match_the_reference") else { return };
    // Reduced: fewer right rows; the left side still spans two blocks of 256 rows.
    run(cases(12, 3), 0x7E7A_0001, (0usize..300, 0usize..pick(200, 80), 1i32..400, any::<u64>()), |(nl, nr, domain, seed)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let (l, r) = (relation(&mut rng, nl, domain), relation(&mut rng, nr, domain));
        let (lt, rt) = (upload(&s, &l)?, upload(&s, &r)?);
        for (pred, shape) in predicates() {
            let inner = Join::new(JoinType::Inner).tables(&lt, &rt).filter(pred.clone());
            let path = e(inner.explain(), "explain")?.algorithm;
            match shape {
                "sorted" => prop_assert_eq!(path, Algorithm::ThetaSorted),
                "mixed" => prop_assert_eq!(path, Algorithm::ThetaMixed),
                "loop" => prop_assert_eq!(path, Algorithm::ThetaNestedLoop),
                _ => {}
            }
            for jt in JOIN_TYPES {
                let j = Join::new(jt).tables(&lt, &rt).filter(pred.clone());
                let out = e(j.run(&s), "run")?;
                prop_assert_eq!(out.algorithm, path, "{} {:?}: {}", shape, jt, out.reason);
                let got = pairs(out.maps.as_ref().expect("theta joins return maps"), jt)?;
                let want = reference(&l, &r, &pred, jt);
                prop_assert!(got == want, "{shape} {jt:?} ({nl} x {nr}): {}", diff(&got, &want));
                prop_assert_eq!(e(j.count(&s), "count")?, want.len() as u64);
            }
            let want_inner = reference(&l, &r, &pred, JoinType::Inner);
            for (agg, col) in [(Agg::Count, None), (Agg::Sum, Some((Side::Right, 2))), (Agg::Min, Some((Side::Left, 0))), (Agg::Max, Some((Side::Right, 2)))] {
                let arg = theta_common::agg_arg(col);
                let got = e(inner.aggregate(&s, agg, arg.as_ref().map(|(side, n)| (*side, n.as_str()))), "aggregate")?;
                let want = aggregate(&l, &r, &pred, agg, col);
                prop_assert_eq!(got, want, "{} {:?}", shape, agg);
                // Per left row: each sampled left row's aggregate alone.
                let rows = rows_to_check(nl, 16);
                let got = e(aggregate_rows(&s, &lt, &rt, &pred, Algorithm::Auto, TestingOptions::DEFAULT, agg, col, &rows), "aggregate per row")?;
                let want = aggregate_per_left_row_of(&l, &r, &want_inner, agg, col);
                for (k, &i) in rows.iter().enumerate() {
                    prop_assert_eq!(got[k], want[i], "{} {:?} left row {}", shape, agg, i);
                }
            }
            // Materialized inner join: (l.a, l.s, r.a, r.x) rows as a multiset.
            let out = e(inner.clone().select(&LEFT_COLS, &RIGHT_COLS).run(&s), "materialize")?;
            let got = rows_of_table(&e(out.table.to_host(), "to host")?);
            let want = rows_of_pairs(&want_inner, &l, &LEFT_COLS, &r, &RIGHT_COLS);
            prop_assert!(got == want, "{shape}: materialized {} rows, expected {}", got.len(), want.len());
        }
        Ok(())
    });
}

#[test]
fn chunks_concatenate_to_the_one_shot_join() {
    let Some(s) = stream("chunks_concatenate_to_the_one_shot_join") else { return };
    // Reduced: fewer right rows and chunks of at least 32 rows (a left row's output, up to 60
    // rows, is still split), so that a case is hundreds of chunks, not thousands.
    let (max_right, min_budget) = pick((180usize, 1u64), (60, 32));
    run(cases(10, 3), 0x7E7A_0002, (0usize..260, 0usize..max_right, 1i32..300, any::<u64>(), min_budget..200), |(nl, nr, domain, seed, budget_rows)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let (l, r) = (relation(&mut rng, nl, domain), relation(&mut rng, nr, domain));
        let (lt, rt) = (upload(&s, &l)?, upload(&s, &r)?);
        for (pred, shape) in predicates() {
            for jt in JOIN_TYPES {
                let budget = ChunkBudget::Bytes(8 * budget_rows);
                let j = Join::new(jt).tables(&lt, &rt).filter(pred.clone());
                let alg = e(j.explain(), "explain")?.algorithm;
                let chunks = e(j.chunks(&s, budget), "chunks")?;
                let path = chunks.source().path();
                // Equality conjuncts are joined on, not run as a nested loop (issue 10).
                if alg == Algorithm::ThetaMixed && nl > 0 && nr > 0 && matches!(jt, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
                    prop_assert_eq!(path, "mixed", "{} {:?}", shape, jt);
                }
                let total = chunks.total_rows();
                let (mut cl, mut cr) = (Vec::new(), Vec::new());
                let mut next = 0u64;
                for c in chunks {
                    let c = e(c, "chunk")?;
                    prop_assert_eq!(c.output.start, next, "chunks are contiguous");
                    prop_assert!(c.data.rows() <= budget_rows.max(1), "{} rows over a budget of {}", c.data.rows(), budget_rows);
                    prop_assert_eq!(c.data.rows(), c.output.end - c.output.start);
                    next = c.output.end;
                    let (a, b) = e(c.data.to_host(), "chunk maps")?;
                    cl.extend(a);
                    cr.extend(b);
                }
                prop_assert_eq!(next, total);
                let got = pairs_of(&cl, &cr, jt)?;
                let want = reference(&l, &r, &pred, jt);
                prop_assert!(got == want, "{shape} {jt:?} via {path}, budget {budget_rows} rows: {}", diff(&got, &want));
                // The same order as the one-shot join whenever both take the same path.
                if path == path_name(alg) && alg != Algorithm::ThetaMixed {
                    let one_shot = e(j.run(&s), "one shot")?;
                    let (ol, or) = e(one_shot.maps.as_ref().expect("maps").to_host(), "one-shot maps")?;
                    prop_assert!(ol == cl, "{shape} {jt:?}: left map order differs from the one-shot join");
                    prop_assert!(or == cr, "{shape} {jt:?}: right map order differs from the one-shot join");
                }
            }
        }
        Ok(())
    });
}

#[test]
fn a_left_row_larger_than_the_budget_is_split() {
    let Some(s) = stream("a_left_row_larger_than_the_budget_is_split") else { return };
    // One left row matching all 1000 right rows, budgets of 0, 1, 7 and 999 rows.
    let l = table(vec![HostColumn::from_values(vec![5000i32, -1, 3]), HostColumn::from_values(vec![0i32, 0, 0]), HostColumn::from_values(vec![1i64, 2, 3])]);
    let r = table(vec![
        HostColumn::from_values((0..1000).collect::<Vec<i32>>()),
        HostColumn::from_values((0..1000).map(|i| i % 3).collect::<Vec<i32>>()),
        HostColumn::from_values((0..1000).collect::<Vec<i64>>()),
    ]);
    let (lt, rt) = (Table::upload(&s, &l).unwrap(), Table::upload(&s, &r).unwrap());
    // Reduced (sanitizer) runs keep a budget of 28 rows (the row still split, in about 36
    // chunks; for a rotating one of the three join types) and one of 999 rows.
    let mut sample = gpujoin_device::testing::Sample::new(3);
    for (pred, shape) in predicates() {
        for bytes in gpujoin_device::testing::pick(vec![0u64, 8, 56, 7992], vec![224, 7992]) {
            for jt in [JoinType::Inner, JoinType::Left, JoinType::Full] {
                if bytes == 224 && !sample.take() {
                    continue;
                }
                let mut got = Vec::new();
                for c in Join::new(jt).tables(&lt, &rt).filter(pred.clone()).chunks(&s, ChunkBudget::Bytes(bytes)).unwrap() {
                    let (a, b) = c.unwrap().data.to_host().unwrap();
                    got.extend(pairs_of(&a, &b, jt).unwrap());
                }
                got.sort();
                let want = reference(&l, &r, &pred, jt);
                assert!(got == want, "{shape} {jt:?}, budget {bytes} bytes: {}", diff(&got, &want));
            }
            // Materialized columns in chunks: each chunk's maps gathered (`Join::gather`).
            let j = Join::new(JoinType::Inner).tables(&lt, &rt).filter(pred.clone()).select(&LEFT_COLS, &RIGHT_COLS);
            let mut got = Vec::new();
            for c in j.chunks(&s, ChunkBudget::Bytes(bytes)).unwrap() {
                got.extend(rows_of_table(&j.gather(&s, &c.unwrap().data).unwrap().to_host().unwrap()));
            }
            got.sort();
            let want = rows_of_pairs(&reference(&l, &r, &pred, JoinType::Inner), &l, &LEFT_COLS, &r, &RIGHT_COLS);
            assert!(got == want, "{shape}: materialized chunks, budget {bytes}: {} rows, expected {}", got.len(), want.len());
        }
    }
}

fn int(v: Value<'_>) -> i64 {
    match v {
        Value::Int(x) => x as i64,
        v => panic!("an integer, not {v:?}"),
    }
}

#[test]
fn materialized_chunks_stream_to_host() {
    let Some(s) = stream("materialized_chunks_stream_to_host") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A_0003);
    let (l, r) = (relation(&mut rng, 3000, 5000), relation(&mut rng, 700, 5000));
    let (lt, rt) = (Table::upload(&s, &l).unwrap(), Table::upload(&s, &r).unwrap());
    // (l.a, l.s, r.a, r.x) of a pair, from the host tables.
    let row = |(a, b): Pair| -> [i64; 4] {
        let (a, b) = (a.unwrap() as usize, b.unwrap() as usize);
        [int(l.columns()[0].value(a)), int(l.columns()[2].value(a)), int(r.columns()[0].value(b)), int(r.columns()[1].value(b))]
    };
    for (pred, shape) in predicates() {
        let j = Join::new(JoinType::Inner).tables(&lt, &rt).filter(pred.clone()).select(&LEFT_COLS, &RIGHT_COLS);
        let out = j.run(&s).unwrap();
        let t = out.table.to_host().unwrap();
        let one_shot: Vec<[i64; 4]> = (0..t.rows()).map(|k| [0, 1, 2, 3].map(|c| int(t.columns()[c].value(k)))).collect();
        assert_eq!(one_shot.len() as u64, out.rows);
        // The maps in chunks, streamed to host memory through pinned buffers; the rows gathered
        // on the host.
        let chunks = j.chunks(&s, ChunkBudget::Bytes(1 << 20)).unwrap();
        let source = chunks.source();
        assert_eq!(source.bytes_per_row(), 8);
        for depth in [2, 3] {
            let mut got = Vec::new();
            let stats = stream_to_host(&s, source, ChunkBudget::Bytes(8 * 4096), HostStreamOptions { depth, ..HostStreamOptions::default() }, |c| {
                let (a, b) = c.maps()?;
                got.extend(a.iter().zip(b).map(|(x, y)| row((x.get(), y.get()))));
                Ok(())
            })
            .unwrap();
            assert_eq!(stats.rows, one_shot.len() as u64, "{shape}");
            if source.path() == path_name(out.algorithm) && out.algorithm != Algorithm::ThetaMixed {
                // Same path, same order.
                assert!(got == one_shot, "{shape}: host chunks differ from the one-shot materialization");
            } else {
                let (mut g, mut w) = (got.clone(), one_shot.clone());
                g.sort();
                w.sort();
                assert!(g == w, "{shape}: host chunks differ from the one-shot materialization (as multisets)");
            }
        }
    }
}

#[test]
fn mismatched_relations_and_string_columns_are_errors() {
    let Some(s) = stream("mismatched_relations_and_string_columns_are_errors") else { return };
    let l = table(vec![HostColumn::from_values(vec![1i32, 2]), HostColumn::utf8(["a", "b"])]);
    let r = table(vec![HostColumn::from_values(vec![1i32])]);
    let (lt, rt) = (Table::upload(&s, &l).unwrap(), Table::upload(&s, &r).unwrap());
    let p = col_l(0).greater(col_r(0));
    let j = Join::new(JoinType::Inner).tables(&lt, &rt).filter(p.clone());
    // A string column is materialized (gathered through the maps): the pair (1, 0).
    let out = j.clone().select(&["c1"], &[]).run(&s).unwrap();
    assert_eq!(rows_of_table(&out.table.to_host().unwrap()), rows_of_pairs(&reference(&l, &r, &p, JoinType::Inner), &l, &["c1"], &r, &[]));
    // A missing column, selected or in the filter.
    assert!(matches!(j.clone().select(&["c7"], &[]).run(&s), Err(Error::UnknownColumn { .. })), "a missing selected column");
    let missing = Join::new(JoinType::Inner).tables(&lt, &rt).filter(col_l(7).greater(col_r(0)));
    assert!(matches!(missing.run(&s), Err(Error::InvalidArgument(_))), "a missing filter column");
    // Tables swapped: the filter refers to a left column the (swapped) left table lacks.
    let q = col_l(0).greater(col_r(0)).and(col_l(1).greater_eq(lit("a")));
    assert_eq!(Join::new(JoinType::Inner).tables(&lt, &rt).filter(q.clone()).count(&s).unwrap(), 1);
    let swapped = Join::new(JoinType::Inner).tables(&rt, &lt).filter(q);
    assert!(matches!(swapped.chunks(&s, ChunkBudget::Bytes(1 << 20)), Err(Error::InvalidArgument(_))));
    assert!(matches!(swapped.run(&s), Err(Error::InvalidArgument(_))));
    let AggValue::Int(n) = j.aggregate(&s, Agg::Count, None).unwrap() else { panic!("count is an integer") };
    assert_eq!(n, 1);
}

/// An explicit `Algorithm::ThetaNestedLoop` is honoured by `Join::chunks` whatever the
/// predicate's shape (a single inequality would otherwise chunk through the sorted path, an
/// equality conjunct through the mixed one): the nested loop's prepared join for
/// INNER/LEFT/RIGHT/FULL, computed whole for semi and anti joins; the chunks, concatenated, are
/// the one-shot nested-loop join's maps in the same order.
#[test]
fn chunks_honour_an_explicit_nested_loop() {
    let Some(s) = stream("chunks_honour_an_explicit_nested_loop") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A_0010);
    let (l, r) = (relation(&mut rng, 300, 50), relation(&mut rng, 200, 50));
    let (lt, rt) = (Table::upload(&s, &l).unwrap(), Table::upload(&s, &r).unwrap());
    let shapes = [("a < a (sorted shape)", col_l(0).less(col_r(0))), ("a = a and x < x (mixed shape)", col_l(0).equals(col_r(0)).and(col_l(1).less(col_r(1))))];
    for (what, pred) in shapes {
        for jt in JOIN_TYPES {
            let j = Join::new(jt).tables(&lt, &rt).filter(pred.clone()).algorithm(Algorithm::ThetaNestedLoop);
            let one_shot = j.run(&s).unwrap().maps.unwrap().pairs().unwrap();
            let chunks = j.chunks(&s, ChunkBudget::Bytes(8 * 97)).unwrap();
            let want_path = if matches!(jt, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) { "nested loop" } else { "whole" };
            assert_eq!(chunks.source().path(), want_path, "{what} {jt:?}");
            let mut got = Vec::new();
            for c in chunks {
                let c = c.unwrap();
                let (a, b) = c.data.to_host().unwrap();
                match (jt.has_left_map(), jt.has_right_map()) {
                    (true, true) => got.extend(a.into_iter().zip(b)),
                    (true, false) => got.extend(a.into_iter().map(|x| (x, gpujoin_join::RowId::NONE))),
                    _ => got.extend(b.into_iter().map(|y| (gpujoin_join::RowId::NONE, y))),
                }
            }
            assert!(got == one_shot, "{what} {jt:?}: {} chunked pairs against {} one-shot, or another order", got.len(), one_shot.len());
        }
    }
}
