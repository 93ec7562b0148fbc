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
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;

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
        let start = Instant::now();
        let format = Format::of(path)?;
        let file = File::open(path).map_err(|e| CliError::new(format!("cannot open {}: {e}", path.display())))?;
        let err = |e: CliError| CliError::in_file(path, e);
        let (inner, rows): (Box<dyn RecordBatchReader + Send>, u64) = match format {
            Format::Parquet => {
                let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(e.into()))?;
                let rows = b.metadata().file_metadata().num_rows().max(0) as u64;
                (Box::new(b.with_batch_size(READ_BATCH_ROWS).build().map_err(|e| err(e.into()))?), rows)
            }
            Format::Csv => {
                let mut file = file;
                let (schema, _) = csv::reader::Format::default()
                    .with_header(true)
                    .infer_schema(&mut file, Some(INFER_ROWS))
                    .map_err(|e| err(CliError::new(format!("not a readable CSV file: {e}"))))?;
                file.seek(SeekFrom::Start(0))?;
                let r = csv::ReaderBuilder::new(Arc::new(schema)).with_header(true).with_batch_size(READ_BATCH_ROWS).build(file).map_err(|e| err(e.into()))?;
                (Box::new(r), 0)
            }
            Format::Arrow => {
                let r = ipc::reader::FileReader::try_new(BufReader::new(file), None).map_err(|e| err(CliError::new(format!("not a readable Arrow IPC file: {e}"))))?;
                (Box::new(r), 0)
            }
            Format::Json => {
                let mut reader = BufReader::new(file);
                let (schema, _) = json::reader::infer_json_schema_from_seekable(&mut reader, Some(INFER_ROWS))
                    .map_err(|e| err(CliError::new(format!("not a readable newline-delimited JSON file: {e}"))))?;
                let r = json::ReaderBuilder::new(Arc::new(schema)).with_batch_size(READ_BATCH_ROWS).build(reader).map_err(|e| err(e.into()))?;
                (Box::new(r), 0)
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
