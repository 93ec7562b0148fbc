//! Device lanes: how many partitions of the process use one device at once
//! ([`GpuJoinConfig::device_lanes`](crate::GpuJoinConfig::device_lanes)).
//!
//! Every CUDA call takes locks that all threads of the process share. On TPC-H SF10 (16
//! partitions, H200), sixteen partitions uploading and joining at once while DataFusion's
//! threads kept the cores busy made those calls wait for cores: the device was idle most of the
//! time. A lane is taken for a partition's device work (its uploads, its join, its index
//! download) and given back before its host work (gathering output columns, sending batches), so
//! a partition never holds one while it waits for another partition.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

struct Lanes {
    /// Device ordinal -> lanes taken now.
    taken: Mutex<BTreeMap<usize, usize>>,
    freed: Condvar,
}

static LANES: Lanes = Lanes { taken: Mutex::new(BTreeMap::new()), freed: Condvar::new() };

/// One of a device's lanes, given back when dropped.
pub(crate) struct Lane {
    device: usize,
}

impl Lane {
    /// Waits until fewer than `most` lanes of `device` are taken (at least one lane always
    /// exists), takes one; returns it with the time waited.
    pub(crate) fn take(device: usize, most: usize) -> (Lane, Duration) {
        let t = Instant::now();
        let mut taken = LANES.taken.lock().unwrap_or_else(|p| p.into_inner());
        while taken.get(&device).copied().unwrap_or(0) >= most.max(1) {
            taken = LANES.freed.wait(taken).unwrap_or_else(|p| p.into_inner());
        }
        *taken.entry(device).or_insert(0) += 1;
        (Lane { device }, t.elapsed())
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let mut taken = LANES.taken.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = taken.get_mut(&self.device) {
            *n = n.saturating_sub(1);
        }
        drop(taken);
        LANES.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_given_lanes_are_taken_at_once() {
        // Device ordinal 1000: no other test takes its lanes.
        let running = std::sync::atomic::AtomicUsize::new(0);
        let most_seen = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let (_lane, _) = Lane::take(1000, 3);
                        let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                        most_seen.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(200));
                        running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    }
                });
            }
        });
        let most = most_seen.into_inner();
        assert!((1..=3).contains(&most), "{most} lanes at once");
        // All given back: three can be taken again at once, and zero lanes means one.
        let held: Vec<_> = (0..3).map(|_| Lane::take(1000, 3).0).collect();
        drop(held);
        let (_one, waited) = Lane::take(1001, 0);
        assert!(waited < Duration::from_secs(1));
    }
}
