//! Device relations of the theta, nested-loop and indexed nested-loop joins (issue 5): columns
//! of the table model ([`ColumnView`]) in one of the kernels' physical types, read in place
//! where a table's column already has one and converted once (an owned [`Column`]) otherwise.
//!
//! The kernels' types ([`in_place_type`]): `Int32`, `Date32` (as `i32`); `Int64`, `Date64`,
//! `Timestamp` (`i64`); `UInt32`; `UInt64`; `Float32`; `Float64`; `LargeUtf8` (Arrow's
//! large-string layout: `i64` offsets and the bytes). Any offset, any validity bitmap (the
//! kernels read the values of every row; the caller handles NULLs).
//!
//! ```no_run
//! use gpujoin_join::device_relation::DeviceRelation;
//! use gpujoin_join::table::{DataType as T, HostColumn, HostTable};
//! # fn f(stream: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let host = HostTable::new(vec![("a", HostColumn::from_values(vec![3i16, 1])), ("s", HostColumn::utf8(["a", "bc"]))])?;
//! let dev = DeviceRelation::upload(stream, &host)?;
//! assert_eq!((dev.rows(), dev.schema()), (2, vec![T::Int32, T::LargeUtf8]));
//! let back = dev.to_host(stream)?; // Int16 widened to Int32, Utf8 as LargeUtf8
//! assert_eq!((back[0].data_type(), back[1].data_type()), (T::Int32, T::LargeUtf8));
//! # Ok(()) }
//! ```

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};

use crate::table::{Column, ColumnView, DataType, HostColumn, HostTable};

/// The kernels' type of a column of `t` read in place ([`DataType::kernel_type`] where `t` has
/// that type's layout); `None` for a type a relation must convert first (`Int8`, `Int16`,
/// `UInt8`, `UInt16`, `Boolean`, `Utf8`, `Decimal128`).
///
/// `in_place_type(DataType::Date32)` is `Some(DataType::Int32)`; `in_place_type(DataType::Utf8)`
/// is `None` (its offsets are 32-bit).
pub fn in_place_type(t: DataType) -> Option<DataType> {
    use DataType::*;
    match t {
        Int8 | Int16 | UInt8 | UInt16 | Boolean | Utf8 | Decimal128(..) => None,
        _ => t.kernel_type(),
    }
}

/// The kernels' type of a column already checked to have one (a relation's columns).
pub(crate) fn kernel_type_of(c: &ColumnView<'_>) -> DataType {
    in_place_type(c.data_type()).expect("a relation's columns have kernel types")
}

/// One column of a [`DeviceRelation`]: a table's column read in place, or one the relation owns.
pub enum RelationColumn<'a> {
    /// A table's column, read where it is.
    InPlace(ColumnView<'a>),
    /// A column converted or uploaded for the relation.
    Owned(Column),
}

impl RelationColumn<'_> {
    /// The column.
    pub fn view(&self) -> ColumnView<'_> {
        match self {
            RelationColumn::InPlace(v) => *v,
            RelationColumn::Owned(c) => c.view(),
        }
    }
}

impl<'a> From<ColumnView<'a>> for RelationColumn<'a> {
    fn from(v: ColumnView<'a>) -> Self {
        RelationColumn::InPlace(v)
    }
}

impl From<Column> for RelationColumn<'_> {
    fn from(c: Column) -> Self {
        RelationColumn::Owned(c)
    }
}

/// A device relation a prepared theta join reads: borrowed from the caller, or shared (so that
/// the prepared join owns what it reads, as the front door's chunks do).
///
/// Example: `RelationRef::from(&rel)` borrows; `RelationRef::from(Arc::new(rel))` keeps the
/// relation alive as long as the prepared join.
#[derive(Clone)]
pub enum RelationRef<'a> {
    /// Borrowed for `'a`.
    Borrowed(&'a DeviceRelation<'a>),
    /// Shared ownership.
    Shared(std::sync::Arc<DeviceRelation<'a>>),
}

impl<'a> std::ops::Deref for RelationRef<'a> {
    type Target = DeviceRelation<'a>;

    fn deref(&self) -> &DeviceRelation<'a> {
        match self {
            RelationRef::Borrowed(r) => r,
            RelationRef::Shared(r) => r,
        }
    }
}

impl<'a, 'r: 'a> From<&'a DeviceRelation<'r>> for RelationRef<'a> {
    fn from(r: &'a DeviceRelation<'r>) -> RelationRef<'a> {
        RelationRef::Borrowed(r)
    }
}

