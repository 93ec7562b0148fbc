//! Pinned staging of uploads: a pool of page-locked buffers that host bytes pass through on
//! their way to the device.
//!
//! An upload is a list of pieces (at most one buffer each), run on the rayon pool all at once:
//! each thread takes a free buffer (waiting for its last device copy), fills it (one thread per
//! piece: no fork-join per piece), queues its device copy and hands the buffer back. Host copies
//! of many pieces and the device copies of others run at the same time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use gpujoin_device::{DeviceViewMut, PinnedBuffer, Result, Stream};

use crate::host::Offsets;

/// The pinned staging of uploads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingOptions {
    /// Bytes of one pinned buffer (default 8 MiB): the most one device copy carries.
    pub buffer_bytes: usize,
    /// The most pinned buffers of this size in the process (default 64, at least 2): pieces
    /// being filled or copied at once by all uploads together. Buffers are page-locked when
    /// first needed and kept for later uploads.
    pub buffers: usize,
}

impl Default for StagingOptions {
    fn default() -> Self {
        StagingOptions { buffer_bytes: 8 << 20, buffers: 64 }
    }
}

impl StagingOptions {
    /// Page-locks the process's staging buffers of these options for `device` now (until
    /// `buffers` of `buffer_bytes` exist), so that the first upload does not wait for it:
    /// page-locking costs about a millisecond per megabyte and serializes in the driver. Returns
    /// the buffers made (0 when they exist already).
    ///
    /// ```no_run
    /// # fn f(device: &gpujoin_device::Device) -> gpujoin_device::Result<()> {
    /// use gpujoin_arrow::StagingOptions;
    /// let made = StagingOptions::default().prepare(device)?; // 64 x 8 MiB, once per process
    /// assert_eq!(StagingOptions::default().prepare(device)?, 0);
    /// # let _ = made; Ok(()) }
    /// ```
    pub fn prepare(&self, device: &gpujoin_device::Device) -> Result<usize> {
        let key = (device.ordinal(), piece_bytes(self.buffer_bytes));
        let mut made = 0;
        loop {
            {
                let mut st = POOL.state.lock().unwrap_or_else(|p| p.into_inner());
                let m = st.made.entry(key).or_insert(0);
                if *m >= self.buffers.max(2) {
                    return Ok(made);
                }
                *m += 1;
            }
            let b = make_counted(device, key)?;
            POOL.state.lock().unwrap_or_else(|p| p.into_inner()).free.push((key.0, key.1, b));
            POOL.freed.notify_all();
            made += 1;
        }
    }
}

/// A new pinned buffer of `key`'s size, already counted in the pool's `made`; if page-locking
/// fails the count is taken back (and waiters told), so another may try.
fn make_counted(device: &gpujoin_device::Device, key: (usize, usize)) -> Result<PinnedBuffer<u8>> {
    PinnedBuffer::new(device, key.1).inspect_err(|_| {
        let mut st = POOL.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = st.made.get_mut(&key) {
            *m -= 1;
        }
        POOL.freed.notify_all();
    })
}

/// The bytes of one staging buffer for `buffer_bytes` asked for: at least 4 KiB, a multiple of 8.
fn piece_bytes(buffer_bytes: usize) -> usize {
    buffer_bytes.max(1 << 12) / 8 * 8
}

/// The most bytes of each piece of an upload, by its position: the first `wave` pieces take
/// `first` bytes, each later wave twice the last, up to `largest`. The threads start on the
/// first pieces together; small ones let the first device copies start after a short host copy
/// instead of after every thread has filled a whole buffer at once.
///
/// With `first` 256 KiB, `largest` 8 MiB and waves of 2: 256, 256, 512, 512 KiB, 1, 1, 2, 2, 4,
/// 4, 8, 8, 8, ... MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PieceSizes {
    pub(crate) first: usize,
    pub(crate) largest: usize,
    pub(crate) wave: usize,
}

