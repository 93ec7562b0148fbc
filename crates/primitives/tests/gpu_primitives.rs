//! Property tests of every primitive against a CPU reference. They run on the GPU when one is
//! present, print `SKIPPED` when none is, and fail loudly with GPUJOIN_REQUIRE_GPU=1.
//! Seeds are fixed so failures reproduce; outputs are poisoned before each run.
//! `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer cases and a 2^20 large test.

use gpujoin_device::testing::{cases, device_or_skip, rows};
use gpujoin_device::{DeviceBuffer, Pod, Stream};
use gpujoin_primitives::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

const POISON: u8 = 0xAB;

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(0x6A01_5EED), failure_persistence: None, ..Config::default() })
}

fn stream(test: &str) -> Option<Stream> {
    device_or_skip(test).map(|d| d.new_stream().expect("stream"))
}

/// Fills recently freed pool memory with POISON, so internally allocated outputs that a kernel
/// fails to write show up as garbage rather than as stale correct-looking data.
fn poison_pool(s: &Stream, bytes: usize) {
    let mut b: DeviceBuffer<u8> = s.alloc(bytes.max(1)).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
}

fn poisoned<T: Pod>(s: &Stream, n: usize) -> DeviceBuffer<T> {
    let mut b = s.alloc::<T>(n).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
    b
}

fn run<S: Strategy>(cases: u32, strat: S, f: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut r = runner(cases);
    if let Err(e) = r.run(&strat, f) {
        panic!("{e}");
    }
}

/// Sizes: 0, 1, small odd, powers of two and around them, and a few thousand.
fn sizes() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0usize), Just(1), 2..64usize, Just(255), Just(256), Just(1023), Just(1024), Just(4097), 1000..40000usize]
}

/// Data shapes: random, tiny domain (many duplicates), all equal, sorted, reverse sorted.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Random,
    FewDistinct,
    AllEqual,
    Sorted,
    Reversed,
}
fn shapes() -> impl Strategy<Value = Shape> {
    prop_oneof![Just(Shape::Random), Just(Shape::FewDistinct), Just(Shape::AllEqual), Just(Shape::Sorted), Just(Shape::Reversed)]
}

trait Gen: Copy + Pod + PartialOrd + std::fmt::Debug {
    fn from_u64(x: u64) -> Self;
    /// Radix-sort order image (what CUB sorts by).
    fn ord(self) -> u64;
}
impl Gen for u32 {
    fn from_u64(x: u64) -> Self {
        x as u32
    }
    fn ord(self) -> u64 {
        self as u64
    }
}
impl Gen for u64 {
    fn from_u64(x: u64) -> Self {
        x
    }
    fn ord(self) -> u64 {
        self
    }
}
impl Gen for i32 {
    fn from_u64(x: u64) -> Self {
        x as i32
    }
    fn ord(self) -> u64 {
        (self as u32 ^ 0x8000_0000) as u64
    }
}
impl Gen for i64 {
    fn from_u64(x: u64) -> Self {
        x as i64
    }
    fn ord(self) -> u64 {
        self as u64 ^ (1 << 63)
    }
}
impl Gen for f32 {
    fn from_u64(x: u64) -> Self {
        // Mix specials in: NaN, -0.0, 0.0, infinities, then ordinary values.
        match x % 16 {
            0 => f32::NAN,
            1 => -0.0,
            2 => 0.0,
            3 => f32::INFINITY,
            4 => f32::NEG_INFINITY,
            5 => -f32::NAN,
            _ => ((x >> 4) as i32 as f32) / 7.0,
        }
    }
    fn ord(self) -> u64 {
        let b = if self == 0.0 { 0 } else { self.to_bits() }; // -0.0 == +0.0, as CUB sorts
        (if b >> 31 == 1 { !b } else { b | 0x8000_0000 }) as u64
    }
}
impl Gen for f64 {
    fn from_u64(x: u64) -> Self {
        match x % 16 {
            0 => f64::NAN,
            1 => -0.0,
            2 => 0.0,
            3 => f64::INFINITY,
            4 => f64::NEG_INFINITY,
            5 => -f64::NAN,
            _ => ((x >> 4) as i64 as f64) / 7.0,
        }
    }
    fn ord(self) -> u64 {
        let b = if self == 0.0 { 0 } else { self.to_bits() };
        if b >> 63 == 1 { !b } else { b | (1 << 63) }
    }
}

