//! Device-to-host streaming of a chunked join (seed 004 §3.3.1: pinned host memory for the
//! partial results of each iteration, their transfer hidden behind the device's work).
//!
//! Two streams: the *compute* stream produces chunk `k + 1` while the *copy* stream moves chunk
//! `k` into one of `depth` pinned buffers; an event orders each copy after its chunk's
//! production, and a chunk's device memory is released (stream-ordered, on the compute stream)
//! only after its copy. The caller's callback reads chunk `k` from pinned memory while the
//! device is busy with the chunks after it. At most `depth` chunks are alive on the device.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Instant;

use gpujoin_device::{Error, Event, PinnedBuffer, Result, Stream};

use super::{plan_ramped, ChunkBudget, ChunkOutput, ChunkPart, ChunkSource};
use crate::types::RowId;

/// Options of [`stream_to_host`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostStreamOptions {
    /// Pinned buffers, and chunks in flight (at least 2: one copied while the next is produced).
    pub depth: usize,
    /// The first chunk holds at most `1 / first_chunk_divisor` of the budget's rows, so that
    /// the first copy starts after a short production instead of a whole chunk's (0 or 1:
    /// all chunks alike). Default 8.
    pub first_chunk_divisor: u64,
}

impl Default for HostStreamOptions {
    fn default() -> Self {
        HostStreamOptions { depth: 2, first_chunk_divisor: 8 }
    }
}

/// One chunk in host memory, borrowed from a pinned buffer for the duration of the callback.
pub struct HostChunk<'a> {
    /// Position of the chunk in the plan.
    pub index: usize,
    /// Its output rows, as positions in the whole output.
    pub output: Range<u64>,
    /// The chunk's columns as bytes ([`super::ChunkOutput::byte_columns`]'s order), each
    /// starting 16-byte aligned.
    pub columns: Vec<&'a [u8]>,
}

impl<'a> HostChunk<'a> {
    /// Output rows in the chunk.
    pub fn rows(&self) -> u64 {
        self.output.end - self.output.start
    }

    /// Column `i` as values of `T` (its bytes must be a whole number of `T`s).
    pub fn column<T: bytemuck::Pod>(&self, i: usize) -> Result<&'a [T]> {
        let bytes = self.columns.get(i).ok_or_else(|| Error::invalid(format!("column {i} of a chunk with {}", self.columns.len())))?;
        bytemuck::try_cast_slice(bytes).map_err(|e| Error::invalid(format!("column {i} as {}: {e}", std::any::type_name::<T>())))
    }

    /// The left and right maps of a [`crate::GatherMaps`] chunk (an absent map is empty).
    pub fn maps(&self) -> Result<(&'a [RowId], &'a [RowId])> {
        Ok((self.column::<RowId>(0)?, self.column::<RowId>(1)?))
    }
}

/// What a streaming run did, with the device time of each side of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StreamStats {
    /// Chunks delivered.
    pub chunks: usize,
    /// Output rows delivered.
    pub rows: u64,
    /// Bytes copied to the host.
    pub bytes: u64,
    /// Budget in bytes per chunk and the rows per chunk it gave.
    pub budget_bytes: u64,
    pub rows_per_chunk: u64,
    /// Device time producing chunks (sum over chunks, compute stream).
    pub compute_ms: f64,
    /// Device time copying chunks to the host (sum over chunks, copy stream).
    pub copy_ms: f64,
    /// Device time from the first chunk's production to the last copy's end.
    pub device_ms: f64,
    /// Host time of the whole call (planning included).
    pub wall_ms: f64,
    /// Host time of the planning (before the first chunk).
    pub plan_ms: f64,
}

impl StreamStats {
    /// The fraction of the shorter side (compute or copy) hidden under the other:
    /// `(compute + copy - device) / min(compute, copy)`, in `[0, 1]` (1: perfect overlap, 0:
    /// none). 0 when there was nothing to overlap.
    pub fn overlap(&self) -> f64 {
        let shorter = self.compute_ms.min(self.copy_ms);
        if shorter <= 0.0 {
            return 0.0;
        }
        ((self.compute_ms + self.copy_ms - self.device_ms) / shorter).clamp(0.0, 1.0)
    }

