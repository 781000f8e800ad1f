"""ndgather.dask: exactly the in-memory functions, chunk by chunk, on every scheduler.

Skipped as a whole when dask is not installed (``pip install ".[dask]"``); the distributed
and zarr tests skip on their own when those are missing.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zlib
from collections.abc import Iterator
from typing import Any

import ndgather
import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
ngd = pytest.importorskip("ndgather.dask")

MODES = ("raise", "zero", "clip")
#: dask's version as (year, month); from 2024.12 it has task objects, and from 2025.5 it
#: culls a graph over a lazy array of 10^8 chunks without listing their keys.
DASK = tuple(int(p) for p in dask.__version__.split(".")[:2])


@pytest.fixture(autouse=True)
def _sync_scheduler() -> Iterator[None]:
    with dask.config.set(scheduler="sync"):
        yield


def _dtypes() -> list[np.dtype[Any]]:
    out = [
        np.dtype(t)
        for t in ("float32", "int8", "bool", "complex128", ">i4", "M8[s]", "U3", "S2", "O")
    ]
    out.append(np.dtype([("a", "<i2"), ("b", ">f8")]))
    try:
        import ml_dtypes

        out.append(np.dtype(ml_dtypes.bfloat16))
    except ImportError:
        pass
    return out


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    raw = rng.integers(1, 100, size=shape)
    if dtype.hasobject and not dtype.names:
        out = np.empty(shape, object)
        out.ravel()[:] = [f"s{v}" for v in raw.ravel()]
        return out
    if dtype.names:
        out = np.zeros(shape, dtype)
        out["a"], out["b"] = raw, raw / 7
        return out
    if dtype.kind in "US":
        return raw.astype(dtype)
    if dtype.kind == "M":
        return raw.astype("int64").astype(dtype)
    return raw.astype(dtype)


def _chunks(rng: np.random.Generator, size: int) -> tuple[int, ...]:
    """Random chunks of one axis: size-1 chunks, uneven ones, one whole chunk."""
    if size == 0:
        return (0,)
    kind = rng.integers(0, 3)
    if kind == 0:
        return (1,) * size
    if kind == 1:
        return (size,)
    cuts = sorted(set(rng.integers(1, size, size=rng.integers(0, size)).tolist()))
    bounds = [0, *cuts, size]
    return tuple(b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True))


def _indices(
    rng: np.random.Generator, sizes: list[int], shape: tuple[int, ...], mode: str
) -> np.ndarray:
    """Indices for axes of ``sizes`` (one per last-axis slot), in range for "raise"."""
    dtype = rng.choice(["int8", "uint16", "int32", ">i8", "uint64", "int64"])
    cols = []
    for s in sizes:
        if mode == "raise":
            lo, hi = (-s, s) if s else (0, 1)
        else:
            lo, hi = -s - 3, s + 3
        if dtype.startswith("u"):
            lo = 0
        cols.append(rng.integers(lo, max(hi, lo + 1), size=shape))
    return np.stack(cols, axis=-1).astype(dtype) if cols else np.zeros(shape + (0,), dtype)


def _as_dask(rng: np.random.Generator, a: np.ndarray) -> Any:
    return da.from_array(a, chunks=tuple(_chunks(rng, s) for s in a.shape))


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    if want.dtype.hasobject:
        assert got.tolist() == want.tolist()
    else:
        assert np.ascontiguousarray(got).tobytes() == want.tobytes()


def _same_error(got: BaseException, want: tuple[type[BaseException], str], lazy: bool) -> None:
    """The in-memory error; with dask indices and several bad indices, the one reported is
    the first of whichever index chunk fails first: same form, maybe another position."""
    assert type(got) is want[0]
    if lazy and issubclass(want[0], IndexError):
        pattern = re.sub(r"\\\[[^\]]*\\\]", r"\\[[^\\]]*\\]", re.escape(want[1]))
        pattern = re.sub(r"index\\ -?\d+", r"index\\ -?\\d+", pattern)
        assert re.fullmatch(pattern, str(got)), (str(got), want[1])
    else:
        assert str(got) == want[1]


def _expect(fn: Any, *args: Any, **kwargs: Any) -> tuple[type[BaseException], str] | None:
    try:
        fn(*args, **kwargs)
    except (IndexError, ValueError, TypeError) as exc:
        return type(exc), str(exc)
    return None


def _case_nd(rng: np.random.Generator, dtype: np.dtype[Any]) -> tuple[Any, ...]:
    r = int(rng.integers(1, 5))
    shape = tuple(
        int(rng.choice([0, 1, 2, 3, 5])) if rng.random() < 0.1 else int(rng.integers(1, 6))
        for _ in range(r)
    )
    b = int(rng.integers(0, min(2, r - 1) + 1))
    k = int(rng.integers(1, r - b + 1))
    tuple_shape = shape[:b] + tuple(int(rng.integers(0, 5)) for _ in range(rng.integers(0, 3)))
    mode = str(rng.choice(MODES))
    idx = _indices(rng, list(shape[b : b + k]), tuple_shape, mode)
    return shape, idx, b, mode


def _case_gather(rng: np.random.Generator, dtype: np.dtype[Any]) -> tuple[Any, ...]:
    r = int(rng.integers(1, 5))
    shape = tuple(int(rng.integers(0 if rng.random() < 0.1 else 1, 6)) for _ in range(r))
    axis = int(rng.integers(0, r))
    b = int(rng.integers(0, min(axis, 2) + 1))
    ishape = shape[:b] + tuple(int(rng.integers(0, 5)) for _ in range(rng.integers(0, 3)))
    mode = str(rng.choice(MODES))
    idx = _indices(rng, [shape[axis]], ishape, mode)[..., 0]
    if rng.random() < 0.3:
        axis -= r
    return shape, idx, axis, b, mode


@pytest.mark.parametrize("dtype", _dtypes(), ids=str)
@pytest.mark.parametrize("lazy", [False, True], ids=["numpy-indices", "dask-indices"])
def test_gather_nd_is_exact(dtype: np.dtype[Any], lazy: bool) -> None:
    rng = np.random.default_rng(zlib.crc32(f"nd {dtype} {lazy}".encode()))
    for _ in range(12):
        shape, idx, b, mode = _case_nd(rng, dtype)
        data = _values(rng, shape, dtype)
        want = _expect(ndgather.gather_nd, data, idx, b, mode=mode)
        x = _as_dask(rng, data)
        i = _as_dask(rng, idx) if lazy else idx
        if want is not None:  # an empty axis under "raise"/"clip"
            with pytest.raises(want[0]) as info:
                ngd.gather_nd(x, i, b, mode=mode).compute()
            _same_error(info.value, want, lazy)
            continue
        _same(
            ngd.gather_nd(x, i, b, mode=mode).compute(), ndgather.gather_nd(data, idx, b, mode=mode)
        )


@pytest.mark.parametrize("dtype", _dtypes(), ids=str)
@pytest.mark.parametrize("lazy", [False, True], ids=["numpy-indices", "dask-indices"])
def test_gather_is_exact(dtype: np.dtype[Any], lazy: bool) -> None:
    rng = np.random.default_rng(zlib.crc32(f"g {dtype} {lazy}".encode()))
    for _ in range(12):
        shape, idx, axis, b, mode = _case_gather(rng, dtype)
        data = _values(rng, shape, dtype)
        want = _expect(ndgather.gather, data, idx, axis, b, mode=mode)
        x = _as_dask(rng, data)
        i = _as_dask(rng, idx) if lazy else idx
        if want is not None:
            with pytest.raises(want[0]) as info:
                ngd.gather(x, i, axis, b, mode=mode).compute()
            _same_error(info.value, want, lazy)
            continue
        got = ngd.gather(x, i, axis, b, mode=mode)
        _same(got.compute(), ndgather.gather(data, idx, axis, b, mode=mode))


def test_chunks_follow_indices_and_data() -> None:
    data = np.arange(6 * 7 * 8).reshape(6, 7, 8)
    x = da.from_array(data, chunks=(2, 3, 5))
    idx = da.from_array(np.random.default_rng(0).integers(0, 6, (5, 4, 1)), chunks=(2, 3, 1))
    r = ngd.gather_nd(x, idx)
    assert r.chunks == ((2, 2, 1), (3, 1), (3, 3, 1), (5, 3))
    g = ngd.gather(x, np.array([[1, 2], [3, 4]]), axis=1)
    assert g.chunks[0] == (2, 2, 2) and g.chunks[-1] == (5, 3)
    assert isinstance(r._meta, np.ndarray) and r.dtype == data.dtype
    # batch axes: data and indices are brought to common chunks
    idx_b = da.from_array(np.zeros((6, 2, 1), np.int64), chunks=(3, 2, 1))
    assert ngd.gather_nd(x, idx_b, batch_dims=1).chunks[0] == (2, 1, 1, 2)


def test_names_are_deterministic() -> None:
    x = da.arange(100, chunks=10)
    a = ngd.gather(x, [3, 4, 99])
    assert a.name == ngd.gather(x, [3, 4, 99]).name
    assert a.name != ngd.gather(x, [3, 4, 98]).name
    assert a.name != ngd.gather(x, [3, 4, 99], mode="clip").name
    assert a.name.startswith("gather-")
    assert ngd.gather_nd(x, [[1]]).name.startswith("gather_nd-")


def test_indices_are_kept_as_they_were_at_call_time() -> None:
    """The graph keeps its own copy of writeable in-memory indices (any layout), and is
    named by their values: writing to the caller's array afterwards changes nothing."""
    data = np.arange(100) * 10
    x = da.from_array(data, chunks=10)
    contiguous = np.array([3, 4, 99])
    strided = np.array([[3, 0], [4, 0], [99, 0]])[:, 0]
    frozen = np.array([3, 4, 99])
    frozen.flags.writeable = False
    names = {ngd.gather(x, ids).name for ids in (contiguous, strided, frozen, [3, 4, 99])}
    assert len(names) == 1
    for ids in (contiguous, strided):
        r = ngd.gather(x, ids)
        ids[:] = 0
        _same(r.compute(), data[[3, 4, 99]])
        assert ngd.gather(x, ids).name not in names
    assert ngd.gather(x, np.array([3, 4, 99], np.int32)).name not in names


