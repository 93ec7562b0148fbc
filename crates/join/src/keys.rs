//! Key columns on the device and their images under the join's equality; [`range`]: 8-byte
//! integer keys joined as 32-bit offsets.

pub(crate) mod range;

use gpujoin_cub_sys::result::launch;
use gpujoin_device::{DeviceBuffer, DeviceView, Error, Result, Stream};

use crate::kernels::sys::join as ffi;
use crate::kernels::TypedValues;
use crate::table::{ColumnView, DataType, TableView};
use crate::types::{JoinOptions, NullEquality, MAX_KEY_COLUMNS};

/// The key columns of one relation as the equi-join algorithms take them: a [`TableView`] of 1
/// to [`MAX_KEY_COLUMNS`] columns of the kernels' key types, checked by [`check_keys`]:
///
/// | column type | read as |
/// |---|---|
/// | `Int32`, `Date32` | `i32` |
/// | `Int64`, `Date64`, `Timestamp` | `i64` |
/// | `UInt32`, `UInt64`, `Float32`, `Float64` | `u32`, `u64`, `f32`, `f64` |
///
/// A validity bitmap must start at the column's first row (offset 0) and hold whole 32-bit
/// words (`ceil(rows / 32)` of them, 4-byte aligned), as the kernels read it. Other types,
/// sliced nullable columns and other bitmaps are for the front door ([`crate::Join`]), which
/// prepares every type into these.
///
/// ```no_run
/// # use gpujoin_join::*; use gpujoin_join::table::*; use gpujoin_device::*;
/// # fn f(s: &Stream) -> Result<()> {
/// let a = s.copy_from_host(&[1i32, 2, 2])?;
/// let b = s.copy_from_host(&[0.5f64, 1.0, 2.0])?;
/// let keys = TableView::unnamed(vec![a.view().into(), b.view().into()])?; // a composite key
/// gpujoin_join::keys::check_keys(&keys)?;
/// assert_eq!(keys.rows(), 3);
/// # Ok(()) }
/// ```
pub fn check_keys(keys: &TableView<'_>) -> Result<()> {
    let columns = keys.columns();
    if columns.is_empty() || columns.len() > MAX_KEY_COLUMNS {
        return Err(Error::invalid(format!("{} key columns; 1 to {MAX_KEY_COLUMNS} are supported", columns.len())));
    }
    let n = keys.rows();
    for (name, c) in keys.names().iter().zip(columns) {
        key_type(c.data_type()).ok_or_else(|| Error::Unsupported { what: format!("key column {name:?} of type {}", c.data_type()), reason: "the algorithms take Int32, Date32, Int64, Date64, Timestamp, UInt32, UInt64, Float32 and Float64 keys (the front door, Join, prepares every type)".into() })?;
        if TypedValues::of(c).is_none() {
            return Err(Error::invalid(format!("key column {name:?}: its values buffer is misaligned")));
        }
        if let Some(v) = c.validity() {
            let words = n.div_ceil(32);
            if c.offset() != 0 || v.len() < words * 4 || v.raw() % 4 != 0 {
                return Err(Error::invalid(format!(
                    "key column {name:?}: a validity bitmap must start at row 0 and hold {words} whole 32-bit words (it has {} bytes at offset {}); the front door, Join, takes any bitmap",
                    v.len(),
                    c.offset()
                )));
            }
        }
    }
    if n as u64 > crate::RowId::MAX_ROWS {
        return Err(Error::too_large("rows of a relation", n as u64, crate::RowId::MAX_ROWS));
    }
    Ok(())
}

/// Checks that two sides' keys can be compared: both checked ([`check_keys`]), as many columns,
/// and the same physical type in each (`Date32` compares with `Int32`, as the kernels read both as
/// `i32`).
pub fn check_comparable(left: &TableView<'_>, right: &TableView<'_>) -> Result<()> {
    check_keys(left)?;
    check_keys(right)?;
    if left.columns().len() != right.columns().len() {
        return Err(Error::invalid(format!("left has {} key columns, right {}", left.columns().len(), right.columns().len())));
    }
    for (i, (a, b)) in left.columns().iter().zip(right.columns()).enumerate() {
        if key_type(a.data_type()) != key_type(b.data_type()) {
            return Err(Error::TypeMismatch { what: format!("key column {i}"), left: a.data_type().to_string(), right: b.data_type().to_string() });
        }
    }
    Ok(())
}

