//! Radix histogram (CUB `DeviceHistogram::HistogramEven` over radix digits) and stable radix
//! partitioning: histogram, exclusive sum for the partition offsets, and a stable scatter by
//! digit (CUB's one-digit radix sort pass, which is exactly a stable counting scatter).
//!
//! [`partition_pairs`] is gpujoin's own stable LSD radix partition of `(key, value)` pairs by a
//! bit range (cuda/kernels/partition.cu, a onesweep radix sort): the same output as
//! [`sort_pairs`] ascending on that bit range, with one histogram kernel for all 8-bit digit
//! passes and one kernel per pass.
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! // Partition by the low 1 bit: even keys first, then odd, each in input order.
//! let k = s.copy_from_host(&[5u32, 2, 7, 4])?;
//! let v = s.copy_from_host(&[0u32, 1, 2, 3])?;
//! let p = radix_partition(s, &k.view(), &v.view(), 0, 1)?;
//! assert_eq!(p.keys.to_vec()?, vec![2, 4, 5, 7]);
//! assert_eq!(p.values.to_vec()?, vec![1, 3, 0, 2]);
//! assert_eq!(p.offsets, vec![0, 2, 4]);
//! # Ok(()) }
//! ```

use std::ffi::c_void;
use std::ops::Range;

use gpujoin_cub_sys as sys;
use gpujoin_cub_sys::result::{check_count, with_temp};
use gpujoin_device::{check_same_len, DeviceBuffer, DeviceView, DeviceViewMut, Error, Pod, Result, Stream};

use crate::ffi;
use crate::sort::{sort_pairs, SortOrder, SortPairsWith};

type HistFn<K> = unsafe extern "C" fn(*mut c_void, *mut usize, *const K, *mut u32, i64, i32, i32, sys::gj_stream_t) -> i32;
type PartitionPairsFn<K, V> =
    unsafe extern "C" fn(*mut c_void, *mut usize, *const K, *const V, *mut K, *mut V, i64, i32, i32, i64, ffi::gj_k_stream_t) -> i32;

/// The C ABI of the one-pass wide partition (cuda/kernels/partition_wide.cu).
type PartitionWideFn<K, V> = unsafe extern "C" fn(
    *mut c_void,
    *mut usize,
    *const K,
    *const V,
    *mut K,
    *mut V,
    *mut u64,
    i64,
    i32,
    i32,
    i32,
    i32,
    ffi::gj_k_stream_t,
) -> i32;

/// A key type for radix partitioning: `u32`, `u64` (partition on the raw bits).
pub trait PartitionKey: SortPairsWith<u32> + SortPairsWith<u64> {
    #[doc(hidden)]
    const HIST: HistFn<Self>;
    #[doc(hidden)]
    const PARTITION_PAIRS_V32: PartitionPairsFn<Self, u32>;
    #[doc(hidden)]
    const PARTITION_PAIRS_V64: PartitionPairsFn<Self, u64>;
    #[doc(hidden)]
    const PARTITION_WIDE_V32: PartitionWideFn<Self, u32>;
    #[doc(hidden)]
    const PARTITION_WIDE_V64: PartitionWideFn<Self, u64>;
}
impl PartitionKey for u32 {
    const HIST: HistFn<u32> = sys::gj_cub_radix_histogram_u32;
    const PARTITION_PAIRS_V32: PartitionPairsFn<u32, u32> = ffi::gj_k_part_partition_pairs_k32_v32;
    const PARTITION_PAIRS_V64: PartitionPairsFn<u32, u64> = ffi::gj_k_part_partition_pairs_k32_v64;
    const PARTITION_WIDE_V32: PartitionWideFn<u32, u32> = ffi::gj_k_partw_partition_pairs_k32_v32;
    const PARTITION_WIDE_V64: PartitionWideFn<u32, u64> = ffi::gj_k_partw_partition_pairs_k32_v64;
}
impl PartitionKey for u64 {
    const HIST: HistFn<u64> = sys::gj_cub_radix_histogram_u64;
    const PARTITION_PAIRS_V32: PartitionPairsFn<u64, u32> = ffi::gj_k_part_partition_pairs_k64_v32;
    const PARTITION_PAIRS_V64: PartitionPairsFn<u64, u64> = ffi::gj_k_part_partition_pairs_k64_v64;
    const PARTITION_WIDE_V32: PartitionWideFn<u64, u32> = ffi::gj_k_partw_partition_pairs_k64_v32;
    const PARTITION_WIDE_V64: PartitionWideFn<u64, u64> = ffi::gj_k_partw_partition_pairs_k64_v64;
}

