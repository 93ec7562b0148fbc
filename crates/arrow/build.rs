//! Compiles the C peer of the Arrow C Device Data Interface tests (`cuda/peer.cu`): a stand-in
//! for another GPU library, with C ABI functions prefixed `gj_peer_` (see `c_device::peer`).
//! Nothing in the library calls it, so only the tests' executables link its objects.
fn main() {
    println!("cargo:rerun-if-changed=cuda");
    gpujoin_cuda_build::compile("gpujoin_arrow_peer", &["crates/arrow/cuda/peer.cu"], &[], false);
}
