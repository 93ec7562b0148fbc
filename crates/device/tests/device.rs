//! The device layer: no panic for lack of a driver or device, clear errors, and (on a GPU)
//! buffers, copies, views, pinned memory and events.

use gpujoin_device::testing::{device_or_skip, has_device};
use gpujoin_device::{check_same_len, Device, Error, PinnedBuffer, Timer};

#[test]
fn opening_a_device_never_panics() {
    // With no driver (CI) this is NoDriver; on a GPU machine device 0 opens.
    match Device::new(0) {
        Ok(d) => assert!(d.memory_info().unwrap().total > 0),
        Err(Error::NoDriver(msg)) | Err(Error::NoDevice(msg)) => assert!(!msg.is_empty()),
        Err(e) => panic!("unexpected error: {e}"),
    }
    // An ordinal past the last device is an error too.
    assert!(matches!(Device::new(1 << 20), Err(Error::NoDriver(_)) | Err(Error::NoDevice(_))));
    assert_eq!(has_device(), Device::count().map(|n| n > 0).unwrap_or(false));
}

#[test]
fn errors_say_what_and_how_much() {
    let e = check_same_len("keys", 3, "values", 2).unwrap_err();
    assert_eq!(e.to_string(), "invalid argument: keys has 3 elements but values has 2");
    let oom = Error::OutOfMemory { requested: 1 << 40, free: 1 << 30, reserved: 5 << 30, in_use: 3 << 30 };
    let text = oom.to_string();
    for n in ["1099511627776", "1073741824", "5368709120", "3221225472"] {
        assert!(text.contains(n), "{text} lacks {n}");
    }
    let big = Error::OutputTooLarge { rows: 10, bytes: 80, available: 8 };
    assert!(big.to_string().contains("join_size"));
}

#[test]
fn buffers_views_copies_pinned_memory_and_events() {
    let Some(d) = device_or_skip("buffers_views_copies_pinned_memory_and_events") else { return };
    let s = d.new_stream().unwrap();
    let host: Vec<u64> = (0..1000).map(|i| i * 3).collect();
    let mut buf = s.copy_from_host(&host).unwrap();
    assert_eq!(buf.to_vec().unwrap(), host);
    assert_eq!(s.copy_to_host(&buf.slice(10..20)).unwrap(), host[10..20].to_vec());
    // Device to device into a sub-range, then a pinned round trip.
    let src = s.copy_from_host(&[7u64; 5]).unwrap();
    s.copy_device_to_device(&src.view(), &mut buf.slice_mut(100..105)).unwrap();
    let mut pinned = PinnedBuffer::<u64>::new(&d, 1000).unwrap();
    s.copy_to_pinned_async(&buf.view(), &mut pinned, 0).unwrap();
    let got = pinned.as_slice().unwrap().to_vec();
    assert_eq!(&got[100..105], &[7; 5]);
    assert_eq!(got[99], host[99]);
    // Mismatched lengths and out-of-range pinned copies are errors.
    assert!(s.copy_device_to_device(&src.view(), &mut buf.slice_mut(0..4)).is_err());
    assert!(s.copy_to_pinned_async(&buf.view(), &mut pinned, 1).is_err());
    // Allocation far beyond the device is OutOfMemory with the sizes. (Not under a sanitizer,
    // GPUJOIN_TEST_SIZE=small, which reports the driver's refusal as an API error.)
    if !gpujoin_device::testing::reduced() {
        match s.alloc::<u8>(1 << 50) {
            Err(Error::OutOfMemory { requested, .. }) => assert_eq!(requested, 1 << 50),
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("allocated a petabyte"),
        }
    }
    // Zero-length buffers work.
    let empty = s.alloc::<u32>(0).unwrap();
    assert!(empty.to_vec().unwrap().is_empty());
    // Events time queued work; peak memory tracks the pool.
    d.reset_peak_memory().unwrap();
    let t = Timer::start(&s).unwrap();
    let big = s.alloc_zeroed::<u8>(64 << 20).unwrap();
    let ms = t.stop(&s).unwrap();
    assert!(ms >= 0.0);
    assert!(d.peak_memory().unwrap() >= 64 << 20);
    drop(big);
    let mut poisoned = s.alloc::<u32>(8).unwrap();
    s.memset_bytes(&mut poisoned.view_mut(), 0xAB).unwrap();
    assert_eq!(poisoned.to_vec().unwrap(), vec![0xABAB_ABABu32; 8]);
    s.fill_u32_bits(&mut poisoned.view_mut(), 5).unwrap();
    assert_eq!(poisoned.to_vec().unwrap(), vec![5u32; 8]);
}

