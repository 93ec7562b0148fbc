//! The seed-002 paper's five TPC joins (its section 5.3 and Table 6) through the front door
//! (`gpujoin::join::plan::Join` over uploaded `Table`s). Group `tpc_joins`.
//!
//! | join | query | R (build, primary-key side) | S (probe side) | output | payloads |
//! |---|---|---|---|---|---|
//! | J1 | TPC-H Q7, SF 10 | `orders`, 15M | `lineitem` shipped in 1995-1996, 18.2M | 18.2M | 1K3NK(R) + 1NK(S) |
//! | J2 | TPC-H Q18, SF 10 | `orders`, 15M | `lineitem`, 60M | 60M | 1K2NK(R) + 1NK(S) |
//! | J3 | TPC-H Q19, SF 10 | `part`, 2M | `lineitem` of Q19's pushed-down filters, 2.1M | 2.1M | 3NK(R) + 3NK(S) |
//! | J4 | TPC-DS Q64, SF 100 | synthetic, 1.9M | synthetic, 58M | 58M | 1NK(R) + 3K7NK(S) |
//! | J5 | TPC-DS Q95, SF 100 | synthetic, 72M | the same relation | 904M | 1NK(R) + 1NK(S), self join |
//!
//! As in the paper: join keys and the other key attributes ("K") are 4 bytes (`UInt32`),
//! non-key attributes ("NK") 8 bytes (`Int64`: prices in cents, dates as days since 1970, strings
//! dictionary-encoded as the ranks of their sorted distinct values), and the rows of every input
//! are shuffled. Every join is an inner equi-join on one key column.
//!
//! **J1-J3** come from the TPC-H tables generated in process by `tpchgen` (one part per core,
//! in parallel) and filtered as their queries filter:
//! - J1 (Q7): `orders` (payloads `o_custkey` K; `o_orderdate`, `o_totalprice`,
//!   `o_orderpriority` NK) ⋈ `lineitem where l_shipdate between 1995-01-01 and 1996-12-31`
//!   (payload `l_volume = l_extendedprice * (1 - l_discount)` NK) on `orderkey`;
//! - J2 (Q18): `orders` (`o_custkey` K; `o_orderdate`, `o_totalprice` NK) ⋈ `lineitem`
//!   (`l_quantity` NK) on `orderkey`;
//! - J3 (Q19): `part` (`p_brand`, `p_container`, `p_size` NK) ⋈ `lineitem where l_shipmode in
//!   ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON'` (`l_quantity`,
//!   `l_extendedprice`, `l_discount` NK) on `partkey`. These are the conjuncts every branch of
//!   Q19's OR shares; the data's mode is `REG AIR`, so only `AIR` passes, as in any engine:
//!   1/28 of `lineitem`, the paper's 2.1M at SF 10.
//!
//! Table 6 gives counts of columns, not their names: the columns above are the query's where
//! the counts allow (J2 and J3 exactly; J1's R side has more columns than Q7 reads from
//! `orders`). **J4 and J5** are synthetic, of the paper's row and column counts at SF 100:
//! J4's R has the keys `0..|R|` shuffled, its S a foreign key into them used equally often,
//! shuffled, three 4-byte keys into other domains and seven 8-byte values; J5 joins one
//! relation with itself on a foreign key over `d = |S|^2 / 904M` (5.73M) distinct values, each
//! used 12 or 13 times (shuffled), so the output has `sum(c^2)` = 904M rows, and carries one
//! 8-byte value (`ws_warehouse_sk`, 1 to 15). J5's output, 904M rows of two 8-byte columns
//! (14.5 GB) and its gather maps (7.2 GB), fits the H100's 80 GB (peak 21 GiB measured): it
//! runs through `run`; its `_count` row times `Join::count` (sizes only) beside it.
//!
//! Cases: `<join>_<query>_sf<N>` runs `Algorithm::Auto` (its sampling included); the suffixes
//! `_phj_um`, `_phj_om`, `_smj_um`, `_smj_om`, `_nphj` force `PartitionedHash(Unclustered)`,
//! `PartitionedHash(Clustered)`, `SortMerge(Unclustered)`, `SortMerge(Clustered)` and `Hash`.
//! Inputs are uploaded before timing; each case is checked once untimed (rows, and the sums of
//! the first payload column of each side over the output against the CPU's, where the output is
//! small enough to download), timed by device events after a warm-up (median), and run once more
//! for a `STATS` line (the algorithm, Auto's reason, per-phase times, peak device memory).
//! Byte floor: the selected input columns (keys and payloads) read once and the output's payload
//! columns written once, at the copy bandwidth measured in the same run.
//!
//! Environment: `GPUJOIN_TPC_SF` (TPC-H scale factor, default 10, at most 100),
//! `GPUJOIN_TPC_DS_SF` (J4/J5's, default 100; rows scale linearly), `GPUJOIN_TPC_JOINS` (a comma
//! list such as `j1,j5`; default all), `GPUJOIN_TPC_DRY_RUN=1` (generate the inputs, print their
//! counts and the CPU's expected output, no GPU; e.g. `GPUJOIN_TPC_SF=0.1 GPUJOIN_TPC_DS_SF=1`).

