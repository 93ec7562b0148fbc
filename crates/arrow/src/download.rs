//! A device table to record batches: windows of rows copied through the pinned staging ring
//! (the device copy of each piece overlapping the host copy of the last), then sliced into
//! batches without copying.
//!
//! ```no_run
//! # fn f(stream: &gpujoin_device::Stream, table: &gpujoin_join::table::Table) -> gpujoin_device::Result<()> {
//! let batches = gpujoin_arrow::download(stream, table.view(), None)?;
//! assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), table.rows());
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_schema::{Field, Schema, SchemaRef};
use gpujoin_device::{DeviceView, Error, Result, Stream};
use gpujoin_join::table::{ColumnView, DataType, TableView};

use crate::bits::bits_from;
use crate::host::{batch, build_array, output_fields};
use crate::staging::{Staging, StagingOptions};

/// How a table comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownloadOptions {
    /// Rows per record batch (default 65536; the last batch may be shorter).
    pub batch_rows: usize,
    /// About this many bytes are copied per window of rows (default 256 MiB), a multiple of
    /// `batch_rows` rows: larger windows mean fewer, longer device copies.
    pub window_bytes: usize,
    /// The pinned staging.
    pub staging: StagingOptions,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions { batch_rows: 1 << 16, window_bytes: 256 << 20, staging: StagingOptions::default() }
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
    staging: Staging,
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
        let row_bytes: usize = kinds
            .iter()
            .map(|&(t, _)| match t {
                DataType::Utf8 => 4 + 32,
                DataType::LargeUtf8 => 8 + 32,
                DataType::Boolean => 1,
                t => t.byte_width().unwrap(),
            })
            .sum::<usize>()
            .max(1);
        let batch_rows = options.batch_rows.max(1);
        let window_rows = (options.window_bytes / row_bytes / batch_rows).max(1) * batch_rows;
        Ok(Downloader {
            stream: stream.clone(),
            table,
            schema: Arc::new(Schema::new(fields)),
            next: 0,
            window_rows,
            batch_rows,
            staging: Staging::new(stream, options.staging)?,
            ready: VecDeque::new(),
            failed: false,
        })
    }

    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Copies rows `start .. start + n` and queues their batches.
    fn window(&mut self, start: usize, n: usize) -> Result<()> {
        let cols: Vec<ColumnView<'a>> = self.table.columns().iter().map(|c| c.slice(start, n)).collect::<Result<_>>()?;
        // First the offsets of the string columns: they say which bytes to copy.
        let mut offsets: Vec<Option<MutableBuffer>> = cols.iter().map(|c| c.data_type().is_string().then(|| MutableBuffer::from_len_zeroed((n + 1) * width(c.data_type())))).collect();
        let mut pairs = Vec::new();
        for (c, host) in cols.iter().zip(offsets.iter_mut()) {
            if let Some(h) = host {
                let w = width(c.data_type());
                pairs.push((c.offsets().expect("string offsets").slice(c.offset() * w..(c.offset() + n + 1) * w), h.as_slice_mut()));
            }
        }
        self.staging.download(&self.stream, pairs)?;
        let mut ranges = Vec::with_capacity(cols.len());
        for (c, host) in cols.iter().zip(offsets.iter_mut()) {
            ranges.push(match host {
                Some(h) => rebase(c.data_type(), h),
                None => (0, 0),
            });
        }
        // Then values and validity.
        let mut values: Vec<MutableBuffer> = Vec::with_capacity(cols.len());
        let mut validity: Vec<Option<MutableBuffer>> = Vec::with_capacity(cols.len());
        let mut sources: Vec<(DeviceView<'a, u8>, Option<DeviceView<'a, u8>>)> = Vec::with_capacity(cols.len());
        for (c, &(lo, hi)) in cols.iter().zip(&ranges) {
            let o = c.offset();
            let v = match c.data_type() {
                DataType::Boolean => c.values().slice(o / 8..(o + n).div_ceil(8)),
                DataType::Utf8 | DataType::LargeUtf8 => c.values().slice(lo..hi),
                t => c.values().slice(o * t.byte_width().unwrap()..(o + n) * t.byte_width().unwrap()),
            };
            let b = c.validity().map(|b| b.slice(o / 8..(o + n).div_ceil(8)));
            values.push(MutableBuffer::from_len_zeroed(v.len()));
            validity.push(b.map(|b| MutableBuffer::from_len_zeroed(b.len())));
            sources.push((v, b));
        }
        let mut pairs = Vec::new();
        for ((v, b), (hv, hb)) in sources.iter().zip(values.iter_mut().zip(validity.iter_mut())) {
            pairs.push((*v, hv.as_slice_mut()));
            if let (Some(b), Some(hb)) = (b, hb.as_mut()) {
                pairs.push((*b, hb.as_slice_mut()));
            }
        }
        self.staging.download(&self.stream, pairs)?;
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(cols.len());
        let fields = self.schema.fields().clone();
        for (k, c) in cols.iter().enumerate() {
            let bit = c.offset() % 8;
            let realign = |m: MutableBuffer| if bit == 0 { Buffer::from(m) } else { Buffer::from_vec(bits_from(m.as_slice(), bit, n)) };
            let vals = std::mem::replace(&mut values[k], MutableBuffer::new(0));
            let vals = if c.data_type() == DataType::Boolean { realign(vals) } else { Buffer::from(vals) };
            let valid = validity[k].take().map(realign);
            let offs = offsets[k].take().map(Buffer::from);
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

/// Makes downloaded string offsets start at 0; returns the byte range they covered.
fn rebase(t: DataType, host: &mut MutableBuffer) -> (usize, usize) {
    if t == DataType::Utf8 {
        let o = host.typed_data_mut::<i32>();
        let (first, last) = (o[0], o[o.len() - 1]);
        o.iter_mut().for_each(|x| *x -= first);
        (first as usize, last as usize)
    } else {
        let o = host.typed_data_mut::<i64>();
        let (first, last) = (o[0], o[o.len() - 1]);
        o.iter_mut().for_each(|x| *x -= first);
        (first as usize, last as usize)
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
