//! Wide-join benchmarks (issue 4): the PK-FK workloads of the PVLDB paper (seed 002) through
//! `gpujoin::join::wide::join`, every output row materialized on the device. Group `paper_pkfk`.
//!
//! Workloads: `R` = the dense keys `0..|R|` shuffled, `S` = foreign keys into them, uniform (each
//! key `|S|/|R|` times, shuffled) or Zipf; payload columns equal to the keys (separate copies).
//! At |R| = 2^26, |S| = 2^27, timed with `Algorithm::Auto` (its sampling included; each
//! workload runs every algorithm once untimed before its first case):
//! - `narrow_4b4b` (one 4-byte payload per side; target on the H100 4.8 ms),
//! - `wide_4b4b` (two payloads per side; 8.0 ms),
//! - `zipf1_narrow_4b4b` / `zipf1_wide_4b4b` (Zipf 1.0 foreign keys; 4.8 / 7.6 ms),
//! - `narrow_4b8b` / `wide_4b8b` (4-byte keys, 8-byte payloads; PHJ-UM and PHJ-OM rows beside
//!   Auto: where the 8-byte payload crossover of Auto's rule lies at this size),
//! - `narrow_8b8b` / `wide_8b8b` (8-byte keys and payloads; 7.3 / 13.2 ms);
//!
//! plus one row per explicit algorithm: `narrow_4b4b_*` and `wide_4b4b_*` for all five
//! (`_smj_um`, `_smj_om`, `_phj_um`, `_phj_om`, `_nphj`), `_phj_om` for the others.
//! Reduced scale: sequences of 2, 4 and 8 joins (`seq_2`, `seq_4`, `seq_8` with Auto, and
//! `seq_k_phj_um` / `seq_k_phj_om`; fact table 2^25 rows with uniform random foreign keys and one
//! payload, dimensions 2^22 rows with one payload each); match ratios
//! (`ratio_1_4_wide_4b4b`, `ratio_1_16_wide_4b4b`, |R| = 2^24, |S| = 2^25) and |S|/|R|
//! (`s_over_r_1_wide_4b4b`, `s_over_r_8_wide_4b4b`, |R| = 2^22).
//!
//! Byte floor: the inputs (keys and payloads) read once plus the output columns written once.
//! Families at |R| = 2^24, |S| = 2^25: `cols4_4b4b`, `cols6_4b4b` (4 and 6 payload columns a
//! side), `narrow_4b8b_2p24`, `wide_4b8b_2p24` (8-byte payloads on 4-byte keys),
//! `zipf{0_5,1_5,2}_narrow_4b4b_2p24`; and `r2p25_narrow_4b4b` (|S| = 2^26),
//! `r2p27_s_over_r_1_narrow_4b4b` (|R| = |S| = 2^27).
//!
//! Group `auto_cost` (`GPUJOIN_WIDE_ONLY=auto_cost` only): Auto's own cost on `wide_4b4b`, see
//! `fn auto_cost`.
//!
//! Group `dense` (`GPUJOIN_WIDE_ONLY=dense` only): dense unique build keys from 2^20 to 2^25
//! rows, maps only, narrow and two payloads a side, where NPHJ's direct-address table wins; see `fn dense`.
//!
//! Group `libcudf`: libcudf's nvbench join workload (`cpp/benchmarks/join/`, its
//! `generate_input_tables`: unique `INT64` build keys, selectivity 0.3, multiplicity 1), maps
//! only, 10M x 10M; published on the H100: `inner_join` 3.06 ms, `distinct_inner_join` 1.54 ms.
//! See `fn libcudf` for the generation; rows `i64_10m_30pct_*` (keys over the whole `i64` range,
//! joined as 8-byte keys) and `i64_dense_10m_30pct_*` (keys spanning less than 2^32, joined as
//! 32-bit offsets), each with Auto and `_smj_um`, `_smj_om`, `_phj_um`, `_nphj`.
//!
//! After each case one more run prints a `STATS` line (algorithm, reason, per-phase times, peak
//! memory); the explicit-algorithm cases end with a `CHECK` line comparing OM and UM peaks.

