//! Arrow through the device: round trips host -> device -> host for every type (NULLs at odd
//! offsets, sliced arrays, empty and one-row batches, long and non-ASCII strings, dictionaries
//! with unused entries), `gpujoin_arrow::join` against the CPU reference for every key type and
//! join type (whole and chunked, with a filter, and a pure theta join), `join_indices_on`'s row
//! indices against the reference's pairs, and typed errors.

mod common;

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float16Array, Int32Array, Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow_select::concat::concat_batches;
use gpujoin_arrow::{join_indices_on, join_on, join_streaming_on, DeviceInput, JoinIndices, upload_batches_with, upload_batches_with_stats, upload_reader, DownloadOptions, Downloader, JoinSpec, StagingOptions};
use gpujoin_device::testing::{device_or_skip, pick, reduced, rows, Sample};
use gpujoin_device::{Error, Stream};
use gpujoin_join::predicate::{col_l, col_r};
use gpujoin_join::{JoinType, NanEquality, NullEquality, Side};
use gpujoin_testkit::table_reference;
use rand::rngs::StdRng;
use rand::SeedableRng;

const SMALL: StagingOptions = StagingOptions { buffer_bytes: 1 << 16, buffers: 3 };
/// The smallest pieces and two buffers: most pieces wait for a free buffer.
const TINY: StagingOptions = StagingOptions { buffer_bytes: 1 << 12, buffers: 2 };

fn stream(test: &str) -> Option<Stream> {
    device_or_skip(test).map(|d| d.new_stream().expect("stream"))
}

/// Tests of this file running now; the last one to end frees the pinned memory the pools keep
/// (`release_pinned_memory`), so that a process ends with none allocated (compute-sanitizer's
/// leak check) without one test freeing the buffers another has just made ahead.
static RUNNING: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

struct ReleasePinnedAtEnd;

impl ReleasePinnedAtEnd {
    fn new() -> Self {
        *RUNNING.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        ReleasePinnedAtEnd
    }
}

impl Drop for ReleasePinnedAtEnd {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        *running -= 1;
        if *running == 0 {
            gpujoin_arrow::release_pinned_memory();
        }
    }
}

fn reader(batches: Vec<RecordBatch>) -> RecordBatchIterator<std::vec::IntoIter<Result<RecordBatch, arrow_schema::ArrowError>>> {
    let schema = batches[0].schema();
    RecordBatchIterator::new(batches.into_iter().map(Ok).collect::<Vec<_>>().into_iter(), schema)
}

fn download_all(s: &Stream, t: &gpujoin_join::table::Table, schema: &arrow_schema::Schema, batch_rows: usize) -> RecordBatch {
    let opts = DownloadOptions { batch_rows, window_bytes: 1 << 15 };
    let batches: Vec<RecordBatch> = Downloader::new(s, t.view(), Some(schema), opts).unwrap().collect::<Result<_, _>>().unwrap();
    assert!(batches.iter().all(|b| b.num_rows() <= batch_rows));
    concat_batches(&Arc::new(schema.clone()), &batches).unwrap()
}

