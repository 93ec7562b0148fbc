//! The one key preparation of the front door: every key column of a [`TableView`] becomes a
//! column of the key types the equi-join algorithms compare (`i32/i64/u32/u64/f32/f64` with an
//! `u32`-word validity), borrowed where the layout already is one:
//!
//! | key type | prepared as |
//! |---|---|
//! | `Int32`, `Date32` / `Int64`, `Date64`, `Timestamp` | the values, borrowed (`i32` / `i64`; a single 8-byte column may be compressed, below) |
//! | `UInt32` / `UInt64`, `Float32` / `Float64` | the values, borrowed (`UInt64`: as `Int64`) |
//! | `Int8`, `Int16` / `UInt8`, `UInt16`, `Boolean` | widened to `i32` / `u32` |
//! | `Decimal128` | two columns: the high `i64` and the low `u64` halves |
//! | `Utf8`, `LargeUtf8` | exact dense ranks (`u32`) of both sides' strings together: equal strings, equal ranks, in byte order |
//!
//! Example: left `Utf8` keys `["b", "a", "b"]` and right `["c", "b"]` prepare as ranks
//! `[1, 0, 1]` and `[2, 1]`.
//!
//! Key compression: a single key column prepared as 8-byte integers (`Int64`, `UInt64`,
//! `Date64`, `Timestamp`) whose valid keys on both sides span less than 2^32 is then joined as
//! the `u32` offsets `key - min` (`crate::keys::range`: one reduction a side, one host sync), so
//! that every algorithm takes its 4-byte path; equality and order are kept, validity too, and the
//! selected columns are gathered from the original columns. Left `Int64` keys `[-5, 7]` and right
//! `[7, -3]` are joined as `[0, 12]` and `[12, 2]`; the join's reason says so.

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};

use crate::kernels::table::{self as kernels, Cow};
use crate::keys::range::{self, Outcome};
use crate::table::{ColumnView, DataType, TableView};
use crate::types::{JoinOptions, MAX_KEY_COLUMNS};

/// One prepared key column: its values (rows `0..n`) as the kernel key type `data_type`
/// (`Int32`, `Int64`, `UInt32`, `UInt64`, `Float32` or `Float64`) and its validity words.
struct Prepared<'a> {
    data_type: DataType,
    values: Cow<'a, u8>,
    validity: Option<Cow<'a, u32>>,
}

impl<'a> Prepared<'a> {
    /// A column the preparation computed.
    fn owned<T: gpujoin_device::Pod>(data_type: DataType, values: DeviceBuffer<T>, validity: Option<Cow<'a, u32>>) -> Prepared<'a> {
        Prepared { data_type, values: Cow::Owned(values.into_bytes()), validity }
    }

    fn view(&self) -> Result<ColumnView<'_>> {
        let values = self.values.view();
        let rows = values.len() / self.data_type.byte_width().unwrap_or(1);
        ColumnView::new(self.data_type, rows, 0, values, None, self.validity.as_ref().map(|v| v.view().as_bytes()))
    }
}

/// One side's prepared key columns.
pub(crate) struct PreparedKeys<'a> {
    columns: Vec<Prepared<'a>>,
    /// How 8-byte integer keys were prepared (compressed or kept), for the join's reason; `None`
    /// for other keys.
    note: Option<String>,
}

impl PreparedKeys<'_> {
    /// The keys as the algorithms take them ([`crate::keys::check_keys`]).
    pub(crate) fn keys(&self) -> Result<TableView<'_>> {
        crate::keys::key_view(self.columns.iter().map(Prepared::view).collect::<Result<Vec<_>>>()?)
    }
}

/// How many prepared key columns a key column of `t` takes.
pub(crate) fn words(t: DataType) -> usize {
    if matches!(t, DataType::Decimal128(..)) {
        2
    } else {
        1
    }
}

/// What a key column of `t` is prepared as, for `explain`.
pub(crate) fn describe(t: DataType) -> &'static str {
    use DataType::*;
    match t {
        Int64 | Date64 | Timestamp(_) | UInt64 => "the values (a single key column: 32-bit offsets from the smallest key where both sides' keys span less than 2^32)",
        Int32 | Date32 | UInt32 | Float32 | Float64 => "the values",
        Int8 | Int16 => "widened to i32",
        UInt8 | UInt16 | Boolean => "widened to u32",
        Decimal128(..) => "high i64 and low u64 halves",
        Utf8 | LargeUtf8 => "dense ranks of both sides' strings",
    }
}

