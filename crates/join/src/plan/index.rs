//! Build once, probe many: a [`JoinIndex`] sorts one table by its key column once; every probe
//! with another table's key column is an indexed nested-loop join (binary search per probe row).
//!
//! Null keys (index or probe) follow SQL's `NullEqualsNothing`: a null key matches nothing.

use gpujoin_device::{Error, Result, Stream};

use super::{filter, materialize_sides, Algorithm, JoinOutput};
use crate::indexed_nested_loop::SortedIndex;
use crate::kernels::table::{validity_words, Cow};
use crate::maps::Side;
use crate::table::{DataType, TableView};
use crate::types::{JoinType, NanEquality, NullEquality};

/// A sorted index of one table's key column, reusable across probes.
///
/// Nullable keys are taken with SQL's `NullEqualsNothing` semantics (the only ones here; see
/// [`JoinIndex::null_equality`]): null rows of the indexed table are left out of the index and
/// match no probe row, null probe rows match no indexed row; both still appear as unmatched rows
/// where the join type keeps those (`Left` keeps every probe row, with NULLs on the index side).
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
    index: SortedIndex<'static>,
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
        let index = SortedIndex::build_owned_with_validity(stream, column, validity.as_ref().map(Cow::view))?;
        Ok(JoinIndex { table, key: key.to_string(), key_type, index })
    }

    /// Rows of the indexed table.
    pub fn rows(&self) -> usize {
        self.table.rows()
    }

    /// The equality NaN keys have here (always `NanNeverEqual`).
    pub fn nan_equality(&self) -> NanEquality {
        NanEquality::NanNeverEqual
    }

    /// The equality null keys have here (always `NullEqualsNothing`: a null key matches
    /// nothing, on either side).
    pub fn null_equality(&self) -> NullEquality {
        NullEquality::NullEqualsNothing
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
        let column = filter::column_values(stream, on, &c)?;
        let validity = validity_words(stream, &c)?;
        let maps = self.index.join_with_validity(stream, &column, validity.as_ref().map(Cow::view), Side::Left, join_type)?;
        let pick = |t: &TableView<'a>, names: &[&str]| -> Result<Vec<(String, crate::table::ColumnView<'a>)>> { names.iter().map(|n| Ok((n.to_string(), t.column(n)?))).collect() };
        let table = materialize_sides(stream, &maps, &pick(&probe, select_probe)?, &pick(&self.table, select_index)?)?;
        Ok(JoinOutput { rows: maps.rows(), maps: Some(maps), table, algorithm: Algorithm::IndexedNestedLoop, reason: "a prebuilt index".into(), stats: None })
    }
}

fn check_key(name: &str, t: DataType) -> Result<()> {
    if matches!(t, DataType::Decimal128(..)) {
        return Err(Error::Unsupported { what: format!("an index on column {name}"), reason: "Decimal128 keys cannot be indexed yet".into() });
    }
    Ok(())
}
