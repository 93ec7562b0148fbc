//! Arrow arrays on the host: prepared for the device (dictionaries decoded, views made offsets +
//! bytes), converted to and from gpujoin's [`HostTable`], and built back from plain buffers.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{make_array, Array, ArrayRef, LargeStringArray, RecordBatch, RecordBatchOptions, StringViewArray};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_schema::{DataType as ArrowType, Field, Schema, SchemaRef};
use gpujoin_device::{Error, Result};
use gpujoin_join::table::{DataType, HostColumn, HostTable};

use crate::bits::bits_from;
use crate::types::{arrow_error, can_download_as, default_field, device_type};

/// String offsets of a prepared column: `len + 1` entries, not rebased (the first may be > 0).
#[derive(Clone, Copy)]
pub(crate) enum Offsets<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

impl Offsets<'_> {
    /// Bytes per offset.
    pub(crate) fn width(&self) -> usize {
        match self {
            Offsets::I32(_) => 4,
            Offsets::I64(_) => 8,
        }
    }

    pub(crate) fn first(&self) -> i64 {
        match self {
            Offsets::I32(o) => o[0] as i64,
            Offsets::I64(o) => o[0],
        }
    }
    pub(crate) fn last(&self) -> i64 {
        match self {
            Offsets::I32(o) => o[o.len() - 1] as i64,
            Offsets::I64(o) => o[o.len() - 1],
        }
    }
}

/// One Arrow column in the physical form of its device type: a dictionary decoded, a
/// `Utf8View` turned into `LargeUtf8` offsets + bytes; anything else shares the input's buffers.
pub(crate) struct Prepared {
    pub device_type: DataType,
    data: ArrayData,
}

impl Prepared {
    /// Prepares `array`, the column `name`; a typed error for a type gpujoin does not hold.
    pub(crate) fn new(name: &str, array: &ArrayRef) -> Result<Prepared> {
        let device_type = device_type(name, array.data_type())?;
        let array = decoded(name, array)?;
        Ok(Prepared { device_type, data: array.to_data() })
    }

    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    /// Fixed-width values: exactly `len * width` bytes.
    pub(crate) fn fixed_bytes(&self) -> &[u8] {
        let w = self.device_type.byte_width().expect("fixed-width column");
        let o = self.data.offset();
        &self.data.buffers()[0].as_slice()[o * w..(o + self.len()) * w]
    }

    /// Boolean values: the bitmap and the bit of row 0.
    pub(crate) fn bool_bits(&self) -> (&[u8], usize) {
        (self.data.buffers()[0].as_slice(), self.data.offset())
    }

    /// Strings: `len + 1` offsets into [`Prepared::string_bytes`].
    pub(crate) fn string_offsets(&self) -> Offsets<'_> {
        let (o, n) = (self.data.offset(), self.len() + 1);
        match self.device_type {
            DataType::Utf8 => Offsets::I32(&self.data.buffers()[0].typed_data::<i32>()[o..o + n]),
            _ => Offsets::I64(&self.data.buffers()[0].typed_data::<i64>()[o..o + n]),
        }
    }

    /// Strings: the whole values buffer (the offsets index it).
    pub(crate) fn string_bytes(&self) -> &[u8] {
        self.data.buffers()[1].as_slice()
    }

    /// The validity bitmap and the bit of row 0, or `None` when no row is null.
    pub(crate) fn validity(&self) -> Option<(&[u8], usize)> {
        self.data.nulls().filter(|n| n.null_count() > 0).map(|n| (n.validity(), n.offset()))
    }

    /// Bytes this column takes on the device (values, offsets; validity counted apart).
    pub(crate) fn device_bytes(&self) -> usize {
        match self.device_type {
            DataType::Boolean => self.len().div_ceil(8),
            DataType::Utf8 | DataType::LargeUtf8 => {
                let o = self.string_offsets();
                (o.last() - o.first()) as usize
            }
            t => self.len() * t.byte_width().unwrap(),
        }
    }
}

