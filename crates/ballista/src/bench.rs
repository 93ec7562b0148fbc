//! `gpujoin-ballista bench`: TPC-H queries on local clusters of 1, 2, ... executors, with and
//! without `GpuJoinRule`, against single-process DataFusion on the same Parquet files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use gpujoin_datafusion::{tpch, GpuJoinConfig, SessionStateBuilderExt};

use crate::{client, register_tpch, write_tpch, ClusterOptions, Error, LocalCluster, Result, BATCH_ROWS};

/// What [`bench`] runs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// TPC-H scale factor (default 1).
    pub scale_factor: f64,
    /// Cluster sizes, in executors (default 1 and 2).
    pub executors: Vec<usize>,
    /// The CUDA device of each executor, in turn (default `[0]`: all on device 0).
    pub gpus: Vec<usize>,
    /// TPC-H query numbers (default the join-heavy 3, 5, 7, 8, 9, 10, 18, 21).
    pub queries: Vec<usize>,
    /// Timed runs per query after one warm-up (default 3; the median counts).
    pub reps: usize,
    /// Where the Parquet files go (default a temporary folder; a folder from an earlier run at
    /// the same scale factor is reused).
    pub data_dir: Option<PathBuf>,
    /// Files per table (default 8).
    pub files: usize,
    /// Pull-staged scheduling (default push-staged, Ballista's).
    pub pull: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions { scale_factor: 1.0, executors: vec![1, 2], gpus: vec![0], queries: tpch::JOIN_HEAVY.to_vec(), reps: 3, data_dir: None, files: 8, pull: false }
    }
}

/// One query on one cluster.
#[derive(Debug, Clone)]
pub struct BenchRow {
    pub scale_factor: f64,
    pub executors: usize,
    /// `GpuJoinRule` in the scheduler's sessions.
    pub rule: bool,
    pub query: usize,
    /// Median wall-clock time on the cluster, ms (client to last batch).
    pub ms: f64,
    /// Median of single-process DataFusion on the same files, without and with the rule.
    pub local_ms: f64,
    pub local_rule_ms: f64,
    pub rows: usize,
    /// The cluster's answer equals single-process DataFusion's (sorted rows).
    pub same: bool,
    /// Join operators in the distributed plan (`EXPLAIN` through the scheduler).
    pub gpu_joins: usize,
    pub cpu_joins: usize,
}

impl BenchRow {
    /// The CSV header of [`BenchRow::csv`].
    pub const HEADER: &'static str = "sf,executors,rule,query,ms,local_ms,local_rule_ms,rows,same,gpu_joins,cpu_joins";

    /// One CSV line (no newline).
    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{:.1},{:.1},{:.1},{},{},{},{}",
            self.scale_factor, self.executors, self.rule, self.query, self.ms, self.local_ms, self.local_rule_ms, self.rows, self.same, self.gpu_joins, self.cpu_joins
        )
    }
}

fn sql_of(query: usize) -> Result<&'static str> {
    tpch::query(query).ok_or_else(|| Error::Usage(format!("TPC-H has queries 1 to 22, not {query}")))
}

/// Runs `sql` once (warm-up), then `reps` times: the median in ms and the last answer.
pub async fn timed(ctx: &SessionContext, sql: &str, reps: usize) -> Result<(f64, Vec<RecordBatch>)> {
    ctx.sql(sql).await?.collect().await?;
    let mut times = Vec::new();
    let mut last = Vec::new();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        last = ctx.sql(sql).await?.collect().await?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], last))
}

/// The text of `EXPLAIN sql` in `ctx`: through a Ballista client, only the scheduler's
/// distributed plan (stage by stage, as the executors get it); elsewhere every plan `EXPLAIN`
/// shows.
pub async fn explain(ctx: &SessionContext, sql: &str) -> Result<String> {
    let batches = ctx.sql(&format!("EXPLAIN {sql}")).await?.collect().await?;
    let mut plans = Vec::new();
    for b in &batches {
        if b.num_columns() < 2 {
            continue;
        }
        for row in 0..b.num_rows() {
            plans.push((array_value_to_string(b.column(0), row)?, array_value_to_string(b.column(1), row)?));
        }
    }
    let distributed = plans.iter().any(|(t, _)| t == "distributed_plan");
    let mut text = String::new();
    for (t, p) in plans.iter().filter(|(t, _)| !distributed || t == "distributed_plan") {
        let _ = writeln!(text, "{t}:\n{p}");
    }
    Ok(text)
}

