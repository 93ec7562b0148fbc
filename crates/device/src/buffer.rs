//! Typed device buffers and borrowed views of them.
//!
//! A [`DeviceBuffer`] owns memory from the device's stream-ordered pool and returns it to the pool
//! on drop, ordered after the work queued on its stream. [`DeviceView`] and [`DeviceViewMut`] borrow
//! a range of it; the borrow keeps the memory alive for as long as a call can name it, which is the
//! guard an FFI call needs until its work is queued.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use bytemuck::Pod;
use cudarc::driver::{result, sys};

use crate::error::Result;
use crate::stream::Stream;

/// Owned device memory holding `len` values of `T`.
pub struct DeviceBuffer<T: Pod> {
    ptr: sys::CUdeviceptr,
    len: usize,
    stream: Stream,
    /// The size class of a block from the stream's block cache (it goes back there on drop);
    /// 0: memory from the pool, freed to it.
    class: usize,
    _marker: PhantomData<T>,
}

// SAFETY: the buffer is a handle to device memory; it is safe to move or share across threads
// (every access goes through a stream).
unsafe impl<T: Pod> Send for DeviceBuffer<T> {}
unsafe impl<T: Pod> Sync for DeviceBuffer<T> {}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer<{}>[{}]", std::any::type_name::<T>(), self.len)
    }
}

fn resolve(bounds: impl RangeBounds<usize>, len: usize) -> (usize, usize) {
    let start = match bounds.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s + 1,
        Bound::Unbounded => 0,
    };
    let end = match bounds.end_bound() {
        Bound::Included(&e) => e + 1,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    assert!(start <= end && end <= len, "range {start}..{end} out of bounds for length {len}");
    (start, end)
}

impl<T: Pod> DeviceBuffer<T> {
    pub(crate) fn from_raw_parts(ptr: sys::CUdeviceptr, len: usize, stream: Stream) -> Self {
        DeviceBuffer { ptr, len, stream, class: 0, _marker: PhantomData }
    }

    /// A block of size class `class` that goes back to `stream`'s block cache on drop.
    pub(crate) fn from_cached_block(ptr: sys::CUdeviceptr, len: usize, stream: Stream, class: usize) -> Self {
        DeviceBuffer { ptr, len, stream, class, _marker: PhantomData }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The stream that allocated the buffer and will free it.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// A view of the whole buffer.
    pub fn view(&self) -> DeviceView<'_, T> {
        DeviceView { ptr: self.ptr, len: self.len, _marker: PhantomData }
    }

    /// A mutable view of the whole buffer.
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        DeviceViewMut { ptr: self.ptr, len: self.len, _marker: PhantomData }
    }

    /// A view of `range` (panics when out of bounds, like slice indexing).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> DeviceView<'_, T> {
        self.view().into_slice(range)
    }

    /// A mutable view of `range` (panics when out of bounds, like slice indexing).
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceViewMut<'_, T> {
        self.view_mut().into_slice(range)
    }

    /// Copies the contents to the host, waiting for the buffer's stream.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.stream.copy_to_host(&self.view())
    }

    /// Reinterprets the buffer as elements of another type of the same size (e.g. `u32` row
    /// indices as a `#[repr(transparent)]` wrapper). Panics if the sizes differ.
    pub fn cast<U: Pod>(self) -> DeviceBuffer<U> {
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>(), "cast between types of different sizes");
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: we move the fields out of a buffer whose destructor will not run.
        let stream = unsafe { std::ptr::read(&me.stream) };
        DeviceBuffer { ptr: me.ptr, len: me.len, stream, class: me.class, _marker: PhantomData }
    }

    /// The same memory as raw bytes (`len * size_of::<T>()` of them), e.g. an Arrow buffer.
    pub fn into_bytes(self) -> DeviceBuffer<u8> {
        let bytes = self.len * std::mem::size_of::<T>();
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: we move the fields out of a buffer whose destructor will not run.
        let stream = unsafe { std::ptr::read(&me.stream) };
        DeviceBuffer { ptr: me.ptr, len: bytes, stream, class: me.class, _marker: PhantomData }
    }

    /// Shortens the buffer to `len` elements (the memory is kept until drop).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // A cached block serves the stream's next allocation of its class: that work is
            // queued after every use of this buffer on the stream.
            if self.class > 0 && self.stream.keep_block(self.ptr, self.class) {
                return;
            }
            let _ = self.stream.device().bind_to_thread();
            // SAFETY: ptr came from cuMemAllocAsync on this stream; freeing on the same stream
            // orders the free after every use queued there. Errors cannot be returned from drop.
            let _ = crate::counts::pool_free(|| unsafe { result::free_async(self.ptr, self.stream.raw() as sys::CUstream) });
        }
    }
}

/// A borrowed, read-only range of device memory.
pub struct DeviceView<'a, T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    _marker: PhantomData<&'a T>,
}

impl<T> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceView<'_, T> {}

/// A borrowed, writable range of device memory.
pub struct DeviceViewMut<'a, T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    _marker: PhantomData<&'a mut T>,
}

// SAFETY: views are handles into device memory, accessed only through streams.
unsafe impl<T: Sync> Send for DeviceView<'_, T> {}
unsafe impl<T: Sync> Sync for DeviceView<'_, T> {}
unsafe impl<T: Send> Send for DeviceViewMut<'_, T> {}

