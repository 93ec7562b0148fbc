//! Which Arrow types a device table holds, and as what.
//!
//! | Arrow | on the device ([`DataType`]) | back to Arrow by default |
//! |---|---|---|
//! | `Int8`..`Int64`, `UInt8`..`UInt64`, `Float32`, `Float64`, `Boolean` | the same | the same |
//! | `Date32`, `Date64`, `Decimal128(p, s)` | the same (physical `i32`/`i64`/`i128`) | the same |
//! | `Timestamp(unit, tz)` | `Timestamp(unit)` (`i64`) | `Timestamp(unit, None)`; the input's field restores `tz` |
//! | `Utf8`, `LargeUtf8` | the same (offsets + bytes) | the same |
//! | `Utf8View` | `LargeUtf8` (views become offsets + bytes) | `LargeUtf8`; the input's field restores `Utf8View` |
//! | `Dictionary(K, V)` of a type above | `V`'s device type (decoded) | `V` |
//!
//! Everything else (`Float16`, `Binary`, nested types, ...) is refused with
//! [`Error::Unsupported`] naming the column and the type, before any byte is copied.

use arrow_schema::{DataType as ArrowType, Field, Schema, TimeUnit as ArrowUnit};
use gpujoin_device::{Error, Result};
use gpujoin_join::table::{DataType, TimeUnit};

/// The device type of a column of Arrow type `t` named `column`, or a typed refusal.
///
/// ```
/// use arrow_schema::DataType as A;
/// use gpujoin_arrow::device_type;
/// use gpujoin_join::table::DataType;
/// assert_eq!(device_type("k", &A::Int64).unwrap(), DataType::Int64);
/// assert_eq!(device_type("s", &A::Utf8View).unwrap(), DataType::LargeUtf8);
/// assert_eq!(device_type("d", &A::Dictionary(Box::new(A::Int8), Box::new(A::Utf8))).unwrap(), DataType::Utf8);
/// assert!(device_type("h", &A::Float16).is_err());
/// ```
pub fn device_type(column: &str, t: &ArrowType) -> Result<DataType> {
    Ok(match t {
        ArrowType::Int8 => DataType::Int8,
        ArrowType::Int16 => DataType::Int16,
        ArrowType::Int32 => DataType::Int32,
        ArrowType::Int64 => DataType::Int64,
        ArrowType::UInt8 => DataType::UInt8,
        ArrowType::UInt16 => DataType::UInt16,
        ArrowType::UInt32 => DataType::UInt32,
        ArrowType::UInt64 => DataType::UInt64,
        ArrowType::Float32 => DataType::Float32,
        ArrowType::Float64 => DataType::Float64,
        ArrowType::Boolean => DataType::Boolean,
        ArrowType::Date32 => DataType::Date32,
        ArrowType::Date64 => DataType::Date64,
        ArrowType::Timestamp(u, _) => DataType::Timestamp(time_unit(*u)),
        ArrowType::Decimal128(p, s) => DataType::Decimal128(*p, *s),
        ArrowType::Utf8 => DataType::Utf8,
        ArrowType::LargeUtf8 | ArrowType::Utf8View => DataType::LargeUtf8,
        ArrowType::Dictionary(k, v) => {
            if !k.is_dictionary_key_type() {
                return Err(unsupported(column, t, "a dictionary's keys must be integers"));
            }
            if matches!(**v, ArrowType::Dictionary(..)) {
                return Err(unsupported(column, t, "nested dictionaries are not supported"));
            }
            device_type(column, v)?
        }
        other => return Err(unsupported(column, other, "gpujoin's columns are integers, floats, booleans, dates, timestamps, decimal128 and strings")),
    })
}

