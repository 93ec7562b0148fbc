//! The all-to-all of table parts: rank `s` sends its part for rank `d` to `d`, and every rank
//! assembles the parts it receives, in source-rank order, into one table.
//!
//! Nothing is serialized: each column's Arrow buffers travel as they are, as byte ranges of the
//! sender's buffers (a part may be any view: sliced, at a bit offset). The receiver reserves one
//! buffer a column for the values of every source (fixed-width values and string bytes land in
//! place), and small per-source buffers for the pieces that need a pass after the exchange:
//! bitmaps (validity, booleans), which it ORs in at their row position, and string offsets,
//! which it rebases onto the concatenated bytes.

use gpujoin_device::nccl::Transfer;
use gpujoin_device::{DeviceBuffer, DeviceView, DeviceViewMut, Error, Result, Stream};
use gpujoin_join::table::{Column, ColumnView, DataType, Table, TableView};

use crate::cluster::Cluster;
use crate::kernels;
use crate::table::same_columns;

/// The bytes a bitmap of `n` bits read from bit `off` spans, and the bit it starts at there.
fn bit_range(off: usize, n: usize) -> (std::ops::Range<usize>, usize) {
    (off / 8..(off + n).div_ceil(8), off % 8)
}

fn offsets_width(t: DataType) -> usize {
    if t == DataType::Utf8 {
        4
    } else {
        8
    }
}

/// String `i`'s start in the bytes of a string column view, read from the device.
fn read_offset(stream: &Stream, c: &ColumnView<'_>, i: usize) -> Result<u64> {
    let w = offsets_width(c.data_type());
    let o = c.offsets().ok_or_else(|| Error::invalid("a string column without offsets"))?;
    let b = stream.copy_to_host(&o.slice((c.offset() + i) * w..(c.offset() + i + 1) * w))?;
    Ok(if w == 4 { i32::from_le_bytes(b[..4].try_into().expect("4")) as u64 } else { i64::from_le_bytes(b[..8].try_into().expect("8")) as u64 })
}

fn push_transfer<'a>(transfers: &mut Vec<Transfer<'a>>, bytes: &mut u64, from: usize, to: usize, src: DeviceView<'a, u8>, dst: DeviceViewMut<'a, u8>) {
    if from != to {
        *bytes += src.len() as u64;
    }
    transfers.push(Transfer { from, to, src, dst });
}

/// ORs each source's bitmap as sent (`None`: all set) into `words` at the source's first row.
fn place_bits(st: &Stream, pieces: &[Option<(DeviceBuffer<u8>, usize)>], rows: &[usize], words: &mut DeviceBuffer<u32>) -> Result<()> {
    let mut row = 0;
    for (piece, &n) in pieces.iter().zip(rows) {
        let src = piece.as_ref().map(|(b, bit)| (b.view(), *bit));
        kernels::copy_bits(st, src.as_ref().map(|(v, _)| v), src.map_or(0, |(_, bit)| bit), n, &mut words.view_mut(), row)?;
        row += n;
    }
    Ok(())
}

/// What one rank receives of one column.
struct Incoming {
    data_type: DataType,
    /// Rows from each source.
    rows: Vec<usize>,
    /// Fixed-width values and string bytes of every source in place; the bitmap words of a
    /// `Boolean` column (zeroed, filled after the exchange).
    values: DeviceBuffer<u8>,
    /// `Boolean`: each source's values bitmap as sent, with the bit it starts at (`None` only
    /// for a source without rows).
    value_bits: Vec<Option<(DeviceBuffer<u8>, usize)>>,
    /// Strings: each source's `rows + 1` offsets as sent, and where its bytes start in `values`.
    offsets: Vec<Option<(DeviceBuffer<u8>, u64)>>,
    /// The validity words (zeroed, filled after the exchange), when any source has a bitmap.
    validity: Option<DeviceBuffer<u32>>,
    /// Each source's validity bitmap as sent (`None`: every row valid), with its first bit.
    validity_bits: Vec<Option<(DeviceBuffer<u8>, usize)>>,
}

/// What [`all_to_all`] did.
pub(crate) struct Exchanged {
    /// Rank `d`'s received table.
    pub tables: Vec<Table>,
    /// Bytes that crossed from one rank to another (not counting a rank's part for itself).
    pub bytes: u64,
}

