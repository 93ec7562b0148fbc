//! [`GpuJoinConfig`]: when the rule replaces joins and how [`GpuJoinExec`](crate::GpuJoinExec)
//! runs them.

use gpujoin_join::plan::Algorithm;

/// How [`GpuJoinRule`](crate::GpuJoinRule) decides and [`GpuJoinExec`](crate::GpuJoinExec) runs.
///
/// Build it from the default: `GpuJoinConfig { batch_rows: Some(1 << 16), ..GpuJoinConfig::default() }`.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuJoinConfig {
    /// Replace joins at all (default `true`). With `false` the rule records "disabled" for each
    /// join and leaves every plan as it is.
    pub enabled: bool,
    /// The CUDA device the joins run on (default 0).
    pub device: usize,
    /// Rows per output batch; `None` (the default) takes the session's
    /// `datafusion.execution.batch_size` (8192 unless set). The GPU joins whole partitions at
    /// once and downloads its output in batches of this size: a larger one (65536, also
    /// gpujoin-arrow's default) means fewer, longer copies from the device; see the crate docs.
    pub batch_rows: Option<usize>,
    /// The algorithm of every GPU join (default [`Algorithm::Auto`]: gpujoin chooses per join,
    /// from the input).
    pub algorithm: Algorithm,
    /// Accept floating-point join keys and float comparisons in join filters (default `false`).
    ///
    /// DataFusion compares floats by their total order (bit patterns): `-0.0 <> 0.0`, and a NaN
    /// equals a NaN of the same bits and sorts above every number. gpujoin compares them as
    /// numbers: `-0.0 = 0.0` and, in filters, every comparison with NaN but `<>` is false (keys:
    /// NaN equals NaN). The answers differ only on signed zeros and NaN; with `false` such joins
    /// stay on the CPU.
    pub allow_float_semantics: bool,
    /// Produce the output in chunks of at most this many device bytes (always; `None`, the
    /// default: the whole output at once when it fits in device memory, else in chunks sized from
    /// the free memory).
    pub chunk_bytes: Option<u64>,
    /// Where the output columns are gathered (default [`OutputGather::Host`]: only the key and
    /// filter columns go to the device).
    pub gather: OutputGather,
    /// Rows of the probe (right) input joined at a time, for equi-joins with
    /// [`OutputGather::Host`] (those returning the build side's unmatched or matched rows keep
    /// its matched-rows bitmap across parts): the partition reads its probe input a part at a time
    /// and joins each part on the device while the next one is read, as DataFusion's hash join
    /// streams its probe side (the build side is uploaded once). Example: with 2^20 here, a
    /// probe partition of 3.5M rows is joined in 4 parts (whole batches, the last one smaller),
    /// the output of the first one sent on while the input still arrives. `None` (the default): parts of at least
    /// [`MIN_PROBE_PART_ROWS`] rows and at least the build side's rows (each part's join repeats
    /// the build side's preparation); `Some(usize::MAX)`: the whole probe partition at once.
    pub probe_part_rows: Option<usize>,
    /// The most partitions that use the device at once (uploading, joining, downloading the
    /// joined rows' indices), over every `GpuJoinExec` of the process on this device; the others
    /// wait, and host work (gathering output columns, sending batches) runs outside. `None` (the
    /// default): [`DEFAULT_DEVICE_LANES`]. Every CUDA call takes locks all threads share: with
    /// sixteen partitions calling at once on a machine whose cores DataFusion keeps busy, each
    /// call waited for a core and the device sat idle. Applies to host gathers
    /// ([`OutputGather::Host`]) and, for device gathers, to the upload and join (their
    /// downloads stream with the output).
    pub device_lanes: Option<usize>,
    /// The most bytes of freed device blocks (each at most a sixteenth of this:
    /// [`GpuJoinConfig::block_cache_largest`]) a partition keeps for its next device joins,
    /// instead of returning them to the device's pool
    /// (`gpujoin_device::Device::new_stream_with_block_cache`). A join of a probe part
    /// makes some fifty allocations, each an allocation and a free in the driver, calls that
    /// wait for the driver's lock and for a core while DataFusion's threads keep every core
    /// busy. Kept until the partition's work ends. `None` (the default):
    /// [`DEFAULT_BLOCK_CACHE_BYTES`]; `Some(0)`: none kept.
    pub block_cache_bytes: Option<usize>,
    /// Equi-joins whose build (left) input has fewer rows than this stay on the CPU
    /// (`CpuJoinKeptExec: reason=a build side of at most N rows ...`). The bound is known where
    /// the input is a table with an exact row count (in memory, Parquet) under filters,
    /// projections, repartitions, sorts and aggregates, which never add rows; a build side made
    /// by a join (whose row estimates DataFusion can get orders of magnitude low) or unknown
    /// moves, as do theta and cross joins. Why: a device join has a fixed host cost (its upload's
    /// set-up, launches, the download of its indices: about a millisecond a partition) and
    /// collects each probe part before it joins, while DataFusion probes a small hash table, one
    /// the CPU's caches hold, as its input streams by. Example: TPC-H Q5's joins with `region`
    /// (5 rows, 1 after its filter) and `nation` (25) stay with `Some(1024)`; those with
    /// `customer` and with the join of `orders` and `customer` move. `None` (the default):
    /// [`DEFAULT_MIN_BUILD_ROWS`]; `Some(0)`: every join gpujoin can run moves.
    pub min_build_rows: Option<usize>,
    /// `Partitioned` hash joins with keys (every join type; Left, Full, LeftSemi and LeftAnti
    /// with host gathers and [`GpuJoinConfig::shared_matched_rows`]) whose two inputs
    /// are hash-repartitioned for them become `CollectLeft` GPU joins of the inputs before those
    /// repartitions (the build side coalesced into one, the probe side as it comes) when the
    /// build side is estimated at no more rows than this and than the probe side (an unknown
    /// estimate, a join's output, counts as small enough), and the plan above does not rely on
    /// the join's output being hash-partitioned (DataFusion's `SanityCheckPlan` decides; where
    /// it would, the join stays `Partitioned`). DataFusion hash-partitions both sides so that its
    /// CPU join builds one hash table a core; the device needs no such split, and repartitioning
    /// costs the host a hash and a copy of every row of both inputs: TPC-H Q8 at SF10 spends 1.4 s
    /// of its cores repartitioning `lineitem`'s 60M rows for a join with 13,000 `part` rows.
    /// The price: every probe part's device join prepares the whole build side, not a
    /// partition's share. `EXPLAIN` shows such a join as
    /// `replaces=HashJoinExec (Partitioned; unrepartitioned inputs)`. `None` (the default):
    /// [`DEFAULT_COLLECT_BUILD_ROWS`]; `Some(0)`: never.
    pub collect_build_rows: Option<usize>,
    /// How many output batches a partition takes from its host batches at once, on threads of
    /// their own ([`OutputGather::Host`]): a device join's rows come back as indices, a part
    /// at a time, and the partition cuts them into output batches whose columns it takes from
    /// the inputs (`take`, `interleave`, cache misses at random rows); with more than one, up to
    /// that many are taken in parallel and then sent on in order. `None` (the default):
    /// [`DEFAULT_PARALLEL_GATHER_BATCHES`]; `Some(1)`: one at a time on the partition's thread.
    pub parallel_gather_batches: Option<usize>,
    /// Semi-join reductions ([`crate::reduce`]): where an inner equi-join has an input of at
    /// most this many rows that is a filtered table, the table below the joins in between that
    /// makes the other input's key is first reduced to the rows whose key is among that input's
    /// (a CPU `RightSemi` hash join under a `CpuJoinKeptExec: reason=semi-join reduction ...`).
    /// Example: TPC-H Q7 at SF10 joins 18M `supplier JOIN lineitem JOIN orders JOIN customer`
    /// rows, then keeps 1.46M of them by a join with the two nations of its filter; reduced,
    /// `supplier` keeps the suppliers of those nations before its join with `lineitem`. Applied
    /// last, after the joins have moved. `None` (the default):
    /// [`DEFAULT_SEMI_JOIN_REDUCTION_ROWS`](crate::DEFAULT_SEMI_JOIN_REDUCTION_ROWS); `Some(0)`:
    /// none.
    pub semi_join_reduction_rows: Option<usize>,
    /// The most rows of a table that a semi-join reduction reduces (its known row count; one
    /// of unknown size is reduced all the same): a reduction probes every row of the table on
    /// the CPU, and the GPU joins above filter a large table faster. On TPC-H SF10 (H200, 16
    /// partitions) Q5's `lineitem` (60M rows) reduced by the 20,000 suppliers of its region
    /// took 845 ms of the cores and Q5 took 189-192 ms against 144-159 ms without that
    /// reduction (`benches/results/issue12-tpch-h100.md`, session 30). `None` (the default):
    /// [`DEFAULT_SEMI_JOIN_REDUCED_ROWS`].
    pub semi_join_reduced_rows: Option<usize>,
    /// Probe rows a partition reads while the build side is still being collected, before it
    /// joins, so that the probe input's work (a scan, a filter) overlaps the build side's. `None`
    /// (the default): none, the probe side is read once the build side is in, as DataFusion's
    /// hash join does: on TPC-H SF10 (16 partitions, H200) reading 2^20 rows ahead changed no
    /// query's time beyond the runs' spread (Q3 1.38x and 1.17-1.25x over plain with it, 1.14x
    /// and 1.45x without; `benches/results/issue12-tpch-h100.md`, session 29) and holds those
    /// rows in memory a partition.
    pub probe_prefetch_rows: Option<usize>,
    /// Whether the partitions of a `CollectLeft` join share its build side's matched-rows
    /// bitmap (default `true`): a Left, Full, LeftSemi or LeftAnti equi-join (host gathers)
    /// then probes every partition of its probe side at once, each marking the build rows it
    /// matched, and the partition that finishes last sends the build rows the join returns, as
    /// DataFusion's `HashJoinExec` does; the rule also turns `Partitioned` ones into
    /// `CollectLeft` ([`GpuJoinConfig::collect_build_rows`]). Set `false` where a plan's
    /// partitions run in separate processes or plan instances (Ballista's tasks, which share no
    /// memory): such joins then take their probe side in one partition, and stay `Partitioned`
    /// where DataFusion planned them so.
    pub shared_matched_rows: bool,
    /// Whether a `CollectLeft` GPU join that drops the probe rows without a match (Inner, Left,
    /// LeftSemi, LeftAnti, RightSemi) on an integer key has its probe side filtered by its build
    /// side's keys where that side is read (default `true`; see
    /// [`BuildKeys`](crate::key_filter::BuildKeys)): a `FilterExec` testing the key against a
    /// bitmap of the build side's keys, set once the join has collected them, first in the
    /// filter above the table the key comes from (or a new one). Not with
    /// [`GpuJoinConfig::probe_prefetch_rows`] (probe rows read before the keys are set pass
    /// untested). Ballista's plans leave them out: a filter in another stage than its join would
    /// never see the keys (it then passes every row).
    pub probe_key_filters: bool,
    /// Plan GPU joins even without a GPU (tests of the rule's decisions by plan inspection only:
    /// executing such a plan without a GPU fails with gpujoin's `NoDevice` error). Only with the
    /// `testing` feature; not part of the public API.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub force_without_gpu_for_plan_tests: bool,
}

