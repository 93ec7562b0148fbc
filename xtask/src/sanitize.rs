//! `cargo xtask sanitize [tool...] [filter]`: the GPU test executables under NVIDIA's
//! compute-sanitizer, at reduced test sizes.
//!
//! Builds the release test executables as `cargo xtask bundle` does, links them into
//! `target/sanitize/bundle/` with a MANIFEST and the bundle's runner, and runs
//! `run.sh sanitize`: every test of every integration-test executable, each under memcheck
//! (`--leak-check full`), racecheck, synccheck and initcheck (or the tools named) as its own
//! compute-sanitizer process (`<exe> --exact <test> --test-threads=1`), `nproc` at once, the
//! slowest first (by the previous run's `sanitize-times.tsv`), with `GPUJOIN_TEST_SIZE=small`,
//! `GPUJOIN_REQUIRE_GPU=1` and a 240 s limit per job. Output (in `target/sanitize/`, `$OUT`
//! instead when set): `sanitize.md` (summary line with the wall time, tables per tool and per
//! executable x tool, the jobs not clean, first reports by kernel with device backtraces),
//! `sanitize-times.tsv` (every job's seconds and status) and `sanitize.log`. Fails when a tool
//! reports errors, a job times out, a test fails, or a job ends without the tool's summary. The
//! runner's header (`xtask/src/run.sh`) lists its environment (`GPUJOIN_TIMEOUT`,
//! `GPUJOIN_SANITIZE_JOBS`, `GPUJOIN_SANITIZE_TIMES`, ...). Here the executables keep their
//! symbols, so `GPUJOIN_SANITIZE_BACKTRACE=yes` names the Rust caller of a reported CUB kernel.
//!
//! On a GPU machine without Rust: `cargo xtask bundle` here, then `bash bundle/run.sh sanitize`
//! there; both run the same script.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bundle;

pub const TOOLS: [&str; 4] = ["memcheck", "racecheck", "synccheck", "initcheck"];

/// The tools (in the order given, each once; all four when none is named) and the filter.
pub fn parse_args(args: &[String]) -> crate::Result<(Vec<String>, Option<String>)> {
    let mut tools: Vec<String> = Vec::new();
    let mut filter: Option<String> = None;
    for arg in args {
        let parts: Vec<&str> = arg.split(',').collect();
        let is_tools = !arg.is_empty() && parts.iter().all(|p| *p == "all" || TOOLS.contains(p));
        if is_tools {
            for p in parts {
                let named: Vec<&str> = if p == "all" { TOOLS.to_vec() } else { vec![p] };
                for t in named {
                    if !tools.iter().any(|x| x == t) {
                        tools.push(t.to_string());
                    }
                }
            }
        } else if arg.starts_with('-') {
            return Err(format!("unknown option {arg:?}: usage: cargo xtask sanitize [{}|all ...] [filter]", TOOLS.join("|")));
        } else if let Some(f) = &filter {
            return Err(format!("two filters ({f:?} and {arg:?}): give at most one (tools: {})", TOOLS.join(", ")));
        } else {
            filter = Some(arg.clone());
        }
    }
    if tools.is_empty() {
        tools = TOOLS.iter().map(|t| t.to_string()).collect();
    }
    Ok((tools, filter))
}

