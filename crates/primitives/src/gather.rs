//! Gather, scatter, iota and fill for 4- and 8-byte element types.
//!
//! Indices are `u32` row ids; `u32::MAX` means "no row" and gathers the `fill` value (this is
//! how outer-join nulls are materialized).
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let src = s.copy_from_host(&[10u64, 20, 30])?;
//! let idx = s.copy_from_host(&[2u32, u32::MAX, 0])?;
//! assert_eq!(gather(s, &src.view(), &idx.view(), 0)?.to_vec()?, vec![30, 0, 10]);
//! # Ok(()) }
//! ```

use gpujoin_cub_sys::result::{launch, read_scalar};
use gpujoin_device::{check_same_len, DeviceBuffer, DeviceView, DeviceViewMut, Error, Pod, Result, Stream};

use crate::ffi;

/// "No row" in an index map.
pub const NO_ROW: u32 = u32::MAX;

fn width<T>() -> Result<usize> {
    match std::mem::size_of::<T>() {
        w @ (4 | 8) => Ok(w),
        w => Err(Error::invalid(format!("element type of {w} bytes: gather/scatter take 4- or 8-byte types"))),
    }
}

fn bits32<T: Pod>(v: T) -> u32 {
    bytemuck::cast_slice::<T, u32>(std::slice::from_ref(&v))[0]
}
fn bits64<T: Pod>(v: T) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(bytemuck::bytes_of(&v));
    u64::from_ne_bytes(b)
}

/// `out[i] = src[idx[i]]`, or `fill` where `idx[i]` is [`NO_ROW`], without bounds reporting.
///
/// Indices past `src` also produce `fill` (the kernel checks every index), but are not reported;
/// use [`gather_into`] to get an error for them.
pub fn gather_into_unchecked<T: Pod>(stream: &Stream, src: &DeviceView<'_, T>, idx: &DeviceView<'_, u32>, out: &mut DeviceViewMut<'_, T>, fill: T) -> Result<()> {
    gather_impl(stream, src, idx, out, fill, None)
}

fn gather_impl<T: Pod>(stream: &Stream, src: &DeviceView<'_, T>, idx: &DeviceView<'_, u32>, out: &mut DeviceViewMut<'_, T>, fill: T, oob: Option<*mut u32>) -> Result<()> {
    check_same_len("indices", idx.len(), "output", out.len())?;
    let w = width::<T>()?;
    let (n, sl, ip, oob) = (idx.len() as i64, src.len() as i64, idx.as_ptr(), oob.unwrap_or(std::ptr::null_mut()));
    let s = stream.raw();
    // SAFETY: live device ranges; the kernel bounds-checks every index against src_len.
    launch(stream, "gather", || unsafe {
        if w == 4 {
            ffi::gj_k_gather_b32(src.as_ptr() as *const u32, sl, ip, out.as_mut_ptr() as *mut u32, n, bits32(fill), oob, s)
        } else {
            ffi::gj_k_gather_b64(src.as_ptr() as *const u64, sl, ip, out.as_mut_ptr() as *mut u64, n, bits64(fill), oob, s)
        }
    })
}

/// `out[i] = src[idx[i]]`, or `fill` where `idx[i]` is [`NO_ROW`]; an index past `src` is an
/// [`Error::InvalidArgument`]. Waits for the stream (to read the bounds flag).
pub fn gather_into<T: Pod>(stream: &Stream, src: &DeviceView<'_, T>, idx: &DeviceView<'_, u32>, out: &mut DeviceViewMut<'_, T>, fill: T) -> Result<()> {
    let mut flag = stream.alloc_zeroed::<u32>(1)?;
    let p = flag.view_mut().as_mut_ptr();
    gather_impl(stream, src, idx, out, fill, Some(p))?;
    if read_scalar(stream, &flag)? != 0 {
        return Err(Error::invalid(format!("gather index out of range for a source of {} rows", src.len())));
    }
    Ok(())
}

/// [`gather_into`] into a new buffer.
pub fn gather<T: Pod>(stream: &Stream, src: &DeviceView<'_, T>, idx: &DeviceView<'_, u32>, fill: T) -> Result<DeviceBuffer<T>> {
    let mut out = stream.alloc::<T>(idx.len())?;
    gather_into(stream, src, idx, &mut out.view_mut(), fill)?;
    Ok(out)
}

/// `out[idx[i]] = src[i]`. An index past `out` (or [`NO_ROW`]) is skipped and reported as
/// [`Error::InvalidArgument`] (waits for the stream). Duplicate indices leave one of the values.
pub fn scatter<T: Pod>(stream: &Stream, src: &DeviceView<'_, T>, idx: &DeviceView<'_, u32>, out: &mut DeviceViewMut<'_, T>) -> Result<()> {
    check_same_len("source", src.len(), "indices", idx.len())?;
    let w = width::<T>()?;
    let mut flag = stream.alloc_zeroed::<u32>(1)?;
    let fp = flag.view_mut().as_mut_ptr();
    let (n, ol, ip, s) = (src.len() as i64, out.len() as i64, idx.as_ptr(), stream.raw());
    // SAFETY: live device ranges; the kernel bounds-checks every index against out_len.
    launch(stream, "scatter", || unsafe {
        if w == 4 {
            ffi::gj_k_scatter_b32(src.as_ptr() as *const u32, ip, out.as_mut_ptr() as *mut u32, ol, n, fp, s)
        } else {
            ffi::gj_k_scatter_b64(src.as_ptr() as *const u64, ip, out.as_mut_ptr() as *mut u64, ol, n, fp, s)
        }
    })?;
    if read_scalar(stream, &flag)? != 0 {
        return Err(Error::invalid(format!("scatter index out of range for an output of {} rows", out.len())));
    }
    Ok(())
}

/// `out[i] = start + i` (wrapping).
pub fn iota_u32(stream: &Stream, out: &mut DeviceViewMut<'_, u32>, start: u32) -> Result<()> {
    let (p, n) = (out.as_mut_ptr(), out.len() as i64);
    // SAFETY: live device range.
    launch(stream, "iota", || unsafe { ffi::gj_k_iota_u32(p, n, start, stream.raw()) })
}

/// `out[i] = start + i` (wrapping).
pub fn iota_u64(stream: &Stream, out: &mut DeviceViewMut<'_, u64>, start: u64) -> Result<()> {
    let (p, n) = (out.as_mut_ptr(), out.len() as i64);
    // SAFETY: live device range.
    launch(stream, "iota", || unsafe { ffi::gj_k_iota_u64(p, n, start, stream.raw()) })
}

/// Sets every element of `out` to `value` (4- or 8-byte types).
pub fn fill<T: Pod>(stream: &Stream, out: &mut DeviceViewMut<'_, T>, value: T) -> Result<()> {
    let w = width::<T>()?;
    let (p, n, s) = (out.as_mut_ptr(), out.len() as i64, stream.raw());
    // SAFETY: live device range.
    launch(stream, "fill", || unsafe {
        if w == 4 {
            ffi::gj_k_fill_b32(p as *mut u32, n, bits32(value), s)
        } else {
            ffi::gj_k_fill_b64(p as *mut u64, n, bits64(value), s)
        }
    })
}
