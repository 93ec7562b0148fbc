//! [`Join::many`]: the interleave join of 2 to 16 tables on the front door.

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};

use super::{keys, Join};
use crate::table::{ColumnView, TableView};
use crate::types::{JoinOptions, NanEquality, NullEquality, RowId, MAX_KEY_COLUMNS};

/// The most tables [`Join::many`] takes (the interleave join's table id has 4 bits).
pub const MAX_TABLES: usize = 16;

/// An inner join of 2 to [`MAX_TABLES`] tables on equal keys in every table, by the interleave
/// join (seed 001, "more than two tables"), built by [`Join::many`] and run by
/// [`ManyJoin::run`].
#[derive(Clone)]
pub struct ManyJoin<'a> {
    tables: Vec<(TableView<'a>, Vec<String>)>,
    options: JoinOptions,
}

/// What [`ManyJoin::run`] returns.
pub struct ManyOutput {
    /// Output rows: one for each combination of one row a table whose keys are all equal.
    pub rows: u64,
    /// One gather map a table, in the order the tables were given, each `rows` long: output row
    /// `k` joins row `maps[t][k]` of table `t` (never [`RowId::NONE`]: the join is inner).
    pub maps: Vec<DeviceBuffer<RowId>>,
}

impl<'a> Join<'a> {
    /// The inner join of 2 to [`MAX_TABLES`] tables, each with its key columns (as many in every
    /// table, of comparable types column by column): an output row is one row of each table,
    /// all with equal keys (SQL semantics by default: NULL keys match nothing, NaN matches NaN;
    /// see [`ManyJoin::null_equality`], [`ManyJoin::nan_equality`]). Every key type of the two-table
    /// join is taken, composite keys of up to [`MAX_KEY_COLUMNS`] prepared columns included (a
    /// `Decimal128` takes two; strings are joined as ranks equal across every table), prepared
    /// as [`Join`] prepares them but never compressed. One pass: the tables are concatenated
    /// with a table id, sorted by key, and every key that all tables hold expands into the
    /// product of its rows.
    ///
    /// Output order: by key (keys wider than the interleave join packs exactly: by their hash);
    /// within a key, the row tuples in order of table 0's row, then table 1's, ..., the last
    /// table's varying fastest.
    ///
    /// Errors, before any device work: fewer than 2 or more than [`MAX_TABLES`] tables, a table
    /// without key columns or with another number of them than table 0
    /// ([`Error::InvalidArgument`]); an unknown column ([`Error::UnknownColumn`]); a key column
    /// whose type cannot be compared with table 0's ([`Error::TypeMismatch`], naming both
    /// columns); a composite key of more than [`MAX_KEY_COLUMNS`] prepared columns
    /// ([`Error::Unsupported`], naming the columns); a table of more than [`RowId::MAX_ROWS`]
    /// rows ([`Error::TooLarge`]).
    ///
    /// Example: keys `[1, 2, 2]`, `[2, 3, 2]` and `[2, 1]`: key 2 is in all three tables (key 1
    /// is not in the second), so 2 x 2 x 1 = 4 rows: `(1, 0, 0)`, `(1, 2, 0)`, `(2, 0, 0)`,
    /// `(2, 2, 0)`.
    ///
    /// ```no_run
    /// use gpujoin_join::plan::Join;
    /// use gpujoin_join::table::{HostColumn, HostTable, Table};
    /// # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
    /// let table = |keys: Vec<i32>| Table::upload(s, &HostTable::new(vec![("k", HostColumn::from_values(keys))])?);
    /// let (a, b, c) = (table(vec![1, 2, 2])?, table(vec![2, 3, 2])?, table(vec![2, 1])?);
    /// let out = Join::many(&[(a.view(), &["k"]), (b.view(), &["k"]), (c.view(), &["k"])]).run(s)?;
    /// assert_eq!(out.rows, 4);
    /// let rows = |t: usize| -> Vec<Option<u32>> { out.maps[t].to_vec().unwrap().iter().map(|r| r.get()).collect() };
    /// assert_eq!(rows(0), [Some(1), Some(1), Some(2), Some(2)]);
    /// assert_eq!(rows(1), [Some(0), Some(2), Some(0), Some(2)]);
    /// assert_eq!(rows(2), [Some(0); 4]);
    /// # Ok(()) }
    /// ```
    pub fn many(tables: &[(TableView<'a>, &[&str])]) -> ManyJoin<'a> {
        ManyJoin { tables: tables.iter().map(|(t, on)| (t.clone(), on.iter().map(|s| s.to_string()).collect())).collect(), options: JoinOptions::DEFAULT }
    }
}

impl<'a> ManyJoin<'a> {
    /// One more table and its key columns.
    pub fn table(mut self, table: impl Into<TableView<'a>>, on: &[&str]) -> ManyJoin<'a> {
        self.tables.push((table.into(), on.iter().map(|s| s.to_string()).collect()));
        self
    }

    /// Whether NULL keys match each other.
    pub fn null_equality(mut self, e: NullEquality) -> ManyJoin<'a> {
        self.options.null_equality = e;
        self
    }

    /// Whether NaN keys match each other.
    pub fn nan_equality(mut self, e: NanEquality) -> ManyJoin<'a> {
        self.options.nan_equality = e;
        self
    }

    /// Paths forced for tests ([`crate::TestingOptions`]: `hash_mask`). Only with the feature
    /// `testing`.
    #[cfg(feature = "testing")]
    pub fn testing(mut self, t: crate::types::TestingOptions) -> ManyJoin<'a> {
        self.options.testing = t;
        self
    }

    /// The key columns of every table, checked (no device work).
    fn key_columns(&self) -> Result<Vec<Vec<ColumnView<'a>>>> {
        let n = self.tables.len();
        if !(2..=MAX_TABLES).contains(&n) {
            return Err(Error::invalid(format!("{n} tables: the interleave join of many tables takes 2 to {MAX_TABLES}")));
        }
        let first = &self.tables[0].1;
        for (t, (_, on)) in self.tables.iter().enumerate() {
            if on.is_empty() {
                return Err(Error::invalid(format!("table {t} has no key columns: give each table its key columns")));
            }
            if on.len() != first.len() {
                return Err(Error::invalid(format!("table 0 has {} key columns and table {t} {}: give every table as many", first.len(), on.len())));
            }
        }
        let cols = self.tables.iter().map(|(t, on)| on.iter().map(|c| t.column(c)).collect::<Result<Vec<_>>>()).collect::<Result<Vec<_>>>()?;
        for (t, (table, on)) in self.tables.iter().enumerate() {
            for (c, col) in cols[t].iter().enumerate() {
                let want = cols[0][c].data_type();
                if !want.is_comparable_with(col.data_type()) {
                    return Err(Error::TypeMismatch {
                        what: format!("key column {c} of table 0 ({}) and of table {t} ({})", first[c], on[c]),
                        left: want.to_string(),
                        right: col.data_type().to_string(),
                    });
                }
            }
            if table.rows() as u64 > RowId::MAX_ROWS {
                return Err(Error::too_large(format!("rows of table {t}"), table.rows() as u64, RowId::MAX_ROWS));
            }
        }
        let words: usize = cols[0].iter().map(|c| keys::words(c.data_type())).sum();
        if words > MAX_KEY_COLUMNS {
            let named: Vec<String> = first.iter().zip(&cols[0]).map(|(n, c)| format!("{n} ({})", c.data_type())).collect();
            return Err(Error::Unsupported {
                what: format!("a composite key of columns {}", named.join(", ")),
                reason: format!("it prepares as {words} key columns (a Decimal128 takes 2); at most {MAX_KEY_COLUMNS} are supported"),
            });
        }
        Ok(cols)
    }

    /// Runs the join: one map a table.
    pub fn run(&self, stream: &Stream) -> Result<ManyOutput> {
        let cols = self.key_columns()?;
        let prepared = keys::prepare_many(stream, &cols)?;
        let keys = prepared.iter().map(|p| p.keys()).collect::<Result<Vec<_>>>()?;
        let maps = crate::interleave::interleave_join_many(stream, &keys, self.options)?;
        Ok(ManyOutput { rows: maps.first().map_or(0, |m| m.len() as u64), maps })
    }
}
