"""The one harness of the suites: their shared options, the machine a run is recorded on,
the JSON, the table written into the docs; and :func:`run_case`, one case of candidates
built, checked and timed (``compare``).

A suite, a module of ``benches/`` that ``__main__.py`` names, says what it measures:

* ``ROUNDS`` and ``MIN_SAMPLE_S``: the defaults of ``--rounds`` and ``--min-sample-time``,
  each as (full run, ``--quick``);
* ``CASES`` (optional): its named cases (each with a ``name`` and ``shrunk()``; a suite of
  the cases of ``cases.txt`` imports them as ``CASES``), of which ``--cases`` picks some
  (default: ``DEFAULT_CASES``, else all), shrunk by ``--quick`` (``Run.cases``);
* ``TABLE`` (optional): the marker of its table in docs/performance.md, which ``--doc``
  fills; ``PEERS`` (optional): the libraries it compares with, imported here (``Run.peers``,
  their versions recorded; one that does not import is named in ``Run.missing``);
* ``add_options(parser)`` (optional): its own options; ``load(run)`` (optional): checks them
  and sets up what it needs before the machine is recorded;
* ``measure(run)``: the records of its cases (:meth:`Run.each`), JSON-ready dicts;
  ``text(results)``, what is printed of them, and ``markdown(results)``, its table.

:func:`main` does the rest alike for every suite: parse the options, record the machine
(a run that ``--doc`` would put into the docs from a dirty tree is refused before it
starts), measure, print, write the JSON (``--json``) and the table (``--doc``). Tables are
rendered from the records only, so they never disagree with a stored JSON file. The exit
status is 1 when a record has ``errors`` (its candidates disagreed) or ``failures`` (a peer
failed in a way not foreseen). A suite that measures nothing (``report``, ``plot``: tables
from stored JSON) has ``add_options`` and ``render(args)`` instead.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import ndgather
import numpy as np

from .candidates import Candidate, NotApplicable
from .cases import Case, select
from .timing import Call, run_interleaved

T = TypeVar("T")

# --------------------------------------------------------------------------- the machine


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


#: What recording a run writes (tables, plot, JSON): changes there leave the code measured
#: as committed, so they do not make the tree dirty (one recording step runs after another).
RECORD_OUTPUTS = ("docs", "README.md")


def _git_commit(where: Path) -> str | None:
    """The commit of the tree ``where`` is in, ``-dirty`` when it has changes (staged or not)
    or untracked files outside :data:`RECORD_OUTPUTS`; ``None`` outside git."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        top = Path(git("rev-parse", "--show-toplevel"))
        commit = git("rev-parse", "--short=12", "HEAD")
        excluded = [f":(top,exclude){p}" for p in RECORD_OUTPUTS]
        dirty = git("-C", str(top), "status", "--porcelain", "--", ".", *excluded)
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("-dirty" if dirty else "")


def clean_commit(machine: Mapping[str, Any]) -> bool:
    """Whether a run was recorded at a known commit of a clean tree."""
    commit = machine.get("git_commit")
    return bool(commit) and not str(commit).endswith("-dirty")


def refuse_dirty(machines: Iterable[Mapping[str, Any]], allow_dirty: bool) -> None:
    """Stop before a run from a dirty tree (or outside git) goes into the docs: its commit
    would not say what code was measured. ``--allow-dirty`` writes it, marked ``-dirty``."""
    bad = [str(m.get("git_commit") or "no git commit") for m in machines if not clean_commit(m)]
    if bad and not allow_dirty:
        raise SystemExit(
            f"refusing to put a run recorded at {', '.join(bad)} into the docs: commit the code "
            "first (changes under docs/ and README.md do not count), or pass --allow-dirty to "
            "write it marked as such"
        )


