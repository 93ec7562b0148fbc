//! The `Result` layer over the raw FFI: error codes to [`Error`], and CUB's two-phase temporary
//! storage hidden behind one call that allocates from the stream's pool.
//!
//! As in cudarc (raw `sys`, a `result` layer, a safe layer kept apart), this sits between the
//! raw declarations of this crate and the safe APIs above it: `gpujoin-primitives` and
//! `gpujoin-join` wrap their kernels' C ABIs (and CUB's, through this crate) with these calls,
//! since every wrapper follows the same conventions (a `cudaError_t` return, CUB's two phases).

use std::ffi::{c_void, CStr};

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};

/// Converts a `cudaError_t` from a wrapper into a `Result`, naming the call.
pub fn check(call: &str, code: i32) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    // SAFETY: cudaGetErrorName returns a static string for any code.
    let name = unsafe {
        let p = crate::gj_cuda_error_name(code);
        if p.is_null() { "unknown".to_string() } else { CStr::from_ptr(p).to_string_lossy().into_owned() }
    };
    Err(Error::Cuda { call: call.to_string(), code, name })
}

/// Runs a two-phase call: first with a null buffer to learn the temporary bytes it needs, then
/// with a buffer of that size from the stream's pool (freed, stream-ordered, on return).
pub fn with_temp(stream: &Stream, call: &str, mut f: impl FnMut(*mut c_void, *mut usize) -> i32) -> Result<()> {
    stream.device().bind_to_thread()?;
    let mut bytes: usize = 0;
    check(call, gpujoin_device::counts::c_call(|| f(std::ptr::null_mut(), &mut bytes)))?;
    let mut temp: DeviceBuffer<u8> = stream.alloc(bytes.max(1))?;
    let mut view = temp.view_mut();
    check(call, gpujoin_device::counts::c_call(|| f(view.as_mut_ptr() as *mut c_void, &mut bytes)))
}

/// Calls a single-phase kernel wrapper.
pub fn launch(stream: &Stream, call: &str, f: impl FnOnce() -> i32) -> Result<()> {
    stream.device().bind_to_thread()?;
    check(call, gpujoin_device::counts::c_call(f))
}

/// Reads one device value back (waits for the stream).
pub fn read_scalar<T: gpujoin_device::Pod>(stream: &Stream, buf: &DeviceBuffer<T>) -> Result<T> {
    Ok(stream.copy_to_host(&buf.view())?[0])
}

/// Refuses counts that CUB cannot take (`limit` items).
pub fn check_count(what: &str, n: usize, limit: u64) -> Result<()> {
    if n as u64 > limit {
        Err(Error::too_large(what, n as u64, limit))
    } else {
        Ok(())
    }
}
