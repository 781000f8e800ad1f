"""``dtype=``: gathering into a wider dtype in one pass. The result must equal
``gather(...).astype(dtype)`` byte for byte (NaN payloads, signed zeros, subnormals, integer
extremes, any byte in a bool) for every cast ``numpy.can_cast(..., "safe")`` allows between
bool, integer and floating dtypes, and bfloat16 to float32/float64; every other pair is a
``TypeError`` naming both dtypes."""

from __future__ import annotations

import inspect
from typing import Any

import ml_dtypes
import ndgather
import numpy as np
import pytest
from ndgather import bnns, onnx, openvino

Array = np.ndarray[Any, Any]

BF16 = np.dtype(ml_dtypes.bfloat16)
PLAIN = [
    np.dtype(c) for c in ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]
]
ALL = [*PLAIN, BF16]


def widening_pairs() -> list[tuple[np.dtype[Any], np.dtype[Any]]]:
    """NumPy's own list: every safe cast among the plain dtypes, and bfloat16 to float32/64."""
    pairs = [(a, b) for a in PLAIN for b in PLAIN if a != b and np.can_cast(a, b, "safe")]
    return pairs + [(BF16, np.dtype("f4")), (BF16, np.dtype("f8"))]


def refused_pairs() -> list[tuple[Any, Any]]:
    allowed = set(widening_pairs())
    pairs: list[tuple[Any, Any]] = [
        (a, b) for a in ALL for b in ALL if a != b and (a, b) not in allowed
    ]
    return pairs + [
        (np.dtype("f4"), np.dtype("c8")),
        (np.dtype("c8"), np.dtype("c16")),
        (np.dtype("f4"), np.dtype("f16") if hasattr(np, "float128") else np.dtype("c16")),
        (np.dtype("i4"), np.dtype(object)),
        (np.dtype("U3"), np.dtype("U5")),
        (np.dtype("i2,i2"), np.dtype("i4,i4")),
        (np.dtype("m8[s]"), np.dtype("i8")),
    ]


def random_bits(dtype: np.dtype[Any], shape: tuple[int, ...], rng: np.random.Generator) -> Array:
    """Every byte random (NaNs with payloads, infinities, subnormals, bools that are not 0/1),
    with the edge values of the type mixed in."""
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    a = raw.view(dtype).reshape(shape).copy()
    flat = a.reshape(-1)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        edges = np.array([info.min, info.max, 0, -1 if dtype.kind == "i" else 1], dtype=dtype)
    elif dtype.kind == "f" or dtype == BF16:
        edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=dtype)
    else:
        edges = np.array([0, 1], dtype=np.uint8).view(dtype)
    flat[: min(len(flat), len(edges))] = edges[: len(flat)]
    return a


def same_bytes(got: Array, want: Array) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize(("src", "dst"), widening_pairs(), ids=str)
def test_every_widening_cast_equals_astype(src: np.dtype[Any], dst: np.dtype[Any]) -> None:
    rng = np.random.default_rng(src.num * 100 + dst.num)
    data = random_bits(src, (50, 3, 4), rng)
    ids = rng.integers(-50, 50, size=(7, 2))
    with np.errstate(invalid="ignore"):
        want = ndgather.gather(data, ids).astype(dst)
    same_bytes(ndgather.gather(data, ids, dtype=dst), want)
    same_bytes(ndgather.gather_nd(data, ids[..., None], dtype=dst), want)
    out = np.full(want.shape, 7, dtype=dst)
    assert ndgather.gather(data, ids, dtype=dst, out=out) is out
    same_bytes(out, want)
    # Every bit pattern of a 2-byte float, not just random ones.
    if src.itemsize == 2 and src.kind != "i" and src.kind != "u":
        every = np.arange(2**16, dtype=np.uint16).view(src).reshape(-1, 64)
        with np.errstate(invalid="ignore"):
            same_bytes(
                ndgather.gather(every, np.arange(len(every)), dtype=dst),
                every.astype(dst),
            )


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed", "big-endian"])
@pytest.mark.parametrize(("src", "dst"), [("f2", "f4"), ("i1", "f4"), ("u2", "i8"), ("?", "f8")])
def test_any_layout_and_byte_order(layout: str, src: str, dst: str) -> None:
    rng = np.random.default_rng(7)
    base = random_bits(np.dtype(src), (12, 10, 6), rng)
    data = {
        "transposed": base.transpose(2, 0, 1),
        "strided": base[:, ::3, 1::2],
        "reversed": base[::-1, :, ::-1],
        "big-endian": base.astype(np.dtype(src).newbyteorder(">")),
    }[layout]
    ids = rng.integers(0, data.shape[1], size=(5,))
    for axis in (0, 1, 2):
        ids = rng.integers(-data.shape[axis], data.shape[axis], size=(5,))
        with np.errstate(invalid="ignore"):
            want = np.take(data, ids, axis=axis).astype(dst)
        same_bytes(ndgather.gather(data, ids, axis=axis, dtype=dst), want)
    for target in (np.dtype(dst).newbyteorder(">"), np.dtype(dst).newbyteorder("<")):
        with np.errstate(invalid="ignore"):
            want = np.take(data, ids % data.shape[0], axis=0).astype(target)
        same_bytes(ndgather.gather(data, ids % data.shape[0], dtype=target), want)


