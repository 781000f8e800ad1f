"""Independent NumPy formulations of GatherND and Gather, and the specs' printed examples.

Nothing here imports ``ndgather``: these are the oracles the tests compare it with.

Two formulations of each operator are given, written differently on purpose, and the suite
checks them against each other (``test_reference_*`` in ``test_gather_nd.py`` / ``test_gather.py``):

* ``gather_nd_loop``: one Python loop over index tuples, plain basic indexing of ``data``;
* ``gather_nd_fancy``: one vectorised advanced-indexing expression over the flattened batch;
* ``gather_take``: ``np.take`` per batch position (``np.take`` on the whole array when
  ``batch_dims == 0``);
* ``gather_take_along``: ``np.take_along_axis`` after broadcasting ``indices`` into ``data``'s
  layout.

Modes follow the contract (``api.md`` section 1): ``"raise"`` raises ``IndexError`` for an index
outside ``[-s, s)``, ``"zero"`` fills the addressed slice with zero bytes (``None`` for
``object``), ``"clip"`` wraps negatives first and then clamps into ``[0, s - 1]``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

MODES = ("raise", "zero", "clip")


# --------------------------------------------------------------------------- helpers


def zero_value(dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A 0-d array holding the all-zero-bytes element of ``dtype`` (``None`` for object)."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        if dtype.kind == "O":
            z = np.empty((), dtype=dtype)
            z[()] = None
            return z
        raise NotImplementedError("zero bytes of a structured dtype holding objects")
    if dtype.itemsize == 0:
        return np.empty((), dtype=dtype)
    return np.frombuffer(bytes(dtype.itemsize), dtype=dtype).reshape(())


def _empty(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    out = np.empty(shape, dtype=dtype)
    if dtype.kind == "O":
        out[...] = None
    return out


def _norm_scalar(v: int, s: int, mode: str) -> int | None:
    """Normalise one index value ``v`` on an axis of size ``s``.

    Returns the non-negative index, ``None`` for "zero slice", or raises ``IndexError``.
    """
    if -s <= v < s:
        return v + s if v < 0 else v
    if mode == "raise":
        raise IndexError(f"index {v} is out of bounds for axis with size {s}")
    if mode == "zero":
        return None
    if mode == "clip":
        if s == 0:
            raise IndexError(f"cannot clip index {v} into an axis of size 0")
        if v < 0:
            v += s
        return min(max(v, 0), s - 1)
    raise ValueError(f"bad mode {mode!r}")


def _norm_array(idx: np.ndarray[Any, Any], s: int, mode: str) -> tuple[Any, Any]:
    """Vectorised ``_norm_scalar``: returns (normalised int64 indices, out-of-range mask).

    Works on exact Python-int semantics for every integer dtype (uint64 values above 2**63
    are out of range, never wrapped).
    """
    idx = np.asarray(idx)
    if idx.dtype.kind == "u":
        big = idx >= np.uint64(s) if idx.size else np.zeros(idx.shape, bool)
        neg = np.zeros(idx.shape, dtype=bool)
        small = np.where(big, 0, idx).astype(np.int64)
    else:
        v = idx.astype(np.int64)
        big = v >= s
        neg = v < -s
        small = np.where(big | neg, 0, v)
        small = np.where(small < 0, small + s, small)
    bad = big | neg
    if mode == "raise":
        if bad.any():
            first = int(np.flatnonzero(bad.ravel())[0])
            raise IndexError(f"index {idx.ravel()[first]} is out of bounds for size {s}")
        return small, bad
    if mode == "zero":
        return small, bad
    if mode == "clip":
        if s == 0 and idx.size:
            raise IndexError("cannot clip into an axis of size 0")
        clipped = np.where(big, s - 1, small)
        if idx.dtype.kind != "u":
            # negatives below -s: wrap (add s) then clamp to 0
            clipped = np.where(neg, 0, clipped)
        return clipped, np.zeros(idx.shape, dtype=bool)
    raise ValueError(f"bad mode {mode!r}")


# --------------------------------------------------------------------------- GatherND


def _check_nd(data: np.ndarray[Any, Any], indices: np.ndarray[Any, Any], b: int) -> int:
    if indices.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got {indices.dtype}")
    r, q = data.ndim, indices.ndim
    if r < 1 or q < 1:
        raise ValueError("data and indices must have rank >= 1")
    if not 0 <= b < min(q, r):
        raise ValueError(f"batch_dims {b} must be in [0, min(q, r)) = [0, {min(q, r)})")
    k = indices.shape[-1]
    if not 1 <= k <= r - b:
        raise ValueError(f"indices.shape[-1] = {k} must be in [1, {r - b}]")
    if indices.shape[:b] != data.shape[:b]:
        raise ValueError("batch dimensions differ")
    return k


def gather_nd_loop(data: Any, indices: Any, batch_dims: int = 0, mode: str = "raise") -> Any:
    """GatherND by a Python loop over index tuples (C order)."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    b = int(batch_dims)
    k = _check_nd(data, indices, b)
    if mode not in MODES:
        raise ValueError(f"bad mode {mode!r}")
    out_shape = indices.shape[:-1] + data.shape[b + k :]
    out = _empty(out_shape, data.dtype)
    zero = zero_value(data.dtype)
    for pos in np.ndindex(*indices.shape[:-1]):
        batch = pos[:b]
        tup = []
        is_zero = False
        for j in range(k):
            v = int(indices[pos + (j,)])
            n = _norm_scalar(v, data.shape[b + j], mode)
            if n is None:
                is_zero = True
                n = 0
            tup.append(n)
        if is_zero:
            out[pos] = zero
        else:
            out[pos] = data[batch + tuple(tup)]
    return out


