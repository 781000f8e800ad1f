"""The measured limits of a gather: the gather floor, and its two halves (the random reads, the
sequential write of the output).

A gather reads blocks (rows, slices, single elements) at the addresses its indices name and
writes them out in order. ``floor/`` is a small Rust crate (C ABI, no PyO3, built here with
``cargo build --release`` for the running CPU and loaded with ``ctypes``; the shipped
extension is untouched) with three kernels:

* ``gather floor``, the limit of the tables: an unchecked gather of the same blocks, from
  precomputed byte offsets (no index to check or resolve), each copied to its place in a warm
  output buffer, in order: the reads and the writes a gather must do, and nothing else. It is
  its own code, not ndgather's: straight-line copies compiled for the common block widths (1
  to 8, 16, 32, 60, 64, 128, 140, 256, 512 and 1024 bytes; for blocks that do not start on a
  line, in 16-byte pieces, none of which then straddles two lines), ``memcpy`` otherwise;
  software prefetch some blocks ahead (and inside a block over 4 KiB), and of its own
  offsets; plain or streaming (non-temporal) stores; on 1 or every thread (taking chunks of
  blocks as they come free, each writing an output of its own, or each its share of one
  output), into an output on a
  line or, for blocks of whole lines, placed in its lines as ``data``'s rows are. The
  prefetch distance and hint, the unrolling, the streaming, the thread count and split and
  the output's place are tuned per case (:meth:`GatherFloor.tune`, the same coordinate
  descent as the read floor's, from a second start for outputs a gather streams, with a
  run-off of the finalists at the end); the timed rounds
  take turns with that setting (every other turn) and the same with the streaming, the split,
  the 16-byte moves or the output's place flipped (:data:`FLIPPED`), the floor's fastest
  sample being the fastest of them. Checked once per case to produce the gather's output.
* ``read floor``: loads one byte of every cache line of the same blocks, at the same
  addresses, in the same order, on every thread, with software prefetch some blocks ahead;
  for the cases' block widths in straight-line code compiled for the width (``touch_fixed``),
  as a gather's copy of a fixed width is (a loop over a block's lines was beaten by the
  gathers). Tuned (:meth:`ReadFloor.tune`: coordinate descent over :data:`DISTANCES`,
  :data:`UNROLLS`, :data:`HINTS` and 1 or all threads, each setting the best of three runs,
  until a pass changes nothing): the fastest way we found to bring those lines in.
* ``write floor``: only the writes of the output's bytes into a warm buffer, plain stores
  (``memset``) or streaming (non-temporal) ones, on 1 or every thread, whichever is fastest.

The larger of the read and the write floor was the limit once; no gather reaches it, as reads
and writes share the caches and the memory bus (issue 31), so the limit of the tables is now
the gather floor (``report.limit``; the tables take each floor's fastest sample, the gathers'
medians: ``report.floor_time``), and the read and write floors stay beside it as where the
time of the gather floor goes. A gather faster than the gather floor means the floor is not
one (the tables flag it). All kernels repeat their work inside one native call, so the time
per repetition has no cost of calling from Python in it.
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ndgather
import numpy as np

from .candidates import Candidate, NotApplicable
from .cases import Inputs, placed_buffer
from .timing import Call, Repeated, seconds

CRATE = Path(__file__).with_name("floor")
FAMILY = "floor"
READ, WRITE, GATHER = "read floor", "write floor", "gather floor"
#: The gather floor of one call at a time (``GatherFloor``'s ``per_call``): service.py.
CALL = "call floor"
DISTANCES = (0, 4, 8, 16, 32, 64, 128, 256, 512)
#: The knobs of the gather floor's setting that its timed rounds also try flipped, one at a
#: time (gather_floor): the stores, the split of the output, the 16-byte moves, the output's
#: place in its lines.
FLIPPED = ("streaming", "shared", "narrow", "placed")
#: A pause after which the gather floor's timed call takes its next setting (gather_floor):
#: longer than between a sample's lead-in and the sample, shorter than a round of the others.
TURN_GAP_S = 0.002

#: Outputs from which the gather floor's tuning also descends from streaming stores
#: (GatherFloor.tune).
STREAMED_OUTPUT_BYTES = 16 << 20
#: Blocks a gather floor copies, untimed, before its tuning (see GatherFloor.tune).
WARM_BLOCKS = 1 << 19
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
    lib.floor_offsets_fit.argtypes = [ptr, size, size, size]
    lib.floor_offsets_fit.restype = ctypes.c_bool
    flag = ctypes.c_bool
    lib.floor_gather.argtypes = [ptr, ptr, size, size, size, ptr, size, size] + [size] * 4
    lib.floor_gather.argtypes += [flag, size, size, size, flag, flag, flag, flag]
    lib.floor_gather.restype = ctypes.c_uint64
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
        repetitions for 200,000 blocks, at most 64 MiB of them), and the time of each tried
        (``quick``: two distances, no unrolling: checks that it runs); see :func:`descend`."""
        axes = {
            "threads": tuple({"threads": t} for t in sorted({1, threads})),
            "prefetch": prefetch_axis(quick),
            "unroll": tuple({"unroll": u} for u in ((1,) if quick else UNROLLS)),
        }
        return descend(
            self.run, self.n, self.block, ReadSetting(16, 1, threads), axes, count, tries, reps
        )


