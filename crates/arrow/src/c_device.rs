//! The [Arrow C Device Data Interface]: device tables handed to other GPU libraries, and their
//! device arrays read as gpujoin tables, without a copy.
//!
//! # What goes out: [`export_table`]
//!
//! A device [`Table`] becomes an [`ArrowDeviceArray`] of a struct array (a record batch: one
//! child per column) plus the matching [`FFI_ArrowSchema`] (a struct of the columns' Arrow types,
//! [`arrow_type`], every child nullable). The children's buffers are the table's device buffers
//! in Arrow's order (validity, values; validity, offsets, bytes for strings), with the column's
//! element `offset` and `null_count` 0 (no validity bitmap) or -1 (not computed). The array says
//! `device_type` [`ARROW_DEVICE_CUDA`] and `device_id` the stream's device ordinal; its
//! `sync_event` points to a `CUevent` recorded on the producing stream, which a consumer must
//! wait on (`cuStreamWaitEvent` / `cudaStreamWaitEvent`) before it reads the buffers.
//!
//! # What comes in: [`ImportedTable`]
//!
//! [`ImportedTable::new`] takes an [`ArrowDeviceArray`] of a struct type with its schema,
//! checks it (a typed error for a released array, a device type other than CUDA, another
//! device than the stream's, a top level that is not a struct, a child of a type gpujoin does not
//! hold, buffer counts that do not match a type), makes the stream wait on the producer's sync
//! event, and gives out a [`TableView`] over the producer's device memory.
//!
//! Children of the types of [`crate::types`] whose device layout is Arrow's are read: every
//! integer, float, `Boolean`, `Date32`, `Date64`, `Timestamp` (any time zone: the values are
//! UTC), `Decimal128`, `Utf8` and `LargeUtf8`; dictionaries and `Utf8View` need a conversion and
//! are refused (decode them on the host with [`crate::to_host_table`] instead). A struct with
//! nulls of its own (rows that are null as a whole) is refused too. The struct's own `offset`
//! is applied to every child. What is in device memory is trusted as the spec asks producers to
//! make it (string offsets monotone within the bytes); only the sizes the type needs are checked,
//! and the end offset of each string column is read to size its bytes.
//!
//! # Ownership
//!
//! - An [`ArrowDeviceArray`] owns what it points to: dropping it calls its `release` callback,
//!   unless a consumer has moved it out (bitwise copy, the source's `release` set to NULL, which
//!   [`ArrowDeviceArray::from_raw`] does) or released it.
//! - An exported table lives until the consumer calls the release callback of the base structure,
//!   once; that callback releases the children a consumer did not move out. Each child holds the
//!   table too, so a child moved out stays readable after the parent's release; the table (and
//!   the sync event) goes when the last of them is released. The consumer must be done with the
//!   device memory (its work finished, or ordered before the table's stream frees it) when it
//!   releases.
//! - An [`ImportedTable`] owns the imported array and calls the producer's release callback when
//!   dropped, after synchronizing its stream: work queued on other streams with its view must be
//!   finished before. The schema stays the caller's.
//!
//! ```no_run
//! use gpujoin_arrow::c_device::{export_table, ImportedTable};
//! use gpujoin_join::table::{HostColumn, HostTable, Table};
//! # fn main() -> gpujoin_device::Result<()> {
//! let device = gpujoin_device::Device::new(0)?;
//! let stream = device.new_stream()?;
//! let host = HostTable::new(vec![("k", HostColumn::from_options(vec![Some(1i64), None]))])?;
//! let (array, schema) = export_table(&stream, Table::upload(&stream, &host)?)?;
//! // ... hand `array` and `schema` to another library, or read them back:
//! let imported = ImportedTable::new(&stream, array, &schema)?;
//! assert_eq!(imported.view().to_host(&stream)?.column("k")?.null_count(), 1);
//! # Ok(()) }
//! ```
//!
//! [Arrow C Device Data Interface]: https://arrow.apache.org/docs/format/CDeviceDataInterface.html
//! [`arrow_type`]: crate::arrow_type

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType as ArrowType, Field, Schema};
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Event, Result, Stream};
use gpujoin_join::table::{ColumnView, DataType, Table, TableView};

use crate::types::{arrow_error, arrow_type, device_type, unsupported};

/// The kind of device an [`ArrowDeviceArray`]'s buffers are on (`ArrowDeviceType`, an `int32_t`;
/// the values are dlpack's `DLDeviceType`).
pub type ArrowDeviceType = i32;

/// CPU memory: the same as a plain `ArrowArray`.
pub const ARROW_DEVICE_CPU: ArrowDeviceType = 1;
/// CUDA device memory (`cudaMalloc`, `cuMemAlloc`, stream-ordered pools): what gpujoin exports
/// and imports.
pub const ARROW_DEVICE_CUDA: ArrowDeviceType = 2;
/// Pinned host memory (`cudaMallocHost`, `cuMemAllocHost`).
pub const ARROW_DEVICE_CUDA_HOST: ArrowDeviceType = 3;
/// OpenCL.
pub const ARROW_DEVICE_OPENCL: ArrowDeviceType = 4;
/// Vulkan buffers.
pub const ARROW_DEVICE_VULKAN: ArrowDeviceType = 7;
/// Metal (Apple GPUs).
pub const ARROW_DEVICE_METAL: ArrowDeviceType = 8;
/// A Verilog simulator buffer.
pub const ARROW_DEVICE_VPI: ArrowDeviceType = 9;
/// ROCm (AMD GPUs).
pub const ARROW_DEVICE_ROCM: ArrowDeviceType = 10;
/// Pinned host memory of ROCm (`hipMallocHost`).
pub const ARROW_DEVICE_ROCM_HOST: ArrowDeviceType = 11;
/// Reserved for extension devices.
pub const ARROW_DEVICE_EXT_DEV: ArrowDeviceType = 12;
/// CUDA managed (unified) memory (`cudaMallocManaged`).
pub const ARROW_DEVICE_CUDA_MANAGED: ArrowDeviceType = 13;
/// Unified shared memory of a oneAPI device.
pub const ARROW_DEVICE_ONEAPI: ArrowDeviceType = 14;
/// WebGPU.
pub const ARROW_DEVICE_WEBGPU: ArrowDeviceType = 15;
/// Qualcomm Hexagon DSP.
pub const ARROW_DEVICE_HEXAGON: ArrowDeviceType = 16;

