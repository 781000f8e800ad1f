"""ndgather.gather_nd against the specs' examples and the NumPy reference formulations."""

from __future__ import annotations

import math
from itertools import product

import ndgather
import numpy as np
import pytest
from reference import (
    MODES,
    ONNX_GATHERND_EXAMPLES,
    OPENVINO_GATHERND8_EXAMPLES,
    OPENVINO_GATHERND8_XML,
    assert_result_array,
    assert_same,
    gather_nd_fancy,
    gather_nd_loop,
)


def distinct(shape: tuple[int, ...], dtype: object = np.int64) -> np.ndarray:
    """An array whose every element is different (so a wrong element is always noticed)."""
    return np.arange(math.prod(shape)).astype(dtype).reshape(shape)


def random_indices(
    rng: np.random.Generator,
    data_shape: tuple[int, ...],
    b: int,
    mid: tuple[int, ...],
    k: int,
    *,
    negative: bool = True,
    oob: int = 0,
    dtype: object = np.int64,
) -> np.ndarray:
    """Indices of shape data_shape[:b] + mid + (k,), valid (or up to ``oob`` past the ends)."""
    shape = data_shape[:b] + mid + (k,)
    cols = []
    for j in range(k):
        s = data_shape[b + j]
        lo = -s - oob if negative else 0
        hi = s + oob
        cols.append(rng.integers(lo, max(hi, lo + 1), size=shape[:-1]))
    return np.stack(cols, axis=-1).astype(dtype).reshape(shape)


# --------------------------------------------------------------------------- the oracles


def test_reference_formulations_agree() -> None:
    rng = np.random.default_rng(0)
    for _ in range(60):
        r = int(rng.integers(1, 5))
        dshape = tuple(int(x) for x in rng.integers(1, 4, size=r))
        b = int(rng.integers(0, r))
        k = int(rng.integers(1, r - b + 1))
        mid = tuple(int(x) for x in rng.integers(0, 3, size=int(rng.integers(0, 3))))
        data = distinct(dshape)
        for mode in MODES:
            idx = random_indices(rng, dshape, b, mid, k, oob=0 if mode == "raise" else 2)
            assert_same(gather_nd_loop(data, idx, b, mode), gather_nd_fancy(data, idx, b, mode))


# --------------------------------------------------------------------------- spec examples


@pytest.mark.parametrize(
    "name,data,indices,b,expected,shape",
    ONNX_GATHERND_EXAMPLES + OPENVINO_GATHERND8_EXAMPLES,
    ids=[e[0] for e in ONNX_GATHERND_EXAMPLES + OPENVINO_GATHERND8_EXAMPLES],
)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
def test_spec_examples(name, data, indices, b, expected, shape, dtype) -> None:
    d = np.array(data, dtype=dtype)
    i = np.array(indices, dtype=np.int64)
    got = ndgather.gather_nd(d, i, batch_dims=b)
    assert got.shape == shape
    assert_same(got, np.array(expected, dtype=dtype))
    # positional batch_dims gives the same
    assert_same(ndgather.gather_nd(d, i, b), np.array(expected, dtype=dtype))
    # and so do the oracles (the examples check the oracles too)
    assert_same(gather_nd_loop(d, i, b), np.array(expected, dtype=dtype))
    assert_same(gather_nd_fancy(d, i, b), np.array(expected, dtype=dtype))


@pytest.mark.parametrize(
    "dshape,ishape,b,oshape", OPENVINO_GATHERND8_XML, ids=["xml-1", "xml-2", "xml-3"]
)
def test_openvino_xml_shape_examples(dshape, ishape, b, oshape) -> None:
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, size=dshape, dtype=np.uint8)
    k = ishape[-1]
    idx = random_indices(rng, dshape, b, ishape[b:-1], k)
    assert idx.shape == ishape
    got = ndgather.gather_nd(data, idx, batch_dims=b)
    assert got.shape == oshape
    assert_same(got, gather_nd_fancy(data, idx, b))


