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
//! Steps 1-4 run fused over merge-path tiles: in one pass where a bound of the output is known
//! (`max(|A|, |B|)` rows for inner joins, `|A| + |B|` for outer ones: exact bounds when either
//! side's keys are unique) and at most `2|A|`; each tile learns where its rows start from the
//! tiles before it by decoupled look-back. Otherwise, or when the output passes the bound, in
//! two passes (count, then write); the general path (every step a pass of its own) where one
//! tile's output is too large for one block. Maps of the one pass hold at most twice their rows'
//! memory (they are copied to their exact size when they would hold more).
//!
//! The one pass first assumes that, key by key, one side has at most one row (PK-FK joins,
//! either side the key): then every item of the merge gives at most one row, where it falls, and
//! a tile needs no equal-range search (H100, 2^26 sorted keys a side: 0.68 ms against 0.82 for
//! the pass for any keys). A key with several rows on both sides stops that pass at the tile
//! that meets it, and the pass for any keys runs from the start: where such a key comes only in
//! the last tiles, the join costs one pass more (1.59 against 0.91 ms at that size).
//!
//! Output order: [`sorted_merge_join`] returns rows sorted by A, then by B, with the unmatched
//! B rows last in B order (ModernGPU's contract). [`sort_merge_join`] returns matches by key,
//! then by left row, then by right row; unmatched left rows at their key's place; unmatched right
//! rows last, in key order. When keys are hashed (composites wider than 64 bits) or some keys are
//! null or NaN under "never equal", the unmatched rows of either side come after all matches, in
//! row order. Semi and anti joins return rows in A (or B) order, or key order for the unsorted
//! entry point.

use gpujoin_cub_sys::result::{launch, with_temp};
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};
use gpujoin_primitives::{count_offsets, gather, inclusive_sum, merge_path_partitions, sort_pairs_owned, sorted_search, Bound, SearchKey, SearchOutputs, SortPairsOwned};

use crate::common::{any_never_match, from_inner_pairs, iota, narrow, rows_where, verify};
use crate::kernels::sys::join as ffi;
use crate::keys::{images, KeyPlan};
use crate::table::TableView;
use crate::maps::GatherMaps;
use crate::trace::Phases;
use crate::types::{JoinOptions, JoinType, RowId};

type CountFn<K> = unsafe extern "C" fn(*const K, i64, *const K, i64, *const i64, i32, *mut u64, *mut u8, u64, *mut u32, *mut u32, ffi::gj_j_stream_t) -> i32;
type WriteFn<K> =
    unsafe extern "C" fn(*const K, i64, *const K, i64, *const i64, i32, *const u64, *const u32, *const u32, *mut u32, *mut u32, ffi::gj_j_stream_t) -> i32;
type SingleFn<K> = unsafe extern "C" fn(
    *const K,
    i64,
    *const K,
    i64,
    *const i64,
    i32,
    *mut u64,
    u64,
    u64,
    *mut u8,
    i32,
    i32,
    *const u32,
    *const u32,
    *mut u32,
    *mut u32,
    ffi::gj_j_stream_t,
) -> i32;

/// Key types the sorted entry point takes: `u32, u64, i32, i64`, sorted ascending.
pub trait SortedKey: SearchKey {
    #[doc(hidden)]
    const COUNT: CountFn<Self>;
    #[doc(hidden)]
    const WRITE: WriteFn<Self>;
    #[doc(hidden)]
    const SINGLE: SingleFn<Self>;
}
macro_rules! sorted_key {
    ($t:ty, $c:ident, $w:ident, $o:ident) => {
        impl SortedKey for $t {
            const COUNT: CountFn<Self> = ffi::$c;
            const WRITE: WriteFn<Self> = ffi::$w;
            const SINGLE: SingleFn<Self> = ffi::$o;
        }
    };
}
sorted_key!(u32, gj_j_merge_count_u32, gj_j_merge_write_u32, gj_j_merge_single_u32);
sorted_key!(u64, gj_j_merge_count_u64, gj_j_merge_write_u64, gj_j_merge_single_u64);
sorted_key!(i32, gj_j_merge_count_i32, gj_j_merge_write_i32, gj_j_merge_single_i32);
sorted_key!(i64, gj_j_merge_count_i64, gj_j_merge_write_i64, gj_j_merge_single_i64);

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
    merge_sorted(stream, a, b, None, None, join_type, MergeRoute::Auto)
}

