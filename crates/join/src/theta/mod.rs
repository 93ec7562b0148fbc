//! Theta joins and nested-loop joins on the GPU (issue 5, seeds 003 and 004): arbitrary
//! predicates ([`crate::predicate`]) evaluated on the device, a sort-based path for single
//! inequalities and bands, aggregates without materializing pairs.
//!
//! (Under construction.)
