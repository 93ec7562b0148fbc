//! `cargo xtask bundle [cargo args]`: release test and bench executables for a GPU machine that
//! has no Rust toolchain.
//!
//! Layout of `bundle/` (git-ignored):
//!
//! | path | what |
//! |---|---|
//! | `tests/<target>-<kind>-<package>` | every test executable of the workspace (xtask excluded), stripped |
//! | `benches/<target>-<kind>-<package>` | every bench executable (criterion, `harness = false`), stripped |
//! | `executables.tar.xz` | instead, when the executables pass 24 MiB (`GPUJOIN_BUNDLE_GZIP=1`/`0` forces): all of them in one archive whose dictionary spans files (per-file `…/<name>.gz` where `xz` is missing); `run.sh` unpacks them |
//! | `MANIFEST` | one line per executable: `tests\|benches <TAB> file <TAB> package dir relative to the repo root` |
//! | `COMMIT` | `git rev-parse --short HEAD`, plus `-dirty` when the tree has changes |
//! | `run.sh` | the runner: `bash bundle/run.sh [tests\|benches\|all] [filter]`, or `bash bundle/run.sh sanitize [tool...] [filter]` (the test executables under compute-sanitizer, see `xtask/src/run.sh`) |
//!
//! Extra arguments go to both `cargo test` and `cargo bench` (e.g. `--features ...`).
//! `GPUJOIN_BUNDLE_ONLY=cli,datafusion-test,front_door` keeps only the test and bench executables
//! whose bundle name contains one of the comma-separated pieces; `GPUJOIN_BUNDLE_BINS=gpujoin-demo`
//! only the named binaries (default: every binary); `GPUJOIN_BUNDLE_PACKAGES=gpujoin-join,gpujoin`
//! builds only those packages (default: the workspace).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Keep the folder well under the 64 MiB that travels to the GPU machine.
const WARN_BYTES: u64 = 48 << 20;
/// Above this total the executables are gzipped (about 3x smaller: the CUDA fat binaries repeat).
const GZIP_BYTES: u64 = 24 << 20;

/// One executable that cargo reported.
#[derive(Debug, Clone)]
pub(crate) struct Artifact {
    package: String,
    kind: String,
    target: String,
    pub(crate) exe: PathBuf,
    package_dir: PathBuf,
    /// Built with a test profile (a test or bench executable), not a plain binary.
    test: bool,
}