mod common;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use common::Harness;
use gpujoin::join::plan::{Algorithm, Gather, Join};
use gpujoin::join::table::{HostColumn, HostTable, Table};
use gpujoin::join::JoinType;
use gpujoin_testkit::datagen;
use tpchgen::generators::{LineItemGenerator, OrderGenerator, PartGenerator};

const GROUP: &str = "tpc_joins";

/// The algorithms each join runs: Auto, then every explicit equi-join algorithm that serves it.
const ALGORITHMS: [(Algorithm, &str); 6] = [
    (Algorithm::Auto, ""),
    (Algorithm::PartitionedHash(Gather::Unclustered), "_phj_um"),
    (Algorithm::PartitionedHash(Gather::Clustered), "_phj_om"),
    (Algorithm::SortMerge(Gather::Unclustered), "_smj_um"),
    (Algorithm::SortMerge(Gather::Clustered), "_smj_om"),
    (Algorithm::Hash, "_nphj"),
];

/// Outputs whose first payload columns (the two the check downloads) take more bytes than this
/// together are checked by their row count only (J5: 904M rows, 13.5 GiB).
const CHECK_DOWNLOAD_BYTES: u64 = 4 << 30;

// ---------------------------------------------------------------------------------------------
// Host relations.

/// A payload column: a 4-byte key attribute ("K") or an 8-byte non-key attribute ("NK").
enum Payload {
    K(Vec<u32>),
    Nk(Vec<i64>),
}

impl Payload {
    fn width(&self) -> u64 {
        match self {
            Payload::K(_) => 4,
            Payload::Nk(_) => 8,
        }
    }

    /// Value `i` as the bits a wrapping sum of the column's bytes adds (`u32` zero-extended,
    /// `i64` reinterpreted).
    fn bits(&self, i: usize) -> u64 {
        match self {
            Payload::K(v) => u64::from(v[i]),
            Payload::Nk(v) => v[i] as u64,
        }
    }

    fn permuted(&self, perm: &[u32]) -> Payload {
        match self {
            Payload::K(v) => Payload::K(permute(v, perm)),
            Payload::Nk(v) => Payload::Nk(permute(v, perm)),
        }
    }

    fn host_column(&self) -> HostColumn {
        match self {
            Payload::K(v) => HostColumn::from_values(v.clone()),
            Payload::Nk(v) => HostColumn::from_values(v.clone()),
        }
    }
}

/// One input relation on the host: a 4-byte join key and named payload columns.
struct Rel {
    /// What it is, e.g. `orders` or `lineitem where l_shipdate in 1995-1996`.
    what: String,
    key_name: &'static str,
    keys: Vec<u32>,
    payloads: Vec<(&'static str, Payload)>,
}

impl Rel {
    fn rows(&self) -> usize {
        self.keys.len()
    }

    fn payload(&self, name: &str) -> &Payload {
        &self.payloads.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{} has no column {name}", self.what)).1
    }

    /// Its rows in a random order (seeded).
    fn shuffled(self, seed: u64) -> Rel {
        let perm = datagen::shuffled_dense_keys(self.rows(), seed).expect("fewer than 2^32 rows");
        let keys = permute(&self.keys, &perm);
        let payloads = self.payloads.iter().map(|(n, p)| (*n, p.permuted(&perm))).collect();
        Rel { what: self.what, key_name: self.key_name, keys, payloads }
    }

