//! Join benchmarks (issue targets on the H100):
//! - `sorted_merge/{inner,left,right,full}_2p26`: sorted unique keys, 2^26 per side, half of
//!   them matching (ModernGPU 2.x `inner_join`: 1.92 ms; target 1.0 ms);
//! - `sorted_merge/{inner,left,right,full}_2p26_two_pass`, each right after its twin: the same
//!   join counting, then writing (`TestingOptions::two_pass_merge`), as it did before the one
//!   pass (issue 14);
//! - `sorted_merge/{inner,left,right,full}_2p26_any_match`, the same join in the one pass for
//!   keys of any multiplicity (`TestingOptions::any_match_one_pass`), as it ran before the pass
//!   for keys with at most one row on one side;
//! - `sorted_merge/{inner,left,right,full}_2p26_front_door` (issue 9's before/after check), each
//!   right after its twin: the same join of the same keys through the front door
//!   (`plan::Join` over uploaded `UInt32` tables, `Algorithm::SortedMerge` forced, maps only, no
//!   column selected), same byte floor; it adds the front door's checks (two descent counts, read
//!   back) to the merge;
//! - `sorted_merge/fk_left_inner_2p26` (and `_any_match`): 2^26 sorted foreign keys (uniform over
//!   2^25 values) on the left, 2^26 unique keys on the right, every left row matching once: the
//!   rows at the left side's items;
//! - `sorted_merge/late_many_left_2p26` (and `_any_match`): 2^26 unique keys a side but for one
//!   key with two rows on both sides near the end, a left join: the single-match pass runs almost
//!   to the end before it hands over to the pass for any keys (its worst case);
//! - `unsorted/pkfk_inner_r2p26_s2p27_materialized`: |R| = 2^26 shuffled unique keys,
//!   |S| = 2^27 foreign keys, a 4-byte payload each, both payloads gathered;
//! - `interleave/composite3_2p26`: 3-column composite keys, 2^26 rows per side, one match per
//!   row (the interleave paper reports 82.7 ms on its GPU).

mod common;

use common::Harness;
use gpujoin::join::plan::{Algorithm, Join};
use gpujoin::join::table::{HostColumn, HostTable, Table};
use gpujoin::join::table::TableView;
use gpujoin::join::{interleave_join, materialize_unchecked, sort_merge_join, sorted_merge_join, sorted_merge_join_with, JoinOptions, JoinType, TestingOptions};
use gpujoin_testkit::datagen;

/// Runs `f` once with per-phase tracing (GPUJOIN_TRACE) on, so the log shows where time goes.
fn traced(f: impl FnOnce()) {
    std::env::set_var("GPUJOIN_TRACE", "1");
    f();
    std::env::remove_var("GPUJOIN_TRACE");
}