/// The physical type the kernels read a key column of `t` as (`Int32`, `Int64`, `UInt32`,
/// `UInt64`, `Float32` or `Float64`); `None` for types the algorithms do not take as keys.
pub(crate) use crate::kernels::physical_type as key_type;

/// The typed values of a column already checked to have a key type and an aligned buffer
/// ([`check_keys`], or a payload check).
pub(crate) fn values<'a>(c: &ColumnView<'a>) -> TypedValues<'a> {
    TypedValues::of(c).expect("a checked key or payload column has a kernel type and an aligned buffer")
}

/// The validity words of a checked key column (bit `i % 32` of word `i / 32`, 1 = valid).
pub(crate) fn validity_words<'a>(c: &ColumnView<'a>) -> Option<DeviceView<'a, u32>> {
    c.validity().map(|v| v.slice(..c.len().div_ceil(32) * 4).reinterpret::<u32>().expect("a checked key column's validity holds aligned words"))
}

/// Bytes per value of a checked key or payload column (4 or 8).
pub(crate) fn width(c: &ColumnView<'_>) -> usize {
    c.data_type().byte_width().unwrap_or(8)
}

/// Checks payload columns of the algorithms' own entry points: `rows` rows each, values of 4 or
/// 8 bytes (any such type: `Int32`, `Date32`, `Float64`, `Timestamp`, ...), no validity bitmap
/// (the algorithms gather values; nullable payloads go through the front door, [`crate::Join`]).
pub fn check_payloads(side: &str, rows: usize, payloads: &[ColumnView<'_>]) -> Result<()> {
    for (name, c) in payloads.iter().enumerate() {
        if c.len() != rows {
            gpujoin_device::check_same_len(&format!("{side} keys"), rows, &format!("{side} payload column {name}"), c.len())?;
        }
        let fixed = matches!(c.data_type().byte_width(), Some(4 | 8)) && !matches!(c.data_type(), DataType::Boolean);
        if !fixed || c.validity().is_some() {
            return Err(Error::Unsupported {
                what: format!("{side} payload column {name} of type {}{}", c.data_type(), if c.validity().is_some() { " with a validity bitmap" } else { "" }),
                reason: "the algorithms gather 4- and 8-byte values without a validity bitmap (the front door, Join, takes every column)".into(),
            });
        }
        if c.typed::<u32>().is_none() && c.typed::<u64>().is_none() {
            return Err(Error::invalid(format!("{side} payload column {name}: its values buffer is misaligned")));
        }
    }
    Ok(())
}

/// A key view from key columns the crate made itself (checked as any caller's).
pub(crate) fn key_view<'a>(columns: Vec<ColumnView<'a>>) -> Result<TableView<'a>> {
    let keys = TableView::unnamed(columns)?;
    check_keys(&keys)?;
    Ok(keys)
}

/// Images of a relation's keys: one u64 per column (equal keys, equal images; value order kept),
/// per-row flags (bit 2c: null in column c, bit 2c+1: NaN), one derived scalar key per row and
/// the rows that can match nothing.
pub(crate) struct KeyImages {
    pub columns: Vec<DeviceBuffer<u64>>,
    pub flags: DeviceBuffer<u8>,
    pub derived: DeviceBuffer<u64>,
    pub never_match: DeviceBuffer<u8>,
}

/// How both sides' keys become derived scalar keys: packed exactly when they fit the budget,
/// hashed (and verified) otherwise.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyPlan {
    pub exact: bool,
    /// Significant low bits of an exact derived key (64 when hashed).
    pub bits: u32,
    /// Null keys equal each other and some column is nullable: one null bit per column.
    pub null_equal: bool,
    pub nan_never_equal: bool,
    /// The bits kept of every hashed key (all but in tests: [`JoinOptions::hash_mask`]).
    pub hash_mask: u64,
}

impl KeyPlan {
    /// Plans the derived keys of a join of `left` and `right` within `budget` bits.
    pub fn new(left: &TableView<'_>, right: &TableView<'_>, opts: JoinOptions, budget: u32) -> KeyPlan {
        let nullable = left.columns().iter().chain(right.columns()).any(|c| c.validity().is_some());
        let null_equal = nullable && opts.null_equality == NullEquality::NullEqualsNull;
        let bits: u32 = left.columns().iter().map(|c| width(c) as u32 * 8 + null_equal as u32).sum();
        KeyPlan {
            exact: bits <= budget,
            bits: if bits <= budget { bits } else { 64 },
            null_equal,
            nan_never_equal: opts.nan_equality == crate::NanEquality::NanNeverEqual,
            hash_mask: opts.hash_mask(),
        }
    }
}

