//! The front door: one [`Join`] builder over two tables, for every join type, key type and
//! algorithm.
//! [`Join::many`] joins 2 to 16 tables on equal keys (the interleave join of many tables).
//!
//! ```no_run
//! use gpujoin_join::plan::{Algorithm, Join};
//! use gpujoin_join::table::{HostColumn, HostTable, Table};
//! use gpujoin_join::JoinType;
//! # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let orders = Table::upload(s, &HostTable::new(vec![
//!     ("order", HostColumn::from_values(vec![10i64, 11, 12])),
//!     ("cust", HostColumn::utf8(["ann", "bob", "zoe"])),
//! ])?)?;
//! let customers = Table::upload(s, &HostTable::new(vec![
//!     ("id", HostColumn::utf8(["bob", "ann"])),
//!     ("city", HostColumn::utf8_options([Some("Oslo"), None])),
//! ])?)?;
//! let out = Join::new(JoinType::Left)
//!     .on(&orders, &["cust"], &customers, &["id"])
//!     .select(&["order"], &["city"])
//!     .run(s)?;
//! // order 10 -> ann -> NULL city, 11 -> bob -> "Oslo", 12 -> zoe -> no customer: NULL
//! assert_eq!(out.rows, 3);
//! println!("{} because {}", out.algorithm.name(), out.reason);
//! let table = out.table.to_host()?;
//! # Ok(()) }
//! ```
//!
//! | algorithm | for | output order |
//! |---|---|---|
//! | [`Algorithm::SortedMerge`] | inputs already sorted by one integer key without nulls (ModernGPU) | by key; left rows, then right rows, in input order |
//! | [`Algorithm::SortMerge`] | any keys; the paper's SMJ-UM / SMJ-OM (SMJ-OM: some keys as ranks, below) | by key (SMJ-OM with ranks: by rank) |
//! | [`Algorithm::Interleave`] | any keys (seed 001) | by key |
//! | [`Algorithm::Hash`] | one global hash table (NPHJ): unique build keys need no sort (dense ones from 2^18 rows: a direct-address table, slot = key - min); small build sides | by probe row (the side with more rows whose keys can match; the right one on ties) in row order, each with its build matches in row order; then unmatched left rows, then unmatched right rows |
//! | [`Algorithm::PartitionedHash`] | radix-partitioned hash join; PHJ-UM / PHJ-OM (PHJ-OM: some keys as ranks, below) | by partition |
//! | [`Algorithm::IndexedNestedLoop`] | a sorted index of the right side probed by binary search; any keys (some as ranks, below) | left row order; within a left row its right rows in row order; then the unmatched right rows in row order |
//! | [`Join::many`] (not an [`Algorithm`]) | the interleave join of 2 to 16 tables: inner, on keys equal in every table; one map a table | by key; within a key, table 0's row slowest, the last table's fastest |
//!
//! Every order is deterministic (the same inputs give the same order on every run); only the
//! sorted-merge, sort-merge, interleave and indexed nested-loop orders are part of the contract.
//!
//! The clustered gathers ([`Gather::Clustered`]) take every payload type: 4- and 8-byte columns
//! without nulls travel through the join, every other selected column is gathered by row ids
//! that travel in its place. [`Algorithm::Auto`] runs the paper's decision tree only where at
//! least one selected column travels as it is: otherwise every column would be gathered by row
//! id anyway, which is what PHJ-UM does without a row-id column to carry. Before the tree, and
//! also when no column is selected, Auto asks whether a single integer key column has dense,
//! unique build keys whose direct-address table fits in three quarters of the L2 cache (one reduction over
//! them): then NPHJ joins on that table (see [`wide::DIRECT_TABLE_L2_QUARTERS`]); without selected
//! columns it otherwise returns the partitioned hash join's maps. With a filter, the
//! clustered joins carry each side's row ids only: the output rows are the key pairs, the filter
//! runs on them, and the selected columns are gathered by the pairs that pass (a filter must see
//! a pair before its columns are materialized).
//!
//! Keys joined as ranks: the clustered gathers compare keys of at most 64 bits that all can
//! match, and the indexed nested loop indexes one key column whose null rows (and NaN rows)
//! match nothing. They take every other key by joining one `u32` match key a side in place of
//! the keys: the dense rank of the row's full key among both sides' rows (one sort of both
//! sides' key images), so that two rows get equal match keys exactly when their keys are equal
//! under the join's equalities (composite keys column by column; NULL equal to NULL under
//! `NullEqualsNull`; all NaNs one key under `NanEqualsNan`; `-0.0 == 0.0`). Rows that can match
//! nothing (a NULL key under `NullEqualsNothing`, NaN under `NanNeverEqual`) get a value of their
//! own side above every rank (`m` on the left, `m + 1` on the right, for `m` rows that can
//! match), so they match nothing and still appear where the join type keeps unmatched rows. The
//! selected columns are gathered from the inputs as always. This applies to the clustered
//! gathers for keys that prepare to more than 64 bits, nullable keys and float keys under
//! `NanNeverEqual`, and to the indexed nested loop for composite and `Decimal128` keys, nullable
//! keys under `NullEqualsNull` and float keys under `NanEqualsNan`; the reason then says
//! `keys joined as ranks (<why>)`. Left `Int32` keys `[7, NULL, 3]` and right `[3, NULL]` under
//! `NullEqualsNothing` are joined as `[1, 3, 0]` and `[0, 4]`. [`Algorithm::Auto`] does not
//! pick the clustered gathers for such keys (the unclustered ones need no ranks).
//!
//! Key compression: a single 8-byte integer key column (`Int64`, `UInt64`, `Date64`,
//! `Timestamp`) whose valid keys on both sides span less than 2^32 is joined as 32-bit offsets
//! from the smallest key (one reduction a side and one wait for the device to read the range),
//! by every algorithm but the sorted merge; equality, key order, NULLs and the materialized
//! columns (gathered from the inputs) are unchanged. [`JoinOutput::reason`] ends with
//! `8-byte keys joined as 32-bit offsets from <min> (span <s>)`, or `8-byte keys kept: they span
//! <s>, more than 32 bits`. Keys `[-5, 7]` and `[7, -3]` are joined as `[0, 12]` and `[12, 2]`.

mod aggregate;
pub(crate) mod filter;
mod index;
mod keys;
mod many;

pub use index::JoinIndex;
pub use many::{ManyJoin, ManyOutput, MAX_TABLES};

use gpujoin_device::{Error, Result, Stream};

use crate::chunked::{ChunkBudget, ChunkSource, EquiChunkSource, JoinChunks};
use crate::hash_join::JoinStats;
use crate::maps::{GatherMaps, Side};
use crate::predicate::{col_l, col_r, Expr, Predicate};
use crate::theta::{Agg, AggValue};
use crate::table::{Column, ColumnView, DataType, Table, TableView};
use crate::types::{JoinOptions, JoinType, NanEquality, NullEquality, RowId};
use crate::wide;

/// How payload columns are gathered through the join's result (the paper's materialization).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gather {
    /// From the input rows through gather maps (the paper's GFUR, "UM").
    Unclustered,
    /// The first payload column travels with the keys through the transform, the others are
    /// transformed one at a time and gathered from the transformed order (GFTR, "OM"). Any keys:
    /// keys of at most 64 bits that all can match as they are, the others (wider, nullable,
    /// floats under `NanNeverEqual`) as ranks (see the module docs). Payload columns of 4- and
    /// 8-byte types without nulls take this path as they are; every other selected column
    /// (strings, booleans, 1- and 2-byte integers, decimals, any column with a validity bitmap)
    /// is served by composition: a `u32` row-id column travels through the clustered join in its place (one for the side; rows
    /// are below 2^32, [`RowId::MAX_ROWS`]), and the column is then gathered from the input by
    /// those row ids with the unclustered gather, null where the join found no partner (as
    /// [`Gather::Unclustered`] gives it). Example: a left join selecting a right `Utf8` column
    /// carries the right row ids `[0, 1, ..]` through PHJ-OM and gathers the strings by the row
    /// ids it returns.
    Clustered,
}

/// The join algorithm: [`Algorithm::Auto`] or an explicit one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// Chosen from the input (see [`Join::explain`]), with its reason.
    #[default]
    Auto,
    /// ModernGPU's merge of inputs sorted by key (checked on the device: unsorted input is an
    /// [`Error::Unsupported`]).
    SortedMerge,
    /// Sort both sides, merge.
    SortMerge(Gather),
    /// The interleave join.
    Interleave,
    /// The non-partitioned hash join.
    Hash,
    /// The partitioned hash join.
    PartitionedHash(Gather),
    /// A sorted index of the right side probed from the left.
    IndexedNestedLoop,
    /// Theta join, sort-based: a single inequality or band between two numeric columns.
    ThetaSorted,
    /// Theta join, nested loop over tiles: any predicate.
    ThetaNestedLoop,
    /// Theta join, mixed: a hash join on the predicate's numeric equality conjuncts, the rest
    /// filtering the candidate pairs.
    ThetaMixed,
}

