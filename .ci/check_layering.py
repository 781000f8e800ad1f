"""Checks the imports of the Rust crate (src/) against the layers docs/architecture.md states.

The rule, read from the ```layers block of docs/architecture.md (top line first):
- a module may use only modules on lower lines, or modules inside its own line's entry (a
  module not listed takes the line of its nearest listed ancestor);
- a file may use its folder's `mod.rs` (the folder's own room), and a `mod.rs` that re-exports
  its files (`pub use child::...`) does not use them by that;
- no module depends on itself through others: no cycle anywhere in src/, subfolders included;
- every module of src/ falls under some line.

A module is a file of src/ (`mod.rs` is its folder, `lib.rs` the crate root); test files
(`*_tests.rs`, `test_*.rs`, inline `#[cfg(test)] mod tests`) are left out. Uses are `use`
declarations and paths in the code (`crate::a::b`, `super::c`); a name the crate root
re-exports counts as a use of the module that defines it. Exits 1 with each violation listed.

Run by `make lint`; `python .ci/check_layering.py --graph` prints the graph it checked.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"

ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?"
    r"(?:fn|struct|enum|const|static|type|trait)\s+(\w+)",
    re.M,
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return "::".join(parts)


def code_of(path: Path) -> str:
    """The file's text without comments and without an inline test module."""
    text = path.read_text()
    test = re.search(r"^#\[cfg\(test\)\]\s*\n(?:#\[[^\n]*\]\s*\n)*mod \w+\s*[{;]", text, re.M)
    if test:
        text = text[: test.start()]
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)  # strings may hold '//'
    return re.sub(r"//[^\n]*", "", text)


def expand(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"as\w+$", "", tree)] if tree else []
    head, body = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    return [head + p2 for p in parts if p for p2 in expand(p)]


class Crate:
    def __init__(self) -> None:
        self.files = {
            module_name(p): p
            for p in sorted(SRC.rglob("*.rs"))
            if not (p.stem.endswith("_tests") or p.stem.startswith("test_"))
        }
        self.mods = set(self.files)
        self.defined: dict[str, set[str]] = {
            m: set(ITEM.findall(code_of(p))) for m, p in self.files.items()
        }
        self.reexports = self._root_reexports()

    def _root_reexports(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for m in re.finditer(r"\bpub\s+use\s+([^;]+);", code_of(self.files[""])):
            for path in expand(m.group(1)):
                segs = path.split("::")
                mod = self.longest_module(segs[:-1])
                if mod is not None:
                    out[segs[-1]] = mod
        return out

    def longest_module(self, segs: list[str]) -> str | None:
        for k in range(len(segs), 0, -1):
            cand = "::".join(segs[:k])
            if cand in self.mods:
                return cand
        return None

    def resolve(self, here: str, path: str) -> str | None:
        """The module a path used in module `here` lands in (None: outside the crate)."""
        segs = [s for s in path.split("::") if s]
        base = here.split("::") if here else []
        if not segs:
            return None
        if segs[0] == "crate":
            segs = segs[1:]
            if len(segs) == 1 and segs[0] in self.reexports:
                return self.reexports[segs[0]]
            if segs and segs[0] not in self.mods and segs[0] in self.reexports:
                return self.reexports[segs[0]]
        elif segs[0] in ("super", "self"):
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
            segs = base + segs
        elif "::".join(base + segs[:1]) in self.mods:
            segs = base + segs  # a child module named without `self::`
        else:
            return None  # std, an external crate, a local name
        mod = self.longest_module(segs)
        return "" if mod is None and segs and segs[0] in self.defined[""] else mod

    def edges(self) -> dict[str, set[str]]:
        graph: dict[str, set[str]] = {}
        for here, path in self.files.items():
            if here == "":
                continue
            code = code_of(path)
            deps: set[str] = set()
            is_folder = path.name == "mod.rs"
            for m in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code):
                for used in expand(m.group(2)):
                    target = self.resolve(here, used)
                    reexport = m.group(1) is not None and is_folder
                    if target is None or (reexport and target.startswith(here + "::")):
                        continue
                    deps.add(target)
            stripped = re.sub(r"\buse\s+[^;]+;", "", code)
            # Paths in the code: from the crate or a parent, or into a child module by name.
            for m in re.finditer(r"(?<![\w:])((?:crate|super|\w+)(?:::\w+)+)", stripped):
                target = self.resolve(here, m.group(1))
                if target is not None:
                    deps.add(target)
            deps.discard(here)
            deps.discard("")  # the crate root is the facade, not a layer
            graph[here] = deps
        return graph


def layers() -> list[list[str]]:
    block = re.search(r"```layers\n(.*?)```", DOC.read_text(), re.S)
    if not block:
        sys.exit(f"{DOC.relative_to(ROOT)}: no ```layers block")
    return [line.split() for line in block.group(1).splitlines() if line.strip()]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    crate = Crate()
    graph = crate.edges()
    if "--graph" in sys.argv:
        for m in sorted(graph):
            print(f"{m}: {' '.join(sorted(graph[m]))}")
    rows = layers()
    entry_line = {e: i for i, row in enumerate(rows) for e in row}
    problems = [f"unknown module {e!r} in the layers" for e in entry_line if e not in crate.mods]

    def entry_of(m: str) -> str | None:
        segs = m.split("::")
        for k in range(len(segs), 0, -1):
            if "::".join(segs[:k]) in entry_line:
                return "::".join(segs[:k])
        return None

    for m in sorted(graph):
        if entry_of(m) is None:
            problems.append(f"src module {m!r} falls under no line of the layers")
    for m in sorted(graph):
        for d in sorted(graph[m]):
            if m.startswith(d + "::"):
                continue  # a file uses its folder's room
            em, ed = entry_of(m), entry_of(d)
            if em is None or ed is None or em == ed:
                continue
            if entry_line[ed] <= entry_line[em]:
                problems.append(f"{m} uses {d}, which is not on a lower line ({em} -> {ed})")
    for comp in cycles(graph):
        problems.append("cycle: " + " <-> ".join(comp))
    for p in problems:
        print(f"check_layering: {p}", file=sys.stderr)
    if not problems:
        print(
            f"layering: ok ({len(graph)} modules, {sum(map(len, graph.values()))} uses, no cycle)"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
