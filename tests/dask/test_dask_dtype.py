"""``ndgather.dask`` with ``dtype=``: each block converted as it is gathered, equal to the
in-memory ``dtype=`` (and so to ``.astype``), with its refusals and error order."""

from __future__ import annotations

from typing import Any

import ndgather
import numpy as np
import pytest
from helpers import random_values as table
from reference import assert_same

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
ngd = pytest.importorskip("ndgather.dask")

PAIRS = [
    ("float16", "float32"),
    ("int8", "float32"),
    ("uint16", "int64"),
    (">f4", "<f8"),
    ("float32", "float32"),  # nothing to convert: data's dtype kept
]


@pytest.fixture(autouse=True)
def _sync_scheduler() -> Any:
    with dask.config.set(scheduler="sync"):
        yield


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("mode", ["raise", "zero", "clip"])
def test_gather_nd_converts_as_in_memory(pair: tuple[str, str], mode: str) -> None:
    src, dst = pair
    data = table((30, 7, 6), src)
    x = da.from_array(data, chunks=(8, 3, 4))
    idx = np.array([[29, 6], [0, 0], [13, 2], [7, 5]])
    if mode != "raise":
        idx = np.concatenate([idx, [[30, 1], [-31, 9]]])
    got = ngd.gather_nd(x, idx, mode=mode, dtype=dst)
    want = ndgather.gather_nd(data, idx, mode=mode, dtype=dst)
    assert got.dtype == want.dtype
    assert_same(got.compute(), want)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_gather_converts_as_in_memory(pair: tuple[str, str]) -> None:
    src, dst = pair
    data = table((5, 40, 3), src)
    x = da.from_array(data, chunks=(2, 9, 2))
    idx = np.array([[39, 0, 7], [1, 1, 38]])
    got = ngd.gather(x, idx, axis=1, dtype=np.dtype(dst))
    want = ndgather.gather(data, idx, axis=1, dtype=dst)
    assert got.dtype == want.dtype
    assert_same(got.compute(), want)
    # Lazy indices too, and a transposed (strided) array.
    lazy = ngd.gather(x.T, da.from_array(idx[0], chunks=2), axis=1, dtype=dst)
    assert_same(lazy.compute(), ndgather.gather(data.T, idx[0], axis=1, dtype=dst))


def test_the_graph_is_named_by_the_dtype() -> None:
    x = da.from_array(table((20, 4), "int16"), chunks=5)
    a = ngd.gather(x, [3, 1], dtype=np.float32)
    b = ngd.gather(x, [3, 1], dtype=np.float64)
    c = ngd.gather(x, [3, 1])
    assert len({a.name, b.name, c.name}) == 3
    assert (a.dtype, b.dtype, c.dtype) == (np.float32, np.float64, np.int16)


def test_refusals_are_the_in_memory_type_errors() -> None:
    data = table((10, 4), "float32")
    x = da.from_array(data, chunks=4)
    for bad in (np.float16, np.int64, "U3"):
        with pytest.raises(TypeError) as mem:
            ndgather.gather(data, [1], dtype=bad)
        with pytest.raises(TypeError) as lazy:
            ngd.gather(x, [1], dtype=bad)  # when the graph is made, not when computed
        assert str(lazy.value) == str(mem.value)
    # The cast is refused before the shapes are checked, as in memory.
    with pytest.raises(TypeError, match="as dtype float16"):
        ngd.gather(x, [1], axis=5, dtype=np.float16)


def test_threaded_scheduler() -> None:
    data = table((64, 16), "float16")
    x = da.from_array(data, chunks=(16, 8))
    ids = np.random.default_rng(2).integers(0, 64, 500)
    with dask.config.set(scheduler="threads"):
        got = ngd.gather(x, ids, dtype=np.float32).compute()
    assert_same(got, data[ids].astype(np.float32))