def machine_info(versions: Mapping[str, str], extra: Mapping[str, Any] = {}) -> dict[str, Any]:
    """What a reader needs to reproduce a run: CPU, cores, memory, OS, Python, library versions."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    info = {
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "kind": machine_kind(),
        "caches": _caches(),
        # The thresholds ndgather derived from them (docs/architecture.md's model).
        "ndgather_tuning": _ndgather_tuning(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "versions": dict(versions),
        "git_commit": _git_commit(Path(__file__).resolve().parent),
        **extra,
    }
    if not clean_commit(info):
        why = (
            f"commit {info['git_commit']}: the tree has changes outside docs/ and README.md"
            if info["git_commit"]
            else "no commit: not in a git checkout"
        )
        print(f"warning: recording {why}; the run does not name the code measured", file=sys.stderr)
    return info


def _ndgather_tuning() -> dict[str, Any]:
    """The machine model of the ndgather imported (its caches, where they came from, the
    thresholds derived: docs/architecture.md); builds before ``_tuning()`` kept the
    thresholds alone in ``_TUNING``."""
    core = ndgather._core
    if hasattr(core, "_tuning"):
        return dict(core._tuning())
    return dict(getattr(core, "_TUNING", {}))


def _caches() -> dict[str, str]:
    """The first CPU's caches as Linux reports them (``L1d``, ``L2``, ``L3``... -> size, with
    how many CPUs share it): the constants a gather is tuned by depend on them, so every run
    records them. Empty where sysfs does not say."""
    caches = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level, kind, size, shared = (
                (index / f).read_text().strip()
                for f in ("level", "type", "size", "shared_cpu_list")
            )
        except OSError:
            continue
        if kind != "Instruction":
            name = f"L{level}" + ("d" if kind == "Data" else "")
            caches[name] = f"{size} (CPUs {shared})"
    return caches


def describe_machine(machine: Mapping[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    caches = ", ".join(f"{k} {v.split()[0]}" for k, v in machine.get("caches", {}).items())
    return (
        f"{machine['cpu']}{f' ({caches})' if caches else ''}, "
        f"{machine['cores']} cores ({machine['usable_cores']} usable), "
        f"{machine['memory_gib']} GiB; {machine['os']}; {machine['python']}; {versions}"
    )


# --------------------------------------------------------------------------- a suite's run


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def command() -> str:
    """The command line of this run, as the tables quote it."""
    return shlex.join(["python", "-m", "benches", *sys.argv[1:]])


def save(results: Mapping[str, Any], path: Path | None) -> None:
    """Write ``results`` as JSON to ``path``, if given."""
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")


#: The machine kind whose runs of record lie between the plain markers of the docs (the kind
#: every table was first measured on); another kind's lie between markers named after it,
#: ``<!-- service table, Intel Xeon model 207 -->``, so that each kind keeps its latest run.
FIRST_KIND = "AMD EPYC Zen 4"


def machine_kind() -> str:
    """This machine's kind as the docs name its records (:func:`kind_of` of ``/proc/cpuinfo``)."""
    return kind_of(
        _proc_field("/proc/cpuinfo", "vendor_id") or platform.machine(),
        _proc_field("/proc/cpuinfo", "cpu family") or "?",
        _proc_field("/proc/cpuinfo", "model") or "?",
        "avx512f" in (_proc_field("/proc/cpuinfo", "flags") or "").split(),
    )


#: AMD family 25's Zen 4 models (Genoa 0x10-0x1f, Raphael and Phoenix 0x60-0x7f, Bergamo and
#: Siena 0xa0-0xaf); its other models are Zen 3 (Milan 0x01, Vermeer, Rembrandt, Cezanne).
_ZEN4_MODELS = (range(0x10, 0x20), range(0x60, 0x80), range(0xA0, 0xB0))


def kind_of(vendor: str, family: str, model: str, avx512: bool = False) -> str:
    """``AMD EPYC Zen 4`` or ``AMD EPYC Zen 3`` (AMD family 25 by model, or Zen 4 wherever it
    has AVX-512, which only Zen 4 has: the two differ in what the tuning model reads, 1 MiB or
    512 KiB of L2 a core, AVX-512 or not), ``Intel Xeon model 207``, or the vendor, family and
    model as ``/proc/cpuinfo`` says."""
    if vendor == "AuthenticAMD" and family == "25":
        zen4 = avx512 or (model.isdigit() and any(int(model) in r for r in _ZEN4_MODELS))
        return FIRST_KIND if zen4 else "AMD EPYC Zen 3"
    if vendor == "GenuineIntel":
        return f"Intel Xeon model {model}"
    return f"{vendor} family {family} model {model}"