/// Computes the images and derived keys of `keys` under `plan`.
pub(crate) fn images(stream: &Stream, keys: &TableView<'_>, plan: KeyPlan) -> Result<KeyImages> {
    let n = keys.rows();
    let mut flags = stream.alloc_zeroed::<u8>(n)?;
    let mut columns = Vec::with_capacity(keys.columns().len());
    let s = stream.raw();
    for (c, col) in keys.columns().iter().enumerate() {
        let mut img = stream.alloc::<u64>(n)?;
        let (ip, fp) = (img.view_mut().as_mut_ptr(), flags.view_mut().as_mut_ptr());
        let vp = validity_words(col).map_or(std::ptr::null(), |v| v.as_ptr());
        let typed = values(col);
        let (n64, c32) = (n as i64, c as i32);
        // SAFETY: live device ranges of n rows (validity checked to hold ceil(n/32) words).
        launch(stream, "key image", || unsafe {
            match typed {
                TypedValues::I32(v) => ffi::gj_j_image_i32(v.as_ptr(), vp, n64, c32, ip, fp, s),
                TypedValues::I64(v) => ffi::gj_j_image_i64(v.as_ptr(), vp, n64, c32, ip, fp, s),
                TypedValues::U32(v) => ffi::gj_j_image_u32(v.as_ptr(), vp, n64, c32, ip, fp, s),
                TypedValues::U64(v) => ffi::gj_j_image_u64(v.as_ptr(), vp, n64, c32, ip, fp, s),
                TypedValues::F32(v) => ffi::gj_j_image_f32(v.as_ptr(), vp, n64, c32, ip, fp, s),
                TypedValues::F64(v) => ffi::gj_j_image_f64(v.as_ptr(), vp, n64, c32, ip, fp, s),
            }
        })?;
        columns.push(img);
    }
    let widths: Vec<i32> = keys.columns().iter().map(|c| width(c) as i32 * 8).collect();
    let mut derived = stream.alloc::<u64>(n)?;
    let mut never_match = stream.alloc::<u8>(n)?;
    let ptr = |i: usize| columns.get(i).map_or(std::ptr::null(), |b: &DeviceBuffer<u64>| b.view().as_ptr());
    let (d, nm, f) = (derived.view_mut().as_mut_ptr(), never_match.view_mut().as_mut_ptr(), flags.view().as_ptr());
    // SAFETY: images of n rows; widths has ncols entries (read on the host by the wrapper).
    launch(stream, "derive key", || unsafe {
        ffi::gj_j_derive_key(
            ptr(0),
            ptr(1),
            ptr(2),
            ptr(3),
            widths.as_ptr(),
            widths.len() as i32,
            f,
            n as i64,
            (!plan.exact) as i32,
            plan.null_equal as i32,
            plan.nan_never_equal as i32,
            plan.hash_mask,
            d,
            nm,
            s,
        )
    })?;
    Ok(KeyImages { columns, flags, derived, never_match })
}

