"""The peers tables of docs/performance.md, the README summary and ``docs/benchmark.png``,
from ``compare.py`` results.

Nothing is measured here: everything is rendered from the JSON of a run (and, optionally, of
its ``--threads 1`` run), so the tables and the plot always show the same numbers::

    python -m benches compare --json bench-results/compare.json
    python -m benches compare --threads 1 --json bench-results/compare-1t.json
    python -m benches plot bench-results/compare.json --one-thread bench-results/compare-1t.json \\
        --png docs/benchmark.png --doc docs/performance.md --readme README.md

``--doc`` fills the "peers table" block, ``--readme`` the "summary table" block (per case:
ndgather, the fastest peer, the ratios of all threads and of one thread); without either the
Markdown is printed. The plot has one row per case: on the left the
median per call of ndgather (new array and ``out=``) and of each peer's fastest form, with
the copy limits marked, on a log scale; on the right ndgather's median over the best peer's
(below 1 is faster), for the run and for the one-thread run.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .report import (
    FAMILY_NAMES,
    best_peer,
    fmt_ratio,
    fmt_seconds,
    limit,
    markdown_table,
    median,
    peer_markdown,
    ratio,
)
from .runner import describe_machine, doc_options, refuse_dirty, update_doc

COLOURS = {
    "ndgather": "#d62728",
    "ndgather out=": "#ff9896",
    "numpy": "#1f77b4",
    "onnxruntime": "#2ca02c",
    "openvino": "#9467bd",
    "tensorflow": "#ff7f0e",
    "torch": "#8c564b",
    "jax": "#e377c2",
    "numba": "#17becf",
}


def _series(results: Mapping[str, Any]) -> list[tuple[str, str, list[float | None]]]:
    """(label, colour key, median per case or None) for ndgather's two forms and each peer."""
    subject = results["subject"]
    cases = [r for r in results["cases"] if not r["errors"]]
    out: list[tuple[str, str, list[float | None]]] = []
    for name in (subject, f"{subject} out="):
        out.append((name, name, [median(r, name) for r in cases]))
    for family in results["peers"]:
        times = [median(r, r["best"].get(family)) for r in cases]
        out.append((f"{FAMILY_NAMES.get(family, family)} (fastest form)", family, times))
    return out


def _ratios(results: Mapping[str, Any]) -> dict[str, float]:
    """ndgather's median over the best peer's, by case."""
    ratios = {
        r["name"]: ratio(r, results["subject"], best_peer(r, results["peers"]))
        for r in results["cases"]
        if not r["errors"]
    }
    return {name: x for name, x in ratios.items() if x is not None}


def readme_table(results: Mapping[str, Any], one_thread: Mapping[str, Any] | None) -> str:
    """The README summary: per case, ndgather's median, the fastest peer's (of any family)
    and ndgather's over it, for the run and for its one-thread run."""
    ratios, one = _ratios(results), _ratios(one_thread) if one_thread else {}
    rows = []
    for r in results["cases"]:
        top = None if r["errors"] else best_peer(r, results["peers"])
        if top is None:
            continue
        family = FAMILY_NAMES.get(r["candidates"][top]["family"], "?")
        rows.append(
            [
                r["name"],
                fmt_seconds(r["candidates"][results["subject"]]["median_s"]),
                f"{fmt_seconds(r['candidates'][top]['median_s'])} {family}",
                fmt_ratio(ratios.get(r["name"])),
                fmt_ratio(one.get(r["name"])),
            ]
        )
    table = markdown_table(["case", "ndgather", "best peer", "ratio", "ratio, 1 thread"], rows)
    names = ", ".join(FAMILY_NAMES.get(p, p) for p in results["peers"])
    missing = ", ".join(FAMILY_NAMES.get(p, p) for p in results.get("missing", {}))
    return (
        table
        + f"\n\nPeers in this run: {names}"
        + (f" (not installed: {missing})" if missing else "")
        + "."
    )


