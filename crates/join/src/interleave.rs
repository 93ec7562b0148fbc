//! The interleave join (seed 001): concatenate the tables with a table id, stable radix sort by
//! key, run-length encode the (key, table id) runs, offsets by exclusive sum, keep the runs the
//! join type selects (a zero output count drops a run), expand the Cartesian products by scan
//! and rank, and return gather maps (row ids stand in for payloads).
//!
//! Keys: a single column or a composite that packs into 63 bits is exact; wider composites are
//! hashed to a scalar key, and candidate matches are verified against the full keys, so outer
//! joins never lose rows to collisions.
//!
//! Output order: by key; within a key, left rows in row order, and for each left row the right
//! rows in row order. Unmatched rows of outer joins appear at their key's place (exact keys) or,
//! when keys are hashed or some keys are null/NaN under "never equal", after the matches in row
//! order.

use gpujoin_cub_sys::result::{launch, with_temp};
use gpujoin_device::{DeviceBuffer, Error, Result, Stream};
use gpujoin_primitives::{exclusive_sum, gather, run_length_encode, select_flagged, sort_pairs_owned, RLE_MAX_ITEMS};

use crate::common::{any_never_match, from_inner_pairs, iota, kind, map_rows, offsets_u64, rows_where, verify, verify_flags};
use crate::kernels::sys::join as ffi;
use crate::keys::{images, KeyImages, KeyPlan};
use crate::table::TableView;
use crate::maps::GatherMaps;
use crate::trace::Phases;
use crate::types::{JoinOptions, JoinType};

/// Sorted derived keys of the concatenated tables and their (key, table) runs.
struct Runs {
    runs: DeviceBuffer<u64>,
    len: DeviceBuffer<u32>,
    start: DeviceBuffer<u32>,
    /// Positions in the concatenation, in sorted order.
    ids: DeviceBuffer<u32>,
}

/// Steps 1-4: concatenate with table ids, stable sort, run-length encode, exclusive sum. Takes
/// the tables' derived keys and frees each once it is in the concatenation.
fn sorted_runs(stream: &Stream, keys: Vec<DeviceBuffer<u64>>, key_bits: u32, tbits: u32) -> Result<Runs> {
    let n: usize = keys.iter().map(|k| k.len()).sum();
    if n as u64 > RLE_MAX_ITEMS {
        return Err(Error::too_large("interleave join rows of all tables together (run-length encoding uses 32-bit positions)", n as u64, RLE_MAX_ITEMS));
    }
    let mut derived = stream.alloc::<u64>(n)?;
    let mut at = 0usize;
    for (t, k) in keys.into_iter().enumerate() {
        let d = derived.slice_mut(at..at + k.len()).as_mut_ptr();
        // SAFETY: k.len() rows into their slot of the concatenation.
        let kp = k.view().as_ptr();
        launch(stream, "interleave derive", || unsafe { ffi::gj_j_interleave_derive(kp, k.len() as i64, tbits as i32, t as u64, d, stream.raw()) })?;
        at += k.len();
    }
    let ids_in = iota(stream, n)?;
    let (sorted, ids) = sort_pairs_owned(stream, derived, ids_in, Some(0..(key_bits + tbits).min(64)))?;
    let r = run_length_encode(stream, &sorted.view())?;
    let mut start = stream.alloc::<u32>(r.len())?;
    exclusive_sum(stream, &r.counts.view(), &mut start.view_mut())?;
    Ok(Runs { runs: r.unique, len: r.counts, start, ids })
}

