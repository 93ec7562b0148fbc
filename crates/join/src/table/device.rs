//! Device columns and tables: Arrow's layout in device memory, owned ([`Column`], [`Table`]) or
//! borrowed ([`ColumnView`], [`TableView`]).

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};

use super::{DataType, HostColumn, HostTable};

/// A device column that owns its buffers (Arrow's layout; see the [module docs](super)).
pub struct Column {
    data_type: DataType,
    len: usize,
    offset: usize,
    values: DeviceBuffer<u8>,
    offsets: Option<DeviceBuffer<u8>>,
    validity: Option<DeviceBuffer<u8>>,
}

/// A borrowed device column: a type, a length, an element offset and Arrow's buffers.
#[derive(Clone, Copy)]
pub struct ColumnView<'a> {
    data_type: DataType,
    len: usize,
    offset: usize,
    values: DeviceView<'a, u8>,
    offsets: Option<DeviceView<'a, u8>>,
    validity: Option<DeviceView<'a, u8>>,
}

fn checked<'a>(v: ColumnView<'a>) -> Result<ColumnView<'a>> {
    let end = v.offset + v.len;
    let bad = |what: String| Err(Error::invalid(format!("device {} column of {} rows at offset {}: {what}", v.data_type, v.len, v.offset)));
    if let Some(b) = v.validity {
        if b.len() * 8 < end {
            return bad(format!("validity of {} bytes", b.len()));
        }
    }
    match v.data_type {
        DataType::Boolean if v.values.len() * 8 < end => bad(format!("values bitmap of {} bytes", v.values.len())),
        DataType::Utf8 | DataType::LargeUtf8 => {
            let w = if v.data_type == DataType::Utf8 { 4 } else { 8 };
            match v.offsets {
                Some(o) if o.len() >= (end + 1) * w && o.raw() % w as u64 == 0 => Ok(v),
                _ => bad("an offsets buffer too short or misaligned".into()),
            }
        }
        t => match t.byte_width() {
            Some(w) if v.values.len() < end * w || v.values.raw() % w.min(8) as u64 != 0 => bad(format!("{} bytes of values, or misaligned", v.values.len())),
            _ => Ok(v),
        },
    }
}

impl Column {
    /// Copies a host column to the device (its buffers as they are, with its offset).
    pub fn upload(stream: &Stream, host: &HostColumn) -> Result<Column> {
        host.validate()?;
        let values = stream.copy_from_host(host.values_buffer())?;
        let offsets = if host.data_type().is_string() { Some(stream.copy_from_host(host.offsets_buffer())?) } else { None };
        let validity = host.validity_buffer().map(|v| stream.copy_from_host(v)).transpose()?;
        Ok(Column { data_type: host.data_type(), len: host.len(), offset: host.offset(), values, offsets, validity })
    }

    /// A column from device buffers in Arrow's layout (validated like [`ColumnView::new`]).
    pub fn from_buffers(data_type: DataType, len: usize, values: DeviceBuffer<u8>, offsets: Option<DeviceBuffer<u8>>, validity: Option<DeviceBuffer<u8>>) -> Result<Column> {
        let c = Column { data_type, len, offset: 0, values, offsets, validity };
        checked(c.view())?;
        Ok(c)
    }

    /// The values, offsets and validity buffers (the column's offset is 0 where it was made on
    /// the device, e.g. by a gather).
    pub(crate) fn into_buffers(self) -> (DeviceBuffer<u8>, Option<DeviceBuffer<u8>>, Option<DeviceBuffer<u8>>) {
        (self.values, self.offsets, self.validity)
    }

    /// The borrowed view of the whole column.
    pub fn view(&self) -> ColumnView<'_> {
        ColumnView {
            data_type: self.data_type,
            len: self.len,
            offset: self.offset,
            values: self.values.view(),
            offsets: self.offsets.as_ref().map(DeviceBuffer::view),
            validity: self.validity.as_ref().map(DeviceBuffer::view),
        }
    }

    /// Copies the column to the host.
    pub fn to_host(&self) -> Result<HostColumn> {
        self.view().to_host(self.values.stream())
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The type.
    pub fn data_type(&self) -> DataType {
        self.data_type
    }
}

