//! The Arrow C Device Data Interface on the GPU, against the C peer (`cuda/peer.cu`, another
//! "GPU library" with its own copy of the spec's structures): tables of every type, with NULLs
//! and sliced (non-zero offsets, validity from a bit offset), exported and read by the peer's
//! kernels, moved column by column, imported back; the peer's arrays (its own cudaMalloc'ed
//! buffers, its sync event, its release callbacks) imported and downloaded; typed errors for an
//! array of another device. Release callbacks are counted: each runs exactly once.

use std::sync::Arc;

use gpujoin_arrow::c_device::peer::{self, PeerStats};
use gpujoin_arrow::c_device::{export_table, ImportedTable, ARROW_DEVICE_CUDA};
use gpujoin_device::testing::{device_or_skip, rows};
use gpujoin_device::{Error, Stream};
use gpujoin_join::table::{DataType, HostColumn, HostTable, Table, Value};

const OFFSET: usize = 5;

/// A column of type `t` with `n` rows, NULLs where `i % 3 == 1` (every type) and varied values.
fn column(t: DataType, n: usize) -> HostColumn {
    let valid: Vec<bool> = (0..n).map(|i| i % 3 != 1).collect();
    let x = |i: usize| (i as i64).wrapping_mul(2_654_435_761) % 1_000_003 - 500_000;
    let c = match t {
        DataType::Int8 => HostColumn::from_values((0..n).map(|i| x(i) as i8).collect()),
        DataType::Int16 => HostColumn::from_values((0..n).map(|i| x(i) as i16).collect()),
        DataType::Int32 | DataType::Date32 => HostColumn::from_values((0..n).map(|i| x(i) as i32).collect()),
        DataType::Int64 | DataType::Date64 | DataType::Timestamp(_) => HostColumn::from_values((0..n).map(|i| x(i) << 20).collect()),
        DataType::UInt8 => HostColumn::from_values((0..n).map(|i| x(i) as u8).collect()),
        DataType::UInt16 => HostColumn::from_values((0..n).map(|i| x(i) as u16).collect()),
        DataType::UInt32 => HostColumn::from_values((0..n).map(|i| x(i) as u32).collect()),
        DataType::UInt64 => HostColumn::from_values((0..n).map(|i| (x(i) as u64).wrapping_mul(1 << 40)).collect()),
        // Halves: the peer's sums (in any order) are exact.
        DataType::Float32 => HostColumn::from_values((0..n).map(|i| x(i) as f32 * 0.5).collect()),
        DataType::Float64 => HostColumn::from_values((0..n).map(|i| x(i) as f64 * 0.5).collect()),
        DataType::Decimal128(..) => HostColumn::from_values((0..n).map(|i| (x(i) as i128) << 70 | i as i128).collect()),
        DataType::Boolean => HostColumn::from_bools(&(0..n).map(|i| x(i) % 2 == 0).collect::<Vec<_>>()),
        DataType::Utf8 | DataType::LargeUtf8 => {
            let s: Vec<Option<String>> = (0..n).map(|i| valid[i].then(|| "é".repeat(i % 4) + &"x".repeat(i % 5))).collect();
            return if t == DataType::Utf8 { HostColumn::utf8_options(s) } else { HostColumn::large_utf8_options(s) };
        }
    };
    c.with_type(t).unwrap().with_validity(&valid).unwrap()
}

/// Every type with NULLs, plus a column without a validity bitmap, `n` rows, sliced from row
/// `OFFSET` (so every column has offset 5 and its validity starts at bit 5).
fn every_type_table(n: usize) -> HostTable {
    let mut columns: Vec<(String, HostColumn)> = DataType::EXAMPLES.iter().enumerate().map(|(i, &t)| (format!("c{i}_{t}"), column(t, n + OFFSET + 3))).collect();
    columns.push(("dense".into(), HostColumn::from_values((0..n + OFFSET + 3).map(|i| i as i32).collect())));
    HostTable::new(columns).unwrap().slice(OFFSET, n).unwrap()
}

