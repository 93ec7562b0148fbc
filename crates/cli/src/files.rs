//! Files in and out: the format from the extension, a record batch reader over a file, and a
//! writer of record batches to one.
//!
//! | extension | format |
//! |---|---|
//! | `.parquet`, `.pq` | Parquet |
//! | `.csv` | CSV with a header line (types inferred from the first 1000 rows) |
//! | `.arrow`, `.ipc`, `.feather` | Arrow IPC file |
//! | `.json`, `.ndjson`, `.jsonl` | newline-delimited JSON (types inferred from the first 1000 rows) |

use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{RecordBatch, RecordBatchReader};
use datafusion::arrow::csv;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc;
use datafusion::arrow::json;
use datafusion::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use datafusion::parquet::arrow::{ArrowWriter, ProjectionMask};

use crate::error::{CliError, Result};

/// Rows per batch read from a file.
pub const READ_BATCH_ROWS: usize = 1 << 16;
const INFER_ROWS: usize = 1000;

/// A file format, from the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Parquet,
    Csv,
    Arrow,
    Json,
}

impl Format {
    /// `orders.parquet` is Parquet; `notes.txt` is an error naming the extensions known.
    pub fn of(path: &Path) -> Result<Format> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        Ok(match ext.as_str() {
            "parquet" | "pq" => Format::Parquet,
            "csv" => Format::Csv,
            "arrow" | "ipc" | "feather" => Format::Arrow,
            "json" | "ndjson" | "jsonl" => Format::Json,
            _ => {
                return Err(CliError::new(format!(
                    "{}: unknown file format (extension {:?}); gpujoin reads and writes .parquet, .csv, .arrow (Arrow IPC) and .json (newline-delimited)",
                    path.display(),
                    ext
                )))
            }
        })
    }
}

/// What a [`FileReader`] has read so far: rows, and the time spent opening and reading (in
/// `next`). Shared, so that it can be read after the reader moved (into an upload).
#[derive(Debug, Default)]
pub struct ReadCounters {
    rows: AtomicU64,
    nanos: AtomicU64,
}

impl ReadCounters {
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    pub fn time(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }

    fn add_time(&self, d: Duration) {
        self.nanos.fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }
}

/// A file's batches, counting what it read ([`ReadCounters`]).
pub struct FileReader {
    path: PathBuf,
    inner: Box<dyn RecordBatchReader + Send>,
    schema: SchemaRef,
    rows: u64,
    read: Arc<ReadCounters>,
}

impl FileReader {
    /// Opens `path` and reads its schema (Parquet footer, IPC header, or inference from the first
    /// rows of CSV and JSON). Errors name the file: not found, unreadable, malformed.
    pub fn open(path: &Path) -> Result<FileReader> {
        Self::open_columns(path, None)
    }

    /// The same file read again from the start with only the named columns (in the file's
    /// order): Parquet, CSV and Arrow IPC decode nothing else.
    pub fn project(self, names: &[String]) -> Result<FileReader> {
        let mut names = names.to_vec();
        names.sort_by_key(|n| self.schema.index_of(n).unwrap_or(usize::MAX));
        names.dedup();
        if names.len() == self.schema.fields().len() && names.iter().zip(self.schema.fields()).all(|(n, f)| n == f.name()) {
            return Ok(self);
        }
        let indices = names
            .iter()
            .map(|n| self.schema.index_of(n).map_err(|_| CliError::new(format!("unknown column `{n}` in {}", self.path.display()))))
            .collect::<Result<Vec<_>>>()?;
        let read = Arc::clone(&self.read);
        let mut r = Self::open_columns(&self.path, Some(&indices))?;
        // One file, one set of counters: the first opening's time counts too.
        read.add_time(r.read.time());
        r.read = read;
        Ok(r)
    }

