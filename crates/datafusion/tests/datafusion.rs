//! gpujoin-datafusion through DataFusion's SQL planner (one test executable: DataFusion links
//! slowly).
//!
//! CPU (CI): the rule's decisions on a matrix of join types x key types x filters, by plan
//! inspection with the planning forced without a GPU; without a GPU and without forcing every
//! plan is DataFusion's; the host path of `GpuJoinExec` (a partition with an empty input)
//! answers like DataFusion; a forced plan run without a GPU fails with a typed error.
//! GPU: SQL joins of random tables with NULLs give the same rows with and without the rule.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch, StringViewArray, TimestampMicrosecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema};
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::common::Result;
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::{displayable, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use gpujoin_datafusion::{GpuJoinConfig, GpuJoinExec, GpuJoinRule, OutputGather, SessionStateBuilderExt};
use gpujoin_device::testing::{device_or_skip, has_device, report_skip};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A table of every key type the matrix tries, with NULLs where `nulls`, keys in `0..domain`.
fn table(rng: &mut StdRng, rows: usize, domain: i32, nulls: bool) -> RecordBatch {
    let key = |rng: &mut StdRng| -> Option<i32> { (!nulls || rng.gen_range(0..10) > 0).then(|| rng.gen_range(0..domain)) };
    let ks: Vec<Option<i32>> = (0..rows).map(|_| key(rng)).collect();
    let vs: Vec<Option<i32>> = (0..rows).map(|_| (!nulls || rng.gen_range(0..8) > 0).then(|| rng.gen_range(-50..50))).collect();
    let cols: Vec<(&str, ArrayRef, bool)> = vec![
        ("k_i32", Arc::new(Int32Array::from(ks.clone())), true),
        ("k_i64", Arc::new(Int64Array::from(ks.iter().map(|k| k.map(|k| k as i64 * 1_000_000_007)).collect::<Vec<_>>())), true),
        ("k_str", Arc::new(StringViewArray::from(ks.iter().map(|k| k.map(|k| format!("key-{k}-with-a-long-tail"))).collect::<Vec<_>>())), true),
        ("k_f64", Arc::new(Float64Array::from(ks.iter().map(|k| k.map(|k| k as f64 / 4.0)).collect::<Vec<_>>())), true),
        ("k_dec", Arc::new(Decimal128Array::from(ks.iter().map(|k| k.map(|k| k as i128 * 101)).collect::<Vec<_>>()).with_precision_and_scale(12, 2).unwrap()), true),
        ("k_date", Arc::new(Date32Array::from(ks.iter().map(|k| k.map(|k| 19000 + k)).collect::<Vec<_>>())), true),
        ("k_ts", Arc::new(TimestampMicrosecondArray::from(ks.iter().map(|k| k.map(|k| k as i64 * 3_600_000_000)).collect::<Vec<_>>())), true),
        ("k_bool", Arc::new(BooleanArray::from(ks.iter().map(|k| k.map(|k| k % 2 == 0)).collect::<Vec<_>>())), true),
        ("k_f16", cast(&Float32Array::from(ks.iter().map(|k| k.map(|k| k as f32)).collect::<Vec<_>>()), &DataType::Float16).unwrap(), true),
        ("k_dict", Arc::new(ks.iter().map(|k| k.map(|k| format!("d{}", k % 50))).collect::<Vec<_>>().iter().map(|s| s.as_deref()).collect::<DictionaryArray<Int32Type>>()), true),
        ("v", Arc::new(Int32Array::from(vs.clone())), true),
        ("v_nn", Arc::new(Int32Array::from(vs.iter().map(|v| v.unwrap_or(0)).collect::<Vec<_>>())), false),
        ("lst", Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(ks.iter().map(|k| k.map(|k| vec![Some(k), None])))), true),
    ];
    let schema = Schema::new(cols.iter().map(|(n, a, nullable)| Field::new(*n, a.data_type().clone(), *nullable)).collect::<Vec<_>>());
    RecordBatch::try_new(Arc::new(schema), cols.into_iter().map(|(_, a, _)| a).collect()).unwrap()
}

/// `partitioned`: hash joins in `Partitioned` mode (no input is small enough to collect).
fn session_config(partitioned: bool) -> SessionConfig {
    let mut c = SessionConfig::new().with_target_partitions(4).with_batch_size(100);
    if partitioned {
        c.options_mut().optimizer.hash_join_single_partition_threshold = 0;
        c.options_mut().optimizer.hash_join_single_partition_threshold_rows = 0;
    }
    c
}

/// [`partitions`] with each partition in batches of at most `rows` rows.
fn partitions_in_batches(batch: &RecordBatch, rows: usize) -> Arc<MemTable> {
    let n = batch.num_rows();
    let cuts = [0, n / 2, n / 2 + n / 3, n];
    let parts = cuts.windows(2).map(|w| (w[0]..w[1]).step_by(rows).map(|at| batch.slice(at, rows.min(w[1] - at))).collect()).collect();
    Arc::new(MemTable::try_new(batch.schema(), parts).unwrap())
}

/// `batch` as an in-memory table of three partitions of unequal sizes (the last may be empty).
fn partitions(batch: RecordBatch) -> Arc<MemTable> {
    let n = batch.num_rows();
    let cuts = [0, n / 2, n / 2 + n / 3, n];
    let parts = cuts.windows(2).map(|w| vec![batch.slice(w[0], w[1] - w[0])]).collect();
    Arc::new(MemTable::try_new(batch.schema(), parts).unwrap())
}

async fn context(gpu: Option<GpuJoinConfig>, partitioned: bool, left: RecordBatch, right: RecordBatch) -> Result<SessionContext> {
    let mut b = SessionStateBuilder::new().with_default_features().with_config(session_config(partitioned));
    if let Some(g) = gpu {
        b = b.with_gpu_joins(g);
    }
    let ctx = SessionContext::new_with_state(b.build());
    ctx.register_table("l", partitions(left))?;
    ctx.register_table("r", partitions(right))?;
    Ok(ctx)
}

/// The default configuration, but every join gpujoin can run moves, however small its build side
/// (these tests' tables have hundreds of rows; the default keeps joins of tables under
/// `DEFAULT_MIN_BUILD_ROWS` rows on the CPU).
fn every_join() -> GpuJoinConfig {
    GpuJoinConfig { min_build_rows: Some(0), ..GpuJoinConfig::default() }
}

fn forced() -> GpuJoinConfig {
    GpuJoinConfig { force_without_gpu_for_plan_tests: true, ..every_join() }
}

async fn physical_plan(ctx: &SessionContext, sql: &str) -> Result<Arc<dyn ExecutionPlan>> {
    ctx.sql(sql).await?.create_physical_plan().await
}

fn plan_text(plan: &Arc<dyn ExecutionPlan>) -> String {
    displayable(plan.as_ref()).indent(true).to_string()
}

fn find_gpu_joins(plan: &Arc<dyn ExecutionPlan>) -> Vec<&GpuJoinExec> {
    plan.downcast_ref::<GpuJoinExec>().into_iter().chain(plan.children().into_iter().flat_map(find_gpu_joins)).collect()
}

fn count_nodes(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    (plan.name() == name) as usize + plan.children().into_iter().map(|c| count_nodes(c, name)).sum::<usize>()
}

const JOINS: [&str; 8] = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "LEFT SEMI JOIN", "LEFT ANTI JOIN", "RIGHT SEMI JOIN", "RIGHT ANTI JOIN"];

fn query(join: &str, key: &str, filter: Option<&str>, extra_output: Option<&str>) -> String {
    let out = if join.starts_with("RIGHT SEMI") || join.starts_with("RIGHT ANTI") {
        format!("r.v, r.{key}")
    } else if join.starts_with("LEFT SEMI") || join.starts_with("LEFT ANTI") {
        format!("l.v, l.{key}")
    } else {
        format!("l.v, r.v, l.{key}")
    };
    let out = match extra_output {
        Some(c) => format!("{out}, {c}"),
        None => out,
    };
    let filter = filter.map(|f| format!(" AND {f}")).unwrap_or_default();
    format!("SELECT {out} FROM l {join} r ON l.{key} = r.{key}{filter}")
}

