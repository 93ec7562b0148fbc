//! # gpujoin-datafusion
//!
//! GPU joins inside Apache DataFusion 55.2, on [`gpujoin_arrow`]:
//!
//! - [`GpuJoinExec`]: an `ExecutionPlan` that joins its two inputs' record batches on the GPU
//!   (`CollectLeft` or `Partitioned`, every join type but the mark joins, equi-joins, theta joins
//!   on filters of comparisons, cross joins). See [`exec`].
//! - [`GpuJoinRule`]: a `PhysicalOptimizerRule` that replaces each `HashJoinExec`,
//!   `NestedLoopJoinExec`, `CrossJoinExec`, `SortMergeJoinExec` and `SymmetricHashJoinExec`
//!   (bounded inputs) gpujoin can run when a GPU is present, and puts a [`CpuJoinKeptExec`]
//!   (`EXPLAIN`: `CpuJoinKeptExec: reason=...`) above each join it keeps; without a GPU it
//!   leaves the plan unchanged, recording why ([`GpuJoinRule::decisions`]). See [`rule`].
//! - [`with_gpu_joins`] / [`SessionStateBuilderExt::with_gpu_joins`]: installs the rule in a
//!   session with a [`GpuJoinConfig`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int32Array, RecordBatch, StringArray};
//! use datafusion::execution::SessionStateBuilder;
//! use datafusion::prelude::SessionContext;
//! use gpujoin_datafusion::{GpuJoinConfig, SessionStateBuilderExt};
//!
//! # async fn f() -> datafusion::common::Result<()> {
//! // Every join the GPU can run moves, however small: by default (`min_build_rows: None`) an
//! // equi-join whose build side is a table of fewer than DEFAULT_MIN_BUILD_ROWS rows stays on
//! // the CPU, which joins it for less than a device join's fixed cost.
//! let state = SessionStateBuilder::new()
//!     .with_default_features()
//!     .with_gpu_joins(GpuJoinConfig { min_build_rows: Some(0), ..GpuJoinConfig::default() })
//!     .build();
//! let ctx = SessionContext::new_with_state(state);
//! let orders = RecordBatch::try_from_iter([("cust", Arc::new(Int32Array::from(vec![1, 2, 2])) as _)])?;
//! let customers = RecordBatch::try_from_iter([
//!     ("id", Arc::new(Int32Array::from(vec![2, 3])) as _),
//!     ("name", Arc::new(StringArray::from(vec!["two", "three"])) as _),
//! ])?;
//! ctx.register_batch("orders", orders)?;
//! ctx.register_batch("customers", customers)?;
//! // EXPLAIN shows `GpuJoinExec: mode=..., join_type=Inner, on=[(cust@0, id@0)], algorithm=Auto,
//! // replaces=HashJoinExec` where a GPU is present, the unchanged HashJoinExec elsewhere.
//! ctx.sql("SELECT cust, name FROM orders JOIN customers ON cust = id").await?.show().await?;
//! # Ok(()) }
//! ```
//!
//! (Running SQL needs DataFusion's `sql` feature; this crate itself depends on DataFusion without
//! default features. The same program is `examples/gpu_sql.rs`.)
//!
//! ## Batch size
//!
//! The GPU joins whole partitions (or, for `Inner`, `Right`, `RightSemi` and `RightAnti`
//! equi-joins, parts of the probe partition: [`GpuJoinConfig::probe_part_rows`]) and returns the
//! output in batches of the session's batch size (`datafusion.execution.batch_size`, 8192 by default). With [`OutputGather::Device`] a
//! larger one is better, for example 65536 (`SessionConfig::with_batch_size(65536)` or
//! [`GpuJoinConfig::batch_rows`]): fewer batches and fewer, longer copies from the device. With
//! the default [`OutputGather::Host`] only row indices come back, whole, and the batches are
//! taken on the host.
//!
//! ## Not yet (issue 12)
//!
//! - A matched-rows bitmap for joins with device gathers: a `CollectLeft` one that returns the
//!   build side's unmatched rows (Left, Full, LeftSemi, LeftAnti) runs with its probe side in
//!   one partition. (Joins gathered on the host, the default, share one bitmap across probe
//!   partitions and parts.)
//! - The piecewise-merge join; arithmetic and casts in filters; pushed-down limits.
//! - Streamed probe sides for joins without keys.

#[cfg(feature = "proto")]
mod codec;
mod config;
mod lanes;
pub mod exec;
pub mod kept;
pub mod key_filter;
pub mod reduce;
pub mod rule;
#[cfg(feature = "tpch")]
pub mod tpch;
pub mod translate;

use std::sync::Arc;

use datafusion::execution::SessionStateBuilder;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_optimizer::PhysicalOptimizerRule;

#[cfg(feature = "proto")]
pub use codec::GpuJoinCodec;
pub use config::{GpuJoinConfig, OutputGather, DEFAULT_BLOCK_CACHE_BYTES, DEFAULT_COLLECT_BUILD_ROWS, DEFAULT_DEVICE_LANES, DEFAULT_MIN_BUILD_ROWS, DEFAULT_PARALLEL_GATHER_BATCHES, DEFAULT_SEMI_JOIN_REDUCED_ROWS, MIN_PROBE_PART_ROWS};
pub use exec::GpuJoinExec;
pub use kept::CpuJoinKeptExec;
pub use key_filter::KeyFilterExec;
pub use reduce::{SemiJoinReduction, DEFAULT_SEMI_JOIN_REDUCTION_ROWS};
pub use rule::{GpuJoinRule, JoinDecision};

/// Installs a [`GpuJoinRule`] with `config` among `builder`'s physical optimizer rules (DataFusion's
/// default list when the builder has none yet): after DataFusion's own rules have chosen the
/// join modes, distribution and projections, before the post-optimization `FilterPushdown` (which
/// would give the `HashJoinExec`s dynamic filters) and `SanityCheckPlan` (which then checks the
/// plan with the `GpuJoinExec`s in it).
pub fn with_gpu_joins(mut builder: SessionStateBuilder, config: GpuJoinConfig) -> SessionStateBuilder {
    let rule: Arc<dyn PhysicalOptimizerRule + Send + Sync> = Arc::new(GpuJoinRule::new(config));
    let mut rules = builder.physical_optimizers().take().map(|o| o.rules).unwrap_or_else(|| PhysicalOptimizer::new().rules);
    let at = ["FilterPushdown(Post)", "SanityCheckPlan"].iter().find_map(|name| rules.iter().position(|r| r.name() == *name)).unwrap_or(rules.len());
    rules.insert(at, rule);
    builder.with_physical_optimizer_rules(rules)
}

/// `SessionStateBuilder::new().with_default_features().with_gpu_joins(config)`.
pub trait SessionStateBuilderExt {
    /// See [`with_gpu_joins`].
    fn with_gpu_joins(self, config: GpuJoinConfig) -> Self;
}

impl SessionStateBuilderExt for SessionStateBuilder {
    fn with_gpu_joins(self, config: GpuJoinConfig) -> Self {
        with_gpu_joins(self, config)
    }
}
