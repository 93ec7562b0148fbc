//! Helpers shared by the join algorithms: row lists, unmatched rows, verification of hashed
//! matches, and building any join type from verified inner pairs.

use gpujoin_cub_sys::result::launch;
use gpujoin_device::{DeviceBuffer, DeviceView, Result, Stream};
use gpujoin_primitives::{exclusive_sum, iota_u32, reduce_sum, select_by_flag, select_flagged, NO_ROW};

use crate::kernels::sys::join as ffi;
use crate::keys::KeyImages;
use crate::maps::GatherMaps;
use crate::types::JoinType;

pub(crate) fn kind(t: JoinType) -> ffi::gj_j_kind {
    match t {
        JoinType::Inner => ffi::gj_j_kind_GJ_J_INNER,
        JoinType::Left => ffi::gj_j_kind_GJ_J_LEFT,
        JoinType::Right => ffi::gj_j_kind_GJ_J_RIGHT,
        JoinType::Full => ffi::gj_j_kind_GJ_J_FULL,
        JoinType::LeftSemi => ffi::gj_j_kind_GJ_J_LEFT_SEMI,
        JoinType::LeftAnti => ffi::gj_j_kind_GJ_J_LEFT_ANTI,
        JoinType::RightSemi => ffi::gj_j_kind_GJ_J_RIGHT_SEMI,
        JoinType::RightAnti => ffi::gj_j_kind_GJ_J_RIGHT_ANTI,
    }
}

/// `0..n` on the device.
pub(crate) fn iota(stream: &Stream, n: usize) -> Result<DeviceBuffer<u32>> {
    let mut b = stream.alloc::<u32>(n)?;
    iota_u32(stream, &mut b.view_mut(), 0)?;
    Ok(b)
}

/// `start, start + 1, ..` (wrapping) of `n` values on the device: `iota_from(s, 3, u32::MAX)` is
/// `[u32::MAX, 0, 1]`.
pub(crate) fn iota_from(stream: &Stream, n: usize, start: u32) -> Result<DeviceBuffer<u32>> {
    let mut b = stream.alloc::<u32>(n)?;
    iota_u32(stream, &mut b.view_mut(), start)?;
    Ok(b)
}

/// The rows (of `rows`, or `0..flags.len()`) whose flag is non-zero (`want == true`) or zero.
pub(crate) fn rows_where(stream: &Stream, flags: &DeviceView<'_, u8>, want: bool, rows: Option<&DeviceView<'_, u32>>) -> Result<DeviceBuffer<u32>> {
    select_by_flag(stream, rows, flags, want)
}

/// 1 for every row that appears in `rows` (a map; NONE entries ignored), of `n` rows.
pub(crate) fn matched_flags(stream: &Stream, rows: &DeviceView<'_, u32>, n: usize) -> Result<DeviceBuffer<u8>> {
    let mut f = stream.alloc_zeroed::<u8>(n)?;
    let p = f.view_mut().as_mut_ptr();
    // SAFETY: map entries are < n or NONE (the kernel skips NONE).
    launch(stream, "mark rows", || unsafe { ffi::gj_j_mark_rows(rows.as_ptr(), rows.len() as i64, p, stream.raw()) })?;
    Ok(f)
}

/// True when some row of the relation can match nothing (null or NaN keys under the options):
/// some of its "never matches" flags ([`KeyImages::never_match`]) is set.
pub(crate) fn any_never_match(stream: &Stream, never_match: &DeviceView<'_, u8>) -> Result<bool> {
    let f = *never_match;
    let words = f.len() / 4;
    // Sum the flags four at a time as u32 words (a non-zero byte makes a non-zero word), then
    // look at the last few bytes on the host.
    // SAFETY: the first 4 * words bytes of the flags, read as words (device memory from the
    // pool is at least 256-byte aligned).
    let as_words = unsafe { DeviceView::<u32>::from_raw(f.raw(), words) };
    if words > 0 && reduce_sum(stream, &as_words)? != 0 {
        return Ok(true);
    }
    let tail = stream.copy_to_host(&f.slice(words * 4..))?;
    Ok(tail.iter().any(|&b| b != 0))
}

/// The low 32 bits of each derived key (for exact keys of at most 32 bits).
pub(crate) fn narrow(stream: &Stream, keys: &DeviceView<'_, u64>) -> Result<DeviceBuffer<u32>> {
    let mut out = stream.alloc::<u32>(keys.len())?;
    let o = out.view_mut().as_mut_ptr();
    // SAFETY: keys.len() entries each.
    launch(stream, "narrow keys", || unsafe { ffi::gj_j_narrow_keys(keys.as_ptr(), keys.len() as i64, o, stream.raw()) })?;
    Ok(out)
}

