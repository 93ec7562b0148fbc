//! `gpujoin sql`: SQL over files with joins on the GPU, through datafusion-cli's executor (its
//! printing, its REPL), in a session with `GpuJoinRule`.
//!
//! ```sh
//! gpujoin sql "SELECT c.name, count(*) FROM 'orders.parquet' o JOIN 'customers.csv' c ON o.cust = c.id GROUP BY c.name"
//! gpujoin sql -f report.sql --format csv
//! gpujoin sql "SELECT * FROM 'a.parquet' JOIN 'b.parquet' USING (k)" -o joined.parquet
//! gpujoin sql            # a REPL
//! ```
//!
//! `EXPLAIN` and `EXPLAIN ANALYZE` end with a row `gpu joins` that lists every join the rule
//! saw: moved to `GpuJoinExec`, or kept on the CPU and why.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use datafusion::arrow::array::{Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::dataframe::DataFrame;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SessionState;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::dialect_from_str;
use datafusion_cli::cli_context::CliSessionContext;
use datafusion_cli::exec;
use datafusion_cli::object_storage::instrumented::InstrumentedObjectStoreRegistry;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::{MaxRows, PrintOptions};
use futures::StreamExt;
use gpujoin_datafusion::GpuJoinRule;

use crate::error::{CliError, Result};
use crate::files::FileWriter;

/// What `gpujoin sql` runs and how it prints.
#[derive(Debug, Clone)]
pub struct SqlOptions {
    /// SQL given on the command line (statements separated by `;`).
    pub query: Option<String>,
    /// Files of SQL statements, run before `query`.
    pub files: Vec<PathBuf>,
    /// No `GpuJoinRule`: DataFusion's CPU operators only.
    pub cpu: bool,
    /// `GpuJoinConfig::min_build_rows` (`None`: its default).
    pub min_build_rows: Option<usize>,
    pub format: PrintFormat,
    pub maxrows: MaxRows,
    /// The last statement's rows go to this file instead of stdout.
    pub output: Option<PathBuf>,
    pub batch_rows: usize,
    /// No row counts or timings after each statement.
    pub quiet: bool,
}

/// A session for datafusion-cli's executor whose `EXPLAIN` output also lists the rule's
/// decisions.
pub struct GpuCliContext {
    ctx: SessionContext,
    cpu: bool,
}

impl GpuCliContext {
    pub fn new(ctx: SessionContext, cpu: bool) -> GpuCliContext {
        GpuCliContext { ctx, cpu }
    }

    /// The text of the `gpu joins` row: one line per join the rule saw.
    fn decisions_text(&self, state: &SessionState) -> String {
        if self.cpu {
            return "off (--cpu): every join runs on DataFusion's CPU operators".into();
        }
        match GpuJoinRule::find(state) {
            None => "off: the session has no GpuJoinRule".into(),
            Some(rule) => {
                let d = rule.take_decisions();
                if d.is_empty() {
                    "no joins".into()
                } else {
                    d.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
                }
            }
        }
    }
}

#[async_trait]
impl CliSessionContext for GpuCliContext {
    fn task_ctx(&self) -> Arc<TaskContext> {
        self.ctx.task_ctx()
    }

    fn session_state(&self) -> SessionState {
        self.ctx.state()
    }

    fn register_object_store(&self, url: &url::Url, object_store: Arc<dyn object_store::ObjectStore>) -> Option<Arc<dyn object_store::ObjectStore + 'static>> {
        self.ctx.register_object_store(url, object_store)
    }

    fn register_table_options_extension_from_scheme(&self, scheme: &str) {
        CliSessionContext::register_table_options_extension_from_scheme(&self.ctx, scheme)
    }

    async fn execute_logical_plan(&self, plan: LogicalPlan) -> std::result::Result<DataFrame, DataFusionError> {
        if !matches!(plan, LogicalPlan::Explain(_) | LogicalPlan::Analyze(_)) {
            return self.ctx.execute_logical_plan(plan).await;
        }
        // Plan (and, for ANALYZE, run) the query now, so that the rule's decisions for it are known.
        let state = self.ctx.state();
        if let Some(rule) = GpuJoinRule::find(&state) {
            rule.take_decisions();
        }
        let df = self.ctx.execute_logical_plan(plan).await?;
        let schema = Arc::clone(df.schema().inner());
        let mut batches = df.collect().await?;
        let text = self.decisions_text(&state);
        let two_strings = schema.fields().len() == 2 && schema.fields().iter().all(|f| f.data_type() == &DataType::Utf8);
        if two_strings {
            let row = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(StringArray::from(vec!["gpu joins"])) as Arc<dyn Array>, Arc::new(StringArray::from(vec![text]))])?;
            batches.push(row);
        }
        self.ctx.read_batches(batches)
    }
}

