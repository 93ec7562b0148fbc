//! `partition_pairs` (the onesweep radix partition of cuda/kernels/partition.cu) against a CPU
//! stable sort by the digit bits and against CUB's `sort_pairs` on the same bit range, and
//! `partition_pairs_wide` (the one-pass partition of cuda/kernels/partition_wide.cu, up to 12
//! bits, both write modes) against the same CPU sort, with its partition offsets. GPU tests:
//! they print `SKIPPED` without a GPU and fail loudly with GPUJOIN_REQUIRE_GPU=1. Seeds are fixed;
//! outputs and the stream pool are poisoned before each run; values are row numbers, so any
//! instability or lost row shows. `GPUJOIN_TEST_SIZE=small` (for compute-sanitizer) runs fewer
//! property cases and 2^17 instead of 2^20 rows; the tile-boundary and portion tests keep their
//! sizes (a few tiles each).

use std::ops::Range;

use gpujoin_device::testing::{cases, device_or_skip, rows};
use gpujoin_device::{DeviceBuffer, Error, Pod, Stream};
use gpujoin_primitives::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

const POISON: u8 = 0xAB;

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, rng_seed: RngSeed::Fixed(0x9A27_5EED), failure_persistence: None, ..Config::default() })
}

fn stream(test: &str) -> Option<Stream> {
    device_or_skip(test).map(|d| d.new_stream().expect("stream"))
}

/// Fills recently freed pool memory with POISON, so temporary storage starts as garbage.
fn poison_pool(s: &Stream, bytes: usize) {
    let mut b: DeviceBuffer<u8> = s.alloc(bytes.max(1)).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
}

fn poisoned<T: Pod>(s: &Stream, n: usize) -> DeviceBuffer<T> {
    let mut b = s.alloc::<T>(n).unwrap();
    s.memset_bytes(&mut b.view_mut(), POISON).unwrap();
    b
}

trait Key: PartitionKey + SortPairsWith<u32> + SortPairsWith<u64> + Eq {
    fn from_u64(x: u64) -> Self;
    fn to_u64(self) -> u64;
}
impl Key for u32 {
    fn from_u64(x: u64) -> Self {
        x as u32
    }
    fn to_u64(self) -> u64 {
        self as u64
    }
}
impl Key for u64 {
    fn from_u64(x: u64) -> Self {
        x
    }
    fn to_u64(self) -> u64 {
        self
    }
}

trait Val: Pod + Eq + std::fmt::Debug {
    /// Row `i`'s value; 8-byte values also carry it in the high word, so all bytes must move.
    fn row(i: usize) -> Self;
}
impl Val for u32 {
    fn row(i: usize) -> Self {
        i as u32
    }
}
impl Val for u64 {
    fn row(i: usize) -> Self {
        (i as u64) | ((i as u64 ^ 0x5A5A) << 40)
    }
}

fn field_mask(bits: &Range<u32>) -> u64 {
    let len = bits.end - bits.start;
    if len == 64 { u64::MAX } else { (1u64 << len) - 1 }
}
fn digit<K: Key>(k: K, bits: &Range<u32>) -> u64 {
    (k.to_u64() >> bits.start) & field_mask(bits)
}

/// Key shapes.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Random keys.
    Random,
    /// Random keys whose digit bits are all one value (one partition).
    EqualDigits,
    /// Distinct keys (an odd multiple of the row number).
    Distinct,
    /// 90% of the keys in one digit, the rest random.
    Skewed,
    /// Five distinct keys.
    FewKeys,
}
fn shapes() -> impl Strategy<Value = Shape> {
    prop_oneof![Just(Shape::Random), Just(Shape::EqualDigits), Just(Shape::Distinct), Just(Shape::Skewed), Just(Shape::FewKeys)]
}

