"""Who gathers: ndgather, and NumPy's idioms for the same operation.

A :class:`Candidate` turns one built case into a :class:`~timing.Call`, or into ``None`` when
it does not apply to that case. Everything that depends only on shapes (index permutations,
broadcast batch aranges, reshaped views of ``data``) is prepared once, outside the timed call,
as a user with a shape-specialised helper would; everything that depends on the index values
is inside it. Only idioms that check every index like ndgather does (``IndexError`` on an index
outside its axis) are candidates, so an unchecked flat offset is not.

To compare against another library, write a function ``prepare(inputs) -> Call | None`` and
list it as a ``Candidate`` with its own family name; the runner verifies its output against
the reference family and times it with the rest. A ``prepare`` that can say why a case is
beyond it raises :class:`NotApplicable`; the reason is recorded as "n/a". The other runtimes
(onnxruntime, OpenVINO, TensorFlow) and the memory-copy limits are in ``peers.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ndgather
import numpy as np

from .cases import Inputs
from .timing import Call

Prepare = Callable[[Inputs], Call | None]


class NotApplicable(Exception):
    """Raised by a ``prepare`` for a case the candidate cannot do; the message says why."""


@dataclass(frozen=True)
class Candidate:
    name: str
    family: str  # e.g. "ndgather", "numpy"; the summary reports the best of each family
    version: str
    prepare: Prepare  # returns None (or raises NotApplicable) when it has no form for the case
    checked: bool = True  # False: a yardstick (a plain copy) whose output is not the result


# --------------------------------------------------------------------------- ndgather


def _ndgather_args(inputs: Inputs) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The call a user would write: arguments left at their defaults are not passed."""
    case = inputs.case
    if case.op == "gather_nd":
        fn: Callable[..., Any] = ndgather.gather_nd
        attrs: tuple[int, ...] = (case.batch_dims,)
    else:
        fn = ndgather.gather
        attrs = (case.axis, case.batch_dims)
    while attrs and attrs[-1] == 0:
        attrs = attrs[:-1]
    return fn, (inputs.data, inputs.indices, *attrs)


def ndgather_plain(inputs: Inputs) -> Call:
    fn, args = _ndgather_args(inputs)
    return Call(fn, args)


def ndgather_out(inputs: Inputs) -> Call:
    fn, args = _ndgather_args(inputs)
    out = np.empty(inputs.case.output_shape, dtype=inputs.data.dtype)
    return Call(fn, args, {"out": out})


# --------------------------------------------------------------------------- NumPy idioms


def _grids(sizes: tuple[int, ...], ndim: int) -> tuple[np.ndarray, ...]:
    """``np.arange`` over each leading axis of ``sizes``, shaped to broadcast over ``ndim`` axes."""
    return tuple(
        np.arange(n).reshape((1,) * i + (n,) + (1,) * (ndim - i - 1)) for i, n in enumerate(sizes)
    )


def _last_axis_first(ndim: int) -> tuple[int, ...]:
    return (ndim - 1, *range(ndim - 1))


