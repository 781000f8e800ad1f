//! The one way into a gather from Python: the row path for a short list of
//! ids (`rows`) if it takes the call; else convert the inputs, plan, get an
//! output, release the GIL, run the kernel, convert the error.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::args::{mode_arg, IndexRules, Op};
use super::arrays::{bytes_mut, check_out, data_array, index_array, new_output, raw_bytes, view};
use super::casts::target_dtype;
use super::detach::run_detached;
use super::objects::{assign, own_copied_references};
use super::rows::try_take_rows;
use crate::{num_threads, plan_gather, plan_gather_nd, ArrayView, Mode, Plan, Validation};

pub(crate) fn gather<'py>(
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    op: Op,
    rules: IndexRules<'_>,
    out: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mode = mode_arg(rules.mode)?;
    // `dtype=` is resolved before any array is read: it may run Python code
    // that changes them. A failure is raised where the general path always
    // raised it, after `data`'s own errors.
    let target = dtype
        .filter(|d| !d.is_none())
        .map(|d| target_dtype(d, data));
    // A `dtype=` that failed to resolve is left for the general path to raise.
    if mode == Mode::Raise && rules.wrap_negative && !matches!(target, Some(Err(_))) {
        let row_target = target.as_ref().and_then(|t| t.as_ref().ok());
        if let Some(result) = try_take_rows(data, indices, &op, out, row_target)? {
            return Ok(result);
        }
    }
    let data = data_array(data)?;
    let target = target.transpose()?;
    let mut data_dtype = data.dtype();
    let mut cast = match &target {
        Some(target) => target.cast_from(&data_dtype)?,
        None => None,
    };
    let (indices, index_type) = index_array(indices)?;
    // Converting `indices` may run Python code too (`__array__`, a
    // subclass's `__array_finalize__`): if it changed data's dtype, the
    // result's dtype and cast follow the dtype the copy reads.
    let now = data.dtype();
    if !now.is(&data_dtype) {
        if let Some(target) = &target {
            cast = target.cast_from(&now)?;
        }
        data_dtype = now;
    }
    let (dview, iview) = (view(&data)?, view(&indices)?);
    let mut plan = match op {
        Op::GatherNd { batch_dims } => {
            plan_gather_nd(dview, iview, index_type, batch_dims.get("batch_dims")?)?
        }
        Op::Gather { axis, batch_dims } => plan_gather(
            dview,
            iview,
            index_type,
            axis.get("axis")?,
            batch_dims.get("batch_dims")?,
        )?,
    };
    if !rules.wrap_negative {
        plan = plan.reject_negative_indices();
    }
    let dtype = match (cast, target) {
        (Some(cast), Some(target)) => {
            plan = plan.with_cast(cast)?;
            target.dtype
        }
        _ => data_dtype,
    };
    let Some(out) = out else {
        return Ok(fresh_result(&plan, &dtype, mode)?.into_any());
    };
    let target = check_out(out, &dtype, plan.out_shape())?;
    if dtype.has_object() || overlaps(&target, &[&dview, &iview]) {
        // Gather aside, then assign: correct for any overlap, and NumPy
        // swaps the object references `out` held.
        let result = fresh_result(&plan, &dtype, mode)?;
        copy_into(&target, &result, dtype.has_object())?;
    } else {
        // SAFETY: `target` is C-contiguous and writeable (check_out), and
        // shares no memory with `data` or `indices`, the only other arrays
        // borrowed here.
        let buf = unsafe { bytes_mut(&target) };
        run_detached(data.py(), plan.work_bytes(), || {
            plan.execute(mode, buf, Validation::BeforeWriting, num_threads())
        })?;
    }
    Ok(out.clone())
}

/// Gathers into a new array.
fn fresh_result<'py>(
    plan: &Plan<'_>,
    dtype: &Bound<'py, PyArrayDescr>,
    mode: Mode,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = dtype.py();
    let result = new_output(py, dtype, plan.out_shape(), plan.out_bytes())?;
    // SAFETY: the array was just made; nothing else refers to its buffer.
    let buf = unsafe { bytes_mut(&result) };
    if dtype.has_object() {
        // Copy with the GIL held, on this thread: no other thread may drop
        // an object of `data` between our copy of its pointer and our
        // taking a reference to it.
        if let Err(e) = plan.execute(mode, buf, Validation::WhileCopying, 1) {
            // Leave only null slots behind, so dropping the array releases
            // no reference it never took.
            buf.fill(0);
            return Err(e.into());
        }
        own_copied_references(&result)?;
    } else {
        run_detached(py, plan.work_bytes(), || {
            plan.execute(mode, buf, Validation::WhileCopying, num_threads())
        })?;
    }
    Ok(result)
}

/// Copies the fresh result `src` into `dst` (same shape, equivalent
/// dtype) through NumPy's own copy, which may read and write memory that
/// `data` and `indices` share with `dst` without any reference of ours to
/// it. NumPy releases the GIL for a large copy of plain bytes, and swaps the
/// references of a dtype that holds objects.
pub(crate) fn copy_into<'py>(
    dst: &Bound<'py, PyUntypedArray>,
    src: &Bound<'py, PyUntypedArray>,
    refs: bool,
) -> PyResult<()> {
    if refs {
        return assign(dst, src);
    }
    // Seen as unstructured `V<itemsize>`, every byte is copied, as the
    // kernel copies it: NumPy copies a record field by field, leaving the
    // padding between fields untouched. `ndarray.view(a, dtype, ndarray)`
    // runs no subclass code.
    let py = dst.py();
    let raw = PyArrayDescr::new(py, format!("V{}", dst.dtype().itemsize()))?;
    let ndarray = py.get_type::<PyUntypedArray>();
    let as_raw = |a: &Bound<'py, PyUntypedArray>| {
        ndarray
            .call_method1("view", (a, &raw, &ndarray))?
            .cast_into::<PyUntypedArray>()
            .map_err(PyErr::from)
    };
    assign(&as_raw(dst)?, &as_raw(src)?)
}

/// Whether the bytes of `target` meet those of any of `views`: address
/// ranges compared as numbers, with no reference made to `target`'s
/// memory (which may be the memory the views borrow).
pub(crate) fn overlaps(target: &Bound<'_, PyUntypedArray>, views: &[&ArrayView<'_>]) -> bool {
    let (start, len) = raw_bytes(target);
    let t = start.addr()..start.addr().saturating_add(len);
    views.iter().any(|v| {
        let r = v.bytes.as_ptr_range();
        let r = r.start.addr()..r.end.addr();
        !r.is_empty() && !t.is_empty() && r.start < t.end && t.start < r.end
    })
}
