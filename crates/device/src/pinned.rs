//! Page-locked host memory, the fast target of device-to-host copies.

use bytemuck::Pod;
use cudarc::driver::result;

use crate::device::Device;
use crate::error::{driver, Error, Result};
use crate::event::Event;

/// Page-locked host memory of `len` values of `T`.
///
/// Asynchronous copies into or out of it record an event; reading the buffer or dropping it
/// first waits for that event, so a pending copy never touches freed or half-written memory.
pub struct PinnedBuffer<T: Pod> {
    ptr: *mut T,
    len: usize,
    device: Device,
    pending: Option<Event>,
}

// SAFETY: owned host memory; the pending event is only waited on.
unsafe impl<T: Pod> Send for PinnedBuffer<T> {}

impl<T: Pod> PinnedBuffer<T> {
    /// Allocates `len` zeroed values.
    pub fn new(device: &Device, len: usize) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::too_large("pinned bytes", len as u64, usize::MAX as u64))?;
        device.bind_to_thread()?;
        let ptr = if bytes == 0 {
            std::ptr::NonNull::<T>::dangling().as_ptr()
        } else {
            // SAFETY: plain page-locked allocation (flags 0: cached, readable by the host).
            let p = unsafe { result::malloc_host(bytes, 0) }.map_err(|e| driver("cuMemHostAlloc", e))? as *mut T;
            // SAFETY: fresh allocation of `bytes` bytes.
            unsafe { std::ptr::write_bytes(p as *mut u8, 0, bytes) };
            p
        };
        Ok(PinnedBuffer { ptr, len, device: device.clone(), pending: None })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Waits for pending copies, then returns the contents.
    pub fn as_slice(&mut self) -> Result<&[T]> {
        self.wait()?;
        // SAFETY: len initialized values, no copy pending.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// Waits for pending copies, then returns the contents for writing.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.wait()?;
        // SAFETY: as above, and we hold the only reference.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// True when no copy into or out of this buffer is still running (does not wait).
    pub fn is_ready(&self) -> Result<bool> {
        match &self.pending {
            Some(e) => e.is_complete(),
            None => Ok(true),
        }
    }

    /// Waits for pending copies, then returns the first `len` elements (`len <= self.len()`).
    pub fn prefix(&mut self, len: usize) -> Result<&[T]> {
        if len > self.len {
            return Err(Error::invalid(format!("prefix of {len} elements of a pinned buffer of {}", self.len)));
        }
        Ok(&self.as_slice()?[..len])
    }

    /// Waits for the copies queued into or out of this buffer.
    pub fn wait(&mut self) -> Result<()> {
        if let Some(e) = self.pending.take() {
            e.synchronize()?;
        }
        Ok(())
    }

    pub(crate) fn raw_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }

    pub(crate) fn set_pending(&mut self, e: Event) {
        self.pending = Some(e);
    }
}

impl<T: Pod> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        let _ = self.wait();
        if self.len * std::mem::size_of::<T>() != 0 {
            let _ = self.device.bind_to_thread();
            // SAFETY: allocated by cuMemHostAlloc; no copy is pending after wait().
            unsafe {
                let _ = result::free_host(self.ptr as *mut std::ffi::c_void);
            }
        }
    }
}

/// Host memory the caller owns, page-locked in place (`cuMemHostRegister`, read-only) for as long
/// as this value lives, so that device copies read it directly instead of through a staging
/// buffer. Copies out of it record an event; dropping it waits for them, then unregisters.
pub struct HostRegistration<'a> {
    ptr: *mut std::ffi::c_void,
    len: usize,
    device: Device,
    pending: Option<Event>,
    _borrow: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> HostRegistration<'a> {
    /// Registers `bytes` (which must not overlap memory registered already: the driver refuses,
    /// and so does this, with the driver's error).
    pub fn new(device: &Device, bytes: &'a [u8]) -> Result<HostRegistration<'a>> {
        device.bind_to_thread()?;
        let ptr = bytes.as_ptr() as *mut std::ffi::c_void;
        if !bytes.is_empty() {
            // SAFETY: the range is live and borrowed for 'a; read-only registration never writes it.
            unsafe { cudarc::driver::sys::cuMemHostRegister_v2(ptr, bytes.len(), cudarc::driver::sys::CU_MEMHOSTREGISTER_READ_ONLY) }
                .result()
                .map_err(|e| driver("cuMemHostRegister", e))?;
        }
        Ok(HostRegistration { ptr, len: bytes.len(), device: device.clone(), pending: None, _borrow: std::marker::PhantomData })
    }

    /// Bytes registered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Waits for the copies queued out of this memory.
    pub fn wait(&mut self) -> Result<()> {
        if let Some(e) = self.pending.take() {
            e.synchronize()?;
        }
        Ok(())
    }

    pub(crate) fn raw_ptr(&self) -> *const u8 {
        self.ptr as *const u8
    }

    pub(crate) fn set_pending(&mut self, e: Event) {
        self.pending = Some(e);
    }
}

impl Drop for HostRegistration<'_> {
    fn drop(&mut self) {
        let _ = self.wait();
        if self.len > 0 {
            let _ = self.device.bind_to_thread();
            // SAFETY: registered in `new`; no copy is pending after wait().
            unsafe {
                let _ = cudarc::driver::sys::cuMemHostUnregister(self.ptr);
            }
        }
    }
}
