//! Prefix sums (CUB `DeviceScan`), exclusive and inclusive, in place or not.
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let x = s.copy_from_host(&[3u32, 1, 2])?;
//! let mut y = s.alloc::<u64>(3)?;
//! exclusive_sum(s, &x.view(), &mut y.view_mut())?; // u32 counts, 64-bit offsets
//! assert_eq!(y.to_vec()?, vec![0, 3, 4]);
//! # Ok(()) }
//! ```

use gpujoin_cub_sys as sys;
use gpujoin_cub_sys::result::with_temp;
use gpujoin_device::{check_same_len, DeviceView, DeviceViewMut, Pod, Result, Stream};

type ScanFn<I, O> = unsafe extern "C" fn(*mut std::ffi::c_void, *mut usize, *const I, *mut O, i64, sys::gj_stream_t) -> i32;

/// An (input, output) pair of scan types: `u32 -> u32`, `u64 -> u64`, `u32 -> u64`.
pub trait ScanInto<O: Pod>: Pod {
    #[doc(hidden)]
    const EXCLUSIVE: ScanFn<Self, O>;
    #[doc(hidden)]
    const INCLUSIVE: ScanFn<Self, O>;
}
impl ScanInto<u32> for u32 {
    const EXCLUSIVE: ScanFn<u32, u32> = sys::gj_cub_exclusive_sum_u32;
    const INCLUSIVE: ScanFn<u32, u32> = sys::gj_cub_inclusive_sum_u32;
}
impl ScanInto<u64> for u64 {
    const EXCLUSIVE: ScanFn<u64, u64> = sys::gj_cub_exclusive_sum_u64;
    const INCLUSIVE: ScanFn<u64, u64> = sys::gj_cub_inclusive_sum_u64;
}
impl ScanInto<u64> for u32 {
    const EXCLUSIVE: ScanFn<u32, u64> = sys::gj_cub_exclusive_sum_u32_u64;
    const INCLUSIVE: ScanFn<u32, u64> = sys::gj_cub_inclusive_sum_u32_u64;
}

fn scan<I: ScanInto<O>, O: Pod>(
    stream: &Stream,
    input: &DeviceView<'_, I>,
    output: &mut DeviceViewMut<'_, O>,
    f: ScanFn<I, O>,
    name: &str,
) -> Result<()> {
    check_same_len("scan input", input.len(), "scan output", output.len())?;
    if input.is_empty() {
        return Ok(());
    }
    let (i, o, n) = (input.as_ptr(), output.as_mut_ptr(), input.len() as i64);
    // SAFETY: live device ranges of n items.
    with_temp(stream, name, |t, tb| unsafe { f(t, tb, i, o, n, stream.raw()) })
}

/// `output[i] = input[0] + ... + input[i-1]` (`output[0] = 0`). Sums wrap in the output type.
pub fn exclusive_sum<I: ScanInto<O>, O: Pod>(stream: &Stream, input: &DeviceView<'_, I>, output: &mut DeviceViewMut<'_, O>) -> Result<()> {
    scan(stream, input, output, I::EXCLUSIVE, "cub::DeviceScan::ExclusiveSum")
}

/// `output[i] = input[0] + ... + input[i]`. Sums wrap in the output type.
pub fn inclusive_sum<I: ScanInto<O>, O: Pod>(stream: &Stream, input: &DeviceView<'_, I>, output: &mut DeviceViewMut<'_, O>) -> Result<()> {
    scan(stream, input, output, I::INCLUSIVE, "cub::DeviceScan::InclusiveSum")
}

/// In-place exclusive sum.
pub fn exclusive_sum_in_place<T: ScanInto<T>>(stream: &Stream, data: &mut DeviceViewMut<'_, T>) -> Result<()> {
    let input: DeviceView<'_, T> = data.as_view();
    // SAFETY (aliasing): CUB's scans allow in == out.
    let input = unsafe { DeviceView::<T>::from_raw(input.raw(), input.len()) };
    scan(stream, &input, data, T::EXCLUSIVE, "cub::DeviceScan::ExclusiveSum")
}
