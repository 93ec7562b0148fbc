//! Helpers shared by the join test files.
#![allow(dead_code)]

pub mod payloads;

use gpujoin_device::testing::device_or_skip;
use gpujoin_device::Stream;
use gpujoin_join::{GatherMaps, JoinType, RowId};
use gpujoin_testkit::reference;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rand::rngs::StdRng;
use rand::Rng;

/// The maps as canonical pairs, after checking their shape (semi/anti joins have one map; the
/// others two of equal length) and `rows()`.
pub fn canonical_pairs(maps: &GatherMaps, jt: JoinType) -> Result<Vec<(RowId, RowId)>, TestCaseError> {
    prop_assert_eq!(maps.join_type(), jt);
    let (l, r) = maps.to_host().map_err(|e| fail(format!("{jt:?}: reading the maps: {e}")))?;
    let pairs = reference::try_pairs_from_maps(&l, &r, jt)
        .map_err(|e| fail(format!("{jt:?}: malformed gather maps ({} left, {} right entries): {e}", l.len(), r.len())))?;
    prop_assert_eq!(maps.rows(), pairs.len() as u64, "{:?}: rows()", jt);
    Ok(pairs)
}

/// What differs between two canonical pair lists (both sorted).
pub fn diff(got: &[(RowId, RowId)], want: &[(RowId, RowId)]) -> String {
    let (mut i, mut j) = (0, 0);
    let (mut missing, mut extra) = (Vec::new(), Vec::new());
    while i < got.len() || j < want.len() {
        if j == want.len() || (i < got.len() && got[i] < want[j]) {
            extra.push(got[i]);
            i += 1;
        } else if i == got.len() || want[j] < got[i] {
            missing.push(want[j]);
            j += 1;
        } else {
            i += 1;
            j += 1;
        }
    }
    let head = |v: &[(RowId, RowId)]| format!("{:?}", &v[..v.len().min(12)]);
    format!(
        "{} rows, expected {}; {} missing (first {}), {} extra (first {})",
        got.len(),
        want.len(),
        missing.len(),
        head(&missing),
        extra.len(),
        head(&extra)
    )
}

pub fn fail(msg: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(msg.into())
}

pub fn stream(test: &str) -> Option<Stream> {
    device_or_skip(test).map(|d| d.new_stream().expect("stream"))
}

pub fn uniform(rng: &mut StdRng, n: usize, domain: u64) -> Vec<u64> {
    (0..n).map(|_| rng.gen_range(0..domain.max(1))).collect()
}
