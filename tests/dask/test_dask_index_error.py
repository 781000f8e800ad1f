"""``ndgather.dask`` raises ``ndgather.GatherIndexError`` with the in-memory function's
message and attributes: positions in the whole ``indices`` and the whole ``data``'s shape,
with NumPy indices (at call time) and dask indices (at compute time), checked against an
independent NumPy search for the bad index."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import ndgather
import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
ngd = pytest.importorskip("ndgather.dask")


@pytest.fixture(autouse=True)
def _sync_scheduler() -> Iterator[None]:
    with dask.config.set(scheduler="sync"):
        yield


def _first_bad(values: np.ndarray[Any, Any], sizes: Any) -> tuple[int, ...]:
    v = values.astype(object)
    s = np.broadcast_to(np.asarray(sizes, dtype=object), v.shape)
    return tuple(int(p) for p in np.argwhere((v < -s) | (v >= s))[0])


def _same_as_in_memory(got: BaseException, want: BaseException) -> None:
    assert type(got) is type(want) is ndgather.GatherIndexError
    assert str(got) == str(want)
    assert got.__dict__ == want.__dict__
    copy = pickle.loads(pickle.dumps(got))
    assert (type(copy), str(copy), copy.__dict__) == (type(got), str(got), got.__dict__)


def _raised(fn: Any, *args: Any, **kwargs: Any) -> ndgather.GatherIndexError:
    with pytest.raises(ndgather.GatherIndexError) as info:
        fn(*args, **kwargs)
    return info.value


def test_gather_nd_one_bad_tuple_in_a_later_index_chunk() -> None:
    data = np.zeros((6, 4, 3), np.float32)
    x = da.from_array(data, chunks=(2, 3, 3))
    idx = np.zeros((5, 7, 2), np.int64)
    idx[4, 5] = [-2, 4]
    pos = _first_bad(idx, data.shape[:2])
    assert pos == (4, 5, 1)
    want = _raised(ndgather.gather_nd, data, idx)
    assert want.position == pos and want.data_shape == data.shape
    _same_as_in_memory(_raised(ngd.gather_nd, x, idx), want)  # at call time
    lazy = ngd.gather_nd(x, da.from_array(idx, chunks=(2, 3, 2)))  # no error yet
    _same_as_in_memory(_raised(lazy.compute), want)


def test_gather_with_batch_dims_and_negative_axis() -> None:
    data = np.zeros((3, 4, 5, 2), np.int16)
    x = da.from_array(data, chunks=(1, 2, 2, 1))
    idx = np.zeros((3, 6), np.int32)
    idx[2, 3] = -6
    pos = _first_bad(idx, data.shape[2])
    assert pos == (2, 3)
    want = _raised(ndgather.gather, data, idx, axis=-2, batch_dims=1)
    assert (want.position, want.axis, want.axis_size, want.data_shape) == (pos, 2, 5, data.shape)
    _same_as_in_memory(_raised(ngd.gather, x, idx, axis=-2, batch_dims=1), want)
    lazy = ngd.gather(x, da.from_array(idx, chunks=(1, 4)), axis=-2, batch_dims=1)
    _same_as_in_memory(_raised(lazy.compute), want)


def test_numpy_indices_report_the_first_bad_index_of_the_whole() -> None:
    data = np.zeros((10, 3))
    x = da.from_array(data, chunks=(3, 3))
    idx = np.arange(40) % 10
    idx[[17, 31]] = [12, -11]
    want = _raised(ndgather.gather, data, idx)
    assert want.position == _first_bad(idx, 10) == (17,)
    _same_as_in_memory(_raised(ngd.gather, x, idx), want)


def test_broadcast_indices() -> None:
    data = np.zeros((4, 3))
    x = da.from_array(data, chunks=(2, 2))
    idx = np.broadcast_to(np.array([0, 9, 1])[:, None], (3, 50))  # stride 0 inside
    want = _raised(ndgather.gather, data, idx)
    assert want.position == _first_bad(idx, 4) == (1, 0)
    _same_as_in_memory(_raised(ngd.gather, x, idx), want)
    # Several bad indices and dask indices: the first of whichever index chunk fails first.
    got = _raised(ngd.gather(x, da.from_array(idx, chunks=(1, 20))).compute)
    assert type(got) is ndgather.GatherIndexError
    assert got.position[0] == 1 and idx[got.position] == got.value == 9
    assert (got.axis, got.axis_size, got.data_shape) == (0, 4, data.shape)
    assert f"at indices[{', '.join(map(str, got.position))}]" in str(got)
