//! The Python extension `ndgather._core`. Functions here only convert:
//! everything else goes through `gateway`.

mod args;
mod arrays;
mod casts;
mod cells;
mod chunked;
mod deliver;
mod dequantize;
mod detach;
mod errors;
mod fastcall;
mod gateway;
mod mapped;
mod objects;
mod prepared;
mod rows;

use pyo3::prelude::*;

use args::{Int64, Op};
use fastcall::{extract_or, Signature};
use pyo3::ffi;
use pyo3::sync::PyOnceLock;

/// Gathers slices of `data` addressed by the index tuples along the last
/// axis of `indices` (ONNX GatherND-13, OpenVINO GatherND-8).
///
/// With ``b = batch_dims`` and ``k = indices.shape[-1]``, the result has
/// shape ``indices.shape[:-1] + data.shape[b + k:]`` and
/// ``result[p..., i...] = data[p..., *indices[p..., i..., :], ...]``.
///
/// >>> import numpy as np, ndgather
/// >>> ndgather.gather_nd(np.array([[0, 1], [2, 3]]), np.array([[0, 0], [1, 1]]))
/// array([0, 3])
/// >>> ndgather.gather_nd(np.array([[0, 1], [2, 3]]), np.array([[1], [0]]))
/// array([[2, 3],
///        [0, 1]])
/// >>> data = np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]])
/// >>> ndgather.gather_nd(data, np.array([[1], [0]]), batch_dims=1)
/// array([[2, 3],
///        [4, 5]])
///
/// ``mode`` says what an index outside ``[-s, s)`` does: ``"raise"``
/// (``IndexError``), ``"zero"`` (its slice is zero-filled) or ``"clip"``
/// (clamped after negatives wrap). ``out``, if given, must be a writeable
/// C-contiguous array of the result's shape and dtype; it is filled and
/// returned, and left untouched on any error. ``dtype``, if given, is the
/// result's dtype: each element converted as ``astype(dtype)`` converts it,
/// in the same pass; only casts that keep every value (``numpy.can_cast(
/// data.dtype, dtype, "safe")`` between bool, integer and floating dtypes,
/// and bfloat16 to float32 or float64) are made, others are a ``TypeError``.
#[pyfunction(
    name = "gather_nd",
    signature = (data, indices, batch_dims = Int64::Fits(0), *, mode = "raise", out = None, dtype = None),
    text_signature = "(data, indices, batch_dims=0, *, mode=\"raise\", out=None, dtype=None)"
)]
fn gather_nd_py<'py>(
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    batch_dims: Int64,
    mode: &str,
    out: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = Op::new(None, batch_dims);
    gateway::gather(data, indices, op, mode, true, out, dtype)
}

/// Gathers slices of `data` along `axis` (OpenVINO Gather-8, TensorFlow
/// ``gather`` with ``batch_dims``).
///
/// The result has shape
/// ``data.shape[:axis] + indices.shape[batch_dims:] + data.shape[axis + 1:]``.
/// Negative ``axis`` and ``batch_dims`` count from the end
/// (``axis += data.ndim``, ``batch_dims += indices.ndim``).
///
/// >>> import numpy as np, ndgather
/// >>> ndgather.gather(np.array([1, 2, 3, 4, 5]), np.array([0, 0, 4]))
/// array([1, 1, 5])
/// >>> data = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
/// >>> ndgather.gather(data, np.array([[0, 0, 4], [4, 0, 0]]), axis=1, batch_dims=1)
/// array([[ 1,  1,  5],
///        [10,  6,  6]])
///
/// ``mode``, ``out`` and ``dtype`` work as in :func:`gather_nd`.
#[pyfunction(
    name = "gather",
    signature = (data, indices, axis = Int64::Fits(0), batch_dims = Int64::Fits(0), *, mode = "raise", out = None, dtype = None),
    text_signature = "(data, indices, axis=0, batch_dims=0, *, mode=\"raise\", out=None, dtype=None)"
)]
fn gather_py<'py>(
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    axis: Int64,
    batch_dims: Int64,
    mode: &str,
    out: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = Op::new(Some(axis), batch_dims);
    gateway::gather(data, indices, op, mode, true, out, dtype)
}

/// The parameters of `gather_nd`, as its `#[pyfunction]` declares them.
static GATHER_ND_ARGS: Signature = Signature {
    name: "gather_nd",
    positional: &["data", "indices", "batch_dims"],
    keyword_only: &["mode", "out", "dtype"],
    interned: PyOnceLock::new(),
};

