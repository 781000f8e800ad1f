"""Tables from benchmark records: the machine, a text table, a Markdown table for the README.

Everything here renders the JSON-ready records of :mod:`runner`, so the README table can be
regenerated from a stored run without re-measuring::

    python benches/report.py bench-results/compare_numpy.json            # print Markdown
    python benches/report.py bench-results/compare_numpy.json --readme README.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

README_BEGIN = "<!-- bench table -->"
README_END = "<!-- /bench table -->"
PEERS_BEGIN = "<!-- peers table -->"
PEERS_END = "<!-- /peers table -->"


# --------------------------------------------------------------------------- machine


def _proc_field(path: str, key: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() == key:
                    return value.strip()
    except OSError:
        pass
    return None


def _memory_gib() -> float | None:
    total = _proc_field("/proc/meminfo", "MemTotal")  # "24684096 kB"
    return round(int(total.split()[0]) / 2**20, 1) if total else None


def _git_commit(where: Path) -> str | None:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("-dirty" if dirty else "")


def machine_info(versions: Mapping[str, str], extra: Mapping[str, Any] = {}) -> dict[str, Any]:
    """What a reader needs to reproduce a run: CPU, cores, memory, OS, Python, library versions."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    return {
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "versions": dict(versions),
        "git_commit": _git_commit(Path(__file__).resolve().parent),
        **extra,
    }


def describe_machine(machine: Mapping[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    return (
        f"{machine['cpu']}, {machine['cores']} cores ({machine['usable_cores']} usable), "
        f"{machine['memory_gib']} GiB; {machine['os']}; {machine['python']}; {versions}"
    )


# --------------------------------------------------------------------------- formatting


def fmt_seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


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
            fmt_ratio(c["median_s"] / _median(record, best) if best else None),
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


def _median(record: Mapping[str, Any], name: str | None) -> float:
    return float("nan") if name is None else float(record["candidates"][name]["median_s"])


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
            row += [fmt_seconds(_median(r, best)) if best else "-", _idiom(best, b)]
        row += [fmt_ratio(r["ratios"].get(s, {}).get(b)) for b in baselines for s in subjects]
        rows.append(row)
    return header, rows


def _idiom(name: str | None, family: str) -> str:
    return "-" if name is None else name.removeprefix(family + " ")


def summary_text(
    records: Sequence[Mapping[str, Any]], subject: str, baselines: Sequence[str]
) -> str:
    return text_table(*summary_rows(records, subject, baselines))


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
}
LIMITS = ("copy", "copy 2 threads", "alloc+copy")
# The groups of the targets of issue 4: the "large-output cases" are those of no other group.
OVERHEAD_CASES = ("tiny_gather_nd", "tiny_gather")
HALF_CASES = ("ov_gnd8_xml1", "ov_gnd8_xml2", "ov_gnd8_xml3", "gather_batch")
POINT_CASES = ("points_2m",)
OTHER_TARGETS = OVERHEAD_CASES + HALF_CASES + POINT_CASES
LARGE_OUTPUT_CASES = (
    "rows_1m_256b",
    "rows_1m_u8",
    "rows_1m_f64",
    "slices_128k",
    "tokens_b1",
    "gather_axis0",
    "gather_axis1",
)
LARGE_OUTPUT_BYTES = 1 << 20  # for cases of none of the above


def best_peer(record: Mapping[str, Any], peers: Sequence[str]) -> str | None:
    """The fastest candidate of any peer family in a case, or ``None``."""
    cands = record["candidates"]
    names = [n for f, n in record.get("best", {}).items() if f in peers]
    return min(names, key=lambda n: cands[n]["median_s"], default=None)


def _ratio(record: Mapping[str, Any], name: str | None, over: str | None) -> float | None:
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
            fmt_ratio(_ratio(r, subject, top)),
            fmt_ratio(_ratio(r, f"{subject} out=", top)),
            *(t(limit) for limit in LIMITS),
            fmt_ratio(_ratio(r, f"{subject} out=", "copy 2 threads")),
        ]
        rows.append(row)
    return header, rows, notes


def peer_text(results: Mapping[str, Any]) -> str:
    header, rows, notes = peer_rows(results)
    return text_table(header, rows) + "".join(
        f"\n[{i}] n/a: {note}" for i, note in enumerate(notes, 1)
    )


