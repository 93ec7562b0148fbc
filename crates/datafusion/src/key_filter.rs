//! [`KeyFilterExec`]: the rows of an input whose key is among the keys of a small input, by a
//! set of those keys built once (a bitmap where integer keys are dense, else a hash set), not
//! a hash join: the operator of the [semi-join reductions](crate::reduce).
//!
//! ```text
//! keys input (n_nationkey):  [3, 7, 7]
//! input (s_suppkey, s_nationkey):  (1, 3), (2, 5), (3, 7), (4, NULL)
//! KeyFilterExec on n_nationkey = s_nationkey:  (1, 3), (3, 7)
//! ```
//!
//! It returns what `keys RIGHT SEMI JOIN input` returns (each input row at most once, in the
//! input's order and partitions), without a hash table of the small input's rows: a `RightSemi`
//! hash join probes every input row through DataFusion's join hash map and walks the build rows
//! of its key, ~20 ns a row; a key set's lookup is a bit or one hash probe. TPC-H's `lineitem`
//! reduced by 20,000 suppliers (60M probe rows at SF10) took 845 ms of the cores as a hash join
//! (perf/NOTES.md, session 30).
//!
//! The key set: one integer-like key (signed or unsigned integers, dates, times, timestamps,
//! durations) whose distinct values span at most [`MAX_BITMAP_SPAN`] and at most 64 per key
//! (plus 2^16) becomes a bitmap over that span; other integer keys a hash set of their 64-bit
//! values; any other keys (strings, decimals, several columns) a hash set of their
//! [row format](datafusion::arrow::row) encodings. Nulls follow the join's `NullEquality`: a
//! null key matches nothing, or matches a null key of the small input.
//!
//! The small input (child 0) is read once, by the first partition that runs, into one set that
//! every partition shares; the input (child 1) is filtered a batch at a time, and the rows that
//! pass are coalesced into batches of the session's batch size.
//!
//! # A join's build keys
//!
//! The same bitmaps filter the probe side of a GPU join by the join's own build side
//! ([`BuildKeys`], [`BuildKeysExpr`]): [`GpuJoinRule`](crate::GpuJoinRule) puts the test where
//! the probe side is read, and the join sets the keys when it has collected its build side.
//!
//! ```text
//! GpuJoinExec: mode=CollectLeft, on=[(o_orderkey@0, l_orderkey@0)], build_keys=#1
//!   ...orders...
//!   FilterExec: l_orderkey@0 IN build_keys#1 AND l_shipdate@3 > 1995-03-15
//!     DataSourceExec: lineitem
//! ```

use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch};
use datafusion::arrow::compute::{cast, BatchCoalescer};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, plan_err, DataFusionError, NullEquality, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{Distribution, PhysicalExpr, PhysicalExprRef};
use datafusion::physical_plan::distribution_requirements::InputDistributionRequirements;
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    apply_expression_roots, ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream,
};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_plan::filter::FilterExec;
use futures::{StreamExt, TryStreamExt};

use crate::GpuJoinExec;
use tokio::sync::OnceCell;

/// The widest span of integer keys kept as a bitmap: 2^26 bits (8 MiB).
pub const MAX_BITMAP_SPAN: u64 = 1 << 26;

/// See the [module docs](self).
#[derive(Debug)]
pub struct KeyFilterExec {
    keys: Arc<dyn ExecutionPlan>,
    input: Arc<dyn ExecutionPlan>,
    /// (key expression over `keys`' schema, key expression over `input`'s schema).
    on: Vec<(PhysicalExprRef, PhysicalExprRef)>,
    null_equality: NullEquality,
    cache: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    set: Arc<OnceCell<std::result::Result<Arc<KeySet>, Arc<DataFusionError>>>>,
}

impl KeyFilterExec {
    /// The rows of `input` whose keys (the right expressions of `on`) equal the keys (the left
    /// ones) of some row of `keys`, a single-partition input. Key pairs must have equal types.
    pub fn try_new(keys: Arc<dyn ExecutionPlan>, input: Arc<dyn ExecutionPlan>, on: Vec<(PhysicalExprRef, PhysicalExprRef)>, null_equality: NullEquality) -> Result<Self> {
        if on.is_empty() {
            return plan_err!("KeyFilterExec: no keys");
        }
        let (ks, is) = (keys.schema(), input.schema());
        for (k, i) in &on {
            let (kt, it) = (k.data_type(&ks)?, i.data_type(&is)?);
            if kt != it {
                return plan_err!("KeyFilterExec: key types differ: {k} is {kt}, {i} is {it}");
            }
        }
        let cache = Arc::clone(input.properties());
        Ok(KeyFilterExec { keys, input, on, null_equality, cache, metrics: ExecutionPlanMetricsSet::new(), set: Arc::new(OnceCell::new()) })
    }

