//! `gpujoin join`: two files joined on the GPU (gpujoin-arrow's one call), the output streamed to
//! a file or printed; DataFusion's CPU join with `--cpu` or without a GPU.
//!
//! ```sh
//! gpujoin join orders.parquet customers.csv --on cust --right-on id --how left -o out.parquet
//! gpujoin join a.parquet b.parquet --on k --filter "l.ts < r.ts" --how semi
//! ```
//!
//! Output columns: the left file's, then the right file's (only one side for semi and anti
//! joins); a name both sides have is written `left.<name>` / `right.<name>`. Rows come in no
//! particular order. Outputs larger than device memory are produced and written in chunks.
//!
//! Only the columns the join uses are read (keys, output columns, the filter's); Parquet row
//! groups are decoded on several threads. On the GPU path a thread warms the device up while the
//! files are read, so that the join's reported time is its own.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use datafusion::arrow::array::{RecordBatch, RecordBatchReader};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::{Column, DFSchema, JoinSide, NullEquality};
use datafusion::config::FormatOptions;
use datafusion::logical_expr::{col, Expr, LogicalPlanBuilder};
use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
use datafusion::prelude::SessionContext;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::MaxRows;
use futures::StreamExt;
use gpujoin_arrow::JoinSpec;
use gpujoin_datafusion::GpuJoinConfig;
use gpujoin_join::{JoinType, NullEquality as GpuNullEquality};

use crate::error::{CliError, Result};
use crate::files::{FileReader, FileWriter};

/// `--how`: the join type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum How {
    Inner,
    Left,
    Right,
    Full,
    /// Left rows with a match.
    Semi,
    /// Left rows without a match.
    Anti,
    /// Right rows with a match.
    RightSemi,
    /// Right rows without a match.
    RightAnti,
}

impl How {
    pub fn join_type(self) -> JoinType {
        match self {
            How::Inner => JoinType::Inner,
            How::Left => JoinType::Left,
            How::Right => JoinType::Right,
            How::Full => JoinType::Full,
            How::Semi => JoinType::LeftSemi,
            How::Anti => JoinType::LeftAnti,
            How::RightSemi => JoinType::RightSemi,
            How::RightAnti => JoinType::RightAnti,
        }
    }

    fn datafusion(self) -> datafusion::common::JoinType {
        use datafusion::common::JoinType as D;
        match self {
            How::Inner => D::Inner,
            How::Left => D::Left,
            How::Right => D::Right,
            How::Full => D::Full,
            How::Semi => D::LeftSemi,
            How::Anti => D::LeftAnti,
            How::RightSemi => D::RightSemi,
            How::RightAnti => D::RightAnti,
        }
    }
}

/// What `gpujoin join` joins and where the output goes.
#[derive(Debug, Clone)]
pub struct JoinOptions {
    pub left: PathBuf,
    pub right: PathBuf,
    /// Key columns of the left file.
    pub on: Vec<String>,
    /// Key columns of the right file (empty: the same names as `on`).
    pub right_on: Vec<String>,
    pub how: How,
    /// A condition on matching pairs, SQL over `l.<column>` and `r.<column>`.
    pub filter: Option<String>,
    /// NULL keys match NULL keys (SQL's `IS NOT DISTINCT FROM`).
    pub nulls_equal: bool,
    /// The output columns of each side (`None`: every column of a side the join type returns).
    pub left_columns: Option<Vec<String>>,
    pub right_columns: Option<Vec<String>>,
    /// The output file (its extension gives the format); `None`: printed to stdout.
    pub output: Option<PathBuf>,
    pub cpu: bool,
    /// Produce the output in chunks of at most this many MiB of device memory.
    pub chunk_mb: Option<u64>,
    /// Warm the GPU up while the files are read (the pool grown to the planned peak, staging
    /// buffers, small joins).
    pub warm_up: WarmUp,
    pub format: PrintFormat,
    pub maxrows: MaxRows,
    pub quiet: bool,
}