impl<'a> From<std::sync::Arc<DeviceRelation<'a>>> for RelationRef<'a> {
    fn from(r: std::sync::Arc<DeviceRelation<'a>>) -> RelationRef<'a> {
        RelationRef::Shared(r)
    }
}

/// A relation on the device: columns of equal length, each of a kernel type.
pub struct DeviceRelation<'a> {
    columns: Vec<RelationColumn<'a>>,
    rows: usize,
}

impl DeviceRelation<'static> {
    /// Copies every column of a host table to the device, in order (names aside), converting
    /// those of no [`in_place_type`] as the front door's filters do (narrow integers and booleans
    /// widened to 32 bits, `Utf8` to `LargeUtf8`; `Decimal128` is an `Unsupported` error).
    pub fn upload(stream: &Stream, table: &HostTable) -> Result<Self> {
        if table.rows() as u64 > crate::RowId::MAX_ROWS {
            return Err(Error::too_large("relation rows", table.rows() as u64, crate::RowId::MAX_ROWS));
        }
        let mut columns = Vec::with_capacity(table.columns().len());
        for (name, host) in table.names().iter().zip(table.columns()) {
            let c = Column::upload(stream, host)?;
            columns.push(RelationColumn::Owned(match crate::plan::filter::converted(stream, name, &c.view())? {
                Some(converted) => converted,
                None => c,
            }));
        }
        Ok(DeviceRelation { columns, rows: table.rows() })
    }
}

impl<'a> DeviceRelation<'a> {
    /// A relation of these columns: every one of a [`in_place_type`], all of one length
    /// (`InvalidArgument` otherwise).
    pub fn from_columns(columns: Vec<RelationColumn<'a>>) -> Result<Self> {
        let rows = columns.first().map_or(0, |c| c.view().len());
        for (i, c) in columns.iter().enumerate() {
            let v = c.view();
            if in_place_type(v.data_type()).is_none() {
                return Err(Error::invalid(format!("column {i} of a device relation is {}; the theta kernels read {}", v.data_type(), "Int32, Date32, Int64, Date64, Timestamp, UInt32, UInt64, Float32, Float64 and LargeUtf8")));
            }
            gpujoin_device::check_same_len("column 0", rows, &format!("column {i}"), v.len())?;
        }
        Ok(DeviceRelation { columns, rows })
    }

    /// Rows of the relation.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn width(&self) -> usize {
        self.columns.len()
    }

    /// The columns.
    pub fn columns(&self) -> Vec<ColumnView<'_>> {
        self.columns.iter().map(RelationColumn::view).collect()
    }

    /// Column `i` (panics when out of range, like slice indexing).
    pub fn column(&self, i: usize) -> ColumnView<'_> {
        self.columns[i].view()
    }

    /// The columns' kernel types.
    pub fn schema(&self) -> Vec<DataType> {
        self.columns.iter().map(|c| kernel_type_of(&c.view())).collect()
    }

    /// Copies the relation's columns back to the host.
    pub fn to_host(&self, stream: &Stream) -> Result<Vec<HostColumn>> {
        self.columns.iter().map(|c| c.view().to_host(stream)).collect()
    }
}

/// Rows `range` of a fixed-width column as a new column (offset 0).
pub(crate) fn copy_column_rows(stream: &Stream, c: &ColumnView<'_>, range: std::ops::Range<usize>) -> Result<Column> {
    if range.start > range.end || range.end > c.len() {
        return Err(Error::invalid(format!("row range {range:?} outside a column of {} rows", c.len())));
    }
    let w = c.data_type().byte_width().ok_or_else(|| Error::invalid("copying rows of a string column is not supported"))?;
    let at = (c.offset() + range.start) * w;
    let values = stream.copy_from_device(&c.values().slice(at..at + range.len() * w))?;
    Column::from_buffers(c.data_type(), range.len(), values, None, None)
}

/// A new column of `n` rows of table type `t` (fixed width), its values unwritten (poisoned
/// with 0xFF bytes when `poison`, so that unwritten elements show in tests).
pub(crate) fn alloc_column(stream: &Stream, t: DataType, n: usize, poison: bool) -> Result<Column> {
    let w = t.byte_width().ok_or_else(|| Error::invalid(format!("a {t} output column")))?;
    let mut b: DeviceBuffer<u8> = stream.alloc::<u8>(n * w)?;
    if poison {
        stream.memset_bytes(&mut b.view_mut(), 0xFF)?;
    }
    Column::from_buffers(t, n, b, None, None)
}
