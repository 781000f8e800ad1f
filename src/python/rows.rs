//! The service path's bindings: a short list of `int32`/`int64` ids (or
//! GatherND tuples of them) taking whole rows of a C-contiguous table (see
//! the core's `rows`), tried before the general path and giving way to it
//! at the first thing it does not take. It raises nothing of its own:
//! every error, in its usual order and words, comes from the general path.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::args::{Int64, Op};
use super::arrays::{check_out, data_ptr, first_bytes_mut, new_output, overlaps};
use super::casts::{result_dtype, Target};
use super::detach::run_detached;
use super::mapped::in_mapping;
use crate::machine::LINE;
use crate::plan::prefetches;
use crate::rows::{max_row_bytes, take_tuples_split_in, RowId, RowTable, MAX_ROW_IDS};
use crate::split::{row_path_threads, RANDOM_ROW_COST};
use crate::{num_threads, Cast};

/// The result of `op` on `data` and `indices` (with `mode="raise"`, or
/// `mode="clip"` if `clip`; negatives counting from the end), converted to `target` if given (the
/// resolved `dtype=`), if the row path takes it, else `None` with `out`
/// untouched.
pub(crate) fn try_take_rows<'py>(
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    op: &Op,
    out: Option<&Bound<'py, PyAny>>,
    target: Option<&Target<'_, 'py>>,
    clip: bool,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let (Ok(table), Ok(ids)) = (
        data.cast::<PyUntypedArray>(),
        indices.cast::<PyUntypedArray>(),
    ) else {
        return Ok(None);
    };
    // The result's dtype and the conversion into it, chosen before any
    // shape is read (`target` came resolved, and no Python code of the
    // caller's runs from here on); a cast the general path would refuse is
    // left for it to refuse.
    let owned;
    let (data_dtype, cast) = match target.and_then(|t| t.known_for(table)) {
        Some(hit) => hit,
        None => {
            owned = table.dtype();
            let Ok(cast) = target.map_or(Ok(None), |t| t.cast_from(&owned)) else {
                return Ok(None);
            };
            // Choosing a cast from a dtype of none of NumPy's kinds looks up
            // its type's name, the one step that could run Python code (a
            // metaclass's property): the row sizes below are of the dtype
            // the cast was chosen for, or none.
            if target.is_some() && owned.kind() == b'V' && !table.dtype().is(&owned) {
                return Ok(None);
            }
            (&owned, cast)
        }
    };
    // A table in a file mapping takes the general path, which brings its
    // pages in first (`mapped`).
    if data_dtype.has_object() || in_mapping(table) {
        return Ok(None);
    }
    let dtype = result_dtype(target, cast, data_dtype);
    let (ids_shape, table_shape) = (ids.shape(), table.shape());
    // How many leading axes of the table are batch axes (GatherND's
    // `batch_dims`, the same on the ids) and how many past them an entry
    // of `ids` indexes (a GatherND tuple's length), and the axes of the
    // result the ids make.
    let (b, k, lead) = match (&op.axis, &op.batch_dims) {
        (Some(Int64::Fits(0)), Int64::Fits(0)) => (0, 1, ids_shape),
        (None, &Int64::Fits(b)) => match (usize::try_from(b), ids_shape.split_last()) {
            (Ok(b), Some((&k, lead))) if k >= 1 && lead.get(..b) == table_shape.get(..b) => {
                (b, k, lead)
            }
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    if b.saturating_add(k) > table_shape.len() {
        return Ok(None);
    }
    let (batch_shape, rest) = table_shape.split_at(b);
    let (dims, row_shape) = rest.split_at(k);
    // Element counts from the shapes read above (each array's own `len`
    // and `raw_bytes` would read its shape and dtype again, a row-path
    // call's largest cost after NumPy's: callgrind, docs/performance.md).
    let n_ids: usize = ids_shape.iter().product();
    let table_items: usize = table_shape.iter().product();
    let count = n_ids / k;
    let Some(row_bytes) = row_shape
        .iter()
        .try_fold(data_dtype.itemsize(), |acc, &n| acc.checked_mul(n))
    else {
        return Ok(None);
    };
    let out_row = cast.map_or(row_bytes, |c| row_bytes / c.from().size() * c.to().size());
    // The result's shape goes on the stack (a `SmallVec` built from the two
    // slices cost a one-row call 100-150 instructions, by callgrind); a
    // larger rank (NumPy allows 64) is left for the general path.
    let rank = lead.len() + row_shape.len();
    let Some(id_size) = plain_ids(ids) else {
        return Ok(None);
    };
    let table_len = table_items * data_dtype.itemsize();
    if rank > MAX_RANK
        || table_items == 0
        || count == 0
        || count > MAX_ROW_IDS
        || count.saturating_mul(row_bytes) > max_row_bytes(row_bytes, cast.is_some(), table_len)
        || !table.is_c_contiguous()
    {
        return Ok(None);
    }
    // Last: a call that does not split may wake a helper for the next.
    let lines = count.saturating_mul(row_bytes.div_ceil(LINE));
    let cost = count.saturating_mul(out_row.saturating_add(RANDOM_ROW_COST));
    let Some(threads) = row_path_threads(num_threads(), lines, cost, prefetches(table_len)) else {
        return Ok(None);
    };
    let mut axes = [0usize; MAX_RANK];
    axes[..lead.len()].copy_from_slice(lead);
    axes[lead.len()..rank].copy_from_slice(row_shape);
    let shape = &axes[..rank];
    // SAFETY: a C-contiguous array's `len * itemsize` bytes lie one after
    // the other from its data pointer, and the array is alive for this call.
    let table_bytes = unsafe { std::slice::from_raw_parts(data_ptr(table), table_len) };
    let rows = RowTable {
        bytes: table_bytes,
        batches: batch_shape.iter().product(),
        dims,
        row_bytes,
    };
    let py = data.py();
    let ids_span = (data_ptr(ids).cast_const(), n_ids * id_size);
    // A new array, or `out` itself (as `check_out` returns it).
    let bytes = count * out_row;
    let result = match out {
        // At most 128 KiB, copied through the cache: on a line.
        None => new_output(py, dtype, shape, bytes, 0)?,
        Some(out) => match check_out(out, dtype, shape) {
            Ok(out) if !overlaps(&out, [(table_bytes.as_ptr(), table_len), ids_span]) => out,
            _ => return Ok(None),
        },
    };
    // SAFETY: the result is a C-contiguous array of `shape` in `dtype`
    // (new, or as `check_out` found it): `bytes` bytes. A new array's
    // buffer is referred to by nothing else; `out` is writeable (check_out)
    // and shares no byte with `table` or `ids`, the only other memory read
    // here.
    let buf = unsafe { first_bytes_mut(&result, bytes) };
    let taken = if id_size == 8 {
        take::<i64>(py, rows, ids_span, buf, cast, clip, threads)
    } else {
        take::<i32>(py, rows, ids_span, buf, cast, clip, threads)
    };
    Ok(taken.then(|| result.into_any()))
}

/// The most axes of a result the row path makes: its shape is zeroed on
/// the stack every call (at NumPy 2's 64 axes, a `memset` of 512 bytes,
/// about 50 instructions of a one-row call's 2,100, by callgrind).
const MAX_RANK: usize = 8;

/// The size of an element of `ids` (4 or 8) if it is a native, aligned,
/// C-contiguous `int32` or `int64` array, readable as a Rust slice of its
/// type; else `None`.
fn plain_ids(ids: &Bound<'_, PyUntypedArray>) -> Option<usize> {
    let dtype = ids.dtype();
    let size = dtype.itemsize();
    (ids.is_c_contiguous()
        && ids.is_aligned()
        && dtype.kind() == b'i'
        && matches!(size, 4 | 8)
        && dtype.is_native_byteorder() != Some(false))
    .then_some(size)
}

/// The rows of `table`, by ids of type `I` (tuples of `table.dims.len()`),
/// converted by `cast` if given, clamped into their axes if `clip`; whether
/// the row path took them. A result
/// of [`DETACH_MIN_BYTES`](super::detach::DETACH_MIN_BYTES) or more
/// is copied with the GIL released, as the general path's are (the ids are
/// read and checked before, with it held).
fn take<I: RowId>(
    py: Python<'_>,
    table: RowTable<'_>,
    (ptr, len): (*const u8, usize),
    out: &mut [u8],
    cast: Option<Cast>,
    clip: bool,
    threads: usize,
) -> bool {
    // SAFETY: `ptr` and `len` are the data pointer and byte length of the
    // ids, which `plain_ids` checked to be an aligned, C-contiguous array
    // of `I` (kind 'i', this itemsize, native order), alive for this call.
    // The GIL is held while they are read (`take_tuples_in` reads them
    // before `run`), and `out` shares no byte with them.
    let ids = unsafe { std::slice::from_raw_parts(ptr.cast::<I>(), len / size_of::<I>()) };
    let bytes = out.len();
    take_tuples_split_in(table, ids, out, cast, clip, threads, |copy| {
        run_detached(py, bytes, copy)
    })
    .is_ok()
}
