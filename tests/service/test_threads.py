"""Concurrency: many Python threads at once, the GIL released, thread-count settings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import ndgather
import numpy as np
import pytest
from helpers import ASAN_FORK_WITH_THREADS, UNDER_ASAN
from reference import assert_same, gather_nd_fancy, gather_take


def test_set_and_get_num_threads() -> None:
    n0 = ndgather.get_num_threads()
    assert isinstance(n0, int) and n0 >= 1
    for n in (1, 2, 3, 1, 8):
        ndgather.set_num_threads(n)
        assert ndgather.get_num_threads() == n
    ndgather.set_num_threads(np.int64(2))
    assert ndgather.get_num_threads() == 2


def _child_threads(env_value: str | None) -> str:
    env = dict(os.environ)
    env.pop("NDGATHER_NUM_THREADS", None)
    if env_value is not None:
        env["NDGATHER_NUM_THREADS"] = env_value
    code = (
        "import numpy as np, ndgather;"
        "r = ndgather.gather(np.arange(10**6), np.arange(10**6)[::-1]);"
        "assert r[0] == 10**6 - 1;"
        "print(ndgather.get_num_threads())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_env_var_sets_threads_at_import() -> None:
    assert _child_threads("3") == "3"
    assert _child_threads("1") == "1"


def test_default_threads_is_cpu_count() -> None:
    n = int(_child_threads(None))
    cpus = {os.cpu_count() or 1}
    if hasattr(os, "sched_getaffinity"):
        cpus.add(len(os.sched_getaffinity(0)))
    assert n in cpus, (n, cpus)


# Child-process helpers of the pool tests: `workers()` counts the pool's threads by
# name; a thread names itself once it first runs, so on a loaded machine a worker may
# not have run yet after the calls, and `wait_for_workers(n)` polls (up to 20 s) until
# n have.
_WORKER_COUNT = """
import os, time, numpy as np, ndgather

def workers():
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            names.append(open(f"/proc/self/task/{t}/comm").read().strip())
        except OSError:
            pass
    return sum(n.removeprefix("ndgather-").isdigit() for n in names)

def wait_for_workers(n):
    deadline = time.monotonic() + 20
    while workers() < n and time.monotonic() < deadline:
        time.sleep(0.01)
