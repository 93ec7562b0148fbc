// C ABI of gpujoin's sort-based theta-join kernels (cuda/join/theta_sort.cu). Bindings: crates/join/src/ffi_theta_sort.rs
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
