//! How chatty a call is: this thread's calls into the C ABI (kernel launches and CUB calls,
//! each phase of a two-phase CUB call counted), its waits for the device (stream, event and
//! context synchronizations, including the one inside [`Stream::copy_to_host`](crate::Stream::copy_to_host))
//! with the time they took, and its allocations from the device's pool.
//!
//! The counters are per thread (a join runs on the thread that calls it), always on, and cost
//! one thread-local increment each. Take a snapshot before and after a call:
//!
//! ```
//! use gpujoin_device::counts::{call_counts, count_c_call};
//! let before = call_counts();
//! count_c_call(); // what a layer owning a C ABI does once per call into it
//! let d = call_counts().since(before);
//! assert_eq!((d.c_calls, d.host_waits, d.allocs), (1, 0, 0));
//! assert_eq!(d.host_wait_time, std::time::Duration::ZERO);
//! ```

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    static C_CALLS: Cell<u64> = const { Cell::new(0) };
    static HOST_WAITS: Cell<u64> = const { Cell::new(0) };
    static HOST_WAIT_NANOS: Cell<u64> = const { Cell::new(0) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// A snapshot of this thread's counters (totals since the thread started).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// Calls from Rust into the C ABI over the CUDA kernels and CUB.
    pub c_calls: u64,
    /// Times the host waited for the device.
    pub host_waits: u64,
    /// The time those waits took (the wait calls' wall time: the device's work still queued
    /// when the wait began, and the driver's own cost of the call).
    pub host_wait_time: Duration,
    /// Allocations from the device's stream-ordered pool (each a driver call).
    pub allocs: u64,
}

impl CallCounts {
    /// The counts between `earlier` and `self`.
    pub fn since(self, earlier: CallCounts) -> CallCounts {
        CallCounts {
            c_calls: self.c_calls - earlier.c_calls,
            host_waits: self.host_waits - earlier.host_waits,
            host_wait_time: self.host_wait_time.saturating_sub(earlier.host_wait_time),
            allocs: self.allocs - earlier.allocs,
        }
    }
}

/// This thread's counters now.
pub fn call_counts() -> CallCounts {
    CallCounts {
        c_calls: C_CALLS.with(Cell::get),
        host_waits: HOST_WAITS.with(Cell::get),
        host_wait_time: Duration::from_nanos(HOST_WAIT_NANOS.with(Cell::get)),
        allocs: ALLOCS.with(Cell::get),
    }
}

/// Counts one call into the C ABI on this thread (called by the layer that owns it,
/// `gpujoin-cub-sys`'s `result` module).
pub fn count_c_call() {
    C_CALLS.with(|c| c.set(c.get() + 1));
}

/// Runs `wait`, one wait of the host for the device on this thread, counting it and its time.
pub(crate) fn host_wait<R>(wait: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = wait();
    let nanos = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
    HOST_WAITS.with(|c| c.set(c.get() + 1));
    HOST_WAIT_NANOS.with(|c| c.set(c.get().saturating_add(nanos)));
    r
}

/// Counts one allocation from the device's pool on this thread.
pub(crate) fn count_alloc() {
    ALLOCS.with(|c| c.set(c.get() + 1));
}