mod common;

use common::{Harness, WideSide};
use gpujoin::device::{DeviceBuffer, DeviceView, Pod, Stream};
use gpujoin::join::table::{ColumnView, TableView};
use gpujoin::join::wide::{self, join_sequence, Algorithm, WideJoinOptions};
use gpujoin::join::{JoinOptions, JoinType};
use gpujoin_testkit::datagen;

const GROUP: &str = "paper_pkfk";

/// One relation on the device: keys and `cols` copies of them as payloads.
struct Rel<T: Pod> {
    keys: DeviceBuffer<T>,
    payloads: Vec<DeviceBuffer<T>>,
}

impl<T: Pod> Rel<T>
where
    for<'a> ColumnView<'a>: From<DeviceView<'a, T>>,
{
    fn upload(s: &Stream, keys: &[T], cols: usize) -> Rel<T> {
        Rel { keys: s.copy_from_host(keys).unwrap(), payloads: (0..cols).map(|_| s.copy_from_host(keys).unwrap()).collect() }
    }
    fn wide(&self, cols: usize) -> WideSide<'_> {
        WideSide::new(TableView::single(self.keys.view()), self.payloads[..cols].iter().map(|b| b.view().into()).collect())
    }
}

fn mb(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// Times one `paper_pkfk` case (materialized output) and prints its STATS line; returns the
/// peak memory of the stats run.
fn case(h: &mut Harness, name: &str, r: &WideSide<'_>, f: &WideSide<'_>, algo: Algorithm, bytes: u64, rows: u64) -> u64 {
    timed(h, GROUP, name, r, f, algo, WideJoinOptions::default(), bytes, rows)
}

/// Times one join case of `group` with `opts` (it must give `rows` rows) and prints its STATS
/// line; returns the peak memory of the stats run.
#[allow(clippy::too_many_arguments)]
fn timed(h: &mut Harness, group: &str, name: &str, r: &WideSide<'_>, f: &WideSide<'_>, algo: Algorithm, opts: WideJoinOptions, bytes: u64, rows: u64) -> u64 {
    let elements = (r.rows() + f.rows()) as u64;
    h.case(group, name, bytes, elements, |s| {
        let out = wide::join(s, r.pair(), f.pair(), JoinType::Inner, algo, opts).unwrap();
        assert_eq!(out.rows, rows);
    });
    let s = h.stream.clone();
    s.synchronize().unwrap();
    let out = wide::join(&s, r.pair(), f.pair(), JoinType::Inner, algo, opts.with_stats()).unwrap();
    let st = out.stats;
    println!(
        "STATS {group}/{name}: algorithm {} | transform {:.3} ms, match {:.3} ms, materialize {:.3} ms, total {:.3} ms | peak {:.0} MiB | reason: {}",
        out.algorithm.name(),
        st.transform_ms,
        st.match_ms,
        st.materialize_ms,
        st.total_ms,
        mb(st.peak_memory_bytes),
        out.reason
    );
    st.peak_memory_bytes
}

/// Auto plus the listed explicit algorithms on one workload; a CHECK line for OM against UM.
#[allow(clippy::too_many_arguments)]
fn cases(h: &mut Harness, base: &str, r: &WideSide<'_>, f: &WideSide<'_>, algos: &[Algorithm], bytes: u64, rows: u64) {
    // Steady state before the first timed case of a workload: every algorithm of the workload
    // once and Auto a few times, untimed (the pool's working set, caches and clocks settle; the
    // first case after an upload measured up to 0.7 ms slow with a wide interval).
    let s = h.stream.clone();
    for &a in algos.iter().chain(&[Algorithm::Auto; 3]) {
        wide::join(&s, r.pair(), f.pair(), JoinType::Inner, a, WideJoinOptions::default()).unwrap();
    }
    s.synchronize().unwrap();
    case(h, base, r, f, Algorithm::Auto, bytes, rows);
    let mut peaks = Vec::new();
    for &a in algos {
        let p = case(h, &format!("{base}_{}", a.suffix()), r, f, a, bytes, rows);
        peaks.push((a, p));
    }
    let peak = |a: Algorithm| peaks.iter().find(|(x, _)| *x == a).map(|&(_, p)| p);
    for (om, um) in [(Algorithm::SmjOm, Algorithm::SmjUm), (Algorithm::PhjOm, Algorithm::PhjUm)] {
        if let (Some(o), Some(u)) = (peak(om), peak(um)) {
            println!("CHECK {GROUP}/{base}: OM peak <= UM peak: {} peak {:.0} MiB, {} peak {:.0} MiB: {}", om.name(), mb(o), um.name(), mb(u), o <= u);
        }
    }
}

/// Inputs read once plus output written once, for `cols` payloads per side and `out` rows.
fn floor_bytes(nr: usize, ns: usize, key: usize, pay: usize, cols: usize, out: usize) -> u64 {
    ((nr + ns) * (key + cols * pay) + out * 2 * cols * pay) as u64
}

fn sequences(h: &mut Harness) {
    let s = h.stream.clone();
    let (n_fact, n_dim) = (1usize << 25, 1usize << 22);
    let max_k = 8;
    let fks: Vec<DeviceBuffer<u32>> = (0..max_k).map(|i| s.copy_from_host(&datagen::zipf_keys_fast(n_fact, n_dim, 0.0, 100 + i as u64).unwrap()).unwrap()).collect();
    let fact_pay = s.copy_from_host(&datagen::shuffled_dense_keys(n_fact, 99).unwrap()).unwrap();
    let dims: Vec<(DeviceBuffer<u32>, DeviceBuffer<u32>)> = (0..max_k)
        .map(|i| {
            let k = datagen::shuffled_dense_keys(n_dim, 200 + i as u64).unwrap();
            (s.copy_from_host(&k).unwrap(), s.copy_from_host(&k).unwrap())
        })
        .collect();
    for k in [2usize, 4, 8] {
        let rels: Vec<WideSide> = dims[..k].iter().map(|(key, p)| WideSide::new(TableView::single(key.view()), vec![p.view().into()])).collect();
        let dims: Vec<_> = rels.iter().map(WideSide::pair).collect();
        let fk_cols: Vec<ColumnView> = fks[..k].iter().map(|b| b.view().into()).collect();
        let fp: Vec<ColumnView> = vec![fact_pay.view().into()];
        // Inputs: k foreign keys and the fact payload, k dimensions of key + payload; output:
        // the fact payload and k dimension payloads per row (every foreign key matches).
        let bytes = (n_fact * 4 * (k + 1) + k * n_dim * 8 + n_fact * 4 * (k + 1)) as u64;
        for algo in [Algorithm::PhjUm, Algorithm::PhjOm, Algorithm::Auto] {
            join_sequence(&s, &fk_cols, &fp, &dims, algo, JoinOptions::default()).unwrap(); // untimed: steady state
        }
        s.synchronize().unwrap();
        for algo in [Algorithm::Auto, Algorithm::PhjUm, Algorithm::PhjOm] {
            let name = if algo == Algorithm::Auto { format!("seq_{k}") } else { format!("seq_{k}_{}", algo.suffix()) };
            h.case(GROUP, &name, bytes, (n_fact + k * n_dim) as u64, |s| {
                let out = join_sequence(s, &fk_cols, &fp, &dims, algo, JoinOptions::default()).unwrap();
                assert_eq!(out.rows, n_fact as u64);
            });
            let out = join_sequence(&s, &fk_cols, &fp, &dims, algo, JoinOptions { stats: true, ..JoinOptions::default() }).unwrap();
            let steps: Vec<String> = out.steps.iter().map(|st| format!("{} {:.2} ms peak {:.0} MiB", st.algorithm.name(), st.stats.total_ms, mb(st.stats.peak_memory_bytes))).collect();
            println!("STATS {GROUP}/{name}: joins [{}] | first reason: {}", steps.join("; "), out.steps[0].reason);
        }
    }
}

fn variations(h: &mut Harness) {
    let s = h.stream.clone();
    // Match ratios at |R| = 2^24, |S| = 2^25, two 4-byte payloads per side.
    let (nr, ns) = (1usize << 24, 1usize << 25);
    for (label, ratio) in [("1_4", 0.25), ("1_16", 1.0 / 16.0)] {
        let (r, f) = datagen::PkFkWorkload { match_ratio: ratio, ..datagen::PkFkWorkload::uniform(nr, ns, 31) }.generate().unwrap();
        let hits = f.iter().filter(|&&k| (k as usize) < nr).count();
        let (rr, ff) = (Rel::upload(&s, &r, 2), Rel::upload(&s, &f, 2));
        let (wr, wf) = (rr.wide(2), ff.wide(2));
        let bytes = floor_bytes(nr, ns, 4, 4, 2, hits);
        cases(h, &format!("ratio_{label}_wide_4b4b"), &wr, &wf, &[Algorithm::PhjUm, Algorithm::PhjOm], bytes, hits as u64);
    }
    // |S| / |R| at |R| = 2^22.
    let nr = 1usize << 22;
    for m in [1usize, 8] {
        let ns = nr * m;
        let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 41).generate().unwrap();
        let (rr, ff) = (Rel::upload(&s, &r, 2), Rel::upload(&s, &f, 2));
        let (wr, wf) = (rr.wide(2), ff.wide(2));
        cases(h, &format!("s_over_r_{m}_wide_4b4b"), &wr, &wf, &[Algorithm::PhjOm], floor_bytes(nr, ns, 4, 4, 2, ns), ns as u64);
    }
}

