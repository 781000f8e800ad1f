"""Every data dtype of the contract: bytes copied exactly, byte order kept, objects refcounted."""

from __future__ import annotations

import gc
import math
import subprocess
import sys
import textwrap

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

NUMERIC = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "longdouble",
    "clongdouble",
]

OTHER = [
    "datetime64[ns]",
    "datetime64[D]",
    "datetime64[s]",
    "timedelta64[ms]",
    "timedelta64[Y]",
    "S1",
    "S5",
    "U1",
    "U7",
    "V3",
    "V16",
]

STRUCTURED = {
    "rec3": np.dtype([("a", "u1"), ("b", "S2")]),
    "rec7": np.dtype([("a", "<i4"), ("b", "S3")]),
    "rec13": np.dtype([("a", "<f8"), ("b", "S5")]),
    "rec-aligned-16": np.dtype([("a", "u1"), ("b", "<i8")], align=True),
    "rec-nested": np.dtype([("p", [("x", "<f4"), ("y", "<i2")]), ("v", "<u2", (3,))]),
    "rec-offsets-gap": np.dtype(
        {"names": ["a", "b"], "formats": ["<i2", "<i2"], "offsets": [0, 5]}
    ),
    "rec-big-endian": np.dtype([("a", ">i4"), ("b", ">f8"), ("c", "S1")]),
    "rec-33": np.dtype([("a", "S33")]),
}

BIG_ENDIAN = [
    ">i2",
    ">u2",
    ">i4",
    ">u4",
    ">i8",
    ">u8",
    ">f2",
    ">f4",
    ">f8",
    ">c8",
    ">c16",
    ">U3",
    ">M8[s]",
    ">m8[us]",
]


