//! [`GpuJoinRule`]: the physical optimizer rule that puts [`GpuJoinExec`] in place of the CPU
//! joins gpujoin can run.
//!
//! # What moves
//!
//! When a GPU is present, a `HashJoinExec` (mode `CollectLeft` or `Partitioned`), a
//! `NestedLoopJoinExec` (a theta join on its filter) or a `CrossJoinExec` moves when
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
//! * both inputs are bounded, no `LIMIT` was pushed into it (`fetch`), and it declares no output
//!   ordering (the plan above might rely on the order the CPU operator keeps; gpujoin's
//!   differs).
//!
//! `SortMergeJoinExec` (which always declares its order), `SymmetricHashJoinExec` and
//! `PiecewiseMergeJoinExec` stay on the CPU in this version.
//!
//! # Decisions
//!
//! The plan shows only the joins that moved (`GpuJoinExec: ..., replaces=HashJoinExec`): a kept
//! join stays exactly the CPU operator it was, with no wrapper, so that every plan the rule does
//! not change is byte for byte DataFusion's. The rule's decision for every join it saw, with the
//! reason for each join it kept, is in [`GpuJoinRule::decisions`] (the latest
//! [`GpuJoinRule::MAX_DECISIONS`]), and logged at `debug` level (target `gpujoin_datafusion`).

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{JoinType as DfJoinType, NullEquality, Result};
use datafusion::execution::SessionState;
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::joins::{CrossJoinExec, HashJoinExec, NestedLoopJoinExec, PartitionMode, PiecewiseMergeJoinExec, SortMergeJoinExec, SymmetricHashJoinExec};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

use crate::translate::{plan_join, Refusal};
use crate::{GpuJoinConfig, GpuJoinExec};

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

/// Replaces `HashJoinExec`s, `NestedLoopJoinExec`s and `CrossJoinExec`s with [`GpuJoinExec`]s
/// where gpujoin can run them (see the [module docs](self)). Install it with [`crate::with_gpu_joins`].
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

    /// The `GpuJoinExec` for a `HashJoinExec`, or why not.
    fn replace_hash_join(&self, h: &HashJoinExec) -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal> {
        if h.null_aware {
            return Err(Refusal("a null-aware anti join (NOT IN): gpujoin has no null-aware anti join".into()));
        }
        if h.mode == PartitionMode::Auto {
            return Err(Refusal("PartitionMode::Auto (JoinSelection did not choose a mode)".into()));
        }
        let join =
            Join { left: &h.left, right: &h.right, on: &h.on, filter: h.filter.as_ref(), join_type: h.join_type, null_equality: h.null_equality, projection: h.projection.as_deref(), mode: h.mode };
        self.replace(h, join, "HashJoinExec")
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
        };
        self.replace(j, join, "CrossJoinExec")
    }

    /// The checks every replaced join passes, then the `GpuJoinExec` with `original`'s schema.
    fn replace(&self, original: &dyn ExecutionPlan, j: Join<'_>, operator: &str) -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal> {
        if let Some(n) = original.fetch() {
            return Err(Refusal(format!("a LIMIT pushed into the join (fetch={n})")));
        }
        if j.left.boundedness().is_unbounded() || j.right.boundedness().is_unbounded() {
            return Err(Refusal("an unbounded input (GpuJoinExec collects its inputs)".into()));
        }
        if original.properties().output_ordering().is_some() {
            return Err(Refusal(format!("the {operator} declares an output order, which the plan above may rely on (gpujoin's output order differs)")));
        }
        let (ls, rs) = (j.left.schema(), j.right.schema());
        plan_join(&ls, &rs, j.on, j.filter, j.join_type, j.null_equality, j.projection, &self.config)?;
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
        Ok(Arc::new(exec))
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
}

fn keys(on: &[(PhysicalExprRef, PhysicalExprRef)]) -> String {
    on.iter().map(|(l, r)| format!("({l}, {r})")).collect::<Vec<_>>().join(", ")
}

/// The name, join type and keys of a join this version does not move.
fn other_join(node: &dyn ExecutionPlan) -> Option<(&'static str, Option<DfJoinType>, String)> {
    if let Some(j) = node.downcast_ref::<SortMergeJoinExec>() {
        return Some(("SortMergeJoinExec", Some(j.join_type()), keys(j.on())));
    }
    if let Some(j) = node.downcast_ref::<SymmetricHashJoinExec>() {
        return Some(("SymmetricHashJoinExec", Some(*j.join_type()), keys(j.on())));
    }
    if node.downcast_ref::<PiecewiseMergeJoinExec>().is_some() {
        return Some(("PiecewiseMergeJoinExec", None, String::new()));
    }
    None
}

impl PhysicalOptimizerRule for GpuJoinRule {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        let gate = self.gate();
        let mut seen = Vec::new();
        let out = plan.transform_up(|node| {
            // The joins this version moves: the operator, its join type and keys, and the
            // GpuJoinExec or why not.
            let open = |r: &dyn Fn() -> std::result::Result<Arc<dyn ExecutionPlan>, Refusal>| gate.clone().map_err(Refusal).and_then(|()| r());
            let replaced = node
                .downcast_ref::<HashJoinExec>()
                .map(|h| ("HashJoinExec", Some(h.join_type), keys(&h.on), open(&|| self.replace_hash_join(h))))
                .or_else(|| node.downcast_ref::<NestedLoopJoinExec>().map(|j| ("NestedLoopJoinExec", Some(*j.join_type()), String::new(), open(&|| self.replace_nested_loop(j)))))
                .or_else(|| node.downcast_ref::<CrossJoinExec>().map(|j| ("CrossJoinExec", None, String::new(), open(&|| self.replace_cross(j)))));
            if let Some((operator, join_type, on, result)) = replaced {
                let (kept, next) = match result {
                    Ok(exec) => (None, Transformed::yes(exec)),
                    Err(r) => (Some(r.0), Transformed::no(Arc::clone(&node))),
                };
                seen.push(JoinDecision { operator: operator.into(), join_type, on, kept });
                return Ok(next);
            }
            if let Some((name, join_type, on)) = other_join(node.as_ref()) {
                let reason = match &gate {
                    Err(g) => g.clone(),
                    Ok(()) => format!("{name} is not moved to the GPU in this version"),
                };
                seen.push(JoinDecision { operator: name.into(), join_type, on, kept: Some(reason) });
            }
            Ok(Transformed::no(node))
        })?;
        for d in &seen {
            log::debug!(target: "gpujoin_datafusion", "{d}");
        }
        if let Ok(mut all) = self.decisions.lock() {
            all.extend(seen);
            let extra = all.len().saturating_sub(Self::MAX_DECISIONS);
            all.drain(..extra);
        }
        Ok(out.data)
    }

    fn name(&self) -> &str {
        "GpuJoinRule"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
