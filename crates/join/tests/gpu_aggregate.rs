//! `Join::aggregate` of equi-joins without pairs (issue 9) against a CPU reference: the reference
//! join's pairs (`gpujoin_testkit::table_reference::join`) folded on the host. Every join type x
//! COUNT(*) / COUNT / SUM / MIN / MAX x a column of either side x both NULL equalities x nullable
//! and non-null keys and aggregated columns x i32, i64, u64, f64, f32, Date32 and i16 columns x
//! one-column, composite (exact and ranked), string, plain `u32` and float (NaN under both
//! equalities) keys; sizes 0, 1, odd, ~5000; all-duplicate keys (3000 x 3000 rows of one key:
//! 9M output rows, aggregated within a few MB: no maps); no matches; sliced inputs; typed errors.
//!
//! Semantics checked: NULL values and the null side of outer rows are skipped; SUM/MIN/MAX over
//! no value is `AggValue::None`; integer SUM is exact in `i128` (the i64 and u64 columns' sums
//! exceed 64 bits); float MIN/MAX is NaN once a value is NaN; float SUM is compared with a
//! tolerance (the device adds in another order than the pairs').
//!
//! GPU tests: they print SKIPPED without a device and fail with GPUJOIN_REQUIRE_GPU=1; under
//! GPUJOIN_TEST_SIZE=small only a few small cases run.

use std::sync::Mutex;

use gpujoin_device::testing::{device_or_skip, pick, rows};
use gpujoin_device::{Error, Stream};
use gpujoin_join::memory::{working_bytes, JoinSizes, KeyShape, PeakAlgorithm};
use gpujoin_join::plan::Join;
use gpujoin_join::table::{DataType, HostColumn, HostTable, Table, Value};
use gpujoin_join::theta::{Agg, AggValue};
use gpujoin_join::{JoinType, NanEquality, NullEquality, Side};
use gpujoin_testkit::table_reference;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The tests measure the device's peak memory: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn stream(test: &str) -> Option<Stream> {
    device_or_skip(test).map(|d| d.new_stream().expect("stream"))
}

// ---- The reference: the pairs folded on the host --------------------------------------------

type Pairs = Vec<(Option<u32>, Option<u32>)>;

/// The valid values of `column` of `side` over the output rows `pairs`.
fn values<'t>(pairs: &Pairs, side: Side, t: &'t HostTable, column: &str) -> Vec<Value<'t>> {
    let c = t.column(column).expect("column").values();
    pairs.iter().filter_map(|p| if side == Side::Left { p.0 } else { p.1 }).map(|i| c[i as usize]).filter(|v| *v != Value::Null).collect()
}

