//! CPU reference equi-joins: plain, obviously-correct implementations that every GPU join is
//! checked against.
//!
//! * [`join`] hashes a normalized composite key of every right row and probes it with every left
//!   row; [`join_size`] walks the same way but only counts.
//! * [`join_brute_force`] compares every left row with every right row, column by column, straight
//!   from the definition of key equality; tests use it to cross-check [`join`].
//! * [`sort_pairs`] and [`pairs_from_maps`] put pairs (or a GPU join's two gather maps) in the
//!   canonical order, so outputs compare as sorted multisets.
//! * [`vectors`] holds the exact test vectors of the source documents.
//!
//! # Semantics
//!
//! Two rows match when every key column is equal:
//!
//! * values compare as [`KeyScalar::normalized`](gpujoin_join::types::KeyScalar::normalized) images:
//!   `-0.0 == 0.0`, and under [`NanEquality::NanEqualsNan`] every NaN equals every NaN; under
//!   [`NanEquality::NanNeverEqual`] a row with a NaN in any key column matches nothing;
//! * a null (validity `false`) in any key column: under [`NullEquality::NullEqualsNothing`] the
//!   row matches nothing; under [`NullEquality::NullEqualsNull`] a null equals a null in the same
//!   column and never a non-null value.
//!
//! Rows that match nothing still appear in `Left`/`Right`/`Full` outputs, paired with
//! [`RowId::NONE`]. Semi and anti joins return each qualifying row once, paired with
//! [`RowId::NONE`] on the other side (`LeftSemi` gives `(l, NONE)`, `RightAnti` gives `(NONE, r)`).
//!
//! # Canonical order
//!
//! Every function here returns pairs sorted by `(left row, right row)`, with [`RowId::NONE`]
//! sorting last (it is `u32::MAX`), so unmatched right rows `(NONE, r)` come at the end.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use gpujoin_device::{Error, Result};

use gpujoin_join::types::{
    HostColumn, HostKeys, JoinOptions, JoinType, NanEquality, NullEquality, RowId, MAX_KEY_COLUMNS,
};

/// Joins `left` and `right` on all their key columns and returns the `(left row, right row)`
/// pairs in canonical order (see the [module docs](self)).
///
/// Errors: [`Error::InvalidArgument`] when either side fails [`HostKeys::validate`], when the
/// sides have different numbers of key columns or different key types in a column;
/// [`Error::TooLarge`] when the output cannot be held in host memory.
///
/// ```
/// use gpujoin_join::{HostColumn, HostKeys, JoinOptions, JoinType, RowId};
/// use gpujoin_testkit::reference;
/// let l = HostKeys::single(HostColumn::I32(vec![1, 2, 2]));
/// let r = HostKeys::single(HostColumn::I32(vec![2, 3]));
/// let id = |i| RowId::new(i).unwrap();
/// let pairs = reference::join(&l, &r, JoinType::Full, JoinOptions::default())?;
/// assert_eq!(
///     pairs,
///     vec![(id(0), RowId::NONE), (id(1), id(0)), (id(2), id(0)), (RowId::NONE, id(1))]
/// );
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn join(
    left: &HostKeys,
    right: &HostKeys,
    join_type: JoinType,
    opts: JoinOptions,
) -> Result<Vec<(RowId, RowId)>> {
    check_compatible(left, right)?;
    let groups = Groups::build(left, right, opts);

    let mut counter = PairCounter::default();
    walk(&groups, join_type, &mut counter);
    let rows = counter.0;
    let too_large = || Error::too_large("reference join output pairs", rows, (isize::MAX as u64) / 8);
    let capacity = usize::try_from(rows).map_err(|_| too_large())?;
    let mut pairs = Vec::new();
    pairs.try_reserve_exact(capacity).map_err(|_| too_large())?;

    walk(&groups, join_type, &mut pairs);
    sort_pairs(&mut pairs);
    Ok(pairs)
}

/// The number of pairs [`join`] returns, counted without materializing them (a key that occurs
/// `a` times on the left and `b` times on the right adds `a * b` at once).
///
/// Errors as [`join`] (without the output-size one).
///
/// ```
/// use gpujoin_join::{HostColumn, HostKeys, JoinOptions, JoinType};
/// use gpujoin_testkit::reference;
/// let l = HostKeys::single(HostColumn::U64(vec![7; 1000]));
/// let r = HostKeys::single(HostColumn::U64(vec![7; 1000]));
/// assert_eq!(reference::join_size(&l, &r, JoinType::Inner, JoinOptions::default())?, 1_000_000);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn join_size(left: &HostKeys, right: &HostKeys, join_type: JoinType, opts: JoinOptions) -> Result<u64> {
    check_compatible(left, right)?;
    let groups = Groups::build(left, right, opts);
    let mut counter = PairCounter::default();
    walk(&groups, join_type, &mut counter);
    Ok(counter.0)
}

