//! The executor-loss guard: never a wrong answer after a stage re-run.
//!
//! Ballista 55.0 re-runs stages when an executor is lost (heartbeat timeout) or a task cannot
//! fetch shuffle data from a dead executor; in this crate's fault test it then, about one run in
//! four, returned counts inflated by the re-run stages' output (see `tests/ballista.rs`). Until
//! Ballista fixes that, this crate's scheduler counts every such event and this crate's client
//! refuses the result of a query that overlapped one, with an error saying why:
//!
//! - [`GuardedClusterState`] and [`GuardedJobState`] wrap the scheduler's state: an executor
//!   removed, or a job's stage seen at a new attempt (`stage_attempt_num > 0`), adds one to
//!   [`Events`]. Both happen before a re-run stage's tasks can run.
//! - [`serve`] answers `<scheduler instance> <events>` on the guard port ([`guard_addr`]: the
//!   scheduler's port + [`GUARD_PORT_OFFSET`]).
//! - The client's query planner ([`GuardedPlanner`]) puts a [`GuardExec`] on top of each query:
//!   it reads the counter before the job is submitted and again when the job's first batch comes
//!   back (a distributed query's result is fetched only once its job has finished); a changed
//!   counter (or scheduler) fails the query instead of returning its rows.
//!
//! Any executor loss while a query runs fails it, also one that did not touch its stages, and
//! the events of other jobs count too: the guard errs on the side of an error.
//!
//! ```
//! use gpujoin_ballista::guard::{guard_addr, Events};
//! let events = Events::default();
//! events.executor_removed("exec-1");
//! assert_eq!(events.count(), 1);
//! assert_eq!(guard_addr("127.0.0.1:50050".parse().unwrap()).port(), 51050);
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ballista_core::error::Result as BallistaResult;
use ballista_core::serde::protobuf::{ExecutorHeartbeat, JobStatus};
use ballista_core::serde::scheduler::{ExecutorData, ExecutorMetadata};
use ballista_core::{JobId, JobStatusSubscriber};
use ballista_scheduler::cluster::{BoundTask, ClusterState, ClusterStateEventStream, ExecutorSlot, JobState, JobStateEventStream};
use ballista_scheduler::config::TaskDistributionPolicy;
use ballista_scheduler::state::execution_graph::ExecutionGraphBox;
use ballista_scheduler::state::execution_stage::ExecutionStage;
use ballista_scheduler::state::task_manager::JobInfoCache;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::context::QueryPlanner;
use datafusion::catalog::Session;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::{StreamExt, TryStreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The guard port is the scheduler's port plus this (50050 -> 51050).
pub const GUARD_PORT_OFFSET: u16 = 1000;

/// Where the guard of the scheduler at `scheduler` answers.
pub fn guard_addr(scheduler: SocketAddr) -> SocketAddr {
    SocketAddr::new(scheduler.ip(), scheduler.port().wrapping_add(GUARD_PORT_OFFSET))
}

/// Executor losses and stage re-runs the scheduler has seen, and which scheduler instance saw
/// them (a restarted scheduler counts from 0 again under a new instance number).
#[derive(Debug)]
pub struct Events {
    instance: u64,
    count: AtomicU64,
    reruns: Mutex<HashSet<(String, usize, usize)>>,
}

impl Default for Events {
    fn default() -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Events { instance: nanos ^ u64::from(std::process::id()).rotate_left(32), count: AtomicU64::new(0), reruns: Mutex::new(HashSet::new()) }
    }
}