def test_numpy_data_and_lists_are_accepted() -> None:
    data = np.arange(12).reshape(3, 4)
    _same(ngd.gather_nd(data, [[2, -1]]).compute(), ndgather.gather_nd(data, [[2, -1]]))
    _same(ngd.gather(data.tolist(), 1, axis=1).compute(), ndgather.gather(data, 1, axis=1))


def _deps(array: Any) -> list[int]:
    """How many data chunks each task of ``array``'s own layer reads."""
    counts = []
    for task in array.dask.layers[array.name].values():
        if isinstance(task, tuple):  # dask < 2024.12: (fn, indices or their key, [keys], ...)
            counts.append(len([k for k in (task[1], *task[2]) if isinstance(k, tuple)]))
        else:
            counts.append(len(task.dependencies))
    return sorted(counts)


def test_graph_grows_with_touched_pairs_not_points() -> None:
    # 2M points over 16 chunks of a (4096, 4096) array: a few tasks, not thousands.
    x = da.zeros((4096, 4096), dtype=np.float32, chunks=1024)
    pts = np.random.default_rng(0).integers(0, 4096, (2_000_000, 2))
    r = ngd.gather_nd(x, pts)
    assert r.numblocks == (4,)  # in-memory indices: at most 2**19 tuples per chunk
    # one task per output block, each reading the 16 data chunks its points touch
    assert len(r.dask) - len(x.dask) == 4
    assert _deps(r) == [16] * 4
    # only the touched chunks: points in two chunks of one row of chunks
    near = np.stack([np.full(1000, 5), np.arange(1000) + 1000], axis=-1)
    r = ngd.gather_nd(x, near)
    assert len(r.dask) - len(x.dask) == 1 and _deps(r) == [2]
    # 10^8 chunks, two points: the graph (and the time to build it) follows the points' chunks
    huge = da.zeros((100_000, 100_000), dtype=np.uint8, chunks=10)
    r = ngd.gather_nd(huge, [[5, 7], [99_999, -3]])
    assert len(r.dask.layers[r.name]) == 1 and _deps(r) == [2]
    if DASK >= (2025, 5):  # older dask lists all 10^8 keys when it computes (minutes)
        _same(r.compute(), np.zeros(2, np.uint8))
    # dask indices: each output block reads every data chunk (known only at compute time)
    lazy = da.from_array(pts[:1000], chunks=(250, 2))
    r = ngd.gather_nd(x, lazy)
    assert len(r.dask.layers[r.name]) == 4 and _deps(r) == [16 + 1] * 4  # + its indices


