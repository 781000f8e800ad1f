"""ndgather.onnx: one function per ONNX operator version, each with its version's rules.

Checked against the NumPy oracles of ``reference.py`` (no runtime needed): results for every
type the version allows, and a ``TypeError`` / ``ValueError`` / ``IndexError`` naming the
operator and version for every input it forbids. The runtimes themselves are compared in
``test_differential_onnxruntime.py`` and ``test_onnx_reference_evaluator.py``.
"""

from __future__ import annotations

import inspect

import ndgather
import ndgather.onnx as nx
import numpy as np
import pytest
from reference import assert_result_array, assert_same, gather_nd_loop
from wrapper_cases import (
    ONNX_NUMERIC,
    dtype_of,
    names_operator,
    random_gather_case,
    random_gather_nd_case,
    seed_of,
    take,
)

GATHER_ND = {
    "GatherND-11": (nx.gather_nd_11, "GatherND", 11, ""),
    "GatherND-12": (nx.gather_nd_12, "GatherND", 12, ""),
    "GatherND-13": (nx.gather_nd_13, "GatherND", 13, ""),
    "ms.GatherND-1": (nx.ms_gather_nd_1, "GatherND", 1, "com.microsoft"),
}
GATHER = {
    "Gather-1": (nx.gather_1, "Gather", 1),
    "Gather-11": (nx.gather_11, "Gather", 11),
    "Gather-13": (nx.gather_13, "Gather", 13),
}
HAS_BATCH_DIMS = {"GatherND-12", "GatherND-13"}
INDEX_TYPES = {
    "GatherND-11": ["int64"],
    "GatherND-12": ["int64"],
    "GatherND-13": ["int64"],
    "ms.GatherND-1": ["int32", "int64"],
    "Gather-1": ["int32", "int64"],
    "Gather-11": ["int32", "int64"],
    "Gather-13": ["int32", "int64"],
}
BFLOAT16_FROM = {"GatherND-13", "Gather-13"}
ALL_TYPES = ONNX_NUMERIC + ["string", "bfloat16"]


def types_of(name: str) -> list[str]:
    return ONNX_NUMERIC + ["string"] + (["bfloat16"] if name in BFLOAT16_FROM else [])


def call_nd(name: str, data: object, indices: object, b: int = 0) -> np.ndarray:
    fn = GATHER_ND[name][0]
    if name in HAS_BATCH_DIMS:
        return fn(data, indices, b)
    assert b == 0
    return fn(data, indices)


def check_names(excinfo: pytest.ExceptionInfo[BaseException], name: str) -> None:
    if name in GATHER_ND:
        _, op, version, domain = GATHER_ND[name]
    else:
        (_, op, version), domain = GATHER[name], ""
    msg = str(excinfo.value)
    assert names_operator(msg, op, version, domain), f"message does not name {name}: {msg!r}"


# --------------------------------------------------------------------------- signatures


def test_signatures() -> None:
    """The exact signatures of api.md section 2."""

    def sig(fn: object) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    pk, kw, empty = (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
        (inspect.Parameter.empty),
    )
    assert sig(nx.gather_nd_11) == [("data", pk, empty), ("indices", pk, empty)]
    for fn in (nx.gather_nd_12, nx.gather_nd_13):
        assert sig(fn) == [("data", pk, empty), ("indices", pk, empty), ("batch_dims", pk, 0)]
    assert sig(nx.gather_nd) == [
        ("data", pk, empty),
        ("indices", pk, empty),
        ("batch_dims", pk, 0),
        ("opset", kw, 13),
    ]
    assert sig(nx.ms_gather_nd_1) == [("data", pk, empty), ("indices", pk, empty)]
    for fn in (nx.gather_1, nx.gather_11, nx.gather_13):
        assert sig(fn) == [("data", pk, empty), ("indices", pk, empty), ("axis", pk, 0)]
    for fn in (*[v[0] for v in GATHER_ND.values()], *[v[0] for v in GATHER.values()]):
        assert fn.__doc__ and fn.__doc__.strip(), fn
        assert inspect.signature(fn).return_annotation not in (inspect.Signature.empty, None)


