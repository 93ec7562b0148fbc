//! [`SemiJoinReduction`]: the rows of a table that cannot meet a small, filtered input of a
//! join higher up are dropped where the table is read, before the joins in between.
//!
//! DataFusion joins in the order of the query's `FROM` clause: TPC-H Q7 joins `supplier`,
//! `lineitem`, `orders` and `customer` (18M rows at SF10) before the join with `nation` that
//! keeps the suppliers of two nations (1.46M rows). Where an inner equi-join `J` has an input
//! `S` that is a filtered table of few rows, and the key of `J`'s other input is a column made
//! by a node `A` below at least one join, `A` becomes `A RIGHT SEMI JOIN S` on that column (a
//! [`KeyFilterExec`]: the rows of `A` whose key is among the keys of a copy of `S`, a bitmap or
//! a hash set built once): the same answer, since `J` drops every row whose key is not among
//! `S`'s and an `A` row with such a key only makes such rows, but the joins in between see only
//! the rows that can pass.
//!
//! ```text
//! HashJoinExec: Inner, on=[(n_nationkey, s_nationkey)]      HashJoinExec: Inner, on=[(n_nationkey, s_nationkey)]
//!   FilterExec: n_name = FRANCE                               FilterExec: n_name = FRANCE
//!     DataSourceExec: nation                                    DataSourceExec: nation
//!   HashJoinExec: Inner, on=[(s_suppkey, l_suppkey)]   ->     HashJoinExec: Inner, on=[(s_suppkey, l_suppkey)]
//!     DataSourceExec: supplier                                  KeyFilterExec: on=[(n_nationkey, s_nationkey)]
//!     DataSourceExec: lineitem                                    FilterExec: n_name = FRANCE
//!                                                                   DataSourceExec: nation
//!                                                                 DataSourceExec: supplier
//!                                                               DataSourceExec: lineitem
//! ```
//!
//! [`SemiJoinReduction::with_hash_joins`] makes them DataFusion's `CollectLeft` `RightSemi`
//! hash joins on the distinct keys of `S` (an `AggregateExec`) instead, for plans of
//! DataFusion's operators only.
//!
//! # When
//!
//! * `J` is an Inner hash join (DataFusion's or a [`GpuJoinExec`]) without a `LIMIT`;
//! * `S` has at most [`SemiJoinReduction::max_rows`] rows (a table's exact row count seen
//!   through filters and projections), at least one `FilterExec` (an unfiltered table reduces
//!   nothing), and is made of filters, projections, repartitions and coalesces over one
//!   `DataSourceExec`, or a table reduced so (it is read twice: a copy builds the key set),
//!   none of them holding a dynamic filter (a join's, which the copy must not read through);
//!   so reductions cascade: TPC-H Q5's filtered `region` reduces `nation`, which reduces
//!   `supplier` and `customer`, and the reduced `supplier` reduces `lineitem`;
//! * `J`'s key on the other side is a column, traced down through inner joins (either side;
//!   where it is a key of an inner equi-join, also through the other input's key, which equals
//!   it in every row that join makes), the kept side of outer, semi and anti joins,
//!   projections of columns, filters, repartitions, coalesces and sorts (none with a `LIMIT`)
//!   to each node `A` that makes it; the keys of `J` traced to the same `A` all reduce it;
//! * at least one join lies between `J` and `A` (else `J` itself is the reduction; a small `A`
//!   is reduced all the same: the joins above it are what gains);
//! * no semi join by the same `S` is on the way down already (a second run changes nothing);
//! * `A` has at most [`SemiJoinReduction::max_reduced_rows`] rows where that is set and `A`'s
//!   size is known ([`GpuJoinRule`](crate::GpuJoinRule):
//!   [`GpuJoinConfig::semi_join_reduced_rows`](crate::GpuJoinConfig::semi_join_reduced_rows)).
//!
//! Nulls: the semi join takes `J`'s null equality; a row of `A` whose key is null meets no row
//! of `S` when nulls equal nothing, as in `J`.
//!
//! The joins are checked from the root down, so a reduction inserted for one join is on the
//! way of the joins below it. A plan that fails DataFusion's `SanityCheckPlan` with the
//! reductions is left as it was.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::{JoinType as DfJoinType, NullEquality, Result};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_optimizer::sanity_checker::SanityCheckPlan;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{replace_children_if_necessary, ChildrenPropertiesMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::{displayable, ExecutionPlan, ExecutionPlanProperties, ReplaceChildrenOptions};

