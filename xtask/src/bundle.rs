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
//! | `run.sh` | the runner: `bash bundle/run.sh [tests\|benches\|all] [filter]` |
//!
//! Extra arguments go to both `cargo test` and `cargo bench` (e.g. `--features ...`).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Keep the folder well under the 64 MiB that travels to the GPU machine.
const WARN_BYTES: u64 = 48 << 20;
/// Above this total the executables are gzipped (about 3x smaller: the CUDA fat binaries repeat).
const GZIP_BYTES: u64 = 24 << 20;

/// One executable that cargo reported.
#[derive(Debug)]
struct Artifact {
    package: String,
    kind: String,
    target: String,
    exe: PathBuf,
    package_dir: PathBuf,
}

pub fn build(rest: &[String]) -> crate::Result<()> {
    let root = crate::root();
    let bundle = root.join("bundle");
    let extra: Vec<&str> = rest.iter().map(String::as_str).collect();

    let tests = artifacts(&["test", "--workspace", "--exclude", "xtask", "--release", "--no-run"], &extra)?
        .into_iter()
        .collect::<Vec<_>>();
    let benches = artifacts(&["bench", "--workspace", "--exclude", "xtask", "--no-run"], &extra)?
        .into_iter()
        .filter(|a| a.kind == "bench")
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
        for a in list.iter() {
            let base = format!("{}-{}-{}", a.target, a.kind, a.package);
            let mut name = base.clone();
            let mut n = 2;
            while !used.insert(format!("{dir}/{name}")) {
                name = format!("{base}-{n}");
                n += 1;
            }
            let dest = folder.join(&name);
            std::fs::copy(&a.exe, &dest).map_err(|e| format!("copying {}: {e}", a.exe.display()))?;
            if has_strip {
                let ok = Command::new("strip").arg(&dest).status().is_ok_and(|s| s.success());
                if !ok {
                    eprintln!("xtask bundle: strip failed on {}; keeping it unstripped", dest.display());
                }
            }
            let rel = a.package_dir.strip_prefix(&root).unwrap_or(Path::new("."));
            let rel = if rel.as_os_str().is_empty() { ".".to_string() } else { rel.display().to_string() };
            manifest.push_str(&format!("{dir}\t{name}\t{rel}\n"));
        }
    }
    write(&bundle.join("MANIFEST"), &manifest)?;
    let packing = compress_if_large(&bundle, &manifest)?;
    let commit = commit(&root);
    write(&bundle.join("COMMIT"), &format!("{commit}\n"))?;
    let run_sh = bundle.join("run.sh");
    write(&run_sh, RUN_SH)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&run_sh, std::fs::Permissions::from_mode(0o755));
    }

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
    println!("run it there with: bash bundle/run.sh [tests|benches|all] [filter]");
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

/// A `compiler-artifact` message whose profile has `"test":true` and that names an executable.
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
    if !profile.iter().any(|(k, v)| k == "test" && *v == "true") {
        return None;
    }
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
    Some(Artifact { package, kind, target: name, exe: PathBuf::from(exe), package_dir })
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
            "tar -C '{}' -cf - tests benches | xz -T2 --lzma2=preset=3,dict=64MiB > '{}'",
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

fn mkdir(p: &Path) -> crate::Result<()> {
    std::fs::create_dir_all(p).map_err(|e| format!("creating {}: {e}", p.display()))
}

