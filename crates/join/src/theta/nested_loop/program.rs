//! Lowering of a [`CheckedPredicate`] to the nested-loop kernels' device program (plain host
//! code, tested on the CPU by an emulator of the device semantics).
//!
//! * Every comparison is a **leaf** producing a 32-bit match mask over 32 inner rows:
//!   * `Sep`: one operand depends on the left row only and the other on the right row only
//!     (columns, literals, `+`, `-`): both are evaluated per row (the outer value once per
//!     outer row, the inner value per tile row) into one element type ([`ValueKind`]) in which
//!     the comparison is exact, then compared as `outer op inner`;
//!   * `LeftBool` / `RightBool`: both operands depend on one side only: one flag per row;
//!   * `Mixed`: an operand mixes left and right columns: interpreted per pair (slow path).
//! * A **boolean program** (postfix, on 32-bit words) combines the leaf masks; an AND or an OR
//!   of all leaves is recognized as a mode of its own.
//! * With more than [`MAX_LEAVES`] comparisons (or a program too long), the whole predicate is
//!   one `Mixed` leaf.

use gpujoin_device::{Error, Result};

use crate::kernels::sys::theta as ffi;
use crate::predicate::{CheckedPredicate, CmpOp, DataType, Expr, Predicate, Scalar, Side};

/// Leaves handled by the mask kernels.
pub const MAX_LEAVES: usize = ffi::GJ_T_MAX_LEAVES as usize;
const MAX_COMBINE: usize = ffi::GJ_T_MAX_COMBINE as usize;
const MAX_COMBINE_STACK: usize = ffi::GJ_T_MAX_COMBINE_STACK as usize;
/// Depth of the device interpreter's value stack.
pub const MAX_STACK: usize = ffi::GJ_T_MAX_STACK as usize;

/// The element type a `Sep` leaf compares in (the `GJ_T_*` element codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    I32,
    I64,
    U32,
    U64,
    I128,
    F32,
    F64,
    Utf8,
}

impl ValueKind {
    /// The C code (`GJ_T_I32`, ...).
    pub fn code(self) -> i32 {
        (match self {
            ValueKind::I32 => ffi::GJ_T_I32,
            ValueKind::I64 => ffi::GJ_T_I64,
            ValueKind::U32 => ffi::GJ_T_U32,
            ValueKind::U64 => ffi::GJ_T_U64,
            ValueKind::I128 => ffi::GJ_T_I128,
            ValueKind::F32 => ffi::GJ_T_F32,
            ValueKind::F64 => ffi::GJ_T_F64,
            ValueKind::Utf8 => ffi::GJ_T_UTF8,
        }) as i32
    }
    /// Bytes per value in a tile (strings: pointer + length).
    pub fn width(self) -> usize {
        match self {
            ValueKind::I32 | ValueKind::U32 | ValueKind::F32 => 4,
            ValueKind::I64 | ValueKind::U64 | ValueKind::F64 => 8,
            ValueKind::I128 | ValueKind::Utf8 => 16,
        }
    }
    fn native(t: DataType) -> ValueKind {
        match t {
            DataType::Int32 => ValueKind::I32,
            DataType::Int64 => ValueKind::I64,
            DataType::UInt32 => ValueKind::U32,
            DataType::UInt64 => ValueKind::U64,
            DataType::Float32 => ValueKind::F32,
            DataType::Float64 => ValueKind::F64,
            DataType::LargeUtf8 => ValueKind::Utf8,
            t => unreachable!("{t} is not a kernel type (a checked predicate's schemas are)"),
        }
    }
}

/// The `GJ_T_*` code of a column type.
pub fn dtype_code(t: DataType) -> i32 {
    ValueKind::native(t).code()
}

/// A range of interpreter code: `code[start .. start + len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeRange {
    pub start: i32,
    pub len: i32,
}

/// Where a `Sep` leaf's values of one side come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideValue {
    /// The column itself (its type is the leaf's kind).
    Column(usize),
    /// The expression evaluated per row by the interpreter into the leaf's kind.
    Computed(CodeRange),
}

/// One leaf of the device program.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    /// `outer(l) op inner(r)` in `kind`.
    Sep { kind: ValueKind, op: CmpOp, outer: SideValue, inner: SideValue },
    LeftBool(CodeRange),
    RightBool(CodeRange),
    Mixed(CodeRange),
}

