"""ONNX operators, one function per published version (domain ``ai.onnx``
unless noted), bit-identical to onnxruntime and the ``onnx`` reference
evaluator wherever they follow the specification.

``tensor(string)`` is a NumPy ``object`` array of ``str`` (fixed-width
``U``/``S`` arrays are accepted too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy.typing as npt

from ndgather import _opset
from ndgather._opset import Array

__all__ = [
    "gather_1",
    "gather_11",
    "gather_13",
    "gather_nd",
    "gather_nd_11",
    "gather_nd_12",
    "gather_nd_13",
    "ms_gather_nd_1",
    "ms_gather_block_quantized_1",
    "reference_ops",
]

if TYPE_CHECKING:
    reference_ops: list[type[Any]]


def _gather_nd(
    op: str,
    data: npt.ArrayLike,
    indices: npt.ArrayLike,
    batch_dims: int,
    *,
    bfloat16: bool,
    index_types: _opset.IndexTypes = "int64",
) -> Array:
    d = _opset.check_data(op, data, bfloat16=bfloat16)
    i = _opset.check_indices(op, indices, index_types)
    b = _opset.check_attribute(op, "batch_dims", batch_dims, 0, max(min(d.ndim, i.ndim) - 1, 0))
    return _opset.gather_nd(op, d, i, b)


def gather_nd_11(data: npt.ArrayLike, indices: npt.ArrayLike) -> Array:
    """GatherND-11: no ``batch_dims``; indices int64; no bfloat16.

    >>> gather_nd_11(np.array([[0, 1], [2, 3]]), np.array([[0, 0], [1, 1]]))
    array([0, 3])
    """
    return _gather_nd("GatherND-11", data, indices, 0, bfloat16=False)


def gather_nd_12(data: npt.ArrayLike, indices: npt.ArrayLike, batch_dims: int = 0) -> Array:
    """GatherND-12: adds ``batch_dims``; indices int64; no bfloat16.

    >>> data = np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]])
    >>> gather_nd_12(data, np.array([[1], [0]]), batch_dims=1)
    array([[2, 3],
           [4, 5]])
    """
    return _gather_nd("GatherND-12", data, indices, batch_dims, bfloat16=False)


def gather_nd_13(data: npt.ArrayLike, indices: npt.ArrayLike, batch_dims: int = 0) -> Array:
    """GatherND-13: as GatherND-12, and bfloat16 data.

    >>> data = np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]])
    >>> gather_nd_13(data, np.array([[[0, 1]], [[1, 0]]]))
    array([[[2, 3]],
    <BLANKLINE>
           [[4, 5]]])
    """
    return _gather_nd("GatherND-13", data, indices, batch_dims, bfloat16=True)


def gather_nd(
    data: npt.ArrayLike, indices: npt.ArrayLike, batch_dims: int = 0, *, opset: int = 13
) -> Array:
    """GatherND of the version an ``ai.onnx`` opset uses (11, 12 or 13)."""
    opset = _opset.check_attribute("GatherND", "opset", opset, 1, 2**31 - 1)
    batch_dims = _opset.check_attribute("GatherND", "batch_dims", batch_dims, -(2**63), 2**63)
    if opset >= 13:
        return gather_nd_13(data, indices, batch_dims)
    if opset == 12:
        return gather_nd_12(data, indices, batch_dims)
    if opset == 11:
        if batch_dims != 0:
            raise ValueError(f"GatherND-11: has no attribute batch_dims, got {batch_dims}")
        return gather_nd_11(data, indices)
    raise ValueError(f"GatherND: the operator exists from opset 11 on, got opset={opset}")


def ms_gather_nd_1(data: npt.ArrayLike, indices: npt.ArrayLike) -> Array:
    """com.microsoft GatherND-1: indices int32 or int64; no ``batch_dims``;
    the types of GatherND-12 (no bfloat16).

    >>> ms_gather_nd_1(np.array([[0, 1], [2, 3]]), np.array([[1], [0]], dtype=np.int32))
    array([[2, 3],
           [0, 1]])
    """
    return _gather_nd(
        "com.microsoft GatherND-1", data, indices, 0, bfloat16=False, index_types="int32/int64"
    )


def _gather(
    op: str, data: npt.ArrayLike, indices: npt.ArrayLike, axis: int, *, bfloat16: bool, wrap: bool
) -> Array:
    d = _opset.check_data(op, data, bfloat16=bfloat16)
    i = _opset.check_indices(op, indices, "int32/int64")
    r = d.ndim
    a = _opset.check_attribute(op, "axis", axis, -r, r - 1)
    return _opset.gather(op, d, i, a, 0, wrap_negative=wrap)


def gather_1(data: npt.ArrayLike, indices: npt.ArrayLike, axis: int = 0) -> Array:
    """Gather-1: indices int32 or int64 in ``[0, s-1]`` (a negative index is
    an ``IndexError``); no bfloat16.

    >>> gather_1(np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]]), np.array([[0, 1], [1, 2]]))
    array([[[1. , 1.2],
            [2.3, 3.4]],
    <BLANKLINE>
           [[2.3, 3.4],
            [4.5, 5.7]]])
    """
    return _gather("Gather-1", data, indices, axis, bfloat16=False, wrap=False)


def gather_11(data: npt.ArrayLike, indices: npt.ArrayLike, axis: int = 0) -> Array:
    """Gather-11: negative indices count from the end; no bfloat16.

    >>> gather_11(np.array([1, 2, 3]), np.array([-1, 0]))
    array([3, 1])
    """
    return _gather("Gather-11", data, indices, axis, bfloat16=False, wrap=True)


def gather_13(data: npt.ArrayLike, indices: npt.ArrayLike, axis: int = 0) -> Array:
    """Gather-13: as Gather-11, and bfloat16 data.

    >>> gather_13(np.array([[1, 2, 3], [4, 5, 6]]), np.array([2, 0]), axis=1)
    array([[3, 1],
           [6, 4]])
    """
    return _gather("Gather-13", data, indices, axis, bfloat16=True, wrap=True)


def ms_gather_block_quantized_1(
    data: npt.ArrayLike,
    indices: npt.ArrayLike,
    scales: npt.ArrayLike,
    zero_points: npt.ArrayLike | None = None,
    *,
    gather_axis: int = 0,
    quantize_axis: int = 1,
    block_size: int = 128,
    bits: int = 4,
    mode: Literal["zero", "raise"] = "zero",
) -> Array:
    """com.microsoft GatherBlockQuantized-1: Gather from a block-quantised
    ``data``, dequantised: ``(code - zero_point) * scale`` (integer codes) or
    ``value(code) * scale`` (float8/float4 codes), in float32 and rounded to
    the scales' dtype, which the result has. Only the selected slices are
    dequantised. ``data``: uint8 (``bits`` = 2, 4 or 8: ``8 // bits`` codes
    per byte along the last axis, low bits first; default zero point
    ``2**(bits-1)``), ml_dtypes int4/uint4 (default zero point 0) or an
    ml_dtypes float8/float4 type (no zero points; ``block_size`` 0 is one
    block per row); ``scales``: float32, float16 or bfloat16; indices int32 or
    int64, negatives count from the end. An index outside ``[-s, s)`` gives
    zeros, as the specification and onnxruntime do (``mode="zero"``); with
    ``mode="raise"`` it is an ``ndgather.GatherIndexError`` naming the first
    such index instead, nothing computed.

    >>> data = np.array([[0x98, 0xBA], [0x10, 0x32]], dtype=np.uint8)  # codes 8..11, 0..3
    >>> scales = np.array([[0.5], [2.0]], dtype=np.float32)
    >>> ms_gather_block_quantized_1(data, np.array([1, -2, 5]), scales, block_size=16)
    array([[-16. , -14. , -12. , -10. ],
           [  0. ,   0.5,   1. ,   1.5],
           [  0. ,   0. ,   0. ,   0. ]], dtype=float32)
    """
    from ndgather._block_quantized import gather_block_quantized

    return gather_block_quantized(
        data, indices, scales, zero_points, gather_axis, quantize_axis, block_size, bits, mode
    )


def __getattr__(name: str) -> Any:
    # `reference_ops` needs the `onnx` package: built on first use only. _onnx_reference
    # imports this module back; the import here is lazy, so the cycle keeps onnx optional.
    if name == "reference_ops":
        from ndgather._onnx_reference import make_reference_ops

        ops = make_reference_ops()
        globals()["reference_ops"] = ops
        return ops
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
