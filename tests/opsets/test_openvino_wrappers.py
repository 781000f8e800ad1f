"""ndgather.openvino: GatherND-5/8 and Gather-1/7/8, each with its version's rules.

Checked against the NumPy oracles of ``reference.py`` (no runtime needed). The OpenVINO CPU
plugin itself is compared in ``test_differential_openvino.py``.
"""

from __future__ import annotations

import inspect
import math

import ndgather.openvino as nov
import numpy as np
import pytest
from reference import (
    assert_result_array,
    assert_same,
    gather_nd_loop,
    gather_take,
)
from wrapper_cases import (
    INTEGER_INDEX_DTYPES,
    OV_NUMERIC,
    dtype_of,
    names_operator,
    random_gather_case,
    random_gather_nd_case,
    seed_of,
    take,
)

OV_TYPES = OV_NUMERIC + ["string"]
GATHER_ND = {"GatherND-5": nov.gather_nd_5, "GatherND-8": nov.gather_nd_8}
GATHER = {"Gather-1": nov.gather_1, "Gather-7": nov.gather_7, "Gather-8": nov.gather_8}


def flatten_batch(result: np.ndarray, indices: np.ndarray, b: int) -> np.ndarray:
    """GatherND-5's output: the b batch dimensions as one leading dimension (b >= 1)."""
    if b == 0:
        return result
    return result.reshape((math.prod(indices.shape[:b]),) + result.shape[b:])


def oracle_nd(name: str, data: np.ndarray, indices: np.ndarray, b: int) -> np.ndarray:
    out = gather_nd_loop(data, indices, b)
    return flatten_batch(out, indices, b) if name == "GatherND-5" else out


def call_gather(name: str, data: object, indices: object, axis: int, b: int = 0) -> np.ndarray:
    if name == "Gather-1":
        assert b == 0
        return nov.gather_1(data, indices, axis)
    return GATHER[name](data, indices, axis, b)


def check_names(excinfo: pytest.ExceptionInfo[BaseException], name: str) -> None:
    op, version = name.split("-")
    msg = str(excinfo.value)
    assert names_operator(msg, op, version), f"message does not name {name}: {msg!r}"


def test_signatures() -> None:
    def sig(fn: object) -> list[tuple[str, object]]:
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]

    e = inspect.Parameter.empty
    for fn in (nov.gather_nd_5, nov.gather_nd_8):
        assert sig(fn) == [("data", e), ("indices", e), ("batch_dims", 0)]
    assert sig(nov.gather_1) == [("data", e), ("indices", e), ("axis", e)]
    for fn in (nov.gather_7, nov.gather_8):
        assert sig(fn) == [("data", e), ("indices", e), ("axis", e), ("batch_dims", 0)]
    for fn in (*GATHER_ND.values(), *GATHER.values()):
        assert fn.__doc__ and fn.__doc__.strip()
    with pytest.raises(TypeError):
        nov.gather_1(np.arange(3), np.array([0]))  # type: ignore[call-arg]  # axis is required


# --------------------------------------------------------------------------- results


@pytest.mark.parametrize("name", list(GATHER_ND))
@pytest.mark.parametrize("dtype", OV_TYPES)
def test_gather_nd_results(name: str, dtype: str) -> None:
    fn = GATHER_ND[name]
    rng = np.random.default_rng(seed_of(name, dtype))
    for itype in INTEGER_INDEX_DTYPES:
        for n in range(4):
            case = random_gather_nd_case(
                rng,
                dtype_of(dtype),
                itype,
                batch_dims=n,
                negative=itype[0] == "i",
                zero_size=n == 1,
            )
            got = fn(case.data, case.indices, case.batch_dims)
            assert_same(got, oracle_nd(name, case.data, case.indices, case.batch_dims))
            assert_result_array(got, case.data, case.indices)


