//! The predicate tree: literals ([`Scalar`]), comparison operators ([`CmpOp`]), operands
//! ([`Expr`], built with [`col_l`], [`col_r`], [`lit`], `+` and `-`) and predicates
//! ([`Predicate`], combined with AND, OR and NOT).

use std::cmp::Ordering;

use super::{DataType, Side};

/// A literal value in a predicate.
///
/// ```
/// use gpujoin_join::predicate::{DataType, Scalar};
/// assert_eq!(Scalar::from(3u32).data_type(), DataType::UInt32);
/// assert_eq!(Scalar::from("é"), Scalar::Utf8("é".into()));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    Utf8(String),
}

impl Scalar {
    /// The literal's type.
    pub fn data_type(&self) -> DataType {
        match self {
            Scalar::I32(_) => DataType::Int32,
            Scalar::I64(_) => DataType::Int64,
            Scalar::U32(_) => DataType::UInt32,
            Scalar::U64(_) => DataType::UInt64,
            Scalar::F32(_) => DataType::Float32,
            Scalar::F64(_) => DataType::Float64,
            Scalar::Utf8(_) => DataType::LargeUtf8,
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar {
                Scalar::$v(x.into())
            }
        }
    )*};
}
scalar_from!(i32 => I32, i64 => I64, u32 => U32, u64 => U64, f32 => F32, f64 => F64, String => Utf8, &str => Utf8);

/// A comparison operator.
///
/// ```
/// use gpujoin_join::predicate::CmpOp;
/// assert_eq!(CmpOp::Lt.flipped(), CmpOp::Gt); // a < b  <=>  b > a
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    /// Every operator.
    pub const ALL: [CmpOp; 6] = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];

    /// The operator with its operands exchanged (`<` becomes `>`; `=` and `<>` stay).
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            op => op,
        }
    }

    /// Whether the operator holds for an ordering; `None` (a NaN operand) satisfies only `Ne`.
    ///
    /// ```
    /// use gpujoin_join::predicate::CmpOp;
    /// use std::cmp::Ordering;
    /// assert!(CmpOp::Le.holds(Some(Ordering::Equal)));
    /// assert!(CmpOp::Ne.holds(None) && !CmpOp::Eq.holds(None));
    /// ```
    pub fn holds(self, ord: Option<Ordering>) -> bool {
        match (self, ord) {
            (CmpOp::Ne, None) => true,
            (_, None) => false,
            (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
            (CmpOp::Ne, Some(o)) => o != Ordering::Equal,
            (CmpOp::Lt, Some(o)) => o == Ordering::Less,
            (CmpOp::Le, Some(o)) => o != Ordering::Greater,
            (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
            (CmpOp::Ge, Some(o)) => o != Ordering::Less,
        }
    }

    /// SQL spelling (`=`, `<>`, `<`, `<=`, `>`, `>=`).
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// An operand of a comparison.
///
/// `Add` and `Sub` are numeric only (both operands of the same type); they let a predicate say
/// `r.b - c <= l.a` (a band). See the [module docs](super) for their exact semantics.
///
/// ```
/// use gpujoin_join::predicate::{col_l, col_r, lit, Expr, Side};
/// assert_eq!(col_r(2), Expr::Column { side: Side::Right, index: 2 });
/// let shifted = col_r(0) - lit(5i64); // r.0 - 5
/// assert!(matches!(shifted, Expr::Sub(..)));
/// # let _ = col_l(0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Column { side: Side, index: usize },
    Literal(Scalar),
    Add(Box<Expr>, Box<Expr>),
    Sub(Box<Expr>, Box<Expr>),
}

/// Column `index` of the left relation.
///
/// ```
/// use gpujoin_join::predicate::{col_l, Expr, Side};
/// assert_eq!(col_l(1), Expr::Column { side: Side::Left, index: 1 });
/// ```
pub fn col_l(index: usize) -> Expr {
    Expr::Column { side: Side::Left, index }
}

/// Column `index` of the right relation.
///
/// ```
/// use gpujoin_join::predicate::{col_r, Expr, Side};
/// assert_eq!(col_r(0), Expr::Column { side: Side::Right, index: 0 });
/// ```
pub fn col_r(index: usize) -> Expr {
    Expr::Column { side: Side::Right, index }
}

/// A literal (`lit(3i32)`, `lit(2.5f64)`, `lit("abc")`). The Rust type is the literal's type:
/// `lit(3)` is an `i32` and does not compare with an `i64` column.
///
/// ```
/// use gpujoin_join::predicate::{lit, Expr, Scalar};
/// assert_eq!(lit(3u64), Expr::Literal(Scalar::U64(3)));
/// ```
pub fn lit(v: impl Into<Scalar>) -> Expr {
    Expr::Literal(v.into())
}

impl std::ops::Add for Expr {
    type Output = Expr;
    fn add(self, rhs: Expr) -> Expr {
        Expr::Add(Box::new(self), Box::new(rhs))
    }
}

impl std::ops::Sub for Expr {
    type Output = Expr;
    fn sub(self, rhs: Expr) -> Expr {
        Expr::Sub(Box::new(self), Box::new(rhs))
    }
}

impl Expr {
    /// `self = other`.
    pub fn equals(self, other: Expr) -> Predicate {
        Predicate::cmp(CmpOp::Eq, self, other)
    }
    /// `self <> other`.
    pub fn not_equals(self, other: Expr) -> Predicate {
        Predicate::cmp(CmpOp::Ne, self, other)
    }
    /// `self < other`.
    pub fn less(self, other: Expr) -> Predicate {
        Predicate::cmp(CmpOp::Lt, self, other)
    }
    /// `self <= other`.
    pub fn less_eq(self, other: Expr) -> Predicate {
        Predicate::cmp(CmpOp::Le, self, other)
    }
    /// `self > other`.
    pub fn greater(self, other: Expr) -> Predicate {
        Predicate::cmp(CmpOp::Gt, self, other)
    }
    /// `self >= other`.
    pub fn greater_eq(self, other: Expr) -> Predicate {
        Predicate::cmp(CmpOp::Ge, self, other)
    }
}

/// A join predicate: a tree of comparisons combined with AND, OR and NOT.
///
/// `And(vec![])` is true, `Or(vec![])` is false. Type-check it with [`Predicate::check`] before
/// use.
///
/// ```
/// use gpujoin_join::predicate::{col_l, col_r, lit, CmpOp, Predicate};
/// let p = Predicate::cmp(CmpOp::Lt, col_l(0), col_r(0)).or(!col_l(1).equals(lit(0.5f64)));
/// assert!(matches!(p, Predicate::Or(_)));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    Cmp { op: CmpOp, left: Expr, right: Expr },
    And(Vec<Predicate>),
    Or(Vec<Predicate>),
    Not(Box<Predicate>),
    True,
}

