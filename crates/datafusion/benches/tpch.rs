//! TPC-H with and without `GpuJoinRule` (issue 12's speed targets).
//!
//! Tables are generated in process (tpchgen) at `GPUJOIN_TPCH_SF` (default 10) and held in
//! memory, one partition per core (`GPUJOIN_TPCH_PARTITIONS` sets another count). For each query of `GPUJOIN_TPCH_QUERIES` (default the
//! join-heavy 3,5,7,8,9,10,18,21; `all` for the 22): one warm-up run in each session, then
//! `GPUJOIN_TPCH_REPS` (default 3) runs of each, alternating, wall-clock medians. One more run of
//! each with the physical plan kept gives the join operators' own time from their metrics (as
//! `EXPLAIN ANALYZE` shows it, summed over partitions): `elapsed_compute` of the CPU joins and of
//! the `GpuJoinExec`s, the latter split into upload / join / download / host gather. The answers
//! of both sessions are compared (sorted rows). That run also gives every operator's summed
//! `elapsed_compute` over the partitions times its wall time: the share of the cores the plan kept
//! busy ("cores busy"; in-memory scans record none). `GPUJOIN_TPCH_GATHER` names where the GPU joins
//! gather their output columns: `host` (the default), `device` (CSV group
//! `tpch_sf{SF}_device_gather`) or `host,device` (both in turn, on the same tables; each against
//! plain DataFusion runs of its own). `GPUJOIN_TPCH_PROBE_PARTS` sets the GPU joins' streamed
//! probe parts (`GpuJoinConfig::probe_part_rows`): `auto` (the default), `whole` (each probe
//! partition at once, CSV group `tpch_sf{SF}_whole_probe`), a row count, or several of these
//! separated by commas (each gather with each in turn). `GPUJOIN_TPCH_HOST_WAIT` sets how host
//! threads wait for the device (`gpujoin_device::HostWait`: `auto`, `spin`, `yield`, `block`, or
//! several separated by commas, each variant with each in turn; CSV group suffix `_<wait>_wait`);
//! unset, the device's setting is left as it is. `GPUJOIN_TPCH_DEVICE_LANES` sets
//! `GpuJoinConfig::device_lanes` (a count, `auto` for the default, or several separated by commas;
//! CSV group suffix `_<n>_lanes`). `GPUJOIN_TPCH_BLOCK_CACHE` sets
//! `GpuJoinConfig::block_cache_bytes` likewise (bytes, `auto` for the default, or several; CSV
//! group suffix `_<n>_block_cache`). `GPUJOIN_TPCH_MIN_BUILD_ROWS` sets
//! `GpuJoinConfig::min_build_rows` likewise (rows; CSV group suffix `_<n>_min_build`).
//! `GPUJOIN_TPCH_COLLECT_BUILD_ROWS` sets `GpuJoinConfig::collect_build_rows` likewise (rows, 0
//! for never; CSV group suffix `_<n>_collect_build`). `GPUJOIN_TPCH_GATHER_BATCHES` sets
//! `GpuJoinConfig::parallel_gather_batches` likewise (CSV group suffix `_<n>_gather_batches`).
//! `GPUJOIN_TPCH_SEMI_REDUCTION_ROWS` sets `GpuJoinConfig::semi_join_reduction_rows` likewise
//! (rows, 0 for none; CSV group suffix `_<n>_semi_reduction`), `GPUJOIN_TPCH_PREFETCH_ROWS`
//! `GpuJoinConfig::probe_prefetch_rows` (rows, 0 for none; `_<n>_prefetch`),
//! `GPUJOIN_TPCH_SHARED_MATCHED_ROWS` `GpuJoinConfig::shared_matched_rows` (0 off, 1 on;
//! `_<n>_shared_matched_rows`), `GPUJOIN_TPCH_SEMI_REDUCED_ROWS`
//! `GpuJoinConfig::semi_join_reduced_rows` (rows; `_<n>_semi_reduced`),
//! `GPUJOIN_TPCH_SEMI_HASH_JOINS` 1 for the reductions as DataFusion's `RightSemi` hash joins
//! (`SemiJoinReduction::with_hash_joins`, run after the rule with its settings), 0 as
//! `KeyFilterExec`s, the default (`_<n>_semi_hash_joins`), `GPUJOIN_TPCH_PROBE_KEY_FILTERS`
//! `GpuJoinConfig::probe_key_filters` (0 off, 1 on; `_<n>_probe_key_filters`).
//!
//! With `GPUJOIN_TPCH_DUCKDB_DIR` set, the generated tables are also written there for DuckDB
//! (`benches/duckdb_tpch.py` runs the same queries on them, on the same machine): each table as
//! CSV files in `DIR/<table>/`, `DIR/schema.sql` creating the tables with the Arrow schema's
//! types, and the chosen queries' SQL as `DIR/q<N>.sql`.
//!
//! With `GPUJOIN_TPCH_EXPLAIN_DIR` set, each query's plan with its metrics (as `EXPLAIN ANALYZE`
//! shows them) from one more run in each session goes to `DIR/q<N>_plain.txt` and
//! `DIR/q<N>_<variant>.txt`.
//!
//! Prints a table; appends CSV rows (`group,case,ms_median,floor_ms,device,commit`; no byte floor
//! here) to `GPUJOIN_BENCH_CSV` when set.

