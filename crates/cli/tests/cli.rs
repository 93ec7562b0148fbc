//! End-to-end tests of the `gpujoin` binary on small Parquet, CSV, Arrow and JSON files written
//! here: every subcommand, every `--how`, and bad inputs with their messages.
//!
//! Without a GPU the binary runs DataFusion's CPU path (and says so); with one (or with
//! `GPUJOIN_REQUIRE_GPU=1`, as the GPU bundle runs) the joins must have run on the GPU. The binary
//! is `$GPUJOIN_BIN_DIR/gpujoin` where set (the bundle), else cargo's build of it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, RecordBatchReader, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;

fn binary() -> PathBuf {
    match std::env::var_os("GPUJOIN_BIN_DIR") {
        Some(dir) => Path::new(&dir).join("gpujoin"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_gpujoin")),
    }
}

fn require_gpu() -> bool {
    std::env::var("GPUJOIN_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// A fresh folder for one test.
fn folder(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpujoin-cli-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn gpujoin(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(binary()).current_dir(dir).args(args).output().expect("run gpujoin");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "gpujoin {args:?} panicked:\n{stderr}");
    out
}

/// Runs and expects success; returns stdout and stderr. With a GPU required, a join that fell
/// back to the CPU fails the test.
fn ok(dir: &Path, args: &[&str]) -> (String, String) {
    let out = gpujoin(dir, args);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "gpujoin {args:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    if require_gpu() && !args.contains(&"--cpu") {
        assert!(!stderr.contains("no GPU") && !stdout.contains("no GPU"), "gpujoin {args:?} ran without the GPU:\n{stdout}\n{stderr}");
    }
    (stdout, stderr)
}

/// Runs and expects exit status 1 with one `gpujoin: error:` line containing `expected`.
fn fails(dir: &Path, args: &[&str], expected: &str) {
    let out = gpujoin(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "gpujoin {args:?} should fail with status 1:\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("gpujoin: error: ")).collect();
    assert_eq!(errors.len(), 1, "one error line expected from {args:?}:\n{stderr}");
    assert!(errors[0].contains(expected), "gpujoin {args:?}: expected {expected:?} in\n{stderr}");
}

/// left: k (nullable), k2, v; right: k (nullable), k2, w. Duplicates, NULL keys, rows without a
/// match on both sides.
fn left_batch() -> RecordBatch {
    let k = Int64Array::from(vec![Some(1), Some(2), Some(2), Some(3), None, Some(7), Some(5)]);
    let k2 = Int64Array::from(vec![10, 20, 21, 30, 0, 70, 50]);
    let v = StringArray::from(vec![Some("a"), Some("b"), Some("c"), None, Some("e"), Some("f"), Some("g")]);
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("k2", DataType::Int64, false), Field::new("v", DataType::Utf8, true)])),
        vec![Arc::new(k), Arc::new(k2), Arc::new(v)],
    )
    .unwrap()
}

fn right_batch() -> RecordBatch {
    let k = Int64Array::from(vec![Some(2), Some(2), Some(3), Some(4), None, Some(5)]);
    let k2 = Int64Array::from(vec![20, 21, 31, 40, 0, 50]);
    let w = Float64Array::from(vec![0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("k2", DataType::Int64, false), Field::new("w", DataType::Float64, false)])),
        vec![Arc::new(k), Arc::new(k2), Arc::new(w)],
    )
    .unwrap()
}

fn write_parquet(path: &Path, b: &RecordBatch) {
    let mut w = ArrowWriter::try_new(File::create(path).unwrap(), b.schema(), None).unwrap();
    w.write(b).unwrap();
    w.close().unwrap();
}

fn write_csv(path: &Path, b: &RecordBatch) {
    let mut w = datafusion::arrow::csv::Writer::new(File::create(path).unwrap());
    w.write(b).unwrap();
}

fn cell(c: &ArrayRef, i: usize) -> String {
    if c.is_null(i) {
        "NULL".into()
    } else {
        array_value_to_string(c, i).unwrap()
    }
}

/// The rows of a Parquet file as sorted `a|b|c` lines, and its column names.
fn read_parquet(path: &Path) -> (Vec<String>, Vec<String>) {
    let r = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap().build().unwrap();
    let names = r.schema().fields().iter().map(|f| f.name().clone()).collect();
    let mut rows = Vec::new();
    for b in r {
        let b = b.unwrap();
        for i in 0..b.num_rows() {
            rows.push(b.columns().iter().map(|c| cell(c, i)).collect::<Vec<_>>().join("|"));
        }
    }
    rows.sort();
    (rows, names)
}

