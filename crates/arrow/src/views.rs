//! Host-side helpers for callers that take join outputs on the host.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{BinaryViewType, ByteViewType, StringViewType};
use arrow_array::{Array, ArrayRef, GenericByteViewArray};
use arrow_buffer::{BooleanBufferBuilder, Buffer, NullBuffer, ScalarBuffer};
use arrow_data::{ByteView, MAX_INLINE_VIEW_LEN};
use arrow_schema::{ArrowError, DataType};

/// View arrays (`Utf8View`, `BinaryView`, all of one type) in one, their data buffers listed
/// once; `None` for other types (use `arrow_select::concat::concat`) or no arrays. The result
/// is validated as `GenericByteViewArray::try_new` validates.
///
/// Arrow's `concat` lists every array's buffers again, so batches taken from one concatenated
/// array all list its buffers, and a chain of joins concatenates lists of lists (`n` batches of
/// `b` buffers make a list of `n * b`, which each of the next join's batches carries). Here a
/// buffer met again (the same memory) keeps its first index. Example: two arrays whose views
/// point into buffers `[A, B]` and `[B, C]` give one array over `[A, B, C]`.
pub fn concat_views(parts: &[&dyn Array]) -> Result<Option<ArrayRef>, ArrowError> {
    let Some(t) = parts.first().map(|p| p.data_type()) else { return Ok(None) };
    if parts.iter().any(|p| p.data_type() != t) {
        return Ok(None);
    }
    match t {
        DataType::Utf8View => concat_views_of::<StringViewType>(parts).map(Some),
        DataType::BinaryView => concat_views_of::<BinaryViewType>(parts).map(Some),
        _ => Ok(None),
    }
}

fn concat_views_of<T: ByteViewType>(parts: &[&dyn Array]) -> Result<ArrayRef, ArrowError> {
    let rows = parts.iter().map(|a| a.len()).sum();
    let mut views: Vec<u128> = Vec::with_capacity(rows);
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut index: HashMap<(usize, usize), u32> = HashMap::new();
    let mut nulls = BooleanBufferBuilder::new(0);
    let any_nulls = parts.iter().any(|a| a.null_count() > 0);
    if any_nulls {
        nulls.reserve(rows);
    }
    for part in parts {
        let a = part.as_byte_view::<T>();
        let remap: Vec<u32> = a
            .data_buffers()
            .iter()
            .map(|b| {
                *index.entry((b.as_ptr() as usize, b.len())).or_insert_with(|| {
                    buffers.push(b.clone());
                    (buffers.len() - 1) as u32
                })
            })
            .collect();
        views.extend(a.views().iter().map(|&v| {
            if (v as u32) <= MAX_INLINE_VIEW_LEN {
                v
            } else {
                let mut view = ByteView::from(v);
                view.buffer_index = remap[view.buffer_index as usize];
                view.as_u128()
            }
        }));
        if any_nulls {
            match a.nulls() {
                Some(n) => nulls.append_buffer(n.inner()),
                None => nulls.append_n(a.len(), true),
            }
        }
    }
    let nulls = any_nulls.then(|| NullBuffer::new(nulls.finish()));
    Ok(Arc::new(GenericByteViewArray::<T>::try_new(ScalarBuffer::from(views), buffers, nulls)?))
}