/// The aggregate of the values as `Join::aggregate` defines it; with the sum of the absolute
/// values of a float column (the scale of its SUM's rounding).
fn fold(vals: &[Value<'_>], agg: Agg) -> (AggValue, f64) {
    if agg == Agg::Count {
        return (AggValue::Int(vals.len() as i128), 0.0);
    }
    if vals.is_empty() {
        return (AggValue::None, 0.0);
    }
    if let Value::Float(_) = vals[0] {
        let f: Vec<f64> = vals.iter().map(|v| if let Value::Float(x) = v { *x } else { panic!("mixed values") }).collect();
        let nan = f.iter().any(|x| x.is_nan());
        let v = match agg {
            Agg::Sum => f.iter().sum(),
            _ if nan => f64::NAN,
            Agg::Min => f.iter().copied().fold(f64::INFINITY, f64::min),
            _ => f.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        };
        return (AggValue::Float(v), f.iter().map(|x| x.abs()).sum());
    }
    let n: Vec<i128> = vals.iter().map(|v| if let Value::Int(x) = v { *x } else { panic!("not an integer: {v:?}") }).collect();
    (AggValue::Int(match agg {
        Agg::Sum => n.iter().sum(),
        Agg::Min => *n.iter().min().unwrap(),
        _ => *n.iter().max().unwrap(),
    }), 0.0)
}

/// Whether `got` is `want`: integers and None exactly, floats exactly but for a SUM (within
/// `1e-9` of the sum of the absolute values), NaN equal to NaN.
fn same(got: AggValue, want: AggValue, agg: Agg, scale: f64) -> bool {
    match (got, want) {
        (AggValue::Float(g), AggValue::Float(w)) if g.is_nan() || w.is_nan() => g.is_nan() && w.is_nan(),
        (AggValue::Float(g), AggValue::Float(w)) if agg == Agg::Sum => (g - w).abs() <= 1e-9 * scale + 1e-12,
        (g, w) => g == w,
    }
}

// ---- Tables ---------------------------------------------------------------------------------

/// The aggregated columns (name, nullable): i64 and f32 without a validity, the others with one.
const COLUMNS: [&str; 8] = ["i32", "i64", "u64", "f64", "fnan", "f32", "d32", "i16"];

/// A table of `n` rows whose keys are drawn from `offset + 0..domain` (so they repeat and
/// match), `null_pct` percent NULL in the nullable key and value columns. Keys: `k` (Int32),
/// `k2` (Int64, for a composite too wide to pack: ranked), `k3` (Int16, for a composite that
/// packs into 64 bits), `s` (Utf8), `u` (UInt32 without nulls: the plain path), `f` (Float64
/// with NaN, -0.0 and 0.0).
fn table(rng: &mut StdRng, n: usize, domain: i64, offset: i64, null_pct: u32) -> HostTable {
    let valid = |rng: &mut StdRng| -> Vec<bool> { (0..n).map(|_| rng.gen_range(0..100) >= null_pct).collect() };
    let keys: Vec<i64> = (0..n).map(|_| offset + rng.gen_range(0..domain.max(1))).collect();
    let v = [valid(rng), valid(rng), valid(rng), valid(rng), valid(rng), valid(rng), valid(rng), valid(rng), valid(rng), valid(rng)];
    let with = |c: HostColumn, i: usize| c.with_validity(&v[i]).unwrap();
    let fkey = |x: i64| match x % 7 {
        0 => f64::NAN,
        1 => -0.0,
        2 => 0.0,
        _ => x as f64 * 0.5,
    };
    HostTable::new(vec![
        ("k", with(HostColumn::from_values(keys.iter().map(|&x| x as i32).collect::<Vec<_>>()), 0)),
        ("k2", with(HostColumn::from_values(keys.iter().map(|&x| (x % 3 - 1) << 40).collect::<Vec<i64>>()), 1)),
        ("k3", with(HostColumn::from_values(keys.iter().map(|&x| (x % 4) as i16).collect::<Vec<_>>()), 2)),
        ("s", with(HostColumn::utf8(keys.iter().map(|&x| if x % 5 == 0 { String::new() } else { format!("key-{x}") })), 3)),
        ("u", HostColumn::from_values(keys.iter().map(|&x| x as u32 * 65_537).collect::<Vec<_>>())),
        ("f", with(HostColumn::from_values(keys.iter().map(|&x| fkey(x)).collect::<Vec<_>>()), 4)),
        ("i32", with(HostColumn::from_values((0..n).map(|_| rng.gen_range(-1000..1000)).collect::<Vec<i32>>()), 5)),
        // Sums past 64 bits: values near +-2^62 and near u64::MAX.
        ("i64", HostColumn::from_values((0..n).map(|_| rng.gen_range(-2i64..2) * (1 << 62) + rng.gen_range(0..1000)).collect::<Vec<i64>>())),
        ("u64", with(HostColumn::from_values((0..n).map(|_| u64::MAX - rng.gen_range(0..1000)).collect::<Vec<u64>>()), 6)),
        ("f64", with(HostColumn::from_values((0..n).map(|_| rng.gen_range(-400..400) as f64 * 0.125).collect::<Vec<f64>>()), 7)),
        ("fnan", with(HostColumn::from_values((0..n).map(|_| if rng.gen_range(0..40) == 0 { f64::NAN } else { rng.gen_range(-9..9) as f64 * 0.5 }).collect::<Vec<f64>>()), 8)),
        ("f32", HostColumn::from_values((0..n).map(|_| rng.gen_range(-100..100) as f32 * 0.25).collect::<Vec<f32>>())),
        ("d32", with(HostColumn::from_values((0..n).map(|_| 19_000 + rng.gen_range(0..400)).collect::<Vec<i32>>()).with_type(DataType::Date32).unwrap(), 9)),
        ("i16", with(HostColumn::from_values((0..n).map(|_| rng.gen_range(-300..300)).collect::<Vec<i16>>()), 0)),
    ])
    .unwrap()
}

/// A key configuration: the key columns and the NaN equality.
#[derive(Clone, Copy, Debug)]
struct KeyCase {
    name: &'static str,
    keys: &'static [&'static str],
    nans: NanEquality,
}