/// The expected join of the two batches on `keys` (column positions in both), computed here.
fn expected(how: &str, keys: &[usize], nulls_equal: bool, filter: impl Fn(&RecordBatch, usize, &RecordBatch, usize) -> bool) -> Vec<String> {
    let (l, r) = (left_batch(), right_batch());
    let row = |b: &RecordBatch, i: Option<usize>| -> Vec<String> { (0..b.num_columns()).map(|c| i.map_or("NULL".into(), |i| cell(b.column(c), i))).collect() };
    let matches = |i: usize, j: usize| {
        keys.iter().all(|&c| {
            let (a, b) = (l.column(c), r.column(c));
            match (a.is_null(i), b.is_null(j)) {
                (true, true) => nulls_equal,
                (false, false) => cell(a, i) == cell(b, j),
                _ => false,
            }
        }) && filter(&l, i, &r, j)
    };
    let mut out = Vec::new();
    let mut right_matched = vec![false; r.num_rows()];
    for i in 0..l.num_rows() {
        let mut any = false;
        for j in 0..r.num_rows() {
            if matches(i, j) {
                any = true;
                right_matched[j] = true;
                if matches!(how, "inner" | "left" | "right" | "full") {
                    out.push([row(&l, Some(i)), row(&r, Some(j))].concat().join("|"));
                }
            }
        }
        match how {
            "left" | "full" if !any => out.push([row(&l, Some(i)), row(&r, None)].concat().join("|")),
            "semi" if any => out.push(row(&l, Some(i)).join("|")),
            "anti" if !any => out.push(row(&l, Some(i)).join("|")),
            _ => {}
        }
    }
    for (j, m) in right_matched.iter().enumerate() {
        match how {
            "right" | "full" if !m => out.push([row(&l, None), row(&r, Some(j))].concat().join("|")),
            "right-semi" if *m => out.push(row(&r, Some(j)).join("|")),
            "right-anti" if !m => out.push(row(&r, Some(j)).join("|")),
            _ => {}
        }
    }
    out.sort();
    out
}

const HOWS: [&str; 8] = ["inner", "left", "right", "full", "semi", "anti", "right-semi", "right-anti"];

fn inputs(dir: &Path) {
    write_parquet(&dir.join("left.parquet"), &left_batch());
    write_parquet(&dir.join("right.parquet"), &right_batch());
    write_csv(&dir.join("left.csv"), &left_batch());
    write_csv(&dir.join("right.csv"), &right_batch());
}

#[test]
fn join_every_how_parquet_and_csv() {
    let dir = folder("every-how");
    inputs(&dir);
    for how in HOWS {
        for (l, r) in [("left.parquet", "right.parquet"), ("left.csv", "right.parquet")] {
            let out = format!("out-{how}.parquet");
            let (_, stderr) = ok(&dir, &["join", l, r, "--on", "k", "--how", how, "-o", &out]);
            assert!(stderr.contains("rows ->"), "a timing summary: {stderr}");
            let (rows, names) = read_parquet(&dir.join(&out));
            assert_eq!(rows, expected(how, &[0], false, |_, _, _, _| true), "--how {how} ({l}, {r})");
            let want_names: Vec<&str> = match how {
                "inner" | "left" | "right" | "full" => vec!["left.k", "left.k2", "v", "right.k", "right.k2", "w"],
                "semi" | "anti" => vec!["k", "k2", "v"],
                _ => vec!["k", "k2", "w"],
            };
            assert_eq!(names, want_names, "--how {how}");
        }
    }
}

