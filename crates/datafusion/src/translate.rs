//! What gpujoin can run of a DataFusion join, and as what: the join type, the keys (plain column
//! references of device types), the `JoinFilter` as a typed [`Predicate`], the columns to upload
//! and the output columns. Anything else is a [`Refusal`] naming the reason, which
//! [`GpuJoinRule`](crate::GpuJoinRule) records when it keeps the CPU operator and
//! [`GpuJoinExec::try_new`](crate::GpuJoinExec::try_new) returns as an error.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Schema};
use datafusion::common::{JoinSide, JoinType as DfJoinType, NullEquality as DfNullEquality, ScalarValue};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal, NotExpr};
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_plan::joins::utils::{build_join_schema, JoinFilter};
use datafusion::physical_plan::PhysicalExpr;
use gpujoin_join::predicate::{CmpOp, DataType as P, Expr, Predicate, Scalar, Side};
use gpujoin_join::{JoinType, NullEquality};

use crate::{GpuJoinConfig, OutputGather};
use gpujoin_join::plan::{Algorithm, Gather};

/// Why a join stays on the CPU (or why [`GpuJoinExec::try_new`](crate::GpuJoinExec::try_new)
/// refuses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn refuse<T>(reason: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(reason.into()))
}

/// gpujoin's join type of a DataFusion join type (the mark joins have none).
pub fn join_type(t: DfJoinType) -> Result<JoinType, Refusal> {
    Ok(match t {
        DfJoinType::Inner => JoinType::Inner,
        DfJoinType::Left => JoinType::Left,
        DfJoinType::Right => JoinType::Right,
        DfJoinType::Full => JoinType::Full,
        DfJoinType::LeftSemi => JoinType::LeftSemi,
        DfJoinType::LeftAnti => JoinType::LeftAnti,
        DfJoinType::RightSemi => JoinType::RightSemi,
        DfJoinType::RightAnti => JoinType::RightAnti,
        DfJoinType::LeftMark | DfJoinType::RightMark => return refuse(format!("join type {t:?}: gpujoin has no mark joins")),
    })
}

/// Whether a join of this type must see every probe row before it knows the build side's
/// unmatched rows (Left, Full, LeftSemi, LeftAnti, the build side being the left).
pub fn needs_whole_probe_side(t: DfJoinType) -> bool {
    matches!(t, DfJoinType::Left | DfJoinType::Full | DfJoinType::LeftSemi | DfJoinType::LeftAnti | DfJoinType::LeftMark)
}

/// The name a column of the left (`l3`) or right (`r0`) input has on the device: positions, so
/// that duplicate names in DataFusion's schemas (`a` of two tables) never collide.
pub(crate) fn device_name(side: Side, index: usize) -> String {
    match side {
        Side::Left => format!("l{index}"),
        Side::Right => format!("r{index}"),
    }
}

/// A DataFusion join as gpujoin runs it.
#[derive(Debug, Clone)]
pub struct JoinPlan {
    /// DataFusion's join type and gpujoin's.
    pub df_join_type: DfJoinType,
    pub join_type: JoinType,
    pub null_equality: NullEquality,
    /// The input columns uploaded from each side (indices into the input schema, ascending).
    pub left_cols: Vec<usize>,
    pub right_cols: Vec<usize>,
    /// Key pairs (indices into the input schemas).
    pub keys: Vec<(usize, usize)>,
    /// The filter over the uploaded columns (`col_l(i)`: `left_cols[i]`).
    pub predicate: Option<Predicate>,
    /// Columns gpujoin outputs, left ones first (indices into the input schemas); a column may
    /// be selected only to carry the row count of an output without columns.
    pub select_left: Vec<usize>,
    pub select_right: Vec<usize>,
    /// For each output field, its column in gpujoin's output (`select_left`, then
    /// `select_right`).
    pub outputs: Vec<usize>,
    /// For each output field, its input column.
    pub sources: Vec<(Side, usize)>,
    /// Where the output columns are gathered: with [`OutputGather::Host`], `left_cols` /
    /// `right_cols` hold the key and filter columns only (a side without either uploads its
    /// selected columns, to carry its rows), and the output is taken from `sources` on the host.
    pub gather: OutputGather,
}

