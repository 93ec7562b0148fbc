//! One-pass, wide fan-out, stable radix partition of `(key, value)` pairs by a digit of up to 12
//! bits (up to 4096 partitions): [`partition_pairs_wide`] (cuda/kernels/partition_wide.cu).
//!
//! [`partition_pairs`](crate::partition_pairs) moves 8 bits per onesweep pass; this reads the
//! keys twice and the values once and writes both once, whatever the digit width up to 12 bits:
//! a histogram of each block's chunk of the input, an exclusive sum that gives every (digit,
//! block) its output region, and one scatter in which each block sorts its tiles by digit in
//! shared memory and appends each digit's rows to its region. Each block thus writes its rows of
//! a digit to one contiguous front, tile after tile, so partial sectors are completed by later
//! tiles: combined in L2 ([`WideWrites::L2`]) or in shared-memory buffers before they are written
//! ([`WideWrites::Shared`]). The partition offsets stay on the device, where a join reads them.
//!
//! Measured on an H100 (2^27 `u32`/`u32` pairs; perf/NOTES.md, session 17) it is slower than
//! CUB's radix sort on the same bits, so the joins do not use it: 12 bits 5.69 ms (shared-memory
//! buffers) against 2.28 ms, 8 bits 2.43 ms. Its histogram runs at 84-87% of DRAM throughput; its
//! scatter is latency-bound (29-30% of DRAM throughput, one block an SM).
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! // By bits 4..8: digits 3, 1, 3, 0.
//! let k = s.copy_from_host(&[0x35u32, 0x17, 0x32, 0x09])?;
//! let v = s.copy_from_host(&[0u32, 1, 2, 3])?;
//! let (mut ko, mut vo) = (s.alloc::<u32>(4)?, s.alloc::<u32>(4)?);
//! let offsets = partition_pairs_wide(s, &k.view(), &v.view(), &mut ko.view_mut(), &mut vo.view_mut(), 4..8)?;
//! assert_eq!(ko.to_vec()?, vec![0x09, 0x17, 0x35, 0x32]);
//! assert_eq!(vo.to_vec()?, vec![3, 1, 0, 2]);
//! // 2^4 + 1 offsets, on the device: partition 0 is rows 0..1, 1 is 1..2, 3 is 2..4.
//! assert_eq!(offsets.to_vec()?[..5], [0, 1, 2, 2, 4]);
//! # Ok(()) }
//! ```

use std::ffi::c_void;
use std::ops::Range;

use gpujoin_cub_sys::result::{check, check_count, with_temp};
use gpujoin_device::{check_same_len, DeviceBuffer, DeviceView, DeviceViewMut, Error, Pod, Result, Stream};

use crate::ffi;
use crate::partition::PartitionKey;

/// The widest digit [`partition_pairs_wide`] takes (4096 partitions).
pub const PARTITION_WIDE_MAX_BITS: u32 = 12;

/// The most rows [`partition_pairs_wide`] takes (`2^32`).
pub const PARTITION_WIDE_MAX_ITEMS: u64 = 1 << 32;

/// How the scatter of [`partition_pairs_wide`] combines the partial sectors of its write fronts
/// (a tuning choice; the output is the same).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WideWrites {
    /// [`Shared`](Self::Shared) above 8 bits where it can run, else [`L2`](Self::L2).
    #[default]
    Auto,
    /// Rows go straight to global memory; the L2 combines the partial sectors of the
    /// `blocks x 2^bits` fronts before they reach DRAM (about 17 MB per output array at 12 bits
    /// on an H100).
    L2,
    /// Software write-combining: a shared-memory buffer of one group (32 or 16 bytes of keys and
    /// the matching values) per digit, written out as whole aligned groups. Runs when the rows
    /// are fewer than `2^32`, both outputs are 16-byte aligned and the buffers fit in shared
    /// memory (on an H100: not with 8-byte values at 12 bits); otherwise the scatter uses
    /// [`L2`](Self::L2).
    Shared,
}

impl WideWrites {
    fn code(self) -> i32 {
        (match self {
            WideWrites::Auto => ffi::GJ_K_PARTW_WRITES_AUTO,
            WideWrites::L2 => ffi::GJ_K_PARTW_WRITES_L2,
            WideWrites::Shared => ffi::GJ_K_PARTW_WRITES_SHARED,
        }) as i32
    }
}

/// Tuning of [`partition_pairs_wide_into`]; the default is what [`partition_pairs_wide`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WideOptions {
    /// How the scatter combines partial sectors.
    pub writes: WideWrites,
    /// Number of blocks (chunks of the input); 0: the device's SM count times the tuning's
    /// blocks per SM. Capped at the number of tiles, and at least 2 when there are 2 tiles or
    /// more. Tests use a few blocks to put many tiles in a chunk.
    pub blocks: u32,
}

/// What [`partition_pairs_wide_into`] runs for a shape on the current device (from
/// [`partition_pairs_wide_plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WidePlan {
    /// [`WideWrites::L2`] or [`WideWrites::Shared`].
    pub writes: WideWrites,
    /// Items per write-combining group (1 for [`WideWrites::L2`]).
    pub group: usize,
    /// Items per tile of the scatter (a chunk is whole tiles).
    pub tile_items: usize,
    /// Blocks, i.e. chunks of the input.
    pub blocks: usize,
}

fn check_wide_args<K: PartitionKey, V: Pod>(n: usize, bits: &Range<u32>) -> Result<()> {
    if bits.start >= bits.end || bits.end > K::BITS || bits.end - bits.start > PARTITION_WIDE_MAX_BITS {
        return Err(Error::invalid(format!(
            "wide partition bit range {}..{} for a {}-bit key (1 to {PARTITION_WIDE_MAX_BITS} bits)",
            bits.start,
            bits.end,
            K::BITS
        )));
    }
    crate::partition::check_value_bytes::<V>("partition_pairs_wide")?;
    check_count("partition_pairs_wide rows", n, PARTITION_WIDE_MAX_ITEMS)
}

