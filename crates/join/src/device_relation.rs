//! Device-resident relations for the theta, nested-loop and indexed nested-loop joins (issue 5):
//! the device image of a host [`Relation`], column by column, strings in Arrow's large-string
//! layout (`i64` offsets, `offsets.len() == rows + 1`, plus the bytes).
//!
//! ```no_run
//! use gpujoin_join::device_relation::DeviceRelation;
//! use gpujoin_join::predicate::{ColumnData, Relation};
//! # fn f(stream: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let host = Relation::new(vec![ColumnData::I32(vec![3, 1]), ColumnData::utf8(["a", "bc"])])?;
//! let dev = DeviceRelation::upload(stream, &host)?;
//! assert_eq!(dev.rows(), 2);
//! assert_eq!(dev.to_host()?, host);
//! # Ok(()) }
//! ```

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Pod, Result, Stream};

use crate::keys::DeviceColumn;
use crate::maps::{gather_column, Payload};
use crate::predicate::{ColumnData, DataType, Relation};

/// One device column of a [`DeviceRelation`].
pub enum DeviceColumnData {
    I32(DeviceBuffer<i32>),
    I64(DeviceBuffer<i64>),
    U32(DeviceBuffer<u32>),
    U64(DeviceBuffer<u64>),
    F32(DeviceBuffer<f32>),
    F64(DeviceBuffer<f64>),
    /// String `i` is `bytes[offsets[i]..offsets[i + 1]]`.
    Utf8 { offsets: DeviceBuffer<i64>, bytes: DeviceBuffer<u8> },
}

impl DeviceColumnData {
    /// Copies a host column to the device (validated first: a malformed string layout is an error).
    pub fn upload(stream: &Stream, column: &ColumnData) -> Result<Self> {
        column.validate()?;
        Ok(match column {
            ColumnData::I32(v) => Self::I32(stream.copy_from_host(v)?),
            ColumnData::I64(v) => Self::I64(stream.copy_from_host(v)?),
            ColumnData::U32(v) => Self::U32(stream.copy_from_host(v)?),
            ColumnData::U64(v) => Self::U64(stream.copy_from_host(v)?),
            ColumnData::F32(v) => Self::F32(stream.copy_from_host(v)?),
            ColumnData::F64(v) => Self::F64(stream.copy_from_host(v)?),
            ColumnData::Utf8 { offsets, bytes } => {
                Self::Utf8 { offsets: stream.copy_from_host(offsets)?, bytes: stream.copy_from_host(bytes)? }
            }
        })
    }

    /// Copies the column back to the host.
    pub fn to_host(&self) -> Result<ColumnData> {
        Ok(match self {
            Self::I32(b) => ColumnData::I32(b.to_vec()?),
            Self::I64(b) => ColumnData::I64(b.to_vec()?),
            Self::U32(b) => ColumnData::U32(b.to_vec()?),
            Self::U64(b) => ColumnData::U64(b.to_vec()?),
            Self::F32(b) => ColumnData::F32(b.to_vec()?),
            Self::F64(b) => ColumnData::F64(b.to_vec()?),
            Self::Utf8 { offsets, bytes } => ColumnData::Utf8 { offsets: offsets.to_vec()?, bytes: bytes.to_vec()? },
        })
    }

    /// The element type.
    pub fn data_type(&self) -> DataType {
        match self {
            Self::I32(_) => DataType::I32,
            Self::I64(_) => DataType::I64,
            Self::U32(_) => DataType::U32,
            Self::U64(_) => DataType::U64,
            Self::F32(_) => DataType::F32,
            Self::F64(_) => DataType::F64,
            Self::Utf8 { .. } => DataType::Utf8,
        }
    }