fn make<T: Gen>(n: usize, shape: Shape, seed: u64) -> Vec<T> {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut v: Vec<T> = match shape {
        Shape::Random | Shape::Sorted | Shape::Reversed => (0..n).map(|_| T::from_u64(next())).collect(),
        Shape::FewDistinct => (0..n).map(|_| T::from_u64(next() % 5 + 16)).collect(),
        Shape::AllEqual => vec![T::from_u64(seed % 1000 + 16); n],
    };
    match shape {
        Shape::Sorted => v.sort_by_key(|a| a.ord()),
        Shape::Reversed => v.sort_by_key(|a| std::cmp::Reverse(a.ord())),
        _ => {}
    }
    v
}

fn bits_eq<T: Pod>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

fn check_sort_pairs<K: Gen + SortPairsWith<V>, V: Gen>(s: &Stream, n: usize, shape: Shape, seed: u64, order: SortOrder) -> Result<(), TestCaseError> {
    let keys = make::<K>(n, shape, seed);
    let vals: Vec<V> = (0..n as u64).map(V::from_u64).collect();
    let (dk, dv) = (s.copy_from_host(&keys).unwrap(), s.copy_from_host(&vals).unwrap());
    let (mut ok, mut ov) = (poisoned::<K>(s, n), poisoned::<V>(s, n));
    sort_pairs(s, &dk.view(), &dv.view(), &mut ok.view_mut(), &mut ov.view_mut(), order, None).unwrap();
    let mut idx: Vec<usize> = (0..n).collect();
    match order {
        SortOrder::Ascending => idx.sort_by_key(|&i| keys[i].ord()), // stable
        SortOrder::Descending => idx.sort_by_key(|&i| std::cmp::Reverse(keys[i].ord())),
    }
    let ek: Vec<K> = idx.iter().map(|&i| keys[i]).collect();
    let ev: Vec<V> = idx.iter().map(|&i| vals[i]).collect();
    prop_assert!(bits_eq(&ok.to_vec().unwrap(), &ek), "keys differ (n={n}, {shape:?}, {order:?})");
    prop_assert!(bits_eq(&ov.to_vec().unwrap(), &ev), "values differ (n={n}, {shape:?}, {order:?})");
    Ok(())
}

fn check_sort_keys<K: Gen + RadixKey>(s: &Stream, n: usize, shape: Shape, seed: u64, order: SortOrder) -> Result<(), TestCaseError> {
    let keys = make::<K>(n, shape, seed);
    let dk = s.copy_from_host(&keys).unwrap();
    let mut ok = poisoned::<K>(s, n);
    sort_keys(s, &dk.view(), &mut ok.view_mut(), order, None).unwrap();
    let mut e = keys.clone();
    match order {
        SortOrder::Ascending => e.sort_by_key(|a| a.ord()),
        SortOrder::Descending => e.sort_by_key(|a| std::cmp::Reverse(a.ord())),
    }
    prop_assert!(bits_eq(&ok.to_vec().unwrap(), &e), "sort_keys differs (n={n}, {shape:?}, {order:?})");
    Ok(())
}

