//! Sum reduction (CUB `DeviceReduce::Sum`).
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let x = s.copy_from_host(&[u32::MAX, 1])?;
//! assert_eq!(reduce_sum(s, &x.view())?, 1u64 << 32); // u32 items sum in 64 bits
//! # Ok(()) }
//! ```

use gpujoin_cub_sys as sys;
use gpujoin_cub_sys::result::{read_scalar, with_temp};
use gpujoin_device::{DeviceView, Pod, Result, Stream};

type SumFn<I, O> = unsafe extern "C" fn(*mut std::ffi::c_void, *mut usize, *const I, *mut O, i64, sys::gj_stream_t) -> i32;

/// An item type that sums: `u32` (into u64), `u64`, `i64`, `f64`.
pub trait SumItem: Pod {
    type Sum: Pod + Default;
    #[doc(hidden)]
    const SUM: SumFn<Self, Self::Sum>;
}
impl SumItem for u32 {
    type Sum = u64;
    const SUM: SumFn<u32, u64> = sys::gj_cub_reduce_sum_u32_u64;
}
impl SumItem for u64 {
    type Sum = u64;
    const SUM: SumFn<u64, u64> = sys::gj_cub_reduce_sum_u64;
}
impl SumItem for i64 {
    type Sum = i64;
    const SUM: SumFn<i64, i64> = sys::gj_cub_reduce_sum_i64;
}
impl SumItem for f64 {
    type Sum = f64;
    const SUM: SumFn<f64, f64> = sys::gj_cub_reduce_sum_f64;
}

/// The sum of the items (0 for none); integer sums wrap. Waits for the stream.
pub fn reduce_sum<T: SumItem>(stream: &Stream, input: &DeviceView<'_, T>) -> Result<T::Sum> {
    if input.is_empty() {
        return Ok(T::Sum::default());
    }
    let mut out = stream.alloc_zeroed::<T::Sum>(1)?;
    let (i, o, n) = (input.as_ptr(), out.view_mut().as_mut_ptr(), input.len() as i64);
    // SAFETY: live device range of n items and one output.
    with_temp(stream, "cub::DeviceReduce::Sum", |t, tb| unsafe { T::SUM(t, tb, i, o, n, stream.raw()) })?;
    read_scalar(stream, &out)
}
