//! The join API shared by every algorithm: join types, row ids with an explicit "no match",
//! gather maps, key columns and equality options.

use bytemuck::{Pod, Zeroable};

/// Which rows a join returns (DataFusion's names).
///
/// For `L JOIN R`: `Inner` pairs matching rows; `Left`/`Right`/`Full` add the unmatched rows of
/// the left/right/both sides paired with [`RowId::NONE`]; `LeftSemi`/`LeftAnti` return each left
/// row that has / has no match once (right map empty); `RightSemi`/`RightAnti` likewise for right
/// rows (left map empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JoinType {
    Inner,
    Left,
    Right,
    Full,
    LeftSemi,
    LeftAnti,
    RightSemi,
    RightAnti,
}

impl JoinType {
    /// Every join type, for tests and benchmarks.
    pub const ALL: [JoinType; 8] = [
        JoinType::Inner,
        JoinType::Left,
        JoinType::Right,
        JoinType::Full,
        JoinType::LeftSemi,
        JoinType::LeftAnti,
        JoinType::RightSemi,
        JoinType::RightAnti,
    ];

    /// Unmatched left rows appear in the output (`Left`, `Full`).
    pub fn keeps_unmatched_left(self) -> bool {
        matches!(self, JoinType::Left | JoinType::Full)
    }

    /// Unmatched right rows appear in the output (`Right`, `Full`).
    pub fn keeps_unmatched_right(self) -> bool {
        matches!(self, JoinType::Right | JoinType::Full)
    }

    /// The output has a left map (every type but `RightSemi`/`RightAnti`).
    pub fn has_left_map(self) -> bool {
        !matches!(self, JoinType::RightSemi | JoinType::RightAnti)
    }

    /// The output has a right map (every type but `LeftSemi`/`LeftAnti`).
    pub fn has_right_map(self) -> bool {
        !matches!(self, JoinType::LeftSemi | JoinType::LeftAnti)
    }

    /// The same join with the sides exchanged (`Left` <-> `Right`, ...).
    pub fn swapped(self) -> JoinType {
        match self {
            JoinType::Left => JoinType::Right,
            JoinType::Right => JoinType::Left,
            JoinType::LeftSemi => JoinType::RightSemi,
            JoinType::RightSemi => JoinType::LeftSemi,
            JoinType::LeftAnti => JoinType::RightAnti,
            JoinType::RightAnti => JoinType::LeftAnti,
            t => t,
        }
    }
}

/// A row index in a gather map, or [`RowId::NONE`] for the null side of an outer-join row.
///
/// It is not a bare integer: a caller reaches the index only through [`RowId::get`], so "no
/// match" cannot be used as an index by mistake.
///
/// ```
/// # use gpujoin_join::RowId;
/// assert_eq!(RowId::new(7).unwrap().get(), Some(7));
/// assert_eq!(RowId::NONE.get(), None);
/// assert!(RowId::new(u32::MAX).is_none()); // reserved for NONE
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Pod, Zeroable)]
#[repr(transparent)]
pub struct RowId(u32);

impl RowId {
    /// "No matching row".
    pub const NONE: RowId = RowId(u32::MAX);
    /// Rows a relation may hold: indices run from 0 to `MAX_ROWS - 1`.
    pub const MAX_ROWS: u64 = u32::MAX as u64;

    /// The id of row `index`; `None` for `u32::MAX`, which is reserved.
    pub fn new(index: u32) -> Option<RowId> {
        (index != u32::MAX).then_some(RowId(index))
    }

    /// The row index, or `None` for [`RowId::NONE`].
    pub fn get(self) -> Option<u32> {
        (self.0 != u32::MAX).then_some(self.0)
    }

    /// True for [`RowId::NONE`].
    pub fn is_none(self) -> bool {
        self.0 == u32::MAX
    }

    /// From an optional index (`None` -> `NONE`); panics on `Some(u32::MAX)`.
    pub fn from_option(o: Option<u32>) -> RowId {
        match o {
            Some(i) => RowId::new(i).expect("u32::MAX is reserved for RowId::NONE"),
            None => RowId::NONE,
        }
    }
}

impl std::fmt::Debug for RowId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.get() {
            Some(i) => write!(f, "{i}"),
            None => write!(f, "-"),
        }
    }
}

/// Do null keys match each other? (DataFusion's `NullEquality`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NullEquality {
    /// SQL semantics: a null key matches nothing (the row still appears in outer joins).
    #[default]
    NullEqualsNothing,
    /// A null key matches other null keys (e.g. for `IS NOT DISTINCT FROM`).
    NullEqualsNull,
}

