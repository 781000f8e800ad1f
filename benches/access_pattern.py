"""How much of a large gather's time is the order of its indices: the same gather, same
shapes and bytes, with random, run-wise and sequential indices, beside the copy limits.

For each large row-gather case of ``cases.py``, ndgather writes into a warm ``out=`` array
with three sets of indices of the same shape:

* ``random``: the case's own, uniform over the addressed axis (what compare.py times);
* ``runs of 64``: random starts, each followed by the next 63 rows (64 consecutive rows);
* ``sequential``: ``0, 1, 2, ...`` (wrapping around the axis).

Every pattern moves the same bytes through the same code (offsets, copy loop, prefetch,
non-temporal stores); only where the reads land differs. If ``sequential`` runs at the copy
limits and ``random`` does not, the gap is what the machine charges for reading rows at
random addresses, not work the kernel could skip.

    python -m benches access                     # every row case, 11 rounds
    python -m benches access --quick             # tiny sizes (CI: runs and agrees)
    python -m benches access --json bench-results/access.json --doc docs/performance.md
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from . import peers
from .candidates import NotApplicable, ndgather_out
from .cases import CASES as CASES
from .cases import Case, Inputs
from .report import fmt_ratio, fmt_seconds, markdown_table, provenance, text_table
from .runner import Run
from .timing import Call, run_interleaved

DEFAULT_CASES = ("rows_1m_u8", "rows_1m_256b", "rows_1m_f64", "gather_axis0")
ROUNDS = (11, 3)
MIN_SAMPLE_S = (0.02, 0.001)
TABLE = "access table"
RUN = 64


def patterns(inputs: Inputs, seed: int = 1) -> dict[str, np.ndarray]:
    """The case's random indices, and runs and a sequence of the same shape and dtype."""
    idx = inputs.indices
    size = inputs.case.index_bounds[0]
    n = idx.size
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, max(size - RUN, 0) + 1, size=-(-n // RUN))
    runs = (starts[:, None] + np.arange(RUN)).ravel()[:n] % size
    sequential = np.arange(n) % size
    return {
        "random": idx,
        f"runs of {RUN}": runs.astype(idx.dtype).reshape(idx.shape),
        "sequential": sequential.astype(idx.dtype).reshape(idx.shape),
    }


def reference(case: Case, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """NumPy's own result, to check every pattern's output."""
    if case.op == "gather_nd":
        return np.take(data, indices[..., 0], axis=0)
    return np.take(data, indices, axis=case.axis)


def measure(run: Run) -> list[dict[str, Any]]:
    return run.each(run.cases, lambda case: measure_case(run, case))


def measure_case(run: Run, case: Case) -> dict[str, Any]:
    inputs = case.build()
    calls: dict[str, Call] = {}
    for name, idx in patterns(inputs).items():
        call = ndgather_out(replace(inputs, indices=idx))  # the out= call compare.py times
        if not np.array_equal(call(), reference(case, inputs.data, idx)):
            raise SystemExit(f"{case.name}: ndgather disagrees with NumPy on {name} indices")
        calls[name] = call
    calls["copy"] = peers.copy_warm(inputs)
    try:
        calls["copy 2 threads"] = peers.copy_two_threads(inputs)
    except NotApplicable:
        pass
    timings = run_interleaved(calls, run.rounds, run.min_sample_s, warm=True)
    peers.release()
    return {
        "name": case.name,
        "description": case.description,
        "output_bytes": case.output_bytes,
        "medians": {name: t.median for name, t in timings.items()},
    }


def rows(records: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    names = list(records[0]["medians"]) if records else []
    gathers = [n for n in names if not n.startswith("copy")]
    header = ["case", *(f"out=, {n}" for n in gathers), "copy", "copy 2 threads"]
    header += [f"{n} / copy 2 threads" for n in gathers]
    table = []
    for r in records:
        m = r["medians"]
        limit = m.get("copy 2 threads")
        line = [r["name"], *(fmt_seconds(m[n]) for n in gathers), fmt_seconds(m["copy"])]
        line.append(fmt_seconds(limit) if limit else "-")
        line += [fmt_ratio(m[n] / limit) if limit else "-" for n in gathers]
        table.append(line)
    return header, table


def text(results: dict[str, Any]) -> str:
    return text_table(*rows(results["cases"]))


def markdown(results: dict[str, Any]) -> str:
    return "\n\n".join(
        [
            f"Median per call over {results['rounds']} interleaved rounds; " + provenance(results),
            markdown_table(*rows(results["cases"])),
        ]
    )
