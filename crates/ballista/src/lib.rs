//! # gpujoin-ballista
//!
//! GPU joins in [Apache Ballista](https://datafusion.apache.org/ballista/) 55, the distributed
//! engine for DataFusion, on `gpujoin-datafusion`'s `GpuJoinRule`, `GpuJoinExec` and codec:
//!
//! - The **scheduler** plans every query with [`GpuJoinRule`](gpujoin_datafusion::GpuJoinRule)
//!   in its sessions ([`scheduler_config`]: Ballista's `override_session_builder`) and encodes
//!   the stages with [`BallistaGpuCodec`] (`override_physical_codec`): Ballista's own codec
//!   plus `GpuJoinCodec`.
//! - Each **executor** decodes the stages it is sent with [`BallistaGpuCodec::for_executor`],
//!   which moves each `GpuJoinExec` to the executor's GPU ([`ExecutorOptions::gpu`], an index
//!   among the devices `CUDA_VISIBLE_DEVICES` exposes): one executor per GPU.
//! - The **client** ([`client`]) is a Ballista remote session with the same codec; its
//!   queries go to the scheduler as logical plans. Or plan on the client, with the rule, and
//!   ship the physical plan, `GpuJoinExec`s included ([`planner`], [`run_planned_here`]).
//! - [`LocalCluster`] starts a scheduler and N executors of the `gpujoin-ballista` binary as
//!   child processes and kills them on drop; [`bench`](mod@bench) times TPC-H on such clusters.
//!
//! Without a GPU the rule keeps DataFusion's CPU joins (and the cluster is plain Ballista).
//!
//! ```no_run
//! # async fn f() -> gpujoin_ballista::Result<()> {
//! use gpujoin_ballista::{client, register_tpch, write_tpch, ClusterOptions, LocalCluster};
//! let cluster = LocalCluster::start("target/release/gpujoin-ballista".as_ref(), ClusterOptions::default())?;
//! let ctx = client(&cluster.url(), None).await?;
//! let dir = write_tpch("/tmp/tpch-sf1".as_ref(), 1.0, 8)?;
//! register_tpch(&ctx, &dir).await?;
//! ctx.sql(gpujoin_datafusion::tpch::query(3).unwrap()).await?.show().await?;
//! # Ok(()) }
//! ```
//!
//! The binary: `gpujoin-ballista scheduler`, `gpujoin-ballista executor --gpu N`,
//! `gpujoin-ballista cluster --executors N`, `gpujoin-ballista sql --url df://... QUERY`,
//! `gpujoin-ballista bench --sf 1 --executors 1,2`.

pub mod bench;
mod cluster;
mod codec;
mod data;
pub mod guard;
mod roles;

pub use cluster::{ClusterOptions, LocalCluster};
pub use codec::{BallistaGpuCodec, JOIN_LOG_ENV};
pub use data::{register_tpch, write_tpch};
pub use roles::{client, executor_config, parse_addr, planner, run_executor, run_planned_here, run_scheduler, scheduler_config, ExecutorOptions, SchedulerOptions, BATCH_ROWS};

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// DataFusion (planning, execution, and Ballista's client, which reports as DataFusion).
    #[error(transparent)]
    DataFusion(#[from] datafusion::common::DataFusionError),
    /// Ballista's scheduler or executor.
    #[error(transparent)]
    Ballista(#[from] ballista_core::error::BallistaError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// A local cluster's process failed to start or answer.
    #[error("{0}")]
    Cluster(String),
}

impl From<datafusion::arrow::error::ArrowError> for Error {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        Error::DataFusion(e.into())
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
