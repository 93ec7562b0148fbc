//! Record batches to a device [`Table`]: every column appended in place on the device through
//! pinned staging, a group of batches at a time (one parallel pass of host copies and device
//! copies per group).
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

use arrow_array::{Array, RecordBatch, RecordBatchReader};
use arrow_schema::{Schema, SchemaRef};
use gpujoin_device::{DeviceBuffer, DeviceViewMut, Error, Result, Stream};
use gpujoin_join::table::{Column, DataType, Table};

use crate::bits::copy_bits;
use crate::host::Prepared;
use crate::staging::{Fill, Piece, Staging, StagingOptions, StagingStats};
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
/// partial last byte of each bitmap (kept on the host, rewritten with the next group's bits).
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

fn offset_width(t: DataType) -> usize {
    if t == DataType::Utf8 {
        4
    } else {
        8
    }
}

/// The bits of `n` rows of a group (each batch's bitmap from its bit, or all ones), written
/// after the first `rows` bits of a device bitmap whose partial last byte is `carry`: the host
/// bytes from byte `rows / 8` on, and the new partial byte.
fn group_bits(rows: usize, carry: u8, parts: &[(Option<(&[u8], usize)>, usize)]) -> (Vec<u8>, u8) {
    let n: usize = parts.iter().map(|p| p.1).sum();
    let bit = rows % 8;
    let mut host = vec![0u8; (rows + n).div_ceil(8) - rows / 8];
    if host.is_empty() {
        return (host, carry);
    }
    host[0] = carry;
    let mut at = bit;
    for &(src, len) in parts {
        match src {
            Some((bits, from)) => copy_bits(bits, from, &mut host, at, len),
            None => copy_bits(&vec![0xFFu8; len.div_ceil(8) + 1], 0, &mut host, at, len),
        }
        at += len;
    }
    let last = *host.last().expect("at least one byte");
    (host, if (rows + n) % 8 == 0 { 0 } else { last })
}

impl Uploader {
    /// An uploader for batches of `schema`; a column type gpujoin does not hold is an
    /// [`Error::Unsupported`] naming the column, before anything is allocated.
    pub fn new(stream: &Stream, schema: &Schema, staging: StagingOptions) -> Result<Uploader> {
        let types = device_types(schema)?;
        let mut columns = Vec::with_capacity(types.len());
        for (f, t) in schema.fields().iter().zip(types) {
            let offsets = if t.is_string() { Some(stream.alloc_zeroed::<u8>(offset_width(t))?) } else { None };
            columns.push(ColumnBuilder { name: f.name().clone(), data_type: t, values: stream.alloc::<u8>(0)?, values_used: 0, offsets, validity: None, values_carry: 0, validity_carry: 0 });
        }
        Ok(Uploader { stream: stream.clone(), schema: std::sync::Arc::new(schema.clone()), columns, rows: 0, batches: 0, staging: Staging::new(stream, staging)? })
    }

    /// Rows appended so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Where the staging's host time went so far (summed over threads).
    pub fn staging_stats(&self) -> StagingStats {
        self.staging.stats()
    }

