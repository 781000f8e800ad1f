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

/// `dtype=` as a descriptor. This is the one step of `dtype=` that can run
/// Python code (NumPy reads the `dtype` attribute of any object, which may
/// be a property), so a call resolves it before it reads any array's shape,
/// strides, dtype or data pointer: code run here may change them all.
pub(crate) fn target_dtype<'py>(dtype: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArrayDescr>> {
    if let Ok(d) = dtype.cast::<PyArrayDescr>() {
        return Ok(d.clone());
    }
    let py = dtype.py();
    if let Some(target) = memo(|m| {
        let (named, target) = m.named.as_ref()?;
        named.is(dtype).then(|| target.clone_ref(py))
    }) {
        return Ok(target.into_bound(py));
    }
    let target = PyArrayDescr::new(py, dtype)?;
    // Only a type whose attributes cannot be set (NumPy's own scalar types)
    // names the same dtype every time: any other object (a class with a
    // `dtype` attribute, a string) is converted each time.
    let fixed = dtype
        .cast::<PyType>()
        // SAFETY: reading the flags of a live type object.
        .is_ok_and(|t| unsafe {
            pyo3::ffi::PyType_GetFlags(t.as_type_ptr()) & pyo3::ffi::Py_TPFLAGS_IMMUTABLETYPE != 0
        });
    if fixed {
        let named = (dtype.clone().unbind(), target.clone().unbind());
        remember(|m| m.named.replace(named));
    }
    Ok(target)
}

/// The conversion from `data_dtype` into `target` (from [`target_dtype`]):
/// `None` when `target` is `data_dtype` itself (nothing to convert; the
/// result keeps `data_dtype`), a `TypeError` naming both dtypes when the
/// conversion could lose values or is not between the types listed in
/// [`WHICH`]. Runs no Python code of the caller's.
pub(crate) fn cast_to(
    data_dtype: &Bound<'_, PyArrayDescr>,
    target: &Bound<'_, PyArrayDescr>,
) -> PyResult<Option<Cast>> {
    if let Some(hit) = memo(|m| {
        let (data, to, cast) = m.cast.as_ref()?;
        (data.is(data_dtype) && to.is(target)).then_some(*cast)
    }) {
        return Ok(hit);
    }
    let answer = convert(data_dtype, target)?;
    // Only numbers' dtypes (whose kind, size and byte order are fixed) are
    // remembered.
    if scalar(data_dtype).is_some() && scalar(target).is_some() {
        let pair = (data_dtype.clone().unbind(), target.clone().unbind(), answer);
        remember(|m| m.cast.replace(pair));
    }
    Ok(answer)
}

/// The last answers of [`target_dtype`] and [`cast_to`] that may be
/// reused: a service asks for the same `dtype=` of the same table on every
/// call, and converting `dtype` to a descriptor and choosing the loop
/// again cost a one-row call about 490 instructions (by callgrind: 2,743
/// with them, 2,254 without), a sixth of its time. The objects are held,
/// so that no address can be reused by another object while remembered.
#[derive(Default)]
struct Memo {
    /// An immutable type `dtype=` named, and its descriptor.
    named: Option<(Py<PyAny>, Py<PyArrayDescr>)>,
    /// Data's dtype, the target, and the conversion between them.
    cast: Option<(Py<PyArrayDescr>, Py<PyArrayDescr>, Option<Cast>)>,
}

static MEMO: Mutex<Option<Memo>> = Mutex::new(None);

/// What `look` finds in the memo (a poisoned lock reads as empty).
fn memo<T>(look: impl FnOnce(&Memo) -> Option<T>) -> Option<T> {
    look(MEMO.lock().ok()?.as_ref()?)
}

/// Replaces one entry of the memo; what it replaces is dropped after the
/// lock is released, since its objects' last references may go then and
/// nothing may run under the lock.
fn remember<T>(replace: impl FnOnce(&mut Memo) -> T) {
    let old = match MEMO.lock() {
        Ok(mut m) => replace(m.get_or_insert_with(Memo::default)),
        Err(_) => return,
    };
    drop(old);
}

/// [`cast_to`], worked out.
fn convert(
    data_dtype: &Bound<'_, PyArrayDescr>,
    target: &Bound<'_, PyArrayDescr>,
) -> PyResult<Option<Cast>> {
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
    if let (Some(from), Some(to)) = (scalar(data_dtype), scalar(target)) {
        let (swap_from, swap_to) = (swapped(data_dtype), swapped(target));
        if from == to && swap_from == swap_to {
            return Ok(None);
        }
        let cast = Cast::new(from, swap_from, to, swap_to).ok_or_else(refused)?;
        return Ok(Some(cast));
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
