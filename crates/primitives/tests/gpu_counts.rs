//! `gpujoin_device::counts` on the GPU: each call into the C ABI counts once (CUB's two-phase
//! calls twice), each wait of the host for the device once, and nothing else does; the counts
//! are this thread's (another thread's calls do not show); allocations from the pool count once
//! each, and the waits' time adds up.

use gpujoin_device::counts::{call_counts, CallCounts};
use gpujoin_device::testing::device_or_skip;
use gpujoin_primitives::{inclusive_sum, iota_u32};

/// (calls into C, host waits, allocations, frees).
fn counted(c: CallCounts) -> (u64, u64, u64, u64) {
    (c.c_calls, c.host_waits, c.allocs, c.frees)
}

#[test]
fn calls_into_c_and_host_waits_are_counted_per_thread() {
    let Some(d) = device_or_skip("calls_into_c_and_host_waits_are_counted_per_thread") else { return };
    let s = d.new_stream().unwrap();
    let mut ids = s.alloc::<u32>(1000).unwrap();
    let mut sums = s.alloc::<u32>(1000).unwrap();
    let before = call_counts();
    // One single-phase kernel: one call, no wait.
    iota_u32(&s, &mut ids.view_mut(), 1).unwrap();
    assert_eq!(counted(call_counts().since(before)), (1, 0, 0, 0));
    let so_far = call_counts().since(before);
    assert_eq!((so_far.host_wait_time, so_far.pool_call_time), (std::time::Duration::ZERO, std::time::Duration::ZERO), "no wait, no pool call: no time");
    assert!(so_far.c_call_time > std::time::Duration::ZERO, "the launch's time is counted");
    // CUB's scan: its size query, its temporary storage (allocated and freed) and its run.
    inclusive_sum(&s, &ids.view(), &mut sums.view_mut()).unwrap();
    assert_eq!(counted(call_counts().since(before)), (3, 0, 1, 1));
    assert!(call_counts().since(before).pool_call_time > std::time::Duration::ZERO, "the pool calls' time is counted");
    // Reading the result back waits once, and that wait took some time.
    let host = s.copy_to_host(&sums.view()).unwrap();
    assert_eq!(host[999], 1000 * 1001 / 2, "the scan's last sum");
    assert_eq!(counted(call_counts().since(before)), (3, 1, 1, 1));
    assert!(call_counts().since(before).host_wait_time > std::time::Duration::ZERO, "the wait's time is counted");
    // Another thread's calls are its own.
    let other = std::thread::spawn(move || {
        let t = d.new_stream().unwrap();
        let mut v = t.alloc::<u32>(10).unwrap();
        let start = call_counts();
        iota_u32(&t, &mut v.view_mut(), 0).unwrap();
        t.synchronize().unwrap();
        call_counts().since(start)
    })
    .join()
    .unwrap();
    assert_eq!(counted(other), (1, 1, 0, 0));
    assert_eq!(counted(call_counts().since(before)), (3, 1, 1, 1), "the other thread's calls are not this thread's");
}
