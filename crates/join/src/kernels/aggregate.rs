//! Safe wrappers over the equi-join aggregate kernels (`cuda/join/equi_agg.cu`): the match
//! counts of sorted rows scattered back to row order, and one column's COUNT/SUM/MIN/MAX with
//! each row weighted by how many output rows it is in.

use gpujoin_cub_sys::result::{launch, read_scalar};
use gpujoin_device::{check_same_len, DeviceBuffer, DeviceView, DeviceViewMut, Error, Result, Stream};

use crate::kernels::sys::join as ffi;
use crate::kernels::TypedValues;
use crate::theta::{Agg, AggValue};

/// Mirror of one accumulator of the C ABIs (`gj_j_agg` and the theta joins' `gj_t_acc`: one
/// layout, `cuda/join/agg_acc.cuh`).
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct AccHost {
    ilo: u64,
    ihi: i64,
    f: f64,
    count: u64,
    has: u32,
    overflow: u32,
}

const _: () = assert!(std::mem::size_of::<AccHost>() == std::mem::size_of::<ffi::gj_j_agg>());
const _: () = assert!(std::mem::size_of::<AccHost>() == std::mem::size_of::<crate::kernels::sys::theta::gj_t_acc>());

impl AccHost {
    /// The aggregate's value (`float`: of a float column). Example: `has` 0 -> `AggValue::None`
    /// for SUM/MIN/MAX; COUNT is `count` always.
    ///
    /// Errors: [`Error::TooLarge`] for an integer SUM past `i128` (the overflow flag).
    pub(crate) fn value(&self, agg: Agg, float: bool) -> Result<AggValue> {
        if self.overflow != 0 && agg == Agg::Sum {
            // A sum of 128 or more signed bits (i128 holds 127 and the sign).
            return Err(Error::too_large("bits of the integer SUM of the join's values", 128, 127));
        }
        Ok(match agg {
            Agg::Count => AggValue::Int(self.count as i128),
            _ if self.has == 0 => AggValue::None,
            _ if float => AggValue::Float(self.f),
            _ => AggValue::Int(((self.ihi as i128) << 64) | self.ilo as i128),
        })
    }
}

/// `counts[rows[i]] = upper[i] - lower[i]`: the match counts of sorted rows (their lower and
/// upper bounds in the other side's sorted keys) in row order; the entries no row id names are
/// left as they are. Example: lower `[0, 2]`, upper `[2, 3]`, rows `[1, 0]` -> counts `[1, 2]`.
pub(crate) fn scatter_counts(stream: &Stream, lower: &DeviceView<'_, u32>, upper: &DeviceView<'_, u32>, rows: &DeviceView<'_, u32>, counts: &mut DeviceViewMut<'_, u32>) -> Result<()> {
    let n = lower.len();
    check_same_len("lower bounds", n, "upper bounds", upper.len())?;
    check_same_len("lower bounds", n, "row ids", rows.len())?;
    if n > counts.len() {
        return Err(Error::invalid(format!("{n} sorted rows scattered into {} counts", counts.len())));
    }
    let c = counts.as_mut_ptr();
    // SAFETY: n entries each; the row ids are distinct rows of the side, below counts.len()
    // (they come from the sort of its row ids).
    launch(stream, "aggregate: scatter counts", || unsafe { ffi::gj_j_agg_scatter_counts(lower.as_ptr(), upper.as_ptr(), rows.as_ptr(), n as i64, c, stream.raw()) })
}

/// How many output rows a row of the aggregated side is in, from its match count `c`:
/// `c > 0 ? matched : unmatched`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Multiplicity {
    pub matched: Matched,
    /// 1 where the join keeps the row once without a partner (outer joins' unmatched rows,
    /// anti joins' rows), else 0.
    pub unmatched: bool,
}

impl Multiplicity {
    /// Every row once, whatever its count (with no counts: each row of a plain column).
    pub const ONCE: Multiplicity = Multiplicity { matched: Matched::Once, unmatched: true };
}

/// What a matched row (count `c > 0`) counts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Matched {
    /// Not in the output (anti joins).
    Zero,
    /// Once (semi joins).
    Once,
    /// `c` times (inner and outer joins: one output row per partner).
    Count,
}

/// The aggregated column of `rows` rows: its values (`None` for COUNT, which reads only the
/// validity) and its validity words (bit `i` of word `i / 32`; `None`: every row valid).
pub(crate) struct AggColumn<'a> {
    pub values: Option<TypedValues<'a>>,
    pub validity: Option<DeviceView<'a, u32>>,
    pub rows: usize,
}