    /// Rows per second over the device time.
    pub fn rows_per_s(&self) -> f64 {
        if self.device_ms > 0.0 {
            self.rows as f64 / (self.device_ms * 1e-3)
        } else {
            0.0
        }
    }

    /// Copy bandwidth achieved (bytes per second of copy-stream time).
    pub fn copy_bytes_per_s(&self) -> f64 {
        if self.copy_ms > 0.0 {
            self.bytes as f64 / (self.copy_ms * 1e-3)
        } else {
            0.0
        }
    }
}

const ALIGN: usize = 16;

/// A chunk whose copy is queued.
struct InFlight<O> {
    index: usize,
    output: Range<u64>,
    /// Kept alive until its copy is done.
    device: O,
    pinned: PinnedBuffer<u8>,
    /// (start, length) of each column in `pinned`.
    layout: Vec<(usize, usize)>,
    compute: (Event, Event),
    copy: (Event, Event),
}

/// The chunks in flight; on drop (an early return) waits for the copy stream first, so no copy
/// reads released device memory or writes a freed pinned buffer.
struct Pipeline<O> {
    copy: Stream,
    items: VecDeque<InFlight<O>>,
}

impl<O> Drop for Pipeline<O> {
    fn drop(&mut self) {
        let _ = self.copy.synchronize();
    }
}