/// The name of a device type, for messages.
///
/// ```
/// use gpujoin_arrow::c_device::{device_type_name, ARROW_DEVICE_CUDA_HOST};
/// assert_eq!(device_type_name(ARROW_DEVICE_CUDA_HOST), "ARROW_DEVICE_CUDA_HOST");
/// assert_eq!(device_type_name(99), "an unknown device type");
/// ```
pub fn device_type_name(t: ArrowDeviceType) -> &'static str {
    match t {
        ARROW_DEVICE_CPU => "ARROW_DEVICE_CPU",
        ARROW_DEVICE_CUDA => "ARROW_DEVICE_CUDA",
        ARROW_DEVICE_CUDA_HOST => "ARROW_DEVICE_CUDA_HOST",
        ARROW_DEVICE_OPENCL => "ARROW_DEVICE_OPENCL",
        ARROW_DEVICE_VULKAN => "ARROW_DEVICE_VULKAN",
        ARROW_DEVICE_METAL => "ARROW_DEVICE_METAL",
        ARROW_DEVICE_VPI => "ARROW_DEVICE_VPI",
        ARROW_DEVICE_ROCM => "ARROW_DEVICE_ROCM",
        ARROW_DEVICE_ROCM_HOST => "ARROW_DEVICE_ROCM_HOST",
        ARROW_DEVICE_EXT_DEV => "ARROW_DEVICE_EXT_DEV",
        ARROW_DEVICE_CUDA_MANAGED => "ARROW_DEVICE_CUDA_MANAGED",
        ARROW_DEVICE_ONEAPI => "ARROW_DEVICE_ONEAPI",
        ARROW_DEVICE_WEBGPU => "ARROW_DEVICE_WEBGPU",
        ARROW_DEVICE_HEXAGON => "ARROW_DEVICE_HEXAGON",
        _ => "an unknown device type",
    }
}

/// The C Data Interface's `struct ArrowArray`, field for field (80 bytes on 64-bit targets).
///
/// A plain C structure: it releases nothing by itself. As the `array` of an
/// [`ArrowDeviceArray`] its `buffers` hold device pointers; the rest is host memory.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowArray {
    /// Number of items.
    pub length: i64,
    /// Number of null items, or -1 when not computed.
    pub null_count: i64,
    /// Items skipped from the physical start of the buffers.
    pub offset: i64,
    /// Number of buffers (a function of the type).
    pub n_buffers: i64,
    /// Number of children (a function of the type).
    pub n_children: i64,
    /// `n_buffers` pointers to the start of each buffer (`const void**`).
    pub buffers: *mut *const c_void,
    /// `n_children` pointers to the children.
    pub children: *mut *mut ArrowArray,
    /// The dictionary of a dictionary-encoded array, else null.
    pub dictionary: *mut ArrowArray,
    /// The producer's release callback; null (`None`) marks a released structure.
    pub release: Option<unsafe extern "C" fn(array: *mut ArrowArray)>,
    /// The producer's bookkeeping.
    pub private_data: *mut c_void,
}

impl ArrowArray {
    /// A released (empty) structure, for a producer to fill.
    pub const fn empty() -> ArrowArray {
        ArrowArray {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: std::ptr::null_mut(),
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }

    /// True when released (`release` is null).
    pub fn is_released(&self) -> bool {
        self.release.is_none()
    }
}

/// The C Device Data Interface's `struct ArrowDeviceArray` (128 bytes on 64-bit targets): an
/// [`ArrowArray`] whose buffers are on a device, the device, and an event to wait on.
///
/// Owns what it points to: dropping it calls the `release` callback of its `array` unless it was
/// moved out or released. Only the unsafe constructors ([`ArrowDeviceArray::new`],
/// [`ArrowDeviceArray::from_raw`]) take foreign pointers; [`export_table`] makes one from a
/// table; [`ArrowDeviceArray::empty`] makes a released one for a C producer to fill.
///
/// ```
/// use gpujoin_arrow::c_device::{ArrowDeviceArray, ARROW_DEVICE_CUDA};
/// assert_eq!(std::mem::size_of::<ArrowDeviceArray>(), 128);
/// let out = ArrowDeviceArray::empty(); // `out.as_mut_ptr()` goes to a C producer
/// assert!(out.is_released());
/// ```
#[repr(C)]
#[derive(Debug)]
pub struct ArrowDeviceArray {
    array: ArrowArray,
    device_id: i64,
    device_type: ArrowDeviceType,
    sync_event: *mut c_void,
    reserved: [i64; 3],
}

// SAFETY: the structure is a handle (as arrow-rs's FFI_ArrowArray, which is Send); the release
// callbacks of the C Data Interface may be called from any thread (gpujoin's binds the device).
unsafe impl Send for ArrowDeviceArray {}

impl ArrowDeviceArray {
    /// A released structure (every field zero), to hand to a C producer through
    /// [`ArrowDeviceArray::as_mut_ptr`]; what the producer writes is then owned by this value.
    pub const fn empty() -> ArrowDeviceArray {
        ArrowDeviceArray { array: ArrowArray::empty(), device_id: 0, device_type: 0, sync_event: std::ptr::null_mut(), reserved: [0; 3] }
    }

    /// A device array from its parts, owning `array` (its release callback runs on drop).
    ///
    /// # Safety
    /// `array` must be a valid `ArrowArray` (its host pointers readable, its release callback
    /// callable once) whose buffers are memory of device `device_type`/`device_id`, large enough
    /// for its type; `sync_event` must be null or point to the device's event type
    /// (`cudaEvent_t*` for CUDA), alive until the release.
    pub unsafe fn new(array: ArrowArray, device_type: ArrowDeviceType, device_id: i64, sync_event: *mut c_void) -> ArrowDeviceArray {
        ArrowDeviceArray { array, device_id, device_type, sync_event, reserved: [0; 3] }
    }