/// The column's values read in place as the key type `t` (rows `0..n`: its offset applied).
fn borrowed<'a, T: gpujoin_device::Pod>(v: &ColumnView<'a>, t: DataType, validity: Option<Cow<'a, u32>>) -> Result<Prepared<'a>> {
    let values = v.typed::<T>().ok_or_else(|| Error::invalid(format!("a {} key column whose values buffer is misaligned", v.data_type())))?;
    Ok(Prepared { data_type: t, values: Cow::Borrowed(values.as_bytes()), validity })
}

fn prepare_one<'a>(stream: &Stream, v: &ColumnView<'a>, out: &mut Vec<Prepared<'a>>) -> Result<()> {
    use DataType::*;
    let validity = kernels::validity_words(stream, v)?;
    let prepared = match v.data_type() {
        Int32 | Date32 => borrowed::<i32>(v, Int32, validity)?,
        Int64 | Date64 | Timestamp(_) => borrowed::<i64>(v, Int64, validity)?,
        UInt32 => borrowed::<u32>(v, UInt32, validity)?,
        UInt64 => borrowed::<u64>(v, UInt64, validity)?,
        Float32 => borrowed::<f32>(v, Float32, validity)?,
        Float64 => borrowed::<f64>(v, Float64, validity)?,
        Int8 | Int16 => Prepared::owned(Int32, kernels::widen(stream, v)?, validity),
        UInt8 | UInt16 | Boolean => Prepared::owned(UInt32, kernels::widen(stream, v)?, validity),
        Decimal128(..) => {
            let (hi, lo) = kernels::split_decimal(stream, v)?;
            out.push(Prepared::owned(Int64, hi, kernels::validity_words(stream, v)?));
            Prepared::owned(UInt64, lo, validity)
        }
        Utf8 | LargeUtf8 => unreachable!("strings are prepared in pairs"),
    };
    out.push(prepared);
    Ok(())
}

/// Prepares the key columns of both sides (already checked: as many on each side, comparable
/// types); with `compress`, a single 8-byte integer column becomes 32-bit offsets where both
/// sides' valid keys span less than 2^32 (see the module docs). Errors: more than
/// [`MAX_KEY_COLUMNS`] prepared columns; device errors.
pub(crate) fn prepare<'a>(stream: &Stream, left: &[ColumnView<'a>], right: &[ColumnView<'a>], opts: JoinOptions, compress: bool) -> Result<(PreparedKeys<'a>, PreparedKeys<'a>)> {
    let total: usize = left.iter().map(|c| words(c.data_type())).sum();
    if total > MAX_KEY_COLUMNS {
        return Err(Error::Unsupported {
            what: format!("a composite key of {} columns", left.len()),
            reason: format!("it prepares as {total} key words (a Decimal128 takes 2); at most {MAX_KEY_COLUMNS} are supported"),
        });
    }
    let (mut l, mut r) = (Vec::new(), Vec::new());
    for (a, b) in left.iter().zip(right) {
        if a.data_type().is_string() {
            let (ra, rb, _) = kernels::string_ranks(stream, a, b)?;
            l.push(Prepared::owned(DataType::UInt32, ra, kernels::validity_words(stream, a)?));
            r.push(Prepared::owned(DataType::UInt32, rb, kernels::validity_words(stream, b)?));
        } else {
            prepare_one(stream, a, &mut l)?;
            prepare_one(stream, b, &mut r)?;
        }
    }
    let (mut l, mut r) = (PreparedKeys { columns: l, note: None }, PreparedKeys { columns: r, note: None });
    if !compress {
        return Ok((l, r));
    }
    let outcome = range::compress(stream, &l.keys()?, &r.keys()?, opts)?;
    match outcome {
        Outcome::Compressed(c) => {
            l.note = Some(c.note());
            (l.columns[0].data_type, l.columns[0].values) = (DataType::UInt32, Cow::Owned(c.left.into_bytes()));
            (r.columns[0].data_type, r.columns[0].values) = (DataType::UInt32, Cow::Owned(c.right.into_bytes()));
        }
        Outcome::TooWide(range) => l.note = Some(range::wide_note(range)),
        Outcome::NotEligible => {}
    }
    Ok((l, r))
}

