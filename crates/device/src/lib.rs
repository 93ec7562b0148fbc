//! # gpujoin-device
//!
//! The device layer of gpujoin, on [cudarc]'s driver API: the [`Device`] and its primary context,
//! [`Stream`]s, typed [`DeviceBuffer`]s from the stream-ordered pool with borrowed
//! [`DeviceView`]s, [`PinnedBuffer`]s, [`Event`]s and a [`Timer`], and the one [`Error`] type.
//!
//! No function panics for lack of a driver or device: [`Device::new`] returns
//! [`Error::NoDriver`] or [`Error::NoDevice`].
//!
//! ```no_run
//! use gpujoin_device::Device;
//! let device = Device::new(0)?;
//! let stream = device.new_stream()?;
//! let buf = stream.copy_from_host(&[1u32, 2, 3])?;
//! assert_eq!(buf.to_vec()?, vec![1, 2, 3]);
//! # Ok::<(), gpujoin_device::Error>(())
//! ```

mod block_cache;
mod buffer;
pub mod counts;
mod device;
mod error;
mod event;
mod free_list;
#[cfg(feature = "nccl")]
pub mod nccl;
mod pinned;
mod stream;
pub mod testing;

pub use buffer::{DeviceBuffer, DeviceView, DeviceViewMut};
pub use bytemuck::Pod;
pub use device::{Device, DeviceOptions, HostWait, MemoryInfo, PoolMemory, ReleaseThreshold};
pub use error::{check_same_len, Error, Result};
pub use event::{Event, Timer};
pub use free_list::{size_class, SizeClassFreeList};
pub use pinned::{HostRegistration, PinnedBuffer};
pub use stream::Stream;
