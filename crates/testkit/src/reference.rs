//! Pairs in canonical order, and the exact test vectors of the source documents.
//!
//! The CPU reference join itself is [`table_reference`](crate::table_reference) (host tables,
//! every column type, NULL and NaN under both equalities, filters). Here:
//!
//! * [`sort_pairs`] and [`pairs_from_maps`] put pairs (or a GPU join's two gather maps) in the
//!   canonical order, so outputs compare as sorted multisets;
//! * [`vectors`] holds the exact test vectors of the source documents, checked below against
//!   the reference.
//!
//! # Canonical order
//!
//! Pairs sort by `(left row, right row)`, with [`RowId::NONE`] sorting last (it is `u32::MAX`),
//! so unmatched right rows `(NONE, r)` come at the end. Semi and anti joins give each kept row
//! once, paired with [`RowId::NONE`] on the other side.

use gpujoin_device::{Error, Result};
use gpujoin_join::{JoinType, RowId};

/// Sorts pairs into the canonical order: by left row, then right row, [`RowId::NONE`] last.
///
/// ```
/// use gpujoin_join::RowId;
/// use gpujoin_testkit::reference;
/// let id = |i| RowId::new(i).unwrap();
/// let mut pairs = vec![(RowId::NONE, id(0)), (id(1), RowId::NONE), (id(1), id(0))];
/// reference::sort_pairs(&mut pairs);
/// assert_eq!(pairs, vec![(id(1), id(0)), (id(1), RowId::NONE), (RowId::NONE, id(0))]);
/// ```
pub fn sort_pairs(pairs: &mut [(RowId, RowId)]) {
    // Equal pairs are indistinguishable, so an unstable sort gives the same result.
    pairs.sort_unstable();
}

/// Turns a join's two gather maps into pairs in canonical order, to compare a GPU join's output
/// with the reference's pairs as a sorted multiset.
///
/// Pair `i` is `(left[i], right[i])`. A map that the join type does not have (the right map of
/// `LeftSemi`/`LeftAnti`, the left map of `RightSemi`/`RightAnti`) is normally empty, and that
/// side is [`RowId::NONE`]. Maps of the wrong shape are not hidden: when
/// [`try_pairs_from_maps`] rejects them, the longer map sets the length and the shorter one is
/// padded with [`RowId::NONE`], so a comparison with the reference fails visibly.
///
/// ```
/// use gpujoin_join::{JoinType, RowId};
/// use gpujoin_testkit::reference;
/// let id = |i| RowId::new(i).unwrap();
/// let pairs = reference::pairs_from_maps(&[id(2), id(0)], &[], JoinType::LeftSemi);
/// assert_eq!(pairs, vec![(id(0), RowId::NONE), (id(2), RowId::NONE)]);
/// let pairs = reference::pairs_from_maps(&[id(1), RowId::NONE], &[id(0), id(3)], JoinType::Full);
/// assert_eq!(pairs, vec![(id(1), id(0)), (RowId::NONE, id(3))]);
/// ```
pub fn pairs_from_maps(left: &[RowId], right: &[RowId], join_type: JoinType) -> Vec<(RowId, RowId)> {
    try_pairs_from_maps(left, right, join_type).unwrap_or_else(|_| {
        let rows = left.len().max(right.len());
        let mut pairs: Vec<(RowId, RowId)> = (0..rows)
            .map(|i| {
                (left.get(i).copied().unwrap_or(RowId::NONE), right.get(i).copied().unwrap_or(RowId::NONE))
            })
            .collect();
        sort_pairs(&mut pairs);
        pairs
    })
}

