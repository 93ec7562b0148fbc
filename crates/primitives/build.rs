//! Compiles gpujoin's own primitive kernels (cuda/kernels/*.cu).
fn main() {
    gpujoin_cuda_build::compile(
        "gpujoin_kernels",
        &["cuda/kernels/search.cu", "cuda/kernels/lbs.cu", "cuda/kernels/gather.cu", "cuda/kernels/rle.cu", "cuda/kernels/partition.cu", "cuda/kernels/partition_wide.cu"],
        &["cuda/include"],
        false,
    );
}
