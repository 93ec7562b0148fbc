//! One call for Arrow users: two record batch readers in, a reader of the joined batches out.
//!
//! ```no_run
//! use std::sync::Arc;
//! use arrow_array::{Int32Array, RecordBatch, RecordBatchIterator, StringArray};
//! use gpujoin_arrow::{join, JoinSpec};
//! use gpujoin_join::JoinType;
//! let orders = RecordBatch::try_from_iter([("cust", Arc::new(Int32Array::from(vec![1, 2, 2])) as _)]).unwrap();
//! let customers = RecordBatch::try_from_iter([
//!     ("id", Arc::new(Int32Array::from(vec![2, 3])) as _),
//!     ("name", Arc::new(StringArray::from(vec!["two", "three"])) as _),
//! ]).unwrap();
//! let (ls, rs) = (orders.schema(), customers.schema());
//! let out = join(
//!     RecordBatchIterator::new([Ok(orders)], ls),
//!     RecordBatchIterator::new([Ok(customers)], rs),
//!     JoinSpec::new(JoinType::Inner, &["cust"], &["id"]),
//! )?;
//! let rows: usize = out.map(|b| b.unwrap().num_rows()).sum();
//! assert_eq!(rows, 2); // cust 2 twice, with id 2 and name "two"
//! # Ok::<(), gpujoin_device::Error>(())
//! ```

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{RecordBatch, RecordBatchReader, UInt32Array};
use arrow_buffer::NullBuffer;
use arrow_schema::{ArrowError, DataType as ArrowType, Field, Schema, SchemaRef};
use gpujoin_device::{Device, DeviceBuffer, Error, Result, Stream};
use gpujoin_join::chunked::ChunkBudget;
use gpujoin_join::plan::{Algorithm, Join, JoinOutput};
use gpujoin_join::predicate::Predicate;
use gpujoin_join::table::Table;
use gpujoin_join::{GatherMaps, JoinType, NanEquality, NullEquality, Side};

use crate::download::{DownloadOptions, Downloader};
use crate::staging::{StagingOptions, StagingStats};
use crate::upload::{batch_bytes, upload_batches_with, upload_batches_with_stats, upload_reader};

/// What to join and how: key columns by name (pairwise), the join type, NULL and NaN equality,
/// an optional filter, the output columns and the chunking of outputs larger than the device.
#[derive(Clone)]
pub struct JoinSpec {
    pub join_type: JoinType,
    pub left_on: Vec<String>,
    pub right_on: Vec<String>,
    pub null_equality: NullEquality,
    pub nan_equality: NanEquality,
    /// A filter on pairs whose keys match (or, with no keys, the whole theta condition):
    /// `col_l(i)` / `col_r(j)` are the columns at positions `i` / `j` of the two schemas.
    pub filter: Option<Predicate>,
    /// Output columns of the left side (`None`: every column, or none where the join type
    /// returns no left rows).
    pub left_select: Option<Vec<String>>,
    /// Output columns of the right side (as `left_select`).
    pub right_select: Option<Vec<String>>,
    pub algorithm: Algorithm,
    /// The device bytes one chunk of output may take when the whole output does not fit in
    /// device memory (or [`JoinSpec::force_chunks`] is set).
    pub chunk_budget: ChunkBudget,
    /// Always produce the output in chunks of `chunk_budget` (bounded device memory), instead of
    /// at once when it fits.
    pub force_chunks: bool,
    /// Rows per output batch, staging of uploads and downloads.
    pub download: DownloadOptions,
    pub staging: StagingOptions,
    /// Host bytes of each part of the right side in [`join_streaming_on`] (`None`: half the left
    /// side's device bytes, within 64 MiB .. 1 GiB).
    pub stream_part_bytes: Option<usize>,
    /// [`join_indices_on`]: the rows ordered by this side's index (ascending, that side's
    /// padding rows last; see [`GatherMaps::ordered_by`]), so that a host gather reads that
    /// side in sequence. `None` (the default): the algorithm's order.
    pub indices_order: Option<Side>,
}

impl JoinSpec {
    /// A join of `join_type` on `left_on[i] = right_on[i]` with SQL's defaults (NULL matches
    /// nothing, NaN matches NaN), every column out, `Algorithm::Auto`.
    pub fn new(join_type: JoinType, left_on: &[&str], right_on: &[&str]) -> JoinSpec {
        JoinSpec {
            join_type,
            left_on: left_on.iter().map(|s| s.to_string()).collect(),
            right_on: right_on.iter().map(|s| s.to_string()).collect(),
            null_equality: NullEquality::NullEqualsNothing,
            nan_equality: NanEquality::NanEqualsNan,
            filter: None,
            left_select: None,
            right_select: None,
            algorithm: Algorithm::Auto,
            chunk_budget: ChunkBudget::FromFreeMemory,
            force_chunks: false,
            download: DownloadOptions::default(),
            staging: StagingOptions::default(),
            stream_part_bytes: None,
            indices_order: None,
        }
    }

