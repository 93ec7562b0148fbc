//! [`GpuJoinRule`]: the physical optimizer rule that puts [`GpuJoinExec`] in place of the CPU
//! joins gpujoin can run.
//!
//! # What moves
//!
//! When a GPU is present, a `HashJoinExec` (mode `CollectLeft` or `Partitioned`), a
//! `NestedLoopJoinExec` (a theta join on its filter), a `CrossJoinExec`, a `SortMergeJoinExec`
//! or a `SymmetricHashJoinExec` moves when
//!
//! * its join type is Inner, Left, Right, Full, LeftSemi, LeftAnti, RightSemi or RightAnti
//!   (not LeftMark / RightMark) and it is not a null-aware anti join (`NOT IN`);
//! * every key is a plain column reference of a type gpujoin holds
//!   ([`gpujoin_arrow::device_type`]: integers, floats, booleans, dates, timestamps, decimal128,
//!   strings including `Utf8View`, dictionaries of those), float keys only with
//!   [`GpuJoinConfig::allow_float_semantics`];
//! * its filter, if any, is comparisons of columns and literals combined with AND, OR, NOT (see
//!   [`crate::translate::filter_predicate`]);
//! * every output column has a device type, and each input has a column to upload (a join that
//!   outputs, keys and filters on no column of an input stays: gpujoin's tables carry their
//!   rows in their columns);
//! * (equi-joins) its build (left) input may have [`GpuJoinConfig::min_build_rows`] rows or
//!   more (default [`DEFAULT_MIN_BUILD_ROWS`](crate::DEFAULT_MIN_BUILD_ROWS)): it stays when that
//!   input is a table of fewer rows, seen through filters, projections, repartitions, sorts and
//!   aggregates, which never add rows (a join's output always may);
//! * both inputs are bounded, no `LIMIT` was pushed into it (`fetch`), and (hash and nested-loop
//!   joins) it declares no output ordering (the plan above might rely on the order the CPU
//!   operator keeps; gpujoin's differs).
//!
//! The null equality (`IS NOT DISTINCT FROM` keys) carries over for every operator.
//! `PiecewiseMergeJoinExec` stays on the CPU in this version.
//!
//! # Sort-merge and symmetric hash joins
//!
//! A `SortMergeJoinExec` becomes a `Partitioned` [`GpuJoinExec`] on the same co-partitioned
//! inputs; a `SymmetricHashJoinExec` of bounded inputs (DataFusion plans them for unbounded ones,
//! which stay) a `Partitioned` one, or `CollectLeft` for its single-partition mode. The
//! `SortExec` directly below either join (the order the CPU join required, which the GPU join
//! does not need) is removed when it only sorts: no `LIMIT` (`fetch`), and it keeps its input's
//! partitions (or there is one).
//!
//! A sort-merge join declares its output order (its keys'), and DataFusion drops the sorts above
//! it that this order already satisfies: an `ORDER BY` of the key becomes a
//! `SortPreservingMergeExec` over the join. So the rule walks the plan from the root, noting
//! which nodes' order the plan above relies on: a parent's `required_input_ordering` (or a
//! `PartialSortExec`, which relies on its input's order without declaring it), carried
//! down through the parents that keep their input's order (`maintains_input_order`), and the
//! root's own order when the root has one partition (the answer's order, maybe an `ORDER BY`
//! DataFusion dropped). Where a replaced sort-merge join's order is relied on, a `SortExec`
//! (`preserve_partitioning`, the join's declared order) over the `GpuJoinExec` restores it; where
//! not, nothing does (the order was incidental). Only then is a GPU join plus one sort of its
//! output cheaper than keeping the CPU join (which sorts both inputs): the join is most of the
//! work. A plan in which the moved sort-merge or symmetric joins fail DataFusion's
//! `SanityCheckPlan` (an order or distribution requirement no longer met, which should not
//! happen) is planned again with them kept, saying why.
//!
//! # Partitioned joins without their repartitions
//!
//! DataFusion hash-partitions both inputs of a `Partitioned` hash join so that each core builds
//! and probes its own hash table; the device needs no such split. Where both inputs of a moved
//! `Partitioned` Inner, Right, RightSemi or RightAnti join are `RepartitionExec`s by hash, the
//! `GpuJoinExec` is `CollectLeft` on what they repartition (the build side coalesced, the
//! probe side in its own partitions), as long as the build side is estimated small enough
//! ([`GpuJoinConfig::collect_build_rows`]) and the plan above does not rely on the join's
//! output being hash-partitioned: the plan with every such join changed must pass DataFusion's
//! `SanityCheckPlan`, else each is changed in turn only where the plan still passes. An
//! equi-join kept on the CPU for its small build side ([`GpuJoinConfig::min_build_rows`]) is
//! changed the same way into DataFusion's own `CollectLeft` hash join (TPC-H Q7's and Q21's
//! `supplier JOIN lineitem` hash-repartitioned 18M and 38M `lineitem` rows for a build side
//! of 100,000 rows).
//!
//! Where the plan above relies on a join's hash partitioning (TPC-H Q3's `orders JOIN
//! lineitem` feeds an aggregate grouping by `l_orderkey` without a repartition of its own), a
//! later pass runs it `CollectLeft` all the same and repartitions its output by hash instead
//! (`EXPLAIN`: `replaces=HashJoinExec (Partitioned; unrepartitioned inputs; output
//! repartitioned)`): a join's output is mostly far smaller than its probe side (Q3: 302K rows
//! against 32M). That pass also takes LeftSemi and LeftAnti joins without a filter, as
//! RightSemi and RightAnti joins of the swapped inputs, and joins whose build side is not a
//! repartition (another join's output), where the probe side is one; the plan must pass the
//! sanity check, else the pass is undone.
//!
//! # Semi and anti joins below the inner join they filter
//!
//! A `Partitioned` GPU semi or anti join (no filter) whose input is a GPU inner join (directly
//! or through a repartition by hash) and whose keys are all columns of one side of it runs
//! below it, on that side: `(A JOIN B) SEMI JOIN C` on `A`'s keys becomes
//! `(A SEMI JOIN C) JOIN B` (a `Partitioned` inner join, whose `A` is already partitioned by
//! those keys), on `B`'s keys `A JOIN (B SEMI JOIN C)` (a `CollectLeft` one, `B` repartitioned
//! by hash for the semi join), the same rows, again until none moves (see
//! `pushed_below_inner`). The inner join then joins, and its host gathers take, only the rows
//! that pass: TPC-H Q18 at SF10 joined 60M rows and gathered five build columns of each to keep
//! 4,400, and then joined 15M `customer JOIN orders` rows to keep 624. `EXPLAIN` shows both
//! joins' `replaces=` with a note; a plan that would fail DataFusion's `SanityCheckPlan` keeps
//! the order DataFusion chose.
//!
//! # Semi-join reductions, last
//!
//! Last, with the joins decided, the rule runs the [semi-join reductions](crate::reduce) of
//! [`GpuJoinConfig::semi_join_reduction_rows`]: a table below a chain of inner joins is first
//! reduced to the rows whose key can meet a small filtered input of a join above (TPC-H Q7's
//! `supplier` and `customer` by its two nations), where the plan stays sane. Then each
//! `CollectLeft` GPU join that drops its probe rows without a match gets its probe side
//! filtered by its build keys where that side is read
//! ([`GpuJoinConfig::probe_key_filters`]; [`BuildKeys`](crate::key_filter::BuildKeys)).
//!
//! # Decisions
//!
//! The plan shows each decision the rule made with a GPU present: a join that moved is a
//! `GpuJoinExec: ..., algorithm=..., replaces=SortMergeJoinExec`; a join kept on the CPU has a
//! [`CpuJoinKeptExec`] above it, `CpuJoinKeptExec: reason=...`, a pass-through node that costs
//! nothing (see [`crate::kept`] for why a node). Without a GPU (or disabled) the rule changes
//! nothing, no notes either: every plan is byte for byte DataFusion's. The rule's decision for
//! every join it saw is also in [`GpuJoinRule::decisions`] (the latest
//! [`GpuJoinRule::MAX_DECISIONS`]), and logged at `debug` level (target `gpujoin_datafusion`).

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::stats::Precision;
use datafusion::common::{JoinType as DfJoinType, NullEquality, Result};
use datafusion::execution::SessionState;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_optimizer::sanity_checker::SanityCheckPlan;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::execution_plan::replace_children_if_necessary;
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::joins::{CrossJoinExec, HashJoinExec, NestedLoopJoinExec, PartitionMode, PiecewiseMergeJoinExec, SortMergeJoinExec, StreamJoinPartitionMode, SymmetricHashJoinExec};
use datafusion::physical_plan::sorts::partial_sort::PartialSortExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning, StatisticsArgs, StatisticsContext};

