//! How chatty a call is: this thread's calls into the C ABI (kernel launches and CUB calls,
//! each phase of a two-phase CUB call counted), its waits for the device (stream, event and
//! context synchronizations, including the one inside [`Stream::copy_to_host`](crate::Stream::copy_to_host))
//! with the time they took, and its allocations from the device's pool and frees back to it.
//! The time of the calls into the C ABI and of the pool's calls is counted too: on a host whose
//! cores are all busy, a driver call can take far longer than the device work it queues.
//!
//! The counters are per thread (a join runs on the thread that calls it), always on, and cost
//! one thread-local increment each. Take a snapshot before and after a call:
//!
//! ```
//! use gpujoin_device::counts::{c_call, call_counts};
//! let before = call_counts();
//! c_call(|| 0); // what a layer owning a C ABI wraps each call into it in
//! let d = call_counts().since(before);
//! assert_eq!((d.c_calls, d.host_waits, d.allocs, d.frees), (1, 0, 0, 0));
//! assert_eq!(d.host_wait_time, std::time::Duration::ZERO);
//! ```

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    static C_CALLS: Cell<u64> = const { Cell::new(0) };
    static HOST_WAITS: Cell<u64> = const { Cell::new(0) };
    static HOST_WAIT_NANOS: Cell<u64> = const { Cell::new(0) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static FREES: Cell<u64> = const { Cell::new(0) };
    static C_CALL_NANOS: Cell<u64> = const { Cell::new(0) };
    static POOL_CALL_NANOS: Cell<u64> = const { Cell::new(0) };
}

fn timed<R>(total: &'static std::thread::LocalKey<Cell<u64>>, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    let nanos = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
    total.with(|c| c.set(c.get().saturating_add(nanos)));
    r
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
    /// Allocations from the device's stream-ordered pool, and frees back to it (each a driver
    /// call).
    pub allocs: u64,
    pub frees: u64,
    /// The time of the calls into the C ABI counted by [`c_call`] (queueing the kernels: the
    /// driver's launch calls) and of the pool's allocations and frees.
    pub c_call_time: Duration,
    pub pool_call_time: Duration,
}

impl CallCounts {
    /// The counts between `earlier` and `self`.
    pub fn since(self, earlier: CallCounts) -> CallCounts {
        CallCounts {
            c_calls: self.c_calls - earlier.c_calls,
            host_waits: self.host_waits - earlier.host_waits,
            host_wait_time: self.host_wait_time.saturating_sub(earlier.host_wait_time),
            allocs: self.allocs - earlier.allocs,
            frees: self.frees - earlier.frees,
            c_call_time: self.c_call_time.saturating_sub(earlier.c_call_time),
            pool_call_time: self.pool_call_time.saturating_sub(earlier.pool_call_time),
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
        frees: FREES.with(Cell::get),
        c_call_time: Duration::from_nanos(C_CALL_NANOS.with(Cell::get)),
        pool_call_time: Duration::from_nanos(POOL_CALL_NANOS.with(Cell::get)),
    }
}

/// Runs `call`, one call into the C ABI on this thread, counting it and its time (called by the
/// layer that owns the ABI, `gpujoin-cub-sys`'s `result` module).
pub fn c_call<R>(call: impl FnOnce() -> R) -> R {
    C_CALLS.with(|c| c.set(c.get() + 1));
    timed(&C_CALL_NANOS, call)
}

/// Runs `wait`, one wait of the host for the device on this thread, counting it and its time.
pub(crate) fn host_wait<R>(wait: impl FnOnce() -> R) -> R {
    HOST_WAITS.with(|c| c.set(c.get() + 1));
    timed(&HOST_WAIT_NANOS, wait)
}

/// Runs `alloc`, one allocation from the device's pool on this thread, counting it and its time.
pub(crate) fn pool_alloc<R>(alloc: impl FnOnce() -> R) -> R {
    ALLOCS.with(|c| c.set(c.get() + 1));
    timed(&POOL_CALL_NANOS, alloc)
}

/// Runs `free`, one free back to the device's pool on this thread, counting it and its time.
pub(crate) fn pool_free<R>(free: impl FnOnce() -> R) -> R {
    FREES.with(|c| c.set(c.get() + 1));
    timed(&POOL_CALL_NANOS, free)
}
