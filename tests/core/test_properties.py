"""Hypothesis property tests: random shapes, batch_dims, index dtypes, modes and layouts."""

from __future__ import annotations

import math

import ndgather
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from reference import (
    assert_result_array,
    assert_same,
    gather_nd_fancy,
    gather_nd_loop,
    gather_take,
    gather_take_along,
)

INDEX_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DATA_DTYPES = ["int8", "uint16", "float32", "float64", "complex128", "S3", ">i4", "V5", "U2"]

# sizes 0..4, with 0 rarer, so that most cases have some output
dims = st.sampled_from([0, 1, 2, 2, 3, 3, 4])
mid_dims = st.sampled_from([0, 1, 2, 3, 3])


def _data(draw: st.DrawFn, shape: tuple[int, ...]) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(DATA_DTYPES)))
    n = math.prod(shape)
    if dtype.kind == "U":
        arr = np.array([chr(0x61 + i % 26) * (1 + i % 2) for i in range(n)], dtype=dtype)
    else:
        raw = (np.arange(n * dtype.itemsize, dtype=np.int64) * 37 + 11) % 251
        arr = raw.astype(np.uint8).view(dtype)
    arr = arr.reshape(shape)
    layout = draw(st.sampled_from(["C", "F", "reversed", "transposed-copy"]))
    if layout == "F":
        arr = np.asfortranarray(arr)
    elif layout == "reversed" and arr.ndim:
        # same values, negative strides on every axis
        store = np.ascontiguousarray(arr[(slice(None, None, -1),) * arr.ndim])
        arr = store[(slice(None, None, -1),) * arr.ndim]
    elif layout == "transposed-copy" and arr.ndim > 1:
        arr = np.ascontiguousarray(arr.T).T
    return arr


def _values(
    draw: st.DrawFn, shape: tuple[int, ...], size: int, dtype: np.dtype, mode: str
) -> np.ndarray:
    """Index values for an axis of ``size``: valid ones, plus out-of-range ones unless 'raise'
    (where a few bad ones are drawn on purpose, to compare the errors)."""
    n = math.prod(shape)
    info = np.iinfo(dtype)
    lo, hi = max(-size, int(info.min)), min(size - 1, int(info.max))
    bad_ok = mode != "raise" or draw(st.integers(0, 9)) == 0
    if bad_ok:
        lo2, hi2 = max(-size - 3, int(info.min)), min(size + 2, int(info.max))
    else:
        lo2, hi2 = lo, hi
    if lo2 > hi2 or (lo > hi and not bad_ok):
        return np.zeros(shape, dtype=dtype)
    vals = draw(st.lists(st.integers(lo2, hi2), min_size=n, max_size=n))
    extremes = [int(info.min), int(info.max)] if bad_ok else []
    if extremes and n and draw(st.booleans()):
        vals[draw(st.integers(0, n - 1))] = draw(st.sampled_from(extremes))
    return np.array(vals, dtype=dtype).reshape(shape)


@st.composite
def nd_cases(draw: st.DrawFn):
    r = draw(st.integers(1, 4))
    dshape = tuple(draw(st.lists(dims, min_size=r, max_size=r)))
    extra = draw(st.integers(0, 2))
    q_mid = tuple(draw(st.lists(mid_dims, min_size=extra, max_size=extra)))
    b = draw(st.integers(0, r - 1))
    k = draw(st.integers(1, r - b))
    mode = draw(st.sampled_from(["raise", "zero", "clip"]))
    idt = np.dtype(draw(st.sampled_from(INDEX_DTYPES)))
    data = _data(draw, dshape)
    shape = dshape[:b] + q_mid
    cols = [_values(draw, shape, dshape[b + j], idt, mode) for j in range(k)]
    indices = np.stack(cols, axis=-1) if cols else np.zeros(shape + (0,), idt)
    indices = indices.astype(idt).reshape(shape + (k,))
    if draw(st.booleans()) and indices.ndim > 1:
        indices = np.asfortranarray(indices)
    if draw(st.booleans()):
        indices = indices.astype(idt.newbyteorder("S"))
    return data, indices, b, mode


