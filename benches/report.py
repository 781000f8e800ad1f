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


def _text_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    rows = [list(header), *map(list, rows)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- tables


def case_detail(record: Mapping[str, Any], baseline: str) -> str:
    """Every candidate of one case: median, spread, calls per sample, ratio to the best baseline."""
    if record["errors"]:
        return f"{record['name']}: FAILED\n" + "\n".join(f"  {e}" for e in record["errors"])
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
    return title + "\n" + _indent(_text_table(header, rows))


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
    return _text_table(*summary_rows(records, subject, baselines))


def summary_markdown(results: Mapping[str, Any]) -> str:
    header, rows = summary_rows(
        results["cases"], results["subject"], results["baselines"], describe=True
    )
    m = results["machine"]
    return (
        _markdown_table(header, rows)
        + f"\n\nMedian time per call over {results['rounds']} interleaved rounds; "
        + f"ratio < 1 means {results['subject']} is faster. Machine: {describe_machine(m)}; "
        + f"{results['subject']} threads: {m.get('ndgather_threads', '?')}; "
        + f"commit {m.get('git_commit') or '?'}. Command: `{results['command']}`."
    )


def update_readme(path: Path, markdown: str) -> None:
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(README_BEGIN) + ".*?" + re.escape(README_END), re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"{path}: no {README_BEGIN} ... {README_END} markers")
    block = f"{README_BEGIN}\n{markdown}\n{README_END}"
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
