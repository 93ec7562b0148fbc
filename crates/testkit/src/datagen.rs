//! Deterministic data generators for tests and benchmarks: the same arguments and seed always give
//! the same data (within one version of `rand`; `StdRng::seed_from_u64`).
//!
//! The workloads follow the PVLDB paper's (seed 002): a primary-key relation `R` with dense unique
//! keys ([`shuffled_dense_keys`]), a foreign-key relation `S` referencing it uniformly
//! ([`foreign_keys_uniform`]), with a match ratio ([`foreign_keys_match_ratio`]) or with Zipf skew
//! ([`zipf_keys`]); plus ModernGPU-style sorted random keys ([`sorted_random`]), composite keys
//! ([`composite_keys`]) and null masks ([`random_validity`]).
//!
//! Generators whose arguments can be out of range return [`Error::InvalidArgument`] instead of
//! panicking.

use gpujoin_device::{Error, Result};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use gpujoin_join::table::{HostColumn, HostTable};
use gpujoin_join::types::MAX_KEY_COLUMNS;

/// Number of distinct `u32` values (2^32).
const U32_VALUES: u64 = 1 << 32;

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// Checks that keys `0..count` fit in a `u32`.
fn check_u32_domain(what: &str, count: usize) -> Result<()> {
    if count as u64 > U32_VALUES {
        return Err(Error::invalid(format!(
            "{what} is {count}, but keys 0..{what} must fit in u32 (at most 2^32)"
        )));
    }
    Ok(())
}

/// The keys `0..n`, each once, in random order: a primary-key column.
///
/// Errors: [`Error::InvalidArgument`] when `n > 2^32`.
///
/// ```
/// use gpujoin_testkit::datagen::shuffled_dense_keys;
/// let mut keys = shuffled_dense_keys(5, 42)?; // e.g. [3, 0, 4, 1, 2]
/// keys.sort();
/// assert_eq!(keys, vec![0, 1, 2, 3, 4]);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn shuffled_dense_keys(n: usize, seed: u64) -> Result<Vec<u32>> {
    check_u32_domain("n", n)?;
    // With n = 2^32 the last key is u32::MAX, so build by u64 and narrow.
    let mut keys: Vec<u32> = (0..n as u64).map(|k| k as u32).collect();
    keys.shuffle(&mut rng(seed));
    Ok(keys)
}

/// The keys `0..n` as `u64`, each once, in random order (8-byte primary keys).
///
/// ```
/// use gpujoin_testkit::datagen::shuffled_dense_keys_u64;
/// let mut keys = shuffled_dense_keys_u64(3, 7); // e.g. [2, 0, 1]
/// keys.sort();
/// assert_eq!(keys, vec![0, 1, 2]);
/// ```
pub fn shuffled_dense_keys_u64(n: usize, seed: u64) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..n as u64).collect();
    keys.shuffle(&mut rng(seed));
    keys
}

/// `s_len` foreign keys into a primary-key relation with keys `0..r_len`, each primary key used
/// equally often (`s_len / r_len` times, the first `s_len % r_len` keys once more), shuffled.
///
/// Errors: [`Error::InvalidArgument`] when `r_len > 2^32`, or `r_len == 0` while `s_len > 0`.
///
/// ```
/// use gpujoin_testkit::datagen::foreign_keys_uniform;
/// let mut s = foreign_keys_uniform(3, 6, 1)?; // e.g. [2, 0, 1, 1, 0, 2]
/// s.sort();
/// assert_eq!(s, vec![0, 0, 1, 1, 2, 2]);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn foreign_keys_uniform(r_len: usize, s_len: usize, seed: u64) -> Result<Vec<u32>> {
    check_u32_domain("r_len", r_len)?;
    if r_len == 0 && s_len > 0 {
        return Err(Error::invalid(format!("{s_len} foreign keys cannot reference an empty relation")));
    }
    let mut keys: Vec<u32> = (0..s_len as u64).map(|i| (i % r_len as u64) as u32).collect();
    keys.shuffle(&mut rng(seed));
    Ok(keys)
}