    /// Moves the structure at `ptr` out (a bitwise copy) and marks the source released, as the
    /// spec's "moving an array" says; the value returned owns the array.
    ///
    /// # Safety
    /// `ptr` must point to a valid, initialized `struct ArrowDeviceArray` (see
    /// [`ArrowDeviceArray::new`] for what valid means), aligned and writable.
    pub unsafe fn from_raw(ptr: *mut ArrowDeviceArray) -> ArrowDeviceArray {
        // SAFETY: the caller vouches for ptr; the source is marked released without its callback.
        unsafe {
            let moved = std::ptr::read(ptr);
            (*ptr).array.release = None;
            moved
        }
    }

    /// A pointer to this structure, for a C consumer that moves it out (and sets its release to
    /// null) or a C producer that fills an [`ArrowDeviceArray::empty`].
    pub fn as_mut_ptr(&mut self) -> *mut ArrowDeviceArray {
        self
    }

    /// The embedded array.
    pub fn array(&self) -> &ArrowArray {
        &self.array
    }

    /// The device ordinal (for CUDA).
    pub fn device_id(&self) -> i64 {
        self.device_id
    }

    /// The kind of device ([`ARROW_DEVICE_CUDA`], ...).
    pub fn device_type(&self) -> ArrowDeviceType {
        self.device_type
    }

    /// The event to wait on before reading the buffers (a `cudaEvent_t*` for CUDA), or null.
    pub fn sync_event(&self) -> *mut c_void {
        self.sync_event
    }

    /// True when released (or moved out).
    pub fn is_released(&self) -> bool {
        self.array.is_released()
    }
}

impl Drop for ArrowDeviceArray {
    fn drop(&mut self) {
        if let Some(release) = self.array.release {
            // SAFETY: a live structure's release callback, called once (it marks it released).
            unsafe { release(&mut self.array) };
            self.array.release = None;
        }
    }
}

// ---- Schemas -----------------------------------------------------------------------------------

/// The schema of a device table: a struct of `columns` (name, type), each child nullable and of
/// Arrow type [`arrow_type`].
///
/// ```
/// use gpujoin_arrow::c_device::{export_schema, import_schema};
/// use gpujoin_join::table::DataType;
/// let schema = export_schema(&[("id", DataType::Int64), ("name", DataType::Utf8)])?;
/// assert_eq!(schema.format(), "+s");
/// assert_eq!(import_schema(&schema)?, vec![("id".to_string(), DataType::Int64), ("name".to_string(), DataType::Utf8)]);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn export_schema<N: AsRef<str>>(columns: &[(N, DataType)]) -> Result<FFI_ArrowSchema> {
    let fields: Vec<Field> = columns.iter().map(|(n, t)| Field::new(n.as_ref(), arrow_type(*t), true)).collect();
    FFI_ArrowSchema::try_from(&Schema::new(fields)).map_err(|e| arrow_error("exporting the schema of a device table", e))
}

/// The columns (name, device type) of a struct schema, checking every child: a typed error for
/// a schema that is released or malformed, a top level that is not a struct, or a child of a
/// type whose Arrow layout gpujoin's device columns do not share (see the [module docs](self)).
pub fn import_schema(schema: &FFI_ArrowSchema) -> Result<Vec<(String, DataType)>> {
    if schema.release.is_none() {
        return Err(Error::invalid("the ArrowSchema of a device array is released"));
    }
    // SAFETY: a live schema (release set) is a valid C structure: every pointer is checked
    // before arrow-rs reads it.
    unsafe { check_schema_tree(schema, "the struct", 0)? };
    // SAFETY: checked by check_schema_tree: a UTF-8 C string.
    let top = unsafe { read_c_str(schema.format) };
    if top != "+s" {
        return Err(Error::Unsupported {
            what: format!("an Arrow device array of format {top:?}"),
            reason: "gpujoin imports a struct array (format \"+s\", a record batch), one child a column".into(),
        });
    }
    (0..schema.n_children as usize)
        .map(|i| {
            // SAFETY: checked by check_schema_tree: children holds n_children non-null pointers,
            // each a valid structure with UTF-8 strings.
            let child = unsafe { &**schema.children.add(i) };
            let (name, format) = unsafe { (read_c_str(child.name).to_string(), read_c_str(child.format)) };
            // arrow-rs reads the children a nested format names without checking them: such a
            // schema is parsed only when its children are what the format says.
            // SAFETY: check_schema_tree checked the tree.
            if !unsafe { arrow_rs_reads(child, 0) } {
                return Err(Error::Unsupported {
                    what: format!("column {name:?} of Arrow format {format:?}"),
                    reason: "gpujoin's columns are integers, floats, booleans, dates, timestamps, decimal128 and strings".into(),
                });
            }
            let t = ArrowType::try_from(child).map_err(|e| Error::Unsupported {
                what: format!("column {name:?} of Arrow format {format:?}"),
                reason: format!("not a type gpujoin reads: {e}"),
            })?;
            Ok((name.clone(), importable_type(&name, &t)?))
        })
        .collect()
}

/// The device type of an imported column of Arrow type `t`: its layout must be the device's.
fn importable_type(name: &str, t: &ArrowType) -> Result<DataType> {
    match t {
        ArrowType::Dictionary(..) => Err(unsupported(name, t, "dictionary-encoded columns are decoded on the host (to_host_table), not imported on the device")),
        ArrowType::Utf8View => Err(unsupported(name, t, "string views are converted on the host (to_host_table), not imported on the device")),
        _ => device_type(name, t),
    }
}