fn is_float(t: &ArrowType) -> bool {
    match t {
        ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64 => true,
        ArrowType::Dictionary(_, v) => is_float(v),
        _ => false,
    }
}

fn value_type(t: &ArrowType) -> &ArrowType {
    match t {
        ArrowType::Dictionary(_, v) => value_type(v),
        t => t,
    }
}

fn is_string(t: &ArrowType) -> bool {
    matches!(value_type(t), ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View)
}

/// A key expression as a column index of `schema`.
fn key_column(e: &PhysicalExprRef, schema: &Schema, side: &str) -> Result<usize, Refusal> {
    let Some(c) = e.downcast_ref::<Column>() else {
        return refuse(format!("{side} key {e} is not a column reference (gpujoin joins on columns; compute the expression below the join)"));
    };
    if c.index() >= schema.fields().len() {
        return refuse(format!("{side} key {c} refers to column {} of a schema of {}", c.index(), schema.fields().len()));
    }
    Ok(c.index())
}

/// Checks that gpujoin can hold a column (upload, key, output).
fn device_column(schema: &Schema, index: usize, role: &str) -> Result<gpujoin_join::table::DataType, Refusal> {
    let f = schema.field(index);
    gpujoin_arrow::device_type(f.name(), f.data_type()).map_err(|e| Refusal(format!("{role} {}: {e}", f.name())))
}

