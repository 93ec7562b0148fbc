//! Wide relational joins (issue 4, seed 002: the PVLDB paper "Efficiently Processing Large
//! Relational Joins on GPUs"): relations of key columns and any number of 4- or 8-byte payload
//! columns, joined into a materialized output relation by one of five algorithms, chosen by the
//! caller or by the paper's decision tree ([`Algorithm::Auto`]); and sequences of joins of a fact
//! table with several dimension tables ([`join_sequence`]).
//!
//! | algorithm | transform | match | materialize |
//! |---|---|---|---|
//! | [`Algorithm::SmjUm`] | sort keys with row ids | merge path | unclustered gathers from the inputs (GFUR) |
//! | [`Algorithm::SmjOm`] | sort keys with the first payload; the others one at a time later | merge path | clustered gathers from the sorted columns (GFTR) |
//! | [`Algorithm::PhjUm`] | radix-partition keys with row ids | shared-memory hash tables per co-partition | unclustered gathers (GFUR) |
//! | [`Algorithm::PhjOm`] | radix-partition keys with the first payload; the others one at a time later | as PHJ-UM, writing the first payload | clustered gathers (GFTR) |
//! | [`Algorithm::Nphj`] | sort the build side into one global hash table | probe every row | unclustered gathers |
//!
//! The OM variants follow Algorithm 1 of the paper: only the first payload column of each side
//! is transformed with the keys; every other column is transformed right before its gather and
//! dropped right after it, so at most one transformed column per side is alive at a time.
//!
//! An explicit algorithm never runs another in its place: an input it cannot serve is an
//! [`Error::Unsupported`] before the join.
//!
//! | request | refused with [`Error::Unsupported`] | when |
//! |---|---|---|
//! | [`Algorithm::SmjOm`] | composite keys wider than 64 bits (hashed, verified through maps into the inputs) | before any device work |
//! | [`Algorithm::SmjOm`] | some key matches nothing: null under `NullEqualsNothing`, NaN under `NanNeverEqual` | after the key images, before the join |
//! | [`Algorithm::PhjOm`] | composite keys wider than 64 bits | before any device work |
//!
//! PHJ-OM serves null and NaN keys (set aside, returned as unmatched rows); SMJ-UM, PHJ-UM and
//! NPHJ serve every key. With [`Output::MapsOnly`] nothing is materialized and an OM variant's
//! maps are its UM variant's: the UM variant runs and [`WideJoinOutput::algorithm`] says so.
//! [`Algorithm::Auto`] only picks an algorithm that serves the keys.
//!
//! Every join reports per-phase device times and the peak device memory ([`JoinStats`]), the
//! algorithm it ran and why ([`WideJoinOutput::algorithm`], [`WideJoinOutput::reason`]).
//!
//! Key compression: one 8-byte integer key column (`i64`, `u64`) whose valid keys on both sides
//! span less than 2^32 is joined as the `u32` offsets `key - min` (one reduction a side, one host
//! sync, one pass writing 4 bytes a row), so that every algorithm, `Auto`'s choice included,
//! takes its 4-byte path; equality, key order and nulls are kept, the payloads are the inputs',
//! and the maps index the input rows. The reason ends with `8-byte keys joined as 32-bit offsets
//! from <min> (span <max - min>)`, or `8-byte keys kept: they span <s>, more than 32 bits`; the
//! transform time includes the compression. Left `i64` keys `[-5, 7]` and right `[7, -3]` are
//! joined as `[0, 12]` and `[12, 2]`.
//!
//! Output order: each algorithm's own, deterministic (the same inputs give the same output
//! order on every run): PHJ-* and NPHJ as in [`mod@crate::hash_join`]; SMJ-* by key, then left row
//! order within the sorted left side, then right; unmatched right rows last, in key order.
//!
//! ```no_run
//! # use gpujoin_join::*; use gpujoin_join::wide::*; use gpujoin_join::table::TableView; use gpujoin_device::*;
//! # fn f(s: &Stream) -> Result<()> {
//! let rk = s.copy_from_host(&[1u32, 2, 3])?; // R: primary keys and a price
//! let price = s.copy_from_host(&[10.0f64, 20.0, 30.0])?;
//! let sk = s.copy_from_host(&[3u32, 3, 1])?; // S: foreign keys and a quantity
//! let qty = s.copy_from_host(&[7i32, 8, 9])?;
//! let (r, r_cols) = (TableView::single(rk.view()), [price.view().into()]);
//! let (f, f_cols) = (TableView::single(sk.view()), [qty.view().into()]);
//! let out = join(s, (&r, &r_cols), (&f, &f_cols), JoinType::Inner, Algorithm::Auto, WideJoinOptions::default())?;
//! assert_eq!(out.rows, 3); // (10, 9) (30, 7) (30, 8) in some order
//! println!("{:?} because {}; {:?}", out.algorithm, out.reason, out.stats);
//! # Ok(()) }
//! ```