/// Join operators in a plan's text: (`GpuJoinExec`s, DataFusion's CPU joins).
pub fn count_joins(plan: &str) -> (usize, usize) {
    let gpu = plan.matches("GpuJoinExec: ").count();
    let cpu = tpch::CPU_JOIN_OPERATORS.iter().map(|op| plan.matches(&format!("{op}: ")).count()).sum();
    (gpu, cpu)
}

/// A single-process DataFusion session (as the client's: [`BATCH_ROWS`] rows per batch), with
/// `GpuJoinRule` when `rule`.
pub fn local_context(rule: bool) -> SessionContext {
    let config = SessionConfig::new().with_batch_size(BATCH_ROWS);
    let mut builder = SessionStateBuilder::new().with_default_features().with_config(config);
    if rule {
        builder = builder.with_gpu_joins(GpuJoinConfig::default());
    }
    SessionContext::new_with_state(builder.build())
}

/// Runs the benchmark (see [`BenchOptions`]) with the `gpujoin-ballista` binary `bin` for the
/// clusters; calls `row` for each result as it comes.
pub async fn bench(bin: &Path, options: &BenchOptions, mut row: impl FnMut(&BenchRow)) -> Result<Vec<BenchRow>> {
    let tmp;
    let dir = match &options.data_dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("gpujoin-ballista-tpch-").tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let sf = options.scale_factor;
    eprintln!("bench: writing TPC-H SF{sf} to {}", dir.display());
    write_tpch(&dir, sf, options.files)?;
    // Single-process DataFusion: the reference answers and times.
    let (plain, gpu) = (local_context(false), local_context(true));
    register_tpch(&plain, &dir).await?;
    register_tpch(&gpu, &dir).await?;
    let mut local = Vec::new();
    for &q in &options.queries {
        let sql = sql_of(q)?;
        let (ms, answer) = timed(&plain, sql, options.reps).await?;
        let (rule_ms, _) = timed(&gpu, sql, options.reps).await?;
        eprintln!("bench: q{q} single process: {ms:.1} ms, with the rule {rule_ms:.1} ms");
        local.push((ms, rule_ms, tpch::sorted_rows(&answer)?));
    }
    let mut rows = Vec::new();
    for &n in &options.executors {
        for rule in [false, true] {
            eprintln!("bench: cluster of {n} executors, rule {}", if rule { "on" } else { "off" });
            let cluster = LocalCluster::start(bin, ClusterOptions { executors: n, gpus: options.gpus.clone(), gpu_rule: rule, pull: options.pull, ..ClusterOptions::default() })?;
            let ctx = client(&cluster.url(), None).await?;
            register_tpch(&ctx, &dir).await?;
            for (i, &q) in options.queries.iter().enumerate() {
                let sql = sql_of(q)?;
                let (gpu_joins, cpu_joins) = count_joins(&explain(&ctx, sql).await?);
                let (ms, answer) = timed(&ctx, sql, options.reps).await?;
                let (local_ms, local_rule_ms, expected) = &local[i];
                let r = BenchRow {
                    scale_factor: sf,
                    executors: n,
                    rule,
                    query: q,
                    ms,
                    local_ms: *local_ms,
                    local_rule_ms: *local_rule_ms,
                    rows: answer.iter().map(RecordBatch::num_rows).sum(),
                    same: tpch::sorted_rows(&answer)? == *expected,
                    gpu_joins,
                    cpu_joins,
                };
                row(&r);
                rows.push(r);
            }
        }
    }
    Ok(rows)
}
