"""The measured limits of a gather: the random-read floor and the sequential write of its output.

A gather reads blocks (rows, slices, single elements) at the addresses its indices name and
writes them out in order. ``floor/`` is a small Rust crate (C ABI, no PyO3, built here with
``cargo build --release`` and loaded with ``ctypes``; the shipped extension is untouched) with
two kernels that do only one half of that:

* ``read floor``: loads one byte of every cache line of the same blocks, at the same
  addresses, in the same order, from precomputed byte offsets (no index to check or resolve,
  nothing written), on every thread, with software prefetch some blocks ahead; for the
  cases' block widths in straight-line code compiled for the width (``touch_fixed``), as a
  gather's copy of a fixed width is (a loop over a block's lines was beaten by the gathers).
  The prefetch distance, the unrolling, the prefetch hint and the thread count are tuned per case
  (:meth:`ReadFloor.tune`: coordinate descent over :data:`DISTANCES`, :data:`UNROLLS`,
  :data:`HINTS` and 1 or all threads, each setting the best of three runs, until a pass
  changes nothing): the fastest way we found to bring those lines in.
* ``write floor``: only the writes of the output's bytes into a warm buffer, plain stores
  (``memset``) or streaming (non-temporal) ones, on 1 or every thread, whichever is fastest.

No gather can beat the larger of the two (it must do both), so that is the ``limit``
(the tables take each floor's fastest sample, the gathers' medians: ``report.floor_time``); a gather
faster than the read floor means the floor is not one (the tables flag it). Both kernels
repeat their work inside one native call, so the time per repetition has no cost of calling
from Python in it.
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
import os
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ndgather
import numpy as np

from .candidates import Candidate, NotApplicable
from .cases import Inputs
from .timing import Call, Repeated, seconds

CRATE = Path(__file__).with_name("floor")
FAMILY = "floor"
READ, WRITE = "read floor", "write floor"
DISTANCES = (0, 4, 8, 16, 32, 64, 128, 256, 512)
UNROLLS = (1, 2, 4, 8)
HINTS = ("T0", "T1", "T2", "NTA")  # the prefetch's target: L1, L2, L3, non-temporal


class Unavailable(Exception):
    """The floor crate could not be built or loaded (the message says why)."""


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """Build ``floor/`` (a no-op when it is up to date) and load it."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise Unavailable("cargo is not on PATH")
    proc = subprocess.run(
        [cargo, "build", "--release", "--quiet", "--message-format=json"],
        cwd=CRATE,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise Unavailable(f"cargo build failed: {proc.stderr.strip()[-500:]}")
    paths = [
        f
        for line in proc.stdout.splitlines()
        if line.startswith("{")
        for msg in [json.loads(line)]
        if msg.get("reason") == "compiler-artifact" and "cdylib" in msg["target"]["kind"]
        for f in msg["filenames"]
    ]
    if not paths:
        raise Unavailable("cargo built no cdylib")
    lib = ctypes.CDLL(paths[0])
    size, ptr = ctypes.c_size_t, ctypes.c_void_p
    lib.floor_read.argtypes = [ptr, ptr, size, size, size, size, size, size, size, size, size, size]
    lib.floor_read.restype = ctypes.c_uint64
    lib.floor_write.argtypes = [ptr, size, size, size, ctypes.c_bool]
    lib.floor_write.restype = None
    return lib


def available() -> str | None:
    """``None`` when the floor kernels load, else why not."""
    try:
        library()
    except Unavailable as exc:
        return str(exc)
    return None


# --------------------------------------------------------------------------- what is read


def _inner_ndim(inputs: Inputs) -> int:
    """How many trailing axes of ``data`` each gathered block spans."""
    case = inputs.case
    if case.op == "gather_nd":
        return len(case.data_shape) - case.batch_dims - case.indices_shape[-1]
    return len(case.data_shape) - case.axis - 1


def block_offsets(inputs: Inputs) -> tuple[np.ndarray, int]:
    """The byte offset in ``data`` of every block the case's gather reads, in output order, and
    the block's size in bytes.

    The same gather on an ``arange`` of ``data``'s shape with the block's axes cut to 1 gives
    every block's number; the case's indices are non-negative, in range."""
    case, data = inputs.case, inputs.data
    inner = _inner_ndim(inputs)
    outer_shape = case.data_shape[: len(case.data_shape) - inner]
    block_elems = math.prod(case.data_shape[len(case.data_shape) - inner :])
    numbers = np.arange(math.prod(outer_shape), dtype=np.int64).reshape(outer_shape + (1,) * inner)
    if case.op == "gather_nd":
        which = ndgather.gather_nd(numbers, inputs.indices, case.batch_dims)
    else:
        which = ndgather.gather(numbers, inputs.indices, case.axis, case.batch_dims)
    block = block_elems * data.itemsize
    return (which.ravel() * block).astype(np.uint64), block


@dataclass(frozen=True)
class ReadSetting:
    distance: int
    unroll: int
    threads: int
    hint: str = "T0"

    def label(self) -> str:
        return (
            f"distance {self.distance}, unroll {self.unroll}, threads {self.threads}, "
            f"hint {self.hint}"
        )


class ReadFloor:
    """The read floor of one set of blocks (kept alive with their arrays)."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray, block: int) -> None:
        if offsets.size == 0 or block == 0:
            raise NotApplicable("nothing is read")
        if int(offsets.max()) + block > data.nbytes:
            raise ValueError("a block lies outside data")  # never: offsets come from the gather
        self.data = np.ascontiguousarray(data)
        self.n = offsets.size
        # The first offsets again after the last (np.resize repeats cyclically), so that the
        # kernel prefetches ahead across the wrap without testing for it.
        self.offsets = np.resize(np.asarray(offsets, dtype=np.uint64), self.n + max(DISTANCES))
        self.block = block
        self.lib = library()

    def run(self, setting: ReadSetting, start: int, count: int, reps: int) -> int:
        """Blocks ``start .. start + count`` of the cycle of offsets, ``reps`` times."""
        return int(
            self.lib.floor_read(
                self.data.ctypes.data,
                self.offsets.ctypes.data,
                self.n,
                self.offsets.size,
                self.block,
                start,
                count,
                reps,
                setting.threads,
                setting.distance,
                setting.unroll,
                HINTS.index(setting.hint),
            )
        )

    def tune(
        self,
        threads: int,
        count: int,
        tries: int = 3,
        quick: bool = False,
        reps: int | None = None,
    ) -> tuple[ReadSetting, dict[str, float]]:
        """The fastest setting for reading ``count`` blocks ``reps`` times (default: enough
        repetitions for 200,000 blocks), and the time of each tried (``quick``: two distances,
        no unrolling: checks that it runs). Each trial starts where the last one stopped in
        the cycle of offsets, so that with ``reps=1`` over a long cycle every trial reads
        blocks the previous ones did not."""
        if reps is None:
            reps = max(1, int(2e5 // max(count, 1)))  # small cases: enough work to time
        # The prefetch's distance and hint are one knob: the hint means nothing at distance 0,
        # and a descent that reached distance 0 before trying the hints stayed there (512-byte
        # rows: 0 and T0 chosen, 1.5x the time of 16 and T1, which the gathers then beat).
        distances = (0, 16) if quick else DISTANCES
        hints = ("T0",) if quick else HINTS
        axes: dict[str, tuple[dict[str, Any], ...]] = {
            "threads": tuple({"threads": t} for t in sorted({1, threads})),
            "prefetch": tuple(
                {"distance": d, "hint": h} for d in distances for h in (hints if d else hints[:1])
            ),
            "unroll": tuple({"unroll": u} for u in ((1,) if quick else UNROLLS)),
        }
        times: dict[str, float] = {}
        first = 0

        def trial(settings: list[ReadSetting]) -> None:
            nonlocal first
            todo = [s for s in settings if s.label() not in times]
            elapsed: dict[ReadSetting, list[float]] = {s: [] for s in todo}
            for _ in range(tries):  # interleaved, so that a burst of load hits every setting
                for s in todo:
                    elapsed[s].append(seconds(self.run, s, first, count, reps) / reps)
                    first = (first + count) % self.n
            times.update({s.label(): min(e) for s, e in elapsed.items()})

        # Coordinate descent: each knob in turn over all its values, the others held at the
        # best so far, until a whole pass changes nothing (at most three passes).
        best = ReadSetting(16, 1, threads)
        for _ in range(3):
            before = best
            for values in axes.values():
                candidates = [replace(best, **v) for v in values]
                trial(candidates)
                best = min(candidates, key=lambda s: times[s.label()])
            if best == before:
                break
        return best, times


def tuning_record(setting: ReadSetting, times: dict[str, float]) -> dict[str, Any]:
    """What the JSON keeps of a tuning; ``at_edge``: the best distance is the largest tried
    (a longer one might do better still)."""
    return {
        "chosen": setting.__dict__,
        "at_edge": setting.distance == max(DISTANCES),
        "tried_s": times,
    }


def write_floor_call(nbytes: int, threads: int, tries: int = 3) -> tuple[Call, dict[str, Any]]:
    """The write floor of ``nbytes``, tuned (1 or ``threads`` threads, plain or streaming
    stores, each tried ``tries`` times interleaved, the fastest kept), and the tuning."""
    if nbytes == 0:
        raise NotApplicable("nothing is written")
    lib = library()
    dst = np.ones(nbytes, dtype=np.uint8)  # written once: warm pages
    address = dst.ctypes.data
    reps = max(1, int((64 << 20) // nbytes))  # small outputs: enough work to time
    # Threads only from 1 MiB (as for "copy 2 threads"): below, starting one costs more than
    # the writes, and a repeated tiny write would time thread start-ups, not stores.
    many = threads if nbytes >= 1 << 20 else 1
    settings = [(t, nt) for t in sorted({1, many}) for nt in (False, True)]
    elapsed: dict[tuple[int, bool], list[float]] = {s: [] for s in settings}
    for _ in range(tries):
        for t, nt in settings:
            elapsed[(t, nt)].append(seconds(lib.floor_write, address, nbytes, reps, t, nt) / reps)
    t, nt = min(settings, key=lambda s: min(elapsed[s]))

    def write(reps: int, _keep: np.ndarray = dst) -> None:
        lib.floor_write(address, nbytes, reps, t, nt)

    tuning = {
        "chosen": {"threads": t, "streaming": nt},
        "tried_s": {f"threads {a}, streaming {b}": min(e) for (a, b), e in elapsed.items()},
    }
    return Repeated(write), tuning


# --------------------------------------------------------------------------- candidates

_tuned: dict[str, Any] = {}  # the last case's tuning, for the JSON record
_threads = os.cpu_count() or 1
_quick = False


def read_floor(inputs: Inputs) -> Call:
    why = available()
    if why:
        raise NotApplicable(f"floor kernels unavailable: {why}")
    offsets, block = block_offsets(inputs)
    floor = ReadFloor(inputs.data, offsets, block)
    setting, times = floor.tune(_threads, offsets.size, quick=_quick)
    _tuned.clear()
    _tuned.update(tuning_record(setting, times))
    n = offsets.size

    def read(reps: int) -> int:
        return floor.run(setting, 0, n, reps)

    return Repeated(read)


def write_floor(inputs: Inputs) -> Call:
    why = available()
    if why:
        raise NotApplicable(f"floor kernels unavailable: {why}")
    call, tuning = write_floor_call(inputs.case.output_bytes, _threads)
    _tuned["write"] = tuning
    return call


def configure(threads: int | None, quick: bool = False) -> None:
    """The threads the floors may use (``None``: every core); ``quick``: a short tuning."""
    global _threads, _quick
    _threads = threads or os.cpu_count() or 1
    _quick = quick


def last_tuning() -> dict[str, Any]:
    return dict(_tuned)


FLOORS: tuple[Candidate, ...] = (
    Candidate(READ, FAMILY, "benches/floor", read_floor, checked=False),
    Candidate(WRITE, FAMILY, "benches/floor", write_floor, checked=False),
)