/// `s_len` foreign keys of which a fraction `ratio` (rounded to the nearest row count) hit the
/// primary keys `0..r_len` (spread evenly over them) and the rest miss, with random keys in
/// `r_len..=u32::MAX`; shuffled.
///
/// Errors: [`Error::InvalidArgument`] when `ratio` is not in `[0, 1]`, when there are hits but
/// `r_len == 0`, or when there are misses but no `u32` key is `>= r_len`.
///
/// ```
/// use gpujoin_testkit::datagen::foreign_keys_match_ratio;
/// let s = foreign_keys_match_ratio(100, 1000, 0.25, 3)?;
/// assert_eq!(s.iter().filter(|&&k| k < 100).count(), 250);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn foreign_keys_match_ratio(r_len: usize, s_len: usize, ratio: f64, seed: u64) -> Result<Vec<u32>> {
    if !(0.0..=1.0).contains(&ratio) {
        return Err(Error::invalid(format!("match ratio {ratio} is not in [0, 1]")));
    }
    check_u32_domain("r_len", r_len)?;
    let hits = ((ratio * s_len as f64).round() as usize).min(s_len);
    let misses = s_len - hits;
    if hits > 0 && r_len == 0 {
        return Err(Error::invalid(format!(
            "{hits} matching foreign keys cannot reference an empty relation"
        )));
    }
    if misses > 0 && r_len as u64 >= U32_VALUES {
        return Err(Error::invalid(format!(
            "{misses} foreign keys should miss, but r_len = {r_len} leaves no u32 key outside 0..r_len"
        )));
    }
    let mut rng = rng(seed);
    let mut keys: Vec<u32> = (0..hits as u64).map(|i| (i % r_len as u64) as u32).collect();
    if misses > 0 {
        let first_miss = r_len as u32; // r_len < 2^32 here
        keys.extend((0..misses).map(|_| rng.gen_range(first_miss..=u32::MAX)));
    }
    keys.shuffle(&mut rng);
    Ok(keys)
}

/// `n` keys drawn from a Zipf distribution over `0..domain`: key `k` has weight
/// `1 / (k + 1)^exponent`, so key 0 is the most frequent; `exponent = 0` is uniform.
///
/// A cumulative table of the `domain` weights is built once and each sample binary-searches it,
/// so 2^27 samples are fast (the table takes `8 * domain` bytes).
///
/// Errors: [`Error::InvalidArgument`] when `domain` is 0 or above 2^32, when `exponent` is
/// negative or not finite, or when the table cannot be allocated.
///
/// ```
/// use gpujoin_testkit::datagen::zipf_keys;
/// let keys = zipf_keys(10_000, 100, 1.0, 9)?; // e.g. [0, 3, 0, 41, 1, ...]
/// let zeros = keys.iter().filter(|&&k| k == 0).count();
/// let ones = keys.iter().filter(|&&k| k == 1).count();
/// assert!(keys.iter().all(|&k| k < 100) && zeros > ones);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn zipf_keys(n: usize, domain: usize, exponent: f64, seed: u64) -> Result<Vec<u32>> {
    if domain == 0 {
        return Err(Error::invalid("Zipf domain is empty"));
    }
    check_u32_domain("domain", domain)?;
    if !exponent.is_finite() || exponent < 0.0 {
        return Err(Error::invalid(format!("Zipf exponent {exponent} must be finite and >= 0")));
    }
    // cumulative[k] = sum of the weights of keys 0..=k.
    let mut cumulative: Vec<f64> = Vec::new();
    cumulative
        .try_reserve_exact(domain)
        .map_err(|_| Error::invalid(format!("cannot allocate a Zipf table of {domain} entries")))?;
    let mut total = 0.0f64;
    for k in 0..domain {
        total += ((k + 1) as f64).powf(-exponent);
        cumulative.push(total);
    }
    let mut rng = rng(seed);
    let keys = (0..n)
        .map(|_| {
            let u = rng.gen::<f64>() * total; // in [0, total)
                                              // The first key whose cumulative weight exceeds u; clamped against rounding.
            cumulative.partition_point(|&c| c <= u).min(domain - 1) as u32
        })
        .collect();
    Ok(keys)
}