    /// The small input whose keys are kept.
    pub fn keys(&self) -> &Arc<dyn ExecutionPlan> {
        &self.keys
    }

    /// The input filtered.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The key pairs (over `keys`' schema, over `input`'s).
    pub fn on(&self) -> &[(PhysicalExprRef, PhysicalExprRef)] {
        &self.on
    }

    pub fn null_equality(&self) -> NullEquality {
        self.null_equality
    }
}

impl DisplayAs for KeyFilterExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let on = self.on.iter().map(|(k, i)| format!("({k}, {i})")).collect::<Vec<_>>().join(", ");
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "KeyFilterExec: on=[{on}]")?;
                if self.null_equality == NullEquality::NullEqualsNull {
                    write!(f, ", NullsEqual: true")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => writeln!(f, "on=[{on}]"),
        }
    }
}

impl ExecutionPlan for KeyFilterExec {
    fn name(&self) -> &str {
        "KeyFilterExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        InputDistributionRequirements::new(vec![Distribution::SinglePartition, Distribution::UnspecifiedDistribution])
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![false, true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false, false]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.keys, &self.input]
    }

    fn apply_expressions(&self, f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>) -> Result<TreeNodeRecursion> {
        apply_expression_roots(self.on.iter().flat_map(|(k, i)| [Arc::clone(k), Arc::clone(i)]), f)
    }

    fn replace_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>, _options: ReplaceChildrenOptions) -> Result<Arc<dyn ExecutionPlan>> {
        let [keys, input]: [Arc<dyn ExecutionPlan>; 2] = match children.try_into() {
            Ok(c) => c,
            Err(c) => return internal_err!("KeyFilterExec has 2 children, got {}", c.len()),
        };
        Ok(Arc::new(KeyFilterExec::try_new(keys, input, self.on.clone(), self.null_equality)?))
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        // A fresh key set for the new run.
        let children = vec![Arc::clone(&self.keys), Arc::clone(&self.input)];
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        CardinalityEffect::LowerEqual
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let parts = self.keys.output_partitioning().partition_count();
        if parts != 1 {
            return internal_err!("KeyFilterExec: the keys input has {parts} partitions, not 1; use CoalescePartitionsExec");
        }
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let key_rows = MetricBuilder::new(&self.metrics).counter("key_rows", partition);
        let distinct_keys = MetricBuilder::new(&self.metrics).counter("distinct_keys", partition);
        let build_time = MetricBuilder::new(&self.metrics).subset_time("build_time", partition);
        let (once, keys, ctx) = (Arc::clone(&self.set), Arc::clone(&self.keys), Arc::clone(&context));
        let key_exprs: Vec<PhysicalExprRef> = self.on.iter().map(|(k, _)| Arc::clone(k)).collect();
        let input_exprs: Vec<PhysicalExprRef> = self.on.iter().map(|(_, i)| Arc::clone(i)).collect();
        let nulls = self.null_equality;
        let schema = self.schema();
        let input = self.input.execute(partition, context.clone())?;
        let batch_size = context.session_config().batch_size();
        let set = async move {
            let shared = once
                .get_or_init(|| async move {
                    let built = async {
                        let mut stream = keys.execute(0, ctx)?;
                        let mut builder = KeySetBuilder::new(&key_exprs, &keys.schema(), nulls)?;
                        let mut rows = 0;
                        let mut building = std::time::Duration::ZERO;
                        while let Some(batch) = stream.next().await {
                            let batch = batch?;
                            rows += batch.num_rows();
                            let b = Instant::now();
                            builder.add(&batch)?;
                            building += b.elapsed();
                        }
                        let b = Instant::now();
                        let set = builder.finish()?;
                        building += b.elapsed();
                        key_rows.add(rows);
                        distinct_keys.add(set.len());
                        build_time.add_duration(building);
                        Ok(Arc::new(set))
                    }
                    .await;
                    built.map_err(Arc::new)
                })
                .await;
            shared.clone().map_err(DataFusionError::Shared)
        };
        let state = Filtering { input, coalescer: BatchCoalescer::new(Arc::clone(&schema), batch_size), exprs: input_exprs, baseline, ended: false };
        let stream = futures::stream::once(async move {
            let set = set.await?;
            Ok::<_, DataFusionError>(futures::stream::try_unfold((set, state), |(set, mut s)| async move {
                loop {
                    if let Some(b) = s.coalescer.next_completed_batch() {
                        s.baseline.output_rows().add(b.num_rows());
                        return Ok(Some((b, (set, s))));
                    }
                    if s.ended {
                        s.baseline.done();
                        return Ok(None);
                    }
                    match s.input.next().await {
                        Some(batch) => {
                            let batch = batch?;
                            let _t = s.baseline.elapsed_compute().timer();
                            let mask = set.contains(&batch, &s.exprs)?;
                            s.coalescer.push_batch_with_filter(batch, &mask)?;
                        }
                        None => {
                            s.coalescer.finish_buffered_batch()?;
                            s.ended = true;
                        }
                    }
                }
            }))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// The keys of a GPU join's build side, shared with the [`BuildKeysExpr`] filters that
/// [`GpuJoinRule`](crate::GpuJoinRule) puts where the join's probe side is read: unset (every
/// row passes) until the join has collected its build side and made a bitmap of one key
/// column's values, then the probe rows whose key is not among them are dropped before any
/// operator below the join works on them (a FilterExec's copies of their columns, the upload to
/// the device). Only joins that drop such probe rows anyway get one (Inner, Left, LeftSemi,
/// LeftAnti, RightSemi).
///
/// Example: TPC-H Q3's `orders JOIN lineitem` (SF10) builds on 1.46M orders; its probe side,
/// `lineitem` filtered by `l_shipdate`, keeps 32M of 60M rows of which 302K match. With the
/// bitmap of the 1.46M order keys evaluated first in that filter, the date test and the copies
/// see ~6M rows.
///
/// Never a wait: a filter that runs before the keys are set (a plan run in pieces, as Ballista
/// runs stages) passes every row. The bitmap is made only for integer keys whose values span at
/// most [`MAX_BITMAP_SPAN`] and from at most
/// [`MAX_BUILD_KEYS`] build rows, on the gather threads, before the join reads its probe side;
/// a filter that keeps more than nine in ten of the first 2^20 rows it sees stops testing.
#[derive(Debug)]
pub struct BuildKeys {
    id: u64,
    keys: std::sync::RwLock<Option<Arc<KeySet>>>,
    /// Rows tested and rows kept, until the filter gives up (`useless`).
    tested: std::sync::atomic::AtomicU64,
    kept: std::sync::atomic::AtomicU64,
    useless: std::sync::atomic::AtomicBool,
}

/// The most build rows [`BuildKeys`] makes a bitmap of: 2^23.
pub const MAX_BUILD_KEYS: usize = 1 << 23;

/// Rows a [`BuildKeysExpr`] tests before it may give up.
const BUILD_KEYS_TRIAL_ROWS: u64 = 1 << 20;

impl BuildKeys {
    pub fn new() -> Arc<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Arc::new(BuildKeys {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            keys: std::sync::RwLock::new(None),
            tested: Default::default(),
            kept: Default::default(),
            useless: Default::default(),
        })
    }

    /// A number naming this set in `EXPLAIN` (the join and its filters show the same).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Forgets the keys (a new run of the join).
    pub(crate) fn clear(&self) {
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = None;
        self.tested.store(0, std::sync::atomic::Ordering::Relaxed);
        self.kept.store(0, std::sync::atomic::Ordering::Relaxed);
        self.useless.store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets the keys from a build side's batches (`key` over their schema), the work spread
    /// over the threads of the current rayon pool; nothing where the keys make no bitmap or
    /// there are more than [`MAX_BUILD_KEYS`] rows.
    pub(crate) fn set_from(&self, batches: &[RecordBatch], key: &PhysicalExprRef, nulls: NullEquality) {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows > MAX_BUILD_KEYS || rows == 0 {
            return;
        }
        if let Ok(Some(set)) = bitmap_of(batches, key, nulls) {
            *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(set));
        }
    }

    fn get(&self) -> Option<Arc<KeySet>> {
        if self.useless.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Counts a batch's rows tested and kept; gives up where the filter keeps too many.
    fn count(&self, tested: usize, kept: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let t = self.tested.fetch_add(tested as u64, Relaxed) + tested as u64;
        let k = self.kept.fetch_add(kept as u64, Relaxed) + kept as u64;
        if t >= BUILD_KEYS_TRIAL_ROWS && k * 10 > t * 9 {
            self.useless.store(true, Relaxed);
        }
    }
}

/// The bitmap of the integer keys `key` of `batches` ([`int_bitmap`], any density); `None`
/// where the keys are not integers or span too much for one.
fn bitmap_of(batches: &[RecordBatch], key: &PhysicalExprRef, nulls: NullEquality) -> Result<Option<KeySet>> {
    use rayon::prelude::*;
    let Some(first) = batches.first() else { return Ok(None) };
    if !as_ints(&key.data_type(&first.schema())?) {
        return Ok(None);
    }
    let arrays = batches.par_iter().map(|b| int_values(&key.evaluate(b)?.into_array(b.num_rows())?)).collect::<Result<Vec<_>>>()?;
    Ok(int_bitmap(&arrays, nulls, false))
}

/// The bitmap of the keys in `arrays` (`Int64`, [`int_values`]; [`KeySet::Bitmap`]), made in
/// parallel on the current rayon pool; `None` where their values span more than
/// [`MAX_BITMAP_SPAN`], or, with `dense`, more than 64 a key (plus 2^16), or where there is no
/// key but a null one that matches.
fn int_bitmap(arrays: &[ArrayRef], nulls: NullEquality, dense: bool) -> Option<KeySet> {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let (min, max, null) = arrays
        .par_iter()
        .map(|a| {
            let a = a.as_primitive::<Int64Type>();
            (datafusion::arrow::compute::min(a).unwrap_or(i64::MAX), datafusion::arrow::compute::max(a).unwrap_or(i64::MIN), a.null_count() > 0)
        })
        .reduce(|| (i64::MAX, i64::MIN, false), |a, b| (a.0.min(b.0), a.1.max(b.1), a.2 || b.2));
    let null = null && nulls == NullEquality::NullEqualsNull;
    if min > max {
        return (!null).then(|| KeySet::Bitmap { min: 0, bits: Vec::new(), len: 0, null });
    }
    let span = (max as i128 - min as i128) as u128 + 1;
    let keys: usize = arrays.iter().map(|a| a.len() - a.null_count()).sum();
    if span > u128::from(MAX_BITMAP_SPAN) || (dense && span > 64 * keys as u128 + (1 << 16)) {
        return None;
    }
    let words: Vec<AtomicU64> = (0..(span as usize).div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
    arrays.par_iter().for_each(|a| {
        // Runs of keys in one word set it once.
        let (mut word, mut mask) = (usize::MAX, 0u64);
        for v in a.as_primitive::<Int64Type>().iter().flatten() {
            let at = v.wrapping_sub(min) as u64 as usize;
            if at / 64 != word {
                if mask != 0 {
                    words[word].fetch_or(mask, Relaxed);
                }
                (word, mask) = (at / 64, 0);
            }
            mask |= 1 << (at % 64);
        }
        if mask != 0 {
            words[word].fetch_or(mask, Relaxed);
        }
    });
    let bits: Vec<u64> = words.into_iter().map(AtomicU64::into_inner).collect();
    let len = bits.iter().map(|w| w.count_ones() as usize).sum();
    Some(KeySet::Bitmap { min, bits, len, null })
}

/// `key IN <the build keys of a GPU join>`: true where the build side's keys ([`BuildKeys`])
/// hold the row's key, or are not known (yet).
#[derive(Debug, Clone)]
pub struct BuildKeysExpr {
    key: PhysicalExprRef,
    keys: Arc<BuildKeys>,
}

impl BuildKeysExpr {
    pub fn new(key: PhysicalExprRef, keys: Arc<BuildKeys>) -> Self {
        BuildKeysExpr { key, keys }
    }

    pub fn build_keys(&self) -> &Arc<BuildKeys> {
        &self.keys
    }
}

impl PartialEq for BuildKeysExpr {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.keys, &other.keys) && self.key.as_ref() == other.key.as_ref()
    }
}

impl Eq for BuildKeysExpr {}

impl std::hash::Hash for BuildKeysExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.keys.id.hash(state);
        self.key.hash(state);
    }
}