#[test]
fn sort_pairs_and_keys_match_stable_cpu_sort_for_every_type() {
    let Some(s) = stream("sort_pairs_and_keys_match_stable_cpu_sort_for_every_type") else { return };
    let order = prop_oneof![Just(SortOrder::Ascending), Just(SortOrder::Descending)];
    run(cases(48, 8), (sizes(), shapes(), any::<u64>(), order), |(n, shape, seed, order)| {
        check_sort_pairs::<u32, u32>(&s, n, shape, seed, order)?;
        check_sort_pairs::<u32, u64>(&s, n, shape, seed, order)?;
        check_sort_pairs::<u64, u32>(&s, n, shape, seed, order)?;
        check_sort_pairs::<u64, u64>(&s, n, shape, seed, order)?;
        check_sort_pairs::<i32, u32>(&s, n, shape, seed, order)?;
        check_sort_pairs::<i32, u64>(&s, n, shape, seed, order)?;
        check_sort_pairs::<i64, u32>(&s, n, shape, seed, order)?;
        check_sort_pairs::<i64, u64>(&s, n, shape, seed, order)?;
        check_sort_pairs::<f32, u32>(&s, n, shape, seed, order)?;
        check_sort_pairs::<f32, u64>(&s, n, shape, seed, order)?;
        check_sort_pairs::<f64, u32>(&s, n, shape, seed, order)?;
        check_sort_pairs::<f64, u64>(&s, n, shape, seed, order)?;
        check_sort_keys::<u32>(&s, n, shape, seed, order)?;
        check_sort_keys::<u64>(&s, n, shape, seed, order)?;
        check_sort_keys::<i32>(&s, n, shape, seed, order)?;
        check_sort_keys::<i64>(&s, n, shape, seed, order)?;
        check_sort_keys::<f32>(&s, n, shape, seed, order)?;
        check_sort_keys::<f64>(&s, n, shape, seed, order)?;
        Ok(())
    });
}

#[test]
fn sort_on_a_bit_range_orders_by_those_bits_only() {
    let Some(s) = stream("sort_on_a_bit_range_orders_by_those_bits_only") else { return };
    run(cases(48, 8), (sizes(), any::<u64>(), 0u32..28, 1u32..5), |(n, seed, lo, width)| {
        let keys = make::<u32>(n, Shape::Random, seed);
        let vals: Vec<u32> = (0..n as u32).collect();
        let (dk, dv) = (s.copy_from_host(&keys).unwrap(), s.copy_from_host(&vals).unwrap());
        let (mut ok, mut ov) = (poisoned::<u32>(&s, n), poisoned::<u32>(&s, n));
        sort_pairs(&s, &dk.view(), &dv.view(), &mut ok.view_mut(), &mut ov.view_mut(), SortOrder::Ascending, Some(lo..lo + width)).unwrap();
        let mut idx: Vec<usize> = (0..n).collect();
        idx.sort_by_key(|&i| (keys[i] >> lo) & ((1 << width) - 1));
        prop_assert_eq!(ov.to_vec().unwrap(), idx.iter().map(|&i| vals[i]).collect::<Vec<_>>());
        Ok(())
    });
    // Bad ranges are errors, not panics.
    let d = s.copy_from_host(&[1u32, 2]).unwrap();
    let mut o = s.alloc::<u32>(2).unwrap();
    assert!(sort_keys(&s, &d.view(), &mut o.view_mut(), SortOrder::Ascending, Some(3..40)).is_err());
    assert!(sort_keys(&s, &d.view(), &mut o.view_mut(), SortOrder::Ascending, Some(5..5)).is_err());
}

#[test]
fn scans_match_cpu_prefix_sums() {
    let Some(s) = stream("scans_match_cpu_prefix_sums") else { return };
    run(cases(64, 10), (sizes(), shapes(), any::<u64>()), |(n, shape, seed)| {
        let x = make::<u32>(n, shape, seed);
        let dx = s.copy_from_host(&x).unwrap();
        // u32 -> u64 (no wrap), u32 -> u32 (wraps), u64 -> u64, inclusive and in place.
        let mut ex = poisoned::<u64>(&s, n);
        exclusive_sum(&s, &dx.view(), &mut ex.view_mut()).unwrap();
        let mut inc = poisoned::<u64>(&s, n);
        inclusive_sum(&s, &dx.view(), &mut inc.view_mut()).unwrap();
        let mut ex32 = poisoned::<u32>(&s, n);
        exclusive_sum(&s, &dx.view(), &mut ex32.view_mut()).unwrap();
        let x64: Vec<u64> = x.iter().map(|&v| v as u64 * 3).collect();
        let mut d64 = s.copy_from_host(&x64).unwrap();
        exclusive_sum_in_place(&s, &mut d64.view_mut()).unwrap();
        let (mut acc, mut acc32, mut acc64) = (0u64, 0u32, 0u64);
        let (mut e_ex, mut e_inc, mut e_ex32, mut e_64) = (vec![], vec![], vec![], vec![]);
        for (i, &v) in x.iter().enumerate() {
            e_ex.push(acc);
            e_ex32.push(acc32);
            e_64.push(acc64);
            acc += v as u64;
            acc32 = acc32.wrapping_add(v);
            acc64 = acc64.wrapping_add(x64[i]);
            e_inc.push(acc);
        }
        prop_assert_eq!(ex.to_vec().unwrap(), e_ex);
        prop_assert_eq!(inc.to_vec().unwrap(), e_inc);
        prop_assert_eq!(ex32.to_vec().unwrap(), e_ex32);
        prop_assert_eq!(d64.to_vec().unwrap(), e_64);
        Ok(())
    });
}