/// Plans `sql` in a forced session and returns the plan, and the rule's decisions for it.
async fn decide(ctx: &SessionContext, sql: &str) -> (Arc<dyn ExecutionPlan>, Vec<gpujoin_datafusion::JoinDecision>) {
    let state = ctx.state();
    let rule = GpuJoinRule::find(&state).expect("the rule is installed");
    rule.take_decisions();
    let plan = physical_plan(ctx, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let decisions = rule.take_decisions();
    // GPUJOIN_DF_PRINT=1: show what was decided (with --nocapture).
    if std::env::var_os("GPUJOIN_DF_PRINT").is_some() {
        println!("{sql}\n{}{}\n", plan_text(&plan), decisions.iter().map(|d| format!("  decision: {d}\n")).collect::<String>());
    }
    (plan, decisions)
}

#[tokio::test]
async fn rule_decisions_over_join_types_key_types_and_filters() {
    let mut rng = StdRng::seed_from_u64(1);
    let (l, r) = (table(&mut rng, 300, 40, true), table(&mut rng, 200, 40, true));
    // (key, moved by default, moved with allow_float_semantics, words of the reason when kept)
    let keys: [(&str, bool, bool, &str); 10] = [
        ("k_i32", true, true, ""),
        ("k_i64", true, true, ""),
        ("k_str", true, true, ""),
        ("k_f64", false, true, "float key"),
        ("k_dec", true, true, ""),
        ("k_date", true, true, ""),
        ("k_ts", true, true, ""),
        ("k_bool", true, true, ""),
        ("k_dict", true, true, ""),
        ("k_f16", false, false, "Float16"),
    ];
    // (filter, moves, words of the reason when kept)
    let filters: [(Option<&str>, bool, &str); 5] = [
        (None, true, ""),
        (Some("l.v < r.v"), true, ""),
        (Some("(l.v_nn < r.v_nn OR l.v_nn > r.v_nn + 1)"), false, "neither a column nor a literal"),
        (Some("(l.v_nn < r.v_nn OR l.v_nn = 7)"), true, ""),
        // Nullable columns under OR: SQL's three-valued logic on the GPU.
        (Some("(l.v < r.v OR l.v = 7)"), true, ""),
    ];
    let mut checked = 0;
    for partitioned in [false, true] {
        for allow_floats in [false, true] {
            let config = GpuJoinConfig { allow_float_semantics: allow_floats, ..forced() };
            let ctx = context(Some(config), partitioned, l.clone(), r.clone()).await.unwrap();
            for join in JOINS {
                for (key, moved, moved_float, key_reason) in keys {
                    for (filter, filter_moves, filter_reason) in filters {
                        if allow_floats && key != "k_f64" {
                            continue;
                        }
                        let sql = query(join, key, filter, None);
                        let (plan, decisions) = decide(&ctx, &sql).await;
                        let text = plan_text(&plan);
                        assert_eq!(decisions.len(), 1, "{sql}: {decisions:?}\n{text}");
                        let d = &decisions[0];
                        let key_moves = if allow_floats { moved_float } else { moved };
                        let expect = key_moves && filter_moves;
                        assert_eq!(d.moved(), expect, "{sql}: {d}\n{text}");
                        if expect {
                            assert_eq!(count_nodes(&plan, "GpuJoinExec"), 1, "{sql}\n{text}");
                            assert_eq!(count_nodes(&plan, "HashJoinExec"), 0, "{sql}\n{text}");
                            assert!(text.contains("replaces=HashJoinExec") && text.contains("algorithm=Auto"), "{text}");
                        } else {
                            assert_eq!(count_nodes(&plan, "GpuJoinExec"), 0, "{sql}\n{text}");
                            assert_eq!(count_nodes(&plan, "HashJoinExec"), 1, "{sql}\n{text}");
                            let reason = d.kept.as_deref().unwrap();
                            let words = if !key_moves { key_reason } else { filter_reason };
                            assert!(reason.contains(words), "{sql}: reason {reason:?} should say {words:?}");
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 300, "{checked}");
}

#[tokio::test]
async fn rule_keeps_equi_joins_of_small_build_sides_on_the_cpu() {
    let mut rng = StdRng::seed_from_u64(12);
    // 300 rows left, 200 right: DataFusion builds on the smaller side, 200 rows (exact: in memory).
    let (l, r) = (table(&mut rng, 300, 40, true), table(&mut rng, 200, 40, true));
    let equi = query("JOIN", "k_i64", None, None);
    let theta = "SELECT l.v, r.v FROM l JOIN r ON l.v < r.v";
    let cross = "SELECT l.v, r.v_nn FROM l CROSS JOIN r";
    for partitioned in [false, true] {
        for (min_build_rows, equi_moves) in [(None, false), (Some(0), true), (Some(200), true), (Some(201), false), (Some(1 << 20), false)] {
            let config = GpuJoinConfig { min_build_rows, ..forced() };
            assert_eq!(config.min_build_rows(), min_build_rows.unwrap_or(gpujoin_datafusion::DEFAULT_MIN_BUILD_ROWS));
            let ctx = context(Some(config), partitioned, l.clone(), r.clone()).await.unwrap();
            let (plan, decisions) = decide(&ctx, &equi).await;
            let what = format!("{min_build_rows:?}, partitioned {partitioned}:\n{}", plan_text(&plan));
            assert_eq!(decisions.len(), 1, "{what}");
            assert_eq!(decisions[0].moved(), equi_moves, "{what}");
            assert_eq!(count_nodes(&plan, "GpuJoinExec"), equi_moves as usize, "{what}");
            if !equi_moves {
                let reason = decisions[0].kept.as_deref().unwrap();
                let n = min_build_rows.unwrap_or(gpujoin_datafusion::DEFAULT_MIN_BUILD_ROWS);
                assert!(reason.contains("a build side of at most 200 rows") && reason.contains(&format!("min_build_rows={n}")), "{reason}");
                assert!(plan_text(&plan).contains("CpuJoinKeptExec: reason=a build side of at most 200 rows"), "{what}");
                // Kept as DataFusion's own `CollectLeft` join on the unrepartitioned inputs.
                if partitioned {
                    assert!(plan_text(&plan).contains("CollectLeft on the inputs before their hash repartitions"), "{what}");
                    assert!(plan_text(&plan).contains("HashJoinExec: mode=CollectLeft") && !plan_text(&plan).contains("partitioning=Hash"), "{what}");
                }
            }
            // A filter never adds rows: the bound stays the table's 200 (DataFusion estimates fewer).
            let (plan, decisions) = decide(&ctx, &format!("{equi} WHERE r.v_nn < 0")).await;
            assert_eq!(decisions[0].moved(), equi_moves, "{min_build_rows:?}:\n{}", plan_text(&plan));
            // Theta and cross joins move whatever their size.
            for sql in [theta, cross] {
                let (plan, decisions) = decide(&ctx, sql).await;
                assert!(decisions.iter().all(|d| d.moved()) && count_nodes(&plan, "GpuJoinExec") == 1, "{sql}, {min_build_rows:?}:\n{}", plan_text(&plan));
            }
            // A build side made by a join has no bound: DataFusion's estimate of it is no limit.
            let (plan, decisions) = decide(&ctx, &format!("SELECT x.v, l.v FROM ({}) x JOIN l ON x.v = l.k_i32", query("JOIN", "k_i64", None, None).replace("l.v, r.v, l.k_i64", "l.v AS v"))).await;
            let what = format!("{min_build_rows:?}, partitioned {partitioned}:\n{}", plan_text(&plan));
            assert_eq!(decisions.len(), 2, "{what}");
            assert_eq!(decisions[0].moved(), equi_moves, "the inner join, on a table: {what}");
            assert!(decisions[1].moved(), "the outer join, on the inner one's output: {what}");
        }
    }
}

/// `Partitioned` hash joins whose inputs are both repartitioned by hash for them run
/// `CollectLeft` on the inputs before those repartitions (every join type: Left, Full,
/// LeftSemi and LeftAnti with the probe partitions sharing the build side's matched-rows
/// bitmap), except where the plan above relies on the join's hash partitioning, or
/// `collect_build_rows` says no; with device gathers the joins that return build rows stay
/// `Partitioned`.
#[tokio::test]
async fn partitioned_joins_move_without_their_hash_repartitions() {
    use datafusion::physical_plan::joins::PartitionMode;
    let mut rng = StdRng::seed_from_u64(21);
    let (l, r) = (table(&mut rng, 200, 40, true), table(&mut rng, 300, 40, true));
    let hash_repartitions = |plan: &Arc<dyn ExecutionPlan>| plan_text(plan).matches("RepartitionExec: partitioning=Hash").count();
    for (collect_build_rows, collects) in [(None, true), (Some(200), true), (Some(199), false), (Some(0), false)] {
        let ctx = context(Some(GpuJoinConfig { collect_build_rows, ..forced() }), true, l.clone(), r.clone()).await.unwrap();
        let plain = context(None, true, l.clone(), r.clone()).await.unwrap();
        for join in JOINS {
            let sql = query(join, "k_i32", Some("l.v < r.v"), None);
            let (plan, decisions) = decide(&ctx, &sql).await;
            let what = format!("{join}, {collect_build_rows:?}:\n{}", plan_text(&plan));
            assert!(decisions.iter().all(|d| d.moved()), "{what}");
            let exec = find::<GpuJoinExec>(&plan).unwrap_or_else(|| panic!("{what}"));
            let want = collects;
            assert_eq!(exec.mode() == PartitionMode::CollectLeft, want, "{what}");
            assert_eq!(exec.replaces() == Some("HashJoinExec (Partitioned; unrepartitioned inputs)"), want, "{what}");
            let before = hash_repartitions(&physical_plan(&plain, &sql).await.unwrap());
            assert_eq!(before, 2, "{join}: DataFusion's plan repartitions both inputs");
            assert_eq!(hash_repartitions(&plan), if want { 0 } else { 2 }, "{what}");
            if want {
                use datafusion::physical_plan::ExecutionPlanProperties;
                assert_eq!(exec.left().output_partitioning().partition_count(), 1, "{what}");
                assert_eq!(exec.right().output_partitioning().partition_count(), 4, "{what}");
            }
        }
        // The aggregate above relies on the join's output being partitioned by its key (it
        // groups by it without a repartition of its own): that join runs `CollectLeft` too, its
        // output repartitioned by hash as the aggregate needs; the other one (repartitioned
        // again by another key for the first) moves without its repartitions, and the plan
        // passes DataFusion's sanity check.
        let sql = "SELECT r.k_i64, count(*) FROM l JOIN r ON l.k_i32 = r.k_i32 JOIN l l2 ON r.k_i64 = l2.k_i64 GROUP BY r.k_i64";
        let (plan, _) = decide(&ctx, sql).await;
        let text = plan_text(&plan);
        use datafusion::physical_optimizer::PhysicalOptimizerRule;
        datafusion::physical_optimizer::sanity_checker::SanityCheckPlan::new()
            .optimize(Arc::clone(&plan), ctx.state().config_options())
            .unwrap_or_else(|e| panic!("{e}: {text}"));
        let modes: Vec<PartitionMode> = find_gpu_joins(&plan).iter().map(|j| j.mode()).collect();
        // (With 199 the top join moves all the same: its build side, the other join's
        // output, has no estimate, which does not stop it.)
        use PartitionMode::{CollectLeft, Partitioned};
        let want = match collect_build_rows {
            None | Some(200) => vec![CollectLeft, CollectLeft],
            Some(0) => vec![Partitioned, Partitioned],
            _ => vec![CollectLeft, Partitioned],
        };
        assert_eq!(modes, want, "{collect_build_rows:?}:\n{text}");
        let rehashed = find_gpu_joins(&plan)[0].replaces().is_some_and(|r| r == "HashJoinExec (Partitioned; unrepartitioned inputs; output repartitioned)");
        assert_eq!(rehashed, collect_build_rows != Some(0), "{collect_build_rows:?}:\n{text}");
        assert!(text.contains("AggregateExec: mode=SinglePartitioned") , "{text}");
    }
    // With device gathers (no matched-rows bitmap) or without `shared_matched_rows`
    // (Ballista's plans) the joins that return build rows stay `Partitioned`; the others move.
    let mut build_rows_joins = 0;
    for config in [GpuJoinConfig { gather: OutputGather::Device, ..forced() }, GpuJoinConfig { shared_matched_rows: false, ..forced() }] {
        let ctx = context(Some(config), true, l.clone(), r.clone()).await.unwrap();
        for (join, collects) in [("LEFT JOIN", false), ("FULL JOIN", false), ("LEFT SEMI JOIN", false), ("LEFT ANTI JOIN", false), ("RIGHT JOIN", true)] {
            let sql = query(join, "k_i32", Some("l.v < r.v"), None);
            let (plan, _) = decide(&ctx, &sql).await;
            let exec = find::<GpuJoinExec>(&plan).unwrap_or_else(|| panic!("{join}: {}", plan_text(&plan)));
            use datafusion::common::JoinType::*;
            if matches!(exec.join_type(), Left | Full | LeftSemi | LeftAnti) {
                build_rows_joins += 1;
                assert_eq!(exec.mode() == PartitionMode::CollectLeft, collects, "{join}:\n{}", plan_text(&plan));
            } else {
                assert!(exec.mode() == PartitionMode::CollectLeft, "{join}:\n{}", plan_text(&plan));
            }
        }
    }
    assert_eq!(build_rows_joins, 8);
}

/// A filtered Parquet table's scan is bounded by its file's row count (DataFusion's estimate
/// under the pushed-down predicate is inexact): an equi-join with such a small build side stays
/// on the CPU, and the table reduces the other side below a join (semi-join reduction).
#[tokio::test]
async fn filtered_parquet_scans_are_bounded_by_their_files_rows() {
    let mut rng = StdRng::seed_from_u64(31);
    let (l, r) = (table(&mut rng, 300, 40, true), table(&mut rng, 200, 40, true));
    let ctx = context(Some(GpuJoinConfig { min_build_rows: None, ..forced() }), false, l, r).await.unwrap();
    let dir = std::env::temp_dir().join(format!("gpujoin-df-parquet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("small.parquet");
    let copy = format!("COPY (SELECT CAST(value AS INT) AS id, value % 7 AS g FROM generate_series(1, 50)) TO '{}' STORED AS PARQUET", path.display());
    ctx.sql(&copy).await.unwrap().collect().await.unwrap();
    ctx.register_parquet("small", path.to_str().unwrap(), datafusion::prelude::ParquetReadOptions::default()).await.unwrap();
    let sql = "SELECT l.v, s.id FROM l JOIN small s ON l.k_i32 = s.id WHERE s.g = 3";
    let (plan, _) = decide(&ctx, sql).await;
    let text = plan_text(&plan);
    assert!(text.contains("file_type=parquet") && text.contains("predicate="), "{text}");
    assert!(text.contains("a build side of at most 50 rows"), "{text}");
    let sql = "SELECT l.v, r.v, s.id FROM l JOIN r ON l.k_i64 = r.k_i64 JOIN small s ON l.k_i32 = s.id WHERE s.g = 3";
    let (plan, _) = decide(&ctx, sql).await;
    let text = plan_text(&plan);
    assert!(text.contains("semi-join reduction: only the rows whose k_i32"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A semi (anti) join that keeps an inner join's rows whose build-side key is in (not in) a
/// subquery runs below the inner join, on its build side (TPC-H Q18's shape), where the plan
/// stays sane; the plan test of the GPU answers is TPC-H's.
#[tokio::test]
async fn semi_and_anti_joins_over_an_inner_join_run_below_it() {
    let mut rng = StdRng::seed_from_u64(22);
    let (l, r) = (table(&mut rng, 200, 40, true), table(&mut rng, 300, 40, true));
    let ctx = context(Some(forced()), true, l, r).await.unwrap();
    let subquery = "SELECT k_i32 FROM r r2 WHERE r2.k_i32 = l.k_i32 GROUP BY k_i32 HAVING count(*) > 7";
    for (exists, join_type) in [("EXISTS", "Semi"), ("NOT EXISTS", "Anti")] {
        let sql = format!("SELECT l.k_i32, l.v, r.v FROM l JOIN r ON l.k_i32 = r.k_i32 WHERE {exists} ({subquery})");
        let (plan, _) = decide(&ctx, &sql).await;
        let text = plan_text(&plan);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("JoinExec")).collect();
        // The inner join on top, over the semi (anti) join, which is over `l`'s repartition.
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].trim_start().starts_with("GpuJoinExec: mode=") && lines[0].contains("join_type=Inner") && lines[0].contains("over the semi or anti join pushed below it"), "{text}");
        assert!(lines[1].contains(&format!("{join_type}, ")) && lines[1].contains("pushed below the inner join it filtered"), "{text}");
        use datafusion::physical_optimizer::PhysicalOptimizerRule;
        datafusion::physical_optimizer::sanity_checker::SanityCheckPlan::new().optimize(Arc::clone(&plan), ctx.state().config_options()).unwrap_or_else(|e| panic!("{e}: {text}"));
    }
}

#[tokio::test]
async fn rule_keeps_unsupported_outputs_and_decimal_filters() {
    let mut rng = StdRng::seed_from_u64(2);
    let (l, r) = (table(&mut rng, 100, 20, true), table(&mut rng, 100, 20, true));
    let ctx = context(Some(forced()), false, l, r).await.unwrap();
    let cases = [
        (query("JOIN", "k_i32", None, Some("l.lst")), "lst"),
        (query("LEFT JOIN", "k_i64", None, Some("r.k_f16")), "Float16"),
        (query("JOIN", "k_i32", Some("l.k_dec < r.k_dec"), None), "Decimal128"),
        (query("JOIN", "k_i32", Some("l.k_f64 < r.k_f64"), None), "float column"),
        // An expression key: kept, unless DataFusion computes it below the join.
        ("SELECT l.v FROM l JOIN r ON l.k_i32 + 1 = r.k_i32".to_string(), "?not a column reference"),
    ];
    for (sql, words) in cases {
        let (plan, decisions) = decide(&ctx, &sql).await;
        assert_eq!(decisions.len(), 1, "{sql}");
        let d = &decisions[0];
        if let Some(words) = words.strip_prefix('?') {
            assert!(d.moved() || d.kept.as_deref().unwrap().contains(words), "{sql}: {d}");
        } else {
            assert!(!d.moved() && d.kept.as_deref().unwrap().contains(words), "{sql}: {d}\n{}", plan_text(&plan));
            assert_eq!(count_nodes(&plan, "HashJoinExec"), 1);
        }
    }
    // A NOT IN subquery plans a null-aware anti join, which stays on the CPU.
    let (_, decisions) = decide(&ctx, "SELECT l.v FROM l WHERE l.k_i32 NOT IN (SELECT k_i32 FROM r)").await;
    assert!(decisions.iter().any(|d| !d.moved() && d.kept.as_deref().unwrap().contains("null-aware")), "{decisions:?}");
}

#[tokio::test]
async fn nested_loop_and_cross_joins_move() {
    let mut rng = StdRng::seed_from_u64(8);
    let (l, r) = (table(&mut rng, 100, 20, true), table(&mut rng, 100, 20, true));
    let ctx = context(Some(forced()), false, l.clone(), r.clone()).await.unwrap();
    // (query, operators it may plan, moves, words of the reason when kept)
    let cases: [(String, &[&str], bool, &str); 7] = [
        ("SELECT l.v, r.v FROM l JOIN r ON l.v < r.v".into(), &["NestedLoopJoinExec"], true, ""),
        ("SELECT l.v, r.k_str FROM l LEFT JOIN r ON l.v < r.v AND l.k_str <> r.k_str".into(), &["NestedLoopJoinExec"], true, ""),
        ("SELECT l.v, r.v FROM l JOIN r ON l.k_f64 < r.k_f64".into(), &["NestedLoopJoinExec"], false, "float column"),
        // DataFusion computes `r.v + 1` below the join: the filter compares columns.
        ("SELECT l.v, r.v FROM l JOIN r ON l.v < r.v + 1".into(), &["NestedLoopJoinExec"], true, ""),
        ("SELECT l.v, r.v FROM l JOIN r ON l.v < r.v + l.v_nn".into(), &["NestedLoopJoinExec"], false, "neither a column nor a literal"),
        ("SELECT l.v, r.v FROM l CROSS JOIN r".into(), &["CrossJoinExec", "NestedLoopJoinExec"], true, ""),
        // A cross join that outputs no column of an input uploads none of it: kept.
        ("SELECT 1 AS one FROM l CROSS JOIN r".into(), &["CrossJoinExec", "NestedLoopJoinExec"], false, "no column"),
    ];
    for (sql, operators, moves, words) in cases {
        let (plan, decisions) = decide(&ctx, &sql).await;
        let text = plan_text(&plan);
        assert_eq!(decisions.len(), 1, "{sql}: {decisions:?}");
        let d = &decisions[0];
        assert!(operators.contains(&d.operator.as_str()), "{sql}: {d}");
        assert_eq!(d.moved(), moves, "{sql}: {d}\n{text}");
        if moves {
            assert_eq!(count_nodes(&plan, "GpuJoinExec"), 1, "{text}");
            assert!(text.contains(&format!("replaces={}", d.operator)), "{text}");
        } else {
            assert!(d.kept.as_deref().unwrap().contains(words), "{sql}: {d}");
            assert_eq!(count_nodes(&plan, "GpuJoinExec"), 0, "{text}");
        }
    }
}

/// Queries ordered by a sort-merge join's key, in its order (NULLS FIRST): DataFusion drops
/// their sorts, the sort-merge join's output being in that order.
const ORDERED: [&str; 4] = [
    "SELECT l.k_i32, l.v, r.v FROM l JOIN r ON l.k_i32 = r.k_i32 ORDER BY l.k_i32 NULLS FIRST",
    "SELECT l.k_str, r.v FROM l LEFT JOIN r ON l.k_str = r.k_str AND l.v < r.v ORDER BY l.k_str NULLS FIRST",
    "SELECT r.k_i64, r.v FROM l RIGHT JOIN r ON l.k_i64 = r.k_i64 ORDER BY r.k_i64 NULLS FIRST",
    "SELECT l.k_date, l.v FROM l LEFT SEMI JOIN r ON l.k_date = r.k_date ORDER BY l.k_date NULLS FIRST",
];

/// The GPU test's sort-merge join queries (every one moves: checked without a GPU).
fn smj_queries() -> Vec<String> {
    let mut sqls = Vec::new();
    for join in JOINS {
        // Not `k_dict`: DataFusion's own sort-merge join cannot compare dictionary keys
        // ("Unsupported data type in sort merge join comparator"); dictionaries go as payload.
        for key in ["k_i32", "k_str", "k_dec", "k_i64"] {
            for filter in [None, Some("l.v < r.v")] {
                let extra = if join.contains("SEMI") || join.contains("ANTI") { None } else { Some("r.k_str AS x_str, l.k_dec AS x_dec, r.k_dict AS x_dict") };
                sqls.push(query(join, key, filter, extra));
            }
        }
    }
    sqls.push("SELECT l.v, r.v, l.k_str FROM l JOIN r ON l.k_str IS NOT DISTINCT FROM r.k_str".into());
    sqls.push("SELECT l.v, r.v FROM l FULL JOIN r ON (l.k_i64 IS NOT DISTINCT FROM r.k_i64) AND l.v < r.v".into());
    sqls
}

/// The GPU test's symmetric hash joins: (key, partitioned, sorted inputs).
const SHJ_CASES: [(&str, bool, bool); 4] = [("k_i32", false, false), ("k_str", true, true), ("k_i64", true, false), ("k_date", false, true)];

/// A session planning sort-merge joins (`prefer_hash_join = false`, as DataFusion's
/// `sort_merge_join.slt`), over `partitions` target partitions (hash-partitioned joins).
async fn smj_context(gpu: Option<GpuJoinConfig>, partitions_: usize, left: RecordBatch, right: RecordBatch) -> Result<SessionContext> {
    let mut config = session_config(true).with_target_partitions(partitions_);
    config.options_mut().optimizer.prefer_hash_join = false;
    let mut b = SessionStateBuilder::new().with_default_features().with_config(config);
    if let Some(g) = gpu {
        b = b.with_gpu_joins(g);
    }
    let ctx = SessionContext::new_with_state(b.build());
    ctx.register_table("l", partitions(left))?;
    ctx.register_table("r", partitions(right))?;
    Ok(ctx)
}

/// `EXPLAIN sql`'s text (every row, both columns).
async fn explain(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx.sql(&format!("EXPLAIN {sql}")).await.unwrap().collect().await.unwrap();
    let mut text = String::new();
    for b in &batches {
        for i in 0..b.num_rows() {
            for c in b.columns() {
                text.push_str(&array_value_to_string(c, i).unwrap());
                text.push('\n');
            }
        }
    }
    text
}

/// The nodes of `plan` named `name` whose child (first) is named `child`.
fn count_over(plan: &Arc<dyn ExecutionPlan>, name: &str, child: &str) -> usize {
    let here = plan.name() == name && plan.children().first().is_some_and(|c| c.name() == child);
    here as usize + plan.children().into_iter().map(|c| count_over(c, name, child)).sum::<usize>()
}

#[tokio::test]
async fn sort_merge_joins_move_with_their_order_restored_where_needed() {
    let mut rng = StdRng::seed_from_u64(10);
    let (l, r) = (table(&mut rng, 100, 20, true), table(&mut rng, 100, 20, true));
    let plain = smj_context(None, 4, l.clone(), r.clone()).await.unwrap();
    let ctx = smj_context(Some(forced()), 4, l.clone(), r.clone()).await.unwrap();
    // Every join type gpujoin has, with and without a filter: the SortMergeJoinExec and the
    // SortExecs below it (there only for it) go; nothing above needs the order (4 partitions).
    for join in JOINS {
        for filter in [None, Some("l.v < r.v")] {
            let sql = query(join, "k_i32", filter, None);
            let before = physical_plan(&plain, &sql).await.unwrap();
            assert_eq!(count_nodes(&before, "SortMergeJoinExec"), 1, "{sql}: DataFusion plans a sort-merge join\n{}", plan_text(&before));
            let (plan, decisions) = decide(&ctx, &sql).await;
            let text = plan_text(&plan);
            assert_eq!(decisions.len(), 1, "{sql}: {decisions:?}");
            assert!(decisions[0].moved() && decisions[0].operator == "SortMergeJoinExec", "{sql}: {}\n{text}", decisions[0]);
            assert_eq!(count_nodes(&plan, "SortMergeJoinExec"), 0, "{text}");
            assert_eq!(count_nodes(&plan, "GpuJoinExec"), 1, "{text}");
            assert!(text.contains("mode=Partitioned") && text.contains("replaces=SortMergeJoinExec"), "{text}");
            assert_eq!(filter.is_some(), text.contains("filter="), "{text}");
            assert_eq!(count_nodes(&plan, "SortExec"), 0, "{sql}: the SMJ's input sorts are removed\n{text}");
            assert_eq!(count_nodes(&plan, "CpuJoinKeptExec"), 0, "{text}");
        }
    }
    for sql in smj_queries() {
        let (plan, decisions) = decide(&ctx, &sql).await;
        assert!(decisions.len() == 1 && decisions[0].moved() && decisions[0].operator == "SortMergeJoinExec", "{sql}: {decisions:?}\n{}", plan_text(&plan));
    }
    // IS NOT DISTINCT FROM: NULL keys equal, as the SMJ's null_equality said.
    let (plan, _) = decide(&ctx, "SELECT l.v, r.v FROM l JOIN r ON l.k_str IS NOT DISTINCT FROM r.k_str").await;
    let text = plan_text(&plan);
    assert!(text.contains("replaces=SortMergeJoinExec") && text.contains("NullsEqual: true"), "{text}");
    // Kept (unsupported key types, a mark join), with the reason in the plan and in EXPLAIN.
    let kept = [
        (query("JOIN", "k_f16", None, None), "Float16"),
        (query("LEFT JOIN", "k_f64", None, None), "float key"),
        (query("JOIN", "k_i32", None, Some("l.lst")), "lst"),
    ];
    for (sql, words) in kept {
        let (plan, decisions) = decide(&ctx, &sql).await;
        let text = plan_text(&plan);
        assert_eq!(decisions.len(), 1, "{sql}: {decisions:?}");
        let reason = decisions[0].kept.clone().unwrap_or_else(|| panic!("{sql}: moved\n{text}"));
        assert!(reason.contains(words) && decisions[0].shown, "{sql}: {reason}");
        assert_eq!(count_over(&plan, "CpuJoinKeptExec", "SortMergeJoinExec"), 1, "{text}");
        assert!(text.contains(&format!("CpuJoinKeptExec: reason={reason}")), "{text}");
        let explained = explain(&ctx, &sql).await;
        assert!(explained.contains("CpuJoinKeptExec: reason=") && explained.contains(words) && explained.contains("SortMergeJoinExec"), "{explained}");
        // The plan is DataFusion's below the note.
        let before = plan_text(&physical_plan(&plain, &sql).await.unwrap());
        assert_eq!(text.lines().filter(|l| !l.contains("CpuJoinKeptExec")).count(), before.lines().count(), "{text}\n{before}");
    }
    let explained = explain(&ctx, &query("FULL JOIN", "k_date", None, None)).await;
    assert!(explained.contains("GpuJoinExec: mode=Partitioned, join_type=Full") && explained.contains("replaces=SortMergeJoinExec"), "{explained}");
    // A mark join (EXISTS ... OR ...) stays, under a note saying so.
    let sql = "SELECT l.v FROM l WHERE EXISTS (SELECT 1 FROM r WHERE r.k_i32 = l.k_i32) OR l.v > 10";
    let (plan, decisions) = decide(&ctx, sql).await;
    let text = plan_text(&plan);
    let mark = decisions.iter().find(|d| matches!(d.join_type, Some(datafusion::common::JoinType::LeftMark | datafusion::common::JoinType::RightMark))).unwrap_or_else(|| panic!("{decisions:?}\n{text}"));
    assert!(mark.kept.as_deref().unwrap().contains("mark joins"), "{mark}");
    assert!(text.contains("CpuJoinKeptExec: reason=join type") && text.contains("Mark"), "{text}");

    // ORDER BY the key (NULLS FIRST, as the SMJ sorts): DataFusion drops the sort (the SMJ's
    // output is in that order) and merges
    // the partitions with a SortPreservingMergeExec; the GPU join gets a SortExec above it.
    let sql = "SELECT l.k_i32, l.v, r.v FROM l JOIN r ON l.k_i32 = r.k_i32 ORDER BY l.k_i32 NULLS FIRST";
    let before = physical_plan(&plain, sql).await.unwrap();
    let before_text = plan_text(&before);
    assert_eq!(count_nodes(&before, "SortExec"), 2, "only the SMJ's input sorts:\n{before_text}");
    assert_eq!(count_nodes(&before, "SortPreservingMergeExec"), 1, "{before_text}");
    let (plan, _) = decide(&ctx, sql).await;
    let text = plan_text(&plan);
    assert_eq!(count_nodes(&plan, "SortExec"), 1, "{text}");
    assert_eq!(count_over(&plan, "SortExec", "GpuJoinExec"), 1, "the SMJ's order restored:\n{text}");
    assert!(text.contains("preserve_partitioning=[true]"), "{text}");
    // The GPU test's ordered queries: DataFusion relies on the SMJ's order (no sort above it),
    // the rule restores it.
    for sql in ORDERED {
        let before = physical_plan(&plain, sql).await.unwrap();
        assert_eq!(count_nodes(&before, "SortMergeJoinExec"), 1, "{sql}\n{}", plan_text(&before));
        assert_eq!(count_nodes(&before, "SortExec"), 2, "{sql}: only the SMJ's input sorts\n{}", plan_text(&before));
        let (plan, _) = decide(&ctx, sql).await;
        let text = plan_text(&plan);
        assert_eq!((count_over(&plan, "SortExec", "GpuJoinExec"), count_nodes(&plan, "SortExec")), (1, 1), "{sql}\n{text}");
    }
    // Without ORDER BY over 4 partitions nothing needs the order.
    let (plan, _) = decide(&ctx, "SELECT l.k_i32, r.v FROM l JOIN r ON l.k_i32 = r.k_i32").await;
    assert_eq!(count_nodes(&plan, "SortExec"), 0, "{}", plan_text(&plan));
    // A root of one partition (DataFusion plans sort-merge joins only over several; built by
    // hand): its order may be an ORDER BY DataFusion dropped, so it is restored.
    use datafusion::physical_optimizer::PhysicalOptimizerRule;
    let rule = GpuJoinRule::new(forced());
    let options = datafusion::common::config::ConfigOptions::default();
    for join_type in [datafusion::common::JoinType::Inner, datafusion::common::JoinType::Right, datafusion::common::JoinType::LeftAnti] {
        let smj = one_partition_smj(&plain, join_type).await;
        let plan = rule.optimize(Arc::clone(&smj), &options).unwrap();
        let text = plan_text(&plan);
        assert!(plan.name() == "SortExec" && count_over(&plan, "SortExec", "GpuJoinExec") == 1 && count_nodes(&plan, "SortExec") == 1, "{join_type:?}\n{text}");
        assert_eq!(plan.properties().output_ordering(), smj.properties().output_ordering(), "{text}");
    }
    // A PartialSortExec relies on its input's order without declaring it: restored too.
    {
        use datafusion::physical_expr::expressions::col;
        use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
        use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
        use datafusion::physical_plan::sorts::partial_sort::PartialSortExec;
        let join = physical_plan(&plain, "SELECT l.k_i32, l.v FROM l JOIN r ON l.k_i32 = r.k_i32").await.unwrap();
        assert_eq!(count_nodes(&join, "SortMergeJoinExec"), 1, "{}", plan_text(&join));
        let schema = join.schema();
        let ordering = LexOrdering::new([PhysicalSortExpr::new_default(col("k_i32", &schema).unwrap()), PhysicalSortExpr::new_default(col("v", &schema).unwrap())]).unwrap();
        let partial: Arc<dyn ExecutionPlan> = Arc::new(PartialSortExec::new(ordering, join, 1).with_preserve_partitioning(true));
        let plan = rule.optimize(Arc::new(CoalescePartitionsExec::new(partial)), &options).unwrap();
        let text = plan_text(&plan);
        assert_eq!(count_over(&plan, "SortExec", "GpuJoinExec"), 1, "{text}");
    }
}

/// A sort-merge join of `l` and `r` on `k_i32` over one partition (inputs coalesced and
/// sorted), as DataFusion never plans one.
async fn one_partition_smj(ctx: &SessionContext, join_type: datafusion::common::JoinType) -> Arc<dyn ExecutionPlan> {
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::joins::SortMergeJoinExec;
    use datafusion::physical_plan::sorts::sort::SortExec;
    let mut sides = Vec::new();
    for name in ["l", "r"] {
        let input = physical_plan(ctx, &format!("SELECT k_i32, v, k_str FROM {name}")).await.unwrap();
        let k = col("k_i32", &input.schema()).unwrap();
        let ordering = LexOrdering::new([PhysicalSortExpr::new_default(Arc::clone(&k))]).unwrap();
        let input: Arc<dyn ExecutionPlan> = Arc::new(SortExec::new(ordering, Arc::new(CoalescePartitionsExec::new(input))));
        sides.push((input, k));
    }
    let (r, l) = (sides.pop().unwrap(), sides.pop().unwrap());
    let options = vec![datafusion::arrow::compute::SortOptions::default()];
    Arc::new(SortMergeJoinExec::try_new(l.0, r.0, vec![(l.1, r.1)], None, join_type, options, datafusion::common::NullEquality::NullEqualsNothing).unwrap())
}

#[tokio::test]
async fn a_second_run_of_the_rule_decides_again_without_a_second_note() {
    use datafusion::physical_optimizer::PhysicalOptimizerRule;
    let mut rng = StdRng::seed_from_u64(11);
    let ctx = smj_context(Some(forced()), 4, table(&mut rng, 50, 10, true), table(&mut rng, 50, 10, true)).await.unwrap();
    let rule = GpuJoinRule::new(forced());
    let options = datafusion::common::config::ConfigOptions::default();
    for sql in [query("JOIN", "k_f16", None, None), query("LEFT JOIN", "k_i32", None, None)] {
        let plan = physical_plan(&ctx, &sql).await.unwrap();
        let again = rule.optimize(Arc::clone(&plan), &options).unwrap();
        assert_eq!(plan_text(&plan), plan_text(&again), "{sql}");
        assert!(count_nodes(&again, "CpuJoinKeptExec") + count_nodes(&again, "GpuJoinExec") == 1, "{}", plan_text(&again));
    }
}

/// An input that never ends (for the symmetric hash join's unbounded case): one batch, declared
/// infinite.
#[derive(Debug)]
struct OneBatch(RecordBatch);

impl datafusion::physical_plan::streaming::PartitionStream for OneBatch {
    fn schema(&self) -> &datafusion::arrow::datatypes::SchemaRef {
        self.0.schema_ref()
    }

    fn execute(&self, _ctx: Arc<datafusion::execution::TaskContext>) -> datafusion::physical_plan::SendableRecordBatchStream {
        let batch = self.0.clone();
        Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(batch.schema(), futures::stream::iter(vec![Ok(batch)])))
    }
}

/// Symmetric hash joins of `l` and `r` on `key` (`partitioned`: hash-partitioned inputs in 4
/// partitions, else one partition each), with `sorted` inputs (a SortExec below, as DataFusion
/// adds for the join's pruning), of `join_type`; `unbounded`: the left input never ends.
async fn symmetric_join(
    ctx: &SessionContext,
    key: &str,
    join_type: datafusion::common::JoinType,
    partitioned: bool,
    sorted: bool,
    unbounded: bool,
) -> Arc<dyn ExecutionPlan> {
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_expr::{LexOrdering, Partitioning, PhysicalSortExpr};
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::joins::{StreamJoinPartitionMode, SymmetricHashJoinExec};
    use datafusion::physical_plan::repartition::RepartitionExec;
    use datafusion::physical_plan::sorts::sort::SortExec;
    let mut inputs = Vec::new();
    for (name, never_ends) in [("l", unbounded), ("r", false)] {
        let columns = if key == "k_str" { "k_str, v".to_string() } else { format!("{key}, v, k_str") };
        let mut input = physical_plan(ctx, &format!("SELECT {columns} FROM {name}")).await.unwrap();
        if never_ends {
            let batches = datafusion::physical_plan::collect(Arc::clone(&input), ctx.task_ctx()).await.unwrap();
            let batch = datafusion::arrow::compute::concat_batches(&input.schema(), &batches).unwrap();
            let stream: Arc<dyn datafusion::physical_plan::streaming::PartitionStream> = Arc::new(OneBatch(batch));
            input = Arc::new(datafusion::physical_plan::streaming::StreamingTableExec::try_new(input.schema(), vec![stream], None, Vec::<LexOrdering>::new(), true, None).unwrap());
        }
        let k = col(key, &input.schema()).unwrap();
        input = if partitioned {
            Arc::new(RepartitionExec::try_new(input, Partitioning::Hash(vec![Arc::clone(&k)], 4)).unwrap())
        } else {
            Arc::new(CoalescePartitionsExec::new(input))
        };
        let ordering = LexOrdering::new([PhysicalSortExpr::new_default(Arc::clone(&k))]).unwrap();
        if sorted {
            input = Arc::new(SortExec::new(ordering.clone(), input).with_preserve_partitioning(true));
        }
        inputs.push((input, k, sorted.then_some(ordering)));
    }
    let (r, l) = (inputs.pop().unwrap(), inputs.pop().unwrap());
    let mode = if partitioned { StreamJoinPartitionMode::Partitioned } else { StreamJoinPartitionMode::SinglePartition };
    let on = vec![(l.1, r.1)];
    Arc::new(SymmetricHashJoinExec::try_new(l.0, r.0, on, None, &join_type, datafusion::common::NullEquality::NullEqualsNothing, l.2, r.2, mode).unwrap())
}

#[tokio::test]
async fn symmetric_hash_joins_of_bounded_inputs_move() {
    use datafusion::common::JoinType;
    use datafusion::physical_optimizer::PhysicalOptimizerRule;
    let mut rng = StdRng::seed_from_u64(12);
    let ctx = context(None, true, table(&mut rng, 60, 10, true), table(&mut rng, 60, 10, true)).await.unwrap();
    let rule = GpuJoinRule::new(forced());
    let options = datafusion::common::config::ConfigOptions::default();
    let types = [JoinType::Inner, JoinType::Left, JoinType::Right, JoinType::Full, JoinType::LeftSemi, JoinType::LeftAnti, JoinType::RightSemi, JoinType::RightAnti];
    for join_type in types {
        for (key, partitioned, sorted) in SHJ_CASES {
            let shj = symmetric_join(&ctx, key, join_type, partitioned, sorted, false).await;
            rule.take_decisions();
            let plan = rule.optimize(Arc::clone(&shj), &options).unwrap();
            let text = plan_text(&plan);
            let d = rule.take_decisions();
            assert!(d.len() == 1 && d[0].moved() && d[0].operator == "SymmetricHashJoinExec", "{join_type:?}: {d:?}\n{text}");
            let exec = find::<GpuJoinExec>(&plan).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(exec.replaces(), Some("SymmetricHashJoinExec"));
            let mode = if partitioned { "Partitioned" } else { "CollectLeft" };
            assert_eq!(format!("{:?}", exec.mode()), mode, "{text}");
            assert_eq!(count_nodes(&plan, "SortExec"), 0, "the inputs' sorts are removed:\n{text}");
            assert_eq!(plan.schema(), shj.schema());
        }
    }
    // Kept: a mark join, an unsupported key type, an unbounded input.
    let cases = [(JoinType::LeftMark, "k_i32", false, "mark joins"), (JoinType::Inner, "k_f16", false, "Float16"), (JoinType::Inner, "k_i32", true, "unbounded")];
    for (join_type, key, unbounded, words) in cases {
        let shj = symmetric_join(&ctx, key, join_type, true, false, unbounded).await;
        rule.take_decisions();
        let plan = rule.optimize(Arc::clone(&shj), &options).unwrap();
        let text = plan_text(&plan);
        let d = rule.take_decisions();
        assert!(d.len() == 1 && d[0].kept.as_deref().is_some_and(|r| r.contains(words)), "{join_type:?} {key}: {d:?}\n{text}");
        assert_eq!(count_over(&plan, "CpuJoinKeptExec", "SymmetricHashJoinExec"), 1, "{text}");
        assert!(text.contains(&format!("CpuJoinKeptExec: reason={}", d[0].kept.as_deref().unwrap())), "{text}");
    }
    // Without a GPU (and not forced): untouched, no note.
    if !has_device() {
        let plain_rule = GpuJoinRule::new(GpuJoinConfig::default());
        let shj = symmetric_join(&ctx, "k_i32", JoinType::Inner, true, true, false).await;
        let plan = plain_rule.optimize(Arc::clone(&shj), &options).unwrap();
        assert_eq!(plan_text(&plan), plan_text(&shj));
        assert!(!plain_rule.decisions()[0].shown);
    }
}

/// `CollectLeft` joins that return build rows by whether any probe row matched them (Left,
/// Full, LeftSemi, LeftAnti) probe every partition of their probe side at once with host
/// gathers (a matched-rows bitmap shared by the partitions), and one partition, coalesced,
/// with device gathers or without `shared_matched_rows` (Ballista's plans).
#[tokio::test]
async fn collect_left_joins_of_build_side_rows_probe_every_partition_with_host_gathers() {
    let mut rng = StdRng::seed_from_u64(3);
    let (l, r) = (table(&mut rng, 100, 20, true), table(&mut rng, 100, 20, true));
    for (gather, shared_matched_rows) in [(OutputGather::Host, true), (OutputGather::Device, true), (OutputGather::Host, false)] {
        let ctx = context(Some(GpuJoinConfig { gather, shared_matched_rows, ..forced() }), false, l.clone(), r.clone()).await.unwrap();
        let shared = gather == OutputGather::Host && shared_matched_rows;
        let mut build_rows_joins = 0;
        // Equi-joins, and theta joins (joined a whole probe partition at a time).
        let theta = |join: &str| format!("SELECT {} FROM l {join} r ON l.v < r.v", if join.contains("SEMI") || join.contains("ANTI") { "l.v" } else { "l.v, r.v" });
        for sql in JOINS.iter().map(|j| query(j, "k_i32", None, None)).chain(JOINS.iter().filter(|j| !j.starts_with("RIGHT")).map(|j| theta(j))) {
            let join = &sql;
            let (plan, _) = decide(&ctx, &sql).await;
            let text = plan_text(&plan);
            let exec = find::<GpuJoinExec>(&plan).unwrap_or_else(|| panic!("{join}: {text}"));
            use datafusion::common::JoinType::*;
            let build_rows = matches!(exec.join_type(), Left | Full | LeftSemi | LeftAnti) && exec.mode() == datafusion::physical_plan::joins::PartitionMode::CollectLeft;
            use datafusion::physical_plan::ExecutionPlanProperties;
            if build_rows {
                build_rows_joins += 1;
                // The tables have three partitions (`partitions`).
                let probe_partitions = if shared { 3 } else { 1 };
                assert_eq!(exec.right().output_partitioning().partition_count(), probe_partitions, "{gather:?} {text}");
                assert_eq!(exec.properties().output_partitioning().partition_count(), probe_partitions, "{gather:?} {text}");
                assert_eq!(count_nodes(&plan, "CoalescePartitionsExec") >= 2, !shared, "{gather:?} {text}");
            }
            assert_eq!(exec.left().output_partitioning().partition_count(), 1, "{text}");
        }
        assert!(build_rows_joins >= 6, "{gather:?}: {build_rows_joins}");
    }
}

fn find<T: ExecutionPlan + 'static>(plan: &Arc<dyn ExecutionPlan>) -> Option<&T> {
    if let Some(t) = plan.as_ref().downcast_ref::<T>() {
        return Some(t);
    }
    plan.children().into_iter().find_map(|c| find::<T>(c))
}

#[tokio::test]
async fn without_a_gpu_every_plan_is_datafusions() {
    if has_device() {
        report_skip("without_a_gpu_every_plan_is_datafusions", "a GPU is present: the rule moves joins");
        return;
    }
    let mut rng = StdRng::seed_from_u64(4);
    let (l, r) = (table(&mut rng, 200, 30, true), table(&mut rng, 150, 30, true));
    for partitioned in [false, true] {
        let plain = context(None, partitioned, l.clone(), r.clone()).await.unwrap();
        let gpu = context(Some(every_join()), partitioned, l.clone(), r.clone()).await.unwrap();
        let state = gpu.state();
        let rule = GpuJoinRule::find(&state).unwrap();
        for join in JOINS {
            for key in ["k_i32", "k_str", "k_f64", "k_f16"] {
                for filter in [None, Some("l.v < r.v")] {
                    let sql = query(join, key, filter, None);
                    let (a, b) = (physical_plan(&plain, &sql).await.unwrap(), physical_plan(&gpu, &sql).await.unwrap());
                    assert_eq!(plan_text(&a), plan_text(&b), "{sql}");
                }
            }
        }
        let decisions = rule.take_decisions();
        assert!(!decisions.is_empty() && decisions.iter().all(|d| d.kept.as_deref().unwrap().starts_with("no GPU")), "{decisions:?}");
    }
    // Sort-merge joins: the same, with no note above them.
    let plain = smj_context(None, 4, l.clone(), r.clone()).await.unwrap();
    let gpu = smj_context(Some(every_join()), 4, l.clone(), r.clone()).await.unwrap();
    for sql in [query("LEFT JOIN", "k_i32", Some("l.v < r.v"), None), query("JOIN", "k_f16", None, None), "SELECT l.v FROM l JOIN r ON l.k_i32 = r.k_i32 ORDER BY l.k_i32 NULLS FIRST".to_string()] {
        let (a, b) = (physical_plan(&plain, &sql).await.unwrap(), physical_plan(&gpu, &sql).await.unwrap());
        assert_eq!(plan_text(&a), plan_text(&b), "{sql}");
        assert_eq!(count_nodes(&b, "SortMergeJoinExec"), 1, "{}", plan_text(&b));
        assert_eq!(explain(&plain, &sql).await, explain(&gpu, &sql).await, "{sql}");
    }
    // Disabled: the same, and says so.
    let off = context(Some(GpuJoinConfig { enabled: false, ..forced() }), false, l.clone(), r.clone()).await.unwrap();
    let (plan, decisions) = decide(&off, &query("JOIN", "k_i32", None, None)).await;
    assert_eq!(count_nodes(&plan, "GpuJoinExec"), 0);
    assert!(decisions[0].kept.as_deref().unwrap().contains("disabled"));
}

/// Rows as sorted strings (NULL as "NULL"), for comparing answers whatever the order.
fn sorted_rows(batches: &[RecordBatch]) -> Vec<String> {
    gpujoin_datafusion::tpch::sorted_rows(batches).unwrap()
}

async fn run(ctx: &SessionContext, sql: &str) -> Result<(Vec<RecordBatch>, Arc<dyn ExecutionPlan>)> {
    let df = ctx.sql(sql).await?;
    let plan = df.create_physical_plan().await?;
    let batches = datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    Ok((batches, plan))
}

#[tokio::test]
async fn empty_inputs_are_answered_on_the_host_like_datafusion() {
    // One side empty: GpuJoinExec answers without the device, so this runs everywhere.
    let mut rng = StdRng::seed_from_u64(5);
    let full = table(&mut rng, 250, 30, true);
    let empty = full.slice(0, 0);
    for (l, r) in [(full.clone(), empty.clone()), (empty.clone(), full.clone())] {
        for partitioned in [false, true] {
            let plain = context(None, partitioned, l.clone(), r.clone()).await.unwrap();
            let gpu = context(Some(forced()), partitioned, l.clone(), r.clone()).await.unwrap();
            let extra = |join: &str| if join.contains("SEMI") || join.contains("ANTI") { "1" } else { "r.k_str, l.k_ts, r.k_dict" };
            // Hash joins, then theta joins (nested loop) of every type.
            let hash = JOINS.iter().map(|j| query(j, "k_i32", Some("l.v < r.v"), Some(extra(j))));
            let theta = JOINS.iter().map(|j| query(j, "k_i32", None, Some(extra(j))).replace("ON l.k_i32 = r.k_i32", "ON l.v < r.v"));
            for sql in hash.chain(theta) {
                let (want, _) = run(&plain, &sql).await.unwrap();
                let (got, plan) = run(&gpu, &sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                assert_eq!(count_nodes(&plan, "GpuJoinExec"), 1, "{sql}\n{}", plan_text(&plan));
                assert_eq!(sorted_rows(&got), sorted_rows(&want), "{sql}\n{}", plan_text(&plan));
                for b in &got {
                    assert!(b.num_rows() <= 100, "batches of the session's batch size");
                    assert_eq!(b.schema(), plan.schema());
                }
            }
        }
    }
}

#[tokio::test]
async fn a_forced_plan_without_a_gpu_fails_with_a_typed_error() {
    if has_device() {
        report_skip("a_forced_plan_without_a_gpu_fails_with_a_typed_error", "a GPU is present");
        return;
    }
    let mut rng = StdRng::seed_from_u64(6);
    let ctx = context(Some(forced()), false, table(&mut rng, 50, 10, true), table(&mut rng, 50, 10, true)).await.unwrap();
    let err = run(&ctx, &query("JOIN", "k_i32", None, None)).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.to_lowercase().contains("driver") || msg.to_lowercase().contains("device"), "{msg}");
}

#[tokio::test]
async fn gpu_answers_equal_datafusions_on_random_tables_with_nulls() {
    let Some(_device) = device_or_skip("gpu_answers_equal_datafusions_on_random_tables_with_nulls") else { return };
    let mut rng = StdRng::seed_from_u64(7);
    let (l, r) = (table(&mut rng, 600, 200, true), table(&mut rng, 400, 200, true));
    let mut moved = 0;
    // Output columns taken on the host from the join's row indices (the default), and gathered
    // on the device; the probe side streamed in parts of at least 37 rows (the default's parts
    // hold these tables whole). One device lane (one partition on the device at a time; the
    // default is several) in the collect-left variants, whose partitions share a build side.
    // Partitioned joins run `CollectLeft` without their hash repartitions where they can (the
    // default), except with device gathers, which keep them `Partitioned` (`Some(0)`).
    // Output batches of 100 rows (the session's batch size here).
    let variants = [(false, OutputGather::Host, None), (true, OutputGather::Host, None), (false, OutputGather::Device, None), (true, OutputGather::Device, None), (false, OutputGather::Host, Some(37)), (true, OutputGather::Host, Some(37))];
    for (partitioned, gather, probe_part_rows) in variants {
        let collect_build_rows = (gather == OutputGather::Device).then_some(0);
        // Host gathers take up to 16 output batches at once (the default), one at a time in one
        // variant.
        let parallel_gather_batches = (probe_part_rows.is_some() && !partitioned).then_some(1);
        // 50 probe rows read while the build side is collected (the default reads none) in the
        // variants of small parts.
        let probe_prefetch_rows = probe_part_rows.map(|_| 50);
        let plain = context(None, partitioned, l.clone(), r.clone()).await.unwrap();
        let device_lanes = (!partitioned).then_some(1);
        let gpu = context(Some(GpuJoinConfig { gather, probe_part_rows, device_lanes, collect_build_rows, parallel_gather_batches, probe_prefetch_rows, ..every_join() }), partitioned, l.clone(), r.clone()).await.unwrap();
        if probe_part_rows.is_some() {
            // Batches of 20 rows, so that every probe partition comes in several parts.
            for (name, t) in [("l", &l), ("r", &r)] {
                gpu.deregister_table(name).unwrap();
                gpu.register_table(name, partitions_in_batches(t, 20)).unwrap();
            }
        }
        for join in JOINS {
            for key in ["k_i32", "k_i64", "k_str", "k_dec", "k_date", "k_ts", "k_bool", "k_dict"] {
                for filter in [None, Some("l.v < r.v"), Some("(l.v_nn < r.v_nn OR l.v_nn = 7)"), Some("(l.v < r.v OR NOT (r.v = 3))")] {
                    let extra = if join.contains("SEMI") || join.contains("ANTI") { None } else { Some("r.k_str AS x_str, l.k_dec AS x_dec, r.k_dict AS x_dict") };
                    let sql = query(join, key, filter, extra);
                    let (want, _) = run(&plain, &sql).await.unwrap();
                    let (got, plan) = run(&gpu, &sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                    moved += count_nodes(&plan, "GpuJoinExec");
                    assert_eq!(sorted_rows(&got), sorted_rows(&want), "{sql}\n{}", plan_text(&plan));
                    assert!(got.iter().all(|b| b.schema() == plan.schema()));
                }
            }
        }
        // Theta joins (NestedLoopJoinExec) of every type, and a cross join.
        for join in JOINS {
            let out = if join.contains("RIGHT SEMI") || join.contains("RIGHT ANTI") {
                "r.v, r.k_str"
            } else if join.contains("SEMI") || join.contains("ANTI") {
                "l.v, l.k_dec"
            } else {
                "l.v, r.v, r.k_dict"
            };
            let sql = format!("SELECT {out} FROM l {join} r ON l.v < r.v AND l.k_str <> r.k_str");
            let (want, _) = run(&plain, &sql).await.unwrap();
            let (got, plan) = run(&gpu, &sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            moved += count_nodes(&plan, "GpuJoinExec");
            assert_eq!(sorted_rows(&got), sorted_rows(&want), "{sql}\n{}", plan_text(&plan));
        }
        let sql = "SELECT a.v, b.k_date FROM (SELECT * FROM l LIMIT 50) a CROSS JOIN r b";
        let (want, _) = run(&plain, sql).await.unwrap();
        let (got, plan) = run(&gpu, sql).await.unwrap();
        moved += count_nodes(&plan, "GpuJoinExec");
        assert_eq!(sorted_rows(&got), sorted_rows(&want), "{sql}\n{}", plan_text(&plan));
        // Semi and anti joins of an inner join's rows (run below it where partitioned).
        for exists in ["EXISTS", "NOT EXISTS"] {
            let sql = format!("SELECT l.k_i32, l.v, r.k_str FROM l JOIN r ON l.k_i32 = r.k_i32 WHERE {exists} (SELECT k_i32 FROM r r2 WHERE r2.k_i32 = l.k_i32 GROUP BY k_i32 HAVING count(*) > 2)");
            let (want, _) = run(&plain, &sql).await.unwrap();
            let (got, plan) = run(&gpu, &sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            moved += count_nodes(&plan, "GpuJoinExec");
            assert_eq!(sorted_rows(&got), sorted_rows(&want), "{sql}\n{}", plan_text(&plan));
            assert_eq!(plan_text(&plan).contains("pushed below the inner join"), partitioned, "{sql}\n{}", plan_text(&plan));
        }
        // Two joins in a row, and EXPLAIN ANALYZE's metrics.
        let sql = "SELECT a.v, b.v, c.v FROM l a JOIN r b ON a.k_i32 = b.k_i32 LEFT JOIN l c ON b.k_str = c.k_str AND b.v < c.v";
        let (want, _) = run(&plain, sql).await.unwrap();
        let (got, plan) = run(&gpu, sql).await.unwrap();
        assert_eq!(count_nodes(&plan, "GpuJoinExec"), 2, "{}", plan_text(&plan));
        assert_eq!(sorted_rows(&got), sorted_rows(&want));
        // The inner join streams its probe side: with parts of 37 rows, more device joins than
        // partitions; whole, one a partition at most.
        let inner = find_gpu_joins(&plan).into_iter().find(|j| j.join_type() == datafusion::common::JoinType::Inner).expect("the inner join");
        let device_joins = inner.metrics().and_then(|m| m.sum_by_name("device_joins")).map_or(0, |v| v.as_usize());
        let partitions = inner.properties().output_partitioning().partition_count();
        assert_eq!(device_joins > partitions, probe_part_rows.is_some(), "{device_joins} device joins in {partitions} partitions, parts {probe_part_rows:?}\n{}", plan_text(&plan));
        let analyzed = gpu.sql(&format!("EXPLAIN ANALYZE {sql}")).await.unwrap().collect().await.unwrap();
        let text = sorted_rows(&analyzed).join("\n");
        for m in ["GpuJoinExec", "upload_time", "join_time", "download_time", "output_rows", "device_lane_wait"] {
            assert!(text.contains(m), "EXPLAIN ANALYZE lacks {m}:\n{text}");
        }
        assert_eq!(text.contains("device_lanes=1"), device_lanes.is_some(), "{text}");
        for host_only in ["gather_time", "upload_staging_wait", "upload_host_copy", "upload_copy_wait", "upload_issue", "upload_staging", "upload_setup"] {
            assert_eq!(text.contains(host_only), gather == OutputGather::Host, "{host_only}: {text}");
        }
        assert_eq!(text.contains("gather=device"), gather == OutputGather::Device, "{text}");
    }
    // Float keys where the data has no -0.0 and no NaN: the same answers once allowed.
    let plain = context(None, false, l.clone(), r.clone()).await.unwrap();
    let floats = context(Some(GpuJoinConfig { allow_float_semantics: true, ..every_join() }), false, l.clone(), r.clone()).await.unwrap();
    for join in JOINS {
        let sql = query(join, "k_f64", Some("l.v < r.v"), None);
        let (want, _) = run(&plain, &sql).await.unwrap();
        let (got, plan) = run(&floats, &sql).await.unwrap();
        moved += count_nodes(&plan, "GpuJoinExec");
        assert_eq!(sorted_rows(&got), sorted_rows(&want), "{sql}");
    }
    // Every query ran; 820 of them with a GPU join on the H100, 410 for each gather (the rest
    // stay on the CPU by the rule's decisions, checked without a GPU by the decision tests).
    assert!(moved >= 820, "{moved} joins moved");
}

/// Sort-merge joins (`prefer_hash_join = false`, as DataFusion's `sort_merge_join.slt`) and
/// symmetric hash joins of bounded inputs, moved to the GPU, answer as DataFusion's; where the
/// plan above needs the sort-merge join's order (ORDER BY its key: the sort DataFusion dropped
/// under a SortPreservingMergeExec, or one partition), the rows come in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gpu_sort_merge_and_symmetric_joins_answer_like_datafusion() {
    use datafusion::physical_optimizer::PhysicalOptimizerRule;
    let Some(_device) = device_or_skip("gpu_sort_merge_and_symmetric_joins_answer_like_datafusion") else { return };
    let mut rng = StdRng::seed_from_u64(13);
    let (l, r) = (table(&mut rng, 600, 200, true), table(&mut rng, 400, 200, true));
    let mut moved = 0;
    let mut queries = 0;
    for parts in [4, 2] {
        let plain = smj_context(None, parts, l.clone(), r.clone()).await.unwrap();
        let gpu = smj_context(Some(every_join()), parts, l.clone(), r.clone()).await.unwrap();
        for sql in &smj_queries() {
            let (want, before) = run(&plain, sql).await.unwrap();
            assert_eq!(count_nodes(&before, "SortMergeJoinExec"), 1, "{sql}\n{}", plan_text(&before));
            let (got, plan) = run(&gpu, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            moved += count_nodes(&plan, "GpuJoinExec");
            queries += 1;
            assert_eq!(sorted_rows(&got), sorted_rows(&want), "{sql}\n{}", plan_text(&plan));
            assert!(got.iter().all(|b| b.schema() == plan.schema()));
        }
        // ORDER BY the join key: the same rows, and the keys in the same sequence (rows of
        // equal keys may come in another order).
        for sql in ORDERED {
            let (want, before) = run(&plain, sql).await.unwrap();
            let (got, plan) = run(&gpu, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            let text = plan_text(&plan);
            // Over one partition DataFusion plans some as (kept) hash joins.
            if count_nodes(&before, "SortMergeJoinExec") == 1 {
                assert_eq!(count_nodes(&plan, "GpuJoinExec"), 1, "{sql}\n{text}");
                assert_eq!(count_over(&plan, "SortExec", "GpuJoinExec"), 1, "{sql}: the order restored\n{text}");
                moved += 1;
            }
            assert_eq!(sorted_rows(&got), sorted_rows(&want), "{sql}\n{text}");
            // The keys in ascending order, nulls first (each query's ORDER BY). Not compared with
            // DataFusion's sequence: its sort-merge Left/Right/Full joins with a filter can emit
            // rows out of order (apache/datafusion#24573, fixed after 55.2), and where its
            // order is relied on, so is that bug.
            let key_columns: Vec<&dyn datafusion::arrow::array::Array> = got.iter().map(|b| b.column(0).as_ref()).collect();
            let keys = datafusion::arrow::compute::concat(&key_columns).unwrap();
            let options = datafusion::arrow::compute::SortOptions { descending: false, nulls_first: true };
            let cmp = datafusion::arrow::array::make_comparator(keys.as_ref(), keys.as_ref(), options).unwrap();
            let out_of_order = (1..keys.len()).find(|&i| cmp(i - 1, i) == std::cmp::Ordering::Greater);
            assert_eq!(out_of_order, None, "{sql}: the keys' order (row {out_of_order:?} of {})\n{text}", keys.len());
        }
    }
    // Sort-merge joins over one partition (built by hand): the root's order restored.
    let plain = smj_context(None, 4, l.clone(), r.clone()).await.unwrap();
    let rule = GpuJoinRule::new(every_join());
    let options = datafusion::common::config::ConfigOptions::default();
    for join_type in [datafusion::common::JoinType::Inner, datafusion::common::JoinType::Left, datafusion::common::JoinType::Right, datafusion::common::JoinType::LeftSemi, datafusion::common::JoinType::RightAnti] {
        // Two builds of the same plan: a plan's RepartitionExecs run once (executing one
        // twice panics in DataFusion), so the reference and the rule get their own.
        let want = datafusion::physical_plan::collect(one_partition_smj(&plain, join_type).await, plain.task_ctx()).await.unwrap();
        let plan = rule.optimize(one_partition_smj(&plain, join_type).await, &options).unwrap();
        let text = plan_text(&plan);
        assert_eq!(count_over(&plan, "SortExec", "GpuJoinExec"), 1, "{join_type:?}\n{text}");
        let got = datafusion::physical_plan::collect(Arc::clone(&plan), plain.task_ctx()).await.unwrap_or_else(|e| panic!("{join_type:?}: {e}"));
        assert_eq!(sorted_rows(&got), sorted_rows(&want), "{join_type:?}\n{text}");
        let keys = |batches: &[RecordBatch]| batches.iter().flat_map(|b| (0..b.num_rows()).map(|i| array_value_to_string(b.column(0), i).unwrap()).collect::<Vec<_>>()).collect::<Vec<_>>();
        assert_eq!(keys(&got), keys(&want), "{join_type:?}: the keys' order\n{text}");
        moved += 1;
    }
    // Symmetric hash joins of bounded inputs (DataFusion plans them for unbounded ones; built
    // here by hand), sorted inputs or not, one partition or four.
    use datafusion::common::JoinType;
    let ctx = context(None, true, l, r).await.unwrap();
    let types = [JoinType::Inner, JoinType::Left, JoinType::Right, JoinType::Full, JoinType::LeftSemi, JoinType::LeftAnti, JoinType::RightSemi, JoinType::RightAnti];
    for join_type in types {
        for (key, partitioned, sorted) in SHJ_CASES {
            let want = datafusion::physical_plan::collect(symmetric_join(&ctx, key, join_type, partitioned, sorted, false).await, ctx.task_ctx()).await.unwrap();
            let plan = rule.optimize(symmetric_join(&ctx, key, join_type, partitioned, sorted, false).await, &options).unwrap();
            assert_eq!(count_nodes(&plan, "GpuJoinExec"), 1, "{}", plan_text(&plan));
            let got = datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap_or_else(|e| panic!("{join_type:?} {key}: {e}"));
            assert_eq!(sorted_rows(&got), sorted_rows(&want), "{join_type:?} {key}\n{}", plan_text(&plan));
            moved += 1;
        }
    }
    println!("{queries} sort-merge join queries, {moved} GPU joins (sort-merge and symmetric) equal to DataFusion's");
    assert!(moved >= 2 * 8 * 4 * 2 + 8 + 5 + 32, "{moved} joins moved");
}

mod translate {
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::{JoinSide, JoinType, NullEquality, ScalarValue};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal, NotExpr};
    use datafusion::physical_expr::PhysicalExprRef;
    use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
    use gpujoin_datafusion::translate::{plan_join, JoinPlan};
    use gpujoin_datafusion::{GpuJoinConfig, OutputGather};
    use gpujoin_join::predicate::{col_l, col_r, lit, Predicate, Side};

    fn schema(fields: &[(&str, DataType, bool)]) -> Schema {
        Schema::new(fields.iter().map(|(n, t, nullable)| Field::new(*n, t.clone(), *nullable)).collect::<Vec<_>>())
    }

    fn col(name: &str, i: usize) -> PhysicalExprRef {
        Arc::new(Column::new(name, i))
    }

    fn bin(a: PhysicalExprRef, op: Operator, b: PhysicalExprRef) -> PhysicalExprRef {
        Arc::new(BinaryExpr::new(a, op, b))
    }

    fn plan(l: &Schema, r: &Schema, on: &[(PhysicalExprRef, PhysicalExprRef)], f: Option<&JoinFilter>, t: JoinType, p: Option<&[usize]>) -> Result<JoinPlan, String> {
        plan_join(l, r, on, f, t, NullEquality::NullEqualsNothing, p, &GpuJoinConfig::default()).map_err(|e| e.0)
    }

    #[test]
    fn duplicate_names_projection_across_sides_and_uploaded_columns() {
        // Both inputs have an `a` (after an earlier join, say); the projection interleaves sides.
        let l = schema(&[("a", DataType::Int32, true), ("a", DataType::Utf8View, true), ("x", DataType::Float16, true)]);
        let r = schema(&[("b", DataType::Int64, false), ("a", DataType::Int32, true)]);
        let on = [(col("a", 0), col("a", 1))];
        // Join schema: l.a l.a l.x r.b r.a; out: r.b, l.a(1), r.b again, l.a(0).
        let p = plan(&l, &r, &on, None, JoinType::Inner, Some(&[3, 1, 3, 0])).unwrap();
        assert_eq!((p.left_cols.clone(), p.right_cols.clone(), p.gather), (vec![0], vec![1], OutputGather::Host), "host gathers upload the keys only");
        let device = GpuJoinConfig { gather: OutputGather::Device, ..GpuJoinConfig::default() };
        let d = plan_join(&l, &r, &on, None, JoinType::Inner, NullEquality::NullEqualsNothing, Some(&[3, 1, 3, 0]), &device).unwrap();
        assert_eq!((d.left_cols.clone(), d.right_cols.clone(), d.gather), (vec![0, 1], vec![0, 1], OutputGather::Device), "the Float16 column is never uploaded");
        // The explicit clustered algorithms gather on the device whatever the configuration.
        let clustered = GpuJoinConfig { algorithm: gpujoin_join::plan::Algorithm::PartitionedHash(gpujoin_join::plan::Gather::Clustered), ..GpuJoinConfig::default() };
        let c = plan_join(&l, &r, &on, None, JoinType::Inner, NullEquality::NullEqualsNothing, Some(&[3, 1, 3, 0]), &clustered).unwrap();
        assert_eq!((c.left_cols.clone(), c.gather), (vec![0, 1], OutputGather::Device));
        // A side with no key or filter column (a cross join) sends its output columns.
        let x = plan(&l, &r, &[], None, JoinType::Inner, Some(&[3, 1])).unwrap();
        assert_eq!((x.left_cols.clone(), x.right_cols.clone()), (vec![1], vec![0]));
        assert_eq!((p.select_left.clone(), p.select_right.clone()), (vec![1, 0], vec![0]));
        assert_eq!(p.outputs, vec![2, 0, 2, 1]);
        assert_eq!(p.sources, vec![(Side::Right, 0), (Side::Left, 1), (Side::Right, 0), (Side::Left, 0)]);
        // Outputting the Float16 column refuses, naming it.
        let e = plan(&l, &r, &on, None, JoinType::Inner, Some(&[2])).unwrap_err();
        assert!(e.contains("x") && e.contains("Float16"), "{e}");
        // No output columns: a key column carries the rows, of a side the join returns.
        let p = plan(&l, &r, &on, None, JoinType::RightAnti, Some(&[])).unwrap();
        assert_eq!((p.select_left.clone(), p.select_right.clone(), p.outputs.clone()), (vec![], vec![1], vec![]));
        // Semi joins output one side (the join schema holds only its fields).
        let p = plan(&l, &r, &on, None, JoinType::LeftSemi, Some(&[1, 0])).unwrap();
        assert_eq!((p.select_left.clone(), p.select_right.clone(), p.outputs.clone()), (vec![1, 0], vec![], vec![0, 1]));
        assert!(plan(&l, &r, &on, None, JoinType::LeftSemi, None).unwrap_err().contains("Float16"));
    }

    #[test]
    fn refusals_name_their_reason() {
        let l = schema(&[("a", DataType::Int32, true), ("f", DataType::Float64, true)]);
        let r = schema(&[("b", DataType::Int32, true), ("g", DataType::Float64, true)]);
        let on = [(col("a", 0), col("b", 0))];
        assert!(plan(&l, &r, &on, None, JoinType::LeftMark, None).unwrap_err().contains("LeftMark"));
        // No keys: a cross join (or a theta join on the filter), unless an input has no column
        // to carry its rows.
        assert!(plan(&l, &r, &[], None, JoinType::Inner, None).is_ok());
        assert!(plan(&l, &r, &[], None, JoinType::Inner, Some(&[0])).unwrap_err().contains("no column of the right input"));
        let expr_key = [(bin(col("a", 0), Operator::Plus, Arc::new(Literal::new(ScalarValue::Int32(Some(1))))), col("b", 0))];
        assert!(plan(&l, &r, &expr_key, None, JoinType::Inner, None).unwrap_err().contains("not a column reference"));
        assert!(plan(&l, &r, &[(col("f", 1), col("g", 1))], None, JoinType::Inner, None).unwrap_err().contains("float key"));
        let allow = GpuJoinConfig { allow_float_semantics: true, ..GpuJoinConfig::default() };
        assert!(plan_join(&l, &r, &[(col("f", 1), col("g", 1))], None, JoinType::Inner, NullEquality::NullEqualsNull, None, &allow).is_ok());
        // Composite keys: at most 4 key words (a Decimal128 takes 2), as DataFusion's IMDB
        // queries found (5 integer key columns).
        let wide = schema(&[("a", DataType::Int32, true), ("b", DataType::Int64, true), ("c", DataType::Int32, true), ("d", DataType::Int32, true), ("e", DataType::Int32, true), ("m", DataType::Decimal128(20, 2), true)]);
        let pairs = |idx: &[(&str, usize)]| idx.iter().map(|&(n, i)| (col(n, i), col(n, i))).collect::<Vec<_>>();
        assert!(plan(&wide, &wide, &pairs(&[("a", 0), ("b", 1), ("c", 2), ("d", 3)]), None, JoinType::Inner, None).is_ok());
        let five = plan(&wide, &wide, &pairs(&[("a", 0), ("b", 1), ("c", 2), ("d", 3), ("e", 4)]), None, JoinType::Inner, None).unwrap_err();
        assert!(five.contains("5 key words"), "{five}");
        assert!(plan(&wide, &wide, &pairs(&[("a", 0), ("b", 1), ("m", 5)]), None, JoinType::Inner, None).is_ok());
        let dec = plan(&wide, &wide, &pairs(&[("a", 0), ("b", 1), ("c", 2), ("m", 5)]), None, JoinType::Inner, None).unwrap_err();
        assert!(dec.contains("4 columns takes 5 key words"), "{dec}");
    }

    #[test]
    fn filters_become_typed_predicates_over_the_uploaded_columns() {
        let l = schema(&[("a", DataType::Int32, false), ("s", DataType::Utf8View, false), ("t", DataType::Int8, false)]);
        let r = schema(&[("b", DataType::Int32, false), ("u", DataType::Utf8, false), ("d", DataType::Decimal128(10, 2), true)]);
        let on = [(col("a", 0), col("b", 0))];
        // Filter schema: [l.t, r.u, l.s]; NOT (l.s = r.u) AND l.t >= 3.
        let fschema = Arc::new(schema(&[("t", DataType::Int8, true), ("u", DataType::Utf8, false), ("s", DataType::Utf8View, false)]));
        let indices = vec![ColumnIndex { index: 2, side: JoinSide::Left }, ColumnIndex { index: 1, side: JoinSide::Right }, ColumnIndex { index: 1, side: JoinSide::Left }];
        let not_eq: PhysicalExprRef = Arc::new(NotExpr::new(bin(col("s", 2), Operator::Eq, col("u", 1))));
        let ge = bin(col("t", 0), Operator::GtEq, Arc::new(Literal::new(ScalarValue::Int8(Some(3)))));
        let f = JoinFilter::new(bin(not_eq, Operator::And, Arc::clone(&ge)), indices.clone(), Arc::clone(&fschema));
        // Output only r.b: uploads l.a, l.s, l.t and r.b, r.u.
        let p = plan(&l, &r, &on, Some(&f), JoinType::Inner, Some(&[3])).unwrap();
        assert_eq!((p.left_cols.clone(), p.right_cols.clone()), (vec![0, 1, 2], vec![0, 1]));
        // Int8 compares as gpujoin's I32 (its lowered type); Utf8View with Utf8 as strings.
        let want = Predicate::And(vec![!col_l(1).equals(col_r(1)), col_l(2).greater_eq(lit(3i32))]);
        assert_eq!(p.predicate, Some(want));
        // OR and NOT over nullable columns translate (gpujoin evaluates SQL's three-valued
        // logic); decimals and arithmetic refuse.
        let or = JoinFilter::new(bin(Arc::clone(&ge), Operator::Or, bin(col("s", 2), Operator::Eq, col("u", 1))), indices.clone(), Arc::clone(&fschema));
        assert!(plan(&l, &r, &on, Some(&or), JoinType::Left, None).is_ok());
        let nullable_t = schema(&[("a", DataType::Int32, false), ("s", DataType::Utf8View, false), ("t", DataType::Int8, true)]);
        assert!(plan(&nullable_t, &r, &on, Some(&or), JoinType::Left, None).is_ok());
        assert!(plan(&nullable_t, &r, &on, Some(&f), JoinType::Left, None).is_ok());
        let dschema = Arc::new(schema(&[("d", DataType::Decimal128(10, 2), true)]));
        let dec = JoinFilter::new(bin(col("d", 0), Operator::Gt, Arc::new(Literal::new(ScalarValue::Decimal128(Some(5), 10, 2)))), vec![ColumnIndex { index: 2, side: JoinSide::Right }], dschema);
        assert!(plan(&l, &r, &on, Some(&dec), JoinType::Inner, None).unwrap_err().contains("Decimal128"));
        let arith = JoinFilter::new(bin(col("t", 0), Operator::Lt, bin(col("t", 0), Operator::Plus, Arc::new(Literal::new(ScalarValue::Int8(Some(1)))))), indices[..1].to_vec(), fschema);
        assert!(plan(&l, &r, &on, Some(&arith), JoinType::Inner, None).unwrap_err().contains("neither a column nor a literal"));
    }
}

/// Rows as strings for a TPC-H comparison: floats rounded to 9 significant digits, so that sums
/// in another order agree; the rest exactly as DataFusion prints them.
fn rows_to_compare(batches: &[RecordBatch]) -> Vec<String> {
    use datafusion::arrow::array::Array;
    let mut rows = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| match c.data_type() {
                    DataType::Float64 | DataType::Float32 => {
                        let v = cast(&c.slice(i, 1), &DataType::Float64).unwrap();
                        let v = v.as_any().downcast_ref::<Float64Array>().unwrap();
                        if v.is_null(0) { "NULL".into() } else { format!("{:.8e}", v.value(0)) }
                    }
                    _ => array_value_to_string(c, i).unwrap(),
                })
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    rows
}

/// TPC-H's 22 queries at SF1 (SF 0.1 with GPUJOIN_TEST_SIZE=small) give the same rows with and
/// without the rule (sorted; floats to 9 significant digits), and the rule moves joins of most.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tpch_queries_answer_the_same_with_the_rule() {
    let Some(_device) = device_or_skip("tpch_queries_answer_the_same_with_the_rule") else { return };
    let sf = gpujoin_device::testing::pick(1.0, 0.1);
    let config = SessionConfig::new().with_target_partitions(8);
    let plain = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).build());
    let gpu_state = SessionStateBuilder::new().with_default_features().with_config(config).with_gpu_joins(every_join()).build();
    let gpu = SessionContext::new_with_state(gpu_state.clone());
    let rule = GpuJoinRule::find(&gpu_state).unwrap();
    gpujoin_datafusion::tpch::register_tables(&plain, sf, 8).unwrap();
    // The same tables in both sessions.
    for t in gpujoin_datafusion::tpch::TABLES {
        gpu.register_table(t, plain.table_provider(t).await.unwrap()).unwrap();
    }
    let mut moved_queries = 0;
    let mut moved_joins = 0;
    for n in 1..=22 {
        let sql = gpujoin_datafusion::tpch::query(n).unwrap();
        let expected = plain.sql(sql).await.unwrap().collect().await.unwrap();
        rule.take_decisions();
        let got = gpu.sql(sql).await.unwrap().collect().await.unwrap_or_else(|e| panic!("Q{n} with the rule: {e}"));
        let moved = rule.take_decisions().iter().filter(|d| d.moved()).count();
        moved_joins += moved;
        moved_queries += usize::from(moved > 0);
        let (e, g) = (rows_to_compare(&expected), rows_to_compare(&got));
        assert_eq!(e.len(), g.len(), "Q{n}: row counts differ ({moved} joins on the GPU)");
        for (a, b) in e.iter().zip(&g) {
            assert_eq!(a, b, "Q{n}: rows differ ({moved} joins on the GPU)");
        }
        println!("TPC-H SF{sf} Q{n}: {} rows equal, {moved} joins on the GPU", e.len());
    }
    println!("TPC-H SF{sf}: 22 queries equal with and without the rule; {moved_queries} queries ran {moved_joins} joins on the GPU");
    assert!(moved_queries >= 10, "the rule moved joins of only {moved_queries} queries");
}

/// A plan holding `GpuJoinExec`s (equi-joins with filters, theta and cross joins, both modes)
/// survives datafusion-proto with [`GpuJoinCodec`]: the decoded plan prints the same, and on a
/// GPU answers the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_with_gpu_joins_round_trip_through_datafusion_proto() {
    use datafusion_proto::bytes::{physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec};
    use gpujoin_datafusion::GpuJoinCodec;
    let mut rng = StdRng::seed_from_u64(9);
    let (l, r) = (table(&mut rng, 300, 60, true), table(&mut rng, 200, 60, true));
    let gpu = has_device();
    let config = if gpu { every_join() } else { forced() };
    let sqls = [
        query("JOIN", "k_i32", Some("l.v < r.v"), Some("r.k_str")),
        query("LEFT JOIN", "k_str", None, Some("r.k_dec")),
        query("FULL JOIN", "k_date", Some("(l.v_nn < r.v_nn OR l.v_nn = 7)"), None),
        query("RIGHT ANTI JOIN", "k_i64", None, None),
        "SELECT l.v, r.v FROM l JOIN r ON l.v < r.v".to_string(),
        "SELECT l.v, r.v_nn FROM l CROSS JOIN r".to_string(),
    ];
    let mut round_trips = 0;
    for partitioned in [false, true] {
        // The partitioned plans gather on the device (`gather=device` in the plan's text).
        // The collect-left plans stream their probe sides in parts of 50 rows and keep 1 MiB
        // of freed device blocks (and move equi-joins whose build side may have a row or more); the
        // partitioned ones keep none.
        // The collect-left ones also read 60 probe rows ahead, reduce tables of up to 1000
        // rows by filtered inputs of up to 7 rows and share no matched-rows bitmap across partitions (as in Ballista:
        // their Left and anti joins take their probe sides in one partition).
        let (gather, probe_part_rows, device_lanes, block_cache_bytes, min_build_rows) = if partitioned { (OutputGather::Device, None, None, Some(0), Some(0)) } else { (OutputGather::Host, Some(50), Some(3), Some(1 << 20), Some(1)) };
        let (semi_join_reduction_rows, probe_prefetch_rows, semi_join_reduced_rows) = if partitioned { (None, None, None) } else { (Some(7), Some(60), Some(1000)) };
        let ctx = context(Some(GpuJoinConfig { gather, probe_part_rows, device_lanes, block_cache_bytes, min_build_rows, semi_join_reduction_rows, probe_prefetch_rows, shared_matched_rows: partitioned, semi_join_reduced_rows, ..config.clone() }), partitioned, l.clone(), r.clone()).await.unwrap();
        for sql in &sqls {
            let plan = physical_plan(&ctx, sql).await.unwrap();
            assert!(count_nodes(&plan, "GpuJoinExec") > 0, "{sql}: a GPU join to serialize\n{}", plan_text(&plan));
            let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &GpuJoinCodec).unwrap_or_else(|e| panic!("{sql}: encode: {e}"));
            let back = physical_plan_from_bytes_with_extension_codec(&bytes, &ctx.task_ctx(), &GpuJoinCodec).unwrap_or_else(|e| panic!("{sql}: decode: {e}"));
            assert_eq!(plan_text(&plan), plan_text(&back), "{sql}");
            // Every setting survives but the test-only switch, which is never serialized.
            let configs = |p| find_gpu_joins(p).into_iter().map(|j| GpuJoinConfig { force_without_gpu_for_plan_tests: false, ..j.config().clone() }).collect::<Vec<_>>();
            assert_eq!(configs(&plan), configs(&back), "{sql}: every setting survives");
            round_trips += 1;
            if gpu {
                let a = datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
                let b = datafusion::physical_plan::collect(back, ctx.task_ctx()).await.unwrap();
                assert_eq!(sorted_rows(&a), sorted_rows(&b), "{sql}: the decoded plan answers differently");
            }
        }
    }
    assert_eq!(round_trips, 2 * sqls.len());
    // A kept join's note, and a sort-merge join moved with its order restored.
    let smj = smj_context(Some(config), 4, l, r).await.unwrap();
    let sqls = [query("JOIN", "k_f16", None, None), "SELECT l.k_i32, r.v FROM l JOIN r ON l.k_i32 = r.k_i32 ORDER BY l.k_i32 NULLS FIRST".to_string()];
    for (sql, node) in sqls.iter().zip(["CpuJoinKeptExec", "GpuJoinExec"]) {
        let plan = physical_plan(&smj, sql).await.unwrap();
        assert_eq!(count_nodes(&plan, node), 1, "{sql}\n{}", plan_text(&plan));
        let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &GpuJoinCodec).unwrap_or_else(|e| panic!("{sql}: encode: {e}"));
        let back = physical_plan_from_bytes_with_extension_codec(&bytes, &smj.task_ctx(), &GpuJoinCodec).unwrap_or_else(|e| panic!("{sql}: decode: {e}"));
        assert_eq!(plan_text(&plan), plan_text(&back), "{sql}");
        if gpu {
            let a = datafusion::physical_plan::collect(Arc::clone(&plan), smj.task_ctx()).await.unwrap();
            let b = datafusion::physical_plan::collect(back, smj.task_ctx()).await.unwrap();
            assert_eq!(sorted_rows(&a), sorted_rows(&b), "{sql}: the decoded plan answers differently");
        }
    }
}

/// The plan around TPC-H's GPU joins (forced planning, SF 0.1 planned as DataFusion plans SF10,
/// 8 partitions; no GPU needed):
/// Q18's semi join on `o_orderkey` runs below both inner joins, on `orders`, and no `lineitem`
/// or `orders` rows are repartitioned by hash for a join; Q3's `lineitem` join probes
/// `lineitem` unrepartitioned and its output is repartitioned for the aggregate above, which
/// relies on that. Both plans pass DataFusion's sanity check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_joins_run_below_semi_joins_and_without_hash_repartitions() {
    use datafusion::physical_optimizer::PhysicalOptimizerRule;
    use datafusion::physical_plan::joins::PartitionMode;
    // DataFusion's `Partitioned` joins, as it plans them at SF10 (these tables are small).
    let config = SessionConfig::new()
        .with_target_partitions(8)
        .set_usize("datafusion.optimizer.hash_join_single_partition_threshold", 0)
        .set_usize("datafusion.optimizer.hash_join_single_partition_threshold_rows", 0);
    let plain = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).build());
    gpujoin_datafusion::tpch::register_tables(&plain, 0.1, 8).unwrap();
    let gpu = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).with_gpu_joins(forced()).build());
    for t in gpujoin_datafusion::tpch::TABLES {
        gpu.register_table(t, plain.table_provider(t).await.unwrap()).unwrap();
    }
    let plan_of = |n: usize| {
        let gpu = gpu.clone();
        async move {
            let (plan, _) = decide(&gpu, gpujoin_datafusion::tpch::query(n).unwrap()).await;
            let text = plan_text(&plan);
            datafusion::physical_optimizer::sanity_checker::SanityCheckPlan::new().optimize(Arc::clone(&plan), gpu.state().config_options()).unwrap_or_else(|e| panic!("Q{n}: {e}\n{text}"));
            (plan, text)
        }
    };
    // The tables whose scans a hash RepartitionExec reads, directly or through filters and
    // projections (a table by its first column's name).
    fn hashed_scans(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<String>) {
        if let Some(r) = plan.downcast_ref::<datafusion::physical_plan::repartition::RepartitionExec>() {
            if matches!(r.partitioning(), datafusion::physical_plan::Partitioning::Hash(..)) {
                let mut p = Arc::clone(r.input());
                while p.name() == "FilterExec" || p.name() == "ProjectionExec" {
                    p = Arc::clone(p.children()[0]);
                }
                if p.name() == "DataSourceExec" {
                    out.push(p.schema().field(0).name().clone());
                }
            }
        }
        for c in plan.children() {
            hashed_scans(c, out);
        }
    }

    let (q18, text) = plan_of(18).await;
    let joins = find_gpu_joins(&q18);
    let mut hashed = Vec::new();
    hashed_scans(&q18, &mut hashed);
    assert_eq!(joins.len(), 3, "{text}");
    // The semi join, below both inner joins, keeps `orders` rows (its keys are `o_orderkey`).
    let semi = joins.iter().find(|j| matches!(j.join_type(), datafusion::common::JoinType::LeftSemi | datafusion::common::JoinType::RightSemi)).unwrap_or_else(|| panic!("{text}"));
    assert!(semi.schema().field_with_name("o_orderkey").is_ok() && semi.schema().field_with_name("c_name").is_err(), "{text}");
    assert!(joins.iter().all(|j| j.mode() == PartitionMode::CollectLeft), "{text}");
    assert!(!hashed.iter().any(|t| t.starts_with("l_") || t.starts_with("o_")), "{hashed:?} repartitioned by hash for a join:\n{text}");

    let (q3, text) = plan_of(3).await;
    let joins = find_gpu_joins(&q3);
    assert_eq!(joins.len(), 2, "{text}");
    assert!(joins.iter().all(|j| j.mode() == PartitionMode::CollectLeft), "{text}");
    let top = joins[0];
    assert!(top.replaces().is_some_and(|r| r.contains("output repartitioned")), "{text}");
    let mut hashed = Vec::new();
    hashed_scans(&q3, &mut hashed);
    assert!(!hashed.iter().any(|t| t.starts_with("l_")), "{hashed:?} repartitioned by hash for a join:\n{text}");
    assert!(text.contains("AggregateExec: mode=SinglePartitioned"), "{text}");
    // Each join's probe side tested against its build keys where it is read: `lineitem` first
    // in its date filter, `orders` likewise; the joins set the keys.
    for (j, probe_filter) in joins.iter().zip(["FilterExec: l_orderkey@0 IN build_keys#", "FilterExec: o_custkey@1 IN build_keys#"]) {
        let id = j.build_keys().unwrap_or_else(|| panic!("{text}")).id();
        assert!(text.contains(&format!("build_keys=#{id}")) && text.contains(&format!("{probe_filter}{id} AND ")), "{probe_filter}{id}:\n{text}");
    }
    // Not with probe rows read ahead, nor with them off.
    for config in [GpuJoinConfig { probe_prefetch_rows: Some(1000), ..forced() }, GpuJoinConfig { probe_key_filters: false, ..forced() }] {
        let off = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config_of(&gpu)).with_gpu_joins(config).build());
        for t in gpujoin_datafusion::tpch::TABLES {
            off.register_table(t, plain.table_provider(t).await.unwrap()).unwrap();
        }
        let (plan, _) = decide(&off, gpujoin_datafusion::tpch::query(3).unwrap()).await;
        assert!(!plan_text(&plan).contains("build_keys"), "{}", plan_text(&plan));
    }

    // With the default `min_build_rows`, Q5's, Q7's, Q9's and Q21's `supplier JOIN ...` stays on the CPU
    // (a build side of 1,000 rows here, 100,000 at SF10) as DataFusion's `CollectLeft` join:
    // `lineitem` is not repartitioned by hash for it (Q7: for any join).
    let kept = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config).with_gpu_joins(GpuJoinConfig { min_build_rows: None, ..forced() }).build());
    for t in gpujoin_datafusion::tpch::TABLES {
        kept.register_table(t, plain.table_provider(t).await.unwrap()).unwrap();
    }
    // Q5's and Q9's probe a join's output (no row estimate): the same, a build side that small
    // is collected whatever the probe side.
    for n in [5, 7, 9, 21] {
        let (plan, _) = decide(&kept, gpujoin_datafusion::tpch::query(n).unwrap()).await;
        let text = plan_text(&plan);
        datafusion::physical_optimizer::sanity_checker::SanityCheckPlan::new().optimize(Arc::clone(&plan), kept.state().config_options()).unwrap_or_else(|e| panic!("Q{n}: {e}\n{text}"));
        assert!(text.contains("CollectLeft on the inputs before their hash repartitions"), "Q{n}:\n{text}");
        assert!(text.contains("HashJoinExec: mode=CollectLeft, join_type=Inner, on=[(s_suppkey@0, l_suppkey@"), "Q{n}:\n{text}");
        // (Q21's semi and anti joins of `lineitem` with itself, with their filters, keep theirs.)
        if n == 7 {
            let mut hashed = Vec::new();
            hashed_scans(&plan, &mut hashed);
            assert!(!hashed.iter().any(|t| t.starts_with("l_")), "Q{n}: {hashed:?} repartitioned by hash for a join:\n{text}");
        }
    }
}

