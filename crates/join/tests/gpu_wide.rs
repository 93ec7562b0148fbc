//! Property tests of the wide joins (issue 4) through the front door (`gpujoin_join::plan::Join`
//! with `.select(..)`): every algorithm (`SortMerge(Gather::Unclustered)` SMJ-UM,
//! `SortMerge(Gather::Clustered)` SMJ-OM, `PartitionedHash(Gather::Unclustered)` PHJ-UM,
//! `PartitionedHash(Gather::Clustered)` PHJ-OM, `Hash` NPHJ, `Auto`) and join type against the
//! CPU reference over host tables (`gpujoin_testkit::table_reference::equi_join`), on PK-FK and
//! FK-FK workloads with match ratios 1 to 1/16, Zipf 0 to 2, 4- and 8-byte keys and payloads,
//! 1 to 6 payload columns, empty and one-row tables; maps only (nothing selected); determinism;
//! peak memory of OM against UM (`Join::with_stats`); join sequences as chained joins against a
//! host chain. Inputs are `HostTable`s uploaded with `Table::upload`.
//!
//! They run on the GPU when one is present, print `SKIPPED` when none is, and fail loudly with
//! GPUJOIN_REQUIRE_GPU=1. Seeds are fixed; the device pool is poisoned before each join.
//!
//! Selected payloads (`JoinOutput::table`) compare with host gathers of the reference pairs as
//! sorted multisets of output rows (payload bits of both sides, `None` on a null side); returned
//! maps compare with the reference pairs as sorted multisets.
//!
//! Keys the clustered gathers cannot compare as they are (wider than 64 bits, nullable) are
//! joined by them as ranks (the front door's module docs): never refused, never another
//! algorithm; the reason says so.
//!
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer property cases and smaller large
//! tests, each still past the threshold it exists for (PHJ-OM's 2^16-row transform chunks,
//! SMJ-OM's 2^18-row key ranges, Auto's 2^20-row NPHJ limit); the peak-memory comparisons, which
//! hold for the sizes of a full run, are asserted only there (reduced runs check the outputs).

mod common;
#[path = "common/wide_tables.rs"]
mod wide_tables;
use common::{canonical_pairs, diff, fail, stream, uniform};
use wide_tables::*;

use std::sync::{Mutex, MutexGuard};

use gpujoin_device::testing::{cases, reduced, rows};
use gpujoin_device::{DeviceBuffer, Error, Stream};
use gpujoin_join::plan::{Algorithm, Gather, Join};
use gpujoin_join::table::{Column, HostColumn, HostTable, NativeValue, Table};
use gpujoin_join::{JoinType, NanEquality, NullEquality, RowId, TestingOptions, UniqueBuildTable};
use gpujoin_testkit::datagen;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const POISON: u8 = 0xAB;
static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn poison_for(s: &Stream, rows: usize) {
    let mut b: DeviceBuffer<u8> = s.alloc((rows * 96 + (1 << 16)).max(1)).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
}

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, max_shrink_iters: 16, ..Config::default() });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

/// The equalities of one join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Opts {
    nulls: NullEquality,
    nans: NanEquality,
}

