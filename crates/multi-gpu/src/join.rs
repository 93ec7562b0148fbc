//! [`DistributedJoin`]: a join of two [`DistributedTable`]s across the ranks of a [`Cluster`].
//!
//! The steps, as in the partitioned joins of the multi-GPU papers (MG-Join, SIGMOD 2021):
//!
//! 1. **Check** the join on rank 0's parts with the one-table [`Join`] (`explain`): a bad column,
//!    type or algorithm is a typed error before any device work. Only the columns the join
//!    reads (keys, selected columns, the filter's columns) move.
//! 2. **Route** (shuffle): every rank hashes its rows' keys ([`row_hash`](crate::kernels)),
//!    the host samples the hashes of both sides for heavy keys ([`crate::skew`]), and each row
//!    gets a destination rank: by its key's hash; spread over every rank if it is a heavy key's
//!    row on the key's heavier side or can match nothing (a NULL or NaN key that equals
//!    nothing); copied to every rank if it is a heavy key's row on the other side. A stable radix
//!    partition by destination and one gather a destination make each rank's part for each rank.
//!    (Broadcast: the smaller side's parts go to every rank whole; the other side stays.)
//! 3. **Exchange** the parts all-to-all ([`crate::exchange`]): NCCL sends and receives in one
//!    group, or device copies for ranks on one GPU.
//! 4. **Join** locally: each rank joins what it holds with the one-table [`Join`] (every
//!    algorithm and join type, on its own thread and stream). Each rank's output stays on its
//!    device as a part of the result.
//!
//! Every pair of matching rows meets on exactly one rank, and every row the join type keeps
//! unmatched is on exactly one rank, so the parts together are the join's output. The order:
//! rank 0's output rows, then rank 1's, ...; within a rank, the local algorithm's order over the
//! rows it received, which arrive in source-rank order and in row order from each source: the
//! same inputs on the same cluster give the same output in the same order.

use std::time::Instant;

use gpujoin_device::{DeviceBuffer, Error, Result, Stream};
use gpujoin_join::plan::{Algorithm, Join, JoinOutput};
use gpujoin_join::predicate::Predicate;
use gpujoin_join::table::{ColumnView, Table, TableView};
use gpujoin_join::{NanEquality, NullEquality, Side};

use crate::cluster::Cluster;
use crate::exchange::{all_to_all, Exchanged};
use crate::kernels;
use crate::skew::{self, SkewPlan};
use crate::table::{same_columns, DistributedTable};

/// How the rows reach the rank that joins them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Broadcast where the join type allows it and the smaller side is less than a
    /// `1 / ranks` share of both sides' bytes (or the join has no keys); otherwise shuffle. One
    /// rank: local.
    Auto,
    /// Both sides hash-partitioned by their keys and exchanged all-to-all.
    Shuffle,
    /// This side copied whole to every rank; the other stays where it is. Only where the join
    /// type never reports this side's rows without a partner (not for outer, semi or anti joins
    /// that keep them).
    Broadcast(Side),
    /// One rank: no exchange.
    Local,
}

/// Whether heavy keys are looked for (shuffle only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkewHandling {
    /// Sample both sides' key hashes; spread and copy the heavy keys' rows ([`crate::skew`]).
    Auto,
    /// Every key goes where its hash sends it.
    Off,
}

/// Host-side wall times of a distributed join's steps, in seconds (each ends with every rank
/// waited for).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// Hashing, the skew check, destinations, partitioning and gathering the parts (0 for a
    /// broadcast, whose parts are the inputs).
    pub route: f64,
    /// The all-to-all and assembling the received parts.
    pub exchange: f64,
    /// The local joins.
    pub join: f64,
}

/// What [`DistributedJoin::run`] returns.
pub struct DistributedOutput {
    /// The selected columns of every rank's output, part `r` on rank `r` (names as
    /// [`Join::run`] gives them).
    pub table: DistributedTable,
    /// Output rows of all ranks.
    pub rows: u64,
    /// Output rows of each rank.
    pub rows_per_rank: Vec<u64>,
    /// How the rows moved (never `Auto`).
    pub distribution: Distribution,
    /// Heavy keys whose rows were spread over the ranks.
    pub heavy_keys: usize,
    /// Bytes that moved between ranks (a rank's part for itself not counted).
    pub exchanged_bytes: u64,
    /// Each rank's local algorithm and its reason.
    pub local: Vec<(Algorithm, String)>,
    pub phases: Phases,
}

