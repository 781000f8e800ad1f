"""ndgather.onnx against onnxruntime's CPU provider on seeded random inputs: same shape, dtype
and bytes (strings: same values).

Covered: ai.onnx GatherND-11/12/13, com.microsoft GatherND-1, Gather-1/11/13; every data type
onnxruntime has a kernel for (complex has none: those types are checked against the onnx
reference evaluator in ``test_onnx_reference_evaluator.py``); int32 and int64 indices where
the version allows them; batch_dims 0..3; negative indices where the version allows them;
zero-size dimensions; negative ``axis``.

Where onnxruntime departs from the ONNX specification, ndgather follows the specification;
each such place has a ``test_divergence_*`` test that asserts what the runtime really does,
and a row in docs/semantics.md.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import ndgather.onnx as nx  # noqa: E402
from reference import gather_nd_loop  # noqa: E402
from runtimes import ONNX_OPS, ort_session_for, run_onnxruntime  # noqa: E402
from wrapper_cases import (  # noqa: E402
    ONNX_NUMERIC,
    assert_same_values,
    dtype_of,
    random_gather_case,
    random_gather_nd_case,
    random_strings,
    seed_of,
    take,
)

ORT_TYPES = [t for t in ONNX_NUMERIC if not t.startswith("complex")] + ["string"]

ND = {
    "GatherND-11": (lambda d, i, b: nx.gather_nd_11(d, i), ["int64"], False),
    "GatherND-12": (nx.gather_nd_12, ["int64"], True),
    "GatherND-13": (nx.gather_nd_13, ["int64"], True),
    "ms.GatherND-1": (lambda d, i, b: nx.ms_gather_nd_1(d, i), ["int32", "int64"], False),
}
G = {
    "Gather-1": (nx.gather_1, False),
    "Gather-11": (nx.gather_11, True),
    "Gather-13": (nx.gather_13, True),
}
CASES_PER_TEST = 8


def types_of(version: str) -> list[str]:
    return ORT_TYPES + (["bfloat16"] if version.endswith("-13") else [])


def ort_drops_strings(case_data: np.ndarray, axis: int) -> bool:
    """onnxruntime's string Gather copies only the first string of each slice."""
    a = axis % case_data.ndim
    return case_data.dtype == object and int(np.prod(case_data.shape[a + 1 :])) > 1


@pytest.mark.parametrize(
    "version,dtype,itype", [(v, d, i) for v in ND for d in types_of(v) for i in ND[v][1]]
)
def test_gather_nd(version: str, dtype: str, itype: str) -> None:
    fn, _, has_batch_dims = ND[version]
    op = ONNX_OPS[version]
    rng = np.random.default_rng(seed_of("ort", version, dtype, itype))
    for n in range(CASES_PER_TEST):
        b = n % 4 if has_batch_dims else 0
        case = random_gather_nd_case(
            rng, dtype_of(dtype), itype, batch_dims=b, zero_size=n % 3 == 2
        )
        got = fn(case.data, case.indices, b)
        runtime = run_onnxruntime(op, case.data, case.indices, **({"batch_dims": b} if b else {}))
        assert_same_values(got, runtime, f"{version} {case!r}")


@pytest.mark.parametrize(
    "version,dtype,itype", [(v, d, i) for v in G for d in types_of(v) for i in ("int32", "int64")]
)
def test_gather(version: str, dtype: str, itype: str) -> None:
    fn, negative = G[version]
    op = ONNX_OPS[version]
    rng = np.random.default_rng(seed_of("ort", version, dtype, itype))
    compared = 0
    for n in range(CASES_PER_TEST):
        case = random_gather_case(
            rng, dtype_of(dtype), itype, negative=negative, zero_size=n % 3 == 2
        )
        got = fn(case.data, case.indices, case.axis)
        assert_same_values(got, take(case.data, case.indices, case.axis), f"{version} {case!r}")
        if ort_drops_strings(case.data, case.axis) and got.size:
            continue  # see test_divergence_string_gather_drops_strings
        runtime = run_onnxruntime(op, case.data, case.indices, axis=case.axis)
        assert_same_values(got, runtime, f"{version} {case!r}")
        compared += 1
    assert compared >= 2


