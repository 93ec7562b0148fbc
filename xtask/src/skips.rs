//! Counting the GPU tests that skipped for lack of a device.
//!
//! `gpujoin_device::testing::report_skip` (called by `device_or_skip`) appends one line
//! `<executable file name> TAB <test> TAB <reason>` to the file named by `GPUJOIN_SKIP_LOG`.
//! libtest captures the `SKIPPED` lines of passing tests, so the file, not the output, is what
//! `cargo xtask test` counts; it is written with one append per line, so the parallel tests of
//! an executable and the executables one after another share it safely.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A fresh, empty skip log in the temporary folder; removed on drop.
pub struct Log {
    path: PathBuf,
}

impl Log {
    pub fn new() -> Log {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!("gpujoin-skips-{}-{nanos}.log", std::process::id()));
        // Empty now, so that a log nobody wrote to reads as no skips (not as an error).
        if let Err(e) = std::fs::write(&path, "") {
            eprintln!("xtask: could not create the skip log {}: {e}", path.display());
        }
        Log { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn read(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap_or_default()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Skipped tests per executable (file name without cargo's `-<16 hex digits>` suffix), each
/// test counted once.
pub fn parse(log: &str) -> BTreeMap<String, Vec<String>> {
    let mut per_exe: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in log.lines() {
        let mut f = line.splitn(3, '\t');
        let (Some(exe), Some(test)) = (f.next(), f.next()) else { continue };
        if exe.is_empty() || test.is_empty() {
            continue;
        }
        let tests = per_exe.entry(executable_name(exe).to_string()).or_default();
        if !tests.iter().any(|t| t == test) {
            tests.push(test.to_string());
        }
    }
    per_exe
}

/// `gpu_joins-0123456789abcdef` -> `gpu_joins`.
fn executable_name(file: &str) -> &str {
    let file = file.strip_suffix(".exe").unwrap_or(file);
    match file.rsplit_once('-') {
        Some((name, hash)) if !name.is_empty() && hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name,
        _ => file,
    }
}

/// The closing line of `cargo xtask test`, e.g.
/// `xtask test: 12 GPU tests skipped (no device), in 2 test executables: gpu_joins 9, gpu_wide 3`.
pub fn summary(log: &str) -> String {
    let per_exe = parse(log);
    let total: usize = per_exe.values().map(Vec::len).sum();
    if total == 0 {
        return "xtask test: 0 GPU tests skipped (no device)".into();
    }
    let list: Vec<String> = per_exe.iter().map(|(exe, tests)| format!("{exe} {}", tests.len())).collect();
    format!(
        "xtask test: {total} GPU test{} skipped (no device), in {} test executable{}: {}",
        if total == 1 { "" } else { "s" },
        per_exe.len(),
        if per_exe.len() == 1 { "" } else { "s" },
        list.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executable_names_lose_the_hash() {
        assert_eq!(executable_name("gpu_joins-0123456789abcdef"), "gpu_joins");
        assert_eq!(executable_name("gpujoin_join-ABCDEF0123456789"), "gpujoin_join");
        assert_eq!(executable_name("gpu_theta_nlj-0123456789abcdef.exe"), "gpu_theta_nlj");
        assert_eq!(executable_name("rust_out"), "rust_out");
        assert_eq!(executable_name("my-tool-1"), "my-tool-1");
    }

    #[test]
    fn counts_each_skipped_test_once_per_executable() {
        let log = "gpu_joins-0123456789abcdef\tlarge\tno CUDA driver\n\
                   gpu_joins-0123456789abcdef\tsmall\tno CUDA driver\n\
                   gpu_joins-0123456789abcdef\tlarge\tno CUDA driver\n\
                   gpu_wide-fedcba9876543210\tlarge\tno CUDA driver: a\ttab\n\
                   \n\
                   garbage without tabs\n";
        let p = parse(log);
        assert_eq!(p.len(), 2);
        assert_eq!(p["gpu_joins"], vec!["large", "small"]);
        assert_eq!(p["gpu_wide"], vec!["large"]);
        assert_eq!(summary(log), "xtask test: 3 GPU tests skipped (no device), in 2 test executables: gpu_joins 2, gpu_wide 1");
        assert_eq!(summary(""), "xtask test: 0 GPU tests skipped (no device)");
        assert_eq!(summary("device-0123456789abcdef\tt\tr\n"), "xtask test: 1 GPU test skipped (no device), in 1 test executable: device 1");
    }

    #[test]
    fn log_file_round_trip() {
        let log = Log::new();
        assert_eq!(log.read(), "");
        std::fs::write(log.path(), "streaming-0123456789abcdef\tcopy\tno device\n").unwrap();
        assert_eq!(parse(&log.read())["streaming"], vec!["copy"]);
        let path = log.path().to_path_buf();
        drop(log);
        assert!(!path.exists());
    }
}
