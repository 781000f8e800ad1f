//! PROTOTYPE (issue 30): whether `data` lies in a file mapping, found
//! cheaply (an array that owns its memory is never one), and how its pages
//! are brought in before the copy.

use numpy::npyffi;
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::pages::Prefault;

/// Base objects followed at most (views of views of a memmap).
const MAX_BASES: usize = 16;

/// How to bring in `data`'s pages: `None` where `data` is not an array
/// whose base chain ends in an `mmap.mmap` (`np.memmap`, `np.load(...,
/// mmap_mode=)`, `np.frombuffer(mmap)`), else the setting
/// `NDGATHER_PREFAULT` (`off`, `willneed<N>`, `both<N>`, `populate<N>`: N threads; default
/// `both`, measured best: docs/design-mmap.md).
pub(crate) fn prefault_for(data: &Bound<'_, PyAny>) -> Option<Prefault> {
    let arr = data.cast::<PyUntypedArray>().ok()?;
    in_mapping(arr).then(setting)
}

/// Whether `arr`'s memory is an `mmap.mmap`'s: the base chain, followed
/// only for an array that does not own its memory (one flag test for
/// every in-memory table that does).
pub(crate) fn in_mapping(arr: &Bound<'_, PyUntypedArray>) -> bool {
    // SAFETY: reading the flags and base of a live array.
    let (flags, mut base) = unsafe {
        let a = &*npyffi::_PyArray_GET_ITEM_DATA(arr.as_array_ptr());
        (a.flags, a.base)
    };
    if flags & npyffi::NPY_ARRAY_OWNDATA != 0 {
        return false;
    }
    let py = arr.py();
    for _ in 0..MAX_BASES {
        if base.is_null() {
            return false;
        }
        // SAFETY: `base` is a live object the array (or a base of it) holds
        // a reference to; borrowed for this loop only.
        let b = unsafe { Bound::from_borrowed_ptr(py, base) };
        if let Ok(a) = b.cast::<PyUntypedArray>() {
            // SAFETY: as above, a live array.
            base = unsafe { (*npyffi::_PyArray_GET_ITEM_DATA(a.as_array_ptr())).base };
            continue;
        }
        let ty = b.get_type();
        return ty
            .name()
            .is_ok_and(|n| n.to_str().is_ok_and(|n| n == "mmap"));
    }
    false
}

fn setting() -> Prefault {
    let s = std::env::var("NDGATHER_PREFAULT").unwrap_or_default();
    // `name<N>`: N threads.
    let split = s.find(|c: char| c.is_ascii_digit()).unwrap_or(s.len());
    let (name, n) = s.split_at(split);
    let threads = |default| n.parse().unwrap_or(default);
    match name {
        "off" => Prefault::Off,
        "willneed" => Prefault::WillNeed {
            threads: threads(1),
        },
        "populate" => Prefault::Populate {
            threads: threads(16),
        },
        _ => Prefault::WillNeedThenPopulate {
            threads: threads(1),
        },
    }
}

/// The `OSError` for a failed read of the pages of `data` (an
/// `np.memmap` names its file).
pub(crate) fn read_error(e: std::io::Error, data: &Bound<'_, PyAny>) -> PyErr {
    let file = data
        .getattr("filename")
        .ok()
        .and_then(|f| f.str().ok())
        .map_or_else(
            || "<mapped file>".to_string(),
            |s: Bound<'_, PyString>| s.to_string(),
        );
    PyOSError::new_err((e.raw_os_error().unwrap_or(5), format!("{e}"), file))
}