/// The rest of the paper's workload families at |R| = 2^24, |S| = 2^25 (4 and 6 payload columns,
/// 8-byte payloads on 4-byte keys, Zipf factors 0.5 to 2), and |R| = 2^25 and 2^27.
fn families(h: &mut Harness) {
    let s = h.stream.clone();
    let (nr, ns) = (1usize << 24, 1usize << 25);
    let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 51).generate().unwrap();
    {
        let (rr, ff) = (Rel::upload(&s, &r, 6), Rel::upload(&s, &f, 6));
        for cols in [4usize, 6] {
            let name = format!("cols{cols}_4b4b");
            cases(h, &name, &rr.wide(cols), &ff.wide(cols), &[Algorithm::PhjUm, Algorithm::PhjOm], floor_bytes(nr, ns, 4, 4, cols, ns), ns as u64);
        }
    }
    // 4-byte keys, 8-byte payloads.
    four_byte_keys_eight_byte_payloads(h, &r, &f, "_2p24");
    for (label, z) in [("0_5", 0.5), ("1_5", 1.5), ("2", 2.0)] {
        let fz = datagen::zipf_keys_fast(ns, nr, z, 53).unwrap();
        let (rr, ff) = (Rel::upload(&s, &r, 1), Rel::upload(&s, &fz, 1));
        cases(h, &format!("zipf{label}_narrow_4b4b_2p24"), &rr.wide(1), &ff.wide(1), &[Algorithm::PhjOm], floor_bytes(nr, ns, 4, 4, 1, ns), ns as u64);
    }
    drop((r, f));
    for (label, nr, ns) in [("r2p25", 1usize << 25, 1usize << 26), ("r2p27_s_over_r_1", 1 << 27, 1 << 27)] {
        let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 57).generate().unwrap();
        let (rr, ff) = (Rel::upload(&s, &r, 1), Rel::upload(&s, &f, 1));
        drop((r, f));
        cases(h, &format!("{label}_narrow_4b4b"), &rr.wide(1), &ff.wide(1), &[Algorithm::PhjOm], floor_bytes(nr, ns, 4, 4, 1, ns), ns as u64);
    }
}