/// The path of the merge on sorted keys: its own choice, or one a test forces
/// ([`TestingOptions`](crate::TestingOptions)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MergeRoute {
    /// Fused over merge-path tiles (one pass where a bound of the output applies, else count then
    /// write), the general path where a tile's output is too large. The one pass first assumes
    /// that each key has at most one row on one side or the other ([`merge_one_pass`]).
    Auto,
    /// As `Auto`, but the one pass runs at once for keys of any multiplicity.
    AnyMatchOnePass,
    /// Fused, always count then write.
    TwoPass,
    /// Always the general path: every step a pass of its own.
    General,
}

/// What [`sorted_merge_join_checked`] found.
pub(crate) enum CheckedMerge {
    /// Both sides were sorted: the join.
    Maps(GatherMaps),
    /// A side was not sorted ascending (nothing was joined).
    Unsorted,
}

/// [`sorted_merge_join`] on keys not known to be sorted, for the join types with both maps
/// (semi and anti joins are an `InvalidArgument`: check their order first): the order of both
/// sides is checked in the merge's own counting pass (every adjacent pair; no pass of its own and
/// no extra host wait).
pub(crate) fn sorted_merge_join_checked<K: SortedKey>(stream: &Stream, a: &DeviceView<'_, K>, b: &DeviceView<'_, K>, join_type: JoinType, route: MergeRoute) -> Result<CheckedMerge> {
    check_rows("left", a.len())?;
    check_rows("right", b.len())?;
    if !(join_type.has_left_map() && join_type.has_right_map()) {
        return Err(Error::invalid("internal: the checked sorted merge of a semi or anti join"));
    }
    if route == MergeRoute::General {
        return Err(Error::invalid("internal: the checked sorted merge on the general path"));
    }
    match merge_fused(stream, a, b, None, None, join_type, true, route)? {
        Fused::Maps(m) => Ok(CheckedMerge::Maps(m)),
        Fused::Unsorted => Ok(CheckedMerge::Unsorted),
        // Sorted (checked), but a tile too large for one block: the general path.
        Fused::OverCap => merge_sorted(stream, a, b, None, None, join_type, MergeRoute::General).map(CheckedMerge::Maps),
    }
}

/// [`sorted_merge_join`] with the test-only knobs of [`TestingOptions`](crate::TestingOptions) (of which it reads
/// `force_general_merge_path`, `two_pass_merge` and `any_match_one_pass`). Only with the feature `testing`.
#[cfg(feature = "testing")]
pub fn sorted_merge_join_with<K: SortedKey>(
    stream: &Stream,
    a: &DeviceView<'_, K>,
    b: &DeviceView<'_, K>,
    join_type: JoinType,
    testing: crate::types::TestingOptions,
) -> Result<GatherMaps> {
    check_rows("left", a.len())?;
    check_rows("right", b.len())?;
    merge_sorted(stream, a, b, None, None, join_type, testing.merge_route())
}

