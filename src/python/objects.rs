//! Reference counting for dtypes that hold Python objects (`object`, and
//! structured dtypes with object fields). The kernel copies their pointers
//! as bytes; these helpers then make the copies owned references.

use numpy::npyffi::PY_ARRAY_API;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::ffi;
use pyo3::prelude::*;

use super::arrays::data_ptr;

/// After the kernel filled the fresh array `result` with pointers copied
/// from `data` (the GIL held throughout, so none of them was released in
/// between): take a reference to each, and put `None` where the kernel
/// wrote a null pointer (a zero-filled slot of `mode="zero"`).
pub(crate) fn own_copied_references(result: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
    let py = result.py();
    // SAFETY: `result` is a live array of a reference-holding dtype whose
    // slots are null or pointers to live objects (copied from `data`, which
    // holds its own references while the GIL is held).
    if unsafe { PY_ARRAY_API.PyArray_INCREF(py, result.as_array_ptr()) } < 0 {
        return Err(PyErr::fetch(py));
    }
    if result.dtype().kind() != b'O' {
        // Null object fields inside records read back as None already.
        return Ok(());
    }
    let slots = data_ptr(result).cast::<*mut ffi::PyObject>();
    // SAFETY: a fresh C-contiguous array of `len` object pointers that no
    // one else can see yet, in a buffer NumPy allocated (never null, and
    // aligned for pointers).
    let slots = unsafe { std::slice::from_raw_parts_mut(slots, result.len()) };
    for slot in slots.iter_mut().filter(|slot| slot.is_null()) {
        // SAFETY: a null slot gets an owned reference to None.
        *slot = unsafe { ffi::Py_NewRef(ffi::Py_None()) };
    }
    Ok(())
}

/// Copies `src` into `dst` (same shape and dtype) through NumPy, which
/// copies by value even where the two share memory, and for a dtype that
/// holds objects releases the references `dst` held and takes new ones.
pub(crate) fn assign(
    dst: &Bound<'_, PyUntypedArray>,
    src: &Bound<'_, PyUntypedArray>,
) -> PyResult<()> {
    let py = dst.py();
    // SAFETY: both are live arrays of equal shape and dtype.
    if unsafe { PY_ARRAY_API.PyArray_CopyInto(py, dst.as_array_ptr(), src.as_array_ptr()) } < 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(())
}
