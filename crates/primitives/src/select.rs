//! Stream compaction (CUB `DeviceSelect::Flagged`, `DeviceSelect::If`) and partition
//! (`DevicePartition::Flagged`).
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let x = s.copy_from_host(&[1u32, 2, 3, 4])?;
//! let flags = s.copy_from_host(&[1u8, 0, 1, 0])?;
//! assert_eq!(select_flagged(s, &x.view(), &flags.view())?.to_vec()?, vec![1, 3]);
//! assert_eq!(select_if(s, &x.view(), Compare::Ge, 3)?.to_vec()?, vec![3, 4]);
//! # Ok(()) }
//! ```

use gpujoin_cub_sys as sys;
use gpujoin_cub_sys::result::{read_scalar, with_temp};
use gpujoin_device::{check_same_len, DeviceBuffer, DeviceView, DeviceViewMut, Error, Pod, Result, Stream};

/// Comparison of a selection predicate: `item OP value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Compare {
    fn raw(self) -> sys::gj_cmp_op {
        match self {
            Compare::Lt => sys::gj_cmp_op::GJ_CMP_LT,
            Compare::Le => sys::gj_cmp_op::GJ_CMP_LE,
            Compare::Gt => sys::gj_cmp_op::GJ_CMP_GT,
            Compare::Ge => sys::gj_cmp_op::GJ_CMP_GE,
            Compare::Eq => sys::gj_cmp_op::GJ_CMP_EQ,
            Compare::Ne => sys::gj_cmp_op::GJ_CMP_NE,
        }
    }
    /// Applies the comparison on the host (for references).
    pub fn eval<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Compare::Lt => a < b,
            Compare::Le => a <= b,
            Compare::Gt => a > b,
            Compare::Ge => a >= b,
            Compare::Eq => a == b,
            Compare::Ne => a != b,
        }
    }
}

type FlaggedFn<T> = unsafe extern "C" fn(*mut std::ffi::c_void, *mut usize, *const T, *const u8, *mut T, *mut i64, i64, sys::gj_stream_t) -> i32;
type IfFn<T> = unsafe extern "C" fn(*mut std::ffi::c_void, *mut usize, *const T, *mut T, *mut i64, i64, sys::gj_cmp_op, T, sys::gj_stream_t) -> i32;

/// An item type for selection: `u32`, `u64`.
pub trait SelectItem: Pod + PartialOrd {
    #[doc(hidden)]
    const FLAGGED: FlaggedFn<Self>;
    #[doc(hidden)]
    const IF: IfFn<Self>;
    #[doc(hidden)]
    const PARTITION: FlaggedFn<Self>;
}
impl SelectItem for u32 {
    const FLAGGED: FlaggedFn<u32> = sys::gj_cub_select_flagged_u32;
    const IF: IfFn<u32> = sys::gj_cub_select_if_u32;
    const PARTITION: FlaggedFn<u32> = sys::gj_cub_partition_flagged_u32;
}
impl SelectItem for u64 {
    const FLAGGED: FlaggedFn<u64> = sys::gj_cub_select_flagged_u64;
    const IF: IfFn<u64> = sys::gj_cub_select_if_u64;
    const PARTITION: FlaggedFn<u64> = sys::gj_cub_partition_flagged_u64;
}

/// The items whose flag is non-zero, in order. Waits for the stream (to learn the count).
pub fn select_flagged<T: SelectItem>(stream: &Stream, input: &DeviceView<'_, T>, flags: &DeviceView<'_, u8>) -> Result<DeviceBuffer<T>> {
    check_same_len("items", input.len(), "flags", flags.len())?;
    let (mut b, k) = flagged(stream, input, flags, T::FLAGGED, "cub::DeviceSelect::Flagged")?;
    b.truncate(k);
    Ok(b)
}

/// Flagged items first (in order), then the others (in reverse order, CUB's contract); returns
/// the buffer and the number of flagged items.
pub fn partition_flagged<T: SelectItem>(stream: &Stream, input: &DeviceView<'_, T>, flags: &DeviceView<'_, u8>) -> Result<(DeviceBuffer<T>, usize)> {
    check_same_len("items", input.len(), "flags", flags.len())?;
    flagged(stream, input, flags, T::PARTITION, "cub::DevicePartition::Flagged")
}