/// Whether, and how, gpujoin runs this join. `projection` indexes the join schema (left fields
/// then right fields; one side's for semi and anti joins), as `HashJoinExec`'s does.
#[allow(clippy::too_many_arguments)]
pub fn plan_join(
    left: &Schema,
    right: &Schema,
    on: &[(PhysicalExprRef, PhysicalExprRef)],
    filter: Option<&JoinFilter>,
    df_join_type: DfJoinType,
    null_equality: DfNullEquality,
    projection: Option<&[usize]>,
    config: &GpuJoinConfig,
) -> Result<JoinPlan, Refusal> {
    let jt = join_type(df_join_type)?;
    let mut keys = Vec::with_capacity(on.len());
    // gpujoin prepares each key column as one key word, a Decimal128 as two.
    let mut words = 0;
    for (l, r) in on {
        let (li, ri) = (key_column(l, left, "left")?, key_column(r, right, "right")?);
        let (lt, rt) = (device_column(left, li, "key")?, device_column(right, ri, "key")?);
        if !lt.is_comparable_with(rt) {
            return refuse(format!("key types differ: {} is {lt}, {} is {rt}", left.field(li).name(), right.field(ri).name()));
        }
        if is_float(left.field(li).data_type()) && !config.allow_float_semantics {
            return refuse(format!(
                "float key {}: DataFusion matches floats bitwise (-0.0 <> 0.0), gpujoin as numbers (-0.0 = 0.0); set GpuJoinConfig::allow_float_semantics to move it",
                left.field(li).name()
            ));
        }
        words += if matches!(lt, gpujoin_join::table::DataType::Decimal128(..)) { 2 } else { 1 };
        keys.push((li, ri));
    }
    if words > gpujoin_join::MAX_KEY_COLUMNS {
        return refuse(format!(
            "a composite key of {} columns takes {words} key words (a Decimal128 takes 2); gpujoin joins on at most {}",
            keys.len(),
            gpujoin_join::MAX_KEY_COLUMNS
        ));
    }
    let null_equality = match null_equality {
        DfNullEquality::NullEqualsNothing => NullEquality::NullEqualsNothing,
        DfNullEquality::NullEqualsNull => NullEquality::NullEqualsNull,
    };

    // The filter, over the input schemas' column indices for now.
    let predicate = match filter {
        Some(f) => Some(filter_predicate(f, left, right, config)?),
        None => None,
    };
    let mut refs: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    if let Some(p) = &predicate {
        p.for_each_column(&mut |side, i| refs[side_index(side)].push(i));
    }

    // The output columns: DataFusion's join schema, projected.
    let (join_schema, column_indices) = build_join_schema(left, right, &df_join_type);
    let wanted: Vec<usize> = match projection {
        Some(p) => p.to_vec(),
        None => (0..join_schema.fields().len()).collect(),
    };
    let mut select: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    let mut sources = Vec::with_capacity(wanted.len());
    for &k in &wanted {
        let Some(ci) = column_indices.get(k) else {
            return refuse(format!("the projection names column {k} of a join schema of {}", join_schema.fields().len()));
        };
        let (side, schema) = match ci.side {
            JoinSide::Left => (Side::Left, left),
            JoinSide::Right => (Side::Right, right),
            JoinSide::None => return refuse("an output column of neither side (a mark column)"),
        };
        device_column(schema, ci.index, "output column")?;
        let s = &mut select[side_index(side)];
        if !s.contains(&ci.index) {
            s.push(ci.index);
        }
        sources.push((side, ci.index));
    }
    // An output without columns still has rows: carry them in one column (a key, else the
    // first) of a side the join returns.
    if select[0].is_empty() && select[1].is_empty() {
        let (side, key, schema) = if jt.has_left_map() { (0, keys.first().map(|k| k.0), left) } else { (1, keys.first().map(|k| k.1), right) };
        let carrier = match key {
            Some(k) => k,
            None => match (0..schema.fields().len()).find(|&i| device_column(schema, i, "").is_ok()) {
                Some(i) => i,
                None => return refuse("no output columns and no column of a device type to carry the rows"),
            },
        };
        select[side].push(carrier);
    }
    let [select_left, select_right] = select;
    let outputs = sources
        .iter()
        .map(|&(side, i)| match side {
            Side::Left => select_left.iter().position(|&x| x == i).expect("selected"),
            Side::Right => select_left.len() + select_right.iter().position(|&x| x == i).expect("selected"),
        })
        .collect();

    let cols = |keys: &mut dyn Iterator<Item = usize>, refs: &[usize], sel: &[usize]| {
        let mut v: Vec<usize> = keys.chain(refs.iter().copied()).chain(sel.iter().copied()).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    // The explicit clustered algorithms gather inside the join: on the device.
    let clustered = matches!(config.algorithm, Algorithm::SortMerge(Gather::Clustered) | Algorithm::PartitionedHash(Gather::Clustered));
    let gather = if clustered { OutputGather::Device } else { config.gather };
    let side_cols = |keys: &mut dyn Iterator<Item = usize>, refs: &[usize], sel: &[usize]| match gather {
        OutputGather::Device => cols(keys, refs, sel),
        OutputGather::Host => {
            let joined = cols(keys, refs, &[]);
            if joined.is_empty() {
                cols(&mut std::iter::empty(), &[], sel)
            } else {
                joined
            }
        }
    };
    let left_cols = side_cols(&mut keys.iter().map(|k| k.0), &refs[0], &select_left);
    let right_cols = side_cols(&mut keys.iter().map(|k| k.1), &refs[1], &select_right);
    // A device table without columns has no rows: a side the join neither keys on, filters on
    // nor outputs (a cross join counted, say) would lose its rows.
    for (cols, side) in [(&left_cols, "left"), (&right_cols, "right")] {
        if cols.is_empty() {
            return refuse(format!("no column of the {side} input is used (gpujoin's tables carry their rows in their columns)"));
        }
    }
    let predicate = predicate.map(|p| {
        p.map_columns(&|side, i| {
            let cols = if side == Side::Left { &left_cols } else { &right_cols };
            cols.iter().position(|&c| c == i).expect("uploaded")
        })
    });
    Ok(JoinPlan { df_join_type, join_type: jt, null_equality, left_cols, right_cols, keys, predicate, select_left, select_right, outputs, sources, gather })
}

fn side_index(s: Side) -> usize {
    match s {
        Side::Left => 0,
        Side::Right => 1,
    }
}

/// A `JoinFilter` as gpujoin's predicate over the input schemas' column indices: comparisons
/// (`=`, `<>`, `<`, `<=`, `>`, `>=`) of columns and literals of one type, combined with AND, OR
/// and NOT, over nullable columns too (SQL's three-valued logic), no `Decimal128` columns,
/// floats only with
/// [`GpuJoinConfig::allow_float_semantics`].
pub fn filter_predicate(filter: &JoinFilter, left: &Schema, right: &Schema, config: &GpuJoinConfig) -> Result<Predicate, Refusal> {
    let cx = FilterContext { filter, left, right, config };
    // Nullable columns under OR / NOT: gpujoin evaluates SQL's three-valued logic for any shape
    // (a pair passes where the filter is TRUE, as DataFusion's join filters do).
    let p = cx.predicate(filter.expression())?;
    Ok(p)
}

struct FilterContext<'a> {
    filter: &'a JoinFilter,
    left: &'a Schema,
    right: &'a Schema,
    config: &'a GpuJoinConfig,
}

