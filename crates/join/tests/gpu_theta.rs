//! GPU tests of the theta-join entry points (crates/join/src/theta/mod.rs) and of theta joins in
//! chunks (crates/join/src/theta/chunks.rs), against the CPU reference (theta_reference):
//! predicates of each path's shape (single inequality or band -> sorted; equality conjuncts ->
//! mixed; anything else -> nested loop), every join type, aggregates, materialized columns, and
//! chunked output (budgets far below the output, a budget below one left row's output, host
//! streaming) equal to the one-shot result. `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer)
//! runs fewer property cases.
mod common;

use common::{canonical_pairs, diff, fail};
use gpujoin_device::testing::{cases, pick};
use gpujoin_device::Stream;
use gpujoin_join::chunked::{stream_to_host, ChunkBudget, HostStreamOptions};
use gpujoin_join::device_relation::{DeviceColumnData, DeviceRelation};
use gpujoin_join::predicate::{col_l, col_r, lit, CheckedPredicate, ColumnData, Predicate, Relation, Side};
use gpujoin_join::theta::{
    choose_path, theta_aggregate, theta_aggregate_per_left_row, theta_join, theta_join_chunks, theta_join_size, theta_materialize, theta_materialize_chunks,
    Agg, AggValue, ThetaChunkSource, ThetaColumnsSource, ThetaPath,
};
use gpujoin_join::{JoinType, RowId};
use gpujoin_testkit::reference::pairs_from_maps;
use gpujoin_testkit::theta_reference;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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

fn e<T>(r: gpujoin_device::Result<T>, what: &str) -> Result<T, TestCaseError> {
    r.map_err(|err| fail(format!("{what}: {err}")))
}

/// Two relations of (a: i32, x: i32, s: i64) with values in `0..domain` (a few duplicates).
fn relation(rng: &mut StdRng, n: usize, domain: i32) -> Relation {
    let a: Vec<i32> = (0..n).map(|_| rng.gen_range(0..domain.max(1))).collect();
    let x: Vec<i32> = (0..n).map(|_| rng.gen_range(0..8)).collect();
    let s: Vec<i64> = (0..n).map(|_| rng.gen_range(-1000..1000)).collect();
    Relation::new(vec![ColumnData::I32(a), ColumnData::I32(x), ColumnData::I64(s)]).unwrap()
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

fn reference_pairs(l: &Relation, r: &Relation, p: &CheckedPredicate, jt: JoinType) -> Vec<(RowId, RowId)> {
    let mut want = theta_reference::theta_join(l, r, p, jt).unwrap();
    want.sort();
    want
}

#[test]
fn entry_points_match_the_reference() {
    let Some(s) = stream("entry_points_match_the_reference") else { return };
    // Reduced: fewer right rows; the left side still spans two blocks of 256 rows.
    run(cases(12, 3), 0x7E7A_0001, (0usize..300, 0usize..pick(200, 80), 1i32..400, any::<u64>()), |(nl, nr, domain, seed)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let (l, r) = (relation(&mut rng, nl, domain), relation(&mut rng, nr, domain));
        let (dl, dr) = (e(DeviceRelation::upload(&s, &l), "upload")?, e(DeviceRelation::upload(&s, &r), "upload")?);
        for (pred, shape) in predicates() {
            let p = pred.check(&l.schema(), &r.schema()).unwrap();
            let path = choose_path(&p);
            match shape {
                "sorted" => prop_assert!(matches!(path, ThetaPath::Sorted(_)), "{:?}", path),
                "mixed" => prop_assert_eq!(&path, &ThetaPath::Mixed),
                "loop" => prop_assert_eq!(&path, &ThetaPath::NestedLoop),
                _ => {}
            }
            for jt in JOIN_TYPES {
                let maps = e(theta_join(&s, &dl, &dr, &p, jt), "theta_join")?;
                let mut got = canonical_pairs(&maps, jt)?;
                got.sort();
                let want = reference_pairs(&l, &r, &p, jt);
                prop_assert!(got == want, "{shape} {jt:?} ({nl} x {nr}): {}", diff(&got, &want));
                prop_assert_eq!(e(theta_join_size(&s, &dl, &dr, &p, jt), "size")?, want.len() as u64);
            }
            for (agg, col) in [(Agg::Count, None), (Agg::Sum, Some((Side::Right, 2))), (Agg::Min, Some((Side::Left, 0))), (Agg::Max, Some((Side::Right, 2)))] {
                let got = e(theta_aggregate(&s, &dl, &dr, &p, agg, col), "aggregate")?;
                let want = theta_reference::theta_aggregate(&l, &r, &p, agg, col).unwrap();
                prop_assert_eq!(got, want, "{} {:?}", shape, agg);
                let got = e(theta_aggregate_per_left_row(&s, &dl, &dr, &p, agg, col), "aggregate per row")?;
                let want = theta_reference::theta_aggregate_per_left_row(&l, &r, &p, agg, col).unwrap();
                prop_assert_eq!(got, want, "{} {:?} per left row", shape, agg);
            }
            // Materialized inner join: (l.a, l.s, r.a, r.x) rows as a multiset.
            let cols = e(theta_materialize(&s, &dl, &dr, &p, &[0, 2], &[0, 1]), "materialize")?;
            let mut got = rows_of(&cols);
            got.sort();
            let mut want: Vec<[i64; 4]> = reference_pairs(&l, &r, &p, JoinType::Inner).iter().map(|&(a, b)| host_row(&l, &r, a, b)).collect();
            want.sort();
            prop_assert!(got == want, "{shape}: materialized {} rows, expected {}", got.len(), want.len());
        }
        Ok(())
    });
}

