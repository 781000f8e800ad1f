"""ndgather.dask against dask's own gathers and against in-memory ndgather.

Cases (all float32, random indices, fixed seed):

* ``rows``: 1M random row ids into a (1M, 64) array in 10 chunks of rows (Gather, axis 0);
* ``points``: 2M random points into a (4096, 4096) array in 1024x1024 chunks (GatherND);
* ``tokens_b1``: 512 of 2048 rows of 1 KiB per batch, 64 batches, ``batch_dims=1``
  (GatherND), data in (8, 512, 256) chunks;
* ``zarr_rows``: 200k random row ids into a (1M, 64) zarr store on disk in 50k-row chunks,
  read each call (not persisted);
* ``zarr_points``: 500k random points into a (4096, 4096) zarr store on disk in 512x512
  chunks, read each call.

Candidates, each checked equal to in-memory ndgather before timing, then timed in
interleaved rounds (``timing.py``) with the threaded scheduler; every dask call includes
building the graph and ``.compute()``. Then one more ``ndgather.dask`` call measures its
peak memory (the growth of the process's peak resident set, from ``/proc``) against the
bound "chunks touched + twice the output":

* ``ndgather.dask``: :func:`ndgather.dask.gather` / ``gather_nd`` with NumPy indices, on the
  persisted array (zarr: on the store, and also on the persisted array);
* ``dask <idiom>``: ``x.vindex[...]``, ``x[ids]``, ``da.take``: every one that applies;
* zarr cases: zarr's own ``vindex`` (points) or ``get_orthogonal_selection`` (rows) on the
  store, which count as idioms too;
* ``ndgather``: the in-memory function on the same data as a NumPy array;
* ``rows`` only: ``ndgather.dask`` on a ``distributed.LocalCluster`` of 2 worker processes
  (1 thread each), data persisted on the workers, the result fetched to the client.

    python -m benches dask                       # every case, 5 rounds
    python -m benches dask --quick               # tiny sizes, 2 rounds (CI)
    python -m benches dask --json bench-results/dask.json --doc docs/performance.md
"""

from __future__ import annotations

import gc
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import ndgather
import ndgather.dask as ngd
import numpy as np

from .report import fmt_ratio, fmt_seconds, markdown_table, provenance, text_table
from .runner import Run
from .timing import Call, run_interleaved