impl Events {
    /// Events so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// An executor left the cluster (lost, or stopped).
    pub fn executor_removed(&self, executor_id: &str) {
        log::warn!("gpujoin guard: executor {executor_id} removed; queries running now will be refused");
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts each stage of `graph` at an attempt after the first, once per attempt.
    pub fn saw_graph(&self, graph: &ExecutionGraphBox) {
        for (id, stage) in graph.stages() {
            let attempt = stage_attempt(stage);
            if attempt > 0 && self.reruns.lock().unwrap_or_else(|p| p.into_inner()).insert((graph.job_id().to_string(), *id, attempt)) {
                log::warn!("gpujoin guard: job {} re-runs stage {id} (attempt {attempt}); its result will be refused", graph.job_id());
                self.count.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// The guard's answer: `<instance> <count>`.
    fn answer(&self) -> String {
        format!("{} {}\n", self.instance, self.count())
    }
}

fn stage_attempt(stage: &ExecutionStage) -> usize {
    match stage {
        ExecutionStage::UnResolved(s) => s.stage_attempt_num,
        ExecutionStage::Resolved(s) => s.stage_attempt_num,
        ExecutionStage::Running(s) => s.stage_attempt_num,
        ExecutionStage::Successful(s) => s.stage_attempt_num,
        ExecutionStage::Failed(s) => s.stage_attempt_num,
    }
}

/// Answers every connection on `addr` with `events`' instance and count, until the process
/// ends; returns the address it listens on (the port the system chose where `addr`'s is 0).
pub async fn serve(addr: SocketAddr, events: Arc<Events>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { continue };
            let answer = events.answer();
            tokio::spawn(async move {
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok(bound)
}

/// A reading of a guard: which scheduler instance, and its event count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub instance: u64,
    pub events: u64,
}

/// Reads the guard at `addr`.
pub async fn read(addr: SocketAddr) -> std::io::Result<Reading> {
    let mut socket = tokio::time::timeout(std::time::Duration::from_secs(10), tokio::net::TcpStream::connect(addr)).await.map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting to the guard"))??;
    let mut text = String::new();
    socket.read_to_string(&mut text).await?;
    let mut words = text.split_whitespace().map(str::parse::<u64>);
    match (words.next(), words.next()) {
        (Some(Ok(instance)), Some(Ok(events))) => Ok(Reading { instance, events }),
        _ => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not a guard's answer: {text:?}"))),
    }
}

/// The scheduler's cluster state, counting removed executors in [`Events`].
pub struct GuardedClusterState {
    pub inner: Arc<dyn ClusterState>,
    pub events: Arc<Events>,
}

#[async_trait]
impl ClusterState for GuardedClusterState {
    async fn init(&self) -> BallistaResult<()> {
        self.inner.init().await
    }
    async fn bind_schedulable_tasks(&self, distribution: TaskDistributionPolicy, active_jobs: Arc<HashMap<JobId, JobInfoCache>>, executors: Option<HashSet<String>>) -> BallistaResult<Vec<BoundTask>> {
        self.inner.bind_schedulable_tasks(distribution, active_jobs, executors).await
    }
    async fn unbind_tasks(&self, executor_slots: Vec<ExecutorSlot>) -> BallistaResult<()> {
        self.inner.unbind_tasks(executor_slots).await
    }
    async fn register_executor(&self, metadata: ExecutorMetadata, spec: ExecutorData) -> BallistaResult<()> {
        self.inner.register_executor(metadata, spec).await
    }
    async fn save_executor_metadata(&self, metadata: ExecutorMetadata) -> BallistaResult<()> {
        self.inner.save_executor_metadata(metadata).await
    }
    async fn get_executor_metadata(&self, executor_id: &str) -> BallistaResult<ExecutorMetadata> {
        self.inner.get_executor_metadata(executor_id).await
    }
    async fn registered_executor_metadata(&self) -> Vec<ExecutorMetadata> {
        self.inner.registered_executor_metadata().await
    }
    async fn save_executor_heartbeat(&self, heartbeat: ExecutorHeartbeat) -> BallistaResult<()> {
        self.inner.save_executor_heartbeat(heartbeat).await
    }
    async fn remove_executor(&self, executor_id: &str) -> BallistaResult<()> {
        // Counted before the scheduler rolls the lost executor's stages back.
        self.events.executor_removed(executor_id);
        self.inner.remove_executor(executor_id).await
    }
    fn executor_heartbeats(&self) -> HashMap<String, ExecutorHeartbeat> {
        self.inner.executor_heartbeats()
    }
    fn get_executor_heartbeat(&self, executor_id: &str) -> Option<ExecutorHeartbeat> {
        self.inner.get_executor_heartbeat(executor_id)
    }
    async fn cluster_state_events(&self) -> BallistaResult<ClusterStateEventStream> {
        self.inner.cluster_state_events().await
    }
}

/// The scheduler's job state, counting stage re-runs in [`Events`] as jobs are saved.
pub struct GuardedJobState {
    pub inner: Arc<dyn JobState>,
    pub events: Arc<Events>,
}

#[async_trait]
impl JobState for GuardedJobState {
    fn accept_job(&self, job_id: &JobId, job_name: &str, queued_at: u64) -> BallistaResult<()> {
        self.inner.accept_job(job_id, job_name, queued_at)
    }
    fn pending_job_number(&self) -> usize {
        self.inner.pending_job_number()
    }
    async fn submit_job(&self, job_id: JobId, graph: &ExecutionGraphBox, subscriber: Option<JobStatusSubscriber>) -> BallistaResult<()> {
        self.inner.submit_job(job_id, graph, subscriber).await
    }
    async fn get_jobs(&self) -> BallistaResult<HashSet<JobId>> {
        self.inner.get_jobs().await
    }
    async fn get_all_jobs(&self) -> BallistaResult<HashSet<JobId>> {
        self.inner.get_all_jobs().await
    }
    async fn get_job_status(&self, job_id: &JobId) -> BallistaResult<Option<JobStatus>> {
        self.inner.get_job_status(job_id).await
    }
    async fn get_execution_graph(&self, job_id: &JobId) -> BallistaResult<Option<ExecutionGraphBox>> {
        self.inner.get_execution_graph(job_id).await
    }
    async fn save_job(&self, job_id: &JobId, graph: &ExecutionGraphBox) -> BallistaResult<()> {
        // Saved after every batch of task updates: a stage rolled back there runs again only
        // after this.
        self.events.saw_graph(graph);
        self.inner.save_job(job_id, graph).await
    }
    async fn fail_unscheduled_job(&self, job_id: &JobId, reason: String) -> BallistaResult<()> {
        self.inner.fail_unscheduled_job(job_id, reason).await
    }
    async fn remove_job(&self, job_id: &JobId) -> BallistaResult<()> {
        self.inner.remove_job(job_id).await
    }
    async fn try_acquire_job(&self, job_id: &JobId) -> BallistaResult<Option<ExecutionGraphBox>> {
        self.inner.try_acquire_job(job_id).await
    }
    async fn job_state_events(&self) -> BallistaResult<JobStateEventStream> {
        self.inner.job_state_events().await
    }
    async fn create_or_update_session(&self, session_id: &str, config: &SessionConfig) -> BallistaResult<Arc<SessionContext>> {
        self.inner.create_or_update_session(session_id, config).await
    }
    async fn remove_session(&self, session_id: &str) -> BallistaResult<()> {
        self.inner.remove_session(session_id).await
    }
    fn produce_config(&self) -> SessionConfig {
        self.inner.produce_config()
    }
}

/// The client's query planner: Ballista's, with a [`GuardExec`] on top of every plan.
#[derive(Debug)]
pub struct GuardedPlanner {
    pub inner: Arc<dyn QueryPlanner + Send + Sync>,
    pub guard: SocketAddr,
}

#[async_trait]
impl QueryPlanner for GuardedPlanner {
    async fn create_physical_plan(&self, logical_plan: &LogicalPlan, session_state: &dyn Session) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = self.inner.create_physical_plan(logical_plan, session_state).await?;
        Ok(Arc::new(GuardExec::new(plan, self.guard)))
    }
}

/// Runs its input (a distributed query) and refuses its result when the scheduler's guard saw
/// an executor loss or a stage re-run between the job's submission and its first batch.
#[derive(Debug)]
pub struct GuardExec {
    input: Arc<dyn ExecutionPlan>,
    guard: SocketAddr,
    cache: Arc<PlanProperties>,
}

impl GuardExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, guard: SocketAddr) -> GuardExec {
        let cache = Arc::clone(input.properties());
        GuardExec { input, guard, cache }
    }
}

impl DisplayAs for GuardExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "GuardExec: guard={}", self.guard)
    }
}

