//! The Arrow C Device Data Interface on the host (no GPU): the structures' layout against the
//! spec and against the C peer's own copy of the spec's definitions, schemas of every type
//! through arrow-rs's FFI_ArrowSchema, and the typed errors of an import, on device arrays built
//! by hand with fake device pointers (never dereferenced: these checks read host structures only).

use std::ffi::c_void;
use std::mem::{align_of, offset_of, size_of};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType as A, Field, Schema, TimeUnit as U};
use gpujoin_arrow::c_device::*;
use gpujoin_arrow::{arrow_type, c_device};
use gpujoin_device::Error;
use gpujoin_join::table::{DataType, TimeUnit};

// ---- Layout ------------------------------------------------------------------------------------

#[test]
#[cfg(target_pointer_width = "64")]
fn layout_is_the_specs() {
    assert_eq!((size_of::<ArrowArray>(), align_of::<ArrowArray>()), (80, 8));
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
    assert_eq!((size_of::<ArrowDeviceArray>(), align_of::<ArrowDeviceArray>()), (128, 8));
    assert_eq!(size_of::<ArrowDeviceType>(), 4);
    assert_eq!(size_of::<FFI_ArrowSchema>(), 72);
}

/// The C compiler lays out the peer's copy of the spec's definitions (`cuda/peer.cu`) as Rust lays
/// out ours: sizes and every field offset (host code, no device call).
#[test]
#[cfg(target_pointer_width = "64")]
fn layout_is_the_c_compilers() {
    let c = c_device::peer::layout();
    let array = [80, 0, 8, 16, 24, 32, 40, 48, 56, 64, 72];
    // ArrowDeviceArray: size, array, device_id, device_type, sync_event, reserved.
    let device_array = [128, 0, 80, 88, 96, 104];
    let expected: Vec<i64> = array.iter().chain(&device_array).copied().chain([72, 8]).collect();
    assert_eq!(c, expected, "the C peer's sizeof/offsetof of ArrowArray, ArrowDeviceArray, ArrowSchema, alignof(ArrowDeviceArray)");
    assert_eq!(c[0] as usize, size_of::<ArrowArray>());
    assert_eq!(c[11] as usize, size_of::<ArrowDeviceArray>());
}

#[test]
fn device_types_are_the_specs() {
    let all = [
        (ARROW_DEVICE_CPU, 1),
        (ARROW_DEVICE_CUDA, 2),
        (ARROW_DEVICE_CUDA_HOST, 3),
        (ARROW_DEVICE_OPENCL, 4),
        (ARROW_DEVICE_VULKAN, 7),
        (ARROW_DEVICE_METAL, 8),
        (ARROW_DEVICE_VPI, 9),
        (ARROW_DEVICE_ROCM, 10),
        (ARROW_DEVICE_ROCM_HOST, 11),
        (ARROW_DEVICE_EXT_DEV, 12),
        (ARROW_DEVICE_CUDA_MANAGED, 13),
        (ARROW_DEVICE_ONEAPI, 14),
        (ARROW_DEVICE_WEBGPU, 15),
        (ARROW_DEVICE_HEXAGON, 16),
    ];
    for (t, v) in all {
        assert_eq!(t, v);
        assert!(device_type_name(t).starts_with("ARROW_DEVICE_"), "{t}");
    }
}

// ---- Schemas -----------------------------------------------------------------------------------

fn every_type() -> Vec<DataType> {
    let mut types = DataType::EXAMPLES.to_vec();
    types.extend([TimeUnit::Second, TimeUnit::Millisecond, TimeUnit::Nanosecond].map(DataType::Timestamp));
    types.extend([DataType::Decimal128(1, 0), DataType::Decimal128(12, -3)]);
    types
}

#[test]
fn schemas_of_every_type_round_trip() {
    let columns: Vec<(String, DataType)> = every_type().into_iter().enumerate().map(|(i, t)| (format!("c{i}"), t)).collect();
    let ffi = export_schema(&columns).unwrap();
    // arrow-rs reads it as a struct of nullable fields of the types' Arrow types.
    let schema = Schema::try_from(&ffi).unwrap();
    assert_eq!(schema.fields().len(), columns.len());
    for ((name, t), f) in columns.iter().zip(schema.fields()) {
        assert_eq!((f.name(), f.data_type(), f.is_nullable()), (name, &arrow_type(*t), true));
    }
    assert_eq!(import_schema(&ffi).unwrap(), columns);
    // The same through a schema arrow-rs exported, and moved as a C consumer would.
    let mut from_arrow = FFI_ArrowSchema::try_from(&schema).unwrap();
    // SAFETY: a valid schema we own; the move marks the source released.
    let moved = unsafe { FFI_ArrowSchema::from_raw(&mut from_arrow) };
    assert!(from_arrow.release.is_none());
    assert_eq!(import_schema(&moved).unwrap(), columns);
    assert!(import_schema(&from_arrow).is_err());
}