    /// The output columns of both sides.
    pub fn select(mut self, left: &[&str], right: &[&str]) -> JoinSpec {
        self.left_select = Some(left.iter().map(|s| s.to_string()).collect());
        self.right_select = Some(right.iter().map(|s| s.to_string()).collect());
        self
    }

    pub fn filter(mut self, p: Predicate) -> JoinSpec {
        self.filter = Some(p);
        self
    }

    pub fn null_equality(mut self, e: NullEquality) -> JoinSpec {
        self.null_equality = e;
        self
    }

    pub fn nan_equality(mut self, e: NanEquality) -> JoinSpec {
        self.nan_equality = e;
        self
    }

    pub fn algorithm(mut self, a: Algorithm) -> JoinSpec {
        self.algorithm = a;
        self
    }

    pub fn chunk_budget(mut self, b: ChunkBudget) -> JoinSpec {
        self.chunk_budget = b;
        self
    }

    /// Output in chunks of at most `bytes` device bytes each, always.
    pub fn chunks_of(mut self, bytes: u64) -> JoinSpec {
        self.chunk_budget = ChunkBudget::Bytes(bytes);
        self.force_chunks = true;
        self
    }

    pub fn batch_rows(mut self, rows: usize) -> JoinSpec {
        self.download.batch_rows = rows;
        self
    }

    /// Right-side parts of about `bytes` host bytes in [`join_streaming_on`] (default: half the
    /// left side's device bytes, within 64 MiB .. 1 GiB).
    pub fn stream_part_bytes(mut self, bytes: usize) -> JoinSpec {
        self.stream_part_bytes = Some(bytes);
        self
    }

    /// [`join_indices_on`]'s rows ordered by `side`'s index ([`JoinSpec::indices_order`]).
    pub fn indices_ordered_by(mut self, side: Side) -> JoinSpec {
        self.indices_order = Some(side);
        self
    }

    /// The output columns of the two sides.
    fn selections(&self, ls: &Schema, rs: &Schema) -> (Vec<String>, Vec<String>) {
        let jt = self.join_type;
        (self.selected(ls, jt.has_left_map(), &self.left_select), self.selected(rs, jt.has_right_map(), &self.right_select))
    }

    fn selected(&self, schema: &Schema, side_returned: bool, select: &Option<Vec<String>>) -> Vec<String> {
        match select {
            Some(s) => s.clone(),
            None if side_returned => schema.fields().iter().map(|f| f.name().clone()).collect(),
            None => Vec::new(),
        }
    }
}

/// The joined batches, produced on the device by a worker thread one chunk ahead of the reader.
///
/// Its worker threads (upload, join, download) are joined when it returns `None` or is
/// dropped, so every buffer they held is back in its pool by then (dropping it early waits for
/// the part being uploaded).
pub struct JoinReader {
    schema: SchemaRef,
    batches: Option<Receiver<std::result::Result<RecordBatch, ArrowError>>>,
    times: Arc<Mutex<JoinTimes>>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

/// Where a [`join_on`]'s time went, host wall-clock: `upload` covers pulling both readers (their
/// own reading included) and copying them to the device; `join` the device join (each chunk's,
/// summed), `download` copying the output to host batches (not the time the worker waited for
/// the reader to take them).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JoinTimes {
    pub upload: Duration,
    pub join: Duration,
    pub download: Duration,
    /// Output chunks (1 when the whole output fit at once).
    pub chunks: u64,
}

impl JoinReader {
    fn new(schema: SchemaRef, batches: Receiver<std::result::Result<RecordBatch, ArrowError>>, times: Arc<Mutex<JoinTimes>>, workers: Vec<std::thread::JoinHandle<()>>) -> JoinReader {
        JoinReader { schema, batches: Some(batches), times, workers }
    }

    /// The times so far (final once the reader returned `None`).
    pub fn times(&self) -> JoinTimes {
        *self.times.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes the channel (a worker blocked sending gives up) and waits for the workers; the
    /// number of them that panicked.
    fn finish(&mut self) -> usize {
        self.batches = None;
        self.workers.drain(..).map(|w| w.join()).filter(|r| r.is_err()).count()
    }
}

impl Iterator for JoinReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.batches.as_ref()?.recv() {
            Ok(b) => Some(b),
            // Every worker is done (or dropped its sender): wait for them, and never end a
            // result silently short because one panicked.
            Err(_) => match self.finish() {
                0 => None,
                n => Some(Err(ArrowError::ComputeError(format!("{n} join worker thread(s) panicked; the output is incomplete")))),
            },
        }
    }
}

