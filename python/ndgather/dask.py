"""GatherND and Gather on dask arrays, chunk by chunk: ``pip install "ndgather[dask]"``.

``gather_nd`` and ``gather`` here take a :class:`dask.array.Array` as ``data`` (NumPy arrays
and array-likes are wrapped) and NumPy, array-like or dask ``indices``, and return a lazy
:class:`dask.array.Array` whose computed value is exactly what :func:`ndgather.gather_nd` /
:func:`ndgather.gather` give on the computed inputs.

Each output block is one task: ndgather's core gathers its block of indices straight from
the chunks of ``data`` they read into the output, in index order (one pass; no pieces, no
reordering). The core also makes every rule and error: the output shape and the shape errors
come from it when the function is called, the index errors when the indices are checked.

With NumPy indices, the indices are checked when the function is called (an out-of-range index
raises the in-memory function's exact :class:`ndgather.GatherIndexError`), and each output
block depends only on the chunks of ``data`` its indices read: chunks that no index reads are
never computed, and the graph grows with the (index chunk, data chunk) pairs touched. With dask
indices, which chunks are touched is known only at compute time, so each output block depends
on every chunk of ``data`` along the indexed axes (each still computed once); above
:data:`MAX_LAZY_PAIRS` such pairs the call is refused with a ``ValueError``. An out-of-range
index then raises at compute time, with its position in the whole ``indices``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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

from ndgather import _core

# dask's task objects (private, dask >= 2024.12): each task names its dependencies, so that a
# graph over a huge lazy array is culled without listing the array's keys (from dask 2025.5).
# Older dask (2024.8 to 2024.11, the last for NumPy 1.23) gets the tuple tasks it knows.
# tests/dask/test_dask.py::test_private_dask_api_canary fails when a dask that has them
# stops taking this way; the `dask` extra in pyproject.toml bounds the versions tested.
_Task: Any
_TaskRef: Any
_List: Any
try:
    from dask._task_spec import List as _List
    from dask._task_spec import Task as _Task
    from dask._task_spec import TaskRef as _TaskRef
except ImportError:  # pragma: no cover (dask < 2024.12)
    _Task = _TaskRef = _List = None


def _ref(key: Key) -> Any:
    """A reference to the output of task ``key``, as an argument of another task."""
    return key if _TaskRef is None else _TaskRef(key)


def _task(key: Key, fn: Any, index_arg: Any, chunk_keys: list[Key], *rest: Any) -> Any:
    """The task ``key``: ``fn(index_arg, [chunks of chunk_keys], *rest)``."""
    if _Task is None:
        return (fn, index_arg, list(chunk_keys), *rest)
    return _Task(key, fn, index_arg, _List(*(_TaskRef(k) for k in chunk_keys)), *rest)


__all__ = ["MAX_LAZY_PAIRS", "gather", "gather_nd"]

Array = npt.NDArray[Any]
Mode = Literal["raise", "zero", "clip"]

#: In-memory indices are cut into blocks of at most this many index tuples.
MAX_TUPLES = 1 << 19
#: With dask indices, the most (index chunk, data chunk) pairs a call builds: each output
#: block depends on every chunk of the indexed axes. Above it, a ``ValueError`` asks for
#: coarser chunks or in-memory indices.
MAX_LAZY_PAIRS = 100_000


@dataclass(frozen=True)
class _Call:
    """What every task of a call shares: the operator and the whole array, for errors."""

    dtype: np.dtype[Any]
    axis: int | None  # None: gather_nd
    batch_dims: int
    mode: Mode
    data_shape: tuple[int, ...]
    out_dtype: np.dtype[Any] | None = None  # dtype=: the result's, when it converts


@dataclass(frozen=True)
class _Block:
    """One output block: the chunk grid of the part of ``data`` it reads (one chunk along
    the batch and carried axes, every chunk along the indexed axes), the grid coordinates of
    the chunks its task is given, and where its indices start in the whole ``indices``."""

    sizes: tuple[tuple[int, ...], ...]
    coords: tuple[tuple[int, ...], ...]
    offset: tuple[int, ...]


def _gather_block(indices: Array, chunks: list[Array], block: _Block, call: _Call) -> Array:
    return _core._gather_chunks(
        dict(zip(block.coords, chunks, strict=True)),
        block.sizes,
        call.dtype,
        indices,
        call.axis,
        call.batch_dims,
        call.mode,
        call.data_shape,
        block.offset,
        call.out_dtype,
    )


def _as_dask(data: Any) -> da.Array:
    if isinstance(data, da.Array):
        return data
    chunks = getattr(data, "chunks", None)
    if (
        not isinstance(data, np.ndarray)
        and isinstance(chunks, tuple)
        and len(chunks) == len(getattr(data, "shape", ()))
        and all(isinstance(c, int) for c in chunks)
    ):
        # A chunked store (a zarr array, an h5py dataset): its own chunks, read lazily.
        return da.from_array(data, chunks=chunks)  # type: ignore[no-untyped-call,no-any-return]
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
    data: da.Array, b: int, carried: Sequence[int], tshape: tuple[int, ...]
) -> tuple[tuple[int, ...], ...]:
    """Chunks for in-memory indices' tuple axes: the batch axes follow ``data``; the others
    are cut so that an output block is at most dask's ``array.chunk-size`` and holds at most
    ``MAX_TUPLES`` tuples (the last axes whole first, so that a block is a run of tuples)."""
    itemsize = 8 if data.dtype.hasobject else max(data.dtype.itemsize, 1)
    row = itemsize * math.prod(max(data.chunks[a], default=1) or 1 for a in carried)
    batch = math.prod(max(data.chunks[i], default=1) or 1 for i in range(b))
    # dask's own setting, read as dask reads it.
    limit = parse_bytes(dask.config.get("array.chunk-size"))
    budget = max(1, min(limit // (row * batch), MAX_TUPLES // batch))
    rest: list[tuple[int, ...]] = []
    fitted = 1
    for n in reversed(tshape[b:]):
        step = n if fitted * n <= budget else max(1, budget // fitted)
        fitted *= step
        rest.append((step,) * (n // step) + ((n % step,) if n % step else ()) if n else (0,))
    return tuple(data.chunks[i] for i in range(b)) + tuple(reversed(rest))


def _starts(chunks: tuple[tuple[int, ...], ...], index: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sum(cs[:i]) for cs, i in zip(chunks, index, strict=False))


def _part(
    data: da.Array,
    b: int,
    indexed: Sequence[int],
    carried: Sequence[int],
    ti: tuple[int, ...],
    ci: tuple[int, ...] | None,
) -> tuple[tuple[int, ...], ...]:
    """The chunk grid of the part of ``data`` that output block ``ti`` (index block), ``ci``
    (carried chunks; ``None``: the carried axes whole) reads: one chunk along the batch and
    carried axes, every chunk along the indexed axes."""
    out: list[tuple[int, ...]] = []
    for a, chunks in enumerate(data.chunks):
        if a < b:
            out.append((chunks[ti[a]],))
        elif a in indexed:
            out.append(tuple(chunks))
        elif ci is None:
            out.append((sum(chunks),))
        else:
            out.append((chunks[ci[carried.index(a)]],))
    return tuple(out)


def _snapshot(idx: Array) -> tuple[Array, int]:
    """In-memory indices as the graph keeps them, and a digest of their values (which
    names the graph): a copy of the caller's array unless it is read-only, since the caller
    may write to it after the call; both made by the core in one pass."""
    if not idx.flags.c_contiguous:
        idx = np.ascontiguousarray(idx)  # a new array: already ours
        copy = False
    else:
        copy = idx.flags.writeable
    made, digest = _core._snapshot(idx, copy)
    return (idx if made is None else made), digest


def _build(
    data_like: Any,
    indices: Any,
    axis: int | None,
    batch_dims: int,
    mode: Mode,
    dtype: npt.DTypeLike | None,
) -> da.Array:
    data = _as_dask(data_like)
    _known(data, "data")
    # dtype= as the in-memory call checks it: after data's own errors, before the shapes'.
    out_dtype = None if dtype is None else _core._cast_dtype(data.dtype, dtype)
    if out_dtype is not None and out_dtype == data.dtype:
        out_dtype = None  # nothing to convert
    lazy = isinstance(indices, da.Array)
    idx: Any = indices if lazy else np.asarray(indices)
    if lazy:
        _known(idx, "indices")
    data_shape = tuple(int(s) for s in data.shape)
    # The core's verdict on the shapes (its exact errors), and where the axes go.
    _, b, indexed = _core._gather_layout(
        data_shape, data.dtype, tuple(int(s) for s in idx.shape), idx.dtype, axis, batch_dims, mode
    )
    carried = [a for a in range(data.ndim) if a >= b and a not in indexed]
    n_between = sum(1 for a in carried if a < indexed[0])  # gather's axes before `axis`
    nd = axis is None
    tshape = tuple(int(s) for s in (idx.shape[:-1] if nd else idx.shape))

    # The batch axes of data and indices in the same chunks.
    if lazy:
        common = {i: _common(data.chunks[i], idx.chunks[i]) for i in range(b)}
        if any(common[i] != data.chunks[i] for i in range(b)):
            data = data.rechunk(common)  # type: ignore[no-untyped-call]
        idx = idx.rechunk({**common, **({idx.ndim - 1: -1} if nd else {})})
        tchunks = tuple(idx.chunks[: len(tshape)])
    else:
        tchunks = _index_chunks(data, b, carried, tshape)
    cchunks = [data.chunks[a] for a in carried]
    grid = [data.chunks[a] for a in indexed]
    n_groups = math.prod(len(c) for c in grid)
    n_blocks = math.prod(len(c) for c in tchunks)
    if lazy and n_blocks * n_groups > MAX_LAZY_PAIRS:
        raise ValueError(
            f"ndgather.dask: dask indices in {n_blocks} chunks over data in {n_groups} "
            f"chunks along the indexed axes make {n_blocks * n_groups} (index chunk, "
            f"data chunk) pairs, more than MAX_LAZY_PAIRS = {MAX_LAZY_PAIRS}: use fewer, larger "
            "chunks for the indices or for data, or compute the indices first"
        )
    call = _Call(data.dtype, axis, batch_dims, mode, data_shape, out_dtype)
    cast = None if out_dtype is None else out_dtype.str
    if lazy:
        token = tokenize(data, idx, axis, batch_dims, mode, cast)
    else:
        idx, digest = _snapshot(idx)
        token = tokenize(data, (digest, idx.shape, idx.dtype.str), axis, batch_dims, mode, cast)
    name = f"{'gather_nd' if nd else 'gather'}-{token}"
    graph: dict[Key, Any] = {}
    whole_sizes = [list(c) for c in data.chunks]
    for ti in product(*(range(len(c)) for c in tchunks)):
        start = _starts(tchunks, ti)
        block_shape = tuple(tchunks[a][i] for a, i in enumerate(ti))
        if lazy:
            index_arg: Any = _ref((idx.name, *ti, *((0,) if nd else ())))
            groups = list(product(*(range(len(c)) for c in grid)))
        else:
            sl = tuple(slice(s, s + n) for s, n in zip(start, block_shape, strict=True))
            index_arg = idx[sl]
            part = _part(data, b, indexed, carried, ti, None)
            try:
                touched = _core._chunks_touched(part, index_arg, axis, batch_dims, mode)
            except IndexError:
                # The first bad index of the whole, as the in-memory function names it.
                _core._chunks_touched(whole_sizes, idx, axis, batch_dims, mode)
                raise
            groups = [tuple(t[b:]) for t in touched]
        for ci in product(*(range(len(c)) for c in cchunks)):
            keys: list[Key] = []
            for g in groups:
                where = [0] * data.ndim
                where[:b] = ti[:b]
                for a, i in zip(indexed, g, strict=True):
                    where[a] = i
                for a, i in zip(carried, ci, strict=True):
                    where[a] = i
                keys.append((data.name, *where))
            sub = [0] * data.ndim
            coords = []
            for g in groups:
                for a, i in zip(indexed, g, strict=True):
                    sub[a] = i
                coords.append(tuple(sub))
            block = _Block(_part(data, b, indexed, carried, ti, ci), tuple(coords), start)
            out_index = ti[:b] + ci[:n_between] + ti[b:] + ci[n_between:]
            okey: Key = (name, *out_index)
            graph[okey] = _task(okey, _gather_block, index_arg, keys, block, call)

    out_chunks = tchunks[:b] + tuple(cchunks[:n_between]) + tchunks[b:] + tuple(cchunks[n_between:])
    deps: list[Any] = [data, idx] if lazy else [data]
    hlg = HighLevelGraph.from_collections(name, graph, dependencies=deps)
    meta = np.empty((0,) * len(out_chunks), data.dtype if out_dtype is None else out_dtype)
    return da.Array(hlg, name, out_chunks, meta=meta)  # type: ignore[no-untyped-call]


def gather_nd(
    data: Any,
    indices: Any,
    batch_dims: int = 0,
    *,
    mode: Mode = "raise",
    dtype: npt.DTypeLike | None = None,
) -> da.Array:
    """:func:`ndgather.gather_nd` on a dask array, lazily, chunk by chunk.

    ``data`` is a :class:`dask.array.Array`, or an array-like with chunks of its own (a zarr
    array, an h5py dataset: read by its chunks, only those used), or anything else (read whole
    with ``np.asarray``, then wrapped with ``da.from_array(..., chunks="auto")``); ``indices``
    a NumPy array, an
    array-like or a :class:`dask.array.Array`. The result is a :class:`dask.array.Array` of shape
    ``indices.shape[:-1] + data.shape[batch_dims + k:]`` whose chunks follow those of
    ``indices`` (in-memory indices are chunked so that an output block is about dask's
    ``array.chunk-size``) and of ``data`` on the carried axes. ``dtype=`` converts each block
    as it is gathered, with the casts and errors of the in-memory ``dtype=``.

    >>> import dask.array as da
    >>> x = da.arange(24, chunks=5).reshape(4, 6)
    >>> gather_nd(x, [[3, -1], [0, 2]]).compute()
    array([23,  2])
    """
    return _build(data, indices, None, batch_dims, mode, dtype)


def gather(
    data: Any,
    indices: Any,
    axis: int = 0,
    batch_dims: int = 0,
    *,
    mode: Mode = "raise",
    dtype: npt.DTypeLike | None = None,
) -> da.Array:
    """:func:`ndgather.gather` on a dask array, lazily, chunk by chunk.

    The result has shape ``data.shape[:axis] + indices.shape[batch_dims:] +
    data.shape[axis + 1:]``; its chunks follow ``indices`` on the index axes and ``data``
    elsewhere. See :func:`gather_nd` for ``data``, ``indices``, ``dtype=`` and errors.

    >>> import dask.array as da
    >>> x = da.arange(12, chunks=4).reshape(3, 4)
    >>> gather(x, [3, 0, -1], axis=1).compute()
    array([[ 3,  0,  3],
           [ 7,  4,  7],
           [11,  8, 11]])
    """
    return _build(data, indices, axis, batch_dims, mode, dtype)
