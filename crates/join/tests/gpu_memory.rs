//! Device memory (issue 10), in one process as a user would meet it:
//! - an allocation the pool cannot serve trims the pool and retries instead of failing while
//!   memory is free (finding 1: a large allocation, freed, then a larger one of another size; the
//!   2^31 + 5-row joins after a 2^32-row join);
//! - an output that does not fit completes through chunks: 2^20 x 2^20 i64 keys with 5% NULLs
//!   under `NullEqualsNull` (finding 2, about 2.75 billion rows), and a 2^33-row output delivered
//!   to pinned host memory, both verified on the host chunk by chunk;
//! - 1000 back-to-back joins of mixed algorithms leave device memory and the process's resident
//!   memory flat.
//!
//! Every join runs through the front door (`gpujoin_join::plan::Join`): `run` with an explicit
//! algorithm, `count`, `output_budget`, `chunks`, and host streaming
//! (`chunked::stream_to_host` of the front door's chunk source). The multi-GiB key columns are
//! device buffers viewed as one-column tables (no copy).
//!
//! The tests of this file share the device's memory, so they hold [`MEMORY`] while they run.
//! With `GPUJOIN_TEST_SIZE=small` (sanitizer runs) every size shrinks and the multi-GiB cases
//! keep their shapes at a small fraction of their sizes.

mod common;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use gpujoin_device::testing::{device_or_skip, reduced};
use gpujoin_device::{Device, DeviceBuffer, Error, Pod, Stream};
use gpujoin_join::chunked::{stream_to_host, ChunkBudget, HostStreamOptions};
use gpujoin_join::plan::{Algorithm, Gather, Join};
use gpujoin_join::table::{ColumnView, HostColumn, HostTable, NativeValue, Table, TableView};
use gpujoin_join::{JoinType, NullEquality, RowId, TestingOptions};

static MEMORY: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    MEMORY.lock().unwrap_or_else(|e| e.into_inner())
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

const SMJ_UM: Algorithm = Algorithm::SortMerge(Gather::Unclustered);
const PHJ_UM: Algorithm = Algorithm::PartitionedHash(Gather::Unclustered);

/// A one-column table `k` over a device buffer (a view: no copy).
fn keys_table<T: NativeValue + Pod>(b: &DeviceBuffer<T>) -> TableView<'_> {
    let column = ColumnView::new(T::DATA_TYPE, b.len(), 0, b.view().as_bytes(), None, None).unwrap();
    TableView::new(vec![("k", column)]).unwrap()
}

/// An inner equi-join on the columns `k`.
fn join_on<'a>(l: impl Into<TableView<'a>>, r: impl Into<TableView<'a>>, jt: JoinType) -> Join<'a> {
    Join::new(jt).on(l, &["k"], r, &["k"])
}

/// The output rows of `join` by `algorithm` (checked to be the one that ran).
fn rows_by(s: &Stream, join: &Join<'_>, algorithm: Algorithm) -> gpujoin_device::Result<u64> {
    let out = join.clone().algorithm(algorithm).run(s)?;
    assert_eq!(out.algorithm, algorithm, "{}", out.reason);
    Ok(out.rows)
}

fn setup(test: &str) -> Option<(Device, Stream, MutexGuard<'static, ()>)> {
    let d = device_or_skip(test)?;
    let guard = lock();
    let s = d.new_stream().unwrap();
    Some((d, s, guard))
}

/// A 64-bit mixer for order-independent checksums.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    x ^ (x >> 33)
}

/// The checksum of one output pair: summed (wrapping) over a join's pairs, it factors per key
/// into (sum of g over the key's left rows) * (sum of h over its right rows).
fn pair_sum(l: u32, r: u32) -> u64 {
    mix(l as u64).wrapping_mul(mix(r as u64 ^ 0x5555_5555_0000_0000) | 1)
}

