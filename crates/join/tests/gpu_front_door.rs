//! The front door (`plan::Join` over `table::Table`) against a CPU reference on host tables:
//! every key type x every join type x Auto and every explicit algorithm x NULLs under both
//! equalities x NaN under both, plus `count` and `chunks` (budgets below one row's output),
//! strings (empty, over 64 KiB, non-ASCII, differing only in the last byte, all equal), sliced
//! inputs with a non-zero bit offset, and typed errors for bad input.
//!
//! Under `GPUJOIN_TEST_SIZE=small` (compute-sanitizer) each test keeps a rotating sample of its
//! cases ([`Sample`]: one in a test's stride, about 50-80 join runs a test) and smaller inputs.

use gpujoin_device::testing::{device_or_skip, pick, rows, Sample};
use gpujoin_device::{Error, Stream};
use gpujoin_join::chunked::ChunkBudget;
use gpujoin_join::plan::{Algorithm, Gather, Join};
use gpujoin_join::table::{DataType, HostColumn, HostTable, Table, TimeUnit, Value};
use gpujoin_join::{JoinType, NanEquality, NullEquality, RowId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

// ---- The CPU reference (gpujoin_testkit::table_reference) -------------------------------------

use gpujoin_testkit::table_reference;

fn reference(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], jt: JoinType, nulls: NullEquality, nans: NanEquality) -> Vec<(Option<u32>, Option<u32>)> {
    table_reference::join(l, lk, r, rk, None, jt, nulls, nans)
}

fn reference_filtered(l: &HostTable, lk: &[&str], r: &HostTable, rk: &[&str], pred: &Predicate, jt: JoinType, nulls: NullEquality) -> Vec<(Option<u32>, Option<u32>)> {
    table_reference::join(l, lk, r, rk, Some(pred), jt, nulls, NanEquality::NanEqualsNan)
}

fn from_maps(l: &[RowId], r: &[RowId]) -> Vec<(Option<u32>, Option<u32>)> {
    let n = l.len().max(r.len());
    let mut v: Vec<_> = (0..n).map(|k| (l.get(k).and_then(|x| x.get()), r.get(k).and_then(|x| x.get()))).collect();
    v.sort();
    v
}

fn tuples(t: &HostTable) -> Vec<String> {
    table_reference::rows_of_table(t)
}

fn expected_tuples(pairs: &[(Option<u32>, Option<u32>)], l: &HostTable, ls: &[&str], r: &HostTable, rs: &[&str]) -> Vec<String> {
    table_reference::rows_of_pairs(pairs, l, ls, r, rs)
}

// ---- Generators ---------------------------------------------------------------------------------

/// A key column of `t` with `n` rows drawn from a small domain (so keys repeat and match), nulls
/// at `null_pct` percent; floats include NaN, -0.0 and 0.0.
fn key_column(rng: &mut StdRng, t: DataType, n: usize, domain: i64, null_pct: u32, sorted: bool) -> HostColumn {
    let mut ints: Vec<i64> = (0..n).map(|_| rng.gen_range(0..domain.max(1))).collect();
    if sorted {
        ints.sort();
    }
    let valid: Vec<bool> = (0..n).map(|_| rng.gen_range(0..100) >= null_pct).collect();
    let col = match t {
        DataType::Int8 => HostColumn::from_values(ints.iter().map(|&x| (x - domain / 2) as i8).collect()),
        DataType::Int16 => HostColumn::from_values(ints.iter().map(|&x| (x * 300 - 5000) as i16).collect()),
        DataType::Int32 => HostColumn::from_values(ints.iter().map(|&x| (x - domain / 2) as i32).collect()),
        DataType::Int64 => HostColumn::from_values(ints.iter().map(|&x| (x - domain / 2) * (1 << 40)).collect()),
        DataType::UInt8 => HostColumn::from_values(ints.iter().map(|&x| x as u8).collect()),
        DataType::UInt16 => HostColumn::from_values(ints.iter().map(|&x| (x * 1000) as u16).collect()),
        DataType::UInt32 => HostColumn::from_values(ints.iter().map(|&x| x as u32 * 65_537).collect()),
        DataType::UInt64 => HostColumn::from_values(ints.iter().map(|&x| x as u64 * (1 << 50)).collect()),
        DataType::Float32 | DataType::Float64 => {
            let f = |x: i64| match x % 7 {
                0 => f64::NAN,
                1 => -0.0,
                2 => 0.0,
                3 => -f64::NAN,
                _ => x as f64 * 0.5 - 3.0,
            };
            if t == DataType::Float32 {
                HostColumn::from_values(ints.iter().map(|&x| f(x) as f32).collect())
            } else {
                HostColumn::from_values(ints.iter().map(|&x| f(x)).collect())
            }
        }
        DataType::Boolean => HostColumn::from_bools(&ints.iter().map(|&x| x % 2 == 1).collect::<Vec<_>>()),
        DataType::Date32 => HostColumn::from_values(ints.iter().map(|&x| 19_000 + x as i32).collect()).with_type(t).unwrap(),
        DataType::Date64 | DataType::Timestamp(_) => HostColumn::from_values(ints.iter().map(|&x| 1_700_000_000_000 + x * 86_400_000).collect()).with_type(t).unwrap(),
        DataType::Decimal128(..) => HostColumn::from_values(ints.iter().map(|&x| (x as i128 - domain as i128 / 2) * (1i128 << 70) + 7).collect()).with_type(t).unwrap(),
        DataType::Utf8 | DataType::LargeUtf8 => {
            let s = |x: i64| match x % 6 {
                0 => String::new(),
                1 => "é".repeat(x as usize % 5 + 1),
                2 => format!("{}{}", "k".repeat(40), x),     // differ only in the last bytes
                3 => format!("key-{x}"),
                4 => format!("key-{x}\u{0}"),                 // a trailing NUL: not equal to key-x
                _ => format!("日本{x}"),
            };
            let vals: Vec<Option<String>> = ints.iter().map(|&x| Some(s(x))).collect();
            if t == DataType::Utf8 {
                HostColumn::utf8_options(vals)
            } else {
                HostColumn::large_utf8_options(vals)
            }
        }
    };
    if null_pct > 0 {
        col.with_validity(&valid).unwrap()
    } else {
        col
    }
}

fn payload(rng: &mut StdRng, t: DataType, n: usize) -> HostColumn {
    key_column(rng, t, n, 1000, 10, false)
}

fn stream(test: &str) -> Option<Stream> {
    device_or_skip(test).map(|d| d.new_stream().expect("stream"))
}

fn algorithms() -> Vec<Algorithm> {
    let mut v = vec![Algorithm::Auto];
    v.extend(Algorithm::EXPLICIT);
    v
}

/// Runs one case through `run`, and checks maps, materialized columns and `count`.
#[allow(clippy::too_many_arguments)]
fn check(s: &Stream, lt: &Table, ht_l: &HostTable, rt: &Table, ht_r: &HostTable, jt: JoinType, alg: Algorithm, nulls: NullEquality, nans: NanEquality, want: &[(Option<u32>, Option<u32>)], what: &str) -> Result<bool, String> {
    let (ls, rs): (Vec<&str>, Vec<&str>) = match jt {
        JoinType::LeftSemi | JoinType::LeftAnti => (vec!["p", "k"], vec![]),
        JoinType::RightSemi | JoinType::RightAnti => (vec![], vec!["p", "k"]),
        _ => (vec!["p", "k"], vec!["p"]),
    };
    let join = Join::new(jt).on(lt, &["k"], rt, &["k"]).null_equality(nulls).nan_equality(nans).algorithm(alg).select(&ls, &rs);
    let out = match join.run(s) {
        Ok(o) => o,
        Err(Error::Unsupported { what: w, reason }) => {
            // Every equi-join algorithm but the sorted merge (integer keys only) takes every key
            // type; the theta paths refuse shapes they cannot take.
            if alg != Algorithm::SortedMerge && !alg.is_theta() {
                return Err(format!("{what}: {} refused: {w}: {reason}", alg.name()));
            }
            return Ok(false);
        }
        Err(e) => return Err(format!("{what}: {}: {e}", alg.name())),
    };
    if alg != Algorithm::Auto && out.algorithm != alg {
        return Err(format!("{what}: asked for {}, ran {}", alg.name(), out.algorithm.name()));
    }
    if out.rows != want.len() as u64 {
        return Err(format!("{what}: {} ({}): {} rows, expected {}", alg.name(), out.reason, out.rows, want.len()));
    }
    if let Some(m) = &out.maps {
        let (l, r) = m.to_host().map_err(|e| e.to_string())?;
        let got = from_maps(&l, &r);
        if got != *want {
            return Err(format!("{what}: {}: pairs differ: got {:?}, want {:?}", alg.name(), &got[..got.len().min(8)], &want[..want.len().min(8)]));
        }
    }
    let table = out.table.to_host().map_err(|e| e.to_string())?;
    let rs_names: Vec<String> = rs.iter().map(|n| if ls.contains(n) { format!("right.{n}") } else { n.to_string() }).collect();
    let ls_names: Vec<String> = ls.iter().map(|n| if rs.contains(n) { format!("left.{n}") } else { n.to_string() }).collect();
    let names: Vec<String> = ls_names.into_iter().chain(rs_names).collect();
    if table.names() != names.as_slice() {
        return Err(format!("{what}: output names {:?}, expected {names:?}", table.names()));
    }
    let (got, exp) = (tuples(&table), expected_tuples(want, ht_l, &ls, ht_r, &rs));
    if got != exp {
        return Err(format!("{what}: {}: materialized rows differ: got {:?}, want {:?}", alg.name(), &got[..got.len().min(4)], &exp[..exp.len().min(4)]));
    }
    let count = join.count(s).map_err(|e| e.to_string())?;
    if count != want.len() as u64 {
        return Err(format!("{what}: count {count}, expected {}", want.len()));
    }
    Ok(true)
}