pub fn build(rest: &[String]) -> crate::Result<()> {
    let root = crate::root();
    let bundle = root.join("bundle");
    let extra: Vec<&str> = rest.iter().map(String::as_str).collect();

    // GPUJOIN_BUNDLE_PACKAGES=gpujoin-join,gpujoin: build only these packages' executables instead
    // of the workspace's (a change to the join crate otherwise relinks every DataFusion-linked
    // test before a join-only run).
    let packages: Vec<String> = std::env::var("GPUJOIN_BUNDLE_PACKAGES").unwrap_or_default().split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect();
    let selection: Vec<&str> = if packages.is_empty() { vec!["--workspace", "--exclude", "xtask"] } else { packages.iter().flat_map(|p| ["-p", p.as_str()]).collect() };
    let with = |head: &[&'static str], tail: &[&'static str]| -> Vec<&str> { head.iter().copied().chain(selection.iter().copied()).chain(tail.iter().copied()).collect() };
    let built = artifacts(&with(&["test"], &["--release", "--no-run"]), &extra)?;
    // The binaries built for integration tests (`gpujoin`, which the CLI's tests run;
    // `gpujoin-ballista`, whose tests start it as scheduler and executors): in `bin/`,
    // outside the MANIFEST; run.sh points `GPUJOIN_BIN_DIR` at them.
    let bins: Vec<Artifact> = built.iter().filter(|a| !a.test && a.kind == "bin").cloned().collect();
    let tests: Vec<Artifact> = built.into_iter().filter(|a| a.test).collect();
    // GPUJOIN_BUNDLE_ONLY=cli,front_door: only the test and bench executables whose bundle name
    // contains one of the pieces (the full bundle with DataFusion's executables passes 64 MiB).
    let only: Vec<String> = std::env::var("GPUJOIN_BUNDLE_ONLY").unwrap_or_default().split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect();
    let keep = |a: &Artifact| only.is_empty() || only.iter().any(|p| format!("{}-{}-{}", a.target, a.kind, a.package).contains(p.as_str()));
    let tests: Vec<Artifact> = tests.into_iter().filter(|a| keep(a)).collect();
    // GPUJOIN_BUNDLE_BINS=gpujoin-demo: only these binaries (each DataFusion-linked one takes
    // about 20 MB of the archive; a bundle of the join crates' tests needs none of them).
    let bin_names: Option<Vec<String>> = std::env::var("GPUJOIN_BUNDLE_BINS").ok().map(|v| v.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect());
    let bins: Vec<Artifact> = bins.into_iter().filter(|a| bin_names.as_ref().is_none_or(|names| names.iter().any(|n| *n == a.target))).collect();
    let benches = artifacts(&with(&["bench"], &["--no-run"]), &extra)?
        .into_iter()
        .filter(|a| a.kind == "bench" && keep(a))
        .collect::<Vec<_>>();

    if bundle.exists() {
        std::fs::remove_dir_all(&bundle).map_err(|e| format!("removing {}: {e}", bundle.display()))?;
    }
    let mut manifest = String::new();
    let mut used = BTreeSet::new();
    let has_strip = Command::new("strip").arg("--version").output().is_ok_and(|o| o.status.success());
    if !has_strip {
        eprintln!("xtask bundle: `strip` not found; copying executables unstripped");
    }
    for (dir, list) in [("tests", &tests), ("benches", &benches)] {
        let folder = bundle.join(dir);
        mkdir(&folder)?;
        for (a, name) in list.iter().zip(names(dir, list, &mut used)) {
            let dest = folder.join(&name);
            std::fs::copy(&a.exe, &dest).map_err(|e| format!("copying {}: {e}", a.exe.display()))?;
            if has_strip {
                let ok = Command::new("strip").arg(&dest).status().is_ok_and(|s| s.success());
                if !ok {
                    eprintln!("xtask bundle: strip failed on {}; keeping it unstripped", dest.display());
                }
            }
            manifest.push_str(&manifest_line(dir, &name, a, &root));
        }
    }
    if !bins.is_empty() {
        let folder = bundle.join("bin");
        mkdir(&folder)?;
        for a in &bins {
            let dest = folder.join(&a.target);
            std::fs::copy(&a.exe, &dest).map_err(|e| format!("copying {}: {e}", a.exe.display()))?;
            if has_strip {
                let _ = Command::new("strip").arg(&dest).status();
            }
        }
    }
    write(&bundle.join("MANIFEST"), &manifest)?;
    copy_slt_files(&bundle)?;
    let packing = compress_if_large(&bundle, &manifest)?;
    let commit = commit(&root);
    write(&bundle.join("COMMIT"), &format!("{commit}\n"))?;
    write_runner(&bundle)?;

    let size = dir_size(&bundle);
    println!(
        "bundle/: {} test and {} bench executables, commit {commit}, {:.1} MiB{}",
        tests.len(),
        benches.len(),
        size as f64 / (1 << 20) as f64,
        match packing {
            Packing::Plain => "",
            Packing::Gzip => " (executables gzipped; run.sh unpacks them)",
            Packing::TarXz => " (executables in executables.tar.xz; run.sh unpacks them)",
        }
    );
    for line in manifest.lines() {
        let mut f = line.split('\t');
        let (d, n) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
        if packing == Packing::TarXz {
            println!("  {d}/{n} (in executables.tar.xz)");
            continue;
        }
        let n = if packing == Packing::Gzip { format!("{n}.gz") } else { n.to_string() };
        let bytes = std::fs::metadata(bundle.join(d).join(&n)).map(|m| m.len()).unwrap_or(0);
        println!("  {d}/{n} ({:.1} MiB)", bytes as f64 / (1 << 20) as f64);
    }
    if size > WARN_BYTES {
        eprintln!(
            "xtask bundle: warning: bundle/ is {:.1} MiB; the GPU machine takes at most 64 MiB with the working tree",
            size as f64 / (1 << 20) as f64
        );
    }
    println!("run it there with: bash bundle/run.sh [tests|benches|all] [filter], or bash bundle/run.sh sanitize [tool...] [filter]");
    Ok(())
}