/// `EXPLAIN` text with each probe-side test against a join's build keys as `true` and the
/// joins' `build_keys=#<id>` left out: a plan as it decodes from datafusion-proto.
fn without_build_keys(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut line = line.to_string();
        if let Some(at) = line.find(", build_keys=#") {
            let end = line[at + 2..].find(", ").map_or(line.len(), |e| at + 2 + e);
            line.replace_range(at..end, "");
        }
        if let (Some(f), Some(k)) = (line.find("FilterExec: "), line.find(" IN build_keys#")) {
            let start = f + "FilterExec: ".len();
            let id_end = line[k + " IN build_keys#".len()..].find(|c: char| !c.is_ascii_digit()).map_or(line.len(), |e| k + " IN build_keys#".len() + e);
            line.replace_range(start..id_end, "true");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The session config of `ctx`.
fn config_of(ctx: &SessionContext) -> SessionConfig {
    ctx.state().config().clone()
}

/// The right semi joins of `plan` (DataFusion's own and reductions: `KeyFilterExec`s, or with
/// `with_hash_joins` `RightSemi` hash joins), each once: not those in the build side of
/// another, where a reduction by a reduced input copies that input's.
fn reductions(plan: &Arc<dyn ExecutionPlan>) -> usize {
    if let Some(k) = plan.downcast_ref::<gpujoin_datafusion::KeyFilterExec>() {
        return 1 + reductions(k.input());
    }
    match plan.downcast_ref::<datafusion::physical_plan::joins::HashJoinExec>() {
        Some(h) if h.join_type == datafusion::common::JoinType::RightSemi => 1 + reductions(&h.right),
        _ => plan.children().into_iter().map(reductions).sum::<usize>(),
    }
}

/// Semi-join reductions (no GPU needed): DataFusion with `SemiJoinReduction` gives the same rows
/// as without on joins of tables with NULL keys through inner joins, the kept side of left joins,
/// `IS NOT DISTINCT FROM` keys and keys under projections; a reduction is inserted where the
/// module docs say (and nowhere else), and a second run of the rule changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semi_join_reductions_answer_like_datafusion() {
    use datafusion::physical_optimizer::PhysicalOptimizerRule;
    use gpujoin_datafusion::SemiJoinReduction;
    let config = SessionConfig::new().with_target_partitions(3).with_batch_size(512);
    let plain = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).build());
    let reduced = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).with_physical_optimizer_rule(Arc::new(SemiJoinReduction::default())).build());
    let hashed = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config).with_physical_optimizer_rule(Arc::new(SemiJoinReduction::default().with_hash_joins(true))).build());
    // big: 6000 rows, k NULL in every 7th row; mid: 400 rows; small: 40 rows, k NULL in every 9th.
    let tables = [
        "CREATE TABLE big AS SELECT value AS id, value % 50 AS x, CASE WHEN value % 7 = 0 THEN NULL ELSE value % 13 END AS k FROM generate_series(1, 6000)",
        "CREATE TABLE mid AS SELECT value AS mid_id, CASE WHEN value % 5 = 0 THEN NULL ELSE value % 13 END AS k, value % 3 AS g FROM generate_series(1, 400)",
        "CREATE TABLE small AS SELECT value % 50 AS x, value AS f, CASE WHEN value % 9 = 0 THEN NULL ELSE value % 13 END AS k FROM generate_series(1, 40)",
    ];
    for ctx in [&plain, &reduced, &hashed] {
        for sql in tables {
            ctx.sql(sql).await.unwrap().collect().await.unwrap();
        }
    }
    // (query, semi joins expected)
    let cases = [
        // `small` (filtered) keeps 4 values of x: `big` reduced below its join with `mid`.
        ("SELECT b.id, m.mid_id, s.f FROM big b JOIN mid m ON b.k = m.k JOIN small s ON b.x = s.x WHERE s.f < 5", 1),
        // The kept side of a left join.
        ("SELECT b.id, m.mid_id, s.f FROM big b LEFT JOIN mid m ON b.k = m.k JOIN small s ON b.x = s.x WHERE s.f < 5", 1),
        // Keys that are NULL on both sides, IS NOT DISTINCT FROM.
        ("SELECT b.id, m.mid_id, s.f FROM big b JOIN mid m ON b.x = m.mid_id % 50 JOIN small s ON b.k IS NOT DISTINCT FROM s.k WHERE s.f > 30", 1),
        // The same with plain equality: NULL keys meet nothing.
        ("SELECT b.id, m.mid_id, s.f FROM big b JOIN mid m ON b.x = m.mid_id % 50 JOIN small s ON b.k = s.k WHERE s.f > 30", 1),
        // Through a projection of the key and an aggregate above.
        ("SELECT s.f, count(*) FROM (SELECT b.x AS bx, m.g FROM big b JOIN mid m ON b.k = m.k) t JOIN small s ON t.bx = s.x WHERE s.f BETWEEN 3 AND 9 GROUP BY s.f", 1),
        // An unfiltered small input reduces nothing.
        ("SELECT b.id, m.mid_id, s.f FROM big b JOIN mid m ON b.k = m.k JOIN small s ON b.x = s.x", 0),
        // No join between the small input and the table: the join itself filters.
        ("SELECT b.id, s.f FROM big b JOIN small s ON b.x = s.x WHERE s.f < 5", 0),
        // A key from the null-filled side of a left join is not followed.
        ("SELECT m.mid_id, b.id FROM mid m LEFT JOIN big b ON m.k = b.k JOIN small s ON m.mid_id % 50 = s.x WHERE s.f < 5", 0),
    ];
    for (sql, expected) in cases {
        let want = plain.sql(sql).await.unwrap().collect().await.unwrap();
        // As `KeyFilterExec`s, and as DataFusion's hash joins.
        for (ctx, by, node) in [(&reduced, SemiJoinReduction::default(), "KeyFilterExec"), (&hashed, SemiJoinReduction::default().with_hash_joins(true), "RightSemi")] {
            let df = ctx.sql(sql).await.unwrap();
            let plan = df.clone().create_physical_plan().await.unwrap();
            let text = plan_text(&plan);
            assert_eq!(reductions(&plan), expected, "{sql}\n{text}");
            assert_eq!(text.matches(node).count(), expected, "{sql}\n{text}");
            let got = df.collect().await.unwrap();
            assert_eq!(sorted_rows(&want), sorted_rows(&got), "{sql}\n{text}");
            // A second run over its own output changes nothing.
            let again = by.optimize(Arc::clone(&plan), ctx.state().config_options()).unwrap();
            assert_eq!(plan_text(&again), text, "{sql}");
        }
    }
    // With no rows allowed, nothing moves.
    let (_, plan) = run(&plain, cases[0].0).await.unwrap();
    let none = SemiJoinReduction::new(0).optimize(Arc::clone(&plan), plain.state().config_options()).unwrap();
    assert_eq!(plan_text(&none), plan_text(&plan));
    // `big` (6000 rows) is reduced only where tables of that many rows may be.
    for (most, expected) in [(5999, 0), (6000, 1)] {
        let capped = SemiJoinReduction::default().with_max_reduced_rows(most).optimize(Arc::clone(&plan), plain.state().config_options()).unwrap();
        assert_eq!(reductions(&capped), expected, "{most}: {}", plan_text(&capped));
    }
}

