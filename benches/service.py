"""The call a Python service makes: a request's batch of random ids, rows of a table far
larger than the caches, every call with fresh ids.

Tables: (1M, 128) float32 (512-byte rows) and (4M, 32) float32 (128-byte rows), 512 MiB
each. Batches of 1, 8, 64, 512 and 4096 ids, int64 and int32, on one thread and on all
threads (``ndgather.set_num_threads``, ``torch.set_num_threads``, numba's
``set_num_threads``; JAX keeps its own threads, fixed when it is imported). Candidates, each
given the ids as a NumPy array (what a request parser hands over):

* ndgather: ``gather(table, ids)`` and with ``out=``;
* NumPy: ``table.take(ids, axis=0)`` (the method), ``np.take(table, ids, axis=0)``,
  ``np.take(table, ids, axis=0, out=out, mode="clip")`` (a careful service: no new array,
  no check of the ids), ``table[ids]``;
* PyTorch: ``torch.index_select(t, 0, torch.from_numpy(ids))``, new and ``out=``;
* JAX: jitted ``x.at[ids].get(mode="promise_in_bounds")`` (numpy ids in, blocked on);
* numba: the ``boundscheck=False`` row-copy loop, ``prange`` and serial, new and ``out=``;
* the floors of ``floor.py``: ``gather floor`` (an unchecked gather of the same rows into a
  warm output of one batch, tuned), the limit the ratios are taken against, and its halves,
  ``read floor`` (only the reads of the same rows, tuned) and ``write floor`` (only the writes
  of the output); and ``call floor``, the gather floor one call at a time
  (``floor.GatherFloor``'s ``per_call``: a batch's prefetch starts with it and stops at its
  end, and its threads wait for each other at its end), shown beside the gather floor: the
  gather floor streams from one batch into the next, which no call can.

**Fresh ids.** Each case draws a cycle of batches up front, shared by all candidates; every
call, whichever candidate makes it, takes the next batch of the cycle (a timed sample
continues where the last one, of any candidate, stopped; the floors skip the batches they
do), so a batch comes back only after the whole cycle, whose rows total at least
``TOUCH_LLC`` (4) times the last-level cache (32 MiB here: 128 MiB, i.e. 262,144 rows of 512
bytes or 1,048,576 of 128 bytes, so 262,144 batches of 1 id, 64 batches of 4096): when a
batch comes back its rows have been evicted by the rest, as a service's next request does not
find the last one's rows in the cache. The batches are views of one array, taken in order
(their memory streams).

Timing: every round times every candidate once, in rotating order (``timing.py``), each
sample a run of consecutive calls of at least ``--min-sample-time`` after a 2 ms pause and
one untimed call (the pause lets the OpenMP threads of numba and PyTorch stop spinning; the
call wakes the candidate's own); the median per call is reported, and ratios to the fastest
peer. Then every candidate's calls are timed one by one (``--latency-calls`` per round, or as
many as take about 20 ms when that is fewer, at least 10; interleaved the same way) for the
percentiles a service operator watches (p50, p99; each includes one ``perf_counter_ns`` pair,
~50 ns); with ``--pause-us N`` each of those calls comes after N us of Python busy-work, as a
service's calls come between requests (threads kept awake after a call may sleep by the next:
ndgather's helpers linger 200 us). All candidates are checked equal to ``table.take`` on
the first batches before timing.

    python -m benches service                      # full run
    python -m benches service --quick              # tiny tables, 3 rounds (CI: runs, agrees)
    python -m benches service --json bench-results/service.json --doc docs/performance.md
    python -m benches service --tables rows_4m_32 --batches 512,4096 --pause-us 300
"""

from __future__ import annotations

import argparse
import functools
import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ndgather
import numpy as np

