//! Host-side helpers for callers that take join outputs on the host.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{BinaryViewType, ByteViewType, StringViewType};
use arrow_array::builder::GenericByteViewBuilder;
use arrow_array::{Array, ArrayRef};
use arrow_schema::{ArrowError, DataType};

/// View arrays (`Utf8View`, `BinaryView`, all of one type) in one whose values are copied into
/// new buffers (blocks of up to 2 MiB, as `GenericByteViewBuilder` makes them); `None` for other
/// types (use `arrow_select::concat::concat`) or no arrays.
///
/// Arrow's `concat` keeps the inputs' buffers and lists every array's again; record batches of
/// DataFusion's operators (a repartition's `take`) each list all the buffers of the batch they
/// came from, so concatenating `n` of them lists `n * b` buffers, and every array taken from
/// the result carries that list. Copying the values costs the bytes once and lists only the
/// new blocks. Example: 1000 batches, each a view of 10 rows into one shared 8 MiB buffer, give
/// one array of 10000 rows over a single new block.
pub fn concat_views(parts: &[&dyn Array]) -> Result<Option<ArrayRef>, ArrowError> {
    let Some(t) = parts.first().map(|p| p.data_type()) else { return Ok(None) };
    if parts.iter().any(|p| p.data_type() != t) {
        return Ok(None);
    }
    match t {
        DataType::Utf8View => Ok(Some(copy_views::<StringViewType>(parts))),
        DataType::BinaryView => Ok(Some(copy_views::<BinaryViewType>(parts))),
        _ => Ok(None),
    }
}

fn copy_views<T: ByteViewType>(parts: &[&dyn Array]) -> ArrayRef {
    let rows = parts.iter().map(|a| a.len()).sum();
    let mut b = GenericByteViewBuilder::<T>::with_capacity(rows);
    for part in parts {
        for v in part.as_byte_view::<T>().iter() {
            b.append_option(v);
        }
    }
    Arc::new(b.finish())
}
