//! [`GpuJoinExec`]: a join of two DataFusion inputs on the GPU, through
//! [`gpujoin_arrow::join_on`]: on key columns (an equi-join, with an optional filter), or without
//! keys (a theta join on the filter, or a cross join; `CollectLeft` only).
//!
//! # Execution
//!
//! * `Partitioned`: partition `p` collects partition `p` of both inputs (hash-partitioned on the
//!   keys by DataFusion) and joins them on the device.
//! * `CollectLeft`: the left (build) input, one partition, is collected once and shared by every
//!   output partition; each probe partition is joined with it. Joins that return build rows by
//!   whether any probe row matched them (Left, Full, LeftSemi, LeftAnti) keep a matched-rows
//!   bitmap of the build side that every probe partition sets, and the partition that finishes
//!   last sends those build rows (the unmatched ones with NULLs for the probe side; LeftSemi's
//!   matched ones), as DataFusion's `HashJoinExec` does; joins without keys (theta, cross)
//!   too. With device gathers, or without [`GpuJoinConfig::shared_matched_rows`] (an engine
//!   whose partitions run apart, Ballista's tasks), these joins share no bitmap and take the probe side in **one**
//!   partition ([`Distribution::SinglePartition`]; [`GpuJoinExec::try_new`] puts a
//!   `CoalescePartitionsExec` over a right input of more), so they run once, whole.
//!
//! Equi-joins gathered on the host stream their probe side as DataFusion's hash join does: the
//! build side goes to the device once, and the probe input is read a part at a time
//! ([`GpuJoinConfig::probe_part_rows`]); each part is joined on the device while the next one is
//! read, and its output is sent on before the input ends. Example: a probe partition of 4·10^6
//! rows against a build side of 3·10^5 rows comes in parts of at least 2^20 rows (whole
//! batches; the last part smaller) and makes four device joins (`device_joins`). A part of a
//! join with a matched-rows bitmap runs as Inner (Left), Right (Full) or LeftSemi (LeftSemi and
//! LeftAnti: the build rows it matched, which it marks and does not send). The other joins
//! collect their probe partition whole.
//!
//! The device work (upload, join, download) runs in `tokio::task::spawn_blocking`, one call per
//! output partition; the output comes in batches of the session's batch size
//! ([`GpuJoinConfig::batch_rows`] overrides it). A partition where one input is empty is
//! answered on the host, without the device.
//!
//! Where the output columns are gathered ([`GpuJoinConfig::gather`]):
//!
//! * [`OutputGather::Host`] (the default): only the key and filter columns go to the device
//!   (a side with neither, as in a cross join, sends its output columns to carry its rows);
//!   the join comes back as row indices ([`JoinIndices`], 4 bytes a row a side) and each output
//!   batch is taken from the input batches on the partition's thread (`take`). Example: `orders
//!   JOIN lineitem ON o_orderkey = l_orderkey` selecting five lineitem columns uploads
//!   `l_orderkey` only.
//! * [`OutputGather::Device`] (and the explicit clustered algorithms): every output column goes
//!   to the device and comes back gathered.
//!
//! # Output
//!
//! The schema is the one DataFusion's join operators (`HashJoinExec`, `NestedLoopJoinExec`,
//! `CrossJoinExec`, `SortMergeJoinExec`, `SymmetricHashJoinExec`) give the same join: its join schema (left fields then right fields, nullable
//! where an outer join pads; one side for semi and anti joins), projected; the rule checks that
//! it is equal before it replaces one. gpujoin returns the input types (`Utf8View`, time zones and nullability
//! restored by the download schema) with dictionaries decoded; dictionary columns are cast back.
//! Rows come in the order of the algorithm that ran: no output ordering is declared.
//!
//! # Metrics (`EXPLAIN ANALYZE`)
//!
//! `output_rows`, `elapsed_compute` (the device work of the partition), `build_input_rows`,
//! `input_rows` (probe side), `upload_time` (both inputs to the device and the join's checks),
//! `join_time` (host gathers: the device join; device gathers: until the first output batch is
//! on the host, the join and the first download window), `download_time` (host gathers: the
//! row indices' copy; device gathers: the rest of the output), `gather_time` (host gathers:
//! taking the output batches from the input batches, their concatenation included), with host
//! gathers the uploads' parts: `upload_staging_wait` (waiting for a pinned staging buffer),
//! `upload_host_copy` (filling them; both summed over the staging threads, so they may exceed
//! `upload_time`), `upload_issue` (queueing the device copies, summed likewise),
//! `upload_staging` (the staging passes' wall time), `upload_copy_wait` (the device copies
//! finishing after the last one was queued) and `upload_setup` (opening the device and a stream
//! before an upload), `device_joins` (one a partition, or one a probe part),
//! `peak_device_memory` (bytes: the device pool's high-water mark when the partition's join
//! ended; the pool is the process's, so joins running at once count together), `device_lane_wait`
//! (waiting for a device lane, not in `elapsed_compute`), and how chatty the device work was on
//! the partition's thread: `device_calls` (kernel launches and CUB calls) with their time
//! `device_call_time`, `host_waits` (waits for the device, a read of a count included) with
//! `host_wait_time`, and `device_allocs` (allocations from the device's pool) with
//! `pool_call_time` (those allocations and the frees). The algorithm is in the operator's line
//! (`algorithm=...`).

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, RecordBatch, RecordBatchIterator, RecordBatchOptions, UInt32Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::compute::{cast, concat, interleave, take};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, plan_err, DataFusionError, JoinType as DfJoinType, NullEquality as DfNullEquality, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::equivalence::{join_equivalence_properties, ProjectionMapping};
use datafusion::physical_expr::{Distribution, Partitioning, PhysicalExpr, PhysicalExprRef};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::common::collect;
use datafusion::physical_plan::distribution_requirements::InputDistributionRequirements;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::joins::utils::{adjust_right_output_partitioning, build_join_schema, JoinFilter};
use datafusion::physical_plan::joins::PartitionMode;
use datafusion::physical_plan::metrics::{BaselineMetrics, Count, ExecutionPlanMetricsSet, Gauge, MetricBuilder, MetricsSet, Time};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{
    apply_expression_roots, ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream,
};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use rayon::prelude::*;
use futures::{FutureExt, StreamExt};
use gpujoin_arrow::{concat_views, join_indices_on, join_on, join_shared_on, DeviceInput, JoinIndices, JoinSpec, StagingOptions, StagingStats};
use gpujoin_join::predicate::Side;
use tokio::sync::mpsc::Sender;
use tokio::sync::OnceCell;

use crate::lanes::Lane;
use crate::translate::{device_name, needs_whole_probe_side, plan_join, JoinPlan};
use crate::key_filter::BuildKeys;
use crate::{GpuJoinConfig, OutputGather};

/// The build side of a partition's join: its batches on the host and its join columns uploaded
/// once, when first needed: for a `CollectLeft` join (`shared`) by the first output partition
/// that has probe rows, for every output partition; for a `Partitioned` one by its partition,
/// for every part of a streamed probe side.
struct BuildSide {
    host: Vec<RecordBatch>,
    shared: bool,
    device: OnceLock<std::result::Result<Arc<DeviceInput>, Arc<DataFusionError>>>,
    /// The output columns of the build side, each in one array (host gathers), made once.
    columns: OnceLock<std::result::Result<HostColumns, Arc<DataFusionError>>>,
    /// Joins that return build rows by whether any probe row matched them ([`MatchedRows`]).
    matched: Option<MatchedRows>,
}

impl BuildSide {
    /// `probing`: the probe partitions that join with this build side, for the joins that keep
    /// its matched rows (`None` for the others).
    fn new(host: Vec<RecordBatch>, shared: bool, probing: Option<usize>) -> Self {
        let rows = host.iter().map(RecordBatch::num_rows).sum();
        BuildSide { host, shared, device: OnceLock::new(), columns: OnceLock::new(), matched: probing.map(|p| MatchedRows::new(rows, p)) }
    }
}

/// The matched-rows bitmap of a build side (a bit a row, set where some probe row matched it,
/// the filter included) and the probe partitions still joining with it: the joins that return
/// build rows by it (Left, Full: the unmatched ones with NULLs for the probe side; LeftSemi the
/// matched, LeftAnti the unmatched ones) join each probe part as Inner, Right, or LeftSemi (the
/// matched build rows) and set the bits; the partition that finishes last sends the build
/// rows. A `CollectLeft` join's partitions share one, so every probe partition runs at once.
///
/// Example: `build LEFT JOIN probe` with build keys `[1, 2, 3]` and two probe partitions
/// holding keys `[1]` and `[3, 3]`: the partitions send the pairs `(0, 0)` and `(2, 0), (2, 1)`
/// (build row, probe row), bits 0 and 2 are set, and the last one to finish also sends build
/// row 1 with NULLs.
struct MatchedRows {
    /// The build side's rows.
    rows: usize,
    bits: Vec<std::sync::atomic::AtomicU64>,
    probing: std::sync::atomic::AtomicUsize,
}

impl MatchedRows {
    fn new(rows: usize, probing: usize) -> Self {
        MatchedRows { rows, bits: (0..rows.div_ceil(64)).map(|_| std::sync::atomic::AtomicU64::new(0)).collect(), probing: std::sync::atomic::AtomicUsize::new(probing) }
    }