/// The same result as [`join`], computed by comparing every left row with every right row
/// (O(n·m)); only for cross-checking [`join`] on small inputs.
///
/// Key equality is evaluated column by column from its definition (integer `==`; float `==`,
/// which makes `-0.0 == 0.0`, plus the NaN rule; the null rule), independently of
/// [`KeyScalar::normalized`](gpujoin_join::types::KeyScalar::normalized).
///
/// ```
/// use gpujoin_join::{HostColumn, HostKeys, JoinOptions, JoinType, RowId};
/// use gpujoin_testkit::reference;
/// let l = HostKeys::single(HostColumn::F64(vec![-0.0, f64::NAN]));
/// let r = HostKeys::single(HostColumn::F64(vec![0.0, f64::NAN]));
/// let id = |i| RowId::new(i).unwrap();
/// let pairs = reference::join_brute_force(&l, &r, JoinType::Inner, JoinOptions::default())?;
/// assert_eq!(pairs, vec![(id(0), id(0)), (id(1), id(1))]); // NaN equals NaN by default
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn join_brute_force(
    left: &HostKeys,
    right: &HostKeys,
    join_type: JoinType,
    opts: JoinOptions,
) -> Result<Vec<(RowId, RowId)>> {
    check_compatible(left, right)?;
    let mut left_matched = vec![false; left.rows()];
    let mut right_matched = vec![false; right.rows()];
    let mut pairs = Vec::new();
    for (l, l_matched) in left_matched.iter_mut().enumerate() {
        for (r, r_matched) in right_matched.iter_mut().enumerate() {
            if rows_equal(left, l, right, r, opts) {
                *l_matched = true;
                *r_matched = true;
                if matches!(join_type, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) {
                    pairs.push((row_id(l), row_id(r)));
                }
            }
        }
    }
    for (l, &matched) in left_matched.iter().enumerate() {
        let keep = match join_type {
            JoinType::Left | JoinType::Full | JoinType::LeftAnti => !matched,
            JoinType::LeftSemi => matched,
            _ => false,
        };
        if keep {
            pairs.push((row_id(l), RowId::NONE));
        }
    }
    for (r, &matched) in right_matched.iter().enumerate() {
        let keep = match join_type {
            JoinType::Right | JoinType::Full | JoinType::RightAnti => !matched,
            JoinType::RightSemi => matched,
            _ => false,
        };
        if keep {
            pairs.push((RowId::NONE, row_id(r)));
        }
    }
    sort_pairs(&mut pairs);
    Ok(pairs)
}

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
/// with [`join`] as a sorted multiset.
///
/// Pair `i` is `(left[i], right[i])`. A map that the join type does not have (the right map of
/// `LeftSemi`/`LeftAnti`, the left map of `RightSemi`/`RightAnti`) is normally empty, and that
/// side is [`RowId::NONE`]. Maps of the wrong shape are not hidden: when
/// [`try_pairs_from_maps`] rejects them, the longer map sets the length and the shorter one is
/// padded with [`RowId::NONE`], so the comparison with [`join`] fails visibly.
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

// ---------------------------------------------------------------------------------------------
// Internals
// ---------------------------------------------------------------------------------------------

/// Checks both sides and that they have the same key columns types.
fn check_compatible(left: &HostKeys, right: &HostKeys) -> Result<()> {
    left.validate("left")?;
    right.validate("right")?;
    if left.columns.len() != right.columns.len() {
        return Err(Error::invalid(format!(
            "left keys have {} columns but right keys have {}",
            left.columns.len(),
            right.columns.len()
        )));
    }
    for (c, (l, r)) in left.columns.iter().zip(&right.columns).enumerate() {
        if l.key_type() != r.key_type() {
            return Err(Error::invalid(format!(
                "key column {c} is {:?} on the left but {:?} on the right",
                l.key_type(),
                r.key_type()
            )));
        }
    }
    Ok(())
}

/// The id of row `i`. Callers have validated the keys, so `i < RowId::MAX_ROWS` and this cannot
/// be `u32::MAX`.
fn row_id(i: usize) -> RowId {
    RowId::from_option(Some(i as u32))
}

/// True when row `i` of column `c` is valid (not null).
fn is_valid(keys: &HostKeys, c: usize, i: usize) -> bool {
    match &keys.validity[c] {
        Some(validity) => validity[i],
        None => true,
    }
}

/// A row's key under the join's equality: two rows match exactly when their keys are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CompositeKey {
    /// Normalized value per column (0 for a null column and for unused columns).
    values: [u64; MAX_KEY_COLUMNS],
    /// Bit `c` set when column `c` is null (only under `NullEqualsNull`).
    nulls: u8,
}

impl Hash for CompositeKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for &v in &self.values {
            state.write_u64(v);
        }
        state.write_u8(self.nulls);
    }
}

