//! Arrow in and out (`gpujoin-arrow`). Group `arrow`:
//! - `pinned_h2d_1gib` / `pinned_d2h_1gib`: the pinned copy rate of this run (the reference of
//!   the upload and download rows: their floor column is the bytes at that rate);
//! - `upload_fixed_2p27` / `download_fixed_2p27`: a 2^27-row table of `i32`, `i64`, `f64`
//!   (`_pinned_inputs`: its batches in page-locked memory, `to_pinned`);
//! - `upload_utf8_2p27` / `download_utf8_2p27`: one `Utf8` column of 8-16-byte strings, 2^27 rows;
//! - `e2e_pkfk_narrow_4b4b_{total,upload,join,download}`: PK-FK 2^26 x 2^27 `u32` keys, one
//!   `u32` payload a side, record batches in, `gpujoin_arrow::join` (Auto; `join_on`: the whole
//!   right side up, join, download), record batches of the two payloads out;
//!   `_total_streamed` is the same through `join_streaming_on` (the right side in parts);
//!   `_total_pinned_inputs` / `_upload_pinned_inputs` take the inputs from page-locked memory
//!   (`to_pinned`; a download's batches are too), copied directly instead of staged; the
//!   join part is `device_narrow_4b4b_auto` (the front door, Auto: what each path runs) against
//!   `device_narrow_4b4b_wide_auto` (`paper_pkfk`'s row).
//!
//! The upload, download and e2e rows are wall-clock medians (host staging is part of them); the
//! floor of each is its bytes over PCIe at the pinned rate of the same run.

mod common;

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, RecordBatchIterator, StringArray, UInt32Array};
use common::{median, time_ms, Harness, WideSide};
use gpujoin::device::{HostRegistration, PinnedBuffer};
use gpujoin::join::plan::Join;
use gpujoin::join::table::Table;
use gpujoin::join::table::TableView;
use gpujoin::join::wide::{self, WideJoinOptions};
use gpujoin::join::JoinType;
use gpujoin_arrow::{join_on, join_streaming_on, upload_batches, upload_batches_with, Downloader, DownloadOptions, JoinSpec, StagingOptions};


use gpujoin_testkit::datagen;

const GROUP: &str = "arrow";
const BATCH: usize = 1 << 20;

fn wall_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up: pinned staging, pool growth
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(&mut t)
}

fn batches(columns: Vec<(&str, ArrayRef)>) -> Vec<RecordBatch> {
    let b = RecordBatch::try_from_iter(columns).unwrap();
    (0..b.num_rows()).step_by(BATCH).map(|s| b.slice(s, BATCH.min(b.num_rows() - s))).collect()
}

/// `batches` copied into page-locked memory (`to_pinned`).
fn pinned(s: &gpujoin::device::Stream, batches: &[RecordBatch]) -> Vec<RecordBatch> {
    batches.iter().map(|b| gpujoin_arrow::to_pinned(s, b).unwrap()).collect()
}