const ONE: KeyCase = KeyCase { name: "int32", keys: &["k"], nans: NanEquality::NanEqualsNan };
const RANKED: KeyCase = KeyCase { name: "composite (ranked)", keys: &["k", "k2"], nans: NanEquality::NanEqualsNan };
const PACKED: KeyCase = KeyCase { name: "composite (packed)", keys: &["k", "k3"], nans: NanEquality::NanEqualsNan };
const STRINGS: KeyCase = KeyCase { name: "strings", keys: &["s"], nans: NanEquality::NanEqualsNan };
const PLAIN: KeyCase = KeyCase { name: "plain u32", keys: &["u"], nans: NanEquality::NanEqualsNan };
const FLOATS: KeyCase = KeyCase { name: "float, NaN = NaN", keys: &["f"], nans: NanEquality::NanEqualsNan };
const FLOATS_NEVER: KeyCase = KeyCase { name: "float, NaN never equal", keys: &["f"], nans: NanEquality::NanNeverEqual };

const AGGS: [Agg; 4] = [Agg::Count, Agg::Sum, Agg::Min, Agg::Max];

/// Every aggregate of every column of both sides (and COUNT(*)) of the `jt` join of the tables
/// on `keys`, against the reference. Returns the failures.
#[allow(clippy::too_many_arguments)]
fn check_join(s: &Stream, (hl, lt): (&HostTable, &Table), (hr, rt): (&HostTable, &Table), keys: KeyCase, jt: JoinType, nulls: NullEquality, columns: &[&str], what: &str) -> Vec<String> {
    let mut fails = Vec::new();
    let pairs = table_reference::join(hl, keys.keys, hr, keys.keys, None, jt, nulls, keys.nans);
    let j = Join::new(jt).on(lt, keys.keys, rt, keys.keys).null_equality(nulls).nan_equality(keys.nans);
    let what = format!("{what}, {} keys, {jt:?}, {nulls:?}", keys.name);
    match j.aggregate(s, Agg::Count, None) {
        Ok(got) if got == AggValue::Int(pairs.len() as i128) => {}
        r => fails.push(format!("{what}: COUNT(*) = {r:?}, want {}", pairs.len())),
    }
    for side in [Side::Left, Side::Right] {
        let t = if side == Side::Left { hl } else { hr };
        let has_side = if side == Side::Left { jt.has_left_map() } else { jt.has_right_map() };
        for &col in columns {
            let vals = if has_side { values(&pairs, side, t, col) } else { Vec::new() };
            for agg in AGGS {
                let got = j.aggregate(s, agg, Some((side, col)));
                if !has_side {
                    if !matches!(got, Err(Error::InvalidArgument(_))) {
                        fails.push(format!("{what}: {agg:?}({side:?}.{col}) of a join without {side:?} rows: {got:?}, want an invalid argument"));
                    }
                    continue;
                }
                let (want, scale) = fold(&vals, agg);
                match got {
                    Ok(g) if same(g, want, agg, scale) => {}
                    r => fails.push(format!("{what}: {agg:?}({side:?}.{col}) = {r:?}, want {want:?}")),
                }
            }
        }
    }
    fails
}

fn report(fails: Vec<String>) {
    if !fails.is_empty() {
        let n = fails.len();
        panic!("{n} failures:\n{}", fails.into_iter().take(40).collect::<Vec<_>>().join("\n"));
    }
}

fn upload(s: &Stream, h: &HostTable) -> Table {
    Table::upload(s, h).unwrap()
}

// ---- Tests ----------------------------------------------------------------------------------

#[test]
fn every_join_type_aggregate_column_and_key_shape() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(s) = stream("every_join_type_aggregate_column_and_key_shape") else { return };
    let mut rng = StdRng::seed_from_u64(9);
    let all_keys = [ONE, RANKED, PACKED, STRINGS, PLAIN, FLOATS, FLOATS_NEVER];
    let key_cases: &[KeyCase] = pick(&all_keys[..], &[ONE, RANKED][..]);
    let columns: &[&str] = pick(&COLUMNS[..], &["i32", "f64"][..]);
    let nulls_all = [NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull];
    // (left rows, right rows, key domain): empty sides, one row, odd sizes.
    let sizes: &[(usize, usize, i64)] = pick(&[(0, 0, 4), (0, 7, 4), (7, 0, 4), (1, 1, 1), (1, 5, 3), (13, 29, 6), (301, 255, 40)][..], &[(13, 11, 5)][..]);
    let mut fails = Vec::new();
    for &(nl, nr, domain) in sizes {
        let (hl, hr) = (table(&mut rng, nl, domain, 0, 15), table(&mut rng, nr, domain, 0, 15));
        let (lt, rt) = (upload(&s, &hl), upload(&s, &hr));
        for &keys in key_cases {
            for jt in JoinType::ALL {
                for nulls in nulls_all {
                    fails.extend(check_join(&s, (&hl, &lt), (&hr, &rt), keys, jt, nulls, columns, &format!("{nl} x {nr}")));
                }
            }
        }
        // COUNT of a string column: its valid values.
        if nl > 0 && !hl.column("s").unwrap().is_empty() {
            let pairs = table_reference::join(&hl, &["k"], &hr, &["k"], None, JoinType::Left, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
            let got = Join::new(JoinType::Left).on(&lt, &["k"], &rt, &["k"]).aggregate(&s, Agg::Count, Some((Side::Left, "s")));
            let want = values(&pairs, Side::Left, &hl, "s").len() as i128;
            if !matches!(got, Ok(AggValue::Int(n)) if n == want) {
                fails.push(format!("{nl} x {nr}: COUNT(left.s) = {got:?}, want {want}"));
            }
        }
    }
    report(fails);
}