def test_dask_indices_over_too_many_pairs_are_refused() -> None:
    x = da.zeros(1_000, chunks=1)
    ids = da.arange(1_000, chunks=1)
    with pytest.raises(ValueError, match=r"1000000 \(index chunk, data chunk\) pairs, more"):
        ngd.gather(x, ids)
    n = int(ngd.MAX_LAZY_PAIRS**0.5)
    _same(ngd.gather(da.arange(n, chunks=1), da.arange(n, chunks=1)).compute(), np.arange(n))


def test_private_dask_api_canary() -> None:
    # From dask 2024.12, ndgather.dask builds dask's task objects (dask._task_spec, private):
    # each output block a Task naming the data chunks it reads, which dask (from 2025.5)
    # culls without listing the keys of a lazy array of 10^8 chunks. Fails when a dask that
    # should take this way does not (the API moved or changed).
    huge = da.zeros((100_000, 100_000), dtype=np.uint8, chunks=10)
    r = ngd.gather_nd(huge, [[5, 7]])
    (task,) = r.dask.layers[r.name].values()
    if DASK < (2024, 12):
        assert isinstance(task, tuple)  # the tuple tasks of older dask
        return
    from dask._task_spec import Task

    assert isinstance(task, Task)
    assert task.dependencies == {(huge.name, 0, 0)}
    if DASK >= (2025, 5):
        _same(r.compute(), np.zeros(1, np.uint8))


