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
//! checked against the CPU references of `gpujoin-testkit`. They take the table model's views:
//! key columns of the kernels' key types as a [`table::TableView`] (`keys::check_keys`) and
//! payload columns as [`table::ColumnView`]s, or relations (a [`table::TableView`] whose
//! columns have the kernels' types, `device_relation::check_relation`, read in place), return
//! materialized payloads as [`table::Column`]s and [`table::Table`]s, and are public only with
//! the feature `algorithms`, for benchmarks and tests that time or check one algorithm by itself:
//!
//! | algorithm | entry points (feature `algorithms`) | seed |
//! |---|---|---|
//! | ModernGPU sort-merge join | `sorted_merge_join` (sorted keys), `sort_merge_join` (any keys), `sort_merge_join_size` | 000 |
//! | interleave join | `interleave_join`, `interleave_join_many` (more than two tables) | 001 |
//! | partitioned hash join (GFUR/GFTR), non-partitioned hash join | `partitioned_hash_join`, `partitioned_hash_join_with_payloads`, `hash_join` | 002 |
//! | wide joins: SMJ-UM/OM, PHJ-UM/OM, NPHJ, `Algorithm::Auto`, join sequences | `wide::join`, `wide::join_sequence` | 002 |
//! | indexed nested-loop join (numeric and string keys) | `indexed_nested_loop::SortedIndex`, `indexed_nested_loop::indexed_nested_loop_join` | 003 |
//! | theta joins: sorted (inequality, band), nested loop, mixed; aggregates | [`theta::theta_join`], [`theta::theta_aggregate`], [`theta::theta_materialize`] | 003, 004 |
//! | results larger than device memory: chunks, host streaming | [`chunked::join_chunks`], [`theta::theta_join_chunks`], [`chunked::stream_to_host`] | 003, 004 |
//! | peak device memory of every algorithm as a formula of its sizes | [`memory::peak_bytes`], [`memory::working_bytes`] | issue 10 |

/// Modules public with the feature `algorithms` only (crate-private otherwise).
macro_rules! algorithm_modules {
    ($($name:ident),* $(,)?) => {
        $(
            #[cfg(feature = "algorithms")]
            pub mod $name;
            #[cfg(not(feature = "algorithms"))]
            #[allow(dead_code, unused_imports)]
            pub(crate) mod $name;
        )*
    };
}

algorithm_modules!(device_relation, hash_join, indexed_nested_loop, interleave, keys, sort_merge, wide);

pub mod chunked;
mod common;
mod kernels;
pub mod maps;
pub mod memory;
pub mod plan;
pub mod predicate;
pub mod table;
pub mod theta;
mod trace;
pub mod types;

// Named by the front door's and `memory`'s public types (`JoinOutput::stats`,
// `memory::PeakAlgorithm`): public whatever the features.
pub use hash_join::{JoinStats, Materialization};
pub use maps::{GatherMaps, Side};
pub use plan::{Algorithm as JoinAlgorithm, Gather, Join, JoinChunkSource, JoinOutput};
pub use types::*;

/// Re-exports at the crate root, public with the feature `algorithms` only.
macro_rules! algorithm_exports {
    ($($(#[$m:meta])* $path:path),* $(,)?) => {
        $(
            #[cfg(feature = "algorithms")]
            $(#[$m])*
            pub use $path;
            #[cfg(not(feature = "algorithms"))]
            #[allow(unused_imports)]
            pub(crate) use $path;
        )*
    };
}

algorithm_exports!(
    hash_join::non_partitioned_hash_join,
    hash_join::non_partitioned_hash_join_with_stats,
    hash_join::partitioned_hash_join,
    hash_join::partitioned_hash_join_with_payloads,
    hash_join::HashJoinOutput,
    hash_join::JoinedRelation,
    interleave::interleave_join,
    interleave::interleave_join_many,
    maps::map_validity,
    maps::materialize,
    maps::materialize_unchecked,
    sort_merge::sort_merge_join,
    sort_merge::sort_merge_join_size,
    sort_merge::sorted_merge_join,
    sort_merge::SortedKey,
);
/// The exact row count of an equi-join of `left` and `right` (any join type, any keys), without
/// allocating the output when the keys pack into 64 bits: `sort_merge_join_size`.
#[cfg(feature = "algorithms")]
pub use sort_merge::sort_merge_join_size as join_size;
#[cfg(feature = "testing")]
pub use sort_merge::sorted_merge_join_with;
