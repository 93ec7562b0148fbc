//! Filters at the front door: the typed predicate tree of [`crate::predicate`] over the columns of
//! the two tables (`col_l(i)` / `col_r(i)`: column `i` of the left / right table, or by name via
//! [`super::Join::left`] / [`super::Join::right`]), lowered to the theta joins' device relations.
//!
//! Only the referenced columns are lowered: `Int8`/`Int16` are widened to `I32`,
//! `UInt8`/`UInt16`/`Boolean` to `U32`, dates and timestamps keep their `i32`/`i64` layout,
//! strings become large strings. Literals compare with the lowered type (`lit(5i32)` for an
//! `Int8` or `Date32` column).
//!
//! # Decimals
//!
//! A `Decimal128` column is lowered as two columns, its high word (`i64`, signed) and its low
//! word (`u64`), and a comparison of two `Decimal128` values becomes the lexicographic
//! comparison of the words ([`decimal_comparison`]): `l.d < r.d` is `l.d_hi < r.d_hi OR (l.d_hi
//! = r.d_hi AND l.d_lo < r.d_lo)`. A `Decimal128` compares with a `Decimal128` column of the
//! same scale or with an integer literal, read as the unscaled value (`lit(12345i64)` is
//! `1.2345` at scale 4, as the host model's `Value::Int` reads decimals); another scale, another
//! type, a float or string literal, and `+`/`-` on decimals are [`Error::Unsupported`], naming the
//! column.
//!
//! # NULLs: SQL's three-valued logic, evaluated two-valued
//!
//! A comparison with a NULL operand is unknown, and a filter keeps a pair only where the
//! predicate is true. The device evaluates two-valued logic, so the lowering rewrites the
//! predicate `P` into `T(P)`, "P is true": every nullable column referenced gets a `u32` flag
//! column (1 where the row is valid), and for a comparison `c` over columns with flags
//! `v1..vk`, and any predicates `A`, `B`:
//!
//! | | `T` (is true) | `F` (is false) |
//! |---|---|---|
//! | `c` | `v1 = 1 ∧ .. ∧ vk = 1 ∧ c` | `v1 = 1 ∧ .. ∧ vk = 1 ∧ NOT c` |
//! | `A ∧ B` | `T(A) ∧ T(B)` | `F(A) ∨ F(B)` |
//! | `A ∨ B` | `T(A) ∨ T(B)` | `F(A) ∧ F(B)` |
//! | `NOT A` | `F(A)` | `T(A)` |
//!
//! `NOT c` is the device's two-valued negation, so a NaN operand keeps IEEE's answers (as the
//! CPU reference's: `NOT (NaN < 1)` is true). A part of the predicate over columns without
//! nulls is kept as it is. Example: with `l.n` nullable, `NOT (l.n < r.a OR l.b = 1)` lowers to
//! `l.n_valid = 1 ∧ NOT (l.n < r.a) ∧ NOT (l.b = 1)`; a left row whose `n` is NULL passes
//! nothing, not even `NOT (...)`.
//!
//! # Keys of theta joins
//!
//! A theta join's key pairs ([`super::Join::on`] with a theta algorithm or none) are equality
//! conjuncts `l = r`, lowered under the join's options: `T(l = r)` as above; with
//! [`NanEquality::NanEqualsNan`] on float keys, `(l = r) ∨ (l <> l ∧ r <> r)` (IEEE: `x <> x`
//! exactly when `x` is NaN, and `-0.0 = 0.0`); with [`NullEquality::NullEqualsNull`] and both
//! key columns nullable, `T(l = r) ∨ (l_valid = 0 ∧ r_valid = 0)`.

use gpujoin_device::{DeviceBuffer, Error, Pod, Result, Stream};

use crate::device_relation::{in_place_type, OwnedRelation, Source};
use crate::predicate::{col_l, col_r, lit, CheckedPredicate, CmpOp, Expr, Predicate, Scalar, Side};
use crate::types::{JoinOptions, NanEquality, NullEquality};
use crate::table::{Column, ColumnView, DataType, NativeValue, TableView};

/// The two device relations of a filter and the predicate over their columns.
pub(crate) struct Lowered<'t> {
    pub left: OwnedRelation<'t>,
    pub right: OwnedRelation<'t>,
    pub pred: CheckedPredicate,
    /// Relation column of each table column that was lowered (`None`: not referenced).
    pub left_index: Vec<Option<usize>>,
    pub right_index: Vec<Option<usize>>,
}


/// A column made on the device for a relation (of the type its values stand for).
fn owned<T: NativeValue + Pod>(b: DeviceBuffer<T>) -> Source<'static> {
    Source::Owned(Column::from_device_values(b))
}

