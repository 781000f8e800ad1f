"""Gathers from a table in a file (issue 30): random rows of a float32 file mapped with
``np.memmap``, cold (not in the page cache) and warm, ndgather against NumPy's idioms and a
floor of plain reads of the same pages.

The file (``--file``, ``--size-gib``: 4 GiB of float32 by default) is written once, in
chunks, fsynced, and reused while its size is right. For each row width (512 B and 4 KiB)
and batch (64, 512 and 4,096 ids) and each of ``--rounds`` repeats, one set of random ids
(seeded, new each repeat) is gathered by every candidate, each from a cold file:

* **cold**: every mapping of the file closed (``gc.collect()``), then
  ``os.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` (it skips pages a live mapping holds),
  then ``mincore`` over the whole file must find no page resident, then a fresh
  ``np.memmap(path, mode="r")`` and one timed call;
* **warm**: the same ids again on that mapping right after (resident and touched through it),
  the median of ``WARM_CALLS`` calls timed one by one;
* the candidates: ``mm[ids]`` and ``np.take(mm, ids, axis=0)`` on a default mapping (the
  device's read-ahead as found) and on one given ``madvise(MADV_RANDOM)`` first (the idiom an
  expert writes); ``ndgather.gather(mm, ids)`` with all threads, with one thread, and with
  ``set_prefault(False)`` (the copy faults its pages itself, as before issue 30);
  ``torch.from_file`` + ``index_select`` where torch imports;
* **floor**: the distinct 4 KiB pages of those rows, in file order, read with ``os.pread``
  by a pool of N started Python threads sharing one iterator (the GIL is released in
  ``pread``; the fd has ``POSIX_FADV_RANDOM``, so each read is one page), each N of
  ``FLOOR_THREADS`` timed cold; the best N per case is the floor.

Then, per case, the warm goal: ndgather on that mapping (warm) against ndgather on an
in-memory copy of the whole file (``np.fromfile``: as much RAM as the file), same ids,
interleaved samples (``timing.run_interleaved``), their paired ratio, all threads and one;
and ``FRESH_CALLS`` calls each on a new mapping of the resident pages (minor faults only).

    python -m benches disk --quick        # a small file in a temp dir: runs and agrees
    python -m benches disk --json bench-results/disk.json --doc docs/performance.md
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import itertools
import mmap
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ndgather
import numpy as np

from .report import fmt_ratio, fmt_seconds, markdown_table, provenance, text_table
from .runner import Run
from .timing import Call, paired_ratio, run_interleaved

ROUNDS = (5, 1)  # cold repeats (full, --quick)
MIN_SAMPLE_S = (0.02, 0.001)  # the warm goal's interleaved samples
TABLE = "disk table"
PEERS = ("torch",)

ROW_BYTES = (512, 4096)
BATCHES = ((64, 512, 4096), (64, 512))  # (full, --quick)
FLOOR_THREADS = ((1, 16, 64, 128), (1, 16))
WARM_CALLS = 5
WARM_ROUNDS = (15, 2)
FRESH_CALLS = 3
PAGE = mmap.PAGESIZE
CHUNK = 64 << 20  # bytes written at a time when making the file

_libc = ctypes.CDLL(None, use_errno=True)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file",
        type=Path,
        default=Path(tempfile.gettempdir()) / "ndgather-bench-disk.f32",
        help="the table's file, made if missing or of another size (default: "
        "$TMPDIR/ndgather-bench-disk.f32; --quick: a small file in a temp dir)",
    )
    parser.add_argument(
        "--size-gib", type=float, default=4.0, help="the file's size (default 4 GiB)"
    )


# --------------------------------------------------------------------------- the file


#: Element ``i`` of the file is ``i % VALUES``: whole numbers below 2**24, exact in float32,
#: and an odd modulus, so rows of 2**k elements repeat only ``VALUES`` rows apart (beyond
#: 8 GiB of 512 B rows): a wrong row shows. (``np.arange`` in float32 would not do: past
#: 2**24 it repeats one value.)
VALUES = 2**24 - 1

#: How many times :func:`drop` advises the kernel to drop the file (waits of 10, 20, ...
#: 640 ms between, 1.3 s in all) before a page still cached is an error.
DROP_ATTEMPTS = 8


def make_file(path: Path, nbytes: int) -> None:
    """Write ``nbytes`` of float32 (see :data:`VALUES`) in chunks, fsync, and leave none of
    it cached. Kept while its size is right."""
    if path.exists() and path.stat().st_size == nbytes:
        return
    print(f"writing {nbytes / 2**20:.0f} MiB to {path}", flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for start in range(0, nbytes // 4, CHUNK // 4):
            stop = min(start + CHUNK // 4, nbytes // 4)
            f.write((np.arange(start, stop) % VALUES).astype(np.float32).tobytes())
        f.flush()
        os.fsync(f.fileno())
    drop(path)


def read_ahead_kb(path: Path) -> int | None:
    """The read-ahead of the block device ``path`` lies on (its disk's, for a partition)."""
    st = os.stat(path)
    dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}").resolve()
    for queue in (dev / "queue", dev.parent / "queue"):
        try:
            return int((queue / "read_ahead_kb").read_text())
        except (OSError, ValueError):
            continue
    return None  # tmpfs, overlay...: no block device