def gather_nd_fancy(data: Any, indices: Any, batch_dims: int = 0, mode: str = "raise") -> Any:
    """GatherND by one advanced-indexing expression over the flattened batch."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    b = int(batch_dims)
    k = _check_nd(data, indices, b)
    if mode not in MODES:
        raise ValueError(f"bad mode {mode!r}")
    batch_shape = data.shape[:b]
    nb = math.prod(batch_shape)
    out_shape = indices.shape[:-1] + data.shape[b + k :]
    mid = indices.shape[b:-1]
    n = math.prod(mid)
    idx = indices.reshape((nb, n, k))
    d = data.reshape((nb,) + data.shape[b:])
    cols = []
    bad = np.zeros((nb, n), dtype=bool)
    # Validate every component in C order of the whole indices array first.
    if mode == "raise":
        flat = np.stack(
            [_norm_array(idx[..., j], data.shape[b + j], "zero")[1] for j in range(k)], axis=-1
        )
        if flat.any():
            first = int(np.flatnonzero(flat.ravel())[0])
            raise IndexError(f"index {idx.ravel()[first]} is out of bounds")
    for j in range(k):
        c, m = _norm_array(idx[..., j], data.shape[b + j], mode)
        cols.append(c)
        bad |= m
    if data.shape[b + k - 1] == 0 or any(data.shape[b + j] == 0 for j in range(k)):
        # Every tuple is out of range (or there are none): avoid indexing an empty axis.
        res = _empty((nb, n) + data.shape[b + k :], data.dtype)
        if res.size:
            res[...] = zero_value(data.dtype)
        return res.reshape(out_shape)
    bidx = np.arange(nb).reshape(nb, 1)
    res = d[(bidx, *cols)]  # shape (nb, n) + data.shape[b+k:]
    res = np.array(res, copy=True, order="C")
    if bad.any():
        res[bad] = zero_value(data.dtype)
    return res.reshape(out_shape)


# --------------------------------------------------------------------------- Gather


def _check_g(
    data: np.ndarray[Any, Any], indices: np.ndarray[Any, Any], axis: int, batch_dims: int
) -> tuple[int, int]:
    if indices.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got {indices.dtype}")
    r, q = data.ndim, indices.ndim
    a = int(axis)
    b = int(batch_dims)
    if a < 0:
        a += r
    if b < 0:
        b += q
    if not 0 <= a < r:
        raise ValueError(f"axis {axis} out of range for rank {r}")
    if not 0 <= b <= q or b > a:
        raise ValueError(f"batch_dims {batch_dims} invalid")
    if indices.shape[:b] != data.shape[:b]:
        raise ValueError("batch dimensions differ")
    return a, b


def gather_take(
    data: Any, indices: Any, axis: int = 0, batch_dims: int = 0, mode: str = "raise"
) -> Any:
    """Gather with np.take (per batch position when batch_dims > 0)."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    a, b = _check_g(data, indices, axis, batch_dims)
    if mode not in MODES:
        raise ValueError(f"bad mode {mode!r}")
    s = data.shape[a]
    norm, bad = _norm_array(indices, s, mode)
    out_shape = data.shape[:a] + indices.shape[b:] + data.shape[a + 1 :]
    out = _empty(out_shape, data.dtype)
    if out.size == 0:
        return out
    if s == 0:
        out[...] = zero_value(data.dtype)
        return out
    zero = zero_value(data.dtype)
    lead = a - b
    for bpos in np.ndindex(*data.shape[:b]):
        sub = data[bpos]  # shape data.shape[b:]
        ii = np.asarray(norm[bpos]).reshape(-1)  # indices.shape[b:], flattened
        mm = np.asarray(bad[bpos]).reshape(-1)
        taken = np.take(sub, ii, axis=lead)
        # taken shape: data.shape[b:a] + (n,) + data.shape[a+1:]
        if mm.any():
            taken[(slice(None),) * lead + (mm,)] = zero
        out[bpos] = taken.reshape(data.shape[b:a] + indices.shape[b:] + data.shape[a + 1 :])
    return out