impl Drop for JoinReader {
    fn drop(&mut self) {
        self.finish();
    }
}

impl RecordBatchReader for JoinReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Uploads both readers on `stream`'s device, then returns a reader of the joined batches: the
/// left side's output columns, then the right side's (a name output on both sides is prefixed
/// `left.` / `right.`), with the inputs' Arrow types (dictionaries decoded) and nullable where
/// an outer join pads. The whole output is produced at once when it fits in device memory, else
/// in chunks of the spec's budget (every join type, key type and filter). Errors in the input (unknown or unsupported
/// columns, key types that differ) are returned here; device errors later, as batches.
/// Output order: that of the algorithm that ran ([`Algorithm`]'s docs).
pub fn join_on(stream: &Stream, left: impl RecordBatchReader, right: impl RecordBatchReader, spec: JoinSpec) -> Result<JoinReader> {
    let start = Instant::now();
    let l = Arc::new(DeviceInput { schema: left.schema(), table: upload_reader(stream, left, spec.staging)? });
    let r = Arc::new(DeviceInput { schema: right.schema(), table: upload_reader(stream, right, spec.staging)? });
    stream.synchronize()?;
    join_inputs(stream, l, r, spec, start.elapsed())
}

/// An input uploaded once and joined many times: the build side of a join that many
/// partitions probe ([`join_shared_on`]).
///
/// ```no_run
/// # use std::sync::Arc;
/// # use arrow_array::{Int32Array, RecordBatch, RecordBatchIterator};
/// # use gpujoin_arrow::{join_shared_on, DeviceInput, JoinSpec, StagingOptions};
/// # fn f(build: RecordBatch, parts: Vec<RecordBatch>) -> gpujoin_device::Result<()> {
/// let stream = gpujoin_device::Device::new(0)?.new_stream()?;
/// let schema = build.schema();
/// let build = Arc::new(DeviceInput::upload(&stream, RecordBatchIterator::new([Ok(build)], schema), StagingOptions::default())?);
/// for part in parts {
///     let schema = part.schema();
///     let probe = RecordBatchIterator::new([Ok(part)], schema);
///     for batch in join_shared_on(&stream, Arc::clone(&build), probe, JoinSpec::new(gpujoin_join::JoinType::Inner, &["k"], &["k"]))? {
///         let _ = batch;
///     }
/// }
/// # Ok(()) }
/// ```
pub struct DeviceInput {
    schema: SchemaRef,
    table: Table,
}

impl DeviceInput {
    /// Uploads `reader` on `stream` and waits until its bytes are on the device, so that joins on
    /// other streams may read it.
    pub fn upload(stream: &Stream, reader: impl RecordBatchReader, staging: StagingOptions) -> Result<DeviceInput> {
        let schema = reader.schema();
        let table = upload_reader(stream, reader, staging)?;
        stream.synchronize()?;
        Ok(DeviceInput { schema, table })
    }

    /// `batches` (all of `schema`) uploaded as [`DeviceInput::upload`] does, with where the time
    /// went: the staging's host time ([`StagingStats`], summed over its threads) and the wait
    /// for the device copies to finish after the last one was queued.
    ///
    /// Example: 2^20 rows of one `Int64` column: `stats.bytes` 8 MiB, the wait a few hundred
    /// microseconds on an idle device.
    pub fn upload_batches(stream: &Stream, schema: SchemaRef, batches: Vec<RecordBatch>, staging: StagingOptions) -> Result<(DeviceInput, StagingStats, Duration)> {
        let (table, stats) = upload_batches_with_stats(stream, &schema, batches, staging)?;
        let t = Instant::now();
        stream.synchronize()?;
        Ok((DeviceInput { schema, table }, stats, t.elapsed()))
    }

    /// The Arrow schema it was uploaded with.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Its rows.
    pub fn num_rows(&self) -> u64 {
        self.table.rows() as u64
    }
}

/// [`join_on`] with a left side already on the device (uploaded once by [`DeviceInput::upload`],
/// shared by the joins of many right sides; each join reads it, none changes it).
pub fn join_shared_on(stream: &Stream, left: Arc<DeviceInput>, right: impl RecordBatchReader, spec: JoinSpec) -> Result<JoinReader> {
    let start = Instant::now();
    let r = Arc::new(DeviceInput { schema: right.schema(), table: upload_reader(stream, right, spec.staging)? });
    join_inputs(stream, left, r, spec, start.elapsed())
}

