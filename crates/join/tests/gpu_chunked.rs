//! Chunked retrieval (issue 5) through the front door (`Join::chunks` of an equi-join without a
//! filter: the chunked sort-merge join, `JoinChunkSource::path() == "equi"`), inputs as
//! `HostTable`s uploaded with `Table::upload`: with small budgets, the concatenated chunks equal
//! the one-shot result, in the documented order (matches by key, then left row, then right row;
//! unmatched left rows at their key's place; unmatched right rows last in key order; semi/anti
//! rows in key order), every chunk within the budget, the total equal to `Join::count`; a budget
//! smaller than one row's output splits that row; empty inputs; host streaming
//! (`chunked::stream_to_host` of the front door's chunk source) delivers the same rows as the
//! device iterator. The CPU reference is `gpujoin_testkit::table_reference`.
//!
//! GPU tests: they print SKIPPED without a device and fail with GPUJOIN_REQUIRE_GPU=1.

mod common;
use common::{fail, stream};

use gpujoin_device::{DeviceBuffer, Stream};
use gpujoin_join::chunked::{stream_to_host, ChunkBudget, HostStreamOptions};
use gpujoin_join::plan::{Algorithm, Gather, Join, JoinChunkSource};
use gpujoin_join::table::{HostColumn, HostTable, NativeValue, Table};
use gpujoin_join::{GatherMaps, JoinType, NanEquality, NullEquality, RowId};
use gpujoin_testkit::table_reference;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

const POISON: u8 = 0xAB;

