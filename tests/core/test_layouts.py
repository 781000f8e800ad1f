"""Any layout of data and indices, any index dtype, array-likes; fresh C-contiguous results."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import ndgather
import numpy as np
import pytest
from reference import (
    assert_result_array,
    assert_same,
    gather_nd_fancy,
    gather_nd_loop,
    gather_take,
)

SHAPE = (3, 4, 5)
INDEX_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def base(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    n = math.prod(shape)
    dtype = np.dtype(dtype)
    if dtype.kind == "O":
        arr = np.empty(n, dtype=object)
        for i in range(n):
            arr[i] = "".join(["o", str(i)])
        return arr.reshape(shape)
    if dtype.kind == "U":
        return np.array([str(i) for i in range(n)], dtype=dtype).reshape(shape)
    if dtype.kind == "V" and dtype.names:
        raw = (np.arange(n * dtype.itemsize) % 251).astype(np.uint8)
        return raw.view(dtype).reshape(shape)
    return (np.arange(n) % 120 + 1).astype(dtype).reshape(shape)


def unaligned(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` (C order) whose buffer starts one byte off alignment."""
    a = np.ascontiguousarray(a)
    buf = np.zeros(a.nbytes + 1, dtype=np.uint8)
    view = buf[1:].view(a.dtype).reshape(a.shape)
    view[...] = a
    if a.dtype.alignment > 1:
        assert not view.flags.aligned
    return view


# Each variant returns an array of shape SHAPE with the same values as base(SHAPE).
def _variants() -> dict[str, Callable[[np.dtype], np.ndarray]]:
    def c(dt: np.dtype) -> np.ndarray:
        return base(SHAPE, dt)

    def fortran(dt: np.dtype) -> np.ndarray:
        a = np.asfortranarray(base(SHAPE, dt))
        assert a.flags.f_contiguous and not a.flags.c_contiguous
        return a

    def stepped(dt: np.dtype) -> np.ndarray:
        big = np.zeros((6, 12, 10), dtype=dt)
        v = big[::2, 1::3, ::2]
        v[...] = base(SHAPE, dt)
        return v

    def transposed(dt: np.dtype) -> np.ndarray:
        t = np.empty(SHAPE[::-1], dtype=dt).T  # shape SHAPE, F-ordered memory
        t[...] = base(SHAPE, dt)
        return t

    def partial_transpose(dt: np.dtype) -> np.ndarray:
        t = np.empty((4, 3, 5), dtype=dt).transpose(1, 0, 2)
        t[...] = base(SHAPE, dt)
        return t

    def negative(dt: np.dtype) -> np.ndarray:
        store = np.empty(SHAPE, dtype=dt)
        v = store[::-1, ::-1, ::-1]
        v[...] = base(SHAPE, dt)
        return v

    def negative_steps(dt: np.dtype) -> np.ndarray:
        store = np.empty((6, 4, 15), dtype=dt)
        v = store[::-2, :, ::-3]
        v[...] = base(SHAPE, dt)
        return v

    def inner_slice(dt: np.dtype) -> np.ndarray:
        store = np.empty((3, 4, 9), dtype=dt)
        v = store[:, :, 2:7]
        v[...] = base(SHAPE, dt)
        return v

    def middle_slice(dt: np.dtype) -> np.ndarray:
        store = np.empty((3, 9, 5), dtype=dt)
        v = store[:, 3:7, :]
        v[...] = base(SHAPE, dt)
        return v

    def readonly(dt: np.dtype) -> np.ndarray:
        a = base(SHAPE, dt)
        a.flags.writeable = False
        return a

    def unaligned_(dt: np.dtype) -> np.ndarray:
        if np.dtype(dt).hasobject:
            pytest.skip("object arrays cannot be unaligned")
        return unaligned(base(SHAPE, dt))

    return {
        "C": c,
        "F": fortran,
        "stepped": stepped,
        "transposed": transposed,
        "partial-transpose": partial_transpose,
        "negative": negative,
        "negative-steps": negative_steps,
        "inner-slice": inner_slice,
        "middle-slice": middle_slice,
        "readonly": readonly,
        "unaligned": unaligned_,
    }


VARIANTS = _variants()
DATA_DTYPES = [
    np.dtype("int8"),
    np.dtype("int16"),
    np.dtype("float32"),
    np.dtype("float64"),
    np.dtype("complex128"),
    np.dtype([("a", "u1"), ("b", "S2")]),
    np.dtype("U3"),
    np.dtype(object),
]