/// Runs `f` over `n` items split across the host's cores and adds up the results.
fn par_sum(n: usize, f: impl Fn(std::ops::Range<usize>) -> (u64, u64) + Sync) -> (u64, u64) {
    let threads = std::thread::available_parallelism().map_or(4, |t| t.get()).min(16);
    let per = n.div_ceil(threads).max(1);
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads).map(|t| t * per).filter(|&a| a < n).map(|a| sc.spawn({
            let f = &f;
            move || f(a..(a + per).min(n))
        })).collect();
        handles.into_iter().map(|h| h.join().unwrap()).fold((0u64, 0u64), |(a, b), (c, d)| (a.wrapping_add(c), b.wrapping_add(d)))
    })
}

#[test]
fn allocations_trim_the_pool_instead_of_failing() {
    let Some((d, s, _g)) = setup("allocations_trim_the_pool_instead_of_failing") else { return };
    let before = d.release_threshold().unwrap();
    assert!(before < u64::MAX, "the default release threshold keeps at most part of the memory");
    let total = d.memory_info().unwrap().total;
    // The old default kept every freed byte; with it, a larger allocation after a freed one failed.
    d.set_release_threshold(u64::MAX).unwrap();
    assert_eq!(d.release_threshold().unwrap(), u64::MAX);
    let (first, second) = if reduced() { (total / 8, total / 6) } else { (total * 11 / 20, total * 13 / 20) };
    let a = s.alloc::<u8>(first as usize).unwrap();
    drop(a);
    s.synchronize().unwrap();
    assert!(d.pool_memory().unwrap().reserved >= first, "the freed allocation stays in the pool");
    let b = s.alloc::<u8>(second as usize).unwrap_or_else(|e| panic!("a larger allocation after a freed one: {e}"));
    drop(b);
    let released = d.trim_memory().unwrap();
    assert!(released >= second, "trim_memory released {released} bytes, want at least {second}");
    let pool = d.pool_memory().unwrap();
    assert!(pool.reserved <= pool.in_use + 64 * MIB, "after trimming the pool holds {pool:?}");
    // A request the device cannot hold is OutOfMemory with every figure. (Not under a sanitizer,
    // which reports the driver's refusal as an API error.)
    if !reduced() {
        match s.alloc::<u8>(2 * total as usize) {
            Err(Error::OutOfMemory { requested, free, reserved, in_use }) => {
                assert_eq!(requested, 2 * total);
                assert!(free <= total && reserved >= in_use, "free {free}, reserved {reserved}, in use {in_use}");
            }
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("allocated twice the device"),
        }
    }
    // Threshold 0: a synchronization returns freed memory to the device.
    d.set_release_threshold(0).unwrap();
    let c = s.alloc::<u8>(512 << 20).unwrap();
    drop(c);
    s.synchronize().unwrap();
    let pool = d.pool_memory().unwrap();
    assert!(pool.reserved < pool.in_use + (512 << 20), "threshold 0 kept {pool:?}");
    d.set_release_threshold(before).unwrap();
}

/// `n` rows of `u32` keys `(i * step) % modulus`, generated on the host and uploaded.
fn cyclic_keys(s: &Stream, n: usize, modulus: u64) -> gpujoin_device::DeviceBuffer<u32> {
    let host: Vec<u32> = (0..n as u64).map(|i| (i % modulus) as u32).collect();
    s.copy_from_host(&host).unwrap()
}

