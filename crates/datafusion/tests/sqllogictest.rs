//! DataFusion's own sqllogictest suite, run twice: with a plain DataFusion session and with
//! [`GpuJoinRule`] installed. Every record that passes plain must pass with the rule.
//!
//! The `.slt` files are read from the `datafusion-sqllogictest` 55.2 package (a dev-dependency:
//! the files, its engine `DataFusion` and the per-file set-up `TestContext`), found in cargo's
//! registry or at `GPUJOIN_SLT_DIR` (the bundle carries a copy for the GPU machine).
//!
//! Which files: every file whose text has a join (` join `, any case) by default;
//! `GPUJOIN_SLT=all` runs the whole suite; arguments are substrings of the files' paths to run.
//!
//! How a record is judged, per file (plain first, then with the rule, each in a fresh session):
//!
//! - fails plain: not compared (files that need data outside the package, for example);
//! - passes plain and with the rule: passed;
//! - passes plain, and with the rule the same rows in another order: passed, and counted as
//!   "order differs" (gpujoin's output order is its algorithm's and the query does not fix it).
//!   Only possible where a join moved to the GPU;
//! - an `EXPLAIN` whose plan differs because the rule decided a join with a GPU present (a
//!   `GpuJoinExec` in its place, or a `CpuJoinKeptExec` note with the reason above it):
//!   skipped, and counted;
//! - anything else: a failure, printed with the record's location, and the test fails.
//!
//! At the end it prints the counts and how many queries ran a join on the GPU. Without a GPU the
//! rule leaves every plan unchanged, so both runs must agree exactly.
//!
//! A third run, with or without a GPU, installs [`SemiJoinReduction`] alone (CPU plans), judged
//! against the plain run the same way: its `EXPLAIN` records that show more `KeyFilterExec`s or
//! `RightSemi` joins than expected (a reduction inserted) are skipped and counted, rows in another order pass and
//! are counted.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionContext;
use datafusion_sqllogictest::{df_value_validator, setup_scratch_dir, value_normalizer, DFColumnType, DataFusion, TestContext};
use futures::StreamExt;
use gpujoin_datafusion::{GpuJoinConfig, GpuJoinRule, SemiJoinReduction, SessionStateBuilderExt};
use sqllogictest::{parse_file, strict_column_validator, Normalizer, Record};

/// Records that passed with the rule only after sorting both sides' rows.
static ORDER_DIFFERS: AtomicU64 = AtomicU64::new(0);

/// Records that passed with the semi-join reductions only after sorting both sides' rows.
static REDUCED_ORDER_DIFFERS: AtomicU64 = AtomicU64::new(0);

/// The rule run's validator: DataFusion's, else the same rows in another order (counted).
fn same_rows_any_order(normalizer: Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    same_rows_counted(normalizer, actual, expected, &ORDER_DIFFERS)
}

/// [`same_rows_any_order`] for the semi-join reductions' run.
fn same_rows_any_order_reduced(normalizer: Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    same_rows_counted(normalizer, actual, expected, &REDUCED_ORDER_DIFFERS)
}

fn same_rows_counted(normalizer: Normalizer, actual: &[Vec<String>], expected: &[String], counter: &AtomicU64) -> bool {
    if df_value_validator(normalizer, actual, expected) {
        return true;
    }
    if expected.iter().any(|l| l.contains("<slt:ignore>")) {
        return false;
    }
    let mut a: Vec<String> = actual.iter().map(|r| r.join(" ").trim_end().to_string()).collect();
    let mut e: Vec<String> = expected.iter().map(normalizer).collect();
    a.sort();
    e.sort();
    let same = a == e;
    if same {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    same
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Plain,
    GpuRule,
    /// [`SemiJoinReduction`] alone.
    Reduced,
}

/// One record's outcome in one run.
struct Outcome {
    /// `file:line` of the record.
    loc: String,
    sql: String,
    error: Option<String>,
    /// Joins the rule moved to the GPU while this record ran.
    moved: usize,
    /// Joins whose decision the plan shows (moved, or kept under a `CpuJoinKeptExec`).
    shown: usize,
}

#[derive(Default, Debug)]
struct Totals {
    files: usize,
    files_skipped: usize,
    records: usize,
    failed_plain: usize,
    passed: usize,
    explain_skipped: usize,
    failures: usize,
    queries_moved: usize,
    joins_moved: usize,
    /// The semi-join reductions' run: passed, `EXPLAIN` records skipped, failures.
    reduced_passed: usize,
    reduced_explain_skipped: usize,
    reduced_failures: usize,
}

fn test_files_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("GPUJOIN_SLT_DIR") {
        return PathBuf::from(dir);
    }
    let cargo_home = std::env::var("CARGO_HOME").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cargo"));
    let registry = cargo_home.join("registry").join("src");
    for index in std::fs::read_dir(&registry).into_iter().flatten().flatten() {
        let dir = index.path().join("datafusion-sqllogictest-55.2.0").join("test_files");
        if dir.is_dir() {
            return dir;
        }
    }
    panic!("datafusion-sqllogictest 55.2.0's test_files not found under {} (set GPUJOIN_SLT_DIR)", registry.display());
}

