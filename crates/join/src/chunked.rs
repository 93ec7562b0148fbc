//! Join results larger than device memory (issue 5): the join matrix cut into chunks whose output
//! fits a memory budget, yielded as an iterator; device-to-host streaming through pinned buffers
//! on several streams, copies overlapped with the next chunk's work.
//!
//! (Under construction.)
