"""Run one Gather / GatherND node on the peer runtimes the wrappers are checked against.

* ``run_onnxruntime``: onnxruntime's CPU execution provider (ai.onnx GatherND-11/12/13,
  Gather-1/11/13, com.microsoft GatherND-1);
* ``run_reference``: the ``onnx`` package's ``ReferenceEvaluator``, optionally with ``new_ops``;
* ``run_openvino``: the OpenVINO CPU plugin (GatherND-5/8, Gather-1/7/8).

Nothing here imports ``ndgather``. Each runtime is imported lazily, so the test modules decide
with ``pytest.importorskip`` whether they run. Sessions and compiled models are cached, so a
test module pays for each (operator, dtype, index dtype, attributes[, shapes]) once.

Data are NumPy arrays of any dtype the runtime has: ``ml_dtypes`` bfloat16 / float8 arrays are
passed as raw bytes, ONNX ``tensor(string)`` as an ``object`` array of ``str`` (a fixed-width
``U`` array is accepted too), OpenVINO ``string`` as a ``U`` array.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

# --------------------------------------------------------------------------- operators


@dataclass(frozen=True)
class OnnxOp:
    """One published ONNX operator version."""

    op_type: str
    domain: str
    version: int

    def __str__(self) -> str:
        dom = self.domain or "ai.onnx"
        return f"{dom} {self.op_type}-{self.version}"


ONNX_OPS = {
    "GatherND-11": OnnxOp("GatherND", "", 11),
    "GatherND-12": OnnxOp("GatherND", "", 12),
    "GatherND-13": OnnxOp("GatherND", "", 13),
    "ms.GatherND-1": OnnxOp("GatherND", "com.microsoft", 1),
    "Gather-1": OnnxOp("Gather", "", 1),
    "Gather-11": OnnxOp("Gather", "", 11),
    "Gather-13": OnnxOp("Gather", "", 13),
}

# OpenVINO operators: name -> (opset module, builder name)
OV_OPS = ("GatherND-5", "GatherND-8", "Gather-1", "Gather-7", "Gather-8")


def is_string(dtype: Any) -> bool:
    return np.dtype(dtype).kind in "OUS"


def is_ml_dtype(dtype: Any) -> bool:
    """An ``ml_dtypes`` extension dtype (bfloat16, float8_*): not a built-in NumPy kind."""
    dt = np.dtype(dtype)
    return dt.names is None and dt.type.__module__.startswith("ml_dtypes")


def _raw_view(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The bytes of an ml_dtypes array as an unsigned integer array of the same shape."""
    return np.require(a, requirements="C").view(f"u{a.dtype.itemsize}")  # keeps 0-d


# --------------------------------------------------------------------------- ONNX


def onnx_elem_type(dtype: Any) -> int:
    from onnx import TensorProto, helper

    if is_string(dtype):
        return int(TensorProto.STRING)
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def make_onnx_node(op: OnnxOp, inputs: list[str], outputs: list[str], **attrs: int) -> Any:
    from onnx import helper

    return helper.make_node(op.op_type, inputs, outputs, domain=op.domain, **attrs)


def onnx_opset_imports(ai_onnx: int, microsoft: bool = False) -> list[Any]:
    from onnx import helper

    ops = [helper.make_opsetid("", ai_onnx)]
    if microsoft:
        ops.append(helper.make_opsetid("com.microsoft", 1))
    return ops


def make_onnx_model(op: OnnxOp, data_type: int, index_type: int, **attrs: int) -> Any:
    """A one-node model ``output = op(data, indices)`` with inputs of unknown shape."""
    from onnx import helper

    node = make_onnx_node(op, ["data", "indices"], ["output"], **attrs)
    graph = helper.make_graph(
        [node],
        f"{op.op_type}_{op.version}",
        [
            helper.make_tensor_value_info("data", data_type, None),
            helper.make_tensor_value_info("indices", index_type, None),
        ],
        [helper.make_tensor_value_info("output", data_type, None)],
    )
    if op.domain:
        opsets = onnx_opset_imports(13, microsoft=True)
    else:
        opsets = onnx_opset_imports(op.version)
    # IR version 8 is understood by every onnxruntime of the last years.
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


@functools.cache
def _ort() -> Any:
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)  # no warnings or error logs in test output
    return onnxruntime


