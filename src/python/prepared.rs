//! `ndgather.PreparedGather`: the core's [`Prepared`] gather as a Python
//! object. Preparing converts `indices` as a one-shot call does; a call
//! converts `data` and `out` and delivers the result by the one-shot rules
//! (a fresh pooled array, or `out=` checked, filled in place or, when it
//! overlaps `data` or holds objects, filled through NumPy's copy), with the
//! gateway's helpers.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use super::args::Int64;
use super::arrays::{bytes_mut, check_out, data_array, index_array, new_output, view};
use super::gateway::{copy_into, overlaps, DETACH_MIN_BYTES};
use super::objects::own_copied_references;
use crate::{
    num_threads, GatherError, IndexType, Mode, Operator, Positions, Prepared, PreparedCall,
};

/// A gather whose indices were checked and resolved once for one shape of
/// ``data`` (made by :func:`prepare_gather_nd` and :func:`prepare_gather`).
///
/// Calling it, ``p(data, *, out=None)``, gathers from any array of shape
/// ``data_shape`` (any dtype, any layout) exactly as the one-shot function
/// with the same indices, attributes and mode would, without reading an
/// index again. It owns its resolved indices, may be called from many
/// threads at once, and pickles.
#[pyclass(frozen, module = "ndgather._core", name = "PreparedGather")]
pub(crate) struct PreparedGather {
    inner: Prepared,
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Raise => "raise",
        Mode::Zero => "zero",
        Mode::Clip => "clip",
    }
}

fn parse_mode(mode: &str) -> PyResult<Mode> {
    Ok(Mode::parse(mode).ok_or_else(|| {
        GatherError::InvalidArgument(format!(
            "mode must be 'raise', 'zero' or 'clip', got {mode:?}"
        ))
    })?)
}

/// A shape argument: sizes >= 0 that fit 64 bits.
fn shape_arg(shape: Vec<Int64>) -> PyResult<Vec<usize>> {
    shape
        .into_iter()
        .map(|n| {
            let n = n.get("shape")?;
            Ok(usize::try_from(n).map_err(|_| {
                GatherError::InvalidArgument(format!(
                    "shape must hold sizes >= 0, got a size of {n}"
                ))
            })?)
        })
        .collect()
}

/// Prepares `op` from `indices` for `data` of `shape`.
pub(crate) fn prepare(
    py: Python<'_>,
    shape: Vec<Int64>,
    indices: &Bound<'_, PyAny>,
    op: impl FnOnce() -> PyResult<Operator>,
    mode: &str,
) -> PyResult<PreparedGather> {
    // In the one-shot call's order, so that the same bad argument is
    // reported first.
    let mode = parse_mode(mode)?;
    let shape = shape_arg(shape)?;
    let (indices, index_type) = index_array(indices)?;
    let iview = view(&indices)?;
    let op = op()?;
    let reads = iview.bytes.len();
    let threads = num_threads();
    let run = || Prepared::new(op, &shape, iview, index_type, mode, threads);
    // Checked and resolved with the GIL released when large, as a one-shot
    // call's copy is.
    let inner = if reads < DETACH_MIN_BYTES {
        run()
    } else {
        py.detach(run)
    }?;
    Ok(PreparedGather { inner })
}

/// How an index type travels in a pickle: NumPy's kind and itemsize.
fn index_type_code(ty: IndexType) -> (char, usize) {
    let kind = match ty {
        IndexType::I8 | IndexType::I16 | IndexType::I32 | IndexType::I64 => 'i',
        _ => 'u',
    };
    (kind, ty.itemsize())
}

