//! Copies out of page-locked host memory: done when the copy call returns (the source may be
//! dropped or overwritten then). Its own executable: it allocates 4 GiB, which the pool test of
//! `device.rs` must not see.

use gpujoin_device::testing::device_or_skip;
use gpujoin_device::{Error, PinnedBuffer};

#[test]
fn copies_from_page_locked_memory_are_done_when_they_return() {
    let Some(d) = device_or_skip("copies_from_page_locked_memory_are_done_when_they_return") else { return };
    let s = d.new_stream().unwrap();
    let n = 1usize << 24; // 64 MiB: a DMA of about a millisecond
    let mut p = PinnedBuffer::<u32>::new(&d, n).unwrap();
    p.as_mut_slice().unwrap().fill(7);
    let mut dst = s.alloc::<u32>(n).unwrap();
    // Queue a long fill first: an unwaited copy would not even have started when the source is
    // overwritten below.
    let mut busy = s.alloc::<u8>(4 << 30).unwrap();
    s.memset_bytes(&mut busy.view_mut(), 1).unwrap();
    s.copy_host_to_device(p.as_slice().unwrap(), &mut dst.view_mut()).unwrap();
    p.as_mut_slice().unwrap().fill(9);
    let got = s.copy_to_host(&dst.view()).unwrap();
    assert!(got.iter().all(|&v| v == 7), "{} of {n} values changed after the copy returned", got.iter().filter(|&&v| v != 7).count());
    // Several copies at once, pageable and page-locked, with other work between: all done on
    // return.
    p.as_mut_slice().unwrap().fill(3);
    let pageable = vec![5u8; 1 << 20];
    let (mut d1, mut d2) = (s.alloc::<u8>(n * 4).unwrap(), s.alloc::<u8>(1 << 20).unwrap());
    s.memset_bytes(&mut busy.view_mut(), 2).unwrap();
    let ran = {
        let bytes: &[u8] = bytemuck::cast_slice(p.as_slice().unwrap());
        s.copy_from_host_during(vec![(bytes, d1.view_mut()), (&pageable, d2.view_mut())], || Ok(true)).unwrap()
    };
    assert!(ran);
    p.as_mut_slice().unwrap().fill(4);
    let words: Vec<u32> = bytemuck::cast_slice(&s.copy_to_host(&d1.view()).unwrap()).to_vec();
    assert!(words.iter().all(|&v| v == 3));
    assert!(s.copy_to_host(&d2.view()).unwrap().iter().all(|&v| v == 5));
    // Mismatched lengths: an error, after waiting for what was queued.
    let e = s.copy_from_host_during(vec![(&pageable[..10], d2.slice_mut(..11))], || Ok(())).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}
