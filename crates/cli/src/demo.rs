//! `gpujoin demo` and `gpujoin bench`: TPC-H generated in process, the join-heavy queries run
//! with DataFusion's CPU joins and with GPU joins, answers compared, times per query.
//!
//! ```text
//! $ gpujoin demo --sf 1
//! gpujoin demo: TPC-H SF1 on NVIDIA H100 80GB HBM3: DataFusion's CPU joins against GpuJoinRule, 16 partitions
//! ...
//! query | CPU ms | GPU ms | speed-up | joins on GPU | GpuJoinExec ms: upload / join / download | answers
//! Q3    |  ...
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use datafusion::catalog::MemTable;
use gpujoin_datafusion::tpch;

use crate::error::{CliError, Result};

/// What `gpujoin demo` / `gpujoin bench` run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub scale_factor: f64,
    pub queries: Vec<usize>,
    /// Timed runs of each query and session after a warm-up (medians).
    pub reps: usize,
    /// Partitions of each table and DataFusion's target partitions (default: the cores).
    pub partitions: Option<usize>,
    /// `bench`: CSV rows to this file (appended; a header when new), else to stdout.
    pub csv: Option<PathBuf>,
    pub bench: bool,
}

/// One query's figures.
#[derive(Debug, Clone)]
pub struct QueryFigures {
    pub query: usize,
    pub cpu_ms: f64,
    /// `None` without a GPU.
    pub gpu: Option<tpch::QueryRun>,
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// Runs the demo (a table on stdout) or the benchmark (CSV rows).
pub async fn run(o: DemoOptions) -> Result<Vec<QueryFigures>> {
    let start = Instant::now();
    for &q in &o.queries {
        if tpch::query(q).is_none() {
            return Err(CliError::new(format!("--queries: TPC-H has queries 1 to 22, not {q}")));
        }
    }
    if !(o.scale_factor > 0.0) {
        return Err(CliError::new(format!("--sf must be positive, not {}", o.scale_factor)));
    }
    let partitions = o.partitions.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4)).max(1);
    let gpu = crate::session::gpu();
    let name = o.bench.then_some("bench").unwrap_or("demo");
    let say = |line: String| {
        // The demo's table goes to stdout; the benchmark keeps stdout for its CSV.
        if o.bench && o.csv.is_none() {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    match &gpu {
        Ok(device) => say(format!("gpujoin {name}: TPC-H SF{} on {device}: DataFusion's CPU joins against GpuJoinRule, {partitions} partitions", o.scale_factor)),
        Err(why) => say(format!("gpujoin {name}: no GPU ({why}); running TPC-H SF{} on DataFusion's CPU path only, {partitions} partitions", o.scale_factor)),
    }
    let plain = crate::session::context(true, crate::session::BATCH_ROWS, Some(partitions), None)?;
    let with_gpu = match gpu {
        Ok(_) => Some(crate::session::context(false, crate::session::BATCH_ROWS, Some(partitions), None)?),
        Err(_) => None,
    };
    let device_name = gpu.unwrap_or_else(|_| "no GPU".into());

    let generation = Instant::now();
    let bar = crate::progress::bar(tpch::TABLES.len() as u64, "generating");
    let mut rows = Vec::new();
    for table in tpch::TABLES {
        bar.set_message(format!("{table}"));
        let (schema, parts) = tpch::generate(table, o.scale_factor, partitions)?;
        rows.push(format!("{table} {}", parts.iter().flatten().map(|b| b.num_rows()).sum::<usize>()));
        let provider = Arc::new(MemTable::try_new(schema, parts)?);
        plain.register_table(table, provider.clone())?;
        if let Some(g) = &with_gpu {
            g.register_table(table, provider)?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let generation = generation.elapsed();
    say(format!("generated in {:.1} s: {}", generation.as_secs_f64(), rows.join(", ")));

    say("query | CPU ms | GPU ms | speed-up | joins on GPU | GpuJoinExec ms: upload / join / download | answers".into());
    let mut figures = Vec::new();
    let bar = crate::progress::bar(o.queries.len() as u64, "queries");
    for &q in &o.queries {
        bar.set_message(format!("Q{q}"));
        let f = match &with_gpu {
            Some(g) => {
                let r = tpch::compare(&plain, g, q, o.reps).await?;
                let j = r.gpu_joins;
                bar.suspend(|| {
                    say(format!(
                        "Q{q} | {:.1} | {:.1} | {:.2}x | {} of {} | {:.1}: {:.0}% / {:.0}% / {:.0}% | {}",
                        r.plain_ms,
                        r.gpu_ms,
                        r.plain_ms / r.gpu_ms,
                        r.moved,
                        r.joins,
                        j.gpu_ms,
                        share(j.upload_ms, j.gpu_ms),
                        share(j.join_ms, j.gpu_ms),
                        share(j.download_ms, j.gpu_ms),
                        if r.same { "equal" } else { "DIFFER" }
                    ))
                });
                QueryFigures { query: q, cpu_ms: r.plain_ms, gpu: Some(r) }
            }
            None => {
                let ms = tpch::time(&plain, q, o.reps).await?;
                bar.suspend(|| say(format!("Q{q} | {ms:.1} | - | - | - | - | -")));
                QueryFigures { query: q, cpu_ms: ms, gpu: None }
            }
        };
        figures.push(f);
        bar.inc(1);
    }
    bar.finish_and_clear();

    let cpu: f64 = figures.iter().map(|f| f.cpu_ms).sum();
    let total = start.elapsed().saturating_sub(generation);
    let differ: Vec<String> = figures.iter().filter(|f| f.gpu.as_ref().is_some_and(|g| !g.same)).map(|f| format!("Q{}", f.query)).collect();
    if figures.iter().any(|f| f.gpu.is_some()) {
        let gpu: f64 = figures.iter().filter_map(|f| f.gpu.as_ref()).map(|g| g.gpu_ms).sum();
        let equal = figures.len() - differ.len();
        say(format!(
            "together: CPU {cpu:.1} ms, GPU {gpu:.1} ms ({:.2}x); answers equal for {equal} of {} queries; {:.1} s end to end without generation",
            cpu / gpu,
            figures.len(),
            total.as_secs_f64()
        ));
    } else {
        say(format!("together: CPU {cpu:.1} ms; {:.1} s end to end without generation", total.as_secs_f64()));
    }
    if o.bench {
        write_csv(&o, &figures, device_name)?;
    }
    if !differ.is_empty() {
        return Err(CliError::new(format!("the GPU's answers differ from DataFusion's for {}", differ.join(", "))));
    }
    Ok(figures)
}

/// CSV: one row per query.
fn write_csv(o: &DemoOptions, figures: &[QueryFigures], device: String) -> Result<()> {
    const HEADER: &str = "query,sf,cpu_ms,gpu_ms,speedup,joins_on_gpu,joins,gpu_join_ms,upload_ms,join_ms,download_ms,answers_equal,device";
    let mut lines = Vec::new();
    for f in figures {
        let line = match &f.gpu {
            Some(g) => {
                let j = g.gpu_joins;
                format!("{},{},{:.3},{:.3},{:.3},{},{},{:.3},{:.3},{:.3},{:.3},{},{device}", f.query, o.scale_factor, f.cpu_ms, g.gpu_ms, f.cpu_ms / g.gpu_ms, g.moved, g.joins, j.gpu_ms, j.upload_ms, j.join_ms, j.download_ms, g.same)
            }
            None => format!("{},{},{:.3},,,,,,,,,,{device}", f.query, o.scale_factor, f.cpu_ms),
        };
        lines.push(line);
    }
    match &o.csv {
        Some(path) => {
            let new = !path.exists();
            let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?;
            if new {
                writeln!(file, "{HEADER}")?;
            }
            for l in lines {
                writeln!(file, "{l}")?;
            }
        }
        None => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{HEADER}")?;
            for l in lines {
                writeln!(out, "{l}")?;
            }
        }
    }
    Ok(())
}