    /// Rows in the column.
    pub fn len(&self) -> usize {
        match self {
            Self::I32(b) => b.len(),
            Self::I64(b) => b.len(),
            Self::U32(b) => b.len(),
            Self::U64(b) => b.len(),
            Self::F32(b) => b.len(),
            Self::F64(b) => b.len(),
            Self::Utf8 { offsets, .. } => offsets.len().saturating_sub(1),
        }
    }

    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `out[i] = self[idx[i]]` for a fixed-width column (zero where `idx[i]` is
    /// [`RowId::NONE`](crate::RowId::NONE)); strings are an [`Error::InvalidArgument`].
    /// Indices are trusted to be in range (they come from a join's gather maps).
    pub fn gather(&self, stream: &Stream, idx: &DeviceView<'_, u32>) -> Result<DeviceColumnData> {
        let column = self.as_key_column().ok_or_else(|| Error::invalid("gathering a string column is not supported; gather its row ids instead"))?;
        Ok(gather_column(stream, &column, idx)?.into())
    }

    /// A copy of rows `range` of a fixed-width column; strings are an [`Error::InvalidArgument`].
    pub fn slice_rows(&self, stream: &Stream, range: std::ops::Range<usize>) -> Result<DeviceColumnData> {
        if range.start > range.end || range.end > self.len() {
            return Err(Error::invalid(format!("row range {range:?} outside a column of {} rows", self.len())));
        }
        fn c<T: Pod>(stream: &Stream, src: &DeviceBuffer<T>, r: std::ops::Range<usize>) -> Result<DeviceBuffer<T>> {
            stream.copy_from_device(&src.slice(r))
        }
        Ok(match self {
            Self::I32(b) => Self::I32(c(stream, b, range)?),
            Self::I64(b) => Self::I64(c(stream, b, range)?),
            Self::U32(b) => Self::U32(c(stream, b, range)?),
            Self::U64(b) => Self::U64(c(stream, b, range)?),
            Self::F32(b) => Self::F32(c(stream, b, range)?),
            Self::F64(b) => Self::F64(c(stream, b, range)?),
            Self::Utf8 { .. } => return Err(Error::invalid("slicing a string column is not supported")),
        })
    }

    /// The values of a fixed-width column as bytes (strings: their bytes, without the offsets).
    pub fn into_bytes(self) -> DeviceBuffer<u8> {
        match self {
            Self::I32(b) => b.into_bytes(),
            Self::I64(b) => b.into_bytes(),
            Self::U32(b) => b.into_bytes(),
            Self::U64(b) => b.into_bytes(),
            Self::F32(b) => b.into_bytes(),
            Self::F64(b) => b.into_bytes(),
            Self::Utf8 { bytes, .. } => bytes,
        }
    }

    /// Bytes per row of a fixed-width column (`None` for strings).
    pub fn width(&self) -> Option<usize> {
        match self.data_type() {
            DataType::I32 | DataType::U32 | DataType::F32 => Some(4),
            DataType::I64 | DataType::U64 | DataType::F64 => Some(8),
            DataType::Utf8 => None,
        }
    }

    /// A fixed-width column as an equi-join key column; `None` for strings.
    pub fn as_key_column(&self) -> Option<DeviceColumn<'_>> {
        Some(match self {
            Self::I32(b) => b.view().into(),
            Self::I64(b) => b.view().into(),
            Self::U32(b) => b.view().into(),
            Self::U64(b) => b.view().into(),
            Self::F32(b) => b.view().into(),
            Self::F64(b) => b.view().into(),
            Self::Utf8 { .. } => return None,
        })
    }
}

impl From<Payload> for DeviceColumnData {
    fn from(p: Payload) -> Self {
        match p {
            Payload::I32(b) => Self::I32(b),
            Payload::I64(b) => Self::I64(b),
            Payload::U32(b) => Self::U32(b),
            Payload::U64(b) => Self::U64(b),
            Payload::F32(b) => Self::F32(b),
            Payload::F64(b) => Self::F64(b),
        }
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
    Borrowed(&'a DeviceRelation),
    /// Shared ownership.
    Shared(std::sync::Arc<DeviceRelation>),
}

impl std::ops::Deref for RelationRef<'_> {
    type Target = DeviceRelation;

    fn deref(&self) -> &DeviceRelation {
        match self {
            RelationRef::Borrowed(r) => r,
            RelationRef::Shared(r) => r,
        }
    }
}

impl<'a> From<&'a DeviceRelation> for RelationRef<'a> {
    fn from(r: &'a DeviceRelation) -> RelationRef<'a> {
        RelationRef::Borrowed(r)
    }
}

impl From<std::sync::Arc<DeviceRelation>> for RelationRef<'static> {
    fn from(r: std::sync::Arc<DeviceRelation>) -> RelationRef<'static> {
        RelationRef::Shared(r)
    }
}

/// A relation on the device: columns of equal length.
pub struct DeviceRelation {
    columns: Vec<DeviceColumnData>,
    rows: usize,
}

impl DeviceRelation {
    /// Copies every column of `relation` to the device.
    pub fn upload(stream: &Stream, relation: &Relation) -> Result<Self> {
        relation.validate()?;
        let columns = relation.columns.iter().map(|c| DeviceColumnData::upload(stream, c)).collect::<Result<Vec<_>>>()?;
        Ok(DeviceRelation { columns, rows: relation.rows() })
    }

    /// Builds a relation from device columns, which must all have `rows` rows.
    pub fn from_columns(columns: Vec<DeviceColumnData>) -> Result<Self> {
        let rows = columns.first().map_or(0, DeviceColumnData::len);
        for (i, c) in columns.iter().enumerate() {
            gpujoin_device::check_same_len("column 0", rows, &format!("column {i}"), c.len())?;
        }
        Ok(DeviceRelation { columns, rows })
    }

    /// Rows of the relation.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The columns.
    pub fn columns(&self) -> &[DeviceColumnData] {
        &self.columns
    }

    /// Column `i` (panics when out of range, like slice indexing).
    pub fn column(&self, i: usize) -> &DeviceColumnData {
        &self.columns[i]
    }

    /// The column types.
    pub fn schema(&self) -> Vec<DataType> {
        self.columns.iter().map(DeviceColumnData::data_type).collect()
    }

    /// Copies the relation back to the host.
    pub fn to_host(&self) -> Result<Relation> {
        Relation::new(self.columns.iter().map(DeviceColumnData::to_host).collect::<Result<Vec<_>>>()?)
    }
}
