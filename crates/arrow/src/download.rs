//! A device table to record batches: windows of rows copied from the device straight into
//! pinned blocks that become the Arrow buffers (no host copy), then sliced into batches without
//! copying.
//!
//! ```no_run
//! # fn f(stream: &gpujoin_device::Stream, table: &gpujoin_join::table::Table) -> gpujoin_device::Result<()> {
//! let batches = gpujoin_arrow::download(stream, table.view(), None)?;
//! assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), table.rows());
//! # Ok(()) }
//! ```

use std::collections::VecDeque;

use rayon::prelude::*;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_schema::{Field, Schema, SchemaRef};
use gpujoin_device::{Error, Result, Stream};
use gpujoin_join::table::{ColumnView, DataType, TableView};

use crate::bits::bits_from;
use crate::host::{batch, build_array, output_fields};
use crate::pinned_blocks::{self, Block};

/// How a table comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownloadOptions {
    /// Rows per record batch (default 65536; the last batch may be shorter).
    pub batch_rows: usize,
    /// About this many bytes are copied per window of rows (default 256 MiB), a multiple of
    /// `batch_rows` rows: larger windows mean fewer, longer device copies.
    pub window_bytes: usize,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions { batch_rows: 1 << 16, window_bytes: 256 << 20 }
    }
}

impl DownloadOptions {
    /// Rows of one window of columns of these types.
    fn window_rows(&self, types: impl Iterator<Item = DataType>) -> usize {
        let row_bytes: usize = types
            .map(|t| match t {
                DataType::Utf8 => 4 + 32,
                DataType::LargeUtf8 => 8 + 32,
                DataType::Boolean => 1,
                t => t.byte_width().unwrap_or(8),
            })
            .sum::<usize>()
            .max(1);
        let batch_rows = self.batch_rows.max(1);
        (self.window_bytes / row_bytes / batch_rows).max(1) * batch_rows
    }

    /// Page-locks ahead the pinned blocks that a download of `rows` rows of these columns
    /// (device type, has a validity bitmap) takes while its batches are consumed as they come:
    /// two windows' blocks (the window being handed out and the next). A download then runs at
    /// the device-to-host rate from its first window instead of page-locking as it goes.
    /// Covers values, validity and string offsets (not string bytes, which the data size).
    /// Returns the bytes page-locked (0 when the process's pool holds them already).
    ///
    /// ```no_run
    /// # fn f(device: &gpujoin_device::Device) -> gpujoin_device::Result<()> {
    /// use gpujoin_join::table::DataType;
    /// // The output of a join: 2^27 rows of two u32 columns.
    /// let bytes = gpujoin_arrow::DownloadOptions::default().prepare(device, &[(DataType::UInt32, false), (DataType::UInt32, false)], 1 << 27)?;
    /// assert_eq!(bytes, 4 * (128 << 20)); // two windows of 2^25 rows, a 128 MiB block per column
    /// # Ok(()) }
    /// ```
    pub fn prepare(&self, device: &gpujoin_device::Device, columns: &[(DataType, bool)], rows: usize) -> Result<usize> {
        if rows == 0 {
            return Ok(0);
        }
        let window = self.window_rows(columns.iter().map(|&(t, _)| t)).min(rows);
        let windows = rows.div_ceil(window).min(2);
        let mut lens = Vec::new();
        for &(t, nullable) in columns {
            match t {
                DataType::Boolean => lens.push(window.div_ceil(8)),
                DataType::Utf8 | DataType::LargeUtf8 => lens.push((window + 1) * width(t)),
                t => lens.push(window * t.byte_width().unwrap_or(8)),
            }
            if nullable {
                lens.push(window.div_ceil(8));
            }
        }
        // Blocks of one size class serve every column of that size: count them per class, then
        // make each class's blocks once.
        let mut classes: Vec<(usize, usize)> = Vec::new();
        for len in lens {
            let class = pinned_blocks::size_class(len)?;
            match classes.iter_mut().find(|(c, _)| *c == class) {
                Some((_, n)) => *n += windows,
                None => classes.push((class, windows)),
            }
        }
        classes.into_iter().try_fold(0, |made, (class, n)| Ok(made + pinned_blocks::prepare(device, class, n)?))
    }
}

/// The record batches of a device table, one window of rows copied at a time.
pub struct Downloader<'a> {
    stream: Stream,
    table: TableView<'a>,
    schema: SchemaRef,
    next: usize,
    window_rows: usize,
    batch_rows: usize,
    ready: VecDeque<RecordBatch>,
    failed: bool,
}