fn slt_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "scratch") {
                slt_files(&p, out);
            }
        } else if p.extension().is_some_and(|e| e == "slt") {
            out.push(p);
        }
    }
}

/// A working folder laid out as the files expect (`test_files/...` relative to the current
/// directory, `test_files/scratch` writable): links to the package's entries and a real
/// scratch folder.
fn working_dir(package_files: &Path) -> PathBuf {
    let work = std::env::temp_dir().join(format!("gpujoin-slt-{}", std::process::id()));
    let tf = work.join("test_files");
    std::fs::create_dir_all(tf.join("scratch")).unwrap();
    for e in std::fs::read_dir(package_files).unwrap().flatten() {
        if e.file_name() != "scratch" {
            let _ = std::os::unix::fs::symlink(e.path(), tf.join(e.file_name()));
        }
    }
    if let Some(data) = package_files.parent().map(|p| p.join("data")).filter(|p| p.is_dir()) {
        let _ = std::os::unix::fs::symlink(data, work.join("data"));
    }
    work
}

fn record_info(r: &Record<DFColumnType>) -> Option<(String, String)> {
    match r {
        Record::Statement { loc, sql, .. } | Record::Query { loc, sql, .. } => Some((loc.to_string(), sql.clone())),
        _ => None,
    }
}

/// The function registries of a session, name by name. `SessionStateBuilder::new_from_existing`
/// registers the functions again from the registries' values in hash order, each under its
/// name and its aliases, so where one function's alias (or name) is another's, the winner is
/// random: the Spark files' `array_contains` (Spark's function, registered over the default
/// `array_has`'s alias) came back as `array_has` in some runs, and 4 records of
/// `spark/array/array_contains.slt` failed with the rule's session only.
struct Functions {
    scalar: Vec<(String, Arc<datafusion::logical_expr::ScalarUDF>)>,
    aggregate: Vec<(String, Arc<datafusion::logical_expr::AggregateUDF>)>,
    window: Vec<(String, Arc<datafusion::logical_expr::WindowUDF>)>,
}

fn pairs<T>(m: &std::collections::HashMap<String, Arc<T>>) -> Vec<(String, Arc<T>)> {
    m.iter().map(|(k, v)| (k.clone(), Arc::clone(v))).collect()
}

/// An order in which registering the functions of `map` (each under its names) leaves every
/// key naming the function it names in `map`: a function goes after every other function that
/// claims one of its keys (a topological order of "claims a key that `map` gives to"); `None`
/// when the claims form a cycle.
fn registration_order<T>(map: &[(String, Arc<T>)], names: impl Fn(&T) -> Vec<String>) -> Option<Vec<Arc<T>>> {
    let mut funcs: Vec<Arc<T>> = Vec::new();
    for (_, f) in map {
        if !funcs.iter().any(|g| Arc::ptr_eq(g, f)) {
            funcs.push(Arc::clone(f));
        }
    }
    let index = |f: &Arc<T>| funcs.iter().position(|g| Arc::ptr_eq(g, f)).expect("listed");
    let winner: std::collections::HashMap<&str, usize> = map.iter().map(|(k, f)| (k.as_str(), index(f))).collect();
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); funcs.len()];
    let mut pending = vec![0usize; funcs.len()];
    for (a, f) in funcs.iter().enumerate() {
        for k in names(f) {
            if let Some(&w) = winner.get(k.as_str()) {
                if w != a {
                    after[a].push(w);
                    pending[w] += 1;
                }
            }
        }
    }
    let mut ready: Vec<usize> = (0..funcs.len()).filter(|&a| pending[a] == 0).collect();
    let mut order = Vec::new();
    while let Some(a) = ready.pop() {
        order.push(Arc::clone(&funcs[a]));
        for &w in &after[a] {
            pending[w] -= 1;
            if pending[w] == 0 {
                ready.push(w);
            }
        }
    }
    (order.len() == funcs.len()).then_some(order)
}