/// libcudf's join workload, maps only. The build side (left, 10M rows: the left side builds on
/// ties) has unique keys; the probe side (right, 10M rows) has 30% of its rows carrying build
/// keys, each build key at most once (libcudf cycles through the unique build keys, and 3M < 10M),
/// and 70% keys absent from the build side; both sides shuffled. Output: exactly 3M pairs.
/// - `i64_10m_30pct`: build keys random over the whole `i64` range with the low bit cleared
///   (libcudf draws its base table's values from its random-table profile, not from a narrow
///   range); absent probe keys random with the low bit set. 8-byte keys: no compression.
/// - `i64_dense_10m_30pct`: build keys 10M distinct values of `[0, 2 x 10M)` (a shuffled
///   permutation's first half), absent probe keys from `[2 x 10M, 4 x 10M)`: the keys span less
///   than 2^32, so the join runs on 32-bit offsets.
///
/// Byte floor: both key columns read once, the two maps written once.
fn libcudf(h: &mut Harness) {
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    const GROUP: &str = "libcudf";
    let (nb, np) = (10_000_000usize, 10_000_000usize);
    let matching = np * 3 / 10;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1406);
    let spread: Vec<i64> = {
        // Unique: redraw the (rare) duplicates.
        let mut v: Vec<i64> = Vec::with_capacity(nb);
        while v.len() < nb {
            v.extend((v.len()..nb).map(|_| rng.gen::<i64>() & !1));
            v.sort_unstable();
            v.dedup();
        }
        v.shuffle(&mut rng);
        v
    };
    let dense: Vec<i64> = {
        let mut all: Vec<i64> = (0..2 * nb as i64).collect();
        all.shuffle(&mut rng);
        all.truncate(nb);
        all
    };
    /// Draws one probe key that is not a build key.
    type Absent = Box<dyn Fn(&mut rand::rngs::StdRng) -> i64>;
    let workloads: [(&str, &Vec<i64>, Absent); 2] = [
        ("i64_10m_30pct", &spread, Box::new(|r: &mut rand::rngs::StdRng| r.gen::<i64>() | 1)),
        ("i64_dense_10m_30pct", &dense, Box::new(move |r: &mut rand::rngs::StdRng| r.gen_range(2 * nb as i64..4 * nb as i64))),
    ];
    for (name, build, absent) in workloads {
        let mut probe: Vec<i64> = build[..matching].to_vec();
        probe.extend((matching..np).map(|_| absent(&mut rng)));
        probe.shuffle(&mut rng);
        let s = h.stream.clone();
        let (bk, pk) = (s.copy_from_host(build).unwrap(), s.copy_from_host(&probe).unwrap());
        let (b, p) = (WideSide::new(TableView::single(bk.view()), vec![]), WideSide::new(TableView::single(pk.view()), vec![]));
        let bytes = ((nb + np) * 8 + matching * 8) as u64;
        let opts = WideJoinOptions::maps_only();
        let algos = [Algorithm::Auto, Algorithm::SmjUm, Algorithm::SmjOm, Algorithm::PhjUm, Algorithm::Nphj];
        for &a in &algos {
            wide::join(&s, b.pair(), p.pair(), JoinType::Inner, a, opts).unwrap(); // untimed: steady state
        }
        s.synchronize().unwrap();
        for a in algos {
            let case = if a == Algorithm::Auto { name.to_string() } else { format!("{name}_{}", a.suffix()) };
            timed(h, GROUP, &case, &b, &p, a, opts, bytes, matching as u64);
        }
    }
}

