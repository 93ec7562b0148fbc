//! Payload columns for the wide and hash-join tests: host payloads of every 4- and 8-byte type
//! (raw bits, distinct per row and column), their device copies, and the expected output rows of
//! a join from the reference pairs.

use gpujoin_device::{DeviceBuffer, Stream};
use gpujoin_join::table::{Column, ColumnView, DataType, Table};
use gpujoin_join::{JoinType, RowId};
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

/// A host payload column as raw bits (4- or 8-byte values), distinct per row and column.
pub struct HostPayload {
    pub ty: PType,
    pub bits: Vec<u64>,
}

pub fn payload(ty: PType, n: usize, salt: u64) -> HostPayload {
    let wide = matches!(ty, PType::I64 | PType::U64 | PType::F64);
    let bits = (0..n as u64)
        .map(|i| {
            let v = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93);
            if wide { v } else { v & 0xFFFF_FFFF }
        })
        .collect();
    HostPayload { ty, bits }
}

pub enum DevPayload {
    I32(DeviceBuffer<i32>),
    U32(DeviceBuffer<u32>),
    F32(DeviceBuffer<f32>),
    I64(DeviceBuffer<i64>),
    U64(DeviceBuffer<u64>),
    F64(DeviceBuffer<f64>),
}

pub fn upload(s: &Stream, p: &HostPayload) -> DevPayload {
    let b = &p.bits;
    match p.ty {
        PType::I32 => DevPayload::I32(s.copy_from_host(&b.iter().map(|&x| x as u32 as i32).collect::<Vec<_>>()).unwrap()),
        PType::U32 => DevPayload::U32(s.copy_from_host(&b.iter().map(|&x| x as u32).collect::<Vec<_>>()).unwrap()),
        PType::F32 => DevPayload::F32(s.copy_from_host(&b.iter().map(|&x| f32::from_bits(x as u32)).collect::<Vec<_>>()).unwrap()),
        PType::I64 => DevPayload::I64(s.copy_from_host(&b.iter().map(|&x| x as i64).collect::<Vec<_>>()).unwrap()),
        PType::U64 => DevPayload::U64(s.copy_from_host(b).unwrap()),
        PType::F64 => DevPayload::F64(s.copy_from_host(&b.iter().map(|&x| f64::from_bits(x)).collect::<Vec<_>>()).unwrap()),
    }
}

pub fn dev_column(p: &DevPayload) -> ColumnView<'_> {
    match p {
        DevPayload::I32(b) => b.view().into(),
        DevPayload::U32(b) => b.view().into(),
        DevPayload::F32(b) => b.view().into(),
        DevPayload::I64(b) => b.view().into(),
        DevPayload::U64(b) => b.view().into(),
        DevPayload::F64(b) => b.view().into(),
    }
}

/// A materialized payload column's type and raw bits (4-byte values zero-extended).
pub fn payload_bits(p: &Column) -> (PType, Vec<u64>) {
    let ty = match p.data_type() {
        DataType::Int32 => PType::I32,
        DataType::UInt32 => PType::U32,
        DataType::Float32 => PType::F32,
        DataType::Int64 => PType::I64,
        DataType::UInt64 => PType::U64,
        DataType::Float64 => PType::F64,
        t => panic!("a payload column of type {t}"),
    };
    let h = p.to_host().unwrap();
    let (w, off, n) = (p.data_type().byte_width().unwrap(), h.offset(), h.len());
    let bytes = &h.values_buffer()[off * w..(off + n) * w];
    let bits = bytes.chunks_exact(w).map(|c| if w == 4 { u32::from_le_bytes(c.try_into().unwrap()) as u64 } else { u64::from_le_bytes(c.try_into().unwrap()) }).collect();
    (ty, bits)
}

pub type Row = Vec<Option<u64>>;

/// The output rows of one side as payload tuples (`None` for a null row), checking types,
/// lengths, the validity and that null rows hold zero.
pub fn side_rows(m: &Table, cols: &[HostPayload], rows: usize, nullable: bool, what: &str) -> Result<Vec<Row>, TestCaseError> {
    prop_assert_eq!(m.columns().len(), cols.len(), "{}: payload columns", what);
    let got: Vec<(PType, Vec<u64>)> = m.columns().iter().map(payload_bits).collect();
    for (c, (ty, v)) in got.iter().enumerate() {
        prop_assert_eq!(*ty, cols[c].ty, "{}: column {} type", what, c);
        prop_assert_eq!(v.len(), rows, "{}: column {} rows", what, c);
    }
    // Every column carries the side's validity (the same bits).
    let host: Vec<_> = m.columns().iter().map(|c| c.to_host().unwrap()).collect();
    for (c, h) in host.iter().enumerate() {
        prop_assert_eq!(h.validity_buffer().is_some(), nullable, "{}: validity present in column {}", what, c);
    }
    let valid: Vec<bool> = (0..rows).map(|k| host.first().is_none_or(|h| h.is_valid(k))).collect();
    for (c, h) in host.iter().enumerate() {
        prop_assert!((0..rows).all(|k| h.is_valid(k) == valid[k]), "{}: column {} validity differs from column 0", what, c);
    }
    let mut out = Vec::with_capacity(rows);
    for (k, &ok) in valid.iter().enumerate() {
        if ok {
            out.push(got.iter().map(|(_, v)| Some(v[k])).collect());
        } else {
            for (c, (_, v)) in got.iter().enumerate() {
                prop_assert_eq!(v[k], 0, "{}: null row {} holds a value in column {}", what, k, c);
            }
            out.push(vec![None; cols.len()]);
        }
    }
    Ok(out)
}

pub fn expected_rows(pairs: &[(RowId, RowId)], lcols: &[HostPayload], rcols: &[HostPayload], jt: JoinType) -> Vec<Row> {
    let side = |id: RowId, cols: &[HostPayload]| -> Row { cols.iter().map(|c| id.get().map(|i| c.bits[i as usize])).collect() };
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