use std::time::Instant;

use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use gpujoin_datafusion::{tpch, GpuJoinConfig, OutputGather, SemiJoinReduction, SessionStateBuilderExt};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sf: f64 = std::env::var("GPUJOIN_TPCH_SF").ok().and_then(|v| v.parse().ok()).unwrap_or(10.0);
    let reps: usize = std::env::var("GPUJOIN_TPCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(1);
    let queries: Vec<usize> = match std::env::var("GPUJOIN_TPCH_QUERIES").ok().as_deref() {
        None | Some("") => tpch::JOIN_HEAVY.to_vec(),
        Some("all") => (1..=22).collect(),
        Some(list) => list.split(',').map(|q| q.trim().parse().expect("GPUJOIN_TPCH_QUERIES: numbers")).collect(),
    };
    let cores = std::env::var("GPUJOIN_TPCH_PARTITIONS").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4));
    let device = gpujoin_device::Device::new(0).ok();
    let device_name = device.as_ref().and_then(|d| d.name().ok()).unwrap_or_else(|| "no GPU".into());
    let commit = std::env::var("GPUJOIN_COMMIT").unwrap_or_default();
    let gathers: Vec<OutputGather> = std::env::var("GPUJOIN_TPCH_GATHER")
        .unwrap_or_else(|_| "host".into())
        .split(',')
        .map(|g| match g.trim() {
            "host" => OutputGather::Host,
            "device" => OutputGather::Device,
            other => panic!("GPUJOIN_TPCH_GATHER: host, device or both separated by a comma, not {other:?}"),
        })
        .collect();
    let probe_parts: Vec<Option<usize>> = std::env::var("GPUJOIN_TPCH_PROBE_PARTS")
        .unwrap_or_else(|_| "auto".into())
        .split(',')
        .map(|p| match p.trim() {
            "auto" => None,
            "whole" => Some(usize::MAX),
            n => Some(n.parse().expect("GPUJOIN_TPCH_PROBE_PARTS: auto, whole or a row count")),
        })
        .collect();
    let name_parts = |p: Option<usize>| match p {
        None => "auto".to_string(),
        Some(usize::MAX) => "whole".to_string(),
        Some(n) => n.to_string(),
    };
    let host_waits: Vec<Option<gpujoin_device::HostWait>> = match std::env::var("GPUJOIN_TPCH_HOST_WAIT") {
        Err(_) => vec![None],
        Ok(list) => list.split(',').map(|w| Some(gpujoin_device::HostWait::parse(w).expect("GPUJOIN_TPCH_HOST_WAIT: auto, spin, yield or block"))).collect(),
    };
    // Every combination of the numeric settings' variants, in `NUMERIC`'s order.
    let numeric: Vec<[Option<usize>; NUMERIC.len()]> = NUMERIC.iter().enumerate().fold(vec![[None; NUMERIC.len()]], |combos, (i, &(var, _, _))| {
        combos.iter().flat_map(|c| numbers_or_auto(var).into_iter().map(move |v| { let mut c = *c; c[i] = v; c })).collect()
    });
    println!("TPC-H SF{sf}, {cores} partitions, {reps} runs after a warm-up, output gathered on the {gathers:?}, probe parts {:?}, device: {device_name}", probe_parts.iter().map(|&p| name_parts(p)).collect::<Vec<_>>());

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let config = SessionConfig::new().with_target_partitions(cores);
        let plain = SessionContext::new_with_state(SessionStateBuilder::new().with_default_features().with_config(config.clone()).build());
        let t = Instant::now();
        let rows = tpch::register_tables(&plain, sf, cores).unwrap();
        println!("generated {rows:?} in {:.1} s", t.elapsed().as_secs_f64());
        if let Ok(dir) = std::env::var("GPUJOIN_TPCH_DUCKDB_DIR") {
            let t = Instant::now();
            write_for_duckdb(&plain, std::path::Path::new(&dir), &queries).await;
            println!("wrote the tables and queries for DuckDB to {dir} in {:.1} s", t.elapsed().as_secs_f64());
        }

        let mut csv = Vec::new();
        let variants = gathers
            .iter()
            .flat_map(|&g| probe_parts.iter().map(move |&p| (g, p)))
            .flat_map(|(g, p)| host_waits.iter().map(move |&w| (g, p, w)))
            .flat_map(|(g, p, w)| numeric.iter().map(move |&n| (g, p, w, n)));
        for (gather, probe_part_rows, host_wait, n) in variants {
            let [device_lanes, block_cache_bytes, min_build_rows, collect_build_rows, parallel_gather_batches, semi_join_reduction_rows, probe_prefetch_rows, shared, semi_join_reduced_rows, semi_hash_joins, key_filters] = n;
            let probe_key_filters = key_filters.is_none_or(|v| v != 0);
            let shared_matched_rows = shared.is_none_or(|v| v != 0);
            if let (Some(wait), Some(device)) = (host_wait, &device) {
                device.set_host_wait(wait).unwrap();
                println!("host threads wait for the device: {:?}", device.host_wait().unwrap());
            }
            let gpu_config = GpuJoinConfig { gather, probe_part_rows, device_lanes, block_cache_bytes, min_build_rows, collect_build_rows, parallel_gather_batches, semi_join_reduction_rows, probe_prefetch_rows, shared_matched_rows, semi_join_reduced_rows, probe_key_filters, ..GpuJoinConfig::default() };
            let gpu_state = if semi_hash_joins.is_some_and(|v| v != 0) {
                // The same reductions, after the rule, as hash joins.
                let by = SemiJoinReduction::new(gpu_config.semi_join_reduction_rows()).with_max_reduced_rows(gpu_config.semi_join_reduced_rows()).with_hash_joins(true);
                let rule = GpuJoinConfig { semi_join_reduction_rows: Some(0), ..gpu_config };
                SessionStateBuilder::new().with_default_features().with_config(config.clone()).with_gpu_joins(rule).with_physical_optimizer_rule(std::sync::Arc::new(by)).build()
            } else {
                SessionStateBuilder::new().with_default_features().with_config(config.clone()).with_gpu_joins(gpu_config).build()
            };
            let gpu = SessionContext::new_with_state(gpu_state);
            for t in tpch::TABLES {
                gpu.register_table(t, plain.table_provider(t).await.unwrap()).unwrap();
            }
            let shown = GpuJoinConfig { device_lanes, block_cache_bytes, min_build_rows, collect_build_rows, parallel_gather_batches, semi_join_reduction_rows, probe_prefetch_rows, ..GpuJoinConfig::default() };
            println!(
                "output gathered on the {gather:?}, probe parts {}, device lanes {}, block cache {} bytes, equi-joins of build sides under {} rows kept, partitioned joins of build sides up to {} rows without their repartitions, {} output batches gathered at once, semi-join reductions by filtered inputs of up to {} rows, {} probe rows read while the build side is collected",
                name_parts(probe_part_rows),
                shown.device_lanes(),
                shown.block_cache_bytes(),
                shown.min_build_rows(),
                shown.collect_build_rows(),
                shown.parallel_gather_batches(),
                shown.semi_join_reduction_rows(),
                shown.probe_prefetch_rows()
            );
            let (mut sum_plain, mut sum_gpu) = (0.0, 0.0);
            println!("query | plain ms | gpu rule ms | speed-up | joins moved | CPU join ms (plain) | GpuJoinExec ms (upload / join / download / host gather) | join speed-up | lane wait ms | device joins: each one's calls, waits, allocations (count / ms) | cores busy plain / rule | answers");
            for &q in &queries {
                let r = tpch::compare(&plain, &gpu, q, reps).await.unwrap();
                let (mp, mg, jp, jg) = (r.plain_ms, r.gpu_ms, r.plain_joins, r.gpu_joins);
                sum_plain += mp;
                sum_gpu += mg;
                let replaced_cpu_ms = r.replaced_cpu_ms();
                let join_speedup = if jg.gpu_ms > 0.0 { replaced_cpu_ms / jg.gpu_ms } else { f64::NAN };
                // The operators' compute over the cores the run had (the plan-kept runs).
                let busy = |t: &tpch::JoinTimes| if t.wall_ms > 0.0 { 100.0 * t.operators_ms / (cores as f64 * t.wall_ms) } else { f64::NAN };
                // A sum over the GPU joins' device joins, per device join.
                let each = |total: f64| total / jg.device_joins.max(1) as f64;
                println!(
                    "Q{q} | {mp:.1} | {mg:.1} | {:.2}x | {} of {} | {:.1} | {:.1} ({:.1} / {:.1} / {:.1} / {:.1}) | {join_speedup:.1}x | {:.1} | {}: {:.1} / {:.2}, {:.1} / {:.2}, {:.1} / {:.2} | {:.0}% / {:.0}% | {}",
                    mp / mg,
                    r.moved,
                    r.joins,
                    jp.cpu_ms,
                    jg.gpu_ms,
                    jg.upload_ms,
                    jg.join_ms,
                    jg.download_ms,
                    jg.gather_ms,
                    jg.lane_wait_ms,
                    jg.device_joins,
                    each(jg.device_calls as f64),
                    each(jg.device_call_ms),
                    each(jg.host_waits as f64),
                    each(jg.host_wait_ms),
                    each(jg.device_allocs as f64),
                    each(jg.pool_call_ms),
                    busy(&jp),
                    busy(&jg),
                    if r.same { "equal" } else { "DIFFER" }
                );
                let mut group = if gather == OutputGather::Device { format!("tpch_sf{sf}_device_gather") } else { format!("tpch_sf{sf}") };
                if probe_part_rows.is_some() {
                    group = format!("{group}_{}_probe", name_parts(probe_part_rows));
                }
                if let Some(wait) = host_wait {
                    group = format!("{group}_{}_wait", wait.name());
                }
                for (i, &(_, suffix, _)) in NUMERIC.iter().enumerate() {
                    if let Some(v) = n[i] {
                        group = format!("{group}_{v}_{suffix}");
                    }
                }
                for (case, ms) in [
                    ("plain", mp),
                    ("gpu_rule", mg),
                    ("cpu_join_compute", jp.cpu_ms),
                    ("replaced_cpu_join_compute", replaced_cpu_ms),
                    ("gpu_join_compute", jg.gpu_ms),
                    ("gpu_join_upload", jg.upload_ms),
                    ("gpu_join_join", jg.join_ms),
                    ("gpu_join_download", jg.download_ms),
                    ("gpu_join_host_gather", jg.gather_ms),
                    ("gpu_join_lane_wait", jg.lane_wait_ms),
                    ("gpu_join_host_wait", jg.host_wait_ms),
                    ("gpu_join_device_calls", jg.device_call_ms),
                    ("gpu_join_pool_calls", jg.pool_call_ms),
                    ("plain_operators_compute", jp.operators_ms),
                    ("gpu_operators_compute", jg.operators_ms),
                ] {
                    csv.push(format!("{group},q{q}_{case},{ms:.3},,{device_name},{commit}"));
                }
                assert!(r.same, "Q{q}: the answers differ with the rule");
                if let Ok(dir) = std::env::var("GPUJOIN_TPCH_EXPLAIN_DIR") {
                    let dir = std::path::Path::new(&dir);
                    std::fs::create_dir_all(dir).unwrap();
                    let wait = host_wait.map(|w| format!("_{}", w.name())).unwrap_or_default();
                    let numbers: String = NUMERIC.iter().zip(n).filter_map(|(&(_, _, short), v)| v.map(|v| format!("_{v}{short}"))).collect();
                    let variant = format!("{}_{}{wait}{numbers}", if gather == OutputGather::Device { "device" } else { "host" }, name_parts(probe_part_rows));
                    for (ctx, name) in [(&plain, "plain".to_string()), (&gpu, variant)] {
                        std::fs::write(dir.join(format!("q{q}_{name}.txt")), analyzed_plan(ctx, q).await).unwrap();
                    }
                }
            }
            println!("together: plain {sum_plain:.1} ms, with the rule {sum_gpu:.1} ms ({:.2}x)", sum_plain / sum_gpu);
            // Each variant's rows as it ends, so that a run cut short keeps the variants it ran.
            write_csv(std::mem::take(&mut csv));
        }
    });
}

