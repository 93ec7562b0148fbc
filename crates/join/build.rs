//! Compiles the join kernels: every `cuda/join/*.cu`, each its own translation unit.
fn main() {
    let ws = gpujoin_cuda_build::workspace_root();
    let mut sources: Vec<String> = std::fs::read_dir(ws.join("cuda/join"))
        .expect("cuda/join")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cu"))
        .map(|n| format!("cuda/join/{n}"))
        .collect();
    sources.sort();
    println!("cargo:rerun-if-changed={}", ws.join("cuda/join").display());
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    gpujoin_cuda_build::compile("gpujoin_join", &sources, &["cuda/include"], false);
}
