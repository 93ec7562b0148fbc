//! Property tests of the wide joins (`gpujoin_join::wide`, issue 4): every algorithm (SMJ-UM,
//! SMJ-OM, PHJ-UM, PHJ-OM, NPHJ, Auto) and join type against the CPU reference, on PK-FK and
//! FK-FK workloads with match ratios 1 to 1/16, Zipf 0 to 2, 4- and 8-byte keys and payloads,
//! 1 to 6 payload columns, empty and one-row relations; maps-only output; determinism; peak
//! memory of OM against UM; join sequences against a host chain of joins.
//!
//! They run on the GPU when one is present, print `SKIPPED` when none is, and fail loudly with
//! GPUJOIN_REQUIRE_GPU=1. Seeds are fixed; the device pool is poisoned before each join.
//!
//! Materialized payloads compare with host gathers of the reference pairs as sorted multisets of
//! output rows (payload values of both sides, `None` on a null side); returned maps compare with
//! the reference pairs as sorted multisets.
//!
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer property cases and smaller large
//! tests, each still past the threshold it exists for (PHJ-OM's 2^16-row transform chunks,
//! SMJ-OM's 2^18-row key ranges, Auto's 2^20-row NPHJ limit); the peak-memory comparisons, which
//! hold for the sizes of a full run, are asserted only there (reduced runs check the outputs).

mod common;
use common::{canonical_pairs, diff, fail, stream, uniform};

use std::sync::{Mutex, MutexGuard};

use gpujoin_device::testing::{cases, reduced, rows};
use gpujoin_device::{DeviceBuffer, Error, Stream};
use gpujoin_join::wide::{self, join_sequence, Algorithm, WideJoinOptions, WideRelation};
use gpujoin_join::{DeviceColumn, DeviceKeys, HostColumn, HostKeys, JoinOptions, JoinType, Keys, Materialized, NanEquality, NullEquality, Payload, RowId};
use gpujoin_testkit::{datagen, reference};
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

const DEFAULT: JoinOptions = JoinOptions { null_equality: NullEquality::NullEqualsNothing, nan_equality: NanEquality::NanEqualsNan, ..JoinOptions::DEFAULT };

const ALGOS: [Algorithm; 6] = [Algorithm::SmjUm, Algorithm::SmjOm, Algorithm::PhjUm, Algorithm::PhjOm, Algorithm::Nphj, Algorithm::Auto];

// ---------------------------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------------------------

use common::payloads::*;

fn describe(l: &HostKeys, r: &HostKeys) -> String {
    if l.rows() + r.rows() <= 40 {
        format!("\nleft {l:?}\nright {r:?}")
    } else {
        format!(" ({} x {} rows)", l.rows(), r.rows())
    }
}

/// A test input: keys and payloads of both sides.
struct Case {
    l: HostKeys,
    lp: Vec<HostPayload>,
    r: HostKeys,
    rp: Vec<HostPayload>,
    opts: JoinOptions,
}

/// What one run returned, in output order (for determinism checks).
#[derive(PartialEq, Debug)]
struct Snapshot {
    algorithm: Algorithm,
    maps: Option<Vec<(RowId, RowId)>>,
    left: Vec<Vec<u64>>,
    right: Vec<Vec<u64>>,
}

fn columns_of(m: &Option<Materialized>) -> Vec<Vec<u64>> {
    m.as_ref().map_or(vec![], |m| m.columns.iter().map(|c| payload_bits(c).1).collect())
}

