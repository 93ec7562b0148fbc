//! # gpujoin-testkit
//!
//! What the tests, benchmarks and demonstration of gpujoin share, kept out of the join library
//! (`gpujoin-join`) so that it has no test code and no `rand` among its dependencies:
//!
//! * [`table_reference`]: the one CPU reference, of the front door on host tables (equi and
//!   theta joins, every column type, NULL and NaN under both equalities, typed filters);
//! * [`reference`](mod@reference): gather maps as pairs in canonical order, and the exact test
//!   vectors of the source documents ([`reference::vectors`]);
//! * [`datagen`]: deterministic data generators (the paper's PK-FK workloads, Zipf skew,
//!   composite keys, null masks).
pub mod datagen;
pub mod reference;
pub mod table_reference;