#[test]
fn joins_after_a_four_billion_row_join_complete() {
    let Some((d, s, _g)) = setup("joins_after_a_four_billion_row_join_complete") else { return };
    // Finding 1: a 2^32-row join (all keys equal, 2^16 x 2^16), then the count, sort-merge,
    // interleave and hash joins of a 2^31 + 5-row side against 1000 keys, in one process.
    let (side, big) = if reduced() { (1usize << 10, (1usize << 21) + 5) } else { (1usize << 16, (1usize << 31) + 5) };
    {
        let (l, r) = (s.copy_from_host(&vec![9u32; side]).unwrap(), s.copy_from_host(&vec![9u32; side]).unwrap());
        let out = join_on(keys_table(&l), keys_table(&r), JoinType::Inner).algorithm(SMJ_UM).run(&s).unwrap();
        assert_eq!(out.algorithm, SMJ_UM, "{}", out.reason);
        let maps = out.maps.expect("the sort-merge join returns its maps");
        assert_eq!(maps.rows(), (side * side) as u64);
        let last = maps.rows() as usize - 1;
        let tail = (s.copy_to_host(&maps.left().unwrap().slice(last..)).unwrap(), s.copy_to_host(&maps.right().unwrap().slice(last..)).unwrap());
        assert_eq!((tail.0[0].get(), tail.1[0].get()), (Some(side as u32 - 1), Some(side as u32 - 1)), "the last pair");
    }
    let live = d.pool_memory().unwrap().in_use;
    // Left keys cycle over 0..2000: keys below 1000 match one right row each.
    let left = cyclic_keys(&s, big, 2000);
    let right: Vec<u32> = (0..1000).collect();
    let right = s.copy_from_host(&right).unwrap();
    let want: u64 = (0..1000u64).map(|k| (big as u64 - 1 - k) / 2000 + 1).sum();
    let join = join_on(keys_table(&left), keys_table(&right), JoinType::Inner);
    assert_eq!(join.count(&s).unwrap(), want, "count");
    let t = std::time::Instant::now();
    assert_eq!(rows_by(&s, &join, SMJ_UM).unwrap(), want, "SMJ-UM");
    let smj = t.elapsed();
    let t = std::time::Instant::now();
    assert_eq!(rows_by(&s, &join, Algorithm::Interleave).unwrap(), want, "interleave");
    let ilj = t.elapsed();
    assert_eq!(rows_by(&s, &join, Algorithm::Hash).unwrap(), want, "NPHJ");
    println!(
        "{big} x 1000 after a {}-row join: {want} rows; SMJ-UM {:.0} ms, interleave {:.0} ms; {} MiB in use before",
        side * side,
        smj.as_secs_f64() * 1e3,
        ilj.as_secs_f64() * 1e3,
        live / MIB
    );
}

/// `n` i64 keys in `0..domain` with about `null_pct`% NULLs (`true`: valid).
fn nullable_i64(seed: u64, n: usize, domain: i64, null_pct: u64) -> (Vec<i64>, Vec<bool>) {
    let keys = (0..n as u64).map(|i| (mix(seed ^ i) % domain as u64) as i64).collect();
    let valid = (0..n as u64).map(|i| mix(seed.wrapping_mul(31) ^ i) % 100 >= null_pct).collect();
    (keys, valid)
}