    fn host_table(&self) -> HostTable {
        let mut cols = vec![(self.key_name, HostColumn::from_values(self.keys.clone()))];
        cols.extend(self.payloads.iter().map(|(n, p)| (*n, p.host_column())));
        HostTable::new(cols).expect("columns of one length")
    }

    /// `1K3NK`-style shape of the selected payloads.
    fn shape(&self, select: &[&str]) -> String {
        let k = select.iter().filter(|n| self.payload(n).width() == 4).count();
        let nk = select.len() - k;
        match (k, nk) {
            (0, nk) => format!("{nk}NK"),
            (k, 0) => format!("{k}K"),
            (k, nk) => format!("{k}K{nk}NK"),
        }
    }

    /// Bytes of the key and the selected payloads.
    fn row_bytes(&self, select: &[&str]) -> u64 {
        4 + self.out_row_bytes(select)
    }

    fn out_row_bytes(&self, select: &[&str]) -> u64 {
        select.iter().map(|n| self.payload(n).width()).sum()
    }
}

/// One of the five joins.
struct Workload {
    /// `j1_q7_sf10`: the case name of its Auto row.
    case: String,
    title: &'static str,
    r: Arc<Rel>,
    /// The same `Arc` as `r` for a self join.
    s: Arc<Rel>,
    r_select: Vec<&'static str>,
    s_select: Vec<&'static str>,
    /// The paper's |R|, |S| and output rows at this scale (Table 6, scaled linearly).
    paper: [f64; 3],
    /// Also time `Join::count`.
    count_case: bool,
}

/// What the CPU expects of a join: output rows and the wrapping sums of the first selected
/// payload of each side over the output rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expected {
    rows: u64,
    r_sum: u64,
    s_sum: u64,
}

impl Workload {
    fn self_join(&self) -> bool {
        Arc::ptr_eq(&self.r, &self.s)
    }

    /// Per key of R: its rows and the sum of its first payload; then one pass over S.
    fn expected(&self) -> Expected {
        let (r, s) = (&*self.r, &*self.s);
        let (rp, sp) = (r.payload(self.r_select[0]), s.payload(self.s_select[0]));
        let m = r.keys.iter().copied().max().map_or(0, |k| k as usize + 1);
        let mut count = vec![0u32; m];
        let mut sum = vec![0u64; m];
        for (i, &k) in r.keys.iter().enumerate() {
            count[k as usize] += 1;
            sum[k as usize] = sum[k as usize].wrapping_add(rp.bits(i));
        }
        let mut e = Expected { rows: 0, r_sum: 0, s_sum: 0 };
        for (j, &k) in s.keys.iter().enumerate() {
            let k = k as usize;
            if k < m && count[k] > 0 {
                e.rows += u64::from(count[k]);
                e.r_sum = e.r_sum.wrapping_add(sum[k]);
                e.s_sum = e.s_sum.wrapping_add(u64::from(count[k]).wrapping_mul(sp.bits(j)));
            }
        }
        e
    }

    /// The selected inputs read once and the output's payloads written once.
    fn floor_bytes(&self, out_rows: u64) -> u64 {
        let (r, s) = (&*self.r, &*self.s);
        r.rows() as u64 * r.row_bytes(&self.r_select) + s.rows() as u64 * s.row_bytes(&self.s_select) + out_rows * (r.out_row_bytes(&self.r_select) + s.out_row_bytes(&self.s_select))
    }

    fn describe(&self, e: &Expected) -> String {
        let (r, s) = (&*self.r, &*self.s);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let out_bytes = e.rows * (r.out_row_bytes(&self.r_select) + s.out_row_bytes(&self.s_select));
        format!(
            "{}: R = {} ({} rows, key {}, payloads {} = {}), S = {}{} ({} rows, key {}, payloads {} = {}); output {} rows ({:.2} GiB of payload columns, {:.2} GiB of gather maps) | paper (scaled): {:.2}M x {:.2}M -> {:.2}M; here / paper: {:.3}, {:.3}, {:.3}",
            self.title,
            r.what,
            r.rows(),
            r.key_name,
            r.shape(&self.r_select),
            self.r_select.join(", "),
            if self.self_join() { "the same relation: " } else { "" },
            s.what,
            s.rows(),
            s.key_name,
            s.shape(&self.s_select),
            self.s_select.join(", "),
            e.rows,
            gib(out_bytes),
            gib(e.rows * 8),
            self.paper[0] / 1e6,
            self.paper[1] / 1e6,
            self.paper[2] / 1e6,
            r.rows() as f64 / self.paper[0],
            s.rows() as f64 / self.paper[1],
            e.rows as f64 / self.paper[2],
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Parallel helpers.

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).max(1)
}

/// `[f(0), .., f(n - 1)]`, one thread each.
fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..n).map(|i| s.spawn(move || f(i))).collect();
        handles.into_iter().map(|h| h.join().expect("a generator thread panicked")).collect()
    })
}

