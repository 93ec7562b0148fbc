//! Sort-based theta joins (seed 004's queries): the aggregate form `SUM(S.x) WHERE R.a > S.a` and
//! the output-bound form `R.a > S.a` materializing `(R.a, S.a, S.x)` on the device. `a` and `x`
//! are uniform i32 in [0, 2^20), so the selectivity is about 0.5. Times run from device-resident
//! relations to the result on the host (aggregates) or in device memory (materialization).
//!
//! Each case is followed by its twin `<case>_front_door` (issue 9's before/after check): the same
//! join of the same data through the front door (`plan::Join::tables(..).filter(R.a > S.a)` over
//! uploaded `Int32` tables `(a, x)`, `Algorithm::ThetaSorted` forced), same byte floor:
//! `aggregate(Agg::Sum, S.x)` for the aggregates, `select(&["a"], &["a", "x"]).run` for the
//! materialization (the front door lowers the referenced columns to device relations and gathers
//! the selected columns through the pairs' maps; the old row writes them directly).
mod common;

use gpujoin::join::device_relation::upload;
use gpujoin::join::plan::{Algorithm, Join};
use gpujoin::join::predicate::{col_l, col_r, Side};
use gpujoin::join::table::{HostColumn, HostTable, Table, Value};
use gpujoin::join::theta::sorted::{sorted_theta_aggregate, sorted_theta_join_size, sorted_theta_materialize};
use gpujoin::join::theta::{Agg, AggValue};
use gpujoin::join::JoinType;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const GROUP: &str = "theta";
const DOMAIN: i32 = 1 << 20;

fn relation(n: usize, seed: u64) -> HostTable {
    let mut rng = StdRng::seed_from_u64(seed);
    let a: Vec<i32> = (0..n).map(|_| rng.gen_range(0..DOMAIN)).collect();
    let x: Vec<i32> = (0..n).map(|_| rng.gen_range(0..DOMAIN)).collect();
    HostTable::new(vec![("a", HostColumn::from_values::<i32>(a)), ("x", HostColumn::from_values::<i32>(x))]).unwrap()
}

/// The relation as a table `(a, x)` on the device, for the front door.
fn table(s: &gpujoin::device::Stream, r: &HostTable) -> Table {
    Table::upload(s, r).unwrap()
}

/// The values of an `Int32` column.
fn ints(c: &HostColumn) -> Vec<i32> {
    (0..c.len()).map(|i| if let Value::Int(v) = c.value(i) { v as i32 } else { unreachable!() }).collect()
}

/// `R.a > S.a` through the front door, the sorted theta join forced.
fn front_door<'a>(r: &'a Table, t: &'a Table) -> Join<'a> {
    let j = Join::new(JoinType::Inner).tables(r, t);
    let pred = j.left("a").unwrap().greater(j.right("a").unwrap());
    j.filter(pred).algorithm(Algorithm::ThetaSorted)
}

/// SUM(S.x) WHERE R.a > S.a on the CPU (sort S by a, prefix sums, binary search per R row).
fn cpu_sum(r: &HostTable, s: &HostTable) -> i128 {
    let (ra, sa, sx) = (ints(&r.columns()[0]), ints(&s.columns()[0]), ints(&s.columns()[1]));
    let mut pairs: Vec<(i32, i32)> = sa.iter().copied().zip(sx.iter().copied()).collect();
    pairs.sort();
    let mut prefix = vec![0i128; pairs.len() + 1];
    for (i, p) in pairs.iter().enumerate() {
        prefix[i + 1] = prefix[i] + p.1 as i128;
    }
    ra.iter().map(|&a| prefix[pairs.partition_point(|p| p.0 < a)]).sum()
}

