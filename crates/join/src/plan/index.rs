//! Build once, probe many: a [`JoinIndex`] sorts one table by its key column once; every probe
//! with another table's key column is an indexed nested-loop join (binary search per probe row).
//!
//! Null keys (index or probe) follow SQL's `NullEqualsNothing` (a null key matches nothing) and
//! NaN keys `NanNeverEqual`, unless set otherwise ([`JoinIndex::with_null_equality`],
//! [`JoinIndex::with_nan_equality`]).

use gpujoin_device::{Error, Result, Stream};

use super::{filter, keys, materialize_sides, Algorithm, JoinOutput};
use crate::indexed_nested_loop::SortedIndex;
use crate::kernels::table::{validity_words, Cow};
use crate::maps::Side;
use crate::table::{Column, DataType, TableView};
use crate::types::{JoinOptions, JoinType, NanEquality, NullEquality};

/// A sorted index of one table's key column, reusable across probes.
///
/// Nullable keys are taken with SQL's `NullEqualsNothing` semantics by default (see
/// [`JoinIndex::null_equality`]): null rows of the indexed table are left out of the index and
/// match no probe row, null probe rows match no indexed row; both still appear as unmatched rows
/// where the join type keeps those (`Left` keeps every probe row, with NULLs on the index side).
/// Float keys compare as IEEE by default (`NanNeverEqual`: NaN rows are left out of the index).
///
/// With `NullEqualsNull` ([`JoinIndex::with_null_equality`]) where either key column is
/// nullable, or `NanEqualsNan` ([`JoinIndex::with_nan_equality`]) on float keys, a probe joins
/// both tables' keys as ranks instead (one `u32` a side: the dense rank of the key among both
/// tables' rows, as [`super::Join`] does for the indexed nested loop) and indexes the indexed
/// table's ranks for that probe: correct, in the same output order, but the prebuilt index is
/// not reused by such probes (its reason says so).
///
/// ```no_run
/// use gpujoin_join::plan::JoinIndex;
/// use gpujoin_join::table::{HostColumn, HostTable, Table};
/// use gpujoin_join::JoinType;
/// # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
/// let dim = Table::upload(s, &HostTable::new(vec![("id", HostColumn::utf8(["a", "b"])), ("w", HostColumn::from_values(vec![1.5f32, 2.5]))])?)?;
/// let index = JoinIndex::build(s, &dim, "id")?;                 // sorted once
/// for day in ["mon", "tue"] {
///     let facts = Table::upload(s, &HostTable::new(vec![("k", HostColumn::utf8(["b", "b", "c"]))])?)?;
///     let out = index.probe(s, &facts, "k", JoinType::Left, &["k"], &["w"])?; // 3 rows: w = 2.5, 2.5, NULL
///     # let _ = (day, out);
/// }
/// # Ok(()) }
/// ```
pub struct JoinIndex<'a> {
    table: TableView<'a>,
    key: String,
    key_type: DataType,
    index: SortedIndex<'a>,
    nulls: NullEquality,
    nans: NanEquality,
}

impl<'a> JoinIndex<'a> {
    /// Sorts `table` by its column `key`: any type but `Decimal128`; float keys compare as IEEE
    /// (NaN matches nothing: NaN rows are left out of the index); null keys match nothing (null
    /// rows are left out of the index too).
    pub fn build(stream: &Stream, table: impl Into<TableView<'a>>, key: &str) -> Result<JoinIndex<'a>> {
        let table = table.into();
        let c = table.column(key)?;
        check_key(key, c.data_type())?;
        let column = filter::column_values(stream, key, &c)?;
        let key_type = c.data_type();
        let validity = validity_words(stream, &c)?;
        let index = SortedIndex::build_from(stream, column, validity.as_ref().map(Cow::view))?;
        Ok(JoinIndex { table, key: key.to_string(), key_type, index, nulls: NullEquality::NullEqualsNothing, nans: NanEquality::NanNeverEqual })
    }

    /// Rows of the indexed table.
    pub fn rows(&self) -> usize {
        self.table.rows()
    }

    /// The equality NaN keys have here (`NanNeverEqual` unless set by
    /// [`JoinIndex::with_nan_equality`]).
    pub fn nan_equality(&self) -> NanEquality {
        self.nans
    }

    /// The equality null keys have here (`NullEqualsNothing` unless set by
    /// [`JoinIndex::with_null_equality`]: a null key matches nothing, on either side).
    pub fn null_equality(&self) -> NullEquality {
        self.nulls
    }

    /// The same index with another null equality for its probes (`NullEqualsNull` with a
    /// nullable key on either side: such probes join ranks, see [`JoinIndex`]).
    pub fn with_null_equality(mut self, e: NullEquality) -> JoinIndex<'a> {
        self.nulls = e;
        self
    }

