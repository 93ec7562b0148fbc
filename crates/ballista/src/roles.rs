//! The three roles of a Ballista cluster with GPU joins: the scheduler (plans with
//! [`GpuJoinRule`](gpujoin_datafusion::GpuJoinRule)), the executors (decode and run
//! [`GpuJoinExec`](gpujoin_datafusion::GpuJoinExec) on their GPU) and the client.

use std::net::SocketAddr;
use std::sync::Arc;

use ballista::prelude::SessionContextExt;
use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::extension::SessionConfigExt;
use ballista_core::utils::default_session_builder;
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::{SchedulerConfig, TaskDistributionPolicy};
use ballista_scheduler::scheduler_process::start_server;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use gpujoin_datafusion::{GpuJoinConfig, SessionStateBuilderExt};

use crate::guard::{self, guard_addr, Events, GuardedClusterState, GuardedJobState, GuardedPlanner};
use crate::{BallistaGpuCodec, Error, Result};

/// Rows per batch in the sessions this crate builds: DataFusion's 8192 means many short copies
/// to and from the GPU (as the `gpujoin` CLI).
pub const BATCH_ROWS: usize = 1 << 16;

/// How a scheduler plans.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Address to listen on (default `127.0.0.1:50050`, Ballista's port).
    pub bind: SocketAddr,
    /// Install [`GpuJoinRule`](gpujoin_datafusion::GpuJoinRule) in every session (default
    /// `true`; `false` gives plain Ballista, for comparisons). The rule asks the scheduler's
    /// own CUDA device whether joins can move, so run the scheduler on a GPU host.
    pub gpu_rule: bool,
    /// The rule's configuration (its `device` is the one the scheduler probes; each executor
    /// runs the joins on its own device whatever this says).
    pub gpu: GpuJoinConfig,
    /// Executors the scheduler waits for before `/readyz` answers 200 (default 1).
    pub min_ready_executors: usize,
    /// Seconds without a heartbeat after which an executor counts as dead (default 180,
    /// Ballista's; the local cluster uses a few seconds so that a killed executor is noticed).
    pub executor_timeout_seconds: u64,
    /// Push-staged (Ballista's default: the scheduler sends tasks) or pull-staged (executors
    /// poll). Scheduler and executors must agree. With Ballista 55.0 a push-staged job whose
    /// executor is killed can stay stuck after the scheduler rolls its stages back; pull-staged
    /// jobs recover (see the crate's fault test), at some latency per stage (50 ms polls).
    pub policy: TaskSchedulingPolicy,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 50050)),
            gpu_rule: true,
            gpu: GpuJoinConfig::default(),
            min_ready_executors: 1,
            executor_timeout_seconds: 180,
            policy: TaskSchedulingPolicy::PushStaged,
        }
    }
}

/// Ballista's scheduler configuration with [`BallistaGpuCodec`] (`override_physical_codec`) and,
/// unless `gpu_rule` is off, a session builder that adds
/// [`GpuJoinRule`](gpujoin_datafusion::GpuJoinRule) to Ballista's default sessions
/// (`override_session_builder`): the scheduler makes the physical plans, so that is where the
/// rule replaces joins; the stages it sends carry the `GpuJoinExec`s.
///
/// ```no_run
/// # async fn f() -> gpujoin_ballista::Result<()> {
/// let options = gpujoin_ballista::SchedulerOptions::default();
/// let config = gpujoin_ballista::scheduler_config(&options);
/// # Ok(()) }
/// ```
pub fn scheduler_config(options: &SchedulerOptions) -> SchedulerConfig {
    let mut config = SchedulerConfig::default()
        .with_hostname(options.bind.ip().to_string())
        .with_port(options.bind.port());
    config.bind_host = options.bind.ip().to_string();
    config.min_ready_executors = options.min_ready_executors;
    config.executor_timeout_seconds = options.executor_timeout_seconds;
    config.no_executors_grace_period_seconds = options.executor_timeout_seconds;
    config.expire_dead_executor_interval_seconds = (options.executor_timeout_seconds / 3).clamp(1, 15);
    config.override_physical_codec = Some(Arc::new(BallistaGpuCodec::default()));
    config.scheduling_policy = options.policy;
    // Ballista's default (Bias) fills one executor's slots first; round-robin spreads each
    // stage's tasks over the executors (Ballista recommends it with a single scheduler).
    config.task_distribution = TaskDistributionPolicy::RoundRobin;
    if options.gpu_rule {
        let gpu = distributed(options.gpu.clone());
        config.override_session_builder = Some(Arc::new(move |session: SessionConfig| {
            let state = default_session_builder(session)?;
            Ok(SessionStateBuilder::new_from_existing(state).with_gpu_joins(gpu.clone()).build())
        }));
    }
    config
}