fn print_options(o: &SqlOptions) -> PrintOptions {
    PrintOptions { format: o.format, quiet: o.quiet, maxrows: o.maxrows, color: false, instrumented_registry: Arc::new(InstrumentedObjectStoreRegistry::new()) }
}

fn read_sql(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))
}

/// DataFusion's "table 'datafusion.public.orders.parquet' not found" for a file path in `FROM`
/// becomes "cannot open orders.parquet: no such file".
fn file_not_found(e: CliError) -> CliError {
    let m = e.message();
    if let (Some(a), Some(b)) = (m.find("table '"), m.find("' not found")) {
        let name = &m[a + "table '".len()..b.max(a + "table '".len())];
        let name = name.strip_prefix("datafusion.public.").unwrap_or(name);
        if crate::files::Format::of(Path::new(name)).is_ok() && !Path::new(name).exists() {
            return CliError::new(format!("cannot open {name}: no such file (FROM '<path>' reads the file at that path, relative to {})", std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| ".".into())));
        }
    }
    e
}

/// Runs `gpujoin sql`: the files' statements, then the query's; a REPL when there are neither.
pub async fn run(o: SqlOptions) -> Result<()> {
    run_statements(o).await.map_err(file_not_found)
}

async fn run_statements(o: SqlOptions) -> Result<()> {
    let ctx = crate::session::file_context(o.cpu, o.batch_rows, o.min_build_rows).await?;
    let cli = GpuCliContext::new(ctx.clone(), o.cpu);
    let mut print = print_options(&o);
    if o.query.is_none() && o.files.is_empty() {
        if o.output.is_some() {
            return Err(CliError::new("-o needs a query (give it as an argument or with -f)"));
        }
        return exec::exec_from_repl(&cli, &mut print).await.map_err(|e| CliError::new(e.to_string()));
    }
    let mut sql = Vec::new();
    for f in &o.files {
        sql.push(read_sql(f)?);
    }
    sql.extend(o.query.clone());
    let text = sql.join(";\n");
    let Some(output) = &o.output else {
        // datafusion-cli's executor: each statement planned, run and printed; the first error stops.
        return exec::exec_from_commands(&cli, vec![text], &print).await.map_err(CliError::from);
    };
    // -o: every statement but the last printed, the last one's rows written to the file.
    let dialect_name = ctx.state().config().options().sql_parser.dialect.to_string();
    let dialect = dialect_from_str(&dialect_name).ok_or_else(|| CliError::new(format!("unknown SQL dialect {dialect_name}")))?;
    let mut statements = DFParser::parse_sql_with_dialect(&text, dialect.as_ref())?;
    let Some(last) = statements.pop_back() else {
        return Err(CliError::new("no SQL statement to write to the output file"));
    };
    for s in statements {
        exec::exec_from_commands(&cli, vec![s.to_string()], &print).await?;
    }
    let start = Instant::now();
    let plan = ctx.state().statement_to_plan(last).await?;
    let df = cli.execute_logical_plan(plan).await?;
    let schema = Arc::clone(df.schema().inner());
    let mut stream = df.execute_stream().await?;
    let mut writer = FileWriter::create(output, &schema)?;
    let mut rows = 0u64;
    while let Some(b) = stream.next().await {
        let b = b?;
        rows += b.num_rows() as u64;
        writer.write(&b)?;
    }
    writer.finish()?;
    if !o.quiet {
        eprintln!("wrote {rows} rows to {} in {:.3} s", output.display(), start.elapsed().as_secs_f64());
    }
    Ok(())
}