/// What the peer should compute over `c`.
fn expected(c: &HostColumn) -> PeerStats {
    let mut s = PeerStats { rows: c.len() as i64, nulls: c.null_count() as i64, ..PeerStats::default() };
    for v in c.values() {
        match v {
            Value::Null => {}
            Value::Int(i) => s.sum = s.sum.wrapping_add(i as i64),
            Value::Float(f) => s.fsum += f,
            Value::Bool(b) => s.trues += b as i64,
            Value::Str(b) => s.bytes += b.len() as i64,
        }
    }
    s
}

fn upload(stream: &Stream, host: &HostTable) -> Arc<Table> {
    Arc::new(Table::upload(stream, host).unwrap())
}

#[test]
fn the_peer_reads_an_exported_table_of_every_type() {
    let Some(device) = device_or_skip("the_peer_reads_an_exported_table_of_every_type") else { return };
    let stream = device.new_stream().unwrap();
    for n in [0, 1, 1000, rows(100_003, 4_099)] {
        let host = every_type_table(n);
        let table = upload(&stream, &host);
        let (array, schema) = export_table(&stream, table.clone()).unwrap();
        assert_eq!((array.device_type(), array.device_id()), (ARROW_DEVICE_CUDA, device.ordinal() as i64));
        assert!(!array.sync_event().is_null());
        assert_eq!((array.array().length, array.array().n_children), (n as i64, host.columns().len() as i64));
        assert_eq!(Arc::strong_count(&table), 2, "the export holds the table");
        let stats = peer::consume(array, &schema).unwrap();
        assert_eq!(Arc::strong_count(&table), 1, "the peer's release dropped the export's share, once");
        for ((name, c), s) in host.names().iter().zip(host.columns()).zip(&stats) {
            assert_eq!(*s, expected(c), "column {name} of {n} rows");
        }
    }
}

#[test]
fn a_column_moved_out_outlives_its_parent() {
    let Some(device) = device_or_skip("a_column_moved_out_outlives_its_parent") else { return };
    let stream = device.new_stream().unwrap();
    let host = every_type_table(4099);
    let table = upload(&stream, &host);
    for (k, c) in host.columns().iter().enumerate() {
        let (array, schema) = export_table(&stream, table.clone()).unwrap();
        let s = peer::consume_child(array, &schema, k).unwrap();
        assert_eq!(s, expected(c), "column {}", host.names()[k]);
        assert_eq!(Arc::strong_count(&table), 1, "the parent and the moved column were both released");
    }
}

#[test]
fn an_exported_table_imports_back() {
    let Some(device) = device_or_skip("an_exported_table_imports_back") else { return };
    let (producer, consumer) = (device.new_stream().unwrap(), device.new_stream().unwrap());
    for n in [0, 3, 2000] {
        let host = every_type_table(n);
        let table = upload(&producer, &host);
        let (array, schema) = export_table(&producer, table.clone()).unwrap();
        // Imported on another stream: it waits on the export's event.
        let imported = ImportedTable::new(&consumer, array, &schema).unwrap();
        let view = imported.view();
        assert_eq!(view.names(), host.names());
        for (c, h) in view.columns().iter().zip(host.columns()) {
            assert_eq!((c.data_type(), c.len(), c.offset()), (h.data_type(), n, OFFSET));
        }
        let back = view.to_host(&consumer).unwrap();
        for ((name, a), b) in host.names().iter().zip(host.columns()).zip(back.columns()) {
            assert_eq!(a.values(), b.values(), "column {name} of {n} rows");
            assert_eq!(a.null_count(), b.null_count(), "column {name}");
        }
        assert_eq!(Arc::strong_count(&table), 2);
        drop(imported);
        assert_eq!(Arc::strong_count(&table), 1, "dropping the import released the export");
    }
}

