//! Property tests of every join algorithm against the CPU reference
//! (`table_reference::equi_join`), all through the front door (`gpujoin_join::plan::Join`,
//! `Join::many`) on tables of the columnar model (`HostTable`, uploaded with `Table::upload`).
//!
//! They run on the GPU when one is present, print `SKIPPED` when none is, and fail loudly with
//! GPUJOIN_REQUIRE_GPU=1. Seeds are fixed so failures reproduce; the device pool is poisoned
//! before each join so that an internal buffer a kernel forgets to write shows up as garbage.
//!
//! Results compare as sorted multisets of `(left row, right row)` pairs, except where the order
//! is part of the contract: the sorted merge (`Algorithm::SortedMerge`) documents ModernGPU's
//! order (by A, then B; unmatched B rows last in B order; semi/anti rows in A or B order), which
//! is exactly the canonical order of `reference::sort_pairs`, so its output is also compared in
//! order.
//!
//! Test-only options of the front door (`Join::testing`, the feature `testing`) force what small
//! inputs would not reach: `hash_mask` keeps 2 bits of every hashed key (a composite wider than
//! 64 bits for the sort-merge join, wider than 63 bits for the interleave join, which includes
//! single 64-bit columns), so that candidate matches collide massively ([`weak_hash`]);
//! `force_general_merge_path` makes the merge join skip its fused per-tile path,
//! `two_pass_merge` the fused path's one pass and `any_match_one_pass` the one pass's first try
//! that assumes at most one row a key on one side ([`MergePath`]).
//! Every join here also sets `no_key_compression`: the front door would otherwise join a single
//! 8-byte integer key column of a small span as 32-bit offsets, and these tests are about the
//! 64-bit paths (compression has its own tests, `gpu_key_compression.rs`).
//!
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer property cases and the large
//! test at 2^18 rows (thousands of merge-path tiles); the 2^32-pair size count keeps its 2^16
//! rows a side.

mod common;
use common::{canonical_pairs, diff, fail, stream, uniform};

use std::cell::Cell;

use gpujoin_device::testing::{cases, pick, reduced, rows};

use gpujoin_device::{DeviceBuffer, Error, Stream};
use gpujoin_join::chunked::ChunkBudget;
use gpujoin_join::plan::{Algorithm, Gather, Join};
use gpujoin_join::table::{ColumnView, DataType, HostColumn, HostTable, Table, TableView, Value};
use gpujoin_join::{GatherMaps, JoinOptions, JoinType, NanEquality, NullEquality, RowId, Side, TestingOptions};
use gpujoin_testkit::datagen;
use gpujoin_testkit::reference::{self, vectors};
use gpujoin_testkit::table_reference;
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
    /// The library's choice: the fused per-tile path unless a tile's output is too large; in one
    /// pass where a bound of the output applies and holds, first the pass for keys with at most
    /// one row on one side.
    Default,
    /// The one pass for keys of any multiplicity at once.
    AnyMatchOnePass,
    /// The fused path, always counting, then writing.
    TwoPass,
    /// Always the general (load-balancing search) path.
    General,
}

impl MergePath {
    /// `opts` taking this path.
    fn opts(self, opts: JoinOptions) -> JoinOptions {
        let testing = TestingOptions {
            force_general_merge_path: self == MergePath::General,
            two_pass_merge: self == MergePath::TwoPass,
            any_match_one_pass: self == MergePath::AnyMatchOnePass,
            ..opts.testing
        };
        JoinOptions { testing, ..opts }
    }
}

const MERGE_PATHS: [MergePath; 4] = [MergePath::Default, MergePath::AnyMatchOnePass, MergePath::TwoPass, MergePath::General];

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

/// SQL's equalities, and the 64-bit key paths (no key compression: see the module docs).
const DEFAULT: JoinOptions = JoinOptions {
    null_equality: NullEquality::NullEqualsNothing,
    nan_equality: NanEquality::NanEqualsNan,
    testing: TestingOptions { no_key_compression: true, ..TestingOptions::DEFAULT },
    ..JoinOptions::DEFAULT
};

/// The four combinations of null and NaN equality.
const ALL_OPTIONS: [JoinOptions; 4] = [
    DEFAULT,
    JoinOptions { null_equality: NullEquality::NullEqualsNull, nan_equality: NanEquality::NanEqualsNan, ..DEFAULT },
    JoinOptions { null_equality: NullEquality::NullEqualsNothing, nan_equality: NanEquality::NanNeverEqual, ..DEFAULT },
    JoinOptions { null_equality: NullEquality::NullEqualsNull, nan_equality: NanEquality::NanNeverEqual, ..DEFAULT },
];

/// The key types of the generated columns.
const ALL_TYPES: [DataType; 6] = [DataType::Int32, DataType::Int64, DataType::UInt32, DataType::UInt64, DataType::Float32, DataType::Float64];
/// The key types the sorted merge takes.
const SORTED_TYPES: [DataType; 4] = [DataType::UInt32, DataType::UInt64, DataType::Int32, DataType::Int64];

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
// Tables of key columns
// ---------------------------------------------------------------------------------------------

/// A table of key columns `k0`, `k1`, ...
fn keys_table(columns: Vec<HostColumn>) -> HostTable {
    HostTable::new(columns.into_iter().enumerate().map(|(i, c)| (format!("k{i}"), c)).collect()).unwrap()
}

/// The key columns of a table (`k0`, `k1`, ...; other columns are payloads).
fn key_names(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).filter(|n| n.starts_with('k')).collect()
}

/// `reference::sort_pairs`'s canonical pairs of the CPU reference (`table_reference::equi_join`).
fn reference_pairs(l: &HostTable, r: &HostTable, jt: JoinType, opts: JoinOptions) -> Vec<(RowId, RowId)> {
    let pairs = table_reference::equi_join(l, &key_names(l.names()), r, &key_names(r.names()), jt, opts.null_equality, opts.nan_equality);
    sorted(pairs.into_iter().map(|(a, b)| (RowId::from_option(a), RowId::from_option(b))).collect())
}

/// The reference's output rows.
fn reference_size(l: &HostTable, r: &HostTable, jt: JoinType, opts: JoinOptions) -> u64 {
    table_reference::equi_join_count(l, &key_names(l.names()), r, &key_names(r.names()), jt, opts.null_equality, opts.nan_equality)
}

/// The front door's join of two uploaded tables on their key columns by `algorithm`, with the
/// equalities and test options of `opts`.
fn front_door<'a>(algorithm: Algorithm, l: &'a Table, r: &'a Table, jt: JoinType, opts: JoinOptions) -> Join<'a> {
    Join::new(jt)
        .on(l, &key_names(l.names()), r, &key_names(r.names()))
        .algorithm(algorithm)
        .null_equality(opts.null_equality)
        .nan_equality(opts.nan_equality)
        .testing(opts.testing)
}

// ---------------------------------------------------------------------------------------------
// Running a join and comparing it with the reference
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algo {
    /// `Algorithm::SortedMerge` (single sorted Int32/Int64/UInt32/UInt64 column, no nulls).
    SortedMerge,
    /// `Algorithm::SortMerge(Gather::Unclustered)` (any keys).
    SortMerge,
    /// `Algorithm::Interleave` (any keys).
    Interleave,
    /// `Join::chunks` (any keys), with a budget of about a third of the output, the chunks' maps
    /// concatenated.
    Chunked,
}

impl Algo {
    fn algorithm(self) -> Algorithm {
        match self {
            Algo::SortedMerge => Algorithm::SortedMerge,
            Algo::SortMerge | Algo::Chunked => Algorithm::SortMerge(Gather::Unclustered),
            Algo::Interleave => Algorithm::Interleave,
        }
    }
}