impl fmt::Display for BuildKeysExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} IN build_keys#{}", self.key, self.keys.id)
    }
}

impl PhysicalExpr for BuildKeysExpr {
    fn data_type(&self, _schema: &datafusion::arrow::datatypes::Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, _schema: &datafusion::arrow::datatypes::Schema) -> Result<bool> {
        Ok(false)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<datafusion::logical_expr::ColumnarValue> {
        use datafusion::logical_expr::ColumnarValue;
        let Some(set) = self.keys.get() else { return Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::Boolean(Some(true)))) };
        let key = self.key.evaluate(batch)?.into_array(batch.num_rows())?;
        let mask = set.contains_keys(&[key], batch.num_rows())?;
        self.keys.count(mask.len(), mask.true_count());
        Ok(ColumnarValue::Array(Arc::new(mask)))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.key]
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn PhysicalExpr>>) -> Result<Arc<dyn PhysicalExpr>> {
        match children.as_slice() {
            [key] => Ok(Arc::new(BuildKeysExpr { key: Arc::clone(key), keys: Arc::clone(&self.keys) })),
            _ => internal_err!("BuildKeysExpr has 1 child, got {}", children.len()),
        }
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} IN build_keys#{}", self.key, self.keys.id)
    }

    fn is_volatile_node(&self) -> bool {
        // Its answer changes once the keys are set: no optimizer may fold or move it.
        true
    }
}