@pytest.mark.parametrize("version", list(G))
def test_string_gather_on_the_last_axis(version: str) -> None:
    """Strings: where each index selects one string, onnxruntime agrees."""
    rng = np.random.default_rng(seed_of("ort-str", version))
    fn = G[version][0]
    for shape in ((7,), (3, 5), (2, 3, 4)):
        data = random_strings(rng, shape)
        idx = rng.integers(0, shape[-1], size=(2, 3)).astype(np.int64)
        runtime = run_onnxruntime(ONNX_OPS[version], data, idx, axis=-1)
        assert_same_values(fn(data, idx, -1), runtime, f"{version} {shape}")


# --------------------------------------------------------------------------- both reject


def runtime_rejects(op_name: str, data: np.ndarray, indices: np.ndarray, **attrs: int) -> bool:
    try:
        run_onnxruntime(ONNX_OPS[op_name], data, indices, **attrs)
    except Exception:
        return True
    return False


@pytest.mark.parametrize("version", list(ND))
def test_out_of_range_both_raise(version: str) -> None:
    fn, itypes, _ = ND[version]
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for idx in ([[2]], [[0, 3]], [[-3, 0]], [[1, 2, -5]], [[0], [7]]):
        for itype in itypes:
            i = np.array(idx, dtype=itype)
            assert runtime_rejects(version, data, i)
            with pytest.raises(IndexError, match="GatherND"):
                fn(data, i, 0)


@pytest.mark.parametrize("version", list(G))
def test_gather_out_of_range_both_raise(version: str) -> None:
    fn = G[version][0]
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    for idx, axis in (([3], 0), ([-4], 0), ([4], 1), ([0, -5], -1)):
        for itype in ("int32", "int64"):
            i = np.array(idx, dtype=itype)
            assert runtime_rejects(version, data, i, axis=axis)
            with pytest.raises(IndexError, match="Gather"):
                fn(data, i, axis)


@pytest.mark.parametrize("version", list(G))
def test_gather_axis_out_of_range_both_raise(version: str) -> None:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    for axis in (2, -3):
        assert runtime_rejects(version, data, np.array([0]), axis=axis)
        with pytest.raises(ValueError, match="Gather"):
            G[version][0](data, np.array([0]), axis)


def test_gather_nd_negative_batch_dims_both_raise() -> None:
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[[1], [0]], [[0], [1]]])
    for version in ("GatherND-12", "GatherND-13"):
        assert runtime_rejects(version, data, idx, batch_dims=-1)
        with pytest.raises(ValueError, match="GatherND"):
            ND[version][0](data, idx, -1)


@pytest.mark.parametrize("version", ["GatherND-11", "GatherND-12", "GatherND-13"])
def test_int32_indices_both_reject(version: str) -> None:
    """ai.onnx GatherND takes int64 indices only: onnxruntime has no kernel for int32."""
    with pytest.raises(Exception, match="(?i)invalid|not implemented|kernel"):
        ort_session_for(ONNX_OPS[version], np.float32, np.int32)
    with pytest.raises(TypeError, match="GatherND"):
        ND[version][0](np.arange(3.0), np.array([[1]], dtype=np.int32), 0)


@pytest.mark.parametrize(
    "version", ["GatherND-11", "GatherND-12", "ms.GatherND-1", "Gather-1", "Gather-11"]
)
def test_bfloat16_before_13_both_reject(version: str) -> None:
    with pytest.raises(Exception, match="(?i)invalid|not implemented|kernel|type"):
        ort_session_for(ONNX_OPS[version], dtype_of("bfloat16"), np.int64)
    data = np.zeros((2, 2), dtype=dtype_of("bfloat16"))
    with pytest.raises(TypeError):
        if version in ND:
            ND[version][0](data, np.array([[1]]), 0)
        else:
            G[version][0](data, np.array([1]), 0)


# --------------------------------------------------------------------------- divergences