def targets(
    results: Mapping[str, Any], one_thread: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The targets of issue 4, item 2, judged on ``results`` (and the ``--threads 1`` run).

    ratio = ndgather median / the yardstick's median; ``met`` is ``None`` where a yardstick
    is missing (a peer not installed or n/a)."""
    subject, peers = results["subject"], results["peers"]
    checks: list[dict[str, Any]] = []

    def judge(goal: str, r: Mapping[str, Any], name: str, over: str | None, limit: float) -> None:
        ratio = _ratio(r, name, over)
        checks.append(
            {
                "target": goal,
                "case": r["name"],
                "candidate": name,
                "yardstick": over,
                "ratio": ratio,
                "limit": limit,
                "met": None if ratio is None else ratio <= limit,
            }
        )

    for r in results["cases"]:
        if r["errors"]:
            continue
        name = r["name"]
        top = best_peer(r, peers)
        if name in OVERHEAD_CASES:
            judge("per-call overhead: <= 0.5x NumPy", r, subject, r["best"].get("numpy"), 0.5)
        if name in HALF_CASES:
            judge("OpenVINO examples, batched Gather: <= 0.5x best peer", r, subject, top, 0.5)
        if name in POINT_CASES:
            judge("point lookups: <= 0.7x best peer", r, subject, top, 0.7)
        if name in LARGE_OUTPUT_CASES or (
            name not in OTHER_TARGETS and r["output_bytes"] >= LARGE_OUTPUT_BYTES
        ):
            ort = r["best"].get("onnxruntime")
            judge("large output: new array <= 1.0x onnxruntime", r, subject, ort, 1.0)
            judge(
                "large output: out= <= 1.25x two-thread copy",
                r,
                f"{subject} out=",
                "copy 2 threads",
                1.25,
            )
    if one_thread is not None:
        for r in one_thread["cases"]:
            if not r["errors"]:
                top = best_peer(r, one_thread["peers"])
                judge("one thread: ahead of every peer", r, subject, top, 1.0)
                checks[-1]["met"] = None if checks[-1]["ratio"] is None else checks[-1]["ratio"] < 1
    return checks


def targets_table(checks: Sequence[Mapping[str, Any]], markdown: bool = False) -> str:
    header = ["target", "case", "ratio", "limit", "met"]
    rows = [
        [
            c["target"],
            c["case"],
            fmt_ratio(c["ratio"]),
            f"{c['limit']:g}x",
            {True: "yes", False: "**no**" if markdown else "NO", None: "n/a"}[c["met"]],
        ]
        for c in checks
    ]
    return (markdown_table if markdown else text_table)(header, rows)


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
    """The README block: the table of a run (and of its ``--threads 1`` run), the n/a
    reasons, the targets, the machine, versions and commands, and the plot."""
    parts: list[str] = []
    runs = [("All threads", results)] + ([("One thread", one_thread)] if one_thread else [])
    for title, run in runs:
        header, rows, notes = peer_rows(run, markdown=True)
        parts.append(f"**{title}** ({_run_note(run)})")
        parts.append(markdown_table(header, rows))
        if notes:
            parts.append(" ".join(f"[{i}] {n}." for i, n in enumerate(notes, 1)))
    parts.append("**Targets** (ratio = ndgather median / the yardstick's median):")
    parts.append(targets_table(targets(results, one_thread), markdown=True))
    m = results["machine"]
    parts.append(f"Machine: {describe_machine(m)}.")
    if results.get("missing"):
        missing = "; ".join(f"{k}: {v}" for k, v in results["missing"].items())
        parts.append(f"Not measured: {missing}.")
    if image:
        parts.append(f"![ndgather against the peers, per case]({image})")
    return "\n\n".join(parts)


def update_readme(
    path: Path, markdown: str, begin: str = README_BEGIN, end: str = README_END
) -> None:
    """Replace what lies between the ``begin`` and ``end`` markers of ``path``."""
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"{path}: no {begin} ... {end} markers")
    block = f"{begin}\n{markdown}\n{end}"
    path.write_text(pattern.sub(lambda _: block, text, count=1), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="JSON written by a comparison's --json")
    parser.add_argument("--readme", type=Path, help="replace the table between the markers")
    args = parser.parse_args(argv)
    markdown = summary_markdown(json.loads(args.results.read_text(encoding="utf-8")))
    if args.readme:
        update_readme(args.readme, markdown)
    else:
        print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