/// `plan` with a [`BuildKeysExpr`] filter in the probe side of each `CollectLeft` GPU join
/// that drops the probe rows without a match (Inner, Left, LeftSemi, LeftAnti, RightSemi) on
/// an integer first key, with [`GpuJoinConfig::probe_key_filters`](crate::GpuJoinConfig::probe_key_filters)
/// on and no probe rows read ahead: the probe key followed down ([`crate::reduce`]'s way:
/// projections of columns, filters, repartitions, coalesces, sorts, the kept sides of joins) to
/// where it is made, the test is put first in the `FilterExec` just above (or a new one); the
/// join then sets the keys ([`GpuJoinExec::with_build_keys`]). Returns how many were put.
///
/// ```text
/// GpuJoinExec: mode=CollectLeft, on=[(o_orderkey@0, l_orderkey@0)], build_keys=#1
///   ...orders...
///   FilterExec: l_orderkey@0 IN build_keys#1 AND l_shipdate@3 > 1995-03-15
///     DataSourceExec: lineitem
/// ```
pub(crate) fn with_probe_key_filters(plan: Arc<dyn ExecutionPlan>) -> Result<(Arc<dyn ExecutionPlan>, usize)> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    let mut put = 0;
    let plan = plan
        .transform_up(|node| {
            Ok(match with_build_key_filter(&node)? {
                Some(join) => {
                    put += 1;
                    Transformed::yes(join)
                }
                None => Transformed::no(node),
            })
        })?
        .data;
    Ok((plan, put))
}

