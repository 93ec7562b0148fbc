//! Gather maps, the result of every join, and materialization through them.

use gpujoin_cub_sys::result::launch;
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Pod, Result, Stream};
use gpujoin_primitives::{gather_into, gather_into_unchecked};

use crate::kernels::sys::join as ffi;
use crate::table::{Column, ColumnView, Table};
use crate::types::{JoinType, RowId};

/// The result of a join: for output row `k`, `left[k]` and `right[k]` are the matching rows of
/// the two inputs, or [`RowId::NONE`] on the null side of an outer-join row. Semi and anti joins
/// have one map only (`LeftSemi`/`LeftAnti`: no right map; `RightSemi`/`RightAnti`: no left map).
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// let a = s.copy_from_host(&[1u32, 2, 4])?;
/// let b = s.copy_from_host(&[2u32, 3, 4, 4])?;
/// let maps = sorted_merge_join(s, &a.view(), &b.view(), JoinType::Left)?;
/// let (l, r) = maps.to_host()?;
/// assert_eq!(l.iter().map(|x| x.get()).collect::<Vec<_>>(), [Some(0), Some(1), Some(2), Some(2)]);
/// assert_eq!(r.iter().map(|x| x.get()).collect::<Vec<_>>(), [None, Some(0), Some(2), Some(3)]);
/// # Ok(()) }
/// ```
pub struct GatherMaps {
    join_type: JoinType,
    left: DeviceBuffer<RowId>,
    right: DeviceBuffer<RowId>,
}

/// One side of a join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Left,
    Right,
}

impl GatherMaps {
    pub(crate) fn new(join_type: JoinType, left: DeviceBuffer<u32>, right: DeviceBuffer<u32>) -> Self {
        GatherMaps { join_type, left: left.cast(), right: right.cast() }
    }

    /// The join type that produced these maps.
    pub fn join_type(&self) -> JoinType {
        self.join_type
    }

    /// Number of output rows.
    pub fn rows(&self) -> u64 {
        self.left.len().max(self.right.len()) as u64
    }

    /// The left map (`None` for `RightSemi`/`RightAnti`).
    pub fn left(&self) -> Option<DeviceView<'_, RowId>> {
        self.join_type.has_left_map().then(|| self.left.view())
    }

    /// The right map (`None` for `LeftSemi`/`LeftAnti`).
    pub fn right(&self) -> Option<DeviceView<'_, RowId>> {
        self.join_type.has_right_map().then(|| self.right.view())
    }

    /// The map of one side (`None` where the join type has none).
    pub fn side(&self, side: Side) -> Option<DeviceView<'_, RowId>> {
        match side {
            Side::Left => self.left(),
            Side::Right => self.right(),
        }
    }

    /// Whether rows of `side` can be null (the other side's unmatched rows are kept).
    pub fn nullable(&self, side: Side) -> bool {
        match side {
            Side::Left => self.join_type.keeps_unmatched_right(),
            Side::Right => self.join_type.keeps_unmatched_left(),
        }
    }

    /// Both maps on the host (an absent map is empty).
    pub fn to_host(&self) -> Result<(Vec<RowId>, Vec<RowId>)> {
        Ok((self.left.to_vec()?, self.right.to_vec()?))
    }

    /// The output rows as pairs, in output order; an absent map reads as [`RowId::NONE`].
    pub fn pairs(&self) -> Result<Vec<(RowId, RowId)>> {
        let (l, r) = self.to_host()?;
        let n = l.len().max(r.len());
        Ok((0..n).map(|k| (l.get(k).copied().unwrap_or(RowId::NONE), r.get(k).copied().unwrap_or(RowId::NONE))).collect())
    }

    /// The same rows ordered by `side`'s row index, ascending; rows without a partner on that
    /// side (an outer join's padding) come last. A join type without a map on `side` (the
    /// semi and anti joins of the other side) is ordered by its one map. A caller that reads
    /// its inputs through the maps (a host gather) then reads `side` in sequence.
    ///
    /// Example: left `[2, 0, 1]`, right `[5, 9, 3]` ordered by the right side: left `[1, 2, 0]`,
    /// right `[3, 5, 9]`.
    pub fn ordered_by(self, stream: &Stream, side: Side) -> Result<GatherMaps> {
        let jt = self.join_type;
        let side = match side {
            Side::Left if !jt.has_left_map() => Side::Right,
            Side::Right if !jt.has_right_map() => Side::Left,
            s => s,
        };
        let (l, r) = self.into_raw();
        let (l, r) = match (jt.has_left_map(), jt.has_right_map(), side) {
            (true, true, Side::Left) => gpujoin_primitives::sort_pairs_owned(stream, l, r, None)?,
            (true, true, Side::Right) => {
                let (r, l) = gpujoin_primitives::sort_pairs_owned(stream, r, l, None)?;
                (l, r)
            }
            (true, false, _) => (gpujoin_primitives::sort_keys_new(stream, &l.view(), gpujoin_primitives::SortOrder::Ascending)?, r),
            (false, true, _) => (l, gpujoin_primitives::sort_keys_new(stream, &r.view(), gpujoin_primitives::SortOrder::Ascending)?),
            (false, false, _) => (l, r),
        };
        Ok(GatherMaps::new(jt, l, r))
    }

    /// Splits into the two maps as raw `u32` buffers (`u32::MAX` = no row).
    pub fn into_raw(self) -> (DeviceBuffer<u32>, DeviceBuffer<u32>) {
        (self.left.cast(), self.right.cast())
    }
}

