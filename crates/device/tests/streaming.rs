//! The device-crate additions for chunked streaming: events without waiting, timed events on
//! two streams, byte views, and asynchronous copies into a pinned buffer's slices.

use gpujoin_device::testing::device_or_skip;
use gpujoin_device::PinnedBuffer;

#[test]
fn copy_stream_waits_for_compute_stream() {
    let Some(d) = device_or_skip("copy_stream_waits_for_compute_stream") else { return };
    let (compute, copy) = (d.new_stream().unwrap(), d.new_stream().unwrap());
    let src: Vec<u32> = (0..1_000_000).collect();
    let a = compute.copy_from_host(&src).unwrap();
    let mut b = compute.alloc::<u32>(src.len()).unwrap();
    let t0 = compute.record_timed_event().unwrap();
    compute.copy_device_to_device(&a.view(), &mut b.view_mut()).unwrap();
    let produced = compute.record_timed_event().unwrap();
    copy.wait_event(&produced).unwrap();
    let mut pinned = PinnedBuffer::<u8>::new(&d, 16 + 4 * src.len()).unwrap();
    copy.copy_to_pinned_async(&b.view().as_bytes(), &mut pinned, 16).unwrap();
    let t1 = copy.record_timed_event().unwrap();
    t1.synchronize().unwrap();
    assert!(t1.is_complete().unwrap());
    assert!(pinned.is_ready().unwrap());
    assert!(t0.elapsed_ms(&t1).unwrap() >= 0.0);
    let bytes = pinned.prefix(16 + 4 * src.len()).unwrap();
    let got: &[u32] = bytemuck::cast_slice(&bytes[16..]);
    assert_eq!(got, &src[..]);
    assert!(compute.is_idle().unwrap() || compute.synchronize().is_ok());
    assert!(pinned.prefix(pinned.len() + 1).is_err());
}