/// Runs a scheduler until the process ends (or the server fails).
///
/// Its state counts executor losses and stage re-runs, and it answers the count on the guard
/// port ([`guard_addr`](crate::guard::guard_addr): its port + 1000), so that this crate's
/// clients refuse results that a re-run may have counted twice ([`crate::guard`]).
pub async fn run_scheduler(options: &SchedulerOptions) -> Result<()> {
    let config = scheduler_config(options);
    let plain = BallistaCluster::new_from_config(&config).await?;
    let events = Arc::new(Events::default());
    let cluster = BallistaCluster::new(
        Arc::new(GuardedClusterState { inner: plain.cluster_state(), events: Arc::clone(&events) }),
        Arc::new(GuardedJobState { inner: plain.job_state(), events: Arc::clone(&events) }),
    );
    guard::serve(guard_addr(options.bind), events).await?;
    start_server(cluster, options.bind, Arc::new(config)).await?;
    Ok(())
}

/// How an executor runs.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The CUDA device its joins run on: an index among the devices `CUDA_VISIBLE_DEVICES`
    /// exposes (default 0; one executor per GPU: `CUDA_VISIBLE_DEVICES=1 gpujoin-ballista
    /// executor`, or `--gpu 1`).
    pub gpu: usize,
    /// The scheduler's gRPC address (default `127.0.0.1:50050`).
    pub scheduler: SocketAddr,
    /// Host to bind and advertise (default `127.0.0.1`).
    pub host: String,
    /// Arrow Flight port (shuffle data, results; default 50051).
    pub port: u16,
    /// gRPC port (tasks pushed by the scheduler; default 50052).
    pub grpc_port: u16,
    /// Task slots (default: the CPU cores).
    pub vcores: usize,
    /// Shuffle files (default: a temporary folder).
    pub work_dir: Option<String>,
    /// Seconds between heartbeats (default 60, Ballista's; the local cluster uses 2, so
    /// that executors find a restarted scheduler quickly).
    pub heartbeat_seconds: u64,
    /// As the scheduler's ([`SchedulerOptions::policy`]).
    pub policy: TaskSchedulingPolicy,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            gpu: 0,
            scheduler: SocketAddr::from(([127, 0, 0, 1], 50050)),
            host: "127.0.0.1".into(),
            port: 50051,
            grpc_port: 50052,
            vcores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            work_dir: None,
            heartbeat_seconds: 60,
            policy: TaskSchedulingPolicy::PushStaged,
        }
    }
}

/// Ballista's executor configuration with [`BallistaGpuCodec::for_executor`]: the stages it
/// receives decode with their `GpuJoinExec`s, which run on `options.gpu`.
pub fn executor_config(options: &ExecutorOptions) -> ExecutorProcessConfig {
    ExecutorProcessConfig {
        bind_host: options.host.clone(),
        external_host: Some(options.host.clone()),
        port: options.port,
        grpc_port: options.grpc_port,
        scheduler_host: options.scheduler.ip().to_string(),
        scheduler_port: options.scheduler.port(),
        scheduler_connect_timeout_seconds: 30,
        vcores: options.vcores,
        work_dir: options.work_dir.clone(),
        executor_heartbeat_interval_seconds: options.heartbeat_seconds,
        task_scheduling_policy: options.policy,
        override_physical_codec: Some(Arc::new(BallistaGpuCodec::for_executor(options.gpu))),
        ..ExecutorProcessConfig::default()
    }
}

/// Runs an executor until the process ends (SIGTERM, Ctrl-C, or the scheduler stops it).
pub async fn run_executor(options: &ExecutorOptions) -> Result<()> {
    start_executor_process(Arc::new(executor_config(options))).await?;
    Ok(())
}

/// A client session of the scheduler at `url` (`df://127.0.0.1:50050`, or `http://...`) with
/// [`BallistaGpuCodec`], [`BATCH_ROWS`] rows per batch, `partitions` target partitions
/// (`None`: Ballista's 16) and hash joins (`datafusion.optimizer.prefer_hash_join`, which
/// Ballista turns off because DataFusion's hash join does not spill; `GpuJoinRule` replaces
/// hash joins, not sort-merge joins) and Ballista's static planner (its adaptive planner,
/// `ballista.planner.adaptive.enabled`, picks joins at run time, after the rule). Queries go to the scheduler as logical plans; it plans them
/// with the rule and ships the stages, `GpuJoinExec`s included, to the executors.
///
/// ```no_run
/// # async fn f() -> gpujoin_ballista::Result<()> {
/// let ctx = gpujoin_ballista::client("df://127.0.0.1:50050", None).await?;
/// ctx.sql("SELECT 1").await?.show().await?;
/// # Ok(()) }
/// ```
pub async fn client(url: &str, partitions: Option<usize>) -> Result<SessionContext> {
    let mut config = SessionConfig::new_with_ballista()
        // Ballista prefers sort-merge joins (they spill); GpuJoinRule replaces hash joins.
        .set_bool("datafusion.optimizer.prefer_hash_join", true)
        // Ballista's adaptive planner (AQE, on by default) chooses the joins at run time with
        // its own rules, after GpuJoinRule has run: the static planner keeps the rule's plan.
        .with_ballista_adaptive_query_planner(false)
        .with_batch_size(BATCH_ROWS)
        .with_ballista_physical_extension_codec(Arc::new(BallistaGpuCodec::default()));
    if let Some(p) = partitions {
        config = config.with_target_partitions(p);
    }
    let state = SessionStateBuilder::new().with_default_features().with_config(config).build();
    let ctx = SessionContext::remote_with_state(url, state).await?;
    // Guarded where the scheduler has a guard (this crate's does; a plain Ballista scheduler
    // has none, and its results after an executor loss are not checked).
    let guard = guard_addr(parse_addr(url)?);
    if let Err(e) = guard::read(guard).await {
        log::warn!("no executor-loss guard at {guard} ({e}): results after an executor loss are not checked");
        return Ok(ctx);
    }
    let state = ctx.state();
    let planner = GuardedPlanner { inner: Arc::clone(state.query_planner()), guard };
    Ok(SessionContext::new_with_state(SessionStateBuilder::new_from_existing(state).with_query_planner(Arc::new(planner)).build()))
}