/// The parameters of `gather`, as its `#[pyfunction]` declares them.
static GATHER_ARGS: Signature = Signature {
    name: "gather",
    positional: &["data", "indices", "axis", "batch_dims"],
    keyword_only: &["mode", "out", "dtype"],
    interned: PyOnceLock::new(),
};

/// The registered `gather_nd` (`ND`) or `gather`: its arguments read by
/// `fastcall`, then the gateway, as [`gather_nd_py`] and [`gather_py`].
///
/// # Safety
/// Called by CPython's vectorcall convention (see [`Signature::parse`]).
unsafe fn gather_fast<const ND: bool>(
    py: Python<'_>,
    _module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    let signature = if ND { &GATHER_ND_ARGS } else { &GATHER_ARGS };
    // SAFETY: forwarded from the caller.
    let (data, indices, rest) = unsafe { signature.parse(py, args, nargs, kwnames)? };
    // The attributes (`batch_dims`, or `axis` and `batch_dims`), then the
    // keyword-only `mode`, `out` and `dtype`; each converted in this order.
    let attrs = if ND { 1 } else { 2 };
    let int = |i: usize, name| extract_or(rest[i], name, Int64::Fits(0));
    let axis = if ND { None } else { Some(int(0, "axis")?) };
    let op = Op::new(axis, int(attrs - 1, "batch_dims")?);
    let mode = extract_or(rest[attrs], "mode", "raise")?;
    // `None` where not passed or passed as `None`.
    let [out, dtype] = [rest[attrs + 1], rest[attrs + 2]].map(|a| a.filter(|a| !a.is_none()));
    let (out, dtype) = (out.as_deref(), dtype.as_deref());
    gateway::gather(&data, &indices, op, mode, true, out, dtype).map(Bound::into_ptr)
}

/// `gather` (or `gather_nd`, `axis=None`) with an operator version's index
/// rules, for the opset wrappers: `wrap_negative=False` makes negative
/// indices out of range.
#[pyfunction(name = "gather_with_rules")]
fn gather_with_rules_py<'py>(
    data: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    axis: Option<Int64>,
    batch_dims: Int64,
    mode: &str,
    wrap_negative: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let op = Op::new(axis, batch_dims);
    gateway::gather(data, indices, op, mode, wrap_negative, None, None)
}

/// Checks and resolves ``indices`` once for a :func:`gather_nd` from
/// ``data`` of shape ``shape``; the returned :class:`PreparedGather` then
/// gathers from any array of that shape, ``p(data, *, out=None)``, as
/// ``gather_nd(data, indices, batch_dims, mode=mode, out=out)`` would.
///
/// Errors are those of ``gather_nd`` on such ``data``, raised here; a call
/// only fails on ``data`` of another shape (``ValueError``) or on ``out``.
///
/// >>> import numpy as np, ndgather
/// >>> p = ndgather.prepare_gather_nd((2, 2), np.array([[0, 0], [1, 1]]))
/// >>> p(np.array([[0, 1], [2, 3]]))
/// array([0, 3])
/// >>> p(np.array([[0.5, 1.5], [2.5, 3.5]]))
/// array([0.5, 3.5])
#[pyfunction(
    name = "prepare_gather_nd",
    signature = (shape, indices, batch_dims = Int64::Fits(0), *, mode = "raise"),
    text_signature = "(shape, indices, batch_dims=0, *, mode=\"raise\")"
)]
fn prepare_gather_nd_py(
    shape: Vec<Int64>,
    indices: &Bound<'_, PyAny>,
    batch_dims: Int64,
    mode: &str,
) -> PyResult<prepared::PreparedGather> {
    let op = Op::new(None, batch_dims);
    prepared::prepare(shape, indices, op, mode)
}

/// Checks and resolves ``indices`` once for a :func:`gather` from ``data``
/// of shape ``shape``; the returned :class:`PreparedGather` then gathers
/// from any array of that shape, ``p(data, *, out=None)``, as
/// ``gather(data, indices, axis, batch_dims, mode=mode, out=out)`` would.
///
/// >>> import numpy as np, ndgather
/// >>> p = ndgather.prepare_gather((5,), np.array([0, 0, 4]))
/// >>> p(np.array([1, 2, 3, 4, 5]))
/// array([1, 1, 5])
#[pyfunction(
    name = "prepare_gather",
    signature = (shape, indices, axis = Int64::Fits(0), batch_dims = Int64::Fits(0), *, mode = "raise"),
    text_signature = "(shape, indices, axis=0, batch_dims=0, *, mode=\"raise\")"
)]
fn prepare_gather_py(
    shape: Vec<Int64>,
    indices: &Bound<'_, PyAny>,
    axis: Int64,
    batch_dims: Int64,
    mode: &str,
) -> PyResult<prepared::PreparedGather> {
    let op = Op::new(Some(axis), batch_dims);
    prepared::prepare(shape, indices, op, mode)
}

