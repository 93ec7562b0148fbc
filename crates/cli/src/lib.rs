//! The `gpujoin` command line (binary `gpujoin`): SQL over files with joins on the GPU, a join
//! of two files, and a TPC-H demo and benchmark. Every subcommand also runs without a GPU, on
//! DataFusion's CPU operators, and says so.
//!
//! ```sh
//! gpujoin demo --sf 1                      # TPC-H generated in process, CPU against GPU joins
//! gpujoin sql "SELECT * FROM 'a.parquet' a JOIN 'b.csv' b ON a.k = b.k"
//! gpujoin join a.parquet b.csv --on k --how left -o out.parquet
//! gpujoin bench --sf 10 --queries 3,5,9 -o tpch.csv
//! ```
//!
//! Errors are one line on stderr (`gpujoin: error: ...`) and exit status 1.

pub mod demo;
pub mod error;
pub mod files;
pub mod join;
pub mod progress;
pub mod session;
pub mod sql;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::MaxRows;

pub use error::{CliError, Result};

/// Joins on the GPU: SQL over Parquet, CSV, Arrow IPC and JSON files, a join of two files, and a
/// TPC-H demo. Without a subcommand: `gpujoin demo`.
#[derive(Debug, Parser)]
#[command(name = "gpujoin", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run SQL over files ('orders.parquet' in FROM reads the file); a REPL without a query.
    Sql(SqlArgs),
    /// Join two files on key columns; the output to a file (-o) or stdout.
    Join(JoinArgs),
    /// TPC-H generated in process: the join-heavy queries with CPU and with GPU joins, answers compared.
    Demo(DemoArgs),
    /// The demo as a benchmark: CSV rows per query.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// SQL statements (separated by `;`).
    pub query: Option<String>,
    /// Run the SQL statements of this file (before the query); repeatable.
    #[arg(short = 'f', long = "file")]
    pub files: Vec<PathBuf>,
    /// Run every join on DataFusion's CPU operators (no GpuJoinRule).
    #[arg(long)]
    pub cpu: bool,
    /// Keep equi-joins whose build side is a table of fewer rows on the CPU (default
    /// gpujoin-datafusion's DEFAULT_MIN_BUILD_ROWS, 131072; 0 moves every join the GPU can run).
    #[arg(long)]
    pub min_build_rows: Option<usize>,
    /// How results are printed.
    #[arg(long, value_enum, default_value_t = PrintFormat::Table)]
    pub format: PrintFormat,
    /// Write the last statement's rows to this file (.parquet, .csv, .arrow, .json) instead of printing them.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// The most rows printed in the table format (a number, or `inf`).
    #[arg(long, default_value = "40")]
    pub maxrows: MaxRows,
    /// Rows per batch (larger batches mean fewer, longer copies to and from the GPU).
    #[arg(long, default_value_t = session::BATCH_ROWS)]
    pub batch_size: usize,
    /// No row counts and timings after each statement.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The left file (.parquet, .csv, .arrow, .json).
    pub left: PathBuf,
    /// The right file.
    pub right: PathBuf,
    /// Key columns of the left file, comma-separated (also the right file's unless --right-on).
    #[arg(long, value_delimiter = ',', required = true)]
    pub on: Vec<String>,
    /// Key columns of the right file, comma-separated, pairing with --on.
    #[arg(long, value_delimiter = ',')]
    pub right_on: Vec<String>,
    /// The join type.
    #[arg(long, value_enum, default_value_t = join::How::Inner)]
    pub how: join::How,
    /// A condition on matching pairs, SQL over l.<column> and r.<column> (e.g. "l.a < r.b").
    #[arg(long)]
    pub filter: Option<String>,
    /// NULL keys match NULL keys (SQL's IS NOT DISTINCT FROM); by default they match nothing.
    #[arg(long)]
    pub nulls_equal: bool,
    /// Output only these columns of the left file, comma-separated (default: all it returns).
    #[arg(long, value_delimiter = ',')]
    pub left_columns: Option<Vec<String>>,
    /// Output only these columns of the right file, comma-separated (default: all it returns).
    #[arg(long, value_delimiter = ',')]
    pub right_columns: Option<Vec<String>>,
    /// The output file (.parquet, .csv, .arrow, .json); without it the rows are printed.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Join on the CPU (DataFusion) even with a GPU.
    #[arg(long)]
    pub cpu: bool,
    /// Produce the output in chunks of at most this many MiB of device memory (by default only
    /// when the whole output does not fit).
    #[arg(long)]
    pub chunk_mb: Option<u64>,
    /// The GPU warm-up while the files are read (the memory pool grown to the join's planned
    /// size, staging buffers page-locked, small joins that load the kernels): `auto` for input
    /// files of 64 MiB or more together; with `off` the join pays those one-time costs itself.
    #[arg(long, value_enum, default_value_t = join::WarmUp::Auto)]
    pub warm_up: join::WarmUp,
    /// How rows are printed without -o.
    #[arg(long, value_enum, default_value_t = PrintFormat::Table)]
    pub format: PrintFormat,
    /// The most rows printed without -o (a number, or `inf`).
    #[arg(long, default_value = "40")]
    pub maxrows: MaxRows,
    /// No timing summary on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// TPC-H scale factor (1: lineitem has 6 million rows).
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// Queries, comma-separated (default: the join-heavy 3,5,7,8,9,10,18,21; `all`: 1 to 22).
    #[arg(long, value_delimiter = ',')]
    pub queries: Vec<String>,
    /// Partitions per table and DataFusion's target partitions (default: the cores).
    #[arg(long)]
    pub partitions: Option<usize>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub demo: DemoArgs,
    /// Timed runs of each query and session after a warm-up (medians).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Append the CSV rows to this file (a header when it is new) instead of printing them.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