/// The peer's array: logical child element j of id is j * 7 - 3 (null when j % 3 == 1), of name
/// j % 7 letters from 'a' + j % 26 (null when j % 5 == 2); row i is element parent_offset + i.
fn peer_rows(rows: usize, parent_offset: usize) -> HostTable {
    let ids: Vec<Option<i64>> = (0..rows).map(|i| i + parent_offset).map(|j| (j % 3 != 1).then_some(j as i64 * 7 - 3)).collect();
    let names: Vec<Option<String>> = (0..rows)
        .map(|i| i + parent_offset)
        .map(|j| (j % 5 != 2).then(|| (0..j % 7).map(|k| (b'a' + ((j + k) % 26) as u8) as char).collect()))
        .collect();
    HostTable::new(vec![("id", HostColumn::from_options(ids)), ("name", HostColumn::utf8_options(names))]).unwrap()
}

#[test]
fn the_peers_array_imports_and_downloads() {
    let Some(device) = device_or_skip("the_peers_array_imports_and_downloads") else { return };
    let stream = device.new_stream().unwrap();
    for (n, parent_offset) in [(1000, 0), (1000, 3), (0, 0), (1, 2), (rows(70_001, 2_001), 9)] {
        let (array, schema, token) = peer::produce(n, parent_offset, None).unwrap();
        let imported = ImportedTable::new(&stream, array, &schema).unwrap();
        let view = imported.view();
        assert_eq!(view.names(), ["id", "name"]);
        assert_eq!(view.columns().iter().map(|c| c.data_type()).collect::<Vec<_>>(), [DataType::Int64, DataType::Utf8]);
        let back = view.to_host(&stream).unwrap();
        let want = peer_rows(n, parent_offset);
        for ((name, a), b) in want.names().iter().zip(want.columns()).zip(back.columns()) {
            assert_eq!(a.values(), b.values(), "column {name}, {n} rows from {parent_offset}");
            for i in 0..n {
                assert_eq!(a.is_valid(i), b.is_valid(i), "validity of row {i} of {name}");
            }
        }
        assert_eq!(peer::released_count(token), 0, "alive while imported");
        drop(imported);
        drop(schema);
        assert_eq!((peer::released_count(token), peer::freed_count(token)), (1, 1), "the peer's release ran once");
    }
}

#[test]
fn an_array_of_another_device_is_a_typed_error() {
    let Some(device) = device_or_skip("an_array_of_another_device_is_a_typed_error") else { return };
    let stream = device.new_stream().unwrap();
    let other = device.ordinal() as i64 + 7;
    let (array, schema, token) = peer::produce(10, 0, Some(other)).unwrap();
    let e = ImportedTable::new(&stream, array, &schema).expect_err("an array of another device");
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    assert!(e.to_string().contains("another device") && e.to_string().contains(&format!("CUDA device {other}")), "{e}");
    // The refused array was released, once.
    assert_eq!((peer::released_count(token), peer::freed_count(token)), (1, 1));
}

#[test]
fn the_peers_array_goes_back_to_the_peer_through_a_table() {
    let Some(device) = device_or_skip("the_peers_array_goes_back_to_the_peer_through_a_table") else { return };
    let stream = device.new_stream().unwrap();
    let (array, schema, token) = peer::produce(5000, 1, None).unwrap();
    let imported = ImportedTable::new(&stream, array, &schema).unwrap();
    // Downloaded, uploaded again (a table of gpujoin's own), exported to the peer.
    let host = imported.view().to_host(&stream).unwrap();
    drop(imported);
    assert_eq!(peer::released_count(token), 1);
    let (array, schema) = export_table(&stream, Table::upload(&stream, &host).unwrap()).unwrap();
    let stats = peer::consume(array, &schema).unwrap();
    assert_eq!(stats, host.columns().iter().map(expected).collect::<Vec<_>>());
}