from . import floor
from .ml_peers import configure_jax, numba_take
from .report import (
    FAMILY_NAMES,
    floor_beaten,
    floor_statement,
    floor_time,
    fmt_ratio,
    fmt_seconds,
    markdown_table,
    text_table,
)
from .report import limit as report_limit
from .runner import Run, describe_machine
from .timing import Cycle, NativeTimer, Statement, keep_resident, latency_rounds, run_interleaved

TABLES = {"rows_1m_128": (1_000_000, 128), "rows_4m_32": (4_000_000, 32)}
QUICK_TABLES = {"rows_1m_128": (4096, 128), "rows_4m_32": (16384, 32)}
BATCHES = (1, 8, 64, 512, 4096)
QUICK_BATCHES = (1, 64)
INDEX_DTYPES = ("int64", "int32")
TOUCH_LLC = 4
MIN_CYCLE = 64  # batches in a cycle at least, however large the batch
SETTLE_S = 0.002  # pause before each sample: see timing.run_interleaved
SUBJECT = "ndgather"
FAMILIES = ("numpy", "torch", "jax", "numba")
ROUNDS = (11, 3)
MIN_SAMPLE_S = (0.005, 0.0005)
TABLE = "service table"
PEERS = ("torch", "jax", "numba")


def llc_bytes() -> int:
    """The last-level cache (sysfs; 32 MiB when it cannot be read)."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KM")) * scale)
    return max(sizes, default=32 << 20)


@dataclass(frozen=True)
class Case:
    table: str
    batch: int
    index_dtype: str
    threads: int

    @property
    def name(self) -> str:
        return f"{self.table} {self.index_dtype} x{self.batch} t{self.threads}"


# --------------------------------------------------------------------------- candidates


def candidates(
    table: np.ndarray, batch: int, loaded: dict[str, Any], threads: int
) -> list[Statement]:
    width, dtype = table.shape[1], table.dtype
    out = np.empty((batch, width), dtype=dtype)
    cands = [
        Statement("ndgather", SUBJECT, "fn(t, _i)", {"fn": ndgather.gather, "t": table}),
        Statement(
            "ndgather out=",
            SUBJECT,
            "fn(t, _i, out=o)",
            {"fn": ndgather.gather, "t": table, "o": out},
            "o",
        ),
        Statement("numpy take method", "numpy", "fn(_i, axis=0)", {"fn": table.take}),
        Statement("numpy np.take", "numpy", "fn(t, _i, axis=0)", {"fn": np.take, "t": table}),
        # What a careful service writes: no new array, and no check of the ids.
        Statement(
            "numpy np.take out= clip",
            "numpy",
            "fn(t, _i, axis=0, out=o, mode='clip')",
            {"fn": np.take, "t": table, "o": np.empty((batch, width), dtype=dtype)},
            "o",
        ),
        Statement("numpy fancy", "numpy", "t[_i]", {"t": table}),
    ]
    if "torch" in loaded:
        torch = loaded["torch"]
        t = loaded["torch_table"]
        o = np.empty((batch, width), dtype=dtype)
        names = {"fn": torch.index_select, "t": t, "f": torch.from_numpy}
        cands += [
            Statement("torch index_select", "torch", "fn(t, 0, f(_i))", names),
            Statement(
                "torch index_select out=",
                "torch",
                "fn(t, 0, f(_i), out=o)",
                {**names, "o": torch.from_numpy(o), "on": o},
                "on",
            ),
        ]
    if "jax" in loaded:
        cands.append(
            Statement(
                "jax at.get",
                "jax",
                "fn(t, _i).block_until_ready()",
                {"fn": loaded["jax_fn"], "t": loaded["jax_table"]},
            )
        )
    if "numba" in loaded:
        for kind, parallel in (("prange", True), ("serial", False)):
            take, take_new = loaded["numba"](parallel)
            o = np.empty((batch, width), dtype=dtype)
            cands += [
                Statement(f"numba {kind}", "numba", "fn(t, _i)", {"fn": take_new, "t": table}),
                Statement(
                    f"numba {kind} out=",
                    "numba",
                    "fn(t, _i, o)",
                    {"fn": take, "t": table, "o": o},
                    "o",
                ),
            ]
    return cands


def _jax_rows(t: Any, i: Any) -> Any:
    return t.at[i].get(mode="promise_in_bounds")


def set_threads(n: int, loaded: dict[str, Any]) -> None:
    ndgather.set_num_threads(n)
    if "torch" in loaded:
        loaded["torch"].set_num_threads(n)
    if "numba" in loaded:
        numba = importlib.import_module("numba")
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


# --------------------------------------------------------------------------- one case


def cycle_batches(rows: int, row_bytes: int, batch: int, llc: int, quick: bool) -> int:
    """Batches in a case's cycle: together they read ``TOUCH_LLC`` times the LLC."""
    if quick:
        return 16
    return max(MIN_CYCLE, -(-TOUCH_LLC * llc // (batch * row_bytes)))


#: The gather and call floors' settings tuned for each table, batch and thread count so far.
TUNED: dict[tuple[str, int, int], tuple[floor.GatherSetting, floor.GatherSetting]] = {}


def measure_case(run: Run, case: Case, table: np.ndarray) -> dict[str, Any]:
    loaded, quick = run.loaded, run.quick
    rows, width = table.shape
    row_bytes = width * table.itemsize
    nb = cycle_batches(rows, row_bytes, case.batch, run.machine["llc_bytes"], quick)
    rng = np.random.default_rng(1000 + case.batch)
    flat = rng.integers(0, rows, size=nb * case.batch, dtype=np.int64).astype(case.index_dtype)
    batches = list(flat.reshape(nb, case.batch))
    set_threads(case.threads, loaded)
    cands = candidates(table, case.batch, loaded, case.threads)
    record: dict[str, Any] = {
        "name": case.name,
        "table": case.table,
        "table_shape": list(table.shape),
        "batch": case.batch,
        "index_dtype": case.index_dtype,
        "threads": case.threads,
        "cycle_batches": nb,
        "cycle_rows_bytes": nb * case.batch * row_bytes,
        "errors": [],
        "candidates": {},
    }
    # Checked on a few batches against the ndarray method, before any timing.
    for ids in batches[:3]:
        want = table.take(ids, axis=0)
        for c in cands:
            try:
                got = c.run(ids)
            except Exception as exc:
                record["errors"].append(f"{c.name} raised {type(exc).__name__}: {exc}")
                continue
            if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
                record["errors"].append(f"{c.name} differs from table.take")
    if record["errors"]:
        return record

    cycle = Cycle(batches)  # one for all: see timing.Cycle
    timers: dict[str, Any] = {c.name: c.timer(cycle) for c in cands}
    families = {c.name: c.family for c in cands}
    phase = time.perf_counter()
    why = floor.available()
    resident = functools.partial(keep_resident, table)
    if why is None:
        offsets = flat.astype(np.uint64) * np.uint64(row_bytes)
        reader = floor.ReadFloor(table, offsets, row_bytes)
        # The table's pages in place before each tuning, as before each round of the timing
        # (see timing.keep_resident): a tuning on pages the host had taken back timed every
        # setting alike (24 ns a 128-byte row, AMD kind) and kept one that is slow once they
        # are back.
        resident()
        # Cold reads, as in the timing: one pass over 16 batches' worth of ids (at least
        # 16,384) a trial, never the same rows twice in a row; so for every floor.
        count = min(offsets.size, max(16 * case.batch, 1 << 14))
        setting, tried = reader.tune(case.threads, count, quick=quick, reps=1)

        def read(number: int) -> object:
            first = cycle.skip(number)  # the batches the gathers would have taken next
            return reader.run(setting, first * case.batch, number * case.batch, 1)

        # The gather floor: the same stretch of the cycle gathered into a warm output of one
        # batch per thread (each batch to the same place, as a service's ``out=`` is), tuned
        # on the same cold stretches as the read floor.
        gatherer = floor.GatherFloor(table, offsets, row_bytes, case.batch, case.threads)
        resident()
        # Also from the settings the same blocks tuned to in the case before with the other
        # type of ids (the floors never read the ids): one descent that a burst of load
        # turned away (512 int64 ids of 128-byte rows on two threads: 10.3 us, where the
        # int32 case's took 6.4 us) no longer makes a floor a gather beats.
        twins = TUNED.get((case.table, case.batch, case.threads), ())
        g_setting, g_tried = gatherer.tune(case.threads, count, quick=quick, reps=1, also=twins)
        # The same, one call at a time (floor.GatherFloor's ``per_call``): what a call can do
        # that sees only its own batch and waits for its threads. Each descent also starts
        # from the other's setting: a trial that a burst of load slows can turn a descent
        # away for good (the gather floor of 512 int64 ids of 512-byte rows on two threads
        # once settled on one thread, 31 us, where the call floor's two took 17 us). The
        # stream does all a call does, so a call floor that tuned faster than it says the
        # gather floor's descent missed a setting: it is tuned again from the call floor's.
        caller = floor.GatherFloor(
            table, offsets, row_bytes, case.batch, case.threads, per_call=True
        )
        resident()
        c_setting, c_tried = caller.tune(
            case.threads, count, quick=quick, reps=1, also=(g_setting, *twins)
        )
        if min(c_tried.values()) < min(g_tried.values()):
            resident()
            g_setting, g_tried = gatherer.tune(
                case.threads, count, quick=quick, reps=1, also=(c_setting, *twins)
            )
        TUNED[(case.table, case.batch, case.threads)] = (g_setting, c_setting)

        def gather(number: int, setting: floor.GatherSetting = g_setting) -> object:
            first = cycle.skip(number)
            return gatherer.run(setting, first * case.batch, number * case.batch, 1)

        def call(number: int, setting: floor.GatherSetting = c_setting) -> object:
            first = cycle.skip(number)
            return caller.run(setting, first * case.batch, number * case.batch, 1)

        writer, write_tuning = floor.write_floor_call(case.batch * row_bytes, case.threads)
        timers[floor.READ] = NativeTimer(read)
        timers[floor.WRITE] = writer.timer()
        timers[floor.GATHER] = NativeTimer(gather)
        timers[floor.CALL] = NativeTimer(call)
        for name in (floor.READ, floor.WRITE, floor.GATHER, floor.CALL):
            families[name] = floor.FAMILY
        record["floor_tuning"] = {
            **floor.tuning_record(setting, tried),
            "write": write_tuning,
            "gather": floor.tuning_record(g_setting, g_tried),
            "call": floor.tuning_record(c_setting, c_tried),
        }
    else:
        record["floor_unavailable"] = why

    record["phases_s"] = {"floor tuning": time.perf_counter() - phase}
    phase = time.perf_counter()

    timings = run_interleaved(
        timers, run.rounds, run.min_sample_s, SETTLE_S, warm=True, wake=True, before_round=resident
    )
    record["phases_s"]["rounds"] = time.perf_counter() - phase
    phase = time.perf_counter()
    # Calls timed one by one per candidate and round: --latency-calls, or fewer for slow
    # calls (about 20 ms of them, at least 10), so that a large batch does not take minutes.
    most = run.results["latency_calls"]
    lat_n = {c.name: max(10, min(most, int(0.02 / timings[c.name].median))) for c in cands}
    pause_ns = run.results["pause_us"] * 1000
    lat = latency_rounds(cands, cycle, run.rounds, lat_n, SETTLE_S, resident, pause_ns)
    record["phases_s"]["latencies"] = time.perf_counter() - phase
    for n, timing in timings.items():
        entry: dict[str, Any] = {"family": families[n], **timing.record()}
        if n in lat and lat[n]:
            q = np.percentile(np.array(lat[n]) * 1e-9, [50, 99])
            entry.update({"p50_s": float(q[0]), "p99_s": float(q[1]), "latency_calls": len(lat[n])})
        record["candidates"][n] = entry
    return record


# --------------------------------------------------------------------------- tables


def _best(record: dict[str, Any], families: Sequence[str]) -> str | None:
    cands = record["candidates"]
    names = [n for n, c in cands.items() if c["family"] in families]
    return min(names, key=lambda n: cands[n]["median_s"], default=None)


def rows(results: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    peers = [p for p in FAMILIES if p not in results["missing"]]
    header = ["table", "ids", "threads", "batch", "ndgather", "ndgather out="]
    header += [FAMILY_NAMES[p] for p in peers]
    header += [
        "ndgather / best peer",
        "out= / best peer",
        "p50 / p99 ndgather",
        "p50 / p99 best peer",
        "read floor",
        "write floor",
        "gather floor",
        "ndgather / gather floor",
        "out= / gather floor",
        "call floor",
        "ndgather / call floor",
        "out= / call floor",
    ]
    table: list[list[str]] = []
    notes: list[str] = []
    for r in results["cases"]:
        head = [r["table"], r["index_dtype"], str(r["threads"]), str(r["batch"])]
        if r["errors"]:
            table.append([*head, "FAILED"] + [""] * (len(header) - 5))
            continue
        cands = r["candidates"]

        def t(name: str | None, key: str = "median_s", cands: dict[str, Any] = cands) -> str:
            return fmt_seconds(cands[name][key]) if name in cands and key in cands[name] else "-"

        def over(a: str | None, b: float | None, cands: dict[str, Any] = cands) -> str:
            return fmt_ratio(cands[a]["median_s"] / b) if a in cands and b else "-"

        top = _best(r, peers)
        line = [*head, t(SUBJECT), t(f"{SUBJECT} out=")]
        for p in peers:
            best = _best(r, [p])
            form = "" if best is None else best.removeprefix(p).strip()
            cell = t(best) + (f" {form}" if form else "")
            line.append(f"**{cell}**" if best == top and results.get("markdown") else cell)
        top_s = cands[top]["median_s"] if top else None
        floors = [floor_time(r, n) for n in (floor.READ, floor.WRITE)]
        limit = report_limit(r)  # the gather floor
        beaten = floor_beaten(r, [SUBJECT, *peers])
        gather_cell = fmt_seconds(limit) if limit else "-"
        if beaten:
            notes.append(f"gather floor of {r['name']} BROKEN: beaten by {', '.join(beaten)}")
            gather_cell += f" [{len(notes)}]"
        call = floor_time(r, floor.CALL)
        call_cell = fmt_seconds(call) if call else "-"
        call_beaten = floor_beaten(r, [SUBJECT, *peers], floor.CALL)
        if call_beaten:
            notes.append(f"call floor of {r['name']} BROKEN: beaten by {', '.join(call_beaten)}")
            call_cell += f" [{len(notes)}]"
        line += [
            over(SUBJECT, top_s),
            over(f"{SUBJECT} out=", top_s),
            f"{t(SUBJECT, 'p50_s')} / {t(SUBJECT, 'p99_s')}",
            f"{t(top, 'p50_s')} / {t(top, 'p99_s')}",
            fmt_seconds(floors[0]) if floors[0] else "-",
            fmt_seconds(floors[1]) if floors[1] else "-",
            gather_cell,
            over(SUBJECT, limit),
            over(f"{SUBJECT} out=", limit),
            call_cell,
            over(SUBJECT, call),
            over(f"{SUBJECT} out=", call),
        ]
        table.append(line)
    return header, table, notes


def markdown(results: dict[str, Any]) -> str:
    header, table, notes = rows({**results, "markdown": True})
    m = results["machine"]
    parts = [
        f"Median per call over {results['rounds']} interleaved rounds (fastest peer in bold); "
        f"p50 / p99 of {results['latency_calls']} calls a round timed one by one"
        + (
            f", each after {results['pause_us']} us of Python busy-work"
            if results.get("pause_us")
            else ""
        )
        + "; threads "
        f"{', '.join(map(str, results['threads']))}; commit {m.get('git_commit') or '?'}. "
        f"Command: `{results['command']}`. Machine: {describe_machine(m)}.",
        markdown_table(header, table),
    ]
    if notes:
        parts.append(" ".join(f"[{i}] {n}." for i, n in enumerate(notes, 1)))
    peers = [p for p in FAMILIES if p not in results["missing"]]
    parts.append(floor_statement(results["cases"], [SUBJECT, *peers]))
    if results["missing"]:
        parts.append(
            "Not measured: " + "; ".join(f"{k}: {v}" for k, v in results["missing"].items()) + "."
        )
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- the suite


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tables", help=f"comma-separated, of {', '.join(TABLES)}")
    parser.add_argument("--batches", help="comma-separated batch sizes (default: all)")
    parser.add_argument("--latency-calls", type=int, help="per round (default 200, quick 20)")
    parser.add_argument(
        "--pause-us",
        type=int,
        default=0,
        help="microseconds of Python busy-work before each call timed one by one (p50 / p99): "
        "calls of a service between requests, whose helper threads may have gone to sleep",
    )


def load(run: Run) -> None:
    shapes = QUICK_TABLES if run.quick else TABLES
    if run.args.tables and (unknown := set(run.args.tables.split(",")) - set(shapes)):
        run.parser.error(f"unknown table(s) {', '.join(sorted(unknown))}")
    all_threads = ndgather.get_num_threads()
    floor.configure(all_threads, run.quick)
    loaded: dict[str, Any] = dict(run.peers)
    if "jax" in loaded:
        configure_jax(loaded["jax"])
        loaded["jax_fn"] = loaded["jax"].jit(_jax_rows)
    if "numba" in loaded:
        loaded["numba"] = numba_take
    run.loaded = loaded
    run.machine["llc_bytes"] = llc_bytes()
    run.results.update(
        latency_calls=run.args.latency_calls or (20 if run.quick else 200),
        pause_us=max(0, run.args.pause_us),
        threads=sorted({1, all_threads}),
        touch_llc=TOUCH_LLC,
    )


def measure(run: Run) -> list[dict[str, Any]]:
    print(f"LLC {run.machine['llc_bytes'] >> 20} MiB", flush=True)
    if (why := floor.available()) is not None:
        print(f"no floors: {why}")
    args, loaded = run.args, run.loaded
    shapes = QUICK_TABLES if args.quick else TABLES
    batches = (
        [int(b) for b in args.batches.split(",")]
        if args.batches
        else list(QUICK_BATCHES if args.quick else BATCHES)
    )
    records: list[dict[str, Any]] = []
    for k, tname in enumerate(args.tables.split(",") if args.tables else shapes):
        table = np.random.default_rng(k).random(shapes[tname], dtype=np.float32)
        if "torch" in loaded:
            loaded["torch_table"] = loaded["torch"].from_numpy(table)
        if "jax" in loaded:
            loaded["jax_table"] = loaded["jax"].device_put(table)
        cases = [
            Case(tname, batch, index_dtype, threads)
            for index_dtype in INDEX_DTYPES
            for threads in run.results["threads"]
            for batch in batches
        ]
        records += run.each(cases, lambda case, table=table: measure_case(run, case, table))
        loaded.pop("torch_table", None)
        loaded.pop("jax_table", None)
        del table
    set_threads(max(run.results["threads"]), loaded)
    return records


def text(results: dict[str, Any]) -> str:
    header, table, notes = rows(results)
    peers = [p for p in FAMILIES if p not in results["missing"]]
    return "\n".join(
        [
            text_table(header, table),
            *(f"[{i}] {note}" for i, note in enumerate(notes, 1)),
            floor_statement(results["cases"], [SUBJECT, *peers]),
        ]
    )
