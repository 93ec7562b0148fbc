//! The host relations a theta join reads: [`DataType`], [`ColumnData`] and [`Relation`]
//! (columns of one side, checked for layout and length). Not predicate concerns as such; they
//! live here because predicates are type-checked against their schemas and evaluated on them.

use std::fmt;

use gpujoin_device::{Error, Result};

use super::Scalar;
use crate::types::RowId;

/// The element type of a theta-join column.
///
/// ```
/// use gpujoin_join::predicate::DataType;
/// assert!(DataType::F32.is_numeric() && !DataType::Utf8.is_numeric());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    /// Variable-length UTF-8 strings (Arrow large-string layout).
    Utf8,
}

impl DataType {
    /// Integers and floats (everything but [`DataType::Utf8`]).
    pub fn is_numeric(self) -> bool {
        self != DataType::Utf8
    }
    /// `f32` and `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, DataType::F32 | DataType::F64)
    }
    /// `i32`, `i64`, `u32` and `u64`.
    pub fn is_integer(self) -> bool {
        self.is_numeric() && !self.is_float()
    }
    /// Lower-case name used in error messages (`"i32"`, ..., `"utf8"`).
    pub fn name(self) -> &'static str {
        match self {
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::U32 => "u32",
            DataType::U64 => "u64",
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::Utf8 => "utf8",
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One host column of a [`Relation`].
///
/// `Utf8` uses Arrow's large-string layout: string `i` is `bytes[offsets[i]..offsets[i + 1]]`,
/// so there are `offsets.len() - 1` rows; [`ColumnData::validate`] checks the layout.
///
/// ```
/// use gpujoin_join::predicate::ColumnData;
/// let c = ColumnData::utf8(["ab", "", "é"]);
/// assert_eq!(c, ColumnData::Utf8 { offsets: vec![0, 2, 2, 4], bytes: b"ab\xc3\xa9".to_vec() });
/// assert_eq!(c.len(), 3);
/// assert!(c.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    I32(Vec<i32>),
    I64(Vec<i64>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Utf8 { offsets: Vec<i64>, bytes: Vec<u8> },
}

impl ColumnData {
    /// A `Utf8` column from strings.
    ///
    /// ```
    /// use gpujoin_join::predicate::ColumnData;
    /// assert_eq!(ColumnData::utf8(Vec::<String>::new()).len(), 0);
    /// ```
    pub fn utf8<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> ColumnData {
        let mut offsets = vec![0i64];
        let mut bytes = Vec::new();
        for s in values {
            bytes.extend_from_slice(s.as_ref().as_bytes());
            offsets.push(bytes.len() as i64);
        }
        ColumnData::Utf8 { offsets, bytes }
    }

    /// Number of rows (for `Utf8`, `offsets.len() - 1`, or 0 without offsets).
    pub fn len(&self) -> usize {
        match self {
            ColumnData::I32(v) => v.len(),
            ColumnData::I64(v) => v.len(),
            ColumnData::U32(v) => v.len(),
            ColumnData::U64(v) => v.len(),
            ColumnData::F32(v) => v.len(),
            ColumnData::F64(v) => v.len(),
            ColumnData::Utf8 { offsets, .. } => offsets.len().saturating_sub(1),
        }
    }

    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type.
    pub fn data_type(&self) -> DataType {
        match self {
            ColumnData::I32(_) => DataType::I32,
            ColumnData::I64(_) => DataType::I64,
            ColumnData::U32(_) => DataType::U32,
            ColumnData::U64(_) => DataType::U64,
            ColumnData::F32(_) => DataType::F32,
            ColumnData::F64(_) => DataType::F64,
            ColumnData::Utf8 { .. } => DataType::Utf8,
        }
    }

    /// Checks the `Utf8` layout: at least one offset, `offsets[0] == 0`, offsets non-decreasing,
    /// the last offset equal to `bytes.len()`, and every string valid UTF-8. Numeric columns are
    /// always valid. Errors are [`Error::InvalidArgument`].
    ///
    /// ```
    /// use gpujoin_join::predicate::ColumnData;
    /// let bad = ColumnData::Utf8 { offsets: vec![0, 1], bytes: vec![0xc3, 0xa9] };
    /// assert!(bad.validate().is_err()); // splits "é" and leaves a byte over
    /// ```
    pub fn validate(&self) -> Result<()> {
        let ColumnData::Utf8 { offsets, bytes } = self else { return Ok(()) };
        let Some(&first) = offsets.first() else {
            return Err(Error::invalid("utf8 column has no offsets (an empty column has offsets [0])"));
        };
        if first != 0 {
            return Err(Error::invalid(format!("utf8 column offsets start at {first}, not 0")));
        }
        for (i, w) in offsets.windows(2).enumerate() {
            if w[1] < w[0] {
                return Err(Error::invalid(format!(
                    "utf8 column offsets decrease at row {i}: {} then {}",
                    w[0], w[1]
                )));
            }
        }
        let last = *offsets.last().unwrap_or(&0);
        if u64::try_from(last).ok() != Some(bytes.len() as u64) {
            return Err(Error::invalid(format!(
                "utf8 column offsets end at {last} but there are {} bytes",
                bytes.len()
            )));
        }
        for (i, w) in offsets.windows(2).enumerate() {
            if let Err(e) = std::str::from_utf8(&bytes[w[0] as usize..w[1] as usize]) {
                return Err(Error::invalid(format!("utf8 column row {i} is not valid UTF-8: {e}")));
            }
        }
        Ok(())
    }

    /// The bytes of string `row` of a valid `Utf8` column; `None` for other columns or rows out of
    /// range.
    pub fn str_bytes(&self, row: usize) -> Option<&[u8]> {
        let ColumnData::Utf8 { offsets, bytes } = self else { return None };
        let (a, b) = (*offsets.get(row)?, *offsets.get(row + 1)?);
        bytes.get(usize::try_from(a).ok()?..usize::try_from(b).ok()?)
    }
}

/// The columns of one side of a theta join; every column has the same number of rows.
///
/// A relation without columns has no rows.
///
/// ```
/// use gpujoin_join::predicate::{ColumnData, DataType, Relation};
/// let r = Relation::new(vec![ColumnData::I64(vec![1, 2]), ColumnData::utf8(["a", "b"])])?;
/// assert_eq!(r.rows(), 2);
/// assert_eq!(r.schema(), vec![DataType::I64, DataType::Utf8]);
/// assert!(Relation::new(vec![ColumnData::I64(vec![1]), ColumnData::F32(vec![])]).is_err());
/// # Ok::<(), gpujoin_device::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Relation {
    pub columns: Vec<ColumnData>,
}

