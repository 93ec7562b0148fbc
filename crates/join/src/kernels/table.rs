//! Safe wrappers over the table kernels' C ABI (`cuda/join/table.cu`): the only `unsafe` of the
//! table model.

use gpujoin_cub_sys::result::{launch, read_scalar, with_temp};
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};
use gpujoin_primitives::exclusive_sum_in_place;

use crate::kernels::sys::table as ffi;
use crate::table::{Column, ColumnView, DataType};

/// A device array either borrowed from the input or computed from it.
pub(crate) enum Cow<'a, T: gpujoin_device::Pod> {
    Borrowed(DeviceView<'a, T>),
    Owned(DeviceBuffer<T>),
}

impl<T: gpujoin_device::Pod> Cow<'_, T> {
    pub(crate) fn view(&self) -> DeviceView<'_, T> {
        match self {
            Cow::Borrowed(v) => *v,
            Cow::Owned(b) => b.view(),
        }
    }
}

fn strings(v: &ColumnView<'_>) -> ffi::gj_tb_strings {
    ffi::gj_tb_strings {
        offsets: v.offsets().map_or(std::ptr::null(), |o| o.as_ptr() as *const _),
        wide_offsets: (v.data_type() == DataType::LargeUtf8) as i32,
        offset: v.offset() as i64,
        rows: v.len() as i64,
        bytes: v.values().as_ptr(),
    }
}

/// The column's validity as `u32` words with row `i` at bit `i` (borrowed when the bitmap is
/// aligned so already, repacked otherwise); `None` when every row is valid.
pub(crate) fn validity_words<'a>(stream: &Stream, v: &ColumnView<'a>) -> Result<Option<Cow<'a, u32>>> {
    let Some(bits) = v.validity() else { return Ok(None) };
    let words = v.len().div_ceil(32);
    if v.offset() % 32 == 0 {
        let start = v.offset() / 8;
        if bits.len() >= start + words * 4 {
            if let Some(w) = bits.slice(start..start + words * 4).reinterpret::<u32>() {
                return Ok(Some(Cow::Borrowed(w)));
            }
        }
    }
    let mut out = stream.alloc::<u32>(words)?;
    let o = out.view_mut().as_mut_ptr();
    // SAFETY: `bits` covers bits offset .. offset + len (checked when the view was made); `out` holds ceil(len / 32) words.
    launch(stream, "repack validity", || unsafe { ffi::gj_tb_repack_bits(bits.as_ptr(), v.offset() as i64, v.len() as i64, o, stream.raw()) })?;
    Ok(Some(Cow::Owned(out)))
}

/// The column's values widened to 32 bits: `Int8`/`Int16` sign-extended (as `i32` bits),
/// `UInt8`/`UInt16` and `Boolean` (0 or 1) zero-extended.
pub(crate) fn widen(stream: &Stream, v: &ColumnView<'_>) -> Result<DeviceBuffer<u32>> {
    let kind = match v.data_type() {
        DataType::Int8 => ffi::gj_tb_narrow_GJ_TB_I8,
        DataType::Int16 => ffi::gj_tb_narrow_GJ_TB_I16,
        DataType::UInt8 => ffi::gj_tb_narrow_GJ_TB_U8,
        DataType::UInt16 => ffi::gj_tb_narrow_GJ_TB_U16,
        DataType::Boolean => ffi::gj_tb_narrow_GJ_TB_BOOL,
        t => return Err(Error::invalid(format!("widening a {t} column"))),
    };
    let mut out = stream.alloc::<u32>(v.len())?;
    let o = out.view_mut().as_mut_ptr();
    let p = v.values().as_ptr() as *const std::ffi::c_void;
    // SAFETY: the values buffer covers offset + len elements (checked when the view was made).
    launch(stream, "widen keys", || unsafe { ffi::gj_tb_widen(p, kind, v.offset() as i64, v.len() as i64, o, stream.raw()) })?;
    Ok(out)
}