    fn open_columns(path: &Path, columns: Option<&[usize]>) -> Result<FileReader> {
        let start = Instant::now();
        let format = Format::of(path)?;
        let file = File::open(path).map_err(|e| CliError::new(format!("cannot open {}: {e}", path.display())))?;
        let err = |e: CliError| CliError::in_file(path, e);
        let (inner, rows): (Box<dyn RecordBatchReader + Send>, u64) = match format {
            Format::Parquet => {
                let r = ParallelParquet::open(path, file, columns).map_err(|e| err(e.into()))?;
                let rows = r.rows;
                (Box::new(r), rows)
            }
            Format::Csv => {
                let mut file = file;
                let (schema, _) = csv::reader::Format::default()
                    .with_header(true)
                    .infer_schema(&mut file, Some(INFER_ROWS))
                    .map_err(|e| err(CliError::new(format!("not a readable CSV file: {e}"))))?;
                file.seek(SeekFrom::Start(0))?;
                let mut b = csv::ReaderBuilder::new(Arc::new(schema.clone())).with_header(true).with_batch_size(READ_BATCH_ROWS);
                match columns {
                    // The reader decodes only these; its `schema()` still names them all.
                    Some(c) => {
                        b = b.with_projection(c.to_vec());
                        let projected = Arc::new(schema.project(c).map_err(|e| err(e.into()))?);
                        (Box::new(Projected { inner: Box::new(b.build(file).map_err(|e| err(e.into()))?), columns: None, schema: projected }), 0)
                    }
                    None => (Box::new(b.build(file).map_err(|e| err(e.into()))?), 0),
                }
            }
            Format::Arrow => {
                let r = ipc::reader::FileReader::try_new(BufReader::new(file), columns.map(<[usize]>::to_vec))
                    .map_err(|e| err(CliError::new(format!("not a readable Arrow IPC file: {e}"))))?;
                match columns {
                    // As CSV: projected batches, every column in `schema()`.
                    Some(c) => {
                        let projected = Arc::new(r.schema().project(c).map_err(|e| err(e.into()))?);
                        (Box::new(Projected { inner: Box::new(r), columns: None, schema: projected }), 0)
                    }
                    None => (Box::new(r), 0),
                }
            }
            Format::Json => {
                let mut reader = BufReader::new(file);
                let (schema, _) = json::reader::infer_json_schema_from_seekable(&mut reader, Some(INFER_ROWS))
                    .map_err(|e| err(CliError::new(format!("not a readable newline-delimited JSON file: {e}"))))?;
                let r = json::ReaderBuilder::new(Arc::new(schema)).with_batch_size(READ_BATCH_ROWS).build(reader).map_err(|e| err(e.into()))?;
                match columns {
                    Some(c) => (Box::new(Projected::new(Box::new(r), c.to_vec()).map_err(|e| err(e.into()))?), 0),
                    None => (Box::new(r), 0),
                }
            }
        };
        let schema = inner.schema();
        let read = Arc::new(ReadCounters::default());
        read.add_time(start.elapsed());
        Ok(FileReader { path: path.to_path_buf(), inner, schema, rows, read })
    }

    /// The file's schema.
    pub fn schema_ref(&self) -> SchemaRef {
        self.schema.clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rows in the file where its metadata says (Parquet), else 0.
    pub fn rows_hint(&self) -> u64 {
        self.rows
    }

    /// A handle on the rows and time read so far (it keeps counting after the reader moves).
    pub fn counters(&self) -> Arc<ReadCounters> {
        Arc::clone(&self.read)
    }

    /// Every batch, in memory.
    pub fn read_all(self) -> Result<Vec<RecordBatch>> {
        let path = self.path.clone();
        self.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| CliError::in_file(&path, e))
    }
}

impl Iterator for FileReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        let start = Instant::now();
        let next = self.inner.next();
        self.read.add_time(start.elapsed());
        if let Some(Ok(b)) = &next {
            self.read.rows.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
        }
        // Name the file in errors (the upload reports them without it).
        next.map(|r| r.map_err(|e| ArrowError::ExternalError(Box::new(CliError::in_file(&self.path, e)))))
    }
}

