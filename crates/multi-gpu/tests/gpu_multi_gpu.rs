//! The multi-GPU join against the CPU reference (`table_reference`), every join type, on
//! clusters of 1, 2, 3, 4 and 8 ranks on the one test GPU (`Cluster::on_one_device`: the whole
//! algorithm, exchanging by device copies) and, where the machine has several GPUs and NCCL, on
//! every GPU over NCCL (`Cluster::all_devices`).
//!
//! Inputs have NULLs, NaN and `-0.0` keys, strings (empty, non-ASCII, long), composite keys,
//! sliced parts and empty parts; outputs are compared as sorted rows (the gathered output of a
//! distributed join is deterministic, checked separately, but its order is the ranks' order).
//! They print `SKIPPED` without a GPU and fail loudly with GPUJOIN_REQUIRE_GPU=1; the NCCL test
//! reports a skip on a machine with one GPU or without libnccl.

use gpujoin_device::testing::{device_or_skip, pick, reduced, report_skip};
use gpujoin_device::{Device, Error};
use gpujoin_join::plan::{Algorithm, Join};
use gpujoin_join::predicate::{col_l, col_r, CmpOp, Predicate};
use gpujoin_join::table::{HostColumn, HostTable};
use gpujoin_join::{JoinType, NanEquality, NullEquality, Side};
use gpujoin_multi_gpu::{concat_host, Cluster, DistributedJoin, DistributedTable, Distribution, SkewHandling};
use gpujoin_testkit::table_reference;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The key shapes the tests join on.
#[derive(Debug, Clone, Copy)]
enum Keys {
    /// `Int64` with NULLs.
    Int,
    /// `Utf8` with NULLs, empty and non-ASCII strings, strings differing in their last byte.
    Str,
    /// `Float64` with NaN, `-0.0` and NULLs.
    Float,
    /// (`Int32`, `LargeUtf8`), both nullable.
    Composite,
}

const KEYS: [Keys; 4] = [Keys::Int, Keys::Str, Keys::Float, Keys::Composite];

fn names(k: Keys) -> &'static [&'static str] {
    match k {
        Keys::Int | Keys::Str | Keys::Float => &["k"],
        Keys::Composite => &["k", "k2"],
    }
}

fn string_of(v: i64) -> String {
    match v % 4 {
        0 => format!("key-{v}"),
        1 => format!("ключ{v}é"),
        2 if v % 8 == 2 => String::new(),
        _ => format!("{}{v}", "x".repeat(40)),
    }
}

/// A table of `n` rows: key columns of shape `k` drawn from `distinct` values (about 5% NULL),
/// and payloads `p` (`Int32`), `s` (`Utf8` with NULLs), `b` (`Boolean` with NULLs).
fn table(rng: &mut StdRng, n: usize, k: Keys, distinct: i64, tag: i32) -> HostTable {
    let raw: Vec<Option<i64>> = (0..n).map(|_| (rng.gen_range(0..20) != 0).then(|| rng.gen_range(0..distinct.max(1)))).collect();
    let mut cols = Vec::new();
    match k {
        Keys::Int => cols.push(("k", HostColumn::from_options(raw.clone()))),
        Keys::Str => cols.push(("k", HostColumn::utf8_options(raw.iter().map(|v| v.map(string_of))))),
        Keys::Float => cols.push((
            "k",
            HostColumn::from_options(
                raw.iter()
                    .map(|v| {
                        v.map(|x| match x % 7 {
                            0 => f64::NAN,
                            1 => -0.0,
                            2 => 0.0,
                            _ => x as f64 * 0.5,
                        })
                    })
                    .collect(),
            ),
        )),
        Keys::Composite => {
            cols.push(("k", HostColumn::from_options(raw.iter().map(|v| v.map(|x| (x % 5) as i32)).collect())));
            let second: Vec<Option<String>> = raw.iter().map(|v| v.and_then(|x| (x % 11 != 3).then(|| string_of(x / 5)))).collect();
            cols.push(("k2", HostColumn::large_utf8_options(second)));
        }
    }
    cols.push(("p", HostColumn::from_values((0..n as i32).map(|i| i * 10 + tag).collect::<Vec<i32>>())));
    cols.push(("s", HostColumn::utf8_options((0..n).map(|i| (i % 6 != 5).then(|| format!("{tag}:{i}"))))));
    let bools: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let valid: Vec<bool> = (0..n).map(|i| i % 7 != 4).collect();
    cols.push(("b", HostColumn::from_bools(&bools).with_validity(&valid).expect("validity")));
    HostTable::new(cols).expect("table")
}