fn make_keys<K: Key>(n: usize, shape: Shape, bits: &Range<u32>, seed: u64) -> Vec<K> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let field = field_mask(bits) << bits.start;
    let fixed = next() & field;
    (0..n)
        .map(|i| {
            let r = next();
            let k = match shape {
                Shape::Random => r,
                Shape::EqualDigits => (r & !field) | fixed,
                Shape::Distinct => {
                    if std::mem::size_of::<K>() == 4 {
                        (i as u32).wrapping_mul(0x9E37_79B1) as u64
                    } else {
                        (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    }
                }
                Shape::Skewed => {
                    if r % 10 != 0 {
                        (r & !field) | fixed
                    } else {
                        r.rotate_left(17)
                    }
                }
                Shape::FewKeys => [3u64, 0xFFFF_FFFF_FFFF_FFFF, 0x1234_5678_9ABC_DEF0, 0, 0x8000_0000_8000_0000][(r % 5) as usize],
            };
            K::from_u64(k)
        })
        .collect()
}

/// The CPU reference: a stable sort of the rows by digit.
fn reference<K: Key, V: Val>(keys: &[K], vals: &[V], bits: &Range<u32>) -> (Vec<K>, Vec<V>) {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by_key(|&i| digit(keys[i], bits));
    (idx.iter().map(|&i| keys[i]).collect(), idx.iter().map(|&i| vals[i]).collect())
}

fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len(), "{} length", what);
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        return Err(TestCaseError::fail(format!(
            "{what}: first difference at {i} of {}: got {:?}, want {:?}",
            got.len(),
            got[i],
            want[i]
        )));
    }
    Ok(())
}

/// Partitions `keys` (values = row numbers) by `bits` with `partition_pairs` (in portions of
/// `portion_tiles` tiles; 0 = default) and with CUB, and compares both with the CPU reference.
fn check<K: Key + SortPairsWith<V>, V: Val>(s: &Stream, keys: &[K], bits: Range<u32>, portion_tiles: u32) -> Result<(), TestCaseError> {
    let n = keys.len();
    let vals: Vec<V> = (0..n).map(V::row).collect();
    let (want_k, want_v) = reference(keys, &vals, &bits);
    let ki = s.copy_from_host(keys).unwrap();
    let vi = s.copy_from_host(&vals).unwrap();
    poison_pool(s, n * 2 * (std::mem::size_of::<K>() + std::mem::size_of::<V>()) + (1 << 20));
    let (mut ko, mut vo) = (poisoned::<K>(s, n), poisoned::<V>(s, n));
    partition_pairs_in_portions(s, &ki.view(), &vi.view(), &mut ko.view_mut(), &mut vo.view_mut(), bits.clone(), portion_tiles)
        .map_err(|e| TestCaseError::fail(format!("partition_pairs: {e}")))?;
    same("partition_pairs keys", &ko.to_vec().unwrap(), &want_k)?;
    same("partition_pairs values", &vo.to_vec().unwrap(), &want_v)?;
    // The inputs are untouched.
    same("keys_in after", &ki.to_vec().unwrap(), keys)?;
    same("values_in after", &vi.to_vec().unwrap(), &vals)?;
    // CUB's stable sort on the same bit range gives the same output.
    let (mut ck, mut cv) = (poisoned::<K>(s, n), poisoned::<V>(s, n));
    sort_pairs(s, &ki.view(), &vi.view(), &mut ck.view_mut(), &mut cv.view_mut(), SortOrder::Ascending, Some(bits)).unwrap();
    same("cub keys", &ck.to_vec().unwrap(), &want_k)?;
    same("cub values", &cv.to_vec().unwrap(), &want_v)?;
    Ok(())
}

fn sizes(tile: usize) -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        2..64usize,
        Just(tile - 1),
        Just(tile),
        Just(tile + 1),
        Just(3 * tile + 7),
        1000..40000usize,
    ]
}

const RANGES_32: [Range<u32>; 8] = [0..1, 0..8, 0..16, 3..14, 8..24, 0..32, 31..32, 5..29];
const RANGES_64: [Range<u32>; 12] = [0..1, 0..8, 0..16, 3..14, 8..24, 0..32, 32..64, 0..64, 40..53, 60..64, 0..40, 63..64];

