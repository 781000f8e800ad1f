"""``ndgather.dask`` on zarr stores: every chunk an index touches is read from the store (and
decoded) exactly once per computation, untouched ones never, and reads run in parallel."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import ndgather
import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
ngd = pytest.importorskip("ndgather.dask")
zarr = pytest.importorskip("zarr")
storage = pytest.importorskip("zarr.storage")
if not hasattr(storage, "WrapperStore"):  # zarr 2
    pytest.skip("needs zarr 3's WrapperStore", allow_module_level=True)


class CountingStore(storage.WrapperStore):  # type: ignore[misc]
    """Counts the reads of each chunk key, and the most reads in flight at once (each read
    waits a little, so that reads that overlap are seen overlapping)."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.reads: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        if not key.startswith("c/"):  # metadata, not a chunk
            return await self._store.get(key, prototype, byte_range)
        with self.lock:
            self.reads[key] += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.02)
            return await self._store.get(key, prototype, byte_range)
        finally:
            with self.lock:
                self.in_flight -= 1


def _store(tmp_path: Any, data: np.ndarray, chunks: tuple[int, ...]) -> tuple[Any, Any]:
    path = str(tmp_path / "table.zarr")
    z = zarr.create_array(path, shape=data.shape, chunks=chunks, dtype=data.dtype)
    z[...] = data
    counting = CountingStore(storage.LocalStore(path, read_only=True))
    return zarr.open_array(counting, mode="r"), counting


def _chunk_key(*coords: int) -> str:
    return "c/" + "/".join(map(str, coords))


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_each_touched_chunk_is_read_once(tmp_path: Any, scheduler: str) -> None:
    rng = np.random.default_rng(0)
    data = rng.random((500, 40), dtype=np.float32)
    z, counting = _store(tmp_path, data, (50, 16))  # 10 x 3 chunks
    ids = rng.integers(0, 300, 5000)  # rows 0-299: chunks 0-5 of axis 0 only
    ids[::7] = -1  # row 499: chunk 9
    touched = {_chunk_key(r, c) for r in (*range(6), 9) for c in range(3)}
    # Several blocks of indices read the same chunks: in-memory indices cut in blocks.
    with dask.config.set({"array.chunk-size": "64KiB", "scheduler": scheduler}):
        for x in (z, da.from_zarr(z)):  # a zarr array as it is, or wrapped by dask
            counting.reads.clear()
            r = ngd.gather(x, ids)
            assert r.numblocks[0] > 1
            np.testing.assert_array_equal(r.compute(), ndgather.gather(data, ids))
            assert set(counting.reads) == touched
            assert set(counting.reads.values()) == {1}
            # points over both axes; dask indices (which read every chunk of the axes)
            counting.reads.clear()
            pts = np.stack([ids, rng.integers(-40, 40, ids.size)], axis=-1)
            lazy = da.from_array(pts, chunks=(1000, 2))
            np.testing.assert_array_equal(
                ngd.gather_nd(x, lazy).compute(), ndgather.gather_nd(data, pts)
            )
            assert len(counting.reads) == 30 and set(counting.reads.values()) == {1}


def test_chunks_are_read_in_parallel(tmp_path: Any) -> None:
    rng = np.random.default_rng(1)
    data = rng.random((400, 8), dtype=np.float32)
    z, counting = _store(tmp_path, data, (25, 8))
    ids = rng.integers(0, 400, 2000)
    with dask.config.set(scheduler="threads", num_workers=4):
        np.testing.assert_array_equal(ngd.gather(z, ids).compute(), ndgather.gather(data, ids))
    assert len(counting.reads) == 16
    assert counting.most_in_flight > 1