/// A join of two distributed tables: a one-table [`Join`] (its keys by name, selected columns,
/// filter, NULL and NaN equality, algorithm and every other option; no tables), run across a
/// cluster.
///
/// ```no_run
/// use gpujoin_multi_gpu::{Cluster, DistributedJoin, DistributedTable};
/// use gpujoin_join::plan::Join;
/// use gpujoin_join::table::{HostColumn, HostTable};
/// use gpujoin_join::JoinType;
/// let cluster = Cluster::all_devices()?;
/// let orders = DistributedTable::scatter(&cluster, &HostTable::new(vec![
///     ("cust", HostColumn::from_values(vec![1u64, 2, 2, 3])),
///     ("amount", HostColumn::from_values(vec![10.0f64, 20.0, 30.0, 40.0])),
/// ])?)?;
/// let customers = DistributedTable::scatter(&cluster, &HostTable::new(vec![
///     ("id", HostColumn::from_values(vec![2u64, 3])),
///     ("city", HostColumn::utf8(["Oslo", "Rome"])),
/// ])?)?;
/// let join = Join::new(JoinType::Inner).keys(&["cust"], &["id"]).select(&["amount"], &["city"]);
/// let out = DistributedJoin::new(join).on(&orders, &customers).run(&cluster)?;
/// assert_eq!(out.rows, 3); // (20, Oslo), (30, Oslo), (40, Rome), spread over the ranks
/// let rows = out.table.to_host()?;
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
#[derive(Clone)]
pub struct DistributedJoin<'a> {
    /// Everything but the tables.
    join: Join<'a>,
    left: Vec<TableView<'a>>,
    right: Vec<TableView<'a>>,
    distribution: Distribution,
    skew: SkewHandling,
}

/// A side's parts as the local joins read them: moved (owned) or in place (borrowed).
enum Parts<'a> {
    Moved(Vec<Table>),
    InPlace(Vec<TableView<'a>>),
}

impl<'a> Parts<'a> {
    fn views(&self) -> Vec<TableView<'_>> {
        match self {
            Parts::Moved(t) => t.iter().map(Table::view).collect(),
            Parts::InPlace(v) => v.clone(),
        }
    }
}

/// Bytes of a view's buffers that a move would carry (strings: the whole values buffer).
fn bytes_of(v: &TableView<'_>) -> u64 {
    v.columns()
        .iter()
        .map(|c: &ColumnView<'_>| {
            let n = c.len() as u64;
            let values = match c.data_type().byte_width() {
                Some(w) => n * w as u64,
                None if c.data_type().is_string() => c.values().len() as u64 + (n + 1) * 8,
                None => n.div_ceil(8),
            };
            values + c.validity().map_or(0, |_| n.div_ceil(8))
        })
        .sum()
}

impl<'a> DistributedJoin<'a> {
    /// `join` (keys by [`Join::keys`], no tables: any it has are replaced by each rank's part)
    /// across a cluster, with [`Distribution::Auto`] and [`SkewHandling::Auto`].
    pub fn new(join: Join<'a>) -> DistributedJoin<'a> {
        DistributedJoin { join, left: Vec::new(), right: Vec::new(), distribution: Distribution::Auto, skew: SkewHandling::Auto }
    }

    /// The two tables (joined on the [`Join`]'s keys; none: a theta join on its filter, always a
    /// broadcast).
    pub fn on(self, left: &'a DistributedTable, right: &'a DistributedTable) -> DistributedJoin<'a> {
        self.on_parts(left.views(), right.views())
    }