/// The predicate type a column of `t` is lowered to ([`DataType::kernel_type`]; `Decimal128`,
/// which filters refuse, reads as `UInt64` so that a predicate not referring to it still
/// type-checks).
pub(crate) fn lowered_type(t: DataType) -> DataType {
    t.kernel_type().unwrap_or(DataType::UInt64)
}

/// One table column as a column of a device relation: read in place where its type is one the
/// kernels read ([`in_place_type`]: every 32- and 64-bit number, date and timestamp, `LargeUtf8`),
/// converted otherwise ([`converted`]). The values of every row, null rows included (whatever
/// their slots hold; the caller handles the validity).
pub(crate) fn column_values<'t>(stream: &Stream, name: &str, v: &ColumnView<'t>) -> Result<Source<'t>> {
    Ok(match converted(stream, name, v)? {
        Some(c) => Source::Owned(c),
        None => Source::InPlace(*v),
    })
}

/// A column of a type the kernels do not read, converted to one they do: narrow integers and
/// booleans widened to 32 bits, `Utf8` to `LargeUtf8`; `None` for a column of a
/// [`in_place_type`] (read as it is); `Decimal128` is an [`Error::Unsupported`].
pub(crate) fn converted(stream: &Stream, name: &str, v: &ColumnView<'_>) -> Result<Option<Column>> {
    use DataType::*;
    if in_place_type(v.data_type()).is_some() {
        return Ok(None);
    }
    Ok(Some(match v.data_type() {
        Int8 | Int16 => Column::from_device_values(crate::kernels::table::widen(stream, v)?.cast::<i32>()),
        UInt8 | UInt16 | Boolean => Column::from_device_values(crate::kernels::table::widen(stream, v)?),
        Utf8 => {
            let rows = crate::common::iota(stream, v.len())?;
            let c = crate::kernels::table::gather_as(stream, v, &rows.view(), false, LargeUtf8)?;
            let (bytes, offsets, _) = c.into_buffers();
            Column::from_buffers(LargeUtf8, v.len(), bytes, offsets, None)?
        }
        Decimal128(..) => return Err(Error::Unsupported { what: format!("a filter on column {name}"), reason: "Decimal128 columns cannot be compared by filters yet".into() }),
        t => return Err(Error::invalid(format!("internal: a {t} column has a kernel type"))),
    }))
}

/// The lowering decided without device work: which table columns become relation columns, which
/// of them get a validity flag column, and the two-valued predicate over the relation columns.
/// Relation columns: the referenced table columns in order of first reference (keys first), then
/// one `u32` flag column for each nullable one among them.
pub(crate) struct Plan {
    refs: [Vec<usize>; 2],
    flagged: [Vec<usize>; 2],
    pred: CheckedPredicate,
}

impl Plan {
    /// The lowered predicate (over the relation columns), type-checked.
    pub(crate) fn predicate(&self) -> &CheckedPredicate {
        &self.pred
    }

    /// Whether any referenced column is nullable (its flag conjuncts take the sorted theta path
    /// away).
    pub(crate) fn has_flags(&self) -> bool {
        self.flagged.iter().any(|f| !f.is_empty())
    }
}