impl<'a, T> DeviceView<'a, T> {
    /// A view from a raw device pointer.
    ///
    /// # Safety
    /// `ptr` must point to `len` initialized values of `T` in device memory that outlive `'a`.
    pub unsafe fn from_raw(ptr: u64, len: usize) -> Self {
        DeviceView { ptr, len, _marker: PhantomData }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// The device address, for FFI.
    pub fn as_ptr(&self) -> *const T {
        self.ptr as *const T
    }
    /// The device address as an integer.
    pub fn raw(&self) -> u64 {
        self.ptr
    }
    /// A sub-range (panics when out of bounds).
    pub fn into_slice(self, range: impl RangeBounds<usize>) -> DeviceView<'a, T> {
        let (s, e) = resolve(range, self.len);
        DeviceView { ptr: self.ptr + (s * std::mem::size_of::<T>()) as u64, len: e - s, _marker: PhantomData }
    }
    /// A sub-range (panics when out of bounds).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> DeviceView<'a, T> {
        self.into_slice(range)
    }
    /// Splits into `[0, mid)` and `[mid, len)`.
    pub fn split_at(self, mid: usize) -> (DeviceView<'a, T>, DeviceView<'a, T>) {
        (self.into_slice(..mid), self.into_slice(mid..))
    }
    /// The same range as raw bytes (`byte_len()` of them), e.g. to copy columns of different
    /// types into one byte buffer.
    pub fn as_bytes(self) -> DeviceView<'a, u8> {
        DeviceView { ptr: self.ptr, len: self.byte_len(), _marker: PhantomData }
    }
    /// Reinterprets the elements as another type of the same size (e.g. `i32` as `u32`).
    pub fn cast<U: Pod>(self) -> DeviceView<'a, U> {
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>(), "cast between types of different sizes");
        DeviceView { ptr: self.ptr, len: self.len, _marker: PhantomData }
    }
}

impl DeviceBuffer<u8> {
    /// The bytes as elements of `U` (the inverse of [`DeviceBuffer::into_bytes`]); the buffer
    /// back when its length is not a multiple of `U`'s size.
    pub fn into_typed<U: Pod>(self) -> std::result::Result<DeviceBuffer<U>, DeviceBuffer<u8>> {
        let size = std::mem::size_of::<U>();
        if size == 0 || self.len % size != 0 || self.ptr % std::mem::align_of::<U>() as u64 != 0 {
            return Err(self);
        }
        let len = self.len / size;
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: we move the fields out of a buffer whose destructor will not run.
        let stream = unsafe { std::ptr::read(&me.stream) };
        Ok(DeviceBuffer { ptr: me.ptr, len, stream, class: me.class, _marker: PhantomData })
    }
}

impl<'a> DeviceView<'a, u8> {
    /// The bytes as elements of `U`: `None` when the address is not aligned for `U` or the
    /// length is not a multiple of its size (Arrow buffers imported from elsewhere may be either).
    pub fn reinterpret<U: Pod>(self) -> Option<DeviceView<'a, U>> {
        let size = std::mem::size_of::<U>();
        let aligned = self.ptr % std::mem::align_of::<U>() as u64 == 0;
        (size > 0 && aligned && self.len % size == 0).then_some(DeviceView { ptr: self.ptr, len: self.len / size, _marker: PhantomData })
    }
}

impl<'a, T> DeviceViewMut<'a, T> {
    /// A view from a raw device pointer.
    ///
    /// # Safety
    /// `ptr` must point to `len` values of `T` in device memory, borrowed exclusively for `'a`.
    pub unsafe fn from_raw(ptr: u64, len: usize) -> Self {
        DeviceViewMut { ptr, len, _marker: PhantomData }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// The device address, for FFI.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr as *mut T
    }
    /// The device address as an integer.
    pub fn raw(&self) -> u64 {
        self.ptr
    }
    /// A read-only view of the same range.
    pub fn as_view(&self) -> DeviceView<'_, T> {
        DeviceView { ptr: self.ptr, len: self.len, _marker: PhantomData }
    }
    /// Reborrows for a shorter lifetime.
    pub fn reborrow(&mut self) -> DeviceViewMut<'_, T> {
        DeviceViewMut { ptr: self.ptr, len: self.len, _marker: PhantomData }
    }
    /// A sub-range (panics when out of bounds).
    pub fn into_slice(self, range: impl RangeBounds<usize>) -> DeviceViewMut<'a, T> {
        let (s, e) = resolve(range, self.len);
        DeviceViewMut { ptr: self.ptr + (s * std::mem::size_of::<T>()) as u64, len: e - s, _marker: PhantomData }
    }
    /// A sub-range of a reborrow (panics when out of bounds).
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceViewMut<'_, T> {
        self.reborrow().into_slice(range)
    }
    /// Splits into `[0, mid)` and `[mid, len)`.
    pub fn split_at(self, mid: usize) -> (DeviceViewMut<'a, T>, DeviceViewMut<'a, T>) {
        let (s, l) = (self.ptr, self.len);
        assert!(mid <= l);
        (
            DeviceViewMut { ptr: s, len: mid, _marker: PhantomData },
            DeviceViewMut { ptr: s + (mid * std::mem::size_of::<T>()) as u64, len: l - mid, _marker: PhantomData },
        )
    }
    /// Reinterprets the elements as another type of the same size.
    pub fn cast<U: Pod>(self) -> DeviceViewMut<'a, U> {
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>(), "cast between types of different sizes");
        DeviceViewMut { ptr: self.ptr, len: self.len, _marker: PhantomData }
    }
}

impl<'a, T> From<DeviceViewMut<'a, T>> for DeviceView<'a, T> {
    fn from(v: DeviceViewMut<'a, T>) -> Self {
        DeviceView { ptr: v.ptr, len: v.len, _marker: PhantomData }
    }
}
