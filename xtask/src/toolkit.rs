//! Finding the CUDA toolkit, or provisioning the pinned CUDA 13.0 wheels from PyPI.

use std::process::Command;

use gpujoin_cuda_build::{find_toolkit, provisioned_root, Toolkit, PROVISIONED_DIR};

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