/// A table's rows printed as tuples, in order (compares contents, not buffer layouts).
fn ordered_rows(t: &HostTable) -> Vec<String> {
    (0..t.rows()).map(|k| format!("{:?}", t.columns().iter().map(|c| c.value(k)).collect::<Vec<_>>())).collect()
}

fn selected(jt: JoinType) -> (&'static [&'static str], &'static [&'static str]) {
    let l: &[&str] = if jt.has_left_map() { &["k", "p", "s", "b"] } else { &[] };
    let r: &[&str] = if jt.has_right_map() { &["p", "s"] } else { &[] };
    (l, r)
}

struct Case<'a> {
    cluster: &'a Cluster,
    left: &'a HostTable,
    right: &'a HostTable,
    keys: Keys,
    jt: JoinType,
    nulls: NullEquality,
    nans: NanEquality,
    distribution: Distribution,
    filter: Option<Predicate>,
}

/// The reference rows of a case (the linear hashed reference without a filter).
fn reference(c: &Case<'_>) -> Vec<String> {
    let k = names(c.keys);
    let (ls, rs) = selected(c.jt);
    let pairs = match &c.filter {
        None => table_reference::equi_join(c.left, k, c.right, k, c.jt, c.nulls, c.nans),
        Some(f) => table_reference::join(c.left, k, c.right, k, Some(f), c.jt, c.nulls, c.nans),
    };
    table_reference::rows_of_pairs(&pairs, c.left, ls, c.right, rs)
}

/// Runs one distributed join and compares its gathered rows with `want` (the reference rows);
/// `count`: also checks `DistributedJoin::count`.
fn check(c: &Case<'_>, want: &[String], count: bool) {
    let what = format!("{} ranks ({}), {:?} keys, {}x{} rows, {:?}, {:?}, {:?}, {:?}, filter {}", c.cluster.size(), c.cluster.transport(), c.keys, c.left.rows(), c.right.rows(), c.jt, c.nulls, c.nans, c.distribution, c.filter.is_some());
    let (l, r) = (DistributedTable::scatter(c.cluster, c.left).expect("scatter"), DistributedTable::scatter(c.cluster, c.right).expect("scatter"));
    let k = names(c.keys);
    let (ls, rs) = selected(c.jt);
    let mut j = Join::new(c.jt).keys(k, k).select(ls, rs).null_equality(c.nulls).nan_equality(c.nans);
    if let Some(f) = &c.filter {
        j = j.filter(f.clone());
    }
    let j = DistributedJoin::new(j).on(&l, &r).distribution(c.distribution);
    let out = j.run(c.cluster).unwrap_or_else(|e| panic!("{what}: {e}"));
    let host = out.table.to_host().unwrap_or_else(|e| panic!("{what}: gathering: {e}"));
    assert_eq!(out.rows, want.len() as u64, "{what}: rows");
    assert_eq!(out.rows_per_rank.iter().sum::<u64>(), out.rows, "{what}: rows per rank");
    assert_eq!(host.rows() as u64, out.rows, "{what}: gathered rows");
    assert_eq!(table_reference::rows_of_table(&host), want, "{what}: output rows");
    assert_ne!(out.distribution, Distribution::Auto, "{what}");
    if c.cluster.size() == 1 {
        assert_eq!(out.distribution, Distribution::Local, "{what}");
    }
    if count {
        let (n, per_rank) = j.count(c.cluster).unwrap_or_else(|e| panic!("{what}: count: {e}"));
        assert_eq!((n, per_rank), (out.rows, out.rows_per_rank.clone()), "{what}: count");
    }
}

