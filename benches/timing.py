"""The one timer of the benchmarks: every suite times its calls here, in interleaved rounds.

What is timed is a timer: anything whose ``timeit(number)`` returns the seconds that
``number`` calls take, back to back.

* A :class:`Call` (a function and its arguments) compiles into a ``timeit`` loop that calls
  the function directly with pre-bound arguments, so per-call overheads (which decide the
  tiny cases) are not inflated by a wrapper lambda.
* A :class:`Statement` (``service.py``, ``cast.py``) compiles into a ``timeit`` loop whose
  every call takes the next batch of ids of a :class:`Cycle` shared by all candidates
  (:class:`CycleTimer`), and can time its calls one by one (:func:`latency_rounds`).
* A :class:`NativeTimer` times one native call that repeats its work ``number`` times (the
  floors of ``floor.py``, as :class:`Repeated` calls), so no Python call cost is in it.

:func:`run_interleaved` times them all: every round times every timer once, in rotating
order. Interleaving spreads slow drifts of the machine (frequency, page cache, a neighbour's
load) over all candidates alike instead of charging them to whichever ran last, and rotating
the order each round removes a fixed "who runs after whom" bias. Each sample times a batch of
back-to-back calls, sized per candidate so that a batch lasts at least ``min_sample_s``; the
figure reported is the median over rounds of the time per call (:class:`Timing`), and the
ratio of two candidates the median over rounds of their ratio within a round
(:func:`paired_ratio`). The clock is ``time.perf_counter`` (``timeit``'s, and
:func:`seconds`).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import statistics
import threading
import time
import timeit
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

MAX_CALLS_PER_SAMPLE = 1_000_000
SETTLE_MAX_S = 0.05  # the longest a settle waits for other threads to stop running

T = TypeVar("T")


class Timer(Protocol):
    """What :func:`run_interleaved` times: ``timeit(number)``, the seconds of ``number``
    calls."""

    def timeit(self, number: int) -> float: ...


def seconds(fn: Callable[..., object], *args: Any) -> float:
    """The seconds ``fn(*args)`` takes."""
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


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


class NativeTimer:
    """A timer whose ``timeit(number)`` is one native call, ``run(number)``, that repeats the
    work ``number`` times."""

    def __init__(self, run: Callable[[int], object]) -> None:
        self.run = run

    def timeit(self, number: int = 1) -> float:
        return seconds(self.run, number)


@dataclass(frozen=True)
class Repeated(Call):
    """``fn(*args, reps)``: a native kernel that repeats itself, timed by :class:`NativeTimer`."""

    def __call__(self) -> Any:
        return self.fn(*self.args, 1)

    def timer(self) -> NativeTimer:
        return NativeTimer(functools.partial(self.fn, *self.args))


class Cycle:
    """The batches of a case, taken in turn by every candidate; ``position`` counts them."""

    def __init__(self, batches: list[np.ndarray]) -> None:
        self.batches = batches
        self.position = 0

    def take(self, n: int) -> Iterator[np.ndarray]:
        """The next ``n`` batches: slices of the list (a pointer copy each, then a plain list
        iteration: nothing per call that a statement would notice)."""
        size, start = len(self.batches), self.position % len(self.batches)
        self.position += n
        if start + n <= size:
            return iter(self.batches[start : start + n])
        parts = [self.batches[start:]]
        n -= size - start
        parts += [self.batches] * (n // size) + [self.batches[: n % size]]
        return itertools.chain.from_iterable(parts)

    def skip(self, n: int) -> int:
        """Pass over the next ``n`` batches (a floor reads them natively); returns the first's
        place in the cycle."""
        first = self.position % len(self.batches)
        self.position += n
        return first


class CycleTimer(timeit.Timer):
    """A ``timeit.Timer`` whose loop variable is the next batch of ids: ``timeit(number)``
    runs the statement on the next ``number`` batches of a shared cycle.

    ``timeit.Timer`` compiles ``for _i in _it: <stmt>``, and its own ``timeit`` passes
    ``itertools.repeat(None, number)`` as ``_it``; passing a slice of the cycle instead gives
    the statement its batch in ``_i`` at no cost per call beyond the loop itself."""

    def __init__(self, stmt: str, names: dict[str, Any], cycle: Cycle) -> None:
        super().__init__(stmt, globals=names)
        self.cycle = cycle

    def timeit(self, number: int = 1) -> float:
        return float(self.inner(self.cycle.take(number), self.timer))  # type: ignore[attr-defined]


@dataclass
class Statement:
    """One way to gather the rows of a batch ``_i``: a statement over ``names``, which runs
    once (the output check), times in a cycle (:meth:`timer`) or times call by call
    (:meth:`latencies`)."""

    name: str
    family: str
    stmt: str
    names: dict[str, Any]
    result: str | None = None  # what holds the rows after the statement (default: its value)

    def run(self, ids: np.ndarray) -> np.ndarray:
        names = {**self.names, "_i": ids}
        value = eval(self.stmt, names)  # noqa: S307 - our own statements
        return np.asarray(eval(self.result, names) if self.result else value)  # noqa: S307

    def timer(self, cycle: Cycle) -> CycleTimer:
        return CycleTimer(self.stmt, self.names, cycle)

    def latencies(self, cycle: Cycle, n: int, pause_ns: int = 0) -> list[int]:
        """Nanoseconds of each of ``n`` calls on the next batches, timed one by one, each
        after ``pause_ns`` of Python busy-work (a service between requests: the threads a
        candidate keeps awake after a call may have gone to sleep by the next)."""
        src = (
            "def _lat(_it, _pc, _pause):\n"
            "    _out = []\n"
            "    _ap = _out.append\n"
            "    for _i in _it:\n"
            "        _end = _pc() + _pause\n"
            "        while _pause and _pc() < _end:\n"
            "            pass\n"
            "        _t0 = _pc()\n"
            f"        {self.stmt}\n"
            "        _ap(_pc() - _t0)\n"
            "    return _out\n"
        )
        names = dict(self.names)
        exec(src, names)  # noqa: S102 - our own statements
        out: list[int] = names["_lat"](cycle.take(n), time.perf_counter_ns, pause_ns)
        return out


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

    def record(self) -> dict[str, Any]:
        """What the JSON keeps of them."""
        return {
            "median_s": self.median,
            "min_s": self.min,
            "max_s": self.max,
            "calls_per_sample": self.calls_per_sample,
            "samples_s": self.samples,
        }


def calls_per_sample(timer: Timer, min_sample_s: float) -> int:
    """How many back-to-back calls make one sample last at least ``min_sample_s``.

    A single call that lasts a sample is timed twice more and the fastest counts: a burst of
    load on its first try set one sample to one call for a whole run, and a call of the floor
    (which starts its threads once a sample) then took 120-330 us a sample against 6 us
    (Intel kind, the service run of ``rows_4m_32 int64 x512 t2``)."""
    number = 1
    while True:
        elapsed = timer.timeit(number)
        if number == 1 and elapsed >= min_sample_s:
            elapsed = min(elapsed, timer.timeit(1), timer.timeit(1))
        if elapsed >= min_sample_s or number >= MAX_CALLS_PER_SAMPLE:
            return number
        # Aim 20% past the target so that the next try usually settles it.
        guess = int(number * 1.2 * min_sample_s / max(elapsed, 1e-9)) + 1
        number = min(MAX_CALLS_PER_SAMPLE, max(guess, number * 2))


def rotations(
    items: Sequence[T], rounds: int, before_round: Callable[[], object] | None
) -> Iterator[T]:
    """Every item once a round for ``rounds`` rounds, the order rotated by one each round;
    ``before_round()`` starts each round."""
    for r in range(rounds):
        if before_round is not None:
            before_round()
        shift = r % len(items)
        yield from [*items[shift:], *items[:shift]]


def run_interleaved(
    calls: Mapping[str, Call | Timer],
    rounds: int,
    min_sample_s: float,
    settle_s: float = 0.0,
    *,
    warm: bool = False,
    wake: bool = False,
    before_round: Callable[[], object] | None = None,
    lead_in_s: float = 0.0,
) -> dict[str, Timing]:
    """Time every call ``rounds`` times, interleaved, rotating the order each round.

    The calibration of a sample's calls must not start with a cold call: the calls are
    expected to have been run once already (the output check does that), or ``warm`` runs
    each once, untimed, just before its calibration. ``settle_s``: a pause before each sample,
    so that the worker threads a candidate left spinning (OpenMP's, in numba and PyTorch) are
    asleep again before the next one is timed instead of taking its cores; then, when a sample
    holds more than one call (or always, with ``wake``), one untimed call, so that the sample
    starts with the candidate's own threads awake (a pool that fell asleep in the pause would
    charge its wake-up to it). ``before_round``: run before each round (:func:`keep_resident`).
    ``lead_in_s``: untimed calls of the candidate for about that long right before each of its
    samples (after the pause), so that the sample does not pay for the candidate before it:
    on the Intel Xeon VM a call that writes other buffers than the previous calls did runs up
    to 1.6x slower for the next 15-30 ms of calls, NumPy's as ndgather's (docs/performance.md,
    "What the large cases' columns can and cannot say"), and a sample of a call of 5-25 ms is
    one to four calls.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    timers = {name: c.timer() if isinstance(c, Call) else c for name, c in calls.items()}
    timings = {}
    for name, timer in timers.items():
        if warm:
            timer.timeit(1)
        timings[name] = Timing(calls_per_sample(timer, min_sample_s))
    for name in rotations(list(timers), rounds, before_round):
        timer, timing = timers[name], timings[name]
        if settle_s:
            settle(settle_s)
        if lead_in_s:
            timer.timeit(max(1, math.ceil(timing.calls_per_sample * lead_in_s / min_sample_s)))
        elif settle_s and (wake or timing.calls_per_sample > 1):
            timer.timeit(1)
        timing.samples.append(timer.timeit(timing.calls_per_sample) / timing.calls_per_sample)
    return timings


