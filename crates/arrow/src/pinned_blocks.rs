//! Page-locked blocks that become Arrow buffers: a download copies device bytes straight into a
//! block (at the full device-to-host rate, with no host copy after it), and the Arrow buffer
//! wrapping the block gives it back to a pool when the last batch using it is dropped, so the
//! next download does not pay for page-locking again.
//!
//! Blocks are sized in powers of two (at least 64 KiB); the pool keeps at most
//! [`POOL_MAX_BYTES`] of them per process.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use arrow_buffer::Buffer;
use gpujoin_device::{Device, DeviceView, Error, PinnedBuffer, Result, SizeClassFreeList, Stream};

/// Most bytes of free blocks the pool keeps.
pub const POOL_MAX_BYTES: usize = 4 << 30;

const MIN_BLOCK: usize = 1 << 16;

/// A page-locked block of a device's context.
pub(crate) struct Block {
    buf: PinnedBuffer<u8>,
    ordinal: usize,
}

/// The free blocks, by device ordinal and size class.
static POOL: Mutex<SizeClassFreeList<Block>> = Mutex::new(SizeClassFreeList::new(POOL_MAX_BYTES));

fn pool() -> std::sync::MutexGuard<'static, SizeClassFreeList<Block>> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The size class of a block of at least `len` bytes.
pub(crate) fn size_class(len: usize) -> Result<usize> {
    gpujoin_device::size_class(len, MIN_BLOCK).ok_or_else(|| Error::too_large("pinned block bytes", len as u64, usize::MAX as u64))
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
            if p.count(ordinal, size) >= count || p.held() + size > p.capacity() {
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
    let kept = pool().take(ordinal, size);
    match kept {
        Some(b) => Ok(b),
        None => Ok(Block { buf: PinnedBuffer::new(stream.device(), size)?, ordinal }),
    }
}

/// Frees the pool's free blocks (every device's); returns their bytes. Blocks that Arrow
/// buffers still use come back to the pool when those are dropped.
pub(crate) fn release_free() -> usize {
    // Taken under the lock, freed after it.
    let blocks = pool().drain();
    blocks.iter().map(|(class, _)| class).sum()
}

/// Keeps `b` in the pool, or frees it when the pool is full.
fn give_back(b: Block) {
    let (ordinal, class) = (b.ordinal, b.buf.len());
    // A block the pool has no room for is freed here, after the lock.
    let rejected = pool().keep(ordinal, class, b);
    drop(rejected);
}

/// The blocks Arrow buffers use now: start address -> (end address, device ordinal). Uploads
/// copy bytes inside one of them straight to the device (no staging copy on the host).
static SHARED: Mutex<BTreeMap<usize, (usize, usize)>> = Mutex::new(BTreeMap::new());

fn shared() -> std::sync::MutexGuard<'static, BTreeMap<usize, (usize, usize)>> {
    SHARED.lock().unwrap_or_else(|p| p.into_inner())
}

/// True when all of `bytes` lie in one block that an Arrow buffer uses now, page-locked for
/// device `ordinal`: a device copy can read them directly.
///
/// Example: the values of a downloaded batch are (its block is alive while the batch is), a
/// `Vec`'s bytes are not, and neither is a range that runs past a block's end.
pub(crate) fn is_pinned_for(bytes: &[u8], ordinal: usize) -> bool {
    if bytes.is_empty() {
        return false;
    }
    let (start, end) = (bytes.as_ptr() as usize, bytes.as_ptr() as usize + bytes.len());
    shared().range(..=start).next_back().is_some_and(|(_, &(block_end, o))| end <= block_end && o == ordinal)
}

/// Owns a block while an Arrow buffer points into it; `recycle`: back to the pool when the
/// buffer is dropped (a download's blocks), else freed (`to_pinned`'s: inputs of any size, which
/// would fill the pool with sizes downloads do not take).
struct Owner {
    block: Mutex<Option<Block>>,
    recycle: bool,
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(mut b) = self.block.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            if let Ok(s) = b.buf.as_mut_slice() {
                shared().remove(&(s.as_ptr() as usize));
            }
            if self.recycle {
                give_back(b);
            }
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
    pub(crate) fn into_buffer(self, len: usize) -> Result<Buffer> {
        self.into_buffer_with(len, true)
    }

