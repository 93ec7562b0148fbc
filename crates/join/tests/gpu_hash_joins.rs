//! Property tests of the hash joins (seed 002: PHJ-UM, PHJ-OM and the non-partitioned hash join)
//! through the front door (`gpujoin_join::plan::Join` with an explicit `Algorithm`: `Hash`,
//! `PartitionedHash(Gather::Unclustered)` (PHJ-UM), `PartitionedHash(Gather::Clustered)`
//! (PHJ-OM)) against a CPU reference over host tables (`table_keys::join`, a hash-based mirror
//! of `gpujoin_testkit::table_reference::join`, cross-checked with it by a CPU test here).
//!
//! They run on the GPU when one is present, print `SKIPPED` when none is, and fail loudly with
//! GPUJOIN_REQUIRE_GPU=1. Seeds are fixed so failures reproduce; the device pool is poisoned
//! before each join so that an internal buffer a kernel forgets to write shows up as garbage.
//!
//! Maps compare with the reference as sorted multisets of `(left row, right row)` pairs;
//! selected payload columns (`JoinOutput::table`) compare as sorted multisets of output rows
//! (the payload bits of both sides, `None` on a null side) with host-side gathers through the
//! reference pairs.
//!
//! Every test holds [`LOCK`]: the device's peak-memory counter, which the joins' statistics
//! (`Join::with_stats`) reset and read, is process-wide. The tuning (partition bits, probe rows
//! per work item) and the weak hash are test-only options of each join (`Join::testing`, the
//! feature `testing`): [`tuned`], [`weak_hash`]. Every join here also turns the front door's key
//! compression off (`TestingOptions::no_key_compression`), so that 8-byte keys take the 8-byte
//! paths of the hash joins, as they did when these tests called the joins directly.
//!
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer property cases and smaller PK-FK
//! and large joins (2^18 build rows: still 256 partitions, several transform chunks); the
//! OM-against-UM peak comparison, which holds for the sizes of a full run, is asserted only there.

mod common;
#[path = "common/table_keys.rs"]
mod table_keys;
use common::{canonical_pairs, diff, fail, stream, uniform};

use std::sync::{Mutex, MutexGuard};

use gpujoin_device::testing::{cases, pick, reduced, rows};
use gpujoin_device::{DeviceBuffer, Error, Stream};
use gpujoin_join::plan::{Algorithm, Gather, Join, JoinOutput};
use gpujoin_join::table::{Column, DataType, HostColumn, HostTable, Table};
use gpujoin_join::{GatherMaps, JoinType, NanEquality, NullEquality, RowId, Side, TestingOptions};
use gpujoin_testkit::datagen;
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

/// The equalities and test-only options of one join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Opts {
    nulls: NullEquality,
    nans: NanEquality,
    testing: TestingOptions,
}