fn join_inputs(stream: &Stream, l: Arc<DeviceInput>, r: Arc<DeviceInput>, spec: JoinSpec, upload: Duration) -> Result<JoinReader> {
    let (ls, rs) = (l.schema.clone(), r.schema.clone());
    let (lsel, rsel) = spec.selections(&ls, &rs);
    // Check everything (names, types, algorithm) before any work; the output names come from
    // the front door's rule.
    build(&spec, &l.table, &r.table, &lsel, &rsel).explain()?;
    let schema = output_schema(&ls, &rs, &lsel, &rsel, spec.join_type)?;
    let (tx, rx) = sync_channel(2);
    let stream = stream.clone();
    let out_schema = schema.clone();
    let times = Arc::new(Mutex::new(JoinTimes { upload, ..JoinTimes::default() }));
    let worker_times = Arc::clone(&times);
    let worker = std::thread::spawn(move || {
        let mut out = Output { tx, times: worker_times, waiting: Duration::ZERO };
        let j = build(&spec, &l.table, &r.table, &lsel, &rsel);
        let result = produce(&stream, &j, &spec, &out.times.clone(), &mut |table| out.emit(&stream, &table, &out_schema, spec.download));
        if let Err(e) = result {
            out.send(Err(e));
        }
    });
    Ok(JoinReader::new(schema, rx, times, vec![worker]))
}

/// The worker's end of a [`JoinReader`]: batches to the reader, and the times.
struct Output {
    tx: SyncSender<std::result::Result<RecordBatch, ArrowError>>,
    times: Arc<Mutex<JoinTimes>>,
    /// Time spent in `send` (the reader's, not the download's).
    waiting: Duration,
}

impl Output {
    /// Hands a batch to the reader; false when the reader is gone.
    fn send(&mut self, b: Result<RecordBatch>) -> bool {
        let t = Instant::now();
        let ok = self.tx.send(b.map_err(|e| ArrowError::ExternalError(Box::new(e)))).is_ok();
        self.waiting += t.elapsed();
        ok
    }

    /// Downloads `table` as batches of `schema` to the reader (on `stream`, waiting until its
    /// copies are done); false when the reader is gone.
    fn emit(&mut self, stream: &Stream, table: &Table, schema: &SchemaRef, options: DownloadOptions) -> Result<bool> {
        let t = Instant::now();
        let waited_before = self.waiting;
        let mut ok = true;
        for b in Downloader::new(stream, table.view(), Some(schema), options)? {
            if !self.send(b) {
                ok = false;
                break;
            }
        }
        // A reader that left early may leave copies of the next window in flight.
        stream.synchronize()?;
        let e = t.elapsed().saturating_sub(self.waiting - waited_before);
        add_time(&self.times, |t| t.download += e);
        Ok(ok)
    }
}