fn main() {
    let Some(mut h) = common::Harness::new("theta") else { return };
    let s = h.stream.clone();
    let pred_schema = [gpujoin::join::predicate::DataType::Int32, gpujoin::join::predicate::DataType::Int32];
    let pred = col_l(0).greater(col_r(0)).check(&pred_schema, &pred_schema).unwrap();

    for (case, nr, ns) in [("agg_gt_50k_25k", 50_000usize, 25_000usize), ("agg_gt_500k_50k", 500_000, 50_000)] {
        let (r, t) = (relation(nr, 1), relation(ns, 2));
        let want = cpu_sum(&r, &t);
        let (dr, dt) = (upload(&s, &r).unwrap(), upload(&s, &t).unwrap());
        let (dr, dt) = (dr.view(), dt.view());
        let got = sorted_theta_aggregate(&s, &dr, &dt, &pred, Agg::Sum, Some((Side::Right, 1))).unwrap();
        assert_eq!(got, AggValue::Int(want), "{case}");
        // Bytes that must move: both key columns and S.x read once.
        let bytes = (4 * (nr + 2 * ns)) as u64;
        h.case(GROUP, case, bytes, (nr + ns) as u64, |st| {
            let v = sorted_theta_aggregate(st, &dr, &dt, &pred, Agg::Sum, Some((Side::Right, 1))).unwrap();
            assert!(matches!(v, AggValue::Int(_)));
        });
        let (tr, tt) = (table(&s, &r), table(&s, &t));
        let join = front_door(&tr, &tt);
        assert_eq!(join.aggregate(&s, Agg::Sum, Some((Side::Right, "x"))).unwrap(), AggValue::Int(want), "{case}_front_door");
        h.case(GROUP, &format!("{case}_front_door"), bytes, (nr + ns) as u64, |st| {
            let v = join.aggregate(st, Agg::Sum, Some((Side::Right, "x"))).unwrap();
            assert!(matches!(v, AggValue::Int(_)));
        });
    }

    {
        let case = "out_gt_50k_5k_device";
        let (nr, ns) = (50_000usize, 5_000usize);
        let (r, t) = (relation(nr, 3), relation(ns, 4));
        let (dr, dt) = (upload(&s, &r).unwrap(), upload(&s, &t).unwrap());
        let (dr, dt) = (dr.view(), dt.view());
        let rows = sorted_theta_join_size(&s, &dr, &dt, &pred, JoinType::Inner).unwrap();
        let cols = sorted_theta_materialize(&s, &dr, &dt, &pred, &[0], &[0, 1]).unwrap();
        assert!(cols.iter().all(|c| c.len() as u64 == rows));
        // Spot check: every output row satisfies R.a > S.a.
        if let (Some(ra), Some(sa)) = (cols[0].view().typed::<i32>(), cols[1].view().typed::<i32>()) {
            let n = (rows as usize).min(1 << 16);
            let (ra, sa) = (s.copy_to_host(&ra.slice(..n)).unwrap(), s.copy_to_host(&sa.slice(..n)).unwrap());
            assert!(ra.iter().zip(&sa).all(|(a, b)| a > b));
        }
        drop(cols);
        // Bytes that must move: the output written (3 x i32 per row).
        let bytes = rows * 12;
        println!("theta/{case}: {rows} output rows, {:.2} GB written; byte floor {:.3} ms", bytes as f64 / 1e9, h.floor_ms(bytes));
        h.case(GROUP, case, bytes, rows, |st| {
            let out = sorted_theta_materialize(st, &dr, &dt, &pred, &[0], &[0, 1]).unwrap();
            assert_eq!(out.len(), 3);
        });
        let (tr, tt) = (table(&s, &r), table(&s, &t));
        let join = front_door(&tr, &tt).select(&["a"], &["a", "x"]);
        let out = join.run(&s).unwrap();
        assert_eq!((out.rows, out.table.columns().len()), (rows, 3));
        assert_eq!(out.algorithm, Algorithm::ThetaSorted);
        // Spot check: every output row satisfies R.a > S.a.
        let n = (rows as usize).min(1 << 16);
        let spot = out.table.view().slice(0, n).unwrap().to_host(&s).unwrap();
        let (ra, sa) = (spot.column("left.a").unwrap(), spot.column("right.a").unwrap());
        assert!((0..n).all(|i| matches!((ra.value(i), sa.value(i)), (Value::Int(a), Value::Int(b)) if a > b)));
        drop(out);
        h.case(GROUP, &format!("{case}_front_door"), bytes, rows, |st| {
            let out = join.run(st).unwrap();
            assert_eq!(out.table.columns().len(), 3);
        });
    }
}