impl Algorithm {
    /// Every explicit algorithm.
    pub const EXPLICIT: [Algorithm; 11] = [
        Algorithm::SortedMerge,
        Algorithm::SortMerge(Gather::Unclustered),
        Algorithm::SortMerge(Gather::Clustered),
        Algorithm::Interleave,
        Algorithm::Hash,
        Algorithm::PartitionedHash(Gather::Unclustered),
        Algorithm::PartitionedHash(Gather::Clustered),
        Algorithm::IndexedNestedLoop,
        Algorithm::ThetaSorted,
        Algorithm::ThetaNestedLoop,
        Algorithm::ThetaMixed,
    ];

    /// The theta-join family (the keys become equality conjuncts of the predicate).
    pub fn is_theta(self) -> bool {
        matches!(self, Algorithm::ThetaSorted | Algorithm::ThetaNestedLoop | Algorithm::ThetaMixed)
    }

    /// A short name (the paper's where it has one).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::SortedMerge => "sorted merge",
            Algorithm::SortMerge(Gather::Unclustered) => "SMJ-UM",
            Algorithm::SortMerge(Gather::Clustered) => "SMJ-OM",
            Algorithm::Interleave => "interleave",
            Algorithm::Hash => "NPHJ",
            Algorithm::PartitionedHash(Gather::Unclustered) => "PHJ-UM",
            Algorithm::PartitionedHash(Gather::Clustered) => "PHJ-OM",
            Algorithm::IndexedNestedLoop => "indexed nested loop",
            Algorithm::ThetaSorted => "theta sorted",
            Algorithm::ThetaNestedLoop => "theta nested loop",
            Algorithm::ThetaMixed => "theta mixed",
        }
    }

    fn wide(self) -> Option<wide::Algorithm> {
        Some(match self {
            Algorithm::SortMerge(Gather::Unclustered) => wide::Algorithm::SmjUm,
            Algorithm::SortMerge(Gather::Clustered) => wide::Algorithm::SmjOm,
            Algorithm::PartitionedHash(Gather::Unclustered) => wide::Algorithm::PhjUm,
            Algorithm::PartitionedHash(Gather::Clustered) => wide::Algorithm::PhjOm,
            Algorithm::Hash => wide::Algorithm::Nphj,
            _ => return None,
        })
    }

    fn from_wide(a: wide::Algorithm) -> Algorithm {
        match a {
            wide::Algorithm::SmjUm => Algorithm::SortMerge(Gather::Unclustered),
            wide::Algorithm::SmjOm => Algorithm::SortMerge(Gather::Clustered),
            wide::Algorithm::PhjUm => Algorithm::PartitionedHash(Gather::Unclustered),
            wide::Algorithm::PhjOm => Algorithm::PartitionedHash(Gather::Clustered),
            wide::Algorithm::Nphj | wide::Algorithm::Auto => Algorithm::Hash,
        }
    }
}

/// A join of two tables, built step by step and run by one of its terminals ([`Join::run`],
/// [`Join::count`], [`Join::chunks`], [`Join::explain`]).
#[derive(Clone)]
pub struct Join<'a> {
    join_type: JoinType,
    left: Option<TableView<'a>>,
    right: Option<TableView<'a>>,
    left_on: Vec<String>,
    right_on: Vec<String>,
    select_left: Vec<String>,
    select_right: Vec<String>,
    options: JoinOptions,
    algorithm: Algorithm,
    stats: bool,
    filter: Option<Predicate>,
}

/// What [`Join::run`] returns.
pub struct JoinOutput {
    /// Output rows.
    pub rows: u64,
    /// Gather maps into the input rows (`None` for the clustered gathers, which work with
    /// positions in the transformed inputs, and for an inner [`Algorithm::ThetaSorted`] join
    /// whose selected columns are all 4- and 8-byte numbers without nulls: the join writes them
    /// itself, in the order its maps would have).
    pub maps: Option<GatherMaps>,
    /// The selected columns of both sides, materialized: left ones first; a column name selected
    /// on both sides is prefixed `left.` / `right.`. Rows without a partner on a side are null
    /// in that side's columns.
    pub table: Table,
    /// The algorithm that ran (never `Auto`).
    pub algorithm: Algorithm,
    /// Why it ran.
    pub reason: String,
    /// Per-phase device times and peak memory, when asked for ([`Join::with_stats`]).
    pub stats: Option<JoinStats>,
}

/// What [`Join::explain`] says about a join before running it.
#[derive(Debug, Clone, PartialEq)]
pub struct Explain {
    pub join_type: JoinType,
    /// The algorithm that will run, or `Auto` where the choice samples the data at run time.
    pub algorithm: Algorithm,
    pub reason: String,
    /// Each key pair: left name, right name, type, and how it is prepared.
    pub keys: Vec<(String, String, DataType, &'static str)>,
}

impl std::fmt::Display for Explain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{:?} join: {} ({})", self.join_type, self.algorithm.name(), self.reason)?;
        for (l, r, t, how) in &self.keys {
            writeln!(f, "  key {l} = {r}: {t}, compared as {how}")?;
        }
        Ok(())
    }
}

impl<'a> From<&'a Table> for TableView<'a> {
    fn from(t: &'a Table) -> TableView<'a> {
        t.view()
    }
}

/// Inputs up to this many rows together are joined by the non-partitioned hash join.
pub const TINY_ROWS: u64 = 1 << 12;

/// How a reason says that the keys were replaced by one `u32` match key a side
/// ([`keys::match_keys`]).
const RANKS_NOTE: &str = "keys joined as ranks";