fn main() {
    let Some(mut h) = Harness::new("arrow") else { return };
    let s = h.stream.clone();
    // The pinned copy rate.
    let gib = 1usize << 30;
    let (h2d, d2h) = {
        let mut p = PinnedBuffer::<u8>::new(&h.device, gib).unwrap();
        let mut d = s.alloc::<u8>(gib).unwrap();
        let h2d = time_ms(&s, 2, 10, || s.copy_from_pinned_async(&mut p, &mut d.view_mut()).unwrap());
        let d2h = time_ms(&s, 2, 10, || s.copy_to_pinned_async(&d.view(), &mut p, 0).unwrap());
        (h2d, d2h)
    };
    let (h2d_rate, d2h_rate) = (gib as f64 / h2d / 1e6, gib as f64 / d2h / 1e6); // GB/s
    println!("pinned copies: host to device {h2d_rate:.1} GB/s, device to host {d2h_rate:.1} GB/s");
    h.record(GROUP, "pinned_h2d_1gib", h2d, 0);
    h.record(GROUP, "pinned_d2h_1gib", d2h, 0);
    // The host side of a staged copy: pageable to pinned memory (both warm) on 16 threads.
    {
        let src = vec![7u8; gib];
        let mut p = PinnedBuffer::<u8>::new(&h.device, gib).unwrap();
        let dst = p.as_mut_slice().unwrap();
        let threads = std::thread::available_parallelism().map_or(8, |n| n.get());
        let ms = wall_ms(5, || {
            let chunk = gib.div_ceil(threads);
            std::thread::scope(|sc| {
                for (d, s) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                    sc.spawn(move || d.copy_from_slice(s));
                }
            });
        });
        println!("host copy pageable -> pinned on {threads} threads: {:.1} GB/s", gib as f64 / ms / 1e6);
        h.record(GROUP, "host_copy_to_pinned_1gib", ms, 0);
        let mut fresh = Vec::new();
        let ms = wall_ms(2, || {
            let mut v = vec![0u8; 0];
            v.reserve_exact(gib);
            // SAFETY: u8 has no invalid values; every byte is written right below.
            unsafe { v.set_len(gib) };
            v.copy_from_slice(&src);
            fresh = v;
        });
        println!("host copy into fresh pageable memory, one thread: {:.1} GB/s", gib as f64 / ms / 1e6);
        h.record(GROUP, "host_copy_to_fresh_1gib", ms, 0);
    }
    // Page-locking in place instead: register 1 GiB of pageable memory, copy it, unregister.
    {
        let src = vec![7u8; gib];
        let mut d = s.alloc::<u8>(gib).unwrap();
        let ms = wall_ms(5, || {
            let mut r = HostRegistration::new(&h.device, &src).unwrap();
            s.copy_from_registered_async(&mut r, 0, &mut d.view_mut()).unwrap();
            drop(r);
        });
        println!("register 1 GiB in place + copy + unregister: {ms:.3} ms ({:.1} GB/s)", gib as f64 / ms / 1e6);
        h.record(GROUP, "registered_h2d_1gib", ms, 0);
    }
    let report = |h: &mut Harness, case: &str, ms: f64, bytes: usize, rate: f64| {
        let floor = bytes as f64 / rate / 1e6;
        println!("RESULT {GROUP}/{case}: median {ms:.3} ms, {:.1} GB/s, {:.0}% of the pinned rate ({floor:.3} ms)", bytes as f64 / ms / 1e6, 100.0 * floor / ms);
        h.record(GROUP, case, ms, 0);
    };

    let n = 1usize << 27;
    {
        let fixed = batches(vec![
            ("a", Arc::new(Int32Array::from_iter_values((0..n as i32).map(|i| i.wrapping_mul(7)))) as ArrayRef),
            ("b", Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i * 3))) as ArrayRef),
            ("c", Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64 * 0.5))) as ArrayRef),
        ]);
        let schema = fixed[0].schema();
        let bytes = n * (4 + 8 + 8);
        let ms = wall_ms(5, || {
            drop(upload_batches(&s, &schema, fixed.iter().cloned()).unwrap());
            s.synchronize().unwrap(); // the last device copies are part of the upload
        });
        report(&mut h, "upload_fixed_2p27", ms, bytes, h2d_rate);
        // The same batches in page-locked memory (`to_pinned`; a download's batches are too):
        // copied directly, no staging copy on the host.
        {
            let pinned = pinned(&s, &fixed);
            let ms = wall_ms(5, || {
                drop(upload_batches(&s, &schema, pinned.iter().cloned()).unwrap());
                s.synchronize().unwrap();
            });
            report(&mut h, "upload_fixed_2p27_pinned_inputs", ms, bytes, h2d_rate);
        }
        // The same rows in DataFusion's default batches of 8192 rows: packed into full pieces.
        let small: Vec<RecordBatch> = fixed.iter().flat_map(|b| (0..b.num_rows()).step_by(8192).map(|i| b.slice(i, 8192.min(b.num_rows() - i))).collect::<Vec<_>>()).collect();
        let ms = wall_ms(5, || {
            drop(upload_batches(&s, &schema, small.iter().cloned()).unwrap());
            s.synchronize().unwrap();
        });
        report(&mut h, "upload_fixed_2p27_8k_batches", ms, bytes, h2d_rate);
        // Where the time goes, for a few ring shapes (host clocks of one warm run each).
        for (mib, buffers) in [(8usize, 32usize), (32, 8), (2, 64), (8, 4)] {
            let opts = StagingOptions { buffer_bytes: mib << 20, buffers };
            drop(upload_batches_with(&s, &schema, fixed.iter().cloned(), opts).unwrap());
            s.synchronize().unwrap();
            let t0 = Instant::now();
            let (t, st) = gpujoin_arrow::upload_batches_with_stats(&s, &schema, fixed.iter().cloned(), opts).unwrap();
            s.synchronize().unwrap();
            println!(
                "STATS upload_fixed_2p27 {buffers} x {mib} MiB buffers: {:.1} ms wall, first device copy queued after {:.2} ms; summed over threads: waiting for a buffer {:.1} ms, host copies {:.1} ms, issuing {:.1} ms; {} pieces",
                t0.elapsed().as_secs_f64() * 1e3, st.first_copy.as_secs_f64() * 1e3, st.waiting.as_secs_f64() * 1e3, st.host_copy.as_secs_f64() * 1e3, st.issuing.as_secs_f64() * 1e3, st.pieces
            );
            drop(t);
        }
        let t = upload_batches(&s, &schema, fixed.iter().cloned()).unwrap();
        let ms = wall_ms(5, || {
            let rows: usize = Downloader::new(&s, t.view(), None, DownloadOptions::default()).unwrap().map(|b| b.unwrap().num_rows()).sum();
            assert_eq!(rows, n);
        });
        report(&mut h, "download_fixed_2p27", ms, bytes, d2h_rate);
    }
    {
        let mut values = Vec::with_capacity(n * 12);
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0i32);
        for i in 0..n {
            let s = format!("{:08x}", i.wrapping_mul(2_654_435_761) as u32);
            values.extend_from_slice(s.as_bytes());
            values.extend(std::iter::repeat_n(b'x', i % 9));
            offsets.push(values.len() as i32);
        }
        let strings = StringArray::new(arrow_buffer::OffsetBuffer::new(offsets.into()), values.into(), None);
        let text_bytes = strings.values().len();
        let utf8 = batches(vec![("s", Arc::new(strings) as ArrayRef)]);
        let schema = utf8[0].schema();
        let bytes = text_bytes + 4 * n;
        let ms = wall_ms(5, || {
            drop(upload_batches(&s, &schema, utf8.iter().cloned()).unwrap());
            s.synchronize().unwrap();
        });
        report(&mut h, "upload_utf8_2p27", ms, bytes, h2d_rate);
        {
            // Page-locked: the string bytes go directly; the offsets are re-based through staging.
            let pinned = pinned(&s, &utf8);
            let ms = wall_ms(5, || {
                drop(upload_batches(&s, &schema, pinned.iter().cloned()).unwrap());
                s.synchronize().unwrap();
            });
            report(&mut h, "upload_utf8_2p27_pinned_inputs", ms, bytes, h2d_rate);
        }
        let t = upload_batches(&s, &schema, utf8.iter().cloned()).unwrap();
        let ms = wall_ms(5, || {
            let rows: usize = Downloader::new(&s, t.view(), None, DownloadOptions::default()).unwrap().map(|b| b.unwrap().num_rows()).sum();
            assert_eq!(rows, n);
        });
        report(&mut h, "download_utf8_2p27", ms, bytes, d2h_rate);
    }

    // End to end: PK-FK narrow 4b4b.
    let (nr, ns) = (1usize << 26, 1usize << 27);
    let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 11).generate().unwrap();
    let rb = batches(vec![("k", Arc::new(UInt32Array::from(r.clone())) as ArrayRef), ("p", Arc::new(UInt32Array::from(r.clone())) as ArrayRef)]);
    let fb = batches(vec![("k", Arc::new(UInt32Array::from(f.clone())) as ArrayRef), ("p", Arc::new(UInt32Array::from(f.clone())) as ArrayRef)]);
    let schema = rb[0].schema();
    let spec = JoinSpec::new(JoinType::Inner, &["k"], &["k"]).select(&["p"], &["p"]).batch_rows(BATCH);
    let (up_bytes, down_bytes) = ((nr + ns) * 8, ns * 8);
    let reader = |b: &Vec<RecordBatch>| RecordBatchIterator::new(b.iter().cloned().map(Ok).collect::<Vec<_>>().into_iter(), schema.clone());
    let pcie_ms = up_bytes as f64 / h2d_rate / 1e6 + down_bytes as f64 / d2h_rate / 1e6;
    // The right side streamed in parts (copies both ways and the joins overlap).
    let mut streamed_times = None;
    let ms = wall_ms(5, || {
        let mut out = join_streaming_on(&s, reader(&rb), reader(&fb), spec.clone()).unwrap();
        let rows: usize = out.by_ref().map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, ns);
        streamed_times = Some(out.times());
    });
    println!("RESULT {GROUP}/e2e_pkfk_narrow_4b4b_total_streamed: median {ms:.3} ms, {:.2}x the PCIe bytes at the pinned rates ({pcie_ms:.3} ms)", ms / pcie_ms);
    h.record(GROUP, "e2e_pkfk_narrow_4b4b_total_streamed", ms, 0);
    if let Some(t) = streamed_times {
        println!("STATS e2e streamed, last run, summed over the parts (they overlap): upload {:.2} ms, join {:.2} ms, download {:.2} ms, {} output tables", t.upload.as_secs_f64() * 1e3, t.join.as_secs_f64() * 1e3, t.download.as_secs_f64() * 1e3, t.chunks);
    }
    // `gpujoin_arrow::join`'s path (`join_on`): the whole right side uploaded, then joined, then
    // downloaded.
    let e2e_ms = |l: &Vec<RecordBatch>, r: &Vec<RecordBatch>| {
        wall_ms(5, || {
            let out = join_on(&s, reader(l), reader(r), spec.clone()).unwrap();
            let rows: usize = out.map(|b| b.unwrap().num_rows()).sum();
            assert_eq!(rows, ns);
        })
    };
    let ms = e2e_ms(&rb, &fb);
    println!("RESULT {GROUP}/e2e_pkfk_narrow_4b4b_total: median {ms:.3} ms, {:.2}x the PCIe bytes at the pinned rates ({pcie_ms:.3} ms)", ms / pcie_ms);
    h.record(GROUP, "e2e_pkfk_narrow_4b4b_total", ms, 0);
    // The same join with its inputs already in page-locked memory: what a download returns (a
    // join fed by an earlier one), or inputs page-locked once with `to_pinned` and joined many
    // times. Their bytes go to the device directly, with no staging copy on the host.
    let (rbp, fbp) = (pinned(&s, &rb), pinned(&s, &fb));
    let ms_pinned = e2e_ms(&rbp, &fbp);
    println!("RESULT {GROUP}/e2e_pkfk_narrow_4b4b_total_pinned_inputs: median {ms_pinned:.3} ms, {:.2}x the PCIe bytes at the pinned rates ({pcie_ms:.3} ms)", ms_pinned / pcie_ms);
    h.record(GROUP, "e2e_pkfk_narrow_4b4b_total_pinned_inputs", ms_pinned, 0);
    let up_pinned = wall_ms(5, || {
        drop(upload_batches(&s, &schema, rbp.iter().cloned()).unwrap());
        drop(upload_batches(&s, &schema, fbp.iter().cloned()).unwrap());
        s.synchronize().unwrap();
    });
    report(&mut h, "e2e_pkfk_narrow_4b4b_upload_pinned_inputs", up_pinned, up_bytes, h2d_rate);
    drop((rbp, fbp));
    // The parts, on the same data.
    let up = wall_ms(5, || {
        drop(upload_batches(&s, &schema, rb.iter().cloned()).unwrap());
        drop(upload_batches(&s, &schema, fb.iter().cloned()).unwrap());
        s.synchronize().unwrap();
    });
    report(&mut h, "e2e_pkfk_narrow_4b4b_upload", up, up_bytes, h2d_rate);
    // Where one warm upload of each side spends its time (host clocks).
    for (side, b) in [("left", &rb), ("right", &fb)] {
        let t0 = Instant::now();
        let (t, st) = gpujoin_arrow::upload_batches_with_stats(&s, &schema, b.iter().cloned(), StagingOptions::default()).unwrap();
        let queued = t0.elapsed();
        s.synchronize().unwrap();
        println!(
            "STATS e2e upload {side}: {:.2} ms wall ({:.2} ms to the last copy queued), first device copy queued after {:.2} ms; summed over threads: waiting {:.1} ms, host copies {:.1} ms, issuing {:.1} ms; {} pieces",
            t0.elapsed().as_secs_f64() * 1e3, queued.as_secs_f64() * 1e3, st.first_copy.as_secs_f64() * 1e3, st.waiting.as_secs_f64() * 1e3, st.host_copy.as_secs_f64() * 1e3, st.issuing.as_secs_f64() * 1e3, st.pieces
        );
        drop(t);
    }
    let up_reader = wall_ms(5, || {
        drop(gpujoin_arrow::upload_reader(&s, reader(&rb), StagingOptions::default()).unwrap());
        drop(gpujoin_arrow::upload_reader(&s, reader(&fb), StagingOptions::default()).unwrap());
        s.synchronize().unwrap();
    });
    report(&mut h, "e2e_pkfk_narrow_4b4b_upload_reader", up_reader, up_bytes, h2d_rate);
    let (rt, ft): (Table, Table) = (upload_batches(&s, &schema, rb.iter().cloned()).unwrap(), upload_batches(&s, &schema, fb.iter().cloned()).unwrap());
    let join = Join::new(JoinType::Inner).on(&rt, &["k"], &ft, &["k"]).select(&["p"], &["p"]);
    let device = h.case(GROUP, "device_narrow_4b4b_auto", ((nr + ns) * 8 + ns * 2 * 4) as u64, (nr + ns) as u64, |s| {
        assert_eq!(join.run(s).unwrap().rows, ns as u64);
    });
    // The join part of `join_on` is this very call (the front door, Auto, no output budget).
    let jms = device;
    let join_wall = wall_ms(5, || {
        let out = join.run(&s).unwrap();
        s.synchronize().unwrap();
        drop(out);
    });
    println!("STATS e2e join wall clock (run + synchronize + drop): {join_wall:.3} ms");
    h.record(GROUP, "e2e_pkfk_narrow_4b4b_join_wall", join_wall, 0);
    let out = join.run(&s).unwrap();
    let out_schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new("left.p", arrow_schema::DataType::UInt32, false), arrow_schema::Field::new("right.p", arrow_schema::DataType::UInt32, false)]));
    let down = wall_ms(5, || {
        let rows: usize = Downloader::new(&s, out.table.view(), Some(&out_schema), DownloadOptions { batch_rows: BATCH, ..DownloadOptions::default() }).unwrap().map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, ns);
    });
    report(&mut h, "e2e_pkfk_narrow_4b4b_download", down, down_bytes, d2h_rate);
    drop(out);
    let (rk, fk) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
    let (rp, fp) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
    let rw = WideSide::new(TableView::single(rk.view()), vec![rp.view().into()]);
    let fw = WideSide::new(TableView::single(fk.view()), vec![fp.view().into()]);
    let wide_ms = h.case(GROUP, "device_narrow_4b4b_wide_auto", ((nr + ns) * 8 + ns * 2 * 4) as u64, (nr + ns) as u64, |s| {
        assert_eq!(wide::join(s, rw.pair(), fw.pair(), JoinType::Inner, wide::Algorithm::Auto, WideJoinOptions::default()).unwrap().rows, ns as u64);
    });
    // The two join cases alternated (front door, wide, front door, ...), each call timed by
    // device events after a warm-up of each, so that clocks and the memory pool are in the same
    // state for both: the join part's ratio without the minutes between the two cases above.
    let (mut tf, mut tw) = (Vec::new(), Vec::new());
    let once = |f: &mut dyn FnMut()| -> f64 {
        let (a, b) = (gpujoin::device::Event::new(s.device(), true).unwrap(), gpujoin::device::Event::new(s.device(), true).unwrap());
        a.record(&s).unwrap();
        f();
        b.record(&s).unwrap();
        b.synchronize().unwrap();
        a.elapsed_ms(&b).unwrap() as f64
    };
    let mut front = || {
        let out = join.run(&s).unwrap();
        assert_eq!(out.rows, ns as u64);
    };
    let mut wide_run = || {
        let out = wide::join(&s, rw.pair(), fw.pair(), JoinType::Inner, wide::Algorithm::Auto, WideJoinOptions::default()).unwrap();
        assert_eq!(out.rows, ns as u64);
    };
    once(&mut front);
    once(&mut wide_run);
    for _ in 0..15 {
        tf.push(once(&mut front));
        tw.push(once(&mut wide_run));
    }
    let (mf, mw) = (median(&mut tf), median(&mut tw));
    println!("RESULT {GROUP}/device_narrow_4b4b_interleaved: front door {mf:.3} ms, wide Auto {mw:.3} ms (medians of 15 alternated calls): {:.3}x", mf / mw);
    h.record(GROUP, "device_narrow_4b4b_auto_interleaved", mf, 0);
    h.record(GROUP, "device_narrow_4b4b_wide_auto_interleaved", mw, 0);
    println!("STATS e2e join reasons: front door `{}`; wide `{}`", join.run(&s).unwrap().reason, wide::join(&s, rw.pair(), fw.pair(), JoinType::Inner, wide::Algorithm::Auto, WideJoinOptions::default()).unwrap().reason);
    println!("SUMMARY e2e: total {ms:.2} ms = upload {up:.2} + join {jms:.2} + download {down:.2} (+ {:.2} other); join {:.3}x the device front door, {:.3}x paper_pkfk's wide Auto ({:.3}x alternated)", ms - up - jms - down, jms / device, jms / wide_ms, mf / mw);
    println!("SUMMARY e2e, page-locked inputs: total {ms_pinned:.2} ms = upload {up_pinned:.2} + join {jms:.2} + download {down:.2} (+ {:.2} other) = {:.3}x the PCIe floor {pcie_ms:.2} ms (target 1.25x)", ms_pinned - up_pinned - jms - down, ms_pinned / pcie_ms);
}
