//! Host tables for the wide-join tests (gpu_wide.rs): key tables, payload columns of every 4- and
//! 8-byte type (raw bits, distinct per row and column; the same values as
//! `common::payloads::payload`), the reference pairs of a join of host tables, and the output rows
//! of a front-door join (`JoinOutput::table`) next to host gathers through the reference pairs.
//!
//! Included with `#[path = "common/wide_tables.rs"] mod wide_tables;` (not through `common`).

#![allow(dead_code)]

use gpujoin_join::table::{DataType, HostColumn, HostTable};
use gpujoin_join::{JoinType, NanEquality, NullEquality, RowId};
use gpujoin_testkit::table_reference;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PType {
    I32,
    U32,
    F32,
    I64,
    U64,
    F64,
}

pub const PTYPES: [PType; 6] = [PType::I32, PType::U32, PType::F32, PType::I64, PType::U64, PType::F64];

/// The data type of a payload column of `ty`.
pub fn data_type(ty: PType) -> DataType {
    match ty {
        PType::I32 => DataType::Int32,
        PType::U32 => DataType::UInt32,
        PType::F32 => DataType::Float32,
        PType::I64 => DataType::Int64,
        PType::U64 => DataType::UInt64,
        PType::F64 => DataType::Float64,
    }
}

/// A payload column as raw bits (4-byte values zero-extended), distinct per row and column.
#[derive(Debug, Clone)]
pub struct PayloadBits {
    pub ty: PType,
    pub bits: Vec<u64>,
}

/// `n` rows of `ty`, salted by `salt` (the same bits as `common::payloads::payload`).
pub fn payload(ty: PType, n: usize, salt: u64) -> PayloadBits {
    let wide = matches!(ty, PType::I64 | PType::U64 | PType::F64);
    let bits = (0..n as u64)
        .map(|i| {
            let v = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93);
            if wide { v } else { v & 0xFFFF_FFFF }
        })
        .collect();
    PayloadBits { ty, bits }
}

/// A payload as a host column of its type, holding exactly its bits.
pub fn payload_column(p: &PayloadBits) -> HostColumn {
    use HostColumn as H;
    let b = &p.bits;
    match p.ty {
        PType::I32 => H::from_values(b.iter().map(|&x| x as u32 as i32).collect()),
        PType::U32 => H::from_values(b.iter().map(|&x| x as u32).collect()),
        PType::F32 => H::from_values(b.iter().map(|&x| f32::from_bits(x as u32)).collect()),
        PType::I64 => H::from_values(b.iter().map(|&x| x as i64).collect()),
        PType::U64 => H::from_values(b.clone()),
        PType::F64 => H::from_values(b.iter().map(|&x| f64::from_bits(x)).collect()),
    }
}

/// A table of key columns `k0`, `k1`, ...
pub fn key_table(columns: Vec<HostColumn>) -> HostTable {
    HostTable::new(columns.into_iter().enumerate().map(|(i, c)| (format!("k{i}"), c)).collect()).unwrap()
}

/// The names of a table's key columns (`k0`, `k1`, ...: every column whose name starts with `k`).
pub fn key_names(t: &HostTable) -> Vec<&str> {
    t.names().iter().map(String::as_str).filter(|n| n.starts_with('k')).collect()
}

/// The key columns of `keys` and the payload columns `<prefix>0`, `<prefix>1`, ... in one table,
/// with the payloads' names.
pub fn with_payloads(keys: &HostTable, payloads: &[PayloadBits], prefix: &str) -> (HostTable, Vec<String>) {
    let mut columns: Vec<(String, HostColumn)> = keys.names().iter().cloned().zip(keys.columns().iter().cloned()).collect();
    let names: Vec<String> = (0..payloads.len()).map(|c| format!("{prefix}{c}")).collect();
    columns.extend(names.iter().cloned().zip(payloads.iter().map(payload_column)));
    (HostTable::new(columns).unwrap(), names)
}

