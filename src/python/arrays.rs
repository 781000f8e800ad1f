//! From Python objects to the core's views: accepting array-likes, checking
//! dtypes, and allocating or checking the output array.

use std::os::raw::c_int;

use numpy::npyffi::{self, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyCapsule;

use crate::machine::{tuning, LINE};
use crate::{pool, span, ArrayView, GatherError, IndexType};

/// `numpy.asarray`, looked up once (filled at import: see `cells`).
pub(crate) fn numpy_asarray(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    ASARRAY.import(py, "numpy", "asarray")
}

fn asarray<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        return Ok(a.clone());
    }
    let a = numpy_asarray(obj.py())?.call1((obj,))?;
    Ok(a.cast_into::<PyUntypedArray>()?)
}

/// `data` as an array. Any dtype whose elements are plain bytes or Python
/// object references is accepted; new-style dtypes that own memory outside
/// the array (NumPy's `StringDType`) are not.
pub(crate) fn data_array<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    let a = asarray(obj)?;
    let dtype = a.dtype();
    // SAFETY: `dtype` is a live descriptor owned by the array.
    let legacy = unsafe { npyffi::PyDataType_ISLEGACY(dtype.as_dtype_ptr()) };
    if dtype.has_object() && !legacy {
        return Err(GatherError::UnsupportedType(format!(
            "data of dtype {dtype} is not supported: its elements own memory outside the array; \
             convert it with .astype(object) or to a fixed-width 'U' dtype"
        ))
        .into());
    }
    Ok(a)
}

/// `indices` as an integer array of native byte order, and its index type.
pub(crate) fn index_array<'py>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyUntypedArray>, IndexType)> {
    let is_array = obj.cast::<PyUntypedArray>().is_ok();
    let mut a = asarray(obj)?;
    // `[]` becomes float64 under asarray; an empty list of indices is still
    // a valid (empty) list of indices.
    if !is_array && a.len() == 0 && a.shape().contains(&0) && a.dtype().kind() == b'f' {
        a = a.call_method1("astype", ("intp",))?.cast_into()?;
    }
    let dtype = a.dtype();
    let ty = IndexType::from_kind(dtype.kind(), dtype.itemsize()).ok_or_else(|| {
        GatherError::UnsupportedType(format!(
            "indices must be an integer array (int8 to int64 or uint8 to uint64), got dtype {dtype}"
        ))
    })?;
    if dtype.is_native_byteorder() == Some(false) {
        // Rare enough that a native copy beats a byte-swapping kernel.
        let native = dtype.call_method1("newbyteorder", ("=",))?;
        a = a.call_method1("astype", (native,))?.cast_into()?;
    }
    Ok((a, ty))
}

/// The core's view of a NumPy array. The view borrows the array's memory;
/// the returned lifetime is tied to the borrowed `Bound`.
pub(crate) fn view<'a>(a: &'a Bound<'_, PyUntypedArray>) -> PyResult<ArrayView<'a>> {
    let (shape, strides, itemsize) = (a.shape(), a.strides(), a.dtype().itemsize());
    let (lo, len) = span(shape, strides, itemsize)
        .ok_or_else(|| GatherError::InvalidArgument("array strides overflow".into()))?;
    let bytes: &'a [u8] = match len {
        0 => &[],
        // SAFETY: the array object is alive for 'a; NumPy guarantees that
        // every element addressed by its shape and strides lies in its
        // buffer, which is exactly the span [data + lo, data + lo + len).
        _ => unsafe { std::slice::from_raw_parts(data_ptr(a).offset(lo), len) },
    };
    Ok(ArrayView {
        bytes,
        offset: lo.unsigned_abs(),
        shape,
        strides,
        itemsize,
    })
}

