//! Pinned staging of uploads: a pool of page-locked buffers that host bytes pass through on
//! their way to the device.
//!
//! An upload is a list of pieces (at most one buffer each), run on the rayon pool all at once:
//! each thread takes a free buffer (waiting for its last device copy), fills it (one thread per
//! piece: no fork-join per piece), queues its device copy and hands the buffer back. Host copies
//! of many pieces and the device copies of others run at the same time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use gpujoin_device::{DeviceViewMut, PinnedBuffer, Result, Stream};
use rayon::prelude::*;

use crate::host::Offsets;

/// The pinned staging of uploads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingOptions {
    /// Bytes of one pinned buffer (default 8 MiB): the most one device copy carries.
    pub buffer_bytes: usize,
    /// Buffers in the pool (default 32, at least 2): pieces being filled or copied at once.
    pub buffers: usize,
}

impl Default for StagingOptions {
    fn default() -> Self {
        StagingOptions { buffer_bytes: 8 << 20, buffers: 32 }
    }
}

/// Where the staging's host time went, summed over the threads that staged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StagingStats {
    /// Waiting for a pinned buffer: free ones, or their previous device copy (the device is
    /// behind).
    pub waiting: Duration,
    /// Filling pinned buffers (the host is behind).
    pub host_copy: Duration,
    /// Queueing device copies.
    pub issuing: Duration,
    /// Bytes staged and the pieces they went in.
    pub bytes: u64,
    pub pieces: u64,
}

/// How a piece's bytes are made.
pub(crate) enum Fill<'a> {
    /// A copy of these bytes.
    Copy(&'a [u8]),
    /// `count` string offsets `src[i0 + j + 1] - first + base` (`width` bytes each).
    Offsets { src: Offsets<'a>, i0: usize, first: i64, base: i64 },
}

/// One device copy: its bytes and where they go.
pub(crate) struct Piece<'a, 'd> {
    pub fill: Fill<'a>,
    pub dst: DeviceViewMut<'d, u8>,
}

impl<'a, 'd> Piece<'a, 'd> {
    /// Pieces of at most `max` bytes for `fill` (of `dst.len()` bytes) into `dst`.
    pub(crate) fn split(fill: Fill<'a>, dst: DeviceViewMut<'d, u8>, max: usize, out: &mut Vec<Piece<'a, 'd>>) {
        let (mut fill, mut dst) = (fill, dst);
        while dst.len() > max {
            let (head, tail) = dst.split_at(max);
            let (a, b) = match fill {
                Fill::Copy(s) => (Fill::Copy(&s[..max]), Fill::Copy(&s[max..])),
                Fill::Offsets { src, i0, first, base } => {
                    let k = max / src.width();
                    (Fill::Offsets { src, i0, first, base }, Fill::Offsets { src, i0: i0 + k, first, base })
                }
            };
            out.push(Piece { fill: a, dst: head });
            fill = b;
            dst = tail;
        }
        if !dst.is_empty() {
            out.push(Piece { fill, dst });
        }
    }

    fn write(&self, out: &mut [u8]) {
        match self.fill {
            Fill::Copy(s) => out.copy_from_slice(s),
            Fill::Offsets { src: Offsets::I32(src), i0, first, base } => {
                for (j, d) in out.chunks_exact_mut(4).enumerate() {
                    d.copy_from_slice(&((src[i0 + j + 1] as i64 - first + base) as i32).to_le_bytes());
                }
            }
            Fill::Offsets { src: Offsets::I64(src), i0, first, base } => {
                for (j, d) in out.chunks_exact_mut(8).enumerate() {
                    d.copy_from_slice(&(src[i0 + j + 1] - first + base).to_le_bytes());
                }
            }
        }
    }
}

/// Pinned buffers of finished stagings, kept for the next one (page-locking costs milliseconds
/// per buffer): `(device ordinal, buffer)`, at most [`POOL_MAX`] of them.
static POOL: Mutex<Vec<(usize, PinnedBuffer<u8>)>> = Mutex::new(Vec::new());

/// Most pinned buffers kept for reuse (2 stagings' worth of the default options: 512 MiB).
const POOL_MAX: usize = 64;

/// The pool of pinned buffers of one uploader.
pub(crate) struct Staging {
    free: Mutex<Vec<PinnedBuffer<u8>>>,
    freed: Condvar,
    piece: usize,
    ordinal: usize,
    waiting: AtomicU64,
    host_copy: AtomicU64,
    issuing: AtomicU64,
    bytes: AtomicU64,
    pieces: AtomicU64,
}

impl Drop for Staging {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|p| p.into_inner()));
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        for b in free {
            if pool.len() < POOL_MAX {
                pool.push((self.ordinal, b));
            }
        }
    }
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl Staging {
    pub(crate) fn new(stream: &Stream, options: StagingOptions) -> Result<Staging> {
        let piece = options.buffer_bytes.max(1 << 12);
        let count = options.buffers.max(2);
        let ordinal = stream.device().ordinal();
        let mut ring = Vec::with_capacity(count);
        {
            let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
            while ring.len() < count {
                match pool.iter().position(|(o, b)| *o == ordinal && b.len() == piece) {
                    Some(i) => ring.push(pool.swap_remove(i).1),
                    None => break,
                }
            }
        }
        while ring.len() < count {
            ring.push(PinnedBuffer::new(stream.device(), piece)?);
        }
        Ok(Staging {
            free: Mutex::new(ring),
            freed: Condvar::new(),
            piece,
            ordinal,
            waiting: AtomicU64::new(0),
            host_copy: AtomicU64::new(0),
            issuing: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            pieces: AtomicU64::new(0),
        })
    }

    /// The most bytes of one piece.
    pub(crate) fn piece_bytes(&self) -> usize {
        self.piece
    }

    pub(crate) fn stats(&self) -> StagingStats {
        let d = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        StagingStats {
            waiting: d(&self.waiting),
            host_copy: d(&self.host_copy),
            issuing: d(&self.issuing),
            bytes: self.bytes.load(Ordering::Relaxed),
            pieces: self.pieces.load(Ordering::Relaxed),
        }
    }

    fn take(&self) -> PinnedBuffer<u8> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(b) = free.pop() {
                return b;
            }
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give(&self, b: PinnedBuffer<u8>) {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).push(b);
        self.freed.notify_one();
    }

    /// Queues every piece's device copy on `stream` (pieces of at most
    /// [`Staging::piece_bytes`], to disjoint destinations); returns when all are queued.
    pub(crate) fn upload(&self, stream: &Stream, pieces: Vec<Piece<'_, '_>>) -> Result<()> {
        pieces.into_par_iter().try_for_each(|mut p| -> Result<()> {
            let t0 = Instant::now();
            let mut slot = self.take();
            let r = (|| {
                slot.wait()?;
                let t1 = Instant::now();
                let n = p.dst.len();
                p.write(&mut slot.as_mut_slice()?[..n]);
                let t2 = Instant::now();
                stream.copy_from_pinned_async(&mut slot, &mut p.dst)?;
                self.waiting.fetch_add(nanos(t1 - t0), Ordering::Relaxed);
                self.host_copy.fetch_add(nanos(t2 - t1), Ordering::Relaxed);
                self.issuing.fetch_add(nanos(t2.elapsed()), Ordering::Relaxed);
                self.bytes.fetch_add(n as u64, Ordering::Relaxed);
                self.pieces.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })();
            self.give(slot);
            r
        })
    }
}