/// Plans the lowering of `keys` (pairs of left and right table columns that must be equal under
/// `options`' NULL and NaN equality) and `pred` (over table columns) and, beside them, the
/// `extra` table columns of each side (aggregated columns). No device work. Errors: a column
/// index outside its table, a `Decimal128` comparison the lowering cannot take
/// ([`Error::Unsupported`], naming the column: see [`decimal_comparison`]), a predicate that does
/// not type-check against the lowered types.
pub(crate) fn plan(pred: &Predicate, keys: &[(usize, usize)], options: JoinOptions, left: &TableView<'_>, right: &TableView<'_>, extra: &[(Side, usize)]) -> Result<Plan> {
    let tables = [left, right];
    // Every column reference: the keys', the predicate's, then the extra columns.
    let mut seen: Vec<(Side, usize)> = keys.iter().flat_map(|&(l, r)| [(Side::Left, l), (Side::Right, r)]).collect();
    pred.for_each_column(&mut |side, index| seen.push((side, index)));
    let compared = seen.len();
    seen.extend_from_slice(extra);
    let mut refs: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for &(side, index) in &seen {
        let (s, t) = (side_index(side), tables[side_index(side)]);
        if index >= t.columns().len() {
            return Err(Error::invalid(format!("the filter refers to {side:?} column {index}; the table has {}", t.columns().len())));
        }
        if !refs[s].contains(&index) {
            refs[s].push(index);
        }
    }
    let mut used: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for &(side, index) in &seen[..compared] {
        let s = side_index(side);
        if !used[s].contains(&index) {
            used[s].push(index);
        }
    }
    // Flags only for the nullable columns the keys and the predicate look at (aggregated extra
    // columns skip their nulls themselves).
    for (s, u) in used.iter_mut().enumerate() {
        u.retain(|&c| tables[s].columns()[c].validity().is_some());
    }
    let flagged = used;
    // Relation columns: each referenced table column in order (a `Decimal128` as two, its high
    // `i64` and low `u64` words), then the flags.
    let is_decimal = |s: usize, c: usize| matches!(tables[s].columns()[c].data_type(), DataType::Decimal128(..));
    let starts: [Vec<usize>; 2] = std::array::from_fn(|s| refs[s].iter().scan(0, |next, &c| Some(std::mem::replace(next, *next + 1 + is_decimal(s, c) as usize))).collect());
    let value_columns: [usize; 2] = std::array::from_fn(|s| refs[s].iter().map(|&c| 1 + is_decimal(s, c) as usize).sum());
    let position = |s: usize, c: usize| starts[s][refs[s].iter().position(|&x| x == c).expect("referenced")];
    let flag_of: [Vec<Option<usize>>; 2] = std::array::from_fn(|s| {
        let mut v = Vec::new();
        for &c in &refs[s] {
            let flag = flagged[s].iter().position(|&x| x == c).map(|f| value_columns[s] + f);
            v.extend(std::iter::repeat_n(flag, 1 + is_decimal(s, c) as usize));
        }
        v
    });
    let schemas: [Vec<DataType>; 2] = std::array::from_fn(|s| {
        use DataType as P;
        let mut v = Vec::new();
        for &c in &refs[s] {
            match tables[s].columns()[c].data_type() {
                DataType::Decimal128(..) => v.extend([P::Int64, P::UInt64]),
                t => v.push(lowered_type(t)),
            }
        }
        v.extend(flagged[s].iter().map(|_| P::UInt32));
        if v.is_empty() {
            // `lower` gives a side the predicate does not look at one column of zeros (it
            // still has its rows): the schema the predicate is checked against has it too.
            v.push(P::UInt32);
        }
        v
    });
    let columns = RelationColumns { tables, position: &position };
    let mapped = columns.map(pred)?;
    let logic = ThreeValued { flag_of: &flag_of };
    let mut parts = Vec::new();
    for &(l, r) in keys {
        let (lc, rc) = (position(0, l), position(1, r));
        let words = if is_decimal(0, l) { 2 } else { 1 };
        let float = schemas[0][lc].is_float();
        parts.push(logic.key_equality(&(lc..lc + words).collect::<Vec<_>>(), &(rc..rc + words).collect::<Vec<_>>(), float && options.nan_equality == NanEquality::NanEqualsNan, options.null_equality == NullEquality::NullEqualsNull));
    }
    parts.push(logic.is_true(&mapped));
    let pred = all(parts).check(&schemas[0], &schemas[1])?;
    Ok(Plan { refs, flagged, pred })
}

fn side_index(side: Side) -> usize {
    match side {
        Side::Left => 0,
        Side::Right => 1,
    }
}

/// `AND` of `parts`, flattening nested `AND`s, dropping `TRUE` and repeated conjuncts (`TRUE`
/// for none, the part itself for one).
fn all(parts: Vec<Predicate>) -> Predicate {
    let mut out: Vec<Predicate> = Vec::new();
    for p in parts {
        let items = match p {
            Predicate::And(v) => v,
            p => vec![p],
        };
        for q in items {
            if q != Predicate::True && !out.contains(&q) {
                out.push(q);
            }
        }
    }
    match out.len() {
        0 => Predicate::True,
        1 => out.pop().expect("one"),
        _ => Predicate::And(out),
    }
}

/// `OR` of `parts`, flattening nested `OR`s (the part itself for one).
fn any(parts: Vec<Predicate>) -> Predicate {
    let mut out: Vec<Predicate> = Vec::new();
    for p in parts {
        match p {
            Predicate::Or(v) => out.extend(v),
            p => out.push(p),
        }
    }
    match out.len() {
        1 => out.pop().expect("one"),
        _ => Predicate::Or(out),
    }
}

/// SQL's three-valued logic rewritten to two-valued predicates over relation columns (see the
/// module docs): `flag_of[side][c]` is the relation column of column `c`'s validity flag.
struct ThreeValued<'f> {
    flag_of: &'f [Vec<Option<usize>>; 2],
}

