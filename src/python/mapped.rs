//! Whether `data` lies in a file mapping, found cheaply (an array that owns
//! its memory is never one), and the call that brings its pages in before
//! the copy (`crate::pages`).

use numpy::npyffi;
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

use crate::pages::{prefault, prefault_enabled, RowOffsets};
use crate::plan::Plan;

/// Base objects followed at most (views of views of a memmap).
const MAX_BASES: usize = 16;

/// Whether `arr`'s memory is an `mmap.mmap`'s (`np.memmap`, `np.load(...,
/// mmap_mode=)`, `np.frombuffer(mmap)`, views of them): its base chain,
/// followed only for an array that does not own its memory (one flag test
/// for every in-memory table that does). A base is fixed when an array is
/// made, so no Python code can change the answer.
pub(crate) fn in_mapping(arr: &Bound<'_, PyUntypedArray>) -> bool {
    base_chain(arr, |b| {
        b.get_type()
            .name()
            .is_ok_and(|n| n.to_str().is_ok_and(|n| n == "mmap"))
    })
    .is_some()
}

/// The first object of `arr`'s base chain (`arr` not included) for which
/// `found` holds.
fn base_chain<'py>(
    arr: &Bound<'py, PyUntypedArray>,
    found: impl Fn(&Bound<'py, PyAny>) -> bool,
) -> Option<Bound<'py, PyAny>> {
    // SAFETY: reading the flags and base of a live array.
    let (flags, mut base) = unsafe {
        let a = &*npyffi::_PyArray_GET_ITEM_DATA(arr.as_array_ptr());
        (a.flags, a.base)
    };
    if flags & npyffi::NPY_ARRAY_OWNDATA != 0 {
        return None;
    }
    let py = arr.py();
    for _ in 0..MAX_BASES {
        if base.is_null() {
            return None;
        }
        // SAFETY: `base` is a live object the array (or a base of it) holds
        // a reference to; a new reference is taken.
        let b = unsafe { Bound::from_borrowed_ptr(py, base) };
        if found(&b) {
            return Some(b);
        }
        let a = b.cast::<PyUntypedArray>().ok()?;
        // SAFETY: as above, a live array.
        base = unsafe { (*npyffi::_PyArray_GET_ITEM_DATA(a.as_array_ptr())).base };
    }
    None
}

/// Brings in the pages `plan` reads from `data` when `data` lies in a file
/// mapping (and `set_prefault` is on): a sample tested with the GIL held,
/// the reads with it released. A failed read is an `OSError` naming the
/// file, raised before anything is copied.
pub(crate) fn bring_in(
    data: &Bound<'_, PyUntypedArray>,
    plan: &Plan<'_>,
    rows: &dyn RowOffsets,
) -> PyResult<()> {
    if !prefault_enabled() || !in_mapping(data) {
        return Ok(());
    }
    let py = data.py();
    prefault(plan, rows, |read| py.detach(read)).map_err(|e| read_error(e, data))
}

/// The `OSError` for a failed read of `data`'s pages, naming the file
/// where an array of its base chain (an `np.memmap`) knows it.
fn read_error(e: std::io::Error, data: &Bound<'_, PyUntypedArray>) -> PyErr {
    let name = |b: &Bound<'_, PyAny>| {
        b.getattr("filename")
            .ok()
            .filter(|f| !f.is_none())
            .and_then(|f| f.str().ok())
            .map(|s| s.to_string())
    };
    let file = name(data.as_any())
        .or_else(|| base_chain(data, |b| name(b).is_some()).and_then(|b| name(&b)))
        .unwrap_or_else(|| "<mapped file>".to_string());
    let errno = e.raw_os_error().unwrap_or(libc::EIO);
    let why = if errno == libc::EFAULT {
        "a gather's rows lie past the end of the mapped file (it is shorter than its mapping)"
            .to_string()
    } else {
        let text = e.to_string();
        let text = text.split(" (os error").next().unwrap_or_default();
        format!("reading a gather's rows from the mapped file failed: {text}")
    };
    PyOSError::new_err((errno, why, file))
}
