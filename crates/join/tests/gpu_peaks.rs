//! Peak device memory of every join algorithm against its memory plan (issue 10,
//! `gpujoin_join::memory`): each join runs on a few input shapes with 4- and 8-byte keys, its
//! measured peak (the pool's high-water mark during the call, less what was in use before it:
//! the join's working memory, its output included) must stay within
//! [`memory::working_bytes`], and at full size the bound must not be absurd either
//! (`bound <= 3 * measured + 64 MiB`). One line per case:
//! `PEAK <algorithm> <shape>: measured X MiB, bound Y MiB (ratio)`.
//!
//! Shapes: `unique` (2^20 x 2^20 unique keys), `fk` (2^18 primary keys, 2^21 foreign keys),
//! `m2m` (2^16 x 2^16 rows over 256 keys: 2^24 output rows), each with 4-byte (`u32`) and
//! 8-byte (`u64`) keys spread over 64 bits, and the wide joins again on 8-byte keys that span
//! less than 2^32 (`k8 compressed`: joined as 32-bit offsets); theta joins on their own relations. `GPUJOIN_TEST_SIZE=small`
//! (sanitizer runs) shrinks every size to a few thousand rows and checks the upper bound only
//! (the allowance's constant dominates there).
//!
//! The pool's peak counter is device-wide: every case runs in the one test function of this
//! executable, one after the other.

use gpujoin_device::testing::{device_or_skip, pick, reduced};
use gpujoin_device::{Device, DeviceBuffer, Stream};
use gpujoin_join::chunked::{join_chunks, ChunkBudget};
use gpujoin_join::device_relation::upload;
use gpujoin_join::indexed_nested_loop::indexed_nested_loop_join;
use gpujoin_join::memory::{self, JoinSizes, KeyShape, Payloads, PeakAlgorithm, ThetaKind};
use gpujoin_join::predicate::{col_l, col_r, schema_of};
use gpujoin_join::table::{Column, ColumnView, HostColumn, HostTable, TableView};
use gpujoin_join::theta::{choose_path, theta_join, ThetaPath};
use gpujoin_join::wide::{self, Algorithm, Output, WideJoinOptions};
use gpujoin_join::{
    interleave_join, non_partitioned_hash_join, partitioned_hash_join, partitioned_hash_join_with_payloads, sort_merge_join, sort_merge_join_size, sorted_merge_join,
    JoinOptions, JoinType, Materialization, Side,
};
use gpujoin_testkit::datagen;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MIB: u64 = 1 << 20;
const OPTS: JoinOptions = JoinOptions { null_equality: gpujoin_join::NullEquality::NullEqualsNothing, nan_equality: gpujoin_join::NanEquality::NanEqualsNan, ..JoinOptions::DEFAULT };

fn mib(b: u64) -> f64 {
    b as f64 / MIB as f64
}

/// Measures peaks and collects the verdicts.
struct Meter {
    device: Device,
    stream: Stream,
    /// Extra bytes the pool may count per allocation (rounding), times the live allocations a
    /// join may hold at once.
    tolerance: u64,
    failures: Vec<String>,
    cases: usize,
}

impl Meter {
    fn new(device: Device) -> Meter {
        let stream = device.new_stream().unwrap();
        let rounding = allocation_rounding(&device, &stream);
        println!("PEAK pool rounding: about {rounding} bytes per allocation");
        Meter { device, stream, tolerance: 64 * rounding, failures: Vec::new(), cases: 0 }
    }

    /// Runs `f` and returns its result and the pool's high-water mark during it, less what was in
    /// use before it.
    fn measure<T>(&self, f: impl FnOnce(&Stream) -> T) -> (T, u64) {
        self.stream.synchronize().unwrap();
        self.device.synchronize().unwrap();
        let before = self.device.pool_memory().unwrap().in_use;
        self.device.reset_peak_memory().unwrap();
        let out = f(&self.stream);
        self.stream.synchronize().unwrap();
        let peak = self.device.peak_memory().unwrap();
        (out, peak.saturating_sub(before))
    }