impl ThreeValued<'_> {
    fn flag(&self, side: Side, c: usize) -> Option<usize> {
        self.flag_of[side_index(side)].get(c).copied().flatten()
    }

    /// `flag = 1` for every nullable column `p` refers to (each once, in order).
    fn valid(&self, p: &Predicate) -> Vec<Predicate> {
        let mut out = Vec::new();
        p.for_each_column(&mut |side, c| {
            if let Some(f) = self.flag(side, c) {
                let v = Expr::Column { side, index: f }.equals(lit(1u32));
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        });
        out
    }

    /// `T(p)`: `p` is true (not false, not unknown).
    fn is_true(&self, p: &Predicate) -> Predicate {
        if self.valid(p).is_empty() {
            return p.clone();
        }
        match p {
            Predicate::Cmp { .. } => all(self.valid(p).into_iter().chain([p.clone()]).collect()),
            Predicate::And(v) => all(v.iter().map(|q| self.is_true(q)).collect()),
            Predicate::Or(v) => any(v.iter().map(|q| self.is_true(q)).collect()),
            Predicate::Not(q) => self.is_false(q),
            Predicate::True => Predicate::True,
        }
    }

    /// `F(p)`: `p` is false (not true, not unknown).
    fn is_false(&self, p: &Predicate) -> Predicate {
        if self.valid(p).is_empty() {
            return !p.clone();
        }
        match p {
            Predicate::Cmp { .. } => all(self.valid(p).into_iter().chain([!p.clone()]).collect()),
            Predicate::And(v) => any(v.iter().map(|q| self.is_false(q)).collect()),
            Predicate::Or(v) => all(v.iter().map(|q| self.is_false(q)).collect()),
            Predicate::Not(q) => self.is_true(q),
            Predicate::True => Predicate::Or(Vec::new()),
        }
    }

    /// The left relation columns `l` (one key: one column, or a decimal's two words) equal the
    /// right columns `r` as join keys: NaN equal to NaN where `nans_equal` (floats), NULL equal
    /// to NULL where `nulls_equal` (both keys nullable).
    fn key_equality(&self, l: &[usize], r: &[usize], nans_equal: bool, nulls_equal: bool) -> Predicate {
        let eq = all(l.iter().zip(r).map(|(&a, &b)| col_l(a).equals(col_r(b))).collect());
        let (l, r) = (l[0], r[0]);
        let valid = self.valid(&eq);
        let values = if nans_equal { any(vec![eq, col_l(l).not_equals(col_l(l)).and(col_r(r).not_equals(col_r(r)))]) } else { eq };
        let t = all(valid.into_iter().chain([values]).collect());
        match (nulls_equal, self.flag(Side::Left, l), self.flag(Side::Right, r)) {
            (true, Some(fl), Some(fr)) => any(vec![t, col_l(fl).equals(lit(0u32)).and(col_r(fr).equals(lit(0u32)))]),
            _ => t,
        }
    }
}

/// Table columns to relation columns: plain columns by position, comparisons involving
/// `Decimal128` columns rewritten over their two words ([`decimal_comparison`]).
struct RelationColumns<'t, 'v, F: Fn(usize, usize) -> usize> {
    tables: [&'t TableView<'v>; 2],
    position: &'t F,
}

impl<F: Fn(usize, usize) -> usize> RelationColumns<'_, '_, F> {
    fn decimal_scale(&self, side: Side, c: usize) -> Option<i8> {
        match self.tables[side_index(side)].columns()[c].data_type() {
            DataType::Decimal128(_, s) => Some(s),
            _ => None,
        }
    }

    fn name(&self, side: Side, c: usize) -> &str {
        &self.tables[side_index(side)].names()[c]
    }

    fn map(&self, p: &Predicate) -> Result<Predicate> {
        Ok(match p {
            Predicate::Cmp { op, left, right } => {
                let mut decimal = None;
                p.for_each_column(&mut |side, c| {
                    if self.decimal_scale(side, c).is_some() {
                        decimal.get_or_insert((side, c));
                    }
                });
                match decimal {
                    None => p.map_columns(&|side, c| (self.position)(side_index(side), c)),
                    Some(d) => decimal_comparison(*op, self.decimal_operand(left, d)?, self.decimal_operand(right, d)?).map_err(|reason| Error::Unsupported { what: format!("a filter comparing the Decimal128 column {}", self.name(d.0, d.1)), reason })?,
                }
            }
            Predicate::And(v) => Predicate::And(v.iter().map(|q| self.map(q)).collect::<Result<_>>()?),
            Predicate::Or(v) => Predicate::Or(v.iter().map(|q| self.map(q)).collect::<Result<_>>()?),
            Predicate::Not(q) => !self.map(q)?,
            Predicate::True => Predicate::True,
        })
    }

