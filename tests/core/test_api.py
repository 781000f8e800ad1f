"""The public surface: names, signatures, version, docstrings."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from pathlib import Path

import ndgather
import numpy as np
import pytest

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def documented_top_level_names() -> set[str]:
    """The names of the table "What is public" at the top of docs/api.md: the first column's
    code spans, each up to its "(", leaving out the submodules (`ndgather.x`)."""
    table = API_MD.read_text(encoding="utf-8").split("\n## ", 1)[0]
    names = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            for span in re.findall(r"`([^`]+)`", first_cell):
                if not span.startswith("ndgather."):
                    names.add(span.split("(")[0])
    return names


def test_all_is_exactly_what_docs_api_md_documents() -> None:
    assert set(ndgather.__all__) == documented_top_level_names()
    for name in ndgather.__all__:
        assert hasattr(ndgather, name), name
    assert callable(ndgather.gather_nd) and callable(ndgather.gather)


def test_version() -> None:
    v = ndgather.__version__
    assert isinstance(v, str) and re.match(r"^\d+\.\d+", v), v
    assert v == importlib.metadata.version("ndgather")


def test_keyword_names() -> None:
    data = np.arange(24).reshape(2, 3, 4)
    idx = np.array([[2], [0]])
    r = ndgather.gather_nd(data=data, indices=idx, batch_dims=1, mode="raise", out=None)
    np.testing.assert_array_equal(r, data[[0, 1], [2, 0]])
    r = ndgather.gather(data=data, indices=idx, axis=2, batch_dims=1, mode="clip", out=None)
    np.testing.assert_array_equal(r, np.take_along_axis(data, idx[:, None, :], axis=2))


def test_keyword_only_mode_and_out() -> None:
    data = np.arange(6).reshape(2, 3)
    with pytest.raises(TypeError):
        ndgather.gather_nd(data, [[0]], 0, "raise")
    with pytest.raises(TypeError):
        ndgather.gather(data, [0], 0, 0, "raise")
    with pytest.raises(TypeError):
        ndgather.gather(data, [0], 0, 0, "raise", None)


def test_signatures_if_introspectable() -> None:
    for fn, params in (
        (ndgather.gather_nd, ["data", "indices", "batch_dims", "mode", "out", "dtype"]),
        (ndgather.gather, ["data", "indices", "axis", "batch_dims", "mode", "out", "dtype"]),
    ):
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            pytest.skip("signature not introspectable")
        assert list(sig.parameters) == params
        assert sig.parameters["mode"].kind is inspect.Parameter.KEYWORD_ONLY
        assert sig.parameters["out"].kind is inspect.Parameter.KEYWORD_ONLY
        assert sig.parameters["mode"].default == "raise"
        assert sig.parameters["out"].default is None
        assert sig.parameters["dtype"].kind is inspect.Parameter.KEYWORD_ONLY
        assert sig.parameters["dtype"].default is None
        assert sig.parameters["batch_dims"].default == 0


def test_docstrings() -> None:
    for fn in (ndgather.gather_nd, ndgather.gather):
        assert fn.__doc__ and "batch_dims" in fn.__doc__