use crate::rule::rows_at_most;
use crate::{CpuJoinKeptExec, GpuJoinExec, KeyFilterExec};

/// The most rows of a filtered join input that reduces the tables below the join by default
/// ([`SemiJoinReduction::new`], [`GpuJoinConfig::semi_join_reduction_rows`](crate::GpuJoinConfig::semi_join_reduction_rows)): 2^17 = 131072,
/// [`DEFAULT_MIN_BUILD_ROWS`](crate::DEFAULT_MIN_BUILD_ROWS): a hash table the CPU's caches hold.
pub const DEFAULT_SEMI_JOIN_REDUCTION_ROWS: usize = 1 << 17;

/// A physical optimizer rule that runs [semi-join reductions](self) on a plan (with or
/// without GPU joins; [`GpuJoinRule`](crate::GpuJoinRule) runs them itself where it moves joins,
/// [`GpuJoinConfig::semi_join_reduction_rows`](crate::GpuJoinConfig::semi_join_reduction_rows)).
///
/// Install it after DataFusion's rules:
/// `SessionStateBuilder::new().with_default_features().with_physical_optimizer_rule(Arc::new(SemiJoinReduction::default()))`.
#[derive(Debug, Clone)]
pub struct SemiJoinReduction {
    max_rows: usize,
    max_reduced_rows: Option<usize>,
    hash_joins: bool,
}

impl SemiJoinReduction {
    /// Reductions by filtered join inputs of at most `max_rows` rows (0: none), of tables of
    /// any size.
    pub fn new(max_rows: usize) -> Self {
        SemiJoinReduction { max_rows, max_reduced_rows: None, hash_joins: false }
    }

    /// Only the nodes of at most `rows` rows (known; a node of unknown size is reduced all the
    /// same) are reduced: a reduction probes every row of its table on the CPU.
    pub fn with_max_reduced_rows(mut self, rows: usize) -> Self {
        self.max_reduced_rows = Some(rows);
        self
    }

    /// Reductions as DataFusion `RightSemi` hash joins on the small input's distinct keys (an
    /// `AggregateExec`) instead of [`KeyFilterExec`]s: plans of DataFusion's operators only (to
    /// serialize without [`GpuJoinCodec`](crate::GpuJoinCodec), for example). Each probe row
    /// then goes through a hash join (TPC-H's `lineitem` reduced by 20,000 suppliers, 60M rows
    /// at SF10: 845 ms of the cores, perf/NOTES.md session 30).
    pub fn with_hash_joins(mut self, hash_joins: bool) -> Self {
        self.hash_joins = hash_joins;
        self
    }

    /// The most rows of a filtered join input that reduces the tables below the join.
    pub fn max_rows(&self) -> usize {
        self.max_rows
    }

    /// The most rows of a node that is reduced (`None`: any).
    pub fn max_reduced_rows(&self) -> Option<usize> {
        self.max_reduced_rows
    }
}

impl Default for SemiJoinReduction {
    fn default() -> Self {
        SemiJoinReduction::new(DEFAULT_SEMI_JOIN_REDUCTION_ROWS)
    }
}