/// `array` in the physical form of its device type (see [`Prepared`]).
fn decoded(name: &str, array: &ArrayRef) -> Result<ArrayRef> {
    match array.data_type() {
        ArrowType::Dictionary(..) => {
            let d = array.as_any_dictionary();
            let plain = arrow_select::take::take(d.values().as_ref(), d.keys(), None).map_err(|e| arrow_error(&format!("decoding the dictionary of column {name:?}"), e))?;
            decoded(name, &plain)
        }
        ArrowType::Utf8View => Ok(Arc::new(views_to_large(array.as_string_view()))),
        _ => Ok(array.clone()),
    }
}

/// A `Utf8View` array as `LargeUtf8` (offsets + one bytes buffer).
fn views_to_large(a: &StringViewArray) -> LargeStringArray {
    let bytes: usize = (0..a.len()).filter(|&i| a.is_valid(i)).map(|i| a.value(i).len()).sum();
    let mut values = Vec::with_capacity(bytes);
    let mut offsets = Vec::with_capacity(a.len() + 1);
    offsets.push(0i64);
    for i in 0..a.len() {
        if a.is_valid(i) {
            values.extend_from_slice(a.value(i).as_bytes());
        }
        offsets.push(values.len() as i64);
    }
    // SAFETY: the bytes are the views' valid UTF-8 strings, the offsets their monotone ends.
    unsafe { LargeStringArray::new_unchecked(arrow_buffer::OffsetBuffer::new_unchecked(offsets.into()), Buffer::from_vec(values), a.nulls().cloned()) }
}

/// A record batch as a gpujoin host table (dictionaries decoded, views as `LargeUtf8`, every
/// buffer copied and starting at row 0).
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int32Array, RecordBatch, StringArray};
/// let batch = RecordBatch::try_from_iter([
///     ("k", Arc::new(Int32Array::from(vec![Some(1), None])) as _),
///     ("s", Arc::new(StringArray::from(vec!["a", "bc"])) as _),
/// ]).unwrap();
/// let t = gpujoin_arrow::to_host_table(&batch).unwrap();
/// assert_eq!((t.rows(), t.column("k").unwrap().null_count()), (2, 1));
/// assert_eq!(gpujoin_arrow::from_host_table(&t, Some(&batch.schema())).unwrap(), batch);
/// ```
pub fn to_host_table(batch: &RecordBatch) -> Result<HostTable> {
    let schema = batch.schema();
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        columns.push((field.name().clone(), host_column(&Prepared::new(field.name(), array)?)?));
    }
    HostTable::new(columns)
}

fn host_column(p: &Prepared) -> Result<HostColumn> {
    let len = p.len();
    let validity = p.validity().map(|(b, bit)| bits_from(b, bit, len));
    let (values, offsets) = match p.device_type {
        DataType::Boolean => {
            let (b, bit) = p.bool_bits();
            (bits_from(b, bit, len), Vec::new())
        }
        DataType::Utf8 | DataType::LargeUtf8 => {
            let o = p.string_offsets();
            let (first, last) = (o.first(), o.last());
            let bytes = p.string_bytes()[first as usize..last as usize].to_vec();
            let offsets = match o {
                Offsets::I32(o) => o.iter().flat_map(|&x| (x - first as i32).to_le_bytes()).collect(),
                Offsets::I64(o) => o.iter().flat_map(|&x| (x - first).to_le_bytes()).collect(),
            };
            (bytes, offsets)
        }
        _ => (p.fixed_bytes().to_vec(), Vec::new()),
    };
    HostColumn::from_arrow_buffers(p.device_type, len, 0, values, offsets, validity)
}