/// True when arrow-rs can parse the schema tree at `s` without panicking: the children of a
/// nested format are those the format needs (flat formats read none but a dictionary).
///
/// # Safety
/// `s` must have passed [`check_schema_tree`].
unsafe fn arrow_rs_reads(s: &FFI_ArrowSchema, depth: usize) -> bool {
    if depth > MAX_SCHEMA_DEPTH {
        return false;
    }
    // SAFETY: the caller's contract: checked C strings and pointers.
    let (format, children, dictionary) = unsafe {
        let children: Vec<&FFI_ArrowSchema> = (0..s.n_children as usize).map(|i| &**s.children.add(i)).collect();
        (read_c_str(s.format), children, s.dictionary.as_ref())
    };
    // SAFETY: the same contract, for the tree's parts.
    let reads = |c: &FFI_ArrowSchema| unsafe { arrow_rs_reads(c, depth + 1) };
    if !dictionary.is_none_or(&reads) {
        return false;
    }
    match format {
        "+s" => children.iter().all(|c| reads(c)),
        "+l" | "+L" | "+vl" | "+vL" => children.len() == 1 && reads(children[0]),
        f if f.starts_with("+w:") => children.len() == 1 && reads(children[0]),
        // A map's one child is a struct of the keys and the values.
        "+m" => children.len() == 1 && children[0].n_children == 2 && reads(children[0]),
        f => !f.starts_with('+'),
    }
}

/// Deepest schema nesting checked (a guard against cycles in a malformed schema).
const MAX_SCHEMA_DEPTH: usize = 64;

/// Checks what arrow-rs will read of a schema tree: formats and names non-null (formats) and
/// UTF-8, children and dictionary pointers non-null where their counts say so.
///
/// # Safety
/// `s` must be a valid C structure whose pointers are null or readable.
unsafe fn check_schema_tree(s: &FFI_ArrowSchema, what: &str, depth: usize) -> Result<()> {
    let bad = |m: String| Err(Error::invalid(format!("the ArrowSchema of {what}: {m}")));
    if depth > MAX_SCHEMA_DEPTH {
        return bad(format!("nested over {MAX_SCHEMA_DEPTH} levels"));
    }
    if s.format.is_null() {
        return bad("no format string".into());
    }
    // SAFETY: non-null C strings of a valid structure.
    if unsafe { CStr::from_ptr(s.format) }.to_str().is_err() || (!s.name.is_null() && unsafe { CStr::from_ptr(s.name) }.to_str().is_err()) {
        return bad("a format or name that is not UTF-8".into());
    }
    if s.n_children < 0 || (s.n_children > 0 && s.children.is_null()) {
        return bad(format!("{} children at {:?}", s.n_children, s.children));
    }
    for i in 0..s.n_children as usize {
        // SAFETY: children holds n_children pointers.
        let c = unsafe { *s.children.add(i) };
        if c.is_null() {
            return bad(format!("child {i} is null"));
        }
        // SAFETY: a non-null child of a valid structure.
        let child = unsafe { &*c };
        // SAFETY: a valid structure's name is null or a C string.
        let name = if depth == 0 && !child.name.is_null() { format!("column {:?}", unsafe { read_c_str(child.name) }) } else { format!("child {i} of {what}") };
        // SAFETY: as for s.
        unsafe { check_schema_tree(child, &name, depth + 1)? };
    }
    if !s.dictionary.is_null() {
        // SAFETY: as for s.
        unsafe { check_schema_tree(&*s.dictionary, &format!("the dictionary of {what}"), depth + 1)? };
    }
    Ok(())
}

/// A C string as text: empty when null or not UTF-8.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string that outlives `'a`.
unsafe fn read_c_str<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        return "";
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

// ---- Export ------------------------------------------------------------------------------------

/// What an exported table's structures share: the table and its ready event. Lives until the
/// parent and every child are released.
struct Exported {
    table: Arc<Table>,
    /// The `CUevent` that `sync_event` points to (a stable heap address inside the `Arc`).
    event_handle: *mut c_void,
    _event: Event,
}

// SAFETY: event_handle is the handle of the owned Event (Send + Sync); the table is Send + Sync.
unsafe impl Send for Exported {}
unsafe impl Sync for Exported {}

/// The bookkeeping of an exported struct array (`private_data`): the buffers array the parent
/// points to (one null validity) and its children's structures.
struct ParentPrivate {
    _owner: Arc<Exported>,
    buffers: Box<[*const c_void]>,
    children: Box<[*mut ArrowArray]>,
}

/// The bookkeeping of an exported column: the buffers array it points to.
struct ChildPrivate {
    _owner: Arc<Exported>,
    buffers: Box<[*const c_void]>,
}

/// The release callback of an exported struct array: releases the children not moved out, frees
/// their structures and the parent's bookkeeping, marks the parent released.
unsafe extern "C" fn release_parent(array: *mut ArrowArray) {
    // SAFETY: called by a consumer on a live exported parent (wherever it moved it).
    let Some(a) = (unsafe { array.as_mut() }) else { return };
    if a.release.is_none() || a.private_data.is_null() {
        return;
    }
    // SAFETY: private_data is the Box<ParentPrivate> export_table leaked.
    let private = unsafe { Box::from_raw(a.private_data as *mut ParentPrivate) };
    for &child in private.children.iter() {
        // SAFETY: each child structure is a Box<ArrowArray> export_table leaked; a consumer may
        // have moved its contents out (release null), the structure is still the parent's.
        let mut child = unsafe { Box::from_raw(child) };
        if let Some(release) = child.release {
            // SAFETY: the child's own callback, on its live structure.
            unsafe { release(&mut *child) };
        }
    }
    drop(private);
    a.private_data = std::ptr::null_mut();
    a.release = None;
}

/// The release callback of an exported column (a child): frees its bookkeeping and its share of
/// the table.
unsafe extern "C" fn release_child(array: *mut ArrowArray) {
    // SAFETY: called on a live exported child, in its parent or moved out.
    let Some(a) = (unsafe { array.as_mut() }) else { return };
    if a.release.is_none() || a.private_data.is_null() {
        return;
    }
    // SAFETY: private_data is the Box<ChildPrivate> export_table leaked.
    drop(unsafe { Box::from_raw(a.private_data as *mut ChildPrivate) });
    a.private_data = std::ptr::null_mut();
    a.release = None;
}

fn raw_ptr(v: Option<DeviceView<'_, u8>>) -> *const c_void {
    v.filter(|v| v.raw() != 0).map_or(std::ptr::null(), |v| v.raw() as *const c_void)
}

