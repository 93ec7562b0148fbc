//! The one columnar model: Arrow's physical layout, on the host and on the device.
//!
//! A column is a [`DataType`], a length, and Arrow's buffers: a values buffer (fixed-width
//! elements, bit-packed for `Boolean`, the bytes of the strings for `Utf8`/`LargeUtf8`), an
//! offsets buffer for strings (`i32` for `Utf8`, `i64` for `LargeUtf8`), and an optional validity
//! bitmap (LSB bit order, 1 = valid). Like an Arrow array, a column is read from an element
//! `offset` into its buffers, so slices share their buffers and a validity bitmap may start at
//! any bit.
//!
//! | host | device (owned) | device (borrowed) |
//! |---|---|---|
//! | [`HostColumn`] | [`Column`] | [`ColumnView`] |
//! | [`HostTable`] | [`Table`] | [`TableView`] |
//!
//! A table is a list of named columns of equal length. Host tables are built from Rust vectors:
//!
//! ```
//! use gpujoin_join::table::{DataType, HostColumn, HostTable};
//! let t = HostTable::new(vec![
//!     ("id", HostColumn::from_values(vec![1i32, 2, 3])),
//!     ("name", HostColumn::utf8_options([Some("ann"), None, Some("cy")])),
//! ])?;
//! assert_eq!((t.rows(), t.column("name")?.data_type()), (3, DataType::Utf8));
//! assert_eq!(t.column("name")?.null_count(), 1);
//! # Ok::<(), gpujoin_device::Error>(())
//! ```

mod device;
mod host;

pub use device::{Column, ColumnView, Table, TableView};
pub use host::{HostColumn, HostTable, NativeValue, Value};

/// The unit of a [`DataType::Timestamp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    Second,
    Millisecond,
    Microsecond,
    Nanosecond,
}

/// The logical type of a column; the physical layout is Arrow's for the same type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    /// Bit-packed values (bit `i` of the values bitmap).
    Boolean,
    /// Days since the UNIX epoch, `i32`.
    Date32,
    /// Milliseconds since the UNIX epoch, `i64`.
    Date64,
    /// Time since the UNIX epoch in the unit, `i64` (no time zone).
    Timestamp(TimeUnit),
    /// A 128-bit decimal of precision `p` and scale `s` (the unscaled value, `i128`).
    Decimal128(u8, i8),
    /// UTF-8 strings with `i32` offsets.
    Utf8,
    /// UTF-8 strings with `i64` offsets.
    LargeUtf8,
}

impl DataType {
    /// Every type, with one representative of each parameterized one, for tests and docs.
    pub const EXAMPLES: [DataType; 17] = [
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
        DataType::Float32,
        DataType::Float64,
        DataType::Boolean,
        DataType::Date32,
        DataType::Date64,
        DataType::Timestamp(TimeUnit::Microsecond),
        DataType::Decimal128(38, 2),
        DataType::Utf8,
        DataType::LargeUtf8,
    ];

    /// Bytes per element of a fixed-width type; `None` for `Boolean` (bits) and strings.
    pub fn byte_width(self) -> Option<usize> {
        use DataType::*;
        match self {
            Int8 | UInt8 => Some(1),
            Int16 | UInt16 => Some(2),
            Int32 | UInt32 | Float32 | Date32 => Some(4),
            Int64 | UInt64 | Float64 | Date64 | Timestamp(_) => Some(8),
            Decimal128(..) => Some(16),
            Boolean | Utf8 | LargeUtf8 => None,
        }
    }

    /// `Utf8` or `LargeUtf8`.
    pub fn is_string(self) -> bool {
        matches!(self, DataType::Utf8 | DataType::LargeUtf8)
    }

    /// `Float32` or `Float64`.
    pub fn is_float(self) -> bool {
        matches!(self, DataType::Float32 | DataType::Float64)
    }

    /// Signed and unsigned integers of every width (not `Boolean`, dates, timestamps or
    /// decimals).
    pub fn is_integer(self) -> bool {
        use DataType::*;
        matches!(self, Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64)
    }

    /// Integers and floats.
    pub fn is_numeric(self) -> bool {
        self.is_integer() || self.is_float()
    }

    /// The type a predicate compares a column of this type as, which is the theta kernels'
    /// physical type for it: narrow integers, `Int32` and `Date32` as `Int32`; `Int64`, `Date64`
    /// and timestamps as `Int64`; `UInt8`, `UInt16`, `UInt32` and `Boolean` as `UInt32`; `UInt64`,
    /// `Float32` and `Float64` as themselves; both string types as `LargeUtf8`. `None` for
    /// `Decimal128` (filters compare decimals through the front door only).
    ///
    /// ```
    /// use gpujoin_join::table::DataType;
    /// assert_eq!(DataType::Int16.kernel_type(), Some(DataType::Int32));
    /// assert_eq!(DataType::Utf8.kernel_type(), Some(DataType::LargeUtf8));
    /// assert_eq!(DataType::Decimal128(10, 2).kernel_type(), None);
    /// ```
    pub fn kernel_type(self) -> Option<DataType> {
        use DataType::*;
        Some(match self {
            Int8 | Int16 | Int32 | Date32 => Int32,
            Int64 | Date64 | Timestamp(_) => Int64,
            UInt8 | UInt16 | UInt32 | Boolean => UInt32,
            UInt64 => UInt64,
            Float32 => Float32,
            Float64 => Float64,
            Utf8 | LargeUtf8 => LargeUtf8,
            Decimal128(..) => return None,
        })
    }

    /// Whether keys of `self` and `other` can be compared for equality: the same type, or two
    /// string types.
    pub fn is_comparable_with(self, other: DataType) -> bool {
        self == other || (self.is_string() && other.is_string())
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataType::Timestamp(u) => write!(f, "Timestamp({u:?})"),
            DataType::Decimal128(p, s) => write!(f, "Decimal128({p}, {s})"),
            t => write!(f, "{t:?}"),
        }
    }
}