# --------------------------------------------------------------------------- batch_dims


@pytest.mark.parametrize("b", [0, 1, 2, 3])
def test_batch_dims(b: int) -> None:
    rng = np.random.default_rng(10 + b)
    dshape = (2, 3, 4, 5, 3)
    data = distinct(dshape)
    for k in range(1, len(dshape) - b + 1):
        for mid in [(), (3,), (2, 2)]:
            idx = random_indices(rng, dshape, b, mid, k, negative=False)
            got = ndgather.gather_nd(data, idx, batch_dims=b)
            assert got.shape == idx.shape[:-1] + dshape[b + k :]
            assert_same(got, gather_nd_loop(data, idx, b))
            assert_result_array(got, data, idx)


@pytest.mark.parametrize("b", [0, 1, 2, 3])
def test_negative_indices(b: int) -> None:
    """Negatives count from the end of the axis they address: batch_dims + position."""
    rng = np.random.default_rng(20 + b)
    dshape = (2, 3, 5, 7, 4)  # different sizes, so a wrong axis size is noticed
    data = distinct(dshape)
    for k in range(1, len(dshape) - b + 1):
        idx = random_indices(rng, dshape, b, (4,), k, negative=True)
        idx_pos = idx.copy()
        for j in range(k):
            col = idx_pos[..., j]
            col[col < 0] += dshape[b + j]
        got = ndgather.gather_nd(data, idx, batch_dims=b)
        assert_same(got, gather_nd_loop(data, idx, b))
        assert_same(got, ndgather.gather_nd(data, idx_pos, batch_dims=b))


def test_bounds_extremes() -> None:
    """-s and s-1 are valid; every combination of the extremes of each axis."""
    dshape = (3, 4, 5)
    data = distinct(dshape)
    ext = [(-3, 2, 0, -1), (-4, 3, 0, -1), (-5, 4, 0, -1)]
    idx = np.array(list(product(*ext)), dtype=np.int64)
    assert_same(ndgather.gather_nd(data, idx), gather_nd_loop(data, idx))
    for b in (1, 2):
        bi = np.broadcast_to(
            np.array(list(product(*ext[b:])), dtype=np.int64), dshape[:b] + (4 ** (3 - b), 3 - b)
        )
        assert_same(ndgather.gather_nd(data, bi, batch_dims=b), gather_nd_loop(data, bi, b))


def test_element_and_slice_and_scalar_outputs() -> None:
    data = distinct((4, 5))
    # k == r: elements
    got = ndgather.gather_nd(data, [[1, 2], [3, 4]])
    assert_same(got, gather_nd_loop(data, np.array([[1, 2], [3, 4]])))
    # k < r: rows
    got = ndgather.gather_nd(data, [[3], [0], [3]])
    assert_same(got, gather_nd_loop(data, np.array([[3], [0], [3]])))
    # 1-d indices: one tuple, 0-d result for an element
    got = ndgather.gather_nd(data, np.array([2, 3]))
    assert type(got) is np.ndarray and got.shape == ()
    assert_same(got, gather_nd_loop(data, np.array([2, 3])))
    # 1-d indices, one row
    got = ndgather.gather_nd(data, np.array([-1]))
    assert_same(got, gather_nd_loop(data, np.array([-1])))
    # 1-d data
    d1 = distinct((7,))
    got = ndgather.gather_nd(d1, [[6], [0], [-7]])
    assert_same(got, gather_nd_loop(d1, np.array([[6], [0], [-7]])))
    got = ndgather.gather_nd(d1, [3])
    assert got.shape == () and type(got) is np.ndarray
    assert_same(got, gather_nd_loop(d1, np.array([3])))


def test_repeated_and_many_indices() -> None:
    rng = np.random.default_rng(3)
    data = distinct((50, 40, 3), np.float64)
    idx = rng.integers(-50, 40, size=(300, 700, 2)) % np.array([50, 40])
    got = ndgather.gather_nd(data, idx)
    assert_same(got, gather_nd_fancy(data, idx))
    # same row many times
    idx2 = np.zeros((100_000, 1), dtype=np.int64)
    assert_same(ndgather.gather_nd(data, idx2), gather_nd_fancy(data, idx2))


