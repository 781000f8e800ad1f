"""The layering of the Rust core (docs/architecture.md's ```layers block) holds, and the check
of it (.ci/check_layering.py) fails on a new cycle or a forbidden arrow."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / ".ci" / "check_layering.py"

pytestmark = pytest.mark.skipif(
    not (CHECK.exists() and (ROOT / "src").is_dir()), reason="needs the source tree"
)


def run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / ".ci" / "check_layering.py")],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_crate_keeps_its_layers() -> None:
    got = run(ROOT)
    assert got.returncode == 0, got.stderr
    assert "no cycle" in got.stdout


def fake_crate(tmp_path: Path, files: dict[str, str], layers: str) -> Path:
    (tmp_path / ".ci").mkdir()
    shutil.copy(CHECK, tmp_path / ".ci" / "check_layering.py")
    for name, text in {"lib.rs": "mod a;\nmod b;\nmod c;\n", **files}.items():
        path = tmp_path / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(f"# x\n\n```layers\n{layers}```\n")
    return tmp_path


def test_a_layered_fake_crate_passes(tmp_path: Path) -> None:
    root = fake_crate(
        tmp_path,
        {
            "a.rs": "use crate::b::f;\n",
            "b.rs": "use crate::c::g;\npub fn f() {}\n",
            "c.rs": "pub fn g() {}\n",
        },
        "a\nb\nc\n",
    )
    assert run(root).returncode == 0


def test_an_upward_arrow_and_a_cycle_fail(tmp_path: Path) -> None:
    root = fake_crate(
        tmp_path,
        {
            "a.rs": "use crate::b::f;\npub fn h() {}\n",
            "b.rs": "pub fn f() { crate::c::g() }\n",
            # c reaches up to a: an arrow to a higher line, and with a -> b -> c a cycle.
            "c.rs": "pub fn g() { super::a::h() }\n",
        },
        "a\nb\nc\n",
    )
    got = run(root)
    assert got.returncode == 1
    assert "c uses a, which is not on a lower line" in got.stderr
    assert "cycle: a <-> b <-> c" in got.stderr


def test_a_module_outside_the_layers_fails(tmp_path: Path) -> None:
    root = fake_crate(tmp_path, {"a.rs": "", "b.rs": "", "c.rs": ""}, "a\nb\n")
    got = run(root)
    assert got.returncode == 1
    assert "'c' falls under no line" in got.stderr