impl Relation {
    /// A relation from columns, validated ([`Relation::validate`]).
    pub fn new(columns: Vec<ColumnData>) -> Result<Relation> {
        let r = Relation { columns };
        r.validate()?;
        Ok(r)
    }

    /// A relation of the given column types from rows of scalars: `rows[i][c]` is row `i`'s
    /// value in column `c`. A value of another type, or a row of another width, is an
    /// [`Error::InvalidArgument`].
    ///
    /// ```
    /// use gpujoin_join::predicate::{ColumnData, DataType, Relation, Scalar};
    /// let r = Relation::from_rows(&[DataType::I32, DataType::Utf8], &[vec![Scalar::I32(7), Scalar::from("x")]])?;
    /// assert_eq!(r.columns, vec![ColumnData::I32(vec![7]), ColumnData::utf8(["x"])]);
    /// assert_eq!(Relation::from_rows(&[DataType::F64], &[])?.columns, vec![ColumnData::F64(vec![])]);
    /// # Ok::<(), gpujoin_device::Error>(())
    /// ```
    pub fn from_rows(schema: &[DataType], rows: &[Vec<Scalar>]) -> Result<Relation> {
        for (i, row) in rows.iter().enumerate() {
            if row.len() != schema.len() {
                return Err(Error::invalid(format!("row {i} has {} values for {} columns", row.len(), schema.len())));
            }
        }
        let mut columns = Vec::with_capacity(schema.len());
        for (c, &t) in schema.iter().enumerate() {
            let mismatch = |i: usize, v: &Scalar| Error::invalid(format!("row {i}, column {c}: a {} value in a {t} column", v.data_type()));
            macro_rules! collect {
                ($v:ident) => {
                    ColumnData::$v(rows.iter().enumerate().map(|(i, r)| if let Scalar::$v(x) = &r[c] { Ok(*x) } else { Err(mismatch(i, &r[c])) }).collect::<Result<_>>()?)
                };
            }
            columns.push(match t {
                DataType::I32 => collect!(I32),
                DataType::I64 => collect!(I64),
                DataType::U32 => collect!(U32),
                DataType::U64 => collect!(U64),
                DataType::F32 => collect!(F32),
                DataType::F64 => collect!(F64),
                DataType::Utf8 => {
                    let strs = rows.iter().enumerate().map(|(i, r)| if let Scalar::Utf8(x) = &r[c] { Ok(x.as_str()) } else { Err(mismatch(i, &r[c])) }).collect::<Result<Vec<_>>>()?;
                    ColumnData::utf8(strs)
                }
            });
        }
        Relation::new(columns)
    }

    /// Number of rows (that of the first column; 0 without columns).
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, ColumnData::len)
    }

    /// The column types.
    pub fn schema(&self) -> Vec<DataType> {
        self.columns.iter().map(ColumnData::data_type).collect()
    }

    /// Checks every column ([`ColumnData::validate`]), that all have the same row count, and that
    /// the rows fit in [`RowId`] ([`Error::TooLarge`] otherwise).
    pub fn validate(&self) -> Result<()> {
        let n = self.rows();
        for (c, col) in self.columns.iter().enumerate() {
            col.validate().map_err(|e| Error::invalid(format!("column {c}: {e}")))?;
            gpujoin_device::check_same_len("column 0", n, &format!("column {c}"), col.len())?;
        }
        if n as u64 > RowId::MAX_ROWS {
            return Err(Error::too_large("relation rows", n as u64, RowId::MAX_ROWS));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_validation() {
        let ok = |o: Vec<i64>, b: &[u8]| ColumnData::Utf8 { offsets: o, bytes: b.to_vec() }.validate();
        assert!(ok(vec![0], b"").is_ok());
        assert!(ok(vec![], b"").is_err());
        assert!(ok(vec![1, 1], b"a").is_err());
        assert!(ok(vec![0, 2, 1], b"ab").is_err());
        assert!(ok(vec![0, 1], b"ab").is_err());
        assert!(ok(vec![0, 3], b"ab").is_err());
        assert!(ok(vec![0, -1, 0], b"").is_err());
        assert!(ok(vec![0, 2], &[0xff, 0xfe]).is_err());
        assert!(ok(vec![0, 1, 2], "é".as_bytes()).is_err()); // split inside a character
        assert!(ok(vec![0, 2, 3], "éz".as_bytes()).is_ok());
        assert!(Relation::new(vec![ColumnData::Utf8 { offsets: vec![0, 5], bytes: vec![] }]).is_err());
        assert!(Relation::new(vec![ColumnData::utf8(["a"]), ColumnData::I32(vec![1, 2])]).is_err());
        assert_eq!(Relation::new(vec![]).unwrap().rows(), 0);
    }
}