impl<'a> ColumnView<'a> {
    /// A view over Arrow's buffers; a buffer too short for `offset + len` rows of the type, or an
    /// offsets or values buffer misaligned for its element type, is an [`Error::InvalidArgument`].
    pub fn new(data_type: DataType, len: usize, offset: usize, values: DeviceView<'a, u8>, offsets: Option<DeviceView<'a, u8>>, validity: Option<DeviceView<'a, u8>>) -> Result<Self> {
        checked(ColumnView { data_type, len, offset, values, offsets, validity })
    }

    /// Rows `start .. start + len` (no copy: the offset grows).
    pub fn slice(&self, start: usize, len: usize) -> Result<ColumnView<'a>> {
        if start + len > self.len {
            return Err(Error::invalid(format!("rows {start}..{} of a column of {} rows", start + len, self.len)));
        }
        Ok(ColumnView { offset: self.offset + start, len, ..*self })
    }

    /// Copies the column to the host (the buffers whole, with the offset).
    pub fn to_host(&self, stream: &Stream) -> Result<HostColumn> {
        let values = self.values.len().min(self.values_bytes_needed());
        let stream_copy = |v: DeviceView<'_, u8>| -> Result<Vec<u8>> { stream.copy_to_host(&v) };
        let vals = stream_copy(self.values.slice(..values))?;
        let offsets = match self.offsets {
            Some(o) => stream_copy(o)?,
            None => Vec::new(),
        };
        let validity = self.validity.map(stream_copy).transpose()?;
        HostColumn::from_arrow_buffers(self.data_type, self.len, self.offset, vals, offsets, validity)
    }

    fn values_bytes_needed(&self) -> usize {
        let end = self.offset + self.len;
        match self.data_type {
            DataType::Boolean => end.div_ceil(8),
            t if t.is_string() => self.values.len(),
            t => end * t.byte_width().unwrap_or(0),
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The type.
    pub fn data_type(&self) -> DataType {
        self.data_type
    }
    /// The element offset into the buffers.
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// The values buffer (elements, the bits of a `Boolean`, or string bytes).
    pub fn values(&self) -> DeviceView<'a, u8> {
        self.values
    }
    /// The offsets buffer of a string column.
    pub fn offsets(&self) -> Option<DeviceView<'a, u8>> {
        self.offsets
    }
    /// The validity bitmap (bit `offset + i` for row `i`), if any.
    pub fn validity(&self) -> Option<DeviceView<'a, u8>> {
        self.validity
    }

    /// The rows' values as a typed view (`T` the physical type, `offset` applied); `None` for
    /// `Boolean`, strings, a `T` of another width, or misaligned buffers.
    pub fn typed<T: gpujoin_device::Pod>(&self) -> Option<DeviceView<'a, T>> {
        let w = self.data_type.byte_width()?;
        (w == std::mem::size_of::<T>()).then_some(())?;
        let v = self.values.slice(self.offset * w..(self.offset + self.len) * w);
        v.reinterpret::<T>()
    }
}

pub(super) fn check_names(names: &[String]) -> Result<()> {
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(Error::invalid(format!("two columns are called {n:?}")));
        }
    }
    Ok(())
}

pub(super) fn position(names: &[String], name: &str) -> Result<usize> {
    names.iter().position(|n| n == name).ok_or_else(|| Error::UnknownColumn { name: name.to_string(), available: format!("{names:?}") })
}

/// A device table: named columns of equal length.
pub struct Table {
    names: Vec<String>,
    columns: Vec<Column>,
}

