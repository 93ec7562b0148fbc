//! # gpujoin
//!
//! Relational joins on NVIDIA GPUs. This facade re-exports the layers:
//! [`device`] (context, streams, buffers), [`primitives`] (sort, scan, search, gather...) and
//! [`join`] (every join algorithm). The CPU references and data generators of the tests live in
//! the `gpujoin-testkit` crate, which [`demo`] uses too.
pub mod demo;

pub use gpujoin_device as device;
pub use gpujoin_join as join;
pub use gpujoin_primitives as primitives;

/// The README's code blocks compile as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