/// [`pairs_from_maps`] that checks the maps' shape first: [`Error::InvalidArgument`] when the
/// join type has both maps and their lengths differ, or when a map the join type does not have
/// is not empty.
///
/// ```
/// use gpujoin_join::{JoinType, RowId};
/// use gpujoin_testkit::reference;
/// let id = |i| RowId::new(i).unwrap();
/// assert!(reference::try_pairs_from_maps(&[id(0)], &[id(0)], JoinType::LeftSemi).is_err());
/// assert!(reference::try_pairs_from_maps(&[id(0)], &[], JoinType::Inner).is_err());
/// assert_eq!(reference::try_pairs_from_maps(&[], &[id(4)], JoinType::RightAnti)?, vec![(RowId::NONE, id(4))]);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn try_pairs_from_maps(
    left: &[RowId],
    right: &[RowId],
    join_type: JoinType,
) -> Result<Vec<(RowId, RowId)>> {
    let mut pairs: Vec<(RowId, RowId)> = match (join_type.has_left_map(), join_type.has_right_map()) {
        (true, true) => {
            gpujoin_device::check_same_len("left gather map", left.len(), "right gather map", right.len())?;
            left.iter().copied().zip(right.iter().copied()).collect()
        }
        (true, false) => {
            if !right.is_empty() {
                return Err(Error::invalid(format!(
                    "{join_type:?} has no right gather map but one of {} entries was given",
                    right.len()
                )));
            }
            left.iter().map(|&l| (l, RowId::NONE)).collect()
        }
        (false, _) => {
            if !left.is_empty() {
                return Err(Error::invalid(format!(
                    "{join_type:?} has no left gather map but one of {} entries was given",
                    left.len()
                )));
            }
            right.iter().map(|&r| (RowId::NONE, r)).collect()
        }
    };
    sort_pairs(&mut pairs);
    Ok(pairs)
}

/// Exact test vectors from the source documents (`/work/shared/seeds`), shared by the CPU
/// reference tests, the GPU tests and the demo.
///
/// Pairs are `(left row, right row)` as `u32` with [`NONE`](vectors::NONE) (`u32::MAX`, the bits
/// of [`RowId::NONE`]) for "no row"; [`to_pairs`](vectors::to_pairs) turns them into `RowId`s.
pub mod vectors {
    use gpujoin_join::table::{HostColumn, HostTable};
    use gpujoin_join::types::RowId;

    /// "No matching row" in the `u32` pair lists (the bits of [`RowId::NONE`]).
    pub const NONE: u32 = u32::MAX;

    /// ModernGPU "Relational Joins" demo (seed 000): the 30 sorted A keys.
    pub const MGPU_A_KEYS: [i32; 30] = [
        100, 102, 103, 103, 103, 103, 103, 104, 104, 105, //
        106, 106, 106, 107, 108, 109, 109, 110, 111, 113, //
        114, 114, 114, 116, 116, 116, 118, 119, 121, 127,
    ];

    /// ModernGPU demo: the 30 sorted B keys.
    pub const MGPU_B_KEYS: [i32; 30] = [
        100, 101, 102, 102, 105, 105, 105, 105, 106, 107, //
        109, 112, 116, 117, 117, 118, 119, 121, 125, 125, //
        126, 126, 126, 126, 128, 128, 128, 129, 130, 130,
    ];

    /// ModernGPU demo: the inner join's 19 `(aIndex, bIndex)` pairs as printed.
    pub const MGPU_INNER: [(u32, u32); 19] = [
        (0, 0),
        (1, 2),
        (1, 3),
        (9, 4),
        (9, 5),
        (9, 6),
        (9, 7),
        (10, 8),
        (11, 8),
        (12, 8),
        (13, 9),
        (15, 10),
        (16, 10),
        (23, 12),
        (24, 12),
        (25, 12),
        (26, 15),
        (27, 16),
        (28, 17),
    ];

