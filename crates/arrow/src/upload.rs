//! Record batches to a device [`Table`]: every column appended in place on the device through
//! the pinned staging ring, batch after batch.
//!
//! ```no_run
//! use std::sync::Arc;
//! use arrow_array::{Int32Array, RecordBatch};
//! # fn f(stream: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let b = RecordBatch::try_from_iter([("k", Arc::new(Int32Array::from(vec![1, 2, 3])) as _)]).unwrap();
//! let table = gpujoin_arrow::upload_batches(stream, &b.schema(), [b.clone(), b])?;
//! assert_eq!(table.rows(), 6);
//! # Ok(()) }
//! ```

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{Schema, SchemaRef};
use rayon::prelude::*;
use gpujoin_device::{DeviceBuffer, Error, HostRegistration, Result, Stream};
use gpujoin_join::table::{Column, DataType, Table};

use crate::bits::copy_bits;
use crate::host::{Offsets, Prepared};
use crate::staging::{Staging, StagingOptions};
use crate::types::{arrow_error, device_types};

/// Appends record batches of one schema to a device table.
pub struct Uploader {
    stream: Stream,
    schema: SchemaRef,
    columns: Vec<ColumnBuilder>,
    rows: usize,
    batches: usize,
    staging: Staging,
}

/// One device column being appended to: buffers with room to grow, the bytes in use, and the
/// partial last byte of each bitmap (kept on the host, rewritten with the next batch's bits).
struct ColumnBuilder {
    name: String,
    data_type: DataType,
    values: DeviceBuffer<u8>,
    values_used: usize,
    offsets: Option<DeviceBuffer<u8>>,
    validity: Option<DeviceBuffer<u8>>,
    values_carry: u8,
    validity_carry: u8,
}

/// `buf` with room for `needed` bytes (grown to at least twice its size, keeping `used` bytes).
fn reserve(stream: &Stream, buf: &mut DeviceBuffer<u8>, used: usize, needed: usize) -> Result<()> {
    if needed <= buf.len() {
        return Ok(());
    }
    let mut grown = stream.alloc::<u8>(needed.max(buf.len().saturating_mul(2)))?;
    stream.copy_device_to_device(&buf.slice(..used), &mut grown.slice_mut(..used))?;
    *buf = grown;
    Ok(())
}

impl Uploader {
    /// An uploader for batches of `schema`; a column type gpujoin does not hold is an
    /// [`Error::Unsupported`] naming the column, before anything is allocated.
    pub fn new(stream: &Stream, schema: &Schema, staging: StagingOptions) -> Result<Uploader> {
        let types = device_types(schema)?;
        let mut columns = Vec::with_capacity(types.len());
        for (f, t) in schema.fields().iter().zip(types) {
            let offsets = if t.is_string() { Some(stream.alloc_zeroed::<u8>(if t == DataType::Utf8 { 4 } else { 8 })?) } else { None };
            columns.push(ColumnBuilder { name: f.name().clone(), data_type: t, values: stream.alloc::<u8>(0)?, values_used: 0, offsets, validity: None, values_carry: 0, validity_carry: 0 });
        }
        Ok(Uploader { stream: stream.clone(), schema: std::sync::Arc::new(schema.clone()), columns, rows: 0, batches: 0, staging: Staging::new(stream, staging)? })
    }

    /// Rows appended so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Where the staged copies' host time went so far.
    pub fn staging_stats(&self) -> crate::StagingStats {
        self.staging.stats
    }

    /// Makes room for `rows` more rows, so that the device buffers need not grow for them (growing
    /// copies a buffer on the device); string columns also get room for `string_bytes[i]` more
    /// bytes in their `i`-th position among the string columns (missing entries: none).
    pub fn reserve(&mut self, rows: usize, string_bytes: &[usize]) -> Result<()> {
        let total = self.rows + rows;
        let mut strings = string_bytes.iter().copied();
        for c in &mut self.columns {
            let (bytes, width) = match c.data_type {
                DataType::Boolean => (total.div_ceil(8), 0),
                DataType::Utf8 => (c.values_used + strings.next().unwrap_or(0), 4),
                DataType::LargeUtf8 => (c.values_used + strings.next().unwrap_or(0), 8),
                t => (total * t.byte_width().unwrap(), 0),
            };
            reserve(&self.stream, &mut c.values, c.values_used, bytes)?;
            if let Some(o) = c.offsets.as_mut() {
                reserve(&self.stream, o, (self.rows + 1) * width, (total + 1) * width)?;
            }
            if let Some(v) = c.validity.as_mut() {
                reserve(&self.stream, v, self.rows.div_ceil(8), total.div_ceil(8))?;
            }
        }
        Ok(())
    }