impl RecordBatchReader for FileReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Columns picked from each batch of a reader that cannot project by itself (JSON), or the
/// projected schema of one that projects its batches but names every column (CSV, IPC).
struct Projected {
    inner: Box<dyn RecordBatchReader + Send>,
    /// `None`: the batches come projected.
    columns: Option<Vec<usize>>,
    schema: SchemaRef,
}

impl Projected {
    fn new(inner: Box<dyn RecordBatchReader + Send>, columns: Vec<usize>) -> std::result::Result<Projected, ArrowError> {
        let schema = Arc::new(inner.schema().project(&columns)?);
        Ok(Projected { inner, columns: Some(columns), schema })
    }
}

impl Iterator for Projected {
    type Item = std::result::Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        let b = self.inner.next()?;
        Some(match &self.columns {
            Some(c) => b.and_then(|b| b.project(c)),
            None => b,
        })
    }
}

impl RecordBatchReader for Projected {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// A Parquet file decoded on several threads, its batches in the file's order: thread `t` of
/// `n` decodes row groups `t`, `t + n`, `t + 2n`, ... into a queue of its own, and the reader
/// takes row group `g`'s batches from thread `g % n`. A queue holds a whole row group (so every
/// thread decodes while the reader drains another's), and the threads are fewer where row groups
/// are large: at most about [`DECODED_BYTES`] decoded bytes wait.
///
/// ```text
/// row groups 0 1 2 3 4 5, 2 threads:  thread 0 -> 0 2 4,  thread 1 -> 1 3 5,  reader -> 0 1 2 3 4 5
/// ```
/// The most decoded bytes (uncompressed row groups) waiting in a [`ParallelParquet`]'s queues.
const DECODED_BYTES: i64 = 2 << 30;

struct ParallelParquet {
    /// Per thread: batches, then `None` at the end of each of its row groups.
    queues: Vec<std::sync::mpsc::Receiver<Option<std::result::Result<RecordBatch, ArrowError>>>>,
    threads: usize,
    /// Batches one queue holds: the largest row group's, and one more.
    depth: usize,
    /// What the threads need, until they start.
    pending: Option<(PathBuf, ArrowReaderMetadata, ProjectionMask)>,
    next_group: usize,
    groups: usize,
    rows: u64,
    schema: SchemaRef,
}

impl ParallelParquet {
    fn open(path: &Path, file: File, columns: Option<&[usize]>) -> datafusion::parquet::errors::Result<ParallelParquet> {
        let meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::default())?;
        let groups = meta.metadata().num_row_groups();
        let rows = meta.metadata().file_metadata().num_rows().max(0) as u64;
        let mask = match columns {
            Some(c) => ProjectionMask::roots(meta.parquet_schema(), c.iter().copied()),
            None => ProjectionMask::all(),
        };
        // The projected schema, from a reader of no row groups.
        let schema = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta.clone()).with_projection(mask.clone()).with_row_groups(Vec::new()).build()?.schema();
        let largest = meta.metadata().row_groups().iter().map(|g| (g.num_rows().max(0), g.total_byte_size().max(0))).fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1)));
        let memory_bound = (DECODED_BYTES / largest.1.max(1)).max(1) as usize;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 16).min(groups.max(1)).min(memory_bound);
        let depth = (largest.0 as usize).div_ceil(READ_BATCH_ROWS) + 1;
        Ok(ParallelParquet { queues: Vec::new(), threads, depth, pending: Some((path.to_path_buf(), meta, mask)), next_group: 0, groups, rows, schema })
    }

    /// Starts the decoding threads (on the first batch asked for: a reader opened only for its
    /// schema decodes nothing).
    fn start(&mut self) {
        let Some((path, meta, mask)) = self.pending.take() else { return };
        let (threads, groups) = (self.threads, self.groups);
        for t in 0..threads {
            let (tx, rx) = std::sync::mpsc::sync_channel(self.depth);
            self.queues.push(rx);
            let (path, meta, mask) = (path.clone(), meta.clone(), mask.clone());
            std::thread::spawn(move || {
                for g in (t..groups).step_by(threads) {
                    let reader = File::open(&path).map_err(|e| e.into()).and_then(|f| {
                        ParquetRecordBatchReaderBuilder::new_with_metadata(f, meta.clone()).with_projection(mask.clone()).with_row_groups(vec![g]).with_batch_size(READ_BATCH_ROWS).build()
                    });
                    let sent = match reader {
                        Ok(r) => r.into_iter().all(|b| tx.send(Some(b)).is_ok()),
                        Err(e) => tx.send(Some(Err(e.into()))).is_ok(),
                    };
                    // Stop when the reader was dropped.
                    if !sent || tx.send(None).is_err() {
                        return;
                    }
                }
            });
        }
    }
}