def test_divergence_gather_1_wraps_negative_indices() -> None:
    """Gather-1 allows indices in [0, s-1]; onnxruntime wraps negatives for every opset."""
    data = np.arange(5, dtype=np.float32)
    idx = np.array([-1, -5, 2], dtype=np.int64)
    runtime = run_onnxruntime(ONNX_OPS["Gather-1"], data, idx, axis=0)
    assert runtime.tolist() == [4.0, 0.0, 2.0]  # what onnxruntime does
    with pytest.raises(IndexError, match="Gather"):
        nx.gather_1(data, idx)  # what the specification says


@pytest.mark.parametrize("version", ["GatherND-12", "GatherND-13"])
def test_divergence_batch_dimensions_broadcast_and_split(version: str) -> None:
    """The first batch_dims dimensions of data and indices must be equal; onnxruntime
    broadcasts a data batch of 1, and splits an indices batch that is a multiple."""
    fn = ND[version][0]
    data = np.arange(6, dtype=np.float32).reshape(1, 6)
    idx = np.array([[1], [4]], dtype=np.int64)
    runtime = run_onnxruntime(ONNX_OPS[version], data, idx, batch_dims=1)
    assert runtime.tolist() == [1.0, 4.0]  # both index rows read the single data row
    with pytest.raises(ValueError, match="GatherND"):
        fn(data, idx, 1)
    data = np.arange(12, dtype=np.float32).reshape(2, 6)
    idx = np.array([[1], [4], [2], [3]], dtype=np.int64)
    runtime = run_onnxruntime(ONNX_OPS[version], data, idx, batch_dims=1)
    assert runtime.tolist() == [1.0, 4.0, 8.0, 9.0]  # rows 0-1 read batch 0, rows 2-3 batch 1
    with pytest.raises(ValueError, match="GatherND"):
        fn(data, idx, 1)


@pytest.mark.parametrize("version", list(ND))
def test_divergence_empty_index_tuples(version: str) -> None:
    """indices.shape[-1] must be in [1, r - b]; onnxruntime accepts 0 and returns whole
    (batch) slices of data."""
    fn, itypes, _ = ND[version]
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    idx = np.zeros((4, 0), dtype=itypes[-1])
    runtime = run_onnxruntime(ONNX_OPS[version], data, idx)
    assert runtime.shape == (4, 2, 3) and (runtime == data).all()
    with pytest.raises(ValueError, match="GatherND"):
        fn(data, idx, 0)


@pytest.mark.parametrize("version", list(G))
def test_divergence_string_gather_drops_strings(version: str) -> None:
    """Strings: when an index selects more than one string (axis not the last), onnxruntime
    copies the first string of each selected slice and leaves the others empty."""
    data = np.array([f"s{i}" for i in range(24)], dtype=object).reshape(2, 3, 4)
    for axis, idx in ((0, [1, 0]), (1, [2, 0]), (1, [[2]])):
        i = np.array(idx, dtype=np.int64)
        expected = take(data, i, axis)
        runtime = run_onnxruntime(ONNX_OPS[version], data, i, axis=axis)
        got = G[version][0](data, i, axis)
        assert_same_values(got, expected, "ndgather follows the spec")
        inner = int(np.prod(data.shape[axis + 1 :]))
        first_only = expected.copy().reshape(-1, inner)
        first_only[:, 1:] = ""
        first_only = first_only.reshape(expected.shape)
        assert_same_values(runtime, first_only, "what onnxruntime does")


@pytest.mark.parametrize("version", list(ND) + list(G))
def test_divergence_no_complex_kernel(version: str) -> None:
    """complex64/complex128 are types of every version; onnxruntime has no kernel for them
    (ndgather's results for them are compared with the onnx reference evaluator)."""
    for dtype in (np.complex64, np.complex128):
        with pytest.raises(Exception, match="(?i)not implemented|kernel|fail"):
            ort_session_for(ONNX_OPS[version], dtype, np.int64)
        data = (np.arange(6) + 1j * np.arange(6)).astype(dtype).reshape(2, 3)
        if version in ND:
            got = ND[version][0](data, np.array([[1], [0]]), 0)
            assert_same_values(got, gather_nd_loop(data, np.array([[1], [0]])))
        else:
            assert_same_values(G[version][0](data, np.array([1, 0]), 0), data[[1, 0]])