def make_data(dtype: np.dtype, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Data of any non-object dtype whose elements are (very likely) all different."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if dtype.kind == "U":
        chars = dtype.itemsize // 4
        vals = [
            "".join(chr(0x41 + int(c)) for c in rng.integers(0, 2000, size=chars)) for _ in range(n)
        ]
        return np.array(vals, dtype=dtype).reshape(shape)
    raw = rng.integers(0, 256, size=n * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape) if dtype.itemsize else np.zeros(shape, dtype)


def exercise(data: np.ndarray) -> None:
    """gather_nd and gather in several configurations, every result byte-compared."""
    assert data.ndim == 3
    rng = np.random.default_rng(1)
    d0, d1, d2 = data.shape
    # gather_nd, elements, rows, batch_dims 1 and 2
    idx = np.stack(
        [rng.integers(-d0, d0, 11), rng.integers(-d1, d1, 11), rng.integers(-d2, d2, 11)], -1
    )
    assert_same(ndgather.gather_nd(data, idx), gather_nd_fancy(data, idx))
    assert_same(ndgather.gather_nd(data, idx[:, :1]), gather_nd_fancy(data, idx[:, :1]))
    assert_same(ndgather.gather_nd(data, idx[:, :2]), gather_nd_fancy(data, idx[:, :2]))
    ib = rng.integers(-d1, d1, size=(d0, 4, 1))
    assert_same(ndgather.gather_nd(data, ib, batch_dims=1), gather_nd_loop(data, ib, 1))
    ib2 = rng.integers(-d2, d2, size=(d0, d1, 1))
    assert_same(ndgather.gather_nd(data, ib2, batch_dims=2), gather_nd_loop(data, ib2, 2))
    # gather on each axis, with and without batch dims
    for axis in range(3):
        gi = rng.integers(-data.shape[axis], data.shape[axis], size=(5, 2))
        assert_same(ndgather.gather(data, gi, axis=axis), gather_take(data, gi, axis))
        assert_same(ndgather.gather(data, gi[0, 0], axis=axis), gather_take(data, gi[0, 0], axis))
    gb = rng.integers(-d2, d2, size=(d0, d1, 3))
    assert_same(ndgather.gather(data, gb, axis=2, batch_dims=2), gather_take(data, gb, 2, 2))
    # zero / clip with out-of-range indices
    oob = np.array([[0, d1 + 3], [d0, 0], [-1, -1], [-d0 - 1, 0]])
    for mode in ("zero", "clip"):
        got = ndgather.gather_nd(data, oob, mode=mode)
        assert_same(got, gather_nd_loop(data, oob, 0, mode))
        assert_same(
            ndgather.gather(data, oob, axis=1, mode=mode), gather_take(data, oob, 1, 0, mode)
        )
    z = ndgather.gather_nd(data, oob, mode="zero")
    if data.dtype.itemsize:
        assert z[0].tobytes() == bytes(z[0].nbytes)
        assert z[1].tobytes() == bytes(z[1].nbytes)
    # results are fresh arrays of the same dtype, byte order included
    res = ndgather.gather(data, [0, 1], axis=0)
    assert res.dtype == data.dtype and res.dtype.str == data.dtype.str
    assert_result_array(res, data)


@pytest.mark.parametrize("dtype", NUMERIC + OTHER)
def test_builtin_dtypes(dtype: str) -> None:
    exercise(make_data(np.dtype(dtype), (4, 5, 3)))


@pytest.mark.parametrize("dtype", ["longdouble", "clongdouble"])
def test_long_double_every_byte_copied(dtype: str) -> None:
    """ndgather copies whole elements, padding included (NumPy's FPU copy may not)."""
    data = make_data(np.dtype(dtype), (6, 4), seed=9)
    void = data.view(f"V{data.dtype.itemsize}")
    idx = np.array([5, 0, -1, 2])
    got = ndgather.gather(data, idx)
    assert got.view(void.dtype).tobytes() == void[idx].tobytes()
    got = ndgather.gather_nd(data, np.array([[1, 3], [0, 0]]))
    assert got.view(void.dtype).tobytes() == void[[1, 0], [3, 0]].tobytes()


@pytest.mark.parametrize("name", list(STRUCTURED))
def test_structured(name: str) -> None:
    dt = STRUCTURED[name]
    data = make_data(dt, (4, 5, 3), seed=2)
    exercise(data)
    got = ndgather.gather(data, [2, 0], axis=1)
    assert got.dtype == dt and got.dtype.fields == dt.fields


@pytest.mark.parametrize("name", ["rec-aligned-16", "rec-offsets-gap"])
def test_records_with_gaps_copied_whole(name: str) -> None:
    """Whole records are copied, the bytes between fields included."""
    dt = STRUCTURED[name]
    data = make_data(dt, (6, 4), seed=8)
    void = data.view(f"V{dt.itemsize}")
    idx = np.array([5, 0, -1, 2])
    assert ndgather.gather(data, idx).tobytes() == void[idx].tobytes()
    got = ndgather.gather_nd(data, np.array([[1, 3], [0, 0]]))
    assert got.tobytes() == void[[1, 0], [3, 0]].tobytes()


@pytest.mark.parametrize("itemsize", [3, 5, 6, 7, 9, 12, 13, 17, 24, 31, 33, 100, 4097])
def test_odd_itemsizes(itemsize: int) -> None:
    dt = np.dtype([("a", "u1"), ("b", f"S{itemsize - 1}")])
    assert dt.itemsize == itemsize
    exercise(make_data(dt, (4, 5, 3), seed=itemsize))


def test_zero_itemsize_records() -> None:
    dt = np.dtype([])
    data = np.zeros((3, 4), dtype=dt)
    assert data.itemsize == 0
    got = ndgather.gather(data, [2, 0, -1], axis=0)
    assert got.shape == (3, 4) and got.dtype == dt
    got = ndgather.gather_nd(data, [[1, 2], [0, 0]])
    assert got.shape == (2,) and got.dtype == dt
    with pytest.raises(IndexError):
        ndgather.gather(data, [3], axis=0)


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
def test_big_endian_keeps_byte_order(dtype: str) -> None:
    dt = np.dtype(dtype)
    assert dt.byteorder == ">"
    data = make_data(dt, (4, 5, 3), seed=3)
    exercise(data)
    got = ndgather.gather_nd(data, [[1, 2]])
    assert got.dtype.str == dt.str
    assert got.dtype.byteorder == ">"
    # values read the same as NumPy reads them
    np.testing.assert_array_equal(
        got.astype(dt.newbyteorder("=")), data[1:2, 2].astype(dt.newbyteorder("="))
    )


def test_big_endian_values_readable() -> None:
    data = np.arange(24, dtype=">i4").reshape(4, 6)
    got = ndgather.gather(data, [3, 1], axis=0)
    assert got.dtype.str == ">i4"
    assert got.tolist() == data[[3, 1]].tolist()
    got = ndgather.gather_nd(data, [[3, 5], [0, 1]])
    assert got.tolist() == [23, 1]


ML_DTYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "int4", "uint4", "float4_e2m1fn"]


