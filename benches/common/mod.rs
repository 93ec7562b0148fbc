//! The benchmark harness shared by every gpujoin benchmark.
//!
//! Each case is timed with device events after a warm-up; Criterion drives the repetitions
//! (`iter_custom`), and the median of the per-iteration device times is appended to the CSV
//! named by `GPUJOIN_BENCH_CSV` (`group,case,ms_median,floor_ms,device,commit`). The byte floor
//! of a case is the bytes it must move divided by the device-to-device copy bandwidth measured
//! at the start of the same run.
#![allow(dead_code)]

use std::io::Write;
use std::time::Duration;

use criterion::Criterion;
use gpujoin::device::{Device, Event, Stream};

pub const CSV_HEADER: &str = "group,case,ms_median,floor_ms,device,commit";

pub struct Harness {
    pub device: Device,
    pub stream: Stream,
    pub device_name: String,
    pub commit: String,
    /// Device copy bandwidth, bytes read + written per second.
    pub copy_bytes_per_s: f64,
    criterion: Criterion,
    rows: Vec<String>,
}

/// Median of a list of milliseconds.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

/// Times `reps` runs of `f` with events after `warm` untimed runs; returns the median in ms.
pub fn time_ms(stream: &Stream, warm: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warm {
        f();
    }
    stream.synchronize().unwrap();
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (a, b) = (Event::new(stream.device(), true).unwrap(), Event::new(stream.device(), true).unwrap());
        a.record(stream).unwrap();
        f();
        b.record(stream).unwrap();
        b.synchronize().unwrap();
        t.push(a.elapsed_ms(&b).unwrap() as f64);
    }
    median(&mut t)
}