/// Copies DataFusion's sqllogictest files (the `datafusion-sqllogictest` package's `test_files`,
/// which gpujoin-datafusion's `tests/sqllogictest.rs` runs) into `bundle/slt/test_files`; `run.sh`
/// points `GPUJOIN_SLT_DIR` at them. Nothing when the package is not a dependency.
fn copy_slt_files(bundle: &Path) -> crate::Result<()> {
    let mut c = crate::cargo(&["metadata", "--format-version", "1"])?;
    let out = c.output().map_err(|e| format!("cargo metadata: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // The manifest path of datafusion-sqllogictest, without a JSON parser: the first
    // `"manifest_path":"..."` after its package id.
    let Some(at) = text.find("datafusion-sqllogictest@") else { return Ok(()) };
    let Some(m) = text[at..].find("\"manifest_path\":\"") else { return Ok(()) };
    let start = at + m + "\"manifest_path\":\"".len();
    let Some(len) = text[start..].find('"') else { return Ok(()) };
    let files = Path::new(&text[start..start + len]).with_file_name("test_files");
    if !files.is_dir() {
        return Ok(());
    }
    let dest = bundle.join("slt");
    mkdir(&dest)?;
    let mut cp = Command::new("cp");
    cp.arg("-r").arg(&files).arg(&dest);
    crate::run(cp)?;
    Ok(())
}

/// The release test executables of the workspace (xtask excluded), built now.
pub(crate) fn test_artifacts(extra: &[&str]) -> crate::Result<Vec<Artifact>> {
    Ok(artifacts(&["test", "--workspace", "--exclude", "xtask", "--release", "--no-run"], extra)?.into_iter().filter(|a| a.test).collect())
}


/// Bundle names `<target>-<kind>-<package>` of `list`, unique within `dir` (`-2`, `-3`, ... on
/// a clash).
pub(crate) fn names(dir: &str, list: &[Artifact], used: &mut BTreeSet<String>) -> Vec<String> {
    list.iter()
        .map(|a| {
            let base = format!("{}-{}-{}", a.target, a.kind, a.package);
            let mut name = base.clone();
            let mut n = 2;
            while !used.insert(format!("{dir}/{name}")) {
                name = format!("{base}-{n}");
                n += 1;
            }
            name
        })
        .collect()
}

/// A MANIFEST line: `dir TAB name TAB package folder relative to the root`.
pub(crate) fn manifest_line(dir: &str, name: &str, a: &Artifact, root: &Path) -> String {
    let rel = a.package_dir.strip_prefix(root).unwrap_or(Path::new("."));
    let rel = if rel.as_os_str().is_empty() { ".".to_string() } else { rel.display().to_string() };
    format!("{dir}\t{name}\t{rel}\n")
}

/// Writes the runner as `folder/run.sh`, executable.
pub(crate) fn write_runner(folder: &Path) -> crate::Result<()> {
    let run_sh = folder.join("run.sh");
    write(&run_sh, RUN_SH)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&run_sh, std::fs::Permissions::from_mode(0o755));
    }
    Ok(())
}

/// Runs cargo with JSON messages and returns the executables of test-profile artifacts.
fn artifacts(args: &[&str], extra: &[&str]) -> crate::Result<Vec<Artifact>> {
    let mut c = crate::cargo(args)?;
    c.args(extra).arg("--message-format=json-render-diagnostics").stdout(Stdio::piped());
    eprintln!("xtask bundle: cargo {}", args.iter().chain(extra).copied().collect::<Vec<_>>().join(" "));
    let mut child = c.spawn().map_err(|e| format!("could not start {c:?}: {e}"))?;
    let mut found = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped stdout")).lines() {
        let line = line.map_err(|e| format!("reading cargo's output: {e}"))?;
        if let Some(a) = parse_artifact(&line) {
            found.push(a);
        }
    }
    let status = child.wait().map_err(|e| format!("waiting for cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo {} failed with {status}", args.join(" ")));
    }
    found.sort_by(|a, b| (&a.package, &a.kind, &a.target).cmp(&(&b.package, &b.kind, &b.target)));
    Ok(found)
}

