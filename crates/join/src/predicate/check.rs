//! Type checking: [`Predicate::check`] against the two schemas, and the [`CheckedPredicate`] it
//! returns, with the schema checks of relations ([`CheckedPredicate::check_tables`],
//! [`CheckedPredicate::check_schemas`]).

use gpujoin_device::{Error, Result};

use super::relation::kernel_schema;
use super::{DataType, Expr, Predicate, Side};

impl Expr {
    fn check(&self, schemas: [&[DataType]; 2], path: &str, depth: usize) -> Result<DataType> {
        match self {
            Expr::Column { side, index } => {
                let (name, schema) = match side {
                    Side::Left => ("left", schemas[0]),
                    Side::Right => ("right", schemas[1]),
                };
                schema.get(*index).copied().ok_or_else(|| {
                    Error::invalid(format!(
                        "{path}: {name} column {index} does not exist (the {name} schema has {} columns)",
                        schema.len()
                    ))
                })
            }
            Expr::Literal(s) => Ok(s.data_type()),
            Expr::Add(a, b) | Expr::Sub(a, b) => {
                let sym = if matches!(self, Expr::Add(..)) { "+" } else { "-" };
                if depth >= MAX_ARITHMETIC_DEPTH {
                    return Err(Error::invalid(format!(
                        "{path}: arithmetic nested deeper than {MAX_ARITHMETIC_DEPTH} levels"
                    )));
                }
                let ta = a.check(schemas, path, depth + 1)?;
                let tb = b.check(schemas, path, depth + 1)?;
                if !ta.is_numeric() || !tb.is_numeric() {
                    return Err(Error::invalid(format!(
                        "{path}: `{sym}` needs numbers, got {} {sym} {} ({} {sym} {})",
                        ta,
                        tb,
                        a.describe(),
                        b.describe()
                    )));
                }
                if ta != tb {
                    return Err(Error::invalid(format!(
                        "{path}: `{sym}` on different types {ta} and {tb} ({} {sym} {}); there are no implicit casts",
                        a.describe(),
                        b.describe()
                    )));
                }
                Ok(ta)
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Expr::Column { side: Side::Left, index } => format!("left column {index}"),
            Expr::Column { side: Side::Right, index } => format!("right column {index}"),
            Expr::Literal(s) => format!("literal {s:?}"),
            Expr::Add(a, b) => format!("({} + {})", a.describe(), b.describe()),
            Expr::Sub(a, b) => format!("({} - {})", a.describe(), b.describe()),
        }
    }
}

/// Arithmetic nests at most this deep, which keeps exact integer arithmetic within `i128`.
pub const MAX_ARITHMETIC_DEPTH: usize = 32;

impl Predicate {
    /// Type-checks the predicate against the schemas of the left and right relations, each
    /// column compared as its kernel type ([`DataType::kernel_type`]: an `Int16` column as
    /// `Int32`, a `Utf8` one as `LargeUtf8`).
    ///
    /// Errors ([`Error::InvalidArgument`], with the path of the offending node such as
    /// `and[1].or[0]`): a column index outside its schema; a comparison (or `+`/`-`) of two
    /// different types (no implicit casts: `Int32` vs `Int64` is an error); a string compared
    /// with a number; arithmetic on strings. A `Decimal128` column: [`Error::Unsupported`].
    /// Never panics.
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, lit, DataType};
    /// let s = [DataType::Int32, DataType::LargeUtf8];
    /// assert!(col_l(0).less(col_r(0)).check(&s, &s).is_ok());
    /// assert!(col_l(0).less(lit(1i64)).check(&s, &s).is_err()); // i32 vs i64
    /// assert!(col_l(1).equals(col_r(0)).check(&s, &s).is_err()); // string vs number
    /// assert!(col_l(7).equals(col_r(0)).check(&s, &s).is_err()); // no column 7
    /// ```
    pub fn check(&self, left_schema: &[DataType], right_schema: &[DataType]) -> Result<CheckedPredicate> {
        let (left_schema, right_schema) = (kernel_schema("left", left_schema)?, kernel_schema("right", right_schema)?);
        self.check_node([&left_schema, &right_schema], "predicate")?;
        Ok(CheckedPredicate { pred: self.clone(), left_schema, right_schema })
    }

    fn check_node(&self, schemas: [&[DataType]; 2], path: &str) -> Result<()> {
        match self {
            Predicate::True => Ok(()),
            Predicate::Not(p) => p.check_node(schemas, &format!("{path}.not")),
            Predicate::And(v) | Predicate::Or(v) => {
                let name = if matches!(self, Predicate::And(_)) { "and" } else { "or" };
                for (i, p) in v.iter().enumerate() {
                    p.check_node(schemas, &format!("{path}.{name}[{i}]"))?;
                }
                Ok(())
            }
            Predicate::Cmp { op, left, right } => {
                let tl = left.check(schemas, path, 0)?;
                let tr = right.check(schemas, path, 0)?;
                if tl == tr {
                    return Ok(());
                }
                let (dl, dr) = (left.describe(), right.describe());
                let sym = op.symbol();
                if tl.is_string() != tr.is_string() {
                    Err(Error::invalid(format!(
                        "{path}: cannot compare a string with a number: {dl} ({tl}) {sym} {dr} ({tr})"
                    )))
                } else {
                    Err(Error::invalid(format!(
                        "{path}: cannot compare different types {tl} and {tr}: {dl} {sym} {dr}; there are no implicit casts"
                    )))
                }
            }
        }
    }
}

