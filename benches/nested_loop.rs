//! (Under construction.)
mod common;

fn main() {
    let Some(_h) = common::Harness::new("nested_loop") else { return };
}