#[test]
fn every_type_round_trips_through_the_device() {
    let Some(s) = stream("every_type_round_trips_through_the_device") else { return };
    let _pinned = ReleasePinnedAtEnd::new();
    let mut rng = StdRng::seed_from_u64(5);
    for nulls in [0u32, 13, 100] {
        // Batches of many sizes (empty, one row, odd), some sliced at odd offsets.
        let mut batches = Vec::new();
        for n in [0usize, 1, 7, 8, 9, 1000, 3, 5003] {
            let b = common::every_type(&mut rng, n, nulls, 40);
            batches.push(if n > 4 { b.slice(3, n - 4) } else { b });
        }
        let schema = batches[0].schema();
        let expected = common::decoded(&concat_batches(&schema, &batches).unwrap());
        // Exact reservation and small staging pieces; then the growing reader path.
        let t = upload_batches_with(&s, &schema, batches.clone(), TINY).unwrap();
        assert_eq!(download_all(&s, &t, &expected.schema(), 1 << 16), expected, "4 KiB pieces");
        let t = upload_batches_with(&s, &schema, batches.clone(), SMALL).unwrap();
        assert_eq!(t.rows(), expected.num_rows());
        for batch_rows in [1, 777, 1 << 16] {
            if batch_rows == 1 && nulls != 13 {
                continue;
            }
            assert_eq!(download_all(&s, &t, &expected.schema(), batch_rows), expected, "nulls {nulls}%, {batch_rows} rows per batch");
        }
        // Batches in page-locked memory (every other one) are copied directly, not staged:
        // the same table, fewer bytes through the staging buffers.
        let (_, plain) = upload_batches_with_stats(&s, &schema, batches.clone(), TINY).unwrap();
        let mixed: Vec<RecordBatch> = batches.iter().enumerate().map(|(i, b)| if i % 2 == 1 { gpujoin_arrow::to_pinned(&s, b).unwrap() } else { b.clone() }).collect();
        assert_eq!(concat_batches(&schema, &mixed).unwrap(), concat_batches(&schema, &batches).unwrap());
        let (t, st) = upload_batches_with_stats(&s, &schema, mixed, TINY).unwrap();
        assert_eq!(download_all(&s, &t, &expected.schema(), 4096), expected, "page-locked batches");
        assert!(st.bytes < plain.bytes, "page-locked batches staged {} bytes of {}", st.bytes, plain.bytes);
        // A download's batches (page-locked blocks) uploaded again, in another piece size.
        let opts = DownloadOptions { batch_rows: 1000, window_bytes: 1 << 15 };
        let again: Vec<RecordBatch> = Downloader::new(&s, t.view(), Some(&expected.schema()), opts).unwrap().collect::<Result<_, _>>().unwrap();
        let (t2, st2) = upload_batches_with_stats(&s, &expected.schema(), again, SMALL).unwrap();
        assert_eq!(download_all(&s, &t2, &expected.schema(), 4096), expected, "downloaded batches uploaded again");
        assert!(st2.bytes < plain.bytes, "downloaded batches staged {} bytes of {}", st2.bytes, plain.bytes);
        drop((t, t2));
        let t = upload_reader(&s, reader(batches), SMALL).unwrap();
        assert_eq!(download_all(&s, &t, &expected.schema(), 4096), expected);
        // A device slice at an odd row downloads as the same slice.
        let v = t.view().slice(5, 100).unwrap();
        let b: Vec<RecordBatch> = Downloader::new(&s, v, Some(&expected.schema()), DownloadOptions::default()).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(concat_batches(&expected.schema(), &b).unwrap(), expected.slice(5, 100));
    }
}

#[test]
fn long_and_non_ascii_strings_through_the_device() {
    let Some(s) = stream("long_and_non_ascii_strings_through_the_device") else { return };
    let _pinned = ReleasePinnedAtEnd::new();
    let long = "é".repeat(40_000);
    let a: ArrayRef = Arc::new(StringArray::from(vec![Some(long.as_str()), None, Some(""), Some("字😀"), Some(&long[..2])]));
    let b = RecordBatch::try_from_iter([("s", a)]).unwrap();
    let t = upload_batches_with(&s, &b.schema(), [b.clone(), b.slice(1, 3), b.clone()], SMALL).unwrap();
    let expected = concat_batches(&b.schema(), &[b.clone(), b.slice(1, 3), b]).unwrap();
    assert_eq!(download_all(&s, &t, &expected.schema(), 2), expected);
}

fn check_join(s: &Stream, l: &RecordBatch, r: &RecordBatch, key: &str, jt: JoinType, nulls: NullEquality, budget: Option<u64>, filter: Option<gpujoin_join::predicate::Predicate>) {
    check_join_as(s, l, r, key, jt, nulls, budget, filter, None)
}