mod auto;
mod sequence;
mod smj;

#[cfg(feature = "testing")]
pub use auto::sample_for_tests;
pub use auto::{choose, choose_sort_merge, Features, SampledSkew, DIRECT_TABLE_L2_QUARTERS, LOW_MATCH_RATIO, UNIQUE_HASH_TABLE_L2_QUARTERS, NPHJ_MAX_BUILD_ROWS, NPHJ_ORDERED_MAX_BUILD_ROWS, NPHJ_PROBE_PAYLOADS, NPHJ_PROBE_RATIO, SAMPLE_ROWS, TINY_ROWS};
pub use sequence::{join_sequence, SequenceOutput, SequenceStep};

use gpujoin_device::{DeviceView, Error, Event, Result, Stream};

use crate::hash_join::{partitioned_hash_join, partitioned_hash_join_with_payloads, JoinStats, Materialization};
use crate::keys::range::{self, Outcome};
use crate::keys::{check_comparable, check_payloads};
use crate::maps::{map_validity, side_table, GatherMaps, Side};
use crate::table::{ColumnView, Table, TableView};
use crate::types::{JoinOptions, JoinType};

/// One side of a wide join as the algorithms read it: its key columns (checked by
/// [`crate::keys::check_keys`]) and its payload columns (4- or 8-byte values without a validity
/// bitmap, [`crate::keys::check_payloads`]), all of the same length. Callers pass the pair
/// `(&keys, &payloads)` to [`join`].
#[derive(Clone, Copy)]
pub(crate) struct Relation<'a> {
    pub keys: &'a TableView<'a>,
    pub payloads: &'a [ColumnView<'a>],
}

impl<'a> Relation<'a> {
    /// The pair, its payloads checked against the keys' length (the keys themselves are checked
    /// with the other side's by `check_comparable`, which [`join`] and [`join_as_given`] call
    /// before any use).
    pub(crate) fn of(side: &str, (keys, payloads): (&'a TableView<'a>, &'a [ColumnView<'a>])) -> Result<Relation<'a>> {
        check_payloads(side, keys.rows(), payloads)?;
        Ok(Relation { keys, payloads })
    }
    /// The key columns.
    pub(crate) fn keys(&self) -> &'a TableView<'a> {
        self.keys
    }
    /// The payload columns, in order.
    pub(crate) fn payloads(&self) -> &'a [ColumnView<'a>] {
        self.payloads
    }
    /// Number of rows.
    pub(crate) fn rows(&self) -> usize {
        self.keys.rows()
    }
}