/// `n` random keys in `lo..=hi` (both inclusive), sorted ascending, like ModernGPU's
/// `SortRandom<int>(n, lo, hi)`.
///
/// Errors: [`Error::InvalidArgument`] when `lo > hi`.
///
/// ```
/// use gpujoin_testkit::datagen::sorted_random;
/// let keys = sorted_random(30, 100, 130, 5)?; // e.g. [100, 101, 101, 104, ...]
/// assert!(keys.windows(2).all(|w| w[0] <= w[1]));
/// assert!(keys.iter().all(|k| (100..=130).contains(k)));
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn sorted_random(n: usize, lo: i32, hi: i32, seed: u64) -> Result<Vec<i32>> {
    if lo > hi {
        return Err(Error::invalid(format!("empty key range: lo = {lo} > hi = {hi}")));
    }
    let mut rng = rng(seed);
    let mut keys: Vec<i32> = (0..n).map(|_| rng.gen_range(lo..=hi)).collect();
    keys.sort_unstable();
    Ok(keys)
}

/// A validity mask of `n` rows where each row is null (`false`) with probability
/// `null_fraction`.
///
/// Errors: [`Error::InvalidArgument`] when `null_fraction` is not in `[0, 1]`.
///
/// ```
/// use gpujoin_testkit::datagen::random_validity;
/// assert_eq!(random_validity(3, 0.0, 1)?, vec![true, true, true]);
/// assert_eq!(random_validity(2, 1.0, 1)?, vec![false, false]);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn random_validity(n: usize, null_fraction: f64, seed: u64) -> Result<Vec<bool>> {
    if !(0.0..=1.0).contains(&null_fraction) {
        return Err(Error::invalid(format!("null fraction {null_fraction} is not in [0, 1]")));
    }
    let mut rng = rng(seed);
    Ok((0..n).map(|_| !rng.gen_bool(null_fraction)).collect())
}

/// Composite keys of `columns` (1 to [`MAX_KEY_COLUMNS`]) columns derived from scalar keys, each
/// column an injective function of the key, so two rows are equal on the composite key exactly
/// when their scalar keys are equal: a join on the composite keys has the same result as a join
/// on `keys`.
///
/// Column 0 is `U32(k)`, column 1 `U64(k * 0x9E37_79B9_7F4A_7C15)` (wrapping; an odd multiplier,
/// so injective), column 2 `I32(!k)` (bitwise not), column 3 `F64(k)` (exact).
///
/// Errors: [`Error::InvalidArgument`] when `columns` is 0 or above [`MAX_KEY_COLUMNS`].
///
/// The columns are named `k0`, `k1`, ... ([`COMPOSITE_KEY_NAMES`]).
///
/// ```
/// use gpujoin_join::table::Value;
/// use gpujoin_testkit::datagen::composite_keys;
/// let keys = composite_keys(&[0, 5], 3)?;
/// assert_eq!(keys.column("k0")?.value(1), Value::Int(5));
/// assert_eq!(keys.column("k2")?.value(1), Value::Int(-6));
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn composite_keys(keys: &[u32], columns: usize) -> Result<HostTable> {
    if columns == 0 || columns > MAX_KEY_COLUMNS {
        return Err(Error::invalid(format!(
            "{columns} key columns asked for; 1 to {MAX_KEY_COLUMNS} are supported"
        )));
    }
    let all = [
        HostColumn::from_values(keys.to_vec()),
        HostColumn::from_values(keys.iter().map(|&k| u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect::<Vec<u64>>()),
        HostColumn::from_values(keys.iter().map(|&k| !k as i32).collect::<Vec<i32>>()),
        HostColumn::from_values(keys.iter().map(|&k| f64::from(k)).collect::<Vec<f64>>()),
    ];
    HostTable::new(COMPOSITE_KEY_NAMES.iter().copied().zip(all).take(columns).collect())
}

/// The column names of [`composite_keys`].
pub const COMPOSITE_KEY_NAMES: [&str; MAX_KEY_COLUMNS] = ["k0", "k1", "k2", "k3"];

// ---------------------------------------------------------------------------------------------
// Large PK-FK workloads (wide joins, issue 4)
// ---------------------------------------------------------------------------------------------

/// Rows generated per independently seeded chunk by the parallel generators: the output depends
/// on the seed only, never on the number of threads.
const CHUNK_ROWS: usize = 1 << 20;

/// The seed of chunk `c` of a parallel generator.
fn chunk_seed(seed: u64, c: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (c as u64).wrapping_add(1).wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

/// Fills `out` chunk by chunk on all cores; `f(chunk_seed, chunk)` fills one chunk.
fn par_chunks<T: Send>(out: &mut [T], seed: u64, f: impl Fn(u64, &mut [T]) + Sync) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).max(1);
    let chunks: Vec<(usize, &mut [T])> = out.chunks_mut(CHUNK_ROWS).enumerate().collect();
    let per = chunks.len().div_ceil(threads).max(1);
    let mut groups: Vec<Vec<(usize, &mut [T])>> = Vec::new();
    let mut it = chunks.into_iter();
    loop {
        let g: Vec<_> = it.by_ref().take(per).collect();
        if g.is_empty() {
            break;
        }
        groups.push(g);
    }
    let f = &f;
    std::thread::scope(|s| {
        for g in groups {
            s.spawn(move || {
                for (c, chunk) in g {
                    f(chunk_seed(seed, c), chunk);
                }
            });
        }
    });
}