    /// Measures `f`, which returns the join's output rows, and checks the peak against the plan
    /// of `sizes(output rows)`. Returns the rows.
    fn case(&mut self, name: &str, shape: &str, algorithm: PeakAlgorithm, sizes: impl FnOnce(u64) -> JoinSizes, f: impl FnOnce(&Stream) -> u64) -> u64 {
        let (rows, measured) = self.measure(f);
        let sizes = sizes(rows);
        self.check(name, shape, algorithm, &sizes, measured);
        rows
    }

    fn check(&mut self, name: &str, shape: &str, algorithm: PeakAlgorithm, sizes: &JoinSizes, measured: u64) {
        self.cases += 1;
        let bound = memory::working_bytes(algorithm, sizes);
        let ratio = bound as f64 / measured.max(1) as f64;
        println!(
            "PEAK {name} {shape}: measured {:.1} MiB, bound {:.1} MiB ({ratio:.2}x; inputs {:.1} MiB, {} output rows)",
            mib(measured),
            mib(bound),
            mib(sizes.input_bytes()),
            sizes.output_rows
        );
        if measured > bound + self.tolerance {
            self.failures.push(format!("{name} {shape}: measured {measured} bytes > bound {bound} (+{} tolerance)", self.tolerance));
        }
        if !reduced() && bound > 3 * measured + 64 * MIB {
            self.failures.push(format!("{name} {shape}: bound {bound} bytes > 3 x measured {measured} + 64 MiB"));
        }
    }
}

/// Bytes the pool counts beyond the request, per allocation (small and odd-sized ones).
fn allocation_rounding(d: &Device, s: &Stream) -> u64 {
    s.synchronize().unwrap();
    let before = d.pool_memory().unwrap().in_use;
    let small: Vec<DeviceBuffer<u8>> = (0..16).map(|_| s.alloc::<u8>(1).unwrap()).collect();
    let odd: DeviceBuffer<u8> = s.alloc((3 << 20) + 1).unwrap();
    let after = d.pool_memory().unwrap().in_use;
    drop((small, odd));
    s.synchronize().unwrap();
    (after.saturating_sub(before)).saturating_sub(16 + (3 << 20) + 1).div_ceil(17)
}

/// A key column of either width on the device.
enum Col {
    U32(DeviceBuffer<u32>),
    U64(DeviceBuffer<u64>),
}

impl Col {
    /// `keys` as 4-byte keys, or spread over 64 bits (a bijection: equal keys stay equal).
    fn upload(s: &Stream, keys: &[u32], width: u32) -> Col {
        if width == 4 {
            Col::U32(s.copy_from_host(keys).unwrap())
        } else {
            Col::U64(s.copy_from_host(&wide_keys(keys)).unwrap())
        }
    }
    fn keys(&self) -> TableView<'_> {
        match self {
            Col::U32(b) => TableView::single(b.view()),
            Col::U64(b) => TableView::single(b.view()),
        }
    }
}