/// Semi-join reductions on TPC-H (SF 0.1, no GPU needed): the 22 queries give the same rows with
/// `SemiJoinReduction` as without; Q7 reduces `supplier` and `customer` by its two nations,
/// Q21 `supplier` by its nation, Q10 (every nation) nothing. With the GPU rule (forced planning)
/// the reductions are there with their note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semi_join_reductions_answer_tpch_like_datafusion() {
    use gpujoin_datafusion::SemiJoinReduction;
    let config = SessionConfig::new().with_target_partitions(4);
    let plain = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).build());
    gpujoin_datafusion::tpch::register_tables(&plain, 0.1, 4).unwrap();
    let reduced = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).with_physical_optimizer_rule(Arc::new(SemiJoinReduction::default())).build());
    let gpu = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).with_gpu_joins(GpuJoinConfig { min_build_rows: None, ..forced() }).build());
    let gpu_capped = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config).with_gpu_joins(GpuJoinConfig { min_build_rows: None, semi_join_reduced_rows: Some(100_000), ..forced() }).build());
    for t in gpujoin_datafusion::tpch::TABLES {
        reduced.register_table(t, plain.table_provider(t).await.unwrap()).unwrap();
        gpu.register_table(t, plain.table_provider(t).await.unwrap()).unwrap();
        gpu_capped.register_table(t, plain.table_provider(t).await.unwrap()).unwrap();
    }
    let mut total = 0;
    for n in 1..=22 {
        let sql = gpujoin_datafusion::tpch::query(n).unwrap();
        let want = plain.sql(sql).await.unwrap().collect().await.unwrap();
        let df = reduced.sql(sql).await.unwrap();
        let plan = df.clone().create_physical_plan().await.unwrap();
        let text = plan_text(&plan);
        let got = df.collect().await.unwrap();
        assert_eq!(rows_to_compare(&want), rows_to_compare(&got), "Q{n}\n{text}");
        // DataFusion plans right semi joins of its own (Q4's EXISTS).
        let r = reductions(&plan) - reductions(&physical_plan(&plain, sql).await.unwrap());
        total += r;
        // Reductions cascade: Q5's `region` reduces `nation`, which reduces `supplier` and
        // `customer`; the reduced `supplier` reduces `lineitem` and (by nation) `customer`.
        // Q7's nations reduce `supplier` and `customer`, and the reduced `customer` (1,500
        // rows at SF0.1) reduces `orders`.
        let expected = match n {
            5 => Some(5),
            7 => Some(3),
            21 => Some(1),
            10 => Some(0),
            _ => None,
        };
        if let Some(e) = expected {
            assert_eq!(r, e, "Q{n}\n{text}");
        }
        println!("TPC-H SF0.1 Q{n}: {} rows equal, {r} semi-join reductions", want.iter().map(RecordBatch::num_rows).sum::<usize>());
        if n == 5 {
            // The reductions (`KeyFilterExec`s under their notes) survive datafusion-proto.
            use datafusion_proto::bytes::{physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec};
            let (plan, _) = decide(&gpu, sql).await;
            assert!(count_nodes(&plan, "KeyFilterExec") >= 5, "{}", plan_text(&plan));
            let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &gpujoin_datafusion::GpuJoinCodec).unwrap();
            let back = physical_plan_from_bytes_with_extension_codec(&bytes, &gpu.task_ctx(), &gpujoin_datafusion::GpuJoinCodec).unwrap();
            // The probe side's test against the join's build keys decodes as `true` (the keys
            // are shared in memory).
            assert!(plan_text(&plan).contains(" IN build_keys#"), "{}", plan_text(&plan));
            assert_eq!(without_build_keys(&plan_text(&plan)), plan_text(&back));
            // The GPU rule reduces tables of up to `semi_join_reduced_rows` (2^24 by default):
            // `lineitem` (600,000 rows at SF0.1) by the reduced `supplier`, unless the bound is
            // lower; `customer` (15,000) either way.
            let (plan, _) = decide(&gpu, sql).await;
            let text = plan_text(&plan);
            assert!(text.contains("only the rows whose l_suppkey") && text.contains("only the rows whose c_nationkey"), "{text}");
            let (plan, _) = decide(&gpu_capped, sql).await;
            let text = plan_text(&plan);
            assert!(!text.contains("only the rows whose l_suppkey") && text.contains("only the rows whose c_nationkey"), "{text}");
        }
        if n == 7 {
            let (plan, _) = decide(&gpu, sql).await;
            let text = plan_text(&plan);
            for key in ["s_nationkey", "c_nationkey", "o_custkey"] {
                assert!(text.contains(&format!("semi-join reduction: only the rows whose {key}")), "{key}: {text}");
            }
        }
    }
    println!("TPC-H SF0.1: 22 queries equal with semi-join reductions ({total} in all)");
}
