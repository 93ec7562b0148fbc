//! Heavy keys: keys so frequent that the GPU their hash sends them to would get far more than
//! its share. As in MG-Join, the rows of a heavy key on its heavier side are spread over every
//! GPU, and the rows of that key on the other side are copied to every GPU, so each pair still
//! meets exactly once.
//!
//! That is correct where the copied side's rows appear only in pairs: not where the join keeps
//! them unmatched (outer joins of that side) or reports them by themselves (semi and anti joins
//! of that side). [`replicable`] says which side may be copied; a key whose lighter side may not
//! be is left to the hash (one GPU).

use gpujoin_join::{JoinType, Side};

/// Rows of a side sampled for the skew check, spread over the ranks by their rows.
pub const SAMPLE_ROWS: u64 = 1 << 14;

/// A key is heavy on a side when its estimated rows there are at least the side's rows over
/// `HEAVY_DIVISOR x ranks` (an eighth of one GPU's share)...
pub const HEAVY_DIVISOR: u64 = 8;

/// ...and it was seen at least this often in the sample.
pub const MIN_SAMPLED: u64 = 8;

/// Whether the rows of `side` may be copied to every GPU under `jt`: they appear only in pairs
/// with the other side's rows.
///
/// ```
/// use gpujoin_multi_gpu::skew::replicable;
/// use gpujoin_join::{JoinType, Side};
/// assert!(replicable(JoinType::Inner, Side::Right));
/// assert!(replicable(JoinType::LeftSemi, Side::Right));
/// assert!(!replicable(JoinType::Left, Side::Left)); // unmatched left rows would repeat
/// assert!(!replicable(JoinType::RightAnti, Side::Right));
/// ```
pub fn replicable(jt: JoinType, side: Side) -> bool {
    match side {
        Side::Left => matches!(jt, JoinType::Inner | JoinType::Right | JoinType::RightSemi | JoinType::RightAnti),
        Side::Right => matches!(jt, JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti),
    }
}

/// The heavy keys of a join: their hashes in ascending order, each with the side whose rows are
/// spread (the other side's are copied to every GPU).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkewPlan {
    pub heavy: Vec<u64>,
    pub spread: Vec<Side>,
}

impl SkewPlan {
    /// The split flags of `side` beside [`SkewPlan::heavy`]: 1 where its rows are spread, 0 where
    /// they are copied.
    pub fn split_flags(&self, side: Side) -> Vec<u8> {
        self.spread.iter().map(|&s| (s == side) as u8).collect()
    }
}

fn counts(sample: &[u64]) -> std::collections::HashMap<u64, u64> {
    let mut m = std::collections::HashMap::new();
    for &h in sample {
        *m.entry(h).or_insert(0) += 1;
    }
    m
}

/// The heavy keys from each side's sampled hashes (of rows that can match; `rows` the side's
/// rows, the sample drawn evenly from them), among `ranks` GPUs under `jt`.
///
/// ```
/// use gpujoin_multi_gpu::skew::plan;
/// use gpujoin_join::{JoinType, Side};
/// // Key 7 is half the right side's rows; the left side has it once.
/// let right: Vec<u64> = (0..1000).map(|i| if i % 2 == 0 { 7 } else { 100 + i }).collect();
/// let left: Vec<u64> = (0..1000).collect();
/// let p = plan(&left, 1000, &right, 1_000_000, 4, JoinType::Inner);
/// assert_eq!((p.heavy, p.spread), (vec![7], vec![Side::Right]));
/// // A left join keeps unmatched left rows, which may not be copied: key 7 stays with the hash.
/// assert!(plan(&left, 1000, &right, 1_000_000, 4, JoinType::Left).heavy.is_empty());
/// assert_eq!(plan(&left, 1000, &right, 1_000_000, 4, JoinType::Right).heavy, vec![7]);
/// ```
pub fn plan(left: &[u64], left_rows: u64, right: &[u64], right_rows: u64, ranks: usize, jt: JoinType) -> SkewPlan {
    if ranks < 2 {
        return SkewPlan::default();
    }
    let (cl, cr) = (counts(left), counts(right));
    let estimate = |sampled: u64, rows: u64, len: usize| if len == 0 { 0 } else { (sampled as u128 * rows as u128 / len as u128) as u64 };
    let heavy_on = |sampled: u64, rows: u64, len: usize| sampled >= MIN_SAMPLED && estimate(sampled, rows, len) * HEAVY_DIVISOR * ranks as u64 >= rows;
    let mut keys: Vec<u64> = cl.keys().chain(cr.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let mut out = SkewPlan::default();
    for h in keys {
        let (sl, sr) = (cl.get(&h).copied().unwrap_or(0), cr.get(&h).copied().unwrap_or(0));
        let (hl, hr) = (heavy_on(sl, left_rows, left.len()), heavy_on(sr, right_rows, right.len()));
        if !hl && !hr {
            continue;
        }
        // Spread the side with more rows of the key; copy the other, where the join allows.
        let spread = if estimate(sl, left_rows, left.len()) >= estimate(sr, right_rows, right.len()) { Side::Left } else { Side::Right };
        let copied = if spread == Side::Left { Side::Right } else { Side::Left };
        if replicable(jt, copied) {
            out.heavy.push(h);
            out.spread.push(spread);
        }
    }
    out
}