@functools.cache
def ort_session(op: OnnxOp, data_type: int, index_type: int, attrs: tuple[Any, ...]) -> Any:
    ort = _ort()
    model = make_onnx_model(op, data_type, index_type, **dict(attrs))
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def ort_session_for(op: OnnxOp, data_dtype: Any, index_dtype: Any, **attrs: int) -> Any:
    """The (cached) session; building it raises when onnxruntime has no kernel for the types."""
    key = tuple(sorted(attrs.items()))
    return ort_session(op, onnx_elem_type(data_dtype), onnx_elem_type(index_dtype), key)


def run_model_onnxruntime(model: Any, feeds: dict[str, Any]) -> list[Any]:
    ort = _ort()
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def run_onnxruntime(op: OnnxOp, data: Any, indices: Any, **attrs: int) -> np.ndarray[Any, Any]:
    """``op(data, indices, **attrs)`` on onnxruntime's CPU provider, as a NumPy array."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    sess = ort_session_for(op, data.dtype, indices.dtype, **attrs)
    if is_ml_dtype(data.dtype):
        # onnxruntime's NumPy bridge has no bfloat16: hand it the bytes, read the bytes back.
        ort = _ort()
        dv = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            _raw_view(data), onnx_element_type=onnx_elem_type(data.dtype)
        )
        iv = ort.OrtValue.ortvalue_from_numpy(np.require(indices, requirements="C"))
        out = sess.run_with_ort_values(["output"], {"data": dv, "indices": iv})[0]
        shape = tuple(out.shape())
        nbytes = out.tensor_size_in_bytes()
        raw = ctypes.string_at(out.data_ptr(), nbytes) if nbytes else b""
        return np.frombuffer(raw, dtype=data.dtype).reshape(shape).copy()
    if data.dtype.kind in "US":
        data = data.astype(object)
    (out,) = sess.run(None, {"data": data, "indices": indices})
    return np.asarray(out)


@functools.cache
def _reference_evaluator(
    op: OnnxOp, data_type: int, index_type: int, attrs: tuple[Any, ...], new_ops: tuple[Any, ...]
) -> Any:
    from onnx.reference import ReferenceEvaluator

    model = make_onnx_model(op, data_type, index_type, **dict(attrs))
    return ReferenceEvaluator(model, new_ops=list(new_ops) or None)


def reference_evaluator_for(
    op: OnnxOp, data_dtype: Any, index_dtype: Any, new_ops: Any = None, **attrs: int
) -> Any:
    key = tuple(sorted(attrs.items()))
    ops = tuple(new_ops or ())
    return _reference_evaluator(
        op, onnx_elem_type(data_dtype), onnx_elem_type(index_dtype), key, ops
    )


def run_reference(
    op: OnnxOp, data: Any, indices: Any, new_ops: Any = None, **attrs: int
) -> np.ndarray[Any, Any]:
    """``op(data, indices)`` through ``onnx.reference.ReferenceEvaluator(model, new_ops=...)``."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    sess = reference_evaluator_for(op, data.dtype, indices.dtype, new_ops, **attrs)
    (out,) = sess.run(None, {"data": data, "indices": indices})
    return np.asarray(out)


# --------------------------------------------------------------------------- OpenVINO


@functools.cache
def _ov() -> Any:
    import openvino

    return openvino


@functools.cache
def _ov_core() -> Any:
    return _ov().Core()


def ov_type(dtype: Any) -> Any:
    """The OpenVINO element type of a NumPy dtype."""
    ov = _ov()
    dt = np.dtype(dtype) if dtype != "str" else np.dtype(object)
    if dt.kind in "OUS" or dtype == "str":
        return ov.Type.string
    named = {
        "bool": ov.Type.boolean,
        "int8": ov.Type.i8,
        "int16": ov.Type.i16,
        "int32": ov.Type.i32,
        "int64": ov.Type.i64,
        "uint8": ov.Type.u8,
        "uint16": ov.Type.u16,
        "uint32": ov.Type.u32,
        "uint64": ov.Type.u64,
        "float16": ov.Type.f16,
        "float32": ov.Type.f32,
        "float64": ov.Type.f64,
        "bfloat16": ov.Type.bf16,
        "float8_e4m3fn": ov.Type.f8e4m3,
        "float8_e5m2": ov.Type.f8e5m2,
    }
    return named[dt.name]