def check_all(data: np.ndarray) -> None:
    """Compare ndgather on ``data`` with the references on a C-contiguous copy of it."""
    ref = np.ascontiguousarray(data)
    rng = np.random.default_rng(0)
    d0, d1, d2 = data.shape
    idx = np.stack(
        [rng.integers(-d0, d0, 9), rng.integers(-d1, d1, 9), rng.integers(-d2, d2, 9)], -1
    )
    for k in (1, 2, 3):
        got = ndgather.gather_nd(data, idx[:, :k])
        assert_same(got, gather_nd_fancy(ref, idx[:, :k]))
        assert_result_array(got, data)
    ib = rng.integers(-d1, d1, size=(d0, 2, 1))
    assert_same(ndgather.gather_nd(data, ib, batch_dims=1), gather_nd_loop(ref, ib, 1))
    ib2 = np.stack([rng.integers(-d1, d1, (d0, 3)), rng.integers(-d2, d2, (d0, 3))], -1)
    assert_same(ndgather.gather_nd(data, ib2, batch_dims=1), gather_nd_loop(ref, ib2, 1))
    for axis in range(3):
        gi = rng.integers(-data.shape[axis], data.shape[axis], size=(2, 3))
        got = ndgather.gather(data, gi, axis=axis)
        assert_same(got, gather_take(ref, gi, axis))
        assert_result_array(got, data)
    gb = rng.integers(-d2, d2, size=(d0, 6))
    assert_same(ndgather.gather(data, gb, axis=2, batch_dims=1), gather_take(ref, gb, 2, 1))
    gb = rng.integers(-d1, d1, size=(d0, 6))
    assert_same(ndgather.gather(data, gb, axis=1, batch_dims=1), gather_take(ref, gb, 1, 1))
    # modes on strided data
    oob = np.array([[0, 9], [1, -1], [-9, 0]])
    assert_same(ndgather.gather_nd(data, oob, mode="clip"), gather_nd_loop(ref, oob, 0, "clip"))
    assert_same(ndgather.gather_nd(data, oob, mode="zero"), gather_nd_loop(ref, oob, 0, "zero"))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("dtype", DATA_DTYPES, ids=lambda d: d.str if d.names is None else "rec3")
def test_data_layouts(variant: str, dtype: np.dtype) -> None:
    data = VARIANTS[variant](dtype)
    assert data.shape == SHAPE
    expected = base(SHAPE, dtype)
    if dtype.hasobject:
        assert data.tolist() == expected.tolist()
    else:
        assert_same(np.ascontiguousarray(data), expected)
    check_all(data)


def test_zero_stride_data() -> None:
    row = np.arange(5, dtype=np.float64)
    data = np.broadcast_to(row, SHAPE)
    assert data.strides[0] == 0 and not data.flags.writeable
    check_all(data)
    scalar_b = np.broadcast_to(np.array(7, dtype=np.int16), SHAPE)
    check_all(scalar_b)


def test_large_strided_data() -> None:
    """Strided data big enough for the parallel path."""
    rng = np.random.default_rng(1)
    store = rng.standard_normal((400, 2, 600)).astype(np.float32)
    data = store[::-1, 1, ::2]  # (400, 300), negative and stepped strides
    idx = rng.integers(-400, 400, size=(50_000, 1))
    assert_same(ndgather.gather_nd(data, idx), np.ascontiguousarray(data)[idx[:, 0]])
    pts = np.stack([rng.integers(0, 400, 500_000), rng.integers(0, 300, 500_000)], -1)
    assert_same(ndgather.gather_nd(data, pts), np.ascontiguousarray(data)[pts[:, 0], pts[:, 1]])
    fd = np.asfortranarray(store[:, 0, :])
    gi = rng.integers(0, 600, size=100_000)
    assert_same(ndgather.gather(fd, gi, axis=1), np.take(np.ascontiguousarray(fd), gi, axis=1))


def test_memmap_data(tmp_path) -> None:
    path = tmp_path / "data.bin"
    mm = np.memmap(path, dtype=np.int32, mode="w+", shape=(50, 7))
    mm[...] = np.arange(350).reshape(50, 7)
    mm.flush()
    ro = np.memmap(path, dtype=np.int32, mode="r", shape=(50, 7))
    got = ndgather.gather(ro, [49, 0, 3])
    assert isinstance(got, np.ndarray)
    assert got.flags.c_contiguous and got.flags.writeable
    np.testing.assert_array_equal(got, np.arange(350).reshape(50, 7)[[49, 0, 3]])
    got = ndgather.gather_nd(ro[:, ::-2], [[1, 2]])
    assert got.tolist() == [np.arange(350).reshape(50, 7)[:, ::-2][1, 2]]
    del ro, mm


