//! `gpujoin`: see the crate docs (`gpujoin --help`).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match gpujoin_cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print and succeed; usage errors exit with status 1.
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpujoin: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(gpujoin_cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpujoin: error: {e}");
            ExitCode::FAILURE
        }
    }
}