/// A host table as a record batch. `schema`, when given, names the Arrow type of each column
/// (by position): a timestamp's time zone, `Utf8View` for strings, nullability; without it each
/// column gets its default type ([`crate::arrow_type`]) and is nullable when it has nulls.
pub fn from_host_table(table: &HostTable, schema: Option<&Schema>) -> Result<RecordBatch> {
    let fields = output_fields(table.names(), &table.columns().iter().map(|c| (c.data_type(), c.null_count() > 0)).collect::<Vec<_>>(), schema)?;
    let mut arrays = Vec::with_capacity(fields.len());
    for (field, c) in fields.iter().zip(table.columns()) {
        let offsets = c.data_type().is_string().then(|| Buffer::from_slice_ref(c.offsets_buffer()));
        let validity = c.validity_buffer().map(Buffer::from_slice_ref);
        arrays.push(build_array(field, c.data_type(), c.len(), c.offset(), Buffer::from_slice_ref(c.values_buffer()), offsets, validity)?);
    }
    batch(fields, arrays, table.rows())
}

/// The fields of an output: `schema`'s, checked against the device types, or the defaults.
pub(crate) fn output_fields(names: &[String], columns: &[(DataType, bool)], schema: Option<&Schema>) -> Result<Vec<Field>> {
    match schema {
        None => Ok(names.iter().zip(columns).map(|(n, &(t, nulls))| default_field(n, t, nulls)).collect()),
        Some(s) => {
            if s.fields().len() != columns.len() {
                return Err(Error::invalid(format!("a schema of {} fields for a table of {} columns", s.fields().len(), columns.len())));
            }
            s.fields()
                .iter()
                .zip(columns)
                .map(|(f, &(t, nulls))| {
                    let target = match f.data_type() {
                        ArrowType::Dictionary(_, v) => v.as_ref(),
                        other => other,
                    };
                    if !can_download_as(t, target) {
                        return Err(Error::TypeMismatch { what: format!("column {:?} as the schema's field", f.name()), left: t.to_string(), right: target.to_string() });
                    }
                    if nulls && !f.is_nullable() {
                        return Err(Error::invalid(format!("column {:?} has nulls but the schema's field is not nullable", f.name())));
                    }
                    Ok(Field::new(f.name(), target.clone(), f.is_nullable()).with_metadata(f.metadata().clone()))
                })
                .collect()
        }
    }
}

pub(crate) fn batch(fields: Vec<Field>, arrays: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    RecordBatch::try_new_with_options(schema, arrays, &RecordBatchOptions::new().with_row_count(Some(rows))).map_err(|e| arrow_error("building a record batch", e))
}

/// An Arrow array of `field`'s type from Arrow's buffers of a device-type column read from
/// element `offset` (strings: `offsets` index `values`; `validity` bit `offset + i` is row `i`).
/// The layout is checked (buffer sizes, the offsets' ends); string bytes are trusted to be the
/// UTF-8 they were when they came in (see the comment inside).
pub(crate) fn build_array(field: &Field, t: DataType, len: usize, offset: usize, values: Buffer, offsets: Option<Buffer>, validity: Option<Buffer>) -> Result<ArrayRef> {
    let physical = match field.data_type() {
        ArrowType::Utf8View => arrow_type_of_strings(t),
        other => other.clone(),
    };
    let mut b = ArrayData::builder(physical).len(len).offset(offset).null_bit_buffer(validity);
    b = match offsets {
        Some(o) => b.add_buffer(o).add_buffer(values),
        None => b.add_buffer(values),
    };
    // SAFETY: the layout is checked right below (buffer sizes, the offsets' ends); the values
    // are what gpujoin keeps intact: strings come from Arrow arrays (valid UTF-8 by Arrow's
    // contract) or a C Device Data Interface producer (valid by the spec's), and gathers copy
    // whole strings with monotone offsets.
    let data = unsafe { b.build_unchecked() };
    data.validate().map_err(|e| Error::invalid(format!("column {:?}: {e}", field.name())))?;
    let array = make_array(data);
    Ok(match field.data_type() {
        ArrowType::Utf8View => Arc::new(match t {
            DataType::Utf8 => StringViewArray::from(array.as_string::<i32>()),
            _ => StringViewArray::from(array.as_string::<i64>()),
        }),
        _ => array,
    })
}

fn arrow_type_of_strings(t: DataType) -> ArrowType {
    if t == DataType::Utf8 {
        ArrowType::Utf8
    } else {
        ArrowType::LargeUtf8
    }
}