@pytest.mark.parametrize("mode", ["raise", "zero", "clip"])
def test_modes_batch_dims_and_points(mode: str) -> None:
    rng = np.random.default_rng(3)
    data = random_bits(np.dtype("f2"), (4, 9, 5), rng)
    idx = rng.integers(-12, 12, size=(4, 6, 2))
    if mode == "raise":
        idx = idx % np.array([9, 5])
    with np.errstate(invalid="ignore"):
        want = ndgather.gather_nd(data, idx, batch_dims=1, mode=mode).astype(np.float32)
    same_bytes(ndgather.gather_nd(data, idx, batch_dims=1, mode=mode, dtype=np.float32), want)
    ids = rng.integers(-12, 12, size=(4, 3))
    if mode == "raise":
        ids = ids % 9
    with np.errstate(invalid="ignore"):
        want = ndgather.gather(data, ids, axis=1, batch_dims=1, mode=mode).astype("f8")
    same_bytes(ndgather.gather(data, ids, axis=1, batch_dims=1, mode=mode, dtype="f8"), want)


def test_large_calls_on_threads_and_empty_ones() -> None:
    rng = np.random.default_rng(11)
    data = random_bits(BF16, (20_000, 64), rng)
    ids = rng.integers(0, 20_000, size=50_000)
    with np.errstate(invalid="ignore"):
        want = data[ids].astype(np.float32)
    same_bytes(ndgather.gather(data, ids, dtype=np.float32), want)
    empty = ndgather.gather(data, np.empty(0, dtype=np.int64), dtype=np.float64)
    assert empty.shape == (0, 64) and empty.dtype == np.float64


@pytest.mark.parametrize(("src", "dst"), refused_pairs(), ids=str)
def test_every_other_cast_is_a_type_error_naming_both(src: Any, dst: Any) -> None:
    data = np.zeros((3, 2), dtype=src)
    with pytest.raises(TypeError) as e:
        ndgather.gather(data, np.array([0, 1]), dtype=dst)
    assert str(np.dtype(src)) in str(e.value) and str(np.dtype(dst)) in str(e.value)
    with pytest.raises(TypeError):
        ndgather.gather_nd(data, np.array([[0], [1]]), dtype=dst)


def test_no_dtype_or_the_same_dtype_change_nothing() -> None:
    data = np.arange(12, dtype=np.int16).reshape(6, 2)
    ids = np.array([5, 0])
    for dtype in (None, np.int16, "int16", "<i2" if np.little_endian else ">i2"):
        got = ndgather.gather(data, ids, dtype=dtype)
        assert got.dtype == np.int16
        same_bytes(got, data[ids])


def test_calls_in_turn_with_other_dtypes_and_tables_each_get_their_own() -> None:
    """The last answer for a (data dtype, ``dtype=``) pair is reused on the next call: calls
    alternating tables and targets, by dtype, type, name or a class whose ``dtype`` attribute
    changes between calls, must each convert as asked."""
    rng = np.random.default_rng(5)
    tables = {d: random_bits(d, (9, 3), rng) for d in [np.dtype("f2"), BF16, np.dtype("i1")]}
    ids = np.array([4, 0, -1, 4])

    class Wide:
        dtype = np.dtype("f4")

    targets: list[Any] = [np.float32, np.dtype("f8"), "f4", np.float64, Wide]
    for k in range(40):
        table = list(tables.values())[k % 3]
        target = targets[k % 5]
        if target is Wide:
            Wide.dtype = np.dtype("f8") if k % 2 else np.dtype("f4")
        want_dtype = np.dtype(Wide.dtype if target is Wide else target)
        got = ndgather.gather(table, ids, dtype=target)
        want = table[ids].astype(want_dtype)
        assert got.dtype == want_dtype and got.tobytes() == want.tobytes(), (k, table.dtype)
        assert ndgather.gather(table, ids).dtype == table.dtype
    # The same class twice in a row, its attribute changed in between.
    for wide in ("f4", "f8", "f4"):
        Wide.dtype = np.dtype(wide)
        assert ndgather.gather(tables[BF16], ids, dtype=Wide).dtype == np.dtype(wide)


def test_out_must_be_of_the_dtype_asked_for() -> None:
    data = np.arange(12, dtype=np.float16).reshape(6, 2)
    ids = np.array([5, 0])
    with pytest.raises(TypeError):
        ndgather.gather(data, ids, dtype=np.float32, out=np.empty((2, 2), np.float64))
    with pytest.raises(TypeError):  # without dtype=, a wider out is refused as before
        ndgather.gather(data, ids, out=np.empty((2, 2), np.float32))


def test_errors_are_those_of_the_plain_call_and_out_is_untouched() -> None:
    data = np.arange(12, dtype=np.float16).reshape(6, 2)
    ids = np.array([1, 6])
    with pytest.raises(ndgather.GatherIndexError) as plain:
        ndgather.gather(data, ids)
    out = np.full((2, 2), 9, dtype=np.float32)
    with pytest.raises(ndgather.GatherIndexError) as cast:
        ndgather.gather(data, ids, dtype=np.float32, out=out)
    assert str(cast.value) == str(plain.value)
    assert cast.value.position == plain.value.position
    assert (out == 9).all()
    with pytest.raises(TypeError):
        ndgather.gather(data, ids, dtype="not a dtype")


def test_the_opset_wrappers_keep_their_type_rules() -> None:
    for module in (onnx, openvino, bnns):
        for name, fn in vars(module).items():
            if callable(fn) and not name.startswith("_") and inspect.isfunction(fn):
                if fn.__module__ == module.__name__:
                    assert "dtype" not in inspect.signature(fn).parameters, name