/// A fast deterministic hasher for keys of `u64` words: every word goes through the SplitMix64
/// finalizer, so keys that differ only in high bits (floats) still spread. (Std's SipHash is
/// slower; HashDoS is no concern for a test reference.)
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        let mut z = (self.0 ^ x).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = z ^ (z >> 31);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The composite key of row `i`, or `None` when the row matches nothing (a null under
/// `NullEqualsNothing`, a NaN under `NanNeverEqual`).
fn composite_key(keys: &HostKeys, i: usize, opts: JoinOptions) -> Option<CompositeKey> {
    let mut key = CompositeKey { values: [0; MAX_KEY_COLUMNS], nulls: 0 };
    for (c, column) in keys.columns.iter().enumerate() {
        if !is_valid(keys, c, i) {
            match opts.null_equality {
                NullEquality::NullEqualsNothing => return None,
                NullEquality::NullEqualsNull => key.nulls |= 1 << c,
            }
            continue;
        }
        let (value, is_nan) = column.normalized(i);
        if is_nan && opts.nan_equality == NanEquality::NanNeverEqual {
            return None;
        }
        key.values[c] = value;
    }
    Some(key)
}

/// Both sides grouped by composite key: the right rows of each distinct right key, and for every
/// left and right row the group its key falls in.
struct Groups {
    /// The right rows of each group, ascending.
    right_rows: Vec<Vec<u32>>,
    /// The group of each left row; `None` when its key is in no group (or it matches nothing).
    of_left: Vec<Option<usize>>,
    /// The group of each right row; `None` for rows that match nothing.
    of_right: Vec<Option<usize>>,
}

impl Groups {
    /// Hashes every right row's key, then looks up every left row's key.
    fn build(left: &HostKeys, right: &HostKeys, opts: JoinOptions) -> Self {
        if left.columns.len() == 1 {
            // One column: (value, null bit) is the whole key, and a map entry of it is a third
            // the size of a `CompositeKey` one (which makes hashing 2^20 rows ~4x faster).
            let key_of = |keys: &HostKeys, i| composite_key(keys, i, opts).map(|k| (k.values[0], k.nulls));
            Self::build_by(left, right, key_of)
        } else {
            Self::build_by(left, right, |keys: &HostKeys, i| composite_key(keys, i, opts))
        }
    }

    /// [`Groups::build`] with `key_of(keys, row)` as the row's key (`None`: matches nothing).
    fn build_by<K: Hash + Eq>(
        left: &HostKeys,
        right: &HostKeys,
        key_of: impl Fn(&HostKeys, usize) -> Option<K>,
    ) -> Self {
        let mut group_of_key: HashMap<K, usize, BuildHasherDefault<KeyHasher>> =
            HashMap::with_capacity_and_hasher(right.rows(), BuildHasherDefault::default());
        let mut right_rows: Vec<Vec<u32>> = Vec::new();
        let of_right = (0..right.rows())
            .map(|r| {
                let key = key_of(right, r)?;
                let next = right_rows.len();
                let g = *group_of_key.entry(key).or_insert(next);
                if g == next {
                    right_rows.push(Vec::new());
                }
                right_rows[g].push(r as u32);
                Some(g)
            })
            .collect();
        let of_left = (0..left.rows()).map(|l| group_of_key.get(&key_of(left, l)?).copied()).collect();
        Groups { right_rows, of_left, of_right }
    }
}

/// Where [`walk`] sends its output.
trait PairSink {
    /// Left row `l` matches each of `rights`.
    fn matches(&mut self, l: usize, rights: &[u32]);
    /// One output pair.
    fn pair(&mut self, l: RowId, r: RowId);
}

/// Counts pairs.
#[derive(Default)]
struct PairCounter(u64);

impl PairSink for PairCounter {
    fn matches(&mut self, _l: usize, rights: &[u32]) {
        self.0 += rights.len() as u64;
    }
    fn pair(&mut self, _l: RowId, _r: RowId) {
        self.0 += 1;
    }
}

impl PairSink for Vec<(RowId, RowId)> {
    fn matches(&mut self, l: usize, rights: &[u32]) {
        let l = row_id(l);
        self.extend(rights.iter().map(|&r| (l, row_id(r as usize))));
    }
    fn pair(&mut self, l: RowId, r: RowId) {
        self.push((l, r));
    }
}

/// Sends the join's output to `sink`, left rows in order, then unmatched or matched right rows.
fn walk(groups: &Groups, join_type: JoinType, sink: &mut impl PairSink) {
    let mut group_matched = vec![false; groups.right_rows.len()];
    for (l, &group) in groups.of_left.iter().enumerate() {
        if let Some(g) = group {
            group_matched[g] = true;
        }
        let rights: &[u32] = group.map_or(&[], |g| &groups.right_rows[g]);
        match join_type {
            JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                sink.matches(l, rights);
                if rights.is_empty() && join_type.keeps_unmatched_left() {
                    sink.pair(row_id(l), RowId::NONE);
                }
            }
            JoinType::LeftSemi if !rights.is_empty() => sink.pair(row_id(l), RowId::NONE),
            JoinType::LeftAnti if rights.is_empty() => sink.pair(row_id(l), RowId::NONE),
            _ => {}
        }
    }
    for (r, group) in groups.of_right.iter().enumerate() {
        let matched = group.is_some_and(|g| group_matched[g]);
        let keep = match join_type {
            JoinType::Right | JoinType::Full | JoinType::RightAnti => !matched,
            JoinType::RightSemi => matched,
            _ => false,
        };
        if keep {
            sink.pair(RowId::NONE, row_id(r));
        }
    }
}