/// How leaf masks combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CombineMode {
    /// The postfix program.
    Program,
    /// AND of all leaves (true without leaves).
    All,
    /// OR of all leaves.
    Any,
}

/// Interpreter code: instructions `[op, a, b, c]`, literals `(lo, hi)`, literal string bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Code {
    pub instrs: Vec<[i32; 4]>,
    pub literals: Vec<(i64, i64)>,
    pub lit_bytes: Vec<u8>,
}

/// A lowered predicate.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub leaves: Vec<Leaf>,
    pub combine_mode: CombineMode,
    /// Postfix entries `(opcode << 8) | leaf`.
    pub combine: Vec<i32>,
    pub code: Code,
}

fn class(t: DataType) -> i32 {
    (match t {
        DataType::Float32 => ffi::GJ_T_CLASS_F32,
        DataType::Float64 => ffi::GJ_T_CLASS_F64,
        DataType::LargeUtf8 => ffi::GJ_T_CLASS_STR,
        _ => ffi::GJ_T_CLASS_INT,
    }) as i32
}

fn op_code(op: CmpOp) -> i32 {
    CmpOp::ALL.iter().position(|&o| o == op).unwrap_or(0) as i32
}

const LEFT: u8 = 1;
const RIGHT: u8 = 2;

fn deps(e: &Expr) -> u8 {
    match e {
        Expr::Column { side: Side::Left, .. } => LEFT,
        Expr::Column { side: Side::Right, .. } => RIGHT,
        Expr::Literal(_) => 0,
        Expr::Add(a, b) | Expr::Sub(a, b) => deps(a) | deps(b),
    }
}

struct Schemas<'a> {
    left: &'a [DataType],
    right: &'a [DataType],
}

impl Schemas<'_> {
    fn column(&self, side: Side, index: usize) -> Result<DataType> {
        let s = if side == Side::Left { self.left } else { self.right };
        s.get(index).copied().ok_or_else(|| Error::invalid(format!("internal: {side:?} column {index} missing")))
    }
    fn expr_type(&self, e: &Expr) -> Result<DataType> {
        match e {
            Expr::Column { side, index } => self.column(*side, *index),
            Expr::Literal(s) => Ok(s.data_type()),
            Expr::Add(a, _) | Expr::Sub(a, _) => self.expr_type(a),
        }
    }
    /// The exact value range of an integer expression.
    fn int_range(&self, e: &Expr) -> Result<(i128, i128)> {
        Ok(match e {
            Expr::Column { side, index } => match self.column(*side, *index)? {
                DataType::Int32 => (i32::MIN as i128, i32::MAX as i128),
                DataType::UInt32 => (0, u32::MAX as i128),
                DataType::Int64 => (i64::MIN as i128, i64::MAX as i128),
                _ => (0, u64::MAX as i128),
            },
            Expr::Literal(s) => {
                let v = match s {
                    Scalar::I32(v) => *v as i128,
                    Scalar::I64(v) => *v as i128,
                    Scalar::U32(v) => *v as i128,
                    Scalar::U64(v) => *v as i128,
                    _ => 0,
                };
                (v, v)
            }
            Expr::Add(a, b) => {
                let (x, y) = (self.int_range(a)?, self.int_range(b)?);
                (x.0.saturating_add(y.0), x.1.saturating_add(y.1))
            }
            Expr::Sub(a, b) => {
                let (x, y) = (self.int_range(a)?, self.int_range(b)?);
                (x.0.saturating_sub(y.1), x.1.saturating_sub(y.0))
            }
        })
    }
}

impl Code {
    fn push(&mut self, op: u32, a: i32, b: i32, c: i32) {
        self.instrs.push([op as i32, a, b, c]);
    }