#[test]
fn schemas_with_what_the_device_drops() {
    // Time zones and non-nullable fields read as their device types.
    let schema = Schema::new(vec![
        Field::new("ts", A::Timestamp(U::Millisecond, Some("Europe/Paris".into())), false),
        Field::new("s", A::LargeUtf8, false),
    ]);
    let ffi = FFI_ArrowSchema::try_from(&schema).unwrap();
    assert_eq!(import_schema(&ffi).unwrap(), vec![("ts".into(), DataType::Timestamp(TimeUnit::Millisecond)), ("s".into(), DataType::LargeUtf8)]);
    assert_eq!(export_schema::<&str>(&[]).unwrap().n_children, 0);
    assert_eq!(import_schema(&export_schema::<&str>(&[]).unwrap()).unwrap(), vec![]);
}

fn unsupported_child(t: A) -> String {
    let schema = Schema::new(vec![Field::new("ok", A::Int32, true), Field::new("bad", t.clone(), true)]);
    let ffi = FFI_ArrowSchema::try_from(&schema).unwrap();
    let e = import_schema(&ffi).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{t}: {e:?}");
    let msg = e.to_string();
    assert!(msg.contains("\"bad\""), "{t}: {msg}");
    msg
}

#[test]
fn unsupported_children_are_named_with_their_type() {
    for t in [A::Float16, A::Binary, A::Time32(U::Second), A::Duration(U::Second), A::Null, A::Utf8View, A::Decimal256(40, 2)] {
        let msg = unsupported_child(t.clone());
        assert!(msg.contains(&t.to_string()), "{msg}");
    }
    let dict = A::Dictionary(Box::new(A::Int32), Box::new(A::Utf8));
    assert!(unsupported_child(dict.clone()).contains(&dict.to_string()));
    let list = A::List(Arc::new(Field::new("item", A::Int32, true)));
    assert!(unsupported_child(list).contains("List"));
    let nested = A::Struct(vec![Field::new("x", A::Int32, true)].into());
    assert!(unsupported_child(nested).contains("Struct"));
}

#[test]
fn a_top_level_that_is_not_a_struct_is_refused() {
    let ffi = FFI_ArrowSchema::try_from(&A::Int64).unwrap();
    let e = import_schema(&ffi).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }) && e.to_string().contains("\"l\""), "{e}");
}

extern "C" fn ignore_schema_release(_: *mut FFI_ArrowSchema) {}

/// A live struct schema over `children` (host structures the caller keeps alive).
fn struct_of(children: &mut [*mut FFI_ArrowSchema]) -> FFI_ArrowSchema {
    let mut top = FFI_ArrowSchema::empty();
    (top.format, top.n_children, top.children) = (c"+s".as_ptr(), children.len() as i64, children.as_mut_ptr());
    top.release = Some(ignore_schema_release as unsafe extern "C" fn(*mut FFI_ArrowSchema));
    top
}

#[test]
fn malformed_schemas_are_errors_not_panics() {
    // A list that names no child: arrow-rs would panic reading it.
    let mut list = FFI_ArrowSchema::empty();
    (list.format, list.name) = (c"+l".as_ptr(), c"l".as_ptr());
    let e = import_schema(&struct_of(&mut [&mut list])).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }) && e.to_string().contains("\"+l\"") && e.to_string().contains("\"l\""), "{e}");
    // A child without a format string.
    list.format = std::ptr::null();
    let e = import_schema(&struct_of(&mut [&mut list])).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("\"l\""), "{e}");
    // A null child pointer.
    assert!(matches!(import_schema(&struct_of(&mut [std::ptr::null_mut()])), Err(Error::InvalidArgument(_))));
    // Children announced, none given.
    let mut top = struct_of(&mut []);
    (top.n_children, top.children) = (2, std::ptr::null_mut());
    assert!(matches!(import_schema(&top), Err(Error::InvalidArgument(_))));
}

// ---- Device arrays with fake pointers ------------------------------------------------------------

/// One fake column: its type's format is in the schema; here its buffers (fake device
/// addresses) and the fields of its ArrowArray.
struct FakeColumn {
    buffers: Vec<*const c_void>,
    length: i64,
    offset: i64,
    null_count: i64,
    released: bool,
}

fn fake_column(n_buffers: usize, length: i64) -> FakeColumn {
    let buffers = (0..n_buffers).map(|i| (0x7f00_0000_0000usize + i * 0x10_0000) as *const c_void).collect();
    FakeColumn { buffers, length, offset: 0, null_count: -1, released: false }
}

