//! The GPUs a join runs on: one rank a GPU (or several ranks on one GPU, for development), each
//! with its stream, and how bytes move between ranks.

use gpujoin_device::nccl::{Communicators, Transfer};
use gpujoin_device::{Device, Error, Result, Stream};

/// How ranks exchange bytes.
enum Transport {
    /// One rank: nothing to exchange.
    Single,
    /// Every rank on one device: device copies.
    SameDevice,
    /// One rank a device: NCCL point-to-point in one group.
    Nccl(Communicators),
}

/// The ranks of a multi-GPU join: rank `r` works on [`Cluster::stream`]`(r)`.
///
/// ```no_run
/// use gpujoin_multi_gpu::Cluster;
/// let cluster = Cluster::all_devices()?; // one rank a GPU, NCCL between them
/// println!("{} ranks over {}", cluster.size(), cluster.transport());
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub struct Cluster {
    streams: Vec<Stream>,
    transport: Transport,
}

impl Cluster {
    /// One rank on each listed device (distinct ordinals), exchanging over NCCL when there are
    /// several.
    pub fn new(ordinals: &[usize]) -> Result<Cluster> {
        if ordinals.is_empty() {
            return Err(Error::invalid("a cluster of no devices"));
        }
        let streams = ordinals.iter().map(|&o| Device::new(o)?.new_stream()).collect::<Result<Vec<_>>>()?;
        let transport = if streams.len() == 1 { Transport::Single } else { Transport::Nccl(Communicators::init_all(&streams)?) };
        Ok(Cluster { streams, transport })
    }

    /// One rank on every device of the host.
    pub fn all_devices() -> Result<Cluster> {
        let n = Device::count()?;
        if n == 0 {
            return Err(Error::NoDevice("no CUDA device for a cluster".into()));
        }
        Cluster::new(&(0..n).collect::<Vec<_>>())
    }

    /// `ranks` ranks on the one device `ordinal`, each with its own stream, exchanging by device
    /// copies: the whole multi-GPU algorithm (hashing, skew, exchange, assembly) on one GPU, for
    /// development and tests on single-GPU machines.
    pub fn on_one_device(ordinal: usize, ranks: usize) -> Result<Cluster> {
        if ranks == 0 {
            return Err(Error::invalid("a cluster of 0 ranks"));
        }
        let device = Device::new(ordinal)?;
        let streams = (0..ranks).map(|_| device.new_stream()).collect::<Result<Vec<_>>>()?;
        let transport = if ranks == 1 { Transport::Single } else { Transport::SameDevice };
        Ok(Cluster { streams, transport })
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.streams.len()
    }

    /// Rank `rank`'s stream (and through it, its device).
    pub fn stream(&self, rank: usize) -> &Stream {
        &self.streams[rank]
    }

    /// Every rank's stream, in rank order.
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// How the ranks exchange bytes: `none` (one rank), `device copies` or `NCCL`.
    pub fn transport(&self) -> &'static str {
        match self.transport {
            Transport::Single => "none",
            Transport::SameDevice => "device copies",
            Transport::Nccl(_) => "NCCL",
        }
    }

    /// `f(rank, stream)` for every rank at once, each on a thread of its own bound to the rank's
    /// device; the results in rank order (the first error, if any).
    pub fn per_rank<T: Send>(&self, f: impl Fn(usize, &Stream) -> Result<T> + Sync) -> Result<Vec<T>> {
        if self.size() == 1 {
            let st = &self.streams[0];
            st.device().bind_to_thread()?;
            return Ok(vec![f(0, st)?]);
        }
        let results: Vec<Result<T>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .streams
                .iter()
                .enumerate()
                .map(|(r, st)| {
                    let f = &f;
                    scope.spawn(move || {
                        st.device().bind_to_thread()?;
                        f(r, st)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::invalid("a rank's thread panicked")))).collect()
        });
        results.into_iter().collect()
    }

    /// Waits for every rank's stream.
    pub fn synchronize(&self) -> Result<()> {
        self.streams.iter().try_for_each(Stream::synchronize)
    }

    /// Runs the transfers, then waits for every rank (the sources may be freed after it).
    pub(crate) fn exchange(&self, transfers: Vec<Transfer<'_>>) -> Result<()> {
        match &self.transport {
            Transport::Nccl(c) => c.exchange(transfers)?,
            Transport::Single | Transport::SameDevice => {
                // Every buffer lives on one device: order the copies after every rank's work.
                self.synchronize()?;
                for mut t in transfers {
                    if t.from.max(t.to) >= self.size() {
                        return Err(Error::invalid(format!("a transfer from rank {} to rank {} among {}", t.from, t.to, self.size())));
                    }
                    self.streams[t.to].copy_device_to_device(&t.src, &mut t.dst)?;
                }
            }
        }
        self.synchronize()
    }
}
