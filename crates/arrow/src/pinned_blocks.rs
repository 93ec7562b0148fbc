//! Page-locked blocks that become Arrow buffers: a download copies device bytes straight into a
//! block (at the full device-to-host rate, with no host copy after it), and the Arrow buffer
//! wrapping the block gives it back to a pool when the last batch using it is dropped, so the
//! next download does not pay for page-locking again.
//!
//! Blocks are sized in powers of two (at least 64 KiB); the pool keeps at most
//! [`POOL_MAX_BYTES`] of them per process.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use arrow_buffer::Buffer;
use gpujoin_device::{Device, DeviceView, Error, PinnedBuffer, Result, Stream};

/// Most bytes of free blocks the pool keeps.
pub const POOL_MAX_BYTES: usize = 4 << 30;

const MIN_BLOCK: usize = 1 << 16;

/// A page-locked block of a device's context.
pub(crate) struct Block {
    buf: PinnedBuffer<u8>,
    ordinal: usize,
}

struct Pool {
    free: Vec<Block>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { free: Vec::new(), bytes: 0 });

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The size class of a block of at least `len` bytes.
pub(crate) fn size_class(len: usize) -> Result<usize> {
    len.max(MIN_BLOCK).checked_next_power_of_two().ok_or_else(|| Error::too_large("pinned block bytes", len as u64, usize::MAX as u64))
}

/// Makes free blocks of at least `len` bytes for `device` until `count` of their size class are
/// free (within [`POOL_MAX_BYTES`]); returns the bytes page-locked.
pub(crate) fn prepare(device: &Device, len: usize, count: usize) -> Result<usize> {
    let size = size_class(len)?;
    let ordinal = device.ordinal();
    let mut made = 0;
    loop {
        {
            let p = pool();
            let free = p.free.iter().filter(|b| b.ordinal == ordinal && b.buf.len() == size).count();
            if free >= count || p.bytes + size > POOL_MAX_BYTES {
                return Ok(made);
            }
        }
        give_back(Block { buf: PinnedBuffer::new(device, size)?, ordinal });
        made += size;
    }
}

/// A block of at least `len` bytes for `stream`'s device: a free one of the right size class,
/// or a new one.
pub(crate) fn take(stream: &Stream, len: usize) -> Result<Block> {
    let size = size_class(len)?;
    let ordinal = stream.device().ordinal();
    {
        let mut p = pool();
        if let Some(i) = p.free.iter().position(|b| b.ordinal == ordinal && b.buf.len() == size) {
            let b = p.free.swap_remove(i);
            p.bytes -= size;
            return Ok(b);
        }
    }
    Ok(Block { buf: PinnedBuffer::new(stream.device(), size)?, ordinal })
}

/// Frees the pool's free blocks (every device's); returns their bytes. Blocks that Arrow
/// buffers still use come back to the pool when those are dropped.
pub(crate) fn release_free() -> usize {
    let mut p = pool();
    let bytes = p.bytes;
    p.free.clear();
    p.bytes = 0;
    bytes
}

fn give_back(b: Block) {
    let mut p = pool();
    if p.bytes + b.buf.len() <= POOL_MAX_BYTES {
        p.bytes += b.buf.len();
        p.free.push(b);
    }
}

/// Owns a block while an Arrow buffer points into it.
struct Owner(Mutex<Option<Block>>);

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(b) = self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            give_back(b);
        }
    }
}

impl Block {
    /// Queues the copy of `src` into the start of the block on `stream`.
    pub(crate) fn fill_from(&mut self, stream: &Stream, src: &DeviceView<'_, u8>) -> Result<()> {
        stream.copy_to_pinned_async(src, &mut self.buf, 0)
    }

    /// The first `len` bytes, for writing, once the copy into the block finished.
    pub(crate) fn as_mut_slice(&mut self, len: usize) -> Result<&mut [u8]> {
        Ok(&mut self.buf.as_mut_slice()?[..len])
    }

    /// The first `len` bytes, once the copy into the block finished.
    pub(crate) fn as_slice(&mut self, len: usize) -> Result<&[u8]> {
        self.buf.prefix(len)
    }

    /// Returns the block to the pool (a block merely dropped frees its memory).
    pub(crate) fn recycle(self) {
        give_back(self)
    }

    /// The first `len` bytes as an Arrow buffer that gives the block back when dropped.
    pub(crate) fn into_buffer(mut self, len: usize) -> Result<Buffer> {
        let ptr = self.buf.as_mut_slice()?.as_mut_ptr();
        let ptr = NonNull::new(ptr).expect("a pinned block is never null");
        // SAFETY: `len` bytes at `ptr` are initialized (the copy into the block finished above),
        // stay allocated while the owner lives (the Arc the buffer holds), and are never written
        // again while shared: the block returns to the pool only when the owner drops.
        Ok(unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(Owner(Mutex::new(Some(self))))) })
    }
}