/// True when left row `l` and right row `r` are equal in every key column (brute-force path).
fn rows_equal(left: &HostKeys, l: usize, right: &HostKeys, r: usize, opts: JoinOptions) -> bool {
    (0..left.columns.len()).all(|c| match (is_valid(left, c, l), is_valid(right, c, r)) {
        (false, false) => opts.null_equality == NullEquality::NullEqualsNull,
        (true, true) => values_equal(&left.columns[c], l, &right.columns[c], r, opts.nan_equality),
        _ => false,
    })
}

/// Equality of two valid cells by their plain definitions.
fn values_equal(a: &HostColumn, i: usize, b: &HostColumn, j: usize, nan: NanEquality) -> bool {
    fn float_eq(x: f64, y: f64, nan: NanEquality) -> bool {
        if x.is_nan() || y.is_nan() {
            nan == NanEquality::NanEqualsNan && x.is_nan() && y.is_nan()
        } else {
            x == y // IEEE: -0.0 == 0.0
        }
    }
    match (a, b) {
        (HostColumn::I32(a), HostColumn::I32(b)) => a[i] == b[j],
        (HostColumn::I64(a), HostColumn::I64(b)) => a[i] == b[j],
        (HostColumn::U32(a), HostColumn::U32(b)) => a[i] == b[j],
        (HostColumn::U64(a), HostColumn::U64(b)) => a[i] == b[j],
        // f32 -> f64 is exact, so equality (and NaN-ness) is unchanged.
        (HostColumn::F32(a), HostColumn::F32(b)) => float_eq(f64::from(a[i]), f64::from(b[j]), nan),
        (HostColumn::F64(a), HostColumn::F64(b)) => float_eq(a[i], b[j], nan),
        _ => false, // different types; rejected by check_compatible
    }
}

/// Exact test vectors from the source documents (`/work/shared/seeds`), shared by the CPU
/// reference tests, the GPU tests and the demo.
///
/// Pairs are `(left row, right row)` as `u32` with [`NONE`](vectors::NONE) (`u32::MAX`, the bits
/// of [`RowId::NONE`]) for "no row"; [`to_pairs`](vectors::to_pairs) turns them into `RowId`s.
pub mod vectors {
    use gpujoin_join::types::{HostColumn, HostKeys, RowId};

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

