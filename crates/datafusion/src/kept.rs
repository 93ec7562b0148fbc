//! [`CpuJoinKeptExec`]: the note [`GpuJoinRule`](crate::GpuJoinRule) puts above a join it kept
//! on the CPU, so that `EXPLAIN` shows why.
//!
//! # Why a node
//!
//! The rule cannot change how DataFusion's join operators print, and `EXPLAIN` prints the plan
//! and nothing else (`EXPLAIN VERBOSE` adds the plan after each rule, not a rule's remarks). A
//! node of its own is the one place a reason can appear in every `EXPLAIN` format (indent, tree,
//! verbose, `EXPLAIN ANALYZE`), in Ballista's stage plans and in plans serialized with
//! `GpuJoinCodec` (feature `proto`):
//!
//! ```text
//! CpuJoinKeptExec: reason=join type LeftMark: gpujoin has no mark joins
//!   HashJoinExec: mode=CollectLeft, join_type=LeftMark, on=[(a@0, b@0)]
//! ```
//!
//! It costs nothing: it shares its input's `PlanProperties` (the same `Arc`: partitioning,
//! orderings, equivalences, boundedness, emission), requires nothing of its input, keeps its
//! order, passes filters (dynamic ones included) and projections through, and its `execute` is
//! its input's stream, untouched.
//!
//! The rule adds it only when it could have moved joins (enabled, with a GPU or forced for
//! tests): without a GPU, or disabled, every plan stays DataFusion's, byte for byte. A second
//! run of the rule over a plan replaces the node with a fresh decision (never two notes).

use std::fmt;
use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::{replace_children_if_necessary, CardinalityEffect};
use datafusion::physical_plan::filter_pushdown::{ChildPushdownResult, FilterDescription, FilterPushdownPhase, FilterPushdownPropagation};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{ChildStats, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream, StatisticsArgs};

/// A pass-through node above a join that [`GpuJoinRule`](crate::GpuJoinRule) kept on the CPU,
/// carrying the reason (`EXPLAIN`: `CpuJoinKeptExec: reason=...`). See the
/// [module docs](self).
#[derive(Debug, Clone)]
pub struct CpuJoinKeptExec {
    input: Arc<dyn ExecutionPlan>,
    reason: String,
}

impl CpuJoinKeptExec {
    /// `input` (the kept join) with the reason it stayed on the CPU.
    pub fn new(input: Arc<dyn ExecutionPlan>, reason: impl Into<String>) -> Self {
        CpuJoinKeptExec { input, reason: reason.into() }
    }

    /// The kept join.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// Why it stayed on the CPU.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl DisplayAs for CpuJoinKeptExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(f, "CpuJoinKeptExec: reason={}", self.reason),
            DisplayFormatType::TreeRender => writeln!(f, "reason={}", self.reason),
        }
    }
}

impl ExecutionPlan for CpuJoinKeptExec {
    fn name(&self) -> &str {
        "CpuJoinKeptExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(&self, _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>, _options: ReplaceChildrenOptions) -> Result<Arc<dyn ExecutionPlan>> {
        let [input]: [Arc<dyn ExecutionPlan>; 1] = match children.try_into() {
            Ok(c) => c,
            Err(c) => return internal_err!("CpuJoinKeptExec has 1 child, got {}", c.len()),
        };
        Ok(Arc::new(CpuJoinKeptExec { input, reason: self.reason.clone() }))
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(datafusion::physical_plan::ChildrenPropertiesMode::Recompute))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    fn statistics_from_inputs(&self, input_stats: &[Arc<Statistics>], _args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        match input_stats.first() {
            Some(s) => Ok(Arc::clone(s)),
            None => internal_err!("CpuJoinKeptExec: no input statistics"),
        }
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        CardinalityEffect::Equal
    }

    fn try_swapping_with_projection(&self, projection: &ProjectionExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        match self.input.try_swapping_with_projection(projection)? {
            Some(input) => Ok(Some(replace_children_if_necessary(Arc::new(self.clone()), vec![input])?)),
            None => Ok(None),
        }
    }

    fn gather_filters_for_pushdown(&self, _phase: FilterPushdownPhase, parent_filters: Vec<Arc<dyn PhysicalExpr>>, _config: &ConfigOptions) -> Result<FilterDescription> {
        FilterDescription::from_children(parent_filters, &self.children())
    }

    fn handle_child_pushdown_result(&self, _phase: FilterPushdownPhase, child_pushdown_result: ChildPushdownResult, _config: &ConfigOptions) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        Ok(FilterPushdownPropagation::if_all(child_pushdown_result))
    }
}