# --------------------------------------------------------------------------- indices


def index_variants(idx: np.ndarray) -> dict[str, np.ndarray]:
    """The same index values in many layouts."""
    out: dict[str, np.ndarray] = {"C": idx}
    f = np.asfortranarray(idx)
    out["F"] = f
    big = np.zeros((idx.shape[0] * 3,) + idx.shape[1:], dtype=idx.dtype)
    big[::3] = idx
    out["stepped"] = big[::3]
    rev = np.ascontiguousarray(idx[::-1])
    out["negative"] = rev[::-1]
    tr = np.ascontiguousarray(np.moveaxis(idx, -1, 0))
    out["transposed"] = np.moveaxis(tr, 0, -1)
    out["unaligned"] = unaligned(idx)
    out["byteswapped"] = idx.astype(
        idx.dtype.newbyteorder(">" if idx.dtype.byteorder != ">" else "<")
    )
    ro = idx.copy()
    ro.flags.writeable = False
    out["readonly"] = ro
    return out


@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES)
def test_every_index_dtype(idx_dtype: str) -> None:
    dt = np.dtype(idx_dtype)
    data = base((6, 7, 5), np.dtype(np.float64))
    rng = np.random.default_rng(2)
    signed = dt.kind == "i"
    idx = np.stack(
        [
            rng.integers(-6 if signed else 0, 6, 30),
            rng.integers(-7 if signed else 0, 7, 30),
        ],
        -1,
    ).astype(dt)
    for k in (1, 2):
        assert_same(ndgather.gather_nd(data, idx[:, :k]), gather_nd_fancy(data, idx[:, :k]))
    ib = idx[:, 1].reshape(6, 5, 1)
    assert_same(ndgather.gather_nd(data, ib, batch_dims=1), gather_nd_loop(data, ib, 1))
    gi = idx[:, 1].reshape(3, 10)
    assert_same(ndgather.gather(data, gi, axis=1), gather_take(data, gi, 1))
    assert_same(ndgather.gather(data, gi[0, 0], axis=1), gather_take(data, gi[0, 0], 1))
    gb = idx[:, 1].reshape(6, 5)
    assert_same(ndgather.gather(data, gb, axis=1, batch_dims=1), gather_take(data, gb, 1, 1))
    # the largest valid index each dtype can hold against an axis that large
    if dt.itemsize == 1:
        top = np.iinfo(dt).max
        big = np.arange(top + 1, dtype=np.int32)
        assert_same(ndgather.gather(big, np.array([top, 0], dtype=dt)), big[[top, 0]])
        if signed:
            assert_same(ndgather.gather(big[:128], np.array([-128], dtype=dt)), big[[0]])


@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES)
def test_index_layouts(idx_dtype: str) -> None:
    dt = np.dtype(idx_dtype)
    data = base((6, 7, 5), np.dtype(np.int32))
    rng = np.random.default_rng(3)
    signed = dt.kind == "i"
    idx = np.stack(
        [
            rng.integers(-6 if signed else 0, 6, (4, 3)),
            rng.integers(-7 if signed else 0, 7, (4, 3)),
        ],
        -1,
    ).astype(dt)  # (4, 3, 2)
    expected_nd = gather_nd_fancy(data, idx)
    expected_g = gather_take(data, idx[..., 1], 1)
    for name, iv in index_variants(idx).items():
        np.testing.assert_array_equal(iv, idx, err_msg=name)
        assert_same(ndgather.gather_nd(data, iv), expected_nd)
        assert_same(ndgather.gather(data, iv[..., 1], axis=1), expected_g)
        # strided index array and strided data together
        assert_same(ndgather.gather_nd(np.asfortranarray(data)[:, ::-1][:, ::-1], iv), expected_nd)


def test_zero_stride_indices() -> None:
    data = base((6, 7), np.dtype(np.int64))
    idx = np.broadcast_to(np.array([4, -2]), (1000, 2))
    assert idx.strides[0] == 0
    assert_same(ndgather.gather_nd(data, idx), gather_nd_fancy(data, np.ascontiguousarray(idx)))
    gi = np.broadcast_to(np.array(3, dtype=np.uint8), (2, 5))
    assert_same(ndgather.gather(data, gi, axis=1), gather_take(data, np.ascontiguousarray(gi), 1))