/// Sets the number of threads large gathers use, from 1 to ``MAX_THREADS``
/// (1024: a gather is bound by memory bandwidth long before it runs out of
/// cores, and each thread reserves a stack). Other values are a
/// ``ValueError``.
#[pyfunction(name = "set_num_threads")]
fn set_num_threads_py(n: Int64) -> PyResult<()> {
    Ok(crate::set_num_threads(n.get("n")?)?)
}

/// The number of threads large gathers use.
#[pyfunction(name = "get_num_threads")]
fn get_num_threads_py() -> usize {
    crate::num_threads()
}

/// Sets how long worker threads stay awake after a split call, looking for
/// the next one, in microseconds (``NDGATHER_LINGER_US``), from 0 to
/// 1,000,000. Other values are a ``ValueError``.
#[pyfunction(name = "_set_linger_us")]
fn set_linger_us_py(us: Int64) -> PyResult<()> {
    Ok(crate::set_linger_us(us.get("us")?)?)
}

/// See ``_set_linger_us``.
#[pyfunction(name = "_get_linger_us")]
fn get_linger_us_py() -> u64 {
    crate::linger_us()
}

/// Sets the cache sizes, in bytes, that the machine model derives its
/// thresholds from (``NDGATHER_L2_BYTES``, ``NDGATHER_LLC_BYTES``): one
/// core's L2 and the last level's, ``None`` for what the machine reports.
/// Once, at import (even with neither set: nothing changes the model after
/// it); a second call, a size of 0 or a negative one is a ``ValueError``.
#[pyfunction(name = "_set_caches")]
#[pyo3(signature = (l2, llc))]
fn set_caches_py(l2: Option<Int64>, llc: Option<Int64>) -> PyResult<()> {
    let error = |n| format!("_set_caches: a cache size must be a number of bytes > 0, got {n}");
    let l2 = l2.map(|v| v.size("l2", error)).transpose()?;
    let llc = llc.map(|v| v.size("llc", error)).transpose()?;
    Ok(crate::machine::set_caches(l2, llc)?)
}

/// The machine model here (docs/architecture.md): the caches it read, in
/// bytes, where from (``"sysfs"``, ``"environment"`` or ``"default"``), and
/// the thresholds it derived; for the tests and the benchmarks' records.
#[pyfunction(name = "_tuning")]
fn tuning_py(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    use crate::machine::{model, Source};
    let m = model();
    let t = m.tuning;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("l2_bytes", m.caches.l2)?;
    d.set_item("llc_bytes", m.caches.last)?;
    let from = match m.from {
        Source::Sysfs => "sysfs",
        Source::Environment => "environment",
        Source::Default => "default",
    };
    d.set_item("caches_from", from)?;
    d.set_item("stream_min_out_bytes", t.stream_min_out_bytes)?;
    d.set_item("stream_min_slice_bytes", t.stream_min_slice_bytes)?;
    d.set_item("whole_line_min_bytes", t.whole_line_min_bytes)?;
    d.set_item("results_lie_as_data", t.results_lie_as_data)?;
    d.set_item("loads_by_line", t.loads_by_line)?;
    d.set_item("carries_lines", t.carries_lines)?;
    d.set_item("far_rows_by_sixteen", t.far_rows_by_sixteen)?;
    d.set_item("lines_stored_min_out_bytes", t.lines_stored_min_out_bytes)?;
    d.set_item("row_split_min_lines", t.row_split_min_lines)?;
    d.set_item("half_kib_rows_by_moves", t.half_kib_rows_by_moves)?;
    d.set_item("far_rows_by_pieces", t.far_rows_by_pieces)?;
    d.set_item("rows_requested_ahead", t.rows_requested_ahead)?;
    d.set_item("far_prefetch_lines", t.far_prefetch_lines)?;
    d.set_item("far_min_data_bytes", t.far_min_data_bytes)?;
    d.set_item("prefetch_min_data_bytes", t.prefetch_min_data_bytes)?;
    Ok(d)
}