impl Iterator for ParallelParquet {
    type Item = std::result::Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.start();
        while self.next_group < self.groups {
            match self.queues[self.next_group % self.queues.len()].recv() {
                Ok(Some(b)) => return Some(b),
                Ok(None) => self.next_group += 1,
                Err(_) => {
                    self.next_group = self.groups;
                    return Some(Err(ArrowError::ExternalError("a Parquet decoding thread stopped".into())));
                }
            }
        }
        None
    }
}

impl RecordBatchReader for ParallelParquet {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Record batches into a file of the format of its extension.
pub enum FileWriter {
    Parquet(ArrowWriter<BufWriter<File>>),
    Csv(csv::Writer<BufWriter<File>>),
    Arrow(ipc::writer::FileWriter<BufWriter<File>>),
    Json(json::LineDelimitedWriter<BufWriter<File>>),
}

impl FileWriter {
    /// Creates (or truncates) `path`; the format comes from its extension.
    pub fn create(path: &Path, schema: &SchemaRef) -> Result<FileWriter> {
        let format = Format::of(path)?;
        let file = File::create(path).map_err(|e| CliError::new(format!("cannot create {}: {e}", path.display())))?;
        let out = BufWriter::with_capacity(1 << 20, file);
        Ok(match format {
            Format::Parquet => FileWriter::Parquet(ArrowWriter::try_new(out, Arc::clone(schema), None).map_err(|e| CliError::in_file(path, CliError::new(e.to_string())))?),
            Format::Csv => FileWriter::Csv(csv::WriterBuilder::new().with_header(true).build(out)),
            Format::Arrow => FileWriter::Arrow(ipc::writer::FileWriter::try_new(out, schema).map_err(|e| CliError::in_file(path, e))?),
            Format::Json => FileWriter::Json(json::LineDelimitedWriter::new(out)),
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            FileWriter::Parquet(w) => w.write(batch).map_err(|e| CliError::new(e.to_string())),
            FileWriter::Csv(w) => w.write(batch).map_err(CliError::from),
            FileWriter::Arrow(w) => w.write(batch).map_err(CliError::from),
            FileWriter::Json(w) => w.write(batch).map_err(CliError::from),
        }
    }

    /// Writes the footer (Parquet, Arrow) and flushes.
    pub fn finish(self) -> Result<()> {
        use std::io::Write;
        match self {
            FileWriter::Parquet(w) => {
                w.close().map_err(|e| CliError::new(e.to_string()))?;
            }
            FileWriter::Csv(w) => w.into_inner().flush()?,
            FileWriter::Arrow(mut w) => {
                w.finish()?;
                w.into_inner()?.flush()?;
            }
            FileWriter::Json(mut w) => {
                w.finish()?;
                w.into_inner().flush()?;
            }
        }
        Ok(())
    }
}