/// `[f(0), .., f(n - 1)]` over all cores, in contiguous chunks.
fn par_fill<T: Send + Copy + Default>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut out = vec![T::default(); n];
    let per = n.div_ceil(threads()).max(1);
    std::thread::scope(|s| {
        for (c, chunk) in out.chunks_mut(per).enumerate() {
            let f = &f;
            s.spawn(move || chunk.iter_mut().enumerate().for_each(|(j, o)| *o = f(c * per + j)));
        }
    });
    out
}

/// `[v[perm[0]], v[perm[1]], ..]`.
fn permute<T: Send + Sync + Copy + Default>(v: &[T], perm: &[u32]) -> Vec<T> {
    par_fill(perm.len(), |i| v[perm[i] as usize])
}

fn concat<T>(parts: Vec<Vec<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    parts.into_iter().for_each(|p| out.extend(p));
    out
}

/// SplitMix64 of `seed` and `i`: independent pseudo-random bits per row, in any order.
fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Dictionary encoding: each string becomes the rank of its value among the sorted distinct
/// values (`["b", "a", "b"]` becomes `[1, 0, 1]`).
fn dictionary_encode(values: &[&str]) -> Vec<i64> {
    let per = values.len().div_ceil(threads()).max(1);
    let chunks: Vec<&[&str]> = values.chunks(per).collect();
    let sets = par_map(chunks.len(), |c| chunks[c].iter().copied().collect::<HashSet<&str>>());
    let sorted: BTreeSet<&str> = sets.into_iter().flatten().collect();
    let rank: HashMap<&str, i64> = sorted.into_iter().enumerate().map(|(i, v)| (v, i as i64)).collect();
    par_fill(values.len(), |i| rank[values[i]])
}

fn key32(k: i64, what: &str) -> u32 {
    u32::try_from(k).unwrap_or_else(|_| panic!("{what} {k} does not fit 4 bytes"))
}

// ---------------------------------------------------------------------------------------------
// TPC-H (J1-J3).

/// Days since 1970-01-01 of 1995-01-01 and 1996-12-31 (Q7's `l_shipdate` range).
const Q7_FROM: i32 = 9131;
const Q7_TO: i32 = 9861;

#[derive(Default)]
struct OrdersPart {
    key: Vec<u32>,
    custkey: Vec<u32>,
    date: Vec<i64>,
    price: Vec<i64>,
    priority: Vec<&'static str>,
}

#[derive(Default)]
struct LineitemPart {
    okey: Vec<u32>,
    qty: Vec<i64>,
    q7_okey: Vec<u32>,
    q7_volume: Vec<i64>,
    q19_pkey: Vec<u32>,
    q19_qty: Vec<i64>,
    q19_price: Vec<i64>,
    q19_discount: Vec<i64>,
}

#[derive(Default)]
struct PartPart {
    key: Vec<u32>,
    brand: Vec<i64>,
    container: Vec<&'static str>,
    size: Vec<i64>,
}

/// `orders`, `lineitem` (all of it for J2, Q7's and Q19's rows for J1 and J3) and `part` at
/// `sf`, each generated in one part per core.
struct Tpch {
    orders: Rel,
    lineitem: Rel,
    lineitem_q7: Rel,
    lineitem_q19: Rel,
    part: Rel,
}

