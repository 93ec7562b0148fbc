//! A stream's cache of small device blocks: what a [`Stream`](crate::Stream) made by
//! [`Device::new_stream_with_block_cache`](crate::Device::new_stream_with_block_cache) keeps of
//! the small buffers it frees, for its next allocations of the same size class.
//!
//! A join of a few thousand rows makes some fifty allocations (counters, flags, CUB's temporary
//! storage, per-row scratch); each is a `cuMemAllocAsync` and a `cuMemFreeAsync`. On a host whose
//! cores are all busy (a query engine's threads) a driver call waits for the driver's lock and
//! for a core, so these calls can cost more than the device work. A block freed on a stream can
//! be handed to the next allocation on that same stream without the driver: the stream runs the
//! new work after everything queued before it, the freed buffer's last uses included.
//!
//! Blocks are sized in classes (powers of two from 256 bytes): a request of 300 bytes takes a
//! 512-byte block. Only blocks of at most [`BlockCache::largest_block`] bytes are kept, at most
//! [`BlockCache::capacity`] bytes of them; a freed block that does not fit goes back to the pool.
//!
//! ```text
//! alloc 300 B  -> pool (512 B block)      drop -> cache [512: 1 block]
//! alloc 400 B  -> cache (the 512 B block)  drop -> cache [512: 1 block]
//! alloc 8 MiB  -> pool (larger than the largest block kept), drop -> pool
//! ```

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{result, sys, CudaStream};

use crate::{size_class, SizeClassFreeList};

/// The smallest size class, in bytes.
const SMALLEST_CLASS: usize = 256;

/// The free blocks of one stream, by size class.
pub(crate) struct BlockCache {
    stream: Arc<CudaStream>,
    largest: usize,
    free: Mutex<SizeClassFreeList<sys::CUdeviceptr>>,
}

impl BlockCache {
    /// A cache for `stream` keeping blocks of at most `largest` bytes, `capacity` bytes in all.
    pub(crate) fn new(stream: Arc<CudaStream>, largest: usize, capacity: usize) -> Self {
        BlockCache { stream, largest, free: Mutex::new(SizeClassFreeList::new(capacity)) }
    }

    fn free(&self) -> MutexGuard<'_, SizeClassFreeList<sys::CUdeviceptr>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The largest block kept, in bytes.
    pub(crate) fn largest_block(&self) -> usize {
        self.largest
    }

    /// The most bytes kept at once.
    pub(crate) fn capacity(&self) -> usize {
        self.free().capacity()
    }

    /// The size class a request of `bytes` bytes takes here (`None`: too large to be kept; it
    /// goes to the pool as it is).
    pub(crate) fn class_of(&self, bytes: usize) -> Option<usize> {
        size_class(bytes, SMALLEST_CLASS).filter(|&class| class <= self.largest)
    }

    /// A free block of size class `class`, if one is kept.
    pub(crate) fn take(&self, class: usize) -> Option<sys::CUdeviceptr> {
        self.free().take(0, class)
    }

    /// Keeps the freed block `ptr` of size class `class`; `false` when the cache is full (the
    /// caller frees it to the pool).
    pub(crate) fn keep(&self, ptr: sys::CUdeviceptr, class: usize) -> bool {
        self.free().keep(0, class, ptr).is_ok()
    }

    /// Bytes kept now.
    pub(crate) fn held(&self) -> usize {
        self.free().held()
    }

    /// Gives every kept block back to the pool (stream-ordered); returns the bytes released.
    pub(crate) fn release(&self) -> usize {
        let free = self.free().drain();
        let mut bytes = 0;
        for (class, p) in free {
            // SAFETY: each block came from `cuMemAllocAsync` on this stream and no buffer
            // holds it any more; the free is ordered after the stream's queued work.
            let _ = crate::counts::pool_free(|| unsafe { result::free_async(p, self.stream.cu_stream()) });
            bytes += class;
        }
        bytes
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        // The stream is still alive: this cache holds a reference to it.
        let _ = self.stream.context().bind_to_thread();
        self.release();
    }
}
