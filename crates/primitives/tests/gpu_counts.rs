//! `gpujoin_device::counts` on the GPU: each call into the C ABI counts once (CUB's two-phase
//! calls twice), each wait of the host for the device once, and nothing else does; the counts
//! are this thread's (another thread's calls do not show).

use gpujoin_device::counts::{call_counts, CallCounts};
use gpujoin_device::testing::device_or_skip;
use gpujoin_primitives::{inclusive_sum, iota_u32};

#[test]
fn calls_into_c_and_host_waits_are_counted_per_thread() {
    let Some(d) = device_or_skip("calls_into_c_and_host_waits_are_counted_per_thread") else { return };
    let s = d.new_stream().unwrap();
    let mut ids = s.alloc::<u32>(1000).unwrap();
    let mut sums = s.alloc::<u32>(1000).unwrap();
    let before = call_counts();
    // One single-phase kernel: one call, no wait.
    iota_u32(&s, &mut ids.view_mut(), 1).unwrap();
    assert_eq!(call_counts().since(before), CallCounts { c_calls: 1, host_waits: 0 });
    // CUB's scan: its size query and its run.
    inclusive_sum(&s, &ids.view(), &mut sums.view_mut()).unwrap();
    assert_eq!(call_counts().since(before), CallCounts { c_calls: 3, host_waits: 0 });
    // Reading the result back waits once.
    let host = s.copy_to_host(&sums.view()).unwrap();
    assert_eq!(host[999], 1000 * 1001 / 2, "the scan's last sum");
    assert_eq!(call_counts().since(before), CallCounts { c_calls: 3, host_waits: 1 });
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
    assert_eq!(other, CallCounts { c_calls: 1, host_waits: 1 });
    assert_eq!(call_counts().since(before), CallCounts { c_calls: 3, host_waits: 1 }, "the other thread's calls are not this thread's");
}
