//! # gpujoin-multi-gpu
//!
//! Joins across the GPUs of one host. Both tables are spread over the GPUs ([`DistributedTable`],
//! one part a GPU); a [`DistributedJoin`] hash-partitions both sides by their keys into one part
//! a GPU, exchanges the parts all-to-all over NCCL, and joins each GPU's share with gpujoin's
//! one-table [`Join`](gpujoin_join::plan::Join), so every algorithm, join type, key type, NULL and
//! NaN rule and filter of the one-table join carries over. A side small enough is broadcast
//! instead, and heavy keys (skew) are spread over every GPU (see [`join`]).
//!
//! | step | where |
//! |---|---|
//! | ranks, streams, transport (NCCL, or device copies for ranks on one GPU) | [`Cluster`] |
//! | key hashes, destinations (the crate's CUDA kernels, `cuda/multi/`) | `kernels` |
//! | heavy keys: which side is spread, which copied | [`skew`] |
//! | the all-to-all of table parts and their assembly | `exchange` |
//! | the builder and its steps | [`join`] |
//!
//! [`Cluster::on_one_device`] runs every step with several ranks on one GPU, exchanging by device
//! copies: the tests of the multi-rank logic run on a single-GPU machine.

pub mod cluster;
mod exchange;
pub mod join;
mod kernels;
pub mod skew;
pub mod table;

pub use cluster::Cluster;
pub use join::{DistributedJoin, DistributedOutput, Distribution, Phases, SkewHandling};
pub use table::{concat_host, DistributedTable};
