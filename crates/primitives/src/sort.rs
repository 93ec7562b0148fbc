//! Radix sort of keys, or of keys with values (CUB `DeviceRadixSort`), stable, optionally on a
//! bit range.
//!
//! Order: integers by value; floats as CUB orders them:
//! `-NaN < -inf < ... < -0.0 == +0.0 < ... < +inf < +NaN` (the two zeros are one key, so they
//! keep their input order).
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let keys = s.copy_from_host(&[3u32, 1, 2])?;
//! let vals = s.copy_from_host(&[30u32, 10, 20])?;
//! let (k, v) = sort_pairs_new(s, &keys.view(), &vals.view(), SortOrder::Ascending)?;
//! assert_eq!((k.to_vec()?, v.to_vec()?), (vec![1, 2, 3], vec![10, 20, 30]));
//! # Ok(()) }
//! ```

use std::ops::Range;

use gpujoin_cub_sys as sys;
use gpujoin_cub_sys::result::with_temp;
use gpujoin_device::{check_same_len, DeviceBuffer, DeviceView, DeviceViewMut, Error, Pod, Result, Stream};

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortOrder {
    #[default]
    Ascending,
    Descending,
}

type SortKeysFn<K> =
    unsafe extern "C" fn(*mut std::ffi::c_void, *mut usize, *const K, *mut K, i64, i32, i32, i32, sys::gj_stream_t) -> i32;
type SortPairsFn<K, V> = unsafe extern "C" fn(
    *mut std::ffi::c_void,
    *mut usize,
    *const K,
    *mut K,
    *const V,
    *mut V,
    i64,
    i32,
    i32,
    i32,
    sys::gj_stream_t,
) -> i32;

/// A key type CUB can radix-sort: `u32, u64, i32, i64, f32, f64`.
pub trait RadixKey: Pod + PartialOrd + Send + Sync + std::fmt::Debug {
    /// Bits in the key.
    const BITS: u32;
    #[doc(hidden)]
    const SORT_KEYS: SortKeysFn<Self>;
}

/// A `(key, value)` combination CUB can sort: values `u32` and `u64`.
pub trait SortPairsWith<V: Pod>: RadixKey {
    #[doc(hidden)]
    const SORT_PAIRS: SortPairsFn<Self, V>;
}

macro_rules! radix_key {
    ($t:ty, $bits:expr, $keys:ident, $p32:ident, $p64:ident) => {
        impl RadixKey for $t {
            const BITS: u32 = $bits;
            const SORT_KEYS: SortKeysFn<Self> = sys::$keys;
        }
        impl SortPairsWith<u32> for $t {
            const SORT_PAIRS: SortPairsFn<Self, u32> = sys::$p32;
        }
        impl SortPairsWith<u64> for $t {
            const SORT_PAIRS: SortPairsFn<Self, u64> = sys::$p64;
        }
    };
}
radix_key!(u32, 32, gj_cub_sort_keys_u32, gj_cub_sort_pairs_u32_u32, gj_cub_sort_pairs_u32_u64);
radix_key!(u64, 64, gj_cub_sort_keys_u64, gj_cub_sort_pairs_u64_u32, gj_cub_sort_pairs_u64_u64);
radix_key!(i32, 32, gj_cub_sort_keys_i32, gj_cub_sort_pairs_i32_u32, gj_cub_sort_pairs_i32_u64);
radix_key!(i64, 64, gj_cub_sort_keys_i64, gj_cub_sort_pairs_i64_u32, gj_cub_sort_pairs_i64_u64);
radix_key!(f32, 32, gj_cub_sort_keys_f32, gj_cub_sort_pairs_f32_u32, gj_cub_sort_pairs_f32_u64);
radix_key!(f64, 64, gj_cub_sort_keys_f64, gj_cub_sort_pairs_f64_u32, gj_cub_sort_pairs_f64_u64);

fn bit_range<K: RadixKey>(bits: Option<Range<u32>>) -> Result<(i32, i32)> {
    let r = bits.unwrap_or(0..K::BITS);
    if r.start >= r.end || r.end > K::BITS {
        return Err(Error::invalid(format!("bit range {}..{} for a {}-bit key", r.start, r.end, K::BITS)));
    }
    Ok((r.start as i32, r.end as i32))
}

/// Sorts `keys_in` into `keys_out` (stable). `bits` limits the sort to a bit range of the keys'
/// radix image (default: all bits).
pub fn sort_keys<K: RadixKey>(
    stream: &Stream,
    keys_in: &DeviceView<'_, K>,
    keys_out: &mut DeviceViewMut<'_, K>,
    order: SortOrder,
    bits: Option<Range<u32>>,
) -> Result<()> {
    check_same_len("keys_in", keys_in.len(), "keys_out", keys_out.len())?;
    let (b0, b1) = bit_range::<K>(bits)?;
    if keys_in.is_empty() {
        return Ok(());
    }
    let (ki, ko) = (keys_in.as_ptr(), keys_out.as_mut_ptr());
    let desc = (order == SortOrder::Descending) as i32;
    // SAFETY: pointers are live device ranges of n items, borrowed for the call.
    with_temp(stream, "cub::DeviceRadixSort::SortKeys", |t, tb| unsafe {
        K::SORT_KEYS(t, tb, ki, ko, keys_in.len() as i64, b0, b1, desc, stream.raw())
    })
}