/// Zipf sampling by rejection-inversion (Hörmann and Derflinger, 1996; the algorithm of Apache
/// Commons' `RejectionInversionZipfSampler`): O(1) expected time per sample and no table, so
/// 2^27 samples over a 2^26-key domain take seconds, not minutes.
struct ZipfSampler {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl ZipfSampler {
    fn new(domain: usize, exponent: f64) -> ZipfSampler {
        let mut z = ZipfSampler { n: domain as f64, exponent, h_integral_x1: 0.0, h_integral_n: 0.0, s: 0.0 };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }
    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }
    fn h_integral(&self, x: f64) -> f64 {
        let lx = x.ln();
        helper2((1.0 - self.exponent) * lx) * lx
    }
    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (helper1(t) * x).exp()
    }
    /// A rank in `1..=n`.
    fn sample(&self, rng: &mut StdRng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.gen::<f64>() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// `ln(1 + x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// `n` Zipf-distributed foreign keys over `0..domain` (key `k` has weight `1 / (k + 1)^exponent`;
/// `exponent = 0` is uniform), like [`zipf_keys`] but in O(1) per key and on all cores, for the
/// paper's 2^27-row skewed workloads. Deterministic for a seed (whatever the core count); a
/// different stream of samples than [`zipf_keys`] with the same distribution.
///
/// Errors: as [`zipf_keys`].
///
/// ```
/// use gpujoin_testkit::datagen::zipf_keys_fast;
/// let keys = zipf_keys_fast(10_000, 100, 1.0, 9)?;
/// let zeros = keys.iter().filter(|&&k| k == 0).count();
/// let ones = keys.iter().filter(|&&k| k == 1).count();
/// assert!(keys.iter().all(|&k| k < 100) && zeros > ones);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn zipf_keys_fast(n: usize, domain: usize, exponent: f64, seed: u64) -> Result<Vec<u32>> {
    if domain == 0 {
        return Err(Error::invalid("Zipf domain is empty"));
    }
    check_u32_domain("domain", domain)?;
    if !exponent.is_finite() || exponent < 0.0 {
        return Err(Error::invalid(format!("Zipf exponent {exponent} must be finite and >= 0")));
    }
    let z = ZipfSampler::new(domain, exponent);
    let mut keys = vec![0u32; n];
    par_chunks(&mut keys, seed, |s, chunk| {
        let mut r = rng(s);
        for k in chunk.iter_mut() {
            *k = (z.sample(&mut r) - 1) as u32;
        }
    });
    Ok(keys)
}

