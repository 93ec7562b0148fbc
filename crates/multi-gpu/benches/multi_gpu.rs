//! Scaling of the multi-GPU join: the paper's PK-FK workload (seed 002: 8-byte keys, two 8-byte
//! payloads a side, every payload selected) on 1, 2, 4 and 8 GPUs of the host (as many as it
//! has), uniform and Zipf 1.0 / 1.5 foreign keys, beside the bandwidth of a plain NCCL
//! all-to-all of equal parts through the same communicators (the exchange's ceiling on this
//! machine).
//!
//! Each case: one warm-up run, then the median of `GPUJOIN_MULTI_REPS` (default 3) runs, timed on
//! the host from the call to the end of every rank's work (the join waits for every rank). Rows
//! go to `GPUJOIN_BENCH_CSV` (`group,case,ms_median,floor_ms,device,commit`; the floor column is
//! the exchange's bytes at the measured all-to-all bandwidth) and the log says where the time
//! went (route / exchange / local join), the exchange's bytes per second and how evenly the
//! output fell on the ranks.
//!
//! `GPUJOIN_MULTI_SIZES` lists `log2|R|:log2|S|` pairs (default `26:27,28:29`; 2^28 x 2^29 is
//! about 19 GB of input, more than one H100 holds with its output). Inputs are made on the host
//! (dense unique primary keys in a scrambled order; foreign keys uniform or Zipf by inverse CDF)
//! and uploaded as each rank's part.

use std::io::Write;
use std::time::Instant;

use gpujoin_device::{Device, Result, Stream};
use gpujoin_join::table::{Column, DataType, Table};
use gpujoin_join::plan::Join;
use gpujoin_join::JoinType;
use gpujoin_multi_gpu::{Cluster, DistributedJoin, DistributedTable, Distribution, SkewHandling};

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// The foreign keys' distribution.
#[derive(Clone, Copy)]
enum Keys {
    Uniform,
    Zipf(f64),
}

impl Keys {
    fn name(self) -> String {
        match self {
            Keys::Uniform => "uniform".into(),
            Keys::Zipf(s) => format!("zipf{s}"),
        }
    }

    /// Foreign key `i` among `n` primary keys (`0..n`).
    fn key(self, i: u64, n: u64) -> i64 {
        let u = (mix(i ^ 0x5bd1e995) >> 11) as f64 / (1u64 << 53) as f64;
        let k = match self {
            Keys::Uniform => mix(i) % n,
            // Continuous power law on [1, n + 1), rank 1 the most frequent.
            Keys::Zipf(s) if (s - 1.0).abs() < 1e-9 => ((n as f64 + 1.0).powf(u) - 1.0) as u64,
            Keys::Zipf(s) => {
                let a = 1.0 - s;
                (((n as f64 + 1.0).powf(a) - 1.0) * u + 1.0).powf(1.0 / a) as u64 - 1
            }
        };
        // Scramble the rank into a key (a bijection on 0..n for n a power of two).
        (k.min(n - 1).wrapping_mul(0x9E3779B1) % n) as i64
    }
}

/// `n` values `f(i)` for `i` in `range`, on every core.
fn fill(range: std::ops::Range<u64>, f: impl Fn(u64) -> i64 + Sync) -> Vec<i64> {
    let n = (range.end - range.start) as usize;
    let mut v = vec![0i64; n];
    let threads = std::thread::available_parallelism().map_or(8, |p| p.get());
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (c, part) in v.chunks_mut(chunk).enumerate() {
            let f = &f;
            let base = range.start + (c * chunk) as u64;
            s.spawn(move || part.iter_mut().enumerate().for_each(|(j, x)| *x = f(base + j as u64)));
        }
    });
    v
}

fn column(st: &Stream, v: &[i64]) -> Result<Column> {
    Column::from_buffers(DataType::Int64, v.len(), st.copy_from_host(v)?.into_bytes(), None, None)
}