pub fn run(rest: &[String]) -> crate::Result<()> {
    let (tools, filter) = parse_args(rest)?;
    // Say what is missing before a release build of every test.
    let cs = find_sanitizer().map_err(|looked| {
        format!(
            "compute-sanitizer not found (looked at GPUJOIN_COMPUTE_SANITIZER, PATH, {looked}); it comes with the CUDA \
             toolkit (not with the pip wheels `cargo xtask toolkit` provisions). On a GPU machine without Rust: \
             `cargo xtask bundle` here, then `bash bundle/run.sh sanitize` there"
        )
    })?;
    if !has_gpu() {
        return Err(format!(
            "no NVIDIA GPU on this machine (nvidia-smi lists none and there is no /dev/nvidia0); compute-sanitizer ({}) needs one. \
             Build the bundle (`cargo xtask bundle`) and run `bash bundle/run.sh sanitize` on a GPU machine",
            cs.display()
        ));
    }

    let root = crate::root();
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let target = if target.is_absolute() { target } else { root.join(target) };
    let dir = target.join("sanitize");
    let folder = dir.join("bundle");
    let tests = bundle::test_artifacts(&[])?;
    if folder.exists() {
        std::fs::remove_dir_all(&folder).map_err(|e| format!("removing {}: {e}", folder.display()))?;
    }
    bundle::mkdir(&folder.join("tests"))?;
    let mut manifest = String::new();
    for (a, name) in tests.iter().zip(bundle::names("tests", &tests, &mut BTreeSet::new())) {
        link(&a.exe, &folder.join("tests").join(&name))?;
        manifest.push_str(&bundle::manifest_line("tests", &name, a, &root));
    }
    bundle::write(&folder.join("MANIFEST"), &manifest)?;
    bundle::write(&folder.join("COMMIT"), &format!("{}\n", bundle::commit(&root)))?;
    bundle::write_runner(&folder)?;

    let mut c = Command::new("bash");
    c.arg(folder.join("run.sh")).arg("sanitize").args(&tools).args(&filter);
    c.env("GPUJOIN_ROOT", &root).env("GPUJOIN_COMPUTE_SANITIZER", &cs);
    if std::env::var_os("OUT").is_none() {
        c.env("OUT", &dir);
    }
    let status = c.status().map_err(|e| format!("could not start {c:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        let out = std::env::var_os("OUT").map(PathBuf::from).unwrap_or(dir);
        Err(format!("compute-sanitizer reported errors or a run failed ({status}); see {}", out.join("sanitize.md").display()))
    }
}

/// `dest` -> `src` (a symbolic link where there are links, else a copy).
fn link(src: &Path, dest: &Path) -> crate::Result<()> {
    #[cfg(unix)]
    let r = std::os::unix::fs::symlink(src, dest);
    #[cfg(not(unix))]
    let r = std::fs::copy(src, dest).map(|_| ());
    r.map_err(|e| format!("linking {} to {}: {e}", dest.display(), src.display()))
}

/// The places (besides GPUJOIN_COMPUTE_SANITIZER and PATH) where a toolkit keeps
/// compute-sanitizer; `*` matches one path component. The same list as `run.sh`'s.
fn candidates() -> Vec<String> {
    let mut c = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            c.push(format!("{}/bin/compute-sanitizer", Path::new(&v).display()));
        }
    }
    c.extend(
        [
            "/usr/local/cuda/bin/compute-sanitizer",
            "/usr/local/cuda/compute-sanitizer/compute-sanitizer",
            "/usr/local/cuda-*/bin/compute-sanitizer",
            "/opt/nvidia/hpc_sdk/*/*/cuda/bin/compute-sanitizer",
            "/opt/nvidia/hpc_sdk/*/*/cuda/*/bin/compute-sanitizer",
            "/opt/nvidia/*/bin/compute-sanitizer",
            "/opt/nvidia/compute-sanitizer/compute-sanitizer",
        ]
        .map(String::from),
    );
    c
}

/// The compute-sanitizer to use, or the places looked at.
fn find_sanitizer() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("GPUJOIN_COMPUTE_SANITIZER").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if is_executable(&p) { Ok(p) } else { Err(format!("GPUJOIN_COMPUTE_SANITIZER={} (not an executable)", p.display())) };
    }
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(p) = std::env::split_paths(&path).map(|d| d.join("compute-sanitizer")).find(|p| is_executable(p)) {
            return Ok(p);
        }
    }
    let list = candidates();
    for pattern in &list {
        // Versioned folders: the newest (by name) first.
        let mut found = glob(pattern);
        found.sort_by(|a, b| version_order(b, a));
        if let Some(p) = found.into_iter().find(|p| is_executable(p)) {
            return Ok(p);
        }
    }
    Err(list.join(", "))
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// The existing paths matching `pattern`, whose components may be `*` or `prefix*`.
fn glob(pattern: &str) -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from("/")];
    for comp in pattern.trim_start_matches('/').split('/') {
        let mut next = Vec::new();
        for base in &paths {
            if let Some(prefix) = comp.strip_suffix('*') {
                let Ok(rd) = std::fs::read_dir(base) else { continue };
                for e in rd.flatten() {
                    if e.file_name().to_string_lossy().starts_with(prefix) {
                        next.push(e.path());
                    }
                }
            } else {
                let p = base.join(comp);
                if p.exists() {
                    next.push(p);
                }
            }
        }
        paths = next;
    }
    paths
}

