//! Streams: every allocation, copy and kernel of gpujoin is ordered on one.

use std::ffi::c_void;
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::{result, sys, CudaStream};

use crate::block_cache::BlockCache;
use crate::buffer::{DeviceBuffer, DeviceView, DeviceViewMut};
use crate::device::Device;
use crate::error::{driver, Error, Result};
use crate::event::Event;
use crate::pinned::PinnedBuffer;

/// A CUDA stream of a [`Device`]. Cloning shares the stream (and its block cache, if it has
/// one: [`Device::new_stream_with_block_cache`]).
#[derive(Clone)]
pub struct Stream {
    device: Device,
    inner: Arc<CudaStream>,
    cache: Option<Arc<BlockCache>>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("device", &self.device).field("raw", &self.raw()).finish()
    }
}

/// True when the driver knows `p` as page-locked host memory (allocated by `cuMemHostAlloc` or
/// registered): a device copy reads it asynchronously, after the copy call has returned.
fn is_page_locked(p: *const c_void) -> bool {
    let mut memory_type: u32 = 0;
    let mut attribute = sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    let mut data = [&mut memory_type as *mut u32 as *mut c_void];
    // SAFETY: one attribute, one unsigned int written into `memory_type`. Unlike
    // cuPointerGetAttribute, the plural call returns success with 0 for memory the driver does
    // not know (pageable), so no failing API call shows in compute-sanitizer's reports.
    let r = unsafe { sys::cuPointerGetAttributes(1, &mut attribute, data.as_mut_ptr(), p as sys::CUdeviceptr) };
    r == sys::CUresult::CUDA_SUCCESS && memory_type == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

impl Stream {
    pub(crate) fn from_parts(device: Device, inner: Arc<CudaStream>) -> Self {
        Stream { device, inner, cache: None }
    }

    /// A stream whose small freed blocks are kept for its next allocations (see
    /// [`Device::new_stream_with_block_cache`]).
    pub(crate) fn with_block_cache(device: Device, inner: Arc<CudaStream>, largest_block: usize, capacity: usize) -> Self {
        let cache = Arc::new(BlockCache::new(Arc::clone(&inner), largest_block, capacity));
        Stream { device, inner, cache: Some(cache) }
    }

    /// The block cache's largest block and capacity in bytes (`None`: the stream has none).
    pub fn block_cache_limits(&self) -> Option<(usize, usize)> {
        self.cache.as_ref().map(|c| (c.largest_block(), c.capacity()))
    }

    /// Bytes of device memory this stream's block cache holds now (0 without one): allocated
    /// from the pool, free for the stream's next allocations.
    pub fn block_cache_bytes(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.held())
    }

    /// Gives the blocks this stream's cache holds back to the device's pool (ordered after the
    /// stream's queued work); returns their bytes. The cache keeps working afterwards.
    pub fn release_block_cache(&self) -> Result<usize> {
        match &self.cache {
            Some(c) => {
                self.device.bind_to_thread()?;
                Ok(c.release())
            }
            None => Ok(0),
        }
    }

    /// Keeps a freed block of size class `class` in the stream's cache (`false`: no cache, or it
    /// is full).
    pub(crate) fn keep_block(&self, ptr: sys::CUdeviceptr, class: usize) -> bool {
        self.cache.as_ref().is_some_and(|c| c.keep(ptr, class))
    }

    /// The device this stream runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The raw `CUstream`/`cudaStream_t` handle, for FFI calls (the two are interchangeable).
    pub fn raw(&self) -> *mut c_void {
        self.inner.cu_stream() as *mut c_void
    }

    /// Blocks the host until all work queued on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        crate::counts::host_wait(|| self.inner.synchronize()).map_err(|e| driver("cuStreamSynchronize", e))
    }

    /// Allocates `len` elements from the device's stream-ordered pool. The contents are
    /// unspecified (whatever bytes the memory held).
    ///
    /// When the pool cannot serve the size, the allocation waits for the device, trims the pool
    /// ([`Device::trim_memory`]) and tries once more before it returns
    /// [`Error::OutOfMemory`] with the bytes requested, free, reserved and in use.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::too_large("allocation bytes", len as u64, usize::MAX as u64))?;
        if bytes == 0 {
            return Ok(DeviceBuffer::from_raw_parts(0, 0, self.clone()));
        }
        // A block of the stream's cache where it has one of the request's class.
        let class = self.cache.as_ref().and_then(|c| c.class_of(bytes));
        if let (Some(cache), Some(class)) = (&self.cache, class) {
            if let Some(ptr) = cache.take(class) {
                return Ok(DeviceBuffer::from_cached_block(ptr, len, self.clone(), class));
            }
        }
        let bytes = class.unwrap_or(bytes);
        self.device.bind_to_thread()?;
        // SAFETY: the stream belongs to the bound context; the memory is freed on drop.
        let try_alloc = || crate::counts::pool_alloc(|| unsafe { result::malloc_async(self.inner.cu_stream(), bytes) });
        let oom = |e: &cudarc::driver::DriverError| e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY;
        let ptr = match try_alloc() {
            Ok(p) => p,
            // The pool may hold freed memory in chunks that cannot serve this size, or frees
            // still queued on streams: wait for them, give the pool's unused memory back, retry.
            Err(e) if oom(&e) => {
                self.release_block_cache()?;
                self.device.trim_memory()?;
                try_alloc().map_err(|e| {
                    if oom(&e) {
                        let free = self.device.memory_info().map(|m| m.free).unwrap_or(0);
                        let pool = self.device.pool_memory().unwrap_or(crate::PoolMemory { reserved: 0, in_use: 0 });
                        Error::OutOfMemory { requested: bytes as u64, free, reserved: pool.reserved, in_use: pool.in_use }
                    } else {
                        driver("cuMemAllocAsync", e)
                    }
                })?
            }
            Err(e) => return Err(driver("cuMemAllocAsync", e)),
        };
        Ok(match class {
            Some(class) => DeviceBuffer::from_cached_block(ptr, len, self.clone(), class),
            None => DeviceBuffer::from_raw_parts(ptr, len, self.clone()),
        })
    }

    /// Grows the device's memory pool ahead of a large job, so that its allocations are served
    /// from memory the pool already holds instead of waiting for the driver to map new memory.
    /// Makes at least `bytes` reserved-but-unused, within the pool's release threshold (memory
    /// above it goes back to the device at the next synchronization) and the free memory (a
    /// 256 MiB margin left); waits for this stream. Returns the bytes newly reserved (0 when the
    /// pool already held enough, or a full device gives nothing).
    ///
    /// ```no_run
    /// # fn f(stream: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
    /// // Before a join that needs about 3 GiB of working memory:
    /// let grown = stream.reserve_pool(3 << 30)?;
    /// assert!(grown <= 3 << 30);
    /// # Ok(()) }
    /// ```
    pub fn reserve_pool(&self, bytes: u64) -> Result<u64> {
        const MARGIN: u64 = 256 << 20;
        let d = &self.device;
        let pool = d.pool_memory()?;
        let idle = pool.reserved.saturating_sub(pool.in_use);
        let room = d.release_threshold()?.saturating_sub(pool.reserved).min(d.memory_info()?.free.saturating_sub(MARGIN));
        let grow = bytes.saturating_sub(idle).min(room);
        if grow == 0 {
            return Ok(0);
        }
        self.device.bind_to_thread()?;
        // SAFETY: a pool allocation on this stream's bound context, freed at once on the same
        // stream: the pool keeps the memory (below its release threshold) for later allocations.
        let ptr = match unsafe { result::malloc_async(self.inner.cu_stream(), grow as usize) } {
            Ok(p) => p,
            Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => return Ok(0),
            Err(e) => return Err(driver("cuMemAllocAsync", e)),
        };
        // SAFETY: `ptr` came from `malloc_async` on this stream and nothing else holds it.
        unsafe { result::free_async(ptr, self.inner.cu_stream()) }.map_err(|e| driver("cuMemFreeAsync", e))?;
        self.synchronize()?;
        Ok(d.pool_memory()?.reserved.saturating_sub(pool.reserved))
    }

    /// Allocates `len` zeroed elements.
    pub fn alloc_zeroed<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc::<T>(len)?;
        self.memset_bytes(&mut b.view_mut(), 0)?;
        Ok(b)
    }

    /// Sets every byte of `dst` to `byte` (used to poison outputs in tests).
    pub fn memset_bytes<T: Pod>(&self, dst: &mut DeviceViewMut<'_, T>, byte: u8) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: dst is a live device range of byte_len bytes.
        unsafe { result::memset_d8_async(dst.raw(), byte, dst.byte_len(), self.inner.cu_stream()) }
            .map_err(|e| driver("cuMemsetD8Async", e))
    }

    /// Sets every 4-byte word of `dst` to `word`; `T` must be 4 bytes wide.
    pub fn fill_u32_bits<T: Pod>(&self, dst: &mut DeviceViewMut<'_, T>, word: u32) -> Result<()> {
        if std::mem::size_of::<T>() != 4 {
            return Err(Error::invalid("fill_u32_bits needs a 4-byte element type"));
        }
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: dst is a live device range of len 4-byte words.
        unsafe { sys::cuMemsetD32Async(dst.raw(), word, dst.len(), self.inner.cu_stream()) }
            .result()
            .map_err(|e| driver("cuMemsetD32Async", e))
    }

    /// Copies a host slice into a new device buffer.
    pub fn copy_from_host<T: Pod>(&self, src: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc::<T>(src.len())?;
        self.copy_host_to_device(src, &mut b.view_mut())?;
        Ok(b)
    }

    /// Copies `src` into `dst` (equal lengths). Returns once `src` may be reused: a copy from
    /// pageable memory is staged by the driver before the call returns; one from page-locked
    /// memory (a download's Arrow buffers, a [`PinnedBuffer`]'s bytes) reads `src` later, so
    /// the call waits for it.
    pub fn copy_host_to_device<T: Pod>(&self, src: &[T], dst: &mut DeviceViewMut<'_, T>) -> Result<()> {
        crate::check_same_len("host source", src.len(), "device destination", dst.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.device.bind_to_thread()?;
        // SAFETY: dst holds src.len() elements. A copy from pageable memory is staged before
        // the call returns; a page-locked source is waited for below, before src may be dropped.
        unsafe { result::memcpy_htod_async(dst.raw(), src, self.inner.cu_stream()) }
            .map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
        if is_page_locked(src.as_ptr() as *const c_void) {
            self.wait_for(self.record_event())?;
        }
        Ok(())
    }

    /// Waits for `queued` (an event recorded after some copies), or for the whole stream when it
    /// could not be recorded or waited on: either way the copies are done on return.
    fn wait_for(&self, queued: Result<Event>) -> Result<()> {
        queued.and_then(|e| e.synchronize()).or_else(|_| self.synchronize())
    }

    /// Queues the copy of every `(host bytes, device range)` pair (equal lengths), runs
    /// `during` (other work of the caller, for example staged copies on this stream), then waits
    /// for these copies (not for what `during` queued after them) before returning: from page-locked host memory (a download's Arrow buffers,
    /// [`crate::PinnedBuffer`]) each is a direct DMA at the pinned rate, with no host copy. The
    /// host bytes stay borrowed until the copies are done, so any host memory is sound here.
    ///
    /// ```no_run
    /// # fn f(stream: &gpujoin_device::Stream, host: &[u8], dst: &mut gpujoin_device::DeviceBuffer<u8>) -> gpujoin_device::Result<()> {
    /// let n = stream.copy_from_host_during(vec![(host, dst.view_mut())], || Ok(host.len()))?;
    /// # let _ = n; Ok(()) }
    /// ```
    pub fn copy_from_host_during<R>(&self, copies: Vec<(&[u8], DeviceViewMut<'_, u8>)>, during: impl FnOnce() -> Result<R>) -> Result<R> {
        if copies.is_empty() {
            return during();
        }
        self.device.bind_to_thread()?;
        let mut queued = Ok(());
        for (src, dst) in &copies {
            if let Err(e) = crate::check_same_len("host source", src.len(), "device destination", dst.len()) {
                queued = Err(e);
                break;
            }
            if src.is_empty() {
                continue;
            }
            // SAFETY: dst holds src.len() bytes; src stays borrowed until the event recorded
            // below (after every queued copy) completes.
            if let Err(e) = unsafe { sys::cuMemcpyHtoDAsync_v2(dst.raw(), src.as_ptr() as *const c_void, src.len(), self.inner.cu_stream()) }.result() {
                queued = Err(driver("cuMemcpyHtoDAsync", e));
                break;
            }
        }
        // The end of these copies: `during`'s work queued later is not waited for.
        let copied = self.record_event();
        let out = queued.and_then(|_| during());
        // Wait for what was queued even when a later copy or `during` failed.
        let done = self.wait_for(copied);
        let out = out?;
        done?;
        Ok(out)
    }

    /// Copies a device range into a new `Vec`, waiting for the stream.
    pub fn copy_to_host<T: Pod>(&self, src: &DeviceView<'_, T>) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); src.len()];
        if !out.is_empty() {
            self.device.bind_to_thread()?;
            // SAFETY: out holds src.len() elements and we synchronize before returning.
            unsafe { result::memcpy_dtoh_async(&mut out, src.raw(), self.inner.cu_stream()) }
                .map_err(|e| driver("cuMemcpyDtoHAsync", e))?;
        }
        self.synchronize()?;
        Ok(out)
    }

    /// Copies a device range into a new device buffer, ordered on this stream.
    pub fn copy_from_device<T: Pod>(&self, src: &DeviceView<'_, T>) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc::<T>(src.len())?;
        self.copy_device_to_device(src, &mut b.view_mut())?;
        Ok(b)
    }

    /// Copies between device ranges of equal length, ordered on this stream.
    pub fn copy_device_to_device<T: Pod>(
        &self,
        src: &DeviceView<'_, T>,
        dst: &mut DeviceViewMut<'_, T>,
    ) -> Result<()> {
        crate::check_same_len("device source", src.len(), "device destination", dst.len())?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: both ranges are live and of byte_len bytes.
        unsafe { result::memcpy_dtod_async(dst.raw(), src.raw(), src.byte_len(), self.inner.cu_stream()) }
            .map_err(|e| driver("cuMemcpyDtoDAsync", e))
    }

    /// Queues a copy from the device into pinned host memory at `offset`; the pinned buffer
    /// waits for it before it can be read or dropped.
    pub fn copy_to_pinned_async<T: Pod>(
        &self,
        src: &DeviceView<'_, T>,
        dst: &mut PinnedBuffer<T>,
        offset: usize,
    ) -> Result<()> {
        let end = offset.checked_add(src.len()).filter(|&e| e <= dst.len()).ok_or_else(|| {
            Error::invalid(format!(
                "copy of {} elements at offset {offset} into a pinned buffer of {}",
                src.len(),
                dst.len()
            ))
        })?;
        if src.is_empty() {
            return Ok(());
        }
        let _ = end;
        self.device.bind_to_thread()?;
        // SAFETY: the destination range is inside the pinned allocation, which records an event
        // below and synchronizes on it before any host access or free.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                dst.raw_mut_ptr().add(offset) as *mut c_void,
                src.raw(),
                src.byte_len(),
                self.inner.cu_stream(),
            )
            .result()
            .map_err(|e| driver("cuMemcpyDtoHAsync", e))?;
        }
        dst.set_pending(self.record_event()?);
        Ok(())
    }

    /// Queues a copy of the first `dst.len()` elements of pinned host memory into the device;
    /// the pinned buffer waits for it before it can be written again or dropped.
    pub fn copy_from_pinned_async<T: Pod>(
        &self,
        src: &mut PinnedBuffer<T>,
        dst: &mut DeviceViewMut<'_, T>,
    ) -> Result<()> {
        if dst.len() > src.len() {
            return Err(Error::invalid(format!("copy of {} elements from a pinned buffer of {}", dst.len(), src.len())));
        }
        if dst.is_empty() {
            return Ok(());
        }
        self.device.bind_to_thread()?;
        // SAFETY: as in copy_to_pinned_async.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst.raw(), src.raw_mut_ptr() as *const c_void, dst.byte_len(), self.inner.cu_stream())
                .result()
                .map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
        }
        src.set_pending(self.record_event()?);
        Ok(())
    }

    /// Queues a copy of `dst.len()` bytes of registered host memory, from byte `offset`, into
    /// the device; the registration waits for it before it is dropped.
    pub fn copy_from_registered_async(&self, src: &mut crate::pinned::HostRegistration<'_>, offset: usize, dst: &mut DeviceViewMut<'_, u8>) -> Result<()> {
        if offset.checked_add(dst.len()).map_or(true, |end| end > src.len()) {
            return Err(Error::invalid(format!("copy of {} bytes at {offset} from {} registered bytes", dst.len(), src.len())));
        }
        if dst.is_empty() {
            return Ok(());
        }
        self.device.bind_to_thread()?;
        // SAFETY: the source range is inside the registration, which stays registered (and its
        // memory borrowed) until the event recorded below completes.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst.raw(), src.raw_ptr().add(offset) as *const c_void, dst.len(), self.inner.cu_stream())
                .result()
                .map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
        }
        src.set_pending(self.record_event()?);
        Ok(())
    }

    /// Records an event at the current end of the stream.
    pub fn record_event(&self) -> Result<Event> {
        let e = Event::new(&self.device, false)?;
        e.record(self)?;
        Ok(e)
    }

    /// Records an event with timing enabled at the current end of the stream (for
    /// [`Event::elapsed_ms`] between events of one or several streams).
    pub fn record_timed_event(&self) -> Result<Event> {
        let e = Event::new(&self.device, true)?;
        e.record(self)?;
        Ok(e)
    }

    /// True when all work queued on this stream so far is done, without waiting.
    pub fn is_idle(&self) -> Result<bool> {
        self.record_event()?.is_complete()
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.inner.wait(event.inner()).map_err(|e| driver("cuStreamWaitEvent", e))
    }

    /// Makes later work on this stream wait for an event that another library owns and
    /// recorded: a raw `CUevent` or runtime `cudaEvent_t` (the same handle), e.g. the one an
    /// imported Arrow C device array's `sync_event` points to. Waits for the event's state at
    /// the time of the call, like [`Stream::wait_event`].
    ///
    /// # Safety
    /// `event` must be a live event handle, created in this device's primary context (the one
    /// the CUDA runtime uses too), for the duration of the call.
    pub unsafe fn wait_raw_event(&self, event: *mut c_void) -> Result<()> {
        if event.is_null() {
            return Err(Error::invalid("a null CUevent to wait on"));
        }
        self.device.bind_to_thread()?;
        // SAFETY: the stream is live; the caller vouches for the event.
        unsafe { result::stream::wait_event(self.inner.cu_stream(), event as sys::CUevent, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .map_err(|e| driver("cuStreamWaitEvent", e))
    }

    pub(crate) fn cuda(&self) -> &Arc<CudaStream> {
        &self.inner
    }
}
