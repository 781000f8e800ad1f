"""PyTorch, JAX and numba as peers: the gathers ML users already have loaded.

None of them has GatherND with ``batch_dims``, so each gathers blocks of ``data`` viewed as
``(B * O * S, W)`` by a linear index ``lin[b, o, j] = (b * O + o) * S + sum_c idx[b, j, c] *
stride_c``, computed inside the timed call from the index values (the shape-only parts, the
aranges and strides, are prepared once): :func:`geometry` says what B (batch), O (axes
between the batch and the gathered axes), S (size of the gathered axes), the strides and W
(elements of a block) are for a case. Plain cases take the direct form a user would write.

* **PyTorch**: ``torch.index_select`` on tensors sharing the arrays' memory
  (``torch.from_numpy``); ``torch index_select``: a new tensor; ``torch index_select out=``:
  into a preallocated tensor over a NumPy array. Out-of-range indices raise.
* **JAX**: ``jax.jit`` of ``x.at[lin].get(mode="promise_in_bounds")`` (the fastest jitted
  gather: no clamping, no fill), inputs put on the CPU device once, run on the calling thread
  (``jax_cpu_enable_async_dispatch`` off: cheaper per call) and blocked on. 64-bit types
  are enabled so that int64 indices stay int64.
  **Indices are not checked** (out of range is undefined).
* **numba**: an ``@njit(boundscheck=False)`` loop over the blocks copying each block, the
  kernel a performance-minded user writes; ``numba prange``: ``parallel=True`` with
  ``prange`` over the blocks (or batches); ``numba serial``: the same loop on one thread
  (cheaper for small calls); each into a new array or ``out=``. **Indices are not checked.**

``threads`` caps each: ``torch.set_num_threads``, numba's ``set_num_threads``, and for
JAX ``XLA_FLAGS`` (``intra_op_parallelism_threads``, set before JAX is imported).
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .candidates import Candidate
from .cases import Case, Inputs
from .timing import Call

ML_RUNTIMES = ("torch", "jax", "numba")


@dataclass(frozen=True)
class Geometry:
    batch: int  # B: product of the batch axes
    outer: int  # O: product of the axes between the batch axes and the gathered ones
    size: int  # S: product of the gathered axes
    strides: tuple[int, ...]  # of each gathered axis, in blocks
    width: int  # W: elements of one block
    n: int  # index tuples per batch
    k: int  # indices per tuple

    @property
    def simple(self) -> bool:
        """One index per block, no batch, no outer axes: ``data2d[idx]``."""
        return self.batch == 1 and self.outer == 1 and self.k == 1


def geometry(case: Case) -> Geometry:
    d, b = case.data_shape, case.batch_dims
    if case.op == "gather_nd":
        k = case.indices_shape[-1]
        dims = d[b : b + k]
        strides = tuple(math.prod(dims[i + 1 :]) for i in range(k))
        return Geometry(
            math.prod(d[:b]),
            1,
            math.prod(dims),
            strides,
            math.prod(d[b + k :]),
            math.prod(case.indices_shape[b:-1]),
            k,
        )
    a = case.axis
    return Geometry(
        math.prod(d[:b]),
        math.prod(d[b:a]),
        d[a],
        (1,),
        math.prod(d[a + 1 :]),
        math.prod(case.indices_shape[b:]),
        1,
    )


def _views(inputs: Inputs, g: Geometry) -> tuple[np.ndarray, np.ndarray]:
    data2d = inputs.data.reshape(g.batch * g.outer * g.size, g.width)
    idx3 = inputs.indices.reshape(g.batch, g.n, g.k)
    return data2d, idx3


# --------------------------------------------------------------------------- PyTorch


def _torch() -> Any:
    return importlib.import_module("torch")


def _torch_select(inputs: Inputs) -> Callable[..., Any]:
    """``select(out=None)``: the gather as a PyTorch user writes it for this case."""
    torch, case, g = _torch(), inputs.case, geometry(inputs.case)
    data2d, idx3 = _views(inputs, g)
    d = torch.from_numpy(data2d)
    index_select = torch.index_select
    if g.simple:
        flat = torch.from_numpy(idx3.reshape(-1))
        return lambda out=None: index_select(d, 0, flat, out=out)
    if case.op == "gather" and case.batch_dims == 0:
        dt = torch.from_numpy(inputs.data)
        flat = torch.from_numpy(inputs.indices.reshape(-1))
        axis = case.axis
        return lambda out=None: index_select(dt, axis, flat, out=out)
    it = torch.from_numpy(idx3)
    strides = torch.tensor(g.strides, dtype=it.dtype)
    base = ((torch.arange(g.batch)[:, None] * g.outer + torch.arange(g.outer)) * g.size)[..., None]
    base = base.to(it.dtype)

    def select(out: Any = None) -> Any:
        lin = it[..., 0] if g.k == 1 else (it * strides).sum(-1)
        return index_select(d, 0, (base + lin[:, None, :]).reshape(-1), out=out)

    return select


def torch_new(inputs: Inputs) -> Call:
    select, shape = _torch_select(inputs), inputs.case.output_shape

    def run() -> Any:
        return select().reshape(shape)

    return Call(run)


def torch_out(inputs: Inputs) -> Call:
    torch, case = _torch(), inputs.case
    out = np.empty(case.output_shape, dtype=inputs.data.dtype)
    select = _torch_select(inputs)
    # index_select's out= must have the shape of its result: a view of `out` shaped so.
    g = geometry(case)
    if case.op == "gather" and case.batch_dims == 0 and not g.simple:
        d = case.data_shape
        view = out.reshape(d[: case.axis] + (math.prod(case.indices_shape),) + d[case.axis + 1 :])
    else:
        view = out.reshape(-1, g.width)
    target = torch.from_numpy(view)

    def run() -> np.ndarray:
        select(target)
        return out

    return Call(run)


def _load_torch(threads: int | None) -> tuple[str, list[Candidate], dict[str, Any]]:
    torch = _torch()
    if threads is not None:
        torch.set_num_threads(threads)
    v = torch.__version__
    return (
        v,
        [
            Candidate("torch index_select", "torch", v, torch_new),
            Candidate("torch index_select out=", "torch", v, torch_out),
        ],
        {"num_threads": torch.get_num_threads()},
    )


# --------------------------------------------------------------------------- JAX


def _jax() -> Any:
    return importlib.import_module("jax")


@functools.lru_cache(maxsize=1)
def _jax_fn(case: Case, index_dtype: str) -> Callable[..., Any]:
    jax = _jax()
    jnp = importlib.import_module("jax.numpy")
    g, shape = geometry(case), case.output_shape
    dt = np.dtype(index_dtype)
    strides = np.array(g.strides, dtype=dt)
    base = ((np.arange(g.batch)[:, None] * g.outer + np.arange(g.outer)) * g.size)[..., None]
    base = base.astype(dt)

    def gather(d: Any, i: Any) -> Any:
        if g.simple:
            lin = i.reshape(-1)
        else:
            lin = i[..., 0] if g.k == 1 else jnp.sum(i * strides, axis=-1)
            lin = (base + lin[:, None, :]).reshape(-1)
        return d.at[lin].get(mode="promise_in_bounds").reshape(shape)

    return jax.jit(gather)


def jax_get(inputs: Inputs) -> Call:
    jax, g = _jax(), geometry(inputs.case)
    data2d, idx3 = _views(inputs, g)
    d, i = jax.device_put(data2d), jax.device_put(idx3)
    fn = _jax_fn(inputs.case, str(idx3.dtype))

    def run() -> Any:
        return fn(d, i).block_until_ready()

    return Call(run)


def configure_jax(jax: Any) -> None:
    """64-bit types on (int64 ids stay int64), the CPU only, and every call run on the calling
    thread (no hand-off to a dispatch thread per call)."""
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_enable_async_dispatch", False)


def _load_jax(threads: int | None) -> tuple[str, list[Candidate], dict[str, Any]]:
    if threads is not None and "jax" not in sys.modules:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = (
            f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}"
        ).strip()
    jax = _jax()
    configure_jax(jax)
    v = jax.__version__
    return (
        v,
        [Candidate("jax at.get", "jax", v, jax_get)],
        {"jit": True, "mode": "promise_in_bounds", "XLA_FLAGS": os.environ.get("XLA_FLAGS")},
    )


# --------------------------------------------------------------------------- numba


def _numba_source() -> tuple[Callable[..., None], Callable[..., None]]:
    prange = importlib.import_module("numba").prange

    def rows(d2: Any, idx: Any, strides: Any, out2: Any) -> None:
        # One block per index tuple, no batch: the common case.
        for i in prange(idx.shape[0]):
            r = 0
            for c in range(idx.shape[1]):
                r += idx[i, c] * strides[c]
            for w in range(d2.shape[1]):
                out2[i, w] = d2[r, w]

    def blocks(d2: Any, idx3: Any, strides: Any, outer: int, size: int, out2: Any) -> None:
        # Batches and outer axes: one (batch, outer) pair per parallel task.
        n = idx3.shape[1]
        for t in prange(idx3.shape[0] * outer):
            b, base = t // outer, t * size
            for j in range(n):
                r = base
                for c in range(idx3.shape[2]):
                    r += idx3[b, j, c] * strides[c]
                row = t * n + j
                for w in range(d2.shape[1]):
                    out2[row, w] = d2[r, w]

    return rows, blocks


@functools.lru_cache(maxsize=2)
def _numba_kernels(parallel: bool) -> tuple[Callable[..., None], Callable[..., None]]:
    numba = importlib.import_module("numba")
    jit = numba.njit(parallel=parallel, boundscheck=False, nogil=True, fastmath=False)
    rows, blocks = _numba_source()
    return jit(rows), jit(blocks)


def _numba_take_source() -> Callable[..., None]:
    prange = importlib.import_module("numba").prange

    def take(table: Any, ids: Any, out: Any) -> None:
        # Rows of a 2-D table by a 1-D batch of ids (benches/service.py).
        for i in prange(ids.shape[0]):
            r = ids[i]
            for w in range(table.shape[1]):
                out[i, w] = table[r, w]

    return take


@functools.lru_cache(maxsize=2)
def numba_take(parallel: bool) -> tuple[Callable[..., None], Callable[..., Any]]:
    """``take(table, ids, out)`` and ``take_new(table, ids) -> out``, compiled with
    ``parallel`` (``prange`` over the ids) or not."""
    numba = importlib.import_module("numba")
    jit = numba.njit(parallel=parallel, boundscheck=False, nogil=True)
    take = jit(_numba_take_source())

    def take_new(table: Any, ids: Any) -> Any:
        out = np.empty((ids.shape[0], table.shape[1]), table.dtype)
        take(table, ids, out)
        return out

    # The wrapper only allocates; `take` inside it runs in parallel or not.
    return take, numba.njit(boundscheck=False, nogil=True)(take_new)


def _numba_call(inputs: Inputs, parallel: bool, use_out: bool) -> Call:
    g = geometry(inputs.case)
    data2d, idx3 = _views(inputs, g)
    rows, blocks = _numba_kernels(parallel)
    strides = np.array(g.strides, dtype=np.int64)
    shape, dtype = inputs.case.output_shape, inputs.data.dtype
    nblocks = g.batch * g.outer * g.n
    out = np.empty(shape, dtype=dtype)
    idx2 = idx3.reshape(-1, g.k)
    plain = g.batch == 1 and g.outer == 1

    def kernel(o: np.ndarray) -> np.ndarray:
        o2 = o.reshape(nblocks, g.width)
        if plain:
            rows(data2d, idx2, strides, o2)
        else:
            blocks(data2d, idx3, strides, g.outer, g.size, o2)
        return o

    kernel(out)  # compile outside the timing
    if use_out:
        return Call(kernel, (out,))

    def new() -> np.ndarray:
        return kernel(np.empty(shape, dtype=dtype))

    return Call(new)


def _load_numba(threads: int | None) -> tuple[str, list[Candidate], dict[str, Any]]:
    numba = importlib.import_module("numba")
    if threads is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    v = numba.__version__
    forms = [
        (f"numba {kind}{' out=' if o else ''}", p, o)
        for kind, p in (("prange", True), ("serial", False))
        for o in (False, True)
    ]
    return (
        v,
        [
            Candidate(name, "numba", v, functools.partial(_numba_call, parallel=p, use_out=o))
            for name, p, o in forms
        ],
        {"boundscheck": False, "num_threads": numba.get_num_threads()},
    )


LOADERS: dict[str, Callable[[int | None], tuple[str, list[Candidate], dict[str, Any]]]] = {
    "torch": _load_torch,
    "jax": _load_jax,
    "numba": _load_numba,
}


def release() -> None:
    _jax_fn.cache_clear()
