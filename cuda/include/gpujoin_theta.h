// C ABI of gpujoin's theta kernels (cuda/join/theta*.cu). Bindings: crates/join/src/ffi_theta.rs
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
