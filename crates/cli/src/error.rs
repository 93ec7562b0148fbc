//! [`CliError`]: what went wrong, as the one line `gpujoin` prints before it exits with status 1.

use std::fmt;
use std::path::Path;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::parquet::errors::ParquetError;

/// A user-facing error: one line, no backtrace.
///
/// `CliError::new("unknown column `kk` in left.csv (columns: k, v)")` prints as
/// `gpujoin: error: unknown column `kk` in left.csv (columns: k, v)`.
#[derive(Debug)]
pub struct CliError(String);

pub type Result<T, E = CliError> = std::result::Result<T, E>;

impl CliError {
    pub fn new(message: impl Into<String>) -> CliError {
        CliError(message.into())
    }

    /// The error with a file named first: `left.parquet: <error>`.
    pub fn in_file(path: &Path, e: impl Into<CliError>) -> CliError {
        CliError(format!("{}: {}", path.display(), e.into().0))
    }

    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line: errors that carry several (DataFusion's contexts, backtraces) are joined.
        let one_line: Vec<&str> = self.0.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        write!(f, "{}", one_line.join(" "))
    }
}

impl std::error::Error for CliError {}

/// gpujoin's errors, with what to do about running out of device memory.
impl From<gpujoin_device::Error> for CliError {
    fn from(e: gpujoin_device::Error) -> CliError {
        CliError(describe_gpu_error(&e))
    }
}

/// `e`'s message; out of device memory also says which `gpujoin join --chunk-mb` would fit.
pub fn describe_gpu_error(e: &gpujoin_device::Error) -> String {
    use gpujoin_device::Error;
    match e {
        Error::OutOfMemory { requested, free, reserved, in_use } => {
            let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
            let chunk = (free / 4).max(1 << 20) >> 20;
            format!(
                "out of device memory: asked for {:.1} MiB while {:.1} MiB were free ({:.1} MiB reserved by the pool, {:.1} MiB in use); the inputs must fit on the device, the output need not: `gpujoin join ... --chunk-mb {chunk}` produces it in chunks of {chunk} MiB",
                mib(*requested),
                mib(*free),
                mib(*reserved),
                mib(*in_use)
            )
        }
        Error::OutputTooLarge { rows, bytes, available } => format!(
            "the join's output ({rows} rows, {:.1} MiB) does not fit in the {:.1} MiB of free device memory: `gpujoin join ... --chunk-mb {}` produces it in chunks",
            *bytes as f64 / (1u64 << 20) as f64,
            *available as f64 / (1u64 << 20) as f64,
            (available / 4).max(1 << 20) >> 20
        ),
        other => other.to_string(),
    }
}

impl From<DataFusionError> for CliError {
    fn from(e: DataFusionError) -> CliError {
        // A gpujoin error inside DataFusion's (GpuJoinExec's) gets gpujoin's message.
        let gpu = match e.find_root() {
            DataFusionError::External(inner) => inner.downcast_ref::<gpujoin_device::Error>(),
            DataFusionError::ArrowError(a, _) => gpu_error_in(a),
            _ => None,
        };
        CliError(gpu.map_or_else(|| e.to_string(), describe_gpu_error))
    }
}

/// The gpujoin error an Arrow error carries (what `JoinReader` yields), if any.
fn gpu_error_in(e: &ArrowError) -> Option<&gpujoin_device::Error> {
    match e {
        ArrowError::ExternalError(inner) => inner.downcast_ref::<gpujoin_device::Error>(),
        _ => None,
    }
}

impl From<ArrowError> for CliError {
    fn from(e: ArrowError) -> CliError {
        CliError(gpu_error_in(&e).map_or_else(|| e.to_string(), describe_gpu_error))
    }
}

impl From<ParquetError> for CliError {
    fn from(e: ParquetError) -> CliError {
        CliError(format!("not a readable Parquet file: {e}"))
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> CliError {
        CliError(e.to_string())
    }
}
