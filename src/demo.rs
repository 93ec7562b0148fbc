//! The seed demonstrations, shared by the `gpujoin-demo` binary (`cargo xtask seeds`) and the
//! tests: ModernGPU's relational-join demonstration (seed 000) in its own format, the interleave
//! join's worked example (seed 001), and the throughput of a 2^24-row join. On the GPU every join
//! runs through the front door (`join::plan::Join` over uploaded one-column tables, the
//! algorithm forced: the sorted merge, the interleave join, SMJ-UM).

use std::fmt::Write;

use crate::device::{Device, Error, Result, Stream, Timer};
use crate::join::plan::{Algorithm, Gather, Join};
use crate::join::table::{HostColumn, HostTable, NativeValue, Table};
use crate::join::{JoinType, NanEquality, NullEquality, RowId};
use gpujoin_testkit::datagen;
use gpujoin_testkit::reference::vectors;
use gpujoin_testkit::table_reference;

macro_rules! wln {
    ($o:expr) => { let _ = writeln!($o); };
    ($o:expr, $($t:tt)*) => { let _ = writeln!($o, $($t)*); };
}

/// Where the demonstration ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    Gpu,
    /// No GPU: the CPU reference produced the joins (the text says so plainly).
    CpuReference,
}

/// Runs the demonstration on device 0, or on the CPU reference when there is no GPU, and returns
/// its text.
pub fn run() -> Result<(Ran, String)> {
    let mut o = String::new();
    match Device::new(0) {
        Ok(device) => {
            gpu_demo(&mut o, &device)?;
            Ok((Ran::Gpu, o))
        }
        Err(e) => {
            wln!(o, "NOTICE: no GPU available ({e}).");
            wln!(o, "NOTICE: showing the CPU reference's results instead; nothing below ran on a GPU.\n");
            cpu_demo(&mut o)?;
            Ok((Ran::CpuReference, o))
        }
    }
}

fn print_keys(o: &mut String, name: &str, keys: &[i32]) {
    wln!(o, "{name} keys:");
    for (row, chunk) in keys.chunks(10).enumerate() {
        let cells: Vec<String> = chunk.iter().map(|k| format!("{k:4}")).collect();
        wln!(o, "{:5}:  {}", row * 10, cells.join(" "));
    }
}

fn print_join(o: &mut String, title: &str, pairs: &[(RowId, RowId)], a: &[i32], b: &[i32]) {
    wln!(o, "\n{title} ({} items):", pairs.len());
    wln!(o, "output   (aIndex, bIndex) : (aKey, bKey)");
    wln!(o, "----------------------------------------");
    let idx = |r: RowId| r.get().map_or(-1, |i| i as i64);
    let key = |r: RowId, k: &[i32]| r.get().map_or("---".to_string(), |i| k[i as usize].to_string());
    for (i, &(l, r)) in pairs.iter().enumerate() {
        wln!(o, "{i:3}      ({:6}, {:6}) : ({:>4}, {:>4})", idx(l), idx(r), key(l, a), key(r, b));
    }
}

fn print_interleave(o: &mut String, pairs: &[(RowId, RowId)]) {
    wln!(o, "\nINTERLEAVE JOIN: L LEFT JOIN R WHERE L.K == R.K ({} rows)", pairs.len());
    wln!(o, "  K    A    B");
    for &(l, r) in pairs {
        let Some(li) = l.get().map(|i| i as usize) else { continue };
        let b = r.get().map_or("null".to_string(), |j| j.to_string());
        wln!(o, "{:3}  {:3}  {:>4}", vectors::INTERLEAVE_L_KEYS[li], li, b);
    }
}

/// One key column `k` on the device.
fn key_table<T: NativeValue>(s: &Stream, keys: Vec<T>) -> Result<Table> {
    Table::upload(s, &HostTable::new(vec![("k", HostColumn::from_values(keys))])?)
}

/// The output pairs of `join` (maps only) by `algorithm`, in its order.
fn pairs(s: &Stream, join: Join<'_>, algorithm: Algorithm) -> Result<Vec<(RowId, RowId)>> {
    let out = join.algorithm(algorithm).run(s)?;
    out.maps.ok_or_else(|| Error::invalid(format!("the {} join returned no gather maps", algorithm.name())))?.pairs()
}

