//! Load-balancing search (ModernGPU): expands per-segment counts into per-item
//! `(segment, rank)` pairs, evenly split across the GPU however skewed the counts are.
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let counts = s.copy_from_host(&[2u32, 0, 3])?;
//! let e = load_balancing_search(s, &counts.view())?;
//! assert_eq!(e.segments.to_vec()?, vec![0, 0, 2, 2, 2]);
//! assert_eq!(e.ranks.to_vec()?, vec![0, 1, 0, 1, 2]);
//! # Ok(()) }
//! ```

use gpujoin_cub_sys::result::with_temp;
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};

use crate::ffi;
use crate::scan::exclusive_sum;

/// The expansion of a list of counts.
pub struct Expansion {
    /// For each item, the segment (index into the counts) that generated it.
    pub segments: DeviceBuffer<u32>,
    /// For each item, its rank within its segment.
    pub ranks: DeviceBuffer<u32>,
    /// The exclusive scan of the counts (64-bit offsets).
    pub offsets: DeviceBuffer<u64>,
}

/// The total number of items of a list of counts and its 64-bit exclusive scan.
pub fn count_offsets(stream: &Stream, counts: &DeviceView<'_, u32>) -> Result<(DeviceBuffer<u64>, u64)> {
    let n = counts.len();
    let mut offsets = stream.alloc::<u64>(n + 1)?;
    {
        let mut head = offsets.slice_mut(..n);
        exclusive_sum(stream, counts, &mut head)?;
    }
    // total = offsets[n-1] + counts[n-1], read back as two small copies.
    let total = if n == 0 {
        0
    } else {
        let last_off = stream.copy_to_host(&offsets.slice(n - 1..n))?[0];
        let last_cnt = stream.copy_to_host(&counts.slice(n - 1..n))?[0];
        last_off + last_cnt as u64
    };
    stream.copy_host_to_device(&[total], &mut offsets.slice_mut(n..))?;
    Ok((offsets, total))
}

/// Expands `counts` (one per segment) into `sum(counts)` items. Waits for the stream (to learn
/// the total). The segment count must be below 2^32.
pub fn load_balancing_search(stream: &Stream, counts: &DeviceView<'_, u32>) -> Result<Expansion> {
    if counts.len() as u64 >= u32::MAX as u64 {
        return Err(Error::too_large("load-balancing search segments", counts.len() as u64, u32::MAX as u64 - 1));
    }
    let (offsets, total) = count_offsets(stream, counts)?;
    let total_usize = usize::try_from(total).map_err(|_| Error::too_large("expanded items", total, usize::MAX as u64))?;
    let mut segments = stream.alloc::<u32>(total_usize)?;
    let mut ranks = stream.alloc::<u32>(total_usize)?;
    let (o, sg, rk) = (offsets.view().as_ptr(), segments.view_mut().as_mut_ptr(), ranks.view_mut().as_mut_ptr());
    let n = counts.len() as i64;
    // SAFETY: offsets holds n (+1) entries; outputs hold `total` items.
    with_temp(stream, "load_balancing_search", |t, tb| unsafe {
        ffi::gj_k_load_balancing_search(t, tb, o, n, total as i64, sg, rk, stream.raw())
    })?;
    Ok(Expansion { segments, ranks, offsets })
}
