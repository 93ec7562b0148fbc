//! TPC-H as Parquet files: executors read the tables from files (they cannot see a client's
//! in-memory tables), so the cluster's tests and benchmark write them once per scale factor.

use std::fs::File;
use std::path::{Path, PathBuf};

use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use gpujoin_datafusion::tpch;

use crate::{Error, Result};

/// Writes the eight TPC-H tables at `scale_factor` under `dir`: `dir/<table>/part-<i>.parquet`,
/// `files` files per table (`region` and `nation` one each). Skips the work when `dir` already
/// holds this scale factor's tables (a `SF` file says which). Returns `dir`.
///
/// ```no_run
/// # async fn f() -> gpujoin_ballista::Result<()> {
/// let dir = gpujoin_ballista::write_tpch("/tmp/tpch-sf0.1".as_ref(), 0.1, 4)?;
/// let ctx = datafusion::prelude::SessionContext::new();
/// gpujoin_ballista::register_tpch(&ctx, &dir).await?;
/// # Ok(()) }
/// ```
pub fn write_tpch(dir: &Path, scale_factor: f64, files: usize) -> Result<PathBuf> {
    let marker = dir.join("SF");
    let stamp = format!("{scale_factor} {files}\n");
    if std::fs::read_to_string(&marker).is_ok_and(|s| s == stamp) {
        return Ok(dir.to_path_buf());
    }
    for table in tpch::TABLES {
        let folder = dir.join(table);
        if folder.exists() {
            std::fs::remove_dir_all(&folder)?;
        }
        std::fs::create_dir_all(&folder)?;
        let (schema, parts) = tpch::generate(table, scale_factor, files)?;
        for (i, batches) in parts.iter().enumerate() {
            let file = File::create(folder.join(format!("part-{i}.parquet")))?;
            let mut writer = ArrowWriter::try_new(file, schema.clone(), None).map_err(datafusion::common::DataFusionError::from)?;
            for b in batches {
                writer.write(b).map_err(datafusion::common::DataFusionError::from)?;
            }
            writer.close().map_err(datafusion::common::DataFusionError::from)?;
        }
    }
    std::fs::write(&marker, stamp)?;
    Ok(dir.to_path_buf())
}

/// Registers the tables [`write_tpch`] wrote under `dir` in `ctx` (a Ballista client or a plain
/// DataFusion session), by absolute path, so that every executor on this host reads them.
pub async fn register_tpch(ctx: &SessionContext, dir: &Path) -> Result<()> {
    let dir = std::path::absolute(dir)?;
    for table in tpch::TABLES {
        let folder = dir.join(table);
        let path = folder.to_str().ok_or_else(|| Error::Usage(format!("not a UTF-8 path: {}", folder.display())))?;
        ctx.register_parquet(table, &format!("{path}/"), ParquetReadOptions::default()).await?;
    }
    Ok(())
}