class _Logged:
    """An array-like that records which blocks dask reads."""

    def __init__(self, a: np.ndarray) -> None:
        self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim
        self.reads: list[tuple[int, ...]] = []

    def __getitem__(self, key: Any) -> np.ndarray:
        self.reads.append(tuple(s.start for s in key))
        return self.a[key]


def test_untouched_chunks_are_never_read() -> None:
    src = _Logged(np.arange(100 * 6).reshape(100, 6))
    x = da.from_array(src, chunks=(10, 3), asarray=True)
    ids = np.array([5, 7, 95, -1, 3])
    _same(ngd.gather(x, ids).compute(), ndgather.gather(src.a, ids))
    assert sorted(set(src.reads)) == [(0, 0), (0, 3), (90, 0), (90, 3)]


def test_indices_errors_at_call_time() -> None:
    data = np.arange(24).reshape(2, 3, 4)
    x = da.from_array(data, chunks=(1, 2, 3))
    bad = [
        (ngd.gather_nd, ndgather.gather_nd, (np.array([[0, 1], [1, 3]]),), {}),
        (ngd.gather_nd, ndgather.gather_nd, (np.array([[0, -4], [-3, 0]]),), {}),
        (ngd.gather_nd, ndgather.gather_nd, (np.array([[0], [4]]),), {"batch_dims": 1}),
        (ngd.gather, ndgather.gather, (np.array([[1, 2], [5, 0]]),), {"axis": 2}),
        (ngd.gather, ndgather.gather, (np.array([[0, 9]]),), {"axis": 1, "batch_dims": 0}),
        (ngd.gather, ndgather.gather, (np.array([2**63], np.uint64),), {}),
        # shapes, attributes, dtypes, mode: raised at call time for dask indices too
        (ngd.gather_nd, ndgather.gather_nd, (np.zeros((2, 4), np.int64),), {}),
        (ngd.gather_nd, ndgather.gather_nd, (np.zeros((3, 1), np.int64),), {"batch_dims": 1}),
        (ngd.gather_nd, ndgather.gather_nd, (np.zeros((2, 1), np.int64),), {"batch_dims": 2}),
        (ngd.gather, ndgather.gather, (np.zeros(2, np.int64),), {"axis": 3}),
        (ngd.gather, ndgather.gather, (np.zeros((2, 2), np.int64),), {"axis": 1, "batch_dims": 2}),
        (ngd.gather, ndgather.gather, (np.zeros(2, np.float64),), {}),
        (ngd.gather, ndgather.gather, (np.zeros(2, bool),), {}),
        (ngd.gather, ndgather.gather, (np.zeros(2, np.int64),), {"mode": "wrap"}),
        (ngd.gather_nd, ndgather.gather_nd, (np.zeros((), np.int64),), {}),
        (ngd.gather_nd, ndgather.gather_nd, (np.zeros((2, 1), np.int64),), {"batch_dims": 1.0}),
        (ngd.gather, ndgather.gather, (np.zeros(2, np.int64),), {"axis": 1.5}),
        (ngd.gather, ndgather.gather, (np.zeros(2, np.int64),), {"mode": 3}),
    ]
    for ours, theirs, args, kwargs in bad:
        want = _expect(theirs, data, *args, **kwargs)
        assert want is not None, (theirs, args, kwargs)
        with pytest.raises(want[0]) as info:
            ours(x, *args, **kwargs)  # no compute: raised when the graph is built
        assert str(info.value) == want[1]
        if not issubclass(want[0], IndexError):
            with pytest.raises(want[0]) as info:
                ours(x, da.from_array(args[0]), **kwargs)
            assert str(info.value) == want[1]


