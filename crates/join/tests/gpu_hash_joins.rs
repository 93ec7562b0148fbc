//! Property tests of the hash joins (seed 002: PHJ-UM, PHJ-OM and the non-partitioned hash join)
//! against the CPU reference (`reference::join`).
//!
//! They run on the GPU when one is present, print `SKIPPED` when none is, and fail loudly with
//! GPUJOIN_REQUIRE_GPU=1. Seeds are fixed so failures reproduce; the device pool is poisoned
//! before each join so that an internal buffer a kernel forgets to write shows up as garbage.
//!
//! Maps compare with the reference as sorted multisets of `(left row, right row)` pairs;
//! materialized payloads compare as sorted multisets of output rows (the payload values of both
//! sides, `None` on a null side) with host-side gathers through the reference pairs.
//!
//! Every test holds [`LOCK`]: the device's peak-memory counter, which the joins' statistics
//! reset and read, is process-wide. The tuning (partition bits, probe rows per work item) and
//! the weak hash are test-only options of each call (`JoinOptions::testing`, the feature
//! `testing`): [`tuned`], [`weak_hash`].
//!
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer property cases and smaller PK-FK
//! and large joins (2^18 build rows: still 256 partitions, several transform chunks); the
//! OM-against-UM peak comparison, which holds for the sizes of a full run, is asserted only there.

mod common;
use common::{canonical_pairs, diff, fail, stream, uniform};

use std::sync::{Mutex, MutexGuard};

use gpujoin_device::testing::{cases, pick, reduced, rows};
use gpujoin_device::{DeviceBuffer, Error, Stream};
use gpujoin_join::{
    hash_join, hash_join_with_stats, partitioned_hash_join, partitioned_hash_join_with_payloads,
    DeviceColumn, DeviceKeys, GatherMaps, HostColumn, HostKeys, JoinOptions, JoinType, KeyType, Keys, Materialization,
    NanEquality, NullEquality, Payload, RowId, Side, TestingOptions,
};
use gpujoin_testkit::datagen;
use gpujoin_testkit::reference;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

const POISON: u8 = 0xAB;

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `opts` with the partitioned hash join on `bits` partition bits (0: automatic) and at most
/// `split` probe rows per work item (0: the default).
fn tuned(opts: JoinOptions, bits: u32, split: u32) -> JoinOptions {
    JoinOptions { testing: TestingOptions { partition_bits: bits, probe_split: split, ..opts.testing }, ..opts }
}

/// `opts` keeping 2 bits of every hashed key (massive collisions of hashed composites).
fn weak_hash(opts: JoinOptions) -> JoinOptions {
    JoinOptions { testing: TestingOptions { hash_mask: 0b11, ..opts.testing }, ..opts }
}

/// (partition bits, probe rows per item): automatic; one bit (huge partitions: several build
/// chunks) with small probe ranges; a few bits.
const TUNINGS: [(u32, u32); 3] = [(0, 0), (1, 300), (3, 0)];

/// Prints how long a test took (on drop).
struct Timed(&'static str, std::time::Instant);

impl Timed {
    fn start(name: &'static str) -> Timed {
        Timed(name, std::time::Instant::now())
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        eprintln!("TIME {}: {:.1} s", self.0, self.1.elapsed().as_secs_f64());
    }
}

fn poison_for(s: &Stream, rows: usize) {
    let mut b: DeviceBuffer<u8> = s.alloc((rows * 64 + (1 << 16)).max(1)).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
}

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 32,
        ..Config::default()
    });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

const DEFAULT: JoinOptions = JoinOptions { null_equality: NullEquality::NullEqualsNothing, nan_equality: NanEquality::NanEqualsNan, ..JoinOptions::DEFAULT };