/// Exports a device table (owned, or shared through an `Arc`) as an [`ArrowDeviceArray`] of a
/// struct array and its [`FFI_ArrowSchema`], without a copy (see the [module docs](self)).
///
/// `stream` is the stream the table's data was produced on (or one ordered after it): the
/// array's `sync_event` is recorded there, and its `device_id` is the stream's device. The table
/// lives until the consumer releases the array.
///
/// ```no_run
/// # fn f(stream: &gpujoin_device::Stream, table: gpujoin_join::table::Table) -> gpujoin_device::Result<()> {
/// let (mut array, schema) = gpujoin_arrow::c_device::export_table(stream, table)?;
/// assert_eq!(array.device_type(), gpujoin_arrow::c_device::ARROW_DEVICE_CUDA);
/// // A C consumer takes `array.as_mut_ptr()` and `&schema`, moves the array out, waits on
/// // `*(cudaEvent_t*)sync_event`, reads, and calls `release`.
/// # let _ = array.as_mut_ptr(); Ok(()) }
/// ```
pub fn export_table(stream: &Stream, table: impl Into<Arc<Table>>) -> Result<(ArrowDeviceArray, FFI_ArrowSchema)> {
    let table: Arc<Table> = table.into();
    let columns: Vec<(&str, DataType)> = table.names().iter().map(String::as_str).zip(table.columns().iter().map(|c| c.data_type())).collect();
    let schema = export_schema(&columns)?;
    let event = stream.record_event()?;
    let owner = Arc::new(Exported { table, event_handle: event.raw(), _event: event });

    // Nothing below fails: every structure made is handed to the array returned.
    let mut children: Vec<*mut ArrowArray> = Vec::with_capacity(owner.table.columns().len());
    for column in owner.table.columns() {
        let v = column.view();
        let validity = raw_ptr(v.validity());
        let buffers: Box<[*const c_void]> = match v.offsets() {
            Some(offsets) => vec![validity, raw_ptr(Some(offsets)), raw_ptr(Some(v.values()))],
            None => vec![validity, raw_ptr(Some(v.values()))],
        }
        .into_boxed_slice();
        let mut private = Box::new(ChildPrivate { _owner: owner.clone(), buffers });
        let child = ArrowArray {
            // Sizes of device memory: they fit an i64.
            length: v.len() as i64,
            null_count: if validity.is_null() { 0 } else { -1 },
            offset: v.offset() as i64,
            n_buffers: private.buffers.len() as i64,
            n_children: 0,
            buffers: private.buffers.as_mut_ptr(),
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: Some(release_child),
            private_data: Box::into_raw(private) as *mut c_void,
        };
        children.push(Box::into_raw(Box::new(child)));
    }
    let n_children = children.len() as i64;
    let mut private = Box::new(ParentPrivate { _owner: owner.clone(), buffers: vec![std::ptr::null()].into_boxed_slice(), children: children.into_boxed_slice() });
    let parent = ArrowArray {
        length: owner.table.rows() as i64,
        null_count: 0,
        offset: 0,
        n_buffers: 1,
        n_children,
        buffers: private.buffers.as_mut_ptr(),
        children: if n_children == 0 { std::ptr::null_mut() } else { private.children.as_mut_ptr() },
        dictionary: std::ptr::null_mut(),
        release: Some(release_parent),
        private_data: Box::into_raw(private) as *mut c_void,
    };
    let sync_event = &owner.event_handle as *const *mut c_void as *mut c_void;
    let device_id = stream.device().ordinal() as i64;
    // SAFETY: the buffers are the table's device memory on the stream's device (kept alive by
    // the Arc each structure holds), sync_event points into that Arc, the callbacks are ours.
    Ok((unsafe { ArrowDeviceArray::new(parent, ARROW_DEVICE_CUDA, device_id, sync_event) }, schema))
}

// ---- Import ------------------------------------------------------------------------------------

/// One column of an imported struct array: device addresses and the sizes its type needs.
struct ImportedColumn {
    name: String,
    data_type: DataType,
    len: usize,
    offset: usize,
    validity: Option<(u64, usize)>,
    /// Fixed-width values or a bitmap; for strings the bytes, whose size is read from the last
    /// offset on the device.
    values: u64,
    values_bytes: usize,
    /// Strings: the offsets (address, bytes, width).
    offsets: Option<(u64, usize, usize)>,
}

/// Checks an [`ArrowDeviceArray`] of a struct type against its schema on the host (no device
/// call, no device memory read) and returns its columns (name, device type): every check of
/// [`ImportedTable::new`] except the device id's and the string bytes'.
///
/// ```
/// use gpujoin_arrow::c_device::{check_device_array, export_schema, ArrowDeviceArray};
/// use gpujoin_device::Error;
/// use gpujoin_join::table::DataType;
/// let schema = export_schema(&[("id", DataType::Int64)])?;
/// let released = ArrowDeviceArray::empty();
/// assert!(matches!(check_device_array(&released, &schema), Err(Error::InvalidArgument(_))));
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn check_device_array(array: &ArrowDeviceArray, schema: &FFI_ArrowSchema) -> Result<Vec<(String, DataType)>> {
    Ok(checked_columns(array, schema, None)?.into_iter().map(|c| (c.name, c.data_type)).collect())
}

