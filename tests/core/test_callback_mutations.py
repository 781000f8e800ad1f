"""Python code run in the middle of a call (a `dtype=` object's `dtype` property, an
`__array__`, an `__index__`) may change the very arrays the call reads: their shape, dtype or
number of dimensions. Every entry point reads an array's state only after the last point where
such code can run, so the result is the gather of the arrays as they are once the code has run
(or an error naming what no longer fits), never a read of freed dimensions or of bytes outside a
buffer. Each test pins one place where a read once came before a callback; `make asan` runs
them under AddressSanitizer, where a stale read is a heap-use-after-free report."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ndgather
import ndgather.onnx
import numpy as np
import pytest
from reference import assert_same


class DtypeThat:
    """A `dtype=` argument whose `dtype` attribute runs `action` first (NumPy accepts any
    object with a `dtype` attribute)."""

    def __init__(self, dtype: Any, action: Callable[[], None]) -> None:
        self._dtype = np.dtype(dtype)
        self._action = action

    @property
    def dtype(self) -> np.dtype[Any]:
        self._action()
        return self._dtype


class ArrayThat:
    """An array-like whose `__array__` runs `action` first."""

    def __init__(self, value: Any, action: Callable[[], None]) -> None:
        self._value = np.asarray(value)
        self._action = action

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        self._action()
        return self._value


def table() -> np.ndarray[Any, Any]:
    return np.arange(80, dtype=np.float32).reshape(10, 8)


def change_in_place(a: np.ndarray[Any, Any], attribute: str, value: Any) -> None:
    """Set `a.shape` or `a.dtype` in place, as code run inside a call can. NumPy 2.5 deprecates
    both setters (the suite turns warnings into errors); the change they make is still the
    hazard these tests pin, so the warning is silenced here and nowhere else."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        setattr(a, attribute, value)


def set_shape(a: np.ndarray[Any, Any], shape: tuple[int, ...]) -> Callable[[], None]:
    return lambda: change_in_place(a, "shape", shape)


def set_dtype(a: np.ndarray[Any, Any], dtype: Any) -> Callable[[], None]:
    return lambda: change_in_place(a, "dtype", np.dtype(dtype))


# Row path (a short int64 list, mode="raise") and general path (mode="clip"): the same call.
MODES = ["raise", "clip"]


@pytest.mark.parametrize("mode", MODES)
def test_dtype_object_reshapes_the_ids(mode: str) -> None:
    # The defect of issue 28: the row path kept `indices.shape` as a slice into NumPy's
    # dimensions, which the assignment below frees.
    data, ids = table(), np.array([1, 2, 3])
    got = ndgather.gather(data, ids, dtype=DtypeThat(np.float64, set_shape(ids, (3, 1))), mode=mode)
    assert ids.shape == (3, 1)
    assert_same(got, data[ids].astype(np.float64))


@pytest.mark.parametrize("mode", MODES)
def test_dtype_object_changes_the_data_rank(mode: str) -> None:
    data, ids = table(), np.array([1, 2, 3])
    got = ndgather.gather(data, ids, dtype=DtypeThat(np.float64, set_shape(data, (80,))), mode=mode)
    assert_same(got, data[ids].astype(np.float64))
    got = ndgather.gather_nd(
        table(), np.array([[1], [2]]), dtype=DtypeThat(np.float64, set_shape(data, (5, 2, 8)))
    )
    assert_same(got, table()[[1, 2]].astype(np.float64))


@pytest.mark.parametrize("mode", MODES)
def test_dtype_object_changes_the_data_dtype(mode: str) -> None:
    # float32 (10, 8) seen as uint8 is (10, 32): four times the bytes a row, had the row size
    # come from the old dtype with the new shape.
    data, ids = table(), np.array([9, 0])
    got = ndgather.gather(
        data, ids, dtype=DtypeThat(np.float64, set_dtype(data, np.uint8)), mode=mode
    )
    assert data.shape == (10, 32)
    assert_same(got, data[ids].astype(np.float64))
    # A cast the new dtype cannot take is refused as for that dtype, not made as for the old.
    data = table()
    with pytest.raises(TypeError, match="float64 as dtype float32"):
        ndgather.gather(
            data, ids, dtype=DtypeThat(np.float32, set_dtype(data, np.float64)), mode=mode
        )


def test_dtype_object_reshapes_out() -> None:
    data, ids = table(), np.array([1, 2, 3])
    out = np.zeros((3, 8), np.float64)
    with pytest.raises(ValueError, match="out has shape"):
        ndgather.gather(data, ids, out=out, dtype=DtypeThat(np.float64, set_shape(out, (24,))))
    assert not out.any()


def test_indices_array_like_changes_data() -> None:
    # The general path converts `indices` after `data` and after choosing the cast.
    data = table()
    ids = ArrayThat([4, 1], set_dtype(data, np.int16))  # (10, 16)
    assert_same(ndgather.gather(data, ids, dtype=np.float32), data[[4, 1]].astype(np.float32))
    data = table()
    ids = ArrayThat([4, 1], set_shape(data, (20, 4)))
    assert_same(ndgather.gather(data, ids), data[[4, 1]])


def test_data_array_like_reshapes_the_ids() -> None:
    ids = np.array([1, 2, 3])
    data = ArrayThat(table(), set_shape(ids, (1, 3)))
    assert_same(ndgather.gather(data, ids), table()[[[1, 2, 3]]])