/// `narrow_4b8b{suffix}` and `wide_4b8b{suffix}`: the keys `r` / `f` as 4-byte keys with one or
/// two 8-byte payload columns a side (copies of the keys, widened), PHJ-UM and PHJ-OM beside Auto.
fn four_byte_keys_eight_byte_payloads(h: &mut Harness, r: &[u32], f: &[u32], suffix: &str) {
    let s = h.stream.clone();
    let (nr, ns) = (r.len(), f.len());
    let (kr, kf) = (s.copy_from_host(r).unwrap(), s.copy_from_host(f).unwrap());
    let (pr, pf) = (datagen::widen(r), datagen::widen(f));
    let pr: Vec<DeviceBuffer<u64>> = (0..2).map(|_| s.copy_from_host(&pr).unwrap()).collect();
    let pf: Vec<DeviceBuffer<u64>> = (0..2).map(|_| s.copy_from_host(&pf).unwrap()).collect();
    for cols in [1usize, 2] {
        let wr = WideSide::new(TableView::single(kr.view()), pr[..cols].iter().map(|b| b.view().into()).collect());
        let wf = WideSide::new(TableView::single(kf.view()), pf[..cols].iter().map(|b| b.view().into()).collect());
        let name = format!("{}_4b8b{suffix}", if cols == 1 { "narrow" } else { "wide" });
        cases(h, &name, &wr, &wf, &[Algorithm::PhjUm, Algorithm::PhjOm], floor_bytes(nr, ns, 4, 8, cols, ns), ns as u64);
    }
}