    /// Sets the bits of the build rows `indices` (null indices, a probe row without a match
    /// in a Right join, set nothing).
    fn set(&self, indices: &UInt32Array) {
        use std::sync::atomic::Ordering::Relaxed;
        // Runs of indices in one word set it once.
        let (mut word, mut mask) = (usize::MAX, 0u64);
        for i in indices.iter().flatten() {
            let (w, b) = (i as usize / 64, i as usize % 64);
            if w != word {
                if mask != 0 {
                    self.bits[word].fetch_or(mask, Relaxed);
                }
                (word, mask) = (w, 0);
            }
            mask |= 1 << b;
        }
        if mask != 0 {
            self.bits[word].fetch_or(mask, Relaxed);
        }
    }

    /// A probe partition has finished: whether it was the last one.
    fn finished(&self) -> bool {
        self.probing.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1
    }

    /// The build rows whose bit is `matched`, ascending.
    fn rows(&self, matched: bool) -> Vec<u32> {
        use std::sync::atomic::Ordering::Acquire;
        let mut out = Vec::new();
        for (w, word) in self.bits.iter().enumerate() {
            let mut bits = word.load(Acquire);
            if !matched {
                bits = !bits;
            }
            while bits != 0 {
                let row = w * 64 + bits.trailing_zeros() as usize;
                if row >= self.rows {
                    break;
                }
                out.push(row as u32);
                bits &= bits - 1;
            }
        }
        out
    }
}

/// Input columns of one side, by index in its schema, each concatenated into one array (the
/// host gathers take from them through the join's row indices).
type HostColumns = HashMap<usize, ArrayRef>;

/// The columns `wanted` of `batches` (indices into their schema), each in one array.
fn host_columns(batches: &[RecordBatch], wanted: impl Iterator<Item = usize>) -> Result<HostColumns> {
    let mut out = HashMap::new();
    for i in wanted {
        if out.contains_key(&i) {
            continue;
        }
        let column = match batches {
            [one] => Arc::clone(one.column(i)),
            _ => {
                let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(i).as_ref()).collect();
                // View arrays with their shared buffers listed once (chained joins).
                match concat_views(&parts)? {
                    Some(c) => c,
                    None => concat(&parts)?,
                }
            }
        };
        out.insert(i, column);
    }
    Ok(out)
}

impl fmt::Debug for BuildSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let uploaded = self.device.get().map(|d| d.as_ref().map(|d| d.num_rows()).map_err(|e| e.to_string()));
        f.debug_struct("BuildSide").field("batches", &self.host.len()).field("shared", &self.shared).field("uploaded", &uploaded).finish()
    }
}

/// The collected build side, shared by the output partitions of a `CollectLeft` join.
type SharedLeft = std::result::Result<Arc<BuildSide>, Arc<DataFusionError>>;

/// A join (Inner, Left, Right, Full, LeftSemi, LeftAnti, RightSemi, RightAnti) on key columns
/// and/or a filter, run on the GPU. See the [module docs](self).
#[derive(Debug)]
pub struct GpuJoinExec {
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    on: Vec<(PhysicalExprRef, PhysicalExprRef)>,
    filter: Option<JoinFilter>,
    join_type: DfJoinType,
    null_equality: DfNullEquality,
    projection: Option<Vec<usize>>,
    mode: PartitionMode,
    config: GpuJoinConfig,
    /// The CPU operator this one replaced (`EXPLAIN` shows it).
    replaces: Option<String>,
    /// The keys of the first key column of a `CollectLeft` build side, for the filters of the
    /// probe side ([`BuildKeys`]).
    build_keys: Option<Arc<BuildKeys>>,
    plan: Arc<JoinPlan>,
    cache: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    left_once: Arc<OnceCell<SharedLeft>>,
}

impl GpuJoinExec {
    /// A GPU join of `left` and `right` on the column pairs `on` (column references into each
    /// input's schema; none for a theta join on `filter` or a cross join, in `CollectLeft` mode),
    /// with `filter` (DataFusion's `JoinFilter`: comparisons of columns and
    /// literals combined with AND, OR, NOT), `join_type`, `null_equality`, `projection` (indices
    /// into the join schema, as `HashJoinExec`'s) and `mode` (`CollectLeft` or `Partitioned`).
    /// `config` gives the algorithm, the device, the batch size and the chunking.
    ///
    /// Anything gpujoin cannot run is an error naming it (`DataFusionError::NotImplemented`):
    /// mark joins, keys that are not columns or not of a device type, filters it cannot
    /// express, output columns of unsupported types, float keys without
    /// [`GpuJoinConfig::allow_float_semantics`].
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        on: Vec<(PhysicalExprRef, PhysicalExprRef)>,
        filter: Option<JoinFilter>,
        join_type: DfJoinType,
        null_equality: DfNullEquality,
        projection: Option<Vec<usize>>,
        mode: PartitionMode,
        config: GpuJoinConfig,
    ) -> Result<Self> {
        if mode == PartitionMode::Auto {
            return plan_err!("GpuJoinExec: PartitionMode::Auto; run JoinSelection first (CollectLeft or Partitioned)");
        }
        if on.is_empty() && mode != PartitionMode::CollectLeft {
            return plan_err!("GpuJoinExec: a join without keys (theta or cross) runs in CollectLeft mode");
        }
        let (ls, rs) = (left.schema(), right.schema());
        let plan = plan_join(&ls, &rs, &on, filter.as_ref(), join_type, null_equality, projection.as_deref(), &config).map_err(|r| DataFusionError::NotImplemented(format!("GpuJoinExec: {r}")))?;
        let right = if single_probe(mode, join_type, &plan, &config) { one_partition(right) } else { right };
        let cache = Arc::new(Self::compute_properties(&left, &right, join_type, &on, mode, projection.as_deref())?);
        Ok(GpuJoinExec {
            left,
            right,
            on,
            filter,
            join_type,
            null_equality,
            projection,
            mode,
            config,
            replaces: None,
            build_keys: None,
            plan: Arc::new(plan),
            cache,
            metrics: ExecutionPlanMetricsSet::new(),
            left_once: Arc::new(OnceCell::new()),
        })
    }

    /// Sets `keys` from the build side's first key column once it is collected (`CollectLeft`
    /// joins; see [`BuildKeys`] for the filters that read them). `EXPLAIN`: `build_keys=#<id>`.
    pub fn with_build_keys(mut self, keys: Arc<BuildKeys>) -> Self {
        self.build_keys = Some(keys);
        self
    }

    /// The same join (its notes `replaces` and `build_keys` too) over `left` and `right`.
    pub(crate) fn over(&self, left: Arc<dyn ExecutionPlan>, right: Arc<dyn ExecutionPlan>) -> Result<Self> {
        let mut exec = GpuJoinExec::try_new(left, right, self.on.clone(), self.filter.clone(), self.join_type, self.null_equality, self.projection.clone(), self.mode, self.config.clone())?;
        exec.replaces = self.replaces.clone();
        exec.build_keys = self.build_keys.clone();
        Ok(exec)
    }

    /// The build keys it sets ([`GpuJoinExec::with_build_keys`]).
    pub fn build_keys(&self) -> Option<&Arc<BuildKeys>> {
        self.build_keys.as_ref()
    }

    /// Notes the CPU operator this one replaces (shown by `EXPLAIN` as `replaces=...`).
    pub fn replacing(mut self, operator: impl Into<String>) -> Self {
        self.replaces = Some(operator.into());
        self
    }

    pub fn left(&self) -> &Arc<dyn ExecutionPlan> {
        &self.left
    }

    pub fn right(&self) -> &Arc<dyn ExecutionPlan> {
        &self.right
    }

    pub fn on(&self) -> &[(PhysicalExprRef, PhysicalExprRef)] {
        &self.on
    }

    pub fn filter(&self) -> Option<&JoinFilter> {
        self.filter.as_ref()
    }

    pub fn join_type(&self) -> DfJoinType {
        self.join_type
    }

    pub fn null_equality(&self) -> DfNullEquality {
        self.null_equality
    }

    pub fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }

    pub fn mode(&self) -> PartitionMode {
        self.mode
    }

    pub fn config(&self) -> &GpuJoinConfig {
        &self.config
    }

    /// The CPU operator this one replaced, when the rule made it.
    pub fn replaces(&self) -> Option<&str> {
        self.replaces.as_deref()
    }

    /// The join as gpujoin runs it: uploaded columns, keys, the filter as a typed predicate.
    pub fn join_plan(&self) -> &JoinPlan {
        &self.plan
    }

    /// Whether its probe partitions would share one matched-rows bitmap as a `CollectLeft` join
    /// (Left, Full, LeftSemi, LeftAnti with host gathers and
    /// [`GpuJoinConfig::shared_matched_rows`]).
    pub(crate) fn shares_matched_rows(&self) -> bool {
        shares_matched_rows(&self.plan, &self.config)
    }

    /// Whether the probe side is coalesced into one partition (CollectLeft joins that return
    /// the build side's unmatched rows).
    fn single_probe(&self) -> bool {
        single_probe(self.mode, self.join_type, &self.plan, &self.config)
    }

    fn compute_properties(
        left: &Arc<dyn ExecutionPlan>,
        right: &Arc<dyn ExecutionPlan>,
        join_type: DfJoinType,
        on: &[(PhysicalExprRef, PhysicalExprRef)],
        mode: PartitionMode,
        projection: Option<&[usize]>,
    ) -> Result<PlanProperties> {
        let (schema, _) = build_join_schema(&left.schema(), &right.schema(), &join_type);
        let schema = Arc::new(schema);
        // No input order survives (gpujoin's output order is its algorithm's).
        let mut eq = join_equivalence_properties(left.equivalence_properties().clone(), right.equivalence_properties().clone(), &join_type, Arc::clone(&schema), &[false, false], None, on)?;
        let left_len = left.schema().fields().len();
        let (lp, rp) = (left.output_partitioning(), right.output_partitioning());
        let mut partitioning = match mode {
            // As HashJoinExec's: partition p holds the keys of partition p of both sides.
            PartitionMode::Partitioned => match join_type {
                DfJoinType::Left | DfJoinType::LeftSemi | DfJoinType::LeftAnti | DfJoinType::LeftMark => lp.clone(),
                DfJoinType::RightSemi | DfJoinType::RightAnti | DfJoinType::RightMark => rp.clone(),
                DfJoinType::Inner | DfJoinType::Right => adjust_right_output_partitioning(rp, left_len)?,
                DfJoinType::Full => Partitioning::UnknownPartitioning(rp.partition_count()),
            },
            PartitionMode::CollectLeft => match join_type {
                DfJoinType::Inner | DfJoinType::Right => adjust_right_output_partitioning(rp, left_len)?,
                DfJoinType::RightSemi | DfJoinType::RightAnti | DfJoinType::RightMark => rp.clone(),
                _ => Partitioning::UnknownPartitioning(rp.partition_count()),
            },
            PartitionMode::Auto => return plan_err!("GpuJoinExec: PartitionMode::Auto"),
        };
        if let Some(p) = projection {
            let mapping = ProjectionMapping::from_indices(p, &schema)?;
            let out = Arc::new(schema.project(p)?);
            partitioning = partitioning.project(&mapping, &eq);
            eq = eq.project(&mapping, out);
        }
        Ok(PlanProperties::new(eq, partitioning, EmissionType::Final, Boundedness::Bounded))
    }

    fn batch_rows(&self, context: &TaskContext) -> usize {
        self.config.batch_rows.unwrap_or_else(|| context.session_config().batch_size()).max(1)
    }
}