/// `sends[s][d]` is the part rank `s` sends to rank `d` (on rank `s`'s device; every part with
/// the same columns). Returns each rank's received table: the parts from ranks `0, 1, ...` in
/// order, their rows in order.
pub(crate) fn all_to_all(cluster: &Cluster, sends: &[Vec<TableView<'_>>]) -> Result<Exchanged> {
    let g = cluster.size();
    if sends.len() != g || sends.iter().any(|s| s.len() != g) {
        return Err(Error::invalid(format!("an all-to-all among {g} ranks needs {g} x {g} parts")));
    }
    let names = sends[0][0].names().to_vec();
    let types: Vec<DataType> = sends[0][0].columns().iter().map(ColumnView::data_type).collect();
    for (s, row) in sends.iter().enumerate() {
        for (d, p) in row.iter().enumerate() {
            if !same_columns(p, &sends[0][0]) {
                return Err(Error::invalid(format!("the part from rank {s} to rank {d} has other columns than the first part")));
            }
        }
    }
    // Where each source's string bytes are (read once, on the host).
    let mut string_spans = vec![vec![vec![(0u64, 0u64); names.len()]; g]; g];
    for (s, row) in sends.iter().enumerate() {
        for (d, p) in row.iter().enumerate() {
            for (k, c) in p.columns().iter().enumerate() {
                if c.data_type().is_string() && !c.is_empty() {
                    let st = cluster.stream(s);
                    string_spans[s][d][k] = (read_offset(st, c, 0)?, read_offset(st, c, c.len())?);
                }
            }
        }
    }
    // The receivers' buffers.
    let mut incoming: Vec<Vec<Incoming>> = Vec::with_capacity(g);
    for d in 0..g {
        let st = cluster.stream(d);
        st.device().bind_to_thread()?;
        let rows: Vec<usize> = (0..g).map(|s| sends[s][d].rows()).collect();
        let total: usize = rows.iter().sum();
        let mut cols = Vec::with_capacity(names.len());
        for (k, &t) in types.iter().enumerate() {
            let parts: Vec<ColumnView<'_>> = (0..g).map(|s| sends[s][d].columns()[k]).collect();
            let has_validity = parts.iter().any(|c| c.validity().is_some() && !c.is_empty());
            let validity = if has_validity { Some(st.alloc_zeroed::<u32>(total.div_ceil(32))?) } else { None };
            let mut validity_bits = Vec::with_capacity(g);
            let mut value_bits = Vec::with_capacity(g);
            let mut offsets = Vec::with_capacity(g);
            let mut string_bytes = 0u64;
            for (s, c) in parts.iter().enumerate() {
                let n = c.len();
                validity_bits.push(match c.validity() {
                    Some(_) if n > 0 => {
                        let (r, bit) = bit_range(c.offset(), n);
                        Some((st.alloc::<u8>(r.len())?, bit))
                    }
                    _ => None,
                });
                value_bits.push(if t == DataType::Boolean && n > 0 {
                    let (r, bit) = bit_range(c.offset(), n);
                    Some((st.alloc::<u8>(r.len())?, bit))
                } else {
                    None
                });
                offsets.push(if t.is_string() && n > 0 {
                    let at = string_bytes;
                    let (a, b) = string_spans[s][d][k];
                    string_bytes += b - a;
                    Some((st.alloc::<u8>((n + 1) * offsets_width(t))?, at))
                } else {
                    None
                });
            }
            let values = match t {
                DataType::Boolean => st.alloc_zeroed::<u32>(total.div_ceil(32))?.into_bytes(),
                DataType::Utf8 | DataType::LargeUtf8 => {
                    if t == DataType::Utf8 && string_bytes > i32::MAX as u64 {
                        return Err(Error::too_large(format!("bytes of the Utf8 column {:?} rank {d} receives (use LargeUtf8)", names[k]), string_bytes, i32::MAX as u64));
                    }
                    st.alloc::<u8>(string_bytes as usize)?
                }
                _ => st.alloc::<u8>(total * t.byte_width().expect("fixed width"))?,
            };
            cols.push(Incoming { data_type: t, rows: rows.clone(), values, value_bits, offsets, validity, validity_bits });
        }
        incoming.push(cols);
    }
    // The transfers: every non-empty piece of every part.
    let mut bytes = 0u64;
    {
        let mut transfers: Vec<Transfer<'_>> = Vec::new();
        for (d, cols) in incoming.iter_mut().enumerate() {
            for (k, inc) in cols.iter_mut().enumerate() {
                let t = inc.data_type;
                let mut rest: Option<DeviceViewMut<'_, u8>> = Some(inc.values.view_mut());
                let mut value_bits = inc.value_bits.iter_mut();
                let mut offsets = inc.offsets.iter_mut();
                let mut validity_bits = inc.validity_bits.iter_mut();
                for s in 0..g {
                    let c = sends[s][d].columns()[k];
                    let (n, off) = (c.len(), c.offset());
                    let (vb, ob, vlb) = (value_bits.next().expect("g"), offsets.next().expect("g"), validity_bits.next().expect("g"));
                    if n == 0 {
                        continue;
                    }
                    let mut push = |src, dst| push_transfer(&mut transfers, &mut bytes, s, d, src, dst);
                    match t {
                        DataType::Boolean => {
                            let (buf, _) = vb.as_mut().expect("boolean piece");
                            let (r, _) = bit_range(off, n);
                            push(c.values().slice(r), buf.view_mut());
                        }
                        DataType::Utf8 | DataType::LargeUtf8 => {
                            let w = offsets_width(t);
                            let (buf, _) = ob.as_mut().expect("string piece");
                            push(c.offsets().expect("string offsets").slice(off * w..(off + n + 1) * w), buf.view_mut());
                            let (a, b) = string_spans[s][d][k];
                            let (here, tail) = rest.take().expect("values").split_at((b - a) as usize);
                            rest = Some(tail);
                            push(c.values().slice(a as usize..b as usize), here);
                        }
                        _ => {
                            let w = t.byte_width().expect("fixed width");
                            let (here, tail) = rest.take().expect("values").split_at(n * w);
                            rest = Some(tail);
                            push(c.values().slice(off * w..(off + n) * w), here);
                        }
                    }
                    if let (Some((buf, _)), Some(v)) = (vlb.as_mut(), c.validity()) {
                        let (r, _) = bit_range(off, n);
                        push(v.slice(r), buf.view_mut());
                    }
                }
            }
        }
        cluster.exchange(transfers)?;
    }
    // Assembly: bitmaps ORed in at their rows, string offsets rebased.
    let mut tables = Vec::with_capacity(g);
    for (d, cols) in incoming.into_iter().enumerate() {
        let st = cluster.stream(d);
        st.device().bind_to_thread()?;
        let mut columns = Vec::with_capacity(cols.len());
        for (k, inc) in cols.into_iter().enumerate() {
            let Incoming { data_type: t, rows, values, value_bits, offsets, validity, validity_bits } = inc;
            let total: usize = rows.iter().sum();
            let validity = match validity {
                Some(mut words) => {
                    place_bits(st, &validity_bits, &rows, &mut words)?;
                    Some(words.into_bytes())
                }
                None => None,
            };
            let (values, offsets) = match t {
                DataType::Boolean => {
                    // The words allocated above as bytes (a whole number of aligned words).
                    let mut words = values.into_typed::<u32>().map_err(|_| Error::invalid("internal: a Boolean column's received bitmap is not whole 32-bit words"))?;
                    place_bits(st, &value_bits, &rows, &mut words)?;
                    (words.into_bytes(), None)
                }
                DataType::Utf8 | DataType::LargeUtf8 => {
                    let w = offsets_width(t);
                    let mut out = st.alloc::<u8>((total + 1) * w)?;
                    // Each source's offsets but its last, rebased; the last source with rows
                    // writes its last offset too: the end of every source's bytes.
                    let last = offsets.iter().rposition(Option::is_some);
                    let mut row = 0;
                    for (s, piece) in offsets.iter().enumerate() {
                        let n = rows[s];
                        if let Some((src, base)) = piece {
                            let end = if Some(s) == last { row + n + 1 } else { row + n };
                            kernels::rebase_offsets(st, &src.view(), w, *base, &mut out.slice_mut(row * w..end * w))?;
                        }
                        row += n;
                    }
                    if last.is_none() {
                        st.memset_bytes(&mut out.view_mut(), 0)?;
                    }
                    (values, Some(out))
                }
                _ => (values, None),
            };
            columns.push((names[k].clone(), Column::from_buffers(t, total, values, offsets, validity)?));
        }
        tables.push(Table::new(columns)?);
    }
    cluster.synchronize()?;
    Ok(Exchanged { tables, bytes })
}

#[cfg(test)]
mod tests {
    use super::bit_range;

    #[test]
    fn bit_ranges_cover_exactly_the_bytes_of_the_bits() {
        assert_eq!(bit_range(0, 8), (0..1, 0));
        assert_eq!(bit_range(3, 5), (0..1, 3));
        assert_eq!(bit_range(3, 6), (0..2, 3));
        assert_eq!(bit_range(17, 1), (2..3, 1));
        assert_eq!(bit_range(16, 0), (2..2, 0));
    }
}
