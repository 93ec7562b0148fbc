//! Compiles cuda/cub/*.cu with nvcc and links the static CUDA runtime (once for the program).
fn main() {
    gpujoin_cuda_build::compile(
        "gpujoin_cub",
        &[
            "cuda/cub/sort_pairs_32.cu",
            "cuda/cub/sort_pairs_64.cu",
            "cuda/cub/sort_keys.cu",
            "cuda/cub/scan.cu",
            "cuda/cub/rle.cu",
            "cuda/cub/select.cu",
            "cuda/cub/reduce_histogram.cu",
            "cuda/cub/errors.cu",
        ],
        &["cuda/include", "cuda/cub"],
        true,
    );
}