    fn literal(&mut self, s: &Scalar) -> i32 {
        let (lo, hi) = match s {
            Scalar::I32(v) => split_i128(*v as i128),
            Scalar::I64(v) => split_i128(*v as i128),
            Scalar::U32(v) => split_i128(*v as i128),
            Scalar::U64(v) => split_i128(*v as i128),
            Scalar::F32(v) => (v.to_bits() as i64, 0),
            Scalar::F64(v) => (v.to_bits() as i64, 0),
            Scalar::Utf8(s) => {
                let at = self.lit_bytes.len() as i64;
                self.lit_bytes.extend_from_slice(s.as_bytes());
                (at, s.len() as i64)
            }
        };
        self.literals.push((lo, hi));
        (self.literals.len() - 1) as i32
    }

    /// Emits an expression; returns the stack depth it needs.
    fn expr(&mut self, e: &Expr, sch: &Schemas<'_>) -> Result<usize> {
        Ok(match e {
            Expr::Column { side, index } => {
                self.push(ffi::GJ_T_OP_COL, if *side == Side::Left { 0 } else { 1 }, *index as i32, 0);
                1
            }
            Expr::Literal(s) => {
                let i = self.literal(s);
                self.push(ffi::GJ_T_OP_LIT, i, 0, class(s.data_type()));
                1
            }
            Expr::Add(a, b) | Expr::Sub(a, b) => {
                let da = self.expr(a, sch)?;
                let db = self.expr(b, sch)?;
                let op = if matches!(e, Expr::Add(..)) { ffi::GJ_T_OP_ADD } else { ffi::GJ_T_OP_SUB };
                self.push(op, 0, 0, class(sch.expr_type(a)?));
                da.max(db + 1)
            }
        })
    }

    /// Emits a boolean predicate; returns the stack depth it needs.
    fn pred(&mut self, p: &Predicate, sch: &Schemas<'_>) -> Result<usize> {
        Ok(match p {
            Predicate::True => {
                self.push(ffi::GJ_T_OP_TRUE, 0, 0, 0);
                1
            }
            Predicate::Cmp { op, left, right } => {
                let da = self.expr(left, sch)?;
                let db = self.expr(right, sch)?;
                self.push(ffi::GJ_T_OP_CMP, op_code(*op), 0, class(sch.expr_type(left)?));
                da.max(db + 1)
            }
            Predicate::Not(q) => {
                let d = self.pred(q, sch)?;
                self.push(ffi::GJ_T_OP_NOT, 0, 0, 0);
                d
            }
            Predicate::And(v) | Predicate::Or(v) => {
                let and = matches!(p, Predicate::And(_));
                if v.is_empty() {
                    self.push(ffi::GJ_T_OP_TRUE, 0, 0, 0);
                    if !and {
                        self.push(ffi::GJ_T_OP_NOT, 0, 0, 0);
                    }
                    return Ok(1);
                }
                let mut d = self.pred(&v[0], sch)?;
                for q in &v[1..] {
                    d = d.max(1 + self.pred(q, sch)?);
                    self.push(if and { ffi::GJ_T_OP_AND } else { ffi::GJ_T_OP_OR }, 0, 0, 0);
                }
                d
            }
        })
    }

    fn range<F: FnOnce(&mut Code) -> Result<usize>>(&mut self, f: F) -> Result<CodeRange> {
        let start = self.instrs.len();
        let depth = f(self)?;
        if depth > MAX_STACK {
            return Err(Error::invalid(format!(
                "the predicate nests too deeply for the device interpreter ({depth} stack entries, at most {MAX_STACK})"
            )));
        }
        Ok(CodeRange { start: start as i32, len: (self.instrs.len() - start) as i32 })
    }

    /// Emits the whole predicate as one boolean program (pair filters, the general path).
    pub fn predicate(&mut self, pred: &CheckedPredicate) -> Result<CodeRange> {
        let sch = Schemas { left: pred.left_schema(), right: pred.right_schema() };
        self.range(|c| c.pred(pred.predicate(), &sch))
    }
}

fn split_i128(v: i128) -> (i64, i64) {
    (v as u64 as i64, (v >> 64) as i64)
}

fn bop(op: u32, arg: usize) -> i32 {
    ((op << 8) as i32) | arg as i32
}

