"""GatherND and Gather on dask arrays, chunk by chunk: ``pip install "ndgather[dask]"``.

``gather_nd`` and ``gather`` here take a :class:`dask.array.Array` as ``data`` (NumPy arrays
and array-likes are wrapped) and NumPy, array-like or dask ``indices``, and return a lazy
:class:`dask.array.Array` whose computed value is exactly what :func:`ndgather.gather_nd` /
:func:`ndgather.gather` give on the computed inputs.

How (per chunk of ``indices``):

1. every index tuple is resolved to the chunk of ``data`` it falls in and to its position
   inside that chunk (ndgather itself resolves negatives, clips and spots out-of-range
   indices, through small per-axis lookup tables), and a task sorts the tuples by chunk,
   stably (NumPy's radix argsort of the small chunk numbers: linear in the tuples);
2. one task per touched ``data`` chunk gathers its group with :func:`ndgather.gather_nd`;
3. one task per output chunk puts the pieces back in index order with :func:`ndgather.gather`
   (the pieces are read as a few forward streams, not at random).

With NumPy indices step 1's resolution runs when the function is called: indices are checked
then (an out-of-range index raises the in-memory function's exact ``IndexError``), and the
graph holds only the (index chunk, data chunk) pairs that some index touches, so chunks of
``data`` that no index touches are never read. With dask indices all of step 1 is a task per
index chunk; which chunks are touched is known only then, so every pair is in the graph
(untouched pairs gather nothing, but their ``data`` chunk is still computed), and an
out-of-range index raises at compute time, with its position in the whole ``indices``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, Literal

import dask
import dask.array as da
import numpy as np
import numpy.typing as npt
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from dask.typing import Key
from dask.utils import parse_bytes

import ndgather

_Task: Any
_TaskRef: Any
_TaskList: Any
try:  # dask >= 2024.12: task objects; the graph is then culled without listing every key
    from dask._task_spec import List as _TaskList
    from dask._task_spec import Task as _Task
    from dask._task_spec import TaskRef as _TaskRef
except ImportError:  # pragma: no cover (older dask: tuple tasks)
    _Task = _TaskRef = _TaskList = None

__all__ = ["gather", "gather_nd"]

Array = npt.NDArray[Any]
Mode = Literal["raise", "zero", "clip"]

#: In-memory indices are cut into chunks of at most this many tuples: planning a chunk
#: (resolve, sort, inverse) then runs in the caches, and chunks plan in parallel.
_MAX_TUPLES = 1 << 19
#: Axes longer than this resolve indices with NumPy arithmetic instead of lookup tables.
_TABLE_LIMIT = 1 << 22


# --------------------------------------------------------------------------- the problem


@dataclass(frozen=True)
class _Spec:
    """One call, reduced to a GatherND with ``batch_dims=0`` over an arranged ``data``.

    A data block is viewed with its axes in the order ``batch + indexed + carried``; each
    index tuple becomes ``(batch position..., index...)`` into that view, and gathers one row
    of the carried axes. ``carried`` lists data axes in the order the gathered rows have them:
    for ``gather`` the axes between the batch axes and ``axis`` (``n_between`` of them) come
    first, then the axes after ``axis``.
    """

    op: str  # "gather_nd" or "gather"
    batch: int
    indexed: tuple[int, ...]
    carried: tuple[int, ...]
    n_between: int
    data_shape: tuple[int, ...]
    dtype: np.dtype[Any]
    mode: Mode
    given: tuple[int, int]  # axis and batch_dims as passed (ndgather's checks see these)

    @property
    def order(self) -> tuple[int, ...]:
        return tuple(range(self.batch)) + self.indexed + self.carried

    def stand_in_shape(self, batch_extent: Sequence[int] | None = None) -> tuple[int, ...]:
        """``data``'s shape with the carried axes shrunk to at most 1 (and the batch axes set
        to ``batch_extent``): the indices' rules see the same shape, the output is tiny."""
        shape = list(self.data_shape)
        for a in self.carried:
            shape[a] = min(shape[a], 1)
        if batch_extent is not None:
            shape[: self.batch] = batch_extent
        return tuple(shape)


def _fmt(shape: Sequence[int]) -> str:
    return str(tuple(int(s) for s in shape))


def _stand_in(shape: Sequence[int]) -> Array:
    """A zero-strided uint8 array of ``shape``: one byte, any size."""
    return np.broadcast_to(np.zeros((), np.uint8), tuple(shape))