@pytest.mark.parametrize("name", list(GATHER))
@pytest.mark.parametrize("dtype", OV_TYPES)
def test_gather_results(name: str, dtype: str) -> None:
    rng = np.random.default_rng(seed_of(name, dtype))
    for itype in INTEGER_INDEX_DTYPES:
        for n in range(4):
            b = 0 if name == "Gather-1" else n % 3
            case = random_gather_case(
                rng,
                dtype_of(dtype),
                itype,
                batch_dims=b,
                negative=name == "Gather-8" and itype[0] == "i",
                zero_size=n == 3,
            )
            got = call_gather(name, case.data, case.indices, case.axis, case.batch_dims)
            expected = take(case.data, case.indices, case.axis, case.batch_dims)
            assert_same(got, expected)
            assert_result_array(got, case.data, case.indices)


def test_gather_nd_5_flattens_the_batch_dimensions() -> None:
    data = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    idx = np.zeros((2, 3, 7, 1), dtype=np.int32)
    idx[..., 0] = np.arange(7) % 4
    assert nov.gather_nd_8(data, idx, 2).shape == (2, 3, 7, 5)
    assert nov.gather_nd_5(data, idx, 2).shape == (6, 7, 5)
    assert_same(nov.gather_nd_5(data, idx, 2), nov.gather_nd_8(data, idx, 2).reshape(6, 7, 5))
    # b = 1: one batch dimension, nothing to flatten; b = 0: no leading dimension added
    assert nov.gather_nd_5(data[0], idx[0], 1).shape == nov.gather_nd_8(data[0], idx[0], 1).shape
    assert nov.gather_nd_5(data, idx[0, 0] % 2, 0).shape == (7, 3, 4, 5)
    # b = 3, element gather: (prod(indices.shape[:3]),) + indices.shape[3:-1]
    idx3 = np.ones((2, 3, 4, 1), dtype=np.int64)
    assert_same(nov.gather_nd_5(data, idx3, 3), data[..., 1].reshape(24))
    # zero-size batch
    assert nov.gather_nd_5(np.zeros((0, 3, 4)), np.zeros((0, 3, 1), np.int8), 2).shape == (0,)


def test_negative_indices_count_from_the_end_in_gather_nd() -> None:
    data = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    idx = np.array([[[-1], [0], [-4]], [[-3], [2], [1]]], dtype=np.int8)
    expected = np.stack([data[i, j, idx[i, j, 0]] for i in range(2) for j in range(3)])
    assert_same(nov.gather_nd_8(data, idx, 2), expected.reshape(2, 3))
    assert_same(nov.gather_nd_5(data, idx, 2), expected)
    assert_same(nov.gather_nd_8(data, np.array([[-2, -3]], np.int64)), data[[0], [0]])


def test_gather_8_negative_indices_and_zero_fill() -> None:
    data = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    got = nov.gather_8(data, np.array([-1, 0, 3, -4, 4, -5, 2**31 - 1], dtype=np.int64), 1)
    expected = data[:, [3, 0, 3, 0, 0, 0, 0]].copy()
    expected[:, 4:] = 0
    assert_same(got, expected)
    got = nov.gather_8(data, np.array([[3, -3], [-4, 2]], dtype=np.int32), 0)
    expected = np.zeros((2, 2, 4), np.float32)
    expected[0, 1] = data[0]
    expected[1, 1] = data[2]
    assert_same(got, expected)
    # unsigned indices above every axis: zeros, never wrapped as negatives
    got = nov.gather_8(data, np.array([2**64 - 1, 1, 2**63], dtype=np.uint64), 0)
    expected = np.zeros((3, 4), np.float32)
    expected[1] = data[1]
    assert_same(got, expected)
    # with batch_dims, an out-of-range index zero-fills its own batch's slice only
    got = nov.gather_8(data, np.array([[5], [-1], [0]]), 1, 1)
    assert_same(got, np.array([[0], [8], [9]], dtype=np.float32))
    # an empty axis: every index is out of range
    assert_same(
        nov.gather_8(np.zeros((2, 0), np.int8), np.array([0, -1]), 1), np.zeros((2, 2), np.int8)
    )


