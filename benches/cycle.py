"""Timing calls that each take the next batch of a cycle of ids (``service.py``).

:class:`CycleTimer` is a ``timeit.Timer`` whose loop hands each call the next batch;
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

import floor
import numpy as np


class CycleTimer(timeit.Timer):
    """A ``timeit.Timer`` whose loop variable is the next batch of ids: ``timeit(number)``
    runs the statement on the next ``number`` batches of a shared cycle.

    ``timeit.Timer`` compiles ``for _i in _it: <stmt>``, and its own ``timeit`` passes
    ``itertools.repeat(None, number)`` as ``_it``; passing a slice of the cycle instead gives
    the statement its batch in ``_i`` at no cost per call beyond the loop itself."""

    def __init__(self, stmt: str, names: dict[str, Any], cycle: Iterator[np.ndarray]) -> None:
        super().__init__(stmt, globals=names)
        self.cycle = cycle

    def timeit(self, number: int = 1) -> float:
        return float(self.inner(itertools.islice(self.cycle, number), self.timer))  # type: ignore[attr-defined]


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

    def latencies(self, cycle: Iterator[np.ndarray], n: int) -> list[int]:
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
        out: list[int] = names["_lat"](itertools.islice(cycle, n), time.perf_counter_ns)
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