impl std::ops::Not for Predicate {
    type Output = Predicate;
    /// `NOT self`.
    fn not(self) -> Predicate {
        Predicate::Not(Box::new(self))
    }
}

impl Expr {
    fn for_each_column(&self, f: &mut impl FnMut(Side, usize)) {
        match self {
            Expr::Column { side, index } => f(*side, *index),
            Expr::Literal(_) => {}
            Expr::Add(a, b) | Expr::Sub(a, b) => {
                a.for_each_column(f);
                b.for_each_column(f);
            }
        }
    }

    fn map_columns(&self, m: &impl Fn(Side, usize) -> usize) -> Expr {
        match self {
            Expr::Column { side, index } => Expr::Column { side: *side, index: m(*side, *index) },
            Expr::Literal(s) => Expr::Literal(s.clone()),
            Expr::Add(a, b) => Expr::Add(Box::new(a.map_columns(m)), Box::new(b.map_columns(m))),
            Expr::Sub(a, b) => Expr::Sub(Box::new(a.map_columns(m)), Box::new(b.map_columns(m))),
        }
    }
}

impl Predicate {
    /// Calls `f` with every column reference, `(side, index)`, left to right (repeats included).
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, CmpOp, Predicate, Side};
    /// let mut seen = Vec::new();
    /// Predicate::cmp(CmpOp::Lt, col_l(2), col_r(0)).for_each_column(&mut |s, i| seen.push((s, i)));
    /// assert_eq!(seen, [(Side::Left, 2), (Side::Right, 0)]);
    /// ```
    pub fn for_each_column(&self, f: &mut impl FnMut(Side, usize)) {
        match self {
            Predicate::Cmp { left, right, .. } => {
                left.for_each_column(f);
                right.for_each_column(f);
            }
            Predicate::And(v) | Predicate::Or(v) => v.iter().for_each(|q| q.for_each_column(f)),
            Predicate::Not(q) => q.for_each_column(f),
            Predicate::True => {}
        }
    }

    /// The same predicate with each column reference `(side, index)` pointing at `m(side, index)`.
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, CmpOp, Predicate};
    /// let p = Predicate::cmp(CmpOp::Lt, col_l(2), col_r(0)).map_columns(&|_, i| i + 1);
    /// assert_eq!(p, Predicate::cmp(CmpOp::Lt, col_l(3), col_r(1)));
    /// ```
    pub fn map_columns(&self, m: &impl Fn(Side, usize) -> usize) -> Predicate {
        match self {
            Predicate::Cmp { op, left, right } => Predicate::Cmp { op: *op, left: left.map_columns(m), right: right.map_columns(m) },
            Predicate::And(v) => Predicate::And(v.iter().map(|q| q.map_columns(m)).collect()),
            Predicate::Or(v) => Predicate::Or(v.iter().map(|q| q.map_columns(m)).collect()),
            Predicate::Not(q) => Predicate::Not(Box::new(q.map_columns(m))),
            Predicate::True => Predicate::True,
        }
    }

    /// `left op right`.
    pub fn cmp(op: CmpOp, left: Expr, right: Expr) -> Predicate {
        Predicate::Cmp { op, left, right }
    }

    /// `self AND other` (flattening into an existing top-level `And` of `self`).
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, Predicate};
    /// let p = col_l(0).equals(col_r(0)).and(col_l(1).equals(col_r(1))).and(Predicate::True);
    /// assert!(matches!(&p, Predicate::And(v) if v.len() == 3));
    /// ```
    pub fn and(self, other: Predicate) -> Predicate {
        match self {
            Predicate::And(mut v) => {
                v.push(other);
                Predicate::And(v)
            }
            p => Predicate::And(vec![p, other]),
        }
    }

    /// `self OR other` (flattening into an existing top-level `Or` of `self`).
    pub fn or(self, other: Predicate) -> Predicate {
        match self {
            Predicate::Or(mut v) => {
                v.push(other);
                Predicate::Or(v)
            }
            p => Predicate::Or(vec![p, other]),
        }
    }
}