use crate::reduce::join_source;
use crate::translate::{plan_join, Refusal};
use crate::{CpuJoinKeptExec, GpuJoinConfig, GpuJoinExec, KeyFilterExec};

/// What the rule did with one join.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinDecision {
    /// The CPU operator (`HashJoinExec`, `SortMergeJoinExec`, ...).
    pub operator: String,
    /// Its join type, where it has one (`CrossJoinExec` has none).
    pub join_type: Option<DfJoinType>,
    /// Its keys, as `EXPLAIN` writes them (`(a@0, b@1)`).
    pub on: String,
    /// `None`: replaced by a [`GpuJoinExec`]; `Some(reason)`: kept on the CPU, and why.
    pub kept: Option<String>,
    /// Whether the plan shows the decision: a [`GpuJoinExec`], or a [`CpuJoinKeptExec`] above
    /// the kept join (`false`: kept without a note, because there is no GPU or the rule is
    /// disabled, and the plan is DataFusion's).
    pub shown: bool,
}

impl JoinDecision {
    /// Whether the join moved to the GPU.
    pub fn moved(&self) -> bool {
        self.kept.is_none()
    }
}

impl fmt::Display for JoinDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.operator)?;
        if let Some(t) = self.join_type {
            write!(f, " {t:?}")?;
        }
        if !self.on.is_empty() {
            write!(f, " on=[{}]", self.on)?;
        }
        match &self.kept {
            None => write!(f, ": GpuJoinExec"),
            Some(reason) => write!(f, ": kept on the CPU: {reason}"),
        }
    }
}

/// Replaces `HashJoinExec`s, `NestedLoopJoinExec`s, `CrossJoinExec`s, `SortMergeJoinExec`s and
/// `SymmetricHashJoinExec`s with [`GpuJoinExec`]s where gpujoin can run them, and notes why
/// where not (see the [module docs](self)). Install it with [`crate::with_gpu_joins`].
#[derive(Debug)]
pub struct GpuJoinRule {
    config: GpuJoinConfig,
    /// Whether the device opens (asked once, at the first plan).
    gpu: OnceLock<std::result::Result<(), String>>,
    decisions: Mutex<Vec<JoinDecision>>,
}

impl GpuJoinRule {
    /// The most decisions [`GpuJoinRule::decisions`] keeps (the oldest go first).
    pub const MAX_DECISIONS: usize = 4096;

    pub fn new(config: GpuJoinConfig) -> Self {
        GpuJoinRule { config, gpu: OnceLock::new(), decisions: Mutex::new(Vec::new()) }
    }

    pub fn config(&self) -> &GpuJoinConfig {
        &self.config
    }

    /// The decisions of the plans optimized so far, oldest first.
    pub fn decisions(&self) -> Vec<JoinDecision> {
        self.decisions.lock().map(|d| d.clone()).unwrap_or_default()
    }

    /// The decisions so far, forgetting them.
    pub fn take_decisions(&self) -> Vec<JoinDecision> {
        self.decisions.lock().map(|mut d| std::mem::take(&mut *d)).unwrap_or_default()
    }

    /// The rule installed in `state` ([`crate::with_gpu_joins`]), if any.
    pub fn find(state: &SessionState) -> Option<&GpuJoinRule> {
        state.physical_optimizers().iter().find_map(|r| (r.as_ref() as &dyn Any).downcast_ref::<GpuJoinRule>())
    }

    /// `Ok` when the rule may move joins: enabled, and a GPU present (or forced for tests).
    fn gate(&self) -> std::result::Result<(), String> {
        if !self.config.enabled {
            return Err("GPU joins are disabled (GpuJoinConfig::enabled = false)".into());
        }
        if self.config.forced() {
            return Ok(());
        }
        let device = self.config.device;
        self.gpu.get_or_init(|| gpujoin_device::Device::new(device).map(|_| ()).map_err(|e| format!("no GPU: {e}"))).clone()
    }

    /// The `GpuJoinExec` for a `HashJoinExec`, or why not; `CollectLeft` on `unrepartitioned`
    /// inputs where given ([`unrepartitioned_inputs`]).
    fn replace_hash_join(&self, h: &HashJoinExec, unrepartitioned: Option<&Unrepartitioned>) -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal> {
        if h.null_aware {
            return Err(Refusal("a null-aware anti join (NOT IN): gpujoin has no null-aware anti join".into()));
        }
        if h.mode == PartitionMode::Auto {
            return Err(Refusal("PartitionMode::Auto (JoinSelection did not choose a mode)".into()));
        }
        let (left, right, mode, operator) = match unrepartitioned {
            Some(u) => (&u.left, &u.right, PartitionMode::CollectLeft, UNREPARTITIONED),
            None => (&h.left, &h.right, h.mode, "HashJoinExec"),
        };
        let join = Join { left, right, on: &h.on, filter: h.filter.as_ref(), join_type: h.join_type, null_equality: h.null_equality, projection: h.projection.as_deref(), mode, order: Order::Refuse };
        self.replace(h, join, operator)
    }

