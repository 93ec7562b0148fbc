//! Build-script helper shared by the crates that compile CUDA (`cub-sys`, `primitives`, `join`).
//!
//! # Finding the toolkit
//! The first of these that names an existing `nvcc` wins:
//! 1. `NVCC` — the path of the `nvcc` executable;
//! 2. `CUDA_HOME`, then `CUDA_PATH`, then `CUDA_ROOT` — a toolkit root containing `bin/nvcc`;
//! 3. `nvcc` on `PATH`;
//! 4. `/usr/local/cuda`;
//! 5. the toolkit that `cargo xtask toolkit` provisions from the pinned PyPI wheels
//!    (`$GPUJOIN_CACHE`, default `~/.cache/gpujoin`, subfolder `cuda-13.0.88/nvidia/cu13`).
//!
//! # Targets
//! `GPUJOIN_CUDA_ARCHS` lists the SM versions to build for, separated by commas
//! (default `90`, the H100). Machine code is embedded for each and PTX for the highest, so newer
//! GPUs can still load the code.

use std::env;
use std::path::{Path, PathBuf};

/// Version directory of the provisioned wheels, kept in step with `xtask/src/toolkit.rs`.
pub const PROVISIONED_DIR: &str = "cuda-13.0.88";

/// A located CUDA toolkit.
#[derive(Debug, Clone)]
pub struct Toolkit {
    pub nvcc: PathBuf,
    pub root: PathBuf,
    /// Where the toolkit was found, for messages.
    pub source: &'static str,
}

impl Toolkit {
    /// Include directories: `include`, plus `include/cccl` where CUB lives in CUDA 13 and the wheels.
    pub fn include_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.root.join("include")];
        let cccl = self.root.join("include").join("cccl");
        if cccl.is_dir() {
            dirs.push(cccl);
        }
        dirs
    }

    /// The directory holding `libcudart_static.a`.
    pub fn lib_dir(&self) -> Option<PathBuf> {
        ["lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"]
            .iter()
            .map(|d| self.root.join(d))
            .find(|d| d.join("libcudart_static.a").is_file())
    }
}

fn nvcc_in(root: &Path) -> Option<PathBuf> {
    let p = root.join("bin").join("nvcc");
    p.is_file().then_some(p)
}

fn root_of(nvcc: &Path) -> PathBuf {
    let canon = nvcc.canonicalize().unwrap_or_else(|_| nvcc.to_path_buf());
    canon.parent().and_then(|b| b.parent()).map(Path::to_path_buf).unwrap_or_default()
}

/// gpujoin's cache folder (`$GPUJOIN_CACHE`, default `~/.cache/gpujoin`): the provisioned
/// toolkit, the nvcc objects, the provisioned NCCL.
pub fn cache_root() -> Option<PathBuf> {
    env::var_os("GPUJOIN_CACHE")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("gpujoin")))
}

/// The provisioned-toolkit root (`$GPUJOIN_CACHE/cuda-13.0.88/nvidia/cu13`).
pub fn provisioned_root() -> Option<PathBuf> {
    Some(cache_root()?.join(PROVISIONED_DIR).join("nvidia").join("cu13"))
}

/// Finds the toolkit in the documented order; `None` if there is none.
pub fn find_toolkit() -> Option<Toolkit> {
    if let Some(nvcc) = env::var_os("NVCC").map(PathBuf::from) {
        if nvcc.is_file() {
            return Some(Toolkit { root: root_of(&nvcc), nvcc, source: "NVCC" });
        }
    }
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(root) = env::var_os(var).map(PathBuf::from) {
            if let Some(nvcc) = nvcc_in(&root) {
                return Some(Toolkit { nvcc, root, source: var });
            }
        }
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let nvcc = dir.join("nvcc");
            if nvcc.is_file() {
                return Some(Toolkit { root: root_of(&nvcc), nvcc, source: "PATH" });
            }
        }
    }
    let usr = PathBuf::from("/usr/local/cuda");
    if let Some(nvcc) = nvcc_in(&usr) {
        return Some(Toolkit { nvcc, root: usr, source: "/usr/local/cuda" });
    }
    let prov = provisioned_root()?;
    nvcc_in(&prov).map(|nvcc| Toolkit { nvcc, root: prov, source: "provisioned wheels" })
}

