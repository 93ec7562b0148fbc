//! The distribution rules of the multi-GPU join, checked on the CPU (in CI): a model of the
//! routing (`DistributedJoin`'s shuffle and broadcast, `skew::plan`'s heavy keys spread on one
//! side and copied on the other, rows that match nothing spread) runs the CPU reference join on
//! each model rank's rows, and the union of the ranks' outputs must be the global join's output,
//! pair for pair, with no pair twice and no unmatched row missing or repeated, for every join
//! type, both NULL and NaN rules, with and without a filter, on skewed keys.
//!
//! The device code (hashes, exchange, local joins) runs in `gpu_multi_gpu.rs`; this test checks
//! that the rules it implements are correct for any hash, so it hashes on the host with a hash of
//! its own.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use gpujoin_join::predicate::{col_l, col_r, CmpOp, Predicate};
use gpujoin_join::table::{HostColumn, HostTable, Value};
use gpujoin_join::{JoinType, NanEquality, NullEquality, Side};
use gpujoin_multi_gpu::concat_host;
use gpujoin_multi_gpu::skew::{self, SkewPlan};
use gpujoin_testkit::table_reference;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Pairs = Vec<(Option<u32>, Option<u32>)>;

/// Row `i`'s key hash, or `None` where the row can match nothing (as the device's row hash).
fn key_hash(t: &HostTable, keys: &[&str], i: usize, nulls: NullEquality, nans: NanEquality) -> Option<u64> {
    let mut h = DefaultHasher::new();
    for k in keys {
        match t.column(k).unwrap().value(i) {
            Value::Null if nulls == NullEquality::NullEqualsNothing => return None,
            Value::Null => "null".hash(&mut h),
            Value::Float(x) if x.is_nan() && nans == NanEquality::NanNeverEqual => return None,
            Value::Float(x) if x.is_nan() => "nan".hash(&mut h),
            Value::Float(x) => (if x == 0.0 { 0 } else { x.to_bits() }).hash(&mut h),
            Value::Int(x) => x.hash(&mut h),
            Value::Bool(b) => b.hash(&mut h),
            Value::Str(s) => s.hash(&mut h),
        }
    }
    Some(h.finish())
}

/// The ranks each row goes to (a shuffle by the model's hash, heavy keys by the plan).
#[allow(clippy::too_many_arguments)]
fn route(t: &HostTable, keys: &[&str], nulls: NullEquality, nans: NanEquality, g: usize, plan: &SkewPlan, side: Side, rng: &mut StdRng) -> Vec<Vec<usize>> {
    (0..t.rows())
        .map(|i| match key_hash(t, keys, i, nulls, nans) {
            None => vec![rng.gen_range(0..g)],
            Some(h) => match plan.heavy.binary_search(&h) {
                Ok(k) if plan.spread[k] == side => vec![rng.gen_range(0..g)],
                Ok(_) => (0..g).collect(),
                Err(_) => vec![(h % g as u64) as usize],
            },
        })
        .collect()
}

/// The rows of `t` at `rows`, as a table.
fn take(t: &HostTable, rows: &[usize]) -> HostTable {
    if rows.is_empty() {
        return t.slice(0, 0).unwrap();
    }
    concat_host(&rows.iter().map(|&i| t.slice(i, 1).unwrap()).collect::<Vec<_>>()).unwrap()
}

/// The union of the model ranks' reference joins, in global row numbers, sorted.
#[allow(clippy::too_many_arguments)]
fn distributed(l: &HostTable, r: &HostTable, lr: &[Vec<usize>], rr: &[Vec<usize>], g: usize, keys: &[&str], filter: Option<&Predicate>, jt: JoinType, nulls: NullEquality, nans: NanEquality) -> Pairs {
    let mut out = Vec::new();
    for rank in 0..g {
        let lrows: Vec<usize> = (0..l.rows()).filter(|&i| lr[i].contains(&rank)).collect();
        let rrows: Vec<usize> = (0..r.rows()).filter(|&j| rr[j].contains(&rank)).collect();
        let local = table_reference::join(&take(l, &lrows), keys, &take(r, &rrows), keys, filter, jt, nulls, nans);
        out.extend(local.into_iter().map(|(a, b)| (a.map(|a| lrows[a as usize] as u32), b.map(|b| rrows[b as usize] as u32))));
    }
    out.sort();
    out
}

/// A table of `n` rows: key `k` (`Int64`, about 5% NULL) with `hot` taking half the rows, the
/// rest uniform over `distinct`; `f` (`Float64` with NaN, NULL, -0.0); payload `p`.
fn table(rng: &mut StdRng, n: usize, distinct: i64, hot: Option<i64>) -> HostTable {
    let k: Vec<Option<i64>> = (0..n)
        .map(|_| {
            if rng.gen_range(0..20) == 0 {
                None
            } else if hot.is_some() && rng.gen_bool(0.5) {
                hot
            } else {
                Some(rng.gen_range(0..distinct))
            }
        })
        .collect();
    let f: Vec<Option<f64>> = k.iter().map(|v| v.map(|x| if x % 9 == 4 { f64::NAN } else if x % 9 == 5 { -0.0 } else { (x % 7) as f64 })).collect();
    let p: Vec<i32> = (0..n as i32).map(|_| rng.gen_range(0..100)).collect();
    HostTable::new(vec![("k", HostColumn::from_options(k)), ("f", HostColumn::from_options(f)), ("p", HostColumn::from_values(p))]).unwrap()
}