def _call(spec: _Spec, data: Array, indices: Any, mode: Mode) -> Array:
    axis, batch_dims = spec.given
    if spec.op == "gather_nd":
        return ndgather.gather_nd(data, indices, batch_dims, mode=mode)
    return ndgather.gather(data, indices, axis, batch_dims, mode=mode)


def _patched(message: str, replacements: Sequence[tuple[str, str]]) -> str:
    for old, new in replacements:
        if old != new:
            message = message.replace(old, new)
    return message


def _index_error(
    spec: _Spec, indices: Array, offset: Sequence[int] = ()
) -> ndgather.GatherIndexError | None:
    """The in-memory function's ``IndexError`` for ``indices`` (a chunk starting at
    ``offset`` of the whole), or ``None`` when every index is valid."""
    batch_extent = indices.shape[: spec.batch]
    stand = spec.stand_in_shape(batch_extent)
    try:
        _call(spec, _stand_in(stand), indices, spec.mode)
    except ndgather.GatherIndexError as exc:
        # The stand-in's error, moved to the whole ``indices`` and the whole ``data``; the
        # core makes the message. A gather_nd position ends with the place in the tuple,
        # which the offset (over the tuple axes) does not move.
        position = tuple(p + o for p, o in zip(exc.position, offset, strict=False))
        position += exc.position[len(position) :]
        return ndgather._core.out_of_range_error(
            exc.value,
            position,
            exc._index_tuple,
            exc.axis,
            exc.axis_size,
            spec.data_shape,
            exc._negatives_allowed,
        )
    return None


def _check_call(spec: _Spec, indices_shape: tuple[int, ...], indices_dtype: np.dtype[Any]) -> None:
    """Raise, with the in-memory function's message, every error that does not depend on
    the values of the indices: dtypes, mode, attributes, shapes."""
    ndgather.gather(np.empty((1,), spec.dtype), np.zeros((0,), np.intp))  # dtype of data
    ndgather.gather(np.zeros((1,), np.uint8), np.zeros((0,), np.intp), mode=spec.mode)
    # The rules read the batch axes, the tuple length and the ranks: other axes shrink to 1.
    small = list(indices_shape)
    tuple_axes = len(small) - 1 if spec.op == "gather_nd" else len(small)
    for i in range(spec.batch, max(tuple_axes, spec.batch)):
        small[i] = min(small[i], 1)
    stand = spec.stand_in_shape()
    stand_indices = np.broadcast_to(np.zeros((), indices_dtype), tuple(small))
    try:
        _call(spec, _stand_in(stand), stand_indices, "zero")
    except (ValueError, TypeError) as exc:
        message = _patched(
            str(exc),
            [
                (f"data shape {_fmt(stand)}", f"data shape {_fmt(spec.data_shape)}"),
                (f"indices shape {_fmt(small)}", f"indices shape {_fmt(indices_shape)}"),
            ],
        )
        raise type(exc)(message) from None


def _make_spec(
    op: str, data: da.Array, indices_shape: tuple[int, ...], axis: int, batch_dims: int, mode: Mode
) -> _Spec:
    r, q = data.ndim, len(indices_shape)
    indexed: tuple[int, ...] = ()
    carried: tuple[int, ...] = ()
    b = n_between = 0
    given = (axis, batch_dims)
    try:
        axis, batch_dims = operator.index(axis), operator.index(batch_dims)
        integers = True
    except TypeError:  # not integers: ndgather says why (see _check_call)
        integers = False
    if not integers:
        pass
    elif op == "gather_nd":
        k = indices_shape[-1] if q else 0
        if r and q and 0 <= batch_dims < min(r, q) and 1 <= k <= r - batch_dims:
            b = batch_dims
            indexed = tuple(range(b, b + k))
            carried = tuple(range(b + k, r))
    elif op == "gather":
        a = axis + r if axis < 0 else axis
        b = batch_dims + q if batch_dims < 0 else batch_dims
        if 0 <= a < r and 0 <= b <= min(q, a):
            indexed = (a,)
            carried = tuple(range(b, a)) + tuple(range(a + 1, r))
            n_between = a - b
        else:  # invalid: ndgather says why, before any output exists
            b = 0
    return _Spec(
        op=op,
        batch=b,
        indexed=indexed,
        carried=carried,
        n_between=n_between,
        data_shape=tuple(int(s) for s in data.shape),
        dtype=data.dtype,
        mode=mode,
        given=given,
    )