impl<'a> Downloader<'a> {
    /// Batches of `table`. `schema`, when given, names each column's Arrow type by position (a
    /// time zone, `Utf8View` for strings, nullability: a column with nulls under a non-nullable
    /// field is an error); without it each column gets its default type, nullable when the
    /// device column has a validity bitmap.
    pub fn new(stream: &Stream, table: TableView<'a>, schema: Option<&Schema>, options: DownloadOptions) -> Result<Downloader<'a>> {
        let kinds: Vec<(DataType, bool)> = table.columns().iter().map(|c| (c.data_type(), c.validity().is_some())).collect();
        let fields = output_fields(table.names(), &kinds.iter().map(|&(t, _)| (t, false)).collect::<Vec<_>>(), schema)?;
        let fields: Vec<Field> = match schema {
            Some(_) => fields,
            None => fields.into_iter().zip(&kinds).map(|(f, &(_, nullable))| f.with_nullable(nullable)).collect(),
        };
        let batch_rows = options.batch_rows.max(1);
        let window_rows = options.window_rows(kinds.iter().map(|&(t, _)| t));
        Ok(Downloader {
            stream: stream.clone(),
            table,
            schema: Arc::new(Schema::new(fields)),
            next: 0,
            window_rows,
            batch_rows,
            ready: VecDeque::new(),
            failed: false,
        })
    }

    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Copies rows `start .. start + n` straight into pinned blocks that become the batches'
    /// buffers, and queues the batches.
    fn window(&mut self, start: usize, n: usize) -> Result<()> {
        let s = &self.stream;
        let cols: Vec<ColumnView<'a>> = self.table.columns().iter().map(|c| c.slice(start, n)).collect::<Result<_>>()?;
        // First the offsets of the string columns: they say which bytes to copy.
        let mut offsets: Vec<Option<Block>> = Vec::with_capacity(cols.len());
        for c in &cols {
            offsets.push(match c.offsets() {
                Some(o) if c.data_type().is_string() => {
                    let w = width(c.data_type());
                    let mut b = pinned_blocks::take(s, (n + 1) * w)?;
                    b.fill_from(s, &o.slice(c.offset() * w..(c.offset() + n + 1) * w))?;
                    Some(b)
                }
                _ => None,
            });
        }
        let mut ranges = Vec::with_capacity(cols.len());
        for (c, block) in cols.iter().zip(offsets.iter_mut()) {
            ranges.push(match block {
                Some(b) => rebase(c.data_type(), b.as_mut_slice((n + 1) * width(c.data_type()))?),
                None => (0, 0),
            });
        }
        // Then values and validity, all queued before any is waited for.
        let mut parts: Vec<(Block, usize, Option<(Block, usize)>)> = Vec::with_capacity(cols.len());
        for (c, &(lo, hi)) in cols.iter().zip(&ranges) {
            let o = c.offset();
            let v = match c.data_type() {
                DataType::Boolean => c.values().slice(o / 8..(o + n).div_ceil(8)),
                DataType::Utf8 | DataType::LargeUtf8 => c.values().slice(lo..hi),
                t => c.values().slice(o * t.byte_width().unwrap()..(o + n) * t.byte_width().unwrap()),
            };
            let mut vb = pinned_blocks::take(s, v.len())?;
            vb.fill_from(s, &v)?;
            let valid = match c.validity() {
                Some(bits) => {
                    let bits = bits.slice(o / 8..(o + n).div_ceil(8));
                    let mut bb = pinned_blocks::take(s, bits.len())?;
                    bb.fill_from(s, &bits)?;
                    Some((bb, bits.len()))
                }
                None => None,
            };
            parts.push((vb, v.len(), valid));
        }
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(cols.len());
        let fields = self.schema.fields().clone();
        for (k, ((c, (vb, vlen, valid)), ob)) in cols.iter().zip(parts).zip(offsets).enumerate() {
            let bit = c.offset() % 8;
            // A bitmap starting inside a byte is realigned to bit 0 on the host (it is small).
            let bitmap = |mut b: Block, len: usize| -> Result<Buffer> {
                if bit == 0 {
                    return b.into_buffer(len);
                }
                let out = Buffer::from_vec(bits_from(b.as_slice(len)?, bit, n));
                b.recycle();
                Ok(out)
            };
            let vals = if c.data_type() == DataType::Boolean { bitmap(vb, vlen)? } else { vb.into_buffer(vlen)? };
            let valid = valid.map(|(b, len)| bitmap(b, len)).transpose()?;
            let offs = ob.map(|b| b.into_buffer((n + 1) * width(c.data_type()))).transpose()?;
            let array = build_array(&fields[k], c.data_type(), n, 0, vals, offs, valid)?;
            if array.null_count() > 0 && !fields[k].is_nullable() {
                return Err(Error::invalid(format!("column {:?} has nulls but the schema's field is not nullable", fields[k].name())));
            }
            arrays.push(array);
        }
        let window = batch(fields.iter().map(|f| f.as_ref().clone()).collect(), arrays, n)?;
        let mut at = 0;
        while at < n {
            let len = self.batch_rows.min(n - at);
            self.ready.push_back(window.slice(at, len));
            at += len;
        }
        Ok(())
    }
}

fn width(t: DataType) -> usize {
    if t == DataType::Utf8 {
        4
    } else {
        8
    }
}

/// Makes downloaded string offsets start at 0 (in parallel; nothing to do when they do);
/// returns the byte range they covered.
fn rebase(t: DataType, host: &mut [u8]) -> (usize, usize) {
    fn go<T: Copy + Send + Sync + std::ops::SubAssign + PartialEq + Default + TryInto<usize>>(o: &mut [T]) -> (usize, usize) {
        let (first, last) = (o[0], o[o.len() - 1]);
        if first != T::default() {
            o.par_chunks_mut(1 << 16).for_each(|part| part.iter_mut().for_each(|x| *x -= first));
        }
        let us = |x: T| x.try_into().ok().expect("offsets are non-negative");
        (us(first), us(last))
    }
    if t == DataType::Utf8 {
        go::<i32>(bytemuck::cast_slice_mut(host))
    } else {
        go::<i64>(bytemuck::cast_slice_mut(host))
    }
}

impl Iterator for Downloader<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(b) = self.ready.pop_front() {
            return Some(Ok(b));
        }
        let rows = self.table.rows();
        if self.failed || self.next >= rows {
            return None;
        }
        let (start, n) = (self.next, self.window_rows.min(rows - self.next));
        self.next += n;
        match self.window(start, n) {
            Ok(()) => self.ready.pop_front().map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Every batch of `table` (see [`Downloader::new`] for `schema`); a table of no rows gives no
/// batches.
pub fn download(stream: &Stream, table: TableView<'_>, schema: Option<&Schema>) -> Result<Vec<RecordBatch>> {
    Downloader::new(stream, table, schema, DownloadOptions::default())?.collect()
}