impl Opts {
    /// `j` with these equalities.
    fn apply(self, j: Join<'_>) -> Join<'_> {
        j.null_equality(self.nulls).nan_equality(self.nans)
    }
}

const DEFAULT: Opts = Opts { nulls: NullEquality::NullEqualsNothing, nans: NanEquality::NanEqualsNan };

const SMJ_UM: Algorithm = Algorithm::SortMerge(Gather::Unclustered);
const SMJ_OM: Algorithm = Algorithm::SortMerge(Gather::Clustered);
const PHJ_UM: Algorithm = Algorithm::PartitionedHash(Gather::Unclustered);
const PHJ_OM: Algorithm = Algorithm::PartitionedHash(Gather::Clustered);

/// The wide algorithms (NPHJ is `Algorithm::Hash`) and Auto.
const ALGOS: [Algorithm; 6] = [SMJ_UM, SMJ_OM, PHJ_UM, PHJ_OM, Algorithm::Hash, Algorithm::Auto];

/// What a front-door reason says when the keys were joined as ranks (see `plan`'s module docs).
const RANKS: &str = "keys joined as ranks";

fn clustered(a: Algorithm) -> bool {
    matches!(a, SMJ_OM | PHJ_OM)
}

fn up(s: &Stream, t: &HostTable) -> Table {
    Table::upload(s, t).unwrap()
}

/// A host table of named columns.
fn host_table(columns: Vec<(String, HostColumn)>) -> HostTable {
    HostTable::new(columns).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------------------------

fn describe(l: &HostTable, r: &HostTable) -> String {
    if l.rows() + r.rows() <= 40 {
        format!("\nleft\n{l}right\n{r}")
    } else {
        format!(" ({} x {} rows)", l.rows(), r.rows())
    }
}

/// A test input: key tables (`k0`, `k1`, ...) and payloads of both sides.
struct Case {
    l: HostTable,
    lp: Vec<PayloadBits>,
    r: HostTable,
    rp: Vec<PayloadBits>,
    opts: Opts,
}

/// What one run returned, in output order (for determinism checks): the algorithm, the maps'
/// pairs, and every output column's bits and validity.
#[derive(PartialEq, Debug)]
struct Snapshot {
    algorithm: Algorithm,
    maps: Option<Vec<(RowId, RowId)>>,
    columns: Vec<(Vec<u64>, Option<Vec<bool>>)>,
}

/// Runs `algo` selecting every payload column of the sides the join type returns, and compares
/// the output table (and the maps, where returned) with the reference. An explicit algorithm
/// must report that it ran itself (no substitution); `ranks`: the front door is expected to join
/// the keys as ranks (its reason says so), or not.
fn check(s: &Stream, c: &Case, jt: JoinType, algo: Algorithm, ranks: bool, what: &str) -> Result<Snapshot, TestCaseError> {
    let what = format!("{} {jt:?} {what}", algo.name());
    let (lk, rk) = (key_names(&c.l), key_names(&c.r));
    let want_pairs = reference(&c.l, &lk, &c.r, &rk, jt, c.opts.nulls, c.opts.nans);
    let ((lt, ln), (rt, rn)) = (with_payloads(&c.l, &c.lp, "lp"), with_payloads(&c.r, &c.rp, "rp"));
    let ln: Vec<String> = if jt.has_left_map() { ln } else { vec![] };
    let rn: Vec<String> = if jt.has_right_map() { rn } else { vec![] };
    let (ls, rs): (Vec<&str>, Vec<&str>) = (ln.iter().map(String::as_str).collect(), rn.iter().map(String::as_str).collect());
    let (dl, dr) = (up(s, &lt), up(s, &rt));
    poison_for(s, c.l.rows() + c.r.rows());
    let out = c
        .opts
        .apply(Join::new(jt).on(&dl, &lk, &dr, &rk))
        .algorithm(algo)
        .select(&ls, &rs)
        .with_stats()
        .run(s)
        .map_err(|e| fail(format!("{what}: error {e}{}", describe(&c.l, &c.r))))?;
    prop_assert!(out.algorithm != Algorithm::Auto, "{}: ran Auto", what);
    prop_assert!(!out.reason.is_empty(), "{}: no reason", what);
    if algo != Algorithm::Auto {
        prop_assert_eq!(out.algorithm, algo, "{}: ran another algorithm: {}", what, out.reason);
    }
    prop_assert_eq!(out.reason.contains(RANKS), ranks, "{}: keys joined as ranks: reason {}", what, out.reason);
    prop_assert_eq!(out.rows, want_pairs.len() as u64, "{}: rows{}", what, describe(&c.l, &c.r));
    let st = out.stats.ok_or_else(|| fail(format!("{what}: no statistics, asked for")))?;
    prop_assert!(st.transform_ms >= 0.0 && st.match_ms >= 0.0 && st.materialize_ms >= 0.0, "{}: {:?}", what, st);
    prop_assert!((st.total_ms - (st.transform_ms + st.match_ms + st.materialize_ms)).abs() < 1e-3, "{}: {:?}", what, st);
    // Inputs of no rows on either side allocate nothing from the pool: no peak to see.
    prop_assert!(st.peak_memory_bytes > 0 || c.l.rows() + c.r.rows() == 0, "{}: {:?}", what, st);
    let rows = out.rows as usize;
    let maps = match &out.maps {
        Some(m) => {
            let got = canonical_pairs(m, jt)?;
            if got != want_pairs {
                return Err(fail(format!("{what}: maps: {}{}", diff(&got, &want_pairs), describe(&c.l, &c.r))));
            }
            Some(m.pairs().unwrap())
        }
        None => {
            prop_assert!(clustered(out.algorithm), "{}: {} returns its maps", what, out.algorithm.name());
            None
        }
    };
    let table = out.table.to_host().map_err(|e| fail(format!("{what}: reading the table: {e}")))?;
    let names: Vec<String> = ln.iter().chain(&rn).cloned().collect();
    prop_assert_eq!(table.names(), names.as_slice(), "{}: output columns", what);
    prop_assert_eq!(table.rows(), if names.is_empty() { 0 } else { rows }, "{}: table rows", what);
    let lrows = if jt.has_left_map() { side_rows(&table, &ln, &c.lp, rows, jt.keeps_unmatched_right(), &format!("{what} left"))? } else { vec![vec![]; rows] };
    let rrows = if jt.has_right_map() { side_rows(&table, &rn, &c.rp, rows, jt.keeps_unmatched_left(), &format!("{what} right"))? } else { vec![vec![]; rows] };
    let mut got: Vec<Row> = lrows
        .into_iter()
        .zip(rrows)
        .map(|(mut a, b)| {
            a.extend(b);
            a
        })
        .collect();
    got.sort();
    let want = expected_rows(&want_pairs, &c.lp, &c.rp, jt);
    if got != want {
        let k = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        return Err(fail(format!("{what}: materialized rows differ at sorted row {k}: {:?} vs {:?}{}", got.get(k), want.get(k), describe(&c.l, &c.r))));
    }
    let columns = table.columns().iter().map(|c| (raw_bits(c), validity(c))).collect();
    Ok(Snapshot { algorithm: out.algorithm, maps, columns })
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

fn key_column(codes: &[u32], eight: bool) -> HostColumn {
    if eight {
        // Spread over the high bits too (the sort and the partitioning see all 64 bits).
        HostColumn::from_values(codes.iter().map(|&k| (k as u64) << 24 | 0x5).collect())
    } else {
        HostColumn::from_values(codes.to_vec())
    }
}

fn payloads(rng: &mut StdRng, n: usize, count: usize, width: Option<usize>, salt: u64) -> Vec<PayloadBits> {
    (0..count)
        .map(|c| {
            let ty = match width {
                Some(4) => [PType::I32, PType::U32, PType::F32][rng.gen_range(0..3)],
                Some(_) => [PType::I64, PType::U64, PType::F64][rng.gen_range(0..3)],
                None => PTYPES[rng.gen_range(0..6)],
            };
            payload(ty, n, salt + c as u64)
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
struct Params {
    seed: u64,
    fk_fk: bool,
    ratio: f64,
    zipf: Option<f64>,
    eight_keys: bool,
    width: Option<usize>,
    left_cols: usize,
    right_cols: usize,
    r_rows: usize,
    s_per_r: usize,
}

fn params() -> impl Strategy<Value = Params> {
    (
        any::<u64>(),
        any::<bool>(),
        prop::sample::select(vec![1.0, 0.5, 0.25, 1.0 / 16.0]),
        prop::sample::select(vec![None, Some(0.0), Some(0.5), Some(1.0), Some(1.5), Some(2.0)]),
        any::<bool>(),
        prop::sample::select(vec![Some(4), Some(8), None]),
        1usize..=6,
        0usize..=6,
        (50usize..3000, 1usize..4),
    )
        .prop_map(|(seed, fk_fk, ratio, zipf, eight_keys, width, left_cols, right_cols, (r_rows, s_per_r))| Params {
            seed,
            fk_fk,
            ratio,
            zipf,
            eight_keys,
            width,
            left_cols,
            right_cols,
            r_rows,
            s_per_r,
        })
}

fn workload(p: &Params) -> Case {
    let mut rng = StdRng::seed_from_u64(p.seed);
    let s_rows = p.r_rows * p.s_per_r;
    let w = datagen::PkFkWorkload { r_rows: p.r_rows, s_rows, match_ratio: p.ratio, zipf: p.zipf, seed: p.seed };
    let (mut r, s) = w.generate().unwrap();
    if p.fk_fk {
        // Foreign keys on both sides: R's keys drawn with repetition from a smaller domain.
        let d = (p.r_rows / 3).max(1) as u64;
        r = uniform(&mut rng, p.r_rows, d).into_iter().map(|k| k as u32).collect();
    }
    let (l, rr) = (key_table(vec![key_column(&r, p.eight_keys)]), key_table(vec![key_column(&s, p.eight_keys)]));
    let lp = payloads(&mut rng, l.rows(), p.left_cols, p.width, 100);
    let rp = payloads(&mut rng, rr.rows(), p.right_cols, p.width, 200);
    Case { l, lp, r: rr, rp, opts: DEFAULT }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn every_algorithm_and_join_type_matches_reference_on_pk_fk_and_fk_fk() {
    let Some(s) = stream("every_algorithm_and_join_type_matches_reference_on_pk_fk_and_fk_fk") else { return };
    let _l = lock();
    run(cases(10, 2), 0xB4_0001, params(), |p| {
        let c = workload(&p);
        let what = format!("{p:?}");
        for algo in ALGOS {
            for jt in JoinType::ALL {
                check(&s, &c, jt, algo, false, &what)?;
            }
        }
        // The sides exchanged: the larger relation on the left.
        let swapped = Case { l: c.r, lp: c.rp, r: c.l, rp: c.lp, opts: c.opts };
        for algo in ALGOS {
            for jt in [JoinType::Inner, JoinType::Left, JoinType::Full, JoinType::RightAnti] {
                check(&s, &swapped, jt, algo, false, &format!("swapped {what}"))?;
            }
        }
        Ok(())
    });
}

#[test]
fn edge_shapes_match_reference() {
    let Some(s) = stream("edge_shapes_match_reference") else { return };
    let _l = lock();
    let mut rng = StdRng::seed_from_u64(3);
    let shapes: Vec<(&str, Vec<u32>, Vec<u32>)> = vec![
        ("empty left", vec![], (0..50).collect()),
        ("empty right", (0..50).collect(), vec![]),
        ("empty both", vec![], vec![]),
        ("one row left, match", vec![7], vec![7, 1, 7, 2]),
        ("one row left, no match", vec![9], vec![7, 1, 7, 2]),
        ("one row right", vec![4, 4, 5], vec![4]),
        ("one row both", vec![3], vec![3]),
        ("all one key", vec![7; 40], vec![7; 90]),
        ("no matches", (0..300).map(|k| 2 * k).collect(), (0..500).map(|k| 2 * k + 1).collect()),
        ("duplicate heavy", uniform(&mut rng, 200, 5).into_iter().map(|k| k as u32).collect(), uniform(&mut rng, 300, 5).into_iter().map(|k| k as u32).collect()),
    ];
    for (name, a, b) in shapes {
        for eight in [false, true] {
            let (l, r) = (key_table(vec![key_column(&a, eight)]), key_table(vec![key_column(&b, eight)]));
            let lp = payloads(&mut rng, l.rows(), 2, None, 1);
            let rp = payloads(&mut rng, r.rows(), 3, None, 2);
            let c = Case { l, lp, r, rp, opts: DEFAULT };
            for algo in ALGOS {
                for jt in JoinType::ALL {
                    check(&s, &c, jt, algo, false, &format!("{name}, 8-byte keys {eight}")).unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
    }
}

/// `datagen::composite_keys(keys, columns)` as a key table: `UInt32(k)`, `UInt64(k * golden
/// ratio)`, `Int32(!k)`, `Float64(k)`, the first `columns` of them.
fn composite(keys: &[u32], columns: usize) -> HostTable {
    let all = vec![
        HostColumn::from_values(keys.to_vec()),
        HostColumn::from_values(keys.iter().map(|&k| u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect()),
        HostColumn::from_values(keys.iter().map(|&k| !k as i32).collect()),
        HostColumn::from_values(keys.iter().map(|&k| f64::from(k)).collect()),
    ];
    key_table(all.into_iter().take(columns).collect())
}

#[test]
fn other_key_kinds_match_reference() {
    let Some(s) = stream("other_key_kinds_match_reference") else { return };
    let _l = lock();
    let mut rng = StdRng::seed_from_u64(5);
    let a: Vec<u32> = uniform(&mut rng, 700, 300).into_iter().map(|k| k as u32).collect();
    let b: Vec<u32> = uniform(&mut rng, 1500, 300).into_iter().map(|k| k as u32).collect();
    let nullable_opts = [DEFAULT, Opts { nulls: NullEquality::NullEqualsNull, nans: NanEquality::NanEqualsNan }];
    let single = |c: HostColumn| key_table(vec![c]);
    let mut cases: Vec<(String, HostTable, HostTable, Opts)> = vec![
        // Signed and float keys (derived keys of the sort-merge joins).
        ("i32".into(), single(HostColumn::from_values(a.iter().map(|&k| k as i32 - 150).collect())), single(HostColumn::from_values(b.iter().map(|&k| k as i32 - 150).collect())), DEFAULT),
        ("i64".into(), single(HostColumn::from_values(a.iter().map(|&k| (k as i64 - 150) << 33).collect())), single(HostColumn::from_values(b.iter().map(|&k| (k as i64 - 150) << 33).collect())), DEFAULT),
        ("f64".into(), single(HostColumn::from_values(a.iter().map(|&k| k as f64 * 0.5 - 7.0).collect())), single(HostColumn::from_values(b.iter().map(|&k| k as f64 * 0.5 - 7.0).collect())), DEFAULT),
        // Composite keys: two columns (96 bits) and three (128 bits), wider than the 64 bits the
        // clustered gathers compare: they join them as ranks.
        ("composite 2".into(), composite(&a, 2), composite(&b, 2), DEFAULT),
        ("composite 3".into(), composite(&a, 3), composite(&b, 3), DEFAULT),
    ];
    // Nullable keys under both null equalities.
    for o in nullable_opts {
        let vl: Vec<bool> = (0..a.len()).map(|_| rng.gen_bool(0.9)).collect();
        let vr: Vec<bool> = (0..b.len()).map(|_| rng.gen_bool(0.8)).collect();
        let l = single(HostColumn::from_values(a.clone()).with_validity(&vl).unwrap());
        let r = single(HostColumn::from_values(b.clone()).with_validity(&vr).unwrap());
        cases.push((format!("nullable {o:?}"), l, r, o));
    }
    for (name, l, r, opts) in &cases {
        let lp = payloads(&mut rng, l.rows(), 2, None, 10);
        let rp = payloads(&mut rng, r.rows(), 2, None, 20);
        let c = Case { l: l.clone(), lp, r: r.clone(), rp, opts: *opts };
        // The inputs an OM variant cannot compare as they are, which it joins as ranks (the
        // wide joins refused them): keys of more than 64 bits (both OM variants; the other
        // algorithms hash them), and nullable keys (both OM variants, under either null
        // equality).
        let nullable = l.columns().iter().chain(r.columns()).any(|c| c.validity_buffer().is_some());
        let bits: usize = l.columns().iter().map(|c| c.data_type().byte_width().unwrap().max(4) * 8).sum();
        for algo in ALGOS {
            let ranks = clustered(algo) && (bits > 64 || nullable);
            for jt in JoinType::ALL {
                check(&s, &c, jt, algo, ranks, name).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    // Keys wider than 64 bits with one-sided payloads: both OM variants join them as ranks.
    let (l, r) = (&cases[4].1, &cases[4].2);
    let (lk, rk) = (key_names(l), key_names(r));
    let want = reference(l, &lk, r, &rk, JoinType::Inner, DEFAULT.nulls, DEFAULT.nans).len() as u64;
    let mut lcols: Vec<(String, HostColumn)> = l.names().iter().cloned().zip(l.columns().iter().cloned()).collect();
    lcols.push(("p".into(), HostColumn::from_values(vec![1u32; l.rows()])));
    let (wl, wr) = (up(&s, &host_table(lcols)), up(&s, r));
    for algo in [SMJ_OM, PHJ_OM] {
        let out = DEFAULT.apply(Join::new(JoinType::Inner).on(&wl, &lk, &wr, &rk)).algorithm(algo).select(&["p"], &[]).run(&s).unwrap_or_else(|e| panic!("{}: {e}", algo.name()));
        assert_eq!(out.algorithm, algo, "{}", out.reason);
        assert!(out.reason.contains(RANKS) && out.reason.contains("more than 64"), "{}: {}", algo.name(), out.reason);
        assert_eq!(out.rows, want, "{}", algo.name());
        let p = raw_bits(out.table.to_host().unwrap().column("p").unwrap());
        assert!(p.len() as u64 == want && p.iter().all(|&x| x == 1), "{}: the left payload", algo.name());
    }
    // Auto never picks an OM variant for such keys, and what it picks serves them.
    let out = DEFAULT.apply(Join::new(JoinType::Inner).on(&wl, &lk, &wr, &rk)).select(&["p"], &[]).run(&s).unwrap();
    assert!(!clustered(out.algorithm), "{}: {}", out.algorithm.name(), out.reason);
    assert_eq!(out.rows, want, "{}: {}", out.algorithm.name(), out.reason);
}

/// Nothing selected: the maps of every algorithm that returns maps, against the reference. An
/// OM variant with nothing to gather runs itself (never another algorithm) and returns its rows
/// without maps (the wide joins' maps-only output ran its UM variant and returned its maps).
#[test]
fn maps_only_output_matches_reference() {
    let Some(s) = stream("maps_only_output_matches_reference") else { return };
    let _l = lock();
    let p = Params { seed: 9, fk_fk: true, ratio: 0.5, zipf: Some(1.0), eight_keys: false, width: None, left_cols: 2, right_cols: 2, r_rows: 2000, s_per_r: 2 };
    let c = workload(&p);
    let ((lt, _), (rt, _)) = (with_payloads(&c.l, &c.lp, "lp"), with_payloads(&c.r, &c.rp, "rp"));
    let (dl, dr) = (up(&s, &lt), up(&s, &rt));
    let (lk, rk) = (key_names(&c.l), key_names(&c.r));
    for algo in ALGOS {
        for jt in JoinType::ALL {
            poison_for(&s, 10_000);
            let out = DEFAULT.apply(Join::new(jt).on(&dl, &lk, &dr, &rk)).algorithm(algo).run(&s).unwrap();
            assert!(out.table.columns().is_empty(), "{algo:?} {jt:?}");
            if algo != Algorithm::Auto {
                assert_eq!(out.algorithm, algo, "{algo:?} {jt:?}: {}", out.reason);
            }
            let want = reference(&c.l, &lk, &c.r, &rk, jt, DEFAULT.nulls, DEFAULT.nans);
            assert_eq!(out.rows, want.len() as u64, "{algo:?} {jt:?}");
            match out.maps.as_ref() {
                Some(maps) => {
                    let got = canonical_pairs(maps, jt).unwrap();
                    assert!(got == want, "{algo:?} {jt:?}: {}", diff(&got, &want));
                }
                None => assert!(clustered(out.algorithm), "{algo:?} {jt:?}: {} ran without maps: {}", out.algorithm.name(), out.reason),
            }
        }
    }
}

#[test]
fn outputs_are_identical_across_runs() {
    let Some(s) = stream("outputs_are_identical_across_runs") else { return };
    let _l = lock();
    for (fk_fk, zipf) in [(false, Some(1.2)), (true, None)] {
        let p = Params { seed: 21, fk_fk, ratio: 0.75, zipf, eight_keys: false, width: None, left_cols: 3, right_cols: 2, r_rows: 2500, s_per_r: 3 };
        let c = workload(&p);
        for algo in ALGOS {
            for jt in JoinType::ALL {
                let a = check(&s, &c, jt, algo, false, "determinism").unwrap_or_else(|e| panic!("{e}"));
                let b = check(&s, &c, jt, algo, false, "determinism").unwrap_or_else(|e| panic!("{e}"));
                assert!(a == b, "{algo:?} {jt:?} FK-FK {fk_fk}: two runs differ in order or content");
            }
        }
    }
}

/// Peak memory of each algorithm on a PK-FK join (|S| = 2|R|, every S row matching once) with
/// keys `key(k)` and `cols` payloads per side `pay(k, c)` of the dense key code `k`: every output
/// row must pair equal values column by column, and each right column must hold the right
/// side's payloads (as a multiset of `bits_of` values: every S row once).
fn peaks<K: NativeValue, T: NativeValue>(s: &Stream, cols: usize, algos: &[Algorithm], key: fn(u32) -> K, pay: fn(u32, usize) -> T, bits_of: fn(T) -> u64) -> std::collections::HashMap<Algorithm, u64> {
    // Reduced: 2^18 and 2^19 rows, both sides still in several PHJ-OM transform chunks.
    let (nr, ns) = (rows(1 << 20, 1 << 18), rows(1 << 21, 1 << 19));
    let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 3).generate().unwrap();
    let names = |prefix: &str| -> Vec<String> { (0..cols).map(|c| format!("{prefix}{c}")).collect() };
    let (ln, rn) = (names("l"), names("r"));
    let upload = |codes: &[u32], names: &[String]| -> Table {
        let mut columns = vec![("k".to_string(), HostColumn::from_values(codes.iter().map(|&x| key(x)).collect::<Vec<K>>()))];
        columns.extend(names.iter().enumerate().map(|(c, n)| (n.clone(), HostColumn::from_values(codes.iter().map(|&x| pay(x, c)).collect::<Vec<T>>()))));
        up(s, &host_table(columns))
    };
    let (lt, rt) = (upload(&r, &ln), upload(&f, &rn));
    let (ls, rs): (Vec<&str>, Vec<&str>) = (ln.iter().map(String::as_str).collect(), rn.iter().map(String::as_str).collect());
    let label = format!("{cols} column(s) of {} bytes on {}-byte keys", std::mem::size_of::<T>(), std::mem::size_of::<K>());
    // The right side's payloads as sorted bits, column by column.
    let want: Vec<Vec<u64>> = (0..cols)
        .map(|c| {
            let mut v: Vec<u64> = f.iter().map(|&x| bits_of(pay(x, c))).collect();
            v.sort_unstable();
            v
        })
        .collect();
    let mut peak = std::collections::HashMap::new();
    for &algo in algos {
        s.synchronize().unwrap();
        let out = DEFAULT.apply(Join::new(JoinType::Inner).on(&lt, &["k"], &rt, &["k"])).algorithm(algo).select(&ls, &rs).with_stats().run(s).unwrap();
        assert_eq!(out.algorithm, algo, "{label}: {}", out.reason);
        assert_eq!(out.rows, ns as u64, "{algo:?} {label}");
        let t = out.table.to_host().unwrap();
        assert_eq!(t.columns().len(), 2 * cols, "{algo:?} {label}");
        for (c, want) in want.iter().enumerate() {
            let (lb, mut rb) = (raw_bits(t.column(&ln[c]).unwrap()), raw_bits(t.column(&rn[c]).unwrap()));
            assert!(lb == rb, "{algo:?} {label}: column {c}: rows pair unequal keys");
            rb.sort_unstable();
            assert!(rb == *want, "{algo:?} {label}: column {c}: the right values are not the right side's payloads");
        }
        let st = out.stats.expect("statistics asked for");
        println!("{algo:?} {label}: {st:?}");
        // The front door's SMJ-UM (the sort-merge join's maps, then the gathers) reports its sorts
        // and merge as one match phase, as the wide joins' general SMJ-UM did: no transform time.
        let transform = if algo == SMJ_UM { st.transform_ms >= 0.0 } else { st.transform_ms > 0.0 };
        assert!(transform && st.match_ms > 0.0 && st.materialize_ms >= 0.0, "{algo:?}: {st:?}");
        peak.insert(algo, st.peak_memory_bytes);
        drop(out);
    }
    peak
}
#[test]
fn om_peak_memory_is_at_most_um() {
    let Some(s) = stream("om_peak_memory_is_at_most_um") else { return };
    let _l = lock();
    let all = [SMJ_UM, SMJ_OM, PHJ_UM, PHJ_OM];
    let phj = [PHJ_UM, PHJ_OM];
    // The peaks compare at full size only (reduced sizes check the outputs, inside `peaks`).
    let full = !reduced();
    // The front door's PHJ-UM is the maps join, then the table gathers (not the wide join's
    // PHJ-UM with payloads): its peak can sit a few small allocations below PHJ-OM's at equal
    // big buffers (measured: 16 KiB of 140 MiB). At most 64 KiB over.
    // 8-byte keys spanning less than 2^32 are joined as 32-bit offsets (key compression): the
    // clustered path (the wide join) holds them through its materialization, the maps path
    // drops them before its gathers: 4 bytes a row of both sides more (measured at full size:
    // 4 x 3 x 2^20 + 16 KiB).
    const SLACK: u64 = 64 << 10;
    let compressed = 4 * (rows(1 << 20, 1 << 18) + rows(1 << 21, 1 << 19)) as u64;
    let check_with = |peak: &std::collections::HashMap<Algorithm, u64>, what: &str, allow: u64| {
        let (om, um) = (peak[&PHJ_OM], peak[&PHJ_UM]);
        assert!(om <= um + SLACK + allow || !full, "{what}: PHJ-OM peak {om} > PHJ-UM peak {um} + {}", SLACK + allow);
    };
    let check = |peak: &std::collections::HashMap<Algorithm, u64>, what: &str| check_with(peak, what, 0);
    let k32 = |k: u32| k;
    let k64 = |k: u32| (k as u64) * 3 + (1 << 40);
    let p32 = |k: u32, c: usize| k ^ (c as u32 * 0x5555_5555);
    let p64 = |k: u32, c: usize| ((k as u64) << 24 | 0xA5) ^ (c as u64 * 0x5555_5555_5555);
    let (b32, b64) = (|x: u32| x as u64, |x: u64| x);
    // The paper's Table 5 shape: a 4-byte key and one 4-byte payload per side.
    let peak = peaks::<u32, u32>(&s, 1, &all, k32, p32, b32);
    assert!(peak[&SMJ_OM] <= peak[&SMJ_UM] || !full, "narrow: SMJ-OM peak {} > SMJ-UM peak {}", peak[&SMJ_OM], peak[&SMJ_UM]);
    check(&peak, "narrow 4-byte");
    // Two 4-byte payload columns per side (the later ones transformed at materialization).
    // SMJ-OM's later sorts still need three columns of scratch: printed, not asserted.
    let wide4 = peaks::<u32, u32>(&s, 2, &all, k32, p32, b32);
    check(&wide4, "wide 4-byte");
    println!("wide 4-byte: SMJ-OM peak {} SMJ-UM peak {}", wide4[&SMJ_OM], wide4[&SMJ_UM]);
    // 8-byte payloads on 4- and 8-byte keys, one and two columns a side: PHJ-OM partitions the
    // keys alone and transforms every column at materialization. Per |R| row (|S| = 2|R|):
    // 4-byte keys, one column: OM 48 bytes (the probe side's gather: both maps, its transformed
    // column and its output) against UM's 48 plus CUB's scratch (its probe-side transform);
    // two columns: 80 against 80 (the last gathers: OM's build map and transformed column weigh
    // what UM's two maps do); 8-byte keys: 48 against 68, and 80 against 80.
    for cols in [1, 2] {
        check(&peaks::<u32, u64>(&s, cols, &phj, k32, p64, b64), &format!("{cols} 8-byte column(s), 4-byte keys"));
        check_with(&peaks::<u64, u64>(&s, cols, &phj, k64, p64, b64), &format!("{cols} 8-byte column(s), 8-byte keys"), compressed);
    }
}


/// PHJ-OM's later columns are partitioned in chunks: on a side of several chunks, with rows
/// that match nothing (NaN keys under `NanNeverEqual`), its output equals PHJ-UM's as a multiset
/// of rows. (The front door joins such float keys as ranks for PHJ-OM: the NaN rows get values
/// of their own side above every rank and match nothing.)
#[test]
fn phj_om_chunked_transform_matches_um() {
    let Some(s) = stream("phj_om_chunked_transform_matches_um") else { return };
    let _l = lock();
    let mut rng = StdRng::seed_from_u64(91);
    // Reduced: 2^17 rows, still two and three transform chunks of at least 2^16 rows.
    let (nl, nr) = (rows(1 << 18, 1 << 17), rows(1 << 18, 1 << 17) + 12345);
    let keys = |rng: &mut StdRng, n: usize| -> Vec<f32> { (0..n).map(|_| if rng.gen_ratio(1, 50) { f32::NAN } else { rng.gen_range(0..200_000u32) as f32 }).collect() };
    let (kl, kr) = (keys(&mut rng, nl), keys(&mut rng, nr));
    let pay = |rng: &mut StdRng, n: usize| -> Vec<u64> { (0..n).map(|_| rng.gen()).collect() };
    let mut lcols = vec![("k".to_string(), HostColumn::from_values(kl))];
    lcols.extend((0..3).map(|c| (format!("a{c}"), HostColumn::from_values(pay(&mut rng, nl)))));
    let mut rcols = vec![("k".to_string(), HostColumn::from_values(kr))];
    rcols.extend((0..2).map(|c| (format!("b{c}"), HostColumn::from_values(pay(&mut rng, nr).into_iter().map(|x| x as u32).collect::<Vec<_>>()))));
    let (left, right) = (up(&s, &host_table(lcols)), up(&s, &host_table(rcols)));
    let opts = Opts { nans: NanEquality::NanNeverEqual, ..DEFAULT };
    for jt in [JoinType::Inner, JoinType::Full, JoinType::LeftSemi] {
        let rows = |algo: Algorithm| -> Vec<Vec<Option<u64>>> {
            poison_for(&s, nl + nr);
            let rs: &[&str] = if jt.has_right_map() { &["b0", "b1"] } else { &[] };
            let out = opts.apply(Join::new(jt).on(&left, &["k"], &right, &["k"])).algorithm(algo).select(&["a0", "a1", "a2"], rs).run(&s).unwrap();
            assert_eq!(out.algorithm, algo, "{jt:?}: {}", out.reason);
            assert_eq!(out.reason.contains(RANKS), algo == PHJ_OM, "{jt:?}: {}", out.reason);
            let t = out.table.to_host().unwrap();
            let cols: Vec<(Vec<u64>, &HostColumn)> = t.columns().iter().map(|c| (raw_bits(c), c)).collect();
            let mut r: Vec<Vec<Option<u64>>> = (0..out.rows as usize).map(|k| cols.iter().map(|(v, c)| c.is_valid(k).then_some(v[k])).collect()).collect();
            r.sort();
            r
        };
        let (om, um) = (rows(PHJ_OM), rows(PHJ_UM));
        assert!(!um.is_empty(), "{jt:?}: the workload has output rows");
        assert!(om == um, "{jt:?}: PHJ-OM ({} rows) differs from PHJ-UM ({} rows)", om.len(), um.len());
    }
}

/// PHJ-OM takes the probe side's transformed columns as its output without gathering them
/// exactly when the pairs are the probe rows in their partitioned order (every probe row
/// matched once, nothing appended): foreign keys that all match, also with probe ranges split
/// over several work items. A probe row matching nothing, a probe row matching two build rows,
/// unmatched build rows of a left or full join, or partitions of several build chunks (forced
/// partition bits) keep the gather. Every output equals PHJ-UM's as a multiset of rows, and the
/// flag is the one the statistics report (`JoinStats::probe_rows_in_place`).
#[test]
fn phj_om_probe_rows_in_place_exactly_when_every_probe_row_matches_once() {
    let Some(s) = stream("phj_om_probe_rows_in_place_exactly_when_every_probe_row_matches_once") else { return };
    let _l = lock();
    let mut rng = StdRng::seed_from_u64(2611);
    let nb = rows(1 << 17, 1 << 15) + 77;
    let np = 3 * nb + 5;
    // Build keys 0..nb shuffled; the probe side names every build key at least once.
    let mut build: Vec<u32> = (0..nb as u32).collect();
    for i in (1..nb).rev() {
        build.swap(i, rng.gen_range(0..=i));
    }
    let probe_all: Vec<u32> = (0..np).map(|i| if i < nb { build[(i * 7919) % nb] } else { rng.gen_range(0..nb as u32) }).collect();
    let pay = |rng: &mut StdRng, n: usize| -> Vec<u64> { (0..n).map(|_| rng.gen()).collect() };
    let (bp, pp, pq) = (pay(&mut rng, nb), pay(&mut rng, np), pay(&mut rng, np));
    struct Shape {
        name: &'static str,
        build: Vec<u32>,
        probe: Vec<u32>,
        testing: gpujoin_join::TestingOptions,
        /// Whether the probe rows land in place for an inner join.
        inner_in_place: bool,
    }
    let t0 = gpujoin_join::TestingOptions::DEFAULT;
    let mut one_miss = probe_all.clone();
    one_miss[np / 2] = nb as u32 + 9;
    let mut dup_build = build.clone();
    dup_build[nb - 1] = dup_build[0];
    let shapes = [
        Shape { name: "every probe row matches once", build: build.clone(), probe: probe_all.clone(), testing: t0, inner_in_place: true },
        Shape { name: "split probe ranges", build: build.clone(), probe: probe_all.clone(), testing: gpujoin_join::TestingOptions { probe_split: 1000, ..t0 }, inner_in_place: true },
        Shape { name: "one probe row matches nothing", build: build.clone(), probe: one_miss, testing: t0, inner_in_place: false },
        Shape { name: "a build key twice", build: dup_build, probe: probe_all.clone(), testing: t0, inner_in_place: false },
        Shape { name: "several build chunks a partition", build: build.clone(), probe: probe_all.clone(), testing: gpujoin_join::TestingOptions { partition_bits: 2, ..t0 }, inner_in_place: false },
    ];
    for sh in &shapes {
        // The build side is the smaller, left one; the probe side has an 8-byte first column (the
        // match writes maps only) and a second one.
        let left = up(&s, &host_table(vec![("k".into(), HostColumn::from_values(sh.build.clone())), ("a".into(), HostColumn::from_values(bp.clone()))]));
        let right = up(
            &s,
            &host_table(vec![
                ("k".into(), HostColumn::from_values(sh.probe.clone())),
                ("b".into(), HostColumn::from_values(pp.clone())),
                ("c".into(), HostColumn::from_values(pq.iter().map(|&x| x as u32).collect::<Vec<_>>())),
            ]),
        );
        for jt in [JoinType::Inner, JoinType::Left, JoinType::Right, JoinType::Full] {
            let what = format!("{} {jt:?}", sh.name);
            let rows = |algo: Algorithm| -> (Vec<Vec<u64>>, bool) {
                poison_for(&s, nb + np);
                let out = Join::new(jt).on(&left, &["k"], &right, &["k"]).algorithm(algo).testing(sh.testing).select(&["a"], &["b", "c"]).with_stats().run(&s).unwrap();
                assert_eq!(out.algorithm, algo, "{what}: {}", out.reason);
                let t = out.table.to_host().unwrap();
                let cols: Vec<(Vec<u64>, &HostColumn)> = t.columns().iter().map(|c| (raw_bits(c), c)).collect();
                let mut r: Vec<Vec<u64>> = (0..out.rows as usize).map(|k| cols.iter().map(|(v, c)| if c.is_valid(k) { v[k] } else { u64::MAX }).collect()).collect();
                r.sort();
                (r, out.stats.expect("stats asked for").probe_rows_in_place)
            };
            let ((om, in_place), (um, _)) = (rows(PHJ_OM), rows(PHJ_UM));
            assert!(om == um, "{what}: PHJ-OM ({} rows) differs from PHJ-UM ({} rows)", om.len(), um.len());
            // The probe side names every build key, so no join type appends unmatched build rows
            // where the inner pairs are in place.
            assert_eq!(in_place, sh.inner_in_place, "{what}: probe rows in place");
        }
    }
}

/// The streaming sample (single key columns) gives the same match ratio and skew as the
/// general sample (a join of the sampled keys), for integer and float keys under both NaN rules:
/// `Join::auto_sample` (testing only) of the front door's Auto, on the keys as the front door
/// prepares them. Where Auto's decision tree samples (a selected column on each side, no ranks),
/// the ratio of its reason is that sample's.
#[test]
fn streaming_sample_matches_the_general_sample() {
    let Some(s) = stream("streaming_sample_matches_the_general_sample") else { return };
    let _l = lock();
    let mut rng = StdRng::seed_from_u64(5);
    // Reduced: a tenth of the rows and of the key domains (the same match ratio).
    let (nb, np) = (rows(300_000, 30_000), rows(1_000_003, 100_003));
    let (db, dp) = (rows(500_000, 50_000) as u32, rows(1_000_000, 100_000) as u32);
    let codes = |rng: &mut StdRng, n: usize, domain: u32| -> Vec<u32> { (0..n).map(|_| rng.gen_range(0..domain)).collect() };
    let (cb, cp) = (codes(&mut rng, nb, db), codes(&mut rng, np, dp));
    // The build side (the smaller) on the left, the probe side on the right; `sampled`: Auto's
    // decision tree samples these keys (no ranks: none of NaN never equal).
    let check = |b: HostColumn, p: HostColumn, nans: NanEquality, sampled: bool, what: &str| {
        let (bt, pt) = (up(&s, &host_table(vec![("k".into(), b)])), up(&s, &host_table(vec![("k".into(), p)])));
        let join = Join::new(JoinType::Inner).on(&bt, &["k"], &pt, &["k"]).null_equality(NullEquality::NullEqualsNothing).nan_equality(nans);
        let fast = join.auto_sample(&s, false).unwrap();
        let general = join.auto_sample(&s, true).unwrap();
        assert_eq!(fast, general, "{what}");
        assert!(fast.0 > 0.05 && fast.0 < 0.95, "{what}: a ratio strictly inside (0, 1): {}", fast.0);
        let out = join.select(&["k"], &["k"]).run(&s).unwrap();
        assert_eq!(out.reason.contains("match ratio"), sampled, "{what}: {}", out.reason);
        if sampled {
            let ratio = format!("match ratio {:.3}", fast.0);
            assert!(out.reason.contains(&ratio), "{what}: Auto's reason lacks {ratio}: {}", out.reason);
        }
    };
    check(HostColumn::from_values(cb.clone()), HostColumn::from_values(cp.clone()), NanEquality::NanEqualsNan, true, "u32");
    // Keys spanning far more than 2^32: kept as 8-byte keys.
    let wide_key = |c: &[u32]| -> Vec<i64> { c.iter().map(|&x| (x as i64 - db as i64 / 2) << 33).collect() };
    check(HostColumn::from_values(wide_key(&cb)), HostColumn::from_values(wide_key(&cp)), NanEquality::NanEqualsNan, true, "i64");
    // Floats: -0.0 on one side, 0.0 on the other; NaNs of different payloads on both.
    let float = |c: &[u32], neg_zero: bool| -> Vec<f64> {
        c.iter()
            .map(|&x| match x % 1000 {
                0 => if neg_zero { -0.0 } else { 0.0 },
                1 => f64::from_bits(0x7ff8_0000_0000_0000 | (x as u64 & 0xff)),
                _ => x as f64 * 0.5,
            })
            .collect()
    };
    for nan in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
        // NaN equal to nothing: the clustered gathers would join the keys as ranks, so Auto
        // takes PHJ-UM without sampling.
        check(HostColumn::from_values(float(&cb, true)), HostColumn::from_values(float(&cp, false)), nan, nan == NanEquality::NanEqualsNan, &format!("f64 {nan:?}"));
    }
    let f32s = |c: &[f64]| -> Vec<f32> { c.iter().map(|&x| x as f32).collect() };
    check(HostColumn::from_values(f32s(&float(&cb, false))), HostColumn::from_values(f32s(&float(&cp, true))), NanEquality::NanNeverEqual, false, "f32");
}

#[test]
fn auto_follows_the_decision_tree_on_sampled_workloads() {
    let Some(s) = stream("auto_follows_the_decision_tree_on_sampled_workloads") else { return };
    let _l = lock();
    // Reduced: the build side stays above NPHJ_MAX_BUILD_ROWS (2^20), where the tree picks PHJ.
    let nr = rows(1 << 21, (1 << 20) + (1 << 16));
    let ns = 2 * nr;
    let run_auto = |ratio: f64, zipf: Option<f64>, cols: usize| -> (Algorithm, String) {
        let (r, f) = datagen::PkFkWorkload { match_ratio: ratio, zipf, ..datagen::PkFkWorkload::uniform(nr, ns, 4) }.generate().unwrap();
        // Each side's keys, and `cols` payload columns a side holding them too.
        let names: Vec<String> = (0..cols).map(|c| format!("p{c}")).collect();
        let table = |k: &[u32]| {
            let mut columns = vec![("k".to_string(), HostColumn::from_values(k.to_vec()))];
            columns.extend(names.iter().map(|n| (n.clone(), HostColumn::from_values(k.to_vec()))));
            up(&s, &host_table(columns))
        };
        let (left, right) = (table(&r), table(&f));
        let sel: Vec<&str> = names.iter().map(String::as_str).collect();
        // The build keys are dense and unique (a permutation of 0..nr): Auto's question before
        // the tree (unique build keys: NPHJ) is switched off here (the tree is under test).
        let tree_only = TestingOptions { unique_build_table: UniqueBuildTable::Hash, ..TestingOptions::DEFAULT };
        let out = Join::new(JoinType::Inner).on(&left, &["k"], &right, &["k"]).algorithm(Algorithm::Auto).select(&sel, &sel).testing(tree_only).run(&s).unwrap();
        (out.algorithm, out.reason)
    };
    let (a, why) = run_auto(1.0, None, 1);
    assert_eq!(a, PHJ_OM, "{why}");
    let (a, why) = run_auto(1.0, None, 2);
    assert_eq!(a, PHJ_OM, "{why}");
    assert!(why.contains("match ratio 1.000"), "{why}");
    let (a, why) = run_auto(1.0 / 16.0, None, 2);
    assert_eq!(a, PHJ_UM, "{why}");
    let (a, why) = run_auto(1.0 / 16.0, Some(1.5), 2);
    assert_eq!(a, PHJ_OM, "{why}");
    assert!(why.contains("skewed"), "{why}");
}

/// Build keys `base..base + nb` shuffled, and `2 nb` probe keys: three quarters drawn from the
/// build keys, the rest just outside their span on either end.
fn dense_keys(rng: &mut StdRng, nb: usize, base: u64) -> (Vec<u64>, Vec<u64>) {
    use rand::seq::SliceRandom;
    let mut build: Vec<u64> = (base..base + nb as u64).collect();
    build.shuffle(rng);
    let probe = (0..2 * nb)
        .map(|_| match rng.gen_range(0..8) {
            0 => base - 1 - rng.gen_range(0..base.min(500)),
            1 => base + nb as u64 + rng.gen_range(0..1000),
            _ => build[rng.gen_range(0..nb)],
        })
        .collect();
    (build, probe)
}

/// Auto on unique build keys: dense ones on NPHJ's direct-address table, spread ones on its hash
/// table, each where it fits its share of the L2; the tree elsewhere, and after a repeated key.
#[test]
fn auto_joins_unique_build_keys_on_nphj_tables() {
    let Some(s) = stream("auto_joins_unique_build_keys_on_nphj_tables") else { return };
    let _l = lock();
    let mut rng = StdRng::seed_from_u64(0xD1_2EC7);
    // 2^18 build rows: the fewest for which the direct-address table is looked for.
    let nb = 1usize << 18;
    let (build, probe) = dense_keys(&mut rng, nb, 1000);
    let u32s = |v: &[u64]| HostColumn::from_values(v.iter().map(|&k| k as u32).collect::<Vec<u32>>());
    let direct = |snap: &Snapshot, what: &str| assert_eq!(snap.algorithm, Algorithm::Hash, "{what}: Auto ran {}", snap.algorithm.name());
    let hash_table = |out: &gpujoin_join::plan::JoinOutput, what: &str| {
        assert_eq!(out.algorithm, Algorithm::Hash, "{what}: {}", out.reason);
        assert!(out.reason.contains("NPHJ on its hash table"), "{what}: {}", out.reason);
    };
    // Maps only, one and two payload columns a side; every join type; either side building.
    for cols in [0usize, 1, 2] {
        let (l, r) = (key_table(vec![u32s(&build)]), key_table(vec![u32s(&probe)]));
        let (lp, rp) = (payloads(&mut rng, nb, cols, None, 10), payloads(&mut rng, 2 * nb, cols, None, 20));
        let c = Case { l, lp, r, rp, opts: DEFAULT };
        for jt in JoinType::ALL {
            let what = format!("dense u32, {cols} payloads a side");
            direct(&check(&s, &c, jt, Algorithm::Auto, false, &what).unwrap_or_else(|e| panic!("{e}")), &format!("{what} {jt:?}"));
        }
        let swapped = Case { l: c.r, lp: c.rp, r: c.l, rp: c.lp, opts: c.opts };
        for jt in [JoinType::Inner, JoinType::Left, JoinType::Full, JoinType::RightAnti, JoinType::LeftSemi] {
            let what = format!("dense u32 swapped, {cols} payloads a side");
            direct(&check(&s, &swapped, jt, Algorithm::Auto, false, &what).unwrap_or_else(|e| panic!("{e}")), &format!("{what} {jt:?}"));
        }
    }
    // Maps only through the front door: the reason names the table.
    let (dl, dr) = (up(&s, &key_table(vec![u32s(&build)])), up(&s, &key_table(vec![u32s(&probe)])));
    let out = Join::new(JoinType::Inner).on(&dl, &["k0"], &dr, &["k0"]).run(&s).unwrap();
    assert_eq!(out.algorithm, Algorithm::Hash, "{}", out.reason);
    assert!(out.reason.contains("dense unique build keys"), "{}", out.reason);
    // Where it does not apply the tree decides, and the output is still right.
    let not_direct = |what: &str, c: &Case, jts: &[JoinType]| {
        for &jt in jts {
            let snap = check(&s, c, jt, Algorithm::Auto, false, what).unwrap_or_else(|e| panic!("{e}"));
            assert_ne!(snap.algorithm, Algorithm::Hash, "{what} {jt:?}: Auto took NPHJ");
        }
    };
    let both = [JoinType::Inner, JoinType::Full];
    // A repeated build key (found by the insert).
    let mut repeated = build.clone();
    repeated[nb / 2] = repeated[7];
    not_direct("one repeated build key", &Case { l: key_table(vec![u32s(&repeated)]), lp: vec![], r: key_table(vec![u32s(&probe)]), rp: vec![], opts: DEFAULT }, &both);
    // Spread keys (a span of 64 slots a row, more than the direct-address table may take): the
    // hash table, every join type; with a repeated key the tree.
    let spread = |v: &[u64]| v.iter().map(|&k| k * 64).collect::<Vec<u64>>();
    let spread_case = Case { l: key_table(vec![u32s(&spread(&build))]), lp: payloads(&mut rng, nb, 1, None, 50), r: key_table(vec![u32s(&spread(&probe))]), rp: payloads(&mut rng, 2 * nb, 1, None, 60), opts: DEFAULT };
    for jt in JoinType::ALL {
        direct(&check(&s, &spread_case, jt, Algorithm::Auto, false, "spread u32").unwrap_or_else(|e| panic!("{e}")), &format!("spread u32 {jt:?}"));
    }
    let (sl, sr) = (up(&s, &key_table(vec![u32s(&spread(&build))])), up(&s, &key_table(vec![u32s(&spread(&probe))])));
    hash_table(&Join::new(JoinType::Inner).on(&sl, &["k0"], &sr, &["k0"]).run(&s).unwrap(), "spread u32 maps only");
    not_direct("spread build keys, one repeated", &Case { l: key_table(vec![u32s(&spread(&repeated))]), lp: vec![], r: key_table(vec![u32s(&spread(&probe))]), rp: vec![], opts: DEFAULT }, &both);
    // Spread unique keys whose hash table passes half of the L2 cache: the tree.
    if !reduced() {
        let l2 = s.device().l2_cache_bytes().unwrap() as usize;
        // 4-byte slots, at least 5/3 a row: past half the L2 from l2 / 8 * 3 / 5 rows.
        let big = l2 / 8 * 3 / 5 + 1;
        let (bb, bp) = dense_keys(&mut rng, big, 1);
        let (dl, dr) = (up(&s, &key_table(vec![u32s(&spread(&bb))])), up(&s, &key_table(vec![u32s(&spread(&bp))])));
        let out = Join::new(JoinType::Inner).on(&dl, &["k0"], &dr, &["k0"]).run(&s).unwrap();
        assert_ne!(out.algorithm, Algorithm::Hash, "a hash table larger than half of the {l2}-byte L2: {}", out.reason);
        let want = bp.iter().filter(|&&k| k >= 1 && k < 1 + big as u64).count() as u64;
        assert_eq!(out.rows, want, "{}", out.reason);
    }
    // Dense unique keys whose table passes three quarters of the L2 cache: build keys two
    // slots apart, so that the span (2 slots a row) still counts as dense for the join itself
    // (at most 8 slots a row), and a hash table larger than half of the L2.
    if !reduced() {
        let l2 = s.device().l2_cache_bytes().unwrap() as usize;
        let big = (l2 / 4 * 3 / 4 + 1).next_power_of_two() / 2;
        let (bb, bp) = dense_keys(&mut rng, big, 1);
        let sparse = |v: &[u64]| v.iter().map(|&k| k * 2).collect::<Vec<u64>>();
        let (dl, dr) = (up(&s, &key_table(vec![u32s(&sparse(&bb))])), up(&s, &key_table(vec![u32s(&sparse(&bp))])));
        let out = Join::new(JoinType::Inner).on(&dl, &["k0"], &dr, &["k0"]).run(&s).unwrap();
        assert_ne!(out.algorithm, Algorithm::Hash, "a table larger than 3/4 of the {l2}-byte L2: {}", out.reason);
        let want = bp.iter().filter(|&&k| k >= 1 && k < 1 + big as u64).count() as u64;
        assert_eq!(out.rows, want, "{}", out.reason);
    }
    // Four payload columns a side of both widths: the table too.
    let (lp, rp) = (payloads(&mut rng, nb, 4, None, 30), payloads(&mut rng, 2 * nb, 4, None, 40));
    let c = Case { l: key_table(vec![u32s(&build)]), lp, r: key_table(vec![u32s(&probe)]), rp, opts: DEFAULT };
    for jt in [JoinType::Inner, JoinType::Right] {
        direct(&check(&s, &c, jt, Algorithm::Auto, false, "four payload columns a side").unwrap_or_else(|e| panic!("{e}")), &format!("four payload columns a side {jt:?}"));
    }
    // 8-byte keys above 2^40: as 32-bit offsets (key compression), and as they are.
    let (b64, p64) = dense_keys(&mut rng, nb, 1 << 40);
    let (dl, dr) = (up(&s, &key_table(vec![HostColumn::from_values(b64.iter().map(|&k| k as i64).collect::<Vec<i64>>())])), up(&s, &key_table(vec![HostColumn::from_values(p64.iter().map(|&k| k as i64).collect::<Vec<i64>>())])));
    let (hl, hr) = (key_table(vec![HostColumn::from_values(b64.iter().map(|&k| k as i64).collect::<Vec<i64>>())]), key_table(vec![HostColumn::from_values(p64.iter().map(|&k| k as i64).collect::<Vec<i64>>())]));
    for (testing, what) in [(TestingOptions::DEFAULT, "i64 keys, compressed"), (TestingOptions { no_key_compression: true, ..TestingOptions::DEFAULT }, "i64 keys as they are")] {
        for jt in [JoinType::Inner, JoinType::Left, JoinType::RightAnti] {
            poison_for(&s, 3 * nb);
            let out = Join::new(jt).on(&dl, &["k0"], &dr, &["k0"]).testing(testing).run(&s).unwrap();
            assert_eq!(out.algorithm, Algorithm::Hash, "{what} {jt:?}: {}", out.reason);
            let want = reference(&hl, &["k0"], &hr, &["k0"], jt, DEFAULT.nulls, DEFAULT.nans);
            let got = canonical_pairs(out.maps.as_ref().unwrap(), jt).unwrap();
            assert!(got == want, "{what} {jt:?}: {}", diff(&got, &want));
        }
    }
    // The testing options: the hash table only (Auto does not ask, its tree decides), or the
    // direct-address table from any size.
    let hash_only = TestingOptions { unique_build_table: UniqueBuildTable::Hash, ..TestingOptions::DEFAULT };
    let out = Join::new(JoinType::Inner).on(&dl, &["k0"], &dr, &["k0"]).testing(hash_only).run(&s).unwrap();
    assert_ne!(out.algorithm, Algorithm::Hash, "{}", out.reason);
    let (small_b, small_p) = dense_keys(&mut rng, 5000, 10);
    let (sl, sr) = (up(&s, &key_table(vec![u32s(&small_b)])), up(&s, &key_table(vec![u32s(&small_p)])));
    let anywhere = TestingOptions { unique_build_table: UniqueBuildTable::DirectWhereDense, ..TestingOptions::DEFAULT };
    let out = Join::new(JoinType::Inner).on(&sl, &["k0"], &sr, &["k0"]).testing(anywhere).run(&s).unwrap();
    assert_eq!(out.algorithm, Algorithm::Hash, "{}", out.reason);
    assert!(out.reason.contains("dense unique build keys"), "{}", out.reason);
    // Below 2^18 build rows no direct-address table: the hash table.
    hash_table(&Join::new(JoinType::Inner).on(&sl, &["k0"], &sr, &["k0"]).run(&s).unwrap(), "below 2^18 build rows");
}

/// A fact table with `k` foreign keys joined with `k` dimension tables in sequence
/// (`F ⋈ D1 ⋈ ... ⋈ Dk`, inner joins on `fk_i = D_i.key`), each step a front-door join of the
/// previous step's output table with the next dimension table by one algorithm: the rows (fact
/// row, fact payload, each dimension's payload) equal a host chain of joins.
#[test]
fn join_sequences_match_a_host_chain() {
    let Some(s) = stream("join_sequences_match_a_host_chain") else { return };
    let _l = lock();
    let mut rng = StdRng::seed_from_u64(77);
    for k in [1usize, 2, 4] {
        let n_fact = 6000;
        // Dimension i: keys 0..d_i shuffled (some fact keys miss: d_i < the foreign key domain).
        let dims_keys: Vec<Vec<u32>> = (0..k).map(|i| datagen::shuffled_dense_keys(400 + 100 * i, i as u64).unwrap()).collect();
        let fks: Vec<Vec<u32>> = (0..k).map(|i| (0..n_fact).map(|_| rng.gen_range(0..(450 + 100 * i) as u32)).collect()).collect();
        let fact_pay: Vec<u64> = (0..n_fact as u64).map(|i| i * 7 + 3).collect();
        let dim_pay: Vec<Vec<i32>> = dims_keys.iter().enumerate().map(|(i, d)| (0..d.len() as i32).map(|j| j * 10 + i as i32).collect()).collect();
        // Host chain: every fact row whose foreign keys all match, with each dimension's row.
        let mut want: Vec<(u32, u64, Vec<i32>)> = Vec::new();
        for f in 0..n_fact {
            let mut row = Vec::new();
            for i in 0..k {
                match dims_keys[i].iter().position(|&x| x == fks[i][f]) {
                    Some(j) => row.push(dim_pay[i][j]),
                    None => break,
                }
            }
            if row.len() == k {
                want.push((f as u32, fact_pay[f], row));
            }
        }
        want.sort();
        // The fact table: its row ids (`fid`), its payload, its foreign keys.
        let mut fact_cols = vec![("fid".to_string(), HostColumn::from_values((0..n_fact as u32).collect())), ("fp".to_string(), HostColumn::from_values(fact_pay.clone()))];
        fact_cols.extend(fks.iter().enumerate().map(|(i, f)| (format!("fk{i}"), HostColumn::from_values(f.clone()))));
        let fact = up(&s, &host_table(fact_cols));
        let dims: Vec<Table> = (0..k).map(|i| up(&s, &host_table(vec![("dk".to_string(), HostColumn::from_values(dims_keys[i].clone())), (format!("d{i}"), HostColumn::from_values(dim_pay[i].clone()))]))).collect();
        for algo in ALGOS {
            poison_for(&s, 20_000);
            // Step i joins the output of step i - 1 (the fact table first) with dimension i on
            // foreign key i, keeping every column but that key, and dimension i's payload.
            let mut current: Option<Table> = None;
            let mut steps = Vec::new();
            for (i, dim) in dims.iter().enumerate() {
                let left = current.as_ref().unwrap_or(&fact);
                let fk = format!("fk{i}");
                let keep: Vec<&str> = left.names().iter().map(String::as_str).filter(|n| *n != fk).collect();
                let d = format!("d{i}");
                let out = DEFAULT
                    .apply(Join::new(JoinType::Inner).on(left, &[fk.as_str()], dim, &["dk"]))
                    .algorithm(algo)
                    .select(&keep, &[d.as_str()])
                    .run(&s)
                    .unwrap_or_else(|e| panic!("{algo:?} k = {k} step {i}: {e}"));
                assert!(out.algorithm != Algorithm::Auto && !out.reason.is_empty(), "{algo:?} k = {k} step {i}");
                if algo != Algorithm::Auto {
                    assert_eq!(out.algorithm, algo, "{algo:?} k = {k} step {i}: {}", out.reason);
                }
                steps.push((out.algorithm, out.rows));
                current = Some(out.table);
            }
            assert_eq!(steps.len(), k);
            let t = current.expect("k >= 1 steps").to_host().unwrap();
            assert_eq!(t.rows() as u64, want.len() as u64, "{algo:?} k = {k}");
            assert_eq!(steps[k - 1].1, want.len() as u64, "{algo:?} k = {k}");
            let ids = raw_bits(t.column("fid").unwrap());
            let fp = raw_bits(t.column("fp").unwrap());
            let dp: Vec<Vec<u64>> = (0..k).map(|i| raw_bits(t.column(&format!("d{i}")).unwrap())).collect();
            let mut got: Vec<(u32, u64, Vec<i32>)> = (0..ids.len()).map(|r| (ids[r] as u32, fp[r], dp.iter().map(|c| c[r] as u32 as i32).collect())).collect();
            got.sort();
            assert!(got == want, "{algo:?} k = {k}: the sequence's rows differ from the host chain");
        }
    }
    // Mismatched arguments are errors: one foreign key and no dimension key.
    let fk = up(&s, &host_table(vec![("fk".to_string(), HostColumn::from_values(vec![1u32, 2]))]));
    let r = Join::new(JoinType::Inner).on(&fk, &["fk"], &fk, &[]).algorithm(Algorithm::Auto).run(&s);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{:?}", r.err());
}

#[test]
fn mismatched_payload_lengths_are_errors() {
    let Some(s) = stream("mismatched_payload_lengths_are_errors") else { return };
    // A key column of 3 rows and a payload of 2: no table, on the host nor on the device.
    let (k, p) = (HostColumn::from_values(vec![1u32, 2, 3]), HostColumn::from_values(vec![1u32, 2]));
    let r = HostTable::new(vec![("k", k.clone()), ("p", p.clone())]);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{:?}", r.err());
    let r = Table::new(vec![("k", Column::upload(&s, &k).unwrap()), ("p", Column::upload(&s, &p).unwrap())]);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{:?}", r.err());
    // Keys of different types.
    let a = up(&s, &host_table(vec![("k".to_string(), k)]));
    let b = up(&s, &host_table(vec![("k".to_string(), HostColumn::from_values(vec![1u64, 2]))]));
    for algo in ALGOS {
        let r = Join::new(JoinType::Inner).on(&a, &["k"], &b, &["k"]).algorithm(algo).run(&s);
        assert!(matches!(r, Err(Error::TypeMismatch { .. })), "{algo:?}: different key types: {:?}", r.err());
    }
}

/// SMJ-OM's later columns of large sides are transformed by key ranges: on wide PK-FK joins
/// (|R| = 2^21, |S| = 2^22; two 4-byte or two 8-byte payload columns a side, and a skewed side
/// where a third of the rows share one key) its peak is at most SMJ-UM's and its output table
/// equals SMJ-UM's, column by column in the same row order (both follow the stable sorts of the
/// keys: by key, then left row, then right row).
#[test]
fn smj_om_wide_peak_is_at_most_um_and_output_equals_um() {
    let Some(s) = stream("smj_om_wide_peak_is_at_most_um_and_output_equals_um") else { return };
    let _l = lock();
    // Reduced: 2^18 and 2^19 rows, both sides at least SMJ-OM's 2^18 rows for key ranges; the
    // peaks compare at full size only.
    let (nr, ns) = (rows(1 << 21, 1 << 18), rows(1 << 22, 1 << 19));
    let mut rng = StdRng::seed_from_u64(2024);
    let (ru, su) = datagen::PkFkWorkload::uniform(nr, ns, 11).generate().unwrap();
    let skewed: Vec<u32> = su.iter().enumerate().map(|(i, &k)| if i % 3 == 0 { 12345 } else { k }).collect();
    // Payloads depend on the row, not the key: a row placed wrongly among equal keys shows.
    let row_payloads = |rng: &mut StdRng, n: usize, eight: bool| -> Vec<HostColumn> {
        (0..2).map(|_| if eight { HostColumn::from_values((0..n).map(|_| rng.gen::<u64>()).collect()) } else { HostColumn::from_values((0..n).map(|_| rng.gen::<u32>()).collect()) }).collect()
    };
    let table = |keys: &[u32], payloads: Vec<HostColumn>, prefix: &str| -> Table {
        let mut columns = vec![("k".to_string(), HostColumn::from_values(keys.to_vec()))];
        columns.extend(payloads.into_iter().enumerate().map(|(c, p)| (format!("{prefix}{c}"), p)));
        up(&s, &host_table(columns))
    };
    for (what, sk, eight) in [("uniform, 4-byte payloads", &su, false), ("uniform, 8-byte payloads", &su, true), ("skewed, 4-byte payloads", &skewed, false)] {
        let (pr, pf) = (row_payloads(&mut rng, nr, eight), row_payloads(&mut rng, ns, eight));
        let (left, right) = (table(&ru, pr, "l"), table(sk, pf, "r"));
        let mut result = vec![];
        for algo in [SMJ_UM, SMJ_OM] {
            s.synchronize().unwrap();
            let out = Join::new(JoinType::Inner).on(&left, &["k"], &right, &["k"]).algorithm(algo).select(&["l0", "l1"], &["r0", "r1"]).with_stats().run(&s).unwrap();
            assert_eq!((out.rows, out.algorithm), (ns as u64, algo), "{what}");
            let t = out.table.to_host().unwrap();
            let cols: Vec<Vec<u64>> = t.columns().iter().map(raw_bits).collect();
            let st = out.stats.expect("statistics asked for");
            println!("{what}: {algo:?} {st:?}");
            result.push((st.peak_memory_bytes, cols));
            drop(out);
        }
        let ((um_peak, um), (om_peak, om)) = (&result[0], &result[1]);
        assert_eq!(om.len(), 4, "{what}");
        for (c, (a, b)) in om.iter().zip(um).enumerate() {
            assert!(a == b, "{what}: SMJ-OM output column {c} differs from SMJ-UM's (first at row {:?})", a.iter().zip(b).position(|(x, y)| x != y));
        }
        assert!(om_peak <= um_peak || reduced(), "{what}: SMJ-OM peak {om_peak} > SMJ-UM peak {um_peak}");
    }
}

/// A caller's output budget (`Join::output_budget`, bytes of gather maps) holds for every wide
/// algorithm, the sort-merge ones included: 1000 rows of one key against 3 rows of it give 3000
/// pairs (24 000 bytes of two maps); a budget of 23 999 bytes is `OutputTooLarge` with the exact
/// rows and bytes, 24 000 bytes runs and returns the 3000 rows.
#[test]
fn output_budgets_hold_for_every_wide_algorithm() {
    let Some(s) = stream("output_budgets_hold_for_every_wide_algorithm") else { return };
    let _g = lock();
    let a = up(&s, &host_table(vec![("k".to_string(), HostColumn::from_values(vec![7u32; 1000])), ("lp".to_string(), HostColumn::from_values((0..1000u32).collect()))]));
    let b = up(&s, &host_table(vec![("k".to_string(), HostColumn::from_values(vec![7u32, 7, 7, 8])), ("rp".to_string(), HostColumn::from_values(vec![10u64, 11, 12, 13]))]));
    for algo in ALGOS {
        let join = |budget: u64| DEFAULT.apply(Join::new(JoinType::Inner).on(&a, &["k"], &b, &["k"])).algorithm(algo).select(&["lp"], &["rp"]).output_budget(budget);
        match join(23_999).run(&s) {
            Err(Error::OutputTooLarge { rows, bytes, available }) => assert_eq!((rows, bytes, available), (3000, 24_000, 23_999), "{algo:?}"),
            Err(e) => panic!("{algo:?}: {e}"),
            Ok(out) => panic!("{algo:?}: ran {:?} with {} rows over a 23 999-byte budget", out.algorithm, out.rows),
        }
        let out = join(24_000).run(&s).unwrap_or_else(|e| panic!("{algo:?}: {e}"));
        assert_eq!(out.rows, 3000, "{algo:?}");
        let t = out.table.to_host().unwrap();
        assert_eq!(t.names(), ["lp", "rp"], "{algo:?}: the selected columns");
        let mut right = raw_bits(t.column("rp").expect("materialized right side"));
        right.sort_unstable();
        assert!(right == [[10u64; 1000], [11; 1000], [12; 1000]].concat(), "{algo:?}: the right payloads");
    }
}
