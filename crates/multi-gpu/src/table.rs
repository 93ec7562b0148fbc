//! Tables spread over the ranks of a [`Cluster`]: one [`Table`] a rank, the same columns in each.

use gpujoin_device::{Error, Result};
use gpujoin_join::table::{DataType, HostColumn, HostTable, Table, TableView};

use crate::cluster::Cluster;

/// A table whose rows are spread over the ranks of a cluster: part `r` on rank `r`'s device, every
/// part with the same column names and types. Its rows, in order, are part 0's, then part 1's...
///
/// ```no_run
/// use gpujoin_multi_gpu::{Cluster, DistributedTable};
/// use gpujoin_join::table::{HostColumn, HostTable};
/// let cluster = Cluster::on_one_device(0, 2)?;
/// let t = HostTable::new(vec![("k", HostColumn::from_values(vec![1u32, 2, 3]))])?;
/// let d = DistributedTable::scatter(&cluster, &t)?; // rank 0: [1], rank 1: [2, 3]
/// assert_eq!(d.rows_per_rank(), vec![1, 2]);
/// assert_eq!(d.to_host()?, t);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub struct DistributedTable {
    parts: Vec<Table>,
}

impl DistributedTable {
    /// A table from its parts, part `r` on rank `r`'s device (checked where the join uses them):
    /// the same column names and types in each.
    pub fn from_parts(parts: Vec<Table>) -> Result<DistributedTable> {
        let Some(first) = parts.first() else { return Err(Error::invalid("a distributed table of no parts")) };
        for (r, p) in parts.iter().enumerate() {
            if !same_columns(&p.view(), &first.view()) {
                return Err(Error::invalid(format!("part {r} has columns {:?} of other names or types than part 0's {:?}", p.names(), first.names())));
            }
        }
        Ok(DistributedTable { parts })
    }

    /// Spreads a host table over the ranks: rank `r` gets the `r`-th of `size` contiguous,
    /// nearly equal runs of rows.
    pub fn scatter(cluster: &Cluster, host: &HostTable) -> Result<DistributedTable> {
        let (n, g) = (host.rows(), cluster.size());
        let parts = (0..g)
            .map(|r| {
                let (a, b) = (n * r / g, n * (r + 1) / g);
                Table::upload(cluster.stream(r), &host.slice(a, b - a)?)
            })
            .collect::<Result<Vec<_>>>()?;
        DistributedTable::from_parts(parts)
    }

    /// The parts, in rank order.
    pub fn parts(&self) -> &[Table] {
        &self.parts
    }

    /// Borrowed views of the parts, in rank order.
    pub fn views(&self) -> Vec<TableView<'_>> {
        self.parts.iter().map(Table::view).collect()
    }

    /// The column names.
    pub fn names(&self) -> &[String] {
        self.parts[0].names()
    }

    /// Rows in all parts.
    pub fn rows(&self) -> u64 {
        self.parts.iter().map(|p| p.rows() as u64).sum()
    }

    /// Rows of each part.
    pub fn rows_per_rank(&self) -> Vec<u64> {
        self.parts.iter().map(|p| p.rows() as u64).collect()
    }

    /// Every part gathered onto rank `rank`'s device as one table, in rank order (through the
    /// cluster's exchange: NCCL between GPUs).
    pub fn gather_to(&self, cluster: &Cluster, rank: usize) -> Result<Table> {
        let g = cluster.size();
        if self.parts.len() != g || rank >= g {
            return Err(Error::invalid(format!("gathering {} parts onto rank {rank} of a cluster of {g}", self.parts.len())));
        }
        let sends = self
            .parts
            .iter()
            .map(|p| (0..g).map(|d| if d == rank { Ok(p.view()) } else { p.view().slice(0, 0) }).collect::<Result<Vec<_>>>())
            .collect::<Result<Vec<_>>>()?;
        let mut tables = crate::exchange::all_to_all(cluster, &sends)?.tables;
        Ok(tables.swap_remove(rank))
    }

    /// Every part copied to the host and concatenated in rank order.
    pub fn to_host(&self) -> Result<HostTable> {
        concat_host(&self.parts.iter().map(Table::to_host).collect::<Result<Vec<_>>>()?)
    }

    /// Splits into the parts.
    pub fn into_parts(self) -> Vec<Table> {
        self.parts
    }
}

