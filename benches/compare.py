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
``copy 2 threads``, ``alloc+copy`` of the output's bytes), the floors of ``floor.py`` (``gather
floor``: an unchecked gather of the case's blocks by precomputed offsets into a warm output,
tuned, the limit no gather beats; beside it its halves, ``read floor``: only the random reads,
``write floor``: only the output's writes) and ndgather ``out=`` with ``mode="clip"`` (against
``mode="raise"``: the cost of checking the indices). Reported per case: the median per call of
every candidate, the best of each runtime, and ndgather's over the best peer (below 1 is
faster) and over the gather floor (its fastest sample).

    python -m benches compare                                  # every case, 21 rounds
    python -m benches compare --quick                          # tiny sizes, 3 rounds (CI)
    python -m benches compare --threads 1 --json bench-results/compare-1t.json
    python -m benches compare --cases points_2m,tiny_gather --peers onnxruntime
    python -m benches plot bench-results/compare.json --one-thread bench-results/compare-1t.json
    python -m benches compare --peers numpy --json bench-results/compare_numpy.json

``--peers numpy`` compares with NumPy's idioms alone (no runtimes, no copy limits, 15 rounds):
the "NumPy, idiom by idiom" table, which the suite ``report`` renders from its JSON.

A runtime that is not installed is skipped and named in the output. ``--threads N`` sets
ndgather's threads and caps each runtime's (onnxruntime ``intra_op_num_threads``, OpenVINO
``INFERENCE_NUM_THREADS``, TensorFlow intra-op threads); without it each uses every core.
The exit status is 1 when ndgather or NumPy raised or disagreed, or when a runtime failed in
a way not foreseen (a foreseen one, such as OpenVINO's 8-byte types, is only "n/a").
"""

from __future__ import annotations

import argparse
from typing import Any

import ndgather

from . import floor, peers
from .candidates import CLIP, NDGATHER, NUMPY
from .cases import CASES as CASES
from .cases import SEED, Case
from .ml_peers import ML_RUNTIMES
from .report import (
    best_peer,
    case_detail,
    floor_beaten,
    floor_statement,
    fmt_seconds,
    peer_text,
    summary_rows,
    text_table,
)
from .runner import Run, loadavg, run_case

SUBJECT = "ndgather"
#: Pause before each sample when numba or PyTorch are loaded (their OpenMP threads spin for a
#: while after each parallel call; libgomp's default is well under a millisecond).
SETTLE_S = 0.002
ROUNDS = (21, 3)  # --peers numpy: 15
MIN_SAMPLE_S = (0.02, 0.001)
#: Untimed calls before each sample (full, quick): see ``run_interleaved``'s ``lead_in_s``.
LEAD_IN_S = (0.03, 0.0)


def add_options(parser: argparse.ArgumentParser) -> None:
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


def load(run: Run) -> None:
    args = run.args
    if args.threads is not None and args.threads < 1:
        run.parser.error("--threads must be >= 1")
    named = set(filter(None, args.peers.split(",")))
    if unknown := named - {"numpy", *peers.RUNTIMES}:
        run.parser.error(f"unknown runtime(s) {', '.join(sorted(unknown))}")
    numpy_only = named == {"numpy"}
    if numpy_only and args.rounds is None and not args.quick:
        run.rounds = 15
    if args.threads is not None:
        ndgather.set_num_threads(args.threads)
    wanted = tuple(p for p in peers.RUNTIMES if p in named)
    loaded = peers.load(wanted, args.threads)
    floor.configure(args.threads or ndgather.get_num_threads(), args.quick)
    run.loaded = loaded
    run.versions.update(loaded.versions)
    run.missing.update(loaded.missing)
    families = ["numpy", *(p for p in wanted if p not in loaded.missing)]
    run.results.update(
        benchmark="compare_numpy" if numpy_only else "compare",
        seed=SEED,
        subject=SUBJECT,
        baselines=families,
        peers=families,
        peer_threads=args.threads,
        peer_settings=loaded.settings,
    )


def measure(run: Run) -> list[dict[str, Any]]:
    numpy_only = run.results["benchmark"] == "compare_numpy"
    limits = () if numpy_only else (CLIP, *peers.COPY_LIMITS, *floor.FLOORS)
    candidates = [*NDGATHER, *NUMPY, *run.loaded.candidates, *limits]
    run.results["families"] = {c.name: c.family for c in candidates}
    peer_families = run.results["peers"]
    settle_s = SETTLE_S if any(p in run.loaded.versions for p in ML_RUNTIMES) else 0.0
    print(
        f"ndgather threads: {ndgather.get_num_threads()}; peers' threads: "
        f"{run.args.threads or 'default'}; samples of >= {fmt_seconds(run.min_sample_s)}; "
        f"indices int64, seed {SEED}\n",
        flush=True,
    )

    def measure_case(case: Case) -> dict[str, Any]:
        record = run_case(
            case,
            candidates,
            rounds=run.rounds,
            min_sample_s=run.min_sample_s,
            optional_families=peers.RUNTIMES,
            settle_s=settle_s,
            lead_in_s=LEAD_IN_S[run.quick],
        )
        peers.release()
        record["floor_tuning"] = floor.last_tuning()
        record["loadavg_after"] = loadavg()  # 1-minute > ~2 here: something else ran too
        top = None if record["errors"] else best_peer(record, peer_families)
        print(case_detail(record, "peer", best=top), flush=True)
        beaten = [] if record["errors"] else floor_beaten(record, [SUBJECT, *peer_families])
        if beaten:
            print(f"  warning: the gather floor is beaten by {', '.join(beaten)}", flush=True)
        return record

    return run.each(run.cases, measure_case)


def text(results: dict[str, Any]) -> str:
    if results["benchmark"] == "compare_numpy":
        return text_table(*summary_rows(results["cases"], SUBJECT, ["numpy"]))
    return (
        peer_text(results) + "\n" + floor_statement(results["cases"], [SUBJECT, *results["peers"]])
    )