def drop(path: Path) -> None:
    """Drop the file's pages from the page cache and check that none is left: a page held by
    a live mapping is not dropped, so every mapping of it must be closed before.

    A page still being read in (the last cold call's asynchronous read-ahead, which can
    outlive the call by milliseconds) is locked and skipped by ``POSIX_FADV_DONTNEED``, then
    cached when its read ends: so the advice is given again, a few times over a second,
    before a page left counts as an error (CI met one such page once in many runs)."""
    gc.collect()
    fd = os.open(path, os.O_RDONLY)
    try:
        for attempt in range(DROP_ATTEMPTS):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            left = resident_pages(fd, os.fstat(fd).st_size)
            if not left:
                return
            if attempt + 1 < DROP_ATTEMPTS:
                time.sleep(0.01 * 2**attempt)
    finally:
        os.close(fd)
    raise SystemExit(
        f"{path}: {left} pages still cached after POSIX_FADV_DONTNEED {DROP_ATTEMPTS} times"
    )


def resident_pages(fd: int, nbytes: int) -> int:
    """How many pages of the file ``mincore`` finds in memory (through a mapping made for
    the question and closed after; ``mincore`` reads nothing)."""
    with mmap.mmap(fd, nbytes, prot=mmap.PROT_READ) as m:
        view = np.frombuffer(m, np.uint8)
        vec = np.zeros((nbytes + PAGE - 1) // PAGE, np.uint8)
        rc = _libc.mincore(
            ctypes.c_void_p(view.ctypes.data),
            ctypes.c_size_t(nbytes),
            vec.ctypes.data_as(ctypes.c_void_p),
        )
        del view
    if rc:
        raise OSError(ctypes.get_errno(), "mincore failed")
    return int(np.count_nonzero(vec & 1))


# --------------------------------------------------------------------------- the candidates


@contextmanager
def threads(n: int | None) -> Iterator[None]:
    before = ndgather.get_num_threads()
    ndgather.set_num_threads(n or before)
    try:
        yield
    finally:
        ndgather.set_num_threads(before)


@contextmanager
def prefault(on: bool) -> Iterator[None]:
    before = ndgather.get_prefault()
    ndgather.set_prefault(on)
    try:
        yield
    finally:
        ndgather.set_prefault(before)


def mapping(advice: int | None = None) -> Callable[[Path, tuple[int, int]], Any]:
    """Opens a fresh ``np.memmap`` of the file, given ``madvise(advice)`` if any."""

    def open_(path: Path, shape: tuple[int, int]) -> Any:
        mm = np.memmap(path, dtype=np.float32, mode="r", shape=shape)
        if advice is not None:
            mm._mmap.madvise(advice)  # type: ignore[attr-defined]
        return mm

    return open_


@dataclass(frozen=True)
class Candidate:
    """How to open the table (a fresh mapping each cold call) and gather from it, with
    ndgather's threads (``None``: all) and prefault setting during its calls."""

    open: Callable[[Path, tuple[int, int]], Any]
    gather: Callable[[Any, np.ndarray], Any]
    threads: int | None = None
    prefault: bool = True


def fancy(mm: Any, ids: np.ndarray) -> Any:
    return mm[ids]


def take(mm: Any, ids: np.ndarray) -> Any:
    return np.take(mm, ids, axis=0)


CANDIDATES = {
    "numpy fancy": Candidate(mapping(), fancy),
    "numpy take": Candidate(mapping(), take),
    "numpy fancy, MADV_RANDOM": Candidate(mapping(mmap.MADV_RANDOM), fancy),
    "numpy take, MADV_RANDOM": Candidate(mapping(mmap.MADV_RANDOM), take),
    "ndgather": Candidate(mapping(), ndgather.gather),
    "ndgather, 1 thread": Candidate(mapping(), ndgather.gather, threads=1),
    "ndgather, prefault off": Candidate(mapping(), ndgather.gather, prefault=False),
}
RANDOM_PEERS = ["numpy fancy, MADV_RANDOM", "numpy take, MADV_RANDOM"]


def torch_candidate(torch: Any) -> Candidate:
    """``torch.from_file`` (a shared mapping of the file) and ``index_select``."""

    def open_(path: Path, shape: tuple[int, int]) -> Any:
        size = shape[0] * shape[1]
        return torch.from_file(str(path), shared=True, size=size, dtype=torch.float32).view(shape)

    def gather(t: Any, ids: np.ndarray) -> Any:
        return torch.index_select(t, 0, torch.from_numpy(ids)).numpy()

    return Candidate(open_, gather)


class PreadPool:
    """N started threads that read a list of offsets, one page each, through one shared
    iterator (``next`` of a list iterator is atomic under the GIL, so no read is lost or
    doubled, and a slow read holds up only its thread)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pool = ThreadPoolExecutor(n)
        started = threading.Barrier(n)  # every thread started now, not in the first timing
        list(self.pool.map(lambda _: started.wait(), range(n)))

    def read(self, fd: int, offsets: list[int]) -> int:
        it = iter(offsets)

        def work() -> int:
            return sum(len(os.pread(fd, PAGE, off)) for off in it)

        return sum(f.result() for f in [self.pool.submit(work) for _ in range(self.n)])


# --------------------------------------------------------------------------- measuring


def load(run: Run) -> None:
    if run.quick:
        tmp = tempfile.TemporaryDirectory()  # kept alive by run.loaded: removed at exit
        path, nbytes = Path(tmp.name) / "disk.f32", 32 << 20
    else:
        tmp, path, nbytes = None, run.args.file, int(run.args.size_gib * 2**30)
    nbytes -= nbytes % max(ROW_BYTES)
    make_file(path, nbytes)
    print(f"reading {path} into memory for the warm goal", flush=True)
    memory = np.fromfile(path, dtype=np.float32)
    drop(path)
    run.loaded = (tmp, path, memory)
    run.machine.update(
        file=str(path),
        file_bytes=nbytes,
        read_ahead_kb=read_ahead_kb(path),
        page_bytes=PAGE,
        # NumPy asks for huge pages for large arrays (madvise), the page cache has 4 KiB
        # ones: the warm goal compares the two, so say what the copy got.
        anon_huge_pages_kib=_smaps_kib("AnonHugePages"),
    )


def _smaps_kib(key: str) -> int | None:
    try:
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def measure(run: Run) -> list[dict[str, Any]]:
    _, path, memory = run.loaded
    candidates = dict(CANDIDATES)
    if "torch" in run.peers:
        candidates["torch from_file"] = torch_candidate(run.peers["torch"])
    pools = [PreadPool(n) for n in FLOOR_THREADS[run.quick]]
    cases = itertools.product(ROW_BYTES, BATCHES[run.quick])
    try:
        return run.each(cases, lambda c: measure_case(run, path, memory, candidates, pools, *c))
    finally:
        for p in pools:
            p.pool.shutdown()


def measure_case(
    run: Run,
    path: Path,
    memory: np.ndarray,
    candidates: dict[str, Candidate],
    pools: list[PreadPool],
    row_bytes: int,
    n_ids: int,
) -> dict[str, Any]:
    shape = (memory.nbytes // row_bytes, row_bytes // 4)
    cold: dict[str, list[float]] = {n: [] for n in candidates}
    warm: dict[str, list[float]] = {n: [] for n in candidates}
    floors: dict[int, list[float]] = {p.n: [] for p in pools}
    errors: list[str] = []
    order = [*candidates, *(f"floor {p.n}" for p in pools)]
    for rep in range(run.rounds):
        # New ids each repeat (a cold call must not find the last one's pages); the same for
        # every candidate of the repeat, so their times pair.
        ids = np.random.default_rng([row_bytes, n_ids, rep]).integers(0, shape[0], n_ids)
        expected = memory.reshape(shape)[ids]
        pages = np.unique(ids * row_bytes // PAGE) * PAGE
        shift = rep % len(order)
        for name in order[shift:] + order[:shift]:  # rotated: no fixed "who runs first"
            drop(path)
            if name.startswith("floor"):
                pool = pools[[p.n for p in pools].index(int(name.split()[1]))]
                floors[pool.n].append(read_floor(path, pool, pages.tolist(), errors))
                continue
            c = candidates[name]
            with threads(c.threads), prefault(c.prefault):
                mm = c.open(path, shape)
                start = time.perf_counter()
                out = c.gather(mm, ids)
                cold[name].append(time.perf_counter() - start)
                for _ in range(WARM_CALLS):  # warm: the same ids again on the same mapping
                    start = time.perf_counter()
                    c.gather(mm, ids)
                    warm[name].append(time.perf_counter() - start)
            if not np.array_equal(np.asarray(out), expected):
                errors.append(f"{name} differs from NumPy on the in-memory copy")
            del mm, out
    ratios = warm_goal(run, path, memory, shape, ids)
    return {
        "name": f"{row_bytes} B rows, {n_ids} ids",
        "row_bytes": row_bytes,
        "ids": n_ids,
        "distinct_pages": len(pages),
        "cold_s": cold,
        "warm_s": warm,
        "floor_s": {str(n): v for n, v in floors.items()},
        **ratios,
        "errors": errors,
    }


def read_floor(path: Path, pool: PreadPool, offsets: list[int], errors: list[str]) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # one page a read, no read-ahead
        start = time.perf_counter()
        got = pool.read(fd, offsets)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    if got != len(offsets) * PAGE:
        errors.append(f"floor {pool.n}: read {got} bytes, expected {len(offsets) * PAGE}")
    return elapsed


def warm_goal(
    run: Run, path: Path, memory: np.ndarray, shape: tuple[int, int], ids: np.ndarray
) -> dict[str, Any]:
    """ndgather on a warm mapping against ndgather on the in-memory copy, interleaved."""
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=shape)
    table = memory.reshape(shape)
    out: dict[str, Any] = {"warm_mapped_s": {}, "warm_memory_s": {}, "warm_ratio": {}}
    for label, n in (("all", None), ("1", 1)):
        with threads(n):
            ndgather.gather(mm, ids)  # resident and touched through this mapping
            calls = {
                "mapped": Call(ndgather.gather, (mm, ids)),
                "memory": Call(ndgather.gather, (table, ids)),
            }
            t = run_interleaved(calls, WARM_ROUNDS[run.quick], run.min_sample_s, warm=True)
        out["warm_mapped_s"][label] = t["mapped"].median
        out["warm_memory_s"][label] = t["memory"].median
        out["warm_ratio"][label] = paired_ratio(t["mapped"].samples, t["memory"].samples)
    del mm
    # Resident but freshly mapped: the copy pays a minor fault a page that in-memory data
    # never pays.
    fresh = []
    for _ in range(FRESH_CALLS):
        mm = np.memmap(path, dtype=np.float32, mode="r", shape=shape)
        start = time.perf_counter()
        ndgather.gather(mm, ids)
        fresh.append(time.perf_counter() - start)
        del mm
    out["fresh_mapping_s"] = fresh
    return out


# --------------------------------------------------------------------------- the tables


def floor_best(r: dict[str, Any]) -> tuple[float, str]:
    """The floor of a case: its fastest thread count by median, and that count."""
    n, times = min(r["floor_s"].items(), key=lambda kv: statistics.median(kv[1]))
    return statistics.median(times), n


def cold_ratio(r: dict[str, Any], mine: str, theirs: list[str] | str) -> float:
    """``mine`` over ``theirs`` cold, paired by repeat (the same ids); over a list, the
    faster of ``theirs`` in each repeat."""
    names = [theirs] if isinstance(theirs, str) else theirs
    other = [min(ts) for ts in zip(*(r["cold_s"][n] for n in names), strict=True)]
    return paired_ratio(r["cold_s"][mine], other)


def goals(r: dict[str, Any]) -> dict[str, Any]:
    """Issue 30's goals for one case (they bind at 512 and 4,096 ids): cold at most 0.5x
    the best MADV_RANDOM idiom, or at most 1.25x the floor where the floor is above 0.4x that
    idiom; at least 20x faster than fancy indexing on a default mapping; warm at most 1.1x
    the in-memory gather."""
    idiom = cold_ratio(r, "ndgather", RANDOM_PEERS)
    floor, _ = floor_best(r)
    nd = statistics.median(r["cold_s"]["ndgather"])
    idiom_s = min(statistics.median(r["cold_s"][n]) for n in RANDOM_PEERS)
    to_floor = nd / floor
    floor_bound = floor > 0.4 * idiom_s
    default = 1 / cold_ratio(r, "ndgather", "numpy fancy")
    return {
        "vs_idiom": idiom,
        "vs_floor": to_floor,
        "default_over_nd": default,
        "cold_met": idiom <= 0.5 or (floor_bound and to_floor <= 1.25),
        "speedup_met": default >= 20,
        "warm": r["warm_ratio"]["all"],
        "warm_met": r["warm_ratio"]["all"] <= 1.1,
    }


def ms(times: list[float]) -> str:
    return fmt_seconds(statistics.median(times))


def rows(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    records = results["cases"]
    header = ["median"] + [f"{r['row_bytes']} B x {r['ids']}" for r in records]
    table: list[list[str]] = []

    def line(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        table.append([label, *(cell(r) for r in records)])

    names = list(records[0]["cold_s"])
    for n in names:
        line(f"cold: {n}", lambda r, n=n: ms(r["cold_s"][n]))
    for n in records[0]["floor_s"]:
        label = f"cold: floor, pread, {n} thread" + ("s" if n != "1" else "")
        line(label, lambda r, n=n: ms(r["floor_s"][n]))
    line(
        "cold: floor, pread (best threads)",
        lambda r: f"{fmt_seconds(floor_best(r)[0])} ({floor_best(r)[1]})",
    )
    for n in names:
        line(f"warm: {n}", lambda r, n=n: ms(r["warm_s"][n]))
    line("resident, fresh mapping: ndgather", lambda r: ms(r["fresh_mapping_s"]))
    for label, key in (("all threads", "all"), ("1 thread", "1")):
        line(
            f"warm: ndgather in memory, {label}",
            lambda r, k=key: fmt_seconds(r["warm_memory_s"][k]),
        )
        line(f"warm: ndgather mapped, {label}", lambda r, k=key: fmt_seconds(r["warm_mapped_s"][k]))
    mark = {True: " ok", False: " MISS"}

    def goal(r: dict[str, Any], key: str, met: str) -> str:
        g = goals(r)
        return fmt_ratio(g[key]) + (mark[g[met]] if r["ids"] in (512, 4096) else "")

    line("ndgather / MADV_RANDOM idiom, cold", lambda r: goal(r, "vs_idiom", "cold_met"))
    line("ndgather / floor, cold", lambda r: fmt_ratio(goals(r)["vs_floor"]))
    line(
        "ndgather 1 thread / MADV_RANDOM idiom, cold",
        lambda r: fmt_ratio(cold_ratio(r, "ndgather, 1 thread", RANDOM_PEERS)),
    )
    line("default fancy / ndgather, cold", lambda r: goal(r, "default_over_nd", "speedup_met"))
    line("warm mapped / in memory, all threads", lambda r: goal(r, "warm", "warm_met"))
    line("warm mapped / in memory, 1 thread", lambda r: fmt_ratio(r["warm_ratio"]["1"]))
    return header, table


def text(results: dict[str, Any]) -> str:
    return text_table(*rows(results))


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    huge = m.get("anon_huge_pages_kib")
    return "\n\n".join(
        [
            markdown_table(*rows(results)),
            f"Cold: median of {results['rounds']} repeats, new random ids each repeat (the "
            "same for every candidate of a repeat), one call each on a fresh `np.memmap` "
            "opened after `os.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)` with no mapping "
            "of the file alive, and `mincore` found no page of the file resident; warm: the "
            f"median of {WARM_CALLS} calls right after, same ids, same mapping; the in-memory "
            "and mapped lines and their ratios (paired): ndgather on a warm mapping against "
            f"ndgather on an in-memory copy of the file, {WARM_ROUNDS[results['quick']]} "
            "interleaved rounds "
            f"(after making the copy the process held {huge if huge is not None else '?'} "
            "KiB of anonymous memory on huge pages, the page cache none); resident, "
            f"fresh mapping: median of {FRESH_CALLS} calls each on a new mapping of resident "
            f"pages. The floor: the same distinct pages read with `os.pread`, 4 KiB each, in "
            "file order, by N started Python threads (`POSIX_FADV_RANDOM`). File "
            f"{m['file_bytes'] / 2**30:.1f} GiB of float32, read-ahead of its device "
            f"{m['read_ahead_kb']} KiB; ok/MISS: the goals of issue 30, which bind at 512 "
            "and 4,096 ids. " + provenance(results),
        ]
    )