/// Group `auto_cost` (only with `GPUJOIN_WIDE_ONLY=auto_cost`): where the time of Auto's rows
/// above their algorithm's goes, on the `wide_4b4b` workload (PK-FK 2^26 x 2^27, two 4-byte
/// payloads a side, Auto runs PHJ-OM after sampling): Auto; PHJ-OM; PHJ-OM after a host wait for
/// the device (the drain that the sample's host reads force at the start of each call); the
/// sample alone (`wide::sample_for_tests`, as Auto calls it); the sample, then PHJ-OM.
fn auto_cost(h: &mut Harness) {
    const G: &str = "auto_cost";
    let s = h.stream.clone();
    let (nr, ns) = (1usize << 26, 1usize << 27);
    let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 11).generate().unwrap();
    let (rr, ff) = (Rel::upload(&s, &r, 2), Rel::upload(&s, &f, 2));
    drop((r, f));
    let (wr, wf) = (rr.wide(2), ff.wide(2));
    let (bytes, elements) = (floor_bytes(nr, ns, 4, 4, 2, ns), (nr + ns) as u64);
    let opts = WideJoinOptions::default();
    let join = |s: &Stream, a: Algorithm| {
        let out = wide::join(s, wr.pair(), wf.pair(), JoinType::Inner, a, opts).unwrap();
        assert_eq!(out.rows, ns as u64);
    };
    let sample = |s: &Stream| {
        let (ratio, _) = wide::sample_for_tests(s, &wr.keys, &wf.keys, JoinOptions::default(), false).unwrap();
        assert_eq!(ratio, 1.0);
    };
    for _ in 0..3 {
        join(&s, Algorithm::Auto);
    }
    h.case(G, "wide_4b4b_auto", bytes, elements, |s| join(s, Algorithm::Auto));
    h.case(G, "wide_4b4b_phj_om", bytes, elements, |s| join(s, Algorithm::PhjOm));
    h.case(G, "wide_4b4b_phj_om_drained", bytes, elements, |s| {
        s.synchronize().unwrap();
        join(s, Algorithm::PhjOm)
    });
    h.case(G, "wide_4b4b_sample", (nr * 4) as u64, nr as u64, sample);
    h.case(G, "wide_4b4b_sample_then_phj_om", bytes, elements, |s| {
        sample(s);
        join(s, Algorithm::PhjOm)
    });
}

