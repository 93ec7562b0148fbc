//! Property tests of every join algorithm against the CPU reference (`reference::join`).
//!
//! They run on the GPU when one is present, print `SKIPPED` when none is, and fail loudly with
//! GPUJOIN_REQUIRE_GPU=1. Seeds are fixed so failures reproduce; the device pool is poisoned
//! before each join so that an internal buffer a kernel forgets to write shows up as garbage.
//!
//! Results compare as sorted multisets of `(left row, right row)` pairs, except where the order
//! is part of the contract: `sorted_merge_join` documents ModernGPU's order (by A, then B;
//! unmatched B rows last in B order; semi/anti rows in A or B order), which is exactly the
//! reference's canonical order, so its output is also compared in order.
//!
//! Two test-only options of the join calls (`JoinOptions::testing`, the feature `testing`) force
//! what small inputs would not reach: `hash_mask` keeps 2 bits of every hashed key (a composite
//! wider than 64 bits for the sort-merge join, wider than 63 bits for the interleave join, which
//! includes single 64-bit columns), so that candidate matches collide massively
//! ([`weak_hash`]); `force_general_merge_path` makes the merge join skip its fused per-tile path
//! ([`MergePath`]). They apply to the call that carries them only.
//!
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer property cases and the large
//! test at 2^18 rows (thousands of merge-path tiles); the 2^32-pair size count keeps its 2^16
//! rows a side.

mod common;
use common::{canonical_pairs, diff, fail, stream, uniform};

use std::cell::Cell;

use gpujoin_device::testing::{cases, pick, reduced, rows};

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Pod, Stream};
use gpujoin_join::chunked::{join_chunks, ChunkBudget};
use gpujoin_join::{
    interleave_join, interleave_join_many, materialize, materialize_unchecked, sort_merge_join, sort_merge_join_size, sorted_merge_join,
    sorted_merge_join_with, DeviceColumn, DeviceKeys, GatherMaps, HostColumn, HostKeys, JoinOptions, JoinType, KeyColumn, KeyType, Keys,
    NanEquality, NullEquality, Payload, RowId, Side, SortedKey, TestingOptions,
};
use gpujoin_testkit::datagen;
use gpujoin_testkit::reference::{self, vectors};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

const POISON: u8 = 0xAB;

/// `opts` keeping only 2 bits of every hashed key (4 hash values: massive collisions).
fn weak_hash(opts: JoinOptions) -> JoinOptions {
    JoinOptions { testing: TestingOptions { hash_mask: 0b11, ..opts.testing }, ..opts }
}

/// Which path of the merge join a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MergePath {
    /// The library's choice: the fused per-tile path unless a tile's output is too large.
    Default,
    /// Always the general (load-balancing search) path.
    General,
}

impl MergePath {
    /// `opts` taking this path.
    fn opts(self, opts: JoinOptions) -> JoinOptions {
        JoinOptions { testing: TestingOptions { force_general_merge_path: self == MergePath::General, ..opts.testing }, ..opts }
    }
}

const MERGE_PATHS: [MergePath; 2] = [MergePath::Default, MergePath::General];

/// Fills recently freed pool memory with POISON, so internally allocated buffers that a kernel
/// fails to write show up as garbage rather than as stale correct-looking data.
fn poison_pool(s: &Stream, bytes: usize) {
    let mut b: DeviceBuffer<u8> = s.alloc(bytes.max(1)).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
}

fn poison_for(s: &Stream, rows: usize) {
    poison_pool(s, rows * 64 + (1 << 16));
}

fn run<S: Strategy>(cases: u32, seed: u64, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    });
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

const DEFAULT: JoinOptions =
    JoinOptions { null_equality: NullEquality::NullEqualsNothing, nan_equality: NanEquality::NanEqualsNan, ..JoinOptions::DEFAULT };

/// The four combinations of null and NaN equality.
const ALL_OPTIONS: [JoinOptions; 4] = [
    DEFAULT,
    JoinOptions { null_equality: NullEquality::NullEqualsNull, nan_equality: NanEquality::NanEqualsNan, ..JoinOptions::DEFAULT },
    JoinOptions { null_equality: NullEquality::NullEqualsNothing, nan_equality: NanEquality::NanNeverEqual, ..JoinOptions::DEFAULT },
    JoinOptions { null_equality: NullEquality::NullEqualsNull, nan_equality: NanEquality::NanNeverEqual, ..JoinOptions::DEFAULT },
];

const ALL_TYPES: [KeyType; 6] = [KeyType::I32, KeyType::I64, KeyType::U32, KeyType::U64, KeyType::F32, KeyType::F64];
const SORTED_TYPES: [KeyType; 4] = [KeyType::U32, KeyType::U64, KeyType::I32, KeyType::I64];

fn id(i: u32) -> RowId {
    RowId::new(i).unwrap()
}

/// The join types to check for the `i`-th combination of a case's loops (shape and type,
/// layout and option): all eight normally; under `GPUJOIN_TEST_SIZE=small` two of them,
/// rotating with `i`, so that any four consecutive combinations still cover all eight (a
/// sanitizer run cannot afford every combination times every join type).
fn join_types(i: usize) -> Vec<JoinType> {
    if reduced() {
        vec![JoinType::ALL[i % 8], JoinType::ALL[(i + 5) % 8]]
    } else {
        JoinType::ALL.to_vec()
    }
}

fn sorted(mut pairs: Vec<(RowId, RowId)>) -> Vec<(RowId, RowId)> {
    reference::sort_pairs(&mut pairs);
    pairs
}

// ---------------------------------------------------------------------------------------------
// Running a join and comparing it with the reference
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algo {
    /// `sorted_merge_join` (single sorted u32/u64/i32/i64 column, no nulls).
    SortedMerge,
    /// `sort_merge_join` (any keys).
    SortMerge,
    /// `interleave_join` (any keys).
    Interleave,
    /// `chunked::join_chunks` (any keys), with a budget of about a third of the output, the
    /// chunks' maps concatenated.
    Chunked,
}

/// `sorted_merge_join`, or `sorted_merge_join_with` when `opts` force something.
fn sorted_entry<K: SortedKey + Pod>(s: &Stream, a: &[K], b: &[K], jt: JoinType, opts: JoinOptions) -> gpujoin_device::Result<GatherMaps> {
    let (da, db) = (s.copy_from_host(a)?, s.copy_from_host(b)?);
    poison_for(s, a.len() + b.len());
    if opts.testing == TestingOptions::DEFAULT {
        sorted_merge_join(s, &da.view(), &db.view(), jt)
    } else {
        sorted_merge_join_with(s, &da.view(), &db.view(), jt, opts.testing)
    }
}

/// Runs `algo` on host keys (uploaded here).
fn gpu_join(s: &Stream, algo: Algo, l: &HostKeys, r: &HostKeys, jt: JoinType, opts: JoinOptions) -> gpujoin_device::Result<GatherMaps> {
    match algo {
        Algo::SortedMerge => {
            assert!(l.columns.len() == 1 && r.columns.len() == 1, "sorted_merge_join takes one column");
            assert!(l.validity[0].is_none() && r.validity[0].is_none(), "sorted_merge_join has no nulls");
            match (&l.columns[0], &r.columns[0]) {
                (HostColumn::U32(a), HostColumn::U32(b)) => sorted_entry(s, a, b, jt, opts),
                (HostColumn::U64(a), HostColumn::U64(b)) => sorted_entry(s, a, b, jt, opts),
                (HostColumn::I32(a), HostColumn::I32(b)) => sorted_entry(s, a, b, jt, opts),
                (HostColumn::I64(a), HostColumn::I64(b)) => sorted_entry(s, a, b, jt, opts),
                _ => panic!("sorted_merge_join takes u32/u64/i32/i64 columns of one type"),
            }
        }
        Algo::SortMerge | Algo::Interleave => {
            let (dl, dr) = (DeviceKeys::upload(s, l)?, DeviceKeys::upload(s, r)?);
            poison_for(s, l.rows() + r.rows());
            if algo == Algo::SortMerge {
                sort_merge_join(s, &dl.keys(), &dr.keys(), jt, opts)
            } else {
                interleave_join(s, &dl.keys(), &dr.keys(), jt, opts)
            }
        }
        Algo::Chunked => panic!("chunked joins come as chunks: see chunked_pairs"),
    }
}

/// The canonical pairs of any algorithm's output (every chunk of a chunked join).
fn gpu_pairs(s: &Stream, algo: Algo, l: &HostKeys, r: &HostKeys, jt: JoinType, opts: JoinOptions) -> Vec<(RowId, RowId)> {
    if algo == Algo::Chunked {
        return chunked_pairs(s, l, r, jt, opts).unwrap();
    }
    let maps = gpu_join(s, algo, l, r, jt, opts).unwrap();
    canonical_pairs(&maps, jt).unwrap_or_else(|e| panic!("{e}"))
}