def gather_take_along(
    data: Any, indices: Any, axis: int = 0, batch_dims: int = 0, mode: str = "raise"
) -> Any:
    """Gather with np.take_along_axis, broadcasting indices into data's layout."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    a, b = _check_g(data, indices, axis, batch_dims)
    if mode not in MODES:
        raise ValueError(f"bad mode {mode!r}")
    s = data.shape[a]
    norm, bad = _norm_array(indices, s, mode)
    mid = indices.shape[b:]
    m = len(mid)
    out_shape = data.shape[:a] + mid + data.shape[a + 1 :]
    if math.prod(out_shape) == 0:
        return _empty(out_shape, data.dtype)
    if s == 0:
        res = _empty(out_shape, data.dtype)
        res[...] = zero_value(data.dtype)
        return res
    # data viewed as data.shape[:a] + (1,)*m with axis a of size s, + data.shape[a+1:]
    # we put the gathered axis last-of-mid: expand data with m-1 singleton axes.
    dexp = data.reshape(data.shape[:a] + (1,) * max(m - 1, 0) + (s,) + data.shape[a + 1 :])
    if m == 0:
        iexp = norm.reshape(norm.shape[:b] + (1,) * (a - b) + (1,) + (1,) * (data.ndim - a - 1))
        mexp = bad.reshape(iexp.shape)
    else:
        iexp = norm.reshape(norm.shape[:b] + (1,) * (a - b) + mid + (1,) * (data.ndim - a - 1))
        mexp = bad.reshape(iexp.shape)
    full = data.shape[:a] + (mid if m else (1,)) + data.shape[a + 1 :]
    iexp = np.broadcast_to(iexp, full)
    mexp = np.broadcast_to(mexp, full)
    dfull = np.broadcast_to(
        dexp, data.shape[:a] + (mid[:-1] if m else ()) + (s,) + data.shape[a + 1 :]
    )
    gathered_axis = a + max(m - 1, 0)
    res = np.take_along_axis(dfull, iexp, axis=gathered_axis)
    res = np.array(res, copy=True, order="C")
    if mexp.any():
        res[mexp] = zero_value(data.dtype)
    return res.reshape(out_shape)


# --------------------------------------------------------------------------- comparison


def assert_same(got: Any, expected: Any) -> None:
    """Same type (ndarray), shape, dtype (byte order included) and bytes.

    Object arrays are compared element by element with ``is`` (a gather copies references).
    """
    assert type(got) is np.ndarray, f"result is {type(got)!r}, not numpy.ndarray"
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape} != expected {expected.shape}"
    assert got.dtype == expected.dtype, f"dtype {got.dtype!r} != expected {expected.dtype!r}"
    assert got.dtype.str == expected.dtype.str, f"dtype {got.dtype.str} != {expected.dtype.str}"
    if got.dtype.hasobject:
        g = got.ravel()
        e = expected.ravel()
        if got.dtype.kind == "O":
            for i in range(g.size):
                assert g[i] is e[i], f"element {i}: {g[i]!r} is not {e[i]!r}"
        else:
            for i in range(g.size):
                for name in got.dtype.names or ():
                    gv, ev = g[i][name], e[i][name]
                    if got.dtype.fields[name][0].kind == "O":
                        assert gv is ev, f"element {i}.{name}: {gv!r} is not {ev!r}"
                    else:
                        assert np.asarray(gv).tobytes() == np.asarray(ev).tobytes()
        return
    if got.dtype.names is not None:
        # NumPy's copies of records skip the gaps between fields: compare field by field
        # (test_dtypes checks separately that ndgather copies whole records).
        for name in got.dtype.names:
            assert_same(np.ascontiguousarray(got[name]), np.ascontiguousarray(expected[name]))
        return
    gb = np.ascontiguousarray(got).tobytes()
    eb = np.ascontiguousarray(expected).tobytes()
    if _is_padded_longdouble(got.dtype) and got.size:
        # NumPy copies x87 long doubles through the FPU: only the 10 value bytes of each
        # (real or imaginary) part are defined in its results, the padding is not.
        part = 16 if got.dtype.itemsize in (16, 32) else 12
        m = np.zeros(part, dtype=bool)
        m[:10] = True
        mask = np.tile(m, len(gb) // part)
        gb = np.frombuffer(gb, np.uint8)[mask].tobytes()
        eb = np.frombuffer(eb, np.uint8)[mask].tobytes()
    if gb != eb:
        raise AssertionError(f"bytes differ:\n got      {got!r}\n expected {expected!r}")


def _is_padded_longdouble(dtype: np.dtype[Any]) -> bool:
    base = dtype.base if dtype.subdtype else dtype
    if base.kind not in "fc" or base.names:
        return False
    ld = np.dtype(np.longdouble)
    real = base if base.kind == "f" else np.dtype(f"{base.byteorder}f{base.itemsize // 2}")
    return real.itemsize == ld.itemsize and real.itemsize > 8 and np.finfo(ld).nmant == 63


def assert_result_array(res: Any, *inputs: Any) -> None:
    """A new, writable, C-contiguous ndarray, sharing no memory with any input."""
    assert type(res) is np.ndarray, f"result is {type(res)!r}"
    assert res.flags.c_contiguous, "result is not C-contiguous"
    assert res.flags.writeable, "result is not writable"
    for x in inputs:
        if isinstance(x, np.ndarray):
            assert not np.shares_memory(res, x), "result shares memory with an input"


# --------------------------------------------------------------------------- spec examples
# Literal transcriptions of the examples printed in the operators' specifications (ONNX
# GatherND-11/12/13, OpenVINO Gather-7, GatherND-8, Apple BNNSGatherND).
# Each entry: (name, data, indices, batch_dims, expected output, expected shape).

ONNX_GATHERND_EXAMPLES = [
    ("onnx-1", [[0, 1], [2, 3]], [[0, 0], [1, 1]], 0, [0, 3], (2,)),
    ("onnx-2", [[0, 1], [2, 3]], [[1], [0]], 0, [[2, 3], [0, 1]], (2, 2)),
    (
        "onnx-3",
        [[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
        [[0, 1], [1, 0]],
        0,
        [[2, 3], [4, 5]],
        (2, 2),
    ),
    (
        "onnx-4",
        [[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
        [[[0, 1]], [[1, 0]]],
        0,
        [[[2, 3]], [[4, 5]]],
        (2, 1, 2),
    ),
    (
        "onnx-5",
        [[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
        [[1], [0]],
        1,
        [[2, 3], [4, 5]],
        (2, 2),
    ),
]

_OV5_DATA = [
    [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],
    [[13, 14, 15, 16], [17, 18, 19, 20], [21, 22, 23, 24]],
]

OPENVINO_GATHERND8_EXAMPLES = [
    ("ov-nd-1", [[1, 2], [3, 4]], [[0, 0], [1, 0]], 0, [1, 3], (2,)),
    ("ov-nd-2", [[1, 2], [3, 4]], [[1], [0]], 0, [[3, 4], [1, 2]], (2, 2)),
    ("ov-nd-3", [[1, 2], [3, 4]], [[[1]], [[0]]], 0, [[[3, 4]], [[1, 2]]], (2, 1, 2)),
    ("ov-nd-4", [[1, 2], [3, 4]], [[1], [0]], 1, [2, 3], (2,)),
    ("ov-nd-5", _OV5_DATA, [[1], [0]], 1, [[5, 6, 7, 8], [13, 14, 15, 16]], (2, 4)),
    (
        "ov-nd-6",
        _OV5_DATA,
        [[[[1]], [[0]], [[2]]], [[[0]], [[2]], [[2]]]],
        2,
        [[[2], [5], [11]], [[13], [19], [23]]],
        (2, 3, 1),
    ),
    (
        "ov-nd-7",
        [[[[1, 2, 3, 4], [5, 6, 7, 8]], [[9, 10, 11, 12], [13, 14, 15, 16]]]],
        [[[[1], [0]], [[3], [2]]]],
        3,
        [[[2, 5], [12, 15]]],
        (1, 2, 2),
    ),
]

# The three XML shape examples of OpenVINO GatherND-8: (data shape, indices shape,
# batch_dims, output shape).
OPENVINO_GATHERND8_XML = [
    ((1000, 256, 10, 15), (25, 125, 3), 0, (25, 125, 15)),
    ((30, 2, 100, 35), (30, 2, 3, 1), 2, (30, 2, 3, 35)),
    ((1, 64, 64, 320), (1, 64, 64, 1, 1), 3, (1, 64, 64, 1)),
]

# OpenVINO Gather-7: (name, data, indices, axis, batch_dims, expected, expected shape).
_G4_DATA = [
    [[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16], [17, 18, 19, 20]]],
    [[[21, 22, 23, 24], [25, 26, 27, 28], [29, 30, 31, 32], [33, 34, 35, 36], [37, 38, 39, 40]]],
]

OPENVINO_GATHER7_EXAMPLES = [
    ("ov-g-1", [1, 2, 3, 4, 5], [0, 0, 4], 0, 0, [1, 1, 5], (3,)),
    (
        "ov-g-2",
        [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]],
        [[0, 0, 4], [4, 0, 0]],
        1,
        1,
        [[1, 1, 5], [10, 6, 6]],
        (2, 3),
    ),
    (
        "ov-g-3",
        [[[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], [[11, 12, 13, 14, 15], [16, 17, 18, 19, 20]]],
        [[[0, 0, 4], [4, 0, 0]], [[1, 2, 4], [4, 3, 2]]],
        2,
        2,
        [[[1, 1, 5], [10, 6, 6]], [[12, 13, 15], [20, 19, 18]]],
        (2, 2, 3),
    ),
    (
        "ov-g-4",
        _G4_DATA,
        [[1, 2, 4], [4, 3, 2]],
        2,
        1,
        [
            [[[5, 6, 7, 8], [9, 10, 11, 12], [17, 18, 19, 20]]],
            [[[37, 38, 39, 40], [33, 34, 35, 36], [29, 30, 31, 32]]],
        ],
        (2, 1, 3, 4),
    ),
    (
        "ov-g-5",
        [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]],
        [[0, 0, 4], [4, 0, 0]],
        1,
        -1,
        [[1, 1, 5], [10, 6, 6]],
        (2, 3),
    ),
]

# The XML example of OpenVINO Gather-7: data (2, 64, 128), indices (2, 32, 21), axis 1,
# batch_dims 1 -> output (2, 32, 21, 128).
OPENVINO_GATHER7_XML = ((2, 64, 128), (2, 32, 21), 1, 1, (2, 32, 21, 128))