#[test]
fn run_length_encode_matches_cpu_runs() {
    let Some(s) = stream("run_length_encode_matches_cpu_runs") else { return };
    run(cases(64, 10), (sizes(), shapes(), any::<u64>()), |(n, shape, seed)| {
        let x = make::<u64>(n, shape, seed);
        poison_pool(&s, n * 16 + 4096);
        let d = s.copy_from_host(&x).unwrap();
        let runs = run_length_encode(&s, &d.view()).unwrap();
        let (mut u, mut c): (Vec<u64>, Vec<u32>) = (vec![], vec![]);
        for &v in &x {
            if u.last() == Some(&v) {
                *c.last_mut().unwrap() += 1;
            } else {
                u.push(v);
                c.push(1);
            }
        }
        prop_assert_eq!(&runs.unique.to_vec().unwrap(), &u);
        prop_assert_eq!(&runs.counts.to_vec().unwrap(), &c);
        // The single-pass kernel (used past CUB's limit) agrees (poisoned outputs, only the first
        // `runs` entries are defined).
        let (mut cu, mut cc, mut cr) = (poisoned::<u64>(&s, n), poisoned::<u32>(&s, n), poisoned::<i64>(&s, 1));
        run_length_encode_single_pass_into(&s, &d.view(), &mut cu.view_mut(), &mut cc.view_mut(), &mut cr.view_mut()).unwrap();
        let k = cr.to_vec().unwrap()[0] as usize;
        prop_assert_eq!(k, u.len());
        prop_assert_eq!(&cu.to_vec().unwrap()[..k], &u[..]);
        prop_assert_eq!(&cc.to_vec().unwrap()[..k], &c[..]);
        let d32 = s.copy_from_host(&x.iter().map(|&v| v as u32).collect::<Vec<_>>()).unwrap();
        let r32 = run_length_encode(&s, &d32.view()).unwrap();
        prop_assert_eq!(r32.counts.to_vec().unwrap().iter().map(|&c| c as u64).sum::<u64>(), n as u64);
        Ok(())
    });
}