    /// The same index with another NaN equality for its probes (`NanEqualsNan` on float keys:
    /// such probes join ranks, see [`JoinIndex`]; `-0.0 == 0.0` always).
    pub fn with_nan_equality(mut self, e: NanEquality) -> JoinIndex<'a> {
        self.nans = e;
        self
    }

    /// Joins `probe` (the left side) with the indexed table (the right side) on
    /// `probe.on = index.key`, materializing the selected columns (left ones first, as
    /// [`super::Join`] does). Output order: left row order; within a left row, the indexed rows in
    /// key order, then row order.
    pub fn probe(&self, stream: &Stream, probe: impl Into<TableView<'a>>, on: &str, join_type: JoinType, select_probe: &[&str], select_index: &[&str]) -> Result<JoinOutput> {
        let probe = probe.into();
        let c = probe.column(on)?;
        check_key(on, c.data_type())?;
        if !c.data_type().is_comparable_with(self.key_type) {
            return Err(Error::TypeMismatch { what: format!("probe key {on} and index key {}", self.key), left: c.data_type().to_string(), right: self.key_type.to_string() });
        }
        let indexed = self.table.column(&self.key)?;
        let nulls_equal = self.nulls == NullEquality::NullEqualsNull && (c.validity().is_some() || indexed.validity().is_some());
        let nans_equal = self.nans == NanEquality::NanEqualsNan && c.data_type().is_float();
        let (maps, reason) = if nulls_equal || nans_equal {
            // Both tables' keys as ranks (the index leaves null and NaN rows out), indexed afresh.
            let opts = JoinOptions { null_equality: self.nulls, nan_equality: self.nans, ..JoinOptions::DEFAULT };
            let (lk, rk) = keys::prepare(stream, &[c], &[indexed], opts, false)?;
            let (ml, mr) = keys::match_keys(stream, &lk.keys()?, &rk.keys()?, opts)?;
            drop((lk, rk));
            let index = SortedIndex::build_owned(stream, Column::from_device_values(mr))?;
            let why = if nulls_equal { "NULL equals NULL" } else { "NaN equals NaN" };
            (index.join(stream, &Column::from_device_values(ml).view(), Side::Left, join_type)?, format!("keys joined as ranks ({why}): both tables' keys ranked and indexed for this probe, not the prebuilt index"))
        } else {
            let column = filter::column_values(stream, on, &c)?;
            let validity = validity_words(stream, &c)?;
            (self.index.join_with_validity(stream, &column.view(), validity.as_ref().map(Cow::view), Side::Left, join_type)?, "a prebuilt index".to_string())
        };
        let pick = |t: &TableView<'a>, names: &[&str]| -> Result<Vec<(String, crate::table::ColumnView<'a>)>> { names.iter().map(|n| Ok((n.to_string(), t.column(n)?))).collect() };
        let table = materialize_sides(stream, &maps, &pick(&probe, select_probe)?, &pick(&self.table, select_index)?)?;
        Ok(JoinOutput { rows: maps.rows(), maps: Some(maps), table, algorithm: Algorithm::IndexedNestedLoop, reason, stats: None })
    }
}

fn check_key(name: &str, t: DataType) -> Result<()> {
    if matches!(t, DataType::Decimal128(..)) {
        return Err(Error::Unsupported { what: format!("an index on column {name}"), reason: "Decimal128 keys cannot be indexed yet".into() });
    }
    Ok(())
}
