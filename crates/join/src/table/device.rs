//! Device columns and tables: Arrow's layout in device memory, owned ([`Column`], [`Table`]) or
//! borrowed ([`ColumnView`], [`TableView`]).

use std::borrow::Cow;

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};

use super::{DataType, HostColumn, HostTable, NativeValue};

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

    /// A column of a device buffer's values: the type `T` stands for ([`NativeValue`]), no nulls.
    ///
    /// `Column::from_device_values(stream.copy_from_host(&[1u32, 2])?)` is a `UInt32` column.
    pub fn from_device_values<T: NativeValue + gpujoin_device::Pod>(values: DeviceBuffer<T>) -> Column {
        let len = values.len();
        Column { data_type: T::DATA_TYPE, len, offset: 0, values: values.into_bytes(), offsets: None, validity: None }
    }

    /// A fixed-width column of `data_type` over `values` (offset 0, no nulls; the caller sized
    /// `values` for its rows).
    pub(crate) fn of_fixed_width(data_type: DataType, values: DeviceBuffer<u8>) -> Column {
        let w = data_type.byte_width().expect("a fixed-width type");
        debug_assert_eq!(values.len() % w, 0);
        Column { data_type, len: values.len() / w, offset: 0, values, offsets: None, validity: None }
    }

    /// The values as a typed buffer, for a column made on the device (offset 0, no validity, `T`
    /// of the type's width); `None` otherwise.
    pub(crate) fn into_values<T: gpujoin_device::Pod>(self) -> Option<DeviceBuffer<T>> {
        (self.offset == 0 && self.validity.is_none() && self.data_type.byte_width() == Some(std::mem::size_of::<T>())).then_some(())?;
        self.values.into_typed::<T>().ok()
    }

    /// The same values without the validity bitmap (for a column whose null rows hold a value
    /// that stands for null itself, such as the row ids `1 + row` of the front door's clustered
    /// path, 0 where the side has no row).
    pub(crate) fn without_validity(self) -> Column {
        Column { validity: None, ..self }
    }

    /// The values, offsets and validity buffers (the column's offset is 0 where it was made on
    /// the device, e.g. by a gather).
    pub(crate) fn into_buffers(self) -> (DeviceBuffer<u8>, Option<DeviceBuffer<u8>>, Option<DeviceBuffer<u8>>) {
        (self.values, self.offsets, self.validity)
    }

    /// The values buffer's start for writing (a column made on the device: offset 0).
    pub(crate) fn values_ptr_mut(&mut self) -> *mut std::ffi::c_void {
        self.values.view_mut().as_mut_ptr() as *mut std::ffi::c_void
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

    /// A column of `T`'s type ([`NativeValue::DATA_TYPE`]) over a typed device view: offset 0,
    /// no validity. `ColumnView::from_values(s.copy_from_host(&[1u32, 2])?.view())` is a
    /// `UInt32` column of 2 rows; `DeviceView`s convert with `into()` too.
    pub fn from_values<T: NativeValue + gpujoin_device::Pod>(values: DeviceView<'a, T>) -> ColumnView<'a> {
        ColumnView { data_type: T::DATA_TYPE, len: values.len(), offset: 0, values: values.as_bytes(), offsets: None, validity: None }
    }

    /// The same column with a validity bitmap (bit `offset + i` for row `i`, 1 = valid); a
    /// bitmap too short for the rows is an [`Error::InvalidArgument`].
    ///
    /// `ColumnView::from(keys.view()).with_validity(words.view().as_bytes())?` for `u32`
    /// validity words.
    pub fn with_validity(self, validity: DeviceView<'a, u8>) -> Result<ColumnView<'a>> {
        checked(ColumnView { validity: Some(validity), ..self })
    }

    /// The same values without the validity bitmap (for kernels that read every row's value
    /// and leave NULLs to their caller).
    pub(crate) fn without_validity(self) -> ColumnView<'a> {
        ColumnView { validity: None, ..self }
    }

    /// Rows `start .. start + len` (no copy: the offset grows).
    pub fn slice(&self, start: usize, len: usize) -> Result<ColumnView<'a>> {
        if start + len > self.len {
            return Err(Error::invalid(format!("rows {start}..{} of a column of {} rows", start + len, self.len)));
        }
        Ok(ColumnView { offset: self.offset + start, len, ..*self })
    }

    /// Copies the column's rows to the host: only the bytes of rows `offset .. offset + len` (a
    /// slice of a large column copies the slice), as a host column at offset 0. Bytes of the
    /// buffers outside the rows (for example elements before an Arrow offset, which a producer
    /// may leave unwritten) are never read. Strings take two copies: their offsets, then the
    /// bytes they span.
    pub fn to_host(&self, stream: &Stream) -> Result<HostColumn> {
        let (start, end) = (self.offset, self.offset + self.len);
        // Bitmaps (validity, boolean values): the bytes holding bits start..end, shifted on the
        // host so that row 0 is bit 0.
        let bits = |b: DeviceView<'_, u8>| -> Result<Vec<u8>> { Ok(shift_bits(&stream.copy_to_host(&b.slice(start / 8..end.div_ceil(8)))?, start % 8, self.len)) };
        let validity = self.validity.map(bits).transpose()?;
        let (values, offsets) = match self.data_type {
            DataType::Boolean => (bits(self.values)?, Vec::new()),
            t if t.is_string() => {
                let w = if t == DataType::Utf8 { 4 } else { 8 };
                let offsets = self.offsets.ok_or_else(|| Error::invalid(format!("a {t} column without offsets")))?;
                let raw = stream.copy_to_host(&offsets.slice(start * w..(end + 1) * w))?;
                let at = |i: usize| if w == 4 { i32::from_le_bytes(raw[i * 4..i * 4 + 4].try_into().unwrap()) as i64 } else { i64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap()) };
                let (first, last) = (at(0), at(self.len));
                if first < 0 || last < first || last as usize > self.values.len() {
                    return Err(Error::invalid(format!("a {t} column of {} rows at offset {start} whose strings span bytes {first}..{last} of {}", self.len, self.values.len())));
                }
                let bytes = if last > first { stream.copy_to_host(&self.values.slice(first as usize..last as usize))? } else { Vec::new() };
                let mut rebased = Vec::with_capacity(raw.len());
                for i in 0..=self.len {
                    let o = at(i) - first;
                    if w == 4 {
                        rebased.extend_from_slice(&(o as i32).to_le_bytes());
                    } else {
                        rebased.extend_from_slice(&o.to_le_bytes());
                    }
                }
                (bytes, rebased)
            }
            t => {
                let w = t.byte_width().unwrap_or(0);
                (stream.copy_to_host(&self.values.slice(start * w..end * w))?, Vec::new())
            }
        };
        HostColumn::from_arrow_buffers(self.data_type, self.len, 0, values, offsets, validity)
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

impl<'a, T: NativeValue + gpujoin_device::Pod> From<DeviceView<'a, T>> for ColumnView<'a> {
    fn from(values: DeviceView<'a, T>) -> Self {
        ColumnView::from_values(values)
    }
}