/// Where the time of one `gpujoin join` went.
#[derive(Debug, Default, Clone, Copy)]
pub struct JoinReport {
    pub left_rows: u64,
    pub right_rows: u64,
    pub output_rows: u64,
    pub read: Duration,
    pub upload: Duration,
    pub join: Duration,
    pub download: Duration,
    pub write: Duration,
    pub total: Duration,
    pub chunks: u64,
    pub on_gpu: bool,
    /// Time the join waited for the GPU warm-up after the files were read.
    pub warm_up_wait: Duration,
}

impl std::fmt::Display for JoinReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |d: Duration| d.as_secs_f64();
        write!(f, "{} x {} rows -> {} rows in {:.3} s: read {:.3} s, ", self.left_rows, self.right_rows, self.output_rows, s(self.total), s(self.read))?;
        if self.warm_up_wait >= Duration::from_millis(1) {
            write!(f, "warm-up wait {:.3} s, ", s(self.warm_up_wait))?;
        }
        if self.on_gpu {
            write!(f, "upload {:.3} s, join {:.2} ms (GPU, {} chunk{}), download {:.3} s, ", s(self.upload), self.join.as_secs_f64() * 1e3, self.chunks, if self.chunks == 1 { "" } else { "s" }, s(self.download))?;
        } else {
            write!(f, "join {:.3} s (CPU, DataFusion), ", s(self.join))?;
        }
        write!(f, "write {:.3} s", s(self.write))
    }
}

/// The key columns of both sides, checked: they exist, pair up, and have types that join.
fn keys(o: &JoinOptions, ls: &Schema, rs: &Schema) -> Result<(Vec<String>, Vec<String>)> {
    let right_on = if o.right_on.is_empty() { o.on.clone() } else { o.right_on.clone() };
    if o.on.is_empty() {
        return Err(CliError::new("--on names no key column"));
    }
    if right_on.len() != o.on.len() {
        return Err(CliError::new(format!("--on names {} key columns and --right-on {}; they pair up one to one", o.on.len(), right_on.len())));
    }
    let field = |schema: &Schema, name: &str, path: &std::path::Path| {
        schema.field_with_name(name).cloned().map_err(|_| {
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            CliError::new(format!("unknown column `{name}` in {} (its columns: {})", path.display(), names.join(", ")))
        })
    };
    for (l, r) in o.on.iter().zip(&right_on) {
        let (lf, rf) = (field(ls, l, &o.left)?, field(rs, r, &o.right)?);
        let lt = gpujoin_arrow::device_type(l, lf.data_type()).map_err(|e| CliError::in_file(&o.left, e))?;
        let rt = gpujoin_arrow::device_type(r, rf.data_type()).map_err(|e| CliError::in_file(&o.right, e))?;
        if lt != rt {
            return Err(CliError::new(format!(
                "key types differ: `{l}` in {} is {}, `{r}` in {} is {} (cast one side first, e.g. with `gpujoin sql`)",
                o.left.display(),
                lf.data_type(),
                o.right.display(),
                rf.data_type()
            )));
        }
    }
    Ok((o.on.clone(), right_on))
}

/// The selected columns of each side, checked: `--left-columns` / `--right-columns`, or every
/// column of a side the join type returns.
fn selected(o: &JoinOptions, ls: &Schema, rs: &Schema) -> Result<(Vec<String>, Vec<String>)> {
    let jt = o.how.join_type();
    let side = |cols: &Option<Vec<String>>, s: &Schema, returned: bool, path: &std::path::Path, flag: &str| -> Result<Vec<String>> {
        match cols {
            None if returned => Ok(s.fields().iter().map(|f| f.name().clone()).collect()),
            None => Ok(Vec::new()),
            Some(c) if !returned && !c.is_empty() => Err(CliError::new(format!("{flag}: a {:?} join returns no columns of {}", o.how, path.display()))),
            Some(c) => {
                for n in c {
                    if s.field_with_name(n).is_err() {
                        let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
                        return Err(CliError::new(format!("{flag}: unknown column `{n}` in {} (its columns: {})", path.display(), names.join(", "))));
                    }
                }
                Ok(c.clone())
            }
        }
    };
    Ok((side(&o.left_columns, ls, jt.has_left_map(), &o.left, "--left-columns")?, side(&o.right_columns, rs, jt.has_right_map(), &o.right, "--right-columns")?))
}

