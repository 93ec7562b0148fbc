//! Indexed nested-loop join benchmarks (seed 003, algorithm 2), group `nested_loop`. Each case
//! times the whole join: index build (sort) + probe (binary search, counts, scan) + gather maps.
//! - `inlj_u32_2p20`: index over 2^20 unique shuffled `u32` keys, probed by 2^20 foreign keys
//!   drawn uniformly from them (every probe row matches once: 2^20 output rows);
//! - `inlj_utf8_2p20`: the same keys as strings of 8 to 24 bytes: `"key"` and the key in decimal,
//!   zero-padded to 5..21 digits (so many strings share long prefixes).
//!
//! Byte floor: both key columns read once (values, or offsets and bytes) plus the two output maps
//! written once. After each case a line gives the probe alone (index built once, reused), rows
//! per second and the output rows.

mod common;

use common::{time_ms, Harness};
use gpujoin::device::Stream;
use gpujoin::join::device_relation::DeviceColumnData;
use gpujoin::join::indexed_nested_loop::SortedIndex;
use gpujoin::join::predicate::ColumnData;
use gpujoin::join::{JoinType, Side};
use gpujoin_testkit::datagen;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const GROUP: &str = "nested_loop";

fn key_string(k: u32) -> String {
    format!("key{:0w$}", k, w = 5 + (k % 17) as usize)
}

fn column_bytes(c: &ColumnData) -> u64 {
    match c {
        ColumnData::Utf8 { offsets, bytes } => (offsets.len() * 8 + bytes.len()) as u64,
        ColumnData::U32(v) => v.len() as u64 * 4,
        _ => unreachable!("the benchmark uses u32 and utf8 columns"),
    }
}

fn inlj_case(h: &mut Harness, s: &Stream, case: &str, index_col: &ColumnData, probe_col: &ColumnData) {
    let (dx, dp) = (DeviceColumnData::upload(s, index_col).unwrap(), DeviceColumnData::upload(s, probe_col).unwrap());
    let rows = SortedIndex::build(s, &dx).unwrap().join(s, &dp, Side::Left, JoinType::Inner).unwrap().rows();
    let bytes = column_bytes(index_col) + column_bytes(probe_col) + rows * 8;
    let elements = (index_col.len() + probe_col.len()) as u64;
    h.case(GROUP, case, bytes, elements, |s| {
        let index = SortedIndex::build(s, &dx).unwrap();
        let maps = index.join(s, &dp, Side::Left, JoinType::Inner).unwrap();
        assert_eq!(maps.rows(), rows);
    });
    let index = SortedIndex::build(s, &dx).unwrap();
    let probe_ms = time_ms(s, 2, 10, || {
        index.join(s, &dp, Side::Left, JoinType::Inner).unwrap();
    });
    let build_ms = time_ms(s, 2, 10, || {
        SortedIndex::build(s, &dx).unwrap();
    });
    println!(
        "INFO {GROUP}/{case}: {rows} output rows; build alone {build_ms:.3} ms, probe + maps alone {probe_ms:.3} ms ({:.1} M probe rows/s)",
        probe_col.len() as f64 / (probe_ms * 1e3)
    );
}

fn main() {
    let Some(mut h) = Harness::new("inlj") else { return };
    let s = h.stream.clone();
    let n = 1usize << 20;
    let index_keys = datagen::shuffled_dense_keys(n, 31).unwrap();
    let mut rng = StdRng::seed_from_u64(32);
    let probe_keys: Vec<u32> = (0..n).map(|_| rng.gen_range(0..n as u32)).collect();

    inlj_case(&mut h, &s, "inlj_u32_2p20", &ColumnData::U32(index_keys.clone()), &ColumnData::U32(probe_keys.clone()));

    let strings = |keys: &[u32]| ColumnData::utf8(keys.iter().map(|&k| key_string(k)));
    inlj_case(&mut h, &s, "inlj_utf8_2p20", &strings(&index_keys), &strings(&probe_keys));
}