impl<'a> Join<'a> {
    /// A join of `join_type` (SQL semantics: NULL keys match nothing, NaN matches NaN).
    pub fn new(join_type: JoinType) -> Join<'a> {
        Join {
            join_type,
            left: None,
            right: None,
            left_on: Vec::new(),
            right_on: Vec::new(),
            select_left: Vec::new(),
            select_right: Vec::new(),
            options: JoinOptions::DEFAULT,
            algorithm: Algorithm::Auto,
            stats: false,
            filter: None,
        }
    }

    /// The two tables, keeping the key columns given by [`Join::keys`] (none by default: a
    /// theta join on [`Join::filter`], or the Cartesian product without one).
    pub fn tables(mut self, left: impl Into<TableView<'a>>, right: impl Into<TableView<'a>>) -> Join<'a> {
        self.left = Some(left.into());
        self.right = Some(right.into());
        self
    }

    /// The key columns by name (pairwise equal), for a join whose tables come later
    /// ([`Join::tables`], or a join run elsewhere, such as across GPUs); [`Join::on`] gives both
    /// at once.
    ///
    /// `Join::new(JoinType::Inner).keys(&["cust"], &["id"]).tables(&orders, &customers)` is
    /// `Join::new(JoinType::Inner).on(&orders, &["cust"], &customers, &["id"])`.
    pub fn keys(mut self, left_on: &[&str], right_on: &[&str]) -> Join<'a> {
        self.left_on = left_on.iter().map(|s| s.to_string()).collect();
        self.right_on = right_on.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The join type.
    pub fn join_type(&self) -> JoinType {
        self.join_type
    }

    /// The key column names of the left and right tables.
    pub fn key_names(&self) -> (&[String], &[String]) {
        (&self.left_on, &self.right_on)
    }

    /// The selected column names of the left and right tables.
    pub fn selected(&self) -> (&[String], &[String]) {
        (&self.select_left, &self.select_right)
    }

    /// The filter, if any.
    pub fn filter_predicate(&self) -> Option<&Predicate> {
        self.filter.as_ref()
    }

    /// The options: NULL and NaN equality, output budget, statistics.
    pub fn options(&self) -> JoinOptions {
        self.options
    }

    /// A predicate the output pairs must also pass (after the keys), over the columns of the
    /// two tables: `col_l(i)` / `col_r(i)` is column `i` of the left / right table (see
    /// [`Join::left`], [`Join::right`]). Outer joins add the rows without a passing partner.
    pub fn filter(mut self, predicate: Predicate) -> Join<'a> {
        self.filter = Some(predicate);
        self
    }

    /// The left table's column `name` as an expression for [`Join::filter`].
    pub fn left(&self, name: &str) -> Result<Expr> {
        let t = self.left.as_ref().ok_or_else(|| Error::invalid("call `on` or `tables` first"))?;
        Ok(col_l(t.index_of(name)?))
    }

    /// The right table's column `name` as an expression for [`Join::filter`].
    pub fn right(&self, name: &str) -> Result<Expr> {
        let t = self.right.as_ref().ok_or_else(|| Error::invalid("call `on` or `tables` first"))?;
        Ok(col_r(t.index_of(name)?))
    }

    /// The two tables and their key columns (pairwise equal).
    pub fn on(self, left: impl Into<TableView<'a>>, left_on: &[&str], right: impl Into<TableView<'a>>, right_on: &[&str]) -> Join<'a> {
        self.keys(left_on, right_on).tables(left, right)
    }

    /// The columns of each side to materialize into [`JoinOutput::table`] (none by default).
    pub fn select(mut self, left: &[&str], right: &[&str]) -> Join<'a> {
        self.select_left = left.iter().map(|s| s.to_string()).collect();
        self.select_right = right.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Whether NULL keys match each other.
    pub fn null_equality(mut self, e: NullEquality) -> Join<'a> {
        self.options.null_equality = e;
        self
    }

    /// Whether NaN keys match each other.
    pub fn nan_equality(mut self, e: NanEquality) -> Join<'a> {
        self.options.nan_equality = e;
        self
    }

    /// The most bytes the gather maps may take ([`JoinOptions::output_budget`]).
    pub fn output_budget(mut self, bytes: u64) -> Join<'a> {
        self.options.output_budget = Some(bytes);
        self
    }

    /// Paths forced for tests ([`crate::TestingOptions`]: for example no key compression).
    /// Only with the feature `testing`.
    #[cfg(feature = "testing")]
    pub fn testing(mut self, t: crate::types::TestingOptions) -> Join<'a> {
        self.options.testing = t;
        self
    }

    /// The algorithm ([`Algorithm::Auto`] by default).
    pub fn algorithm(mut self, a: Algorithm) -> Join<'a> {
        self.algorithm = a;
        self
    }

    /// Measure per-phase times and the peak device memory (waits for the device at the end and
    /// resets the device's peak-memory counter).
    pub fn with_stats(mut self) -> Join<'a> {
        self.stats = true;
        self.options.stats = true;
        self
    }

    fn inputs(&self) -> Result<Inputs<'a>> {
        let (Some(l), Some(r)) = (&self.left, &self.right) else {
            return Err(Error::invalid("a join needs its tables and keys: call `on` first"));
        };
        if self.left_on.len() != self.right_on.len() {
            return Err(Error::invalid(format!("{} left key columns and {} right key columns: give them in pairs", self.left_on.len(), self.right_on.len())));
        }
        let lk = self.left_on.iter().map(|n| l.column(n)).collect::<Result<Vec<_>>>()?;
        let rk = self.right_on.iter().map(|n| r.column(n)).collect::<Result<Vec<_>>>()?;
        for (i, (a, b)) in lk.iter().zip(&rk).enumerate() {
            if !a.data_type().is_comparable_with(b.data_type()) {
                return Err(Error::TypeMismatch {
                    what: format!("key pair {i} ({} = {})", self.left_on[i], self.right_on[i]),
                    left: a.data_type().to_string(),
                    right: b.data_type().to_string(),
                });
            }
        }
        for (side, t) in [("left", l), ("right", r)] {
            if t.rows() as u64 > RowId::MAX_ROWS {
                return Err(Error::too_large(format!("{side} rows"), t.rows() as u64, RowId::MAX_ROWS));
            }
        }
        let ls = self.select_left.iter().map(|n| l.column(n)).collect::<Result<Vec<_>>>()?;
        let rs = self.select_right.iter().map(|n| r.column(n)).collect::<Result<Vec<_>>>()?;
        if !ls.is_empty() && !self.join_type.has_left_map() {
            return Err(Error::invalid(format!("a {:?} join returns no left rows: select no left columns", self.join_type)));
        }
        if !rs.is_empty() && !self.join_type.has_right_map() {
            return Err(Error::invalid(format!("a {:?} join returns no right rows: select no right columns", self.join_type)));
        }
        Ok(Inputs { left_keys: lk, right_keys: rk, left_select: ls, right_select: rs, left_rows: l.rows(), right_rows: r.rows() })
    }

    /// The algorithm that will run and why, and how each key is compared; checks the names and
    /// types. No device work.
    pub fn explain(&self) -> Result<Explain> {
        let inputs = self.inputs()?;
        let (algorithm, reason) = self.choose(&inputs)?;
        let keys = self
            .left_on
            .iter()
            .zip(&self.right_on)
            .zip(&inputs.left_keys)
            .map(|((l, r), c)| (l.clone(), r.clone(), c.data_type(), keys::describe(c.data_type())))
            .collect();
        Ok(Explain { join_type: self.join_type, algorithm, reason, keys })
    }

    /// Test support: the match ratio and skew that [`Algorithm::Auto`]'s decision tree samples
    /// for this equi-join (without a filter): the keys prepared as [`Join::run`] prepares them
    /// (compressed where they can be), the smaller side building and the larger probing, as the
    /// tree does ([`wide::choose`]). By the streaming pass over the build keys where the keys
    /// allow it (a single key column without nulls), or, with `general`, by the general sample
    /// (the sampled probe keys joined with the build side), so that tests can compare the two.
    /// The tree samples only where its choice depends on the sample; this samples always.
    /// Only with the feature `testing`.
    #[cfg(feature = "testing")]
    pub fn auto_sample(&self, stream: &Stream, general: bool) -> Result<(f64, wide::SampledSkew)> {
        let inputs = self.inputs()?;
        if self.filter.is_some() || inputs.left_keys.is_empty() || self.algorithm.is_theta() {
            return Err(Error::invalid("Auto's decision tree samples equi-joins without a filter"));
        }
        let (lk, rk) = keys::prepare(stream, &inputs.left_keys, &inputs.right_keys, self.options, true)?;
        let (l, r) = (lk.keys()?, rk.keys()?);
        let (build, probe) = if inputs.left_rows < inputs.right_rows { (&l, &r) } else { (&r, &l) };
        wide::sample_for_tests(stream, build, probe, self.options, general)
    }

    /// The algorithm and its reason, checked against the input (no device work).
    fn choose(&self, i: &Inputs<'a>) -> Result<(Algorithm, String)> {
        if self.algorithm.is_theta() || i.left_keys.is_empty() {
            return self.choose_theta(i);
        }
        let (a, reason) = match self.algorithm {
            Algorithm::Auto => self.auto(i),
            a => {
                self.check_explicit(a, i)?;
                match self.ranks_why(a, i) {
                    Some(why) => (a, format!("requested; {RANKS_NOTE} ({why}): one u32 a side, the dense rank of the key among both sides' keys")),
                    None => (a, "requested".to_string()),
                }
            }
        };
        let Some(f) = &self.filter else { return Ok((a, reason)) };
        self.check_filter(f)?;
        match a {
            Algorithm::SortMerge(Gather::Clustered) | Algorithm::PartitionedHash(Gather::Clustered) => Ok((
                a,
                format!("{reason}; each side's row ids travel through it as its payload, the filter runs on the pairs they give, and the selected columns are gathered by the pairs that pass"),
            )),
            Algorithm::Auto => Ok((Algorithm::PartitionedHash(Gather::Unclustered), "keys and a filter: the partitioned hash join on the keys, the filter on its pairs".into())),
            a => Ok((a, format!("{reason}; the filter on its pairs"))),
        }
    }

    /// The key pairs as (left, right) table column indices, for the theta lowering (their
    /// equalities follow the join's NULL and NaN equality: [`filter`]'s module docs).
    fn theta_keys(&self) -> Vec<(usize, usize)> {
        let (l, r) = (self.left.as_ref().expect("checked"), self.right.as_ref().expect("checked"));
        let pos = |t: &TableView<'_>, n: &str| t.index_of(n).expect("checked by inputs()");
        self.left_on.iter().zip(&self.right_on).map(|(a, b)| (pos(l, a), pos(r, b))).collect()
    }

    /// The filter (`True` without one).
    fn filter_or_true(&self) -> Predicate {
        self.filter.clone().unwrap_or(Predicate::True)
    }

    /// The lowering of a theta join: the keys as equality conjuncts and the filter, with `extra`
    /// columns beside them.
    fn lower_theta(&self, stream: &Stream, extra: &[(Side, usize)]) -> Result<filter::Lowered<'a>> {
        let (l, r) = (self.left.as_ref().expect("checked"), self.right.as_ref().expect("checked"));
        filter::lower(stream, &self.filter_or_true(), &self.theta_keys(), self.options, l, r, extra)
    }

    /// The lowering plan of a theta join (no device work): refuses what filters cannot take.
    fn plan_theta(&self) -> Result<filter::Plan> {
        let (l, r) = (self.left.as_ref().expect("checked"), self.right.as_ref().expect("checked"));
        filter::plan(&self.filter_or_true(), &self.theta_keys(), self.options, l, r, &[])
    }

    /// Checks a filter applied to the pairs of an equi-join (no device work): what filters
    /// cannot take ([`filter::plan`]'s errors).
    fn check_filter(&self, pred: &Predicate) -> Result<()> {
        let (l, r) = (self.left.as_ref().expect("checked"), self.right.as_ref().expect("checked"));
        filter::plan(pred, &[], self.options, l, r, &[]).map(|_| ())
    }

    fn choose_theta(&self, _inputs: &Inputs<'a>) -> Result<(Algorithm, String)> {
        let a = self.algorithm;
        let refuse = |reason: String| Err(Error::Unsupported { what: format!("the {} join", a.name()), reason });
        if !a.is_theta() && a != Algorithm::Auto {
            return refuse("no key columns: give keys, or use a theta algorithm with a filter".into());
        }
        // The lowered predicate (keys under the NULL and NaN equality, three-valued logic) decides
        // the path, as it will run.
        let plan = self.plan_theta()?;
        let nullable = plan.has_flags();
        let path = match crate::theta::choose_path(plan.predicate()) {
            // The validity conjuncts of nullable columns take the sorted shape away.
            crate::theta::ThetaPath::Sorted(_) if nullable => crate::theta::ThetaPath::NestedLoop,
            p => p,
        };
        let auto = match &path {
            crate::theta::ThetaPath::Sorted(_) => Algorithm::ThetaSorted,
            crate::theta::ThetaPath::Mixed => Algorithm::ThetaMixed,
            crate::theta::ThetaPath::NestedLoop => Algorithm::ThetaNestedLoop,
        };
        match a {
            Algorithm::Auto => Ok((auto, path.reason().to_string())),
            Algorithm::ThetaSorted if auto != Algorithm::ThetaSorted => refuse("the predicate is not a single inequality or band between two numeric columns".into()),
            Algorithm::ThetaMixed if auto != Algorithm::ThetaMixed => refuse("the predicate (with the keys, lowered) has no equality conjunct between numeric columns; float keys where NaN equals NaN and nullable keys where NULL equals NULL lower to a disjunction".into()),
            a => Ok((a, "requested".into())),
        }
    }

    /// Auto, from what is known without device work.
    fn auto(&self, i: &Inputs<'_>) -> (Algorithm, String) {
        let total = i.left_rows as u64 + i.right_rows as u64;
        if total <= TINY_ROWS {
            return (Algorithm::Hash, format!("tiny inputs ({total} rows together): one global hash table, the fewest passes"));
        }
        let selected = i.left_select.len() + i.right_select.len();
        let composed = self.composed_payloads(i);
        match self.clustered_ranks(i) {
            // Every selected column would be gathered by row id after a clustered join: what the
            // unclustered gathers do anyway, with a row-id column less to carry.
            None if selected > 0 && composed.len() == selected => (
                Algorithm::PartitionedHash(Gather::Unclustered),
                format!("the partitioned hash join with unclustered gathers (no selected column travels through the clustered gathers as it is: {})", composed.join(", ")),
            ),
            None if selected > 0 => {
                (Algorithm::Auto, "the paper's decision tree over the sizes, the payload widths and a sampled match ratio and skew, at run time".into())
            }
            None => (
                Algorithm::Auto,
                "no payload to materialize, at run time: NPHJ where the build keys are unique and its table stays in the L2 (a direct-address table for dense keys, found by one reduction, else its hash table), otherwise the partitioned hash join's maps".into(),
            ),
            Some(why) => (Algorithm::PartitionedHash(Gather::Unclustered), format!("the partitioned hash join with unclustered gathers ({why}: the clustered gathers would join the keys as ranks)")),
        }
    }

    /// The first key column (either side) with a validity bitmap.
    fn nullable_key<'n>(&'n self, i: &Inputs<'_>) -> Option<&'n str> {
        let keys = self.left_on.iter().zip(&i.left_keys).chain(self.right_on.iter().zip(&i.right_keys));
        keys.filter(|(_, c)| c.validity().is_some()).map(|(n, _)| n.as_str()).next()
    }

    /// Why the clustered gathers join these keys as ranks ([`keys::match_keys`]; `None`: as they
    /// are prepared), naming the key columns: keys that prepare to more than 64 bits (which the
    /// joins would hash and verify through maps into the input rows, which the clustered gathers
    /// do not keep), nullable keys, float keys under `NanNeverEqual` (keys that can match
    /// nothing). Every payload type is served (see [`Gather::Clustered`]).
    fn clustered_ranks(&self, i: &Inputs<'_>) -> Option<String> {
        let words: usize = i.left_keys.iter().map(|c| keys::words(c.data_type())).sum();
        let bits: usize = i.left_keys.iter().map(|c| if c.data_type().is_string() { 32 } else { c.data_type().byte_width().unwrap_or(4).max(4) * 8 }).sum();
        if bits > 64 || words > 2 {
            let cols: Vec<String> = self.left_on.iter().zip(&i.left_keys).map(|(n, c)| format!("{n} ({})", c.data_type())).collect();
            return Some(format!("key columns {} prepare as {bits} bits, more than 64", cols.join(", ")));
        }
        if let Some(n) = self.nullable_key(i) {
            return Some(format!("key column {n} has a validity bitmap"));
        }
        if self.options.nan_equality == NanEquality::NanNeverEqual {
            let floats = self.left_on.iter().zip(&i.left_keys).find(|(_, c)| c.data_type().is_float());
            if let Some((n, c)) = floats {
                return Some(format!("key column {n} is {} and NaN equals nothing (NanNeverEqual)", c.data_type()));
            }
        }
        None
    }

    /// Why the indexed nested loop joins these keys as ranks (`None`: the one key column as
    /// it is prepared), naming the key columns; the same decision as [`keys::inlj_needs_ranks`]
    /// on the prepared keys.
    fn inlj_ranks(&self, i: &Inputs<'_>) -> Option<String> {
        if i.left_keys.len() != 1 {
            return Some(format!("a composite key of {} columns ({})", i.left_keys.len(), self.left_on.join(", ")));
        }
        let (n, t) = (&self.left_on[0], i.left_keys[0].data_type());
        if keys::words(t) != 1 {
            return Some(format!("key column {n} is {t}, two key words"));
        }
        if let Some(n) = self.nullable_key(i).filter(|_| self.options.null_equality == NullEquality::NullEqualsNull) {
            return Some(format!("key column {n} has a validity bitmap and NULL equals NULL"));
        }
        if t.is_float() && self.options.nan_equality == NanEquality::NanEqualsNan {
            return Some(format!("key column {n} is {t} and NaN equals NaN"));
        }
        None
    }

    /// Why `a` joins these keys as ranks, for its reason (`None`: as they are prepared).
    fn ranks_why(&self, a: Algorithm, i: &Inputs<'_>) -> Option<String> {
        match a {
            Algorithm::SortMerge(Gather::Clustered) | Algorithm::PartitionedHash(Gather::Clustered) => self.clustered_ranks(i),
            Algorithm::IndexedNestedLoop => self.inlj_ranks(i),
            _ => None,
        }
    }

    /// The selected columns that the clustered gathers take only by composition (gathered by row
    /// id after the join), as `side name: type` (for the reason).
    fn composed_payloads(&self, i: &Inputs<'_>) -> Vec<String> {
        let l = self.select_left.iter().zip(&i.left_select).map(|(n, c)| ("left", n, c));
        let r = self.select_right.iter().zip(&i.right_select).map(|(n, c)| ("right", n, c));
        l.chain(r).filter(|(_, _, c)| !clustered_as_is(c)).map(|(s, n, c)| format!("{s} {n}: {}{}", c.data_type(), if c.validity().is_some() { ", nullable" } else { "" })).collect()
    }

    fn check_explicit(&self, a: Algorithm, i: &Inputs<'_>) -> Result<()> {
        let refuse = |reason: String| Err(Error::Unsupported { what: format!("the {} join", a.name()), reason });
        // The sorted merge joins one integer key column as it is, sorted (checked on the device).
        // Every other algorithm takes every key: the clustered gathers and the indexed nested
        // loop join keys they cannot compare as they are as ranks (see `ranks_why`).
        let sorted_merge = || -> Option<String> {
            if i.left_keys.len() != 1 {
                return Some(format!("{} key columns; it takes one", i.left_keys.len()));
            }
            let (n, t) = (&self.left_on[0], i.left_keys[0].data_type());
            if !matches!(t, DataType::Int32 | DataType::Int64 | DataType::UInt32 | DataType::UInt64 | DataType::Date32 | DataType::Date64 | DataType::Timestamp(_)) {
                return Some(format!("key column {n} is {t}; it takes 32- and 64-bit integer keys"));
            }
            self.nullable_key(i).map(|n| format!("key column {n} has a validity bitmap; it takes keys without nulls"))
        };
        if let Some(why) = self.ranks_why(a, i) {
            // Ranks (and the two values above them) are u32: fewer than 2^32 - 1 rows together.
            let rows = i.left_rows as u64 + i.right_rows as u64;
            if rows >= u32::MAX as u64 {
                return refuse(format!("it joins these keys as ranks ({why}), of fewer than 2^32 - 1 rows of both sides together; they have {rows}"));
            }
        }
        match a {
            Algorithm::SortedMerge => sorted_merge().map_or(Ok(()), refuse),
            _ => Ok(()),
        }
    }

    /// Runs the join: maps and the selected columns materialized.
    pub fn run(&self, stream: &Stream) -> Result<JoinOutput> {
        let inputs = self.inputs()?;
        let (algorithm, reason) = self.choose(&inputs)?;
        // (With a filter, a clustered join gives pairs of row ids: `maps_noted`.)
        let clustered = self.filter.is_none() && matches!(algorithm, Algorithm::Auto | Algorithm::SortMerge(Gather::Clustered) | Algorithm::PartitionedHash(Gather::Clustered));
        if clustered {
            let (lk, rk) = keys::prepare(stream, &inputs.left_keys, &inputs.right_keys, self.options, true)?;
            let note = lk.note().map(str::to_string);
            let mut out = if self.clustered_ranks(&inputs).is_some() {
                // One u32 match key a side in place of the keys (see `keys::match_keys`).
                let (ml, mr) = keys::match_keys(stream, &lk.keys()?, &rk.keys()?, self.options)?;
                drop((lk, rk));
                self.run_wide(stream, &inputs, &TableView::single(ml.view()), &TableView::single(mr.view()), algorithm, reason)?
            } else {
                self.run_wide(stream, &inputs, &lk.keys()?, &rk.keys()?, algorithm, reason)?
            };
            out.reason = noted(out.reason, note.as_deref());
            return Ok(out);
        }
        if let Some(out) = self.run_theta_columns(stream, &inputs, algorithm, &reason)? {
            return Ok(out);
        }
        let mut clock = if self.stats { Some(crate::common::Clock::start(stream, true)?) } else { None };
        if let Some(c) = clock.as_mut() {
            c.mark(stream)?;
        }
        let (maps, note, algo) = self.maps_noted(stream, &inputs, algorithm)?;
        let reason = noted(reason, note.as_deref());
        if let Some(c) = clock.as_mut() {
            c.mark(stream)?;
        }
        let table = self.materialize(stream, &inputs, &maps)?;
        let stats = match clock {
            Some(mut c) => {
                c.mark(stream)?;
                let mut s = JoinStats::default();
                c.finish(&mut s)?;
                // The hash joins time their own phases (and reset the peak counter as they
                // start): key preparation counts as transform, then theirs.
                if let Some(a) = algo {
                    let prep = (s.match_ms - a.transform_ms - a.match_ms).max(0.0);
                    s = JoinStats { transform_ms: prep + a.transform_ms, match_ms: a.match_ms, materialize_ms: s.materialize_ms, peak_memory_bytes: s.peak_memory_bytes.max(a.peak_memory_bytes), ..a };
                    s.total_ms = s.transform_ms + s.match_ms + s.materialize_ms;
                }
                Some(s)
            }
            None => None,
        };
        Ok(JoinOutput { rows: maps.rows(), maps: Some(maps), table, algorithm, reason, stats })
    }

    /// An inner join by [`Algorithm::ThetaSorted`] whose selected columns are all 4- or 8-byte
    /// numbers without a validity bitmap: the join writes them itself, in the order of its maps,
    /// and returns no maps (`None`: take the maps path; also with statistics, an output budget or
    /// testing options).
    fn run_theta_columns(&self, stream: &Stream, i: &Inputs<'a>, algorithm: Algorithm, reason: &str) -> Result<Option<JoinOutput>> {
        use DataType::*;
        let direct = |c: &ColumnView<'_>| c.validity().is_none() && matches!(c.data_type(), Int32 | Date32 | Int64 | Date64 | Timestamp(_) | UInt32 | UInt64 | Float32 | Float64);
        let mut selected = i.left_select.iter().chain(&i.right_select);
        if algorithm != Algorithm::ThetaSorted || self.join_type != JoinType::Inner || self.stats || self.options.output_budget.is_some() || selected.clone().next().is_none() || !selected.all(direct) {
            return Ok(None);
        }
        #[cfg(feature = "testing")]
        if self.options.testing != crate::types::TestingOptions::DEFAULT {
            return Ok(None);
        }
        let (lt, rt) = (self.left.as_ref().expect("checked"), self.right.as_ref().expect("checked"));
        let indices = |t: &TableView<'_>, names: &[String]| names.iter().map(|n| t.index_of(n)).collect::<Result<Vec<_>>>();
        let (li, ri) = (indices(lt, &self.select_left)?, indices(rt, &self.select_right)?);
        let extra: Vec<(Side, usize)> = li.iter().map(|&c| (Side::Left, c)).chain(ri.iter().map(|&c| (Side::Right, c))).collect();
        let low = self.lower_theta(stream, &extra)?;
        let lowered = |index: &[Option<usize>], cols: &[usize]| cols.iter().map(|&c| index[c].ok_or_else(|| Error::invalid("internal: a selected column was not lowered"))).collect::<Result<Vec<_>>>();
        let (lr, rr) = (lowered(&low.left_index, &li)?, lowered(&low.right_index, &ri)?);
        let written = crate::theta::sorted::sorted_theta_materialize(stream, &low.left.view(), &low.right.view(), &low.pred, &lr, &rr)?;
        let rows = written.first().map_or(0, |c| c.len());
        let mut columns = Vec::with_capacity(written.len());
        let names = self.select_left.iter().map(|n| (Side::Left, n)).chain(self.select_right.iter().map(|n| (Side::Right, n)));
        // The relations read the selected columns in place, so the written ones have their types.
        for ((side, name), column) in names.zip(written) {
            let other = if side == Side::Left { &self.select_right } else { &self.select_left };
            columns.push((output_name(side, name, other.iter().any(|o| o == name)), column));
        }
        Ok(Some(JoinOutput { rows: rows as u64, maps: None, table: Table::new(columns)?, algorithm, reason: reason.to_string(), stats: None }))
    }

    /// The gather maps by `algorithm` (not a clustered one).
    fn maps(&self, stream: &Stream, i: &Inputs<'a>, algorithm: Algorithm) -> Result<GatherMaps> {
        Ok(self.maps_noted(stream, i, algorithm)?.0)
    }

    /// The gather maps by `algorithm` (not a clustered one) and how the keys were prepared, for
    /// the reason ([`keys::PreparedKeys::note`]).
    fn maps_noted(&self, stream: &Stream, i: &Inputs<'a>, algorithm: Algorithm) -> Result<(GatherMaps, Option<String>, Option<JoinStats>)> {
        let jt = self.join_type;
        if algorithm.is_theta() {
            let low = self.lower_theta(stream, &[])?;
            if let Some(budget) = self.options.output_budget {
                let rows = theta_size(stream, &low, algorithm, jt)?;
                let bytes = rows * 4 * (jt.has_left_map() as u64 + jt.has_right_map() as u64);
                if bytes > budget {
                    return Err(Error::OutputTooLarge { rows, bytes, available: budget });
                }
            }
            return Ok((theta_maps(stream, &low, algorithm, jt, self.options)?, None, None));
        }
        // The sorted merge joins the key columns as they are (it checks their order itself).
        let (lk, rk) = keys::prepare(stream, &i.left_keys, &i.right_keys, self.options, algorithm != Algorithm::SortedMerge)?;
        let note = lk.note().map(str::to_string);
        let (l, r) = (lk.keys()?, rk.keys()?);
        let Some(f) = &self.filter else {
            let (maps, stats) = equi_maps(stream, i, &l, &r, &lk, &rk, algorithm, jt, self.options)?;
            return Ok((maps, note, stats));
        };
        // Keys and a filter: the inner join on the keys, the filter on its pairs, then the join type.
        let inner_options = JoinOptions { output_budget: None, ..self.options };
        let inner = match algorithm {
            Algorithm::SortMerge(Gather::Clustered) | Algorithm::PartitionedHash(Gather::Clustered) => {
                if self.clustered_ranks(i).is_some() {
                    // One u32 match key a side in place of the keys (see `keys::match_keys`).
                    let (ml, mr) = keys::match_keys(stream, &l, &r, self.options)?;
                    clustered_pairs(stream, &TableView::single(ml.view()), &TableView::single(mr.view()), i, algorithm, inner_options)?
                } else {
                    clustered_pairs(stream, &l, &r, i, algorithm, inner_options)?
                }
            }
            _ => equi_maps(stream, i, &l, &r, &lk, &rk, algorithm, JoinType::Inner, JoinOptions { stats: false, ..inner_options })?.0,
        };
        drop((l, r));
        drop((lk, rk));
        let (a, b) = inner.into_raw();
        let low = filter::lower(stream, f, &[], self.options, self.left.as_ref().expect("checked"), self.right.as_ref().expect("checked"), &[])?;
        let (a, b) = crate::theta::nested_loop::PairFilter::new(stream, &low.left.view(), &low.right.view(), &low.pred, &[])?.apply(stream, a, b)?;
        Ok((crate::common::from_inner_pairs(stream, a, b, i.left_rows, i.right_rows, jt)?, note, None))
    }

    fn run_wide(&self, stream: &Stream, i: &Inputs<'a>, l: &TableView<'_>, r: &TableView<'_>, algorithm: Algorithm, reason: String) -> Result<JoinOutput> {
        // Columns the clustered gathers take as they are travel through the join; the others
        // are gathered afterwards by a row-id column (`1 + row`: an unmatched row reads 0) that
        // travels in their place, last (see `Gather::Clustered`).
        let row_ids = |cols: &[ColumnView<'_>], rows: usize| -> Result<Option<gpujoin_device::DeviceBuffer<u32>>> {
            if cols.iter().all(clustered_as_is) {
                return Ok(None);
            }
            crate::common::iota_from(stream, rows, 1).map(Some)
        };
        let (lids, rids) = (row_ids(&i.left_select, i.left_rows)?, row_ids(&i.right_select, i.right_rows)?);
        fn payloads<'p>(cols: &[ColumnView<'p>], ids: &'p Option<gpujoin_device::DeviceBuffer<u32>>) -> Vec<ColumnView<'p>> {
            let mut v: Vec<ColumnView<'p>> = cols.iter().copied().filter(clustered_as_is).collect();
            v.extend(ids.as_ref().map(|b| ColumnView::from_values(b.view())));
            v
        }
        let out = {
            let (pl, pr) = (payloads(&i.left_select, &lids), payloads(&i.right_select, &rids));
            clustered_join(stream, (l, &pl), (r, &pr), self.join_type, algorithm, self.options)?
        };
        drop((lids, rids));
        let composed = self.composed_payloads(i);
        let reason = if algorithm == Algorithm::Auto { format!("{reason}: {}", out.reason) } else { reason };
        let reason = if composed.is_empty() { reason } else { format!("{reason}; gathered by row id after the join: {}", composed.join(", ")) };
        let mut columns = Vec::new();
        for (side, m, names, cols) in [(Side::Left, out.left, &self.select_left, &i.left_select), (Side::Right, out.right, &self.select_right, &i.right_select)] {
            let Some(m) = m else { continue };
            let mut travelled = m.into_parts().1.into_iter();
            // The map into the input rows: row id `1 + row` -> row, 0 (no partner) -> NONE,
            // through the table `[NONE, 0, 1, ..]`.
            let map = if cols.iter().all(clustered_as_is) {
                None
            } else {
                let ids = travelled.next_back().and_then(|c| c.without_validity().into_values::<u32>()).ok_or_else(|| Error::invalid("internal: the row-id column did not come back from the clustered join"))?;
                let rows = if side == Side::Left { i.left_rows } else { i.right_rows };
                let table = crate::common::iota_from(stream, rows + 1, u32::MAX)?;
                let mut map = stream.alloc::<u32>(ids.len())?;
                if !ids.is_empty() {
                    gpujoin_primitives::gather_into_unchecked(stream, &table.view(), &ids.view(), &mut map.view_mut(), u32::MAX)?;
                }
                Some(map)
            };
            let nullable = if side == Side::Left { self.join_type.keeps_unmatched_right() } else { self.join_type.keeps_unmatched_left() };
            for (name, col) in names.iter().zip(cols) {
                let other = if side == Side::Left { &self.select_right } else { &self.select_left };
                let out_name = output_name(side, name, other.iter().any(|o| o == name));
                let column = if clustered_as_is(col) {
                    let p = travelled.next().ok_or_else(|| Error::invalid("internal: a payload column did not come back from the clustered join"))?;
                    let (values, _, validity) = p.into_buffers();
                    Column::from_buffers(col.data_type(), out.rows as usize, values, None, validity)?
                } else {
                    let map = map.as_ref().ok_or_else(|| Error::invalid("internal: no row ids"))?;
                    crate::kernels::table::gather(stream, col, &map.view(), nullable)?
                };
                columns.push((out_name, column));
            }
        }
        Ok(JoinOutput { rows: out.rows, maps: out.maps, table: Table::new(columns)?, algorithm: Algorithm::from_wide(out.algorithm), reason, stats: self.stats.then_some(out.stats) })
    }

    /// The selected columns gathered through `maps` (for example one chunk's maps from
    /// [`Join::chunks`]), named and ordered as [`JoinOutput::table`].
    pub fn gather(&self, stream: &Stream, maps: &GatherMaps) -> Result<Table> {
        let inputs = self.inputs()?;
        self.materialize(stream, &inputs, maps)
    }

    fn materialize(&self, stream: &Stream, i: &Inputs<'a>, maps: &GatherMaps) -> Result<Table> {
        let l: Vec<_> = self.select_left.iter().cloned().zip(i.left_select.iter().copied()).collect();
        let r: Vec<_> = self.select_right.iter().cloned().zip(i.right_select.iter().copied()).collect();
        materialize_sides(stream, maps, &l, &r)
    }

    /// Equi-joins count without writing pairs; theta joins count where their path can
    /// (sorted, nested loop); a join with keys and a filter runs to count.
    pub fn count(&self, stream: &Stream) -> Result<u64> {
        let inputs = self.inputs()?;
        let (algorithm, _) = self.choose(&inputs)?;
        if algorithm.is_theta() {
            let low = self.lower_theta(stream, &[])?;
            return theta_size(stream, &low, algorithm, self.join_type);
        }
        if self.filter.is_some() {
            return Ok(self.maps(stream, &inputs, algorithm)?.rows());
        }
        let (lk, rk) = keys::prepare(stream, &inputs.left_keys, &inputs.right_keys, self.options, true)?;
        crate::sort_merge::sort_merge_join_size(stream, &lk.keys()?, &rk.keys()?, self.join_type, self.options)
    }

    /// COUNT/SUM/MIN/MAX over the join's output rows without returning them: `column` is a
    /// column of one side (`None` with COUNT: the rows). NULLs (and the null side of outer rows)
    /// are skipped; SUM/MIN/MAX over no values is [`AggValue::None`]. Integer SUM is exact
    /// (`i128`); float MIN/MAX is NaN once a value is NaN (the inner theta path follows [`Agg`]:
    /// NaN only when every value is).
    ///
    /// How, by the join:
    /// * an equi-join without a filter (every join type, any algorithm setting: it does not
    ///   apply) aggregates without pairs: each row of the column's side is weighted by the number
    ///   of output rows it is in (its match count from sorted searches, one for an unmatched row
    ///   the join keeps; semi/anti joins: one for each qualifying row), and the weighted values are
    ///   folded on the device, read back once. Memory O(left + right rows), never the output's
    ///   maps; a float SUM adds in the device's order (it may round differently from a
    ///   pair-by-pair sum); an integer SUM past `i128` is an [`Error::TooLarge`];
    /// * an inner theta join aggregates without writing pairs (the theta paths: the sorted one
    ///   for [`Algorithm::ThetaSorted`], the nested loop for the others; an explicit one is
    ///   honoured);
    /// * other joins (a join with keys and a filter, an outer theta join, a theta join over a
    ///   nullable column) gather the column by their maps and fold it on the device (one read
    ///   back; a float SUM adds in the device's order).
    ///
    /// Example: a LEFT join of left keys `[1, 1, 2, 3]` (column `v`: `[10, 20, NULL, 5]`) with
    /// right keys `[1, 1, 1, 2]`: SUM(v) = 10 * 3 + 20 * 3 + 5 = 95 (row 3 unmatched, kept once;
    /// the NULL skipped), COUNT(v) = 7, COUNT(*) = 8.
    pub fn aggregate(&self, stream: &Stream, agg: Agg, column: Option<(Side, &str)>) -> Result<AggValue> {
        let inputs = self.inputs()?;
        let (l, r) = (self.left.as_ref().expect("checked"), self.right.as_ref().expect("checked"));
        let col = match column {
            Some((side, name)) => {
                let t = if side == Side::Left { l } else { r };
                let c = t.column(name)?;
                // COUNT takes any column of a kernel type; SUM, MIN and MAX numeric ones (narrow
                // integers, booleans, dates and timestamps read as their kernel integers).
                if !c.data_type().kernel_type().is_some_and(|k| agg == Agg::Count || k.is_numeric()) {
                    return Err(Error::Unsupported { what: format!("{agg:?} of column {name}"), reason: format!("it is {}; aggregates take integer, date, timestamp and float columns", c.data_type()) });
                }
                Some((side, t.index_of(name)?, c))
            }
            None if agg == Agg::Count => None,
            None => return Err(Error::invalid(format!("{agg:?} needs a column"))),
        };
        if let Some((side, _, _)) = col {
            if !(if side == Side::Left { self.join_type.has_left_map() } else { self.join_type.has_right_map() }) {
                return Err(Error::invalid(format!("a {:?} join has no {side:?} rows to aggregate", self.join_type)));
            }
        }
        let (algorithm, _) = self.choose(&inputs)?;
        if algorithm.is_theta() && self.join_type == JoinType::Inner && col.is_none_or(|(_, _, c)| c.validity().is_none()) {
            let extra: Vec<(Side, usize)> = col.iter().map(|&(s, i, _)| (s, i)).collect();
            let low = self.lower_theta(stream, &extra)?;
            let column = col.map(|(s, i, _)| (s, if s == Side::Left { low.left_index[i] } else { low.right_index[i] }.expect("lowered")));
            return theta_aggregate(stream, &low, algorithm, agg, column, self.options);
        }
        if !algorithm.is_theta() && self.filter.is_none() {
            // An equi-join: the rows' match counts weight the column's values (no pairs).
            let (lk, rk) = keys::prepare(stream, &inputs.left_keys, &inputs.right_keys, self.options, true)?;
            let (lk, rk) = (lk.keys()?, rk.keys()?);
            return match col {
                None => Ok(AggValue::Int(crate::sort_merge::sort_merge_join_size(stream, &lk, &rk, self.join_type, self.options)? as i128)),
                Some((side, _, c)) => aggregate::equi_aggregate(stream, &lk, &rk, self.join_type, self.options, agg, side, &c),
            };
        }
        // (A clustered algorithm with a filter gives its pairs as row ids: `maps_noted`.)
        let maps = if algorithm == Algorithm::Auto {
            self.maps(stream, &inputs, Algorithm::PartitionedHash(Gather::Unclustered))?
        } else {
            self.maps(stream, &inputs, algorithm)?
        };
        let Some((side, _, c)) = col else { return Ok(AggValue::Int(maps.rows() as i128)) };
        let map = maps.side(side).ok_or_else(|| Error::invalid(format!("a {:?} join has no {side:?} rows to aggregate", self.join_type)))?;
        let gathered = crate::kernels::table::gather(stream, &c, &map.cast::<u32>(), maps.nullable(side))?;
        aggregate::aggregate_rows(stream, agg, &gathered.view())
    }

    /// The gather maps in chunks of at most `budget` bytes each, for outputs of any size; the
    /// maps index the tables' rows, and a chunk's maps gather through [`Join::gather`]. Takes
    /// every input [`Join::run`] takes:
    /// * an equi-join without a filter: the chunked sort-merge join (the algorithm setting does
    ///   not apply; order as [`Algorithm::SortMerge`]);
    /// * a join with a filter, or a theta join: the theta chunks on the keys as equality
    ///   conjuncts of the filter (every key and filter type, nullable ones included, under the
    ///   join's NULL and NaN equality): sorted, mixed (the keys joined like an equi-join, the rest
    ///   a filter) or nested loop by the predicate's shape, in that path's order
    ///   ([`crate::theta`]); an explicit theta algorithm is honoured (`ThetaNestedLoop`: the
    ///   nested loop whatever the shape; `ThetaSorted`: the sorted path, whose chunks cover
    ///   INNER/LEFT/semi/anti joins, the nested loop's the others), an equi one does not apply.
    ///
    /// Example: left keys `[1, 2, 2]`, right keys `[2, 2, 3]`, INNER with a 1-byte budget: one
    /// pair a chunk, four chunks of the pairs (1, 0) (1, 1) (2, 0) (2, 1).
    pub fn chunks(&self, stream: &Stream, budget: ChunkBudget) -> Result<JoinChunks<JoinChunkSource<'a>>> {
        let inputs = self.inputs()?;
        if self.filter.is_none() && !inputs.left_keys.is_empty() && !self.algorithm.is_theta() {
            let (lk, rk) = keys::prepare(stream, &inputs.left_keys, &inputs.right_keys, self.options, true)?;
            let source = EquiChunkSource::new(stream, &lk.keys()?, &rk.keys()?, self.join_type, self.options)?;
            return JoinChunks::new(stream, JoinChunkSource::Equi(source), budget);
        }
        let theta = Join { algorithm: if self.algorithm.is_theta() { self.algorithm } else { Algorithm::Auto }, ..self.clone() };
        theta.choose_theta(&inputs)?;
        let low = self.lower_theta(stream, &[])?;
        let (left, right) = (std::sync::Arc::new(low.left), std::sync::Arc::new(low.right));
        #[cfg(feature = "testing")]
        let poison_sorted = self.options.testing.theta_poison_outputs;
        #[cfg(not(feature = "testing"))]
        let poison_sorted = false;
        let nested_loop = self.algorithm == Algorithm::ThetaNestedLoop;
        let source = crate::theta::ThetaChunkSource::new_with(stream, left.into(), right.into(), &low.pred, self.join_type, poison_sorted, nested_loop)?;
        JoinChunks::new(stream, JoinChunkSource::Theta(Box::new(source)), budget)
    }
}