/// Postfix combine program; `leaves` collects the comparisons in order. Returns the stack depth.
fn combine_program<'p>(p: &'p Predicate, leaves: &mut Vec<&'p Predicate>, out: &mut Vec<i32>) -> usize {
    match p {
        Predicate::True => {
            out.push(bop(ffi::GJ_T_B_TRUE, 0));
            1
        }
        Predicate::Cmp { .. } => {
            leaves.push(p);
            out.push(bop(ffi::GJ_T_B_LEAF, leaves.len() - 1));
            1
        }
        Predicate::Not(q) => {
            let d = combine_program(q, leaves, out);
            out.push(bop(ffi::GJ_T_B_NOT, 0));
            d
        }
        Predicate::And(v) | Predicate::Or(v) => {
            let and = matches!(p, Predicate::And(_));
            if v.is_empty() {
                out.push(bop(if and { ffi::GJ_T_B_TRUE } else { ffi::GJ_T_B_FALSE }, 0));
                return 1;
            }
            let mut d = combine_program(&v[0], leaves, out);
            for q in &v[1..] {
                d = d.max(1 + combine_program(q, leaves, out));
                out.push(bop(if and { ffi::GJ_T_B_AND } else { ffi::GJ_T_B_OR }, 0));
            }
            d
        }
    }
}

/// `LEAF 0, LEAF 1, OP, LEAF 2, OP, ...` (or a single `LEAF 0`, or `TRUE` alone for `All`).
fn detect_mode(combine: &[i32], n: usize) -> CombineMode {
    let is = |i: usize, op: u32, arg: usize| combine.get(i) == Some(&bop(op, arg));
    if n == 0 {
        return if combine == [bop(ffi::GJ_T_B_TRUE, 0)] { CombineMode::All } else { CombineMode::Program };
    }
    if combine.len() != 2 * n - 1 || !is(0, ffi::GJ_T_B_LEAF, 0) {
        return CombineMode::Program;
    }
    if n == 1 {
        return CombineMode::All;
    }
    for (op, mode) in [(ffi::GJ_T_B_AND, CombineMode::All), (ffi::GJ_T_B_OR, CombineMode::Any)] {
        if (1..n).all(|k| is(2 * k - 1, ffi::GJ_T_B_LEAF, k) && is(2 * k, op, 0)) {
            return mode;
        }
    }
    CombineMode::Program
}

/// Lowers a predicate (see the module docs).
///
/// Errors: [`Error::InvalidArgument`] when an expression nests deeper than the device
/// interpreter's stack.
pub fn lower(pred: &CheckedPredicate) -> Result<Program> {
    let sch = Schemas { left: pred.left_schema(), right: pred.right_schema() };
    let mut leaves = Vec::new();
    let mut combine = Vec::new();
    let depth = combine_program(pred.predicate(), &mut leaves, &mut combine);
    let mut code = Code::default();
    if leaves.len() > MAX_LEAVES || combine.len() > MAX_COMBINE || depth > MAX_COMBINE_STACK {
        let whole = code.predicate(pred)?;
        return Ok(Program {
            leaves: vec![Leaf::Mixed(whole)],
            combine_mode: CombineMode::All,
            combine: vec![bop(ffi::GJ_T_B_LEAF, 0)],
            code,
        });
    }
    let mut out = Vec::with_capacity(leaves.len());
    for p in &leaves {
        out.push(lower_leaf(p, &sch, &mut code)?);
    }
    let combine_mode = detect_mode(&combine, out.len());
    Ok(Program { leaves: out, combine_mode, combine, code })
}