def prefetch_axis(quick: bool) -> tuple[dict[str, Any], ...]:
    """The prefetch's distance and hint, one knob: the hint means nothing at distance 0, and a
    descent that reached distance 0 before trying the hints stayed there (512-byte rows: 0 and
    T0 chosen, 1.5x the time of 16 and T1, which the gathers then beat)."""
    distances = (0, 16) if quick else DISTANCES
    hints = ("T0",) if quick else HINTS
    return tuple({"distance": d, "hint": h} for d in distances for h in (hints if d else hints[:1]))


S = Any  # a setting: ReadSetting or GatherSetting (frozen dataclasses with ``label``)


def descend(
    run: Any,
    n: int,
    block: int,
    start: S | list[S],
    axes: dict[str, tuple[dict[str, Any], ...]],
    count: int,
    tries: int,
    reps: int | None,
) -> tuple[S, dict[str, float]]:
    """Coordinate descent of ``run(setting, start, count, reps)`` over ``axes``: each knob in
    turn over all its values, the others held at the best so far, until a whole pass changes
    nothing (at most three passes), from each of the ``start`` settings given (knobs that
    interact, such as the stores and the prefetch, can hold a descent from one start in a
    valley another start avoids), then a run-off of the finalists of all; each setting's time the
    best of ``tries`` runs (the finalists' of twice as many), interleaved, so that a burst of
    load hits every setting; the run-off's winner the finalist whose runs have the fastest
    median. Each run starts where the last
    one stopped in the cycle of ``n`` offsets, so that with ``reps=1`` over a long cycle every
    run reads blocks the previous ones did not. ``reps`` (default: enough for 200,000 blocks)
    gives small cases enough work to time (default: 200,000 blocks, at most 64 MiB of them).
    Returns the best setting and every time tried."""
    if reps is None:
        # Enough for 200,000 blocks, but no more than 64 MiB of blocks a run (128 KiB slices:
        # 48 passes over 512 MiB a run made one case's tuning last many minutes).
        reps = max(1, min(int(2e5 // max(count, 1)), (64 << 20) // max(count * block, 1)))
    times: dict[str, float] = {}
    runs: dict[str, list[float]] = {}  # every run's time, for the run-off's medians
    first = 0

    def trial(settings: list[S]) -> None:
        nonlocal first
        todo = [s for s in settings if s.label() not in times]
        elapsed: dict[S, list[float]] = {s: [] for s in todo}
        for _ in range(tries):
            for s in todo:
                elapsed[s].append(seconds(run, s, first, count, reps) / reps)
                first = (first + count) % n
        times.update({s.label(): min(e) for s, e in elapsed.items()})
        for s, e in elapsed.items():
            runs.setdefault(s.label(), []).extend(e)

    tried: dict[str, S] = {}
    ends: list[S] = []
    for best in start if isinstance(start, list) else [start]:
        for _ in range(3):
            before = best
            for values in axes.values():
                candidates = [replace(best, **v) for v in values]
                tried.update({c.label(): c for c in candidates})
                trial(candidates)
                best = min(candidates, key=lambda s: times[s.label()])
            if best == before:
                break
        ends.append(best)
    best = min(ends, key=lambda s: times[s.label()])
    # A run-off: a burst of load (another process on a 2-core VM) in one knob's trials can
    # steer the descent wrong (a 512 MiB gather tuned to plain stores, 1.4x the time of
    # streaming ones). The four fastest settings and the best with each two-valued knob
    # flipped are timed ``tries`` times more, interleaved; each keeps its fastest run. The
    # winner is the one with the fastest median of all its runs, not of its single fastest:
    # the rounds time it over and over, and a setting whose runs vary (threads writing
    # outputs of their own, twice the memory: 13.1 ms at best, 15-39 ms in the rounds of
    # rows_1m_256b on the Intel VM, beaten by ndgather) is not a floor for one lucky run.
    finalists = sorted(tried.values(), key=lambda c: times[c.label()])[:4]
    finalists += [replace(best, **v) for vs in axes.values() if len(vs) == 2 for v in vs]
    finalists = list({c.label(): c for c in finalists}.values())
    earlier = {c.label(): times.pop(c.label(), math.inf) for c in finalists}
    trial(finalists)
    times.update({k: min(t, times[k]) for k, t in earlier.items()})
    best = min(finalists, key=lambda s: statistics.median(runs[s.label()]))
    return best, times


@dataclass(frozen=True)
class GatherSetting:
    distance: int
    unroll: int
    threads: int
    hint: str = "T0"
    streaming: bool = False
    shared: bool = False  # the threads' split: see GatherFloor
    narrow: bool = False  # rows off a line: 16-byte moves, last line requested (floor/: copy_run)
    placed: bool = False  # the output placed in its lines as data's rows (GatherFloor)
    early: bool = False  # with narrow: the prefetch before the copy, first piece first

    def label(self) -> str:
        return (
            f"distance {self.distance}, unroll {self.unroll}, threads {self.threads}, "
            f"hint {self.hint}, streaming {self.streaming}, shared {self.shared}, "
            f"narrow {self.narrow}, placed {self.placed}, early {self.early}"
        )


class GatherFloor:
    """The gather floor of one set of blocks: an unchecked gather of them into a warm output
    of ``segment`` blocks (the whole gather; in ``service.py`` one batch), kept alive with its
    arrays.

    Its threads split the work one of two ways (``GatherSetting.shared``, tuned), so that two
    threads never write the same bytes: each takes chunks of blocks as it comes free and
    writes a segment of its own (``threads`` segments are allocated: a loaded machine's late
    thread leaves its share to the other, but the output takes ``threads`` times the cache),
    or each takes its share of every segment of one shared output, as a gather splits its
    output (the same cache as the gather's: ``tokens_b1``'s 32 MiB output, data in the L3,
    took 1.2x ndgather's time split the first way).

    With ``per_call``, each segment is gathered as one call gathers its batch: the call's first
    blocks are requested before its copy starts, none past its last is requested, and the
    threads split every segment (``shared``) and wait for each other at its end (a spin
    barrier). Without it, a run of segments is one stream: the prefetch reaches into the next
    segments' blocks, which no call knows of, and the threads never wait for each other."""

    def __init__(
        self,
        data: np.ndarray,
        offsets: np.ndarray,
        block: int,
        segment: int,
        threads: int,
        per_call: bool = False,
    ) -> None:
        if offsets.size == 0 or block == 0:
            raise NotApplicable("nothing is gathered")
        self.data = np.ascontiguousarray(data)
        self.n = offsets.size
        # As for ReadFloor: the first offsets again after the last, for the prefetch ahead.
        self.offsets = np.resize(np.asarray(offsets, dtype=np.uint64), self.n + max(DISTANCES))
        self.block, self.segment, self.threads = block, segment, max(1, threads)
        self.per_call = per_call
        self.lib = library()
        if not self.lib.floor_offsets_fit(
            self.offsets.ctypes.data, self.offsets.size, block, self.data.nbytes
        ):
            raise ValueError("a block lies outside data")  # never: offsets come from the gather
        # One region per thread, on a line, written once: warm pages, as a gather's ``out=``
        # is.
        size = self.threads * segment * block
        self.out = placed_buffer(size, 0)
        # And one placed in its lines as data's rows are (NumPy's large buffers start 16 bytes
        # past a line), for blocks of whole lines: a streamed copy then loads and stores each
        # line on the same steps, as ndgather's new results do (docs/architecture.md); with the
        # output on a line every 64-byte load of such rows straddled two lines (the floor was
        # beaten in 4 of 14 cases on the AMD kind at 284855b). None where the two coincide.
        phase = self.data.ctypes.data % 64 // 16 * 16
        self.placed_out = placed_buffer(size, phase) if phase and block % 64 == 0 else None

    def output(self, setting: GatherSetting) -> np.ndarray:
        """The buffer ``setting`` gathers into."""
        if setting.placed and self.placed_out is not None:
            return self.placed_out
        return self.out

    def run(self, setting: GatherSetting, start: int, count: int, reps: int) -> int:
        """Blocks ``start .. start + count`` of the cycle of offsets, ``reps`` times."""
        out = self.output(setting)
        done = int(
            self.lib.floor_gather(
                self.data.ctypes.data,
                self.offsets.ctypes.data,
                self.n,
                self.offsets.size,
                self.block,
                out.ctypes.data,
                out.nbytes,
                self.segment,
                start,
                count,
                reps,
                min(setting.threads, self.threads),
                setting.shared,
                setting.distance,
                setting.unroll,
                HINTS.index(setting.hint),
                setting.streaming,
                setting.narrow,
                setting.early,
                self.per_call,
            )
        )
        if done != count * max(reps, 1):
            raise RuntimeError(f"floor_gather refused the sizes (copied {done} blocks)")
        return done

    def tune(
        self,
        threads: int,
        count: int,
        tries: int = 3,
        quick: bool = False,
        reps: int | None = None,
        also: Sequence[GatherSetting] = (),
    ) -> tuple[GatherSetting, dict[str, float]]:
        """The fastest setting for gathering ``count`` blocks ``reps`` times, as
        :meth:`ReadFloor.tune` finds its own (:func:`descend`), with plain or streaming
        stores, the threads' split, the moves for rows off a line (``narrow``) and the
        output's place (``placed``) as four more knobs; from a second start, streaming stores,
        where the output is one a gather streams (:data:`STREAMED_OUTPUT_BYTES`); and from
        each setting of ``also`` (other floors' tunings of the same blocks)."""
        axes: dict[str, tuple[dict[str, Any], ...]] = {
            "threads": tuple({"threads": t} for t in sorted({1, min(threads, self.threads)})),
            # Per call, the threads share each segment (the library splits it so whatever
            # is asked).
            "split": (
                ({"shared": True},) if self.per_call else ({"shared": False}, {"shared": True})
            ),
            # One knob with the prefetch: rows off a line want both the narrow moves and a
            # prefetch to the outer caches (T1/T2), and either alone was no faster, so that a
            # descent over them one at a time stayed where it started (AMD kind).
            # The narrow moves with the prefetch after the copy, last piece first, or
            # (`early`) before it, first piece first, as ndgather streams rows off a line: its
            # 64-byte and 1 KiB rows (gather_batch, tokens_b1) beat the floor by 1% without it.
            "prefetch": tuple(
                {**p, "narrow": narrow, "early": early}
                for narrow, early in ((False, False), (True, False), (True, True))
                for p in prefetch_axis(quick)
            ),
            "unroll": tuple({"unroll": u} for u in ((1,) if quick else UNROLLS)),
            "streaming": ({"streaming": False}, {"streaming": True}),
        }
        if self.placed_out is not None:
            axes["placed"] = ({"placed": False}, {"placed": True})
        start = GatherSetting(16, 1, min(threads, self.threads), shared=self.per_call)
        if self.data.ctypes.data % 64 or self.block % 64:
            # Blocks off a line (NumPy's large buffers start 16 bytes past one): start from
            # what suits them (128-byte rows, AMD kind: 8-10 ns a row, against 24 ns for every
            # setting near the usual start, where a descent from there stayed). A setting's
            # speed there depends on which ran before it, for some 100,000 blocks (T2 after T0:
            # 27 ns a row falling to 8 over eight runs of 16,384), so the descent is started,
            # and the hardware warmed, where the fast ones are.
            start = replace(start, distance=64, hint="T2", narrow=True)
        # A second start where the output is large enough that a gather streams it (sixteen
        # times a 1 MiB L2, ndgather's bound on the AMD kind): streaming stores into the
        # output placed as data's rows are, hint T1, 16 blocks ahead, whole-line moves. From
        # the first start alone, a descent on `rows_1m_256b` reached 19.6 ms with plain
        # stores, where every prefetch scored 22-24 ms, and never tried this one: 12-14.5 ms
        # (AMD kind, ndgather 13-14 ms; the stores and the prefetch interact).
        starts = [start]
        if not quick and self.segment * self.block >= STREAMED_OUTPUT_BYTES:
            streamed = replace(start, distance=16, hint="T1", narrow=False, streaming=True)
            starts.append(replace(streamed, placed=self.placed_out is not None))
            if start.narrow:
                # And, for blocks off a line, ndgather's own way with such an output: 16-byte
                # streaming stores, each block requested into L2 before the copy.
                starts.append(replace(streamed, narrow=True, early=True))
        for other in also:
            starts.append(
                replace(
                    other,
                    shared=other.shared or self.per_call,
                    threads=min(other.threads, threads, self.threads),
                )
            )
        # Untimed first, with the start setting: the first few hundred thousand random blocks
        # of a large table just made ran 2-5x slower than the rest (same rows: 55 ns a row
        # falling to 11 over about 300,000).
        if not quick:
            self.run(start, 0, min(self.n, WARM_BLOCKS), 1)
        return descend(self.run, self.n, self.block, starts, axes, count, tries, reps)


def tuning_record(setting: ReadSetting | GatherSetting, times: dict[str, float]) -> dict[str, Any]:
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


def gather_floor(inputs: Inputs) -> Call:
    why = available()
    if why:
        raise NotApplicable(f"floor kernels unavailable: {why}")
    offsets, block = block_offsets(inputs)
    n = offsets.size
    floor = GatherFloor(inputs.data, offsets, block, n, _threads)
    setting, times = floor.tune(_threads, n, quick=_quick)
    _tuned["gather"] = tuning_record(setting, times)
    # It gathers: one pass on one thread fills the first region with the case's output (the
    # blocks taken from data's bytes by NumPy; the offsets are multiples of the block).
    floor.run(replace(setting, threads=1), 0, n, 1)
    rows = np.ascontiguousarray(inputs.data).reshape(-1).view(np.uint8).reshape(-1, block)
    out = floor.output(setting)
    if not np.array_equal(out[: n * block].reshape(n, block), rows[offsets // block]):
        raise RuntimeError("the gather floor's output differs from the gather")

    # The rounds take turns with the chosen setting and the same with each of FLIPPED
    # flipped: the floor's time is its fastest sample (report.floor_time), so the fastest of
    # them in the rounds. The tuning runs back to back, the rounds between the other
    # candidates, and the two disagreed on the store kind (AMD kind: rows_1m_f64 tuned to
    # plain stores at 28.5 ms, 44-48 ms in the rounds, where ndgather's streamed gather took
    # 27 ms and broke the floor). The turn passes only after a gap (other candidates ran): a
    # sample's untimed lead-in and the sample, back to back, are the same.
    flips = [k for k in FLIPPED if k != "placed" or floor.placed_out is not None]
    # The chosen setting every other turn: the floor's time is the fastest of few samples, and
    # the flipped ones are mostly slower (AMD kind, nine rounds: two samples of the chosen
    # setting, where ndgather's median of the same work beat them by 1%).
    turns = [t for k in flips for t in (setting, replace(setting, **{k: not getattr(setting, k)}))]
    _tuned["gather"]["rounds_take_turns"] = [s.label() for s in turns]
    state = {"at": 0, "ended": time.perf_counter()}

    def gather(reps: int) -> int:
        if time.perf_counter() - state["ended"] > TURN_GAP_S:
            state["at"] = (state["at"] + 1) % len(turns)
        done = floor.run(turns[int(state["at"])], 0, n, reps)
        state["ended"] = time.perf_counter()
        return done

    return Repeated(gather)


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
    Candidate(READ, FAMILY, "benches/floor", read_floor, checked=False),  # first: clears _tuned
    Candidate(GATHER, FAMILY, "benches/floor", gather_floor, checked=False),
    Candidate(WRITE, FAMILY, "benches/floor", write_floor, checked=False),
)