fn checked_columns(array: &ArrowDeviceArray, schema: &FFI_ArrowSchema, device: Option<i64>) -> Result<Vec<ImportedColumn>> {
    if array.is_released() {
        return Err(Error::invalid("the ArrowDeviceArray is released (its release callback is null)"));
    }
    if array.device_type != ARROW_DEVICE_CUDA {
        return Err(Error::Unsupported {
            what: format!("an Arrow device array on {} ({})", device_type_name(array.device_type), array.device_type),
            reason: format!("gpujoin imports device arrays in CUDA device memory (ARROW_DEVICE_CUDA = {ARROW_DEVICE_CUDA})"),
        });
    }
    if let Some(ordinal) = device {
        if array.device_id != ordinal {
            return Err(Error::Unsupported {
                what: format!("a device array from another device: CUDA device {}", array.device_id),
                reason: format!("the stream it is imported on runs on device {ordinal}; import it on a stream of its device"),
            });
        }
    }
    let columns = import_schema(schema)?;
    let a = &array.array;
    let bad = |m: String| Err(Error::invalid(format!("the imported struct array: {m}")));
    if a.length < 0 || a.offset < 0 || a.null_count < -1 {
        return bad(format!("length {}, offset {}, null count {}", a.length, a.offset, a.null_count));
    }
    if !a.dictionary.is_null() {
        return bad("a struct array with a dictionary".into());
    }
    if a.n_buffers != 1 || a.buffers.is_null() {
        return bad(format!("{} buffers, Arrow's layout of a struct has 1 (validity)", a.n_buffers));
    }
    // SAFETY: buffers holds n_buffers (1) pointers (ArrowDeviceArray's invariant).
    let struct_validity = unsafe { *a.buffers };
    if !struct_validity.is_null() && a.null_count != 0 {
        return Err(Error::Unsupported {
            what: "a struct array with a validity bitmap of its own".into(),
            reason: "a table has no rows that are null as a whole; only its columns have nulls".into(),
        });
    }
    if a.n_children != columns.len() as i64 || (a.n_children > 0 && a.children.is_null()) {
        return bad(format!("{} children, the schema has {}", a.n_children, columns.len()));
    }
    let (len, parent_offset) = (a.length as usize, a.offset as usize);
    columns
        .into_iter()
        .enumerate()
        .map(|(i, (name, data_type))| {
            // SAFETY: children holds n_children pointers (checked non-null above).
            let c = unsafe { *a.children.add(i) };
            // SAFETY: a non-null child of a valid structure.
            let child = unsafe { c.as_ref() }.ok_or_else(|| Error::invalid(format!("column {name:?}: a null child array")))?;
            // SAFETY: the child's buffers array holds n_buffers pointers when non-null.
            unsafe { imported_column(name, data_type, child, len, parent_offset) }
        })
        .collect()
}

/// Checks one child against its type and computes the sizes its buffers must have.
///
/// # Safety
/// `child` must be a valid structure (its `buffers` holding `n_buffers` pointers).
unsafe fn imported_column(name: String, data_type: DataType, child: &ArrowArray, len: usize, parent_offset: usize) -> Result<ImportedColumn> {
    let bad = |m: String| Err(Error::invalid(format!("column {name:?} ({data_type}): {m}")));
    if child.is_released() {
        return bad("the child array is released".into());
    }
    if child.length < 0 || child.offset < 0 || child.null_count < -1 {
        return bad(format!("length {}, offset {}, null count {}", child.length, child.offset, child.null_count));
    }
    if !child.dictionary.is_null() || child.n_children != 0 {
        return bad("a dictionary or children where the type has none".into());
    }
    if (child.length as u64) < (parent_offset + len) as u64 {
        return bad(format!("{} items, the struct reads {len} from item {parent_offset}", child.length));
    }
    let expected = if data_type.is_string() { 3 } else { 2 };
    if child.n_buffers != expected || child.buffers.is_null() {
        return bad(format!("{} buffers, Arrow's layout of the type has {expected}", child.n_buffers));
    }
    // SAFETY: buffers holds n_buffers pointers (the caller's contract).
    let buffer = |i: usize| unsafe { *child.buffers.add(i) } as u64;
    // Every size below is at most (end + 1) * 16 bytes: checked to fit.
    let offset = (child.offset as usize).checked_add(parent_offset);
    let Some((offset, end)) = offset.and_then(|o| Some((o, o.checked_add(len).filter(|e| e.checked_add(1).and_then(|x| x.checked_mul(16)).is_some())?))) else {
        return bad(format!("offset {} + {parent_offset} and {len} rows out of range", child.offset));
    };
    let validity = match buffer(0) {
        0 if child.null_count > 0 => return bad(format!("a null count of {} without a validity bitmap", child.null_count)),
        0 => None,
        p => Some((p, end.div_ceil(8))),
    };
    let (values, values_bytes, offsets) = match data_type {
        DataType::Boolean => (buffer(1), end.div_ceil(8), None),
        DataType::Utf8 | DataType::LargeUtf8 => {
            let w = if data_type == DataType::Utf8 { 4 } else { 8 };
            (buffer(2), 0, Some((buffer(1), (end + 1) * w, w)))
        }
        t => (buffer(1), end * t.byte_width().unwrap_or(0), None),
    };
    if values == 0 && values_bytes > 0 {
        return bad(format!("a null values buffer for {values_bytes} bytes"));
    }
    Ok(ImportedColumn { name, data_type, len, offset, validity, values, values_bytes, offsets })
}

/// A device table imported through the Arrow C Device Data Interface: the producer's device
/// memory, read in place, until this is dropped (which calls the producer's release callback).
///
/// ```no_run
/// use arrow_schema::ffi::FFI_ArrowSchema;
/// use gpujoin_arrow::c_device::{ArrowDeviceArray, ImportedTable};
/// # fn f(stream: &gpujoin_device::Stream, producer: unsafe extern "C" fn(*mut ArrowDeviceArray, *mut FFI_ArrowSchema)) -> gpujoin_device::Result<()> {
/// let (mut array, mut schema) = (ArrowDeviceArray::empty(), FFI_ArrowSchema::empty());
/// // SAFETY: a C producer of the Arrow C Device Data Interface fills both.
/// unsafe { producer(array.as_mut_ptr(), &mut schema) };
/// let imported = ImportedTable::new(stream, array, &schema)?;
/// let view = imported.view(); // ordered on `stream` after the producer's sync event
/// # let _ = view; Ok(()) }
/// ```
pub struct ImportedTable {
    /// Over the producer's memory, which lives as long as `array`; handed out borrowed from self.
    view: TableView<'static>,
    /// String columns imported with a null offsets buffer and no rows: one zero offset each.
    _zero_offsets: Vec<DeviceBuffer<u8>>,
    stream: Stream,
    array: ArrowDeviceArray,
}