/// Exact keys for rows whose derived keys had to be hashed (composites wider than 64 bits): the
/// dense rank of each row's full key among the rows `left_rows` of `left` and `right_rows` of
/// `right`, so that two rows get the same rank exactly when their keys are equal.
///
/// Returns the ranks of the left rows, those of the right rows (one `u32` each) and the bits
/// the ranks need. The steps: the rows' images (and null bits) side by
/// side, a stable radix sort of row ids by each image column and then by the null bits (least
/// significant first, so equal keys end up adjacent), a head flag where a key differs from the
/// one before, an inclusive scan of the heads (the rank), and a scatter back to the rows.
///
/// Example: left keys (1, x), (2, y), right keys (2, y), (1, z) give ranks 0, 2 | 2, 1
/// (ranks follow the images' order; equal keys share a rank).
pub(crate) fn dense_ranks(
    stream: &Stream,
    left: &KeyImages,
    left_rows: &DeviceView<'_, u32>,
    right: &KeyImages,
    right_rows: &DeviceView<'_, u32>,
) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>, u32)> {
    use gpujoin_primitives::{gather, gather_into, inclusive_sum, iota_u32, scatter, sort_pairs_owned};
    let (a, b) = (left_rows.len(), right_rows.len());
    let n = a + b;
    if n as u64 >= u32::MAX as u64 {
        return Err(Error::too_large("rows of both sides whose composite keys are ranked", n as u64, u32::MAX as u64 - 1));
    }
    if n == 0 {
        return Ok((stream.alloc::<u32>(0)?, stream.alloc::<u32>(0)?, 1));
    }
    let mut ranks = stream.alloc::<u32>(n)?;
    // The images and null bits of the rows, left rows first.
    let ncols = left.columns.len();
    let mut images = Vec::with_capacity(ncols);
    for c in 0..ncols {
        let mut cat = stream.alloc::<u64>(n)?;
        gather_into(stream, &left.columns[c].view(), left_rows, &mut cat.slice_mut(..a), 0)?;
        gather_into(stream, &right.columns[c].view(), right_rows, &mut cat.slice_mut(a..), 0)?;
        images.push(cat);
    }
    let mut null_bits = stream.alloc::<u32>(n)?;
    for (img, rows, range) in [(left, left_rows, 0..a), (right, right_rows, a..n)] {
        let mut out = null_bits.slice_mut(range);
        let (f, r, o, m) = (img.flags.view().as_ptr(), rows.as_ptr(), out.as_mut_ptr(), rows.len() as i64);
        // SAFETY: rows index the relation's flags; out holds rows.len() entries.
        launch(stream, "null bits", || unsafe { ffi::gj_j_null_bits(f, r, m, o, stream.raw()) })?;
    }
    // Stable LSD sort of the row ids: image columns from the last, then the null bits.
    // Each pass sorts the gathered keys with the ids in CUB's ping-pong buffers (the owned
    // sort): one pair of n-entry buffers beside its inputs, not an output pair plus CUB's copy.
    let mut ids = stream.alloc::<u32>(n)?;
    iota_u32(stream, &mut ids.view_mut(), 0)?;
    for c in (0..ncols).rev() {
        let keys = gather(stream, &images[c].view(), &ids.view(), 0)?;
        ids = sort_pairs_owned(stream, keys, ids, None)?.1;
    }
    let keys = gather(stream, &null_bits.view(), &ids.view(), 0)?;
    ids = sort_pairs_owned(stream, keys, ids, Some(0..8))?.1;
    // Heads where the key changes, their inclusive scan, scattered back to the rows.
    let table: Vec<u64> = images.iter().map(|c| c.view().raw()).collect();
    let table = stream.copy_from_host(&table)?;
    let mut heads = stream.alloc::<u32>(n)?;
    {
        let (i, t, nb, h) = (ids.view().as_ptr(), table.view().as_ptr() as *const *const u64, null_bits.view().as_ptr(), heads.view_mut().as_mut_ptr());
        // SAFETY: ids index the n concatenated rows; the table holds ncols device pointers to n images.
        launch(stream, "run heads", || unsafe { ffi::gj_j_run_heads(i, n as i64, t, ncols as i32, nb, h, stream.raw()) })?;
    }
    let mut sorted_ranks = stream.alloc::<u32>(n)?;
    inclusive_sum(stream, &heads.view(), &mut sorted_ranks.view_mut())?;
    drop(heads);
    scatter(stream, &sorted_ranks.view(), &ids.view(), &mut ranks.view_mut())?;
    let bits = (u32::BITS - ((n - 1) as u32).leading_zeros()).max(1);
    let right_ranks = stream.copy_from_device(&ranks.slice(a..))?;
    ranks.truncate(a);
    Ok((ranks, right_ranks, bits))
}

/// One side's scalar keys (step 0 of the sort-based equi-joins): a key per row that can match,
/// with that row's id.
pub(crate) struct SideKeys<K: gpujoin_device::Pod> {
    pub keys: DeviceBuffer<K>,
    /// Row ids (empty where the caller did not ask for the right side's: [`scalar_keys`]).
    pub rows: DeviceBuffer<u32>,
}

/// Both sides' scalar keys and the significant low bits of each key.
pub(crate) enum ScalarKeys {
    /// Keys of at most 32 bits (packed images that fit, dense ranks, plain `u32` keys).
    U32(SideKeys<u32>, SideKeys<u32>, u32),
    /// Wider keys.
    U64(SideKeys<u64>, SideKeys<u64>, u32),
}