def test_reference_ops_is_a_list_of_classes() -> None:
    pytest.importorskip("onnx")  # the classes derive from onnx.reference.op_run.OpRun
    ops = nx.reference_ops
    assert isinstance(ops, list) and len(ops) >= 3
    assert all(isinstance(c, type) for c in ops)
    keys = {(getattr(c, "op_domain", None), c.__name__) for c in ops}
    assert {("", "GatherND"), ("", "Gather"), ("com.microsoft", "GatherND")} <= keys


# --------------------------------------------------------------------------- results


@pytest.mark.parametrize("name,dtype", [(n, d) for n in GATHER_ND for d in types_of(n)])
def test_gather_nd_results(name: str, dtype: str) -> None:
    rng = np.random.default_rng(seed_of(name, dtype))
    for itype in INDEX_TYPES[name]:
        for n in range(8):
            b = 0 if name not in HAS_BATCH_DIMS else n % 4
            case = random_gather_nd_case(
                rng, dtype_of(dtype), itype, batch_dims=b, zero_size=n % 3 == 2
            )
            got = call_nd(name, case.data, case.indices, case.batch_dims)
            assert_same(got, gather_nd_loop(case.data, case.indices, case.batch_dims))
            assert_result_array(got, case.data, case.indices)


@pytest.mark.parametrize("name,dtype", [(n, d) for n in GATHER for d in types_of(n)])
def test_gather_results(name: str, dtype: str) -> None:
    fn = GATHER[name][0]
    rng = np.random.default_rng(seed_of(name, dtype))
    for itype in INDEX_TYPES[name]:
        for n in range(8):
            case = random_gather_case(
                rng,
                dtype_of(dtype),
                itype,
                negative=name != "Gather-1",
                zero_size=n % 3 == 2,
            )
            got = fn(case.data, case.indices, case.axis)
            assert_same(got, take(case.data, case.indices, case.axis))
            assert_result_array(got, case.data, case.indices)


def test_strings_are_object_arrays_of_str() -> None:
    data = np.array([["a", "bb"], ["", "ccc"]], dtype=object)
    for name in GATHER_ND:
        got = call_nd(name, data, np.array([[1, 0], [0, 1]], dtype=np.int64))
        assert got.dtype == object and got.tolist() == ["", "bb"]
    for name, (fn, _, _) in GATHER.items():
        got = fn(data, np.array([1, 0], dtype=np.int64), 1)
        assert got.dtype == object and got.tolist() == [["bb", "a"], ["ccc", ""]], name
    # fixed-width str / bytes are accepted too
    for arr in (data.astype("U3"), data.astype("S3")):
        assert_same(nx.gather_nd_13(arr, np.array([[1]])), arr[[1]])
        assert_same(nx.gather_11(arr, np.array([-1]), axis=-1), arr[:, [1]])


def test_negative_indices_wrap_in_gather_nd_and_gather_11() -> None:
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[-1, -3], [0, -1]], dtype=np.int64)
    expected = data[[-1, 0], [-3, -1]]
    for name in GATHER_ND:
        assert_same(call_nd(name, data, idx), expected)
    # batch_dims > 0: a negative index counts on its own axis (b + j), not axis 0
    idx_b = np.array([[-1], [-3]], dtype=np.int64)
    for fn in (nx.gather_nd_12, nx.gather_nd_13):
        assert_same(fn(data, idx_b, 1), np.stack([data[0, -1], data[1, -3]]))
    for fn in (nx.gather_11, nx.gather_13):
        assert_same(fn(data, np.array([-4, -1, 3]), axis=2), data[:, :, [0, 3, 3]])
        assert_same(fn(data, np.array([-2, 1], dtype=np.int32)), data[[0, 1]])


