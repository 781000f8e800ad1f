"""Run one case end to end: build it, prepare every candidate, check they agree, time them.

The result is a plain JSON-ready record (see :func:`run_case`), which is what the printed
tables and those of the docs are rendered from, so they never disagree with a stored JSON file.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from .candidates import Candidate, NotApplicable
from .cases import Case
from .timing import Call, run_interleaved


def _check(case: Case, calls: dict[str, Call], order: list[str], dtype: np.dtype) -> dict[str, str]:
    """Run every call once and compare each output with the first good one.

    Returns what went wrong, by candidate. Outputs are dropped as soon as they are compared,
    so at most two are alive at once.
    """
    failures: dict[str, str] = {}
    reference: np.ndarray | None = None
    reference_name = ""
    for name in order:
        try:
            out = np.asarray(calls[name]())
        except Exception as exc:  # a candidate's failure is reported, not fatal to the run
            failures[name] = f"{name} raised {type(exc).__name__}: {exc}"
            continue
        if out.shape != case.output_shape or out.dtype != dtype:
            failures[name] = (
                f"{name} returned shape {out.shape} dtype {out.dtype}, "
                f"expected {case.output_shape} {dtype}"
            )
        elif reference is None:
            reference, reference_name = out, name
        elif not np.array_equal(out, reference):
            failures[name] = f"{name} differs from {reference_name}"
        del out
    return failures


def summarise(record: dict[str, Any]) -> None:
    """Add ``best`` (fastest candidate of each family) and ``ratios`` (each candidate's median
    over the best of every other family) to a case record."""
    cands: dict[str, dict[str, Any]] = record["candidates"]
    best: dict[str, str] = {}
    for name, c in cands.items():
        if c["family"] not in best or c["median_s"] < cands[best[c["family"]]]["median_s"]:
            best[c["family"]] = name
    record["best"] = best
    record["ratios"] = {
        name: {
            family: c["median_s"] / cands[fastest]["median_s"]
            for family, fastest in best.items()
            if family != c["family"]
        }
        for name, c in cands.items()
    }


def run_case(
    case: Case,
    candidates: Sequence[Candidate],
    *,
    rounds: int,
    min_sample_s: float,
    reference_family: str = "numpy",
    optional_families: Collection[str] = (),
    settle_s: float = 0.0,
) -> dict[str, Any]:
    """Build ``case``, check every applicable candidate against ``reference_family``, time them.

    On any error (a candidate raised, or disagreed with the reference) nothing is timed and
    the record's ``errors`` says why, unless the candidate is of one of ``optional_families``
    (another library, judged rather than tested): then it is left out of the timing and the
    record's ``skipped`` says why, and ``failures`` too, since its failure was not foreseen.
    Candidates that raise :class:`~candidates.NotApplicable` are only ``skipped``. Unchecked
    candidates (yardsticks such as a plain copy) are timed without comparing their output.
    ``settle_s``: see :func:`~timing.run_interleaved`.
    """
    record: dict[str, Any] = {
        "name": case.name,
        "description": case.description,
        "op": case.op,
        "dtype": case.dtype,
        "data_shape": list(case.data_shape),
        "indices_shape": list(case.indices_shape),
        "indices_dtype": "int64",
        "axis": case.axis if case.op == "gather" else None,
        "batch_dims": case.batch_dims,
        "output_shape": list(case.output_shape),
        "output_bytes": case.output_bytes,
        "errors": [],
        "skipped": {},
        "failures": [],
        "candidates": {},
    }
    inputs = case.build()
    calls: dict[str, Call] = {}
    family: dict[str, str] = {}
    checked: dict[str, bool] = {}
    errors: list[str] = record["errors"]
    skipped: dict[str, str] = record["skipped"]

    def fail(name: str, message: str) -> None:
        if family[name] in optional_families:
            skipped[name] = message
            record["failures"].append(message)
        else:
            errors.append(message)

    for cand in candidates:
        if cand.name in calls:
            raise ValueError(f"two candidates named {cand.name!r} apply to case {case.name}")
        family[cand.name] = cand.family
        try:
            call = cand.prepare(inputs)
        except NotApplicable as exc:
            skipped[cand.name] = str(exc)
            continue
        except Exception as exc:
            fail(cand.name, f"{cand.name} could not be prepared: {type(exc).__name__}: {exc}")
            continue
        if call is not None:
            calls[cand.name] = call
            checked[cand.name] = cand.checked

    references = [n for n in calls if family[n] == reference_family]
    if not references:
        errors.append(f"no {reference_family} candidate applies to this case")
        return record
    order = references + [n for n in calls if family[n] != reference_family and checked[n]]
    for name, message in _check(case, calls, order, inputs.data.dtype).items():
        fail(name, message)
        calls.pop(name)
    if errors:
        return record

    timings = run_interleaved(calls, rounds, min_sample_s, settle_s)
    record["candidates"] = {
        name: {"family": family[name], **timing.record()} for name, timing in timings.items()
    }
    summarise(record)
    return record
