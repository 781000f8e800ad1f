//! `dtype=`: the conversion a gather makes on the way out, from NumPy
//! dtypes to the core's [`Cast`], and the `TypeError` for any other.

use std::sync::Mutex;

use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::{Cast, GatherError, Scalar};

/// What the docs and the error promise: the casts `dtype=` makes.
const WHICH: &str = "dtype= converts only where every value is kept: the casts \
    numpy.can_cast(data.dtype, dtype, 'safe') allows between bool, integer and floating \
    dtypes, and bfloat16 to float32 or float64";

/// The output dtype and the conversion into it that `dtype` asks for:
/// `None` when it is `data_dtype` itself (nothing to convert), a
/// `TypeError` naming both dtypes when the conversion could lose values
/// or is not between the types listed in [`WHICH`].
pub(crate) fn cast_to<'py>(
    data_dtype: &Bound<'py, PyArrayDescr>,
    dtype: &Bound<'py, PyAny>,
) -> PyResult<Option<(Cast, Bound<'py, PyArrayDescr>)>> {
    if let Some(hit) = remembered(data_dtype, dtype) {
        return Ok(hit);
    }
    let answer = convert(data_dtype, dtype)?;
    remember(data_dtype, dtype, &answer);
    Ok(answer)
}

/// The last answer of [`cast_to`] that may be reused: a service asks for
/// the same `dtype=` of the same table on every call, and converting
/// `dtype` to a descriptor and choosing the loop again cost a one-row call
/// about 490 instructions (by callgrind: 2,743 with them, 2,254 without),
/// a sixth of its time.
struct Last {
    /// The `dtype` argument and the data's dtype (held, so that neither
    /// address can be reused by another object while remembered).
    dtype: Py<PyAny>,
    data: Py<PyArrayDescr>,
    /// What [`convert`] answered for them.
    cast: Option<(Cast, Py<PyArrayDescr>)>,
}

static LAST: Mutex<Option<Last>> = Mutex::new(None);

/// The remembered answer for these two objects, if it is theirs.
fn remembered<'py>(
    data_dtype: &Bound<'py, PyArrayDescr>,
    dtype: &Bound<'py, PyAny>,
) -> Option<Option<(Cast, Bound<'py, PyArrayDescr>)>> {
    let last = LAST.lock().ok()?;
    let last = last.as_ref()?;
    if !(last.dtype.is(dtype) && last.data.is(data_dtype)) {
        return None;
    }
    let py = dtype.py();
    Some(last.cast.as_ref().map(|(c, t)| (*c, t.bind(py).clone())))
}

/// Remembers an answer of [`convert`] if nothing can change it while its
/// two objects live: both are numbers' dtypes (whose kind, size and byte
/// order are fixed), and `dtype` is a dtype or a type whose attributes
/// cannot be set (NumPy's own scalar types): any other object (a class
/// with a `dtype` attribute, a string) is converted each time.
fn remember(
    data_dtype: &Bound<'_, PyArrayDescr>,
    dtype: &Bound<'_, PyAny>,
    answer: &Option<(Cast, Bound<'_, PyArrayDescr>)>,
) {
    let fixed = match dtype.cast::<PyArrayDescr>() {
        Ok(d) => scalar(d).is_some(),
        Err(_) => dtype
            .cast::<PyType>()
            // SAFETY: reading the flags of a live type object.
            .is_ok_and(|t| unsafe {
                pyo3::ffi::PyType_GetFlags(t.as_type_ptr()) & pyo3::ffi::Py_TPFLAGS_IMMUTABLETYPE
                    != 0
            }),
    };
    let target_fixed = answer.as_ref().is_none_or(|(_, t)| scalar(t).is_some());
    if !(fixed && target_fixed && scalar(data_dtype).is_some()) {
        return;
    }
    let new = Last {
        dtype: dtype.clone().unbind(),
        data: data_dtype.clone().unbind(),
        cast: answer.as_ref().map(|(c, t)| (*c, t.clone().unbind())),
    };
    // The answer it replaces is dropped after the lock is released: its
    // objects' last references may go, and nothing runs under the lock.
    let old = match LAST.lock() {
        Ok(mut last) => last.replace(new),
        Err(_) => None,
    };
    drop(old);
}

/// [`cast_to`], worked out.
fn convert<'py>(
    data_dtype: &Bound<'py, PyArrayDescr>,
    dtype: &Bound<'py, PyAny>,
) -> PyResult<Option<(Cast, Bound<'py, PyArrayDescr>)>> {
    let target = PyArrayDescr::new(dtype.py(), dtype)?;
    if target.is(data_dtype) {
        return Ok(None);
    }
    let refused = || {
        GatherError::UnsupportedType(format!(
            "cannot gather data of dtype {data_dtype} as dtype {target}: {WHICH}"
        ))
    };
    // Numbers are compared by kind, size and byte order (NumPy's own
    // equivalence test costs a service-sized call a tenth of its time).
    if let (Some(from), Some(to)) = (scalar(data_dtype), scalar(&target)) {
        let (swap_from, swap_to) = (swapped(data_dtype), swapped(&target));
        if from == to && swap_from == swap_to {
            return Ok(None);
        }
        let cast = Cast::new(from, swap_from, to, swap_to).ok_or_else(refused)?;
        return Ok(Some((cast, target)));
    }
    if target.is_equiv_to(data_dtype) {
        return Ok(None);
    }
    Err(refused().into())
}

/// The core's element type of a dtype, if it is one of those it converts.
fn scalar(dtype: &Bound<'_, PyArrayDescr>) -> Option<Scalar> {
    use Scalar::*;
    Some(match (dtype.kind(), dtype.itemsize()) {
        (b'b', 1) => Bool,
        (b'i', 1) => I8,
        (b'i', 2) => I16,
        (b'i', 4) => I32,
        (b'i', 8) => I64,
        (b'u', 1) => U8,
        (b'u', 2) => U16,
        (b'u', 4) => U32,
        (b'u', 8) => U64,
        (b'f', 2) => F16,
        (b'f', 4) => F32,
        (b'f', 8) => F64,
        // ml_dtypes' bfloat16 is a 2-byte void-kind dtype of that name.
        (b'V', 2) if !dtype.has_fields() && is_bfloat16(dtype) => BF16,
        _ => return None,
    })
}

fn is_bfloat16(dtype: &Bound<'_, PyArrayDescr>) -> bool {
    dtype
        .typeobj()
        .qualname()
        .is_ok_and(|name| name == "bfloat16")
}

/// Whether the dtype's elements are stored in the other byte order.
fn swapped(dtype: &Bound<'_, PyArrayDescr>) -> bool {
    dtype.is_native_byteorder() == Some(false)
}