/// The host structures of a fake struct array; the ArrowDeviceArray over them must not outlive it.
struct Fake {
    children: Vec<ArrowArray>,
    child_ptrs: Vec<*mut ArrowArray>,
    parent_buffers: Vec<*const c_void>,
    parent_null_count: i64,
    columns: Vec<FakeColumn>,
}

extern "C" fn ignore_release(_: *mut ArrowArray) {}

impl Fake {
    fn new(columns: Vec<FakeColumn>) -> Fake {
        let mut f = Fake { children: Vec::new(), child_ptrs: Vec::new(), parent_buffers: vec![std::ptr::null()], parent_null_count: 0, columns };
        for c in &mut f.columns {
            let mut a = ArrowArray::empty();
            (a.length, a.offset, a.null_count) = (c.length, c.offset, c.null_count);
            (a.n_buffers, a.buffers) = (c.buffers.len() as i64, c.buffers.as_mut_ptr());
            a.release = if c.released { None } else { Some(ignore_release) };
            f.children.push(a);
        }
        f.child_ptrs = f.children.iter_mut().map(|c| c as *mut ArrowArray).collect();
        f
    }

    /// The device array over these structures, released through `release`.
    fn array(&mut self, length: i64, device_type: ArrowDeviceType, release: extern "C" fn(*mut ArrowArray)) -> ArrowDeviceArray {
        let mut a = ArrowArray::empty();
        (a.length, a.null_count, a.n_buffers, a.buffers) = (length, self.parent_null_count, 1, self.parent_buffers.as_mut_ptr());
        (a.n_children, a.children) = (self.child_ptrs.len() as i64, self.child_ptrs.as_mut_ptr());
        a.release = Some(release);
        // SAFETY: the host structures live in `self`, which the tests keep alive longer than the
        // array; the device addresses are fake, and check_device_array never dereferences them.
        unsafe { ArrowDeviceArray::new(a, device_type, 0, std::ptr::null_mut()) }
    }
}

fn schema(columns: &[(&str, DataType)]) -> FFI_ArrowSchema {
    export_schema(columns).unwrap()
}

static RELEASED_OK: AtomicUsize = AtomicUsize::new(0);
extern "C" fn count_ok(_: *mut ArrowArray) {
    RELEASED_OK.fetch_add(1, SeqCst);
}

#[test]
fn a_well_formed_array_checks_and_is_released_once() {
    let mut fake = Fake::new(vec![fake_column(2, 10), fake_column(3, 10), fake_column(2, 10)]);
    let s = schema(&[("k", DataType::Int64), ("s", DataType::Utf8), ("b", DataType::Boolean)]);
    let array = fake.array(10, ARROW_DEVICE_CUDA, count_ok);
    assert_eq!(check_device_array(&array, &s).unwrap(), vec![("k".into(), DataType::Int64), ("s".into(), DataType::Utf8), ("b".into(), DataType::Boolean)]);
    assert_eq!(RELEASED_OK.load(SeqCst), 0);
    drop(array);
    assert_eq!(RELEASED_OK.load(SeqCst), 1);
}

static RELEASED_MOVED: AtomicUsize = AtomicUsize::new(0);
extern "C" fn count_moved(_: *mut ArrowArray) {
    RELEASED_MOVED.fetch_add(1, SeqCst);
}

#[test]
fn a_moved_array_is_released_once_by_its_new_owner() {
    let mut fake = Fake::new(vec![fake_column(2, 4)]);
    let mut source = fake.array(4, ARROW_DEVICE_CUDA, count_moved);
    // SAFETY: a valid structure we own; the move marks it released.
    let moved = unsafe { ArrowDeviceArray::from_raw(source.as_mut_ptr()) };
    assert!(source.is_released() && !moved.is_released());
    drop(source);
    assert_eq!(RELEASED_MOVED.load(SeqCst), 0);
    assert_eq!(check_device_array(&moved, &schema(&[("x", DataType::Float64)])).unwrap().len(), 1);
    drop(moved);
    assert_eq!(RELEASED_MOVED.load(SeqCst), 1);
}

fn check_err(fake: &mut Fake, device_type: ArrowDeviceType, columns: &[(&str, DataType)]) -> Error {
    let array = fake.array(fake.columns.first().map_or(0, |c| c.length), device_type, ignore_release);
    check_device_array(&array, &schema(columns)).unwrap_err()
}

#[test]
fn another_device_type_is_refused() {
    for t in [ARROW_DEVICE_CPU, ARROW_DEVICE_CUDA_HOST, ARROW_DEVICE_CUDA_MANAGED, ARROW_DEVICE_ROCM, 99] {
        let e = check_err(&mut Fake::new(vec![fake_column(2, 3)]), t, &[("k", DataType::Int32)]);
        assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
        assert!(e.to_string().contains(device_type_name(t)) && e.to_string().contains("ARROW_DEVICE_CUDA"), "{e}");
    }
}

