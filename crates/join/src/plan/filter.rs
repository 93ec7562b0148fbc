//! Filters at the front door: the typed predicate tree of [`crate::predicate`] over the columns of
//! the two tables (`col_l(i)` / `col_r(i)`: column `i` of the left / right table, or by name via
//! [`super::Join::left`] / [`super::Join::right`]), lowered to the theta joins' device relations.
//!
//! Only the referenced columns are lowered: `Int8`/`Int16` are widened to `I32`,
//! `UInt8`/`UInt16`/`Boolean` to `U32`, dates and timestamps keep their `i32`/`i64` layout,
//! strings become large strings. Literals compare with the lowered type (`lit(5i32)` for an
//! `Int8` or `Date32` column). A conjunction of comparisons may refer to nullable columns: each
//! such column adds the conjunct "its row is valid" (SQL: a comparison with NULL is not true); a
//! predicate with OR or NOT on nullable columns, and `Decimal128` columns, are not supported yet
//! ([`Error::Unsupported`]).

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};

use crate::device_relation::{DeviceColumnData as D, DeviceRelation};
use crate::predicate::{CheckedPredicate, Expr, Predicate, Side};
use crate::table::{ColumnView, DataType, TableView};

/// The two device relations of a filter and the predicate over their columns.
pub(crate) struct Lowered {
    pub left: DeviceRelation,
    pub right: DeviceRelation,
    pub pred: CheckedPredicate,
    /// Relation column of each table column that was lowered (`None`: not referenced).
    pub left_index: Vec<Option<usize>>,
    pub right_index: Vec<Option<usize>>,
}


fn copy<T: gpujoin_device::Pod>(stream: &Stream, v: &ColumnView<'_>) -> Result<DeviceBuffer<T>> {
    let src = v.typed::<T>().ok_or_else(|| Error::invalid(format!("a {} column whose values are misaligned", v.data_type())))?;
    stream.copy_from_device(&src)
}

/// The predicate type a column of `t` is lowered to (`Decimal128`, which filters refuse, reads
/// as `U64` so that a predicate not referring to it still type-checks).
pub(crate) fn lowered_type(t: DataType) -> crate::predicate::DataType {
    use crate::predicate::DataType as P;
    use DataType::*;
    match t {
        Int8 | Int16 | Int32 | Date32 => P::I32,
        Int64 | Date64 | Timestamp(_) => P::I64,
        UInt8 | UInt16 | UInt32 | Boolean => P::U32,
        UInt64 | Decimal128(..) => P::U64,
        Float32 => P::F32,
        Float64 => P::F64,
        Utf8 | LargeUtf8 => P::Utf8,
    }
}

/// Whether the predicate is a conjunction of comparisons (no OR, no NOT): then a comparison with
/// a NULL operand, which SQL calls unknown, makes the whole predicate not true, and nullable
/// columns can be filtered on by also requiring their rows to be valid.
pub(crate) fn conjunctive(p: &Predicate) -> bool {
    match p {
        Predicate::Cmp { .. } | Predicate::True => true,
        Predicate::And(v) => v.iter().all(conjunctive),
        Predicate::Or(_) | Predicate::Not(_) => false,
    }
}

/// One table column as a column of a device relation (a copy, offset 0): the values of every
/// row, null rows included (whatever their slots hold; the caller handles the validity).
pub(crate) fn column_values(stream: &Stream, name: &str, v: &ColumnView<'_>) -> Result<D> {
    use DataType::*;
    Ok(match v.data_type() {
        Int32 | Date32 => D::I32(copy(stream, v)?),
        Int64 | Date64 | Timestamp(_) => D::I64(copy(stream, v)?),
        UInt32 => D::U32(copy(stream, v)?),
        UInt64 => D::U64(copy(stream, v)?),
        Float32 => D::F32(copy(stream, v)?),
        Float64 => D::F64(copy(stream, v)?),
        Int8 | Int16 => D::I32(crate::kernels::table::widen(stream, v)?.cast()),
        UInt8 | UInt16 | Boolean => D::U32(crate::kernels::table::widen(stream, v)?),
        Utf8 | LargeUtf8 => {
            let rows = crate::common::iota(stream, v.len())?;
            let c = crate::kernels::table::gather_as(stream, v, &rows.view(), false, LargeUtf8)?;
            let (bytes, offsets, _) = c.into_buffers();
            let offsets = offsets.expect("strings have offsets").into_typed::<i64>().map_err(|_| Error::invalid("internal: string offsets"))?;
            D::Utf8 { offsets, bytes }
        }
        Decimal128(..) => return Err(Error::Unsupported { what: format!("a filter on column {name}"), reason: "Decimal128 columns cannot be compared by filters yet".into() }),
    })
}

