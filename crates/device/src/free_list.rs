//! [`SizeClassFreeList`]: freed memory blocks kept by size class ([`size_class`]) for the next
//! allocation of the same class, within a byte budget. A stream's cache of device blocks
//! ([`Device::new_stream_with_block_cache`](crate::Device::new_stream_with_block_cache)) and
//! gpujoin-arrow's pool of page-locked download blocks both keep their blocks in one.
//!
//! Sizes are powers of two from the owner's smallest class: with a smallest class of 256 bytes a
//! request of 300 bytes takes a 512-byte block. The class is a pure function of the request, so
//! owners compute it without the lock they keep their list under. Blocks are kept under a key as well (a device's
//! ordinal, or `0` where there is one kind), so a list can hold blocks of several devices and
//! hand each only its own.
//!
//! ```
//! use gpujoin_device::{size_class, SizeClassFreeList};
//!
//! let mut list = SizeClassFreeList::new(1024); // 1 KiB kept at most
//! let class = size_class(300, 256).unwrap(); // classes from 256 B
//! assert_eq!(class, 512);
//! assert!(list.keep(0, class, "block a").is_ok());
//! assert_eq!(list.keep(0, 1024, "block b"), Err("block b")); // 512 + 1024 > 1024: not kept
//! assert_eq!(list.take(0, 512), Some("block a"));
//! assert_eq!(list.take(0, 512), None);
//! ```

use std::collections::BTreeMap;

/// The size class of a request of `bytes` bytes with classes from `smallest` bytes: the power of
/// two at least `bytes` and at least `smallest`; `None` past the largest power of two a `usize`
/// holds.
///
/// Example, `smallest` 256: 1 -> 256, 256 -> 256, 300 -> 512, 4097 -> 8192.
pub fn size_class(bytes: usize, smallest: usize) -> Option<usize> {
    bytes.max(smallest).checked_next_power_of_two()
}

/// Freed blocks of type `B` by (key, size class), at most `capacity` bytes of them. See the
/// [module docs](self).
#[derive(Debug)]
pub struct SizeClassFreeList<B> {
    capacity: usize,
    held: usize,
    free: BTreeMap<(usize, usize), Vec<B>>,
}

impl<B> SizeClassFreeList<B> {
    /// An empty list keeping at most `capacity` bytes.
    pub const fn new(capacity: usize) -> Self {
        SizeClassFreeList { capacity, held: 0, free: BTreeMap::new() }
    }

    /// The most bytes kept at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes kept now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// A kept block of size class `class` under `key`, if there is one.
    pub fn take(&mut self, key: usize, class: usize) -> Option<B> {
        let blocks = self.free.get_mut(&(key, class))?;
        let block = blocks.pop()?;
        if blocks.is_empty() {
            self.free.remove(&(key, class));
        }
        self.held -= class;
        Some(block)
    }

    /// Keeps `block` of size class `class` under `key`; gives it back (`Err`) when that would
    /// pass the capacity, for the caller to free.
    pub fn keep(&mut self, key: usize, class: usize, block: B) -> Result<(), B> {
        if self.held.saturating_add(class) > self.capacity {
            return Err(block);
        }
        self.held += class;
        self.free.entry((key, class)).or_default().push(block);
        Ok(())
    }

    /// How many blocks of size class `class` are kept under `key`.
    pub fn count(&self, key: usize, class: usize) -> usize {
        self.free.get(&(key, class)).map_or(0, Vec::len)
    }

    /// Every kept block with its size class, the list left empty.
    pub fn drain(&mut self) -> Vec<(usize, B)> {
        self.held = 0;
        std::mem::take(&mut self.free).into_iter().flat_map(|((_, class), blocks)| blocks.into_iter().map(move |b| (class, b))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{size_class, SizeClassFreeList};

    #[test]
    fn size_classes_are_powers_of_two_from_the_smallest() {
        assert_eq!([1, 255, 256, 257, 300, 4096, 4097].map(|b| size_class(b, 256).unwrap()), [256, 256, 256, 512, 512, 4096, 8192]);
        assert_eq!(size_class(usize::MAX, 256), None);
        assert_eq!(size_class(1, 1 << 16), Some(1 << 16));
    }

    #[test]
    fn blocks_come_back_by_key_and_class_within_the_capacity() {
        let mut list = SizeClassFreeList::new(2048);
        assert_eq!(list.keep(0, 512, 'a'), Ok(()));
        assert_eq!(list.keep(1, 512, 'b'), Ok(()));
        assert_eq!(list.keep(0, 1024, 'c'), Ok(()));
        assert_eq!(list.keep(0, 256, 'd'), Err('d'), "2048 + 256 bytes would pass the capacity");
        assert_eq!((list.held(), list.count(0, 512), list.count(1, 512), list.count(0, 1024)), (2048, 1, 1, 1));
        assert_eq!(list.take(1, 1024), None, "no 1 KiB block under key 1");
        assert_eq!(list.take(1, 512), Some('b'));
        assert_eq!(list.take(1, 512), None);
        assert_eq!(list.held(), 1536);
        let mut drained = list.drain();
        drained.sort();
        assert_eq!(drained, [(512, 'a'), (1024, 'c')]);
        assert_eq!((list.held(), list.count(0, 512)), (0, 0));
    }
}
