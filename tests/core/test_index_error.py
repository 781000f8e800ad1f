"""``ndgather.GatherIndexError``: the attributes of every out-of-range index error, against
an independent NumPy search for the first bad index in C order of ``indices``; the same
class and attributes from the opset wrappers and the ReferenceEvaluator; pickling."""

from __future__ import annotations

import pickle
from typing import Any

import ndgather
import numpy as np
import pytest
from ndgather import GatherIndexError, bnns, onnx, openvino

Array = np.ndarray[Any, Any]


def first_bad(sizes: Array, indices: Array, *, negatives: bool = True) -> tuple[int, ...] | None:
    """The position of the first index in C order outside ``[-s, s)`` (``[0, s)`` without
    negatives), ``sizes`` broadcast against ``indices``; exact for any integer dtype."""
    values = np.asarray(indices).astype(object)  # Python ints: no wrap-around in comparisons
    s = np.broadcast_to(np.asarray(sizes, dtype=object), values.shape)
    low = -s if negatives else s * 0
    bad = (values < low) | (values >= s)
    hits = np.argwhere(bad)
    return None if len(hits) == 0 else tuple(int(p) for p in hits[0])


def expect_nd(data: Array, indices: Array, b: int = 0, *, negatives: bool = True) -> Any:
    """(value, position, axis, axis_size) of gather_nd's first bad index, or None."""
    k = indices.shape[-1]
    sizes = np.array(data.shape[b : b + k])
    pos = first_bad(sizes, indices, negatives=negatives)
    if pos is None:
        return None
    axis = b + pos[-1]
    return int(indices[pos]), pos, axis, data.shape[axis]


def expect_g(data: Array, indices: Array, axis: int, *, negatives: bool = True) -> Any:
    """(value, position, axis, axis_size) of gather's first bad index, or None."""
    a = axis % data.ndim
    pos = first_bad(np.array(data.shape[a]), indices, negatives=negatives)
    if pos is None:
        return None
    return int(indices[pos]), pos, a, data.shape[a]


def check(error: BaseException, want: Any, data_shape: tuple[int, ...], prefix: str = "") -> None:
    assert type(error) is GatherIndexError
    assert isinstance(error, IndexError)
    value, position, axis, size = want
    assert (error.value, error.position, error.axis, error.axis_size, error.data_shape) == (
        value,
        position,
        axis,
        size,
        data_shape,
    )
    # The attributes are what the (unchanged) message names.
    assert str(error).startswith(
        f"{prefix}index {value} is out of bounds for axis {axis} with size {size} at indices["
    )
    assert f"(data shape {data_shape})" in str(error)


def raised(fn: Any, *args: Any, **kwargs: Any) -> GatherIndexError:
    with pytest.raises(GatherIndexError) as info:
        fn(*args, **kwargs)
    return info.value


def test_gather_nd_names_the_first_bad_value_with_its_place_in_the_tuple() -> None:
    data = np.zeros((2, 3, 4))
    indices = np.array([[[0, 1], [1, 2]], [[1, 5], [-9, 9]]])
    e = raised(ndgather.gather_nd, data, indices)
    check(e, expect_nd(data, indices), data.shape)
    assert e.position == (1, 0, 1) and indices[e.position] == e.value == 5
    assert str(e) == (
        "index 5 is out of bounds for axis 1 with size 3 at indices[1, 0] = [1, 5] "
        "(data shape (2, 3, 4))"
    )


def test_random_calls_match_numpy() -> None:
    rng = np.random.default_rng(18)
    dtypes = ["int8", "uint8", "int16", ">i4", "int64", "uint64"]
    for _ in range(300):
        r = int(rng.integers(1, 5))
        data = np.zeros(tuple(int(s) for s in rng.integers(0, 5, size=r)), np.uint8)
        dtype = np.dtype(rng.choice(dtypes))
        lo = 0 if dtype.kind == "u" else -7
        if rng.random() < 0.5:  # gather_nd
            b = int(rng.integers(0, r))
            k = int(rng.integers(1, r - b + 1))
            shape = data.shape[:b] + tuple(
                int(s) for s in rng.integers(1, 4, size=rng.integers(0, 3))
            )
            indices = rng.integers(lo, 7, size=shape + (k,)).astype(dtype)
            want = expect_nd(data, indices, b)
            if want is None:
                continue
            check(raised(ndgather.gather_nd, data, indices, b), want, data.shape)
        else:
            axis = int(rng.integers(-r, r))
            indices = rng.integers(lo, 7, size=rng.integers(0, 4, size=rng.integers(0, 4))).astype(
                dtype
            )
            want = expect_g(data, indices, axis)
            if want is None:
                continue
            check(raised(ndgather.gather, data, indices, axis), want, data.shape)


def test_gather_with_batch_dims_negative_axis_and_out() -> None:
    data = np.zeros((2, 3, 5, 2), np.float32)
    indices = np.array([[0, 4, 1], [5, -6, 2]])  # (2, 3): batch_dims=1 over data axis 0
    want = expect_g(data, indices, -2)
    assert want == (5, (1, 0), 2, 5)
    check(raised(ndgather.gather, data, indices, axis=-2, batch_dims=1), want, data.shape)
    out = np.full((2, 3, 3, 2), 7, np.float32)
    check(raised(ndgather.gather, data, indices, -2, 1, out=out), want, data.shape)
    assert (out == 7).all()
    tuples = indices[..., None]  # gather_nd over data axis 1 (size 3)
    nd_out = np.full(ndgather.gather_nd(data, np.zeros_like(tuples), 1).shape, 7, np.float32)
    want = expect_nd(data, tuples, 1)
    assert want == (4, (0, 1, 0), 1, 3)
    check(raised(ndgather.gather_nd, data, tuples, 1, out=nd_out), want, data.shape)
    assert (nd_out == 7).all()


