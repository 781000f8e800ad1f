"""ndgather.onnx.reference_ops inside ``onnx.reference.ReferenceEvaluator``.

* A small multi-node model (Gather -> GatherND -> Add, plus a com.microsoft GatherND) runs
  with the evaluator's own operators and with ``new_ops=ndgather.onnx.reference_ops``; the
  outputs are the same (and onnxruntime's, when it is installed).
* Random single-node models of every version and every ONNX type (complex included, which
  onnxruntime lacks) give the same bytes through the evaluator's own operator, through
  ndgather's, and through the wrapper called directly.
* The version the model's opset imports selects is the one whose rules apply, and the
  wrappers' errors come out of ``sess.run``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ndgather.onnx as nx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx.reference.op_run import OpRun  # noqa: E402
from onnx.reference.ops.op_gathernd import _gather_nd_impl  # noqa: E402
from runtimes import ONNX_OPS, make_onnx_model, onnx_elem_type, run_reference  # noqa: E402
from wrapper_cases import (  # noqa: E402
    ONNX_NUMERIC,
    assert_same_values,
    dtype_of,
    random_gather_case,
    random_gather_nd_case,
    seed_of,
)


class OnnxOwnMsGatherND(OpRun):  # type: ignore[misc]
    """com.microsoft GatherND for the plain evaluator, from onnx's own GatherND code
    (the evaluator ships no com.microsoft operators)."""

    op_domain = "com.microsoft"

    def _run(self, data: Any, indices: Any, batch_dims: Any = None) -> tuple[Any]:
        # (the evaluator looks the attributes up in ai.onnx GatherND's schema by class name)
        assert not batch_dims
        return _gather_nd_impl(data, indices, 0)


OnnxOwnMsGatherND.__name__ = "GatherND"


def is_ndgather_class(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "ndgather"


# --------------------------------------------------------------------------- multi-node model


def multi_node_model(ai_onnx: int) -> Any:
    """X[5,4,3] --Gather(axis=1, I)--> G[5,2,3] --GatherND(J)--> N[5,2] --Add(B)--> Y,
    X --com.microsoft GatherND(K, int32)--> M[2,3],  X --Gather(axis=-1, L int32)--> Z.

    GatherND uses batch_dims=1 and index pairs from opset 12, whole (5-batch) index triples
    at opset 11; before opset 11 there is no GatherND, and Y is just G."""
    f, i64, i32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
    nodes = [helper.make_node("Gather", ["X", "I"], ["G"], axis=1)]
    inputs = [
        helper.make_tensor_value_info("X", f, [5, 4, 3]),
        helper.make_tensor_value_info("I", i64, [2]),
        helper.make_tensor_value_info("K", i32, [2, 2]),
        helper.make_tensor_value_info("L", i32, [2, 2]),
    ]
    if ai_onnx >= 11:
        if ai_onnx >= 12:
            nodes.append(helper.make_node("GatherND", ["G", "J"], ["N"], batch_dims=1))
            inputs.append(helper.make_tensor_value_info("J", i64, [5, 2, 2]))
        else:
            nodes.append(helper.make_node("GatherND", ["G", "J"], ["N"]))
            inputs.append(helper.make_tensor_value_info("J", i64, [5, 2, 3]))
        nodes.append(helper.make_node("Add", ["N", "B"], ["Y"]))
        inputs.append(helper.make_tensor_value_info("B", f, [5, 2]))
        y = helper.make_tensor_value_info("Y", f, [5, 2])
    else:
        nodes.append(helper.make_node("Identity", ["G"], ["Y"]))
        y = helper.make_tensor_value_info("Y", f, [5, 2, 3])
    nodes += [
        helper.make_node("GatherND", ["X", "K"], ["M"], domain="com.microsoft"),
        helper.make_node("Gather", ["X", "L"], ["Z"], axis=-1),
    ]
    outputs = [
        y,
        helper.make_tensor_value_info("M", f, [2, 3]),
        helper.make_tensor_value_info("Z", f, [5, 4, 2, 2]),
    ]
    graph = helper.make_graph(nodes, "gathers", inputs, outputs)
    opsets = [helper.make_opsetid("", ai_onnx), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=7)


def multi_node_feeds(ai_onnx: int, negative: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(42)

    def ints(s: int, shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(-s if negative else 0, s, size=shape)

    feeds = {
        "X": rng.standard_normal((5, 4, 3)).astype(np.float32),
        "I": np.array([3, -4 if negative else 0], dtype=np.int64),
        "K": np.array([[4, 3], [-5 if negative else 0, 0]], dtype=np.int32),
        "L": np.array([[2, 0], [1, -3 if negative else 1]], dtype=np.int32),
    }
    if ai_onnx >= 12:
        feeds["J"] = np.stack([ints(2, (5, 2)), ints(3, (5, 2))], -1)
    elif ai_onnx == 11:
        feeds["J"] = np.stack([ints(5, (5, 2)), ints(2, (5, 2)), ints(3, (5, 2))], -1)
    if ai_onnx >= 11:
        feeds["B"] = rng.standard_normal((5, 2)).astype(np.float32)
    return feeds


def run_both_ways(ai_onnx: int, negative: bool) -> list[np.ndarray]:
    model = multi_node_model(ai_onnx)
    feeds = multi_node_feeds(ai_onnx, negative)
    plain = ReferenceEvaluator(model, new_ops=[OnnxOwnMsGatherND])
    ours = ReferenceEvaluator(model, new_ops=nx.reference_ops)
    used = [type(n) for n in ours.rt_nodes_]
    gathers = [
        c for c, node in zip(used, model.graph.node, strict=True) if "Gather" in node.op_type
    ]
    assert gathers and all(is_ndgather_class(c) for c in gathers), used
    assert not any(
        is_ndgather_class(c)
        for c, node in zip(used, model.graph.node, strict=True)
        if "Gather" not in node.op_type
    )
    got = [np.asarray(g) for g in ours.run(None, feeds)]
    for name, g, e in zip("YMZ", got, plain.run(None, feeds), strict=True):
        assert_same_values(g, np.asarray(e), f"output {name} at opset {ai_onnx}")
    return got


@pytest.mark.parametrize("ai_onnx", [11, 12, 13, 17, 21])
def test_multi_node_model_both_ways(ai_onnx: int) -> None:
    got = run_both_ways(ai_onnx, negative=True)
    try:
        import onnxruntime as ort
    except ImportError:
        return
    model = multi_node_model(ai_onnx)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    runtime = sess.run(None, multi_node_feeds(ai_onnx, negative=True))
    for name, g, r in zip("YMZ", got, runtime, strict=True):
        assert_same_values(g, np.asarray(r), f"output {name} vs onnxruntime at opset {ai_onnx}")


def test_multi_node_model_with_gather_1_rules() -> None:
    """At opset 10 the Gather nodes are Gather-1: the model runs both ways on non-negative
    indices, and through ndgather a negative index is an error (the evaluator's own Gather,
    like onnxruntime, wraps it)."""
    run_both_ways(10, negative=False)
    model = multi_node_model(10)
    feeds = multi_node_feeds(10, negative=True)
    with pytest.raises(IndexError, match="Gather"):
        ReferenceEvaluator(model, new_ops=nx.reference_ops).run(None, feeds)
    ReferenceEvaluator(model, new_ops=[OnnxOwnMsGatherND]).run(None, feeds)  # no error


# --------------------------------------------------------------------------- single nodes

ND_VERSIONS = ["GatherND-11", "GatherND-12", "GatherND-13", "ms.GatherND-1"]
G_VERSIONS = ["Gather-1", "Gather-11", "Gather-13"]
ND_WRAPPER = {
    "GatherND-11": lambda d, i, b: nx.gather_nd_11(d, i),
    "GatherND-12": nx.gather_nd_12,
    "GatherND-13": nx.gather_nd_13,
    "ms.GatherND-1": lambda d, i, b: nx.ms_gather_nd_1(d, i),
}
G_WRAPPER = {"Gather-1": nx.gather_1, "Gather-11": nx.gather_11, "Gather-13": nx.gather_13}


def types_of(version: str) -> list[str]:
    return ONNX_NUMERIC + ["string"] + (["bfloat16"] if version.endswith("-13") else [])


@pytest.mark.parametrize("version,dtype", [(v, d) for v in ND_VERSIONS for d in types_of(v)])
def test_gather_nd_nodes(version: str, dtype: str) -> None:
    op = ONNX_OPS[version]
    rng = np.random.default_rng(seed_of("ref", version, dtype))
    itypes = ["int32", "int64"] if version.startswith("ms.") else ["int64"]
    plain_ops = [OnnxOwnMsGatherND] if version.startswith("ms.") else None
    for itype in itypes:
        for n in range(6):
            b = n % 4 if version in ("GatherND-12", "GatherND-13") else 0
            case = random_gather_nd_case(
                rng, dtype_of(dtype), itype, batch_dims=b, zero_size=n == 4
            )
            attrs = {"batch_dims": b} if b else {}
            got = run_reference(op, case.data, case.indices, new_ops=nx.reference_ops, **attrs)
            want = ND_WRAPPER[version](case.data, case.indices, b)
            assert_same_values(got, want, f"{version} {case!r}")
            plain = run_reference(op, case.data, case.indices, new_ops=plain_ops, **attrs)
            assert_same_values(got, plain, f"{version} plain evaluator {case!r}")


@pytest.mark.parametrize("version,dtype", [(v, d) for v in G_VERSIONS for d in types_of(v)])
def test_gather_nodes(version: str, dtype: str) -> None:
    op = ONNX_OPS[version]
    rng = np.random.default_rng(seed_of("ref", version, dtype))
    for itype in ("int32", "int64"):
        for n in range(6):
            case = random_gather_case(
                rng, dtype_of(dtype), itype, negative=version != "Gather-1", zero_size=n == 5
            )
            got = run_reference(
                op, case.data, case.indices, new_ops=nx.reference_ops, axis=case.axis
            )
            assert_same_values(
                got, G_WRAPPER[version](case.data, case.indices, case.axis), repr(case)
            )
            plain = run_reference(op, case.data, case.indices, axis=case.axis)
            if got.dtype == object and plain.dtype != object:
                # the evaluator's own Gather hands back a bare str for a 0-d string result
                plain = plain.astype(object)
            assert_same_values(got, plain, f"{version} plain evaluator {case!r}")


def test_the_opset_selects_the_version() -> None:
    bf16 = dtype_of("bfloat16")
    data = np.arange(6, dtype=np.float32).reshape(2, 3).astype(bf16)
    idx = np.array([[1], [0]], dtype=np.int64)
    for version, ok in (("GatherND-11", False), ("GatherND-12", False), ("GatherND-13", True)):
        model = make_onnx_model(ONNX_OPS[version], onnx_elem_type(bf16), TensorProto.INT64)
        sess = ReferenceEvaluator(model, new_ops=nx.reference_ops)
        if ok:
            assert_same_values(sess.run(None, {"data": data, "indices": idx})[0], data[[1, 0]])
        else:
            with pytest.raises(TypeError, match="GatherND"):
                sess.run(None, {"data": data, "indices": idx})
    for opset in (1, 11, 13):
        model = make_onnx_model(ONNX_OPS[f"Gather-{opset}"], TensorProto.FLOAT, TensorProto.INT32)
        sess = ReferenceEvaluator(model, new_ops=nx.reference_ops)
        feeds = {"data": np.arange(3, dtype=np.float32), "indices": np.array([-1], np.int32)}
        if opset == 1:
            with pytest.raises(IndexError, match="Gather"):
                sess.run(None, feeds)
        else:
            assert_same_values(sess.run(None, feeds)[0], np.array([2], np.float32))


def test_errors_come_out_of_run() -> None:
    cases: list[tuple[str, dict[str, int], np.ndarray, np.ndarray, type[Exception]]] = [
        ("GatherND-13", {}, np.arange(6).reshape(2, 3), np.array([[2]], np.int64), IndexError),
        ("GatherND-13", {}, np.arange(6).reshape(2, 3), np.array([[1]], np.int32), TypeError),
        (
            "GatherND-12",
            {"batch_dims": -1},
            np.arange(6).reshape(2, 3),
            np.array([[1], [0]]),
            ValueError,
        ),
        (
            "GatherND-13",
            {"batch_dims": 1},
            np.arange(6).reshape(1, 6),
            np.array([[1], [4]]),
            ValueError,
        ),
        ("ms.GatherND-1", {}, np.arange(6).reshape(2, 3), np.array([[1, 3]], np.int32), IndexError),
        ("Gather-11", {"axis": 2}, np.arange(6).reshape(2, 3), np.array([0]), ValueError),
        ("Gather-13", {"axis": 1}, np.arange(6).reshape(2, 3), np.array([-4]), IndexError),
    ]
    for version, attrs, data, idx, exc in cases:
        with pytest.raises(exc) as e:
            run_reference(ONNX_OPS[version], data, idx, new_ops=nx.reference_ops, **attrs)
        assert "Gather" in str(e.value), (version, str(e.value))
