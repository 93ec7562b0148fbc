//! `gpujoin-ballista`: a Ballista scheduler and executors with GPU joins, a local cluster, a SQL
//! client and a TPC-H benchmark. See the crate docs and `--help`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use ballista_core::config::TaskSchedulingPolicy;
use clap::{Parser, Subcommand};
use gpujoin_ballista::bench::{bench, BenchOptions, BenchRow};
use gpujoin_ballista::{client, parse_addr, register_tpch, run_executor, run_scheduler, ClusterOptions, Error, ExecutorOptions, LocalCluster, Result, SchedulerOptions};
use gpujoin_datafusion::GpuJoinConfig;

#[derive(Parser)]
#[command(name = "gpujoin-ballista", about = "Apache Ballista with joins on the GPU (gpujoin)")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// A scheduler whose sessions plan joins with GpuJoinRule.
    Scheduler {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:50050")]
        bind: String,
        /// Plain Ballista: no GpuJoinRule (for comparisons).
        #[arg(long)]
        no_rule: bool,
        /// The CUDA device the rule probes.
        #[arg(long, default_value_t = 0)]
        gpu: usize,
        /// Executors to wait for before /readyz says 200.
        #[arg(long, default_value_t = 1)]
        min_executors: usize,
        /// Seconds without a heartbeat before an executor counts as dead.
        #[arg(long, default_value_t = 180)]
        executor_timeout: u64,
        /// Pull-staged scheduling (executors poll; they must say --pull too).
        #[arg(long)]
        pull: bool,
    },
    /// An executor whose GpuJoinExecs run on one GPU.
    Executor {
        /// The CUDA device (an index among those CUDA_VISIBLE_DEVICES exposes).
        #[arg(long, default_value_t = 0)]
        gpu: usize,
        /// The scheduler, host:port.
        #[arg(long, default_value = "127.0.0.1:50050")]
        scheduler: String,
        /// Host to bind and advertise.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Arrow Flight port.
        #[arg(long, default_value_t = 50051)]
        port: u16,
        /// gRPC port.
        #[arg(long, default_value_t = 50052)]
        grpc_port: u16,
        /// Task slots (default: the CPU cores).
        #[arg(long)]
        vcores: Option<usize>,
        /// Folder for shuffle files (default: a temporary one).
        #[arg(long)]
        work_dir: Option<String>,
        /// Seconds between heartbeats.
        #[arg(long, default_value_t = 60)]
        heartbeat: u64,
        /// Pull-staged scheduling (the scheduler must say --pull too).
        #[arg(long)]
        pull: bool,
    },
    /// A scheduler and N executors on this machine until Ctrl-C.
    Cluster {
        #[arg(long, default_value_t = 2)]
        executors: usize,
        /// The executors' CUDA devices, in turn (0,1: one executor per GPU).
        #[arg(long, value_delimiter = ',', default_value = "0")]
        gpus: Vec<usize>,
        /// Plain Ballista: no GpuJoinRule.
        #[arg(long)]
        no_rule: bool,
        /// Pull-staged scheduling.
        #[arg(long)]
        pull: bool,
    },
    /// Runs SQL through a scheduler and prints the answer.
    Sql {
        /// The scheduler (df://host:port).
        #[arg(long, default_value = "df://127.0.0.1:50050")]
        url: String,
        /// Register the TPC-H tables under this folder (as `bench --data-dir` or
        /// `tpch` writes them).
        #[arg(long)]
        tpch: Option<PathBuf>,
        /// Register a Parquet file or folder: NAME=PATH (repeatable).
        #[arg(long = "table")]
        tables: Vec<String>,
        /// Show EXPLAIN's distributed plan instead of the answer.
        #[arg(long)]
        explain: bool,
        query: String,
    },
    /// Writes the TPC-H tables as Parquet (one folder per table).
    Tpch {
        #[arg(long, default_value_t = 1.0)]
        sf: f64,
        #[arg(long, default_value_t = 8)]
        files: usize,
        dir: PathBuf,
    },
    /// TPC-H on local clusters, with and without the rule, against single-process DataFusion.
    Bench {
        #[arg(long, default_value_t = 1.0)]
        sf: f64,
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        executors: Vec<usize>,
        #[arg(long, value_delimiter = ',', default_value = "0")]
        gpus: Vec<usize>,
        #[arg(long, value_delimiter = ',', default_value = "3,5,7,8,9,10,18,21")]
        queries: Vec<usize>,
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Where the Parquet files go (reused at the same scale factor).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// CSV output file (default stdout).
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Pull-staged scheduling.
        #[arg(long)]
        pull: bool,
    },
}

