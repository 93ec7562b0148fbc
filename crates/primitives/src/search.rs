//! Vectorized sorted search (ModernGPU's `SortedSearch`) and merge-path partitioning.
//!
//! Both inputs must be sorted ascending in radix-sort order (see [`crate::sort`]).
//!
//! ```no_run
//! # use gpujoin_primitives::*; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let a = s.copy_from_host(&[1u32, 3, 3, 9])?;
//! let b = s.copy_from_host(&[1u32, 1, 3, 5])?;
//! let r = sorted_search(s, &a.view(), &b.view(), Bound::Lower, SearchOutputs::ALL)?;
//! assert_eq!(r.a_index.unwrap().to_vec()?, vec![0, 2, 2, 4]);   // lower bounds in B
//! assert_eq!(r.a_match.unwrap().to_vec()?, vec![1, 1, 1, 0]);   // A[i] occurs in B
//! assert_eq!(r.b_match.unwrap().to_vec()?, vec![1, 1, 1, 0]);   // B[j] occurs in A
//! # Ok(()) }
//! ```

use gpujoin_cub_sys::result::{launch, with_temp};
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Pod, Result, Stream};

use crate::ffi;
use crate::sort::RadixKey;

/// Which bound [`sorted_search`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// First position in B whose item is not less than `A[i]`.
    Lower,
    /// First position in B whose item is greater than `A[i]`.
    Upper,
}

/// Which outputs [`sorted_search`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOutputs {
    pub a_index: bool,
    pub a_match: bool,
    pub b_match: bool,
}

impl SearchOutputs {
    pub const ALL: SearchOutputs = SearchOutputs { a_index: true, a_match: true, b_match: true };
    pub const INDEX: SearchOutputs = SearchOutputs { a_index: true, a_match: false, b_match: false };
}

/// Results of [`sorted_search`]: `None` where not asked for.
pub struct SearchResult {
    /// Bound of each A item in B (`u32`, so B holds fewer than 2^32 items).
    pub a_index: Option<DeviceBuffer<u32>>,
    /// 1 where `A[i]` occurs in B.
    pub a_match: Option<DeviceBuffer<u8>>,
    /// 1 where `B[j]` occurs in A.
    pub b_match: Option<DeviceBuffer<u8>>,
}

type SearchFn<T> = unsafe extern "C" fn(
    *mut std::ffi::c_void,
    *mut usize,
    *const T,
    i64,
    *const T,
    i64,
    i32,
    *mut u32,
    *mut u8,
    *mut u8,
    ffi::gj_k_stream_t,
) -> i32;
type PartitionFn<T> = unsafe extern "C" fn(*const T, i64, *const T, i64, i64, i32, *mut i64, ffi::gj_k_stream_t) -> i32;

/// A key type for sorted search: `u32, u64, i32, i64, f32, f64`.
pub trait SearchKey: RadixKey {
    #[doc(hidden)]
    const SEARCH: SearchFn<Self>;
    #[doc(hidden)]
    const PARTITIONS: PartitionFn<Self>;
}
macro_rules! search_key {
    ($t:ty, $s:ident, $p:ident) => {
        impl SearchKey for $t {
            const SEARCH: SearchFn<Self> = ffi::$s;
            const PARTITIONS: PartitionFn<Self> = ffi::$p;
        }
    };
}
search_key!(u32, gj_k_sorted_search_u32, gj_k_merge_path_partitions_u32);
search_key!(u64, gj_k_sorted_search_u64, gj_k_merge_path_partitions_u64);
search_key!(i32, gj_k_sorted_search_i32, gj_k_merge_path_partitions_i32);
search_key!(i64, gj_k_sorted_search_i64, gj_k_merge_path_partitions_i64);
search_key!(f32, gj_k_sorted_search_f32, gj_k_merge_path_partitions_f32);
search_key!(f64, gj_k_sorted_search_f64, gj_k_merge_path_partitions_f64);

fn alloc_opt<T: Pod>(stream: &Stream, want: bool, n: usize) -> Result<Option<DeviceBuffer<T>>> {
    want.then(|| stream.alloc::<T>(n)).transpose()
}

/// For each item of sorted `a`, its lower or upper bound in sorted `b`, and match flags both
/// ways. Reads each input once (merge path), whatever the duplicates.
pub fn sorted_search<T: SearchKey>(stream: &Stream, a: &DeviceView<'_, T>, b: &DeviceView<'_, T>, bound: Bound, outputs: SearchOutputs) -> Result<SearchResult> {
    if b.len() as u64 >= u32::MAX as u64 {
        return Err(Error::too_large("sorted search: items in B", b.len() as u64, u32::MAX as u64 - 1));
    }
    let mut res = SearchResult {
        a_index: alloc_opt(stream, outputs.a_index, a.len())?,
        a_match: alloc_opt(stream, outputs.a_match, a.len())?,
        b_match: alloc_opt(stream, outputs.b_match, b.len())?,
    };
    let ai = res.a_index.as_mut().map_or(std::ptr::null_mut(), |x| x.view_mut().as_mut_ptr());
    let am = res.a_match.as_mut().map_or(std::ptr::null_mut(), |x| x.view_mut().as_mut_ptr());
    let bm = res.b_match.as_mut().map_or(std::ptr::null_mut(), |x| x.view_mut().as_mut_ptr());
    let upper = (bound == Bound::Upper) as i32;
    // SAFETY: live device ranges of the stated lengths; outputs sized above.
    with_temp(stream, "sorted_search", |t, tb| unsafe {
        T::SEARCH(t, tb, a.as_ptr(), a.len() as i64, b.as_ptr(), b.len() as i64, upper, ai, am, bm, stream.raw())
    })?;
    Ok(res)
}

/// Merge-path partitions of the merge of sorted `a` and `b` into tiles of `tile` items:
/// entry `p` is the number of A items among the first `min(p * tile, |a| + |b|)` merged items
/// (`ceil((|a|+|b|)/tile) + 1` entries). With `a_first_on_ties`, equal A items precede B's.
pub fn merge_path_partitions<T: SearchKey>(stream: &Stream, a: &DeviceView<'_, T>, b: &DeviceView<'_, T>, tile: usize, a_first_on_ties: bool) -> Result<DeviceBuffer<i64>> {
    if tile == 0 {
        return Err(Error::invalid("merge path tile size 0"));
    }
    let parts = (a.len() + b.len()).div_ceil(tile) + 1;
    let mut out = stream.alloc::<i64>(parts)?;
    let p = out.view_mut().as_mut_ptr();
    // SAFETY: live device ranges; out holds `parts` entries.
    launch(stream, "merge_path_partitions", || unsafe {
        T::PARTITIONS(a.as_ptr(), a.len() as i64, b.as_ptr(), b.len() as i64, tile as i64, a_first_on_ties as i32, p, stream.raw())
    })?;
    Ok(out)
}
