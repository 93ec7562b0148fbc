//! Byte exchanges between the GPUs of one host over NCCL (feature `nccl`; cudarc's NCCL bindings,
//! `libnccl.so` loaded at run time).
//!
//! One process drives every GPU: [`Communicators::init_all`] makes one communicator a device
//! (`ncclCommInitAll`), and [`Communicators::exchange`] runs a list of [`Transfer`]s, each a byte
//! range of one rank's device copied into a byte range of another's, as one NCCL group of
//! point-to-point sends and receives (an all-to-all when every rank sends to every other). A
//! transfer within one rank is a device copy. Each rank's operations are ordered on its stream.
//!
//! NVLink multicast (NVLS) is never used: [`Communicators::init_all`] sets `NCCL_NVLS_ENABLE=0`
//! where the environment does not set it already.
//!
//! ```no_run
//! use gpujoin_device::{nccl::{Communicators, Transfer}, Device};
//! let streams = [Device::new(0)?.new_stream()?, Device::new(1)?.new_stream()?];
//! let comms = Communicators::init_all(&streams)?;
//! let a = streams[0].copy_from_host(&[1u8, 2, 3])?;
//! let mut b = streams[1].alloc::<u8>(3)?;
//! comms.exchange(vec![Transfer { from: 0, to: 1, src: a.view(), dst: b.view_mut() }])?;
//! assert_eq!(b.to_vec()?, vec![1, 2, 3]);
//! # Ok::<(), gpujoin_device::Error>(())
//! ```

use cudarc::nccl::{result, sys};

use crate::buffer::{DeviceView, DeviceViewMut};
use crate::error::{Error, Result};
use crate::stream::Stream;

/// One copy of an exchange: the bytes `src` on rank `from` into `dst` on rank `to` (equal lengths).
pub struct Transfer<'a> {
    pub from: usize,
    pub to: usize,
    pub src: DeviceView<'a, u8>,
    pub dst: DeviceViewMut<'a, u8>,
}

/// One NCCL communicator a rank, rank `r` on the device of `streams[r]`, its operations on that
/// stream.
pub struct Communicators {
    comms: Vec<sys::ncclComm_t>,
    streams: Vec<Stream>,
}

// SAFETY: NCCL communicators may be used from any thread, one operation at a time; `exchange`
// takes `&self` but NCCL groups are per thread, and the handles are only read.
unsafe impl Send for Communicators {}
unsafe impl Sync for Communicators {}

fn nccl(call: &str, e: result::NcclError) -> Error {
    Error::Cuda { call: call.to_string(), code: e.0 as i32, name: format!("{:?}", e.0) }
}

/// Whether `libnccl.so` can be loaded (it must be on the library path under that name; the
/// `nvidia-nccl-cu13` wheel ships `libnccl.so.2`, which `bundle/run.sh` links so).
pub fn is_available() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { sys::is_culib_present() }
}

impl Communicators {
    /// One communicator for each stream's device (the devices distinct), in one call.
    pub fn init_all(streams: &[Stream]) -> Result<Communicators> {
        if !is_available() {
            return Err(Error::Unsupported {
                what: "an exchange between GPUs over NCCL".into(),
                reason: "libnccl.so could not be loaded (put the nvidia-nccl-cu13 wheel's lib folder, with a libnccl.so link, on LD_LIBRARY_PATH)".into(),
            });
        }
        let ordinals: Vec<i32> = streams.iter().map(|s| s.device().ordinal() as i32).collect();
        let mut distinct = ordinals.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != ordinals.len() {
            return Err(Error::invalid(format!("NCCL communicators need distinct devices, got ordinals {ordinals:?}")));
        }
        if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
            // Multicast objects can put shared GPUs out of service: never use them.
            std::env::set_var("NCCL_NVLS_ENABLE", "0");
        }
        // Within one process NCCL may read and write the user's buffers from the peer GPU
        // directly; pool memory is only visible to other devices once the pool grants access.
        for a in streams {
            for b in streams {
                if a.device().ordinal() != b.device().ordinal() {
                    a.device().share_pool_with(b.device())?;
                }
            }
        }
        let mut comms = vec![std::ptr::null_mut(); streams.len()];
        // SAFETY: `comms` holds one handle a device; `ordinals` lists the devices.
        unsafe { result::comm_init_all(comms.as_mut_ptr(), streams.len() as i32, ordinals.as_ptr()) }.map_err(|e| nccl("ncclCommInitAll", e))?;
        Ok(Communicators { comms, streams: streams.to_vec() })
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.comms.len()
    }

    /// Runs every transfer: sends and receives between ranks as one NCCL group, copies within
    /// a rank on its stream. Returns once the operations are queued (each rank's stream orders
    /// them after the work queued before, and its later work after them).
    pub fn exchange(&self, mut transfers: Vec<Transfer<'_>>) -> Result<()> {
        let n = self.size();
        for t in &transfers {
            if t.from >= n || t.to >= n {
                return Err(Error::invalid(format!("a transfer from rank {} to rank {} among {n} ranks", t.from, t.to)));
            }
            crate::check_same_len("transfer source", t.src.len(), "transfer destination", t.dst.len())?;
        }
        for t in transfers.iter_mut().filter(|t| t.from == t.to) {
            let s = &self.streams[t.from];
            s.device().bind_to_thread()?;
            s.copy_device_to_device(&t.src, &mut t.dst)?;
        }
        result::group_start().map_err(|e| nccl("ncclGroupStart", e))?;
        let mut queued = Ok(());
        for t in transfers.iter().filter(|t| t.from != t.to && !t.src.is_empty()) {
            let (sf, st) = (&self.streams[t.from], &self.streams[t.to]);
            // SAFETY: live device ranges of src.len() bytes on the ranks' devices; the group
            // ends below before anything is freed (frees are ordered on the streams after it).
            let r = unsafe {
                result::send(t.src.raw() as *const _, t.src.len(), sys::ncclDataType_t::ncclUint8, t.to as i32, self.comms[t.from], sf.raw() as _)
                    .and_then(|_| result::recv(t.dst.raw() as *mut _, t.dst.len(), sys::ncclDataType_t::ncclUint8, t.from as i32, self.comms[t.to], st.raw() as _))
            };
            if let Err(e) = r {
                queued = Err(nccl("ncclSend/ncclRecv", e));
                break;
            }
        }
        let ended = result::group_end().map_err(|e| nccl("ncclGroupEnd", e));
        queued.and(ended.map(|_| ()))
    }
}

impl Drop for Communicators {
    fn drop(&mut self) {
        for s in &self.streams {
            let _ = s.synchronize();
        }
        for &c in &self.comms {
            // SAFETY: each handle came from ncclCommInitAll and is destroyed once.
            let _ = unsafe { result::comm_destroy(c) };
        }
    }
}