/// `host:port` to a socket address (names resolved), as the subcommands take them.
pub fn parse_addr(text: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let text = text.strip_prefix("df://").or_else(|| text.strip_prefix("http://")).unwrap_or(text);
    text.to_socket_addrs()
        .map_err(|e| Error::Usage(format!("not a host:port address: {text:?} ({e})")))?
        .find(|a| a.is_ipv4())
        .ok_or_else(|| Error::Usage(format!("{text:?} resolves to no IPv4 address")))
}

/// A local session that plans as a Ballista client does (Ballista's configuration, hash joins,
/// [`BATCH_ROWS`] rows per batch) with [`GpuJoinRule`](gpujoin_datafusion::GpuJoinRule) (`gpu`,
/// or none): its physical plans go to the cluster with [`run_planned_here`].
pub fn planner(gpu: Option<GpuJoinConfig>) -> SessionContext {
    let config = SessionConfig::new_with_ballista()
        .set_bool("datafusion.optimizer.prefer_hash_join", true)
        .with_batch_size(BATCH_ROWS)
        .with_ballista_physical_extension_codec(Arc::new(BallistaGpuCodec::default()));
    let mut builder = SessionStateBuilder::new().with_default_features().with_config(config);
    if let Some(gpu) = gpu {
        builder = builder.with_gpu_joins(distributed(gpu));
    }
    SessionContext::new_with_state(builder.build())
}

/// `gpu` for plans whose partitions run as Ballista's tasks, each in its own plan instance:
/// no matched-rows bitmap shared across partitions
/// ([`GpuJoinConfig::shared_matched_rows`] off), so that a `CollectLeft` Left, Full, LeftSemi
/// or LeftAnti GPU join takes its probe side in one partition (one task) and the rule keeps
/// `Partitioned` ones so, as Ballista's planner keeps its own hash joins of those types; and no
/// probe-side filters by a join's build keys ([`GpuJoinConfig::probe_key_filters`] off: they
/// share the keys through memory, and a filter in a stage of its own would pass every row).
fn distributed(gpu: GpuJoinConfig) -> GpuJoinConfig {
    GpuJoinConfig { shared_matched_rows: false, probe_key_filters: false, ..gpu }
}

/// Plans `sql` here, in `planner` (see [`planner`]: with the rule, the plan holds the
/// `GpuJoinExec`s), and runs the physical plan on the cluster at `url`: the plan travels to
/// the scheduler through [`BallistaGpuCodec`], which splits it into stages for the executors.
/// Returns the answer.
///
/// ```no_run
/// # async fn f() -> gpujoin_ballista::Result<()> {
/// let here = gpujoin_ballista::planner(Some(gpujoin_datafusion::GpuJoinConfig::default()));
/// gpujoin_ballista::register_tpch(&here, "/tmp/tpch-sf1".as_ref()).await?;
/// let batches = gpujoin_ballista::run_planned_here("df://127.0.0.1:50050", &here, "SELECT count(*) FROM orders JOIN customer ON o_custkey = c_custkey").await?;
/// # Ok(()) }
/// ```
pub async fn run_planned_here(url: &str, planner: &SessionContext, sql: &str) -> Result<Vec<datafusion::arrow::array::RecordBatch>> {
    use datafusion_proto::protobuf::PhysicalPlanNode;
    let plan = planner.sql(sql).await?.create_physical_plan().await?;
    let scheduler = format!("http://{}", parse_addr(url)?);
    let config = planner.copied_config();
    let ballista = config.ballista_config();
    let guard = guard_addr(parse_addr(url)?);
    let before = guard::read(guard).await.ok();
    let stream = ballista_core::execution_plans::execute_physical_plan::<PhysicalPlanNode>(scheduler, &ballista, plan, &BallistaGpuCodec::default(), planner.session_id(), config).await?;
    let batches = datafusion::physical_plan::common::collect(stream).await?;
    // As a guarded client's queries ([`crate::guard`]).
    if let Some(before) = before {
        let after = guard::read(guard).await?;
        if after != before {
            return Err(guard::refused(before, after).into());
        }
    }
    Ok(batches)
}
