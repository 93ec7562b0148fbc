//! The types a predicate is checked against: the table model's [`DataType`]s, each compared as
//! its kernel type ([`DataType::kernel_type`]: the theta kernels' physical type for it).

use gpujoin_device::{Error, Result};

use crate::table::{DataType, HostTable};

/// The kernel type of a column of `t` ([`DataType::kernel_type`]); `what` names the column in
/// the [`Error::Unsupported`] of a `Decimal128` one.
fn kernel_type_of(t: DataType, what: impl FnOnce() -> String) -> Result<DataType> {
    t.kernel_type().ok_or_else(|| Error::Unsupported { what: format!("a predicate over {}", what()), reason: format!("{t} columns are not compared by predicates here") })
}

/// The kernel types of a schema given by the caller (any table types; `Decimal128` is
/// [`Error::Unsupported`]): what [`crate::predicate::Predicate::check`] checks against.
pub(crate) fn kernel_schema(side: &str, schema: &[DataType]) -> Result<Vec<DataType>> {
    schema.iter().enumerate().map(|(i, &t)| kernel_type_of(t, || format!("{side} column {i}"))).collect()
}

/// The types a predicate over `table`'s columns is checked against ([`DataType::kernel_type`]
/// of each); a `Decimal128` column is an [`Error::Unsupported`].
///
/// ```
/// use gpujoin_join::predicate::schema_of;
/// use gpujoin_join::table::{DataType, HostColumn, HostTable};
/// let t = HostTable::new(vec![("a", HostColumn::from_values(vec![1i16])), ("s", HostColumn::utf8(["x"]))])?;
/// assert_eq!(schema_of(&t)?, vec![DataType::Int32, DataType::LargeUtf8]);
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
pub fn schema_of(table: &HostTable) -> Result<Vec<DataType>> {
    table.names().iter().zip(table.columns()).map(|(n, c)| kernel_type_of(c.data_type(), || format!("column {n}"))).collect()
}