/// Step 0 of the sort-based equi-joins, written once for the chunked join and the match counts
/// of aggregates.
pub(crate) struct StepZero {
    pub keys: ScalarKeys,
    /// Rows that can match nothing (a NULL key under `NullEqualsNothing`, NaN under
    /// `NanNeverEqual`), in row order, of the sides asked for (else empty).
    pub never_left: DeviceBuffer<u32>,
    pub never_right: DeviceBuffer<u32>,
}

/// One scalar key per row that can match, with its row id: a plain `u32`/`u64` column without
/// a validity on both sides is its own key (every row can match); other keys become their packed
/// images when those fit 64 bits (narrowed to `u32` when they fit 32), else the dense ranks of
/// the full keys ([`dense_ranks`]; exact, nothing to verify). `never` asks for the rows that can
/// match nothing of the left and right side; `right_rows: false` drops the right side's row
/// ids as soon as they are not needed (the match counts need only the right keys), which lowers
/// the peak.
///
/// Example: left `u32` keys `[5, NULL, 7]` (nullable), right `[7]`, `NullEqualsNothing`: left
/// keys for rows `[0, 2]`, right for `[0]`, `never_left = [1]` when asked for.
pub(crate) fn scalar_keys(stream: &Stream, left: &TableView<'_>, right: &TableView<'_>, opts: JoinOptions, never: (bool, bool), right_rows: bool) -> Result<StepZero> {
    use crate::common::{iota, narrow, rows_where};
    let empty = || stream.alloc::<u32>(0);
    let (l, r) = (left.columns(), right.columns());
    if l.len() == 1 && r.len() == 1 && l[0].validity().is_none() && r[0].validity().is_none() {
        let rows = |n: usize, want: bool| if want { iota(stream, n) } else { empty() };
        let keys = match (values(&l[0]), values(&r[0])) {
            (TypedValues::U32(a), TypedValues::U32(b)) => {
                let (ra, rb) = (rows(left.rows(), true)?, rows(right.rows(), right_rows)?);
                Some(ScalarKeys::U32(SideKeys { keys: stream.copy_from_device(&a)?, rows: ra }, SideKeys { keys: stream.copy_from_device(&b)?, rows: rb }, 32))
            }
            (TypedValues::U64(a), TypedValues::U64(b)) => {
                let (ra, rb) = (rows(left.rows(), true)?, rows(right.rows(), right_rows)?);
                Some(ScalarKeys::U64(SideKeys { keys: stream.copy_from_device(&a)?, rows: ra }, SideKeys { keys: stream.copy_from_device(&b)?, rows: rb }, 64))
            }
            _ => None,
        };
        if let Some(keys) = keys {
            return Ok(StepZero { keys, never_left: empty()?, never_right: empty()? });
        }
    }
    let plan = KeyPlan::new(left, right, opts, 64);
    let (il, ir) = (images(stream, left, plan)?, images(stream, right, plan)?);
    let ml = rows_where(stream, &il.never_match.view(), false, None)?;
    let mr = rows_where(stream, &ir.never_match.view(), false, None)?;
    let never_left = if never.0 { rows_where(stream, &il.never_match.view(), true, None)? } else { empty()? };
    let never_right = if never.1 { rows_where(stream, &ir.never_match.view(), true, None)? } else { empty()? };
    let keys = if plan.exact {
        let kl = gpujoin_primitives::gather(stream, &il.derived.view(), &ml.view(), 0)?;
        let kr = gpujoin_primitives::gather(stream, &ir.derived.view(), &mr.view(), 0)?;
        drop((il, ir));
        let mr = if right_rows {
            mr
        } else {
            drop(mr);
            empty()?
        };
        if plan.bits <= 32 {
            let (kl32, kr32) = (narrow(stream, &kl.view())?, narrow(stream, &kr.view())?);
            drop((kl, kr));
            ScalarKeys::U32(SideKeys { keys: kl32, rows: ml }, SideKeys { keys: kr32, rows: mr }, plan.bits)
        } else {
            ScalarKeys::U64(SideKeys { keys: kl, rows: ml }, SideKeys { keys: kr, rows: mr }, plan.bits)
        }
    } else {
        let (kl, kr, bits) = dense_ranks(stream, &il, &ml.view(), &ir, &mr.view())?;
        drop((il, ir));
        let mr = if right_rows {
            mr
        } else {
            drop(mr);
            empty()?
        };
        ScalarKeys::U32(SideKeys { keys: kl, rows: ml }, SideKeys { keys: kr, rows: mr }, bits)
    };
    Ok(StepZero { keys, never_left, never_right })
}
