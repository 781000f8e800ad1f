"""The other runtimes that gather (onnxruntime, OpenVINO, TensorFlow; PyTorch, JAX and numba
in ``ml_peers.py``) and the copy limits.

Each runtime is an optional import: :func:`load` returns the candidates of those that import,
and says why the others are missing. Every runtime gets the case's own arrays (float data,
int64 indices) and is driven the way its users drive it in a loop, each in its fastest form
we know (all forms are timed and the summary keeps the best of each runtime):

* **onnxruntime**: an ``InferenceSession`` of a one-node ONNX model (GatherND-13 or
  Gather-13, static shapes) on the CPU execution provider. ``onnxruntime run``:
  ``sess.run`` (a new output array per call); ``onnxruntime iobinding``: inputs bound once
  (zero copy) and the output written into a preallocated array with ``run_with_iobinding``.
* **OpenVINO**: the same node (GatherND-8 or Gather-8) compiled for the CPU plugin (latency
  hint, f32 precision), one reused infer request. ``openvino infer``: ``req.infer(inputs,
  share_inputs=True)`` (a new output array per call); ``openvino bound``: inputs set once
  as shared tensors, ``req.infer()``, the result read in place from OpenVINO's own output
  tensor (reused by every call).
* **TensorFlow**: inputs converted to tensors once, outside the timed call. ``tensorflow
  eager``: eager ``tf.gather_nd`` / ``tf.gather``; ``tensorflow raw_ops``: the bare kernel
  (``tf.raw_ops.GatherNd`` / ``GatherV2``, no Python-side dispatch); ``tensorflow
  function``: a ``tf.function`` traced once for the case's shapes.

The copy limits (family ``copy``, timed but not compared) are what moving the output's bytes
costs on this machine: ``copy`` (``np.copyto`` between two warm buffers), ``copy 2 threads``
(the same split over two threads; outputs of 1 MiB and more) and ``alloc+copy`` (a copy into
a freshly allocated array, page faults included).

``threads`` (``compare.py --threads N``) caps each runtime's intra-op threads:
onnxruntime ``intra_op_num_threads``, OpenVINO ``INFERENCE_NUM_THREADS``, TensorFlow
``set_intra_op_parallelism_threads`` (and inter-op). ``None`` leaves each runtime's default
(every core).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .candidates import Candidate, NotApplicable
from .cases import Case, Inputs
from .ml_peers import LOADERS as ML_LOADERS
from .ml_peers import ML_RUNTIMES
from .ml_peers import release as ml_release
from .timing import Call

#: Families of runtimes (this module's, then ml_peers'), in table order.
RUNTIMES = ("onnxruntime", "openvino", "tensorflow", *ML_RUNTIMES)
COPY = "copy"
TWO_THREAD_COPY_MIN_BYTES = 1 << 20


@dataclass
class Loaded:
    """What :func:`load` found: candidates, versions, and why the missing runtimes are."""

    candidates: list[Candidate] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


_threads: int | None = None


# --------------------------------------------------------------------------- onnxruntime


def _ort_module() -> Any:
    return importlib.import_module("onnxruntime")


def _onnx_model(case: Case) -> Any:
    from onnx import TensorProto, helper

    if case.op == "gather_nd":
        node = helper.make_node(
            "GatherND", ["data", "indices"], ["output"], batch_dims=case.batch_dims
        )
    else:
        if case.batch_dims:
            raise NotApplicable("ONNX Gather has no batch_dims")
        node = helper.make_node("Gather", ["data", "indices"], ["output"], axis=case.axis)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(case.dtype))
    graph = helper.make_graph(
        [node],
        case.name,
        [
            helper.make_tensor_value_info("data", elem, list(case.data_shape)),
            helper.make_tensor_value_info("indices", TensorProto.INT64, list(case.indices_shape)),
        ],
        [helper.make_tensor_value_info("output", elem, list(case.output_shape))],
    )
    # IR version 8 is understood by every onnxruntime of the last years.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@functools.lru_cache(maxsize=1)
def _ort_session(case: Case) -> Any:
    ort = _ort_module()
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if _threads is not None:
        opts.intra_op_num_threads = _threads
        opts.inter_op_num_threads = 1
    model = _onnx_model(case).SerializeToString()
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def ort_run(inputs: Inputs) -> Call:
    sess = _ort_session(inputs.case)
    names, feeds = ["output"], {"data": inputs.data, "indices": inputs.indices}

    def run() -> Any:
        return sess.run(names, feeds)[0]

    return Call(run)


def ort_iobinding(inputs: Inputs) -> Call:
    sess = _ort_session(inputs.case)
    out = np.zeros(inputs.case.output_shape, dtype=inputs.data.dtype)
    binding = sess.io_binding()
    binding.bind_cpu_input("data", inputs.data)
    binding.bind_cpu_input("indices", inputs.indices)
    binding.bind_output("output", "cpu", 0, out.dtype, out.shape, out.ctypes.data)
    run_with_iobinding = sess.run_with_iobinding

    def run() -> np.ndarray:
        run_with_iobinding(binding)
        return out

    return Call(run)


# --------------------------------------------------------------------------- OpenVINO


def _ov_module() -> Any:
    return importlib.import_module("openvino")


@functools.lru_cache(maxsize=1)
def _ov_core() -> Any:
    return _ov_module().Core()


@functools.lru_cache(maxsize=1)
def _ov_compiled(case: Case) -> Any:
    ov = _ov_module()
    op8 = importlib.import_module("openvino.opset8")
    dtype = np.dtype(case.dtype)
    if dtype.itemsize == 8:
        raise NotApplicable(
            f"the CPU plugin runs 8-byte data as 4-byte ({dtype.name} down-converted)"
        )
    element = ov.Type(dtype)
    data = op8.parameter(list(case.data_shape), element, name="data")
    indices = op8.parameter(list(case.indices_shape), ov.Type.i64, name="indices")
    if case.op == "gather_nd":
        node = op8.gather_nd(data, indices, case.batch_dims)
    else:
        node = op8.gather(data, indices, np.int64(case.axis), case.batch_dims)
    model = ov.Model([node], [data, indices], case.name)
    config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
    if _threads is not None:
        config["INFERENCE_NUM_THREADS"] = _threads
    return _ov_core().compile_model(model, "CPU", config)


def ov_infer(inputs: Inputs) -> Call:
    req = _ov_compiled(inputs.case).create_infer_request()
    feeds = {0: inputs.data, 1: inputs.indices}

    def run() -> Any:
        return req.infer(feeds, share_inputs=True)[0]

    return Call(run)


def ov_bound(inputs: Inputs) -> Call:
    ov = _ov_module()
    req = _ov_compiled(inputs.case).create_infer_request()
    req.set_input_tensor(0, ov.Tensor(inputs.data, shared_memory=True))
    req.set_input_tensor(1, ov.Tensor(inputs.indices, shared_memory=True))
    out = req.get_output_tensor(0)
    infer = req.infer

    def run() -> Any:
        infer()
        return out.data

    return Call(run)


# --------------------------------------------------------------------------- TensorFlow


def _tf_module() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # no oneDNN / CPU feature banners
    return importlib.import_module("tensorflow")


_tf_tensors: dict[int, tuple[Any, Any]] = {}  # id(inputs) -> tensors, until release()


def _tf_inputs(inputs: Inputs) -> tuple[Any, Any]:
    """The case's arrays as tensors, converted once per case for all TensorFlow forms."""
    if id(inputs) not in _tf_tensors:
        tf = _tf_module()
        _tf_tensors[id(inputs)] = tf.constant(inputs.data), tf.constant(inputs.indices)
    return _tf_tensors[id(inputs)]