fn write(p: &Path, text: &str) -> crate::Result<()> {
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

/// The runner, written to `bundle/run.sh`.
const RUN_SH: &str = r#"#!/usr/bin/env bash
# gpujoin GPU bundle runner, written by `cargo xtask bundle`. Needs bash, not Rust.
#
#   bash bundle/run.sh [tests|benches|all] [filter]
#   bash bundle/run.sh unpack      # only unpack gzipped executables (for ncu, compute-sanitizer...)
#
# Environment:
#   GPUJOIN_REQUIRE_GPU  default 1 here: a GPU test without a device panics instead of skipping
#                        (an already-set value is kept, e.g. GPUJOIN_REQUIRE_GPU=0 on a CPU box)
#   OUT                  output folder (default bundle/out): tests.log, bench.log, bench.csv
#   GPUJOIN_TIMEOUT      optional limit in seconds for each executable (needs `timeout`)
# Sets GPUJOIN_COMMIT (from bundle/COMMIT) and GPUJOIN_BENCH_CSV=$OUT/bench.csv for the benches.
#
# Ends with one line `N passed, N failed, N skipped`; exits non-zero when anything failed.
# Tests: libtest counts; a test that printed `SKIPPED <name>: ...` counts as skipped (not passed),
# and libtest's "ignored" counts as skipped. An executable that crashed or timed out without a
# libtest summary counts as one failure. Benches: one count per executable (skipped when it
# printed SKIPPED lines, failed when it exited non-zero).
set -uo pipefail

BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BUNDLE")"
what="${1:-all}"
filter="${2:-}"
case "$what" in
  tests|benches|all|unpack) ;;
  -h|--help|help) sed -n '2,18p' "$BUNDLE/run.sh"; exit 0 ;;
  *) echo "usage: bash bundle/run.sh [tests|benches|all|unpack] [filter]" >&2; exit 2 ;;
esac