/// `out[i] = map[rows[i]]` (NONE kept).
pub(crate) fn map_rows(stream: &Stream, rows: &DeviceView<'_, u32>, map: &DeviceView<'_, u32>) -> Result<DeviceBuffer<u32>> {
    let mut out = stream.alloc::<u32>(rows.len())?;
    let o = out.view_mut().as_mut_ptr();
    // SAFETY: rows index into map (or are NONE).
    launch(stream, "map rows", || unsafe { ffi::gj_j_map_rows(rows.as_ptr(), map.as_ptr(), rows.len() as i64, o, stream.raw()) })?;
    Ok(out)
}

/// Concatenates device buffers.
pub(crate) fn concat(stream: &Stream, parts: &[DeviceView<'_, u32>]) -> Result<DeviceBuffer<u32>> {
    let n = parts.iter().map(|p| p.len()).sum();
    let mut out = stream.alloc::<u32>(n)?;
    let mut at = 0;
    for p in parts {
        stream.copy_device_to_device(p, &mut out.slice_mut(at..at + p.len()))?;
        at += p.len();
    }
    Ok(out)
}

/// `n` NONE entries.
pub(crate) fn nones(stream: &Stream, n: usize) -> Result<DeviceBuffer<u32>> {
    let mut b = stream.alloc::<u32>(n)?;
    stream.fill_u32_bits(&mut b.view_mut(), NO_ROW)?;
    Ok(b)
}

/// Keeps the candidate pairs whose keys are truly equal (hashed derived keys collide).
pub(crate) fn verify(stream: &Stream, a: &DeviceView<'_, u32>, b: &DeviceView<'_, u32>, ia: &KeyImages, ib: &KeyImages) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
    let ok = verify_flags(stream, a, b, ia, ib)?;
    Ok((select_flagged(stream, a, &ok.view())?, select_flagged(stream, b, &ok.view())?))
}

/// 1 where the candidate pair `(a[i], b[i])` has truly equal keys.
pub(crate) fn verify_flags(stream: &Stream, a: &DeviceView<'_, u32>, b: &DeviceView<'_, u32>, ia: &KeyImages, ib: &KeyImages) -> Result<DeviceBuffer<u8>> {
    let n = a.len();
    let pa: Vec<u64> = ia.columns.iter().map(|c| c.view().raw()).collect();
    let pb: Vec<u64> = ib.columns.iter().map(|c| c.view().raw()).collect();
    let (da, db) = (stream.copy_from_host(&pa)?, stream.copy_from_host(&pb)?);
    let mut ok = stream.alloc::<u8>(n)?;
    let o = ok.view_mut().as_mut_ptr();
    // SAFETY: pointer tables of ncols device pointers; pairs index rows of both relations.
    launch(stream, "verify pairs", || unsafe {
        ffi::gj_j_verify_pairs(
            a.as_ptr(),
            b.as_ptr(),
            n as i64,
            da.view().as_ptr() as *const *const u64,
            db.view().as_ptr() as *const *const u64,
            pa.len() as i32,
            ia.flags.view().as_ptr(),
            ib.flags.view().as_ptr(),
            o,
            stream.raw(),
        )
    })?;
    Ok(ok)
}

/// Any join type from the (verified) inner pairs: semi/anti rows from match flags, unmatched
/// rows appended after the inner pairs in row order.
pub(crate) fn from_inner_pairs(stream: &Stream, a: DeviceBuffer<u32>, b: DeviceBuffer<u32>, n_left: usize, n_right: usize, join_type: JoinType) -> Result<GatherMaps> {
    let empty = || stream.alloc::<u32>(0);
    let unmatched = |map: &DeviceBuffer<u32>, n: usize| -> Result<DeviceBuffer<u32>> {
        rows_where(stream, &matched_flags(stream, &map.view(), n)?.view(), false, None)
    };
    let matched = |map: &DeviceBuffer<u32>, n: usize| -> Result<DeviceBuffer<u32>> {
        rows_where(stream, &matched_flags(stream, &map.view(), n)?.view(), true, None)
    };
    Ok(match join_type {
        JoinType::Inner => GatherMaps::new(join_type, a, b),
        JoinType::LeftSemi => GatherMaps::new(join_type, matched(&a, n_left)?, empty()?),
        JoinType::LeftAnti => GatherMaps::new(join_type, unmatched(&a, n_left)?, empty()?),
        JoinType::RightSemi => GatherMaps::new(join_type, empty()?, matched(&b, n_right)?),
        JoinType::RightAnti => GatherMaps::new(join_type, empty()?, unmatched(&b, n_right)?),
        JoinType::Left | JoinType::Right | JoinType::Full => {
            let (mut l, mut r) = (a, b);
            if join_type.keeps_unmatched_left() {
                let u = unmatched(&l, n_left)?;
                let nn = nones(stream, u.len())?;
                (l, r) = (concat(stream, &[l.view(), u.view()])?, concat(stream, &[r.view(), nn.view()])?);
            }
            if join_type.keeps_unmatched_right() {
                let u = unmatched(&r, n_right)?;
                let nn = nones(stream, u.len())?;
                (l, r) = (concat(stream, &[l.view(), nn.view()])?, concat(stream, &[r.view(), u.view()])?);
            }
            GatherMaps::new(join_type, l, r)
        }
    })
}

