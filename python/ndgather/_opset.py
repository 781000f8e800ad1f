"""What the opset wrappers share: dtype sets, checks that name the operator,
and calls into the kernels that prefix every error with the operator.

Each wrapper is one published operator version. It checks that version's
type constraints and attribute rules here, then calls the generic kernel with
the version's index rules (negative indices wrap or not; out-of-range indices
raise or give zeros). No wrapper holds a loop.
"""

from __future__ import annotations

import operator
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ndgather import _core
from ndgather._errors import GatherIndexError

Array = np.ndarray[Any, Any]

#: ONNX's tensor types of IR version 3 (GatherND-11/12, Gather-1/11), as NumPy
#: kinds and itemsizes; strings are `object`, `U` or `S` arrays.
ONNX_NUMERIC = frozenset(
    {("b", 1)}
    | {("i", n) for n in (1, 2, 4, 8)}
    | {("u", n) for n in (1, 2, 4, 8)}
    | {("f", n) for n in (2, 4, 8)}
    | {("c", n) for n in (8, 16)}
)
STRING_KINDS = frozenset({"O", "U", "S"})


def is_bfloat16(dtype: np.dtype[Any]) -> bool:
    return dtype.name == "bfloat16"


def check_data(
    op: str,
    data: npt.ArrayLike,
    *,
    bfloat16: bool,
    complex_: bool = True,
    strings: bool = True,
    extra: frozenset[str] = frozenset(),
) -> Array:
    """`data` as an array whose dtype is one of the operator's types."""
    array = np.asarray(data)
    dtype = array.dtype
    kind, size = dtype.kind, dtype.itemsize
    allowed = (
        ((kind, size) in ONNX_NUMERIC and (complex_ or kind != "c"))
        or (strings and kind in STRING_KINDS and dtype.fields is None)
        or (bfloat16 and is_bfloat16(dtype))
        or dtype.name in extra
    )
    if not allowed:
        raise TypeError(f"{op}: data of dtype {dtype} is not among the operator's types")
    return array


IndexTypes = Literal["int64", "int32/int64", "integer"]


def check_indices(op: str, indices: npt.ArrayLike, allowed: IndexTypes) -> Array:
    """`indices` as an array whose dtype the operator accepts."""
    array = np.asarray(indices)
    if array.size == 0 and array.dtype.kind == "f" and not isinstance(indices, np.ndarray):
        array = array.astype(np.int64)  # `[]` is float64 under asarray
    dtype = array.dtype
    ok = {
        "int64": dtype.kind == "i" and dtype.itemsize == 8,
        "int32/int64": dtype.kind == "i" and dtype.itemsize in (4, 8),
        "integer": dtype.kind in "iu",
    }[allowed]
    if not ok:
        raise TypeError(f"{op}: indices must be {allowed}, got dtype {dtype}")
    return array


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _integer(op: str, name: str, value: int) -> int:
    """`value` as an int (its `__index__`), else a TypeError naming the attribute."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{op}: attribute {name} must be an integer, got {type(value).__name__}"
        ) from None


def int64_attribute(op: str, name: str, value: int) -> int:
    """`value` as an int of ONNX's attribute type (int64): a TypeError for a non-integer, a
    ValueError naming the rule for an integer beyond 64 bits."""
    v = _integer(op, name, value)
    if not INT64_MIN <= v <= INT64_MAX:
        raise ValueError(
            f"{op}: attribute {name} must fit in a signed 64-bit integer (an ONNX attribute "
            f"is int64), got {v}"
        )
    return v


def check_attribute(op: str, name: str, value: int, low: int, high: int) -> int:
    """`value` as an int in `[low, high]`, else a ValueError naming the rule."""
    v = _integer(op, name, value)
    if not low <= v <= high:
        raise ValueError(f"{op}: attribute {name} must be in [{low}, {high}], got {v}")
    return v


def _renamed(op: str, error: Exception) -> Exception:
    message = f"{op}: {error}"
    if isinstance(error, GatherIndexError):  # same class, same attributes
        return error._with_message(message)
    renamed = type(error)(message)
    renamed.__cause__ = None
    return renamed


def gather_nd(
    op: str,
    data: Array,
    indices: Array,
    batch_dims: int,
    *,
    mode: Literal["raise", "zero"] = "raise",
    wrap_negative: bool = True,
) -> Array:
    """The generic GatherND kernel with an operator's index rules."""
    try:
        return _core.gather_with_rules(data, indices, None, batch_dims, mode, wrap_negative)
    except (IndexError, ValueError, TypeError) as e:
        raise _renamed(op, e) from None


def gather(
    op: str,
    data: Array,
    indices: Array,
    axis: int,
    batch_dims: int,
    *,
    mode: Literal["raise", "zero"] = "raise",
    wrap_negative: bool = True,
) -> Array:
    """The generic Gather kernel with an operator's index rules."""
    try:
        return _core.gather_with_rules(data, indices, axis, batch_dims, mode, wrap_negative)
    except (IndexError, ValueError, TypeError) as e:
        raise _renamed(op, e) from None