#[test]
fn shuffles_with_heavy_keys_and_broadcasts_give_every_pair_exactly_once() {
    let mut rng = StdRng::seed_from_u64(161);
    let filter = Predicate::cmp(CmpOp::Lt, col_l(2), col_r(2));
    let mut heavy_seen = 0;
    for case in 0..24 {
        let g = [2usize, 3, 4][case % 3];
        // Skew on the left, on the right, on both, or none.
        let hot = [(Some(3), None), (None, Some(5)), (Some(7), Some(7)), (None, None)][case % 4];
        let (l, r) = (table(&mut rng, 120 + case, 12, hot.0), table(&mut rng, 150 - case, 12, hot.1));
        for keys in [&["k"][..], &["f"][..], &["k", "f"][..]] {
            for jt in JoinType::ALL {
                let nulls = if case % 2 == 0 { NullEquality::NullEqualsNothing } else { NullEquality::NullEqualsNull };
                let nans = if case % 5 < 2 { NanEquality::NanNeverEqual } else { NanEquality::NanEqualsNan };
                for f in [None, Some(&filter)] {
                    let want = {
                        let mut w = table_reference::join(&l, keys, &r, keys, f, jt, nulls, nans);
                        w.sort();
                        w
                    };
                    let what = format!("case {case}: {g} ranks, keys {keys:?}, {jt:?}, {nulls:?}, {nans:?}, filter {}", f.is_some());
                    // Shuffle: every matchable row's hash is sampled (the device samples some).
                    let hashes = |t: &HostTable| (0..t.rows()).filter_map(|i| key_hash(t, keys, i, nulls, nans)).collect::<Vec<u64>>();
                    let mut plan = skew::plan(&hashes(&l), l.rows() as u64, &hashes(&r), r.rows() as u64, g, jt);
                    // The device sorts the heavy hashes: the plan lists them in order.
                    assert!(plan.heavy.windows(2).all(|w| w[0] < w[1]), "{what}: heavy hashes in order");
                    heavy_seen += plan.heavy.len();
                    for s in &plan.spread {
                        let copied = if *s == Side::Left { Side::Right } else { Side::Left };
                        assert!(skew::replicable(jt, copied), "{what}: a plan copies the {copied:?} side");
                    }
                    let lr = route(&l, keys, nulls, nans, g, &plan, Side::Left, &mut rng);
                    let rr = route(&r, keys, nulls, nans, g, &plan, Side::Right, &mut rng);
                    assert_eq!(distributed(&l, &r, &lr, &rr, g, keys, f, jt, nulls, nans), want, "{what}: shuffle");
                    // Without the skew plan too.
                    plan = SkewPlan::default();
                    let lr = route(&l, keys, nulls, nans, g, &plan, Side::Left, &mut rng);
                    let rr = route(&r, keys, nulls, nans, g, &plan, Side::Right, &mut rng);
                    assert_eq!(distributed(&l, &r, &lr, &rr, g, keys, f, jt, nulls, nans), want, "{what}: shuffle without skew handling");
                    // Broadcast of each side the join type allows: the other side stays in
                    // contiguous runs.
                    for side in [Side::Left, Side::Right] {
                        if !skew::replicable(jt, side) {
                            continue;
                        }
                        let stay = |n: usize| (0..n).map(|i| vec![i * g / n.max(1)]).collect::<Vec<_>>();
                        let all = |n: usize| vec![(0..g).collect::<Vec<_>>(); n];
                        let (lr, rr) = if side == Side::Left { (all(l.rows()), stay(r.rows())) } else { (stay(l.rows()), all(r.rows())) };
                        assert_eq!(distributed(&l, &r, &lr, &rr, g, keys, f, jt, nulls, nans), want, "{what}: broadcast {side:?}");
                    }
                }
            }
        }
    }
    assert!(heavy_seen > 0, "no case had a heavy key");
}

#[test]
fn copying_a_side_the_join_reports_alone_would_repeat_its_rows() {
    // The reason for `skew::replicable`: a left join that copied its left rows to two ranks
    // would report an unmatched left row twice.
    let l = HostTable::new(vec![("k", HostColumn::from_values(vec![1i64, 2]))]).unwrap();
    let r = HostTable::new(vec![("k", HostColumn::from_values(vec![1i64]))]).unwrap();
    let (n, e) = (NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
    let want = table_reference::join(&l, &["k"], &r, &["k"], None, JoinType::Left, n, e);
    let copied = distributed(&l, &r, &[vec![0, 1], vec![0, 1]], &[vec![0]], 2, &["k"], None, JoinType::Left, n, e);
    assert_ne!(copied, want);
    assert!(!skew::replicable(JoinType::Left, Side::Left));
    assert!(skew::replicable(JoinType::Left, Side::Right));
}
