//! `Algorithm::Auto`: the decision tree of the paper (seed 002, Figure 17 and section 5.4) on
//! what can be measured cheaply.
//!
//! Features: the row counts (the smaller side builds, the larger probes), the materialized
//! payload columns per side and their widths, the key widths, and, only where the choice
//! depends on them, a sampled match ratio and skew: [`SAMPLE_ROWS`] rows of the probe side at
//! evenly spaced positions are semi-joined with the whole build side (one non-partitioned hash
//! join of the sample, a pass over the build keys) and their first key column's frequencies are
//! counted on the host ([`SampledSkew`]).
//!
//! Before the tree, one question the paper does not ask ([`DIRECT_TABLE_L2_QUARTERS`],
//! [`UNIQUE_HASH_TABLE_L2_QUARTERS`]): a single integer key column whose build keys are unique
//! joins by NPHJ where its table stays in the L2 cache: dense keys on a direct-address table (4
//! bytes a slot, slot = key - min) within three quarters of the L2, others on the hash table (4
//! bytes a slot, 5/3 to 10/3 slots a build row) within half of it (no partitioning pass; one
//! reduction over the build keys finds the span, the insert finds a repeated key, and the tree
//! decides then). For example 2^22 build keys that are a permutation of `0..2^22`: a 16 MiB
//! direct-address table; 2^20 build keys spread over the `u32` range: an 8 MiB hash table.
//!
//! The tree ([`choose`]), as read from the paper and adapted to this implementation:
//! 1. No payload to materialize (maps only): PHJ-UM (both PHJ variants carry row ids then).
//! 2. Tiny inputs (at most [`TINY_ROWS`] rows together): NPHJ, the simple baseline, with the
//!    fewest passes.
//! 3. A small build side (at most [`NPHJ_ORDERED_MAX_BUILD_ROWS`] rows) against a probe side at
//!    least [`NPHJ_PROBE_RATIO`] times larger that carries at least [`NPHJ_PROBE_PAYLOADS`]
//!    payload columns (a star join's fact table): NPHJ, whose output follows the probe side's
//!    row order, so those columns are gathered in order (not in the paper; measured on its J4
//!    shape, 3x faster than PHJ-UM). Decided without a sample.
//! 4. A low sampled match ratio (below [`LOW_MATCH_RATIO`]): materialization is no longer the
//!    bottleneck (5.2.3). A build side whose global table stays cache-sized (at most
//!    [`NPHJ_MAX_BUILD_ROWS`] rows): NPHJ (no partitioning pass, few gathers). Otherwise, wide
//!    joins: PHJ-UM (unclustered gathers of the few matches beat transforming every column),
//!    or PHJ-OM when the foreign keys are skewed ("PHJ-OM performs even better for skewed
//!    data"); narrow joins: PHJ-OM.
//! 5. 8-byte payloads, or more than [`OM_FUSED_COLUMNS`] payload columns a side: PHJ-UM. The
//!    paper has PHJ-OM win here too (5.2.5), but this implementation keeps PHJ-OM's peak memory
//!    at most PHJ-UM's (as the paper reports) by transforming those columns in chunks, and then
//!    PHJ-UM's gathers are faster (the measured crossover; see perf/NOTES.md) -- except for
//!    8-byte payloads in at most [`OM_FUSED_COLUMNS`] columns a side from
//!    [`OM_EIGHT_BYTE_MIN_BUILD_ROWS`] build rows: PHJ-OM.
//! 6. Narrow joins (at most one payload per side): PHJ-OM ("PHJ-* beat SMJ-* for narrow
//!    joins"; here PHJ-OM's match writes the 4-byte payload column itself, so nothing is gathered).
//! 7. Wide joins with a high (or unsampled) match ratio: PHJ-OM, "the best performance" for
//!    uniform and skewed keys (5.2.2, 5.2.4).
//!
//! The paper's tree never prefers a sort-merge join; its Figure 17(b), the choice between the
//! two sort-merge joins, is [`choose_sort_merge`].

use gpujoin_cub_sys::result::launch;
use gpujoin_device::{DeviceView, Result, Stream};

use super::{gather_column, Algorithm, Output, Relation, WideJoinOptions};
use crate::hash_join::non_partitioned_hash_join;
use crate::kernels::sys::hash as ffi;
use crate::keys::{check_comparable, key_view, validity_words, values, width, KeyPlan};
use crate::kernels::TypedValues;
use crate::table::{ColumnView, TableView};
use crate::table::Column;
use crate::types::{JoinOptions, JoinType};

/// Probe rows sampled for the match ratio and the skew.
pub const SAMPLE_ROWS: usize = 4096;
/// Match ratios below this are "low" (section 5.2.3: *-OM lose at low match ratios). Measured on
/// the H100 (2^24 x 2^25, two 4-byte payloads a side): at a ratio of 1/4 PHJ-UM takes 2.64 ms and
/// PHJ-OM 4.28 ms, at 1/16 1.97 and 4.18 ms, at 1 PHJ-OM wins by 1.7x; a sampled quarter can land
/// on either side of 0.25, hence the margin.
pub const LOW_MATCH_RATIO: f64 = 0.3;
/// Build sides up to this many rows keep NPHJ's global table (about 16 bytes a slot, two slots
/// per key) within the L2 cache of an H100.
pub const NPHJ_MAX_BUILD_ROWS: u64 = 1 << 20;
/// Build rows from which a join with 8-byte payloads in at most [`OM_FUSED_COLUMNS`] columns a
/// side takes PHJ-OM: measured on the H100 at 2^26 x 2^27, where the unclustered gathers' random
/// 8-byte reads no longer hit the cache (narrow: PHJ-OM 12.74 vs PHJ-UM 15.42 ms with 4-byte
/// keys, 14.15 vs 16.16 with 8-byte keys; two columns a side: 22.04 vs 24.19 and 23.08 vs
/// 25.28, every probe row matching; 24.85 vs 25.06 before PHJ-OM's probe rows stayed in place);
/// at 2^24 x 2^25 PHJ-UM still wins (3.66 vs 4.39 narrow, 5.60 vs 7.49 wide).
pub const OM_EIGHT_BYTE_MIN_BUILD_ROWS: u64 = 1 << 26;
/// Payload columns a side up to which PHJ-OM beats PHJ-UM on the H100 (4-byte payloads: the first
/// column is written by the match, the second transformed whole or in chunks).
pub const OM_FUSED_COLUMNS: u32 = 2;
/// Build sides up to this many rows are joined by NPHJ when the probe side is at least
/// [`NPHJ_PROBE_RATIO`] times larger and carries at least [`NPHJ_PROBE_PAYLOADS`] payload
/// columns: NPHJ's output follows the probe side's row order, so its many columns are gathered
/// in order, where the partitioned joins gather them at random (H100, the seed paper's J4 shape,
/// 1.9M x 58M rows, 1 + 10 payload columns: NPHJ 7.7 ms, PHJ-UM 22.8, PHJ-OM 29.2, SMJ-UM 24.5).
pub const NPHJ_ORDERED_MAX_BUILD_ROWS: u64 = 1 << 21;
/// See [`NPHJ_ORDERED_MAX_BUILD_ROWS`].
pub const NPHJ_PROBE_RATIO: u64 = 16;
/// See [`NPHJ_ORDERED_MAX_BUILD_ROWS`].
pub const NPHJ_PROBE_PAYLOADS: u32 = 4;
/// Inputs of at most this many rows together are joined by NPHJ.
pub const TINY_ROWS: u64 = 1 << 12;