    /// ModernGPU demo: the outer (`Full`) join's 50 `(aIndex, bIndex)` pairs as printed (`-1`
    /// there is [`NONE`] here).
    pub const MGPU_OUTER: [(u32, u32); 50] = [
        (0, 0),
        (1, 2),
        (1, 3),
        (2, NONE),
        (3, NONE),
        (4, NONE),
        (5, NONE),
        (6, NONE),
        (7, NONE),
        (8, NONE),
        (9, 4),
        (9, 5),
        (9, 6),
        (9, 7),
        (10, 8),
        (11, 8),
        (12, 8),
        (13, 9),
        (14, NONE),
        (15, 10),
        (16, 10),
        (17, NONE),
        (18, NONE),
        (19, NONE),
        (20, NONE),
        (21, NONE),
        (22, NONE),
        (23, 12),
        (24, 12),
        (25, 12),
        (26, 15),
        (27, 16),
        (28, 17),
        (29, NONE),
        (NONE, 1),
        (NONE, 11),
        (NONE, 13),
        (NONE, 14),
        (NONE, 18),
        (NONE, 19),
        (NONE, 20),
        (NONE, 21),
        (NONE, 22),
        (NONE, 23),
        (NONE, 24),
        (NONE, 25),
        (NONE, 26),
        (NONE, 27),
        (NONE, 28),
        (NONE, 29),
    ];

    /// Interleave Join worked example (seed 001): `L.K`; `L.A` is the row number 0..9.
    pub const INTERLEAVE_L_KEYS: [i32; 10] = [0, 0, 0, 2, 2, 4, 5, 6, 7, 7];

    /// Interleave Join worked example: `R.K`; `R.B` is the row number 0..8.
    pub const INTERLEAVE_R_KEYS: [i32; 9] = [9, 9, 8, 7, 6, 4, 3, 3, 0];

    /// Interleave Join worked example: the 10 rows `(K, A, B)` of `L LEFT JOIN R` in the paper's
    /// order (`B` = [`NONE`] for null).
    pub const INTERLEAVE_LEFT_JOIN_ROWS: [(i32, u32, u32); 10] = [
        (0, 0, 8),
        (0, 1, 8),
        (0, 2, 8),
        (4, 5, 5),
        (6, 7, 4),
        (7, 8, 3),
        (7, 9, 3),
        (5, 6, NONE),
        (2, 3, NONE),
        (2, 4, NONE),
    ];

    /// Interleave Join worked example: `L LEFT JOIN R` as `(left row, right row)` pairs (`A` and
    /// `B` of [`INTERLEAVE_LEFT_JOIN_ROWS`]).
    pub const INTERLEAVE_LEFT_JOIN: [(u32, u32); 10] =
        [(0, 8), (1, 8), (2, 8), (5, 5), (7, 4), (8, 3), (9, 3), (6, NONE), (3, NONE), (4, NONE)];

    /// The pairs as [`RowId`]s ([`NONE`] becomes [`RowId::NONE`]), in the order given.
    ///
    /// ```
    /// use gpujoin_join::RowId;
    /// use gpujoin_testkit::reference::vectors;
    /// assert_eq!(vectors::to_pairs(&[(3, vectors::NONE)]), vec![(RowId::new(3).unwrap(), RowId::NONE)]);
    /// ```
    pub fn to_pairs(pairs: &[(u32, u32)]) -> Vec<(RowId, RowId)> {
        let id = |i: u32| RowId::new(i).unwrap_or(RowId::NONE);
        pairs.iter().map(|&(l, r)| (id(l), id(r))).collect()
    }

    /// A table of one `Int32` key column `k` without nulls.
    ///
    /// ```
    /// use gpujoin_testkit::reference::vectors;
    /// assert_eq!(vectors::i32_table(&vectors::MGPU_A_KEYS).rows(), 30);
    /// ```
    pub fn i32_table(keys: &[i32]) -> HostTable {
        HostTable::new(vec![("k", HostColumn::from_values(keys.to_vec()))]).expect("one column")
    }
}

#[cfg(test)]
mod tests {
    use super::vectors::*;
    use super::*;
    use gpujoin_join::table::HostTable;
    use gpujoin_join::{NanEquality, NullEquality};

    fn id(i: u32) -> RowId {
        RowId::new(i).unwrap()
    }

    fn sorted(mut pairs: Vec<(RowId, RowId)>) -> Vec<(RowId, RowId)> {
        sort_pairs(&mut pairs);
        pairs
    }