fn generate_tpch(sf: f64) -> Tpch {
    let t0 = Instant::now();
    let parts = threads();
    let n = parts as i32;
    let orders = par_map(parts, |p| {
        let mut o = OrdersPart::default();
        for r in OrderGenerator::new(sf, p as i32 + 1, n).iter() {
            o.key.push(key32(r.o_orderkey, "o_orderkey"));
            o.custkey.push(key32(r.o_custkey, "o_custkey"));
            o.date.push(i64::from(r.o_orderdate.to_unix_epoch()));
            o.price.push(r.o_totalprice.0);
            o.priority.push(r.o_orderpriority);
        }
        o
    });
    let lineitem = par_map(parts, |p| {
        let mut l = LineitemPart::default();
        for r in LineItemGenerator::new(sf, p as i32 + 1, n).iter() {
            let okey = key32(r.l_orderkey, "l_orderkey");
            l.okey.push(okey);
            l.qty.push(r.l_quantity);
            if (Q7_FROM..=Q7_TO).contains(&r.l_shipdate.to_unix_epoch()) {
                l.q7_okey.push(okey);
                // l_extendedprice * (1 - l_discount): cents times hundredths.
                l.q7_volume.push(r.l_extendedprice.0 * (100 - r.l_discount.0));
            }
            if matches!(r.l_shipmode, "AIR" | "AIR REG") && r.l_shipinstruct == "DELIVER IN PERSON" {
                l.q19_pkey.push(key32(r.l_partkey, "l_partkey"));
                l.q19_qty.push(r.l_quantity);
                l.q19_price.push(r.l_extendedprice.0);
                l.q19_discount.push(r.l_discount.0);
            }
        }
        l
    });
    let part = par_map(parts, |p| {
        let mut t = PartPart::default();
        for r in PartGenerator::new(sf, p as i32 + 1, n).iter() {
            t.key.push(key32(r.p_partkey, "p_partkey"));
            // "Brand#MN": the number MN (brands sort as their numbers).
            t.brand.push(r.p_brand.to_string().trim_start_matches("Brand#").parse().unwrap_or(-1));
            t.container.push(r.p_container);
            t.size.push(i64::from(r.p_size));
        }
        t
    });
    let generated = t0.elapsed();

    let mut o = OrdersPart::default();
    for p in orders {
        o.key.extend(p.key);
        o.custkey.extend(p.custkey);
        o.date.extend(p.date);
        o.price.extend(p.price);
        o.priority.extend(p.priority);
    }
    let orders = Rel {
        what: "orders".into(),
        key_name: "o_orderkey",
        keys: o.key,
        payloads: vec![
            ("o_custkey", Payload::K(o.custkey)),
            ("o_orderdate", Payload::Nk(o.date)),
            ("o_totalprice", Payload::Nk(o.price)),
            ("o_orderpriority", Payload::Nk(dictionary_encode(&o.priority))),
        ],
    };
    macro_rules! gather {
        ($parts:expr, $field:ident) => {
            concat($parts.iter_mut().map(|p| std::mem::take(&mut p.$field)).collect())
        };
    }
    let mut l = lineitem;
    let lineitem = Rel { what: "lineitem".into(), key_name: "l_orderkey", keys: gather!(l, okey), payloads: vec![("l_quantity", Payload::Nk(gather!(l, qty)))] };
    let lineitem_q7 = Rel {
        what: "lineitem where l_shipdate between 1995-01-01 and 1996-12-31".into(),
        key_name: "l_orderkey",
        keys: gather!(l, q7_okey),
        payloads: vec![("l_volume", Payload::Nk(gather!(l, q7_volume)))],
    };
    let lineitem_q19 = Rel {
        what: "lineitem where l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON'".into(),
        key_name: "l_partkey",
        keys: gather!(l, q19_pkey),
        payloads: vec![
            ("l_quantity", Payload::Nk(gather!(l, q19_qty))),
            ("l_extendedprice", Payload::Nk(gather!(l, q19_price))),
            ("l_discount", Payload::Nk(gather!(l, q19_discount))),
        ],
    };
    let mut p = part;
    let container: Vec<&str> = gather!(p, container);
    let part = Rel {
        what: "part".into(),
        key_name: "p_partkey",
        keys: gather!(p, key),
        payloads: vec![("p_brand", Payload::Nk(gather!(p, brand))), ("p_container", Payload::Nk(dictionary_encode(&container))), ("p_size", Payload::Nk(gather!(p, size)))],
    };
    let t = Tpch { orders: orders.shuffled(71), lineitem: lineitem.shuffled(72), lineitem_q7: lineitem_q7.shuffled(73), lineitem_q19: lineitem_q19.shuffled(74), part: part.shuffled(75) };
    println!("TPC-H SF {sf}: orders, lineitem and part generated in {:.2} s on {parts} threads, derived and shuffled in {:.2} s more", generated.as_secs_f64(), (t0.elapsed() - generated).as_secs_f64());
    t
}