def nd_fancy(inputs: Inputs) -> Call | None:
    """``data[tuple(idx.T)]``, with broadcast aranges in front for the batch dimensions."""
    case, b, q = inputs.case, inputs.case.batch_dims, inputs.indices.ndim
    if b == 0 and q == 2:

        def fancy(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
            return data[tuple(idx.T)]

        return Call(fancy, (inputs.data, inputs.indices))
    grids = _grids(case.data_shape[:b], q - 1)
    perm = _last_axis_first(q)

    def fancy_batched(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return data[grids + tuple(idx.transpose(perm))]

    return Call(fancy_batched, (inputs.data, inputs.indices))


def nd_take(inputs: Inputs) -> Call | None:
    """``data.take(idx[..., 0], axis=0)``: one index per tuple, no batch dimensions."""
    case = inputs.case
    if case.batch_dims != 0 or case.indices_shape[-1] != 1:
        return None

    def take(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return data.take(idx[..., 0], axis=0)

    return Call(take, (inputs.data, inputs.indices))


def nd_ravel_take(inputs: Inputs) -> Call | None:
    """``np.ravel_multi_index`` over the tuple (plus the batch offset), then ``take``."""
    case, b = inputs.case, inputs.case.batch_dims
    k, q = case.indices_shape[-1], len(case.indices_shape)
    if k < 2:
        # One index per tuple: the idiom is `take` (no batch) or `take_along_axis`; adding a
        # batch offset to it would not check the index against its own axis.
        return None
    dims = case.data_shape[b : b + k]
    flat_data = inputs.data.reshape((-1, *case.data_shape[b + k :]))
    perm = _last_axis_first(q)
    if b == 0:

        def ravel_take(flat_data: np.ndarray, idx: np.ndarray) -> np.ndarray:
            flat = np.ravel_multi_index(tuple(idx.transpose(perm)), dims)
            return flat_data.take(flat, axis=0)

        return Call(ravel_take, (flat_data, inputs.indices))
    batch_shape = case.data_shape[:b]
    offset = (np.arange(math.prod(batch_shape)) * math.prod(dims)).reshape(
        batch_shape + (1,) * (q - 1 - b)
    )

    def ravel_take_batched(flat_data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        flat = np.ravel_multi_index(tuple(idx.transpose(perm)), dims)
        return flat_data.take(flat + offset, axis=0)

    return Call(ravel_take_batched, (flat_data, inputs.indices))


def nd_take_along_axis(inputs: Inputs) -> Call | None:
    """``np.take_along_axis`` for one index per tuple with batch dimensions."""
    case, b = inputs.case, inputs.case.batch_dims
    if b == 0 or case.indices_shape[-1] != 1:
        return None
    n = math.prod(case.indices_shape[b:-1])
    along = case.data_shape[:b] + (n,) + (1,) * (len(case.data_shape) - b - 1)
    out_shape = case.output_shape

    def take_along(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.take_along_axis(data, idx.reshape(along), axis=b).reshape(out_shape)

    return Call(take_along, (inputs.data, inputs.indices))


def g_take(inputs: Inputs) -> Call | None:
    """``data.take(idx, axis=axis)``."""
    case = inputs.case
    if case.batch_dims != 0:
        return None
    return Call(inputs.data.take, (inputs.indices,), {"axis": case.axis})


def g_fancy(inputs: Inputs) -> Call | None:
    """``data[:, ..., idx]``, with broadcast aranges in front for the batch dimensions."""
    case, a, b = inputs.case, inputs.case.axis, inputs.case.batch_dims
    if b == 0:
        head = (slice(None),) * a

        def fancy(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
            return data[head + (idx,)]

        return Call(fancy, (inputs.data, inputs.indices))
    # Aranges over every axis before `axis` keep the advanced indices adjacent, so the result
    # comes out in the contract's axis order without a transpose.
    m = len(case.indices_shape) - b
    grids = _grids(case.data_shape[:a], a + m)
    shaped = case.indices_shape[:b] + (1,) * (a - b) + case.indices_shape[b:]

    def fancy_batched(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return data[grids + (idx.reshape(shaped),)]

    return Call(fancy_batched, (inputs.data, inputs.indices))


def g_take_along_axis(inputs: Inputs) -> Call | None:
    """``np.take_along_axis`` with the indices broadcast over the non-batch axes."""
    case, a, b = inputs.case, inputs.case.axis, inputs.case.batch_dims
    if b == 0:
        return None
    n = math.prod(case.indices_shape[b:])
    r = len(case.data_shape)
    along = case.indices_shape[:b] + (1,) * (a - b) + (n,) + (1,) * (r - a - 1)
    out_shape = case.output_shape

    def take_along(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.take_along_axis(data, idx.reshape(along), axis=a).reshape(out_shape)

    return Call(take_along, (inputs.data, inputs.indices))


NDGATHER: tuple[Candidate, ...] = (
    Candidate("ndgather", "ndgather", ndgather.__version__, ndgather_plain),
    Candidate("ndgather out=", "ndgather", ndgather.__version__, ndgather_out),
)


def ndgather_out_clip(inputs: Inputs) -> Call:
    """``out=`` with ``mode="clip"``: no index checked (the cases' indices are in range)."""
    fn, args = _ndgather_args(inputs)
    out = np.empty(inputs.case.output_shape, dtype=inputs.data.dtype)
    return Call(fn, args, {"mode": "clip", "out": out})


#: The cost of the check: compared with "ndgather out=" (same call, mode="raise").
CLIP = Candidate("ndgather out= clip", "ndgather clip", ndgather.__version__, ndgather_out_clip)


def _by_op(gather_nd: Prepare | None, gather: Prepare | None) -> Prepare:
    """One idiom, written once for each operator (``None``: the idiom has no such form)."""

    def prepare(inputs: Inputs) -> Call | None:
        chosen = gather_nd if inputs.case.op == "gather_nd" else gather
        return None if chosen is None else chosen(inputs)

    return prepare


NUMPY: tuple[Candidate, ...] = tuple(
    Candidate(name, "numpy", np.__version__, _by_op(gather_nd, gather))
    for name, gather_nd, gather in (
        ("numpy fancy", nd_fancy, g_fancy),
        ("numpy take", nd_take, g_take),
        ("numpy ravel+take", nd_ravel_take, None),
        ("numpy take_along_axis", nd_take_along_axis, g_take_along_axis),
    )
)
