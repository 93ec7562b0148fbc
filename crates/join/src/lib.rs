//! # gpujoin-join
//!
//! Relational joins on the GPU. Every algorithm returns gather maps (left and right [`RowId`]s
//! with an explicit [`RowId::NONE`]) and has a CPU reference in [`reference`].
pub mod datagen;
pub mod reference;
pub mod types;

pub use types::*;