/// The raw little-endian bits of every row of a 4- or 8-byte column (4-byte values zero-extended),
/// whatever its validity says.
pub fn raw_bits(c: &HostColumn) -> Vec<u64> {
    let w = c.data_type().byte_width().expect("a fixed-width column");
    assert!(w == 4 || w == 8, "a 4- or 8-byte column, not {}", c.data_type());
    let b = &c.values_buffer()[c.offset() * w..(c.offset() + c.len()) * w];
    b.chunks_exact(w)
        .map(|x| if w == 4 { u32::from_le_bytes(x.try_into().unwrap()) as u64 } else { u64::from_le_bytes(x.try_into().unwrap()) })
        .collect()
}

/// Every row's validity (`None`: the column has no validity bitmap).
pub fn validity(c: &HostColumn) -> Option<Vec<bool>> {
    c.validity_buffer().map(|_| (0..c.len()).map(|k| c.is_valid(k)).collect())
}

/// The reference pairs of the join of `l` and `r` on `lk = rk` (the testkit's hashed
/// `table_reference::equi_join`) in the canonical order of `common::canonical_pairs`: sorted, a
/// missing side `RowId::NONE`.
pub fn reference(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], jt: JoinType, nulls: NullEquality, nans: NanEquality) -> Vec<(RowId, RowId)> {
    let mut v: Vec<(RowId, RowId)> = table_reference::equi_join(l, lk, r, rk, jt, nulls, nans).into_iter().map(|(a, b)| (RowId::from_option(a), RowId::from_option(b))).collect();
    v.sort_unstable();
    v
}

pub type Row = Vec<Option<u64>>;

/// The output rows of one side's selected columns (`names`, of `cols`' types) as payload tuples
/// (`None` for a null row), checking types, lengths, that a validity bitmap is present exactly
/// where the side can be null, that the columns of a side agree on which rows are null, and that
/// null rows hold zero.
pub fn side_rows(t: &HostTable, names: &[String], cols: &[PayloadBits], rows: usize, nullable: bool, what: &str) -> Result<Vec<Row>, TestCaseError> {
    let mut got: Vec<(&HostColumn, Vec<u64>)> = Vec::new();
    for (name, p) in names.iter().zip(cols) {
        let c = t.column(name).map_err(|e| TestCaseError::fail(format!("{what}: column {name}: {e}")))?;
        prop_assert_eq!(c.data_type(), data_type(p.ty), "{}: column {} type", what, name);
        prop_assert_eq!(c.len(), rows, "{}: column {} rows", what, name);
        prop_assert_eq!(c.validity_buffer().is_some(), nullable, "{}: column {}: validity present", what, name);
        got.push((c, raw_bits(c)));
    }
    let mut out = Vec::with_capacity(rows);
    for k in 0..rows {
        let valid = got.first().is_none_or(|(c, _)| c.is_valid(k));
        for (c, (col, v)) in got.iter().enumerate() {
            prop_assert_eq!(col.is_valid(k), valid, "{}: row {} is null in some columns of a side only (column {})", what, k, c);
            if !valid {
                prop_assert_eq!(v[k], 0, "{}: null row {} holds a value in column {}", what, k, c);
            }
        }
        out.push(if valid { got.iter().map(|(_, v)| Some(v[k])).collect() } else { vec![None; cols.len()] });
    }
    Ok(out)
}

/// The output rows host gathers through `pairs` give (the payloads of the sides the join type
/// returns, `None` on a missing side), sorted.
pub fn expected_rows(pairs: &[(RowId, RowId)], lcols: &[PayloadBits], rcols: &[PayloadBits], jt: JoinType) -> Vec<Row> {
    let side = |id: RowId, cols: &[PayloadBits]| -> Row { cols.iter().map(|c| id.get().map(|i| c.bits[i as usize])).collect() };
    let mut rows: Vec<Row> = pairs
        .iter()
        .map(|&(l, r)| {
            let mut row = Vec::new();
            if jt.has_left_map() {
                row.extend(side(l, lcols));
            }
            if jt.has_right_map() {
                row.extend(side(r, rcols));
            }
            row
        })
        .collect();
    rows.sort();
    rows
}
