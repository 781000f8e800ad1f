"""Interleaved timing harness: every round times every candidate once, in rotating order.

Interleaving spreads slow drifts of the machine (frequency, page cache, a neighbour's load)
over all candidates alike instead of charging them to whichever ran last, and rotating the
order each round removes a fixed "who runs after whom" bias. Each sample times a batch of
back-to-back calls, sized per candidate so that a batch lasts at least ``min_sample_s``; the
figure reported is the median over rounds of the time per call.

A :class:`Call` is a function and its arguments. The harness compiles it into a ``timeit``
loop that calls the function directly with pre-bound arguments, so per-call overheads (which
decide the tiny cases) are not inflated by a wrapper lambda.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import timeit
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_CALLS_PER_SAMPLE = 1_000_000
SETTLE_MAX_S = 0.05  # the longest a settle waits for other threads to stop running


def other_threads_running() -> int:
    """How many threads of this process other than the caller are running or runnable
    (state ``R`` in ``/proc/self/task``; 0 where that cannot be read)."""
    me = threading.get_native_id()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 0
    n = 0
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread has just ended
        # The state follows the command name, which is in parentheses and may hold any byte.
        if stat[stat.rindex(")") + 2 :].startswith("R"):
            n += 1
    return n


def settle(min_s: float) -> None:
    """Pause at least ``min_s``, then until no other thread of the process runs (at most
    ``SETTLE_MAX_S``). A peer's worker threads keep spinning after its call returns, to
    catch the next one: PyTorch's OpenMP workers spun for about 8 ms after an
    ``index_select`` on the 2-core machine, longer than a fixed pause of 2 ms, and the
    candidate timed next ran on one core (ndgather's 4096-row cast took 1.4-2.4x its time
    in a quiet process, in the rounds where it followed PyTorch)."""
    time.sleep(min_s)
    deadline = time.perf_counter() + SETTLE_MAX_S
    while other_threads_running() and time.perf_counter() < deadline:
        time.sleep(0.0005)


#: The page size the tables are touched by (``keep_resident``).
PAGE_BYTES = 4096


def keep_resident(*arrays: np.ndarray) -> None:
    """Reads one byte of every page of each C-contiguous array (others are left alone).

    The host of the VMs these benchmarks run on takes back guest memory that has gone
    untouched for a while, and the guest's next reads of it wait on the host (the guest
    counts no page fault). A large table whose rows a case reads a few at a time is mostly
    untouched between cases: in one full ``cast.py`` run, the float32 table's 1-id calls of
    the int8 case started at 38 us a call and fell over the rounds to 0.6 us (median 4.5 us,
    against 0.47 us for the same case run alone), while the int8 table made just before it
    was fast. Called before each round, every candidate of the round finds its table's pages
    in place; one byte a page leaves in the caches one line of every 64, which the cycle of
    batches soon evicts."""
    for a in arrays:
        if a.flags.c_contiguous and a.size:
            flat = a.reshape(-1).view(np.uint8)
            int(flat[::PAGE_BYTES].sum(dtype=np.uint64))


@dataclass(frozen=True)
class Call:
    """``fn(*args, **kwargs)``: one invocation of a candidate on one case's inputs."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self) -> Any:
        return self.fn(*self.args, **self.kwargs)

    def timer(self) -> timeit.Timer:
        names: dict[str, Any] = {"fn": self.fn}
        params = []
        for i, value in enumerate(self.args):
            names[f"a{i}"] = value
            params.append(f"a{i}")
        for key, value in self.kwargs.items():
            names[f"k_{key}"] = value
            params.append(f"{key}=k_{key}")
        return timeit.Timer(f"fn({', '.join(params)})", globals=names)


@dataclass
class Timing:
    """Samples of one candidate: seconds per call, one sample per round."""

    calls_per_sample: int
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)


def calls_per_sample(timer: timeit.Timer, min_sample_s: float) -> int:
    """How many back-to-back calls make one sample last at least ``min_sample_s``."""
    number = 1
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= min_sample_s or number >= MAX_CALLS_PER_SAMPLE:
            return number
        # Aim 20% past the target so that the next try usually settles it.
        guess = int(number * 1.2 * min_sample_s / max(elapsed, 1e-9)) + 1
        number = min(MAX_CALLS_PER_SAMPLE, max(guess, number * 2))


def run_interleaved(
    calls: Mapping[str, Call], rounds: int, min_sample_s: float, settle_s: float = 0.0
) -> dict[str, Timing]:
    """Time every call ``rounds`` times, interleaved, rotating the order each round.

    The calls are expected to have been run once already (the output check does that), so
    the calibration here is not a cold first call. ``settle_s``: a pause before each sample,
    so that the worker threads a candidate left spinning (OpenMP's, in numba and PyTorch) are
    asleep again before the next one is timed instead of taking its cores; then, when a sample
    holds more than one call, one untimed call, so that the sample starts with the candidate's
    own threads awake (a pool that fell asleep in the pause would charge its wake-up to it).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    names = list(calls)
    timers = {name: calls[name].timer() for name in names}
    timings = {name: Timing(calls_per_sample(timers[name], min_sample_s)) for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            timing = timings[name]
            if settle_s:
                settle(settle_s)
                if timing.calls_per_sample > 1:
                    timers[name].timeit(1)
            elapsed = timers[name].timeit(timing.calls_per_sample)
            timing.samples.append(elapsed / timing.calls_per_sample)
    return timings