/// The output names, as gpujoin-arrow names them: each side's selected columns, a name both
/// sides output prefixed `left.` / `right.`.
fn output_names(l: &[String], r: &[String]) -> (Vec<(String, String)>, Vec<(String, String)>) {
    let out = |mine: &[String], other: &[String], prefix: &str| mine.iter().map(|n| (n.clone(), if other.contains(n) { format!("{prefix}{n}") } else { n.clone() })).collect();
    (out(l, r, "left."), out(r, l, "right."))
}

/// The filter as DataFusion's expression over the two files (`l.` / `r.` qualifiers), and the
/// schema it refers to (the left columns, then the right ones).
fn parse_filter(ctx: &SessionContext, text: &str, ls: &SchemaRef, rs: &SchemaRef) -> Result<(Expr, DFSchema)> {
    let l = DFSchema::try_from_qualified_schema("l", ls)?;
    let r = DFSchema::try_from_qualified_schema("r", rs)?;
    let both = l.join(&r)?;
    let expr = ctx.parse_sql_expr(text, &both).map_err(|e| CliError::new(format!("--filter {text:?}: {}", CliError::from(e))))?;
    Ok((expr, both))
}

/// Runs `gpujoin join`.
pub async fn run(o: JoinOptions) -> Result<JoinReport> {
    let start = Instant::now();
    let left = FileReader::open(&o.left)?;
    let right = FileReader::open(&o.right)?;
    let (ls, rs) = (left.schema_ref(), right.schema_ref());
    let (left_on, right_on) = keys(&o, &ls, &rs)?;
    let select = selected(&o, &ls, &rs)?;
    let ctx = crate::session::context(true, crate::session::BATCH_ROWS, None, None)?;
    // Read only the columns the join uses: keys, output columns, the filter's.
    let (mut lneed, mut rneed): (Vec<String>, Vec<String>) = (left_on.iter().chain(&select.0).cloned().collect(), right_on.iter().chain(&select.1).cloned().collect());
    if let Some(text) = &o.filter {
        let (expr, _) = parse_filter(&ctx, text, &ls, &rs)?;
        for c in expr.column_refs() {
            match c.relation.as_ref().map(|r| r.table()) {
                Some("l") => lneed.push(c.name.clone()),
                Some("r") => rneed.push(c.name.clone()),
                _ => {}
            }
        }
    }
    let (left, right) = (left.project(&lneed)?, right.project(&rneed)?);
    let (ls, rs) = (left.schema_ref(), right.schema_ref());
    let filter = match &o.filter {
        Some(text) => Some(parse_filter(&ctx, text, &ls, &rs)?),
        None => None,
    };
    let gpu = if o.cpu { Err("--cpu".to_string()) } else { crate::session::gpu() };
    if let Err(why) = &gpu {
        if !o.cpu && !o.quiet {
            eprintln!("gpujoin: no GPU ({why}): joining on the CPU with DataFusion");
        }
    }
    let mut report = if gpu.is_ok() {
        join_on_gpu(&o, &ctx, left, right, &left_on, &right_on, &select, filter).await?
    } else {
        join_on_cpu(&o, &ctx, left, right, &left_on, &right_on, &select, filter).await?
    };
    report.total = start.elapsed();
    Ok(report)
}

/// Where the output goes: a file, or stdout (at most `maxrows` rows kept for printing).
enum Output {
    File(FileWriter),
    Print { schema: SchemaRef, batches: Vec<RecordBatch>, kept: usize },
}

/// The output, with the rows it took and the time spent writing them.
struct Sink {
    output: Output,
    rows: u64,
    write: Duration,
}

