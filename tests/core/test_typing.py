"""The shipped stubs, checked from a user's side with mypy --strict."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GOOD = textwrap.dedent(
    """
    from pathlib import Path
    from typing import Any

    import numpy as np
    import numpy.typing as npt

    import ndgather

    data: npt.NDArray[np.float32] = np.zeros((2, 3), dtype=np.float32)
    idx = np.array([[0, 1]], dtype=np.int64)
    r1: np.ndarray[Any, Any] = ndgather.gather_nd(data, idx)
    r2 = ndgather.gather_nd([[1, 2], [3, 4]], [[0, 1]], 0, mode="zero")
    r3 = ndgather.gather(data, idx, axis=1, batch_dims=0, mode="clip")
    r4 = ndgather.gather(data, 1)
    out = np.empty((1, 2, 3), dtype=np.float32)
    r5 = ndgather.gather(data, idx, 0, out=out)
    shape: tuple[int, ...] = r1.shape + r2.shape + r3.shape + r4.shape + r5.shape
    n: int = ndgather.get_num_threads()
    ndgather.set_num_threads(n)
    v: str = ndgather.__version__
    p: ndgather.PreparedGather = ndgather.prepare_gather_nd(data.shape, idx, mode="zero")
    q = ndgather.prepare_gather((2, 3), [0, 1], axis=1, batch_dims=0)
    r6: np.ndarray[Any, Any] = p(data) + q(data, out=np.empty((2, 2), np.float32))
    held: int = p.nbytes + len(p.shape) + len(q.data_shape)
    m: np.ndarray[Any, Any] = ndgather.map_safetensors("model.safetensors", "embed")
    m2 = ndgather.map_safetensors(Path("model.safetensors"), name="embed")
    r7: np.ndarray[Any, Any] = ndgather.gather(m2, idx) + m
    """
)

BAD = textwrap.dedent(
    """
    import ndgather

    ndgather.set_num_threads("2")
    """
)


def _mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "snippet.py"
    f.write_text(code)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(f)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )


def test_typed_usage_passes_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    proc = _mypy(tmp_path, GOOD)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_stubs_reject_wrong_types(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    proc = _mypy(tmp_path, BAD)
    assert proc.returncode != 0, proc.stdout
    assert "set_num_threads" in proc.stdout or "arg-type" in proc.stdout, proc.stdout
