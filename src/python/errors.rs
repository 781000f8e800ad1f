//! The one place where core errors become Python exceptions.

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use pyo3::PyErr;

use crate::{GatherError, OutOfRange};

/// `ndgather._errors.GatherIndexError`, looked up once (filled at import:
/// see `cells`).
pub(crate) fn gather_index_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    CLASS.import(py, "ndgather._errors", "GatherIndexError")
}

/// The `GatherIndexError` of `e`: the core's message, and its parts as
/// attributes.
pub(crate) fn index_error<'py>(py: Python<'py>, e: &OutOfRange) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("value", e.value)?;
    kwargs.set_item("position", e.position.as_slice())?;
    kwargs.set_item("axis", e.axis)?;
    kwargs.set_item("axis_size", e.axis_size)?;
    kwargs.set_item("data_shape", e.data_shape.as_slice())?;
    kwargs.set_item("index_tuple", e.tuple.as_deref())?;
    kwargs.set_item("negatives_allowed", e.negatives_allowed)?;
    gather_index_error(py)?.call((e.to_string(),), Some(&kwargs))
}

impl From<GatherError> for PyErr {
    fn from(e: GatherError) -> PyErr {
        match e {
            // Conversions run with the GIL held (after any detached copy):
            // attaching only reads the thread's state.
            GatherError::IndexOutOfRange(e) => Python::attach(|py| match index_error(py, &e) {
                Ok(error) => PyErr::from_value(error),
                Err(failed) => failed,
            }),
            // These display as their message.
            GatherError::InvalidArgument(msg) | GatherError::Overflow(msg) => {
                PyValueError::new_err(msg)
            }
            GatherError::UnsupportedType(msg) => PyTypeError::new_err(msg),
            GatherError::OutOfMemory(msg) => PyMemoryError::new_err(msg),
            e @ GatherError::IndicesModified => PyRuntimeError::new_err(e.to_string()),
        }
    }
}
