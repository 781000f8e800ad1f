//! The chunked gather's bindings, for `ndgather.dask` (private, tested):
//! the layout of a call from shapes, the chunks a block of indices reads,
//! and the gather from a grid of chunks. They only convert.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::args::{mode_arg, Int64, Op};
use super::arrays::{bytes_mut, data_array, index_array, new_output, view};
use super::casts::{cast_for, target_dtype};
use super::deliver::{fresh, Planned};
use crate::chunked::{
    chunked_layout, copy_and_digest, gather_chunks, touched_chunks, ChunkGrid, Whole,
};
use crate::{num_threads, Cast, GatherError};

fn whole(data_shape: Option<Vec<usize>>, index_offset: Option<Vec<usize>>) -> Option<Whole> {
    data_shape.map(|data_shape| Whole {
        data_shape,
        index_offset: index_offset.unwrap_or_default(),
    })
}

/// An empty array of `dtype`, through which the one-shot checks of a dtype
/// run (`data_array`, `index_array`) with their own messages.
fn empty<'py>(dtype: &Bound<'py, PyArrayDescr>) -> PyResult<Bound<'py, PyAny>> {
    Ok(new_output(dtype.py(), dtype, &[0], 0, 0)?.into_any())
}

/// ``(out_shape, batch_dims, indexed_axes)`` of a gather (``axis=None``: a
/// gather_nd) on data of this shape and dtype with indices of this shape
/// and dtype; raises what the one-shot function raises for them (index
/// values aside).
#[pyfunction(name = "_gather_layout")]
pub(crate) fn gather_layout_py(
    data_shape: Vec<usize>,
    dtype: &Bound<'_, PyArrayDescr>,
    indices_shape: Vec<usize>,
    indices_dtype: &Bound<'_, PyArrayDescr>,
    axis: Option<Int64>,
    batch_dims: Int64,
    mode: &str,
) -> PyResult<(Vec<usize>, usize, Vec<usize>)> {
    let op = Op::new(axis, batch_dims).operator()?;
    mode_arg(mode)?;
    data_array(&empty(dtype)?)?;
    let (_, ty) = index_array(&empty(indices_dtype)?)?;
    let layout = chunked_layout(&data_shape, dtype.itemsize(), &indices_shape, ty, op)?;
    Ok((layout.out_shape, layout.batch_dims, layout.indexed))
}

/// The grid coordinates (batch axes, then indexed axes) of the chunks the
/// indices read, sorted; validates them as the one-shot function would (on
/// an array of ``data_shape`` with the indices at ``index_offset``, if
/// given).
#[pyfunction(name = "_chunks_touched")]
#[pyo3(signature = (chunk_sizes, indices, axis, batch_dims, mode, data_shape = None, index_offset = None))]
pub(crate) fn chunks_touched_py(
    chunk_sizes: Vec<Vec<usize>>,
    indices: &Bound<'_, PyAny>,
    axis: Option<Int64>,
    batch_dims: Int64,
    mode: &str,
    data_shape: Option<Vec<usize>>,
    index_offset: Option<Vec<usize>>,
) -> PyResult<Vec<Vec<usize>>> {
    let op = Op::new(axis, batch_dims).operator()?;
    let mode = mode_arg(mode)?;
    let (indices, ty) = index_array(indices)?;
    let iview = view(&indices)?;
    let whole = whole(data_shape, index_offset);
    Ok(indices.py().detach(|| {
        touched_chunks(
            &chunk_sizes,
            iview,
            ty,
            op,
            mode,
            whole.as_ref(),
            num_threads(),
        )
    })?)
}

/// The result's dtype of a gather from `dtype` with `dtype=` `out_dtype`
/// (`dtype` itself when there is nothing to convert), and the conversion:
/// the one-shot call's rule and errors, data's dtype refused first
/// (`casts.rs`).
fn chunk_result_dtype<'py>(
    dtype: &Bound<'py, PyArrayDescr>,
    out_dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyArrayDescr>, Option<Cast>)> {
    let data = data_array(&empty(dtype)?)?;
    let target = out_dtype.filter(|d| !d.is_none());
    let target = target.map(|d| target_dtype(d, &data)).transpose()?;
    cast_for(target.as_ref(), dtype)
}

/// `ndgather.dask`'s `dtype=` checked when the graph is made: the result's
/// dtype, or the one-shot call's error (data's dtype refused first).
#[pyfunction(name = "_cast_dtype")]
pub(crate) fn cast_dtype_py<'py>(
    dtype: &Bound<'py, PyArrayDescr>,
    out_dtype: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArrayDescr>> {
    Ok(chunk_result_dtype(dtype, Some(out_dtype))?.0)
}

