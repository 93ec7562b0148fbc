//! `cargo xtask <command>`: gpujoin's task runner.
//!
//! | command | what it does |
//! |---|---|
//! | `toolkit [--nccl]` | finds a CUDA toolkit, or provisions the pinned CUDA 13.0 wheels into the cache; `--nccl`: also finds (or provisions, from the `nvidia-nccl-cu13` wheel) NCCL for the multi-GPU joins and prints the folder to put on `LD_LIBRARY_PATH` |
//! | `build` | provisions if needed, then `cargo build --release` |
//! | `test` | provisions if needed, checks the bindings, then `cargo test` on the workspace; ends with the count of GPU tests that skipped for lack of a device |
//! | `demo [args]` | provisions if needed, then runs `gpujoin demo [args]` (gpujoin-cli: TPC-H generated in process, the join-heavy queries with DataFusion's CPU joins and with GPU joins) |
//! | `seeds` | provisions if needed, then runs the seed documents' examples (`gpujoin-demo`) |
//! | `bench` | runs the benchmarks here (needs a GPU) and collates `benches/results/` |
//! | `collate DIR` | turns the CSV rows that a bundle run wrote into DIR into `benches/results/` |
//! | `bundle` | builds release test and bench executables into `bundle/` with a runner script |
//! | `sanitize [tool...] [filter]` | runs every GPU test under compute-sanitizer (memcheck, racecheck, synccheck, initcheck), one process per tool and test, `nproc` at once, at `GPUJOIN_TEST_SIZE=small`; needs a GPU |
//! | `bindgen [--check]` | regenerates (or checks) the committed Rust declarations of `cuda/include/*.h` |

mod bench;
mod bindings;
mod bundle;
mod sanitize;
mod skips;
mod toolkit;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

pub type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = args.first().map(String::as_str).unwrap_or("help");
    let rest = &args[args.len().min(1)..];
    let result = match cmd {
        "toolkit" => toolkit::ensure().map(|t| println!("CUDA toolkit: {} ({})", t.root.display(), t.source)).and_then(|()| {
            if rest.iter().any(|a| a == "--nccl") {
                toolkit::nccl().map(|dir| println!("NCCL: {} (put it on LD_LIBRARY_PATH)", dir.display()))
            } else {
                Ok(())
            }
        }),
        "build" => cargo_with_toolkit(&["build", "--release", "--workspace"], rest),
        "test" => return test(rest),
        "demo" => cargo_with_toolkit(&["run", "--release", "--quiet", "-p", "gpujoin-cli", "--bin", "gpujoin", "--", "demo"], rest),
        "seeds" => cargo_with_toolkit(&["run", "--release", "--quiet", "--bin", "gpujoin-demo", "--"], rest),
        "bench" => bench::run_local(rest),
        "collate" => bench::collate(rest),
        "bundle" => bundle::build(rest),
        "sanitize" => sanitize::run(rest),
        "bindgen" => bindings::run(rest.iter().any(|a| a == "--check")),
        _ => {
            println!("{}", include_str!("main.rs").lines().take_while(|l| l.starts_with("//!")).map(|l| l.trim_start_matches("//!").trim_start()).collect::<Vec<_>>().join("\n"));
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {cmd}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (parent of `xtask/`).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A `cargo` command in the workspace root with the toolkit's environment set.
pub fn cargo(args: &[&str]) -> Result<Command> {
    let tk = toolkit::ensure()?;
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root()).args(args).env("NVCC", &tk.nvcc);
    Ok(c)
}

pub fn run(mut c: Command) -> Result<()> {
    let status = c.status().map_err(|e| format!("could not start {c:?}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{c:?} failed with {status}")) }
}

fn cargo_with_toolkit(args: &[&str], rest: &[String]) -> Result<()> {
    let mut c = cargo(args)?;
    c.args(rest);
    run(c)
}

/// The README's test command: bindings check (where libclang is present), then every test, then
/// one line counting the GPU tests that skipped for lack of a device (after cargo's own
/// `test result:` lines). Exits with cargo's status.
fn test(rest: &[String]) -> ExitCode {
    match bindings::run(true) {
        Ok(()) => {}
        Err(e) if e.contains("libclang") && std::env::var_os("CI").is_none() => {
            eprintln!("xtask test: skipping the bindings check: {e}")
        }
        Err(e) => {
            eprintln!("xtask test: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut c = match cargo(&["test", "--workspace"]) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xtask test: {e}");
            return ExitCode::FAILURE;
        }
    };
    c.args(rest);
    // Every skip appends a line to this file (`gpujoin_device::testing::report_skip`): libtest
    // captures a passing test's `SKIPPED` line, the file sees them all.
    let log = skips::Log::new();
    c.env("GPUJOIN_SKIP_LOG", log.path());
    let status = match c.status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xtask test: could not start {c:?}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !status.success() {
        eprintln!("xtask test: cargo test failed with {status}");
    }
    println!("{}", skips::summary(&log.read()));
    exit_code(status)
}

/// The exit code of a finished child: its own, or 128 + the signal that ended it.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return ExitCode::from((128 + sig).clamp(0, 255) as u8);
        }
    }
    ExitCode::FAILURE
}