/// `node` with its probe side tested against its build keys where it is read, where `node` is
/// a GPU join that can have that ([`with_probe_key_filters`]); `None` otherwise.
fn with_build_key_filter(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(g) = node.downcast_ref::<GpuJoinExec>() else { return Ok(None) };
    use datafusion::common::JoinType as J;
    let eligible = g.mode() == datafusion::physical_plan::joins::PartitionMode::CollectLeft
        && matches!(g.join_type(), J::Inner | J::Left | J::LeftSemi | J::LeftAnti | J::RightSemi)
        && g.config().probe_key_filters
        && g.config().probe_prefetch_rows() == 0
        && g.build_keys().is_none();
    let Some((l, r)) = g.on().first() else { return Ok(None) };
    let (Some(_), Some(r)) = (l.downcast_ref::<Column>(), r.downcast_ref::<Column>()) else { return Ok(None) };
    if !eligible || !as_ints(g.right().schema().field(r.index()).data_type()) {
        return Ok(None);
    }
    let keys = BuildKeys::new();
    let right = tested_where_made(g.right(), r.index(), &keys)?;
    Ok(Some(Arc::new(g.over(Arc::clone(g.left()), right)?.with_build_keys(keys))))
}

/// `plan` with its column `column` tested against `keys` where that column is made (followed
/// down as [`crate::reduce`] follows a key): first in the `FilterExec` just above, or in a new
/// one there.
fn tested_where_made(plan: &Arc<dyn ExecutionPlan>, column: usize, keys: &Arc<BuildKeys>) -> Result<Arc<dyn ExecutionPlan>> {
    let (mut path, mut at, mut node, mut parent) = (Vec::new(), column, Arc::clone(plan), None);
    while let Some((child, col, _)) = crate::reduce::source(&node, at) {
        let below = Arc::clone(node.children()[child]);
        (at, parent) = (col, Some(std::mem::replace(&mut node, below)));
        path.push(child);
    }
    let test: PhysicalExprRef = Arc::new(BuildKeysExpr::new(Arc::new(Column::new(node.schema().field(at).name(), at)), Arc::clone(keys)));
    if let Some(f) = parent.as_ref().and_then(|p| p.downcast_ref::<FilterExec>()) {
        let predicate = Arc::new(BinaryExpr::new(test, Operator::And, Arc::clone(f.predicate())));
        let filter: Arc<dyn ExecutionPlan> = Arc::new(datafusion::physical_plan::filter::FilterExecBuilder::from(f).with_predicate(predicate).build()?);
        path.pop();
        return crate::reduce::insert_at(plan, &path, &|_| Ok(Arc::clone(&filter)));
    }
    crate::reduce::insert_at(plan, &path, &|made| Ok(Arc::new(FilterExec::try_new(Arc::clone(&test), made)?)))
}