/// The numeric settings a run varies: the environment variable, the CSV group's suffix
/// (`_<n>_<suffix>`) and the `EXPLAIN` file name's (`_<n><short>`), in the order of the fields
/// they set in `main`.
const NUMERIC: [(&str, &str, &str); 11] = [
    ("GPUJOIN_TPCH_DEVICE_LANES", "lanes", "lanes"),
    ("GPUJOIN_TPCH_BLOCK_CACHE", "block_cache", "cache"),
    ("GPUJOIN_TPCH_MIN_BUILD_ROWS", "min_build", "minbuild"),
    ("GPUJOIN_TPCH_COLLECT_BUILD_ROWS", "collect_build", "collect"),
    ("GPUJOIN_TPCH_GATHER_BATCHES", "gather_batches", "gatherbatches"),
    ("GPUJOIN_TPCH_SEMI_REDUCTION_ROWS", "semi_reduction", "semireduction"),
    ("GPUJOIN_TPCH_PREFETCH_ROWS", "prefetch", "prefetch"),
    // 0: `shared_matched_rows` off (a CollectLeft Left/Full/semi/anti join probes one partition).
    ("GPUJOIN_TPCH_SHARED_MATCHED_ROWS", "shared_matched_rows", "sharedmatched"),
    ("GPUJOIN_TPCH_SEMI_REDUCED_ROWS", "semi_reduced", "semireduced"),
    // 1: the reductions as hash joins (`SemiJoinReduction::with_hash_joins`).
    ("GPUJOIN_TPCH_SEMI_HASH_JOINS", "semi_hash_joins", "semihash"),
    // 0: no probe-side filters by the joins' build keys.
    ("GPUJOIN_TPCH_PROBE_KEY_FILTERS", "probe_key_filters", "keyfilters"),
];