/// The most digit bits one partition pass takes.
pub const MAX_PARTITION_BITS: u32 = 16;

fn check_digit<K: PartitionKey>(shift: u32, bits: u32) -> Result<()> {
    if bits == 0 || bits > MAX_PARTITION_BITS || shift + bits > K::BITS {
        return Err(Error::invalid(format!(
            "radix digit of {bits} bits at shift {shift} for a {}-bit key (1 to {MAX_PARTITION_BITS} bits)",
            K::BITS
        )));
    }
    Ok(())
}

/// Counts keys per digit `(key >> shift) & (2^bits - 1)` into `hist` (2^bits counters).
pub fn radix_histogram<K: PartitionKey>(stream: &Stream, keys: &DeviceView<'_, K>, shift: u32, bits: u32, hist: &mut DeviceViewMut<'_, u32>) -> Result<()> {
    check_digit::<K>(shift, bits)?;
    check_same_len("histogram bins", 1 << bits, "histogram output", hist.len())?;
    check_count("radix histogram keys (32-bit counters)", keys.len(), u32::MAX as u64)?;
    stream.memset_bytes(hist, 0)?;
    if keys.is_empty() {
        return Ok(());
    }
    let (k, h, n) = (keys.as_ptr(), hist.as_mut_ptr(), keys.len() as i64);
    // SAFETY: live device ranges.
    with_temp(stream, "cub::DeviceHistogram::HistogramEven", |t, tb| unsafe {
        K::HIST(t, tb, k, h, n, shift as i32, bits as i32, stream.raw())
    })
}

/// A relation partitioned by a radix digit.
pub struct Partitioned<K: Pod, V: Pod> {
    pub keys: DeviceBuffer<K>,
    pub values: DeviceBuffer<V>,
    /// `offsets[p]..offsets[p + 1]` is partition `p`; `2^bits + 1` entries.
    pub offsets: Vec<u64>,
}

/// Stable radix partition of `(keys, values)` by digit `(key >> shift) & (2^bits - 1)`: within a
/// partition, rows keep their input order; no atomics decide positions, so the result is
/// deterministic. Waits for the stream (to return the offsets on the host).
pub fn radix_partition<K: PartitionKey + SortPairsWith<V>, V: Pod>(
    stream: &Stream,
    keys: &DeviceView<'_, K>,
    values: &DeviceView<'_, V>,
    shift: u32,
    bits: u32,
) -> Result<Partitioned<K, V>> {
    check_same_len("keys", keys.len(), "values", values.len())?;
    let mut hist = stream.alloc::<u32>(1 << bits)?;
    radix_histogram(stream, keys, shift, bits, &mut hist.view_mut())?;
    let mut out_k = stream.alloc::<K>(keys.len())?;
    let mut out_v = stream.alloc::<V>(keys.len())?;
    sort_pairs(stream, keys, values, &mut out_k.view_mut(), &mut out_v.view_mut(), SortOrder::Ascending, Some(shift..shift + bits))?;
    let counts = hist.to_vec()?;
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut acc = 0u64;
    offsets.push(0);
    for c in counts {
        acc += c as u64;
        offsets.push(acc);
    }
    Ok(Partitioned { keys: out_k, values: out_v, offsets })
}