/// Where [`Join::chunks`] takes its chunks from: the chunked equi-join, or a theta join's
/// prepared path (owning its device relations, which read the tables' columns in place).
pub enum JoinChunkSource<'a> {
    /// An equi-join without a filter.
    Equi(EquiChunkSource),
    /// A theta join, or a join with keys and a filter.
    Theta(Box<crate::theta::ThetaChunkSource<'a>>),
}

impl JoinChunkSource<'_> {
    /// The path: `"equi"`, or the theta chunks' (`"sorted"`, `"mixed"`, `"nested loop"`,
    /// `"whole"`).
    pub fn path(&self) -> &'static str {
        match self {
            JoinChunkSource::Equi(_) => "equi",
            JoinChunkSource::Theta(t) => t.path(),
        }
    }

    fn source(&self) -> &dyn ChunkSource<Output = GatherMaps> {
        match self {
            JoinChunkSource::Equi(e) => e,
            JoinChunkSource::Theta(t) => &**t,
        }
    }
}

impl ChunkSource for JoinChunkSource<'_> {
    type Output = GatherMaps;

    fn left_rows(&self) -> u64 {
        self.source().left_rows()
    }

    fn offsets(&self) -> gpujoin_device::DeviceView<'_, u64> {
        self.source().offsets()
    }

    fn bytes_per_row(&self) -> u64 {
        self.source().bytes_per_row()
    }

    fn produce(&self, stream: &Stream, range: &crate::chunked::ChunkRange) -> Result<GatherMaps> {
        self.source().produce(stream, range)
    }

    fn tail_rows(&self) -> u64 {
        self.source().tail_rows()
    }

    fn produce_tail(&self, stream: &Stream, range: std::ops::Range<u64>) -> Result<GatherMaps> {
        self.source().produce_tail(stream, range)
    }
}