/// Runs `algo` and compares the output relation (and the maps, where returned) with the
/// reference. An explicit algorithm must report that it ran itself (no substitution).
/// `simple`: the keys take every algorithm's own fast path.
fn check(s: &Stream, c: &Case, jt: JoinType, algo: Algorithm, simple: bool, what: &str) -> Result<Snapshot, TestCaseError> {
    let what = format!("{algo:?} {jt:?} {what}");
    let want_pairs = reference::join(&c.l, &c.r, jt, c.opts).unwrap();
    let (dl, dr) = (DeviceKeys::upload(s, &c.l).unwrap(), DeviceKeys::upload(s, &c.r).unwrap());
    let (bl, br): (Vec<DevPayload>, Vec<DevPayload>) = (c.lp.iter().map(|p| upload(s, p)).collect(), c.rp.iter().map(|p| upload(s, p)).collect());
    let left = WideRelation::new(dl.keys(), bl.iter().map(dev_column).collect()).unwrap();
    let right = WideRelation::new(dr.keys(), br.iter().map(dev_column).collect()).unwrap();
    poison_for(s, c.l.rows() + c.r.rows());
    let opts = WideJoinOptions { keys: c.opts, ..WideJoinOptions::default() }.with_stats();
    let out = wide::join(s, &left, &right, jt, algo, opts).map_err(|e| fail(format!("{what}: error {e}{}", describe(&c.l, &c.r))))?;
    prop_assert_eq!(out.join_type, jt);
    prop_assert!(out.algorithm != Algorithm::Auto, "{}: ran Auto", what);
    prop_assert!(!out.reason.is_empty(), "{}: no reason", what);
    if algo != Algorithm::Auto {
        prop_assert_eq!(out.algorithm, algo, "{}: ran another algorithm (simple keys {}): {}", what, simple, out.reason);
    }
    prop_assert_eq!(out.rows, want_pairs.len() as u64, "{}: rows{}", what, describe(&c.l, &c.r));
    let st = out.stats;
    prop_assert!(st.transform_ms >= 0.0 && st.match_ms >= 0.0 && st.materialize_ms >= 0.0, "{}: {:?}", what, st);
    prop_assert!((st.total_ms - (st.transform_ms + st.match_ms + st.materialize_ms)).abs() < 1e-3, "{}: {:?}", what, st);
    prop_assert!(st.peak_memory_bytes > 0, "{}: {:?}", what, st);
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
            prop_assert!(matches!(out.algorithm, Algorithm::SmjOm | Algorithm::PhjOm), "{}: {:?} returns its maps", what, out.algorithm);
            None
        }
    };
    prop_assert_eq!(out.left.is_some(), jt.has_left_map(), "{}: left side present", what);
    prop_assert_eq!(out.right.is_some(), jt.has_right_map(), "{}: right side present", what);
    let lrows = match &out.left {
        Some(m) => side_rows(m, &c.lp, rows, jt.keeps_unmatched_right(), &format!("{what} left"))?,
        None => vec![vec![]; rows],
    };
    let rrows = match &out.right {
        Some(m) => side_rows(m, &c.rp, rows, jt.keeps_unmatched_left(), &format!("{what} right"))?,
        None => vec![vec![]; rows],
    };
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
    Ok(Snapshot { algorithm: out.algorithm, maps, left: columns_of(&out.left), right: columns_of(&out.right) })
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

fn key_column(codes: &[u32], eight: bool) -> HostColumn {
    if eight {
        // Spread over the high bits too (the sort and the partitioning see all 64 bits).
        HostColumn::U64(codes.iter().map(|&k| (k as u64) << 24 | 0x5).collect())
    } else {
        HostColumn::U32(codes.to_vec())
    }
}