#[test]
fn about_five_thousand_rows() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(s) = stream("about_five_thousand_rows") else { return };
    let mut rng = StdRng::seed_from_u64(5000);
    let (nl, nr) = (rows(4999, 301), rows(5003, 257));
    let (hl, hr) = (table(&mut rng, nl, 2000, 0, 10), table(&mut rng, nr, 2000, 0, 10));
    let (lt, rt) = (upload(&s, &hl), upload(&s, &hr));
    let key_cases: &[KeyCase] = pick(&[ONE, STRINGS, RANKED][..], &[ONE][..]);
    let nulls_all: &[NullEquality] = pick(&[NullEquality::NullEqualsNothing, NullEquality::NullEqualsNull][..], &[NullEquality::NullEqualsNull][..]);
    let jts: &[JoinType] = pick(&JoinType::ALL[..], &[JoinType::Full, JoinType::LeftAnti][..]);
    let mut fails = Vec::new();
    for &keys in key_cases {
        for &jt in jts {
            for &nulls in nulls_all {
                fails.extend(check_join(&s, (&hl, &lt), (&hr, &rt), keys, jt, nulls, pick(&COLUMNS[..], &["i64", "fnan"][..]), &format!("{nl} x {nr}")));
            }
        }
    }
    report(fails);
}

#[test]
fn all_duplicate_keys_aggregate_without_maps() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(s) = stream("all_duplicate_keys_aggregate_without_maps") else { return };
    let mut rng = StdRng::seed_from_u64(3000);
    // Every key 7: n x n output rows (9M at full size), the maps of which would take 72 MB.
    let n = rows(3000, 40);
    let (hl, hr) = (table(&mut rng, n, 1, 7, 0), table(&mut rng, n, 1, 7, 0));
    let (lt, rt) = (upload(&s, &hl), upload(&s, &hr));
    let mut fails = Vec::new();
    let jts: &[JoinType] = pick(&[JoinType::Inner, JoinType::Full, JoinType::LeftSemi, JoinType::RightAnti][..], &[JoinType::Inner][..]);
    for &jt in jts {
        fails.extend(check_join(&s, (&hl, &lt), (&hr, &rt), ONE, jt, NullEquality::NullEqualsNothing, pick(&["u64", "f64"][..], &["u64"][..]), &format!("{n} x {n} of one key")));
    }
    // The peak: the aggregate's plan (no output), far below the maps' n * n * 8 bytes.
    let device = s.device();
    let j = Join::new(JoinType::Inner).on(&lt, &["k"], &rt, &["k"]);
    device.synchronize().unwrap();
    let before = device.pool_memory().unwrap().in_use;
    device.reset_peak_memory().unwrap();
    let got = j.aggregate(&s, Agg::Sum, Some((Side::Right, "u64"))).unwrap();
    s.synchronize().unwrap();
    let measured = device.peak_memory().unwrap().saturating_sub(before);
    let want = fold(&values(&table_reference::join(&hl, &["k"], &hr, &["k"], None, JoinType::Inner, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan), Side::Right, &hr, "u64"), Agg::Sum).0;
    if got != want {
        fails.push(format!("SUM(right.u64) = {got:?}, want {want:?}"));
    }
    let keys = KeyShape { nullable: true, ..KeyShape::integer(4) };
    let bound = working_bytes(PeakAlgorithm::EquiAggregate { side: Side::Right }, &JoinSizes::inner(n as u64, n as u64, keys, (n * n) as u64));
    let maps = (n * n * 8) as u64;
    if measured > bound {
        fails.push(format!("peak {measured} bytes over the plan's {bound}"));
    }
    if n >= 3000 && measured >= maps / 8 {
        fails.push(format!("peak {measured} bytes: not far below the {maps} bytes of the maps"));
    }
    report(fails);
}