# Large bundles hold gzipped executables (`cargo xtask bundle` decides). A run unpacks them into
# a temporary folder, removed at exit; `run.sh unpack` unpacks them into bundle/ itself.
exe_dir="$BUNDLE"
tmp="$(mktemp)"
archive="$BUNDLE/executables.tar.xz"
if [[ "$what" != unpack ]] && { [[ -f "$archive" ]] || ls "$BUNDLE"/tests/*.gz "$BUNDLE"/benches/*.gz >/dev/null 2>&1; }; then
  exe_dir="$(mktemp -d)"
  trap 'rm -rf "$tmp" "$exe_dir"' EXIT
else
  trap 'rm -f "$tmp"' EXIT
fi
if [[ -f "$archive" ]]; then
  first="$(head -n1 "$BUNDLE/MANIFEST" | cut -f1,2 | tr '\t' '/')"
  if [[ "$exe_dir" != "$BUNDLE" || ! -x "$BUNDLE/$first" ]]; then
    if command -v xz >/dev/null && command -v tar >/dev/null; then
      xz -dc "$archive" | tar -x -C "$exe_dir" || { echo "run.sh: could not unpack $archive" >&2; exit 2; }
    else
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$archive" "$exe_dir" \
        || { echo "run.sh: could not unpack $archive (no xz, and python3 failed)" >&2; exit 2; }
    fi
  fi
fi
while IFS=$'\t' read -r k file dir <&3; do
  if [[ -f "$BUNDLE/$k/$file.gz" && ! -x "$BUNDLE/$k/$file" ]]; then
    mkdir -p "$exe_dir/$k"
    gzip -dc "$BUNDLE/$k/$file.gz" >"$exe_dir/$k/$file" && chmod +x "$exe_dir/$k/$file" \
      || { echo "run.sh: could not unpack $k/$file.gz" >&2; exit 2; }
  fi
done 3<"$BUNDLE/MANIFEST"
[[ "$what" == unpack ]] && { echo "unpacked into $BUNDLE"; exit 0; }

export GPUJOIN_REQUIRE_GPU="${GPUJOIN_REQUIRE_GPU:-1}"
export GPUJOIN_COMMIT="$(cat "$BUNDLE/COMMIT" 2>/dev/null || echo unknown)"
out="${OUT:-$BUNDLE/out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export GPUJOIN_BENCH_CSV="$out/bench.csv"

timeout_cmd=()
if [[ -n "${GPUJOIN_TIMEOUT:-}" ]] && command -v timeout >/dev/null; then
  timeout_cmd=(timeout --kill-after=10 "$GPUJOIN_TIMEOUT")
fi

passed=0 failed=0 skipped=0
summary=()

# run_one KIND FILE PKGDIR LOG: runs one executable from its package folder, as cargo would.
run_one() {
  local kind="$1" file="$2" dir="$3" log="$4"
  local exe="$BUNDLE/$kind/$file" cwd="$ROOT/$dir" rc
  [[ -x "$exe" ]] || exe="$exe_dir/$kind/$file"
  [[ -d "$cwd" ]] || cwd="$ROOT"
  local args=()
  if [[ "$kind" == tests ]]; then
    args=(--show-output)
  else
    args=(--bench)
  fi
  [[ -n "$filter" ]] && args+=("$filter")
  echo "==> $kind/$file ${args[*]}" | tee -a "$log"
  ( cd "$cwd" && CARGO_MANIFEST_DIR="$cwd" "${timeout_cmd[@]}" "$exe" "${args[@]}" ) 2>&1 | tee "$tmp" | tee -a "$log"
  rc=${PIPESTATUS[0]}
  local nskip p=0 f=0 i=0 note=""
  nskip=$(grep -c '^SKIPPED ' "$tmp")
  if [[ "$kind" == tests ]]; then
    local line
    line=$(grep -E '^test result: ' "$tmp" | tail -n 1)
    if [[ -n "$line" ]]; then
      p=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")
      f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
      i=$(sed -E 's/.* ([0-9]+) ignored.*/\1/' <<<"$line")
      p=$(( p > nskip ? p - nskip : 0 ))
      i=$(( i + nskip ))
      if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; note=" (exit $rc)"; fi
    elif [[ $rc -eq 0 ]]; then
      if [[ $nskip -gt 0 ]]; then i=$nskip; else p=1; fi
      note=" (no libtest summary)"
    else
      f=1; note=" (exit $rc, no libtest summary)"
    fi
  else
    if [[ $rc -ne 0 ]]; then f=1; note=" (exit $rc)"
    elif [[ $nskip -gt 0 ]]; then i=$nskip
    else p=1; fi
  fi
  [[ $rc -eq 124 && ${#timeout_cmd[@]} -gt 0 ]] && note=" (timed out after ${GPUJOIN_TIMEOUT}s)"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + i))
  summary+=("$(printf '%-8s %-60s %d passed, %d failed, %d skipped%s' "$kind" "$file" "$p" "$f" "$i" "$note")")
}

run_kind() {
  local kind="$1" log="$2" k file dir n=0
  : >"$log"
  while IFS=$'\t' read -r k file dir <&3; do
    [[ "$k" == "$kind" ]] || continue
    run_one "$kind" "$file" "$dir" "$log" </dev/null
    n=$((n + 1))
  done 3<"$BUNDLE/MANIFEST"
  [[ $n -gt 0 ]] || echo "(no $kind executables in this bundle)" | tee -a "$log"
}

echo "gpujoin bundle $GPUJOIN_COMMIT: $what${filter:+ (filter: $filter)}, GPUJOIN_REQUIRE_GPU=$GPUJOIN_REQUIRE_GPU, output in $out"
if [[ "$what" == tests || "$what" == all ]]; then
  run_kind tests "$out/tests.log"
fi
if [[ "$what" == benches || "$what" == all ]]; then
  rm -f "$GPUJOIN_BENCH_CSV"
  run_kind benches "$out/bench.log"
  echo
  echo "==> $GPUJOIN_BENCH_CSV"
  if [[ -s "$GPUJOIN_BENCH_CSV" ]]; then cat "$GPUJOIN_BENCH_CSV"; else echo "(no benchmark rows were written)"; fi
fi

echo
echo "==> summary ($GPUJOIN_COMMIT)"
for s in "${summary[@]}"; do echo "$s"; done
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
"#;

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
        // Same target, not a test profile (target.test is true, profile.test false): skipped.
        let rlib = line.replace(r#""overflow_checks":false,"test":true"#, r#""overflow_checks":false,"test":false"#);
        assert!(parse_artifact(&rlib).is_none());
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

    #[test]
    fn json_strings() {
        assert_eq!(json::string(r#""a\"b\\c\u0041""#).unwrap(), "a\"b\\cA");
        assert_eq!(json::string("null"), None);
        assert_eq!(json::first_string(r#"["bench", "x"]"#).unwrap(), "bench");
    }
}