impl PhysicalOptimizerRule for SemiJoinReduction {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        reduce_sanely(plan, self, false, config)
    }

    fn name(&self) -> &str {
        "SemiJoinReduction"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with the [semi-join reductions](self) `by` says, where the plan then passes
/// DataFusion's `SanityCheckPlan` (else `plan`); with `note`, each inserted semi join under a
/// [`CpuJoinKeptExec`] saying why it is there.
pub(crate) fn reduce_sanely(plan: Arc<dyn ExecutionPlan>, by: &SemiJoinReduction, note: bool, config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
    if by.max_rows == 0 {
        return Ok(plan);
    }
    let mut inserted = 0;
    let reduced = reduce_below(Arc::clone(&plan), by, note, &mut inserted)?;
    if inserted == 0 || SanityCheckPlan::new().optimize(Arc::clone(&reduced), config).is_err() {
        return Ok(plan);
    }
    Ok(reduced)
}

/// [`reduce_sanely`] from `node` down, without the check; counts the semi joins inserted.
fn reduce_below(node: Arc<dyn ExecutionPlan>, by: &SemiJoinReduction, note: bool, inserted: &mut usize) -> Result<Arc<dyn ExecutionPlan>> {
    let node = reduce_join(node, by, note, inserted)?;
    let children: Vec<Arc<dyn ExecutionPlan>> = node.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(node);
    }
    let children = children.into_iter().map(|c| reduce_below(c, by, note, inserted)).collect::<Result<Vec<_>>>()?;
    replace_children_if_necessary(node, children)
}

/// The keys and null equality of an Inner equi-join without a `LIMIT`.
fn inner_equi_join(node: &Arc<dyn ExecutionPlan>) -> Option<(Vec<(PhysicalExprRef, PhysicalExprRef)>, NullEquality)> {
    if node.fetch().is_some() {
        return None;
    }
    let (on, join_type, nulls) = if let Some(h) = node.downcast_ref::<HashJoinExec>() {
        (h.on.clone(), h.join_type, h.null_equality)
    } else if let Some(g) = node.downcast_ref::<GpuJoinExec>() {
        (g.on().to_vec(), g.join_type(), g.null_equality())
    } else {
        return None;
    };
    (join_type == DfJoinType::Inner && !on.is_empty()).then_some((on, nulls))
}

/// `node` (a join) with the other input reduced by each input that is small and filtered.
fn reduce_join(mut node: Arc<dyn ExecutionPlan>, by: &SemiJoinReduction, note: bool, inserted: &mut usize) -> Result<Arc<dyn ExecutionPlan>> {
    let max_rows = by.max_rows;
    let Some((on, nulls)) = inner_equi_join(&node) else { return Ok(node) };
    for small_side in [0, 1] {
        let mut children: Vec<Arc<dyn ExecutionPlan>> = node.children().into_iter().cloned().collect();
        let big_side = 1 - small_side;
        let Some(small_rows) = small_and_filtered(&children[small_side], max_rows) else { continue };
        let small = Arc::clone(&children[small_side]);
        let big = &children[big_side];
        // Each key of the other side traced to where its column is made, every way
        // ([`traces`]).
        let small_shown = shown_build(&small);
        let mut targets: Vec<Target> = Vec::new();
        for (l, r) in &on {
            let (s, b) = if small_side == 0 { (l, r) } else { (r, l) };
            let Some(b) = b.downcast_ref::<Column>() else { continue };
            for t in traces(big, b.index()).into_iter().filter(|t| t.joins > 0) {
                let at = match targets.iter().position(|x| x.path == t.path) {
                    Some(at) => at,
                    None => {
                        let done = t.semi_builds.contains(&small_shown);
                        targets.push(Target { path: t.path.clone(), keys: Vec::new(), done });
                        targets.len() - 1
                    }
                };
                let key = (Arc::clone(s), t.column);
                if !targets[at].keys.iter().any(|(k, c)| *c == key.1 && k == &key.0) {
                    targets[at].keys.push(key);
                }
            }
        }
        // Each node reduced once by `small`; the deepest first, so that a node above another
        // is reduced over the other's reduction.
        targets.retain(|x| !x.done && by.max_reduced_rows.is_none_or(|most| node_at(big, &x.path).is_none_or(|a| rows_at_most(&a).is_none_or(|rows| rows <= most))));
        if targets.is_empty() {
            continue;
        }
        targets.sort_by_key(|x| std::cmp::Reverse(x.path.len()));
        let mut reduced = Arc::clone(big);
        for Target { path, keys, .. } in &targets {
            reduced = insert_at(&reduced, path, &|a| semi_join(&small, a, keys, nulls, small_rows, note, by.hash_joins))?;
            *inserted += 1;
        }
        children[big_side] = reduced;
        node = rebuilt(&node, children)?;
    }
    Ok(node)
}

