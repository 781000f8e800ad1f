"""ndgather.gather against the specs' examples and the NumPy reference formulations."""

from __future__ import annotations

import math

import ndgather
import numpy as np
import pytest
from reference import (
    MODES,
    OPENVINO_GATHER7_EXAMPLES,
    OPENVINO_GATHER7_XML,
    assert_result_array,
    assert_same,
    gather_take,
    gather_take_along,
)


def distinct(shape: tuple[int, ...], dtype: object = np.int64) -> np.ndarray:
    return np.arange(math.prod(shape)).astype(dtype).reshape(shape)


def rand_idx(
    rng: np.random.Generator, s: int, shape: tuple[int, ...], oob: int = 0, negative: bool = True
) -> np.ndarray:
    lo = -s - oob if negative else 0
    hi = max(s + oob, lo + 1)
    return rng.integers(lo, hi, size=shape).astype(np.int64)


# --------------------------------------------------------------------------- the oracles


def test_reference_formulations_agree() -> None:
    rng = np.random.default_rng(0)
    for _ in range(100):
        r = int(rng.integers(1, 5))
        dshape = tuple(int(x) for x in rng.integers(1, 4, size=r))
        a = int(rng.integers(0, r))
        b = int(rng.integers(0, a + 1))
        mid = tuple(int(x) for x in rng.integers(0, 3, size=int(rng.integers(0, 3))))
        data = distinct(dshape)
        for mode in MODES:
            idx = rand_idx(rng, dshape[a], dshape[:b] + mid, oob=0 if mode == "raise" else 2)
            assert_same(
                gather_take(data, idx, a, b, mode), gather_take_along(data, idx, a, b, mode)
            )
    # 0-d indices
    data = distinct((3, 4))
    for a in (0, 1, -1):
        assert_same(gather_take(data, np.int64(-2), a), gather_take_along(data, np.int64(-2), a))


# --------------------------------------------------------------------------- spec examples


@pytest.mark.parametrize(
    "name,data,indices,axis,b,expected,shape",
    OPENVINO_GATHER7_EXAMPLES,
    ids=[e[0] for e in OPENVINO_GATHER7_EXAMPLES],
)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_spec_examples(name, data, indices, axis, b, expected, shape, dtype) -> None:
    d = np.array(data, dtype=dtype)
    i = np.array(indices, dtype=np.int32)
    exp = np.array(expected, dtype=dtype)
    got = ndgather.gather(d, i, axis=axis, batch_dims=b)
    assert got.shape == shape
    assert_same(got, exp)
    assert_same(ndgather.gather(d, i, axis, b), exp)
    assert_same(gather_take(d, i, axis, b), exp)
    assert_same(gather_take_along(d, i, axis, b), exp)


def test_spec_xml_example() -> None:
    dshape, ishape, axis, b, oshape = OPENVINO_GATHER7_XML
    rng = np.random.default_rng(1)
    data = rng.standard_normal(dshape).astype(np.float32)
    idx = rand_idx(rng, dshape[axis], ishape)
    got = ndgather.gather(data, idx, axis=axis, batch_dims=b)
    assert got.shape == oshape
    assert_same(got, gather_take(data, idx, axis, b))


# --------------------------------------------------------------------------- axis / batch_dims


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -3, -4])
def test_every_axis(axis: int) -> None:
    rng = np.random.default_rng(7)
    dshape = (3, 4, 5, 6)
    data = distinct(dshape, np.float32)
    s = dshape[axis]
    for ishape in [(), (1,), (7,), (2, 3), (2, 0, 2)]:
        idx = rand_idx(rng, s, ishape)
        got = ndgather.gather(data, idx, axis=axis)
        a = axis % 4
        assert got.shape == dshape[:a] + ishape + dshape[a + 1 :]
        assert_same(got, gather_take(data, idx, axis))
        assert_same(got, np.take(data, idx % s, axis=axis))
        assert_result_array(got, data, idx)


def test_default_axis_is_zero() -> None:
    data = distinct((4, 3))
    assert_same(ndgather.gather(data, [3, 0, -1]), gather_take(data, np.array([3, 0, -1]), 0))


@pytest.mark.parametrize("b", [0, 1, 2, 3])
def test_batch_dims(b: int) -> None:
    rng = np.random.default_rng(40 + b)
    dshape = (2, 3, 4, 5, 3)
    data = distinct(dshape)
    for axis in range(b, len(dshape)):
        for mid in [(), (1,), (4,), (2, 3)]:
            ishape = dshape[:b] + mid
            idx = rand_idx(rng, dshape[axis], ishape)
            got = ndgather.gather(data, idx, axis=axis, batch_dims=b)
            assert got.shape == dshape[:axis] + mid + dshape[axis + 1 :]
            assert_same(got, gather_take(data, idx, axis, b))
            assert_result_array(got, data, idx)
            # negative axis (and negative batch_dims, when b < q) are the same gather
            q = len(ishape)
            b_neg = b - q if b < q else b
            got2 = ndgather.gather(data, idx, axis=axis - len(dshape), batch_dims=b_neg)
            assert_same(got2, got)