    /// The `GpuJoinExec` (`CollectLeft`, no keys: a theta join on the filter) for a
    /// `NestedLoopJoinExec`, or why not.
    fn replace_nested_loop(&self, j: &NestedLoopJoinExec) -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal> {
        let projection = j.projection().as_deref();
        let join = Join {
            left: j.left(),
            right: j.right(),
            on: &[],
            filter: j.filter(),
            join_type: *j.join_type(),
            null_equality: NullEquality::NullEqualsNothing,
            projection,
            mode: PartitionMode::CollectLeft,
            order: Order::Refuse,
        };
        self.replace(j, join, "NestedLoopJoinExec")
    }

    /// The `GpuJoinExec` (`CollectLeft`, no keys, no filter) for a `CrossJoinExec`, or why not.
    fn replace_cross(&self, j: &CrossJoinExec) -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal> {
        let join = Join {
            left: j.left(),
            right: j.right(),
            on: &[],
            filter: None,
            join_type: DfJoinType::Inner,
            null_equality: NullEquality::NullEqualsNothing,
            projection: None,
            mode: PartitionMode::CollectLeft,
            order: Order::Refuse,
        };
        self.replace(j, join, "CrossJoinExec")
    }

    /// The `GpuJoinExec` (`Partitioned`, on the co-partitioned inputs the sort-merge join
    /// required, without the `SortExec`s directly below it) for a `SortMergeJoinExec`, under a
    /// `SortExec` restoring its output order when `order_needed`; or why not.
    fn replace_sort_merge(&self, j: &SortMergeJoinExec, order_needed: bool) -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal> {
        let (left, right) = (without_sort(j.left()), without_sort(j.right()));
        let join = Join {
            left: &left,
            right: &right,
            on: j.on(),
            filter: j.filter().as_ref(),
            join_type: j.join_type(),
            null_equality: j.null_equality(),
            projection: None,
            mode: PartitionMode::Partitioned,
            order: Order::Restore(order_needed),
        };
        self.replace(j, join, "SortMergeJoinExec")
    }

    /// The `GpuJoinExec` (`Partitioned`, or `CollectLeft` for a single-partition one, without
    /// the `SortExec`s directly below it) for a `SymmetricHashJoinExec` of bounded inputs (it
    /// declares no output order), or why not.
    fn replace_symmetric(&self, j: &SymmetricHashJoinExec) -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal> {
        let mode = match j.partition_mode() {
            StreamJoinPartitionMode::Partitioned => PartitionMode::Partitioned,
            StreamJoinPartitionMode::SinglePartition => PartitionMode::CollectLeft,
        };
        let (left, right) = (without_sort(j.left()), without_sort(j.right()));
        let join = Join { left: &left, right: &right, on: j.on(), filter: j.filter(), join_type: *j.join_type(), null_equality: j.null_equality(), projection: None, mode, order: Order::Refuse };
        self.replace(j, join, "SymmetricHashJoinExec")
    }

    /// `node` with its joins decided, children first. `order_needed`: the plan above relies on
    /// `node`'s output order (a parent requires an order of it, or keeps its order for a parent
    /// that does, up to the root when the root has one partition).
    fn visit(&self, node: Arc<dyn ExecutionPlan>, order_needed: bool, pass: &mut Pass<'_>) -> Result<Arc<dyn ExecutionPlan>> {
        // The note of an earlier run: decide again.
        if let Some(k) = node.downcast_ref::<CpuJoinKeptExec>() {
            return self.visit(Arc::clone(k.input()), order_needed, pass);
        }
        let required = node.required_input_ordering();
        let keeps = node.maintains_input_order();
        // A PartialSortExec sorts only within runs of its input's order, which it requires
        // without declaring it.
        let partial_sort = node.downcast_ref::<PartialSortExec>().is_some();
        let mut children = Vec::new();
        for (i, c) in node.children().into_iter().enumerate() {
            let needed = partial_sort || required.get(i).is_some_and(Option::is_some) || (order_needed && keeps.get(i).copied().unwrap_or(false));
            children.push(self.visit(Arc::clone(c), needed, pass)?);
        }
        let node = if children.is_empty() { node } else { replace_children_if_necessary(node, children)? };
        self.decide(node, order_needed, pass)
    }

