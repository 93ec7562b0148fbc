//! SMJ-UM and SMJ-OM (seed 002, sections 3.1 and 4.2).
//!
//! Both sort each side by one scalar key: the key column itself when it is a single non-null
//! integer column, otherwise the exact derived key of the join's key images (packed composite,
//! float or nullable keys; narrowed to 32 bits when it fits).
//!
//! - **SMJ-UM** (GFUR): 1. sort each side's keys with row ids `0..n`; 2. merge-path join of the
//!   sorted keys (positions in the sorted sides), turned into input rows through the sorted row
//!   ids; 3. gather every payload column from the inputs (unclustered).
//! - **SMJ-OM** (GFTR, Algorithm 1): 1. sort each side's keys with its first payload column
//!   (the keys alone when it has none); 2. the same merge, whose positions in the sorted sides
//!   are the virtual row ids; 3. side by side, the larger first: gather the first column from
//!   its sorted copy, then sort each further column with its keys (the same stable sort, hence
//!   the same permutation), gather it and drop it before the next one; the side's positions are
//!   dropped once its columns are done. Sides of at least 2^18 rows sort their later columns by
//!   key ranges ([`ranges`]: the same order in about half the scratch), so that the peak stays
//!   at or below SMJ-UM's for wide joins (inner PK-FK, |S| = 2|R|, 4-byte keys: 5.75 against 6
//!   columns of |S| 4-byte values with two 4-byte payloads a side; equal with 8-byte ones).
//!   The transform sorts the larger side first.
//!
//! Keys the scalar path cannot take (composites wider than 64 bits, which are hashed, and null
//! or NaN keys that match nothing under the options) run [`crate::sort_merge_join`] (which
//! handles them) with unclustered gathers, which is SMJ-UM. SMJ-OM refuses them with
//! [`Error::Unsupported`](gpujoin_device::Error::Unsupported): hashed keys before any device
//! work (the key types tell), keys that match nothing once the key images show one, before the
//! join; it never runs SMJ-UM in its place. With [`Output::MapsOnly`] there is nothing to
//! materialize and SMJ-OM's maps are SMJ-UM's: SMJ-UM runs and is reported (`algorithm`,
//! `reason`).
//!
//! Output order: rows by key; among equal keys by left row, then right row, in the sorted
//! sides' order (stable sorts: input order); unmatched left rows at their key's place, unmatched
//! right rows last in key order; semi and anti joins in key order.

use gpujoin_device::{DeviceBuffer, DeviceView, Result, Stream};
use gpujoin_primitives::{gather_into_unchecked, sort_keys, sort_pairs, SortOrder, SortPairsWith, NO_ROW};

use super::{gather_column, gather_side, Algorithm, Clock, Output, Relation, WideJoinOptions, WideJoinOutput};
use crate::common::{any_never_match, iota, narrow};
use crate::hash_join::JoinStats;
use crate::keys::{images, values, KeyPlan};
use crate::kernels::TypedValues;
use crate::table::{ColumnView, TableView};
use crate::maps::{side_table, GatherMaps};
use crate::table::Column;
use crate::sort_merge::{sort_merge_join, sorted_merge_join};
use crate::types::JoinType;

mod ranges;

use ranges::{RangeKey, RangePlan};

/// Key types of the scalar path.
trait SmjKey: RangeKey {}
impl<K: RangeKey> SmjKey for K {}

enum Src<'a, K: gpujoin_device::Pod> {
    View(DeviceView<'a, K>),
    Owned(DeviceBuffer<K>),
}

impl<K: gpujoin_device::Pod> Src<'_, K> {
    fn view(&self) -> DeviceView<'_, K> {
        match self {
            Src::View(v) => *v,
            Src::Owned(b) => b.view(),
        }
    }
}

/// Both sides' scalar sort keys.
enum Scalar<'a> {
    U32(Src<'a, u32>, Src<'a, u32>),
    U64(Src<'a, u64>, Src<'a, u64>),
    I32(Src<'a, i32>, Src<'a, i32>),
    I64(Src<'a, i64>, Src<'a, i64>),
}

