//! Gather maps, the result of every join, and materialization through them.

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Pod, Result, Stream};
use gpujoin_primitives::{gather_into, gather_into_unchecked};

use crate::types::{JoinType, RowId};

/// The result of a join: for output row `k`, `left[k]` and `right[k]` are the matching rows of
/// the two inputs, or [`RowId::NONE`] on the null side of an outer-join row. Semi and anti joins
/// have one map only (`LeftSemi`/`LeftAnti`: `right` is empty; `RightSemi`/`RightAnti`: `left`
/// is empty).
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

impl GatherMaps {
    pub(crate) fn new(join_type: JoinType, left: DeviceBuffer<u32>, right: DeviceBuffer<u32>) -> Self {
        GatherMaps { join_type, left: cast_buffer(left), right: cast_buffer(right) }
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

    /// Splits into the two maps as raw `u32` buffers (`u32::MAX` = no row).
    pub fn into_raw(self) -> (DeviceBuffer<u32>, DeviceBuffer<u32>) {
        (cast_buffer(self.left), cast_buffer(self.right))
    }
}

fn cast_buffer<A: Pod, B: Pod>(b: DeviceBuffer<A>) -> DeviceBuffer<B> {
    // RowId is a transparent u32.
    assert_eq!(std::mem::size_of::<A>(), std::mem::size_of::<B>());
    DeviceBuffer::cast(b)
}

/// Gathers one payload column (4- or 8-byte elements) through a gather map: output row `k` is
/// `column[map[k]]`, or `null_fill` where `map[k]` is [`RowId::NONE`]. A map entry past the
/// column is an error (the column does not belong to that side).
pub fn materialize<T: Pod>(stream: &Stream, map: &DeviceView<'_, RowId>, column: &DeviceView<'_, T>, null_fill: T) -> Result<DeviceBuffer<T>> {
    let mut out = stream.alloc::<T>(map.len())?;
    gather_into(stream, column, &map.cast::<u32>(), &mut out.view_mut(), null_fill).map_err(|e| match e {
        Error::InvalidArgument(_) => Error::invalid(format!("a gather map refers past the payload column's {} rows", column.len())),
        e => e,
    })?;
    Ok(out)
}

/// [`materialize`] without the bounds report (no wait for the stream): out-of-range entries
/// produce `null_fill`. For maps that came from a join of this very column's relation.
pub fn materialize_unchecked<T: Pod>(stream: &Stream, map: &DeviceView<'_, RowId>, column: &DeviceView<'_, T>, null_fill: T) -> Result<DeviceBuffer<T>> {
    let mut out = stream.alloc::<T>(map.len())?;
    gather_into_unchecked(stream, column, &map.cast::<u32>(), &mut out.view_mut(), null_fill)?;
    Ok(out)
}
