//! The mixed theta join in chunks: a predicate with fixed-width equality conjuncts is joined on
//! them like an equi-join (no |L| x |R| nested loop), and the rest of the predicate filters the
//! candidate pairs.
//!
//! The steps:
//! 1. the equi-join of the equality columns as a [`ChunkSource`] ([`EquiChunkSource`], inner):
//!    left rows in key order with the offsets of their candidate pairs;
//! 2. count: the candidate pairs, chunk by chunk within the budget, through the filter; the pairs
//!    that pass are counted per left row (at its key-order position) and mark their left and
//!    right rows as matched; the scan of the counts is this join's offsets;
//! 3. produce a chunk (a range of output rows over whole or split left rows): the candidates of
//!    its left rows, filtered, cut to the chunk's rows;
//! 4. the tail: the left rows without a passing pair (left and full joins), then the right rows
//!    without one (right and full joins), each in row order.
//!
//! Output order: pairs by the equality keys, then left row, then right row; then the tail.
//! Working memory of a chunk: its candidate pairs (8 bytes each) besides its output.
//!
//! Example: `L.a = R.a AND L.b < R.b` with L = (a, b) `(1, 5) (1, 9) (2, 0)` and R = (a, b)
//! `(1, 7) (2, 1)`: candidates (0,0) (1,0) (2,1); the filter keeps (0,0) and (2,1); a left join
//! adds (1, -) in the tail.

use std::ops::Range;

use gpujoin_cub_sys::result::launch;
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};
use gpujoin_primitives::{count_offsets, scatter};

use super::nested_loop::{keep_pairs, mixed_key_columns, PairFilter};
use crate::chunked::tail::Tail;
use crate::chunked::{ChunkBudget, ChunkRange, ChunkSource, EquiChunkSource, JoinChunks};
use crate::common::{iota, map_rows, rows_where};
use crate::device_relation::RelationRef;
use crate::kernels::sys::join as ffi;
use crate::maps::GatherMaps;
use crate::predicate::CheckedPredicate;
use crate::types::JoinType;

/// A mixed theta join of type `Inner`, `Left`, `Right` or `Full`, counted and ready to be
/// produced in chunks (see the module docs).
pub(crate) struct MixedChunks<'a> {
    join_type: JoinType,
    candidates: EquiChunkSource,
    filter: PairFilter,
    /// The scan of the passing pairs per left row in key order (`candidates`' order).
    offsets: DeviceBuffer<u64>,
    tail: Tail,
    /// The relations `filter`'s device program points into, kept alive (borrowed, or shared
    /// when the front door's chunks own them) as long as the join.
    _reads: (RelationRef<'a>, RelationRef<'a>),
}

/// Sets `flags[rows[i]] = 1` (NONE entries skipped).
fn mark(stream: &Stream, rows: &DeviceView<'_, u32>, flags: &mut DeviceBuffer<u8>) -> Result<()> {
    let f = flags.view_mut().as_mut_ptr();
    // SAFETY: rows index the relation whose `flags` these are.
    launch(stream, "mixed chunks: mark rows", || unsafe { ffi::gj_j_mark_rows(rows.as_ptr(), rows.len() as i64, f, stream.raw()) })
}