#[test]
fn released_arrays_and_children_are_refused() {
    let e = check_device_array(&ArrowDeviceArray::empty(), &schema(&[("k", DataType::Int32)])).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("released"), "{e}");
    let mut released_child = fake_column(2, 3);
    released_child.released = true;
    let e = check_err(&mut Fake::new(vec![fake_column(2, 3), released_child]), ARROW_DEVICE_CUDA, &[("a", DataType::Int32), ("b", DataType::Int32)]);
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("\"b\"") && e.to_string().contains("released"), "{e}");
    // A released schema.
    let mut fake = Fake::new(vec![fake_column(2, 3)]);
    let array = fake.array(3, ARROW_DEVICE_CUDA, ignore_release);
    let e = check_device_array(&array, &FFI_ArrowSchema::empty()).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("released"), "{e}");
}

#[test]
fn buffer_counts_must_match_the_types() {
    for (t, wrong) in [(DataType::Int64, 3), (DataType::Int64, 1), (DataType::Boolean, 3), (DataType::Utf8, 2), (DataType::LargeUtf8, 4)] {
        let e = check_err(&mut Fake::new(vec![fake_column(wrong, 5)]), ARROW_DEVICE_CUDA, &[("c", t)]);
        let msg = e.to_string();
        assert!(matches!(e, Error::InvalidArgument(_)) && msg.contains("\"c\"") && msg.contains(&format!("{wrong} buffers")), "{t}: {msg}");
    }
}

#[test]
fn children_must_match_the_schema_and_the_struct() {
    // Fewer children than the schema has.
    let e = check_err(&mut Fake::new(vec![fake_column(2, 3)]), ARROW_DEVICE_CUDA, &[("a", DataType::Int32), ("b", DataType::Int32)]);
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("children"), "{e}");
    // A child shorter than the struct.
    let mut fake = Fake::new(vec![fake_column(2, 3)]);
    let array = fake.array(5, ARROW_DEVICE_CUDA, ignore_release);
    let e = check_device_array(&array, &schema(&[("a", DataType::Int32)])).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("\"a\""), "{e}");
    // Nulls counted without a validity bitmap.
    let mut no_validity = fake_column(2, 3);
    (no_validity.buffers[0], no_validity.null_count) = (std::ptr::null(), 2);
    let e = check_err(&mut Fake::new(vec![no_validity]), ARROW_DEVICE_CUDA, &[("a", DataType::Int32)]);
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("validity"), "{e}");
    // A negative offset.
    let mut negative = fake_column(2, 3);
    negative.offset = -1;
    assert!(matches!(check_err(&mut Fake::new(vec![negative]), ARROW_DEVICE_CUDA, &[("a", DataType::Int32)]), Error::InvalidArgument(_)));
    // A null values buffer for values that take bytes.
    let mut no_values = fake_column(2, 3);
    no_values.buffers[1] = std::ptr::null();
    assert!(matches!(check_err(&mut Fake::new(vec![no_values]), ARROW_DEVICE_CUDA, &[("a", DataType::Int32)]), Error::InvalidArgument(_)));
}

#[test]
fn struct_level_nulls_are_refused() {
    let mut fake = Fake::new(vec![fake_column(2, 3)]);
    // A validity bitmap with nulls counted (or not yet counted) on the struct itself.
    fake.parent_buffers[0] = 0x7f00_1000_0000usize as *const c_void;
    for nulls in [-1, 1] {
        fake.parent_null_count = nulls;
        let array = fake.array(3, ARROW_DEVICE_CUDA, ignore_release);
        let e = check_device_array(&array, &schema(&[("a", DataType::Int32)])).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }) && e.to_string().contains("null as a whole"), "{e}");
    }
    // The same bitmap with no null counted is ignored.
    fake.parent_null_count = 0;
    assert!(check_device_array(&fake.array(3, ARROW_DEVICE_CUDA, ignore_release), &schema(&[("a", DataType::Int32)])).is_ok());
}

#[test]
fn unsupported_child_types_are_refused_before_any_buffer_is_read() {
    let mut fake = Fake::new(vec![fake_column(2, 3), fake_column(2, 3)]);
    let array = fake.array(3, ARROW_DEVICE_CUDA, ignore_release);
    let s = FFI_ArrowSchema::try_from(&Schema::new(vec![Field::new("a", A::Int32, true), Field::new("h", A::Float16, true)])).unwrap();
    let e = check_device_array(&array, &s).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }) && e.to_string().contains("\"h\"") && e.to_string().contains("Float16"), "{e}");
}