fn add_time(times: &Mutex<JoinTimes>, f: impl FnOnce(&mut JoinTimes)) {
    f(&mut times.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Runs `j` on `stream` and hands each output table to `sink` (false: stop, the reader is
/// gone): the whole output at once when it fits, else in chunks of the spec's budget. Adds the
/// device join time (each chunk's, after a synchronize) to `times`.
fn produce(stream: &Stream, j: &Join<'_>, spec: &JoinSpec, times: &Mutex<JoinTimes>, sink: &mut dyn FnMut(Table) -> Result<bool>) -> Result<()> {
    // Device join time since `start` (after a synchronize), and one more output chunk if
    // `produced`.
    let joined = |start: Instant, produced: bool| -> Result<()> {
        stream.synchronize()?;
        let e = start.elapsed();
        add_time(times, |t| {
            t.join += e;
            t.chunks += u64::from(produced);
        });
        Ok(())
    };
    let whole = whole_or_chunks(stream, j, spec, &mut |start, produced| joined(start, produced), &mut |maps, start| {
        // A chunk's join: its maps (the iterator's step) and their gather.
        let table = j.gather(stream, &maps)?;
        joined(start, true)?;
        sink(table)
    })?;
    if let Some(out) = whole {
        sink(out.table)?;
    }
    Ok(())
}

/// Runs `j` whole when its output fits in device memory and the spec does not force chunks
/// (no count pass first: a join whose output does not fit fails with a typed error before
/// writing it, and then runs in chunks), and returns its output; else hands each chunk's maps
/// to `chunk` with the time its step started (`false` from it: stop) and returns `None`.
/// `whole_run` gets the whole run's start and whether it succeeded.
fn whole_or_chunks(
    stream: &Stream,
    j: &Join<'_>,
    spec: &JoinSpec,
    whole_run: &mut dyn FnMut(Instant, bool) -> Result<()>,
    chunk: &mut dyn FnMut(GatherMaps, Instant) -> Result<bool>,
) -> Result<Option<JoinOutput>> {
    if !spec.force_chunks {
        let start = Instant::now();
        let run = j.run(stream);
        whole_run(start, run.is_ok())?;
        match run {
            Ok(out) => return Ok(Some(out)),
            Err(Error::OutputTooLarge { .. } | Error::OutOfMemory { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let budget = ChunkBudget::Bytes(spec.chunk_budget.resolve(stream.device())?);
    let mut chunks = j.chunks(stream, budget)?;
    loop {
        let start = Instant::now();
        let Some(c) = chunks.next() else { break };
        if !chunk(c?.data, start)? {
            break;
        }
    }
    Ok(None)
}

/// The rows of a join as indices into its two inputs: output row `k` joins left row `left[k]`
/// with right row `right[k]`; a null index means no row on that side (an outer join's padding).
/// A side the join type does not return has no indices: `RightSemi` / `RightAnti` have no left
/// ones, `LeftSemi` / `LeftAnti` no right ones.
///
/// ```text
/// left keys [7, 5], right keys [5, 5, 9]
/// Inner:     left [1, 1],       right [0, 1]
/// Full:      left [0, 1, 1, ∅], right [∅, 0, 1, 2]   (in the algorithm's order)
/// LeftSemi:  left [1],          right None
/// ```
#[derive(Debug, Clone)]
pub struct JoinIndices {
    pub left: Option<UInt32Array>,
    pub right: Option<UInt32Array>,
}

impl JoinIndices {
    /// Output rows.
    pub fn num_rows(&self) -> usize {
        self.left.as_ref().or(self.right.as_ref()).map_or(0, |a| a.len())
    }

    /// Rows `offset .. offset + len` (zero-copy).
    pub fn slice(&self, offset: usize, len: usize) -> JoinIndices {
        JoinIndices { left: self.left.as_ref().map(|a| a.slice(offset, len)), right: self.right.as_ref().map(|a| a.slice(offset, len)) }
    }

    /// The device maps as host index arrays: [`RowId::NONE`](gpujoin_join::RowId::NONE) becomes
    /// a null index (its value slot 0).
    fn from_maps(maps: GatherMaps) -> Result<JoinIndices> {
        let jt = maps.join_type();
        let (has_left, has_right) = (jt.has_left_map(), jt.has_right_map());
        let (l, r) = maps.into_raw();
        let host = |present: bool, map: DeviceBuffer<u32>| -> Result<Option<UInt32Array>> {
            if !present {
                return Ok(None);
            }
            let mut v = map.to_vec()?;
            drop(map);
            let nulls = if v.contains(&u32::MAX) {
                let valid = NullBuffer::from_iter(v.iter().map(|&x| x != u32::MAX));
                v.iter_mut().filter(|x| **x == u32::MAX).for_each(|x| *x = 0);
                Some(valid)
            } else {
                None
            };
            Ok(Some(UInt32Array::new(v.into(), nulls)))
        };
        Ok(JoinIndices { left: host(has_left, l)?, right: host(has_right, r)? })
    }
}

/// Joins two inputs already on the device and hands the joined rows, as [`JoinIndices`] on the
/// host, to `sink` (which returns `false` to stop): the whole output at once when its maps fit
/// in device memory (and [`JoinSpec::force_chunks`] is not set), else in chunks of the spec's
/// budget, in output order. Nothing but the maps is produced: the spec's selections are not
/// read, and the caller takes its output columns from its own host batches
/// (`arrow_select::take::take`), so only the key and filter columns need to be on the device.
/// With [`JoinSpec::indices_order`], each chunk's rows are sorted by that side's index on the
/// device first. Returns the device join (the sort included) and the maps' copy times
/// (`upload` zero).
///
/// Errors: those of [`join_on`]; and `Unsupported` for an explicit clustered algorithm
/// (`SmjOm`, `PhjOm`) without a filter, whose output has no maps into the inputs (its gathers
/// run inside the join: use [`join_on`] for it).
///
/// ```no_run
/// # use std::sync::Arc;
/// # use arrow_array::{Int64Array, RecordBatch, RecordBatchIterator};
/// # use gpujoin_arrow::{join_indices_on, DeviceInput, JoinSpec, StagingOptions};
/// # fn f(keys_l: RecordBatch, keys_r: RecordBatch) -> gpujoin_device::Result<()> {
/// let stream = gpujoin_device::Device::new(0)?.new_stream()?;
/// let up = |b: RecordBatch| { let s = b.schema(); DeviceInput::upload(&stream, RecordBatchIterator::new([Ok(b)], s), StagingOptions::default()) };
/// let (l, r) = (up(keys_l)?, up(keys_r)?);
/// let mut rows = 0;
/// join_indices_on(&stream, &l, &r, &JoinSpec::new(gpujoin_join::JoinType::Inner, &["k"], &["k"]), &mut |ix| {
///     rows += ix.num_rows(); // take the output columns through ix.left / ix.right here
///     Ok(true)
/// })?;
/// # Ok(()) }
/// ```
pub fn join_indices_on(stream: &Stream, left: &DeviceInput, right: &DeviceInput, spec: &JoinSpec, sink: &mut dyn FnMut(JoinIndices) -> Result<bool>) -> Result<JoinTimes> {
    let j = build(spec, &left.table, &right.table, &[], &[]);
    j.explain()?;
    let mut times = JoinTimes::default();
    let order = spec.indices_order;
    let mut emit = |maps: GatherMaps, times: &mut JoinTimes| -> Result<bool> {
        let t = Instant::now();
        let maps = match order {
            Some(side) => {
                let m = maps.ordered_by(stream, side)?;
                stream.synchronize()?;
                times.join += t.elapsed();
                m
            }
            None => maps,
        };
        let t = Instant::now();
        let ix = JoinIndices::from_maps(maps)?;
        times.download += t.elapsed();
        times.chunks += 1;
        sink(ix)
    };
    // The whole run's device time (the chunks' steps add theirs to `times` directly).
    let whole_ran = std::cell::Cell::new(Duration::ZERO);
    let whole = whole_or_chunks(
        stream,
        &j,
        spec,
        &mut |start, _| {
            stream.synchronize()?;
            whole_ran.set(start.elapsed());
            Ok(())
        },
        &mut |maps, start| {
            stream.synchronize()?;
            times.join += start.elapsed();
            emit(maps, &mut times)
        },
    )?;
    times.join += whole_ran.get();
    if let Some(out) = whole {
        let maps = out.maps.ok_or_else(|| Error::Unsupported {
            what: format!("join indices by the {} join", out.algorithm.name()),
            reason: "its output has no maps into the inputs (its gathers run inside the join); use join_on".into(),
        })?;
        emit(maps, &mut times)?;
    }
    Ok(times)
}

/// Join types whose output for a right row depends on that row and the left side alone, so the
/// right side may be joined a part at a time: `Inner`, `Right`, `RightSemi`, `RightAnti`.
fn right_side_streams(jt: JoinType) -> bool {
    matches!(jt, JoinType::Inner | JoinType::Right | JoinType::RightSemi | JoinType::RightAnti)
}

/// Host bytes of the right side's parts in [`join_streaming_on`] when the spec leaves it open:
/// half the left side's device bytes (a part's copies then take about as long as the left
/// side's preparation that each part's join repeats), within 64 MiB .. 1 GiB.
fn stream_part_bytes(spec: &JoinSpec, left: &Table) -> usize {
    spec.stream_part_bytes.unwrap_or_else(|| (table_bytes(left) / 2).clamp(64 << 20, 1 << 30)).max(1)
}

fn table_bytes(t: &Table) -> usize {
    t.view().columns().iter().map(|c| c.values().len() + c.offsets().map_or(0, |o| o.len()) + c.validity().map_or(0, |v| v.len())).sum()
}

/// The next part of `batches`: whole batches (the last one sliced) up to `bytes` host bytes;
/// `None` at the end. `pending` holds the rest of a batch split across parts.
fn next_part(batches: &mut dyn Iterator<Item = std::result::Result<RecordBatch, ArrowError>>, pending: &mut Option<RecordBatch>, bytes: usize) -> Result<Option<Vec<RecordBatch>>> {
    let mut part = Vec::new();
    let mut have = 0usize;
    while have < bytes {
        let b = match pending.take() {
            Some(b) => b,
            None => match batches.next() {
                Some(b) => b.map_err(|e| crate::types::arrow_error("reading a record batch", e))?,
                None => break,
            },
        };
        let size = batch_bytes(&b);
        let rows = b.num_rows();
        if have + size <= bytes || rows <= 1 {
            have += size;
            part.push(b);
            continue;
        }
        // Split: the rows that fill the part, the rest for the next one.
        let per_row = size.div_ceil(rows).max(1);
        let take = ((bytes - have) / per_row).clamp(1, rows - 1);
        part.push(b.slice(0, take));
        *pending = Some(b.slice(take, rows - take));
        break;
    }
    Ok((!part.is_empty()).then_some(part))
}

/// Joins two readers on device 0 (see [`join_on`]).
pub fn join(left: impl RecordBatchReader, right: impl RecordBatchReader, spec: JoinSpec) -> Result<JoinReader> {
    let stream = Device::new(0)?.new_stream()?;
    join_on(&stream, left, right, spec)
}

/// [`join_on`] with the right side streamed where the join type allows it (`Inner`, `Right`,
/// `RightSemi`, `RightAnti`: a right row's output needs only that row and the left side): the
/// left side is uploaded first; then the right side is read, uploaded, joined and downloaded a
/// part at a time ([`JoinSpec::stream_part_bytes`]), by three threads on three streams, so that
/// the copies to the device, the joins and the copies back overlap (the two copy directions run
/// at once). A right side of one part, and the other join types, run as [`join_on`].
///
/// Output order: part by part in the right side's order; within a part, that of the algorithm
/// that ran. [`JoinReader::times`] sums each phase over the parts (they overlap, so the sum of
/// the phases is more than the wall time).
///
/// Not the default ([`join`] runs [`join_on`]): on the H100 machine (16 cores) the PK-FK join of
/// 2^26 x 2^27 `u32` rows took 69.1 ms this way against 67.3 ms through [`join_on`]. There the
/// host's memory bandwidth, not PCIe, bounds the transfers (each uploaded byte is copied once on
/// the host into pinned staging, about 86 GB/s of reads and writes), so the concurrent download
/// slows the uploads, and each part's join repeats the left side's preparation (18.4 ms of joins
/// against 6.2 ms whole). It pays where host memory is faster than the two copy directions
/// together and the left side is small.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use arrow_array::{RecordBatch, RecordBatchIterator, UInt32Array};
/// # use gpujoin_arrow::{join_streaming_on, JoinSpec};
/// # fn f(stream: &gpujoin_device::Stream, dim: RecordBatch, facts: Vec<RecordBatch>) -> gpujoin_device::Result<()> {
/// let (ds, fs) = (dim.schema(), facts[0].schema());
/// // Facts in parts of 64 MiB: each part's output comes back while the next part goes up.
/// let spec = JoinSpec::new(gpujoin_join::JoinType::Inner, &["id"], &["k"]).stream_part_bytes(64 << 20);
/// let out = join_streaming_on(stream, RecordBatchIterator::new([Ok(dim)], ds), RecordBatchIterator::new(facts.into_iter().map(Ok), fs), spec)?;
/// let rows: usize = out.map(|b| b.unwrap().num_rows()).sum();
/// # let _ = rows; Ok(()) }
/// ```
pub fn join_streaming_on(stream: &Stream, left: impl RecordBatchReader, right: impl RecordBatchReader + Send + 'static, spec: JoinSpec) -> Result<JoinReader> {
    let start = Instant::now();
    let l = Arc::new(DeviceInput { schema: left.schema(), table: upload_reader(stream, left, spec.staging)? });
    let rs = right.schema();
    if !right_side_streams(spec.join_type) {
        let r = Arc::new(DeviceInput { schema: rs, table: upload_reader(stream, right, spec.staging)? });
        stream.synchronize()?;
        return join_inputs(stream, l, r, spec, start.elapsed());
    }
    let part_bytes = stream_part_bytes(&spec, &l.table);
    let mut batches: Box<dyn Iterator<Item = std::result::Result<RecordBatch, ArrowError>> + Send> = Box::new(right);
    let mut pending = None;
    let first = next_part(&mut batches, &mut pending, part_bytes)?.unwrap_or_default();
    let first = upload_batches_with(stream, &rs, first, spec.staging)?;
    stream.synchronize()?;
    let second = next_part(&mut batches, &mut pending, part_bytes)?;
    let Some(second) = second else {
        // One part: nothing to overlap.
        return join_inputs(stream, l, Arc::new(DeviceInput { schema: rs, table: first }), spec, start.elapsed());
    };
    let (ls, lsel, rsel) = {
        let (lsel, rsel) = spec.selections(&l.schema, &rs);
        (l.schema.clone(), lsel, rsel)
    };
    build(&spec, &l.table, &first, &lsel, &rsel).explain()?;
    let schema = output_schema(&ls, &rs, &lsel, &rsel, spec.join_type)?;
    let times = Arc::new(Mutex::new(JoinTimes { upload: start.elapsed(), ..JoinTimes::default() }));
    let device = stream.device().clone();
    // Parts uploaded ahead of the join, and output tables ahead of the download: one each
    // waiting, besides the one being worked on.
    let (part_tx, part_rx) = sync_channel::<Result<Table>>(1);
    let (table_tx, table_rx) = sync_channel::<Result<Table>>(1);
    let (tx, rx) = sync_channel(2);
    let mut workers = Vec::with_capacity(3);
    {
        // The reader of the right side: reads, uploads on its own stream, hands over parts.
        let (up, times, staging, rs) = (device.new_stream()?, Arc::clone(&times), spec.staging, rs.clone());
        let mut second = Some(second);
        workers.push(std::thread::spawn(move || {
            let _ = part_tx.send(Ok(first));
            loop {
                let t = Instant::now();
                let part = match second.take().map(|p| Ok(Some(p))).unwrap_or_else(|| next_part(&mut batches, &mut pending, part_bytes)) {
                    Ok(Some(p)) => upload_batches_with(&up, &rs, p, staging).and_then(|table| up.synchronize().map(|_| table)),
                    Ok(None) => return,
                    Err(e) => Err(e),
                };
                add_time(&times, |x| x.upload += t.elapsed());
                let failed = part.is_err();
                if part_tx.send(part).is_err() || failed {
                    return;
                }
            }
        }));
    }
    {
        // The joiner: each part with the left side, on the caller's stream.
        let (stream, times, spec, l) = (stream.clone(), Arc::clone(&times), spec.clone(), Arc::clone(&l));
        let (lsel, rsel) = (lsel.clone(), rsel.clone());
        workers.push(std::thread::spawn(move || {
            for part in part_rx {
                let result = part.and_then(|part| {
                    let j = build(&spec, &l.table, &part, &lsel, &rsel);
                    let mut gone = false;
                    produce(&stream, &j, &spec, &times, &mut |table| {
                        gone = table_tx.send(Ok(table)).is_err();
                        Ok(!gone)
                    })?;
                    Ok(gone)
                });
                match result {
                    Ok(false) => {}
                    Ok(true) => return,
                    Err(e) => {
                        let _ = table_tx.send(Err(e));
                        return;
                    }
                }
            }
        }));
    }
    {
        // The downloader: each output table to batches, on its own stream.
        let (down, times, out_schema, options) = (device.new_stream()?, Arc::clone(&times), schema.clone(), spec.download);
        workers.push(std::thread::spawn(move || {
            let mut out = Output { tx, times, waiting: Duration::ZERO };
            for table in table_rx {
                let r = table.and_then(|t| out.emit(&down, &t, &out_schema, options));
                match r {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => {
                        out.send(Err(e));
                        return;
                    }
                }
            }
        }));
    }
    Ok(JoinReader::new(schema, rx, times, workers))
}

fn build<'a>(spec: &JoinSpec, l: &'a Table, r: &'a Table, lsel: &[String], rsel: &[String]) -> Join<'a> {
    let lo: Vec<&str> = spec.left_on.iter().map(String::as_str).collect();
    let ro: Vec<&str> = spec.right_on.iter().map(String::as_str).collect();
    let ls: Vec<&str> = lsel.iter().map(String::as_str).collect();
    let rs: Vec<&str> = rsel.iter().map(String::as_str).collect();
    let mut j = Join::new(spec.join_type).on(l, &lo, r, &ro).select(&ls, &rs).null_equality(spec.null_equality).nan_equality(spec.nan_equality).algorithm(spec.algorithm);
    if let Some(f) = &spec.filter {
        j = j.filter(f.clone());
    }
    j
}

/// The output fields: each selected input field (a dictionary as its value type), renamed as the
/// front door names it, nullable where the input is or an outer join pads that side.
fn output_schema(ls: &Schema, rs: &Schema, lsel: &[String], rsel: &[String], jt: JoinType) -> Result<SchemaRef> {
    let pads_left = matches!(jt, JoinType::Right | JoinType::Full);
    let pads_right = matches!(jt, JoinType::Left | JoinType::Full);
    let mut fields = Vec::new();
    for (schema, sel, other, pads, prefix) in [(ls, lsel, rsel, pads_left, "left."), (rs, rsel, lsel, pads_right, "right.")] {
        for name in sel {
            let f = schema.field_with_name(name).map_err(|_| Error::UnknownColumn { name: name.clone(), available: schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ") })?;
            let t = match f.data_type() {
                ArrowType::Dictionary(_, v) => v.as_ref().clone(),
                t => t.clone(),
            };
            let out = if other.contains(name) { format!("{prefix}{name}") } else { name.clone() };
            fields.push(Field::new(out, t, f.is_nullable() || pads).with_metadata(f.metadata().clone()));
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}
