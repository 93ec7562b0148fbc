//! The rows of a chunked join that no left row owns: left rows with no right row, then right
//! rows with no left row (or, for semi and anti joins, the join's one map).

use std::ops::Range;

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};

use crate::maps::GatherMaps;
use crate::types::JoinType;

/// A chunked join's tail: `left` rows paired with no right row, then `right` rows paired with
/// no left row. For a semi or anti join, the one map of the join (`left` for left semi/anti,
/// `right` for right semi/anti).
///
/// Example: left `[4]`, right `[0, 2]` of a full join is the tail `(4, -) (-, 0) (-, 2)`.
pub(crate) struct Tail {
    pub left: DeviceBuffer<u32>,
    pub right: DeviceBuffer<u32>,
}

impl Tail {
    /// Rows in the tail.
    pub fn rows(&self) -> u64 {
        (self.left.len() + self.right.len()) as u64
    }

    /// Tail rows `range` as maps of `join_type`.
    pub fn produce(&self, stream: &Stream, join_type: JoinType, range: Range<u64>) -> Result<GatherMaps> {
        let (a, total) = (self.left.len(), self.left.len() + self.right.len());
        if range.start >= range.end || range.end > total as u64 {
            return Err(Error::invalid(format!("tail rows {range:?} of {total}")));
        }
        let (s, e) = (range.start as usize, range.end as usize);
        let (left_part, right_part) = (s.min(a)..e.min(a), s.max(a) - a..e.max(a) - a);
        let copy = |src: &DeviceBuffer<u32>, part: Range<usize>, none_before: usize, none_after: usize| -> Result<DeviceBuffer<u32>> {
            let mut out = stream.alloc::<u32>(none_before + part.len() + none_after)?;
            let at = none_before + part.len();
            stream.fill_u32_bits(&mut out.slice_mut(..none_before), gpujoin_primitives::NO_ROW)?;
            stream.copy_device_to_device(&src.slice(part), &mut out.slice_mut(none_before..at))?;
            stream.fill_u32_bits(&mut out.slice_mut(at..), gpujoin_primitives::NO_ROW)?;
            Ok(out)
        };
        if !(join_type.has_left_map() && join_type.has_right_map()) {
            let none = stream.alloc::<u32>(0)?;
            return Ok(if join_type.has_left_map() {
                GatherMaps::new(join_type, copy(&self.left, left_part, 0, 0)?, none)
            } else {
                GatherMaps::new(join_type, none, copy(&self.right, right_part, 0, 0)?)
            });
        }
        let (nl, nr) = (left_part.len(), right_part.len());
        let left = copy(&self.left, left_part, 0, nr)?;
        let right = copy(&self.right, right_part, nl, 0)?;
        Ok(GatherMaps::new(join_type, left, right))
    }
}