def update_doc(path: Path, markdown: str, marker: str) -> None:
    """Replace what lies between ``<!-- marker -->`` and ``<!-- /marker -->`` in ``path``, or
    the markers of this machine's kind (:data:`FIRST_KIND`)."""
    kind = machine_kind()
    if kind != FIRST_KIND:
        marker = f"{marker}, {kind}"
    begin, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(
            f"{path}: no {begin} ... {end} markers (each machine kind keeps its runs of record "
            "between markers of its own: add them where its table belongs)"
        )
    block = f"{begin}\n{markdown}\n{end}"
    path.write_text(pattern.sub(lambda _: block, text, count=1), encoding="utf-8")
    print(f"updated {path}")


def doc_options(
    parser: argparse.ArgumentParser, doc: str = "put the table between its markers here"
) -> None:
    """``--doc`` and ``--allow-dirty`` (see :func:`refuse_dirty`)."""
    parser.add_argument("--doc", type=Path, help=doc)
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="write into the docs even a run from a tree with uncommitted changes (its commit "
        "is marked -dirty)",
    )


@dataclass
class Run:
    """One run of a suite: its options, and what the suite adds to the results."""

    args: argparse.Namespace
    parser: argparse.ArgumentParser
    cases: list[Any]
    rounds: int
    min_sample_s: float
    #: The optional libraries of ``PEERS`` that imported, by name.
    peers: dict[str, ModuleType] = field(default_factory=dict)
    versions: dict[str, str] = field(
        default_factory=lambda: {"ndgather": ndgather.__version__, "numpy": np.__version__}
    )
    #: Why each missing peer is missing.
    missing: dict[str, str] = field(default_factory=dict)
    #: More to record with the machine.
    machine: dict[str, Any] = field(default_factory=dict)
    #: The suite's own entries of the results.
    results: dict[str, Any] = field(default_factory=dict)
    #: What the suite's ``load`` set up for its ``measure``.
    loaded: Any = None

    @property
    def quick(self) -> bool:
        return bool(self.args.quick)

    def each(
        self, cases: Iterable[T], measure: Callable[[T], dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """``measure(case)`` of every case in turn, each record with its wall time, said as it
        ends."""
        records = []
        for case in cases:
            start = time.perf_counter()
            record = measure(case)
            record["wall_s"] = time.perf_counter() - start
            errors = record.get("errors")
            status = "FAILED: " + "; ".join(errors) if errors else "ok"
            print(f"  {record['name']}: {status} ({record['wall_s']:.1f} s)", flush=True)
            records.append(record)
        return records


def _parser(name: str, suite: ModuleType) -> argparse.ArgumentParser:
    cases = getattr(suite, "CASES", ())
    parser = argparse.ArgumentParser(
        prog=f"python -m benches {name}",
        description=(suite.__doc__ or "").split("\n\n")[0],
        epilog="cases: " + ", ".join(c.name for c in cases) if cases else None,
    )
    if hasattr(suite, "render"):
        return parser
    full, quick = suite.ROUNDS
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and few rounds: checks that it runs"
    )
    if cases:
        default = ",".join(getattr(suite, "DEFAULT_CASES", ())) or "all"
        parser.add_argument("--cases", help=f"comma-separated case names (default: {default})")
    parser.add_argument(
        "--rounds", type=int, help=f"interleaved rounds (default {full}, quick {quick})"
    )
    full, quick = suite.MIN_SAMPLE_S
    parser.add_argument(
        "--min-sample-time",
        type=float,
        metavar="S",
        help=f"seconds each timed batch of calls lasts at least (default {full}, quick {quick})",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results here")
    if getattr(suite, "TABLE", None):
        doc_options(parser)
    return parser


def _chosen(
    suite: ModuleType, args: argparse.Namespace, parser: argparse.ArgumentParser
) -> list[Any]:
    """The cases ``--cases`` names (else the suite's default, else all), shrunk with ``--quick``."""
    cases = getattr(suite, "CASES", ())
    if not cases:
        return []
    try:
        picked = select(
            args.cases.split(",") if args.cases else getattr(suite, "DEFAULT_CASES", None), cases
        )
    except KeyError as exc:
        parser.error(exc.args[0])
    return [c.shrunk() for c in picked] if args.quick else picked


def _import_peers(run: Run, names: Iterable[str]) -> None:
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            run.missing[name] = f"not installed ({exc})"
            continue
        run.peers[name] = module
        run.versions[name] = module.__version__


def main(name: str, suite: ModuleType, argv: Sequence[str]) -> int:
    """Run the suite ``name`` (the module ``suite``) with the options ``argv``."""
    parser = _parser(name, suite)
    if hasattr(suite, "add_options"):
        suite.add_options(parser)
    args = parser.parse_args(argv)
    if hasattr(suite, "render"):
        return int(suite.render(args))
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be >= 1")
    run = Run(
        args,
        parser,
        _chosen(suite, args, parser),
        args.rounds or suite.ROUNDS[args.quick],
        suite.MIN_SAMPLE_S[args.quick] if args.min_sample_time is None else args.min_sample_time,
    )
    _import_peers(run, getattr(suite, "PEERS", ()))
    if hasattr(suite, "load"):
        suite.load(run)
    machine = machine_info(
        run.versions,
        {
            "ndgather_threads": ndgather.get_num_threads(),
            "NDGATHER_NUM_THREADS": os.environ.get("NDGATHER_NUM_THREADS"),
            "loadavg_at_start": loadavg(),
            **run.machine,
        },
    )
    doc = args.doc if getattr(suite, "TABLE", None) else None
    if doc:  # before measuring: a run that cannot go into the docs is not started
        refuse_dirty([machine], args.allow_dirty)
    quick = "; QUICK (tiny sizes)" if args.quick else ""
    print(f"machine: {describe_machine(machine)}; {run.rounds} interleaved rounds{quick}")
    for peer, why in run.missing.items():
        print(f"skipped {peer}: {why}")
    load = machine["loadavg_at_start"]
    if load and not args.quick and load[0] > 0.5:
        print(f"warning: load average {load[0]} at start: other processes may skew the timings")
    print(flush=True)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    records = suite.measure(run)
    peak_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
    results: dict[str, Any] = {
        "benchmark": name,
        "command": command(),
        "quick": args.quick,
        "rounds": run.rounds,
        "min_sample_s": run.min_sample_s,
        "started": started,
        "machine": machine,
        "missing": run.missing,
        **run.results,
        "loadavg_at_end": loadavg(),
        "peak_rss_mib": round(peak_rss_kib / 1024),
        "cases": records,
    }
    print(suite.text(results))
    print(f"\npeak memory (max RSS): {results['peak_rss_mib']} MiB")
    save(results, args.json)
    if doc:
        update_doc(doc, suite.markdown(results), suite.TABLE)
    failed = [r["name"] for r in records if r.get("errors")]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    unforeseen = [f"{r['name']}: {f}" for r in records for f in r.get("failures", ())]
    for line in unforeseen:
        print(f"runtime failure: {line}", file=sys.stderr)
    return 1 if failed or unforeseen else 0


# --------------------------------------------------------------------------- a case of candidates


def _check(case: Case, calls: dict[str, Call], order: list[str], dtype: np.dtype) -> dict[str, str]:
    """Run every call once and compare each output with the first good one.

    Returns what went wrong, by candidate. Outputs are dropped as soon as they are compared,
    so at most two are alive at once.
    """
    failures: dict[str, str] = {}
    reference: np.ndarray | None = None
    reference_name = ""
    for name in order:
        try:
            out = np.asarray(calls[name]())
        except Exception as exc:  # a candidate's failure is reported, not fatal to the run
            failures[name] = f"{name} raised {type(exc).__name__}: {exc}"
            continue
        if out.shape != case.output_shape or out.dtype != dtype:
            failures[name] = (
                f"{name} returned shape {out.shape} dtype {out.dtype}, "
                f"expected {case.output_shape} {dtype}"
            )
        elif reference is None:
            reference, reference_name = out, name
        elif not np.array_equal(out, reference):
            failures[name] = f"{name} differs from {reference_name}"
        del out
    return failures


def summarise(record: dict[str, Any]) -> None:
    """Add ``best`` (fastest candidate of each family) and ``ratios`` (each candidate's median
    over the best of every other family) to a case record."""
    cands: dict[str, dict[str, Any]] = record["candidates"]
    best: dict[str, str] = {}
    for name, c in cands.items():
        if c["family"] not in best or c["median_s"] < cands[best[c["family"]]]["median_s"]:
            best[c["family"]] = name
    record["best"] = best
    record["ratios"] = {
        name: {
            family: c["median_s"] / cands[fastest]["median_s"]
            for family, fastest in best.items()
            if family != c["family"]
        }
        for name, c in cands.items()
    }


def run_case(
    case: Case,
    candidates: Sequence[Candidate],
    *,
    rounds: int,
    min_sample_s: float,
    reference_family: str = "numpy",
    optional_families: Collection[str] = (),
    settle_s: float = 0.0,
    lead_in_s: float = 0.0,
) -> dict[str, Any]:
    """Build ``case``, check every applicable candidate against ``reference_family``, time them.

    On any error (a candidate raised, or disagreed with the reference) nothing is timed and
    the record's ``errors`` says why, unless the candidate is of one of ``optional_families``
    (another library, judged rather than tested): then it is left out of the timing and the
    record's ``skipped`` says why, and ``failures`` too, since its failure was not foreseen.
    Candidates that raise :class:`~candidates.NotApplicable` are only ``skipped``. Unchecked
    candidates (yardsticks such as a plain copy) are timed without comparing their output.
    ``settle_s``, ``lead_in_s``: see :func:`~timing.run_interleaved`.
    """
    record: dict[str, Any] = {
        "name": case.name,
        "description": case.description,
        "op": case.op,
        "dtype": case.dtype,
        "data_shape": list(case.data_shape),
        "indices_shape": list(case.indices_shape),
        "indices_dtype": "int64",
        "axis": case.axis if case.op == "gather" else None,
        "batch_dims": case.batch_dims,
        "output_shape": list(case.output_shape),
        "output_bytes": case.output_bytes,
        "errors": [],
        "skipped": {},
        "failures": [],
        "candidates": {},
    }
    inputs = case.build()
    calls: dict[str, Call] = {}
    family: dict[str, str] = {}
    checked: dict[str, bool] = {}
    errors: list[str] = record["errors"]
    skipped: dict[str, str] = record["skipped"]

    def fail(name: str, message: str) -> None:
        if family[name] in optional_families:
            skipped[name] = message
            record["failures"].append(message)
        else:
            errors.append(message)

    for cand in candidates:
        if cand.name in calls:
            raise ValueError(f"two candidates named {cand.name!r} apply to case {case.name}")
        family[cand.name] = cand.family
        try:
            call = cand.prepare(inputs)
        except NotApplicable as exc:
            skipped[cand.name] = str(exc)
            continue
        except Exception as exc:
            fail(cand.name, f"{cand.name} could not be prepared: {type(exc).__name__}: {exc}")
            continue
        if call is not None:
            calls[cand.name] = call
            checked[cand.name] = cand.checked

    references = [n for n in calls if family[n] == reference_family]
    if not references:
        errors.append(f"no {reference_family} candidate applies to this case")
        return record
    order = references + [n for n in calls if family[n] != reference_family and checked[n]]
    for name, message in _check(case, calls, order, inputs.data.dtype).items():
        fail(name, message)
        calls.pop(name)
    if errors:
        return record

    timings = run_interleaved(calls, rounds, min_sample_s, settle_s, lead_in_s=lead_in_s)
    record["candidates"] = {
        name: {"family": family[name], **timing.record()} for name, timing in timings.items()
    }
    summarise(record)
    return record