#[test]
fn no_matches_and_sliced_inputs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(s) = stream("no_matches_and_sliced_inputs") else { return };
    let mut rng = StdRng::seed_from_u64(404);
    let mut fails = Vec::new();
    // Disjoint key domains: inner and semi joins aggregate over nothing (None; COUNT 0), outer
    // and anti joins over every row of their side.
    let (nl, nr) = (rows(501, 9), rows(703, 11));
    let (hl, hr) = (table(&mut rng, nl, 100, 0, 10), table(&mut rng, nr, 100, 1000, 10));
    let (lt, rt) = (upload(&s, &hl), upload(&s, &hr));
    let key_cases: &[KeyCase] = pick(&[ONE, STRINGS, PLAIN][..], &[ONE][..]);
    let jts: &[JoinType] = pick(&JoinType::ALL[..], &[JoinType::Inner, JoinType::Full][..]);
    for &keys in key_cases {
        for &jt in jts {
            fails.extend(check_join(&s, (&hl, &lt), (&hr, &rt), keys, jt, NullEquality::NullEqualsNull, pick(&COLUMNS[..], &["i32"][..]), "no matches"));
        }
    }
    let j = Join::new(JoinType::Inner).on(&lt, &["k"], &rt, &["k"]);
    if !matches!(j.aggregate(&s, Agg::Sum, Some((Side::Left, "i64"))), Ok(AggValue::None)) {
        fails.push("SUM over no pairs is not None".into());
    }
    // Sliced tables (a validity starting mid-byte): the slice's rows only.
    let (n, m) = (rows(300, 40), rows(280, 36));
    let (hl, hr) = (table(&mut rng, n, 25, 0, 20), table(&mut rng, m, 25, 0, 20));
    let (lt, rt) = (upload(&s, &hl), upload(&s, &hr));
    let (lv, rv) = (lt.view().slice(3, n - 10).unwrap(), rt.view().slice(5, m - 7).unwrap());
    let (hlv, hrv) = (lv.to_host(&s).unwrap(), rv.to_host(&s).unwrap());
    let (lvt, rvt) = (upload(&s, &hlv), upload(&s, &hrv));
    for jt in pick(&JoinType::ALL[..], &[JoinType::Left][..]) {
        let pairs = table_reference::join(&hlv, &["k"], &hrv, &["k"], None, *jt, NullEquality::NullEqualsNothing, NanEquality::NanEqualsNan);
        for (side, t) in [(Side::Left, &hlv), (Side::Right, &hrv)] {
            let has_side = if side == Side::Left { jt.has_left_map() } else { jt.has_right_map() };
            if !has_side {
                continue;
            }
            for col in ["i32", "d32", "f64"] {
                let vals = values(&pairs, side, t, col);
                for agg in AGGS {
                    let got = Join::new(*jt).on(lv.clone(), &["k"], rv.clone(), &["k"]).aggregate(&s, agg, Some((side, col)));
                    let (want, scale) = fold(&vals, agg);
                    if !got.as_ref().is_ok_and(|g| same(*g, want, agg, scale)) {
                        fails.push(format!("sliced {jt:?}: {agg:?}({side:?}.{col}) = {got:?}, want {want:?}"));
                    }
                    // The same rows, uploaded unsliced.
                    let whole = Join::new(*jt).on(&lvt, &["k"], &rvt, &["k"]).aggregate(&s, agg, Some((side, col)));
                    if !whole.as_ref().is_ok_and(|g| same(*g, want, agg, scale)) {
                        fails.push(format!("sliced copy {jt:?}: {agg:?}({side:?}.{col}) = {whole:?}, want {want:?}"));
                    }
                }
            }
        }
    }
    report(fails);
}

#[test]
fn typed_errors() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(s) = stream("typed_errors") else { return };
    let mut rng = StdRng::seed_from_u64(1);
    let h = table(&mut rng, 10, 4, 0, 10);
    let t = upload(&s, &h);
    let j = Join::new(JoinType::Inner).on(&t, &["k"], &t, &["k"]);
    // SUM of a string column; SUM without a column; an unknown column.
    assert!(matches!(j.aggregate(&s, Agg::Sum, Some((Side::Left, "s"))), Err(Error::Unsupported { .. })));
    assert!(matches!(j.aggregate(&s, Agg::Sum, None), Err(Error::InvalidArgument(_))));
    assert!(matches!(j.aggregate(&s, Agg::Max, Some((Side::Right, "nope"))), Err(Error::UnknownColumn { .. })));
    // A semi join has no right rows.
    let semi = Join::new(JoinType::LeftSemi).on(&t, &["k"], &t, &["k"]);
    assert!(matches!(semi.aggregate(&s, Agg::Min, Some((Side::Right, "i32"))), Err(Error::InvalidArgument(_))));
}