    /// The rule's decision for `node` (its children decided): a `GpuJoinExec` (under a
    /// `SortExec` for a sort-merge join whose order is needed), the join under a
    /// `CpuJoinKeptExec` with the reason, or, without a GPU, `node` itself.
    fn decide(&self, node: Arc<dyn ExecutionPlan>, order_needed: bool, pass: &mut Pass<'_>) -> Result<Arc<dyn ExecutionPlan>> {
        let gate = pass.gate;
        let merge_joins = pass.merge_joins.clone();
        let open = |r: &dyn Fn() -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal>| gate.clone().map_err(Refusal).and_then(|()| r());
        let merge = |r: &dyn Fn() -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal>| open(&|| merge_joins.clone().map_err(Refusal).and_then(|()| r()));
        // A hash join's build side small enough to keep it on the CPU (its bound walked once).
        let small_build = node.downcast_ref::<HashJoinExec>().and_then(|h| self.small_build_side(&h.left));
        let unrepartitioned = node.downcast_ref::<HashJoinExec>().and_then(|h| pass.admit(unrepartitioned_inputs(h, self.config.collect_build_rows(), small_build.is_some())));
        let replaced = node
            .downcast_ref::<HashJoinExec>()
            .map(|h| ("HashJoinExec", Some(h.join_type), keys(&h.on), open(&|| self.replace_hash_join(h, unrepartitioned.as_ref()))))
            .or_else(|| node.downcast_ref::<NestedLoopJoinExec>().map(|j| ("NestedLoopJoinExec", Some(*j.join_type()), String::new(), open(&|| self.replace_nested_loop(j)))))
            .or_else(|| node.downcast_ref::<CrossJoinExec>().map(|j| ("CrossJoinExec", None, String::new(), open(&|| self.replace_cross(j)))))
            .or_else(|| node.downcast_ref::<SortMergeJoinExec>().map(|j| ("SortMergeJoinExec", Some(j.join_type()), keys(j.on()), merge(&|| self.replace_sort_merge(j, order_needed)))))
            .or_else(|| node.downcast_ref::<SymmetricHashJoinExec>().map(|j| ("SymmetricHashJoinExec", Some(*j.join_type()), keys(j.on()), merge(&|| self.replace_symmetric(j)))))
            .or_else(|| {
                node.downcast_ref::<PiecewiseMergeJoinExec>()
                    .map(|_| ("PiecewiseMergeJoinExec", None, String::new(), open(&|| Err(Refusal("PiecewiseMergeJoinExec is not moved to the GPU in this version".into())))))
            });
        let Some((operator, join_type, on, result)) = replaced else { return Ok(node) };
        match result {
            Ok(exec) => {
                if matches!(operator, "SortMergeJoinExec" | "SymmetricHashJoinExec") {
                    pass.moved_merge_joins += 1;
                }
                if unrepartitioned.is_some() {
                    pass.unrepartitioned += 1;
                }
                pass.seen.push(JoinDecision { operator: operator.into(), join_type, on, kept: None, shown: true });
                Ok(exec)
            }
            Err(Refusal(reason)) => {
                // A note only where the rule could have moved it: without a GPU (or disabled)
                // the plan stays DataFusion's.
                let shown = gate.is_ok();
                pass.seen.push(JoinDecision { operator: operator.into(), join_type, on, kept: Some(reason.clone()), shown });
                if !shown {
                    return Ok(node);
                }
                // An equi-join kept for its small build side needs no hash repartitions either:
                // DataFusion's own join, `CollectLeft` on the unrepartitioned inputs (one hash
                // table of the small side, probed by every partition as it comes).
                let small = node.downcast_ref::<HashJoinExec>().filter(|_| small_build.is_some());
                if let (Some(h), Some(u)) = (small, &unrepartitioned) {
                    let projection = h.projection.as_deref().map(<[usize]>::to_vec);
                    if let Ok(j) = HashJoinExec::try_new(Arc::clone(&u.left), Arc::clone(&u.right), h.on.clone(), h.filter.clone(), &h.join_type, projection, PartitionMode::CollectLeft, h.null_equality, false) {
                        if j.schema() == node.schema() {
                            pass.unrepartitioned += 1;
                            return Ok(Arc::new(CpuJoinKeptExec::new(Arc::new(j), format!("{reason}; CollectLeft on the inputs before their hash repartitions"))));
                        }
                    }
                }
                Ok(Arc::new(CpuJoinKeptExec::new(node, reason)))
            }
        }
    }

    /// The most rows `build` may have ([`rows_at_most`]) where that is below
    /// [`GpuJoinConfig::min_build_rows`]: an equi-join on it stays on the CPU.
    fn small_build_side(&self, build: &Arc<dyn ExecutionPlan>) -> Option<usize> {
        let min_build_rows = self.config.min_build_rows();
        if min_build_rows == 0 {
            return None;
        }
        rows_at_most(build).filter(|&rows| rows < min_build_rows)
    }

    /// The checks every replaced join passes, then the `GpuJoinExec` with `original`'s schema.
    fn replace(&self, original: &dyn ExecutionPlan, j: Join<'_>, operator: &str) -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal> {
        if let Some(n) = original.fetch() {
            return Err(Refusal(format!("a LIMIT pushed into the join (fetch={n})")));
        }
        if j.left.boundedness().is_unbounded() || j.right.boundedness().is_unbounded() {
            return Err(Refusal("an unbounded input (GpuJoinExec collects its inputs)".into()));
        }
        if j.order == Order::Refuse && original.properties().output_ordering().is_some() {
            return Err(Refusal(format!("the {operator} declares an output order, which the plan above may rely on (gpujoin's output order differs)")));
        }
        let (ls, rs) = (j.left.schema(), j.right.schema());
        plan_join(&ls, &rs, j.on, j.filter, j.join_type, j.null_equality, j.projection, &self.config)?;
        if !j.on.is_empty() {
            if let Some(rows) = self.small_build_side(j.left) {
                return Err(Refusal(format!(
                    "a build side of at most {rows} rows, below min_build_rows={}: the CPU joins it for less than a device join's fixed cost",
                    self.config.min_build_rows()
                )));
            }
        }
        let exec = GpuJoinExec::try_new(
            Arc::clone(j.left),
            Arc::clone(j.right),
            j.on.to_vec(),
            j.filter.cloned(),
            j.join_type,
            j.null_equality,
            j.projection.map(<[usize]>::to_vec),
            j.mode,
            self.config.clone(),
        )
        .map_err(|e| Refusal(e.to_string()))?
        .replacing(operator);
        if exec.schema() != original.schema() {
            return Err(Refusal(format!("internal: GpuJoinExec's schema {:?} differs from the {operator}'s {:?}", exec.schema(), original.schema())));
        }
        match (j.order, original.properties().output_ordering()) {
            (Order::Restore(true), Some(ordering)) => Ok(Arc::new(SortExec::new(ordering.clone(), Arc::new(exec)).with_preserve_partitioning(true))),
            _ => Ok(Arc::new(exec)),
        }
    }
}

/// The parts of a CPU join that a `GpuJoinExec` takes.
struct Join<'a> {
    left: &'a Arc<dyn ExecutionPlan>,
    right: &'a Arc<dyn ExecutionPlan>,
    on: &'a [(PhysicalExprRef, PhysicalExprRef)],
    filter: Option<&'a JoinFilter>,
    join_type: DfJoinType,
    null_equality: NullEquality,
    projection: Option<&'a [usize]>,
    mode: PartitionMode,
    order: Order,
}

/// What a replacement does about the output order the CPU join declares.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Keep the CPU join if it declares one (hash and nested-loop joins).
    Refuse,
    /// Drop it; `true`: a parent relies on it, so a `SortExec` over the `GpuJoinExec` restores
    /// it (sort-merge joins).
    Restore(bool),
}

/// One run of the rule over a plan.
struct Pass<'a> {
    gate: &'a std::result::Result<(), String>,
    seen: Vec<JoinDecision>,
    /// `Err(reason)`: sort-merge and symmetric hash joins stay (a first run moved them and the
    /// plan failed DataFusion's sanity check).
    merge_joins: std::result::Result<(), String>,
    /// Sort-merge and symmetric hash joins replaced.
    moved_merge_joins: usize,
    /// Which of the `Partitioned` hash joins that could run on their inputs before the hash
    /// repartitions ([`unrepartitioned_inputs`]) do so: the `i`-th met where `allowed[i]`
    /// (none with an empty list).
    unrepartition: Vec<bool>,
    /// The joins met that could ([`Pass::admit`] counts them, in the order the walk meets them).
    unrepartition_candidates: usize,
    /// The joins replaced that do.
    unrepartitioned: usize,
}