/// The high (`i64`) and low (`u64`) halves of a `Decimal128` column's values.
pub(crate) fn split_decimal(stream: &Stream, v: &ColumnView<'_>) -> Result<(DeviceBuffer<i64>, DeviceBuffer<u64>)> {
    let mut hi = stream.alloc::<i64>(v.len())?;
    let mut lo = stream.alloc::<u64>(v.len())?;
    let (h, l) = (hi.view_mut().as_mut_ptr(), lo.view_mut().as_mut_ptr());
    let p = v.values().as_ptr() as *const std::ffi::c_void;
    // SAFETY: the values cover offset + len 16-byte elements; hi and lo hold len entries.
    launch(stream, "split decimals", || unsafe { ffi::gj_tb_split_decimal(p, v.offset() as i64, v.len() as i64, h, l, stream.raw()) })?;
    Ok((hi, lo))
}

/// Exact dense ranks of the strings of two columns (equal strings, equal ranks; rank order is
/// byte order), and the number of distinct strings. Null rows get the rank of their bytes
/// (callers use the validity). `a.len() + b.len()` must be below 2^32.
pub(crate) fn string_ranks(stream: &Stream, a: &ColumnView<'_>, b: &ColumnView<'_>) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>, u32)> {
    let total = a.len() as u64 + b.len() as u64;
    if total >= 1 << 32 {
        return Err(Error::too_large("string keys of both sides", total, (1u64 << 32) - 1));
    }
    let (sa, sb) = (strings(a), strings(b));
    let mut ra = stream.alloc::<u32>(a.len())?;
    let mut rb = stream.alloc::<u32>(b.len())?;
    let mut distinct = stream.alloc_zeroed::<u32>(1)?;
    let (pa, pb, pd) = (ra.view_mut().as_mut_ptr(), rb.view_mut().as_mut_ptr(), distinct.view_mut().as_mut_ptr());
    // SAFETY: both string columns are live and validated; outputs hold a.len(), b.len() and 1 entries.
    with_temp(stream, "string ranks", |t, tb| unsafe { ffi::gj_tb_string_ranks(t, tb, sa, sb, pa, pb, pd, stream.raw()) })?;
    let d = read_scalar(stream, &distinct)?;
    Ok((ra, rb, d))
}

/// The number of adjacent pairs out of order in a numeric column (0: sorted ascending, floats
/// with `-0.0 == 0.0` and NaN last).
pub(crate) fn count_descents(stream: &Stream, v: &ColumnView<'_>) -> Result<u64> {
    let kind = match v.data_type() {
        DataType::Int32 | DataType::Date32 => ffi::gj_tb_numeric_GJ_TB_NUM_I32,
        DataType::Int64 | DataType::Date64 | DataType::Timestamp(_) => ffi::gj_tb_numeric_GJ_TB_NUM_I64,
        DataType::UInt32 => ffi::gj_tb_numeric_GJ_TB_NUM_U32,
        DataType::UInt64 => ffi::gj_tb_numeric_GJ_TB_NUM_U64,
        DataType::Float32 => ffi::gj_tb_numeric_GJ_TB_NUM_F32,
        DataType::Float64 => ffi::gj_tb_numeric_GJ_TB_NUM_F64,
        t => return Err(Error::invalid(format!("sortedness of a {t} column"))),
    };
    let w = v.data_type().byte_width().expect("numeric");
    let p = v.values().slice(v.offset() * w..).as_ptr() as *const std::ffi::c_void;
    let mut count = stream.alloc_zeroed::<u64>(1)?;
    let c = count.view_mut().as_mut_ptr() as *mut std::os::raw::c_ulonglong;
    // SAFETY: the values cover offset + len elements.
    launch(stream, "count descents", || unsafe { ffi::gj_tb_count_descents(p, kind, v.len() as i64, c, stream.raw()) })?;
    read_scalar(stream, &count)
}

/// Output row `k` is row `map[k]` of `v` (null where `map[k]` is no row or `v`'s row is null):
/// a new column of the same type, offset 0, with a validity bitmap when `nullable` or `v` has one.
pub(crate) fn gather(stream: &Stream, v: &ColumnView<'_>, map: &DeviceView<'_, u32>, nullable: bool) -> Result<Column> {
    gather_as(stream, v, map, nullable, v.data_type())
}