/// Where in a cache line a new result should start: on a line, unless the
/// copy into it streams (`streamed`: non-temporal stores, whole lines at a
/// time) and the machine's model says so (`machine::Tuning::
/// results_lie_as_data`); then as far past a line as the array whose
/// element `[0, ..., 0]` is at `first`, rounded down to 16 bytes (the most
/// any dtype's alignment asks, and the alignment of NumPy's own large
/// buffers, which start 16 bytes past a line). A row streamed between two
/// arrays at the same offset is loaded and stored on the same steps; at
/// different offsets every 64-byte load of a whole line straddles two
/// lines (AMD kind, `rows_1m_256b` `out=` from NumPy's `data`: 17.3 ms
/// into a line-aligned output, 13.0 ms at `data`'s offset), or is shifted
/// into place from loads on its lines (`Tuning::loads_by_line`), which
/// still measured a little slower (13.0-14.5 ms). A copy through
/// the cache (`memcpy`'s vector moves) is left with its stores on a line.
/// docs/performance.md.
pub(crate) fn line_phase(first: *const u8, streamed: bool) -> usize {
    if streamed && tuning().results_lie_as_data {
        first.addr() % LINE / 16 * 16
    } else {
        0
    }
}

/// A new C-contiguous array of `shape` with `data`'s dtype (byte order
/// included), `bytes` long. Large results of plain dtypes live in a pooled
/// buffer whose pages are already mapped (see `pool`), `phase` bytes past
/// its first line (see [`line_phase`]: 0 to 48, a multiple of 16), which
/// goes back to the pool when the array (and every view of it) is freed;
/// other plain results are left uninitialised; NumPy zero-fills dtypes that
/// hold references.
pub(crate) fn new_output<'py>(
    py: Python<'py>,
    dtype: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    bytes: usize,
    phase: usize,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let phase = phase % LINE / 16 * 16;
    let buffer = (!dtype.has_object())
        .then(|| pool::take(bytes.checked_add(phase)?))
        .flatten();
    // `phase < 64` bytes into a buffer of at least `bytes + phase`: the
    // array's bytes lie inside it, 16-byte aligned (the buffer is a page).
    let data = buffer
        .as_ref()
        .map_or(std::ptr::null_mut(), |b| b.as_ptr().wrapping_add(phase));
    // A pooled buffer's owner, the array's base: it gives the buffer back
    // when the array and every view of it are freed.
    let owner = buffer
        .map(|buffer| {
            PyCapsule::new_with_value_and_destructor(
                py,
                buffer,
                c"ndgather.pool.Buffer",
                |buffer, _| pool::give_back(buffer),
            )
        })
        .transpose()?;
    // The shape is passed as NumPy's `npy_intp` (isize) dimensions in place,
    // without a copy: the same size and alignment as usize, and NumPy only
    // reads them (`npy_intp const *dims`, copied into the array). A size
    // above isize::MAX would read as negative, which NumPy refuses with a
    // ValueError; no shape of a result gets there (its bytes fit memory).
    const _: () = assert!(size_of::<usize>() == size_of::<npyffi::npy_intp>());
    let dims = shape.as_ptr().cast::<npyffi::npy_intp>().cast_mut();
    // With null data NumPy allocates, and reads any nonzero flags as
    // "Fortran order"; with a pooled buffer they say "C order, writeable".
    let flags = owner.as_ref().map_or(0, |_| npyffi::NPY_ARRAY_WRITEABLE);
    // SAFETY: NewFromDescr steals one reference to the descriptor, which
    // `into_dtype_ptr` hands over; `dims` has `shape.len()` entries, read
    // only; null strides ask for C order; `data` is null or `phase` bytes
    // into a pooled buffer of at least `bytes + phase` (pool::take), so
    // 16-byte aligned, as any dtype needs, and `owner` keeps it alive as long
    // as the array:
    // SetBaseObject hands it the capsule's reference.
    unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
            dtype.clone().into_dtype_ptr(),
            shape.len() as c_int,
            dims,
            std::ptr::null_mut(),
            data.cast(),
            flags,
            std::ptr::null_mut(),
        );
        let array = Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked::<PyUntypedArray>();
        if let Some(owner) = owner {
            if PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_array_ptr(), owner.into_ptr()) < 0 {
                return Err(PyErr::fetch(py));
            }
        }
        Ok(array)
    }
}

