//! Key compression: one 8-byte integer key column (`i64` or `u64`) whose valid keys on both
//! sides together span less than 2^32 is joined as the `u32` offsets `key - min`, so that every
//! algorithm takes its 4-byte path (CUB sorts and partitions 64-bit keys about 3x slower per key
//! than 32-bit ones). Equality and order are kept: `a == b` exactly when `a - min == b - min`,
//! and `a < b` exactly when `a - min < b - min`, for every valid key of either side. Null rows
//! keep their validity bitmap (their offset is 0 and never read as a key).
//!
//! Cost: one reduction per side into one two-word range on the device, one host sync to read it,
//! and one pass writing the offsets (4 bytes a row, alive for the join).
//!
//! Example: left `i64` keys `[-5, 7, NULL]`, right `[-3, 7]`: range `[-5, 7]` spans 12, so the
//! join runs on left `[0, 12, 0]` (the third row still null) and right `[2, 12]`.

use gpujoin_cub_sys::result::launch;
use gpujoin_device::{DeviceBuffer, Result, Stream};

use super::{key_view, validity_words, values};
use crate::kernels::TypedValues;
use crate::table::{ColumnView, TableView};
use crate::kernels::sys::join as ffi;
use crate::types::JoinOptions;

/// The range of both sides' valid keys, as the signed or unsigned integers they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRange {
    pub min: i128,
    pub max: i128,
}

impl KeyRange {
    /// The range from the two words the device folded (`min`, `max` bits; an empty range has
    /// `min > max`), `None` when no key is valid.
    pub fn from_words(signed: bool, words: [u64; 2]) -> Option<KeyRange> {
        let (min, max) = if signed { (words[0] as i64 as i128, words[1] as i64 as i128) } else { (words[0] as i128, words[1] as i128) };
        (min <= max).then_some(KeyRange { min, max })
    }

    /// `max - min` when it fits 32 bits (the offsets `key - min` are then `u32`).
    ///
    /// Example: `[-5, 7]` spans 12; `[0, 2^32 - 1]` spans `u32::MAX`; `[0, 2^32]` does not fit.
    pub fn span(&self) -> Option<u32> {
        u32::try_from(self.max - self.min).ok()
    }
}

/// The compressed keys of both sides.
pub(crate) struct Compressed {
    pub left: DeviceBuffer<u32>,
    pub right: DeviceBuffer<u32>,
    /// Both sides' valid keys (`None`: no valid key; every offset is 0).
    pub range: Option<KeyRange>,
}

/// What [`compress`] found: compressed keys, or why the keys stay as they are.
pub(crate) enum Outcome {
    Compressed(Compressed),
    /// The keys are not one 8-byte integer column (no device work was done).
    NotEligible,
    /// Both sides' valid keys span 2^32 or more (the range was read).
    TooWide(KeyRange),
}

impl Compressed {
    /// The keys of one side as the algorithms take them: the offsets with the original validity.
    pub fn keys<'a>(&'a self, original: &TableView<'a>, side_left: bool) -> Result<TableView<'a>> {
        let offsets = ColumnView::from_values(if side_left { self.left.view() } else { self.right.view() });
        let column = match original.columns()[0].validity() {
            Some(v) => offsets.with_validity(v)?,
            None => offsets,
        };
        key_view(vec![column])
    }

    /// A note for a join's reason: `8-byte keys joined as 32-bit offsets from -5 (span 12)`.
    pub fn note(&self) -> String {
        match self.range {
            Some(r) => format!("8-byte keys joined as 32-bit offsets from {} (span {})", r.min, r.max - r.min),
            None => "8-byte keys joined as 32-bit offsets (no valid key)".to_string(),
        }
    }
}

/// A note for a join's reason when the keys span too much:
/// `8-byte keys kept: they span 4294967296, more than 32 bits`.
pub(crate) fn wide_note(r: KeyRange) -> String {
    format!("8-byte keys kept: they span {}, more than 32 bits", r.max - r.min)
}

/// Whether compression may be tried on this call (always, but in tests that switch it off:
/// `TestingOptions::no_key_compression`).
fn allowed(opts: JoinOptions) -> bool {
    #[cfg(feature = "testing")]
    return !opts.testing.no_key_compression;
    #[cfg(not(feature = "testing"))]
    {
        let _ = opts;
        true
    }
}