#[test]
fn select_partition_and_reduce_match_cpu() {
    let Some(s) = stream("select_partition_and_reduce_match_cpu") else { return };
    let ops = prop_oneof![Just(Compare::Lt), Just(Compare::Le), Just(Compare::Gt), Just(Compare::Ge), Just(Compare::Eq), Just(Compare::Ne)];
    run(cases(64, 10), (sizes(), shapes(), any::<u64>(), ops), |(n, shape, seed, op)| {
        let x = make::<u32>(n, shape, seed);
        let flags: Vec<u8> = x.iter().map(|&v| (v % 3 == 0) as u8 * (1 + (v % 7) as u8)).collect();
        poison_pool(&s, n * 16 + 4096);
        let (dx, df) = (s.copy_from_host(&x).unwrap(), s.copy_from_host(&flags).unwrap());
        let sel = select_flagged(&s, &dx.view(), &df.view()).unwrap().to_vec().unwrap();
        let e: Vec<u32> = x.iter().zip(&flags).filter(|(_, &f)| f != 0).map(|(&v, _)| v).collect();
        prop_assert_eq!(&sel, &e);
        let pivot = x.get(n / 2).copied().unwrap_or(7);
        let sif = select_if(&s, &dx.view(), op, pivot).unwrap().to_vec().unwrap();
        prop_assert_eq!(sif, x.iter().copied().filter(|&v| op.eval(v, pivot)).collect::<Vec<_>>());
        // Row ids by flag value, from indices and from a row list.
        let idx_set: Vec<u32> = (0..n as u32).filter(|&i| flags[i as usize] != 0).collect();
        let idx_unset: Vec<u32> = (0..n as u32).filter(|&i| flags[i as usize] == 0).collect();
        prop_assert_eq!(select_by_flag(&s, None, &df.view(), true).unwrap().to_vec().unwrap(), idx_set);
        prop_assert_eq!(select_by_flag(&s, None, &df.view(), false).unwrap().to_vec().unwrap(), idx_unset);
        let rows_unset: Vec<u32> = x.iter().zip(&flags).filter(|(_, &f)| f == 0).map(|(&v, _)| v).collect();
        prop_assert_eq!(select_by_flag(&s, Some(&dx.view()), &df.view(), false).unwrap().to_vec().unwrap(), rows_unset);
        let (part, k) = partition_flagged(&s, &dx.view(), &df.view()).unwrap();
        let part = part.to_vec().unwrap();
        prop_assert_eq!(k, e.len());
        prop_assert_eq!(&part[..k], &e[..]);
        let mut rest: Vec<u32> = x.iter().zip(&flags).filter(|(_, &f)| f == 0).map(|(&v, _)| v).collect();
        rest.reverse();
        prop_assert_eq!(&part[k..], &rest[..]);
        prop_assert_eq!(reduce_sum(&s, &dx.view()).unwrap(), x.iter().map(|&v| v as u64).sum::<u64>());
        let x64: Vec<u64> = x.iter().map(|&v| v as u64 * 17).collect();
        let d64 = s.copy_from_host(&x64).unwrap();
        prop_assert_eq!(reduce_sum(&s, &d64.view()).unwrap(), x64.iter().fold(0u64, |a, &b| a.wrapping_add(b)));
        let xi: Vec<i64> = x.iter().map(|&v| v as i64 - (1 << 31)).collect();
        let di = s.copy_from_host(&xi).unwrap();
        prop_assert_eq!(reduce_sum(&s, &di.view()).unwrap(), xi.iter().fold(0i64, |a, &b| a.wrapping_add(b)));
        // f64: small integers sum exactly in any order.
        let xf: Vec<f64> = x.iter().map(|&v| (v % 1024) as f64 - 512.0).collect();
        let df = s.copy_from_host(&xf).unwrap();
        prop_assert_eq!(reduce_sum(&s, &df.view()).unwrap(), xf.iter().sum::<f64>());
        let sel64 = select_if(&s, &d64.view(), Compare::Gt, 17 * pivot as u64).unwrap().to_vec().unwrap();
        prop_assert_eq!(sel64, x64.iter().copied().filter(|&v| v > 17 * pivot as u64).collect::<Vec<_>>());
        Ok(())
    });
}

