#!/usr/bin/env python3
"""Compare ndgather with NumPy's fastest idiom on fixed, named cases.

For every case (see ``cases.py``) each applicable NumPy idiom (fancy indexing, ``take``,
``ravel_multi_index`` + ``take``, ``take_along_axis``; see ``candidates.py``) and ndgather,
with and without ``out=``, is run once and its output checked against NumPy's; then all are
timed in interleaved rounds (``timing.py``). Reported per case: the median time per call of
every candidate, NumPy's best idiom, and ndgather's time over that best (below 1 is faster).

    python benches/compare_numpy.py                              # every case, 15 rounds
    python benches/compare_numpy.py --quick                      # tiny sizes, 3 rounds (CI)
    python benches/compare_numpy.py --cases points_2m,tiny_gather_nd --rounds 31
    python benches/compare_numpy.py --json bench-results/compare_numpy.json

ndgather uses its default thread count (``NDGATHER_NUM_THREADS`` or every CPU); NumPy is
single-threaded. The exit status is 1 when any candidate raised or disagreed with NumPy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ndgather
from candidates import NDGATHER, NUMPY
from cases import CASES, SEED, select
from report import case_detail, describe_machine, fmt_seconds, machine_info, summary_text
from runner import run_case

SUBJECT, BASELINE = "ndgather", "numpy"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Compare ndgather with NumPy's fastest idiom on fixed named cases.",
        epilog="cases: " + ", ".join(c.name for c in CASES),
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and few rounds: checks that it runs"
    )
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 15, quick 3)")
    parser.add_argument(
        "--min-sample-time",
        type=float,
        help="seconds each timed batch of calls lasts at least (default 0.02, quick 0.001)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cases = select(args.cases.split(",") if args.cases else None)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.quick:
        cases = [c.shrunk() for c in cases]
    rounds = args.rounds if args.rounds is not None else (3 if args.quick else 15)
    min_sample_s = args.min_sample_time or (0.001 if args.quick else 0.02)
    candidates = NDGATHER + NUMPY
    machine = machine_info(
        {c.family: c.version for c in candidates},
        {
            "ndgather_threads": ndgather.get_num_threads(),
            "NDGATHER_NUM_THREADS": os.environ.get("NDGATHER_NUM_THREADS"),
        },
    )
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    command = shlex.join(["python", "benches/compare_numpy.py", *sys.argv[1:]])
    print(f"machine: {describe_machine(machine)}")
    print(
        f"ndgather threads: {machine['ndgather_threads']}; {rounds} interleaved rounds; "
        f"samples of >= {fmt_seconds(min_sample_s)}; indices int64, seed {SEED}"
        + ("; QUICK (tiny sizes)" if args.quick else "")
        + "\n",
        flush=True,
    )

    records: list[dict[str, Any]] = []
    for case in cases:
        start = time.perf_counter()
        record = run_case(case, candidates, rounds=rounds, min_sample_s=min_sample_s)
        record["wall_s"] = time.perf_counter() - start
        records.append(record)
        print(case_detail(record, BASELINE), flush=True)
        print(f"  ({record['wall_s']:.1f} s)\n", flush=True)

    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(summary_text(records, SUBJECT, [BASELINE]))
    failed = [r["name"] for r in records if r["errors"]]
    timed = [r for r in records if not r["errors"]]
    faster = [r for r in timed if r["ratios"][SUBJECT][BASELINE] < 1.0]
    print(f"\n{SUBJECT} faster than {BASELINE}'s best idiom on {len(faster)} of {len(timed)} cases")
    print(f"peak memory (max RSS): {peak_rss_mib:.0f} MiB")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)

    if args.json:
        results = {
            "benchmark": "compare_numpy",
            "command": command,
            "quick": args.quick,
            "rounds": rounds,
            "min_sample_s": min_sample_s,
            "seed": SEED,
            "subject": SUBJECT,
            "baselines": [BASELINE],
            "started": started,
            "machine": machine,
            "peak_rss_mib": round(peak_rss_mib),
            "cases": records,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