/// `check_join`, through `join_streaming_on` with right-side parts of `streamed` bytes when
/// given (the right side as batches of 1, 17 and the rest of the rows, so parts split batches
/// and span several).
#[allow(clippy::too_many_arguments)]
fn check_join_as(s: &Stream, l: &RecordBatch, r: &RecordBatch, key: &str, jt: JoinType, nulls: NullEquality, budget: Option<u64>, filter: Option<gpujoin_join::predicate::Predicate>, streamed: Option<usize>) {
    let mut spec = JoinSpec::new(jt, &[key], &[key]).null_equality(nulls).batch_rows(97);
    if key.is_empty() {
        spec = JoinSpec::new(jt, &[], &[]).batch_rows(97);
    }
    spec.staging = SMALL;
    if let Some(b) = budget {
        spec = spec.chunks_of(b);
    }
    if let Some(f) = &filter {
        spec = spec.filter(f.clone());
    }
    let out = match streamed {
        None => join_on(s, reader(vec![l.clone()]), reader(vec![r.clone()]), spec),
        Some(bytes) => {
            let n = r.num_rows();
            let parts = if n > 18 { vec![r.slice(0, 1), r.slice(1, 17), r.slice(18, n - 18)] } else { vec![r.clone()] };
            join_streaming_on(s, reader(vec![l.clone()]), reader(parts), spec.stream_part_bytes(bytes))
        }
    }
    .unwrap_or_else(|e| panic!("{key} {jt:?} streamed {streamed:?}: {e}"));
    let schema = arrow_array::RecordBatchReader::schema(&out);
    let batches: Vec<RecordBatch> = out.collect::<Result<_, _>>().unwrap_or_else(|e| panic!("{key} {jt:?} {budget:?}: {e}"));
    let got = gpujoin_arrow::to_host_table(&concat_batches(&schema, &batches).unwrap()).unwrap();
    let (lh, rh) = (gpujoin_arrow::to_host_table(l).unwrap(), gpujoin_arrow::to_host_table(r).unwrap());
    let keys: Vec<&str> = if key.is_empty() { vec![] } else { vec![key] };
    let pairs = table_reference::join(&lh, &keys, &rh, &keys, filter.as_ref(), jt, nulls, NanEquality::NanEqualsNan);
    let names: Vec<&str> = lh.names().iter().map(String::as_str).collect();
    let ls: &[&str] = if jt.has_left_map() { &names } else { &[] };
    let rs: &[&str] = if jt.has_right_map() { &names } else { &[] };
    let want = table_reference::rows_of_pairs(&pairs, &lh, ls, &rh, rs);
    assert_eq!(table_reference::rows_of_table(&got), want, "key {key}, {jt:?}, {nulls:?}, budget {budget:?}, streamed {streamed:?}");
}

const JOIN_TYPES: [JoinType; 8] = [JoinType::Inner, JoinType::Left, JoinType::Right, JoinType::Full, JoinType::LeftSemi, JoinType::LeftAnti, JoinType::RightSemi, JoinType::RightAnti];

#[test]
fn join_matches_the_cpu_reference_for_every_key_type_and_join_type() {
    let Some(s) = stream("join_matches_the_cpu_reference_for_every_key_type_and_join_type") else { return };
    let _pinned = ReleasePinnedAtEnd::new();
    let mut rng = StdRng::seed_from_u64(17);
    let l = common::every_type(&mut rng, 301, 10, 12);
    let r = common::every_type(&mut rng, 203, 10, 12).slice(2, 200);
    let mut cases = 0;
    // GPUJOIN_TEST_SIZE=small (compute-sanitizer): a rotating sample of the cases.
    let mut sample = Sample::new(17);
    for key in common::KEY_COLUMNS {
        for jt in JOIN_TYPES {
            for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                if !sample.take() {
                    continue;
                }
                check_join(&s, &l, &r, key, jt, nulls, None, None);
                cases += 1;
            }
        }
    }
    // Chunked: about 256 rows of maps per chunk.
    for key in ["i32", "utf8", "f64", "dict"] {
        for jt in JOIN_TYPES.into_iter().filter(|_| sample.take()) {
            check_join(&s, &l, &r, key, jt, NullEquality::NullEqualsNull, Some(2048), None);
            cases += 1;
        }
    }
    // Keys and a filter (nullable columns), whole and chunked; a pure theta join, chunked.
    for jt in JOIN_TYPES {
        for budget in [None, Some(4096)].into_iter().filter(|_| sample.take()) {
            check_join(&s, &l, &r, "i64", jt, NullEquality::NullEqualsNothing, budget, Some(col_l(2).less(col_r(2))));
            check_join(&s, &l, &r, "", jt, NullEquality::NullEqualsNothing, budget, Some(col_l(3).less(col_r(3))));
            cases += 2;
        }
    }
    println!("{cases} Arrow joins matched the CPU reference");
}

