//! Helpers for GPU tests: run on a device when there is one, say plainly that they skipped when
//! there is none, and fail loudly when `GPUJOIN_REQUIRE_GPU=1` (set by the GPU bundle's runner).
//!
//! Environment:
//!
//! | variable | effect |
//! |---|---|
//! | `GPUJOIN_REQUIRE_GPU=1` | [`device_or_skip`] panics instead of skipping when no device opens |
//! | `GPUJOIN_SKIP_LOG=<file>` | [`device_or_skip`] also appends one line per skip to `<file>` (`cargo xtask test` counts them) |
//! | `GPUJOIN_TEST_SIZE=small` | reduced sizes: [`reduced`] is true, [`rows`] / [`cases`] / [`pick`] return their small argument (for `compute-sanitizer`, which slows kernels 10-100x); `full` or unset: the sizes of a normal run |

use std::fmt::Display;
use std::io::Write;
use std::sync::OnceLock;

use crate::{Device, Error};

static DEVICE: OnceLock<Result<Device, Error>> = OnceLock::new();

/// The shared test device, or `None` after printing `SKIPPED <test>: ...` when there is none.
///
/// Panics when `GPUJOIN_REQUIRE_GPU` is set and no device opens: on a GPU machine a missing
/// device is a failure, not a skip.
pub fn device_or_skip(test: &str) -> Option<Device> {
    let d = DEVICE.get_or_init(|| Device::new(0));
    match d {
        Ok(d) => {
            d.bind_to_thread().expect("bind the test device to this thread");
            Some(d.clone())
        }
        Err(e) => {
            if std::env::var_os("GPUJOIN_REQUIRE_GPU").is_some_and(|v| v != "0") {
                panic!("GPUJOIN_REQUIRE_GPU is set but no device opened: {e}");
            }
            report_skip(test, e);
            None
        }
    }
}

/// True when a device is present (without printing anything).
pub fn has_device() -> bool {
    DEVICE.get_or_init(|| Device::new(0)).is_ok()
}

/// Says that `test` skipped for lack of a device: prints `SKIPPED <test>: <reason>` to stderr
/// and, when `GPUJOIN_SKIP_LOG` names a file, appends `<executable>\t<test>\t<reason>` to it
/// (one `O_APPEND` write per line, so parallel tests and test executables can share the file;
/// libtest captures a passing test's output, the file is how `cargo xtask test` counts skips).
/// [`device_or_skip`] calls it; a test that skips for lack of a device in another way should too.
pub fn report_skip(test: &str, reason: impl Display) {
    let reason = reason.to_string();
    eprintln!("SKIPPED {test}: {reason}");
    let Some(path) = std::env::var_os("GPUJOIN_SKIP_LOG").filter(|p| !p.is_empty()) else { return };
    if let Err(e) = append_skip(std::path::Path::new(&path), test, &reason) {
        eprintln!("could not append to GPUJOIN_SKIP_LOG={}: {e}", std::path::Path::new(&path).display());
    }
}

/// Appends one skip-log line for `test` (this executable's name first) to `path`.
fn append_skip(path: &std::path::Path, test: &str, reason: &str) -> std::io::Result<()> {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".into());
    let line = skip_log_line(&exe, test, reason);
    std::fs::OpenOptions::new().create(true).append(true).open(path).and_then(|mut f| f.write_all(line.as_bytes()))
}

/// One line of the skip log: tabs and line breaks inside the fields become spaces.
fn skip_log_line(exe: &str, test: &str, reason: &str) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    format!("{}\t{}\t{}\n", clean(exe), clean(test), clean(reason))
}

static REDUCED: OnceLock<bool> = OnceLock::new();

/// True when `GPUJOIN_TEST_SIZE=small`: GPU tests then use their reduced sizes (see [`rows`]),
/// so that every test executable runs in seconds, also under `compute-sanitizer`. Reduced sizes
/// still cross the boundaries a test exists for (tiles, chunks, thresholds, 32-bit limits).
///
/// Panics on any other value than `small`, `full` or empty: a misspelt size must not silently
/// run the full suite under a sanitizer.
pub fn reduced() -> bool {
    *REDUCED.get_or_init(|| match parse_size(std::env::var("GPUJOIN_TEST_SIZE").ok().as_deref()) {
        Ok(small) => small,
        Err(e) => panic!("{e}"),
    })
}

