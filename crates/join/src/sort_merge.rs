//! ModernGPU's sort-merge relational join (seed 000), for sorted inputs and, through a sort of
//! each side by key with row ids, for any keys.
//!
//! The algorithm, as the paper's steps:
//! 1. sorted search: lower bound of each A key in B, with match flags of B in A (right joins);
//! 2. equality counts: upper bound minus lower bound (at least 1 per A row for left joins);
//! 3. scan of the counts: output offsets and the total;
//! 4. load-balancing search: each output row finds the A row that generates it and its rank,
//!    and takes B row `lower_bound + rank` (or no row for a left-join row);
//! 5. right joins append the B rows that matched nothing.
//!
//! Output order: sorted by A, then by B (for the unsorted entry point: by key, then by row
//! within each side); unmatched B rows last, in B order. Semi and anti joins return rows in
//! A (or B) order.

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};
use gpujoin_primitives::cuda::{launch, with_temp};
use gpujoin_primitives::{count_offsets, gather, sort_pairs, sorted_search, Bound, SearchKey, SearchOutputs, SortOrder};

use crate::common::{any_never_match, from_inner_pairs, iota, rows_where, verify};
use crate::ffi;
use crate::keys::{images, KeyPlan, Keys};
use crate::maps::GatherMaps;
use crate::types::{JoinOptions, JoinType, RowId};

/// Key types the sorted entry point takes: sorted ascending, compared by value.
pub trait SortedKey: SearchKey {}
impl SortedKey for u32 {}
impl SortedKey for u64 {}
impl SortedKey for i32 {}
impl SortedKey for i64 {}

fn check_rows(side: &str, n: usize) -> Result<()> {
    if n as u64 > RowId::MAX_ROWS {
        return Err(Error::too_large(format!("{side} rows"), n as u64, RowId::MAX_ROWS));
    }
    Ok(())
}

/// Joins two key columns sorted ascending; returns maps into their rows.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// // A = 100 101 103 103, B = 100 100 102 103 (the example of seed 000)
/// let a = s.copy_from_host(&[100i32, 101, 103, 103])?;
/// let b = s.copy_from_host(&[100i32, 100, 102, 103])?;
/// let pairs = sorted_merge_join(s, &a.view(), &b.view(), JoinType::Full)?.pairs()?;
/// // (0,0) (0,1) (1,-) (2,3) (3,3) then the unmatched B row (-,2)
/// assert_eq!(pairs.len(), 6);
/// # Ok(()) }
/// ```
pub fn sorted_merge_join<K: SortedKey>(stream: &Stream, a: &DeviceView<'_, K>, b: &DeviceView<'_, K>, join_type: JoinType) -> Result<GatherMaps> {
    check_rows("left", a.len())?;
    check_rows("right", b.len())?;
    merge_sorted(stream, a, b, None, None, join_type)
}

