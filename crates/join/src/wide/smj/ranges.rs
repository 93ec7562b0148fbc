//! SMJ-OM's later payload columns transformed in bounded memory: key ranges.
//!
//! A later column must come out in the order of the side's stable sort by key (the order of
//! the first column and of the merge's positions). A full sort of `(keys, column)` needs the
//! sorted column, the sorted keys and CUB's two alternate buffers: four columns' worth. Here the
//! sorted keys of the first transform are cut into key ranges (by position: about `n / RANGES`
//! rows each); a key with many copies at a cut gets a range of its own. Then:
//!
//! 1. **Stage.** The side is taken in chunks of `n / CHUNKS` rows in row order. Each chunk is
//!    sorted with its column (stable); its rows of range `r` (a contiguous run of the sorted
//!    chunk, found by searching the range bounds) are copied, keys and values, to range `r`'s
//!    cursor inside the range's final place `[begin_r, end_r)` of the output column (the keys to
//!    a staging array of the side's length), and the cursor moves on.
//! 2. **Sort each range.** A range now holds one sorted run per chunk, in row order; a stable
//!    sort of the range by key (on the bits its keys can differ in) gives exactly the rows of
//!    the full stable sort at `[begin_r, end_r)`. A range of one key is already in row order.
//!
//! Beyond the output column, it needs the staged keys (one key column) and chunk- or
//! range-sized scratch (at most `4 * 1.25 / RANGES` columns), instead of three columns.

use gpujoin_device::{DeviceBuffer, DeviceView, Error, Pod, Result, Stream};
use gpujoin_primitives::{gather, sort_pairs, sorted_search, Bound, SearchOutputs, SortOrder, SortPairsWith};

use crate::table::ColumnView;
use crate::table::Column;
use crate::sort_merge::SortedKey;

/// Target number of key ranges (each at most `1.25 n / RANGES` rows).
pub(super) const RANGES: usize = 16;
/// Chunks of the staging pass.
pub(super) const CHUNKS: usize = 16;
/// Sides with fewer rows sort later columns whole (their scratch is small).
pub(super) const MIN_ROWS: usize = 1 << 18;

/// Order-preserving unsigned image of a key (the radix-sort order: sign bit flipped).
pub(crate) trait RangeKey: SortedKey + SortPairsWith<u32> + SortPairsWith<u64> + Copy {
    fn image(self) -> u64;
}
impl RangeKey for u32 {
    fn image(self) -> u64 {
        self as u64
    }
}
impl RangeKey for u64 {
    fn image(self) -> u64 {
        self
    }
}
impl RangeKey for i32 {
    fn image(self) -> u64 {
        (self as u32 ^ 0x8000_0000) as u64
    }
}
impl RangeKey for i64 {
    fn image(self) -> u64 {
        self as u64 ^ (1 << 63)
    }
}

/// One key range: its place `[begin, end)` in the sorted side, and the low radix-image bits
/// its keys can differ in (0: one key, already in row order after staging).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRange {
    pub begin: usize,
    pub end: usize,
    pub bits: u32,
}

/// The cuts of the ranges, for the chunk searches: each distinct bound value, and whether its
/// copies form a range of their own (then a chunk is cut at both its lower and upper bound).
pub(crate) struct RangePlan<K: Pod> {
    pub ranges: Vec<KeyRange>,
    bounds: DeviceBuffer<K>,
    own_range: Vec<bool>,
}