impl DisplayAs for GpuJoinExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let on = self.on.iter().map(|(l, r)| format!("({l}, {r})")).collect::<Vec<_>>().join(", ");
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "GpuJoinExec: mode={:?}, join_type={:?}, on=[{on}]", self.mode, self.join_type)?;
                if let Some(filter) = &self.filter {
                    write!(f, ", filter={}", filter.expression())?;
                }
                if let Some(p) = &self.projection {
                    let names = ExecutionPlan::schema(self).fields().iter().zip(p).map(|(fld, i)| format!("{}@{i}", fld.name())).collect::<Vec<_>>().join(", ");
                    write!(f, ", projection=[{names}]")?;
                }
                if self.null_equality == DfNullEquality::NullEqualsNull {
                    write!(f, ", NullsEqual: true")?;
                }
                write!(f, ", algorithm={:?}", self.config.algorithm)?;
                if self.plan.gather == OutputGather::Device {
                    write!(f, ", gather=device")?;
                }
                if let (true, Some(rows)) = (probe_streams(&self.plan), self.config.probe_part_rows) {
                    write!(f, ", probe_part_rows={rows}")?;
                }
                if let Some(n) = self.config.device_lanes {
                    write!(f, ", device_lanes={n}")?;
                }
                if let Some(n) = self.config.block_cache_bytes {
                    write!(f, ", block_cache_bytes={n}")?;
                }
                if let Some(k) = &self.build_keys {
                    write!(f, ", build_keys=#{}", k.id())?;
                }
                if let Some(r) = &self.replaces {
                    write!(f, ", replaces={r}")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                if self.join_type != DfJoinType::Inner {
                    writeln!(f, "join_type={:?}", self.join_type)?;
                }
                writeln!(f, "on=[{on}]")?;
                writeln!(f, "algorithm={:?}", self.config.algorithm)?;
                if let Some(r) = &self.replaces {
                    writeln!(f, "replaces={r}")?;
                }
                Ok(())
            }
        }
    }
}

impl ExecutionPlan for GpuJoinExec {
    fn name(&self) -> &str {
        "GpuJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        match self.mode {
            PartitionMode::Partitioned => {
                let (l, r) = self.on.iter().map(|(l, r)| (Arc::clone(l), Arc::clone(r))).unzip();
                InputDistributionRequirements::co_partitioned(vec![Distribution::KeyPartitioned(l), Distribution::KeyPartitioned(r)])
            }
            _ => {
                let probe = if self.single_probe() { Distribution::SinglePartition } else { Distribution::UnspecifiedDistribution };
                InputDistributionRequirements::new(vec![Distribution::SinglePartition, probe])
            }
        }
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.left, &self.right]
    }

    fn apply_expressions(&self, f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>) -> Result<TreeNodeRecursion> {
        let keys = self.on.iter().flat_map(|(l, r)| [Arc::clone(l), Arc::clone(r)]);
        let filter = self.filter.iter().map(|f| Arc::clone(f.expression()));
        apply_expression_roots(keys.chain(filter), f)
    }

    fn replace_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>, _options: ReplaceChildrenOptions) -> Result<Arc<dyn ExecutionPlan>> {
        let [left, right]: [Arc<dyn ExecutionPlan>; 2] = match children.try_into() {
            Ok(c) => c,
            Err(c) => return internal_err!("GpuJoinExec has 2 children, got {}", c.len()),
        };
        Ok(Arc::new(self.over(left, right)?))
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        // A new run collects the build side again; until then its probe side's filters pass
        // every row.
        if let Some(k) = &self.build_keys {
            k.clear();
        }
        let children = vec![Arc::clone(&self.left), Arc::clone(&self.right)];
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let (lparts, rparts) = (self.left.output_partitioning().partition_count(), self.right.output_partitioning().partition_count());
        match self.mode {
            PartitionMode::Partitioned if lparts != rparts => {
                return internal_err!("GpuJoinExec (Partitioned): the inputs have {lparts} and {rparts} partitions; use RepartitionExec");
            }
            PartitionMode::CollectLeft if lparts != 1 => {
                return internal_err!("GpuJoinExec (CollectLeft): the left input has {lparts} partitions, not 1; use CoalescePartitionsExec");
            }
            PartitionMode::CollectLeft if self.single_probe() && rparts != 1 => {
                return internal_err!("GpuJoinExec (CollectLeft, {:?}): the right input has {rparts} partitions, not 1", self.join_type);
            }
            _ => {}
        }
        let metrics = GpuJoinMetrics::new(partition, &self.metrics, self.plan.gather == OutputGather::Host);
        // The probe partitions that join with one build side, for its matched-rows bitmap.
        let probing = keeps_matched_rows(&self.plan).then_some(if self.mode == PartitionMode::CollectLeft { rparts } else { 1 });
        let left: BoxFuture<'static, Result<Arc<BuildSide>>> = match self.mode {
            PartitionMode::CollectLeft => {
                let (once, input, ctx, rows) = (Arc::clone(&self.left_once), Arc::clone(&self.left), Arc::clone(&context), metrics.build_input_rows.clone());
                let keys = self.build_keys.clone().zip(self.on.first().map(|(l, _)| Arc::clone(l)));
                let nulls = self.null_equality;
                async move {
                    let shared = once
                        .get_or_init(|| async move {
                            let built = async {
                                let host = collect(input.execute(0, ctx)?).await?;
                                rows.add(host.iter().map(RecordBatch::num_rows).sum());
                                if let Some((keys, key)) = keys {
                                    gather_pool().install(|| keys.set_from(&host, &key, nulls));
                                }
                                Ok(Arc::new(BuildSide::new(host, true, probing)))
                            }
                            .await;
                            built.map_err(Arc::new)
                        })
                        .await;
                    shared.clone().map_err(DataFusionError::Shared)
                }
                .boxed()
            }
            _ => {
                let stream = self.left.execute(partition, Arc::clone(&context))?;
                let rows = metrics.build_input_rows.clone();
                async move {
                    let host = collect(stream).await?;
                    rows.add(host.iter().map(RecordBatch::num_rows).sum());
                    Ok(Arc::new(BuildSide::new(host, false, probing)))
                }
                .boxed()
            }
        };
        let right = self.right.execute(partition, Arc::clone(&context))?;
        let job = Job {
            plan: Arc::clone(&self.plan),
            left_schema: self.left.schema(),
            right_schema: self.right.schema(),
            schema: self.schema(),
            config: self.config.clone(),
            batch_rows: self.batch_rows(&context),
            metrics,
            waited: Cell::new(Duration::ZERO),
            device: std::cell::OnceCell::new(),
        };
        let streamed = probe_streams(&self.plan);
        let mut builder = RecordBatchReceiverStreamBuilder::new(self.schema(), 2);
        let tx = builder.tx();
        builder.spawn(async move {
            // The probe side's first rows are read while the build side is collected, so that
            // the probe input's scan and filters overlap the build side's work.
            let mut right = right;
            let (left, ahead, ended) = read_ahead(left, &mut right, job.config.probe_prefetch_rows()).await?;
            if !streamed {
                let mut all = ahead;
                if !ended {
                    all.extend(collect(right).await?);
                }
                let right = all;
                job.metrics.input_rows.add(right.iter().map(RecordBatch::num_rows).sum());
                let work = tokio::task::spawn_blocking(move || job.run(|| job.run_whole(&left, right, &tx)));
                return work.await.map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?;
            }
            // The probe side a part at a time: the device joins one part while the next is read.
            let part_rows = job.config.probe_part_rows_for(left.host.iter().map(RecordBatch::num_rows).sum());
            let input_rows = job.metrics.input_rows.clone();
            let (part_tx, mut part_rx) = tokio::sync::mpsc::channel::<Vec<RecordBatch>>(1);
            let work = tokio::task::spawn_blocking(move || job.run(|| job.run_parts(&left, &mut part_rx, &tx)));
            let ahead = futures::stream::iter(ahead.into_iter().map(Ok));
            let rest = if ended { ahead.boxed() } else { ahead.chain(right).boxed() };
            let read = read_parts(rest, part_rows, &part_tx, &input_rows).await;
            drop(part_tx);
            let worked = work.await.map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?;
            read.and(worked)
        });
        Ok(builder.build())
    }
}