fn flagged<T: SelectItem>(stream: &Stream, input: &DeviceView<'_, T>, flags: &DeviceView<'_, u8>, f: FlaggedFn<T>, name: &str) -> Result<(DeviceBuffer<T>, usize)> {
    let n = input.len();
    let mut out = stream.alloc::<T>(n)?;
    let mut num = stream.alloc_zeroed::<i64>(1)?;
    if n > 0 {
        let (i, fl, o, c) = (input.as_ptr(), flags.as_ptr(), out.view_mut().as_mut_ptr(), num.view_mut().as_mut_ptr());
        // SAFETY: live device ranges of n items.
        with_temp(stream, name, |t, tb| unsafe { f(t, tb, i, fl, o, c, n as i64, stream.raw()) })?;
    }
    let k = read_scalar(stream, &num)? as usize;
    Ok((out, k))
}

/// The items for which `item OP value` holds, in order. Waits for the stream.
pub fn select_if<T: SelectItem>(stream: &Stream, input: &DeviceView<'_, T>, op: Compare, value: T) -> Result<DeviceBuffer<T>> {
    let n = input.len();
    let mut out = stream.alloc::<T>(n)?;
    let mut num = stream.alloc_zeroed::<i64>(1)?;
    if n > 0 {
        let (i, o, c) = (input.as_ptr(), out.view_mut().as_mut_ptr(), num.view_mut().as_mut_ptr());
        // SAFETY: live device ranges of n items.
        with_temp(stream, "cub::DeviceSelect::If", |t, tb| unsafe { T::IF(t, tb, i, o, c, n as i64, op.raw(), value, stream.raw()) })?;
    }
    let k = read_scalar(stream, &num)? as usize;
    out.truncate(k);
    Ok(out)
}

/// The row ids (items of `rows`, or the indices `0..flags.len()` when `rows` is `None`) whose
/// flag is non-zero (`want == true`) or zero (`want == false`), in order, in one pass. Waits
/// for the stream (to learn the count).
///
/// ```no_run
/// # use gpujoin_primitives::*; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// let flags = s.copy_from_host(&[1u8, 0, 0, 1])?;
/// assert_eq!(select_by_flag(s, None, &flags.view(), false)?.to_vec()?, vec![1, 2]);
/// # Ok(()) }
/// ```
pub fn select_by_flag(stream: &Stream, rows: Option<&DeviceView<'_, u32>>, flags: &DeviceView<'_, u8>, want: bool) -> Result<DeviceBuffer<u32>> {
    let mut out = stream.alloc::<u32>(flags.len())?;
    let k = select_by_flag_into(stream, rows, flags, want, &mut out.view_mut())?;
    out.truncate(k);
    Ok(out)
}

/// [`select_by_flag`] into the first rows of `out` (at least `flags.len()` of them, so that every
/// row fits); returns how many it wrote. Waits for the stream (to learn the count).
///
/// ```no_run
/// # use gpujoin_primitives::*; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// let flags = s.copy_from_host(&[1u8, 0, 0, 1])?;
/// let mut out = s.alloc::<u32>(6)?;
/// assert_eq!(select_by_flag_into(s, None, &flags.view(), true, &mut out.slice_mut(2..))?, 2);
/// assert_eq!(out.to_vec()?[2..4], [0, 3]);
/// # Ok(()) }
/// ```
pub fn select_by_flag_into(stream: &Stream, rows: Option<&DeviceView<'_, u32>>, flags: &DeviceView<'_, u8>, want: bool, out: &mut DeviceViewMut<'_, u32>) -> Result<usize> {
    let n = flags.len();
    if let Some(r) = rows {
        check_same_len("rows", r.len(), "flags", n)?;
    }
    if out.len() < n {
        return Err(Error::invalid(format!("select_by_flag_into: {} output rows for {n} flags", out.len())));
    }
    let mut num = stream.alloc_zeroed::<i64>(1)?;
    if n > 0 {
        let (i, fl, o, c) = (rows.map_or(std::ptr::null(), |r| r.as_ptr()), flags.as_ptr(), out.as_mut_ptr(), num.view_mut().as_mut_ptr());
        // SAFETY: live device ranges of n items (rows may be null: indices); out holds n or more.
        with_temp(stream, "cub::DeviceSelect::Flagged", |t, tb| unsafe { sys::gj_cub_select_by_flag_u32(t, tb, i, fl, want as i32, o, c, n as i64, stream.raw()) })?;
    }
    Ok(read_scalar(stream, &num)? as usize)
}