"""


def _run_counting_workers(body: str) -> str:
    """Runs ``body`` in a fresh interpreter after :data:`_WORKER_COUNT`; its output."""
    code = _WORKER_COUNT + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
@pytest.mark.parametrize("threads", [2, 3])
def test_a_split_of_n_threads_keeps_n_minus_1_workers(threads: int) -> None:
    # The caller is a split's n-th thread. A pool of n workers woke its
    # spare whenever the lingering one had not joined yet, and then both
    # lingered: on two cores, three threads spinning. The count is taken
    # again a little after n - 1 have shown: a pool of n would show its
    # n-th worker by then.
    body = f"""
        ndgather.set_num_threads({threads})
        for _ in range(50):
            ndgather.gather(np.arange(10**6), np.arange(10**6)[::-1])
        wait_for_workers({threads - 1})
        time.sleep(0.2)
        print(workers())
        """
    assert _run_counting_workers(body) == str(threads - 1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
def test_a_split_using_fewer_threads_than_set_keeps_the_pool() -> None:
    # With 3 threads set, a call too small to wake helpers splits over the
    # caller and the helpers awake: 2 threads. The pool was sized by the
    # split, so it was rebuilt with 1 worker and again with 2, back and forth.
    body = """
        ndgather.set_num_threads(3)
        big = np.arange(10**6); big_ids = big[::-1].copy()
        mid = np.arange(40_000); mid_ids = mid[::-1].copy()
        ndgather.gather(big, big_ids)
        wait_for_workers(2)
        seen = set()
        for _ in range(50):
            ndgather.gather(big, big_ids)
            ndgather.gather(mid, mid_ids)
            time.sleep(0.002)
            seen.add(workers())
        print(sorted(seen))
        """
    assert _run_counting_workers(body) == "[2]"


def test_results_identical_for_1_and_2_threads() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((2000, 300)).astype(np.float32)
    idx = rng.integers(-2000, 2000, size=(40_000,))
    pts = np.stack([rng.integers(-2000, 2000, 1_000_000), rng.integers(0, 300, 1_000_000)], -1)
    oob = rng.integers(-2500, 2500, size=(30_000,))
    gb = rng.integers(-300, 300, size=(2000, 64))
    calls = [
        lambda: ndgather.gather(data, idx),
        lambda: ndgather.gather(data, idx[:3000] % 300, axis=1),
        lambda: ndgather.gather_nd(data, pts),
        lambda: ndgather.gather_nd(data, idx[:, None]),
        lambda: ndgather.gather(data, oob, mode="zero"),
        lambda: ndgather.gather(data, oob, mode="clip"),
        lambda: ndgather.gather_nd(data, oob[:, None], mode="zero"),
        lambda: ndgather.gather(data, gb, axis=1, batch_dims=1),
        lambda: ndgather.gather_nd(data, gb[:, :, None], batch_dims=1),
    ]
    results = {}
    for n in (1, 2):
        ndgather.set_num_threads(n)
        results[n] = [c() for c in calls]
    for a, b in zip(results[1], results[2], strict=True):
        assert_same(a, b)
    assert_same(results[1][0], np.take(data, idx, axis=0))
    assert_same(results[1][2], data[pts[:, 0], pts[:, 1]])
    assert_same(results[1][4], gather_take(data, oob, 0, 0, "zero"))
    assert_same(results[1][5], gather_take(data, oob, 0, 0, "clip"))
    assert_same(results[1][6], gather_nd_fancy(data, oob[:, None], 0, "zero"))
    assert_same(results[1][7], gather_take(data, gb, 1, 1))
    assert_same(results[1][8], gather_nd_fancy(data, gb[:, :, None], 1))


def test_many_python_threads_at_once() -> None:
    rng = np.random.default_rng(1)
    jobs = []
    for j in range(24):
        if j % 3 == 0:  # large: parallel path
            data = rng.standard_normal((3000, 100)).astype(np.float64)
            idx = rng.integers(-3000, 3000, size=(5000 + j,))
            jobs.append(("g", data, idx, np.take(data, idx, axis=0)))
        elif j % 3 == 1:  # tiny: serial path
            data = rng.integers(0, 100, size=(4, 5, 6)).astype(np.int16)
            idx = rng.integers(-4, 4, size=(3, 2))
            jobs.append(("nd", data, idx, gather_nd_fancy(data, idx)))
        else:  # batch dims, strided
            data = rng.integers(0, 255, size=(8, 50, 30)).astype(np.uint8)[:, ::2, ::-1]
            idx = rng.integers(-25, 25, size=(8, 40))
            jobs.append(("gb", data, idx, gather_take(data, idx, 1, 1)))

    errors: list[str] = []
    barrier = threading.Barrier(12)

    def worker(k: int) -> int:
        barrier.wait()
        done = 0
        for it in range(40):
            kind, data, idx, expected = jobs[(k * 7 + it) % len(jobs)]
            if kind == "g":
                got = ndgather.gather(data, idx)
            elif kind == "nd":
                got = ndgather.gather_nd(data, idx)
            else:
                got = ndgather.gather(data, idx, axis=1, batch_dims=1)
            if got.shape != expected.shape or got.tobytes() != expected.tobytes():
                errors.append(f"thread {k} iteration {it}: wrong result for job {kind}")
            done += 1
        return done

    with ThreadPoolExecutor(max_workers=12) as ex:
        counts = list(ex.map(worker, range(12)))
    assert counts == [40] * 12
    assert not errors, errors[:5]


def test_threads_with_errors_and_objects_mixed() -> None:
    """Errors in some threads don't disturb results in others; object gathers stay correct."""
    words = np.array(["".join(["w", str(i)]) for i in range(1000)], dtype=object)
    good = np.random.default_rng(2).integers(0, 1000, size=20_000)
    bad = good.copy()
    bad[12_345] = 1000
    expected = words[good]
    failures: list[str] = []

    def worker(k: int) -> None:
        for _ in range(20):
            if k % 2:
                try:
                    ndgather.gather(words, bad)
                except IndexError as e:
                    if "12345" not in str(e):
                        failures.append(f"wrong position in {e}")
                else:
                    failures.append("no IndexError")
            else:
                got = ndgather.gather(words, good)
                if not all(a is b for a, b in zip(got, expected, strict=True)):
                    failures.append("wrong object result")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]