/// Runs `algo` on host tables (uploaded here) through the front door: its gather maps.
fn gpu_join(s: &Stream, algo: Algo, l: &HostTable, r: &HostTable, jt: JoinType, opts: JoinOptions) -> gpujoin_device::Result<GatherMaps> {
    match algo {
        Algo::SortedMerge => {
            assert!(l.columns().len() == 1 && r.columns().len() == 1, "the sorted merge takes one column");
            assert!(l.columns()[0].validity_buffer().is_none() && r.columns()[0].validity_buffer().is_none(), "the sorted merge has no nulls");
            let (a, b) = (l.columns()[0].data_type(), r.columns()[0].data_type());
            assert!(a == b && SORTED_TYPES.contains(&a), "the sorted merge takes UInt32/UInt64/Int32/Int64 columns of one type");
        }
        Algo::SortMerge | Algo::Interleave => {}
        Algo::Chunked => panic!("chunked joins come as chunks: see chunked_pairs"),
    }
    let (dl, dr) = (Table::upload(s, l)?, Table::upload(s, r)?);
    poison_for(s, l.rows() + r.rows());
    let out = front_door(algo.algorithm(), &dl, &dr, jt, opts).run(s)?;
    assert_eq!(out.algorithm, algo.algorithm(), "the requested algorithm ran ({})", out.reason);
    out.maps.ok_or_else(|| Error::invalid(format!("{algo:?}: no gather maps")))
}

/// The canonical pairs of any algorithm's output (every chunk of a chunked join).
fn gpu_pairs(s: &Stream, algo: Algo, l: &HostTable, r: &HostTable, jt: JoinType, opts: JoinOptions) -> Vec<(RowId, RowId)> {
    if algo == Algo::Chunked {
        return chunked_pairs(s, l, r, jt, opts).unwrap();
    }
    let maps = gpu_join(s, algo, l, r, jt, opts).unwrap();
    canonical_pairs(&maps, jt).unwrap_or_else(|e| panic!("{e}"))
}

/// The canonical pairs of `Join::chunks` with a budget of about a third of the output, after
/// checking that the chunks' rows add up to the planned total.
fn chunked_pairs(s: &Stream, l: &HostTable, r: &HostTable, jt: JoinType, opts: JoinOptions) -> gpujoin_device::Result<Vec<(RowId, RowId)>> {
    let rows = reference_size(l, r, jt, opts);
    let bytes_per_row = if jt.has_left_map() && jt.has_right_map() { 8 } else { 4 };
    let budget = ChunkBudget::Bytes(bytes_per_row * (rows / 3).max(1));
    let (dl, dr) = (Table::upload(s, l)?, Table::upload(s, r)?);
    poison_for(s, l.rows() + r.rows());
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let chunks = front_door(Algo::Chunked.algorithm(), &dl, &dr, jt, opts).chunks(s, budget)?;
    assert_eq!(chunks.source().path(), "equi", "an equi-join without a filter takes the chunked equi-join");
    let total = chunks.total_rows();
    for chunk in chunks {
        let (cl, cr) = chunk?.data.to_host()?;
        left.extend(cl);
        right.extend(cr);
    }
    assert_eq!(total, left.len().max(right.len()) as u64, "{jt:?}: the chunks' rows add up to the planned total");
    reference::try_pairs_from_maps(&left, &right, jt).map_err(|e| Error::invalid(format!("malformed chunk maps: {e}")))
}

fn describe(l: &HostTable, r: &HostTable) -> String {
    if l.rows() + r.rows() <= 48 {
        format!("\nleft\n{l}right\n{r}")
    } else {
        format!(" ({} x {} rows)", l.rows(), r.rows())
    }
}

/// Runs `algo` and compares with the reference as a multiset; for the sorted merge also the
/// documented output order.
fn check_join(s: &Stream, algo: Algo, l: &HostTable, r: &HostTable, jt: JoinType, opts: JoinOptions, what: &str) -> Result<(), TestCaseError> {
    check_join_against(s, algo, l, r, jt, opts, &reference_pairs(l, r, jt, opts), what)
}

/// [`check_join`] against the reference's pairs `want` (computed once for several runs).
#[allow(clippy::too_many_arguments)]
fn check_join_against(s: &Stream, algo: Algo, l: &HostTable, r: &HostTable, jt: JoinType, opts: JoinOptions, want: &[(RowId, RowId)], what: &str) -> Result<(), TestCaseError> {
    let error = |e: Error| fail(format!("{algo:?} {jt:?} {opts:?} {what}: error {e}{}", describe(l, r)));
    if algo == Algo::Chunked {
        let got = chunked_pairs(s, l, r, jt, opts).map_err(error)?;
        if got != want {
            return Err(fail(format!("{algo:?} {jt:?} {opts:?} {what}: {}{}", diff(&got, want), describe(l, r))));
        }
        return Ok(());
    }
    let maps = gpu_join(s, algo, l, r, jt, opts).map_err(error)?;
    let got = canonical_pairs(&maps, jt)?;
    if got != want {
        return Err(fail(format!("{algo:?} {jt:?} {opts:?} {what}: {}{}", diff(&got, want), describe(l, r))));
    }
    if algo == Algo::SortedMerge {
        // ModernGPU's order is the canonical order.
        let in_order = maps.pairs().unwrap();
        if in_order != *want {
            let k = in_order.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
            return Err(fail(format!(
                "{algo:?} {jt:?} {what}: right rows, wrong order: first difference at output row {k}: {:?} instead of {:?}",
                in_order.get(k),
                want.get(k)
            )));
        }
    }
    Ok(())
}

/// `Join::count` equals the reference's size.
fn check_size(s: &Stream, l: &HostTable, r: &HostTable, jt: JoinType, opts: JoinOptions, what: &str) -> Result<u64, TestCaseError> {
    let want = reference_size(l, r, jt, opts);
    let (dl, dr) = (Table::upload(s, l).unwrap(), Table::upload(s, r).unwrap());
    poison_for(s, l.rows() + r.rows());
    let got = front_door(Algo::SortMerge.algorithm(), &dl, &dr, jt, opts).count(s).map_err(|e| fail(format!("Join::count {jt:?} {opts:?} {what}: error {e}")))?;
    prop_assert_eq!(got, want, "Join::count {:?} {:?} {}{}", jt, opts, what, describe(l, r));
    Ok(want)
}

// ---------------------------------------------------------------------------------------------
// Data: shapes of single key columns
// ---------------------------------------------------------------------------------------------