/// A node a join's small input reduces ([`reduce_join`]): its child positions from the join's
/// other input, the keys that reach it (the small input's key expression, the node's column),
/// and whether a reduction by the same input is on the way already.
struct Target {
    path: Vec<usize>,
    keys: Vec<(PhysicalExprRef, usize)>,
    done: bool,
}

/// The rows at most of `plan` where it is at most `max_rows`, has a `FilterExec`, and can be
/// read a second time (filters, projections, repartitions and coalesces over a `DataSourceExec`,
/// and the semi joins of reductions over such inputs, none with a `LIMIT`). Example: `nation`
/// reduced by TPC-H Q5's filtered `region` (a `RightSemi` join of the two) reduces in turn.
fn small_and_filtered(plan: &Arc<dyn ExecutionPlan>, max_rows: usize) -> Option<usize> {
    fn copyable(plan: &Arc<dyn ExecutionPlan>, filtered: &mut bool) -> bool {
        if plan.fetch().is_some() {
            return false;
        }
        if has_dynamic_filter(plan) {
            return false;
        }
        let children = plan.children();
        if children.is_empty() {
            return plan.name() == "DataSourceExec";
        }
        *filtered |= plan.downcast_ref::<FilterExec>().is_some();
        let reduction = plan.downcast_ref::<HashJoinExec>().is_some_and(|h| h.join_type == DfJoinType::RightSemi && h.mode == PartitionMode::CollectLeft && h.filter.is_none() && h.projection.is_none())
            || plan.downcast_ref::<KeyFilterExec>().is_some();
        let passes = plan.downcast_ref::<FilterExec>().is_some()
            || plan.downcast_ref::<ProjectionExec>().is_some()
            || plan.downcast_ref::<RepartitionExec>().is_some()
            || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
            || plan.downcast_ref::<CpuJoinKeptExec>().is_some()
            || plan.downcast_ref::<AggregateExec>().is_some_and(|a| a.aggr_expr().is_empty() && *a.mode() == AggregateMode::Single)
            || plan.name() == "CoalesceBatchesExec";
        ((passes && children.len() == 1) || reduction) && children.into_iter().all(|c| copyable(c, filtered))
    }
    let mut filtered = false;
    if !copyable(plan, &mut filtered) || !filtered {
        return None;
    }
    rows_at_most(plan).filter(|&rows| rows <= max_rows)
}

/// Whether `plan`'s own expressions hold a dynamic filter (one a join fills in while the plan
/// runs, pushed into a scan by DataFusion's `FilterPushdown`, which runs before the standalone
/// [`SemiJoinReduction`]): a copy of such a scan, building a semi join elsewhere in the plan,
/// would read through another join's filter, whatever that join has filled in by then.
fn has_dynamic_filter(plan: &Arc<dyn ExecutionPlan>) -> bool {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
    let mut found = false;
    let _ = plan.apply_expressions(&mut |e| {
        e.apply(|node| {
            found |= node.downcast_ref::<DynamicFilterPhysicalExpr>().is_some();
            Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
        })
    });
    found
}

/// `plan` as `EXPLAIN` shows it, without the distinct keys and the `CoalescePartitionsExec` on
/// top (the copy that builds a semi join is coalesced into one partition where it has more, and
/// its keys made distinct).
fn shown_build(plan: &Arc<dyn ExecutionPlan>) -> String {
    let plan = plan.downcast_ref::<AggregateExec>().filter(|a| a.aggr_expr().is_empty()).map_or(plan, |a| a.input());
    let plan = plan.downcast_ref::<CoalescePartitionsExec>().map_or(plan, |c| c.input());
    displayable(plan.as_ref()).indent(false).to_string()
}

