"""Every GatherND and Gather node test case that the ``onnx`` package ships, bit-exact.

The cases come from the package's own generators (``onnx/backend/test/case/node/gather*.py``,
the ``export_*`` functions that produce its backend test suite). They are collected by
running those generators with ``expect`` replaced by a function that records the node, the
inputs and the expected outputs. Each case then runs

* through the ``ndgather.onnx`` wrapper of the model's opset, and through every other
  wrapper version whose rules the case satisfies;
* through ``onnx.reference.ReferenceEvaluator(model, new_ops=ndgather.onnx.reference_ops)``,
  on the shipped model and re-stamped at each opset where the operator changed;
* on onnxruntime, when it is installed.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ndgather.onnx as nx  # noqa: E402
from wrapper_cases import assert_same_values  # noqa: E402


@dataclass
class BackendCase:
    name: str
    node: Any
    model: Any
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]

    @property
    def op_type(self) -> str:
        return str(self.node.op_type)

    @property
    def opset(self) -> int:
        return next(o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx"))

    @property
    def attrs(self) -> dict[str, Any]:
        return {a.name: onnx.helper.get_attribute_value(a) for a in self.node.attribute}


def generator_files() -> list[str]:
    import onnx.backend.test.case.node as node_pkg

    folder = os.path.dirname(node_pkg.__file__)
    names = sorted(f for f in os.listdir(folder) if f.startswith("gather") and f.endswith(".py"))
    return [os.path.join(folder, f) for f in names if f != "gatherelements.py"]


def collect_cases() -> list[BackendCase]:
    """Run the onnx package's Gather/GatherND generators, recording what they ``expect``."""
    import onnx.backend.test.case.node as node_pkg

    recorded: list[tuple[Any, list[np.ndarray], list[np.ndarray], str, dict[str, Any]]] = []

    def record(node: Any, inputs: Any, outputs: Any, name: str, **kwargs: Any) -> None:
        recorded.append((copy.deepcopy(node), list(inputs), list(outputs), name, kwargs))

    saved = node_pkg.expect
    node_pkg.expect = record
    try:
        for path in generator_files():
            mod_name = "_ndgather_onnx_cases_" + os.path.basename(path)[:-3]
            spec = importlib.util.spec_from_file_location(mod_name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)  # the classes' metaclass runs every export_*
    finally:
        node_pkg.expect = saved

    cases = []
    for node, inputs, outputs, name, kwargs in recorded:
        if node.op_type not in ("Gather", "GatherND"):
            continue
        opsets = kwargs.get("opset_imports") or [
            onnx.helper.make_operatorsetid(
                node.domain, onnx.defs.get_schema(node.op_type, domain=node.domain).since_version
            )
        ]
        model = single_node_model(node, inputs, outputs, opsets)
        cases.append(BackendCase(name, node, model, inputs, outputs))
    return cases


def single_node_model(node: Any, inputs: list[Any], outputs: list[Any], opsets: list[Any]) -> Any:
    """The model ``onnx``'s ``expect`` builds: one node, inputs and outputs typed as given."""
    h = onnx.helper

    def info(name: str, arr: np.ndarray) -> Any:
        return h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(arr.dtype), arr.shape)

    graph = h.make_graph(
        [node],
        "case",
        [info(n, a) for n, a in zip(node.input, inputs, strict=True)],
        [info(n, a) for n, a in zip(node.output, outputs, strict=True)],
    )
    return h.make_model(graph, opset_imports=opsets, ir_version=8)


def restamp(model: Any, opset: int) -> Any:
    m = copy.deepcopy(model)
    del m.opset_import[:]
    m.opset_import.extend([onnx.helper.make_operatorsetid("", opset)])
    return m


CASES = collect_cases()
IDS = [c.name for c in CASES]


def test_the_generators_were_found() -> None:
    names = {os.path.basename(p) for p in generator_files()}
    assert {"gather.py", "gathernd.py"} <= names
    assert {c.op_type for c in CASES} == {"Gather", "GatherND"}
    # the cases of onnx 1.16 - 1.23; a newer onnx may add more, never fewer
    known = {
        "test_gather_0",
        "test_gather_1",
        "test_gather_2d_indices",
        "test_gather_negative_indices",
        "test_gathernd_example_int32",
        "test_gathernd_example_float32",
        "test_gathernd_example_int32_batch_dim1",
    }
    assert known <= set(IDS), sorted(known - set(IDS))