impl Default for GpuJoinConfig {
    fn default() -> Self {
        GpuJoinConfig {
            enabled: true,
            device: 0,
            batch_rows: None,
            algorithm: Algorithm::Auto,
            allow_float_semantics: false,
            chunk_bytes: None,
            gather: OutputGather::Host,
            probe_part_rows: None,
            device_lanes: None,
            block_cache_bytes: None,
            min_build_rows: None,
            collect_build_rows: None,
            parallel_gather_batches: None,
            semi_join_reduction_rows: None,
            semi_join_reduced_rows: None,
            probe_prefetch_rows: None,
            shared_matched_rows: true,
            probe_key_filters: true,
            #[cfg(feature = "testing")]
            force_without_gpu_for_plan_tests: false,
        }
    }
}

/// The fewest probe rows a part of a streamed probe side has by default
/// ([`GpuJoinConfig::probe_part_rows`]): 2^20. On TPC-H SF10 (16 partitions, H200) parts of
/// 2^20 rows ran the eight join-heavy queries in 4050 ms, parts of 2^18 in 4640 and whole probe
/// partitions in 4733 (`benches/results/issue12-tpch-h100.md`, session 22): each part's upload and
/// device round trip has a fixed cost, and four or so parts a partition already overlap them with
/// the reading of the input.
pub const MIN_PROBE_PART_ROWS: usize = 1 << 20;

