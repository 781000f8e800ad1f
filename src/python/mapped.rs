//! Whether `data` lies in a file mapping, found cheaply (an array that owns
//! its memory is never one), and the call that brings its pages in before
//! the copy (`crate::pages`).

use numpy::npyffi;
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyMemoryView;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::pages::{prefault, prefault_enabled, RowOffsets};
use crate::plan::Plan;

/// Base objects followed at most (views of views of a memmap).
const MAX_BASES: usize = 16;

/// Whether `arr`'s memory is an `mmap.mmap`'s (`np.memmap`, `np.load(...,
/// mmap_mode=)`, `np.frombuffer(mmap)`, views of them). Inline, the two
/// in-memory cases every call meets: an array that owns its memory, and a
/// view of a plain ndarray that does.
#[inline(always)]
pub(crate) fn in_mapping(arr: &Bound<'_, PyUntypedArray>) -> bool {
    !surely_in_memory(arr) && the_mmap(arr).is_some()
}

/// An array that owns its memory, or a view of a plain ndarray that does.
#[inline(always)]
fn surely_in_memory(arr: &Bound<'_, PyUntypedArray>) -> bool {
    // SAFETY: reading the flags and base of a live array, and of its base
    // (held by it) once that is known to be a plain ndarray.
    unsafe {
        let a = &*npyffi::_PyArray_GET_ITEM_DATA(arr.as_array_ptr());
        a.flags & npyffi::NPY_ARRAY_OWNDATA != 0
            || a.base.is_null()
            || (pyo3::ffi::Py_TYPE(a.base) == ARRAY_TYPE.load(Ordering::Relaxed)
                && (*npyffi::_PyArray_GET_ITEM_DATA(a.base.cast())).flags
                    & npyffi::NPY_ARRAY_OWNDATA
                    != 0)
    }
}

/// The `mmap.mmap` whose memory `arr` is: its base chain, followed only for
/// an array that does not own its memory (one flag test for every
/// in-memory table that does), through arrays and a memoryview. A base is
/// fixed when an array is made, so no Python code can change the answer.
fn the_mmap<'py>(arr: &Bound<'py, PyUntypedArray>) -> Option<Bound<'py, PyAny>> {
    let py = arr.py();
    let mut a = arr.as_array_ptr();
    for _ in 0..MAX_BASES {
        // SAFETY: `a` is `arr` or an array of its base chain, each held by
        // the one before it, so alive while `arr` is.
        let (flags, base) = unsafe {
            let o = &*npyffi::_PyArray_GET_ITEM_DATA(a);
            (o.flags, o.base)
        };
        if flags & npyffi::NPY_ARRAY_OWNDATA != 0 || base.is_null() {
            return None;
        }
        // The common view of an in-memory array: its base is a plain
        // ndarray, told by its type's address alone (a subclass, such as
        // `np.memmap`, takes the general test below).
        // SAFETY: `base` is a live object (held by the array).
        if unsafe { pyo3::ffi::Py_TYPE(base) } == ARRAY_TYPE.load(Ordering::Relaxed) {
            a = base.cast();
            continue;
        }
        // SAFETY: `base` is a live object the array holds a reference to; a
        // new reference is taken.
        let b = unsafe { Bound::from_borrowed_ptr(py, base) };
        if let Ok(next) = b.cast::<PyUntypedArray>() {
            a = next.as_array_ptr();
            continue;
        }
        let b = if b.is_instance_of::<PyMemoryView>() {
            b.getattr("obj").ok()?
        } else {
            b
        };
        return b.is_instance(mmap_type(py).ok()?).ok()?.then_some(b);
    }
    None
}

/// `numpy.ndarray`'s type object (filled at import: see `cells`; null
/// before, which only sends every base to the general test).
static ARRAY_TYPE: AtomicPtr<pyo3::ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

/// Fills [`ARRAY_TYPE`] and [`mmap_type`]'s cell.
pub(crate) fn fill_types(py: Python<'_>) -> PyResult<()> {
    // SAFETY: NumPy's C API table is loaded (rust-numpy loads it on first
    // use), and the type object lives as long as the process.
    let ty = unsafe { npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type) };
    ARRAY_TYPE.store(ty, Ordering::Relaxed);
    mmap_type(py).map(drop)
}

/// `mmap.mmap`, looked up once (filled at import: see `cells`).
fn mmap_type(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static MMAP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    MMAP.import(py, "mmap", "mmap")
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
        if surely_in_memory(data) {
            return Ok(None);
        }
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
    // An error path: the chain followed by `base` attributes.
    let mut obj = data.as_any().clone();
    let mut file = None;
    for _ in 0..MAX_BASES {
        file = name(&obj);
        match obj.getattr("base") {
            Ok(b) if file.is_none() && !b.is_none() => obj = b,
            _ => break,
        }
    }
    let file = file.unwrap_or_else(|| "<mapped file>".to_string());
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