/// How floating-point keys compare. `-0.0 == 0.0` always holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NanEquality {
    /// Every NaN equals every NaN (whatever its payload), as in grouping and Spark joins.
    #[default]
    NanEqualsNan,
    /// NaN equals nothing, as IEEE `==` says (the row still appears in outer joins).
    NanNeverEqual,
}

/// Options of an equi-join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct JoinOptions {
    pub null_equality: NullEquality,
    pub nan_equality: NanEquality,
    /// The most bytes the join's gather maps may take (8 a row with both maps, 4 for semi and
    /// anti joins). With a budget, the sort-merge, interleave and hash joins first count their
    /// exact output ([`crate::join_size`], no output allocated) and return
    /// [`gpujoin_device::Error::OutputTooLarge`] before any other work when it is over; the
    /// chunked calls ([`crate::chunked::join_chunks`]) deliver such outputs. `None` (the
    /// default): as much as the device holds.
    pub output_budget: Option<u64>,
    /// Collect per-phase device times and the pool's peak ([`crate::JoinStats`]): resets the
    /// device's peak-memory counter, records events and waits for the device at the end. `false`
    /// (the default): none of that; the statistics read zero.
    pub stats: bool,
    /// Paths and tunings forced for this call, for tests only (feature `testing`).
    #[cfg(feature = "testing")]
    pub testing: TestingOptions,
}

impl JoinOptions {
    /// SQL's equality: NULL keys match nothing, NaN matches NaN, no output budget.
    pub const DEFAULT: JoinOptions = JoinOptions {
        null_equality: NullEquality::NullEqualsNothing,
        nan_equality: NanEquality::NanEqualsNan,
        output_budget: None,
        stats: false,
        #[cfg(feature = "testing")]
        testing: TestingOptions::DEFAULT,
    };

    /// The merge join's path ([`TestingOptions`]; its own choice without the feature).
    pub(crate) fn merge_route(&self) -> crate::sort_merge::MergeRoute {
        #[cfg(feature = "testing")]
        return self.testing.merge_route();
        #[cfg(not(feature = "testing"))]
        crate::sort_merge::MergeRoute::Auto
    }

    /// The bits kept of every hashed key ([`TestingOptions`]; all of them without the feature).
    pub(crate) fn hash_mask(&self) -> u64 {
        #[cfg(feature = "testing")]
        return self.testing.hash_mask;
        #[cfg(not(feature = "testing"))]
        u64::MAX
    }

    /// The partition bits the partitioned hash join must use, when forced ([`TestingOptions`]).
    pub(crate) fn forced_partition_bits(&self) -> Option<u32> {
        #[cfg(feature = "testing")]
        return (self.testing.partition_bits > 0).then_some(self.testing.partition_bits.min(24));
        #[cfg(not(feature = "testing"))]
        None
    }

    /// The fewest build rows for which the non-partitioned hash join looks for dense keys (the
    /// direct-address table), `None`: never ([`TestingOptions::unique_build_table`]). Below
    /// 2^18 rows the hash table (at most 4 MiB of 4-byte keys) stays in L2, and the search for
    /// the keys' span (a reduction and a host read) would cost more than the table saves.
    pub(crate) fn direct_address_min_rows(&self) -> Option<usize> {
        const DIRECT_ADDRESS_MIN_BUILD_ROWS: usize = 1 << 18;
        #[cfg(feature = "testing")]
        return match self.testing.unique_build_table {
            UniqueBuildTable::Auto => Some(DIRECT_ADDRESS_MIN_BUILD_ROWS),
            UniqueBuildTable::Hash => None,
            UniqueBuildTable::DirectWhereDense => Some(0),
        };
        #[cfg(not(feature = "testing"))]
        Some(DIRECT_ADDRESS_MIN_BUILD_ROWS)
    }

    /// Whether `Algorithm::Auto` asks, before its decision tree, whether the build keys are
    /// unique (NPHJ on its direct-address or hash table); not under
    /// [`TestingOptions::unique_build_table`] `Hash`.
    pub(crate) fn auto_asks_unique(&self) -> bool {
        #[cfg(feature = "testing")]
        return self.testing.unique_build_table != UniqueBuildTable::Hash;
        #[cfg(not(feature = "testing"))]
        true
    }

    /// The most probe rows per work item of the partitioned hash join, when forced
    /// ([`TestingOptions`]).
    pub(crate) fn forced_probe_split(&self) -> Option<u32> {
        #[cfg(feature = "testing")]
        return (self.testing.probe_split > 0).then_some(self.testing.probe_split);
        #[cfg(not(feature = "testing"))]
        None
    }
}