#[test]
fn every_type_join_type_algorithm_and_equality() {
    let Some(s) = stream("every_type_join_type_algorithm_and_equality") else { return };
    let mut rng = StdRng::seed_from_u64(9);
    let mut ran = 0;
    let mut refused = 0;
    let mut failures = Vec::new();
    let mut sample = Sample::new(227);
    for t in DataType::EXAMPLES {
        for (null_pct, sizes) in [(0u32, (0usize, 1usize)), (0, (1, 0)), (15, (37, 51)), (0, (200, 333)), (10, (1500, 700))] {
            for sorted in [false, true] {
                let (nl, nr) = sizes;
                let domain = (nl.max(nr) as i64 / 3).max(2);
                let hl = HostTable::new(vec![("k", key_column(&mut rng, t, nl, domain, null_pct, sorted)), ("p", payload(&mut rng, DataType::Int64, nl))]).unwrap();
                let hr = HostTable::new(vec![("k", key_column(&mut rng, t, nr, domain, null_pct, sorted)), ("p", payload(&mut rng, DataType::Utf8, nr))]).unwrap();
                let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
                for jt in JoinType::ALL {
                    for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                        for nans in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
                            if (nulls == NullEquality::NullEqualsNull && null_pct == 0) || (nans == NanEquality::NanNeverEqual && !t.is_float()) {
                                continue;
                            }
                            let want = reference(&hl, &["k"], &hr, &["k"], jt, nulls, nans);
                            for alg in algorithms() {
                                if sorted != (alg == Algorithm::SortedMerge) || !sample.take() {
                                    continue;
                                }
                                let what = format!("{t} {nl}x{nr} nulls {null_pct}% {jt:?} {nulls:?} {nans:?}");
                                match check(&s, &lt, &hl, &rt, &hr, jt, alg, nulls, nans, &want, &what) {
                                    Ok(true) => ran += 1,
                                    Ok(false) => refused += 1,
                                    Err(e) => failures.push(e),
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    println!("{ran} cases ran, {refused} refused with Unsupported, {} failed", failures.len());
    assert!(failures.is_empty(), "{} failures, first ones:\n{}", failures.len(), failures[..failures.len().min(20)].join("\n"));
    assert!(ran > pick(1000, 15), "only {ran} cases ran");
}

#[test]
fn composite_keys_of_mixed_types_and_chunks() {
    let Some(s) = stream("composite_keys_of_mixed_types_and_chunks") else { return };
    let mut rng = StdRng::seed_from_u64(11);
    let mut sample = Sample::new(7);
    for (n, null_pct) in [(0usize, 0u32), (1, 0), (257, 10), (1500, 5)] {
        let mk = |rng: &mut StdRng| {
            HostTable::new(vec![
                ("a", key_column(rng, DataType::Utf8, n, 4, null_pct, false)),
                ("b", key_column(rng, DataType::Int16, n, 3, null_pct, false)),
                ("c", key_column(rng, DataType::Float64, n, 5, 0, false)),
                ("p", payload(rng, DataType::Boolean, n)),
            ])
            .unwrap()
        };
        let (hl, hr) = (mk(&mut rng), mk(&mut rng));
        let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
        for jt in JoinType::ALL {
            for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                let keys = ["a", "b", "c"];
                let want = reference(&hl, &keys, &hr, &keys, jt, nulls, NanEquality::NanEqualsNan);
                let algs = [Algorithm::Auto, Algorithm::SortMerge(Gather::Unclustered), Algorithm::Interleave, Algorithm::Hash, Algorithm::PartitionedHash(Gather::Unclustered)];
                for alg in algs {
                    if !sample.take() {
                        continue;
                    }
                    let out = Join::new(jt).on(&lt, &keys, &rt, &keys).null_equality(nulls).algorithm(alg).run(&s).unwrap();
                    let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                    assert_eq!(from_maps(&l, &r), want, "{n} rows {jt:?} {nulls:?} via {}", out.algorithm.name());
                }
                let join = Join::new(jt).on(&lt, &keys, &rt, &keys).null_equality(nulls);
                if !sample.take() {
                    continue;
                }
                assert_eq!(join.count(&s).unwrap(), want.len() as u64);
                // Chunks of a budget below one row's output (one row a chunk; small: for outputs
                // of at most 64 rows), or of 64 KiB.
                let budget = if n <= 257 && want.len() <= pick(usize::MAX, 64) { ChunkBudget::Bytes(1) } else { ChunkBudget::Bytes(64 << 10) };
                let mut got = Vec::new();
                for chunk in join.chunks(&s, budget).unwrap().take(100_000) {
                    let (l, r) = chunk.unwrap().data.to_host().unwrap();
                    got.extend(from_maps(&l, &r));
                }
                got.sort();
                assert_eq!(got, want, "chunks: {n} rows {jt:?} {nulls:?}");
            }
        }
    }
}

#[test]
fn strings_long_equal_and_sliced() {
    let Some(s) = stream("strings_long_equal_and_sliced") else { return };
    let long = "x".repeat(70 * 1024);
    let mut long_b = long.clone();
    long_b.push('y');
    let mut long_c = long.clone();
    long_c.push('z');
    let left = HostColumn::utf8_options([Some(""), Some(long_b.as_str()), Some("same"), Some("é"), None, Some(long_c.as_str()), Some("e")]);
    let right = HostColumn::utf8_options([Some(long_b.as_str()), Some(""), None, Some("same"), Some("é"), Some("same")]);
    let hl = HostTable::new(vec![("k", left.clone()), ("v", left)]).unwrap();
    let hr = HostTable::new(vec![("k", right.clone()), ("v", right)]).unwrap();
    let mut sample = Sample::new(5);
    // Slices with a non-zero offset (the validity then starts at a bit offset).
    for (lo, ro) in [(0usize, 0usize), (1, 2), (3, 1)] {
        let (hl, hr) = (hl.slice(lo, hl.rows() - lo).unwrap(), hr.slice(ro, hr.rows() - ro).unwrap());
        let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
        for jt in JoinType::ALL {
            for alg in algorithms() {
                if !sample.take() {
                    continue;
                }
                let what = format!("offsets {lo}/{ro}");
                if let Err(e) = check_strings(&s, &lt, &hl, &rt, &hr, jt, alg, &what) {
                    panic!("{e}");
                }
            }
        }
        // Views sliced on the device as well.
        let (lv, rv) = (lt.view().slice(1, hl.rows() - 1).unwrap(), rt.view().slice(0, hr.rows()).unwrap());
        let want = reference(&hl.slice(1, hl.rows() - 1).unwrap(), &["k"], &hr, &["k"], JoinType::Full, NullEquality::NullEqualsNull, NanEquality::NanEqualsNan);
        let out = Join::new(JoinType::Full).on(lv, &["k"], rv, &["k"]).null_equality(NullEquality::NullEqualsNull).run(&s).unwrap();
        let (l, r) = out.maps.unwrap().to_host().unwrap();
        assert_eq!(from_maps(&l, &r), want);
    }
    // All-equal strings: the Cartesian product.
    let n = 300;
    let hl = HostTable::new(vec![("k", HostColumn::utf8(vec!["same"; n]))]).unwrap();
    let lt = Table::upload(&s, &hl).unwrap();
    for alg in algorithms().into_iter().filter(|a| !matches!(a, Algorithm::SortedMerge | Algorithm::ThetaSorted | Algorithm::ThetaMixed)) {
        if !sample.take() {
            continue;
        }
        let out = Join::new(JoinType::Inner).on(&lt, &["k"], &lt, &["k"]).algorithm(alg).run(&s).unwrap();
        assert_eq!(out.rows, (n * n) as u64, "{}", alg.name());
    }
}

#[allow(clippy::too_many_arguments)]
fn check_strings(s: &Stream, lt: &Table, hl: &HostTable, rt: &Table, hr: &HostTable, jt: JoinType, alg: Algorithm, what: &str) -> Result<(), String> {
    let (ls, rs): (Vec<&str>, Vec<&str>) = match jt {
        JoinType::LeftSemi | JoinType::LeftAnti => (vec!["v"], vec![]),
        JoinType::RightSemi | JoinType::RightAnti => (vec![], vec!["v"]),
        _ => (vec!["v"], vec!["v"]),
    };
    let want = reference(hl, &["k"], hr, &["k"], jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
    let out = match Join::new(jt).on(lt, &["k"], rt, &["k"]).algorithm(alg).select(&ls, &rs).run(s) {
        Ok(o) => o,
        // The sorted merge takes no strings; the sorted and mixed theta paths refuse predicate
        // shapes they cannot take (the clustered gathers and the indexed nested loop take
        // nullable string keys, as ranks where they must).
        Err(Error::Unsupported { .. }) if matches!(alg, Algorithm::SortedMerge | Algorithm::ThetaSorted | Algorithm::ThetaMixed) => return Ok(()),
        Err(e) => return Err(format!("{what} {jt:?} {}: {e}", alg.name())),
    };
    let table = out.table.to_host().map_err(|e| e.to_string())?;
    let (got, exp) = (tuples(&table), expected_tuples(&want, hl, &ls, hr, &rs));
    if got.len() != exp.len() || got != exp {
        return Err(format!("{what} {jt:?} {}: {} rows, expected {}", alg.name(), got.len(), exp.len()));
    }
    Ok(())
}

#[test]
fn bad_input_is_a_typed_error() {
    let Some(s) = stream("bad_input_is_a_typed_error") else { return };
    let a = Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(vec![1i32, 2])), ("f", HostColumn::from_values(vec![1.0f64, 2.0]))]).unwrap()).unwrap();
    let b = Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(vec![1i64])), ("s", HostColumn::utf8(["x"]))]).unwrap()).unwrap();
    let err = |j: Join<'_>| j.run(&s).err().expect("an error");
    assert!(matches!(err(Join::new(JoinType::Inner).on(&a, &["nope"], &b, &["k"])), Error::UnknownColumn { .. }));
    assert!(matches!(err(Join::new(JoinType::Inner).on(&a, &["k"], &b, &["k"])), Error::TypeMismatch { .. }));
    assert!(matches!(err(Join::new(JoinType::Inner).on(&a, &["k"], &b, &["s"])), Error::TypeMismatch { .. }));
    assert!(matches!(err(Join::new(JoinType::Inner).on(&a, &["k", "f"], &b, &["k"])), Error::InvalidArgument(_)));
    assert!(matches!(err(Join::new(JoinType::LeftSemi).on(&a, &["k"], &a, &["k"]).select(&[], &["f"])), Error::InvalidArgument(_)));
    assert!(matches!(err(Join::new(JoinType::Inner).on(&a, &["f"], &a, &["f"]).algorithm(Algorithm::SortedMerge)), Error::Unsupported { .. }));
    // The clustered gathers take every payload (strings by row id); keys wider than 64 bits
    // are joined as ranks, and the reason names the key columns.
    assert_eq!(Join::new(JoinType::Inner).on(&b, &["s"], &b, &["s"]).select(&["s"], &[]).algorithm(Algorithm::PartitionedHash(Gather::Clustered)).run(&s).unwrap().rows, 1);
    let out = Join::new(JoinType::Inner).on(&a, &["k", "f"], &a, &["k", "f"]).select(&["f"], &[]).algorithm(Algorithm::SortMerge(Gather::Clustered)).run(&s).unwrap();
    assert_eq!(out.rows, 2);
    assert!(out.reason.contains("ranks") && out.reason.contains("k (Int32)") && out.reason.contains("f (Float64)") && out.reason.contains("96 bits"), "{}", out.reason);
    // Unsorted input to the sorted merge: refused, not answered wrongly.
    let u = Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(vec![3u32, 1, 2]))]).unwrap()).unwrap();
    assert!(matches!(err(Join::new(JoinType::Inner).on(&u, &["k"], &u, &["k"]).algorithm(Algorithm::SortedMerge)), Error::Unsupported { .. }));
    // Nullable keys in the indexed nested loop, under both NULL equalities.
    let n = Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_options(vec![Some(1i32), None, Some(1)]))]).unwrap()).unwrap();
    let inlj = |e: NullEquality| Join::new(JoinType::Full).on(&n, &["k"], &n, &["k"]).algorithm(Algorithm::IndexedNestedLoop).null_equality(e);
    let out = inlj(NullEquality::NullEqualsNull).run(&s).unwrap();
    let (l, r) = out.maps.unwrap().to_host().unwrap();
    let want = reference(&n.to_host().unwrap(), &["k"], &n.to_host().unwrap(), &["k"], JoinType::Full, NullEquality::NullEqualsNull, NanEquality::NanEqualsNan);
    assert_eq!(from_maps(&l, &r), want);
    assert_eq!(want.len(), 5); // 4 pairs of the two 1s and the null row with itself
    let out = inlj(NullEquality::NullEqualsNothing).run(&s).unwrap();
    let (l, r) = out.maps.unwrap().to_host().unwrap();
    let want = reference(&n.to_host().unwrap(), &["k"], &n.to_host().unwrap(), &["k"], JoinType::Full, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
    assert_eq!(from_maps(&l, &r), want);
    assert_eq!(want.len(), 6); // 4 pairs of the two 1s, the null row unmatched on each side
    // Mismatched column lengths in a table.
    assert!(HostTable::new(vec![("a", HostColumn::from_values(vec![1u8])), ("b", HostColumn::from_values(vec![1u8, 2]))]).is_err());
    // explain names the algorithm and how every key is compared.
    let e = Join::new(JoinType::Left).on(&b, &["s"], &b, &["s"]).explain().unwrap();
    assert_eq!(e.algorithm, Algorithm::Hash);
    assert!(e.to_string().contains("dense ranks"), "{e}");
}