/// The metrics of one output partition.
#[derive(Clone)]
struct GpuJoinMetrics {
    baseline: BaselineMetrics,
    build_input_rows: Count,
    input_rows: Count,
    upload_time: Time,
    join_time: Time,
    download_time: Time,
    /// Host gathers only.
    gather_time: Option<Time>,
    device_joins: Count,
    /// Host gathers only.
    upload_parts: Option<UploadParts>,
    /// The device memory pool's high-water mark at the end of this partition's join (the pool
    /// is the process's: joins running at the same time share it).
    peak_device_memory: Gauge,
    /// Waiting for a device lane ([`GpuJoinConfig::device_lanes`]); not in `elapsed_compute`.
    device_lane_wait: Time,
    /// The partition's thread's calls into the C ABI over the kernels and CUB, its waits for
    /// the device, its allocations from the device's pool, and the time of each kind
    /// (`gpujoin_device::counts`; the staging threads of uploads not included).
    device_calls: Count,
    device_call_time: Time,
    host_waits: Count,
    host_wait_time: Time,
    device_allocs: Count,
    pool_call_time: Time,
}

impl GpuJoinMetrics {
    /// Records where an upload's time went; returns the uploaded input.
    fn uploaded(&self, (input, staging, copy_wait): (DeviceInput, StagingStats, Duration)) -> DeviceInput {
        if let Some(u) = &self.upload_parts {
            u.staging_wait.add_duration(staging.waiting);
            u.host_copy.add_duration(staging.host_copy);
            u.issue.add_duration(staging.issuing);
            u.staging.add_duration(staging.passes);
            u.copy_wait.add_duration(copy_wait);
        }
        input
    }

    fn new(partition: usize, set: &ExecutionPlanMetricsSet, host_gather: bool) -> Self {
        GpuJoinMetrics {
            baseline: BaselineMetrics::new(set, partition),
            build_input_rows: MetricBuilder::new(set).counter("build_input_rows", partition),
            input_rows: MetricBuilder::new(set).counter("input_rows", partition),
            upload_time: MetricBuilder::new(set).subset_time("upload_time", partition),
            join_time: MetricBuilder::new(set).subset_time("join_time", partition),
            download_time: MetricBuilder::new(set).subset_time("download_time", partition),
            gather_time: host_gather.then(|| MetricBuilder::new(set).subset_time("gather_time", partition)),
            device_joins: MetricBuilder::new(set).counter("device_joins", partition),
            upload_parts: host_gather.then(|| UploadParts::new(partition, set)),
            peak_device_memory: MetricBuilder::new(set).gauge("peak_device_memory", partition),
            device_lane_wait: MetricBuilder::new(set).subset_time("device_lane_wait", partition),
            device_calls: MetricBuilder::new(set).counter("device_calls", partition),
            device_call_time: MetricBuilder::new(set).subset_time("device_call_time", partition),
            host_waits: MetricBuilder::new(set).counter("host_waits", partition),
            host_wait_time: MetricBuilder::new(set).subset_time("host_wait_time", partition),
            device_allocs: MetricBuilder::new(set).counter("device_allocs", partition),
            pool_call_time: MetricBuilder::new(set).subset_time("pool_call_time", partition),
        }
    }
}

/// Where a partition's uploads spent their time (the metrics `upload_*` of the module docs).
#[derive(Clone)]
struct UploadParts {
    /// Waiting for a pinned staging buffer, filling the buffers, queueing the device copies
    /// (each summed over the staging threads).
    staging_wait: Time,
    host_copy: Time,
    issue: Time,
    /// The staging passes' wall time; waiting for the device copies to finish after the last
    /// one was queued; opening the device and a stream before an upload.
    staging: Time,
    copy_wait: Time,
    setup: Time,
}

impl UploadParts {
    fn new(partition: usize, set: &ExecutionPlanMetricsSet) -> Self {
        let time = |name: &'static str| MetricBuilder::new(set).subset_time(name, partition);
        UploadParts {
            staging_wait: time("upload_staging_wait"),
            host_copy: time("upload_host_copy"),
            issue: time("upload_issue"),
            staging: time("upload_staging"),
            copy_wait: time("upload_copy_wait"),
            setup: time("upload_setup"),
        }
    }
}

/// One output partition's device work.
struct Job {
    plan: Arc<JoinPlan>,
    left_schema: SchemaRef,
    right_schema: SchemaRef,
    schema: SchemaRef,
    config: GpuJoinConfig,
    batch_rows: usize,
    metrics: GpuJoinMetrics,
    /// Time spent waiting for the consumer to take a batch.
    waited: Cell<Duration>,
    /// The partition's device and stream, opened by its first device join and kept for the
    /// later parts of a streamed probe side (the stream keeps small freed blocks for them:
    /// [`GpuJoinConfig::block_cache_bytes`]).
    device: std::cell::OnceCell<(gpujoin_device::Device, gpujoin_device::Stream)>,
}