/// The variants of a numeric setting from the environment variable `var`: numbers, or `auto`
/// for the default (`None`), separated by commas; unset, the default alone.
///
/// Example: `GPUJOIN_TPCH_DEVICE_LANES=auto,2` gives `[None, Some(2)]`.
fn numbers_or_auto(var: &str) -> Vec<Option<usize>> {
    match std::env::var(var) {
        Err(_) => vec![None],
        Ok(list) => list.split(',').map(|n| match n.trim() { "auto" => None, n => Some(n.parse().unwrap_or_else(|_| panic!("{var}: numbers or auto, not {n:?}"))) }).collect(),
    }
}

/// Appends `rows` to `GPUJOIN_BENCH_CSV` when set (its header first when the file is new).
fn write_csv(rows: Vec<String>) {
    if let Ok(path) = std::env::var("GPUJOIN_BENCH_CSV") {
        use std::io::Write;
        let new = !std::path::Path::new(&path).exists();
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
        if new {
            writeln!(f, "group,case,ms_median,floor_ms,device,commit").unwrap();
        }
        for r in rows {
            writeln!(f, "{r}").unwrap();
        }
    }
}

/// The tables of `ctx` as CSV files under `dir/<table>/` (one file per partition, with a header),
/// `dir/schema.sql` creating them with the SQL types of their Arrow schemas, and `queries` as
/// `dir/q<N>.sql`.
async fn write_for_duckdb(ctx: &SessionContext, dir: &std::path::Path, queries: &[usize]) {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::dataframe::DataFrameWriteOptions;
    std::fs::create_dir_all(dir).unwrap();
    let mut ddl = String::new();
    for t in tpch::TABLES {
        let df = ctx.table(t).await.unwrap();
        let columns: Vec<String> = df
            .schema()
            .fields()
            .iter()
            .map(|f| {
                let ty = match f.data_type() {
                    DataType::Int64 => "BIGINT".to_string(),
                    DataType::Int32 => "INTEGER".to_string(),
                    DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
                    DataType::Date32 => "DATE".to_string(),
                    DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => "VARCHAR".to_string(),
                    DataType::Float64 => "DOUBLE".to_string(),
                    other => panic!("{t}.{}: no SQL type for {other}", f.name()),
                };
                format!("{} {ty}", f.name())
            })
            .collect();
        ddl += &format!("CREATE TABLE {t} ({});\n", columns.join(", "));
        let path = dir.join(t);
        df.write_csv(&format!("{}/", path.display()), DataFrameWriteOptions::new(), None).await.unwrap();
    }
    std::fs::write(dir.join("schema.sql"), ddl).unwrap();
    for &q in queries {
        std::fs::write(dir.join(format!("q{q}.sql")), tpch::query(q).unwrap()).unwrap();
    }
}

/// TPC-H query `q` run once in `ctx`, its physical plan with each operator's metrics.
async fn analyzed_plan(ctx: &SessionContext, q: usize) -> String {
    use datafusion::physical_plan::display::DisplayableExecutionPlan;
    let t = Instant::now();
    let plan = ctx.sql(tpch::query(q).unwrap()).await.unwrap().create_physical_plan().await.unwrap();
    datafusion::physical_plan::collect(std::sync::Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    format!("Q{q}: {:.1} ms\n{}", t.elapsed().as_secs_f64() * 1e3, DisplayableExecutionPlan::with_metrics(plan.as_ref()).indent(true))
}