/// The most rows [`partition_pairs`] takes (`2^32`).
pub const PARTITION_PAIRS_MAX_ITEMS: u64 = 1 << 32;

/// Bits one [`partition_pairs`] pass sorts by (the last pass of a range may take fewer).
pub const PARTITION_PASS_BITS: u32 = 8;

/// The 8-bit digit passes [`partition_pairs`] runs for `bits` of a `key_bits`-bit key: one per
/// started 8 bits of the range. A range that is empty or reaches past the key is an error.
///
/// ```
/// use gpujoin_primitives::partition_passes;
/// assert_eq!(partition_passes(0..16, 32).unwrap(), 2);
/// assert_eq!(partition_passes(3..14, 32).unwrap(), 2);
/// assert_eq!(partition_passes(0..1, 32).unwrap(), 1);
/// assert!(partition_passes(0..33, 32).is_err());
/// ```
pub fn partition_passes(bits: Range<u32>, key_bits: u32) -> Result<u32> {
    if bits.start >= bits.end || bits.end > key_bits {
        return Err(Error::invalid(format!("partition bit range {}..{} for a {key_bits}-bit key", bits.start, bits.end)));
    }
    Ok((bits.end - bits.start).div_ceil(PARTITION_PASS_BITS))
}

/// Items per tile (thread block) of [`partition_pairs`] for keys `K` (a tuning constant of the
/// kernel; tests use it to hit tile boundaries).
pub fn partition_pairs_tile_items<K: PartitionKey>() -> usize {
    // SAFETY: a host function returning a constant.
    unsafe { ffi::gj_k_part_tile_items(std::mem::size_of::<K>() as i32) as usize }
}

/// Stable radix partition of `(keys_in, values_in)` by the key bits `bits`: the outputs are
/// ordered ascending by the digit `(key >> bits.start) & (2^bits.len() - 1)` only, rows with
/// equal digits in input order (the other key bits do not influence the order). The output is
/// identical to [`sort_pairs`]`(.., SortOrder::Ascending, Some(bits))`.
///
/// Values are any 4- or 8-byte [`Pod`] type, moved as raw bits. Runs one histogram kernel and
/// one onesweep kernel per started 8 bits of the range ([`partition_passes`]); passes after the
/// first read a temporary key/value pair from the stream's pool (only when the range spans more
/// than 8 bits), and the inputs are never written. At most [`PARTITION_PAIRS_MAX_ITEMS`] rows.
/// Deterministic; does not wait for the stream.
///
/// ```no_run
/// # use gpujoin_primitives::*; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// // By bits 4..8: digits 3, 1, 3, 0.
/// let k = s.copy_from_host(&[0x35u32, 0x17, 0x32, 0x09])?;
/// let v = s.copy_from_host(&[0u32, 1, 2, 3])?;
/// let (mut ko, mut vo) = (s.alloc::<u32>(4)?, s.alloc::<u32>(4)?);
/// partition_pairs(s, &k.view(), &v.view(), &mut ko.view_mut(), &mut vo.view_mut(), 4..8)?;
/// assert_eq!(ko.to_vec()?, vec![0x09, 0x17, 0x35, 0x32]);
/// assert_eq!(vo.to_vec()?, vec![3, 1, 0, 2]);
/// # Ok(()) }
/// ```
pub fn partition_pairs<K: PartitionKey, V: Pod>(
    stream: &Stream,
    keys_in: &DeviceView<'_, K>,
    values_in: &DeviceView<'_, V>,
    keys_out: &mut DeviceViewMut<'_, K>,
    values_out: &mut DeviceViewMut<'_, V>,
    bits: Range<u32>,
) -> Result<()> {
    partition_pairs_in_portions(stream, keys_in, values_in, keys_out, values_out, bits, 0)
}