/// The rows of `dense` and `spread` for `2^log` build rows `rr` and twice as many probe rows
/// `ff`: maps only (`maps_2p<log>_*`), one 4-byte payload a side (`narrow_...`) and, with
/// `max_cols` 2, two (`wide_...`); Auto, PHJ-UM, PHJ-OM (with payloads), NPHJ, each after one
/// untimed run.
fn unique_build_cases(h: &mut Harness, group: &str, log: u32, rr: &Rel<u32>, ff: &Rel<u32>, max_cols: usize) {
    let s = h.stream.clone();
    let (nb, np) = (rr.keys.len(), ff.keys.len());
    let kinds = [("maps", 0usize, WideJoinOptions::maps_only()), ("narrow", 1, WideJoinOptions::default()), ("wide", 2, WideJoinOptions::default())];
    for (kind, cols, opts) in kinds.into_iter().filter(|k| k.1 <= max_cols) {
        let (wr, wf) = (rr.wide(cols), ff.wide(cols));
        let algos: &[Algorithm] = if cols == 0 { &[Algorithm::Auto, Algorithm::PhjUm, Algorithm::Nphj] } else { &[Algorithm::Auto, Algorithm::PhjUm, Algorithm::PhjOm, Algorithm::Nphj] };
        let bytes = if cols == 0 { ((nb + np) * 4 + np * 8) as u64 } else { floor_bytes(nb, np, 4, 4, cols, np) };
        for &a in algos {
            wide::join(&s, wr.pair(), wf.pair(), JoinType::Inner, a, opts).unwrap(); // untimed: steady state
            let case = format!("{kind}_2p{log}_{}", if a == Algorithm::Auto { "auto" } else { a.suffix() });
            timed(h, group, &case, &wr, &wf, a, opts, bytes, np as u64);
        }
    }
}

/// Group `spread` (only with `GPUJOIN_WIDE_ONLY=spread`): `dense`'s joins with every key `k`
/// replaced by `spread32(k)` (a bijection of `u32`: unique build keys over the whole range, so no
/// direct-address table), `nb` = 2^20 to 2^24, maps only and with one 4-byte payload a side:
/// where NPHJ's unique-build hash table (4 bytes a slot, 5/3 to 10/3 slots a build row) beats the
/// partitioned hash join. Auto, PHJ-UM, PHJ-OM (with payloads), NPHJ.
fn spread(h: &mut Harness) {
    const G: &str = "spread";
    /// A bijection of `u32` (odd multipliers and xor-shifts are invertible): `0..n` spread over
    /// the range.
    fn spread32(k: u32) -> u32 {
        let mut x = k.wrapping_mul(0x9E37_79B1);
        x ^= x >> 16;
        x = x.wrapping_mul(0x85EB_CA6B);
        x ^ (x >> 13)
    }
    let s = h.stream.clone();
    for log in [20u32, 21, 22, 23, 24] {
        let (nb, np) = (1usize << log, 2usize << log);
        let (mut r, mut f) = datagen::PkFkWorkload::uniform(nb, np, 17 + log as u64).generate().unwrap();
        r.iter_mut().chain(f.iter_mut()).for_each(|k| *k = spread32(*k));
        let (rr, ff) = (Rel::upload(&s, &r, 1), Rel::upload(&s, &f, 1));
        drop((r, f));
        unique_build_cases(h, G, log, &rr, &ff, 1);
    }
}

/// Group `dense` (only with `GPUJOIN_WIDE_ONLY=dense`): PK-FK joins of dense unique build keys
/// (a permutation of `0..nb`, `u32`) and twice as many probe rows drawn from them, `nb` from
/// 2^20 to 2^25: where NPHJ's direct-address table (slot = key) beats the partitioned hash join
/// and where it stops, maps only (`maps_<log2 nb>_*`), with one 4-byte payload a side
/// (`narrow_<log2 nb>_*`) and with two (`wide_<log2 nb>_*`). Auto (which takes the table where it
/// fits in three quarters of the L2), PHJ-UM, PHJ-OM (with payloads), NPHJ.
fn dense(h: &mut Harness) {
    const G: &str = "dense";
    let s = h.stream.clone();
    for log in [20u32, 22, 23, 24, 25] {
        let (nb, np) = (1usize << log, 2usize << log);
        let (r, f) = datagen::PkFkWorkload::uniform(nb, np, 17 + log as u64).generate().unwrap();
        let (rr, ff) = (Rel::upload(&s, &r, 2), Rel::upload(&s, &f, 2));
        drop((r, f));
        unique_build_cases(h, G, log, &rr, &ff, 2);
    }
}