/// Sorts `(keys_in, values_in)` by key into the outputs (stable: equal keys keep their order).
pub fn sort_pairs<K: SortPairsWith<V>, V: Pod>(
    stream: &Stream,
    keys_in: &DeviceView<'_, K>,
    values_in: &DeviceView<'_, V>,
    keys_out: &mut DeviceViewMut<'_, K>,
    values_out: &mut DeviceViewMut<'_, V>,
    order: SortOrder,
    bits: Option<Range<u32>>,
) -> Result<()> {
    let n = keys_in.len();
    check_same_len("keys_in", n, "values_in", values_in.len())?;
    check_same_len("keys_in", n, "keys_out", keys_out.len())?;
    check_same_len("keys_in", n, "values_out", values_out.len())?;
    let (b0, b1) = bit_range::<K>(bits)?;
    if n == 0 {
        return Ok(());
    }
    let (ki, ko, vi, vo) = (keys_in.as_ptr(), keys_out.as_mut_ptr(), values_in.as_ptr(), values_out.as_mut_ptr());
    let desc = (order == SortOrder::Descending) as i32;
    // SAFETY: as in sort_keys.
    with_temp(stream, "cub::DeviceRadixSort::SortPairs", |t, tb| unsafe {
        K::SORT_PAIRS(t, tb, ki, ko, vi, vo, n as i64, b0, b1, desc, stream.raw())
    })
}

/// [`sort_pairs`] into new buffers.
pub fn sort_pairs_new<K: SortPairsWith<V>, V: Pod>(
    stream: &Stream,
    keys: &DeviceView<'_, K>,
    values: &DeviceView<'_, V>,
    order: SortOrder,
) -> Result<(DeviceBuffer<K>, DeviceBuffer<V>)> {
    let mut k = stream.alloc::<K>(keys.len())?;
    let mut v = stream.alloc::<V>(values.len())?;
    sort_pairs(stream, keys, values, &mut k.view_mut(), &mut v.view_mut(), order, None)?;
    Ok((k, v))
}

/// [`sort_keys`] into a new buffer.
pub fn sort_keys_new<K: RadixKey>(stream: &Stream, keys: &DeviceView<'_, K>, order: SortOrder) -> Result<DeviceBuffer<K>> {
    let mut k = stream.alloc::<K>(keys.len())?;
    sort_keys(stream, keys, &mut k.view_mut(), order, None)?;
    Ok(k)
}

type SortPairsOwnedFn<K> = unsafe extern "C" fn(
    *mut std::ffi::c_void,
    *mut usize,
    *mut K,
    *mut K,
    *mut u32,
    *mut u32,
    i64,
    i32,
    i32,
    *mut i32,
    sys::gj_stream_t,
) -> i32;

/// Keys [`sort_pairs_owned`] sorts with `u32` values: `u32` and `u64`.
pub trait SortPairsOwned: RadixKey {
    #[doc(hidden)]
    const SORT_PAIRS_DB: SortPairsOwnedFn<Self>;
}
impl SortPairsOwned for u32 {
    const SORT_PAIRS_DB: SortPairsOwnedFn<u32> = sys::gj_cub_sort_pairs_db_u32_u32;
}
impl SortPairsOwned for u64 {
    const SORT_PAIRS_DB: SortPairsOwnedFn<u64> = sys::gj_cub_sort_pairs_db_u64_u32;
}

/// Sorts `(keys, values)` ascending by key (stable), taking the buffers: they and one more pair
/// of the same size are CUB's ping-pong buffers, so the sort needs `n * (K + 4)` bytes beside
/// its inputs instead of the `2 * n * (K + 4)` of [`sort_pairs`] (an output pair plus CUB's
/// temporary copy). Returns the sorted pair; the other is freed.
///
/// ```no_run
/// # use gpujoin_primitives::*; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// let keys = s.copy_from_host(&[3u64, 1, 2])?;
/// let rows = s.copy_from_host(&[0u32, 1, 2])?;
/// let (k, r) = sort_pairs_owned(s, keys, rows, None)?;
/// assert_eq!((k.to_vec()?, r.to_vec()?), (vec![1, 2, 3], vec![1, 2, 0]));
/// # Ok(()) }
/// ```
pub fn sort_pairs_owned<K: SortPairsOwned>(
    stream: &Stream,
    mut keys: DeviceBuffer<K>,
    mut values: DeviceBuffer<u32>,
    bits: Option<Range<u32>>,
) -> Result<(DeviceBuffer<K>, DeviceBuffer<u32>)> {
    let n = keys.len();
    check_same_len("keys", n, "values", values.len())?;
    let (b0, b1) = bit_range::<K>(bits)?;
    if n <= 1 {
        return Ok((keys, values));
    }
    let mut keys_alt = stream.alloc::<K>(n)?;
    let mut values_alt = stream.alloc::<u32>(n)?;
    let mut selector = 0i32;
    {
        let (k, ka) = (keys.view_mut().as_mut_ptr(), keys_alt.view_mut().as_mut_ptr());
        let (v, va) = (values.view_mut().as_mut_ptr(), values_alt.view_mut().as_mut_ptr());
        let sel = &mut selector as *mut i32;
        // SAFETY: four live device ranges of n items, owned here for the call; CUB writes the
        // selector on the host.
        with_temp(stream, "cub::DeviceRadixSort::SortPairs (DoubleBuffer)", |t, tb| unsafe {
            K::SORT_PAIRS_DB(t, tb, k, ka, v, va, n as i64, b0, b1, sel, stream.raw())
        })?;
    }
    Ok(if selector == 0 { (keys, values) } else { (keys_alt, values_alt) })
}