#[test]
fn null_equal_null_join_larger_than_memory_completes_in_chunks() {
    let Some((_d, s, _g)) = setup("null_equal_null_join_larger_than_memory_completes_in_chunks") else { return };
    // Finding 2: 2^20 x 2^20 i64 keys, 5% NULL, NULL = NULL: about 2.75 billion rows (22 GB of
    // maps), delivered to the host in chunks; count and checksum against the CPU, per key. The
    // keys span less than 2^32, so the front door would join them as 32-bit offsets: the
    // streamed join keeps them 8-byte keys (`TestingOptions::no_key_compression`, the finding's
    // path); the count and the device chunks take both.
    let n = if reduced() { 1usize << 12 } else { 1usize << 20 };
    let (lk, lv) = nullable_i64(1, n, n as i64, 5);
    let (rk, rv) = nullable_i64(2, n, n as i64, 5);
    // The CPU side: per key (None = NULL), the count and the sum of g (left) or h (right).
    let groups = |keys: &[i64], valid: &[bool], side_left: bool| {
        let mut m: HashMap<Option<i64>, (u64, u64)> = HashMap::new();
        for (i, (&k, &v)) in keys.iter().zip(valid).enumerate() {
            let e = m.entry(v.then_some(k)).or_default();
            e.0 += 1;
            let g = if side_left { mix(i as u64) } else { mix(i as u64 ^ 0x5555_5555_0000_0000) | 1 };
            e.1 = e.1.wrapping_add(g);
        }
        m
    };
    let (gl, gr) = (groups(&lk, &lv, true), groups(&rk, &rv, false));
    let (mut want_rows, mut want_sum) = (0u64, 0u64);
    for (k, (cl, sl)) in &gl {
        if let Some((cr, sr)) = gr.get(k) {
            want_rows += cl * cr;
            want_sum = want_sum.wrapping_add(sl.wrapping_mul(*sr));
        }
    }
    let table = |k: Vec<i64>, v: &[bool]| Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(k).with_validity(v).unwrap())]).unwrap()).unwrap();
    let (tl, tr) = (table(lk, &lv), table(rk, &rv));
    let compressed = join_on(&tl, &tr, JoinType::Inner).null_equality(NullEquality::NullEqualsNull);
    let join = compressed.clone().testing(TestingOptions { no_key_compression: true, ..TestingOptions::DEFAULT });
    assert_eq!(join.count(&s).unwrap(), want_rows, "count");
    assert_eq!(compressed.count(&s).unwrap(), want_rows, "count of the keys as 32-bit offsets");
    let (mut rows, mut sum, mut chunks) = (0u64, 0u64, 0usize);
    let t = std::time::Instant::now();
    let budget = if reduced() { ChunkBudget::Bytes(8 * 100_000) } else { ChunkBudget::default() };
    let source = join.chunks(&s, budget).unwrap();
    assert_eq!(source.source().path(), "equi");
    let stats = stream_to_host(&s, source.source(), budget, HostStreamOptions::default(), |c| {
        let (l, r) = c.maps()?;
        assert_eq!(l.len() as u64, c.rows());
        let (n, x) = par_sum(l.len(), |range| {
            let mut acc = 0u64;
            for k in range.clone() {
                acc = acc.wrapping_add(pair_sum(l[k].get().expect("inner rows"), r[k].get().expect("inner rows")));
            }
            (range.len() as u64, acc)
        });
        rows += n;
        sum = sum.wrapping_add(x);
        chunks += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!((rows, stats.rows), (want_rows, want_rows), "rows");
    assert_eq!(sum, want_sum, "order-independent checksum");
    println!(
        "{n} x {n} i64, 5% NULL, NULL = NULL: {rows} rows in {chunks} chunks to the host in {:.2} s (copies {:.0}% overlapped)",
        t.elapsed().as_secs_f64(),
        100.0 * stats.overlap()
    );
    drop(source);
    // Every chunk on the device, too (the keys as 32-bit offsets), within the default budget or
    // half the maps' bytes, whichever is smaller: several chunks on any card (an H100's default
    // budget is about 20 GB, under the 22 GB of maps; an H200's about 35 GB).
    if !reduced() {
        let maps_bytes = want_rows * 2 * std::mem::size_of::<u32>() as u64;
        let budget = ChunkBudget::default().resolve(s.device()).unwrap().min(maps_bytes / 2);
        let it = compressed.chunks(&s, ChunkBudget::Bytes(budget)).unwrap();
        assert!(it.plan().chunks.len() > 1, "{maps_bytes} bytes of maps in chunks of at most {budget} bytes");
        assert_eq!(it.total_rows(), want_rows);
    }
}

#[test]
fn eight_billion_rows_reach_the_host_in_chunks() {
    let Some((_d, s, _g)) = setup("eight_billion_rows_reach_the_host_in_chunks") else { return };
    // 2^16 x 2^17 rows of one key: 2^33 output rows (64 GiB of maps). In key order, then left
    // row, then right row, output row i is (i >> 17, i & (2^17 - 1)): each chunk is checked
    // row by row.
    let (lb, rb) = if reduced() { (6u32, 8u32) } else { (16u32, 17u32) };
    let (l, r) = (s.copy_from_host(&vec![7u32; 1 << lb]).unwrap(), s.copy_from_host(&vec![7u32; 1 << rb]).unwrap());
    let join = join_on(keys_table(&l), keys_table(&r), JoinType::Inner);
    let t = std::time::Instant::now();
    let mut chunks = 0usize;
    let budget = if reduced() { ChunkBudget::Bytes(8 * 1000) } else { ChunkBudget::Bytes(4 * GIB) };
    let source = join.chunks(&s, budget).unwrap();
    assert_eq!(source.source().path(), "equi");
    let stats = stream_to_host(&s, source.source(), budget, HostStreamOptions::default(), |c| {
        let (lm, rm) = c.maps()?;
        let start = c.output.start;
        let (bad, _) = par_sum(lm.len(), |range| {
            let mut bad = 0u64;
            for k in range {
                let i = start + k as u64;
                let want = (RowId::new((i >> rb) as u32), RowId::new((i & ((1 << rb) - 1)) as u32));
                bad += ((Some(lm[k]), Some(rm[k])) != want) as u64;
            }
            (bad, 0)
        });
        assert_eq!(bad, 0, "chunk {} (rows {:?}) has {bad} wrong rows", c.index, c.output);
        chunks += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(stats.rows, 1u64 << (lb + rb));
    let secs = t.elapsed().as_secs_f64();
    println!(
        "2^{} rows to pinned host memory in {chunks} chunks: {secs:.2} s ({:.1} GB/s of maps, copies {:.0}% overlapped)",
        lb + rb,
        stats.rows as f64 * 8.0 / secs / 1e9,
        100.0 * stats.overlap()
    );
}

/// Resident set size of this process in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4096
}

#[test]
fn a_thousand_joins_leave_memory_flat() {
    let Some((d, s, _g)) = setup("a_thousand_joins_leave_memory_flat") else { return };
    let (n, joins) = if reduced() { (1usize << 12, 60) } else { (1usize << 16, 1000) };
    let left: Vec<u32> = (0..n as u64).map(|i| (mix(i) % (n as u64)) as u32).collect();
    let right: Vec<u32> = (0..n as u64).map(|i| (mix(i + 77) % (n as u64 * 2)) as u32).collect();
    let table = |k: Vec<u32>| Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(k))]).unwrap()).unwrap();
    let (tl, tr) = (table(left), table(right));
    let want = rows_by(&s, &join_on(&tl, &tr, JoinType::Inner), SMJ_UM).unwrap();
    let used = || {
        s.synchronize().unwrap();
        let m = d.memory_info().unwrap();
        (m.total - m.free, d.pool_memory().unwrap().in_use, rss())
    };
    let mut baseline = None;
    for k in 0..joins {
        let jt = JoinType::ALL[k % 8];
        let join = join_on(&tl, &tr, jt);
        let rows = match k % 4 {
            0 => rows_by(&s, &join, SMJ_UM).unwrap(),
            1 => rows_by(&s, &join, Algorithm::Interleave).unwrap(),
            2 => rows_by(&s, &join, Algorithm::Hash).unwrap(),
            _ => join.chunks(&s, ChunkBudget::Bytes(1 << 18)).unwrap().map(|c| c.unwrap().data.rows()).sum(),
        };
        if jt == JoinType::Inner {
            assert_eq!(rows, want, "join {k}");
        }
        if k == 9 {
            baseline = Some(used());
        }
    }
    let (b_dev, b_pool, b_rss) = baseline.unwrap();
    let (dev, pool, rss_now) = used();
    println!("after 10 joins: device {} MiB, pool in use {} MiB, RSS {} MiB; after {joins}: {} / {} / {} MiB", b_dev / MIB, b_pool / MIB, b_rss / MIB, dev / MIB, pool / MIB, rss_now / MIB);
    assert!(pool <= b_pool + 64 * MIB, "pool memory in use grew from {b_pool} to {pool} bytes");
    // Reduced runs go under compute-sanitizer, several processes on the GPU at once and the
    // tool's own bookkeeping in the process: device-wide and resident memory say nothing there.
    if !reduced() {
        assert!(dev <= b_dev + 64 * MIB, "device memory grew from {b_dev} to {dev} bytes");
        assert!(rss_now <= b_rss + 64 * MIB, "resident memory grew from {b_rss} to {rss_now} bytes");
    }
}