def test_set_num_threads_while_gathering() -> None:
    rng = np.random.default_rng(3)
    data = rng.standard_normal((4000, 64))
    idx = rng.integers(0, 4000, size=50_000)
    expected = np.take(data, idx, axis=0)
    stop = threading.Event()
    bad: list[int] = []

    def gatherer() -> None:
        while not stop.is_set():
            if not np.array_equal(ndgather.gather(data, idx), expected):
                bad.append(1)

    ts = [threading.Thread(target=gatherer) for _ in range(3)]
    for t in ts:
        t.start()
    try:
        for i in range(60):
            ndgather.set_num_threads(1 + i % 3)
            time.sleep(0.005)
    finally:
        stop.set()
        for t in ts:
            t.join()
    assert not bad


def _gather_calls(data: np.ndarray, idx: np.ndarray) -> dict[str, Callable[[], object]]:
    out = np.empty(idx.shape, data.dtype)
    return {
        "gather": lambda: ndgather.gather(data, idx),
        "gather_nd": lambda: ndgather.gather_nd(data, idx[:, None]),
        "gather out=": lambda: ndgather.gather(data, idx, out=out),
    }


@pytest.mark.parametrize("call", ["gather", "gather_nd", "gather out="])
def test_another_python_thread_runs_while_a_gather_runs(call: str) -> None:
    """The GIL is released while a large gather copies: a pure-Python thread makes progress
    in the middle of the call. Were the GIL held, that thread could not run at all between
    the call's first and last quarter. The call is made long (a quarter of a second or
    more), and one sign of life in its middle half is enough, so a loaded machine cannot
    make this fail."""
    ndgather.set_num_threads(1)  # leave the second core to the Python thread
    rng = np.random.default_rng(4)
    data = rng.standard_normal(8_000_000)  # 64 MB: random reads miss the cache
    n = 4_000_000
    while True:
        idx = rng.integers(0, data.size, size=n)
        run = _gather_calls(data, idx)[call]
        run()  # warm up: pages, pools
        stamps: list[float] = []
        done = threading.Event()

        def watch(stamps: list[float] = stamps, done: threading.Event = done) -> None:
            while not done.is_set():
                stamps.append(time.perf_counter())
                time.sleep(0)  # offer the GIL back; a held GIL keeps this thread out

        watcher = threading.Thread(target=watch)
        watcher.start()
        while not stamps:  # the watcher runs before the call starts
            time.sleep(0.001)
        start = time.perf_counter()
        run()
        end = time.perf_counter()
        done.set()
        watcher.join()
        if end - start >= 0.25 or n >= 64_000_000:
            break
        n *= 2  # too fast to judge on this machine: make it bigger
    quarter = (end - start) / 4
    middle = [s for s in stamps if start + quarter < s < end - quarter]
    assert middle, (
        f"no Python thread ran during the middle {2 * quarter:.3f} s of a "
        f"{end - start:.3f} s {call}: the GIL seems held"
    )