/// The plan [`partition_pairs_wide_into`] follows for `n` rows of `(K, V)` by `bits` digit bits
/// with `options` on the stream's device: the write mode that runs, the group and tile sizes and
/// the number of chunks. `outputs_aligned`: whether both outputs start 16-byte aligned (buffers
/// from [`Stream::alloc`] do).
pub fn partition_pairs_wide_plan<K: PartitionKey, V: Pod>(
    stream: &Stream,
    n: usize,
    bits: u32,
    options: WideOptions,
    outputs_aligned: bool,
) -> Result<WidePlan> {
    check_wide_args::<K, V>(n, &(0..bits))?;
    stream.device().bind_to_thread()?;
    let (mut writes, mut group, mut tile, mut blocks) = (0i32, 0i32, 0i32, 0i32);
    let blocks_wanted = options.blocks.min(i32::MAX as u32) as i32;
    // SAFETY: a host function; the outputs are live locals.
    let rc = unsafe {
        ffi::gj_k_partw_plan(
            std::mem::size_of::<K>() as i32,
            std::mem::size_of::<V>() as i32,
            n as i64,
            bits as i32,
            options.writes.code(),
            outputs_aligned as i32,
            blocks_wanted,
            &mut writes,
            &mut group,
            &mut tile,
            &mut blocks,
        )
    };
    check("partition_pairs_wide plan", rc)?;
    let writes = if writes == ffi::GJ_K_PARTW_WRITES_SHARED as i32 { WideWrites::Shared } else { WideWrites::L2 };
    Ok(WidePlan { writes, group: group as usize, tile_items: tile as usize, blocks: blocks as usize })
}

/// Stable radix partition of `(keys_in, values_in)` by the key bits `bits` (1 to 12 of them) in
/// one pass: the outputs are ordered ascending by the digit `(key >> bits.start) &
/// (2^bits.len() - 1)` only, rows with equal digits in input order; the same output as
/// [`sort_pairs`](crate::sort_pairs)`(.., SortOrder::Ascending, Some(bits))`. Returns the
/// `2^bits.len() + 1` partition offsets on the device (partition `d` is rows `offsets[d]..
/// offsets[d + 1]`), allocated from the stream's pool.
///
/// Values are any 4- or 8-byte [`Pod`] type, moved as raw bits. At most
/// [`PARTITION_WIDE_MAX_ITEMS`] rows. Deterministic; the inputs are never written; does not wait
/// for the stream. A wider digit, an empty range or one past the key is an
/// [`Error::InvalidArgument`].
pub fn partition_pairs_wide<K: PartitionKey, V: Pod>(
    stream: &Stream,
    keys_in: &DeviceView<'_, K>,
    values_in: &DeviceView<'_, V>,
    keys_out: &mut DeviceViewMut<'_, K>,
    values_out: &mut DeviceViewMut<'_, V>,
    bits: Range<u32>,
) -> Result<DeviceBuffer<u64>> {
    check_wide_args::<K, V>(keys_in.len(), &bits)?;
    let mut offsets = stream.alloc::<u64>((1usize << (bits.end - bits.start)) + 1)?;
    partition_pairs_wide_into(stream, keys_in, values_in, keys_out, values_out, &mut offsets.view_mut(), bits, WideOptions::default())?;
    Ok(offsets)
}

/// [`partition_pairs_wide`] into a caller's offsets buffer (`2^bits.len() + 1` entries), with
/// tuning `options` (the write mode and the number of chunks; the output does not depend on them).
#[allow(clippy::too_many_arguments)]
pub fn partition_pairs_wide_into<K: PartitionKey, V: Pod>(
    stream: &Stream,
    keys_in: &DeviceView<'_, K>,
    values_in: &DeviceView<'_, V>,
    keys_out: &mut DeviceViewMut<'_, K>,
    values_out: &mut DeviceViewMut<'_, V>,
    offsets: &mut DeviceViewMut<'_, u64>,
    bits: Range<u32>,
    options: WideOptions,
) -> Result<()> {
    let n = keys_in.len();
    check_wide_args::<K, V>(n, &bits)?;
    crate::partition::check_pair_lengths(keys_in, values_in, keys_out, values_out)?;
    check_same_len("partitions + 1", (1usize << (bits.end - bits.start)) + 1, "offsets", offsets.len())?;
    let (ki, ko) = (keys_in.as_ptr(), keys_out.as_mut_ptr());
    let (vi, vo) = (values_in.as_ptr() as *const c_void, values_out.as_mut_ptr() as *mut c_void);
    let off = offsets.as_mut_ptr();
    let (b0, b1, s) = (bits.start as i32, bits.end as i32, stream.raw());
    let (writes, blocks) = (options.writes.code(), options.blocks.min(i32::MAX as u32) as i32);
    let value_bytes = std::mem::size_of::<V>();
    // SAFETY: live device ranges of n items each (inputs borrowed shared, outputs exclusively, so
    // they do not overlap) and 2^bits + 1 offsets; values are moved as raw 4- or 8-byte words.
    with_temp(stream, "partition_pairs_wide", |t, tb| unsafe {
        if value_bytes == 4 {
            K::PARTITION_WIDE_V32(t, tb, ki, vi as *const u32, ko, vo as *mut u32, off, n as i64, b0, b1, writes, blocks, s)
        } else {
            K::PARTITION_WIDE_V64(t, tb, ki, vi as *const u64, ko, vo as *mut u64, off, n as i64, b0, b1, writes, blocks, s)
        }
    })
}
