//! The one error type of gpujoin.

/// Everything that can go wrong in gpujoin. Every variant says what failed and with which sizes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The CUDA driver library (`libcuda.so`) could not be loaded.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// The driver is there but no usable device is.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// A device allocation failed even after the memory pool was trimmed and the allocation
    /// retried: `requested` bytes were asked for while the device had `free` bytes free and the
    /// pool held `reserved` bytes, `in_use` of them by live buffers.
    #[error(
        "out of device memory: asked for {requested} bytes while {free} bytes were free \
         (the memory pool held {reserved} bytes, {in_use} of them in use)"
    )]
    OutOfMemory { requested: u64, free: u64, reserved: u64, in_use: u64 },
    /// A CUDA call returned an error code.
    #[error("CUDA error {name} (code {code}) in {call}")]
    Cuda { call: String, code: i32, name: String },
    /// An argument is not acceptable, e.g. columns of different lengths.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A count exceeds what an index type or an underlying library can address.
    #[error("{what}: {count} exceeds the limit of {limit}")]
    TooLarge { what: String, count: u64, limit: u64 },
    /// An output would not fit in free device memory (or the caller's budget).
    #[error(
        "output of {rows} rows ({bytes} bytes) does not fit: {available} bytes available; \
         use the count-only `join_size` call and chunked retrieval (`join_chunks`) instead"
    )]
    OutputTooLarge { rows: u64, bytes: u64, available: u64 },
    /// A column name that the table does not have.
    #[error("unknown column {name:?}; the table has {available}")]
    UnknownColumn { name: String, available: String },
    /// Two things that must have comparable types do not, e.g. a key column of each side.
    #[error("{what}: {left} cannot be compared with {right}")]
    TypeMismatch { what: String, left: String, right: String },
    /// A valid input that the asked-for operation cannot serve (an explicit join algorithm and
    /// a key type, ...), refused before any device work: what was asked and why not.
    #[error("{what} is not supported: {reason}")]
    Unsupported { what: String, reason: String },
}

/// Result with gpujoin's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::InvalidArgument`] from anything printable.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// An [`Error::TooLarge`].
    pub fn too_large(what: impl Into<String>, count: u64, limit: u64) -> Self {
        Error::TooLarge { what: what.into(), count, limit }
    }
}

/// Checks that two lengths agree, naming them in the error.
///
/// ```
/// # use gpujoin_device::{check_same_len, Error};
/// assert!(check_same_len("keys", 3, "values", 3).is_ok());
/// assert!(matches!(check_same_len("keys", 3, "values", 2), Err(Error::InvalidArgument(_))));
/// ```
pub fn check_same_len(a_name: &str, a: usize, b_name: &str, b: usize) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::invalid(format!("{a_name} has {a} elements but {b_name} has {b}")))
    }
}

pub(crate) fn driver(call: &str, e: cudarc::driver::DriverError) -> Error {
    let name = e.error_name().map(|c| c.to_string_lossy().into_owned()).unwrap_or_else(|_| "?".into());
    Error::Cuda { call: call.to_string(), code: e.0 as i32, name }
}