def test_batch_dims_equal_to_indices_rank() -> None:
    """batch_dims == indices.ndim: one index per batch position (0-d per batch)."""
    rng = np.random.default_rng(2)
    data = distinct((2, 3, 4, 5))
    for b, axis in [(1, 1), (1, 2), (2, 2), (2, 3), (1, 3)]:
        idx = rand_idx(rng, data.shape[axis], data.shape[:b])
        got = ndgather.gather(data, idx, axis=axis, batch_dims=b)
        assert got.shape == data.shape[:axis] + data.shape[axis + 1 :]
        assert_same(got, gather_take(data, idx, axis, b))


def test_negative_indices_with_batch_dims() -> None:
    """A negative index counts from the end of the gathered axis, not of a batch axis."""
    rng = np.random.default_rng(4)
    data = distinct((2, 3, 7, 5))
    for b, axis in [(0, 2), (1, 2), (2, 2), (1, 3), (2, 3)]:
        s = data.shape[axis]
        idx = -rng.integers(1, s + 1, size=data.shape[:b] + (6,))
        got = ndgather.gather(data, idx, axis=axis, batch_dims=b)
        assert_same(got, gather_take(data, idx, axis, b))
        assert_same(got, ndgather.gather(data, idx + s, axis=axis, batch_dims=b))


# --------------------------------------------------------------------------- 0-d indices


@pytest.mark.parametrize(
    "scalar",
    [2, -1, np.int64(3), np.int8(-4), np.uint16(0), np.array(1), np.array(-2, dtype=np.int16)],
    ids=repr,
)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_zero_d_indices(scalar, axis: int) -> None:
    data = distinct((5, 6, 7))
    got = ndgather.gather(data, scalar, axis=axis)
    a = axis % 3
    assert got.shape == data.shape[:a] + data.shape[a + 1 :]
    assert_same(got, gather_take(data, np.asarray(scalar), axis))
    assert_result_array(got, data)


def test_zero_d_indices_one_d_data_gives_zero_d_array() -> None:
    data = distinct((6,), np.float64)
    got = ndgather.gather(data, np.array(4))
    assert type(got) is np.ndarray and got.shape == ()
    assert_same(got, np.array(4.0))
    got = ndgather.gather(data, -6)
    assert type(got) is np.ndarray and got.shape == ()
    assert_same(got, np.array(0.0))


def test_zero_d_indices_modes() -> None:
    data = distinct((5, 2)) + 1
    with pytest.raises(IndexError):
        ndgather.gather(data, 5)
    with pytest.raises(IndexError):
        ndgather.gather(data, -6)
    assert_same(ndgather.gather(data, 5, mode="zero"), np.zeros(2, dtype=data.dtype))
    assert_same(ndgather.gather(data, 7, mode="clip"), data[4])
    assert_same(ndgather.gather(data, -9, mode="clip"), data[0])


# --------------------------------------------------------------------------- zero sizes


@pytest.mark.parametrize(
    "dshape,ishape,axis,b",
    [
        ((3, 0), (2,), 0, 0),  # empty inner slice
        ((0, 3), (2,), 1, 0),  # empty outer
        ((3, 4), (0,), 0, 0),  # no indices
        ((3, 4), (2, 0), 1, 0),
        ((0, 4), (0,), 0, 0),  # empty gathered axis, no indices
        ((0, 3, 4), (0, 2), 1, 1),  # empty batch
        ((2, 0, 4), (2, 3), 2, 1),  # empty between batch and axis
        ((2, 3, 0), (2, 3, 5), 1, 1),
        ((2, 3, 0), (2, 3, 5), 2, 2),  # gathered axis of size 0 with indices
        ((4, 5), (), 1, 0),
        ((0,), (0,), 0, 0),
    ],
)
@pytest.mark.parametrize("mode", MODES)
def test_zero_size(dshape, ishape, axis, b, mode) -> None:
    rng = np.random.default_rng(8)
    data = distinct(dshape, np.int16)
    s = dshape[axis]
    if s == 0 and math.prod(ishape) > 0:
        # every index is out of range: raise / zeros / (clip has nothing to clamp to)
        idx = np.zeros(ishape, dtype=np.int64)
        if mode == "raise":
            if math.prod(dshape[:axis]) == 0 or math.prod(dshape[axis + 1 :]) == 0:
                pytest.skip("covered by test_index_into_empty_axis")
            with pytest.raises(IndexError):
                ndgather.gather(data, idx, axis=axis, batch_dims=b)
            return
        if mode == "clip":
            pytest.skip("clip into an empty axis: covered by test_index_into_empty_axis")
    else:
        idx = rand_idx(rng, s, ishape)
    got = ndgather.gather(data, idx, axis=axis, batch_dims=b, mode=mode)
    assert got.shape == dshape[:axis] + ishape[b:] + dshape[axis + 1 :]
    assert got.dtype == data.dtype
    assert_result_array(got, data, idx)
    assert_same(got, gather_take(data, idx, axis, b, mode))