    /// One `I32` key column without nulls.
    ///
    /// ```
    /// use gpujoin_testkit::reference::vectors;
    /// assert_eq!(vectors::i32_keys(&vectors::MGPU_A_KEYS).rows(), 30);
    /// ```
    pub fn i32_keys(keys: &[i32]) -> HostKeys {
        HostKeys::single(HostColumn::I32(keys.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::vectors::*;
    use super::*;
    use gpujoin_join::types::KeyType;
    use proptest::prelude::*;
    use proptest::test_runner::{Config as ProptestConfig, RngAlgorithm, RngSeed};

    const DEFAULT: JoinOptions = JoinOptions::DEFAULT;

    fn id(i: u32) -> RowId {
        RowId::new(i).unwrap()
    }

    fn sorted(mut pairs: Vec<(RowId, RowId)>) -> Vec<(RowId, RowId)> {
        sort_pairs(&mut pairs);
        pairs
    }

    /// Runs `join`, `join_brute_force` and `join_size` and checks that they agree.
    fn checked_join(l: &HostKeys, r: &HostKeys, jt: JoinType, opts: JoinOptions) -> Vec<(RowId, RowId)> {
        let fast = join(l, r, jt, opts).unwrap();
        let brute = join_brute_force(l, r, jt, opts).unwrap();
        assert_eq!(fast, brute, "{jt:?} {opts:?}\nleft {l:?}\nright {r:?}");
        assert_eq!(join_size(l, r, jt, opts).unwrap(), fast.len() as u64);
        fast
    }

    // ---- (a) ModernGPU demo ----

    #[test]
    fn mgpu_demo_inner_has_the_19_printed_pairs() {
        let (a, b) = (i32_keys(&MGPU_A_KEYS), i32_keys(&MGPU_B_KEYS));
        let got = checked_join(&a, &b, JoinType::Inner, DEFAULT);
        assert_eq!(got.len(), 19);
        assert_eq!(got, sorted(to_pairs(&MGPU_INNER)));
    }

    #[test]
    fn mgpu_demo_outer_has_the_50_printed_pairs() {
        let (a, b) = (i32_keys(&MGPU_A_KEYS), i32_keys(&MGPU_B_KEYS));
        let got = checked_join(&a, &b, JoinType::Full, DEFAULT);
        assert_eq!(got.len(), 50);
        assert_eq!(got, sorted(to_pairs(&MGPU_OUTER)));
        // The printed order is already canonical.
        assert_eq!(got, to_pairs(&MGPU_OUTER));
    }

    #[test]
    fn mgpu_demo_left_right_semi_anti_follow_from_outer() {
        let (a, b) = (i32_keys(&MGPU_A_KEYS), i32_keys(&MGPU_B_KEYS));
        let outer = to_pairs(&MGPU_OUTER);
        let left: Vec<_> = outer.iter().copied().filter(|p| !p.0.is_none()).collect();
        let right: Vec<_> = outer.iter().copied().filter(|p| !p.1.is_none()).collect();
        assert_eq!(checked_join(&a, &b, JoinType::Left, DEFAULT), sorted(left));
        assert_eq!(checked_join(&a, &b, JoinType::Right, DEFAULT), sorted(right));

        let matched_a: Vec<u32> = {
            let mut v: Vec<u32> = MGPU_INNER.iter().map(|p| p.0).collect();
            v.dedup();
            v
        };
        let semi: Vec<_> = matched_a.iter().map(|&l| (id(l), RowId::NONE)).collect();
        let anti: Vec<_> = (0..30).filter(|l| !matched_a.contains(l)).map(|l| (id(l), RowId::NONE)).collect();
        assert_eq!(checked_join(&a, &b, JoinType::LeftSemi, DEFAULT), semi);
        assert_eq!(checked_join(&a, &b, JoinType::LeftAnti, DEFAULT), anti);
        assert_eq!(semi.len() + anti.len(), 30);

        let mut matched_b: Vec<u32> = MGPU_INNER.iter().map(|p| p.1).collect();
        matched_b.sort_unstable();
        matched_b.dedup();
        let rsemi: Vec<_> = matched_b.iter().map(|&r| (RowId::NONE, id(r))).collect();
        assert_eq!(checked_join(&a, &b, JoinType::RightSemi, DEFAULT), rsemi);
        assert_eq!(checked_join(&a, &b, JoinType::RightAnti, DEFAULT).len(), 30 - rsemi.len());
    }

    // ---- (b) Interleave Join worked example ----

    #[test]
    fn interleave_example_left_join_has_the_10_rows() {
        let (l, r) = (i32_keys(&INTERLEAVE_L_KEYS), i32_keys(&INTERLEAVE_R_KEYS));
        let got = checked_join(&l, &r, JoinType::Left, DEFAULT);
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
        let (l, r) = (i32_keys(&INTERLEAVE_L_KEYS), i32_keys(&INTERLEAVE_R_KEYS));
        let inner = checked_join(&l, &r, JoinType::Inner, DEFAULT);
        assert_eq!(inner, sorted(to_pairs(&INTERLEAVE_LEFT_JOIN[..7])));
        // Right rows 0, 1 (key 9), 2 (key 8), 6, 7 (key 3) match nothing.
        let full = checked_join(&l, &r, JoinType::Full, DEFAULT);
        assert_eq!(full.len(), 15);
        let unmatched_right: Vec<_> = full.iter().filter(|p| p.0.is_none()).map(|p| p.1).collect();
        assert_eq!(unmatched_right, vec![id(0), id(1), id(2), id(6), id(7)]);
        assert_eq!(
            checked_join(&l, &r, JoinType::RightSemi, DEFAULT),
            vec![(RowId::NONE, id(3)), (RowId::NONE, id(4)), (RowId::NONE, id(5)), (RowId::NONE, id(8))]
        );
        assert_eq!(
            checked_join(&l, &r, JoinType::LeftAnti, DEFAULT),
            vec![(id(3), RowId::NONE), (id(4), RowId::NONE), (id(6), RowId::NONE)]
        );
    }

    // ---- semantics corner cases ----

    #[test]
    fn float_zero_and_nan_rules() {
        let l = HostKeys::single(HostColumn::F32(vec![0.0, -0.0, f32::NAN, -f32::NAN, 1.0]));
        let r = HostKeys::single(HostColumn::F32(vec![-0.0, f32::from_bits(0x7fc0_0001), f32::INFINITY]));
        let nan_eq = checked_join(&l, &r, JoinType::Inner, DEFAULT);
        assert_eq!(nan_eq, vec![(id(0), id(0)), (id(1), id(0)), (id(2), id(1)), (id(3), id(1))]);
        let never = JoinOptions { nan_equality: NanEquality::NanNeverEqual, ..DEFAULT };
        assert_eq!(checked_join(&l, &r, JoinType::Inner, never), vec![(id(0), id(0)), (id(1), id(0))]);
        // NaN rows still appear in outer joins.
        let full = checked_join(&l, &r, JoinType::Full, never);
        assert!(full.contains(&(id(2), RowId::NONE)) && full.contains(&(RowId::NONE, id(1))));
    }

    #[test]
    fn null_rules() {
        let l = HostKeys {
            columns: vec![HostColumn::U32(vec![1, 1, 2]), HostColumn::I64(vec![5, 5, 5])],
            validity: vec![Some(vec![true, false, false]), None],
        };
        let r = HostKeys {
            columns: vec![HostColumn::U32(vec![1, 9, 1]), HostColumn::I64(vec![5, 5, 6])],
            validity: vec![Some(vec![true, false, true]), None],
        };
        assert_eq!(checked_join(&l, &r, JoinType::Inner, DEFAULT), vec![(id(0), id(0))]);
        let nulls_eq = JoinOptions { null_equality: NullEquality::NullEqualsNull, ..DEFAULT };
        // Left rows 1 and 2 are (null, 5) whatever their hidden values; right row 1 is (null, 5).
        assert_eq!(
            checked_join(&l, &r, JoinType::Inner, nulls_eq),
            vec![(id(0), id(0)), (id(1), id(1)), (id(2), id(1))]
        );
        assert_eq!(
            checked_join(&l, &r, JoinType::Left, DEFAULT),
            vec![(id(0), id(0)), (id(1), RowId::NONE), (id(2), RowId::NONE)]
        );
    }

    #[test]
    fn empty_sides() {
        let some = i32_keys(&[1, 2]);
        let none = i32_keys(&[]);
        for jt in JoinType::ALL {
            let a = checked_join(&some, &none, jt, DEFAULT);
            let b = checked_join(&none, &some, jt, DEFAULT);
            let expect_a = matches!(jt, JoinType::Left | JoinType::Full | JoinType::LeftAnti);
            let expect_b = matches!(jt, JoinType::Right | JoinType::Full | JoinType::RightAnti);
            assert_eq!(a.len(), if expect_a { 2 } else { 0 }, "{jt:?}");
            assert_eq!(b.len(), if expect_b { 2 } else { 0 }, "{jt:?}");
            assert!(checked_join(&none, &none, jt, DEFAULT).is_empty());
        }
    }

    #[test]
    fn join_size_counts_without_materializing() {
        // 2^17 x 2^17 rows of one key: 2^34 pairs, far more than could be materialized here.
        let l = HostKeys::single(HostColumn::U32(vec![3; 1 << 17]));
        let r = HostKeys::single(HostColumn::U32(vec![3; 1 << 17]));
        assert_eq!(join_size(&l, &r, JoinType::Inner, DEFAULT).unwrap(), 1 << 34);
        assert_eq!(join_size(&l, &r, JoinType::Full, DEFAULT).unwrap(), 1 << 34);
        assert_eq!(join_size(&l, &r, JoinType::LeftSemi, DEFAULT).unwrap(), 1 << 17);
        assert_eq!(join_size(&l, &r, JoinType::RightAnti, DEFAULT).unwrap(), 0);
    }

    #[test]
    fn a_few_hundred_thousand_rows() {
        // Every key of 0..n on the left; the right holds each key of 0..n/4 four times.
        let n: u32 = 300_000;
        let l = HostKeys::single(HostColumn::U64((0..n as u64).rev().collect()));
        let r = HostKeys::single(HostColumn::U64((0..n as u64).map(|k| k / 4).collect()));
        let inner = join(&l, &r, JoinType::Inner, DEFAULT).unwrap();
        assert_eq!(inner.len(), n as usize);
        for &(a, b) in &inner {
            let (a, b) = (a.get().unwrap() as u64, b.get().unwrap() as u64);
            assert_eq!(n as u64 - 1 - a, b / 4);
        }
        assert!(inner.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(join_size(&l, &r, JoinType::Full, DEFAULT).unwrap(), n as u64 + (n - n / 4) as u64);
        assert_eq!(join(&l, &r, JoinType::LeftSemi, DEFAULT).unwrap().len(), n as usize / 4);
    }

    #[test]
    fn invalid_inputs_are_errors() {
        let one = i32_keys(&[1, 2]);
        let invalid = |res: Result<Vec<(RowId, RowId)>>| matches!(res, Err(Error::InvalidArgument(_)));
        // Different column counts.
        let two = HostKeys::new(vec![HostColumn::I32(vec![1, 2]), HostColumn::I32(vec![1, 2])]);
        assert!(invalid(join(&one, &two, JoinType::Inner, DEFAULT)));
        assert!(matches!(join_size(&two, &one, JoinType::Inner, DEFAULT), Err(Error::InvalidArgument(_))));
        // Different key types.
        let u = HostKeys::single(HostColumn::U32(vec![1, 2]));
        assert!(invalid(join(&one, &u, JoinType::Inner, DEFAULT)));
        assert!(invalid(join_brute_force(&u, &one, JoinType::Full, DEFAULT)));
        // Columns of different lengths.
        let ragged = HostKeys::new(vec![HostColumn::I32(vec![1, 2]), HostColumn::I32(vec![1])]);
        assert!(invalid(join(&ragged, &two, JoinType::Inner, DEFAULT)));
        // Validity of the wrong length, or a missing validity entry.
        let bad_validity =
            HostKeys { columns: vec![HostColumn::I32(vec![1, 2])], validity: vec![Some(vec![true])] };
        assert!(invalid(join(&one, &bad_validity, JoinType::Inner, DEFAULT)));
        let no_validity = HostKeys { columns: vec![HostColumn::I32(vec![1, 2])], validity: vec![] };
        assert!(invalid(join(&no_validity, &one, JoinType::Inner, DEFAULT)));
        // No columns, too many columns.
        assert!(invalid(join(&HostKeys::default(), &HostKeys::default(), JoinType::Inner, DEFAULT)));
        let five = HostKeys::new(vec![HostColumn::I32(vec![1]); 5]);
        assert!(invalid(join(&five, &five, JoinType::Inner, DEFAULT)));
    }

    #[test]
    fn four_key_columns_of_mixed_types() {
        let l = HostKeys::new(vec![
            HostColumn::I32(vec![1, 1, -1]),
            HostColumn::U64(vec![u64::MAX, u64::MAX, 0]),
            HostColumn::F64(vec![0.5, 0.5, -0.0]),
            HostColumn::U32(vec![7, 8, 0]),
        ]);
        let r = HostKeys::new(vec![
            HostColumn::I32(vec![-1, 1]),
            HostColumn::U64(vec![0, u64::MAX]),
            HostColumn::F64(vec![0.0, 0.5]),
            HostColumn::U32(vec![0, 8]),
        ]);
        assert_eq!(checked_join(&l, &r, JoinType::Inner, DEFAULT), vec![(id(1), id(1)), (id(2), id(0))]);
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
        let (a, b) = (i32_keys(&MGPU_A_KEYS), i32_keys(&MGPU_B_KEYS));
        for jt in JoinType::ALL {
            let pairs = join(&a, &b, jt, DEFAULT).unwrap();
            let lmap: Vec<RowId> =
                if jt.has_left_map() { pairs.iter().rev().map(|p| p.0).collect() } else { vec![] };
            let rmap: Vec<RowId> =
                if jt.has_right_map() { pairs.iter().rev().map(|p| p.1).collect() } else { vec![] };
            assert_eq!(try_pairs_from_maps(&lmap, &rmap, jt).unwrap(), pairs, "{jt:?}");
        }
    }

    // ---- (c) property tests ----

    /// Value pools: small duplicate-heavy domains plus the awkward values.
    const INT_POOL: [i64; 8] = [0, 1, 2, 3, -1, 4, i64::MIN, i64::MAX];
    const F64_POOL: [f64; 10] =
        [0.0, -0.0, 1.0, f64::NAN, f64::INFINITY, -1.5, f64::NEG_INFINITY, 2.0, -f64::NAN, f64::MIN_POSITIVE];

    fn make_column(ty: KeyType, codes: &[u8]) -> HostColumn {
        let int = |c: u8| INT_POOL[c as usize % INT_POOL.len()];
        let float = |c: u8| {
            let v = F64_POOL[c as usize % F64_POOL.len()];
            // A NaN with a different payload, so "every NaN" is exercised.
            if c as usize % F64_POOL.len() == 8 {
                f64::from_bits(v.to_bits() ^ 0x1234)
            } else {
                v
            }
        };
        match ty {
            KeyType::I32 => HostColumn::I32(
                codes.iter().map(|&c| int(c).clamp(i32::MIN.into(), i32::MAX.into()) as i32).collect(),
            ),
            KeyType::I64 => HostColumn::I64(codes.iter().map(|&c| int(c)).collect()),
            KeyType::U32 => HostColumn::U32(codes.iter().map(|&c| int(c) as u32).collect()),
            KeyType::U64 => HostColumn::U64(codes.iter().map(|&c| int(c) as u64).collect()),
            KeyType::F32 => HostColumn::F32(codes.iter().map(|&c| float(c) as f32).collect()),
            KeyType::F64 => HostColumn::F64(codes.iter().map(|&c| float(c)).collect()),
        }
    }

    /// One key column's shape: type, domain size (number of distinct codes) and null rate (of 8).
    #[derive(Debug, Clone, Copy)]
    struct ColSpec {
        ty: KeyType,
        domain: u8,
        null_eighths: u8,
    }

    fn col_spec() -> impl Strategy<Value = ColSpec> {
        let ty = prop_oneof![
            Just(KeyType::I32),
            Just(KeyType::U64),
            Just(KeyType::F32),
            Just(KeyType::F64),
            Just(KeyType::I64),
            Just(KeyType::U32),
        ];
        (ty, 1u8..=10, prop_oneof![Just(0u8), 1u8..=4]).prop_map(|(ty, domain, null_eighths)| ColSpec {
            ty,
            domain,
            null_eighths,
        })
    }

    /// `cells[c][i]` = (value code, null roll) of row i in column c.
    fn make_keys(specs: &[ColSpec], cells: &[Vec<(u8, u8)>]) -> HostKeys {
        let mut keys = HostKeys::default();
        for (spec, col) in specs.iter().zip(cells) {
            let codes: Vec<u8> = col.iter().map(|&(code, _)| code % spec.domain).collect();
            keys.columns.push(make_column(spec.ty, &codes));
            keys.validity.push(
                (spec.null_eighths > 0)
                    .then(|| col.iter().map(|&(_, roll)| roll % 8 >= spec.null_eighths).collect()),
            );
        }
        keys
    }

    fn join_case() -> impl Strategy<Value = (HostKeys, HostKeys, JoinOptions)> {
        let sizes =
            (1usize..=3, prop_oneof![Just(0usize), 0usize..40], prop_oneof![Just(0usize), 0usize..40]);
        sizes
            .prop_flat_map(|(ncols, nl, nr)| {
                let cells =
                    |n| proptest::collection::vec(proptest::collection::vec(any::<(u8, u8)>(), n), ncols);
                (proptest::collection::vec(col_spec(), ncols), cells(nl), cells(nr), any::<(bool, bool)>())
            })
            .prop_map(|(specs, lcells, rcells, (nulls_eq, nan_never))| {
                let opts = JoinOptions {
                    null_equality: if nulls_eq {
                        NullEquality::NullEqualsNull
                    } else {
                        NullEquality::NullEqualsNothing
                    },
                    nan_equality: if nan_never {
                        NanEquality::NanNeverEqual
                    } else {
                        NanEquality::NanEqualsNan
                    },
                    ..JoinOptions::DEFAULT
                };
                (make_keys(&specs, &lcells), make_keys(&specs, &rcells), opts)
            })
    }

    fn proptest_config() -> ProptestConfig {
        ProptestConfig {
            cases: 512,
            rng_algorithm: RngAlgorithm::ChaCha,
            rng_seed: RngSeed::Fixed(0x6a6f_696e),
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(proptest_config())]

        #[test]
        fn hash_join_matches_brute_force((l, r, opts) in join_case()) {
            for jt in JoinType::ALL {
                let fast = join(&l, &r, jt, opts).unwrap();
                let brute = join_brute_force(&l, &r, jt, opts).unwrap();
                prop_assert_eq!(&fast, &brute, "{:?} {:?}", jt, opts);
                prop_assert_eq!(join_size(&l, &r, jt, opts).unwrap(), fast.len() as u64);
                prop_assert!(fast.windows(2).all(|w| w[0] <= w[1]), "not canonical: {:?}", jt);
            }
        }

        #[test]
        fn join_types_are_consistent((l, r, opts) in join_case()) {
            let get = |jt| join(&l, &r, jt, opts).unwrap();
            let (inner, left, right, full) = (get(JoinType::Inner), get(JoinType::Left), get(JoinType::Right), get(JoinType::Full));
            // Swapping the sides swaps the pairs.
            for jt in JoinType::ALL {
                let swapped: Vec<_> = join(&r, &l, jt.swapped(), opts).unwrap().into_iter().map(|(a, b)| (b, a)).collect();
                prop_assert_eq!(sorted(swapped), get(jt), "{:?}", jt);
            }
            // Outer joins add exactly the unmatched rows to the inner join.
            let semi = get(JoinType::LeftSemi);
            let anti = get(JoinType::LeftAnti);
            prop_assert_eq!(semi.len() + anti.len(), l.rows());
            prop_assert_eq!(left.len(), inner.len() + anti.len());
            let rsemi = get(JoinType::RightSemi);
            let ranti = get(JoinType::RightAnti);
            prop_assert_eq!(rsemi.len() + ranti.len(), r.rows());
            prop_assert_eq!(right.len(), inner.len() + ranti.len());
            prop_assert_eq!(full.len(), inner.len() + anti.len() + ranti.len());
            let mut lsemi_from_inner: Vec<_> = inner.iter().map(|p| (p.0, RowId::NONE)).collect();
            lsemi_from_inner.dedup();
            prop_assert_eq!(semi, lsemi_from_inner);
        }
    }
}
