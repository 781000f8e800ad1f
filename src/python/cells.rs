//! The one-time cells a call may read, filled when the module is imported.
//!
//! PyO3 fills a `PyOnceLock` (and so an `intern!`ed name, or an exception
//! type made on first use) by releasing the GIL, marking the cell as being
//! filled, then taking the GIL back. A thread that forks in that gap gives
//! its child a cell marked as being filled by a thread the child does not
//! have: the child's first call that reads it waits for ever, even for a
//! tiny gather. Filled here, before any thread can make a call, no cell is
//! filled later. A cell added on the call path belongs in [`fill`].

use numpy::npyffi;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::{PyModule, PyType};
use pyo3::PyTypeInfo;

use super::arrays::numpy_asarray;
use super::errors::gather_index_error;
use super::mapped::fill_types;

/// Fills every lazily filled cell a call of `module`'s functions may read.
pub(crate) fn fill(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    // Ours: `numpy.asarray`, for inputs that are not arrays.
    numpy_asarray(py)?;
    // Ours: the class of an out-of-range index's exception, and
    // the types a table in a file mapping is found by.
    gather_index_error(py)?;
    fill_types(py)?;
    // Ours, in the core: the thresholds derived from the machine's caches
    // (a std `OnceLock`, whose filling a fork must not catch half done).
    // The import then fixes the model with `_set_caches` (`_environment.py`),
    // a value computed first and only stored under that lock.
    crate::machine::tuning();
    // rust-numpy's: NumPy's C API table (`PY_ARRAY_API`), the names of the
    // modules it comes from, and NumPy's C API version; every array check,
    // dtype query and new array reads them.
    npyffi::is_numpy_2(py);
    // PyO3's, on the error paths: the type of a panic turned exception, the
    // interned `__name__` and `__qualname__` that type names in messages are
    // read with (on this ABI), and `add_note`, with which an argument that
    // fails to convert gets its "while processing" note, filled by one such
    // failure.
    PanicException::type_object(py);
    let ty: Bound<'_, PyType> = module.get_type();
    ty.name()?;
    ty.qualname()?;
    let refused = module.getattr("set_num_threads")?.call1(("",));
    debug_assert!(refused.is_err());
    Ok(())
}