fn lower_leaf(p: &Predicate, sch: &Schemas<'_>, code: &mut Code) -> Result<Leaf> {
    let Predicate::Cmp { op, left, right } = p else {
        return Err(Error::invalid("internal: a leaf that is not a comparison"));
    };
    let (da, db) = (deps(left), deps(right));
    let whole = |code: &mut Code| code.range(|c| c.pred(p, sch));
    if (da | db) & RIGHT == 0 {
        return Ok(Leaf::LeftBool(whole(code)?));
    }
    if (da | db) & LEFT == 0 {
        return Ok(Leaf::RightBool(whole(code)?));
    }
    let (op, outer, inner) = match (da, db) {
        (LEFT, RIGHT) => (*op, left, right),
        (RIGHT, LEFT) => (op.flipped(), right, left),
        _ => return Ok(Leaf::Mixed(whole(code)?)),
    };
    let t = sch.expr_type(outer)?;
    let bare = |e: &Expr| matches!(e, Expr::Column { .. });
    let kind = if !t.is_integer() || (bare(outer) && bare(inner)) {
        ValueKind::native(t)
    } else {
        let (a, b) = (sch.int_range(outer)?, sch.int_range(inner)?);
        let (lo, hi) = (a.0.min(b.0), a.1.max(b.1));
        if lo >= i64::MIN as i128 && hi <= i64::MAX as i128 {
            ValueKind::I64
        } else if lo >= 0 && hi <= u64::MAX as i128 {
            ValueKind::U64
        } else {
            ValueKind::I128
        }
    };
    let mut side = |e: &Expr| -> Result<SideValue> {
        if let Expr::Column { side, index } = e {
            if ValueKind::native(sch.column(*side, *index)?) == kind {
                return Ok(SideValue::Column(*index));
            }
        }
        Ok(SideValue::Computed(code.range(|c| c.expr(e, sch))?))
    };
    let outer = side(outer)?;
    let inner = side(inner)?;
    Ok(Leaf::Sep { kind, op, outer, inner })
}

// ---------------------------------------------------------------------------------------------
// A CPU emulator of the device program (for tests of the lowering).

#[cfg(test)]
pub(crate) mod emulate {
    use super::*;
    use crate::table::{DataType as T, HostColumn, HostTable, Value};

    #[derive(Debug, Clone, Copy)]
    enum V<'a> {
        Int(i128),
        F32(f32),
        F64(f64),
        Str(&'a [u8]),
    }