/// Bit length of `x` (0 for 0).
fn bit_len(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// Host part of the plan. `bounds`: distinct sorted bound images; `lower` / `upper`: their
/// lower and upper bounds in the sorted side of `n` rows; `min` / `max`: the side's smallest and
/// largest key images. A bound with more than `heavy` copies gets a range of its own. Returns
/// the ranges in key order and which bounds have their own range.
pub(crate) fn plan_ranges(n: usize, bounds: &[u64], lower: &[usize], upper: &[usize], min: u64, max: u64, heavy: usize) -> (Vec<KeyRange>, Vec<bool>) {
    let mut ranges = Vec::with_capacity(2 * bounds.len() + 1);
    let mut own = Vec::with_capacity(bounds.len());
    let (mut begin, mut lo) = (0usize, min);
    for (i, &b) in bounds.iter().enumerate() {
        // Keys in [begin, lower[i]) lie in [lo, b): they share b's and lo's common prefix.
        ranges.push(KeyRange { begin, end: lower[i], bits: bit_len(lo ^ b) });
        let heavy_bound = upper[i] - lower[i] > heavy;
        own.push(heavy_bound);
        if heavy_bound {
            ranges.push(KeyRange { begin: lower[i], end: upper[i], bits: 0 });
            begin = upper[i];
        } else {
            begin = lower[i];
        }
        lo = b;
    }
    ranges.push(KeyRange { begin, end: n, bits: bit_len(lo ^ max) });
    (ranges, own)
}

/// Positions of the cuts of a sorted run of keys, in range order (`lower` always, `upper` for
/// bounds with a range of their own), from the run's lower and upper bounds of every bound.
pub(crate) fn cuts(lower: &[u32], upper: &[u32], own: &[bool]) -> Vec<usize> {
    let mut c = Vec::with_capacity(2 * own.len());
    for i in 0..own.len() {
        c.push(lower[i] as usize);
        if own[i] {
            c.push(upper[i] as usize);
        }
    }
    c
}

fn search<K: RangeKey>(stream: &Stream, bounds: &DeviceView<'_, K>, sorted: &DeviceView<'_, K>, bound: Bound) -> Result<Vec<u32>> {
    let r = sorted_search(stream, bounds, sorted, bound, SearchOutputs::INDEX)?;
    r.a_index.ok_or_else(|| Error::invalid("internal: sorted search without index"))?.to_vec()
}

impl<K: RangeKey> RangePlan<K> {
    /// The plan of a side from its sorted keys (`n >= 1`).
    pub(crate) fn new(stream: &Stream, sorted: &DeviceView<'_, K>) -> Result<Self> {
        let n = sorted.len();
        let mut idx: Vec<u32> = (1..RANGES).map(|g| (g * n / RANGES) as u32).collect();
        idx.insert(0, 0);
        idx.push((n - 1) as u32);
        let picked = gather(stream, sorted, &stream.copy_from_host(&idx)?.view(), K::zeroed())?.to_vec()?;
        let (min, max) = (picked[0], picked[picked.len() - 1]);
        let mut values: Vec<K> = picked[1..picked.len() - 1].to_vec();
        values.dedup_by(|a, b| a.image() == b.image());
        let bounds = stream.copy_from_host(&values)?;
        let lower = search(stream, &bounds.view(), sorted, Bound::Lower)?;
        let upper = search(stream, &bounds.view(), sorted, Bound::Upper)?;
        let images: Vec<u64> = values.iter().map(|v| v.image()).collect();
        let (lower, upper): (Vec<usize>, Vec<usize>) = (lower.iter().map(|&x| x as usize).collect(), upper.iter().map(|&x| x as usize).collect());
        let (ranges, own_range) = plan_ranges(n, &images, &lower, &upper, min.image(), max.image(), n / (4 * RANGES));
        Ok(RangePlan { ranges, bounds, own_range })
    }

    /// `column` in the order of the stable sort of `keys` (whose sorted keys gave the plan).
    pub(crate) fn transform(&self, stream: &Stream, keys: &DeviceView<'_, K>, column: &ColumnView<'_>) -> Result<Column> {
        let bytes = match column.typed::<u32>() {
            Some(v) => self.transform_bits::<u32>(stream, keys, &v)?.into_bytes(),
            None => self.transform_bits::<u64>(stream, keys, &column.typed::<u64>().expect("a checked payload column"))?.into_bytes(),
        };
        Ok(Column::of_fixed_width(column.data_type(), bytes))
    }

    fn transform_bits<V: Pod>(&self, stream: &Stream, keys: &DeviceView<'_, K>, column: &DeviceView<'_, V>) -> Result<DeviceBuffer<V>>
    where
        K: SortPairsWith<V>,
    {
        let n = keys.len();
        gpujoin_device::check_same_len("keys", n, "column", column.len())?;
        let last = self.ranges.last().map_or(0, |r| r.end);
        if last != n {
            return Err(Error::invalid(format!("internal: key ranges cover {last} rows of {n}")));
        }
        let mut out = stream.alloc::<V>(n)?;
        let mut staged = stream.alloc::<K>(n)?;
        // 1. Stage: chunks in row order, sorted, their runs of each range at the range's cursor.
        let mut cursor: Vec<usize> = self.ranges.iter().map(|r| r.begin).collect();
        let chunk = n.div_ceil(CHUNKS).max(1);
        let mut begin = 0;
        while begin < n {
            let end = (begin + chunk).min(n);
            let len = end - begin;
            let mut sk = stream.alloc::<K>(len)?;
            let mut sv = stream.alloc::<V>(len)?;
            sort_pairs(stream, &keys.slice(begin..end), &column.slice(begin..end), &mut sk.view_mut(), &mut sv.view_mut(), SortOrder::Ascending, None)?;
            let lower = search(stream, &self.bounds.view(), &sk.view(), Bound::Lower)?;
            let upper = search(stream, &self.bounds.view(), &sk.view(), Bound::Upper)?;
            let mut cut = cuts(&lower, &upper, &self.own_range);
            cut.push(len);
            let mut from = 0;
            for (r, &to) in cut.iter().enumerate() {
                if to < from {
                    return Err(Error::invalid("internal: range cuts out of order"));
                }
                let (at, k) = (cursor[r], to - from);
                if k > 0 {
                    if at + k > self.ranges[r].end {
                        return Err(Error::invalid(format!("internal: range {r} overflows ({} + {k} > {})", at, self.ranges[r].end)));
                    }
                    stream.copy_device_to_device(&sv.slice(from..to), &mut out.slice_mut(at..at + k))?;
                    if self.ranges[r].bits > 0 {
                        stream.copy_device_to_device(&sk.slice(from..to), &mut staged.slice_mut(at..at + k))?;
                    }
                    cursor[r] += k;
                }
                from = to;
            }
            begin = end;
        }
        if cursor.iter().zip(&self.ranges).any(|(&c, r)| c != r.end) {
            return Err(Error::invalid("internal: key ranges not filled by the staging pass"));
        }
        // 2. Each range of several keys: a stable sort of its runs, on the bits its keys differ in.
        for r in &self.ranges {
            let len = r.end - r.begin;
            if r.bits == 0 || len < 2 {
                continue;
            }
            let bits = r.bits.min(K::BITS);
            let mut tk = stream.alloc::<K>(len)?;
            let mut tv = stream.alloc::<V>(len)?;
            sort_pairs(stream, &staged.slice(r.begin..r.end), &out.slice(r.begin..r.end), &mut tk.view_mut(), &mut tv.view_mut(), SortOrder::Ascending, Some(0..bits))?;
            drop(tk);
            stream.copy_device_to_device(&tv.view(), &mut out.slice_mut(r.begin..r.end))?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU model of the whole transform: plan from the sorted keys, stage chunk runs, sort
    /// each range; must equal the stable sort.
    fn model(keys: &[u32], vals: &[u32], ranges_target: usize, chunks: usize) -> Vec<u32> {
        let n = keys.len();
        let mut sorted = keys.to_vec();
        sorted.sort();
        let mut idx: Vec<usize> = (1..ranges_target).map(|g| g * n / ranges_target).collect();
        idx.dedup();
        let mut b: Vec<u64> = idx.iter().map(|&i| sorted[i] as u64).collect();
        b.dedup();
        let lower: Vec<usize> = b.iter().map(|&x| sorted.partition_point(|&k| (k as u64) < x)).collect();
        let upper: Vec<usize> = b.iter().map(|&x| sorted.partition_point(|&k| (k as u64) <= x)).collect();
        let (ranges, own) = plan_ranges(n, &b, &lower, &upper, sorted[0] as u64, sorted[n - 1] as u64, n / (4 * ranges_target));
        for r in &ranges {
            assert!(r.end - r.begin <= (5 * n).div_ceil(4 * ranges_target) + 1 || r.bits == 0, "{r:?} of {n}");
            for p in r.begin..r.end {
                let img = sorted[p] as u64;
                let base = sorted[r.begin] as u64;
                assert!(img >> r.bits == base >> r.bits, "range {r:?}: keys differ above bit {}", r.bits);
            }
        }
        let mut out = vec![u32::MAX; n];
        let mut staged = vec![0u32; n];
        let mut cursor: Vec<usize> = ranges.iter().map(|r| r.begin).collect();
        let chunk = n.div_ceil(chunks).max(1);
        let mut begin = 0;
        while begin < n {
            let end = (begin + chunk).min(n);
            let mut pairs: Vec<(u32, u32)> = (begin..end).map(|i| (keys[i], vals[i])).collect();
            pairs.sort_by_key(|p| p.0); // stable
            let lo: Vec<u32> = b.iter().map(|&x| pairs.partition_point(|p| (p.0 as u64) < x) as u32).collect();
            let hi: Vec<u32> = b.iter().map(|&x| pairs.partition_point(|p| (p.0 as u64) <= x) as u32).collect();
            let mut cut = cuts(&lo, &hi, &own);
            cut.push(pairs.len());
            let mut from = 0;
            for (r, &to) in cut.iter().enumerate() {
                for (j, p) in pairs[from..to].iter().enumerate() {
                    out[cursor[r] + j] = p.1;
                    staged[cursor[r] + j] = p.0;
                }
                cursor[r] += to - from;
                assert!(cursor[r] <= ranges[r].end);
                from = to;
            }
            begin = end;
        }
        for (r, c) in ranges.iter().zip(&cursor) {
            assert_eq!(*c, r.end);
            if r.bits > 0 {
                let mut p: Vec<(u32, u32)> = (r.begin..r.end).map(|i| (staged[i], out[i])).collect();
                p.sort_by_key(|x| x.0 & ((1u64 << r.bits) - 1) as u32);
                for (j, x) in p.into_iter().enumerate() {
                    out[r.begin + j] = x.1;
                }
            }
        }
        out
    }

    fn check(keys: Vec<u32>) {
        let vals: Vec<u32> = (0..keys.len() as u32).collect();
        let mut expect: Vec<(u32, u32)> = keys.iter().copied().zip(vals.iter().copied()).collect();
        expect.sort_by_key(|p| p.0);
        let expect: Vec<u32> = expect.into_iter().map(|p| p.1).collect();
        for (g, c) in [(16, 16), (4, 3), (2, 7), (16, 1)] {
            assert_eq!(model(&keys, &vals, g, c), expect, "ranges {g}, chunks {c}, keys {:?}", &keys[..keys.len().min(20)]);
        }
    }

    #[test]
    fn staged_ranges_equal_the_stable_sort() {
        let mut x = 12345u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        check(vec![7]);
        check(vec![3, 1, 2]);
        check(vec![5; 1000]); // one key
        check((0..5000).map(|_| (rnd() % 100_000) as u32).collect());
        check((0..5000).map(|_| (rnd() % 7) as u32).collect()); // few keys, each heavy
        check((0..5000).map(|i| if i % 3 == 0 { 42 } else { (rnd() % 1_000_000) as u32 }).collect()); // one heavy key
        check((0..4096).map(|i| u32::MAX - (i % 64)).collect()); // top bits
        check((0..3000).map(|_| if rnd() % 2 == 0 { 0 } else { u32::MAX }).collect());
    }

    #[test]
    fn images_keep_the_order() {
        assert!((-1i32).image() < 0i32.image() && i32::MIN.image() == 0 && i32::MAX.image() == u32::MAX as u64);
        assert!((-1i64).image() < 0i64.image() && i64::MIN.image() == 0 && i64::MAX.image() == u64::MAX);
    }

    #[test]
    fn plan_of_heavy_bound() {
        // 10 rows: keys 0 1 2 2 2 2 2 2 3 4; one bound 2 with 6 copies > heavy 2.
        let (r, own) = plan_ranges(10, &[2], &[2], &[8], 0, 4, 2);
        assert_eq!(own, vec![true]);
        assert_eq!(r, vec![KeyRange { begin: 0, end: 2, bits: 2 }, KeyRange { begin: 2, end: 8, bits: 0 }, KeyRange { begin: 8, end: 10, bits: 3 }]);
    }
}