#[test]
fn output_budget_and_stats() {
    let Some(s) = stream("output_budget_and_stats") else { return };
    let h = HostTable::new(vec![("k", HostColumn::timestamps(TimeUnit::Nanosecond, vec![5; 100]))]).unwrap();
    let t = Table::upload(&s, &h).unwrap();
    // (The theta algorithms take no output budget yet.)
    for alg in algorithms().into_iter().filter(|a| !matches!(a, Algorithm::SortMerge(Gather::Clustered) | Algorithm::PartitionedHash(Gather::Clustered)) && !a.is_theta()) {
        let r = Join::new(JoinType::Inner).on(&t, &["k"], &t, &["k"]).algorithm(alg).output_budget(1000).run(&s);
        assert!(matches!(r, Err(Error::OutputTooLarge { rows: 10_000, .. })), "{}: {:?}", alg.name(), r.err());
    }
    let out = Join::new(JoinType::Inner).on(&t, &["k"], &t, &["k"]).algorithm(Algorithm::SortMerge(Gather::Unclustered)).with_stats().run(&s).unwrap();
    assert!(out.stats.is_some_and(|st| st.total_ms > 0.0));
}

#[test]
fn clustered_gathers_and_auto_on_wide_inputs() {
    let Some(s) = stream("clustered_gathers_and_auto_on_wide_inputs") else { return };
    let mut rng = StdRng::seed_from_u64(13);
    let mut sample = Sample::new(5);
    for t in [DataType::Int32, DataType::UInt64, DataType::Float64, DataType::Date32, DataType::Utf8, DataType::Int8] {
        for (nl, nr) in [(rows(5000, 500), rows(7001, 701)), (1, rows(9000, 900))] {
            let domain = (nl.max(nr) as i64 / 2).max(2);
            let hl = HostTable::new(vec![("k", key_column(&mut rng, t, nl, domain, 0, false)), ("p", key_column(&mut rng, DataType::Int64, nl, 1 << 30, 0, false)), ("q", key_column(&mut rng, DataType::Float32, nl, 100, 0, false))]).unwrap();
            let hr = HostTable::new(vec![("k", key_column(&mut rng, t, nr, domain, 0, false)), ("p", key_column(&mut rng, DataType::UInt32, nr, 1 << 30, 0, false))]).unwrap();
            let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
            for jt in JoinType::ALL {
                let (ls, rs): (Vec<&str>, Vec<&str>) = match jt {
                    JoinType::LeftSemi | JoinType::LeftAnti => (vec!["p", "q"], vec![]),
                    JoinType::RightSemi | JoinType::RightAnti => (vec![], vec!["p"]),
                    _ => (vec!["p", "q"], vec!["p"]),
                };
                let want = reference(&hl, &["k"], &hr, &["k"], jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
                for alg in [Algorithm::Auto, Algorithm::SortMerge(Gather::Clustered), Algorithm::PartitionedHash(Gather::Clustered)] {
                    if !sample.take() {
                        continue;
                    }
                    let out = Join::new(jt).on(&lt, &["k"], &rt, &["k"]).algorithm(alg).select(&ls, &rs).run(&s).unwrap_or_else(|e| panic!("{t} {jt:?} {}: {e}", alg.name()));
                    assert!(alg == Algorithm::Auto || out.algorithm == alg);
                    let table = out.table.to_host().unwrap();
                    assert_eq!(tuples(&table), expected_tuples(&want, &hl, &ls, &hr, &rs), "{t} {nl}x{nr} {jt:?} {} ({})", out.algorithm.name(), out.reason);
                }
            }
        }
    }
}

// ---- Filters, theta joins and aggregates --------------------------------------------------------

use gpujoin_join::predicate::{col_l, col_r, lit, CmpOp, Predicate};
use gpujoin_join::theta::{Agg, AggValue};

fn theta_table(rng: &mut StdRng, n: usize) -> HostTable {
    HostTable::new(vec![
        ("a", HostColumn::from_values((0..n).map(|_| rng.gen_range(-50..50)).collect::<Vec<i32>>())),
        ("f", HostColumn::from_values((0..n).map(|_| rng.gen_range(-8..8) as f64 * 0.25).collect::<Vec<f64>>())),
        ("s", HostColumn::utf8((0..n).map(|_| format!("s{}", rng.gen_range(0..20))))),
        ("d", key_column(rng, DataType::Date32, n, 30, 0, false)),
        ("k", key_column(rng, DataType::Int64, n, 12, 10, false)),
        ("t", HostColumn::from_values((0..n).map(|_| rng.gen_range(0..4)).collect::<Vec<i8>>())),
        ("n", HostColumn::from_options((0..n).map(|_| rng.gen_bool(0.8).then(|| rng.gen_range(-50..50))).collect::<Vec<Option<i32>>>())),
    ])
    .unwrap()
}

#[test]
fn filters_theta_joins_and_aggregates() {
    let Some(s) = stream("filters_theta_joins_and_aggregates") else { return };
    let mut rng = StdRng::seed_from_u64(17);
    // Column indices: a 0, f 1, s 2, d 3, k 4 (nullable), t 5.
    let preds: Vec<(&str, Predicate)> = vec![
        ("inequality", col_l(0).less(col_r(0))),
        ("band", col_l(0).greater_eq(col_r(0) - lit(2i32)).and(col_l(0).less_eq(col_r(0) + lit(2i32)))),
        ("or", col_l(0).greater(col_r(0)).or(col_l(2).equals(col_r(2)))),
        ("strings", col_l(2).less(col_r(2))),
        ("mixed", col_l(0).equals(col_r(0) - lit(1i32)).and(col_l(1).less(col_r(1)))),
        ("dates and narrow", col_l(3).less_eq(col_r(3)).and(!col_l(5).equals(col_r(5)))),
        ("literal", col_l(1).greater(lit(0.5f64)).and(Predicate::cmp(CmpOp::Ne, col_r(2), lit("s3")))),
        // Nullable columns (column 6) in conjunctions: a comparison with NULL is not true.
        ("nullable inequality", col_l(6).less(col_r(0))),
        ("nullable both sides", col_l(6).greater_eq(col_r(6)).and(col_l(2).less_eq(col_r(2)))),
        ("nullable equality", col_l(6).equals(col_r(6)).and(col_l(1).less(col_r(1)))),
    ];
    let algs = [Algorithm::Auto, Algorithm::ThetaSorted, Algorithm::ThetaNestedLoop, Algorithm::ThetaMixed];
    let mut sample = Sample::new(23);
    for (nl, nr) in [(0usize, 5usize), (1, 1), (37, 61), (400, 300)] {
        let (hl, hr) = (theta_table(&mut rng, nl), theta_table(&mut rng, nr));
        let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
        for (name, pred) in &preds {
            for jt in JoinType::ALL {
                let want = reference_filtered(&hl, &[], &hr, &[], pred, jt, NullEquality::NullEqualsNothing);
                for alg in algs {
                    if !sample.take() {
                        continue;
                    }
                    let j = Join::new(jt).tables(&lt, &rt).filter(pred.clone()).algorithm(alg);
                    let out = match j.run(&s) {
                        Ok(o) => o,
                        Err(Error::Unsupported { .. }) if alg != Algorithm::Auto && alg != Algorithm::ThetaNestedLoop => continue,
                        Err(e) => panic!("{name} {nl}x{nr} {jt:?} {}: {e}", alg.name()),
                    };
                    let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                    assert_eq!(from_maps(&l, &r), want, "{name} {nl}x{nr} {jt:?} {} ({})", out.algorithm.name(), out.reason);
                    assert_eq!(j.count(&s).unwrap(), want.len() as u64, "count: {name} {jt:?} {}", alg.name());
                }
                // Chunks of a budget below one row's output, and an output budget.
                let j = Join::new(jt).tables(&lt, &rt).filter(pred.clone());
                if nl * nr <= 61 * 61 && sample.take() && want.len() <= pick(usize::MAX, 64) {
                    let mut got = Vec::new();
                    for chunk in j.chunks(&s, ChunkBudget::Bytes(1)).unwrap() {
                        let (l, r) = chunk.unwrap().data.to_host().unwrap();
                        got.extend(from_maps(&l, &r));
                    }
                    got.sort();
                    assert_eq!(got, want, "chunks: {name} {nl}x{nr} {jt:?}");
                }
                if !want.is_empty() && sample.take() {
                    let per_row = if matches!(jt, JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full) { 8 } else { 4 };
                    let r = j.clone().output_budget(want.len() as u64 * per_row - 1).run(&s);
                    assert!(matches!(r, Err(Error::OutputTooLarge { .. })), "{name} {jt:?}: {:?}", r.err());
                }
            }
            // Aggregates of the inner theta join (no pairs written) against the reference pairs.
            if !sample.take() {
                continue;
            }
            let inner = reference_filtered(&hl, &[], &hr, &[], pred, JoinType::Inner, NullEquality::NullEqualsNothing);
            let j = Join::new(JoinType::Inner).tables(&lt, &rt).filter(pred.clone());
            assert_eq!(j.aggregate(&s, Agg::Count, None).unwrap(), AggValue::Int(inner.len() as i128), "{name}");
            let a: Vec<i128> = inner.iter().map(|p| if let Value::Int(x) = hr.column("a").unwrap().value(p.1.unwrap() as usize) { x } else { 0 }).collect();
            let want_sum = if a.is_empty() { AggValue::None } else { AggValue::Int(a.iter().sum()) };
            assert_eq!(j.aggregate(&s, Agg::Sum, Some((gpujoin_join::Side::Right, "a"))).unwrap(), want_sum, "{name}: SUM(r.a)");
            let want_max = a.iter().max().map_or(AggValue::None, |&m| AggValue::Int(m));
            assert_eq!(j.aggregate(&s, Agg::Max, Some((gpujoin_join::Side::Right, "a"))).unwrap(), want_max, "{name}: MAX(r.a)");
        }
        // Keys (nullable Int64) and a filter, through every equi algorithm (the clustered ones
        // carry row ids, whose pairs the filter then runs on).
        let pred = col_l(1).greater(col_r(1)).and(col_l(6).not_equals(col_r(0)));
        for jt in JoinType::ALL {
            for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                let want = reference_filtered(&hl, &["k"], &hr, &["k"], &pred, jt, nulls);
                for alg in [
                    Algorithm::Auto,
                    Algorithm::SortMerge(Gather::Unclustered),
                    Algorithm::Interleave,
                    Algorithm::Hash,
                    Algorithm::PartitionedHash(Gather::Unclustered),
                    Algorithm::SortMerge(Gather::Clustered),
                    Algorithm::PartitionedHash(Gather::Clustered),
                ] {
                    if !sample.take() {
                        continue;
                    }
                    let j = Join::new(jt).on(&lt, &["k"], &rt, &["k"]).null_equality(nulls).filter(pred.clone()).algorithm(alg).select(&[], &[]);
                    let out = j.run(&s).unwrap_or_else(|e| panic!("keys+filter {jt:?} {}: {e}", alg.name()));
                    let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                    assert_eq!(from_maps(&l, &r), want, "keys+filter {nl}x{nr} {jt:?} {nulls:?} {}", alg.name());
                    assert_eq!(j.count(&s).unwrap(), want.len() as u64);
                }
                // A LEFT join's aggregate skips the null side.
                if jt == JoinType::Left && sample.take() {
                    let j = Join::new(jt).on(&lt, &["k"], &rt, &["k"]).null_equality(nulls).filter(pred.clone());
                    let vals: Vec<f64> = want.iter().filter_map(|p| p.1).map(|r| if let Value::Float(x) = hr.column("f").unwrap().value(r as usize) { x } else { 0.0 }).collect();
                    let got = j.aggregate(&s, Agg::Count, Some((gpujoin_join::Side::Right, "f"))).unwrap();
                    assert_eq!(got, AggValue::Int(vals.len() as i128));
                    let got = j.aggregate(&s, Agg::Min, Some((gpujoin_join::Side::Right, "f"))).unwrap();
                    assert_eq!(got, vals.iter().copied().reduce(f64::min).map_or(AggValue::None, AggValue::Float));
                }
            }
        }
    }
    // OR/NOT on nullable columns: SQL's three-valued logic (a NULL row passes neither `x < y`
    // nor `NOT (x < y)`); ThetaMixed on NaN-equal float keys: a typed refusal (the key equality
    // lowers to a disjunction, no equality conjunct is left to hash on).
    let h = HostTable::new(vec![("k", HostColumn::from_options(vec![Some(1i64), None])), ("f", HostColumn::from_values(vec![1.0f64, 2.0]))]).unwrap();
    let t = Table::upload(&s, &h).unwrap();
    assert_eq!(Join::new(JoinType::Inner).tables(&t, &t).filter(!col_l(0).less(col_r(0))).run(&s).unwrap().rows, 1); // (0, 0)
    assert_eq!(Join::new(JoinType::Inner).tables(&t, &t).filter(col_l(0).less(col_r(0)).or(col_l(1).less(col_r(1)))).run(&s).unwrap().rows, 1); // (0, 1) by f
    assert_eq!(Join::new(JoinType::Full).tables(&t, &t).filter(col_l(0).less_eq(col_r(0))).run(&s).unwrap().rows, 3); // (0, 0), left row 1, right row 1
    let e = Join::new(JoinType::Inner).on(&t, &["f"], &t, &["f"]).algorithm(Algorithm::ThetaMixed).run(&s).err().unwrap();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let e = Join::new(JoinType::Inner).tables(&t, &t).algorithm(Algorithm::Hash).run(&s).err().unwrap();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    // The Cartesian product: no keys, no filter.
    let out = Join::new(JoinType::Inner).tables(&t, &t).run(&s).unwrap();
    assert_eq!(out.rows, 4);
    let ints = Table::upload(&s, &HostTable::new(vec![("a", HostColumn::from_values(vec![3i32, 1]))]).unwrap()).unwrap();
    let ex = Join::new(JoinType::Inner).tables(&ints, &ints).filter(col_l(0).less(col_r(0))).explain().unwrap();
    assert_eq!(ex.algorithm, Algorithm::ThetaSorted, "{ex}");
    assert_eq!(Join::new(JoinType::Inner).tables(&ints, &ints).filter(col_l(0).less(col_r(0))).run(&s).unwrap().rows, 1);
}