fn external(e: gpujoin_device::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

impl Job {
    /// Runs the partition's `work` (joins that send their output batches and stop early when
    /// the consumer has gone) and records its time.
    fn run(&self, work: impl FnOnce() -> Result<()>) -> Result<()> {
        let started = Instant::now();
        let calls = gpujoin_device::counts::call_counts();
        let result = work();
        let calls = gpujoin_device::counts::call_counts().since(calls);
        let m = &self.metrics;
        m.device_calls.add(calls.c_calls as usize);
        m.device_call_time.add_duration(calls.c_call_time);
        m.host_waits.add(calls.host_waits as usize);
        m.host_wait_time.add_duration(calls.host_wait_time);
        m.device_allocs.add(calls.allocs as usize);
        m.pool_call_time.add_duration(calls.pool_call_time);
        // The partition's own work: not the time spent waiting for the consumer or the input.
        self.metrics.baseline.elapsed_compute().add_duration(started.elapsed().saturating_sub(self.waited.get()));
        self.metrics.baseline.done();
        result
    }

    /// The partition's device and stream ([`Job::device`]'s field), opened on first use.
    fn device(&self) -> Result<&(gpujoin_device::Device, gpujoin_device::Stream)> {
        if let Some(d) = self.device.get() {
            return Ok(d);
        }
        let device = gpujoin_device::Device::new(self.config.device).map_err(external)?;
        let stream = match self.config.block_cache_bytes() {
            0 => device.new_stream(),
            bytes => device.new_stream_with_block_cache(self.config.block_cache_largest(), bytes),
        }
        .map_err(external)?;
        Ok(self.device.get_or_init(|| (device, stream)))
    }

    /// A lane of the device ([`GpuJoinConfig::device_lanes`]), waited for as for input: the
    /// wait is recorded apart and left out of `elapsed_compute`. Never taken while holding one,
    /// nor while waiting for another partition (the shared build side is uploaded first).
    fn lane(&self) -> Lane {
        let (lane, waited) = Lane::take(self.config.device, self.config.device_lanes());
        self.metrics.device_lane_wait.add_duration(waited);
        self.waited.set(self.waited.get() + waited);
        lane
    }

    /// A streamed probe side ([`probe_streams`]): joins each part of it with the build side as
    /// `parts` delivers them, until they end, one fails, or the consumer has gone.
    /// An empty part says that probe rows are coming: the build side then goes to the device
    /// while the rest of the first part is read (a partition without probe rows never uploads).
    /// With a matched-rows bitmap, the partition that finishes last then sends the build rows
    /// it selects ([`MatchedRows`]).
    fn run_parts(&self, left: &BuildSide, parts: &mut tokio::sync::mpsc::Receiver<Vec<RecordBatch>>, tx: &Sender<Result<RecordBatch>>) -> Result<()> {
        loop {
            let t = Instant::now();
            let Some(part) = parts.blocking_recv() else { return self.probe_finished(left, tx) };
            self.waited.set(self.waited.get() + t.elapsed());
            if part.is_empty() {
                if left.host.iter().any(|b| b.num_rows() > 0) {
                    let t = Instant::now();
                    self.build_on_device(left)?;
                    self.metrics.upload_time.add_elapsed(t);
                }
                continue;
            }
            self.run_inner(left, part, tx)?;
            if tx.is_closed() {
                return Ok(());
            }
        }
    }

    /// A probe partition joined whole (joins whose probe side does not stream); with a
    /// matched-rows bitmap the partition that finishes last then sends the build rows it
    /// selects ([`MatchedRows`]).
    fn run_whole(&self, left: &BuildSide, right: Vec<RecordBatch>, tx: &Sender<Result<RecordBatch>>) -> Result<()> {
        self.run_inner(left, right, tx)?;
        self.probe_finished(left, tx)
    }

    /// This partition's probe side has joined: with a matched-rows bitmap, the partition that
    /// finishes last sends the build rows it selects ([`MatchedRows`]).
    fn probe_finished(&self, left: &BuildSide, tx: &Sender<Result<RecordBatch>>) -> Result<()> {
        match &left.matched {
            Some(m) if m.finished() && !tx.is_closed() => self.send_build_rows(left, m, tx),
            _ => Ok(()),
        }
    }

    /// Joins the build side with `right` (the whole probe side, or a part of it) and sends the
    /// output batches.
    fn run_inner(&self, left: &BuildSide, right: Vec<RecordBatch>, tx: &Sender<Result<RecordBatch>>) -> Result<()> {
        let rows = |b: &[RecordBatch]| b.iter().map(RecordBatch::num_rows).sum::<usize>();
        let (lrows, rrows) = (rows(&left.host), rows(&right));
        // With a matched-rows bitmap the build rows are sent once every probe partition has
        // joined, not by a partition without probe rows.
        if rrows == 0 && left.matched.is_some() {
            return Ok(());
        }
        if lrows == 0 || rrows == 0 {
            return self.one_side_empty(&left.host, &right, lrows, rrows, tx);
        }
        let p = &self.plan;
        let (rs, rb) = device_input(&right, &self.right_schema, &p.right_cols, Side::Right)?;
        if p.gather == OutputGather::Host {
            // Equi-joins: the larger side read in sequence, the smaller one at random. Joins
            // without keys (theta, cross) keep the algorithm's order, their left side's. A
            // shared build side (`CollectLeft`) is taken whole, not a partition's share: there
            // the side whose output columns weigh more at random (a string two, others one) is
            // read in sequence, the larger one on a tie.
            let larger = if rrows >= lrows { Side::Right } else { Side::Left };
            let order = match (p.keys.is_empty() || self.marks_only(left), left.shared) {
                (true, _) => None,
                (false, false) => Some(larger),
                (false, true) => {
                    let weight = |side: Side, schema: &Schema| -> usize {
                        p.sources.iter().filter(|s| s.0 == side).map(|s| if is_string_like(schema.field(s.1).data_type()) { 2 } else { 1 }).sum()
                    };
                    let (lw, rw) = (weight(Side::Left, &self.left_schema), weight(Side::Right, &self.right_schema));
                    Some(match lw.cmp(&rw) {
                        std::cmp::Ordering::Greater => Side::Left,
                        std::cmp::Ordering::Less => Side::Right,
                        std::cmp::Ordering::Equal => larger,
                    })
                }
            };
            return self.run_host_gather(left, right, (rs, rb), order, tx);
        }
        drop(right);
        let names = |side, cols: &mut dyn Iterator<Item = usize>| cols.map(|i| device_name(side, i)).collect::<Vec<_>>();
        let lsel = names(Side::Left, &mut p.select_left.iter().copied());
        let rsel = names(Side::Right, &mut p.select_right.iter().copied());
        fn as_str(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let spec = self.spec().select(&as_str(&lsel), &as_str(&rsel));

        let t = Instant::now();
        let (device, stream) = self.device()?;
        let probe = RecordBatchIterator::new(rb.into_iter().map(Ok), rs);
        // The lane covers the uploads and the join; the output's downloads stream with the
        // batches sent on, outside it.
        let reader = if left.shared {
            let build = self.build_on_device(left)?;
            let _lane = self.lane();
            join_shared_on(stream, build, probe, spec).map_err(external)?
        } else {
            let (ls, lb) = device_input(&left.host, &self.left_schema, &p.left_cols, Side::Left)?;
            let _lane = self.lane();
            join_on(stream, RecordBatchIterator::new(lb.into_iter().map(Ok), ls), probe, spec).map_err(external)?
        };
        self.metrics.upload_time.add_elapsed(t);
        self.metrics.device_joins.add(1);

        let mut first = true;
        let mut t = Instant::now();
        for batch in reader {
            let batch = batch?;
            if first {
                self.metrics.join_time.add_elapsed(t);
                first = false;
            } else {
                self.metrics.download_time.add_elapsed(t);
            }
            let out = self.output(&batch)?;
            if !self.send(out, tx) {
                return Ok(());
            }
            t = Instant::now();
        }
        if first {
            self.metrics.join_time.add_elapsed(t);
        }
        self.record_peak(device);
        Ok(())
    }

    /// The build side's join columns on the device, uploaded by the first call: for a
    /// `CollectLeft` join the first output partition uploads them and the others wait for it
    /// and share them; a partition of a streamed probe side joins every part with them.
    fn build_on_device(&self, left: &BuildSide) -> Result<Arc<DeviceInput>> {
        left.device
            .get_or_init(|| {
                let _lane = self.lane();
                upload_build_side(&self.plan, &self.left_schema, &left.host, &self.config).map(|u| Arc::new(self.metrics.uploaded(u))).map_err(Arc::new)
            })
            .clone()
            .map_err(DataFusionError::Shared)
    }

    /// Records the device pool's high-water mark in the partition's metrics.
    fn record_peak(&self, device: &gpujoin_device::Device) {
        if let Ok(peak) = device.peak_memory() {
            self.metrics.peak_device_memory.set_max(usize::try_from(peak).unwrap_or(usize::MAX));
        }
    }

    /// The join's spec: keys by their device names, the filter, NULL equality, the algorithm
    /// and the chunking (output columns selected by the caller).
    fn spec(&self) -> JoinSpec {
        let p = &self.plan;
        let lkeys: Vec<String> = p.keys.iter().map(|k| device_name(Side::Left, k.0)).collect();
        let rkeys: Vec<String> = p.keys.iter().map(|k| device_name(Side::Right, k.1)).collect();
        let (lk, rk): (Vec<&str>, Vec<&str>) = (lkeys.iter().map(String::as_str).collect(), rkeys.iter().map(String::as_str).collect());
        let mut spec = JoinSpec::new(p.join_type, &lk, &rk)
            .null_equality(p.null_equality)
            .algorithm(self.config.algorithm)
            .batch_rows(self.batch_rows);
        if let Some(pred) = &p.predicate {
            spec = spec.filter(pred.clone());
        }
        if let Some(bytes) = self.config.chunk_bytes {
            spec = spec.chunks_of(bytes);
        }
        spec
    }

    /// [`OutputGather::Host`]: the key and filter columns (`device`) go to the device, the
    /// joined rows come back as row indices, sorted on the device by `order`'s index where given
    /// (that side is then read in sequence), and the output columns are taken from the host batches
    /// through them, a batch of `batch_rows` at a time.
    fn run_host_gather(&self, left: &BuildSide, right: Vec<RecordBatch>, device: (SchemaRef, Vec<RecordBatch>), order: Option<Side>, tx: &Sender<Result<RecordBatch>>) -> Result<()> {
        let p = &self.plan;
        let t = Instant::now();
        let (dev, stream) = self.device()?;
        if let Some(u) = &self.metrics.upload_parts {
            u.setup.add_elapsed(t);
        }
        let build = self.build_on_device(left)?;
        self.metrics.upload_time.add_elapsed(t);

        // The side the indices are ordered by is read from its batches, in sequence; the other
        // one from its output columns, each concatenated into one array (host work, done before
        // this partition takes a device lane).
        let t = Instant::now();
        let wanted = |side: Side| p.sources.iter().filter(move |s| s.0 == side).map(|s| s.1);
        let left_rows = if order == Some(Side::Left) {
            HostSide::batches(&left.host)
        } else {
            HostSide::Columns(left.columns.get_or_init(|| host_columns(&left.host, wanted(Side::Left)).map_err(Arc::new)).clone().map_err(DataFusionError::Shared)?)
        };
        let right_rows = if order == Some(Side::Right) { HostSide::batches(&right) } else { HostSide::Columns(host_columns(&right, wanted(Side::Right))?) };
        let mut gathering = t.elapsed();

        // The lane covers this part's upload, its join and its indices' download; it is given
        // back when the indices reach the sink, before any output column is gathered.
        let mut lane = Some(self.lane());
        let t = Instant::now();
        let (rs, rb) = device;
        let probe = self.metrics.uploaded(DeviceInput::upload_batches(stream, rs, rb, StagingOptions::default()).map_err(external)?);
        self.metrics.upload_time.add_elapsed(t);
        self.metrics.device_joins.add(1);

        let mut failed: Option<DataFusionError> = None;
        let marks_only = self.marks_only(left);
        let mut sink = |ix: JoinIndices| -> gpujoin_device::Result<bool> {
            lane = None;
            if let (Some(m), Some(matched)) = (&left.matched, &ix.left) {
                m.set(matched);
            }
            if marks_only {
                return Ok(true);
            }
            let rows = ix.num_rows();
            let ordered = match order {
                Some(Side::Left) => ix.left.as_ref().map(|i| (&left_rows, i)),
                Some(Side::Right) => ix.right.as_ref().map(|i| (&right_rows, i)),
                None => None,
            };
            // The output batches' rows: an output batch ends where the ordered side's run of
            // consecutive rows in one input batch ends, when that run fills at least half of
            // it: its columns are then slices of that batch (see `take_output`).
            let mut cuts = Vec::new();
            let mut at = 0;
            while at < rows {
                let n = self.batch_rows.min(rows - at);
                let run = ordered.map_or(0, |(side, ix)| side.run_rows(ix, at, n));
                let n = if run < n && run * 2 >= n { run } else { n };
                cuts.push((at, n));
                at += n;
            }
            // Up to `parallel_gather_batches` output batches taken at once on the gather
            // threads, then sent in order.
            let (schema, sources) = (&self.schema, &self.plan.sources);
            let take = |&(at, n): &(usize, usize)| take_output(schema, sources, &ix.slice(at, n), n, &left_rows, &right_rows);
            match self.gather_and_send(&cuts, take, &mut gathering, tx) {
                Ok(sent) => Ok(sent),
                Err(e) => {
                    failed = Some(e);
                    Ok(false)
                }
            }
        };
        let mut spec = self.spec();
        spec.indices_order = order;
        if left.matched.is_some() {
            spec.join_type = part_join_type(p.df_join_type, p.join_type);
        }
        let times = join_indices_on(stream, &build, &probe, &spec, &mut sink).map_err(external)?;
        drop(lane);
        if let Some(e) = failed {
            return Err(e);
        }
        self.metrics.join_time.add_duration(times.join);
        self.metrics.download_time.add_duration(times.download);
        if let Some(g) = &self.metrics.gather_time {
            g.add_duration(gathering);
        }
        self.record_peak(dev);
        Ok(())
    }

    /// Whether this partition's device joins only mark the build side's matched rows and send
    /// nothing themselves (LeftSemi, LeftAnti with a matched-rows bitmap).
    fn marks_only(&self, left: &BuildSide) -> bool {
        left.matched.is_some() && matches!(self.plan.df_join_type, DfJoinType::LeftSemi | DfJoinType::LeftAnti)
    }

    /// The build rows a join with a matched-rows bitmap returns once every probe partition has
    /// joined (sent by the last one): the matched ones (LeftSemi) or the unmatched ones (Left,
    /// Full and LeftAnti; NULLs for the probe side's columns), in build-side order.
    fn send_build_rows(&self, left: &BuildSide, matched: &MatchedRows, tx: &Sender<Result<RecordBatch>>) -> Result<()> {
        let rows = matched.rows(self.plan.df_join_type == DfJoinType::LeftSemi);
        if rows.is_empty() {
            return Ok(());
        }
        let wanted = self.plan.sources.iter().filter(|s| s.0 == Side::Left).map(|s| s.1);
        let columns = left.columns.get_or_init(|| host_columns(&left.host, wanted).map_err(Arc::new)).clone().map_err(DataFusionError::Shared)?;
        let (schema, sources) = (&self.schema, &self.plan.sources);
        let take_batch = |chunk: &[u32]| -> Result<RecordBatch> {
            let indices = UInt32Array::from(chunk.to_vec());
            let mut out = Vec::with_capacity(sources.len());
            for (field, &(side, i)) in schema.fields().iter().zip(sources) {
                out.push(match side {
                    Side::Left => match columns.get(&i) {
                        Some(c) => compact_views(fit(&take(c.as_ref(), &indices, None)?, field)?),
                        None => return internal_err!("GpuJoinExec: build column {i} was not prepared"),
                    },
                    Side::Right => new_null_array(field.data_type(), chunk.len()),
                });
            }
            let options = RecordBatchOptions::new().with_row_count(Some(chunk.len()));
            Ok(RecordBatch::try_new_with_options(Arc::clone(schema), out, &options)?)
        };
        let chunks: Vec<&[u32]> = rows.chunks(self.batch_rows).collect();
        let mut gathering = Duration::ZERO;
        let sent = self.gather_and_send(&chunks, |c| take_batch(c), &mut gathering, tx);
        if let Some(g) = &self.metrics.gather_time {
            g.add_duration(gathering);
        }
        sent.map(|_| ())
    }

    /// Takes the output batch of each of `pieces` (`take`), up to
    /// [`GpuJoinConfig::parallel_gather_batches`] at once on the gather threads, and sends them
    /// in order; the time taking them is added to `gathering`. `Ok(false)`: the consumer has gone.
    fn gather_and_send<P: Sync>(&self, pieces: &[P], take: impl Fn(&P) -> Result<RecordBatch> + Sync, gathering: &mut Duration, tx: &Sender<Result<RecordBatch>>) -> Result<bool> {
        for group in pieces.chunks(self.config.parallel_gather_batches()) {
            let t = Instant::now();
            let batches: Vec<Result<RecordBatch>> = match group {
                [one] => vec![take(one)],
                _ => gather_pool().install(|| group.par_iter().map(&take).collect()),
            };
            *gathering += t.elapsed();
            for batch in batches {
                if !self.send(batch?, tx) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn send(&self, batch: RecordBatch, tx: &Sender<Result<RecordBatch>>) -> bool {
        self.metrics.baseline.record_output(batch.num_rows());
        let t = Instant::now();
        let sent = tx.blocking_send(Ok(batch)).is_ok();
        self.waited.set(self.waited.get() + t.elapsed());
        sent
    }

    /// gpujoin's output batch as this operator's: the output columns in order, cast where the
    /// device returns another type (dictionaries), under the operator's schema.
    fn output(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mut columns = Vec::with_capacity(self.plan.outputs.len());
        for (field, &k) in self.schema.fields().iter().zip(&self.plan.outputs) {
            columns.push(fit(batch.column(k), field)?);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(Arc::clone(&self.schema), columns, &options)?)
    }

    /// A partition where one input has no rows: the rows of the other side that the join type
    /// keeps (outer and anti joins), with NULLs for the empty side, built on the host.
    fn one_side_empty(&self, left: &[RecordBatch], right: &[RecordBatch], lrows: usize, rrows: usize, tx: &Sender<Result<RecordBatch>>) -> Result<()> {
        use DfJoinType::*;
        let kept = match self.plan.df_join_type {
            Left | LeftAnti | Full if lrows > 0 => Some((Side::Left, left)),
            Right | RightAnti | Full if rrows > 0 => Some((Side::Right, right)),
            _ => None,
        };
        let Some((side, batches)) = kept else { return Ok(()) };
        for b in batches {
            let mut at = 0;
            while at < b.num_rows() {
                let n = self.batch_rows.min(b.num_rows() - at);
                let piece = b.slice(at, n);
                let mut columns = Vec::with_capacity(self.schema.fields().len());
                for (field, &(s, i)) in self.schema.fields().iter().zip(&self.plan.sources) {
                    columns.push(if s == side { fit(piece.column(i), field)? } else { new_null_array(field.data_type(), n) });
                }
                let options = RecordBatchOptions::new().with_row_count(Some(n));
                let out = RecordBatch::try_new_with_options(Arc::clone(&self.schema), columns, &options)?;
                if !self.send(out, tx) {
                    return Ok(());
                }
                at += n;
            }
        }
        Ok(())
    }
}

/// One side of a host gather: its batches (the side the join's indices are ordered by, read in
/// sequence) or its output columns, each in one array (read at random).
enum HostSide<'a> {
    Batches { batches: &'a [RecordBatch], starts: Vec<usize> },
    Columns(HostColumns),
}

impl<'a> HostSide<'a> {
    fn batches(batches: &'a [RecordBatch]) -> Self {
        let mut starts = Vec::with_capacity(batches.len() + 1);
        let mut at = 0;
        starts.push(0);
        for b in batches {
            at += b.num_rows();
            starts.push(at);
        }
        HostSide::Batches { batches, starts }
    }
}

impl HostSide<'_> {
    /// How many of `indices[at..at + max]` continue the run of consecutive rows of one input
    /// batch that `indices[at]` starts (0 for a null index, or a side held as columns).
    ///
    /// Example: batches of 3 and 2 rows (`starts [0, 3, 5]`), indices `[1, 2, 3, 4]`: from 0, 2
    /// (row 3 is in the next batch); from 2, 2.
    fn run_rows(&self, indices: &UInt32Array, at: usize, max: usize) -> usize {
        match self {
            HostSide::Batches { starts, .. } => run_in_batch(starts, indices, at, max).map_or(0, |(_, rows)| rows),
            HostSide::Columns(_) => 0,
        }
    }
}

/// The batch that `indices[at]` falls in and how many of `indices[at..at + max]` continue its
/// run of consecutive rows within that batch (`None` for a null index or one past the last
/// batch). Batches of 3 and 2 rows, indices `[1, 2, 3]`: from 0, `Some((0, 2))`.
fn run_in_batch(starts: &[usize], indices: &UInt32Array, at: usize, max: usize) -> Option<(usize, usize)> {
    if indices.is_null(at) {
        return None;
    }
    let first = indices.value(at) as usize;
    let b = batch_of(starts, first)?;
    let max = max.min(starts[b + 1] - first);
    Some((b, (0..max).take_while(|&k| indices.is_valid(at + k) && indices.value(at + k) as usize == first + k).count()))
}

/// The batch holding global row `row` (`starts[b] <= row < starts[b + 1]`; empty batches are
/// skipped), `None` past the last one.
fn batch_of(starts: &[usize], row: usize) -> Option<usize> {
    let b = starts.partition_point(|&s| s <= row).checked_sub(1)?;
    (b + 1 < starts.len() && row < starts[b + 1]).then_some(b)
}

/// The batch and first row in it where `indices` are one run of consecutive rows of one batch
/// and none is null: batches of 3 and 2 rows, indices `[3, 4]`: `Some((1, 0))`; `[2, 3]`
/// crosses batches: `None`.
fn one_run(starts: &[usize], indices: &UInt32Array) -> Option<(usize, usize)> {
    if indices.is_empty() || indices.null_count() > 0 {
        return None;
    }
    let (b, rows) = run_in_batch(starts, indices, 0, indices.len())?;
    (rows == indices.len()).then(|| (b, indices.value(0) as usize - starts[b]))
}

/// One output batch's rows of a side read from its batches: one run sliced from a batch, or
/// positions interleaved from several.
enum BatchRows {
    Run { batch: usize, offset: usize, len: usize },
    Positions(BatchPositions),
}

/// Where the rows of one output batch are in a side's batches: the batches `first..=last`, a
/// `(batch - first, row)` pair an output row, and a null row (`(last - first + 1, 0)`: a
/// one-row null array after them) where the index is null.
///
/// Example: batches of 3 and 2 rows (`starts [0, 3, 5]`), indices `[1, 3, 4, ∅]`: batches 0..=1,
/// pairs `[(0, 1), (1, 0), (1, 1), (2, 0)]`.
struct BatchPositions {
    /// The batches `first..=last` the valid indices fall in (`None`: every index is null).
    batches: Option<(usize, usize)>,
    pairs: Vec<(usize, usize)>,
    /// Some index is null.
    nulls: bool,
}

impl BatchPositions {
    fn of(starts: &[usize], indices: &UInt32Array) -> Self {
        let batch_of = |g: usize| batch_of(starts, g).unwrap_or(0);
        let mut pairs = Vec::with_capacity(indices.len());
        let (mut batches, mut nulls): (Option<(usize, usize)>, bool) = (None, false);
        let mut b = 0;
        // Indices in ascending order cross batches forward; others are looked up.
        for k in 0..indices.len() {
            if indices.is_null(k) {
                nulls = true;
                pairs.push((usize::MAX, 0));
                continue;
            }
            let g = indices.value(k) as usize;
            if !(starts[b] <= g && g < starts[b + 1]) {
                b = batch_of(g);
            }
            batches = Some(batches.map_or((b, b), |(f, l)| (f.min(b), l.max(b))));
            pairs.push((b, g - starts[b]));
        }
        if let Some((first, last)) = batches {
            let null_slot = last - first + 1;
            for p in &mut pairs {
                p.0 = if p.0 == usize::MAX { null_slot } else { p.0 - first };
            }
        }
        BatchPositions { batches, pairs, nulls }
    }

    /// Column `column` of the output rows, from `batches`.
    fn interleave(&self, batches: &[RecordBatch], column: usize) -> Result<ArrayRef> {
        let dt = batches.first().map(|b| b.column(column).data_type().clone()).unwrap_or(DataType::Null);
        let Some((first, last)) = self.batches else {
            return Ok(new_null_array(&dt, self.pairs.len()));
        };
        let null_row = self.nulls.then(|| new_null_array(&dt, 1));
        let arrays: Vec<&dyn Array> = batches[first..=last].iter().map(|b| b.column(column).as_ref()).chain(null_row.as_deref()).collect();
        Ok(interleave(&arrays, &self.pairs)?)
    }
}

/// One output batch of `rows` rows: each output column taken from its side through that
/// side's indices (a null index: a null).
fn take_output(schema: &SchemaRef, sources: &[(Side, usize)], ix: &JoinIndices, rows: usize, left: &HostSide<'_>, right: &HostSide<'_>) -> Result<RecordBatch> {
    // The batches' positions of the indices of each side read from its batches, once: one
    // run of consecutive rows of one batch (the usual case of a probe side where each row
    // matches once) is sliced, zero-copy; other indices are interleaved.
    let positions = |side: &HostSide<'_>, indices: Option<&UInt32Array>| match (side, indices) {
        (HostSide::Batches { starts, .. }, Some(ix)) => Some(match one_run(starts, ix) {
            Some((batch, offset)) => BatchRows::Run { batch, offset, len: ix.len() },
            None => BatchRows::Positions(BatchPositions::of(starts, ix)),
        }),
        _ => None,
    };
    let (lp, rp) = (positions(left, ix.left.as_ref()), positions(right, ix.right.as_ref()));
    let mut columns = Vec::with_capacity(sources.len());
    for (field, &(side, i)) in schema.fields().iter().zip(sources) {
        let (indices, rows_of, at) = match side {
            Side::Left => (ix.left.as_ref(), left, lp.as_ref()),
            Side::Right => (ix.right.as_ref(), right, rp.as_ref()),
        };
        let Some(indices) = indices else {
            return internal_err!("GpuJoinExec: no {side:?} rows for output column {}", field.name());
        };
        let column = match (rows_of, at) {
            (HostSide::Batches { batches, .. }, Some(BatchRows::Run { batch, offset, len })) => batches[*batch].column(i).slice(*offset, *len),
            (HostSide::Batches { batches, .. }, Some(BatchRows::Positions(at))) => at.interleave(batches, i)?,
            (HostSide::Columns(cols), _) => match cols.get(&i) {
                Some(c) => take(c.as_ref(), indices, None)?,
                None => return internal_err!("GpuJoinExec: {side:?} column {i} was not prepared"),
            },
            _ => return internal_err!("GpuJoinExec: no positions for the {side:?} batches"),
        };
        columns.push(compact_views(fit(&column, field)?));
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(Arc::clone(schema), columns, &options)?)
}

/// A string or binary view column whose values are a small part of the buffers it holds
/// (rows taken from a large input: a shared build side, a chain of joins), with its values
/// copied into buffers of their own; any other column as it is. Without the copy every output
/// batch would hold the input's buffers: the operators above would read each value at random
/// from all of them (TPC-H Q10's aggregate over four `customer` strings taken from a 573K-row
/// build side ran 1.6-2x its time after DataFusion's join, whose output batches are compacted),
/// and DataFusion's memory accounting would count those buffers once a batch (11 GB over Q10's
/// 144 batches).
///
/// Example: 8192 rows taken from a 78 MB buffer whose strings the rows use 1 MB of: the values
/// copied into one 1 MB buffer. 8192 rows sliced from a batch of 10000: kept.
fn compact_views(column: ArrayRef) -> ArrayRef {
    use datafusion::arrow::array::AsArray;
    /// Buffers this small are kept whatever the rows use of them.
    const SMALL: usize = 1 << 20;
    // The bytes of the values not held in the views themselves (those longer than 12 bytes).
    fn wasteful(views: &[u128], held: usize) -> bool {
        held > SMALL && {
            let used: usize = views.iter().map(|&v| v as u32 as usize).filter(|&len| len > 12).sum();
            held > 2 * used
        }
    }
    let held = |buffers: &[datafusion::arrow::buffer::Buffer]| buffers.iter().map(|b| b.len()).sum::<usize>();
    match column.data_type() {
        DataType::Utf8View => {
            let a = column.as_string_view();
            if wasteful(a.views(), held(a.data_buffers())) { Arc::new(a.gc()) } else { column }
        }
        DataType::BinaryView => {
            let a = column.as_binary_view();
            if wasteful(a.views(), held(a.data_buffers())) { Arc::new(a.gc()) } else { column }
        }
        _ => column,
    }
}

/// Strings and binaries (their values are read where their views or offsets point).
fn is_string_like(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Binary | DataType::LargeBinary | DataType::BinaryView)
        || matches!(t, DataType::Dictionary(_, v) if is_string_like(v))
}

/// The threads that take output batches' columns (a pool of its own, as many threads as cores,
/// so that the uploads' staging on rayon's global pool never waits behind gathers).
fn gather_pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("gpujoin-gather-{i}")).build().expect("gpujoin: the gather threads")
    })
}

