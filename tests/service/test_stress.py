"""Stress: what a long-running service does to ndgather at once.

Threads that change the thread count while others gather and the main thread forks; a
thread making the process's first call while the main thread forks; a pre-fork server's
children and the parent's pooled buffers; many threads gathering mixed dtypes (object
included, with reference counts checked); errors under load that must leave ``out=``
untouched. Every test is bounded: work that could hang
runs in a child process with a timeout, or in threads joined with a deadline, so a hang
fails the test instead of stalling the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import ndgather
import numpy as np
import pytest
from helpers import (
    ASAN_FORK_WITH_THREADS,
    UNDER_ASAN,
    make_and_free_large_results,
    rss_bytes,
    run_child,
)

pytestmark = pytest.mark.stress

DEADLINE_S = 60.0


def run_threads(bodies: list[Callable[[], None]], deadline_s: float = DEADLINE_S) -> None:
    """Run each body in a thread of its own; fail on the first exception, or if any thread
    is still running at the deadline (a hang)."""
    errors: list[BaseException] = []

    def guarded(body: Callable[[], None]) -> None:
        try:
            body()
        except BaseException as error:  # reported below, in the test's own thread
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(b,), daemon=True) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(deadline_s)
    assert not any(t.is_alive() for t in threads), f"threads still running after {deadline_s} s"
    if errors:
        raise errors[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.skipif(UNDER_ASAN, reason=ASAN_FORK_WITH_THREADS)
def test_forked_children_never_hang_while_threads_resize_the_pool() -> None:
    """Three threads keep changing the thread count (rebuilding the pool under its lock) and
    gathering 13 MB, while the main thread forks children that each run one such gather. A
    child that inherited the lock held would wait on it for ever: before the pool's locks
    were made fork-safe, 2 to 3 of every 5 children hung here."""
    code = textwrap.dedent(
        """
        import os, random, threading, time, warnings
        import numpy as np, ndgather

        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running
        rng = np.random.default_rng(0)
        data = rng.random((200_000, 16), dtype=np.float32)
        idx = rng.integers(0, 200_000, size=(200_000, 1))  # 12.8 MB of output
        want = data[idx[:, 0]]
        stop = threading.Event()

        def churn(seed):
            r = random.Random(seed)
            while not stop.is_set():
                ndgather.set_num_threads(r.randint(2, 4))
                ndgather.gather_nd(data, idx)

        threads = [threading.Thread(target=churn, args=(s,), daemon=True) for s in range(3)]
        for t in threads:
            t.start()
        hung = failed = 0
        for _ in range(12):
            time.sleep(0.02)
            pid = os.fork()
            if pid == 0:
                os._exit(0 if np.array_equal(ndgather.gather_nd(data, idx), want) else 3)
            deadline = time.monotonic() + 20
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    failed += os.waitstatus_to_exitcode(status) != 0
                    break
                if time.monotonic() > deadline:
                    hung += 1
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.01)
        stop.set()
        for t in threads:
            t.join()
        print(f"hung={hung} failed={failed}")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S * 2
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "hung=0 failed=0", proc.stdout + proc.stderr


# A fresh interpreter where a thread makes the process's first call of some kind (after
# {setup}) while the main thread forks four children, each making such a call with a
# deadline; prints how many children hung and how many failed.
FIRST_CALL_WHILE_FORKING = """
import os, threading, time, warnings
import numpy as np, ndgather

warnings.simplefilter("ignore", DeprecationWarning)  # fork with a thread running
{setup}

def call():
    return {call}

started = threading.Event()
thread = threading.Thread(target=lambda: (started.set(), call()))
thread.start()
started.wait()
pids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        os._exit(0 if call() else 3)
    pids.append(pid)
hung = failed = 0
deadline = time.monotonic() + 10
for pid in pids:
    while not (done := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.005)
    if done[0]:
        failed += os.waitstatus_to_exitcode(done[1]) != 0
    else:
        hung += 1
        os.kill(pid, 9)
        os.waitpid(pid, 0)
thread.join()
print(hung, failed)
"""


def _children_forked_during_a_first_call(setup: str, call: str, processes: int = 20) -> str:
    """Run FIRST_CALL_WHILE_FORKING in `processes` fresh interpreters, one after another;
    "hung=H failed=F" over all their children."""
    code = FIRST_CALL_WHILE_FORKING.format(setup=setup, call=call)
    hung = failed = 0
    for _ in range(processes):
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        h, f = map(int, proc.stdout.split())
        hung, failed = hung + h, failed + f
    return f"hung={hung} failed={failed}"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.skipif(UNDER_ASAN, reason=ASAN_FORK_WITH_THREADS)