impl Pass<'_> {
    fn new<'a>(gate: &'a std::result::Result<(), String>, merge_joins: std::result::Result<(), String>, unrepartition: Vec<bool>) -> Pass<'a> {
        Pass { gate, seen: Vec::new(), merge_joins, moved_merge_joins: 0, unrepartition, unrepartition_candidates: 0, unrepartitioned: 0 }
    }

    /// Counts a join that could run on unrepartitioned inputs; returns them where this pass
    /// lets it.
    fn admit(&mut self, candidate: Option<Unrepartitioned>) -> Option<Unrepartitioned> {
        let candidate = candidate?;
        let i = self.unrepartition_candidates;
        self.unrepartition_candidates += 1;
        self.unrepartition.get(i).copied().unwrap_or(false).then_some(candidate)
    }
}

/// What `EXPLAIN` shows (`replaces=...`) for a `Partitioned` hash join moved with
/// [`unrepartitioned_inputs`].
const UNREPARTITIONED: &str = "HashJoinExec (Partitioned; unrepartitioned inputs)";

/// The inputs of a `Partitioned` hash join run as a `CollectLeft` GPU join without the hash
/// repartitions below it ([`GpuJoinConfig::collect_build_rows`]).
struct Unrepartitioned {
    /// The build side's input before its `RepartitionExec`, coalesced into one partition.
    left: Arc<dyn ExecutionPlan>,
    /// The probe side's input before its `RepartitionExec`: as it is where it has the join's
    /// partition count, else dealt round-robin into that many.
    right: Arc<dyn ExecutionPlan>,
}

/// Where `h` may run as a `CollectLeft` GPU join of its inputs before their hash repartitions,
/// those inputs: `h` is `Partitioned`, has keys, is Inner, Right, RightSemi or RightAnti (a
/// probe row's output needs only that row and the build side), both its inputs are
/// `RepartitionExec`s by hash (not order-preserving), the probe side's rows have an estimate,
/// and the build side's estimate, where there is one, is at most `max_build_rows` and at most the
/// probe side's. Where `small_build` (a table of fewer than `min_build_rows` rows: the join
/// stays on the CPU) the probe side needs no estimate (a join's output, as TPC-H Q5's and Q9's
/// `supplier` joins probe). Whether the plan above relies on `h`'s hash partitioning is left to
/// the caller (the sanity check in [`GpuJoinRule::optimize`]).
///
/// Example: TPC-H Q8's `part JOIN lineitem ON p_partkey = l_partkey`, `Partitioned` over
/// `RepartitionExec(Hash([p_partkey]))` of 13,450 filtered `part` rows and
/// `RepartitionExec(Hash([l_partkey]))` of 60M `lineitem` rows, gives `CoalescePartitionsExec`
/// of the filtered `part` scan and the `lineitem` scan's own 16 partitions.
fn unrepartitioned_inputs(h: &HashJoinExec, max_build_rows: usize, small_build: bool) -> Option<Unrepartitioned> {
    if max_build_rows == 0 || h.mode != PartitionMode::Partitioned || h.on.is_empty() || h.null_aware || h.fetch().is_some() {
        return None;
    }
    if !matches!(h.join_type, DfJoinType::Inner | DfJoinType::Right | DfJoinType::RightSemi | DfJoinType::RightAnti) {
        return None;
    }
    let (left, right) = (hash_repartitioned(&h.left)?, hash_repartitioned(&h.right)?);
    collect_left_inputs(left, right, h.right.output_partitioning().partition_count(), max_build_rows, !small_build)
}

/// The input of `plan` where `plan` is a `RepartitionExec` by hash that keeps no order.
fn hash_repartitioned(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    plan.downcast_ref::<RepartitionExec>().filter(|r| matches!(r.partitioning(), Partitioning::Hash(..)) && !r.preserve_order()).map(|r| Arc::clone(r.input()))
}

/// `build` and `probe` as the inputs of a `CollectLeft` join of `partitions` output partitions:
/// the build side coalesced into one partition, the probe side as it is where it has that many,
/// else dealt round-robin into them. `None` where the probe side has no row estimate (and
/// `probe_estimate` asks for one), or the build side's estimate, where there is one, is above
/// `max_build_rows` or the probe side's.
fn collect_left_inputs(build: Arc<dyn ExecutionPlan>, probe: Arc<dyn ExecutionPlan>, partitions: usize, max_build_rows: usize, probe_estimate: bool) -> Option<Unrepartitioned> {
    let stats = StatisticsContext::new();
    let estimate = |p: &Arc<dyn ExecutionPlan>| stats.compute(p.as_ref(), &StatisticsArgs::new()).ok().and_then(|s| s.num_rows.get_value().copied());
    let probe_rows = match estimate(&probe) {
        Some(rows) => rows,
        None if !probe_estimate => usize::MAX,
        None => return None,
    };
    if estimate(&build).is_some_and(|build_rows| build_rows > max_build_rows || build_rows > probe_rows) {
        return None;
    }
    let left: Arc<dyn ExecutionPlan> = if build.output_partitioning().partition_count() > 1 { Arc::new(CoalescePartitionsExec::new(build)) } else { build };
    let right: Arc<dyn ExecutionPlan> =
        if probe.output_partitioning().partition_count() == partitions { probe } else { Arc::new(RepartitionExec::try_new(probe, Partitioning::RoundRobinBatch(partitions)).ok()?) };
    Some(Unrepartitioned { left, right })
}

/// `plan` without a `SortExec` on top that only orders (no `LIMIT`, the same partitions): the
/// sort a sort-merge or symmetric hash join required, which a `GpuJoinExec` does not need (its
/// output order is its algorithm's whatever the input's).
fn without_sort(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    match plan.downcast_ref::<SortExec>() {
        Some(s) if s.fetch().is_none() && (s.preserve_partitioning() || s.input().output_partitioning().partition_count() <= 1) => Arc::clone(s.input()),
        _ => Arc::clone(plan),
    }
}

/// The most rows `plan` can produce, where that is known: its exact row count (an in-memory or
/// Parquet table), its files' row counts (a file scan with a pushed-down predicate), else its input's through operators that never add rows (filters,
/// projections, repartitions, sorts, aggregates, and semi and anti joins: their kept side's).
/// Another join's output, or anything else, is `None`: DataFusion's estimates of join outputs
/// can be orders of magnitude low.
///
/// Example: `FilterExec(r_name = 'ASIA')` over `region`'s 5 rows gives `Some(5)` (DataFusion
/// estimates 1); a `HashJoinExec` of two tables gives `None`.
pub(crate) fn rows_at_most(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    // One context for the walk: it keeps the statistics of the nodes below, which the next
    // step down reads again.
    rows_at_most_in(plan, &StatisticsContext::new())
}