/// The shape of a PK-FK workload of the paper: `R` has the dense keys `0..r_rows` shuffled; `S`
/// has `s_rows` foreign keys, of which a fraction `match_ratio` reference `R` (uniformly: each
/// key equally often, or Zipf-skewed with factor `zipf`) and the rest miss (keys outside `R`'s
/// domain); shuffled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PkFkWorkload {
    pub r_rows: usize,
    pub s_rows: usize,
    pub match_ratio: f64,
    /// `None`: uniform foreign keys; `Some(z)`: Zipf factor `z` over `R`'s keys.
    pub zipf: Option<f64>,
    pub seed: u64,
}

impl PkFkWorkload {
    /// `|R| = r_rows`, `|S| = s_rows`, every foreign key matching, uniform.
    pub fn uniform(r_rows: usize, s_rows: usize, seed: u64) -> Self {
        PkFkWorkload { r_rows, s_rows, match_ratio: 1.0, zipf: None, seed }
    }

    /// The primary keys of `R` and the foreign keys of `S`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a match ratio outside `[0, 1]`, a Zipf factor that
    /// is negative or not finite, or domains that do not fit `u32` (see
    /// [`foreign_keys_match_ratio`]).
    ///
    /// ```
    /// use gpujoin_testkit::datagen::PkFkWorkload;
    /// let w = PkFkWorkload { match_ratio: 0.5, zipf: Some(1.0), ..PkFkWorkload::uniform(1000, 4000, 7) };
    /// let (r, s) = w.generate()?;
    /// assert_eq!((r.len(), s.len()), (1000, 4000));
    /// assert_eq!(s.iter().filter(|&&k| k < 1000).count(), 2000);
    /// # Ok::<(), gpujoin_device::Error>(())
    /// ```
    pub fn generate(&self) -> Result<(Vec<u32>, Vec<u32>)> {
        let r = shuffled_dense_keys(self.r_rows, self.seed)?;
        let s = match self.zipf {
            None => foreign_keys_match_ratio(self.r_rows, self.s_rows, self.match_ratio, self.seed ^ 0x5EED)?,
            Some(z) => {
                // The matching keys Zipf-distributed over R, the misses outside R's domain.
                let mut s = foreign_keys_match_ratio(self.r_rows, self.s_rows, self.match_ratio, self.seed ^ 0x5EED)?;
                let hits = s.iter().filter(|&&k| (k as usize) < self.r_rows).count();
                if hits > 0 {
                    let skewed = zipf_keys_fast(hits, self.r_rows, z, self.seed ^ 0x21FF)?;
                    let mut it = skewed.into_iter();
                    for k in s.iter_mut().filter(|k| (**k as usize) < self.r_rows) {
                        *k = it.next().expect("one skewed key per hit");
                    }
                }
                s
            }
        };
        Ok((r, s))
    }
}