SEED = 11
ROUNDS = (5, 2)
MIN_SAMPLE_S = (0.05, 0.001)
TABLE = "dask table"
PEERS = ("dask",)


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    op: str  # "gather" (axis 0) or "gather_nd"
    data_shape: tuple[int, ...]
    chunks: tuple[int, ...]
    indices_shape: tuple[int, ...]
    batch_dims: int = 0
    zarr: bool = False
    cluster: bool = False

    def shrunk(self) -> Case:
        """The quick case: large dimensions divided by 64 (indices by 256), batches kept."""

        def shrink(shape: tuple[int, ...], by: int) -> tuple[int, ...]:
            return tuple(max(1, s // by) if s > 64 else s for s in shape)

        data = shrink(self.data_shape, 64)
        chunks = tuple(min(c, max(1, c // 64)) if c > 64 else c for c in self.chunks)
        indices = shrink(self.indices_shape, 256)
        if self.batch_dims:
            indices = data[: self.batch_dims] + indices[self.batch_dims :]
        return replace(self, data_shape=data, chunks=chunks, indices_shape=indices)


CASES = (
    Case(
        "rows",
        "1M random ids into (1M, 64) float32 in 10 chunks",
        "gather",
        (1_000_000, 64),
        (100_000, 64),
        (1_000_000,),
        cluster=True,
    ),
    Case(
        "points",
        "2M random points into (4096, 4096) float32 in 1024x1024 chunks",
        "gather_nd",
        (4096, 4096),
        (1024, 1024),
        (2_000_000, 2),
    ),
    Case(
        "tokens_b1",
        "batch_dims=1: 512 of 2048 rows of 1 KiB per batch, 64 batches, 32 chunks",
        "gather_nd",
        (64, 2048, 256),
        (8, 512, 256),
        (64, 512, 1),
        batch_dims=1,
    ),
    Case(
        "zarr_rows",
        "200k random ids into a (1M, 64) float32 zarr store in 50k-row chunks, read each call",
        "gather",
        (1_000_000, 64),
        (50_000, 64),
        (200_000,),
        zarr=True,
    ),
    Case(
        "zarr_points",
        "500k random points into a (4096, 4096) float32 zarr store in 512x512 chunks, read "
        "each call",
        "gather_nd",
        (4096, 4096),
        (512, 512),
        (500_000, 2),
        zarr=True,
    ),
)


def build(case: Case, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    data = rng.random(case.data_shape, dtype=np.float32)
    if case.op == "gather":
        return data, rng.integers(0, case.data_shape[0], case.indices_shape)
    b = case.batch_dims
    k = case.indices_shape[-1]
    cols = [rng.integers(0, s, case.indices_shape[:-1]) for s in case.data_shape[b : b + k]]
    return data, np.stack(cols, axis=-1)


def dask_idioms(case: Case, x: Any, idx: np.ndarray) -> dict[str, Callable[[], Any]]:
    """dask's own ways to the same result, each a full call (graph and compute)."""
    if case.op == "gather":
        return {
            "dask vindex": lambda: x.vindex[idx].compute(),
            "dask x[ids]": lambda: x[idx].compute(),
            "dask da.take": lambda: da.take(x, idx, axis=0).compute(),
        }
    b = case.batch_dims
    if b == 0:
        cols = tuple(idx[..., a] for a in range(idx.shape[-1]))
        return {"dask vindex": lambda: x.vindex[cols].compute()}
    batch = np.arange(idx.shape[0]).reshape((-1,) + (1,) * (idx.ndim - 2))
    cols = (batch,) + tuple(idx[..., a] for a in range(idx.shape[-1]))
    return {"dask vindex": lambda: x.vindex[cols].compute()}


def zarr_idioms(case: Case, path: str, idx: np.ndarray) -> dict[str, Callable[[], Any]]:
    """zarr's own gathers on the store, read each call."""
    import zarr

    z = zarr.open_array(path, mode="r")
    if case.op == "gather":
        return {"zarr orthogonal": lambda: z.get_orthogonal_selection((idx, slice(None)))}
    cols = tuple(idx[..., a] for a in range(idx.shape[-1]))
    return {"zarr vindex": lambda: z.vindex[cols]}


def peak_growth(call: Callable[[], Any]) -> int | None:
    """How far one call raises the process's peak resident set (Linux: reset through
    ``/proc/self/clear_refs``), with ndgather's pool emptied first; ``None`` elsewhere."""

    def status(field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise OSError(field)

    try:
        gc.collect()
        ndgather.release_pool()
        before = status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
        result = call()
        peak = status("VmHWM")
        del result
    except OSError:
        return None
    return peak - before


def touched_bytes(case: Case, idx: np.ndarray, itemsize: int) -> int:
    """The bytes of the data chunks some index reads."""
    lead = idx[..., None] if case.op == "gather" else idx
    k = lead.shape[-1]
    b = case.batch_dims
    flat = lead.reshape(-1, k) // np.array(case.chunks[b : b + k])
    count = len(np.unique(flat, axis=0)) * max(
        1, math.prod(case.data_shape[:b]) // max(1, math.prod(case.chunks[:b]))
    )
    return count * math.prod(case.chunks) * itemsize


def ours(case: Case, x: Any, idx: np.ndarray) -> Callable[[], Any]:
    if case.op == "gather":
        return lambda: ngd.gather(x, idx).compute()
    return lambda: ngd.gather_nd(x, idx, case.batch_dims).compute()


def in_memory(case: Case, data: np.ndarray, idx: np.ndarray) -> Callable[[], Any]:
    if case.op == "gather":
        return lambda: ndgather.gather(data, idx)
    return lambda: ndgather.gather_nd(data, idx, case.batch_dims)


def measure(run: Run) -> list[dict[str, Any]]:
    with dask.config.set(scheduler="threads"), tempfile.TemporaryDirectory() as tmp:
        return run.each(run.cases, lambda case: measure_case(run, case, Path(tmp)))


def measure_case(run: Run, case: Case, workdir: Path) -> dict[str, Any]:
    rng = np.random.default_rng(SEED)
    data, idx = build(case, rng)
    x = da.from_array(data, chunks=case.chunks).persist()
    calls: dict[str, Callable[[], Any]] = {"ndgather": in_memory(case, data, idx)}
    calls["ndgather.dask"] = ours(case, x, idx)
    if case.zarr:
        path = str(workdir / f"{case.name}.zarr")
        da.from_array(data, chunks=case.chunks).to_zarr(path, overwrite=True)
        z = da.from_zarr(path)
        calls["ndgather.dask"] = ours(case, z, idx)
        calls["ndgather.dask persisted"] = ours(case, x, idx)
        idioms = {**zarr_idioms(case, path, idx), **dask_idioms(case, z, idx)}
    else:
        idioms = dask_idioms(case, x, idx)
    calls.update(idioms)
    cluster = client = None
    if case.cluster:
        import distributed

        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = distributed.Client(cluster, set_as_default=False)
        xc = client.persist(da.from_array(data, chunks=case.chunks))
        calls["ndgather.dask LocalCluster"] = lambda: client.compute(
            ngd.gather(xc, idx) if case.op == "gather" else ngd.gather_nd(xc, idx)
        ).result()
    try:
        want = calls["ndgather"]()
        want_shape = want.shape
        for name, call in calls.items():
            got = np.asarray(call())
            if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
                raise SystemExit(f"{case.name}: {name} disagrees with in-memory ndgather")
            del got
        del want
        timings = run_interleaved(
            {n: Call(c) for n, c in calls.items()}, run.rounds, run.min_sample_s
        )
        peak = peak_growth(calls["ndgather.dask"])
    finally:
        if client is not None and cluster is not None:
            client.close()
            cluster.close()
    medians = {n: t.median for n, t in timings.items()}
    best = min((n for n in medians if n.startswith(("dask ", "zarr "))), key=medians.__getitem__)
    out_bytes = math.prod(want_shape) * 4
    return {
        "name": case.name,
        "description": case.description,
        "data_shape": list(case.data_shape),
        "chunks": list(case.chunks),
        "indices_shape": list(case.indices_shape),
        "batch_dims": case.batch_dims,
        "medians_s": medians,
        "samples_s": {n: t.samples for n, t in timings.items()},
        "best_dask": best,
        "ratio_dask": medians["ndgather.dask"] / medians[best],
        "ratio_memory": medians["ndgather.dask"] / medians["ndgather"],
        "peak_bytes": peak,
        "peak_bound_bytes": touched_bytes(case, idx, 4) + 2 * out_bytes,
    }


def rows(records: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = [
        "case",
        "ndgather.dask",
        "best idiom (dask, zarr)",
        "in-memory ndgather",
        "ndgather.dask / dask",
        "ndgather.dask / in-memory",
        "peak memory / bound",
        "other",
    ]
    table = []
    for r in records:
        m = r["medians_s"]
        best = r["best_dask"]
        others = [
            f"{n.removeprefix('ndgather.dask ')} {fmt_seconds(t)}"
            for n, t in m.items()
            if n.startswith("ndgather.dask ")
        ]
        others += [
            f"{n.removeprefix('dask ')} {fmt_seconds(t)}"
            for n, t in m.items()
            if n.startswith(("dask ", "zarr ")) and n != best
        ]
        peak, bound = r.get("peak_bytes"), r.get("peak_bound_bytes")
        memory = (
            "-" if peak is None or not bound else f"{peak / 2**20:.0f} / {bound / 2**20:.0f} MiB"
        )

        table.append(
            [
                r["name"],
                fmt_seconds(m["ndgather.dask"]),
                f"{fmt_seconds(m[best])} {best.removeprefix('dask ')}",
                fmt_seconds(m["ndgather"]),
                fmt_ratio(r["ratio_dask"]),
                fmt_ratio(r["ratio_memory"]),
                memory,
                "; ".join(others) or "-",
            ]
        )
    return header, table


def text(results: dict[str, Any]) -> str:
    return text_table(*rows(results["cases"]))


def markdown(results: dict[str, Any]) -> str:
    cases = "; ".join(f"`{r['name']}`: {r['description']}" for r in results["cases"])
    return "\n\n".join(
        [
            markdown_table(*rows(results["cases"])),
            f"Median per call (graph, compute, result as a NumPy array) over {results['rounds']} "
            f"interleaved rounds, threaded scheduler; {cases}; " + provenance(results),
        ]
    )