/// The canonical pairs of `join_chunks` with a budget of about a third of the output, after
/// checking that the chunks' rows add up to the planned total.
fn chunked_pairs(s: &Stream, l: &HostKeys, r: &HostKeys, jt: JoinType, opts: JoinOptions) -> gpujoin_device::Result<Vec<(RowId, RowId)>> {
    let rows = reference::join_size(l, r, jt, opts).unwrap();
    let bytes_per_row = if jt.has_left_map() && jt.has_right_map() { 8 } else { 4 };
    let budget = ChunkBudget::Bytes(bytes_per_row * (rows / 3).max(1));
    let (dl, dr) = (DeviceKeys::upload(s, l)?, DeviceKeys::upload(s, r)?);
    poison_for(s, l.rows() + r.rows());
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let chunks = join_chunks(s, &dl.keys(), &dr.keys(), jt, opts, budget)?;
    let total = chunks.total_rows();
    for chunk in chunks {
        let (cl, cr) = chunk?.data.to_host()?;
        left.extend(cl);
        right.extend(cr);
    }
    assert_eq!(total, left.len().max(right.len()) as u64, "{jt:?}: the chunks' rows add up to the planned total");
    reference::try_pairs_from_maps(&left, &right, jt).map_err(|e| Error::invalid(format!("malformed chunk maps: {e}")))
}

fn describe(l: &HostKeys, r: &HostKeys) -> String {
    if l.rows() + r.rows() <= 48 {
        format!("\nleft {l:?}\nright {r:?}")
    } else {
        format!(" ({} x {} rows)", l.rows(), r.rows())
    }
}

/// Runs `algo` and compares with `reference::join` as a multiset; for `sorted_merge_join` also
/// the documented output order.
fn check_join(s: &Stream, algo: Algo, l: &HostKeys, r: &HostKeys, jt: JoinType, opts: JoinOptions, what: &str) -> Result<(), TestCaseError> {
    let want = reference::join(l, r, jt, opts).unwrap();
    let error = |e: Error| fail(format!("{algo:?} {jt:?} {opts:?} {what}: error {e}{}", describe(l, r)));
    if algo == Algo::Chunked {
        let got = chunked_pairs(s, l, r, jt, opts).map_err(error)?;
        if got != want {
            return Err(fail(format!("{algo:?} {jt:?} {opts:?} {what}: {}{}", diff(&got, &want), describe(l, r))));
        }
        return Ok(());
    }
    let maps = gpu_join(s, algo, l, r, jt, opts).map_err(error)?;
    let got = canonical_pairs(&maps, jt)?;
    if got != want {
        return Err(fail(format!("{algo:?} {jt:?} {opts:?} {what}: {}{}", diff(&got, &want), describe(l, r))));
    }
    if algo == Algo::SortedMerge {
        // ModernGPU's order is the canonical order.
        let in_order = maps.pairs().unwrap();
        if in_order != want {
            let k = in_order.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
            return Err(fail(format!(
                "{algo:?} {jt:?} {what}: right rows, wrong order: first difference at output row {k}: {:?} instead of {:?}",
                in_order.get(k),
                want.get(k)
            )));
        }
    }
    Ok(())
}

/// `sort_merge_join_size` equals `reference::join_size`.
fn check_size(s: &Stream, l: &HostKeys, r: &HostKeys, jt: JoinType, opts: JoinOptions, what: &str) -> Result<u64, TestCaseError> {
    let want = reference::join_size(l, r, jt, opts).unwrap();
    let (dl, dr) = (DeviceKeys::upload(s, l).unwrap(), DeviceKeys::upload(s, r).unwrap());
    poison_for(s, l.rows() + r.rows());
    let got = sort_merge_join_size(s, &dl.keys(), &dr.keys(), jt, opts)
        .map_err(|e| fail(format!("sort_merge_join_size {jt:?} {opts:?} {what}: error {e}")))?;
    prop_assert_eq!(got, want, "sort_merge_join_size {:?} {:?} {}{}", jt, opts, what, describe(l, r));
    Ok(want)
}

// ---------------------------------------------------------------------------------------------
// Data: shapes of single key columns
// ---------------------------------------------------------------------------------------------

