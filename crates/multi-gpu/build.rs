//! Compiles the multi-GPU kernels: every `cuda/multi/*.cu`, each its own translation unit.
fn main() {
    let ws = gpujoin_cuda_build::workspace_root();
    let mut sources: Vec<String> = std::fs::read_dir(ws.join("cuda/multi"))
        .expect("cuda/multi")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cu"))
        .map(|n| format!("cuda/multi/{n}"))
        .collect();
    sources.sort();
    println!("cargo:rerun-if-changed={}", ws.join("cuda/multi").display());
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    gpujoin_cuda_build::compile("gpujoin_multi", &sources, &["cuda/include"], false);
}