fn ranges<K: Key>() -> Vec<Range<u32>> {
    if K::BITS == 32 { RANGES_32.to_vec() } else { RANGES_64.to_vec() }
}

fn property<K: Key + SortPairsWith<V>, V: Val>(test: &str, cases: u32) {
    let Some(s) = stream(test) else { return };
    let tile = partition_pairs_tile_items::<K>();
    let rs = ranges::<K>();
    let strat = (sizes(tile), shapes(), 0..rs.len(), any::<u64>());
    let mut r = runner(cases);
    if let Err(e) = r.run(&strat, |(n, shape, ri, seed)| {
        let bits = rs[ri].clone();
        let keys = make_keys::<K>(n, shape, &bits, seed);
        check::<K, V>(&s, &keys, bits, 0)
    }) {
        panic!("{e}");
    }
}

#[test]
fn partition_pairs_u32_u32_matches_cpu_and_cub() {
    property::<u32, u32>("partition_pairs_u32_u32_matches_cpu_and_cub", cases(48, 8));
}

#[test]
fn partition_pairs_u32_u64_matches_cpu_and_cub() {
    property::<u32, u64>("partition_pairs_u32_u64_matches_cpu_and_cub", cases(24, 4));
}

#[test]
fn partition_pairs_u64_u32_matches_cpu_and_cub() {
    property::<u64, u32>("partition_pairs_u64_u32_matches_cpu_and_cub", cases(32, 6));
}

#[test]
fn partition_pairs_u64_u64_matches_cpu_and_cub() {
    property::<u64, u64>("partition_pairs_u64_u64_matches_cpu_and_cub", cases(32, 6));
}

/// Every bit range and shape at the tile boundaries, for every type pair.
fn boundaries<K: Key + SortPairsWith<V>, V: Val>(s: &Stream) {
    let tile = partition_pairs_tile_items::<K>();
    for n in [tile - 1, tile, tile + 1, 2 * tile + 1] {
        for bits in ranges::<K>() {
            for shape in [Shape::Random, Shape::EqualDigits, Shape::Skewed] {
                check::<K, V>(s, &make_keys::<K>(n, shape, &bits, n as u64 * 31 + bits.start as u64), bits.clone(), 0)
                    .unwrap_or_else(|e| panic!("n {n}, bits {bits:?}, {shape:?}: {e}"));
            }
        }
    }
}

#[test]
fn partition_pairs_tile_boundaries() {
    let Some(s) = stream("partition_pairs_tile_boundaries") else { return };
    boundaries::<u32, u32>(&s);
    boundaries::<u32, u64>(&s);
    boundaries::<u64, u32>(&s);
    boundaries::<u64, u64>(&s);
}

/// About 2^20 rows: many tiles in flight, so the look-back waits on running tiles (reduced:
/// 2^17 rows, still 33 tiles of 4096 u32 or 43 of 3072 u64 keys).
#[test]
fn partition_pairs_about_2p20() {
    let Some(s) = stream("partition_pairs_about_2p20") else { return };
    let n = rows(1 << 20, 1 << 17) + 17;
    for (shape, bits) in [(Shape::Random, 0..16), (Shape::Skewed, 0..16), (Shape::Random, 0..32), (Shape::Distinct, 8..24)] {
        check::<u32, u32>(&s, &make_keys::<u32>(n, shape, &bits, 7), bits.clone(), 0)
            .unwrap_or_else(|e| panic!("u32/u32 {shape:?} {bits:?}: {e}"));
    }
    for (shape, bits) in [(Shape::Random, 0..16), (Shape::Skewed, 32..64), (Shape::Random, 0..64)] {
        check::<u64, u64>(&s, &make_keys::<u64>(n, shape, &bits, 9), bits.clone(), 0)
            .unwrap_or_else(|e| panic!("u64/u64 {shape:?} {bits:?}: {e}"));
    }
}