# --------------------------------------------------------------------------- the plan


@functools.lru_cache(maxsize=16)
def _tables(chunks: tuple[int, ...]) -> tuple[Array, Array]:
    """Per position of an axis: its chunk number plus one (0 is kept for "out of range"),
    and its position inside that chunk."""
    n = len(chunks)
    label_dtype = np.uint8 if n < 255 else np.uint16 if n < 65535 else np.int64
    labels = np.repeat(np.arange(1, n + 1, dtype=label_dtype), chunks)
    starts = np.cumsum((0,) + chunks[:-1], dtype=np.int64)
    local_dtype = np.int32 if max(chunks, default=0) < 2**31 else np.int64
    local = (np.arange(sum(chunks), dtype=np.int64) - np.repeat(starts, chunks)).astype(local_dtype)
    labels.flags.writeable = False
    local.flags.writeable = False
    return labels, local


class _OutOfRange(Exception):
    pass


def _resolve_axis(column: Array, chunks: tuple[int, ...], mode: Mode) -> tuple[Array, Array]:
    """Chunk number plus one (0: out of range, mode "zero") and position in the chunk of
    each index of ``column``, with ndgather's rules for negatives, "clip" and "zero"."""
    size = sum(chunks)
    if size <= _TABLE_LIMIT:
        labels, local = _tables(chunks)
        try:
            return (
                ndgather.gather(labels, column, mode=mode),
                ndgather.gather(local, column, mode=mode),
            )
        except IndexError:
            raise _OutOfRange from None
    if column.dtype.kind == "u":
        v = np.minimum(column, size).astype(np.int64)
    else:
        v = column.astype(np.int64)
        v = np.where(v < 0, v + size, v)
    if mode == "clip":
        if size == 0:
            raise _OutOfRange
        np.clip(v, 0, size - 1, out=v)
    bad = (v < 0) | (v >= size)
    if mode == "raise" and bad.any():
        raise _OutOfRange
    v[bad] = 0
    ends = np.cumsum(chunks)
    lab = np.searchsorted(ends, v, side="right")
    local_v = v - (ends - np.asarray(chunks))[lab]
    lab += 1
    lab[bad] = 0
    return lab, local_v


@dataclass
class _Plan:
    """One index chunk, grouped by data chunk.

    ``tuples[offsets[g]:offsets[g + 1]]`` are the chunk-local tuples of group ``g`` (groups
    are data chunks in C order over the indexed axes; ``zero_group`` collects the tuples that
    are out of range in mode "zero"), in index order; the result in index order is the
    concatenation of the pieces gathered at ``inverse`` (``None``: already in order).
    """

    tuples: Array
    offsets: Array
    zero_group: int
    inverse: Array | None

    def group(self, g: int) -> Array:
        return self.tuples[int(self.offsets[g]) : int(self.offsets[g + 1])]

    def count(self, g: int) -> int:
        return int(self.offsets[g + 1] - self.offsets[g])


@dataclass
class _Grouped:
    """One index chunk's tuples, chunk-local and in index order, with their group."""

    tuples: Array
    groups: Array
    zero_group: int
    counts: Array