def _ov_node(name: str, data: Any, indices: Any, axis: int | None, batch_dims: int) -> Any:
    import openvino.opset1 as op1
    import openvino.opset5 as op5
    import openvino.opset7 as op7
    import openvino.opset8 as op8

    if name == "GatherND-5":
        return op5.gather_nd(data, indices, batch_dims)
    if name == "GatherND-8":
        return op8.gather_nd(data, indices, batch_dims)
    ax = np.int64(axis)
    if name == "Gather-1":
        return op1.gather(data, indices, ax)
    if name == "Gather-7":
        return op7.gather(data, indices, ax, batch_dims)
    if name == "Gather-8":
        return op8.gather(data, indices, ax, batch_dims)
    raise ValueError(name)


@functools.cache
def ov_compiled(
    name: str,
    data_type: str,
    index_type: str,
    data_shape: tuple[int, ...],
    index_shape: tuple[int, ...],
    axis: int | None,
    batch_dims: int,
) -> Any:
    """A compiled CPU model of one node. A dimension given as -1 is dynamic."""
    ov = _ov()
    import openvino.opset8 as op8

    d = op8.parameter(list(data_shape), ov_type(data_type), name="data")
    i = op8.parameter(list(index_shape), ov_type(index_type), name="indices")
    node = _ov_node(name, d, i, axis, batch_dims)
    model = ov.Model([node], [d, i], name.replace("-", "_"))
    return _ov_core().compile_model(model, "CPU")


def ov_compiled_for(
    name: str,
    data: Any,
    indices: Any,
    axis: int | None = None,
    batch_dims: int = 0,
    dynamic: bool = False,
) -> Any:
    """The (cached) compiled model for these inputs: with static shapes, or with dynamic
    dimensions of static rank (GatherND keeps ``indices.shape[-1]`` static, as the plugin
    needs the output rank), one model serving every shape."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    dshape, ishape = tuple(data.shape), tuple(indices.shape)
    if dynamic:
        dshape = (-1,) * len(dshape)
        if name.startswith("GatherND"):
            ishape = (-1,) * (len(ishape) - 1) + ishape[-1:]
        else:
            ishape = (-1,) * len(ishape)
    # A dynamic model serves many cases: keep it. A static one serves one shape: compile it
    # afresh (the plugin takes O(n) per release with n models alive, so a big cache of
    # static models costs more at teardown than recompiling).
    compile_ = ov_compiled if dynamic else ov_compiled.__wrapped__
    return compile_(
        name,
        "str" if is_string(data.dtype) else data.dtype.name,
        indices.dtype.name,
        dshape,
        ishape,
        axis,
        int(batch_dims),
    )


def _ov_tensor(a: np.ndarray[Any, Any]) -> Any:
    ov = _ov()
    if a.dtype.kind in "OUS":
        t = ov.Tensor(np.ascontiguousarray(a.astype(str)).reshape(a.shape or (1,)))
        if a.ndim == 0:
            t.shape = ov.Shape([])
        return t
    t = ov.Tensor(ov_type(a.dtype), ov.Shape(list(a.shape)))
    if a.size:
        dst = t.data.reshape(-1).view(np.uint8)
        dst[:] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    return t


def run_openvino(
    name: str,
    data: Any,
    indices: Any,
    axis: int | None = None,
    batch_dims: int = 0,
    *,
    dynamic: bool = False,
) -> np.ndarray[Any, Any]:
    """``name(data, indices[, axis], batch_dims)`` on the OpenVINO CPU plugin, as NumPy,
    compiled for these static shapes or (``dynamic``) for any shape of these ranks."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    compiled = ov_compiled_for(name, data, indices, axis, batch_dims, dynamic)
    req = compiled.create_infer_request()
    req.infer([_ov_tensor(data), _ov_tensor(indices)])
    out = req.get_output_tensor(0)
    shape = tuple(out.shape)
    if is_ml_dtype(data.dtype):
        if out.get_size() == 0:
            return np.empty(shape, dtype=data.dtype)
        raw = np.array(out.data, copy=True).reshape(-1).view(np.uint8)
        return raw.view(data.dtype).reshape(shape)
    if data.dtype.kind in "OUS":
        # The string tensor comes back as a fixed-width ``U`` array.
        return np.array(out.str_data if hasattr(out, "str_data") else out.data).reshape(shape)
    return np.array(out.data, copy=True).reshape(shape)
