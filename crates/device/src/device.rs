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

/// Bytes held by the device's memory pool ([`Device::pool_memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolMemory {
    /// Reserved from the device (in use, or free for the pool's next allocations).
    pub reserved: u64,
    /// In use by live buffers.
    pub in_use: u64,
}

/// How much freed memory the pool keeps for reuse ([`DeviceOptions::release_threshold`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReleaseThreshold {
    /// Keep at most this many bytes.
    Bytes(u64),
    /// Keep at most this fraction of the device's total memory.
    FractionOfTotal(f64),
}

impl ReleaseThreshold {
    /// The threshold in bytes on a device of `total` bytes.
    ///
    /// ```
    /// # use gpujoin_device::ReleaseThreshold;
    /// assert_eq!(ReleaseThreshold::FractionOfTotal(0.25).bytes(80 << 30), 20 << 30);
    /// assert_eq!(ReleaseThreshold::Bytes(1 << 30).bytes(80 << 30), 1 << 30);
    /// ```
    pub fn bytes(self, total: u64) -> u64 {
        match self {
            ReleaseThreshold::Bytes(b) => b,
            ReleaseThreshold::FractionOfTotal(f) => (total as f64 * f.clamp(0.0, 1.0)) as u64,
        }
    }

    /// Parses `GPUJOIN_POOL_RELEASE_THRESHOLD`'s forms: a byte count (`1073741824`), with a
    /// binary suffix (`512M`, `4G`), or a fraction of the total (`0.25`, `25%`).
    ///
    /// ```
    /// # use gpujoin_device::ReleaseThreshold;
    /// assert_eq!(ReleaseThreshold::parse("4G"), Some(ReleaseThreshold::Bytes(4 << 30)));
    /// assert_eq!(ReleaseThreshold::parse("25%"), Some(ReleaseThreshold::FractionOfTotal(0.25)));
    /// assert_eq!(ReleaseThreshold::parse("0.5"), Some(ReleaseThreshold::FractionOfTotal(0.5)));
    /// assert_eq!(ReleaseThreshold::parse("0"), Some(ReleaseThreshold::Bytes(0)));
    /// assert_eq!(ReleaseThreshold::parse("lots"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            return p.trim().parse::<f64>().ok().filter(|f| (0.0..=100.0).contains(f)).map(|f| Self::FractionOfTotal(f / 100.0));
        }
        if s.contains('.') {
            return s.parse::<f64>().ok().filter(|f| (0.0..=1.0).contains(f)).map(Self::FractionOfTotal);
        }
        let (digits, shift) = match s.char_indices().last()? {
            (i, 'K' | 'k') => (&s[..i], 10),
            (i, 'M' | 'm') => (&s[..i], 20),
            (i, 'G' | 'g') => (&s[..i], 30),
            (i, 'T' | 't') => (&s[..i], 40),
            _ => (s, 0),
        };
        digits.trim().parse::<u64>().ok().and_then(|v| v.checked_mul(1u64 << shift)).map(Self::Bytes)
    }
}

/// How a host thread waits for its device work to finish (in a synchronization, or waiting on
/// an event): the scheduling flags of the device's primary context, shared by every thread and
/// every [`Device`] of that ordinal in the process ([`Device::set_host_wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostWait {
    /// The driver's default: spin while the process has no more contexts than the machine has
    /// cores (always, for gpujoin's one context a device), else yield.
    Auto,
    /// Spin on a core until the device is done: the lowest latency, a core busy per waiting
    /// thread.
    Spin,
    /// Spin, yielding the core to other runnable threads between checks.
    Yield,
    /// Sleep on a synchronization primitive until the device is done: a core free for other
    /// threads while waiting (query engines that run many partitions at once), tens of
    /// microseconds more latency per wait.
    Block,
}