def test_children_forked_during_the_first_call_never_hang() -> None:
    """The first call fills one-time cells (NumPy's C API table, the cached
    ``numpy.asarray``); filling one releases the GIL while the cell is marked as being
    filled, and a child forked then would wait for ever on a cell no thread of its fills.
    Before the module filled them at import, 8 of the 80 children hung (and in another run
    of this setup, some child hung in 9 of 20 processes)."""
    setup = "data = np.arange(10.0)"
    call = "ndgather.gather_nd(data, [[3], [1]]).tolist() == [3.0, 1.0]"
    assert _children_forked_during_a_first_call(setup, call) == "hung=0 failed=0"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.skipif(UNDER_ASAN, reason=ASAN_FORK_WITH_THREADS)
def test_children_forked_during_the_first_parallel_call_never_hang() -> None:
    """The first call split over threads (here: the pool off, so no pooled buffer is
    involved) used to register the fork handlers, under a one-time lock; a child forked
    during the registration found it half done and waited for ever on its first large call.
    The handlers are now registered at import; before, 20 of the 80 children hung."""
    setup = """
ndgather.set_num_threads(2)
ndgather.set_pool_limit(0)
data = np.ones((100_000, 16), dtype=np.float32)
idx = np.arange(0, 100_000, 7)[:, None]  # 914 KB of output: split over threads
ndgather.gather_nd(data[:4], [[0]])  # the first call of all is not the one under test
"""
    call = "ndgather.gather_nd(data, idx).shape == (len(idx), 16)"
    assert _children_forked_during_a_first_call(setup, call) == "hung=0 failed=0"


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_drops_the_parents_pooled_buffers() -> None:
    """A pre-fork server warms up, then forks workers: a worker must not keep the parent's
    pooled buffers (writing to them would copy every page anyway), and its own freed
    buffers must still leave after IDLE_RELEASE_SECONDS, though the parent's release thread
    did not come with it. Before, the child kept all 144 MiB for as long as it lived."""
    code = f"""
        import os, sys, time
        sys.path[:0] = {sys.path!r}
        from helpers import make_and_free_large_results, rss_bytes

        make_and_free_large_results(3, 8192)  # 64, 48 and 32 MiB, all kept
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            at_fork = [ndgather.pool_bytes(), rss_bytes()]
            make_and_free_large_results(1, 256)  # 2 MiB of the child's own
            own = ndgather.pool_bytes()
            deadline = time.monotonic() + ndgather._core.IDLE_RELEASE_SECONDS + 5
            while ndgather.pool_bytes() and time.monotonic() < deadline:
                time.sleep(0.1)
            os.write(write, " ".join(map(str, [*at_fork, own, ndgather.pool_bytes()])).encode())
            os._exit(0)
        parent = [ndgather.pool_bytes(), rss_bytes()]
        os.close(write)
        deadline = time.monotonic() + ndgather._core.IDLE_RELEASE_SECONDS + 20
        while not os.waitpid(pid, os.WNOHANG)[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        if time.monotonic() >= deadline:
            os.kill(pid, 9)
        print(*parent, os.read(read, 1000).decode() or "hung")
        """
    out = run_child(code).split()
    assert "hung" not in out, out
    pooled, parent_rss, child_pooled, child_rss, child_own, child_later = map(int, out)
    # A buffer holds its result and up to 48 bytes before it (the result starts where `data`
    # does in a cache line: docs/api.md, section 3).
    assert 144 << 20 <= pooled <= (144 << 20) + 3 * 48, "the parent keeps its pool"
    assert child_pooled == 0, "the child dropped the buffers it inherited"
    assert parent_rss - child_rss > pooled * 9 // 10, "and their pages with them"
    assert 2 << 20 <= child_own <= (2 << 20) + 48, "its own freed result is pooled"
    assert child_later == 0, "and leaves by itself after IDLE_RELEASE_SECONDS"