impl PieceSizes {
    /// Every piece of at most `bytes` (a multiple of 8).
    #[cfg(test)]
    pub(crate) fn fixed(bytes: usize) -> PieceSizes {
        PieceSizes { first: bytes, largest: bytes, wave: 1 }
    }

    /// The most bytes of the `k`-th piece: a multiple of 8.
    pub(crate) fn at(&self, k: usize) -> usize {
        let doublings = (k / self.wave.max(1)).min(40) as u32;
        self.first.checked_shl(doublings).unwrap_or(usize::MAX).min(self.largest)
    }
}

/// Bytes of the first pieces of an upload ([`PieceSizes`]).
const FIRST_PIECE_BYTES: usize = 256 << 10;

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
    /// From the start of each upload pass to its first device copy queued, summed over passes
    /// (the device waits for the host this long).
    pub first_copy: Duration,
    /// The staging passes' wall time, from the first piece taken to the last copy queued (the
    /// threads' times above overlap within it).
    pub passes: Duration,
}

/// How bytes of a piece are made.
pub(crate) enum Fill<'a> {
    /// A copy of these bytes.
    Copy(&'a [u8]),
    /// `count` string offsets `src[i0 + j + 1] - first + base`, `src.width()` bytes each.
    Offsets { src: Offsets<'a>, i0: usize, count: usize, first: i64, base: i64 },
}

impl<'a> Fill<'a> {
    fn len(&self) -> usize {
        match self {
            Fill::Copy(s) => s.len(),
            Fill::Offsets { src, count, .. } => count * src.width(),
        }
    }

    /// The first `bytes` and the rest (`bytes` a multiple of the offsets' width for offsets).
    fn split_at(self, bytes: usize) -> (Fill<'a>, Fill<'a>) {
        match self {
            Fill::Copy(s) => (Fill::Copy(&s[..bytes]), Fill::Copy(&s[bytes..])),
            Fill::Offsets { src, i0, count, first, base } => {
                let k = bytes / src.width();
                (Fill::Offsets { src, i0, count: k, first, base }, Fill::Offsets { src, i0: i0 + k, count: count - k, first, base })
            }
        }
    }

    fn write(&self, out: &mut [u8]) {
        match *self {
            Fill::Copy(s) => out.copy_from_slice(s),
            Fill::Offsets { src: Offsets::I32(src), i0, first, base, .. } => {
                for (j, d) in out.chunks_exact_mut(4).enumerate() {
                    d.copy_from_slice(&((src[i0 + j + 1] as i64 - first + base) as i32).to_le_bytes());
                }
            }
            Fill::Offsets { src: Offsets::I64(src), i0, first, base, .. } => {
                for (j, d) in out.chunks_exact_mut(8).enumerate() {
                    d.copy_from_slice(&(src[i0 + j + 1] - first + base).to_le_bytes());
                }
            }
        }
    }
}

/// One device copy: the bytes of its parts, back to back, and where they go.
pub(crate) struct Piece<'a, 'd> {
    parts: Vec<Fill<'a>>,
    dst: DeviceViewMut<'d, u8>,
}

impl<'a, 'd> Piece<'a, 'd> {
    /// Packs `fills` (back to back, exactly `dst.len()` bytes) into pieces of at most
    /// `sizes.at(k)` bytes for the `k`-th piece of `out`: many small batches share one device
    /// copy, a large one is split.
    pub(crate) fn pack(fills: impl IntoIterator<Item = Fill<'a>>, dst: DeviceViewMut<'d, u8>, sizes: PieceSizes, out: &mut Vec<Piece<'a, 'd>>) {
        let mut dst = dst;
        let mut parts = Vec::new();
        let mut len = 0;
        let mut max = sizes.at(out.len());
        for f in fills {
            let mut f = f;
            while f.len() > 0 {
                let room = max - len;
                if f.len() <= room {
                    len += f.len();
                    parts.push(f);
                    break;
                }
                let (a, b) = f.split_at(room);
                parts.push(a);
                len = max;
                f = b;
                let (d, rest) = dst.split_at(len);
                out.push(Piece { parts: std::mem::take(&mut parts), dst: d });
                dst = rest;
                len = 0;
                max = sizes.at(out.len());
            }
            if len == max {
                let (d, rest) = dst.split_at(len);
                out.push(Piece { parts: std::mem::take(&mut parts), dst: d });
                dst = rest;
                len = 0;
                max = sizes.at(out.len());
            }
        }
        if len > 0 {
            let (d, rest) = dst.split_at(len);
            out.push(Piece { parts, dst: d });
            dst = rest;
        }
        debug_assert!(dst.is_empty(), "the fills cover the destination");
    }

    /// [`Piece::pack`], except that a [`Fill::Copy`] whose bytes `direct` accepts (page-locked
    /// ones) is not staged: it goes to `copies` with its own device range, for a direct copy.
    ///
    /// Example: fills `a` (pageable), `b` (pinned), `c` (pageable) into 18 bytes: `a` is staged
    /// into bytes `0..3`, `b` copied directly into `3..13`, `c` staged into `13..18`.
    pub(crate) fn pack_direct(
        fills: impl IntoIterator<Item = Fill<'a>>,
        dst: DeviceViewMut<'d, u8>,
        sizes: PieceSizes,
        direct: impl Fn(&[u8]) -> bool,
        out: &mut Vec<Piece<'a, 'd>>,
        copies: &mut Vec<(&'a [u8], DeviceViewMut<'d, u8>)>,
    ) {
        let mut dst = dst;
        let mut staged: Vec<Fill<'a>> = Vec::new();
        let mut staged_len = 0;
        for f in fills {
            match f {
                Fill::Copy(s) if direct(s) => {
                    let (d, rest) = dst.split_at(staged_len);
                    Piece::pack(std::mem::take(&mut staged), d, sizes, out);
                    let (d, rest) = rest.split_at(s.len());
                    copies.push((s, d));
                    dst = rest;
                    staged_len = 0;
                }
                f => {
                    staged_len += f.len();
                    staged.push(f);
                }
            }
        }
        Piece::pack(staged, dst, sizes, out);
    }

    fn write(&self, out: &mut [u8]) {
        let mut at = 0;
        for p in &self.parts {
            let n = p.len();
            p.write(&mut out[at..at + n]);
            at += n;
        }
    }
}

/// The page-locked buffers of every upload in the process, shared: `(device ordinal, buffer
/// bytes, buffer)` free now, and how many of each `(ordinal, bytes)` exist. Page-locking costs
/// milliseconds per buffer and serializes in the driver, so buffers are made once, only when an
/// upload finds none free and fewer than its [`StagingOptions::buffers`] exist, and then kept;
/// uploads running at once (a query's partitions) wait for each other's buffers instead of
/// page-locking their own.
struct SharedPool {
    state: Mutex<PoolState>,
    freed: Condvar,
}

struct PoolState {
    free: Vec<(usize, usize, PinnedBuffer<u8>)>,
    made: BTreeMap<(usize, usize), usize>,
}

static POOL: SharedPool = SharedPool { state: Mutex::new(PoolState { free: Vec::new(), made: BTreeMap::new() }), freed: Condvar::new() };

/// Frees the staging buffers no upload holds now (every device's); returns their bytes. Uploads
/// after it page-lock buffers again. Buffers held by a running upload are kept.
pub(crate) fn release_free() -> usize {
    let mut st = POOL.state.lock().unwrap_or_else(|p| p.into_inner());
    let free = std::mem::take(&mut st.free);
    let mut bytes = 0;
    for (ordinal, len, b) in free {
        if let Some(m) = st.made.get_mut(&(ordinal, len)) {
            *m = m.saturating_sub(1);
        }
        bytes += len;
        drop(b);
    }
    bytes
}

/// The staging of one uploader: buffers from the shared pool, and where its time went.
pub(crate) struct Staging {
    device: gpujoin_device::Device,
    piece: usize,
    /// The most buffers of this size in the process (the options' `buffers`).
    most: usize,
    waiting: AtomicU64,
    host_copy: AtomicU64,
    issuing: AtomicU64,
    bytes: AtomicU64,
    pieces: AtomicU64,
    first_copy: AtomicU64,
    passes: AtomicU64,
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl Staging {
    pub(crate) fn new(stream: &Stream, options: StagingOptions) -> Result<Staging> {
        Ok(Staging {
            device: stream.device().clone(),
            piece: piece_bytes(options.buffer_bytes),
            most: options.buffers.max(2),
            waiting: AtomicU64::new(0),
            host_copy: AtomicU64::new(0),
            issuing: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            pieces: AtomicU64::new(0),
            first_copy: AtomicU64::new(0),
            passes: AtomicU64::new(0),
        })
    }

    /// The most bytes of each piece of one upload: whole buffers after a ramp of smaller
    /// first pieces, one wave per thread of the upload.
    pub(crate) fn piece_sizes(&self) -> PieceSizes {
        PieceSizes { first: FIRST_PIECE_BYTES.min(self.piece), largest: self.piece, wave: rayon::current_num_threads().min(self.most) }
    }

    pub(crate) fn stats(&self) -> StagingStats {
        let d = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        StagingStats {
            waiting: d(&self.waiting),
            host_copy: d(&self.host_copy),
            issuing: d(&self.issuing),
            bytes: self.bytes.load(Ordering::Relaxed),
            pieces: self.pieces.load(Ordering::Relaxed),
            first_copy: d(&self.first_copy),
            passes: d(&self.passes),
        }
    }

    /// A free buffer of this staging's size from the shared pool: one that is free, else a new
    /// one while fewer than `most` exist, else the next one handed back.
    fn take(&self) -> Result<PinnedBuffer<u8>> {
        let key = (self.device.ordinal(), self.piece);
        let mut st = POOL.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(i) = st.free.iter().rposition(|(o, n, _)| (*o, *n) == key) {
                return Ok(st.free.swap_remove(i).2);
            }
            let made = st.made.entry(key).or_insert(0);
            if *made < self.most {
                *made += 1;
                drop(st);
                return make_counted(&self.device, key);
            }
            st = POOL.freed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give(&self, b: PinnedBuffer<u8>) {
        POOL.state.lock().unwrap_or_else(|p| p.into_inner()).free.push((self.device.ordinal(), self.piece, b));
        POOL.freed.notify_all();
    }

    /// Queues every piece's device copy on `stream` (pieces of at most
    /// [`Staging::piece_sizes`], to disjoint destinations); returns when all are queued. The
    /// threads take the pieces in order, so device copies run roughly in the order of the
    /// pieces and the small first pieces go first.
    pub(crate) fn upload(&self, stream: &Stream, pieces: Vec<Piece<'_, '_>>) -> Result<()> {
        let threads = rayon::current_num_threads().min(self.most).min(pieces.len());
        let queue = Mutex::new(pieces.into_iter());
        let failed: Mutex<Option<gpujoin_device::Error>> = Mutex::new(None);
        let start = Instant::now();
        let first = AtomicU64::new(u64::MAX);
        let stage = |mut p: Piece<'_, '_>| -> Result<()> {
            let t0 = Instant::now();
            let mut slot = self.take()?;
            let r = (|| {
                slot.wait()?;
                let t1 = Instant::now();
                let n = p.dst.len();
                p.write(&mut slot.as_mut_slice()?[..n]);
                let t2 = Instant::now();
                stream.copy_from_pinned_async(&mut slot, &mut p.dst)?;
                first.fetch_min(nanos(t2 - start), Ordering::Relaxed);
                self.waiting.fetch_add(nanos(t1 - t0), Ordering::Relaxed);
                self.host_copy.fetch_add(nanos(t2 - t1), Ordering::Relaxed);
                self.issuing.fetch_add(nanos(t2.elapsed()), Ordering::Relaxed);
                self.bytes.fetch_add(n as u64, Ordering::Relaxed);
                self.pieces.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })();
            self.give(slot);
            r
        };
        rayon::scope(|s| {
            for _ in 0..threads {
                s.spawn(|_| loop {
                    if failed.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                        return;
                    }
                    let Some(p) = queue.lock().unwrap_or_else(|p| p.into_inner()).next() else { return };
                    if let Err(e) = stage(p) {
                        failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                        return;
                    }
                });
            }
        });
        let f = first.load(Ordering::Relaxed);
        if f != u64::MAX {
            self.first_copy.fetch_add(f, Ordering::Relaxed);
        }
        self.passes.fetch_add(nanos(start.elapsed()), Ordering::Relaxed);
        match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces' destinations and contents for `fills` into `len` bytes at a fake address
    /// (packing only splits views; nothing is read or written on a device).
    fn packed(fills: Vec<Fill<'_>>, len: usize, max: usize) -> Vec<(u64, Vec<u8>)> {
        packed_in(fills, len, PieceSizes::fixed(max))
    }

    fn packed_in(fills: Vec<Fill<'_>>, len: usize, sizes: PieceSizes) -> Vec<(u64, Vec<u8>)> {
        // SAFETY: the view is never dereferenced: only split and measured.
        let dst = unsafe { DeviceViewMut::<u8>::from_raw(0x10_0000, len) };
        let mut out = Vec::new();
        Piece::pack(fills, dst, sizes, &mut out);
        out.iter()
            .map(|p| {
                let mut bytes = vec![0u8; p.dst.len()];
                p.write(&mut bytes);
                (p.dst.raw() - 0x10_0000, bytes)
            })
            .collect()
    }

    #[test]
    fn small_fills_share_a_piece_and_large_ones_are_split() {
        let (a, b, c) = ([1u8; 3], [2u8; 10], [3u8; 5]);
        let got = packed(vec![Fill::Copy(&a), Fill::Copy(&b), Fill::Copy(&c)], 18, 8);
        let want: Vec<(u64, Vec<u8>)> = vec![(0, vec![1, 1, 1, 2, 2, 2, 2, 2]), (8, vec![2, 2, 2, 2, 2, 3, 3, 3]), (16, vec![3, 3])];
        assert_eq!(got, want);
        assert!(packed(vec![Fill::Copy(&[]), Fill::Copy(&[])], 0, 8).is_empty());
        assert_eq!(packed(vec![Fill::Copy(&[7u8; 8])], 8, 8), vec![(0, vec![7u8; 8])]);
    }

    #[test]
    fn accepted_fills_are_copied_directly_and_the_rest_staged() {
        let (a, b, c, d) = ([1u8; 3], [2u8; 10], [3u8; 5], [4u8; 4]);
        // SAFETY: never dereferenced, as in `packed_in`.
        let dst = unsafe { DeviceViewMut::<u8>::from_raw(0x10_0000, 22) };
        let (mut out, mut copies) = (Vec::new(), Vec::new());
        let pinned = |s: &[u8]| s.first().is_some_and(|&v| v % 2 == 0);
        Piece::pack_direct([Fill::Copy(&a), Fill::Copy(&b), Fill::Copy(&c), Fill::Copy(&d)], dst, PieceSizes::fixed(4), pinned, &mut out, &mut copies);
        let staged: Vec<(u64, Vec<u8>)> = out
            .iter()
            .map(|p| {
                let mut bytes = vec![0u8; p.dst.len()];
                p.write(&mut bytes);
                (p.dst.raw() - 0x10_0000, bytes)
            })
            .collect();
        assert_eq!(staged, vec![(0, vec![1, 1, 1]), (13, vec![3, 3, 3, 3]), (17, vec![3])]);
        let direct: Vec<(u64, usize, u8)> = copies.iter().map(|(s, d)| (d.raw() - 0x10_0000, d.len(), s[0])).collect();
        assert_eq!(direct, vec![(3, 10, 2), (18, 4, 4)]);
        // Nothing accepted: the same pieces as `pack`.
        let dst = unsafe { DeviceViewMut::<u8>::from_raw(0x10_0000, 18) };
        let (mut out, mut copies) = (Vec::new(), Vec::new());
        Piece::pack_direct([Fill::Copy(&a), Fill::Copy(&b), Fill::Copy(&c)], dst, PieceSizes::fixed(8), |_| false, &mut out, &mut copies);
        assert!(copies.is_empty());
        assert_eq!(out.iter().map(|p| (p.dst.raw() - 0x10_0000, p.dst.len())).collect::<Vec<_>>(), vec![(0, 8), (8, 8), (16, 2)]);
    }

    #[test]
    fn offsets_are_rebased_across_pieces() {
        let o1 = [10i64, 12, 15, 20];
        let o2 = [0i64, 1, 2];
        let fills = vec![
            Fill::Offsets { src: Offsets::I64(&o1), i0: 0, count: 3, first: 10, base: 100 },
            Fill::Offsets { src: Offsets::I64(&o2), i0: 0, count: 2, first: 0, base: 110 },
        ];
        let got: Vec<i64> = packed(fills, 40, 16).into_iter().flat_map(|(_, b)| b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>()).collect();
        assert_eq!(got, vec![102, 105, 110, 111, 112]);
    }

    #[test]
    fn the_first_pieces_ramp_up_to_whole_buffers() {
        let sizes = PieceSizes { first: 8, largest: 64, wave: 2 };
        let at: Vec<usize> = (0..10).map(|k| sizes.at(k)).collect();
        assert_eq!(at, vec![8, 8, 16, 16, 32, 32, 64, 64, 64, 64]);
        assert_eq!(PieceSizes { first: 8, largest: 64, wave: 0 }.at(1000), 64);
        // 200 bytes in two fills: pieces of 8, 8, 16, 16, 32, 32, 64 and the last 24; every byte
        // once, in order.
        let (a, b) = ((0..150u8).collect::<Vec<u8>>(), (150..200u8).collect::<Vec<u8>>());
        let got = packed_in(vec![Fill::Copy(&a), Fill::Copy(&b)], 200, sizes);
        let lens: Vec<usize> = got.iter().map(|(_, b)| b.len()).collect();
        assert_eq!(lens, vec![8, 8, 16, 16, 32, 32, 64, 24]);
        let starts: Vec<u64> = got.iter().map(|(at, _)| *at).collect();
        assert_eq!(starts, vec![0, 8, 16, 32, 48, 80, 112, 176]);
        assert_eq!(got.into_iter().flat_map(|(_, b)| b).collect::<Vec<u8>>(), (0..200u8).collect::<Vec<u8>>());
        // A second column's pieces continue the ramp where the first stopped.
        let mut out = Vec::new();
        // SAFETY: never dereferenced, as in `packed_in`.
        let (d1, d2) = unsafe { (DeviceViewMut::<u8>::from_raw(0x10_0000, 16), DeviceViewMut::<u8>::from_raw(0x20_0000, 100)) };
        Piece::pack([Fill::Copy(&a[..16])], d1, sizes, &mut out);
        Piece::pack([Fill::Copy(&a[..100])], d2, sizes, &mut out);
        assert_eq!(out.iter().map(|p| p.dst.len()).collect::<Vec<_>>(), vec![8, 8, 16, 16, 32, 32, 4]);
    }
}