enum Operand {
    Column { side: Side, index: usize, data_type: ArrowType, name: String },
    Literal(ScalarValue),
}

impl FilterContext<'_> {
    fn predicate(&self, e: &Arc<dyn PhysicalExpr>) -> Result<Predicate, Refusal> {
        if let Some(b) = e.downcast_ref::<BinaryExpr>() {
            let op = match b.op() {
                Operator::And => return Ok(Predicate::And(vec![self.predicate(b.left())?, self.predicate(b.right())?])),
                Operator::Or => return Ok(Predicate::Or(vec![self.predicate(b.left())?, self.predicate(b.right())?])),
                Operator::Eq => CmpOp::Eq,
                Operator::NotEq => CmpOp::Ne,
                Operator::Lt => CmpOp::Lt,
                Operator::LtEq => CmpOp::Le,
                Operator::Gt => CmpOp::Gt,
                Operator::GtEq => CmpOp::Ge,
                op => return refuse(format!("filter {}: operator {op} (gpujoin filters compare with =, <>, <, <=, >, >= and combine with AND, OR, NOT)", self.filter.expression())),
            };
            return self.comparison(op, b.left(), b.right());
        }
        if let Some(n) = e.downcast_ref::<NotExpr>() {
            return Ok(!self.predicate(n.arg())?);
        }
        refuse(format!("filter {}: the part {e} is not a comparison of columns and literals", self.filter.expression()))
    }

    fn operand(&self, e: &Arc<dyn PhysicalExpr>) -> Result<Operand, Refusal> {
        if let Some(c) = e.downcast_ref::<Column>() {
            let Some(ci) = self.filter.column_indices().get(c.index()) else {
                return refuse(format!("filter column {c} is not in the filter's schema"));
            };
            let (side, schema) = match ci.side {
                JoinSide::Left => (Side::Left, self.left),
                JoinSide::Right => (Side::Right, self.right),
                JoinSide::None => return refuse(format!("filter column {c} belongs to neither input")),
            };
            let Some(f) = schema.fields().get(ci.index) else {
                return refuse(format!("filter column {c} refers to input column {} of {}", ci.index, schema.fields().len()));
            };
            return Ok(Operand::Column { side, index: ci.index, data_type: f.data_type().clone(), name: f.name().clone() });
        }
        if let Some(l) = e.downcast_ref::<Literal>() {
            return Ok(Operand::Literal(l.value().clone()));
        }
        refuse(format!("filter {}: the operand {e} is neither a column nor a literal (casts and arithmetic stay on the CPU for now)", self.filter.expression()))
    }

    /// The predicate type of a column, or why filters cannot compare it.
    fn column_type(&self, name: &str, t: &ArrowType) -> Result<P, Refusal> {
        // The column's device type (as uploaded), compared as its kernel type: narrow integers
        // and dates as Int32, booleans as UInt32, every string type as LargeUtf8.
        let p = match gpujoin_arrow::device_type(name, t).map(|d| (d, d.kernel_type())) {
            Ok((_, Some(p))) => p,
            Ok((_, None)) => return refuse(format!("filter on the Decimal128 column {name}: gpujoin's filters do not compare decimals yet")),
            Err(_) => return refuse(format!("filter on the column {name} of type {t}: gpujoin's filters compare integers, floats, booleans, dates, timestamps and strings")),
        };
        if matches!(p, P::Float32 | P::Float64) && !self.config.allow_float_semantics {
            return refuse(format!(
                "filter on the float column {name}: DataFusion orders floats totally (NaN above all, -0.0 < 0.0), gpujoin as IEEE; set GpuJoinConfig::allow_float_semantics to move it"
            ));
        }
        Ok(p)
    }

    fn comparison(&self, op: CmpOp, a: &Arc<dyn PhysicalExpr>, b: &Arc<dyn PhysicalExpr>) -> Result<Predicate, Refusal> {
        let (x, y) = (self.operand(a)?, self.operand(b)?);
        let (l, r) = match (x, y) {
            (Operand::Column { side: s1, index: i1, data_type: t1, name: n1 }, Operand::Column { side: s2, index: i2, data_type: t2, name: n2 }) => {
                let (p1, p2) = (self.column_type(&n1, &t1)?, self.column_type(&n2, &t2)?);
                let same = value_type(&t1) == value_type(&t2) || (is_string(&t1) && is_string(&t2));
                if p1 != p2 || !same {
                    return refuse(format!("filter compares {n1} ({t1}) with {n2} ({t2}): gpujoin compares columns of one type"));
                }
                (Expr::Column { side: s1, index: i1 }, Expr::Column { side: s2, index: i2 })
            }
            (Operand::Column { side, index, data_type, name }, Operand::Literal(v)) => {
                let s = self.scalar(&name, &data_type, &v)?;
                (Expr::Column { side, index }, Expr::Literal(s))
            }
            (Operand::Literal(v), Operand::Column { side, index, data_type, name }) => {
                let s = self.scalar(&name, &data_type, &v)?;
                (Expr::Literal(s), Expr::Column { side, index })
            }
            (Operand::Literal(_), Operand::Literal(_)) => return refuse(format!("filter {}: a comparison of two literals", self.filter.expression())),
        };
        Ok(Predicate::cmp(op, l, r))
    }

    /// A literal compared with column `name` of type `t`, as a scalar of the column's predicate
    /// type (the literal must have the column's type, as DataFusion's coercion makes it).
    fn scalar(&self, name: &str, t: &ArrowType, v: &ScalarValue) -> Result<Scalar, Refusal> {
        let p = self.column_type(name, t)?;
        let v = match v {
            ScalarValue::Dictionary(_, inner) => inner.as_ref(),
            v => v,
        };
        if v.is_null() {
            return refuse(format!("filter compares {name} with NULL"));
        }
        let vt = v.data_type();
        if !(vt == *value_type(t) || (is_string(&vt) && is_string(t))) {
            return refuse(format!("filter compares {name} ({t}) with a literal of type {vt}"));
        }
        let int: Option<i128> = match v {
            ScalarValue::Int8(Some(x)) => Some((*x).into()),
            ScalarValue::Int16(Some(x)) => Some((*x).into()),
            ScalarValue::Int32(Some(x)) | ScalarValue::Date32(Some(x)) => Some((*x).into()),
            ScalarValue::Int64(Some(x))
            | ScalarValue::Date64(Some(x))
            | ScalarValue::TimestampSecond(Some(x), _)
            | ScalarValue::TimestampMillisecond(Some(x), _)
            | ScalarValue::TimestampMicrosecond(Some(x), _)
            | ScalarValue::TimestampNanosecond(Some(x), _) => Some((*x).into()),
            ScalarValue::UInt8(Some(x)) => Some((*x).into()),
            ScalarValue::UInt16(Some(x)) => Some((*x).into()),
            ScalarValue::UInt32(Some(x)) => Some((*x).into()),
            ScalarValue::UInt64(Some(x)) => Some((*x).into()),
            ScalarValue::Boolean(Some(b)) => Some((*b).into()),
            _ => None,
        };
        let out_of_range = || Refusal(format!("filter literal {v} does not fit the column {name}"));
        Ok(match (p, int, v) {
            (P::Int32, Some(i), _) => Scalar::I32(i32::try_from(i).map_err(|_| out_of_range())?),
            (P::Int64, Some(i), _) => Scalar::I64(i64::try_from(i).map_err(|_| out_of_range())?),
            (P::UInt32, Some(i), _) => Scalar::U32(u32::try_from(i).map_err(|_| out_of_range())?),
            (P::UInt64, Some(i), _) => Scalar::U64(u64::try_from(i).map_err(|_| out_of_range())?),
            (P::Float32, _, ScalarValue::Float32(Some(x))) => Scalar::F32(*x),
            (P::Float64, _, ScalarValue::Float64(Some(x))) => Scalar::F64(*x),
            (P::LargeUtf8, _, ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s))) => Scalar::Utf8(s.clone()),
            _ => return refuse(format!("filter compares {name} ({t}) with the literal {v}, which gpujoin cannot express")),
        })
    }
}