    fn col<'a>(c: &'a HostColumn, row: usize) -> V<'a> {
        match (c.data_type(), c.value(row)) {
            (T::Float32, Value::Float(x)) => V::F32(x as f32),
            (_, Value::Float(x)) => V::F64(x),
            (_, Value::Int(x)) => V::Int(x),
            (_, Value::Str(x)) => V::Str(x),
            (t, v) => panic!("a {t} value {v:?} in the model"),
        }
    }

    fn holds<T: PartialOrd>(op: i32, a: T, b: T) -> bool {
        match op {
            0 => a == b,
            1 => a != b,
            2 => a < b,
            3 => a <= b,
            4 => a > b,
            _ => a >= b,
        }
    }

    fn run<'a>(code: &'a Code, r: CodeRange, l: &'a HostTable, li: usize, rr: &'a HostTable, ri: usize) -> V<'a> {
        let mut st: Vec<V<'a>> = Vec::new();
        let b = |v: bool| V::Int(v as i128);
        let truth = |v: V<'_>| matches!(v, V::Int(x) if x != 0);
        for ins in &code.instrs[r.start as usize..(r.start + r.len) as usize] {
            let [op, a, bb, c] = *ins;
            let op = op as u32;
            if op == ffi::GJ_T_OP_COL {
                st.push(if a == 0 { col(&l.columns()[bb as usize], li) } else { col(&rr.columns()[bb as usize], ri) });
            } else if op == ffi::GJ_T_OP_LIT {
                let (lo, hi) = code.literals[a as usize];
                st.push(match c as u32 {
                    ffi::GJ_T_CLASS_INT => V::Int(((hi as i128) << 64) | (lo as u64 as i128)),
                    ffi::GJ_T_CLASS_F32 => V::F32(f32::from_bits(lo as u32)),
                    ffi::GJ_T_CLASS_F64 => V::F64(f64::from_bits(lo as u64)),
                    _ => V::Str(&code.lit_bytes[lo as usize..(lo + hi) as usize]),
                });
            } else if op == ffi::GJ_T_OP_ADD || op == ffi::GJ_T_OP_SUB {
                let y = st.pop().unwrap();
                let x = st.pop().unwrap();
                let add = op == ffi::GJ_T_OP_ADD;
                st.push(match (x, y) {
                    (V::Int(x), V::Int(y)) => V::Int(if add { x + y } else { x - y }),
                    (V::F32(x), V::F32(y)) => V::F32(if add { x + y } else { x - y }),
                    (V::F64(x), V::F64(y)) => V::F64(if add { x + y } else { x - y }),
                    _ => panic!("bad arithmetic"),
                });
            } else if op == ffi::GJ_T_OP_CMP {
                let y = st.pop().unwrap();
                let x = st.pop().unwrap();
                st.push(b(match (x, y) {
                    (V::Int(x), V::Int(y)) => holds(a, x, y),
                    (V::F32(x), V::F32(y)) => holds(a, x, y),
                    (V::F64(x), V::F64(y)) => holds(a, x, y),
                    (V::Str(x), V::Str(y)) => holds(a, x, y),
                    _ => panic!("bad comparison"),
                }));
            } else if op == ffi::GJ_T_OP_AND || op == ffi::GJ_T_OP_OR {
                let y = truth(st.pop().unwrap());
                let x = truth(st.pop().unwrap());
                st.push(b(if op == ffi::GJ_T_OP_AND { x && y } else { x || y }));
            } else if op == ffi::GJ_T_OP_NOT {
                let x = truth(st.pop().unwrap());
                st.push(b(!x));
            } else {
                st.push(b(true));
            }
        }
        assert!(st.len() == 1, "program leaves {} values", st.len());
        st[0]
    }

    /// A side value converted to the leaf's kind as the device stores it.
    fn side_value<'a>(code: &'a Code, s: SideValue, side: Side, rel: &'a HostTable, row: usize, kind: ValueKind) -> V<'a> {
        let v = match s {
            SideValue::Column(i) => col(&rel.columns()[i], row),
            SideValue::Computed(r) => {
                if side == Side::Left {
                    run(code, r, rel, row, rel, 0)
                } else {
                    run(code, r, rel, 0, rel, row)
                }
            }
        };
        match (kind, v) {
            (ValueKind::I32, V::Int(x)) => V::Int(x as i32 as i128),
            (ValueKind::U32, V::Int(x)) => V::Int(x as u32 as i128),
            (ValueKind::I64, V::Int(x)) => V::Int(x as i64 as i128),
            (ValueKind::U64, V::Int(x)) => V::Int(x as u64 as i128),
            (_, v) => v,
        }
    }

    /// Evaluates the program on one pair as the kernels do.
    pub fn evaluate(p: &Program, l: &HostTable, li: usize, r: &HostTable, ri: usize) -> bool {
        let truth = |v: V<'_>| matches!(v, V::Int(x) if x != 0);
        let leaf = |k: usize| -> bool {
            match &p.leaves[k] {
                Leaf::LeftBool(c) => truth(run(&p.code, *c, l, li, l, 0)),
                Leaf::RightBool(c) => truth(run(&p.code, *c, r, 0, r, ri)),
                Leaf::Mixed(c) => truth(run(&p.code, *c, l, li, r, ri)),
                Leaf::Sep { kind, op, outer, inner } => {
                    let a = side_value(&p.code, *outer, Side::Left, l, li, *kind);
                    let b = side_value(&p.code, *inner, Side::Right, r, ri, *kind);
                    let o = op_code(*op);
                    match (a, b) {
                        (V::Int(x), V::Int(y)) => holds(o, x, y),
                        (V::F32(x), V::F32(y)) => holds(o, x, y),
                        (V::F64(x), V::F64(y)) => holds(o, x, y),
                        (V::Str(x), V::Str(y)) => holds(o, x, y),
                        _ => panic!("bad sep leaf"),
                    }
                }
            }
        };
        let n = p.leaves.len();
        match p.combine_mode {
            CombineMode::All => (0..n).all(leaf),
            CombineMode::Any => (0..n).any(leaf),
            CombineMode::Program => {
                let mut st = Vec::new();
                for &e in &p.combine {
                    let (op, arg) = ((e >> 8) as u32, (e & 0xFF) as usize);
                    match op {
                        ffi::GJ_T_B_LEAF => st.push(leaf(arg)),
                        ffi::GJ_T_B_AND | ffi::GJ_T_B_OR => {
                            let y = st.pop().unwrap();
                            let x = st.pop().unwrap();
                            st.push(if op == ffi::GJ_T_B_AND { x && y } else { x || y });
                        }
                        ffi::GJ_T_B_NOT => {
                            let x = st.pop().unwrap();
                            st.push(!x);
                        }
                        ffi::GJ_T_B_TRUE => st.push(true),
                        _ => st.push(false),
                    }
                }
                assert!(st.len() <= MAX_COMBINE_STACK);
                st[0]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicate::{col_l, col_r, lit};
    use crate::table::{HostColumn, HostTable};
    use proptest::prelude::*;
    use proptest::test_runner::{Config as ProptestConfig, RngSeed};

    const TYPES: [DataType; 7] =
        [DataType::Int32, DataType::Int64, DataType::UInt32, DataType::UInt64, DataType::Float32, DataType::Float64, DataType::LargeUtf8];

    #[test]
    fn shapes_lower_as_expected() {
        let s = [DataType::Int32, DataType::Int32];
        let lw = |p: Predicate| lower(&p.check(&s, &s).unwrap()).unwrap();
        // The bench predicate: an OR of two separable leaves in the columns' own type.
        let p = lw(col_l(0).greater(col_r(0)).or(col_l(1).equals(col_r(1))));
        assert_eq!(p.combine_mode, CombineMode::Any);
        assert_eq!(
            p.leaves,
            vec![
                Leaf::Sep { kind: ValueKind::I32, op: CmpOp::Gt, outer: SideValue::Column(0), inner: SideValue::Column(0) },
                Leaf::Sep { kind: ValueKind::I32, op: CmpOp::Eq, outer: SideValue::Column(1), inner: SideValue::Column(1) },
            ]
        );
        // Flipped operands; arithmetic widens i32 to i64.
        let p = lw((col_r(0) + lit(1)).less(col_l(0)));
        assert_eq!(p.combine_mode, CombineMode::All);
        match &p.leaves[0] {
            Leaf::Sep { kind: ValueKind::I64, op: CmpOp::Gt, outer: SideValue::Computed(_), inner: SideValue::Computed(_) } => {}
            l => panic!("{l:?}"),
        }
        let p = lw(col_l(0).less(lit(3)).and(col_r(1).equals(lit(2))).and(!(col_l(0) + col_r(0)).equals(lit(0))));
        assert!(matches!(p.leaves[0], Leaf::LeftBool(_)));
        assert!(matches!(p.leaves[1], Leaf::RightBool(_)));
        assert!(matches!(p.leaves[2], Leaf::Mixed(_)));
        assert_eq!(p.combine_mode, CombineMode::Program);
        // Too many leaves: one interpreted leaf.
        let mut q = col_l(0).less(col_r(0));
        for _ in 0..9 {
            q = q.and(col_l(1).less(col_r(1)));
        }
        let p = lw(q);
        assert_eq!(p.leaves.len(), 1);
        assert!(matches!(p.leaves[0], Leaf::Mixed(_)));
        // u64 arithmetic beyond i64 and below 0: i128.
        let u = [DataType::UInt64];
        let p = lower(&(col_l(0) - lit(1u64)).less(col_r(0)).check(&u, &u).unwrap()).unwrap();
        assert!(matches!(p.leaves[0], Leaf::Sep { kind: ValueKind::I128, .. }));
        let p = lower(&(col_l(0) + lit(1u64)).less(col_r(0)).check(&u, &u).unwrap()).unwrap();
        assert!(matches!(p.leaves[0], Leaf::Sep { kind: ValueKind::I128, .. }));
        let p = lower(&col_l(0).less(col_r(0)).check(&u, &u).unwrap()).unwrap();
        assert!(matches!(p.leaves[0], Leaf::Sep { kind: ValueKind::U64, .. }));
        // Empty and constant predicates.
        let p = lw(Predicate::True);
        assert_eq!((p.leaves.len(), p.combine_mode), (0, CombineMode::All));
        let p = lw(Predicate::Or(vec![]));
        assert_eq!((p.leaves.len(), p.combine_mode), (0, CombineMode::Program));
    }

    #[test]
    fn deep_expressions_are_errors_not_panics() {
        let s = [DataType::Int64];
        let mut e = col_l(0);
        for _ in 0..30 {
            e = lit(1i64) + e; // right-deep: the stack grows
        }
        let c = e.less(col_r(0)).check(&s, &s).unwrap();
        assert!(lower(&c).is_ok());
    }

    // ---- emulator vs CheckedPredicate::evaluate ----

    const F: [f64; 8] = [f64::NAN, f64::NEG_INFINITY, -1.5, -0.0, 0.0, 2.5, f64::INFINITY, 1e300];
    const S: [&str; 8] = ["", "a", "ab", "abc", "b", "é", "z", "aé"];

    fn scalar(t: usize, k: usize) -> Scalar {
        match t {
            0 => Scalar::I32([i32::MIN, -3, -1, 0, 1, 2, 3, i32::MAX][k]),
            1 => Scalar::I64([i64::MIN, -3, -1, 0, 1, 2, 3, i64::MAX][k]),
            2 => Scalar::U32([0, 1, 2, 3, 4, 5, 6, u32::MAX][k]),
            3 => Scalar::U64([0, 1, 2, 3, 4, 5, 6, u64::MAX][k]),
            4 => Scalar::F32(F[k] as f32),
            5 => Scalar::F64(F[k]),
            _ => Scalar::Utf8(S[k].to_string()),
        }
    }

    fn relation(rows: &[Vec<usize>]) -> HostTable {
        macro_rules! c {
            ($t:expr, $v:ident) => {
                HostColumn::from_values(rows.iter().map(|r| if let Scalar::$v(x) = scalar($t, r[$t]) { x } else { unreachable!() }).collect::<Vec<_>>())
            };
        }
        let strings: Vec<String> = rows.iter().map(|r| if let Scalar::Utf8(x) = scalar(6, r[6]) { x } else { unreachable!() }).collect();
        HostTable::new(vec![("i32", c!(0, I32)), ("i64", c!(1, I64)), ("u32", c!(2, U32)), ("u64", c!(3, U64)), ("f32", c!(4, F32)), ("f64", c!(5, F64)), ("s", HostColumn::utf8(strings))]).unwrap()
    }

    fn arb_expr(t: usize) -> BoxedStrategy<Expr> {
        let leaf = (0..4usize, 0..8usize).prop_map(move |(kind, k)| match kind {
            0 => col_l(t),
            1 => col_r(t),
            _ => Expr::Literal(scalar(t, k)),
        });
        if t == 6 {
            return leaf.boxed();
        }
        leaf.prop_recursive(2, 6, 2, |inner| {
            (inner.clone(), inner, any::<bool>()).prop_map(|(a, b, add)| if add { a + b } else { a - b })
        })
        .boxed()
    }

    fn arb_cmp() -> impl Strategy<Value = Predicate> {
        (0..7usize, 0..6usize).prop_flat_map(|(t, op)| {
            (arb_expr(t), arb_expr(t)).prop_map(move |(a, b)| Predicate::cmp(CmpOp::ALL[op], a, b))
        })
    }

    fn arb_pred() -> impl Strategy<Value = Predicate> {
        let leaf = prop_oneof![1 => Just(Predicate::True), 10 => arb_cmp()];
        leaf.prop_recursive(3, 16, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Predicate::And),
                prop::collection::vec(inner.clone(), 0..4).prop_map(Predicate::Or),
                inner.prop_map(|p| !p),
            ]
        })
    }

    fn arb_rows() -> impl Strategy<Value = Vec<Vec<usize>>> {
        prop::collection::vec(prop::collection::vec(0..8usize, 7), 0..6)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 600, rng_seed: RngSeed::Fixed(0x4E17_0001), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn lowered_program_matches_the_predicate(l in arb_rows(), r in arb_rows(), p in arb_pred()) {
            let (l, r) = (relation(&l), relation(&r));
            let c = p.check(&TYPES, &TYPES).unwrap();
            let prog = lower(&c).unwrap();
            for i in 0..l.rows() {
                for j in 0..r.rows() {
                    prop_assert_eq!(emulate::evaluate(&prog, &l, i, &r, j), c.evaluate(&l, i, &r, j), "{:?} row {} {}", p, i, j);
                }
            }
            // The whole-predicate program (pair filters) too.
            let mut code = Code::default();
            let whole = code.predicate(&c).unwrap();
            let whole_prog = Program { leaves: vec![Leaf::Mixed(whole)], combine_mode: CombineMode::All, combine: vec![0], code };
            for i in 0..l.rows() {
                for j in 0..r.rows() {
                    prop_assert_eq!(emulate::evaluate(&whole_prog, &l, i, &r, j), c.evaluate(&l, i, &r, j));
                }
            }
        }
    }
}