/// The core on sorted keys; `a_rows`/`b_rows` map sorted positions to original rows.
/// `route`: the fused per-tile path unless a test forces another ([`MergeRoute`]).
fn merge_sorted<K: SortedKey>(
    stream: &Stream,
    a: &DeviceView<'_, K>,
    b: &DeviceView<'_, K>,
    a_rows: Option<&DeviceView<'_, u32>>,
    b_rows: Option<&DeviceView<'_, u32>>,
    join_type: JoinType,
    route: MergeRoute,
) -> Result<GatherMaps> {
    let empty = || stream.alloc::<u32>(0);
    // Semi and anti joins need only the match flags of one side.
    if matches!(join_type, JoinType::LeftSemi | JoinType::LeftAnti) {
        let out = SearchOutputs { a_index: false, a_match: true, b_match: false };
        let flags = sorted_search(stream, a, b, Bound::Lower, out)?.a_match.unwrap();
        let rows = rows_where(stream, &flags.view(), join_type == JoinType::LeftSemi, a_rows)?;
        return Ok(GatherMaps::new(join_type, rows, empty()?));
    }
    if matches!(join_type, JoinType::RightSemi | JoinType::RightAnti) {
        let out = SearchOutputs { a_index: false, a_match: false, b_match: true };
        let flags = sorted_search(stream, a, b, Bound::Lower, out)?.b_match.unwrap();
        let rows = rows_where(stream, &flags.view(), join_type == JoinType::RightSemi, b_rows)?;
        return Ok(GatherMaps::new(join_type, empty()?, rows));
    }
    if route != MergeRoute::General {
        if let Fused::Maps(maps) = merge_fused(stream, a, b, a_rows, b_rows, join_type, false, route)? {
            return Ok(maps);
        }
    }
    // The general path: every step a pass of its own, any skew.
    // 1. Lower bound of A in B, with match flags of B for right joins.
    let out = SearchOutputs { a_index: true, a_match: false, b_match: join_type.keeps_unmatched_right() };
    let lower = sorted_search(stream, a, b, Bound::Lower, out)?;
    let lb = lower.a_index.unwrap();
    // 2. Equality counts from the upper bound.
    let ub = sorted_search(stream, a, b, Bound::Upper, SearchOutputs::INDEX)?.a_index.unwrap();
    let n = a.len();
    // 3. Scan: offsets and the left/inner total.
    let (offsets, left_total) = merge_offsets(stream, &lb.view(), &ub.view(), join_type.keeps_unmatched_left())?;
    // 5 (sized first). Unmatched B rows for right/full joins.
    let right_rows = if join_type.keeps_unmatched_right() {
        Some(rows_where(stream, &lower.b_match.as_ref().unwrap().view(), false, b_rows)?)
    } else {
        None
    };
    let (mut out_a, mut out_b) = alloc_maps(stream, left_total, right_rows.as_ref().map_or(0, |r| r.len()))?;
    // 4. Load-balancing search expands the Cartesian products.
    {
        let lt = left_total as usize;
        let (oa, ob) = (out_a.slice_mut(..lt).as_mut_ptr(), out_b.slice_mut(..lt).as_mut_ptr());
        let (ar, br) = (a_rows.map_or(std::ptr::null(), |r| r.as_ptr()), b_rows.map_or(std::ptr::null(), |r| r.as_ptr()));
        let (o, l, u) = (offsets.view().as_ptr(), lb.view().as_ptr(), ub.view().as_ptr());
        // SAFETY: offsets/lb/ub have n entries; outputs hold left_total rows.
        with_temp(stream, "merge expand", |t, tb| unsafe { ffi::gj_j_merge_expand(t, tb, o, n as i64, left_total as i64, l, u, ar, br, oa, ob, stream.raw()) })?;
    }
    append_right_rows(stream, &mut out_a, &mut out_b, left_total as usize, right_rows)?;
    Ok(GatherMaps::new(join_type, out_a, out_b))
}

/// Steps 2-3: the output rows of each A row (`upper - lower` equal B keys; 1 for an A row without
/// any when `keep_unmatched`, as left and full joins keep it) scanned into 64-bit offsets, and
/// their total.
///
/// Example: lower `[0, 2, 2]`, upper `[2, 2, 5]` give counts 2, 0 (1 kept), 3 and offsets
/// `[0, 2, 2, 5]` (`[0, 2, 3, 6]` kept).
pub(crate) fn merge_offsets(stream: &Stream, lower: &DeviceView<'_, u32>, upper: &DeviceView<'_, u32>, keep_unmatched: bool) -> Result<(DeviceBuffer<u64>, u64)> {
    let n = lower.len();
    gpujoin_device::check_same_len("lower bounds", n, "upper bounds", upper.len())?;
    let mut counts = stream.alloc::<u32>(n)?;
    let c = counts.view_mut().as_mut_ptr();
    // SAFETY: n entries each.
    launch(stream, "merge counts", || unsafe { ffi::gj_j_merge_counts(lower.as_ptr(), upper.as_ptr(), n as i64, keep_unmatched as i32, c, stream.raw()) })?;
    count_offsets(stream, &counts.view())
}

/// Allocates maps for `left_total` inner/left rows plus `right_total` unmatched right rows;
/// an output the device cannot hold is [`Error::OutputTooLarge`].
fn alloc_maps(stream: &Stream, left_total: u64, right_total: usize) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
    let total = left_total.checked_add(right_total as u64).ok_or_else(|| Error::too_large("join output rows", u64::MAX, u64::MAX))?;
    crate::common::alloc_output_maps(stream, total, 2)
}

/// Step 5: the unmatched right rows after the first `at` rows, with no left row.
fn append_right_rows(stream: &Stream, out_a: &mut DeviceBuffer<u32>, out_b: &mut DeviceBuffer<u32>, at: usize, rows: Option<DeviceBuffer<u32>>) -> Result<()> {
    if let Some(rr) = rows {
        stream.copy_device_to_device(&rr.view(), &mut out_b.slice_mut(at..))?;
        stream.fill_u32_bits(&mut out_a.slice_mut(at..), gpujoin_primitives::NO_ROW)?;
    }
    Ok(())
}

/// What [`merge_fused`] did.
enum Fused {
    Maps(GatherMaps),
    /// A tile's output is too large for one block to expand: take the general path.
    OverCap,
    /// The keys were checked and a side is not sorted.
    Unsorted,
}