def _group(spec: _Spec, tup: Array, grid: tuple[tuple[int, ...], ...]) -> _Grouped:
    """Resolve the tuples ``tup`` (shape ``T + (k,)``) of one index chunk to the chunk of
    ``grid`` (the chunks of the indexed axes) they fall in and their position there.
    Raises :class:`_OutOfRange`."""
    b, k = spec.batch, len(spec.indexed)
    n = math.prod(tup.shape[:-1])
    flat = tup.reshape(n, k)
    nch = [len(c) for c in grid]
    groups = math.prod(nch)
    resolved = [_resolve_axis(flat[:, a], grid[a], spec.mode) for a in range(k)]
    # Groups are data chunks in C order over the grid; the zero group (out of range in mode
    # "zero") comes last. Small dtypes: NumPy's stable argsort is a radix sort for them.
    wide = np.uint8 if groups < 255 else np.uint16 if groups < 65535 else np.int64
    combined: Array = np.subtract(resolved[0][0], 1, dtype=wide, casting="unsafe")
    if k == 1 and wide is not np.int64:
        zero = int(np.iinfo(wide).max)  # label 0 - 1 wraps around to it
    else:
        for (lab, _), count in zip(resolved[1:], nch[1:], strict=True):
            combined *= count
            np.add(combined, lab, out=combined, casting="unsafe")
            combined -= 1
        zero = groups
        if spec.mode == "zero":
            out = resolved[0][0] == 0
            for lab, _ in resolved[1:]:
                out |= lab == 0
            combined[out] = zero
    counts = np.bincount(combined, minlength=zero + 1)
    if b + k == 1:
        tuples = resolved[0][1][:, None]
    else:
        local_dtype = np.result_type(np.int32, *(loc.dtype for _, loc in resolved))
        tuples = np.empty((n, b + k), local_dtype)
        if b:
            per_batch = math.prod(tup.shape[b:-1])
            coords = np.unravel_index(np.arange(n) // max(per_batch, 1), tup.shape[:b])
            for i, c in enumerate(coords):
                tuples[:, i] = c
        for a, (_, loc) in enumerate(resolved):
            tuples[:, b + a] = loc
    return _Grouped(tuples, combined, zero, counts)


def _order(grouped: _Grouped) -> _Plan:
    """Sort the tuples by group (stable: a counting sort) and note how to undo it."""
    counts, tuples = grouped.counts, grouped.tuples
    n = len(tuples)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    inverse: Array | None = None
    if n and counts.max() < n:
        order = np.argsort(grouped.groups, kind="stable")
        if tuples.shape[1] == 1:
            tuples = ndgather.gather(tuples[:, 0], order)[:, None]
        else:
            tuples = ndgather.gather(tuples, order, axis=0)
        inverse = np.empty(n, np.intp)
        inverse[order] = np.arange(n, dtype=np.intp)
    return _Plan(tuples, offsets, grouped.zero_group, inverse)


def _plan(spec: _Spec, tup: Array, grid: tuple[tuple[int, ...], ...]) -> _Plan:
    """:func:`_group`, then :func:`_order`."""
    return _order(_group(spec, tup, grid))


# --------------------------------------------------------------------------- the tasks


@dataclass(frozen=True)
class _Block:
    """What a task needs to know about one output block."""

    spec: _Spec
    tuple_shape: tuple[int, ...]  # the index chunk's tuple axes
    carried_shape: tuple[int, ...]  # the data block's carried axes, in row order


def _piece(block: Array, tuples: Array, spec: _Spec) -> Array:
    """Gather ``tuples`` (chunk-local) from one data block: rows of its carried axes."""
    return ndgather.gather_nd(block.transpose(spec.order), tuples)


def _planned_piece(block: Array, plan: _Plan, g: int, spec: _Spec) -> Array:
    return _piece(block, plan.group(g), spec)


def _zero_rows(n: int, where: _Block) -> Array:
    empty = np.empty((0,) + where.carried_shape, where.spec.dtype)
    return ndgather.gather(empty, np.zeros(n, np.intp), mode="zero")


class _Scratch:
    """Large scratch buffers kept for reuse, per process (as ndgather keeps its results'):
    a fresh buffer of hundreds of MiB costs a page fault per 4 KiB on first write, more than
    the copy into it. At most ``limit`` bytes are kept."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self._free: list[Array] = []
        self._limit = limit

    def take(self, nbytes: int) -> Array:
        with self._lock:
            fits = [i for i, buf in enumerate(self._free) if nbytes <= buf.size <= 2 * nbytes]
            if fits:
                return self._free.pop(min(fits, key=lambda i: self._free[i].size))
        return np.empty(nbytes, np.uint8)

    def give(self, buf: Array) -> None:
        with self._lock:
            self._free.append(buf)
            while sum(b.size for b in self._free) > self._limit:
                self._free.pop(0)


_SCRATCH = _Scratch(1 << 28)
_SCRATCH_MIN = 1 << 20


@contextlib.contextmanager
def _concatenated(parts: list[Array]) -> Iterator[Array]:
    """``np.concatenate(parts)``, in a reused buffer when it is large and holds no objects
    (valid only inside the ``with``)."""
    if len(parts) == 1:
        yield parts[0]
        return
    first = parts[0]
    shape = (sum(len(p) for p in parts),) + first.shape[1:]
    nbytes = math.prod(shape) * first.dtype.itemsize
    if first.dtype.hasobject or nbytes < _SCRATCH_MIN:
        yield np.concatenate(parts, dtype=first.dtype)
        return
    buf = _SCRATCH.take(nbytes)
    try:
        cat = buf[:nbytes].view(first.dtype).reshape(shape)
        # ndgather copies on its threads: faster than np.concatenate's one.
        rows = np.arange(max(len(p) for p in parts), dtype=np.intp)
        start = 0
        for p in parts:
            ndgather.gather(p, rows[: len(p)], out=cat[start : start + len(p)])
            start += len(p)
        yield cat
    finally:
        _SCRATCH.give(buf)


def _assemble(pieces: list[Array], inverse: Array | None, zeros: int, where: _Block) -> Array:
    """Put the pieces (group order, then ``zeros`` zero rows) back in index order."""
    spec, tshape, cshape = where.spec, where.tuple_shape, where.carried_shape
    parts = [p for p in pieces if len(p)]
    if zeros:
        parts.append(_zero_rows(zeros, where))
    n = math.prod(tshape)
    b, nb = spec.batch, spec.n_between
    if not parts:
        rows = np.empty((n,) + cshape, spec.dtype)
    elif inverse is None:
        rows = parts[0]
    else:
        with _concatenated(parts) as cat:
            if nb and b == 0:
                # gather with axis > 0: the index axes go between the carried axes, in one go.
                view = np.moveaxis(cat, 0, nb)
                return ndgather.gather(view, inverse.reshape(tshape), axis=nb)
            rows = ndgather.gather(cat, inverse, axis=0)
    result = rows.reshape(tshape + cshape)
    if nb:
        t = len(tshape)
        order = (
            tuple(range(b))
            + tuple(range(t, t + nb))
            + tuple(range(b, t))
            + tuple(range(t + nb, t + len(cshape)))
        )
        result = np.ascontiguousarray(result.transpose(order))
    return result


def _planned_assemble(plan: _Plan, pieces: list[Array], where: _Block) -> Array:
    return _assemble(pieces, plan.inverse, plan.count(plan.zero_group), where)


@dataclass(frozen=True)
class _IndexChunk:
    """Where an index chunk lies: the chunks of the indexed axes of ``data`` (the groups)
    and the chunk's offset in the whole ``indices``."""

    grid: tuple[tuple[int, ...], ...]
    offset: tuple[int, ...]


def _plan_task(tup: Array, spec: _Spec, chunk: _IndexChunk) -> _Plan:
    try:
        return _plan(spec, tup, chunk.grid)
    except _OutOfRange:
        indices = tup if spec.op == "gather_nd" else tup[..., 0]
        error = _index_error(spec, indices, chunk.offset)
        if error is None:  # pragma: no cover (the tables and ndgather agree)
            raise RuntimeError("an index was out of range but ndgather accepts it") from None
        raise error from None


# --------------------------------------------------------------------------- the graph


def _ref(key: Key) -> Any:
    """A reference to the output of task ``key``, as an argument of another task."""
    return key if _TaskRef is None else _TaskRef(key)


def _refs(keys: Sequence[Key]) -> Any:
    """References to the outputs of ``keys``, as one list argument of another task."""
    return list(keys) if _TaskList is None else _TaskList(*(_TaskRef(k) for k in keys))


def _task(key: Key, fn: Any, *args: Any) -> Any:
    """The task ``key``: ``fn(*args)``, arguments made with :func:`_ref` replaced by values."""
    return (fn, *args) if _Task is None else _Task(key, fn, *args)


def _as_dask(data: Any) -> da.Array:
    if isinstance(data, da.Array):
        return data
    array = np.asarray(data)
    try:
        return da.from_array(array, chunks="auto")  # type: ignore[no-untyped-call,no-any-return]
    except (ValueError, NotImplementedError):  # object dtype: no size estimate
        return da.from_array(array, chunks=-1)  # type: ignore[no-untyped-call,no-any-return]


def _known(array: da.Array, what: str) -> None:
    if any(math.isnan(c) for cs in array.chunks for c in cs):
        raise ValueError(f"{what} has unknown chunk sizes; call {what}.compute_chunk_sizes() first")


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The coarsest chunks that refine both ``a`` and ``b`` (same total)."""
    cuts = sorted(set(np.cumsum(a).tolist()) | set(np.cumsum(b).tolist()))
    return tuple(int(y - x) for x, y in zip([0] + cuts[:-1], cuts, strict=False)) or a


def _index_chunks(
    spec: _Spec, data: da.Array, tshape: tuple[int, ...]
) -> tuple[tuple[int, ...], ...]:
    """Chunks for in-memory indices' tuple axes: the batch axes follow ``data``; the others
    are cut so that an output block is at most dask's ``array.chunk-size`` and holds at most
    ``_MAX_TUPLES`` tuples (splitting the leading axes first, so that a block is a
    contiguous run of tuples)."""
    b = spec.batch
    itemsize = 8 if spec.dtype.hasobject else max(spec.dtype.itemsize, 1)
    row = itemsize * math.prod(max(data.chunks[a], default=1) or 1 for a in spec.carried)
    batch = math.prod(max(data.chunks[i], default=1) or 1 for i in range(b))
    # dask's own setting, read as dask reads it (a bare "1G" is 10**9 there; every size
    # NDGATHER_POOL_BYTES accepts means the same to both).
    limit = parse_bytes(dask.config.get("array.chunk-size"))
    budget = max(1, min(limit // (row * batch), _MAX_TUPLES // batch))
    rest: list[tuple[int, ...]] = []
    fitted = 1
    for n in reversed(tshape[b:]):
        step = n if fitted * n <= budget else max(1, budget // fitted)
        fitted *= step
        rest.append((step,) * (n // step) + ((n % step,) if n % step else ()) if n else (0,))
    return tuple(data.chunks[i] for i in range(b)) + tuple(reversed(rest))


def _slices(chunks: tuple[tuple[int, ...], ...], index: tuple[int, ...]) -> tuple[slice, ...]:
    out = []
    for cs, i in zip(chunks, index, strict=False):
        start = sum(cs[:i])
        out.append(slice(start, start + cs[i]))
    return tuple(out)


def _output(
    spec: _Spec, tchunks: tuple[tuple[int, ...], ...], cchunks: tuple[tuple[int, ...], ...]
) -> tuple[tuple[tuple[int, ...], ...], Any]:
    b, nb = spec.batch, spec.n_between
    chunks = tchunks[:b] + cchunks[:nb] + tchunks[b:] + cchunks[nb:]

    def key_index(ti: tuple[int, ...], ci: tuple[int, ...]) -> tuple[int, ...]:
        return ti[:b] + ci[:nb] + ti[b:] + ci[nb:]

    return chunks, key_index


def _data_key(
    data: da.Array, spec: _Spec, ti: tuple[int, ...], gi: tuple[int, ...], ci: tuple[int, ...]
) -> Key:
    index = [0] * data.ndim
    index[: spec.batch] = ti[: spec.batch]
    for a, i in zip(spec.indexed, gi, strict=False):
        index[a] = i
    for a, i in zip(spec.carried, ci, strict=False):
        index[a] = i
    return (data.name, *index)


def _build(
    op: str,
    data_like: Any,
    indices: Any,
    axis: int,
    batch_dims: int,
    mode: Mode,
) -> da.Array:
    data = _as_dask(data_like)
    _known(data, "data")
    lazy = isinstance(indices, da.Array)
    idx: Any = indices if lazy else np.asarray(indices)
    if lazy:
        _known(idx, "indices")
    spec = _make_spec(op, data, tuple(int(s) for s in idx.shape), axis, batch_dims, mode)
    _check_call(spec, tuple(int(s) for s in idx.shape), idx.dtype)
    b = spec.batch

    if spec.op == "gather":
        tup = idx[..., None]
    else:
        tup = idx
    tshape = tuple(int(s) for s in tup.shape[:-1])
    # The batch axes of data and indices in the same chunks.
    common = {
        i: _common(data.chunks[i], idx.chunks[i]) if lazy else data.chunks[i] for i in range(b)
    }
    if any(common[i] != data.chunks[i] for i in range(b)):
        data = data.rechunk(common)  # type: ignore[no-untyped-call]
    grid = tuple(data.chunks[a] for a in spec.indexed)
    cchunks = tuple(data.chunks[a] for a in spec.carried)
    token = tokenize(op, data, idx, spec)
    name = f"{op}-{token}"
    pname = f"{op}-piece-{token}"
    plname = f"{op}-plan-{token}"
    graph: dict[Key, Any] = {}
    deps: list[Any] = [data]
    cgrid = list(product(*(range(len(c)) for c in cchunks)))
    nch = tuple(len(c) for c in grid)
    ngroups = math.prod(nch)

    if lazy:
        tup = tup.rechunk({**common, tup.ndim - 1: -1})
        tchunks = tuple(tup.chunks[:-1])
        deps.append(tup)
    else:
        tchunks = _index_chunks(spec, data, tshape)

    out_chunks, key_index = _output(spec, tchunks, cchunks)
    for ti in product(*(range(len(c)) for c in tchunks)):
        sl = _slices(tchunks, ti)
        tuple_shape = tuple(s.stop - s.start for s in sl)
        if lazy:
            offset = tuple(s.start for s in sl)
            plan_key: Key = (plname, *ti)
            graph[plan_key] = _task(
                plan_key, _plan_task, _ref((tup.name, *ti, 0)), spec, _IndexChunk(grid, offset)
            )
            groups = list(range(ngroups))
        else:
            try:
                grouped = _group(spec, tup[sl], grid)
            except _OutOfRange:
                error = _index_error(spec, idx)
                if error is None:  # pragma: no cover
                    raise RuntimeError(
                        "an index was out of range but ndgather accepts it"
                    ) from None
                raise error from None
            plan_key = (plname, *ti)
            graph[plan_key] = _task(plan_key, _order, grouped)  # sorts run as tasks, in parallel
            groups = np.flatnonzero(grouped.counts[:ngroups]).tolist()
        for ci in cgrid:
            where = _Block(spec, tuple_shape, tuple(cchunks[j][i] for j, i in enumerate(ci)))
            pieces = []
            for g in groups:
                pkey: Key = (pname, *ti, g, *ci)
                gi = tuple(int(i) for i in np.unravel_index(g, nch)) if nch else ()
                dkey = _data_key(data, spec, ti, gi, ci)
                graph[pkey] = _task(pkey, _planned_piece, _ref(dkey), _ref(plan_key), g, spec)
                pieces.append(pkey)
            okey: Key = (name, *key_index(ti, ci))
            graph[okey] = _task(okey, _planned_assemble, _ref(plan_key), _refs(pieces), where)

    hlg = HighLevelGraph.from_collections(name, graph, dependencies=deps)
    meta = np.empty((0,) * len(out_chunks), spec.dtype)
    return da.Array(hlg, name, out_chunks, meta=meta)  # type: ignore[no-untyped-call]


# --------------------------------------------------------------------------- public API


def gather_nd(data: Any, indices: Any, batch_dims: int = 0, *, mode: Mode = "raise") -> da.Array:
    """:func:`ndgather.gather_nd` on a dask array, lazily, chunk by chunk.

    ``data`` is a :class:`dask.array.Array` (anything else is read whole with
    ``np.asarray``, then wrapped with ``da.from_array(..., chunks="auto")``: wrap a zarr
    array with ``da.from_zarr`` to read only the chunks used); ``indices`` a NumPy array, an
    array-like or a :class:`dask.array.Array`. The result is a :class:`dask.array.Array` of shape
    ``indices.shape[:-1] + data.shape[batch_dims + k:]`` whose chunks follow those of
    ``indices`` (in-memory indices are chunked so that an output block is about dask's
    ``array.chunk-size``) and of ``data`` on the carried axes.

    >>> import dask.array as da
    >>> x = da.arange(24, chunks=5).reshape(4, 6)
    >>> gather_nd(x, [[3, -1], [0, 2]]).compute()
    array([23,  2])
    """
    return _build("gather_nd", data, indices, 0, batch_dims, mode)


def gather(
    data: Any, indices: Any, axis: int = 0, batch_dims: int = 0, *, mode: Mode = "raise"
) -> da.Array:
    """:func:`ndgather.gather` on a dask array, lazily, chunk by chunk.

    The result has shape ``data.shape[:axis] + indices.shape[batch_dims:] +
    data.shape[axis + 1:]``; its chunks follow ``indices`` on the index axes and ``data``
    elsewhere. See :func:`gather_nd` for ``data``, ``indices`` and errors.

    >>> import dask.array as da
    >>> x = da.arange(12, chunks=4).reshape(3, 4)
    >>> gather(x, [3, 0, -1], axis=1).compute()
    array([[ 3,  0,  3],
           [ 7,  4,  7],
           [11,  8, 11]])
    """
    return _build("gather", data, indices, axis, batch_dims, mode)