/// The core on sorted keys; `a_rows`/`b_rows` map sorted positions to original rows.
fn merge_sorted<K: SearchKey>(
    stream: &Stream,
    a: &DeviceView<'_, K>,
    b: &DeviceView<'_, K>,
    a_rows: Option<&DeviceView<'_, u32>>,
    b_rows: Option<&DeviceView<'_, u32>>,
    join_type: JoinType,
) -> Result<GatherMaps> {
    let empty = || stream.alloc::<u32>(0);
    let need_b_match = matches!(join_type, JoinType::Right | JoinType::Full | JoinType::RightSemi | JoinType::RightAnti);
    let need_a_match = matches!(join_type, JoinType::LeftSemi | JoinType::LeftAnti);
    // 1. Lower bound of A in B, with the match flags the join type needs.
    let outputs = SearchOutputs { a_index: !need_a_match && join_type.has_left_map(), a_match: need_a_match, b_match: need_b_match };
    let lower = sorted_search(stream, a, b, Bound::Lower, outputs)?;
    match join_type {
        JoinType::LeftSemi | JoinType::LeftAnti => {
            let rows = rows_where(stream, &lower.a_match.as_ref().unwrap().view(), join_type == JoinType::LeftSemi, a_rows)?;
            return Ok(GatherMaps::new(join_type, rows, empty()?));
        }
        JoinType::RightSemi | JoinType::RightAnti => {
            let rows = rows_where(stream, &lower.b_match.as_ref().unwrap().view(), join_type == JoinType::RightSemi, b_rows)?;
            return Ok(GatherMaps::new(join_type, empty()?, rows));
        }
        _ => {}
    }
    let lb = lower.a_index.unwrap();
    // 2. Equality counts from the upper bound.
    let ub = sorted_search(stream, a, b, Bound::Upper, SearchOutputs::INDEX)?.a_index.unwrap();
    let n = a.len();
    let mut counts = stream.alloc::<u32>(n)?;
    let c = counts.view_mut().as_mut_ptr();
    let keep = join_type.keeps_unmatched_left() as i32;
    // SAFETY: n entries each.
    launch(stream, "merge counts", || unsafe { ffi::gj_j_merge_counts(lb.view().as_ptr(), ub.view().as_ptr(), n as i64, keep, c, stream.raw()) })?;
    // 3. Scan: offsets and the left/inner total.
    let (offsets, left_total) = count_offsets(stream, &counts.view())?;
    drop(counts);
    // 5 (sized first). Unmatched B rows for right/full joins.
    let right_rows = if join_type.keeps_unmatched_right() {
        Some(rows_where(stream, &lower.b_match.as_ref().unwrap().view(), false, b_rows)?)
    } else {
        None
    };
    let right_total = right_rows.as_ref().map_or(0, |r| r.len());
    let total = usize::try_from(left_total).map_err(|_| Error::too_large("join output rows", left_total, usize::MAX as u64))? + right_total;
    let avail = stream.device().available_memory().unwrap_or(u64::MAX);
    let bytes = total as u64 * 8;
    if bytes > avail {
        return Err(Error::OutputTooLarge { rows: total as u64, bytes, available: avail });
    }
    let mut out_a = stream.alloc::<u32>(total)?;
    let mut out_b = stream.alloc::<u32>(total)?;
    // 4. Load-balancing search expands the Cartesian products.
    {
        let lt = left_total as usize;
        let (oa, ob) = (out_a.slice_mut(..lt).as_mut_ptr(), out_b.slice_mut(..lt).as_mut_ptr());
        let (ar, br) = (a_rows.map_or(std::ptr::null(), |r| r.as_ptr()), b_rows.map_or(std::ptr::null(), |r| r.as_ptr()));
        let (o, l, u) = (offsets.view().as_ptr(), lb.view().as_ptr(), ub.view().as_ptr());
        // SAFETY: offsets/lb/ub have n entries; outputs hold left_total rows.
        with_temp(stream, "merge expand", |t, tb| unsafe { ffi::gj_j_merge_expand(t, tb, o, n as i64, left_total as i64, l, u, ar, br, oa, ob, stream.raw()) })?;
    }
    if let Some(rr) = right_rows {
        let lt = left_total as usize;
        stream.copy_device_to_device(&rr.view(), &mut out_b.slice_mut(lt..))?;
        stream.fill_u32_bits(&mut out_a.slice_mut(lt..), gpujoin_primitives::NO_ROW)?;
    }
    Ok(GatherMaps::new(join_type, out_a, out_b))
}

/// Sorts `keys` (with row ids `rows`, or `0..n`) on their low `bits` bits.
fn sort_with_rows(stream: &Stream, keys: &DeviceView<'_, u64>, rows: Option<&DeviceView<'_, u32>>, bits: u32) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u32>)> {
    let n = keys.len();
    let ids;
    let rows = match rows {
        Some(r) => *r,
        None => {
            ids = iota(stream, n)?;
            ids.view()
        }
    };
    let mut sk = stream.alloc::<u64>(n)?;
    let mut sr = stream.alloc::<u32>(n)?;
    sort_pairs(stream, keys, &rows, &mut sk.view_mut(), &mut sr.view_mut(), SortOrder::Ascending, Some(0..bits.clamp(1, 64)))?;
    Ok((sk, sr))
}

