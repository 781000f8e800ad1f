#!/usr/bin/env python3
"""Fail when a doc names a file, script or make target that does not exist.

Read: README.md, docs/*.md, the Makefile, .ci/run (its comments and commands), and the
strings and comments of python/ndgather/__main__.py and benches/*.py. Recognised:

- repo paths: a word starting with one of the repository's source folders (``benches/x.py``,
  ``tests/core/``, ``src/x.rs``, ``docs/x.md``, ``.ci/x``, ``python/...``, ``fuzz/...``);
  a ``*`` in one is a glob that must match something; what git ignores is an output, not
  checked;
- markdown links to local files, relative to the page (``[api](docs/api.md)``), and their
  ``#anchor``, which must be a heading of the linked page;
- bare file names in backticks or quoted strings (``compare.py``, ``core_tests.rs``): some
  file of the tree must have that name (in benches/*.py, one in benches/);
- ``make <target>`` (in backticks, code blocks, and the commands of the Makefile and .ci/run;
  not in prose, where "make" is English): a target of the Makefile.

And one rule of the Makefile's own: every target .ci/run makes is either run by ``make check``
or named in the comment above it (so that "check" says what it leaves out of CI); and one of
docs/architecture.md's: it names every file of src/, python/, benches/ and tests/.

The script tests itself first (it must find planted broken references), then the tree; exit
status 1 on any broken reference. ``--self-test`` runs the self-test alone.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The folders a repo path starts with.
SOURCE_DIRS = ("benches", "tests", "src", "docs", ".ci", "python", "fuzz")
#: Paths made by builds and runs, never in a fresh clone.
GENERATED = ("fuzz/corpus", "fuzz/artifacts", "fuzz/target", "fuzz/coverage")
#: Bare names checked only with these endings (others, such as .json and .png, are outputs).
BARE_SUFFIXES = ("py", "rs", "md", "sh", "toml", "txt")

PATH = re.compile(
    r"(?<![\w./$@-])(?:" + "|".join(re.escape(d) for d in SOURCE_DIRS) + r")/[\w./*-]*"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE = re.compile(r"(?<![\w./-])([\w-]+\.(?:" + "|".join(BARE_SUFFIXES) + r"))(?![\w/])")
MAKE = re.compile(r"(?:\bmake|\$\(MAKE\))((?:\s+-\S+)*)\s+([a-z][\w-]*)(?![\w=-])")
TARGET = re.compile(r"^([a-zA-Z][\w-]*)\s*:(?!=)", re.MULTILINE)
QUOTED = re.compile(r"``([^`]+)``|`([^`]+)`|\"([^\"\n]+)\"|'([^'\n]+)'")


@dataclass(frozen=True)
class Broken:
    """One reference to something that does not exist."""

    where: str
    line: int
    ref: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.ref}: {self.why}"


class Tree:
    """What exists: the files of the tree, their names, the Makefile's targets."""

    def __init__(self, root: Path, files: Iterable[str] | None = None) -> None:
        self.root = root
        self.files = set(files if files is not None else _source_files(root))
        self.dirs = {str(Path(f).parent) for f in self.files} | {
            str(p) for f in self.files for p in Path(f).parents
        }
        self.names = {Path(f).name for f in self.files}
        makefile = root / "Makefile"
        text = makefile.read_text(encoding="utf-8") if makefile.exists() else ""
        self.targets = set(TARGET.findall(text))

    def has(self, path: str) -> bool:
        """Whether ``path`` (a ``*`` matches within a name) exists, or git ignores it (an
        output of a build or a run, such as the extension in python/ndgather/)."""
        path = path.rstrip("/") or "."
        if "*" in path:
            pattern = re.compile(re.escape(path).replace(r"\*", "[^/]*") + "$")
            if any(pattern.match(f) for f in self.files | self.dirs):
                return True
        elif path in self.files or path in self.dirs:
            return True
        return self.ignored(path)

    def ignored(self, path: str) -> bool:
        try:
            git = ["git", "check-ignore", "-q", "--no-index", path]
            return subprocess.run(git, cwd=self.root, capture_output=True).returncode == 0
        except OSError:
            return False