def plot(results: Mapping[str, Any], one_thread: Mapping[str, Any] | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    cases = [r for r in results["cases"] if not r["errors"]]
    names = [r["name"] for r in cases]
    n = len(cases)
    series = _series(results)
    height_in = 2.2 + 0.62 * n
    fig, (ax, rx) = plt.subplots(
        1,
        2,
        figsize=(14, height_in),
        sharey=True,
        gridspec_kw={"width_ratios": [2.2, 1], "wspace": 0.05},
    )
    height = 0.8 / len(series)
    for k, (label, key, times) in enumerate(series):
        ys = [i - 0.4 + (k + 0.5) * height for i in range(n)]
        pairs = [(y, t) for y, t in zip(ys, times, strict=True) if t]
        ax.barh(
            [y for y, _ in pairs],
            [t for _, t in pairs],
            height=height,
            color=COLOURS.get(key, "grey"),
            label=label,
        )
    marks = (
        ("copy 2 threads of the output's bytes", "|", lambda r: median(r, "copy 2 threads")),
        ("alloc+copy of the output's bytes", "x", lambda r: median(r, "alloc+copy")),
        ("gather floor", "D", limit),
    )
    for label, marker, when in marks:
        pts = [(i, when(r)) for i, r in enumerate(cases)]
        pts = [(i, t) for i, t in pts if t]
        hollow = {"facecolors": "none", "edgecolors": "black"} if marker == "D" else {}
        ax.scatter(
            [t for _, t in pts],
            [i for i, _ in pts],
            marker=marker,
            s=300 if marker == "|" else 40 if marker == "D" else 60,
            **(hollow or {"color": "black"}),
            zorder=3,
            label=label,
        )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_seconds(x)))
    ax.set_yticks(range(n), names)
    ax.invert_yaxis()
    ax.grid(axis="x", which="major", alpha=0.3)
    ax.set_xlabel("median time per call (log scale; shorter is faster)")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=3, fontsize=8, frameon=False)

    runs = [("all threads", results, "#d62728")]
    if one_thread is not None:
        runs.append(("one thread", one_thread, "#7f7f7f"))
    rh = 0.8 / len(runs)
    for k, (label, run, colour) in enumerate(runs):
        ratios = _ratios(run)
        ys = [i - 0.4 + (k + 0.5) * rh for i in range(n) if names[i] in ratios]
        vals = [ratios[name] for name in names if name in ratios]
        rx.barh(ys, vals, height=rh, color=colour, label=f"ndgather / best peer, {label}")
        for y, v in zip(ys, vals, strict=True):
            rx.text(v, y, f" {v:.2f}x", va="center", fontsize=7)
    rx.axvline(1.0, color="black", lw=1)
    rx.set_xscale("log")
    rx.xaxis.set_major_locator(FixedLocator([0.1, 0.25, 0.5, 1, 2, 4, 8]))
    rx.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
    rx.xaxis.set_minor_formatter(NullFormatter())
    rx.grid(axis="x", which="major", alpha=0.3)
    rx.set_xlabel("ndgather median / best peer median (log; < 1: ndgather faster)")
    rx.legend(loc="lower left", bbox_to_anchor=(0, 1.0), fontsize=8, frameon=False)

    m = results["machine"]
    fig.suptitle(
        "ndgather against "
        + ", ".join(FAMILY_NAMES.get(p, p) for p in results["peers"])
        + " (median per call)",
        y=0.995,
    )
    commands = [results["command"]] + ([one_thread["command"]] if one_thread else [])
    fig.text(
        0.01,
        0.002,
        _wrap(
            f"{describe_machine(m)}; commit {m.get('git_commit') or '?'}. Commands: "
            + "; ".join(commands),
            190,
        ),
        fontsize=7,
        va="bottom",
    )
    fig.subplots_adjust(left=0.1, right=0.97, top=1 - 1.0 / height_in, bottom=1.0 / height_in)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _wrap(text: str, width: int) -> str:
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="JSON written by compare --json")
    parser.add_argument("--one-thread", type=Path, help="JSON of compare --threads 1")
    parser.add_argument("--png", type=Path, help="write the plot here (docs/benchmark.png)")
    doc_options(parser, "fill the peers block (docs/performance.md)")
    parser.add_argument("--readme", type=Path, help="fill the summary block (README.md)")


def render(args: argparse.Namespace) -> int:
    results = json.loads(args.results.read_text(encoding="utf-8"))
    one_thread = (
        json.loads(args.one_thread.read_text(encoding="utf-8")) if args.one_thread else None
    )
    if args.png or args.doc or args.readme:
        runs = [results] + ([one_thread] if one_thread else [])
        refuse_dirty([r["machine"] for r in runs], args.allow_dirty)
    if args.png:
        plot(results, one_thread, args.png)
        print(f"wrote {args.png}")
    image = None
    if args.png and args.doc:
        image = os.path.relpath(args.png, args.doc.parent)
    markdown = peer_markdown(results, one_thread, image)
    summary = readme_table(results, one_thread)
    if args.doc:
        update_doc(args.doc, markdown, "peers table")
    if args.readme:
        update_doc(args.readme, summary, "summary table")
    if not (args.doc or args.readme):
        print(markdown + "\n\n" + summary)
    return 0
