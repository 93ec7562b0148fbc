//! Run-length encoding (CUB `DeviceRunLengthEncode::Encode`).
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let x = s.copy_from_host(&[7u32, 7, 9, 7])?;
//! let runs = run_length_encode(s, &x.view())?;
//! assert_eq!(runs.unique.to_vec()?, vec![7, 9, 7]);
//! assert_eq!(runs.counts.to_vec()?, vec![2, 1, 1]);
//! # Ok(()) }
//! ```

use gpujoin_cub_sys as sys;
use gpujoin_cub_sys::result::{check_count, read_scalar, with_temp};
use gpujoin_device::{DeviceBuffer, DeviceView, DeviceViewMut, Error, Result, Stream};

/// The most items one encode takes (run starts are 32-bit positions).
pub const RLE_MAX_ITEMS: u64 = u32::MAX as u64 - 1;
/// The most items CUB's `DeviceRunLengthEncode::Encode` takes (it counts them in an `int`).
pub const CUB_RLE_MAX_ITEMS: u64 = i32::MAX as u64;

type RleFn<K> = unsafe extern "C" fn(*mut std::ffi::c_void, *mut usize, *const K, *mut K, *mut u32, *mut i64, i64, sys::gj_stream_t) -> i32;

/// A key type for run-length encoding: `u32`, `u64` (runs are of equal bits).
pub trait RleKey: gpujoin_device::Pod {
    /// gpujoin's single-pass kernel.
    #[doc(hidden)]
    const ENCODE: RleFn<Self>;
    /// CUB's `DeviceRunLengthEncode::Encode`.
    #[doc(hidden)]
    const CUB_ENCODE: RleFn<Self>;
}
impl RleKey for u32 {
    const ENCODE: RleFn<u32> = crate::ffi::gj_k_run_length_encode_u32;
    const CUB_ENCODE: RleFn<u32> = sys::gj_cub_run_length_encode_u32;
}
impl RleKey for u64 {
    const ENCODE: RleFn<u64> = crate::ffi::gj_k_run_length_encode_u64;
    const CUB_ENCODE: RleFn<u64> = sys::gj_cub_run_length_encode_u64;
}

/// The runs of an input: `unique[r]` repeated `counts[r]` times, for `r < runs`.
pub struct Runs<K: RleKey> {
    pub unique: DeviceBuffer<K>,
    pub counts: DeviceBuffer<u32>,
}

impl<K: RleKey> Runs<K> {
    /// Number of runs.
    pub fn len(&self) -> usize {
        self.unique.len()
    }
    /// True when the input was empty.
    pub fn is_empty(&self) -> bool {
        self.unique.is_empty()
    }
}

/// Encodes runs of equal consecutive items into caller-provided outputs (each at least as long
/// as the input) and writes the run count into the one-element `num_runs` on the device, without
/// waiting for the stream. Up to [`CUB_RLE_MAX_ITEMS`] items go through CUB's
/// `DeviceRunLengthEncode::Encode` (the faster one on H100: 66% of copy bandwidth at 2^27
/// items, runs of 4); larger inputs, up to [`RLE_MAX_ITEMS`], through gpujoin's single-pass
/// kernel, so nothing between CUB's 32-bit `int` count and 2^32 is refused. Longer inputs are
/// refused with [`gpujoin_device::Error::TooLarge`], never truncated.
pub fn run_length_encode_into<K: RleKey>(
    stream: &Stream,
    input: &DeviceView<'_, K>,
    unique: &mut DeviceViewMut<'_, K>,
    counts: &mut DeviceViewMut<'_, u32>,
    num_runs: &mut DeviceViewMut<'_, i64>,
) -> Result<()> {
    if input.len() as u64 <= CUB_RLE_MAX_ITEMS {
        run_length_encode_cub_into(stream, input, unique, counts, num_runs)
    } else {
        run_length_encode_single_pass_into(stream, input, unique, counts, num_runs)
    }
}

/// [`run_length_encode_into`] through gpujoin's single-pass kernel (head flags, then a scan with
/// decoupled look-back over (runs, start of the last run); one read of the input) for any size up
/// to [`RLE_MAX_ITEMS`].
pub fn run_length_encode_single_pass_into<K: RleKey>(
    stream: &Stream,
    input: &DeviceView<'_, K>,
    unique: &mut DeviceViewMut<'_, K>,
    counts: &mut DeviceViewMut<'_, u32>,
    num_runs: &mut DeviceViewMut<'_, i64>,
) -> Result<()> {
    encode(stream, input, unique, counts, num_runs, K::ENCODE, RLE_MAX_ITEMS, "run_length_encode (single pass)")
}

/// [`run_length_encode_into`] through CUB's `DeviceRunLengthEncode::Encode` (at most
/// [`CUB_RLE_MAX_ITEMS`] items), for comparison.
pub fn run_length_encode_cub_into<K: RleKey>(
    stream: &Stream,
    input: &DeviceView<'_, K>,
    unique: &mut DeviceViewMut<'_, K>,
    counts: &mut DeviceViewMut<'_, u32>,
    num_runs: &mut DeviceViewMut<'_, i64>,
) -> Result<()> {
    encode(stream, input, unique, counts, num_runs, K::CUB_ENCODE, CUB_RLE_MAX_ITEMS, "cub::DeviceRunLengthEncode::Encode")
}

#[allow(clippy::too_many_arguments)]
fn encode<K: RleKey>(
    stream: &Stream,
    input: &DeviceView<'_, K>,
    unique: &mut DeviceViewMut<'_, K>,
    counts: &mut DeviceViewMut<'_, u32>,
    num_runs: &mut DeviceViewMut<'_, i64>,
    f: RleFn<K>,
    limit: u64,
    name: &str,
) -> Result<()> {
    let n = input.len();
    check_count(&format!("{name} items"), n, limit)?;
    if unique.len() < n || counts.len() < n || num_runs.len() != 1 {
        return Err(Error::invalid(format!(
            "run-length encode of {n} items needs outputs of {n} (got {} and {}) and one run count (got {})",
            unique.len(),
            counts.len(),
            num_runs.len()
        )));
    }
    if n == 0 {
        return stream.memset_bytes(num_runs, 0);
    }
    let (i, u, c, r) = (input.as_ptr(), unique.as_mut_ptr(), counts.as_mut_ptr(), num_runs.as_mut_ptr());
    // SAFETY: live device ranges of at least n items; one i64 for the run count.
    with_temp(stream, name, |t, tb| unsafe { f(t, tb, i, u, c, r, n as i64, stream.raw()) })
}

/// Encodes runs of equal consecutive items. Inputs longer than [`RLE_MAX_ITEMS`] are refused
/// with [`gpujoin_device::Error::TooLarge`], never truncated. Waits for the stream (to learn
/// the run count).
pub fn run_length_encode<K: RleKey>(stream: &Stream, input: &DeviceView<'_, K>) -> Result<Runs<K>> {
    let n = input.len();
    check_count("run_length_encode items", n, RLE_MAX_ITEMS)?;
    let mut unique = stream.alloc::<K>(n)?;
    let mut counts = stream.alloc::<u32>(n)?;
    let mut num = stream.alloc::<i64>(1)?;
    run_length_encode_into(stream, input, &mut unique.view_mut(), &mut counts.view_mut(), &mut num.view_mut())?;
    let runs = read_scalar(stream, &num)? as usize;
    unique.truncate(runs);
    counts.truncate(runs);
    Ok(Runs { unique, counts })
}