    /// Appends `batch`, which must have the uploader's schema (names and types). Its host
    /// buffers may be dropped or reused as soon as this returns.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        let s = batch.schema();
        let same = s.fields().len() == self.schema.fields().len()
            && s.fields().iter().zip(self.schema.fields()).all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        if !same {
            return Err(Error::TypeMismatch { what: format!("batch {} of the stream", self.batches), left: s.to_string(), right: format!("the stream's schema {}", self.schema) });
        }
        let prepared = self.schema.fields().iter().zip(batch.columns()).map(|(f, a)| Prepared::new(f.name(), a)).collect::<Result<Vec<_>>>()?;
        let n = batch.num_rows();
        let string_bytes: Vec<usize> = prepared.iter().filter(|p| p.device_type.is_string()).map(Prepared::device_bytes).collect();
        self.reserve(n, &string_bytes)?;
        // Registered inputs stay registered until every copy of the batch is queued; dropping
        // them then waits for those copies, so the batch may be dropped when this returns.
        let mut registered = Vec::new();
        for (c, p) in self.columns.iter_mut().zip(&prepared) {
            c.append(&self.stream, &mut self.staging, p, self.rows, &mut registered)?;
        }
        drop(registered);
        self.rows += n;
        self.batches += 1;
        Ok(())
    }

    /// The device table of every batch pushed (its buffers trimmed to their used length).
    pub fn finish(self) -> Result<Table> {
        let rows = self.rows;
        let mut columns = Vec::with_capacity(self.columns.len());
        for c in self.columns {
            let mut values = c.values;
            values.truncate(c.values_used.max(if c.data_type == DataType::Boolean { rows.div_ceil(8) } else { 0 }));
            let offsets = c.offsets.map(|mut o| {
                o.truncate((rows + 1) * if c.data_type == DataType::Utf8 { 4 } else { 8 });
                o
            });
            let validity = c.validity.map(|mut v| {
                v.truncate(rows.div_ceil(8));
                v
            });
            columns.push((c.name, Column::from_buffers(c.data_type, rows, values, offsets, validity)?));
        }
        Table::new(columns)
    }
}

impl ColumnBuilder {
    /// Appends `p` (`n` rows) after the first `rows` rows.
    fn append<'p>(&mut self, stream: &Stream, staging: &mut Staging, p: &'p Prepared, rows: usize, registered: &mut Vec<HostRegistration<'p>>) -> Result<()> {
        let n = p.len();
        match self.data_type {
            DataType::Boolean => {
                let (bits, bit) = p.bool_bits();
                self.values_carry = append_bits(stream, staging, &mut self.values, rows, self.values_carry, Some((bits, bit)), n)?;
                self.values_used = (rows + n).div_ceil(8);
            }
            DataType::Utf8 | DataType::LargeUtf8 => self.append_strings(stream, staging, p, rows, registered)?,
            _ => {
                let bytes = p.fixed_bytes();
                let at = self.values_used;
                registered.extend(staging.upload_registering(stream, bytes, self.values.slice_mut(at..at + bytes.len()))?);
                self.values_used += bytes.len();
            }
        }
        match (p.validity(), self.validity.is_some()) {
            (None, false) => {}
            (valid, has) => {
                if !has {
                    // The first nulls: every row before them was valid.
                    let mut v = stream.alloc::<u8>((rows + n).div_ceil(8))?;
                    stream.memset_bytes(&mut v.slice_mut(..rows.div_ceil(8)), 0xFF)?;
                    self.validity = Some(v);
                    self.validity_carry = 0xFF;
                }
                let v = self.validity.as_mut().expect("validity");
                self.validity_carry = append_bits(stream, staging, v, rows, self.validity_carry, valid, n)?;
            }
        }
        Ok(())
    }

    fn append_strings<'p>(&mut self, stream: &Stream, staging: &mut Staging, p: &'p Prepared, rows: usize, registered: &mut Vec<HostRegistration<'p>>) -> Result<()> {
        let n = p.len();
        let o = p.string_offsets();
        let (first, last) = (o.first(), o.last());
        let base = self.values_used as i64;
        let end = base + (last - first);
        if self.data_type == DataType::Utf8 && end > i32::MAX as i64 {
            return Err(Error::too_large(format!("bytes of the Utf8 column {:?} (cast it to LargeUtf8)", self.name), end as u64, i32::MAX as u64));
        }
        let bytes = &p.string_bytes()[first as usize..last as usize];
        registered.extend(staging.upload_registering(stream, bytes, self.values.slice_mut(self.values_used..self.values_used + bytes.len()))?);
        self.values_used += bytes.len();
        // Offsets 1..=n of the batch, re-based to follow the bytes already on the device.
        let w = if self.data_type == DataType::Utf8 { 4 } else { 8 };
        let offsets = self.offsets.as_mut().expect("string offsets");
        let dst = offsets.slice_mut((rows + 1) * w..(rows + 1 + n) * w);
        staging.upload_with(stream, n * w, dst, |start, out| {
            // Entry `i0 + j` of this piece is the batch's offset `i0 + j + 1`, re-based.
            let i0 = start / w;
            const PART: usize = 1 << 15;
            match (o, w) {
                (Offsets::I32(src), 4) => out.par_chunks_mut(4 * PART).enumerate().for_each(|(c, part)| {
                    for (j, d) in part.chunks_exact_mut(4).enumerate() {
                        d.copy_from_slice(&((src[i0 + c * PART + j + 1] as i64 - first + base) as i32).to_le_bytes());
                    }
                }),
                (Offsets::I64(src), 8) => out.par_chunks_mut(8 * PART).enumerate().for_each(|(c, part)| {
                    for (j, d) in part.chunks_exact_mut(8).enumerate() {
                        d.copy_from_slice(&(src[i0 + c * PART + j + 1] - first + base).to_le_bytes());
                    }
                }),
                _ => unreachable!("a column's offsets have its type's width"),
            }
        })
    }
}