def test_clip_into_an_empty_axis_raises_like_ndgather() -> None:
    data = np.zeros((3, 0, 2))
    want = _expect(ndgather.gather, data, [0], axis=1, mode="clip")
    assert want is not None and want[0] is ndgather.GatherIndexError
    with pytest.raises(IndexError, match="out of bounds"):
        ngd.gather(da.from_array(data), [0], axis=1, mode="clip")
    _same(
        ngd.gather(da.from_array(data), [0, 5], axis=1, mode="zero").compute(),
        ndgather.gather(data, [0, 5], axis=1, mode="zero"),
    )


def test_dask_indices_raise_at_compute_time_with_the_whole_position() -> None:
    data = np.arange(24).reshape(2, 3, 4)
    x = da.from_array(data, chunks=(1, 2, 3))
    idx = np.zeros((5, 3, 2), np.int64)
    idx[3, 2] = [1, 7]  # in the index chunk starting at (2, 2)
    want = _expect(ndgather.gather_nd, data, idx)
    assert want is not None and "indices[3, 2]" in want[1]
    lazy = ngd.gather_nd(x, da.from_array(idx, chunks=(2, 2, 2)))  # no error yet
    with pytest.raises(IndexError) as info:
        lazy.compute()
    assert str(info.value) == want[1]
    gidx = np.zeros((2, 6), np.int64)
    gidx[1, 4] = -5
    want = _expect(ndgather.gather, data, gidx, axis=2, batch_dims=1)
    assert want is not None
    lazy = ngd.gather(x, da.from_array(gidx, chunks=(1, 4)), axis=2, batch_dims=1)
    with pytest.raises(IndexError) as info:
        lazy.compute()
    assert str(info.value) == want[1]


def test_dask_indices_stay_lazy() -> None:
    def boom(block: np.ndarray) -> np.ndarray:
        raise RuntimeError("indices computed")

    idx = da.zeros((4, 1), dtype=np.int64, chunks=2).map_blocks(boom, dtype=np.int64)
    r = ngd.gather_nd(da.arange(10, chunks=3), idx)  # builds the graph only
    assert r.shape == (4,)
    with pytest.raises(RuntimeError, match="indices computed"):
        r.compute()


def test_threads_and_processes_schedulers() -> None:
    rng = np.random.default_rng(3)
    data = rng.random((300, 5), dtype=np.float32)
    ids = rng.integers(-300, 300, 1000)
    want = ndgather.gather(data, ids)
    x = da.from_array(data, chunks=(70, 5))
    for scheduler in ("threads", "processes"):
        with dask.config.set(scheduler=scheduler, num_workers=2):
            _same(ngd.gather(x, ids).compute(), want)
            _same(ngd.gather(x, da.from_array(ids, chunks=300)).compute(), want)