fn payloads(rng: &mut StdRng, n: usize, count: usize, width: Option<usize>, salt: u64) -> Vec<HostPayload> {
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
    let (l, rr) = (HostKeys::single(key_column(&r, p.eight_keys)), HostKeys::single(key_column(&s, p.eight_keys)));
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
                check(&s, &c, jt, algo, true, &what)?;
            }
        }
        // The sides exchanged: the larger relation on the left.
        let swapped = Case { l: c.r, lp: c.rp, r: c.l, rp: c.lp, opts: c.opts };
        for algo in ALGOS {
            for jt in [JoinType::Inner, JoinType::Left, JoinType::Full, JoinType::RightAnti] {
                check(&s, &swapped, jt, algo, true, &format!("swapped {what}"))?;
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
            let (l, r) = (HostKeys::single(key_column(&a, eight)), HostKeys::single(key_column(&b, eight)));
            let lp = payloads(&mut rng, l.rows(), 2, None, 1);
            let rp = payloads(&mut rng, r.rows(), 3, None, 2);
            let c = Case { l, lp, r, rp, opts: DEFAULT };
            for algo in ALGOS {
                for jt in JoinType::ALL {
                    check(&s, &c, jt, algo, true, &format!("{name}, 8-byte keys {eight}")).unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
    }
}

#[test]
fn other_key_kinds_match_reference() {
    let Some(s) = stream("other_key_kinds_match_reference") else { return };
    let _l = lock();
    let mut rng = StdRng::seed_from_u64(5);
    let a: Vec<u32> = uniform(&mut rng, 700, 300).into_iter().map(|k| k as u32).collect();
    let b: Vec<u32> = uniform(&mut rng, 1500, 300).into_iter().map(|k| k as u32).collect();
    let nullable_opts = [DEFAULT, JoinOptions { null_equality: NullEquality::NullEqualsNull, nan_equality: NanEquality::NanEqualsNan, ..JoinOptions::DEFAULT }];
    let mut cases: Vec<(String, HostKeys, HostKeys, JoinOptions)> = vec![
        // Signed and float keys (derived keys of the sort-merge joins).
        ("i32".into(), HostKeys::single(HostColumn::I32(a.iter().map(|&k| k as i32 - 150).collect())), HostKeys::single(HostColumn::I32(b.iter().map(|&k| k as i32 - 150).collect())), DEFAULT),
        ("i64".into(), HostKeys::single(HostColumn::I64(a.iter().map(|&k| (k as i64 - 150) << 33).collect())), HostKeys::single(HostColumn::I64(b.iter().map(|&k| (k as i64 - 150) << 33).collect())), DEFAULT),
        ("f64".into(), HostKeys::single(HostColumn::F64(a.iter().map(|&k| k as f64 * 0.5 - 7.0).collect())), HostKeys::single(HostColumn::F64(b.iter().map(|&k| k as f64 * 0.5 - 7.0).collect())), DEFAULT),
        // Composite keys: two columns pack exactly; three are hashed (SMJ-OM and PHJ-OM refuse them).
        ("composite 2".into(), datagen::composite_keys(&a, 2).unwrap(), datagen::composite_keys(&b, 2).unwrap(), DEFAULT),
        ("composite 3".into(), datagen::composite_keys(&a, 3).unwrap(), datagen::composite_keys(&b, 3).unwrap(), DEFAULT),
    ];
    // Nullable keys under both null equalities.
    for o in nullable_opts {
        let mut l = HostKeys::single(HostColumn::U32(a.clone()));
        let mut r = HostKeys::single(HostColumn::U32(b.clone()));
        l.validity[0] = Some((0..a.len()).map(|_| rng.gen_bool(0.9)).collect());
        r.validity[0] = Some((0..b.len()).map(|_| rng.gen_bool(0.8)).collect());
        cases.push((format!("nullable {o:?}"), l, r, o));
    }
    for (name, l, r, opts) in &cases {
        let lp = payloads(&mut rng, l.rows(), 2, None, 10);
        let rp = payloads(&mut rng, r.rows(), 2, None, 20);
        let c = Case { l: l.clone(), lp, r: r.clone(), rp, opts: *opts };
        // The inputs an OM variant cannot serve: hashed keys (both), and for SMJ-OM keys that
        // match nothing (nulls under NullEqualsNothing; the nullable cases have nulls).
        // Hashed: the keys' bits (a null bit a nullable column when nulls equal) exceed 64.
        let nullable = l.validity.iter().chain(&r.validity).any(|v| v.is_some());
        let null_bits = if nullable && opts.null_equality == NullEquality::NullEqualsNull { l.columns.len() } else { 0 };
        let hashed = l.columns.iter().map(|c| c.key_type().width() * 8).sum::<usize>() + null_bits > 64;
        let never = name.starts_with("nullable") && opts.null_equality == NullEquality::NullEqualsNothing;
        for algo in ALGOS {
            let refused = match algo {
                Algorithm::SmjOm => hashed || never,
                Algorithm::PhjOm => hashed,
                _ => false,
            };
            for jt in JoinType::ALL {
                if refused {
                    check_refused(&s, &c, jt, algo, name);
                } else {
                    check(&s, &c, jt, algo, false, name).unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
    }
    // Hashed keys with one-sided payloads: still refused by both OM variants.
    let (l, r) = (&cases[4].1, &cases[4].2);
    let (dl, dr) = (DeviceKeys::upload(&s, l).unwrap(), DeviceKeys::upload(&s, r).unwrap());
    let p = s.copy_from_host(&vec![1u32; l.rows()]).unwrap();
    let wl = WideRelation::new(dl.keys(), vec![p.view().into()]).unwrap();
    let wr = WideRelation::new(dr.keys(), vec![]).unwrap();
    for (algo, name) in [(Algorithm::SmjOm, "SMJ-OM (clustered gathers)"), (Algorithm::PhjOm, "PHJ-OM (clustered gathers)")] {
        match wide::join(&s, &wl, &wr, JoinType::Inner, algo, WideJoinOptions::default()) {
            Err(Error::Unsupported { what, reason }) => {
                assert_eq!(what, name);
                assert!(reason.contains("hashed"), "{reason}");
            }
            Err(e) => panic!("{algo:?}: expected Error::Unsupported, got {e}"),
            Ok(out) => panic!("{algo:?}: expected Error::Unsupported, ran {:?}: {}", out.algorithm, out.reason),
        }
    }
    // Auto never picks an OM variant for hashed keys, and what it picks serves them.
    let out = wide::join(&s, &wl, &wr, JoinType::Inner, Algorithm::Auto, WideJoinOptions::default()).unwrap();
    assert!(!matches!(out.algorithm, Algorithm::SmjOm | Algorithm::PhjOm), "{:?}: {}", out.algorithm, out.reason);
}

/// `algo` cannot serve the keys of `c`: a typed refusal naming it, never another algorithm.
fn check_refused(s: &Stream, c: &Case, jt: JoinType, algo: Algorithm, what: &str) {
    let (dl, dr) = (DeviceKeys::upload(s, &c.l).unwrap(), DeviceKeys::upload(s, &c.r).unwrap());
    let (bl, br): (Vec<DevPayload>, Vec<DevPayload>) = (c.lp.iter().map(|p| upload(s, p)).collect(), c.rp.iter().map(|p| upload(s, p)).collect());
    let left = WideRelation::new(dl.keys(), bl.iter().map(dev_column).collect()).unwrap();
    let right = WideRelation::new(dr.keys(), br.iter().map(dev_column).collect()).unwrap();
    let opts = WideJoinOptions { keys: c.opts, ..WideJoinOptions::default() };
    match wide::join(s, &left, &right, jt, algo, opts) {
        Err(Error::Unsupported { what: w, reason }) => {
            assert_eq!(w, format!("{} (clustered gathers)", algo.name()), "{algo:?} {jt:?} {what}");
            assert!(!reason.is_empty(), "{algo:?} {jt:?} {what}");
        }
        Err(e) => panic!("{algo:?} {jt:?} {what}: expected Error::Unsupported, got {e}"),
        Ok(out) => panic!("{algo:?} {jt:?} {what}: expected Error::Unsupported, ran {:?}: {}", out.algorithm, out.reason),
    }
}

#[test]
fn maps_only_output_matches_reference() {
    let Some(s) = stream("maps_only_output_matches_reference") else { return };
    let _l = lock();
    let p = Params { seed: 9, fk_fk: true, ratio: 0.5, zipf: Some(1.0), eight_keys: false, width: None, left_cols: 2, right_cols: 2, r_rows: 2000, s_per_r: 2 };
    let c = workload(&p);
    let (dl, dr) = (DeviceKeys::upload(&s, &c.l).unwrap(), DeviceKeys::upload(&s, &c.r).unwrap());
    let (bl, br): (Vec<DevPayload>, Vec<DevPayload>) = (c.lp.iter().map(|x| upload(&s, x)).collect(), c.rp.iter().map(|x| upload(&s, x)).collect());
    let left = WideRelation::new(dl.keys(), bl.iter().map(dev_column).collect()).unwrap();
    let right = WideRelation::new(dr.keys(), br.iter().map(dev_column).collect()).unwrap();
    for algo in ALGOS {
        for jt in JoinType::ALL {
            poison_for(&s, 10_000);
            let out = wide::join(&s, &left, &right, jt, algo, WideJoinOptions::maps_only()).unwrap();
            assert!(out.left.is_none() && out.right.is_none(), "{algo:?} {jt:?}");
            // Maps only: an OM variant's maps are its UM variant's, which runs and says so.
            let ran = match algo {
                Algorithm::SmjOm => Algorithm::SmjUm,
                Algorithm::PhjOm => Algorithm::PhjUm,
                a => a,
            };
            if algo != Algorithm::Auto {
                assert_eq!(out.algorithm, ran, "{algo:?} {jt:?}: {}", out.reason);
            }
            let maps = out.maps.as_ref().unwrap_or_else(|| panic!("{algo:?} {jt:?}: maps only without maps"));
            let want = reference::join(&c.l, &c.r, jt, DEFAULT).unwrap();
            let got = canonical_pairs(maps, jt).unwrap();
            assert!(got == want, "{algo:?} {jt:?}: {}", diff(&got, &want));
            assert_eq!(out.rows, want.len() as u64);
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
                let a = check(&s, &c, jt, algo, true, "determinism").unwrap_or_else(|e| panic!("{e}"));
                let b = check(&s, &c, jt, algo, true, "determinism").unwrap_or_else(|e| panic!("{e}"));
                assert!(a == b, "{algo:?} {jt:?} FK-FK {fk_fk}: two runs differ in order or content");
            }
        }
    }
}

/// Peak memory of each algorithm on a PK-FK join (|S| = 2|R|, every S row matching once) with
/// keys `key(k)` and `cols` payloads per side `pay(k, c)` of the dense key code `k`: every output
/// row must pair equal values column by column, and each right column must hold the right
/// side's payloads (as a multiset of `bits_of` values: every S row once).
fn peaks<K: gpujoin_device::Pod + Copy, T: gpujoin_device::Pod + Copy>(s: &Stream, cols: usize, algos: &[Algorithm], key: fn(u32) -> K, pay: fn(u32, usize) -> T, bits_of: fn(T) -> u64) -> std::collections::HashMap<Algorithm, u64>
where
    for<'a> DeviceColumn<'a>: From<gpujoin_device::DeviceView<'a, K>> + From<gpujoin_device::DeviceView<'a, T>>,
{
    // Reduced: 2^18 and 2^19 rows, both sides still in several PHJ-OM transform chunks.
    let (nr, ns) = (rows(1 << 20, 1 << 18), rows(1 << 21, 1 << 19));
    let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 3).generate().unwrap();
    let upload = |codes: &[u32]| -> (DeviceBuffer<K>, Vec<DeviceBuffer<T>>) {
        let p = (0..cols).map(|c| s.copy_from_host(&codes.iter().map(|&x| pay(x, c)).collect::<Vec<T>>()).unwrap()).collect();
        (s.copy_from_host(&codes.iter().map(|&x| key(x)).collect::<Vec<K>>()).unwrap(), p)
    };
    let ((dr, pr), (df, pf)) = (upload(&r), upload(&f));
    let left = WideRelation::new(Keys::single(dr.view()), pr.iter().map(|b| b.view().into()).collect()).unwrap();
    let right = WideRelation::new(Keys::single(df.view()), pf.iter().map(|b| b.view().into()).collect()).unwrap();
    let label = format!("{cols} column(s) of {} bytes on {}-byte keys", std::mem::size_of::<T>(), std::mem::size_of::<K>());
    // The right side's payloads as sorted bits, column by column.
    let want: Vec<Vec<u64>> = (0..cols)
        .map(|c| {
            let mut v: Vec<u64> = f.iter().map(|&x| bits_of(pay(x, c))).collect();
            v.sort_unstable();
            v
        })
        .collect();
    let col_bits = |p: &Payload| payload_bits(p).1;
    let mut peak = std::collections::HashMap::new();
    for &algo in algos {
        s.synchronize().unwrap();
        let out = wide::join(s, &left, &right, JoinType::Inner, algo, WideJoinOptions::default().with_stats()).unwrap();
        assert_eq!(out.rows, ns as u64, "{algo:?} {label}");
        let (l, rr) = (out.left.as_ref().unwrap(), out.right.as_ref().unwrap());
        assert_eq!((l.columns.len(), rr.columns.len()), (cols, cols), "{algo:?} {label}");
        for (c, want) in want.iter().enumerate() {
            let (lb, mut rb) = (col_bits(&l.columns[c]), col_bits(&rr.columns[c]));
            assert!(lb == rb, "{algo:?} {label}: column {c}: rows pair unequal keys");
            rb.sort_unstable();
            assert!(rb == *want, "{algo:?} {label}: column {c}: the right values are not the right side's payloads");
        }
        println!("{algo:?} {label}: {:?}", out.stats);
        assert!(out.stats.transform_ms > 0.0 && out.stats.match_ms > 0.0 && out.stats.materialize_ms >= 0.0, "{algo:?}: {:?}", out.stats);
        peak.insert(algo, out.stats.peak_memory_bytes);
        drop(out);
    }
    peak
}

#[test]
fn om_peak_memory_is_at_most_um() {
    let Some(s) = stream("om_peak_memory_is_at_most_um") else { return };
    let _l = lock();
    let all = [Algorithm::SmjUm, Algorithm::SmjOm, Algorithm::PhjUm, Algorithm::PhjOm];
    let phj = [Algorithm::PhjUm, Algorithm::PhjOm];
    // The peaks compare at full size only (reduced sizes check the outputs, inside `peaks`).
    let full = !reduced();
    let check = |peak: &std::collections::HashMap<Algorithm, u64>, what: &str| {
        let (om, um) = (peak[&Algorithm::PhjOm], peak[&Algorithm::PhjUm]);
        assert!(om <= um || !full, "{what}: PHJ-OM peak {om} > PHJ-UM peak {um}");
    };
    let k32 = |k: u32| k;
    let k64 = |k: u32| (k as u64) * 3 + (1 << 40);
    let p32 = |k: u32, c: usize| k ^ (c as u32 * 0x5555_5555);
    let p64 = |k: u32, c: usize| ((k as u64) << 24 | 0xA5) ^ (c as u64 * 0x5555_5555_5555);
    let (b32, b64) = (|x: u32| x as u64, |x: u64| x);
    // The paper's Table 5 shape: a 4-byte key and one 4-byte payload per side.
    let peak = peaks::<u32, u32>(&s, 1, &all, k32, p32, b32);
    assert!(peak[&Algorithm::SmjOm] <= peak[&Algorithm::SmjUm] || !full, "narrow: SMJ-OM peak {} > SMJ-UM peak {}", peak[&Algorithm::SmjOm], peak[&Algorithm::SmjUm]);
    check(&peak, "narrow 4-byte");
    // Two 4-byte payload columns per side (the later ones transformed at materialization).
    // SMJ-OM's later sorts still need three columns of scratch: printed, not asserted.
    let wide4 = peaks::<u32, u32>(&s, 2, &all, k32, p32, b32);
    check(&wide4, "wide 4-byte");
    println!("wide 4-byte: SMJ-OM peak {} SMJ-UM peak {}", wide4[&Algorithm::SmjOm], wide4[&Algorithm::SmjUm]);
    // 8-byte payloads on 4- and 8-byte keys, one and two columns a side: PHJ-OM partitions the
    // keys alone and transforms every column at materialization. Per |R| row (|S| = 2|R|):
    // 4-byte keys, one column: OM 48 bytes (the probe side's gather: both maps, its transformed
    // column and its output) against UM's 48 plus CUB's scratch (its probe-side transform);
    // two columns: 80 against 80 (the last gathers: OM's build map and transformed column weigh
    // what UM's two maps do); 8-byte keys: 48 against 68, and 80 against 80.
    for cols in [1, 2] {
        check(&peaks::<u32, u64>(&s, cols, &phj, k32, p64, b64), &format!("{cols} 8-byte column(s), 4-byte keys"));
        check(&peaks::<u64, u64>(&s, cols, &phj, k64, p64, b64), &format!("{cols} 8-byte column(s), 8-byte keys"));
    }
}

/// PHJ-OM's later columns are partitioned in chunks: on a side of several chunks, with rows
/// that match nothing (NaN keys) set aside, its output equals PHJ-UM's as a multiset of rows.
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
    let (dl, dr) = (s.copy_from_host(&kl).unwrap(), s.copy_from_host(&kr).unwrap());
    let lp: Vec<DeviceBuffer<u64>> = (0..3).map(|_| s.copy_from_host(&pay(&mut rng, nl)).unwrap()).collect();
    let rp: Vec<DeviceBuffer<u32>> = (0..2).map(|_| s.copy_from_host(&pay(&mut rng, nr).into_iter().map(|x| x as u32).collect::<Vec<_>>()).unwrap()).collect();
    let left = WideRelation::new(Keys::single(dl.view()), lp.iter().map(|b| b.view().into()).collect()).unwrap();
    let right = WideRelation::new(Keys::single(dr.view()), rp.iter().map(|b| b.view().into()).collect()).unwrap();
    let opts = WideJoinOptions { keys: JoinOptions { nan_equality: NanEquality::NanNeverEqual, ..DEFAULT }, ..WideJoinOptions::default() };
    for jt in [JoinType::Inner, JoinType::Full, JoinType::LeftSemi] {
        let rows = |algo: Algorithm| -> Vec<Vec<Option<u64>>> {
            poison_for(&s, nl + nr);
            let out = wide::join(&s, &left, &right, jt, algo, opts).unwrap();
            let mut cols: Vec<(Vec<u64>, Option<Vec<bool>>)> = vec![];
            for m in [&out.left, &out.right].into_iter().flatten() {
                let valid = m.validity.as_ref().map(|v| {
                    let w = v.to_vec().unwrap();
                    (0..out.rows as usize).map(|k| w[k / 32] >> (k % 32) & 1 == 1).collect::<Vec<bool>>()
                });
                for c in &m.columns {
                    cols.push((payload_bits(c).1, valid.clone()));
                }
            }
            let mut r: Vec<Vec<Option<u64>>> = (0..out.rows as usize).map(|k| cols.iter().map(|(c, v)| v.as_ref().is_none_or(|v| v[k]).then_some(c[k])).collect()).collect();
            r.sort();
            r
        };
        let (om, um) = (rows(Algorithm::PhjOm), rows(Algorithm::PhjUm));
        assert!(!um.is_empty(), "{jt:?}: the workload has output rows");
        assert!(om == um, "{jt:?}: PHJ-OM ({} rows) differs from PHJ-UM ({} rows)", om.len(), um.len());
    }
}

/// The streaming sample (single key columns) gives the same match ratio and skew as the
/// general sample (a join of the sampled keys), for integer and float keys under both NaN rules.
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
    let check = |b: &Keys, p: &Keys, opts: JoinOptions, what: &str| {
        let fast = wide::sample_for_tests(&s, b, p, opts, false).unwrap();
        let general = wide::sample_for_tests(&s, b, p, opts, true).unwrap();
        assert_eq!(fast, general, "{what}");
        assert!(fast.0 > 0.05 && fast.0 < 0.95, "{what}: a ratio strictly inside (0, 1): {}", fast.0);
    };
    let (b32, p32) = (s.copy_from_host(&cb).unwrap(), s.copy_from_host(&cp).unwrap());
    check(&Keys::single(b32.view()), &Keys::single(p32.view()), DEFAULT, "u32");
    let wide_key = |c: &[u32]| -> Vec<i64> { c.iter().map(|&x| (x as i64 - db as i64 / 2) << 33).collect() };
    let (b64, p64) = (s.copy_from_host(&wide_key(&cb)).unwrap(), s.copy_from_host(&wide_key(&cp)).unwrap());
    check(&Keys::single(b64.view()), &Keys::single(p64.view()), DEFAULT, "i64");
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
    let (bf, pf) = (s.copy_from_host(&float(&cb, true)).unwrap(), s.copy_from_host(&float(&cp, false)).unwrap());
    for nan in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
        check(&Keys::single(bf.view()), &Keys::single(pf.view()), JoinOptions { nan_equality: nan, ..DEFAULT }, &format!("f64 {nan:?}"));
    }
    let f32s = |c: &[f64]| -> Vec<f32> { c.iter().map(|&x| x as f32).collect() };
    let (bf32, pf32) = (s.copy_from_host(&f32s(&float(&cb, false))).unwrap(), s.copy_from_host(&f32s(&float(&cp, true))).unwrap());
    check(&Keys::single(bf32.view()), &Keys::single(pf32.view()), JoinOptions { nan_equality: NanEquality::NanNeverEqual, ..DEFAULT }, "f32");
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
        let (dr, df) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
        let left = WideRelation::new(Keys::single(dr.view()), vec![dr.view().into(); cols]).unwrap();
        let right = WideRelation::new(Keys::single(df.view()), vec![df.view().into(); cols]).unwrap();
        let out = wide::join(&s, &left, &right, JoinType::Inner, Algorithm::Auto, WideJoinOptions::default()).unwrap();
        (out.algorithm, out.reason)
    };
    let (a, why) = run_auto(1.0, None, 1);
    assert_eq!(a, Algorithm::PhjOm, "{why}");
    let (a, why) = run_auto(1.0, None, 2);
    assert_eq!(a, Algorithm::PhjOm, "{why}");
    assert!(why.contains("match ratio 1.000"), "{why}");
    let (a, why) = run_auto(1.0 / 16.0, None, 2);
    assert_eq!(a, Algorithm::PhjUm, "{why}");
    let (a, why) = run_auto(1.0 / 16.0, Some(1.5), 2);
    assert_eq!(a, Algorithm::PhjOm, "{why}");
    assert!(why.contains("skewed"), "{why}");
}

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
        let dfk: Vec<DeviceBuffer<u32>> = fks.iter().map(|f| s.copy_from_host(f).unwrap()).collect();
        let dfp = s.copy_from_host(&fact_pay).unwrap();
        let ddk: Vec<DeviceBuffer<u32>> = dims_keys.iter().map(|d| s.copy_from_host(d).unwrap()).collect();
        let ddp: Vec<DeviceBuffer<i32>> = dim_pay.iter().map(|d| s.copy_from_host(d).unwrap()).collect();
        let dims: Vec<WideRelation> = ddk.iter().zip(&ddp).map(|(kk, p)| WideRelation::new(Keys::single(kk.view()), vec![p.view().into()]).unwrap()).collect();
        let fk_cols: Vec<DeviceColumn> = dfk.iter().map(|b| b.view().into()).collect();
        for algo in ALGOS {
            poison_for(&s, 20_000);
            let out = join_sequence(&s, &fk_cols, &[dfp.view().into()], &dims, algo, DEFAULT).unwrap();
            assert_eq!(out.steps.len(), k);
            assert_eq!(out.rows, want.len() as u64, "{algo:?} k = {k}");
            let ids = out.fact_rows.to_vec().unwrap();
            let fp = payload_bits(&out.fact_payloads[0]).1;
            let dp: Vec<Vec<u64>> = out.dim_payloads.iter().map(|d| {
                assert_eq!(d.len(), 1);
                payload_bits(&d[0]).1
            }).collect();
            let mut got: Vec<(u32, u64, Vec<i32>)> = (0..ids.len()).map(|r| (ids[r], fp[r], dp.iter().map(|c| c[r] as u32 as i32).collect())).collect();
            got.sort();
            assert!(got == want, "{algo:?} k = {k}: the sequence's rows differ from the host chain");
            for st in &out.steps {
                assert!(st.algorithm != Algorithm::Auto && !st.reason.is_empty());
            }
        }
    }
    // Mismatched arguments are errors.
    let fk = s.copy_from_host(&[1u32, 2]).unwrap();
    assert!(join_sequence(&s, &[fk.view().into()], &[], &[], Algorithm::Auto, DEFAULT).is_err());
}