/// The kernel's type code, pointer and length of an aggregated column's values.
fn parts(v: &TypedValues<'_>) -> (*const std::ffi::c_void, ffi::gj_j_agg_type, usize) {
    use TypedValues::*;
    match v {
        I32(v) => (v.as_ptr() as *const _, ffi::gj_j_agg_type_GJ_J_AGG_I32, v.len()),
        U32(v) => (v.as_ptr() as *const _, ffi::gj_j_agg_type_GJ_J_AGG_U32, v.len()),
        I64(v) => (v.as_ptr() as *const _, ffi::gj_j_agg_type_GJ_J_AGG_I64, v.len()),
        U64(v) => (v.as_ptr() as *const _, ffi::gj_j_agg_type_GJ_J_AGG_U64, v.len()),
        F32(v) => (v.as_ptr() as *const _, ffi::gj_j_agg_type_GJ_J_AGG_F32, v.len()),
        F64(v) => (v.as_ptr() as *const _, ffi::gj_j_agg_type_GJ_J_AGG_F64, v.len()),
    }
}

/// `agg` of `column` over its rows, row `i` taken `m` times by its match count `counts[i]` and
/// `mult` (NULL values skipped): COUNT is the sum of `m` over the valid rows; SUM the sum of
/// `value * m` (integers exactly in `i128`: an overflow is an [`Error::TooLarge`]; floats in
/// `f64`, in an order of the device's choosing); MIN/MAX over the values with `m > 0` (floats:
/// NaN once any value is NaN). SUM/MIN/MAX over no value is [`AggValue::None`]. One reduction on
/// the device and one read of its result.
///
/// Example: values `[5, 7, NULL]`, counts `[2, 0, 1]`, `Count` times matched and unmatched rows
/// once: SUM = 5 * 2 + 7 = 17, COUNT = 3.
///
/// Without `counts` every row's count is 0, so `mult.unmatched` alone decides: with
/// [`Multiplicity::ONCE`] each row counts once (the aggregate of a plain column).
pub(crate) fn aggregate_column(stream: &Stream, column: &AggColumn<'_>, counts: Option<&DeviceView<'_, u32>>, mult: Multiplicity, agg: Agg) -> Result<AggValue> {
    let n = column.rows;
    let (values, ty, len) = column.values.as_ref().map_or((std::ptr::null(), ffi::gj_j_agg_type_GJ_J_AGG_I32, n), parts);
    check_same_len("aggregated values", len, "rows", n)?;
    if let Some(c) = counts {
        check_same_len("aggregated rows", n, "match counts", c.len())?;
    }
    // (An empty column's values may be a null pointer: ask for the values, not the pointer.)
    if column.values.is_none() && agg != Agg::Count {
        return Err(Error::invalid(format!("{agg:?} needs the column's values")));
    }
    // No rows: no value to aggregate, and no launch (the kernel takes no null values pointer).
    if n == 0 {
        return Ok(if agg == Agg::Count { AggValue::Int(0) } else { AggValue::None });
    }
    if let Some(v) = &column.validity {
        if v.len() < n.div_ceil(32) {
            return Err(Error::invalid(format!("{} validity words for {n} rows", v.len())));
        }
    }
    let matched = match mult.matched {
        Matched::Zero => 0,
        Matched::Once => 1,
        Matched::Count => 2,
    };
    let kind = match agg {
        Agg::Count => ffi::gj_j_agg_kind_GJ_J_AGG_COUNT,
        Agg::Sum => ffi::gj_j_agg_kind_GJ_J_AGG_SUM,
        Agg::Min => ffi::gj_j_agg_kind_GJ_J_AGG_MIN,
        Agg::Max => ffi::gj_j_agg_kind_GJ_J_AGG_MAX,
    };
    let mut partials = stream.alloc::<AccHost>(ffi::GJ_J_AGG_MAX_BLOCKS as usize)?;
    let mut out: DeviceBuffer<AccHost> = stream.alloc(1)?;
    let (p, o) = (partials.view_mut().as_mut_ptr() as *mut ffi::gj_j_agg, out.view_mut().as_mut_ptr() as *mut ffi::gj_j_agg);
    let valid = column.validity.as_ref().map_or(std::ptr::null(), |v| v.as_ptr());
    // SAFETY: values and counts (when given; else null) hold n entries, validity ceil(n / 32) words (checked above);
    // partials GJ_J_AGG_MAX_BLOCKS entries, out one.
    let counts = counts.map_or(std::ptr::null(), |c| c.as_ptr());
    launch(stream, "aggregate column", || unsafe { ffi::gj_j_agg_column(values, ty as i32, valid, counts, n as i64, matched, mult.unmatched as i32, kind as i32, p, o, stream.raw()) })?;
    drop(partials);
    read_scalar(stream, &out)?.value(agg, column.values.as_ref().is_some_and(|v| matches!(v, TypedValues::F32(_) | TypedValues::F64(_))))
}