/// An inner `ThetaSorted` join whose selected columns are all 4- and 8-byte numbers without
/// nulls writes them itself (no maps): the same table, row for row, as the maps path (taken here
/// with statistics on), and the reference's rows. A nullable selected column takes the maps path.
#[test]
fn sorted_theta_join_writes_its_selected_columns_itself() {
    let Some(s) = stream("sorted_theta_join_writes_its_selected_columns_itself") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A_5E1E);
    // Column indices: a 0, f 1, s 2, d 3, k 4 (nullable Int64), t 5, n 6 (nullable).
    let preds: Vec<(&str, Predicate)> = vec![
        ("inequality", col_l(0).less(col_r(0))),
        ("band", col_l(0).greater_eq(col_r(0) - lit(2i32)).and(col_l(0).less_eq(col_r(0) + lit(2i32)))),
        ("float inequality", col_l(1).greater(col_r(1))),
    ];
    let selects: [(&[&str], &[&str]); 4] = [(&["a", "f", "d"], &["a", "f"]), (&[], &["d"]), (&["f"], &[]), (&["a"], &["a", "k"])];
    for (nl, nr) in [(1usize, 1usize), (1, 0), (37, 61), (400, 300), (rows(3000, 600), rows(2000, 400))] {
        let (hl, hr) = (theta_table(&mut rng, nl), theta_table(&mut rng, nr));
        let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
        for (name, pred) in &preds {
            let pairs = reference_filtered(&hl, &[], &hr, &[], pred, JoinType::Inner, NullEquality::NullEqualsNothing);
            for (ls, rs) in selects {
                let what = format!("{name} {nl}x{nr} {ls:?} {rs:?}");
                let j = Join::new(JoinType::Inner).tables(&lt, &rt).filter(pred.clone()).algorithm(Algorithm::ThetaSorted).select(ls, rs);
                let direct = j.run(&s).unwrap_or_else(|e| panic!("{what}: {e}"));
                let by_maps = j.clone().with_stats().run(&s).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(by_maps.maps.is_some(), "{what}");
                let nullable = rs.contains(&"k");
                assert_eq!(direct.maps.is_none(), !nullable, "{what}: the join writes the columns itself exactly when none is nullable");
                assert_eq!((direct.rows, by_maps.rows), (pairs.len() as u64, pairs.len() as u64), "{what}");
                let (d, m) = (direct.table.to_host().unwrap(), by_maps.table.to_host().unwrap());
                assert_eq!(d, m, "{what}: the same columns in the same order");
                let mut got = tuples(&d);
                got.sort();
                let mut want = expected_tuples(&pairs, &hl, ls, &hr, rs);
                want.sort();
                assert_eq!(got, want, "{what}");
            }
        }
    }
}

