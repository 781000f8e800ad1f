//! `ndgather.PreparedGather`: the core's [`Prepared`] gather as a Python
//! object. Preparing converts `indices` as a one-shot call does; a call
//! converts `data` and `out` and delivers the result by the one-shot rules
//! (a fresh pooled array, or `out=` checked, filled in place or, when it
//! overlaps `data` or holds objects, filled through NumPy's copy), with the
//! gateway's helpers.

use numpy::PyUntypedArrayMethods;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString, PyTuple};

use super::args::{mode_arg, Int64, Op};
use super::arrays::{data_array, index_array, line_phase, view};
use super::casts::{cast_for, target_dtype};
use super::deliver::{deliver, Planned};
use super::detach::run_detached;
use super::mapped::Mapping;
use crate::prepared::{Positions, Prepared};
use crate::{num_threads, GatherError, IndexType, Mode, Operator};

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

/// Prepares `op` from `indices` for `data` of `shape`.
pub(crate) fn prepare(
    shape: Vec<Int64>,
    indices: &Bound<'_, PyAny>,
    op: Op,
    mode: &str,
) -> PyResult<PreparedGather> {
    // In the one-shot call's order, so that the same bad argument is
    // reported first.
    let mode = mode_arg(mode)?;
    let error = |n| format!("shape must hold sizes >= 0, got a size of {n}");
    let shape = shape.into_iter().map(|n| n.size("shape", error));
    let shape = shape.collect::<PyResult<Vec<_>>>()?;
    let (indices, index_type) = index_array(indices)?;
    let iview = view(&indices)?;
    let op = op.operator()?;
    let run = || Prepared::new(op, &shape, iview, index_type, mode, num_threads());
    // Checked and resolved with the GIL released when large, as a one-shot
    // call's copy is.
    let inner = run_detached(indices.py(), iview.bytes.len(), run)?;
    Ok(PreparedGather { inner })
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
        self.inner.mode().name()
    }

    /// Gathers from ``data`` (shape ``data_shape``, any dtype and layout)
    /// into a new array, or into ``out`` as the one-shot functions do;
    /// ``dtype=`` converts on the way as theirs does.
    #[pyo3(signature = (data, *, out = None, dtype = None))]
    fn __call__<'py>(
        &self,
        data: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // In the one-shot call's order: `dtype=` resolved before any array
        // is read (it may run Python code that changes them), its failure
        // raised after `data`'s own errors; the cast chosen from data's
        // dtype as converted, before the shape is checked.
        let target = dtype.map(|d| target_dtype(d, data));
        let data = data_array(data)?;
        // Held to the end of the call: the mapping cannot close under the copy.
        let mapping = Mapping::of(&data)?;
        let target = target.transpose()?;
        let (dtype, cast) = cast_for(target.as_ref(), &data.dtype())?;
        let dview = view(&data)?;
        let mut call = self.inner.bind(dview)?;
        if let Some(cast) = cast {
            call = call.with_cast(cast)?;
        }
        if let Some(m) = &mapping {
            m.bring_in(call.plan(), &call)?;
        }
        let result = Planned {
            shape: call.out_shape(),
            bytes: call.out_bytes(),
            work: call.work_bytes(),
            reads: &[&dview],
            phase: line_phase(dview.first(), call.plan().stream),
        };
        // A call reads no index, so validation does not apply to it.
        deliver(&dtype, &result, out, &|buf, _, threads| {
            call.execute(buf, threads)
        })
    }

    fn __repr__(&self) -> String {
        let t = |s: &[usize]| crate::error::fmt_tuple(s);
        format!(
            "PreparedGather(data_shape={}, shape={}, mode={:?}, nbytes={})",
            t(self.inner.data_shape()),
            t(self.inner.out_shape()),
            self.inner.mode().name(),
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
        // The index type as NumPy's kind and itemsize: signed if it is the
        // signed type of its size.
        let signed = IndexType::from_kind(b'i', ty.itemsize()) == Some(ty);
        let state = (
            kind,
            PyTuple::new(py, shape)?,
            PyTuple::new(py, index_shape)?,
            (if signed { 'i' } else { 'u' }, ty.itemsize()),
            axis,
            batch_dims,
            mode.name(),
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

/// The number of parts of a pickled state.
const PARTS: usize = 10;

/// Unpickles a [`PreparedGather`] from the state `__reduce__` gave. A
/// pickle may come from anywhere, so the parts are taken as they come and
/// checked here, their number and types included, before any conversion:
/// a malformed state is a `ValueError` naming the part, never another
/// class, and no code of the pickle's objects runs (only exact `str`,
/// `int`, `tuple` and `bytes` are read).
#[pyfunction(name = "_prepared_from_state", signature = (*parts))]
pub(crate) fn prepared_from_state(parts: &Bound<'_, PyTuple>) -> PyResult<PreparedGather> {
    if parts.len() != PARTS {
        return Err(bad_state(format!("{} parts, not {PARTS}", parts.len())));
    }
    // In `__reduce__`'s order: kind, shape, index_shape, index_type, axis,
    // batch_dims, mode, width, positions, order.
    let part = |i: usize| parts.get_item(i);
    let op = match text(&part(0)?, "kind")? {
        "gather_nd" => Operator::GatherNd {
            batch_dims: int(&part(5)?, "batch_dims")?,
        },
        "gather" => Operator::Gather {
            axis: int(&part(4)?, "axis")?,
            batch_dims: int(&part(5)?, "batch_dims")?,
        },
        _ => return Err(wrong("kind", "an unknown operator")),
    };
    let shape = sizes(&part(1)?, "shape")?;
    let index_shape = sizes(&part(2)?, "index_shape")?;
    let ty = index_type(&part(3)?)?;
    let mode =
        Mode::parse(text(&part(6)?, "mode")?).ok_or_else(|| wrong("mode", "an unknown mode"))?;
    let positions = part(8)?;
    // Its type checked before the width, as the parts come.
    bytes(&positions, "positions")?;
    let partial = "a partial position";
    let positions = match int(&part(7)?, "width")? {
        4 => Positions::U32(words(&positions, "positions", partial, u32::from_le_bytes)?),
        8 => Positions::U64(words(&positions, "positions", partial, u64::from_le_bytes)?),
        _ => return Err(wrong("width", "positions of an unknown width")),
    };
    let order = part(9)?;
    let partial = "a partial row number";
    let order = (!order.is_none())
        .then(|| words(&order, "order", partial, u32::from_le_bytes))
        .transpose()?;
    let inner = Prepared::from_parts(op, &shape, &index_shape, ty, mode, positions, order)
        .map_err(|e| bad_state(e.to_string()))?;
    Ok(PreparedGather { inner })
}

/// The `ValueError` of a malformed state.
fn bad_state(what: String) -> PyErr {
    GatherError::InvalidArgument(format!("not a prepared gather's state: {what}")).into()
}

/// The `ValueError` of a malformed part.
fn wrong(part: &str, what: &str) -> PyErr {
    bad_state(format!("{part}: {what}"))
}

/// A part that must be a `str` of UTF-8 text.
fn text<'a>(v: &'a Bound<'_, PyAny>, part: &str) -> PyResult<&'a str> {
    let s = v
        .cast_exact::<PyString>()
        .map_err(|_| wrong(part, "not a str"))?;
    // A lone surrogate has no UTF-8 form, and names nothing of ours.
    s.to_str().map_err(|_| wrong(part, "not UTF-8 text"))
}

/// A part that must be an `int` of 64 bits.
fn int(v: &Bound<'_, PyAny>, part: &str) -> PyResult<i64> {
    v.cast_exact::<PyInt>()
        .map_err(|_| wrong(part, "not an int"))?
        .extract::<i64>()
        .map_err(|_| wrong(part, "beyond 64 bits"))
}

/// A part that must be a tuple of sizes (ints >= 0).
fn sizes(v: &Bound<'_, PyAny>, part: &str) -> PyResult<Vec<usize>> {
    let t = v
        .cast_exact::<PyTuple>()
        .map_err(|_| wrong(part, "not a tuple"))?;
    t.iter()
        .map(|n| usize::try_from(int(&n, part)?).map_err(|_| wrong(part, "holding a size below 0")))
        .collect()
}

/// A part that must be `bytes` of little-endian words of `N` bytes; one
/// cut short is `what`.
fn words<const N: usize, T>(
    v: &Bound<'_, PyAny>,
    part: &str,
    what: &str,
    word: fn([u8; N]) -> T,
) -> PyResult<Vec<T>> {
    let bytes = bytes(v, part)?;
    if bytes.len() % N != 0 {
        return Err(wrong(part, what));
    }
    let words = bytes.chunks_exact(N);
    Ok(words.map(|b| word(std::array::from_fn(|i| b[i]))).collect())
}

/// A part that must be `bytes`.
fn bytes<'a>(v: &'a Bound<'_, PyAny>, part: &str) -> PyResult<&'a [u8]> {
    Ok(v.cast_exact::<PyBytes>()
        .map_err(|_| wrong(part, "not bytes"))?
        .as_bytes())
}

/// The `index_type` part: NumPy's kind (one character) and itemsize.
fn index_type(v: &Bound<'_, PyAny>) -> PyResult<IndexType> {
    let unknown = || wrong("index_type", "not a known index type");
    let t = v.cast_exact::<PyTuple>().map_err(|_| unknown())?;
    if t.len() != 2 {
        return Err(unknown());
    }
    let (kind, size) = (t.get_item(0)?, t.get_item(1)?);
    let kind = text(&kind, "index_type")?;
    let size = usize::try_from(int(&size, "index_type")?).map_err(|_| unknown())?;
    match kind.as_bytes() {
        &[kind] => IndexType::from_kind(kind, size).ok_or_else(unknown),
        _ => Err(unknown()),
    }
}