def test_broadcast_indices_report_the_first_position_in_c_order() -> None:
    data = np.zeros((4, 3))
    inner = np.broadcast_to(np.array([0, 9, 1])[:, None], (3, 1000))  # stride 0 inside
    outer = np.broadcast_to(np.array([2, 1, -5]), (1000, 3))  # stride 0 outside
    for indices in (inner, outer):
        want = expect_g(data, indices, 0)
        check(raised(ndgather.gather, data, indices), want, data.shape)
    assert expect_g(data, inner, 0)[1] == (1, 0)
    assert expect_g(data, outer, 0)[1] == (0, 2)
    tuples = np.broadcast_to(np.array([[0, 1], [3, 3]])[:, None, :], (2, 500, 2))
    check(raised(ndgather.gather_nd, data, tuples), expect_nd(data, tuples), data.shape)
    assert expect_nd(data, tuples)[1] == (1, 0, 1)


def test_clip_into_an_empty_axis() -> None:
    data = np.zeros((3, 0))
    e = raised(ndgather.gather, data, np.array([[4, 2]]), axis=1, mode="clip")
    check(e, (4, (0, 0), 1, 0), data.shape)


def test_huge_unsigned_values_are_exact() -> None:
    indices = np.array([1, 2**64 - 1], np.uint64)
    e = raised(ndgather.gather, np.zeros(3), indices)
    check(e, (2**64 - 1, (1,), 0, 3), (3,))


@pytest.mark.parametrize(
    ("fn", "data", "indices", "kwargs", "op", "negatives"),
    [
        (onnx.gather_nd_11, np.zeros((2, 3)), np.array([[0, 1], [1, 3]]), {}, "GatherND-11", True),
        (
            onnx.gather_nd_13,
            np.zeros((2, 3, 4)),
            np.array([[[0, 1]], [[2, -9]]]),
            {"batch_dims": 1},
            "GatherND-13",
            True,
        ),
        (
            onnx.ms_gather_nd_1,
            np.zeros((2, 3)),
            np.array([[1], [-3]], np.int32),
            {},
            "com.microsoft GatherND-1",
            True,
        ),
        (onnx.gather_1, np.zeros((2, 3)), np.array([[0, -1]]), {"axis": 1}, "Gather-1", False),
        (onnx.gather_13, np.zeros((2, 3)), np.array([1, 2, 3]), {"axis": -1}, "Gather-13", True),
        (
            openvino.gather_nd_5,
            np.zeros((2, 3, 4)),
            np.array([[[[1]], [[0]], [[2]]], [[[0]], [[4]], [[2]]]]),  # (2, 3, 1, 1)
            {"batch_dims": 2},
            "GatherND-5",
            True,
        ),
        (
            openvino.gather_nd_8,
            np.zeros((2, 3)),
            np.array([[1], [3]]),
            {"batch_dims": 1},
            "GatherND-8",
            True,
        ),
        (openvino.gather_1, np.zeros(4), np.array([3, -1]), {"axis": 0}, "Gather-1", False),
        (
            openvino.gather_7,
            np.zeros((2, 5)),
            np.array([[0, 4], [5, 0]]),
            {"axis": 1, "batch_dims": -1},
            "Gather-7",
            False,
        ),
        (
            bnns.gather_nd,
            np.zeros((3, 2, 2)),
            np.array([[1, 0], [0, -1]]),
            {},
            "BNNSGatherND",
            False,
        ),
    ],
)
def test_wrappers_raise_the_same_class_with_the_callers_positions(
    fn: Any, data: Array, indices: Array, kwargs: dict[str, int], op: str, negatives: bool
) -> None:
    e = raised(fn, data, indices, **kwargs)
    if "ND" in op:
        b = kwargs.get("batch_dims", 0)
        want = expect_nd(data, indices, b, negatives=negatives)
    else:
        want = expect_g(data, indices, kwargs["axis"], negatives=negatives)
    check(e, want, data.shape, prefix=f"{op}: ")
    assert indices[e.position] == e.value
    assert e.__cause__ is None
    copy = pickle.loads(pickle.dumps(e))
    assert (type(copy), str(copy), copy.__dict__) == (type(e), str(e), e.__dict__)


def test_reference_evaluator_raises_it() -> None:
    pytest.importorskip("onnx")
    from runtimes import ONNX_OPS, run_reference

    data = np.arange(6).reshape(2, 3)
    indices = np.array([[0, 2], [1, 3]], np.int64)
    with pytest.raises(IndexError) as info:
        run_reference(ONNX_OPS["GatherND-13"], data, indices, new_ops=onnx.reference_ops)
    check(info.value, expect_nd(data, indices), data.shape, prefix="GatherND-13: ")


def test_pickling_keeps_class_message_and_attributes() -> None:
    e = raised(ndgather.gather_nd, np.zeros((2, 3)), np.array([[0, 1], [1, -4]]))
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(e, protocol))
        assert type(copy) is GatherIndexError
        assert str(copy) == str(e) and copy.args == e.args
        assert copy.__dict__ == e.__dict__
        assert (copy.value, copy.position, copy.axis, copy.axis_size, copy.data_shape) == (
            -4,
            (1, 1),
            1,
            3,
            (2, 3),
        )


def test_it_is_public_and_an_index_error() -> None:
    assert issubclass(ndgather.GatherIndexError, IndexError)
    assert ndgather.GatherIndexError.__module__ == "ndgather"
    try:
        ndgather.gather(np.zeros(2), [2])
    except IndexError as e:  # every existing `except IndexError` still catches it
        assert isinstance(e, ndgather.GatherIndexError)
