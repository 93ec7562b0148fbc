//! Hash-join benchmarks: the PK-FK workloads of the PVLDB paper (seed 002) at |R| = 2^26
//! shuffled dense keys and |S| = 2^27 uniform foreign keys, payload columns equal to the keys,
//! every output row materialized. Group `paper_pkfk`:
//! - `narrow_4b4b_phj_um` / `narrow_4b4b_phj_om`: 4-byte keys, one 4-byte payload per side
//!   (target on the H100: 4.8 ms; the paper's PHJ-OM: 9.53 ms on an A100);
//! - `wide_4b4b_phj_om`: two 4-byte payloads per side (target 8.0 ms; paper 16.08 ms);
//! - `narrow_8b8b_phj_om`: 8-byte keys and payloads (target 7.3 ms; paper 14.54 ms); the direct
//!   call joins the 8-byte keys as they are (`wide::join` and the front door compress keys that
//!   span less than 2^32 to 32-bit offsets first);
//! - `narrow_4b4b_nphj`: the non-partitioned hash join, payloads gathered through its maps.
//!
//! Byte floor: the inputs (keys and payloads) read once plus the output columns written once.
//! After each case one more run prints the join's per-phase times and peak memory.

mod common;

use common::Harness;
use gpujoin::device::{DeviceBuffer, Pod, Stream};
use gpujoin::join::table::{ColumnView, TableView};
use gpujoin::join::{
    non_partitioned_hash_join_with_stats, materialize_unchecked, partitioned_hash_join_with_payloads, JoinOptions, JoinType, Materialization,
    TestingOptions,
};
use gpujoin_testkit::datagen;

/// Not `paper_pkfk`: `benches/wide.rs` times those cases through `wide::join` (Auto and each
/// algorithm); this file keeps the direct PHJ/NPHJ calls for tuning and profiling.
const GROUP: &str = "hash_internal";

struct Side<T: Pod> {
    keys: DeviceBuffer<T>,
    payloads: Vec<DeviceBuffer<T>>,
}

fn upload<T: Pod>(s: &Stream, keys: &[T], payloads: usize) -> Side<T> {
    Side { keys: s.copy_from_host(keys).unwrap(), payloads: (0..payloads).map(|_| s.copy_from_host(keys).unwrap()).collect() }
}

/// `opts`: `JoinOptions::default()` but where a sweep forces the partition bits.
#[allow(clippy::too_many_arguments)]
fn phj_case<T: Pod>(h: &mut Harness, case: &str, r: &Side<T>, f: &Side<T>, mode: Materialization, opts: JoinOptions, bytes: u64, rows: u64)
where
    for<'a> ColumnView<'a>: From<gpujoin::device::DeviceView<'a, T>>,
{
    let (kr, kf) = (TableView::single(r.keys.view()), TableView::single(f.keys.view()));
    let pr: Vec<ColumnView> = r.payloads.iter().map(|b| b.view().into()).collect();
    let pf: Vec<ColumnView> = f.payloads.iter().map(|b| b.view().into()).collect();
    let elements = (r.keys.len() + f.keys.len()) as u64;
    h.case(GROUP, case, bytes, elements, |s| {
        let out = partitioned_hash_join_with_payloads(s, &kr, &pr, &kf, &pf, JoinType::Inner, opts, mode).unwrap();
        assert_eq!(out.rows, rows);
    });
    let out = partitioned_hash_join_with_payloads(&h.stream, &kr, &pr, &kf, &pf, JoinType::Inner, JoinOptions { stats: true, ..opts }, mode).unwrap();
    println!("STATS {GROUP}/{case}: {:?}", out.stats);
}