#[test]
fn join_index_built_once_probed_many_times() {
    use gpujoin_join::plan::JoinIndex;
    let Some(s) = stream("join_index_built_once_probed_many_times") else { return };
    let mut rng = StdRng::seed_from_u64(21);
    let mut sample = Sample::new(6);
    for t in [DataType::Utf8, DataType::Int16, DataType::Float64, DataType::Timestamp(TimeUnit::Second), DataType::Boolean] {
        let hi = HostTable::new(vec![("k", key_column(&mut rng, t, 500, 40, 0, false)), ("v", payload(&mut rng, DataType::Utf8, 500))]).unwrap();
        let it = Table::upload(&s, &hi).unwrap();
        let index = JoinIndex::build(&s, &it, "k").unwrap();
        for probe_rows in [0usize, 1, 333, 2000] {
            let hp = HostTable::new(vec![("k", key_column(&mut rng, t, probe_rows, 40, 0, false)), ("p", payload(&mut rng, DataType::Int32, probe_rows))]).unwrap();
            let pt = Table::upload(&s, &hp).unwrap();
            for jt in JoinType::ALL {
                let want = reference(&hp, &["k"], &hi, &["k"], jt, NullEquality::NullEqualsNothing, NanEquality::NanNeverEqual);
                let (ls, rs): (Vec<&str>, Vec<&str>) = match jt {
                    JoinType::LeftSemi | JoinType::LeftAnti => (vec!["p"], vec![]),
                    JoinType::RightSemi | JoinType::RightAnti => (vec![], vec!["v"]),
                    _ => (vec!["p", "k"], vec!["v", "k"]),
                };
                if !sample.take() {
                    continue;
                }
                let out = index.probe(&s, &pt, "k", jt, &ls, &rs).unwrap();
                let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                assert_eq!(from_maps(&l, &r), want, "{t} {probe_rows} {jt:?}");
                let table = out.table.to_host().unwrap();
                assert_eq!(tuples(&table), expected_tuples(&want, &hp, &ls, &hi, &rs), "{t} {probe_rows} {jt:?}");
            }
        }
    }
    // Nullable keys on either side: null keys match nothing (NullEqualsNothing).
    for t in [DataType::Int32, DataType::Utf8, DataType::Float64] {
        for (ni, np) in [(0usize, 0usize), (1, 1), (37, 61), (500, 333)] {
            for pct in [30u32, 100] {
                let hi = HostTable::new(vec![("k", key_column(&mut rng, t, ni, 20, pct, false)), ("v", payload(&mut rng, DataType::Int32, ni))]).unwrap();
                let hp = HostTable::new(vec![("k", key_column(&mut rng, t, np, 20, pct, false))]).unwrap();
                let (it, pt) = (Table::upload(&s, &hi).unwrap(), Table::upload(&s, &hp).unwrap());
                let index = JoinIndex::build(&s, &it, "k").unwrap();
                for jt in JoinType::ALL {
                    let want = reference(&hp, &["k"], &hi, &["k"], jt, NullEquality::NullEqualsNothing, NanEquality::NanNeverEqual);
                    if !sample.take() {
                        continue;
                    }
                    let out = index.probe(&s, &pt, "k", jt, &[], &[]).unwrap();
                    let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                    assert_eq!(from_maps(&l, &r), want, "nullable {t} {ni}x{np} {pct}% {jt:?}");
                }
            }
        }
    }
    // Another key type: a typed error.
    let a = Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(vec![1i32]))]).unwrap()).unwrap();
    let b = Table::upload(&s, &HostTable::new(vec![("k", HostColumn::from_values(vec![1i64]))]).unwrap()).unwrap();
    let index = JoinIndex::build(&s, &a, "k").unwrap();
    assert!(matches!(index.probe(&s, &b, "k", JoinType::Inner, &[], &[]).err(), Some(Error::TypeMismatch { .. })));
}

// ---- SQL's three-valued logic on nullable columns (any predicate shape) ------------------------

/// Columns: 0 k (nullable Int32, the key), 1 i (nullable Int32), 2 f (nullable Float64 with NaN,
/// -0.0, 0.0), 3 s (nullable Utf8), 4 b (nullable Int8), 5 x (Int64 without nulls), 6 g (nullable
/// Float32), 7 p (nullable Utf8 payload).
fn nullable_table(rng: &mut StdRng, n: usize) -> HostTable {
    let some = |rng: &mut StdRng| rng.gen_range(0..100) >= 25;
    let floats = [f64::NAN, -0.0, 0.0, 0.5, -1.0, 2.0, f64::INFINITY, -f64::NAN];
    let strs = ["", "a", "ab", "é", "z", "日本"];
    HostTable::new(vec![
        ("k", HostColumn::from_options((0..n).map(|_| some(rng).then(|| rng.gen_range(0..6))).collect::<Vec<Option<i32>>>())),
        ("i", HostColumn::from_options((0..n).map(|_| some(rng).then(|| rng.gen_range(-3..4))).collect::<Vec<Option<i32>>>())),
        ("f", HostColumn::from_options((0..n).map(|_| some(rng).then(|| floats[rng.gen_range(0..floats.len())])).collect::<Vec<Option<f64>>>())),
        ("s", HostColumn::utf8_options((0..n).map(|_| some(rng).then(|| strs[rng.gen_range(0..strs.len())])).collect::<Vec<_>>())),
        ("b", HostColumn::from_options((0..n).map(|_| some(rng).then(|| rng.gen_range(-2..3))).collect::<Vec<Option<i8>>>())),
        ("x", HostColumn::from_values((0..n).map(|_| rng.gen_range(-3..4)).collect::<Vec<i64>>())),
        ("g", HostColumn::from_options((0..n).map(|_| some(rng).then(|| floats[rng.gen_range(0..floats.len())] as f32)).collect::<Vec<Option<f32>>>())),
        ("p", HostColumn::utf8_options((0..n).map(|_| some(rng).then(|| format!("p{}", rng.gen_range(0..1000)))).collect::<Vec<_>>())),
    ])
    .unwrap()
}

/// A random operand of lowered type group `g` (0: i32 columns k, i, b; 1: f64 f; 2: strings s;
/// 3: i64 x; 4: f32 g), sometimes with `+`/`-` (not on strings, not on f32: the reference
/// computes f32 arithmetic in f64).
fn nullable_operand(rng: &mut StdRng, g: usize) -> gpujoin_join::predicate::Expr {
    let col = |rng: &mut StdRng| -> usize {
        match g {
            0 => [0, 1, 4][rng.gen_range(0..3)],
            1 => 2,
            2 => 3,
            3 => 5,
            _ => 6,
        }
    };
    let literal = |rng: &mut StdRng| match g {
        0 => lit(rng.gen_range(-3..4i32)),
        1 => lit([f64::NAN, 0.0, -0.0, 0.5, 2.0][rng.gen_range(0..5)]),
        2 => lit(["", "a", "é", "zz"][rng.gen_range(0..4)]),
        3 => lit(rng.gen_range(-3..4i64)),
        _ => lit([f32::NAN, 0.0, 0.5, -1.0][rng.gen_range(0..4)]),
    };
    let leaf = |rng: &mut StdRng| match rng.gen_range(0..5) {
        0 | 1 => col_l(col(rng)),
        2 | 3 => col_r(col(rng)),
        _ => literal(rng),
    };
    let a = leaf(rng);
    if g != 2 && g != 4 && rng.gen_range(0..4) == 0 {
        let b = leaf(rng);
        if rng.gen_bool(0.5) {
            a + b
        } else {
            a - b
        }
    } else {
        a
    }
}

fn nullable_predicate(rng: &mut StdRng, depth: u32) -> Predicate {
    if depth == 0 || rng.gen_range(0..3) == 0 {
        let g = rng.gen_range(0..5);
        let op = CmpOp::ALL[rng.gen_range(0..6)];
        return Predicate::cmp(op, nullable_operand(rng, g), nullable_operand(rng, g));
    }
    match rng.gen_range(0..3) {
        0 => Predicate::And((0..rng.gen_range(1..4)).map(|_| nullable_predicate(rng, depth - 1)).collect()),
        1 => Predicate::Or((0..rng.gen_range(1..4)).map(|_| nullable_predicate(rng, depth - 1)).collect()),
        _ => !nullable_predicate(rng, depth - 1),
    }
}