impl Harness {
    /// Opens the GPU, or prints that the benchmark is skipped and returns `None`.
    pub fn new(name: &str) -> Option<Harness> {
        let device = gpujoin::device::testing::device_or_skip(name)?;
        // A benchmark repeats the same allocations: keep every freed byte in the pool (as the
        // library did before its default became a quarter of the memory), so no timed iteration
        // pays for mapping memory again and the figures compare with earlier runs.
        device.set_release_threshold(u64::MAX).unwrap();
        let stream = device.new_stream().unwrap();
        let device_name = device.name().unwrap_or_else(|_| "unknown".into());
        let commit = std::env::var("GPUJOIN_COMMIT").unwrap_or_else(|_| "unknown".into());
        let criterion = Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(1500))
            .without_plots()
            .configure_from_args();
        let mut h = Harness { device, stream, device_name, commit, copy_bytes_per_s: 0.0, criterion, rows: vec![] };
        h.measure_copy_bandwidth();
        Some(h)
    }

    /// Copies 1 GiB device to device; bandwidth counts bytes read plus bytes written.
    fn measure_copy_bandwidth(&mut self) {
        let n = 1usize << 28; // u32s = 1 GiB
        let s = &self.stream;
        let src = s.alloc_zeroed::<u32>(n).unwrap();
        let mut dst = s.alloc::<u32>(n).unwrap();
        let ms = time_ms(s, 3, 20, || s.copy_device_to_device(&src.view(), &mut dst.view_mut()).unwrap());
        self.copy_bytes_per_s = 2.0 * (n * 4) as f64 / (ms * 1e-3);
        println!(
            "device: {} | device-to-device copy: {:.1} GB/s (read + write), {:.3} ms per GiB copied",
            self.device_name,
            self.copy_bytes_per_s / 1e9,
            ms
        );
        self.push_row("copy", "d2d_1gib", ms, ms);
    }

    /// Milliseconds that moving `bytes` takes at the measured copy bandwidth.
    pub fn floor_ms(&self, bytes: u64) -> f64 {
        bytes as f64 / self.copy_bytes_per_s * 1e3
    }

    fn push_row(&mut self, group: &str, case: &str, ms: f64, floor: f64) {
        self.rows.push(format!("{group},{case},{ms:.4},{floor:.4},{},{}", self.device_name.replace(',', " "), self.commit));
    }

    /// Benchmarks one case: `f` queues the work on the stream (it must not synchronize unless
    /// the algorithm itself does). `bytes` is the case's byte floor numerator; Criterion reports
    /// elements per second, and the RESULT line adds bytes per second. Returns the median in ms.
    ///
    /// `GPUJOIN_BENCH_CASES=a,b` runs only the cases whose `group/case` name contains `a` or `b`
    /// (the others return NaN and print nothing), for example to profile one case's kernels.
    pub fn case(&mut self, group: &str, case: &str, bytes: u64, elements: u64, mut f: impl FnMut(&Stream)) -> f64 {
        if let Ok(only) = std::env::var("GPUJOIN_BENCH_CASES") {
            let name = format!("{group}/{case}");
            if !only.split(',').map(str::trim).filter(|p| !p.is_empty()).any(|p| name.contains(p)) {
                return f64::NAN;
            }
        }
        let stream = self.stream.clone();
        for _ in 0..2 {
            f(&stream); // warm-up: module load, pool growth
        }
        stream.synchronize().unwrap();
        let mut samples: Vec<f64> = Vec::new();
        {
            let mut g = self.criterion.benchmark_group(group);
            g.throughput(criterion::Throughput::Elements(elements));
            g.bench_function(case, |b| {
                b.iter_custom(|iters| {
                    let (a, e) = (Event::new(stream.device(), true).unwrap(), Event::new(stream.device(), true).unwrap());
                    a.record(&stream).unwrap();
                    for _ in 0..iters {
                        f(&stream);
                    }
                    e.record(&stream).unwrap();
                    e.synchronize().unwrap();
                    let ms = a.elapsed_ms(&e).unwrap() as f64;
                    samples.push(ms / iters as f64);
                    Duration::from_secs_f64(ms * 1e-3)
                })
            });
            g.finish();
        }
        let ms = median(&mut samples);
        let floor = self.floor_ms(bytes);
        println!(
            "RESULT {group}/{case}: median {ms:.4} ms, byte floor {floor:.4} ms ({:.0}% of copy bandwidth); {:.1} G elements/s, {:.1} GB/s of floor bytes",
            100.0 * floor / ms,
            elements as f64 / (ms * 1e6),
            bytes as f64 / (ms * 1e6)
        );
        self.push_row(group, case, ms, floor);
        ms
    }

    /// Records a figure timed by the caller (e.g. a multi-phase algorithm timing itself).
    pub fn record(&mut self, group: &str, case: &str, ms: f64, bytes: u64) {
        let floor = self.floor_ms(bytes);
        println!("RESULT {group}/{case}: median {ms:.4} ms, byte floor {floor:.4} ms ({:.0}% of copy bandwidth)", 100.0 * floor / ms);
        self.push_row(group, case, ms, floor);
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let Ok(path) = std::env::var("GPUJOIN_BENCH_CSV") else { return };
        let new = !std::path::Path::new(&path).exists();
        if let Some(dir) = std::path::Path::new(&path).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("open GPUJOIN_BENCH_CSV");
        if new {
            writeln!(f, "{CSV_HEADER}").unwrap();
        }
        for r in &self.rows {
            writeln!(f, "{r}").unwrap();
        }
    }
}

/// One side of a wide join as `gpujoin::join::wide::join` takes it: key columns and payload
/// columns, kept together for the benchmarks' loops.
pub struct WideSide<'a> {
    pub keys: gpujoin::join::table::TableView<'a>,
    pub payloads: Vec<gpujoin::join::table::ColumnView<'a>>,
}

impl<'a> WideSide<'a> {
    pub fn new(keys: gpujoin::join::table::TableView<'a>, payloads: Vec<gpujoin::join::table::ColumnView<'a>>) -> WideSide<'a> {
        WideSide { keys, payloads }
    }
    /// The pair `wide::join` takes.
    pub fn pair(&self) -> (&gpujoin::join::table::TableView<'a>, &[gpujoin::join::table::ColumnView<'a>]) {
        (&self.keys, &self.payloads)
    }
    pub fn rows(&self) -> usize {
        self.keys.rows()
    }
}