/// The exclusive scan of 64-bit counts and their total (waits for the stream).
pub(crate) fn offsets_u64(stream: &Stream, counts: &DeviceView<'_, u64>) -> Result<(DeviceBuffer<u64>, u64)> {
    let n = counts.len();
    let mut off = stream.alloc::<u64>(n.max(1))?;
    if n == 0 {
        return Ok((off, 0));
    }
    exclusive_sum(stream, counts, &mut off.slice_mut(..n))?;
    let last = stream.copy_to_host(&off.slice(n - 1..n))?[0] + stream.copy_to_host(&counts.slice(n - 1..n))?[0];
    Ok((off, last))
}

/// With a [`JoinOptions::output_budget`](crate::JoinOptions), counts the join's exact output
/// ([`crate::join_size`], no output allocated) and returns
/// [`gpujoin_device::Error::OutputTooLarge`] when its gather maps are over the budget; without
/// one, does nothing.
pub(crate) fn check_output_budget(stream: &Stream, left: &crate::table::TableView<'_>, right: &crate::table::TableView<'_>, join_type: JoinType, opts: crate::JoinOptions) -> Result<()> {
    let Some(budget) = opts.output_budget else { return Ok(()) };
    let rows = crate::sort_merge::sort_merge_join_size(stream, left, right, join_type, crate::JoinOptions { output_budget: None, ..opts })?;
    let per_row = 4 * (join_type.has_left_map() as u64 + join_type.has_right_map() as u64);
    let bytes = rows.saturating_mul(per_row);
    if bytes > budget {
        return Err(gpujoin_device::Error::OutputTooLarge { rows, bytes, available: budget });
    }
    Ok(())
}

/// Allocates `maps` gather maps of `rows` rows each. When the device cannot hold them, the error
/// is [`gpujoin_device::Error::OutputTooLarge`] with the rows, bytes and free memory (pointing
/// to the count-only and chunked calls), not a bare allocation failure.
pub(crate) fn alloc_output_maps(stream: &Stream, rows: u64, maps: usize) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
    let bytes = rows.saturating_mul(4 * maps as u64);
    let too_large = |available: u64| gpujoin_device::Error::OutputTooLarge { rows, bytes, available };
    let n = usize::try_from(rows).map_err(|_| too_large(0))?;
    let alloc = |len: usize| match stream.alloc::<u32>(len) {
        Err(gpujoin_device::Error::OutOfMemory { free, .. }) => Err(too_large(free)),
        r => r,
    };
    let a = alloc(if maps >= 1 { n } else { 0 })?;
    let b = alloc(if maps >= 2 { n } else { 0 })?;
    Ok((a, b))
}

/// Device-event marks around the phases of a join (transform, match, materialize, in that order)
/// and the pool's high-water mark since [`Clock::start`], for [`JoinStats`](crate::JoinStats).
///
/// A clock started with `on == false` ([`crate::JoinOptions::stats`] not asked for) does
/// nothing: no reset, no events, no wait; the statistics keep their zeros.
pub(crate) struct Clock {
    device: Option<gpujoin_device::Device>,
    events: Vec<gpujoin_device::Event>,
}

impl Clock {
    /// Resets the peak-memory counter and marks the start (when `on`).
    pub(crate) fn start(stream: &Stream, on: bool) -> Result<Clock> {
        let mut c = Clock { device: None, events: Vec::new() };
        if on {
            let device = stream.device().clone();
            device.reset_peak_memory()?;
            c.device = Some(device);
            c.mark(stream)?;
        }
        Ok(c)
    }

    /// Ends a phase.
    pub(crate) fn mark(&mut self, stream: &Stream) -> Result<()> {
        let Some(device) = &self.device else { return Ok(()) };
        let e = gpujoin_device::Event::new(device, true)?;
        e.record(stream)?;
        self.events.push(e);
        Ok(())
    }

    /// Fills in the times of the marks so far and the peak memory (waits for the last mark).
    pub(crate) fn finish(self, stats: &mut crate::JoinStats) -> Result<()> {
        let Some(device) = &self.device else { return Ok(()) };
        let last = self.events.last().expect("a started clock has a mark");
        last.synchronize()?;
        let ms = |i: usize| -> Result<f32> {
            match (self.events.get(i - 1), self.events.get(i)) {
                (Some(a), Some(b)) => a.elapsed_ms(b),
                _ => Ok(0.0),
            }
        };
        stats.transform_ms = ms(1)?;
        stats.match_ms = ms(2)?;
        stats.materialize_ms = ms(3)?;
        stats.total_ms = stats.transform_ms + stats.match_ms + stats.materialize_ms;
        stats.peak_memory_bytes = device.peak_memory()?;
        Ok(())
    }
}