    /// An operand of a comparison with the Decimal128 column `d`.
    fn decimal_operand(&self, e: &Expr, d: (Side, usize)) -> Result<DecimalOperand> {
        let refuse = |reason: String| Error::Unsupported { what: format!("a filter comparing the Decimal128 column {}", self.name(d.0, d.1)), reason };
        match e {
            Expr::Column { side, index } => match self.decimal_scale(*side, *index) {
                Some(scale) => {
                    let hi = (self.position)(side_index(*side), *index);
                    Ok(DecimalOperand::Column { side: *side, hi, lo: hi + 1, scale })
                }
                None => Err(refuse(format!("it is compared with column {} of type {}; a Decimal128 compares with Decimal128 columns and integer literals only", self.name(*side, *index), self.tables[side_index(*side)].columns()[*index].data_type()))),
            },
            Expr::Literal(Scalar::I32(v)) => Ok(DecimalOperand::Unscaled(*v as i128)),
            Expr::Literal(Scalar::I64(v)) => Ok(DecimalOperand::Unscaled(*v as i128)),
            Expr::Literal(Scalar::U32(v)) => Ok(DecimalOperand::Unscaled(*v as i128)),
            Expr::Literal(Scalar::U64(v)) => Ok(DecimalOperand::Unscaled(*v as i128)),
            Expr::Literal(s) => Err(refuse(format!("it is compared with the literal {s:?}; a Decimal128 compares with integer literals (its unscaled value) only"))),
            Expr::Add(..) | Expr::Sub(..) => Err(refuse("it takes part in `+` or `-`; filters compare Decimal128 values without arithmetic".into())),
        }
    }
}

/// One side of a comparison of `Decimal128` values: a column (relation columns of its high and
/// low words) or an unscaled literal.
#[derive(Debug, Clone, Copy, PartialEq)]
enum DecimalOperand {
    Column { side: Side, hi: usize, lo: usize, scale: i8 },
    Unscaled(i128),
}

impl DecimalOperand {
    /// The high word (`i64`, signed) and the low word (`u64`) as expressions.
    fn words(self) -> (Expr, Expr) {
        match self {
            DecimalOperand::Column { side, hi, lo, .. } => (Expr::Column { side, index: hi }, Expr::Column { side, index: lo }),
            DecimalOperand::Unscaled(v) => (lit((v >> 64) as i64), lit(v as u64)),
        }
    }
}

/// `a op b` on `Decimal128` values as a two-valued predicate over their words: `i128` order is
/// the order of (high word signed, low word unsigned), so `a < b` is `a.hi < b.hi OR (a.hi =
/// b.hi AND a.lo < b.lo)`, `a = b` is `a.hi = b.hi AND a.lo = b.lo`, `a <> b` is `a.hi <> b.hi OR
/// a.lo <> b.lo`. An integer literal is an unscaled value (`12345` is `1.2345` at scale 4), as in
/// the host model's `Value::Int`. Two columns must have the same scale (`Err`: the reason).
fn decimal_comparison(op: CmpOp, a: DecimalOperand, b: DecimalOperand) -> std::result::Result<Predicate, String> {
    if let (DecimalOperand::Column { scale: x, .. }, DecimalOperand::Column { scale: y, .. }) = (a, b) {
        if x != y {
            return Err(format!("it is compared with a Decimal128 column of another scale ({x} and {y}); cast one side first"));
        }
    }
    let ((ah, al), (bh, bl)) = (a.words(), b.words());
    let high_eq = Predicate::cmp(CmpOp::Eq, ah.clone(), bh.clone());
    Ok(match op {
        CmpOp::Eq => high_eq.and(Predicate::cmp(CmpOp::Eq, al, bl)),
        CmpOp::Ne => Predicate::cmp(CmpOp::Ne, ah, bh).or(Predicate::cmp(CmpOp::Ne, al, bl)),
        CmpOp::Lt | CmpOp::Gt => Predicate::cmp(op, ah, bh).or(high_eq.and(Predicate::cmp(op, al, bl))),
        CmpOp::Le => Predicate::cmp(CmpOp::Lt, ah, bh).or(high_eq.and(Predicate::cmp(CmpOp::Le, al, bl))),
        CmpOp::Ge => Predicate::cmp(CmpOp::Gt, ah, bh).or(high_eq.and(Predicate::cmp(CmpOp::Ge, al, bl))),
    })
}