struct Inputs<'a> {
    left_keys: Vec<ColumnView<'a>>,
    right_keys: Vec<ColumnView<'a>>,
    left_select: Vec<ColumnView<'a>>,
    right_select: Vec<ColumnView<'a>>,
    left_rows: usize,
    right_rows: usize,
}

/// A reason with a note on the keys' preparation appended (`"requested; 8-byte keys joined as
/// 32-bit offsets from 0 (span 9)"`).
fn noted(reason: String, note: Option<&str>) -> String {
    match note {
        Some(n) => format!("{reason}; {n}"),
        None => reason,
    }
}

/// The output name of a selected column: `left.` / `right.` in front where a column of that
/// name is selected on the other side too.
fn output_name(side: Side, name: &str, on_both_sides: bool) -> String {
    match (on_both_sides, side) {
        (false, _) => name.to_string(),
        (true, Side::Left) => format!("left.{name}"),
        (true, Side::Right) => format!("right.{name}"),
    }
}

/// The selected columns of both sides through the maps (left ones first; a name selected on both
/// sides is prefixed `left.` / `right.`).
pub(crate) fn materialize_sides(stream: &Stream, maps: &GatherMaps, left: &[(String, ColumnView<'_>)], right: &[(String, ColumnView<'_>)]) -> Result<Table> {
    let mut columns = Vec::new();
    for (side, cols, other) in [(Side::Left, left, right), (Side::Right, right, left)] {
        if cols.is_empty() {
            continue;
        }
        let map = maps.side(side).ok_or_else(|| Error::invalid(format!("a {:?} join has no {side:?} rows: select no {side:?} columns", maps.join_type())))?.cast::<u32>();
        for (name, c) in cols {
            let out = output_name(side, name, other.iter().any(|(o, _)| o == name));
            columns.push((out, crate::kernels::table::gather(stream, c, &map, maps.nullable(side))?));
        }
    }
    Table::new(columns)
}