/// `join_indices_on`'s pairs of row indices against the CPU reference's pairs (every key type
/// and join type, NULLs equal or not, whole and chunked, keys with a filter, a pure theta
/// join); a side the join type does not return has no indices, and an index is null exactly
/// where an outer join pads.
#[test]
fn join_indices_match_the_cpu_reference() {
    let Some(s) = stream("join_indices_match_the_cpu_reference") else { return };
    let _pinned = ReleasePinnedAtEnd::new();
    let mut rng = StdRng::seed_from_u64(29);
    let l = common::every_type(&mut rng, 301, 10, 12);
    let r = common::every_type(&mut rng, 203, 10, 12).slice(2, 200);
    let up = |b: &RecordBatch| DeviceInput::upload(&s, reader(vec![b.clone()]), SMALL).unwrap();
    let (ld, rd) = (up(&l), up(&r));
    let (lh, rh) = (gpujoin_arrow::to_host_table(&l).unwrap(), gpujoin_arrow::to_host_table(&r).unwrap());
    let mut sample = Sample::new(11);
    let mut cases = 0;
    let mut check = |key: &str, jt: JoinType, nulls: NullEquality, budget: Option<u64>, filter: Option<gpujoin_join::predicate::Predicate>| {
        let keys: Vec<&str> = if key.is_empty() { vec![] } else { vec![key] };
        let mut spec = JoinSpec::new(jt, &keys, &keys).null_equality(nulls);
        // Every other case ordered by one side's index (that side's padding last).
        let order = match cases % 3 {
            0 => None,
            1 => Some(Side::Left),
            _ => Some(Side::Right),
        };
        if let Some(side) = order {
            spec = spec.indices_ordered_by(side);
        }
        if let Some(b) = budget {
            spec = spec.chunks_of(b);
        }
        if let Some(f) = &filter {
            spec = spec.filter(f.clone());
        }
        let mut got = Vec::new();
        let mut chunks = 0;
        join_indices_on(&s, &ld, &rd, &spec, &mut |ix: JoinIndices| {
            chunks += 1;
            assert_eq!(ix.left.is_some(), jt.has_left_map(), "{key} {jt:?}");
            assert_eq!(ix.right.is_some(), jt.has_right_map(), "{key} {jt:?}");
            let at = |a: &Option<arrow_array::UInt32Array>, k: usize| a.as_ref().and_then(|a| a.is_valid(k).then(|| a.value(k)));
            let rows: Vec<_> = (0..ix.num_rows()).map(|k| (at(&ix.left, k), at(&ix.right, k))).collect();
            let ordered = match order {
                Some(Side::Left) if jt.has_left_map() => Some(rows.iter().map(|r| r.0).collect::<Vec<_>>()),
                Some(Side::Right) if jt.has_right_map() => Some(rows.iter().map(|r| r.1).collect()),
                Some(_) => Some(rows.iter().map(|r| r.0.or(r.1)).collect()),
                None => None,
            };
            if let Some(v) = ordered {
                // Ascending, None (padding) last.
                let rank = |x: &Option<u32>| x.map_or(u64::MAX, u64::from);
                assert!(v.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])), "{key} {jt:?} ordered by {order:?}: {v:?}");
            }
            got.extend(rows);
            Ok(true)
        })
        .unwrap_or_else(|e| panic!("{key} {jt:?} {budget:?}: {e}"));
        got.sort();
        let want = table_reference::join(&lh, &keys, &rh, &keys, filter.as_ref(), jt, nulls, NanEquality::NanEqualsNan);
        assert_eq!(got, want, "key {key}, {jt:?}, {nulls:?}, budget {budget:?}, filter {filter:?}");
        assert!(budget.is_some() || chunks == 1, "{chunks} chunks without a budget");
        cases += 1;
    };
    for key in common::KEY_COLUMNS {
        for jt in JOIN_TYPES {
            for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                if sample.take() {
                    check(key, jt, nulls, None, None);
                }
            }
        }
    }
    for jt in JOIN_TYPES {
        check("utf8", jt, NullEquality::NullEqualsNull, Some(2048), None);
        check("i64", jt, NullEquality::NullEqualsNothing, None, Some(col_l(2).less(col_r(2))));
        check("", jt, NullEquality::NullEqualsNothing, Some(4096), Some(col_l(3).less(col_r(3))));
    }
    println!("{cases} join index sets matched the CPU reference");
    // An explicit clustered algorithm gathers inside the join: no indices, a typed error.
    let clustered = JoinSpec::new(JoinType::Inner, &["i32"], &["i32"]).algorithm(gpujoin_join::plan::Algorithm::PartitionedHash(gpujoin_join::plan::Gather::Clustered));
    let err = join_indices_on(&s, &ld, &rd, &clustered, &mut |_| Ok(true)).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
}