/// Whether two tables have the same column names and types, in order.
pub(crate) fn same_columns(a: &TableView<'_>, b: &TableView<'_>) -> bool {
    a.names() == b.names() && a.columns().iter().zip(b.columns()).all(|(x, y)| x.data_type() == y.data_type())
}

fn get_bit(bits: &[u8], i: usize) -> bool {
    bits[i / 8] >> (i % 8) & 1 == 1
}

fn push_bit(bits: &mut Vec<u8>, i: usize, v: bool) {
    if i.is_multiple_of(8) {
        bits.push(0);
    }
    if v {
        *bits.last_mut().expect("pushed") |= 1 << (i % 8);
    }
}

fn offset_at(c: &HostColumn, i: usize) -> i64 {
    let o = c.offsets_buffer();
    if c.data_type() == DataType::Utf8 {
        i32::from_le_bytes(o[i * 4..i * 4 + 4].try_into().expect("4 bytes")) as i64
    } else {
        i64::from_le_bytes(o[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
    }
}

/// One column of the rows of `parts` (same type) in order.
fn concat_column(parts: &[&HostColumn]) -> Result<HostColumn> {
    let t = parts[0].data_type();
    let len: usize = parts.iter().map(|c| c.len()).sum();
    let mut values = Vec::new();
    let mut offsets = Vec::new();
    let mut validity = parts.iter().any(|c| c.validity_buffer().is_some()).then(Vec::new);
    let mut row = 0usize;
    for c in parts {
        if c.data_type() != t {
            return Err(Error::TypeMismatch { what: "concatenated columns".into(), left: t.to_string(), right: c.data_type().to_string() });
        }
        let off = c.offset();
        match t {
            DataType::Boolean => {
                for i in 0..c.len() {
                    push_bit(&mut values, row + i, get_bit(c.values_buffer(), off + i));
                }
            }
            DataType::Utf8 | DataType::LargeUtf8 => {
                if offsets.is_empty() {
                    if t == DataType::Utf8 { offsets.extend_from_slice(&0i32.to_le_bytes()) } else { offsets.extend_from_slice(&0i64.to_le_bytes()) }
                }
                let (a, b) = (offset_at(c, off) as usize, offset_at(c, off + c.len()) as usize);
                let base = values.len() as i64;
                values.extend_from_slice(&c.values_buffer()[a..b]);
                for i in 1..=c.len() {
                    let o = offset_at(c, off + i) - a as i64 + base;
                    if t == DataType::Utf8 {
                        let o = i32::try_from(o).map_err(|_| Error::too_large("bytes of a concatenated Utf8 column", o as u64, i32::MAX as u64))?;
                        offsets.extend_from_slice(&o.to_le_bytes());
                    } else {
                        offsets.extend_from_slice(&o.to_le_bytes());
                    }
                }
            }
            _ => {
                let w = t.byte_width().expect("fixed width");
                values.extend_from_slice(&c.values_buffer()[off * w..(off + c.len()) * w]);
            }
        }
        if let Some(v) = validity.as_mut() {
            for i in 0..c.len() {
                push_bit(v, row + i, c.is_valid(i));
            }
        }
        row += c.len();
    }
    if t.is_string() && offsets.is_empty() {
        offsets = vec![0; if t == DataType::Utf8 { 4 } else { 8 }];
    }
    HostColumn::from_arrow_buffers(t, len, 0, values, offsets, validity)
}

/// The rows of `tables` (the same column names and types) in order, as one host table.
///
/// ```
/// use gpujoin_multi_gpu::concat_host;
/// use gpujoin_join::table::{HostColumn, HostTable};
/// let a = HostTable::new(vec![("s", HostColumn::utf8_options([Some("x"), None]))])?;
/// let b = HostTable::new(vec![("s", HostColumn::utf8(["yz"]))])?;
/// let t = concat_host(&[a, b])?;
/// assert_eq!(t.rows(), 3);
/// assert_eq!(t.column("s")?.null_count(), 1);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn concat_host(tables: &[HostTable]) -> Result<HostTable> {
    let Some(first) = tables.first() else { return Err(Error::invalid("concatenating no tables")) };
    for t in tables {
        if t.names() != first.names() {
            return Err(Error::invalid(format!("concatenating tables of columns {:?} and {:?}", first.names(), t.names())));
        }
    }
    let columns = (0..first.names().len())
        .map(|k| concat_column(&tables.iter().map(|t| &t.columns()[k]).collect::<Vec<_>>()).map(|c| (first.names()[k].clone(), c)))
        .collect::<Result<Vec<_>>>()?;
    HostTable::new(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(t: &HostTable) -> Vec<String> {
        (0..t.rows()).map(|k| format!("{:?}", t.columns().iter().map(|c| c.value(k)).collect::<Vec<_>>())).collect()
    }

    #[test]
    fn concatenation_keeps_every_row_in_order_across_types_offsets_and_validity() {
        let a = HostTable::new(vec![
            ("i", HostColumn::from_options(vec![Some(1i64), None, Some(3), Some(4)])),
            ("b", HostColumn::from_bools(&[true, false, true, true])),
            ("s", HostColumn::utf8_options([Some("ab"), None, Some(""), Some("ü")])),
            ("l", HostColumn::large_utf8_options([Some("x"), Some("yy"), None, Some("zzz")])),
            ("d", HostColumn::from_values(vec![1.5f64, -0.0, f64::NAN, 2.0])),
        ])
        .unwrap();
        // A slice (bit offset 1 in every bitmap, element offset 1 in every buffer).
        let a1 = a.slice(1, 3).unwrap();
        let b = HostTable::new(vec![
            ("i", HostColumn::from_values(vec![7i64, 8])),
            ("b", HostColumn::from_bools(&[false, true]).with_validity(&[true, false]).unwrap()),
            ("s", HostColumn::utf8(["q", "rs"])),
            ("l", HostColumn::large_utf8_options([None::<&str>, Some("w")])),
            ("d", HostColumn::from_values(vec![0.25f64, 9.0])),
        ])
        .unwrap();
        let empty = a.slice(4, 0).unwrap();
        let parts = [a1.clone(), empty.clone(), b.clone(), a.clone()];
        let t = concat_host(&parts).unwrap();
        let want: Vec<String> = parts.iter().flat_map(rows).collect();
        assert_eq!(t.rows(), 9); // 3 + 0 + 2 + 4
        assert_eq!(rows(&t), want);
        assert_eq!(t.column("i").unwrap().null_count(), 2);
        assert_eq!(t.column("b").unwrap().null_count(), 1);
        // Only empty parts: an empty table of the same columns.
        let e = concat_host(&[empty.clone(), empty]).unwrap();
        assert_eq!((e.rows(), e.names()), (0, a.names()));
    }

    #[test]
    fn concatenation_refuses_other_columns() {
        let a = HostTable::new(vec![("i", HostColumn::from_values(vec![1i64]))]).unwrap();
        let b = HostTable::new(vec![("j", HostColumn::from_values(vec![1i64]))]).unwrap();
        let c = HostTable::new(vec![("i", HostColumn::from_values(vec![1i32]))]).unwrap();
        assert!(matches!(concat_host(&[a.clone(), b]), Err(Error::InvalidArgument(_))));
        assert!(matches!(concat_host(&[a, c]), Err(Error::TypeMismatch { .. })));
        assert!(matches!(concat_host(&[]), Err(Error::InvalidArgument(_))));
    }
}
