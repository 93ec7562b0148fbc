//! The algorithms' own entry points (feature `algorithms`) take the table model's views: key
//! columns as a `TableView` checked by `keys::check_keys`, payload columns as `ColumnView`s.
//! What they cannot read in place is a typed error naming the column, never a panic and never a
//! silently different answer; what they can is joined as the front door joins it.
//!
//! GPU tests: they print `SKIPPED` without a device.

mod common;
use common::stream;

use gpujoin_device::Error;
use gpujoin_join::keys::{check_comparable, check_keys};
use gpujoin_join::device_relation::{check_relation, upload};
use gpujoin_join::predicate::{col_l, col_r, schema_of};
use gpujoin_join::table::{ColumnView, DataType, HostColumn, HostTable, Table, TableView};
use gpujoin_join::theta::theta_join;
use gpujoin_join::wide::{self, Algorithm, WideJoinOptions};
use gpujoin_join::{materialize, partitioned_hash_join_with_payloads, sort_merge_join, JoinOptions, JoinType, Materialization, Side};

#[test]
fn algorithm_entry_points_refuse_what_only_the_front_door_prepares() {
    let Some(s) = stream("algorithm_entry_points_refuse_what_only_the_front_door_prepares") else { return };
    let opts = JoinOptions::default();
    // Int8 keys: the front door widens them; the algorithms refuse them by name.
    let narrow = gpujoin_join::table::Column::upload(&s, &HostColumn::from_values(vec![1i8, 2, 3])).unwrap();
    let ints = s.copy_from_host(&[1i32, 2, 3]).unwrap();
    let narrow_keys = TableView::new(vec![("k8", narrow.view())]).unwrap();
    match sort_merge_join(&s, &narrow_keys, &TableView::single(ints.view()), JoinType::Inner, opts) {
        Err(Error::Unsupported { what, .. }) => assert!(what.contains("\"k8\"") && what.contains("Int8"), "{what}"),
        other => panic!("Int8 keys: {:?}", other.map(|m| m.rows())),
    }
    // Key types that differ across sides.
    let longs = s.copy_from_host(&[1i64, 2, 3]).unwrap();
    assert!(matches!(check_comparable(&TableView::single(ints.view()), &TableView::single(longs.view())), Err(Error::TypeMismatch { .. })));
    // Date32 and Int32 keys are both read as i32: comparable, and they join.
    let dates = gpujoin_join::table::Column::upload(&s, &HostColumn::from_values(vec![3i32, 9]).with_type(DataType::Date32).unwrap()).unwrap();
    let date_keys = TableView::new(vec![("d", dates.view())]).unwrap();
    let maps = sort_merge_join(&s, &date_keys, &TableView::single(ints.view()), JoinType::Inner, opts).unwrap();
    assert_eq!(maps.rows(), 1); // 3 = 3
    // A validity bitmap the kernels cannot read as words: a sliced nullable column, and one of
    // whole bytes only (10 rows, 2 bytes). Both refused by check_keys, not read past their end.
    let values = s.copy_from_host(&[5u32; 10]).unwrap();
    let two_bytes = s.copy_from_host(&[0xffu8, 0x03]).unwrap();
    let unpadded = ColumnView::from_values(values.view()).with_validity(two_bytes.view()).unwrap();
    match check_keys(&TableView::unnamed(vec![unpadded]).unwrap()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("validity"), "{m}"),
        other => panic!("unpadded validity: {other:?}"),
    }
    let words = s.copy_from_host(&[0x3ffu32]).unwrap();
    let padded = ColumnView::from_values(values.view()).with_validity(words.view().as_bytes()).unwrap();
    check_keys(&TableView::unnamed(vec![padded]).unwrap()).unwrap();
    match check_keys(&TableView::unnamed(vec![padded.slice(3, 5).unwrap()]).unwrap()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("offset 3"), "{m}"),
        other => panic!("sliced nullable keys: {other:?}"),
    }
    // A nullable key with word validity joins as the front door joins it: row 1 null.
    let nullable = s.copy_from_host(&[4u32, 5, 6]).unwrap();
    let bits = s.copy_from_host(&[0b101u32]).unwrap();
    let nk = TableView::unnamed(vec![ColumnView::from_values(nullable.view()).with_validity(bits.view().as_bytes()).unwrap()]).unwrap();
    let other = s.copy_from_host(&[5u32, 6]).unwrap();
    assert_eq!(sort_merge_join(&s, &nk, &TableView::single(other.view()), JoinType::Inner, opts).unwrap().rows(), 1); // 6 = 6; NULL matches nothing
    // Payloads: a validity bitmap, or a type of neither 4 nor 8 bytes, is refused by name.
    let (lk, rk) = (TableView::single(ints.view()), TableView::single(ints.view()));
    let payload = s.copy_from_host(&[10u32, 20, 30]).unwrap();
    let mask = s.copy_from_host(&[0b011u32]).unwrap();
    let nullable_payload = ColumnView::from_values(payload.view()).with_validity(mask.view().as_bytes()).unwrap();
    for (bad, what) in [(nullable_payload, "validity"), (narrow.view(), "Int8")] {
        match partitioned_hash_join_with_payloads(&s, &lk, &[bad], &rk, &[], JoinType::Inner, opts, Materialization::Clustered) {
            Err(Error::Unsupported { what: w, .. }) => assert!(w.contains("left payload column 0") && w.contains(what), "{w}"),
            other => panic!("payload {what}: {:?}", other.map(|o| o.rows)),
        }
        let l = (&lk, std::slice::from_ref(&bad));
        assert!(matches!(wide::join(&s, l, (&rk, &[]), JoinType::Inner, Algorithm::PhjUm, WideJoinOptions::default()), Err(Error::Unsupported { .. })));
    }
    // Payload types travel: a Date32 payload comes back as Date32 with its values.
    let out = wide::join(&s, (&lk, &[dates.view()]), (&rk, &[]), JoinType::Inner, Algorithm::SmjOm, WideJoinOptions::default());
    assert!(matches!(out, Err(Error::InvalidArgument(_))), "a payload shorter than its keys"); // 2 rows against 3 keys
    let maps = sort_merge_join(&s, &lk, &rk, JoinType::Inner, opts).unwrap();
    let dated = gpujoin_join::table::Column::upload(&s, &HostColumn::from_values(vec![7i32, 8, 9]).with_type(DataType::Date32).unwrap()).unwrap();
    let m = materialize(&s, &maps, Side::Left, &[dated.view()]).unwrap();
    assert_eq!(m.columns()[0].data_type(), DataType::Date32);
    let mut got: Vec<i32> = s.copy_to_host(&m.columns()[0].view().typed::<i32>().unwrap()).unwrap();
    got.sort_unstable();
    assert_eq!(got, [7, 8, 9]);
    for algorithm in [Algorithm::SmjUm, Algorithm::SmjOm, Algorithm::PhjUm, Algorithm::PhjOm, Algorithm::Nphj] {
        let out = wide::join(&s, (&lk, &[dated.view()]), (&rk, &[]), JoinType::Inner, algorithm, WideJoinOptions::default()).unwrap();
        let left = out.left.expect("inner joins keep the left side");
        assert_eq!(left.columns()[0].data_type(), DataType::Date32, "{algorithm:?}");
        let mut got: Vec<i32> = s.copy_to_host(&left.columns()[0].view().typed::<i32>().unwrap()).unwrap();
        got.sort_unstable();
        assert_eq!(got, [7, 8, 9], "{algorithm:?}");
    }
    // An outer join's side without a partner: every payload column of that side carries the
    // side's validity (key 3 has no right row), and its null rows read zero.
    let short = TableView::single(ints.view().slice(0..2));
    let (p32, p64) = (s.copy_from_host(&[100u32, 200]).unwrap(), s.copy_from_host(&[1000i64, 2000]).unwrap());
    let right_cols = [ColumnView::from_values(p32.view()), ColumnView::from_values(p64.view())];
    for algorithm in [Algorithm::SmjUm, Algorithm::SmjOm, Algorithm::PhjUm, Algorithm::PhjOm, Algorithm::Nphj] {
        let out = wide::join(&s, (&lk, &[]), (&short, &right_cols), JoinType::Left, algorithm, WideJoinOptions::default()).unwrap();
        let right = out.right.expect("left joins keep the right side").to_host().unwrap();
        assert_eq!(right.columns().len(), 2, "{algorithm:?}");
        let rows: Vec<(Option<u32>, Option<i64>)> = (0..3)
            .map(|k| {
                let (a, b) = (&right.columns()[0], &right.columns()[1]);
                assert_eq!(a.is_valid(k), b.is_valid(k), "{algorithm:?}: row {k}");
                let a = a.is_valid(k).then(|| u32::from_le_bytes(a.values_buffer()[k * 4..k * 4 + 4].try_into().unwrap()));
                let b = b.is_valid(k).then(|| i64::from_le_bytes(b.values_buffer()[k * 8..k * 8 + 8].try_into().unwrap()));
                (a, b)
            })
            .collect();
        let mut rows = rows;
        rows.sort_unstable();
        assert_eq!(rows, [(None, None), (Some(100), Some(1000)), (Some(200), Some(2000))], "{algorithm:?}");
    }

    // Theta relations: a column the kernels do not read (Int16) is refused by name, never read
    // as another type; `device_relation::upload` converts it (widened to Int32) and the join runs.
    let (l, r) = (
        HostTable::new(vec![("a", HostColumn::from_values(vec![1i16, 5, 9]))]).unwrap(),
        HostTable::new(vec![("b", HostColumn::from_values(vec![4i16, 8]))]).unwrap(),
    );
    let pred = col_l(0).greater(col_r(0)).check(&schema_of(&l).unwrap(), &schema_of(&r).unwrap()).unwrap();
    let (raw_l, raw_r) = (Table::upload(&s, &l).unwrap(), Table::upload(&s, &r).unwrap());
    match theta_join(&s, &raw_l.view(), &raw_r.view(), &pred, JoinType::Inner) {
        Err(Error::Unsupported { what, .. }) => assert!(what.contains("\"a\"") && what.contains("Int16"), "{what}"),
        other => panic!("an Int16 relation column: {:?}", other.map(|m| m.rows())),
    }
    assert!(check_relation(&raw_l.view()).is_err());
    let (dl, dr) = (upload(&s, &l).unwrap(), upload(&s, &r).unwrap());
    check_relation(&dl.view()).unwrap();
    assert_eq!(dl.columns()[0].data_type(), DataType::Int32);
    assert_eq!(theta_join(&s, &dl.view(), &dr.view(), &pred, JoinType::Inner).unwrap().rows(), 3); // 5>4, 9>4, 9>8
}