/// Steps 1-4 fused over merge-path tiles, when no tile's output is too large for one block to
/// expand: one pass ([`merge_one_pass`]) where a bound of the output is known and small enough,
/// else (or when the output passes that bound) two passes, count then write. `check_order`: the
/// (first) pass also checks that both sides are sorted ascending.
#[allow(clippy::too_many_arguments)]
fn merge_fused<K: SortedKey>(
    stream: &Stream,
    a: &DeviceView<'_, K>,
    b: &DeviceView<'_, K>,
    a_rows: Option<&DeviceView<'_, u32>>,
    b_rows: Option<&DeviceView<'_, u32>>,
    join_type: JoinType,
    check_order: bool,
    route: MergeRoute,
) -> Result<Fused> {
    let mut ph = Phases::new(stream, "merge_fused");
    // SAFETY: a constant.
    let tile = unsafe { ffi::gj_j_merge_tile_items() } as usize;
    let tiles = (a.len() + b.len()).div_ceil(tile);
    let parts = merge_path_partitions(stream, a, b, tile, true)?;
    let mut b_match = if join_type.keeps_unmatched_right() { Some(stream.alloc::<u8>(b.len())?) } else { None };
    let keep = join_type.keeps_unmatched_left() as i32;
    let cap = 4 * tile as u64;
    if let Some(capacity) = one_pass_capacity(a.len(), b.len(), join_type).filter(|_| matches!(route, MergeRoute::Auto | MergeRoute::AnyMatchOnePass)) {
        let sides = Sides { a, b, a_rows, b_rows, parts: &parts.view(), keep, cap, check_order };
        match merge_one_pass(stream, &sides, capacity, join_type, route == MergeRoute::Auto, &mut b_match)? {
            OnePass::Done(fused) => {
                ph.mark("one pass");
                return Ok(fused);
            }
            OnePass::PastCapacity => ph.mark("one pass (past its capacity)"),
        }
    }
    let mut tile_rows = stream.alloc::<u64>(tiles)?;
    // [over cap, unsorted sides]
    let mut flags = stream.alloc_zeroed::<u32>(2)?;
    let (p, tr) = (parts.view().as_ptr(), tile_rows.view_mut().as_mut_ptr());
    let oc = flags.view_mut().as_mut_ptr();
    // SAFETY: two flag words.
    let unsorted = if check_order { unsafe { oc.add(1) } } else { std::ptr::null_mut() };
    let bm = b_match.as_mut().map_or(std::ptr::null_mut(), |m| m.view_mut().as_mut_ptr());
    // SAFETY: parts has tiles + 1 entries; tile_rows has tiles; b_match has |B| entries.
    launch(stream, "merge count", || unsafe { K::COUNT(a.as_ptr(), a.len() as i64, b.as_ptr(), b.len() as i64, p, keep, tr, bm, cap, oc, unsorted, stream.raw()) })?;
    ph.mark("partition+count");
    // Tile offsets on the device: offsets[0] = 0, offsets[t + 1] = rows of tiles 0..=t.
    let mut offsets = stream.alloc_zeroed::<u64>(tiles + 1)?;
    inclusive_sum(stream, &tile_rows.view(), &mut offsets.slice_mut(1..))?;
    let [over_cap, unsorted] = <[u32; 2]>::try_from(stream.copy_to_host(&flags.view())?).map_err(|_| Error::invalid("internal: merge flags"))?;
    if unsorted != 0 {
        return Ok(Fused::Unsorted);
    }
    if over_cap != 0 {
        return Ok(Fused::OverCap);
    }
    let left_total = stream.copy_to_host(&offsets.slice(tiles..))?[0];
    let right_rows = b_match.map(|m| rows_where(stream, &m.view(), false, b_rows)).transpose()?;
    let (mut out_a, mut out_b) = alloc_maps(stream, left_total, right_rows.as_ref().map_or(0, |r| r.len()))?;
    let doff = offsets;
    ph.mark("scan+alloc+right rows");
    {
        let lt = left_total as usize;
        let (oa, ob) = (out_a.slice_mut(..lt).as_mut_ptr(), out_b.slice_mut(..lt).as_mut_ptr());
        let (ar, br) = (a_rows.map_or(std::ptr::null(), |r| r.as_ptr()), b_rows.map_or(std::ptr::null(), |r| r.as_ptr()));
        let o = doff.view().as_ptr();
        // SAFETY: as for the count pass; outputs hold left_total rows.
        launch(stream, "merge write", || unsafe { K::WRITE(a.as_ptr(), a.len() as i64, b.as_ptr(), b.len() as i64, p, keep, o, ar, br, oa, ob, stream.raw()) })?;
    }
    ph.mark("write");
    append_right_rows(stream, &mut out_a, &mut out_b, left_total as usize, right_rows)?;
    Ok(Fused::Maps(GatherMaps::new(join_type, out_a, out_b)))
}