/// A predicate that passed [`Predicate::check`] for a pair of schemas.
///
/// ```
/// use gpujoin_join::predicate::{col_l, col_r, DataType};
/// let c = col_l(0).equals(col_r(1)).check(&[DataType::UInt32], &[DataType::Float64, DataType::UInt32])?;
/// assert_eq!(c.equality_parts(), vec![(0, 1)]);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedPredicate {
    pub(super) pred: Predicate,
    pub(super) left_schema: Vec<DataType>,
    pub(super) right_schema: Vec<DataType>,
}

impl CheckedPredicate {
    /// The predicate as given.
    pub fn predicate(&self) -> &Predicate {
        &self.pred
    }
    /// The left schema it was checked against (kernel types).
    pub fn left_schema(&self) -> &[DataType] {
        &self.left_schema
    }
    /// The right schema it was checked against (kernel types).
    pub fn right_schema(&self) -> &[DataType] {
        &self.right_schema
    }

    /// Checks that host tables have exactly the schemas the predicate was checked against
    /// ([`super::schema_of`]; [`Error::InvalidArgument`] otherwise).
    pub fn check_tables(&self, left: &crate::table::HostTable, right: &crate::table::HostTable) -> Result<()> {
        self.check_schemas(&super::schema_of(left)?, &super::schema_of(right)?)
    }

    /// Checks that relations of these column types are the ones the predicate was checked
    /// against, as kernel types ([`Error::InvalidArgument`] otherwise); for relations on the host
    /// or the device.
    ///
    /// ```
    /// use gpujoin_join::predicate::{col_l, col_r, DataType};
    /// let c = col_l(0).less(col_r(0)).check(&[DataType::Int32], &[DataType::Int32])?;
    /// assert!(c.check_schemas(&[DataType::Int32], &[DataType::Int32]).is_ok());
    /// assert!(c.check_schemas(&[DataType::Int32], &[DataType::Int64]).is_err());
    /// # Ok::<(), gpujoin_device::Error>(())
    /// ```
    pub fn check_schemas(&self, left: &[DataType], right: &[DataType]) -> Result<()> {
        for (name, given, schema) in [("left", left, &self.left_schema), ("right", right, &self.right_schema)] {
            let actual = kernel_schema(name, given)?;
            if actual != *schema {
                return Err(Error::invalid(format!(
                    "{name} relation has schema {actual:?} but the predicate was checked against {schema:?}"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicate::{col_l, col_r, lit};
    use DataType::*;

    fn all_types() -> Vec<DataType> {
        vec![Int32, Int64, UInt32, UInt64, Float32, Float64, LargeUtf8]
    }

    fn err_msg(r: Result<CheckedPredicate>) -> String {
        match r {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn type_errors_are_errors() {
        let s = all_types();
        // Every pair of different types is an error, in both operand orders and at depth.
        for (i, a) in s.iter().enumerate() {
            for (j, b) in s.iter().enumerate() {
                let p = col_l(i).less(col_r(j));
                let r = p.check(&s, &s);
                assert_eq!(r.is_ok(), a == b, "{a} vs {b}");
                if a != b {
                    let m = err_msg(r);
                    if a.is_string() != b.is_string() {
                        assert!(m.contains("string with a number"), "{m}");
                    } else {
                        assert!(m.contains("no implicit casts"), "{m}");
                    }
                    let deep = Predicate::True.and(!Predicate::True.or(p));
                    let m = err_msg(deep.check(&s, &s));
                    assert!(m.contains("and[1].not.or[1]"), "{m}");
                }
            }
        }
        assert!(err_msg(col_l(7).equals(col_r(0)).check(&s, &s)).contains("left column 7 does not exist"));
        assert!(err_msg(col_l(0).equals(col_r(9)).check(&s, &[])).contains("right column 9"));
        assert!(col_l(0).equals(lit(1i64)).check(&s, &s).is_err());
        assert!(col_l(0).equals(lit(1i32)).check(&s, &s).is_ok());
        assert!(col_l(6).equals(lit(1i32)).check(&s, &s).is_err());
        assert!(col_l(6).equals(lit("a")).check(&s, &s).is_ok());
        assert!(lit("a").less(lit(2.0f64)).check(&[], &[]).is_err());
        // Arithmetic: numeric and same type only.
        assert!((col_l(6) + lit("x")).equals(col_r(6)).check(&s, &s).is_err());
        assert!((col_l(0) + lit(1i64)).equals(col_r(0)).check(&s, &s).is_err());
        assert!((col_l(0) + lit(1i32)).equals(col_r(0)).check(&s, &s).is_ok());
        assert!((col_l(0) + lit(1i32)).equals(col_r(1)).check(&s, &s).is_err());
        let mut e = col_l(0);
        for _ in 0..40 {
            e = e + lit(1i32);
        }
        assert!(e.equals(col_r(0)).check(&s, &s).is_err());
    }
}
