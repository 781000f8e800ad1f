"""Gathers from arrays in a file mapping (issue 30): np.memmap, np.load(mmap_mode="r"),
np.frombuffer(mmap.mmap). The pages a call reads are brought in first: the results, errors,
`out=` and modes are those of the same gather from memory; a file shorter than its mapping is
an OSError naming the file with `out=` untouched; the mapping cannot be closed under a gather;
a deleted file still serves; a fork during the reads leaves a child that gathers; a cold
gather leaves only the pages it touched in memory (no read-around)."""

from __future__ import annotations

import ctypes
import errno
import gc
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ndgather
import ndgather.onnx
import ndgather.openvino
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "posix_fadvise"), reason="needs posix_fadvise (Linux)"
)

PAGE = mmap.PAGESIZE
ROWS, COLS = 2048, 1024  # float32: 4 KiB rows, an 8 MiB file
_libc = ctypes.CDLL(None, use_errno=True)


def drop_cache(path: Path) -> None:
    """Evicts the file's clean pages (no mapping of them may be touched)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident(arr: np.ndarray) -> int:
    """The pages of the mapping under `arr` that are in memory (mincore)."""
    start = arr.ctypes.data - arr.ctypes.data % PAGE
    n = (arr.ctypes.data + arr.nbytes - start + PAGE - 1) // PAGE
    vec = (ctypes.c_ubyte * n)()
    rc = _libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(n * PAGE), vec)
    assert rc == 0, os.strerror(ctypes.get_errno())
    return sum(b & 1 for b in vec)


@pytest.fixture
def table_file(tmp_path: Path) -> Path:
    path = tmp_path / "table.f32"
    np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS).tofile(path)
    return path


@pytest.fixture
def expected() -> np.ndarray:
    return np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)


@pytest.fixture(autouse=True)
def prefault_on() -> Iterator[None]:
    ndgather.set_prefault(True)
    yield
    ndgather.set_prefault(True)


def open_memmap(path: Path) -> np.ndarray:
    return np.memmap(path, dtype=np.float32, mode="r", shape=(ROWS, COLS))


def open_npy(path: Path) -> np.ndarray:
    npy = path.with_suffix(".npy")
    if not npy.exists():
        np.save(npy, np.fromfile(path, dtype=np.float32).reshape(ROWS, COLS))
    return np.load(npy, mmap_mode="r")


def open_frombuffer(path: Path) -> np.ndarray:
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(m, dtype=np.float32).reshape(ROWS, COLS)


OPENERS = [open_memmap, open_npy, open_frombuffer]
IDS = np.array([5, 2047, 0, 1000, 5, 77, 1999], dtype=np.int64)


def cold(path: Path, opener: Callable[[Path], np.ndarray]) -> np.ndarray:
    """A fresh mapping of `path` with none of its pages in memory (skip where the system
    keeps them)."""
    gc.collect()
    arr = opener(path)  # opening reads a header (np.load) and maps, touching no page
    drop_cache(path if opener is not open_npy else path.with_suffix(".npy"))
    if resident(arr) > 1:
        pytest.skip("the page cache kept the file's pages (tmpfs?)")
    return arr


@pytest.mark.parametrize("opener", OPENERS)
@pytest.mark.parametrize("on", [True, False])
def test_cold_gathers_equal_the_gathers_from_memory(
    table_file: Path, expected: np.ndarray, opener: Any, on: bool
) -> None:
    ndgather.set_prefault(on)
    assert ndgather.get_prefault() is on
    open_npy(table_file)
    calls: list[Callable[[np.ndarray], np.ndarray]] = [
        lambda d: ndgather.gather(d, IDS),
        lambda d: ndgather.gather(d, IDS.reshape(1, -1, 1)[..., 0], axis=0),
        lambda d: ndgather.gather_nd(d, IDS[:, None]),
        lambda d: ndgather.gather_nd(d, np.stack([IDS, IDS % COLS], axis=1)),
        lambda d: ndgather.gather(d, np.array([3, -1, 5000]), mode="clip"),
        lambda d: ndgather.gather(d, np.array([3, -1, 5000]), mode="zero"),
        lambda d: ndgather.gather(d, IDS, dtype=np.float64),
        lambda d: ndgather.gather(d[:, ::3], IDS),
        lambda d: ndgather.gather(d[::-2], IDS // 2),
        lambda d: ndgather.gather(d, IDS % COLS, axis=1),
        lambda d: ndgather.prepare_gather(d.shape, IDS)(d),
        lambda d: ndgather.prepare_gather(d.shape, IDS, mode="zero")(d),
        lambda d: ndgather.onnx.gather_13(d, IDS),
        lambda d: ndgather.onnx.gather_nd_13(d, IDS[:, None]),
        lambda d: ndgather.openvino.gather_8(d, np.array([1, 4096, -1]), axis=0),
    ]
    for i, call in enumerate(calls):
        got = call(cold(table_file, opener))
        want = call(expected)
        assert got.dtype == want.dtype and np.array_equal(got, want), i


def test_out_and_errors_are_those_of_memory(table_file: Path, expected: np.ndarray) -> None:
    data = cold(table_file, open_memmap)
    out = np.zeros((len(IDS), COLS), np.float32)
    assert ndgather.gather(data, IDS, out=out) is out
    assert np.array_equal(out, expected[IDS])
    del data  # its pages stay in memory while it maps them
    bad = np.array([1, 2, ROWS + 3])
    with pytest.raises(ndgather.GatherIndexError) as mapped:
        ndgather.gather(cold(table_file, open_memmap), bad)
    with pytest.raises(ndgather.GatherIndexError) as memory:
        ndgather.gather(expected, bad)
    assert str(mapped.value) == str(memory.value)


def test_block_quantized_from_a_mapping(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 256, (512, 2048), dtype=np.uint8)
    scales = rng.random((512, 4096 // 128), dtype=np.float32)
    for name, a in (("codes", codes), ("scales", scales)):
        a.tofile(tmp_path / name)
    ids = np.array([7, 511, 0, 300], dtype=np.int64)
    want = ndgather.onnx.ms_gather_block_quantized_1(codes, ids, scales)
    drop_cache(tmp_path / "codes")
    drop_cache(tmp_path / "scales")
    mcodes = np.memmap(tmp_path / "codes", np.uint8, "r", shape=codes.shape)
    mscales = np.memmap(tmp_path / "scales", np.float32, "r", shape=scales.shape)
    got = ndgather.onnx.ms_gather_block_quantized_1(mcodes, ids, mscales)
    assert np.array_equal(got, want)
    os.truncate(tmp_path / "scales", PAGE)
    with pytest.raises(OSError) as e:
        ndgather.onnx.ms_gather_block_quantized_1(mcodes, ids, mscales)
    assert e.value.errno == errno.EFAULT and e.value.filename == str(tmp_path / "scales")


@pytest.mark.parametrize("on", [True, False])
def test_cold_gather_reads_only_the_pages_it_touches(tmp_path: Path, on: bool) -> None:
    # 32 MiB, four times the default read-around of a fault (8 MiB here).
    path = tmp_path / "big.f32"
    np.arange(8192 * 1024, dtype=np.float32).tofile(path)
    data = np.memmap(path, dtype=np.float32, mode="r", shape=(8192, 1024))
    drop_cache(path)
    if resident(data) > 1:
        pytest.skip("the page cache kept the file's pages (tmpfs?)")
    ndgather.set_prefault(on)
    ids = np.arange(0, 8192, 256)  # 32 rows of one page each, 1 MiB apart
    assert np.array_equal(ndgather.gather(data, ids), np.asarray(data)[ids])
    if on:
        # The rows' pages and the table's last page (the test for a cut file): no read-around.
        assert resident(data) <= len(ids) + 1
    else:
        # Each fault reads around it (the kernel's read-ahead): what the prefault avoids.
        assert resident(data) > len(ids) + 1


def test_warm_calls_read_nothing_new(table_file: Path, expected: np.ndarray) -> None:
    data = cold(table_file, open_memmap)
    ids = np.arange(0, ROWS, 16)
    for _ in range(3):
        assert np.array_equal(ndgather.gather(data, ids), expected[ids])
    assert resident(data) <= len(ids) + 1


@pytest.mark.parametrize("opener", OPENERS)
def test_a_file_cut_below_its_mapping_is_an_oserror(table_file: Path, opener: Any) -> None:
    data = opener(table_file)
    npy = table_file.with_suffix(".npy")
    path = npy if opener is open_npy else table_file
    ndgather.gather(data, IDS)  # warm, then cut: the rows asked for are still in the file
    os.truncate(path, os.path.getsize(path) - 2 * PAGE)
    out = np.full((3, COLS), -7, np.float32)
    calls: list[Callable[[], object]] = [
        lambda: ndgather.gather(data, np.array([0, 1, 2]), out=out),
        lambda: ndgather.gather_nd(data, np.array([[0], [1], [2]]), out=out),
        lambda: ndgather.prepare_gather(data.shape, np.array([0, 1, 2]))(data, out=out),
        lambda: ndgather.onnx.gather_11(data, np.array([0, 1, 2])),
    ]
    for call in calls:
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EFAULT
        assert "past the end of the mapped file" in str(e.value)
        if opener is not open_frombuffer:
            assert e.value.filename == str(path)
        assert (out == -7).all()


def test_a_file_cut_before_mapping_is_refused_by_numpy(table_file: Path) -> None:
    os.truncate(table_file, PAGE)
    with pytest.raises(ValueError):
        open_memmap(table_file)


def test_the_mapping_cannot_close_under_a_gather(table_file: Path, expected: np.ndarray) -> None:
    data = open_memmap(table_file)
    ids = np.random.default_rng(1).integers(0, ROWS, 60_000)
    started, done = threading.Event(), threading.Event()
    results: list[np.ndarray] = []

    def gather() -> None:
        started.set()
        while not done.is_set():
            results.append(ndgather.gather(data, ids))

    worker = threading.Thread(target=gather)
    worker.start()
    started.wait()
    refused = 0
    for _ in range(200):
        try:
            data._mmap.close()  # type: ignore[attr-defined]
        except BufferError:
            refused += 1
            continue
        break  # closed between two calls: the next call must refuse it
    done.set()
    worker.join()
    assert refused > 0
    assert all(np.array_equal(r, expected[ids]) for r in results)


def test_a_closed_mapping_is_a_valueerror(table_file: Path) -> None:
    data = open_memmap(table_file)
    data._mmap.close()  # type: ignore[attr-defined]  # NumPy would crash reading it
    with pytest.raises(ValueError, match="closed"):
        ndgather.gather(data, [1])
    with pytest.raises(ValueError, match="closed"):
        ndgather.prepare_gather(data.shape, [1])(data)


def test_a_deleted_file_still_serves(table_file: Path, expected: np.ndarray) -> None:
    data = open_memmap(table_file)
    fd = os.open(table_file, os.O_RDONLY)
    try:
        table_file.unlink()
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert np.array_equal(ndgather.gather(data, IDS), expected[IDS])
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_during_the_reads_leaves_a_child_that_gathers(
    table_file: Path, expected: np.ndarray
) -> None:
    data = open_memmap(table_file)
    ids = np.random.default_rng(2).integers(0, ROWS, 512)
    done = threading.Event()
    errors: list[BaseException] = []

    def gather_cold() -> None:
        try:
            while not done.is_set():
                drop_cache(table_file)
                assert np.array_equal(ndgather.gather(data, ids), expected[ids])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    worker = threading.Thread(target=gather_cold)
    worker.start()
    try:
        for _ in range(5):
            pid = os.fork()
            if pid == 0:  # the child: gather cold, report by exit status only
                code = 1
                try:
                    drop_cache(table_file)
                    ok = np.array_equal(ndgather.gather(data, ids), expected[ids])
                    code = 0 if ok else 3
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        done.set()
        worker.join()
    assert not errors


def test_the_setting_takes_bools_only() -> None:
    ndgather.set_prefault(False)
    assert ndgather.get_prefault() is False
    ndgather.set_prefault(True)
    with pytest.raises(TypeError):
        ndgather.set_prefault("off")  # type: ignore[arg-type]
    assert ndgather.get_prefault() is True