fn queries(list: &[String]) -> Result<Vec<usize>> {
    if list.is_empty() {
        return Ok(gpujoin_datafusion::tpch::JOIN_HEAVY.to_vec());
    }
    if list.len() == 1 && list[0] == "all" {
        return Ok((1..=22).collect());
    }
    list.iter().map(|q| q.trim().trim_start_matches(['q', 'Q']).parse().map_err(|_| CliError::new(format!("--queries: {q:?} is not a query number")))).collect()
}

fn demo_options(a: &DemoArgs, reps: usize, csv: Option<PathBuf>, bench: bool) -> Result<demo::DemoOptions> {
    Ok(demo::DemoOptions { scale_factor: a.sf, queries: queries(&a.queries)?, reps, partitions: a.partitions, csv, bench })
}

/// Runs one command line.
pub async fn run(cli: Cli) -> Result<()> {
    let command = cli.command.unwrap_or(Command::Demo(DemoArgs { sf: 1.0, queries: Vec::new(), partitions: None }));
    match command {
        Command::Sql(a) => {
            sql::run(sql::SqlOptions { query: a.query, files: a.files, cpu: a.cpu, min_build_rows: a.min_build_rows, format: a.format, maxrows: a.maxrows, output: a.output, batch_rows: a.batch_size.max(1), quiet: a.quiet }).await
        }
        Command::Join(a) => {
            let quiet = a.quiet;
            let report = join::run(join::JoinOptions {
                left: a.left,
                right: a.right,
                on: a.on,
                right_on: a.right_on,
                how: a.how,
                filter: a.filter,
                nulls_equal: a.nulls_equal,
                left_columns: a.left_columns,
                right_columns: a.right_columns,
                output: a.output,
                cpu: a.cpu,
                chunk_mb: a.chunk_mb,
                warm_up: a.warm_up,
                format: a.format,
                maxrows: a.maxrows,
                quiet,
            })
            .await?;
            if !quiet {
                eprintln!("gpujoin join: {report}");
            }
            Ok(())
        }
        Command::Demo(a) => demo::run(demo_options(&a, 1, None, false)?).await.map(|_| ()),
        Command::Bench(a) => demo::run(demo_options(&a.demo, a.reps, a.output, true)?).await.map(|_| ()),
    }
}