impl ImportedTable {
    /// Imports `array` (moved in; released when this is dropped, or at once on an error) of the
    /// struct type `schema` describes, to be read on `stream`: checks it (see the
    /// [module docs](self) for the typed errors), makes `stream` wait on the producer's
    /// `sync_event`, and reads the end offset of each string column (one small copy each, the
    /// only device memory read).
    pub fn new(stream: &Stream, array: ArrowDeviceArray, schema: &FFI_ArrowSchema) -> Result<ImportedTable> {
        let columns = checked_columns(&array, schema, Some(stream.device().ordinal() as i64))?;
        if !array.sync_event.is_null() {
            // SAFETY: a CUDA device array's sync_event points to a cudaEvent_t that the producer
            // keeps alive until the release (ArrowDeviceArray's invariant).
            let event = unsafe { *(array.sync_event as *const *mut c_void) };
            // SAFETY: as above; the event belongs to the array's device, the stream's.
            unsafe { stream.wait_raw_event(event)? };
        }
        let mut zero_offsets = Vec::new();
        let mut views = Vec::with_capacity(columns.len());
        for c in columns {
            let view = Self::column_view(stream, &c, &mut zero_offsets)?;
            views.push((c.name, view));
        }
        let view = TableView::new(views)?;
        if !zero_offsets.is_empty() {
            // The zeroed offsets are ready for any stream the view is used on.
            stream.synchronize()?;
        }
        Ok(ImportedTable { view, _zero_offsets: zero_offsets, stream: stream.clone(), array })
    }

    /// Imports the structure at `array` (moved out: its `release` is set to null) of the struct
    /// type `schema` describes; see [`ImportedTable::new`]. The schema stays the caller's.
    ///
    /// # Safety
    /// `array` must point to a valid `struct ArrowDeviceArray` (see [`ArrowDeviceArray::new`]),
    /// `schema` to a valid `struct ArrowSchema`.
    pub unsafe fn from_raw(stream: &Stream, array: *mut ArrowDeviceArray, schema: *const FFI_ArrowSchema) -> Result<ImportedTable> {
        if array.is_null() || schema.is_null() {
            return Err(Error::invalid("a null ArrowDeviceArray or ArrowSchema pointer"));
        }
        // SAFETY: the caller vouches for both pointers.
        let (array, schema) = unsafe { (ArrowDeviceArray::from_raw(array), &*schema) };
        Self::new(stream, array, schema)
    }

    fn column_view(stream: &Stream, c: &ImportedColumn, zero_offsets: &mut Vec<DeviceBuffer<u8>>) -> Result<ColumnView<'static>> {
        // SAFETY (for the views below): the addresses and sizes come from a checked array whose
        // producer keeps the memory alive until the release, which happens after the views are
        // gone (they are handed out borrowed from the ImportedTable that owns the array).
        let view = |p: u64, bytes: usize| unsafe { DeviceView::<'static, u8>::from_raw(p, bytes) };
        let validity = c.validity.map(|(p, b)| view(p, b));
        let (values, offsets) = match c.offsets {
            None => (view(c.values, c.values_bytes), None),
            Some((0, _, _)) if c.offset + c.len == 0 => {
                let zero = stream.alloc_zeroed::<u8>(8)?;
                // SAFETY: the buffer is kept in the ImportedTable, alive as long as the view.
                let offsets = unsafe { DeviceView::<'static, u8>::from_raw(zero.view().raw(), 8) };
                zero_offsets.push(zero);
                (view(0, 0), Some(offsets))
            }
            Some((0, _, _)) => return Err(Error::invalid(format!("column {:?} ({}): a null offsets buffer", c.name, c.data_type))),
            Some((p, bytes, w)) => {
                let offsets = view(p, bytes);
                let last = offsets.slice(bytes - w..);
                let bytes_used = if w == 4 {
                    last.reinterpret::<i32>().map(|l| stream.copy_to_host(&l).map(|v| v[0] as i64))
                } else {
                    last.reinterpret::<i64>().map(|l| stream.copy_to_host(&l).map(|v| v[0]))
                };
                let Some(bytes_used) = bytes_used.transpose()? else {
                    return Err(Error::invalid(format!("column {:?} ({}): offsets misaligned for their {w}-byte width", c.name, c.data_type)));
                };
                if bytes_used < 0 || (bytes_used > 0 && c.values == 0) {
                    return Err(Error::invalid(format!("column {:?} ({}): strings end at byte {bytes_used} of a {} values buffer", c.name, c.data_type, if c.values == 0 { "null" } else { "device" })));
                }
                (view(c.values, bytes_used as usize), Some(offsets))
            }
        };
        ColumnView::new(c.data_type, c.len, c.offset, values, offsets, validity).map_err(|e| Error::invalid(format!("column {:?}: {e}", c.name)))
    }

    /// The table over the producer's device memory, ordered on [`ImportedTable::stream`] after
    /// the producer's sync event.
    pub fn view(&self) -> TableView<'_> {
        self.view.clone()
    }

    /// The stream the table was imported on (waiting on the producer's event).
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The device array as imported (for its device id, its length, ...).
    pub fn array(&self) -> &ArrowDeviceArray {
        &self.array
    }
}

impl std::fmt::Debug for ImportedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let columns: Vec<(&str, DataType)> = self.view.names().iter().map(String::as_str).zip(self.view.columns().iter().map(|c| c.data_type())).collect();
        f.debug_struct("ImportedTable").field("rows", &self.view.rows()).field("columns", &columns).field("device_id", &self.array.device_id).field("stream", &self.stream).finish()
    }
}

impl Drop for ImportedTable {
    fn drop(&mut self) {
        // The producer may free its memory in the release callback: the work queued on the
        // import stream with the view must be done first. Errors cannot be returned from drop.
        let _ = self.stream.synchronize();
        // `array` is dropped after this: the producer's release callback runs once.
    }
}

// ---- The test peer -----------------------------------------------------------------------------

/// Safe wrappers of the C peer (`crates/arrow/cuda/peer.cu`) that the tests use as "another GPU
/// library": it consumes device arrays gpujoin exports and produces ones gpujoin imports, with
/// its own copy of the spec's C structures. Not part of the API.
#[doc(hidden)]
pub mod peer {
    use super::*;