/// Where a column of a plan is made: the child positions down to the node `A` that makes it,
/// its index in `A`'s output, how many joins the way passes, and the build sides (as shown) of
/// the right semi joins it passes.
#[derive(Debug, Clone, PartialEq)]
struct Trace {
    path: Vec<usize>,
    column: usize,
    joins: usize,
    semi_builds: Vec<String>,
}

/// Column `column` of `plan` followed down ([`source`]) as far as it goes, every way: where
/// an inner equi-join has the column as a key, also the way of the other input's key, whose
/// value equals it in every row the join makes.
///
/// Example: TPC-H Q5's `s_nationkey` over `supplier JOIN (customer JOIN orders JOIN lineitem)
/// ON s_suppkey = l_suppkey AND s_nationkey = c_nationkey` leads to `supplier` and, through
/// `c_nationkey`, to `customer`.
fn traces(plan: &Arc<dyn ExecutionPlan>, column: usize) -> Vec<Trace> {
    let mut out = Vec::new();
    follow(plan, Trace { path: Vec::new(), column, joins: 0, semi_builds: Vec::new() }, &mut out);
    out
}

/// [`traces`] from `node`, `t` the way to it.
fn follow(node: &Arc<dyn ExecutionPlan>, mut t: Trace, out: &mut Vec<Trace>) {
    let Some((child, at, join)) = source(node, t.column) else {
        out.push(t);
        return;
    };
    if let Some(h) = node.downcast_ref::<HashJoinExec>() {
        if h.join_type == DfJoinType::RightSemi {
            t.semi_builds.push(shown_build(&h.left));
        }
    }
    if let Some(k) = node.downcast_ref::<KeyFilterExec>() {
        t.semi_builds.push(shown_build(k.keys()));
    }
    let children = node.children();
    if let Some(other) = equal_key(node, child, at) {
        let mut u = t.clone();
        u.path.push(1 - child);
        u.column = other;
        u.joins += 1;
        follow(children[1 - child], u, out);
    }
    t.path.push(child);
    t.column = at;
    t.joins += usize::from(join);
    follow(children[child], t, out);
}

/// Where `node` is an inner equi-join with column `column` of its input `child` as a key: the
/// column of the other input's key it equals.
fn equal_key(node: &Arc<dyn ExecutionPlan>, child: usize, column: usize) -> Option<usize> {
    let (on, _) = inner_equi_join(node)?;
    on.iter().find_map(|(l, r)| {
        let (this, other) = if child == 0 { (l, r) } else { (r, l) };
        (this.downcast_ref::<Column>()?.index() == column).then_some(())?;
        Some(other.downcast_ref::<Column>()?.index())
    })
}

/// Where column `i` of `node`'s output comes from in its children: the child's position, the
/// column there, and whether `node` is a join; `None` where `node` makes it (or is not seen
/// through: a `LIMIT`, an aggregate, a full join, the null-filled side of an outer join).
pub(crate) fn source(node: &Arc<dyn ExecutionPlan>, i: usize) -> Option<(usize, usize, bool)> {
    if node.fetch().is_some() {
        return None;
    }
    if let Some(h) = node.downcast_ref::<HashJoinExec>() {
        return join_source(h.join_type, h.projection.as_deref(), h.left.schema().fields().len(), i).map(|(c, at)| (c, at, true));
    }
    if let Some(g) = node.downcast_ref::<GpuJoinExec>() {
        return join_source(g.join_type(), g.projection(), g.left().schema().fields().len(), i).map(|(c, at)| (c, at, true));
    }
    if node.downcast_ref::<CpuJoinKeptExec>().is_some() {
        return Some((0, i, false));
    }
    if node.downcast_ref::<KeyFilterExec>().is_some() {
        return Some((1, i, true));
    }
    if let Some(p) = node.downcast_ref::<ProjectionExec>() {
        let c = p.expr().get(i)?.expr.downcast_ref::<Column>()?;
        return Some((0, c.index(), false));
    }
    if let Some(f) = node.downcast_ref::<FilterExec>() {
        let at = match f.projection().as_deref() {
            Some(p) => *p.get(i)?,
            None => i,
        };
        return Some((0, at, false));
    }
    let passes = node.downcast_ref::<RepartitionExec>().is_some()
        || node.downcast_ref::<CoalescePartitionsExec>().is_some()
        || node.downcast_ref::<SortExec>().is_some()
        || node.name() == "CoalesceBatchesExec";
    (passes && node.children().len() == 1).then_some((0, i, false))
}

