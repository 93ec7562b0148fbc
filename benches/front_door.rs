//! The front door (`plan::Join` over `table::Table`) against the algorithms called directly on
//! the same data, so its cost shows: key preparation, materialization of Arrow columns, checks.
//! Group `front_door`:
//! - `narrow_4b4b_auto` / `narrow_4b4b_wide_auto`: PK-FK 2^26 x 2^27 `u32` keys, one `u32`
//!   payload a side, through `Join` (Auto) and through `wide::join` (Auto) — `paper_pkfk`'s
//!   `narrow_4b4b` row;
//! - `maps_phj_um` / `maps_phj_um_direct`: the same keys, maps only, `PartitionedHash` through
//!   `Join` and `partitioned_hash_join` directly;
//! - STATS lines: the calls into C and the host waits of one `narrow_4b4b_auto` join and of a
//!   plain 1000 x 1000 `u32` join with one payload a side (`gpujoin_device::counts`);
//! - `utf8_2p22_x_2p23`: PK-FK string keys (`"key-<n>"`), 2^22 x 2^23 rows, maps only (the
//!   strings' dense ranks, then the hash join).
//! - `aggregate_m2m_sum` / `aggregate_m2m_maps_gather`: a many-to-many join, 2^20 x 2^20 `u32`
//!   keys of 2^14 values (64 rows a key a side: 2^26 output rows), SUM of a right `i64` column:
//!   `Join::aggregate` (match counts, no pairs) against the maps path it replaced for equi-joins
//!   (SMJ-UM's maps and the column gathered through them, 1 GiB; the old path then also copied the
//!   gathered column to the host and folded it there, which this row leaves out).

mod common;

use common::{Harness, WideSide};
use gpujoin::join::plan::{Algorithm, Gather, Join};
use gpujoin::join::table::{HostColumn, HostTable, Table};
use gpujoin::join::theta::{Agg, AggValue};
use gpujoin::join::Side;
use gpujoin::join::table::TableView;
use gpujoin::join::wide::{self, WideJoinOptions};
use gpujoin::join::{partitioned_hash_join, JoinOptions, JoinType};
use gpujoin_testkit::datagen;

const GROUP: &str = "front_door";