/// Lowers `keys` and `pred` as [`plan`] does, and builds the device relations.
pub(crate) fn lower<'t>(stream: &Stream, pred: &Predicate, keys: &[(usize, usize)], options: JoinOptions, left: &TableView<'t>, right: &TableView<'t>, extra: &[(Side, usize)]) -> Result<Lowered<'t>> {
    let plan = plan(pred, keys, options, left, right, extra)?;
    let build = |t: &TableView<'t>, cols: &[usize], flagged: &[usize]| -> Result<OwnedRelation<'t>> {
        let mut out = Vec::new();
        for &c in cols {
            let v = t.columns()[c];
            if let DataType::Decimal128(..) = v.data_type() {
                let (hi, lo) = crate::kernels::table::split_decimal(stream, &v)?;
                out.extend([owned(hi), owned(lo)]);
            } else {
                out.push(column_values(stream, &t.names()[c], &v)?);
            }
        }
        for &c in flagged {
            let v = t.columns()[c];
            let bits = v.validity().ok_or_else(|| Error::invalid("internal: a flagged column without validity"))?;
            let as_bools = ColumnView::new(DataType::Boolean, v.len(), v.offset(), bits, None, None)?;
            out.push(owned(crate::kernels::table::widen(stream, &as_bools)?));
        }
        if out.is_empty() {
            // A side the predicate does not look at still has its rows.
            out.push(owned(stream.alloc_zeroed::<u32>(t.rows())?));
        }
        OwnedRelation::new(out, t.rows())
    };
    let l = build(left, &plan.refs[0], &plan.flagged[0])?;
    let r = build(right, &plan.refs[1], &plan.flagged[1])?;
    // Relation column of each table column (a decimal's: its high word).
    let index = |t: &TableView<'_>, cols: &[usize]| -> Vec<Option<usize>> {
        let mut next = 0;
        let mut out = vec![None; t.columns().len()];
        for &c in cols {
            out[c] = Some(next);
            next += 1 + matches!(t.columns()[c].data_type(), DataType::Decimal128(..)) as usize;
        }
        out
    };
    let (li, ri) = (index(left, &plan.refs[0]), index(right, &plan.refs[1]));
    plan.pred.check_schemas(&crate::device_relation::relation_schema(&l.view())?, &crate::device_relation::relation_schema(&r.view())?)?;
    Ok(Lowered { left: l, right: r, pred: plan.pred, left_index: li, right_index: ri })
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)]
mod tests {
    use super::*;
    use crate::predicate::{CmpOp, DataType as P, Scalar};
    use crate::table::{HostColumn, HostTable};
    use proptest::prelude::*;
    use proptest::test_runner::{Config as ProptestConfig, RngSeed};

    // Each side: 0 nullable i32, 1 nullable f64 (NaN, -0.0), 2 nullable string, 3 i64 without
    // nulls; as a relation, the flags of 0, 1, 2 follow as columns 4, 5, 6.
    const TYPES: [P; 4] = [P::Int32, P::Float64, P::LargeUtf8, P::Int64];
    const SCHEMA: [P; 7] = [P::Int32, P::Float64, P::LargeUtf8, P::Int64, P::UInt32, P::UInt32, P::UInt32];
    const FLOATS: [f64; 6] = [f64::NAN, -0.0, 0.0, 1.5, -2.0, f64::INFINITY];
    const STRINGS: [&str; 4] = ["", "a", "é", "ab"];

    type Row = (Option<i32>, Option<usize>, Option<usize>, i64);

    /// SQL's three-valued value of `p` on the rows (`None`: unknown), written independently of
    /// the rewrite: a comparison touching a NULL is unknown, else its two-valued value.
    fn eval3(p: &Predicate, l: &HostTable, i: usize, r: &HostTable, j: usize) -> Option<bool> {
        match p {
            Predicate::True => Some(true),
            Predicate::Cmp { .. } => {
                let mut null = false;
                p.for_each_column(&mut |side, c| {
                    let (rel, row) = if side == Side::Left { (l, i) } else { (r, j) };
                    if c < 3 {
                        null |= rel.columns()[4 + c].value(row) == crate::table::Value::Int(0);
                    }
                });
                if null {
                    None
                } else {
                    Some(p.check(&SCHEMA, &SCHEMA).unwrap().evaluate(l, i, r, j))
                }
            }
            Predicate::Not(q) => eval3(q, l, i, r, j).map(|b| !b),
            Predicate::And(v) => {
                let vals: Vec<_> = v.iter().map(|q| eval3(q, l, i, r, j)).collect();
                if vals.contains(&Some(false)) { Some(false) } else if vals.contains(&None) { None } else { Some(true) }
            }
            Predicate::Or(v) => {
                let vals: Vec<_> = v.iter().map(|q| eval3(q, l, i, r, j)).collect();
                if vals.contains(&Some(true)) { Some(true) } else if vals.contains(&None) { None } else { Some(false) }
            }
        }
    }

    /// Key equality as the equi-joins define it, on the rows' own values.
    fn key_eq(c: usize, a: &Row, b: &Row, nulls: NullEquality, nans: NanEquality) -> bool {
        let both_null = nulls == NullEquality::NullEqualsNull;
        match c {
            0 => match (a.0, b.0) {
                (Some(x), Some(y)) => x == y,
                (None, None) => both_null,
                _ => false,
            },
            1 => match (a.1.map(|k| FLOATS[k]), b.1.map(|k| FLOATS[k])) {
                (Some(x), Some(y)) if x.is_nan() || y.is_nan() => x.is_nan() && y.is_nan() && nans == NanEquality::NanEqualsNan,
                (Some(x), Some(y)) => x == y,
                (None, None) => both_null,
                _ => false,
            },
            2 => match (a.2, b.2) {
                (Some(x), Some(y)) => STRINGS[x] == STRINGS[y],
                (None, None) => both_null,
                _ => false,
            },
            _ => a.3 == b.3,
        }
    }