/// Several kernel launches per pass (the path of inputs over 2^30 rows), with small portions.
#[test]
fn partition_pairs_in_small_portions() {
    let Some(s) = stream("partition_pairs_in_small_portions") else { return };
    let tile = partition_pairs_tile_items::<u32>();
    for portion_tiles in [1u32, 2, 3, 7] {
        for n in [tile, 5 * tile + 3, 23 * tile + 1] {
            for (shape, bits) in [(Shape::Random, 0..16), (Shape::Skewed, 3..14), (Shape::Random, 0..32)] {
                check::<u32, u32>(&s, &make_keys::<u32>(n, shape, &bits, n as u64), bits.clone(), portion_tiles)
                    .unwrap_or_else(|e| panic!("portions of {portion_tiles} tiles, n {n}, {shape:?} {bits:?}: {e}"));
            }
        }
    }
    let tile64 = partition_pairs_tile_items::<u64>();
    check::<u64, u64>(&s, &make_keys::<u64>(9 * tile64 + 5, Shape::Random, &(0..64), 3), 0..64, 2).unwrap();
}

#[test]
fn partition_pairs_refuses_bad_arguments() {
    let Some(s) = stream("partition_pairs_refuses_bad_arguments") else { return };
    let k = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    let v = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    let (mut ko, mut vo) = (s.alloc::<u32>(3).unwrap(), s.alloc::<u32>(3).unwrap());
    let invalid = |r: gpujoin_device::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(partition_pairs(&s, &k.view(), &v.view(), &mut ko.view_mut(), &mut vo.view_mut(), 0..0)));
    assert!(invalid(partition_pairs(&s, &k.view(), &v.view(), &mut ko.view_mut(), &mut vo.view_mut(), 0..33)));
    assert!(invalid(partition_pairs(&s, &k.view(), &v.view(), &mut ko.view_mut(), &mut vo.view_mut(), Range { start: 9, end: 4 })));
    let mut short = s.alloc::<u32>(2).unwrap();
    assert!(partition_pairs(&s, &k.view(), &v.view(), &mut short.view_mut(), &mut vo.view_mut(), 0..8).is_err());
    assert!(partition_pairs(&s, &k.view(), &v.view(), &mut ko.view_mut(), &mut short.view_mut(), 0..8).is_err());
    let v16 = s.copy_from_host(&[1u16, 2, 3]).unwrap();
    let mut vo16 = s.alloc::<u16>(3).unwrap();
    assert!(invalid(partition_pairs(&s, &k.view(), &v16.view(), &mut ko.view_mut(), &mut vo16.view_mut(), 0..8)));
    // Empty input: nothing to do, any valid range.
    let (e, ev) = (s.alloc::<u64>(0).unwrap(), s.alloc::<u64>(0).unwrap());
    let (mut eo, mut evo) = (s.alloc::<u64>(0).unwrap(), s.alloc::<u64>(0).unwrap());
    partition_pairs(&s, &e.view(), &ev.view(), &mut eo.view_mut(), &mut evo.view_mut(), 0..64).unwrap();
}

// ---------------------------------------------------------------------------------------------
// `partition_pairs_wide` (the one-pass partition of cuda/kernels/partition_wide.cu) against the
// CPU reference, in both write modes, with the partition offsets.

/// Digit ranges of 1 to 12 bits at low, middle and high shifts.
const WIDE_RANGES_32: [Range<u32>; 10] = [0..1, 0..4, 3..9, 0..8, 0..11, 0..12, 5..17, 20..32, 31..32, 13..24];
const WIDE_RANGES_64: [Range<u32>; 10] = [0..1, 0..12, 3..14, 40..52, 52..64, 63..64, 30..42, 0..7, 32..43, 61..64];

fn wide_ranges<K: Key>() -> Vec<Range<u32>> {
    if K::BITS == 32 { WIDE_RANGES_32.to_vec() } else { WIDE_RANGES_64.to_vec() }
}