impl Sink {
    fn new(o: &JoinOptions, schema: &SchemaRef) -> Result<Sink> {
        let output = match &o.output {
            Some(path) => Output::File(FileWriter::create(path, schema)?),
            None => Output::Print { schema: Arc::clone(schema), batches: Vec::new(), kept: 0 },
        };
        Ok(Sink { output, rows: 0, write: Duration::ZERO })
    }

    fn write(&mut self, b: RecordBatch, maxrows: MaxRows) -> Result<()> {
        let start = Instant::now();
        self.rows += b.num_rows() as u64;
        match &mut self.output {
            Output::File(w) => w.write(&b)?,
            Output::Print { batches, kept, .. } => {
                let limit = match maxrows {
                    MaxRows::Unlimited => usize::MAX,
                    MaxRows::Limited(n) => n,
                };
                if *kept < limit {
                    *kept += b.num_rows();
                    batches.push(b);
                }
            }
        }
        self.write += start.elapsed();
        Ok(())
    }

    /// Closes the file (or prints the rows kept); returns the rows and the time spent writing.
    fn finish(self, o: &JoinOptions) -> Result<(u64, Duration)> {
        let start = Instant::now();
        match self.output {
            Output::File(w) => w.finish()?,
            Output::Print { schema, batches, .. } => {
                let mut out = std::io::stdout().lock();
                o.format.print_batches(&mut out, schema, &batches, o.maxrows, true, &FormatOptions::default())?;
            }
        }
        Ok((self.rows, self.write + start.elapsed()))
    }
}

#[allow(clippy::too_many_arguments)]
async fn join_on_gpu(o: &JoinOptions, ctx: &SessionContext, left: FileReader, right: FileReader, left_on: &[String], right_on: &[String], select: &(Vec<String>, Vec<String>), filter: Option<(Expr, DFSchema)>) -> Result<JoinReport> {
    let (ls, rs) = (left.schema_ref(), right.schema_ref());
    // Every column must go to the device: say which one cannot before reading anything more.
    gpujoin_arrow::device_types(&ls).map_err(|e| CliError::in_file(&o.left, e))?;
    gpujoin_arrow::device_types(&rs).map_err(|e| CliError::in_file(&o.right, e))?;
    let jt = o.how.join_type();
    let lo: Vec<&str> = left_on.iter().map(String::as_str).collect();
    let ro: Vec<&str> = right_on.iter().map(String::as_str).collect();
    let ls_: Vec<&str> = select.0.iter().map(String::as_str).collect();
    let rs_: Vec<&str> = select.1.iter().map(String::as_str).collect();
    let mut spec = JoinSpec::new(jt, &lo, &ro).select(&ls_, &rs_).batch_rows(crate::session::BATCH_ROWS);
    if o.nulls_equal {
        spec = spec.null_equality(GpuNullEquality::NullEqualsNull);
    }
    if let Some(mb) = o.chunk_mb {
        spec = spec.chunks_of(mb.max(1) << 20);
    }
    if let Some((expr, schema)) = filter {
        let physical = ctx.create_physical_expr(expr, &schema)?;
        let nl = ls.fields().len();
        let indices = (0..schema.fields().len()).map(|i| if i < nl { ColumnIndex { index: i, side: JoinSide::Left } } else { ColumnIndex { index: i - nl, side: JoinSide::Right } }).collect();
        let join_filter = JoinFilter::new(physical, indices, Arc::clone(schema.inner()));
        let p = gpujoin_datafusion::translate::filter_predicate(&join_filter, &ls, &rs, &GpuJoinConfig::default())
            .map_err(|r| CliError::new(format!("--filter {}: the GPU cannot evaluate it ({}); run with --cpu", o.filter.as_deref().unwrap_or(""), r.0)))?;
        spec = spec.filter(p);
    }
    let (lread, rread) = (left.counters(), right.counters());
    let (lrows, rrows) = (left.rows_hint(), right.rows_hint());
    let ahead = Ahead {
        pool_bytes: planned_peak_bytes(&ls, &rs, lrows, rrows, left_on, &select.0, &select.1),
        // The output of a key-foreign-key join: the larger side's rows (unknown: nothing).
        output_rows: if lrows == 0 || rrows == 0 { 0 } else { lrows.max(rrows) as usize },
        output_columns: output_device_columns(&ls, &rs, &select.0, &select.1, jt),
    };
    // Small inputs: no warm-up (it would cost more than the one-time costs it takes off the join).
    let file_bytes = [&o.left, &o.right].iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum::<u64>();
    let wanted = match o.warm_up {
        WarmUp::Auto => file_bytes >= WARM_UP_MIN_FILE_BYTES,
        WarmUp::On => true,
        WarmUp::Off => false,
    };
    let warm = wanted.then(|| warm_up(&ls, &rs, left_on, right_on, &select.0, &select.1, jt, ahead));
    let reading = crate::progress::reading(&[&left, &right]);
    let stream = gpujoin_device::Device::new(0)?.new_stream()?;
    // The right side is read last: its end waits for the warm-up, so that the join does not run
    // beside it.
    let waited = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let right = AfterWarmUp { inner: right, warm, waited: Arc::clone(&waited) };
    let reader = gpujoin_arrow::join_on(&stream, left, right, spec);
    reading.finish();
    let reader = reader?;
    let bar = crate::progress::spinner("joining");
    let mut sink = Sink::new(o, &reader.schema())?;
    let mut reader = reader;
    for b in reader.by_ref() {
        sink.write(b?, o.maxrows)?;
        bar.set_message(format!("{} rows out", sink.rows));
    }
    let (output_rows, write) = sink.finish(o)?;
    bar.finish_and_clear();
    let times = reader.times();
    let read = lread.time() + rread.time();
    let warm_up_wait = Duration::from_nanos(waited.load(std::sync::atomic::Ordering::Relaxed));
    Ok(JoinReport {
        left_rows: lread.rows(),
        right_rows: rread.rows(),
        output_rows,
        read,
        upload: times.upload.saturating_sub(read + warm_up_wait),
        warm_up_wait,
        join: times.join,
        download: times.download,
        write,
        total: Duration::ZERO,
        chunks: times.chunks,
        on_gpu: true,
    })
}