/// A `compiler-artifact` message that names an executable (`test`: its profile has `"test":true`).
fn parse_artifact(line: &str) -> Option<Artifact> {
    let line = line.trim();
    if !line.starts_with('{') || !line.contains("\"compiler-artifact\"") {
        return None;
    }
    let obj = json::fields(line)?;
    let get = |k: &str| obj.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
    if json::string(get("reason")?)? != "compiler-artifact" {
        return None;
    }
    let exe = json::string(get("executable")?)?; // null -> None
    let profile = json::fields(get("profile")?)?;
    let test = profile.iter().any(|(k, v)| k == "test" && *v == "true");
    let target = json::fields(get("target")?)?;
    let tget = |k: &str| target.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
    let name = json::string(tget("name")?)?;
    let kind = json::first_string(tget("kind")?).unwrap_or_else(|| "bin".into());
    let manifest = PathBuf::from(json::string(get("manifest_path")?)?);
    let package_dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
    let package = get("package_id")
        .and_then(json::string)
        .and_then(|id| package_name(&id))
        .unwrap_or_else(|| package_dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
    Some(Artifact { package, kind, target: name, exe: PathBuf::from(exe), package_dir, test })
}

/// The package name in a package id: `path+file:///a/b#name@0.1.0`, `path+file:///a/name#0.1.0`
/// (name = last path segment) or the old `name 0.1.0 (path+file:///a/b)`.
fn package_name(id: &str) -> Option<String> {
    if let Some((url, frag)) = id.rsplit_once('#') {
        if let Some((name, _ver)) = frag.split_once('@') {
            return Some(name.to_string());
        }
        let path = url.split(['?']).next()?;
        return path.trim_end_matches('/').rsplit('/').next().map(str::to_string);
    }
    id.split_whitespace().next().map(str::to_string)
}

/// A few lines of JSON scanning, enough for cargo's messages (no serde in xtask).
mod json {
    /// Index just past the value starting at `s[i..]` (after whitespace), or None.
    fn skip_value(s: &[u8], mut i: usize) -> Option<usize> {
        while i < s.len() && s[i].is_ascii_whitespace() {
            i += 1;
        }
        match *s.get(i)? {
            b'"' => skip_string(s, i),
            b'{' | b'[' => {
                let mut depth = 0usize;
                while i < s.len() {
                    match s[i] {
                        b'"' => {
                            i = skip_string(s, i)?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Some(i + 1);
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                None
            }
            _ => {
                while i < s.len() && !matches!(s[i], b',' | b'}' | b']') && !s[i].is_ascii_whitespace() {
                    i += 1;
                }
                Some(i)
            }
        }
    }

    fn skip_string(s: &[u8], mut i: usize) -> Option<usize> {
        i += 1;
        while i < s.len() {
            match s[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    }

    fn skip_ws(s: &[u8], mut i: usize) -> usize {
        while i < s.len() && s[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }

    /// The top-level `(key, raw value)` pairs of a JSON object.
    pub fn fields(obj: &str) -> Option<Vec<(String, &str)>> {
        let s = obj.as_bytes();
        let mut i = skip_ws(s, 0);
        if s.get(i) != Some(&b'{') {
            return None;
        }
        i += 1;
        let mut out = Vec::new();
        loop {
            i = skip_ws(s, i);
            match s.get(i)? {
                b'}' => return Some(out),
                b',' => {
                    i += 1;
                    continue;
                }
                b'"' => {}
                _ => return None,
            }
            let kend = skip_string(s, i)?;
            let key = string(&obj[i..kend])?;
            i = skip_ws(s, kend);
            if s.get(i) != Some(&b':') {
                return None;
            }
            let vstart = skip_ws(s, i + 1);
            let vend = skip_value(s, vstart)?;
            out.push((key, &obj[vstart..vend]));
            i = vend;
        }
    }

    /// The text of a raw JSON string value (`None` for null or a non-string).
    pub fn string(raw: &str) -> Option<String> {
        let raw = raw.trim();
        let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?).unwrap_or('\u{fffd}'));
                }
                other => out.push(other), // \" \\ \/
            }
        }
        Some(out)
    }

    /// The first string of a raw JSON array of strings.
    pub fn first_string(raw: &str) -> Option<String> {
        let s = raw.trim().strip_prefix('[')?;
        let b = s.as_bytes();
        let start = skip_ws(b, 0);
        let end = skip_string(b, start)?;
        string(&s[start..end])
    }
}

/// How the executables travel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Packing {
    Plain,
    /// Each executable gzipped (`name.gz`).
    Gzip,
    /// All of them in `executables.tar.xz`, whose 64 MiB dictionary spans files: the CUDA fat
    /// binaries, repeated in every executable, are stored about once (~20x smaller than plain).
    TarXz,
}

/// Packs the executables when the stripped ones together exceed [`GZIP_BYTES`], or always /
/// never when `GPUJOIN_BUNDLE_GZIP` is `1` / `0`: one `tar.xz` where `xz` exists, else per-file
/// gzip. `run.sh` unpacks them before running them (or on `run.sh unpack`).
fn compress_if_large(bundle: &Path, manifest: &str) -> crate::Result<Packing> {
    let size = dir_size(bundle);
    let want = match std::env::var("GPUJOIN_BUNDLE_GZIP").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => size > GZIP_BYTES,
    };
    if !want {
        return Ok(Packing::Plain);
    }
    let has = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if has("xz") && has("tar") {
        let archive = bundle.join("executables.tar.xz");
        let script = format!(
            // One block with a dictionary larger than any executable: DataFusion's code and the CUDA
            // fat binaries repeat from executable to executable, and xz finds the repeats only
            // within its dictionary.
            "tar -C '{0}' -cf - tests benches $(test -d '{0}/bin' && echo bin) $(test -d '{0}/slt' && echo slt) | xz -T1 --lzma2=preset=6,dict=512MiB > '{1}'",
            bundle.display(),
            archive.display()
        );
        let mut c = Command::new("sh");
        c.args(["-c", &script]);
        crate::run(c)?;
        for line in manifest.lines() {
            let mut f = line.split('\t');
            let (d, n) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
            std::fs::remove_file(bundle.join(d).join(n)).map_err(|e| format!("removing {d}/{n}: {e}"))?;
        }
        for d in ["slt", "bin"] {
            if bundle.join(d).exists() {
                std::fs::remove_dir_all(bundle.join(d)).map_err(|e| format!("removing {d}/: {e}"))?;
            }
        }
        return Ok(Packing::TarXz);
    }
    if !has("gzip") {
        eprintln!("xtask bundle: neither `xz` nor `gzip` found; leaving the executables uncompressed");
        return Ok(Packing::Plain);
    }
    for line in manifest.lines() {
        let mut f = line.split('\t');
        let (d, n) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
        let mut c = Command::new("gzip");
        c.args(["-6", "-n", "-f"]).arg(bundle.join(d).join(n));
        crate::run(c)?;
    }
    Ok(Packing::Gzip)
}

