"""The fixed, named benchmark cases shared by every comparison script in ``benches/``.

A case says *what* is gathered (operator, shapes, dtype, attributes); it knows nothing of who
does the gathering or how it is timed. Indices are drawn uniformly from each addressed axis
with ``np.random.default_rng(seed)`` as int64, so every run and every candidate sees the same
bytes. ``--quick`` runs use :meth:`Case.shrunk`, the same case with every dimension capped, to
check that the scripts run and that the candidates agree without spending the time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

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


CASES: tuple[Case, ...] = (
    Case(
        "ov_gnd8_xml1",
        "OpenVINO GatherND-8 XML example 1: 3-index tuples, 15-element slices",
        "gather_nd",
        (1000, 256, 10, 15),
        (25, 125, 3),
    ),
    Case(
        "ov_gnd8_xml2",
        "OpenVINO GatherND-8 XML example 2: batch_dims=2, 35-element slices",
        "gather_nd",
        (30, 2, 100, 35),
        (30, 2, 3, 1),
        batch_dims=2,
    ),
    Case(
        "ov_gnd8_xml3",
        "OpenVINO GatherND-8 XML example 3: batch_dims=3, one element per batch",
        "gather_nd",
        (1, 64, 64, 320),
        (1, 64, 64, 1, 1),
        batch_dims=3,
    ),
    Case(
        "tiny_gather_nd",
        "2x2 GatherND (ONNX example 1 shape): per-call overhead",
        "gather_nd",
        (2, 2),
        (2, 2),
    ),
    Case(
        "tiny_gather",
        "3x2 Gather on axis 0 by 2x2 indices (ONNX Gather example shape): per-call overhead",
        "gather",
        (3, 2),
        (2, 2),
    ),
    Case(
        "points_2m",
        "2M point lookups in a 4096x4096 float32 array",
        "gather_nd",
        (4096, 4096),
        (2_000_000, 2),
    ),
    Case(
        "rows_1m_256b",
        "1M lookups of 256-byte rows",
        "gather_nd",
        (1_000_000, 64),
        (1_000_000, 1),
    ),
    Case(
        "rows_1m_u8",
        "1M lookups of 64-byte uint8 rows",
        "gather_nd",
        (1_000_000, 64),
        (1_000_000, 1),
        dtype="uint8",
    ),
    Case(
        "rows_1m_f64",
        "1M lookups of 512-byte float64 rows",
        "gather_nd",
        (1_000_000, 64),
        (1_000_000, 1),
        dtype="float64",
    ),
    Case(
        "slices_128k",
        "4096 lookups of 128 KiB rows",
        "gather_nd",
        (4096, 32768),
        (4096, 1),
    ),
    Case(
        "tokens_b1",
        "token gather, batch_dims=1: 512 of 2048 rows of 1 KiB per batch",
        "gather_nd",
        (64, 2048, 256),
        (64, 512, 1),
        batch_dims=1,
    ),
    Case(
        "gather_axis0",
        "Gather axis 0: 1M of 100k rows of 512 bytes",
        "gather",
        (100_000, 128),
        (1_000_000,),
    ),
    Case(
        "gather_axis1",
        "Gather on a middle axis: 1024 of 4096 along axis 1, 256-byte inner blocks",
        "gather",
        (256, 4096, 64),
        (1024,),
        axis=1,
    ),
    Case(
        "gather_batch",
        "Gather axis 2 with batch_dims=1: 2048 of 4096 per batch, 64-byte inner blocks",
        "gather",
        (32, 8, 4096, 16),
        (32, 2048),
        axis=2,
        batch_dims=1,
    ),
)


def select(names: Iterable[str] | None, cases: Sequence[Case] = CASES) -> list[Case]:
    """The cases named (in the order given), or all of them; unknown names raise ``KeyError``."""
    if names is None:
        return list(cases)
    by_name = {c.name: c for c in cases}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise KeyError(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names]
