"""What several test folders share: running code in a fresh interpreter, the memory helpers
of the result-pool tests, whether the suite runs under AddressSanitizer, and tables of random
values for the `dtype=` tests."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import ndgather
import numpy as np

# Set by .ci/asan (`make asan`): the extension is the sanitized build and libasan is preloaded.
# There, the OpenVINO runtime cannot load (conftest.py skips the `openvino_runtime` tests) and
# the RSS says little about ndgather: ASan keeps freed blocks in a quarantine of up to 256 MiB
# and unmaps large ones when they leave it, so the RSS moves by more than the pool's buffers.
UNDER_ASAN = os.environ.get("NDGATHER_TEST_UNDER_ASAN") == "1"

# Why the tests that fork while another thread runs are left out under ASan (the plain suite
# runs them). Shown by gdb on a hung child (2026-11-24): it waits for ever on the region mutex
# of libasan's allocator (SizeClassAllocator64::GetFromAllocator, under malloc, called by
# CPython's after-fork handlers), a lock the child inherited held by a thread of the parent
# that was in malloc when the fork came. GCC 12's libasan takes no allocator lock around fork;
# upstream ASan does since LLVM 18 (llvm/llvm-project#75290, "[asan] Install pthread_atfork").
# Nothing of ndgather is on the hung stack.
ASAN_FORK_WITH_THREADS = (
    "under GCC 12's libasan a child forked while another thread is in malloc can inherit the "
    "allocator's lock held and hang (gdb: SizeClassAllocator64::GetFromAllocator); libasan "
    "locks around fork only from LLVM 18 (llvm/llvm-project#75290); the plain suite runs this"
)

# Put before the code of `run_child`: `kind(f)` is the name of the exception `f()` raises,
# or "no error".
CHILD_PRELUDE = """
import numpy as np, ndgather

def kind(f):
    try:
        f()
    except BaseException as e:
        return type(e).__name__
    return "no error"
"""


def run_child(code: str, timeout: float = 120) -> str:
    """Run `code` (after CHILD_PRELUDE) in a fresh interpreter and return what it printed.

    A crash or a hang must fail the test, not the session: the child is bounded by `timeout`
    and its exit status is checked."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"child died: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout.strip()


def rss_bytes() -> int:
    """This process's resident set size (needs /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def make_and_free_large_results(count: int, rows: int) -> None:
    """Make and drop `count` pooled results of up to `rows` rows of 8 KiB, each more than a
    quarter smaller than the one before, so that none reuses another's buffer."""
    data = np.ones((1024, 1024), dtype=np.float64)
    idx = np.arange(rows) % 1024
    for k in range(count):
        r = ndgather.gather(data, idx[: rows - k * rows // (count + 1)])
        assert r[-1, -1] == 1.0
        del r
    gc.collect()


def random_values(shape: tuple[int, ...], dtype: object, seed: int = 3) -> np.ndarray:
    """Random values of ``dtype`` (float: normal, times 100, the first four inf, -inf, NaN and
    -0.0; integer: the whole range, extremes included), for the `dtype=` tests."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    if dt.kind == "f":
        raw = rng.standard_normal(shape) * 100
        raw.flat[:4] = [np.inf, -np.inf, np.nan, -0.0][: raw.size]
        return raw.astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dt)