#[test]
fn mismatched_payload_lengths_are_errors() {
    let Some(s) = stream("mismatched_payload_lengths_are_errors") else { return };
    let k = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    let p = s.copy_from_host(&[1u32, 2]).unwrap();
    assert!(WideRelation::new(Keys::single(k.view()), vec![p.view().into()]).is_err());
    let k64 = s.copy_from_host(&[1u64, 2]).unwrap();
    let a = WideRelation::new(Keys::single(k.view()), vec![]).unwrap();
    let b = WideRelation::new(Keys::single(k64.view()), vec![]).unwrap();
    for algo in ALGOS {
        assert!(wide::join(&s, &a, &b, JoinType::Inner, algo, WideJoinOptions::default()).is_err(), "{algo:?}: different key types");
    }
}

/// SMJ-OM's later columns of large sides are transformed by key ranges: on wide PK-FK joins
/// (|R| = 2^21, |S| = 2^22; two 4-byte or two 8-byte payload columns a side, and a skewed side
/// where a third of the rows share one key) its peak is at most SMJ-UM's and its output
/// relation equals SMJ-UM's, column by column in the same row order (both follow the stable
/// sorts of the keys).
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
    let row_payloads = |rng: &mut StdRng, n: usize, eight: bool| -> Vec<HostPayload> {
        (0..2).map(|_| if eight { HostPayload::U64((0..n).map(|_| rng.gen()).collect()) } else { HostPayload::U32((0..n).map(|_| rng.gen()).collect()) }).collect()
    };
    enum HostPayload {
        U32(Vec<u32>),
        U64(Vec<u64>),
    }
    enum Dev {
        U32(DeviceBuffer<u32>),
        U64(DeviceBuffer<u64>),
    }
    impl Dev {
        fn column(&self) -> DeviceColumn<'_> {
            match self {
                Dev::U32(b) => b.view().into(),
                Dev::U64(b) => b.view().into(),
            }
        }
    }
    let upload = |p: &HostPayload| match p {
        HostPayload::U32(v) => Dev::U32(s.copy_from_host(v).unwrap()),
        HostPayload::U64(v) => Dev::U64(s.copy_from_host(v).unwrap()),
    };
    for (what, sk, eight) in [("uniform, 4-byte payloads", &su, false), ("uniform, 8-byte payloads", &su, true), ("skewed, 4-byte payloads", &skewed, false)] {
        let (dr, df) = (s.copy_from_host(&ru).unwrap(), s.copy_from_host(sk).unwrap());
        let (pr, pf): (Vec<Dev>, Vec<Dev>) = (row_payloads(&mut rng, nr, eight).iter().map(upload).collect(), row_payloads(&mut rng, ns, eight).iter().map(upload).collect());
        let left = WideRelation::new(Keys::single(dr.view()), pr.iter().map(|d| d.column()).collect()).unwrap();
        let right = WideRelation::new(Keys::single(df.view()), pf.iter().map(|d| d.column()).collect()).unwrap();
        let mut result = vec![];
        for algo in [Algorithm::SmjUm, Algorithm::SmjOm] {
            s.synchronize().unwrap();
            let out = wide::join(&s, &left, &right, JoinType::Inner, algo, WideJoinOptions::default().with_stats()).unwrap();
            assert_eq!((out.rows, out.algorithm), (ns as u64, algo), "{what}");
            let cols: Vec<Vec<u64>> = [&out.left, &out.right].into_iter().flat_map(|m| m.as_ref().unwrap().columns.iter().map(|c| payload_bits(c).1)).collect();
            println!("{what}: {algo:?} {:?}", out.stats);
            result.push((out.stats.peak_memory_bytes, cols));
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

/// A caller's output budget (`JoinOptions::output_budget`, bytes of gather maps) holds for every
/// wide algorithm, the sort-merge ones included: 1000 rows of one key against 3 rows of it give
/// 3000 pairs (24 000 bytes of two maps); a budget of 23 999 bytes is `OutputTooLarge` with the
/// exact rows and bytes, 24 000 bytes runs and returns the 3000 rows.
#[test]
fn output_budgets_hold_for_every_wide_algorithm() {
    let Some(s) = stream("output_budgets_hold_for_every_wide_algorithm") else { return };
    let _g = lock();
    let lk = s.copy_from_host(&vec![7u32; 1000]).unwrap();
    let rk = s.copy_from_host(&[7u32, 7, 7, 8]).unwrap();
    let lp = s.copy_from_host(&(0..1000u32).collect::<Vec<_>>()).unwrap();
    let rp = s.copy_from_host(&[10u64, 11, 12, 13]).unwrap();
    let a = WideRelation::new(Keys::single(lk.view()), vec![lp.view().into()]).unwrap();
    let b = WideRelation::new(Keys::single(rk.view()), vec![rp.view().into()]).unwrap();
    for algo in ALGOS {
        let opts = |budget| WideJoinOptions { keys: JoinOptions { output_budget: Some(budget), ..DEFAULT }, ..WideJoinOptions::default() };
        match wide::join(&s, &a, &b, JoinType::Inner, algo, opts(23_999)) {
            Err(Error::OutputTooLarge { rows, bytes, available }) => assert_eq!((rows, bytes, available), (3000, 24_000, 23_999), "{algo:?}"),
            Err(e) => panic!("{algo:?}: {e}"),
            Ok(out) => panic!("{algo:?}: ran {:?} with {} rows over a 23 999-byte budget", out.algorithm, out.rows),
        }
        let out = wide::join(&s, &a, &b, JoinType::Inner, algo, opts(24_000)).unwrap_or_else(|e| panic!("{algo:?}: {e}"));
        assert_eq!(out.rows, 3000, "{algo:?}");
        let right = out.right.as_ref().expect("materialized right side");
        assert_eq!(right.columns.len(), 1, "{algo:?}");
    }
}