/// Codes (small non-negative integers) as a key column of `ty`; injective, so equal codes and
/// only equal codes give equal keys. `spread` maps them over the whole range of the type
/// (sign bits, high bits) instead of small values.
fn column(ty: DataType, codes: &[u64], spread: bool) -> HostColumn {
    debug_assert!(codes.iter().all(|&c| c < 1 << 22));
    fn col<T: gpujoin_join::table::NativeValue>(codes: &[u64], f: impl Fn(u64) -> T) -> HostColumn {
        HostColumn::from_values(codes.iter().map(|&c| f(c)).collect())
    }
    match (ty, spread) {
        (DataType::UInt32, false) => col(codes, |c| c as u32),
        (DataType::UInt32, true) => col(codes, |c| (c as u32).wrapping_mul(0x9E37_79B1)),
        (DataType::Int32, false) => col(codes, |c| c as i32 - 1000),
        (DataType::Int32, true) => col(codes, |c| (c as u32).wrapping_mul(0x9E37_79B1) as i32),
        (DataType::UInt64, false) => col(codes, |c| c),
        (DataType::UInt64, true) => col(codes, |c| c.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        (DataType::Int64, false) => col(codes, |c| c as i64 - 1000),
        (DataType::Int64, true) => col(codes, |c| c.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64),
        (DataType::Float32, false) => col(codes, |c| c as f32 * 0.5 - 100.0),
        (DataType::Float32, true) => col(codes, |c| if c % 2 == 1 { -(c as f32) * 1.0e20 } else { c as f32 * 1.0e-20 }),
        (DataType::Float64, false) => col(codes, |c| c as f64 * 0.25 - 1000.0),
        (DataType::Float64, true) => col(codes, |c| if c % 2 == 1 { -(c as f64) * 1.0e200 } else { c as f64 * 1.0e-200 }),
        (t, _) => panic!("no generated columns of {t}"),
    }
}

/// The column's values sorted ascending (floats by `total_cmp`), as a column of its type.
fn sort_column(c: &HostColumn) -> HostColumn {
    let int = |v: &Value<'_>| match v {
        Value::Int(x) => *x,
        v => panic!("{v:?} in an integer column"),
    };
    let float = |v: &Value<'_>| match v {
        Value::Float(x) => *x,
        v => panic!("{v:?} in a float column"),
    };
    let v = c.values();
    fn sorted_by<T: gpujoin_join::table::NativeValue>(mut v: Vec<T>, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) -> HostColumn {
        v.sort_by(cmp);
        HostColumn::from_values(v)
    }
    match c.data_type() {
        DataType::Int32 => sorted_by(v.iter().map(|x| int(x) as i32).collect(), Ord::cmp),
        DataType::Int64 => sorted_by(v.iter().map(|x| int(x) as i64).collect(), Ord::cmp),
        DataType::UInt32 => sorted_by(v.iter().map(|x| int(x) as u32).collect(), Ord::cmp),
        DataType::UInt64 => sorted_by(v.iter().map(|x| int(x) as u64).collect(), Ord::cmp),
        DataType::Float32 => sorted_by(v.iter().map(|x| float(x) as f32).collect(), f32::total_cmp),
        DataType::Float64 => sorted_by(v.iter().map(float).collect(), f64::total_cmp),
        t => panic!("no sorting of {t} columns here"),
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
fn shapes_property(s: &Stream, algo: Algo, types: &[DataType], cases: u32, seed: u64, path: MergePath) {
    run(cases, seed, (shape_params(), any::<bool>()), |(p, spread)| {
        for (si, shape) in SHAPES.into_iter().enumerate() {
            let (lc, rc) = shape_codes(shape, &p);
            for (ti, &ty) in types.iter().enumerate() {
                let (mut l, mut r) = (column(ty, &lc, spread), column(ty, &rc, spread));
                if algo == Algo::SortedMerge {
                    l = sort_column(&l);
                    r = sort_column(&r);
                }
                let (hl, hr) = (keys_table(vec![l]), keys_table(vec![r]));
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

fn pool_len(ty: DataType) -> usize {
    match ty {
        DataType::Float32 => F32_POOL.len(),
        DataType::Float64 => F64_POOL.len(),
        _ => INT_POOL.len(),
    }
}

/// One key column's shape: its type, the pool values it draws from, and its nulls.
#[derive(Debug, Clone)]
struct ColSpec {
    ty: DataType,
    /// Indices into the type's pool.
    values: Vec<usize>,
    /// 0: no validity; 1: a validity without nulls; 2..: nulls with probability (mode - 1) / 8.
    validity_mode: u8,
}

fn random_spec(rng: &mut StdRng, ty: DataType) -> ColSpec {
    let mut all: Vec<usize> = (0..pool_len(ty)).collect();
    all.shuffle(rng);
    let domain = rng.gen_range(1..=all.len());
    all.truncate(domain);
    let validity_mode = if rng.gen_bool(0.4) { 0 } else { rng.gen_range(1..=5) };
    ColSpec { ty, values: all, validity_mode }
}

fn pool_column(ty: DataType, idx: &[usize]) -> HostColumn {
    match ty {
        DataType::Int32 => HostColumn::from_values(idx.iter().map(|&i| INT_POOL[i] as i32).collect()),
        DataType::Int64 => HostColumn::from_values(idx.iter().map(|&i| INT_POOL[i]).collect()),
        DataType::UInt32 => HostColumn::from_values(idx.iter().map(|&i| INT_POOL[i] as u32).collect()),
        DataType::UInt64 => HostColumn::from_values(idx.iter().map(|&i| INT_POOL[i] as u64).collect()),
        DataType::Float32 => HostColumn::from_values(idx.iter().map(|&i| f32::from_bits(F32_POOL[i])).collect()),
        DataType::Float64 => HostColumn::from_values(idx.iter().map(|&i| f64::from_bits(F64_POOL[i])).collect()),
        t => panic!("no pool of {t} values"),
    }
}

/// A table of `n` rows of keys of the given column specs. A side may differ from its spec in
/// whether a column has a validity (nullable on one side only; a validity without nulls).
fn pool_keys(rng: &mut StdRng, specs: &[ColSpec], n: usize) -> HostTable {
    let mut columns = Vec::new();
    for spec in specs {
        let idx: Vec<usize> = (0..n).map(|_| spec.values[rng.gen_range(0..spec.values.len())]).collect();
        let column = pool_column(spec.ty, &idx);
        let mode = match spec.validity_mode {
            0 if rng.gen_ratio(1, 5) => 1,
            m if m >= 2 && rng.gen_ratio(1, 5) => 0,
            m => m,
        };
        columns.push(match mode {
            0 => column,
            1 => column.with_validity(&vec![true; n]).unwrap(),
            m => column.with_validity(&(0..n).map(|_| rng.gen_range(0..8u8) >= m - 1).collect::<Vec<_>>()).unwrap(),
        });
    }
    keys_table(columns)
}

/// A key value as the join compares it: NULL as its own value (NullEqualsNull), every NaN as
/// one (NanEqualsNan), `-0.0` as `0.0`.
fn normalized(v: Value<'_>) -> (u128, bool) {
    match v {
        Value::Null => (0, true),
        Value::Int(x) => (x as u128, false),
        Value::Float(x) if x.is_nan() => (f64::NAN.to_bits() as u128, false),
        Value::Float(x) => ((if x == 0.0 { 0 } else { x.to_bits() }) as u128, false),
        v => panic!("{v:?} in a generated key column"),
    }
}

/// Number of distinct keys (under `NullEqualsNull`, NaN equal NaN) over both sides.
fn distinct_keys(l: &HostTable, r: &HostTable) -> usize {
    let key = |t: &HostTable, i: usize| -> Vec<(u128, bool)> { t.columns().iter().map(|c| normalized(c.value(i))).collect() };
    let mut all: Vec<Vec<(u128, bool)>> = (0..l.rows()).map(|i| key(l, i)).chain((0..r.rows()).map(|i| key(r, i))).collect();
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

/// A table of one `Int32` key column.
fn i32_table(keys: &[i32]) -> HostTable {
    keys_table(vec![HostColumn::from_values(keys.to_vec())])
}

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
    let sorted_merge = |a: &Table, b: &Table, jt| {
        let out = front_door(Algorithm::SortedMerge, a, b, jt, opts).run(&s).unwrap();
        assert_eq!(out.algorithm, Algorithm::SortedMerge);
        out.maps.unwrap()
    };
    let (ha, hb) = (i32_table(&vectors::MGPU_A_KEYS), i32_table(&vectors::MGPU_B_KEYS));
    let (a, b) = (Table::upload(&s, &ha).unwrap(), Table::upload(&s, &hb).unwrap());
    poison_for(&s, 60);
    let inner = sorted_merge(&a, &b, JoinType::Inner);
    assert_eq!(inner.rows(), 19);
    assert_eq!(inner.pairs().unwrap(), vectors::to_pairs(&vectors::MGPU_INNER), "{path:?} path: inner join: the 19 printed pairs in order");
    poison_for(&s, 60);
    let outer = sorted_merge(&a, &b, JoinType::Full);
    assert_eq!(outer.rows(), 50);
    assert_eq!(outer.pairs().unwrap(), vectors::to_pairs(&vectors::MGPU_OUTER), "{path:?} path: outer join: the 50 printed pairs in order");

    // Every join type vs the reference, in order through the sorted merge and as a multiset
    // through the others.
    for jt in JoinType::ALL {
        for algo in [Algo::SortedMerge, Algo::SortMerge, Algo::Interleave] {
            let what = format!("MGPU demo, {path:?} path");
            check_join(&s, algo, &ha, &hb, jt, opts, &what).unwrap_or_else(|e| panic!("{e}"));
            check_join(&s, algo, &hb, &ha, jt, opts, &format!("{what}, sides swapped")).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    // The example of the sorted merge's documentation.
    let a = Table::upload(&s, &i32_table(&[100, 101, 103, 103])).unwrap();
    let b = Table::upload(&s, &i32_table(&[100, 100, 102, 103])).unwrap();
    let full = sorted_merge(&a, &b, JoinType::Full).pairs().unwrap();
    let n = RowId::NONE;
    assert_eq!(full, vec![(id(0), id(0)), (id(0), id(1)), (id(1), n), (id(2), id(3)), (id(3), id(3)), (n, id(2))], "{path:?} path");
}

#[test]
fn interleave_worked_example_left_join_has_the_10_rows() {
    let Some(s) = stream("interleave_worked_example_left_join_has_the_10_rows") else { return };
    let (hl, hr) = (i32_table(&vectors::INTERLEAVE_L_KEYS), i32_table(&vectors::INTERLEAVE_R_KEYS));
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

/// The sorted merge checks its inputs' order (in the fused path, inside its own counting pass):
/// one descent anywhere on either side, at merge-path tile boundaries (2048 items a tile) or
/// within a tile, at the first and the last pair, is refused for every join type on both
/// paths, naming the side; the same keys sorted join to the reference's row count.
#[test]
fn sorted_merge_refuses_one_descent_anywhere() {
    let Some(s) = stream("sorted_merge_refuses_one_descent_anywhere") else { return };
    let mut rng = StdRng::seed_from_u64(0x5047_ED02);
    let big = rows(300_000, 20_000);
    let shapes: Vec<(usize, usize)> = vec![(2, 2), (3, 1), (2047, 2049), (2048, 4096), (4097, 3), (big, big / 3 + 1), (big / 2 + 1, big)];
    let sorted_keys = |rng: &mut StdRng, n: usize| -> Vec<i64> {
        let mut v: Vec<i64> = (0..n).map(|_| rng.gen_range(0..(n as i64 / 2).max(1))).collect();
        v.sort();
        v
    };
    // Under the sanitizer: the join types of the three kinds of paths (fused, semi/anti, outer).
    let join_types = pick(JoinType::ALL.to_vec(), vec![JoinType::Inner, JoinType::Full, JoinType::LeftAnti]);
    let mut refused = 0;
    for (na, nb) in shapes {
        let (a, b) = (sorted_keys(&mut rng, na), sorted_keys(&mut rng, nb));
        for t in [DataType::UInt32, DataType::Int64] {
            let column = |v: &[i64]| match t {
                DataType::UInt32 => HostColumn::from_values(v.iter().map(|&x| x as u32).collect::<Vec<u32>>()),
                _ => HostColumn::from_values(v.iter().map(|&x| x - (1 << 40)).collect::<Vec<i64>>()),
            };
            let table = |v: &[i64]| Table::upload(&s, &keys_table(vec![column(v)])).unwrap();
            let (ha, hb) = (keys_table(vec![column(&a)]), keys_table(vec![column(&b)]));
            let (ta, tb) = (table(&a), table(&b));
            for path in MERGE_PATHS {
                let opts = path.opts(DEFAULT);
                for jt in JoinType::ALL {
                    let want = reference_size(&ha, &hb, jt, opts);
                    let got = front_door(Algorithm::SortedMerge, &ta, &tb, jt, opts).run(&s).unwrap_or_else(|e| panic!("{na} x {nb} {t} sorted, {jt:?}, {path:?}: {e}"));
                    assert_eq!(got.rows, want, "{na} x {nb} {t} sorted, {jt:?}, {path:?}");
                }
            }
            // One key raised above every other: a descent right after it.
            for (side, keys) in [(Side::Left, &a), (Side::Right, &b)] {
                let n = keys.len();
                if n < 2 {
                    continue;
                }
                let mut positions = vec![0, n - 2, rng.gen_range(0..n - 1)];
                positions.extend([1023, 2047, 2048, 4095].into_iter().filter(|&p| p + 1 < n));
                for p in positions {
                    let mut bad = keys.clone();
                    bad[p] = n as i64;
                    let tbad = table(&bad);
                    let (l, r) = if side == Side::Left { (&tbad, &tb) } else { (&ta, &tbad) };
                    for path in MERGE_PATHS {
                        for &jt in &join_types {
                            let what = format!("{na} x {nb} {t}, {side:?} descent after row {p}, {jt:?}, {path:?}");
                            match front_door(Algorithm::SortedMerge, l, r, jt, path.opts(DEFAULT)).run(&s) {
                                Err(Error::Unsupported { reason, .. }) => {
                                    let named = if side == Side::Left { "the left keys are not sorted (1 descents)" } else { "the right keys are not sorted (1 descents)" };
                                    assert_eq!(reason, named, "{what}");
                                    refused += 1;
                                }
                                other => panic!("{what}: {:?}", other.map(|o| o.rows)),
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(refused > pick(500, 100), "{refused}");
}

/// The sorted merge's one pass (maps of a bound of the output, filled in one pass over the
/// merge-path tiles by decoupled look-back) across many tiles (more than the 32 one look-back
/// step reads): outputs that fill its capacity, half of it (kept, truncated), a sixteenth of it
/// (copied to exact maps), none of it; and the outputs it hands on: past its capacity (many keys
/// on both sides: count, then write) and, on the paths that count rows per left item (the pass
/// for any keys, the two passes), one tile past its cap (a hot key on the right: the general
/// path; on the default path the single-match pass takes that key). The first pass, for keys with at most
/// one row on one side: keys repeated on the right (rows at the B items), on the left (rows at
/// the A items), both kinds in one join, and one key with two rows on both sides at the start or
/// near the end (it hands over to the pass for any keys).
/// Every join type on every path, in order, against the reference.
#[test]
fn sorted_merge_one_pass_across_many_tiles() {
    let Some(s) = stream("sorted_merge_one_pass_across_many_tiles") else { return };
    // Reduced: 2^15 rows a side, 32 tiles a side.
    let n = rows(1 << 18, 1 << 15) as u64;
    let mut rng = StdRng::seed_from_u64(0x5047_ED03);
    let mut foreign: Vec<u64> = (0..n).map(|_| rng.gen_range(0..n * 10 / 9)).collect();
    foreign.sort();
    let mut hot: Vec<u64> = (0..n - 20_000).map(|_| rng.gen_range(0..n)).chain(std::iter::repeat_n(n / 2, 20_000)).collect();
    hot.sort();
    let mut foreign_left: Vec<u64> = (0..n).map(|_| rng.gen_range(0..n * 10 / 9)).collect();
    foreign_left.sort();
    // 0..n with key `at` twice (and n - 1 gone).
    let dup_at = |at: u64| -> Vec<u64> { (0..n).map(|k| if k > at { k - 1 } else { k }).collect() };
    let cases: Vec<(&str, Vec<u64>, Vec<u64>)> = vec![
        ("equal unique keys", (0..n).collect(), (0..n).collect()),
        ("half matching", (0..n).collect(), (n / 2..n / 2 + n).collect()),
        ("foreign keys, a tenth missing", (0..n).collect(), foreign),
        ("a sixteenth matching", (0..n).map(|k| 16 * k).collect(), (0..n).map(|k| 16 * k + (k % 16 != 0) as u64).collect()),
        ("no matches", (0..n).map(|k| 2 * k).collect(), (0..n).map(|k| 2 * k + 1).collect()),
        ("four rows a key on both sides", (0..n).map(|k| k / 4).collect(), (0..n).map(|k| k / 4).collect()),
        ("a hot key", (0..n).collect(), hot.clone()),
        // Keys repeated on the left, unique on the right: rows at the A items of a key.
        ("foreign keys on the left", foreign_left.clone(), (0..n).collect()),
        ("a hot key on the left", hot, (0..n).collect()),
        ("pairs on the left, one row a key on the right", (0..n).map(|k| k / 2).collect(), (0..n).map(|k| k + n / 4).collect()),
        // One key with two rows a side, at the start and near the end: the first pass hands over.
        ("one key repeated on both sides first", dup_at(0), dup_at(0)),
        ("one key repeated on both sides last", dup_at(n - 3), dup_at(n - 3)),
        ("one key twice on the left, another twice on the right", dup_at(n / 3), dup_at(n / 2)),
    ];
    for (what, a, b) in &cases {
        for ty in [DataType::UInt32, DataType::Int64] {
            let (hl, hr) = (keys_table(vec![sort_column(&column(ty, a, false))]), keys_table(vec![sort_column(&column(ty, b, false))]));
            for jt in JoinType::ALL {
                let want = reference_pairs(&hl, &hr, jt, DEFAULT);
                for path in MERGE_PATHS {
                    check_join_against(&s, Algo::SortedMerge, &hl, &hr, jt, path.opts(DEFAULT), &want, &format!("{what} ({n} rows a side), {ty}, {path:?} path"))
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
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
        let types: Vec<DataType> = specs.iter().map(|c| c.ty).collect();
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
        (keys_table(vec![HostColumn::from_values(l64.to_vec())]), keys_table(vec![HostColumn::from_values(r64.to_vec())])),
        (keys_table(vec![HostColumn::from_values(l32)]), keys_table(vec![HostColumn::from_values(r32)])),
    ];
    let p = |v: &[(u32, u32)]| sorted(v.iter().map(|&(a, b)| (id(a), id(b))).collect());
    // Written out from the definition, independently of the reference.
    let nan_equal = p(&[(0, 0), (1, 0), (2, 1), (2, 4), (3, 1), (3, 4), (4, 1), (4, 4), (5, 2), (6, 3)]);
    let nan_never = p(&[(0, 0), (1, 0), (5, 2), (6, 3)]);
    for (ci, (l, r)) in cases.iter().enumerate() {
        for (oi, opts) in ALL_OPTIONS.into_iter().enumerate() {
            let want_inner = if opts.nan_equality == NanEquality::NanEqualsNan { &nan_equal } else { &nan_never };
            assert_eq!(&reference_pairs(l, r, JoinType::Inner, opts), want_inner);
            for algo in [Algo::SortMerge, Algo::Interleave, Algo::Chunked] {
                assert_eq!(&gpu_pairs(&s, algo, l, r, JoinType::Inner, opts), want_inner, "{algo:?} {opts:?}\n{l}");
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
    let l = keys_table(vec![HostColumn::from_values(vec![f32::NAN, f32::NAN, -0.0]), HostColumn::from_values(vec![1i32, 2, 5])]);
    let r = keys_table(vec![HostColumn::from_values(vec![f32::from_bits(0x7FC0_0077), 0.0]), HostColumn::from_values(vec![1i32, 5])]);
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
        let l = keys_table(vec![column(ty, &[1, 1, 7, 2], false).with_validity(&lv).unwrap()]);
        let r = keys_table(vec![column(ty, &[0, 1, 2, 2], false).with_validity(&rv).unwrap()]);
        for (oi, opts) in ALL_OPTIONS.into_iter().enumerate() {
            let want = if opts.null_equality == NullEquality::NullEqualsNull {
                p(&[(0, 1), (1, 0), (1, 2), (2, 0), (2, 2), (3, 3)])
            } else {
                p(&[(0, 1), (3, 3)])
            };
            assert_eq!(reference_pairs(&l, &r, JoinType::Inner, opts), want);
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
    let l = keys_table(vec![HostColumn::from_values(vec![1u32, 1, 2]), HostColumn::from_values(vec![5i64, 9, 5]).with_validity(&[true, false, true]).unwrap()]);
    let r = keys_table(vec![HostColumn::from_values(vec![1u32, 1, 2]), HostColumn::from_values(vec![5i64, 0, 6])]);
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
const WIDE_LAYOUTS: [&[DataType]; 9] = [
    &[DataType::UInt64, DataType::UInt64],
    &[DataType::UInt64, DataType::Float64, DataType::Int32],
    &[DataType::Int64, DataType::UInt32, DataType::Float64, DataType::UInt64],
    &[DataType::Float64, DataType::Float64],
    &[DataType::UInt32, DataType::UInt32, DataType::UInt32],
    &[DataType::Float32, DataType::Int64, DataType::UInt32],
    // 64 bits: exact for the sort-merge join, hashed by the interleave join; 66 bits (both
    // hashed) when nullable under NullEqualsNull.
    &[DataType::Int32, DataType::Float32],
    // Single 64-bit columns: hashed by the interleave join.
    &[DataType::UInt64],
    &[DataType::Float64],
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
            check_many(&s, DataType::UInt64, true, &codes, opts, "weak hash")?;
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
                let (l, r) = (keys_table(vec![column(ty, &lc, spread)]), keys_table(vec![column(ty, &rc, spread)]));
                for jt in join_types(si * ALL_TYPES.len() + ti) {
                    check_size(&s, &l, &r, jt, DEFAULT, &format!("shape {shape:?} {ty:?}"))?;
                }
            }
        }
        // Exact and hashed keys with nulls and NaNs, under every option.
        for (li, layout) in [&[DataType::Float64][..], &[DataType::Int32], &[DataType::UInt32, DataType::Float32]].into_iter().chain(WIDE_LAYOUTS).enumerate() {
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
    // one of 2^16 x 2^16 (2^32 pairs: counted, never written out, for exact keys; also when
    // reduced, for the 32-bit limit).
    for (n, ty) in [(3000usize, DataType::Int64), (1 << 16, DataType::UInt32)] {
        let k = keys_table(vec![column(ty, &vec![5; n], true)]);
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

/// `Join::many` on tables of one key column (`codes`, None = null) of type `ty` against the
/// brute-force N-way join.
fn check_many(s: &Stream, ty: DataType, spread: bool, codes: &[Vec<Option<u64>>], opts: JoinOptions, what: &str) -> Result<(), TestCaseError> {
    let tables: Vec<HostTable> = codes
        .iter()
        .map(|c| {
            let values: Vec<u64> = c.iter().map(|k| k.unwrap_or(3)).collect();
            let nullable = c.iter().any(|k| k.is_none());
            let column = column(ty, &values, spread);
            keys_table(vec![if nullable { column.with_validity(&c.iter().map(|k| k.is_some()).collect::<Vec<_>>()).unwrap() } else { column }])
        })
        .collect();
    let sizes: Vec<usize> = codes.iter().map(Vec::len).collect();
    let ctx = format!("{what}: {} tables {sizes:?} of {ty:?}, {opts:?}", codes.len());
    check_many_tables(s, &tables, &["k0"], codes, opts, &ctx)
}

/// `Join::many` of `tables` on their columns `on` against the brute-force N-way join of `codes`
/// (each table's keys as codes: equal codes exactly where the keys are equal; None = null).
fn check_many_tables(s: &Stream, tables: &[HostTable], on: &[&str], codes: &[Vec<Option<u64>>], opts: JoinOptions, ctx: &str) -> Result<(), TestCaseError> {
    let dev: Vec<Table> = tables.iter().map(|t| Table::upload(s, t).unwrap()).collect();
    poison_for(s, codes.iter().map(Vec::len).sum::<usize>() * 4);
    let inputs: Vec<(TableView<'_>, &[&str])> = dev.iter().map(|t| (t.view(), on)).collect();
    let out = Join::many(&inputs)
        .null_equality(opts.null_equality)
        .nan_equality(opts.nan_equality)
        .testing(opts.testing)
        .run(s)
        .map_err(|e| fail(format!("{ctx}: error {e}")))?;
    let maps = out.maps;
    prop_assert_eq!(maps.len(), codes.len(), "{}: one map per table", ctx);
    let host: Vec<Vec<RowId>> = maps.iter().map(|m| m.to_vec().unwrap()).collect();
    let n = host[0].len();
    prop_assert_eq!(out.rows, n as u64, "{}: rows", ctx);
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

/// Codes below 16 as a key column of any type (Boolean: below 2), injective, nulls where the
/// code is None; `large` makes a string column of the other string type (the two compare).
fn typed_column(ty: DataType, codes: &[Option<u64>], large: bool) -> HostColumn {
    let valid: Vec<bool> = codes.iter().map(Option::is_some).collect();
    let c: Vec<u64> = codes.iter().map(|k| k.unwrap_or(1)).collect();
    fn col<T: gpujoin_join::table::NativeValue>(c: &[u64], f: impl Fn(u64) -> T) -> HostColumn {
        HostColumn::from_values(c.iter().map(|&x| f(x)).collect())
    }
    let strings = || c.iter().map(|&x| format!("{}#{x}", "ab".repeat(x as usize % 3))).collect::<Vec<_>>();
    let column = match ty {
        DataType::Int8 => col(&c, |x| x as i8 - 3),
        DataType::Int16 => col(&c, |x| (x as i16 - 3) * 1000),
        DataType::Int32 | DataType::Int64 | DataType::UInt32 | DataType::UInt64 | DataType::Float32 | DataType::Float64 => column(ty, &c, true),
        DataType::UInt8 => col(&c, |x| x as u8 + 200),
        DataType::UInt16 => col(&c, |x| x as u16 * 4000),
        DataType::Boolean => HostColumn::from_bools(&c.iter().map(|&x| x == 1).collect::<Vec<_>>()),
        DataType::Date32 => col(&c, |x| x as i32 * 365 - 1000).with_type(ty).unwrap(),
        DataType::Date64 | DataType::Timestamp(_) => col(&c, |x| (x as i64 - 3) << 40).with_type(ty).unwrap(),
        DataType::Decimal128(..) => col(&c, |x| (x as i128 - 3) * 1_000_000_000_000_000_000_007).with_type(ty).unwrap(),
        // `large` flips the string type.
        DataType::Utf8 | DataType::LargeUtf8 if (ty == DataType::LargeUtf8) != large => HostColumn::large_utf8_options(strings().into_iter().map(Some)),
        DataType::Utf8 | DataType::LargeUtf8 => HostColumn::utf8(strings()),
    };
    if valid.iter().all(|&v| v) {
        column
    } else {
        column.with_validity(&valid).unwrap()
    }
}

/// [`typed_column`] of `codes` behind `extra` leading rows (some null), sliced to `codes`' rows:
/// an Arrow slice (values read from element `extra`, the validity from bit `extra`).
fn typed_slice(ty: DataType, codes: &[Option<u64>], large: bool, extra: usize) -> HostColumn {
    let padded: Vec<Option<u64>> = (0..extra).map(|i| (i % 2 == 1).then_some(1)).chain(codes.iter().copied()).collect();
    typed_column(ty, &padded, large).slice(extra, codes.len()).unwrap()
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
    check_many(&s, DataType::Int32, false, &four, DEFAULT, "fixed").unwrap_or_else(|e| panic!("{e}"));
    check_many(&s, DataType::Int32, false, &four[..3], DEFAULT, "fixed").unwrap_or_else(|e| panic!("{e}"));

    // Every key type of the table model (strings as ranks equal across the tables, a Utf8 table
    // beside LargeUtf8 ones), the columns Arrow slices (values and validity read from an offset),
    // under both null equalities; then composite keys (an Int32 and a Utf8 column, a Decimal128
    // and a Boolean column: 3 prepared columns), nulls in both columns of a null code.
    let mut rng = StdRng::seed_from_u64(0x4A11_0004);
    for (ti, ty) in DataType::EXAMPLES.into_iter().enumerate() {
        let domain = if ty == DataType::Boolean { 2 } else { 6 };
        let nt = 2 + ti % 3;
        let codes: Vec<Vec<Option<u64>>> =
            (0..nt).map(|_| (0..rng.gen_range(0..40)).map(|_| rng.gen_ratio(7, 8).then(|| rng.gen_range(0..domain))).collect()).collect();
        let tables: Vec<HostTable> = codes.iter().enumerate().map(|(t, c)| keys_table(vec![typed_slice(ty, c, t % 2 == 1, 3 + t)])).collect();
        for opts in [DEFAULT, ALL_OPTIONS[1]] {
            check_many_tables(&s, &tables, &["k0"], &codes, opts, &format!("{nt} tables of {ty} keys, sliced, {opts:?}")).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    for (a, b) in [(DataType::Int32, DataType::Utf8), (DataType::Decimal128(38, 2), DataType::Boolean)] {
        let codes: Vec<Vec<Option<u64>>> = (0..3).map(|_| (0..rng.gen_range(1..30)).map(|_| rng.gen_ratio(7, 8).then(|| rng.gen_range(0..8))).collect()).collect();
        // Code x is the pair (x / 2, x % 2): injective.
        let part = |c: &[Option<u64>], f: fn(u64) -> u64| c.iter().map(|k| k.map(f)).collect::<Vec<_>>();
        let tables: Vec<HostTable> =
            codes.iter().map(|c| keys_table(vec![typed_column(a, &part(c, |x| x / 2), false), typed_column(b, &part(c, |x| x % 2), false)])).collect();
        for opts in [DEFAULT, ALL_OPTIONS[1]].map(weak_hash) {
            check_many_tables(&s, &tables, &["k0", "k1"], &codes, opts, &format!("composite ({a}, {b}), weak hash, {opts:?}")).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    // Errors before any device work: too few or too many tables, key types that differ, unknown
    // columns, different numbers of key columns, no key columns, a composite key too wide.
    let table = Table::upload(
        &s,
        &HostTable::new(vec![
            ("u", HostColumn::from_values(vec![1u32, 2])),
            ("i", HostColumn::from_values(vec![1i32, 2])),
            ("d", HostColumn::from_values(vec![1i128, 2]).with_type(DataType::Decimal128(38, 2)).unwrap()),
        ])
        .unwrap(),
    )
    .unwrap();
    let v = || table.view();
    let err = |inputs: &[(TableView<'_>, &[&str])]| Join::many(inputs).run(&s).err();
    assert!(matches!(err(&[(v(), &["u"])]), Some(Error::InvalidArgument(_))), "one table");
    assert!(matches!(err(&vec![(v(), &["u"][..]); 17]), Some(Error::InvalidArgument(_))), "17 tables");
    assert!(matches!(err(&[(v(), &["u"]), (v(), &["u"]), (v(), &["i"])]), Some(Error::TypeMismatch { .. })), "UInt32 and Int32 keys");
    assert!(matches!(err(&[(v(), &["u"]), (v(), &["x"])]), Some(Error::UnknownColumn { .. })), "an unknown column");
    assert!(matches!(err(&[(v(), &["u", "i"]), (v(), &["u"])]), Some(Error::InvalidArgument(_))), "2 and 1 key columns");
    assert!(matches!(err(&[(v(), &[]), (v(), &[])]), Some(Error::InvalidArgument(_))), "no key columns");
    assert!(matches!(err(&[(v(), &["d", "d", "d"]), (v(), &["d", "d", "d"])]), Some(Error::Unsupported { .. })), "6 prepared key columns");
    // Valid inputs still work after all that: one tuple for each of the keys 1 and 2.
    let ok = Join::many(&[(v(), &["u"][..])]).table(&table, &["u"]).table(&table, &["u"]).run(&s).unwrap();
    assert_eq!((ok.rows, ok.maps.len()), (2, 3));
}

// ---------------------------------------------------------------------------------------------
// Materialization
// ---------------------------------------------------------------------------------------------

/// Checks one side's gathered `p32` (`UInt32`) and `p64` (`Float64`) columns (named
/// `{side}.p32`, `{side}.p64` in the output) against the host: row `k` is `column[map[k]]`, null
/// where `map[k]` is NONE, and a validity exactly when the side can have null rows.
fn check_gathered(out: &HostTable, side: &str, map: &[RowId], p32: &[u32], p64: &[f64], nullable: bool, what: &str) -> Result<(), TestCaseError> {
    let column = |name: String| out.column(&name).map_err(|e| fail(format!("{what}: {e}")));
    let (c32, c64) = (column(format!("{side}.p32"))?, column(format!("{side}.p64"))?);
    prop_assert_eq!((c32.data_type(), c64.data_type()), (DataType::UInt32, DataType::Float64), "{}: the input columns' types", what);
    prop_assert_eq!((c32.len(), c64.len()), (map.len(), map.len()), "{}: one output row per map entry", what);
    let want32: Vec<Value<'_>> = map.iter().map(|m| m.get().map_or(Value::Null, |i| Value::Int(p32[i as usize] as i128))).collect();
    prop_assert_eq!(c32.values(), want32, "{}: u32 column", what);
    let bits = |v: Value<'_>| match v {
        Value::Float(x) => Some(x.to_bits()),
        _ => None,
    };
    let want64: Vec<Option<u64>> = map.iter().map(|m| m.get().map(|i| p64[i as usize].to_bits())).collect();
    prop_assert_eq!(c64.values().into_iter().map(bits).collect::<Vec<_>>(), want64, "{}: f64 column", what);
    for c in [c32, c64] {
        prop_assert_eq!(c.validity_buffer().is_some(), nullable, "{}: a validity exactly for a side with null rows", what);
    }
    if !nullable {
        prop_assert!(map.iter().all(|m| !m.is_none()), "{}: NONE in a map of a side without null rows", what);
    }
    Ok(())
}

/// A table of a `UInt32` key column `k0` and the payload columns `p32` and `p64`.
fn payload_table(keys: HostColumn, p32: &[u32], p64: &[f64]) -> HostTable {
    HostTable::new(vec![("k0", keys), ("p32", HostColumn::from_values(p32.to_vec())), ("p64", HostColumn::from_values(p64.to_vec()))]).unwrap()
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
        for algo in [Algo::SortedMerge, Algo::SortMerge, Algo::Interleave] {
            // The sorted merge joins the sorted keys; payload rows are rows of its input.
            let (mut l, mut r) = (HostColumn::from_values(lk.clone()), HostColumn::from_values(rk.clone()));
            if algo == Algo::SortedMerge {
                l = sort_column(&l);
                r = sort_column(&r);
            }
            let (hl, hr) = (payload_table(l, &lpay32, &lpay64), payload_table(r, &rpay32, &rpay64));
            let (dl, dr) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
            for jt in [JoinType::Left, JoinType::Full, JoinType::Inner, JoinType::Right] {
                poison_for(&s, (nl + nr) * 2);
                let out = front_door(algo.algorithm(), &dl, &dr, jt, DEFAULT).select(&["p32", "p64"], &["p32", "p64"]).run(&s).map_err(|e| fail(format!("{algo:?} {jt:?}: {e}")))?;
                prop_assert_eq!(out.algorithm, algo.algorithm());
                let maps = out.maps.as_ref().ok_or_else(|| fail(format!("{algo:?} {jt:?}: no maps")))?;
                let got = canonical_pairs(maps, jt)?;
                prop_assert_eq!(&got, &reference_pairs(&hl, &hr, jt, DEFAULT), "{:?} {:?}", algo, jt);
                let (lm, rm) = maps.to_host().unwrap();
                if jt == JoinType::Left {
                    prop_assert!(rm.iter().any(|r| r.is_none()) && rm.iter().any(|r| !r.is_none()), "both matched and unmatched rows");
                }
                let table = out.table.to_host().unwrap();
                prop_assert_eq!(table.names(), ["left.p32", "left.p64", "right.p32", "right.p64"], "{:?} {:?}: the columns selected on both sides, prefixed", algo, jt);
                for (side, name, map, p32, p64) in [(Side::Left, "left", &lm, &lpay32, &lpay64), (Side::Right, "right", &rm, &rpay32, &rpay64)] {
                    let what = format!("{algo:?} {jt:?} {side:?} side");
                    check_gathered(&table, name, map, p32, p64, maps.nullable(side), &what)?;
                    // In these inputs every join type that keeps unmatched rows has some.
                    prop_assert_eq!(maps.nullable(side), map.iter().any(|m| m.is_none()), "{}: nullable()", what);

                    // A column too short for the map cannot reach the front door: a table's
                    // columns have its rows, and a view of columns of different lengths (the
                    // boundary row out) is an error, also when it is the second of the columns.
                    let Some(max) = map.iter().filter_map(|m| m.get()).max() else { continue };
                    let d = if side == Side::Left { &dl } else { &dr };
                    let col = |n: &str| d.column(n).unwrap().view();
                    let short = col("p64").slice(0, max as usize).unwrap();
                    let res = TableView::new(vec![("k0", col("k0")), ("p64", short)]);
                    prop_assert!(invalid(res), "{}: map entry {} past a column of {} rows", what, max, max);
                    let res = TableView::new(vec![("k0", col("k0")), ("p32", col("p32")), ("p64", short)]);
                    prop_assert!(invalid(res), "{}: short second column", what);
                }
            }
        }
        Ok(())
    });
    // A side the join type has no rows of is an error; an empty map gives empty columns.
    let table = |keys: Vec<u32>| {
        let n = keys.len();
        Table::upload(&s, &payload_table(HostColumn::from_values(keys), &vec![0; n], &(0..n).map(|i| i as f64 + 1.0).collect::<Vec<_>>())).unwrap()
    };
    let (e, r) = (table(vec![]), table(vec![1, 2]));
    let semi = front_door(Algorithm::SortMerge(Gather::Unclustered), &r, &r, JoinType::LeftSemi, DEFAULT).select(&[], &["p64"]).run(&s);
    assert!(invalid(semi));
    let anti = front_door(Algorithm::Interleave, &r, &e, JoinType::RightAnti, DEFAULT).select(&["p64"], &[]).run(&s);
    assert!(invalid(anti));
    let out = front_door(Algorithm::SortMerge(Gather::Unclustered), &e, &r, JoinType::Left, DEFAULT).select(&["p64"], &[]).run(&s).unwrap();
    assert_eq!(out.table.names(), ["p64"]);
    let c = out.table.column("p64").unwrap();
    assert!(c.data_type() == DataType::Float64 && c.is_empty(), "one empty f64 column expected");
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
    let ta = Table::upload(
        &s,
        &HostTable::new(vec![
            ("a", HostColumn::from_values(vec![1i32, 2, 3])),
            ("b", HostColumn::from_values(vec![1u32, 2, 3])),
            ("d", HostColumn::from_values(vec![0.5f64, 1.0, 2.0])),
        ])
        .unwrap(),
    )
    .unwrap();
    let tc = Table::upload(&s, &HostTable::new(vec![("c", HostColumn::from_values(vec![1i32, 2]))]).unwrap()).unwrap();
    let join = |l_on: &[&str], r_on: &[&str], jt: JoinType, algo: Algo| Join::new(jt).on(&ta, l_on, &ta, r_on).algorithm(algo.algorithm()).testing(DEFAULT.testing);
    let mismatch = |r: gpujoin_device::Result<_>| matches!(r, Err(Error::TypeMismatch { .. }));
    let unsupported = |r: gpujoin_device::Result<_>| matches!(r, Err(Error::Unsupported { .. }));
    // Key columns of different types between the sides.
    assert!(mismatch(join(&["a"], &["b"], JoinType::Inner, Algo::SortMerge).run(&s).map(|o| o.rows)));
    assert!(mismatch(join(&["a"], &["b"], JoinType::Full, Algo::Interleave).run(&s).map(|o| o.rows)));
    assert!(mismatch(join(&["a"], &["b"], JoinType::Left, Algo::SortMerge).count(&s)));
    // Different column counts.
    assert!(invalid(join(&["a"], &["a", "d"], JoinType::Inner, Algo::SortMerge).run(&s)));
    assert!(invalid(join(&["a", "d"], &["a"], JoinType::Inner, Algo::Interleave).run(&s)));
    assert!(invalid(join(&["a", "d"], &["a"], JoinType::Inner, Algo::SortMerge).count(&s)));
    // Same column count, a different type in the second column.
    assert!(mismatch(join(&["a", "d"], &["a", "a"], JoinType::Inner, Algo::SortMerge).run(&s).map(|o| o.rows)));
    assert!(mismatch(join(&["a", "d"], &["a", "a"], JoinType::RightAnti, Algo::Interleave).run(&s).map(|o| o.rows)));
    // A composite of 5 columns; none at all (an equi-join algorithm needs keys).
    let five = ["a", "b", "d", "a", "b"];
    assert!(unsupported(join(&five, &five, JoinType::Inner, Algo::SortMerge).run(&s).map(|o| o.rows)));
    assert!(unsupported(join(&five, &five, JoinType::Inner, Algo::SortMerge).count(&s)));
    assert!(unsupported(join(&[], &[], JoinType::Inner, Algo::Interleave).run(&s).map(|o| o.rows)));
    // An unknown column.
    assert!(matches!(join(&["a"], &["zz"], JoinType::Inner, Algo::SortMerge).run(&s).map(|o| o.rows), Err(Error::UnknownColumn { .. })));
    // Columns of different lengths within one side.
    let (a, c) = (ta.column("a").unwrap().view(), tc.column("c").unwrap().view());
    assert!(invalid(TableView::new(vec![("a", a), ("c", c)])));
    // A validity bitmap too short for the rows (3 rows from bit 6 need 2 bytes).
    let values = s.copy_from_host(&[0u8; 36]).unwrap();
    let bits = s.copy_from_host(&[0xFFu8]).unwrap();
    assert!(invalid(ColumnView::new(DataType::Int32, 3, 6, values.view(), None, Some(bits.view()))));
    assert!(ColumnView::new(DataType::Int32, 2, 6, values.view(), None, Some(bits.view())).is_ok());
    // Host tables that fail validation are not built.
    let ragged = HostTable::new(vec![("a", HostColumn::from_values(vec![1i32, 2])), ("b", HostColumn::from_values(vec![1i32]))]);
    assert!(invalid(ragged));
    assert!(invalid(HostColumn::from_values(vec![1u32, 2]).with_validity(&[true])));
    assert!(invalid(HostColumn::from_arrow_buffers(DataType::Int32, 3, 0, vec![0; 12], vec![], Some(vec![]))));
    // A table without the key column.
    let empty = Table::upload(&s, &HostTable::default()).unwrap();
    let res = Join::new(JoinType::Inner).on(&ta, &["a"], &empty, &["a"]).algorithm(Algorithm::SortMerge(Gather::Unclustered)).run(&s);
    assert!(matches!(res.map(|o| o.rows), Err(Error::UnknownColumn { .. })));
    // Valid keys still work after all that.
    let ok = Join::new(JoinType::Inner).on(&ta, &["a"], &tc, &["c"]).algorithm(Algorithm::SortMerge(Gather::Unclustered)).run(&s).unwrap();
    assert_eq!(ok.maps.unwrap().pairs().unwrap().len(), 2);
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
    let (hl, hr) = (keys_table(vec![HostColumn::from_values(lk.clone())]), keys_table(vec![HostColumn::from_values(rk.clone())]));
    let (dl, dr) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
    std::thread::scope(|scope| {
        // The reference count (a hash join of 2^24 rows: seconds) runs beside the GPU joins.
        let reference_full = scope.spawn(|| reference_size(&hl, &hr, JoinType::Full, DEFAULT));
        // Per-key statistics give the sizes and the complete check of each output; they must
        // agree with the reference (below).
        let st = KeyStats::new(&lk, &rk, domain as usize);
        let sizes = [(JoinType::Inner, st.inner_size()), (JoinType::Full, st.full_size())];
        // About 2n inner rows and 0.27n unmatched ones (n keys over n/2 values a side).
        let (inner, unmatched) = pick((30_000_000, 4_000_000), (n as u64 * 9 / 5, n as u64 / 5));
        assert!(sizes[0].1 > inner && sizes[1].1 > sizes[0].1 + unmatched, "{sizes:?}");
        for algo in [Algo::SortMerge, Algo::Interleave] {
            for (jt, want) in sizes {
                let out = front_door(algo.algorithm(), &dl, &dr, jt, DEFAULT).run(&s).unwrap_or_else(|e| panic!("{algo:?} {jt:?}: {e}"));
                assert_eq!(out.algorithm, algo.algorithm());
                let maps = out.maps.unwrap();
                assert_eq!(maps.rows(), want, "{algo:?} {jt:?}: rows");
                let (lm, rm) = maps.to_host().unwrap();
                drop(maps);
                check_large(&lk, &rk, &st, &lm, &rm, jt, &format!("{algo:?} {jt:?}"));
            }
        }
        for (jt, want) in sizes {
            assert_eq!(front_door(Algo::SortMerge.algorithm(), &dl, &dr, jt, DEFAULT).count(&s).unwrap(), want, "Join::count {jt:?}");
        }
        let full = reference_full.join().unwrap();
        assert_eq!(full, sizes[1].1, "table_reference::equi_join_count Full vs the test's key statistics");
    });
}
