//! Whether `data` lies in a file mapping, found cheaply (an array that owns
//! its memory is never one), and the call that brings its pages in before
//! the copy (`crate::pages`).

use numpy::npyffi;
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;

use crate::pages::{prefault, prefault_enabled, RowOffsets};
use crate::plan::Plan;

/// Base objects followed at most (views of views of a memmap).
const MAX_BASES: usize = 16;

/// Whether `arr`'s memory is an `mmap.mmap`'s (`np.memmap`, `np.load(...,
/// mmap_mode=)`, `np.frombuffer(mmap)`, views of them).
pub(crate) fn in_mapping(arr: &Bound<'_, PyUntypedArray>) -> bool {
    the_mmap(arr).is_some()
}

/// The `mmap.mmap` whose memory `arr` is: its base chain, followed only for
/// an array that does not own its memory (one flag test for every
/// in-memory table that does), through arrays and memoryviews. A base is
/// fixed when an array is made, so no Python code can change the answer.
fn the_mmap<'py>(arr: &Bound<'py, PyUntypedArray>) -> Option<Bound<'py, PyAny>> {
    base_chain(arr, |b| {
        b.get_type()
            .name()
            .is_ok_and(|n| n.to_str().is_ok_and(|n| n == "mmap"))
    })
}

/// The first object of `arr`'s base chain (`arr` not included) for which
/// `found` holds; a memoryview is followed to the object it views.
fn base_chain<'py>(
    arr: &Bound<'py, PyUntypedArray>,
    found: impl Fn(&Bound<'py, PyAny>) -> bool,
) -> Option<Bound<'py, PyAny>> {
    // SAFETY: reading the flags and base of a live array.
    let (flags, base) = unsafe {
        let a = &*npyffi::_PyArray_GET_ITEM_DATA(arr.as_array_ptr());
        (a.flags, a.base)
    };
    if flags & npyffi::NPY_ARRAY_OWNDATA != 0 || base.is_null() {
        return None;
    }
    let py = arr.py();
    // SAFETY: `base` is a live object the array holds a reference to; a new
    // reference is taken.
    let mut b = unsafe { Bound::from_borrowed_ptr(py, base) };
    for _ in 0..MAX_BASES {
        if found(&b) {
            return Some(b);
        }
        b = if let Ok(a) = b.cast::<PyUntypedArray>() {
            // SAFETY: as above, for a base of the array.
            let base = unsafe { (*npyffi::_PyArray_GET_ITEM_DATA(a.as_array_ptr())).base };
            if base.is_null() {
                return None;
            }
            // SAFETY: as above.
            unsafe { Bound::from_borrowed_ptr(py, base) }
        } else if b.is_instance_of::<PyMemoryView>() {
            b.getattr("obj").ok()?
        } else {
            return None;
        };
    }
    None
}

/// `data`'s file mapping, held open while a gather reads it: an
/// `mmap.mmap` refuses to close (`BufferError`) while a view of it is
/// exported, so another thread cannot unmap the pages under the copy.
pub(crate) struct Mapping<'py> {
    data: Bound<'py, PyUntypedArray>,
    _export: Bound<'py, PyAny>,
}

impl<'py> Mapping<'py> {
    /// `None` for `data` not in a mapping; a `ValueError` for a mapping
    /// already closed (reading it would crash the process, as NumPy does).
    pub(crate) fn of(data: &Bound<'py, PyUntypedArray>) -> PyResult<Option<Self>> {
        let Some(mmap) = the_mmap(data) else {
            return Ok(None);
        };
        // Fails only for a closed mmap.mmap (or one that exports nothing).
        let export = PyMemoryView::from(&mmap).map_err(|_| {
            PyValueError::new_err("data lies in a file mapping that was closed: its memory is gone")
        })?;
        Ok(Some(Mapping {
            data: data.clone(),
            _export: export.into_any(),
        }))
    }

    /// Brings in the pages `plan` reads (unless `set_prefault(False)`): a
    /// sample tested with the GIL held, the reads with it released. A
    /// failed read is an `OSError` naming the file, raised before anything
    /// is copied.
    pub(crate) fn bring_in(&self, plan: &Plan<'_>, rows: &dyn RowOffsets) -> PyResult<()> {
        if !prefault_enabled() {
            return Ok(());
        }
        let py = self.data.py();
        prefault(plan, rows, |read| py.detach(read)).map_err(|e| read_error(e, &self.data))
    }
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
