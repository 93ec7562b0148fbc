//! Host columns and tables: the mirror of the device model used to build inputs, read outputs
//! and compute CPU references.

use gpujoin_device::{Error, Result};

use super::{DataType, TimeUnit};

/// A host column in Arrow's layout (see the [module docs](super)).
#[derive(Debug, Clone, PartialEq)]
pub struct HostColumn {
    data_type: DataType,
    len: usize,
    offset: usize,
    /// Fixed-width elements (little-endian), the values bitmap of a `Boolean`, or the bytes of
    /// the strings.
    values: Vec<u8>,
    /// Strings: `i32` (`Utf8`) or `i64` (`LargeUtf8`) offsets, little-endian, at least
    /// `offset + len + 1` of them. Empty for other types.
    offsets: Vec<u8>,
    /// Bit `offset + i` is row `i`'s validity; `None`: every row is valid.
    validity: Option<Vec<u8>>,
}

/// A Rust value type that is the physical type of a fixed-width [`DataType`].
pub trait NativeValue: Copy + 'static {
    /// The type a column of these values has by default.
    const DATA_TYPE: DataType;
    /// Appends the little-endian bytes of the value.
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! native {
    ($t:ty, $d:expr) => {
        impl NativeValue for $t {
            const DATA_TYPE: DataType = $d;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
native!(i8, DataType::Int8);
native!(i16, DataType::Int16);
native!(i32, DataType::Int32);
native!(i64, DataType::Int64);
native!(u8, DataType::UInt8);
native!(u16, DataType::UInt16);
native!(u32, DataType::UInt32);
native!(u64, DataType::UInt64);
native!(f32, DataType::Float32);
native!(f64, DataType::Float64);
native!(i128, DataType::Decimal128(38, 0));

/// One value of a host column, as the CPU reference compares it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    /// Every integer type, dates, timestamps and the unscaled value of a decimal.
    Int(i128),
    /// `Float32` (exactly widened) and `Float64`.
    Float(f64),
    /// The bytes of a string.
    Str(&'a [u8]),
}

fn bit(bits: &[u8], i: usize) -> bool {
    bits[i / 8] >> (i % 8) & 1 == 1
}

fn pack_bits(bits: impl IntoIterator<Item = bool>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, b) in bits.into_iter().enumerate() {
        if i % 8 == 0 {
            out.push(0);
        }
        if b {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

impl HostColumn {
    /// A column of values without nulls, of the values' default type (`i128` gives
    /// `Decimal128(38, 0)`; see [`HostColumn::with_type`] for dates, timestamps, decimals).
    ///
    /// ```
    /// # use gpujoin_join::table::*;
    /// let c = HostColumn::from_values(vec![1.5f64, -0.0]);
    /// assert_eq!((c.len(), c.data_type(), c.value(0)), (2, DataType::Float64, Value::Float(1.5)));
    /// ```
    pub fn from_values<T: NativeValue>(values: Vec<T>) -> HostColumn {
        let mut bytes = Vec::with_capacity(values.len() * std::mem::size_of::<T>());
        values.iter().for_each(|v| v.put(&mut bytes));
        HostColumn { data_type: T::DATA_TYPE, len: values.len(), offset: 0, values: bytes, offsets: Vec::new(), validity: None }
    }

    /// A column with nulls where the option is `None` (their values are zero).
    pub fn from_options<T: NativeValue + Default>(values: Vec<Option<T>>) -> HostColumn {
        let valid: Vec<bool> = values.iter().map(Option::is_some).collect();
        let c = HostColumn::from_values(values.into_iter().map(Option::unwrap_or_default).collect());
        c.with_validity(&valid).expect("one validity entry a row")
    }

    /// A `Boolean` column.
    pub fn from_bools(values: &[bool]) -> HostColumn {
        HostColumn { data_type: DataType::Boolean, len: values.len(), offset: 0, values: pack_bits(values.iter().copied()), offsets: Vec::new(), validity: None }
    }

    /// A `Utf8` column (`i32` offsets) without nulls.
    pub fn utf8<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> HostColumn {
        Self::strings(values.into_iter().map(Some), false)
    }

    /// A `Utf8` column with nulls where the option is `None`.
    pub fn utf8_options<S: AsRef<str>>(values: impl IntoIterator<Item = Option<S>>) -> HostColumn {
        Self::strings(values, false)
    }

    /// A `LargeUtf8` column (`i64` offsets) with nulls where the option is `None`.
    pub fn large_utf8_options<S: AsRef<str>>(values: impl IntoIterator<Item = Option<S>>) -> HostColumn {
        Self::strings(values, true)
    }

    fn strings<S: AsRef<str>>(values: impl IntoIterator<Item = Option<S>>, large: bool) -> HostColumn {
        let (mut bytes, mut ends, mut valid) = (Vec::new(), vec![0i64], Vec::new());
        for v in values {
            if let Some(s) = &v {
                bytes.extend_from_slice(s.as_ref().as_bytes());
            }
            valid.push(v.is_some());
            ends.push(bytes.len() as i64);
        }
        assert!(large || bytes.len() <= i32::MAX as usize, "Utf8 strings of over 2^31 - 1 bytes: use LargeUtf8");
        let mut offsets = Vec::new();
        for e in ends {
            if large {
                offsets.extend_from_slice(&e.to_le_bytes());
            } else {
                offsets.extend_from_slice(&(e as i32).to_le_bytes());
            }
        }
        let data_type = if large { DataType::LargeUtf8 } else { DataType::Utf8 };
        let c = HostColumn { data_type, len: valid.len(), offset: 0, values: bytes, offsets, validity: None };
        if valid.iter().all(|&v| v) {
            c
        } else {
            c.with_validity(&valid).expect("one validity entry a row")
        }
    }

    /// The same buffers read as another type of the same physical layout (`Int32` as `Date32`,
    /// `Int64` as `Timestamp`, `i128` as `Decimal128(p, s)`, ...).
    ///
    /// ```
    /// # use gpujoin_join::table::*;
    /// let d = HostColumn::from_values(vec![19000i32]).with_type(DataType::Date32)?;
    /// assert_eq!(d.data_type(), DataType::Date32);
    /// assert!(HostColumn::from_values(vec![1i32]).with_type(DataType::Int64).is_err());
    /// # Ok::<(), gpujoin_device::Error>(())
    /// ```
    pub fn with_type(mut self, data_type: DataType) -> Result<HostColumn> {
        let same = self.data_type.byte_width().is_some() && self.data_type.byte_width() == data_type.byte_width();
        if !same && self.data_type != data_type {
            return Err(Error::invalid(format!("a {} column cannot be read as {data_type}: their layouts differ", self.data_type)));
        }
        if let DataType::Decimal128(p, s) = data_type {
            if p == 0 || p > 38 || (s as i32) > p as i32 {
                return Err(Error::invalid(format!("Decimal128({p}, {s}): precision must be 1 to 38 and scale at most the precision")));
            }
        }
        self.data_type = data_type;
        Ok(self)
    }

    /// A `Timestamp(unit)` column.
    pub fn timestamps(unit: TimeUnit, values: Vec<i64>) -> HostColumn {
        HostColumn::from_values(values).with_type(DataType::Timestamp(unit)).expect("i64 layout")
    }

    /// Sets the validity (true = valid) of every row.
    pub fn with_validity(mut self, valid: &[bool]) -> Result<HostColumn> {
        gpujoin_device::check_same_len("rows", self.len, "validity entries", valid.len())?;
        let mut bits = vec![true; self.offset];
        bits.extend_from_slice(valid);
        self.validity = Some(pack_bits(bits));
        Ok(self)
    }

    /// A column from Arrow's buffers, validated: `values` (see the module docs), `offsets`
    /// (strings), an optional validity bitmap, read from element `offset` for `len` rows.
    pub fn from_arrow_buffers(data_type: DataType, len: usize, offset: usize, values: Vec<u8>, offsets: Vec<u8>, validity: Option<Vec<u8>>) -> Result<HostColumn> {
        let c = HostColumn { data_type, len, offset, values, offsets, validity };
        c.validate()?;
        Ok(c)
    }

    /// Checks that the buffers hold what the type, length and offset need, and (strings) that
    /// the offsets are monotone and within the bytes.
    pub fn validate(&self) -> Result<()> {
        let end = self.offset + self.len;
        let bad = |what: String| Err(Error::invalid(format!("{} column of {} rows at offset {}: {what}", self.data_type, self.len, self.offset)));
        if let Some(v) = &self.validity {
            if v.len() * 8 < end {
                return bad(format!("validity of {} bytes", v.len()));
            }
        }
        match self.data_type {
            DataType::Boolean if self.values.len() * 8 < end => bad(format!("values bitmap of {} bytes", self.values.len())),
            DataType::Utf8 | DataType::LargeUtf8 => {
                let w = if self.data_type == DataType::Utf8 { 4 } else { 8 };
                if self.offsets.len() < (end + 1) * w {
                    return bad(format!("{} bytes of offsets", self.offsets.len()));
                }
                for i in self.offset..end {
                    let (a, b) = (self.offset_at(i), self.offset_at(i + 1));
                    if a < 0 || b < a || b as usize > self.values.len() {
                        return bad(format!("string {} spans {a}..{b} of {} bytes", i - self.offset, self.values.len()));
                    }
                }
                Ok(())
            }
            t => match t.byte_width() {
                Some(w) if self.values.len() < end * w => bad(format!("{} bytes of values", self.values.len())),
                _ => Ok(()),
            },
        }
    }

    fn offset_at(&self, i: usize) -> i64 {
        if self.data_type == DataType::Utf8 {
            i32::from_le_bytes(self.offsets[i * 4..i * 4 + 4].try_into().unwrap()) as i64
        } else {
            i64::from_le_bytes(self.offsets[i * 8..i * 8 + 8].try_into().unwrap())
        }
    }

    /// Rows `start .. start + len`, sharing nothing but the layout: the buffers are copied and the
    /// element offset grows, as an Arrow slice (the validity then starts at a bit offset).
    pub fn slice(&self, start: usize, len: usize) -> Result<HostColumn> {
        if start + len > self.len {
            return Err(Error::invalid(format!("rows {start}..{} of a column of {} rows", start + len, self.len)));
        }
        Ok(HostColumn { offset: self.offset + start, len, ..self.clone() })
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
    /// The values buffer (see the field docs of the module).
    pub fn values_buffer(&self) -> &[u8] {
        &self.values
    }
    /// The offsets buffer of a string column (empty otherwise).
    pub fn offsets_buffer(&self) -> &[u8] {
        &self.offsets
    }
    /// The validity bitmap, if any.
    pub fn validity_buffer(&self) -> Option<&[u8]> {
        self.validity.as_deref()
    }

    /// Whether row `i` is valid (not null).
    pub fn is_valid(&self, i: usize) -> bool {
        self.validity.as_ref().is_none_or(|v| bit(v, self.offset + i))
    }

    /// Rows that are null.
    pub fn null_count(&self) -> usize {
        (0..self.len).filter(|&i| !self.is_valid(i)).count()
    }

    /// The value of row `i` ([`Value::Null`] for a null row).
    pub fn value(&self, i: usize) -> Value<'_> {
        assert!(i < self.len, "row {i} of a column of {} rows", self.len);
        if !self.is_valid(i) {
            return Value::Null;
        }
        let j = self.offset + i;
        let b = |w: usize| &self.values[j * w..j * w + w];
        use DataType::*;
        match self.data_type {
            Int8 => Value::Int(b(1)[0] as i8 as i128),
            UInt8 => Value::Int(b(1)[0] as i128),
            Int16 => Value::Int(i16::from_le_bytes(b(2).try_into().unwrap()) as i128),
            UInt16 => Value::Int(u16::from_le_bytes(b(2).try_into().unwrap()) as i128),
            Int32 | Date32 => Value::Int(i32::from_le_bytes(b(4).try_into().unwrap()) as i128),
            UInt32 => Value::Int(u32::from_le_bytes(b(4).try_into().unwrap()) as i128),
            Int64 | Date64 | Timestamp(_) => Value::Int(i64::from_le_bytes(b(8).try_into().unwrap()) as i128),
            UInt64 => Value::Int(u64::from_le_bytes(b(8).try_into().unwrap()) as i128),
            Decimal128(..) => Value::Int(i128::from_le_bytes(b(16).try_into().unwrap())),
            Float32 => Value::Float(f32::from_le_bytes(b(4).try_into().unwrap()) as f64),
            Float64 => Value::Float(f64::from_le_bytes(b(8).try_into().unwrap())),
            Boolean => Value::Bool(bit(&self.values, j)),
            Utf8 | LargeUtf8 => Value::Str(&self.values[self.offset_at(j) as usize..self.offset_at(j + 1) as usize]),
        }
    }

    /// Every row's value, in order.
    pub fn values(&self) -> Vec<Value<'_>> {
        (0..self.len).map(|i| self.value(i)).collect()
    }
}

/// A host table: named columns of equal length (names unique).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostTable {
    names: Vec<String>,
    columns: Vec<HostColumn>,
}

impl HostTable {
    /// A table from `(name, column)` pairs; different lengths, duplicate names or a malformed
    /// column are an [`Error::InvalidArgument`].
    pub fn new<N: Into<String>>(columns: Vec<(N, HostColumn)>) -> Result<HostTable> {
        let (names, columns): (Vec<String>, Vec<HostColumn>) = columns.into_iter().map(|(n, c)| (n.into(), c)).unzip();
        super::device::check_names(&names)?;
        for (n, c) in names.iter().zip(&columns) {
            c.validate()?;
            gpujoin_device::check_same_len(&format!("column {:?}", names[0]), columns[0].len(), &format!("column {n:?}"), c.len())?;
        }
        Ok(HostTable { names, columns })
    }
    /// Number of rows (0 without columns).
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, HostColumn::len)
    }
    /// The column names, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }
    /// The columns, in order.
    pub fn columns(&self) -> &[HostColumn] {
        &self.columns
    }
    /// The column called `name`, or [`Error::UnknownColumn`].
    pub fn column(&self, name: &str) -> Result<&HostColumn> {
        let i = super::device::position(&self.names, name)?;
        Ok(&self.columns[i])
    }
    /// Rows `start .. start + len` of every column.
    pub fn slice(&self, start: usize, len: usize) -> Result<HostTable> {
        let columns = self.columns.iter().map(|c| c.slice(start, len)).collect::<Result<Vec<_>>>()?;
        Ok(HostTable { names: self.names.clone(), columns })
    }
}

impl HostColumn {
    /// Row `i` as text: `NULL`, numbers, decimals with their scale, strings as they are.
    pub fn display(&self, i: usize) -> String {
        match (self.value(i), self.data_type) {
            (Value::Null, _) => "NULL".into(),
            (Value::Int(v), DataType::Decimal128(_, s)) if s > 0 => {
                let d = 10i128.pow(s as u32);
                let sign = if v < 0 { "-" } else { "" };
                format!("{sign}{}.{:0w$}", (v / d).abs(), (v % d).abs(), w = s as usize)
            }
            (Value::Int(v), _) => v.to_string(),
            (Value::Float(v), _) => v.to_string(),
            (Value::Bool(b), _) => b.to_string(),
            (Value::Str(s), _) => String::from_utf8_lossy(s).into_owned(),
        }
    }
}

/// The table as aligned text, one line a row, rows in order.
///
/// ```
/// # use gpujoin_join::table::*;
/// let t = HostTable::new(vec![("id", HostColumn::from_values(vec![7i32])), ("name", HostColumn::utf8_options([None::<&str>]))])?;
/// assert_eq!(t.to_string(), "id | name\n---+-----\n7  | NULL\n");
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
impl std::fmt::Display for HostTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cells: Vec<Vec<String>> = self.columns.iter().map(|c| (0..c.len()).map(|i| c.display(i)).collect()).collect();
        let widths: Vec<usize> = self.names.iter().zip(&cells).map(|(n, c)| c.iter().map(|s| s.chars().count()).chain([n.chars().count()]).max().unwrap_or(0)).collect();
        let line = |vals: Vec<&str>| -> String {
            let parts: Vec<String> = vals.iter().zip(&widths).map(|(v, w)| format!("{v:<w$}")).collect();
            parts.join(" | ").trim_end().to_string()
        };
        writeln!(f, "{}", line(self.names.iter().map(String::as_str).collect()))?;
        writeln!(f, "{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-+-"))?;
        for r in 0..self.rows() {
            writeln!(f, "{}", line(cells.iter().map(|c| c[r].as_str()).collect()))?;
        }
        Ok(())
    }
}
