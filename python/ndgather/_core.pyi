from collections.abc import Mapping, Sequence
from typing import Any, Literal, SupportsIndex, final

import numpy as np
import numpy.typing as npt

__version__: str
MAX_THREADS: int
IDLE_RELEASE_SECONDS: float

_Mode = Literal["raise", "zero", "clip"]

def gather_nd(
    data: npt.ArrayLike,
    indices: npt.ArrayLike,
    batch_dims: SupportsIndex = 0,
    *,
    mode: _Mode = "raise",
    out: np.ndarray[Any, Any] | None = None,
    dtype: npt.DTypeLike | None = None,
) -> np.ndarray[Any, Any]: ...
def gather(
    data: npt.ArrayLike,
    indices: npt.ArrayLike,
    axis: SupportsIndex = 0,
    batch_dims: SupportsIndex = 0,
    *,
    mode: _Mode = "raise",
    out: np.ndarray[Any, Any] | None = None,
    dtype: npt.DTypeLike | None = None,
) -> np.ndarray[Any, Any]: ...
def gather_with_rules(
    data: npt.ArrayLike,
    indices: npt.ArrayLike,
    axis: SupportsIndex | None,
    batch_dims: SupportsIndex,
    mode: _Mode,
    wrap_negative: bool,
) -> np.ndarray[Any, Any]: ...
def set_num_threads(n: SupportsIndex) -> None: ...
def get_num_threads() -> int: ...
def set_pool_limit(nbytes: SupportsIndex) -> None: ...
def get_pool_limit() -> int: ...
def pool_bytes() -> int: ...
def release_pool() -> int: ...
def set_prefault(on: bool) -> None: ...
def get_prefault() -> bool: ...
def _set_linger_us(us: SupportsIndex) -> None: ...
def _get_linger_us() -> int: ...
def _set_wake_us(us: SupportsIndex | None) -> None: ...
def _set_caches(l2: SupportsIndex | None, llc: SupportsIndex | None) -> None: ...
def _tuning() -> dict[str, int | bool | str]: ...
def _get_wake_us() -> int: ...
def prepare_gather_nd(
    shape: Sequence[SupportsIndex],
    indices: npt.ArrayLike,
    batch_dims: SupportsIndex = 0,
    *,
    mode: _Mode = "raise",
) -> PreparedGather: ...
def prepare_gather(
    shape: Sequence[SupportsIndex],
    indices: npt.ArrayLike,
    axis: SupportsIndex = 0,
    batch_dims: SupportsIndex = 0,
    *,
    mode: _Mode = "raise",
) -> PreparedGather: ...
def _prepared_from_state(*parts: object) -> PreparedGather: ...

@final
class PreparedGather:
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def data_shape(self) -> tuple[int, ...]: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def mode(self) -> _Mode: ...
    def __call__(
        self,
        data: npt.ArrayLike,
        *,
        out: np.ndarray[Any, Any] | None = None,
        dtype: npt.DTypeLike | None = None,
    ) -> np.ndarray[Any, Any]: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

def gather_block_quantized(
    data: np.ndarray[Any, Any],
    shape: Sequence[int],
    codes: str,
    bits: int,
    values: np.ndarray[Any, Any] | None,
    indices: np.ndarray[Any, Any],
    scales: np.ndarray[Any, Any],
    zero_points: np.ndarray[Any, Any] | None,
    gather_axis: int,
    quantize_axis: int,
    block_size: int,
    mode: str,
) -> np.ndarray[Any, Any]: ...
def _gather_layout(
    data_shape: Sequence[int],
    dtype: np.dtype[Any],
    indices_shape: Sequence[int],
    indices_dtype: np.dtype[Any],
    axis: SupportsIndex | None,
    batch_dims: SupportsIndex,
    mode: _Mode,
) -> tuple[list[int], int, list[int]]: ...
def _chunks_touched(
    chunk_sizes: Sequence[Sequence[int]],
    indices: npt.ArrayLike,
    axis: SupportsIndex | None,
    batch_dims: SupportsIndex,
    mode: _Mode,
    data_shape: Sequence[int] | None = None,
    index_offset: Sequence[int] | None = None,
) -> list[list[int]]: ...
def _snapshot(a: np.ndarray[Any, Any], copy: bool) -> tuple[np.ndarray[Any, Any] | None, int]: ...
def _gather_chunks(
    chunks: Mapping[tuple[int, ...], np.ndarray[Any, Any]],
    chunk_sizes: Sequence[Sequence[int]],
    dtype: np.dtype[Any],
    indices: npt.ArrayLike,
    axis: SupportsIndex | None,
    batch_dims: SupportsIndex,
    mode: _Mode,
    data_shape: Sequence[int] | None = None,
    index_offset: Sequence[int] | None = None,
    out_dtype: npt.DTypeLike | None = None,
) -> np.ndarray[Any, Any]: ...
def _cast_dtype(dtype: np.dtype[Any], out_dtype: npt.DTypeLike) -> np.dtype[Any]: ...