#[pymethods]
impl PreparedGather {
    /// The shape of every result.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.out_shape())
    }

    /// The shape of ``data`` the gather was prepared for.
    #[getter]
    fn data_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.data_shape())
    }

    /// The bytes it holds: about 4 bytes an output row (8 when ``data``
    /// has ``2**32 - 1`` or more leading elements), and its shapes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }

    /// ``"raise"``, ``"zero"`` or ``"clip"``, as prepared.
    #[getter]
    fn mode(&self) -> &'static str {
        mode_name(self.inner.mode())
    }

    /// Gathers from ``data`` (shape ``data_shape``, any dtype and layout)
    /// into a new array, or into ``out`` as the one-shot functions do.
    #[pyo3(signature = (data, *, out = None))]
    fn __call__<'py>(
        &self,
        data: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let data = data_array(data)?;
        let dview = view(&data)?;
        let call = self.inner.bind(dview)?;
        let dtype = data.dtype();
        let Some(out) = out else {
            return Ok(fresh_result(&call, &dtype)?.into_any());
        };
        let target = check_out(out, &dtype, call.out_shape())?;
        if dtype.has_object() || overlaps(&target, &[&dview]) {
            let result = fresh_result(&call, &dtype)?;
            copy_into(&target, &result, dtype.has_object())?;
        } else {
            // SAFETY: `target` is C-contiguous and writeable (check_out), and
            // shares no memory with `data`, the only other array borrowed.
            let buf = unsafe { bytes_mut(&target) };
            run_detached(data.py(), &call, || call.execute(buf, num_threads()))?;
        }
        Ok(out.clone())
    }

    fn __repr__(&self) -> String {
        let t = |s: &[usize]| crate::error::fmt_tuple(s);
        format!(
            "PreparedGather(data_shape={}, shape={}, mode={:?}, nbytes={})",
            t(self.inner.data_shape()),
            t(self.inner.out_shape()),
            mode_name(self.inner.mode()),
            self.inner.nbytes()
        )
    }

    /// Pickles as its parts, positions (and their rows, when in address
    /// order) as little-endian bytes; unpickling
    /// checks them all (`_prepared_from_state`).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (op, shape, index_shape, ty, mode, positions, order) = self.inner.parts();
        let (kind, axis, batch_dims) = match op {
            Operator::GatherNd { batch_dims } => ("gather_nd", 0, batch_dims),
            Operator::Gather { axis, batch_dims } => ("gather", axis, batch_dims),
        };
        let (width, bytes): (usize, Vec<u8>) = match positions {
            Positions::U32(v) => (4, v.iter().flat_map(|p| p.to_le_bytes()).collect()),
            Positions::U64(v) => (8, v.iter().flat_map(|p| p.to_le_bytes()).collect()),
        };
        let order: Option<Vec<u8>> =
            order.map(|o| o.iter().flat_map(|r| r.to_le_bytes()).collect());
        let (ikind, isize_) = index_type_code(ty);
        let state = (
            kind,
            PyTuple::new(py, shape)?,
            PyTuple::new(py, index_shape)?,
            (ikind, isize_),
            axis,
            batch_dims,
            mode_name(mode),
            width,
            PyBytes::new(py, &bytes),
            order.map(|o| PyBytes::new(py, &o)),
        );
        let restore = py
            .import("ndgather._core")?
            .getattr("_prepared_from_state")?;
        PyTuple::new(py, [restore, state.into_pyobject(py)?.into_any()])
    }
}

/// Gathers into a new array (the gateway's `fresh_result`, for a prepared
/// call).
fn fresh_result<'py>(
    call: &PreparedCall<'_>,
    dtype: &Bound<'py, PyArrayDescr>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = dtype.py();
    let result = new_output(py, dtype, call.out_shape(), call.out_bytes())?;
    // SAFETY: the array was just made; nothing else refers to its buffer.
    let buf = unsafe { bytes_mut(&result) };
    if dtype.has_object() {
        // As in the gateway: copied with the GIL held, on this thread, so
        // no object of `data` is dropped between the copy and the increfs.
        if let Err(e) = call.execute(buf, 1) {
            buf.fill(0);
            return Err(e.into());
        }
        own_copied_references(&result)?;
    } else {
        run_detached(py, call, || call.execute(buf, num_threads()))?;
    }
    Ok(result)
}

/// Runs a copy with the GIL released unless it is small (as the gateway's
/// `run_detached`).
fn run_detached<R: Send>(
    py: Python<'_>,
    call: &PreparedCall<'_>,
    copy: impl FnOnce() -> R + Send,
) -> R {
    if call.work_bytes() < DETACH_MIN_BYTES {
        copy()
    } else {
        py.detach(copy)
    }
}

/// Unpickles a [`PreparedGather`] from the state `__reduce__` gave,
/// checking every part (a pickle may come from anywhere).
#[pyfunction(name = "_prepared_from_state")]
#[allow(clippy::too_many_arguments)] // the parts of the state
pub(crate) fn prepared_from_state(
    kind: &str,
    shape: Vec<Int64>,
    index_shape: Vec<Int64>,
    index_type: (char, usize),
    axis: Int64,
    batch_dims: Int64,
    mode: &str,
    width: usize,
    positions: &[u8],
    order: Option<&[u8]>,
) -> PyResult<PreparedGather> {
    let bad =
        |what: &str| GatherError::InvalidArgument(format!("not a prepared gather's state: {what}"));
    let op = match kind {
        "gather_nd" => Operator::GatherNd {
            batch_dims: batch_dims.get("batch_dims")?,
        },
        "gather" => Operator::Gather {
            axis: axis.get("axis")?,
            batch_dims: batch_dims.get("batch_dims")?,
        },
        _ => return Err(bad("unknown operator").into()),
    };
    let ty = IndexType::from_kind(index_type.0 as u8, index_type.1)
        .filter(|_| index_type.0.is_ascii())
        .ok_or_else(|| bad("unknown index type"))?;
    if width == 0 || positions.len() % width != 0 {
        return Err(bad("a partial position").into());
    }
    let positions = match width {
        4 => Positions::U32(
            positions
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ),
        8 => Positions::U64(
            positions
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                .collect(),
        ),
        _ => return Err(bad("positions of an unknown width").into()),
    };
    let order = match order {
        None => None,
        Some(o) if o.len() % 4 == 0 => Some(
            o.chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ),
        Some(_) => return Err(bad("a partial row number").into()),
    };
    let inner = Prepared::from_parts(
        op,
        &shape_arg(shape)?,
        &shape_arg(index_shape)?,
        ty,
        parse_mode(mode)?,
        positions,
        order,
    )?;
    Ok(PreparedGather { inner })
}