#[test]
fn or_not_and_nested_filters_on_nullable_columns() {
    let Some(s) = stream("or_not_and_nested_filters_on_nullable_columns") else { return };
    let mut rng = StdRng::seed_from_u64(0x3_7A1E);
    let mut preds: Vec<Predicate> = vec![
        // Hand-picked shapes: NOT over a nullable comparison, OR mixing nullable columns and
        // columns without nulls, NOT over OR, NaN under NOT, strings.
        !col_l(1).less(col_r(1)),
        col_l(1).less(col_r(1)).or(col_l(5).equals(col_r(5))),
        !(col_l(2).less(col_r(2)).or(col_l(3).equals(col_r(3)))),
        !col_l(2).greater_eq(lit(0.0f64)),
        col_l(3).greater(col_r(3)).or(!col_r(4).equals(lit(1i32))),
        !(!col_l(6).less(col_r(6))).and(col_l(0).not_equals(col_r(0)).or(col_l(1).equals(col_r(1) + lit(1i32)))),
    ];
    preds.extend((0..14).map(|_| nullable_predicate(&mut rng, 3)));
    let theta_algs = [Algorithm::Auto, Algorithm::ThetaNestedLoop, Algorithm::ThetaMixed, Algorithm::ThetaSorted];
    let keyed_algs = [Algorithm::Auto, Algorithm::SortMerge(Gather::Unclustered), Algorithm::Interleave, Algorithm::Hash, Algorithm::PartitionedHash(Gather::Unclustered), Algorithm::IndexedNestedLoop, Algorithm::ThetaNestedLoop, Algorithm::ThetaMixed];
    let (mut ran, mut nonempty) = (0usize, 0usize);
    let mut sample = Sample::new(149);
    for (nl, nr) in [(0usize, 7usize), (1, 1), (23, 41), (160, 130)] {
        let (hl, hr) = (nullable_table(&mut rng, nl), nullable_table(&mut rng, nr));
        let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
        for (pi, pred) in preds.iter().enumerate() {
            for jt in JoinType::ALL {
                // The filter alone (a pure theta join).
                let want = reference_filtered(&hl, &[], &hr, &[], pred, jt, NullEquality::NullEqualsNothing);
                nonempty += !want.is_empty() as usize;
                for alg in theta_algs {
                    if !sample.take() {
                        continue;
                    }
                    let j = Join::new(jt).tables(&lt, &rt).filter(pred.clone()).algorithm(alg);
                    let out = match j.run(&s) {
                        Ok(o) => o,
                        Err(Error::Unsupported { .. }) if matches!(alg, Algorithm::ThetaSorted | Algorithm::ThetaMixed) => continue,
                        Err(e) => panic!("pred {pi} {pred:?} {nl}x{nr} {jt:?} {}: {e}", alg.name()),
                    };
                    let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                    assert_eq!(from_maps(&l, &r), want, "pred {pi} {pred:?} {nl}x{nr} {jt:?} {} ({})", out.algorithm.name(), out.reason);
                    ran += 1;
                    if alg == Algorithm::Auto {
                        assert_eq!(j.count(&s).unwrap(), want.len() as u64, "count: pred {pi} {jt:?}");
                    }
                }
                // Materialized nullable columns of the filtered theta join.
                let (ls, rs): (Vec<&str>, Vec<&str>) = match jt {
                    JoinType::LeftSemi | JoinType::LeftAnti => (vec!["p", "f"], vec![]),
                    JoinType::RightSemi | JoinType::RightAnti => (vec![], vec!["p", "s"]),
                    _ => (vec!["p", "f"], vec!["s", "b"]),
                };
                if sample.take() {
                    let out = Join::new(jt).tables(&lt, &rt).filter(pred.clone()).select(&ls, &rs).run(&s).unwrap();
                    assert_eq!(tuples(&out.table.to_host().unwrap()), expected_tuples(&want, &hl, &ls, &hr, &rs), "materialized: pred {pi} {jt:?}");
                }
                // Keys (the nullable k) and the filter, under both NULL equalities.
                for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                    let want = reference_filtered(&hl, &["k"], &hr, &["k"], pred, jt, nulls);
                    for alg in keyed_algs {
                        if !sample.take() {
                            continue;
                        }
                        let j = Join::new(jt).on(&lt, &["k"], &rt, &["k"]).null_equality(nulls).filter(pred.clone()).algorithm(alg);
                        let out = match j.run(&s) {
                            Ok(o) => o,
                            Err(Error::Unsupported { .. }) if alg == Algorithm::ThetaMixed => continue,
                            Err(e) => panic!("keys+pred {pi} {pred:?} {nl}x{nr} {jt:?} {nulls:?} {}: {e}", alg.name()),
                        };
                        let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                        assert_eq!(from_maps(&l, &r), want, "keys+pred {pi} {pred:?} {nl}x{nr} {jt:?} {nulls:?} {} ({})", out.algorithm.name(), out.reason);
                        ran += 1;
                    }
                }
            }
        }
    }
    println!("{ran} runs matched the reference; {nonempty} non-empty filtered outputs");
    assert!(ran > pick(5000, 15), "only {ran} runs");
    assert!(nonempty > 300, "only {nonempty} non-empty outputs: the predicates filter everything");
}

// ---- Theta joins on keys under both NULL and NaN equalities ------------------------------------