/// Orders paths as `sort -V` would, roughly: digit runs compare as numbers.
fn version_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    fn key(p: &Path) -> Vec<(u64, String)> {
        let s = p.to_string_lossy();
        let mut out = Vec::new();
        let mut text = String::new();
        let mut num = String::new();
        for ch in s.chars() {
            if ch.is_ascii_digit() {
                num.push(ch);
            } else {
                if !num.is_empty() {
                    out.push((num.parse().unwrap_or(u64::MAX), std::mem::take(&mut text)));
                    num.clear();
                }
                text.push(ch);
            }
        }
        out.push((num.parse().unwrap_or(0), text));
        out
    }
    let (ka, kb) = (key(a), key(b));
    ka.iter().map(|(n, t)| (t, n)).cmp(kb.iter().map(|(n, t)| (t, n)))
}

/// Whether an NVIDIA GPU is visible: listed by `nvidia-smi -L`, or at least a device node.
fn has_gpu() -> bool {
    let listed = Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).lines().any(|l| l.starts_with("GPU ")));
    listed
        || std::fs::read_dir("/dev").is_ok_and(|rd| {
            rd.flatten().any(|e| e.file_name().to_str().and_then(|n| n.strip_prefix("nvidia")).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_name_tools_and_one_filter() {
        let all: Vec<String> = TOOLS.iter().map(|t| t.to_string()).collect();
        assert_eq!(parse_args(&[]).unwrap(), (all.clone(), None));
        assert_eq!(parse_args(&args(&["all"])).unwrap(), (all.clone(), None));
        assert_eq!(parse_args(&args(&["racecheck", "large"])).unwrap(), (args(&["racecheck"]), Some("large".into())));
        assert_eq!(parse_args(&args(&["gpu_", "initcheck,memcheck", "memcheck"])).unwrap(), (args(&["initcheck", "memcheck"]), Some("gpu_".into())));
        // Not every part a tool: the whole argument is the filter.
        assert_eq!(parse_args(&args(&["memcheck,joins"])).unwrap(), (all, Some("memcheck,joins".into())));
        assert!(parse_args(&args(&["a", "b"])).unwrap_err().contains("two filters"));
        assert!(parse_args(&args(&["--release"])).unwrap_err().contains("unknown option"));
    }

    #[test]
    fn versions_sort_numerically() {
        let mut v = vec![PathBuf::from("/usr/local/cuda-12.9"), PathBuf::from("/usr/local/cuda-13.0"), PathBuf::from("/usr/local/cuda-12.10")];
        v.sort_by(|a, b| version_order(b, a));
        assert_eq!(v, vec![PathBuf::from("/usr/local/cuda-13.0"), PathBuf::from("/usr/local/cuda-12.10"), PathBuf::from("/usr/local/cuda-12.9")]);
    }

    #[test]
    fn glob_finds_prefixed_folders() {
        let dir = std::env::temp_dir().join(format!("gpujoin-glob-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for v in ["cuda-12.8", "cuda-13.0", "other"] {
            std::fs::create_dir_all(dir.join(v).join("bin")).unwrap();
            std::fs::write(dir.join(v).join("bin/compute-sanitizer"), "").unwrap();
        }
        let mut got = glob(&format!("{}/cuda-*/bin/compute-sanitizer", dir.display()));
        got.sort();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got, vec![dir.join("cuda-12.8/bin/compute-sanitizer"), dir.join("cuda-13.0/bin/compute-sanitizer")]);
    }
}
