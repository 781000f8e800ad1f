"""How fast any gather from a compressed zarr store can be: the time to decode the chunks it
must read, against zarr's own gather and ``ndgather.dask``'s.

A gather from a store reads and decodes every chunk one of its indices falls in, and a zstd
chunk decodes from its start: no gather can take less than decoding the touched chunks,
however it copies. This suite builds the ``zarr_rows`` case of ``dask_gather.py`` (200k
random ids into a (1M, 64) float32 store in 50k-row chunks, zarr's default codecs (zstd in
zarr 3): every chunk is touched), then times each step, the median of ``--rounds`` (or
``--repeat``) calls in interleaved rounds (``timing.py``, one call a sample):

* ``read``: the chunk files read into memory (page cache);
* ``decode, 1 thread`` and ``decode, N threads``: those bytes decoded by the store's codec,
  one chunk a task on a pool of the machine's cores;
* ``zarr orthogonal``: ``zarr.Array.get_orthogonal_selection`` (read, decode, gather);
* ``ndgather.dask``: ``ndgather.dask.gather`` on ``da.from_zarr`` and ``.compute()``.

``decode, N threads / zarr orthogonal`` is the least that ratio of any gather can be on this
machine (``docs/performance.md``, section "dask").

    python -m benches zarr-floor            # the full case
    python -m benches zarr-floor --quick    # a small store (CI: runs and agrees)
"""

from __future__ import annotations

import argparse
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import ndgather
import ndgather.dask
import numcodecs
import numpy as np
import zarr

from .runner import Run
from .timing import Call, run_interleaved

ROUNDS = (5, 2)
MIN_SAMPLE_S = (0.0, 0.0)
PEERS = ("dask", "zarr", "numcodecs")


def decoder_of(z: Any) -> Any:
    """The store's compressor as a numcodecs codec: zarr v3's zstd codec, or zarr v2's
    ``compressor``."""
    for codec in getattr(z.metadata, "codecs", ()):
        if "zstd" in type(codec).__name__.lower():
            return numcodecs.Zstd(level=codec.level)
    compressor = getattr(z, "compressor", None)
    if compressor is None:
        raise SystemExit(f"no compressor found in the store's metadata: {z.metadata}")
    return compressor


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, dest="rounds", help="the same as --rounds")


def measure(run: Run) -> list[dict[str, Any]]:
    return run.each(["zarr_rows"], lambda name: measure_case(run, name))


def measure_case(run: Run, name: str) -> dict[str, Any]:
    rows, chunk, ids = (40_000, 2_000, 8_000) if run.quick else (1_000_000, 50_000, 200_000)
    threads = os.cpu_count() or 1
    rng = np.random.default_rng(20261124)
    data = rng.random((rows, 64), dtype=np.float32)
    idx = rng.integers(0, rows, ids)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "rows.zarr")
        da.from_array(data, chunks=(chunk, 64)).to_zarr(path, overwrite=True)
        z = zarr.open_array(path, mode="r")
        files = sorted(f for f in Path(path).rglob("*") if f.is_file())
        files = [f for f in files if f.name not in ("zarr.json", ".zarray", ".zattrs")]
        if len(files) != rows // chunk:
            raise SystemExit(f"expected {rows // chunk} chunk files, found {len(files)}")
        codec = decoder_of(z)
        raw = [f.read_bytes() for f in files]
        lazy = da.from_zarr(path)
        want = data[idx]
        got_zarr = z.get_orthogonal_selection((idx, slice(None)))
        with dask.config.set(scheduler="threads"):
            got_ours = ndgather.dask.gather(lazy, idx).compute()
        if not (np.array_equal(got_zarr, want) and np.array_equal(got_ours, want)):
            raise SystemExit("a gather differs from data[idx]")
        if codec.decode(raw[0]) != data[:chunk].tobytes():
            raise SystemExit("decoding the first chunk does not give its rows")
        with ThreadPoolExecutor(threads) as pool, dask.config.set(scheduler="threads"):
            steps = {
                "read": Call(lambda: [f.read_bytes() for f in files]),
                "decode, 1 thread": Call(lambda: [codec.decode(b) for b in raw]),
                f"decode, {threads} threads": Call(lambda: list(pool.map(codec.decode, raw))),
                "zarr orthogonal": Call(z.get_orthogonal_selection, ((idx, slice(None)),)),
                "ndgather.dask": Call(lambda: ndgather.dask.gather(lazy, idx).compute()),
            }
            # One call a sample: every step reads or decodes every chunk of the store.
            timings = run_interleaved(steps, run.rounds, run.min_sample_s)
    return {
        "name": name,
        "description": f"{ids:,} random ids into ({rows:,}, 64) float32, {len(raw)} zstd chunks "
        f"of {chunk:,} rows ({sum(map(len, raw)) / 2**20:.1f} MiB stored)",
        "medians_s": {step: timing.median for step, timing in timings.items()},
        "samples_s": {step: timing.samples for step, timing in timings.items()},
    }


def text(results: dict[str, Any]) -> str:
    lines = []
    for r in results["cases"]:
        lines.append(f"{r['description']}; medians of {results['rounds']} calls")
        zarr_s = r["medians_s"]["zarr orthogonal"]
        for step, s in r["medians_s"].items():
            lines.append(f"  {step:22s} {s * 1e3:9.1f} ms   {s / zarr_s:5.2f}x zarr orthogonal")
    return "\n".join(lines)