/// Lowers `pred` (over table columns) and, beside it, the `extra` table columns of each side
/// (aggregated columns): relations of the referenced columns, in order of first reference.
pub(crate) fn lower(stream: &Stream, pred: &Predicate, left: &TableView<'_>, right: &TableView<'_>, extra: &[(Side, usize)]) -> Result<Lowered> {
    let mut refs: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    let mut bad = None;
    let mut note = |side: Side, index: usize| {
        let (i, t) = match side {
            Side::Left => (0, left),
            Side::Right => (1, right),
        };
        if index >= t.columns().len() {
            bad.get_or_insert(format!("the filter refers to {side:?} column {index}; the table has {}", t.columns().len()));
        } else if !refs[i].contains(&index) {
            refs[i].push(index);
        }
    };
    pred.for_each_column(&mut note);
    extra.iter().for_each(|&(s, i)| note(s, i));
    if let Some(b) = bad {
        return Err(Error::invalid(b));
    }
    // Nullable columns: their values, and after all referenced columns a `u32` column that is 1
    // where the row is valid, required by the predicate (only for conjunctions: see
    // `conjunctive`).
    let nullable = |t: &TableView<'_>, cols: &[usize]| cols.iter().any(|&c| t.columns()[c].validity().is_some());
    if (nullable(left, &refs[0]) || nullable(right, &refs[1])) && !conjunctive(pred) {
        return Err(Error::Unsupported {
            what: "a filter with OR or NOT on nullable columns".into(),
            reason: "SQL's three-valued logic is evaluated for conjunctions of comparisons only so far".into(),
        });
    }
    let build = |t: &TableView<'_>, cols: &[usize]| -> Result<(DeviceRelation, Vec<usize>)> {
        let mut out = Vec::new();
        let mut flags = Vec::new();
        for &c in cols {
            out.push(column_values(stream, &t.names()[c], &t.columns()[c])?);
        }
        for &c in cols {
            let v = t.columns()[c];
            if let Some(bits) = v.validity() {
                let as_bools = ColumnView::new(DataType::Boolean, v.len(), v.offset(), bits, None, None)?;
                flags.push(out.len());
                out.push(D::U32(crate::kernels::table::widen(stream, &as_bools)?));
            }
        }
        if out.is_empty() {
            // A side the predicate does not look at still has its rows.
            out.push(D::U32(stream.alloc_zeroed::<u32>(t.rows())?));
        }
        Ok((DeviceRelation::from_columns(out)?, flags))
    };
    let ((l, lflags), (r, rflags)) = (build(left, &refs[0])?, build(right, &refs[1])?);
    let index = |cols: &[usize], n: usize| -> Vec<Option<usize>> { (0..n).map(|c| cols.iter().position(|&x| x == c)).collect() };
    let (li, ri) = (index(&refs[0], left.columns().len()), index(&refs[1], right.columns().len()));
    let m = |side: Side, i: usize| match side {
        Side::Left => li[i].expect("referenced"),
        Side::Right => ri[i].expect("referenced"),
    };
    let mut pred = pred.map_columns(&m);
    for (side, flags) in [(Side::Left, &lflags), (Side::Right, &rflags)] {
        for &f in flags {
            pred = pred.and(Expr::Column { side, index: f }.equals(crate::predicate::lit(1u32)));
        }
    }
    let pred = pred.check(&l.schema(), &r.schema())?;
    Ok(Lowered { left: l, right: r, pred, left_index: li, right_index: ri })
}