def test_large_slices() -> None:
    """128 KiB slices (one large copy each), contiguous and strided, serial and parallel."""
    rng = np.random.default_rng(6)
    data = rng.integers(0, 256, size=(64, 128 * 1024), dtype=np.uint8)
    idx = rng.integers(-64, 64, size=(40, 1))
    assert_same(ndgather.gather_nd(data, idx), gather_nd_fancy(data, idx))
    fdata = np.asfortranarray(rng.standard_normal((64, 4096)).astype(np.float32))
    assert_same(ndgather.gather_nd(fdata, idx), gather_nd_fancy(np.ascontiguousarray(fdata), idx))
    rows = data.reshape(64, 1024, 128)[:, ::-3, 5:100]
    assert_same(ndgather.gather_nd(rows, idx), gather_nd_fancy(np.ascontiguousarray(rows), idx))


def test_large_odd_itemsize_strided() -> None:
    rng = np.random.default_rng(7)
    dt = np.dtype([("a", "<f8"), ("b", "S5")])  # 13 bytes
    raw = rng.integers(0, 256, size=(3000 * 13 * 2,), dtype=np.uint8)
    data = raw.view(dt).reshape(3000, 2)[::-1, 1]  # 1-d, negative stride of 26 bytes
    idx = rng.integers(-3000, 3000, size=(200_000, 1))
    got = ndgather.gather_nd(data, idx)
    assert got.tobytes() == np.ascontiguousarray(data).view("V13")[idx[:, 0]].tobytes()
    for mode in ("zero", "clip"):
        oob = rng.integers(-3500, 3500, size=(100_000, 1))
        assert_same(
            ndgather.gather_nd(data, oob, mode=mode),
            gather_nd_fancy(np.ascontiguousarray(data), oob, 0, mode),
        )


# --------------------------------------------------------------------------- zero sizes


@pytest.mark.parametrize(
    "dshape,ishape,b",
    [
        ((3, 0), (2, 1), 0),  # empty slices
        ((3, 4, 0), (5, 2), 0),  # empty slices after two indexed axes
        ((3, 4), (0, 2), 0),  # no tuples
        ((3, 4), (0, 1), 0),
        ((3, 4), (2, 0, 1), 0),  # no tuples, middle zero
        ((0, 3, 4), (0, 5, 1), 1),  # empty batch
        ((0, 3, 4), (0, 2), 1),
        ((2, 0, 4), (2, 0, 1), 1),  # indexed axis of size 0, no tuples
        ((2, 3, 4, 0), (2, 3, 5, 1), 2),  # empty slices with two batch dims
        ((0,), (0, 1), 0),
        ((0, 0), (0, 2), 0),
        ((2, 3, 4, 0), (2, 3, 4, 0, 1), 3),
    ],
)
@pytest.mark.parametrize("mode", MODES)
def test_zero_size(dshape, ishape, b, mode) -> None:
    rng = np.random.default_rng(5)
    data = distinct(dshape, np.float32)
    k = ishape[-1]
    idx = random_indices(rng, dshape, b, ishape[b:-1], k, negative=True)
    assert idx.shape == ishape
    got = ndgather.gather_nd(data, idx, batch_dims=b, mode=mode)
    assert got.shape == ishape[:-1] + dshape[b + k :]
    assert got.dtype == data.dtype
    assert_result_array(got, data, idx)
    assert_same(got, gather_nd_loop(data, idx, b, mode))


def test_index_into_empty_axis() -> None:
    """An axis of size 0 has no valid index: raise, or zeros with mode='zero'."""
    data = np.zeros((2, 0, 3), dtype=np.int16)
    idx = np.array([[1, 0]])
    with pytest.raises(IndexError):
        ndgather.gather_nd(data, idx)
    got = ndgather.gather_nd(data, idx, mode="zero")
    assert_same(got, np.zeros((1, 3), dtype=np.int16))


