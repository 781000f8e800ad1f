"""Compare ndgather with NumPy, onnxruntime, OpenVINO, TensorFlow, PyTorch, JAX and numba on
fixed, named cases.

For every case (``cases.py``) each candidate is given the same arrays (data, int64 indices):
ndgather returning a new array and with ``out=``, every NumPy idiom that applies
(``candidates.py``: fancy indexing, ``take``, ``ravel_multi_index`` + ``take``,
``take_along_axis``), and each installed runtime in each of its fast forms (``peers.py``:
onnxruntime ``run`` and IOBinding, OpenVINO's infer request with new or bound buffers,
TensorFlow eager, raw op and ``tf.function``; ``ml_peers.py``: ``torch.index_select``, jitted
JAX ``x.at[lin].get``, numba kernels). All are run once and checked equal to NumPy's result,
then timed in interleaved rounds (``timing.py``) with the copy limits beside them (``copy``,
``copy 2 threads``, ``alloc+copy`` of the output's bytes), the floors of ``floor.py`` (``read
floor``: only the random reads of the case; ``write floor``: only the output's writes; the
larger of the two is the limit no gather beats) and ndgather ``out=`` with ``mode="clip"``
(against ``mode="raise"``: the cost of checking the indices). Reported per case: the median
per call of every candidate, the best of each runtime, and ndgather's over the best peer
(below 1 is faster) and over the limit.

    python -m benches compare                                  # every case, 21 rounds
    python -m benches compare --quick                          # tiny sizes, 3 rounds (CI)
    python -m benches compare --threads 1 --json bench-results/compare-1t.json
    python -m benches compare --cases points_2m,tiny_gather --peers onnxruntime
    python -m benches plot bench-results/compare.json --one-thread bench-results/compare-1t.json
    python -m benches compare --peers numpy --json bench-results/compare_numpy.json

``--peers numpy`` compares with NumPy's idioms alone (no runtimes, no copy limits, 15 rounds):
the "NumPy, idiom by idiom" table, which ``report.py`` renders from its JSON.

A runtime that is not installed is skipped and named in the output. ``--threads N`` sets
ndgather's threads and caps each runtime's (onnxruntime ``intra_op_num_threads``, OpenVINO
``INFERENCE_NUM_THREADS``, TensorFlow intra-op threads); without it each uses every core.
The exit status is 1 when ndgather or NumPy raised or disagreed, or when a runtime failed in
a way not foreseen (a foreseen one, such as OpenVINO's 8-byte types, is only "n/a").
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Sequence
from typing import Any

import ndgather

from . import floor, peers
from .candidates import CLIP, NDGATHER, NUMPY
from .cases import CASES, SEED
from .ml_peers import ML_RUNTIMES
from .report import (
    best_peer,
    case_detail,
    chosen,
    command,
    describe_machine,
    floor_beaten,
    floor_statement,
    fmt_seconds,
    machine_info,
    options,
    peer_text,
    save,
    summary_rows,
    text_table,
)
from .runner import run_case

SUBJECT = "ndgather"
#: Pause before each sample when numba or PyTorch are loaded (their OpenMP threads spin for a
#: while after each parallel call; libgomp's default is well under a millisecond).
SETTLE_S = 0.002


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = options(__doc__, CASES, "21, --peers numpy 15, quick 3", table=False)
    parser.add_argument(
        "--peers",
        default=",".join(peers.RUNTIMES),
        help=f"comma-separated runtimes to try (default: {','.join(peers.RUNTIMES)}); "
        "NumPy is always there; numpy alone: NumPy's idioms only",
    )
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="ndgather's threads, and the cap on every runtime's (default: their defaults)",
    )
    parser.add_argument(
        "--min-sample-time",
        type=float,
        help="seconds each timed batch of calls lasts at least (default 0.02, quick 0.001)",
    )
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    named = set(filter(None, args.peers.split(",")))
    unknown = named - {"numpy", *peers.RUNTIMES}
    if unknown:
        parser.error(f"unknown runtime(s) {', '.join(sorted(unknown))}")
    numpy_only = named == {"numpy"}
    cases = chosen(parser, args, CASES)
    rounds = (
        args.rounds if args.rounds is not None else (3 if args.quick else 15 if numpy_only else 21)
    )
    min_sample_s = args.min_sample_time or (0.001 if args.quick else 0.02)
    if args.threads is not None:
        ndgather.set_num_threads(args.threads)

    wanted = tuple(p for p in peers.RUNTIMES if p in named)
    loaded = peers.load(wanted, args.threads)
    floor.configure(args.threads or ndgather.get_num_threads(), args.quick)
    limits = () if numpy_only else (CLIP, *peers.COPY_LIMITS, *floor.FLOORS)
    candidates = [*NDGATHER, *NUMPY, *loaded.candidates, *limits]
    peer_families = ["numpy", *(p for p in wanted if p not in loaded.missing)]
    machine = machine_info(
        {"ndgather": ndgather.__version__, "numpy": NUMPY[0].version, **loaded.versions},
        {
            "ndgather_threads": ndgather.get_num_threads(),
            "NDGATHER_NUM_THREADS": os.environ.get("NDGATHER_NUM_THREADS"),
            "loadavg_at_start": _loadavg(),
        },
    )
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(f"machine: {describe_machine(machine)}")
    for name, why in loaded.missing.items():
        print(f"skipped runtime {name}: {why}")
    load = machine["loadavg_at_start"]
    if load and not args.quick and load[0] > 0.5:
        print(f"warning: load average {load[0]} at start: other processes may skew the timings")
    print(
        f"ndgather threads: {machine['ndgather_threads']}; peers' threads: "
        f"{args.threads or 'default'}; {rounds} interleaved rounds; samples of >= "
        f"{fmt_seconds(min_sample_s)}; indices int64, seed {SEED}"
        + ("; QUICK (tiny sizes)" if args.quick else "")
        + "\n",
        flush=True,
    )

    records: list[dict[str, Any]] = []
    for case in cases:
        start = time.perf_counter()
        record = run_case(
            case,
            candidates,
            rounds=rounds,
            min_sample_s=min_sample_s,
            optional_families=peers.RUNTIMES,
            settle_s=SETTLE_S if any(p in loaded.versions for p in ML_RUNTIMES) else 0.0,
        )
        peers.release()
        record["floor_tuning"] = floor.last_tuning()
        record["wall_s"] = time.perf_counter() - start
        record["loadavg_after"] = _loadavg()  # 1-minute > ~2 here: something else ran too
        records.append(record)
        top = None if record["errors"] else best_peer(record, peer_families)
        print(case_detail(record, "peer", best=top), flush=True)
        beaten = [] if record["errors"] else floor_beaten(record, [SUBJECT, *peer_families])
        if beaten:
            print(f"  warning: the limit (floors) is beaten by {', '.join(beaten)}", flush=True)
        print(f"  ({record['wall_s']:.1f} s)\n", flush=True)

    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    results: dict[str, Any] = {
        "benchmark": "compare_numpy" if numpy_only else "compare",
        "command": command(),
        "quick": args.quick,
        "rounds": rounds,
        "min_sample_s": min_sample_s,
        "seed": SEED,
        "subject": SUBJECT,
        "baselines": peer_families,
        "peers": peer_families,
        "peer_threads": args.threads,
        "peer_settings": loaded.settings,
        "missing": loaded.missing,
        "families": {c.name: c.family for c in candidates},
        "started": started,
        "machine": machine,
        "loadavg_at_end": _loadavg(),
        "peak_rss_mib": round(peak_rss_mib),
        "cases": records,
    }
    print(
        text_table(*summary_rows(records, SUBJECT, ["numpy"])) if numpy_only else peer_text(results)
    )
    if not numpy_only:
        print(floor_statement(records, [SUBJECT, *peer_families]))
    print(f"\npeak memory (max RSS): {peak_rss_mib:.0f} MiB")

    failed = [r["name"] for r in records if r["errors"]]
    unforeseen = [f"{r['name']}: {f}" for r in records for f in r["failures"]]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    for line in unforeseen:
        print(f"runtime failure: {line}", file=sys.stderr)
    save(results, args.json)
    return 1 if failed or unforeseen else 0