#[allow(clippy::too_many_arguments)]
fn equi_maps(stream: &Stream, i: &Inputs<'_>, l: &TableView<'_>, r: &TableView<'_>, lk: &keys::PreparedKeys<'_>, rk: &keys::PreparedKeys<'_>, algorithm: Algorithm, jt: JoinType, options: JoinOptions) -> Result<(GatherMaps, Option<JoinStats>)> {
    Ok((match algorithm {
        Algorithm::SortedMerge => {
            crate::common::check_output_budget(stream, l, r, jt, options)?;
            sorted_merge(stream, i, jt, options)?
        }
        Algorithm::SortMerge(_) => crate::sort_merge::sort_merge_join(stream, l, r, jt, options)?,
        Algorithm::Interleave => crate::interleave::interleave_join(stream, l, r, jt, options)?,
        Algorithm::Hash => {
            let out = crate::hash_join::nphj_with(stream, l, r, jt, options)?;
            return Ok((out.maps, options.stats.then_some(out.stats)));
        }
        Algorithm::PartitionedHash(_) => {
            let out = crate::hash_join::partitioned_hash_join(stream, l, r, jt, options)?;
            return Ok((out.maps, options.stats.then_some(out.stats)));
        }
        Algorithm::IndexedNestedLoop => {
            crate::common::check_output_budget(stream, l, r, jt, options)?;
            use crate::indexed_nested_loop::SortedIndex;
            if keys::inlj_needs_ranks(l, r, options) {
                // Composite keys, NULL equal to NULL, NaN equal to NaN: one u32 match key a side
                // (`keys::match_keys`); equal keys, equal ranks, so the order is the same: left
                // rows in order, each one's index rows in row order, then the unmatched ones.
                let (ml, mr) = keys::match_keys(stream, l, r, options)?;
                let index = SortedIndex::build_owned(stream, Column::from_device_values(mr))?;
                index.join(stream, &Column::from_device_values(ml).view(), Side::Left, jt)?
            } else {
                let index_col = keys::single_view(rk)?;
                let probe = keys::single_view(lk)?;
                // Null keys match nothing here (NullEqualsNothing): null index rows are left out
                // of the index, null probe rows get no match; NaN (NanNeverEqual) likewise.
                let index = SortedIndex::build_with_validity(stream, index_col, rk.single_validity())?;
                index.join_with_validity(stream, &probe, lk.single_validity(), Side::Left, jt)?
            }
        }
        a => return Err(Error::invalid(format!("internal: {} is not an equi-join algorithm", a.name()))),
    }, None))
}

