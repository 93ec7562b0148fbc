//! Record batches <-> host tables on the CPU (runs in CI): every type, NULLs at odd offsets,
//! sliced arrays, empty and one-row batches, long and non-ASCII strings, dictionaries with
//! unused entries; typed errors for types gpujoin does not hold.

mod common;

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float16Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::DataType as A;
use gpujoin_arrow::{from_host_table, to_host_table};
use gpujoin_device::Error;
use gpujoin_join::table::DataType;
use rand::rngs::StdRng;
use rand::SeedableRng;

fn round_trip(b: &RecordBatch) {
    let host = to_host_table(b).unwrap();
    assert_eq!(host.rows(), b.num_rows());
    let back = from_host_table(&host, Some(&b.schema())).unwrap();
    assert_eq!(back, common::decoded(b));
}

#[test]
fn every_type_round_trips_with_nulls_slices_and_edge_sizes() {
    let mut rng = StdRng::seed_from_u64(11);
    for n in [0usize, 1, 7, 8, 9, 333, 4096 + 5] {
        for nulls in [0, 10, 100] {
            let b = common::every_type(&mut rng, n, nulls, 50);
            round_trip(&b);
            // Slices start inside a byte of the validity bitmap.
            for (start, len) in [(0, n), (1, n.saturating_sub(1)), (3, n.saturating_sub(5)), (n / 2, n - n / 2)] {
                if start + len <= n {
                    round_trip(&b.slice(start, len));
                }
            }
        }
    }
}

#[test]
fn device_types_of_the_host_table() {
    let mut rng = StdRng::seed_from_u64(3);
    let t = to_host_table(&common::every_type(&mut rng, 10, 20, 5)).unwrap();
    let types: Vec<DataType> = t.columns().iter().map(|c| c.data_type()).collect();
    assert_eq!(types[13], DataType::Timestamp(gpujoin_join::table::TimeUnit::Microsecond));
    assert_eq!(types[14], DataType::Decimal128(38, 2));
    assert_eq!(&types[15..], &[DataType::Utf8, DataType::LargeUtf8, DataType::LargeUtf8, DataType::Utf8]);
    // Without a schema, strings come back as their device type.
    let b = from_host_table(&t, None).unwrap();
    assert_eq!(b.schema().field(17).data_type(), &A::LargeUtf8);
    assert_eq!(b.schema().field(13).data_type(), &A::Timestamp(arrow_schema::TimeUnit::Microsecond, None));
}

#[test]
fn long_and_non_ascii_strings() {
    let long = "é".repeat(40_000); // 80 000 bytes
    let a: ArrayRef = Arc::new(StringArray::from(vec![Some(long.as_str()), None, Some(""), Some("字😀"), Some(&long[..2])]));
    let b = RecordBatch::try_from_iter([("s", a)]).unwrap();
    round_trip(&b);
    round_trip(&b.slice(1, 3));
}

#[test]
fn unsupported_types_are_typed_errors_naming_the_column() {
    let b = RecordBatch::try_from_iter([
        ("k", Arc::new(Int32Array::from(vec![1])) as ArrayRef),
        ("half", Arc::new(Float16Array::new_null(1)) as ArrayRef),
    ])
    .unwrap();
    match to_host_table(&b) {
        Err(Error::Unsupported { what, .. }) => assert!(what.contains("\"half\"") && what.contains("Float16"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_schema_that_does_not_fit_is_an_error() {
    let b = RecordBatch::try_from_iter([("k", Arc::new(Int32Array::from(vec![Some(1), None])) as ArrayRef)]).unwrap();
    let t = to_host_table(&b).unwrap();
    let wrong = arrow_schema::Schema::new(vec![arrow_schema::Field::new("k", A::Int64, true)]);
    assert!(matches!(from_host_table(&t, Some(&wrong)), Err(Error::TypeMismatch { .. })));
    let not_null = arrow_schema::Schema::new(vec![arrow_schema::Field::new("k", A::Int32, false)]);
    assert!(from_host_table(&t, Some(&not_null)).is_err());
    assert_eq!(b.column(0).null_count(), 1);
}

/// `concat_views`: the same values as Arrow's `concat` (long and inline strings, NULLs, sliced
/// arrays) in new compact buffers, however many arrays point into the inputs' buffers, and
/// `None` for other types.
#[test]
fn concat_views_copies_into_compact_buffers() {
    use arrow_array::{BinaryViewArray, StringViewArray};
    use arrow_select::concat::concat;
    use gpujoin_arrow::concat_views;
    let words: Vec<Option<String>> = (0..300).map(|i| if i % 7 == 3 { None } else { Some(format!("{}-{i}", if i % 2 == 0 { "a long string past twelve bytes" } else { "short" })) }).collect();
    let base = StringViewArray::from_iter(words.iter().map(|w| w.as_deref()));
    assert!(!base.data_buffers().is_empty());
    // Slices of one array share its buffers, as batches taken from one array do.
    let parts: Vec<ArrayRef> = vec![Arc::new(base.slice(0, 100)), Arc::new(base.slice(100, 0)), Arc::new(base.slice(100, 150)), Arc::new(base.slice(250, 50)), Arc::new(base.clone())];
    let refs: Vec<&dyn Array> = parts.iter().map(|p| p.as_ref()).collect();
    let got = concat_views(&refs).unwrap().expect("a view type");
    let want = concat(&refs).unwrap();
    assert_eq!(got.as_ref(), want.as_ref());
    let got = got.as_any().downcast_ref::<StringViewArray>().unwrap();
    let bytes: usize = got.iter().flatten().filter(|w| w.len() > 12).map(str::len).sum();
    assert!(got.data_buffers().len() <= bytes.div_ceil(8192).max(1), "{} buffers for {bytes} bytes", got.data_buffers().len());
    assert!(want.as_any().downcast_ref::<StringViewArray>().unwrap().data_buffers().len() > base.data_buffers().len(), "arrow's concat lists them again");
    // Arrays of their own buffers keep them all; binary views too; no NULLs: no validity.
    let other = StringViewArray::from_iter_values(["another string past twelve", "x"]);
    let refs: Vec<&dyn Array> = vec![&base, &other];
    let got = concat_views(&refs).unwrap().unwrap();
    assert_eq!(got.as_ref(), concat(&refs).unwrap().as_ref());
    let bins = BinaryViewArray::from_iter_values([b"bytes past the inline twelve".as_slice(), b"b"]);
    let refs: Vec<&dyn Array> = vec![&bins, &bins];
    let got = concat_views(&refs).unwrap().unwrap();
    assert_eq!(got.as_ref(), concat(&refs).unwrap().as_ref());
    assert!(got.nulls().is_none());
    // Other types, mixed types, no arrays: None.
    let ints = Int32Array::from(vec![1, 2]);
    assert!(concat_views(&[&ints as &dyn Array]).unwrap().is_none());
    assert!(concat_views(&[&base as &dyn Array, &bins]).unwrap().is_none());
    assert!(concat_views(&[]).unwrap().is_none());
}
