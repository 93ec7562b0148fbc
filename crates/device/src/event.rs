//! Events and an elapsed-time timer.

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::sync::Mutex;

use cudarc::driver::{sys, CudaEvent};

use crate::device::Device;
use crate::error::{driver, Result};
use crate::stream::Stream;

/// A CUDA event.
///
/// Events are recycled: a dropped one goes to a free list of its device (at most
/// [`FREE_EVENTS_KEPT`] a device and kind) and the next [`Event::new`] of that device and kind
/// records into it again. Creating and destroying events takes a driver lock that every thread
/// of the process shares; with many threads uploading at once on a busy machine, each creation
/// took a millisecond or more (the staging records one per copy).
pub struct Event {
    inner: ManuallyDrop<CudaEvent>,
    /// (device ordinal, timing enabled): the free list it goes back to.
    kind: (usize, bool),
}

/// Most free events kept per device and kind (timing or not).
pub const FREE_EVENTS_KEPT: usize = 1024;

static FREE: Mutex<Vec<((usize, bool), CudaEvent)>> = Mutex::new(Vec::new());

fn free_list() -> std::sync::MutexGuard<'static, Vec<((usize, bool), CudaEvent)>> {
    FREE.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `inner` is not used after.
        let e = unsafe { ManuallyDrop::take(&mut self.inner) };
        let mut free = free_list();
        if free.iter().filter(|(k, _)| *k == self.kind).count() < FREE_EVENTS_KEPT {
            free.push((self.kind, e));
        } else {
            drop(free);
            drop(e);
        }
    }
}

impl Event {
    /// An event of `device`; `timing` enables elapsed-time queries. A free one of the same
    /// device and kind is reused when there is one (nobody holds it, so nobody waits on its last
    /// recording), else a new one is created.
    pub fn new(device: &Device, timing: bool) -> Result<Self> {
        let kind = (device.ordinal(), timing);
        {
            let mut free = free_list();
            if let Some(i) = free.iter().rposition(|(k, _)| *k == kind) {
                let (_, inner) = free.swap_remove(i);
                return Ok(Event { inner: ManuallyDrop::new(inner), kind });
            }
        }
        let flags = if timing { sys::CUevent_flags::CU_EVENT_DEFAULT } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING };
        let inner = device.ctx().new_event(Some(flags)).map_err(|e| driver("cuEventCreate", e))?;
        Ok(Event { inner: ManuallyDrop::new(inner), kind })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.inner.record(stream.cuda()).map_err(|e| driver("cuEventRecord", e))
    }

    /// Blocks until the recorded work is done.
    pub fn synchronize(&self) -> Result<()> {
        crate::counts::host_wait(|| self.inner.synchronize()).map_err(|e| driver("cuEventSynchronize", e))
    }

    /// Milliseconds between this event and a later one (both recorded, timing enabled).
    pub fn elapsed_ms(&self, later: &Event) -> Result<f32> {
        self.inner.elapsed_ms(&later.inner).map_err(|e| driver("cuEventElapsedTime", e))
    }

    /// True when the recorded work is done, without waiting (an event never recorded is done).
    /// An error of earlier asynchronous work is returned.
    pub fn is_complete(&self) -> Result<bool> {
        self.inner.try_is_complete().map_err(|e| driver("cuEventQuery", e))
    }

    /// The raw `CUevent` handle (the same handle as a runtime `cudaEvent_t`), for FFI: e.g. the
    /// event an Arrow C device array's `sync_event` points to. The event keeps owning it: the
    /// handle must not be destroyed, nor used after the event is dropped.
    ///
    /// ```no_run
    /// # fn f(stream: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
    /// let ready = stream.record_event()?;
    /// let handle = ready.raw(); // hand `&handle` to a C library that waits on it
    /// # let _ = handle; Ok(()) }
    /// ```
    pub fn raw(&self) -> *mut c_void {
        self.inner.cu_event() as *mut c_void
    }

    pub(crate) fn inner(&self) -> &CudaEvent {
        &self.inner
    }
}

/// Times the device work queued on a stream between [`Timer::start`] and [`Timer::stop`].
///
/// ```no_run
/// # fn f(stream: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
/// let timer = gpujoin_device::Timer::start(stream)?;
/// // ... queue work on `stream` ...
/// let ms = timer.stop(stream)?;
/// # Ok(()) }
/// ```
pub struct Timer {
    start: Event,
}

impl Timer {
    /// Records the start event.
    pub fn start(stream: &Stream) -> Result<Self> {
        let start = Event::new(stream.device(), true)?;
        start.record(stream)?;
        Ok(Timer { start })
    }

    /// Records the stop event, waits for it and returns the elapsed device time in milliseconds.
    pub fn stop(self, stream: &Stream) -> Result<f32> {
        let stop = Event::new(stream.device(), true)?;
        stop.record(stream)?;
        stop.synchronize()?;
        self.start.elapsed_ms(&stop)
    }
}