/// `--warm-up`: whether a thread warms the GPU up while the files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WarmUp {
    /// For input files of [`WARM_UP_MIN_FILE_BYTES`] or more together.
    Auto,
    On,
    Off,
}

/// Input files smaller than this together get no GPU warm-up by default.
pub const WARM_UP_MIN_FILE_BYTES: u64 = 64 << 20;

/// The right reader of a GPU join: at its end it waits for the warm-up thread (the time waited
/// counts in `waited`, nanoseconds).
struct AfterWarmUp {
    inner: FileReader,
    warm: Option<std::thread::JoinHandle<()>>,
    waited: Arc<std::sync::atomic::AtomicU64>,
}

impl Iterator for AfterWarmUp {
    type Item = std::result::Result<RecordBatch, datafusion::arrow::error::ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        let next = self.inner.next();
        if next.is_none() {
            if let Some(w) = self.warm.take() {
                let t = Instant::now();
                let _ = w.join();
                self.waited.fetch_add(t.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
            }
        }
        next
    }
}

impl RecordBatchReader for AfterWarmUp {
    fn schema(&self) -> SchemaRef {
        self.inner.schema_ref()
    }
}

/// What the warm-up makes ahead of the join.
struct Ahead {
    /// Device memory for the memory pool ([`planned_peak_bytes`]).
    pool_bytes: u64,
    /// The download's pinned blocks for this many rows of these columns.
    output_rows: usize,
    output_columns: Vec<(gpujoin_join::table::DataType, bool)>,
}

/// The output columns' device types, and whether they may hold NULLs (nullable in the file, or
/// padded by an outer join).
fn output_device_columns(ls: &Schema, rs: &Schema, lsel: &[String], rsel: &[String], jt: JoinType) -> Vec<(gpujoin_join::table::DataType, bool)> {
    let pads_left = matches!(jt, JoinType::Right | JoinType::Full);
    let pads_right = matches!(jt, JoinType::Left | JoinType::Full);
    let side = |s: &Schema, sel: &[String], pads: bool| -> Vec<(gpujoin_join::table::DataType, bool)> {
        sel.iter()
            .filter_map(|n| {
                let f = s.field_with_name(n).ok()?;
                Some((gpujoin_arrow::device_type(n, f.data_type()).ok()?, f.is_nullable() || pads))
            })
            .collect()
    };
    let mut out = side(ls, lsel, pads_left);
    out.extend(side(rs, rsel, pads_right));
    out
}