/// Whether `now` maps the same keys to the same functions (the same `Arc`s) as `before`.
fn same_functions<T>(before: &[(String, Arc<T>)], now: &std::collections::HashMap<String, Arc<T>>) -> bool {
    before.len() == now.len() && before.iter().all(|(k, f)| now.get(k).is_some_and(|g| Arc::ptr_eq(f, g)))
}

impl Functions {
    fn of(state: &datafusion::execution::SessionState) -> Functions {
        Functions { scalar: pairs(state.scalar_functions()), aggregate: pairs(state.aggregate_functions()), window: pairs(state.window_functions()) }
    }

    /// Registers the functions again in an order that gives every name the function it had
    /// ([`registration_order`]), then checks that it does.
    fn restore(&self, state: &mut datafusion::execution::SessionState, file: &Path) {
        use datafusion::execution::registry::FunctionRegistry;
        let all = |name: &str, aliases: &[String]| std::iter::once(name.to_string()).chain(aliases.iter().cloned()).collect::<Vec<_>>();
        fn cycle<T>(file: &Path, kind: &str) -> T {
            panic!("{}: the {kind} functions' names and aliases claim each other in a cycle", file.display())
        }
        for f in registration_order(&self.scalar, |f| all(f.name(), f.aliases())).unwrap_or_else(|| cycle(file, "scalar")) {
            state.register_udf(f).unwrap();
        }
        for f in registration_order(&self.aggregate, |f| all(f.name(), f.aliases())).unwrap_or_else(|| cycle(file, "aggregate")) {
            state.register_udaf(f).unwrap();
        }
        for f in registration_order(&self.window, |f| all(f.name(), f.aliases())).unwrap_or_else(|| cycle(file, "window")) {
            state.register_udwf(f).unwrap();
        }
        assert!(
            same_functions(&self.scalar, state.scalar_functions())
                && same_functions(&self.aggregate, state.aggregate_functions())
                && same_functions(&self.window, state.window_functions()),
            "{}: the rule's session resolves some function names differently from the file's session",
            file.display()
        );
    }
}

