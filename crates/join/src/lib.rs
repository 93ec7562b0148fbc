//! # gpujoin-join
//!
//! Relational joins on the GPU. Every algorithm returns [`GatherMaps`] (left and right
//! [`RowId`]s with an explicit [`RowId::NONE`] for the null side of outer rows); payload columns
//! are gathered through them separately ([`materialize`]). Each algorithm has its own module and
//! is checked against the CPU references of the `gpujoin-testkit` crate (`gpujoin_testkit::reference`
//! for equi-joins, `gpujoin_testkit::theta_reference` for theta joins), which also holds the data
//! generators of the tests and benchmarks (`gpujoin_testkit::datagen`).
//!
//! The cargo feature `testing` (tests and benchmarks only) adds test-only knobs to single calls,
//! never process-wide: `JoinOptions::testing` (`TestingOptions`: the merge join's general path,
//! a weak hash, the partitioned hash join's tuning), `sorted_merge_join_with`,
//! `theta::sorted::SortedTesting` (poisoned outputs, the aggregate path) and
//! `wide::sample_for_tests`.
//!
//! | algorithm | entry points | seed |
//! |---|---|---|
//! | ModernGPU sort-merge join | [`sorted_merge_join`] (sorted keys), [`sort_merge_join`] (any keys), [`sort_merge_join_size`] | 000 |
//! | interleave join | [`interleave_join`], [`interleave_join_many`] (more than two tables) | 001 |
//! | partitioned hash join (GFUR/GFTR), non-partitioned hash join | [`partitioned_hash_join`], [`partitioned_hash_join_with_payloads`], [`fn@hash_join`] | 002 |
//! | wide joins: SMJ-UM/OM, PHJ-UM/OM, NPHJ, `Algorithm::Auto`, join sequences | [`wide::join`], [`wide::join_sequence`] | 002 |
//! | indexed nested-loop join (numeric and string keys) | [`indexed_nested_loop::SortedIndex`], [`indexed_nested_loop::indexed_nested_loop_join`] | 003 |
//! | theta joins: sorted (inequality, band), nested loop, mixed; aggregates | [`theta::theta_join`], [`theta::theta_aggregate`], [`theta::theta_materialize`] | 003, 004 |
//! | results larger than device memory: chunks, host streaming | [`chunked::join_chunks`], [`theta::theta_join_chunks`], [`chunked::stream_to_host`] | 003, 004 |
//! | peak device memory of every algorithm as a formula of its sizes | [`memory::peak_bytes`], [`memory::working_bytes`] | issue 10 |
pub mod chunked;
mod common;
pub mod device_relation;
pub mod hash_join;
pub mod indexed_nested_loop;
pub mod interleave;
mod kernels;
pub mod keys;
pub mod maps;
pub mod memory;
pub mod plan;
pub mod predicate;
pub mod sort_merge;
pub mod table;
pub mod theta;
mod trace;
pub mod types;
pub mod wide;

pub use hash_join::{hash_join, hash_join_with_stats, partitioned_hash_join, partitioned_hash_join_with_payloads, HashJoinOutput, JoinStats, JoinedRelation, Materialization};
pub use plan::{Algorithm as JoinAlgorithm, Gather, Join, JoinOutput};
pub use interleave::{interleave_join, interleave_join_many};
pub use keys::{pack_validity, DeviceColumn, DeviceKeys, KeyColumn, Keys};
pub use maps::{map_validity, materialize, materialize_unchecked, GatherMaps, Materialized, Payload, Side};
pub use sort_merge::{sort_merge_join, sort_merge_join_size, sorted_merge_join, SortedKey};

/// The exact row count of an equi-join of `left` and `right` (any join type, any keys), without
/// allocating the output when the keys pack into 64 bits: [`sort_merge_join_size`].
pub use sort_merge::sort_merge_join_size as join_size;
pub use types::*;
#[cfg(feature = "testing")]
pub use sort_merge::sorted_merge_join_with;