    fn tables(rows: &[Row]) -> ((), HostTable) {
        let h = ();
        let flag = |v: Vec<bool>| HostColumn::from_values(v.into_iter().map(u32::from).collect::<Vec<u32>>());
        let rel = HostTable::new(vec![
            // Null slots hold values a valid row could hold too (the flags must decide).
            ("i", HostColumn::from_values(rows.iter().map(|r| r.0.unwrap_or(1)).collect::<Vec<i32>>())),
            ("f", HostColumn::from_values(rows.iter().map(|r| r.1.map_or(1.5, |k| FLOATS[k])).collect::<Vec<f64>>())),
            ("s", HostColumn::utf8(rows.iter().map(|r| r.2.map_or("a", |k| STRINGS[k])))),
            ("l", HostColumn::from_values(rows.iter().map(|r| r.3).collect::<Vec<i64>>())),
            ("fi", flag(rows.iter().map(|r| r.0.is_some()).collect())),
            ("ff", flag(rows.iter().map(|r| r.1.is_some()).collect())),
            ("fs", flag(rows.iter().map(|r| r.2.is_some()).collect())),
        ])
        .unwrap();
        (h, rel)
    }

    fn flags() -> [Vec<Option<usize>>; 2] {
        let f = vec![Some(4), Some(5), Some(6), None];
        [f.clone(), f]
    }

    fn arb_row() -> impl Strategy<Value = Row> {
        (prop::option::weighted(0.7, -2..3i32), prop::option::weighted(0.7, 0..FLOATS.len()), prop::option::weighted(0.7, 0..STRINGS.len()), -2..3i64)
    }

    fn arb_operand(t: usize) -> BoxedStrategy<Expr> {
        let lit = match TYPES[t] {
            P::Int32 => (-2..3i32).prop_map(|x| Expr::Literal(Scalar::I32(x))).boxed(),
            P::Float64 => (0..FLOATS.len()).prop_map(|k| Expr::Literal(Scalar::F64(FLOATS[k]))).boxed(),
            P::LargeUtf8 => (0..STRINGS.len()).prop_map(|k| Expr::Literal(Scalar::Utf8(STRINGS[k].into()))).boxed(),
            _ => (-2..3i64).prop_map(|x| Expr::Literal(Scalar::I64(x))).boxed(),
        };
        let leaf = prop_oneof![2 => Just(col_l(t)), 2 => Just(col_r(t)), 1 => lit];
        if TYPES[t] == P::LargeUtf8 {
            return leaf.boxed();
        }
        prop_oneof![3 => leaf.clone(), 1 => (leaf.clone(), leaf, proptest::bool::ANY).prop_map(|(a, b, add)| if add { a + b } else { a - b })].boxed()
    }