    /// [`Block::into_buffer`]; `recycle: false` frees the block when the buffer is dropped
    /// instead of pooling it.
    fn into_buffer_with(mut self, len: usize, recycle: bool) -> Result<Buffer> {
        let ptr = self.buf.as_mut_slice()?.as_mut_ptr();
        let ptr = NonNull::new(ptr).expect("a pinned block is never null");
        shared().insert(ptr.as_ptr() as usize, (ptr.as_ptr() as usize + self.buf.len(), self.ordinal));
        // SAFETY: `len` bytes at `ptr` are initialized (the copy into the block finished above),
        // stay allocated while the owner lives (the Arc the buffer holds), and are never written
        // again while shared: the block returns to the pool only when the owner drops.
        Ok(unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(Owner { block: Mutex::new(Some(self)), recycle })) })
    }
}

/// `batch` with every buffer copied into page-locked blocks of `stream`'s device (freed when the
/// batch's buffers are dropped). Uploading such a batch to that device
/// copies its bytes directly, at the pinned rate with no staging copy on the host; so does
/// uploading a batch a download returned. Worth it for inputs uploaded more than once (a
/// dimension table joined by many queries); a single upload stages at about the same cost.
///
/// ```no_run
/// # fn f(stream: &gpujoin_device::Stream, batch: arrow_array::RecordBatch) -> gpujoin_device::Result<()> {
/// let pinned = gpujoin_arrow::to_pinned(stream, &batch)?;
/// assert_eq!(pinned, batch); // the same values, in page-locked memory
/// # Ok(()) }
/// ```
pub fn to_pinned(stream: &Stream, batch: &arrow_array::RecordBatch) -> Result<arrow_array::RecordBatch> {
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (f, a) in batch.schema().fields().iter().zip(batch.columns()) {
        let mut data = a.to_data();
        // A slice that shares larger buffers (a string array's values, a dictionary's) is
        // compacted first: only its own bytes are page-locked.
        let own = data.get_slice_memory_size().unwrap_or(usize::MAX);
        if own < data.get_buffer_memory_size() {
            let mut m = arrow_data::transform::MutableArrayData::new(vec![&data], false, data.len());
            m.try_extend(0, 0, data.len()).map_err(|e| Error::invalid(format!("compacting column {:?}: {e}", f.name())))?;
            data = m.freeze();
        }
        let data = pin_data(stream, data).map_err(|e| Error::invalid(format!("page-locking column {:?}: {e}", f.name())))?;
        columns.push(arrow_array::make_array(data));
    }
    arrow_array::RecordBatch::try_new(batch.schema(), columns).map_err(|e| Error::invalid(format!("page-locking a batch: {e}")))
}

/// `data` with its buffers, validity and children (a dictionary's values) copied into blocks.
fn pin_data(stream: &Stream, data: arrow_data::ArrayData) -> Result<arrow_data::ArrayData> {
    let copy = |b: &Buffer| -> Result<Buffer> {
        if b.is_empty() {
            return Ok(b.clone());
        }
        let mut block = take(stream, b.len())?;
        block.as_mut_slice(b.len())?.copy_from_slice(b.as_slice());
        block.into_buffer_with(b.len(), false)
    };
    let buffers = data.buffers().iter().map(copy).collect::<Result<Vec<_>>>()?;
    let nulls = match data.nulls() {
        Some(n) => Some(arrow_buffer::NullBuffer::new(arrow_buffer::BooleanBuffer::new(copy(n.buffer())?, n.offset(), n.len()))),
        None => None,
    };
    let children = data.child_data().iter().map(|c| pin_data(stream, c.clone())).collect::<Result<Vec<_>>>()?;
    data.into_builder().buffers(buffers).nulls(nulls).child_data(children).build().map_err(|e| Error::invalid(e.to_string()))
}