/// The scalar keys of both sides, or `None` when the keys need the general path.
fn scalar_keys<'a>(stream: &Stream, l: &TableView<'a>, r: &TableView<'a>, opts: crate::types::JoinOptions) -> Result<Option<Scalar<'a>>> {
    let (lc, rc) = (l.columns(), r.columns());
    if lc.len() == 1 && lc[0].validity().is_none() && rc[0].validity().is_none() {
        match (values(&lc[0]), values(&rc[0])) {
            (TypedValues::U32(a), TypedValues::U32(b)) => return Ok(Some(Scalar::U32(Src::View(a), Src::View(b)))),
            (TypedValues::U64(a), TypedValues::U64(b)) => return Ok(Some(Scalar::U64(Src::View(a), Src::View(b)))),
            (TypedValues::I32(a), TypedValues::I32(b)) => return Ok(Some(Scalar::I32(Src::View(a), Src::View(b)))),
            (TypedValues::I64(a), TypedValues::I64(b)) => return Ok(Some(Scalar::I64(Src::View(a), Src::View(b)))),
            _ => {}
        }
    }
    let plan = KeyPlan::new(l, r, opts, 64);
    if !plan.exact {
        return Ok(None);
    }
    let (il, ir) = (images(stream, l, plan)?, images(stream, r, plan)?);
    if any_never_match(stream, &il.never_match.view())? || any_never_match(stream, &ir.never_match.view())? {
        return Ok(None);
    }
    Ok(Some(if plan.bits <= 32 {
        Scalar::U32(Src::Owned(narrow(stream, &il.derived.view())?), Src::Owned(narrow(stream, &ir.derived.view())?))
    } else {
        Scalar::U64(Src::Owned(il.derived), Src::Owned(ir.derived))
    }))
}

/// What [`join`] reports when SMJ-OM cannot serve the keys.
fn om_unsupported(reason: &str) -> gpujoin_device::Error {
    gpujoin_device::Error::Unsupported { what: "SMJ-OM (clustered gathers)".to_string(), reason: format!("{reason}; use SMJ-UM, which runs the general sort-merge join") }
}

pub(crate) fn join(stream: &Stream, left: &Relation<'_>, right: &Relation<'_>, jt: JoinType, om: bool, opts: WideJoinOptions, reason: String) -> Result<WideJoinOutput> {
    let maps_only = opts.output == Output::MapsOnly;
    // Maps only: no payload to materialize, and SMJ-OM's maps are SMJ-UM's; SMJ-UM runs and
    // says so.
    let (om, reason) = if maps_only && om { (false, format!("{reason}; maps only: no payload to materialize, so SMJ-OM's clustered gathers do not apply: SMJ-UM")) } else { (om, reason) };
    let algorithm = if om { Algorithm::SmjOm } else { Algorithm::SmjUm };
    // Hashed keys: known from the key types, refused before any device work.
    if om && !KeyPlan::new(left.keys, right.keys, opts.keys, 64).exact {
        return Err(om_unsupported("composite keys wider than 64 bits are hashed, and only the general sort-merge join (maps into the input rows) verifies them"));
    }
    let clock = Clock::start(stream, opts.keys.stats)?;
    let scalar = scalar_keys(stream, left.keys, right.keys, opts.keys)?;
    let Some(scalar) = scalar else {
        if om {
            // The keys pack exactly, so some row's key matches nothing (found by looking).
            return Err(om_unsupported("some key matches nothing under the join options (null under NullEqualsNothing, or NaN under NanNeverEqual), and only the general sort-merge join sets such rows aside"));
        }
        let why = format!("{reason}; the keys are hashed or some match nothing (null/NaN): the general sort-merge join with unclustered gathers");
        return general(stream, left, right, jt, opts, clock, why);
    };
    let mut out = match scalar {
        Scalar::U32(a, b) => core::<u32>(stream, &a.view(), &b.view(), left, right, jt, om, maps_only, clock)?,
        Scalar::U64(a, b) => core::<u64>(stream, &a.view(), &b.view(), left, right, jt, om, maps_only, clock)?,
        Scalar::I32(a, b) => core::<i32>(stream, &a.view(), &b.view(), left, right, jt, om, maps_only, clock)?,
        Scalar::I64(a, b) => core::<i64>(stream, &a.view(), &b.view(), left, right, jt, om, maps_only, clock)?,
    };
    out.algorithm = algorithm;
    out.reason = reason;
    Ok(out)
}

/// Keys the scalar path cannot take: [`sort_merge_join`] and unclustered gathers. Transform and
/// match are one call, reported as the match phase.
fn general(stream: &Stream, left: &Relation<'_>, right: &Relation<'_>, jt: JoinType, opts: WideJoinOptions, mut clock: Clock, reason: String) -> Result<WideJoinOutput> {
    let maps_only = opts.output == Output::MapsOnly;
    clock.mark(stream)?; // no separate transform phase
    let maps = sort_merge_join(stream, left.keys, right.keys, jt, opts.keys)?;
    clock.mark(stream)?;
    let (l, r) = if maps_only { (None, None) } else { super::gather_sides(stream, &maps, left.payloads, right.payloads)? };
    clock.mark(stream)?;
    let mut stats = JoinStats::default();
    clock.finish(&mut stats)?;
    Ok(WideJoinOutput { join_type: jt, rows: maps.rows(), left: l, right: r, maps: Some(maps), stats, algorithm: Algorithm::SmjUm, reason })
}