def _tf_fn(case: Case) -> Callable[[Any, Any], Any]:
    tf = _tf_module()
    b = case.batch_dims
    if case.op == "gather_nd":
        return lambda d, i: tf.gather_nd(d, i, batch_dims=b)
    a = case.axis
    return lambda d, i: tf.gather(d, i, axis=a, batch_dims=b)


def tf_eager(inputs: Inputs) -> Call:
    return Call(_tf_fn(inputs.case), _tf_inputs(inputs))


def tf_raw_ops(inputs: Inputs) -> Call:
    tf = _tf_module()
    case = inputs.case
    d, i = _tf_inputs(inputs)
    if case.op == "gather_nd":
        if case.batch_dims:
            raise NotApplicable(
                "the GatherNd kernel has no batch_dims (tf.gather_nd builds it from other ops)"
            )
        return Call(tf.raw_ops.GatherNd, (), {"params": d, "indices": i})
    axis = tf.constant(case.axis, dtype=tf.int64)
    return Call(
        tf.raw_ops.GatherV2,
        (),
        {"params": d, "indices": i, "axis": axis, "batch_dims": case.batch_dims},
    )


def tf_function(inputs: Inputs) -> Call:
    tf = _tf_module()
    d, i = _tf_inputs(inputs)
    signature = [tf.TensorSpec(d.shape, d.dtype), tf.TensorSpec(i.shape, i.dtype)]
    fn = tf.function(_tf_fn(inputs.case), input_signature=signature)
    return Call(fn.get_concrete_function(), (d, i))


# --------------------------------------------------------------------------- copy limits


