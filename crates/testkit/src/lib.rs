//! # gpujoin-testkit
//!
//! What the tests, benchmarks and demonstration of gpujoin share, kept out of the join library
//! (`gpujoin-join`) so that it has no test code and no `rand` among its dependencies:
//!
//! * [`reference`](mod@reference): the CPU reference equi-joins every GPU join is checked against, and the exact
//!   test vectors of the source documents ([`reference::vectors`]);
//! * [`theta_reference`]: the CPU reference theta joins and aggregates (the aggregate types,
//!   [`Agg`](gpujoin_join::theta::Agg) and [`AggValue`](gpujoin_join::theta::AggValue), are the
//!   library's, re-exported there);
//! * [`table_reference`]: the CPU reference of the front door on host tables (equi and theta
//!   joins, every column type, NULL and NaN under both equalities, typed filters);
//! * [`datagen`]: deterministic data generators (the paper's PK-FK workloads, Zipf skew,
//!   composite keys, null masks).
pub mod datagen;
pub mod reference;
pub mod table_reference;
pub mod theta_reference;
