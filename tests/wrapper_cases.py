"""Shared material for the opset-wrapper tests: dtypes, seeded random cases, comparisons.

Nothing here imports ``ndgather`` or a runtime. Random cases are drawn from
``numpy.random.default_rng(seed)`` with fixed seeds, so every run sees the same inputs.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is a test extra
    ml_dtypes = None

# --------------------------------------------------------------------------- dtypes

#: ONNX IR-3 tensor types as NumPy dtypes (no string, no bfloat16).
ONNX_NUMERIC = [
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
]

#: OpenVINO element types that have a NumPy dtype (besides strings).
OV_NUMERIC = [
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
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
]

#: Every integer dtype NumPy has (OpenVINO and BNNS accept all of them as indices).
INTEGER_INDEX_DTYPES = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]

EIGHT_BYTE = ("int64", "uint64", "float64")


def dtype_of(name: str) -> np.dtype[Any]:
    """A dtype by name: NumPy's, ``ml_dtypes``' (bfloat16, float8_*), or ``"string"``."""
    if name == "string":
        return np.dtype(object)
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        if ml_dtypes is None:  # pragma: no cover
            import pytest

            pytest.skip("ml_dtypes is not installed")
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def seed_of(*parts: object) -> int:
    """A fixed seed for a test's parameters (``hash()`` of a str changes between runs)."""
    return zlib.crc32(repr(parts).encode())


# --------------------------------------------------------------------------- data

_ALPHABET = list("abcxyz019 _-éßЖ中😀")


