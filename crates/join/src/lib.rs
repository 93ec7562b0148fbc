//! # gpujoin-join
//!
//! Relational joins on the GPU. The front door is [`plan::Join`], a builder over two
//! [`table::Table`]s (Arrow's layout: every integer, float, boolean, date, timestamp, decimal and
//! string type, with validity bitmaps) for every join type and algorithm, with `run`, `count`,
//! `chunks`, `aggregate` and `explain` terminals; [`plan::JoinIndex`] builds once and probes many.
//!
//! ```no_run
//! use gpujoin_join::plan::Join;
//! use gpujoin_join::table::{HostColumn, HostTable, Table};
//! use gpujoin_join::JoinType;
//! # fn f(s: &gpujoin_device::Stream) -> gpujoin_device::Result<()> {
//! let l = Table::upload(s, &HostTable::new(vec![("k", HostColumn::from_values(vec![1i32, 2, 2]))])?)?;
//! let r = Table::upload(s, &HostTable::new(vec![("k", HostColumn::from_values(vec![2i32, 3])), ("v", HostColumn::utf8(["two", "three"]))])?)?;
//! let out = Join::new(JoinType::Inner).on(&l, &["k"], &r, &["k"]).select(&[], &["v"]).run(s)?;
//! assert_eq!(out.rows, 2); // v: "two", "two"
//! # Ok(()) }
//! ```
//!
//! Underneath, every algorithm returns [`GatherMaps`] (left and right [`RowId`]s with an explicit
//! [`RowId::NONE`] for the null side of outer rows) and has its own module and entry points, each
//! checked against the CPU references of `gpujoin-testkit`:
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
pub use plan::{Algorithm as JoinAlgorithm, Gather, Join, JoinChunkSource, JoinOutput};
pub use interleave::{interleave_join, interleave_join_many};
pub use keys::{DeviceColumn, KeyColumn, Keys};
pub use maps::{map_validity, materialize, materialize_unchecked, GatherMaps, Materialized, Payload, Side};
pub use sort_merge::{sort_merge_join, sort_merge_join_size, sorted_merge_join, SortedKey};

/// The exact row count of an equi-join of `left` and `right` (any join type, any keys), without
/// allocating the output when the keys pack into 64 bits: [`sort_merge_join_size`].
pub use sort_merge::sort_merge_join_size as join_size;
pub use types::*;
#[cfg(feature = "testing")]
pub use sort_merge::sorted_merge_join_with;