/// Key frequencies in a sample of the probe side's first key column.
///
/// ```
/// use gpujoin_join::wide::SampledSkew;
/// let mut keys = vec![5u64; 20]; // one hot key ...
/// keys.extend(100..130); // ... and 30 keys seen once
/// let s = SampledSkew::from_sample(&keys);
/// assert_eq!((s.sample_rows, s.distinct, s.top_count), (50, 31, 20));
/// assert!(s.is_skewed()); // 40% of the sample, 12 times the average count
/// assert!(!SampledSkew::from_sample(&[1, 2, 3, 4, 1, 2, 3, 4]).is_skewed());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampledSkew {
    pub sample_rows: u64,
    /// Distinct keys in the sample.
    pub distinct: u64,
    /// Rows of the most frequent key.
    pub top_count: u64,
}

impl SampledSkew {
    /// Counts the keys of a sample (any order).
    pub fn from_sample(keys: &[u64]) -> SampledSkew {
        let mut k = keys.to_vec();
        k.sort_unstable();
        let (mut distinct, mut top, mut run) = (0u64, 0u64, 0u64);
        for i in 0..k.len() {
            if i == 0 || k[i] != k[i - 1] {
                distinct += 1;
                run = 0;
            }
            run += 1;
            top = top.max(run);
        }
        SampledSkew { sample_rows: k.len() as u64, distinct, top_count: top }
    }

    /// The most frequent key's share of the sample.
    pub fn top_share(&self) -> f64 {
        if self.sample_rows == 0 {
            0.0
        } else {
            self.top_count as f64 / self.sample_rows as f64
        }
    }

    /// Skewed: the most frequent key holds at least 1% of the sample and 8 times the average
    /// count of the sampled keys (Zipf factors of about 1 and above on large domains; uniform
    /// keys of any domain size are not skewed).
    pub fn is_skewed(&self) -> bool {
        self.sample_rows > 0 && self.top_share() >= 0.01 && self.top_count * self.distinct >= 8 * self.sample_rows
    }
}

/// What [`choose`] decides on.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Features {
    /// Rows of the smaller side (the hash joins' build side).
    pub build_rows: u64,
    /// Rows of the larger side.
    pub probe_rows: u64,
    /// Bytes of a key (all key columns).
    pub key_bytes: u32,
    /// Payload columns to materialize, both sides (the join type decides which sides).
    pub payload_columns: u32,
    /// The larger of the two sides' materialized payload column counts.
    pub max_side_payloads: u32,
    /// Materialized payload columns of the larger (probe) side.
    pub probe_payloads: u32,
    /// Of the materialized payload columns, those of 8 bytes.
    pub eight_byte_payloads: u32,
    /// A single non-null integer key column (raw partitioning and sorting; otherwise derived or
    /// hashed keys, and PHJ-OM of hashed composites materializes through maps).
    pub simple_keys: bool,
    /// Composite keys wider than 64 bits: hashed and verified. Neither OM variant serves them.
    pub hashed_keys: bool,
    /// Some key column could hold a key that matches nothing: nullable under
    /// `NullEqualsNothing`, or a float under `NanNeverEqual`. SMJ-OM cannot serve such keys
    /// (it refuses them when one is present), PHJ-OM can.
    pub keys_may_match_nothing: bool,
    /// Only the maps are asked for.
    pub maps_only: bool,
    /// Sampled fraction of probe rows with a partner (`None`: not sampled).
    pub match_ratio: Option<f64>,
    /// Sampled skew of the probe side's keys (`None`: not sampled).
    pub skew: Option<SampledSkew>,
}

