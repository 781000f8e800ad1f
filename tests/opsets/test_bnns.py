"""ndgather.bnns.gather_nd: Apple Accelerate's BNNSGatherND (no runtime to compare with here;
checked against its documentation's examples and the NumPy oracle)."""

from __future__ import annotations

import inspect

import ndgather.bnns as bnns
import numpy as np
import pytest
from reference import assert_result_array, assert_same, gather_nd_loop
from wrapper_cases import INTEGER_INDEX_DTYPES, names_operator, random_gather_nd_case

# The `values` of the BNNSGatherND documentation, shape .tensor3DFirstMajor(3, 2, 2).
VALUES = np.array([10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33], dtype=np.float32).reshape(
    3, 2, 2
)

# (indices, indices shape, output shape of the example's output descriptor, output values)
EXAMPLES = [
    ("scalar index gathers a 2-D slice", [1], (1,), (2, 2), [20.0, 21.0, 22.0, 23.0]),
    ("2-D index gathers a 1-D slice", [1, 0], (1, 2), (1, 2), [20.0, 21.0]),
    ("3-D index gathers one element", [1, 1, 1], (1, 1, 3), (1, 1), [23.0]),
]


def check_names(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    msg = str(excinfo.value)
    assert "BNNS" in msg and "GatherND" in msg, f"message does not name BNNSGatherND: {msg!r}"


def test_signature() -> None:
    params = list(inspect.signature(bnns.gather_nd).parameters)
    assert params == ["data", "indices"]
    assert bnns.gather_nd.__doc__


@pytest.mark.parametrize("example", EXAMPLES, ids=[e[0] for e in EXAMPLES])
@pytest.mark.parametrize("itype", ["int32", "int64", "uint8", "int16", "uint64"])
def test_documentation_examples(example: tuple, itype: str) -> None:
    _, values, ishape, oshape, expected = example
    indices = np.array(values, dtype=itype).reshape(ishape)
    got = bnns.gather_nd(VALUES, indices)
    # The documentation's output descriptors: (2, 2), (1, 2), (1, 1).
    assert got.shape == oshape
    assert_same(got, np.array(expected, dtype=np.float32).reshape(oshape))
    assert_result_array(got, VALUES, indices)


def test_random_cases_equal_gather_nd() -> None:
    rng = np.random.default_rng(20240605)
    for itype in INTEGER_INDEX_DTYPES:
        for n in range(12):
            case = random_gather_nd_case(
                rng, np.float32, itype, negative=False, zero_size=n % 4 == 3
            )
            assert_same(
                bnns.gather_nd(case.data, case.indices), gather_nd_loop(case.data, case.indices)
            )


def test_other_data_types() -> None:
    idx = np.array([[2], [0]], dtype=np.int32)
    for dtype in ("float16", "int8", "uint8", "int32", "float64", "bool"):
        data = np.arange(6).reshape(3, 2).astype(dtype)
        assert_same(bnns.gather_nd(data, idx), data[[2, 0]])


def test_negative_indices_are_an_index_error() -> None:
    for idx in ([-1], [[1, -1]], [[0, 0, -2]], [[-3, 0, 0]]):
        with pytest.raises(IndexError) as e:
            bnns.gather_nd(VALUES, np.array(idx, dtype=np.int32))
        check_names(e)


def test_out_of_range_is_an_index_error() -> None:
    for idx, itype in (
        ([3], "int32"),
        ([[0, 2]], "int64"),
        ([[2, 1, 2]], "uint8"),
        ([[2**64 - 1]], "uint64"),
    ):
        with pytest.raises(IndexError) as e:
            bnns.gather_nd(VALUES, np.array(idx, dtype=itype))
        check_names(e)


def test_bad_shapes_and_types() -> None:
    for idx in (np.zeros((1, 4), np.int32), np.zeros((1, 0), np.int32), np.array(0, np.int32)):
        with pytest.raises(ValueError) as e:
            bnns.gather_nd(VALUES, idx)
        check_names(e)
    for itype in ("float32", "bool"):
        with pytest.raises(TypeError) as e:
            bnns.gather_nd(VALUES, np.array([1], dtype=itype))
        check_names(e)
    assert not names_operator("BNNSGatherND", "GatherND", 1)  # (the helper is strict)