/// Steps 5-7 for two tables: per-run output counts, offsets, expansion into maps over the
/// concatenation's positions (left: 0..n_left, right: positions - n_left).
fn expand_two(stream: &Stream, r: &Runs, n_left: usize, join_type: JoinType) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
    let g = r.runs.len();
    let mut counts = stream.alloc::<u64>(g)?;
    let c = counts.view_mut().as_mut_ptr();
    let k = kind(join_type);
    // SAFETY: g runs.
    launch(stream, "interleave counts", || unsafe { ffi::gj_j_interleave_counts(r.runs.view().as_ptr(), r.len.view().as_ptr(), g as i64, k, c, stream.raw()) })?;
    let (offsets, total) = offsets_u64(stream, &counts.view())?;
    drop(counts);
    let maps = join_type.has_left_map() as usize + join_type.has_right_map() as usize;
    let (x, y) = crate::common::alloc_output_maps(stream, total, maps)?;
    // One map for semi/anti joins: the allocated one goes to the side that has it.
    let (mut a, mut b) = if join_type.has_left_map() { (x, y) } else { (y, x) };
    let pa = if join_type.has_left_map() { a.view_mut().as_mut_ptr() } else { std::ptr::null_mut() };
    let pb = if join_type.has_right_map() { b.view_mut().as_mut_ptr() } else { std::ptr::null_mut() };
    let (o, rs, ln, st, id) = (offsets.view().as_ptr(), r.runs.view().as_ptr(), r.len.view().as_ptr(), r.start.view().as_ptr(), r.ids.view().as_ptr());
    // SAFETY: run arrays of g entries; outputs of `total` rows.
    with_temp(stream, "interleave expand", |t, tb| unsafe {
        ffi::gj_j_interleave_expand(t, tb, o, g as i64, total as i64, rs, ln, st, id, n_left as u32, k, pa, pb, stream.raw())
    })?;
    Ok((a, b))
}

/// Joins two relations by the interleave algorithm. Maps refer to the input rows.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::TableView; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// // Seed 001's example: L.K = 0,0,0,2,2,4,5,6,7,7 and R.K = 9,9,8,7,6,4,3,3,0.
/// let l = s.copy_from_host(&[0i32, 0, 0, 2, 2, 4, 5, 6, 7, 7])?;
/// let r = s.copy_from_host(&[9i32, 9, 8, 7, 6, 4, 3, 3, 0])?;
/// let maps = interleave_join(s, &TableView::single(l.view()), &TableView::single(r.view()), JoinType::Left, JoinOptions::default())?;
/// assert_eq!(maps.rows(), 10);
/// # Ok(()) }
/// ```
pub fn interleave_join(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions) -> Result<GatherMaps> {
    crate::keys::check_comparable(left, right)?;
    crate::common::check_output_budget(stream, left, right, join_type, opts)?;
    let mut ph = Phases::new(stream, "interleave_join");
    let plan = KeyPlan::new(left, right, opts, 63);
    let (mut il, mut ir) = (images(stream, left, plan)?, images(stream, right, plan)?);
    ph.mark("key images");
    let (nl, nr) = (left.rows(), right.rows());
    let filtered = any_never_match(stream, &il.never_match.view())? || any_never_match(stream, &ir.never_match.view())?;
    ph.mark("null/NaN check");
    if plan.exact {
        // No verification: the column images (8 bytes a row and key column) go before the sort.
        il.columns.clear();
        ir.columns.clear();
    }
    if plan.exact && !filtered {
        let (dl, dr) = (il.derived, ir.derived);
        drop((il.flags, il.never_match, ir.flags, ir.never_match));
        let runs = sorted_runs(stream, vec![dl, dr], plan.bits, 1)?;
        ph.mark("concat+sort+rle+scan");
        let (a, b) = expand_two(stream, &runs, nl, join_type)?;
        ph.mark("counts+expand");
        return Ok(GatherMaps::new(join_type, a, b));
    }
    // Rows that can match; candidates on (possibly hashed) keys; verification; then the join type.
    // Hashed keys lose their top bit to the table id (the shift in the derive step).
    let bits = if plan.exact { plan.bits } else { 63 };
    let (a, b) = if filtered {
        let (rl, rr) = (rows_where(stream, &il.never_match.view(), false, None)?, rows_where(stream, &ir.never_match.view(), false, None)?);
        let kl = gather(stream, &il.derived.view(), &rl.view(), 0)?;
        let kr = gather(stream, &ir.derived.view(), &rr.view(), 0)?;
        let runs = sorted_runs(stream, vec![kl, kr], bits, 1)?;
        let (a, b) = expand_two(stream, &runs, rl.len(), JoinType::Inner)?;
        (map_rows(stream, &a.view(), &rl.view())?, map_rows(stream, &b.view(), &rr.view())?)
    } else {
        // The hashes go into the concatenation; the images stay for the verification.
        let (dl, dr) = (std::mem::replace(&mut il.derived, stream.alloc(0)?), std::mem::replace(&mut ir.derived, stream.alloc(0)?));
        let runs = sorted_runs(stream, vec![dl, dr], bits, 1)?;
        ph.mark("concat+sort+rle+scan");
        expand_two(stream, &runs, nl, JoinType::Inner)?
    };
    ph.mark("counts+expand");
    let (a, b) = if plan.exact { (a, b) } else { verify(stream, &a.view(), &b.view(), &il, &ir)? };
    ph.mark("verify");
    from_inner_pairs(stream, a, b, nl, nr, join_type)
}