fn gpu_demo(o: &mut String, device: &Device) -> Result<()> {
    let s: Stream = device.new_stream()?;
    let (a, b) = (&vectors::MGPU_A_KEYS[..], &vectors::MGPU_B_KEYS[..]);
    wln!(o, "RELATIONAL JOINS DEMONSTRATION (on {})\n", device.name()?);
    print_keys(o, "A", a);
    wln!(o);
    print_keys(o, "B", b);
    let (ta, tb) = (key_table(&s, a.to_vec())?, key_table(&s, b.to_vec())?);
    let inner = pairs(&s, Join::new(JoinType::Inner).on(&ta, &["k"], &tb, &["k"]), Algorithm::SortedMerge)?;
    print_join(o, "Inner-join", &inner, a, b);
    let outer = pairs(&s, Join::new(JoinType::Full).on(&ta, &["k"], &tb, &["k"]), Algorithm::SortedMerge)?;
    print_join(o, "Outer-join", &outer, a, b);

    let (l, r) = (key_table(&s, vectors::INTERLEAVE_L_KEYS.to_vec())?, key_table(&s, vectors::INTERLEAVE_R_KEYS.to_vec())?);
    let left = pairs(&s, Join::new(JoinType::Left).on(&l, &["k"], &r, &["k"]), Algorithm::Interleave)?;
    print_interleave(o, &left);

    // 2^24 keys a side; 2^16 under GPUJOIN_TEST_SIZE=small (the demo test under compute-sanitizer).
    let bits = gpujoin_device::testing::pick(24u32, 16);
    let n = 1usize << bits;
    let keys_r = datagen::shuffled_dense_keys(n, 1)?;
    let keys_s = datagen::shuffled_dense_keys(n, 2)?;
    let (tr, ts) = (key_table(&s, keys_r)?, key_table(&s, keys_s)?);
    let join = Join::new(JoinType::Inner).on(&tr, &["k"], &ts, &["k"]).algorithm(Algorithm::SortMerge(Gather::Unclustered));
    join.run(&s)?; // warm-up
    let t = Timer::start(&s)?;
    let rows = join.run(&s)?.rows;
    let ms = t.stop(&s)?;
    wln!(o, 
        "\nThroughput: sort_merge_join inner, 2^{bits} x 2^{bits} shuffled unique u32 keys -> {rows} rows in {ms:.2} ms ({:.0} M input rows/s)",
        (2 * n) as f64 / (ms as f64 * 1e3)
    );
    Ok(())
}

fn cpu_demo(o: &mut String) -> Result<()> {
    let (a, b) = (&vectors::MGPU_A_KEYS[..], &vectors::MGPU_B_KEYS[..]);
    let (ka, kb) = (vectors::i32_table(a), vectors::i32_table(b));
    // The reference's pairs as `RowId`s, in canonical order.
    let join = |l: &gpujoin_join::table::HostTable, r: &gpujoin_join::table::HostTable, jt: JoinType| -> Vec<(RowId, RowId)> {
        let rid = |x: Option<u32>| x.map_or(RowId::NONE, |i| RowId::new(i).unwrap_or(RowId::NONE));
        table_reference::equi_join(l, &["k"], r, &["k"], jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan).into_iter().map(|(x, y)| (rid(x), rid(y))).collect()
    };
    wln!(o, "RELATIONAL JOINS DEMONSTRATION (CPU reference)\n");
    print_keys(o, "A", a);
    wln!(o);
    print_keys(o, "B", b);
    let inner = join(&ka, &kb, JoinType::Inner);
    print_join(o, "Inner-join", &inner, a, b);
    // ModernGPU's order: left/inner rows by A, then unmatched B rows.
    let mut outer = join(&ka, &kb, JoinType::Full);
    outer.sort_by_key(|&(l, r)| (l.is_none(), l, r));
    print_join(o, "Outer-join", &outer, a, b);
    let (kl, kr) = (vectors::i32_table(&vectors::INTERLEAVE_L_KEYS), vectors::i32_table(&vectors::INTERLEAVE_R_KEYS));
    let left = join(&kl, &kr, JoinType::Left);
    print_interleave(o, &left);
    Ok(())
}