impl Features {
    /// The features of a join that need no device work.
    pub(crate) fn of(left: &Relation<'_>, right: &Relation<'_>, jt: JoinType, opts: WideJoinOptions) -> Features {
        let maps_only = opts.output == Output::MapsOnly;
        let lp: &[ColumnView<'_>] = if jt.has_left_map() && !maps_only { left.payloads() } else { &[] };
        let rp: &[ColumnView<'_>] = if jt.has_right_map() && !maps_only { right.payloads() } else { &[] };
        let cols = left.keys().columns();
        let simple = cols.len() == 1
            && cols[0].validity().is_none()
            && right.keys().columns()[0].validity().is_none()
            && matches!(values(&cols[0]), TypedValues::I32(_) | TypedValues::I64(_) | TypedValues::U32(_) | TypedValues::U64(_));
        let (l, r) = (left.rows() as u64, right.rows() as u64);
        let all_keys = || left.keys().columns().iter().chain(right.keys().columns());
        let nulls_never = opts.keys.null_equality == crate::types::NullEquality::NullEqualsNothing;
        let nan_never = opts.keys.nan_equality == crate::NanEquality::NanNeverEqual;
        let may_match_nothing = all_keys().any(|c| (nulls_never && c.validity().is_some()) || (nan_never && matches!(values(c), TypedValues::F32(_) | TypedValues::F64(_))));
        Features {
            build_rows: l.min(r),
            probe_rows: l.max(r),
            key_bytes: cols.iter().map(|c| width(c) as u32).sum(),
            payload_columns: (lp.len() + rp.len()) as u32,
            max_side_payloads: lp.len().max(rp.len()) as u32,
            probe_payloads: if l <= r { rp.len() } else { lp.len() } as u32,
            eight_byte_payloads: lp.iter().chain(rp).filter(|c| width(c) == 8).count() as u32,
            simple_keys: simple,
            hashed_keys: !KeyPlan::new(left.keys(), right.keys(), opts.keys, 64).exact,
            keys_may_match_nothing: may_match_nothing,
            maps_only,
            match_ratio: None,
            skew: None,
        }
    }

    /// At least two payload columns on some side.
    pub fn wide(&self) -> bool {
        self.max_side_payloads >= 2
    }

    fn tiny(&self) -> bool {
        self.build_rows + self.probe_rows <= TINY_ROWS
    }

    /// A build side of at most [`NPHJ_ORDERED_MAX_BUILD_ROWS`] rows, a probe side at least
    /// [`NPHJ_PROBE_RATIO`] times larger with at least [`NPHJ_PROBE_PAYLOADS`] payload columns.
    fn probes_many_columns_in_order(&self) -> bool {
        self.build_rows <= NPHJ_ORDERED_MAX_BUILD_ROWS && self.probe_rows >= NPHJ_PROBE_RATIO.saturating_mul(self.build_rows.max(1)) && self.probe_payloads >= NPHJ_PROBE_PAYLOADS
    }

    fn skewed(&self) -> bool {
        self.skew.is_some_and(|s| s.is_skewed())
    }

    /// Whether PHJ-OM would transform some payload column in chunks at materialization (8-byte
    /// payloads, or more than [`OM_FUSED_COLUMNS`] columns on a side): the measured crossover
    /// where PHJ-UM's gathers win in this implementation.
    pub fn om_transforms_in_chunks(&self) -> bool {
        self.eight_byte_payloads > 0 || self.max_side_payloads > OM_FUSED_COLUMNS
    }

    /// Whether [`choose`] should see a sampled match ratio and skew: for wide joins and small
    /// build sides, and there only where its answer depends on them (it is asked with a low and
    /// a high ratio, each with skewed and with uniform keys, and the four answers differ). For
    /// example a wide join with more than two columns a side on a large build side takes PHJ-UM
    /// whatever the sample says (H100, `wide_8b8b` when it did: Auto with the sample 27.09 ms,
    /// PHJ-UM's own row 25.24).
    pub fn needs_sample(&self) -> bool {
        // Narrow joins on a large build side are not sampled: PHJ-OM (an unsampled ratio counts
        // as high) whatever a sample would say, but for a low ratio with 8-byte payloads.
        let sampled_shape = self.wide() || self.build_rows <= NPHJ_MAX_BUILD_ROWS;
        if self.maps_only || self.payload_columns == 0 || self.tiny() || self.probe_rows == 0 || self.probes_many_columns_in_order() || !sampled_shape {
            return false;
        }
        let uniform = SampledSkew { sample_rows: SAMPLE_ROWS as u64, distinct: SAMPLE_ROWS as u64, top_count: 1 };
        let skewed = SampledSkew { sample_rows: SAMPLE_ROWS as u64, distinct: 16, top_count: SAMPLE_ROWS as u64 / 2 };
        debug_assert!(skewed.is_skewed() && !uniform.is_skewed());
        let outcomes: Vec<Algorithm> = [0.0, 1.0]
            .into_iter()
            .flat_map(|ratio| [uniform, skewed].map(|skew| choose(&Features { match_ratio: Some(ratio), skew: Some(skew), ..*self }).0))
            .collect();
        outcomes.iter().any(|a| *a != outcomes[0])
    }
}

/// The paper's decision tree (see the [`wide`](crate::wide) module docs): the algorithm and why.
///
/// ```
/// use gpujoin_join::wide::{choose, Algorithm, Features};
/// let narrow = Features { build_rows: 1 << 26, probe_rows: 1 << 27, key_bytes: 4, payload_columns: 2, max_side_payloads: 1, simple_keys: true, ..Features::default() };
/// assert_eq!(choose(&narrow).0, Algorithm::PhjOm);
/// let low = Features { payload_columns: 4, max_side_payloads: 2, match_ratio: Some(0.1), ..narrow };
/// assert_eq!(choose(&low).0, Algorithm::PhjUm);
/// // A small dimension and a fact table carrying ten columns: NPHJ, in the fact table's order.
/// let star = Features { build_rows: 1_900_000, probe_rows: 58_000_000, payload_columns: 11, max_side_payloads: 10, probe_payloads: 10, ..narrow };
/// assert_eq!(choose(&star).0, Algorithm::Nphj);
/// // 8-byte payloads: PHJ-UM, but PHJ-OM from 2^26 build rows with at most two columns a side.
/// let eight = Features { eight_byte_payloads: 2, ..narrow };
/// assert_eq!(choose(&eight).0, Algorithm::PhjOm);
/// assert_eq!(choose(&Features { build_rows: 1 << 24, probe_rows: 1 << 25, ..eight }).0, Algorithm::PhjUm);
/// assert_eq!(choose(&Features { payload_columns: 4, max_side_payloads: 2, ..eight }).0, Algorithm::PhjOm);
/// assert_eq!(choose(&Features { payload_columns: 6, max_side_payloads: 3, ..eight }).0, Algorithm::PhjUm);
/// ```
pub fn choose(f: &Features) -> (Algorithm, String) {
    let ratio = f.match_ratio.map_or("unsampled".to_string(), |r| format!("{r:.3}"));
    let skew = f.skew.map_or(String::new(), |s| format!(", top sampled key {:.2}% of the sample{}", 100.0 * s.top_share(), if s.is_skewed() { " (skewed)" } else { "" }));
    let keys = if f.simple_keys { "" } else { "; derived or hashed keys" };
    let facts = format!("[build {} rows, probe {} rows, {} payload columns ({} of 8 bytes), {}-byte keys, match ratio {ratio}{skew}{keys}]", f.build_rows, f.probe_rows, f.payload_columns, f.eight_byte_payloads, f.key_bytes);
    let (a, why) = if f.maps_only || f.payload_columns == 0 {
        if f.tiny() {
            (Algorithm::Nphj, "tiny inputs without payloads: one hash table, no partitioning passes")
        } else {
            (Algorithm::PhjUm, "no payload to materialize: the partitioned hash join's maps (UM and OM coincide without payloads)")
        }
    } else if f.tiny() {
        (Algorithm::Nphj, "tiny inputs: one hash table, no partitioning passes")
    } else if f.probes_many_columns_in_order() {
        (Algorithm::Nphj, "a small build side and a much larger probe side with many payload columns: NPHJ's output keeps the probe side's row order, so those columns are gathered in order (H100, 1.9M x 58M rows with 1 + 10 columns: NPHJ 7.7 ms, PHJ-UM 22.8)")
    } else if f.match_ratio.is_some_and(|r| r < LOW_MATCH_RATIO) {
        if f.build_rows <= NPHJ_MAX_BUILD_ROWS {
            (Algorithm::Nphj, "low match ratio and a cache-sized build side: one global table, no partitioning, few gathers")
        } else if f.om_transforms_in_chunks() {
            (Algorithm::PhjUm, "low match ratio with 8-byte payloads or more than two columns a side: unclustered gathers of the matches beat PHJ-OM's chunked transforms")
        } else if !f.wide() {
            (Algorithm::PhjOm, "low match ratio, narrow: PHJ-OM's match writes a 4-byte payload column itself, an 8-byte one is gathered clustered")
        } else if f.skewed() {
            (Algorithm::PhjOm, "low match ratio but skewed foreign keys: PHJ-OM (Figure 17a: PHJ-OM performs even better for skewed data)")
        } else {
            (Algorithm::PhjUm, "low match ratio: little to materialize, so unclustered gathers of the matches beat transforming every payload column (section 5.2.3)")
        }
    } else if f.eight_byte_payloads > 0 && f.max_side_payloads <= OM_FUSED_COLUMNS && f.build_rows >= OM_EIGHT_BYTE_MIN_BUILD_ROWS {
        (Algorithm::PhjOm, "8-byte payloads in at most two columns a side and a build side of 2^26 rows or more: PHJ-OM's clustered gathers beat PHJ-UM's random 8-byte reads once they miss the cache (H100, 2^26 x 2^27: 12.74 vs 15.42 ms narrow, 22.04 vs 24.19 with two columns a side; PHJ-UM below, 2^24 x 2^25)")
    } else if f.om_transforms_in_chunks() {
        (Algorithm::PhjUm, "8-byte payloads or more than two payload columns a side: here PHJ-OM keeps its peak memory at most PHJ-UM's by transforming those columns in chunks, which costs more than PHJ-UM's gathers (H100: 4-byte keys with 8-byte payloads 3.65 vs 4.58 ms narrow, 5.63 vs 7.93 ms wide; four 4-byte columns a side 8.04 vs 9.92 ms)")
    } else if !f.wide() {
        (Algorithm::PhjOm, "narrow join: PHJ-* beat SMJ-* (section 5.2.2) and PHJ-OM's match writes the 4-byte payload column itself")
    } else {
        (Algorithm::PhjOm, "wide join with a high match ratio: materialization dominates, gathers from the partitioned relations (GFTR) win for uniform and skewed keys and every data width (sections 5.2.2-5.2.5)")
    };
    // PHJ-OM cannot serve hashed keys (it would refuse them): PHJ-UM.
    if a == Algorithm::PhjOm && f.hashed_keys {
        return (Algorithm::PhjUm, format!("{why}; but the composite keys are wider than 64 bits, hashed and verified through maps into the inputs, which PHJ-OM does not keep: PHJ-UM {facts}"));
    }
    (a, format!("{why} {facts}"))
}

/// Figure 17(b) of the paper, SMJ-OM against SMJ-UM: SMJ-OM for wide joins with 4-byte keys,
/// mostly 4-byte payloads, a high match ratio and no strong skew; SMJ-UM otherwise.
///
/// ```
/// use gpujoin_join::wide::{choose_sort_merge, Algorithm, Features};
/// let f = Features { build_rows: 1 << 20, probe_rows: 1 << 21, key_bytes: 4, payload_columns: 4, max_side_payloads: 2, simple_keys: true, ..Features::default() };
/// assert_eq!(choose_sort_merge(&f).0, Algorithm::SmjOm);
/// assert_eq!(choose_sort_merge(&Features { key_bytes: 8, ..f }).0, Algorithm::SmjUm);
/// ```
pub fn choose_sort_merge(f: &Features) -> (Algorithm, String) {
    if !f.wide() || f.maps_only {
        (Algorithm::SmjUm, "narrow: SMJ-OM is SMJ-UM".into())
    } else if f.hashed_keys || f.keys_may_match_nothing {
        (Algorithm::SmjUm, "hashed keys, or keys that may match nothing (null/NaN): only the general sort-merge join (SMJ-UM) serves them".into())
    } else if f.key_bytes > 4 || 2 * f.eight_byte_payloads > f.payload_columns {
        (Algorithm::SmjUm, "8-byte keys or mostly 8-byte payloads: sorting them costs more than the clustered gathers save (section 5.2.5)".into())
    } else if f.match_ratio.is_some_and(|r| r < LOW_MATCH_RATIO) {
        (Algorithm::SmjUm, "low match ratio: little to materialize (section 5.2.3)".into())
    } else if f.skewed() {
        (Algorithm::SmjUm, "skewed foreign keys: SMJ-UM's sort is steady and little is materialized (section 5.2.4)".into())
    } else {
        (Algorithm::SmjOm, "wide join of 4-byte data with a high match ratio: clustered gathers from sorted columns (section 4.2)".into())
    }
}

/// How the sampled keys compare: raw bits (integers), or floats with `-0.0 == 0.0` and NaNs
/// equal to each other, or to nothing with `nan_never` (as the joins compare them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SampleMode {
    Bits,
    F32 { nan_never: bool },
    F64 { nan_never: bool },
}

impl SampleMode {
    fn code(self) -> (i32, i32) {
        match self {
            SampleMode::Bits => (0, 0),
            SampleMode::F32 { nan_never } => (1, nan_never as i32),
            SampleMode::F64 { nan_never } => (2, nan_never as i32),
        }
    }

