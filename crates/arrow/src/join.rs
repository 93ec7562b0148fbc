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

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, DataType as ArrowType, Field, Schema, SchemaRef};
use gpujoin_device::{Device, Error, Result, Stream};
use gpujoin_join::chunked::ChunkBudget;
use gpujoin_join::plan::{Algorithm, Join};
use gpujoin_join::predicate::Predicate;
use gpujoin_join::table::Table;
use gpujoin_join::{JoinType, NanEquality, NullEquality};

use crate::download::{DownloadOptions, Downloader};
use crate::staging::StagingOptions;
use crate::upload::upload_reader;

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

    fn selected(&self, schema: &Schema, side_returned: bool, select: &Option<Vec<String>>) -> Vec<String> {
        match select {
            Some(s) => s.clone(),
            None if side_returned => schema.fields().iter().map(|f| f.name().clone()).collect(),
            None => Vec::new(),
        }
    }
}

/// The joined batches, produced on the device by a worker thread one chunk ahead of the reader.
pub struct JoinReader {
    schema: SchemaRef,
    batches: Receiver<std::result::Result<RecordBatch, ArrowError>>,
    times: Arc<Mutex<JoinTimes>>,
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
    /// The times so far (final once the reader returned `None`).
    pub fn times(&self) -> JoinTimes {
        *self.times.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Iterator for JoinReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.batches.recv().ok()
    }
}

impl RecordBatchReader for JoinReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Joins two readers on device 0 (see [`join_on`]).
pub fn join(left: impl RecordBatchReader, right: impl RecordBatchReader, spec: JoinSpec) -> Result<JoinReader> {
    let stream = Device::new(0)?.new_stream()?;
    join_on(&stream, left, right, spec)
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
    let jt = spec.join_type;
    let lsel = spec.selected(&ls, jt.has_left_map(), &spec.left_select);
    let rsel = spec.selected(&rs, jt.has_right_map(), &spec.right_select);
    // Check everything (names, types, algorithm) before any work; the output names come from
    // the front door's rule.
    let probe = build(&spec, &l.table, &r.table, &lsel, &rsel);
    probe.explain()?;
    let schema = output_schema(&ls, &rs, &lsel, &rsel, jt)?;
    let (tx, rx) = sync_channel(2);
    let stream = stream.clone();
    let out_schema = schema.clone();
    let times = Arc::new(Mutex::new(JoinTimes { upload, ..JoinTimes::default() }));
    let worker_times = Arc::clone(&times);
    std::thread::spawn(move || {
        let add = |f: &dyn Fn(&mut JoinTimes)| f(&mut worker_times.lock().unwrap_or_else(|p| p.into_inner()));
        // Time in `send` is the reader's, not the download's: counted here, taken off below.
        let waiting = std::cell::Cell::new(Duration::ZERO);
        let send = |b: Result<RecordBatch>| {
            let t = Instant::now();
            let ok = tx.send(b.map_err(|e| ArrowError::ExternalError(Box::new(e)))).is_ok();
            waiting.set(waiting.get() + t.elapsed());
            ok
        };
        let j = build(&spec, &l.table, &r.table, &lsel, &rsel);
        // Device join time since `start` (after a synchronize), and one more output chunk if
        // `produced`.
        let joined = |start: Instant, produced: bool| -> Result<()> {
            stream.synchronize()?;
            let e = start.elapsed();
            add(&|t| {
                t.join += e;
                t.chunks += u64::from(produced);
            });
            Ok(())
        };
        let result = (|| -> Result<()> {
            // The whole output at once (no count pass first: a join whose output does not fit
            // fails with a typed error before writing it, and then runs in chunks).
            let whole = if spec.force_chunks {
                None
            } else {
                let start = Instant::now();
                let run = j.run(&stream);
                joined(start, run.is_ok())?;
                match run {
                    Ok(out) => Some(out.table),
                    Err(Error::OutputTooLarge { .. } | Error::OutOfMemory { .. }) => None,
                    Err(e) => return Err(e),
                }
            };
            let emit = |table: &Table| -> Result<bool> {
                let t = Instant::now();
                let waited_before = waiting.get();
                let mut ok = true;
                for b in Downloader::new(&stream, table.view(), Some(&out_schema), spec.download)? {
                    if !send(b) {
                        ok = false;
                        break;
                    }
                }
                let e = t.elapsed().saturating_sub(waiting.get() - waited_before);
                add(&|t| t.download += e);
                Ok(ok)
            };
            if let Some(out) = whole {
                emit(&out)?;
                return Ok(());
            }
            let budget = ChunkBudget::Bytes(spec.chunk_budget.resolve(stream.device())?);
            let theta_inputs;
            let mut chunks: Box<dyn Iterator<Item = Result<_>>> = if spec.filter.is_some() || spec.left_on.is_empty() {
                theta_inputs = j.theta_inputs(&stream)?;
                Box::new(theta_inputs.chunks(&stream, budget)?)
            } else {
                Box::new(j.chunks(&stream, budget)?)
            };
            loop {
                // A chunk's join: its maps (the iterator's step) and their gather.
                let start = Instant::now();
                let Some(c) = chunks.next() else { break };
                let table = j.gather(&stream, &c?.data)?;
                joined(start, true)?;
                if !emit(&table)? {
                    return Ok(());
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            send(Err(e));
        }
    });
    Ok(JoinReader { schema, batches: rx, times })
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