/// Inner join of several tables on one key in one pass (seed 001, "more than two tables"): the
/// tables are enumerated into a table id, and a key joins when all tables hold it. Returns one
/// map per table; output order is by key, then table 0's rows, then table 1's, ...
pub fn interleave_join_many(stream: &Stream, tables: &[TableView<'_>], opts: JoinOptions) -> Result<Vec<DeviceBuffer<crate::RowId>>> {
    if tables.len() < 2 || tables.len() > 16 {
        return Err(Error::invalid(format!("{} tables: the interleave join takes 2 to 16", tables.len())));
    }
    for t in &tables[1..] {
        crate::keys::check_comparable(&tables[0], t)?;
    }
    let tbits = usize::BITS - (tables.len() - 1).leading_zeros();
    // Plan on the widest pair: every table shares the key type.
    let plan = KeyPlan::new(&tables[0], &tables[tables.len() - 1], opts, 64 - tbits);
    let imgs = tables.iter().map(|t| images(stream, t, plan)).collect::<Result<Vec<KeyImages>>>()?;
    let rows = imgs.iter().map(|i| rows_where(stream, &i.never_match.view(), false, None)).collect::<Result<Vec<_>>>()?;
    let keys = imgs.iter().zip(&rows).map(|(i, r)| gather(stream, &i.derived.view(), &r.view(), 0)).collect::<Result<Vec<_>>>()?;
    let lens: Vec<usize> = keys.iter().map(|k| k.len()).collect();
    let r = sorted_runs(stream, keys, if plan.exact { plan.bits } else { 64 - tbits }, tbits)?;
    let g = r.runs.len();
    let mut counts = stream.alloc::<u64>(g)?;
    let c = counts.view_mut().as_mut_ptr();
    let nt = tables.len() as i32;
    // SAFETY: g runs.
    launch(stream, "interleave counts n", || unsafe { ffi::gj_j_interleave_counts_n(r.runs.view().as_ptr(), r.len.view().as_ptr(), g as i64, nt, tbits as i32, c, stream.raw()) })?;
    let (offsets, total) = offsets_u64(stream, &counts.view())?;
    let total_usize = usize::try_from(total).map_err(|_| Error::too_large("join output rows", total, usize::MAX as u64))?;
    let mut bases = Vec::with_capacity(tables.len());
    let mut acc = 0u32;
    for len in &lens {
        bases.push(acc);
        acc += *len as u32;
    }
    let dbases = stream.copy_from_host(&bases)?;
    let mut out = stream.alloc::<u32>(total_usize * tables.len())?;
    let (o, ln, st, id, bp, op) = (offsets.view().as_ptr(), r.len.view().as_ptr(), r.start.view().as_ptr(), r.ids.view().as_ptr(), dbases.view().as_ptr(), out.view_mut().as_mut_ptr());
    // SAFETY: run arrays of g entries; out holds tables * total rows.
    with_temp(stream, "interleave expand n", |t, tb| unsafe { ffi::gj_j_interleave_expand_n(t, tb, o, g as i64, total as i64, ln, st, id, bp, nt, op, stream.raw()) })?;
    // Back to input rows, and (hashed keys) keep only rows whose keys truly equal table 0's.
    let mut maps = Vec::with_capacity(tables.len());
    for (t, r) in rows.iter().enumerate() {
        maps.push(map_rows(stream, &out.slice(t * total_usize..(t + 1) * total_usize), &r.view())?);
    }
    if !plan.exact {
        // Keep the rows whose keys truly equal table 0's, one table at a time.
        for t in 1..tables.len() {
            let ok = verify_flags(stream, &maps[0].view(), &maps[t].view(), &imgs[0], &imgs[t])?;
            maps = maps.iter().map(|m| select_flagged(stream, &m.view(), &ok.view())).collect::<Result<Vec<_>>>()?;
        }
    }
    Ok(maps.into_iter().map(DeviceBuffer::cast).collect())
}
