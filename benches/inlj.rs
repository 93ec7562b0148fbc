//! (Under construction.)
mod common;

fn main() {
    let Some(_h) = common::Harness::new("inlj") else { return };
}