/// Bits `shift .. shift + len` of `bytes` (LSB order) as a bitmap starting at bit 0.
///
/// `shift_bits(&[0b1011_0100], 2, 4)` is `[0b1101]`.
fn shift_bits(bytes: &[u8], shift: usize, len: usize) -> Vec<u8> {
    if shift == 0 {
        let mut out = bytes[..len.div_ceil(8)].to_vec();
        if len % 8 != 0 {
            out[len / 8] &= (1u8 << (len % 8)) - 1;
        }
        return out;
    }
    (0..len.div_ceil(8))
        .map(|i| {
            let lo = bytes[i] >> shift;
            let hi = bytes.get(i + 1).map_or(0, |b| b << (8 - shift));
            let v = lo | hi;
            let valid = (len - i * 8).min(8);
            if valid < 8 { v & ((1u8 << valid) - 1) } else { v }
        })
        .collect()
}

pub(super) fn check_names(names: &[String]) -> Result<()> {
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(Error::invalid(format!("two columns are called {n:?}")));
        }
    }
    Ok(())
}

/// Every column as long as the first (the names only formatted for the error).
fn check_lengths(names: &[String], mut lengths: impl Iterator<Item = usize>) -> Result<()> {
    let Some(first) = lengths.next() else { return Ok(()) };
    for (i, n) in lengths.enumerate() {
        if n != first {
            gpujoin_device::check_same_len(&format!("column {:?}", names[0]), first, &format!("column {:?}", names[i + 1]), n)?;
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
    /// Borrowed from the table (or relation) it views, so that a view costs no name copies.
    names: Cow<'a, [String]>,
    columns: Vec<ColumnView<'a>>,
}

impl Table {
    /// A table from `(name, column)` pairs (equal lengths, unique names).
    pub fn new<N: Into<String>>(columns: Vec<(N, Column)>) -> Result<Table> {
        let (names, columns): (Vec<String>, Vec<Column>) = columns.into_iter().map(|(n, c)| (n.into(), c)).unzip();
        check_names(&names)?;
        check_lengths(&names, columns.iter().map(Column::len))?;
        Ok(Table { names, columns })
    }
    /// Copies a host table to the device.
    pub fn upload(stream: &Stream, host: &HostTable) -> Result<Table> {
        let columns = host.columns().iter().map(|c| Column::upload(stream, c)).collect::<Result<Vec<_>>>()?;
        Ok(Table { names: host.names().to_vec(), columns })
    }
    /// The borrowed view.
    pub fn view(&self) -> TableView<'_> {
        TableView { names: Cow::Borrowed(&self.names), columns: self.columns.iter().map(Column::view).collect() }
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
        check_lengths(&names, columns.iter().map(ColumnView::len))?;
        Ok(TableView { names: Cow::Owned(names), columns })
    }
    /// A view whose names and lengths were checked when its columns were (the crate's own
    /// relations, handing out a view per call).
    pub(crate) fn of_checked(names: &'a [String], columns: Vec<ColumnView<'a>>) -> TableView<'a> {
        debug_assert_eq!(names.len(), columns.len());
        TableView { names: Cow::Borrowed(names), columns }
    }

    /// A view of columns named by their position (`"0"`, `"1"`, ...), for the algorithms' own
    /// entry points, which take key and payload columns by position.
    ///
    /// `TableView::unnamed(vec![a.view().into(), b.view().into()])?` for two device buffers of
    /// equal length.
    pub fn unnamed(columns: Vec<ColumnView<'a>>) -> Result<TableView<'a>> {
        TableView::new(columns.into_iter().enumerate().map(|(i, c)| (i.to_string(), c)).collect())
    }

    /// A view of one column, named `"0"`: `TableView::single(keys.view())`.
    pub fn single(column: impl Into<ColumnView<'a>>) -> TableView<'a> {
        TableView { names: Cow::Owned(vec!["0".to_string()]), columns: vec![column.into()] }
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
    /// A new table whose row `k` is row `map[k]` of this one, every column gathered (offset 0,
    /// owned buffers). A `map[k]` that is not a row of the table (`RowId::NONE`, `u32::MAX`)
    /// gives a row that is null in every column when `nullable`, and zeros (empty strings)
    /// otherwise; columns with a validity bitmap keep one.
    ///
    /// Rows `["a", "b", "c"]` through the map `[2, 0, 2]` are `["c", "a", "c"]`.
    pub fn gather(&self, stream: &Stream, map: &DeviceView<'_, u32>, nullable: bool) -> Result<Table> {
        let columns = self.columns.iter().map(|c| crate::kernels::table::gather(stream, c, map, nullable)).collect::<Result<Vec<_>>>()?;
        Ok(Table { names: self.names.to_vec(), columns })
    }
    /// Copies the table to the host.
    pub fn to_host(&self, stream: &Stream) -> Result<HostTable> {
        let cols = self.names.iter().cloned().zip(self.columns.iter().map(|c| c.to_host(stream)).collect::<Result<Vec<_>>>()?).collect();
        HostTable::new(cols)
    }
}

#[cfg(test)]
mod tests {
    use super::shift_bits;

    #[test]
    fn shift_bits_moves_row_zero_to_bit_zero_and_clears_the_rest() {
        assert_eq!(shift_bits(&[0b1011_0100], 2, 4), [0b1101]);
        assert_eq!(shift_bits(&[0xff, 0xff], 0, 9), [0xff, 0x01]);
        assert_eq!(shift_bits(&[0b1000_0000, 0b0000_0101], 7, 3), [0b011]);
        assert_eq!(shift_bits(&[0b1000_0000, 0b1111_0101], 7, 9), [0b1110_1011, 0b1]);
        assert!(shift_bits(&[0xff], 3, 0).is_empty());
        // Against a bit-by-bit shift, every offset and length over two random bytes.
        let bytes = [0b0110_1001u8, 0b1100_0111, 0b1010_0011];
        for shift in 0usize..8 {
            for len in 0..=(24 - shift) {
                let out = shift_bits(&bytes[..(shift + len).div_ceil(8).max(1)], shift, len);
                assert_eq!(out.len(), len.div_ceil(8));
                for i in 0..out.len() * 8 {
                    let want = i < len && bytes[(shift + i) / 8] >> ((shift + i) % 8) & 1 == 1;
                    assert_eq!(out[i / 8] >> (i % 8) & 1 == 1, want, "shift {shift} len {len} bit {i}");
                }
            }
        }
    }
}