impl Opts {
    /// `j` with these options.
    fn apply(self, j: Join<'_>) -> Join<'_> {
        j.null_equality(self.nulls).nan_equality(self.nans).testing(self.testing)
    }
}

/// No key compression (see the module docs), nothing else forced.
const TESTING: TestingOptions = TestingOptions { no_key_compression: true, ..TestingOptions::DEFAULT };

/// `opts` with the partitioned hash join on `bits` partition bits (0: automatic) and at most
/// `split` probe rows per work item (0: the default).
fn tuned(opts: Opts, bits: u32, split: u32) -> Opts {
    Opts { testing: TestingOptions { partition_bits: bits, probe_split: split, ..opts.testing }, ..opts }
}

/// `opts` keeping 2 bits of every hashed key (massive collisions of hashed composites).
fn weak_hash(opts: Opts) -> Opts {
    Opts { testing: TestingOptions { hash_mask: 0b11, ..opts.testing }, ..opts }
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

const DEFAULT: Opts = Opts { nulls: NullEquality::NullEqualsNothing, nans: NanEquality::NanEqualsNan, testing: TESTING };

const ALL_OPTIONS: [Opts; 4] = [
    DEFAULT,
    Opts { nulls: NullEquality::NullEqualsNull, nans: NanEquality::NanEqualsNan, testing: TESTING },
    Opts { nulls: NullEquality::NullEqualsNothing, nans: NanEquality::NanNeverEqual, testing: TESTING },
    Opts { nulls: NullEquality::NullEqualsNull, nans: NanEquality::NanNeverEqual, testing: TESTING },
];

const PHJ_UM: Algorithm = Algorithm::PartitionedHash(Gather::Unclustered);
const PHJ_OM: Algorithm = Algorithm::PartitionedHash(Gather::Clustered);

/// What a front-door reason says when the keys were joined as ranks (see `plan`'s module docs).
const RANKS: &str = "keys joined as ranks";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algo {
    /// PHJ-UM's maps (`Algorithm::PartitionedHash(Gather::Unclustered)`), with a tuning.
    Phj(u32, u32),
    /// The non-partitioned hash join (`Algorithm::Hash`).
    Nphj,
}

impl Algo {
    fn algorithm(self) -> Algorithm {
        match self {
            Algo::Phj(..) => PHJ_UM,
            Algo::Nphj => Algorithm::Hash,
        }
    }

    /// `opts` as this algorithm runs them (PHJ: with its tuning).
    fn opts(self, opts: Opts) -> Opts {
        match self {
            Algo::Phj(bits, split) => tuned(opts, bits, split),
            Algo::Nphj => opts,
        }
    }
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

/// A table of key columns `k0`, `k1`, ...
fn key_table(columns: Vec<HostColumn>) -> HostTable {
    HostTable::new(columns.into_iter().enumerate().map(|(i, c)| (format!("k{i}"), c)).collect()).unwrap()
}

/// The names of a table's key columns (`k0`, `k1`, ...: every column whose name starts with `k`).
fn key_names(t: &HostTable) -> Vec<&str> {
    t.names().iter().map(String::as_str).filter(|n| n.starts_with('k')).collect()
}

/// One table of a single column `k`.
fn single(c: HostColumn) -> HostTable {
    HostTable::new(vec![("k", c)]).unwrap()
}

fn up(s: &Stream, t: &HostTable) -> Table {
    Table::upload(s, t).unwrap()
}

/// Runs `algorithm` on the key columns of `l` and `r` (uploaded, then the pool poisoned) and
/// checks that it ran as asked.
fn gpu_run(s: &Stream, algorithm: Algorithm, l: &HostTable, r: &HostTable, jt: JoinType, opts: Opts) -> gpujoin_device::Result<JoinOutput> {
    let (lt, rt) = (Table::upload(s, l)?, Table::upload(s, r)?);
    poison_for(s, l.rows() + r.rows());
    let (lk, rk) = (key_names(l), key_names(r));
    let out = opts.apply(Join::new(jt).on(&lt, &lk, &rt, &rk)).algorithm(algorithm).run(s)?;
    if out.algorithm != algorithm {
        return Err(Error::invalid(format!("asked for {}, {} ran ({})", algorithm.name(), out.algorithm.name(), out.reason)));
    }
    Ok(out)
}

fn gpu_maps(s: &Stream, algo: Algo, l: &HostTable, r: &HostTable, jt: JoinType, opts: Opts) -> gpujoin_device::Result<GatherMaps> {
    let out = gpu_run(s, algo.algorithm(), l, r, jt, algo.opts(opts))?;
    out.maps.ok_or_else(|| Error::invalid(format!("{} returned no maps", algo.algorithm().name())))
}

fn describe(l: &HostTable, r: &HostTable) -> String {
    if l.rows() + r.rows() <= 40 {
        format!("\nleft\n{l}right\n{r}")
    } else {
        format!(" ({} x {} rows)", l.rows(), r.rows())
    }
}

/// The reference pairs of a join on the key columns of `l` and `r`.
fn reference(l: &HostTable, r: &HostTable, jt: JoinType, opts: Opts) -> Vec<(RowId, RowId)> {
    table_keys::join(l, &key_names(l), r, &key_names(r), jt, opts.nulls, opts.nans)
}

/// Runs `algo` and compares its maps with the reference as multisets.
fn check_maps(s: &Stream, algo: Algo, l: &HostTable, r: &HostTable, jt: JoinType, opts: Opts, what: &str) -> Result<(), TestCaseError> {
    let want = reference(l, r, jt, opts);
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
fn column(ty: DataType, codes: &[u64], spread: bool) -> HostColumn {
    use HostColumn as H;
    match (ty, spread) {
        (DataType::UInt32, false) => H::from_values(codes.iter().map(|&c| c as u32).collect()),
        (DataType::UInt32, true) => H::from_values(codes.iter().map(|&c| (c as u32).wrapping_mul(0x9E37_79B1)).collect()),
        (DataType::Int32, false) => H::from_values(codes.iter().map(|&c| c as i32 - 1000).collect()),
        (DataType::Int32, true) => H::from_values(codes.iter().map(|&c| (c as u32).wrapping_mul(0x9E37_79B1) as i32).collect()),
        (DataType::UInt64, false) => H::from_values(codes.to_vec()),
        (DataType::UInt64, true) => H::from_values(codes.iter().map(|&c| c.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect()),
        (DataType::Int64, false) => H::from_values(codes.iter().map(|&c| c as i64 - 1000).collect()),
        // Multiples of 2^32: every low bit equal (raw partitioning crowds one partition).
        (DataType::Int64, true) => H::from_values(codes.iter().map(|&c| ((c as i64) << 32) - (1 << 40)).collect()),
        (DataType::Float32, false) => H::from_values(codes.iter().map(|&c| c as f32 * 0.5 - 100.0).collect()),
        (DataType::Float32, true) => H::from_values(codes.iter().map(|&c| if c % 2 == 1 { -(c as f32) * 1.0e20 } else { c as f32 * 1.0e-20 }).collect()),
        (DataType::Float64, false) => H::from_values(codes.iter().map(|&c| c as f64 * 0.25 - 1000.0).collect()),
        (DataType::Float64, true) => H::from_values(codes.iter().map(|&c| if c % 2 == 1 { -(c as f64) * 1.0e200 } else { c as f64 * 1.0e-200 }).collect()),
        (t, _) => panic!("no key column of {t} here"),
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
    let types = [DataType::UInt32, DataType::Int64, DataType::Float32, DataType::UInt64, DataType::Int32, DataType::Float64];
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
                    (single(column(ty, &lc, spread)), single(column(ty, &rc, spread))),
                    (single(column(ty, &rc, spread)), single(column(ty, &lc, spread))),
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
            let col = |k: &[u32]| if wide { HostColumn::from_values(k.iter().map(|&x| (x as u64) << 20 | 7).collect()) } else { HostColumn::from_values(k.to_vec()) };
            let (hr, hs) = (single(col(&r)), single(col(f)));
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
    let (ha, hb) = (single(HostColumn::from_values(a)), single(HostColumn::from_values(b)));
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

fn pool_column(ty: DataType, rng: &mut StdRng, domain: usize, n: usize) -> HostColumn {
    use HostColumn as H;
    let mut idx = || rng.gen_range(0..domain);
    match ty {
        DataType::Int32 => H::from_values((0..n).map(|_| INT_POOL[idx() % INT_POOL.len()] as i32).collect()),
        DataType::Int64 => H::from_values((0..n).map(|_| INT_POOL[idx() % INT_POOL.len()]).collect()),
        DataType::UInt32 => H::from_values((0..n).map(|_| INT_POOL[idx() % INT_POOL.len()] as u32).collect()),
        DataType::UInt64 => H::from_values((0..n).map(|_| INT_POOL[idx() % INT_POOL.len()] as u64).collect()),
        DataType::Float32 => H::from_values((0..n).map(|_| f64::from_bits(F64_POOL[idx() % F64_POOL.len()]) as f32).collect()),
        DataType::Float64 => H::from_values((0..n).map(|_| f64::from_bits(F64_POOL[idx() % F64_POOL.len()])).collect()),
        t => panic!("no pool column of {t}"),
    }
}

/// Key columns `k0`, `k1`, ... of `types`, each with a validity bitmap when `null_fraction > 0`
/// (nulls drawn at that rate: possibly none).
fn pool_keys(rng: &mut StdRng, types: &[DataType], domain: usize, n: usize, null_fraction: f64) -> HostTable {
    let mut columns = Vec::new();
    for &ty in types {
        let c = pool_column(ty, rng, domain, n);
        columns.push(if null_fraction > 0.0 {
            let valid: Vec<bool> = (0..n).map(|_| !rng.gen_bool(null_fraction)).collect();
            c.with_validity(&valid).unwrap()
        } else {
            c
        });
    }
    key_table(columns)
}

const ALL_TYPES: [DataType; 6] = [DataType::Int32, DataType::Int64, DataType::UInt32, DataType::UInt64, DataType::Float32, DataType::Float64];

#[test]
fn composite_nullable_nan_keys_match_reference_under_every_option() {
    let Some(s) = stream("composite_nullable_nan_keys_match_reference_under_every_option") else { return };
    let _l = lock();
    let _t = Timed::start("composite_nullable_nan_keys_match_reference_under_every_option");
    let sizes = prop_oneof![1 => Just(0usize), 2 => 1usize..8, 6 => 8usize..400, 1 => 2000usize..5000];
    run(cases(40, 8), 0xA5_0002, (any::<u64>(), 1usize..=4, sizes.clone(), sizes, any::<bool>()), |(seed, ncols, nl, nr, weak)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let types: Vec<DataType> = (0..ncols).map(|_| ALL_TYPES[rng.gen_range(0..ALL_TYPES.len())]).collect();
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

use common::payloads::{expected_rows, payload, HostPayload, PType, Row, PTYPES};

/// The data type of a payload column of `ty`.
fn ptype_data_type(ty: PType) -> DataType {
    match ty {
        PType::I32 => DataType::Int32,
        PType::U32 => DataType::UInt32,
        PType::F32 => DataType::Float32,
        PType::I64 => DataType::Int64,
        PType::U64 => DataType::UInt64,
        PType::F64 => DataType::Float64,
    }
}

/// A payload as a host column of its type, holding exactly its bits.
fn payload_column(p: &HostPayload) -> HostColumn {
    use HostColumn as H;
    let b = &p.bits;
    match p.ty {
        PType::I32 => H::from_values(b.iter().map(|&x| x as u32 as i32).collect()),
        PType::U32 => H::from_values(b.iter().map(|&x| x as u32).collect()),
        PType::F32 => H::from_values(b.iter().map(|&x| f32::from_bits(x as u32)).collect()),
        PType::I64 => H::from_values(b.iter().map(|&x| x as i64).collect()),
        PType::U64 => H::from_values(b.clone()),
        PType::F64 => H::from_values(b.iter().map(|&x| f64::from_bits(x)).collect()),
    }
}

/// The key columns of `keys` and the payload columns `<prefix>0`, `<prefix>1`, ... in one table.
fn with_payloads(keys: &HostTable, payloads: &[HostPayload], prefix: &str) -> (HostTable, Vec<String>) {
    let mut columns: Vec<(String, HostColumn)> = keys.names().iter().cloned().zip(keys.columns().iter().cloned()).collect();
    let names: Vec<String> = (0..payloads.len()).map(|c| format!("{prefix}{c}")).collect();
    columns.extend(names.iter().cloned().zip(payloads.iter().map(payload_column)));
    (HostTable::new(columns).unwrap(), names)
}

/// The output rows of one side's selected columns (`names`, of `cols`' types) as payload tuples
/// (`None` for a null row), checking types, lengths, that a validity bitmap is present exactly
/// where the side can be null, that the columns of a side agree on which rows are null, and that
/// null rows hold zero.
fn side_rows(t: &HostTable, names: &[String], cols: &[HostPayload], rows: usize, nullable: bool, what: &str) -> Result<Vec<Row>, TestCaseError> {
    let mut got: Vec<(&HostColumn, Vec<u64>)> = Vec::new();
    for (name, p) in names.iter().zip(cols) {
        let c = t.column(name).map_err(|e| fail(format!("{what}: column {name}: {e}")))?;
        prop_assert_eq!(c.data_type(), ptype_data_type(p.ty), "{}: column {} type", what, name);
        prop_assert_eq!(c.len(), rows, "{}: column {} rows", what, name);
        prop_assert_eq!(c.validity_buffer().is_some(), nullable, "{}: column {}: validity present", what, name);
        got.push((c, table_keys::raw_bits(c)));
    }
    let mut out = Vec::with_capacity(rows);
    for k in 0..rows {
        let valid = got.first().is_none_or(|(c, _)| c.is_valid(k));
        for (c, (col, v)) in got.iter().enumerate() {
            prop_assert_eq!(col.is_valid(k), valid, "{}: row {} is null in some columns of a side only (column {})", what, k, c);
            if !valid {
                prop_assert_eq!(v[k], 0, "{}: null row {} holds a value in column {}", what, k, c);
            }
        }
        out.push(if valid { got.iter().map(|(_, v)| Some(v[k])).collect() } else { vec![None; cols.len()] });
    }
    Ok(out)
}

/// Runs PHJ-UM or PHJ-OM (`gather`) selecting every payload column of the sides the join type
/// returns, and compares the output table with host gathers of the reference pairs (and, where
/// returned, the maps with the reference pairs). `ranks`: the front door is expected to join the
/// keys as ranks (its reason says so), or not.
#[allow(clippy::too_many_arguments)]
fn check_payload_join(
    s: &Stream,
    l: &HostTable,
    lp: &[HostPayload],
    r: &HostTable,
    rp: &[HostPayload],
    jt: JoinType,
    opts: Opts,
    gather: Gather,
    ranks: bool,
    what: &str,
) -> Result<(), TestCaseError> {
    let what = format!("{gather:?} {jt:?} {opts:?} {what}");
    let want_pairs = reference(l, r, jt, opts);
    let ((lt, ln), (rt, rn)) = (with_payloads(l, lp, "lp"), with_payloads(r, rp, "rp"));
    let ln: Vec<String> = if jt.has_left_map() { ln } else { vec![] };
    let rn: Vec<String> = if jt.has_right_map() { rn } else { vec![] };
    let (dl, dr) = (up(s, &lt), up(s, &rt));
    poison_for(s, l.rows() + r.rows());
    let (lk, rk) = (key_names(l), key_names(r));
    let (ls, rs): (Vec<&str>, Vec<&str>) = (ln.iter().map(String::as_str).collect(), rn.iter().map(String::as_str).collect());
    let algorithm = Algorithm::PartitionedHash(gather);
    let out = opts
        .apply(Join::new(jt).on(&dl, &lk, &dr, &rk))
        .algorithm(algorithm)
        .select(&ls, &rs)
        .run(s)
        .map_err(|e| fail(format!("{what}: error {e}{}", describe(l, r))))?;
    prop_assert_eq!(out.algorithm, algorithm, "{}: ran {} ({})", what, out.algorithm.name(), out.reason);
    prop_assert_eq!(out.reason.contains(RANKS), ranks, "{}: keys joined as ranks: reason {}", what, out.reason);
    prop_assert_eq!(out.rows, want_pairs.len() as u64, "{}: rows{}", what, describe(l, r));
    let rows = out.rows as usize;
    if let Some(maps) = &out.maps {
        let got = canonical_pairs(maps, jt)?;
        if got != want_pairs {
            return Err(fail(format!("{what}: maps: {}{}", diff(&got, &want_pairs), describe(l, r))));
        }
    } else {
        prop_assert_eq!(gather, Gather::Clustered, "{}: UM returns its maps", what);
    }
    let table = out.table.to_host().map_err(|e| fail(format!("{what}: reading the table: {e}")))?;
    let names: Vec<String> = ln.iter().chain(&rn).cloned().collect();
    prop_assert_eq!(table.names(), names.as_slice(), "{}: output columns", what);
    prop_assert_eq!(table.rows(), if names.is_empty() { 0 } else { rows }, "{}: table rows", what);
    let lrows = if jt.has_left_map() { side_rows(&table, &ln, lp, rows, jt.keeps_unmatched_right(), &format!("{what} left"))? } else { vec![vec![]; rows] };
    let rrows = if jt.has_right_map() { side_rows(&table, &rn, rp, rows, jt.keeps_unmatched_left(), &format!("{what} right"))? } else { vec![vec![]; rows] };
    let mut got: Vec<Row> = lrows.into_iter().zip(rrows).map(|(mut a, b)| {
        a.extend(b);
        a
    }).collect();
    got.sort();
    let want = expected_rows(&want_pairs, lp, rp, jt);
    if got != want {
        let k = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        return Err(fail(format!("{what}: output rows differ from host gathers at sorted row {k}: {:?} vs {:?}{}", got.get(k), want.get(k), describe(l, r))));
    }
    Ok(())
}

/// `datagen::composite_keys(keys, 3)` as host columns: `UInt32(k)`, `UInt64(k * golden ratio)`,
/// `Int32(!k)` (96 bits: more than 64).
fn composite3(keys: &[u32]) -> HostTable {
    key_table(vec![
        HostColumn::from_values(keys.to_vec()),
        HostColumn::from_values(keys.iter().map(|&k| u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect()),
        HostColumn::from_values(keys.iter().map(|&k| !k as i32).collect()),
    ])
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
        // Key columns: 4- or 8-byte integers (raw), floats (images), nullable or 3-column composites
        // (the latter two: PHJ-OM joins them as ranks, see below).
        let (l, r, opts) = match kind {
            0 => (single(column(DataType::UInt32, &lc, spread)), single(column(DataType::UInt32, &rc, spread)), DEFAULT),
            1 => (single(column(DataType::Int64, &lc, spread)), single(column(DataType::Int64, &rc, spread)), DEFAULT),
            2 => {
                let l = column(DataType::Float64, &lc, spread);
                let r = column(DataType::Float64, &rc, spread);
                let vl: Vec<bool> = (0..l.len()).map(|_| rng.gen_bool(0.9)).collect();
                let vr: Vec<bool> = (0..r.len()).map(|_| rng.gen_bool(0.8)).collect();
                (single(l.with_validity(&vl).unwrap()), single(r.with_validity(&vr).unwrap()), ALL_OPTIONS[rng.gen_range(0..4)])
            }
            _ => {
                let lk: Vec<u32> = lc.iter().map(|&c| c as u32).collect();
                let rk: Vec<u32> = rc.iter().map(|&c| c as u32).collect();
                (composite3(&lk), composite3(&rk), DEFAULT)
            }
        };
        let lp: Vec<HostPayload> = (0..ncl).map(|c| payload(PTYPES[rng.gen_range(0..6)], l.rows(), 100 + c as u64)).collect();
        let rp: Vec<HostPayload> = (0..ncr).map(|c| payload(PTYPES[rng.gen_range(0..6)], r.rows(), 200 + c as u64)).collect();
        for gather in [Gather::Unclustered, Gather::Clustered] {
            for jt in JoinType::ALL {
                for &(bits, split) in &TUNINGS[..2] {
                    let what = format!("shape {shape:?} key kind {kind} spread {spread}, {ncl} + {ncr} payloads, tuning {bits}/{split}");
                    // Key columns PHJ-OM cannot compare as they are (three: 96 bits; a nullable
                    // f64 under either null equality) are joined as ranks by the front door,
                    // never refused and never a silent PHJ-UM.
                    let ranks = gather == Gather::Clustered && kind >= 2;
                    check_payload_join(&s, &l, &lp, &r, &rp, jt, tuned(opts, bits, split), gather, ranks, &what)?;
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
    let (ha, hb) = (single(HostColumn::from_values(a.clone())), single(HostColumn::from_values(b.clone())));
    for algo in algos() {
        for jt in JoinType::ALL {
            let first = gpu_maps(&s, algo, &ha, &hb, jt, DEFAULT).unwrap().pairs().unwrap();
            let second = gpu_maps(&s, algo, &ha, &hb, jt, DEFAULT).unwrap().pairs().unwrap();
            assert_eq!(first.len(), second.len(), "{algo:?} {jt:?}");
            assert!(first == second, "{algo:?} {jt:?}: the two runs differ in order or content");
            let want = reference(&ha, &hb, jt, DEFAULT);
            let mut got = first;
            got.sort_unstable();
            assert_eq!(got, want, "{algo:?} {jt:?}");
        }
    }
    // PHJ-OM payload columns, in order.
    let pa: Vec<u64> = (0..a.len() as u64).map(|i| i * 3 + 1).collect();
    let pb: Vec<f32> = (0..b.len()).map(|i| i as f32 * 0.5).collect();
    let ta = up(&s, &HostTable::new(vec![("k", HostColumn::from_values(a.clone())), ("pa", HostColumn::from_values(pa))]).unwrap());
    let tb = up(&s, &HostTable::new(vec![("k", HostColumn::from_values(b.clone())), ("pb", HostColumn::from_values(pb))]).unwrap());
    for jt in [JoinType::Inner, JoinType::Full, JoinType::LeftSemi] {
        let once = || -> (Vec<u64>, Vec<u64>) {
            poison_for(&s, 30_000);
            let rs: &[&str] = if jt.has_right_map() { &["pb"] } else { &[] };
            let out = DEFAULT.apply(Join::new(jt).on(&ta, &["k"], &tb, &["k"])).algorithm(PHJ_OM).select(&["pa"], rs).run(&s).unwrap();
            assert_eq!(out.algorithm, PHJ_OM, "{jt:?}: {}", out.reason);
            let t = out.table.to_host().unwrap();
            let l = table_keys::raw_bits(t.column("pa").unwrap());
            let r = t.column("pb").map_or(vec![], table_keys::raw_bits);
            (l, r)
        };
        assert!(once() == once(), "PHJ-OM {jt:?}: the two runs differ");
    }
}

/// An inner join of the `k` columns of `l` and `r` by `algorithm`, with statistics; PHJ-OM
/// carries the keys as one payload column a side (its statistics are those of the partitioning
/// and the match, which depend on the keys alone), the others give maps only.
fn with_stats(s: &Stream, algorithm: Algorithm, l: &Table, r: &Table) -> JoinOutput {
    let select: &[&str] = if algorithm == PHJ_OM { &["k"] } else { &[] };
    let out = DEFAULT.apply(Join::new(JoinType::Inner).on(l, &["k"], r, &["k"])).algorithm(algorithm).select(select, select).with_stats().run(s).unwrap();
    assert_eq!(out.algorithm, algorithm, "{}", out.reason);
    assert!(out.stats.is_some(), "{}: statistics asked for", algorithm.name());
    out
}

#[test]
fn stats_report_phases_and_partitioning() {
    let Some(s) = stream("stats_report_phases_and_partitioning") else { return };
    let _l = lock();
    let _t = Timed::start("stats_report_phases_and_partitioning");
    // Full size also when reduced: the statistics asserted are those of 2^18 build rows.
    let r = datagen::shuffled_dense_keys(1 << 18, 1).unwrap();
    let f = datagen::foreign_keys_uniform(1 << 18, 1 << 19, 2).unwrap();
    let (tr, tf) = (up(&s, &single(HostColumn::from_values(r.clone()))), up(&s, &single(HostColumn::from_values(f.clone()))));
    // The partitioning statistics: PHJ-OM runs PHJ-UM's partitioning and match and reports
    // them (the front door's PHJ-UM and non-partitioned join report phase times and peak only).
    let out = with_stats(&s, PHJ_OM, &tr, &tf);
    let st = out.stats.unwrap();
    assert_eq!(out.rows, 1 << 19);
    assert_eq!(st.partition_bits, 8, "2^18 build rows at ~1024 per partition");
    assert_eq!(st.build_side, Some(Side::Left));
    assert!(!st.mixed_keys, "dense keys partition well on their own bits");
    assert!(st.single_pass, "an inner PK-FK join takes the single pass");
    assert!(st.work_items >= 256, "{st:?}");
    assert!(st.transform_ms > 0.0 && st.match_ms > 0.0 && st.materialize_ms >= 0.0, "{st:?}");
    assert!((st.total_ms - (st.transform_ms + st.match_ms + st.materialize_ms)).abs() < 1e-3, "{st:?}");
    assert!(st.peak_memory_bytes >= ((1u64 << 18) + (1 << 19)) * 4, "{st:?}");
    // PHJ-UM and the non-partitioned join: their maps, and their own statistics passed through
    // the front door (partitioning, build side, phases; the key preparation counts as transform).
    for algorithm in [PHJ_UM, Algorithm::Hash] {
        let out = with_stats(&s, algorithm, &tr, &tf);
        let st = out.stats.unwrap();
        assert_eq!(out.maps.as_ref().unwrap().rows(), 1 << 19);
        let partitioned = algorithm == PHJ_UM;
        assert_eq!(st.partition_bits, if partitioned { 8 } else { 0 }, "{}: {st:?}", algorithm.name());
        assert_eq!(st.build_side, Some(Side::Left), "{}: {st:?}", algorithm.name());
        if partitioned {
            assert!(st.single_pass && st.work_items >= 256 && !st.mixed_keys, "{st:?}");
        }
        assert!(st.match_ms > 0.0 && st.transform_ms > 0.0 && st.materialize_ms >= 0.0, "{}: {st:?}", algorithm.name());
        assert!((st.total_ms - (st.transform_ms + st.match_ms + st.materialize_ms)).abs() < 1e-3, "{}: {st:?}", algorithm.name());
        assert!(st.peak_memory_bytes >= (1u64 << 19) * 8, "{}: the maps alone: {st:?}", algorithm.name());
    }
    // Duplicate build keys: the speculative single pass gives up, the two passes run.
    let g = datagen::foreign_keys_uniform(1 << 18, 1 << 19, 3).unwrap();
    let tg = up(&s, &single(HostColumn::from_values(g.clone())));
    let out = with_stats(&s, PHJ_OM, &tf, &tg);
    assert!(!out.stats.unwrap().single_pass);
    let (hf, hg) = (single(HostColumn::from_values(f.clone())), single(HostColumn::from_values(g)));
    let want = table_keys::join_count(&hf, &["k"], &hg, &["k"], JoinType::Inner, DEFAULT.nulls, DEFAULT.nans);
    assert_eq!(out.rows, want);
    assert_eq!(out.rows, 1 << 20);
    let um = with_stats(&s, PHJ_UM, &tf, &tg);
    assert_eq!(um.maps.as_ref().unwrap().rows(), want);
    // Key values crowding one partition on their low bits are mixed.
    let crowded: Vec<u64> = r.iter().map(|&k| (k as u64) << 32).collect();
    let fc: Vec<u64> = f.iter().map(|&k| (k as u64) << 32).collect();
    let (tc, tfc) = (up(&s, &single(HostColumn::from_values(crowded))), up(&s, &single(HostColumn::from_values(fc))));
    let out = with_stats(&s, PHJ_OM, &tc, &tfc);
    assert!(out.stats.unwrap().mixed_keys);
    assert_eq!(out.rows, 1 << 19);
    assert_eq!(with_stats(&s, PHJ_UM, &tc, &tfc).maps.unwrap().rows(), 1 << 19);
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
    // And 8-byte payloads (PHJ-OM partitions the keys alone, then every column).
    let widen = |k: &[u32]| -> Vec<u64> { k.iter().map(|&x| (x as u64) << 32 | 0x5A).collect() };
    let mut want: Vec<u64> = f.iter().map(|&x| x as u64).collect();
    want.sort_unstable();
    let side = |k: &[u32], p: HostColumn| up(&s, &HostTable::new(vec![("k", HostColumn::from_values(k.to_vec())), ("p", p)]).unwrap());
    let payload_sets: [(&str, Table, Table); 2] = [
        ("4-byte", side(&r, HostColumn::from_values(r.clone())), side(&f, HostColumn::from_values(f.clone()))),
        ("8-byte", side(&r, HostColumn::from_values(widen(&r))), side(&f, HostColumn::from_values(widen(&f)))),
    ];
    for (what, lt, rt) in &payload_sets {
        let mut peaks = Vec::new();
        for gather in [Gather::Unclustered, Gather::Clustered] {
            s.synchronize().unwrap();
            let algorithm = Algorithm::PartitionedHash(gather);
            let out = DEFAULT.apply(Join::new(JoinType::Inner).on(lt, &["k"], rt, &["k"])).algorithm(algorithm).select(&["p"], &["p"]).with_stats().run(&s).unwrap();
            assert_eq!(out.algorithm, algorithm, "{}", out.reason);
            assert_eq!(out.rows, ns as u64);
            // Payloads are functions of the keys: every output row pairs equal values, and the
            // right column holds every right row's payload once.
            let t = out.table.to_host().unwrap();
            let l = table_keys::raw_bits(t.column("left.p").unwrap());
            let rr = table_keys::raw_bits(t.column("right.p").unwrap());
            assert!(l == rr, "{what} {gather:?}: rows pair unequal keys");
            let mut keys: Vec<u64> = rr.iter().map(|&x| if *what == "8-byte" { x >> 32 } else { x }).collect();
            keys.sort_unstable();
            assert!(keys == want, "{what} {gather:?}: the right column is not the right side's payloads");
            let st = out.stats.unwrap();
            println!("{what} {gather:?}: {st:?}");
            peaks.push(st.peak_memory_bytes);
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
    for eight in [false, true] {
        // The key column as each side's payloads: one on the left, two on the right.
        let col = |k: &[u32]| if eight { HostColumn::from_values(k.iter().map(|&k| k as u64 * 3).collect()) } else { HostColumn::from_values(k.to_vec()) };
        let lt = up(&s, &HostTable::new(vec![("k", col(&r)), ("p", col(&r))]).unwrap());
        let rt = up(&s, &HostTable::new(vec![("k", col(&f)), ("p1", col(&f)), ("p2", col(&f))]).unwrap());
        for gather in [Gather::Unclustered, Gather::Clustered] {
            for jt in [JoinType::Inner, JoinType::Right] {
                let algorithm = Algorithm::PartitionedHash(gather);
                let out = DEFAULT.apply(Join::new(jt).on(&lt, &["k"], &rt, &["k"])).algorithm(algorithm).select(&["p"], &["p1", "p2"]).run(&s);
                let out = out.unwrap();
                assert_eq!(out.algorithm, algorithm, "{}", out.reason);
                let want = if jt == JoinType::Inner { hits } else { ns as u64 };
                assert_eq!(out.rows, want, "{gather:?} {jt:?} 8-byte {eight}");
                let t = out.table.to_host().unwrap();
                let lc = t.column("p").unwrap();
                let l = table_keys::raw_bits(lc);
                let rr = table_keys::raw_bits(t.column("p1").unwrap());
                assert!(rr == table_keys::raw_bits(t.column("p2").unwrap()), "{gather:?} {jt:?}: the two right columns differ");
                let mut matched = 0u64;
                for k in 0..out.rows as usize {
                    if lc.is_valid(k) {
                        assert_eq!(l[k], rr[k], "{gather:?} {jt:?}: row {k} pairs unequal keys");
                        matched += 1;
                    }
                }
                assert_eq!(matched, hits, "{gather:?} {jt:?} 8-byte {eight}");
            }
        }
        let out = DEFAULT.apply(Join::new(JoinType::Inner).on(&lt, &["k"], &rt, &["k"])).algorithm(Algorithm::Hash).run(&s).unwrap();
        assert_eq!(out.algorithm, Algorithm::Hash);
        assert_eq!(out.maps.unwrap().rows(), hits);
    }
}

#[test]
fn bad_arguments_are_errors() {
    let Some(s) = stream("bad_arguments_are_errors") else { return };
    let _l = lock();
    let _t = Timed::start("bad_arguments_are_errors");
    let a = up(&s, &single(HostColumn::from_values(vec![1u32, 2, 3])));
    let b = up(&s, &single(HostColumn::from_values(vec![1u64, 2])));
    for algorithm in [PHJ_UM, PHJ_OM, Algorithm::Hash] {
        let r = Join::new(JoinType::Inner).on(&a, &["k"], &b, &["k"]).algorithm(algorithm).run(&s);
        assert!(matches!(&r, Err(Error::TypeMismatch { .. })), "{}: key types differ: {:?}", algorithm.name(), r.as_ref().err());
    }
    // A payload column shorter than its keys: no table holds one.
    let keys = Column::upload(&s, &HostColumn::from_values(vec![1u32, 2, 3])).unwrap();
    let short = Column::upload(&s, &HostColumn::from_values(vec![1i32, 2])).unwrap();
    assert!(matches!(Table::new(vec![("k", keys), ("p", short)]), Err(Error::InvalidArgument(_))), "a payload column shorter than its keys");
    assert!(matches!(HostTable::new(vec![("k", HostColumn::from_values(vec![1u32, 2, 3])), ("p", HostColumn::from_values(vec![1i32, 2]))]), Err(Error::InvalidArgument(_))));
    // PHJ-OM of keys it cannot compare as they are (three 4-byte columns: 96 bits > 64): joined
    // as ranks, saying so, never a silent PHJ-UM; PHJ-UM serves them, and PHJ-OM serves two
    // columns (64 bits, packed exactly) as they are.
    let t = up(
        &s,
        &HostTable::new(vec![
            ("c0", HostColumn::from_values(vec![1u32, 2, 3])),
            ("c1", HostColumn::from_values(vec![4u32, 5, 6])),
            ("c2", HostColumn::from_values(vec![7u32, 8, 9])),
            ("p", HostColumn::from_values(vec![10i32, 20, 30])),
        ])
        .unwrap(),
    );
    let (wide, two): (&[&str], &[&str]) = (&["c0", "c1", "c2"], &["c0", "c1"]);
    for jt in JoinType::ALL {
        let (ls, rs): (&[&str], &[&str]) = (if jt.has_left_map() { &["p"] } else { &[] }, if jt.has_right_map() { &["p"] } else { &[] });
        let go = |keys: &[&str], algorithm| {
            let out = DEFAULT.apply(Join::new(jt).on(&t, keys, &t, keys)).algorithm(algorithm).select(ls, rs).run(&s).unwrap();
            assert_eq!(out.algorithm, algorithm, "{jt:?}: {}", out.reason);
            out
        };
        let om_wide = go(wide, PHJ_OM);
        assert!(om_wide.reason.contains(RANKS), "{jt:?}: hashed keys: {}", om_wide.reason);
        let um = go(wide, PHJ_UM);
        let om = go(two, PHJ_OM);
        assert!(!om.reason.contains(RANKS), "{jt:?}: two columns: {}", om.reason);
        assert_eq!(um.rows, om.rows, "{jt:?}: every row matches itself");
        assert_eq!(om_wide.rows, om.rows, "{jt:?}: every row matches itself");
    }
}

#[test]
fn documentation_examples_hold() {
    let Some(s) = stream("documentation_examples_hold") else { return };
    let _l = lock();
    let _t = Timed::start("documentation_examples_hold");
    let r = up(&s, &single(HostColumn::from_values(vec![3u32, 1, 2])));
    let f = up(&s, &single(HostColumn::from_values(vec![2u32, 2, 3, 9])));
    let out = Join::new(JoinType::Inner).on(&r, &["k"], &f, &["k"]).algorithm(PHJ_UM).run(&s).unwrap();
    let mut pairs = out.maps.unwrap().pairs().unwrap();
    pairs.sort();
    let id = |i| RowId::new(i).unwrap();
    assert_eq!(pairs, vec![(id(0), id(2)), (id(2), id(0)), (id(2), id(1))]);
    let a = up(&s, &single(HostColumn::from_values(vec![5i64, 7])));
    let b = up(&s, &single(HostColumn::from_values(vec![7i64, 7, 8])));
    let out = Join::new(JoinType::Full).on(&a, &["k"], &b, &["k"]).algorithm(Algorithm::Hash).run(&s).unwrap();
    assert_eq!(out.maps.unwrap().rows(), 4);
    let rt = up(&s, &HostTable::new(vec![("rk", HostColumn::from_values(vec![1u32, 2, 3])), ("price", HostColumn::from_values(vec![10.0f64, 20.0, 30.0]))]).unwrap());
    let st = up(&s, &HostTable::new(vec![("sk", HostColumn::from_values(vec![3u32, 3, 1])), ("qty", HostColumn::from_values(vec![7i32, 8, 9]))]).unwrap());
    let out = Join::new(JoinType::Inner).on(&rt, &["rk"], &st, &["sk"]).algorithm(PHJ_OM).select(&["price"], &["qty"]).run(&s).unwrap();
    assert_eq!(out.rows, 3);
    let t = out.table.to_host().unwrap();
    let price = t.column("price").unwrap();
    assert_eq!(price.data_type(), DataType::Float64);
    let mut p: Vec<f64> = table_keys::raw_bits(price).into_iter().map(f64::from_bits).collect();
    p.sort_by(f64::total_cmp);
    assert_eq!(p, vec![10.0, 30.0, 30.0]);
}

/// Runs without a GPU: the hash-based reference of these tests (`table_keys::join`) agrees with
/// the quadratic `table_reference::join` of the testkit on the key columns the GPU tests join
/// (every shape, key type and option; composite, nullable and NaN keys; every join type).
#[test]
fn table_keys_reference_agrees_with_table_reference() {
    use gpujoin_testkit::table_reference;
    let check = |l: &HostTable, r: &HostTable, opts: Opts, what: &str| {
        let (lk, rk) = (key_names(l), key_names(r));
        for jt in JoinType::ALL {
            let mine = table_keys::as_options(&reference(l, r, jt, opts));
            let theirs = table_reference::join(l, &lk, r, &rk, None, jt, opts.nulls, opts.nans);
            assert!(mine == theirs, "{what} {jt:?} {opts:?}: {} pairs against {}", mine.len(), theirs.len());
            assert_eq!(table_keys::join_count(l, &lk, r, &rk, jt, opts.nulls, opts.nans), theirs.len() as u64, "{what} {jt:?}");
        }
    };
    let p = ShapeParams { seed: 5, small: 7, mid: 150, big: 300 };
    for shape in SHAPES {
        if shape == Shape::BigGroups {
            continue; // thousands of rows: quadratic
        }
        let (lc, rc) = shape_codes(shape, &p);
        for ty in ALL_TYPES {
            check(&single(column(ty, &lc, true)), &single(column(ty, &rc, false)), DEFAULT, &format!("{shape:?} {ty}"));
        }
    }
    let mut rng = StdRng::seed_from_u64(0xA5_0004);
    for k in 0..60 {
        let types: Vec<DataType> = (0..1 + k % 4).map(|_| ALL_TYPES[rng.gen_range(0..ALL_TYPES.len())]).collect();
        let domain = rng.gen_range(1..12);
        let nulls = [0.0, 0.1, 0.5][k % 3];
        let (nl, nr) = (rng.gen_range(0..120), rng.gen_range(0..120));
        let (l, r) = (pool_keys(&mut rng, &types, domain, nl, nulls), pool_keys(&mut rng, &types, domain, nr, nulls));
        check(&l, &r, ALL_OPTIONS[k % 4], &format!("pool {types:?} nulls {nulls}"));
    }
    let l = composite3(&[1, 2, 2, 5]);
    let r = composite3(&[2, 5, 5, 7]);
    check(&l, &r, DEFAULT, "composite");
}