/// The device memory to reserve for the join ahead of it, from the Parquet row counts (0, no
/// reservation, when a side's rows are not known before reading): the peak of the partitioned
/// hash join with unclustered payloads (the largest of `Auto`'s usual choices), inputs included,
/// for a key-foreign-key output of `max(L, R)` rows. A hint: a join that needs more grows the
/// pool as it goes.
fn planned_peak_bytes(ls: &Schema, rs: &Schema, l_rows: u64, r_rows: u64, left_on: &[String], lsel: &[String], rsel: &[String]) -> u64 {
    use gpujoin_join::memory::{peak_bytes, JoinSizes, KeyShape, Payloads, PeakAlgorithm};
    if l_rows == 0 || r_rows == 0 {
        return 0;
    }
    // Fixed-width columns by their width; strings and the like as 16 bytes a row.
    let width = |s: &Schema, n: &String| s.field_with_name(n).ok().and_then(|f| f.data_type().primitive_width()).unwrap_or(16) as u32;
    let key_bytes: u32 = left_on.iter().map(|n| width(ls, n)).sum();
    let keys = KeyShape::integer(if key_bytes <= 4 { 4 } else { 8 });
    let (lw, rw): (Vec<u32>, Vec<u32>) = (lsel.iter().map(|n| width(ls, n)).collect(), rsel.iter().map(|n| width(rs, n)).collect());
    let sizes = JoinSizes::inner(l_rows, r_rows, keys, l_rows.max(r_rows)).with_payloads(Payloads::of_widths(&lw), Payloads::of_widths(&rw));
    peak_bytes(PeakAlgorithm::PartitionedHashJoinWithPayloads(gpujoin_join::Materialization::Unclustered), &sizes)
}

/// A process's first GPU join pays one-time costs: the CUDA runtime's start, kernel modules
/// loaded on first launch, the memory pool's growth to the join's size. A thread pays them while
/// the files are read, so that the reported join time is the join's, as a warmed-up benchmark
/// measures it: it grows the pool to the planned peak ([`planned_peak_bytes`]; the uploads and
/// the join then allocate from memory the pool holds), page-locks the uploads' staging buffers
/// and the download's pinned blocks for the expected output, then runs small joins (2^16 rows,
/// the same column types, the algorithms `Auto` may choose). Errors are ignored (the real join
/// reports its own).
#[allow(clippy::too_many_arguments)]
fn warm_up(ls: &SchemaRef, rs: &SchemaRef, left_on: &[String], right_on: &[String], lsel: &[String], rsel: &[String], jt: JoinType, ahead: Ahead) -> std::thread::JoinHandle<()> {
    use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatchIterator};
    use gpujoin_join::plan::{Algorithm, Gather};
    let batch = |schema: &SchemaRef, names: Vec<String>| -> Option<RecordBatch> {
        let base: ArrayRef = Arc::new(Int64Array::from_iter_values(0..1 << 16));
        let mut fields = Vec::new();
        let mut columns = Vec::new();
        for n in names {
            if fields.iter().any(|f: &datafusion::arrow::datatypes::Field| f.name() == &n) {
                continue;
            }
            let f = schema.field_with_name(&n).ok()?;
            columns.push(datafusion::arrow::compute::cast(&base, f.data_type()).ok()?);
            fields.push(datafusion::arrow::datatypes::Field::new(n, f.data_type().clone(), true));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).ok()
    };
    let l = batch(ls, left_on.iter().chain(lsel).cloned().collect());
    let r = batch(rs, right_on.iter().chain(rsel).cloned().collect());
    let (lo, ro, lsel, rsel) = (left_on.to_vec(), right_on.to_vec(), lsel.to_vec(), rsel.to_vec());
    std::thread::spawn(move || {
        let Ok(stream) = gpujoin_device::Device::new(0).and_then(|d| d.new_stream()) else { return };
        let _ = stream.reserve_pool(ahead.pool_bytes);
        let _ = gpujoin_arrow::StagingOptions::default().prepare(stream.device());
        let download = gpujoin_arrow::DownloadOptions { batch_rows: crate::session::BATCH_ROWS, ..Default::default() };
        let _ = download.prepare(stream.device(), &ahead.output_columns, ahead.output_rows);
        let (Some(l), Some(r)) = (l, r) else { return };
        let (lo, ro, ls_, rs_): (Vec<&str>, Vec<&str>, Vec<&str>, Vec<&str>) =
            (lo.iter().map(String::as_str).collect(), ro.iter().map(String::as_str).collect(), lsel.iter().map(String::as_str).collect(), rsel.iter().map(String::as_str).collect());
        for algorithm in [Algorithm::Auto, Algorithm::PartitionedHash(Gather::Unclustered), Algorithm::PartitionedHash(Gather::Clustered), Algorithm::SortMerge(Gather::Unclustered), Algorithm::Hash] {
            let spec = JoinSpec::new(jt, &lo, &ro).select(&ls_, &rs_).algorithm(algorithm);
            let (lb, rb) = (l.clone(), r.clone());
            let (lsch, rsch) = (lb.schema(), rb.schema());
            if let Ok(out) = gpujoin_arrow::join_on(&stream, RecordBatchIterator::new([Ok(lb)], lsch), RecordBatchIterator::new([Ok(rb)], rsch), spec) {
                for _ in out {}
            }
        }
    })
}