@st.composite
def g_cases(draw: st.DrawFn):
    r = draw(st.integers(1, 4))
    dshape = tuple(draw(st.lists(dims, min_size=r, max_size=r)))
    axis = draw(st.integers(0, r - 1))
    b = draw(st.integers(0, axis))
    extra = draw(st.integers(0, 2))
    mid = tuple(draw(st.lists(mid_dims, min_size=extra, max_size=extra)))
    mode = draw(st.sampled_from(["raise", "zero", "clip"]))
    idt = np.dtype(draw(st.sampled_from(INDEX_DTYPES)))
    data = _data(draw, dshape)
    ishape = dshape[:b] + mid
    indices = _values(draw, ishape, dshape[axis], idt, mode)
    if draw(st.booleans()) and indices.ndim > 1:
        indices = indices.T.copy().T
    q = indices.ndim
    axis_arg = axis - r if draw(st.booleans()) else axis
    b_arg = b - q if (b < q and draw(st.booleans())) else b
    return data, indices, axis_arg, b_arg, mode


def _is_clip_into_empty(indices: np.ndarray, sizes: list[int]) -> bool:
    return indices.size > 0 and any(s == 0 for s in sizes)


@settings(max_examples=500)
@given(nd_cases())
def test_gather_nd_matches_reference(case) -> None:
    data, indices, b, mode = case
    k = indices.shape[-1]
    sizes = [data.shape[b + j] for j in range(k)]
    if mode == "clip" and _is_clip_into_empty(indices, sizes):
        return  # nothing to clamp into: not specified
    try:
        expected = gather_nd_fancy(data, indices, b, mode)
    except IndexError:
        event(f"{mode}: IndexError")
        with pytest.raises(IndexError):
            ndgather.gather_nd(data, indices, batch_dims=b, mode=mode)
        return
    event(f"{mode}: result, {'empty' if expected.size == 0 else 'non-empty'}")
    got = ndgather.gather_nd(data, indices, batch_dims=b, mode=mode)
    assert_same(got, expected)
    assert_result_array(got, data, indices)
    if indices.size <= 64:
        assert_same(got, gather_nd_loop(data, indices, b, mode))


@settings(max_examples=500)
@given(g_cases())
def test_gather_matches_reference(case) -> None:
    data, indices, axis, b, mode = case
    a = axis % data.ndim
    if mode == "clip" and _is_clip_into_empty(indices, [data.shape[a]]):
        return
    try:
        expected = gather_take(data, indices, axis, b, mode)
    except IndexError:
        event(f"{mode}: IndexError")
        if math.prod(data.shape[b:a]) == 0:
            # nothing is read from the gathered axis (np.take doesn't raise either):
            # raising or returning the empty result are both acceptable
            try:
                got = ndgather.gather(data, indices, axis=axis, batch_dims=b, mode=mode)
            except IndexError:
                return
            assert got.size == 0
            return
        with pytest.raises(IndexError):
            ndgather.gather(data, indices, axis=axis, batch_dims=b, mode=mode)
        return
    event(f"{mode}: result, {'empty' if expected.size == 0 else 'non-empty'}")
    got = ndgather.gather(data, indices, axis=axis, batch_dims=b, mode=mode)
    assert_same(got, expected)
    assert_result_array(got, data, indices)
    assert_same(got, gather_take_along(data, indices, axis, b, mode))


@settings(max_examples=100)
@given(nd_cases())
def test_gather_nd_is_gather_for_one_index(case) -> None:
    """gather_nd with k == 1 and batch_dims b equals gather on axis b with batch_dims b."""
    data, indices, b, mode = case
    if indices.shape[-1] != 1:
        return
    if mode == "clip" and _is_clip_into_empty(indices, [data.shape[b]]):
        return
    try:
        expected = ndgather.gather(data, indices[..., 0], axis=b, batch_dims=b, mode=mode)
    except IndexError:
        with pytest.raises(IndexError):
            ndgather.gather_nd(data, indices, batch_dims=b, mode=mode)
        return
    assert_same(ndgather.gather_nd(data, indices, batch_dims=b, mode=mode), expected)


@settings(max_examples=60)
@given(
    st.integers(1, 3),
    st.integers(0, 3),
    st.sampled_from(INDEX_DTYPES),
    st.sampled_from(["zero", "clip"]),
)
def test_out_matches_fresh_result(rows: int, cols: int, idt: str, mode: str) -> None:
    data = np.arange(rows * 5 * max(cols, 1), dtype=np.float32).reshape(rows, 5, max(cols, 1))
    idx = (np.arange(7) * 3 % 9).astype(idt)
    fresh = ndgather.gather(data, idx, axis=1, mode=mode)
    out = np.full(fresh.shape, np.nan, dtype=fresh.dtype)
    assert ndgather.gather(data, idx, axis=1, mode=mode, out=out) is out
    assert_same(out, fresh)