#[test]
fn streamed_right_side_matches_the_cpu_reference() {
    let Some(s) = stream("streamed_right_side_matches_the_cpu_reference") else { return };
    let _pinned = ReleasePinnedAtEnd::new();
    let mut rng = StdRng::seed_from_u64(23);
    let l = common::every_type(&mut rng, 301, 10, 12);
    let r = common::every_type(&mut rng, rows(503, 123), 10, 12).slice(2, rows(500, 120));
    let mut cases = 0;
    // GPUJOIN_TEST_SIZE=small (compute-sanitizer): fewer right rows, one-byte parts (a join a
    // row) for the inner join of 12 right rows only, no 700-byte parts, and a rotating sample
    // of the other cases.
    let mut sample = Sample::new(7);
    // Parts of one byte (a row each), of a few hundred bytes (batches split and joined), and
    // larger than the whole side (one part: the `join_on` path). Every join type: the ones
    // that cannot stream run whole.
    for bytes in pick(vec![1usize, 700, 5000, 1 << 30], vec![1, 5000, 1 << 30]) {
        for key in ["i32", "utf8", "f64", "dict", "i64"] {
            for jt in JOIN_TYPES {
                if bytes == 1 && (key != "i32" || (reduced() && jt != JoinType::Inner)) || (bytes > 1 && !sample.take()) {
                    continue;
                }
                let r = if bytes == 1 && reduced() { r.slice(0, 12) } else { r.clone() };
                check_join_as(&s, &l, &r, key, jt, NullEquality::NullEqualsNull, None, None, Some(bytes));
                cases += 1;
            }
        }
        // Chunked output within each part, keys with a filter, and a pure theta join.
        for jt in JOIN_TYPES.into_iter().filter(|_| bytes > 1 && sample.take()) {
            check_join_as(&s, &l, &r, "i32", jt, NullEquality::NullEqualsNothing, Some(2048), None, Some(bytes));
            check_join_as(&s, &l, &r, "i64", jt, NullEquality::NullEqualsNothing, None, Some(col_l(2).less(col_r(2))), Some(bytes));
            check_join_as(&s, &l, &r, "", jt, NullEquality::NullEqualsNothing, Some(4096), Some(col_l(3).less(col_r(3))), Some(bytes));
            cases += 3;
        }
    }
    // An empty right side, streamed.
    check_join_as(&s, &l, &r.slice(0, 0), "i32", JoinType::Inner, NullEquality::NullEqualsNothing, None, None, Some(64));
    // Bad input is still a typed error before any work.
    let missing = JoinSpec::new(JoinType::Inner, &["nope"], &["i32"]).stream_part_bytes(64);
    assert!(matches!(join_streaming_on(&s, reader(vec![l.clone()]), reader(vec![r.clone()]), missing).err(), Some(Error::UnknownColumn { .. })));
    // A reader dropped after the first batch stops the threads (nothing hangs).
    let spec = JoinSpec::new(JoinType::Inner, &["i32"], &["i32"]).stream_part_bytes(200).batch_rows(3);
    let mut out = join_streaming_on(&s, reader(vec![l.clone()]), reader(vec![r.clone()]), spec).unwrap();
    assert!(out.next().is_some());
    drop(out);
    println!("{cases} streamed Arrow joins matched the CPU reference");
}