async fn run_file(path: &Path, relative: &Path, mode: Mode) -> Option<Vec<Outcome>> {
    let test_ctx = TestContext::try_new_for_test_file(relative).await?;
    setup_scratch_dir(relative).unwrap();
    let ctx: SessionContext = match mode {
        Mode::Plain => test_ctx.session_ctx().clone(),
        Mode::GpuRule | Mode::Reduced => {
            let existing = test_ctx.session_ctx().state();
            let create_default = existing.config().options().catalog.create_default_catalog_and_schema;
            let functions = Functions::of(&existing);
            let builder = SessionStateBuilder::new_from_existing(existing);
            let mut state = if mode == Mode::GpuRule {
                // Every join the GPU can run moves, however small its build side: the files'
                // tables have a few rows, which the default (`DEFAULT_MIN_BUILD_ROWS`) keeps on
                // the CPU.
                builder.with_gpu_joins(GpuJoinConfig { min_build_rows: Some(0), ..GpuJoinConfig::default() }).build()
            } else {
                builder.with_physical_optimizer_rule(Arc::new(SemiJoinReduction::default())).build()
            };
            // new_from_existing turns this off (the catalog exists already); `SHOW ALL` shows it.
            state.config_mut().options_mut().catalog.create_default_catalog_and_schema = create_default;
            functions.restore(&mut state, relative);
            SessionContext::new_with_state(state)
        }
    };
    let rule_state = ctx.state();
    let rule = GpuJoinRule::find(&rule_state);
    let mut runner = sqllogictest::Runner::new(|| {
        let ctx = ctx.clone();
        let relative = relative.to_path_buf();
        async move { Ok(DataFusion::new(ctx, relative, indicatif::ProgressBar::hidden())) }
    });
    runner.add_label("Datafusion");
    runner.with_column_validator(strict_column_validator);
    runner.with_normalizer(value_normalizer);
    runner.with_validator(match mode {
        Mode::Plain => df_value_validator,
        Mode::GpuRule => same_rows_any_order,
        Mode::Reduced => same_rows_any_order_reduced,
    });
    let records = match parse_file::<DFColumnType>(path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}: does not parse: {e}", path.display());
            return None;
        }
    };
    let mut out = Vec::new();
    for record in records {
        if let Record::Halt { .. } = record {
            break;
        }
        let info = record_info(&record);
        let result = runner.run_async(record).await;
        let decisions = rule.map(|r| r.take_decisions()).unwrap_or_default();
        let moved = decisions.iter().filter(|d| d.moved()).count();
        let shown = decisions.iter().filter(|d| d.shown).count();
        if let Some((loc, sql)) = info {
            out.push(Outcome { loc, sql, error: result.err().map(|e| e.to_string()), moved, shown });
        }
    }
    runner.shutdown_async().await;
    Some(out)
}

/// Whether a failed record's message shows more semi-join reductions (`KeyFilterExec`s, or
/// `RightSemi` joins) in the actual output than in the expected one (sqllogictest prints
/// `[Diff] (-expected|+actual)`, a line each).
fn more_right_semi_joins(message: &str) -> bool {
    let count = |sign: char| message.lines().filter(|l| l.starts_with(sign) && (l.contains("RightSemi") || l.contains("KeyFilterExec"))).count();
    count('+') > count('-')
}

fn is_explain(sql: &str) -> bool {
    sql.trim_start().get(..7).is_some_and(|s| s.eq_ignore_ascii_case("explain"))
}

async fn compare_file(path: PathBuf, files_root: PathBuf) -> (Totals, Vec<String>) {
    let relative = path.strip_prefix(&files_root).unwrap().to_path_buf();
    let mut t = Totals { files: 1, ..Totals::default() };
    let mut failures = Vec::new();
    let Some(plain) = run_file(&path, &relative, Mode::Plain).await else {
        t.files_skipped = 1;
        return (t, failures);
    };
    let Some(gpu) = run_file(&path, &relative, Mode::GpuRule).await else {
        failures.push(format!("{}: the rule's run did not start", relative.display()));
        t.failures = 1;
        return (t, failures);
    };
    let Some(reduced) = run_file(&path, &relative, Mode::Reduced).await else {
        failures.push(format!("{}: the semi-join reductions' run did not start", relative.display()));
        t.reduced_failures = 1;
        return (t, failures);
    };
    assert_eq!(plain.len(), gpu.len(), "{}: both runs see the same records", relative.display());
    assert_eq!(plain.len(), reduced.len(), "{}: the three runs see the same records", relative.display());
    for (p, r) in plain.iter().zip(&reduced) {
        match (&p.error, &r.error) {
            (Some(_), _) => {}
            (None, None) => t.reduced_passed += 1,
            (None, Some(e)) if is_explain(&r.sql) && more_right_semi_joins(e) => t.reduced_explain_skipped += 1,
            (None, Some(e)) => {
                t.reduced_failures += 1;
                failures.push(format!("{}: passes plain, fails with SemiJoinReduction:\n{e}", r.loc));
            }
        }
    }
    for (p, g) in plain.iter().zip(&gpu) {
        t.records += 1;
        if g.moved > 0 {
            t.queries_moved += 1;
            t.joins_moved += g.moved;
        }
        match (&p.error, &g.error) {
            (Some(_), _) => t.failed_plain += 1,
            (None, None) => t.passed += 1,
            (None, Some(_)) if is_explain(&g.sql) && g.shown > 0 => t.explain_skipped += 1,
            (None, Some(e)) => {
                t.failures += 1;
                failures.push(format!("{} (joins on the GPU: {}): passes plain, fails with GpuJoinRule:\n{e}", g.loc, g.moved));
            }
        }
    }
    (t, failures)
}

