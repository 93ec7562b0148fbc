//! The aggregates of theta joins ([`Agg`]) and their results ([`AggValue`]): the semantics every
//! path implements (and the CPU reference `gpujoin_testkit::table_reference` checks them against, through the front door).

/// An aggregate over the matching pairs of a theta join ([`theta_aggregate`](super::theta_aggregate),
/// [`theta_aggregate_per_left_row`](super::theta_aggregate_per_left_row), and the same
/// functions of [`sorted`](super::sorted) and [`nested_loop`](super::nested_loop)).
///
/// * `Count`: the number of matching pairs (a column, if given, is only checked to exist);
/// * `Sum`: integers exactly (as `i128`), floats in `f64` in canonical pair order (IEEE: a NaN
///   or `inf + -inf` makes it NaN); f32 values are widened exactly to f64 first;
/// * `Min`/`Max`: by value; NaNs are ignored unless every value is NaN (then NaN); when `-0.0`
///   and `0.0` tie, the first in canonical pair order is kept.
///
/// ```
/// use gpujoin_join::theta::Agg;
/// assert_ne!(Agg::Sum, Agg::Count);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agg {
    Count,
    Sum,
    Min,
    Max,
}

/// The result of an [`Agg`]: `Int` for COUNT and for SUM/MIN/MAX of an integer column, `Float`
/// for SUM/MIN/MAX of a float column, `None` for SUM/MIN/MAX over no pairs (SQL NULL).
///
/// ```
/// use gpujoin_join::theta::AggValue;
/// assert_eq!(AggValue::Int(3).as_f64(), Some(3.0));
/// assert_eq!(AggValue::None.as_f64(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AggValue {
    Int(i128),
    Float(f64),
    None,
}

impl AggValue {
    /// The value as `f64` (rounded for large integers); `None` for [`AggValue::None`].
    pub fn as_f64(self) -> Option<f64> {
        match self {
            AggValue::Int(v) => Some(v as f64),
            AggValue::Float(v) => Some(v),
            AggValue::None => None,
        }
    }
}