/// The Arrow type a device column of type `t` comes back as when no input field says otherwise.
///
/// ```
/// use arrow_schema::DataType as A;
/// use gpujoin_arrow::arrow_type;
/// use gpujoin_join::table::DataType;
/// assert_eq!(arrow_type(DataType::Decimal128(12, 2)), A::Decimal128(12, 2));
/// ```
pub fn arrow_type(t: DataType) -> ArrowType {
    match t {
        DataType::Int8 => ArrowType::Int8,
        DataType::Int16 => ArrowType::Int16,
        DataType::Int32 => ArrowType::Int32,
        DataType::Int64 => ArrowType::Int64,
        DataType::UInt8 => ArrowType::UInt8,
        DataType::UInt16 => ArrowType::UInt16,
        DataType::UInt32 => ArrowType::UInt32,
        DataType::UInt64 => ArrowType::UInt64,
        DataType::Float32 => ArrowType::Float32,
        DataType::Float64 => ArrowType::Float64,
        DataType::Boolean => ArrowType::Boolean,
        DataType::Date32 => ArrowType::Date32,
        DataType::Date64 => ArrowType::Date64,
        DataType::Timestamp(u) => ArrowType::Timestamp(arrow_unit(u), None),
        DataType::Decimal128(p, s) => ArrowType::Decimal128(p, s),
        DataType::Utf8 => ArrowType::Utf8,
        DataType::LargeUtf8 => ArrowType::LargeUtf8,
    }
}

/// Whether a device column of type `t` can come back as Arrow type `target`: its default type,
/// a timestamp of the same unit with a time zone, or any string type (`Utf8`, `LargeUtf8`,
/// `Utf8View`) for a string column.
pub fn can_download_as(t: DataType, target: &ArrowType) -> bool {
    match (t, target) {
        (DataType::Timestamp(u), ArrowType::Timestamp(v, _)) => arrow_unit(u) == *v,
        (s, ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View) if s.is_string() => true,
        _ => arrow_type(t) == *target,
    }
}

/// Checks every field of `schema` before anything is copied: the device type of each column.
pub fn device_types(schema: &Schema) -> Result<Vec<DataType>> {
    schema.fields().iter().map(|f| device_type(f.name(), f.data_type())).collect()
}

/// The default field of a device column.
pub(crate) fn default_field(name: &str, t: DataType, nullable: bool) -> Field {
    Field::new(name, arrow_type(t), nullable)
}

fn time_unit(u: ArrowUnit) -> TimeUnit {
    match u {
        ArrowUnit::Second => TimeUnit::Second,
        ArrowUnit::Millisecond => TimeUnit::Millisecond,
        ArrowUnit::Microsecond => TimeUnit::Microsecond,
        ArrowUnit::Nanosecond => TimeUnit::Nanosecond,
    }
}

fn arrow_unit(u: TimeUnit) -> ArrowUnit {
    match u {
        TimeUnit::Second => ArrowUnit::Second,
        TimeUnit::Millisecond => ArrowUnit::Millisecond,
        TimeUnit::Microsecond => ArrowUnit::Microsecond,
        TimeUnit::Nanosecond => ArrowUnit::Nanosecond,
    }
}

pub(crate) fn unsupported(column: &str, t: &ArrowType, reason: &str) -> Error {
    Error::Unsupported { what: format!("column {column:?} of Arrow type {t}"), reason: reason.to_string() }
}

/// An Arrow error as gpujoin's error (invalid input).
pub(crate) fn arrow_error(context: &str, e: arrow_schema::ArrowError) -> Error {
    Error::invalid(format!("{context}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_device_type_maps_back_to_itself() {
        for t in DataType::EXAMPLES {
            assert_eq!(device_type("c", &arrow_type(t)).unwrap(), t);
            assert!(can_download_as(t, &arrow_type(t)));
        }
    }

    #[test]
    fn refusals_name_the_column_and_the_type() {
        let e = device_type("price", &ArrowType::Float16).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
        assert!(msg.contains("\"price\"") && msg.contains("Float16"), "{msg}");
        let nested = ArrowType::List(std::sync::Arc::new(Field::new("x", ArrowType::Int32, true)));
        assert!(matches!(device_type("l", &nested), Err(Error::Unsupported { .. })));
        let dd = ArrowType::Dictionary(Box::new(ArrowType::Int32), Box::new(ArrowType::Binary));
        assert!(device_type("d", &dd).unwrap_err().to_string().contains("\"d\""));
    }

    #[test]
    fn download_targets() {
        assert!(can_download_as(DataType::Utf8, &ArrowType::Utf8View));
        assert!(can_download_as(DataType::Timestamp(TimeUnit::Second), &ArrowType::Timestamp(ArrowUnit::Second, Some("UTC".into()))));
        assert!(!can_download_as(DataType::Timestamp(TimeUnit::Second), &ArrowType::Timestamp(ArrowUnit::Millisecond, None)));
        assert!(!can_download_as(DataType::Int32, &ArrowType::Int64));
    }
}
