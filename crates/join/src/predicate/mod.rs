//! Host-side columns and join predicates for theta joins (issue 5, seeds 003 and 004).
//!
//! * [`DataType`]: the table model's types, which predicates are checked against, each compared
//!   as its kernel type ([`DataType::kernel_type`]: narrow integers as `Int32`, both string types
//!   as `LargeUtf8`, ...; [`schema_of`] gives a host table's).
//! * [`Predicate`]: a tree of comparisons ([`CmpOp`]) between [`Expr`]s (a column of the left or
//!   right relation, a literal [`Scalar`], or a sum/difference of numeric expressions), combined
//!   with AND, OR and NOT. Built with [`col_l`], [`col_r`], [`lit`], [`Predicate::cmp`], the
//!   comparison helpers of [`Expr`], [`Predicate::and`], [`Predicate::or`] and `!`.
//! * [`Predicate::check`] type-checks a predicate against the two schemas and returns a
//!   [`CheckedPredicate`], which evaluates pairs of rows on the CPU ([`CheckedPredicate::evaluate`])
//!   and describes the shapes that faster join paths can use
//!   ([`CheckedPredicate::equality_parts`], [`CheckedPredicate::band_or_inequality`]).
//!
//! # Semantics
//!
//! * **No implicit casts.** Both operands of a comparison (and of `+`/`-`) must have exactly the same
//!   [`DataType`]: comparing an `i32` column with an `i64` column or literal, or a string with a
//!   number, is a type error reported by [`Predicate::check`]. Cast a column on the host first.
//! * **Integers** compare by value. `+` and `-` on integers are exact (computed in `i128`, no
//!   wrap-around), so `r.b - 5 <= l.a` holds exactly when it does over the mathematical integers.
//! * **Floats** compare with IEEE semantics: `-0.0 == 0.0`; `±inf` order as usual; a comparison
//!   with a NaN operand is false for `=`, `<`, `<=`, `>`, `>=` and true for `<>`. `+` and `-` are
//!   computed in the column's own type (f32 arithmetic for f32), rounding as IEEE says.
//! * **Strings** compare byte-wise lexicographically on their UTF-8 bytes (a proper prefix sorts
//!   first, `""` is the smallest string, and `"é"` (`c3 a9`) sorts after `"z"` (`7a`)).
//! * `And(vec![])` is true and `Or(vec![])` is false; `Not` is boolean negation of the result (so
//!   `!(a < b)` is true when `a` is NaN).
//!
//! ```
//! use gpujoin_join::predicate::{col_l, col_r, lit, DataType};
//! use gpujoin_join::table::{HostColumn, HostTable};
//! let pred = col_l(0).greater(col_r(0)).and(col_l(1).equals(lit("x")));
//! let checked = pred.check(&[DataType::Int32, DataType::Utf8], &[DataType::Int32])?;
//! let l = HostTable::new(vec![("a", HostColumn::from_values(vec![5i32])), ("s", HostColumn::utf8(["x"]))])?;
//! let r = HostTable::new(vec![("b", HostColumn::from_values(vec![4i32]))])?;
//! assert!(checked.evaluate(&l, 0, &r, 0));
//! # Ok::<(), gpujoin_device::Error>(())
//! ```
//!
//! # Layout
//!
//! Everything public is re-exported here (`gpujoin_join::predicate::X`); the code lives in
//! `relation` (the types), `expression` (the tree and its builders), `check` (type
//! checking and [`CheckedPredicate`]), `evaluation` (host evaluation) and `shape` (equality
//! parts, residual and [`RangeCondition`]).

mod check;
mod evaluation;
mod expression;
mod relation;
mod shape;

pub use crate::maps::Side;

pub use check::{CheckedPredicate, MAX_ARITHMETIC_DEPTH};
pub use expression::{col_l, col_r, lit, CmpOp, Expr, Predicate, Scalar};
/// The table model's type: predicates are checked against table types, each compared as its
/// kernel type ([`DataType::kernel_type`]).
pub use crate::table::DataType;
pub use relation::schema_of;
pub use shape::RangeCondition;
