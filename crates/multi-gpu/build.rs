//! Compiles the multi-GPU kernels: every `cuda/multi/*.cu`, each its own translation unit.
fn main() {
    gpujoin_cuda_build::compile_folder("gpujoin_multi", "cuda/multi");
}