#[test]
fn the_pool_grows_ahead_of_a_job_within_its_threshold() {
    let Some(d) = device_or_skip("the_pool_grows_ahead_of_a_job_within_its_threshold") else { return };
    let s = d.new_stream().unwrap();
    let before = d.release_threshold().unwrap();
    d.set_release_threshold(1 << 40).unwrap();
    d.trim_memory().unwrap();
    let r0 = d.pool_memory().unwrap().reserved;
    let grown = s.reserve_pool(96 << 20).unwrap();
    let p = d.pool_memory().unwrap();
    assert!(grown >= 96 << 20, "grew {grown} bytes");
    assert_eq!(p.reserved - r0, grown);
    assert!(p.reserved - p.in_use >= 96 << 20, "{p:?}");
    // Enough is held: nothing more; an allocation of that size takes no new memory.
    assert_eq!(s.reserve_pool(96 << 20).unwrap(), 0);
    let job = s.alloc::<u8>(64 << 20).unwrap();
    s.synchronize().unwrap();
    assert_eq!(d.pool_memory().unwrap().reserved, p.reserved);
    drop(job);
    // Beyond the release threshold the pool would give it back: capped there.
    d.set_release_threshold(p.reserved + (32 << 20)).unwrap();
    let capped = s.reserve_pool(1 << 30).unwrap();
    assert!(capped <= 34 << 20, "grew {capped} bytes past a threshold 32 MiB away");
    d.set_release_threshold(before).unwrap();
    d.trim_memory().unwrap();
}

#[test]
fn host_wait_is_set_for_every_handle_of_the_device() {
    use gpujoin_device::{DeviceOptions, HostWait};
    let Some(d) = device_or_skip("host_wait_is_set_for_every_handle_of_the_device") else { return };
    let before = d.host_wait().unwrap();
    for wait in [HostWait::Block, HostWait::Yield, HostWait::Spin, HostWait::Auto] {
        d.set_host_wait(wait).unwrap();
        // Another handle (the same primary context) sees it, and work still completes.
        let other = Device::new(0).unwrap();
        assert_eq!(other.host_wait().unwrap(), wait);
        let s = other.new_stream().unwrap();
        let buf = s.copy_from_host(&[1u32, 2, 3]).unwrap();
        s.synchronize().unwrap();
        assert_eq!(buf.to_vec().unwrap(), vec![1, 2, 3]);
    }
    // Options set it when a handle opens; None leaves it.
    let opened = Device::with_options(0, DeviceOptions { host_wait: Some(HostWait::Block), ..DeviceOptions::default() }).unwrap();
    assert_eq!(d.host_wait().unwrap(), HostWait::Block);
    let _ = Device::with_options(0, DeviceOptions { host_wait: None, ..DeviceOptions::default() }).unwrap();
    assert_eq!(opened.host_wait().unwrap(), HostWait::Block);
    d.set_host_wait(before).unwrap();
}

#[test]
fn dropped_events_are_recorded_again_by_the_next_of_their_kind() {
    use gpujoin_device::Event;
    let Some(d) = device_or_skip("dropped_events_are_recorded_again_by_the_next_of_their_kind") else { return };
    let s = d.new_stream().unwrap();
    // Other tests of this executable recycle events at the same time: look for ours among a few.
    let plain = s.record_event().unwrap();
    plain.synchronize().unwrap();
    let handle = plain.raw();
    drop(plain);
    let again: Vec<Event> = (0..64).map(|_| Event::new(&d, false).unwrap()).collect();
    assert!(again.iter().any(|e| e.raw() == handle), "a dropped event was not reused");
    for e in &again {
        e.record(&s).unwrap();
    }
    let buf = s.copy_from_host(&[5u64; 1000]).unwrap();
    let done = s.record_event().unwrap();
    done.synchronize().unwrap();
    assert!(done.is_complete().unwrap());
    assert_eq!(buf.to_vec().unwrap(), vec![5u64; 1000]);
    // Timing events come only from timing events: a recycled plain event has no timestamps.
    for _ in 0..8 {
        let t = Timer::start(&s).unwrap();
        let _ = s.copy_from_host(&[1u8; 4096]).unwrap();
        assert!(t.stop(&s).unwrap() >= 0.0);
    }
    drop(again);
    let t = Timer::start(&s).unwrap();
    assert!(t.stop(&s).unwrap() >= 0.0);
}