fn rows_at_most_in(plan: &Arc<dyn ExecutionPlan>, stats: &StatisticsContext) -> Option<usize> {
    if let Ok(s) = stats.compute(plan.as_ref(), &StatisticsArgs::new()) {
        if let Precision::Exact(rows) = s.num_rows {
            return Some(rows);
        }
    }
    if let Some(rows) = file_rows(plan) {
        return Some(rows);
    }
    // Semi and anti joins keep some rows of one side (the semi joins of reductions among them).
    let kept_side = |join_type: DfJoinType| match join_type {
        DfJoinType::LeftSemi | DfJoinType::LeftAnti => Some(0),
        DfJoinType::RightSemi | DfJoinType::RightAnti => Some(1),
        _ => None,
    };
    let kept = match (plan.downcast_ref::<HashJoinExec>(), plan.downcast_ref::<GpuJoinExec>()) {
        (Some(h), _) => kept_side(h.join_type),
        (_, Some(g)) => kept_side(g.join_type()),
        _ => None,
    };
    let kept = kept.or_else(|| plan.downcast_ref::<KeyFilterExec>().map(|_| 1));
    if let Some(side) = kept {
        return rows_at_most_in(plan.children()[side], stats);
    }
    let never_adds_rows = plan.downcast_ref::<FilterExec>().is_some()
        || plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
        || plan.downcast_ref::<SortExec>().is_some()
        || plan.downcast_ref::<SortPreservingMergeExec>().is_some()
        || plan.downcast_ref::<AggregateExec>().is_some()
        || plan.downcast_ref::<CpuJoinKeptExec>().is_some();
    match plan.children().as_slice() {
        [input] if never_adds_rows => rows_at_most_in(input, stats),
        _ => None,
    }
}

/// The rows of a file scan by its files' own row counts, where every file has an exact one
/// (Parquet's footers; DataFusion collects them): a scan's statistics become inexact under a
/// pushed-down predicate, yet it reads at most its files' rows (a file read in byte ranges by
/// several partitions counts once a range: more, still a bound).
///
/// Example: TPC-H's `nation` as a Parquet file of 25 rows, scanned with `n_name = 'FRANCE'`
/// pushed down: the scan's estimate is inexact, its bound 25.
fn file_rows(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    use datafusion::datasource::physical_plan::FileScanConfig;
    use datafusion::datasource::source::DataSourceExec;
    let files = plan.downcast_ref::<DataSourceExec>()?.data_source().downcast_ref::<FileScanConfig>()?;
    let mut rows = 0usize;
    for file in files.file_groups.iter().flat_map(|g| g.iter()) {
        match file.statistics.as_ref()?.num_rows {
            Precision::Exact(n) => rows = rows.checked_add(n)?,
            _ => return None,
        }
    }
    Some(files.limit.map_or(rows, |l| rows.min(l)))
}

/// `plan` with every `Partitioned` GPU semi or anti join over a GPU inner join whose keys are
/// all columns of one side of the inner join run below it, on that side
/// ([`pushed_below_inner`]), again until none moves (a join pushed down may meet another inner
/// join below); and how many moved.
fn push_semi_joins_below_inner(plan: Arc<dyn ExecutionPlan>) -> Result<(Arc<dyn ExecutionPlan>, usize)> {
    let (mut plan, mut moved) = (plan, 0);
    // Each round moves every such join one inner join down; a plan has few joins.
    for _ in 0..16 {
        let mut round = 0;
        plan = plan
            .transform_up(|node| {
                Ok(match pushed_below_inner(&node) {
                    Some(p) => {
                        round += 1;
                        Transformed::yes(p)
                    }
                    None => Transformed::no(node),
                })
            })?
            .data;
        if round == 0 {
            break;
        }
        moved += round;
    }
    Ok((plan, moved))
}