#[test]
fn join_composite_keys_nulls_equal_and_filter() {
    let dir = folder("keys");
    inputs(&dir);
    for how in HOWS {
        ok(&dir, &["join", "left.parquet", "right.parquet", "--on", "k,k2", "--right-on", "k,k2", "--how", how, "-o", "two.parquet"]);
        assert_eq!(read_parquet(&dir.join("two.parquet")).0, expected(how, &[0, 1], false, |_, _, _, _| true), "two keys, --how {how}");
        ok(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--how", how, "--nulls-equal", "-o", "nulls.parquet"]);
        assert_eq!(read_parquet(&dir.join("nulls.parquet")).0, expected(how, &[0], true, |_, _, _, _| true), "--nulls-equal, --how {how}");
        ok(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--how", how, "--filter", "l.k2 < r.k2", "-o", "filtered.parquet"]);
        let lt = |l: &RecordBatch, i: usize, r: &RecordBatch, j: usize| {
            let a = l.column(1).as_any().downcast_ref::<Int64Array>().unwrap().value(i);
            let b = r.column(1).as_any().downcast_ref::<Int64Array>().unwrap().value(j);
            a < b
        };
        assert_eq!(read_parquet(&dir.join("filtered.parquet")).0, expected(how, &[0], false, lt), "--filter, --how {how}");
    }
}

#[test]
fn join_output_formats_and_printing() {
    let dir = folder("formats");
    inputs(&dir);
    let want = expected("inner", &[0], false, |_, _, _, _| true);
    for out in ["o.csv", "o.arrow", "o.json"] {
        ok(&dir, &["join", "left.csv", "right.csv", "--on", "k", "-o", out]);
        // Read back through `gpujoin sql`, as CSV.
        let (stdout, _) = ok(&dir, &["sql", "--format", "csv", "-q", &format!("SELECT count(*) AS n FROM '{out}'")]);
        assert!(stdout.lines().any(|l| l.trim() == want.len().to_string()), "{out}: {stdout}");
    }
    let (stdout, _) = ok(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--format", "csv"]);
    assert_eq!(stdout.lines().next(), Some("left.k,left.k2,v,right.k,right.k2,w"));
    assert_eq!(stdout.lines().count(), want.len() + 1, "{stdout}");
    let (stdout, _) = ok(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--how", "full", "--maxrows", "2"]);
    assert!(stdout.contains("left.k"), "a table: {stdout}");
    // Selected columns.
    ok(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--left-columns", "v,k", "--right-columns", "w", "-o", "sel.parquet"]);
    let (rows, names) = read_parquet(&dir.join("sel.parquet"));
    assert_eq!(names, ["v", "k", "w"]);
    assert_eq!(rows, vec!["NULL|3|2.5", "b|2|0.5", "b|2|1.5", "c|2|0.5", "c|2|1.5", "g|5|5.5"]);
    // --cpu gives the same rows.
    ok(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--how", "full", "--cpu", "-o", "cpu.parquet"]);
    assert_eq!(read_parquet(&dir.join("cpu.parquet")).0, expected("full", &[0], false, |_, _, _, _| true));
}

#[test]
fn join_bad_inputs() {
    let dir = folder("bad");
    inputs(&dir);
    std::fs::write(dir.join("broken.parquet"), b"not parquet at all").unwrap();
    std::fs::write(dir.join("strings.csv"), "k,x\nabc,1\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    fails(&dir, &["join", "missing.parquet", "right.parquet", "--on", "k"], "cannot open missing.parquet");
    fails(&dir, &["join", "broken.parquet", "right.parquet", "--on", "k"], "broken.parquet: not a readable Parquet file");
    fails(&dir, &["join", "left.parquet", "right.parquet", "--on", "nope"], "unknown column `nope` in left.parquet (its columns: k, k2, v)");
    fails(&dir, &["join", "left.parquet", "strings.csv", "--on", "k"], "key types differ: `k` in left.parquet is Int64, `k` in strings.csv is Utf8");
    fails(&dir, &["join", "left.parquet", "notes.txt", "--on", "k"], "unknown file format");
    fails(&dir, &["join", "left.parquet", "right.parquet", "--on", "k,k2", "--right-on", "k"], "pair up");
    fails(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--filter", "l.zz < r.k2"], "--filter");
    fails(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "-o", "out.xlsx"], "unknown file format");
    fails(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--right-columns", "nope"], "--right-columns: unknown column `nope` in right.parquet");
    fails(&dir, &["join", "left.parquet", "right.parquet", "--on", "k", "--how", "semi", "--right-columns", "w"], "returns no columns of right.parquet");
    // A usage error: status 1 too.
    let out = gpujoin(&dir, &["join", "left.parquet"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn sql_over_files() {
    let dir = folder("sql");
    inputs(&dir);
    let query = "SELECT l.v, r.w FROM 'left.parquet' l JOIN 'right.csv' r ON l.k = r.k ORDER BY r.w, l.v";
    let (stdout, _) = ok(&dir, &["sql", "--format", "csv", "-q", query]);
    assert_eq!(stdout.trim(), "v,w\nb,0.5\nc,0.5\nb,1.5\nc,1.5\n,2.5\ng,5.5", "{stdout}");
    let (stdout, _) = ok(&dir, &["sql", "--format", "json", "-q", "SELECT count(*) AS n FROM 'left.parquet' l LEFT JOIN 'right.parquet' r ON l.k = r.k"]);
    assert!(stdout.contains("\"n\":9"), "{stdout}");
    // --maxrows cuts the table.
    let (stdout, _) = ok(&dir, &["sql", "--maxrows", "2", "SELECT * FROM 'left.parquet'"]);
    assert!(stdout.contains("First 2 displayed"), "{stdout}");
    // -f runs a file's statements; -o writes the last one's rows.
    std::fs::write(dir.join("q.sql"), "CREATE VIEW j AS SELECT l.k AS k, r.w AS w FROM 'left.parquet' l JOIN 'right.parquet' r ON l.k = r.k;\n-- a comment\nSELECT k, w FROM j;\n").unwrap();
    ok(&dir, &["sql", "-q", "-f", "q.sql", "-o", "j.parquet"]);
    assert_eq!(read_parquet(&dir.join("j.parquet")).0, vec!["2|0.5", "2|0.5", "2|1.5", "2|1.5", "3|2.5", "5|5.5"]);
    // The REPL reads statements from stdin.
    let mut child = Command::new(binary()).current_dir(&dir).args(["sql", "--format", "csv"]).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"SELECT 40 + 2 AS answer;\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("42"), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn sql_explain_says_where_joins_ran() {
    let dir = folder("explain");
    inputs(&dir);
    let query = "SELECT l.v, r.w FROM 'left.parquet' l JOIN 'right.parquet' r ON l.k = r.k";
    // --min-build-rows 0: every join the GPU can run moves, these few rows too.
    let (stdout, _) = ok(&dir, &["sql", "-q", "--min-build-rows", "0", &format!("EXPLAIN {query}")]);
    assert!(stdout.contains("gpu joins"), "{stdout}");
    let gpu = !stdout.contains("no GPU");
    if gpu {
        assert!(stdout.contains("GpuJoinExec"), "{stdout}");
    } else {
        assert!(stdout.contains("kept on the CPU: no GPU"), "{stdout}");
        assert!(!require_gpu(), "the GPU is required: {stdout}");
    }
    // By default a join whose build side is so small a table stays on the CPU, saying why.
    let (stdout, _) = ok(&dir, &["sql", "-q", &format!("EXPLAIN {query}")]);
    if gpu {
        assert!(stdout.contains("kept on the CPU: a build side of at most") && stdout.contains("min_build_rows=131072") && !stdout.contains("GpuJoinExec"), "{stdout}");
    } else {
        assert!(stdout.contains("kept on the CPU: no GPU"), "{stdout}");
    }
    let (stdout, _) = ok(&dir, &["sql", "-q", "--min-build-rows", "0", &format!("EXPLAIN ANALYZE {query}")]);
    assert!(stdout.contains("gpu joins") && stdout.contains("output_rows"), "{stdout}");
    if gpu {
        assert!(stdout.contains("join_time"), "GpuJoinExec's metrics: {stdout}");
    }
    let (stdout, _) = ok(&dir, &["sql", "-q", "--cpu", &format!("EXPLAIN {query}")]);
    assert!(stdout.contains("off (--cpu)") && stdout.contains("HashJoinExec"), "{stdout}");
}

#[test]
fn sql_bad_inputs() {
    let dir = folder("sql-bad");
    inputs(&dir);
    fails(&dir, &["sql", "SELECT * FROM 'missing.parquet'"], "missing.parquet");
    fails(&dir, &["sql", "SELEC 1"], "SQL error");
    fails(&dir, &["sql", "SELECT nope FROM 'left.parquet'"], "nope");
    fails(&dir, &["sql", "-f", "missing.sql"], "cannot read missing.sql");
}

#[test]
fn demo_and_bench() {
    let dir = folder("demo");
    let (stdout, _) = ok(&dir, &["demo", "--sf", "0.01", "--queries", "3,10"]);
    let first = stdout.lines().next().unwrap_or("");
    assert!(first.starts_with("gpujoin demo: "), "{stdout}");
    assert!(stdout.contains("Q3 |") && stdout.contains("Q10 |") && stdout.contains("together:"), "{stdout}");
    if first.contains("no GPU") {
        assert!(!require_gpu());
    } else {
        assert!(stdout.contains("answers equal for 2 of 2"), "{stdout}");
    }
    ok(&dir, &["bench", "--sf", "0.01", "--queries", "5", "--reps", "1", "-o", "bench.csv"]);
    let csv = std::fs::read_to_string(dir.join("bench.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[0].starts_with("query,sf,cpu_ms,gpu_ms"), "{csv}");
    assert!(lines[1].starts_with("5,0.01,"), "{csv}");
    fails(&dir, &["demo", "--queries", "23"], "1 to 22");
    fails(&dir, &["demo", "--sf", "0"], "--sf");
}

#[test]
fn rows_per_key_agree_between_gpu_and_cpu() {
    // A larger input (many batches, skewed keys): the default path and --cpu write the same rows.
    let dir = folder("agree");
    let n = 300_000usize;
    let k: Int64Array = (0..n).map(|i| Some(((i * 7919) % 1000) as i64).filter(|_| i % 97 != 0)).collect();
    let v: Int64Array = (0..n as i64).map(Some).collect();
    let left = RecordBatch::try_from_iter([("k", Arc::new(k) as ArrayRef), ("v", Arc::new(v) as ArrayRef)]).unwrap();
    let rk: Int64Array = (0..2000i64).map(|i| Some(i % 1500)).collect();
    let right = RecordBatch::try_from_iter([("k", Arc::new(rk) as ArrayRef)]).unwrap();
    write_parquet(&dir.join("l.parquet"), &left);
    write_parquet(&dir.join("r.parquet"), &right);
    for how in ["inner", "full", "anti", "right-semi"] {
        ok(&dir, &["join", "l.parquet", "r.parquet", "--on", "k", "--how", how, "-o", "a.parquet"]);
        ok(&dir, &["join", "l.parquet", "r.parquet", "--on", "k", "--how", how, "--cpu", "-o", "b.parquet"]);
        let (a, b) = (read_parquet(&dir.join("a.parquet")).0, read_parquet(&dir.join("b.parquet")).0);
        assert_eq!(a.len(), b.len(), "--how {how}");
        // Sorted rows: equal vectors are equal multisets.
        assert!(a == b, "--how {how}: the rows differ");
    }
    // Forced chunks give the same rows too.
    ok(&dir, &["join", "l.parquet", "r.parquet", "--on", "k", "--chunk-mb", "1", "-o", "c.parquet"]);
    ok(&dir, &["join", "l.parquet", "r.parquet", "--on", "k", "--cpu", "-o", "d.parquet"]);
    assert_eq!(read_parquet(&dir.join("c.parquet")).0, read_parquet(&dir.join("d.parquet")).0);
}

#[test]
fn join_reads_only_the_columns_it_uses() {
    // Many row groups (read on several threads), and a column the GPU cannot take (a list) that
    // the join does not use: it is never read.
    use datafusion::arrow::array::ListArray;
    use datafusion::arrow::datatypes::Int32Type;
    use datafusion::parquet::file::properties::WriterProperties;
    let dir = folder("columns");
    let n = 20_000i64;
    let k: Int64Array = (0..n).map(|i| Some((i * 7) % 150)).collect();
    let v: Int64Array = (0..n).map(Some).collect();
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>((0..n).map(|i| Some(vec![Some(i as i32), None])));
    let left = RecordBatch::try_from_iter([("k", Arc::new(k) as ArrayRef), ("unused", Arc::new(list) as ArrayRef), ("v", Arc::new(v) as ArrayRef)]).unwrap();
    let props = WriterProperties::builder().set_max_row_group_row_count(Some(1000)).build();
    let mut w = ArrowWriter::try_new(File::create(dir.join("l.parquet")).unwrap(), left.schema(), Some(props)).unwrap();
    w.write(&left).unwrap();
    w.close().unwrap();
    let rk: Int64Array = (0..100i64).map(Some).collect();
    write_parquet(&dir.join("r.parquet"), &RecordBatch::try_from_iter([("k", Arc::new(rk) as ArrayRef)]).unwrap());
    for (how, extra) in [("inner", &["--left-columns", "v", "--right-columns", "k"][..]), ("semi", &["--left-columns", "v,k", "--warm-up", "on"][..]), ("right", &["--left-columns", "v", "--warm-up", "off"][..]), ("inner", &["--left-columns", "k", "--right-columns", "k", "--filter", "l.v < r.k"][..])] {
        let mut a = vec!["join", "l.parquet", "r.parquet", "--on", "k", "--how", how, "-o", "a.parquet"];
        a.extend_from_slice(extra);
        ok(&dir, &a);
        a[8] = "b.parquet";
        a.push("--cpu");
        ok(&dir, &a);
        let (got, want) = (read_parquet(&dir.join("a.parquet")), read_parquet(&dir.join("b.parquet")));
        assert!(!want.0.is_empty());
        assert!(got == want, "--how {how} {extra:?}: GPU and CPU rows differ");
    }
    // The semi join by hand: every left row whose key is below 100.
    ok(&dir, &["join", "l.parquet", "r.parquet", "--on", "k", "--how", "semi", "--left-columns", "v", "-o", "s.parquet"]);
    let mut want: Vec<String> = (0..n).filter(|i| (i * 7) % 150 < 100).map(|i| i.to_string()).collect();
    want.sort();
    assert_eq!(read_parquet(&dir.join("s.parquet")), (want, vec!["v".to_string()]));
}

fn abc_batch(n: i64) -> RecordBatch {
    let a: Int64Array = (0..n).map(Some).collect();
    let b: StringArray = (0..n).map(|i| Some(format!("s{i}"))).collect();
    let c: Int64Array = (0..n).map(|i| Some(-i)).collect();
    RecordBatch::try_from_iter([("a", Arc::new(a) as ArrayRef), ("b", Arc::new(b) as ArrayRef), ("c", Arc::new(c) as ArrayRef)]).unwrap()
}

fn int64s(batches: &[RecordBatch], name: &str) -> Vec<i64> {
    batches.iter().flat_map(|b| b.column_by_name(name).unwrap().as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()).collect()
}

#[test]
fn files_read_in_order_and_project() {
    use datafusion::parquet::file::properties::WriterProperties;
    use gpujoin_cli::files::{FileReader, FileWriter};
    let dir = folder("files");
    let n = 200_001;
    let b = abc_batch(n);
    // Parquet with 41 row groups of at most 4999 rows: more than the decoding threads.
    let props = WriterProperties::builder().set_max_row_group_row_count(Some(4999)).build();
    let mut w = ArrowWriter::try_new(File::create(dir.join("t.parquet")).unwrap(), b.schema(), Some(props)).unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    for ext in ["parquet", "csv", "arrow", "json"] {
        let path = dir.join(format!("t.{ext}"));
        if ext != "parquet" {
            let mut w = FileWriter::create(&path, &b.schema()).unwrap();
            w.write(&b).unwrap();
            w.finish().unwrap();
        }
        let r = FileReader::open(&path).unwrap();
        assert_eq!(r.schema_ref().fields().len(), 3, "{ext}");
        let counters = r.counters();
        let all = r.read_all().unwrap();
        assert_eq!(int64s(&all, "a"), (0..n).collect::<Vec<_>>(), "{ext}: every row, in order");
        assert_eq!(counters.rows(), n as u64);
        // Projected: `c` then `a` asked for, the file's order kept.
        let r = FileReader::open(&path).unwrap().project(&["c".to_string(), "a".to_string()]).unwrap();
        let names: Vec<String> = r.schema_ref().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["a", "c"], "{ext}");
        let got = r.read_all().unwrap();
        assert!(got.iter().all(|b| b.num_columns() == 2 && b.schema().field(1).name() == "c"), "{ext}");
        assert_eq!(int64s(&got, "c"), (0..n).map(|i| -i).collect::<Vec<_>>(), "{ext}");
        assert!(FileReader::open(&path).unwrap().project(&["zz".to_string()]).is_err());
    }
    // A reader dropped before its end stops its threads (no hang); one opened and dropped
    // unread decodes nothing.
    let mut r = FileReader::open(&dir.join("t.parquet")).unwrap();
    assert!(r.next().unwrap().is_ok());
    drop(r);
    drop(FileReader::open(&dir.join("t.parquet")).unwrap());
}
