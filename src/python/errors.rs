//! The one place where core errors become Python exceptions.

use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::PyErr;

use crate::GatherError;

impl From<GatherError> for PyErr {
    fn from(e: GatherError) -> PyErr {
        let msg = e.to_string();
        match e {
            GatherError::IndexOutOfRange(_) => PyIndexError::new_err(msg),
            GatherError::InvalidArgument(_) | GatherError::Overflow(_) => {
                PyValueError::new_err(msg)
            }
            GatherError::UnsupportedType(_) => PyTypeError::new_err(msg),
            GatherError::IndicesModified => PyRuntimeError::new_err(msg),
        }
    }
}