/// SM versions from `GPUJOIN_CUDA_ARCHS` (default `["90"]`).
pub fn archs() -> Vec<String> {
    let raw = env::var("GPUJOIN_CUDA_ARCHS").unwrap_or_else(|_| "90".to_string());
    let mut v: Vec<String> = raw
        .split([',', ';', ' '])
        .map(|s| s.trim().trim_start_matches("sm_").to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if v.is_empty() {
        v.push("90".into());
    }
    v
}

/// Compiles `sources` (paths relative to the workspace root) into the static library `lib_name`.
///
/// `include_dirs` are extra include directories relative to the workspace root. When
/// `link_runtime` is set, also links `cudart_static` and the system libraries it needs (only
/// `gpujoin-cub-sys` does this, so the program holds one CUDA runtime).
pub fn compile(lib_name: &str, sources: &[&str], include_dirs: &[&str], link_runtime: bool) {
    for var in [
        "NVCC", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "PATH", "GPUJOIN_CUDA_ARCHS", "GPUJOIN_CACHE",
        "GPUJOIN_NVCC_FLAGS", "GPUJOIN_NVCC_CACHE",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let toolkit = find_toolkit().unwrap_or_else(|| {
        panic!(
            "\n\ngpujoin: no CUDA toolkit found (looked at NVCC, CUDA_HOME, CUDA_PATH, CUDA_ROOT, PATH, \
             /usr/local/cuda and the provisioned cache {}).\n\
             Run `cargo xtask toolkit` once to provision the pinned CUDA 13.0 wheels, or build through \
             `cargo xtask test` / `cargo xtask build`, which do it for you.\n\n",
            provisioned_root().map(|p| p.display().to_string()).unwrap_or_default()
        )
    });
    let ws = workspace_root();
    // cc's CUDA mode takes nvcc from the NVCC variable.
    env::set_var("NVCC", &toolkit.nvcc);
    println!("cargo:rerun-if-changed={}", ws.join("cuda/include").display());
    for dir in include_dirs {
        println!("cargo:rerun-if-changed={}", ws.join(dir).display());
    }
    // One library per source file, compiled on parallel threads: each file is its own translation
    // unit (no relocatable device code, so nvcc optimizes each whole), and the slow CUB files
    // build side by side.
    let headers = headers_digest(&ws, sources, include_dirs);
    let jobs: usize = env::var("NUM_JOBS").ok().and_then(|j| j.parse().ok()).unwrap_or(2).max(1);
    let queue = std::sync::Mutex::new(sources.iter().enumerate().collect::<Vec<_>>());
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(sources.len()) {
            scope.spawn(|| loop {
                let Some((i, src)) = queue.lock().unwrap().pop() else { break };
                let p = ws.join(src);
                println!("cargo:rerun-if-changed={}", p.display());
                let name = format!("{lib_name}_{i}");
                let key = headers.as_deref().and_then(|d| cache_key(&toolkit, &p, d));
                if key.as_ref().is_some_and(|k| restore_cached(k, &name)) {
                    return_link_lines(&name);
                    continue;
                }
                let mut build = base_build(&toolkit, &ws, include_dirs);
                build.file(&p);
                match build.try_compile(&name) {
                    Ok(()) => {
                        if let Some(k) = &key {
                            store_cached(k, &name);
                        }
                    }
                    Err(e) => failures.lock().unwrap().push(format!("{src}: {e}")),
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    if !failures.is_empty() {
        panic!("gpujoin: nvcc failed:\n{}", failures.join("\n"));
    }
    if link_runtime {
        let lib = toolkit.lib_dir().unwrap_or_else(|| {
            panic!("gpujoin: no libcudart_static.a under {}", toolkit.root.display())
        });
        println!("cargo:rustc-link-search=native={}", lib.display());
        println!("cargo:rustc-link-lib=static=cudart_static");
        for sys in ["stdc++", "dl", "pthread", "rt"] {
            println!("cargo:rustc-link-lib=dylib={sys}");
        }
    }
}

/// The folder of the content-addressed object cache: `$GPUJOIN_NVCC_CACHE`, else
/// `$GPUJOIN_CACHE/nvcc-objects` (default `~/.cache/gpujoin/nvcc-objects`). `GPUJOIN_NVCC_CACHE=0`
/// turns the cache off. Keys hash the source, every header the build can see, the toolkit, the
/// targets and the extra flags, so a hit is the library nvcc would have produced; separate
/// checkouts (git worktrees) share it, and an unchanged `.cu` file is never compiled twice.
fn cache_dir() -> Option<PathBuf> {
    match env::var_os("GPUJOIN_NVCC_CACHE") {
        Some(v) if v == "0" => None,
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => cache_root().map(|c| c.join("nvcc-objects")),
    }
}

/// FNV-1a over the bytes fed to it (stable across Rust versions, unlike `DefaultHasher`).
struct Fnv(u64, u64);
impl Fnv {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100000001b3);
            self.1 = (self.1 ^ b as u64).wrapping_mul(0x100000001b3).rotate_left(5);
        }
        self.0 ^= bytes.len() as u64;
        self.0 = self.0.wrapping_mul(0x100000001b3);
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// One digest of every header the sources can include: the files under `cuda/include`, the
/// extra include directories and the sources' own directories, except translation units (`.cu`),
/// so that editing one `.cu` file does not invalidate its siblings' cached objects. Computed once
/// per build script.
fn headers_digest(ws: &Path, sources: &[&str], include_dirs: &[&str]) -> Option<String> {
    cache_dir()?;
    let mut files = Vec::new();
    files_under(&ws.join("cuda/include"), &mut files);
    for dir in include_dirs {
        files_under(&ws.join(dir), &mut files);
    }
    for src in sources {
        if let Some(parent) = ws.join(src).parent() {
            files_under(parent, &mut files);
        }
    }
    files.retain(|f| f.extension().is_none_or(|e| e != "cu"));
    files.sort();
    files.dedup();
    let mut h = Fnv(0xcbf29ce484222325, 0x84222325cbf29ce4);
    for f in files {
        h.feed(f.strip_prefix(ws).unwrap_or(&f).display().to_string().as_bytes());
        h.feed(&std::fs::read(&f).ok()?);
    }
    Some(format!("{:016x}{:016x}", h.0, h.1))
}

/// The cache key of `src`: its contents, the headers' digest, the toolkit, the targets and the
/// extra flags.
fn cache_key(toolkit: &Toolkit, src: &Path, headers: &str) -> Option<String> {
    let mut h = Fnv(0xcbf29ce484222325, 0x84222325cbf29ce4);
    h.feed(b"gpujoin-nvcc-cache-v2");
    h.feed(toolkit.nvcc.display().to_string().as_bytes());
    h.feed(std::fs::metadata(&toolkit.nvcc).ok()?.len().to_string().as_bytes());
    h.feed(archs().join(",").as_bytes());
    h.feed(env::var("GPUJOIN_NVCC_FLAGS").unwrap_or_default().as_bytes());
    h.feed(headers.as_bytes());
    h.feed(&std::fs::read(src).ok()?);
    Some(format!("{:016x}{:016x}", h.0, h.1))
}

fn out_dir() -> PathBuf {
    PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"))
}

fn restore_cached(key: &str, name: &str) -> bool {
    let Some(dir) = cache_dir() else { return false };
    let cached = dir.join(format!("{key}.a"));
    cached.is_file() && std::fs::copy(&cached, out_dir().join(format!("lib{name}.a"))).is_ok()
}

fn store_cached(key: &str, name: &str) {
    let Some(dir) = cache_dir() else { return };
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let tmp = dir.join(format!("{key}.a.{}", std::process::id()));
    if std::fs::copy(out_dir().join(format!("lib{name}.a")), &tmp).is_ok() {
        let _ = std::fs::rename(&tmp, dir.join(format!("{key}.a")));
    }
}

/// What `cc` prints for a CUDA library it compiled, printed instead for one taken from the cache.
fn return_link_lines(name: &str) {
    println!("cargo:rustc-link-search=native={}", out_dir().display());
    println!("cargo:rustc-link-lib=static={name}");
    println!("cargo:rustc-link-lib=cudart_static");
    println!("cargo:rustc-link-lib=stdc++");
}

fn base_build(toolkit: &Toolkit, ws: &Path, include_dirs: &[&str]) -> cc::Build {
    let mut build = cc::Build::new();
    build.cuda(true).cargo_warnings(true).flag("-std=c++17").opt_level(3).debug(false);
    for arch in archs() {
        build.flag("-gencode").flag(format!("arch=compute_{arch},code=sm_{arch}"));
    }
    if let Some(last) = archs().last() {
        build.flag("-gencode").flag(format!("arch=compute_{last},code=compute_{last}"));
    }
    build.flag("-Xcompiler").flag("-fPIC").flag("--expt-relaxed-constexpr");
    if let Ok(extra) = env::var("GPUJOIN_NVCC_FLAGS") {
        for f in extra.split_whitespace() {
            build.flag(f);
        }
    }
    for dir in toolkit.include_dirs() {
        build.include(dir);
    }
    for dir in include_dirs {
        build.include(ws.join(dir));
    }
    build
}

/// The workspace root: two levels above the calling crate's manifest (`crates/<name>`).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    manifest.parent().and_then(Path::parent).map(Path::to_path_buf).expect("workspace root")
}

/// [`compile`] of every `.cu` file directly in the workspace folder `folder` (each its own
/// translation unit, in name order), with `cuda/include` on the include path; reruns the build
/// script when the folder changes.
pub fn compile_folder(lib_name: &str, folder: &str) {
    let ws = workspace_root();
    let mut sources: Vec<String> = std::fs::read_dir(ws.join(folder))
        .unwrap_or_else(|e| panic!("{folder}: {e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cu"))
        .map(|n| format!("{folder}/{n}"))
        .collect();
    sources.sort();
    println!("cargo:rerun-if-changed={}", ws.join(folder).display());
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    compile(lib_name, &sources, &["cuda/include"], false);
}