def wrappers_for(case: BackendCase) -> list[tuple[str, Any]]:
    """(label, call) of every wrapper version whose rules accept the case."""
    data, indices = case.inputs
    a = case.attrs
    out: list[tuple[str, Any]] = []
    negative = bool((indices < 0).any())
    if case.op_type == "GatherND":
        b = int(a.get("batch_dims", 0))
        out.append(
            (
                f"gather_nd(opset={case.opset})",
                lambda: nx.gather_nd(data, indices, b, opset=case.opset),
            )
        )
        out.append(("gather_nd_12", lambda: nx.gather_nd_12(data, indices, b)))
        out.append(("gather_nd_13", lambda: nx.gather_nd_13(data, indices, batch_dims=b)))
        if b == 0:
            out.append(("gather_nd_11", lambda: nx.gather_nd_11(data, indices)))
            out.append(("ms_gather_nd_1", lambda: nx.ms_gather_nd_1(data, indices)))
            out.append(
                ("ms_gather_nd_1/int32", lambda: nx.ms_gather_nd_1(data, indices.astype(np.int32)))
            )
    else:
        axis = int(a.get("axis", 0))
        out.append(("gather_13", lambda: nx.gather_13(data, indices, axis)))
        out.append(("gather_11", lambda: nx.gather_11(data, indices, axis=axis)))
        out.append(("gather_11/int32", lambda: nx.gather_11(data, indices.astype(np.int32), axis)))
        if not negative:
            out.append(("gather_1", lambda: nx.gather_1(data, indices, axis)))
    return out


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_wrappers(case: BackendCase) -> None:
    (expected,) = case.outputs
    for label, call in wrappers_for(case):
        assert_same_values(call(), expected, f"{case.name} via {label}")


def test_gather_1_rejects_the_negative_indices_case() -> None:
    case = next(c for c in CASES if c.name == "test_gather_negative_indices")
    data, indices = case.inputs
    with pytest.raises(IndexError, match="Gather"):
        nx.gather_1(data, indices, 0)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reference_evaluator_with_ndgather(case: BackendCase) -> None:
    from onnx.reference import ReferenceEvaluator

    (expected,) = case.outputs
    feeds = dict(zip(case.node.input, case.inputs, strict=True))
    negative = bool((case.inputs[1] < 0).any())
    if case.op_type == "GatherND":
        opsets = [13, 18] if case.attrs.get("batch_dims", 0) else [11, 12, 13, 21]
    else:
        opsets = ([] if negative else [1, 10]) + [11, 12, 13, 21]
    models = [case.model] + [restamp(case.model, v) for v in opsets]
    for model in models:
        sess = ReferenceEvaluator(model, new_ops=nx.reference_ops)
        kinds = {type(n).__module__.split(".")[0] for n in sess.rt_nodes_}
        assert kinds == {"ndgather"}, f"the evaluator did not use ndgather's classes: {kinds}"
        (got,) = sess.run(None, feeds)
        label = f"{case.name} at opset {model.opset_import[0].version}"
        assert_same_values(np.asarray(got), expected, label)
        # and the evaluator's own implementation agrees
        (plain,) = ReferenceEvaluator(model).run(None, feeds)
        assert_same_values(np.asarray(got), np.asarray(plain), label + " (plain evaluator)")
    if negative and case.op_type == "Gather":
        # Gather-1 forbids negative indices: through ndgather, the evaluator raises
        sess = ReferenceEvaluator(restamp(case.model, 10), new_ops=nx.reference_ops)
        with pytest.raises(IndexError):
            sess.run(None, feeds)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_onnxruntime(case: BackendCase) -> None:
    ort = pytest.importorskip("onnxruntime")
    from runtimes import _ort

    _ort()  # quiet logger
    sess = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, dict(zip(case.node.input, case.inputs, strict=True)))
    assert_same_values(np.asarray(got), case.outputs[0], case.name)
    # and the wrapper of the model's opset gives the runtime's bytes
    assert_same_values(wrappers_for(case)[0][1](), np.asarray(got), case.name)