def test_dispatch_by_opset() -> None:
    data = np.arange(8).reshape(2, 2, 2)
    idx = np.array([[1], [0]])
    for opset in (11, 12, 13, 14, 18, 21, 23):
        assert_same(nx.gather_nd(data, idx, opset=opset), data[[1, 0]])
    for opset in (12, 13, 18):
        assert_same(nx.gather_nd(data, idx, 1, opset=opset), data[[0, 1], [1, 0]])
    bf16 = dtype_of("bfloat16")
    assert nx.gather_nd(data.astype(bf16), idx, opset=13).dtype == bf16
    assert nx.gather_nd(data.astype(bf16), idx, opset=20).dtype == bf16
    for opset in (11, 12):
        with pytest.raises(TypeError) as e:
            nx.gather_nd(data.astype(bf16), idx, opset=opset)
        assert names_operator(str(e.value), "GatherND", opset), e.value
    with pytest.raises(ValueError) as e:
        nx.gather_nd(data, idx, 1, opset=11)  # GatherND-11 has no batch_dims
    assert names_operator(str(e.value), "GatherND", 11), e.value
    for opset in (10, 1, 0, -13):
        with pytest.raises(ValueError, match="GatherND"):
            nx.gather_nd(data, idx, opset=opset)


def test_dispatch_uses_the_version_rules() -> None:
    """opset=12 is GatherND-12 exactly: same errors, same int64-only indices."""
    data = np.arange(6).reshape(2, 3)
    with pytest.raises(TypeError) as e:
        nx.gather_nd(data, np.array([[0]], dtype=np.int32), opset=12)
    assert names_operator(str(e.value), "GatherND", 12), e.value
    with pytest.raises(ValueError) as e:
        nx.gather_nd(data, np.array([[0]]), -1, opset=13)
    assert names_operator(str(e.value), "GatherND", 13), e.value


def test_array_likes() -> None:
    assert_same(nx.gather_nd_13([[0, 1], [2, 3]], np.array([[1, 1]])), np.array([3]))
    assert_same(nx.gather_13([[0, 1], [2, 3]], np.array([1]), axis=np.int64(1)), [[1], [3]])
    assert_same(
        nx.gather_nd_12(np.arange(4).reshape(2, 2), np.array([[1], [0]]), np.int8(1)), [1, 2]
    )


def test_scalar_indices_in_gather() -> None:
    data = np.arange(6).reshape(2, 3)
    for name, (fn, _, _) in GATHER.items():
        got = fn(data, np.array(2, dtype=np.int32), 1)
        assert_same(got, data[:, 2])
        got = fn(data, np.array(1, dtype=np.int64))
        assert_same(got, data[1]), name


# --------------------------------------------------------------------------- type constraints

REJECTED_DATA = ["datetime64[s]", "timedelta64[ms]", "longdouble", "V4", "float8_e4m3fn"]


def call_any(name: str, data: object, rows: object) -> np.ndarray:
    """``name`` applied to ``data`` with the row indices ``rows`` (a 1-D list/array):
    Gather on axis 0, or GatherND with one-element index tuples."""
    rows = np.asarray(rows)
    if name in GATHER:
        return GATHER[name][0](data, rows)
    return call_nd(name, data, rows.reshape(-1, 1))


@pytest.mark.parametrize("name", list(GATHER_ND) + list(GATHER))
def test_data_types(name: str) -> None:
    idx = np.array([0], dtype=np.int64)
    allowed = types_of(name)
    for dtype in ALL_TYPES + REJECTED_DATA:
        if dtype == "longdouble" and np.dtype(np.longdouble).itemsize == 8:
            continue  # longdouble is float64 on this platform
        data = np.zeros((2, 2), dtype=dtype_of(dtype))
        if dtype in allowed:
            assert call_any(name, data, idx).dtype == data.dtype, (name, dtype)
        else:
            with pytest.raises(TypeError) as e:
                call_any(name, data, idx)
            check_names(e, name)
    # structured records are not ONNX types
    with pytest.raises(TypeError) as e:
        call_any(name, np.zeros((2, 2), dtype=[("a", "<i4"), ("b", "<f4")]), idx)
    check_names(e, name)