def test_opset_wrapper_indices_change_data() -> None:
    data = table()
    ids = ArrayThat(np.array([[3], [7]]), set_shape(data, (20, 4)))
    assert_same(ndgather.onnx.gather_nd_13(data, ids), data[[3, 7]])


def test_prepared_call_data_array_like_reshapes_out() -> None:
    p = ndgather.prepare_gather((10, 8), [1, 2, 3])
    out = np.zeros((3, 8), np.float32)
    with pytest.raises(ValueError, match="out has shape"):
        p(ArrayThat(table(), set_shape(out, (24,))), out=out)
    assert not out.any()
    ids = np.array([1, 2, 3])
    p = ndgather.prepare_gather((10, 8), ArrayThat(ids, set_shape(ids, (3, 1))))
    assert p.shape == (3, 1, 8)
    assert_same(p(table()), table()[[[1], [2], [3]]])


def test_chunked_gather_conversions_change_earlier_chunks() -> None:
    # `_gather_chunks` (ndgather.dask's kernel) converts every chunk and the indices before it
    # reads any: a later conversion that changes an earlier chunk is seen.
    first, second = np.arange(8, dtype=np.int32).reshape(4, 2), np.arange(8, 16, dtype=np.int32)
    chunks = {(0, 0): first, (1, 0): ArrayThat(second.reshape(4, 2), set_dtype(first, np.float32))}
    with pytest.raises(TypeError, match="a chunk has dtype float32"):
        ndgather._core._gather_chunks(
            chunks, [[4, 4], [2]], np.dtype(np.int32), np.array([[1], [6]]), None, 0, "raise"
        )
    first = np.arange(8, dtype=np.int32).reshape(4, 2)
    chunks = {(0, 0): first, (1, 0): second.reshape(4, 2)}
    ids = ArrayThat(np.array([[1], [6]]), set_shape(first, (2, 4)))
    with pytest.raises(ValueError, match=r"chunk \(0, 0\) has shape \(2, 4\)"):
        ndgather._core._gather_chunks(
            chunks, [[4, 4], [2]], np.dtype(np.int32), ids, None, 0, "raise"
        )
    # And indices changed by a chunk's conversion are read as they are after it.
    ids = np.array([[1], [6]])
    chunks = {
        (0, 0): np.arange(8, dtype=np.int32).reshape(4, 2),
        (1, 0): ArrayThat(second.reshape(4, 2), set_shape(ids, (1, 2, 1))),
    }
    got = ndgather._core._gather_chunks(
        chunks, [[4, 4], [2]], np.dtype(np.int32), ids, None, 0, "raise"
    )
    assert_same(got, np.arange(16, dtype=np.int32).reshape(8, 2)[[[1, 6]]])


def test_block_quantized_attribute_reshapes_data() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    codes = np.arange(4 * 32).astype(ml_dtypes.float8_e4m3fn).reshape(4, 32)
    scales = np.ones((4, 1), np.float32)

    class Size:
        def __index__(self) -> int:
            change_in_place(codes, "shape", (8, 16))
            return 16

    got = ndgather.onnx.ms_gather_block_quantized_1(
        codes, np.array([5, 1]), np.ones((8, 1), np.float32), block_size=Size()
    )
    assert codes.shape == (8, 16)
    assert_same(got, codes[[5, 1]].astype(np.float32))
    del scales


def test_prepared_dtype_object_changes_the_data() -> None:
    # A prepared call resolves `dtype=` before it reads `data`: a change of dtype that keeps
    # the shape is gathered as the new dtype, one that changes the shape is the shape error.
    p = ndgather.prepare_gather((10, 8), [9, 0, 4])
    data = table()
    got = p(data, dtype=DtypeThat(np.float64, set_dtype(data, np.int32)))
    assert data.dtype == np.int32
    assert_same(got, data[[9, 0, 4]].astype(np.float64))
    data = table()
    with pytest.raises(ValueError, match=r"data has shape \(10, 16\)"):
        p(data, dtype=DtypeThat(np.float64, set_dtype(data, np.int16)))
    out = np.zeros((3, 8), np.float64)
    data = table()
    with pytest.raises(ValueError, match="out has shape"):
        p(data, out=out, dtype=DtypeThat(np.float64, set_shape(out, (24,))))
    assert not out.any()


def test_chunked_gather_dtype_object_changes_a_chunk() -> None:
    # `_gather_chunks` resolves `out_dtype` before it converts any chunk: a chunk changed by
    # it is read as it is after.
    second = np.arange(8, 16, dtype=np.int32).reshape(4, 2)

    def gather(first: np.ndarray[Any, Any], out_dtype: Any) -> np.ndarray[Any, Any]:
        chunks = {(0, 0): first, (1, 0): second}
        ids = np.array([[1], [6]])
        return ndgather._core._gather_chunks(
            chunks, [[4, 4], [2]], np.dtype(np.int32), ids, None, 0, "raise", out_dtype=out_dtype
        )

    first = np.arange(8, dtype=np.int32).reshape(4, 2)
    with pytest.raises(ValueError, match=r"chunk \(0, 0\) has shape \(2, 4\)"):
        gather(first, DtypeThat(np.float64, set_shape(first, (2, 4))))
    first = np.arange(8, dtype=np.int32).reshape(4, 2)
    with pytest.raises(TypeError, match="a chunk has dtype float32"):
        gather(first, DtypeThat(np.float64, set_dtype(first, np.float32)))
    got = gather(np.arange(8, dtype=np.int32).reshape(4, 2), np.float64)
    assert_same(got, np.arange(16, dtype=np.int32).reshape(8, 2)[[1, 6]].astype(np.float64))
