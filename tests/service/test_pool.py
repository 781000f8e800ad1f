"""Large results live in pooled buffers: they must behave as ordinary new arrays."""

from __future__ import annotations

import gc
import os
from typing import Any

import ndgather
import numpy as np
import pytest
from helpers import UNDER_ASAN, make_and_free_large_results, rss_bytes


def _large_case() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    data = rng.random((4096, 64), dtype=np.float32)  # rows of 256 bytes
    idx = rng.integers(-4096, 4096, size=(8192, 1))  # 2 MiB of output
    return data, idx


def test_large_results_are_fresh_writable_c_arrays() -> None:
    data, idx = _large_case()
    want = data[idx[:, 0]]
    results = [ndgather.gather_nd(data, idx) for _ in range(3)]
    for r in results:
        assert r.flags.c_contiguous and r.flags.writeable and r.flags.aligned
        np.testing.assert_array_equal(r, want)
        assert not np.shares_memory(r, data)
    # Three live results: three distinct buffers.
    assert len({r.ctypes.data for r in results}) == 3


def test_freed_buffers_are_reused_and_overwritten_correctly() -> None:
    data, idx = _large_case()
    addresses = set()
    for step in range(20):
        source = data if step % 2 else data[::-1]
        r = ndgather.gather_nd(source, idx)
        np.testing.assert_array_equal(r, source[idx[:, 0]])
        addresses.add(r.ctypes.data)
        del r
        gc.collect()
    # Twenty results, a handful of buffers (others may sit in the pool).
    assert len(addresses) <= 4


def test_views_keep_a_pooled_buffer_alive() -> None:
    data, idx = _large_case()
    view = ndgather.gather_nd(data, idx)[10:20]
    gc.collect()
    # A new result must not take the buffer the view still uses.
    other = ndgather.gather_nd(data, idx[::-1])
    assert not np.shares_memory(view, other)
    np.testing.assert_array_equal(view, data[idx[10:20, 0]])
    view[:] = 0  # still writable memory of its own
    np.testing.assert_array_equal(other, data[idx[::-1, 0]])


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_release_pool_returns_the_memory_to_the_system() -> None:
    ndgather.release_pool()
    baseline = rss_bytes()
    make_and_free_large_results(4, 4096)  # 32 MiB, then smaller
    held = ndgather.pool_bytes()
    assert held >= 32 << 20
    if not UNDER_ASAN:  # there, the RSS measures ASan's allocator (see helpers.UNDER_ASAN)
        assert rss_bytes() - baseline >= held * 0.9  # the pool's pages are resident
    assert ndgather.release_pool() == held
    assert ndgather.pool_bytes() == 0
    if not UNDER_ASAN:
        assert rss_bytes() - baseline < 8 << 20


def test_the_pool_limit_bounds_what_is_kept() -> None:
    limit = ndgather.get_pool_limit()
    try:
        ndgather.release_pool()
        ndgather.set_pool_limit(20 << 20)
        assert ndgather.get_pool_limit() == 20 << 20
        make_and_free_large_results(4, 2048)
        assert 0 < ndgather.pool_bytes() <= 20 << 20
        ndgather.set_pool_limit(0)  # off: everything goes, nothing new is kept
        assert ndgather.pool_bytes() == 0
        make_and_free_large_results(2, 2048)
        assert ndgather.pool_bytes() == 0
        with pytest.raises(ValueError, match="limit"):
            ndgather.set_pool_limit(-1)
        with pytest.raises(ValueError, match="nbytes"):
            ndgather.set_pool_limit(2**64)
    finally:
        ndgather.set_pool_limit(limit)


@pytest.mark.parametrize("offset", [0, 16, 32, 48, 4, 8])
def test_streamed_results_start_where_data_does_in_a_line(offset: int) -> None:
    # A streamed row's loads and stores line up only when the result lies in
    # its lines as `data` does (docs/performance.md): a result the copy
    # streams starts `data`'s offset past a line, rounded down to 16 bytes,
    # where the machine's model says so (docs/architecture.md); any other
    # large result starts on a line.
    tuning = ndgather._core._tuning()
    rows = max(tuning["stream_min_out_bytes"], 1 << 20) // 256
    rng = np.random.default_rng(6)
    data = rng.random((4096, 64), dtype=np.float32)
    raw = np.empty(data.nbytes + 128, dtype=np.uint8)
    start = -raw.ctypes.data % 64 + offset
    placed = raw[start : start + data.nbytes].view(np.float32).reshape(data.shape)
    placed[...] = data
    for n, streamed in ((rows, True), (8192, False)):
        ids = rng.integers(0, 4096, size=n)
        want_offset = offset // 16 * 16 if streamed and tuning["results_lie_as_data"] else 0
        for r in (ndgather.gather_nd(placed, ids[:, None]), ndgather.gather(placed, ids, axis=0)):
            assert r.ctypes.data % 64 == want_offset, (n, r.nbytes)
            assert r.flags.aligned and r.flags.c_contiguous and r.flags.writeable
            np.testing.assert_array_equal(r, data[ids])
            del r


@pytest.mark.parametrize("dtype, width", [(np.float32, 32), (np.float32, 64), (np.float64, 64)])
def test_streamed_out_at_any_offset_in_a_line_from_data_at_any(dtype: Any, width: int) -> None:
    # Rows streamed into an `out=` that lies otherwise in its lines than
    # `data` are loaded a line at a time and shifted into place where the
    # machine's model says so (`loads_by_line`, docs/architecture.md), and
    # go out in whole lines only, each row's end joined with the next row's
    # start, into an `out=` off a line (`carries_lines`): every pair of
    # offsets, the 4-byte ones included, gives NumPy's rows.
    tuning = ndgather._core._tuning()
    itemsize = np.dtype(dtype).itemsize
    rows = max(tuning["stream_min_out_bytes"], 1 << 20) // (width * itemsize)
    rng = np.random.default_rng(7)
    data = rng.random((4096, width)).astype(dtype)
    ids = rng.integers(0, 4096, size=rows)
    ids[:2] = [0, 4095]  # the rows at both ends of `data`
    want = data[ids]

    def placed(shape: tuple[int, ...], offset: int) -> Any:
        raw = np.empty(int(np.prod(shape)) * itemsize + 128, dtype=np.uint8)
        start = -raw.ctypes.data % 64 + offset
        return raw[start : start + int(np.prod(shape)) * itemsize].view(dtype).reshape(shape)

    for data_offset in (0, 16, 32, 48, 4):
        table = placed(data.shape, data_offset)
        table[...] = data
        for out_offset in (0, 16, 32, 48):
            out = placed(want.shape, out_offset)
            out.fill(-1)
            ndgather.gather_nd(table, ids[:, None], out=out)
            np.testing.assert_array_equal(out, want, err_msg=f"{data_offset} {out_offset}")
            out.fill(-1)
            ndgather.gather(table, ids, axis=0, out=out, mode="clip")
            np.testing.assert_array_equal(out, want, err_msg=f"{data_offset} {out_offset}")