/// Sorts `keys` with `values` (any 4- or 8-byte column as raw bits) into new buffers.
fn sort_with<K: SmjKey>(stream: &Stream, keys: &DeviceView<'_, K>, col: &ColumnView<'_>) -> Result<(DeviceBuffer<K>, Column)> {
    let n = keys.len();
    let mut sk = stream.alloc::<K>(n)?;
    fn bits<K: SmjKey + SortPairsWith<V>, V: gpujoin_device::Pod>(stream: &Stream, keys: &DeviceView<'_, K>, sk: &mut DeviceBuffer<K>, v: DeviceView<'_, V>) -> Result<DeviceBuffer<V>> {
        let mut out = stream.alloc::<V>(v.len())?;
        sort_pairs(stream, keys, &v, &mut sk.view_mut(), &mut out.view_mut(), SortOrder::Ascending, None)?;
        Ok(out)
    }
    let bytes = match col.typed::<u32>() {
        Some(v) => bits::<K, u32>(stream, keys, &mut sk, v)?.into_bytes(),
        None => bits::<K, u64>(stream, keys, &mut sk, col.typed::<u64>().expect("a checked payload column"))?.into_bytes(),
    };
    Ok((sk, Column::of_fixed_width(col.data_type(), bytes)))
}

/// `rows[map[k]]` (NONE kept): positions in a sorted side to its input rows.
fn to_rows(stream: &Stream, map: &DeviceView<'_, u32>, rows: &DeviceView<'_, u32>) -> Result<DeviceBuffer<u32>> {
    let mut out = stream.alloc::<u32>(map.len())?;
    if !map.is_empty() {
        gather_into_unchecked(stream, rows, map, &mut out.view_mut(), NO_ROW)?;
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn core<K: SmjKey>(
    stream: &Stream,
    kl: &DeviceView<'_, K>,
    kr: &DeviceView<'_, K>,
    left: &Relation<'_>,
    right: &Relation<'_>,
    jt: JoinType,
    om: bool,
    maps_only: bool,
    mut clock: Clock,
) -> Result<WideJoinOutput> {
    let lp: &[ColumnView<'_>] = if jt.has_left_map() && !maps_only { left.payloads } else { &[] };
    let rp: &[ColumnView<'_>] = if jt.has_right_map() && !maps_only { right.payloads } else { &[] };
    let mut stats = JoinStats::default();

    // 1. Transform.
    struct Sorted<K: gpujoin_device::Pod> {
        keys: DeviceBuffer<K>,
        /// UM: the input row of every sorted position.
        rows: Option<DeviceBuffer<u32>>,
        /// OM: the first payload column, sorted.
        col0: Option<Column>,
    }
    let transform = |keys: &DeviceView<'_, K>, cols: &[ColumnView<'_>]| -> Result<Sorted<K>> {
        let n = keys.len();
        if !om {
            let ids = iota(stream, n)?;
            let mut sk = stream.alloc::<K>(n)?;
            let mut rows = stream.alloc::<u32>(n)?;
            sort_pairs(stream, keys, &ids.view(), &mut sk.view_mut(), &mut rows.view_mut(), SortOrder::Ascending, None)?;
            Ok(Sorted { keys: sk, rows: Some(rows), col0: None })
        } else if let Some(c) = cols.first() {
            let (sk, col0) = sort_with(stream, keys, c)?;
            Ok(Sorted { keys: sk, rows: None, col0: Some(col0) })
        } else {
            let mut sk = stream.alloc::<K>(n)?;
            sort_keys(stream, keys, &mut sk.view_mut(), SortOrder::Ascending, None)?;
            Ok(Sorted { keys: sk, rows: None, col0: None })
        }
    };
    // OM: the larger side first (its sort's scratch is then not on top of the other's output).
    let (sl, sr) = if om && kl.len() > kr.len() {
        let sl = transform(kl, lp)?;
        (sl, transform(kr, rp)?)
    } else if om {
        let sr = transform(kr, rp)?;
        (transform(kl, lp)?, sr)
    } else {
        let sl = transform(kl, lp)?;
        (sl, transform(kr, rp)?)
    };
    clock.mark(stream)?;

    // 2. Match: merge path on the sorted keys; positions in the sorted sides.
    let maps = sorted_merge_join(stream, &sl.keys.view(), &sr.keys.view(), jt)?;
    // OM: the key ranges of each side with later columns to transform in bounded memory.
    let plan = |cols: &[ColumnView<'_>], sorted: &DeviceBuffer<K>| -> Result<Option<RangePlan<K>>> {
        if om && cols.len() > 1 && sorted.len() >= ranges::MIN_ROWS {
            Ok(Some(RangePlan::new(stream, &sorted.view())?))
        } else {
            Ok(None)
        }
    };
    let (plan_l, plan_r) = (plan(lp, &sl.keys)?, plan(rp, &sr.keys)?);
    let Sorted { keys: skl, rows: rows_l, col0: col0_l } = sl;
    let Sorted { keys: skr, rows: rows_r, col0: col0_r } = sr;
    drop((skl, skr));
    let rows = maps.rows();
    let (pos_l, pos_r) = maps.into_raw();
    let (nullable_l, nullable_r) = (jt.keeps_unmatched_right(), jt.keeps_unmatched_left());

    if !om {
        // Positions to input rows.
        // Each side's positions and sorted row ids are dropped as soon as they are converted.
        let convert = |pos: DeviceBuffer<u32>, rows: Option<DeviceBuffer<u32>>, has_map: bool| -> Result<DeviceBuffer<u32>> {
            match rows {
                Some(r) if has_map => to_rows(stream, &pos.view(), &r.view()),
                _ => Ok(pos),
            }
        };
        let map_l = convert(pos_l, rows_l, jt.has_left_map())?;
        let map_r = convert(pos_r, rows_r, jt.has_right_map())?;
        clock.mark(stream)?;
        // 3. Unclustered gathers from the inputs.
        let (left_m, right_m) = if maps_only {
            (None, None)
        } else {
            (
                jt.has_left_map().then(|| gather_side(stream, &map_l.view(), lp, nullable_l)).transpose()?,
                jt.has_right_map().then(|| gather_side(stream, &map_r.view(), rp, nullable_r)).transpose()?,
            )
        };
        clock.mark(stream)?;
        clock.finish(&mut stats)?;
        let maps = GatherMaps::new(jt, map_l, map_r);
        return Ok(WideJoinOutput { join_type: jt, rows, left: left_m, right: right_m, maps: Some(maps), stats, algorithm: Algorithm::SmjUm, reason: String::new() });
    }
    clock.mark(stream)?;

    // 3. Materialize from the sorted relations, one column at a time (Algorithm 1, lines 4-9),
    // one side after the other: the larger side first, its first column (already sorted), then
    // each later column sorted with its keys right before its gather and dropped after it; the
    // side's positions are dropped when it is done. Later columns of large sides are
    // transformed by key ranges ([`RangePlan`]): the same order as the full sort, without its
    // three columns of scratch.
    struct SideWork<'s, 'c, K: gpujoin_device::Pod> {
        keys: &'s DeviceView<'s, K>,
        cols: &'s [ColumnView<'c>],
        pos: DeviceBuffer<u32>,
        col0: Option<Column>,
        plan: Option<RangePlan<K>>,
        nullable: bool,
        has_map: bool,
    }
    let materialize = |w: SideWork<'_, '_, K>| -> Result<(Vec<Column>, Option<DeviceBuffer<u32>>)> {
        let SideWork { keys, cols, pos, col0, mut plan, nullable, has_map } = w;
        let mut out = Vec::with_capacity(cols.len());
        if let Some(c) = col0 {
            out.push(gather_column(stream, &Column::view(&c), &pos.view())?);
        }
        let validity = (has_map && nullable).then(|| crate::maps::map_validity(stream, &pos.view())).transpose()?;
        for (i, c) in cols.iter().enumerate().skip(1) {
            let sorted = match &plan {
                Some(p) => p.transform(stream, keys, c)?,
                None => sort_with(stream, keys, c)?.1,
            };
            if i + 1 == cols.len() {
                plan = None; // nothing but the outputs, the positions and this column at the last gather
            }
            out.push(gather_column(stream, &Column::view(&sorted), &pos.view())?);
        }
        drop(pos);
        Ok((out, validity))
    };
    let left_work = SideWork { keys: kl, cols: lp, pos: pos_l, col0: col0_l, plan: plan_l, nullable: nullable_l, has_map: jt.has_left_map() };
    let right_work = SideWork { keys: kr, cols: rp, pos: pos_r, col0: col0_r, plan: plan_r, nullable: nullable_r, has_map: jt.has_right_map() };
    let ((out_l, validity_l), (out_r, validity_r)) = if kl.len() > kr.len() {
        let l = materialize(left_work)?;
        (l, materialize(right_work)?)
    } else {
        let r = materialize(right_work)?;
        (materialize(left_work)?, r)
    };
    clock.mark(stream)?;
    clock.finish(&mut stats)?;
    let left_m = if jt.has_left_map() { Some(side_table(stream, out_l, validity_l)?) } else { None };
    let right_m = if jt.has_right_map() { Some(side_table(stream, out_r, validity_r)?) } else { None };
    Ok(WideJoinOutput { join_type: jt, rows, left: left_m, right: right_m, maps: None, stats, algorithm: Algorithm::SmjOm, reason: String::new() })
}
