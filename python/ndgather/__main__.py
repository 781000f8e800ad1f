"""``python -m ndgather``: the specifications' examples, then a quick timing against NumPy.

The examples are those of the ONNX GatherND page and the OpenVINO Gather-7 page, each checked
against the output the specification gives. The timing runs a few cases through ndgather and
through NumPy's usual idioms (each written out in the table's source), in interleaved rounds,
and reports medians; in the source tree, ``python -m benches compare --peers numpy`` (``make
bench``, ``benches/compare.py``) is the full benchmark against NumPy and ``python -m benches
compare`` the one against every runtime.
The exit status is 1 if any result differs from the expected one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import ndgather

Array = npt.NDArray[Any]


# --------------------------------------------------------------------------- examples


@dataclass(frozen=True)
class Example:
    title: str
    op: str  # "gather_nd" or "gather"
    data: Array
    indices: Array
    expected: Array
    axis: int = 0
    batch_dims: int = 0

    @property
    def call(self) -> str:
        attrs = {"axis": self.axis} if self.op == "gather" else {}
        if self.batch_dims:
            attrs["batch_dims"] = self.batch_dims
        return f"{self.op}(data, indices{''.join(f', {k}={v}' for k, v in attrs.items())})"

    def run(self) -> Array:
        if self.op == "gather_nd":
            return ndgather.gather_nd(self.data, self.indices, self.batch_dims)
        return ndgather.gather(self.data, self.indices, self.axis, self.batch_dims)


def _examples() -> list[Example]:
    i64 = np.int64
    d2 = np.array([[0, 1], [2, 3]], dtype=np.int32)
    d3 = np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], dtype=np.int32)
    return [
        Example(
            "ONNX GatherND, example 1: index tuples address single elements",
            "gather_nd",
            d2,
            np.array([[0, 0], [1, 1]], dtype=i64),
            np.array([0, 3], dtype=np.int32),
        ),
        Example(
            "ONNX GatherND, example 2: short tuples address rows",
            "gather_nd",
            d2,
            np.array([[1], [0]], dtype=i64),
            np.array([[2, 3], [0, 1]], dtype=np.int32),
        ),
        Example(
            "ONNX GatherND, example 3: pairs into a 2x2x2 tensor",
            "gather_nd",
            d3,
            np.array([[0, 1], [1, 0]], dtype=i64),
            np.array([[2, 3], [4, 5]], dtype=np.int32),
        ),
        Example(
            "ONNX GatherND, example 5: batch_dims=1, one tuple per batch",
            "gather_nd",
            d3,
            np.array([[1], [0]], dtype=i64),
            np.array([[2, 3], [4, 5]], dtype=np.int32),
            batch_dims=1,
        ),
        Example(
            "OpenVINO Gather-7, example 2: axis=1, batch_dims=1",
            "gather",
            np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], dtype=np.int32),
            np.array([[0, 0, 4], [4, 0, 0]], dtype=i64),
            np.array([[1, 1, 5], [10, 6, 6]], dtype=np.int32),
            axis=1,
            batch_dims=1,
        ),
    ]


def show_examples() -> bool:
    ok = True
    for ex in _examples():
        result = ex.run()
        good = result.shape == ex.expected.shape and bool(np.array_equal(result, ex.expected))
        ok &= good
        print(ex.title)
        print(f"  data    = {ex.data.tolist()}  # shape {ex.data.shape}")
        print(f"  indices = {ex.indices.tolist()}  # shape {ex.indices.shape}")
        print(f"  ndgather.{ex.call}")
        verdict = "as specified" if good else f"EXPECTED {ex.expected.tolist()}"
        print(f"  -> {result.tolist()}  # shape {result.shape}, {verdict}\n")
    return ok


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class TimedCase:
    name: str
    ndgather: str  # the statement timed for ndgather
    numpy: tuple[str, ...]  # NumPy idioms for the same result; the best one is reported
    namespace: dict[str, Any]


def _timed_cases(quick: bool) -> list[TimedCase]:
    rng = np.random.default_rng(0)
    scale = 10 if quick else 1
    side, points = 2048 // scale, 1_000_000 // scale
    rows, lookups = 100_000 // scale, 200_000 // scale
    batch, length, tokens = 16, 2048 // scale, 512 // scale
    ns: dict[str, Any] = {"np": np, "gather_nd": ndgather.gather_nd, "gather": ndgather.gather}
    return [
        TimedCase(
            "2x2 gather_nd (per-call cost)",
            "gather_nd(d, i)",
            ("d[tuple(i.T)]", "d.take(np.ravel_multi_index(tuple(i.T), d.shape))"),
            {
                **ns,
                "d": np.arange(4, dtype=np.float32).reshape(2, 2),
                "i": np.eye(2, dtype=np.int64),
            },
        ),
        TimedCase(
            f"{points:,} points in {side}x{side} float32",
            "gather_nd(d, i)",
            ("d[tuple(i.T)]", "d.take(np.ravel_multi_index(tuple(i.T), d.shape))"),
            {
                **ns,
                "d": rng.random((side, side), dtype=np.float32),
                "i": rng.integers(0, side, (points, 2)),
            },
        ),
        TimedCase(
            f"{lookups:,} rows of 256 bytes, axis 0",
            "gather(d, i)",
            ("d.take(i, axis=0)", "d[i]"),
            {
                **ns,
                "d": rng.random((rows, 64), dtype=np.float32),
                "i": rng.integers(0, rows, lookups),
            },
        ),
        TimedCase(
            f"batch_dims=1: {batch}x{tokens} of {batch}x{length} rows of 1 KiB",
            "gather_nd(d, i, 1)",
            ("np.take_along_axis(d, i, axis=1)", "d[np.arange(len(d))[:, None], i[..., 0]]"),
            {
                **ns,
                "d": rng.random((batch, length, 256), dtype=np.float32),
                "i": rng.integers(0, length, (batch, tokens, 1)),
            },
        ),
    ]


def _check(case: TimedCase) -> bool:
    expected = eval(case.ndgather, case.namespace)  # our own statements, also timed as text
    return all(bool(np.array_equal(eval(s, case.namespace), expected)) for s in case.numpy)


def _calls_per_sample(timer: timeit.Timer, min_sample_s: float) -> int:
    """How many back-to-back calls make one sample last at least ``min_sample_s``."""
    number = 1
    while (elapsed := timer.timeit(number)) < min_sample_s:
        number = max(2 * number, int(number * 1.2 * min_sample_s / max(elapsed, 1e-9)))
    return number


def _time(case: TimedCase, rounds: int, min_sample_s: float) -> dict[str, float]:
    """Median seconds per call of each statement, over interleaved, rotating rounds."""
    stmts = [case.ndgather, *case.numpy]
    timers = {s: timeit.Timer(s, globals=case.namespace) for s in stmts}
    number = {s: _calls_per_sample(timers[s], min_sample_s) for s in stmts}
    samples: dict[str, list[float]] = {s: [] for s in stmts}
    for r in range(rounds):
        shift = r % len(stmts)
        for s in stmts[shift:] + stmts[:shift]:
            samples[s].append(timers[s].timeit(number[s]) / number[s])
    return {s: statistics.median(v) for s, v in samples.items()}


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def show_timing(quick: bool) -> bool:
    rounds, min_sample_s = (3, 0.002) if quick else (7, 0.02)
    print(
        f"Timing: median of {rounds} interleaved rounds; ndgather threads: "
        f"{ndgather.get_num_threads()}, NumPy is single-threaded\n"
    )
    header = ["case", "ndgather", "best NumPy", "NumPy idiom", "ratio"]
    rows: list[list[str]] = []
    ok = True
    for case in _timed_cases(quick):
        if not _check(case):
            ok = False
            rows.append([case.name, "MISMATCH", "", "", ""])
            continue
        medians = _time(case, rounds, min_sample_s)
        best = min(case.numpy, key=medians.__getitem__)
        ratio = medians[case.ndgather] / medians[best]
        rows.append(
            [case.name, _fmt(medians[case.ndgather]), _fmt(medians[best]), best, f"{ratio:.2f}x"]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print("\nratio = ndgather time / best NumPy time (below 1: ndgather is faster)")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ndgather",
        description="Show the specifications' examples, then time ndgather against NumPy.",
    )
    parser.add_argument("--quick", action="store_true", help="smaller arrays, fewer rounds")
    args = parser.parse_args(argv)
    print(f"ndgather {ndgather.__version__}, NumPy {np.__version__}\n")
    ok = show_examples()
    ok &= show_timing(args.quick)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