/// Gathers from the chunks ``{grid coordinates: array}`` of an array cut
/// by ``chunk_sizes`` (the slice axes one chunk each), of ``dtype``: the
/// one-shot function's result and errors on the whole. A chunk no index
/// reads need not be given; one that is read and missing is a ValueError.
#[pyfunction(name = "_gather_chunks")]
#[pyo3(signature = (chunks, chunk_sizes, dtype, indices, axis, batch_dims, mode, data_shape = None, index_offset = None, out_dtype = None))]
#[allow(clippy::too_many_arguments)] // the operator's inputs
pub(crate) fn gather_chunks_py<'py>(
    chunks: &Bound<'py, PyDict>,
    chunk_sizes: Vec<Vec<usize>>,
    dtype: &Bound<'py, PyArrayDescr>,
    indices: &Bound<'py, PyAny>,
    axis: Option<Int64>,
    batch_dims: Int64,
    mode: &str,
    data_shape: Option<Vec<usize>>,
    index_offset: Option<Vec<usize>>,
    out_dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let op = Op::new(axis, batch_dims).operator()?;
    let mode = mode_arg(mode)?;
    // Before any chunk is converted, as a one-shot call resolves `dtype=`
    // before it reads an array.
    let (rdtype, cast) = chunk_result_dtype(dtype, out_dtype)?;
    // Every chunk and the indices are converted before any is read: a
    // conversion (a key's `__index__`, a value's or the indices'
    // `__array__`) may run Python code, which may change the dict or the
    // arrays converted before it.
    let mut arrays = Vec::with_capacity(chunks.len());
    for item in chunks.items().iter() {
        let (coords, value): (Vec<usize>, Bound<'py, PyAny>) = item.extract()?;
        arrays.push((coords, data_array(&value)?));
    }
    let (indices, ty) = index_array(indices)?;
    let mut views = Vec::with_capacity(arrays.len());
    for (coords, a) in &arrays {
        let chunk = a.dtype();
        if !chunk.is_equiv_to(dtype) {
            return Err(GatherError::UnsupportedType(format!(
                "gather over chunks: a chunk has dtype {chunk} but the array has dtype {dtype}"
            ))
            .into());
        }
        views.push((coords.clone(), view(a)?));
    }
    let grid = ChunkGrid {
        chunk_sizes,
        chunks: views,
        itemsize: dtype.itemsize(),
    };
    let iview = view(&indices)?;
    let whole = whole(data_shape, index_offset);
    let shape: Vec<usize> = grid.chunk_sizes.iter().map(|s| s.iter().sum()).collect();
    let layout = chunked_layout(&shape, dtype.itemsize(), iview.shape, ty, op)?;
    let bytes = match cast {
        None => layout.out_bytes,
        Some(cast) => (layout.out_bytes / dtype.itemsize())
            .checked_mul(cast.to().size())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| GatherError::Overflow("the result is too large".into()))?,
    };
    let run = |buf: &mut [u8], _, threads| {
        gather_chunks(
            &grid,
            iview,
            ty,
            op,
            mode,
            whole.as_ref(),
            cast,
            buf,
            threads,
        )
    };
    // No `out=`: the result is new, and no chunk can share its memory.
    let result = Planned {
        shape: &layout.out_shape,
        bytes,
        work: bytes,
        reads: &[],
        // The chunks lie wherever their owners put them, each its own way.
        phase: 0,
    };
    fresh(&rdtype, &result, &run)
}

/// ``(copy, digest)`` of a C-contiguous array of a plain dtype: a new
/// C-contiguous copy (``None`` unless ``copy``) and a 64-bit digest of its
/// bytes, which depends on the bytes alone (see `snapshot.rs`).
#[pyfunction(name = "_snapshot")]
pub(crate) fn snapshot_py<'py>(
    a: &Bound<'py, PyUntypedArray>,
    copy: bool,
) -> PyResult<(Option<Bound<'py, PyUntypedArray>>, u64)> {
    let py = a.py();
    if !a.is_c_contiguous() || a.dtype().has_object() {
        return Err(GatherError::InvalidArgument(
            "_snapshot takes a C-contiguous array of a plain dtype".into(),
        )
        .into());
    }
    let src = view(a)?.bytes;
    let out = copy
        .then(|| new_output(py, &a.dtype(), a.shape(), src.len(), 0))
        .transpose()?;
    // SAFETY: the array was just made; nothing else refers to its buffer,
    // which cannot overlap `a`'s.
    let dst = out.as_ref().map(|out| unsafe { bytes_mut(out) });
    let digest = py.detach(|| copy_and_digest(src, dst, num_threads()));
    Ok((out, digest))
}