fn distributions(jt: JoinType) -> Vec<Distribution> {
    let mut v = vec![Distribution::Auto, Distribution::Shuffle];
    for side in [Side::Left, Side::Right] {
        if gpujoin_multi_gpu::skew::replicable(jt, side) {
            v.push(Distribution::Broadcast(side));
        }
    }
    v
}

fn rank_counts() -> Vec<usize> {
    pick(vec![1, 2, 3, 4, 8], vec![1, 3])
}

/// Every join type, or (reduced sizes, for compute-sanitizer) two of them, rotating with `turn`
/// so that consecutive calls cover all eight.
fn join_types(turn: usize) -> Vec<JoinType> {
    if reduced() {
        (0..2).map(|k| JoinType::ALL[(2 * turn + k) % JoinType::ALL.len()]).collect()
    } else {
        JoinType::ALL.to_vec()
    }
}

#[test]
fn every_join_type_key_shape_and_distribution_on_ranks_of_one_gpu() {
    let Some(dev) = device_or_skip("every_join_type_key_shape_and_distribution_on_ranks_of_one_gpu") else { return };
    let mut rng = StdRng::seed_from_u64(16);
    for g in rank_counts() {
        let cluster = Cluster::on_one_device(dev.ordinal(), g).expect("cluster");
        // Empty and one-row sides on every rank count; a larger pair on 4 ranks.
        let mut sizes = vec![(0usize, 7usize), (1, 1), (301, 517)];
        if g == 4 && !gpujoin_device::testing::reduced() {
            sizes.push((2500, 1999));
        }
        let mut turn = 0;
        for keys in KEYS {
            for &(nl, nr) in &sizes {
                let (left, right) = (table(&mut rng, nl, keys, 40, 1), table(&mut rng, nr, keys, 60, 2));
                turn += 1;
                for jt in join_types(turn) {
                    let nulls = if rng.gen_bool(0.5) { NullEquality::NullEqualsNull } else { NullEquality::NullEqualsNothing };
                    let nans = if rng.gen_bool(0.5) { NanEquality::NanNeverEqual } else { NanEquality::NanEqualsNan };
                    let mut c = Case { cluster: &cluster, left: &left, right: &right, keys, jt, nulls, nans, distribution: Distribution::Auto, filter: None };
                    let want = reference(&c);
                    let all = if nl > 1 { distributions(jt) } else { vec![Distribution::Auto, Distribution::Shuffle] };
                    for distribution in all {
                        c.distribution = distribution;
                        check(&c, &want, distribution == Distribution::Auto);
                    }
                }
            }
        }
    }
}