fn main() {
    let Some(mut h) = Harness::new("join benchmarks") else { return };
    let s = h.stream.clone();
    let opts = JoinOptions::default();

    // Sorted-input sort-merge joins: A = 0..2^26, B = 2^25..2^25+2^26 (half of each side matches).
    let n = 1usize << 26;
    let a: Vec<u32> = (0..n as u32).collect();
    let b: Vec<u32> = (n as u32 / 2..n as u32 / 2 + n as u32).collect();
    let (da, db) = (s.copy_from_host(&a).unwrap(), s.copy_from_host(&b).unwrap());
    // The same keys as tables, for the front door's twins.
    let table = |v: &[u32]| Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(v.to_vec()))]).unwrap()).unwrap();
    let (ta, tb) = (table(&a), table(&b));
    drop((a, b));
    traced(|| {
        sorted_merge_join(&s, &da.view(), &db.view(), JoinType::Inner).unwrap();
        sorted_merge_join(&s, &da.view(), &db.view(), JoinType::Full).unwrap();
    });
    for (case, jt, out_rows) in [
        ("inner_2p26", JoinType::Inner, n / 2),
        ("left_2p26", JoinType::Left, n),
        ("right_2p26", JoinType::Right, n),
        ("full_2p26", JoinType::Full, n + n / 2),
    ] {
        let bytes = (2 * n * 4 + out_rows * 8) as u64;
        h.case("sorted_merge", case, bytes, (2 * n) as u64, |s| {
            let m = sorted_merge_join(s, &da.view(), &db.view(), jt).unwrap();
            assert_eq!(m.rows(), out_rows as u64);
        });
        let two_pass = TestingOptions { two_pass_merge: true, ..TestingOptions::DEFAULT };
        h.case("sorted_merge", &format!("{case}_two_pass"), bytes, (2 * n) as u64, |s| {
            let m = sorted_merge_join_with(s, &da.view(), &db.view(), jt, two_pass).unwrap();
            assert_eq!(m.rows(), out_rows as u64);
        });
        let any_match = TestingOptions { any_match_one_pass: true, ..TestingOptions::DEFAULT };
        h.case("sorted_merge", &format!("{case}_any_match"), bytes, (2 * n) as u64, |s| {
            let m = sorted_merge_join_with(s, &da.view(), &db.view(), jt, any_match).unwrap();
            assert_eq!(m.rows(), out_rows as u64);
        });
        let join = Join::new(jt).on(&ta, &["k"], &tb, &["k"]).algorithm(Algorithm::SortedMerge);
        h.case("sorted_merge", &format!("{case}_front_door"), bytes, (2 * n) as u64, |s| {
            let out = join.run(s).unwrap();
            assert_eq!(out.rows, out_rows as u64);
        });
    }
    drop((da, db, ta, tb));

    // The single-match pass at the left side's items, and its worst-case handover.
    let mut fk = datagen::foreign_keys_uniform(n / 2, n, 13).unwrap();
    fk.sort_unstable();
    let pk: Vec<u32> = (0..n as u32).collect();
    let late: Vec<u32> = (0..n as u32).map(|k| if k > n as u32 - 3 { k - 1 } else { k }).collect();
    let any_match = TestingOptions { any_match_one_pass: true, ..TestingOptions::DEFAULT };
    for (case, a, b, jt, out_rows) in [("fk_left_inner_2p26", &fk, &pk, JoinType::Inner, n), ("late_many_left_2p26", &late, &late, JoinType::Left, n + 2)] {
        let (da, db) = (s.copy_from_host(a).unwrap(), s.copy_from_host(b).unwrap());
        let bytes = (2 * n * 4 + out_rows * 8) as u64;
        h.case("sorted_merge", case, bytes, (2 * n) as u64, |s| {
            let m = sorted_merge_join(s, &da.view(), &db.view(), jt).unwrap();
            assert_eq!(m.rows(), out_rows as u64);
        });
        h.case("sorted_merge", &format!("{case}_any_match"), bytes, (2 * n) as u64, |s| {
            let m = sorted_merge_join_with(s, &da.view(), &db.view(), jt, any_match).unwrap();
            assert_eq!(m.rows(), out_rows as u64);
        });
    }
    drop((fk, pk, late));

    // Unsorted PK-FK join with one 4-byte payload per side, output materialized.
    let (nr, ns) = (1usize << 26, 1usize << 27);
    let r_keys = datagen::shuffled_dense_keys(nr, 11).unwrap();
    let s_keys = datagen::foreign_keys_uniform(nr, ns, 12).unwrap();
    let (drk, dsk) = (s.copy_from_host(&r_keys).unwrap(), s.copy_from_host(&s_keys).unwrap());
    let (drp, dsp) = (s.copy_from_host(&r_keys).unwrap(), s.copy_from_host(&s_keys).unwrap()); // payload = key
    drop((r_keys, s_keys));
    // Read keys and payloads once; write two payload columns of |S| rows.
    let bytes = ((nr + ns) * 8 + ns * 8) as u64;
    traced(|| {
        sort_merge_join(&s, &TableView::single(drk.view()), &TableView::single(dsk.view()), JoinType::Inner, opts).unwrap();
    });
    h.case("unsorted", "pkfk_inner_r2p26_s2p27_materialized", bytes, (nr + ns) as u64, |s| {
        let m = sort_merge_join(s, &TableView::single(drk.view()), &TableView::single(dsk.view()), JoinType::Inner, opts).unwrap();
        let (l, r) = (m.left().unwrap(), m.right().unwrap());
        let pr = materialize_unchecked(s, &l, &drp.view(), 0).unwrap();
        let ps = materialize_unchecked(s, &r, &dsp.view(), 0).unwrap();
        assert_eq!(pr.len(), ns);
        drop((pr, ps));
    });
    drop((drk, dsk, drp, dsp));

    // Interleave join on 3-column composite keys (96 bits: hashed, then verified).
    let k = datagen::shuffled_dense_keys(n, 21).unwrap();
    let k2 = datagen::shuffled_dense_keys(n, 22).unwrap();
    let cols = |k: &[u32]| -> Vec<Vec<u32>> {
        vec![k.to_vec(), k.iter().map(|x| x.wrapping_mul(3).wrapping_add(1)).collect(), k.iter().map(|x| x ^ 0x5bd1_e995).collect()]
    };
    let (lc, rc) = (cols(&k), cols(&k2));
    let ld: Vec<_> = lc.iter().map(|c| s.copy_from_host(c).unwrap()).collect();
    let rd: Vec<_> = rc.iter().map(|c| s.copy_from_host(c).unwrap()).collect();
    let lk = TableView::unnamed(ld.iter().map(|b| b.view().into()).collect()).unwrap();
    let rk = TableView::unnamed(rd.iter().map(|b| b.view().into()).collect()).unwrap();
    let bytes = (2 * n * 12 + n * 8) as u64;
    traced(|| {
        interleave_join(&s, &lk, &rk, JoinType::Inner, opts).unwrap();
        sort_merge_join(&s, &lk, &rk, JoinType::Inner, opts).unwrap();
    });
    h.case("interleave", "composite3_2p26", bytes, (2 * n) as u64, |s| {
        let m = interleave_join(s, &lk, &rk, JoinType::Inner, opts).unwrap();
        assert_eq!(m.rows(), n as u64);
    });
    h.case("interleave", "composite3_2p26_sort_merge", bytes, (2 * n) as u64, |s| {
        let m = sort_merge_join(s, &lk, &rk, JoinType::Inner, opts).unwrap();
        assert_eq!(m.rows(), n as u64);
    });
}
