//! Chunk planning: cutting the output rows of a join into chunks of at most `rows_per_chunk`
//! rows, at left-row boundaries wherever possible (seed 004, section 3.3.1: partitions whose
//! output fits device memory), splitting the output of a single left row only when that row
//! alone exceeds the budget. Never fails, never truncates.
//!
//! The plan needs only a few row boundaries, not the whole offsets array (which has one entry
//! per left row and may be far too large to copy): for every multiple `k * R` of the chunk size
//! below the total, the boundaries `lo_k <= k * R < hi_k` of the left row that straddles it
//! ([`anchors_from_offsets`] on the host, `device_anchors` on the device with one sorted
//! search). Between two consecutive anchors there is either no multiple of `R` (a gap of at
//! most `R` rows) or exactly one left row, so a greedy walk over the anchors cuts chunks of at
//! most `R` rows at row boundaries, and splits only the rows longer than `R`.

use std::ops::Range;

use gpujoin_device::{DeviceView, Error, Result, Stream};
use gpujoin_primitives::{gather, sorted_search, Bound, SearchOutputs};

/// A left-row boundary of the output: `offsets[row] == output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowBoundary {
    pub output: u64,
    pub row: u64,
}

/// One chunk of the per-left-row part of a join's output.
///
/// `output` are the chunk's output rows (positions in the whole result, `0..total`); `rows` the
/// left rows whose output intersects them. The chunk may start inside its first left row and end
/// inside its last one (only when that row's output alone is larger than a chunk):
/// `first_row_offset = offsets[rows.start]`, and `last_row_offset = Some(offsets[rows.end - 1])`
/// when the chunk ends before the last row's end (`None`: the last row is whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRange {
    pub output: Range<u64>,
    pub rows: Range<u64>,
    pub first_row_offset: u64,
    pub last_row_offset: Option<u64>,
}

impl ChunkRange {
    /// Output rows of the first left row that belong to earlier chunks.
    ///
    /// ```
    /// # use gpujoin_join::chunked::ChunkRange;
    /// // left row 3 produces output rows 10..20; this chunk takes 14..18 of them
    /// let c = ChunkRange { output: 14..18, rows: 3..4, first_row_offset: 10, last_row_offset: Some(10) };
    /// assert_eq!(c.skip_in_first_row(), 4);
    /// assert_eq!(c.take_in_last_row(), Some(8)); // the row's first 8 rows end before 18
    /// assert!(!c.is_row_aligned());
    /// ```
    pub fn skip_in_first_row(&self) -> u64 {
        self.output.start - self.first_row_offset
    }

    /// When the chunk ends inside its last left row: how many of that row's output rows come
    /// before the chunk's end (counted from the row's first output row).
    pub fn take_in_last_row(&self) -> Option<u64> {
        self.last_row_offset.map(|o| self.output.end - o)
    }

    /// True when the chunk holds whole left rows only.
    pub fn is_row_aligned(&self) -> bool {
        self.skip_in_first_row() == 0 && self.last_row_offset.is_none()
    }

    /// Number of output rows.
    pub fn len(&self) -> u64 {
        self.output.end - self.output.start
    }

