//! Finding the CUDA toolkit, or provisioning the pinned CUDA 13.0 wheels from PyPI.

use std::process::Command;

use gpujoin_cuda_build::{cache_root, find_toolkit, provisioned_root, Toolkit, PROVISIONED_DIR};

/// The wheels, pinned together (CUB under include/cccl, libcudart_static.a under lib).
pub const WHEELS: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-nvvm==13.0.88",
];

/// Returns the toolkit build scripts will use, provisioning the wheels first when there is none.
pub fn ensure() -> crate::Result<Toolkit> {
    if let Some(tk) = find_toolkit() {
        return Ok(tk);
    }
    let root = provisioned_root().ok_or("cannot place the toolkit cache: set GPUJOIN_CACHE or HOME")?;
    // provisioned_root() = <cache>/cuda-13.0.88/nvidia/cu13
    let target = root.parent().and_then(|p| p.parent()).ok_or("bad cache path")?.to_path_buf();
    eprintln!("xtask: no CUDA toolkit found; installing the pinned CUDA 13.0 wheels into {}", target.display());
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))
        .ok_or("provisioning needs python3 with pip")?;
    let tmp = target.with_file_name(format!("{PROVISIONED_DIR}.partial"));
    let _ = std::fs::remove_dir_all(&tmp);
    let mut c = Command::new(python);
    c.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target"])
        .arg(&tmp)
        .args(WHEELS);
    crate::run(c)?;
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&tmp, &target).map_err(|e| format!("moving {} into place: {e}", tmp.display()))?;
    find_toolkit().ok_or_else(|| format!("provisioned wheels, but no nvcc under {}", root.display()))
}

/// The NCCL wheel provisioned when no NCCL library is found (the multi-GPU joins' exchange).
pub const NCCL_WHEEL: &str = "nvidia-nccl-cu13==2.30.7";

/// A folder holding `libnccl.so` (the name cudarc loads), to put on `LD_LIBRARY_PATH`: the one
/// of an installed `nvidia-nccl-cu13` wheel (python3's `nvidia.nccl`) or of the system
/// (`ldconfig`), else the pinned wheel provisioned into the cache; the wheel ships
/// `libnccl.so.2`, so the folder returned is `<cache>/nccl-lib` with a `libnccl.so` link to it.
pub fn nccl() -> crate::Result<std::path::PathBuf> {
    use std::path::PathBuf;
    let cache = cache_root().ok_or("cannot place the NCCL cache: set GPUJOIN_CACHE or HOME")?;
    let links = cache.join("nccl-lib");
    if links.join("libnccl.so").exists() {
        return Ok(links);
    }
    let python_lib = || -> Option<PathBuf> {
        let o = Command::new("python3").args(["-c", "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))"]).output().ok()?;
        let dir = PathBuf::from(String::from_utf8(o.stdout).ok()?.trim());
        dir.join("libnccl.so.2").exists().then_some(dir)
    };
    let system_lib = || -> Option<PathBuf> {
        let o = Command::new("ldconfig").arg("-p").output().ok()?;
        let text = String::from_utf8(o.stdout).ok()?;
        let line = text.lines().find(|l| l.trim_start().starts_with("libnccl.so.2 "))?;
        PathBuf::from(line.rsplit("=> ").next()?.trim()).parent().map(|p| p.to_path_buf())
    };
    let provisioned = cache.join(format!("nccl-{}", NCCL_WHEEL.rsplit("==").next().unwrap_or("wheel")));
    let lib = match python_lib().or_else(system_lib) {
        Some(dir) => dir,
        None => {
            let wheel_lib = provisioned.join("nvidia").join("nccl").join("lib");
            if !wheel_lib.join("libnccl.so.2").exists() {
                eprintln!("xtask: no NCCL library found; installing {NCCL_WHEEL} into {}", provisioned.display());
                let mut c = Command::new("python3");
                c.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target"]).arg(&provisioned).arg(NCCL_WHEEL);
                crate::run(c)?;
            }
            wheel_lib
        }
    };
    std::fs::create_dir_all(&links).map_err(|e| format!("creating {}: {e}", links.display()))?;
    let _ = std::fs::remove_file(links.join("libnccl.so"));
    std::os::unix::fs::symlink(lib.join("libnccl.so.2"), links.join("libnccl.so")).map_err(|e| format!("linking libnccl.so in {}: {e}", links.display()))?;
    Ok(links)
}
