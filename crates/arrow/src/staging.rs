//! Pinned staging of uploads: a ring of page-locked buffers that host bytes pass through on
//! their way to the device. The host copy into one buffer overlaps the device copies out of the
//! others; host copies of a piece are split over the rayon pool.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use gpujoin_device::{DeviceViewMut, HostRegistration, PinnedBuffer, Result, Stream};
use rayon::prelude::*;

/// The pinned staging of uploads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingOptions {
    /// Bytes of one pinned buffer (default 32 MiB): the unit of one device copy.
    pub buffer_bytes: usize,
    /// Buffers in the ring (default 4, at least 2).
    pub buffers: usize,
    /// Input buffers of at least this many bytes are page-locked in place (`cuMemHostRegister`)
    /// for the copy instead of passing through the ring (0, the default: never). Registration
    /// avoids the host copy but costs a page-locking pass; measured in the `arrow` bench.
    pub register_min_bytes: usize,
}

impl Default for StagingOptions {
    fn default() -> Self {
        StagingOptions { buffer_bytes: 32 << 20, buffers: 4, register_min_bytes: 0 }
    }
}

/// The ring of pinned buffers.
pub(crate) struct Staging {
    ring: Vec<PinnedBuffer<u8>>,
    next: usize,
    piece: usize,
    ordinal: usize,
    register_min: usize,
    pub(crate) stats: StagingStats,
}

/// Where the time of the staged uploads went (host clocks).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StagingStats {
    /// Waiting for a pinned buffer's previous device copy to finish (the device is behind).
    pub waiting: Duration,
    /// Copying into pinned buffers (the host is behind).
    pub host_copy: Duration,
    /// Queueing device copies.
    pub issuing: Duration,
    /// Bytes staged and pieces they went in.
    pub bytes: u64,
    pub pieces: u64,
}

impl Drop for Staging {
    fn drop(&mut self) {
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        for b in self.ring.drain(..) {
            if pool.len() < POOL_MAX {
                pool.push((self.ordinal, b));
            }
        }
    }
}

/// Host copies below this many bytes stay on the calling thread; larger ones are split into
/// parts of at least half of it, over every thread of the rayon pool.
const PARALLEL_COPY_MIN: usize = 256 << 10;

/// `dst.copy_from_slice(src)`, split over the rayon pool when large.
pub(crate) fn par_copy(dst: &mut [u8], src: &[u8]) {
    if src.len() < PARALLEL_COPY_MIN {
        dst.copy_from_slice(src);
        return;
    }
    let chunk = src.len().div_ceil(rayon::current_num_threads()).max(PARALLEL_COPY_MIN / 2);
    dst.par_chunks_mut(chunk).zip(src.par_chunks(chunk)).for_each(|(d, s)| d.copy_from_slice(s));
}

/// Pinned buffers of finished stagings, kept for the next one (page-locking costs milliseconds
/// per buffer): `(device ordinal, buffer)`, at most [`POOL_MAX`] of them.
static POOL: Mutex<Vec<(usize, PinnedBuffer<u8>)>> = Mutex::new(Vec::new());

/// Most pinned buffers kept for reuse (4 stagings' worth of the default options: 512 MiB).
const POOL_MAX: usize = 16;

impl Staging {
    pub(crate) fn new(stream: &Stream, options: StagingOptions) -> Result<Staging> {
        let piece = options.buffer_bytes.max(1 << 16);
        let ordinal = stream.device().ordinal();
        let mut ring = Vec::with_capacity(options.buffers.max(2));
        {
            let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
            while ring.len() < options.buffers.max(2) {
                match pool.iter().position(|(o, b)| *o == ordinal && b.len() == piece) {
                    Some(i) => ring.push(pool.swap_remove(i).1),
                    None => break,
                }
            }
        }
        while ring.len() < options.buffers.max(2) {
            ring.push(PinnedBuffer::new(stream.device(), piece)?);
        }
        Ok(Staging { ring, next: 0, piece, ordinal, register_min: options.register_min_bytes, stats: StagingStats::default() })
    }

    /// Queues the copy of `src` into `dst` (same length): each piece is copied into the next
    /// pinned buffer (after that buffer's previous device copy finished) and sent on `stream`.
    pub(crate) fn upload(&mut self, stream: &Stream, src: &[u8], dst: DeviceViewMut<'_, u8>) -> Result<()> {
        self.upload_with(stream, src.len(), dst, |start, out| par_copy(out, &src[start..start + out.len()]))
    }

    /// As [`Staging::upload`], but a source of at least the registration threshold is copied
    /// straight from its own memory, page-locked in place; the registration is returned (keep it
    /// until the copies may finish: dropping it waits for them). A source the driver will not
    /// register (e.g. on a page registered already) goes through the ring.
    pub(crate) fn upload_registering<'s>(&mut self, stream: &Stream, src: &'s [u8], mut dst: DeviceViewMut<'_, u8>) -> Result<Option<HostRegistration<'s>>> {
        if self.register_min > 0 && src.len() >= self.register_min {
            if let Ok(mut r) = HostRegistration::new(stream.device(), src) {
                stream.copy_from_registered_async(&mut r, 0, &mut dst)?;
                return Ok(Some(r));
            }
        }
        self.upload(stream, src, dst)?;
        Ok(None)
    }

    /// As [`Staging::upload`] for bytes made on the fly: `fill(start, out)` writes bytes
    /// `start .. start + out.len()` of the `len` bytes to send.
    pub(crate) fn upload_with(&mut self, stream: &Stream, len: usize, mut dst: DeviceViewMut<'_, u8>, mut fill: impl FnMut(usize, &mut [u8])) -> Result<()> {
        gpujoin_device::check_same_len("staged bytes", len, "device destination", dst.len())?;
        let mut start = 0;
        while start < len {
            let n = self.piece.min(len - start);
            let k = self.next;
            self.next = (k + 1) % self.ring.len();
            let slot = &mut self.ring[k];
            let t0 = Instant::now();
            slot.wait()?;
            let t1 = Instant::now();
            fill(start, &mut slot.as_mut_slice()?[..n]);
            let t2 = Instant::now();
            stream.copy_from_pinned_async(slot, &mut dst.slice_mut(start..start + n))?;
            self.stats.waiting += t1 - t0;
            self.stats.host_copy += t2 - t1;
            self.stats.issuing += t2.elapsed();
            self.stats.bytes += n as u64;
            self.stats.pieces += 1;
            start += n;
        }
        Ok(())
    }
}
