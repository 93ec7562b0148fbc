//! Helpers for GPU tests: run on a device when there is one, say plainly that they skipped when
//! there is none, and fail loudly when `GPUJOIN_REQUIRE_GPU=1` (set by the GPU bundle's runner).

use std::sync::OnceLock;

use crate::{Device, Error};

static DEVICE: OnceLock<Result<Device, Error>> = OnceLock::new();

/// The shared test device, or `None` after printing `SKIPPED <test>: ...` when there is none.
///
/// Panics when `GPUJOIN_REQUIRE_GPU` is set and no device opens: on a GPU machine a missing
/// device is a failure, not a skip.
pub fn device_or_skip(test: &str) -> Option<Device> {
    let d = DEVICE.get_or_init(|| Device::new(0));
    match d {
        Ok(d) => {
            d.bind_to_thread().expect("bind the test device to this thread");
            Some(d.clone())
        }
        Err(e) => {
            if std::env::var_os("GPUJOIN_REQUIRE_GPU").is_some_and(|v| v != "0") {
                panic!("GPUJOIN_REQUIRE_GPU is set but no device opened: {e}");
            }
            eprintln!("SKIPPED {test}: {e}");
            None
        }
    }
}

/// True when a device is present (without printing anything).
pub fn has_device() -> bool {
    DEVICE.get_or_init(|| Device::new(0)).is_ok()
}