impl<'a> MixedChunks<'a> {
    /// Steps 1, 2 and 4 for the equality parts `keys` of `pred` (the candidates counted in
    /// chunks of `candidate_budget` bytes).
    pub(crate) fn prepare(
        stream: &Stream,
        left_ref: RelationRef<'a>,
        right_ref: RelationRef<'a>,
        pred: &CheckedPredicate,
        keys: &[(usize, usize)],
        join_type: JoinType,
        candidate_budget: ChunkBudget,
    ) -> Result<Self> {
        if !matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
            return Err(Error::invalid(format!("internal: a {join_type:?} mixed join is not produced per left row")));
        }
        let (lv, rv) = (left_ref.view(), right_ref.view());
        let (left, right) = (&lv, &rv);
        // 1. The candidates: the equi-join of the equality columns.
        let (lk, rk, opts) = mixed_key_columns(left, right, keys)?;
        let candidates = EquiChunkSource::new(stream, &lk, &rk, JoinType::Inner, opts)?;
        let filter = PairFilter::new(stream, left, right, pred, keys)?;
        // 2. Passing pairs per key-order position, and the rows they match.
        let n = candidates.left_rows() as usize;
        let mut position = stream.alloc::<u32>(left.rows().max(1))?;
        scatter(stream, &iota(stream, n)?.view(), &candidates.sorted_left_rows(), &mut position.view_mut())?;
        let mut counts = stream.alloc_zeroed::<u32>(n)?;
        let mut left_matched = stream.alloc_zeroed::<u8>(left.rows().max(1))?;
        let mut right_matched = stream.alloc_zeroed::<u8>(right.rows().max(1))?;
        for chunk in JoinChunks::new(stream, &candidates, candidate_budget)? {
            let (a, b) = chunk?.data.into_raw();
            let keep = filter.flags(stream, &a.view(), &b.view())?;
            let at = map_rows(stream, &a.view(), &position.view())?;
            {
                let (ap, kp, cp) = (at.view().as_ptr(), keep.as_ref().map_or(std::ptr::null(), |k| k.view().as_ptr()), counts.view_mut().as_mut_ptr());
                // SAFETY: `at` holds key-order positions below n; keep (if any) has one flag per pair.
                launch(stream, "mixed chunks: count", || unsafe { ffi::gj_j_count_at(ap, kp, at.len() as i64, cp, stream.raw()) })?;
            }
            let (a, b) = keep_pairs(stream, a, b, keep.as_ref())?;
            mark(stream, &a.view(), &mut left_matched)?;
            mark(stream, &b.view(), &mut right_matched)?;
        }
        let (offsets, _) = count_offsets(stream, &counts.view())?;
        drop((counts, position));
        // 4. The tail.
        let unmatched = |flags: &DeviceBuffer<u8>, rows: usize, keep: bool| -> Result<DeviceBuffer<u32>> {
            if keep {
                rows_where(stream, &flags.slice(..rows), false, None)
            } else {
                stream.alloc::<u32>(0)
            }
        };
        let tail = Tail {
            left: unmatched(&left_matched, left.rows(), join_type.keeps_unmatched_left())?,
            right: unmatched(&right_matched, right.rows(), join_type.keeps_unmatched_right())?,
        };
        drop((lv, rv));
        Ok(MixedChunks { join_type, candidates, filter, offsets, tail, _reads: (left_ref, right_ref) })
    }

    /// Left rows (those with a candidate key), in key order.
    pub(crate) fn left_rows(&self) -> u64 {
        self.candidates.left_rows()
    }

    /// The scan of the output rows of each left row in key order.
    pub(crate) fn offsets(&self) -> DeviceView<'_, u64> {
        self.offsets.view()
    }

    /// Step 3 for whole left rows `rows` (key-order positions): their passing pairs, in order (a
    /// chunk that splits a row is cut from these by the caller).
    pub(crate) fn produce_rows(&self, stream: &Stream, rows: Range<u64>) -> Result<GatherMaps> {
        let (r0, r1) = (rows.start as usize, rows.end as usize);
        let off = self.candidates.offsets();
        if r0 > r1 || r1 >= off.len() {
            return Err(Error::invalid(format!("left rows {rows:?} of a mixed join with {} left rows", off.len() - 1)));
        }
        let c0 = stream.copy_to_host(&off.slice(r0..r0 + 1))?[0];
        let c1 = stream.copy_to_host(&off.slice(r1..r1 + 1))?[0];
        if c0 == c1 {
            let empty = || stream.alloc::<u32>(0);
            return Ok(GatherMaps::new(self.join_type, empty()?, empty()?));
        }
        let whole = ChunkRange { output: c0..c1, rows: rows.clone(), first_row_offset: c0, last_row_offset: None };
        let (a, b) = self.candidates.produce(stream, &whole)?.into_raw();
        let (a, b) = self.filter.apply(stream, a, b)?;
        Ok(GatherMaps::new(self.join_type, a, b))
    }

    /// Rows after the per-left-row part.
    pub(crate) fn tail_rows(&self) -> u64 {
        self.tail.rows()
    }

    /// Tail rows `range`.
    pub(crate) fn produce_tail(&self, stream: &Stream, range: Range<u64>) -> Result<GatherMaps> {
        self.tail.produce(stream, self.join_type, range)
    }
}