fn main() {
    // libtest's arguments (`--test-threads`, `--nocapture`, ...) are ignored; plain words filter
    // the files by path.
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let package_files = test_files_dir().canonicalize().unwrap();
    let mut files = Vec::new();
    slt_files(&package_files, &mut files);
    let all = std::env::var("GPUJOIN_SLT").is_ok_and(|v| v == "all");
    files.retain(|p| {
        let rel = p.strip_prefix(&package_files).unwrap().to_string_lossy().to_string();
        let chosen = all || std::fs::read_to_string(p).is_ok_and(|s| s.to_ascii_lowercase().contains(" join "));
        chosen && (filters.is_empty() || filters.iter().any(|f| rel.contains(f.as_str())))
    });
    let work = working_dir(&package_files);
    std::env::set_current_dir(&work).unwrap();
    let files_root = work.join("test_files");
    let files: Vec<PathBuf> = files.iter().map(|p| files_root.join(p.strip_prefix(&package_files).unwrap())).collect();
    // Without a GPU the rule's run is DataFusion's own (and it must agree); GPUJOIN_REQUIRE_GPU=1
    // makes a missing device a failure.
    let gpu = gpujoin_device::testing::device_or_skip("sqllogictest: GPU joins (the suite runs with the rule keeping every plan)").is_some();

    let started = std::time::Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let parallel = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(1, 8);
    let results: Vec<(Totals, Vec<String>)> = runtime.block_on(async {
        futures::stream::iter(files.iter().cloned()).map(|p| compare_file(p, files_root.clone())).buffer_unordered(parallel).collect().await
    });
    let mut total = Totals::default();
    let mut failures = Vec::new();
    for (t, f) in results {
        total.files += t.files;
        total.files_skipped += t.files_skipped;
        total.records += t.records;
        total.failed_plain += t.failed_plain;
        total.passed += t.passed;
        total.explain_skipped += t.explain_skipped;
        total.failures += t.failures;
        total.queries_moved += t.queries_moved;
        total.joins_moved += t.joins_moved;
        total.reduced_passed += t.reduced_passed;
        total.reduced_explain_skipped += t.reduced_explain_skipped;
        total.reduced_failures += t.reduced_failures;
        failures.extend(f);
    }
    let _ = std::fs::remove_dir_all(&work);
    for f in &failures {
        eprintln!("FAILED {f}\n");
    }
    let order = ORDER_DIFFERS.load(Ordering::Relaxed);
    println!(
        "sqllogictest ({}, {}): {} files ({} skipped by their set-up), {} records: {} failed plain (not compared), {} passed plain and with GpuJoinRule ({} of them with rows in another order), {} EXPLAIN records skipped (a join decided with a GPU present), {} failed with the rule; {} queries ran {} joins on the GPU; {:.1} s",
        if all { "whole suite" } else { "files with joins" },
        if gpu { "GPU present" } else { "no GPU: the rule keeps every plan" },
        total.files,
        total.files_skipped,
        total.records,
        total.failed_plain,
        total.passed,
        order,
        total.explain_skipped,
        total.failures,
        total.queries_moved,
        total.joins_moved,
        started.elapsed().as_secs_f64()
    );
    println!(
        "sqllogictest with SemiJoinReduction (CPU plans): {} records passed plain and with it ({} of them with rows in another order), {} EXPLAIN records skipped (a reduction inserted), {} failed with it",
        total.reduced_passed,
        REDUCED_ORDER_DIFFERS.load(Ordering::Relaxed),
        total.reduced_explain_skipped,
        total.reduced_failures
    );
    if total.reduced_failures > 0 {
        std::process::exit(1);
    }
    if !gpu && (order > 0 || total.queries_moved > 0 || total.explain_skipped > 0) {
        eprintln!("without a GPU the rule must keep every plan");
        std::process::exit(1);
    }
    if total.failures > 0 {
        std::process::exit(1);
    }
}