/// Checks a caller's `out=` against the result it must hold.
pub(crate) fn check_out<'py>(
    out: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
) -> Result<Bound<'py, PyUntypedArray>, GatherError> {
    let arr = out.cast::<PyUntypedArray>().map_err(|_| {
        GatherError::UnsupportedType(format!(
            "out must be a numpy.ndarray, got {}",
            out.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let out_dtype = arr.dtype();
    if !out_dtype.is(dtype) && !out_dtype.is_equiv_to(dtype) {
        return Err(GatherError::UnsupportedType(format!(
            "out has dtype {out_dtype} but the result has dtype {dtype}"
        )));
    }
    if arr.shape() != shape {
        return Err(GatherError::InvalidArgument(format!(
            "out has shape {} but the result has shape {}",
            crate::error::fmt_tuple(arr.shape()),
            crate::error::fmt_tuple(shape)
        )));
    }
    if !arr.is_c_contiguous() {
        return Err(GatherError::InvalidArgument(
            "out must be C-contiguous".into(),
        ));
    }
    // SAFETY: reading the flags of a live array.
    let writeable = unsafe {
        (*npyffi::_PyArray_GET_ITEM_DATA(arr.as_array_ptr())).flags & npyffi::NPY_ARRAY_WRITEABLE
            != 0
    };
    if !writeable {
        return Err(GatherError::InvalidArgument("out must be writeable".into()));
    }
    Ok(arr.clone())
}

/// Where the data of an array starts: raw, so that asking makes no
/// reference to its memory.
pub(crate) fn data_ptr(a: &Bound<'_, PyUntypedArray>) -> *mut u8 {
    // SAFETY: reading the data pointer of a live array; nothing is
    // dereferenced through it here.
    unsafe {
        (*npyffi::_PyArray_GET_ITEM_DATA(a.as_array_ptr()))
            .data
            .cast()
    }
}

/// Where the buffer of a C-contiguous array starts and how many bytes it
/// holds, raw ([`data_ptr`]).
pub(crate) fn raw_bytes(a: &Bound<'_, PyUntypedArray>) -> (*const u8, usize) {
    (data_ptr(a), a.len() * a.dtype().itemsize())
}

/// Whether the bytes of the C-contiguous `target` meet any of `spans`
/// (start, length): addresses compared as numbers, with no reference made
/// to any of them (one may be memory another borrows).
pub(crate) fn overlaps(
    target: &Bound<'_, PyUntypedArray>,
    spans: impl IntoIterator<Item = (*const u8, usize)>,
) -> bool {
    let range = |(start, len): (*const u8, usize)| start.addr()..start.addr().saturating_add(len);
    let t = range(raw_bytes(target));
    spans
        .into_iter()
        .map(range)
        .any(|r| !r.is_empty() && !t.is_empty() && r.start < t.end && t.start < r.end)
}

/// The writable bytes of a C-contiguous array.
///
/// # Safety
/// `a` must be C-contiguous and writeable, and no other live reference may
/// alias its buffer for the returned lifetime.
// The mutable slice comes from NumPy's buffer, not from the `Bound`; the
// caller's contract is what makes it unique.
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn bytes_mut<'a>(a: &'a Bound<'_, PyUntypedArray>) -> &'a mut [u8] {
    let (_, len) = raw_bytes(a);
    // SAFETY: `len` is the array's size in bytes; the rest is the caller's.
    unsafe { first_bytes_mut(a, len) }
}

/// The first `len` writable bytes of a C-contiguous array, for a caller
/// that knows its size already (reading it again costs a row-path call).
///
/// # Safety
/// As for [`bytes_mut`], and `len` at most the array's size in bytes.
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn first_bytes_mut<'a>(
    a: &'a Bound<'_, PyUntypedArray>,
    len: usize,
) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: contiguous buffer of at least `len` bytes starting at the
    // array's data pointer (caller).
    unsafe { std::slice::from_raw_parts_mut(data_ptr(a), len) }
}