    /// The reference's pairs (`table_reference::join`, checked against its hashed
    /// `equi_join` and `equi_join_count`) as canonical `RowId` pairs.
    fn checked_join(l: &HostTable, r: &HostTable, jt: JoinType) -> Vec<(RowId, RowId)> {
        let (nulls, nans) = (NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
        let quadratic = crate::table_reference::join(l, &["k"], r, &["k"], None, jt, nulls, nans);
        let hashed = crate::table_reference::equi_join(l, &["k"], r, &["k"], jt, nulls, nans);
        assert_eq!(quadratic, hashed, "{jt:?}");
        assert_eq!(crate::table_reference::equi_join_count(l, &["k"], r, &["k"], jt, nulls, nans), hashed.len() as u64);
        let rid = |x: Option<u32>| x.map_or(RowId::NONE, id);
        sorted(quadratic.into_iter().map(|(a, b)| (rid(a), rid(b))).collect())
    }

    // ---- (a) ModernGPU demo ----

    #[test]
    fn mgpu_demo_inner_has_the_19_printed_pairs() {
        let (a, b) = (i32_table(&MGPU_A_KEYS), i32_table(&MGPU_B_KEYS));
        let got = checked_join(&a, &b, JoinType::Inner);
        assert_eq!(got.len(), 19);
        assert_eq!(got, sorted(to_pairs(&MGPU_INNER)));
    }

    #[test]
    fn mgpu_demo_outer_has_the_50_printed_pairs() {
        let (a, b) = (i32_table(&MGPU_A_KEYS), i32_table(&MGPU_B_KEYS));
        let got = checked_join(&a, &b, JoinType::Full);
        assert_eq!(got.len(), 50);
        assert_eq!(got, sorted(to_pairs(&MGPU_OUTER)));
        // The printed order is already canonical.
        assert_eq!(got, to_pairs(&MGPU_OUTER));
    }

    #[test]
    fn mgpu_demo_left_right_semi_anti_follow_from_outer() {
        let (a, b) = (i32_table(&MGPU_A_KEYS), i32_table(&MGPU_B_KEYS));
        let outer = to_pairs(&MGPU_OUTER);
        let left: Vec<_> = outer.iter().copied().filter(|p| !p.0.is_none()).collect();
        let right: Vec<_> = outer.iter().copied().filter(|p| !p.1.is_none()).collect();
        assert_eq!(checked_join(&a, &b, JoinType::Left), sorted(left));
        assert_eq!(checked_join(&a, &b, JoinType::Right), sorted(right));

        let matched_a: Vec<u32> = {
            let mut v: Vec<u32> = MGPU_INNER.iter().map(|p| p.0).collect();
            v.dedup();
            v
        };
        let semi: Vec<_> = matched_a.iter().map(|&l| (id(l), RowId::NONE)).collect();
        let anti: Vec<_> = (0..30).filter(|l| !matched_a.contains(l)).map(|l| (id(l), RowId::NONE)).collect();
        assert_eq!(checked_join(&a, &b, JoinType::LeftSemi), semi);
        assert_eq!(checked_join(&a, &b, JoinType::LeftAnti), anti);
        assert_eq!(semi.len() + anti.len(), 30);

        let mut matched_b: Vec<u32> = MGPU_INNER.iter().map(|p| p.1).collect();
        matched_b.sort_unstable();
        matched_b.dedup();
        let rsemi: Vec<_> = matched_b.iter().map(|&r| (RowId::NONE, id(r))).collect();
        assert_eq!(checked_join(&a, &b, JoinType::RightSemi), rsemi);
        assert_eq!(checked_join(&a, &b, JoinType::RightAnti).len(), 30 - rsemi.len());
    }

    // ---- (b) Interleave Join worked example ----

    #[test]
    fn interleave_example_left_join_has_the_10_rows() {
        let (l, r) = (i32_table(&INTERLEAVE_L_KEYS), i32_table(&INTERLEAVE_R_KEYS));
        let got = checked_join(&l, &r, JoinType::Left);
        assert_eq!(got.len(), 10);
        assert_eq!(got, sorted(to_pairs(&INTERLEAVE_LEFT_JOIN)));
        // The (K, A, B) rows agree with the pairs and the keys.
        for (&(k, a, b), &(pa, pb)) in INTERLEAVE_LEFT_JOIN_ROWS.iter().zip(&INTERLEAVE_LEFT_JOIN) {
            assert_eq!((a, b), (pa, pb));
            assert_eq!(INTERLEAVE_L_KEYS[a as usize], k);
            if b != NONE {
                assert_eq!(INTERLEAVE_R_KEYS[b as usize], k);
            }
        }
    }

    #[test]
    fn interleave_example_other_join_types() {
        let (l, r) = (i32_table(&INTERLEAVE_L_KEYS), i32_table(&INTERLEAVE_R_KEYS));
        let inner = checked_join(&l, &r, JoinType::Inner);
        assert_eq!(inner, sorted(to_pairs(&INTERLEAVE_LEFT_JOIN[..7])));
        // Right rows 0, 1 (key 9), 2 (key 8), 6, 7 (key 3) match nothing.
        let full = checked_join(&l, &r, JoinType::Full);
        assert_eq!(full.len(), 15);
        let unmatched_right: Vec<_> = full.iter().filter(|p| p.0.is_none()).map(|p| p.1).collect();
        assert_eq!(unmatched_right, vec![id(0), id(1), id(2), id(6), id(7)]);
        assert_eq!(
            checked_join(&l, &r, JoinType::RightSemi),
            vec![(RowId::NONE, id(3)), (RowId::NONE, id(4)), (RowId::NONE, id(5)), (RowId::NONE, id(8))]
        );
        assert_eq!(
            checked_join(&l, &r, JoinType::LeftAnti),
            vec![(id(3), RowId::NONE), (id(4), RowId::NONE), (id(6), RowId::NONE)]
        );
    }

    #[test]
    fn pairs_from_maps_builds_canonical_pairs() {
        let full =
            pairs_from_maps(&[id(2), RowId::NONE, id(0)], &[id(1), id(5), RowId::NONE], JoinType::Full);
        assert_eq!(full, vec![(id(0), RowId::NONE), (id(2), id(1)), (RowId::NONE, id(5))]);
        assert_eq!(
            pairs_from_maps(&[], &[id(3), id(1)], JoinType::RightSemi),
            vec![(RowId::NONE, id(1)), (RowId::NONE, id(3))]
        );
        assert!(pairs_from_maps(&[], &[], JoinType::Inner).is_empty());
        // A malformed shape is kept visible: padded with NONE.
        assert_eq!(
            pairs_from_maps(&[id(0), id(1)], &[id(0)], JoinType::Inner),
            vec![(id(0), id(0)), (id(1), RowId::NONE)]
        );
        assert_eq!(pairs_from_maps(&[id(0)], &[id(4)], JoinType::LeftSemi), vec![(id(0), id(4))]);
        assert!(try_pairs_from_maps(&[id(0), id(1)], &[id(0)], JoinType::Inner).is_err());
        assert!(try_pairs_from_maps(&[id(0)], &[], JoinType::RightAnti).is_err());
        // Round trip: a join's pairs, split into maps and rebuilt.
        let (a, b) = (i32_table(&MGPU_A_KEYS), i32_table(&MGPU_B_KEYS));
        for jt in JoinType::ALL {
            let pairs = checked_join(&a, &b, jt);
            let lmap: Vec<RowId> =
                if jt.has_left_map() { pairs.iter().rev().map(|p| p.0).collect() } else { vec![] };
            let rmap: Vec<RowId> =
                if jt.has_right_map() { pairs.iter().rev().map(|p| p.1).collect() } else { vec![] };
            assert_eq!(try_pairs_from_maps(&lmap, &rmap, jt).unwrap(), pairs, "{jt:?}");
        }
    }
}