def test_indices_mutated_during_gather_never_crash() -> None:
    """Another thread rewrites `indices` (with bad values) while gathers run without the GIL.
    Each call must either raise a Python exception or return values that are all in `data`:
    never a crash, never a read outside `data`. Run in a child process, so that a crash fails
    this test only."""
    code = textwrap.dedent(
        """
        import threading, numpy as np, ndgather
        ndgather.set_num_threads(2)
        data = np.arange(1000, dtype=np.float64)        # every value is an integer < 1000
        data2 = data.reshape(1000, 1)
        good = np.random.default_rng(0).integers(0, 1000, size=2_000_000)
        bad = good.copy()
        bad[::97] = 10**12
        bad[5::89] = -(10**12)
        idx = good.copy()
        stop = threading.Event()

        def mutate():
            while not stop.is_set():
                np.copyto(idx, bad)
                np.copyto(idx, good)

        t = threading.Thread(target=mutate)
        t.start()
        outcomes = {}
        try:
            for i in range(60):
                mode = ("raise", "zero", "clip")[i % 3]
                try:
                    if i % 2:
                        r = ndgather.gather(data, idx, mode=mode)
                    else:
                        r = ndgather.gather_nd(data2, idx[:, None], mode=mode)
                except (IndexError, ValueError, RuntimeError) as e:
                    outcomes[type(e).__name__] = outcomes.get(type(e).__name__, 0) + 1
                    continue
                outcomes["ok"] = outcomes.get("ok", 0) + 1
                flat = r.ravel()
                assert np.all((flat >= 0) & (flat < 1000) & (flat == np.floor(flat))), "garbage"
        finally:
            stop.set()
            t.join()
        print(sorted(outcomes.items()))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
# The child forks right after a two-thread gather, while the workers it used may still be in
# malloc. Under `make asan` with tests/dask run first (which sets OMP_NUM_THREADS and the like
# in the environment the child inherits), its child hung every time in libasan's
# SizeClassAllocator64::GetFromAllocator (gdb, 2026-11-26), on 8747073 as on later commits.
@pytest.mark.skipif(UNDER_ASAN, reason=ASAN_FORK_WITH_THREADS)
def test_large_gathers_work_in_a_forked_child() -> None:
    """A child forked after the parent used its worker threads has none of them: large
    gathers there (parallel ones, with and without out=, and one that raises) must still
    finish, with the same results. Run in a child process with a timeout, so that a hang
    fails this test only."""
    code = textwrap.dedent(
        """
        import os, numpy as np, ndgather
        ndgather.set_num_threads(2)
        rng = np.random.default_rng(0)
        data = rng.random((100_000, 10), dtype=np.float32)
        idx = rng.integers(0, 100_000, size=(200_000, 1))
        want = data[idx[:, 0]]
        assert np.array_equal(ndgather.gather_nd(data, idx), want)  # the pool starts here
        pid = os.fork()
        if pid == 0:
            ok = np.array_equal(ndgather.gather_nd(data, idx), want)
            out = np.empty_like(want)
            ok &= ndgather.gather_nd(data, idx, out=out) is out and np.array_equal(out, want)
            bad = idx.copy()
            bad[150_000] = 10**6
            try:
                ndgather.gather_nd(data, bad)
                ok = False
            except IndexError as e:
                ok &= "1000000" in str(e)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        raise SystemExit(os.waitstatus_to_exitcode(status))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.parametrize("n", [0, -1, ndgather.MAX_THREADS + 1, 2**61, 2**63 - 1])
def test_thread_counts_beyond_the_maximum_are_value_errors(n: int) -> None:
    before = ndgather.get_num_threads()
    with pytest.raises(ValueError, match=f"between 1 and {ndgather.MAX_THREADS}"):
        ndgather.set_num_threads(n)
    assert ndgather.get_num_threads() == before
    # Large calls still work: before the cap, 2**61 threads made them divide by zero.
    data = np.arange(200_000, dtype=np.float64).reshape(-1, 4)
    idx = np.arange(50_000)[::-1]
    np.testing.assert_array_equal(ndgather.gather(data, idx), data[idx])


def test_the_maximum_thread_count_is_accepted() -> None:
    assert ndgather.MAX_THREADS == 1024
    ndgather.set_num_threads(64)
    data = np.arange(400_000, dtype=np.float64).reshape(-1, 4)
    idx = np.arange(100_000)[::-1]
    np.testing.assert_array_equal(ndgather.gather(data, idx), data[idx])
    ndgather.set_num_threads(ndgather.MAX_THREADS)
    assert ndgather.get_num_threads() == ndgather.MAX_THREADS
