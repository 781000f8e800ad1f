"""A table kept narrow, used wide: rows gathered from a float16, bfloat16 or int8 table into
float32 (``dtype=np.float32``), against the same gather from a float32 table (the same output
bytes: the goal is at most 1.1x its time) and the peers' idioms, which convert in a second
pass: ``np.take(t, ids, axis=0).astype(np.float32)`` (goal: at most 0.5x) and
``torch.index_select(t, 0, ids).to(torch.float32)`` (when PyTorch is installed).

Shapes: the service batches of ``service.py`` (1 to 4096 random ids, (1M, 128) tables) and
the rows case of ``compare.py`` (1M random ids into (1M, 64) tables). Every call takes fresh
ids from a cycle shared by all candidates (``timing.Cycle``), whose rows of the narrow table
(the fewest bytes) add up to at least 4 times the last-level cache, so rows are not
cache-resident. Every round times every candidate once, in rotating order; medians per call
are reported, and ratios as medians of the ratio within a round (``timing.paired_ratio``).

    python -m benches cast                   # full run
    python -m benches cast --quick           # tiny tables, 2 rounds (CI: runs, agrees)
    python -m benches cast --json bench-results/cast.json --doc docs/performance.md
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import ndgather
import numpy as np

from .report import (
    command,
    describe_machine,
    fmt_seconds,
    machine_info,
    markdown_table,
    refuse_dirty,
    save,
    update_doc,
)
from .service import llc_bytes
from .timing import Cycle, Statement, keep_resident, paired_ratio, run_interleaved

SOURCES = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "int8": np.dtype(np.int8),
}
TORCH_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "int8": "int8"}
SETTLE_S = 0.002
LLC_TIMES = 4


def tables(rows: int, width: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The float32 table and its narrow copies (values that every narrow type holds exactly
    where it can: small integers and halves; the int8 one in -100..100)."""
    base = (rng.integers(-100, 100, size=(rows, width)) / 2).astype(np.float32)
    out = {"float32": base}
    for name, dt in SOURCES.items():
        out[name] = (base * 2).astype(dt) if dt.kind == "i" else base.astype(dt)
    return out


def candidates(narrow: str, t: dict[str, np.ndarray], torch: Any) -> list[Statement]:
    names = {"ndgather": ndgather, "np": np, "t": t[narrow], "t32": t["float32"]}
    cands = [
        Statement(
            "ndgather dtype=float32", "ndgather", "ndgather.gather(t, _i, dtype=np.float32)", names
        ),
        Statement("ndgather float32 table", "same bytes", "ndgather.gather(t32, _i)", names),
        Statement(
            "np.take().astype()", "numpy", "np.take(t, _i, axis=0).astype(np.float32)", names
        ),
    ]
    if torch is not None:
        tt = (
            torch.from_numpy(t[narrow].view(np.int16)).view(torch.bfloat16)
            if narrow == "bfloat16"
            else torch.from_numpy(t[narrow])
        )
        tnames = {"torch": torch, "tt": tt}
        cands.append(
            Statement(
                "torch index_select().to()",
                "torch",
                "torch.index_select(tt, 0, torch.from_numpy(_i)).to(torch.float32)",
                tnames,
            )
        )
    return cands


