//! The one way into a gather from Python: the row path for a short list of
//! ids (`rows`) if it takes the call; else convert the inputs, plan, get an
//! output, release the GIL, run the kernel, convert the error.

use numpy::PyUntypedArrayMethods;
use pyo3::prelude::*;

use super::args::{mode_arg, Op};
use super::arrays::{data_array, index_array, line_phase, view};
use super::casts::{cast_for, target_dtype};
use super::deliver::{deliver, Planned};
use super::mapped::Mapping;
use super::rows::try_take_rows;
use crate::pages::OneShot;
use crate::plan::plan_op;
use crate::Mode;

/// `op` on `data` and `indices`; `wrap_negative=false` (an operator
/// version's rule) makes a negative index out of range. `out` and `dtype`
/// are `None` where not passed or passed as `None`.
pub(crate) fn gather<'py>(
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    op: Op,
    mode: &str,
    wrap_negative: bool,
    out: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mode = mode_arg(mode)?;
    // `dtype=` is resolved before any array is read: it may run Python code
    // that changes them. A failure is raised where the general path always
    // raised it, after `data`'s own errors.
    let target = dtype.map(|d| target_dtype(d, data));
    // A `dtype=` that failed to resolve is left for the general path to raise.
    // The row path resolves as `raise` and `clip` do, negatives from the end.
    let row_modes = matches!(mode, Mode::Raise | Mode::Clip);
    if row_modes && wrap_negative && !matches!(target, Some(Err(_))) {
        let row_target = target.as_ref().and_then(|t| t.as_ref().ok());
        let clip = mode == Mode::Clip;
        if let Some(result) = try_take_rows(data, indices, &op, out, row_target, clip)? {
            return Ok(result);
        }
    }
    let data = data_array(data)?;
    // Held to the end of the call: the mapping cannot close under the copy.
    let mapping = Mapping::of(&data)?;
    let target = target.transpose()?;
    // A cast refused is raised before the indices' errors.
    if let Some(target) = &target {
        target.cast_from(&data.dtype())?;
    }
    let (indices, index_type) = index_array(indices)?;
    // Converting `indices` may run Python code too (`__array__`, a
    // subclass's `__array_finalize__`): the result's dtype and cast are
    // chosen again, for the dtype the copy reads.
    let (dtype, cast) = cast_for(target.as_ref(), &data.dtype())?;
    let (dview, iview) = (view(&data)?, view(&indices)?);
    let mut plan = plan_op(op.operator()?, dview, iview, index_type, None)?;
    if !wrap_negative {
        plan = plan.reject_negative_indices();
    }
    if let Some(cast) = cast {
        plan = plan.with_cast(cast)?;
    }
    if let Some(m) = &mapping {
        m.bring_in(&plan, &OneShot { plan: &plan, mode })?;
    }
    let result = Planned {
        shape: plan.out_shape(),
        bytes: plan.out_bytes(),
        work: plan.work_bytes(),
        reads: &[&dview, &iview],
        phase: line_phase(dview.first(), plan.stream),
    };
    deliver(&dtype, &result, out, &|buf, validation, threads| {
        plan.execute(mode, buf, validation, threads)
    })
}