/// Sets the time a sleeping worker thread takes to wake, in microseconds
/// (``NDGATHER_WAKE_US``), from 0 to 1,000,000, which decides whether a
/// call made while every worker sleeps is worth splitting; ``None``: the
/// time ndgather measures from its own wake-ups (the default). Other values
/// are a ``ValueError``.
#[pyfunction(name = "_set_wake_us")]
#[pyo3(signature = (us))]
fn set_wake_us_py(us: Option<Int64>) -> PyResult<()> {
    let us = us.map(|us| us.get("us")).transpose()?;
    Ok(crate::set_wake_us(us)?)
}

/// The wake-up time a split assumes now, in microseconds (set, or measured;
/// 0 before any wake-up was measured).
#[pyfunction(name = "_get_wake_us")]
fn get_wake_us_py() -> u64 {
    crate::threads::wake_ns() / 1000
}

/// Sets the most bytes of freed large results ndgather keeps for reuse
/// (``0`` turns the pool off), releasing at once what is over it.
#[pyfunction(name = "set_pool_limit")]
fn set_pool_limit_py(nbytes: Int64) -> PyResult<()> {
    let error = |n| format!("set_pool_limit: the limit must be a number of bytes >= 0, got {n}");
    crate::pool::set_limit(nbytes.size("nbytes", error)?);
    Ok(())
}

/// The most bytes of freed large results ndgather keeps for reuse.
#[pyfunction(name = "get_pool_limit")]
fn get_pool_limit_py() -> usize {
    crate::pool::limit()
}

/// The bytes of freed large results the pool holds now, waiting for reuse.
#[pyfunction(name = "pool_bytes")]
fn pool_bytes_py() -> usize {
    crate::pool::held_bytes()
}

/// Whether gathers from an array in a file mapping (``numpy.memmap``, ...)
/// first read the pages they need with many reads in flight (``True``, the
/// default) or leave each to a page fault of the copy (``False``).
#[pyfunction(name = "set_prefault")]
fn set_prefault_py(on: bool) {
    crate::pages::set_prefault(on);
}

/// See ``set_prefault``.
#[pyfunction(name = "get_prefault")]
fn get_prefault_py() -> bool {
    crate::pages::prefault_enabled()
}

/// Returns every buffer the pool holds to the operating system; the number
/// of bytes released. Live results are not affected.
#[pyfunction(name = "release_pool")]
fn release_pool_py(py: Python<'_>) -> usize {
    // Unmapping hundreds of MiB takes a while: let other threads run.
    py.detach(crate::pool::release)
}

/// `ndgather._core`: the functions and class exported here, then `init`
/// adds the fast `gather_nd` and `gather`, the constants, and registers
/// what a fork needs.
#[pymodule]
mod _core {
    #[pymodule_export]
    use super::{
        chunked::{
            cast_dtype_py, chunks_touched_py, gather_chunks_py, gather_layout_py, snapshot_py,
        },
        dequantize::gather_block_quantized_py,
        gather_with_rules_py, get_linger_us_py, get_num_threads_py, get_pool_limit_py,
        get_prefault_py, get_wake_us_py, pool_bytes_py, prepare_gather_nd_py, prepare_gather_py,
        prepared::{prepared_from_state, PreparedGather},
        release_pool_py, set_caches_py, set_linger_us_py, set_num_threads_py, set_pool_limit_py,
        set_prefault_py, set_wake_us_py, tuning_py,
    };

    // What `init` uses of this file (`mod.rs`).
    use super::*;
    use crate::pool::IDLE_RELEASE;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        // PyO3's trampoline (panics to exceptions) around each fast parser.
        use pyo3::impl_::trampoline::get_trampoline_function as trampoline;
        let nd = trampoline!(fastcall_cfunction_with_keywords, gather_fast::<true>);
        fastcall::add(m, &wrap_pyfunction!(gather_nd_py, m)?, &GATHER_ND_ARGS, nd)?;
        let gather = trampoline!(fastcall_cfunction_with_keywords, gather_fast::<false>);
        fastcall::add(m, &wrap_pyfunction!(gather_py, m)?, &GATHER_ARGS, gather)?;
        m.add("MAX_THREADS", crate::MAX_THREADS)?;
        m.add("IDLE_RELEASE_SECONDS", IDLE_RELEASE.as_secs_f64())?;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        // Last, once the functions exist: from here on, a thread may fork at
        // any moment and its child must find no lock held and no cell half
        // filled.
        crate::install_fork_handlers()?;
        cells::fill(m)
    }
}