def test_gather_8_zero_fill_of_strings_is_the_empty_string() -> None:
    """OpenVINO's zero of ``string`` is the empty string (what the runtime returns)."""
    data = np.array([["a", "bb", "ccc"], ["dd", "e", "ffff"]])
    got = nov.gather_8(data, np.array([5, 0, -1, -4]), 1)
    assert got.tolist() == [["", "a", "ccc", ""], ["", "dd", "ffff", ""]]
    got = nov.gather_8(data.astype(object), np.array([5, 0, -1, -4]), 1)
    assert got.tolist() == [["", "a", "ccc", ""], ["", "dd", "ffff", ""]]


@pytest.mark.parametrize("name", ["Gather-1", "Gather-7"])
def test_gather_1_7_reject_negative_and_out_of_range(name: str) -> None:
    data = np.arange(12).reshape(3, 4)
    for idx, axis in (([-1], 0), ([0, -4], 1), ([3], 0), ([4], 1), ([0, 2**31 - 1], 1)):
        for itype in ("int8", "int32", "int64"):
            if max(idx) > np.iinfo(itype).max:
                continue
            with pytest.raises(IndexError) as e:
                call_gather(name, data, np.array(idx, dtype=itype), axis)
            check_names(e, name)
    with pytest.raises(IndexError):
        call_gather(name, data, np.array([2**63], dtype=np.uint64), 0)
    if name == "Gather-7":
        with pytest.raises(IndexError) as e:
            nov.gather_7(data, np.array([[0], [-1], [1]]), 1, 1)
        check_names(e, name)


@pytest.mark.parametrize("name", list(GATHER_ND))
def test_gather_nd_out_of_range_raises(name: str) -> None:
    """The spec leaves it undefined (the CPU plugin reads out of bounds): ndgather raises."""
    fn = GATHER_ND[name]
    data = np.arange(24).reshape(2, 3, 4)
    for idx, b in (([[2]], 0), ([[0, 3]], 0), ([[-3]], 0), ([[1, -4, 0]], 0), ([[3], [0]], 1)):
        with pytest.raises(IndexError) as e:
            fn(data, np.array(idx, dtype=np.int32), b)
        check_names(e, name)
    with pytest.raises(IndexError):
        fn(data, np.array([[2**64 - 1]], dtype=np.uint64))


# --------------------------------------------------------------------------- attributes


@pytest.mark.parametrize("name", ["Gather-7", "Gather-8"])
def test_gather_negative_axis_and_batch_dims_are_normalized(name: str) -> None:
    fn = GATHER[name]
    data = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    idx = np.array([[0, 2], [1, 1]])  # q = 2
    expected = gather_take(data, idx, 2, 1)
    for axis in (2, -1):
        for b in (1, -1):
            assert_same(fn(data, idx, axis, b), expected)
    assert_same(fn(data, idx, -2, -2), gather_take(data, idx, 1, 0))
    # batch_dims == indices.rank is allowed: one index per batch position
    assert_same(fn(data, np.array([2, 0]), 1, 1), gather_take(data, np.array([2, 0]), 1, 1))


@pytest.mark.parametrize("name", ["Gather-7", "Gather-8"])
def test_gather_attribute_ranges(name: str) -> None:
    fn = GATHER[name]
    data = np.arange(24).reshape(2, 3, 4)
    idx = np.array([[0, 2], [1, 1]])
    bad = [
        (3, 0),  # axis out of [-r, r-1]
        (-4, 0),
        (1, 2),  # batch_dims' > axis'
        (0, 1),
        (2, 3),  # batch_dims outside [-min(r, q), min(r, q)]
        (2, -3),
    ]
    for axis, b in bad:
        with pytest.raises(ValueError) as e:
            fn(data, idx, axis, b)
        check_names(e, name)
    with pytest.raises(ValueError) as e:
        fn(data, idx, 0, -1)  # batch_dims' = 1 > axis' = 0
    check_names(e, name)
    with pytest.raises(ValueError) as e:
        fn(data, np.array([[0, 1]]), 1, 1)  # batch dimensions differ: 1 != 2
    check_names(e, name)


