// C ABI of gpujoin's inlj kernels (cuda/join/inlj*.cu). Bindings: crates/join/src/ffi_inlj.rs
// (`cargo xtask bindgen`).
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