    /// True when the chunk has no output row (never the case in a plan).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The most targets (multiples of the chunk size) one plan searches for; a budget that would
/// need more chunks than about twice this is raised (see [`effective_rows_per_chunk`]).
pub const MAX_PLAN_TARGETS: u64 = 1 << 24;

/// The chunk size in rows actually planned with: at least 1, and large enough that the plan
/// has at most [`MAX_PLAN_TARGETS`] targets (so planning stays cheap for absurdly small budgets).
///
/// ```
/// # use gpujoin_join::chunked::effective_rows_per_chunk;
/// assert_eq!(effective_rows_per_chunk(1000, 0), 1);
/// assert_eq!(effective_rows_per_chunk(1000, 300), 300);
/// assert_eq!(effective_rows_per_chunk(1 << 40, 1), (1u64 << 40).div_ceil(1 << 24));
/// ```
pub fn effective_rows_per_chunk(total: u64, rows_per_chunk: u64) -> u64 {
    rows_per_chunk.max(1).max(total.div_ceil(MAX_PLAN_TARGETS))
}

/// The targets `R, 2R, ...` strictly below `total` (where anchors are searched).
pub fn plan_targets(total: u64, rows_per_chunk: u64) -> Vec<u64> {
    let r = rows_per_chunk.max(1);
    let k = total.saturating_sub(1) / r;
    (1..=k).map(|i| i * r).collect()
}

/// The anchors for chunks of `rows_per_chunk` rows from a host copy of the offsets
/// (`left_rows + 1` entries, non-decreasing, `offsets[0] == 0`): for each target `t` of
/// [`plan_targets`], the boundaries of the left row whose output holds row `t`.
///
/// ```
/// # use gpujoin_join::chunked::{anchors_from_offsets, RowBoundary};
/// // rows produce 3, 0, 5, 1 output rows; chunks of 4
/// let a = anchors_from_offsets(&[0, 3, 3, 8, 9], 4);
/// let b = |output, row| RowBoundary { output, row };
/// // target 4 lies in row 2 (rows 3..8), target 8 in row 3 (rows 8..9)
/// assert_eq!(a, [b(3, 2), b(8, 3), b(8, 3), b(9, 4)]);
/// ```
pub fn anchors_from_offsets(offsets: &[u64], rows_per_chunk: u64) -> Vec<RowBoundary> {
    let total = offsets.last().copied().unwrap_or(0);
    anchors_of_targets(offsets, &plan_targets(total, rows_per_chunk))
}

/// The targets of a plan whose first chunk holds at most `first_rows` rows and the others at
/// most `rows_per_chunk`: `first_rows` (when it is below both `rows_per_chunk` and `total`),
/// then [`plan_targets`].
///
/// ```
/// # use gpujoin_join::chunked::ramped_plan_targets;
/// assert_eq!(ramped_plan_targets(11, 2, 5), [2, 5, 10]);
/// assert_eq!(ramped_plan_targets(11, 5, 5), [5, 10]);
/// assert_eq!(ramped_plan_targets(2, 2, 5), Vec::<u64>::new());
/// ```
pub fn ramped_plan_targets(total: u64, first_rows: u64, rows_per_chunk: u64) -> Vec<u64> {
    let (f, r) = (first_rows.max(1), rows_per_chunk.max(1));
    let mut t = Vec::new();
    if f < r && f < total {
        t.push(f);
    }
    t.extend(plan_targets(total, r));
    t
}

/// For each of `targets` (sorted, each below the total `offsets[left_rows]`), the boundaries
/// of the left row whose output holds it (see [`anchors_from_offsets`]).
pub fn anchors_of_targets(offsets: &[u64], targets: &[u64]) -> Vec<RowBoundary> {
    let mut out = Vec::new();
    for &t in targets {
        let u = offsets.partition_point(|&o| o <= t); // first entry above t; 1 <= u <= left_rows
        out.push(RowBoundary { output: offsets[u - 1], row: (u - 1) as u64 });
        out.push(RowBoundary { output: offsets[u], row: u as u64 });
    }
    out
}

/// The same anchors found on the device: one sorted search of the targets in the offsets, a
/// gather of the two boundaries per target, and one copy back (`2 * targets` values; the
/// offsets themselves never leave the device). `offsets` must have fewer than 2^32 - 1 entries.
pub(crate) fn device_anchors(stream: &Stream, offsets: &DeviceView<'_, u64>, total: u64, targets: &[u64]) -> Result<Vec<RowBoundary>> {
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let t = stream.copy_from_host(targets)?;
    let upper = sorted_search(stream, &t.view(), offsets, Bound::Upper, SearchOutputs::INDEX)?.a_index.unwrap().to_vec()?;
    let mut idx = Vec::with_capacity(2 * upper.len());
    for &u in &upper {
        if u == 0 || u as usize >= offsets.len() {
            return Err(Error::invalid(format!("chunk planning: offsets not an exclusive scan from 0 to {total} (search index {u})")));
        }
        idx.push(u - 1);
        idx.push(u);
    }
    let d_idx = stream.copy_from_host(&idx)?;
    let values = gather(stream, offsets, &d_idx.view(), 0u64)?.to_vec()?;
    Ok(idx.iter().zip(values).map(|(&row, output)| RowBoundary { output, row: row as u64 }).collect())
}

/// Cuts output rows `0..total` of `left_rows` left rows into chunks of at most
/// `rows_per_chunk` rows, given the anchors of those targets ([`anchors_from_offsets`]).
/// Chunks end at left-row boundaries except inside a row longer than `rows_per_chunk`; they
/// cover `0..total` in order without gaps.
///
/// ```
/// # use gpujoin_join::chunked::{anchors_from_offsets, plan_chunks};
/// // left rows produce 3, 0, 5, 1 output rows; chunks of at most 4 rows
/// let offsets = [0, 3, 3, 8, 9];
/// let plan = plan_chunks(4, 9, 4, &anchors_from_offsets(&offsets, 4));
/// let outputs: Vec<_> = plan.iter().map(|c| c.output.clone()).collect();
/// assert_eq!(outputs, [0..3, 3..7, 7..9]); // row 2 (5 rows) is split
/// assert_eq!(plan[1].rows, 2..3);
/// assert_eq!(plan[2].rows, 2..4);
/// ```
pub fn plan_chunks(left_rows: u64, total: u64, rows_per_chunk: u64, anchors: &[RowBoundary]) -> Vec<ChunkRange> {
    plan_ramped_chunks(left_rows, total, rows_per_chunk, rows_per_chunk, anchors)
}

/// As [`plan_chunks`], with a smaller first chunk: it ends at the last row boundary within
/// `first_rows` rows (the anchors must include those of [`ramped_plan_targets`]); when the
/// first left row alone is longer, the first chunk is planned as any other. A small first
/// chunk starts a pipeline (production, then copy) sooner.
///
/// ```
/// # use gpujoin_join::chunked::{anchors_of_targets, plan_ramped_chunks, ramped_plan_targets};
/// // left rows produce 1, 2, 3, 3 output rows; a first chunk of at most 2 rows, then 5
/// let offsets = [0, 1, 3, 6, 9];
/// let anchors = anchors_of_targets(&offsets, &ramped_plan_targets(9, 2, 5));
/// let plan = plan_ramped_chunks(4, 9, 2, 5, &anchors);
/// let outputs: Vec<_> = plan.iter().map(|c| c.output.clone()).collect();
/// assert_eq!(outputs, [0..1, 1..6, 6..9]);
/// ```
pub fn plan_ramped_chunks(left_rows: u64, total: u64, first_rows: u64, rows_per_chunk: u64, anchors: &[RowBoundary]) -> Vec<ChunkRange> {
    if total == 0 {
        return Vec::new();
    }
    let r = rows_per_chunk.max(1);
    let f = first_rows.clamp(1, r);
    // Boundaries by output position; for equal positions the last row (so a chunk starting
    // there skips the empty rows before it).
    let mut b: Vec<RowBoundary> = Vec::with_capacity(anchors.len() + 2);
    b.push(RowBoundary { output: 0, row: 0 });
    b.extend(anchors.iter().copied().filter(|a| a.output <= total));
    b.push(RowBoundary { output: total, row: left_rows });
    b.sort_unstable();
    b.reverse();
    b.dedup_by_key(|x| x.output); // keeps the first of each run: the largest row
    b.reverse();

    let mut chunks = Vec::new();
    // The current position, the left row holding it, and that row's first output row.
    let (mut pos, mut row, mut row_start) = (0u64, b[0].row, 0u64);
    let mut next = 1; // first boundary above pos
    while pos < total {
        // The first chunk's smaller limit applies when a row boundary lies within it.
        let limit = if pos == 0 && b[next].output <= f { f } else { pos.saturating_add(r) };
        if b[next].output <= limit {
            // Cut at the last row boundary within the budget.
            let mut m = next;
            while m + 1 < b.len() && b[m + 1].output <= limit {
                m += 1;
            }
            let end = b[m];
            chunks.push(ChunkRange { output: pos..end.output, rows: row..end.row, first_row_offset: row_start, last_row_offset: None });
            (pos, row, row_start) = (end.output, end.row, end.output);
            next = m + 1;
        } else {
            // One left row longer than the budget: split its output.
            chunks.push(ChunkRange {
                output: pos..limit,
                rows: row..row + 1,
                first_row_offset: row_start,
                last_row_offset: Some(row_start),
            });
            pos = limit;
        }
    }
    chunks
}

/// The tail (rows after the per-left-row part, e.g. unmatched right rows) in ranges of at most
/// `rows_per_chunk` rows, numbered from 0.
///
/// ```
/// # use gpujoin_join::chunked::plan_tail;
/// assert_eq!(plan_tail(10, 4), [0..4, 4..8, 8..10]);
/// assert!(plan_tail(0, 4).is_empty());
/// ```
pub fn plan_tail(tail_rows: u64, rows_per_chunk: u64) -> Vec<Range<u64>> {
    plan_ramped_tail(tail_rows, rows_per_chunk, rows_per_chunk)
}

/// As [`plan_tail`], with a first range of at most `first_rows` rows.
///
/// ```
/// # use gpujoin_join::chunked::plan_ramped_tail;
/// assert_eq!(plan_ramped_tail(10, 1, 4), [0..1, 1..5, 5..9, 9..10]);
/// assert_eq!(plan_ramped_tail(10, 9, 4), [0..4, 4..8, 8..10]);
/// ```
pub fn plan_ramped_tail(tail_rows: u64, first_rows: u64, rows_per_chunk: u64) -> Vec<Range<u64>> {
    let r = rows_per_chunk.max(1);
    let f = first_rows.clamp(1, r).min(tail_rows);
    let mut out = Vec::new();
    if f > 0 && f < r {
        out.push(0..f);
    }
    let start = if f < r { f } else { 0 };
    let rest = tail_rows - start;
    out.extend((0..rest.div_ceil(r)).map(|k| start + k * r..(start + (k + 1) * r).min(tail_rows)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    fn offsets_of(counts: &[u64]) -> Vec<u64> {
        let mut o = vec![0u64];
        for c in counts {
            o.push(o.last().unwrap() + c);
        }
        o
    }

    /// Checks every property a plan promises against the full offsets.
    fn check_plan(counts: &[u64], r: u64) -> Result<(), String> {
        check_ramped_plan(counts, r, r)
    }

    /// As `check_plan`, for a plan whose first chunk holds at most `f` rows when it can end
    /// at a row boundary within them.
    fn check_ramped_plan(counts: &[u64], f: u64, r: u64) -> Result<(), String> {
        let offsets = offsets_of(counts);
        let total = *offsets.last().unwrap();
        let anchors = anchors_of_targets(&offsets, &ramped_plan_targets(total, f, r));
        let plan = plan_ramped_chunks(counts.len() as u64, total, f, r, &anchors);
        if f >= r && plan != plan_chunks(counts.len() as u64, total, r, &anchors_from_offsets(&offsets, r)) {
            return Err("a ramp of the whole budget changed the plan".into());
        }
        let f = f.clamp(1, r.max(1));
        if let Some(c) = plan.first() {
            // The first chunk: within f rows, or the first left row whole (or split) when no
            // row boundary lies within f rows.
            let boundary_within_f = offsets.iter().any(|&o| o > 0 && o <= f);
            if boundary_within_f && c.len() > f {
                return Err(format!("first chunk {c:?} longer than {f}"));
            }
            if boundary_within_f && c.is_row_aligned() && offsets.iter().any(|&o| o > c.output.end && o <= f) {
                return Err(format!("first chunk {c:?} could hold more of its {f} rows"));
            }
        }
        let mut pos = 0;
        for c in &plan {
            if c.output.start != pos || c.is_empty() || c.len() > r.max(1) {
                return Err(format!("chunk {c:?} at {pos}, r {r}"));
            }
            let (r0, r1) = (c.rows.start as usize, c.rows.end as usize);
            if r0 >= r1 || r1 > counts.len() {
                return Err(format!("bad rows {c:?}"));
            }
            // The first row starts the chunk, or holds its start when the chunk begins inside it.
            let first_ok = offsets[r0] == c.output.start || (offsets[r0] < c.output.start && c.output.start < offsets[r0 + 1]);
            if offsets[r0] != c.first_row_offset || !first_ok {
                return Err(format!("first row {c:?} offsets {:?}", &offsets[r0..=r0 + 1]));
            }
            match c.last_row_offset {
                None if offsets[r1] != c.output.end => return Err(format!("end not at row end {c:?}")),
                Some(o) if o != offsets[r1 - 1] || !(o < c.output.end && c.output.end < offsets[r1]) => {
                    return Err(format!("bad split end {c:?}"))
                }
                _ => {}
            }
            // A split happens only in a row longer than the budget.
            if !c.is_row_aligned() && counts[if c.skip_in_first_row() > 0 { r0 } else { r1 - 1 }] <= r.max(1) {
                return Err(format!("split of a short row {c:?}"));
            }
            pos = c.output.end;
        }
        if pos != total {
            return Err(format!("plan covers {pos} of {total}"));
        }
        // Greedy: no two consecutive row-aligned chunks fit together (after a smaller first).
        for w in plan.windows(2).skip(usize::from(f < r.max(1))) {
            if w[0].is_row_aligned() && w[1].is_row_aligned() && w[1].output.end - w[0].output.start <= r.max(1) {
                return Err(format!("chunks {:?} and {:?} could be one", w[0], w[1]));
            }
        }
        Ok(())
    }

    #[test]
    fn examples() {
        assert!(plan_chunks(0, 0, 4, &[]).is_empty());
        assert!(plan_chunks(5, 0, 4, &[]).is_empty());
        // One row much larger than the budget.
        let plan = plan_chunks(1, 10, 3, &anchors_from_offsets(&[0, 10], 3));
        assert_eq!(plan.iter().map(|c| c.output.clone()).collect::<Vec<_>>(), [0..3, 3..6, 6..9, 9..10]);
        assert!(plan.iter().all(|c| c.rows == (0..1)));
        assert_eq!(plan[3].last_row_offset, None);
        assert_eq!(plan[1].take_in_last_row(), Some(6));
        // Everything fits one chunk.
        let plan = plan_chunks(3, 6, 100, &anchors_from_offsets(&[0, 1, 5, 6], 100));
        assert_eq!(plan, [ChunkRange { output: 0..6, rows: 0..3, first_row_offset: 0, last_row_offset: None }]);
        // Leading and trailing empty rows.
        check_plan(&[0, 0, 4, 0, 4, 0, 0], 4).unwrap();
        check_plan(&[0, 0, 4, 0, 4, 0, 0], 3).unwrap();
        check_plan(&[1; 17], 1).unwrap();
        check_plan(&[1; 17], 0).unwrap();
        check_plan(&[7], 1).unwrap();
    }

    #[test]
    fn random_counts() {
        let mut runner =
            TestRunner::new_with_rng(Config { cases: 2000, ..Config::default() }, TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
        let strat = (prop::collection::vec(prop_oneof![4 => 0u64..4, 1 => 0u64..40, 1 => Just(0u64)], 0..60), 0u64..30);
        runner
            .run(&strat, |(counts, r)| {
                check_plan(&counts, r).map_err(TestCaseError::fail)?;
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn random_counts_with_a_smaller_first_chunk() {
        let mut runner =
            TestRunner::new_with_rng(Config { cases: 2000, ..Config::default() }, TestRng::from_seed(RngAlgorithm::ChaCha, &[8; 32]));
        let strat = (prop::collection::vec(prop_oneof![4 => 0u64..4, 1 => 0u64..40, 1 => Just(0u64)], 0..60), 0u64..12, 0u64..30);
        runner
            .run(&strat, |(counts, f, r)| {
                check_ramped_plan(&counts, f, r).map_err(TestCaseError::fail)?;
                Ok(())
            })
            .unwrap();
        // A first row longer than the first chunk is not split below the budget.
        let offsets = [0, 6, 7];
        let plan = plan_ramped_chunks(2, 7, 2, 10, &anchors_of_targets(&offsets, &ramped_plan_targets(7, 2, 10)));
        assert_eq!(plan.iter().map(|c| c.output.clone()).collect::<Vec<_>>(), [0..7]);
    }

    #[test]
    fn ramped_tail_covers_in_order() {
        for rows in 0..30u64 {
            for f in 0..8 {
                for r in 0..8 {
                    let t = plan_ramped_tail(rows, f, r);
                    let mut pos = 0;
                    for (k, c) in t.iter().enumerate() {
                        assert_eq!(c.start, pos);
                        assert!(c.end > c.start && c.end - c.start <= if k == 0 { f.clamp(1, r.max(1)) } else { r.max(1) });
                        pos = c.end;
                    }
                    assert_eq!(pos, rows);
                }
            }
        }
    }

    #[test]
    fn tail_and_targets() {
        assert_eq!(plan_targets(10, 5), [5]);
        assert_eq!(plan_targets(11, 5), [5, 10]);
        assert!(plan_targets(0, 5).is_empty());
        assert_eq!(plan_tail(8, 4), [0..4, 4..8]);
        assert_eq!(plan_tail(3, 0), [0..1, 1..2, 2..3]);
        assert_eq!(effective_rows_per_chunk(0, 0), 1);
    }
}