/// Whether a partition reads its probe (right) input a part at a time
/// ([`GpuJoinConfig::probe_part_rows`]): equi-joins gathered on the host whose output for a
/// probe row needs only that row and the build side (`Inner`, `Right`, `RightSemi`,
/// `RightAnti`) or that keep a matched-rows bitmap ([`keeps_matched_rows`]). Joins without keys
/// keep the whole probe side (their output order is the algorithm's over it).
fn probe_streams(plan: &JoinPlan) -> bool {
    plan.gather == OutputGather::Host && !plan.keys.is_empty() && (matches!(plan.df_join_type, DfJoinType::Inner | DfJoinType::Right | DfJoinType::RightSemi | DfJoinType::RightAnti) || keeps_matched_rows(plan))
}

/// Whether a join returns build rows through a matched-rows bitmap ([`MatchedRows`]): joins
/// gathered on the host of the types that return the build side's unmatched or matched rows
/// (Left, Full, LeftSemi, LeftAnti). A `CollectLeft` one probes every partition of its probe
/// side at once; the probe sides of equi-joins stream, those of joins without keys (theta,
/// cross) are joined a whole partition at a time. Those gathered on the device join their whole
/// probe side in one partition.
fn keeps_matched_rows(plan: &JoinPlan) -> bool {
    plan.gather == OutputGather::Host && matches!(plan.df_join_type, DfJoinType::Left | DfJoinType::Full | DfJoinType::LeftSemi | DfJoinType::LeftAnti)
}