/// The rows the one-pass merge allocates before it knows the output: a bound of the output
/// whenever either side's keys are unique (PK-FK joins), `max(|A|, |B|)` for inner joins and
/// `|A| + |B|` for the outer ones; `None` (count, then write) for semi and anti joins, empty
/// outputs, and where that bound passes `2|A|`, so that the pass stays within the two passes'
/// memory (`memory.rs`: `16|A|` bytes of the merge's own working memory).
///
/// Example: `|A| = |B| = 1000`: 1000 rows for an inner join, 2000 for a full one; `|A| = 10`,
/// `|B| = 1000`: `None`.
fn one_pass_capacity(a: usize, b: usize, join_type: JoinType) -> Option<u64> {
    if !(join_type.has_left_map() && join_type.has_right_map()) {
        return None;
    }
    let (a, b) = (a as u64, b as u64);
    let bound = if join_type == JoinType::Inner { a.max(b) } else { a + b };
    (bound > 0 && bound <= 2 * a).then_some(bound)
}

/// What the merge passes read: both sides, their row ids, the merge-path partitions, the kind of
/// output rows.
struct Sides<'s, 'v, K> {
    a: &'s DeviceView<'v, K>,
    b: &'s DeviceView<'v, K>,
    a_rows: Option<&'s DeviceView<'v, u32>>,
    b_rows: Option<&'s DeviceView<'v, u32>>,
    parts: &'s DeviceView<'s, i64>,
    /// 1 where A rows without a match give a row (left and full joins).
    keep: i32,
    /// The most rows one tile may write.
    cap: u64,
    check_order: bool,
}

/// What [`merge_one_pass`] did.
enum OnePass {
    Done(Fused),
    /// The output has more rows than the capacity (or the maps could not be allocated): nothing
    /// was kept; the two passes follow.
    PastCapacity,
}

