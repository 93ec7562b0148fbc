//! Sequences of joins (seed 002, section 5.2.7): a fact table with `k` foreign keys joined with
//! `k` dimension tables, `F ⋈ D1 ⋈ D2 ⋈ ... ⋈ Dk` (inner joins, `fk_i = D_i.key`).
//!
//! The fact table enters as row ids `0..n`, not as its columns. Join `i` takes foreign key `i`
//! gathered through the current fact row ids (only right before its join: no foreign key is
//! materialized through earlier joins) and joins the dimension table with the intermediate
//! relation, whose payloads are the fact row ids and the dimension payloads materialized so far;
//! so join `i` materializes one more column than join `i - 1`, as in the paper. After the last
//! join the fact table's payload columns are gathered through the final fact row ids.
//!
//! ```no_run
//! # use gpujoin_join::*; use gpujoin_join::wide::*; use gpujoin_join::table::TableView; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let (fk1, fk2) = (s.copy_from_host(&[0u32, 1, 1])?, s.copy_from_host(&[5u32, 6, 9])?);
//! let amount = s.copy_from_host(&[1.5f64, 2.5, 3.5])?;
//! let (k1, p1) = (s.copy_from_host(&[0u32, 1])?, s.copy_from_host(&[100i32, 101])?);
//! let (k2, p2) = (s.copy_from_host(&[5u32, 6])?, s.copy_from_host(&[50i64, 60])?);
//! let (d1, d1_cols) = (TableView::single(k1.view()), [p1.view().into()]);
//! let (d2, d2_cols) = (TableView::single(k2.view()), [p2.view().into()]);
//! let dims = [(&d1, &d1_cols[..]), (&d2, &d2_cols[..])];
//! let out = join_sequence(s, &[fk1.view().into(), fk2.view().into()], &[amount.view().into()], &dims, Algorithm::Auto, JoinOptions::default())?;
//! assert_eq!(out.rows, 2); // fact rows 0 and 1 (fact row 2's second key 9 has no partner)
//! assert_eq!(out.dim_payloads.len(), 2);
//! # Ok(()) }
//! ```

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};

use super::{gather_column, join, Algorithm, WideJoinOptions};
use crate::common::iota;
use crate::hash_join::JoinStats;
use crate::table::{Column, ColumnView, TableView};
use crate::types::{JoinOptions, JoinType};

/// One join of a sequence.
#[derive(Debug, Clone)]
pub struct SequenceStep {
    pub algorithm: Algorithm,
    pub reason: String,
    pub rows: u64,
    pub stats: JoinStats,
}

/// The output relation of a join sequence: for output row `k`, `fact_rows[k]` is its fact row,
/// `fact_payloads[c][k]` the fact table's payload column `c` there, and `dim_payloads[i][c][k]`
/// dimension table `i`'s payload column `c` of the matching dimension row.
pub struct SequenceOutput {
    pub rows: u64,
    pub fact_rows: DeviceBuffer<u32>,
    pub fact_payloads: Vec<Column>,
    pub dim_payloads: Vec<Vec<Column>>,
    /// One entry per join, in order.
    pub steps: Vec<SequenceStep>,
}

/// Joins a fact table (foreign keys `fact_fks`, payload columns `fact_payloads`) with
/// `dims[i]` on `fact_fks[i] = dims[i].keys` for every `i`, in order, each join with `algorithm`
/// (`Auto`: chosen per join). Inner joins; the dimension keys are single columns of the foreign
/// keys' types. Output order: that of the last join (deterministic).
pub fn join_sequence<'a>(stream: &Stream, fact_fks: &[ColumnView<'_>], fact_payloads: &[ColumnView<'_>], dims: &[(&'a TableView<'a>, &'a [ColumnView<'a>])], algorithm: Algorithm, opts: JoinOptions) -> Result<SequenceOutput> {
    if fact_fks.is_empty() || fact_fks.len() != dims.len() {
        return Err(Error::invalid(format!("a join sequence needs one foreign key per dimension table (at least one): {} foreign keys, {} tables", fact_fks.len(), dims.len())));
    }
    let n = fact_fks[0].len();
    for (i, c) in fact_fks.iter().enumerate() {
        gpujoin_device::check_same_len("foreign key 0", n, &format!("foreign key {i}"), c.len())?;
    }
    crate::keys::check_payloads("fact", n, fact_payloads)?;
    for (i, c) in fact_fks.iter().enumerate() {
        // Gathered as payloads through the fact row ids, then joined as keys.
        crate::keys::check_payloads(&format!("foreign key {i}:"), n, std::slice::from_ref(c))?;
    }
    if n as u64 > crate::RowId::MAX_ROWS {
        return Err(Error::too_large("fact rows", n as u64, crate::RowId::MAX_ROWS));
    }
    let wopts = WideJoinOptions { keys: opts, ..WideJoinOptions::default() };
    // The intermediate relation: fact row ids and the dimension payloads so far.
    let mut ids: DeviceBuffer<u32> = iota(stream, n)?;
    let mut carried: Vec<Column> = Vec::new();
    let mut counts: Vec<usize> = Vec::with_capacity(dims.len());
    let mut steps = Vec::with_capacity(dims.len());
    for (i, &dim) in dims.iter().enumerate() {
        // The foreign key, materialized right before its join.
        let fk_owned = if i == 0 { None } else { Some(gather_column(stream, &fact_fks[i], &ids.view())?) };
        let fk = TableView::single(fk_owned.as_ref().map_or(fact_fks[i], Column::view));
        let mut cols: Vec<ColumnView<'_>> = vec![ids.view().into()];
        cols.extend(carried.iter().map(Column::view));
        let out = join(stream, dim, (&fk, &cols), JoinType::Inner, algorithm, wopts)?;
        drop((fk, cols));
        drop(fk_owned);
        steps.push(SequenceStep { algorithm: out.algorithm, reason: out.reason, rows: out.rows, stats: out.stats });
        let (Some(l), Some(r)) = (out.left, out.right) else { return Err(Error::invalid("internal: an inner join without both sides")) };
        let mut rc = r.into_parts().1.into_iter();
        ids = match rc.next() {
            Some(c) if c.data_type() == crate::table::DataType::UInt32 => c.into_values::<u32>().ok_or_else(|| Error::invalid("internal: fact row ids"))?,
            _ => return Err(Error::invalid("internal: the fact row ids did not come back as the first column")),
        };
        carried = rc.collect();
        let l = l.into_parts().1;
        counts.push(l.len());
        carried.extend(l);
    }
    // Final materialization of the fact payloads.
    let fact = fact_payloads.iter().map(|c| gather_column(stream, c, &ids.view())).collect::<Result<Vec<_>>>()?;
    let mut dim_payloads = Vec::with_capacity(dims.len());
    let mut it = carried.into_iter();
    for c in counts {
        dim_payloads.push(it.by_ref().take(c).collect());
    }
    Ok(SequenceOutput { rows: ids.len() as u64, fact_rows: ids, fact_payloads: fact, dim_payloads, steps })
}