/// The length check every pair partition shares: inputs and outputs of one length.
pub(crate) fn check_pair_lengths<K: Pod, V: Pod>(
    keys_in: &DeviceView<'_, K>,
    values_in: &DeviceView<'_, V>,
    keys_out: &DeviceViewMut<'_, K>,
    values_out: &DeviceViewMut<'_, V>,
) -> Result<()> {
    let n = keys_in.len();
    check_same_len("keys_in", n, "values_in", values_in.len())?;
    check_same_len("keys_in", n, "keys_out", keys_out.len())?;
    check_same_len("keys_in", n, "values_out", values_out.len())
}

/// The value check every pair partition shares: 4- or 8-byte values (`what` names the function
/// in the error).
pub(crate) fn check_value_bytes<V: Pod>(what: &str) -> Result<()> {
    let value_bytes = std::mem::size_of::<V>();
    if value_bytes != 4 && value_bytes != 8 {
        return Err(Error::invalid(format!("{what} values of {value_bytes} bytes (4 or 8)")));
    }
    Ok(())
}

/// [`partition_pairs`] with at most `portion_tiles` tiles per kernel launch (0: the default,
/// `2^30` items). For tests: small portions exercise the hand-over between launches that inputs
/// of more than `2^30` rows need.
#[doc(hidden)]
pub fn partition_pairs_in_portions<K: PartitionKey, V: Pod>(
    stream: &Stream,
    keys_in: &DeviceView<'_, K>,
    values_in: &DeviceView<'_, V>,
    keys_out: &mut DeviceViewMut<'_, K>,
    values_out: &mut DeviceViewMut<'_, V>,
    bits: Range<u32>,
    portion_tiles: u32,
) -> Result<()> {
    let n = keys_in.len();
    check_pair_lengths(keys_in, values_in, keys_out, values_out)?;
    partition_passes(bits.clone(), K::BITS)?;
    check_value_bytes::<V>("partition_pairs")?;
    check_count("partition_pairs rows", n, PARTITION_PAIRS_MAX_ITEMS)?;
    if n == 0 {
        return Ok(());
    }
    let (ki, ko) = (keys_in.as_ptr(), keys_out.as_mut_ptr());
    let (vi, vo) = (values_in.as_ptr() as *const c_void, values_out.as_mut_ptr() as *mut c_void);
    let (b0, b1, pt, s) = (bits.start as i32, bits.end as i32, portion_tiles as i64, stream.raw());
    // SAFETY: live device ranges of n items each (inputs borrowed shared, outputs exclusively, so
    // they do not overlap); values are moved as raw 4- or 8-byte words.
    with_temp(stream, "partition_pairs", |t, tb| unsafe {
        if std::mem::size_of::<V>() == 4 {
            K::PARTITION_PAIRS_V32(t, tb, ki, vi as *const u32, ko, vo as *mut u32, n as i64, b0, b1, pt, s)
        } else {
            K::PARTITION_PAIRS_V64(t, tb, ki, vi as *const u64, ko, vo as *mut u64, n as i64, b0, b1, pt, s)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_per_range() {
        assert_eq!(partition_passes(0..8, 32).unwrap(), 1);
        assert_eq!(partition_passes(0..9, 32).unwrap(), 2);
        assert_eq!(partition_passes(8..24, 32).unwrap(), 2);
        assert_eq!(partition_passes(0..32, 32).unwrap(), 4);
        assert_eq!(partition_passes(32..64, 64).unwrap(), 4);
        assert_eq!(partition_passes(0..64, 64).unwrap(), 8);
        assert_eq!(partition_passes(63..64, 64).unwrap(), 1);
        assert!(partition_passes(5..5, 32).is_err());
        assert!(partition_passes(0..65, 64).is_err());
        assert!(partition_passes(31..33, 32).is_err());
    }

    #[test]
    fn tile_items_are_the_kernel_tuning() {
        assert_eq!(partition_pairs_tile_items::<u32>(), 4096);
        assert_eq!(partition_pairs_tile_items::<u64>(), 3072);
    }
}