/// A partition's filtering: its input, the rows passed so far, waiting for a full batch.
struct Filtering {
    input: SendableRecordBatchStream,
    coalescer: BatchCoalescer,
    exprs: Vec<PhysicalExprRef>,
    baseline: BaselineMetrics,
    ended: bool,
}

/// A multiply-shift hash of one integer (the keys of the integer hash set).
#[derive(Default)]
struct IntHasher(u64);

impl Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_i64(&mut self, v: i64) {
        self.0 = (v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

type IntSet = HashSet<i64, BuildHasherDefault<IntHasher>>;

/// The keys of the small input, built once.
#[derive(Debug)]
enum KeySet {
    /// Integer keys: bit `v - min` set for each key `v` (as 64 bits).
    Bitmap { min: i64, bits: Vec<u64>, len: usize, null: bool },
    /// Integer keys, spread.
    Ints { set: IntSet, null: bool },
    /// Any keys: their row-format encodings (a row with a null key only where nulls are equal).
    Rows { converter: RowConverter, set: HashSet<Box<[u8]>> },
}

/// Whether a key type is kept as 64-bit integers: its values as `Int64` (a cast that keeps
/// every value: integers of at most 64 bits, unsigned 64-bit ones reinterpreted; dates, times,
/// timestamps and durations as their integer counts).
fn as_ints(t: &DataType) -> bool {
    use DataType::*;
    matches!(t, Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Date32 | Date64 | Time32(_) | Time64(_) | Timestamp(_, _) | Duration(_))
}

/// A key column as `Int64` values ([`as_ints`]).
fn int_values(a: &ArrayRef) -> Result<ArrayRef> {
    Ok(match a.data_type() {
        DataType::Int64 => Arc::clone(a),
        DataType::UInt64 => {
            let u = a.as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
            Arc::new(datafusion::arrow::array::Int64Array::new(u.values().iter().map(|&v| v as i64).collect(), u.nulls().cloned()))
        }
        _ => cast(a, &DataType::Int64)?,
    })
}

struct KeySetBuilder {
    exprs: Vec<PhysicalExprRef>,
    nulls: NullEquality,
    /// One integer key: its columns as `Int64`.
    ints: Option<Vec<ArrayRef>>,
    rows: Option<(RowConverter, HashSet<Box<[u8]>>)>,
}

impl KeySetBuilder {
    fn new(exprs: &[PhysicalExprRef], schema: &SchemaRef, nulls: NullEquality) -> Result<Self> {
        let types = exprs.iter().map(|e| e.data_type(schema)).collect::<Result<Vec<_>>>()?;
        let ints = (types.len() == 1 && as_ints(&types[0])).then(Vec::new);
        let rows = if ints.is_none() { Some((RowConverter::new(types.into_iter().map(SortField::new).collect())?, HashSet::new())) } else { None };
        Ok(KeySetBuilder { exprs: exprs.to_vec(), nulls, ints, rows })
    }

    fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        let cols = evaluate(&self.exprs, batch)?;
        if let Some(arrays) = &mut self.ints {
            arrays.push(int_values(&cols[0])?);
        } else if let Some((converter, set)) = &mut self.rows {
            let rows = converter.convert_columns(&cols)?;
            let valid = all_valid(&cols, batch.num_rows());
            for (i, row) in rows.iter().enumerate() {
                if self.nulls == NullEquality::NullEqualsNull || valid.as_ref().is_none_or(|v| v.value(i)) {
                    set.insert(row.as_ref().into());
                }
            }
        }
        Ok(())
    }

    /// The key set: dense integers as a bitmap ([`int_bitmap`]), other integers as a hash set,
    /// any other keys as their row encodings.
    fn finish(self) -> Result<KeySet> {
        if let Some(arrays) = self.ints {
            if let Some(bitmap) = int_bitmap(&arrays, self.nulls, true) {
                return Ok(bitmap);
            }
            let null = self.nulls == NullEquality::NullEqualsNull && arrays.iter().any(|a| a.null_count() > 0);
            let set = arrays.iter().flat_map(|a| a.as_primitive::<Int64Type>().iter().flatten()).collect();
            return Ok(KeySet::Ints { set, null });
        }
        match self.rows {
            Some((converter, set)) => Ok(KeySet::Rows { converter, set }),
            None => internal_err!("KeyFilterExec: no key set"),
        }
    }
}

/// The key expressions of `exprs` over `batch`, as arrays.
fn evaluate(exprs: &[PhysicalExprRef], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    exprs.iter().map(|e| e.evaluate(batch)?.into_array(batch.num_rows())).collect()
}

/// Where every key of a row is valid (`None`: every row).
fn all_valid(cols: &[ArrayRef], rows: usize) -> Option<BooleanArray> {
    if cols.iter().all(|c| c.null_count() == 0) {
        return None;
    }
    let mut b = BooleanBufferBuilder::new(rows);
    for i in 0..rows {
        b.append(cols.iter().all(|c| c.is_valid(i)));
    }
    Some(BooleanArray::new(b.finish(), None))
}

impl KeySet {
    fn len(&self) -> usize {
        match self {
            KeySet::Bitmap { len, .. } => *len,
            KeySet::Ints { set, .. } => set.len(),
            KeySet::Rows { set, .. } => set.len(),
        }
    }

