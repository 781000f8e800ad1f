"""The checks of `make wheel` on what it built into dist/ (run with .venv-build's python).

Fails (exit 1, every problem listed) unless dist/ holds exactly one wheel and one sdist of
Cargo.toml's version, and:

- the wheel is tagged cp310-abi3 and manylinux for glibc 2.17 (manylinux2014) or older, on
  this machine's architecture;
- `auditwheel show` agrees: the wheel needs no shared library outside the manylinux policy,
  no symbol version newer than its tag, no ISA extension auditwheel knows of;
- the extension uses no instruction beyond baseline x86-64 (no VEX/EVEX encoding, no ymm/zmm
  register, none of the SSE3+/BMI/POPCNT/LZCNT instructions below; `objdump` needed, else
  skipped with a note), outside the section `ndgather_dispatched`: the `dtype=` conversion
  loops compiled for AVX2/F16C (`src/convert.rs`), the row path's medium-row copy compiled
  for AVX (`copy_medium_rows_avx`, `src/copy.rs`), the whole-line streaming stores of
  AVX-512F (`stream_whole_lines`, `src/copy.rs`) and the index resolution of AVX-512F/DQ
  (`offsets_by_eight`, `src/offsets.rs`), which run only where the CPU is checked to have
  them; that section must hold code only from there (its instructions are counted and
  printed);
- METADATA and PKG-INFO carry the license expression and files, the supported Pythons'
  classifiers; both archives hold LICENSE-MIT and LICENSE-APACHE;
- `twine check --strict` passes (the metadata and README as PyPI would render them).
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import parse_sdist_filename, parse_wheel_filename

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: maturin's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
MAX_GLIBC = (2, 17)  # manylinux2014
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
LICENSE_FILES = ("LICENSE-MIT", "LICENSE-APACHE")
LICENSE_EXPRESSION = "MIT OR Apache-2.0"
LEGACY_ALIASES = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
# Instructions above baseline x86-64 (SSE2) a compiler may emit. `tzcnt` is not here: LLVM
# emits it where the input is known non-zero, and there it runs as `bsf` on older CPUs.
NOT_BASELINE = re.compile(
    r"^(popcnt|lzcnt|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|movbe"
    r"|crc32[bwlq]?|pshufb|palignr|pabs[bwd]|phadd\w*|phsub\w*|pmaddubsw|pmulhrsw|psign[bwd]"
    r"|lddqu|movddup|movs[hl]dup|hadd\w+|hsub\w+|addsubp[sd]"
    r"|ptest|pblend\w*|blendv?p[sd]|pmovsx\w+|pmovzx\w+|pmulld|pmuldq|pmin[su][bdw]|pmax[su][bdw]"
    r"|pextr[bdq]|pinsr[bdq]|insertps|extractps|round[sp][sd]|dpp[sd]|mpsadbw|pcmpeqq|pcmpgtq"
    r"|packusdw|movntdqa|phminposuw|pcmp[ei]str[im]|aes\w+|pclmul\w*|sha\w+|rdrand|rdseed"
    r"|v\w+|kmov\w+)$"
)

# The section of the kernels chosen at run time by CPU feature (src/convert.rs).
DISPATCHED = "ndgather_dispatched"

problems: list[str] = []


def fail(message: str) -> None:
    problems.append(message)
    print(f"FAIL: {message}")


def ok(message: str) -> None:
    print(f"ok: {message}")


def glibc_of(platform_tag: str, arch: str) -> tuple[int, int] | None:
    """(major, minor) of a manylinux tag for `arch`, None for any other tag."""
    m = re.fullmatch(rf"manylinux_(\d+)_(\d+)_{arch}", platform_tag)
    if m:
        return int(m[1]), int(m[2])
    legacy, _, rest = platform_tag.partition("_")
    if rest == arch and legacy in LEGACY_ALIASES:
        return LEGACY_ALIASES[legacy]
    return None


def check_metadata(text: str, source: str) -> None:
    before = len(problems)
    meta = HeaderParser().parsestr(text)
    if meta.get("License-Expression") != LICENSE_EXPRESSION:
        fail(f"{source}: License-Expression is {meta.get('License-Expression')!r}")
    files = sorted(meta.get_all("License-File") or [])
    if files != sorted(LICENSE_FILES):
        fail(f"{source}: License-File entries are {files}")
    classifiers = set(meta.get_all("Classifier") or [])
    for v in PYTHONS:
        if f"Programming Language :: Python :: {v}" not in classifiers:
            fail(f"{source}: no classifier for Python {v}")
    if any(c.startswith("License ::") for c in classifiers):
        fail(f"{source}: License :: classifiers beside License-Expression (PEP 639 forbids)")
    summary = meta.get("Summary") or ""
    if not summary or "\n" in summary or len(summary) >= 100:
        fail(f"{source}: Summary must be one line under 100 characters: {summary!r}")
    if meta.get("Requires-Python") != ">=3.10":
        fail(f"{source}: Requires-Python is {meta.get('Requires-Python')!r}")
    if len(problems) == before:
        ok(
            f"{source}: {meta['Name']} {meta['Version']}, {LICENSE_EXPRESSION}, "
            f"{len(classifiers)} classifiers"
        )


def check_isa(so: bytes, name: str) -> None:
    objdump = shutil.which("objdump")
    if objdump is None:
        print(f"note: no objdump on PATH, the instruction check of {name} is skipped")
        return
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(so)
        f.flush()
        listing = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", f.name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    found: dict[str, int] = {}
    dispatched = 0
    section = ""
    for line in listing.splitlines():
        if line.startswith("Disassembly of section "):
            section = line.removeprefix("Disassembly of section ").rstrip(":")
            continue
        if section == DISPATCHED:
            dispatched += line.startswith(" ")
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].rstrip().endswith(":"):
            continue
        mnemonic = parts[1].split()[0] if parts[1].split() else ""
        if mnemonic in ("rep", "repz", "repnz", "lock") and len(parts[1].split()) > 1:
            mnemonic = parts[1].split()[1]
        if NOT_BASELINE.match(mnemonic) or re.search(r"%[yz]mm", line):
            found[mnemonic] = found.get(mnemonic, 0) + 1
    if found:
        fail(f"{name} uses instructions beyond baseline x86-64: {found}")
    else:
        ok(
            f"{name}: baseline x86-64 instructions only (objdump), but for {dispatched} "
            f"lines of run-time dispatched code in {DISPATCHED}"
        )


def main() -> int:
    dist = Path(sys.argv[1] if len(sys.argv) > 1 else "dist")
    version = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        fail(f"{dist}/ must hold one wheel and one sdist: {[p.name for p in dist.iterdir()]}")
        return 1
    wheel, sdist = wheels[0], sdists[0]
    arch = platform.machine()

    # The tags the file name claims.
    name, wversion, _, tags = parse_wheel_filename(wheel.name)
    if str(wversion) != version:
        fail(f"{wheel.name}: version {wversion}, Cargo.toml says {version}")
    for tag in tags:
        if (tag.interpreter, tag.abi) != ("cp310", "abi3"):
            fail(f"{wheel.name}: tag {tag} is not cp310-abi3")
        glibc = glibc_of(tag.platform, arch)
        if glibc is None or glibc > MAX_GLIBC:
            fail(
                f"{wheel.name}: platform tag {tag.platform} is not manylinux for glibc <= "
                f"{MAX_GLIBC[0]}.{MAX_GLIBC[1]} on {arch}"
            )
    claimed = max(glibc_of(t.platform, arch) or (99, 0) for t in tags)
    ok(f"{wheel.name}: tags {sorted(str(t) for t in tags)}")

    # What the wheel really needs, by auditwheel.
    auditwheel = [sys.executable, "-m", "auditwheel", "show"]
    subprocess.run([*auditwheel, str(wheel)], check=False)
    shown = subprocess.run([*auditwheel, "--json", str(wheel)], capture_output=True, text=True)
    try:
        report = json.loads(shown.stdout)
    except json.JSONDecodeError:
        fail(f"auditwheel show --json failed (exit {shown.returncode}): {shown.stderr.strip()}")
        report = {}
    if report.get("error") or report.get("pure", True):
        fail(f"auditwheel: {report}")
    else:
        overall = glibc_of(report["overall_tag"], arch)
        if overall is None or overall > MAX_GLIBC:
            fail(f"auditwheel: the wheel is only consistent with {report['overall_tag']}")
        elif claimed > overall:
            fail(f"the wheel claims glibc {claimed}, auditwheel allows {report['overall_tag']}")
        if report["external_libs"]:
            fail(f"auditwheel: libraries outside the manylinux policy: {report['external_libs']}")
        for key in ("unsupported_isa", "pyfpe", "ucs2"):
            if report[key]:
                fail(f"auditwheel: {key} is set")
        ok(
            f"auditwheel: consistent with {report['overall_tag']}, no external libraries, "
            f"symbols from {sorted(report['versioned_symbols'])}"
        )

    # Contents: one abi3 extension, the license files, the metadata.
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
        extensions = [n for n in names if n.endswith(".so")]
        if extensions != ["ndgather/_core.abi3.so"]:
            fail(f"{wheel.name}: extension modules {extensions}, expected ndgather/_core.abi3.so")
        for lic in LICENSE_FILES:
            if f"{dist_info}/licenses/{lic}" not in names:
                fail(f"{wheel.name}: no {dist_info}/licenses/{lic}")
        check_metadata(z.read(f"{dist_info}/METADATA").decode(), f"{wheel.name} METADATA")
        for ext in extensions:
            check_isa(z.read(ext), ext)
    with tarfile.open(sdist) as t:
        top = f"ndgather-{version}"
        members = set(t.getnames())
        for needed in (*LICENSE_FILES, "Cargo.lock", "Cargo.toml", "pyproject.toml", "PKG-INFO"):
            if f"{top}/{needed}" not in members:
                fail(f"{sdist.name}: no {top}/{needed}")
        if parse_sdist_filename(sdist.name)[1].public != version:
            fail(f"{sdist.name}: not version {version}")
        pkg_info = t.extractfile(f"{top}/PKG-INFO")
        if pkg_info is not None:
            check_metadata(pkg_info.read().decode(), f"{sdist.name} PKG-INFO")

    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)]
    )
    if twine.returncode:
        fail("twine check --strict")

    if problems:
        print(f"\n{len(problems)} problem(s) in {dist}/:", *problems, sep="\n  ")
        return 1
    print(f"\n{dist}/ passes: {wheel.name}, {sdist.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