fn wide_keys(keys: &[u32]) -> Vec<u64> {
    keys.iter().map(|&k| (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect()
}

/// One side of a shape on the device: keys, the same keys sorted, payloads, an INLJ column.
struct SideData {
    rows: u64,
    keys: Col,
    sorted: Col,
    p32: DeviceBuffer<u32>,
    p64: DeviceBuffer<u64>,
    column: Column,
}

impl SideData {
    fn upload(s: &Stream, keys: &[u32], width: u32) -> SideData {
        let sorted = if width == 4 {
            let mut v = keys.to_vec();
            v.sort_unstable();
            Col::U32(s.copy_from_host(&v).unwrap())
        } else {
            let mut v = wide_keys(keys);
            v.sort_unstable();
            Col::U64(s.copy_from_host(&v).unwrap())
        };
        let ids: Vec<u32> = (0..keys.len() as u32).collect();
        let ids64: Vec<u64> = ids.iter().map(|&i| i as u64 * 3).collect();
        let column = if width == 4 { Column::upload(s, &HostColumn::from_values(keys.to_vec())).unwrap() } else { Column::upload(s, &HostColumn::from_values(wide_keys(keys))).unwrap() };
        SideData { rows: keys.len() as u64, keys: Col::upload(s, keys, width), sorted, p32: s.copy_from_host(&ids).unwrap(), p64: s.copy_from_host(&ids64).unwrap(), column }
    }

    /// The one payload column of the PHJ cases: as wide as the keys.
    fn payload(&self, width: u32) -> ColumnView<'_> {
        if width == 4 {
            self.p32.view().into()
        } else {
            self.p64.view().into()
        }
    }
}

/// Every equi-join algorithm on one shape and key width; each must return `expected` rows (the
/// chunked join's first chunk at most that many).
fn equi_joins(m: &mut Meter, shape: &str, lk: &[u32], rk: &[u32], width: u32, index: Side, expected: u64) {
    let s = m.stream.clone();
    let (l, r) = (SideData::upload(&s, lk, width), SideData::upload(&s, rk, width));
    let shape = format!("{shape} k{width}");
    let key = KeyShape::integer(width);
    let plain = |o: u64| JoinSizes::inner(l.rows, r.rows, key, o);
    let jt = JoinType::Inner;
    let mut rows: Vec<(String, u64)> = Vec::new();

    let got = m.case("sorted_merge_join", &shape, PeakAlgorithm::SortedMergeJoin, plain, |s| match (&l.sorted, &r.sorted) {
        (Col::U32(a), Col::U32(b)) => sorted_merge_join(s, &a.view(), &b.view(), jt).unwrap().rows(),
        (Col::U64(a), Col::U64(b)) => sorted_merge_join(s, &a.view(), &b.view(), jt).unwrap().rows(),
        _ => unreachable!(),
    });
    rows.push(("sorted_merge_join".to_string(), got));
    let got = m.case("sort_merge_join", &shape, PeakAlgorithm::SortMergeJoin, plain, |s| sort_merge_join(s, &l.keys.keys(), &r.keys.keys(), jt, OPTS).unwrap().rows());
    rows.push(("sort_merge_join".to_string(), got));
    let got = m.case("sort_merge_join_size", &shape, PeakAlgorithm::SortMergeJoinSize, plain, |s| sort_merge_join_size(s, &l.keys.keys(), &r.keys.keys(), jt, OPTS).unwrap());
    rows.push(("sort_merge_join_size".to_string(), got));
    let got = m.case("interleave_join", &shape, PeakAlgorithm::InterleaveJoin, plain, |s| interleave_join(s, &l.keys.keys(), &r.keys.keys(), jt, OPTS).unwrap().rows());
    rows.push(("interleave_join".to_string(), got));
    let got = m.case("hash_join", &shape, PeakAlgorithm::HashJoin, plain, |s| non_partitioned_hash_join(s, &l.keys.keys(), &r.keys.keys(), jt, OPTS).unwrap().rows());
    rows.push(("hash_join".to_string(), got));
    let got = m.case("partitioned_hash_join", &shape, PeakAlgorithm::PartitionedHashJoin, plain, |s| {
        partitioned_hash_join(s, &l.keys.keys(), &r.keys.keys(), jt, OPTS).unwrap().maps.rows()
    });
    rows.push(("partitioned_hash_join".to_string(), got));
    for (name, mode) in [("PHJ-UM+payload", Materialization::Unclustered), ("PHJ-OM+payload", Materialization::Clustered)] {
        let p = Payloads::of_widths(&[width]);
        let got = m.case(name, &shape, PeakAlgorithm::PartitionedHashJoinWithPayloads(mode), |o| plain(o).with_payloads(p, p), |s| {
            partitioned_hash_join_with_payloads(s, &l.keys.keys(), &[l.payload(width)], &r.keys.keys(), &[r.payload(width)], jt, OPTS, mode).unwrap().rows
        });
        rows.push((name.to_string(), got));
    }
    // Wide joins: two payload columns on the left (4 and 8 bytes), one on the right.
    let (lp, rp) = (Payloads::of_widths(&[4, 8]), Payloads::of_widths(&[4]));
    for a in Algorithm::EXPLICIT {
        let name = format!("wide {}", a.name());
        let got = m.case(&name, &shape, PeakAlgorithm::Wide(a, Output::Relation), |o| plain(o).with_payloads(lp, rp), |s| {
            let left = (l.keys.keys(), vec![l.p32.view().into(), l.p64.view().into()]);
            let right = (r.keys.keys(), vec![r.p32.view().into()]);
            wide::join(s, (&left.0, &left.1[..]), (&right.0, &right.1[..]), jt, a, WideJoinOptions::default()).unwrap().rows
        });
        rows.push((name, got));
    }
    let got = m.case("wide SMJ-OM maps-only", &shape, PeakAlgorithm::Wide(Algorithm::SmjOm, Output::MapsOnly), plain, |s| {
        let left = (l.keys.keys(), vec![]);
        let right = (r.keys.keys(), vec![]);
        wide::join(s, (&left.0, &left.1[..]), (&right.0, &right.1[..]), jt, Algorithm::SmjOm, WideJoinOptions::maps_only()).unwrap().rows
    });
    rows.push(("wide SMJ-OM maps-only".to_string(), got));
    let index_name = format!("indexed_nested_loop({index:?} indexed)");
    let got = m.case(&index_name, &shape, PeakAlgorithm::IndexedNestedLoop { index }, plain, |s| indexed_nested_loop_join(s, &l.column.view(), &r.column.view(), jt, index).unwrap().rows());
    rows.push((index_name, got));
    // The chunked equi-join: the source and its first chunk (a quarter of the output at most).
    let total = sort_merge_join_size(&s, &l.keys.keys(), &r.keys.keys(), jt, OPTS).unwrap();
    let budget = ChunkBudget::Bytes((8 * total / 4).max(1 << 16));
    let first = m.case("chunked equi (first chunk)", &shape, PeakAlgorithm::ChunkedEqui, plain, |s| {
        let mut chunks = join_chunks(s, &l.keys.keys(), &r.keys.keys(), jt, OPTS, budget).unwrap();
        chunks.next().map_or(0, |c| c.unwrap().data.rows())
    });
    assert!(first > 0 && first <= expected, "chunked equi {shape}: first chunk of {first} rows, {expected} in all");
    for (name, got) in rows {
        assert_eq!(got, expected, "{name} {shape}: output rows");
    }
}

/// The wide joins on 8-byte keys that span less than 2^32 (`k + 2^40`): joined as 32-bit
/// offsets from the smallest key (key compression, checked through the reason), whose `4N` of
/// offsets the plan of 8-byte keys must cover; every algorithm must return `expected` rows.
fn compressed_wide_joins(m: &mut Meter, shape: &str, lk: &[u32], rk: &[u32], expected: u64) {
    let s = m.stream.clone();
    let up = |k: &[u32]| s.copy_from_host(&k.iter().map(|&x| x as u64 + (1 << 40)).collect::<Vec<_>>()).unwrap();
    let (lkeys, rkeys) = (up(lk), up(rk));
    let ids = |n: usize| (s.copy_from_host(&(0..n as u32).collect::<Vec<_>>()).unwrap(), s.copy_from_host(&(0..n as u64).map(|i| i * 3).collect::<Vec<_>>()).unwrap());
    let ((l32, l64), (r32, _)) = (ids(lk.len()), ids(rk.len()));
    let shape = format!("{shape} k8 compressed");
    let plain = |o: u64| JoinSizes::inner(lk.len() as u64, rk.len() as u64, KeyShape::integer(8), o);
    let (lp, rp) = (Payloads::of_widths(&[4, 8]), Payloads::of_widths(&[4]));
    let mut rows: Vec<(String, u64)> = Vec::new();
    for a in Algorithm::EXPLICIT {
        let name = format!("wide {}", a.name());
        let got = m.case(&name, &shape, PeakAlgorithm::Wide(a, Output::Relation), |o| plain(o).with_payloads(lp, rp), |s| {
            let left = (TableView::single(lkeys.view()), vec![l32.view().into(), l64.view().into()]);
            let right = (TableView::single(rkeys.view()), vec![r32.view().into()]);
            let out = wide::join(s, (&left.0, &left.1[..]), (&right.0, &right.1[..]), JoinType::Inner, a, WideJoinOptions::default()).unwrap();
            assert!(out.reason.contains("32-bit offsets"), "{name} {shape}: not compressed: {}", out.reason);
            out.rows
        });
        rows.push((name, got));
    }
    let got = m.case("wide PHJ-UM maps-only", &shape, PeakAlgorithm::Wide(Algorithm::PhjUm, Output::MapsOnly), plain, |s| {
        let left = (TableView::single(lkeys.view()), vec![]);
        let right = (TableView::single(rkeys.view()), vec![]);
        wide::join(s, (&left.0, &left.1[..]), (&right.0, &right.1[..]), JoinType::Inner, Algorithm::PhjUm, WideJoinOptions::maps_only()).unwrap().rows
    });
    rows.push(("wide PHJ-UM maps-only".to_string(), got));
    for (name, got) in rows {
        assert_eq!(got, expected, "{name} {shape}: output rows");
    }
}

fn theta_joins(m: &mut Meter) {
    let s = m.stream.clone();
    let mut rng = StdRng::seed_from_u64(77);
    // Sorted path: l.0 > r.0, about 2^9 right rows per left row at full size.
    let (nl, nr) = (pick(1usize << 16, 1 << 10), pick(1usize << 20, 1 << 12));
    for width in [4u32, 8] {
        let lv: Vec<u32> = (0..nl).map(|_| rng.gen_range(0..1u32 << 20)).collect();
        let rv: Vec<u32> = (0..nr).map(|_| rng.gen_range(0..1u32 << 30)).collect();
        let col = |v: &[u32]| if width == 4 { HostColumn::from_values(v.to_vec()) } else { HostColumn::from_values(v.iter().map(|&x| x as u64).collect::<Vec<u64>>()) };
        let (lr, rr) = (HostTable::new(vec![("k", col(&lv))]).unwrap(), HostTable::new(vec![("k", col(&rv))]).unwrap());
        let p = col_l(0).greater(col_r(0)).check(&schema_of(&lr).unwrap(), &schema_of(&rr).unwrap()).unwrap();
        assert!(matches!(choose_path(&p), ThetaPath::Sorted(_)));
        let (dl, dr) = (upload(&s, &lr).unwrap(), upload(&s, &rr).unwrap());
        let (dl, dr) = (dl.view(), dr.view());
        let sizes = |o: u64| JoinSizes::inner(nl as u64, nr as u64, KeyShape::integer(width), o);
        m.case("theta sorted", &format!("l>r k{width}"), PeakAlgorithm::Theta(ThetaKind::Sorted), sizes, |s| theta_join(s, &dl, &dr, &p, JoinType::Inner).unwrap().rows());
    }
    // Nested loop: l.0 < r.0 and l.1 > r.1 (two inequalities on different columns).
    let (nl, nr) = (pick(1usize << 13, 1 << 9), pick(1usize << 14, 1 << 10));
    let rel = |n: usize, rng: &mut StdRng| {
        let a: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let b: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        HostTable::new(vec![("c0", HostColumn::from_values::<u32>(a)), ("c1", HostColumn::from_values::<u32>(b))]).unwrap()
    };
    let (lr, rr) = (rel(nl, &mut rng), rel(nr, &mut rng));
    let p = col_l(0).less(col_r(0)).and(col_l(1).greater(col_r(1))).check(&schema_of(&lr).unwrap(), &schema_of(&rr).unwrap()).unwrap();
    assert!(matches!(choose_path(&p), ThetaPath::NestedLoop));
    let (dl, dr) = (upload(&s, &lr).unwrap(), upload(&s, &rr).unwrap());
    let (dl, dr) = (dl.view(), dr.view());
    let two = KeyShape { columns: 2, bytes: 8, floats: false, nullable: false };
    let sizes = |o: u64| JoinSizes::inner(nl as u64, nr as u64, two, o);
    m.case("theta nested loop", "l0<r0 & l1>r1", PeakAlgorithm::Theta(ThetaKind::NestedLoop), sizes, |s| theta_join(s, &dl, &dr, &p, JoinType::Inner).unwrap().rows());
    // Mixed: l.0 = r.0 (4 rows a key a side) and l.1 < r.1.
    let n = pick(1usize << 18, 1 << 11);
    let mixed_rel = |seed: u64, rng: &mut StdRng| {
        let k = datagen::foreign_keys_uniform(n / 4, n, seed).unwrap();
        let v: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        HostTable::new(vec![("c0", HostColumn::from_values::<u32>(k)), ("c1", HostColumn::from_values::<u32>(v))]).unwrap()
    };
    let (lr, rr) = (mixed_rel(5, &mut rng), mixed_rel(6, &mut rng));
    let p = col_l(0).equals(col_r(0)).and(col_l(1).less(col_r(1))).check(&schema_of(&lr).unwrap(), &schema_of(&rr).unwrap()).unwrap();
    assert!(matches!(choose_path(&p), ThetaPath::Mixed));
    let (dl, dr) = (upload(&s, &lr).unwrap(), upload(&s, &rr).unwrap());
    let (dl, dr) = (dl.view(), dr.view());
    fn key_of<'d>(d: &'d TableView<'_>) -> TableView<'d> {
        TableView::single(d.columns()[0].typed::<u32>().expect("u32 keys"))
    }
    let pairs = non_partitioned_hash_join(&s, &key_of(&dl), &key_of(&dr), JoinType::Inner, OPTS).unwrap().rows();
    let sizes = |o: u64| JoinSizes::inner(n as u64, n as u64, KeyShape::integer(4), o).with_join_type(JoinType::Inner, o, pairs);
    m.case("theta mixed", "l0=r0 & l1<r1", PeakAlgorithm::Theta(ThetaKind::Mixed), sizes, |s| theta_join(s, &dl, &dr, &p, JoinType::Inner).unwrap().rows());
}

#[test]
fn measured_peaks_stay_within_the_memory_plan() {
    let Some(device) = device_or_skip("measured_peaks_stay_within_the_memory_plan") else { return };
    let t0 = std::time::Instant::now();
    let mut m = Meter::new(device);
    // unique: 2^20 x 2^20 primary keys; fk: 2^18 primary keys, 2^21 foreign keys; m2m: 2^16 x
    // 2^16 rows over 256 keys (256 rows a key a side: 2^24 output rows).
    let (nu, npk, nfk, nmm, domain) = (pick(1usize << 20, 1 << 12), pick(1usize << 18, 1 << 10), pick(1usize << 21, 1 << 13), pick(1usize << 16, 1 << 10), pick(256usize, 16));
    let unique = (datagen::shuffled_dense_keys(nu, 1).unwrap(), datagen::shuffled_dense_keys(nu, 2).unwrap());
    let fk = (datagen::shuffled_dense_keys(npk, 3).unwrap(), datagen::foreign_keys_uniform(npk, nfk, 4).unwrap());
    let m2m = (datagen::foreign_keys_uniform(domain, nmm, 5).unwrap(), datagen::foreign_keys_uniform(domain, nmm, 6).unwrap());
    for width in [4u32, 8] {
        equi_joins(&mut m, "unique", &unique.0, &unique.1, width, Side::Right, nu as u64);
        equi_joins(&mut m, "fk", &fk.0, &fk.1, width, Side::Left, nfk as u64);
        equi_joins(&mut m, "m2m", &m2m.0, &m2m.1, width, Side::Right, (nmm * nmm / domain) as u64);
    }
    compressed_wide_joins(&mut m, "unique", &unique.0, &unique.1, nu as u64);
    compressed_wide_joins(&mut m, "fk", &fk.0, &fk.1, nfk as u64);
    compressed_wide_joins(&mut m, "m2m", &m2m.0, &m2m.1, (nmm * nmm / domain) as u64);
    theta_joins(&mut m);
    println!("PEAK {} cases in {:.1} s", m.cases, t0.elapsed().as_secs_f64());
    assert!(m.failures.is_empty(), "{} of {} cases outside the memory plan:\n{}", m.failures.len(), m.cases, m.failures.join("\n"));
}