/// Widens 4-byte keys to 8-byte ones (the paper's 8-byte workloads), on all cores.
///
/// ```
/// assert_eq!(gpujoin_testkit::datagen::widen(&[1, 2]), vec![1u64, 2]);
/// ```
pub fn widen(keys: &[u32]) -> Vec<u64> {
    let mut out = vec![0u64; keys.len()];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).max(1);
    let per = keys.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (o, k) in out.chunks_mut(per).zip(keys.chunks(per)) {
            s.spawn(move || o.iter_mut().zip(k).for_each(|(o, &k)| *o = u64::from(k)));
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table_reference;
    use gpujoin_join::{JoinType, NanEquality, NullEquality};

    fn counts(keys: &[u32], domain: usize) -> Vec<usize> {
        let mut c = vec![0; domain];
        for &k in keys {
            c[k as usize] += 1;
        }
        c
    }

    #[test]
    fn dense_keys_are_a_deterministic_permutation() {
        let a = shuffled_dense_keys(10_000, 1).unwrap();
        assert_eq!(a, shuffled_dense_keys(10_000, 1).unwrap());
        assert_ne!(a, shuffled_dense_keys(10_000, 2).unwrap());
        assert_ne!(a, (0..10_000).collect::<Vec<u32>>(), "not shuffled");
        assert!(counts(&a, 10_000).iter().all(|&c| c == 1));
        assert!(shuffled_dense_keys(0, 1).unwrap().is_empty());
        assert!(matches!(shuffled_dense_keys((1usize << 32) + 1, 1), Err(Error::InvalidArgument(_))));

        let mut b = shuffled_dense_keys_u64(1000, 3);
        assert_eq!(b, shuffled_dense_keys_u64(1000, 3));
        b.sort_unstable();
        assert_eq!(b, (0..1000).collect::<Vec<u64>>());
    }

    #[test]
    fn uniform_foreign_keys_use_every_key_equally() {
        let s = foreign_keys_uniform(1000, 16_000, 4).unwrap();
        assert_eq!(s.len(), 16_000);
        assert!(counts(&s, 1000).iter().all(|&c| c == 16));
        assert_eq!(s, foreign_keys_uniform(1000, 16_000, 4).unwrap());
        assert_ne!(s, foreign_keys_uniform(1000, 16_000, 5).unwrap());
        // Not a multiple: floor or ceil times, the first keys once more.
        let c = counts(&foreign_keys_uniform(10, 25, 4).unwrap(), 10);
        assert_eq!(c, vec![3, 3, 3, 3, 3, 2, 2, 2, 2, 2]);
        assert!(foreign_keys_uniform(0, 0, 1).unwrap().is_empty());
        assert!(matches!(foreign_keys_uniform(0, 1, 1), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn match_ratio_is_exact() {
        for (ratio, hits) in [(0.0, 0), (0.1, 1000), (0.5, 5000), (1.0, 10_000)] {
            let s = foreign_keys_match_ratio(500, 10_000, ratio, 8).unwrap();
            assert_eq!(s.len(), 10_000);
            assert_eq!(s.iter().filter(|&&k| k < 500).count(), hits, "ratio {ratio}");
            // Hits spread evenly over the primary keys.
            let c = counts(&s.iter().copied().filter(|&k| k < 500).collect::<Vec<_>>(), 500);
            assert!(c.iter().all(|&n| n == hits / 500));
        }
        // The join sizes follow: R = 0..r_len, S with ratio 0.3.
        let r = shuffled_dense_keys(1000, 1).unwrap();
        let s = foreign_keys_match_ratio(1000, 5000, 0.3, 2).unwrap();
        let table = |v: Vec<u32>| HostTable::new(vec![("k", HostColumn::from_values(v))]).unwrap();
        let (r, s) = (table(r), table(s));
        let count = |jt| table_reference::equi_join_count(&r, &["k"], &s, &["k"], jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
        assert_eq!(count(JoinType::Inner), 1500);
        assert_eq!(count(JoinType::RightAnti), 3500);

        assert_eq!(
            foreign_keys_match_ratio(10, 100, 0.5, 1).unwrap(),
            foreign_keys_match_ratio(10, 100, 0.5, 1).unwrap()
        );
        for bad in [-0.1, 1.5, f64::NAN] {
            assert!(matches!(foreign_keys_match_ratio(10, 10, bad, 1), Err(Error::InvalidArgument(_))));
        }
        assert!(matches!(foreign_keys_match_ratio(0, 10, 0.5, 1), Err(Error::InvalidArgument(_))));
        assert_eq!(foreign_keys_match_ratio(0, 10, 0.0, 1).unwrap().len(), 10);
        assert!(matches!(foreign_keys_match_ratio(1 << 32, 10, 0.5, 1), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn zipf_zero_is_uniform() {
        let keys = zipf_keys(200_000, 20, 0.0, 11).unwrap();
        for (k, &c) in counts(&keys, 20).iter().enumerate() {
            assert!((9_000..11_000).contains(&c), "key {k}: {c} of expected 10000");
        }
    }

    #[test]
    fn zipf_one_follows_one_over_rank() {
        let keys = zipf_keys(200_000, 1000, 1.0, 12).unwrap();
        let c = counts(&keys, 1000);
        // P(k) = 1 / ((k + 1) * H_1000), H_1000 ~ 7.4855.
        let expected0 = 200_000.0 / 7.4855;
        assert!((c[0] as f64 - expected0).abs() < 0.05 * expected0, "{}", c[0]);
        let ratio = c[0] as f64 / c[1] as f64;
        assert!((1.85..2.15).contains(&ratio), "{ratio}");
        let ratio = c[0] as f64 / c[3] as f64;
        assert!((3.6..4.4).contains(&ratio), "{ratio}");
        // Stronger skew concentrates more on key 0.
        let steep = counts(&zipf_keys(200_000, 1000, 1.5, 12).unwrap(), 1000);
        assert!(steep[0] > c[0]);
    }

    #[test]
    fn zipf_ranges_determinism_and_errors() {
        let keys = zipf_keys(10_000, 7, 0.8, 1).unwrap();
        assert!(keys.iter().all(|&k| k < 7));
        assert_eq!(keys, zipf_keys(10_000, 7, 0.8, 1).unwrap());
        assert_ne!(keys, zipf_keys(10_000, 7, 0.8, 2).unwrap());
        assert!(zipf_keys(100, 1, 2.0, 1).unwrap().iter().all(|&k| k == 0));
        assert!(zipf_keys(0, 5, 1.0, 1).unwrap().is_empty());
        for (domain, exponent) in
            [(0, 1.0), (5, -1.0), (5, f64::NAN), (5, f64::INFINITY), ((1 << 32) + 1, 1.0)]
        {
            assert!(matches!(zipf_keys(10, domain, exponent, 1), Err(Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn sorted_random_is_sorted_inclusive_and_deterministic() {
        let keys = sorted_random(10_000, 100, 130, 3).unwrap();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(keys.first(), Some(&100));
        assert_eq!(keys.last(), Some(&130));
        assert_eq!(keys, sorted_random(10_000, 100, 130, 3).unwrap());
        assert_eq!(sorted_random(3, -5, -5, 1).unwrap(), vec![-5; 3]);
        let full = sorted_random(1000, i32::MIN, i32::MAX, 9).unwrap();
        assert!(full.windows(2).all(|w| w[0] <= w[1]));
        assert!(matches!(sorted_random(1, 2, 1, 1), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn validity_fraction() {
        let v = random_validity(100_000, 0.25, 6).unwrap();
        let nulls = v.iter().filter(|&&b| !b).count();
        assert!((24_000..26_000).contains(&nulls), "{nulls}");
        assert_eq!(v, random_validity(100_000, 0.25, 6).unwrap());
        assert!(matches!(random_validity(1, 1.01, 1), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn composite_keys_join_like_their_scalar_keys() {
        let r = shuffled_dense_keys(500, 1).unwrap();
        let s = zipf_keys(3000, 700, 0.7, 2).unwrap();
        let (nulls, nans) = (NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
        let (rs, ss) = (composite_keys(&r, 1).unwrap(), composite_keys(&s, 1).unwrap());
        for columns in 1..=MAX_KEY_COLUMNS {
            let (rc, sc) = (composite_keys(&r, columns).unwrap(), composite_keys(&s, columns).unwrap());
            assert_eq!(rc.columns().len(), columns);
            let names = &COMPOSITE_KEY_NAMES[..columns];
            for jt in [JoinType::Inner, JoinType::Full, JoinType::RightAnti] {
                assert_eq!(
                    table_reference::equi_join(&rc, names, &sc, names, jt, nulls, nans),
                    table_reference::equi_join(&rs, &["k0"], &ss, &["k0"], jt, nulls, nans)
                );
            }
        }
        assert!(matches!(composite_keys(&r, 0), Err(Error::InvalidArgument(_))));
        assert!(matches!(composite_keys(&r, MAX_KEY_COLUMNS + 1), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn fast_zipf_follows_the_distribution() {
        // Uniform at 0.
        let keys = zipf_keys_fast(200_000, 20, 0.0, 11).unwrap();
        for (k, &c) in counts(&keys, 20).iter().enumerate() {
            assert!((9_000..11_000).contains(&c), "key {k}: {c} of expected 10000");
        }
        // 1 / rank at 1.
        let c = counts(&zipf_keys_fast(200_000, 1000, 1.0, 12).unwrap(), 1000);
        let expected0 = 200_000.0 / 7.4855;
        assert!((c[0] as f64 - expected0).abs() < 0.05 * expected0, "{}", c[0]);
        let ratio = c[0] as f64 / c[1] as f64;
        assert!((1.85..2.15).contains(&ratio), "{ratio}");
        let ratio = c[0] as f64 / c[3] as f64;
        assert!((3.6..4.4).contains(&ratio), "{ratio}");
        // 2: P(0) = 1 / zeta_1000(2) ~ 0.6084.
        let c2 = counts(&zipf_keys_fast(200_000, 1000, 2.0, 13).unwrap(), 1000);
        assert!((c2[0] as f64 / 200_000.0 - 0.6084).abs() < 0.01, "{}", c2[0]);
        // Large domains, several chunks: deterministic, in range.
        let big = zipf_keys_fast(3 * CHUNK_ROWS + 17, 1 << 26, 1.0, 4).unwrap();
        assert!(big.iter().all(|&k| k < 1 << 26));
        assert_eq!(big, zipf_keys_fast(3 * CHUNK_ROWS + 17, 1 << 26, 1.0, 4).unwrap());
        assert_ne!(big[..1000], zipf_keys_fast(1000, 1 << 26, 1.0, 5).unwrap()[..]);
        assert!(zipf_keys_fast(100, 1, 2.0, 1).unwrap().iter().all(|&k| k == 0));
        assert!(zipf_keys_fast(0, 5, 1.0, 1).unwrap().is_empty());
        for (domain, exponent) in [(0, 1.0), (5, -1.0), (5, f64::NAN), ((1 << 32) + 1, 1.0)] {
            assert!(matches!(zipf_keys_fast(10, domain, exponent, 1), Err(Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn pk_fk_workloads() {
        let w = PkFkWorkload::uniform(1000, 3000, 1);
        let (r, s) = w.generate().unwrap();
        assert!(counts(&r, 1000).iter().all(|&c| c == 1));
        assert!(counts(&s, 1000).iter().all(|&c| c == 3));
        assert_eq!((r.clone(), s.clone()), w.generate().unwrap());
        for ratio in [1.0, 0.5, 1.0 / 16.0] {
            for zipf in [None, Some(0.0), Some(1.0), Some(2.0)] {
                let w = PkFkWorkload { match_ratio: ratio, zipf, ..PkFkWorkload::uniform(1000, 16_000, 2) };
                let (_, s) = w.generate().unwrap();
                let hits = s.iter().filter(|&&k| k < 1000).count();
                assert_eq!(hits, (16_000.0 * ratio) as usize, "{ratio} {zipf:?}");
                if zipf == Some(2.0) {
                    let c = counts(&s.iter().copied().filter(|&k| k < 1000).collect::<Vec<_>>(), 1000);
                    assert!(c[0] > hits / 2, "Zipf 2 concentrates on key 0: {}", c[0]);
                }
            }
        }
        assert!(PkFkWorkload { match_ratio: 2.0, ..w }.generate().is_err());
        assert!(PkFkWorkload { zipf: Some(-1.0), ..w }.generate().is_err());
        assert_eq!(widen(&[0, u32::MAX]), vec![0, u32::MAX as u64]);
        assert!(widen(&[]).is_empty());
    }
}