/// One pass over the merge-path tiles, into maps of `capacity` rows: each tile counts its rows,
/// learns where they start from the tiles before it (decoupled look-back) and writes them.
/// Right and full joins then append the unmatched B rows (`b_match`, written by the pass),
/// selected straight into the maps where every B row would fit. Maps
/// more than twice the output are copied to their exact size, so that a join holds at most twice
/// its rows' memory.
///
/// `single_match`: the pass first assumes that each key has at most one row on one side or the
/// other (PK-FK joins, either side the key), so that every item of the merge gives at most one
/// row where it falls (no equal-range searches, one count a thread); a key with several rows on
/// both sides stops it (the tiles after the one that saw it stop at once) and the pass for any
/// keys runs instead. Both write the same rows in the same order.
///
/// Example: A = 1 2 3, B = 2 3 4, inner: capacity 3, tiles write (1, 0) (2, 1) and the maps are
/// truncated to their 2 rows.
fn merge_one_pass<K: SortedKey>(
    stream: &Stream,
    s: &Sides<'_, '_, K>,
    capacity: u64,
    join_type: JoinType,
    single_match: bool,
    b_match: &mut Option<DeviceBuffer<u8>>,
) -> Result<OnePass> {
    let n = usize::try_from(capacity).map_err(|_| Error::too_large("join output rows", capacity, usize::MAX as u64))?;
    let alloc = |len: usize| match stream.alloc::<u32>(len) {
        Err(Error::OutOfMemory { .. }) => Ok(None),
        r => r.map(Some),
    };
    let (Some(mut out_a), Some(mut out_b)) = (alloc(n)?, alloc(n)?) else {
        return Ok(OnePass::PastCapacity);
    };
    let tiles = s.parts.len() - 1;
    // [ticket, flags, rows, one look-back word per tile]
    let mut ctl = stream.alloc_zeroed::<u64>(tiles + 3)?;
    let mut single = single_match;
    let (flags, rows) = loop {
        {
            let (a, b) = (s.a, s.b);
            let (ar, br) = (s.a_rows.map_or(std::ptr::null(), |r| r.as_ptr()), s.b_rows.map_or(std::ptr::null(), |r| r.as_ptr()));
            let bm = b_match.as_mut().map_or(std::ptr::null_mut(), |m| m.view_mut().as_mut_ptr());
            let (oa, ob, c, p) = (out_a.view_mut().as_mut_ptr(), out_b.view_mut().as_mut_ptr(), ctl.view_mut().as_mut_ptr(), s.parts.as_ptr());
            // SAFETY: parts has tiles + 1 entries, ctl tiles + 3, b_match |B|; the kernel writes at
            // most `capacity` rows of each map.
            launch(stream, "merge (one pass)", || unsafe {
                K::SINGLE(a.as_ptr(), a.len() as i64, b.as_ptr(), b.len() as i64, p, s.keep, c, s.cap, capacity, bm, s.check_order as i32, single as i32, ar, br, oa, ob, stream.raw())
            })?;
        }
        let [flags, rows] = <[u64; 2]>::try_from(stream.copy_to_host(&ctl.slice(1..3))?).map_err(|_| Error::invalid("internal: merge flags"))?;
        let flags = flags as u32;
        if single && flags & ffi::GJ_J_MERGE_MANY_TO_MANY != 0 && flags & (ffi::GJ_J_MERGE_UNSORTED_A | ffi::GJ_J_MERGE_UNSORTED_B) == 0 {
            // A key with several rows on both sides: the pass for any keys, from a clean slate.
            stream.memset_bytes(&mut ctl.view_mut(), 0)?;
            single = false;
            continue;
        }
        break (flags, rows);
    };
    if flags & (ffi::GJ_J_MERGE_UNSORTED_A | ffi::GJ_J_MERGE_UNSORTED_B) != 0 {
        return Ok(OnePass::Done(Fused::Unsorted));
    }
    if flags & ffi::GJ_J_MERGE_OVER_CAP != 0 {
        // Tiles after the one over its cap stopped unchecked: the two passes check the order.
        return Ok(if s.check_order { OnePass::PastCapacity } else { OnePass::Done(Fused::OverCap) });
    }
    if flags & ffi::GJ_J_MERGE_OVERFLOW != 0 {
        return Ok(OnePass::PastCapacity);
    }
    let left_total = rows as usize;
    let mut total = left_total;
    if let Some(m) = b_match.as_ref() {
        let nb = m.len();
        if left_total + nb <= n {
            // Every B row fits after the pass's rows: the unmatched ones go straight there.
            let unmatched = gpujoin_primitives::select_by_flag_into(stream, s.b_rows, &m.view(), false, &mut out_b.slice_mut(left_total..left_total + nb))?;
            stream.fill_u32_bits(&mut out_a.slice_mut(left_total..left_total + unmatched), gpujoin_primitives::NO_ROW)?;
            total += unmatched;
        } else {
            let rr = rows_where(stream, &m.view(), false, s.b_rows)?;
            total += rr.len();
            if total > n {
                return Ok(OnePass::PastCapacity);
            }
            out_a.truncate(total);
            out_b.truncate(total);
            append_right_rows(stream, &mut out_a, &mut out_b, left_total, Some(rr))?;
        }
    }
    *b_match = None;
    if 2 * total < n {
        // Exact maps: the copy costs less than the memory it gives back.
        let (mut ea, mut eb) = alloc_maps(stream, total as u64, 0)?;
        stream.copy_device_to_device(&out_a.slice(..total), &mut ea.view_mut())?;
        stream.copy_device_to_device(&out_b.slice(..total), &mut eb.view_mut())?;
        (out_a, out_b) = (ea, eb);
    } else {
        out_a.truncate(total);
        out_b.truncate(total);
    }
    Ok(OnePass::Done(Fused::Maps(GatherMaps::new(join_type, out_a, out_b))))
}

/// Sorts `keys` with row ids `rows` (or `0..n`) on their low `bits` bits, in the keys' and
/// rows' own buffers plus one more pair ([`sort_pairs_owned`]).
pub(crate) fn sort_with_rows<K: SortPairsOwned>(
    stream: &Stream,
    keys: DeviceBuffer<K>,
    rows: Option<DeviceBuffer<u32>>,
    bits: u32,
) -> Result<(DeviceBuffer<K>, DeviceBuffer<u32>)> {
    let rows = match rows {
        Some(r) => r,
        None => iota(stream, keys.len())?,
    };
    sort_pairs_owned(stream, keys, rows, Some(0..bits.clamp(1, K::BITS)))
}

/// The derived keys of the rows that can match (all rows when `rows` is `None`), sorted, with
/// their row ids; narrowed to 32 bits when the exact keys fit, and for hashed keys (their low
/// 32 bits are as good a hash as the 64; the extra collisions are verified away like the rest).
enum SortedSide {
    Narrow(DeviceBuffer<u32>, DeviceBuffer<u32>),
    Wide(DeviceBuffer<u64>, DeviceBuffer<u32>),
}

