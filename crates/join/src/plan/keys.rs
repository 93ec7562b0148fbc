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
use crate::keys::{DeviceColumn, KeyColumn, Keys};
use crate::table::{ColumnView, DataType};
use crate::types::{JoinOptions, MAX_KEY_COLUMNS};

enum Values<'a> {
    I32(Cow<'a, i32>),
    I64(Cow<'a, i64>),
    U32(Cow<'a, u32>),
    U64(Cow<'a, u64>),
    F32(Cow<'a, f32>),
    F64(Cow<'a, f64>),
}

struct Prepared<'a> {
    values: Values<'a>,
    validity: Option<Cow<'a, u32>>,
}

/// One side's prepared key columns.
pub(crate) struct PreparedKeys<'a> {
    columns: Vec<Prepared<'a>>,
    /// How 8-byte integer keys were prepared (compressed or kept), for the join's reason; `None`
    /// for other keys.
    note: Option<String>,
}

impl PreparedKeys<'_> {
    /// The keys as the algorithms take them.
    pub(crate) fn keys(&self) -> Result<Keys<'_>> {
        let columns = self
            .columns
            .iter()
            .map(|c| KeyColumn {
                values: match &c.values {
                    Values::I32(v) => DeviceColumn::I32(v.view()),
                    Values::I64(v) => DeviceColumn::I64(v.view()),
                    Values::U32(v) => DeviceColumn::U32(v.view()),
                    Values::U64(v) => DeviceColumn::U64(v.view()),
                    Values::F32(v) => DeviceColumn::F32(v.view()),
                    Values::F64(v) => DeviceColumn::F64(v.view()),
                },
                validity: c.validity.as_ref().map(Cow::view),
            })
            .collect();
        Keys::with_validity(columns)
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

fn borrowed<'a, T: gpujoin_device::Pod>(v: &ColumnView<'a>) -> Result<Cow<'a, T>> {
    v.typed::<T>().map(Cow::Borrowed).ok_or_else(|| Error::invalid(format!("a {} key column whose values buffer is misaligned", v.data_type())))
}

fn prepare_one<'a>(stream: &Stream, v: &ColumnView<'a>, out: &mut Vec<Prepared<'a>>) -> Result<()> {
    use DataType::*;
    let validity = || kernels::validity_words(stream, v);
    let values = match v.data_type() {
        Int32 | Date32 => Values::I32(borrowed(v)?),
        Int64 | Date64 | Timestamp(_) => Values::I64(borrowed(v)?),
        UInt32 => Values::U32(borrowed(v)?),
        UInt64 => Values::U64(borrowed(v)?),
        Float32 => Values::F32(borrowed(v)?),
        Float64 => Values::F64(borrowed(v)?),
        Int8 | Int16 => Values::I32(Cow::Owned(kernels::widen(stream, v)?.cast())),
        UInt8 | UInt16 | Boolean => Values::U32(Cow::Owned(kernels::widen(stream, v)?)),
        Decimal128(..) => {
            let (hi, lo) = kernels::split_decimal(stream, v)?;
            out.push(Prepared { values: Values::I64(Cow::Owned(hi)), validity: validity()? });
            Values::U64(Cow::Owned(lo))
        }
        Utf8 | LargeUtf8 => unreachable!("strings are prepared in pairs"),
    };
    out.push(Prepared { values, validity: validity()? });
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
            l.push(Prepared { values: Values::U32(Cow::Owned(ra)), validity: kernels::validity_words(stream, a)? });
            r.push(Prepared { values: Values::U32(Cow::Owned(rb)), validity: kernels::validity_words(stream, b)? });
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
            l.columns[0].values = Values::U32(Cow::Owned(c.left));
            r.columns[0].values = Values::U32(Cow::Owned(c.right));
        }
        Outcome::TooWide(range) => l.note = Some(range::wide_note(range)),
        Outcome::NotEligible => {}
    }
    Ok((l, r))
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

/// A prepared single key column as an owned buffer of its type (for the indexed nested loop's
/// index, which owns its column).
pub(crate) fn owned_single(stream: &Stream, keys: &PreparedKeys<'_>) -> Result<crate::device_relation::DeviceColumnData> {
    use crate::device_relation::DeviceColumnData as D;
    fn copy<T: gpujoin_device::Pod>(stream: &Stream, v: &Cow<'_, T>) -> Result<DeviceBuffer<T>> {
        stream.copy_from_device(&v.view())
    }
    Ok(match &keys.columns[0].values {
        Values::I32(v) => D::I32(copy(stream, v)?),
        Values::I64(v) => D::I64(copy(stream, v)?),
        Values::U32(v) => D::U32(copy(stream, v)?),
        Values::U64(v) => D::U64(copy(stream, v)?),
        Values::F32(v) => D::F32(copy(stream, v)?),
        Values::F64(v) => D::F64(copy(stream, v)?),
    })
}