@pytest.mark.parametrize("name", ML_DTYPES)
def test_ml_dtypes(name: str) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {name}")
    dt = np.dtype(getattr(ml_dtypes, name))
    vals = np.arange(60, dtype=np.float32).reshape(4, 5, 3) % 7
    data = vals.astype(dt)
    exercise(data)
    got = ndgather.gather(data, [[1, 0]], axis=2)
    assert got.dtype == dt


def test_bfloat16_values() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data = np.array([[1.5, -2.0], [3.25, 0.0]], dtype=ml_dtypes.bfloat16)
    got = ndgather.gather_nd(data, [[1, 0], [0, 1]])
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    assert got.astype(np.float32).tolist() == [3.25, -2.0]


def test_datetime_values_and_nat() -> None:
    data = np.array(["2020-01-01", "NaT", "1969-12-31", "2262-04-11"], dtype="M8[D]")
    got = ndgather.gather(data, [1, 3, 0])
    assert got.dtype == data.dtype
    assert np.isnat(got[0])
    assert got[1] == data[3] and got[2] == data[0]
    td = np.array([1, -2, 3], dtype="m8[h]").reshape(3, 1)
    assert_same(ndgather.gather_nd(td, [[2], [1]]), td[[2, 1]])
    z = ndgather.gather(data, [9], mode="zero")
    assert z.tolist() == [np.datetime64("1970-01-01")]


def test_float_special_values_bit_exact() -> None:
    vals = np.array([np.nan, -0.0, np.inf, -np.inf, 5e-324, 1.0], dtype=np.float64)
    payload_nan = np.array([0x7FF0000000000123], dtype=np.uint64).view(np.float64)
    data = np.concatenate([vals, payload_nan])
    got = ndgather.gather(data, np.arange(7)[::-1])
    assert got.tobytes() == data[::-1].tobytes()
    h = data.astype(np.float16)
    assert ndgather.gather(h, [1, 0]).tobytes() == h[[1, 0]].tobytes()


def test_strings_fixed_width() -> None:
    data = np.array([["alpha", "be"], ["", "delta"], ["e", "ffffffff"]], dtype="U7")
    assert_same(ndgather.gather_nd(data, [[2, 1], [1, 0]]), data[[2, 1], [1, 0]])
    assert_same(ndgather.gather(data, [2], axis=0), data[[2]])
    assert ndgather.gather(data, [2], axis=0).tolist() == [["e", "fffffff"]]
    sb = np.array([b"ab", b"\x00c", b"defgh"], dtype="S5")
    assert_same(ndgather.gather(sb, [2, 1, 0, -1]), sb[[2, 1, 0, -1]])
    z = ndgather.gather(sb, [7], mode="zero")
    assert z.tolist() == [b""]


# --------------------------------------------------------------------------- object arrays