def test_gather_1_axis_range() -> None:
    data = np.arange(24).reshape(2, 3, 4)
    idx = np.array([1, 0])
    for axis in range(-3, 3):
        assert_same(nov.gather_1(data, idx, axis), np.take(data, idx, axis=axis))
    for axis in (3, -4):
        with pytest.raises(ValueError) as e:
            nov.gather_1(data, idx, axis)
        check_names(e, "Gather-1")


@pytest.mark.parametrize("name", list(GATHER_ND))
def test_gather_nd_batch_dims_range(name: str) -> None:
    fn = GATHER_ND[name]
    data = np.arange(24).reshape(2, 3, 4)
    idx = np.zeros((2, 3, 1), dtype=np.int32)
    for b in (-1, -3, 3, 4):  # [0, min(r, q))
        with pytest.raises(ValueError) as e:
            fn(data, idx, b)
        check_names(e, name)
    for idx_bad, b in (
        (np.zeros((2, 0), np.int32), 0),  # indices.shape[-1] must be >= 1
        (np.zeros((2, 4), np.int32), 0),  # indices.shape[-1] > r
        (np.zeros((2, 3), np.int32), 1),  # indices.shape[-1] > r - b
        (np.zeros((3, 1), np.int32), 1),  # batch dimensions differ
        (np.zeros((1, 1), np.int32), 1),  # ... no broadcasting of a batch of 1 either
    ):
        with pytest.raises(ValueError) as e:
            fn(data, idx_bad, b)
        check_names(e, name)


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize("name", list(GATHER_ND) + list(GATHER))
def test_types(name: str) -> None:
    data = np.arange(6).reshape(2, 3)

    def call(d: object, i: object) -> np.ndarray:
        if name in GATHER_ND:
            return GATHER_ND[name](d, np.asarray(i).reshape(-1, 1))
        return call_gather(name, d, i, 0)

    for itype in INTEGER_INDEX_DTYPES:  # any integer type
        assert_same(call(data, np.array([1, 0], dtype=itype)), data[[1, 0]])
    for itype in ("float32", "float64", "bool", "complex64", "U1", "object"):
        with pytest.raises(TypeError) as e:
            call(data, np.array([1, 0]).astype(itype))
        check_names(e, name)
    for dtype in OV_TYPES:
        d = data.astype(dtype_of(dtype)) if dtype != "string" else data.astype(str).astype(object)
        assert call(d, np.array([1])).dtype == d.dtype, dtype
    # no OpenVINO element type: complex, datetimes, records
    for dtype in ("complex64", "complex128", "datetime64[s]", "timedelta64[s]"):
        with pytest.raises(TypeError) as e:
            call(np.zeros((2, 3), dtype=dtype), np.array([1]))
        check_names(e, name)
    with pytest.raises(TypeError) as e:
        call(np.zeros((2, 3), dtype=[("a", "<i4")]), np.array([1]))
    check_names(e, name)


@pytest.mark.parametrize("name", list(GATHER_ND) + list(GATHER))
def test_attributes_must_be_integers(name: str) -> None:
    """axis and batch_dims are integers: a float or a str is a TypeError (as for the generic
    kernels), never silently truncated or parsed; NumPy integer scalars are integers."""
    data = np.arange(24).reshape(2, 3, 4)
    idx = np.array([[1], [0]])
    for bad in (1.5, 1.0, np.float64(1.0), "1", None):
        with pytest.raises(TypeError) as e:
            if name in GATHER_ND:
                GATHER_ND[name](data, idx, bad)
            else:
                call_gather(name, data, idx, bad)
        check_names(e, name)
        if name in ("Gather-7", "Gather-8"):
            with pytest.raises(TypeError) as e:
                GATHER[name](data, idx, 1, bad)
            check_names(e, name)
    for good in (np.int8(1), np.int64(1), np.uint16(1)):
        if name in GATHER_ND:
            assert_same(GATHER_ND[name](data, idx, good), data[[0, 1], [1, 0]])
        else:
            assert_same(call_gather(name, data, idx, good), np.take(data, idx, axis=1))
