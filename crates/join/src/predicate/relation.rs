//! The types a predicate is checked against: [`DataType`], the theta kernels' physical types (a
//! table column of a narrower or logical type reads as one of them, see
//! [`crate::device_relation::kernel_type`]).

use std::fmt;



/// The element type of a theta-join column.
///
/// ```
/// use gpujoin_join::predicate::DataType;
/// assert!(DataType::F32.is_numeric() && !DataType::Utf8.is_numeric());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    /// Variable-length UTF-8 strings (Arrow large-string layout).
    Utf8,
}

impl DataType {
    /// Integers and floats (everything but [`DataType::Utf8`]).
    pub fn is_numeric(self) -> bool {
        self != DataType::Utf8
    }
    /// `f32` and `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, DataType::F32 | DataType::F64)
    }
    /// `i32`, `i64`, `u32` and `u64`.
    pub fn is_integer(self) -> bool {
        self.is_numeric() && !self.is_float()
    }
    /// Lower-case name used in error messages (`"i32"`, ..., `"utf8"`).
    pub fn name(self) -> &'static str {
        match self {
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::U32 => "u32",
            DataType::U64 => "u64",
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::Utf8 => "utf8",
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl DataType {
    /// The type a table column of type `t` is checked and compared as: narrow integers and
    /// `Date32` as `I32`, `Date64` and timestamps as `I64`, `UInt8`, `UInt16` and `Boolean` as
    /// `U32`, both string types as `Utf8`; `None` for `Decimal128` (filters compare decimals
    /// through the front door only).
    ///
    /// ```
    /// use gpujoin_join::predicate::DataType;
    /// use gpujoin_join::table::DataType as T;
    /// assert_eq!(DataType::of(T::Int16), Some(DataType::I32));
    /// assert_eq!(DataType::of(T::Decimal128(10, 2)), None);
    /// ```
    pub fn of(t: crate::table::DataType) -> Option<DataType> {
        use crate::table::DataType as T;
        Some(match t {
            T::Int8 | T::Int16 | T::Int32 | T::Date32 => DataType::I32,
            T::Int64 | T::Date64 | T::Timestamp(_) => DataType::I64,
            T::UInt8 | T::UInt16 | T::UInt32 | T::Boolean => DataType::U32,
            T::UInt64 => DataType::U64,
            T::Float32 => DataType::F32,
            T::Float64 => DataType::F64,
            T::Utf8 | T::LargeUtf8 => DataType::Utf8,
            T::Decimal128(..) => return None,
        })
    }
}

/// The types a predicate over `table`'s columns is checked against ([`DataType::of`] of each);
/// a `Decimal128` column is an [`gpujoin_device::Error::Unsupported`].
///
/// ```
/// use gpujoin_join::predicate::{schema_of, DataType};
/// use gpujoin_join::table::{HostColumn, HostTable};
/// let t = HostTable::new(vec![("a", HostColumn::from_values(vec![1i16])), ("s", HostColumn::utf8(["x"]))])?;
/// assert_eq!(schema_of(&t)?, vec![DataType::I32, DataType::Utf8]);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn schema_of(table: &crate::table::HostTable) -> gpujoin_device::Result<Vec<DataType>> {
    table
        .names()
        .iter()
        .zip(table.columns())
        .map(|(n, c)| DataType::of(c.data_type()).ok_or_else(|| gpujoin_device::Error::Unsupported { what: format!("a predicate over column {n}"), reason: format!("{} columns are not compared by predicates here", c.data_type()) }))
        .collect()
}