impl HostWait {
    /// Parses `GPUJOIN_HOST_WAIT`'s forms: `auto`, `spin`, `yield` or `block`.
    ///
    /// ```
    /// # use gpujoin_device::HostWait;
    /// assert_eq!(HostWait::parse("block"), Some(HostWait::Block));
    /// assert_eq!(HostWait::parse(" Yield "), Some(HostWait::Yield));
    /// assert_eq!(HostWait::parse("sometimes"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        [HostWait::Auto, HostWait::Spin, HostWait::Yield, HostWait::Block].into_iter().find(|w| w.name() == s)
    }

    /// The name [`HostWait::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            HostWait::Auto => "auto",
            HostWait::Spin => "spin",
            HostWait::Yield => "yield",
            HostWait::Block => "block",
        }
    }

    fn flag(self) -> u32 {
        use sys::CUctx_flags_enum as F;
        match self {
            HostWait::Auto => F::CU_CTX_SCHED_AUTO as u32,
            HostWait::Spin => F::CU_CTX_SCHED_SPIN as u32,
            HostWait::Yield => F::CU_CTX_SCHED_YIELD as u32,
            HostWait::Block => F::CU_CTX_SCHED_BLOCKING_SYNC as u32,
        }
    }

    fn from_flags(flags: u32) -> Self {
        use sys::CUctx_flags_enum as F;
        match flags & F::CU_CTX_SCHED_MASK as u32 {
            f if f == F::CU_CTX_SCHED_SPIN as u32 => HostWait::Spin,
            f if f == F::CU_CTX_SCHED_YIELD as u32 => HostWait::Yield,
            f if f == F::CU_CTX_SCHED_BLOCKING_SYNC as u32 => HostWait::Block,
            _ => HostWait::Auto,
        }
    }
}

/// How [`Device::with_options`] sets a device up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceOptions {
    /// Freed memory the pool keeps reserved across synchronizations, so that the next
    /// allocations of a similar size cost no driver call; memory above it goes back to the device
    /// (and so to other processes) at the next synchronization. Default: a quarter of the
    /// device's memory, or `GPUJOIN_POOL_RELEASE_THRESHOLD` when set (see
    /// [`ReleaseThreshold::parse`]). Whatever the threshold, an allocation that fails first
    /// trims the pool and retries before it reports [`Error::OutOfMemory`].
    pub release_threshold: ReleaseThreshold,
    /// How host threads wait for the device ([`Device::set_host_wait`]); `None` (the default
    /// unless `GPUJOIN_HOST_WAIT` names one, see [`HostWait::parse`]) leaves the context's
    /// setting as it is.
    pub host_wait: Option<HostWait>,
}

impl DeviceOptions {
    /// The default release threshold: a quarter of the device's memory.
    pub const DEFAULT_RELEASE_THRESHOLD: ReleaseThreshold = ReleaseThreshold::FractionOfTotal(0.25);
}

impl Default for DeviceOptions {
    fn default() -> Self {
        let from_env = std::env::var("GPUJOIN_POOL_RELEASE_THRESHOLD").ok().and_then(|v| ReleaseThreshold::parse(&v));
        let host_wait = std::env::var("GPUJOIN_HOST_WAIT").ok().and_then(|v| HostWait::parse(&v));
        DeviceOptions { release_threshold: from_env.unwrap_or(Self::DEFAULT_RELEASE_THRESHOLD), host_wait }
    }
}