def _source_files(root: Path) -> list[str]:
    """Tracked files and untracked ones git does not ignore; without git, every file outside
    hidden and build folders."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
        return [f for f in out.split("\0") if f and (root / f).exists()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "target", "dist", "bench-results", "node_modules"}
        return [
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(root).parts)
        ]


def _anchors(text: str) -> set[str]:
    """GitHub's anchors for the headings of a markdown page."""
    out = set()
    for heading in re.findall(r"^#+\s+(.*?)\s*#*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def _strings_and_comments(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each string literal and comment of Python source."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kinds = [tokenize.STRING, tokenize.COMMENT]
        if sys.version_info >= (3, 12):
            kinds.append(tokenize.FSTRING_MIDDLE)
        if tok.type in kinds:
            for i, line in enumerate(tok.string.splitlines()):
                yield tok.start[0] + i, line


def _is_generated(path: str) -> bool:
    return any(path == g or path.startswith(g + "/") for g in GENERATED)


def check_text(
    tree: Tree,
    where: str,
    lines: Iterable[tuple[int, str]],
    *,
    markdown: bool = False,
    bare_dir: str | None = None,
    make_anywhere: bool = False,
) -> list[Broken]:
    """The broken references in ``lines`` of file ``where`` (relative to the tree's root).

    ``markdown``: also check links; ``bare_dir``: bare names are looked up in that folder
    first; ``make_anywhere``: ``make X`` counts outside code too (shell and Makefile text).
    """
    found: list[Broken] = []
    page_dir = Path(where).parent
    fence = False
    for n, line in lines:
        if markdown and line.lstrip().startswith("```"):
            fence = not fence
            continue
        text = re.sub(r"https?://\S+", "", line)
        for m in PATH.finditer(text):
            path = m.group(0).rstrip(".,;:")
            path = path.removesuffix("...").rstrip(".")
            if not _is_generated(path) and not tree.has(path):
                found.append(Broken(where, n, path, "no such file or folder"))
        if markdown:
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                file, _, anchor = target.partition("#")
                path = os.path.normpath(page_dir / file) if file else where
                if not tree.has(path):
                    found.append(Broken(where, n, target, "link to a missing file"))
                elif anchor and path.endswith(".md"):
                    page = (tree.root / path).read_text(encoding="utf-8")
                    if anchor not in _anchors(page):
                        found.append(Broken(where, n, target, f"no heading #{anchor} in {path}"))
        quoted = [next(g for g in m.groups() if g is not None) for m in QUOTED.finditer(text)]
        ticked = [
            m.group(1) or m.group(2) for m in QUOTED.finditer(text) if m.group(1, 2) != (None, None)
        ]
        comment = text.lstrip().startswith("#")
        code = [text] if fence or (make_anywhere and not comment) else []
        for snippet in quoted + code:
            for name in BARE.findall(snippet):
                in_dir = bare_dir is not None and f"{bare_dir}/{name}" in tree.files
                if not in_dir and name not in tree.names:
                    found.append(Broken(where, n, name, "no file of this name"))
        # English "make" ("make one call") is not a command: only code and backticks count.
        for snippet in ticked + code:
            for _, target in MAKE.findall(snippet):
                if target not in tree.targets:
                    found.append(Broken(where, n, f"make {target}", "no such make target"))
    # A reference inside backticks and in a code line may be reported twice.
    return sorted(set(found), key=lambda b: (b.where, b.line, b.ref))


def check_ci_is_in_check(tree: Tree) -> list[Broken]:
    """Every target .ci/run makes is a prerequisite of `check` or named in its comment."""
    makefile = (tree.root / "Makefile").read_text(encoding="utf-8")
    run = tree.root / ".ci" / "run"
    if not run.exists():
        return []
    m = re.search(r"((?:^##.*\n)*)^check:(.*)$", makefile, re.MULTILINE)
    if not m:
        return [Broken("Makefile", 1, "check", "no `check` target")]
    comment, prerequisites = m.group(1), set(m.group(2).split())
    line = makefile[: m.start(2)].count("\n") + 1
    found = []
    for n, text in enumerate(run.read_text(encoding="utf-8").splitlines(), 1):
        if text.lstrip().startswith("#"):
            continue
        for target in dict.fromkeys(t for _, t in MAKE.findall(text)):
            named = re.search(rf"`make {re.escape(target)}\b", comment)
            if target not in prerequisites and not named:
                found.append(
                    Broken(
                        "Makefile",
                        line,
                        f"make {target}",
                        f".ci/run:{n} runs it, but `check` neither runs it nor says it leaves "
                        "it out",
                    )
                )
    return found


#: The folders whose every file docs/architecture.md names.
NAMED_FOLDERS = ("src/", "python/", "benches/", "tests/")


def check_architecture_names(tree: Tree) -> list[Broken]:
    """Every file of the source folders is named (by its file name) in docs/architecture.md."""
    page = tree.root / "docs" / "architecture.md"
    if not page.exists():
        return []
    text = page.read_text(encoding="utf-8")
    return [
        Broken("docs/architecture.md", 1, f, "a file of the tree the page does not name")
        for f in sorted(tree.files)
        if f.startswith(NAMED_FOLDERS)
        and Path(f).name not in (".gitignore",)
        and not f.endswith(".so")
        and Path(f).name not in text
    ]


def check_tree(tree: Tree) -> list[Broken]:
    """Every broken reference in the docs of ``tree``."""
    root = tree.root
    found: list[Broken] = []

    def lines(path: Path) -> list[tuple[int, str]]:
        return list(enumerate(path.read_text(encoding="utf-8").splitlines(), 1))

    for md in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        if md.exists():
            found += check_text(tree, str(md.relative_to(root)), lines(md), markdown=True)
    for name in ("Makefile", ".ci/run"):
        if (root / name).exists():
            found += check_text(tree, name, lines(root / name), make_anywhere=True)
    for py in [root / "python/ndgather/__main__.py", *sorted((root / "benches").glob("*.py"))]:
        if py.exists():
            where = str(py.relative_to(root))
            parts = _strings_and_comments(py.read_text(encoding="utf-8"))
            found += check_text(tree, where, parts, bare_dir=str(py.parent.relative_to(root)))
    return found + check_ci_is_in_check(tree) + check_architecture_names(tree)


# --------------------------------------------------------------------------- self-test

_SELF_TEST_FILES = ["Makefile", ".ci/run", "README.md", "docs/a.md", "benches/x.py"]
_SELF_TEST_MAKEFILE = """\
## check: all but `make wheel`
check: lint test
lint:
\tpython3 .ci/msrv
wheel:
"""
_SELF_TEST_RUN = "make lint\nmake wheel\nmake fuzz\n"
_SELF_TEST_README = """\
# Title
See [a](docs/a.md#part-one), [gone](docs/gone.md), [bad anchor](docs/a.md#nope),
`benches/x.py`, benches/missing.py, `docs/*.md`, `docs/*.rst`, `x.py`, `compare_numpy.py`,
bench-results/out.json, https://example.com/src/nothing.rs, `make lint`, `make nothing`.
```sh
make check
make gone
python benches/x.py --json bench-results/x.json
```
"""
_SELF_TEST_EXPECTED = {
    ("Makefile", ".ci/msrv"),
    ("Makefile", "make fuzz"),
    ("README.md", "docs/gone.md"),
    ("README.md", "docs/a.md#nope"),
    ("README.md", "benches/missing.py"),
    ("README.md", "docs/*.rst"),
    ("README.md", "compare_numpy.py"),
    ("README.md", "make nothing"),
    ("README.md", "make gone"),
    (".ci/run", "make fuzz"),
    ("benches/x.py", "gone.py"),
}


def self_test(tmp: Path) -> list[str]:
    """Plant broken and sound references in a small tree; the problems with what is found."""
    (tmp / ".ci").mkdir()
    (tmp / "docs").mkdir()
    (tmp / "benches").mkdir()
    (tmp / "Makefile").write_text(_SELF_TEST_MAKEFILE)
    (tmp / ".ci/run").write_text(_SELF_TEST_RUN)
    (tmp / "README.md").write_text(_SELF_TEST_README)
    (tmp / "docs/a.md").write_text("# Part one\n[home](../README.md)\n")
    (tmp / "benches/x.py").write_text(
        '"""Run ``x.py``,\nnot ``gone.py``; make one call; args.png is code."""\nargs = {}\n'
    )
    tree = Tree(tmp, _SELF_TEST_FILES)
    broken = check_tree(tree)
    got = {(b.where, b.ref) for b in broken}
    lines = [b.line for b in broken if b.ref == "gone.py"]
    return (
        (["gone.py not reported at line 2 of its docstring"] if lines != [2] else [])
        + [f"missed: {e}" for e in sorted(_SELF_TEST_EXPECTED - got)]
        + [f"false alarm: {g}" for g in sorted(got - _SELF_TEST_EXPECTED)]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--self-test", action="store_true", help="run the self-test only")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        problems = self_test(Path(tmp))
    if problems:
        print("check_doc_refs self-test FAILED:", *problems, sep="\n  ")
        return 1
    if args.self_test:
        print("check_doc_refs self-test: ok")
        return 0
    broken = check_tree(Tree(ROOT))
    for b in broken:
        print(b)
    if broken:
        print(f"{len(broken)} broken reference(s) in the docs")
        return 1
    print("doc references: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