fn main() {
    let Some(mut h) = Harness::new("front door") else { return };
    let s = h.stream.clone();
    let (nr, ns) = (1usize << 26, 1usize << 27);
    let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 11).generate().unwrap();
    let floor = ((nr + ns) * 8 + ns * 2 * 4) as u64;
    {
        let rt = Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(r.clone())), ("p", HostColumn::from_values(r.clone()))]).unwrap()).unwrap();
        let ft = Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(f.clone())), ("p", HostColumn::from_values(f.clone()))]).unwrap()).unwrap();
        let join = Join::new(JoinType::Inner).on(&rt, &["k"], &ft, &["k"]).select(&["p"], &["p"]);
        h.case(GROUP, "narrow_4b4b_auto", floor, (nr + ns) as u64, |s| {
            assert_eq!(join.run(s).unwrap().rows, ns as u64);
        });
        let before = gpujoin::device::counts::call_counts();
        let out = join.run(&s).unwrap();
        let calls = gpujoin::device::counts::call_counts().since(before);
        println!("STATS {GROUP}/narrow_4b4b_auto: {} because {}", out.algorithm.name(), out.reason);
        println!("STATS {GROUP}/narrow_4b4b_auto: {} calls into C, {} host waits for the device (one join, its output materialized)", calls.c_calls, calls.host_waits);
        drop(out);
        // The smallest plain join: u32 keys and one u32 payload a side, 1000 x 1000 rows.
        let small = |n: u32| Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values((0..n).collect::<Vec<u32>>())), ("p", HostColumn::from_values((0..n).collect::<Vec<u32>>()))]).unwrap()).unwrap();
        let (a, b) = (small(1000), small(1000));
        let plain = Join::new(JoinType::Inner).on(&a, &["k"], &b, &["k"]).select(&["p"], &["p"]);
        plain.run(&s).unwrap();
        let before = gpujoin::device::counts::call_counts();
        let out = plain.run(&s).unwrap();
        let calls = gpujoin::device::counts::call_counts().since(before);
        println!("STATS {GROUP}/plain_u32_one_payload_1000: {} calls into C, {} host waits ({} because {})", calls.c_calls, calls.host_waits, out.algorithm.name(), out.reason);
        let maps = Join::new(JoinType::Inner).on(&rt, &["k"], &ft, &["k"]).algorithm(Algorithm::PartitionedHash(Gather::Unclustered));
        h.case(GROUP, "maps_phj_um", ((nr + ns) * 4 + ns * 8) as u64, (nr + ns) as u64, |s| {
            assert_eq!(maps.run(s).unwrap().rows, ns as u64);
        });
    }
    {
        let (rk, fk) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
        let (rp, fp) = (s.copy_from_host(&r).unwrap(), s.copy_from_host(&f).unwrap());
        let rw = WideSide::new(TableView::single(rk.view()), vec![rp.view().into()]);
        let fw = WideSide::new(TableView::single(fk.view()), vec![fp.view().into()]);
        h.case(GROUP, "narrow_4b4b_wide_auto", floor, (nr + ns) as u64, |s| {
            assert_eq!(wide::join(s, rw.pair(), fw.pair(), JoinType::Inner, wide::Algorithm::Auto, WideJoinOptions::default()).unwrap().rows, ns as u64);
        });
        h.case(GROUP, "maps_phj_um_direct", ((nr + ns) * 4 + ns * 8) as u64, (nr + ns) as u64, |s| {
            let out = partitioned_hash_join(s, &TableView::single(rk.view()), &TableView::single(fk.view()), JoinType::Inner, JoinOptions::default()).unwrap();
            assert_eq!(out.maps.rows(), ns as u64);
        });
    }
    drop((r, f));
    {
        let (nr, ns) = (1usize << 22, 1usize << 23);
        let (r, f) = datagen::PkFkWorkload::uniform(nr, ns, 12).generate().unwrap();
        let names = |v: &[u32]| HostColumn::utf8(v.iter().map(|k| format!("key-{k}")));
        let rt = Table::upload(&s, &HostTable::new(vec![("k", names(&r))]).unwrap()).unwrap();
        let ft = Table::upload(&s, &HostTable::new(vec![("k", names(&f))]).unwrap()).unwrap();
        let bytes = (rt.columns()[0].to_host().unwrap().values_buffer().len() + ft.columns()[0].to_host().unwrap().values_buffer().len()) as u64 + ((nr + ns) * 4 + ns * 8) as u64;
        let join = Join::new(JoinType::Inner).on(&rt, &["k"], &ft, &["k"]);
        h.case(GROUP, "utf8_2p22_x_2p23", bytes, (nr + ns) as u64, |s| {
            assert_eq!(join.run(s).unwrap().rows, ns as u64);
        });
    }
    {
        // Many-to-many: key i % 2^14 on the left, (7i) % 2^14 on the right (7 is odd: every key
        // 64 times a side), value i on the right; each right row matches 64 left rows.
        let (n, keys) = (1usize << 20, 1u32 << 14);
        let left = HostTable::new(vec![("k", HostColumn::from_values((0..n as u32).map(|i| i % keys).collect::<Vec<u32>>()))]).unwrap();
        let right = HostTable::new(vec![
            ("k", HostColumn::from_values((0..n as u32).map(|i| i.wrapping_mul(7) % keys).collect::<Vec<u32>>())),
            ("v", HostColumn::from_values((0..n as i64).collect::<Vec<i64>>())),
        ])
        .unwrap();
        let (lt, rt) = (Table::upload(&s, &left).unwrap(), Table::upload(&s, &right).unwrap());
        let out_rows = (n as u64) * 64;
        let want = AggValue::Int(64 * (n as i128) * (n as i128 - 1) / 2);
        let agg = Join::new(JoinType::Inner).on(&lt, &["k"], &rt, &["k"]);
        // Floor: the keys and the column read once.
        h.case(GROUP, "aggregate_m2m_sum", (2 * n * 4 + n * 8) as u64, out_rows, |s| {
            assert_eq!(agg.aggregate(s, Agg::Sum, Some((Side::Right, "v"))).unwrap(), want);
        });
        let maps = Join::new(JoinType::Inner).on(&lt, &["k"], &rt, &["k"]).algorithm(Algorithm::SortMerge(Gather::Unclustered)).select(&[], &["v"]);
        // Floor: the maps written and the column gathered (8 + 8 bytes an output row).
        h.case(GROUP, "aggregate_m2m_maps_gather", out_rows * 16, out_rows, |s| {
            assert_eq!(maps.run(s).unwrap().rows, out_rows);
        });
    }
}
