//! How chatty a call is: this thread's calls into the C ABI (kernel launches and CUB calls,
//! each phase of a two-phase CUB call counted) and its waits for the device (stream, event and
//! context synchronizations, including the one inside [`Stream::copy_to_host`](crate::Stream::copy_to_host)).
//!
//! The counters are per thread (a join runs on the thread that calls it), always on, and cost
//! one thread-local increment each. Take a snapshot before and after a call:
//!
//! ```
//! use gpujoin_device::counts::{call_counts, count_c_call};
//! let before = call_counts();
//! count_c_call(); // what a layer owning a C ABI does once per call into it
//! let d = call_counts().since(before);
//! assert_eq!((d.c_calls, d.host_waits), (1, 0));
//! ```

use std::cell::Cell;

thread_local! {
    static C_CALLS: Cell<u64> = const { Cell::new(0) };
    static HOST_WAITS: Cell<u64> = const { Cell::new(0) };
}

/// A snapshot of this thread's counters (totals since the thread started).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// Calls from Rust into the C ABI over the CUDA kernels and CUB.
    pub c_calls: u64,
    /// Times the host waited for the device.
    pub host_waits: u64,
}

impl CallCounts {
    /// The counts between `earlier` and `self`.
    pub fn since(self, earlier: CallCounts) -> CallCounts {
        CallCounts { c_calls: self.c_calls - earlier.c_calls, host_waits: self.host_waits - earlier.host_waits }
    }
}

/// This thread's counters now.
pub fn call_counts() -> CallCounts {
    CallCounts { c_calls: C_CALLS.with(Cell::get), host_waits: HOST_WAITS.with(Cell::get) }
}

/// Counts one call into the C ABI on this thread (called by the layer that owns it,
/// `gpujoin-cub-sys`'s `result` module).
pub fn count_c_call() {
    C_CALLS.with(|c| c.set(c.get() + 1));
}

/// Counts one wait of the host for the device on this thread.
pub(crate) fn count_host_wait() {
    HOST_WAITS.with(|c| c.set(c.get() + 1));
}