/// Where column `i` of a join's output comes from (child, column), on the sides whose rows the
/// output keeps as they are: both of an inner join, the left of a left, left semi or left anti
/// join, the right of the right ones.
///
/// Example: an Inner join of a 3-column left and a 2-column right input with projection
/// `[4, 0]`: column 0 is the right side's column 1, column 1 the left side's column 0.
pub(crate) fn join_source(join_type: DfJoinType, projection: Option<&[usize]>, left_len: usize, i: usize) -> Option<(usize, usize)> {
    let j = match projection {
        Some(p) => *p.get(i)?,
        None => i,
    };
    match join_type {
        DfJoinType::Inner => Some(if j < left_len { (0, j) } else { (1, j - left_len) }),
        DfJoinType::Left if j < left_len => Some((0, j)),
        DfJoinType::Right if j >= left_len => Some((1, j - left_len)),
        DfJoinType::LeftSemi | DfJoinType::LeftAnti => Some((0, j)),
        DfJoinType::RightSemi | DfJoinType::RightAnti => Some((1, j)),
        _ => None,
    }
}

/// The node at `path` below `plan`.
fn node_at(plan: &Arc<dyn ExecutionPlan>, path: &[usize]) -> Option<Arc<dyn ExecutionPlan>> {
    path.iter().try_fold(Arc::clone(plan), |node, &c| node.children().get(c).map(|n| Arc::clone(n)))
}

/// `plan` with the node at `path` replaced by `make` of it.
pub(crate) fn insert_at(plan: &Arc<dyn ExecutionPlan>, path: &[usize], make: &dyn Fn(Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
    match path.split_first() {
        None => make(Arc::clone(plan)),
        Some((&c, rest)) => {
            let mut children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
            children[c] = insert_at(&children[c], rest, make)?;
            rebuilt(plan, children)
        }
    }
}

/// A fresh copy of `plan`: each read of it has its own repartition channels and metrics, and
/// its own scans. A `DataSourceExec` keeps the state of one execution per instance (a file
/// scan deals its files and row groups out to whichever of its streams asks next): the copy of
/// a Parquet scan read with the same instance as the original split the row groups with it
/// (DataFusion's `dynamic_filter_pushdown_config.slt`, a table of ten row groups: 0 rows, not 9).
fn copy(plan: &Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        if let Some(scan) = plan.downcast_ref::<DataSourceExec>() {
            return Ok(Arc::new(scan.clone().with_data_source(Arc::clone(scan.data_source()))));
        }
        return Ok(Arc::clone(plan));
    }
    let children = children.iter().map(copy).collect::<Result<Vec<_>>>()?;
    rebuilt(plan, children)
}

/// A new node like `plan` over `children`, its properties computed again.
fn rebuilt(plan: &Arc<dyn ExecutionPlan>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
    Arc::clone(plan).replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
}

