//! Where a gather's result goes, for every binding that gathers by a plan
//! (the one-shot gateway, prepared calls): a new (pooled) array, or `out=`
//! checked and filled in place or, when it shares memory with what the
//! gather reads or holds objects, filled through NumPy's copy. The chunked
//! gather and GatherBlockQuantized, which take no `out=`, make their new
//! array through [`fresh`].

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::arrays::{bytes_mut, check_out, new_output, overlaps};
use super::detach::run_detached;
use super::objects::{assign, own_copied_references};
use crate::{num_threads, ArrayView, GatherError, Validation};

/// What a gather moves: into a buffer of exactly the result's bytes, with
/// the validation and thread count given.
pub(crate) type Run<'r> =
    dyn Fn(&mut [u8], Validation, usize) -> Result<(), GatherError> + Sync + 'r;

/// A planned gather as [`deliver`] sees it.
pub(crate) struct Planned<'a> {
    /// The result's shape and size in bytes.
    pub(crate) shape: &'a [usize],
    pub(crate) bytes: usize,
    /// Bytes the gather moves, which decide whether the GIL is released.
    pub(crate) work: usize,
    /// The arrays it reads: an `out` sharing memory with them is filled
    /// through a fresh result.
    pub(crate) reads: &'a [&'a ArrayView<'a>],
    /// Where in a line a new result starts (`arrays::line_phase` of the
    /// array gathered from).
    pub(crate) phase: usize,
}

/// Runs `run` into a new array of `dtype`, or into `out` (checked against
/// `dtype` and the shape first), and returns that array.
pub(crate) fn deliver<'py>(
    dtype: &Bound<'py, PyArrayDescr>,
    result: &Planned<'_>,
    out: Option<&Bound<'py, PyAny>>,
    run: &Run<'_>,
) -> PyResult<Bound<'py, PyAny>> {
    let Some(out) = out else {
        return Ok(fresh(dtype, result, run)?.into_any());
    };
    let target = check_out(out, dtype, result.shape)?;
    let reads = result
        .reads
        .iter()
        .map(|v| (v.bytes.as_ptr(), v.bytes.len()));
    if dtype.has_object() || overlaps(&target, reads) {
        // Gather aside, then assign: correct for any overlap, and NumPy
        // swaps the object references `out` held.
        let fresh = fresh(dtype, result, run)?;
        copy_into(&target, &fresh)?;
    } else {
        // SAFETY: `target` is C-contiguous and writeable (check_out), and
        // shares no memory with the arrays the gather reads, the only
        // other arrays borrowed here.
        let buf = unsafe { bytes_mut(&target) };
        run_detached(out.py(), result.work, || {
            run(buf, Validation::BeforeWriting, num_threads())
        })?;
    }
    Ok(out.clone())
}

/// Gathers into a new array of `dtype` and the result's shape, placed in
/// a line as it says.
pub(crate) fn fresh<'py>(
    dtype: &Bound<'py, PyArrayDescr>,
    result: &Planned<'_>,
    run: &Run<'_>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = dtype.py();
    let array = new_output(py, dtype, result.shape, result.bytes, result.phase)?;
    // SAFETY: the array was just made; nothing else refers to its buffer.
    let buf = unsafe { bytes_mut(&array) };
    if dtype.has_object() {
        // Copy with the GIL held, on this thread: no other thread may drop
        // an object of `data` between our copy of its pointer and our
        // taking a reference to it.
        if let Err(e) = run(buf, Validation::WhileCopying, 1) {
            // Leave only null slots behind, so dropping the array releases
            // no reference it never took.
            buf.fill(0);
            return Err(e.into());
        }
        own_copied_references(&array)?;
    } else {
        run_detached(py, result.work, || {
            run(buf, Validation::WhileCopying, num_threads())
        })?;
    }
    Ok(array)
}

/// Copies the fresh result `src` into `dst` (same shape, equivalent
/// dtype) through NumPy's own copy, which may read and write memory that
/// `data` and `indices` share with `dst` without any reference of ours to
/// it. NumPy releases the GIL for a large copy of plain bytes, and swaps the
/// references of a dtype that holds objects.
fn copy_into<'py>(
    dst: &Bound<'py, PyUntypedArray>,
    src: &Bound<'py, PyUntypedArray>,
) -> PyResult<()> {
    if dst.dtype().has_object() {
        return assign(dst, src);
    }
    // Seen as unstructured `V<itemsize>`, every byte is copied, as the
    // kernel copies it: NumPy copies a record field by field, leaving the
    // padding between fields untouched. `ndarray.view(a, dtype, ndarray)`
    // runs no subclass code.
    let py = dst.py();
    let raw = PyArrayDescr::new(py, format!("V{}", dst.dtype().itemsize()))?;
    let ndarray = py.get_type::<PyUntypedArray>();
    let as_raw = |a: &Bound<'py, PyUntypedArray>| {
        ndarray
            .call_method1("view", (a, &raw, &ndarray))?
            .cast_into::<PyUntypedArray>()
            .map_err(PyErr::from)
    };
    assign(&as_raw(dst)?, &as_raw(src)?)
}
