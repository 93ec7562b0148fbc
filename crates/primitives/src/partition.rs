//! Radix histogram (CUB `DeviceHistogram::HistogramEven` over radix digits) and stable radix
//! partitioning: histogram, exclusive sum for the partition offsets, and a stable scatter by
//! digit (CUB's one-digit radix sort pass, which is exactly a stable counting scatter).
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

use gpujoin_cub_sys as sys;
use gpujoin_device::{check_same_len, DeviceBuffer, DeviceView, DeviceViewMut, Error, Pod, Result, Stream};

use crate::cuda::{check_count, with_temp};
use crate::sort::{sort_pairs, SortOrder, SortPairsWith};

type HistFn<K> = unsafe extern "C" fn(*mut std::ffi::c_void, *mut usize, *const K, *mut u32, i64, i32, i32, sys::gj_stream_t) -> i32;

/// A key type for radix partitioning: `u32`, `u64` (partition on the raw bits).
pub trait PartitionKey: SortPairsWith<u32> + SortPairsWith<u64> {
    #[doc(hidden)]
    const HIST: HistFn<Self>;
}
impl PartitionKey for u32 {
    const HIST: HistFn<u32> = sys::gj_cub_radix_histogram_u32;
}
impl PartitionKey for u64 {
    const HIST: HistFn<u64> = sys::gj_cub_radix_histogram_u64;
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