/// Writes `n` bits (`src` from its bit, or all ones when `None`) after the first `rows` bits of
/// the device bitmap `dst`, whose partial last byte is `carry`; returns the new partial byte.
fn append_bits(stream: &Stream, staging: &mut Staging, dst: &mut DeviceBuffer<u8>, rows: usize, carry: u8, src: Option<(&[u8], usize)>, n: usize) -> Result<u8> {
    if n == 0 {
        return Ok(carry);
    }
    let (first_byte, bit) = (rows / 8, rows % 8);
    let end_byte = (rows + n).div_ceil(8);
    reserve(stream, dst, first_byte + usize::from(bit > 0), end_byte)?;
    let mut host = vec![0u8; end_byte - first_byte];
    host[0] = carry;
    match src {
        Some((bits, from)) => copy_bits(bits, from, &mut host, bit, n),
        None => {
            let ones = vec![0xFFu8; n.div_ceil(8) + 1];
            copy_bits(&ones, 0, &mut host, bit, n)
        }
    }
    let last = *host.last().expect("at least one byte");
    staging.upload(stream, &host, dst.slice_mut(first_byte..end_byte))?;
    Ok(if (rows + n) % 8 == 0 { 0 } else { last })
}

/// Uploads `batches` (all of `schema`) as one device table, reserving the exact device sizes
/// first.
pub fn upload_batches(stream: &Stream, schema: &Schema, batches: impl IntoIterator<Item = RecordBatch>) -> Result<Table> {
    upload_batches_with(stream, schema, batches, StagingOptions::default())
}

/// [`upload_batches`] with staging options.
pub fn upload_batches_with(stream: &Stream, schema: &Schema, batches: impl IntoIterator<Item = RecordBatch>, staging: StagingOptions) -> Result<Table> {
    let mut batches: Vec<RecordBatch> = batches.into_iter().collect();
    let mut u = Uploader::new(stream, schema, staging)?;
    push_group(&mut u, schema, &mut batches)?;
    u.finish()
}

/// [`upload_batches_with`], also returning where the staging's host time went.
pub fn upload_batches_with_stats(stream: &Stream, schema: &Schema, batches: impl IntoIterator<Item = RecordBatch>, staging: StagingOptions) -> Result<(Table, crate::StagingStats)> {
    let mut batches: Vec<RecordBatch> = batches.into_iter().collect();
    let mut u = Uploader::new(stream, schema, staging)?;
    push_group(&mut u, schema, &mut batches)?;
    let stats = u.staging_stats();
    Ok((u.finish()?, stats))
}

/// Uploads every batch of `reader` as one device table. Batches are gathered (they hold their
/// buffers, no copy) until about [`READER_GROUP_BYTES`] of them, then the device buffers are
/// reserved for the group exactly and the group is copied; the buffers grow per group, not per
/// batch.
pub fn upload_reader(stream: &Stream, reader: impl RecordBatchReader, staging: StagingOptions) -> Result<Table> {
    let schema = reader.schema();
    let mut u = Uploader::new(stream, &schema, staging)?;
    let mut group: Vec<RecordBatch> = Vec::new();
    let mut bytes = 0usize;
    for b in reader {
        let b = b.map_err(|e| arrow_error("reading a record batch", e))?;
        bytes += b.get_array_memory_size();
        group.push(b);
        if bytes >= READER_GROUP_BYTES {
            push_group(&mut u, &schema, &mut group)?;
            bytes = 0;
        }
    }
    push_group(&mut u, &schema, &mut group)?;
    u.finish()
}

/// Host bytes of record batches [`upload_reader`] holds before copying them.
pub const READER_GROUP_BYTES: usize = 4 << 30;

fn push_group(u: &mut Uploader, schema: &Schema, group: &mut Vec<RecordBatch>) -> Result<()> {
    let rows = group.iter().map(RecordBatch::num_rows).sum();
    let mut string_bytes = Vec::new();
    for (i, f) in schema.fields().iter().enumerate() {
        if crate::types::device_type(f.name(), f.data_type())?.is_string() {
            string_bytes.push(group.iter().filter_map(|b| b.columns().get(i)).map(|a| crate::host::string_bytes_hint(a.as_ref())).sum());
        }
    }
    u.reserve(rows, &string_bytes)?;
    for b in group.drain(..) {
        u.push(&b)?;
    }
    Ok(())
}