fn main() {
    let Some(mut h) = Harness::new("wide joins") else { return };
    // GPUJOIN_WIDE_ONLY=libcudf,dense (any of libcudf, auto_cost, dense, spread, sequences,
    // variations, families): only those groups, in that order (quick runs while tuning).
    if let Ok(only) = std::env::var("GPUJOIN_WIDE_ONLY") {
        for group in only.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            match group {
                "libcudf" => libcudf(&mut h),
                "auto_cost" => auto_cost(&mut h),
                "dense" => dense(&mut h),
                "spread" => spread(&mut h),
                "sequences" => sequences(&mut h),
                "variations" => variations(&mut h),
                "families" => families(&mut h),
                other => panic!("GPUJOIN_WIDE_ONLY: no group {other:?}"),
            }
        }
        return;
    }
    let s = h.stream.clone();
    let (nr, ns) = (1usize << 26, 1usize << 27);
    let t = std::time::Instant::now();
    let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 11).generate().unwrap();
    let fz = datagen::zipf_keys_fast(ns, nr, 1.0, 13).unwrap();
    println!("host data: {:.1} s", t.elapsed().as_secs_f64());
    let rows = ns as u64;
    let all = Algorithm::EXPLICIT;
    {
        // 4-byte keys and payloads.
        let (rr, ff, fzz) = (Rel::upload(&s, &r, 2), Rel::upload(&s, &f, 2), Rel::upload(&s, &fz, 2));
        cases(&mut h, "narrow_4b4b", &rr.wide(1), &ff.wide(1), &all, floor_bytes(nr, ns, 4, 4, 1, ns), rows);
        cases(&mut h, "wide_4b4b", &rr.wide(2), &ff.wide(2), &all, floor_bytes(nr, ns, 4, 4, 2, ns), rows);
        cases(&mut h, "zipf1_narrow_4b4b", &rr.wide(1), &fzz.wide(1), &[Algorithm::PhjOm], floor_bytes(nr, ns, 4, 4, 1, ns), rows);
        cases(&mut h, "zipf1_wide_4b4b", &rr.wide(2), &fzz.wide(2), &[Algorithm::PhjOm], floor_bytes(nr, ns, 4, 4, 2, ns), rows);
    }
    drop(fz);
    // 4-byte keys, 8-byte payloads at full size: where Auto's PHJ-UM / PHJ-OM crossover for
    // 8-byte payloads lies (at 2^24 PHJ-UM wins; see `narrow_4b8b_2p24`).
    four_byte_keys_eight_byte_payloads(&mut h, &r, &f, "");
    {
        // 8-byte keys and payloads.
        let (r8, f8) = (datagen::widen(&r), datagen::widen(&f));
        let (rr, ff) = (Rel::upload(&s, &r8, 2), Rel::upload(&s, &f8, 2));
        drop((r8, f8));
        cases(&mut h, "narrow_8b8b", &rr.wide(1), &ff.wide(1), &[Algorithm::PhjUm, Algorithm::PhjOm], floor_bytes(nr, ns, 8, 8, 1, ns), rows);
        cases(&mut h, "wide_8b8b", &rr.wide(2), &ff.wide(2), &[Algorithm::PhjUm, Algorithm::PhjOm], floor_bytes(nr, ns, 8, 8, 2, ns), rows);
    }
    drop((r, f));
    sequences(&mut h);
    variations(&mut h);
    families(&mut h);
    libcudf(&mut h);
}