def test_import_ndgather_does_not_import_dask() -> None:
    code = (
        "import sys, ndgather, ndgather.onnx, ndgather.openvino, ndgather.bnns\n"
        "loaded = sorted(m for m in sys.modules if m == 'dask' or m.startswith('dask.'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",  # any free port: 8787 may be taken by another run
        memory_limit="1GiB",
    )
    client = distributed.Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def test_distributed_local_cluster(cluster_client: Any) -> None:
    rng = np.random.default_rng(4)
    data = rng.random((2000, 8), dtype=np.float32)
    x = da.from_array(data, chunks=(300, 8))
    ids = rng.integers(-2000, 2000, 5000)
    want = ndgather.gather(data, ids)
    got = cluster_client.compute(ngd.gather(x, ids)).result(timeout=60)
    _same(got, want)
    lazy_ids = da.from_array(ids, chunks=1500)
    got = cluster_client.compute(ngd.gather(x, lazy_ids, mode="clip")).result(timeout=60)
    _same(got, ndgather.gather(data, ids, mode="clip"))
    pts = np.stack([rng.integers(0, 2000, 3000), rng.integers(-8, 8, 3000)], axis=-1)
    got = cluster_client.compute(ngd.gather_nd(x, pts)).result(timeout=60)
    _same(got, ndgather.gather_nd(data, pts))
    bad = ids.copy()
    bad[4321] = 2000
    with pytest.raises(IndexError, match=r"at indices\[4321\]") as info:
        cluster_client.compute(ngd.gather(x, da.from_array(bad, chunks=1500))).result(timeout=60)
    # shipped back from a worker: the class and its attributes survive
    assert type(info.value) is ndgather.GatherIndexError
    assert (info.value.value, info.value.position, info.value.data_shape) == (
        2000,
        (4321,),
        (2000, 8),
    )


def test_zarr_store(tmp_path: Any) -> None:
    pytest.importorskip("zarr")
    rng = np.random.default_rng(5)
    data = rng.random((500, 40, 3), dtype=np.float32)
    path = str(tmp_path / "table.zarr")
    da.from_array(data, chunks=(64, 16, 3)).to_zarr(path)
    x = da.from_zarr(path)
    assert x.chunks[0][0] == 64
    ids = rng.integers(0, 500, 2000)
    _same(ngd.gather(x, ids).compute(), ndgather.gather(data, ids))
    pts = np.stack([rng.integers(0, 500, 999), rng.integers(0, 40, 999)], axis=-1)
    _same(ngd.gather_nd(x, pts).compute(), ndgather.gather_nd(data, pts))


@pytest.mark.parametrize("mode", MODES)
def test_index_dtypes_over_uneven_chunks(mode: str) -> None:
    # Index dtypes and huge unsigned values over uneven chunks: same results.
    rng = np.random.default_rng(6)
    data = rng.random((50, 7, 3))
    x = da.from_array(data, chunks=(9, 2, 3))
    lo, hi = (-50, 50) if mode == "raise" else (-60, 60)
    for dtype in ("int8", "int64", "uint16", "uint64"):
        pts = np.stack([rng.integers(lo, hi, 300), rng.integers(-7, 7, 300)], -1)
        if dtype.startswith("u"):
            pts = (pts % np.array([50, 7])).astype(dtype)
            if mode != "raise":
                pts[::7, 0] = 2**63 + 5 if dtype == "uint64" else 60000
        pts = pts.astype(dtype)
        for i in (pts, da.from_array(pts, chunks=(70, 2))):
            _same(
                ngd.gather_nd(x, i, mode=mode).compute(), ndgather.gather_nd(data, pts, mode=mode)
            )
    if mode != "zero":
        with pytest.raises(IndexError) as info:
            ngd.gather(x, [3, -51], mode="raise")
        assert str(info.value) == _expect(ndgather.gather, data, [3, -51])[1]  # type: ignore[index]


def test_docstring_examples() -> None:
    import doctest

    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = [t for fn in (ngd.gather, ngd.gather_nd) for t in finder.find(fn, module=ngd)]
    assert len(tests) == 2
    for test in tests:
        runner.run(test)
    assert runner.failures == 0


def test_readme_example_runs() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Larger than memory: dask", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert code, "no example in the README's dask section"
    exec(compile(code[0], "README.md", "exec"), {})


def test_large_blocks_come_from_the_pool() -> None:
    # Output blocks above 1 MiB live in ndgather's pool: same bytes, twice in a row.
    rng = np.random.default_rng(7)
    data = rng.random((20_000, 64), dtype=np.float32)
    x = da.from_array(data, chunks=(3_000, 64))
    for _ in range(2):
        ids = rng.integers(-20_000, 20_000, 30_000)
        _same(ngd.gather(x, ids).compute(), ndgather.gather(data, ids))
    rec = np.zeros(5_000, [("a", "<i8"), ("b", ">f4", (40,))])
    rec["a"] = np.arange(5_000)
    ids = rng.integers(0, 5_000, 9_000)
    _same(ngd.gather(da.from_array(rec, chunks=700), ids).compute(), ndgather.gather(rec, ids))