#[test]
fn an_output_budget_is_refused_before_the_join_runs() {
    let Some((d, s, _g)) = setup("an_output_budget_is_refused_before_the_join_runs") else { return };
    // 1000 x 1000 rows of one key: 10^6 output rows, 8 * 10^6 bytes of maps.
    let (l, r) = (s.copy_from_host(&vec![1u32; 1000]).unwrap(), s.copy_from_host(&vec![1u32; 1000]).unwrap());
    for algorithm in [SMJ_UM, Algorithm::Interleave, Algorithm::Hash, PHJ_UM] {
        let name = algorithm.name();
        for (jt, rows, per_row) in [(JoinType::Inner, 1_000_000u64, 8u64), (JoinType::LeftSemi, 1000, 4)] {
            let bytes = rows * per_row;
            let join = join_on(keys_table(&l), keys_table(&r), jt);
            d.reset_peak_memory().unwrap();
            match rows_by(&s, &join.clone().output_budget(bytes - 1), algorithm) {
                Err(Error::OutputTooLarge { rows: r, bytes: b, available }) => {
                    assert_eq!((r, b, available), (rows, bytes, bytes - 1), "{name} {jt:?}");
                }
                other => panic!("{name} {jt:?} over its budget: {other:?}"),
            }
            // Refused after the count alone: nothing near the output was allocated.
            let peak = d.peak_memory().unwrap();
            if jt == JoinType::Inner {
                assert!(peak < bytes / 2, "{name} {jt:?}: {peak} bytes at the peak of a refused join of {bytes} bytes");
            }
            assert_eq!(rows_by(&s, &join.output_budget(bytes), algorithm).unwrap(), rows, "{name} {jt:?} within its budget");
        }
    }
    // The chunked calls deliver such outputs (a budget does not apply to them).
    let tight = join_on(keys_table(&l), keys_table(&r), JoinType::Inner).output_budget(8);
    let rows: u64 = tight.chunks(&s, ChunkBudget::Bytes(1 << 20)).unwrap().map(|c| c.unwrap().data.rows()).sum();
    assert_eq!(rows, 1_000_000);
}