const ALL_OPTIONS: [JoinOptions; 4] = [
    DEFAULT,
    JoinOptions { null_equality: NullEquality::NullEqualsNull, nan_equality: NanEquality::NanEqualsNan, ..JoinOptions::DEFAULT },
    JoinOptions { null_equality: NullEquality::NullEqualsNothing, nan_equality: NanEquality::NanNeverEqual, ..JoinOptions::DEFAULT },
    JoinOptions { null_equality: NullEquality::NullEqualsNull, nan_equality: NanEquality::NanNeverEqual, ..JoinOptions::DEFAULT },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algo {
    /// `partitioned_hash_join` (maps), with a tuning.
    Phj(u32, u32),
    /// `hash_join`.
    Nphj,
}

fn algos() -> Vec<Algo> {
    TUNINGS.iter().map(|&(b, s)| Algo::Phj(b, s)).chain([Algo::Nphj]).collect()
}

/// Of `all`, the ones to check for the `i`-th combination of a case's loops: every one
/// normally; under `GPUJOIN_TEST_SIZE=small` two, rotating with `i` (`all[i]`, `all[i + 5]` for
/// the eight join types, `all[i]`, `all[i + 2]` for the four algorithms), so that a few
/// consecutive combinations still cover them all (a sanitizer run cannot afford every
/// combination times every join type and algorithm).
fn rotating<T: Copy>(all: &[T], i: usize) -> Vec<T> {
    if !reduced() || all.len() <= 2 {
        return all.to_vec();
    }
    let step = if all.len() == 8 { 5 } else { all.len() / 2 };
    vec![all[i % all.len()], all[(i + step) % all.len()]]
}

fn gpu_maps(s: &Stream, algo: Algo, l: &HostKeys, r: &HostKeys, jt: JoinType, opts: JoinOptions) -> gpujoin_device::Result<GatherMaps> {
    let (dl, dr) = (DeviceKeys::upload(s, l)?, DeviceKeys::upload(s, r)?);
    poison_for(s, l.rows() + r.rows());
    match algo {
        Algo::Phj(bits, split) => Ok(partitioned_hash_join(s, &dl.keys(), &dr.keys(), jt, tuned(opts, bits, split))?.maps),
        Algo::Nphj => hash_join(s, &dl.keys(), &dr.keys(), jt, opts),
    }
}

fn describe(l: &HostKeys, r: &HostKeys) -> String {
    if l.rows() + r.rows() <= 40 {
        format!("\nleft {l:?}\nright {r:?}")
    } else {
        format!(" ({} x {} rows)", l.rows(), r.rows())
    }
}

/// Runs `algo` and compares its maps with `reference::join` as multisets.
fn check_maps(s: &Stream, algo: Algo, l: &HostKeys, r: &HostKeys, jt: JoinType, opts: JoinOptions, what: &str) -> Result<(), TestCaseError> {
    let want = reference::join(l, r, jt, opts).unwrap();
    let maps = gpu_maps(s, algo, l, r, jt, opts).map_err(|e| fail(format!("{algo:?} {jt:?} {opts:?} {what}: error {e}{}", describe(l, r))))?;
    let got = canonical_pairs(&maps, jt)?;
    if got != want {
        return Err(fail(format!("{algo:?} {jt:?} {opts:?} {what}: {}{}", diff(&got, &want), describe(l, r))));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------

/// Codes as a key column of `ty` (injective); `spread` maps them over the whole range of the
/// type (sign and high bits) instead of small values.
fn column(ty: KeyType, codes: &[u64], spread: bool) -> HostColumn {
    match (ty, spread) {
        (KeyType::U32, false) => HostColumn::U32(codes.iter().map(|&c| c as u32).collect()),
        (KeyType::U32, true) => HostColumn::U32(codes.iter().map(|&c| (c as u32).wrapping_mul(0x9E37_79B1)).collect()),
        (KeyType::I32, false) => HostColumn::I32(codes.iter().map(|&c| c as i32 - 1000).collect()),
        (KeyType::I32, true) => HostColumn::I32(codes.iter().map(|&c| (c as u32).wrapping_mul(0x9E37_79B1) as i32).collect()),
        (KeyType::U64, false) => HostColumn::U64(codes.to_vec()),
        (KeyType::U64, true) => HostColumn::U64(codes.iter().map(|&c| c.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect()),
        (KeyType::I64, false) => HostColumn::I64(codes.iter().map(|&c| c as i64 - 1000).collect()),
        // Multiples of 2^32: every low bit equal (raw partitioning crowds one partition).
        (KeyType::I64, true) => HostColumn::I64(codes.iter().map(|&c| ((c as i64) << 32) - (1 << 40)).collect()),
        (KeyType::F32, false) => HostColumn::F32(codes.iter().map(|&c| c as f32 * 0.5 - 100.0).collect()),
        (KeyType::F32, true) => HostColumn::F32(codes.iter().map(|&c| if c % 2 == 1 { -(c as f32) * 1.0e20 } else { c as f32 * 1.0e-20 }).collect()),
        (KeyType::F64, false) => HostColumn::F64(codes.iter().map(|&c| c as f64 * 0.25 - 1000.0).collect()),
        (KeyType::F64, true) => HostColumn::F64(codes.iter().map(|&c| if c % 2 == 1 { -(c as f64) * 1.0e200 } else { c as f64 * 1.0e-200 }).collect()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    EmptyLeft,
    EmptyRight,
    EmptyBoth,
    OneRowLeft,
    OneRowRight,
    OneRowBoth,
    /// ~200 rows per side over 5 keys: Cartesian blow-up.
    DuplicateHeavy,
    /// Every row of both sides has the same key (one huge partition on both sides).
    OneKey,
    NoMatches,
    /// Unique keys on the left, foreign keys into them on the right (some misses).
    PkFk,
    /// Foreign keys on both sides.
    FkFk,
    /// Zipf-skewed foreign keys.
    Zipf,
    /// Duplicated build keys beyond a shared-memory chunk (2048 rows of one key).
    BigGroups,
}

const SHAPES: [Shape; 13] = [
    Shape::EmptyLeft,
    Shape::EmptyRight,
    Shape::EmptyBoth,
    Shape::OneRowLeft,
    Shape::OneRowRight,
    Shape::OneRowBoth,
    Shape::DuplicateHeavy,
    Shape::OneKey,
    Shape::NoMatches,
    Shape::PkFk,
    Shape::FkFk,
    Shape::Zipf,
    Shape::BigGroups,
];

#[derive(Debug, Clone, Copy)]
struct ShapeParams {
    seed: u64,
    small: usize,
    mid: usize,
    big: usize,
}

fn shape_params() -> impl Strategy<Value = ShapeParams> {
    // Reduced: a few thousand rows still, past the partitions' and tiles' sizes.
    let (mid, big) = pick((200usize..2000, 2000usize..12_000), (200usize..700, 2000usize..5000));
    (any::<u64>(), 2usize..64, mid, big).prop_map(|(seed, small, mid, big)| ShapeParams { seed, small, mid, big })
}

fn shape_codes(shape: Shape, p: &ShapeParams) -> (Vec<u64>, Vec<u64>) {
    let mut rng = StdRng::seed_from_u64(p.seed ^ (shape as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let coin = p.seed & 1 == 1;
    match shape {
        Shape::EmptyLeft => (vec![], uniform(&mut rng, p.mid, p.mid as u64)),
        Shape::EmptyRight => (uniform(&mut rng, p.mid, p.mid as u64), vec![]),
        Shape::EmptyBoth => (vec![], vec![]),
        Shape::OneRowLeft => {
            let r = uniform(&mut rng, p.small, 4);
            (vec![if coin { r[0] } else { 9 }], r)
        }
        Shape::OneRowRight => {
            let l = uniform(&mut rng, p.small, 4);
            (l.clone(), vec![if coin { l[l.len() - 1] } else { 9 }])
        }
        Shape::OneRowBoth => (vec![3], vec![if coin { 3 } else { 4 }]),
        Shape::DuplicateHeavy => {
            let (nl, nr) = (150 + p.small, 200 - p.small / 2);
            (uniform(&mut rng, nl, 5), uniform(&mut rng, nr, 5))
        }
        Shape::OneKey => (vec![7; 2 * p.small], vec![7; 130 - p.small]),
        Shape::NoMatches => {
            let l = uniform(&mut rng, p.mid, 1000).into_iter().map(|k| 2 * k).collect();
            let r = uniform(&mut rng, p.mid / 2 + 1, 1000).into_iter().map(|k| 2 * k + 1).collect();
            (l, r)
        }
        Shape::PkFk => {
            let mut l: Vec<u64> = (0..p.big as u64).collect();
            l.shuffle(&mut rng);
            let r = uniform(&mut rng, 2 * p.big, p.big as u64 * 9 / 8);
            (l, r)
        }
        Shape::FkFk => {
            let d = (p.mid / 3).max(2) as u64;
            (uniform(&mut rng, p.mid, d), uniform(&mut rng, p.big, d))
        }
        Shape::Zipf => {
            let l: Vec<u64> = (0..500).collect();
            let r = datagen::zipf_keys(p.big, 600, 1.5, p.seed).unwrap();
            let mut l = l;
            l.shuffle(&mut rng);
            (l, r.into_iter().map(u64::from).collect())
        }
        Shape::BigGroups => {
            // The smaller side holds runs of up to 2500 rows of a key (several build chunks).
            let mut l = Vec::new();
            for k in 0..4u64 {
                l.extend(vec![k; rng.gen_range(1..2500)]);
            }
            l.extend(uniform(&mut rng, p.small, 50));
            l.shuffle(&mut rng);
            // A larger right side (so the left builds) that mostly misses: the output stays small.
            let mut r: Vec<u64> = uniform(&mut rng, 10 + p.small, 8);
            r.extend(uniform(&mut rng, l.len() + 1, 100_000).into_iter().map(|k| k + 1000));
            r.shuffle(&mut rng);
            (l, r)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Maps: every shape x key type x join type x algorithm
// ---------------------------------------------------------------------------------------------

#[test]
fn hash_joins_match_reference_on_every_shape() {
    let Some(s) = stream("hash_joins_match_reference_on_every_shape") else { return };
    let _l = lock();
    let _t = Timed::start("hash_joins_match_reference_on_every_shape");
    // U32 / I64: raw keys (fast path; spread I64 keys crowd one partition and get mixed);
    // F32 / F64 / U64 spread: keys through images and the mix.
    let types = [KeyType::U32, KeyType::I64, KeyType::F32, KeyType::U64, KeyType::I32, KeyType::F64];
    run(cases(3, 1), 0xA5_0001, (shape_params(), any::<bool>()), |(p, spread)| {
        for (si, shape) in SHAPES.into_iter().enumerate() {
            let (lc, rc) = shape_codes(shape, &p);
            for (t, &ty) in types.iter().enumerate() {
                // Every type on the first case; two per case afterwards.
                if p.seed % 3 != t as u64 % 3 && t >= 2 {
                    continue;
                }
                let i = si * types.len() + t;
                let sides = [
                    (HostKeys::single(column(ty, &lc, spread)), HostKeys::single(column(ty, &rc, spread))),
                    (HostKeys::single(column(ty, &rc, spread)), HostKeys::single(column(ty, &lc, spread))),
                ];
                // Reduced: one orientation, alternating; two algorithms and two join types.
                let sides = if reduced() { vec![sides[i % 2].clone()] } else { sides.to_vec() };
                for (hl, hr) in sides {
                    for algo in rotating(&algos(), i) {
                        for jt in rotating(&JoinType::ALL, i) {
                            check_maps(&s, algo, &hl, &hr, jt, DEFAULT, &format!("shape {shape:?} type {ty:?} spread {spread}"))?;
                        }
                    }
                }
            }
        }
        Ok(())
    });
}

#[test]
fn pk_fk_workloads_match_reference_over_match_ratios_and_skew() {
    let Some(s) = stream("pk_fk_workloads_match_reference_over_match_ratios_and_skew") else { return };
    let _l = lock();
    let _t = Timed::start("pk_fk_workloads_match_reference_over_match_ratios_and_skew");
    let (nr, ns) = (rows(30_000, 6_000), rows(60_000, 12_000));
    let r = datagen::shuffled_dense_keys(nr, 1).unwrap();
    let mut cases: Vec<(String, Vec<u32>)> = Vec::new();
    for ratio in [1.0, 0.5, 0.25, 1.0 / 16.0] {
        cases.push((format!("match ratio {ratio}"), datagen::foreign_keys_match_ratio(nr, ns, ratio, 2).unwrap()));
    }
    for z in [0.0, 0.5, 1.0, 1.5, 2.0] {
        cases.push((format!("Zipf {z}"), datagen::zipf_keys(ns, nr, z, 3).unwrap()));
    }
    for (what, f) in &cases {
        for wide in [false, true] {
            let col = |k: &[u32]| if wide { HostColumn::U64(k.iter().map(|&x| (x as u64) << 20 | 7).collect()) } else { HostColumn::U32(k.to_vec()) };
            let (hr, hs) = (HostKeys::single(col(&r)), HostKeys::single(col(f)));
            for algo in [Algo::Phj(0, 0), Algo::Nphj] {
                for jt in [JoinType::Inner, JoinType::Left, JoinType::Right, JoinType::Full, JoinType::LeftAnti, JoinType::RightSemi] {
                    check_maps(&s, algo, &hr, &hs, jt, DEFAULT, &format!("PK-FK {what}, 8-byte keys {wide}")).unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
    }
    // FK-FK with skew on both sides.
    let a = datagen::zipf_keys(rows(20_000, 5_000), 3000, 1.0, 4).unwrap();
    let b = datagen::zipf_keys(rows(30_000, 7_500), 3000, 0.7, 5).unwrap();
    let (ha, hb) = (HostKeys::single(HostColumn::U32(a)), HostKeys::single(HostColumn::U32(b)));
    for algo in algos() {
        for jt in JoinType::ALL {
            check_maps(&s, algo, &ha, &hb, jt, DEFAULT, "FK-FK Zipf").unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Composite, nullable, NaN keys under every option
// ---------------------------------------------------------------------------------------------

const INT_POOL: [i64; 10] = [0, 1, -1, 2, 3, i64::MIN, i64::MAX, 0x1_0000_0000, -0x8000_0000, 42];
const F64_POOL: [u64; 8] = [
    0x0000_0000_0000_0000, // 0.0
    0x8000_0000_0000_0000, // -0.0
    0x3FF0_0000_0000_0000,
    0x7FF0_0000_0000_0000,
    0x7FF8_0000_0000_0000, // NaN
    0xFFF8_0000_0000_0000, // -NaN
    0x7FF8_0000_0000_1234, // NaN with a payload
    0x0000_0000_0000_0001,
];

fn pool_column(ty: KeyType, rng: &mut StdRng, domain: usize, n: usize) -> HostColumn {
    let mut idx = || rng.gen_range(0..domain);
    match ty {
        KeyType::I32 => HostColumn::I32((0..n).map(|_| INT_POOL[idx() % INT_POOL.len()] as i32).collect()),
        KeyType::I64 => HostColumn::I64((0..n).map(|_| INT_POOL[idx() % INT_POOL.len()]).collect()),
        KeyType::U32 => HostColumn::U32((0..n).map(|_| INT_POOL[idx() % INT_POOL.len()] as u32).collect()),
        KeyType::U64 => HostColumn::U64((0..n).map(|_| INT_POOL[idx() % INT_POOL.len()] as u64).collect()),
        KeyType::F32 => HostColumn::F32((0..n).map(|_| f64::from_bits(F64_POOL[idx() % F64_POOL.len()]) as f32).collect()),
        KeyType::F64 => HostColumn::F64((0..n).map(|_| f64::from_bits(F64_POOL[idx() % F64_POOL.len()])).collect()),
    }
}

fn pool_keys(rng: &mut StdRng, types: &[KeyType], domain: usize, n: usize, null_fraction: f64) -> HostKeys {
    let mut k = HostKeys::default();
    for &ty in types {
        k.columns.push(pool_column(ty, rng, domain, n));
        k.validity.push(if null_fraction > 0.0 { Some((0..n).map(|_| !rng.gen_bool(null_fraction)).collect()) } else { None });
    }
    k
}

const ALL_TYPES: [KeyType; 6] = [KeyType::I32, KeyType::I64, KeyType::U32, KeyType::U64, KeyType::F32, KeyType::F64];

#[test]
fn composite_nullable_nan_keys_match_reference_under_every_option() {
    let Some(s) = stream("composite_nullable_nan_keys_match_reference_under_every_option") else { return };
    let _l = lock();
    let _t = Timed::start("composite_nullable_nan_keys_match_reference_under_every_option");
    let sizes = prop_oneof![1 => Just(0usize), 2 => 1usize..8, 6 => 8usize..400, 1 => 2000usize..5000];
    run(cases(40, 8), 0xA5_0002, (any::<u64>(), 1usize..=4, sizes.clone(), sizes, any::<bool>()), |(seed, ncols, nl, nr, weak)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let types: Vec<KeyType> = (0..ncols).map(|_| ALL_TYPES[rng.gen_range(0..ALL_TYPES.len())]).collect();
        let domain = rng.gen_range(1..12);
        let nulls = [0.0, 0.0, 0.1, 0.5][rng.gen_range(0..4)];
        let (l, r) = (pool_keys(&mut rng, &types, domain, nl, nulls), pool_keys(&mut rng, &types, domain, nr, nulls));
        let opts = ALL_OPTIONS[rng.gen_range(0..4)];
        let opts = if weak { weak_hash(opts) } else { opts };
        for algo in [Algo::Phj(0, 0), Algo::Phj(1, 100), Algo::Nphj] {
            for jt in JoinType::ALL {
                check_maps(&s, algo, &l, &r, jt, opts, &format!("types {types:?} nulls {nulls} weak hash {weak}"))?;
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Payloads: PHJ-UM and PHJ-OM against host gathers of the reference pairs
// ---------------------------------------------------------------------------------------------

use common::payloads::*;

/// Runs the join with payloads in `mode` and compares the output relation with host gathers of
/// the reference pairs (and, where returned, the maps with the reference pairs).
#[allow(clippy::too_many_arguments)]
fn check_payload_join(
    s: &Stream,
    l: &HostKeys,
    lp: &[HostPayload],
    r: &HostKeys,
    rp: &[HostPayload],
    jt: JoinType,
    opts: JoinOptions,
    mode: Materialization,
    what: &str,
) -> Result<(), TestCaseError> {
    let what = format!("{mode:?} {jt:?} {opts:?} {what}");
    let want_pairs = reference::join(l, r, jt, opts).unwrap();
    let (dl, dr) = (DeviceKeys::upload(s, l).unwrap(), DeviceKeys::upload(s, r).unwrap());
    let (bl, br): (Vec<DevPayload>, Vec<DevPayload>) = (lp.iter().map(|p| upload(s, p)).collect(), rp.iter().map(|p| upload(s, p)).collect());
    let (cl, cr): (Vec<DeviceColumn>, Vec<DeviceColumn>) = (bl.iter().map(dev_column).collect(), br.iter().map(dev_column).collect());
    poison_for(s, l.rows() + r.rows());
    let out = partitioned_hash_join_with_payloads(s, &dl.keys(), &cl, &dr.keys(), &cr, jt, opts, mode).map_err(|e| fail(format!("{what}: error {e}{}", describe(l, r))))?;
    prop_assert_eq!(out.join_type, jt);
    prop_assert_eq!(out.rows, want_pairs.len() as u64, "{}: rows{}", what, describe(l, r));
    let rows = out.rows as usize;
    if let Some(maps) = &out.maps {
        let got = canonical_pairs(maps, jt)?;
        if got != want_pairs {
            return Err(fail(format!("{what}: maps: {}{}", diff(&got, &want_pairs), describe(l, r))));
        }
    } else {
        prop_assert_eq!(mode, Materialization::Clustered, "{}: UM returns its maps", what);
    }
    prop_assert_eq!(out.left.is_some(), jt.has_left_map(), "{}: left side present", what);
    prop_assert_eq!(out.right.is_some(), jt.has_right_map(), "{}: right side present", what);
    let lrows = match &out.left {
        Some(m) => side_rows(m, lp, rows, jt.keeps_unmatched_right(), &format!("{what} left"))?,
        None => vec![vec![]; rows],
    };
    let rrows = match &out.right {
        Some(m) => side_rows(m, rp, rows, jt.keeps_unmatched_left(), &format!("{what} right"))?,
        None => vec![vec![]; rows],
    };
    let mut got: Vec<Row> = lrows.into_iter().zip(rrows).map(|(mut a, b)| {
        a.extend(b);
        a
    }).collect();
    got.sort();
    let want = expected_rows(&want_pairs, lp, rp, jt);
    if got != want {
        let k = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        return Err(fail(format!("{what}: materialized rows differ from host gathers at sorted row {k}: {:?} vs {:?}{}", got.get(k), want.get(k), describe(l, r))));
    }
    Ok(())
}

/// PHJ-OM of keys that are hashed (composites wider than 64 bits): the typed refusal, never a
/// silent PHJ-UM.
#[allow(clippy::too_many_arguments)]
fn check_om_refused(s: &Stream, l: &HostKeys, lp: &[HostPayload], r: &HostKeys, rp: &[HostPayload], jt: JoinType, opts: JoinOptions, what: &str) -> Result<(), TestCaseError> {
    let (dl, dr) = (DeviceKeys::upload(s, l).unwrap(), DeviceKeys::upload(s, r).unwrap());
    let (bl, br): (Vec<DevPayload>, Vec<DevPayload>) = (lp.iter().map(|p| upload(s, p)).collect(), rp.iter().map(|p| upload(s, p)).collect());
    let (cl, cr): (Vec<DeviceColumn>, Vec<DeviceColumn>) = (bl.iter().map(dev_column).collect(), br.iter().map(dev_column).collect());
    match partitioned_hash_join_with_payloads(s, &dl.keys(), &cl, &dr.keys(), &cr, jt, opts, Materialization::Clustered) {
        Err(Error::Unsupported { what: w, reason }) => {
            prop_assert_eq!(w.as_str(), "PHJ-OM (clustered gathers)", "{} {:?}", what, jt);
            prop_assert!(reason.contains("hashed"), "{} {:?}: reason {}", what, jt, reason);
            Ok(())
        }
        Err(e) => Err(fail(format!("Clustered {jt:?} {what}: hashed keys: expected Error::Unsupported, got {e}"))),
        Ok(out) => Err(fail(format!("Clustered {jt:?} {what}: hashed keys: expected Error::Unsupported, got {} rows", out.rows))),
    }
}

#[test]
fn materialized_payloads_match_host_gathers() {
    let Some(s) = stream("materialized_payloads_match_host_gathers") else { return };
    let _l = lock();
    let _t = Timed::start("materialized_payloads_match_host_gathers");
    run(cases(8, 2), 0xA5_0003, (shape_params(), 1usize..=6, 0usize..=6, any::<bool>(), 0usize..4), |(p, ncl, ncr, spread, kind)| {
        let mut rng = StdRng::seed_from_u64(p.seed);
        let shapes = [Shape::PkFk, Shape::FkFk, Shape::DuplicateHeavy, Shape::Zipf, Shape::OneRowLeft, Shape::EmptyRight, Shape::BigGroups];
        let shape = shapes[rng.gen_range(0..shapes.len())];
        let (lc, rc) = shape_codes(shape, &p);
        // Keys: 4- or 8-byte integers (raw), floats (images), nullable or 3-column composites
        // (the latter hashed and verified: PHJ-OM refuses them with Error::Unsupported).
        let (l, r, opts) = match kind {
            0 => (HostKeys::single(column(KeyType::U32, &lc, spread)), HostKeys::single(column(KeyType::U32, &rc, spread)), DEFAULT),
            1 => (HostKeys::single(column(KeyType::I64, &lc, spread)), HostKeys::single(column(KeyType::I64, &rc, spread)), DEFAULT),
            2 => {
                let mut l = HostKeys::single(column(KeyType::F64, &lc, spread));
                let mut r = HostKeys::single(column(KeyType::F64, &rc, spread));
                l.validity[0] = Some((0..l.rows()).map(|_| rng.gen_bool(0.9)).collect());
                r.validity[0] = Some((0..r.rows()).map(|_| rng.gen_bool(0.8)).collect());
                (l, r, ALL_OPTIONS[rng.gen_range(0..4)])
            }
            _ => {
                let lk: Vec<u32> = lc.iter().map(|&c| c as u32).collect();
                let rk: Vec<u32> = rc.iter().map(|&c| c as u32).collect();
                (datagen::composite_keys(&lk, 3).unwrap(), datagen::composite_keys(&rk, 3).unwrap(), DEFAULT)
            }
        };
        let lp: Vec<HostPayload> = (0..ncl).map(|c| payload(PTYPES[rng.gen_range(0..6)], l.rows(), 100 + c as u64)).collect();
        let rp: Vec<HostPayload> = (0..ncr).map(|c| payload(PTYPES[rng.gen_range(0..6)], r.rows(), 200 + c as u64)).collect();
        for mode in [Materialization::Unclustered, Materialization::Clustered] {
            for jt in JoinType::ALL {
                for &(bits, split) in &TUNINGS[..2] {
                    let what = format!("shape {shape:?} key kind {kind} spread {spread}, {ncl} + {ncr} payloads, tuning {bits}/{split}");
                    // Hashed keys (over 64 bits: three columns, or a nullable f64 with its null
                    // bit when nulls equal): PHJ-OM refuses them.
                    let hashed = kind == 3 || (kind == 2 && opts.null_equality == NullEquality::NullEqualsNull);
                    if hashed && mode == Materialization::Clustered {
                        check_om_refused(&s, &l, &lp, &r, &rp, jt, tuned(opts, bits, split), &what)?;
                        continue;
                    }
                    check_payload_join(&s, &l, &lp, &r, &rp, jt, tuned(opts, bits, split), mode, &what)?;
                }
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Determinism, statistics, memory, errors
// ---------------------------------------------------------------------------------------------

#[test]
fn outputs_are_identical_across_runs() {
    let Some(s) = stream("outputs_are_identical_across_runs") else { return };
    let _l = lock();
    let _t = Timed::start("outputs_are_identical_across_runs");
    let mut rng = StdRng::seed_from_u64(7);
    // Duplicates on both sides (grouped build chunks, multi-match expansion), misses, skew.
    // Reduced: a few rows per key still (duplicates on both sides, keys 700..900 missing left).
    let a: Vec<u32> = datagen::zipf_keys(rows(9000, 2500), 700, 1.1, 8).unwrap();
    let b: Vec<u32> = (0..rows(15000, 3000)).map(|_| rng.gen_range(0..900)).collect();
    let (ha, hb) = (HostKeys::single(HostColumn::U32(a.clone())), HostKeys::single(HostColumn::U32(b.clone())));
    for algo in algos() {
        for jt in JoinType::ALL {
            let first = gpu_maps(&s, algo, &ha, &hb, jt, DEFAULT).unwrap().pairs().unwrap();
            let second = gpu_maps(&s, algo, &ha, &hb, jt, DEFAULT).unwrap().pairs().unwrap();
            assert_eq!(first.len(), second.len(), "{algo:?} {jt:?}");
            assert!(first == second, "{algo:?} {jt:?}: the two runs differ in order or content");
            let want = reference::join(&ha, &hb, jt, DEFAULT).unwrap();
            let mut got = first;
            reference::sort_pairs(&mut got);
            assert_eq!(got, want, "{algo:?} {jt:?}");
        }
    }
    // PHJ-OM payload columns, in order.
    let (dk, dl) = (s.copy_from_host(&a).unwrap(), s.copy_from_host(&b).unwrap());
    let pa: Vec<u64> = (0..a.len() as u64).map(|i| i * 3 + 1).collect();
    let pb: Vec<f32> = (0..b.len()).map(|i| i as f32 * 0.5).collect();
    let (dpa, dpb) = (s.copy_from_host(&pa).unwrap(), s.copy_from_host(&pb).unwrap());
    for jt in [JoinType::Inner, JoinType::Full, JoinType::LeftSemi] {
        let once = || -> (Vec<u64>, Vec<u64>) {
            poison_for(&s, 30_000);
            let out = partitioned_hash_join_with_payloads(&s, &Keys::single(dk.view()), &[dpa.view().into()], &Keys::single(dl.view()), &[dpb.view().into()], jt, DEFAULT, Materialization::Clustered)
                .unwrap();
            let l = out.left.as_ref().map_or(vec![], |m| payload_bits(&m.columns[0]).1);
            let r = out.right.as_ref().map_or(vec![], |m| payload_bits(&m.columns[0]).1);
            (l, r)
        };
        assert!(once() == once(), "PHJ-OM {jt:?}: the two runs differ");
    }
}

#[test]
fn stats_report_phases_and_partitioning() {
    let Some(s) = stream("stats_report_phases_and_partitioning") else { return };
    let _l = lock();
    let _t = Timed::start("stats_report_phases_and_partitioning");
    // Full size also when reduced: the statistics asserted are those of 2^18 build rows.
    let r = datagen::shuffled_dense_keys(1 << 18, 1).unwrap();
    let f = datagen::foreign_keys_uniform(1 << 18, 1 << 19, 2).unwrap();
    let (dr, df) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
    let (kr, kf) = (Keys::single(dr.view()), Keys::single(df.view()));
    let out = partitioned_hash_join(&s, &kr, &kf, JoinType::Inner, DEFAULT).unwrap();
    let st = out.stats;
    assert_eq!(out.maps.rows(), 1 << 19);
    assert_eq!(st.partition_bits, 8, "2^18 build rows at ~1024 per partition");
    assert_eq!(st.build_side, Some(Side::Left));
    assert!(!st.mixed_keys, "dense keys partition well on their own bits");
    assert!(st.single_pass, "an inner PK-FK join takes the single pass");
    assert!(st.work_items >= 256, "{st:?}");
    assert!(st.transform_ms > 0.0 && st.match_ms > 0.0 && st.materialize_ms >= 0.0, "{st:?}");
    assert!((st.total_ms - (st.transform_ms + st.match_ms + st.materialize_ms)).abs() < 1e-3, "{st:?}");
    assert!(st.peak_memory_bytes >= ((1u64 << 18) + (1 << 19)) * 4, "{st:?}");
    let h = hash_join_with_stats(&s, &kr, &kf, JoinType::Inner, DEFAULT).unwrap();
    assert_eq!(h.maps.rows(), 1 << 19);
    assert_eq!(h.stats.partition_bits, 0);
    assert!(h.stats.transform_ms > 0.0 && h.stats.match_ms > 0.0, "{:?}", h.stats);
    // Duplicate build keys: the speculative single pass gives up, the two passes run.
    let g = datagen::foreign_keys_uniform(1 << 18, 1 << 19, 3).unwrap();
    let dg = s.copy_from_host(&g).unwrap();
    let out = partitioned_hash_join(&s, &Keys::single(df.view()), &Keys::single(dg.view()), JoinType::Inner, DEFAULT).unwrap();
    assert!(!out.stats.single_pass);
    let (hf, hg) = (HostKeys::single(HostColumn::U32(f.clone())), HostKeys::single(HostColumn::U32(g)));
    assert_eq!(out.maps.rows(), reference::join_size(&hf, &hg, JoinType::Inner, DEFAULT).unwrap());
    assert_eq!(out.maps.rows(), 1 << 20);
    // Keys crowding one partition on their low bits are mixed.
    let crowded: Vec<u64> = r.iter().map(|&k| (k as u64) << 32).collect();
    let fc: Vec<u64> = f.iter().map(|&k| (k as u64) << 32).collect();
    let (dc, dfc) = (s.copy_from_host(&crowded).unwrap(), s.copy_from_host(&fc).unwrap());
    let out = partitioned_hash_join(&s, &Keys::single(dc.view()), &Keys::single(dfc.view()), JoinType::Inner, DEFAULT).unwrap();
    assert!(out.stats.mixed_keys);
    assert_eq!(out.maps.rows(), 1 << 19);
}

#[test]
fn om_peak_memory_is_at_most_um() {
    let Some(s) = stream("om_peak_memory_is_at_most_um") else { return };
    let _l = lock();
    let _t = Timed::start("om_peak_memory_is_at_most_um");
    // The paper's Table 5 workload shape: a 4-byte key and a 4-byte payload per side, |S| = 2|R|.
    // Reduced: 2^18 and 2^19 rows (the peaks compare at full size only).
    let (nr, ns) = (rows(1 << 21, 1 << 18), rows(1 << 22, 1 << 19));
    let r = datagen::shuffled_dense_keys(nr, 11).unwrap();
    let f = datagen::foreign_keys_uniform(nr, ns, 12).unwrap();
    let (dr, df) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
    let (pr, pf) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
    // And 8-byte payloads (PHJ-OM partitions the keys alone, then every column).
    let widen = |k: &[u32]| -> Vec<u64> { k.iter().map(|&x| (x as u64) << 32 | 0x5A).collect() };
    let (wr, wf) = (s.copy_from_host(&widen(&r)).unwrap(), s.copy_from_host(&widen(&f)).unwrap());
    let mut want: Vec<u64> = f.iter().map(|&x| x as u64).collect();
    want.sort_unstable();
    let payload_sets: [(&str, DeviceColumn, DeviceColumn); 2] = [("4-byte", pr.view().into(), pf.view().into()), ("8-byte", wr.view().into(), wf.view().into())];
    for (what, lcol, rcol) in payload_sets {
        let mut peaks = Vec::new();
        for mode in [Materialization::Unclustered, Materialization::Clustered] {
            s.synchronize().unwrap();
            let out = partitioned_hash_join_with_payloads(&s, &Keys::single(dr.view()), &[lcol], &Keys::single(df.view()), &[rcol], JoinType::Inner, DEFAULT, mode).unwrap();
            assert_eq!(out.rows, ns as u64);
            // Payloads are functions of the keys: every output row pairs equal values, and the
            // right column holds every right row's payload once.
            let l = payload_bits(&out.left.as_ref().unwrap().columns[0]).1;
            let rr = payload_bits(&out.right.as_ref().unwrap().columns[0]).1;
            assert!(l == rr, "{what} {mode:?}: rows pair unequal keys");
            let mut keys: Vec<u64> = rr.iter().map(|&x| if what == "8-byte" { x >> 32 } else { x }).collect();
            keys.sort_unstable();
            assert!(keys == want, "{what} {mode:?}: the right column is not the right side's payloads");
            println!("{what} {mode:?}: {:?}", out.stats);
            peaks.push(out.stats.peak_memory_bytes);
            drop(out);
        }
        assert!(peaks[1] <= peaks[0] || reduced(), "{what}: PHJ-OM peak {} > PHJ-UM peak {}", peaks[1], peaks[0]);
    }
}

#[test]
fn large_pk_fk_join_pairs_equal_keys() {
    let Some(s) = stream("large_pk_fk_join_pairs_equal_keys") else { return };
    let _l = lock();
    let _t = Timed::start("large_pk_fk_join_pairs_equal_keys");
    // Real partition bits (12 for 2^22 build rows) and thousands of work items (reduced: 8 bits
    // for 2^18 build rows, hundreds of work items).
    let (nr, ns) = (rows(1 << 22, 1 << 18), rows(1 << 23, 1 << 19));
    let r = datagen::shuffled_dense_keys(nr, 21).unwrap();
    let f = datagen::foreign_keys_match_ratio(nr, ns, 0.75, 22).unwrap();
    let hits = f.iter().filter(|&&k| (k as usize) < nr).count() as u64;
    let r64: Vec<u64> = r.iter().map(|&k| k as u64 * 3).collect();
    let f64_: Vec<u64> = f.iter().map(|&k| k as u64 * 3).collect();
    let (dr, df) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
    let (dr8, df8) = (s.copy_from_host(&r64).unwrap(), s.copy_from_host(&f64_).unwrap());
    for eight in [false, true] {
        let (kr, kf, pr, pf): (Keys, Keys, DeviceColumn, DeviceColumn) = if eight {
            (Keys::single(dr8.view()), Keys::single(df8.view()), dr8.view().into(), df8.view().into())
        } else {
            (Keys::single(dr.view()), Keys::single(df.view()), dr.view().into(), df.view().into())
        };
        for mode in [Materialization::Unclustered, Materialization::Clustered] {
            for jt in [JoinType::Inner, JoinType::Right] {
                let out = partitioned_hash_join_with_payloads(&s, &kr, &[pr], &kf, &[pf, pf], jt, DEFAULT, mode);
                let out = out.unwrap();
                let want = if jt == JoinType::Inner { hits } else { ns as u64 };
                assert_eq!(out.rows, want, "{mode:?} {jt:?} 8-byte {eight}");
                let l = payload_bits(&out.left.as_ref().unwrap().columns[0]).1;
                let rr = payload_bits(&out.right.as_ref().unwrap().columns[0]).1;
                let valid_l = out.left.as_ref().unwrap().validity.as_ref().map(|w| w.to_vec().unwrap());
                let mut matched = 0u64;
                for k in 0..out.rows as usize {
                    let lv = match &valid_l {
                        Some(w) => w[k / 32] >> (k % 32) & 1 == 1,
                        None => true,
                    };
                    if lv {
                        assert_eq!(l[k], rr[k], "{mode:?} {jt:?}: row {k} pairs unequal keys");
                        matched += 1;
                    }
                }
                assert_eq!(matched, hits, "{mode:?} {jt:?} 8-byte {eight}");
            }
        }
        let maps = hash_join(&s, &kr, &kf, JoinType::Inner, DEFAULT).unwrap();
        assert_eq!(maps.rows(), hits);
    }
}

#[test]
fn bad_arguments_are_errors() {
    let Some(s) = stream("bad_arguments_are_errors") else { return };
    let _l = lock();
    let _t = Timed::start("bad_arguments_are_errors");
    let a = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    let b = s.copy_from_host(&[1u64, 2]).unwrap();
    let short = s.copy_from_host(&[1i32, 2]).unwrap();
    let (ka, kb) = (Keys::single(a.view()), Keys::single(b.view()));
    assert!(partitioned_hash_join(&s, &ka, &kb, JoinType::Inner, DEFAULT).is_err(), "key types differ");
    assert!(hash_join(&s, &ka, &kb, JoinType::Inner, DEFAULT).is_err(), "key types differ");
    for mode in [Materialization::Unclustered, Materialization::Clustered] {
        let r = partitioned_hash_join_with_payloads(&s, &ka, &[short.view().into()], &ka, &[], JoinType::Inner, DEFAULT, mode);
        assert!(r.is_err(), "{mode:?}: a payload column shorter than its keys");
    }
    // PHJ-OM of hashed keys (three 4-byte columns: 96 bits > 64): refused, typed; PHJ-UM
    // serves them, and PHJ-OM serves two columns (64 bits, packed exactly).
    let (c0, c1, c2) = (s.copy_from_host(&[1u32, 2, 3]).unwrap(), s.copy_from_host(&[4u32, 5, 6]).unwrap(), s.copy_from_host(&[7u32, 8, 9]).unwrap());
    let p = s.copy_from_host(&[10i32, 20, 30]).unwrap();
    let wide = Keys::new(vec![c0.view().into(), c1.view().into(), c2.view().into()]).unwrap();
    let two = Keys::new(vec![c0.view().into(), c1.view().into()]).unwrap();
    for jt in JoinType::ALL {
        let r = partitioned_hash_join_with_payloads(&s, &wide, &[p.view().into()], &wide, &[p.view().into()], jt, DEFAULT, Materialization::Clustered);
        assert!(matches!(&r, Err(Error::Unsupported { what, .. }) if what == "PHJ-OM (clustered gathers)"), "{jt:?}: hashed keys: {:?}", r.as_ref().err());
        let um = partitioned_hash_join_with_payloads(&s, &wide, &[p.view().into()], &wide, &[p.view().into()], jt, DEFAULT, Materialization::Unclustered).unwrap();
        let om = partitioned_hash_join_with_payloads(&s, &two, &[p.view().into()], &two, &[p.view().into()], jt, DEFAULT, Materialization::Clustered).unwrap();
        assert_eq!(um.rows, om.rows, "{jt:?}: every row matches itself");
    }
}

#[test]
fn documentation_examples_hold() {
    let Some(s) = stream("documentation_examples_hold") else { return };
    let _l = lock();
    let _t = Timed::start("documentation_examples_hold");
    let r = s.copy_from_host(&[3u32, 1, 2]).unwrap();
    let f = s.copy_from_host(&[2u32, 2, 3, 9]).unwrap();
    let out = partitioned_hash_join(&s, &Keys::single(r.view()), &Keys::single(f.view()), JoinType::Inner, DEFAULT).unwrap();
    let mut pairs = out.maps.pairs().unwrap();
    pairs.sort();
    let id = |i| RowId::new(i).unwrap();
    assert_eq!(pairs, vec![(id(0), id(2)), (id(2), id(0)), (id(2), id(1))]);
    let a = s.copy_from_host(&[5i64, 7]).unwrap();
    let b = s.copy_from_host(&[7i64, 7, 8]).unwrap();
    let maps = hash_join(&s, &Keys::single(a.view()), &Keys::single(b.view()), JoinType::Full, DEFAULT).unwrap();
    assert_eq!(maps.rows(), 4);
    let rk = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    let price = s.copy_from_host(&[10.0f64, 20.0, 30.0]).unwrap();
    let sk = s.copy_from_host(&[3u32, 3, 1]).unwrap();
    let qty = s.copy_from_host(&[7i32, 8, 9]).unwrap();
    let out = partitioned_hash_join_with_payloads(&s, &Keys::single(rk.view()), &[price.view().into()], &Keys::single(sk.view()), &[qty.view().into()], JoinType::Inner, DEFAULT, Materialization::Clustered)
        .unwrap();
    assert_eq!(out.rows, 3);
    let Payload::F64(p) = &out.left.as_ref().unwrap().columns[0] else { panic!("an f64 column") };
    let mut p = p.to_vec().unwrap();
    p.sort_by(f64::total_cmp);
    assert_eq!(p, vec![10.0, 30.0, 30.0]);
}