/// The partition offsets of the reference: `2^bits + 1` entries.
fn reference_offsets<K: Key>(keys: &[K], bits: &Range<u32>) -> Vec<u64> {
    let mut counts = vec![0u64; 1 << (bits.end - bits.start)];
    for &k in keys {
        counts[digit(k, bits) as usize] += 1;
    }
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut acc = 0u64;
    offsets.push(0);
    for c in counts {
        acc += c;
        offsets.push(acc);
    }
    offsets
}

/// The write modes the tests force (Auto picks one of them).
const WRITES: [WideWrites; 2] = [WideWrites::L2, WideWrites::Shared];

/// The items per tile `partition_pairs_wide_into` uses for `(K, V)` by `bits` with `options`.
fn wide_tile<K: Key, V: Val>(s: &Stream, n: usize, bits: u32, options: WideOptions) -> usize {
    partition_pairs_wide_plan::<K, V>(s, n, bits, options, true).unwrap().tile_items
}

/// Partitions `keys` (values = row numbers) by `bits` with `partition_pairs_wide_into` into
/// poisoned outputs and offsets, and compares all three with the CPU reference.
fn check_wide<K: Key, V: Val>(s: &Stream, keys: &[K], bits: Range<u32>, options: WideOptions) -> Result<(), TestCaseError> {
    let n = keys.len();
    let vals: Vec<V> = (0..n).map(V::row).collect();
    let (want_k, want_v) = reference(keys, &vals, &bits);
    let want_offsets = reference_offsets(keys, &bits);
    let ki = s.copy_from_host(keys).unwrap();
    let vi = s.copy_from_host(&vals).unwrap();
    poison_pool(s, n * 2 * (std::mem::size_of::<K>() + std::mem::size_of::<V>()) + (16 << 20));
    let (mut ko, mut vo) = (poisoned::<K>(s, n), poisoned::<V>(s, n));
    let mut offsets = poisoned::<u64>(s, want_offsets.len());
    partition_pairs_wide_into(s, &ki.view(), &vi.view(), &mut ko.view_mut(), &mut vo.view_mut(), &mut offsets.view_mut(), bits.clone(), options)
        .map_err(|e| TestCaseError::fail(format!("partition_pairs_wide: {e}")))?;
    same("partition_pairs_wide keys", &ko.to_vec().unwrap(), &want_k)?;
    same("partition_pairs_wide values", &vo.to_vec().unwrap(), &want_v)?;
    same("partition_pairs_wide offsets", &offsets.to_vec().unwrap(), &want_offsets)?;
    same("keys_in after", &ki.to_vec().unwrap(), keys)?;
    same("values_in after", &vi.to_vec().unwrap(), &vals)?;
    Ok(())
}

/// Random sizes (0, 1, small, around one tile, a few tiles, up to 40000), shapes, ranges, write
/// modes and chunk counts (0: one per SM; a few blocks put many tiles in each chunk).
fn wide_property<K: Key, V: Val>(test: &str, cases: u32) {
    let Some(s) = stream(test) else { return };
    let rs = wide_ranges::<K>();
    let strat = (0..8usize, 2..40000usize, shapes(), 0..rs.len(), 0..WRITES.len(), prop_oneof![Just(0u32), Just(1), Just(2), Just(3), Just(7)], any::<u64>());
    let mut r = runner(cases);
    if let Err(e) = r.run(&strat, |(size_kind, size, shape, ri, wi, blocks, seed)| {
        let bits = rs[ri].clone();
        let options = WideOptions { writes: WRITES[wi], blocks };
        let tile = wide_tile::<K, V>(&s, 1 << 20, bits.end - bits.start, options);
        let n = match size_kind {
            0 => 0,
            1 => 1,
            2 => size % 64,
            3 => tile - 1,
            4 => tile,
            5 => tile + 1,
            6 => 3 * tile + 7,
            _ => size,
        };
        let keys = make_keys::<K>(n, shape, &bits, seed);
        check_wide::<K, V>(&s, &keys, bits, options)
    }) {
        panic!("{e}");
    }
}

#[test]
fn partition_pairs_wide_u32_u32_matches_cpu() {
    wide_property::<u32, u32>("partition_pairs_wide_u32_u32_matches_cpu", cases(48, 8));
}