#[test]
fn theta_keys_under_both_null_and_nan_equalities() {
    let Some(s) = stream("theta_keys_under_both_null_and_nan_equalities") else { return };
    let mut rng = StdRng::seed_from_u64(0x7E7A);
    let (mut ran, mut null_pairs, mut nan_pairs) = (0usize, 0usize, 0usize);
    let mut sample = Sample::new(199);
    // Composite keys: one of `t` and a nullable Int16; a filter on a payload column, or none.
    for t in [DataType::Float64, DataType::Float32, DataType::Int32, DataType::Utf8, DataType::Int8, DataType::Boolean, DataType::Date64] {
        for (nl, nr, pct) in [(0usize, 4usize, 20u32), (1, 1, 0), (29, 43, 20), (150, 120, 10), (60, 60, 100)] {
            let domain = (nl.max(nr) as i64 / 4).max(3);
            let mk = |rng: &mut StdRng, n: usize| {
                HostTable::new(vec![
                    ("k", key_column(rng, t, n, domain, pct, false)),
                    ("c", key_column(rng, DataType::Int16, n, 3, pct / 2, false)),
                    ("v", key_column(rng, DataType::Int32, n, 50, 0, false)),
                ])
                .unwrap()
            };
            let (hl, hr) = (mk(&mut rng, nl), mk(&mut rng, nr));
            let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
            for keys in [&["k"][..], &["k", "c"][..]] {
                for filter in [None, Some(col_l(2).less_eq(col_r(2)).or(col_l(2).equals(lit(0i32))))] {
                    for jt in JoinType::ALL {
                        for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                            for nans in [NanEquality::NanEqualsNan, NanEquality::NanNeverEqual] {
                                if nans == NanEquality::NanNeverEqual && !t.is_float() {
                                    continue;
                                }
                                let want = table_reference::join(&hl, keys, &hr, keys, filter.as_ref(), jt, nulls, nans);
                                if jt == JoinType::Inner {
                                    // The cases the rewrite exists for: NULL = NULL and NaN = NaN pairs.
                                    for &(a, b) in &want {
                                        let (x, y) = (hl.column("k").unwrap().value(a.unwrap() as usize), hr.column("k").unwrap().value(b.unwrap() as usize));
                                        null_pairs += (x == Value::Null && y == Value::Null) as usize;
                                        nan_pairs += matches!((x, y), (Value::Float(p), Value::Float(q)) if p.is_nan() && q.is_nan()) as usize;
                                    }
                                }
                                for alg in [Algorithm::ThetaNestedLoop, Algorithm::ThetaMixed, Algorithm::ThetaSorted] {
                                    if !sample.take() {
                                        continue;
                                    }
                                    let mut j = Join::new(jt).on(&lt, keys, &rt, keys).null_equality(nulls).nan_equality(nans).algorithm(alg);
                                    if let Some(f) = &filter {
                                        j = j.filter(f.clone());
                                    }
                                    let what = format!("{t} keys {keys:?} filter {} {nl}x{nr} {pct}% {jt:?} {nulls:?} {nans:?} {}", filter.is_some(), alg.name());
                                    let out = match j.run(&s) {
                                        Ok(o) => o,
                                        // The sorted path takes no equality; the mixed one needs
                                        // an equality conjunct left after the lowering.
                                        Err(Error::Unsupported { .. }) if alg != Algorithm::ThetaNestedLoop => continue,
                                        Err(e) => panic!("{what}: {e}"),
                                    };
                                    let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                                    assert_eq!(from_maps(&l, &r), want, "{what} ({})", out.reason);
                                    assert_eq!(j.count(&s).unwrap(), want.len() as u64, "count: {what}");
                                    ran += 1;
                                }
                                // Chunks of a budget below one row's output (a few cases:
                                // one chunk a row).
                                if nl * nr <= 43 * 43 && keys.len() == 1 && matches!(jt, JoinType::Full | JoinType::LeftSemi | JoinType::RightAnti) && sample.take() && want.len() <= pick(usize::MAX, 64) {
                                    let mut j = Join::new(jt).on(&lt, keys, &rt, keys).null_equality(nulls).nan_equality(nans).algorithm(Algorithm::ThetaNestedLoop);
                                    if let Some(f) = &filter {
                                        j = j.filter(f.clone());
                                    }
                                    let mut got = Vec::new();
                                    for chunk in j.chunks(&s, ChunkBudget::Bytes(1)).unwrap() {
                                        let (l, r) = chunk.unwrap().data.to_host().unwrap();
                                        got.extend(from_maps(&l, &r));
                                    }
                                    got.sort();
                                    assert_eq!(got, want, "chunks: {t} {keys:?} {jt:?} {nulls:?} {nans:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    println!("{ran} theta runs matched; {null_pairs} NULL=NULL and {nan_pairs} NaN=NaN inner pairs expected");
    assert!(ran > pick(2000, 15), "only {ran} runs");
    assert!(null_pairs > 100 && nan_pairs > 100, "too few NULL/NaN pairs: {null_pairs}, {nan_pairs}");
}

/// `-0.0 = 0.0` and `NaN = NaN` on a tiny hand-made case, through every theta algorithm that
/// takes it, against the equi-joins' answer.
#[test]
fn theta_keys_negative_zero_and_nan() {
    let Some(s) = stream("theta_keys_negative_zero_and_nan") else { return };
    let l = HostTable::new(vec![("k", HostColumn::from_options(vec![Some(-0.0f64), Some(f64::NAN), None, Some(1.0)]))]).unwrap();
    let r = HostTable::new(vec![("k", HostColumn::from_options(vec![Some(0.0f64), Some(-f64::NAN), None, Some(2.0)]))]).unwrap();
    let (lt, rt) = (Table::upload(&s, &l).unwrap(), Table::upload(&s, &r).unwrap());
    let pairs = |nulls, nans, alg| {
        let out = Join::new(JoinType::Inner).on(&lt, &["k"], &rt, &["k"]).null_equality(nulls).nan_equality(nans).algorithm(alg).run(&s).unwrap();
        let (a, b) = out.maps.unwrap().to_host().unwrap();
        from_maps(&a, &b)
    };
    for alg in [Algorithm::ThetaNestedLoop, Algorithm::SortMerge(Gather::Unclustered)] {
        assert_eq!(pairs(NullEquality::NullEqualsNothing, NanEquality::NanNeverEqual, alg), [(Some(0), Some(0))], "{}", alg.name());
        assert_eq!(pairs(NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan, alg), [(Some(0), Some(0)), (Some(1), Some(1))], "{}", alg.name());
        assert_eq!(pairs(NullEquality::NullEqualsNull, NanEquality::NanEqualsNan, alg), [(Some(0), Some(0)), (Some(1), Some(1)), (Some(2), Some(2))], "{}", alg.name());
        assert_eq!(pairs(NullEquality::NullEqualsNull, NanEquality::NanNeverEqual, alg), [(Some(0), Some(0)), (Some(2), Some(2))], "{}", alg.name());
    }
    // With IEEE equality the mixed path hashes on the key (`-0.0` and `0.0` in one bucket).
    assert_eq!(pairs(NullEquality::NullEqualsNothing, NanEquality::NanNeverEqual, Algorithm::ThetaMixed), [(Some(0), Some(0))]);
}

// ---- Clustered gathers of every payload type (by row id) ---------------------------------------

#[test]
fn clustered_gathers_of_every_payload_type() {
    let Some(s) = stream("clustered_gathers_of_every_payload_type") else { return };
    let mut rng = StdRng::seed_from_u64(0xC1_0573);
    let dec = DataType::Decimal128(38, 4);
    // Left: strings (nullable), booleans, Int8, a nullable decimal, a nullable Int64, a Date32
    // (taken as it is), LargeUtf8; right: strings, a nullable Float64, nullable booleans, Int16,
    // a decimal, a UInt32 (as it is).
    let left_payloads = [("ls", DataType::Utf8, 20u32), ("lb", DataType::Boolean, 0), ("l8", DataType::Int8, 0), ("ld", dec, 15), ("ln", DataType::Int64, 30), ("lt", DataType::Date32, 0), ("ll", DataType::LargeUtf8, 0)];
    let right_payloads = [("rs", DataType::Utf8, 0), ("rf", DataType::Float64, 25), ("rb", DataType::Boolean, 10), ("r16", DataType::Int16, 0), ("rd", dec, 0), ("ru", DataType::UInt32, 0)];
    let mut ran = 0usize;
    let mut sample = Sample::new(13);
    for key_type in [DataType::Int32, DataType::Utf8, DataType::Int64] {
        for (nl, nr) in [(0usize, 5usize), (1, 1), (300, 517), (rows(5000, 1000), rows(7001, 1301))] {
            let domain = (nl.max(nr) as i64 / 3).max(2);
            let mk = |rng: &mut StdRng, n: usize, payloads: &[(&'static str, DataType, u32)]| {
                let mut cols = vec![("k", key_column(rng, key_type, n, domain, 0, false))];
                cols.extend(payloads.iter().map(|&(name, t, pct)| (name, key_column(rng, t, n, 1000, pct, false))));
                HostTable::new(cols).unwrap()
            };
            let (hl_full, hr_full) = (mk(&mut rng, nl + 3, &left_payloads), mk(&mut rng, nr + 1, &right_payloads));
            // Sliced inputs: validity and boolean bitmaps start at a bit offset.
            let (hl, hr) = (hl_full.slice(3, nl).unwrap(), hr_full.slice(1, nr).unwrap());
            let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
            for jt in JoinType::ALL {
                let want = reference(&hl, &["k"], &hr, &["k"], jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
                let all_l: Vec<&str> = left_payloads.iter().map(|p| p.0).collect();
                let all_r: Vec<&str> = right_payloads.iter().map(|p| p.0).collect();
                // Every payload; only composed ones; one composed column beside one taken as it is.
                let selections: [(Vec<&str>, Vec<&str>); 3] = [(all_l.clone(), all_r.clone()), (vec!["ls", "ld"], vec!["rb", "rs"]), (vec!["lt", "ln"], vec!["ru", "rf"])];
                for (ls, rs) in selections {
                    let ls: Vec<&str> = if jt.has_left_map() { ls } else { vec![] };
                    let rs: Vec<&str> = if jt.has_right_map() { rs } else { vec![] };
                    let exp = expected_tuples(&want, &hl, &ls, &hr, &rs);
                    for alg in [Algorithm::SortMerge(Gather::Clustered), Algorithm::PartitionedHash(Gather::Clustered), Algorithm::Auto] {
                        if !sample.take() {
                            continue;
                        }
                        let what = format!("{key_type} keys {nl}x{nr} {jt:?} {} select {ls:?} {rs:?}", alg.name());
                        let out = Join::new(jt).on(&lt, &["k"], &rt, &["k"]).algorithm(alg).select(&ls, &rs).run(&s).unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert!(alg == Algorithm::Auto || out.algorithm == alg, "{what}: ran {}", out.algorithm.name());
                        assert_eq!(out.rows, want.len() as u64, "{what}: rows ({})", out.reason);
                        let table = out.table.to_host().unwrap();
                        let names: Vec<&str> = ls.iter().chain(&rs).copied().collect();
                        assert_eq!(table.names(), names.as_slice(), "{what}");
                        assert_eq!(table.rows(), want.len(), "{what}");
                        for (c, n) in table.columns().iter().zip(&names) {
                            let t = if ls.contains(n) { hl.column(n).unwrap().data_type() } else { hr.column(n).unwrap().data_type() };
                            assert_eq!(c.data_type(), t, "{what}: column {n}");
                        }
                        assert_eq!(tuples(&table), exp, "{what} ({})", out.reason);
                        ran += 1;
                    }
                }
            }
        }
    }
    println!("{ran} clustered runs matched the reference");
    // Auto: when no selected column travels as it is, the unclustered gathers (the same gathers
    // by row id, without a row-id column to carry); otherwise the decision tree at run time.
    // (6000 rows: above the tiny inputs that Auto gives the non-partitioned hash join; explain
    // does no device work beyond the upload.)
    let n = 6000i64;
    let h = HostTable::new(vec![("k", HostColumn::from_values((0..n).map(|x| (x % 97) as i32).collect::<Vec<i32>>())), ("s", HostColumn::utf8((0..n).map(|x| format!("s{x}")))), ("v", HostColumn::from_values((0..n).collect::<Vec<i64>>()))]).unwrap();
    let t = Table::upload(&s, &h).unwrap();
    let e = Join::new(JoinType::Inner).on(&t, &["k"], &t, &["k"]).select(&["s"], &[]).explain().unwrap();
    assert_eq!(e.algorithm, Algorithm::PartitionedHash(Gather::Unclustered), "{e}");
    assert!(e.reason.contains("left s: Utf8"), "{e}");
    let e = Join::new(JoinType::Inner).on(&t, &["k"], &t, &["k"]).select(&["s", "v"], &[]).explain().unwrap();
    assert_eq!(e.algorithm, Algorithm::Auto, "{e}");
    // Keys the clustered gathers cannot take as they are run as ranks; the reason names the key
    // column and why.
    let n = Table::upload(&s, &HostTable::new(vec![("nk", HostColumn::from_options(vec![Some(1i32), None])), ("f", HostColumn::from_values(vec![0.5f64, f64::NAN]))]).unwrap()).unwrap();
    for alg in [Algorithm::SortMerge(Gather::Clustered), Algorithm::PartitionedHash(Gather::Clustered)] {
        let out = Join::new(JoinType::Inner).on(&n, &["nk"], &n, &["nk"]).select(&["f"], &[]).algorithm(alg).run(&s).unwrap_or_else(|e| panic!("{}: {e}", alg.name()));
        assert_eq!(out.rows, 1, "{}", alg.name());
        assert!(out.reason.contains("ranks") && out.reason.contains("key column nk") && out.reason.contains("validity"), "{}", out.reason);
        let out = Join::new(JoinType::Inner).on(&n, &["f"], &n, &["f"]).nan_equality(NanEquality::NanNeverEqual).algorithm(alg).run(&s).unwrap_or_else(|e| panic!("{}: {e}", alg.name()));
        assert_eq!(out.rows, 1, "{}", alg.name());
        assert!(out.reason.contains("ranks") && out.reason.contains("key column f") && out.reason.contains("NaN"), "{}", out.reason);
    }
}

// ---- Decimal128 columns in filters and theta keys ----------------------------------------------

#[test]
fn decimal_filters_and_theta_keys() {
    let Some(s) = stream("decimal_filters_and_theta_keys") else { return };
    let mut rng = StdRng::seed_from_u64(0xDEC);
    // Values around the word boundary, extremes, and small ones (so that pairs compare equal).
    let vals: [i128; 12] = [0, 1, -1, 5, i128::MIN, i128::MAX, 1 << 64, (1 << 64) - 1, -(1 << 64), u64::MAX as i128, i64::MIN as i128, 7 << 64 | 3];
    let dec = |rng: &mut StdRng, n: usize, scale: i8, null_pct: u32| {
        let v: Vec<i128> = (0..n).map(|_| vals[rng.gen_range(0..vals.len())]).collect();
        let valid: Vec<bool> = (0..n).map(|_| rng.gen_range(0..100) >= null_pct).collect();
        let c = HostColumn::from_values(v).with_type(DataType::Decimal128(38, scale)).unwrap();
        if null_pct > 0 {
            c.with_validity(&valid).unwrap()
        } else {
            c
        }
    };
    let mk = |rng: &mut StdRng, n: usize| {
        HostTable::new(vec![
            ("d", dec(rng, n, 2, 20)),
            ("e", dec(rng, n, 2, 0)),
            ("x", dec(rng, n, 3, 0)),
            ("i", HostColumn::from_values((0..n).map(|_| rng.gen_range(-3..4)).collect::<Vec<i64>>())),
        ])
        .unwrap()
    };
    // Columns: d 0 (nullable, scale 2), e 1 (scale 2), x 2 (scale 3), i 3.
    let preds: Vec<Predicate> = vec![
        col_l(0).less(col_r(0)),
        col_l(0).greater_eq(col_r(1)),
        !col_l(0).equals(col_r(0)).or(col_l(1).less(lit(5i64))),
        col_l(1).not_equals(lit(u64::MAX)).and(col_r(0).less_eq(lit(-1i32))),
        col_l(0).less_eq(col_r(0)).and(col_l(3).greater(col_r(3))),
        !(col_l(1).greater(col_r(1)).and(!col_r(0).equals(lit(0u32)))),
        col_l(2).less(col_r(2)).or(col_l(0).equals(col_r(1))),
    ];
    let mut ran = 0;
    let mut sample = Sample::new(37);
    for (nl, nr) in [(0usize, 3usize), (1, 1), (40, 33), (150, 170)] {
        let (hl, hr) = (mk(&mut rng, nl), mk(&mut rng, nr));
        let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
        for (pi, pred) in preds.iter().enumerate() {
            for jt in JoinType::ALL {
                let want = reference_filtered(&hl, &[], &hr, &[], pred, jt, NullEquality::NullEqualsNothing);
                for alg in [Algorithm::Auto, Algorithm::ThetaNestedLoop] {
                    if !sample.take() {
                        continue;
                    }
                    let j = Join::new(jt).tables(&lt, &rt).filter(pred.clone()).algorithm(alg);
                    let out = j.run(&s).unwrap_or_else(|e| panic!("pred {pi} {nl}x{nr} {jt:?} {}: {e}", alg.name()));
                    let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                    assert_eq!(from_maps(&l, &r), want, "pred {pi} {pred:?} {nl}x{nr} {jt:?} {} ({})", out.algorithm.name(), out.reason);
                    assert_eq!(j.count(&s).unwrap(), want.len() as u64, "count: pred {pi} {jt:?}");
                    ran += 1;
                }
                // Keys and the filter: the decimal key e by the equi-joins, and as a theta key
                // (the mixed path hashes on both words).
                for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                    let want = reference_filtered(&hl, &["e"], &hr, &["e"], pred, jt, nulls);
                    for alg in [Algorithm::Auto, Algorithm::SortMerge(Gather::Unclustered), Algorithm::PartitionedHash(Gather::Unclustered), Algorithm::ThetaNestedLoop, Algorithm::ThetaMixed] {
                        if !sample.take() {
                            continue;
                        }
                        let out = Join::new(jt).on(&lt, &["e"], &rt, &["e"]).null_equality(nulls).filter(pred.clone()).algorithm(alg).run(&s).unwrap_or_else(|e| panic!("keys+pred {pi} {jt:?} {}: {e}", alg.name()));
                        let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
                        assert_eq!(from_maps(&l, &r), want, "keys+pred {pi} {pred:?} {nl}x{nr} {jt:?} {nulls:?} {} ({})", out.algorithm.name(), out.reason);
                        ran += 1;
                    }
                }
            }
        }
        // Nullable decimal theta keys under NULL = NULL.
        for jt in JoinType::ALL {
            if !sample.take() {
                continue;
            }
            let want = table_reference::join(&hl, &["d"], &hr, &["d"], None, jt, NullEquality::NullEqualsNull, NanEquality::NanEqualsNan);
            let out = Join::new(jt).on(&lt, &["d"], &rt, &["d"]).null_equality(NullEquality::NullEqualsNull).algorithm(Algorithm::ThetaNestedLoop).run(&s).unwrap();
            let (l, r) = out.maps.as_ref().unwrap().to_host().unwrap();
            assert_eq!(from_maps(&l, &r), want, "decimal theta keys {nl}x{nr} {jt:?}");
        }
    }
    println!("{ran} decimal runs matched the reference");
    // Typed refusals naming the column: another scale, arithmetic, a float literal.
    let h = mk(&mut rng, 3);
    let t = Table::upload(&s, &h).unwrap();
    for (p, want) in [(col_l(0).less(col_r(2)), "scale"), (col_l(1).less(col_r(1) + lit(1i64)), "`+`"), (col_l(1).less(lit(0.5f64)), "literal"), (col_l(1).less(col_r(3)), "column i")] {
        match Join::new(JoinType::Inner).tables(&t, &t).filter(p.clone()).run(&s) {
            Err(Error::Unsupported { what, reason }) => assert!(what.contains("Decimal128 column") && reason.contains(want), "{p:?}: {what}: {reason}"),
            r => panic!("{p:?}: {:?}", r.err()),
        }
    }
}

// ---- Clustered gathers with a filter -------------------------------------------------------------

/// SMJ-OM and PHJ-OM with a filter: each side's row ids travel through the clustered join, the
/// filter runs on their pairs, and the selected columns (a nullable one, a string) are gathered
/// by the pairs that pass. Keys the clustered joins take as they are (one `Int32`, no nulls), and
/// keys they join as ranks (a nullable `Int32` and a string: composite, with NULLs), every join
/// type, against the CPU reference.
#[test]
fn clustered_joins_with_a_filter() {
    let Some(s) = stream("clustered_joins_with_a_filter") else { return };
    let mut rng = StdRng::seed_from_u64(31);
    let (nl, nr) = (rows(700, 90), rows(500, 70));
    let table = |rng: &mut StdRng, n: usize| {
        HostTable::new(vec![
            ("k", key_column(rng, DataType::Int32, n, 60, 0, false)),
            ("n", key_column(rng, DataType::Int32, n, 20, 10, false)),
            ("s", key_column(rng, DataType::Utf8, n, 12, 0, false)),
            ("p", payload(rng, DataType::Int64, n)),
        ])
        .unwrap()
    };
    let (hl, hr) = (table(&mut rng, nl), table(&mut rng, nr));
    let (lt, rt) = (Table::upload(&s, &hl).unwrap(), Table::upload(&s, &hr).unwrap());
    // l.p < r.p on a nullable column: a NULL p passes neither way (three-valued logic).
    let pred = col_l(3).less(col_r(3));
    let mut checked = 0;
    for keys in [&["k"][..], &["n", "s"][..]] {
        for jt in JoinType::ALL {
            let (ls, rs): (Vec<&str>, Vec<&str>) = match jt {
                JoinType::LeftSemi | JoinType::LeftAnti => (vec!["p", "s"], vec![]),
                JoinType::RightSemi | JoinType::RightAnti => (vec![], vec!["p", "s"]),
                _ => (vec!["p", "s"], vec!["k", "p"]),
            };
            for nulls in [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull] {
                let want = reference_filtered(&hl, keys, &hr, keys, &pred, jt, nulls);
                for alg in [Algorithm::SortMerge(Gather::Clustered), Algorithm::PartitionedHash(Gather::Clustered)] {
                    let what = format!("{keys:?} {jt:?} {nulls:?} {}", alg.name());
                    let j = Join::new(jt).on(&lt, keys, &rt, keys).null_equality(nulls).filter(pred.clone()).algorithm(alg).select(&ls, &rs);
                    let out = j.run(&s).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(out.algorithm, alg, "{what}: {}", out.reason);
                    assert!(out.reason.contains("row ids travel through it"), "{what}: {}", out.reason);
                    let (l, r) = out.maps.as_ref().expect("maps").to_host().unwrap();
                    assert_eq!(from_maps(&l, &r), want, "{what}: pairs");
                    let got = tuples(&out.table.to_host().unwrap());
                    assert_eq!(got, expected_tuples(&want, &hl, &ls, &hr, &rs), "{what}: materialized rows");
                    assert_eq!(j.count(&s).unwrap(), want.len() as u64, "{what}: count");
                    checked += 1;
                }
                // The same join in chunks (keys and filter: the theta chunks), small budgets:
                // every pair once, and each chunk's maps gather the selected rows.
                let what = format!("{keys:?} {jt:?} {nulls:?} chunks");
                let j = Join::new(jt).on(&lt, keys, &rt, keys).null_equality(nulls).filter(pred.clone()).select(&ls, &rs);
                let chunks = j.chunks(&s, ChunkBudget::Bytes(pick(1 << 10, 64))).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_ne!(chunks.source().path(), "equi", "{what}");
                let (mut pairs, mut rows) = (Vec::new(), Vec::new());
                for chunk in chunks {
                    let maps = chunk.unwrap_or_else(|e| panic!("{what}: {e}")).data;
                    let (l, r) = maps.to_host().unwrap();
                    pairs.extend(from_maps(&l, &r));
                    rows.extend(tuples(&j.gather(&s, &maps).unwrap().to_host().unwrap()));
                }
                pairs.sort();
                rows.sort();
                assert_eq!(pairs, want, "{what}: pairs");
                let mut want_rows = expected_tuples(&want, &hl, &ls, &hr, &rs);
                want_rows.sort();
                assert_eq!(rows, want_rows, "{what}: materialized rows");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 2 * 8 * 2 * 3);
}
