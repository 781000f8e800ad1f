"""Counts the Rust core's production lines, as the house issues measure them.

A line counts when it is in ``src/**/*.rs``, neither blank nor a comment, and outside test
code: ``*_tests.rs`` files, ``test_support.rs`` (compiled only under ``#[cfg(test)]``) and the
items marked ``#[cfg(test)]``. ``-v`` lists the files, largest first.

    python3 .ci/prod_lines.py [-v] [SRC_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

TEST_FILES = ("tests.rs", "test_support.rs")


def skip_item(lines: list[str], i: int) -> int:
    """The index after the item that starts at ``lines[i]`` (braces matched, or up to ``;``)."""
    depth, opened = 0, False
    while i < len(lines):
        text = lines[i]
        depth += text.count("{") - text.count("}")
        opened = opened or "{" in text
        if (opened and depth <= 0) or (not opened and text.strip().endswith(";")):
            return i + 1
        i += 1
    return i


def count(path: Path) -> int:
    lines = path.read_text().splitlines()
    n, i, in_block = 0, 0, False
    while i < len(lines):
        s = lines[i].strip()
        i += 1
        if in_block:
            in_block = "*/" not in s
        elif s.startswith("/*"):
            in_block = "*/" not in s
        elif s.startswith("#[cfg(test)]"):
            i = skip_item(lines, i)
        elif s and not s.startswith("//"):
            n += 1
    return n


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    root = Path(args[0] if args else "src")
    files = {
        p: count(p)
        for p in sorted(root.rglob("*.rs"))
        if not (p.name.endswith("_tests.rs") or p.name in TEST_FILES)
    }
    if verbose:
        for p, n in sorted(files.items(), key=lambda kv: -kv[1]):
            print(f"{n:5d} {p}")
    print(sum(files.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