    /// The key as the join compares it (`None`: it matches nothing). Mirrors `canon` in hash.cu.
    ///
    /// Bits of 4-byte keys are in the low 32 bits.
    pub(crate) fn canon(self, bits: u64) -> Option<u64> {
        match self {
            SampleMode::Bits => Some(bits),
            SampleMode::F32 { nan_never } => {
                let b = bits as u32;
                if b & 0x7fff_ffff == 0 {
                    Some(0)
                } else if f32::from_bits(b).is_nan() {
                    (!nan_never).then_some(0x7fc0_0000)
                } else {
                    Some(b as u64)
                }
            }
            SampleMode::F64 { nan_never } => {
                if bits & 0x7fff_ffff_ffff_ffff == 0 {
                    Some(0)
                } else if f64::from_bits(bits).is_nan() {
                    (!nan_never).then_some(0x7ff8_0000_0000_0000)
                } else {
                    Some(bits)
                }
            }
        }
    }
}

/// The sampled match ratio from the sample's keys and the flags of the device set (an entry of
/// each distinct matched key is flagged, which one is unspecified): the share of sample entries
/// whose key some flagged entry has.
pub(crate) fn ratio_from_flags(sample: &[u64], flags: &[u8], mode: SampleMode) -> f64 {
    if sample.is_empty() {
        return 0.0;
    }
    let matched: std::collections::HashSet<u64> = sample.iter().zip(flags).filter(|(_, &f)| f != 0).filter_map(|(&k, _)| mode.canon(k)).collect();
    let hits = sample.iter().filter(|&&k| mode.canon(k).is_some_and(|c| matched.contains(&c))).count();
    hits as f64 / sample.len() as f64
}

/// One pass of the build keys against a shared-memory set of the sampled probe keys (single
/// non-null key columns): two small reads back to the host, no per-row output.
fn sample_single<K: gpujoin_device::Pod>(
    stream: &Stream,
    build: &DeviceView<'_, K>,
    probe: &DeviceView<'_, K>,
    mode: SampleMode,
    gather: SampleGatherFn<K>,
    matcher: SampleMatchFn<K>,
    to_bits: fn(K) -> u64,
) -> Result<(f64, SampledSkew)> {
    let n = probe.len();
    let m = SAMPLE_ROWS.min(n);
    let mut keys = stream.alloc::<K>(m)?;
    let mut flags = stream.alloc_zeroed::<u8>(m)?;
    let (pk, sk) = (probe.as_ptr(), keys.view_mut().as_mut_ptr());
    // SAFETY: m <= n probe keys; keys holds m.
    launch(stream, "sample probe keys", || unsafe { gather(pk, n as i64, m as i64, sk, stream.raw()) })?;
    let (code, nan_never) = mode.code();
    let (sk, bk, fl) = (keys.view().as_ptr(), build.as_ptr(), flags.view_mut().as_mut_ptr());
    // SAFETY: m sample keys (m <= SAMPLE_ROWS <= gj_h_sample_max), build.len() build keys, m flags.
    launch(stream, "sample match", || unsafe { matcher(sk, m as i64, bk, build.len() as i64, code, nan_never, fl, stream.raw()) })?;
    let flags = stream.copy_to_host(&flags.view())?;
    let sample: Vec<u64> = stream.copy_to_host(&keys.view())?.into_iter().map(to_bits).collect();
    Ok((ratio_from_flags(&sample, &flags, mode), SampledSkew::from_sample(&sample)))
}

type SampleGatherFn<K> = unsafe extern "C" fn(*const K, i64, i64, *mut K, ffi::gj_h_stream_t) -> i32;
type SampleMatchFn<K> = unsafe extern "C" fn(*const K, i64, *const K, i64, i32, i32, *mut u8, ffi::gj_h_stream_t) -> i32;

/// Samples the match ratio and skew of the larger side against the smaller.
///
/// Single non-null key columns: [`sample_single`] (one streaming pass over the build keys).
/// Other keys: the non-partitioned hash join of the sampled keys with the build side.
fn sample(stream: &Stream, build: &TableView<'_>, probe: &TableView<'_>, opts: JoinOptions) -> Result<(f64, SampledSkew)> {
    debug_assert!(SAMPLE_ROWS as i64 <= unsafe { ffi::gj_h_sample_max() });
    let (bc, pc) = (build.columns(), probe.columns());
    if bc.len() == 1 && validity_words(&bc[0]).is_none() && validity_words(&pc[0]).is_none() && probe.rows() > 0 {
        let nan_never = opts.nan_equality == crate::NanEquality::NanNeverEqual;
        let b32 = |x: u32| x as u64;
        let b64 = |x: u64| x;
        let r = match (values(&bc[0]), values(&pc[0])) {
            (TypedValues::U32(b), TypedValues::U32(p)) => Some(sample_single(stream, &b, &p, SampleMode::Bits, ffi::gj_h_sample_gather_u32, ffi::gj_h_sample_match_u32, b32)),
            (TypedValues::I32(b), TypedValues::I32(p)) => Some(sample_single(stream, &b.cast(), &p.cast(), SampleMode::Bits, ffi::gj_h_sample_gather_u32, ffi::gj_h_sample_match_u32, b32)),
            (TypedValues::F32(b), TypedValues::F32(p)) => {
                Some(sample_single(stream, &b.cast(), &p.cast(), SampleMode::F32 { nan_never }, ffi::gj_h_sample_gather_u32, ffi::gj_h_sample_match_u32, b32))
            }
            (TypedValues::U64(b), TypedValues::U64(p)) => Some(sample_single(stream, &b, &p, SampleMode::Bits, ffi::gj_h_sample_gather_u64, ffi::gj_h_sample_match_u64, b64)),
            (TypedValues::I64(b), TypedValues::I64(p)) => Some(sample_single(stream, &b.cast(), &p.cast(), SampleMode::Bits, ffi::gj_h_sample_gather_u64, ffi::gj_h_sample_match_u64, b64)),
            (TypedValues::F64(b), TypedValues::F64(p)) => {
                Some(sample_single(stream, &b.cast(), &p.cast(), SampleMode::F64 { nan_never }, ffi::gj_h_sample_gather_u64, ffi::gj_h_sample_match_u64, b64))
            }
            _ => None,
        };
        if let Some(r) = r {
            return r;
        }
    }
    sample_by_join(stream, build, probe, opts)
}

/// Test and benchmark support: the sampled match ratio and skew of `probe` against `build`, by
/// the streaming pass where the keys allow it (`general` false) or by the general join (`general`
/// true), as Auto samples them. Only with the feature `testing`.
#[cfg(feature = "testing")]
pub fn sample_for_tests(stream: &Stream, build: &TableView<'_>, probe: &TableView<'_>, opts: JoinOptions, general: bool) -> Result<(f64, SampledSkew)> {
    check_comparable(build, probe)?;
    if general {
        sample_by_join(stream, build, probe, opts)
    } else {
        sample(stream, build, probe, opts)
    }
}

/// The general sample: the sampled probe keys joined with the whole build side (composite or
/// nullable keys).
fn sample_by_join(stream: &Stream, build: &TableView<'_>, probe: &TableView<'_>, opts: JoinOptions) -> Result<(f64, SampledSkew)> {
    let n = probe.rows();
    let m = SAMPLE_ROWS.min(n);
    let positions: Vec<u32> = (0..m as u64).map(|i| (i * n as u64 / m as u64) as u32).collect();
    let pos = stream.copy_from_host(&positions)?;
    // Nulls are not sampled: the sample's keys are the values (an estimate).
    let cols: Vec<Column> = probe.columns().iter().map(|c| gather_column(stream, &c.without_validity(), &pos.view())).collect::<Result<_>>()?;
    let keys = key_view(cols.iter().map(Column::view).collect())?;
    let matched = non_partitioned_hash_join(stream, &keys, build, JoinType::LeftSemi, opts)?.rows();
    // The first key column's bits (4-byte keys zero-extended).
    let first = cols[0].view();
    let first: Vec<u64> = match (first.typed::<u32>(), first.typed::<u64>()) {
        (Some(b), _) => stream.copy_to_host(&b)?.into_iter().map(u64::from).collect(),
        (_, Some(b)) => stream.copy_to_host(&b)?,
        _ => return Err(gpujoin_device::Error::invalid("internal: a sampled key column of neither 4 nor 8 bytes")),
    };
    Ok((matched as f64 / m as f64, SampledSkew::from_sample(&first)))
}

/// Quarters of the L2 cache (its size read from the device) that a direct-address table may take
/// for [`Algorithm::Auto`] to join on it. Measured on the H100 (50 MiB of L2; dense `u32` build
/// keys, twice as many probe rows, bench group `dense`): NPHJ's direct-address table wins while
/// it sits in the L2 and loses once every access goes to DRAM. Maps only, NPHJ against PHJ-UM:
/// 0.151 / 0.299 ms at 2^20 build rows (a 4 MiB table), 0.33 / 0.66 at 2^22 (16 MiB), 0.648 /
/// 0.970 at 2^23 (32 MiB), 1.97 / 1.64 at 2^24 (64 MiB). One 4-byte payload a side, against
/// PHJ-OM: 0.201 / 0.293, 0.479 / 0.626, 0.949 / 0.922, 2.89 / 1.55. Two a side, against the
/// faster PHJ: 0.247 / 0.396, 0.578 / 1.011, 1.231 / 2.092, 3.85 / 4.26. More payload columns
/// favour the table further (NPHJ's output follows the probe side, whose columns are gathered in
/// order): the seed paper's J3 (TPC-H Q19 at SF10, 2M dense part keys, several columns a side)
/// NPHJ 0.33 ms against PHJ-UM's 0.54.
pub const DIRECT_TABLE_L2_QUARTERS: u64 = 3;

/// Quarters of the L2 cache that NPHJ's unique-build hash table (4-byte slots, 5/3 to 10/3 a
/// build row) may take for [`Algorithm::Auto`] to join on it where the build keys are unique but
/// not dense. Measured on the H100 (bench group `spread`: `u32` build keys spread over the whole
/// range, twice as many probe rows). Maps only, NPHJ against PHJ-UM (Auto's choice): 0.222 /
/// 0.358 ms at 2^20 build rows (an 8 MiB table), 0.634 / 0.694 at 2^22 (32 MiB), 1.60 / 1.06 at
/// 2^23 (64 MiB). One 4-byte payload a side, against PHJ-OM: 0.249 / 0.346, 0.744 / 0.675, 1.89
/// / 1.04; Auto, which sampled there, took 0.95 ms at 2^20.
pub const UNIQUE_HASH_TABLE_L2_QUARTERS: u64 = 2;

/// Auto's first question, before the tree: are the build keys unique? One integer key column
/// without nulls, more than [`TINY_ROWS`] rows together, and build keys that do not repeat,
/// either dense, in a span whose direct-address table (4-byte slots, slot = key - min) takes at
/// most [`DIRECT_TABLE_L2_QUARTERS`] quarters of the L2 cache, or in a hash table that takes at
/// most [`UNIQUE_HASH_TABLE_L2_QUARTERS`]: the non-partitioned hash join on that table runs,
/// with its reason. `None` otherwise, after at most a reduction over the build keys and one
/// insert pass that found a repeated key (two host reads).
/// `f`: the join's [`Features`] (measured once for this and [`decide`]).
pub(crate) fn join_where_unique(stream: &Stream, left: &Relation<'_>, right: &Relation<'_>, jt: JoinType, opts: WideJoinOptions, f: &Features) -> Result<Option<(crate::hash_join::HashJoinOutput, String)>> {
    use crate::hash_join::UniqueTableUsed;
    if !f.simple_keys || f.tiny() {
        return Ok(None);
    }
    let l2 = stream.device().l2_cache_bytes()?;
    let (max_direct, max_hash) = ((l2 / 4 * DIRECT_TABLE_L2_QUARTERS) as usize, (l2 / 4 * UNIQUE_HASH_TABLE_L2_QUARTERS) as usize);
    let Some(joined) = crate::hash_join::nphj_where_unique(stream, left.keys, right.keys, jt, opts.keys, max_direct, max_hash)? else { return Ok(None) };
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let facts = format!("[build {} rows, probe {} rows, {} payload columns, {}-byte keys]", f.build_rows, f.probe_rows, f.payload_columns, f.key_bytes);
    let why = match joined.table {
        UniqueTableUsed::Direct { span } => format!(
            "dense unique build keys: NPHJ on a direct-address table (slot = key - min), no partitioning pass; its {:.1} MiB ({span} slots for {} build rows) fit in {DIRECT_TABLE_L2_QUARTERS}/4 of the {:.0} MiB L2 (H100, 2^22 x 2^23 maps only: 0.33 ms against PHJ-UM's 0.66) {facts}",
            mib(span * 4),
            f.build_rows,
            mib(l2),
        ),
        UniqueTableUsed::Hash { bytes } => format!(
            "unique build keys: NPHJ on its hash table (4-byte slots: a build position and a tag), no partitioning pass; its {:.1} MiB fit in {UNIQUE_HASH_TABLE_L2_QUARTERS}/4 of the {:.0} MiB L2 (H100, 2^20 x 2^21 spread keys, maps only: 0.22 ms against PHJ-UM's 0.36) {facts}",
            mib(bytes),
            mib(l2),
        ),
    };
    Ok(Some((joined.out, why)))
}

/// Completes the features `f` (of [`Features::of`]; sampling only where the tree needs it) and
/// applies the tree.
pub(crate) fn decide(stream: &Stream, left: &Relation<'_>, right: &Relation<'_>, opts: WideJoinOptions, mut f: Features) -> Result<(Algorithm, String)> {
    if f.needs_sample() {
        let (build, probe) = if left.rows() < right.rows() { (left.keys(), right.keys()) } else { (right.keys(), left.keys()) };
        let (ratio, skew) = sample(stream, build, probe, opts.keys)?;
        f.match_ratio = Some(ratio);
        f.skew = Some(skew);
    }
    Ok(choose(&f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkfk(cols_per_side: u32) -> Features {
        Features {
            build_rows: 1 << 26,
            probe_rows: 1 << 27,
            key_bytes: 4,
            payload_columns: 2 * cols_per_side,
            max_side_payloads: cols_per_side,
            simple_keys: true,
            ..Features::default()
        }
    }

    fn zipf_like(top: u64, distinct: u64) -> SampledSkew {
        SampledSkew { sample_rows: SAMPLE_ROWS as u64, distinct, top_count: top }
    }

    #[test]
    fn paper_pk_fk_cases_take_phj_om() {
        for cols in [1, 2] {
            let f = pkfk(cols);
            assert_eq!(choose(&f).0, Algorithm::PhjOm, "{cols} payloads");
            // High sampled match ratio, uniform or skewed: still PHJ-OM.
            for skew in [zipf_like(2, 4090), zipf_like(220, 2000)] {
                let g = Features { match_ratio: Some(1.0), skew: Some(skew), ..f };
                let (a, why) = choose(&g);
                assert_eq!(a, Algorithm::PhjOm, "{why}");
                assert!(why.contains("match ratio 1.000"), "{why}");
            }
        }
        // 8-byte keys alone do not change it.
        let f = Features { key_bytes: 8, ..pkfk(2) };
        assert_eq!(choose(&f).0, Algorithm::PhjOm);
    }

    #[test]
    fn chunked_om_columns_take_um() {
        // 8-byte payloads, or more than two columns a side: PHJ-OM's lean transform loses.
        // (8-byte payloads below 2^26 build rows, or in more than two columns a side.)
        let small = |f: Features| Features { build_rows: 1 << 24, probe_rows: 1 << 25, ..f };
        for f in [small(Features { key_bytes: 8, eight_byte_payloads: 2, ..pkfk(1) }), small(Features { eight_byte_payloads: 1, ..pkfk(1) }), small(Features { eight_byte_payloads: 4, ..pkfk(2) }), Features { eight_byte_payloads: 6, ..pkfk(3) }, pkfk(3), pkfk(6)] {
            let g = Features { match_ratio: Some(1.0), skew: Some(zipf_like(2, 4090)), ..f };
            let (a, why) = choose(&g);
            assert_eq!(a, Algorithm::PhjUm, "{why}");
            assert!(why.contains("in chunks"), "{why}");
        }
        // 8-byte payloads in at most two columns a side from 2^26 build rows: PHJ-OM (measured
        // crossover).
        for f in [Features { key_bytes: 8, eight_byte_payloads: 2, ..pkfk(1) }, Features { eight_byte_payloads: 1, ..pkfk(1) }, Features { eight_byte_payloads: 2, ..pkfk(1) }, Features { eight_byte_payloads: 4, ..pkfk(2) }, Features { key_bytes: 8, eight_byte_payloads: 4, match_ratio: Some(1.0), ..pkfk(2) }] {
            let (a, why) = choose(&f);
            assert_eq!(a, Algorithm::PhjOm, "{why}");
            assert!(why.contains("2^26"), "{why}");
        }
    }

    #[test]
    fn om_variants_are_never_chosen_for_keys_they_refuse() {
        // Every branch that picks PHJ-OM picks PHJ-UM for hashed keys.
        let hashed = |f: Features| Features { hashed_keys: true, simple_keys: false, key_bytes: 12, ..f };
        for f in [pkfk(1), pkfk(2), Features { match_ratio: Some(0.1), ..pkfk(1) }, Features { match_ratio: Some(1.0 / 16.0), skew: Some(zipf_like(300, 1500)), ..pkfk(2) }] {
            assert_eq!(choose(&f).0, Algorithm::PhjOm);
            let (a, why) = choose(&hashed(f));
            assert_eq!(a, Algorithm::PhjUm, "{why}");
            assert!(why.contains("hashed"), "{why}");
        }
        // PHJ-OM serves keys that may match nothing.
        assert_eq!(choose(&Features { keys_may_match_nothing: true, simple_keys: false, ..pkfk(2) }).0, Algorithm::PhjOm);
        // SMJ-OM serves neither.
        let smj = Features { build_rows: 1 << 20, probe_rows: 1 << 21, ..pkfk(2) };
        assert_eq!(choose_sort_merge(&smj).0, Algorithm::SmjOm);
        assert_eq!(choose_sort_merge(&hashed(smj)).0, Algorithm::SmjUm);
        assert_eq!(choose_sort_merge(&Features { keys_may_match_nothing: true, ..smj }).0, Algorithm::SmjUm);
    }

    #[test]
    fn low_match_ratios_take_um_or_nphj() {
        let f = Features { match_ratio: Some(1.0 / 16.0), skew: Some(zipf_like(2, 4090)), ..pkfk(2) };
        assert_eq!(choose(&f).0, Algorithm::PhjUm);
        let skewed = Features { skew: Some(zipf_like(300, 1500)), ..f };
        assert_eq!(choose(&skewed).0, Algorithm::PhjOm);
        let narrow = Features { match_ratio: Some(0.1), ..pkfk(1) };
        assert_eq!(choose(&narrow).0, Algorithm::PhjOm);
        let small = Features { build_rows: 1 << 18, ..f };
        let (a, why) = choose(&small);
        assert_eq!(a, Algorithm::Nphj, "{why}");
        // At the threshold the ratio is not low.
        let edge = Features { match_ratio: Some(LOW_MATCH_RATIO), ..f };
        assert_eq!(choose(&edge).0, Algorithm::PhjOm);
    }

    #[test]
    fn tiny_and_maps_only() {
        let tiny = Features { build_rows: 100, probe_rows: 1000, ..pkfk(2) };
        assert_eq!(choose(&tiny).0, Algorithm::Nphj);
        assert!(!tiny.needs_sample());
        let maps = Features { maps_only: true, payload_columns: 0, max_side_payloads: 0, ..pkfk(2) };
        assert_eq!(choose(&maps).0, Algorithm::PhjUm);
        assert!(!maps.needs_sample());
        let none = Features { payload_columns: 0, max_side_payloads: 0, ..pkfk(2) };
        assert_eq!(choose(&none).0, Algorithm::PhjUm);
    }

    #[test]
    fn sampling_only_where_the_choice_depends_on_it() {
        assert!(!pkfk(1).needs_sample(), "large narrow: PHJ-OM whatever the ratio");
        assert!(pkfk(2).needs_sample(), "wide: the ratio decides OM or UM");
        assert!(Features { build_rows: 1 << 16, probe_rows: 1 << 17, ..pkfk(1) }.needs_sample(), "small build: NPHJ possible");
        assert!(!Features { probe_rows: 0, build_rows: 0, ..pkfk(2) }.needs_sample());
        // More than two columns a side on a large build side (of 4- or 8-byte payloads): PHJ-UM
        // whatever the ratio, so no sample; a cache-sized build side may take NPHJ.
        let eight = Features { eight_byte_payloads: 6, ..pkfk(3) };
        assert!(!eight.needs_sample());
        assert_eq!(choose(&eight).0, Algorithm::PhjUm);
        assert!(!pkfk(4).needs_sample());
        assert!(Features { build_rows: 1 << 18, ..eight }.needs_sample());
        // Two 8-byte columns a side from 2^26 build rows: the ratio decides (PHJ-OM when high).
        let two = Features { eight_byte_payloads: 4, ..pkfk(2) };
        assert!(two.needs_sample());
        assert_eq!(choose(&Features { match_ratio: Some(1.0), ..two }).0, Algorithm::PhjOm);
        assert_eq!(choose(&Features { match_ratio: Some(0.1), ..two }).0, Algorithm::PhjUm);
        // Narrow 8-byte payloads below 2^26 build rows: PHJ-UM whatever the ratio.
        assert!(!Features { build_rows: 1 << 24, probe_rows: 1 << 25, eight_byte_payloads: 2, ..pkfk(1) }.needs_sample());
    }

    #[test]
    fn sampled_ratio_resolves_duplicates_and_float_equality() {
        // Keys 5, 5, 7, 9: the device flagged one entry of 5 (the second) and 9.
        assert_eq!(ratio_from_flags(&[5, 5, 7, 9], &[0, 1, 0, 1], SampleMode::Bits), 0.75);
        assert_eq!(ratio_from_flags(&[], &[], SampleMode::Bits), 0.0);
        // -0.0 and 0.0 are one key; NaNs one key, or none when NaN equals nothing.
        let f = |x: f32| x.to_bits() as u64;
        let nan2 = f32::from_bits(0x7fc0_0001);
        let eq = SampleMode::F32 { nan_never: false };
        assert_eq!(eq.canon(f(-0.0)), eq.canon(f(0.0)));
        assert_eq!(eq.canon(f(f32::NAN)), eq.canon(f(nan2)));
        assert_eq!(ratio_from_flags(&[f(-0.0), f(0.0), f(f32::NAN), f(nan2)], &[0, 1, 1, 0], eq), 1.0);
        let never = SampleMode::F32 { nan_never: true };
        assert_eq!(never.canon(f(f32::NAN)), None);
        assert_eq!(ratio_from_flags(&[f(-0.0), f(1.0), f(f32::NAN), f(nan2)], &[1, 0, 1, 1], never), 0.25);
        let d = SampleMode::F64 { nan_never: false };
        assert_eq!(d.canon((-0.0f64).to_bits()), Some(0));
        assert_eq!(d.canon(f64::NAN.to_bits()), d.canon(f64::from_bits(0xfff8_0000_0000_0001).to_bits()));
        assert_eq!(d.canon(1.5f64.to_bits()), Some(1.5f64.to_bits()));
    }

    #[test]
    fn sort_merge_tree() {
        let f = Features { match_ratio: Some(1.0), skew: Some(zipf_like(2, 4090)), ..pkfk(2) };
        assert_eq!(choose_sort_merge(&f).0, Algorithm::SmjOm);
        assert_eq!(choose_sort_merge(&pkfk(1)).0, Algorithm::SmjUm);
        assert_eq!(choose_sort_merge(&Features { eight_byte_payloads: 3, ..f }).0, Algorithm::SmjUm);
        assert_eq!(choose_sort_merge(&Features { eight_byte_payloads: 2, ..f }).0, Algorithm::SmjOm);
        assert_eq!(choose_sort_merge(&Features { match_ratio: Some(0.1), ..f }).0, Algorithm::SmjUm);
        assert_eq!(choose_sort_merge(&Features { skew: Some(zipf_like(300, 1500)), ..f }).0, Algorithm::SmjUm);
    }

    #[test]
    fn sampled_skew_separates_zipf_from_uniform() {
        use gpujoin_testkit::datagen::{foreign_keys_uniform, zipf_keys};
        let n = 1 << 20;
        let sample = |keys: &[u32]| -> SampledSkew {
            let m = SAMPLE_ROWS;
            let s: Vec<u64> = (0..m).map(|i| keys[i * keys.len() / m] as u64).collect();
            SampledSkew::from_sample(&s)
        };
        assert!(!sample(&foreign_keys_uniform(n, 2 * n, 1).unwrap()).is_skewed());
        assert!(!sample(&foreign_keys_uniform(100, 2 * n, 1).unwrap()).is_skewed(), "small domains are not skew");
        assert!(!sample(&zipf_keys(2 * n, n, 0.5, 2).unwrap()).is_skewed());
        assert!(sample(&zipf_keys(2 * n, n, 1.0, 2).unwrap()).is_skewed());
        assert!(sample(&zipf_keys(2 * n, n, 2.0, 2).unwrap()).is_skewed());
        assert_eq!(SampledSkew::from_sample(&[]), SampledSkew::default());
        assert!(!SampledSkew::default().is_skewed());
    }
}