/// A semi or anti join `S` (no filter, nulls equal nothing, `Partitioned`) of an inner join
/// `J = A JOIN B` (directly, or through a `RepartitionExec` by hash) with `C` (LeftSemi,
/// LeftAnti with `J` on the left; RightSemi, RightAnti with it on the right), on keys that are
/// all columns of one side `X` of `J`, as `J` with `X SEMI JOIN C` in `X`'s place: the same
/// rows (an output row of `J` stays when its `X` part's keys match in `C`, which is whether
/// that `X` row passes), but `J` now joins only the rows that pass, and its output columns are
/// taken for those only. `X` is `A` where `J` is `Partitioned` and `A` is partitioned by hash
/// on the semi join's keys (`J`'s own), or `B` (the probe side) where `J` is `CollectLeft`,
/// repartitioned by hash on the semi join's keys unless it already is.
///
/// Example: TPC-H Q18 joins `customer JOIN orders` (15M rows at SF10) with `lineitem` (60M),
/// then keeps the rows whose `o_orderkey` is among the 624 of `lineitem`'s large orders: the
/// semi join moves below the `lineitem` join (its build side's key), then below
/// `customer JOIN orders` onto `orders` (its probe side's key), so that both inner joins join
/// 624 orders, not 15M and 60M rows whose build columns the host gathered to throw nearly all
/// away.
fn pushed_below_inner(node: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    let s = node.downcast_ref::<GpuJoinExec>()?;
    if s.filter().is_some() || s.mode() != PartitionMode::Partitioned || s.null_equality() != NullEquality::NullEqualsNothing {
        return None;
    }
    // The inner join J and the other input C: RightSemi and RightAnti keep their right side's
    // rows (DataFusion swaps a semi join's inputs to build on the smaller one).
    let (j_in, c, j_right) = match s.join_type() {
        DfJoinType::LeftSemi | DfJoinType::LeftAnti => (s.left(), s.right(), false),
        DfJoinType::RightSemi | DfJoinType::RightAnti => (s.right(), s.left(), true),
        _ => return None,
    };
    let j_plan = hash_repartitioned(j_in).unwrap_or_else(|| Arc::clone(j_in));
    let j = j_plan.downcast_ref::<GpuJoinExec>()?;
    if j.join_type() != DfJoinType::Inner {
        return None;
    }
    let left_len = j.left().schema().fields().len();
    // S's keys on J's side as (J's input, its column): 0 for A, 1 for B.
    let j_keys = s
        .on()
        .iter()
        .map(|(l, r)| join_source(DfJoinType::Inner, j.projection(), left_len, (if j_right { r } else { l }).downcast_ref::<Column>()?.index()))
        .collect::<Option<Vec<(usize, usize)>>>()?;
    let on_a = j_keys.iter().all(|&(side, _)| side == 0);
    let on_b = j_keys.iter().all(|&(side, _)| side == 1);
    let on_x = match (j.mode(), on_a, on_b) {
        (PartitionMode::Partitioned, true, _) => true,
        (PartitionMode::CollectLeft, _, true) => false,
        _ => return None,
    };
    let x = if on_x { j.left() } else { j.right() };
    let x_schema = x.schema();
    let x_keys: Vec<PhysicalExprRef> = j_keys.iter().map(|&(_, at)| Arc::new(Column::new(x_schema.field(at).name(), at)) as PhysicalExprRef).collect();
    // The semi join's `X` input partitioned by hash on its keys: `A` must already be (`J`
    // needs it partitioned on its own keys), `B` is repartitioned where it is not.
    let want = Partitioning::Hash(x_keys.clone(), s.properties().output_partitioning().partition_count());
    let x_in = match (*x.output_partitioning() == want, on_x) {
        (true, _) => Arc::clone(x),
        (false, true) => return None,
        (false, false) => Arc::new(RepartitionExec::try_new(Arc::clone(x), want).ok()?),
    };
    let on: Vec<(PhysicalExprRef, PhysicalExprRef)> = s.on().iter().zip(x_keys).map(|((l, r), xk)| if j_right { (Arc::clone(l), xk) } else { (xk, Arc::clone(r)) }).collect();
    // What each join replaces, with its note once (a join pushed down again keeps its own).
    let replaces = |e: &GpuJoinExec, note: &str| {
        let was = e.replaces().unwrap_or("HashJoinExec");
        if was.contains(note) { was.to_string() } else { format!("{was} ({note})") }
    };
    let (sl, sr) = if j_right { (Arc::clone(c), x_in) } else { (x_in, Arc::clone(c)) };
    let semi = GpuJoinExec::try_new(sl, sr, on, None, s.join_type(), s.null_equality(), None, PartitionMode::Partitioned, s.config().clone())
        .ok()?
        .replacing(replaces(s, "pushed below the inner join it filtered"));
    // S's output columns are J's (a semi join outputs its left side's): S's projection of J's.
    let projection = match (s.projection(), j.projection()) {
        (None, p) => p.map(<[usize]>::to_vec),
        (Some(sp), None) => Some(sp.to_vec()),
        (Some(sp), Some(jp)) => Some(sp.iter().map(|&i| jp.get(i).copied()).collect::<Option<Vec<_>>>()?),
    };
    let (jl, jr): (Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>) = if on_x { (Arc::new(semi), Arc::clone(j.right())) } else { (Arc::clone(j.left()), Arc::new(semi)) };
    let inner = GpuJoinExec::try_new(jl, jr, j.on().to_vec(), j.filter().cloned(), DfJoinType::Inner, j.null_equality(), projection, j.mode(), j.config().clone())
        .ok()?
        .replacing(replaces(j, "over the semi or anti join pushed below it"));
    (inner.schema() == node.schema()).then(|| Arc::new(inner) as Arc<dyn ExecutionPlan>)
}

/// `plan` with every `Partitioned` GPU join whose probe input is a `RepartitionExec` by hash run
/// `CollectLeft` on the inputs before the hash repartitions, its output repartitioned by hash
/// as before where the plan above may rely on that ([`collect_left_rehashed`]); and how many
/// moved. The pass after [`unrepartitioned_inputs`]: it reaches the joins whose hash
/// partitioning a parent relies on (an aggregate grouping by the join key without a
/// repartition of its own) and the semi and anti joins [`push_semi_joins_below_inner`] made.
///
/// Example: TPC-H Q3's `(customer JOIN orders) JOIN lineitem` feeds an aggregate grouping by
/// `l_orderkey`: it hash-repartitioned 32M `lineitem` rows for the join; now the join probes
/// `lineitem`'s partitions as they are and its 302K output rows are repartitioned instead.
fn collect_left_everywhere(plan: Arc<dyn ExecutionPlan>, max_build_rows: usize) -> Result<(Arc<dyn ExecutionPlan>, usize)> {
    let mut moved = 0;
    let plan = collect_left_below(plan, false, max_build_rows, &mut moved)?;
    Ok((plan, moved))
}

/// [`collect_left_everywhere`] from `node` down; `keep_hash`: the plan above may rely on
/// `node`'s output being partitioned by hash (a parent requires it of `node`, or of a parent
/// that takes its partitioning from `node` without asking anything of it).
fn collect_left_below(node: Arc<dyn ExecutionPlan>, keep_hash: bool, max_build_rows: usize, moved: &mut usize) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::physical_plan::Distribution;
    let converts = collect_left_rehashed(&node, false, max_build_rows).is_some();
    let required = node.input_distribution_requirements();
    let children = node.children();
    if children.is_empty() {
        return Ok(node);
    }
    let mut new_children = Vec::with_capacity(children.len());
    for (i, c) in children.into_iter().enumerate() {
        let keep = !converts
            && match required.child_distribution(i) {
                Some(Distribution::UnspecifiedDistribution) | None => keep_hash,
                Some(Distribution::SinglePartition) => false,
                // By key, by hash (its deprecated name), or any other a later version adds.
                Some(_) => true,
            };
        new_children.push(collect_left_below(Arc::clone(c), keep, max_build_rows, moved)?);
    }
    let node = replace_children_if_necessary(node, new_children)?;
    Ok(match collect_left_rehashed(&node, keep_hash, max_build_rows) {
        Some(p) => {
            *moved += 1;
            p
        }
        None => node,
    })
}

