//! `cargo xtask seeds`: the seed demonstrations on the GPU (see `gpujoin::demo`).

use std::process::ExitCode;

fn main() -> ExitCode {
    match gpujoin::demo::run() {
        Ok((_, text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gpujoin demo failed: {e}");
            ExitCode::FAILURE
        }
    }
}