/// Codes (small non-negative integers) as a key column of `ty`; injective, so equal codes and
/// only equal codes give equal keys. `spread` maps them over the whole range of the type
/// (sign bits, high bits) instead of small values.
fn column(ty: KeyType, codes: &[u64], spread: bool) -> HostColumn {
    debug_assert!(codes.iter().all(|&c| c < 1 << 22));
    match (ty, spread) {
        (KeyType::U32, false) => HostColumn::U32(codes.iter().map(|&c| c as u32).collect()),
        (KeyType::U32, true) => HostColumn::U32(codes.iter().map(|&c| (c as u32).wrapping_mul(0x9E37_79B1)).collect()),
        (KeyType::I32, false) => HostColumn::I32(codes.iter().map(|&c| c as i32 - 1000).collect()),
        (KeyType::I32, true) => HostColumn::I32(codes.iter().map(|&c| (c as u32).wrapping_mul(0x9E37_79B1) as i32).collect()),
        (KeyType::U64, false) => HostColumn::U64(codes.to_vec()),
        (KeyType::U64, true) => HostColumn::U64(codes.iter().map(|&c| c.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect()),
        (KeyType::I64, false) => HostColumn::I64(codes.iter().map(|&c| c as i64 - 1000).collect()),
        (KeyType::I64, true) => HostColumn::I64(codes.iter().map(|&c| c.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64).collect()),
        (KeyType::F32, false) => HostColumn::F32(codes.iter().map(|&c| c as f32 * 0.5 - 100.0).collect()),
        (KeyType::F32, true) => {
            HostColumn::F32(codes.iter().map(|&c| if c % 2 == 1 { -(c as f32) * 1.0e20 } else { c as f32 * 1.0e-20 }).collect())
        }
        (KeyType::F64, false) => HostColumn::F64(codes.iter().map(|&c| c as f64 * 0.25 - 1000.0).collect()),
        (KeyType::F64, true) => {
            HostColumn::F64(codes.iter().map(|&c| if c % 2 == 1 { -(c as f64) * 1.0e200 } else { c as f64 * 1.0e-200 }).collect())
        }
    }
}

fn sort_column(c: &mut HostColumn) {
    match c {
        HostColumn::I32(v) => v.sort_unstable(),
        HostColumn::I64(v) => v.sort_unstable(),
        HostColumn::U32(v) => v.sort_unstable(),
        HostColumn::U64(v) => v.sort_unstable(),
        HostColumn::F32(v) => v.sort_by(|a, b| a.total_cmp(b)),
        HostColumn::F64(v) => v.sort_by(|a, b| a.total_cmp(b)),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// ~200 rows per side over 5 keys: Cartesian blow-up.
    DuplicateHeavy,
    EmptyLeft,
    EmptyRight,
    EmptyBoth,
    OneRowLeft,
    OneRowRight,
    OneRowBoth,
    /// Disjoint key domains (even / odd).
    NoMatches,
    /// Every row of both sides has the same key.
    OneKey,
    /// Zipf-skewed keys (datagen::zipf_keys).
    Zipf,
    /// Sizes around powers of two and tile sizes.
    OddSizes,
    /// Up to 20k rows per side over a random domain.
    Random,
    /// A few left rows per key, runs of hundreds to thousands of right rows per key: runs that
    /// cross merge-path tiles while each tile's output stays small.
    LongRuns,
}

const SHAPES: [Shape; 13] = [
    Shape::DuplicateHeavy,
    Shape::EmptyLeft,
    Shape::EmptyRight,
    Shape::EmptyBoth,
    Shape::OneRowLeft,
    Shape::OneRowRight,
    Shape::OneRowBoth,
    Shape::NoMatches,
    Shape::OneKey,
    Shape::Zipf,
    Shape::OddSizes,
    Shape::Random,
    Shape::LongRuns,
];

/// Parameters of one property-test case: every shape is built from them.
#[derive(Debug, Clone, Copy)]
struct ShapeParams {
    seed: u64,
    small: usize,
    mid: usize,
    big: usize,
}

/// Reduced (`GPUJOIN_TEST_SIZE=small`): `mid` and `big` shrink to a few thousand rows, still
/// crossing the merge-path tiles (2048 items) and the single-tile sorts (4864 items).
fn shape_params() -> impl Strategy<Value = ShapeParams> {
    let (mid, big) = pick((200usize..2000, 2000usize..20_000), (200usize..700, 2000usize..5000));
    (any::<u64>(), 2usize..64, mid, big).prop_map(|(seed, small, mid, big)| ShapeParams { seed, small, mid, big })
}

/// Left and right key codes of `shape`.
fn shape_codes(shape: Shape, p: &ShapeParams) -> (Vec<u64>, Vec<u64>) {
    let mut rng = StdRng::seed_from_u64(p.seed ^ (shape as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let coin = p.seed & 1 == 1;
    match shape {
        Shape::DuplicateHeavy => {
            let (nl, nr) = (150 + p.small, 200 - p.small / 2);
            (uniform(&mut rng, nl, 5), uniform(&mut rng, nr, 5))
        }
        Shape::EmptyLeft => (vec![], uniform(&mut rng, p.mid, p.mid as u64)),
        Shape::EmptyRight => (uniform(&mut rng, p.mid, p.mid as u64), vec![]),
        Shape::EmptyBoth => (vec![], vec![]),
        Shape::OneRowLeft => {
            let r = uniform(&mut rng, p.small, 4);
            // The one row's key occurs on the right (several times) or not at all.
            (vec![if coin { r[0] } else { 9 }], r)
        }
        Shape::OneRowRight => {
            let l = uniform(&mut rng, p.small, 4);
            (l.clone(), vec![if coin { l[l.len() - 1] } else { 9 }])
        }
        Shape::OneRowBoth => (vec![3], vec![if coin { 3 } else { 4 }]),
        Shape::NoMatches => {
            let l = uniform(&mut rng, p.mid, 1000).into_iter().map(|k| 2 * k).collect();
            let r = uniform(&mut rng, p.mid / 2 + 1, 1000).into_iter().map(|k| 2 * k + 1).collect();
            (l, r)
        }
        Shape::OneKey => (vec![7; 2 * p.small], vec![7; 130 - p.small]),
        Shape::Zipf => {
            let l = datagen::zipf_keys(p.mid, 500, 1.0, p.seed).unwrap();
            let r = datagen::zipf_keys(2200 - p.mid, 500, 1.2, p.seed ^ 1).unwrap();
            (l.into_iter().map(u64::from).collect(), r.into_iter().map(u64::from).collect())
        }
        Shape::OddSizes => {
            const ODD: [usize; 10] = [3, 255, 257, 1023, 1025, 2047, 2049, 4095, 4097, 2 * 2048 * 2 + 1];
            let nl = ODD[rng.gen_range(0..ODD.len())];
            let nr = ODD[rng.gen_range(0..ODD.len())];
            let domain = (nl.min(nr) / 2).max(2) as u64;
            (uniform(&mut rng, nl, domain), uniform(&mut rng, nr, domain))
        }
        Shape::Random => {
            let (nl, nr) = (p.big, rng.gen_range(0..=p.big));
            let domain = rng.gen_range(nl as u64 / 4..=2 * nl as u64);
            (uniform(&mut rng, nl, domain), uniform(&mut rng, nr, domain))
        }
        Shape::LongRuns => {
            let (mut l, mut r) = (Vec::new(), Vec::new());
            for k in 0..rng.gen_range(4..12u64) {
                // Some keys only on one side.
                let (on_l, on_r) = match rng.gen_range(0..6) {
                    0 => (true, false),
                    1 => (false, true),
                    _ => (true, true),
                };
                if on_l {
                    l.extend(std::iter::repeat_n(k, rng.gen_range(1..=2)));
                }
                if on_r {
                    r.extend(std::iter::repeat_n(k, rng.gen_range(300..3000)));
                }
            }
            l.shuffle(&mut rng);
            r.shuffle(&mut rng);
            (l, r)
        }
    }
}

/// Every shape x every type of `types` x every join type, through `algo` (reduced: two join
/// types a shape and type, rotating: see [`join_types`]).
fn shapes_property(s: &Stream, algo: Algo, types: &[KeyType], cases: u32, seed: u64, path: MergePath) {
    run(cases, seed, (shape_params(), any::<bool>()), |(p, spread)| {
        for (si, shape) in SHAPES.into_iter().enumerate() {
            let (lc, rc) = shape_codes(shape, &p);
            for (ti, &ty) in types.iter().enumerate() {
                let (mut l, mut r) = (column(ty, &lc, spread), column(ty, &rc, spread));
                if algo == Algo::SortedMerge {
                    sort_column(&mut l);
                    sort_column(&mut r);
                }
                let (hl, hr) = (HostKeys::single(l), HostKeys::single(r));
                for jt in join_types(si * types.len() + ti) {
                    check_join(s, algo, &hl, &hr, jt, path.opts(DEFAULT), &format!("shape {shape:?} type {ty:?} spread {spread}, {path:?} path"))?;
                }
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Data: keys with awkward values, nulls, NaNs and composites
// ---------------------------------------------------------------------------------------------

const INT_POOL: [i64; 12] = [0, 1, -1, 2, 3, i64::MIN, i64::MAX, 0x1_0000_0000, -0x8000_0000, 0x7FFF_FFFF, 42, -42];

/// f32 bit patterns: zeros of both signs, infinities, NaNs with several payloads and signs
/// (quiet and signaling), a subnormal, extremes.
const F32_POOL: [u32; 14] = [
    0x0000_0000, // 0.0
    0x8000_0000, // -0.0
    0x3F80_0000, // 1.0
    0xBFC0_0000, // -1.5
    0x7F80_0000, // +inf
    0xFF80_0000, // -inf
    0x7FC0_0000, // NaN
    0xFFC0_0000, // -NaN
    0x7FC0_1234, // NaN with a payload
    0x7F80_0001, // signaling NaN
    0xFF81_2345, // negative signaling NaN with a payload
    0x0080_0000, // f32::MIN_POSITIVE
    0x0000_0001, // smallest subnormal
    0x7F7F_FFFF, // f32::MAX
];

const F64_POOL: [u64; 14] = [
    0x0000_0000_0000_0000,
    0x8000_0000_0000_0000,
    0x3FF0_0000_0000_0000,
    0xBFF8_0000_0000_0000,
    0x7FF0_0000_0000_0000,
    0xFFF0_0000_0000_0000,
    0x7FF8_0000_0000_0000,
    0xFFF8_0000_0000_0000,
    0x7FF8_0000_0000_1234,
    0x7FF0_0000_0000_0001,
    0xFFF4_5678_9ABC_DEF0,
    0x0010_0000_0000_0000,
    0x0000_0000_0000_0001,
    0x7FEF_FFFF_FFFF_FFFF,
];

fn pool_len(ty: KeyType) -> usize {
    match ty {
        KeyType::F32 => F32_POOL.len(),
        KeyType::F64 => F64_POOL.len(),
        _ => INT_POOL.len(),
    }
}

/// One key column's shape: its type, the pool values it draws from, and its nulls.
#[derive(Debug, Clone)]
struct ColSpec {
    ty: KeyType,
    /// Indices into the type's pool.
    values: Vec<usize>,
    /// 0: no validity; 1: a validity without nulls; 2..: nulls with probability (mode - 1) / 8.
    validity_mode: u8,
}

fn random_spec(rng: &mut StdRng, ty: KeyType) -> ColSpec {
    let mut all: Vec<usize> = (0..pool_len(ty)).collect();
    all.shuffle(rng);
    let domain = rng.gen_range(1..=all.len());
    all.truncate(domain);
    let validity_mode = if rng.gen_bool(0.4) { 0 } else { rng.gen_range(1..=5) };
    ColSpec { ty, values: all, validity_mode }
}

fn pool_column(ty: KeyType, idx: &[usize]) -> HostColumn {
    match ty {
        KeyType::I32 => HostColumn::I32(idx.iter().map(|&i| INT_POOL[i] as i32).collect()),
        KeyType::I64 => HostColumn::I64(idx.iter().map(|&i| INT_POOL[i]).collect()),
        KeyType::U32 => HostColumn::U32(idx.iter().map(|&i| INT_POOL[i] as u32).collect()),
        KeyType::U64 => HostColumn::U64(idx.iter().map(|&i| INT_POOL[i] as u64).collect()),
        KeyType::F32 => HostColumn::F32(idx.iter().map(|&i| f32::from_bits(F32_POOL[i])).collect()),
        KeyType::F64 => HostColumn::F64(idx.iter().map(|&i| f64::from_bits(F64_POOL[i])).collect()),
    }
}

/// `n` rows of keys of the given column specs. A side may differ from its spec in whether a
/// column has a validity (nullable on one side only; a validity without nulls).
fn pool_keys(rng: &mut StdRng, specs: &[ColSpec], n: usize) -> HostKeys {
    let mut keys = HostKeys::default();
    for spec in specs {
        let idx: Vec<usize> = (0..n).map(|_| spec.values[rng.gen_range(0..spec.values.len())]).collect();
        keys.columns.push(pool_column(spec.ty, &idx));
        let mode = match spec.validity_mode {
            0 if rng.gen_ratio(1, 5) => 1,
            m if m >= 2 && rng.gen_ratio(1, 5) => 0,
            m => m,
        };
        keys.validity.push(match mode {
            0 => None,
            1 => Some(vec![true; n]),
            m => Some((0..n).map(|_| rng.gen_range(0..8u8) >= m - 1).collect()),
        });
    }
    keys
}

/// Number of distinct keys (under `NullEqualsNull`, NaN equal NaN) over both sides.
fn distinct_keys(l: &HostKeys, r: &HostKeys) -> usize {
    let key = |k: &HostKeys, i: usize| -> Vec<(u64, bool)> {
        (0..k.columns.len())
            .map(|c| if k.validity[c].as_ref().is_some_and(|v| !v[i]) { (0, true) } else { (k.columns[c].normalized(i).0, false) })
            .collect()
    };
    let mut all: Vec<Vec<(u64, bool)>> = (0..l.rows()).map(|i| key(l, i)).chain((0..r.rows()).map(|i| key(r, i))).collect();
    all.sort();
    all.dedup();
    all.len()
}

fn sizes() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 2 => 1usize..8, 6 => 8usize..300]
}

// ---------------------------------------------------------------------------------------------
// Exact vectors of the source documents
// ---------------------------------------------------------------------------------------------

#[test]
fn mgpu_demo_sorted_merge_join_returns_the_printed_pairs_in_order() {
    let Some(s) = stream("mgpu_demo_sorted_merge_join_returns_the_printed_pairs_in_order") else { return };
    for path in MERGE_PATHS {
        mgpu_demo(&s, path);
    }
}

fn mgpu_demo(s: &Stream, path: MergePath) {
    let s = s.clone();
    let opts = path.opts(DEFAULT);
    let sorted_merge_join = |s: &Stream, a: &DeviceView<'_, i32>, b: &DeviceView<'_, i32>, jt| match path {
        MergePath::Default => sorted_merge_join(s, a, b, jt),
        MergePath::General => sorted_merge_join_with(s, a, b, jt, opts.testing),
    };
    let a = s.copy_from_host(&vectors::MGPU_A_KEYS).unwrap();
    let b = s.copy_from_host(&vectors::MGPU_B_KEYS).unwrap();
    poison_for(&s, 60);
    let inner = sorted_merge_join(&s, &a.view(), &b.view(), JoinType::Inner).unwrap();
    assert_eq!(inner.rows(), 19);
    assert_eq!(inner.pairs().unwrap(), vectors::to_pairs(&vectors::MGPU_INNER), "{path:?} path: inner join: the 19 printed pairs in order");
    poison_for(&s, 60);
    let outer = sorted_merge_join(&s, &a.view(), &b.view(), JoinType::Full).unwrap();
    assert_eq!(outer.rows(), 50);
    assert_eq!(outer.pairs().unwrap(), vectors::to_pairs(&vectors::MGPU_OUTER), "{path:?} path: outer join: the 50 printed pairs in order");

    // Every join type vs the reference, in order through the sorted entry point and as a
    // multiset through the others.
    let (ha, hb) = (vectors::i32_keys(&vectors::MGPU_A_KEYS), vectors::i32_keys(&vectors::MGPU_B_KEYS));
    for jt in JoinType::ALL {
        for algo in [Algo::SortedMerge, Algo::SortMerge, Algo::Interleave] {
            let what = format!("MGPU demo, {path:?} path");
            check_join(&s, algo, &ha, &hb, jt, opts, &what).unwrap_or_else(|e| panic!("{e}"));
            check_join(&s, algo, &hb, &ha, jt, opts, &format!("{what}, sides swapped")).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    // The example of sorted_merge_join's documentation.
    let a = s.copy_from_host(&[100i32, 101, 103, 103]).unwrap();
    let b = s.copy_from_host(&[100i32, 100, 102, 103]).unwrap();
    let full = sorted_merge_join(&s, &a.view(), &b.view(), JoinType::Full).unwrap().pairs().unwrap();
    let n = RowId::NONE;
    assert_eq!(full, vec![(id(0), id(0)), (id(0), id(1)), (id(1), n), (id(2), id(3)), (id(3), id(3)), (n, id(2))], "{path:?} path");
}

#[test]
fn interleave_worked_example_left_join_has_the_10_rows() {
    let Some(s) = stream("interleave_worked_example_left_join_has_the_10_rows") else { return };
    let (hl, hr) = (vectors::i32_keys(&vectors::INTERLEAVE_L_KEYS), vectors::i32_keys(&vectors::INTERLEAVE_R_KEYS));
    let want = sorted(vectors::to_pairs(&vectors::INTERLEAVE_LEFT_JOIN));
    for algo in [Algo::Interleave, Algo::SortMerge] {
        let maps = gpu_join(&s, algo, &hl, &hr, JoinType::Left, DEFAULT).unwrap();
        assert_eq!(maps.rows(), 10, "{algo:?}");
        let got = canonical_pairs(&maps, JoinType::Left).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, want, "{algo:?}: the 10 rows of the worked example");
        // The (K, A, B) rows: keys agree on both sides.
        for &(k, a, b) in &vectors::INTERLEAVE_LEFT_JOIN_ROWS {
            assert!(got.contains(&(id(a), RowId::new(b).unwrap_or(RowId::NONE))));
            assert_eq!(vectors::INTERLEAVE_L_KEYS[a as usize], k);
        }
        for jt in JoinType::ALL {
            check_join(&s, algo, &hl, &hr, jt, DEFAULT, "interleave example").unwrap_or_else(|e| panic!("{e}"));
            check_join(&s, algo, &hr, &hl, jt, DEFAULT, "interleave example, sides swapped").unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Every algorithm x every join type x data shapes
// ---------------------------------------------------------------------------------------------

#[test]
fn sorted_merge_join_matches_reference_on_every_shape_and_integer_type() {
    let Some(s) = stream("sorted_merge_join_matches_reference_on_every_shape_and_integer_type") else { return };
    for path in MERGE_PATHS {
        shapes_property(&s, Algo::SortedMerge, &SORTED_TYPES, cases(10, 1), 0x5047_ED01, path);
    }
}

#[test]
fn sort_merge_join_matches_reference_on_every_shape_and_key_type() {
    let Some(s) = stream("sort_merge_join_matches_reference_on_every_shape_and_key_type") else { return };
    // Single columns of at most 64 bits are exact for the sort-merge join: no hashing.
    for path in MERGE_PATHS {
        shapes_property(&s, Algo::SortMerge, &ALL_TYPES, cases(6, 1), 0x5047_ED02, path);
    }
}

#[test]
fn interleave_join_matches_reference_on_every_shape_and_key_type() {
    let Some(s) = stream("interleave_join_matches_reference_on_every_shape_and_key_type") else { return };
    // Single 64-bit columns are hashed by the interleave join (63-bit budget).
    shapes_property(&s, Algo::Interleave, &ALL_TYPES, cases(10, 1), 0x5047_ED03, MergePath::Default);
}

// ---------------------------------------------------------------------------------------------
// Key types and semantics: composites, nulls, NaN, -0.0, infinities
// ---------------------------------------------------------------------------------------------

#[test]
fn composite_null_nan_keys_match_reference_under_every_option() {
    let Some(s) = stream("composite_null_nan_keys_match_reference_under_every_option") else { return };
    run(cases(96, 12), 0x5E3A_0001, (any::<u64>(), 1usize..=4, sizes(), sizes()), |(seed, ncols, nl, nr)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let specs: Vec<ColSpec> = (0..ncols)
            .map(|_| {
                let ty = ALL_TYPES[rng.gen_range(0..6)];
                random_spec(&mut rng, ty)
            })
            .collect();
        let l = pool_keys(&mut rng, &specs, nl);
        let r = pool_keys(&mut rng, &specs, nr);
        let types: Vec<KeyType> = specs.iter().map(|c| c.ty).collect();
        for (oi, opts) in ALL_OPTIONS.into_iter().enumerate() {
            for jt in join_types(oi + ncols) {
                for algo in [Algo::SortMerge, Algo::Interleave, Algo::Chunked] {
                    check_join(&s, algo, &l, &r, jt, opts, &format!("columns {types:?}"))?;
                }
                check_size(&s, &l, &r, jt, opts, &format!("columns {types:?}"))?;
            }
        }
        Ok(())
    });
}

#[test]
fn float_zero_nan_infinity_rules() {
    let Some(s) = stream("float_zero_nan_infinity_rules") else { return };
    // Left: 0.0, -0.0, NaN, -NaN, NaN with a payload, +inf, -inf, 1.0.
    // Right: -0.0, NaN with another payload, +inf, -inf, signaling NaN, 2.0.
    let l64 = [0.0, -0.0, f64::NAN, -f64::NAN, f64::from_bits(0x7FF8_0000_0000_1234), f64::INFINITY, f64::NEG_INFINITY, 1.0];
    let r64 = [-0.0, f64::from_bits(0xFFF8_0000_0000_0042), f64::INFINITY, f64::NEG_INFINITY, f64::from_bits(0x7FF0_0000_0000_0001), 2.0];
    let l32: Vec<f32> = [0x0000_0000u32, 0x8000_0000, 0x7FC0_0000, 0xFFC0_0000, 0x7FC0_1234, 0x7F80_0000, 0xFF80_0000, 0x3F80_0000]
        .iter()
        .map(|&b| f32::from_bits(b))
        .collect();
    let r32: Vec<f32> =
        [0x8000_0000u32, 0xFFC0_0042, 0x7F80_0000, 0xFF80_0000, 0x7F80_0001, 0x4000_0000].iter().map(|&b| f32::from_bits(b)).collect();
    let cases = [
        (HostKeys::single(HostColumn::F64(l64.to_vec())), HostKeys::single(HostColumn::F64(r64.to_vec()))),
        (HostKeys::single(HostColumn::F32(l32)), HostKeys::single(HostColumn::F32(r32))),
    ];
    let p = |v: &[(u32, u32)]| sorted(v.iter().map(|&(a, b)| (id(a), id(b))).collect());
    // Written out from the definition, independently of the reference.
    let nan_equal = p(&[(0, 0), (1, 0), (2, 1), (2, 4), (3, 1), (3, 4), (4, 1), (4, 4), (5, 2), (6, 3)]);
    let nan_never = p(&[(0, 0), (1, 0), (5, 2), (6, 3)]);
    for (ci, (l, r)) in cases.iter().enumerate() {
        for (oi, opts) in ALL_OPTIONS.into_iter().enumerate() {
            let want_inner = if opts.nan_equality == NanEquality::NanEqualsNan { &nan_equal } else { &nan_never };
            assert_eq!(&reference::join(l, r, JoinType::Inner, opts).unwrap(), want_inner);
            for algo in [Algo::SortMerge, Algo::Interleave, Algo::Chunked] {
                assert_eq!(&gpu_pairs(&s, algo, l, r, JoinType::Inner, opts), want_inner, "{algo:?} {opts:?} {l:?}");
                for jt in join_types(4 * ci + oi) {
                    check_join(&s, algo, l, r, jt, opts, "float specials").unwrap_or_else(|e| panic!("{e}"));
                    check_join(&s, algo, r, l, jt, opts, "float specials, swapped").unwrap_or_else(|e| panic!("{e}"));
                }
            }
            for jt in join_types(4 * ci + oi + 2) {
                check_size(&s, l, r, jt, opts, "float specials").unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    // NaN inside a composite key: (NaN, 1) equals (NaN', 1) only under NanEqualsNan.
    let l = HostKeys::new(vec![HostColumn::F32(vec![f32::NAN, f32::NAN, -0.0]), HostColumn::I32(vec![1, 2, 5])]);
    let r = HostKeys::new(vec![HostColumn::F32(vec![f32::from_bits(0x7FC0_0077), 0.0]), HostColumn::I32(vec![1, 5])]);
    for opts in ALL_OPTIONS {
        let want = if opts.nan_equality == NanEquality::NanEqualsNan { p(&[(0, 0), (2, 1)]) } else { p(&[(2, 1)]) };
        for algo in [Algo::SortMerge, Algo::Interleave, Algo::Chunked] {
            assert_eq!(gpu_pairs(&s, algo, &l, &r, JoinType::Inner, opts), want, "{algo:?} {opts:?}");
        }
    }
}

#[test]
fn null_key_rules_under_both_null_equalities() {
    let Some(s) = stream("null_key_rules_under_both_null_equalities") else { return };
    let p = |v: &[(u32, u32)]| sorted(v.iter().map(|&(a, b)| (id(a), id(b))).collect());
    // Left: 1, null(1), null(7), 2. Right: null(0), 1, null(2), 2. Hidden values under nulls
    // must not matter, and a null must never equal a value.
    let lv = vec![true, false, false, true];
    let rv = vec![false, true, false, true];
    for (ti, ty) in ALL_TYPES.into_iter().enumerate() {
        let l = HostKeys { columns: vec![column(ty, &[1, 1, 7, 2], false)], validity: vec![Some(lv.clone())] };
        let r = HostKeys { columns: vec![column(ty, &[0, 1, 2, 2], false)], validity: vec![Some(rv.clone())] };
        for (oi, opts) in ALL_OPTIONS.into_iter().enumerate() {
            let want = if opts.null_equality == NullEquality::NullEqualsNull {
                p(&[(0, 1), (1, 0), (1, 2), (2, 0), (2, 2), (3, 3)])
            } else {
                p(&[(0, 1), (3, 3)])
            };
            assert_eq!(reference::join(&l, &r, JoinType::Inner, opts).unwrap(), want);
            for algo in [Algo::SortMerge, Algo::Interleave, Algo::Chunked] {
                assert_eq!(gpu_pairs(&s, algo, &l, &r, JoinType::Inner, opts), want, "{algo:?} {ty:?} {opts:?}");
                for jt in join_types(4 * ti + oi) {
                    check_join(&s, algo, &l, &r, jt, opts, &format!("nulls {ty:?}")).unwrap_or_else(|e| panic!("{e}"));
                }
            }
            for jt in join_types(4 * ti + oi + 2) {
                check_size(&s, &l, &r, jt, opts, &format!("nulls {ty:?}")).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    // A null in the second column of a composite; the left side alone is nullable.
    let l = HostKeys {
        columns: vec![HostColumn::U32(vec![1, 1, 2]), HostColumn::I64(vec![5, 9, 5])],
        validity: vec![None, Some(vec![true, false, true])],
    };
    let r = HostKeys::new(vec![HostColumn::U32(vec![1, 1, 2]), HostColumn::I64(vec![5, 0, 6])]);
    for opts in ALL_OPTIONS {
        for algo in [Algo::SortMerge, Algo::Interleave, Algo::Chunked] {
            let got = gpu_pairs(&s, algo, &l, &r, JoinType::Left, opts);
            // Row 1 is (1, null): it matches nothing (the right side has no nulls) but stays.
            assert_eq!(got, sorted(vec![(id(0), id(0)), (id(1), RowId::NONE), (id(2), RowId::NONE)]), "{algo:?} {opts:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hash collisions
// ---------------------------------------------------------------------------------------------

/// Key layouts that are hashed: wider than 64 bits (sort-merge) or 63 bits (interleave).
const WIDE_LAYOUTS: [&[KeyType]; 9] = [
    &[KeyType::U64, KeyType::U64],
    &[KeyType::U64, KeyType::F64, KeyType::I32],
    &[KeyType::I64, KeyType::U32, KeyType::F64, KeyType::U64],
    &[KeyType::F64, KeyType::F64],
    &[KeyType::U32, KeyType::U32, KeyType::U32],
    &[KeyType::F32, KeyType::I64, KeyType::U32],
    // 64 bits: exact for the sort-merge join, hashed by the interleave join; 66 bits (both
    // hashed) when nullable under NullEqualsNull.
    &[KeyType::I32, KeyType::F32],
    // Single 64-bit columns: hashed by the interleave join.
    &[KeyType::U64],
    &[KeyType::F64],
];

#[test]
fn weak_hash_collisions_never_add_or_lose_rows() {
    let Some(s) = stream("weak_hash_collisions_never_add_or_lose_rows") else { return };
    // With 4 hash values, any case with more than 4 distinct keys must collide.
    let colliding_cases = Cell::new(0u32);
    let n_cases = cases(10, 3);
    run(n_cases, 0xC0_11DE, (any::<u64>(), 0usize..400, 0usize..400), |(seed, nl, nr)| {
        let mut rng = StdRng::seed_from_u64(seed);
        for (li, layout) in WIDE_LAYOUTS.into_iter().enumerate() {
            let specs: Vec<ColSpec> = layout.iter().map(|&ty| random_spec(&mut rng, ty)).collect();
            let l = pool_keys(&mut rng, &specs, nl);
            let r = pool_keys(&mut rng, &specs, nr);
            if distinct_keys(&l, &r) > 4 {
                colliding_cases.set(colliding_cases.get() + 1);
            }
            // Reduced: two of the four options a layout, rotating (every option on some layouts).
            let opts_here: Vec<JoinOptions> = if reduced() { vec![ALL_OPTIONS[li % 4], ALL_OPTIONS[(li + 2) % 4]] } else { ALL_OPTIONS.to_vec() };
            for (oi, opts) in opts_here.into_iter().map(weak_hash).enumerate() {
                for jt in join_types(4 * li + oi) {
                    for algo in [Algo::SortMerge, Algo::Interleave, Algo::Chunked] {
                        check_join(&s, algo, &l, &r, jt, opts, &format!("weak hash, columns {layout:?}"))?;
                    }
                    check_size(&s, &l, &r, jt, opts, &format!("weak hash, columns {layout:?}"))?;
                }
            }
        }
        // Several tables on hashed (u64) keys.
        let codes: Vec<Vec<Option<u64>>> = (0..3).map(|_| (0..rng.gen_range(0..60)).map(|_| Some(rng.gen_range(0..9))).collect()).collect();
        for opts in [DEFAULT, ALL_OPTIONS[1]].map(weak_hash) {
            check_many(&s, KeyType::U64, true, &codes, opts, "weak hash")?;
        }
        Ok(())
    });
    // More than a third of the layouts' cases (30 of 90 at full size).
    let n_layouts = WIDE_LAYOUTS.len() as u32 * n_cases;
    assert!(3 * colliding_cases.get() > n_layouts, "the weak-hash cases must hold more than 4 distinct keys");
}

// ---------------------------------------------------------------------------------------------
// Join sizes
// ---------------------------------------------------------------------------------------------

#[test]
fn join_size_matches_reference_for_every_join_type() {
    let Some(s) = stream("join_size_matches_reference_for_every_join_type") else { return };
    run(cases(8, 2), 0x512E_0001, (shape_params(), any::<bool>()), |(p, spread)| {
        let mut rng = StdRng::seed_from_u64(p.seed);
        // Exact keys: single columns of every type, every shape.
        for (si, shape) in SHAPES.into_iter().enumerate() {
            let (lc, rc) = shape_codes(shape, &p);
            for (ti, ty) in ALL_TYPES.into_iter().enumerate() {
                let (l, r) = (HostKeys::single(column(ty, &lc, spread)), HostKeys::single(column(ty, &rc, spread)));
                for jt in join_types(si * ALL_TYPES.len() + ti) {
                    check_size(&s, &l, &r, jt, DEFAULT, &format!("shape {shape:?} {ty:?}"))?;
                }
            }
        }
        // Exact and hashed keys with nulls and NaNs, under every option.
        for (li, layout) in [&[KeyType::F64][..], &[KeyType::I32], &[KeyType::U32, KeyType::F32]].into_iter().chain(WIDE_LAYOUTS).enumerate() {
            let specs: Vec<ColSpec> = layout.iter().map(|&ty| random_spec(&mut rng, ty)).collect();
            let max = pick(2000, 600);
            let (nl, nr) = (rng.gen_range(0..max), rng.gen_range(0..max));
            let (l, r) = (pool_keys(&mut rng, &specs, nl), pool_keys(&mut rng, &specs, nr));
            for (oi, opts) in ALL_OPTIONS.into_iter().enumerate() {
                for jt in join_types(4 * li + oi) {
                    check_size(&s, &l, &r, jt, opts, &format!("columns {layout:?}"))?;
                }
            }
        }
        Ok(())
    });
    // A size far beyond what the inputs suggest: 3000 x 3000 rows of one key (9M pairs), and
    // one of 2^16 x 2^16 (2^32 pairs: counted, never materialized, for exact keys; also when
    // reduced, for the 32-bit limit).
    for (n, ty) in [(3000usize, KeyType::I64), (1 << 16, KeyType::U32)] {
        let k = HostKeys::single(column(ty, &vec![5; n], true));
        for jt in JoinType::ALL {
            let want = check_size(&s, &k, &k, jt, DEFAULT, "one key").unwrap_or_else(|e| panic!("{e}"));
            if jt == JoinType::Inner {
                assert_eq!(want, (n * n) as u64);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// More than two tables
// ---------------------------------------------------------------------------------------------

/// Every combination of one row per table whose keys are all equal (a null key matches only
/// under NullEqualsNull), as sorted row tuples. Literally enumerates all combinations.
fn brute_force_n_way(keys: &[Vec<Option<u64>>], nulls_equal: bool) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    if keys.iter().any(|t| t.is_empty()) {
        return out;
    }
    let mut idx = vec![0usize; keys.len()];
    loop {
        let first = keys[0][idx[0]];
        if (first.is_some() || nulls_equal) && keys.iter().zip(&idx).all(|(t, &i)| t[i] == first) {
            out.push(idx.iter().map(|&i| i as u32).collect());
        }
        let mut t = keys.len();
        loop {
            if t == 0 {
                out.sort();
                return out;
            }
            t -= 1;
            idx[t] += 1;
            if idx[t] < keys[t].len() {
                break;
            }
            idx[t] = 0;
        }
    }
}

/// `interleave_join_many` on tables of one key column (`codes`, None = null) of type `ty`
/// against the brute-force N-way join.
fn check_many(s: &Stream, ty: KeyType, spread: bool, codes: &[Vec<Option<u64>>], opts: JoinOptions, what: &str) -> Result<(), TestCaseError> {
    let tables: Vec<HostKeys> = codes
        .iter()
        .map(|c| {
            let values: Vec<u64> = c.iter().map(|k| k.unwrap_or(3)).collect();
            let nullable = c.iter().any(|k| k.is_none());
            HostKeys { columns: vec![column(ty, &values, spread)], validity: vec![nullable.then(|| c.iter().map(|k| k.is_some()).collect())] }
        })
        .collect();
    let dks: Vec<DeviceKeys> = tables.iter().map(|t| DeviceKeys::upload(s, t).unwrap()).collect();
    let keys: Vec<Keys> = dks.iter().map(|d| d.keys()).collect();
    poison_for(s, codes.iter().map(Vec::len).sum::<usize>() * 4);
    let sizes: Vec<usize> = codes.iter().map(Vec::len).collect();
    let ctx = format!("{what}: {} tables {sizes:?} of {ty:?}, {opts:?}", codes.len());
    let maps = interleave_join_many(s, &keys, opts).map_err(|e| fail(format!("{ctx}: error {e}")))?;
    prop_assert_eq!(maps.len(), codes.len(), "{}: one map per table", ctx);
    let host: Vec<Vec<RowId>> = maps.iter().map(|m| m.to_vec().unwrap()).collect();
    let n = host[0].len();
    for h in &host {
        prop_assert_eq!(h.len(), n, "{}: maps of different lengths", ctx);
    }
    let mut got: Vec<Vec<u32>> = (0..n).map(|k| host.iter().map(|m| m[k].get().unwrap_or(u32::MAX)).collect()).collect();
    got.sort();
    let want = brute_force_n_way(codes, opts.null_equality == NullEquality::NullEqualsNull);
    if got != want {
        let missing = want.iter().filter(|t| got.binary_search(t).is_err()).take(8).collect::<Vec<_>>();
        let extra = got.iter().filter(|t| want.binary_search(t).is_err()).take(8).collect::<Vec<_>>();
        return Err(fail(format!("{ctx}: {} tuples, expected {}; missing {missing:?}; extra {extra:?}", got.len(), want.len())));
    }
    Ok(())
}

#[test]
fn interleave_join_many_matches_brute_force_n_way() {
    let Some(s) = stream("interleave_join_many_matches_brute_force_n_way") else { return };
    let tables = prop_oneof![3 => Just(3usize), 3 => Just(4usize), 1 => Just(2usize)];
    run(cases(96, 16), 0x4A11_0003, (tables, any::<u64>(), 1u64..=8, 0u8..=3, any::<bool>()), |(nt, seed, domain, null_eighths, spread)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let ty = ALL_TYPES[rng.gen_range(0..6)];
        let max_rows = match nt {
            2 => 300,
            3 => 80,
            _ => 30,
        };
        let codes: Vec<Vec<Option<u64>>> = (0..nt)
            .map(|_| {
                let n = if rng.gen_ratio(1, 16) { 0 } else { rng.gen_range(1..=max_rows) };
                (0..n).map(|_| (rng.gen_range(0..8u8) >= null_eighths).then(|| rng.gen_range(0..domain))).collect()
            })
            .collect();
        for opts in [DEFAULT, ALL_OPTIONS[1]] {
            check_many(&s, ty, spread, &codes, opts, "random")?;
        }
        Ok(())
    });
    // Deterministic: 3 and 4 tables with a key in all, a key missing from one table, and
    // duplicates (2 x 3 x 1 x 2 = 12 tuples for key 1).
    let t = |v: &[u64]| v.iter().map(|&k| Some(k)).collect::<Vec<_>>();
    let four = vec![t(&[1, 2, 1, 9]), t(&[1, 1, 2, 1]), t(&[2, 1, 7]), t(&[1, 5, 1, 2])];
    assert_eq!(brute_force_n_way(&four, false).len(), 2 * 3 * 2 + 1); // 2 x 3 x 1 x 2 combinations of the shared key, plus one
    check_many(&s, KeyType::I32, false, &four, DEFAULT, "fixed").unwrap_or_else(|e| panic!("{e}"));
    check_many(&s, KeyType::I32, false, &four[..3], DEFAULT, "fixed").unwrap_or_else(|e| panic!("{e}"));
    // Errors: too few or too many tables, different key types.
    let a = s.copy_from_host(&[1u32, 2]).unwrap();
    let b = s.copy_from_host(&[1i32, 2]).unwrap();
    let one = Keys::single(a.view());
    assert!(matches!(interleave_join_many(&s, std::slice::from_ref(&one), DEFAULT), Err(Error::InvalidArgument(_))));
    assert!(matches!(interleave_join_many(&s, &vec![one.clone(); 17], DEFAULT), Err(Error::InvalidArgument(_))));
    assert!(matches!(interleave_join_many(&s, &[one.clone(), one.clone(), Keys::single(b.view())], DEFAULT), Err(Error::InvalidArgument(_))));
}

// ---------------------------------------------------------------------------------------------
// Materialization
// ---------------------------------------------------------------------------------------------

/// Checks one side's materialized `[u32, f64]` payload against the host: row `k` is
/// `column[map[k]]`, zero where `map[k]` is NONE, and the validity says which rows are null
/// (absent exactly when the side cannot have null rows).
fn check_materialized(out: &gpujoin_join::Materialized, map: &[RowId], p32: &[u32], p64: &[f64], nullable: bool, what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(out.columns.len(), 2, "{}: one output column per input column", what);
    match &out.columns[0] {
        Payload::U32(b) => {
            let want: Vec<u32> = map.iter().map(|m| m.get().map_or(0, |i| p32[i as usize])).collect();
            prop_assert_eq!(b.to_vec().unwrap(), want, "{}: u32 column", what);
        }
        _ => return Err(fail(format!("{what}: column 0 is not u32"))),
    }
    match &out.columns[1] {
        Payload::F64(b) => {
            let want: Vec<u64> = map.iter().map(|m| m.get().map_or(0.0, |i| p64[i as usize]).to_bits()).collect();
            let got: Vec<u64> = b.to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
            prop_assert_eq!(got, want, "{}: f64 column", what);
        }
        _ => return Err(fail(format!("{what}: column 1 is not f64"))),
    }
    let valid: Vec<bool> = map.iter().map(|m| !m.is_none()).collect();
    match &out.validity {
        Some(words) => {
            prop_assert!(nullable, "{}: a validity for a side without null rows", what);
            prop_assert_eq!(words.to_vec().unwrap(), gpujoin_join::pack_validity(&valid), "{}: validity", what);
        }
        None => {
            prop_assert!(!nullable, "{}: no validity for a side with null rows", what);
            prop_assert!(valid.iter().all(|&v| v), "{}: NONE in a map of a side without null rows", what);
        }
    }
    Ok(())
}

#[test]
fn materialize_gathers_payloads_with_nulls_and_rejects_short_columns() {
    let Some(s) = stream("materialize_gathers_payloads_with_nulls_and_rejects_short_columns") else { return };
    run(cases(16, 4), 0x3A7E_0001, (any::<u64>(), 2usize..3000, 1usize..3000), |(seed, nl, nr)| {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut lk: Vec<u32> = (0..nl).map(|_| rng.gen_range(0..200)).collect();
        let mut rk: Vec<u32> = (0..nr).map(|_| rng.gen_range(0..100)).collect();
        lk[0] = 1_000_000; // matches nothing: a NONE in the right map
        lk[1] = rk[0]; // matches
        rk.push(2_000_000); // matches nothing: a NONE in the left map of a Full join
        let nr = nr + 1;
        let lpay32: Vec<u32> = (0..nl as u32).map(|i| i * 3 + 7).collect();
        let lpay64: Vec<f64> = (0..nl).map(|i| -(i as f64) * 0.75 - 1.0).collect();
        let rpay32: Vec<u32> = (0..nr as u32).map(|i| (i ^ 0x5555) + 1).collect();
        let rpay64: Vec<f64> = (0..nr).map(|i| i as f64 * 0.5 + 3.25).collect();
        let up32 = |v: &[u32]| s.copy_from_host(v).unwrap();
        let up64 = |v: &[f64]| s.copy_from_host(v).unwrap();
        let (dl32, dl64, dr32, dr64) = (up32(&lpay32), up64(&lpay64), up32(&rpay32), up64(&rpay64));
        for algo in [Algo::SortedMerge, Algo::SortMerge, Algo::Interleave] {
            // The sorted entry point joins the sorted keys; payload rows are rows of its input.
            let (mut l, mut r) = (HostColumn::U32(lk.clone()), HostColumn::U32(rk.clone()));
            if algo == Algo::SortedMerge {
                sort_column(&mut l);
                sort_column(&mut r);
            }
            let (hl, hr) = (HostKeys::single(l), HostKeys::single(r));
            for jt in [JoinType::Left, JoinType::Full, JoinType::Inner, JoinType::Right] {
                let maps = gpu_join(&s, algo, &hl, &hr, jt, DEFAULT).unwrap();
                let got = canonical_pairs(&maps, jt)?;
                prop_assert_eq!(&got, &reference::join(&hl, &hr, jt, DEFAULT).unwrap(), "{:?} {:?}", algo, jt);
                let (lm, rm) = maps.to_host().unwrap();
                if jt == JoinType::Left {
                    prop_assert!(rm.iter().any(|r| r.is_none()) && rm.iter().any(|r| !r.is_none()), "both matched and unmatched rows");
                }
                for (side, map, d32, d64, p32, p64) in
                    [(Side::Left, &lm, &dl32, &dl64, &lpay32, &lpay64), (Side::Right, &rm, &dr32, &dr64, &rpay32, &rpay64)]
                {
                    let what = format!("{algo:?} {jt:?} {side:?} side");
                    poison_for(&s, map.len() * 2);
                    let cols: [DeviceColumn; 2] = [d32.view().into(), d64.view().into()];
                    let out = materialize(&s, &maps, side, &cols).map_err(|e| fail(format!("{what}: {e}")))?;
                    check_materialized(&out, map, p32, p64, maps.nullable(side), &what)?;
                    // In these inputs every join type that keeps unmatched rows has some.
                    prop_assert_eq!(maps.nullable(side), map.iter().any(|m| m.is_none()), "{}: nullable()", what);

                    // A column too short for the map: an error, not garbage (the boundary row is out),
                    // also when it is the second of the columns.
                    let Some(max) = map.iter().filter_map(|m| m.get()).max() else { continue };
                    let short = s.copy_from_host(&p64[..max as usize]).unwrap();
                    let res = materialize(&s, &maps, side, &[short.view().into()]);
                    prop_assert!(matches!(res, Err(Error::InvalidArgument(_))), "{}: map entry {} past a column of {} rows", what, max, max);
                    let res = materialize(&s, &maps, side, &[d32.view().into(), short.view().into()]);
                    prop_assert!(matches!(res, Err(Error::InvalidArgument(_))), "{}: short second column", what);
                    // The unchecked variant fills instead.
                    const FILL: f64 = -7.125;
                    let out = materialize_unchecked(&s, &maps.side(side).unwrap(), &short.view(), FILL).unwrap().to_vec().unwrap();
                    let want: Vec<u64> = map.iter().map(|m| m.get().filter(|&i| i < max).map_or(FILL, |i| p64[i as usize]).to_bits()).collect();
                    prop_assert_eq!(out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want, "{}: materialize_unchecked", what);
                }
            }
        }
        Ok(())
    });
    // A side the join type has no map for is an error; an empty map gives empty columns.
    let (e, r) = (HostKeys::single(HostColumn::U32(vec![])), HostKeys::single(HostColumn::U32(vec![1, 2])));
    let col = s.copy_from_host(&[1.0f64, 2.0]).unwrap();
    let semi = gpu_join(&s, Algo::SortMerge, &r, &r, JoinType::LeftSemi, DEFAULT).unwrap();
    assert!(invalid(materialize(&s, &semi, Side::Right, &[col.view().into()])));
    let anti = gpu_join(&s, Algo::Interleave, &r, &e, JoinType::RightAnti, DEFAULT).unwrap();
    assert!(invalid(materialize(&s, &anti, Side::Left, &[col.view().into()])));
    let maps = gpu_join(&s, Algo::SortMerge, &e, &r, JoinType::Left, DEFAULT).unwrap();
    let out = materialize(&s, &maps, Side::Left, &[col.view().into()]).unwrap();
    match &out.columns[..] {
        [Payload::F64(b)] => assert!(b.is_empty()),
        _ => panic!("one f64 column expected"),
    }
}

// ---------------------------------------------------------------------------------------------
// Errors, not panics
// ---------------------------------------------------------------------------------------------

fn invalid<T>(r: gpujoin_device::Result<T>) -> bool {
    matches!(r, Err(Error::InvalidArgument(_)))
}

#[test]
fn invalid_inputs_are_errors_not_panics() {
    let Some(s) = stream("invalid_inputs_are_errors_not_panics") else { return };
    let a = s.copy_from_host(&[1i32, 2, 3]).unwrap();
    let b = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    let c = s.copy_from_host(&[1i32, 2]).unwrap();
    let d = s.copy_from_host(&[0.5f64, 1.0, 2.0]).unwrap();
    let (ka, kb) = (Keys::single(a.view()), Keys::single(b.view()));
    // Key columns of different types between the sides.
    assert!(invalid(sort_merge_join(&s, &ka, &kb, JoinType::Inner, DEFAULT)));
    assert!(invalid(interleave_join(&s, &ka, &kb, JoinType::Full, DEFAULT)));
    assert!(invalid(sort_merge_join_size(&s, &ka, &kb, JoinType::Left, DEFAULT)));
    // Different column counts.
    let two = Keys::new(vec![a.view().into(), d.view().into()]).unwrap();
    assert!(invalid(sort_merge_join(&s, &ka, &two, JoinType::Inner, DEFAULT)));
    assert!(invalid(interleave_join(&s, &two, &ka, JoinType::Inner, DEFAULT)));
    assert!(invalid(sort_merge_join_size(&s, &two, &ka, JoinType::Inner, DEFAULT)));
    // Same column count, a different type in the second column.
    let two_b = Keys::new(vec![a.view().into(), a.view().into()]).unwrap();
    assert!(invalid(sort_merge_join(&s, &two, &two_b, JoinType::Inner, DEFAULT)));
    assert!(invalid(interleave_join(&s, &two, &two_b, JoinType::RightAnti, DEFAULT)));
    // A composite of 5 columns; none at all.
    assert!(invalid(Keys::new(vec![a.view().into(); 5])));
    assert!(invalid(Keys::new(vec![])));
    // Columns of different lengths within one side.
    assert!(invalid(Keys::new(vec![a.view().into(), c.view().into()])));
    // A validity bitmap of the wrong number of words (3 rows need 1 word).
    let words = s.copy_from_host(&[u32::MAX, u32::MAX]).unwrap();
    assert!(invalid(Keys::with_validity(vec![KeyColumn { values: a.view().into(), validity: Some(words.view()) }])));
    // Host keys that fail validation do not upload.
    let ragged = HostKeys::new(vec![HostColumn::I32(vec![1, 2]), HostColumn::I32(vec![1])]);
    assert!(invalid(DeviceKeys::upload(&s, &ragged)));
    assert!(invalid(DeviceKeys::upload(&s, &HostKeys::new(vec![HostColumn::U32(vec![1]); 5]))));
    assert!(invalid(DeviceKeys::upload(&s, &HostKeys::default())));
    let bad_validity = HostKeys { columns: vec![HostColumn::U32(vec![1, 2])], validity: vec![Some(vec![true])] };
    assert!(invalid(DeviceKeys::upload(&s, &bad_validity)));
    // Valid keys still work after all that.
    let ok = sort_merge_join(&s, &ka, &Keys::single(c.view()), JoinType::Inner, DEFAULT).unwrap();
    assert_eq!(ok.pairs().unwrap().len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Large inputs
// ---------------------------------------------------------------------------------------------

fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Per key: how many rows each side holds, and a fingerprint (wrapping sum of `mix(row)`) of
/// the right rows.
struct KeyStats {
    count_l: Vec<u32>,
    count_r: Vec<u32>,
    print_r: Vec<u64>,
}

impl KeyStats {
    fn new(lk: &[u32], rk: &[u32], domain: usize) -> Self {
        let mut st = KeyStats { count_l: vec![0; domain], count_r: vec![0; domain], print_r: vec![0; domain] };
        for &k in lk {
            st.count_l[k as usize] += 1;
        }
        for (i, &k) in rk.iter().enumerate() {
            st.count_r[k as usize] += 1;
            st.print_r[k as usize] = st.print_r[k as usize].wrapping_add(mix(i as u64));
        }
        st
    }

    fn inner_size(&self) -> u64 {
        self.count_l.iter().zip(&self.count_r).map(|(&a, &b)| a as u64 * b as u64).sum()
    }

    fn full_size(&self) -> u64 {
        let unmatched = |c: &[u32], other: &[u32]| -> u64 { c.iter().zip(other).filter(|(_, &o)| o == 0).map(|(&c, _)| c as u64).sum() };
        self.inner_size() + unmatched(&self.count_l, &self.count_r) + unmatched(&self.count_r, &self.count_l)
    }
}

/// Checks a large Inner or Full join completely in O(output): each left row's matched right
/// rows have exactly the count and fingerprint of the right rows of its key (so no pair is
/// missing, added, repeated or paired with a wrong key, up to a 64-bit fingerprint collision),
/// and unmatched rows of both sides appear exactly once (Full) or not at all (Inner). A sample
/// of the pairs is also checked directly for equal keys.
fn check_large(lk: &[u32], rk: &[u32], st: &KeyStats, lm: &[RowId], rm: &[RowId], jt: JoinType, what: &str) {
    let full = jt == JoinType::Full;
    assert_eq!(lm.len(), rm.len(), "{what}: map lengths");
    let (nl, nr) = (lk.len(), rk.len());
    // Per left row: (matches, fingerprint of the matched right rows).
    let mut acc = vec![(0u32, 0u64); nl];
    let (mut none_l, mut none_r) = (vec![0u8; nl], vec![0u8; nr]);
    for (k, (&a, &b)) in lm.iter().zip(rm).enumerate() {
        match (a.get(), b.get()) {
            (Some(a), Some(b)) => {
                let (a, b) = (a as usize, b as usize);
                assert!(a < nl && b < nr, "{what}: output row {k} = ({a}, {b}) out of range");
                if k % 97 == 0 {
                    assert_eq!(lk[a], rk[b], "{what}: output row {k} = ({a}, {b}) pairs different keys");
                }
                let e = &mut acc[a];
                e.0 += 1;
                e.1 = e.1.wrapping_add(mix(b as u64));
            }
            (Some(a), None) if full && (a as usize) < nl => none_l[a as usize] = none_l[a as usize].saturating_add(1),
            (None, Some(b)) if full && (b as usize) < nr => none_r[b as usize] = none_r[b as usize].saturating_add(1),
            _ => panic!("{what}: output row {k} = ({a:?}, {b:?}) is not a {jt:?} row of {nl} x {nr} rows"),
        }
    }
    let bad_l = (0..nl).find(|&i| {
        let key = lk[i] as usize;
        let (c, p) = (st.count_r[key], st.print_r[key]);
        if c > 0 {
            acc[i] != (c, p) || none_l[i] != 0
        } else {
            acc[i].0 != 0 || none_l[i] != full as u8
        }
    });
    if let Some(i) = bad_l {
        let c = st.count_r[lk[i] as usize];
        panic!(
            "{what}: left row {i} (key {}): {} matches whose fingerprint {} and {} unmatched rows; expected {c} matches and {} unmatched",
            lk[i],
            acc[i].0,
            if acc[i].1 == st.print_r[lk[i] as usize] { "agrees" } else { "differs" },
            none_l[i],
            (full && c == 0) as u8
        );
    }
    let bad_r = (0..nr).find(|&i| none_r[i] != (full && st.count_l[rk[i] as usize] == 0) as u8);
    if let Some(i) = bad_r {
        panic!("{what}: right row {i} (key {}, {} left rows of that key) appears {} times unmatched", rk[i], st.count_l[rk[i] as usize], none_r[i]);
    }
}

#[test]
fn large_2_pow_24_rows_inner_and_full_joins() {
    let Some(s) = stream("large_2_pow_24_rows_inner_and_full_joins") else { return };
    // Reduced: 2^18 rows a side, still thousands of merge-path tiles.
    let (n, domain) = (rows(1 << 24, 1 << 18), rows(1 << 23, 1 << 17) as u32);
    let mut rng = StdRng::seed_from_u64(0x1A26_E024);
    let lk: Vec<u32> = (0..n).map(|_| rng.gen_range(0..domain)).collect();
    let rk: Vec<u32> = (0..n).map(|_| rng.gen_range(0..domain)).collect();
    let (hl, hr) = (HostKeys::single(HostColumn::U32(lk.clone())), HostKeys::single(HostColumn::U32(rk.clone())));
    let (dl, dr) = (DeviceKeys::upload(&s, &hl).unwrap(), DeviceKeys::upload(&s, &hr).unwrap());
    std::thread::scope(|scope| {
        // The reference count (a hash join of 2^24 rows: seconds) runs beside the GPU joins.
        let reference_full = scope.spawn(|| reference::join_size(&hl, &hr, JoinType::Full, DEFAULT).unwrap());
        // Per-key statistics give the sizes and the complete check of each output; they must
        // agree with the reference (below).
        let st = KeyStats::new(&lk, &rk, domain as usize);
        let sizes = [(JoinType::Inner, st.inner_size()), (JoinType::Full, st.full_size())];
        // About 2n inner rows and 0.27n unmatched ones (n keys over n/2 values a side).
        let (inner, unmatched) = pick((30_000_000, 4_000_000), (n as u64 * 9 / 5, n as u64 / 5));
        assert!(sizes[0].1 > inner && sizes[1].1 > sizes[0].1 + unmatched, "{sizes:?}");
        for algo in [Algo::SortMerge, Algo::Interleave] {
            for (jt, want) in sizes {
                let maps = match algo {
                    Algo::SortMerge => sort_merge_join(&s, &dl.keys(), &dr.keys(), jt, DEFAULT),
                    _ => interleave_join(&s, &dl.keys(), &dr.keys(), jt, DEFAULT),
                }
                .unwrap_or_else(|e| panic!("{algo:?} {jt:?}: {e}"));
                assert_eq!(maps.rows(), want, "{algo:?} {jt:?}: rows");
                let (lm, rm) = maps.to_host().unwrap();
                drop(maps);
                check_large(&lk, &rk, &st, &lm, &rm, jt, &format!("{algo:?} {jt:?}"));
            }
        }
        for (jt, want) in sizes {
            assert_eq!(sort_merge_join_size(&s, &dl.keys(), &dr.keys(), jt, DEFAULT).unwrap(), want, "sort_merge_join_size {jt:?}");
        }
        let full = reference_full.join().unwrap();
        assert_eq!(full, sizes[1].1, "reference::join_size Full vs the test's key statistics");
    });
}