/// Joins any keys (1 to 4 columns of any supported type, with nulls and float equality as
/// `opts` says) by sorting each side with row ids and merging. Maps refer to the input rows.
///
/// Composite keys wider than 64 bits are hashed; candidate matches are then verified against
/// the full keys, so collisions never add or lose rows.
pub fn sort_merge_join(stream: &Stream, left: &Keys<'_>, right: &Keys<'_>, join_type: JoinType, opts: JoinOptions) -> Result<GatherMaps> {
    left.check_comparable(right)?;
    let plan = KeyPlan::new(left, right, opts, 64);
    let (il, ir) = (images(stream, left, plan)?, images(stream, right, plan)?);
    let (nl, nr) = (left.rows(), right.rows());
    let filtered = any_never_match(stream, &il)? || any_never_match(stream, &ir)?;
    // Rows that can match at all.
    let (rl, rr) = if filtered {
        (Some(rows_where(stream, &il.never_match.view(), false, None)?), Some(rows_where(stream, &ir.never_match.view(), false, None)?))
    } else {
        (None, None)
    };
    let keys_of = |img: &crate::keys::KeyImages, rows: &Option<DeviceBuffer<u32>>| -> Result<Option<DeviceBuffer<u64>>> {
        rows.as_ref().map(|r| gather(stream, &img.derived.view(), &r.view(), 0)).transpose()
    };
    let (kl, kr) = (keys_of(&il, &rl)?, keys_of(&ir, &rr)?);
    let (skl, srl) = sort_with_rows(stream, &kl.as_ref().map_or(il.derived.view(), |k| k.view()), rl.as_ref().map(|r| r.view()).as_ref(), plan.bits)?;
    let (skr, srr) = sort_with_rows(stream, &kr.as_ref().map_or(ir.derived.view(), |k| k.view()), rr.as_ref().map(|r| r.view()).as_ref(), plan.bits)?;
    if plan.exact && !filtered {
        return merge_sorted(stream, &skl.view(), &skr.view(), Some(&srl.view()), Some(&srr.view()), join_type);
    }
    let inner = merge_sorted(stream, &skl.view(), &skr.view(), Some(&srl.view()), Some(&srr.view()), JoinType::Inner)?;
    let (a, b) = inner.into_raw();
    let (a, b) = if plan.exact { (a, b) } else { verify(stream, &a.view(), &b.view(), &il, &ir)? };
    from_inner_pairs(stream, a, b, nl, nr, join_type)
}

/// The exact number of rows [`sort_merge_join`] returns.
///
/// For keys that pack exactly into 64 bits (single columns, narrow composites) this counts
/// without allocating the output. Wider composite keys are hashed, and the count then needs
/// the candidate pairs verified, which materializes them.
pub fn sort_merge_join_size(stream: &Stream, left: &Keys<'_>, right: &Keys<'_>, join_type: JoinType, opts: JoinOptions) -> Result<u64> {
    left.check_comparable(right)?;
    let plan = KeyPlan::new(left, right, opts, 64);
    if !plan.exact {
        return Ok(sort_merge_join(stream, left, right, join_type, opts)?.rows());
    }
    let (il, ir) = (images(stream, left, plan)?, images(stream, right, plan)?);
    let (rl, rr) = (rows_where(stream, &il.never_match.view(), false, None)?, rows_where(stream, &ir.never_match.view(), false, None)?);
    let kl = gather(stream, &il.derived.view(), &rl.view(), 0)?;
    let kr = gather(stream, &ir.derived.view(), &rr.view(), 0)?;
    let (skl, _) = sort_with_rows(stream, &kl.view(), Some(&rl.view()), plan.bits)?;
    let (skr, _) = sort_with_rows(stream, &kr.view(), Some(&rr.view()), plan.bits)?;
    let (never_l, never_r) = ((left.rows() - rl.len()) as u64, (right.rows() - rr.len()) as u64);
    let all = SearchOutputs { a_index: true, a_match: true, b_match: true };
    let lower = sorted_search(stream, &skl.view(), &skr.view(), Bound::Lower, all)?;
    let a_matched = rows_where(stream, &lower.a_match.unwrap().view(), true, None)?.len() as u64;
    let b_matched = rows_where(stream, &lower.b_match.unwrap().view(), true, None)?.len() as u64;
    let (a_un, b_un) = (skl.len() as u64 - a_matched + never_l, skr.len() as u64 - b_matched + never_r);
    let inner = || -> Result<u64> {
        let ub = sorted_search(stream, &skl.view(), &skr.view(), Bound::Upper, SearchOutputs::INDEX)?.a_index.unwrap();
        let n = skl.len();
        let mut counts = stream.alloc::<u32>(n)?;
        let c = counts.view_mut().as_mut_ptr();
        let lb = lower.a_index.as_ref().unwrap();
        // SAFETY: n entries each.
        launch(stream, "merge counts", || unsafe { ffi::gj_j_merge_counts(lb.view().as_ptr(), ub.view().as_ptr(), n as i64, 0, c, stream.raw()) })?;
        Ok(count_offsets(stream, &counts.view())?.1)
    };
    Ok(match join_type {
        JoinType::Inner => inner()?,
        JoinType::Left => inner()? + a_un,
        JoinType::Right => inner()? + b_un,
        JoinType::Full => inner()? + a_un + b_un,
        JoinType::LeftSemi => a_matched,
        JoinType::LeftAnti => a_un,
        JoinType::RightSemi => b_matched,
        JoinType::RightAnti => b_un,
    })
}