impl SortedSide {
    /// Rows sorted.
    fn len(&self) -> usize {
        match self {
            SortedSide::Narrow(k, _) | SortedSide::Wide(_, k) => k.len(),
        }
    }
}

/// Sorts derived keys (owned) with their rows; narrowed to 32 bits first when `narrow_keys`.
fn sort_side(stream: &Stream, keys: DeviceBuffer<u64>, rows: Option<DeviceBuffer<u32>>, bits: u32, narrow_keys: bool) -> Result<SortedSide> {
    if narrow_keys {
        let k32 = narrow(stream, &keys.view())?;
        drop(keys);
        let (k, r) = sort_with_rows(stream, k32, rows, bits.min(32))?;
        Ok(SortedSide::Narrow(k, r))
    } else {
        let (k, r) = sort_with_rows(stream, keys, rows, bits)?;
        Ok(SortedSide::Wide(k, r))
    }
}

/// The hashed keys of one side's rows that can match, sorted (the images stay for verification).
fn sorted_side(stream: &Stream, img: &crate::keys::KeyImages, rows: Option<DeviceBuffer<u32>>, plan: KeyPlan) -> Result<SortedSide> {
    let keys = match &rows {
        Some(r) => gather(stream, &img.derived.view(), &r.view(), 0)?,
        None => stream.copy_from_device(&img.derived.view())?,
    };
    sort_side(stream, keys, rows, plan.bits, plan.bits <= 32 || !plan.exact)
}

/// One side of a join on exact derived keys, sorted with its row ids; only the sorted keys and
/// rows stay on the device (the key images go before the sort, which is where the peak is).
/// Also returns the rows that can match nothing (a NULL or NaN key under "never equal").
fn exact_side(stream: &Stream, keys: &TableView<'_>, plan: KeyPlan) -> Result<(SortedSide, usize)> {
    debug_assert!(plan.exact);
    let crate::keys::KeyImages { columns, flags, derived, never_match } = images(stream, keys, plan)?;
    drop((columns, flags));
    let rows = if any_never_match(stream, &never_match.view())? { Some(rows_where(stream, &never_match.view(), false, None)?) } else { None };
    drop(never_match);
    let derived = match &rows {
        Some(r) => gather(stream, &derived.view(), &r.view(), 0)?,
        None => derived,
    };
    let sorted = sort_side(stream, derived, rows, plan.bits, plan.bits <= 32)?;
    let never = keys.rows() - sorted.len();
    Ok((sorted, never))
}

fn merge_sides(stream: &Stream, l: &SortedSide, r: &SortedSide, join_type: JoinType, opts: JoinOptions) -> Result<GatherMaps> {
    let route = opts.merge_route();
    match (l, r) {
        (SortedSide::Narrow(kl, rl), SortedSide::Narrow(kr, rr)) => merge_sorted(stream, &kl.view(), &kr.view(), Some(&rl.view()), Some(&rr.view()), join_type, route),
        (SortedSide::Wide(kl, rl), SortedSide::Wide(kr, rr)) => merge_sorted(stream, &kl.view(), &kr.view(), Some(&rl.view()), Some(&rr.view()), join_type, route),
        _ => Err(Error::invalid("internal: sides sorted with different key widths")),
    }
}

