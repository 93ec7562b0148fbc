//! Compiles the join kernels (cuda/join/*.cu).
fn main() {
    gpujoin_cuda_build::compile(
        "gpujoin_join",
        &["cuda/join/merge.cu", "cuda/join/interleave.cu", "cuda/join/keys.cu", "cuda/join/hash.cu"],
        &["cuda/include"],
        false,
    );
}