/// The wide join of prepared keys with payloads by `algorithm` (a clustered one, or `Auto`: the
/// paper's decision tree), its output a relation; an error, never another algorithm, when the
/// explicit one did not run.
fn clustered_join<'a>(stream: &Stream, l: (&'a TableView<'a>, &'a [ColumnView<'a>]), r: (&'a TableView<'a>, &'a [ColumnView<'a>]), jt: JoinType, algorithm: Algorithm, options: JoinOptions) -> Result<wide::WideJoinOutput> {
    let wa = algorithm.wide().unwrap_or(wide::Algorithm::Auto);
    // Auto without a selected column asks for the maps only (an explicit clustered algorithm
    // runs as asked, on no payloads).
    let output = if wa == wide::Algorithm::Auto && l.1.is_empty() && r.1.is_empty() { wide::Output::MapsOnly } else { wide::Output::Relation };
    let opts = wide::WideJoinOptions { keys: options, output };
    // The keys are prepared (compressed where they can be): not again.
    let out = wide::join_as_given(stream, &wide::Relation::of("left", l)?, &wide::Relation::of("right", r)?, jt, wa, opts)?;
    let ran = Algorithm::from_wide(out.algorithm);
    if algorithm != Algorithm::Auto && ran != algorithm {
        // The pre-checks should make this impossible; never substitute silently.
        return Err(Error::Unsupported { what: format!("the {} join", algorithm.name()), reason: format!("it ran as {}: {}", ran.name(), out.reason) });
    }
    Ok(out)
}

/// The inner pairs of a clustered join (SMJ-OM or PHJ-OM) of the prepared keys `l` and `r`:
/// each side's row ids travel through it as its one payload column, so its output rows are the
/// pairs, in its order.
///
/// Example: keys `[7, 5]` and `[5, 5, 9]`: the pairs (1, 0) and (1, 1).
fn clustered_pairs(stream: &Stream, l: &TableView<'_>, r: &TableView<'_>, i: &Inputs<'_>, algorithm: Algorithm, options: JoinOptions) -> Result<GatherMaps> {
    let (il, ir) = (crate::common::iota(stream, i.left_rows)?, crate::common::iota(stream, i.right_rows)?);
    let (pl, pr) = ([ColumnView::from_values(il.view())], [ColumnView::from_values(ir.view())]);
    let out = clustered_join(stream, (l, &pl), (r, &pr), JoinType::Inner, algorithm, options)?;
    let ids = |m: Option<Table>| m.and_then(|m| m.into_parts().1.into_iter().next()).and_then(|c| c.into_values::<u32>()).ok_or_else(|| Error::invalid("internal: the row ids did not come back from the clustered join"));
    Ok(GatherMaps::new(JoinType::Inner, ids(out.left)?, ids(out.right)?))
}

fn theta_size(stream: &Stream, low: &filter::Lowered, algorithm: Algorithm, jt: JoinType) -> Result<u64> {
    use crate::theta::nested_loop::{nested_loop_join_size_with, Strategy};
    match algorithm {
        Algorithm::ThetaSorted => crate::theta::sorted::sorted_theta_join_size(stream, &low.left.view(), &low.right.view(), &low.pred, jt),
        Algorithm::ThetaNestedLoop => nested_loop_join_size_with(stream, &low.left.view(), &low.right.view(), &low.pred, jt, Strategy::NestedLoop),
        _ => nested_loop_join_size_with(stream, &low.left.view(), &low.right.view(), &low.pred, jt, Strategy::Auto),
    }
}

/// The theta join's maps by `algorithm`; the test-only [`crate::TestingOptions`] of `options`
/// reach the sorted path (`theta_poison_outputs`).
fn theta_maps(stream: &Stream, low: &filter::Lowered, algorithm: Algorithm, jt: JoinType, options: JoinOptions) -> Result<GatherMaps> {
    use crate::theta::nested_loop::{nested_loop_join_with, Strategy};
    match algorithm {
        Algorithm::ThetaSorted => {
            #[cfg(feature = "testing")]
            if options.testing != crate::types::TestingOptions::DEFAULT {
                return crate::theta::sorted::SortedTesting::of(&options.testing).join(stream, &low.left.view(), &low.right.view(), &low.pred, jt);
            }
            let _ = options;
            crate::theta::sorted::sorted_theta_join(stream, &low.left.view(), &low.right.view(), &low.pred, jt)
        }
        Algorithm::ThetaNestedLoop => nested_loop_join_with(stream, &low.left.view(), &low.right.view(), &low.pred, jt, Strategy::NestedLoop),
        _ => nested_loop_join_with(stream, &low.left.view(), &low.right.view(), &low.pred, jt, Strategy::Auto),
    }
}

/// The inner theta join's aggregate by `algorithm` (an explicit one is honoured: the sorted path
/// for [`Algorithm::ThetaSorted`], the nested loop for the others); the test-only
/// [`crate::TestingOptions`] of `options` reach the sorted path (`theta_poison_outputs`,
/// `theta_aggregate_path`).
fn theta_aggregate(stream: &Stream, low: &filter::Lowered, algorithm: Algorithm, agg: Agg, column: Option<(Side, usize)>, options: JoinOptions) -> Result<AggValue> {
    match algorithm {
        Algorithm::ThetaSorted => {
            #[cfg(feature = "testing")]
            if options.testing != crate::types::TestingOptions::DEFAULT {
                return crate::theta::sorted::SortedTesting::of(&options.testing).aggregate(stream, &low.left.view(), &low.right.view(), &low.pred, agg, column);
            }
            let _ = options;
            crate::theta::sorted::sorted_theta_aggregate(stream, &low.left.view(), &low.right.view(), &low.pred, agg, column)
        }
        _ => crate::theta::nested_loop::nested_loop_aggregate(stream, &low.left.view(), &low.right.view(), &low.pred, agg, column),
    }
}

/// The sorted merge of the one key column of each side (checked sorted here); the test-only
/// [`crate::TestingOptions`] of `options` reach it (`force_general_merge_path`).
fn sorted_merge(stream: &Stream, i: &Inputs<'_>, jt: JoinType, options: JoinOptions) -> Result<GatherMaps> {
    let (a, b) = (&i.left_keys[0], &i.right_keys[0]);
    // The error naming the first unsorted side, by its descents (`None`: both sorted).
    let unsorted = || -> Result<Option<Error>> {
        for (side, c) in [("left", a), ("right", b)] {
            let d = crate::kernels::table::count_descents(stream, c)?;
            if d > 0 {
                return Ok(Some(Error::Unsupported { what: "the sorted merge join".into(), reason: format!("the {side} keys are not sorted ({d} descents)") }));
            }
        }
        Ok(None)
    };
    // The fused merge checks the order in its counting pass; the other paths by a pass first.
    let fused = options.merge_route() != crate::sort_merge::MergeRoute::General && jt.has_left_map() && jt.has_right_map();
    if !fused {
        if let Some(e) = unsorted()? {
            return Err(e);
        }
    }
    let err = || Error::invalid("misaligned key values");
    let merge = |m: Result<crate::sort_merge::CheckedMerge>| -> Result<GatherMaps> {
        match m? {
            crate::sort_merge::CheckedMerge::Maps(m) => Ok(m),
            crate::sort_merge::CheckedMerge::Unsorted => Err(unsorted()?.unwrap_or_else(|| Error::invalid("internal: the merge found unsorted keys that count no descents"))),
        }
    };
    fn go<K: crate::sort_merge::SortedKey>(stream: &Stream, a: &gpujoin_device::DeviceView<'_, K>, b: &gpujoin_device::DeviceView<'_, K>, jt: JoinType, fused: bool, options: JoinOptions) -> Result<crate::sort_merge::CheckedMerge> {
        use crate::sort_merge::CheckedMerge;
        if fused {
            return crate::sort_merge::sorted_merge_join_checked(stream, a, b, jt, options.merge_route());
        }
        #[cfg(feature = "testing")]
        if options.testing != crate::types::TestingOptions::DEFAULT {
            return crate::sort_merge::sorted_merge_join_with(stream, a, b, jt, options.testing).map(CheckedMerge::Maps);
        }
        let _ = options;
        crate::sort_merge::sorted_merge_join(stream, a, b, jt).map(CheckedMerge::Maps)
    }
    merge(match a.data_type() {
        DataType::Int32 | DataType::Date32 => go(stream, &a.typed::<i32>().ok_or_else(err)?, &b.typed::<i32>().ok_or_else(err)?, jt, fused, options),
        DataType::UInt32 => go(stream, &a.typed::<u32>().ok_or_else(err)?, &b.typed::<u32>().ok_or_else(err)?, jt, fused, options),
        DataType::UInt64 => go(stream, &a.typed::<u64>().ok_or_else(err)?, &b.typed::<u64>().ok_or_else(err)?, jt, fused, options),
        _ => go(stream, &a.typed::<i64>().ok_or_else(err)?, &b.typed::<i64>().ok_or_else(err)?, jt, fused, options),
    })
}

/// Whether the clustered gathers take a selected column as it is: a 4- or 8-byte type without a
/// validity bitmap (every other column is gathered by row id after the join).
fn clustered_as_is(c: &ColumnView<'_>) -> bool {
    use DataType::*;
    c.validity().is_none() && matches!(c.data_type(), Int32 | Date32 | UInt32 | Float32 | Float64 | UInt64 | Int64 | Date64 | Timestamp(_))
}