@functools.lru_cache(maxsize=1)
def _copy_buffers(nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Two warm (written) buffers of the output's size: the source and the destination."""
    return np.ones(nbytes, dtype=np.uint8), np.zeros(nbytes, dtype=np.uint8)


@functools.lru_cache(maxsize=1)
def _helper_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-copy")


def copy_warm(inputs: Inputs) -> Call:
    src, dst = _copy_buffers(inputs.case.output_bytes)
    return Call(np.copyto, (dst, src))


def copy_two_threads(inputs: Inputs) -> Call:
    nbytes = inputs.case.output_bytes
    if nbytes < TWO_THREAD_COPY_MIN_BYTES:
        raise NotApplicable("output under 1 MiB: handing half to a thread costs more")
    src, dst = _copy_buffers(nbytes)
    half = nbytes // 2
    halves = (dst[half:], src[half:]), (dst[:half], src[:half])
    submit = _helper_thread().submit

    def copy() -> None:
        (d1, s1), (d0, s0) = halves
        future = submit(np.copyto, d1, s1)  # np.copyto releases the GIL while it copies
        np.copyto(d0, s0)
        future.result()

    return Call(copy)


def alloc_copy(inputs: Inputs) -> Call:
    src, _ = _copy_buffers(inputs.case.output_bytes)
    return Call(src.copy)


COPY_LIMITS: tuple[Candidate, ...] = tuple(
    Candidate(name, COPY, np.__version__, prepare, checked=False)
    for name, prepare in (
        ("copy", copy_warm),
        ("copy 2 threads", copy_two_threads),
        ("alloc+copy", alloc_copy),
    )
)


# --------------------------------------------------------------------------- loading


def release() -> None:
    """Drop the cached sessions, models, tensors and copy buffers of the case just run."""
    for cached in (_ort_session, _ov_compiled, _copy_buffers):
        cached.cache_clear()
    _tf_tensors.clear()
    ml_release()


def _load_ort(threads: int | None, loaded: Loaded) -> None:
    ort = _ort_module()
    onnx = importlib.import_module("onnx")
    ort.set_default_logger_severity(3)
    loaded.versions["onnxruntime"] = ort.__version__
    loaded.versions["onnx"] = onnx.__version__
    loaded.settings["onnxruntime"] = {
        "providers": ["CPUExecutionProvider"],
        "intra_op_num_threads": threads if threads is not None else "default",
    }
    loaded.candidates += [
        Candidate("onnxruntime run", "onnxruntime", ort.__version__, ort_run),
        Candidate("onnxruntime iobinding", "onnxruntime", ort.__version__, ort_iobinding),
    ]


def _load_ov(threads: int | None, loaded: Loaded) -> None:
    ov = _ov_module()
    importlib.import_module("openvino.opset8")
    version = ov.get_version()
    loaded.versions["openvino"] = version
    loaded.settings["openvino"] = {
        "device": "CPU",
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": "f32",
        "INFERENCE_NUM_THREADS": threads if threads is not None else "default",
    }
    loaded.candidates += [
        Candidate("openvino infer", "openvino", version, ov_infer),
        Candidate("openvino bound", "openvino", version, ov_bound),
    ]


def _load_tf(threads: int | None, loaded: Loaded) -> None:
    tf = _tf_module()
    if threads is not None:
        # Must happen before TensorFlow runs its first op.
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    loaded.versions["tensorflow"] = tf.__version__
    loaded.settings["tensorflow"] = {
        "device": "CPU",
        "intra_op_parallelism_threads": threads if threads is not None else "default",
    }
    loaded.candidates += [
        Candidate("tensorflow eager", "tensorflow", tf.__version__, tf_eager),
        Candidate("tensorflow raw_ops", "tensorflow", tf.__version__, tf_raw_ops),
        Candidate("tensorflow function", "tensorflow", tf.__version__, tf_function),
    ]


def _ml_loader(name: str) -> Callable[[int | None, Loaded], None]:
    def load_one(threads: int | None, loaded: Loaded) -> None:
        version, candidates, settings = ML_LOADERS[name](threads)
        loaded.versions[name] = version
        loaded.settings[name] = settings
        loaded.candidates += candidates

    return load_one


_LOADERS: dict[str, Callable[[int | None, Loaded], None]] = {
    "onnxruntime": _load_ort,
    "openvino": _load_ov,
    "tensorflow": _load_tf,
    **{name: _ml_loader(name) for name in ML_RUNTIMES},
}


def load(runtimes: tuple[str, ...] = RUNTIMES, threads: int | None = None) -> Loaded:
    """Import the runtimes named; each one that imports contributes its candidates."""
    global _threads
    _threads = threads
    loaded = Loaded()
    for name in runtimes:
        try:
            _LOADERS[name](threads, loaded)
        except ImportError as exc:
            loaded.missing[name] = f"not installed ({exc})"
        except Exception as exc:  # a broken install is reported, not fatal
            loaded.missing[name] = f"failed to load: {type(exc).__name__}: {exc}"
    return loaded