/// The payload columns of one side of a join as a table named by position (`"0"`, `"1"`, ...):
/// each column of its input's type, and null where the side has no row (`validity`: bit `k % 32`
/// of word `k / 32`, 1 = valid; every column gets a copy). A null row holds zero.
pub(crate) fn side_table(stream: &Stream, columns: Vec<Column>, validity: Option<DeviceBuffer<u32>>) -> Result<Table> {
    let n = columns.len();
    let mut named = Vec::with_capacity(n);
    let mut validity = validity.map(DeviceBuffer::into_bytes);
    for (i, c) in columns.into_iter().enumerate() {
        let column = match &validity {
            None => c,
            Some(_) => {
                let (t, rows) = (c.data_type(), c.len());
                let (values, offsets, _) = c.into_buffers();
                // The last column takes the bitmap itself, the others a copy.
                let v = if i + 1 == n { validity.take().expect("validity") } else { stream.copy_from_device(&validity.as_ref().expect("validity").view())? };
                Column::from_buffers(t, rows, values, offsets, Some(v))?
            }
        };
        named.push((i.to_string(), column));
    }
    Table::new(named)
}

/// Gathers payload columns of `side` (4- or 8-byte types without validity, any number) through
/// the join's map into a table named by position: output row `k` of each column is
/// `column[map[k]]`, and null where `map[k]` is [`RowId::NONE`]. A column shorter than the rows
/// the map refers to is an error.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_device::*;
/// # fn f(s: &Stream, maps: &GatherMaps, price: &DeviceBuffer<f64>) -> Result<()> {
/// let out = materialize(s, maps, Side::Right, &[price.view().into()])?;
/// # Ok(()) }
/// ```
pub fn materialize(stream: &Stream, maps: &GatherMaps, side: Side, columns: &[ColumnView<'_>]) -> Result<Table> {
    let map = maps.side(side).ok_or_else(|| Error::invalid(format!("a {:?} join has no {side:?} map", maps.join_type())))?;
    let idx = map.cast::<u32>();
    let mut out = Vec::with_capacity(columns.len());
    for c in columns {
        crate::keys::check_payloads(&format!("{side:?}"), c.len(), std::slice::from_ref(c))?;
        let bytes = match c.typed::<u32>() {
            Some(v) => gather_checked(stream, &idx, &v)?.into_bytes(),
            None => gather_checked(stream, &idx, &c.typed::<u64>().expect("a checked payload column"))?.into_bytes(),
        };
        out.push(Column::of_fixed_width(c.data_type(), bytes));
    }
    let validity = if maps.nullable(side) { Some(map_validity(stream, &idx)?) } else { None };
    side_table(stream, out, validity)
}

fn gather_checked<T: gpujoin_device::Pod>(stream: &Stream, idx: &DeviceView<'_, u32>, column: &DeviceView<'_, T>) -> Result<DeviceBuffer<T>> {
    let mut out = stream.alloc::<T>(idx.len())?;
    gather_into(stream, column, idx, &mut out.view_mut(), T::zeroed()).map_err(|e| match e {
        Error::InvalidArgument(_) => Error::invalid(format!("the gather map refers past the payload column's {} rows", column.len())),
        e => e,
    })?;
    Ok(out)
}

/// The validity bitmap of a map: bit `k` set where `map[k]` is a row.
pub fn map_validity(stream: &Stream, map: &DeviceView<'_, u32>) -> Result<DeviceBuffer<u32>> {
    let n = map.len();
    let mut words = stream.alloc::<u32>(n.div_ceil(32))?;
    let w = words.view_mut().as_mut_ptr();
    // SAFETY: n map entries, ceil(n/32) words.
    launch(stream, "map validity", || unsafe { ffi::gj_j_map_validity(map.as_ptr(), n as i64, w, stream.raw()) })?;
    Ok(words)
}

/// Gathers one column through a map without the bounds report (no wait for the stream): rows
/// past the column and NONE entries read `null_fill`. For maps that came from a join of this
/// very column's relation, on hot paths.
pub fn materialize_unchecked<T: gpujoin_device::Pod>(stream: &Stream, map: &DeviceView<'_, RowId>, column: &DeviceView<'_, T>, null_fill: T) -> Result<DeviceBuffer<T>> {
    let mut out = stream.alloc::<T>(map.len())?;
    gather_into_unchecked(stream, column, &map.cast::<u32>(), &mut out.view_mut(), null_fill)?;
    Ok(out)
}

/// `out[k] = column[idx[k]]`, zero where `idx[k]` is NONE (no bounds report, no wait).
pub(crate) fn gather_column(stream: &Stream, column: &ColumnView<'_>, idx: &DeviceView<'_, u32>) -> Result<Column> {
    fn g<T: Pod>(s: &Stream, v: &DeviceView<'_, T>, idx: &DeviceView<'_, u32>) -> Result<DeviceBuffer<u8>> {
        let mut out = s.alloc::<T>(idx.len())?;
        if !idx.is_empty() {
            gather_into_unchecked(s, v, idx, &mut out.view_mut(), T::zeroed())?;
        }
        Ok(out.into_bytes())
    }
    let bytes = match column.typed::<u32>() {
        Some(v) => g(stream, &v, idx)?,
        None => g(stream, &column.typed::<u64>().expect("a checked payload column"), idx)?,
    };
    Ok(Column::of_fixed_width(column.data_type(), bytes))
}