@pytest.mark.parametrize("name", list(GATHER_ND) + list(GATHER))
@pytest.mark.parametrize(
    "itype",
    ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "bool"],
)
def test_index_types(name: str, itype: str) -> None:
    data = np.arange(6).reshape(2, 3)
    idx = np.array([1], dtype=itype)
    if itype in INDEX_TYPES[name]:
        assert_same(call_any(name, data, idx), data[[1]])
    else:
        with pytest.raises(TypeError) as e:
            call_any(name, data, idx)
        check_names(e, name)


def test_no_batch_dims_where_the_version_has_none() -> None:
    data = np.arange(8).reshape(2, 2, 2)
    idx = np.array([[1], [0]])
    with pytest.raises(TypeError):
        nx.gather_nd_11(data, idx, 1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        nx.ms_gather_nd_1(data, idx, batch_dims=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        nx.gather_13(data, idx, 0, 0)  # type: ignore[call-arg]


# --------------------------------------------------------------------------- attribute rules


@pytest.mark.parametrize("name", sorted(HAS_BATCH_DIMS))
def test_gather_nd_batch_dims_range(name: str) -> None:
    data = np.arange(24).reshape(2, 3, 4)
    idx = np.zeros((2, 3, 1), dtype=np.int64)
    for b in (-1, -2, -3):  # never negative (ONNX PR #8465)
        with pytest.raises(ValueError) as e:
            call_nd(name, data, idx, b)
        check_names(e, name)
    for b in (3, 4, 100):  # b < min(q, r) = 3
        with pytest.raises(ValueError) as e:
            call_nd(name, data, idx, b)
        check_names(e, name)
    assert call_nd(name, data, idx, 2).shape == (2, 3)


@pytest.mark.parametrize("name", list(GATHER_ND))
def test_gather_nd_shape_rules(name: str) -> None:
    data = np.arange(24).reshape(2, 3, 4)
    bad = [
        np.zeros((2, 0), dtype=np.int64),  # indices.shape[-1] == 0 (onnxruntime accepts it)
        np.zeros((2, 4), dtype=np.int64),  # indices.shape[-1] > r
        np.array(0, dtype=np.int64),  # q == 0
    ]
    for idx in bad:
        with pytest.raises(ValueError) as e:
            call_nd(name, data, idx)
        check_names(e, name)
    with pytest.raises(ValueError) as e:
        call_nd(name, np.array(5), np.zeros((1, 1), dtype=np.int64))  # r == 0
    check_names(e, name)
    if name in HAS_BATCH_DIMS:
        # batch dimensions must be equal: onnxruntime broadcasts a batch of 1 (not the spec)
        for didx in (np.zeros((3, 1), dtype=np.int64), np.zeros((1, 1), dtype=np.int64)):
            with pytest.raises(ValueError) as e:
                call_nd(name, data, didx, 1)
            check_names(e, name)
        with pytest.raises(ValueError) as e:  # indices.shape[-1] > r - b
            call_nd(name, data, np.zeros((2, 3), dtype=np.int64), 1)
        check_names(e, name)


@pytest.mark.parametrize("name", list(GATHER))
def test_gather_axis_range(name: str) -> None:
    fn = GATHER[name][0]
    data = np.arange(24).reshape(2, 3, 4)
    idx = np.array([0, 1], dtype=np.int64)
    for axis in range(-3, 3):
        assert_same(fn(data, idx, axis), np.take(data, idx, axis=axis))
    for axis in (3, 4, -4, -100):
        with pytest.raises(ValueError) as e:
            fn(data, idx, axis)
        check_names(e, name)
    with pytest.raises(ValueError) as e:
        fn(np.array(5), idx)  # rank 0: no axis exists
    check_names(e, name)


# --------------------------------------------------------------------------- index rules


def test_gather_1_rejects_negative_indices() -> None:
    data = np.arange(12).reshape(3, 4)
    for idx in ([-1], [0, -3], [[2, 1], [0, -1]]):
        for itype in ("int32", "int64"):
            with pytest.raises(IndexError) as e:
                nx.gather_1(data, np.array(idx, dtype=itype))
            check_names(e, "Gather-1")
    with pytest.raises(IndexError) as e:
        nx.gather_1(data, np.array([1, -1]), axis=1)
    check_names(e, "Gather-1")


@pytest.mark.parametrize("name", list(GATHER))
def test_gather_out_of_range(name: str) -> None:
    fn = GATHER[name][0]
    data = np.arange(12).reshape(3, 4)
    for idx, axis in (([3], 0), ([0, 4], 1), ([-4], 0), ([-5], 1), ([2**31 - 1], 0)):
        for itype in ("int32", "int64"):
            with pytest.raises(IndexError) as e:
                fn(data, np.array(idx, dtype=itype), axis)
            check_names(e, name)
    with pytest.raises(IndexError):
        fn(data, np.array([-(2**63), 0]), 0)
    with pytest.raises(IndexError):  # every index is out of range on an empty axis
        fn(np.zeros((0, 2)), np.array([0]), 0)


@pytest.mark.parametrize("name", list(GATHER_ND))
def test_gather_nd_out_of_range(name: str) -> None:
    data = np.arange(24).reshape(2, 3, 4)
    for idx in ([[2]], [[0, 3]], [[1, 2, 4]], [[-3]], [[0, -4]], [[-1, -1, -5]], [[2**62, 0]]):
        with pytest.raises(IndexError) as e:
            call_nd(name, data, np.array(idx, dtype=np.int64))
        check_names(e, name)
    if name in HAS_BATCH_DIMS:
        with pytest.raises(IndexError) as e:
            call_nd(name, data, np.array([[3], [0]], dtype=np.int64), 1)
        check_names(e, name)
        with pytest.raises(IndexError) as e:  # -4 is out of range on the axis of size 3
            call_nd(name, data, np.array([[-3], [-4]], dtype=np.int64), 1)
        check_names(e, name)


def test_errors_leave_no_partial_state_and_never_crash() -> None:
    """Bad input is an exception, never a result; the same call works after fixing it."""
    data = np.arange(6).reshape(2, 3)
    for _ in range(3):
        with pytest.raises(IndexError):
            nx.gather_nd_13(data, np.array([[0, 0], [5, 0]]))
    assert_same(nx.gather_nd_13(data, np.array([[0, 0], [1, 2]])), np.array([0, 5]))


def test_wrapper_results_equal_the_generic_kernel() -> None:
    rng = np.random.default_rng(7)
    for n in range(40):
        case = random_gather_nd_case(rng, np.int32, np.int64, batch_dims=n % 3)
        assert_same(
            nx.gather_nd_13(case.data, case.indices, case.batch_dims),
            ndgather.gather_nd(case.data, case.indices, case.batch_dims),
        )
        g = random_gather_case(rng, np.float32, np.int64)
        assert_same(
            nx.gather_13(g.data, g.indices, g.axis), ndgather.gather(g.data, g.indices, g.axis)
        )


@pytest.mark.parametrize("name", sorted(HAS_BATCH_DIMS) + list(GATHER))
def test_attributes_must_be_integers(name: str) -> None:
    """ONNX attributes are INT: a float or a str is a TypeError (as for the generic kernels),
    never silently truncated or parsed; NumPy integer scalars are integers."""
    data = np.arange(24).reshape(2, 3, 4)
    idx = np.array([[1], [0]])
    for bad in (1.5, 1.0, np.float64(1.0), "1", None):
        with pytest.raises(TypeError) as e:
            if name in GATHER:
                GATHER[name][0](data, idx, bad)
            else:
                call_nd(name, data, idx, bad)
        check_names(e, name)
    with pytest.raises(TypeError):
        nx.gather_nd(data, idx, 1.5, opset=13)
    with pytest.raises(TypeError):
        nx.gather_nd(data, idx, opset=13.0)
    for good in (np.int8(1), np.int64(1), np.uint16(1)):
        if name in GATHER:
            assert_same(GATHER[name][0](data, idx, good), np.take(data, idx, axis=1))
        else:
            assert_same(call_nd(name, data, idx, good), data[[0, 1], [1, 0]])