#[test]
fn partition_pairs_wide_u32_u64_matches_cpu() {
    wide_property::<u32, u64>("partition_pairs_wide_u32_u64_matches_cpu", cases(32, 4));
}

#[test]
fn partition_pairs_wide_u64_u32_matches_cpu() {
    wide_property::<u64, u32>("partition_pairs_wide_u64_u32_matches_cpu", cases(32, 4));
}

#[test]
fn partition_pairs_wide_u64_u64_matches_cpu() {
    wide_property::<u64, u64>("partition_pairs_wide_u64_u64_matches_cpu", cases(32, 4));
}

/// Around tile and chunk boundaries, in both write modes: one chunk, chunks of one tile, and a
/// few chunks of several tiles each (3 blocks over 7 or 8 tiles), every shape.
fn wide_boundaries<K: Key, V: Val>(s: &Stream) {
    let bits_list: Vec<Range<u32>> = if K::BITS == 32 { vec![0..12, 5..16, 0..8, 20..21] } else { vec![0..12, 52..64, 30..41, 63..64] };
    for writes in WRITES {
        for bits in &bits_list {
            let probe = WideOptions { writes, blocks: 0 };
            let tile = wide_tile::<K, V>(s, 1 << 20, bits.end - bits.start, probe);
            for n in [tile - 1, tile, tile + 1, 2 * tile + 1, 7 * tile, 7 * tile + 1, 8 * tile - 1] {
                for blocks in [0u32, 1, 3] {
                    for shape in [Shape::Random, Shape::EqualDigits, Shape::Skewed, Shape::FewKeys] {
                        let keys = make_keys::<K>(n, shape, bits, n as u64 * 31 + bits.start as u64 + blocks as u64);
                        check_wide::<K, V>(s, &keys, bits.clone(), WideOptions { writes, blocks })
                            .unwrap_or_else(|e| panic!("{writes:?}, {blocks} blocks, n {n}, bits {bits:?}, {shape:?}: {e}"));
                    }
                }
            }
        }
    }
}

#[test]
fn partition_pairs_wide_tile_and_chunk_boundaries() {
    let Some(s) = stream("partition_pairs_wide_tile_and_chunk_boundaries") else { return };
    wide_boundaries::<u32, u32>(&s);
    wide_boundaries::<u32, u64>(&s);
    wide_boundaries::<u64, u32>(&s);
    wide_boundaries::<u64, u64>(&s);
}

/// About 2^20 rows (many tiles per chunk with the default grid), every write mode, 8, 11 and 12
/// bits, every shape (reduced: 2^17 rows).
#[test]
fn partition_pairs_wide_about_2p20() {
    let Some(s) = stream("partition_pairs_wide_about_2p20") else { return };
    let n = rows(1 << 20, 1 << 17) + 17;
    for writes in [WideWrites::Auto, WideWrites::L2, WideWrites::Shared] {
        let options = WideOptions { writes, blocks: 0 };
        for bits in [0..12, 0..11, 4..12, 0..8] {
            for shape in [Shape::Random, Shape::Skewed, Shape::EqualDigits, Shape::Distinct, Shape::FewKeys] {
                check_wide::<u32, u32>(&s, &make_keys::<u32>(n, shape, &bits, 7), bits.clone(), options)
                    .unwrap_or_else(|e| panic!("u32/u32 {writes:?} {shape:?} {bits:?}: {e}"));
            }
        }
        for (shape, bits) in [(Shape::Random, 0..12), (Shape::Skewed, 52..64), (Shape::Random, 20..31), (Shape::EqualDigits, 0..12)] {
            check_wide::<u64, u64>(&s, &make_keys::<u64>(n, shape, &bits, 9), bits.clone(), options)
                .unwrap_or_else(|e| panic!("u64/u64 {writes:?} {shape:?} {bits:?}: {e}"));
            check_wide::<u32, u64>(&s, &make_keys::<u32>(n, shape, &(bits.start % 20..bits.start % 20 + 12), 11), bits.start % 20..bits.start % 20 + 12, options)
                .unwrap_or_else(|e| panic!("u32/u64 {writes:?} {shape:?}: {e}"));
        }
    }
}