/// Prepares the key columns of 2 or more tables for a join of all of them (already checked: as
/// many columns in each, comparable types column by column, at most [`MAX_KEY_COLUMNS`] prepared
/// columns), the same way as [`prepare`] without key compression: every table's column `c` is
/// prepared as the same key type, and string keys become dense ranks that are equal across all
/// tables exactly where the strings are equal ([`string_ranks_many`]).
pub(crate) fn prepare_many<'a>(stream: &Stream, tables: &[Vec<ColumnView<'a>>]) -> Result<Vec<PreparedKeys<'a>>> {
    let mut out: Vec<Vec<Prepared<'a>>> = tables.iter().map(|_| Vec::new()).collect();
    for c in 0..tables.first().map_or(0, Vec::len) {
        let cols: Vec<ColumnView<'a>> = tables.iter().map(|t| t[c]).collect();
        if cols[0].data_type().is_string() {
            let ranks = string_ranks_many(stream, &cols)?;
            for ((o, r), v) in out.iter_mut().zip(ranks).zip(&cols) {
                o.push(Prepared::owned(DataType::UInt32, r, kernels::validity_words(stream, v)?));
            }
        } else {
            for (o, v) in out.iter_mut().zip(&cols) {
                prepare_one(stream, v, o)?;
            }
        }
    }
    Ok(out.into_iter().map(|columns| PreparedKeys { columns, note: None }).collect())
}

/// String keys of several tables as `u32` keys that are equal exactly where the strings are
/// equal, in every pair of tables: tables 0 and 1 get their dense ranks among both
/// ([`kernels::string_ranks`]); every further table `t` gets, for each row, the rank that table
/// 0's rows of the same string got, and `u32::MAX` (above every rank) where table 0 has no such
/// string (one rank pass of tables 0 and `t`, a scatter of table 0's ranks into a table by those
/// ranks, and a gather). A row whose string is not in table 0 can match no row of table 0, so
/// such rows never join in a join of every table; null rows get the key of their bytes (the
/// validity decides).
///
/// Example: `["b", "a"]`, `["a", "c"]`, `["c", "b"]` become `[1, 0]`, `[0, 2]` and
/// `[u32::MAX, 1]`.
pub(crate) fn string_ranks_many(stream: &Stream, cols: &[ColumnView<'_>]) -> Result<Vec<DeviceBuffer<u32>>> {
    if cols.len() < 2 {
        return Err(Error::invalid("internal: string ranks of fewer than two tables"));
    }
    let (r0, r1, _) = kernels::string_ranks(stream, &cols[0], &cols[1])?;
    let mut out = Vec::with_capacity(cols.len());
    for c in &cols[2..] {
        let (a, b, distinct) = kernels::string_ranks(stream, &cols[0], c)?;
        // table[x] = table 0's key (r0) of the string ranked x among tables 0 and t.
        let mut table = stream.alloc::<u32>(distinct as usize)?;
        if !table.is_empty() {
            gpujoin_primitives::fill(stream, &mut table.view_mut(), u32::MAX)?;
        }
        if !a.is_empty() {
            gpujoin_primitives::scatter(stream, &r0.view(), &a.view(), &mut table.view_mut())?;
        }
        out.push(if b.is_empty() { b } else { gpujoin_primitives::gather(stream, &table.view(), &b.view(), u32::MAX)? });
    }
    out.insert(0, r1);
    out.insert(0, r0);
    Ok(out)
}

impl PreparedKeys<'_> {
    /// How the keys were prepared, where a join's reason should say it (8-byte integer keys:
    /// compressed to 32-bit offsets, or kept because they span 2^32 or more).
    pub(crate) fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// The validity words of the first (for a single key: the only) prepared key column.
    pub(crate) fn single_validity(&self) -> Option<gpujoin_device::DeviceView<'_, u32>> {
        self.columns[0].validity.as_ref().map(Cow::view)
    }
}