class Thing:
    """An arbitrary Python object: identity matters, not value."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __repr__(self) -> str:
        return f"Thing({self.i})"


def object_array(objs: list[object], shape: tuple[int, ...]) -> np.ndarray:
    arr = np.empty(len(objs), dtype=object)
    for i, o in enumerate(objs):
        arr[i] = o
    return arr.reshape(shape)


def fresh_objects(n: int) -> list[object]:
    out: list[object] = []
    for i in range(n):
        kind = i % 6
        if kind == 0:
            out.append("".join(["str-", str(i), "-", "x" * (i % 9)]))  # not interned
        elif kind == 1:
            out.append(Thing(i))
        elif kind == 2:
            out.append(10**30 + i)  # a big int, a fresh object
        elif kind == 3:
            out.append((i, "t"))
        elif kind == 4:
            out.append([i])
        else:
            out.append(float(i) + 0.5)
    return out


def refcounts(objs: list[object]) -> list[int]:
    return [sys.getrefcount(o) for o in objs]


def test_object_strings_values() -> None:
    words = ["".join(["w", str(i)]) for i in range(12)]
    data = object_array(words, (3, 4))
    got = ndgather.gather_nd(data, [[2, 3], [0, 0], [-1, 0]])
    assert got.dtype == object
    assert got.tolist() == ["w11", "w0", "w8"]
    assert got[0] is words[11]
    got = ndgather.gather(data, [[1], [2]], axis=1)
    assert got.shape == (3, 2, 1)
    assert_same(got, gather_take(data, np.array([[1], [2]]), 1))


def test_object_arbitrary_identity() -> None:
    objs = fresh_objects(60)
    data = object_array(objs, (4, 5, 3))
    exercise_objects(data)


def exercise_objects(data: np.ndarray) -> None:
    rng = np.random.default_rng(4)
    idx = np.stack([rng.integers(-4, 4, 20), rng.integers(-5, 5, 20)], -1)
    assert_same(ndgather.gather_nd(data, idx), gather_nd_fancy(data, idx))
    assert_same(ndgather.gather_nd(data, idx[:, :1]), gather_nd_fancy(data, idx[:, :1]))
    ib = rng.integers(-5, 5, size=(4, 6, 1))
    assert_same(ndgather.gather_nd(data, ib, batch_dims=1), gather_nd_fancy(data, ib, 1))
    for axis in range(3):
        gi = rng.integers(-data.shape[axis], data.shape[axis], size=(7,))
        assert_same(ndgather.gather(data, gi, axis=axis), gather_take(data, gi, axis))
    gb = rng.integers(-3, 3, size=(4, 5, 2))
    assert_same(ndgather.gather(data, gb, axis=2, batch_dims=2), gather_take(data, gb, 2, 2))


def test_object_mode_zero_gives_none() -> None:
    objs = fresh_objects(12)
    data = object_array(objs, (4, 3))
    got = ndgather.gather(data, [1, 9, -9, 3], mode="zero")
    assert got.shape == (4, 3)
    assert all(x is None for x in got[1]) and all(x is None for x in got[2])
    assert all(got[0][j] is data[1][j] for j in range(3))
    got = ndgather.gather_nd(data, [[0, 5], [3, 2]], mode="zero")
    assert got[0] is None and got[1] is data[3, 2]
    got = ndgather.gather(data, [7, 0], axis=1, mode="clip")
    assert got[2, 0] is data[2, 2] and got[2, 1] is data[2, 0]


def test_object_refcounts_no_leak_no_double_free() -> None:
    objs = fresh_objects(48)
    data = object_array(objs, (4, 4, 3))
    idx_nd = np.array([[0, 1], [3, 3], [-1, -4], [2, 0]] * 5)
    gc.collect()
    before = refcounts(objs)
    for _ in range(200):
        ndgather.gather_nd(data, idx_nd)
        ndgather.gather_nd(data, idx_nd, mode="zero")
        ndgather.gather_nd(data, idx_nd[:, :1], mode="clip")
        ndgather.gather(data, [0, 3, 3, -1], axis=1)
        ndgather.gather(data, [[0, 9], [-9, 2]], axis=2, mode="zero")
        ndgather.gather(data, np.ones((4, 4, 2), np.int8), axis=2, batch_dims=2)
        ndgather.gather(data, 2, axis=0)
    gc.collect()
    assert refcounts(objs) == before
    # a result holds one reference per occurrence, released when it goes away
    res = ndgather.gather(data, [1, 1, 1], axis=0)
    in_row = {id(x) for x in data[1].ravel()}
    # (no loop variable may hold an object here: zip/enumerate keep references in their tuples)
    expected = [b + (3 if id(o) in in_row else 0) for o, b in zip(objs, before, strict=True)]
    assert refcounts(objs) == expected
    del res
    gc.collect()
    assert refcounts(objs) == before
    # the original objects are all still alive and intact (no double free)
    assert [x for x in data.ravel()] == objs


def test_object_refcounts_with_out() -> None:
    objs = fresh_objects(12)
    data = object_array(objs, (4, 3))
    fill = [Thing(1000 + i) for i in range(6)]
    gc.collect()
    before = refcounts(objs)
    fill_before = refcounts(fill)
    out = object_array(list(fill), (2, 3))
    assert refcounts(fill) == [c + 1 for c in fill_before]
    for _ in range(100):
        r = ndgather.gather(data, [3, 0], out=out)
        assert r is out
    gc.collect()
    # the objects out held before were released, exactly once
    assert refcounts(fill) == fill_before
    assert all(out[0, j] is data[3, j] and out[1, j] is data[0, j] for j in range(3))
    for _ in range(100):
        ndgather.gather_nd(
            data, [[1, 2], [0, 1], [2, 2], [3, 0], [0, 0], [1, 1]], out=out.reshape(6)
        )
        ndgather.gather(data, [9, -1], mode="zero", out=out)
    assert all(x is None for x in out[0])
    assert all(out[1, j] is data[3, j] for j in range(3))
    del out, r
    gc.collect()
    assert refcounts(objs) == before
    assert refcounts(fill) == fill_before


def test_object_error_leaves_refcounts_and_out() -> None:
    objs = fresh_objects(12)
    data = object_array(objs, (4, 3))
    fill = [Thing(2000 + i) for i in range(6)]
    out = object_array(list(fill), (2, 3))
    gc.collect()
    before = refcounts(objs)
    fill_before = refcounts(fill)
    for _ in range(50):
        with pytest.raises(IndexError):
            ndgather.gather(data, [0, 4], out=out)
        with pytest.raises(IndexError):
            ndgather.gather_nd(data, [[0], [-5]], out=out)
    gc.collect()
    assert refcounts(objs) == before
    assert refcounts(fill) == fill_before
    assert [x for x in out.ravel()] == fill


def test_object_large_parallel_sized() -> None:
    objs = fresh_objects(600)
    data = object_array(objs, (200, 3))
    rng = np.random.default_rng(5)
    idx = rng.integers(-200, 200, size=(300_000,))
    gc.collect()
    before = refcounts(objs)
    got = ndgather.gather(data, idx)
    assert got.shape == (300_000, 3)
    expected = data[idx]
    assert all(a is b for a, b in zip(got.ravel(), expected.ravel(), strict=True))
    del got, expected
    got = ndgather.gather_nd(data, np.stack([idx, idx % 3], -1))
    del got
    gc.collect()
    assert refcounts(objs) == before


def test_object_data_with_null_slots() -> None:
    """np.empty(object) is filled with None; gathering it is fine."""
    data = np.empty((3, 2), dtype=object)
    got = ndgather.gather(data, [2, 0])
    assert got.shape == (2, 2) and all(x is None for x in got.ravel())


def test_structured_with_object_field() -> None:
    """A record holding an object is gathered like `object` data: the references in its
    object field are counted, one more for each copy in the result."""
    dt = np.dtype([("name", object), ("v", "<i4")])
    names = ["".join(["n", str(i)]) for i in range(6)]
    data = np.empty(6, dtype=dt)
    for i in range(6):
        data[i] = (names[i], i)
    data = data.reshape(3, 2)
    gc.collect()
    before = refcounts(names)
    got = ndgather.gather(data, [2, 2, 0])
    assert got.dtype == dt
    assert got["name"][0, 1] is names[5] and got["v"][2, 1] == 1
    assert sys.getrefcount(names[5]) == before[5] + 2
    del got
    gc.collect()
    assert refcounts(names) == before


def test_numpy_stringdtype_is_a_type_error() -> None:
    """NumPy 2's variable-width StringDType keeps its strings outside the array: copying its
    bytes would leave dangling pointers, so it is refused with the TypeError the README
    documents, naming the ways out. Run in a child process so that a crash fails this test,
    not the whole session."""
    if not hasattr(np, "dtypes") or not hasattr(np.dtypes, "StringDType"):
        pytest.skip("no StringDType in this NumPy")
    code = textwrap.dedent(
        """
        import numpy as np, ndgather
        words = ["short", "a much longer string that is not stored inline " * 3, ""]
        data = np.array(words * 4, dtype=np.dtypes.StringDType()).reshape(4, 3)
        for call in (lambda: ndgather.gather(data, [3, 0, 3]),
                     lambda: ndgather.gather_nd(data, [[1, 2]]),
                     lambda: ndgather.gather(data, [0], out=np.empty((1, 3), data.dtype))):
            try:
                call()
            except TypeError as e:
                assert "StringDType" in str(e) and "astype(object)" in str(e), e
            else:
                raise SystemExit("no TypeError")
        print("TypeError")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout.strip() == "TypeError"