    /// What the peer computed over one column (see `gj_peer_stats` in `peer.cu`).
    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy, PartialEq)]
    pub struct PeerStats {
        pub rows: i64,
        pub nulls: i64,
        /// Integers, dates, timestamps, decimals (their low 64 bits): the wrapping sum.
        pub sum: i64,
        /// Strings: bytes of the valid strings.
        pub bytes: i64,
        /// Booleans: valid rows that are true.
        pub trues: i64,
        /// Floats: the sum.
        pub fsum: f64,
    }

    extern "C" {
        fn gj_peer_layout(out: *mut i64, n: i64) -> i64;
        fn gj_peer_consume(array: *mut ArrowDeviceArray, schema: *const FFI_ArrowSchema, out: *mut PeerStats, n_out: i64) -> i32;
        fn gj_peer_consume_child(array: *mut ArrowDeviceArray, schema: *const FFI_ArrowSchema, child: i64, out: *mut PeerStats) -> i32;
        fn gj_peer_produce(rows: i64, parent_offset: i64, device_id: i64, out: *mut ArrowDeviceArray, schema: *mut FFI_ArrowSchema, token: *mut i64) -> i32;
        fn gj_peer_released_count(token: i64) -> i32;
        fn gj_peer_freed_count(token: i64) -> i32;
    }

    fn check(call: &str, rc: i32) -> Result<()> {
        match rc {
            0 => Ok(()),
            rc => Err(Error::invalid(format!("{call} returned {rc}"))),
        }
    }

    /// The C compiler's sizes and offsets of the spec's structures, in the order `gj_peer_layout`
    /// documents (host code only: no device call).
    pub fn layout() -> Vec<i64> {
        let mut out = vec![0i64; 32];
        // SAFETY: out holds 32 entries; the function writes at most that many.
        let n = unsafe { gj_peer_layout(out.as_mut_ptr(), out.len() as i64) };
        out.truncate(n.clamp(0, 32) as usize);
        out
    }

    /// Hands `array` to the peer, which moves it out, waits on its sync event, computes the stats
    /// of every column and releases it.
    pub fn consume(mut array: ArrowDeviceArray, schema: &FFI_ArrowSchema) -> Result<Vec<PeerStats>> {
        let n = array.array().n_children.max(0);
        let mut out = vec![PeerStats::default(); n as usize];
        // SAFETY: a valid array and schema; the peer moves the array out (or it stays ours).
        let rc = unsafe { gj_peer_consume(array.as_mut_ptr(), schema, out.as_mut_ptr(), n) };
        check("gj_peer_consume", rc).map(|_| out)
    }

    /// Hands `array` to the peer, which moves column `child` out, releases the parent at once,
    /// then reads the column and releases it.
    pub fn consume_child(mut array: ArrowDeviceArray, schema: &FFI_ArrowSchema, child: usize) -> Result<PeerStats> {
        let mut out = PeerStats::default();
        // SAFETY: as in consume.
        let rc = unsafe { gj_peer_consume_child(array.as_mut_ptr(), schema, child as i64, &mut out) };
        check("gj_peer_consume_child", rc).map(|_| out)
    }

    /// A struct array {id: Int64, name: Utf8} of the peer (see `gj_peer_produce`): the array, its
    /// schema, and the token of its release count. `device_id`: what the array claims (`None`:
    /// the current device).
    pub fn produce(rows: usize, parent_offset: usize, device_id: Option<i64>) -> Result<(ArrowDeviceArray, FFI_ArrowSchema, i64)> {
        let (mut array, mut schema, mut token) = (ArrowDeviceArray::empty(), FFI_ArrowSchema::empty(), 0i64);
        // SAFETY: the peer fills the released structures we own.
        let rc = unsafe { gj_peer_produce(rows as i64, parent_offset as i64, device_id.unwrap_or(-1), array.as_mut_ptr(), &mut schema, &mut token) };
        check("gj_peer_produce", rc).map(|_| (array, schema, token))
    }

    /// How many times the base structure of produced array `token` was released.
    pub fn released_count(token: i64) -> i32 {
        // SAFETY: reads an atomic counter.
        unsafe { gj_peer_released_count(token) }
    }

    /// How many times the device buffers of produced array `token` were freed.
    pub fn freed_count(token: i64) -> i32 {
        // SAFETY: reads an atomic counter.
        unsafe { gj_peer_freed_count(token) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    /// The spec's C layout on 64-bit targets (x86-64, aarch64): `struct ArrowArray` is five
    /// int64_t, three pointers, a function pointer and a pointer; `struct ArrowDeviceArray`
    /// appends int64_t device_id, int32_t device_type (4 bytes of padding follow), void*
    /// sync_event and int64_t reserved[3].
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn layout_matches_the_spec() {
        assert_eq!(size_of::<ArrowArray>(), 80);
        assert_eq!(align_of::<ArrowArray>(), 8);
        let fields = [
            offset_of!(ArrowArray, length),
            offset_of!(ArrowArray, null_count),
            offset_of!(ArrowArray, offset),
            offset_of!(ArrowArray, n_buffers),
            offset_of!(ArrowArray, n_children),
            offset_of!(ArrowArray, buffers),
            offset_of!(ArrowArray, children),
            offset_of!(ArrowArray, dictionary),
            offset_of!(ArrowArray, release),
            offset_of!(ArrowArray, private_data),
        ];
        assert_eq!(fields, [0, 8, 16, 24, 32, 40, 48, 56, 64, 72]);
        assert_eq!(size_of::<ArrowDeviceArray>(), 128);
        assert_eq!(align_of::<ArrowDeviceArray>(), 8);
        assert_eq!(offset_of!(ArrowDeviceArray, array), 0);
        assert_eq!(offset_of!(ArrowDeviceArray, device_id), 80);
        assert_eq!(offset_of!(ArrowDeviceArray, device_type), 88);
        assert_eq!(offset_of!(ArrowDeviceArray, sync_event), 96);
        assert_eq!(offset_of!(ArrowDeviceArray, reserved), 104);
        assert_eq!(size_of::<ArrowDeviceType>(), 4);
        // The release callback is a nullable function pointer (Option's niche).
        assert_eq!(size_of::<Option<unsafe extern "C" fn(*mut ArrowArray)>>(), 8);
    }

    #[test]
    fn empty_is_released_and_zeroed() {
        let a = ArrowDeviceArray::empty();
        assert!(a.is_released());
        assert_eq!((a.device_id(), a.device_type(), a.sync_event(), a.reserved), (0, 0, std::ptr::null_mut(), [0; 3]));
    }
}