def test_bad_index_with_empty_slice_raises() -> None:
    """Indices are validated even when the slices they address are empty (as NumPy does)."""
    data = np.zeros((2, 0), dtype=np.int32)
    with pytest.raises(IndexError):
        ndgather.gather_nd(data, [[5]])
    with pytest.raises(IndexError):
        ndgather.gather_nd(data, [[-3]])
    got = ndgather.gather_nd(data, [[5], [1]], mode="zero")
    assert got.shape == (2, 0)


# --------------------------------------------------------------------------- modes


@pytest.mark.parametrize("mode", ["zero", "clip"])
@pytest.mark.parametrize("b", [0, 1, 2])
def test_modes_against_reference(mode: str, b: int) -> None:
    rng = np.random.default_rng(30 + b)
    dshape = (2, 3, 4, 5)
    for dtype in (np.int64, np.float32, np.uint8, np.complex128):
        data = distinct(dshape, dtype) + 1  # +1: no element is zero bytes
        for k in range(1, len(dshape) - b + 1):
            idx = random_indices(rng, dshape, b, (6,), k, oob=4)
            got = ndgather.gather_nd(data, idx, batch_dims=b, mode=mode)
            assert_same(got, gather_nd_loop(data, idx, b, mode))


def test_mode_zero_fills_whole_slice_with_zero_bytes() -> None:
    data = np.full((3, 4), -1.5, dtype=np.float64)
    got = ndgather.gather_nd(data, [[1], [3], [-4], [-2]], mode="zero")
    assert got.shape == (4, 4)
    assert got[1].tobytes() == bytes(32) and got[2].tobytes() == bytes(32)
    assert np.all(got[0] == -1.5) and np.all(got[3] == -1.5)
    # one bad component of a tuple is enough to zero its slice
    d3 = distinct((2, 3, 4), np.int32) + 1
    got = ndgather.gather_nd(d3, [[0, 3], [1, 2], [2, 0], [-1, -3]], mode="zero")
    assert_same(got, gather_nd_loop(d3, np.array([[0, 3], [1, 2], [2, 0], [-1, -3]]), 0, "zero"))
    assert not got[0].any() and not got[2].any()


def test_mode_clip_wraps_negatives_then_clamps() -> None:
    data = distinct((5, 3), np.int64)
    idx = np.array([[-1], [-5], [-6], [-100], [5], [99], [4], [0]])
    got = ndgather.gather_nd(data, idx, mode="clip")
    assert_same(got, gather_nd_loop(data, idx, 0, "clip"))
    # -1 wraps to 4 (not clamped to 0); -6 wraps to -1, then clamps to 0; 99 clamps to 4
    assert_same(got[0], data[4])
    assert_same(got[2], data[0])
    assert_same(got[5], data[4])


@pytest.mark.parametrize("mode", MODES)
def test_unsigned_huge_and_int64_min(mode: str) -> None:
    """uint64 values above 2**63 are out of range (never read as negatives); so is int64 min."""
    data = distinct((4, 3), np.int32) + 1
    cases = [
        np.array([[2**64 - 1]], dtype=np.uint64),
        np.array([[2**63]], dtype=np.uint64),
        np.array([[2**32 - 1]], dtype=np.uint32),
        np.array([[255]], dtype=np.uint8),
        np.array([[-(2**63)]], dtype=np.int64),
        np.array([[-128]], dtype=np.int8),
    ]
    for idx in cases:
        if mode == "raise":
            with pytest.raises(IndexError):
                ndgather.gather_nd(data, idx, mode=mode)
        else:
            got = ndgather.gather_nd(data, idx, mode=mode)
            assert_same(got, gather_nd_loop(data, idx, 0, mode))


def test_default_mode_is_raise() -> None:
    with pytest.raises(IndexError):
        ndgather.gather_nd(np.arange(3), [[3]])
    with pytest.raises(IndexError):
        ndgather.gather_nd(np.arange(3), [[-4]])