#[test]
fn bad_input_is_a_typed_error() {
    let Some(s) = stream("bad_input_is_a_typed_error") else { return };
    let _pinned = ReleasePinnedAtEnd::new();
    let i32s = RecordBatch::try_from_iter([("k", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef)]).unwrap();
    let i64s = RecordBatch::try_from_iter([("k", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)]).unwrap();
    let spec = || JoinSpec::new(JoinType::Inner, &["k"], &["k"]);
    assert!(matches!(join_on(&s, reader(vec![i32s.clone()]), reader(vec![i64s.clone()]), spec()).err(), Some(Error::TypeMismatch { .. })));
    let missing = JoinSpec::new(JoinType::Inner, &["nope"], &["k"]);
    assert!(matches!(join_on(&s, reader(vec![i32s.clone()]), reader(vec![i32s.clone()]), missing).err(), Some(Error::UnknownColumn { .. })));
    // Batches of two schemas in one stream.
    let mixed = RecordBatchIterator::new(vec![Ok(i32s.clone()), Ok(i64s.clone())], i32s.schema());
    assert!(matches!(upload_reader(&s, mixed, SMALL).err(), Some(Error::TypeMismatch { .. })));
    // A type gpujoin does not hold: refused before anything is copied.
    let half = RecordBatch::try_from_iter([("k", Arc::new(Int32Array::from(vec![1])) as ArrayRef), ("h", Arc::new(Float16Array::new_null(1)) as ArrayRef)]).unwrap();
    match join_on(&s, reader(vec![half]), reader(vec![i32s]), spec()).err() {
        Some(Error::Unsupported { what, .. }) => assert!(what.contains("\"h\""), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn staging_buffers_made_ahead_serve_uploads() {
    let Some(s) = stream("staging_buffers_made_ahead_serve_uploads") else { return };
    let _pinned = ReleasePinnedAtEnd::new();
    // A size no other test uses: 3 buffers made now, none the second time.
    let options = StagingOptions { buffer_bytes: (1 << 20) + 8, buffers: 3 };
    assert_eq!(options.prepare(s.device()).unwrap(), 3);
    assert_eq!(options.prepare(s.device()).unwrap(), 0);
    // An upload through them (more pieces than buffers: they are reused) round-trips.
    let n = 1_000_000i64;
    let b = RecordBatch::try_from_iter([("v", Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef)]).unwrap();
    let t = upload_batches_with(&s, &b.schema(), [b.clone()], options).unwrap();
    let back = gpujoin_arrow::download(&s, t.view(), Some(&b.schema())).unwrap();
    assert_eq!(concat_batches(&b.schema(), &back).unwrap(), b);
    assert_eq!(options.prepare(s.device()).unwrap(), 0);
}

#[test]
fn download_blocks_made_ahead() {
    let Some(s) = stream("download_blocks_made_ahead") else { return };
    let _pinned = ReleasePinnedAtEnd::new();
    use gpujoin_join::table::DataType;
    // A window of one u32 column is 2^26 rows (256 MiB): two windows' blocks of 256 MiB (a size
    // class no other test here downloads), then none more.
    let options = DownloadOptions::default();
    let cols = [(DataType::UInt32, false)];
    let made = options.prepare(s.device(), &cols, 5 << 24).unwrap();
    assert!(made == 2 * (256 << 20), "{made}");
    assert_eq!(options.prepare(s.device(), &cols, 5 << 24).unwrap(), 0);
    assert_eq!(options.prepare(s.device(), &cols, 0).unwrap(), 0);
    // A download of that shape goes through them.
    let n = 5usize << 24;
    let b = RecordBatch::try_from_iter([("v", Arc::new(arrow_array::UInt32Array::from_iter_values((0..n as u32).map(|i| i.wrapping_mul(2654435761)))) as ArrayRef)]).unwrap();
    let t = upload_batches_with(&s, &b.schema(), [b.clone()], StagingOptions::default()).unwrap();
    let back: Vec<RecordBatch> = Downloader::new(&s, t.view(), Some(&b.schema()), options).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(concat_batches(&b.schema(), &back).unwrap(), b);
}