/// The join algorithm of a wide join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// Chosen by the paper's decision tree from the sizes, the payload columns and their widths,
    /// and, where the choice depends on them, a sampled match ratio and skew ([`choose`]).
    #[default]
    Auto,
    /// Sort-merge join, unoptimized materialization (GFUR).
    SmjUm,
    /// Sort-merge join, optimized materialization (GFTR).
    SmjOm,
    /// Partitioned hash join, unoptimized materialization (GFUR).
    PhjUm,
    /// Partitioned hash join, optimized materialization (GFTR).
    PhjOm,
    /// Non-partitioned hash join (one global hash table), unclustered gathers.
    Nphj,
}

impl Algorithm {
    /// Every explicit algorithm (all but `Auto`).
    pub const EXPLICIT: [Algorithm; 5] = [Algorithm::SmjUm, Algorithm::SmjOm, Algorithm::PhjUm, Algorithm::PhjOm, Algorithm::Nphj];

    /// The paper's short name ("PHJ-OM", ...).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::SmjUm => "SMJ-UM",
            Algorithm::SmjOm => "SMJ-OM",
            Algorithm::PhjUm => "PHJ-UM",
            Algorithm::PhjOm => "PHJ-OM",
            Algorithm::Nphj => "NPHJ",
        }
    }

    /// A suffix for benchmark case names (`smj_um`, ...).
    pub fn suffix(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::SmjUm => "smj_um",
            Algorithm::SmjOm => "smj_om",
            Algorithm::PhjUm => "phj_um",
            Algorithm::PhjOm => "phj_om",
            Algorithm::Nphj => "nphj",
        }
    }
}

/// What a wide join returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Output {
    /// The materialized output relation (and the gather maps when the algorithm has them).
    #[default]
    Relation,
    /// Only the gather maps into the input rows; no payload is materialized.
    MapsOnly,
}

/// Options of a wide join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WideJoinOptions {
    /// Null and NaN equality of the keys.
    pub keys: JoinOptions,
    /// The materialized relation, or only the maps.
    pub output: Output,
}

impl WideJoinOptions {
    /// Only the gather maps.
    pub fn maps_only() -> Self {
        WideJoinOptions { output: Output::MapsOnly, ..Self::default() }
    }

    /// The same options, collecting the statistics ([`JoinOptions::stats`]).
    pub fn with_stats(self) -> Self {
        WideJoinOptions { keys: JoinOptions { stats: true, ..self.keys }, ..self }
    }
}

/// The output relation of a wide join.
///
/// `left` / `right` hold the payload columns of that side in input order (`None` where the join
/// type has no such side, or for [`Output::MapsOnly`]); outer-join rows without a partner on a
/// side read zero there and are null in that side's columns (each with a validity bitmap). `maps` are
/// gather maps into the input rows: always with [`Output::MapsOnly`], otherwise when the
/// algorithm has them (the UM variants and NPHJ; the OM variants work with positions in the
/// transformed relations instead).
pub struct WideJoinOutput {
    pub join_type: JoinType,
    pub rows: u64,
    pub left: Option<Table>,
    pub right: Option<Table>,
    pub maps: Option<GatherMaps>,
    /// Per-phase device times and peak device memory of the join (the sampling of
    /// [`Algorithm::Auto`] is not included).
    pub stats: JoinStats,
    /// The algorithm that ran (never `Auto`).
    pub algorithm: Algorithm,
    /// Why it ran: the decision tree's branch for `Auto`, or "requested" (with a note when an
    /// OM variant was asked for [`Output::MapsOnly`], where the UM variant runs).
    pub reason: String,
}

