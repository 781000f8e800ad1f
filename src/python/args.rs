//! The arguments every binding reads the same way: the operator and its
//! attributes, `mode`, and integer arguments (`axis`, `batch_dims`, `n`):
//! any Python int is accepted as such, and one outside the 64-bit range is
//! a `ValueError` naming the parameter and the value, as every other
//! out-of-range attribute is, rather than PyO3's `OverflowError`.

use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;

use crate::{GatherError, Mode, Operator};

/// Which operator, with its attributes as Python passed them: a Gather
/// along `axis`, or a GatherND where `axis` is `None` (as `ndgather.dask`
/// passes it).
pub(crate) struct Op {
    pub(crate) axis: Option<Int64>,
    pub(crate) batch_dims: Int64,
}

impl Op {
    pub(crate) fn new(axis: Option<Int64>, batch_dims: Int64) -> Op {
        Op { axis, batch_dims }
    }

    /// The core's operator: each attribute a `ValueError` naming it when
    /// beyond 64 bits (`axis` first, in the parameters' order).
    pub(crate) fn operator(self) -> PyResult<Operator> {
        let axis = self.axis.map(|a| a.get("axis")).transpose()?;
        let batch_dims = self.batch_dims.get("batch_dims")?;
        Ok(match axis {
            None => Operator::GatherNd { batch_dims },
            Some(axis) => Operator::Gather { axis, batch_dims },
        })
    }
}

/// `mode`, or the `ValueError` every binding gives for another string.
#[inline]
pub(crate) fn mode_arg(mode: &str) -> PyResult<Mode> {
    Ok(Mode::parse(mode).ok_or_else(|| {
        GatherError::InvalidArgument(format!(
            "mode must be 'raise', 'zero' or 'clip', got {mode:?}"
        ))
    })?)
}

/// An integer argument as extracted: its value, or, for an int beyond
/// `i64`, its decimal text until [`Int64::get`] names the parameter.
pub(crate) enum Int64 {
    Fits(i64),
    Beyond(String),
}

impl Int64 {
    /// The value, or a `ValueError` naming parameter `name` and the value.
    pub(crate) fn get(self, name: &str) -> PyResult<i64> {
        match self {
            Int64::Fits(v) => Ok(v),
            Int64::Beyond(v) => Err(PyValueError::new_err(format!(
                "{name} must fit in a signed 64-bit integer, got {name}={v}"
            ))),
        }
    }

    /// The value as a size (>= 0); a negative one is a `ValueError` of
    /// `error`'s message.
    pub(crate) fn size(self, name: &str, error: impl FnOnce(i64) -> String) -> PyResult<usize> {
        let v = self.get(name)?;
        Ok(usize::try_from(v).map_err(|_| GatherError::InvalidArgument(error(v)))?)
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Int64 {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        match obj.extract::<i64>() {
            Ok(v) => Ok(Int64::Fits(v)),
            // Only an integer (an `__index__`) too large for i64 overflows;
            // anything else keeps its TypeError.
            Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
                let value = py.import("operator")?.getattr("index")?.call1((obj,))?;
                Ok(Int64::Beyond(value.str()?.to_string()))
            }
            Err(e) => Err(e),
        }
    }
}
