"""How fast any gather from a compressed zarr store can be: the time to decode the chunks it
must read, against zarr's own gather and ``ndgather.dask``'s.

A gather from a store reads and decodes every chunk one of its indices falls in, and a zstd
chunk decodes from its start: no gather can take less than decoding the touched chunks,
however it copies. This script builds the ``zarr_rows`` case of ``dask_gather.py`` (200k
random ids into a (1M, 64) float32 store in 50k-row chunks, zarr's default codecs (zstd in
zarr 3): every chunk is touched), then times each step, the median of ``--repeat`` calls in
interleaved rounds (``timing.py``, one call a sample):

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
from collections.abc import Sequence
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

from .timing import Call, run_interleaved


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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small store, 2 calls each (CI)")
    p.add_argument("--repeat", type=int, default=None, help="calls timed each (default 5)")
    args = p.parse_args(argv)
    rows, chunk, ids = (40_000, 2_000, 8_000) if args.quick else (1_000_000, 50_000, 200_000)
    repeat = args.repeat or (2 if args.quick else 5)
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
            timings = run_interleaved(steps, repeat, 0.0)
    times = {name: timing.median * 1e3 for name, timing in timings.items()}
    size = sum(len(b) for b in raw) / 2**20
    print(
        f"{ids:,} random ids into ({rows:,}, 64) float32, {len(raw)} zstd chunks of {chunk:,} "
        f"rows ({size:.1f} MiB stored); medians of {repeat} calls; ndgather "
        f"{ndgather.__version__}, zarr {zarr.__version__}, numcodecs {numcodecs.__version__}"
    )
    zarr_ms = times["zarr orthogonal"]
    for name, ms in times.items():
        print(f"  {name:22s} {ms:9.1f} ms   {ms / zarr_ms:5.2f}x zarr orthogonal")
    return 0