/// A CUDA device, holding its primary context (shared with the CUDA runtime that CUB uses).
///
/// All device memory comes from the device's stream-ordered pool, which keeps freed memory up to
/// a release threshold ([`DeviceOptions`]) and is trimmed ([`Device::trim_memory`]) whenever an
/// allocation would otherwise fail.
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

    /// Opens device `ordinal` with [`DeviceOptions::default`] (binds its primary context to this
    /// thread and configures its memory pool).
    pub fn new(ordinal: usize) -> Result<Self> {
        Self::with_options(ordinal, DeviceOptions::default())
    }

    /// Opens device `ordinal` with `options`.
    pub fn with_options(ordinal: usize, options: DeviceOptions) -> Result<Self> {
        let n = Self::count()?;
        if ordinal >= n {
            return Err(Error::NoDevice(format!("device {ordinal} asked for, {n} present")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("cuDevicePrimaryCtxRetain", e))?;
        // gpujoin orders work by streams itself; cudarc's per-buffer events are not used.
        // SAFETY: we never hand out cudarc's CudaSlice types.
        unsafe { ctx.disable_event_tracking() };
        let device = Device { ctx };
        let total = device.memory_info()?.total;
        device.set_release_threshold(options.release_threshold.bytes(total))?;
        if let Some(wait) = options.host_wait {
            device.set_host_wait(wait)?;
        }
        Ok(device)
    }

    /// Sets how host threads wait for this device from now on (the primary context's scheduling
    /// flags, for every thread and every `Device` of this ordinal in the process; the other
    /// context flags are kept).
    pub fn set_host_wait(&self, wait: HostWait) -> Result<()> {
        self.bind_to_thread()?;
        let mask = sys::CUctx_flags_enum::CU_CTX_SCHED_MASK as u32;
        let mut flags = 0u32;
        // SAFETY: the device's context is current on this thread; one unsigned int written.
        unsafe { sys::cuCtxGetFlags(&mut flags) }.result().map_err(|e| driver("cuCtxGetFlags", e))?;
        // SAFETY: as above; only the scheduling bits change.
        unsafe { sys::cuCtxSetFlags((flags & !mask) | wait.flag()) }.result().map_err(|e| driver("cuCtxSetFlags", e))
    }

    /// How host threads wait for this device now ([`Device::set_host_wait`]).
    pub fn host_wait(&self) -> Result<HostWait> {
        self.bind_to_thread()?;
        let mut flags = 0u32;
        // SAFETY: the device's context is current on this thread; one unsigned int written.
        unsafe { sys::cuCtxGetFlags(&mut flags) }.result().map_err(|e| driver("cuCtxGetFlags", e))?;
        Ok(HostWait::from_flags(flags))
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

    /// A new stream that keeps the small blocks its buffers free, for its own next allocations
    /// of the same size class, instead of returning them to the pool: each reuse saves a
    /// `cuMemAllocAsync` and a `cuMemFreeAsync`, driver calls that cost most where every core
    /// is busy (a query engine's threads). Blocks are powers of two from 256 bytes; at most
    /// `largest_block` bytes each and `capacity` bytes in all are kept, the rest goes back to
    /// the pool. The kept blocks stay allocated (and count in [`Device::peak_memory`]) until
    /// the stream, its clones and its buffers are all dropped, [`Stream::release_block_cache`]
    /// is called, or an allocation on the stream finds the device full.
    ///
    /// ```no_run
    /// # fn f(device: &gpujoin_device::Device) -> gpujoin_device::Result<()> {
    /// let stream = device.new_stream_with_block_cache(1 << 20, 16 << 20)?;
    /// drop(stream.alloc::<u32>(1000)?); // 4000 bytes: a 4 KiB block, kept when dropped
    /// assert_eq!(stream.block_cache_bytes(), 4096);
    /// let again = stream.alloc::<u8>(3000)?; // the same block, no driver call
    /// assert_eq!(stream.block_cache_bytes(), 0);
    /// # Ok(()) }
    /// ```
    pub fn new_stream_with_block_cache(&self, largest_block: usize, capacity: usize) -> Result<Stream> {
        let s = self.ctx.new_stream().map_err(|e| driver("cuStreamCreate", e))?;
        Ok(Stream::with_block_cache(self.clone(), s, largest_block, capacity))
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

    /// Size of the L2 cache in bytes (50 MiB on an H100 SXM).
    pub fn l2_cache_bytes(&self) -> Result<u64> {
        self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).map(|v| v as u64)
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
        let pool = self.pool_memory()?;
        Ok(free + pool.reserved.saturating_sub(pool.in_use))
    }

    /// The highest number of pool bytes in use since the last [`Device::reset_peak_memory`].
    pub fn peak_memory(&self) -> Result<u64> {
        self.pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)
    }

    /// Starts a new peak-memory measurement.
    pub fn reset_peak_memory(&self) -> Result<()> {
        self.set_pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0)
    }

    /// The device's default memory pool (every gpujoin allocation comes from it), or `None` on a
    /// device without stream-ordered allocation.
    fn pool(&self) -> Result<Option<sys::CUmemoryPool>> {
        if !self.ctx.has_async_alloc() {
            return Ok(None);
        }
        // SAFETY: the device of a live context.
        unsafe { result::device::get_default_mem_pool(self.ctx.cu_device()) }
            .map(Some)
            .map_err(|e| driver("cuDeviceGetDefaultMemPool", e))
    }

    fn pool_attribute(&self, attr: sys::CUmemPool_attribute) -> Result<u64> {
        let Some(pool) = self.pool()? else { return Ok(0) };
        let mut v: u64 = 0;
        // SAFETY: the attributes read here are u64 values of the pool.
        unsafe { result::mem_pool::get_attribute(pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void) }
            .map_err(|e| driver("cuMemPoolGetAttribute", e))?;
        Ok(v)
    }

    fn set_pool_attribute(&self, attr: sys::CUmemPool_attribute, mut v: u64) -> Result<()> {
        let Some(pool) = self.pool()? else { return Ok(()) };
        // SAFETY: the attributes written here (release threshold, high-water marks) take a u64.
        unsafe { result::mem_pool::set_attribute(pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void) }
            .map_err(|e| driver("cuMemPoolSetAttribute", e))
    }

    /// Lets `peer` read and write the buffers of this device's memory pool (every gpujoin
    /// buffer), where the hardware allows peer access: what a library on `peer` that reads this
    /// device's buffers directly (NCCL's transfers within one process) needs. Returns whether
    /// access was granted (`false`: no peer access between the two, or no pool).
    pub fn share_pool_with(&self, peer: &Device) -> Result<bool> {
        let Some(pool) = self.pool()? else { return Ok(false) };
        let mut can = 0i32;
        // SAFETY: two live devices; one int written.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, peer.ctx.cu_device(), self.ctx.cu_device()) }
            .result()
            .map_err(|e| driver("cuDeviceCanAccessPeer", e))?;
        if can == 0 {
            return Ok(false);
        }
        let desc = sys::CUmemAccessDesc {
            location: sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: peer.ordinal() as i32 },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: one access descriptor for the pool of a live device.
        unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) }.result().map_err(|e| driver("cuMemPoolSetAccess", e))?;
        Ok(true)
    }

    /// Bytes the memory pool holds: reserved from the device, and in use by live buffers.
    pub fn pool_memory(&self) -> Result<PoolMemory> {
        Ok(PoolMemory {
            reserved: self.pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
            in_use: self.pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
        })
    }

    /// How many freed bytes the pool keeps reserved at a synchronization (stream, event or
    /// device) before it returns the rest to the device, where other processes can use it.
    pub fn release_threshold(&self) -> Result<u64> {
        self.pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
    }

    /// Sets the pool's release threshold (see [`DeviceOptions::release_threshold`]).
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.set_pool_attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, bytes)
    }

    /// Waits for all work on the device, then returns every pool byte not in use by a live buffer
    /// to the device. Returns the bytes released.
    ///
    /// Allocations do this by themselves before they report [`Error::OutOfMemory`]; call it to
    /// hand memory to another process or library at once.
    pub fn trim_memory(&self) -> Result<u64> {
        let Some(pool) = self.pool()? else { return Ok(0) };
        self.synchronize()?;
        let before = self.pool_memory()?.reserved;
        // SAFETY: trimming a live pool to 0 releases only memory that no allocation holds.
        unsafe { result::mem_pool::trim_to(pool, 0) }.map_err(|e| driver("cuMemPoolTrimTo", e))?;
        Ok(before.saturating_sub(self.pool_memory()?.reserved))
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<()> {
        crate::counts::host_wait(|| self.ctx.synchronize()).map_err(|e| driver("cuCtxSynchronize", e))
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}