fn int(c: &ColumnData, i: usize) -> i64 {
    match c {
        ColumnData::I32(v) => v[i] as i64,
        ColumnData::I64(v) => v[i],
        _ => unreachable!(),
    }
}

fn host_row(l: &Relation, r: &Relation, a: RowId, b: RowId) -> [i64; 4] {
    let (a, b) = (a.get().unwrap() as usize, b.get().unwrap() as usize);
    [int(&l.columns[0], a), int(&l.columns[2], a), int(&r.columns[0], b), int(&r.columns[1], b)]
}

fn rows_of(cols: &[DeviceColumnData]) -> Vec<[i64; 4]> {
    let host: Vec<ColumnData> = cols.iter().map(|c| c.to_host().unwrap()).collect();
    let n = host.first().map_or(0, ColumnData::len);
    (0..n).map(|i| [int(&host[0], i), int(&host[1], i), int(&host[2], i), int(&host[3], i)]).collect()
}

fn host_pairs(maps: &gpujoin_join::GatherMaps) -> (Vec<RowId>, Vec<RowId>) {
    maps.to_host().unwrap()
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
        let (dl, dr) = (e(DeviceRelation::upload(&s, &l), "upload")?, e(DeviceRelation::upload(&s, &r), "upload")?);
        for (pred, shape) in predicates() {
            let p = pred.check(&l.schema(), &r.schema()).unwrap();
            for jt in JOIN_TYPES {
                let budget = ChunkBudget::Bytes(8 * budget_rows);
                let source = e(ThetaChunkSource::new(&s, &dl, &dr, &p, jt), "chunk source")?;
                let path = source.path();
                // Equality conjuncts are joined on, not run as a nested loop (issue 10).
                if choose_path(&p) == ThetaPath::Mixed && nl > 0 && nr > 0 && matches!(jt, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
                    prop_assert_eq!(path, "mixed", "{} {:?}", shape, jt);
                }
                let chunks = e(theta_join_chunks(&s, &dl, &dr, &p, jt, budget), "chunks")?;
                let total = chunks.total_rows();
                let (mut cl, mut cr) = (Vec::new(), Vec::new());
                let mut next = 0u64;
                for c in chunks {
                    let c = e(c, "chunk")?;
                    prop_assert_eq!(c.output.start, next, "chunks are contiguous");
                    prop_assert!(c.data.rows() <= budget_rows.max(1), "{} rows over a budget of {}", c.data.rows(), budget_rows);
                    prop_assert_eq!(c.data.rows(), c.output.end - c.output.start);
                    next = c.output.end;
                    let (a, b) = host_pairs(&c.data);
                    cl.extend(a);
                    cr.extend(b);
                }
                prop_assert_eq!(next, total);
                let mut got = pairs_from_maps(&cl, &cr, jt);
                got.sort();
                let want = reference_pairs(&l, &r, &p, jt);
                prop_assert!(got == want, "{shape} {jt:?} via {path}, budget {budget_rows} rows: {}", diff(&got, &want));
                // The same order as the one-shot join whenever both take the same path.
                let one_shot_path = match choose_path(&p) {
                    ThetaPath::Sorted(_) => "sorted",
                    _ => "nested loop",
                };
                let mixed = choose_path(&p) == ThetaPath::Mixed;
                if path == one_shot_path && !mixed {
                    let (ol, or) = host_pairs(&e(theta_join(&s, &dl, &dr, &p, jt), "one shot")?);
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
    let l = Relation::new(vec![ColumnData::I32(vec![5000, -1, 3]), ColumnData::I32(vec![0, 0, 0]), ColumnData::I64(vec![1, 2, 3])]).unwrap();
    let r = Relation::new(vec![
        ColumnData::I32((0..1000).collect()),
        ColumnData::I32((0..1000).map(|i| i % 3).collect()),
        ColumnData::I64((0..1000).collect()),
    ])
    .unwrap();
    let (dl, dr) = (DeviceRelation::upload(&s, &l).unwrap(), DeviceRelation::upload(&s, &r).unwrap());
    // Reduced (sanitizer) runs keep a budget of 28 rows (the row still split, in about 36
    // chunks; for a rotating one of the three join types) and one of 999 rows.
    let mut sample = gpujoin_device::testing::Sample::new(3);
    for (pred, shape) in predicates() {
        let p = pred.check(&l.schema(), &r.schema()).unwrap();
        for bytes in gpujoin_device::testing::pick(vec![0u64, 8, 56, 7992], vec![224, 7992]) {
            for jt in [JoinType::Inner, JoinType::Left, JoinType::Full] {
                if bytes == 224 && !sample.take() {
                    continue;
                }
                let mut got = Vec::new();
                for c in theta_join_chunks(&s, &dl, &dr, &p, jt, ChunkBudget::Bytes(bytes)).unwrap() {
                    let (a, b) = host_pairs(&c.unwrap().data);
                    got.extend(pairs_from_maps(&a, &b, jt));
                }
                got.sort();
                let want = reference_pairs(&l, &r, &p, jt);
                assert!(got == want, "{shape} {jt:?}, budget {bytes} bytes: {}", diff(&got, &want));
            }
            // Materialized columns in chunks.
            let mut got = Vec::new();
            for c in theta_materialize_chunks(&s, &dl, &dr, &p, &[0, 2], &[0, 1], ChunkBudget::Bytes(bytes)).unwrap() {
                got.extend(rows_of(&c.unwrap().data));
            }
            got.sort();
            let mut want: Vec<[i64; 4]> = reference_pairs(&l, &r, &p, JoinType::Inner).iter().map(|&(a, b)| host_row(&l, &r, a, b)).collect();
            want.sort();
            assert!(got == want, "{shape}: materialized chunks, budget {bytes}: {} rows, expected {}", got.len(), want.len());
        }
    }
}

#[test]
fn materialized_chunks_stream_to_host() {
    let Some(s) = stream("materialized_chunks_stream_to_host") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A_0003);
    let (l, r) = (relation(&mut rng, 3000, 5000), relation(&mut rng, 700, 5000));
    let (dl, dr) = (DeviceRelation::upload(&s, &l).unwrap(), DeviceRelation::upload(&s, &r).unwrap());
    for (pred, shape) in predicates() {
        let p = pred.check(&l.schema(), &r.schema()).unwrap();
        let one_shot = rows_of(&theta_materialize(&s, &dl, &dr, &p, &[0, 2], &[0, 1]).unwrap());
        let source = ThetaColumnsSource::new(&s, &dl, &dr, &p, &[0, 2], &[0, 1]).unwrap();
        for depth in [2, 3] {
            let mut got = Vec::new();
            let stats = stream_to_host(&s, &source, ChunkBudget::Bytes(24 * 4096), HostStreamOptions { depth, ..HostStreamOptions::default() }, |c| {
                let (a, b, x, y) = (c.column::<i32>(0)?, c.column::<i64>(1)?, c.column::<i32>(2)?, c.column::<i32>(3)?);
                for i in 0..a.len() {
                    got.push([a[i] as i64, b[i], x[i] as i64, y[i] as i64]);
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(stats.rows, one_shot.len() as u64, "{shape}");
            if source.path() == "sorted" {
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
    let l = Relation::new(vec![ColumnData::I32(vec![1, 2]), ColumnData::utf8(["a", "b"])]).unwrap();
    let r = Relation::new(vec![ColumnData::I32(vec![1])]).unwrap();
    let (dl, dr) = (DeviceRelation::upload(&s, &l).unwrap(), DeviceRelation::upload(&s, &r).unwrap());
    let p = col_l(0).greater(col_r(0)).check(&l.schema(), &r.schema()).unwrap();
    assert!(theta_materialize(&s, &dl, &dr, &p, &[1], &[]).is_err(), "a string column cannot be materialized");
    assert!(theta_materialize(&s, &dl, &dr, &p, &[7], &[]).is_err(), "a missing column");
    // Relations swapped: their schemas are not the checked ones.
    assert!(ThetaChunkSource::new(&s, &dr, &dl, &p, JoinType::Inner).is_err());
    assert!(theta_join(&s, &dr, &dl, &p, JoinType::Inner).is_err());
    let AggValue::Int(n) = theta_aggregate(&s, &dl, &dr, &p, Agg::Count, None).unwrap() else { panic!("count is an integer") };
    assert_eq!(n, 1);
}
