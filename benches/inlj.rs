//! Indexed nested-loop join benchmarks (seed 003, algorithm 2), group `nested_loop`. Each case
//! times the whole join: index build (sort) + probe (binary search, counts, scan) + gather maps.
//! - `inlj_u32_2p20`: index over 2^20 unique shuffled `u32` keys, probed by 2^20 foreign keys
//!   drawn uniformly from them (every probe row matches once: 2^20 output rows);
//! - `inlj_utf8_2p20`: the same keys as strings of 8 to 24 bytes: `"key"` and the key in decimal,
//!   zero-padded to 5..21 digits (so many strings share long prefixes).
//!
//! Through the front door's build-once, probe-many index (`plan::JoinIndex::build` on the indexed
//! table's key column, then `probe` with the other table's, inner, no column selected) over
//! uploaded one-column tables (`UInt32`, `Utf8`): the string index compares the strings
//! themselves. (`plan::Join` with `Algorithm::IndexedNestedLoop` joins string keys as their dense
//! ranks instead, another workload.)
//!
//! Byte floor: both key columns read once (values, or 8-byte offsets and bytes) plus the two
//! output maps written once. After each case a line gives the probe alone (index built once,
//! reused), rows per second and the output rows.

mod common;

use common::{time_ms, Harness};
use gpujoin::device::Stream;
use gpujoin::join::plan::JoinIndex;
use gpujoin::join::table::{HostColumn, HostTable, Table};
use gpujoin::join::JoinType;
use gpujoin_testkit::datagen;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const GROUP: &str = "nested_loop";

fn key_string(k: u32) -> String {
    format!("key{:0w$}", k, w = 5 + (k % 17) as usize)
}

/// One key column `k` and its bytes for the floor (values; strings as 8-byte offsets and bytes).
struct Keys {
    column: HostColumn,
    bytes: u64,
}

impl Keys {
    fn u32(v: &[u32]) -> Keys {
        Keys { column: HostColumn::from_values(v.to_vec()), bytes: v.len() as u64 * 4 }
    }

    fn utf8(v: &[u32]) -> Keys {
        let strings: Vec<String> = v.iter().map(|&k| key_string(k)).collect();
        let bytes = ((strings.len() + 1) * 8 + strings.iter().map(String::len).sum::<usize>()) as u64;
        Keys { column: HostColumn::utf8(&strings), bytes }
    }
}

fn inlj_case(h: &mut Harness, s: &Stream, case: &str, index_keys: Keys, probe_keys: Keys) {
    let upload = |k: Keys| Table::upload(s, &HostTable::new(vec![("k", k.column)]).unwrap()).unwrap();
    let (index_bytes, probe_bytes) = (index_keys.bytes, probe_keys.bytes);
    let (dx, dp) = (upload(index_keys), upload(probe_keys));
    let probe = |index: &JoinIndex<'_>, s: &Stream| index.probe(s, &dp, "k", JoinType::Inner, &[], &[]).unwrap();
    let rows = probe(&JoinIndex::build(s, &dx, "k").unwrap(), s).rows;
    let bytes = index_bytes + probe_bytes + rows * 8;
    let elements = (dx.rows() + dp.rows()) as u64;
    h.case(GROUP, case, bytes, elements, |s| {
        let index = JoinIndex::build(s, &dx, "k").unwrap();
        let out = probe(&index, s);
        assert_eq!(out.rows, rows);
    });
    let index = JoinIndex::build(s, &dx, "k").unwrap();
    let probe_ms = time_ms(s, 2, 10, || {
        probe(&index, s);
    });
    let build_ms = time_ms(s, 2, 10, || {
        JoinIndex::build(s, &dx, "k").unwrap();
    });
    println!(
        "INFO {GROUP}/{case}: {rows} output rows; build alone {build_ms:.3} ms, probe + maps alone {probe_ms:.3} ms ({:.1} M probe rows/s)",
        dp.rows() as f64 / (probe_ms * 1e3)
    );
}

fn main() {
    let Some(mut h) = Harness::new("inlj") else { return };
    let s = h.stream.clone();
    let n = 1usize << 20;
    let index_keys = datagen::shuffled_dense_keys(n, 31).unwrap();
    let mut rng = StdRng::seed_from_u64(32);
    let probe_keys: Vec<u32> = (0..n).map(|_| rng.gen_range(0..n as u32)).collect();

    inlj_case(&mut h, &s, "inlj_u32_2p20", Keys::u32(&index_keys), Keys::u32(&probe_keys));
    inlj_case(&mut h, &s, "inlj_utf8_2p20", Keys::utf8(&index_keys), Keys::utf8(&probe_keys));
}