pub(crate) fn commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            let dirty = git(&["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
            if dirty { format!("{hash}-dirty") } else { hash }
        }
        _ => "unknown".into(),
    }
}

pub(crate) fn mkdir(p: &Path) -> crate::Result<()> {
    std::fs::create_dir_all(p).map_err(|e| format!("creating {}: {e}", p.display()))
}

pub(crate) fn write(p: &Path, text: &str) -> crate::Result<()> {
    std::fs::write(p, text).map_err(|e| format!("writing {}: {e}", p.display()))
}

fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else { return 0 };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// The runner, written to `bundle/run.sh` (also used by `cargo xtask sanitize`). Its header
/// comment documents its modes and environment; `bash run.sh help` prints it.
pub(crate) const RUN_SH: &str = include_str!("run.sh");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_test_artifacts() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/device#gpujoin-device@0.1.0","manifest_path":"/w/crates/device/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"gpujoin_device","src_path":"/w/crates/device/src/lib.rs","edition":"2021","doc":true,"doctest":true,"test":true},"profile":{"opt_level":"3","debuginfo":0,"debug_assertions":false,"overflow_checks":false,"test":true},"features":[],"filenames":["/w/target/release/deps/gpujoin_device-1"],"executable":"/w/target/release/deps/gpujoin_device-1","fresh":false}"#;
        let a = parse_artifact(line).unwrap();
        assert_eq!((a.package.as_str(), a.kind.as_str(), a.target.as_str()), ("gpujoin-device", "lib", "gpujoin_device"));
        assert_eq!(a.exe, PathBuf::from("/w/target/release/deps/gpujoin_device-1"));
        assert_eq!(a.package_dir, PathBuf::from("/w/crates/device"));
        assert!(a.test);
        // Same target, not a test profile (target.test is true, profile.test false): a plain build.
        let rlib = line.replace(r#""overflow_checks":false,"test":true"#, r#""overflow_checks":false,"test":false"#);
        assert!(!parse_artifact(&rlib).unwrap().test);
        let null = line.replace(r#""executable":"/w/target/release/deps/gpujoin_device-1""#, r#""executable":null"#);
        assert!(parse_artifact(&null).is_none());
        assert!(parse_artifact(r#"{"reason":"build-finished","success":true}"#).is_none());
    }

    #[test]
    fn package_names() {
        assert_eq!(package_name("path+file:///w/crates/device#gpujoin-device@0.1.0").unwrap(), "gpujoin-device");
        assert_eq!(package_name("path+file:///tmp/jsonprobe#0.1.0").unwrap(), "jsonprobe");
        assert_eq!(package_name("gpujoin 0.1.0 (path+file:///w)").unwrap(), "gpujoin");
    }

    /// The runner is valid bash.
    #[test]
    fn run_sh_is_valid_bash() {
        let path = std::env::temp_dir().join(format!("gpujoin-run-sh-{}.sh", std::process::id()));
        std::fs::write(&path, RUN_SH).unwrap();
        let out = Command::new("bash").arg("-n").arg(&path).output().expect("bash");
        let _ = std::fs::remove_file(&path);
        assert!(out.status.success(), "bash -n run.sh: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A bundle of fake test executables under a fake compute-sanitizer (and a fake nvidia-smi):
    /// the sanitize mode's per-test jobs (listing, `--exact`, order, time limit), its tables,
    /// first reports, times file, summary line and exit status, and the tests mode.
    #[cfg(unix)]
    #[test]
    fn run_sh_sanitize_and_tests_modes_with_fakes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("gpujoin-run-sh-fakes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (bundle, bin) = (dir.join("bundle"), dir.join("bin"));
        for d in [bundle.join("tests"), bin.clone()] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script = |p: PathBuf, text: &str| {
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        script(bin.join("nvidia-smi"), "#!/bin/sh\ncase \"$1\" in -L) echo 'GPU 0: Fake GPU (UUID: GPU-0)';; *) echo 'Fake GPU, 1.0';; esac\n");
        // For executables named bad*: a memcheck leak in `alpha`, two racecheck hazards in `beta`,
        // two initcheck reports in one CUB kernel in `beta`.
        script(
            bin.join("compute-sanitizer"),
            r#"#!/usr/bin/env bash
tool=memcheck
while [[ $# -gt 0 ]]; do
  case "$1" in
    --version) echo "Fake Compute Sanitizer 0.1"; exit 0 ;;
    --tool) tool="$2"; shift 2 ;;
    --leak-check|--show-backtrace) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
echo "========= COMPUTE-SANITIZER"
"$@"
rc=$?
case "$(basename "$1"):$tool:$3" in
  bad*:racecheck:beta) echo "========= Error: Race reported between Write access at k()+0x10 and Read access at k()+0x20"
                       echo "========="
                       echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)" ;;
  bad*:memcheck:alpha) echo "========= Leaked 64 bytes at 0x7f00"
                       echo "========= LEAK SUMMARY: 64 bytes leaked in 1 allocations"
                       echo "========= ERROR SUMMARY: 1 error" ;;
  bad*:initcheck:beta) for i in 1 2; do
                         echo "========= Uninitialized __global__ memory read of size 4 bytes"
                         echo "=========     at int cub::CUB_300000_SM_900::ThreadLoad<int>(const int *)+0x30 in /cccl/thread_load.cuh:260"
                         echo "=========     by thread ($i,0,0) in block (0,0,0)"
                         echo "=========     Address 0x7f0000000004"
                         echo "=========     Device Frame:void cub::CUB_300000_SM_900::BlockLoad<int>::Load(int *)+0x40 in /cccl/block_load.cuh:126"
                         echo "=========     Device Frame:void cub::CUB_300000_SM_900::DeviceRadixSortSingleTileKernel<cub::Policy<int>, unsigned int>(const T2 *, T2 *)+0x1230 in /cccl/radix_sort.cuh:390"
                         echo "========="
                       done
                       echo "========= ERROR SUMMARY: 2 errors" ;;
  *:memcheck:*) echo "========= LEAK SUMMARY: 0 bytes leaked in 0 allocations"
                echo "========= ERROR SUMMARY: 0 errors" ;;
  *) echo "========= ERROR SUMMARY: 0 errors" ;;
esac
exit $rc
"#,
        );
        // A libtest stand-in: `--list --format terse [filter] [--ignored]` (`skipme` is
        // `#[ignore]`d), `--exact <test>`, or all tests.
        let exe = |tests: &str| {
            format!(
                r#"#!/usr/bin/env bash
TESTS="{tests}"
IGNORED="skipme"
[[ -n "$TESTS" ]] || IGNORED=""  # a custom harness lists nothing
if [[ "$1" == --list ]]; then
  f=""; ign=0
  for a in "${{@:4}}"; do if [[ "$a" == --ignored ]]; then ign=1; else f="$a"; fi; done
  if [[ $ign == 1 ]]; then names="$IGNORED"; else names="$TESTS $IGNORED"; fi
  for t in $names; do [[ -z "$f" || "$t" == *"$f"* ]] && echo "$t: test"; done
  echo "a_bench: benchmark"
  exit 0
fi
if [[ "$1" == --exact ]]; then
  echo "running 1 test: size=$GPUJOIN_TEST_SIZE require=$GPUJOIN_REQUIRE_GPU args=$*"
  case "$2" in
    slow) sleep 30 ;;
    fails) echo "thread 'fails' panicked at tests/x.rs:1:1:"; echo "boom"
           echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.01s"; exit 101 ;;
  esac
  echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.01s"
  exit 0