/// One `u32` match key per row of each side whose equality is exactly the join's key equality
/// (for the algorithms that join one key column without nulls: the clustered gathers and the
/// indexed nested loop, [`super::Join`]'s "keys joined as ranks"). Rows that can match (every
/// key valid or NULL under `NullEqualsNull`; no NaN under `NanNeverEqual`) get the dense rank
/// of their full key among both sides' matchable rows (`crate::keys::dense_ranks`: composite
/// keys equal where every column is equal or both NULL under `NullEqualsNull`; all NaNs one key
/// under `NanEqualsNan`; `-0.0 == 0.0`). With `m` matchable rows the ranks are below `m`; the left
/// rows that can match nothing get `m`, the right ones `m + 1`, values no row of the other side
/// has, so they match nothing and remain unmatched rows where the join type keeps them
/// (`dense_ranks` takes at most `u32::MAX - 1` rows, so `m + 1` fits `u32`).
///
/// Example: left `Int32` keys `[7, NULL, 7, 3]`, right `[3, NULL, 9]` under `NullEqualsNothing`
/// (5 matchable rows) are joined as `[1, 5, 1, 0]` and `[0, 6, 2]`; under `NullEqualsNull`
/// the NULLs share a rank (`[1, 3, 1, 0]` and `[0, 3, 2]`: ranks follow the key images' order,
/// NULLs after the valid keys).
pub(crate) fn match_keys(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, opts: JoinOptions) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>)> {
    use crate::common::rows_where;
    use crate::keys::{dense_ranks, images, KeyPlan};
    crate::keys::check_comparable(left, right)?;
    let plan = KeyPlan::new(left, right, opts, 64);
    let (il, ir) = (images(stream, left, plan)?, images(stream, right, plan)?);
    let ml = rows_where(stream, &il.never_match.view(), false, None)?;
    let mr = rows_where(stream, &ir.never_match.view(), false, None)?;
    let (kl, kr, _bits) = dense_ranks(stream, &il, &ml.view(), &ir, &mr.view())?;
    drop((il, ir));
    let (never_left, never_right) = sentinels(ml.len(), mr.len())?;
    let place = |ranks: DeviceBuffer<u32>, rows: DeviceBuffer<u32>, n: usize, never: u32| -> Result<DeviceBuffer<u32>> {
        if rows.len() == n {
            return Ok(ranks); // every row can match: the ranks are in row order already
        }
        let mut out = stream.alloc::<u32>(n)?;
        gpujoin_primitives::fill(stream, &mut out.view_mut(), never)?;
        gpujoin_primitives::scatter(stream, &ranks.view(), &rows.view(), &mut out.view_mut())?;
        Ok(out)
    };
    Ok((place(kl, ml, left.rows(), never_left)?, place(kr, mr, right.rows(), never_right)?))
}

/// The match keys of the left and right rows that can match nothing, above every rank of the
/// `left + right` matchable rows (ranks are below their count): `(m, m + 1)`.
pub(crate) fn sentinels(left: usize, right: usize) -> Result<(u32, u32)> {
    let m = left as u64 + right as u64;
    if m + 1 > u32::MAX as u64 {
        return Err(Error::too_large("rows of both sides whose keys are joined as ranks", m, u32::MAX as u64 - 1));
    }
    Ok((m as u32, m as u32 + 1))
}

/// Whether the indexed nested loop joins these prepared keys as ranks ([`match_keys`]): it
/// indexes one key column, leaving null rows (of a validity bitmap) and NaN rows out, so it
/// takes other keys as ranks: a composite key (a `Decimal128` prepares as two columns), nullable
/// keys under `NullEqualsNull`, float keys under `NanEqualsNan`.
pub(crate) fn inlj_needs_ranks(left: &TableView<'_>, right: &TableView<'_>, opts: JoinOptions) -> bool {
    use crate::types::{NanEquality, NullEquality};
    let (l, r) = (left.columns(), right.columns());
    l.len() != 1
        || ((l[0].validity().is_some() || r[0].validity().is_some()) && opts.null_equality == NullEquality::NullEqualsNull)
        || (l[0].data_type().is_float() && opts.nan_equality == NanEquality::NanEqualsNan)
}

/// A prepared single key column as a table column read in place (for the indexed nested loop's
/// index and probe).
pub(crate) fn single_view<'k>(keys: &'k PreparedKeys<'_>) -> Result<ColumnView<'k>> {
    Ok(keys.columns[0].view()?.without_validity())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_sit_above_every_rank() {
        // 3 + 4 rows that can match: ranks 0..7 at most; left 7, right 8.
        assert_eq!(sentinels(3, 4).unwrap(), (7, 8));
        assert_eq!(sentinels(0, 0).unwrap(), (0, 1));
        // The largest count dense_ranks takes (u32::MAX - 1 rows) still leaves room for both.
        let m = u32::MAX as usize - 1;
        assert_eq!(sentinels(m - 5, 5).unwrap(), (u32::MAX - 1, u32::MAX));
        assert!(matches!(sentinels(m, 1), Err(Error::TooLarge { .. })));
        assert!(matches!(sentinels(u32::MAX as usize, u32::MAX as usize), Err(Error::TooLarge { .. })));
    }

    #[test]
    fn words_and_descriptions_of_every_type() {
        for t in DataType::EXAMPLES {
            assert_eq!(words(t), if matches!(t, DataType::Decimal128(..)) { 2 } else { 1 }, "{t}");
            assert!(!describe(t).is_empty(), "{t}");
        }
    }
}