/// Ballista's `log` records to stderr at the level `RUST_LOG` names (`error`, `warn`, the
/// default, `info`, `debug`, `trace`; no per-module filters).
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("[{} {}] {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

fn init_logging() {
    static LOG: StderrLog = StderrLog;
    let level = std::env::var("RUST_LOG").ok().and_then(|v| v.trim().parse::<log::LevelFilter>().ok()).unwrap_or(log::LevelFilter::Warn);
    if log::set_logger(&LOG).is_ok() {
        log::set_max_level(level);
    }
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(32 << 20).build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpujoin-ballista: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpujoin-ballista: {e}");
            ExitCode::FAILURE
        }
    }
}

fn policy(pull: bool) -> TaskSchedulingPolicy {
    if pull {
        TaskSchedulingPolicy::PullStaged
    } else {
        TaskSchedulingPolicy::PushStaged
    }
}

async fn run(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Scheduler { bind, no_rule, gpu, min_executors, executor_timeout, pull } => {
            let options = SchedulerOptions {
                bind: parse_addr(&bind)?,
                gpu_rule: !no_rule,
                gpu: GpuJoinConfig { device: gpu, ..GpuJoinConfig::default() },
                min_ready_executors: min_executors,
                executor_timeout_seconds: executor_timeout,
                policy: policy(pull),
            };
            run_scheduler(&options).await
        }
        Cmd::Executor { gpu, scheduler, host, port, grpc_port, vcores, work_dir, heartbeat, pull } => {
            let mut options = ExecutorOptions { gpu, scheduler: parse_addr(&scheduler)?, host, port, grpc_port, work_dir, heartbeat_seconds: heartbeat, policy: policy(pull), ..ExecutorOptions::default() };
            if let Some(v) = vcores {
                options.vcores = v;
            }
            run_executor(&options).await
        }
        Cmd::Cluster { executors, gpus, no_rule, pull } => {
            let cluster = LocalCluster::start(&std::env::current_exe()?, ClusterOptions { executors, gpus, gpu_rule: !no_rule, pull, ..ClusterOptions::default() })?;
            println!("{}", cluster.url());
            eprintln!("gpujoin-ballista: scheduler and {executors} executors running; logs in {}; Ctrl-C stops them", cluster.log_path("").parent().map(|p| p.display().to_string()).unwrap_or_default());
            let _ = std::io::stdout().flush();
            tokio::signal::ctrl_c().await?;
            Ok(())
        }
        Cmd::Sql { url, tpch, tables, explain, query } => {
            let ctx = client(&url, None).await?;
            if let Some(dir) = tpch {
                register_tpch(&ctx, &dir).await?;
            }
            for t in &tables {
                let (name, path) = t.split_once('=').ok_or_else(|| Error::Usage(format!("--table takes NAME=PATH, not {t:?}")))?;
                let path = std::path::absolute(path)?;
                ctx.register_parquet(name, &path.to_string_lossy(), Default::default()).await?;
            }
            if explain {
                print!("{}", gpujoin_ballista::bench::explain(&ctx, &query).await?);
            } else {
                ctx.sql(&query).await?.show().await?;
            }
            Ok(())
        }
        Cmd::Tpch { sf, files, dir } => {
            gpujoin_ballista::write_tpch(&dir, sf, files)?;
            Ok(())
        }
        Cmd::Bench { sf, executors, gpus, queries, reps, data_dir, output, pull } => {
            let options = BenchOptions { scale_factor: sf, executors, gpus, queries, reps, data_dir, pull, ..BenchOptions::default() };
            let mut out: Box<dyn std::io::Write> = match &output {
                Some(p) => Box::new(std::fs::File::create(p)?),
                None => Box::new(std::io::stdout()),
            };
            writeln!(out, "{}", BenchRow::HEADER)?;
            let mut failed = None;
            let rows = bench(&std::env::current_exe()?, &options, |r| {
                if let Err(e) = writeln!(out, "{}", r.csv()).and_then(|_| out.flush()) {
                    failed = Some(e);
                }
                eprintln!("bench: q{} on {} executors, rule {}: {:.1} ms (single process {:.1} ms), same answer: {}", r.query, r.executors, r.rule, r.ms, r.local_ms, r.same);
            })
            .await?;
            if let Some(e) = failed {
                return Err(e.into());
            }
            let wrong: Vec<String> = rows.iter().filter(|r| !r.same).map(|r| format!("q{} ({} executors, rule {})", r.query, r.executors, r.rule)).collect();
            if !wrong.is_empty() {
                return Err(Error::Cluster(format!("answers differ from single-process DataFusion: {}", wrong.join(", "))));
            }
            Ok(())
        }
    }
}
