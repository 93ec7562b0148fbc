//! Compiles the join kernels: every `cuda/join/*.cu`, each its own translation unit.
fn main() {
    gpujoin_cuda_build::compile_folder("gpujoin_join", "cuda/join");
}