/// Whether a join takes its probe side in one partition: `CollectLeft` joins that return build
/// rows by whether a probe row matched them (Left, Full, LeftSemi, LeftAnti) without a
/// matched-rows bitmap their partitions share (no keys, device gathers, or
/// [`GpuJoinConfig::shared_matched_rows`] off).
fn single_probe(mode: PartitionMode, join_type: DfJoinType, plan: &JoinPlan, config: &GpuJoinConfig) -> bool {
    mode == PartitionMode::CollectLeft && needs_whole_probe_side(join_type) && !shares_matched_rows(plan, config)
}

/// Whether the probe partitions of a `CollectLeft` join of this plan share one matched-rows
/// bitmap ([`keeps_matched_rows`] and [`GpuJoinConfig::shared_matched_rows`]).
fn shares_matched_rows(plan: &JoinPlan, config: &GpuJoinConfig) -> bool {
    keeps_matched_rows(plan) && config.shared_matched_rows
}

/// The join a part of the probe side runs on the device where a matched-rows bitmap keeps the
/// build side's rows ([`MatchedRows`]): Left as Inner, Full as Right (the probe rows without a
/// match still come with NULLs), LeftSemi and LeftAnti as LeftSemi (the matched build rows,
/// once each); `other` for the rest.
fn part_join_type(t: DfJoinType, other: gpujoin_join::JoinType) -> gpujoin_join::JoinType {
    use gpujoin_join::JoinType as J;
    match t {
        DfJoinType::Left => J::Inner,
        DfJoinType::Full => J::Right,
        DfJoinType::LeftSemi | DfJoinType::LeftAnti => J::LeftSemi,
        _ => other,
    }
}