/// One large input (2^24 + 3 rows; reduced: 2^18 + 3) by 12 bits, both write modes.
#[test]
fn partition_pairs_wide_large() {
    let Some(s) = stream("partition_pairs_wide_large") else { return };
    let n = rows(1 << 24, 1 << 18) + 3;
    let keys = make_keys::<u32>(n, Shape::Random, &(0..12), 0x5EED);
    for writes in WRITES {
        check_wide::<u32, u32>(&s, &keys, 0..12, WideOptions { writes, blocks: 0 }).unwrap_or_else(|e| panic!("{writes:?}: {e}"));
    }
    check_wide::<u32, u32>(&s, &keys, 3..15, WideOptions::default()).unwrap();
}

/// The default entry point returns the offsets on the device; it agrees with CUB's sort.
#[test]
fn partition_pairs_wide_default_matches_cub() {
    let Some(s) = stream("partition_pairs_wide_default_matches_cub") else { return };
    let n = rows(300_001, 50_001);
    for bits in [0..12, 7..18, 0..1] {
        let keys = make_keys::<u32>(n, Shape::Random, &bits, 3);
        let vals: Vec<u32> = (0..n as u32).collect();
        let (ki, vi) = (s.copy_from_host(&keys).unwrap(), s.copy_from_host(&vals).unwrap());
        let (mut ko, mut vo) = (poisoned::<u32>(&s, n), poisoned::<u32>(&s, n));
        let offsets = partition_pairs_wide(&s, &ki.view(), &vi.view(), &mut ko.view_mut(), &mut vo.view_mut(), bits.clone()).unwrap();
        let (mut ck, mut cv) = (poisoned::<u32>(&s, n), poisoned::<u32>(&s, n));
        sort_pairs(&s, &ki.view(), &vi.view(), &mut ck.view_mut(), &mut cv.view_mut(), SortOrder::Ascending, Some(bits.clone())).unwrap();
        assert_eq!(ko.to_vec().unwrap(), ck.to_vec().unwrap(), "keys by {bits:?}");
        assert_eq!(vo.to_vec().unwrap(), cv.to_vec().unwrap(), "values by {bits:?}");
        assert_eq!(offsets.to_vec().unwrap(), reference_offsets(&keys, &bits), "offsets by {bits:?}");
    }
}

/// The plan: write-combining runs where it fits (u32/u32 up to 12 bits on a 227 KB SM), and the
/// grid follows the SM count and the options.
#[test]
fn partition_pairs_wide_plans() {
    let Some(s) = stream("partition_pairs_wide_plans") else { return };
    let shared = WideOptions { writes: WideWrites::Shared, blocks: 0 };
    for bits in [1, 8, 11, 12] {
        let p = partition_pairs_wide_plan::<u32, u32>(&s, 1 << 27, bits, shared, true).unwrap();
        assert_eq!(p.writes, WideWrites::Shared, "u32/u32 at {bits} bits: {p:?}");
        assert!(p.group >= 4, "{p:?}");
    }
    let l2 = partition_pairs_wide_plan::<u64, u64>(&s, 1 << 27, 12, WideOptions { writes: WideWrites::L2, blocks: 0 }, true).unwrap();
    assert_eq!((l2.writes, l2.group), (WideWrites::L2, 1));
    // Misaligned outputs and 2^32 rows fall back to L2.
    assert_eq!(partition_pairs_wide_plan::<u32, u32>(&s, 1 << 27, 12, shared, false).unwrap().writes, WideWrites::L2);
    assert_eq!(partition_pairs_wide_plan::<u32, u32>(&s, 1 << 32, 12, shared, true).unwrap().writes, WideWrites::L2);
    // Chunks: capped at the tiles, at least 2 for 2 tiles or more.
    let p = partition_pairs_wide_plan::<u32, u32>(&s, 10, 12, WideOptions { writes: WideWrites::L2, blocks: 5 }, true).unwrap();
    assert_eq!(p.blocks, 1);
    let p = partition_pairs_wide_plan::<u32, u32>(&s, 1 << 27, 12, WideOptions { writes: WideWrites::L2, blocks: 1 }, true).unwrap();
    assert_eq!(p.blocks, 2);
    let p = partition_pairs_wide_plan::<u32, u32>(&s, 1 << 27, 12, WideOptions::default(), true).unwrap();
    assert!(p.blocks >= 2 && p.tile_items >= 1024, "{p:?}");
}

