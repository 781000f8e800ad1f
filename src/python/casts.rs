//! `dtype=`: the conversion a gather makes on the way out, from NumPy
//! dtypes to the core's [`Cast`], and the `TypeError` for any other.

use std::sync::Mutex;

use numpy::npyffi;
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::{Cast, GatherError, Scalar};

/// What the docs and the error promise: the casts `dtype=` makes.
const WHICH: &str = "dtype= converts only where every value is kept: the casts \
    numpy.can_cast(data.dtype, dtype, 'safe') allows between bool, integer and floating \
    dtypes, and bfloat16 to float32 or float64";

/// `dtype=`, resolved: the descriptor it names, and what [`Target::cast_from`]
/// needs to reuse the conversion the last such call chose.
pub(crate) struct Target<'a, 'py> {
    /// The descriptor `dtype=` names.
    pub(crate) dtype: Bound<'py, PyArrayDescr>,
    /// The `dtype=` argument itself, when it names the same descriptor
    /// every time (a descriptor, or a type whose attributes cannot be set:
    /// NumPy's own scalar types), so that its conversions may be remembered.
    fixed: Option<&'a Bound<'py, PyAny>>,
    /// Data's dtype as the memo found it, and the conversion from it.
    known: Option<(Bound<'py, PyArrayDescr>, Option<Cast>)>,
}

/// Resolves `dtype=` for a call on `data`. This is the one step of
/// `dtype=` that can run Python code (NumPy reads the `dtype` attribute of
/// any object, which may be a property), so a call resolves it before it
/// reads any array's shape, strides or data pointer: code run here may
/// change them all. When the memo holds this argument for data's present
/// dtype, no code runs and the conversion comes with it.
pub(crate) fn target_dtype<'a, 'py>(
    dtype: &'a Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Target<'a, 'py>> {
    let py = dtype.py();
    if let Ok(table) = data.cast::<PyUntypedArray>() {
        let data_dtype = table.dtype();
        let hit = MEMO.lock().ok().and_then(|last| {
            let last = last.as_ref()?;
            (last.dtype.is(dtype) && last.data.is(&data_dtype))
                .then(|| (last.target.clone_ref(py), last.cast))
        });
        if let Some((target, cast)) = hit {
            return Ok(Target {
                dtype: target.into_bound(py),
                fixed: Some(dtype),
                known: Some((data_dtype, cast)),
            });
        }
    }
    let descr = dtype.cast::<PyArrayDescr>();
    let fixed = descr.is_ok()
        || dtype
            .cast::<PyType>()
            // SAFETY: reading the flags of a live type object.
            .is_ok_and(|t| unsafe {
                pyo3::ffi::PyType_GetFlags(t.as_type_ptr()) & pyo3::ffi::Py_TPFLAGS_IMMUTABLETYPE
                    != 0
            });
    Ok(Target {
        dtype: match descr {
            Ok(d) => d.clone(),
            Err(_) => PyArrayDescr::new(py, dtype)?,
        },
        fixed: fixed.then_some(dtype),
        known: None,
    })
}

impl<'py> Target<'_, 'py> {
    /// Data's dtype and the conversion from it, when the memo found them
    /// and `table` still has that dtype: nothing to choose, no code to run.
    pub(crate) fn known_for(
        &self,
        table: &Bound<'_, PyUntypedArray>,
    ) -> Option<(&Bound<'py, PyArrayDescr>, Option<Cast>)> {
        let (known, cast) = self.known.as_ref()?;
        // SAFETY: reading the descriptor pointer of a live array; nothing
        // is dereferenced. `known` is held, so its address cannot have been
        // reused by another descriptor.
        let now = unsafe { (*npyffi::_PyArray_GET_ITEM_DATA(table.as_array_ptr())).descr };
        (now.cast() == known.as_ptr()).then_some((known, *cast))
    }

    /// The conversion from `data_dtype` into the target: `None` when the
    /// target is `data_dtype` itself (nothing to convert; the result keeps
    /// `data_dtype`), a `TypeError` naming both dtypes when the conversion
    /// could lose values or is not between the types listed in [`WHICH`].
    /// Runs no Python code of the caller's but, for a dtype of none of
    /// NumPy's kinds, the lookup of its type's name.
    pub(crate) fn cast_from(&self, data_dtype: &Bound<'_, PyArrayDescr>) -> PyResult<Option<Cast>> {
        if let Some((known, cast)) = &self.known {
            if known.is(data_dtype) {
                return Ok(*cast);
            }
        }
        let cast = convert(data_dtype, &self.dtype)?;
        // Only numbers' dtypes (whose kind, size and byte order are fixed)
        // are remembered.
        let numbers = || scalar(data_dtype).is_some() && scalar(&self.dtype).is_some();
        if let Some(arg) = self.fixed.filter(|_| numbers()) {
            let new = Last {
                dtype: arg.clone().unbind(),
                data: data_dtype.clone().unbind(),
                target: self.dtype.clone().unbind(),
                cast,
            };
            // The entry it replaces is dropped after the lock is released:
            // its objects' last references may go, and nothing may run
            // under the lock.
            drop(MEMO.lock().ok().and_then(|mut last| last.replace(new)));
        }
        Ok(cast)
    }
}

/// The result's dtype: the target's when `cast` converts to it, else
/// data's own (no `dtype=`, or one naming data's dtype).
pub(crate) fn result_dtype<'a, 'py>(
    target: Option<&'a Target<'_, 'py>>,
    cast: Option<Cast>,
    data_dtype: &'a Bound<'py, PyArrayDescr>,
) -> &'a Bound<'py, PyArrayDescr> {
    match (cast, target) {
        (Some(_), Some(target)) => &target.dtype,
        _ => data_dtype,
    }
}

/// The result's dtype of a gather from `data_dtype` with `dtype=`
/// `target`, and the conversion into it ([`Target::cast_from`]).
pub(crate) fn cast_for<'py>(
    target: Option<&Target<'_, 'py>>,
    data_dtype: &Bound<'py, PyArrayDescr>,
) -> PyResult<(Bound<'py, PyArrayDescr>, Option<Cast>)> {
    let cast = match target {
        Some(target) => target.cast_from(data_dtype)?,
        None => None,
    };
    Ok((result_dtype(target, cast, data_dtype).clone(), cast))
}

/// The last conversion [`Target::cast_from`] chose that may be reused: a
/// service asks for the same `dtype=` of the same table on every call, and
/// converting `dtype` to a descriptor and choosing the loop again cost a
/// one-row call a sixth of its time. The objects are held, so that no
/// address can be reused by another object while remembered.
struct Last {
    /// The `dtype=` argument, data's dtype and the descriptor the argument
    /// names.
    dtype: Py<PyAny>,
    data: Py<PyArrayDescr>,
    target: Py<PyArrayDescr>,
    /// The conversion from `data` into `target`.
    cast: Option<Cast>,
}

static MEMO: Mutex<Option<Last>> = Mutex::new(None);

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
        // Whether each stores its elements in the other byte order.
        let swapped = |d: &Bound<'_, PyArrayDescr>| d.is_native_byteorder() == Some(false);
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
pub(crate) fn scalar(dtype: &Bound<'_, PyArrayDescr>) -> Option<Scalar> {
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
        (b'V', 2) if !dtype.has_fields() && dtype.typeobj().qualname().ok()? == "bfloat16" => BF16,
        _ => return None,
    })
}