def _broadcast(values: list[int], shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """int8 `values` viewed with `shape` and byte `strides` (0 on the broadcast axes)."""
    store = np.array(values, dtype=np.int8)
    return np.lib.stride_tricks.as_strided(store, shape=shape, strides=strides)


def _at_once(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
    """`fn(*args, **kwargs)`, which must take well under a second: 2 s is the bound."""
    start = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        elapsed = time.perf_counter() - start
        assert elapsed < 2.0, f"took {elapsed:.1f} s"


def test_huge_broadcast_indices_into_an_empty_output_return_at_once() -> None:
    """2**33 positions of one stored index, for an output with no bytes: the index is
    checked once, not once a position (which took 13 s here, and 2**40 minutes)."""
    idx = _broadcast([0], (2**33,), (0,))
    idx_nd = _broadcast([0], (2**33, 1), (0, 0))
    data = np.zeros((5, 0), np.float32)
    out = np.empty((2**33, 0), np.float32)
    for mode in ("raise", "zero", "clip"):
        for fn, i in ((ndgather.gather, idx), (ndgather.gather_nd, idx_nd)):
            got = _at_once(fn, data, i, mode=mode)
            assert isinstance(got, np.ndarray) and got.shape == (2**33, 0)
            assert _at_once(fn, data, i, mode=mode, out=out) is out
    # an empty outer axis (gather's rows are data.shape[:axis] x indices)
    got = _at_once(ndgather.gather, np.zeros((0, 5)), idx, axis=1)
    assert isinstance(got, np.ndarray) and got.shape == (0, 2**33)


@pytest.mark.parametrize(
    "values,shape,strides,position",
    [
        # 2**33 good positions come before the bad one in C order
        ([-5, 7], (2, 2**33), (1, 0), "indices[1, 0]"),  # broadcast inner axis
        ([0, 9, 1], (2, 3, 2**33), (0, 1, 0), "indices[0, 1, 0]"),  # outer and inner
        ([0, 1, 4, 9, 2, 3], (3, 2**32, 2), (2, 0, 1), "indices[1, 0, 1]"),  # middle
    ],
)
def test_bad_index_in_huge_broadcast_indices_is_found_at_once(
    values: list[int], shape: tuple[int, ...], strides: tuple[int, ...], position: str
) -> None:
    """The first bad index in C order still has its exact position in the message."""
    idx = _broadcast(values, shape, strides)
    bad = f"index {max(values)} "
    data = np.zeros((5, 0))
    with pytest.raises(IndexError) as ei:
        _at_once(ndgather.gather, data, idx, axis=0)
    assert bad in str(ei.value) and position in str(ei.value), str(ei.value)
    # gather_nd: the same values as 1-tuples
    with pytest.raises(IndexError) as ei:
        _at_once(ndgather.gather_nd, data, idx[..., np.newaxis])
    assert bad in str(ei.value) and position in str(ei.value), str(ei.value)
    with pytest.raises(IndexError):
        _at_once(ndgather.gather, data, idx, out=np.empty((*shape, 0)))


def test_large_strided_indices() -> None:
    rng = np.random.default_rng(4)
    data = rng.standard_normal((1000, 64)).astype(np.float32)
    store = rng.integers(-1000, 1000, size=(400_000, 3)).astype(">i4")
    idx = store[::-2, 1:2]  # byte-swapped, negative stride, non-contiguous
    assert_same(ndgather.gather_nd(data, idx), data[idx[:, 0].astype(np.int64)])
    gi = store[::3, 2].astype(np.int16)[::-1]
    assert_same(ndgather.gather(data, gi, axis=0), np.take(data, gi.astype(np.int64), axis=0))


# --------------------------------------------------------------------------- array-likes


def test_nested_lists() -> None:
    data = [[1, 2, 3], [4, 5, 6]]
    assert_same(ndgather.gather_nd(data, [[1, 2], [0, 0]]), np.array([6, 1]))
    assert_same(ndgather.gather_nd(data, [[1], [0]]), np.array([[4, 5, 6], [1, 2, 3]]))
    assert_same(ndgather.gather(data, [2, 0], axis=1), np.array([[3, 1], [6, 4]]))
    assert_same(ndgather.gather(data, [[1]], axis=0), np.array([[[4, 5, 6]]]))
    assert_same(ndgather.gather(data, 1, axis=1), np.array([2, 5]))
    fl = [[0.5, 1.5], [2.5, 3.5]]
    assert_same(ndgather.gather_nd(fl, [[1, 1]]), np.array([3.5]))
    words = ["ab", "cde", "f"]
    assert_same(ndgather.gather(words, [2, 0]), np.array(words)[[2, 0]])  # dtype U3
    assert_same(ndgather.gather((10, 20, 30), (2, 2, -3)), np.array([30, 30, 10]))
    assert_same(
        ndgather.gather_nd([[[1, 2]], [[3, 4]]], [[1]], batch_dims=0),
        np.array([[[3, 4]]]),
    )
    assert_same(ndgather.gather([True, False], [1, 1]), np.array([False, False]))


def test_array_protocol_objects() -> None:
    class HasArray:
        def __init__(self, a: np.ndarray) -> None:
            self.a = a

        def __array__(self, dtype=None, copy=None):  # noqa: ANN001, ANN204
            return self.a if dtype is None else self.a.astype(dtype)

    data = np.arange(12, dtype=np.int16).reshape(3, 4)
    assert_same(ndgather.gather(HasArray(data), HasArray(np.array([2, 0]))), data[[2, 0]])
    assert_same(ndgather.gather_nd(HasArray(data), [[2, 3]]), data[[2], [3]])
    mv = memoryview(np.arange(5, dtype=np.float64))
    assert_same(ndgather.gather(mv, [4, 0]), np.array([4.0, 0.0]))


@pytest.mark.parametrize(
    "axis,b",
    [
        (np.int64(2), np.int64(1)),
        (np.int32(-1), np.int8(1)),
        (np.uint8(2), np.uint16(1)),
        (np.intp(2), np.int16(-1)),
    ],
    ids=repr,
)
def test_numpy_integer_scalars_for_attributes(axis, b) -> None:
    data = base((3, 4, 5), np.dtype(np.int64))
    idx = np.array([[0, 4], [1, 2], [3, 3]])
    got = ndgather.gather(data, idx, axis=axis, batch_dims=b)
    assert_same(got, gather_take(data, idx, int(axis), int(b)))
    ib = np.array([[1], [0], [3]])
    got = ndgather.gather_nd(data, ib, batch_dims=np.int64(1))
    assert_same(got, gather_nd_loop(data, ib, 1))
    got = ndgather.gather_nd(data, ib, np.uint8(1))
    assert_same(got, gather_nd_loop(data, ib, 1))


# --------------------------------------------------------------------------- results


def test_results_are_new_arrays_not_views() -> None:
    data = np.arange(10, dtype=np.float64).reshape(1, 10)
    res = ndgather.gather(data, [0])  # the whole of data
    assert_result_array(res, data)
    res[0, 0] = 99.0
    assert data[0, 0] == 0.0
    res = ndgather.gather_nd(data, np.array([0]))  # one full row
    assert_result_array(res, data)
    res[...] = -1
    assert data[0, 3] == 3.0
    res = ndgather.gather(data, np.arange(10), axis=1)  # identity gather
    assert_result_array(res, data)
    res = ndgather.gather(np.asfortranarray(data.reshape(2, 5)), [0, 1])
    assert_result_array(res)
    assert res.flags.c_contiguous and not (res.ndim > 1 and res.flags.f_contiguous)
    # a result is its own owner of independent memory: keeping it alive after data goes
    d = np.arange(100, dtype=np.int64)
    r = ndgather.gather(d, [5, 6])
    del d
    assert r.tolist() == [5, 6]


@pytest.mark.parametrize("dtype", ["int32", "float64", "U3", "object", "complex64"])
def test_zero_d_result_is_array_not_scalar(dtype: str) -> None:
    data = np.array([[1, 2], [3, 4]]).astype(dtype)
    r = ndgather.gather_nd(data, [1, 0])
    assert type(r) is np.ndarray and r.shape == () and r.dtype == data.dtype
    assert r.flags.writeable and r.flags.c_contiguous
    assert r[()] == data[1, 0]
    r = ndgather.gather(data[0], 1)
    assert type(r) is np.ndarray and r.shape == ()
    assert r[()] == data[0, 1]
    r = ndgather.gather(data, 0, axis=1, batch_dims=0)[np.newaxis]
    assert r.shape == (1, 2)


def test_result_dtype_is_data_dtype() -> None:
    for dt in ["<i4", ">i4", "<f8", ">f8", "=u2", "|u1", "<M8[us]", ">U2"]:
        data = np.zeros((2, 2), dtype=dt)
        assert ndgather.gather(data, [1]).dtype.str == np.dtype(dt).str
        assert ndgather.gather_nd(data, [[1, 1]]).dtype.str == np.dtype(dt).str
