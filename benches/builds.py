"""Two builds of ndgather, process against process: no speed lost in a redesign.

Each build is a folder holding the ``ndgather`` package with its extension (an unpacked
wheel, or ``python/`` after ``make dev``). A round runs one process per build, in turn, the
order swapped every round (A B, B A, ...); each process times every case with the ndgather of
its folder, a case's calls repeated in samples of ``--min-sample-time`` seconds, medians of
``SAMPLES`` samples. The ratio of a case is the median over rounds of new / old within each
round (the two processes run seconds apart, so a drift of the shared VM cancels). Cases: the
14 of ``cases.txt`` at full size (``--cases`` to choose) and the service batches
(``--batches``: int64 ids into a table of 1M rows of 128 bytes, a fresh batch each call from a
cycle far larger than the caches). ``--placements DATA/OUT`` adds, for each case, its ``out=``
call (``mode="clip"``) from a copy of ``data`` and into an ``out`` each placed so many bytes
past a cache line, every pair of the two lists: NumPy puts its large buffers 16 bytes past
one, a table mapped from a ``.npy`` file or another library's buffer may lie on one.

    python -m benches builds --old /tmp/old --new python            # 9 rounds, every case
    python -m benches builds --old A --new B --cases tiny_gather_nd --batches 1 --rounds 15
    python -m benches builds --old A --new B --cases rows_1m_256b --batches '' \
        --placements 0,16/0,16,32,48
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .cases import CASES as CASES
from .cases import Case, placed_copy, select
from .report import fmt_ratio, fmt_seconds, markdown_table, provenance, text_table
from .runner import Run
from .timing import Call, calls_per_sample, keep_resident

ROUNDS = (9, 2)
MIN_SAMPLE_S = (0.05, 0.002)
TABLE = "builds table"
#: Samples per case in each process (their median is the process's figure).
SAMPLES = 7
SERVICE_ROWS, SERVICE_ROW_FLOATS = 1 << 20, 32


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--old", type=Path, required=True, help="folder of the build before")
    parser.add_argument("--new", type=Path, required=True, help="folder of the build after")
    parser.add_argument(
        "--batches", default="1,64,4096", help="service batch sizes, comma-separated ('' none)"
    )
    parser.add_argument(
        "--placements",
        default="",
        metavar="DATA/OUT",
        help="also each case's out= from data placed at these offsets past a line into out at "
        "these, e.g. 0,16/0,16,32,48 ('' none)",
    )


def _service_calls(batches: list[int], quick: bool) -> dict[str, Call]:
    import ndgather

    rows = 4096 if quick else SERVICE_ROWS
    rng = np.random.default_rng(1)
    table = rng.random((rows, SERVICE_ROW_FLOATS), dtype=np.float32)
    keep_resident(table)
    calls = {}
    for n in batches:
        # Far more distinct rows than the caches hold, taken in turn.
        ids = rng.integers(0, rows, size=(max(8, (64 << 20) // 128 // n), n), dtype=np.int64)
        state = iter(range(1 << 62))

        def one(ids: np.ndarray = ids, state: Any = state) -> np.ndarray:
            return ndgather.gather(table, ids[next(state) % len(ids)])

        calls[f"service_{n}"] = Call(one)
    return calls


def _case_call(case: Case) -> Call:
    import ndgather

    x = case.build()
    if case.op == "gather_nd":
        return Call(ndgather.gather_nd, (x.data, x.indices), {"batch_dims": case.batch_dims})
    return Call(
        ndgather.gather,
        (x.data, x.indices),
        {"axis": case.axis, "batch_dims": case.batch_dims},
    )


def parse_placements(text: str) -> tuple[list[int], list[int]]:
    """The offsets past a line of ``--placements DATA/OUT``: two comma-separated lists of
    numbers below 64. Raises ``ValueError`` for anything else."""
    what = f"--placements {text!r}: DATA/OUT offsets below 64, e.g. 0,16/0,16,32,48"
    try:
        data_at, out_at = ([int(v) for v in part.split(",")] for part in text.split("/"))
    except ValueError:
        raise ValueError(what) from None
    if not all(0 <= v < 64 for v in data_at + out_at):
        raise ValueError(what)
    return data_at, out_at


def _placement_calls(case: Case, placements: str) -> dict[str, Call]:
    """``case``'s ``out=`` call from ``data`` and into ``out`` placed at each pair of the
    offsets past a line ``placements`` names (``parse_placements``)."""
    import ndgather

    data_at, out_at = parse_placements(placements)
    x = case.build()
    want = np.zeros(case.output_shape, dtype=x.data.dtype)
    calls = {}
    for d in data_at:
        data = placed_copy(x.data, d)
        for o in out_at:
            out = placed_copy(want, o)
            if case.op == "gather_nd":
                call = Call(
                    ndgather.gather_nd,
                    (data, x.indices),
                    {"batch_dims": case.batch_dims, "out": out, "mode": "clip"},
                )
            else:
                kw = {"axis": case.axis, "batch_dims": case.batch_dims, "out": out, "mode": "clip"}
                call = Call(ndgather.gather, (data, x.indices), kw)
            calls[f"{case.name} out= data+{d} out+{o}"] = call
    return calls


def child(argv: list[str]) -> None:
    """One process of a round: ``[min_sample_s, quick, batches, placements, case...]``; prints
    a JSON object of case -> median seconds per call."""
    min_sample_s, quick, batches, placements, *names = argv
    cases = select(names or None, CASES)
    if quick == "1":
        cases = [c.shrunk() for c in cases]
    out = {}

    def timed(name: str, call: Call) -> None:
        call()
        timer = call.timer()
        number = calls_per_sample(timer, float(min_sample_s))
        out[name] = statistics.median(timer.timeit(number) / number for _ in range(SAMPLES))

    for case in cases:
        timed(case.name, _case_call(case))
        if placements:
            for name, call in _placement_calls(case, placements).items():
                timed(name, call)
    sizes = [int(b) for b in batches.split(",") if b]
    for name, call in _service_calls(sizes, quick == "1").items():
        timed(name, call)
    print(json.dumps(out))


def _process(build: Path, run: Run) -> dict[str, float]:
    """One process timing every case with the ndgather of ``build``."""
    code = (
        f"import sys; sys.path.insert(0, {str(build.resolve())!r}); "
        "from benches.builds import child; child(sys.argv[1:])"
    )
    names = [c.name for c in run.cases] if run.args.cases else []
    args = [
        str(run.min_sample_s),
        "1" if run.quick else "0",
        run.args.batches,
        run.args.placements,
        *names,
    ]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the process of {build} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(run: Run) -> list[dict[str, Any]]:
    builds = {"old": run.args.old, "new": run.args.new}
    for tag, build in builds.items():
        if not (build / "ndgather").is_dir():
            run.parser.error(f"--{tag} {build}: no ndgather package there")
    if run.args.placements:
        try:
            parse_placements(run.args.placements)
        except ValueError as e:
            run.parser.error(str(e))
    run.results["builds"] = {tag: str(b) for tag, b in builds.items()}
    times: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for r in range(run.rounds):
        for tag in ("old", "new") if r % 2 == 0 else ("new", "old"):
            for name, s in _process(builds[tag], run).items():
                times[tag].setdefault(name, []).append(s)
        print(f"  round {r + 1} of {run.rounds} done", flush=True)
    return [
        {
            "name": name,
            "old_s": old,
            "new_s": times["new"][name],
            "ratio": statistics.median(n / o for n, o in zip(times["new"][name], old, strict=True)),
        }
        for name, old in times["old"].items()
    ]


def rows(records: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["case", "old (median)", "new (median)", "new / old (median of rounds)"]
    table = [
        [
            r["name"],
            fmt_seconds(statistics.median(r["old_s"])),
            fmt_seconds(statistics.median(r["new_s"])),
            fmt_ratio(r["ratio"]),
        ]
        for r in records
    ]
    return header, table


def text(results: dict[str, Any]) -> str:
    return text_table(*rows(results["cases"]))


def markdown(results: dict[str, Any]) -> str:
    builds = results["builds"]
    return "\n\n".join(
        [
            markdown_table(*rows(results["cases"])),
            f"Old: `{builds['old']}`, new: `{builds['new']}`; {results['rounds']} rounds of one "
            "process per build, the order swapped each round; " + provenance(results),
        ]
    )