/// The partitions using the device at once by default ([`GpuJoinConfig::device_lanes`]): 4.
/// On TPC-H SF10 (16 partitions, H200) the GPU join operators' summed time with 16, 4 and 2
/// lanes was 1826, 1384 and 1020 ms in Q5 and 1839, 860 and 626 ms in Q8 (the CPU joins: 1343 and
/// 952), the eight queries' wall time about the same with each
/// (`benches/results/issue12-tpch-h100.md`, session 23); fewer lanes leave the device idle
/// while a partition's upload is on the host.
pub const DEFAULT_DEVICE_LANES: usize = 4;

/// The bytes of small freed device blocks a partition keeps by default
/// ([`GpuJoinConfig::block_cache_bytes`]): 16 MiB. On TPC-H SF10 (16 partitions, H200) with
/// probe parts of 2^16 rows it cut the pool's calls from 44-48 a device join (1.4-1.8 ms) to 1-2
/// (0.2-0.3 ms) and the eight join-heavy queries from 6957 to 5591 ms; 256 MiB did not make the
/// default parts' larger allocations cheaper (`benches/results/issue12-tpch-h100.md`, session 24).
pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 16 << 20;

/// The build rows below which an equi-join stays on the CPU by default
/// ([`GpuJoinConfig::min_build_rows`]): 2^17 = 131072. On TPC-H SF10 (16 partitions, H200, 4
/// device lanes) the eight join-heavy queries took 4725 ms with every join on the GPU against
/// 4401 ms with 2^17 (the joins with `nation`, `region` and `supplier`, 100,000 rows, on the
/// CPU) and 4483 ms with 2^21 (also `customer` and `part`); in a second run 4493 against 4343.
/// The GPU operators' own time fell most (Q21's 2770 -> 1417 ms summed); with 8 lanes the two
/// were even (`benches/results/issue12-tpch-h100.md`, session 25). A hash table of 2^17 rows is
/// a few MiB, within the CPU's caches.
pub const DEFAULT_MIN_BUILD_ROWS: usize = 1 << 17;

