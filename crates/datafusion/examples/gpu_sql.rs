//! Two small in-memory tables joined by SQL in a session with GPU joins, with `EXPLAIN` and the
//! rule's decisions.
//!
//! ```sh
//! cargo run -p gpujoin-datafusion --example gpu_sql
//! ```
//!
//! With a GPU the plan shows `GpuJoinExec: ..., replaces=HashJoinExec`; without one it is
//! DataFusion's plan unchanged, and the decisions say "no GPU".

use std::sync::Arc;

use datafusion::arrow::array::{Int32Array, RecordBatch, StringArray};
use datafusion::common::Result;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use gpujoin_datafusion::{GpuJoinConfig, GpuJoinRule, SessionStateBuilderExt};

#[tokio::main]
async fn main() -> Result<()> {
    // A larger batch size than DataFusion's 8192 suits the GPU (fewer, longer copies).
    let config = SessionConfig::new().with_batch_size(65536);
    // min_build_rows 0: these tables are tiny, and by default an equi-join whose build side is a
    // table of fewer than DEFAULT_MIN_BUILD_ROWS rows stays on the CPU.
    let gpu = GpuJoinConfig { min_build_rows: Some(0), ..GpuJoinConfig::default() };
    let state = SessionStateBuilder::new().with_default_features().with_config(config).with_gpu_joins(gpu).build();
    let ctx = SessionContext::new_with_state(state);

    let orders = RecordBatch::try_from_iter([
        ("order_id", Arc::new(Int32Array::from(vec![10, 11, 12, 13])) as _),
        ("cust", Arc::new(StringArray::from(vec![Some("ann"), Some("bob"), Some("zoe"), None])) as _),
    ])?;
    let customers =
        RecordBatch::try_from_iter([("id", Arc::new(StringArray::from(vec!["bob", "ann", "cy"])) as _), ("city", Arc::new(StringArray::from(vec![Some("Oslo"), None, Some("Rome")])) as _)])?;
    ctx.register_batch("orders", orders)?;
    ctx.register_batch("customers", customers)?;

    let sql = "SELECT order_id, city FROM orders LEFT JOIN customers ON cust = id ORDER BY order_id";
    ctx.sql(&format!("EXPLAIN {sql}")).await?.show().await?;
    ctx.sql(sql).await?.show().await?;

    let state = ctx.state();
    if let Some(rule) = GpuJoinRule::find(&state) {
        for d in rule.decisions() {
            println!("{d}");
        }
    }
    Ok(())
}