fi
n=$(echo $TESTS | wc -w)
echo "running $n tests: size=${{GPUJOIN_TEST_SIZE:-}} args=$* gpus=${{CUDA_VISIBLE_DEVICES:-all}}"
echo "test result: ok. $n passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s"
"#
            )
        };
        script(bundle.join("tests").join("good-test-pkg"), &exe("alpha beta"));
        script(bundle.join("tests").join("bad-test-pkg"), &exe("alpha beta slow fails"));
        script(bundle.join("tests").join("custom-test-pkg"), &exe(""));
        script(bundle.join("tests").join("unit-lib-pkg"), &exe("alpha beta"));
        std::fs::write(bundle.join("MANIFEST"), "tests\tgood-test-pkg\t.\ntests\tbad-test-pkg\t.\ntests\tcustom-test-pkg\t.\ntests\tunit-lib-pkg\t.\n").unwrap();
        std::fs::write(bundle.join("COMMIT"), "abc1234\n").unwrap();
        write_runner(&bundle).unwrap();
        let run = |args: &[&str], env: &[(&str, &str)]| {
            let mut c = Command::new("bash");
            c.arg(bundle.join("run.sh")).args(args).env("OUT", dir.join("out"));
            c.env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()));
            for v in [
                "GPUJOIN_COMPUTE_SANITIZER",
                "GPUJOIN_TEST_SIZE",
                "GPUJOIN_REQUIRE_GPU",
                "GPUJOIN_TIMEOUT",
                "GPUJOIN_SANITIZE_FLAGS",
                "GPUJOIN_SANITIZE_ONLY",
                "GPUJOIN_SANITIZE_TIMES",
                "GPUJOIN_SANITIZE_DEADLINE",
                "GPUJOIN_ROOT",
                "GPUJOIN_LANES",
                "GPUJOIN_ALL_GPUS",
                "CUDA_VISIBLE_DEVICES",
                "CUDA_HOME",
            ] {
                c.env_remove(v);
            }
            c.env("GPUJOIN_SANITIZE_JOBS", "3");
            for (k, v) in env {
                c.env(k, v);
            }
            let o = c.output().unwrap();
            (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
        };
        let read = |f: &str| std::fs::read_to_string(dir.join("out").join(f)).unwrap_or_default();

        // Every test of every executable under two tools, the default order, a 3 s limit.
        let (code, text) = run(&["sanitize", "memcheck,racecheck"], &[("GPUJOIN_TIMEOUT", "3")]);
        let (md, log, times) = (read("sanitize.md"), read("sanitize.log"), read("sanitize-times.tsv"));
        assert_eq!(code, Some(1), "{text}");
        let summary = "sanitize: 14 jobs (2 tools x 3 executables, 7 tests): 8 clean, 2 with errors, 2 timed out, 2 failed; wall ";
        assert!(text.lines().last().unwrap_or("").starts_with(summary), "{text}");
        assert!(text.trim_end().ends_with(&format!("times in {}/out/sanitize-times.tsv", dir.display())), "{text}");
        assert!(md.contains(summary), "{md}");
        // Racecheck first, the executable with most tests first.
        assert!(text.lines().any(|l| l.starts_with("[1/14] racecheck bad-test-pkg")), "{text}");
        assert!(md.contains("| tool | jobs | clean | errors (jobs) | leaked bytes | timed out | failed | job seconds |"), "{md}");
        assert!(md.contains("| memcheck | 7 | 4 | **1** (1) | **64** | **1** | **1** |"), "{md}");
        assert!(md.contains("| executable | memcheck | racecheck |"), "{md}");
        assert!(md.contains("| good-test-pkg | 0 errors, 0 leaks; 2 tests, "), "{md}");
        assert!(md.contains("| bad-test-pkg | **1 error** (1 test), **64 bytes leaked**, **1 timed out**, **1 failed**; 4 tests, "), "{md}");
        assert!(md.contains("slowest `slow` "), "{md}");
        assert!(md.contains("| racecheck | bad-test-pkg | `beta` | errors 2 |"), "{md}");
        assert!(md.contains("| memcheck | bad-test-pkg | `slow` | timed out (over 3s) |"), "{md}");
        assert!(md.contains("### racecheck: first reports by kernel") && md.contains("- `k`: 1 report in 1 test: `bad-test-pkg: beta`"), "{md}");
        assert!(md.contains("- `(leaked allocations)`: 1 report in 1 test: `bad-test-pkg: alpha`"), "{md}");
        assert!(md.contains("#### memcheck: bad-test-pkg `fails`: failed (exit 101") && md.contains("panicked at tests/x.rs"), "{md}");
        assert!(md.contains("## Slowest jobs"), "{md}");
        assert!(!md.contains("unit-lib-pkg"), "only integration-test executables: {md}");
        assert!(log.contains("size=small require=1 args=--exact alpha --test-threads=1 --show-output"), "{log}");
        // A custom harness (lists no tests) runs whole, as one job.
        assert!(log.contains("running 0 tests: size=small args=--show-output"), "{log}");
        assert!(times.starts_with("tool\texe\ttest\tseconds\tstatus\n") && times.lines().count() == 15, "{times}");
        assert!(times.contains("memcheck\tbad-test-pkg\talpha\t") && times.contains("\terrors 1\n") && times.contains("\ttimed out\n"), "{times}");
        assert!(times.contains("racecheck\tcustom-test-pkg\t*\t"), "{times}");
        assert!(!times.contains("skipme"), "ignored tests are not run: {times}");

        // The times of a run given: the slowest first (here synccheck's beta).
        let tsv = dir.join("times.tsv");
        let mut lines = String::from("tool\texe\ttest\tseconds\tstatus\n");
        for tool in ["memcheck", "racecheck", "synccheck", "initcheck"] {
            for test in ["alpha", "beta"] {
                let secs = if (tool, test) == ("synccheck", "beta") { 50 } else { 1 };
                // A job the earlier run did not start has no time: it takes its tool's and
                // executable's mean (1 s), not 0 (which would put it last).
                let status = if (tool, test) == ("memcheck", "alpha") { "0\tnot started" } else { "clean" };
                let secs = if status == "clean" { format!("{secs}\t") } else { String::new() };
                lines.push_str(&format!("{tool}\tgood-test-pkg\t{test}\t{secs}{status}\n"));
            }
        }
        std::fs::write(&tsv, lines).unwrap();
        let (code, text) = run(&["sanitize"], &[("GPUJOIN_SANITIZE_ONLY", "good"), ("GPUJOIN_SANITIZE_TIMES", tsv.to_str().unwrap())]);
        assert_eq!(code, Some(0), "{text}");
        assert!(text.lines().any(|l| l.starts_with("[1/8] synccheck good-test-pkg") && l.contains(" beta ")), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("[8/8] memcheck good-test-pkg")), "a job not started earlier runs last: {text}");
        assert!(text.lines().last().unwrap_or("").starts_with("sanitize: 8 jobs (4 tools x 1 executables, 2 tests): 8 clean, 0 with errors, 0 timed out, 0 failed"), "{text}");

        // A filter narrows the listed tests; initcheck's reports de-duplicated by kernel.
        let (code, text) = run(&["sanitize", "be", "initcheck"], &[("GPUJOIN_SANITIZE_TIMES", "none")]);
        let md = read("sanitize.md");
        assert_eq!(code, Some(1), "{text}");
        assert!(text.lines().last().unwrap_or("").starts_with("sanitize: 2 jobs (1 tools x 3 executables, 2 tests): 1 clean, 1 with errors"), "{text}");
        assert!(md.contains("- `cub::CUB_300000_SM_900::DeviceRadixSortSingleTileKernel`: 2 reports in 1 test: `bad-test-pkg: beta`"), "{md}");
        assert!(md.contains("Device Frame:void cub::CUB_300000_SM_900::BlockLoad<int>::Load"), "{md}");
        assert!(md.contains("custom-test-pkg: no test to run"), "{md}");

        // A deadline already passed: no job starts, each is reported, and the run fails.
        let (code, text) = run(&["sanitize", "memcheck"], &[("GPUJOIN_SANITIZE_ONLY", "good"), ("GPUJOIN_SANITIZE_DEADLINE", "0")]);
        let times = read("sanitize-times.tsv");
        assert_eq!(code, Some(1), "{text}");
        assert!(text.lines().last().unwrap_or("").starts_with("sanitize: 2 jobs (1 tools x 1 executables, 2 tests): 0 clean, 0 with errors, 0 timed out, 0 failed, 2 not started"), "{text}");
        assert!(times.contains("memcheck\tgood-test-pkg\talpha\t0\tnot started\n"), "{times}");

        let (code, text) = run(&["sanitize", "a", "b"], &[]);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains("two filters"), "{text}");

        let (code, text) = run(&["tests"], &[]);
        assert_eq!(code, Some(0), "{text}");
        assert!(text.trim_end().ends_with("8 passed, 0 failed, 0 skipped"), "{text}");
        // Lanes: three executables two at a time on the (fake) GPUs 5 and 7, the one matching
        // GPUJOIN_ALL_GPUS afterwards with every GPU; the same counts, outputs in MANIFEST order.
        let (code, text) = run(&["tests"], &[("GPUJOIN_LANES", "2"), ("GPUJOIN_ALL_GPUS", "^custom"), ("CUDA_VISIBLE_DEVICES", "5,7")]);
        let log = read("tests.log");
        assert_eq!(code, Some(0), "{text}");
        assert!(text.contains("run.sh: 3 test executables in 2 lanes on GPUs 5 7; then 1 with every GPU"), "{text}");
        assert!(text.trim_end().ends_with("8 passed, 0 failed, 0 skipped"), "{text}");
        let at = |s: &str| log.find(s).unwrap_or_else(|| panic!("{s} missing: {log}"));
        assert!(at("==> tests/good-test-pkg") < at("==> tests/bad-test-pkg") && at("==> tests/unit-lib-pkg") < at("==> tests/custom-test-pkg"), "{log}");
        assert!(log.contains("args=--show-output gpus=5") && log.contains("args=--show-output gpus=7"), "{log}");
        assert!(log.contains("running 0 tests: size= args=--show-output gpus=5,7"), "{log}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn json_strings() {
        assert_eq!(json::string(r#""a\"b\\c\u0041""#).unwrap(), "a\"b\\cA");
        assert_eq!(json::string("null"), None);
        assert_eq!(json::first_string(r#"["bench", "x"]"#).unwrap(), "bench");
    }
}