/// The most estimated build rows of a `Partitioned` hash join that runs `CollectLeft` on its
/// inputs before their hash repartitions by default ([`GpuJoinConfig::collect_build_rows`]):
/// 2^24 = 16,777,216.
pub const DEFAULT_COLLECT_BUILD_ROWS: usize = 1 << 24;

/// The most rows of a table a semi-join reduction reduces by default
/// ([`GpuJoinConfig::semi_join_reduced_rows`]): 2^24 = 16,777,216.
pub const DEFAULT_SEMI_JOIN_REDUCED_ROWS: usize = 1 << 24;

/// The output batches a partition takes at once by default
/// ([`GpuJoinConfig::parallel_gather_batches`]): 16.
pub const DEFAULT_PARALLEL_GATHER_BATCHES: usize = 16;

/// Where a [`GpuJoinExec`](crate::GpuJoinExec) gathers its output columns.
///
/// Example: `orders(cust, total) JOIN customers(id, name) ON cust = id`, output `total, name`.
/// With `Host`, `cust` and `id` go to the device and the joined rows come back as row indices
/// (`[0, 2] x [1, 1]`: 4 bytes a row a side); the host takes `total` and `name` from the input
/// batches. With `Device`, `total` and `name` go to the device too and come back gathered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputGather {
    /// The device joins the key and filter columns and returns the joined rows' indices; the
    /// host takes the output columns from the input batches (`arrow::compute::take`, on the
    /// partition's thread, as DataFusion's own joins do). The least traffic over PCIe, and
    /// output columns never leave host memory.
    #[default]
    Host,
    /// Every output column goes to the device, is gathered there and comes back. The explicit
    /// clustered algorithms (`SortMerge(Clustered)`, `PartitionedHash(Clustered)`) always run
    /// so: their gathers are part of the join.
    Device,
}

