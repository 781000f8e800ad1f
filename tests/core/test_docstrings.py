"""The examples in the docstrings of the public modules run and print what they say."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

MODULES = ["ndgather._core", "ndgather.onnx", "ndgather.openvino", "ndgather.bnns"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    own = [obj for obj in vars(module).values() if getattr(obj, "__module__", None) == name]
    tests = [t for obj in own if callable(obj) for t in finder.find(obj, module=module)]
    assert tests, f"{name} has no docstring examples"
    for test in tests:
        test.globs.update(np=np)
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} docstring examples failed in {name}"