    /// [`DistributedJoin::on`] over borrowed parts, part `r` on rank `r`'s device.
    pub fn on_parts(mut self, left: Vec<TableView<'a>>, right: Vec<TableView<'a>>) -> DistributedJoin<'a> {
        self.left = left;
        self.right = right;
        self
    }

    /// How rows reach their rank (default `Auto`).
    pub fn distribution(mut self, d: Distribution) -> DistributedJoin<'a> {
        self.distribution = d;
        self
    }

    /// Whether heavy keys are looked for (default `Auto`).
    pub fn skew(mut self, s: SkewHandling) -> DistributedJoin<'a> {
        self.skew = s;
        self
    }

    /// The local join of one rank's parts, `filter` in place of the join's own (its columns
    /// renumbered for the parts that moved).
    fn local_join<'b>(&self, l: TableView<'b>, r: TableView<'b>, filter: Option<&Predicate>) -> Join<'b>
    where
        'a: 'b,
    {
        let j: Join<'b> = self.join.clone();
        let j = j.tables(l, r);
        match filter {
            Some(f) => j.filter(f.clone()),
            None => j,
        }
    }

    /// The columns of each side the join reads, in table order (at least one a side).
    fn needed(&self, side: Side, names: &[String]) -> Vec<usize> {
        let (keys, select) = match side {
            Side::Left => (self.join.key_names().0, self.join.selected().0),
            Side::Right => (self.join.key_names().1, self.join.selected().1),
        };
        let mut used = vec![false; names.len()];
        for (i, n) in names.iter().enumerate() {
            used[i] = keys.contains(n) || select.contains(n);
        }
        if let Some(f) = self.join.filter_predicate() {
            f.for_each_column(&mut |s, i| {
                if s == side && i < used.len() {
                    used[i] = true;
                }
            });
        }
        if !used.iter().any(|&u| u) && !used.is_empty() {
            used[0] = true;
        }
        (0..names.len()).filter(|&i| used[i]).collect()
    }

    fn check(&self, cluster: &Cluster) -> Result<()> {
        let g = cluster.size();
        for (what, parts) in [("left", &self.left), ("right", &self.right)] {
            if parts.len() != g {
                return Err(Error::invalid(format!("the {what} table has {} parts for a cluster of {g} ranks", parts.len())));
            }
            for (r, p) in parts.iter().enumerate() {
                if !same_columns(p, &parts[0]) {
                    return Err(Error::invalid(format!("part {r} of the {what} table has other columns than part 0")));
                }
            }
        }
        // Everything the one-table join checks (columns, types, algorithm, filter), before any
        // device work.
        self.local_join(self.left[0].clone(), self.right[0].clone(), self.join.filter_predicate()).explain()?;
        Ok(())
    }

    fn resolve(&self, g: usize, left: &[TableView<'_>], right: &[TableView<'_>]) -> Result<Distribution> {
        let keyless = self.join.key_names().0.is_empty();
        let join_type = self.join.join_type();
        let refuse = |side: Side| Error::Unsupported {
            what: format!("broadcasting the {side:?} side of a {:?} join across GPUs", join_type),
            reason: format!("the join reports {side:?} rows without a partner, which every GPU would report"),
        };
        match self.distribution {
            _ if g == 1 => Ok(Distribution::Local),
            Distribution::Local => Err(Error::invalid(format!("a local join on a cluster of {g} ranks"))),
            Distribution::Broadcast(side) => {
                if skew::replicable(join_type, side) {
                    Ok(Distribution::Broadcast(side))
                } else {
                    Err(refuse(side))
                }
            }
            Distribution::Shuffle if keyless => Err(Error::Unsupported { what: "a shuffle of a join without keys".into(), reason: "rows are routed by their keys' hash".into() }),
            Distribution::Shuffle => Ok(Distribution::Shuffle),
            Distribution::Auto => {
                let (bl, br): (u64, u64) = (left.iter().map(bytes_of).sum(), right.iter().map(bytes_of).sum());
                let (small, small_bytes) = if br <= bl { (Side::Right, br) } else { (Side::Left, bl) };
                let other = if small == Side::Right { Side::Left } else { Side::Right };
                let pick = [small, other].into_iter().find(|&s| skew::replicable(join_type, s));
                if keyless {
                    return pick.map(Distribution::Broadcast).ok_or_else(|| refuse(small));
                }
                if skew::replicable(join_type, small) && (g as u64) * small_bytes < bl + br {
                    Ok(Distribution::Broadcast(small))
                } else {
                    Ok(Distribution::Shuffle)
                }
            }
        }
    }

    /// Runs the join: each rank's output on its device, see the [module docs](self).
    pub fn run(&self, cluster: &Cluster) -> Result<DistributedOutput> {
        let moved = self.route_and_exchange(cluster)?;
        let t = Instant::now();
        let (lv, rv) = (moved.left.views(), moved.right.views());
        let outs: Vec<JoinOutput> = self.on_every_rank(cluster, &lv, &rv, &moved.filter, |j, st| j.run(st))?;
        let join = t.elapsed().as_secs_f64();
        let rows_per_rank: Vec<u64> = outs.iter().map(|o| o.rows).collect();
        let local = outs.iter().map(|o| (o.algorithm, o.reason.clone())).collect();
        let table = DistributedTable::from_parts(outs.into_iter().map(|o| o.table).collect())?;
        Ok(DistributedOutput {
            table,
            rows: rows_per_rank.iter().sum(),
            rows_per_rank,
            distribution: moved.distribution,
            heavy_keys: moved.heavy_keys,
            exchanged_bytes: moved.bytes,
            local,
            phases: Phases { join, ..moved.phases },
        })
    }

    /// The exact number of output rows (each rank counts its share; no output is written), and
    /// each rank's count.
    pub fn count(&self, cluster: &Cluster) -> Result<(u64, Vec<u64>)> {
        let moved = self.route_and_exchange(cluster)?;
        let (lv, rv) = (moved.left.views(), moved.right.views());
        let counts = self.on_every_rank(cluster, &lv, &rv, &moved.filter, |j, st| j.count(st))?;
        Ok((counts.iter().sum(), counts))
    }

    /// `f` on every rank's local join, each on its own thread bound to its device.
    fn on_every_rank<T: Send>(&self, cluster: &Cluster, left: &[TableView<'_>], right: &[TableView<'_>], filter: &Option<Predicate>, f: impl Fn(&Join<'_>, &Stream) -> Result<T> + Sync) -> Result<Vec<T>> {
        cluster.per_rank(|r, st| {
            let j = self.local_join(left[r].clone(), right[r].clone(), filter.as_ref());
            let out = f(&j, st)?;
            st.synchronize()?;
            Ok(out)
        })
    }

    fn route_and_exchange(&self, cluster: &Cluster) -> Result<Moved<'a>> {
        self.check(cluster)?;
        let g = cluster.size();
        let (ln, rn) = (self.left[0].names().to_vec(), self.right[0].names().to_vec());
        let (lc, rc) = (self.needed(Side::Left, &ln), self.needed(Side::Right, &rn));
        let project = |parts: &[TableView<'a>], cols: &[usize], names: &[String]| -> Result<Vec<TableView<'a>>> {
            parts.iter().map(|p| TableView::new(cols.iter().map(|&i| (names[i].clone(), p.columns()[i])).collect())).collect()
        };
        let (left, right) = (project(&self.left, &lc, &ln)?, project(&self.right, &rc, &rn)?);
        let filter = self.join.filter_predicate().map(|f| {
            f.map_columns(&|side, i| {
                let cols = if side == Side::Left { &lc } else { &rc };
                cols.iter().position(|&c| c == i).unwrap_or(i)
            })
        });
        let distribution = self.resolve(g, &left, &right)?;
        let t = Instant::now();
        let mut phases = Phases::default();
        let (left, right, heavy_keys, bytes) = match distribution {
            Distribution::Local | Distribution::Auto => (Parts::InPlace(left), Parts::InPlace(right), 0, 0),
            Distribution::Broadcast(side) => {
                let copied = if side == Side::Left { &left } else { &right };
                let sends: Vec<Vec<TableView<'_>>> = copied.iter().map(|p| vec![p.clone(); g]).collect();
                let Exchanged { tables, bytes } = all_to_all(cluster, &sends)?;
                phases.exchange = t.elapsed().as_secs_f64();
                if side == Side::Left {
                    (Parts::Moved(tables), Parts::InPlace(right), 0, bytes)
                } else {
                    (Parts::InPlace(left), Parts::Moved(tables), 0, bytes)
                }
            }
            Distribution::Shuffle => {
                let (lon, ron) = self.join.key_names();
                let lk: Vec<usize> = lon.iter().map(|k| left[0].index_of(k)).collect::<Result<_>>()?;
                let rk: Vec<usize> = ron.iter().map(|k| right[0].index_of(k)).collect::<Result<_>>()?;
                let o = self.join.options();
                let lh = hash_side(cluster, &left, &lk, o.null_equality, o.nan_equality)?;
                let rh = hash_side(cluster, &right, &rk, o.null_equality, o.nan_equality)?;
                let plan = match self.skew {
                    SkewHandling::Auto => {
                        let (ls, rs) = (sample_side(cluster, &lh)?, sample_side(cluster, &rh)?);
                        let rows = |p: &[TableView<'_>]| p.iter().map(|t| t.rows() as u64).sum::<u64>();
                        skew::plan(&ls, rows(&left), &rs, rows(&right), g, self.join.join_type())
                    }
                    SkewHandling::Off => SkewPlan::default(),
                };
                let lparts = partition_side(cluster, &left, &lh, &plan, Side::Left)?;
                drop(lh);
                let rparts = partition_side(cluster, &right, &rh, &plan, Side::Right)?;
                drop(rh);
                phases.route = t.elapsed().as_secs_f64();
                let t = Instant::now();
                let l = all_to_all(cluster, &views(&lparts))?;
                drop(lparts);
                let r = all_to_all(cluster, &views(&rparts))?;
                drop(rparts);
                phases.exchange = t.elapsed().as_secs_f64();
                (Parts::Moved(l.tables), Parts::Moved(r.tables), plan.heavy.len(), l.bytes + r.bytes)
            }
        };
        Ok(Moved { left, right, filter, distribution, heavy_keys, bytes, phases })
    }
}

fn views(parts: &[Vec<Table>]) -> Vec<Vec<TableView<'_>>> {
    parts.iter().map(|row| row.iter().map(Table::view).collect()).collect()
}