def test_index_into_empty_axis() -> None:
    data = np.zeros((2, 0, 3), dtype=np.float32)
    with pytest.raises(IndexError):
        ndgather.gather(data, [0], axis=1)
    got = ndgather.gather(data, [0, -1], axis=1, mode="zero")
    assert_same(got, np.zeros((2, 2, 3), dtype=np.float32))
    with pytest.raises(IndexError):
        ndgather.gather(data, 0, axis=1)


def test_bad_index_with_empty_inner_slice_raises() -> None:
    """Indices are validated even when the slices they address are empty (as np.take does)."""
    data = np.zeros((3, 0), dtype=np.int8)
    with pytest.raises(IndexError):
        ndgather.gather(data, [5], axis=0)
    with pytest.raises(IndexError):
        ndgather.gather(data, [-4], axis=0)


# --------------------------------------------------------------------------- modes


@pytest.mark.parametrize("mode", ["zero", "clip"])
@pytest.mark.parametrize("b", [0, 1, 2])
def test_modes_against_reference(mode: str, b: int) -> None:
    rng = np.random.default_rng(50 + b)
    dshape = (2, 3, 4, 5)
    for dtype in (np.int8, np.float64, np.complex64, np.uint16):
        data = distinct(dshape, dtype) + 1
        for axis in range(b, 4):
            idx = rand_idx(rng, dshape[axis], dshape[:b] + (3, 2), oob=3)
            got = ndgather.gather(data, idx, axis=axis, batch_dims=b, mode=mode)
            assert_same(got, gather_take(data, idx, axis, b, mode))
            assert_same(got, gather_take_along(data, idx, axis, b, mode))


def test_mode_zero_and_clip_by_hand() -> None:
    data = distinct((3, 4), np.float32) + 1
    idx = np.array([3, -4, 1, 100])
    z = ndgather.gather(data, idx, mode="zero")
    assert z.shape == (4, 4)
    assert z[0].tobytes() == bytes(16) and z[1].tobytes() == bytes(16)
    assert z[3].tobytes() == bytes(16)
    assert_same(z[2], data[1])
    c = ndgather.gather(data, idx, axis=0, mode="clip")
    assert_same(c, gather_take(data, idx, 0, 0, "clip"))
    assert_same(c[0], data[2])  # 3 -> 2
    assert_same(c[1], data[0])  # -4 -> -1 -> 0
    assert_same(c[3], data[2])  # 100 -> 2
    c1 = ndgather.gather(data, [-1, -5, 4, -4], axis=1, mode="clip")
    assert_same(c1, gather_take(data, np.array([-1, -5, 4, -4]), 1, 0, "clip"))
    assert_same(c1[:, 0], data[:, 3])  # -1 wraps to 3, not clamped to 0


@pytest.mark.parametrize("mode", MODES)
def test_unsigned_huge_and_int64_min(mode: str) -> None:
    data = distinct((4, 3), np.int32) + 1
    for idx in [
        np.array([2**64 - 1], dtype=np.uint64),
        np.array([2**63], dtype=np.uint64),
        np.array([2**32 - 1], dtype=np.uint32),
        np.array([-(2**63)], dtype=np.int64),
        np.array([-(2**31)], dtype=np.int32),
        np.array(2**64 - 1, dtype=np.uint64),  # 0-d
    ]:
        if mode == "raise":
            with pytest.raises(IndexError):
                ndgather.gather(data, idx, mode=mode)
        else:
            got = ndgather.gather(data, idx, mode=mode)
            assert_same(got, gather_take(data, idx, 0, 0, mode))


def test_large_gathers_match_take() -> None:
    """Sizes that take the parallel path."""
    rng = np.random.default_rng(9)
    data = rng.standard_normal((1000, 300)).astype(np.float32)
    idx = rng.integers(-1000, 1000, size=(3000,))
    assert_same(ndgather.gather(data, idx), np.take(data, idx, axis=0))
    idx1 = rng.integers(-300, 300, size=(2000,))
    assert_same(ndgather.gather(data, idx1, axis=1), np.take(data, idx1, axis=1))
    big = rng.integers(0, 1000, size=(2_000_000,))
    flat = data.ravel()
    assert_same(ndgather.gather(flat, big), np.take(flat, big))