fn parse_size(v: Option<&str>) -> Result<bool, String> {
    match v.map(str::trim) {
        None | Some("") | Some("full") => Ok(false),
        Some("small") => Ok(true),
        Some(other) => Err(format!("GPUJOIN_TEST_SIZE must be `small` or `full` (or unset), not {other:?}")),
    }
}

/// `full` normally, `small` under `GPUJOIN_TEST_SIZE=small` ([`reduced`]): a row count.
pub fn rows(full: usize, small: usize) -> usize {
    pick(full, small)
}

/// Most property-test cases a test runs under `GPUJOIN_TEST_SIZE=small`: sanitizer runs slow every
/// kernel launch 10-100x, and a case of the join properties launches hundreds of kernels (every
/// join type, option and algorithm); the seeds are fixed, so the first cases are the same ones
/// the full run starts with.
pub const REDUCED_MAX_CASES: u32 = 2;

/// `full` normally, `small` (at most [`REDUCED_MAX_CASES`]) under `GPUJOIN_TEST_SIZE=small`: a
/// property test's case count.
pub fn cases(full: u32, small: u32) -> u32 {
    pick(full, small.min(REDUCED_MAX_CASES))
}

/// Keeps one case in `small_stride` of a test's loop under `GPUJOIN_TEST_SIZE=small`, every case
/// otherwise: for tests whose cases are the product of several lists (types x join types x
/// algorithms x options), where dropping whole lists would lose coverage. With a stride prime to
/// the lists' lengths the kept cases rotate through every list.
///
/// ```
/// let mut sample = gpujoin_device::testing::Sample::new(7);
/// let kept: Vec<u32> = (0..20).filter(|_| sample.take()).collect();
/// assert!(kept.len() == 20 || kept == [0, 7, 14]); // full size: all; small: every 7th
/// ```
pub struct Sample {
    stride: u64,
    seen: u64,
}

impl Sample {
    /// A sampler keeping every `small_stride`-th case under `GPUJOIN_TEST_SIZE=small`.
    pub fn new(small_stride: u64) -> Sample {
        Sample { stride: pick(1, small_stride.max(1)), seen: 0 }
    }

    /// Whether the next case runs.
    pub fn take(&mut self) -> bool {
        let keep = self.seen % self.stride == 0;
        self.seen += 1;
        keep
    }
}

/// `full` normally, `small` under `GPUJOIN_TEST_SIZE=small`: any other size-dependent value
/// (a list of sizes, a threshold that scales with the rows).
pub fn pick<T>(full: T, small: T) -> T {
    if reduced() {
        small
    } else {
        full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sizes_parse() {
        assert_eq!(parse_size(None), Ok(false));
        assert_eq!(parse_size(Some("")), Ok(false));
        assert_eq!(parse_size(Some("full")), Ok(false));
        assert_eq!(parse_size(Some("small")), Ok(true));
        assert_eq!(parse_size(Some(" small\n")), Ok(true));
        assert!(parse_size(Some("smal")).unwrap_err().contains("\"smal\""));
    }

    #[test]
    fn skip_log_lines_are_one_line_of_three_fields() {
        assert_eq!(skip_log_line("gpu_joins-0123", "t", "no driver"), "gpu_joins-0123\tt\tno driver\n");
        assert_eq!(skip_log_line("e", "a\tb", "line one\nline two"), "e\ta b\tline one line two\n");
    }

    #[test]
    fn skips_append_to_the_log() {
        // The log file alone (report_skip also prints a SKIPPED line, which a runner would
        // count as a skipped test of this executable).
        let path = std::env::temp_dir().join(format!("gpujoin-skip-log-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        append_skip(&path, "first", "no device").unwrap();
        append_skip(&path, "second", "no\tdevice").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        assert_eq!((lines[0][1], lines[0][2]), ("first", "no device"));
        assert_eq!((lines[1][1], lines[1][2]), ("second", "no device"));
        assert!(lines[0][0].starts_with("gpujoin_device"), "{text:?}");
    }
}
