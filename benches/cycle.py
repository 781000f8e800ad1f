"""Timing calls that each take the next batch of a cycle of ids (``service.py``).

:class:`Cycle` is the batches of one case, shared by every candidate: whoever calls takes the
next batch, so no candidate reads the rows another has just read (they come back only after
the whole cycle). :class:`CycleTimer` is a ``timeit.Timer`` whose loop hands each call the
next batch;
:class:`Candidate` is one way to gather a batch, written as a statement, which it can run once
(for the output check), time in a cycle, or time call by call (:meth:`Candidate.latencies`);
:class:`FloorCandidate` times a native floor that does ``number`` batches in one call.
"""

from __future__ import annotations

import itertools
import time
import timeit
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import floor


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
class Candidate:
    """One way to gather the rows of a batch ``_i``: a statement over ``names``."""

    name: str
    family: str
    stmt: str
    names: dict[str, Any]
    result: str | None = None  # what holds the rows after the statement (default: its value)

    def run(self, ids: np.ndarray) -> np.ndarray:
        names = {**self.names, "_i": ids}
        value = eval(self.stmt, names)  # noqa: S307 - our own statements
        return np.asarray(eval(self.result, names) if self.result else value)  # noqa: S307

    def latencies(self, cycle: Cycle, n: int) -> list[int]:
        """Nanoseconds of each of ``n`` calls on the next batches, timed one by one."""
        src = (
            "def _lat(_it, _pc):\n"
            "    _out = []\n"
            "    _ap = _out.append\n"
            "    for _i in _it:\n"
            "        _t0 = _pc()\n"
            f"        {self.stmt}\n"
            "        _ap(_pc() - _t0)\n"
            "    return _out\n"
        )
        names = dict(self.names)
        exec(src, names)  # noqa: S102 - our own statements
        out: list[int] = names["_lat"](cycle.take(n), time.perf_counter_ns)
        return out


@dataclass
class FloorCandidate:
    """A floor of ``floor.py``: ``timeit(number)`` does ``number`` batches in one native call."""

    name: str
    run_batches: Callable[[int], object]
    family: str = floor.FAMILY
    tuning: dict[str, Any] = field(default_factory=dict)

    def timer(self) -> Any:
        outer = self

        class _Timer:
            def timeit(self, number: int = 1) -> float:
                start = time.perf_counter()
                outer.run_batches(number)
                return time.perf_counter() - start

        return _Timer()