/// The 8-byte integer key column of keys of one column (`true`: signed).
fn eligible(keys: &TableView<'_>) -> Option<bool> {
    match keys.columns() {
        [c] => match values(c) {
            TypedValues::I64(_) => Some(true),
            TypedValues::U64(_) => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The bits and validity pointer of a one-column 8-byte key (checked by [`eligible`]).
fn raw(keys: &TableView<'_>) -> (*const u64, *const u32, usize) {
    let c = &keys.columns()[0];
    let v = validity_words(c).map_or(std::ptr::null(), |v| v.as_ptr());
    match values(c) {
        TypedValues::I64(x) => (x.as_ptr() as *const u64, v, x.len()),
        TypedValues::U64(x) => (x.as_ptr(), v, x.len()),
        _ => (std::ptr::null(), v, 0),
    }
}

/// Whether [`compress`] would look at the keys' range (one 8-byte integer column of the same
/// type on both sides): no device work.
pub(crate) fn eligible_pair(left: &TableView<'_>, right: &TableView<'_>, opts: JoinOptions) -> bool {
    matches!((eligible(left), eligible(right)), (Some(a), Some(b)) if a == b) && allowed(opts)
}

/// Compresses one 8-byte integer key column (both sides of the same type, already checked
/// comparable) to `u32` offsets from the smallest valid key of either side when both sides'
/// valid keys span less than 2^32. One reduction per side, one host sync, one offset pass per
/// side. Errors: device errors only.
pub(crate) fn compress(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, opts: JoinOptions) -> Result<Outcome> {
    let (Some(signed), true) = (eligible(left), eligible_pair(left, right, opts)) else { return Ok(Outcome::NotEligible) };
    let empty: [u64; 2] = if signed { [i64::MAX as u64, i64::MIN as u64] } else { [u64::MAX, 0] };
    let mut words = stream.copy_from_host(&empty)?;
    for keys in [left, right] {
        let (col, validity, n) = raw(keys);
        let out = words.view_mut().as_mut_ptr();
        // SAFETY: col holds n keys and validity (when not null) ceil(n / 32) words, as checked by
        // Keys; out holds the two range words.
        launch(stream, "key range", || unsafe {
            if signed {
                ffi::gj_j_key_range_i64(col as *const i64, validity, n as i64, out as *mut i64, stream.raw())
            } else {
                ffi::gj_j_key_range_u64(col, validity, n as i64, out, stream.raw())
            }
        })?;
    }
    let folded = stream.copy_to_host(&words.view())?;
    let range = KeyRange::from_words(signed, [folded[0], folded[1]]);
    let min = match range {
        Some(r) if r.span().is_none() => return Ok(Outcome::TooWide(r)),
        Some(r) => r.min as u64,
        None => 0,
    };
    let offsets = |keys: &TableView<'_>| -> Result<DeviceBuffer<u32>> {
        let (col, validity, n) = raw(keys);
        let mut out = stream.alloc::<u32>(n)?;
        let o = out.view_mut().as_mut_ptr();
        // SAFETY: col holds n keys, validity ceil(n / 32) words when not null, out n offsets;
        // every valid key lies in [min, min + 2^32) (the range was read above).
        launch(stream, "key offsets", || unsafe { ffi::gj_j_key_offsets(col, validity, n as i64, min, o, stream.raw()) })?;
        Ok(out)
    };
    Ok(Outcome::Compressed(Compressed { left: offsets(left)?, right: offsets(right)?, range }))
}

#[cfg(test)]
mod tests {
    use super::KeyRange;

    #[test]
    fn ranges_from_folded_words() {
        // Signed words are the i64 bits.
        let r = KeyRange::from_words(true, [(-5i64) as u64, 7]).unwrap();
        assert_eq!((r.min, r.max, r.span()), (-5, 7, Some(12)));
        // The empty range (no valid key): min > max.
        assert_eq!(KeyRange::from_words(true, [i64::MAX as u64, i64::MIN as u64]), None);
        assert_eq!(KeyRange::from_words(false, [u64::MAX, 0]), None);
        // Unsigned words above i64::MAX stay unsigned.
        let u = KeyRange::from_words(false, [u64::MAX - 3, u64::MAX]).unwrap();
        assert_eq!((u.min, u.max, u.span()), (u64::MAX as i128 - 3, u64::MAX as i128, Some(3)));
        // One key: span 0.
        assert_eq!(KeyRange::from_words(true, [i64::MIN as u64, i64::MIN as u64]).unwrap().span(), Some(0));
    }

    #[test]
    fn spans_at_the_32_bit_edge() {
        let r = |min: i128, max: i128| KeyRange { min, max }.span();
        assert_eq!(r(0, u32::MAX as i128), Some(u32::MAX));
        assert_eq!(r(0, 1 << 32), None);
        assert_eq!(r(-(1 << 31), (1 << 31) - 1), Some(u32::MAX));
        assert_eq!(r(-(1 << 31), 1 << 31), None);
        assert_eq!(r(i64::MIN as i128, i64::MAX as i128), None);
        assert_eq!(r(i64::MAX as i128 - u32::MAX as i128, i64::MAX as i128), Some(u32::MAX));
        assert_eq!(r(i64::MIN as i128, i64::MIN as i128 + u32::MAX as i128), Some(u32::MAX));
        assert_eq!(r(i64::MIN as i128, i64::MIN as i128 + (1 << 32)), None);
    }

    #[test]
    fn offsets_keep_equality_and_order() {
        // The device computes (key bits - min bits) mod 2^64, truncated to 32 bits; on keys within
        // [min, min + 2^32) that is key - min: the same order and equality as the keys.
        let off = |k: i64, min: i64| (k as u64).wrapping_sub(min as u64) as u32;
        let min = i64::MAX - u32::MAX as i64;
        let keys = [min, min + 1, i64::MAX - 1, i64::MAX];
        let offs: Vec<u32> = keys.iter().map(|&k| off(k, min)).collect();
        assert_eq!(offs, vec![0, 1, u32::MAX - 1, u32::MAX]);
        let min = -3i64;
        let keys = [-3i64, -1, 0, 5];
        let offs: Vec<u32> = keys.iter().map(|&k| off(k, min)).collect();
        assert_eq!(offs, vec![0, 2, 3, 8]);
        let umin = u64::MAX - 10;
        assert_eq!((u64::MAX).wrapping_sub(umin) as u32, 10);
    }
}
