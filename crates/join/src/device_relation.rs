//! Relations of the theta, nested-loop and indexed nested-loop joins (issue 5): [`TableView`]s
//! whose columns all have one of the kernels' physical types ([`check_relation`]), read in
//! place; [`upload`] and the front door convert other types once (an owned [`Column`]).
//!
//! The kernels' types ([`in_place_type`]): `Int32`, `Date32` (as `i32`); `Int64`, `Date64`,
//! `Timestamp` (`i64`); `UInt32`; `UInt64`; `Float32`; `Float64`; `LargeUtf8` (Arrow's
//! large-string layout: `i64` offsets and the bytes). Any offset, any validity bitmap (the
//! kernels read the values of every row; the caller handles NULLs).
//!
//! ```no_run
//! use gpujoin_join::device_relation::{check_relation, upload};
//! use gpujoin_join::table::{DataType as T, HostColumn, HostTable};
//! # fn f(stream: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let host = HostTable::new(vec![("a", HostColumn::from_values(vec![3i16, 1])), ("s", HostColumn::utf8(["a", "bc"]))])?;
//! let dev = upload(stream, &host)?; // Int16 widened to Int32, Utf8 as LargeUtf8
//! check_relation(&dev.view())?;
//! let types: Vec<T> = dev.columns().iter().map(|c| c.data_type()).collect();
//! assert_eq!((dev.rows(), types), (2, vec![T::Int32, T::LargeUtf8]));
//! # Ok(()) }
//! ```

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};

use crate::table::{Column, ColumnView, DataType, HostTable, Table, TableView};

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

/// Checks a relation of the theta, nested-loop and indexed nested-loop joins: every column of an
/// [`in_place_type`] (the kernels read it as it is), at most [`crate::RowId::MAX_ROWS`] rows.
/// Other types are an [`Error::Unsupported`] naming the column ([`upload`] and the front door,
/// [`crate::Join`], convert them).
///
/// `check_relation(&table.view())` for a table of `Int32` and `LargeUtf8` columns is `Ok`; one
/// with an `Int16` column is not.
pub fn check_relation(rel: &TableView<'_>) -> Result<()> {
    for (name, c) in rel.names().iter().zip(rel.columns()) {
        if in_place_type(c.data_type()).is_none() {
            return Err(Error::Unsupported {
                what: format!("relation column {name:?} of type {}", c.data_type()),
                reason: "the theta kernels read Int32, Date32, Int64, Date64, Timestamp, UInt32, UInt64, Float32, Float64 and LargeUtf8 (device_relation::upload and the front door, Join, convert the others)".into(),
            });
        }
    }
    if rel.rows() as u64 > crate::RowId::MAX_ROWS {
        return Err(Error::too_large("relation rows", rel.rows() as u64, crate::RowId::MAX_ROWS));
    }
    Ok(())
}

/// The kernel types of a relation's columns, in order, after [`check_relation`] (every theta
/// entry point reads its relations' schemas through here first).
pub(crate) fn relation_schema(rel: &TableView<'_>) -> Result<Vec<DataType>> {
    check_relation(rel)?;
    Ok(rel.columns().iter().map(kernel_type_of).collect())
}

/// Copies every column of a host table to the device, in order and with its name, converting
/// those of no [`in_place_type`] as the front door's filters do (narrow integers and booleans
/// widened to 32 bits, `Utf8` to `LargeUtf8`; `Decimal128` is an `Unsupported` error), so that
/// the table's view is a relation ([`check_relation`]).
pub fn upload(stream: &Stream, table: &HostTable) -> Result<Table> {
    if table.rows() as u64 > crate::RowId::MAX_ROWS {
        return Err(Error::too_large("relation rows", table.rows() as u64, crate::RowId::MAX_ROWS));
    }
    let mut columns = Vec::with_capacity(table.columns().len());
    for (name, host) in table.names().iter().zip(table.columns()) {
        let c = Column::upload(stream, host)?;
        columns.push((name.clone(), crate::plan::filter::converted(stream, name, &c.view())?.unwrap_or(c)));
    }
    Table::new(columns)
}

/// One column of an [`OwnedRelation`]: a table's column read in place, or one the relation owns.
pub(crate) enum Source<'a> {
    InPlace(ColumnView<'a>),
    Owned(Column),
}

impl Source<'_> {
    /// The column.
    pub(crate) fn view(&self) -> ColumnView<'_> {
        match self {
            Source::InPlace(v) => *v,
            Source::Owned(c) => c.view(),
        }
    }
}

/// A relation the front door lowered for a theta join: the input tables' columns it reads in
/// place and the columns it converted, owned (so that a prepared join or a chunk source can
/// keep them as long as it reads them); [`OwnedRelation::view`] is the relation.
pub(crate) struct OwnedRelation<'a> {
    columns: Vec<Source<'a>>,
    /// The columns' names in the view: their positions (`"0"`, `"1"`, ...).
    names: Vec<String>,
    rows: usize,
}

impl<'a> OwnedRelation<'a> {
    /// A relation of these columns (every one of an [`in_place_type`], all of one length).
    pub(crate) fn new(columns: Vec<Source<'a>>, rows: usize) -> Result<Self> {
        let names = (0..columns.len()).map(|i| i.to_string()).collect();
        let rel = OwnedRelation { columns, names, rows };
        for (i, c) in rel.columns.iter().enumerate() {
            if c.view().len() != rows {
                gpujoin_device::check_same_len("relation rows", rows, &format!("column {i}"), c.view().len())?;
            }
        }
        check_relation(&rel.view())?;
        Ok(rel)
    }

    /// The relation: its columns named by position.
    pub(crate) fn view(&self) -> TableView<'_> {
        // Checked once, by `new`: no name or length check per view.
        TableView::of_checked(&self.names, self.columns.iter().map(Source::view).collect())
    }

    /// Rows of the relation.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }
}

/// A relation a prepared theta join reads: borrowed from the caller, or shared (so that the
/// prepared join owns what it reads, as the front door's chunks do).
#[derive(Clone)]
pub(crate) enum RelationRef<'a> {
    /// Borrowed for `'a`.
    Borrowed(&'a TableView<'a>),
    /// Shared ownership.
    Shared(std::sync::Arc<OwnedRelation<'a>>),
}

impl<'a> From<&'a TableView<'a>> for RelationRef<'a> {
    fn from(r: &'a TableView<'a>) -> RelationRef<'a> {
        RelationRef::Borrowed(r)
    }
}

impl<'a> From<std::sync::Arc<OwnedRelation<'a>>> for RelationRef<'a> {
    fn from(r: std::sync::Arc<OwnedRelation<'a>>) -> RelationRef<'a> {
        RelationRef::Shared(r)
    }
}

impl RelationRef<'_> {
    /// The relation.
    pub(crate) fn view(&self) -> TableView<'_> {
        match self {
            RelationRef::Borrowed(r) => (*r).clone(),
            RelationRef::Shared(r) => r.view(),
        }
    }

    /// Rows of the relation.
    pub(crate) fn rows(&self) -> usize {
        match self {
            RelationRef::Borrowed(r) => r.rows(),
            RelationRef::Shared(r) => r.rows(),
        }
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