impl GpuJoinConfig {
    /// The probe rows of one part ([`GpuJoinConfig::probe_part_rows`]) against a build side of
    /// `build_rows` rows: `max(MIN_PROBE_PART_ROWS, build_rows)` by default.
    ///
    /// Example: the default with a build side of 10^5 rows gives 2^20, with one of 2·10^6 rows
    /// 2·10^6; with `Some(1000)`, 1000.
    pub fn probe_part_rows_for(&self, build_rows: usize) -> usize {
        self.probe_part_rows.unwrap_or(MIN_PROBE_PART_ROWS.max(build_rows)).max(1)
    }

    /// The partitions that may use the device at once ([`GpuJoinConfig::device_lanes`]).
    pub fn device_lanes(&self) -> usize {
        self.device_lanes.unwrap_or(DEFAULT_DEVICE_LANES).max(1)
    }

    /// The bytes of freed blocks a partition keeps ([`GpuJoinConfig::block_cache_bytes`]).
    pub fn block_cache_bytes(&self) -> usize {
        self.block_cache_bytes.unwrap_or(DEFAULT_BLOCK_CACHE_BYTES)
    }

    /// The build rows below which an equi-join stays on the CPU
    /// ([`GpuJoinConfig::min_build_rows`]).
    pub fn min_build_rows(&self) -> usize {
        self.min_build_rows.unwrap_or(DEFAULT_MIN_BUILD_ROWS)
    }

    /// The most estimated build rows of a `Partitioned` join run `CollectLeft` without its
    /// inputs' hash repartitions ([`GpuJoinConfig::collect_build_rows`]; 0: never).
    pub fn collect_build_rows(&self) -> usize {
        self.collect_build_rows.unwrap_or(DEFAULT_COLLECT_BUILD_ROWS)
    }

    /// The output batches a partition takes at once ([`GpuJoinConfig::parallel_gather_batches`]).
    pub fn parallel_gather_batches(&self) -> usize {
        self.parallel_gather_batches.unwrap_or(DEFAULT_PARALLEL_GATHER_BATCHES).max(1)
    }

    /// The most rows of a filtered join input that reduces the tables below the join
    /// ([`GpuJoinConfig::semi_join_reduction_rows`]; 0: none).
    pub fn semi_join_reduction_rows(&self) -> usize {
        self.semi_join_reduction_rows.unwrap_or(crate::DEFAULT_SEMI_JOIN_REDUCTION_ROWS)
    }

    /// [`GpuJoinConfig::semi_join_reduced_rows`], the default filled in.
    pub fn semi_join_reduced_rows(&self) -> usize {
        self.semi_join_reduced_rows.unwrap_or(DEFAULT_SEMI_JOIN_REDUCED_ROWS)
    }

    /// The probe rows a partition reads while its build side is collected
    /// ([`GpuJoinConfig::probe_prefetch_rows`]; 0: none).
    pub fn probe_prefetch_rows(&self) -> usize {
        self.probe_prefetch_rows.unwrap_or(0)
    }

    /// The largest block a partition keeps: a sixteenth of [`GpuJoinConfig::block_cache_bytes`].
    ///
    /// Example: the default 16 MiB keeps blocks of up to 1 MiB (a per-row buffer of a probe
    /// part of up to 2^18 rows); 256 MiB, blocks of up to 16 MiB.
    pub fn block_cache_largest(&self) -> usize {
        self.block_cache_bytes() / 16
    }

    /// Whether the configuration asks to plan without a GPU (the `testing` feature's switch).
    pub(crate) fn forced(&self) -> bool {
        #[cfg(feature = "testing")]
        {
            self.force_without_gpu_for_plan_tests
        }
        #[cfg(not(feature = "testing"))]
        {
            false
        }
    }
}