fn sf_label(sf: f64) -> String {
    format!("sf{sf}").replace('.', "_")
}

fn tpch_workloads(sf: f64, wanted: &dyn Fn(&str) -> bool) -> Vec<Workload> {
    if !["j1", "j2", "j3"].iter().any(|j| wanted(j)) {
        return Vec::new();
    }
    let t = generate_tpch(sf);
    let scale = sf / 10.0;
    let orders = Arc::new(t.orders);
    let mut out = Vec::new();
    if wanted("j1") {
        out.push(Workload {
            case: format!("j1_q7_{}", sf_label(sf)),
            title: "J1 (TPC-H Q7)",
            r: orders.clone(),
            s: Arc::new(t.lineitem_q7),
            r_select: vec!["o_custkey", "o_orderdate", "o_totalprice", "o_orderpriority"],
            s_select: vec!["l_volume"],
            paper: [15e6 * scale, 18.2e6 * scale, 18.2e6 * scale],
            count_case: false,
        });
    }
    if wanted("j2") {
        out.push(Workload {
            case: format!("j2_q18_{}", sf_label(sf)),
            title: "J2 (TPC-H Q18)",
            r: orders.clone(),
            s: Arc::new(t.lineitem),
            r_select: vec!["o_custkey", "o_orderdate", "o_totalprice"],
            s_select: vec!["l_quantity"],
            paper: [15e6 * scale, 60e6 * scale, 60e6 * scale],
            count_case: false,
        });
    }
    if wanted("j3") {
        out.push(Workload {
            case: format!("j3_q19_{}", sf_label(sf)),
            title: "J3 (TPC-H Q19)",
            r: Arc::new(t.part),
            s: Arc::new(t.lineitem_q19),
            r_select: vec!["p_brand", "p_container", "p_size"],
            s_select: vec!["l_quantity", "l_extendedprice", "l_discount"],
            paper: [2e6 * scale, 2.1e6 * scale, 2.1e6 * scale],
            count_case: false,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// TPC-DS shapes (J4, J5): synthetic.

fn j4(ds_sf: f64) -> Workload {
    let t0 = Instant::now();
    let scale = ds_sf / 100.0;
    let (nr, ns) = ((1.9e6 * scale).round() as usize, (58e6 * scale).round() as usize);
    let r = Rel {
        what: "synthetic dimension (keys 0..|R| shuffled)".into(),
        key_name: "r_key",
        keys: datagen::shuffled_dense_keys(nr, 41).expect("fewer than 2^32 rows"),
        payloads: vec![("r_nk1", Payload::Nk(par_fill(nr, |i| mix(401, i as u64) as i64)))],
    };
    let mut payloads: Vec<(&'static str, Payload)> = Vec::new();
    for (c, name) in ["s_k1", "s_k2", "s_k3"].into_iter().enumerate() {
        // Foreign keys into other dimensions of a million rows.
        payloads.push((name, Payload::K(par_fill(ns, |i| (mix(410 + c as u64, i as u64) % 1_000_000) as u32))));
    }
    for (c, name) in ["s_nk1", "s_nk2", "s_nk3", "s_nk4", "s_nk5", "s_nk6", "s_nk7"].into_iter().enumerate() {
        payloads.push((name, Payload::Nk(par_fill(ns, |i| mix(420 + c as u64, i as u64) as i64))));
    }
    let s = Rel {
        what: "synthetic fact (a foreign key into R, each key equally often, shuffled)".into(),
        key_name: "s_fk",
        keys: datagen::foreign_keys_uniform(nr, ns, 42).expect("R is not empty"),
        payloads,
    };
    let names = |r: &Rel| r.payloads.iter().map(|(n, _)| *n).collect::<Vec<_>>();
    println!("J4: generated in {:.2} s", t0.elapsed().as_secs_f64());
    Workload {
        case: format!("j4_q64_{}", sf_label(ds_sf)),
        title: "J4 (TPC-DS Q64 shape)",
        r_select: names(&r),
        s_select: names(&s),
        r: Arc::new(r),
        s: Arc::new(s),
        paper: [1.9e6 * scale, 58e6 * scale, 58e6 * scale],
        count_case: false,
    }
}

fn j5(ds_sf: f64) -> Workload {
    let t0 = Instant::now();
    let scale = ds_sf / 100.0;
    let n = (72e6 * scale).round() as usize;
    let out = 904e6 * scale;
    // Each of d values used n/d times (12 or 13): the self join has sum(c^2) ~ n^2 / d rows.
    let d = ((n as f64 * n as f64 / out).round() as usize).clamp(1, n.max(1));
    let r = Rel {
        what: format!("synthetic web_sales (ws_order_number over {d} values, each {} or {} times, shuffled)", n / d, n.div_ceil(d)),
        key_name: "ws_order_number",
        keys: datagen::foreign_keys_uniform(d, n, 51).expect("d > 0"),
        payloads: vec![("ws_warehouse_sk", Payload::Nk(par_fill(n, |i| (mix(501, i as u64) % 15 + 1) as i64)))],
    };
    let r = Arc::new(r);
    println!("J5: generated in {:.2} s", t0.elapsed().as_secs_f64());
    Workload {
        case: format!("j5_q95_{}", sf_label(ds_sf)),
        title: "J5 (TPC-DS Q95 shape, self join)",
        r: r.clone(),
        s: r,
        r_select: vec!["ws_warehouse_sk"],
        s_select: vec!["ws_warehouse_sk"],
        paper: [72e6 * scale, 72e6 * scale, out],
        count_case: true,
    }
}

// ---------------------------------------------------------------------------------------------
// The benchmark.

/// The wrapping sum of a downloaded fixed-width column's values (as [`Payload::bits`]).
fn column_sum(c: &HostColumn) -> u64 {
    let b = c.values_buffer();
    match c.data_type().byte_width() {
        Some(4) => b.chunks_exact(4).map(|x| u64::from(u32::from_le_bytes(x.try_into().expect("4 bytes")))).fold(0, u64::wrapping_add),
        Some(8) => b.chunks_exact(8).map(|x| u64::from_le_bytes(x.try_into().expect("8 bytes"))).fold(0, u64::wrapping_add),
        w => panic!("a payload column of width {w:?}"),
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// Runs every algorithm on one workload; returns the cases whose check failed.
fn bench(h: &mut Harness, w: &Workload, e: &Expected) -> Vec<String> {
    let s = h.stream.clone();
    let mut failed = Vec::new();
    let rt = Table::upload(&s, &w.r.host_table()).expect("upload R");
    let st = if w.self_join() { None } else { Some(Table::upload(&s, &w.s.host_table()).expect("upload S")) };
    let st_ref = st.as_ref().unwrap_or(&rt);
    s.synchronize().unwrap();
    let base = Join::new(JoinType::Inner).on(&rt, &[w.r.key_name], st_ref, &[w.s.key_name]).select(&w.r_select, &w.s_select);
    match base.explain() {
        Ok(x) => print!("EXPLAIN {GROUP}/{}: {x}", w.case),
        Err(err) => println!("EXPLAIN {GROUP}/{}: error {err}", w.case),
    }
    let bytes = w.floor_bytes(e.rows);
    let elements = (w.r.rows() + w.s.rows()) as u64;
    let check_bytes = e.rows * (w.r.payload(w.r_select[0]).width() + w.s.payload(w.s_select[0]).width());
    let (r_first, s_first) = (0, w.r_select.len());
    for (algo, suffix) in ALGORITHMS {
        let name = format!("{}{suffix}", w.case);
        let join = base.clone().algorithm(algo);
        // Untimed: the check, and the first run of this algorithm on these inputs.
        let out = match join.run(&s) {
            Ok(out) => out,
            Err(err) => {
                println!("SKIP {GROUP}/{name}: {} refused or failed: {err}", algo.name());
                continue;
            }
        };
        let ok = if out.rows != e.rows {
            println!("CHECK {GROUP}/{name}: rows {} (CPU: {}): false", out.rows, e.rows);
            false
        } else if check_bytes <= CHECK_DOWNLOAD_BYTES {
            let cols = out.table.columns();
            let r_sum = column_sum(&cols[r_first].to_host().expect("download"));
            let s_sum = column_sum(&cols[s_first].to_host().expect("download"));
            let ok = (r_sum, s_sum) == (e.r_sum, e.s_sum);
            println!("CHECK {GROUP}/{name}: {} rows as the CPU's; sums of {} and {} over the output as the CPU's: {ok}", out.rows, w.r_select[0], w.s_select[0]);
            ok
        } else {
            println!("CHECK {GROUP}/{name}: {} rows as the CPU's (checked by rows only: {:.1} GiB to download for the sums): true", out.rows, check_bytes as f64 / (1u64 << 30) as f64);
            true
        };
        drop(out);
        if !ok {
            failed.push(name);
            continue;
        }
        h.case(GROUP, &name, bytes, elements, |s| {
            assert_eq!(join.run(s).unwrap().rows, e.rows);
        });
        s.synchronize().unwrap();
        match join.clone().with_stats().run(&s) {
            Ok(out) => {
                let st = out.stats.unwrap_or_default();
                println!(
                    "STATS {GROUP}/{name}: algorithm {} | transform {:.3} ms, match {:.3} ms, materialize {:.3} ms, total {:.3} ms | peak {:.0} MiB | reason: {}",
                    out.algorithm.name(),
                    st.transform_ms,
                    st.match_ms,
                    st.materialize_ms,
                    st.total_ms,
                    mib(st.peak_memory_bytes),
                    out.reason
                );
                if algo == Algorithm::Auto {
                    println!("AUTO {GROUP}/{}: chose {} because {}", w.case, out.algorithm.name(), out.reason);
                }
            }
            Err(err) => println!("STATS {GROUP}/{name}: error {err}"),
        }
    }
    if w.count_case {
        let name = format!("{}_count", w.case);
        match base.count(&s) {
            Ok(n) if n == e.rows => {
                println!("CHECK {GROUP}/{name}: count {n} as the CPU's: true");
                h.case(GROUP, &name, elements * 4, elements, |s| {
                    assert_eq!(base.count(s).unwrap(), e.rows);
                });
            }
            Ok(n) => {
                println!("CHECK {GROUP}/{name}: count {n} (CPU: {}): false", e.rows);
                failed.push(name);
            }
            Err(err) => println!("SKIP {GROUP}/{name}: {err}"),
        }
    }
    failed
}

fn env_f64(name: &str, default: f64, max: f64) -> f64 {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(x) if x > 0.0 && x <= max => x,
            _ => {
                eprintln!("{name}={v:?}: expected a number in (0, {max}]");
                std::process::exit(2);
            }
        },
    }
}

fn main() {
    let sf = env_f64("GPUJOIN_TPC_SF", 10.0, 100.0);
    let ds_sf = env_f64("GPUJOIN_TPC_DS_SF", 100.0, 1000.0);
    let only: Option<Vec<String>> = std::env::var("GPUJOIN_TPC_JOINS").ok().map(|v| v.split(',').map(|j| j.trim().to_lowercase()).filter(|j| !j.is_empty()).collect());
    let wanted = |j: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == j));
    let dry_run = std::env::var_os("GPUJOIN_TPC_DRY_RUN").is_some_and(|v| v != "0");

    let mut h = if dry_run {
        println!("tpc_joins: dry run (GPUJOIN_TPC_DRY_RUN): inputs and the CPU's expected outputs only, no GPU");
        None
    } else {
        let Some(h) = Harness::new("tpc_joins") else { return };
        Some(h)
    };

    // J1-J3 share the TPC-H tables (generated together); J4 and J5 are generated one at a time,
    // after the ones before them are dropped.
    let mut jobs: Vec<Box<dyn FnOnce() -> Workload>> = Vec::new();
    for w in tpch_workloads(sf, &wanted) {
        jobs.push(Box::new(move || w));
    }
    if wanted("j4") {
        jobs.push(Box::new(move || j4(ds_sf)));
    }
    if wanted("j5") {
        jobs.push(Box::new(move || j5(ds_sf)));
    }
    let mut failed = Vec::new();
    for job in jobs {
        let w = job();
        let t0 = Instant::now();
        let e = w.expected();
        println!("DATA {GROUP}/{}: {} (CPU reference in {:.2} s)", w.case, w.describe(&e), t0.elapsed().as_secs_f64());
        if let Some(h) = h.as_mut() {
            failed.extend(bench(h, &w, &e));
        }
    }
    drop(h); // writes the CSV rows
    if !failed.is_empty() {
        eprintln!("tpc_joins: the GPU's output differs from the CPU's in {}", failed.join(", "));
        std::process::exit(1);
    }
}