#[test]
fn filters_and_theta_joins() {
    let Some(dev) = device_or_skip("filters_and_theta_joins") else { return };
    let mut rng = StdRng::seed_from_u64(17);
    // p is column 1 of both tables (k, p, s, b): left.p < right.p.
    let filter = Predicate::cmp(CmpOp::Lt, col_l(1), col_r(1));
    for g in rank_counts() {
        let cluster = Cluster::on_one_device(dev.ordinal(), g).expect("cluster");
        let (left, right) = (table(&mut rng, 400, Keys::Int, 30, 3), table(&mut rng, 350, Keys::Int, 30, 8));
        for jt in join_types(g) {
            let mut c = Case { cluster: &cluster, left: &left, right: &right, keys: Keys::Int, jt, nulls: NullEquality::NullEqualsNothing, nans: NanEquality::NanEqualsNan, distribution: Distribution::Auto, filter: Some(filter.clone()) };
            let want = reference(&c);
            for distribution in distributions(jt) {
                c.distribution = distribution;
                check(&c, &want, distribution == Distribution::Auto);
            }
        }
        // No keys: a theta join, broadcast where the join type allows one side to be copied.
        let (small_l, small_r) = (table(&mut rng, 90, Keys::Int, 30, 3), table(&mut rng, 70, Keys::Int, 30, 8));
        let (l, r) = (DistributedTable::scatter(&cluster, &small_l).unwrap(), DistributedTable::scatter(&cluster, &small_r).unwrap());
        for jt in JoinType::ALL {
            let (ls, rs) = selected(jt);
            let ls: Vec<&str> = ls.iter().copied().filter(|&c| c != "k").collect();
            let run = DistributedJoin::new(Join::new(jt).select(&ls, rs).filter(filter.clone())).on(&l, &r).run(&cluster);
            let full = jt == JoinType::Full;
            match run {
                Err(Error::Unsupported { .. }) if full && g > 1 => continue,
                Err(e) => panic!("{g} ranks, theta {jt:?}: {e}"),
                Ok(out) => {
                    assert!(!full || g == 1, "{g} ranks: a full theta join cannot be broadcast");
                    let pairs = table_reference::join(&small_l, &[], &small_r, &[], Some(&filter), jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
                    let want = table_reference::rows_of_pairs(&pairs, &small_l, &ls, &small_r, rs);
                    assert_eq!(table_reference::rows_of_table(&out.table.to_host().unwrap()), want, "{g} ranks, theta {jt:?}");
                }
            }
        }
    }
}

/// Zipf-distributed foreign keys (exponent 1.0 and 1.5) against unique primary keys.
fn zipf_keys(rng: &mut StdRng, n: usize, distinct: usize, s: f64) -> Vec<i64> {
    let weights: Vec<f64> = (1..=distinct).map(|k| (k as f64).powf(-s)).collect();
    let total: f64 = weights.iter().sum();
    let mut cdf = Vec::with_capacity(distinct);
    let mut acc = 0.0;
    for w in weights {
        acc += w / total;
        cdf.push(acc);
    }
    (0..n)
        .map(|_| {
            let u = rng.gen::<f64>();
            cdf.partition_point(|&c| c < u).min(distinct - 1) as i64
        })
        .collect()
}

#[test]
fn skewed_keys_are_spread_so_no_rank_gets_more_than_one_and_a_half_shares() {
    let Some(dev) = device_or_skip("skewed_keys_are_spread_so_no_rank_gets_more_than_one_and_a_half_shares") else { return };
    let mut rng = StdRng::seed_from_u64(18);
    let (nr, ns) = pick((1 << 14, 1 << 17), (1 << 10, 1 << 13));
    for s in [1.0, 1.5] {
        let pk = HostTable::new(vec![("k", HostColumn::from_values((0..nr as i64).collect::<Vec<_>>())), ("v", HostColumn::from_values((0..nr as i32).collect::<Vec<_>>()))]).unwrap();
        let fk = HostTable::new(vec![("k", HostColumn::from_values(zipf_keys(&mut rng, ns, nr, s))), ("w", HostColumn::from_values((0..ns as i32).collect::<Vec<_>>()))]).unwrap();
        for g in [2usize, 4, 8] {
            let cluster = Cluster::on_one_device(dev.ordinal(), g).unwrap();
            let (l, r) = (DistributedTable::scatter(&cluster, &pk).unwrap(), DistributedTable::scatter(&cluster, &fk).unwrap());
            for skew in [SkewHandling::Auto, SkewHandling::Off] {
                let out = DistributedJoin::new(Join::new(JoinType::Inner).keys(&["k"], &["k"]).select(&["v"], &["w"])).on(&l, &r).distribution(Distribution::Shuffle).skew(skew).run(&cluster).unwrap();
                assert_eq!(out.rows, ns as u64, "zipf {s}, {g} ranks, {skew:?}");
                let want = table_reference::rows_of_pairs(&table_reference::equi_join(&pk, &["k"], &fk, &["k"], JoinType::Inner, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan), &pk, &["v"], &fk, &["w"]);
                assert_eq!(table_reference::rows_of_table(&out.table.to_host().unwrap()), want, "zipf {s}, {g} ranks, {skew:?}");
                let share = out.rows as f64 / g as f64;
                let most = *out.rows_per_rank.iter().max().unwrap() as f64;
                eprintln!("zipf {s}, {g} ranks, {skew:?}: {} heavy keys, output rows per rank {:?} (most {:.2}x the share)", out.heavy_keys, out.rows_per_rank, most / share);
                if skew == SkewHandling::Auto {
                    assert!(out.heavy_keys > 0, "zipf {s}, {g} ranks: no heavy key found");
                    assert!(most <= 1.5 * share, "zipf {s}, {g} ranks: a rank got {most} output rows, {:.2}x its share", most / share);
                }
            }
            // Other join types: those that may copy the primary-key side split the heavy keys
            // too; the others leave them to the hash. Either way the counts are exact.
            for jt in [JoinType::Left, JoinType::Right, JoinType::RightSemi, JoinType::LeftAnti] {
                let out = DistributedJoin::new(Join::new(jt).keys(&["k"], &["k"])).on(&l, &r).distribution(Distribution::Shuffle).run(&cluster).unwrap();
                let want = table_reference::equi_join_count(&pk, &["k"], &fk, &["k"], jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
                assert_eq!(out.rows, want, "zipf {s}, {g} ranks, {jt:?}");
            }
        }
    }
}

#[test]
fn the_gathered_output_is_deterministic_and_in_rank_order() {
    let Some(dev) = device_or_skip("the_gathered_output_is_deterministic_and_in_rank_order") else { return };
    let mut rng = StdRng::seed_from_u64(19);
    let (left, right) = (table(&mut rng, 3000, Keys::Str, 500, 1), table(&mut rng, 4000, Keys::Str, 500, 2));
    for g in [1usize, 3, 4] {
        let cluster = Cluster::on_one_device(dev.ordinal(), g).unwrap();
        let (l, r) = (DistributedTable::scatter(&cluster, &left).unwrap(), DistributedTable::scatter(&cluster, &right).unwrap());
        for jt in [JoinType::Inner, JoinType::Full, JoinType::LeftSemi] {
            let (ls, rs) = selected(jt);
            for algorithm in [Algorithm::Auto, Algorithm::SortMerge(gpujoin_join::plan::Gather::Unclustered)] {
                let run = || DistributedJoin::new(Join::new(jt).keys(&["k"], &["k"]).select(ls, rs).algorithm(algorithm)).on(&l, &r).run(&cluster).unwrap();
                let (a, b) = (run(), run());
                let (ha, hb) = (a.table.to_host().unwrap(), b.table.to_host().unwrap());
                assert_eq!(ordered_rows(&ha), ordered_rows(&hb), "{g} ranks, {jt:?}, {algorithm:?}: two runs differ");
                // The gathered table is the parts in rank order.
                let parts: Vec<HostTable> = a.table.parts().iter().map(|p| p.to_host().unwrap()).collect();
                assert_eq!(ordered_rows(&concat_host(&parts).unwrap()), ordered_rows(&ha));
                assert_eq!(a.rows_per_rank, parts.iter().map(|p| p.rows() as u64).collect::<Vec<_>>());
                // Gathered onto the last rank's device: the same rows in the same order.
                if !ls.is_empty() || !rs.is_empty() {
                    let on_device = a.table.gather_to(&cluster, g - 1).unwrap();
                    assert_eq!(ordered_rows(&on_device.to_host().unwrap()), ordered_rows(&ha), "{g} ranks, {jt:?}: gathered onto rank {}", g - 1);
                }
            }
        }
    }
}

#[test]
fn bad_input_is_a_typed_error_before_any_device_work() {
    let Some(dev) = device_or_skip("bad_input_is_a_typed_error_before_any_device_work") else { return };
    let mut rng = StdRng::seed_from_u64(20);
    let two = Cluster::on_one_device(dev.ordinal(), 2).unwrap();
    let three = Cluster::on_one_device(dev.ordinal(), 3).unwrap();
    let t = table(&mut rng, 50, Keys::Int, 10, 1);
    let (a, b) = (DistributedTable::scatter(&two, &t).unwrap(), DistributedTable::scatter(&two, &t).unwrap());
    let e = DistributedJoin::new(Join::new(JoinType::Inner).keys(&["k"], &["k"])).on(&a, &b).run(&three).err();
    assert!(matches!(e, Some(Error::InvalidArgument(_))), "{e:?}");
    let e = DistributedJoin::new(Join::new(JoinType::Inner).keys(&["nope"], &["k"])).on(&a, &b).run(&two).err();
    assert!(matches!(e, Some(Error::UnknownColumn { .. })), "{e:?}");
    let e = DistributedJoin::new(Join::new(JoinType::Inner).keys(&["k"], &["s"])).on(&a, &b).run(&two).err();
    assert!(matches!(e, Some(Error::TypeMismatch { .. })), "{e:?}");
    let e = DistributedJoin::new(Join::new(JoinType::Left).keys(&["k"], &["k"])).on(&a, &b).distribution(Distribution::Broadcast(Side::Left)).run(&two).err();
    assert!(matches!(e, Some(Error::Unsupported { .. })), "{e:?}");
    let e = DistributedJoin::new(Join::new(JoinType::Inner)).on(&a, &b).distribution(Distribution::Shuffle).run(&two).err();
    assert!(matches!(e, Some(Error::Unsupported { .. })), "{e:?}");
}

#[test]
fn every_gpu_over_nccl() {
    let Some(_dev) = device_or_skip("every_gpu_over_nccl") else { return };
    let n = Device::count().unwrap();
    if n < 2 {
        report_skip("every_gpu_over_nccl", format!("needs 2 GPUs, this machine has {n}"));
        return;
    }
    if !gpujoin_device::nccl::is_available() {
        report_skip("every_gpu_over_nccl", "libnccl.so could not be loaded");
        return;
    }
    let mut rng = StdRng::seed_from_u64(21);
    let cluster = Cluster::all_devices().unwrap();
    assert_eq!((cluster.size(), cluster.transport()), (n, "NCCL"));
    for keys in KEYS {
        let (left, right) = (table(&mut rng, 2000, keys, 300, 1), table(&mut rng, 3001, keys, 300, 2));
        for jt in JoinType::ALL {
            let mut c = Case { cluster: &cluster, left: &left, right: &right, keys, jt, nulls: NullEquality::NullEqualsNothing, nans: NanEquality::NanEqualsNan, distribution: Distribution::Auto, filter: None };
            let want = reference(&c);
            for distribution in distributions(jt) {
                c.distribution = distribution;
                check(&c, &want, true);
            }
        }
    }
    // The gathered output over NCCL equals the one of ranks on one GPU (same rank count).
    let one = Cluster::on_one_device(0, n).unwrap();
    let (left, right) = (table(&mut rng, 5000, Keys::Composite, 400, 1), table(&mut rng, 7000, Keys::Composite, 400, 2));
    let out = |c: &Cluster| {
        let (l, r) = (DistributedTable::scatter(c, &left).unwrap(), DistributedTable::scatter(c, &right).unwrap());
        let o = DistributedJoin::new(Join::new(JoinType::Full).keys(&["k", "k2"], &["k", "k2"]).select(&["p", "s"], &["p", "b"]).algorithm(Algorithm::SortMerge(gpujoin_join::plan::Gather::Unclustered))).on(&l, &r).run(c).unwrap();
        let host = ordered_rows(&o.table.to_host().unwrap());
        let last = c.size() - 1;
        assert_eq!(ordered_rows(&o.table.gather_to(c, last).unwrap().to_host().unwrap()), host, "gathered onto rank {last} ({})", c.transport());
        host
    };
    assert_eq!(out(&cluster), out(&one));
}