/// A borrowed device table: named [`ColumnView`]s of equal length.
#[derive(Clone)]
pub struct TableView<'a> {
    names: Vec<String>,
    columns: Vec<ColumnView<'a>>,
}

impl Table {
    /// A table from `(name, column)` pairs (equal lengths, unique names).
    pub fn new<N: Into<String>>(columns: Vec<(N, Column)>) -> Result<Table> {
        let (names, columns): (Vec<String>, Vec<Column>) = columns.into_iter().map(|(n, c)| (n.into(), c)).unzip();
        check_names(&names)?;
        for (n, c) in names.iter().zip(&columns) {
            gpujoin_device::check_same_len(&format!("column {:?}", names[0]), columns[0].len(), &format!("column {n:?}"), c.len())?;
        }
        Ok(Table { names, columns })
    }
    /// Copies a host table to the device.
    pub fn upload(stream: &Stream, host: &HostTable) -> Result<Table> {
        let columns = host.columns().iter().map(|c| Column::upload(stream, c)).collect::<Result<Vec<_>>>()?;
        Ok(Table { names: host.names().to_vec(), columns })
    }
    /// The borrowed view.
    pub fn view(&self) -> TableView<'_> {
        TableView { names: self.names.clone(), columns: self.columns.iter().map(Column::view).collect() }
    }
    /// Copies the table to the host.
    pub fn to_host(&self) -> Result<HostTable> {
        let columns = self.columns.iter().map(Column::to_host).collect::<Result<Vec<_>>>()?;
        HostTable::new(self.names.iter().cloned().zip(columns).collect())
    }
    /// Number of rows (0 without columns).
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, Column::len)
    }
    /// The column names.
    pub fn names(&self) -> &[String] {
        &self.names
    }
    /// The columns.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Result<&Column> {
        Ok(&self.columns[position(&self.names, name)?])
    }
    /// Splits into names and columns.
    pub fn into_parts(self) -> (Vec<String>, Vec<Column>) {
        (self.names, self.columns)
    }
}

impl<'a> TableView<'a> {
    /// A view from `(name, column)` pairs (equal lengths, unique names).
    pub fn new<N: Into<String>>(columns: Vec<(N, ColumnView<'a>)>) -> Result<TableView<'a>> {
        let (names, columns): (Vec<String>, Vec<ColumnView<'a>>) = columns.into_iter().map(|(n, c)| (n.into(), c)).unzip();
        check_names(&names)?;
        for (n, c) in names.iter().zip(&columns) {
            gpujoin_device::check_same_len(&format!("column {:?}", names[0]), columns[0].len(), &format!("column {n:?}"), c.len())?;
        }
        Ok(TableView { names, columns })
    }
    /// Number of rows (0 without columns).
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, ColumnView::len)
    }
    /// The column names.
    pub fn names(&self) -> &[String] {
        &self.names
    }
    /// The columns.
    pub fn columns(&self) -> &[ColumnView<'a>] {
        &self.columns
    }
    /// The column called `name`, or [`Error::UnknownColumn`].
    pub fn column(&self, name: &str) -> Result<ColumnView<'a>> {
        Ok(self.columns[self.index_of(name)?])
    }
    /// The position of the column called `name`, or [`Error::UnknownColumn`].
    pub fn index_of(&self, name: &str) -> Result<usize> {
        position(&self.names, name)
    }
    /// Rows `start .. start + len` of every column (no copy).
    pub fn slice(&self, start: usize, len: usize) -> Result<TableView<'a>> {
        let columns = self.columns.iter().map(|c| c.slice(start, len)).collect::<Result<Vec<_>>>()?;
        Ok(TableView { names: self.names.clone(), columns })
    }
    /// Copies the table to the host.
    pub fn to_host(&self, stream: &Stream) -> Result<HostTable> {
        let cols = self.names.iter().cloned().zip(self.columns.iter().map(|c| c.to_host(stream)).collect::<Result<Vec<_>>>()?).collect();
        HostTable::new(cols)
    }
}