/// Produces every chunk of `source` on `stream` and streams it into pinned host memory,
/// calling `consume` with each chunk in output order (borrowed slices, valid during the call).
/// Chunk `k`'s copy overlaps chunk `k + 1`'s production; see [`StreamStats::overlap`].
///
/// ```no_run
/// # use gpujoin_join::chunked::*;
/// # fn f(s: &gpujoin_device::Stream, source: &EquiChunkSource) -> gpujoin_device::Result<()> {
/// let mut all = Vec::new();
/// let stats = stream_to_host(s, source, ChunkBudget::Bytes(1 << 30), HostStreamOptions::default(), |c| {
///     all.extend_from_slice(c.maps()?.1);
///     Ok(())
/// })?;
/// assert_eq!(all.len() as u64, stats.rows);
/// # Ok(()) }
/// ```
pub fn stream_to_host<S: ChunkSource>(
    stream: &Stream,
    source: &S,
    budget: ChunkBudget,
    options: HostStreamOptions,
    consume: impl FnMut(HostChunk<'_>) -> Result<()>,
) -> Result<StreamStats> {
    HostStreamer::new(stream.device(), options)?.run(stream, source, budget, consume)
}

/// The copy stream and pinned buffers of [`stream_to_host`], kept for reuse: page-locked
/// allocations are slow (tens of milliseconds per GiB), so a caller streaming several joins
/// keeps one streamer.
pub struct HostStreamer {
    copy: Stream,
    buffers: Vec<PinnedBuffer<u8>>,
    options: HostStreamOptions,
}

impl HostStreamer {
    /// A streamer with its own copy stream; pinned buffers are allocated on first use.
    pub fn new(device: &gpujoin_device::Device, options: HostStreamOptions) -> Result<Self> {
        Ok(HostStreamer { copy: device.new_stream()?, buffers: Vec::new(), options })
    }

    /// Pinned bytes held for reuse.
    pub fn pinned_bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.len() as u64).sum()
    }

    /// [`stream_to_host`] with this streamer's copy stream and pinned buffers.
    pub fn run<S: ChunkSource>(
        &mut self,
        stream: &Stream,
        source: &S,
        budget: ChunkBudget,
        mut consume: impl FnMut(HostChunk<'_>) -> Result<()>,
    ) -> Result<StreamStats> {
        let mut free = std::mem::take(&mut self.buffers);
        let r = self.run_with(stream, source, budget, &mut free, &mut consume);
        self.buffers = free;
        r
    }

    fn run_with<S: ChunkSource>(
        &mut self,
        stream: &Stream,
        source: &S,
        budget: ChunkBudget,
        free: &mut Vec<PinnedBuffer<u8>>,
        mut consume: impl FnMut(HostChunk<'_>) -> Result<()>,
    ) -> Result<StreamStats> {
        let options = self.options;
        let started = Instant::now();
        let depth = options.depth.max(2);
        let budget_bytes = budget.resolve_for_host(stream.device())?;
        let plan = plan_ramped(stream, source, budget_bytes, options.first_chunk_divisor)?;
        let mut stats = StreamStats { budget_bytes, rows_per_chunk: plan.rows_per_chunk, ..StreamStats::default() };
        stats.plan_ms = started.elapsed().as_secs_f64() * 1e3;
        let compute = stream;
        let mut pipe: Pipeline<S::Output> = Pipeline { copy: self.copy.clone(), items: VecDeque::new() };
        // Pinned buffers sized for the largest planned chunk (fixed-width columns; grown if not).
        let largest_rows = (0..plan.chunks.len()).map(|k| plan.output_range(k)).map(|r| r.end - r.start).max().unwrap_or(0);
        let largest = usize::try_from(largest_rows.saturating_mul(source.bytes_per_row()))
            .map_err(|_| Error::too_large("pinned chunk bytes", largest_rows, usize::MAX as u64))?
            .saturating_add(4 * ALIGN);
        let first_start = compute.record_timed_event()?;

        for (k, part) in plan.chunks.iter().enumerate() {
            if pipe.items.len() >= depth {
                let done = pipe.items.pop_front().unwrap();
                free.push(finish(compute, done, &mut stats, &mut consume)?);
            }
            // Produce chunk k on the compute stream.
            let c0 = compute.record_timed_event()?;
            let device = match part {
                ChunkPart::Rows(c) => source.produce(compute, c)?,
                ChunkPart::Tail(t) => source.produce_tail(compute, t.clone())?,
            };
            let c1 = compute.record_timed_event()?;
            // Lay its columns out in a pinned buffer (grown when too small).
            let columns = device.byte_columns();
            let mut layout = Vec::with_capacity(columns.len());
            let mut need = 0usize;
            for c in &columns {
                layout.push((need, c.len()));
                need = (need + c.len()).next_multiple_of(ALIGN);
            }
            let mut pinned = match free.pop() {
                Some(p) if p.len() >= need => p,
                _ => PinnedBuffer::<u8>::new(stream.device(), need.max(largest))?,
            };
            // Copy it on the copy stream, after its production.
            pipe.copy.wait_event(&c1)?;
            let k0 = pipe.copy.record_timed_event()?;
            for (c, &(at, _)) in columns.iter().zip(&layout) {
                pipe.copy.copy_to_pinned_async(c, &mut pinned, at)?;
            }
            let k1 = pipe.copy.record_timed_event()?;
            drop(columns);
            pipe.items.push_back(InFlight {
                index: k,
                output: plan.output_range(k),
                device,
                pinned,
                layout,
                compute: (c0, c1),
                copy: (k0, k1),
            });
        }
        let last_end = pipe.copy.record_timed_event()?;
        while let Some(done) = pipe.items.pop_front() {
            free.push(finish(compute, done, &mut stats, &mut consume)?);
        }
        stats.device_ms = first_start.elapsed_ms(&last_end)? as f64;
        stats.wall_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(stats)
    }
}

/// Waits for a chunk's copy, hands it to `consume`, releases its device memory after the copy
/// (ordered on the compute stream) and returns its pinned buffer for reuse.
fn finish<O: ChunkOutput>(
    compute: &Stream,
    mut done: InFlight<O>,
    stats: &mut StreamStats,
    consume: &mut impl FnMut(HostChunk<'_>) -> Result<()>,
) -> Result<PinnedBuffer<u8>> {
    let rows = done.device.rows();
    {
        let host = done.pinned.as_slice()?; // waits for the copy
        let columns = done.layout.iter().map(|&(at, len)| &host[at..at + len]).collect();
        consume(HostChunk { index: done.index, output: done.output.clone(), columns })?;
    }
    stats.chunks += 1;
    stats.rows += rows;
    stats.bytes += done.layout.iter().map(|&(_, len)| len as u64).sum::<u64>();
    stats.compute_ms += done.compute.0.elapsed_ms(&done.compute.1)? as f64;
    stats.copy_ms += done.copy.0.elapsed_ms(&done.copy.1)? as f64;
    compute.wait_event(&done.copy.1)?;
    drop(done.device);
    Ok(done.pinned)
}