def run_case(
    narrow: str,
    t: dict[str, np.ndarray],
    batch: int,
    rounds: int,
    llc: int,
    min_sample_s: float,
    torch: Any,
    seed: int,
) -> dict[str, Any]:
    rows, width = t["float32"].shape
    # The cycle's rows of the narrow table (the fewest bytes) add up to LLC_TIMES the LLC.
    nb = max(2, -(-LLC_TIMES * llc // (batch * width * t[narrow].itemsize)))
    rng = np.random.default_rng(seed)
    batches = list(rng.integers(0, rows, size=(nb, batch)))
    cands = candidates(narrow, t, torch)
    record: dict[str, Any] = {
        "source": narrow,
        "table_shape": [rows, width],
        "batch": batch,
        "cycle_batches": nb,
        "errors": [],
        "candidates": {},
    }
    for ids in batches[:2]:
        want = np.take(t[narrow], ids, axis=0).astype(np.float32)
        same = np.take(t["float32"], ids, axis=0)
        for c in cands:
            got = c.run(ids)
            ref = same if c.family == "same bytes" else want
            if got.dtype != np.float32 or got.tobytes() != ref.tobytes():
                record["errors"].append(f"{c.name} differs from its reference")
    if record["errors"]:
        return record
    cycle = Cycle(batches)
    resident = functools.partial(keep_resident, t[narrow], t["float32"])
    timers = {c.name: c.timer(cycle) for c in cands}
    timings = run_interleaved(
        timers, rounds, min_sample_s, SETTLE_S, warm=True, wake=True, before_round=resident
    )
    for c in cands:
        record["candidates"][c.name] = {"family": c.family, **timings[c.name].record()}
    return record


def table_rows(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = [
        "source",
        "table",
        "ids",
        "ndgather dtype=float32",
        "ndgather float32 table",
        "np.take().astype()",
        "torch .to()",
        "/ float32 table",
        "/ np.take().astype()",
        "/ torch",
    ]
    out = []
    for rec in results["cases"]:
        if rec["errors"]:
            out.append(
                [
                    rec["source"],
                    str(tuple(rec["table_shape"])),
                    str(rec["batch"]),
                    "ERROR: " + "; ".join(rec["errors"]),
                ]
                + [""] * 6
            )
            continue
        c = {k: v["median_s"] for k, v in rec["candidates"].items()}
        me = c["ndgather dtype=float32"]
        torch_t = c.get("torch index_select().to()")
        s = {k: v["samples_s"] for k, v in rec["candidates"].items()}
        mine = s["ndgather dtype=float32"]
        out.append(
            [
                rec["source"],
                f"({rec['table_shape'][0]:,}, {rec['table_shape'][1]})",
                f"{rec['batch']:,}",
                fmt_seconds(me),
                fmt_seconds(c["ndgather float32 table"]),
                fmt_seconds(c["np.take().astype()"]),
                fmt_seconds(torch_t) if torch_t else "-",
                f"{paired_ratio(mine, s['ndgather float32 table']):.2f}x",
                f"{paired_ratio(mine, s['np.take().astype()']):.2f}x",
                f"{paired_ratio(mine, s['torch index_select().to()']):.2f}x" if torch_t else "-",
            ]
        )
    return head, out


def markdown(results: dict[str, Any]) -> str:
    head, body = table_rows(results)
    machine = results["machine"]
    return "\n\n".join(
        [
            f"Median per call over {results['rounds']} interleaved rounds (ratios: the median "
            "over rounds of the ratio within a round); ndgather threads: "
            f"{results['threads']}; commit {machine.get('git_commit') or '?'}. Command: "
            f"`{results['command']}`. Machine: {describe_machine(machine)}.",
            markdown_table(head, body),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny tables, 2 rounds (CI)")
    p.add_argument(
        "--rounds", type=int, default=None, help="interleaved rounds (default 15, quick 2)"
    )
    p.add_argument("--min-sample-time", type=float, default=0.005)
    p.add_argument("--sources", help="comma-separated narrow dtypes (default: all)")
    p.add_argument("--batches", help="comma-separated batch sizes (default: all)")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--doc", type=Path, help="put the table between its markers here")
    p.add_argument(
        "--allow-dirty", action="store_true", help="record a run of a dirty tree in --doc"
    )
    args = p.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 15)
    if args.doc and (args.sources or args.batches):
        p.error("--doc records the whole table: not with --sources or --batches")
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        torch = None
    llc = 1 << 20 if args.quick else llc_bytes()
    rng = np.random.default_rng(17)
    shapes = (
        [((4096, 128), [1, 8, 64]), ((4096, 64), [4096])]
        if args.quick
        else [
            ((1_000_000, 128), [1, 8, 64, 512, 4096]),
            ((1_000_000, 64), [1_000_000]),
        ]
    )
    results: dict[str, Any] = {
        "benchmark": "cast",
        "command": command(),
        "rounds": rounds,
        "threads": ndgather.get_num_threads(),
        "llc_bytes": llc,
        "llc_times": LLC_TIMES,
        "machine": machine_info(
            {"ndgather": ndgather.__version__, "numpy": np.__version__}
            | ({"torch": torch.__version__} if torch else {})
        ),
        "cases": [],
    }
    sources = args.sources.split(",") if args.sources else list(SOURCES)
    wanted = {int(b) for b in args.batches.split(",")} if args.batches else None
    seed = 0
    for shape, batches in shapes:
        if wanted is not None and not wanted.intersection(batches):
            continue
        t = tables(*shape, rng)
        for batch in batches:
            for narrow in SOURCES:
                seed += 1  # the same seed for a case whatever is left out
                if narrow not in sources or (wanted is not None and batch not in wanted):
                    continue
                rec = run_case(narrow, t, batch, rounds, llc, args.min_sample_time, torch, seed)
                results["cases"].append(rec)
                print(
                    f"  {narrow} {shape} x{batch}: {'ERROR' if rec['errors'] else 'ok'}", flush=True
                )
        del t
    print(markdown(results))
    save(results, args.json)
    if args.doc:
        refuse_dirty([results["machine"]], args.allow_dirty)
        update_doc(args.doc, markdown(results), "cast table")
    return 1 if any(r["errors"] for r in results["cases"]) else 0
