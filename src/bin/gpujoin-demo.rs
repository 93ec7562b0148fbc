//! `cargo xtask demo`: the seed demonstrations on the GPU.
//!
//! Prints ModernGPU's relational-join demonstration (seed 000) in its own format, the
//! interleave join's worked example (seed 001), and the throughput of a 2^24-row join. Without
//! a GPU it says so and prints the CPU reference's results instead.

use std::process::ExitCode;

use gpujoin::device::{Device, Stream, Timer};
use gpujoin::join::reference::{self, vectors};
use gpujoin::join::{datagen, interleave_join, sort_merge_join, sorted_merge_join, JoinOptions, JoinType, Keys, RowId};

fn print_keys(name: &str, keys: &[i32]) {
    println!("{name} keys:");
    for (row, chunk) in keys.chunks(10).enumerate() {
        let cells: Vec<String> = chunk.iter().map(|k| format!("{k:4}")).collect();
        println!("{:5}:  {}", row * 10, cells.join(" "));
    }
}

fn print_join(title: &str, pairs: &[(RowId, RowId)], a: &[i32], b: &[i32]) {
    println!("\n{title} ({} items):", pairs.len());
    println!("output   (aIndex, bIndex) : (aKey, bKey)");
    println!("----------------------------------------");
    let idx = |r: RowId| r.get().map_or(-1, |i| i as i64);
    let key = |r: RowId, k: &[i32]| r.get().map_or("---".to_string(), |i| k[i as usize].to_string());
    for (i, &(l, r)) in pairs.iter().enumerate() {
        println!("{i:3}      ({:6}, {:6}) : ({:>4}, {:>4})", idx(l), idx(r), key(l, a), key(r, b));
    }
}

fn print_interleave(pairs: &[(RowId, RowId)]) {
    println!("\nINTERLEAVE JOIN: L LEFT JOIN R WHERE L.K == R.K ({} rows)", pairs.len());
    println!("  K    A    B");
    for &(l, r) in pairs {
        let li = l.get().expect("left row") as usize;
        let b = r.get().map_or("null".to_string(), |j| j.to_string());
        println!("{:3}  {:3}  {:>4}", vectors::INTERLEAVE_L_KEYS[li], li, b);
    }
}

fn gpu_demo(device: &Device) -> gpujoin::device::Result<()> {
    let s: Stream = device.new_stream()?;
    let (a, b) = (&vectors::MGPU_A_KEYS[..], &vectors::MGPU_B_KEYS[..]);
    println!("RELATIONAL JOINS DEMONSTRATION (on {})\n", device.name()?);
    print_keys("A", a);
    println!();
    print_keys("B", b);
    let (da, db) = (s.copy_from_host(a)?, s.copy_from_host(b)?);
    let inner = sorted_merge_join(&s, &da.view(), &db.view(), JoinType::Inner)?.pairs()?;
    print_join("Inner-join", &inner, a, b);
    let outer = sorted_merge_join(&s, &da.view(), &db.view(), JoinType::Full)?.pairs()?;
    print_join("Outer-join", &outer, a, b);

    let (l, r) = (s.copy_from_host(&vectors::INTERLEAVE_L_KEYS)?, s.copy_from_host(&vectors::INTERLEAVE_R_KEYS)?);
    let left = interleave_join(&s, &Keys::single(l.view()), &Keys::single(r.view()), JoinType::Left, JoinOptions::default())?.pairs()?;
    print_interleave(&left);

    let n = 1usize << 24;
    let keys_r = datagen::shuffled_dense_keys(n, 1)?;
    let keys_s = datagen::shuffled_dense_keys(n, 2)?;
    let (dr, ds) = (s.copy_from_host(&keys_r)?, s.copy_from_host(&keys_s)?);
    let (kr, ks) = (Keys::single(dr.view()), Keys::single(ds.view()));
    sort_merge_join(&s, &kr, &ks, JoinType::Inner, JoinOptions::default())?; // warm-up
    let t = Timer::start(&s)?;
    let rows = sort_merge_join(&s, &kr, &ks, JoinType::Inner, JoinOptions::default())?.rows();
    let ms = t.stop(&s)?;
    println!(
        "\nThroughput: sort_merge_join inner, 2^24 x 2^24 shuffled unique u32 keys -> {rows} rows in {ms:.2} ms ({:.0} M input rows/s)",
        (2 * n) as f64 / (ms as f64 * 1e3)
    );
    Ok(())
}

fn cpu_demo() -> gpujoin::device::Result<()> {
    let (a, b) = (&vectors::MGPU_A_KEYS[..], &vectors::MGPU_B_KEYS[..]);
    let (ka, kb) = (vectors::i32_keys(a), vectors::i32_keys(b));
    println!("RELATIONAL JOINS DEMONSTRATION (CPU reference)\n");
    print_keys("A", a);
    println!();
    print_keys("B", b);
    let inner = reference::join(&ka, &kb, JoinType::Inner, JoinOptions::default())?;
    print_join("Inner-join", &inner, a, b);
    // ModernGPU's order: left/inner rows by A, then unmatched B rows.
    let mut outer = reference::join(&ka, &kb, JoinType::Full, JoinOptions::default())?;
    outer.sort_by_key(|&(l, r)| (l.is_none(), l, r));
    print_join("Outer-join", &outer, a, b);
    let (kl, kr) = (vectors::i32_keys(&vectors::INTERLEAVE_L_KEYS), vectors::i32_keys(&vectors::INTERLEAVE_R_KEYS));
    let left = reference::join(&kl, &kr, JoinType::Left, JoinOptions::default())?;
    print_interleave(&left);
    Ok(())
}

fn main() -> ExitCode {
    match Device::new(0) {
        Ok(device) => match gpu_demo(&device) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gpujoin demo failed on the GPU: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            println!("NOTICE: no GPU available ({e}).");
            println!("NOTICE: showing the CPU reference's results instead; nothing below ran on a GPU.\n");
            match cpu_demo() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("gpujoin demo (CPU reference) failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
