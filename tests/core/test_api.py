"""The public surface: names, signatures, version, docstrings."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import sys
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


def gather_nd(
    data: object,
    indices: object,
    batch_dims: object = 0,
    *,
    mode: object = "raise",
    out: object = None,
    dtype: object = None,
) -> None:
    """What CPython says to a call of a Python function of gather_nd's signature."""


def gather(
    data: object,
    indices: object,
    axis: object = 0,
    batch_dims: object = 0,
    *,
    mode: object = "raise",
    out: object = None,
    dtype: object = None,
) -> None:
    """... and of gather's."""


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("gather", (), {}),
        ("gather", (1,), {}),
        ("gather", (1, 2, 3, 4, 5), {}),
        ("gather", (1, 2), {"axes": 1}),
        ("gather", (1, 2, 3), {"axis": 1}),
        ("gather", (1,), {"data": 1}),
        ("gather", (), {"indices": 2, "mode": "raise"}),
        ("gather_nd", (), {}),
        ("gather_nd", (1, 2, 3, 4), {}),
        ("gather_nd", (1, 2), {"axis": 0}),
        ("gather_nd", (1, 2, 0), {"batch_dims": 0}),
    ],
)
def test_argument_errors_are_pythons(
    name: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    """The bindings parse their own arguments (src/python/fastcall.rs): a call that binds no
    Python function of the same signature fails with CPython's TypeError and words."""
    with pytest.raises(TypeError) as want:
        globals()[name](*args, **kwargs)
    with pytest.raises(TypeError) as got:
        getattr(ndgather, name)(*args, **kwargs)
    # Python 3.13 adds a guess at the name meant ("... 'axes'. Did you mean 'axis'?"),
    # as PyO3 does not.
    assert str(got.value) == re.sub(r"\. Did you mean '\w+'\?$", "", str(want.value))


def test_keyword_names_by_value() -> None:
    """Keyword names made at run time (not the interned strings of source code) and str
    subclasses are matched by their text."""

    class Name(str):
        pass

    data = np.arange(12).reshape(3, 4)
    made = {"".join(["mo", "de"]): "clip", Name("axis"): 1, "ba" + "tch_dims": 0}
    np.testing.assert_array_equal(ndgather.gather(data, [9], **made), data[:, [3]])
    np.testing.assert_array_equal(
        ndgather.gather_nd(data, [[9]], **{"".join(["mo", "de"]): "clip"}), data[[2]]
    )


def test_argument_type_errors_are_pyo3s() -> None:
    """An argument of the wrong type: the error and note the other bindings (PyO3's) give."""
    data = np.arange(6).reshape(2, 3)
    calls = [
        (lambda: ndgather.gather(data, [0], axis="1"), ndgather.prepare_gather, "axis"),
        (lambda: ndgather.gather_nd(data, [[0]], 1.5), ndgather.prepare_gather_nd, "batch_dims"),
        (lambda: ndgather.gather(data, [0], mode=3), ndgather.prepare_gather, "mode"),
    ]
    for call, pyo3_twin, name in calls:
        with pytest.raises(TypeError) as got:
            call()
        with pytest.raises(TypeError) as want:
            pyo3_twin((2, 3), [[0]], **{name: {"axis": "1", "batch_dims": 1.5, "mode": 3}[name]})
        assert str(got.value) == str(want.value)
        assert getattr(got.value, "__notes__", None) == getattr(want.value, "__notes__", None)
        if sys.version_info >= (3, 11):
            assert got.value.__notes__ == [f"while processing '{name}'"]
    with pytest.raises(ValueError, match="mode must be"):
        ndgather.gather(data, [0], mode="wrap")


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
        assert fn.__doc__.startswith("Gathers slices of `data`")
        assert fn.__name__ in ("gather", "gather_nd") and fn.__module__ == "ndgather._core"