def latency_rounds(
    statements: Sequence[Statement],
    cycle: Cycle,
    rounds: int,
    calls: Mapping[str, int],
    settle_s: float,
    before_round: Callable[[], object] | None = None,
    pause_ns: int = 0,
) -> dict[str, list[int]]:
    """Nanoseconds of single calls, ``calls[name]`` of each statement a round, interleaved
    and rotated as in :func:`run_interleaved`, each run after a settle and an untimed call,
    each call after ``pause_ns`` of busy-work (:meth:`Statement.latencies`)."""
    out: dict[str, list[int]] = {s.name: [] for s in statements}
    for s in rotations(statements, rounds, before_round):
        settle(settle_s)
        s.latencies(cycle, 1)  # untimed: wakes the candidate's threads
        out[s.name] += s.latencies(cycle, calls[s.name], pause_ns)
    return out


def paired_ratio(mine: Sequence[float], theirs: Sequence[float]) -> float:
    """The ratio of one candidate to another: the median over rounds of their ratio within
    each round (the two samples of a round are timed milliseconds apart). The shared VM slows
    down and speeds up over seconds to minutes, and a median taken of each candidate's samples
    apart turns such a drift into a ratio: in one run the 1-id ``bfloat16`` cast came out
    1.27x the float32 table by medians (every 1-id time 20-60% above a quiet run's) and 1.14x
    paired; in one process, interleaving 5,000-call samples of seven ways to call, medians put
    a ``bfloat16`` 1-id cast 1.20x the float32 gather where the paired ratio was 1.00x."""
    return statistics.median(a / b for a, b in zip(mine, theirs, strict=True))