fn main() {
    let tuning = ["GPUJOIN_HASH_BENCH", "GPUJOIN_HASH_SWEEP", "GPUJOIN_HASH_PROFILE"].iter().any(|v| std::env::var_os(v).is_some());
    if !tuning {
        println!("hash_joins: tuning benchmarks only (set GPUJOIN_HASH_BENCH=1); the paper's workloads are in benches/wide.rs");
        return;
    }
    let Some(mut h) = Harness::new("hash join benchmarks") else { return };
    let s = h.stream.clone();
    let (nr, ns) = (1usize << 26, 1usize << 27);
    let r = datagen::shuffled_dense_keys(nr, 11).unwrap();
    let f = datagen::foreign_keys_uniform(nr, ns, 12).unwrap();
    let rows = ns as u64;
    let io = |key: usize, pay: usize, cols: usize| ((nr + ns) * (key + cols * pay) + ns * 2 * cols * pay) as u64;

    {
        // Narrow: the keys and one payload column per side; a second column for the wide case.
        let (mut rn, mut fnn) = (upload(&s, &r, 1), upload(&s, &f, 1));
        let (r2, f2) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
        if std::env::var_os("GPUJOIN_HASH_PROFILE").is_some() {
            // One narrow PHJ-OM join and nothing else, for a profiler.
            let (kr, kf) = (TableView::single(rn.keys.view()), TableView::single(fnn.keys.view()));
            let (pr, pf): (Vec<ColumnView>, Vec<ColumnView>) = (vec![rn.payloads[0].view().into()], vec![fnn.payloads[0].view().into()]);
            let out = partitioned_hash_join_with_payloads(&s, &kr, &pr, &kf, &pf, JoinType::Inner, JoinOptions { stats: true, ..JoinOptions::default() }, Materialization::Clustered).unwrap();
            s.synchronize().unwrap();
            println!("PROFILE {GROUP}/narrow_4b4b_phj_om: {} rows, {:?}", out.rows, out.stats);
            return;
        }
        if std::env::var_os("GPUJOIN_HASH_SWEEP").is_some() {
            // Partition bits forced around the automatic choice (16 here); dense keys split evenly.
            for bits in [14, 15, 16, 17] {
                let opts = JoinOptions { testing: TestingOptions { partition_bits: bits, ..TestingOptions::DEFAULT }, ..JoinOptions::default() };
                phj_case(&mut h, &format!("narrow_4b4b_phj_om_bits{bits}"), &rn, &fnn, Materialization::Clustered, opts, io(4, 4, 1), rows);
            }
            return;
        }
        phj_case(&mut h, "narrow_4b4b_phj_um", &rn, &fnn, Materialization::Unclustered, JoinOptions::default(), io(4, 4, 1), rows);
        phj_case(&mut h, "narrow_4b4b_phj_om", &rn, &fnn, Materialization::Clustered, JoinOptions::default(), io(4, 4, 1), rows);

        // The non-partitioned hash join, payloads gathered through its maps.
        let (kr, kf) = (TableView::single(rn.keys.view()), TableView::single(fnn.keys.view()));
        let (pr, pf) = (&rn.payloads[0], &fnn.payloads[0]);
        h.case(GROUP, "narrow_4b4b_nphj", io(4, 4, 1), (nr + ns) as u64, |s| {
            let m = non_partitioned_hash_join_with_stats(s, &kr, &kf, JoinType::Inner, JoinOptions::default()).unwrap().maps;
            let a = materialize_unchecked(s, &m.left().unwrap(), &pr.view(), 0).unwrap();
            let b = materialize_unchecked(s, &m.right().unwrap(), &pf.view(), 0).unwrap();
            assert_eq!(a.len(), ns);
            drop((a, b));
        });
        let st = non_partitioned_hash_join_with_stats(&s, &kr, &kf, JoinType::Inner, JoinOptions::default()).unwrap().stats;
        println!("STATS {GROUP}/narrow_4b4b_nphj (maps only): {st:?}");

        // Wide: two payload columns per side.
        rn.payloads.push(r2);
        fnn.payloads.push(f2);
        phj_case(&mut h, "wide_4b4b_phj_om", &rn, &fnn, Materialization::Clustered, JoinOptions::default(), io(4, 4, 2), rows);
    }

    // 8-byte keys and payloads.
    let r8: Vec<u64> = r.iter().map(|&k| k as u64).collect();
    let f8: Vec<u64> = f.iter().map(|&k| k as u64).collect();
    drop((r, f));
    let (rs, fs) = (upload(&s, &r8, 1), upload(&s, &f8, 1));
    drop((r8, f8));
    phj_case(&mut h, "narrow_8b8b_phj_om", &rs, &fs, Materialization::Clustered, JoinOptions::default(), io(8, 8, 1), rows);
}