#[test]
fn a_stream_with_a_block_cache_reuses_its_small_freed_blocks() {
    let Some(d) = device_or_skip("a_stream_with_a_block_cache_reuses_its_small_freed_blocks") else { return };
    use gpujoin_device::counts::call_counts;
    // Blocks of at most 64 KiB, 16 KiB of them in all.
    let s = d.new_stream_with_block_cache(64 << 10, 16 << 10).unwrap();
    assert_eq!(s.block_cache_limits(), Some((64 << 10, 16 << 10)));
    assert_eq!(d.new_stream().unwrap().block_cache_limits(), None);
    let before = call_counts();
    // 4000 bytes take a 4 KiB block from the pool; dropped, it stays with the stream.
    let a = s.alloc::<u32>(1000).unwrap();
    drop(a);
    assert_eq!(s.block_cache_bytes(), 4096);
    let n = call_counts().since(before);
    assert_eq!((n.allocs, n.frees), (1, 0), "one allocation from the pool, none freed to it");
    // Any request of that class takes it back without the driver, and holds its own values.
    let mut b = s.alloc::<u8>(3000).unwrap();
    assert_eq!(s.block_cache_bytes(), 0);
    let values: Vec<u8> = (0..3000).map(|i| (i % 251) as u8).collect();
    s.copy_host_to_device(&values, &mut b.view_mut()).unwrap();
    assert_eq!(b.to_vec().unwrap(), values);
    assert_eq!(call_counts().since(before).allocs, 1, "the second allocation came from the cache");
    // A buffer shortened or cast keeps its block's class.
    let mut c = s.alloc::<u32>(2048).unwrap(); // 8 KiB
    c.truncate(3);
    drop(c.cast::<f32>());
    drop(b);
    assert_eq!(s.block_cache_bytes(), 8192 + 4096);
    // Past the capacity (16 KiB), a freed block goes back to the pool.
    let e = s.alloc::<u8>(8 << 10).unwrap(); // the 8 KiB block from the cache
    let f = s.alloc::<u8>(8 << 10).unwrap(); // a new one
    assert_eq!(s.block_cache_bytes(), 4096);
    let frees = call_counts().frees;
    drop(e);
    drop(f);
    assert_eq!(s.block_cache_bytes(), 4096 + 8192, "the second 8 KiB block did not fit");
    assert_eq!(call_counts().frees - frees, 1);
    // Larger than the largest block kept: from the pool and back to it.
    let frees = call_counts().frees;
    drop(s.alloc::<u8>(1 << 20).unwrap());
    assert_eq!((s.block_cache_bytes(), call_counts().frees - frees), (4096 + 8192, 1));
    // Stream order: a block reused while the copy out of its last contents is still queued
    // gets its new contents after that copy.
    let mut old = s.alloc::<u32>(1024).unwrap(); // the 4 KiB block
    s.memset_bytes(&mut old.view_mut(), 7).unwrap();
    let mut out = s.alloc::<u32>(1024 * 64).unwrap();
    s.copy_device_to_device(&old.view(), &mut out.slice_mut(0..1024)).unwrap();
    drop(old);
    let mut new = s.alloc::<u32>(1024).unwrap();
    s.memset_bytes(&mut new.view_mut(), 9).unwrap();
    assert!(out.to_vec().unwrap()[..1024].iter().all(|&v| v == 0x0707_0707), "the copy ran before the block was written again");
    assert!(new.to_vec().unwrap().iter().all(|&v| v == 0x0909_0909));
    drop((new, out));
    // Released, the blocks go back to the pool; the cache keeps working.
    let held = s.block_cache_bytes();
    assert!(held > 0);
    assert_eq!(s.release_block_cache().unwrap(), held);
    assert_eq!(s.block_cache_bytes(), 0);
    drop(s.alloc::<u8>(100).unwrap());
    assert_eq!(s.block_cache_bytes(), 256);
}
