//! Record batches of every Arrow type gpujoin holds, for the tests.
#![allow(dead_code)]

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int16Type;
use arrow_array::*;
use arrow_schema::{DataType as A, Field, Schema};
use rand::rngs::StdRng;
use rand::Rng;

/// A string of about `len` bytes mixing ASCII and multi-byte UTF-8.
pub fn text(rng: &mut StdRng, domain: u32, len: usize) -> String {
    let k = rng.gen_range(0..domain.max(1));
    let mut s = format!("{k}-é€");
    while s.len() < len {
        s.push(['a', 'ß', '字', '😀'][rng.gen_range(0..4)]);
    }
    s
}

/// A batch of `n` rows with one column of every supported Arrow type (nulls at about
/// `null_pct` percent, values from a small domain so that keys repeat).
pub fn every_type(rng: &mut StdRng, n: usize, null_pct: u32, domain: i64) -> RecordBatch {
    let mut v = |_: ()| -> Vec<Option<i64>> { (0..n).map(|_| (rng.gen_range(0..100) >= null_pct).then(|| rng.gen_range(0..domain.max(1)))).collect() };
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("i8", Arc::new(Int8Array::from(v(()).iter().map(|x| x.map(|x| (x - 3) as i8)).collect::<Vec<_>>()))),
        ("i16", Arc::new(Int16Array::from(v(()).iter().map(|x| x.map(|x| x as i16 * 301)).collect::<Vec<_>>()))),
        ("i32", Arc::new(Int32Array::from(v(()).iter().map(|x| x.map(|x| x as i32 - 7)).collect::<Vec<_>>()))),
        ("i64", Arc::new(Int64Array::from(v(()).iter().map(|x| x.map(|x| x << 40)).collect::<Vec<_>>()))),
        ("u8", Arc::new(UInt8Array::from(v(()).iter().map(|x| x.map(|x| x as u8)).collect::<Vec<_>>()))),
        ("u16", Arc::new(UInt16Array::from(v(()).iter().map(|x| x.map(|x| x as u16)).collect::<Vec<_>>()))),
        ("u32", Arc::new(UInt32Array::from(v(()).iter().map(|x| x.map(|x| x as u32 * 65_537)).collect::<Vec<_>>()))),
        ("u64", Arc::new(UInt64Array::from(v(()).iter().map(|x| x.map(|x| (x as u64) << 50)).collect::<Vec<_>>()))),
        ("f32", Arc::new(Float32Array::from(v(()).iter().map(|x| x.map(|x| if x == 1 { f32::NAN } else if x == 2 { -0.0 } else { x as f32 / 4.0 })).collect::<Vec<_>>()))),
        ("f64", Arc::new(Float64Array::from(v(()).iter().map(|x| x.map(|x| if x == 1 { f64::NAN } else if x == 2 { -0.0 } else { x as f64 / 8.0 })).collect::<Vec<_>>()))),
        ("bool", Arc::new(BooleanArray::from(v(()).iter().map(|x| x.map(|x| x % 2 == 0)).collect::<Vec<_>>()))),
        ("date32", Arc::new(Date32Array::from(v(()).iter().map(|x| x.map(|x| x as i32 + 19_000)).collect::<Vec<_>>()))),
        ("date64", Arc::new(Date64Array::from(v(()).iter().map(|x| x.map(|x| x * 86_400_000)).collect::<Vec<_>>()))),
        ("ts", Arc::new(TimestampMicrosecondArray::from(v(()).iter().map(|x| x.map(|x| x * 1_000_003)).collect::<Vec<_>>()).with_timezone("UTC"))),
        ("dec", Arc::new(Decimal128Array::from(v(()).iter().map(|x| x.map(|x| x as i128 * 1_000_000_000_007)).collect::<Vec<_>>()).with_precision_and_scale(38, 2).unwrap())),
        ("utf8", Arc::new(StringArray::from(v(()).iter().map(|x| x.map(|x| format!("s{x}é"))).collect::<Vec<_>>()))),
        ("large", Arc::new(LargeStringArray::from(v(()).iter().map(|x| x.map(|x| format!("{}", "ab".repeat(x as usize % 9)))).collect::<Vec<_>>()))),
        ("view", Arc::new(StringViewArray::from(v(()).iter().map(|x| x.map(|x| format!("a view longer than twelve bytes {x}"))).collect::<Vec<_>>()))),
        ("dict", {
            // Unused entries, and a null among the values.
            let values: ArrayRef = Arc::new(StringArray::from(vec![Some("zero"), Some("unused"), None, Some("three"), Some("four")]));
            let keys = Int16Array::from(v(()).iter().map(|x| x.map(|x| [0i16, 2, 3, 4][x as usize % 4])).collect::<Vec<_>>());
            Arc::new(DictionaryArray::<Int16Type>::try_new(keys, values).unwrap())
        }),
    ];
    RecordBatch::try_from_iter_with_nullable(cols.into_iter().map(|(n, a)| (n, a, true))).unwrap()
}

/// Column names of [`every_type`] usable as join keys.
pub const KEY_COLUMNS: [&str; 19] = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64", "bool", "date32", "date64", "ts", "dec", "utf8", "large", "view", "dict"];

/// `b` with its dictionary columns decoded (what comes back from the device).
pub fn decoded(b: &RecordBatch) -> RecordBatch {
    let mut fields = Vec::new();
    let mut cols = Vec::new();
    for (f, c) in b.schema().fields().iter().zip(b.columns()) {
        match f.data_type() {
            A::Dictionary(_, v) => {
                let d = c.as_any_dictionary();
                cols.push(arrow_select::take::take(d.values().as_ref(), d.keys(), None).unwrap());
                fields.push(Field::new(f.name(), v.as_ref().clone(), true));
            }
            _ => {
                cols.push(c.clone());
                fields.push(f.as_ref().clone());
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}
