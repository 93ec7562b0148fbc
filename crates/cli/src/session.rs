//! The DataFusion session every subcommand runs in: DataFusion's defaults, a larger batch size
//! for the GPU, and `GpuJoinRule` unless `--cpu`.

use std::sync::Arc;

use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_cli::catalog::DynamicObjectStoreCatalog;
use gpujoin_datafusion::{GpuJoinConfig, SessionStateBuilderExt};

use crate::error::Result;

/// Rows per batch: DataFusion's 8192 means many short copies to and from the GPU.
pub const BATCH_ROWS: usize = 1 << 16;

/// Whether a CUDA device answers, and its name (or why not).
pub fn gpu() -> std::result::Result<String, String> {
    gpujoin_device::Device::new(0).and_then(|d| d.name()).map_err(|e| e.to_string())
}

/// A session with DataFusion's defaults (and `DATAFUSION_*` environment settings), `batch_rows`
/// rows per batch and, unless `cpu`, `GpuJoinRule` (which moves supported joins to the GPU when
/// there is one and records why it kept the others) with `min_build_rows`
/// (`GpuJoinConfig::min_build_rows`).
pub fn context(cpu: bool, batch_rows: usize, partitions: Option<usize>, min_build_rows: Option<usize>) -> Result<SessionContext> {
    let mut config = SessionConfig::from_env()?.with_batch_size(batch_rows).with_information_schema(true);
    if let Some(p) = partitions {
        config = config.with_target_partitions(p);
    }
    let mut builder = SessionStateBuilder::new().with_default_features().with_config(config);
    if !cpu {
        builder = builder.with_gpu_joins(GpuJoinConfig { min_build_rows, ..GpuJoinConfig::default() });
    }
    Ok(SessionContext::new_with_state(builder.build()))
}

/// [`context`] where `FROM 'orders.parquet'` reads the file (as datafusion-cli does).
pub async fn file_context(cpu: bool, batch_rows: usize, min_build_rows: Option<usize>) -> Result<SessionContext> {
    let ctx = context(cpu, batch_rows, None, min_build_rows)?.enable_url_table();
    ctx.refresh_catalogs().await?;
    ctx.register_catalog_list(Arc::new(DynamicObjectStoreCatalog::new(ctx.state().catalog_list().clone(), ctx.state_weak_ref())));
    Ok(ctx)
}
