//! # gpujoin-arrow
//!
//! Arrow in and out for gpujoin (the arrow-rs 59 line, the one DataFusion 55.2 pins):
//!
//! - [`to_host_table`] / [`from_host_table`]: record batches and gpujoin's host tables.
//! - [`Uploader`], [`upload_batches`]: record batches (one or a stream) to a device
//!   [`Table`](gpujoin_join::table::Table) through pinned staging buffers, the host copy of the
//!   next piece overlapping the device copy of the last.
//! - [`Downloader`], [`download`]: a device table to record batches, copied from the device
//!   straight into pinned blocks that become the batches' buffers (returned to a pool when the
//!   batches are dropped).
//! - [`join()`]: one call from two record batch readers to a reader of the joined batches.
//! - [`join_indices_on`]: the joined rows as [`JoinIndices`] into inputs already on the device,
//!   for callers that take their output columns on the host (only keys and filter columns
//!   travel to the device).
//!
//! Which Arrow types a device table holds, and as what: see [`types`].

mod bits;
mod download;
mod host;
mod join;
mod pinned_blocks;
mod staging;
pub mod types;
mod upload;
mod views;

pub use download::{download, DownloadOptions, Downloader};
pub use host::{from_host_table, to_host_table};
pub use join::{join, join_indices_on, join_on, join_shared_on, join_streaming_on, DeviceInput, JoinIndices, JoinReader, JoinSpec};
pub use pinned_blocks::to_pinned;
pub use staging::{StagingOptions, StagingStats};
pub use views::concat_views;

/// Frees the page-locked host memory that uploads and downloads keep for reuse (the staging
/// buffers and the free download blocks, of every device) and returns its bytes. Page-locking
/// costs milliseconds per buffer, so both pools keep their buffers for the life of the process
/// unless this is called: for example when a long-lived process is done with Arrow transfers,
/// or before a leak check (compute-sanitizer's `--leak-check full` reports page-locked memory
/// still allocated at exit). Buffers in use (an upload running, a downloaded batch alive) are
/// kept; the next transfer page-locks new ones.
///
/// ```no_run
/// let bytes = gpujoin_arrow::release_pinned_memory();
/// println!("{bytes} bytes of pinned memory released");
/// ```
pub fn release_pinned_memory() -> usize {
    staging::release_free() + pinned_blocks::release_free()
}
pub use upload::{upload_batches, upload_batches_with, upload_batches_with_stats, upload_reader, Uploader, READER_GROUP_BYTES};
pub use types::{arrow_type, can_download_as, device_type, device_types};

pub mod c_device;
pub use c_device::{export_table, ArrowDeviceArray, ImportedTable};