fn poison_pool(s: &Stream, bytes: usize) {
    let mut b: DeviceBuffer<u8> = s.alloc(bytes.max(1)).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
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

/// The front door's default equalities (SQL: NULL matches nothing, NaN matches NaN).
const NULLS: NullEquality = NullEquality::NullEqualsNothing;
const NANS: NanEquality = NanEquality::NanEqualsNan;

/// A one-column table `k` of `keys`.
fn single<K: NativeValue>(keys: &[K]) -> HostTable {
    HostTable::new(vec![("k", HostColumn::from_values(keys.to_vec()))]).unwrap()
}

/// Reference pairs (`None`: no row) as `(RowId, RowId)`, sorted (`RowId::NONE` last).
fn canonical(pairs: Vec<(Option<u32>, Option<u32>)>) -> Vec<(RowId, RowId)> {
    let mut v: Vec<(RowId, RowId)> = pairs.into_iter().map(|(a, b)| (RowId::from_option(a), RowId::from_option(b))).collect();
    v.sort_unstable();
    v
}

fn id(i: usize) -> RowId {
    RowId::new(i as u32).unwrap()
}

/// The output pairs of maps in output order (an absent map reads as NONE).
fn ordered_pairs(maps: &GatherMaps) -> Vec<(RowId, RowId)> {
    let (l, r) = maps.to_host().unwrap();
    let n = l.len().max(r.len());
    (0..n).map(|k| (l.get(k).copied().unwrap_or(RowId::NONE), r.get(k).copied().unwrap_or(RowId::NONE))).collect()
}

/// The documented output order, computed on the host.
fn expected_order<K: Ord + Copy>(left: &[K], right: &[K], jt: JoinType) -> Vec<(RowId, RowId)> {
    let mut li: Vec<usize> = (0..left.len()).collect();
    li.sort_by_key(|&i| (left[i], i));
    let mut ri: Vec<usize> = (0..right.len()).collect();
    ri.sort_by_key(|&j| (right[j], j));
    let matches = |k: K| {
        let lo = ri.partition_point(|&j| right[j] < k);
        let hi = ri.partition_point(|&j| right[j] <= k);
        &ri[lo..hi]
    };
    let left_has = |k: K| !matches(k).is_empty();
    let mut left_keys = left.to_vec();
    left_keys.sort();
    let right_has = |k: K| left_keys.binary_search(&k).is_ok();
    let mut out = Vec::new();
    match jt {
        JoinType::LeftSemi | JoinType::LeftAnti => {
            out.extend(li.iter().filter(|&&i| left_has(left[i]) == (jt == JoinType::LeftSemi)).map(|&i| (id(i), RowId::NONE)));
        }
        JoinType::RightSemi | JoinType::RightAnti => {
            out.extend(ri.iter().filter(|&&j| right_has(right[j]) == (jt == JoinType::RightSemi)).map(|&j| (RowId::NONE, id(j))));
        }
        _ => {
            for &i in &li {
                let m = matches(left[i]);
                out.extend(m.iter().map(|&j| (id(i), id(j))));
                if m.is_empty() && jt.keeps_unmatched_left() {
                    out.push((id(i), RowId::NONE));
                }
            }
            if jt.keeps_unmatched_right() {
                out.extend(ri.iter().filter(|&&j| !right_has(right[j])).map(|&j| (RowId::NONE, id(j))));
            }
        }
    }
    out
}

/// Joins in chunks of `budget` bytes and checks order, chunk sizes, contiguity, the total and
/// the multiset against the CPU reference.
fn check_chunked<K: NativeValue + Ord>(s: &Stream, left: &[K], right: &[K], jt: JoinType, budget: u64) -> Result<(), TestCaseError> {
    let (hl, hr) = (single(left), single(right));
    let (dl, dr) = (Table::upload(s, &hl).unwrap(), Table::upload(s, &hr).unwrap());
    poison_pool(s, (left.len() + right.len()) * 64 + (1 << 16));
    let join = Join::new(jt).on(&dl, &["k"], &dr, &["k"]);
    let chunks = join.chunks(s, ChunkBudget::Bytes(budget)).map_err(|e| fail(format!("{jt:?}: {e}")))?;
    prop_assert_eq!(chunks.source().path(), "equi", "{:?}: an equi-join without a filter takes the chunked equi-join", jt);
    let per_chunk = chunks.plan().rows_per_chunk;
    let bpr = if matches!(jt, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) { 8 } else { 4 };
    prop_assert_eq!(per_chunk, (budget / bpr).max(1), "{:?}: rows per chunk", jt);
    let total = chunks.total_rows();
    let mut got = Vec::new();
    let mut pos = 0u64;
    for (k, c) in chunks.enumerate() {
        let c = c.map_err(|e| fail(format!("{jt:?} chunk {k}: {e}")))?;
        prop_assert_eq!(c.index, k);
        prop_assert_eq!(c.output.start, pos, "{:?}: chunk {} not contiguous", jt, k);
        prop_assert!(
            c.data.rows() > 0 && c.data.rows() <= per_chunk,
            "{:?}: chunk {} has {} rows, budget {}",
            jt,
            k,
            c.data.rows(),
            per_chunk
        );
        prop_assert_eq!(c.output.end - c.output.start, c.data.rows());
        prop_assert_eq!(c.data.join_type(), jt);
        pos = c.output.end;
        got.extend(ordered_pairs(&c.data));
    }
    prop_assert_eq!(pos, total);
    let want = expected_order(left, right, jt);
    if got != want {
        let first = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        return Err(fail(format!(
            "{jt:?} |L|={} |R|={} budget {budget}: {} rows, expected {}; first difference at {first}: got {:?}, want {:?}",
            left.len(),
            right.len(),
            got.len(),
            want.len(),
            got.get(first),
            want.get(first)
        )));
    }
    let reference = canonical(table_reference::equi_join(&hl, &["k"], &hr, &["k"], jt, NULLS, NANS));
    let mut sorted = got;
    sorted.sort_unstable();
    prop_assert!(sorted == reference, "{:?}: differs from the reference as a multiset", jt);
    let size = join.count(s).unwrap();
    prop_assert_eq!(total, size, "{:?}: total vs Join::count", jt);
    Ok(())
}

#[test]
fn chunks_concatenate_to_the_one_shot_result() {
    let Some(s) = stream("chunks_concatenate_to_the_one_shot_result") else {
        return;
    };
    // `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer): fewer cases of at most 24 rows a side
    // (a one-row budget makes a chunk of every output row, each a few launches).
    let top = gpujoin_device::testing::rows(700, 24);
    let sizes = prop_oneof![Just(0usize), Just(1), 2usize..top.min(40), top.min(40)..top.max(41)];
    let n_cases = gpujoin_device::testing::cases(48, 12);
    let strat =
        (sizes.clone(), sizes, prop_oneof![Just(1u32), 2u32..8, 8u32..2000], prop_oneof![Just(1u64), 2u64..64, 64u64..4096], 0usize..8);
    run(n_cases, 0xC4A7, strat, |(nl, nr, domain, budget, t)| {
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(nl as u64 * 7919 + nr as u64 * 31 + domain as u64);
        let left: Vec<u32> = (0..nl).map(|_| rand::Rng::gen_range(&mut rng, 0..domain)).collect();
        let right: Vec<u32> = (0..nr).map(|_| rand::Rng::gen_range(&mut rng, 0..domain)).collect();
        check_chunked(&s, &left, &right, JoinType::ALL[t], budget)
    });
}

#[test]
fn every_join_type_with_signed_wide_keys() {
    let Some(s) = stream("every_join_type_with_signed_wide_keys") else {
        return;
    };
    // Reduced (sanitizer) runs: a tenth of the rows, the same budgets.
    let (nl, nr) = (gpujoin_device::testing::rows(501, 51), gpujoin_device::testing::rows(333, 33));
    let left: Vec<i64> = (0..nl).map(|i| (i % 37) as i64 * -1_000_000_007 + (i % 3) as i64).collect();
    let right: Vec<i64> = (0..nr).map(|i| (i % 41) as i64 * -1_000_000_007 + (i % 5) as i64).collect();
    for jt in JoinType::ALL {
        for budget in [8, 24, 800, 1 << 20] {
            check_chunked(&s, &left, &right, jt, budget).unwrap();
        }
    }
    let (l32, r32): (Vec<i32>, Vec<i32>) = ((0..300).map(|i| -(i % 17)).collect(), (0..200).map(|i| -(i % 23)).collect());
    check_chunked(&s, &l32, &r32, JoinType::Full, 40).unwrap();
    let (l64, r64): (Vec<u64>, Vec<u64>) = ((0..300).map(|i| u64::MAX - i % 9).collect(), (0..200).map(|i| u64::MAX - i % 4).collect());
    check_chunked(&s, &l64, &r64, JoinType::Left, 56).unwrap();
}

#[test]
fn budget_smaller_than_one_rows_output() {
    let Some(s) = stream("budget_smaller_than_one_rows_output") else {
        return;
    };
    // One left row matching 1000 right rows: chunks of 7 rows split it.
    let right = vec![5u32; 1000];
    check_chunked(&s, &[5u32], &right, JoinType::Inner, 56).unwrap();
    // All keys equal: every left row longer than the budget; unmatched rows around them.
    let left = vec![1u32, 0, 1, 1, 2, 1];
    let right: Vec<u32> = (0..50).map(|i| if i % 10 == 9 { 3 } else { 1 }).collect();
    for jt in [JoinType::Inner, JoinType::Left, JoinType::Right, JoinType::Full] {
        for budget in [0, 1, 8, 16, 8 * 13, 8 * 45, 8 * 46] {
            check_chunked(&s, &left, &right, jt, budget).unwrap();
        }
    }
}

#[test]
fn empty_inputs() {
    let Some(s) = stream("empty_inputs") else {
        return;
    };
    let some = [3u32, 1, 3];
    for jt in JoinType::ALL {
        check_chunked::<u32>(&s, &[], &[], jt, 16).unwrap();
        check_chunked(&s, &some, &[], jt, 16).unwrap();
        check_chunked(&s, &[], &some, jt, 16).unwrap();
        check_chunked(&s, &[7u32, 8], &some, jt, 8).unwrap(); // no matches
    }
}

/// Streams to the host and returns the ordered pairs, checking the stats.
fn host_pairs(s: &Stream, src: &JoinChunkSource, budget: u64, depth: usize) -> Vec<(RowId, RowId)> {
    let mut got = Vec::new();
    let mut next = 0usize;
    let stats = stream_to_host(s, src, ChunkBudget::Bytes(budget), HostStreamOptions { depth, ..HostStreamOptions::default() }, |c| {
        assert_eq!(c.index, next, "chunks delivered in order");
        next += 1;
        let (l, r) = c.maps()?;
        let n = l.len().max(r.len());
        assert_eq!(n as u64, c.rows());
        got.extend((0..n).map(|k| (l.get(k).copied().unwrap_or(RowId::NONE), r.get(k).copied().unwrap_or(RowId::NONE))));
        Ok(())
    })
    .unwrap();
    assert_eq!(stats.rows, got.len() as u64);
    assert_eq!(stats.chunks, next);
    assert!(stats.compute_ms >= 0.0 && stats.copy_ms >= 0.0 && (0.0..=1.0).contains(&stats.overlap()));
    got
}

#[test]
fn host_streaming_yields_the_same_rows() {
    let Some(s) = stream("host_streaming_yields_the_same_rows") else {
        return;
    };
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(42);
    // Reduced (sanitizer) runs: a tenth of the rows and domains.
    let (nl, nr) = (gpujoin_device::testing::rows(3000, 300), gpujoin_device::testing::rows(2000, 200));
    let (dom_l, dom_r) = (nl as u32 / 6, nr as u32 * 7 / 20);
    let left: Vec<u32> = (0..nl).map(|_| rand::Rng::gen_range(&mut rng, 0..dom_l)).collect();
    let right: Vec<u32> = (0..nr).map(|_| rand::Rng::gen_range(&mut rng, 0..dom_r)).collect();
    let (dl, dr) = (Table::upload(&s, &single(&left)).unwrap(), Table::upload(&s, &single(&right)).unwrap());
    for jt in JoinType::ALL {
        let join = Join::new(jt).on(&dl, &["k"], &dr, &["k"]);
        // The front door's chunk source (planned here for the default budget; streamed below
        // for others).
        let chunks = join.chunks(&s, ChunkBudget::default()).unwrap();
        let src = chunks.source();
        assert_eq!(src.path(), "equi", "{jt:?}");
        let want = expected_order(&left, &right, jt);
        for (budget, depth) in [(8 * 1000, 2), (8 * 333, 3), (40, 2), (1 << 30, 2)] {
            poison_pool(&s, 1 << 22);
            let got = host_pairs(&s, &src, budget, depth);
            assert!(got == want, "{jt:?} budget {budget} depth {depth}: {} rows streamed, {} expected", got.len(), want.len());
        }
        // A fresh source streamed with the default options agrees.
        let mut rows = 0u64;
        let fresh = join.chunks(&s, ChunkBudget::Bytes(4096)).unwrap();
        stream_to_host(&s, fresh.source(), ChunkBudget::Bytes(4096), HostStreamOptions::default(), |c| {
            rows += c.rows();
            Ok(())
        })
        .unwrap();
        assert_eq!(rows, want.len() as u64, "{jt:?}");
    }
}

#[test]
fn larger_join_against_the_one_shot_join() {
    let Some(s) = stream("larger_join_against_the_one_shot_join") else {
        return;
    };
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(7);
    // `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer): a tenth of the rows and key domains and a
    // sixteenth of the budget, so that the output still takes several chunks.
    let sized = |full: usize, small: usize| gpujoin_device::testing::rows(full, small);
    let budget = sized(1 << 20, 1 << 16) as u64;
    let left: Vec<u32> = (0..sized(200_000, 20_000)).map(|_| rand::Rng::gen_range(&mut rng, 0..sized(60_000, 6_000) as u32)).collect();
    let right: Vec<u32> = (0..sized(150_000, 15_000)).map(|_| rand::Rng::gen_range(&mut rng, 0..sized(80_000, 8_000) as u32)).collect();
    let (dl, dr) = (Table::upload(&s, &single(&left)).unwrap(), Table::upload(&s, &single(&right)).unwrap());
    for jt in [JoinType::Inner, JoinType::Full] {
        let join = Join::new(jt).on(&dl, &["k"], &dr, &["k"]);
        // The one-shot join: the sort-merge join's maps.
        let one_shot = join.clone().algorithm(Algorithm::SortMerge(Gather::Unclustered)).run(&s).unwrap();
        assert_eq!(one_shot.algorithm, Algorithm::SortMerge(Gather::Unclustered), "{}", one_shot.reason);
        let mut want = ordered_pairs(&one_shot.maps.expect("the sort-merge join returns its maps"));
        let chunks = join.chunks(&s, ChunkBudget::Bytes(budget)).unwrap();
        assert!(chunks.plan().chunks.len() > 2, "{jt:?}: the budget cuts the output");
        let mut got = Vec::new();
        for c in chunks {
            got.extend(ordered_pairs(&c.unwrap().data));
        }
        // Same multiset as the one-shot join; the host-streamed rows in the same order.
        let src = join.chunks(&s, ChunkBudget::Bytes(budget)).unwrap();
        let streamed = host_pairs(&s, src.source(), budget, 2);
        assert!(streamed == got, "{jt:?}: streamed vs device chunks");
        got.sort_unstable();
        want.sort_unstable();
        assert!(got == want, "{jt:?}: {} chunked rows vs {} one-shot rows", got.len(), want.len());
    }
    // The default budget (from free memory) takes this output in one chunk.
    let chunks = Join::new(JoinType::Inner).on(&dl, &["k"], &dr, &["k"]).chunks(&s, ChunkBudget::default()).unwrap();
    assert_eq!(chunks.plan().chunks.len(), 1);
}

/// The host oracle of the documented order is the reference join's multiset (runs on the CPU).
#[test]
fn expected_order_is_the_reference_multiset() {
    run(200, 0x0DE7, (0usize..60, 0usize..60, 1u32..12, 0usize..8), |(nl, nr, domain, t)| {
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64((nl * 1000 + nr) as u64 + domain as u64);
        let left: Vec<u32> = (0..nl).map(|_| rand::Rng::gen_range(&mut rng, 0..domain)).collect();
        let right: Vec<u32> = (0..nr).map(|_| rand::Rng::gen_range(&mut rng, 0..domain)).collect();
        let jt = JoinType::ALL[t];
        let mut got = expected_order(&left, &right, jt);
        let want = canonical(table_reference::join(&single(&left), &["k"], &single(&right), &["k"], None, jt, NULLS, NANS));
        got.sort_unstable();
        prop_assert_eq!(got, want, "{:?}", jt);
        Ok(())
    });
}