/// A `Partitioned` GPU join in a hash join's place (Inner, Right, RightSemi, RightAnti; LeftSemi
/// and LeftAnti without a filter as RightSemi and RightAnti with the inputs swapped; with host
/// gathers Left, Full, and LeftSemi and LeftAnti with a filter, their probe partitions sharing
/// the build side's matched-rows bitmap) whose probe
/// input is a `RepartitionExec` by hash, as a `CollectLeft` GPU join of the inputs before their hash
/// repartitions (the build side coalesced; the probe side as it is, or dealt round-robin into
/// the join's partition count), under a `RepartitionExec` giving the join's hash partitioning
/// back where `keep_hash`. The estimates as [`collect_left_inputs`] checks them.
fn collect_left_rehashed(node: &Arc<dyn ExecutionPlan>, keep_hash: bool, max_build_rows: usize) -> Option<Arc<dyn ExecutionPlan>> {
    let g = node.downcast_ref::<GpuJoinExec>()?;
    // Hash joins (sort-merge and symmetric joins keep the partitions DataFusion planned).
    let was = g.replaces().unwrap_or("HashJoinExec");
    if max_build_rows == 0 || g.mode() != PartitionMode::Partitioned || g.on().is_empty() || !was.starts_with("HashJoinExec") {
        return None;
    }
    let (build, probe, on, join_type, filter) = match g.join_type() {
        DfJoinType::Inner | DfJoinType::Right | DfJoinType::RightSemi | DfJoinType::RightAnti => (g.left(), g.right(), g.on().to_vec(), g.join_type(), g.filter().cloned()),
        DfJoinType::LeftSemi | DfJoinType::LeftAnti if g.filter().is_none() => {
            let swapped = g.on().iter().map(|(l, r)| (Arc::clone(r), Arc::clone(l))).collect();
            let jt = if g.join_type() == DfJoinType::LeftSemi { DfJoinType::RightSemi } else { DfJoinType::RightAnti };
            (g.right(), g.left(), swapped, jt, None)
        }
        // The joins that return build rows by a matched-rows bitmap, which the probe
        // partitions of a `CollectLeft` GPU join share (host gathers).
        DfJoinType::Left | DfJoinType::Full | DfJoinType::LeftSemi | DfJoinType::LeftAnti if g.shares_matched_rows() => (g.left(), g.right(), g.on().to_vec(), g.join_type(), g.filter().cloned()),
        _ => return None,
    };
    let probe = hash_repartitioned(probe)?;
    let build = hash_repartitioned(build).unwrap_or_else(|| Arc::clone(build));
    let partitioning = g.properties().output_partitioning().clone();
    let Unrepartitioned { left: build, right: probe } = collect_left_inputs(build, probe, partitioning.partition_count(), max_build_rows, true)?;
    let rehash = keep_hash && matches!(partitioning, Partitioning::Hash(..));
    let note = if rehash { "unrepartitioned inputs; output repartitioned" } else { "unrepartitioned inputs" };
    let replaces = if was == "HashJoinExec" { format!("HashJoinExec (Partitioned; {note})") } else { format!("{was}; {note}") };
    let exec = GpuJoinExec::try_new(build, probe, on, filter, join_type, g.null_equality(), g.projection().map(<[usize]>::to_vec), PartitionMode::CollectLeft, g.config().clone()).ok()?.replacing(replaces);
    if exec.schema() != g.schema() {
        return None;
    }
    let exec: Arc<dyn ExecutionPlan> = Arc::new(exec);
    if rehash { RepartitionExec::try_new(exec, partitioning).ok().map(|r| Arc::new(r) as Arc<dyn ExecutionPlan>) } else { Some(exec) }
}

fn keys(on: &[(PhysicalExprRef, PhysicalExprRef)]) -> String {
    on.iter().map(|(l, r)| format!("({l}, {r})")).collect::<Vec<_>>().join(", ")
}

impl PhysicalOptimizerRule for GpuJoinRule {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        let gate = self.gate();
        // The root's order is the answer's when it has one partition (an ORDER BY whose SortExec
        // DataFusion dropped because a sort-merge join below already gave the order).
        let root_order = plan.output_partitioning().partition_count() <= 1;
        let sane = |p: &Arc<dyn ExecutionPlan>| SanityCheckPlan::new().optimize(Arc::clone(p), config);
        let mut pass = Pass::new(&gate, Ok(()), Vec::new());
        let mut out = self.visit(Arc::clone(&plan), root_order, &mut pass)?;
        if pass.moved_merge_joins > 0 {
            // The sort-merge and symmetric joins replaced, their sorts removed and orders
            // restored: DataFusion's final check must still pass, else they stay (and say why).
            if let Err(e) = sane(&out) {
                if sane(&plan).is_ok() {
                    let reason = format!("the plan with it on the GPU fails DataFusion's sanity check ({})", e.to_string().lines().next().unwrap_or_default());
                    pass = Pass::new(&gate, Err(reason), Vec::new());
                    out = self.visit(Arc::clone(&plan), root_order, &mut pass)?;
                }
            }
        }
        // `Partitioned` hash joins on their inputs before the hash repartitions: all of them
        // where the plan stays sane, else each in turn that keeps it so (a join whose output's
        // hash partitioning the plan above relies on stays `Partitioned`).
        let candidates = pass.unrepartition_candidates;
        if candidates > 0 && sane(&plan).is_ok() {
            let merge = pass.merge_joins.clone();
            let mut all = Pass::new(&gate, merge.clone(), vec![true; candidates]);
            let tried = self.visit(Arc::clone(&plan), root_order, &mut all)?;
            if sane(&tried).is_ok() {
                (out, pass) = (tried, all);
            } else {
                let mut allowed = vec![false; candidates];
                for i in 0..candidates {
                    allowed[i] = true;
                    let mut some = Pass::new(&gate, merge.clone(), allowed.clone());
                    let tried = self.visit(Arc::clone(&plan), root_order, &mut some)?;
                    if some.unrepartitioned > pass.unrepartitioned && sane(&tried).is_ok() {
                        (out, pass) = (tried, some);
                    } else {
                        allowed[i] = false;
                    }
                }
            }
        }
        // Semi and anti joins that filter an inner join's rows by keys of one of its sides, run
        // below it; then the `Partitioned` GPU joins left, without their inputs' hash
        // repartitions, their output repartitioned where the plan above may need it: each
        // where the plan stays sane.
        if pass.gate.is_ok() {
            let (pushed, n) = push_semi_joins_below_inner(Arc::clone(&out))?;
            if n > 0 && sane(&pushed).is_ok() {
                out = pushed;
            }
            let (collected, n) = collect_left_everywhere(Arc::clone(&out), self.config.collect_build_rows())?;
            if n > 0 && sane(&collected).is_ok() {
                out = collected;
            }
            // Last, the tables below chains of joins reduced by the small filtered inputs of
            // the joins above them.
            let by = crate::SemiJoinReduction::new(self.config.semi_join_reduction_rows()).with_max_reduced_rows(self.config.semi_join_reduced_rows());
            out = crate::reduce::reduce_sanely(out, &by, true, config)?;
            // And the probe sides filtered by their joins' build keys where they are read.
            let (filtered, n) = crate::key_filter::with_probe_key_filters(Arc::clone(&out))?;
            if n > 0 && sane(&filtered).is_ok() {
                out = filtered;
            }
        }
        let seen = pass.seen;
        for d in &seen {
            log::debug!(target: "gpujoin_datafusion", "{d}");
        }
        if let Ok(mut all) = self.decisions.lock() {
            all.extend(seen);
            let extra = all.len().saturating_sub(Self::MAX_DECISIONS);
            all.drain(..extra);
        }
        Ok(out)
    }

    fn name(&self) -> &str {
        "GpuJoinRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