#[allow(clippy::too_many_arguments)]
async fn join_on_cpu(o: &JoinOptions, ctx: &SessionContext, left: FileReader, right: FileReader, left_on: &[String], right_on: &[String], select: &(Vec<String>, Vec<String>), filter: Option<(Expr, DFSchema)>) -> Result<JoinReport> {
    let (lread, rread) = (left.counters(), right.counters());
    let reading = crate::progress::reading(&[&left, &right]);
    let (lb, rb) = (left.read_all(), right.read_all());
    reading.finish();
    let (lb, rb) = (lb?, rb?);
    let read = lread.time() + rread.time();
    let t = Instant::now();
    let l = ctx.read_batches(lb)?.alias("l")?.into_unoptimized_plan();
    let r = ctx.read_batches(rb)?.alias("r")?.into_unoptimized_plan();
    let lk: Vec<Column> = left_on.iter().map(|n| Column::new(Some("l"), n)).collect();
    let rk: Vec<Column> = right_on.iter().map(|n| Column::new(Some("r"), n)).collect();
    let nulls = if o.nulls_equal { NullEquality::NullEqualsNull } else { NullEquality::NullEqualsNothing };
    let (lnames, rnames) = output_names(&select.0, &select.1);
    let project: Vec<Expr> = lnames
        .iter()
        .map(|(n, out)| col(Column::new(Some("l"), n)).alias(out))
        .chain(rnames.iter().map(|(n, out)| col(Column::new(Some("r"), n)).alias(out)))
        .collect();
    let plan = LogicalPlanBuilder::from(l).join_detailed(r, o.how.datafusion(), (lk, rk), filter.map(|(e, _)| e), nulls)?.project(project)?.build()?;
    let df = ctx.execute_logical_plan(plan).await?;
    let mut stream = df.execute_stream().await?;
    let mut sink = Sink::new(o, &stream.schema())?;
    while let Some(b) = stream.next().await {
        sink.write(b?, o.maxrows)?;
    }
    let (output_rows, write) = sink.finish(o)?;
    Ok(JoinReport { left_rows: lread.rows(), right_rows: rread.rows(), output_rows, read, join: t.elapsed().saturating_sub(write), write, on_gpu: false, ..JoinReport::default() })
}