#[test]
fn partition_pairs_wide_refuses_bad_arguments() {
    let Some(s) = stream("partition_pairs_wide_refuses_bad_arguments") else { return };
    let k = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    let v = s.copy_from_host(&[1u32, 2, 3]).unwrap();
    let (mut ko, mut vo) = (s.alloc::<u32>(3).unwrap(), s.alloc::<u32>(3).unwrap());
    let invalid = |r: gpujoin_device::Result<DeviceBuffer<u64>>| matches!(r, Err(Error::InvalidArgument(_)));
    for bits in [0..0, 0..13, 20..33, Range { start: 9, end: 4 }, 32..33] {
        assert!(invalid(partition_pairs_wide(&s, &k.view(), &v.view(), &mut ko.view_mut(), &mut vo.view_mut(), bits.clone())), "{bits:?}");
    }
    let mut short = s.alloc::<u32>(2).unwrap();
    assert!(partition_pairs_wide(&s, &k.view(), &v.view(), &mut short.view_mut(), &mut vo.view_mut(), 0..8).is_err());
    assert!(partition_pairs_wide(&s, &k.view(), &v.view(), &mut ko.view_mut(), &mut short.view_mut(), 0..8).is_err());
    let v16 = s.copy_from_host(&[1u16, 2, 3]).unwrap();
    let mut vo16 = s.alloc::<u16>(3).unwrap();
    assert!(matches!(
        partition_pairs_wide(&s, &k.view(), &v16.view(), &mut ko.view_mut(), &mut vo16.view_mut(), 0..8),
        Err(Error::InvalidArgument(_))
    ));
    // An offsets buffer of the wrong length.
    let mut offsets = s.alloc::<u64>(256).unwrap();
    let r = partition_pairs_wide_into(&s, &k.view(), &v.view(), &mut ko.view_mut(), &mut vo.view_mut(), &mut offsets.view_mut(), 0..8, WideOptions::default());
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
    // u64 keys: the high bits are fine, past 64 is not.
    let k64 = s.copy_from_host(&[1u64 << 63, 2, 3]).unwrap();
    let mut ko64 = s.alloc::<u64>(3).unwrap();
    let off = partition_pairs_wide(&s, &k64.view(), &v.view(), &mut ko64.view_mut(), &mut vo.view_mut(), 52..64).unwrap();
    assert_eq!(ko64.to_vec().unwrap(), vec![2, 3, 1u64 << 63]);
    assert_eq!(off.to_vec().unwrap()[4096], 3);
    assert!(matches!(
        partition_pairs_wide(&s, &k64.view(), &v.view(), &mut ko64.view_mut(), &mut vo.view_mut(), 60..65),
        Err(Error::InvalidArgument(_))
    ));
    // Empty input: the offsets are all zero (written over poison).
    let (e, ev) = (s.alloc::<u64>(0).unwrap(), s.alloc::<u64>(0).unwrap());
    let (mut eo, mut evo) = (s.alloc::<u64>(0).unwrap(), s.alloc::<u64>(0).unwrap());
    let mut eoff = poisoned::<u64>(&s, 4097);
    partition_pairs_wide_into(&s, &e.view(), &ev.view(), &mut eo.view_mut(), &mut evo.view_mut(), &mut eoff.view_mut(), 52..64, WideOptions::default()).unwrap();
    assert_eq!(eoff.to_vec().unwrap(), vec![0u64; 4097]);
}