#[test]
fn join_size_of_wide_composite_keys_allocates_no_output() {
    let Some((d, s, _g)) = setup("join_size_of_wide_composite_keys_allocates_no_output") else { return };
    // Two i64 key columns (128 bits: hashed by the joins, ranked by the count): 2000 x 2000 rows
    // over 2 distinct keys, 2 * 1000^2 = 2 * 10^6 output rows (16 MB of maps).
    let a: Vec<i64> = (0..2000).map(|i| (i % 2) as i64 * (1 << 40)).collect();
    let b: Vec<i64> = (0..2000).map(|i| -((i % 2) as i64)).collect();
    let t = Table::upload(&s, &HostTable::new(vec![("a", HostColumn::from_values(a)), ("b", HostColumn::from_values(b))]).unwrap()).unwrap();
    let join = |jt: JoinType| Join::new(jt).on(&t, &["a", "b"], &t, &["a", "b"]);
    d.reset_peak_memory().unwrap();
    let n = join(JoinType::Inner).count(&s).unwrap();
    let peak = d.peak_memory().unwrap();
    assert_eq!(n, 2_000_000);
    assert!(peak < 4 << 20, "the count of wide composite keys peaked at {peak} bytes (the maps would be 16 MB)");
    for jt in JoinType::ALL {
        let want = rows_by(&s, &join(jt), SMJ_UM).unwrap();
        assert_eq!(join(jt).count(&s).unwrap(), want, "{jt:?}");
    }
}
