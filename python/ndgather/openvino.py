"""OpenVINO operators, one function per published version, bit-identical to
the ``openvino`` CPU runtime wherever it follows the specification."""

from __future__ import annotations

import math

import numpy.typing as npt

from ndgather import _opset
from ndgather._opset import Array

__all__ = ["gather_1", "gather_7", "gather_8", "gather_nd_5", "gather_nd_8"]

#: OpenVINO element types with a NumPy dtype: no complex; bf16 and the two
#: float8 types (ml_dtypes); strings.
_FLOAT8 = frozenset({"float8_e4m3fn", "float8_e5m2"})


def _data(op: str, data: npt.ArrayLike) -> Array:
    return _opset.check_data(op, data, bfloat16=True, complex_=False, extra=_FLOAT8)


def gather_nd_5(data: npt.ArrayLike, indices: npt.ArrayLike, batch_dims: int = 0) -> Array:
    """GatherND-5: the batch dimensions are flattened into one: the result has
    shape ``(prod(indices.shape[:b]),) + indices.shape[b:-1] + data.shape[b+k:]``
    when ``b >= 1``. Negative indices count from the end, as the runtime does.

    >>> indices = np.array([[[[1]], [[0]], [[2]]], [[[0]], [[2]], [[2]]]])  # (2, 3, 1, 1)
    >>> gather_nd_5(np.arange(1, 25).reshape(2, 3, 4), indices, batch_dims=2)
    array([[ 2],
           [ 5],
           [11],
           [13],
           [19],
           [23]])
    """
    op = "GatherND-5"
    d, i = _data(op, data), _opset.check_indices(op, indices, "integer")
    b = _opset.check_attribute(op, "batch_dims", batch_dims, 0, max(min(d.ndim, i.ndim) - 1, 0))
    result = _opset.gather_nd(op, d, i, b)
    if b == 0:
        return result
    return result.reshape((math.prod(i.shape[:b]),) + result.shape[b:])


def gather_nd_8(data: npt.ArrayLike, indices: npt.ArrayLike, batch_dims: int = 0) -> Array:
    """GatherND-8: batch dimensions kept; negative indices count from the end.

    >>> gather_nd_8(np.array([[1, 2], [3, 4]]), np.array([[1], [0]]), batch_dims=1)
    array([2, 3])
    """
    op = "GatherND-8"
    d, i = _data(op, data), _opset.check_indices(op, indices, "integer")
    b = _opset.check_attribute(op, "batch_dims", batch_dims, 0, max(min(d.ndim, i.ndim) - 1, 0))
    return _opset.gather_nd(op, d, i, b)


def _gather(
    op: str,
    data: npt.ArrayLike,
    indices: npt.ArrayLike,
    axis: int,
    batch_dims: int,
    *,
    negative_and_out_of_range: str,
) -> Array:
    d, i = _data(op, data), _opset.check_indices(op, indices, "integer")
    r, q = d.ndim, i.ndim
    a = _opset.check_attribute(op, "axis", axis, -r, r - 1)
    b = _opset.check_attribute(op, "batch_dims", batch_dims, -min(r, q), min(r, q))
    if negative_and_out_of_range == "zero":
        result = _opset.gather(op, d, i, a, b, mode="zero", wrap_negative=True)
        if result.dtype == object:
            # OpenVINO's zero of a string is the empty string, not None.
            result[result == None] = ""  # noqa: E711 (elementwise)
        return result
    return _opset.gather(op, d, i, a, b, wrap_negative=False)


def gather_1(data: npt.ArrayLike, indices: npt.ArrayLike, axis: int) -> Array:
    """Gather-1: indices in ``[0, s-1]``; a negative or out-of-range index is
    an ``IndexError``.

    >>> gather_1(np.array([1, 2, 3, 4, 5]), np.array([0, 0, 4]), 0)
    array([1, 1, 5])
    """
    return _gather("Gather-1", data, indices, axis, 0, negative_and_out_of_range="raise")


def gather_7(data: npt.ArrayLike, indices: npt.ArrayLike, axis: int, batch_dims: int = 0) -> Array:
    """Gather-7: adds ``batch_dims``; negative ``axis``/``batch_dims`` are
    normalized; indices in ``[0, s-1]`` as for Gather-1.

    >>> data = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    >>> gather_7(data, np.array([[0, 0, 4], [4, 0, 0]]), 1, batch_dims=-1)
    array([[ 1,  1,  5],
           [10,  6,  6]])
    """
    return _gather("Gather-7", data, indices, axis, batch_dims, negative_and_out_of_range="raise")


def gather_8(data: npt.ArrayLike, indices: npt.ArrayLike, axis: int, batch_dims: int = 0) -> Array:
    """Gather-8: negative indices count from the end; an index outside
    ``[-s, s)`` gives zeros for its slice, as the specification defines.

    >>> gather_8(np.array([1, 2, 3, 4, 5]), np.array([0, -1, 7]), 0)
    array([1, 5, 0])
    """
    return _gather("Gather-8", data, indices, axis, batch_dims, negative_and_out_of_range="zero")