def random_strings(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """An object array of distinct-ish ``str`` of lengths 0..6 (empty and non-ASCII included)."""
    n = math.prod(shape)
    out = np.empty(n, dtype=object)
    for i in range(n):
        length = int(rng.integers(0, 7))
        out[i] = "".join(_ALPHABET[int(j)] for j in rng.integers(0, len(_ALPHABET), size=length))
    return out.reshape(shape)


def random_data(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, *, finite: bool = True
) -> np.ndarray[Any, Any]:
    """Random values covering the dtype's whole bit range.

    Integers use every bit; floating types use random bit patterns, with NaN and infinity
    replaced by 1.0 when ``finite`` (so a runtime that quiets NaNs is tested separately).
    """
    dt = np.dtype(dtype)
    n = math.prod(shape)
    if dt.kind == "O":
        return random_strings(rng, shape)
    if dt.kind in "US":
        return random_strings(rng, shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "c":
        part = np.dtype(f"f{dt.itemsize // 2}")
        re_ = random_data(rng, shape + (2,), part, finite=finite)
        return np.ascontiguousarray(re_).view(dt).reshape(shape)
    raw = rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    arr = raw.view(dt).reshape(shape).copy()
    if dt.kind in "iu":
        return arr
    if finite and n:
        with np.errstate(invalid="ignore", over="ignore"):
            as64 = arr.astype(np.float64)
        bad = ~np.isfinite(as64)
        if bad.any():
            arr[bad] = np.array(1.0).astype(dt)
    return arr


# --------------------------------------------------------------------------- random cases


@dataclass
class Case:
    """One call: ``data``, ``indices`` and the attributes (``axis`` only for Gather)."""

    data: np.ndarray[Any, Any]
    indices: np.ndarray[Any, Any]
    batch_dims: int = 0
    axis: int | None = None
    note: str = ""
    kw: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        a = "" if self.axis is None else f", axis={self.axis}"
        return (
            f"Case(data {self.data.dtype} {self.data.shape}, indices {self.indices.dtype} "
            f"{self.indices.shape}{a}, batch_dims={self.batch_dims}, {self.note}; "
            f"indices={self.indices.tolist()!r})"
        )


def _dims(rng: np.random.Generator, n: int, lo: int = 1, hi: int = 4) -> tuple[int, ...]:
    return tuple(int(x) for x in rng.integers(lo, hi + 1, size=n))


def _index_values(
    rng: np.random.Generator, shape: tuple[int, ...], s: int, negative: bool
) -> np.ndarray[Any, Any]:
    lo = -s if negative else 0
    if s == 0:
        assert math.prod(shape) == 0, "no valid index on an empty axis"
        return np.zeros(shape, dtype=np.int64)
    return rng.integers(lo, s, size=shape)


def random_gather_nd_case(
    rng: np.random.Generator,
    data_dtype: Any,
    index_dtype: Any,
    *,
    batch_dims: int = 0,
    negative: bool = True,
    zero_size: bool = False,
    finite: bool = True,
) -> Case:
    """A valid GatherND call with ``batch_dims`` batch dimensions.

    With ``zero_size``, one dimension is 0: a batch dimension, a dimension of the index
    tuples' grid, a sliced trailing data dimension, or an indexed data dimension (then the
    grid is empty too, as no index is valid on an empty axis).
    """
    b = batch_dims
    r = b + int(rng.integers(1, 4))
    dshape = list(_dims(rng, r))
    k = int(rng.integers(1, r - b + 1))
    mid = list(_dims(rng, int(rng.integers(0, 3)), 1, 3))
    note = ""
    if zero_size:
        where = ["grid"] + (["batch"] if b else []) + (["slice"] if b + k < r else [])
        where.append("indexed")
        choice = where[int(rng.integers(0, len(where)))]
        note = f"zero-size {choice}"
        if choice == "batch":
            dshape[int(rng.integers(0, b))] = 0
        elif choice == "slice":
            dshape[int(rng.integers(b + k, r))] = 0
        elif choice == "indexed":
            dshape[b + int(rng.integers(0, k))] = 0
            mid = mid + [0] if not mid else [0] + mid[1:]
        else:
            mid = mid + [0] if not mid else mid[:-1] + [0]
    ishape = tuple(dshape[:b]) + tuple(mid)
    cols = [_index_values(rng, ishape, dshape[b + j], negative) for j in range(k)]
    indices = np.stack(cols, axis=-1) if cols else np.zeros(ishape + (0,), np.int64)
    indices = indices.reshape(ishape + (k,)).astype(index_dtype)
    data = random_data(rng, tuple(dshape), data_dtype, finite=finite)
    return Case(data, indices, b, None, note)


def random_gather_case(
    rng: np.random.Generator,
    data_dtype: Any,
    index_dtype: Any,
    *,
    batch_dims: int = 0,
    negative: bool = True,
    zero_size: bool = False,
    negative_attrs: bool = True,
    finite: bool = True,
) -> Case:
    """A valid Gather call (TensorFlow/OpenVINO semantics with ``batch_dims``).

    ``axis`` (and ``batch_dims`` when ``negative_attrs``) may come out negative, as the
    specs allow. Indices may be 0-d when ``batch_dims == 0``.
    """
    b = batch_dims
    r = b + int(rng.integers(1, 4))
    dshape = list(_dims(rng, r))
    axis = int(rng.integers(b, r))
    nmid = int(rng.integers(0 if b == 0 else 0, 3))
    mid = list(_dims(rng, nmid, 1, 3))
    note = ""
    if zero_size:
        where = ["indices"] + (["batch"] if b else []) + ["other"] * (r - 1 > b)
        where.append("axis")
        choice = where[int(rng.integers(0, len(where)))]
        note = f"zero-size {choice}"
        if choice == "batch":
            dshape[int(rng.integers(0, b))] = 0
        elif choice == "other":
            others = [d for d in range(b, r) if d != axis]
            dshape[others[int(rng.integers(0, len(others)))]] = 0
        else:
            if choice == "axis":
                dshape[axis] = 0
            mid = mid + [0] if not mid else mid[:-1] + [0]
    ishape = tuple(dshape[:b]) + tuple(mid)
    indices = _index_values(rng, ishape, dshape[axis], negative).astype(index_dtype)
    data = random_data(rng, tuple(dshape), data_dtype, finite=finite)
    q = indices.ndim
    ax = axis - r if negative_attrs and rng.integers(0, 2) else axis
    bd = b - q if negative_attrs and b and rng.integers(0, 2) else b
    return Case(data, indices, bd, ax, note)


# --------------------------------------------------------------------------- oracle


def take(data: Any, indices: Any, axis: int = 0, batch_dims: int = 0) -> np.ndarray[Any, Any]:
    """Gather by ``np.take`` per batch position: negatives wrap, any dtype, 0-d indices,
    a new C-contiguous array (object elements are the very same objects).

    ``axis`` and ``batch_dims`` may be negative (OpenVINO Gather-7/8 normalisation).
    """
    data = np.asarray(data)
    indices = np.asarray(indices)
    a = axis + data.ndim if axis < 0 else axis
    b = batch_dims + indices.ndim if batch_dims < 0 else batch_dims
    shape = data.shape[:a] + indices.shape[b:] + data.shape[a + 1 :]
    out = np.empty(shape, dtype=data.dtype)
    if out.size == 0:
        return out
    for pos in np.ndindex(*data.shape[:b]):
        np.take(data[pos], indices[pos].astype(np.intp), axis=a - b, out=out[pos + (...,)])
    return out


# --------------------------------------------------------------------------- comparison


def assert_same_values(got: Any, expected: Any, context: object = "") -> None:
    """Same ndarray type, shape, dtype and bytes; ``object`` arrays: equal ``str`` elements.

    (A runtime's strings are new objects, so identity as in ``reference.assert_same`` does
    not apply; equality and type do.)
    """
    assert type(got) is np.ndarray, f"{context}: result is {type(got)!r}"
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"{context}: shape {got.shape} != {expected.shape}"
    if got.dtype.kind == "O" or expected.dtype.kind == "O":
        assert got.dtype == expected.dtype, f"{context}: dtype {got.dtype} != {expected.dtype}"
        g, e = got.ravel().tolist(), expected.ravel().tolist()
        for n, (x, y) in enumerate(zip(g, e, strict=True)):
            assert type(x) is type(y) and x == y, f"{context}: element {n}: {x!r} != {y!r}"
        return
    assert got.dtype == expected.dtype, f"{context}: dtype {got.dtype!r} != {expected.dtype!r}"
    assert got.dtype.str == expected.dtype.str, (
        f"{context}: {got.dtype.str} != {expected.dtype.str}"
    )
    gb = np.ascontiguousarray(got).tobytes()
    eb = np.ascontiguousarray(expected).tobytes()
    if gb != eb:
        raise AssertionError(f"{context}: bytes differ\n got      {got!r}\n expected {expected!r}")


def names_operator(message: str, op: str, version: int | str, domain: str = "") -> bool:
    """Does an error message name the operator and its version (``GatherND-13``,
    ``GatherND 13``, ``GatherND version 13``, ``GatherND (opset 13)``, ``GatherNDv13``)?"""
    sep = r"\W{0,3}(?:v|version|opset|since)?\W{0,3}"
    pat = rf"(?<![A-Za-z]){re.escape(op)}(?![A-Za-z]){sep}{version}(?!\d)"
    ok = re.search(pat, message) is not None
    if domain:
        ok = ok and domain in message
    return ok