def test_concurrent_gathers_of_mixed_dtypes_keep_results_and_refcounts() -> None:
    rng = np.random.default_rng(1)
    objects = [f"item-{i}" * (1 + i % 3) for i in range(500)]
    tables: dict[str, np.ndarray] = {
        "float32": rng.random((4000, 24), dtype=np.float32),
        "int16": rng.integers(-30000, 30000, size=(4000, 3), dtype=np.int16),
        "complex128": rng.random((4000, 5)) + 1j * rng.random((4000, 5)),
        "bytes": rng.integers(0, 255, size=(4000, 7), dtype=np.uint8).view("S7"),
        "object": np.array(objects * 8, dtype=object).reshape(4000, 1),
    }
    counts_before = [sys.getrefcount(o) for o in objects]

    def worker(seed: int) -> Callable[[], None]:
        def body() -> None:
            r = np.random.default_rng(seed)
            for step in range(60):
                name = list(tables)[(seed + step) % len(tables)]
                data = tables[name]
                idx = r.integers(-4000, 4000, size=int(r.integers(1, 30_000)))
                if step % 2:
                    got = ndgather.gather(data, idx)
                    np.testing.assert_array_equal(got, np.take(data, idx, axis=0))
                else:
                    got = ndgather.gather_nd(data, idx[:, None])
                    np.testing.assert_array_equal(got, data[idx])
                assert got.dtype == data.dtype
                del got

        return body

    run_threads([worker(s) for s in range(6)])
    # Every reference a result took was given back when the result died.
    assert [sys.getrefcount(o) for o in objects] == counts_before


def _bad_calls(data: np.ndarray, idx: np.ndarray, out: np.ndarray) -> list[Callable[[], object]]:
    """Calls into ``out`` that must fail, each for another reason."""
    late_bad = idx.copy()
    late_bad[-1, 0] = 10**9  # the very last index: found only after most rows could be copied
    first_bad = idx.copy()
    first_bad[0, 0] = -(10**9)
    return [
        lambda: ndgather.gather_nd(data, late_bad, out=out),
        lambda: ndgather.gather_nd(data, first_bad, out=out),
        lambda: ndgather.gather_nd(data, idx.astype(np.float32), out=out),
        lambda: ndgather.gather_nd(data, idx, mode="wrap", out=out),  # type: ignore[arg-type]
        lambda: ndgather.gather_nd(data, idx, batch_dims=5, out=out),
        lambda: ndgather.gather_nd(data, idx[:-1], out=out),
        lambda: ndgather.gather_nd(data.astype(np.float64), idx, out=out),
        lambda: ndgather.gather(data, late_bad[:, 0], out=out),
        lambda: ndgather.gather(data, late_bad[:, 0], axis=-3, out=out),
    ]


def test_out_is_never_modified_by_a_failing_call_under_load() -> None:
    rng = np.random.default_rng(2)
    data = rng.random((50_000, 32), dtype=np.float32)
    idx = rng.integers(0, 50_000, size=(100_000, 1))  # 12.8 MB: split over threads

    def worker(seed: int) -> Callable[[], None]:
        def body() -> None:
            out = np.full((100_000, 32), seed, dtype=np.float32)
            snapshot = out.copy()
            for _ in range(3):
                for call in _bad_calls(data, idx, out):
                    with pytest.raises((IndexError, ValueError, TypeError)):
                        call()
                    assert np.array_equal(out, snapshot), "a failed call wrote into out"
            # And a good call still fills it.
            assert ndgather.gather_nd(data, idx, out=out) is out
            np.testing.assert_array_equal(out, data[idx[:, 0]])

        return body

    ndgather.set_num_threads(2)
    run_threads([worker(s) for s in range(4)])


def test_thread_count_changes_during_gathers_never_change_results() -> None:
    rng = np.random.default_rng(3)
    data = rng.random((30_000, 40), dtype=np.float32)
    idx = rng.integers(-30_000, 30_000, size=60_000)
    want = np.take(data, idx, axis=0)
    stop = threading.Event()

    def resize() -> None:
        r = np.random.default_rng(4)
        while not stop.is_set():
            ndgather.set_num_threads(int(r.integers(1, 9)))

    def gather() -> None:
        try:
            for _ in range(40):
                np.testing.assert_array_equal(ndgather.gather(data, idx), want)
        finally:
            stop.set()

    run_threads([resize, gather, gather])


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_idle_buffers_are_released_by_themselves() -> None:
    """A long-running process that stopped making large results gets the pool's memory back
    without calling anything: its buffers leave after IDLE_RELEASE_SECONDS, and so does
    their share of the RSS."""
    ndgather.release_pool()
    baseline = rss_bytes()
    make_and_free_large_results(3, 4096)
    assert ndgather.pool_bytes() > 0
    deadline = time.monotonic() + ndgather._core.IDLE_RELEASE_SECONDS + 5
    while ndgather.pool_bytes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ndgather.pool_bytes() == 0
    if not UNDER_ASAN:  # there, the RSS measures ASan's allocator (see helpers.UNDER_ASAN)
        assert rss_bytes() - baseline < 8 << 20
