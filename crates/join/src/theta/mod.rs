//! Theta joins and nested-loop joins on the GPU (issue 5, seeds 003 and 004): arbitrary
//! predicates ([`crate::predicate`]) evaluated on the device, a sort-based path for single
//! inequalities and bands, aggregates without materializing pairs.
//!
//! * [`nested_loop`]: the predicate compiled to a device program; tiles of the inner relation in
//!   shared memory, count / prefix sum / write, aggregates, mixed (equality + residual) joins.
//! * [`sorted`]: a single inequality or a band by sorting one side, sorted search, prefix sums
//!   and load-balancing search.
//!
//! (Under construction: the dispatcher choosing between them comes with both.)

pub mod nested_loop;
pub mod sorted;

pub use crate::theta_reference::{Agg, AggValue};
