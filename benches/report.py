"""Tables from benchmark records: text and Markdown, the summaries of ``compare`` and its
peers' tables.

The tables render the JSON-ready records of the suites, so a table can be regenerated from a
stored run without re-measuring; as the suite ``report``, this renders the "NumPy, idiom by
idiom" table of ``compare --peers numpy``::

    python -m benches report bench-results/compare_numpy.json            # print Markdown
    python -m benches report bench-results/compare_numpy.json --doc docs/performance.md
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .runner import describe_machine, doc_options, refuse_dirty, update_doc

# --------------------------------------------------------------------------- formatting


def fmt_seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def provenance(results: Mapping[str, Any]) -> str:
    """The commit, command and machine of a run, as the tables' captions end."""
    m = results["machine"]
    return (
        f"commit {m.get('git_commit') or '?'}; command: `{results['command']}`; "
        f"{describe_machine(m)}."
    )


def text_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    rows = [list(header), *map(list, rows)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- tables


def case_detail(record: Mapping[str, Any], baseline: str, best: str | None = None) -> str:
    """Every candidate of one case: median, spread, calls per sample, ratio to ``best`` (by
    default the best of the ``baseline`` family), then the candidates skipped and why."""
    if record["errors"]:
        return f"{record['name']}: FAILED\n" + "\n".join(f"  {e}" for e in record["errors"])
    if best is None:
        best = record["best"].get(baseline)
    rows = [
        [
            name + (" *" if name == best else ""),
            fmt_seconds(c["median_s"]),
            f"{fmt_seconds(c['min_s'])} .. {fmt_seconds(c['max_s'])}",
            str(c["calls_per_sample"]),
            fmt_ratio(ratio(record, name, best)),
        ]
        for name, c in sorted(record["candidates"].items(), key=lambda kv: kv[1]["median_s"])
    ]
    header = ["candidate", "median/call", "min .. max", "calls/sample", f"vs best {baseline}"]
    shapes = (
        f"data {tuple(record['data_shape'])} {record['dtype']}, "
        f"indices {tuple(record['indices_shape'])}"
    )
    attrs = f"batch_dims={record['batch_dims']}"
    if record["op"] == "gather":
        attrs = f"axis={record['axis']}, " + attrs
    title = f"{record['name']}: {record['op']} {shapes}, {attrs}"
    skipped = [f"  n/a {name}: {why}" for name, why in record.get("skipped", {}).items()]
    return "\n".join([title, _indent(text_table(header, rows)), *skipped])


def median(record: Mapping[str, Any], name: str | None) -> float | None:
    """The median per call of candidate ``name`` in a case, or ``None``."""
    cand = record["candidates"].get(name) if name else None
    return None if cand is None else float(cand["median_s"])


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def summary_rows(
    records: Sequence[Mapping[str, Any]],
    subject: str,
    baselines: Sequence[str],
    describe: bool = False,
) -> tuple[list[str], list[list[str]]]:
    """One row per case: the subject family's candidates, each baseline family's best, ratios.

    With ``describe``, a second column says what the case is."""
    subjects: list[str] = []
    for r in records:
        for name, c in r["candidates"].items():
            if c["family"] == subject and name not in subjects:
                subjects.append(name)
    header = ["case", *(["what"] if describe else []), *subjects]
    for b in baselines:
        header += [f"best {b}", f"{b} idiom"]
    header += [f"{s} / {b}" for b in baselines for s in subjects]
    rows = []
    for r in records:
        if r["errors"]:
            rows.append([r["name"], "FAILED"] + [""] * (len(header) - 2))
            continue
        cands = r["candidates"]
        row = [r["name"], *([r["description"]] if describe else [])] + [
            fmt_seconds(cands[s]["median_s"]) if s in cands else "-" for s in subjects
        ]
        for b in baselines:
            best = r["best"].get(b)
            row += [fmt_seconds(median(r, best)) if best else "-", _idiom(best, b)]
        row += [fmt_ratio(r["ratios"].get(s, {}).get(b)) for b in baselines for s in subjects]
        rows.append(row)
    return header, rows


def _idiom(name: str | None, family: str) -> str:
    return "-" if name is None else name.removeprefix(family + " ")


def summary_markdown(results: Mapping[str, Any]) -> str:
    header, rows = summary_rows(
        results["cases"], results["subject"], results["baselines"], describe=True
    )
    m = results["machine"]
    return (
        markdown_table(header, rows)
        + f"\n\nMedian time per call over {results['rounds']} interleaved rounds; "
        + f"ratio < 1 means {results['subject']} is faster. Machine: {describe_machine(m)}; "
        + f"{results['subject']} threads: {m.get('ndgather_threads', '?')}; "
        + f"commit {m.get('git_commit') or '?'}. Command: `{results['command']}`."
    )


# --------------------------------------------------------------------------- peers

#: Display names of the families of ``compare.py``.
FAMILY_NAMES = {
    "numpy": "NumPy",
    "onnxruntime": "onnxruntime",
    "openvino": "OpenVINO",
    "tensorflow": "TensorFlow",
    "torch": "PyTorch",
    "jax": "JAX",
    "numba": "numba",
}
LIMITS = ("copy", "copy 2 threads", "alloc+copy")
#: The floors of benches/floor.py. The gather floor (an unchecked gather of the same blocks
#: into a warm output, tuned) is the limit no gather beats; the read and the write floor are
#: its two halves, shown beside it (their larger was the limit before issue 31).
READ_FLOOR, WRITE_FLOOR, GATHER_FLOOR = "read floor", "write floor", "gather floor"
#: ndgather's out= form with mode="clip" (no check), for the cost of mode="raise".
CLIP = "ndgather out= clip"


def floor_time(record: Mapping[str, Any], name: str) -> float | None:
    """A floor's time in a case: its fastest sample, not its median. A floor is what the
    machine can be shown to do; on a loaded machine its median carries the load (the gathers
    are reported, and judged against it, by their medians)."""
    cand = record["candidates"].get(name)
    return None if cand is None else float(cand["min_s"])


def limit(record: Mapping[str, Any]) -> float | None:
    """The gather floor of a case, or ``None`` when it was not measured (a record from before
    the gather floor: its limit was the larger of the read and write floors, not shown)."""
    return floor_time(record, GATHER_FLOOR)


def floor_beaten(
    record: Mapping[str, Any], families: Sequence[str], name: str | None = None
) -> list[str]:
    """Gathers (candidates of ``families``) faster than the floor ``name``, by default the
    gather floor (or the read floor, in a record without one): there a floor is not one."""
    floor = floor_time(record, name) if name else limit(record) or floor_time(record, READ_FLOOR)
    if floor is None:
        return []
    return [
        name
        for name, c in record["candidates"].items()
        if c["family"] in families and c["median_s"] < floor
    ]


def best_peer(record: Mapping[str, Any], peers: Sequence[str]) -> str | None:
    """The fastest candidate of any peer family in a case, or ``None``."""
    cands = record["candidates"]
    names = [n for f, n in record.get("best", {}).items() if f in peers]
    return min(names, key=lambda n: cands[n]["median_s"], default=None)


def ratio(record: Mapping[str, Any], name: str | None, over: str | None) -> float | None:
    cands = record["candidates"]
    if name not in cands or over not in cands:
        return None
    return float(cands[name]["median_s"] / cands[over]["median_s"])


def _family_na(record: Mapping[str, Any], family: str, results: Mapping[str, Any]) -> str:
    """Why a family has no time in a case: its skip reasons, or that it is not installed."""
    if family in results.get("missing", {}):
        return "not installed"
    reasons = {
        why
        for name, why in record.get("skipped", {}).items()
        if results["families"].get(name) == family
    }
    return "; ".join(sorted(reasons)) or "no form for this case"


def floor_statement(
    records: Sequence[Mapping[str, Any]], families: Sequence[str], name: str = "name"
) -> str:
    """Whether the gather floor held: below every gather measured, or which cases broke it."""
    measured = [r for r in records if not r["errors"] and limit(r) is not None]
    broken = [r[name] for r in measured if floor_beaten(r, families)]
    if not measured:
        return "No gather floor measured."
    if broken:
        return (
            f"The gather floor is BROKEN (a gather beat it) in {len(broken)} of "
            f"{len(measured)} cases: {', '.join(broken)}."
        )
    return (
        f"The gather floor is below every gather measured in all {len(measured)} cases: "
        f"it is a floor."
    )


def peer_rows(
    results: Mapping[str, Any], describe: bool = False, markdown: bool = False
) -> tuple[list[str], list[list[str]], list[str]]:
    """The peer comparison: per case, ndgather (new array, ``out=``), the best form of each
    peer, the best peer, the ratios, and the copy limits; plus footnotes for every "n/a"."""
    peers, subject = results["peers"], results["subject"]
    header = ["case", *(["what"] if describe else []), subject, f"{subject} out="]
    header += [FAMILY_NAMES.get(p, p) for p in peers]
    header += [
        f"{subject} / best peer",
        "out= / best peer",
        *LIMITS,
        "out= / copy 2 threads",
        READ_FLOOR,
        WRITE_FLOOR,
        GATHER_FLOOR,
        f"{subject} / {GATHER_FLOOR}",
        f"out= / {GATHER_FLOOR}",
        "raise / clip",
    ]
    rows: list[list[str]] = []
    notes: list[str] = []
    for r in results["cases"]:
        if r["errors"]:
            rows.append([r["name"], "FAILED"] + [""] * (len(header) - 2))
            continue
        cands = r["candidates"]

        def t(name: str | None, cands: Mapping[str, Any] = cands) -> str:
            return fmt_seconds(cands[name]["median_s"]) if name in cands else "-"

        row = [r["name"], *([r["description"]] if describe else [])]
        row += [t(subject), t(f"{subject} out=")]
        top = best_peer(r, peers)
        for family in peers:
            fastest = r["best"].get(family)
            if fastest is None:
                why = _family_na(r, family, results)
                notes.append(f"{FAMILY_NAMES.get(family, family)} on {r['name']}: {why}")
                row.append(f"n/a [{len(notes)}]")
                continue
            form = fastest.removeprefix(family).strip()
            cell = t(fastest) + (f" {form}" if form else "")
            if fastest == top and markdown:
                cell = f"**{cell}**"
            row.append(cell)
        row += [
            fmt_ratio(ratio(r, subject, top)),
            fmt_ratio(ratio(r, f"{subject} out=", top)),
            *(t(limit) for limit in LIMITS),
            fmt_ratio(ratio(r, f"{subject} out=", "copy 2 threads")),
        ]
        beaten = floor_beaten(r, [subject, *peers])
        floors = {n: floor_time(r, n) for n in (READ_FLOOR, WRITE_FLOOR)}
        top_limit = limit(r)
        floor_cell = fmt_seconds(top_limit) if top_limit else "-"
        if beaten:
            notes.append(f"gather floor on {r['name']} BROKEN: beaten by {', '.join(beaten)}")
            floor_cell += f" [{len(notes)}]"
        row += [
            fmt_seconds(floors[READ_FLOOR]) if floors[READ_FLOOR] else "-",
            fmt_seconds(floors[WRITE_FLOOR]) if floors[WRITE_FLOOR] else "-",
            floor_cell,
            fmt_ratio(median(r, subject) / top_limit if top_limit and subject in cands else None),
            fmt_ratio(
                median(r, f"{subject} out=") / top_limit
                if top_limit and f"{subject} out=" in cands
                else None
            ),
            fmt_ratio(ratio(r, f"{subject} out=", CLIP)),
        ]
        rows.append(row)
    return header, rows, notes


def peer_text(results: Mapping[str, Any]) -> str:
    header, rows, notes = peer_rows(results)
    return text_table(header, rows) + "".join(
        f"\n[{i}] {'' if 'BROKEN' in note else 'n/a: '}{note}" for i, note in enumerate(notes, 1)
    )


def _run_note(results: Mapping[str, Any]) -> str:
    m = results["machine"]
    threads = m.get("ndgather_threads", "?")
    peer_threads = results.get("peer_threads") or "default (every core)"
    return (
        f"Median per call over {results['rounds']} interleaved rounds; ndgather threads: "
        f"{threads}, peers' threads: {peer_threads}; commit {m.get('git_commit') or '?'}. "
        f"Command: `{results['command']}`."
    )


def peer_markdown(
    results: Mapping[str, Any],
    one_thread: Mapping[str, Any] | None = None,
    image: str | None = None,
) -> str:
    """The peers block of docs/performance.md: the table of a run (and of its ``--threads 1``
    run), the n/a reasons, the machine, versions and commands, and the plot."""
    parts: list[str] = []
    runs = [("All threads", results)] + ([("One thread", one_thread)] if one_thread else [])
    for title, run in runs:
        header, rows, notes = peer_rows(run, markdown=True)
        parts.append(f"**{title}** ({_run_note(run)})")
        parts.append(markdown_table(header, rows))
        if notes:
            parts.append(" ".join(f"[{i}] {n}." for i, n in enumerate(notes, 1)))
        if any(limit(r) for r in run["cases"] if not r["errors"]):
            parts.append(floor_statement(run["cases"], [run["subject"], *run["peers"]]))
    m = results["machine"]
    parts.append(f"Machine: {describe_machine(m)}.")
    if results.get("missing"):
        missing = "; ".join(f"{k}: {v}" for k, v in results["missing"].items())
        parts.append(f"Not measured: {missing}.")
    if image:
        parts.append(f"![ndgather against the peers, per case]({image})")
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- the report suite


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="JSON of compare --peers numpy --json")
    doc_options(parser)


def render(args: argparse.Namespace) -> int:
    results = json.loads(args.results.read_text(encoding="utf-8"))
    markdown = summary_markdown(results)
    if args.doc:
        refuse_dirty([results["machine"]], args.allow_dirty)
        update_doc(args.doc, markdown, "bench table")
    else:
        print(markdown)
    return 0