/// Joins any keys (1 to 4 columns of any supported type, with nulls and float equality as
/// `opts` says) by sorting each side with row ids and merging. Maps refer to the input rows.
///
/// Composite keys wider than 64 bits are hashed; candidate matches are then verified against
/// the full keys, so collisions never add or lose rows.
pub fn sort_merge_join(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions) -> Result<GatherMaps> {
    crate::keys::check_comparable(left, right)?;
    crate::common::check_output_budget(stream, left, right, join_type, opts)?;
    let mut ph = Phases::new(stream, "sort_merge_join");
    let plan = KeyPlan::new(left, right, opts, 64);
    let (nl, nr) = (left.rows(), right.rows());
    if plan.exact {
        let (sl, never_l) = exact_side(stream, left, plan)?;
        let (sr, never_r) = exact_side(stream, right, plan)?;
        ph.mark("key images + sort both sides");
        if never_l == 0 && never_r == 0 {
            let m = merge_sides(stream, &sl, &sr, join_type, opts);
            ph.mark("merge");
            return m;
        }
        let (a, b) = merge_sides(stream, &sl, &sr, JoinType::Inner, opts)?.into_raw();
        drop((sl, sr));
        ph.mark("merge");
        return from_inner_pairs(stream, a, b, nl, nr, join_type);
    }
    // Hashed keys: candidates on the hashes, verified against the images.
    let (il, ir) = (images(stream, left, plan)?, images(stream, right, plan)?);
    ph.mark("key images");
    let filtered = any_never_match(stream, &il.never_match.view())? || any_never_match(stream, &ir.never_match.view())?;
    let (rl, rr) = if filtered {
        (Some(rows_where(stream, &il.never_match.view(), false, None)?), Some(rows_where(stream, &ir.never_match.view(), false, None)?))
    } else {
        (None, None)
    };
    let sl = sorted_side(stream, &il, rl, plan)?;
    let sr = sorted_side(stream, &ir, rr, plan)?;
    ph.mark("sort both sides");
    let (a, b) = merge_sides(stream, &sl, &sr, JoinType::Inner, opts)?.into_raw();
    drop((sl, sr));
    ph.mark("merge");
    let (a, b) = verify(stream, &a.view(), &b.view(), &il, &ir)?;
    ph.mark("verify");
    from_inner_pairs(stream, a, b, nl, nr, join_type)
}

/// The exact number of rows [`sort_merge_join`] returns.
///
/// Counts without allocating the output: keys that pack exactly into 64 bits (single columns,
/// narrow composites) by sorted searches on the packed keys, wider composites on exact dense
/// ranks of their keys (as [`crate::chunked::EquiChunkSource`] does); semi and anti joins, whose
/// output is at most one side's rows, by running them.
pub fn sort_merge_join_size(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, join_type: JoinType, opts: JoinOptions) -> Result<u64> {
    crate::keys::check_comparable(left, right)?;
    let plan = KeyPlan::new(left, right, opts, 64);
    if !plan.exact {
        // Hashed keys: the chunked source counts on exact dense ranks of the keys.
        use crate::chunked::ChunkSource;
        let src = crate::chunked::EquiChunkSource::new(stream, left, right, join_type, opts)?;
        let offsets = src.offsets();
        let per_left_row = stream.copy_to_host(&offsets.slice(offsets.len() - 1..))?[0];
        return Ok(per_left_row + src.tail_rows());
    }
    let (sl, never_l) = exact_side(stream, left, plan)?;
    let (sr, never_r) = exact_side(stream, right, plan)?;
    let c = match (&sl, &sr) {
        (SortedSide::Narrow(a, _), SortedSide::Narrow(b, _)) => count_sorted(stream, &a.view(), &b.view(), join_type)?,
        (SortedSide::Wide(a, _), SortedSide::Wide(b, _)) => count_sorted(stream, &a.view(), &b.view(), join_type)?,
        _ => return Err(Error::invalid("internal: sides sorted with different key widths")),
    };
    let (a_un, b_un) = (sl.len() as u64 - c.a_matched + never_l as u64, sr.len() as u64 - c.b_matched + never_r as u64);
    Ok(match join_type {
        JoinType::Inner => c.inner,
        JoinType::Left => c.inner + a_un,
        JoinType::Right => c.inner + b_un,
        JoinType::Full => c.inner + a_un + b_un,
        JoinType::LeftSemi => c.a_matched,
        JoinType::LeftAnti => a_un,
        JoinType::RightSemi => c.b_matched,
        JoinType::RightAnti => b_un,
    })
}

/// Counts of a join of sorted keys: inner pairs (when the join type has them) and the rows of
/// each side with a match.
struct SortedCounts {
    inner: u64,
    a_matched: u64,
    b_matched: u64,
}

fn count_sorted<K: SearchKey>(stream: &Stream, a: &DeviceView<'_, K>, b: &DeviceView<'_, K>, join_type: JoinType) -> Result<SortedCounts> {
    let all = SearchOutputs { a_index: true, a_match: true, b_match: true };
    let lower = sorted_search(stream, a, b, Bound::Lower, all)?;
    let a_matched = rows_where(stream, &lower.a_match.unwrap().view(), true, None)?.len() as u64;
    let b_matched = rows_where(stream, &lower.b_match.unwrap().view(), true, None)?.len() as u64;
    let inner = if matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
        let ub = sorted_search(stream, a, b, Bound::Upper, SearchOutputs::INDEX)?.a_index.unwrap();
        merge_offsets(stream, &lower.a_index.as_ref().unwrap().view(), &ub.view(), false)?.1
    } else {
        0
    };
    Ok(SortedCounts { inner, a_matched, b_matched })
}