/// One side: `rows` rows spread over the ranks, columns `k`, `p1`, `p2` (Int64).
fn side(cluster: &Cluster, rows: u64, key: impl Fn(u64) -> i64 + Sync, tag: &str) -> Result<DistributedTable> {
    let g = cluster.size() as u64;
    let parts = (0..g)
        .map(|r| {
            let range = rows * r / g..rows * (r + 1) / g;
            let st = cluster.stream(r as usize);
            st.device().bind_to_thread()?;
            let k = column(st, &fill(range.clone(), &key))?;
            let p1 = column(st, &fill(range.clone(), |i| i as i64))?;
            let p2 = column(st, &fill(range, |i| (i * 3) as i64))?;
            Table::new(vec![("k".to_string(), k), (format!("{tag}1"), p1), (format!("{tag}2"), p2)])
        })
        .collect::<Result<Vec<_>>>()?;
    cluster.synchronize()?;
    DistributedTable::from_parts(parts)
}

/// Bytes per second of an all-to-all of `bytes_per_rank` bytes a rank (equal parts), over NCCL.
fn all_to_all_bandwidth(streams: &[Stream], bytes_per_rank: usize) -> Result<f64> {
    use gpujoin_device::nccl::{Communicators, Transfer};
    let g = streams.len();
    let comms = Communicators::init_all(streams)?;
    let part = bytes_per_rank / g;
    let src: Vec<_> = streams.iter().map(|s| s.alloc_zeroed::<u8>(part * g)).collect::<Result<_>>()?;
    let mut dst: Vec<_> = streams.iter().map(|s| s.alloc::<u8>(part * g)).collect::<Result<_>>()?;
    let mut times = Vec::new();
    for rep in 0..6 {
        let t = Instant::now();
        {
            let mut transfers = Vec::new();
            // dst_views[d][s]: where rank d receives rank s's part.
            let mut dst_views: Vec<Vec<Option<_>>> = dst
                .iter_mut()
                .map(|d| {
                    let mut rest = Some(d.view_mut());
                    (0..g)
                        .map(|_| {
                            let (a, b) = rest.take().expect("rest").split_at(part);
                            rest = Some(b);
                            Some(a)
                        })
                        .collect()
                })
                .collect();
            for (s, src) in src.iter().enumerate() {
                for (d, views) in dst_views.iter_mut().enumerate() {
                    let dv = views[s].take().expect("one view a pair");
                    transfers.push(Transfer { from: s, to: d, src: src.slice(d * part..(d + 1) * part), dst: dv });
                }
            }
            comms.exchange(transfers)?;
        }
        streams.iter().try_for_each(Stream::synchronize)?;
        if rep > 0 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    // Bytes that leave each rank: (g - 1) parts.
    Ok((part * (g - 1)) as f64 / times[times.len() / 2])
}

fn main() {
    let n = match Device::count() {
        Ok(n) if n > 0 => n,
        r => {
            println!("SKIPPED multi_gpu: no GPU ({r:?})");
            return;
        }
    };
    let device_name = Device::new(0).and_then(|d| d.name()).unwrap_or_else(|_| "unknown".into());
    let commit = std::env::var("GPUJOIN_COMMIT").unwrap_or_else(|_| "unknown".into());
    let reps: usize = std::env::var("GPUJOIN_MULTI_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let sizes: Vec<(u32, u32)> = std::env::var("GPUJOIN_MULTI_SIZES")
        .unwrap_or_else(|_| "26:27,28:29".into())
        .split(',')
        .filter_map(|p| p.split_once(':').and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?))))
        .collect();
    let mut rows = Vec::new();
    let gs: Vec<usize> = [1usize, 2, 4, 8].into_iter().filter(|&g| g <= n).collect();
    println!("multi_gpu: {n} x {device_name}, ranks {gs:?}, sizes {sizes:?}, NCCL {}", gpujoin_device::nccl::is_available());
    for &g in &gs {
        let cluster = match Cluster::new(&(0..g).collect::<Vec<_>>()) {
            Ok(c) => c,
            Err(e) => {
                println!("multi_gpu: {g} ranks: no cluster: {e}");
                continue;
            }
        };
        let a2a = if g > 1 {
            match all_to_all_bandwidth(cluster.streams(), 1 << 30) {
                Ok(bw) => {
                    println!("RESULT multi_gpu/all_to_all_{g}gpu: {:.1} GB/s out of each rank (NCCL send/recv, 1 GiB a rank in equal parts)", bw / 1e9);
                    rows.push(format!("multi_gpu,all_to_all_{g}gpu_gbps,{:.4},0,{},{}", bw / 1e9, device_name.replace(',', " "), commit));
                    bw
                }
                Err(e) => {
                    println!("multi_gpu: all-to-all on {g} GPUs failed: {e}");
                    f64::NAN
                }
            }
        } else {
            f64::NAN
        };
        for &(lr, ls) in &sizes {
            let (nr, ns) = (1u64 << lr, 1u64 << ls);
            for keys in [Keys::Uniform, Keys::Zipf(1.0), Keys::Zipf(1.5)] {
                let case = format!("pkfk_r2p{lr}_s2p{ls}_{}_{g}gpu", keys.name());
                let made = side(&cluster, nr, |i| (i.wrapping_mul(0x9E3779B1) % nr) as i64, "r").and_then(|r| Ok((r, side(&cluster, ns, |i| keys.key(i, nr), "s")?)));
                let (r, s) = match made {
                    Ok(t) => t,
                    Err(e) => {
                        println!("multi_gpu/{case}: inputs do not fit: {e}");
                        continue;
                    }
                };
                let join = DistributedJoin::new(Join::new(JoinType::Inner).keys(&["k"], &["k"]).select(&["r1", "r2"], &["s1", "s2"])).on(&r, &s).distribution(Distribution::Shuffle).skew(SkewHandling::Auto);
                let mut times = Vec::new();
                let mut last = None;
                let mut failed = None;
                for rep in 0..=reps {
                    drop(last.take());
                    let t = Instant::now();
                    match join.run(&cluster) {
                        Ok(out) => {
                            if rep > 0 {
                                times.push((t.elapsed().as_secs_f64() * 1e3, out.phases, out.exchanged_bytes));
                            }
                            last = Some(out);
                        }
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                if let Some(e) = failed {
                    println!("multi_gpu/{case}: did not run: {e}");
                    continue;
                }
                let out = last.expect("a run");
                times.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
                let (ms, phases, bytes) = times[times.len() / 2];
                let share = out.rows as f64 / g as f64;
                let most = *out.rows_per_rank.iter().max().unwrap_or(&0) as f64 / share.max(1.0);
                let exchange_bw = bytes as f64 / g as f64 / phases.exchange.max(1e-9);
                let floor_ms = if a2a.is_finite() { bytes as f64 / g as f64 / a2a * 1e3 } else { 0.0 };
                println!(
                    "RESULT multi_gpu/{case}: median {ms:.1} ms = route {:.1} + exchange {:.1} + join {:.1} ms; {} output rows, most on one rank {most:.2}x its share, {} heavy keys; exchange {:.2} GB moved, {:.1} GB/s out of each rank{}",
                    phases.route * 1e3,
                    phases.exchange * 1e3,
                    phases.join * 1e3,
                    out.rows,
                    out.heavy_keys,
                    bytes as f64 / 1e9,
                    exchange_bw / 1e9,
                    if a2a.is_finite() { format!(" ({:.0}% of the all-to-all's)", 100.0 * exchange_bw / a2a) } else { String::new() }
                );
                rows.push(format!("multi_gpu,{case},{ms:.4},{floor_ms:.4},{},{}", device_name.replace(',', " "), commit));
            }
        }
    }
    if let Ok(path) = std::env::var("GPUJOIN_BENCH_CSV") {
        let new = !std::path::Path::new(&path).exists();
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("GPUJOIN_BENCH_CSV");
        if new {
            writeln!(f, "group,case,ms_median,floor_ms,device,commit").unwrap();
        }
        for r in rows {
            writeln!(f, "{r}").unwrap();
        }
    }
}