/// The error of a refused result.
pub fn refused(before: Reading, after: Reading) -> DataFusionError {
    let what = if before.instance != after.instance {
        "the scheduler restarted".to_string()
    } else {
        format!("the scheduler lost an executor or re-ran a stage ({} events)", after.events.saturating_sub(before.events))
    };
    DataFusionError::Execution(format!(
        "gpujoin-ballista refused the query's result: {what} while it ran. Ballista 55.0 can count a re-run stage's output twice, so the answer may be wrong; run the query again"
    ))
}

fn guard_error(guard: SocketAddr, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!("gpujoin-ballista: cannot read the scheduler's executor-loss guard at {guard}: {e}"))
}

impl ExecutionPlan for GuardExec {
    fn name(&self) -> &str {
        "GuardExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(&self, _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>, _options: ReplaceChildrenOptions) -> Result<Arc<dyn ExecutionPlan>> {
        let [input]: [Arc<dyn ExecutionPlan>; 1] = children.try_into().map_err(|_| DataFusionError::Internal("GuardExec has one child".into()))?;
        Ok(Arc::new(GuardExec::new(input, self.guard)))
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let (input, guard, schema) = (Arc::clone(&self.input), self.guard, self.input.schema());
        let checked = async move {
            let before = read(guard).await.map_err(|e| guard_error(guard, e))?;
            let mut stream = input.execute(partition, context)?;
            // The first batch comes once the job has finished (or there is none).
            let first = stream.next().await.transpose()?;
            let after = read(guard).await.map_err(|e| guard_error(guard, e))?;
            if after != before {
                return Err(refused(before, after));
            }
            Ok(futures::stream::iter(first.map(Ok)).chain(stream))
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, futures::stream::once(checked).try_flatten())))
    }
}