/// `a RIGHT SEMI JOIN small` on `keys` (`small`'s key expression, `a`'s column): a
/// [`KeyFilterExec`] keeping the rows of `a` whose keys are among those of a copy of `small`
/// (coalesced), or with `hash_joins` a `CollectLeft` hash join building on the distinct keys of
/// that copy; `a`'s rows and schema either way.
fn semi_join(small: &Arc<dyn ExecutionPlan>, a: Arc<dyn ExecutionPlan>, keys: &[(PhysicalExprRef, usize)], nulls: NullEquality, small_rows: usize, note: bool, hash_joins: bool) -> Result<Arc<dyn ExecutionPlan>> {
    let mut build = copy(small)?;
    if build.output_partitioning().partition_count() > 1 {
        build = Arc::new(CoalescePartitionsExec::new(build));
    }
    let schema = a.schema();
    let column = |c: usize| Arc::new(Column::new(schema.field(c).name(), c)) as PhysicalExprRef;
    let semi: Arc<dyn ExecutionPlan> = if hash_joins {
        // The small input's distinct keys: DataFusion's semi join walks every build row of a
        // probe row's key, and a reduced input may hold many rows of few keys (TPC-H Q5's
        // 20,000 suppliers of 5 nations, by nation, took 6 s of the cores for 1.5M customers).
        let group: Vec<(PhysicalExprRef, String)> = keys.iter().enumerate().map(|(i, (s, _))| (Arc::clone(s), format!("key{i}"))).collect();
        let build_schema = build.schema();
        let build: Arc<dyn ExecutionPlan> = Arc::new(AggregateExec::try_new(AggregateMode::Single, PhysicalGroupBy::new_single(group), vec![], vec![], build, build_schema)?);
        let on: Vec<(PhysicalExprRef, PhysicalExprRef)> = keys.iter().enumerate().map(|(i, (_, c))| (Arc::new(Column::new(&format!("key{i}"), i)) as PhysicalExprRef, column(*c))).collect();
        Arc::new(HashJoinExec::try_new(build, a, on, None, &DfJoinType::RightSemi, None, PartitionMode::CollectLeft, nulls, false)?)
    } else {
        let on: Vec<(PhysicalExprRef, PhysicalExprRef)> = keys.iter().map(|(s, c)| (Arc::clone(s), column(*c))).collect();
        Arc::new(KeyFilterExec::try_new(build, a, on, nulls)?)
    };
    if !note {
        return Ok(semi);
    }
    let shown = |v: Vec<String>| v.join(", ");
    let reason = format!(
        "semi-join reduction: only the rows whose {} can meet the filtered join input of at most {small_rows} rows above ({})",
        shown(keys.iter().map(|(_, c)| schema.field(*c).name().clone()).collect()),
        shown(keys.iter().map(|(s, _)| s.to_string()).collect())
    );
    Ok(Arc::new(CpuJoinKeptExec::new(semi, reason)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_sources_follow_the_kept_sides_through_the_projection() {
        // Inner join of 3 + 2 columns, output [4, 0]: right's 1, left's 0.
        assert_eq!(join_source(DfJoinType::Inner, Some(&[4, 0]), 3, 0), Some((1, 1)));
        assert_eq!(join_source(DfJoinType::Inner, Some(&[4, 0]), 3, 1), Some((0, 0)));
        assert_eq!(join_source(DfJoinType::Inner, Some(&[4, 0]), 3, 2), None);
        assert_eq!(join_source(DfJoinType::Inner, None, 3, 3), Some((1, 0)));
        // Outer joins: only the kept side; full joins neither.
        assert_eq!(join_source(DfJoinType::Left, None, 3, 1), Some((0, 1)));
        assert_eq!(join_source(DfJoinType::Left, None, 3, 3), None);
        assert_eq!(join_source(DfJoinType::Right, None, 3, 1), None);
        assert_eq!(join_source(DfJoinType::Right, None, 3, 4), Some((1, 1)));
        assert_eq!(join_source(DfJoinType::Full, None, 3, 0), None);
        // Semi and anti joins output one side.
        assert_eq!(join_source(DfJoinType::LeftAnti, None, 3, 2), Some((0, 2)));
        assert_eq!(join_source(DfJoinType::RightSemi, Some(&[1]), 3, 0), Some((1, 1)));
        assert_eq!(join_source(DfJoinType::LeftMark, None, 3, 0), None);
    }
}
