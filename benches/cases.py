"""The fixed, named benchmark cases of ``cases.txt``, shared by the suites of ``benches/``.

A case says *what* is gathered (operator, shapes, dtype, attributes); it knows nothing of who
does the gathering or how it is timed. Indices are drawn uniformly from each addressed axis
with ``np.random.default_rng(seed)`` as int64, so every run and every candidate sees the same
bytes. ``--quick`` runs use :meth:`Case.shrunk`, the same case with every dimension capped, to
check that the suites run and that the candidates agree without spending the time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

Op = Literal["gather_nd", "gather"]

SEED = 0
QUICK_DIM_CAP = 16


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    op: Op
    data_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    axis: int = 0  # gather only
    batch_dims: int = 0
    dtype: str = "float32"

    @property
    def index_bounds(self) -> tuple[int, ...]:
        """Size of the data axis that each index (or each index-tuple column) addresses."""
        b = self.batch_dims
        if self.op == "gather_nd":
            k = self.indices_shape[-1]
            return self.data_shape[b : b + k]
        return (self.data_shape[self.axis],)

    @property
    def output_shape(self) -> tuple[int, ...]:
        b = self.batch_dims
        if self.op == "gather_nd":
            k = self.indices_shape[-1]
            return self.indices_shape[:-1] + self.data_shape[b + k :]
        a = self.axis
        return self.data_shape[:a] + self.indices_shape[b:] + self.data_shape[a + 1 :]

    @property
    def output_bytes(self) -> int:
        return math.prod(self.output_shape) * np.dtype(self.dtype).itemsize

    @property
    def data_bytes(self) -> int:
        return math.prod(self.data_shape) * np.dtype(self.dtype).itemsize

    def shrunk(self, cap: int = QUICK_DIM_CAP) -> Case:
        """The same case with every dimension capped at ``cap``.

        The index-tuple length of ``gather_nd`` is kept, and data and indices are capped alike,
        so batch dimensions still agree.
        """

        def small(shape: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(min(d, cap) for d in shape)

        indices_shape = small(self.indices_shape)
        if self.op == "gather_nd":
            indices_shape = indices_shape[:-1] + self.indices_shape[-1:]
        return replace(self, data_shape=small(self.data_shape), indices_shape=indices_shape)

    def build(self, seed: int = SEED) -> Inputs:
        """Materialise the data and the indices (the only allocation a case does)."""
        rng = np.random.default_rng(seed)
        dtype = np.dtype(self.dtype)
        if dtype.kind == "f":
            data = rng.random(self.data_shape, dtype=np.float32).astype(dtype, copy=False)
        else:
            data = rng.integers(0, 128, size=self.data_shape).astype(dtype)
        bounds = np.array(self.index_bounds, dtype=np.int64)
        if self.op == "gather_nd":
            indices = rng.integers(0, bounds, size=self.indices_shape, dtype=np.int64)
        else:
            indices = rng.integers(0, bounds[0], size=self.indices_shape, dtype=np.int64)
        return Inputs(case=self, data=data, indices=indices)


@dataclass(frozen=True)
class Inputs:
    """One built case: the arrays every candidate receives."""

    case: Case
    data: np.ndarray
    indices: np.ndarray


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.split(","))


def load() -> tuple[Case, ...]:
    """The cases of ``cases.txt`` (its header says the format; ``core.rs`` reads it too)."""
    cases = []
    for line in Path(__file__).with_name("cases.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, op, data, idx, axis, b, dtype, _core, what = line.split(maxsplit=8)
            ax = 0 if axis == "-" else int(axis)
            cases.append(Case(name, what, op, _shape(data), _shape(idx), ax, int(b), dtype))
    return tuple(cases)


CASES = load()


def select(names: Iterable[str] | None, cases: Sequence[Any] = CASES) -> list[Any]:
    """The cases (anything with a ``name``) named, in the order given, or all of them;
    unknown names raise ``KeyError``."""
    if names is None:
        return list(cases)
    by_name = {c.name: c for c in cases}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise KeyError(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names]


def placed_buffer(size: int, phase: int) -> np.ndarray:
    """``size`` bytes starting ``phase`` bytes past a 64-byte line, written once (warm pages)."""
    raw = np.ones(size + 128, dtype=np.uint8)
    shift = -raw.ctypes.data % 64 + phase
    return raw[shift : shift + size]


def placed_copy(a: np.ndarray, phase: int) -> np.ndarray:
    """A C-contiguous copy of ``a`` starting ``phase`` bytes past a 64-byte line."""
    b = placed_buffer(a.nbytes, phase).view(a.dtype).reshape(a.shape)
    b[...] = a
    return b