    fn arb_pred() -> impl Strategy<Value = Predicate> {
        let cmp = (0..TYPES.len(), 0..6usize).prop_flat_map(|(t, op)| (arb_operand(t), arb_operand(t)).prop_map(move |(a, b)| Predicate::cmp(CmpOp::ALL[op], a, b)));
        let leaf = prop_oneof![1 => Just(Predicate::True), 10 => cmp];
        leaf.prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Predicate::And),
                prop::collection::vec(inner.clone(), 0..4).prop_map(Predicate::Or),
                inner.prop_map(|p| !p),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 800, rng_seed: RngSeed::Fixed(0x3_7A1E), failure_persistence: None, ..ProptestConfig::default() })]

        /// `T(P)`, evaluated two-valued on the values and flags, is SQL's "P is true" (the CPU
        /// reference's three-valued evaluation) for every pair of rows.
        #[test]
        fn is_true_is_sql_three_valued_logic(l in prop::collection::vec(arb_row(), 1..6), r in prop::collection::vec(arb_row(), 1..6), p in arb_pred()) {
            let ((_, rl), (_, rr)) = (tables(&l), tables(&r));
            let f = flags();
            let logic = ThreeValued { flag_of: &f };
            let lowered = logic.is_true(&p).check(&SCHEMA, &SCHEMA).unwrap();
            for i in 0..l.len() {
                for j in 0..r.len() {
                    prop_assert_eq!(lowered.evaluate(&rl, i, &rr, j), eval3(&p, &rl, i, &rr, j) == Some(true), "{:?} -> {:?} rows {} {}", p, lowered.predicate(), i, j);
                }
            }
        }

        /// Key equalities under both NULL and NaN equalities are the reference's `key_eq`.
        #[test]
        fn key_equality_is_the_references(l in prop::collection::vec(arb_row(), 1..6), r in prop::collection::vec(arb_row(), 1..6)) {
            let ((_, rl), (_, rr)) = (tables(&l), tables(&r));
            let f = flags();
            let logic = ThreeValued { flag_of: &f };
            for c in 0..TYPES.len() {
                for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                    for nans in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
                        let p = logic.key_equality(&[c], &[c], TYPES[c].is_float() && nans == NanEquality::NanEqualsNan, nulls == NullEquality::NullEqualsNull);
                        let p = p.check(&SCHEMA, &SCHEMA).unwrap();
                        for i in 0..l.len() {
                            for j in 0..r.len() {
                                let want = key_eq(c, &l[i], &r[j], nulls, nans);
                                prop_assert_eq!(p.evaluate(&rl, i, &rr, j), want, "column {} {:?} {:?} rows {} {}", c, nulls, nans, i, j);
                            }
                        }
                    }
                }
            }
        }
    }

    const DECIMALS: [i128; 12] = [0, 1, -1, i128::MIN, i128::MAX, 1 << 64, (1 << 64) - 1, -(1 << 64), (1 << 64) + 1, -((1 << 64) + 1), i64::MIN as i128, u64::MAX as i128];

    fn decimal_relation(v: &[i128]) -> HostTable {
        HostTable::new(vec![("hi", HostColumn::from_values(v.iter().map(|&x| (x >> 64) as i64).collect::<Vec<i64>>())), ("lo", HostColumn::from_values(v.iter().map(|&x| x as u64).collect::<Vec<u64>>()))]).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, rng_seed: RngSeed::Fixed(0x00DE_C128), failure_persistence: None, ..ProptestConfig::default() })]

        /// The words' lexicographic comparison is the `i128` comparison, for columns and
        /// literals (extremes and values differing in one word only included).
        #[test]
        fn decimal_comparison_is_the_i128_order(l in prop::collection::vec(prop_oneof![(0..DECIMALS.len()).prop_map(|k| DECIMALS[k]), proptest::num::i128::ANY, (-3..3i128).prop_map(|x| x << 64 | 5)], 1..8),
                                                r in prop::collection::vec(prop_oneof![(0..DECIMALS.len()).prop_map(|k| DECIMALS[k]), proptest::num::i128::ANY, (-3..3i128).prop_map(|x| x << 64 | 5)], 1..8),
                                                literal in prop_oneof![proptest::num::i64::ANY.prop_map(i128::from), proptest::num::u64::ANY.prop_map(i128::from)]) {
            let (rl, rr) = (decimal_relation(&l), decimal_relation(&r));
            let schema = [P::Int64, P::UInt64];
            let col = |side| DecimalOperand::Column { side, hi: 0, lo: 1, scale: 2 };
            for op in CmpOp::ALL {
                let cols = decimal_comparison(op, col(Side::Left), col(Side::Right)).unwrap().check(&schema, &schema).unwrap();
                let with_literal = decimal_comparison(op, DecimalOperand::Unscaled(literal), col(Side::Right)).unwrap().check(&schema, &schema).unwrap();
                for (i, a) in l.iter().enumerate() {
                    for (j, b) in r.iter().enumerate() {
                        prop_assert_eq!(cols.evaluate(&rl, i, &rr, j), op.holds(Some(a.cmp(b))), "{} {:?} {}", a, op, b);
                        prop_assert_eq!(with_literal.evaluate(&rl, i, &rr, j), op.holds(Some(literal.cmp(b))), "{} {:?} {}", literal, op, b);
                    }
                }
            }
        }
    }

    #[test]
    fn decimals_of_different_scales_are_refused() {
        let a = DecimalOperand::Column { side: Side::Left, hi: 0, lo: 1, scale: 2 };
        let b = DecimalOperand::Column { side: Side::Right, hi: 0, lo: 1, scale: 3 };
        assert!(decimal_comparison(CmpOp::Lt, a, b).unwrap_err().contains("scale"));
    }

    #[test]
    fn not_over_a_nullable_column_is_false_for_null_rows() {
        let f = flags();
        let logic = ThreeValued { flag_of: &f };
        let p = !col_l(0).less(col_r(3)).or(col_l(3).equals(lit(1i64)));
        let t = logic.is_true(&p);
        assert_eq!(t, Predicate::And(vec![col_l(4).equals(lit(1u32)), !col_l(0).less(col_r(3)), !col_l(3).equals(lit(1i64))]));
        // Without nullable columns the predicate is kept as it is.
        let q = !col_l(3).less(col_r(3));
        assert_eq!(logic.is_true(&q), q);
    }
}
