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
from typing import Any

import ml_dtypes
import ndgather
import numpy as np

from .report import fmt_seconds, markdown_table
from .runner import Run, describe_machine
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
ROUNDS = (15, 2)
MIN_SAMPLE_S = (0.005, 0.005)
TABLE = "cast table"
PEERS = ("torch",)


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


def measure_case(
    run: Run, t: dict[str, np.ndarray], narrow: str, batch: int, seed: int
) -> dict[str, Any]:
    rows, width = t["float32"].shape
    llc = run.results["llc_bytes"]
    # The cycle's rows of the narrow table (the fewest bytes) add up to LLC_TIMES the LLC.
    nb = max(2, -(-LLC_TIMES * llc // (batch * width * t[narrow].itemsize)))
    rng = np.random.default_rng(seed)
    batches = list(rng.integers(0, rows, size=(nb, batch)))
    cands = candidates(narrow, t, run.peers.get("torch"))
    record: dict[str, Any] = {
        "name": f"{narrow} ({rows}, {width}) x{batch}",
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
        timers, run.rounds, run.min_sample_s, SETTLE_S, warm=True, wake=True, before_round=resident
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


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources", help="comma-separated narrow dtypes (default: all)")
    parser.add_argument("--batches", help="comma-separated batch sizes (default: all)")


def load(run: Run) -> None:
    if run.args.doc and (run.args.sources or run.args.batches):
        run.parser.error("--doc records the whole table: not with --sources or --batches")
    llc = 1 << 20 if run.quick else llc_bytes()
    run.results.update(threads=ndgather.get_num_threads(), llc_bytes=llc, llc_times=LLC_TIMES)


def measure(run: Run) -> list[dict[str, Any]]:
    args = run.args
    rng = np.random.default_rng(17)
    shapes = (
        [((4096, 128), [1, 8, 64]), ((4096, 64), [4096])]
        if args.quick
        else [
            ((1_000_000, 128), [1, 8, 64, 512, 4096]),
            ((1_000_000, 64), [1_000_000]),
        ]
    )
    sources = args.sources.split(",") if args.sources else list(SOURCES)
    wanted = {int(b) for b in args.batches.split(",")} if args.batches else None
    records: list[dict[str, Any]] = []
    seed = 0
    for shape, batches in shapes:
        if wanted is not None and not wanted.intersection(batches):
            continue
        t = tables(*shape, rng)
        todo = []
        for batch in batches:
            for narrow in SOURCES:
                seed += 1  # the same seed for a case whatever is left out
                if narrow in sources and (wanted is None or batch in wanted):
                    todo.append((narrow, batch, seed))
        records += run.each(todo, lambda case, t=t: measure_case(run, t, *case))
        del t
    return records


def text(results: dict[str, Any]) -> str:
    return markdown(results)