#[test]
fn radix_histogram_and_stable_partition_match_cpu() {
    let Some(s) = stream("radix_histogram_and_stable_partition_match_cpu") else { return };
    run(cases(48, 8), (sizes(), shapes(), any::<u64>(), 0u32..20, 1u32..12), |(n, shape, seed, shift, bits)| {
        let keys = make::<u64>(n, shape, seed);
        let vals: Vec<u32> = (0..n as u32).collect();
        let (dk, dv) = (s.copy_from_host(&keys).unwrap(), s.copy_from_host(&vals).unwrap());
        poison_pool(&s, n * 24 + 4096);
        let p = radix_partition(&s, &dk.view(), &dv.view(), shift, bits).unwrap();
        let digit = |k: u64| ((k >> shift) & ((1 << bits) - 1)) as usize;
        let mut idx: Vec<usize> = (0..n).collect();
        idx.sort_by_key(|&i| digit(keys[i])); // stable
        prop_assert_eq!(p.values.to_vec().unwrap(), idx.iter().map(|&i| vals[i]).collect::<Vec<_>>());
        prop_assert_eq!(p.keys.to_vec().unwrap(), idx.iter().map(|&i| keys[i]).collect::<Vec<_>>());
        let mut offsets = vec![0u64; (1 << bits) + 1];
        for &k in &keys {
            offsets[digit(k) + 1] += 1;
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        prop_assert_eq!(p.offsets, offsets);
        Ok(())
    });
    // u32 histograms against a CPU count, poisoned output.
    run(cases(32, 6), (sizes(), shapes(), any::<u64>(), 0u32..24, 1u32..9), |(n, shape, seed, shift, bits)| {
        let keys = make::<u32>(n, shape, seed);
        let dk = s.copy_from_host(&keys).unwrap();
        let mut h = poisoned::<u32>(&s, 1 << bits);
        radix_histogram(&s, &dk.view(), shift, bits, &mut h.view_mut()).unwrap();
        let mut e = vec![0u32; 1 << bits];
        for &k in &keys {
            e[((k >> shift) & ((1 << bits) - 1)) as usize] += 1;
        }
        prop_assert_eq!(h.to_vec().unwrap(), e);
        Ok(())
    });
    let d = s.copy_from_host(&[1u32]).unwrap();
    let mut h = s.alloc::<u32>(2).unwrap();
    assert!(radix_histogram(&s, &d.view(), 30, 5, &mut h.view_mut()).is_err());
    assert!(radix_histogram(&s, &d.view(), 0, 2, &mut h.view_mut()).is_err(), "4 bins into 2 counters");
}

#[test]
fn gather_scatter_iota_fill_match_cpu() {
    let Some(s) = stream("gather_scatter_iota_fill_match_cpu") else { return };
    run(cases(64, 10), (sizes(), sizes(), any::<u64>()), |(n_src, n_idx, seed)| {
        let src: Vec<u64> = make::<u64>(n_src, Shape::Random, seed);
        let src32: Vec<u32> = src.iter().map(|&v| v as u32).collect();
        let idx: Vec<u32> = make::<u32>(n_idx, Shape::Random, seed ^ 99)
            .into_iter()
            .map(|v| if n_src == 0 || v % 9 == 0 { NO_ROW } else { v % n_src as u32 })
            .collect();
        let (ds, ds32, di) = (s.copy_from_host(&src).unwrap(), s.copy_from_host(&src32).unwrap(), s.copy_from_host(&idx).unwrap());
        let mut out = poisoned::<u64>(&s, n_idx);
        gather_into(&s, &ds.view(), &di.view(), &mut out.view_mut(), 77).unwrap();
        let e: Vec<u64> = idx.iter().map(|&i| if i == NO_ROW { 77 } else { src[i as usize] }).collect();
        prop_assert_eq!(out.to_vec().unwrap(), e);
        let o32 = gather(&s, &ds32.view(), &di.view(), 5u32).unwrap();
        prop_assert_eq!(o32.to_vec().unwrap(), idx.iter().map(|&i| if i == NO_ROW { 5 } else { src32[i as usize] }).collect::<Vec<_>>());
        // Scatter through a permutation round-trips.
        let mut perm: Vec<u32> = (0..n_src as u32).collect();
        perm.sort_by_key(|&i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed);
        let dp = s.copy_from_host(&perm).unwrap();
        let mut sc = poisoned::<u64>(&s, n_src);
        scatter(&s, &ds.view(), &dp.view(), &mut sc.view_mut()).unwrap();
        let sc = sc.to_vec().unwrap();
        for (i, &p) in perm.iter().enumerate() {
            prop_assert_eq!(sc[p as usize], src[i]);
        }
        let mut io = poisoned::<u32>(&s, n_idx);
        iota_u32(&s, &mut io.view_mut(), 40).unwrap();
        prop_assert_eq!(io.to_vec().unwrap(), (0..n_idx as u32).map(|i| i + 40).collect::<Vec<_>>());
        let mut fl = poisoned::<f64>(&s, n_idx);
        fill(&s, &mut fl.view_mut(), -2.5f64).unwrap();
        prop_assert_eq!(fl.to_vec().unwrap(), vec![-2.5f64; n_idx]);
        Ok(())
    });
    // Out-of-range indices are errors.
    let src = s.copy_from_host(&[1u32, 2]).unwrap();
    let idx = s.copy_from_host(&[0u32, 5]).unwrap();
    assert!(gather(&s, &src.view(), &idx.view(), 0).is_err());
    let mut out = s.alloc::<u32>(2).unwrap();
    assert!(scatter(&s, &src.view(), &idx.view(), &mut out.view_mut()).is_err());
}

fn check_search<T: Gen + SearchKey>(s: &Stream, na: usize, nb: usize, shape: Shape, seed: u64) -> Result<(), TestCaseError> {
    let mut a = make::<T>(na, shape, seed);
    let mut b = make::<T>(nb, shape, seed ^ 0x55);
    a.sort_by_key(|x| x.ord());
    b.sort_by_key(|x| x.ord());
    let (da, db) = (s.copy_from_host(&a).unwrap(), s.copy_from_host(&b).unwrap());
    poison_pool(s, (na + nb) * 16 + 4096);
    for bound in [Bound::Lower, Bound::Upper] {
        let r = sorted_search(s, &da.view(), &db.view(), bound, SearchOutputs::ALL).unwrap();
        let e_idx: Vec<u32> = a
            .iter()
            .map(|x| match bound {
                Bound::Lower => b.partition_point(|y| y.ord() < x.ord()) as u32,
                Bound::Upper => b.partition_point(|y| y.ord() <= x.ord()) as u32,
            })
            .collect();
        let e_am: Vec<u8> = a.iter().map(|x| b.iter().any(|y| y.ord() == x.ord()) as u8).collect();
        let e_bm: Vec<u8> = b.iter().map(|y| a.iter().any(|x| y.ord() == x.ord()) as u8).collect();
        prop_assert_eq!(r.a_index.unwrap().to_vec().unwrap(), e_idx, "{:?} n={},{} {:?}", bound, na, nb, shape);
        prop_assert_eq!(r.a_match.unwrap().to_vec().unwrap(), e_am, "a_match {:?}", bound);
        prop_assert_eq!(r.b_match.unwrap().to_vec().unwrap(), e_bm, "b_match {:?}", bound);
    }
    Ok(())
}

#[test]
fn sorted_search_matches_cpu_bounds_and_flags() {
    let Some(s) = stream("sorted_search_matches_cpu_bounds_and_flags") else { return };
    let small = prop_oneof![Just(0usize), Just(1), 2..50usize, 1000..6000usize];
    run(cases(48, 8), (small.clone(), small, shapes(), any::<u64>()), |(na, nb, shape, seed)| {
        check_search::<u32>(&s, na, nb, shape, seed)?;
        check_search::<u64>(&s, na, nb, shape, seed)?;
        check_search::<i32>(&s, na, nb, shape, seed)?;
        check_search::<i64>(&s, na, nb, shape, seed)?;
        check_search::<f32>(&s, na, nb, shape, seed)?;
        check_search::<f64>(&s, na, nb, shape, seed)?;
        Ok(())
    });
}

#[test]
fn merge_path_partitions_split_the_merge_evenly() {
    let Some(s) = stream("merge_path_partitions_split_the_merge_evenly") else { return };
    run(cases(48, 8), (sizes(), sizes(), shapes(), any::<u64>(), 1usize..300, any::<bool>()), |(na, nb, shape, seed, tile, a_first)| {
        let mut a = make::<u32>(na, shape, seed);
        let mut b = make::<u32>(nb, shape, seed ^ 7);
        a.sort();
        b.sort();
        let (da, db) = (s.copy_from_host(&a).unwrap(), s.copy_from_host(&b).unwrap());
        let p = merge_path_partitions(&s, &da.view(), &db.view(), tile, a_first).unwrap().to_vec().unwrap();
        // CPU merge with the same tie rule; count A items in each prefix.
        let (mut i, mut j, mut a_before) = (0usize, 0usize, vec![0i64]);
        while i + j < na + nb {
            let take_a = j >= nb || (i < na && if a_first { a[i] <= b[j] } else { a[i] < b[j] });
            if take_a { i += 1 } else { j += 1 }
            a_before.push(i as i64);
        }
        let e: Vec<i64> = (0..=(na + nb).div_ceil(tile)).map(|q| a_before[(q * tile).min(na + nb)]).collect();
        prop_assert_eq!(p, e);
        Ok(())
    });
}

#[test]
fn load_balancing_search_matches_cpu_expansion() {
    let Some(s) = stream("load_balancing_search_matches_cpu_expansion") else { return };
    let counts_strat = prop_oneof![
        proptest::collection::vec(0u32..4, 0..3000),             // many small, empty segments
        proptest::collection::vec(0u32..40, 0..500),
        proptest::collection::vec(prop_oneof![Just(0u32), Just(1), 5000..20000u32], 0..20), // skew
        Just(vec![0u32; 100]),
        Just(vec![]),
    ];
    run(cases(64, 10), counts_strat, |counts| {
        poison_pool(&s, counts.iter().map(|&c| c as usize).sum::<usize>() * 8 + 4096);
        let d = s.copy_from_host(&counts).unwrap();
        let e = load_balancing_search(&s, &d.view()).unwrap();
        let (mut seg, mut rank) = (vec![], vec![]);
        for (i, &c) in counts.iter().enumerate() {
            for r in 0..c {
                seg.push(i as u32);
                rank.push(r);
            }
        }
        prop_assert_eq!(e.segments.to_vec().unwrap(), seg);
        prop_assert_eq!(e.ranks.to_vec().unwrap(), rank);
        Ok(())
    });
}

#[test]
fn large_inputs_2_pow_26_sort_scan_and_search() {
    let Some(s) = stream("large_inputs_2_pow_26_sort_scan_and_search") else { return };
    // Reduced: 2^20, still hundreds of tiles for the sort, scan and search.
    let n = rows(1 << 26, 1 << 20);
    let keys = make::<u32>(n, Shape::Random, 42);
    let vals: Vec<u32> = (0..n as u32).collect();
    let (dk, dv) = (s.copy_from_host(&keys).unwrap(), s.copy_from_host(&vals).unwrap());
    let (sk, sv) = sort_pairs_new(&s, &dk.view(), &dv.view(), SortOrder::Ascending).unwrap();
    let (sk, sv) = (sk.to_vec().unwrap(), sv.to_vec().unwrap());
    assert!(sk.windows(2).all(|w| w[0] <= w[1]), "sorted");
    assert!(sv.iter().zip(&sk).all(|(&v, &k)| keys[v as usize] == k), "values follow keys");
    let ones = s.copy_from_host(&vec![1u32; n]).unwrap();
    let mut ex = s.alloc::<u64>(n).unwrap();
    exclusive_sum(&s, &ones.view(), &mut ex.view_mut()).unwrap();
    let ex = ex.to_vec().unwrap();
    assert!(ex.iter().enumerate().all(|(i, &v)| v == i as u64));
    let dsk = s.copy_from_host(&sk).unwrap();
    let r = sorted_search(&s, &dsk.view(), &dsk.view(), Bound::Lower, SearchOutputs::INDEX).unwrap();
    let idx = r.a_index.unwrap().to_vec().unwrap();
    assert!(idx.iter().enumerate().all(|(i, &j)| sk[j as usize] == sk[i] && (j == 0 || sk[j as usize - 1] < sk[i])));
    assert_eq!(reduce_sum(&s, &ones.view()).unwrap(), n as u64);
}

#[test]
fn run_length_encode_refuses_too_many_items_without_truncating() {
    let Some(s) = stream("run_length_encode_refuses_too_many_items_without_truncating") else { return };
    // The length checks come before any device access, so dangling views of 2^31 and 2^32 items
    // are safe here.
    let (mut u, mut c, mut r) = (s.alloc::<u32>(1).unwrap(), s.alloc::<u32>(1).unwrap(), s.alloc::<i64>(1).unwrap());
    let cub_huge = unsafe { gpujoin_device::DeviceView::<u32>::from_raw(0, 1usize << 31) };
    match run_length_encode_cub_into(&s, &cub_huge, &mut u.view_mut(), &mut c.view_mut(), &mut r.view_mut()) {
        Err(gpujoin_device::Error::TooLarge { count, limit, .. }) => assert_eq!((count, limit), (1 << 31, i32::MAX as u64)),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("2^31 items must be refused by CUB's encode"),
    }
    let huge = unsafe { gpujoin_device::DeviceView::<u32>::from_raw(0, 1usize << 32) };
    match run_length_encode(&s, &huge) {
        Err(gpujoin_device::Error::TooLarge { count, limit, .. }) => assert_eq!((count, limit), (1 << 32, u32::MAX as u64 - 1)),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("2^32 items must be refused"),
    }
    // Outputs shorter than the input are refused too.
    let x = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    assert!(run_length_encode_into(&s, &x.view(), &mut u.view_mut(), &mut c.view_mut(), &mut r.view_mut()).is_err());
}
