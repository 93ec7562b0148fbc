//! # gpujoin-primitives
//!
//! Safe, typed, stream-ordered GPU primitives: CUB's radix sort, scans, run-length encoding,
//! selection, partition, reduction and histogram (through `gpujoin-cub-sys`), and gpujoin's own
//! kernels: gather and scatter, iota and fill, vectorized sorted search, merge-path partitioning,
//! load-balancing search and stable radix partitioning (onesweep, and one-pass up to 12 bits).
//!
//! Every function takes the [`Stream`](gpujoin_device::Stream) it queues on; CUB's temporary
//! storage is allocated from that stream's pool and never shows in the API. Counts are 64-bit
//! except where noted (run-length encoding refuses `2^32 - 1` items or more).

#[allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code, clippy::all)]
mod ffi;
pub mod gather;
pub mod lbs;
pub mod partition;
pub mod partition_wide;
pub mod reduce;
pub mod rle;
pub mod scan;
pub mod search;
pub mod select;
pub mod sort;

pub use gather::{fill, gather, gather_into, gather_into_unchecked, iota_u32, iota_u64, scatter, NO_ROW};
pub use lbs::{count_offsets, load_balancing_search, Expansion};
pub use partition::{
    partition_pairs, partition_pairs_in_portions, partition_pairs_tile_items, partition_passes, radix_histogram, radix_partition, PartitionKey, Partitioned, MAX_PARTITION_BITS,
    PARTITION_PAIRS_MAX_ITEMS, PARTITION_PASS_BITS,
};
pub use partition_wide::{
    partition_pairs_wide, partition_pairs_wide_into, partition_pairs_wide_plan, WideOptions, WidePlan, WideWrites, PARTITION_WIDE_MAX_BITS, PARTITION_WIDE_MAX_ITEMS,
};
pub use reduce::{reduce_sum, SumItem};
pub use rle::{run_length_encode, run_length_encode_cub_into, run_length_encode_into, run_length_encode_single_pass_into, RleKey, Runs, CUB_RLE_MAX_ITEMS, RLE_MAX_ITEMS};
pub use scan::{exclusive_sum, exclusive_sum_in_place, inclusive_sum, ScanInto};
pub use search::{merge_path_partitions, sorted_search, Bound, SearchKey, SearchOutputs, SearchResult};
pub use select::{partition_flagged, select_by_flag, select_by_flag_into, select_flagged, select_if, Compare, SelectItem};
pub use sort::{sort_keys, sort_keys_new, sort_pairs, sort_pairs_new, sort_pairs_owned, RadixKey, SortOrder, SortPairsOwned, SortPairsWith};