/// The moved inputs of the local joins.
struct Moved<'a> {
    left: Parts<'a>,
    right: Parts<'a>,
    filter: Option<Predicate>,
    distribution: Distribution,
    heavy_keys: usize,
    bytes: u64,
    phases: Phases,
}

/// Each rank's key hashes and never-match flags for one side.
fn hash_side(cluster: &Cluster, parts: &[TableView<'_>], keys: &[usize], nulls: NullEquality, nans: NanEquality) -> Result<Vec<(DeviceBuffer<u64>, DeviceBuffer<u8>)>> {
    cluster.per_rank(|r, st| {
        let p = &parts[r];
        let cols: Vec<ColumnView<'_>> = keys.iter().map(|&k| p.columns()[k]).collect();
        kernels::row_hash(st, &cols, p.rows(), nulls, nans)
    })
}

/// About [`skew::SAMPLE_ROWS`] hashes of one side's rows that can match, drawn evenly from
/// every rank.
fn sample_side(cluster: &Cluster, hashes: &[(DeviceBuffer<u64>, DeviceBuffer<u8>)]) -> Result<Vec<u64>> {
    let total: u64 = hashes.iter().map(|(h, _)| h.len() as u64).sum();
    let samples = cluster.per_rank(|r, st| {
        let (h, nv) = &hashes[r];
        let n = h.len() as u64;
        if n == 0 {
            return Ok(Vec::new());
        }
        let count = (skew::SAMPLE_ROWS * n).div_ceil(total.max(1)).clamp(1, n);
        let stride = n / count;
        let (s, f) = kernels::sample(st, &h.view(), &nv.view(), stride as usize, count as usize)?;
        Ok(s.into_iter().zip(f).filter(|&(_, never)| never == 0).map(|(h, _)| h).collect::<Vec<u64>>())
    })?;
    Ok(samples.concat())
}

/// Each rank's part for each rank (`[source][destination]`) of one side, every rank at once.
fn partition_side(cluster: &Cluster, parts: &[TableView<'_>], hashes: &[(DeviceBuffer<u64>, DeviceBuffer<u8>)], plan: &SkewPlan, side: Side) -> Result<Vec<Vec<Table>>> {
    let g = cluster.size();
    let bits = (usize::BITS - g.leading_zeros()).max(1); // destinations 0..=g
    let split = plan.split_flags(side);
    // Rank r's rows are the global rows from row_base[r] on (heavy keys' rows and rows that
    // match nothing are spread by a mix of their global row index).
    let row_base: Vec<u64> = parts
        .iter()
        .scan(0u64, |acc, p| {
            let b = *acc;
            *acc += p.rows() as u64;
            Some(b)
        })
        .collect();
    cluster.per_rank(|r, st| {
        let (p, (h, nv)) = (&parts[r], &hashes[r]);
        let n = p.rows();
        if n as u64 > u32::MAX as u64 {
            return Err(Error::too_large(format!("rows of rank {r}'s part"), n as u64, u32::MAX as u64));
        }
        if n == 0 {
            let none = st.alloc::<u32>(0)?;
            return (0..g).map(|_| p.gather(st, &none.view(), false)).collect::<Result<Vec<_>>>();
        }
        let heavy = st.copy_from_host(&plan.heavy)?;
        let flags = st.copy_from_host(&split)?;
        let dest = kernels::destinations(st, &h.view(), &nv.view(), row_base[r], g as u32, &heavy.view(), &flags.view())?;
        let mut ids = st.alloc::<u32>(n)?;
        gpujoin_primitives::iota_u32(st, &mut ids.view_mut(), 0)?;
        let sorted = gpujoin_primitives::radix_partition::<u32, u32>(st, &dest.view(), &ids.view(), 0, bits)?;
        drop((dest, ids));
        let o = &sorted.offsets;
        let copied = o[g] as usize..o[g + 1] as usize;
        (0..g)
            .map(|d| {
                let own = o[d] as usize..o[d + 1] as usize;
                if copied.is_empty() {
                    return p.gather(st, &sorted.values.slice(own), false);
                }
                let mut map = st.alloc::<u32>(own.len() + copied.len())?;
                let (mut a, mut b) = map.view_mut().split_at(own.len());
                st.copy_device_to_device(&sorted.values.slice(own), &mut a)?;
                st.copy_device_to_device(&sorted.values.slice(copied.clone()), &mut b)?;
                p.gather(st, &map.view(), false)
            })
            .collect()
    })
}
