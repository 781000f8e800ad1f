"""Prepared gathers: one set of indices used on many arrays of one shape, prepared once
(``ndgather.prepare_gather_nd``) against a one-shot ``ndgather.gather_nd`` per array.

For each case, the same indices gather from ``--arrays`` arrays (10 by default) of the
case's shape and dtype, each call returning a fresh result:

* ``10 one-shot``: ``ndgather.gather_nd(a, indices)`` for each array;
* ``prepare + 10``: ``p = ndgather.prepare_gather_nd(shape, indices)``, then ``p(a)`` for
  each array: what a caller that prepares for one batch of arrays pays;
* ``10 prepared``: the ``p(a)`` calls alone (``p`` made beforehand): what a caller that keeps
  ``p`` pays.

The arrays are ``--distinct`` (2 by default) different arrays used in turn, each far larger
than the caches, so that no call finds the previous one's data in cache; more cost memory,
not realism. Every candidate is checked against the one-shot result first.

    python -m benches prepared                    # points_2m, rows_1m_256b, 11 rounds
    python -m benches prepared --quick            # tiny sizes (CI: runs and agrees)
    python -m benches prepared --json bench-results/prepared.json --doc docs/performance.md
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import ndgather
import numpy as np

from .cases import CASES as CASES
from .cases import Case
from .report import fmt_ratio, fmt_seconds, markdown_table, provenance, text_table
from .runner import Run
from .timing import Call, run_interleaved

DEFAULT_CASES = ("points_2m", "rows_1m_256b")
ROUNDS = (11, 3)
MIN_SAMPLE_S = (0.05, 0.001)
#: Untimed calls before each sample (full, quick): see ``run_interleaved``'s ``lead_in_s``.
LEAD_IN_S = (0.05, 0.0)
TABLE = "prepared table"


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arrays", type=int, default=10, help="arrays per batch (default 10)")
    parser.add_argument(
        "--distinct", type=int, default=2, help="different arrays used in turn (default 2)"
    )


def one_shot(arrays: Sequence[np.ndarray], indices: np.ndarray) -> None:
    for a in arrays:
        ndgather.gather_nd(a, indices)


def prepare_and_call(arrays: Sequence[np.ndarray], indices: np.ndarray) -> None:
    p = ndgather.prepare_gather_nd(arrays[0].shape, indices)
    for a in arrays:
        p(a)


def prepared_calls(arrays: Sequence[np.ndarray], p: ndgather.PreparedGather) -> None:
    for a in arrays:
        p(a)


def measure(run: Run) -> list[dict[str, Any]]:
    return run.each(run.cases, lambda case: measure_case(run, case))


def measure_case(run: Run, case: Case) -> dict[str, Any]:
    n_arrays, distinct = run.args.arrays, run.args.distinct
    if case.op != "gather_nd":
        raise SystemExit(f"{case.name}: the prepared suite times gather_nd cases only")
    inputs = case.build()
    rng = np.random.default_rng(2)
    pool = [inputs.data] + [
        rng.permutation(inputs.data.ravel()).reshape(inputs.data.shape)
        for _ in range(max(distinct, 1) - 1)
    ]
    arrays = [pool[i % len(pool)] for i in range(n_arrays)]
    idx = inputs.indices
    p = ndgather.prepare_gather_nd(case.data_shape, idx)
    for a in pool:
        if not np.array_equal(p(a), ndgather.gather_nd(a, idx)):
            raise SystemExit(f"{case.name}: the prepared gather disagrees with gather_nd")
    calls = {
        f"{n_arrays} one-shot": Call(one_shot, (arrays, idx)),
        f"prepare + {n_arrays}": Call(prepare_and_call, (arrays, idx)),
        f"{n_arrays} prepared": Call(prepared_calls, (arrays, p)),
    }
    timings = run_interleaved(
        calls, run.rounds, run.min_sample_s, warm=True, lead_in_s=LEAD_IN_S[run.quick]
    )
    return {
        "name": case.name,
        "description": case.description,
        "arrays": n_arrays,
        "distinct_arrays": len(pool),
        "prepared_nbytes": p.nbytes,
        "medians": {name: t.median for name, t in timings.items()},
        "samples": {name: t.samples for name, t in timings.items()},
    }


def rows(records: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = [
        "case",
        "one-shot calls",
        "prepare + calls",
        "prepared calls",
        "one-shot / (prepare + calls)",
        "one-shot / prepared calls",
        "prepared holds",
    ]
    table = []
    for r in records:
        m = list(r["medians"].values())
        table.append(
            [
                f"{r['name']} ({r['arrays']} arrays)",
                *(fmt_seconds(v) for v in m),
                fmt_ratio(m[0] / m[1]),
                fmt_ratio(m[0] / m[2]),
                f"{r['prepared_nbytes'] / 2**20:.1f} MiB",
            ]
        )
    return header, table


def text(results: dict[str, Any]) -> str:
    return text_table(*rows(results["cases"]))


def markdown(results: dict[str, Any]) -> str:
    return "\n\n".join(
        [
            markdown_table(*rows(results["cases"])),
            f"Median per batch of calls over {results['rounds']} interleaved rounds; "
            + provenance(results),
        ]
    )
