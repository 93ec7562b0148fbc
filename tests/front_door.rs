//! The README's two-table example, run as a GPU test: the printed output in the README is this
//! test's output.

use gpujoin::device::testing::device_or_skip;
use gpujoin::join::plan::{Algorithm, Gather, Join};
use gpujoin::join::table::{HostColumn, HostTable, Table};
use gpujoin::join::JoinType;

#[test]
fn readme_two_table_example() {
    let Some(device) = device_or_skip("readme_two_table_example") else { return };
    let s = device.new_stream().unwrap();
    let orders = Table::upload(&s, &HostTable::new(vec![
        ("order", HostColumn::from_values(vec![10i64, 11, 12, 13])),
        ("cust", HostColumn::utf8(["ann", "bob", "zoe", "bob"])),
    ]).unwrap()).unwrap();
    let customers = Table::upload(&s, &HostTable::new(vec![
        ("id", HostColumn::utf8(["bob", "ann", "cy"])),
        ("city", HostColumn::utf8_options([Some("Oslo"), None, Some("Rome")])),
    ]).unwrap()).unwrap();
    let join = Join::new(JoinType::Left)
        .on(&orders, &["cust"], &customers, &["id"])
        .select(&["order"], &["city"])
        .algorithm(Algorithm::SortMerge(Gather::Unclustered)); // output in key order
    print!("{}", join.explain().unwrap());
    let out = join.run(&s).unwrap();
    let table = out.table.to_host().unwrap();
    print!("{table}");
    assert_eq!(table.to_string(), "order | city\n------+-----\n10    | NULL\n11    | Oslo\n13    | Oslo\n12    | NULL\n");
}