    /// Makes room for `rows` more rows, so that the device buffers need not grow for them (growing
    /// copies a buffer on the device); string columns also get room for `string_bytes[i]` more
    /// bytes in their `i`-th position among the string columns (missing entries: none).
    pub fn reserve(&mut self, rows: usize, string_bytes: &[usize]) -> Result<()> {
        let total = self.rows + rows;
        let mut strings = string_bytes.iter().copied();
        for c in &mut self.columns {
            let bytes = match c.data_type {
                DataType::Boolean => total.div_ceil(8),
                t if t.is_string() => c.values_used + strings.next().unwrap_or(0),
                t => total * t.byte_width().unwrap(),
            };
            reserve(&self.stream, &mut c.values, c.values_used, bytes)?;
            let w = offset_width(c.data_type);
            if let Some(o) = c.offsets.as_mut() {
                reserve(&self.stream, o, (self.rows + 1) * w, (total + 1) * w)?;
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
        self.push_all(std::slice::from_ref(batch))
    }

    /// Appends `batches` (each of the uploader's schema) in one pass: the device buffers are
    /// reserved for all of them, then every host copy and device copy runs on the rayon pool.
    /// Their host buffers may be dropped as soon as this returns.
    pub fn push_all(&mut self, batches: &[RecordBatch]) -> Result<()> {
        for (i, b) in batches.iter().enumerate() {
            let s = b.schema();
            let same = s.fields().len() == self.schema.fields().len()
                && s.fields().iter().zip(self.schema.fields()).all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
            if !same {
                return Err(Error::TypeMismatch { what: format!("batch {} of the stream", self.batches + i), left: s.to_string(), right: format!("the stream's schema {}", self.schema) });
            }
        }
        // prepared[c][b]: column c of batch b in its device type's physical form.
        let mut prepared: Vec<Vec<Prepared>> = Vec::with_capacity(self.columns.len());
        for (c, f) in self.schema.fields().iter().enumerate() {
            prepared.push(batches.iter().map(|b| Prepared::new(f.name(), b.column(c))).collect::<Result<_>>()?);
        }
        let n: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let string_bytes: Vec<usize> = prepared.iter().zip(&self.columns).filter(|(_, c)| c.data_type.is_string()).map(|(p, _)| p.iter().map(Prepared::device_bytes).sum()).collect();
        self.reserve(n, &string_bytes)?;
        let rows = self.rows;
        // Bitmaps on the host (they carry a partial byte across batches); the first nulls of a
        // column allocate its validity, all ones before them.
        let mut bitmaps: Vec<(Option<Vec<u8>>, Option<Vec<u8>>)> = Vec::with_capacity(self.columns.len());
        for (c, ps) in self.columns.iter_mut().zip(&prepared) {
            let values = (c.data_type == DataType::Boolean).then(|| {
                let parts: Vec<_> = ps.iter().map(|p| (Some(p.bool_bits()), p.len())).collect();
                let (bytes, carry) = group_bits(rows, c.values_carry, &parts);
                c.values_carry = carry;
                bytes
            });
            let any_nulls = ps.iter().any(|p| p.validity().is_some());
            if any_nulls && c.validity.is_none() {
                let mut v = self.stream.alloc::<u8>((rows + n).div_ceil(8))?;
                self.stream.memset_bytes(&mut v.slice_mut(..rows.div_ceil(8)), 0xFF)?;
                c.validity = Some(v);
                c.validity_carry = 0xFF;
            }
            let validity = c.validity.is_some().then(|| {
                let parts: Vec<_> = ps.iter().map(|p| (p.validity(), p.len())).collect();
                let (bytes, carry) = group_bits(rows, c.validity_carry, &parts);
                c.validity_carry = carry;
                bytes
            });
            bitmaps.push((values, validity));
        }
        // The pieces: every column's bytes of every batch, to disjoint device ranges.
        let max = self.staging.piece_sizes();
        let ordinal = self.stream.device().ordinal();
        let pinned = |b: &[u8]| crate::pinned_blocks::is_pinned_for(b, ordinal);
        let mut pieces: Vec<Piece<'_, '_>> = Vec::new();
        // Bytes already page-locked for this device (a download's buffers) go straight over.
        let mut direct: Vec<(&[u8], DeviceViewMut<'_, u8>)> = Vec::new();
        let mut used_after = Vec::with_capacity(self.columns.len());
        for ((c, ps), (vbits, nbits)) in self.columns.iter_mut().zip(&prepared).zip(&bitmaps) {
            let first_byte = rows / 8;
            if let Some(v) = nbits {
                let dst = c.validity.as_mut().expect("validity").slice_mut(first_byte..first_byte + v.len());
                Piece::pack([Fill::Copy(v)], dst, max, &mut pieces);
            }
            match c.data_type {
                DataType::Boolean => {
                    let v = vbits.as_ref().expect("boolean values");
                    Piece::pack([Fill::Copy(v)], c.values.slice_mut(first_byte..first_byte + v.len()), max, &mut pieces);
                    used_after.push((rows + n).div_ceil(8));
                }
                t if t.is_string() => {
                    let w = offset_width(t);
                    let total: usize = ps.iter().map(Prepared::device_bytes).sum();
                    let end = c.values_used + total;
                    if t == DataType::Utf8 && end > i32::MAX as usize {
                        return Err(Error::too_large(format!("bytes of the Utf8 column {:?} (cast it to LargeUtf8)", c.name), end as u64, i32::MAX as u64));
                    }
                    let bytes = ps.iter().map(|p| {
                        let o = p.string_offsets();
                        Fill::Copy(&p.string_bytes()[o.first() as usize..o.last() as usize])
                    });
                    Piece::pack_direct(bytes, c.values.slice_mut(c.values_used..end), max, pinned, &mut pieces, &mut direct);
                    let mut base = c.values_used as i64;
                    let offsets: Vec<Fill<'_>> = ps
                        .iter()
                        .map(|p| {
                            let o = p.string_offsets();
                            let f = Fill::Offsets { src: o, i0: 0, count: p.len(), first: o.first(), base };
                            base += o.last() - o.first();
                            f
                        })
                        .collect();
                    let dst = c.offsets.as_mut().expect("string offsets").slice_mut((rows + 1) * w..(rows + 1 + n) * w);
                    Piece::pack(offsets, dst, max, &mut pieces);
                    used_after.push(end);
                }
                t => {
                    let w = t.byte_width().unwrap();
                    let dst = c.values.slice_mut(c.values_used..c.values_used + n * w);
                    Piece::pack_direct(ps.iter().map(|p| Fill::Copy(p.fixed_bytes())), dst, max, pinned, &mut pieces, &mut direct);
                    used_after.push(c.values_used + n * w);
                }
            }
        }
        let (stream, staging) = (&self.stream, &self.staging);
        stream.copy_from_host_during(direct, || staging.upload(stream, pieces))?;
        for (c, used) in self.columns.iter_mut().zip(used_after) {
            c.values_used = used;
        }
        // The staged host bytes are in pinned memory; the host buffers are free to go. The
        // bitmaps staged from `bitmaps` were copied into pinned buffers too.
        self.rows += n;
        self.batches += batches.len();
        Ok(())
    }

    /// The device table of every batch pushed (its buffers trimmed to their used length).
    pub fn finish(self) -> Result<Table> {
        let rows = self.rows;
        let mut columns = Vec::with_capacity(self.columns.len());
        for c in self.columns {
            let mut values = c.values;
            values.truncate(c.values_used);
            let offsets = c.offsets.map(|mut o| {
                o.truncate((rows + 1) * offset_width(c.data_type));
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

/// Uploads `batches` (all of `schema`) as one device table, reserving the exact device sizes
/// first.
pub fn upload_batches(stream: &Stream, schema: &Schema, batches: impl IntoIterator<Item = RecordBatch>) -> Result<Table> {
    upload_batches_with(stream, schema, batches, StagingOptions::default())
}

/// [`upload_batches`] with staging options.
pub fn upload_batches_with(stream: &Stream, schema: &Schema, batches: impl IntoIterator<Item = RecordBatch>, staging: StagingOptions) -> Result<Table> {
    Ok(upload_batches_with_stats(stream, schema, batches, staging)?.0)
}

/// [`upload_batches_with`], also returning where the staging's host time went.
pub fn upload_batches_with_stats(stream: &Stream, schema: &Schema, batches: impl IntoIterator<Item = RecordBatch>, staging: StagingOptions) -> Result<(Table, StagingStats)> {
    let batches: Vec<RecordBatch> = batches.into_iter().collect();
    let mut u = Uploader::new(stream, schema, staging)?;
    u.push_all(&batches)?;
    let stats = u.staging_stats();
    Ok((u.finish()?, stats))
}

/// Host bytes of record batches [`upload_reader`] holds before copying them.
pub const READER_GROUP_BYTES: usize = 4 << 30;

/// Uploads every batch of `reader` as one device table. Batches are gathered (they hold their
/// buffers, no copy) until about [`READER_GROUP_BYTES`] of them, then pushed together
/// ([`Uploader::push_all`]); the device buffers grow per group, not per batch.
pub fn upload_reader(stream: &Stream, reader: impl RecordBatchReader, staging: StagingOptions) -> Result<Table> {
    let schema = reader.schema();
    let mut u = Uploader::new(stream, &schema, staging)?;
    let mut group: Vec<RecordBatch> = Vec::new();
    let mut bytes = 0usize;
    for b in reader {
        let b = b.map_err(|e| arrow_error("reading a record batch", e))?;
        bytes += batch_bytes(&b);
        group.push(b);
        if bytes >= READER_GROUP_BYTES {
            u.push_all(&group)?;
            group.clear();
            bytes = 0;
        }
    }
    u.push_all(&group)?;
    u.finish()
}

/// A batch's own bytes: a slice of a larger batch counts its rows, not the buffers it shares.
pub(crate) fn batch_bytes(b: &RecordBatch) -> usize {
    b.columns().iter().map(|a| a.to_data().get_slice_memory_size().unwrap_or_else(|_| a.get_array_memory_size())).sum()
}