/// Joins two wide relations with `algorithm` and materializes the output relation.
///
/// Any key columns and join type. Keys of the two sides must have the same column types.
/// An OM variant asked for keys it cannot serve is an [`Error::Unsupported`]. See the
/// [module docs](self) for the algorithms, the refusals and the output order.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::wide::*; use gpujoin_device::*;
/// # use gpujoin_join::table::{ColumnView, TableView};
/// # fn f(s: &Stream, r: &TableView, r_cols: &[ColumnView], f: &TableView, f_cols: &[ColumnView]) -> Result<()> {
/// let out = join(s, (r, r_cols), (f, f_cols), JoinType::Left, Algorithm::PhjOm, WideJoinOptions::default())?;
/// let right = out.right.as_ref().unwrap();
/// assert!(right.columns()[0].view().validity().is_some()); // left rows without a partner: null on the right
/// # Ok(()) }
/// ```
pub fn join<'a>(stream: &Stream, left: (&'a TableView<'a>, &'a [ColumnView<'a>]), right: (&'a TableView<'a>, &'a [ColumnView<'a>]), join_type: JoinType, algorithm: Algorithm, opts: WideJoinOptions) -> Result<WideJoinOutput> {
    let (left, right) = (&Relation::of("left", left)?, &Relation::of("right", right)?);
    check_comparable(left.keys, right.keys)?;
    if !range::eligible_pair(left.keys, right.keys, opts.keys) {
        return join_as_given(stream, left, right, join_type, algorithm, opts);
    }
    let start = Event::new(stream.device(), true)?;
    start.record(stream)?;
    let outcome = range::compress(stream, left.keys, right.keys, opts.keys)?;
    let end = Event::new(stream.device(), true)?;
    end.record(stream)?;
    let (mut out, note) = match outcome {
        Outcome::NotEligible => return join_as_given(stream, left, right, join_type, algorithm, opts),
        Outcome::TooWide(r) => (join_as_given(stream, left, right, join_type, algorithm, opts)?, range::wide_note(r)),
        Outcome::Compressed(c) => {
            let (lk, rk) = (c.keys(left.keys, true)?, c.keys(right.keys, false)?);
            let (l, r) = (Relation { keys: &lk, payloads: left.payloads }, Relation { keys: &rk, payloads: right.payloads });
            (join_as_given(stream, &l, &r, join_type, algorithm, opts)?, c.note())
        }
    };
    out.reason = format!("{}; {note}", out.reason);
    // The range's reduction and the offsets count as transform time.
    end.synchronize()?; // long complete: the join waited for the device at its end
    let ms = start.elapsed_ms(&end)?;
    out.stats.transform_ms += ms;
    out.stats.total_ms += ms;
    Ok(out)
}

/// [`join`] on the keys as given, never compressed here (the front door prepares its keys
/// itself, compressed where they can be).
pub(crate) fn join_as_given(stream: &Stream, left: &Relation<'_>, right: &Relation<'_>, join_type: JoinType, algorithm: Algorithm, opts: WideJoinOptions) -> Result<WideJoinOutput> {
    check_comparable(left.keys, right.keys)?;
    let maps_only = opts.output == Output::MapsOnly;
    let (algorithm, reason) = match algorithm {
        Algorithm::Auto => {
            let features = auto::Features::of(left, right, join_type, opts);
            if let Some((out, reason)) = auto::join_where_unique(stream, left, right, join_type, opts, &features)? {
                return nphj_relation(stream, left, right, join_type, opts, out, reason);
            }
            auto::decide(stream, left, right, opts, features)?
        }
        a => (a, "requested".to_string()),
    };
    match algorithm {
        Algorithm::Auto => Err(Error::invalid("internal: Auto chose Auto")),
        Algorithm::SmjUm | Algorithm::SmjOm => {
            // The hash joins check a caller's output budget themselves; the wide sort-merge
            // joins count first here (no output allocated), as the plain sort-merge join does.
            crate::common::check_output_budget(stream, left.keys, right.keys, join_type, opts.keys)?;
            smj::join(stream, left, right, join_type, algorithm == Algorithm::SmjOm, opts, reason)
        }
        Algorithm::PhjUm | Algorithm::PhjOm if maps_only => {
            // No payload to materialize: PHJ-OM's maps are PHJ-UM's; PHJ-UM runs and says so.
            let reason = if algorithm == Algorithm::PhjOm { format!("{reason}; maps only: no payload to materialize, so PHJ-OM's clustered gathers do not apply: PHJ-UM") } else { reason };
            let out = partitioned_hash_join(stream, left.keys, right.keys, join_type, opts.keys)?;
            Ok(WideJoinOutput { join_type, rows: out.maps.rows(), left: None, right: None, maps: Some(out.maps), stats: out.stats, algorithm: Algorithm::PhjUm, reason })
        }
        Algorithm::PhjUm | Algorithm::PhjOm => {
            // PHJ-OM of hashed keys: Error::Unsupported before any device work.
            let mode = if algorithm == Algorithm::PhjOm { Materialization::Clustered } else { Materialization::Unclustered };
            let out = partitioned_hash_join_with_payloads(stream, left.keys, left.payloads, right.keys, right.payloads, join_type, opts.keys, mode)?;
            Ok(WideJoinOutput { join_type, rows: out.rows, left: out.left, right: out.right, maps: out.maps, stats: out.stats, algorithm, reason })
        }
        Algorithm::Nphj => {
            let out = crate::hash_join::nphj_with(stream, left.keys, right.keys, join_type, opts.keys)?;
            nphj_relation(stream, left, right, join_type, opts, out, reason)
        }
    }
}

/// NPHJ's output relation: its maps, and the payloads gathered through them (unclustered)
/// unless only the maps are asked for. The gathers are timed (events, a wait for the device) only
/// where statistics are asked for.
fn nphj_relation(stream: &Stream, left: &Relation<'_>, right: &Relation<'_>, join_type: JoinType, opts: WideJoinOptions, out: crate::hash_join::HashJoinOutput, reason: String) -> Result<WideJoinOutput> {
    let (maps, mut stats, algorithm) = (out.maps, out.stats, Algorithm::Nphj);
    if opts.output == Output::MapsOnly {
        return Ok(WideJoinOutput { join_type, rows: maps.rows(), left: None, right: None, maps: Some(maps), stats, algorithm, reason });
    }
    let recorded = || -> Result<Event> {
        let e = Event::new(stream.device(), true)?;
        e.record(stream)?;
        Ok(e)
    };
    let start = if opts.keys.stats { Some(recorded()?) } else { None };
    let (l, r) = gather_sides(stream, &maps, left.payloads, right.payloads)?;
    if let Some(start) = start {
        let end = recorded()?;
        end.synchronize()?;
        stats.materialize_ms = start.elapsed_ms(&end)?;
        stats.total_ms = stats.transform_ms + stats.match_ms + stats.materialize_ms;
        stats.peak_memory_bytes = stream.device().peak_memory()?;
    }
    Ok(WideJoinOutput { join_type, rows: maps.rows(), left: l, right: r, maps: Some(maps), stats, algorithm, reason })
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

pub(crate) use crate::maps::gather_column;

/// Gathers the columns of one side through `map` (unclustered when the map is into the inputs).
pub(crate) fn gather_side(stream: &Stream, map: &DeviceView<'_, u32>, cols: &[ColumnView<'_>], nullable: bool) -> Result<Table> {
    let columns = cols.iter().map(|c| gather_column(stream, c, map)).collect::<Result<Vec<_>>>()?;
    let validity = if nullable { Some(map_validity(stream, map)?) } else { None };
    side_table(stream, columns, validity)
}

/// Both sides' payloads through maps into the input rows.
pub(crate) fn gather_sides(stream: &Stream, maps: &GatherMaps, lp: &[ColumnView<'_>], rp: &[ColumnView<'_>]) -> Result<(Option<Table>, Option<Table>)> {
    let side = |s: Side, cols: &[ColumnView<'_>]| -> Result<Option<Table>> {
        maps.side(s).map(|m| gather_side(stream, &m.cast::<u32>(), cols, maps.nullable(s))).transpose()
    };
    Ok((side(Side::Left, lp)?, side(Side::Right, rp)?))
}

pub(crate) use crate::common::Clock;