    /// Where the keys of each row of `batch` (`exprs`) are in the set.
    fn contains(&self, batch: &RecordBatch, exprs: &[PhysicalExprRef]) -> Result<BooleanArray> {
        self.contains_keys(&evaluate(exprs, batch)?, batch.num_rows())
    }

    /// Where the keys of each row (`cols`, `n` rows) are in the set.
    fn contains_keys(&self, cols: &[ArrayRef], n: usize) -> Result<BooleanArray> {
        let mut out = BooleanBufferBuilder::new(n);
        match self {
            KeySet::Bitmap { min, bits, null, .. } => {
                let v = int_values(&cols[0])?;
                let v = v.as_primitive::<Int64Type>();
                let span = bits.len() as u64 * 64;
                let (min, bits) = (*min, bits.as_slice());
                let hit = |x: i64| -> u64 {
                    let at = x.wrapping_sub(min) as u64;
                    if at < span {
                        (bits[(at / 64) as usize] >> (at % 64)) & 1
                    } else {
                        0
                    }
                };
                // A word of the mask at a time.
                let words: Vec<u64> = v.values().chunks(64).map(|c| c.iter().enumerate().fold(0u64, |w, (i, &x)| w | (hit(x) << i))).collect();
                let mask = datafusion::arrow::buffer::BooleanBuffer::new(datafusion::arrow::buffer::Buffer::from_vec(words), 0, n);
                return Ok(match v.nulls() {
                    None => BooleanArray::new(mask, None),
                    // Null keys: their own answer.
                    Some(valid) if *null => BooleanArray::new(&mask | &!valid.inner(), None),
                    Some(valid) => BooleanArray::new(&mask & valid.inner(), None),
                });
            }
            KeySet::Ints { set, null } => {
                let v = int_values(&cols[0])?;
                let v = v.as_primitive::<Int64Type>();
                match v.nulls() {
                    None => v.values().iter().for_each(|x| out.append(set.contains(x))),
                    Some(valid) => v.values().iter().zip(valid.iter()).for_each(|(x, ok)| out.append(if ok { set.contains(x) } else { *null })),
                }
            }
            KeySet::Rows { converter, set } => {
                let rows = converter.convert_columns(cols)?;
                for row in rows.iter() {
                    out.append(set.contains(row.as_ref()));
                }
            }
        }
        Ok(BooleanArray::new(out.finish(), None))
    }
}

/// The rows a [`KeyFilterExec`] keeps (tests: the same as a semi join's).
#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, StringArray, UInt64Array};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::physical_expr::expressions::Column;

    fn set_of(keys: ArrayRef, nulls: NullEquality) -> KeySet {
        let schema = Arc::new(Schema::new(vec![Field::new("k", keys.data_type().clone(), true)]));
        let exprs: Vec<PhysicalExprRef> = vec![Arc::new(Column::new("k", 0))];
        let mut b = KeySetBuilder::new(&exprs, &schema, nulls).unwrap();
        b.add(&RecordBatch::try_new(schema, vec![keys]).unwrap()).unwrap();
        b.finish().unwrap()
    }

    fn kept(set: &KeySet, probe: ArrayRef) -> Vec<bool> {
        let schema = Arc::new(Schema::new(vec![Field::new("k", probe.data_type().clone(), true)]));
        let exprs: Vec<PhysicalExprRef> = vec![Arc::new(Column::new("k", 0))];
        set.contains(&RecordBatch::try_new(schema, vec![probe]).unwrap(), &exprs).unwrap().iter().map(|b| b.unwrap()).collect()
    }

