//! The device and its primary context.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use crate::error::{driver, Error, Result};
use crate::stream::Stream;

/// Free and total device memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    pub free: u64,
    pub total: u64,
}

/// A CUDA device, holding its primary context (shared with the CUDA runtime that CUB uses).
///
/// Creating one raises the release threshold of the device's default memory pool, so that
/// stream-ordered allocations are recycled instead of returned to the driver at every
/// synchronization.
#[derive(Clone)]
pub struct Device {
    ctx: Arc<CudaContext>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("ordinal", &self.ctx.ordinal()).finish()
    }
}

/// Loads the driver library, returning an error instead of cudarc's panic when it is missing.
fn ensure_driver() -> Result<()> {
    // SAFETY: only tries to dlopen the driver library.
    if unsafe { sys::is_culib_present() } {
        result::init().map_err(|e| match e.0 {
            sys::cudaError_enum::CUDA_ERROR_NO_DEVICE => Error::NoDevice("cuInit found no device".into()),
            _ => driver("cuInit", e),
        })
    } else {
        Err(Error::NoDriver("libcuda.so could not be loaded (no NVIDIA driver on this machine)".into()))
    }
}

impl Device {
    /// The number of CUDA devices; an error when there is no driver.
    pub fn count() -> Result<usize> {
        ensure_driver()?;
        let n = result::device::get_count().map_err(|e| driver("cuDeviceGetCount", e))?;
        Ok(n.max(0) as usize)
    }

    /// Opens device `ordinal`, binds its primary context to this thread and configures its pool.
    pub fn new(ordinal: usize) -> Result<Self> {
        let n = Self::count()?;
        if ordinal >= n {
            return Err(Error::NoDevice(format!("device {ordinal} asked for, {n} present")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("cuDevicePrimaryCtxRetain", e))?;
        // Stream-ordered allocations pay for a cudaMalloc only once; keep freed memory in the pool.
        if ctx.has_async_alloc() {
            // SAFETY: the default pool of a valid device; the attribute takes a u64.
            unsafe {
                let pool = result::device::get_default_mem_pool(ctx.cu_device())
                    .map_err(|e| driver("cuDeviceGetDefaultMemPool", e))?;
                let mut threshold: u64 = u64::MAX;
                result::mem_pool::set_attribute(
                    pool,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    &mut threshold as *mut u64 as *mut std::ffi::c_void,
                )
                .map_err(|e| driver("cuMemPoolSetAttribute", e))?;
            }
        }
        // gpujoin orders work by streams itself; cudarc's per-buffer events are not used.
        // SAFETY: we never hand out cudarc's CudaSlice types.
        unsafe { ctx.disable_event_tracking() };
        Ok(Device { ctx })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// Makes this device's context current on the calling thread (needed once per new thread).
    pub fn bind_to_thread(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| driver("cuCtxSetCurrent", e))
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> Result<Stream> {
        let s = self.ctx.new_stream().map_err(|e| driver("cuStreamCreate", e))?;
        Ok(Stream::from_parts(self.clone(), s))
    }

    /// Device name, e.g. `NVIDIA H100 80GB HBM3`.
    pub fn name(&self) -> Result<String> {
        self.ctx.name().map_err(|e| driver("cuDeviceGetName", e))
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        self.ctx.compute_capability().map_err(|e| driver("cuDeviceGetAttribute", e))
    }

    /// Number of streaming multiprocessors.
    pub fn multiprocessor_count(&self) -> Result<u32> {
        self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map(|v| v as u32)
    }

    /// Shared memory per block available with opt-in, in bytes.
    pub fn max_shared_memory_per_block(&self) -> Result<u32> {
        self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map(|v| v as u32)
    }

    fn attribute(&self, a: sys::CUdevice_attribute) -> Result<i32> {
        self.ctx.attribute(a).map_err(|e| driver("cuDeviceGetAttribute", e))
    }

    /// Free and total device memory.
    pub fn memory_info(&self) -> Result<MemoryInfo> {
        self.bind_to_thread()?;
        let (free, total) = result::mem_get_info().map_err(|e| driver("cuMemGetInfo", e))?;
        Ok(MemoryInfo { free: free as u64, total: total as u64 })
    }

    /// Bytes free for new allocations: free device memory plus what the pool holds unused.
    pub fn available_memory(&self) -> Result<u64> {
        let free = self.memory_info()?.free;
        let reserved = self.pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?;
        let used = self.pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?;
        Ok(free + reserved.saturating_sub(used))
    }

    /// The highest number of pool bytes in use since the last [`Device::reset_peak_memory`].
    pub fn peak_memory(&self) -> Result<u64> {
        self.pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)
    }

    /// Starts a new peak-memory measurement.
    pub fn reset_peak_memory(&self) -> Result<()> {
        if !self.ctx.has_async_alloc() {
            return Ok(());
        }
        // SAFETY: resetting the high-water mark takes a zero u64.
        unsafe {
            let pool = result::device::get_default_mem_pool(self.ctx.cu_device())
                .map_err(|e| driver("cuDeviceGetDefaultMemPool", e))?;
            let mut zero: u64 = 0;
            result::mem_pool::set_attribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                &mut zero as *mut u64 as *mut std::ffi::c_void,
            )
            .map_err(|e| driver("cuMemPoolSetAttribute", e))
        }
    }

    fn pool_attribute(&self, attr: sys::CUmemPool_attribute) -> Result<u64> {
        if !self.ctx.has_async_alloc() {
            return Ok(0);
        }
        // SAFETY: these attributes are u64 values of the device's default pool.
        unsafe {
            let pool = result::device::get_default_mem_pool(self.ctx.cu_device())
                .map_err(|e| driver("cuDeviceGetDefaultMemPool", e))?;
            let mut v: u64 = 0;
            result::mem_pool::get_attribute(pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void)
                .map_err(|e| driver("cuMemPoolGetAttribute", e))?;
            Ok(v)
        }
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.synchronize().map_err(|e| driver("cuCtxSynchronize", e))
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}
