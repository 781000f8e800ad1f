"""``ndgather._core._gather_chunks``: the gather from a grid of chunks (private, used by
``ndgather.dask``) equals the NumPy references on the concatenated array, for random chunk
grids, chunk layouts, dtypes, modes, both operators and batch axes; its errors are the
one-shot function's; chunks no index reads are never needed."""

from __future__ import annotations

import zlib
from itertools import product
from typing import Any

import ndgather
import numpy as np
import pytest
from ndgather import _core
from reference import MODES, assert_same, gather_nd_fancy, gather_take

DTYPES = ("float32", "int8", "complex128", ">i4", "U3", "O", "i2,>f8")


def _split(rng: np.random.Generator, n: int) -> list[int]:
    if n == 0:
        return [0]
    cuts = sorted(set(rng.integers(1, n, size=rng.integers(0, n)).tolist()))
    return [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]


def _relayout(rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
    """The same values in another layout: Fortran order, reversed, or every other element."""
    kind = rng.integers(0, 4)
    if kind == 1:
        return np.asfortranarray(a)
    if kind == 2 and a.ndim:
        return a[::-1].copy()[::-1]  # a negative-stride view of a reversed copy
    if kind == 3 and a.ndim:
        wide = np.empty((a.shape[0] * 2,) + a.shape[1:], a.dtype)
        wide[::2] = a
        return wide[::2]
    return a


def _grid(
    rng: np.random.Generator, data: np.ndarray, slice_start: int
) -> tuple[dict[tuple[int, ...], np.ndarray], list[list[int]]]:
    sizes = [[n] if a >= slice_start else _split(rng, n) for a, n in enumerate(data.shape)]
    starts = [np.cumsum([0, *s]).tolist() for s in sizes]
    chunks = {}
    for coords in product(*(range(len(s)) for s in sizes)):
        sl = tuple(slice(st[c], st[c + 1]) for st, c in zip(starts, coords, strict=True))
        chunks[coords] = _relayout(rng, data[sl].copy())
    return chunks, sizes


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    raw = rng.integers(1, 100, size=shape)
    dt = np.dtype(dtype)
    if dt.kind == "O":
        out = np.empty(shape, object)
        out.ravel()[:] = [f"s{v}" for v in raw.ravel()]
        return out
    if dt.names:
        out = np.zeros(shape, dt)
        out["f0"], out["f1"] = raw, raw / 7
        return out
    return raw.astype(dt)


def _reference(data: np.ndarray, idx: np.ndarray, axis: int | None, b: int, mode: str) -> Any:
    if axis is None:
        return gather_nd_fancy(data, idx, b, mode)
    return gather_take(data, idx, axis, b, mode)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nd", [True, False], ids=["gather_nd", "gather"])
def test_equals_numpy_on_the_concatenated_array(dtype: str, nd: bool) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {nd}".encode()))
    for _ in range(40):
        r = int(rng.integers(1, 5))
        shape = tuple(int(rng.integers(0 if rng.random() < 0.1 else 1, 6)) for _ in range(r))
        data = _values(rng, shape, dtype)
        mode = str(rng.choice(MODES))
        b = int(rng.integers(0, min(r - 1, 1) + 1))
        lead = shape[:b] + tuple(int(rng.integers(0, 5)) for _ in range(rng.integers(0, 3)))
        if nd:
            k = int(rng.integers(1, r - b + 1))
            sizes = np.array(shape[b : b + k])
            idx = rng.integers(-sizes - 2, sizes + 2, size=lead + (k,))
            axis = None
            slice_start = b + k
        else:
            axis = int(rng.integers(b, r))
            idx = rng.integers(-shape[axis] - 2, shape[axis] + 2, size=lead)
            slice_start = axis + 1
        idx = idx.astype(rng.choice(["int8", "int32", "int64", ">i8"]))
        chunks, sizes_ = _grid(rng, data, slice_start)
        try:
            want = _reference(data, idx, axis, b, mode)
        except IndexError:
            with pytest.raises(ndgather.GatherIndexError) as info:
                _core._gather_chunks(chunks, sizes_, data.dtype, idx, axis, b, mode)
            with pytest.raises(ndgather.GatherIndexError) as expected:
                if axis is None:
                    ndgather.gather_nd(data, idx, b, mode=mode)
                else:
                    ndgather.gather(data, idx, axis, b, mode=mode)
            assert str(info.value) == str(expected.value)
            assert info.value.__dict__ == expected.value.__dict__
            continue
        got = _core._gather_chunks(chunks, sizes_, data.dtype, idx, axis, b, mode)
        if data.dtype.hasobject:
            # The reference puts 0-d arrays in some object slots: compare with the
            # one-shot function instead.
            want = (
                ndgather.gather_nd(data, idx, b, mode=mode)
                if axis is None
                else ndgather.gather(data, idx, axis, b, mode=mode)
            )
        assert_same(got, want)
        # Only the chunks some index reads: the same result.
        touched = _core._chunks_touched(sizes_, idx, axis, b, mode)
        _, nb, indexed = _core._gather_layout(
            data.shape, data.dtype, idx.shape, idx.dtype, axis, b, mode
        )
        dims = list(range(nb)) + list(indexed)
        keep = {tuple(t) for t in touched}
        some = {c: v for c, v in chunks.items() if tuple(c[d] for d in dims) in keep}
        assert_same(_core._gather_chunks(some, sizes_, data.dtype, idx, axis, b, mode), want)


def test_a_missing_chunk_is_a_value_error() -> None:
    data = np.arange(20.0).reshape(10, 2)
    chunks = {(0, 0): data[:5], (1, 0): data[5:]}
    sizes = [[5, 5], [2]]
    assert _core._chunks_touched(sizes, [7, -1], 0, 0, "raise") == [[1]]
    got = _core._gather_chunks({(1, 0): data[5:]}, sizes, data.dtype, [7, -1], 0, 0, "raise")
    assert_same(got, data[[7, -1]])
    with pytest.raises(ValueError, match=r"reads chunk \(0, 0\) of the grid, which was not given"):
        _core._gather_chunks({(1, 0): data[5:]}, sizes, data.dtype, [7, 1], 0, 0, "raise")
    with pytest.raises(ValueError, match="axis 1 is an axis of the gathered slice"):
        _core._gather_chunks(chunks, [[5, 5], [1, 1]], data.dtype, [1], 0, 0, "raise")
    with pytest.raises(
        ValueError, match=r"chunk \(0, 0\) has shape \(5, 2\) but the grid says \(4, 2\)"
    ):
        _core._gather_chunks(chunks, [[4, 6], [2]], data.dtype, [1], 0, 0, "raise")
    with pytest.raises(TypeError, match="a chunk has dtype"):
        _core._gather_chunks(chunks, sizes, np.dtype("f4"), [1], 0, 0, "raise")


def test_errors_are_moved_to_the_whole() -> None:
    whole = np.zeros((30, 2))
    idx = np.arange(40) % 30
    idx[33] = 30
    with pytest.raises(ndgather.GatherIndexError) as expected:
        ndgather.gather(whole, idx)
    block = idx[30:]
    chunks = {(0, 0): whole[:15], (1, 0): whole[15:]}
    for call in (
        lambda: _core._chunks_touched([[15, 15], [2]], block, 0, 0, "raise", whole.shape, [30]),
        lambda: _core._gather_chunks(
            chunks, [[15, 15], [2]], whole.dtype, block, 0, 0, "raise", whole.shape, [30]
        ),
    ):
        with pytest.raises(ndgather.GatherIndexError) as info:
            call()
        assert str(info.value) == str(expected.value)
        assert info.value.__dict__ == expected.value.__dict__


def test_layout_raises_the_one_shot_errors() -> None:
    data = np.zeros((2, 3, 4))
    for args, call in [
        (((2, 4), np.int64, None, 0), lambda: ndgather.gather_nd(data, np.zeros((2, 4), int))),
        (((2,), np.int64, 3, 0), lambda: ndgather.gather(data, np.zeros(2, int), axis=3)),
        (((2,), np.float64, 0, 0), lambda: ndgather.gather(data, np.zeros(2))),
    ]:
        shape, dt, axis, b = args
        with pytest.raises((ValueError, TypeError)) as expected:
            call()
        with pytest.raises(type(expected.value), match=None) as info:
            _core._gather_layout(data.shape, data.dtype, shape, np.dtype(dt), axis, b, "raise")
        assert str(info.value) == str(expected.value)
    assert _core._gather_layout((2, 3, 4), data.dtype, (2, 5), np.dtype("i4"), 1, 1, "raise") == (
        [2, 5, 4],
        1,
        [1],
    )