/// Reads `input` into parts of at least `part_rows` rows (whole batches; the last part may be
/// smaller) and hands each to `parts`, after an empty part as soon as the first row arrives
/// (see [`Job::run_parts`]); stops early when the receiver has gone (the join stopped, and says
/// why). Empty batches are left out.
///
/// Example: batches of 3, 0, 2 and 4 rows with `part_rows` 4: parts `[]`, `[3, 2]` and `[4]`.
async fn read_parts(mut input: BoxStream<'static, Result<RecordBatch>>, part_rows: usize, parts: &tokio::sync::mpsc::Sender<Vec<RecordBatch>>, rows_in: &Count) -> Result<()> {
    let (mut part, mut rows, mut started) = (Vec::new(), 0usize, false);
    while let Some(batch) = input.next().await {
        let batch = batch?;
        if batch.num_rows() == 0 {
            continue;
        }
        if !started {
            started = true;
            if parts.send(Vec::new()).await.is_err() {
                return Ok(());
            }
        }
        rows += batch.num_rows();
        rows_in.add(batch.num_rows());
        part.push(batch);
        if rows >= part_rows {
            if parts.send(std::mem::take(&mut part)).await.is_err() {
                return Ok(());
            }
            rows = 0;
        }
    }
    if !part.is_empty() {
        let _ = parts.send(part).await;
    }
    Ok(())
}

/// Awaits the build side `left` while reading whole batches of `right`, until `rows` rows or
/// more are read (0: none) or `right` ends; returns the build side, the batches read and whether
/// `right` ended. The batches read wait in memory until the build side is in, as the rest of
/// the probe side would in its input.
///
/// Example: `rows` 1000, probe batches of 600 rows, a build side that takes longer than the
/// probe side's first two batches: those two (1200 rows) are read, then the build side awaited.
async fn read_ahead(mut left: BoxFuture<'static, Result<Arc<BuildSide>>>, right: &mut SendableRecordBatchStream, rows: usize) -> Result<(Arc<BuildSide>, Vec<RecordBatch>, bool)> {
    use futures::future::{select, Either};
    let (mut ahead, mut read) = (Vec::new(), 0usize);
    while read < rows {
        match select(left, right.next()).await {
            Either::Left((built, _)) => return Ok((built?, ahead, false)),
            Either::Right((batch, pending)) => {
                left = pending;
                let Some(batch) = batch else { return Ok((left.await?, ahead, true)) };
                let batch = batch?;
                read += batch.num_rows();
                ahead.push(batch);
            }
        }
    }
    Ok((left.await?, ahead, false))
}

/// `plan` in one partition: itself, or a `CoalescePartitionsExec` over it (over its input when it
/// is a round-robin `RepartitionExec`, which only spread the rows for parallelism).
fn one_partition(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    if plan.output_partitioning().partition_count() <= 1 {
        return plan;
    }
    let input = match plan.downcast_ref::<RepartitionExec>() {
        Some(r) if matches!(r.partitioning(), Partitioning::RoundRobinBatch(_)) => Arc::clone(r.input()),
        _ => Arc::clone(&plan),
    };
    if input.output_partitioning().partition_count() <= 1 {
        return input;
    }
    Arc::new(CoalescePartitionsExec::new(input))
}

/// `column` as `field`'s type (a cast where they differ: dictionaries).
fn fit(column: &ArrayRef, field: &Field) -> Result<ArrayRef> {
    if column.data_type() == field.data_type() {
        Ok(Arc::clone(column))
    } else {
        Ok(cast(column, field.data_type())?)
    }
}

/// The uploaded columns of one side's batches, named by position (`l0`, `r3`): no duplicate
/// names, whatever the input's.
/// The build side's join columns uploaded on a stream of their own, on the device when this
/// returns (every output partition's join reads them).
fn upload_build_side(plan: &JoinPlan, schema: &Schema, batches: &[RecordBatch], config: &GpuJoinConfig) -> Result<(DeviceInput, StagingStats, Duration)> {
    let (s, b) = device_input(batches, schema, &plan.left_cols, Side::Left)?;
    let stream = gpujoin_device::Device::new(config.device).and_then(|d| d.new_stream()).map_err(external)?;
    DeviceInput::upload_batches(&stream, s, b, StagingOptions::default()).map_err(external)
}

fn device_input(batches: &[RecordBatch], schema: &Schema, cols: &[usize], side: Side) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let fields: Vec<Field> = cols.iter().map(|&i| schema.field(i).clone().with_name(device_name(side, i))).collect();
    let out = Arc::new(Schema::new(fields));
    let batches = batches
        .iter()
        .map(|b| {
            let columns = cols.iter().map(|&i| Arc::clone(b.column(i))).collect();
            Ok(RecordBatch::try_new(Arc::clone(&out), columns)?)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((out, batches))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ix(v: &[Option<u32>]) -> UInt32Array {
        v.iter().copied().collect()
    }

    fn side(rows: &[usize]) -> (Vec<RecordBatch>, Vec<usize>) {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::UInt32, false)]));
        let mut at = 0u32;
        let batches: Vec<RecordBatch> = rows
            .iter()
            .map(|&n| {
                let col: UInt32Array = (at..at + n as u32).collect();
                at += n as u32;
                RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(col)]).unwrap()
            })
            .collect();
        let starts = match HostSide::batches(&batches) {
            HostSide::Batches { starts, .. } => starts,
            HostSide::Columns(_) => unreachable!(),
        };
        (batches, starts)
    }

    #[test]
    fn view_columns_holding_far_more_than_their_values_are_compacted() {
        use datafusion::arrow::array::{AsArray, StringViewArray};
        let long = |i: usize| format!("a value longer than twelve bytes, number {i:08}");
        let big: StringViewArray = (0..100_000).map(|i| Some(long(i))).collect();
        let held = |a: &StringViewArray| a.data_buffers().iter().map(|b| b.len()).sum::<usize>();
        assert!(held(&big) > 4 << 20);
        // 100 rows taken from 100,000: their values copied, the same strings.
        let taken = take(&big, &UInt32Array::from((0..100u32).map(|i| i * 997).collect::<Vec<_>>()), None).unwrap();
        let out = compact_views(Arc::clone(&taken));
        let s = out.as_string_view();
        assert!(held(s) < 10_000, "{}", held(s));
        assert_eq!(s.iter().collect::<Vec<_>>(), taken.as_string_view().iter().collect::<Vec<_>>());
        // Most of the rows: kept as they are (the same buffers).
        let most = Arc::new(big.slice(0, 80_000)) as ArrayRef;
        assert!(Arc::ptr_eq(&compact_views(Arc::clone(&most)), &most));
        // Short strings live in their views: nothing to copy past the views, and nulls stay.
        let short: StringViewArray = (0..200_000).map(|i| (i % 3 != 0).then(|| format!("s{}", i % 10))).collect();
        let out = compact_views(Arc::new(short.slice(5, 10)));
        assert_eq!(out.as_string_view().iter().collect::<Vec<_>>(), short.slice(5, 10).iter().collect::<Vec<_>>());
    }

    #[test]
    fn matched_rows_are_kept_across_partitions_and_parts() {
        // 130 build rows, three probe partitions; the second sets rows in two parts, one
        // with a null index (a probe row without a match in a Right join).
        let m = MatchedRows::new(130, 3);
        m.set(&ix(&[Some(1), Some(64)]));
        assert!(!m.finished());
        m.set(&ix(&[Some(65), None, Some(1)]));
        m.set(&ix(&[Some(129)]));
        assert!(!m.finished());
        assert!(m.finished(), "the third partition to finish is the last");
        assert_eq!(m.rows(true), vec![1, 64, 65, 129]);
        let unmatched = m.rows(false);
        assert_eq!(unmatched.len(), 126);
        assert_eq!((unmatched[0], unmatched[1], unmatched[125]), (0, 2, 128), "no row past the last");
        // No build rows, no probe partition.
        let none = MatchedRows::new(0, 1);
        assert!(none.finished());
        assert!(none.rows(false).is_empty());
    }

    #[test]
    fn runs_of_consecutive_rows_stay_within_one_batch() {
        // Batches of 3, 0 (empty) and 2 rows: global rows 0..3 and 3..5.
        let (batches, starts) = side(&[3, 0, 2]);
        assert_eq!(starts, [0, 3, 3, 5]);
        assert_eq!(batch_of(&starts, 0), Some(0));
        assert_eq!(batch_of(&starts, 3), Some(2), "the empty batch is skipped");
        assert_eq!(batch_of(&starts, 5), None);
        let host = HostSide::batches(&batches);
        let v = ix(&[Some(1), Some(2), Some(3), Some(4), None, Some(0)]);
        assert_eq!(host.run_rows(&v, 0, 6), 2, "row 3 is in the next batch");
        assert_eq!(host.run_rows(&v, 2, 6), 2, "a null ends the run");
        assert_eq!(host.run_rows(&v, 2, 1), 1, "at most max rows");
        assert_eq!(host.run_rows(&v, 4, 2), 0, "a null starts none");
        assert_eq!(host.run_rows(&v, 5, 1), 1);
        assert_eq!(host.run_rows(&ix(&[Some(0), Some(2)]), 0, 2), 1, "a gap ends the run");
        assert_eq!(host.run_rows(&ix(&[Some(1), Some(0)]), 0, 2), 1, "so does a step back");

        assert_eq!(one_run(&starts, &ix(&[Some(3), Some(4)])), Some((2, 0)));
        assert_eq!(one_run(&starts, &ix(&[Some(1), Some(2)])), Some((0, 1)));
        assert_eq!(one_run(&starts, &ix(&[Some(2), Some(3)])), None, "crosses batches");
        assert_eq!(one_run(&starts, &ix(&[Some(1), None])), None, "a null");
        assert_eq!(one_run(&starts, &ix(&[Some(0), Some(2)])), None, "a gap");
        assert_eq!(one_run(&starts, &ix(&[Some(1), Some(1)])), None, "a repeat");
        assert_eq!(one_run(&starts, &ix(&[])), None);
    }
}