/// [`gather`] into a column of `out_type`: the input's type, or the other string type (`Utf8`
/// and `LargeUtf8` differ in their offsets only).
pub(crate) fn gather_as(stream: &Stream, v: &ColumnView<'_>, map: &DeviceView<'_, u32>, nullable: bool, out_type: DataType) -> Result<Column> {
    if !v.data_type().is_comparable_with(out_type) {
        return Err(Error::invalid(format!("gathering a {} column as {out_type}", v.data_type())));
    }
    let n = map.len();
    let s = stream.raw();
    let mp = map.as_ptr();
    let (len, off) = (v.len() as i64, v.offset() as i64);
    let validity = if nullable || v.validity().is_some() {
        let mut words = stream.alloc::<u32>(n.div_ceil(32))?;
        let w = words.view_mut().as_mut_ptr();
        let bits = v.validity().map_or(std::ptr::null(), |b| b.as_ptr());
        // SAFETY: the bitmap covers offset + len bits; the map has n entries; words hold ceil(n / 32).
        launch(stream, "gather validity", || unsafe { ffi::gj_tb_gather_bits(bits, off, len, mp, n as i64, w, s) })?;
        Some(words.into_bytes())
    } else {
        None
    };
    let (values, offsets) = match v.data_type() {
        DataType::Boolean => {
            let mut words = stream.alloc::<u32>(n.div_ceil(32))?;
            let w = words.view_mut().as_mut_ptr();
            let bits = v.values().as_ptr();
            // SAFETY: as for the validity.
            launch(stream, "gather booleans", || unsafe { ffi::gj_tb_gather_bits(bits, off, len, mp, n as i64, w, s) })?;
            (words.into_bytes(), None)
        }
        t if t.is_string() => {
            let col = strings(v);
            let mut ends = stream.alloc::<u64>(n + 1)?;
            let e = ends.view_mut().as_mut_ptr() as *mut i64;
            // SAFETY: the strings are validated; `ends` holds n + 1 entries.
            launch(stream, "string lengths", || unsafe { ffi::gj_tb_string_lengths(col, mp, n as i64, e, s) })?;
            exclusive_sum_in_place(stream, &mut ends.view_mut())?;
            let total = stream.copy_to_host(&ends.slice(n..))?[0];
            let mut bytes = stream.alloc::<u8>(total as usize)?;
            let b = bytes.view_mut().as_mut_ptr();
            let ep = ends.view().as_ptr() as *const i64;
            // SAFETY: `ends` are the exclusive sums of the lengths; `bytes` holds their total.
            launch(stream, "gather strings", || unsafe { ffi::gj_tb_gather_string_bytes(col, mp, n as i64, ep, b, s) })?;
            let offsets = if out_type == DataType::Utf8 {
                if total > i32::MAX as u64 {
                    return Err(Error::too_large("bytes of a gathered Utf8 column (use LargeUtf8)", total, i32::MAX as u64));
                }
                let mut o32 = stream.alloc::<i32>(n + 1)?;
                let o = o32.view_mut().as_mut_ptr();
                // SAFETY: n + 1 entries each.
                launch(stream, "narrow offsets", || unsafe { ffi::gj_tb_narrow_offsets(ep, n as i64 + 1, o, s) })?;
                o32.into_bytes()
            } else {
                ends.into_bytes()
            };
            (bytes, Some(offsets))
        }
        t => {
            let w = t.byte_width().expect("fixed width");
            let mut out = stream.alloc::<u8>(n * w)?;
            let o = out.view_mut().as_mut_ptr() as *mut std::ffi::c_void;
            let p = v.values().as_ptr() as *const std::ffi::c_void;
            // SAFETY: the values cover offset + len elements of w bytes; out holds n of them.
            launch(stream, "gather values", || unsafe { ffi::gj_tb_gather_fixed(p, w as i32, off, len, mp, n as i64, o, s) })?;
            (out, None)
        }
    };
    Column::from_buffers(out_type, n, values, offsets, validity)
}
