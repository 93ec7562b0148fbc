//! [`GpuJoinCodec`] (feature `proto`): a `PhysicalExtensionCodec` for [`GpuJoinExec`], so that a
//! plan holding one can be serialized with datafusion-proto and run elsewhere.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use datafusion::physical_plan::ExecutionPlan;
//! # use datafusion::prelude::SessionContext;
//! # fn f(plan: Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> datafusion::common::Result<()> {
//! use datafusion_proto::bytes::{physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec};
//! use gpujoin_datafusion::GpuJoinCodec;
//! let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &GpuJoinCodec)?;
//! let back = physical_plan_from_bytes_with_extension_codec(&bytes, &ctx.task_ctx(), &GpuJoinCodec)?;
//! # Ok(()) }
//! ```
//!
//! A [`GpuJoinExec`] node carries the keys and the filter as datafusion-proto expressions, the join type, the
//! null equality, the projection, the partition mode, the [`GpuJoinConfig`] and the name of the
//! operator it replaced; its two inputs are datafusion-proto's. Decoding builds the operator
//! again with [`GpuJoinExec::try_new`], which checks it as the rule did.
//!
//! A [`CpuJoinKeptExec`] node (the rule's note above a join it kept) is the bytes `CPUK` and its
//! reason; a [`KeyFilterExec`] (a semi-join reduction) the bytes `KEYF`, its key pairs and null
//! equality; their inputs are datafusion-proto's. (No encoded `GpuJoinExec` starts with `C` or
//! `K`: 0x43 and 0x4B would be fields 8 and 9 of wire type 3, which prost never writes.)

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::common::{internal_err, DataFusionError, JoinSide, JoinType as DfJoinType, NullEquality, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
use datafusion::physical_plan::joins::PartitionMode;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use datafusion_proto::protobuf;
use gpujoin_join::plan::Algorithm;
use prost::Message;

use crate::{CpuJoinKeptExec, GpuJoinConfig, GpuJoinExec, KeyFilterExec, OutputGather};

/// The first bytes of an encoded [`CpuJoinKeptExec`].
const KEPT_MAGIC: &[u8] = b"CPUK";

/// The first bytes of an encoded [`KeyFilterExec`].
const KEY_FILTER_MAGIC: &[u8] = b"KEYF";

/// The serialized [`KeyFilterExec`] (after [`KEY_FILTER_MAGIC`]).
#[derive(Clone, PartialEq, Message)]
struct KeyFilterNode {
    #[prost(message, repeated, tag = "1")]
    keys: Vec<protobuf::PhysicalExprNode>,
    #[prost(message, repeated, tag = "2")]
    input_keys: Vec<protobuf::PhysicalExprNode>,
    #[prost(bool, tag = "3")]
    nulls_equal: bool,
}

/// The serialized [`CpuJoinKeptExec`] (after [`KEPT_MAGIC`]).
#[derive(Clone, PartialEq, Message)]
struct KeptNode {
    #[prost(string, tag = "1")]
    reason: String,
}

/// Encodes and decodes [`GpuJoinExec`], [`CpuJoinKeptExec`] and [`KeyFilterExec`] nodes: a
/// `GpuJoinExec` as its keys and filter (datafusion-proto expressions), join type, null
/// equality, projection, mode, [`GpuJoinConfig`] and the operator it replaced; a
/// `CpuJoinKeptExec` as `CPUK` and its reason; a `KeyFilterExec` as `KEYF`, its key pairs and
/// null equality. A probe side's [`BuildKeysExpr`](crate::key_filter::BuildKeysExpr) decodes as
/// `true` (its keys are shared in memory with its join).
#[derive(Debug, Default, Clone, Copy)]
pub struct GpuJoinCodec;

/// The serialized node.
#[derive(Clone, PartialEq, Message)]
struct GpuJoinNode {
    #[prost(message, repeated, tag = "1")]
    left_keys: Vec<protobuf::PhysicalExprNode>,
    #[prost(message, repeated, tag = "2")]
    right_keys: Vec<protobuf::PhysicalExprNode>,
    #[prost(message, optional, tag = "3")]
    filter: Option<FilterNode>,
    #[prost(string, tag = "4")]
    join_type: String,
    #[prost(bool, tag = "5")]
    nulls_equal: bool,
    #[prost(uint64, repeated, packed = "true", tag = "6")]
    projection: Vec<u64>,
    #[prost(bool, tag = "7")]
    has_projection: bool,
    #[prost(bool, tag = "8")]
    collect_left: bool,
    #[prost(message, optional, tag = "9")]
    config: Option<ConfigNode>,
    #[prost(string, optional, tag = "10")]
    replaces: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct FilterNode {
    #[prost(message, optional, tag = "1")]
    expression: Option<protobuf::PhysicalExprNode>,
    /// (column index, side: 0 left, 1 right, 2 none) pairs, flattened.
    #[prost(uint64, repeated, packed = "true", tag = "2")]
    columns: Vec<u64>,
    #[prost(message, optional, tag = "3")]
    schema: Option<protobuf::Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct ConfigNode {
    #[prost(bool, tag = "1")]
    enabled: bool,
    #[prost(uint64, tag = "2")]
    device: u64,
    #[prost(uint64, optional, tag = "3")]
    batch_rows: Option<u64>,
    #[prost(string, tag = "4")]
    algorithm: String,
    #[prost(bool, tag = "5")]
    allow_float_semantics: bool,
    #[prost(uint64, optional, tag = "6")]
    chunk_bytes: Option<u64>,
    /// `OutputGather::Device` (absent: `Host`).
    #[prost(bool, tag = "7")]
    gather_on_device: bool,
    #[prost(uint64, optional, tag = "8")]
    probe_part_rows: Option<u64>,
    #[prost(uint64, optional, tag = "9")]
    device_lanes: Option<u64>,
    #[prost(uint64, optional, tag = "10")]
    block_cache_bytes: Option<u64>,
    #[prost(uint64, optional, tag = "11")]
    min_build_rows: Option<u64>,
    #[prost(uint64, optional, tag = "12")]
    collect_build_rows: Option<u64>,
    #[prost(uint64, optional, tag = "13")]
    parallel_gather_batches: Option<u64>,
    #[prost(uint64, optional, tag = "14")]
    semi_join_reduction_rows: Option<u64>,
    #[prost(uint64, optional, tag = "15")]
    probe_prefetch_rows: Option<u64>,
    /// `!shared_matched_rows` (absent: shared, the default).
    #[prost(bool, tag = "16")]
    unshared_matched_rows: bool,
    #[prost(uint64, optional, tag = "17")]
    semi_join_reduced_rows: Option<u64>,
    /// `!probe_key_filters` (absent: on, the default).
    #[prost(bool, tag = "18")]
    no_probe_key_filters: bool,
}

const JOIN_TYPES: [DfJoinType; 10] = [
    DfJoinType::Inner,
    DfJoinType::Left,
    DfJoinType::Right,
    DfJoinType::Full,
    DfJoinType::LeftSemi,
    DfJoinType::LeftAnti,
    DfJoinType::RightSemi,
    DfJoinType::RightAnti,
    DfJoinType::LeftMark,
    DfJoinType::RightMark,
];

fn algorithm_from_name(name: &str) -> Result<Algorithm> {
    std::iter::once(Algorithm::Auto)
        .chain(Algorithm::EXPLICIT)
        .find(|a| a.name() == name)
        .ok_or_else(|| DataFusionError::Internal(format!("GpuJoinCodec: unknown algorithm {name:?}")))
}

fn side_code(side: JoinSide) -> u64 {
    match side {
        JoinSide::Left => 0,
        JoinSide::Right => 1,
        JoinSide::None => 2,
    }
}

fn side_from_code(code: u64) -> Result<JoinSide> {
    match code {
        0 => Ok(JoinSide::Left),
        1 => Ok(JoinSide::Right),
        2 => Ok(JoinSide::None),
        c => internal_err!("GpuJoinCodec: join side code {c}"),
    }
}

fn usize_of(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| DataFusionError::Internal(format!("GpuJoinCodec: {v} does not fit in usize")))
}

impl GpuJoinCodec {
    /// Expression pairs (a join's keys, a key filter's), the first of each over `left`'s
    /// schema, the second over `right`'s, from their two serialized lists.
    fn decode_pairs(&self, lefts: &[protobuf::PhysicalExprNode], rights: &[protobuf::PhysicalExprNode], left: &Arc<dyn ExecutionPlan>, right: &Arc<dyn ExecutionPlan>, ctx: &TaskContext) -> Result<Vec<(PhysicalExprRef, PhysicalExprRef)>> {
        if lefts.len() != rights.len() {
            return internal_err!("GpuJoinCodec: {} left keys and {} right keys", lefts.len(), rights.len());
        }
        let (ls, rs) = (left.schema(), right.schema());
        lefts.iter().zip(rights).map(|(l, r)| Ok((parse_physical_expr(l, ctx, &ls, self)?, parse_physical_expr(r, ctx, &rs, self)?))).collect()
    }

    /// The two serialized lists of expression pairs ([`GpuJoinCodec::decode_pairs`]).
    fn encode_pairs(&self, pairs: &[(PhysicalExprRef, PhysicalExprRef)]) -> Result<(Vec<protobuf::PhysicalExprNode>, Vec<protobuf::PhysicalExprNode>)> {
        let side = |second: bool| pairs.iter().map(|(l, r)| serialize_physical_expr(if second { r } else { l }, self)).collect::<Result<Vec<_>>>();
        Ok((side(false)?, side(true)?))
    }
}

/// The bytes of an encoded [`BuildKeysExpr`](crate::key_filter::BuildKeysExpr).
const BUILD_KEYS_MAGIC: &[u8] = b"BKEY";

impl PhysicalExtensionCodec for GpuJoinCodec {
    /// A [`BuildKeysExpr`](crate::key_filter::BuildKeysExpr) (the test of a probe row's key
    /// against its join's build keys) decodes as `true`: its keys are shared in memory with the
    /// join, which a serialized plan does not carry. Every row it would drop, the join drops.
    fn try_decode_expr(&self, buf: &[u8], _inputs: &[Arc<dyn datafusion::physical_expr::PhysicalExpr>], _ctx: &datafusion::physical_expr_common::physical_expr::proto_decode::PhysicalExprDecodeCtx<'_>) -> Result<Arc<dyn datafusion::physical_expr::PhysicalExpr>> {
        if buf != BUILD_KEYS_MAGIC {
            return internal_err!("GpuJoinCodec: not an expression it encoded");
        }
        Ok(Arc::new(datafusion::physical_expr::expressions::Literal::new(datafusion::common::ScalarValue::Boolean(Some(true)))))
    }

    fn try_encode_expr(&self, node: &Arc<dyn datafusion::physical_expr::PhysicalExpr>, buf: &mut Vec<u8>, _ctx: &datafusion::physical_expr_common::physical_expr::proto_encode::PhysicalExprEncodeCtx<'_>) -> Result<()> {
        if node.downcast_ref::<crate::key_filter::BuildKeysExpr>().is_none() {
            return internal_err!("GpuJoinCodec encodes no expression but BuildKeysExpr, not {node}");
        }
        buf.extend_from_slice(BUILD_KEYS_MAGIC);
        Ok(())
    }

    fn try_decode(&self, buf: &[u8], inputs: &[Arc<dyn ExecutionPlan>], ctx: &TaskContext, _converter: &dyn PhysicalProtoConverterExtension) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some(rest) = buf.strip_prefix(KEPT_MAGIC) {
            let node = KeptNode::decode(rest).map_err(|e| DataFusionError::Internal(format!("GpuJoinCodec: not a CpuJoinKeptExec node: {e}")))?;
            let [input] = inputs else {
                return internal_err!("GpuJoinCodec: a CpuJoinKeptExec has 1 input, got {}", inputs.len());
            };
            return Ok(Arc::new(CpuJoinKeptExec::new(Arc::clone(input), node.reason)));
        }
        if let Some(rest) = buf.strip_prefix(KEY_FILTER_MAGIC) {
            let node = KeyFilterNode::decode(rest).map_err(|e| DataFusionError::Internal(format!("GpuJoinCodec: not a KeyFilterExec node: {e}")))?;
            let [keys, input] = inputs else {
                return internal_err!("GpuJoinCodec: a KeyFilterExec has 2 inputs, got {}", inputs.len());
            };
            let on = self.decode_pairs(&node.keys, &node.input_keys, keys, input, ctx)?;
            let nulls = if node.nulls_equal { NullEquality::NullEqualsNull } else { NullEquality::NullEqualsNothing };
            return Ok(Arc::new(KeyFilterExec::try_new(Arc::clone(keys), Arc::clone(input), on, nulls)?));
        }
        let node = GpuJoinNode::decode(buf).map_err(|e| DataFusionError::Internal(format!("GpuJoinCodec: not a GpuJoinExec node: {e}")))?;
        let [left, right] = inputs else {
            return internal_err!("GpuJoinCodec: a GpuJoinExec has 2 inputs, got {}", inputs.len());
        };
        let on = self.decode_pairs(&node.left_keys, &node.right_keys, left, right, ctx)?;
        let filter = match &node.filter {
            None => None,
            Some(f) => {
                let schema: Schema = f.schema.as_ref().ok_or_else(|| DataFusionError::Internal("GpuJoinCodec: filter without schema".into()))?.try_into()?;
                let expression = f.expression.as_ref().ok_or_else(|| DataFusionError::Internal("GpuJoinCodec: filter without expression".into()))?;
                let expression = parse_physical_expr(expression, ctx, &schema, self)?;
                if f.columns.len() % 2 != 0 {
                    return internal_err!("GpuJoinCodec: odd filter column list");
                }
                let columns = f.columns.chunks(2).map(|c| Ok(ColumnIndex { index: usize_of(c[0])?, side: side_from_code(c[1])? })).collect::<Result<Vec<_>>>()?;
                Some(JoinFilter::new(expression, columns, Arc::new(schema)))
            }
        };
        let join_type = *JOIN_TYPES
            .iter()
            .find(|t| format!("{t:?}") == node.join_type)
            .ok_or_else(|| DataFusionError::Internal(format!("GpuJoinCodec: unknown join type {:?}", node.join_type)))?;
        let null_equality = if node.nulls_equal { NullEquality::NullEqualsNull } else { NullEquality::NullEqualsNothing };
        let projection = node.has_projection.then(|| node.projection.iter().map(|&i| usize_of(i)).collect::<Result<Vec<_>>>()).transpose()?;
        let mode = if node.collect_left { PartitionMode::CollectLeft } else { PartitionMode::Partitioned };
        let c = node.config.unwrap_or_default();
        let config = GpuJoinConfig {
            enabled: c.enabled,
            device: usize_of(c.device)?,
            batch_rows: c.batch_rows.map(usize_of).transpose()?,
            algorithm: algorithm_from_name(&c.algorithm)?,
            allow_float_semantics: c.allow_float_semantics,
            chunk_bytes: c.chunk_bytes,
            gather: if c.gather_on_device { OutputGather::Device } else { OutputGather::Host },
            probe_part_rows: c.probe_part_rows.map(|r| usize::try_from(r).unwrap_or(usize::MAX)),
            device_lanes: c.device_lanes.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            block_cache_bytes: c.block_cache_bytes.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            min_build_rows: c.min_build_rows.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            collect_build_rows: c.collect_build_rows.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            parallel_gather_batches: c.parallel_gather_batches.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            semi_join_reduction_rows: c.semi_join_reduction_rows.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            probe_prefetch_rows: c.probe_prefetch_rows.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            shared_matched_rows: !c.unshared_matched_rows,
            semi_join_reduced_rows: c.semi_join_reduced_rows.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            probe_key_filters: !c.no_probe_key_filters,
            ..GpuJoinConfig::default()
        };
        let mut exec = GpuJoinExec::try_new(Arc::clone(left), Arc::clone(right), on, filter, join_type, null_equality, projection, mode, config)?;
        if let Some(r) = node.replaces {
            exec = exec.replacing(r);
        }
        Ok(Arc::new(exec))
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>, _converter: &dyn PhysicalProtoConverterExtension) -> Result<()> {
        if let Some(kept) = node.downcast_ref::<CpuJoinKeptExec>() {
            buf.extend_from_slice(KEPT_MAGIC);
            let msg = KeptNode { reason: kept.reason().to_string() };
            return msg.encode(buf).map_err(|e| DataFusionError::Internal(format!("GpuJoinCodec: {e}")));
        }
        if let Some(k) = node.downcast_ref::<KeyFilterExec>() {
            buf.extend_from_slice(KEY_FILTER_MAGIC);
            let (keys, input_keys) = self.encode_pairs(k.on())?;
            let msg = KeyFilterNode {
                keys,
                input_keys,
                nulls_equal: k.null_equality() == NullEquality::NullEqualsNull,
            };
            return msg.encode(buf).map_err(|e| DataFusionError::Internal(format!("GpuJoinCodec: {e}")));
        }
        let Some(exec) = node.downcast_ref::<GpuJoinExec>() else {
            return internal_err!("GpuJoinCodec encodes GpuJoinExec, CpuJoinKeptExec and KeyFilterExec only, not {}", node.name());
        };
        let filter = match exec.filter() {
            None => None,
            Some(f) => Some(FilterNode {
                expression: Some(serialize_physical_expr(f.expression(), self)?),
                columns: f.column_indices().iter().flat_map(|c| [c.index as u64, side_code(c.side)]).collect(),
                schema: Some(f.schema().as_ref().try_into()?),
            }),
        };
        let c = exec.config();
        let (left_keys, right_keys) = self.encode_pairs(exec.on())?;
        let msg = GpuJoinNode {
            left_keys,
            right_keys,
            filter,
            join_type: format!("{:?}", exec.join_type()),
            nulls_equal: exec.null_equality() == NullEquality::NullEqualsNull,
            projection: exec.projection().unwrap_or(&[]).iter().map(|&i| i as u64).collect(),
            has_projection: exec.projection().is_some(),
            collect_left: exec.mode() == PartitionMode::CollectLeft,
            config: Some(ConfigNode {
                enabled: c.enabled,
                device: c.device as u64,
                batch_rows: c.batch_rows.map(|b| b as u64),
                algorithm: c.algorithm.name().to_string(),
                allow_float_semantics: c.allow_float_semantics,
                chunk_bytes: c.chunk_bytes,
                gather_on_device: c.gather == OutputGather::Device,
                probe_part_rows: c.probe_part_rows.map(|r| r as u64),
                device_lanes: c.device_lanes.map(|n| n as u64),
                block_cache_bytes: c.block_cache_bytes.map(|n| n as u64),
                min_build_rows: c.min_build_rows.map(|n| n as u64),
                collect_build_rows: c.collect_build_rows.map(|n| n as u64),
                parallel_gather_batches: c.parallel_gather_batches.map(|n| n as u64),
                semi_join_reduction_rows: c.semi_join_reduction_rows.map(|n| n as u64),
                probe_prefetch_rows: c.probe_prefetch_rows.map(|n| n as u64),
                unshared_matched_rows: !c.shared_matched_rows,
                semi_join_reduced_rows: c.semi_join_reduced_rows.map(|n| n as u64),
                no_probe_key_filters: !c.probe_key_filters,
            }),
            replaces: exec.replaces().map(str::to_string),
        };
        msg.encode(buf).map_err(|e| DataFusionError::Internal(format!("GpuJoinCodec: {e}")))
    }
}