    /// A probe-side test against a join's build keys: every row passes until the keys are set
    /// (from the build batches), then the rows whose key is among them; it gives
    /// up (passes every row) once it has kept more than nine in ten of 2^20 rows; keys that are
    /// not dense integers set nothing.
    #[test]
    fn build_keys_filter_once_set_and_give_up_when_useless() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let batch = |v: Vec<Option<i64>>| RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(datafusion::arrow::array::Int64Array::from(v))]).unwrap();
        let key: PhysicalExprRef = Arc::new(Column::new("k", 0));
        let keys = BuildKeys::new();
        let expr = BuildKeysExpr::new(Arc::clone(&key), Arc::clone(&keys));
        let probe = batch(vec![Some(1), Some(2), None, Some(40), Some(1 << 40)]);
        let mask = |e: &BuildKeysExpr, b: &RecordBatch| -> Vec<bool> {
            match e.evaluate(b).unwrap() {
                datafusion::logical_expr::ColumnarValue::Array(a) => a.as_boolean().iter().map(|v| v.unwrap()).collect(),
                datafusion::logical_expr::ColumnarValue::Scalar(s) => vec![s == datafusion::common::ScalarValue::Boolean(Some(true)); b.num_rows()],
            }
        };
        assert_eq!(mask(&expr, &probe), [true; 5]);
        keys.set_from(&[batch(vec![Some(2), Some(40), None]), batch(vec![Some(40)])], &key, NullEquality::NullEqualsNothing);
        assert_eq!(mask(&expr, &probe), [false, true, false, true, false]);
        // Kept 2 of 5: it goes on; then 2^20 rows all kept: it gives up.
        let all = batch((0..1 << 20).map(|_| Some(40)).collect());
        assert!(mask(&expr, &all).iter().all(|&b| b));
        assert_eq!(mask(&expr, &probe), [true; 5]);
        // A new run forgets the keys.
        keys.clear();
        assert!(keys.get().is_none());
        // Spread keys make no bitmap: nothing is set.
        let spread = BuildKeys::new();
        spread.set_from(&[batch(vec![Some(0), Some(1 << 40)])], &key, NullEquality::NullEqualsNothing);
        assert!(spread.get().is_none());
        // Null keys where nulls are equal: a null probe key passes.
        let nulls = BuildKeys::new();
        nulls.set_from(&[batch(vec![Some(2), None])], &key, NullEquality::NullEqualsNull);
        assert_eq!(mask(&BuildKeysExpr::new(Arc::clone(&key), nulls), &probe), [false, true, true, false, false]);
    }

    #[test]
    fn key_sets_keep_the_rows_a_semi_join_keeps() {
        // Dense integers: a bitmap; a null key matches only where nulls are equal.
        let keys: ArrayRef = Arc::new(Int32Array::from(vec![Some(3), Some(7), Some(7), None]));
        let probe: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), Some(3), Some(7), None, Some(8), Some(i32::MIN), Some(i32::MAX)]));
        let s = set_of(Arc::clone(&keys), NullEquality::NullEqualsNothing);
        assert!(matches!(s, KeySet::Bitmap { len: 2, null: false, .. }), "{s:?}");
        assert_eq!(kept(&s, Arc::clone(&probe)), [false, true, true, false, false, false, false]);
        let s = set_of(keys, NullEquality::NullEqualsNull);
        assert_eq!(kept(&s, Arc::clone(&probe)), [false, true, true, true, false, false, false]);
        // Spread 64-bit keys (unsigned, above i64::MAX too): a hash set.
        let keys: ArrayRef = Arc::new(UInt64Array::from(vec![0, u64::MAX, 1 << 40]));
        let s = set_of(keys, NullEquality::NullEqualsNothing);
        assert!(matches!(s, KeySet::Ints { .. }), "{s:?}");
        assert_eq!(kept(&s, Arc::new(UInt64Array::from(vec![u64::MAX, 1, 1 << 40, 0, u64::MAX - 1]))), [true, false, true, true, false]);
        // Strings: row encodings.
        let keys: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None, Some("bb")]));
        let probe: ArrayRef = Arc::new(StringArray::from(vec![Some("bb"), Some("b"), None, Some("a"), Some("")]));
        let s = set_of(Arc::clone(&keys), NullEquality::NullEqualsNothing);
        assert_eq!((s.len(), kept(&s, Arc::clone(&probe))), (2, vec![true, false, false, true, false]));
        let s = set_of(keys, NullEquality::NullEqualsNull);
        assert_eq!(kept(&s, probe), [true, false, true, true, false]);
        // No keys: nothing passes.
        let s = set_of(Arc::new(Int32Array::from(Vec::<i32>::new())), NullEquality::NullEqualsNothing);
        assert_eq!(kept(&s, Arc::new(Int32Array::from(vec![0, 1]))), [false, false]);
    }
}