/// Paths and tunings a test forces on one join call ([`JoinOptions::testing`]), so that small
/// inputs exercise what otherwise only large or unlucky ones reach. Only with the cargo feature
/// `testing` of gpujoin-join (the workspace's tests and benchmarks enable it); the default changes
/// nothing.
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TestingOptions {
    /// The sort-merge join always takes the general (load-balancing search) expansion instead of
    /// the fused per-tile one, which otherwise runs whenever no tile produces more than 4 tiles'
    /// worth of rows.
    pub force_general_merge_path: bool,
    /// The fused merge join skips its one pass (maps of a bound of the output, filled in one pass
    /// over the tiles) and counts, then writes; `false`, the default: the one pass runs where the
    /// bound applies.
    pub two_pass_merge: bool,
    /// The fused merge join's one pass runs at once for keys of any multiplicity, skipping the
    /// pass that first assumes at most one row a key on one side (which otherwise runs first and
    /// hands over where a key has several rows on both sides).
    pub any_match_one_pass: bool,
    /// Only these bits of every hashed key are kept, so that composite keys collide massively and
    /// the verification of candidate matches is exercised; `u64::MAX` (the default): the full hash.
    pub hash_mask: u64,
    /// The partitioned hash join partitions on exactly this many bits (at most 24; 0, the
    /// default: automatic), so that small inputs make oversized partitions (several build chunks).
    pub partition_bits: u32,
    /// The partitioned hash join gives each work item at most this many probe rows (0, the
    /// default: 16384), so that small inputs split probe ranges.
    pub probe_split: u32,
    /// The front door and the wide joins never join 8-byte integer keys as 32-bit offsets from
    /// their minimum (key compression; `false`, the default: they do where both sides' keys
    /// span less than 2^32), so that tests compare both paths on the same input.
    pub no_key_compression: bool,
    /// The sort-based theta join ([`crate::plan::Algorithm::ThetaSorted`]: the front door's
    /// runs, chunks and aggregates) fills every output buffer with 0xFF bytes before its kernels
    /// write it, so that unwritten elements show (`false`, the default: it does not).
    pub theta_poison_outputs: bool,
    /// How the sort-based theta join's aggregates sort the right side and build their structure
    /// ([`ThetaAggregatePath`]; `Auto`, the default: the small path where it applies).
    pub theta_aggregate_path: ThetaAggregatePath,
    /// Which table the non-partitioned hash join's unique-build path takes
    /// ([`UniqueBuildTable`]; `Auto`, the default: the direct-address table for dense keys from
    /// 2^18 build rows).
    pub unique_build_table: UniqueBuildTable,
}

/// The table of the non-partitioned hash join's unique-build path a test forces
/// ([`TestingOptions::unique_build_table`]).
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UniqueBuildTable {
    /// The direct-address table where the build keys are dense and at least 2^18, else the
    /// hash table.
    #[default]
    Auto,
    /// The hash table always; `Auto` does not ask whether the build keys are unique (its
    /// decision tree decides, as for repeated keys).
    Hash,
    /// The direct-address table wherever the build keys are dense, at any size; `Auto` looks for
    /// dense unique build keys at any size too.
    DirectWhereDense,
}

/// The aggregate path of the sort-based theta join a test forces
/// ([`TestingOptions::theta_aggregate_path`]).
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThetaAggregatePath {
    /// The small path where it applies, else the general one.
    #[default]
    Auto,
    /// Right sides of at most 65536 rows, aggregates other than MIN/MAX of a right column: sort
    /// and prefix sums in two kernels ([`gpujoin_device::Error::InvalidArgument`] elsewhere).
    Small,
    /// CUB radix sort, then prefix sums, running MIN/MAX or a sparse table.
    General,
}

#[cfg(feature = "testing")]
impl TestingOptions {
    /// Nothing forced.
    pub const DEFAULT: TestingOptions = TestingOptions {
        force_general_merge_path: false,
        two_pass_merge: false,
        any_match_one_pass: false,
        hash_mask: u64::MAX,
        partition_bits: 0,
        probe_split: 0,
        no_key_compression: false,
        theta_poison_outputs: false,
        theta_aggregate_path: ThetaAggregatePath::Auto,
        unique_build_table: UniqueBuildTable::Auto,
    };

    /// The merge join's path these options force.
    pub(crate) fn merge_route(&self) -> crate::sort_merge::MergeRoute {
        use crate::sort_merge::MergeRoute;
        match (self.force_general_merge_path, self.two_pass_merge, self.any_match_one_pass) {
            (true, _, _) => MergeRoute::General,
            (false, true, _) => MergeRoute::TwoPass,
            (false, false, true) => MergeRoute::AnyMatchOnePass,
            (false, false, false) => MergeRoute::Auto,
        }
    }
}

#[cfg(feature = "testing")]
impl Default for TestingOptions {
    fn default() -> Self {
        TestingOptions::DEFAULT
    }
}

/// Composite keys have at most this many columns.
pub const MAX_KEY_COLUMNS: usize = 4;
