"""The rules of ``com.microsoft`` GatherBlockQuantized-1 (onnxruntime's contrib
operator schema): types, attributes and shapes checked with the operator's
messages, then one call into the core, which gathers the selected slices and
dequantises only those.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ndgather import _core, _opset
from ndgather._opset import Array

OP = "com.microsoft GatherBlockQuantized-1"

#: The integer code types (``T1``): NumPy's uint8 (``bits`` codes per byte)
#: and ml_dtypes' int4 and uint4 (a code per byte).
INTEGER_CODES = ("uint8", "int4", "uint4")
#: The float code types: a code per byte, no zero points.
FLOAT_CODES = (
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float4_e2m1fn",
)
SCALE_TYPES = ("float32", "float16", "bfloat16")


def _code_type(dtype: np.dtype[Any]) -> str:
    name = dtype.name
    # ml_dtypes' types are kind "V"; NumPy's own uint8 is the only "u1".
    if (dtype.kind == "u" and dtype.itemsize == 1) or name in INTEGER_CODES[1:] + FLOAT_CODES:
        return "uint8" if dtype.kind == "u" else name
    raise TypeError(
        f"{OP}: data of dtype {dtype} is not among the operator's types "
        f"(uint8, int4, uint4, float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz, "
        f"float4e2m1)"
    )


def _native(a: Array) -> Array:
    # Not ascontiguousarray: it makes a 0-d array 1-d.
    return np.asarray(a, dtype=a.dtype.newbyteorder("="), order="C")


def gather_block_quantized(
    data: npt.ArrayLike,
    indices: npt.ArrayLike,
    scales: npt.ArrayLike,
    zero_points: npt.ArrayLike | None,
    gather_axis: int,
    quantize_axis: int,
    block_size: int,
    bits: int,
    mode: str = "zero",
) -> Array:
    if mode not in ("zero", "raise"):
        raise ValueError(f"{OP}: mode must be 'zero' or 'raise', got {mode!r}")
    d = np.asarray(data)
    s = np.asarray(scales)
    i = _opset.check_indices(OP, indices, "int32/int64")
    codes = _code_type(d.dtype)
    is_float = codes in FLOAT_CODES
    if s.dtype.name not in SCALE_TYPES:
        raise TypeError(f"{OP}: scales of dtype {s.dtype} are not float32, float16 or bfloat16")
    z = None if zero_points is None else np.asarray(zero_points)
    if z is not None and z.dtype.name != d.dtype.name:
        raise TypeError(f"{OP}: zero_points must have data's dtype {d.dtype}, got {z.dtype}")
    gather_axis = _opset.int64_attribute(OP, "gather_axis", gather_axis)
    quantize_axis = _opset.int64_attribute(OP, "quantize_axis", quantize_axis)
    block_size = _opset.int64_attribute(OP, "block_size", block_size)
    bits = _opset.int64_attribute(OP, "bits", bits)
    r = d.ndim
    if r < 2:
        # The schema's shape inference (and so every runtime) refuses rank 1, though its text
        # for `data` says "rank r >= 1" (docs/semantics.md).
        raise ValueError(f"{OP}: data must have rank >= 2, got shape {d.shape}")
    g = _opset.check_attribute(OP, "gather_axis", gather_axis, -r, r - 1) % r
    q = _opset.check_attribute(OP, "quantize_axis", quantize_axis, -r, r - 1) % r

    per_byte = 1
    if codes == "uint8":
        if bits not in (2, 4, 8):
            raise ValueError(f"{OP}: bits must be 2, 4 or 8 for uint8 data, got {bits}")
        per_byte = 8 // bits
        if g != 0:
            raise ValueError(f"{OP}: gather_axis must be 0 for uint8 data, got {gather_axis}")
        if q != r - 1:
            raise ValueError(
                f"{OP}: quantize_axis must be the last axis ({r - 1}) for uint8 data, "
                f"got {quantize_axis}"
            )
        if g == q:
            raise ValueError(
                f"{OP}: gather_axis and quantize_axis must differ for uint8 data, both are {g}"
            )
    elif not is_float and bits != 4:
        raise ValueError(f"{OP}: bits must be 4 for {codes} data, got {bits}")
    if codes != "uint8":
        bits = 0  # ignored: one code per element (float codes take any int64, as onnxruntime)
    power_of_two = block_size >= 16 and block_size & (block_size - 1) == 0
    if not (power_of_two or (is_float and block_size == 0)):
        rule = "0 or a power of 2 >= 16" if is_float else "a power of 2 >= 16"
        raise ValueError(f"{OP}: block_size must be {rule}, got {block_size}")
    if is_float and z is not None:
        raise ValueError(f"{OP}: zero_points must not be given for {codes} data")

    shape = list(d.shape)
    shape[-1] *= per_byte if codes == "uint8" else 1
    effective = block_size or max(shape[q], 1)
    blocks = -(-shape[q] // effective)
    full = tuple(blocks if a == q else n for a, n in enumerate(shape))
    if s.ndim != r:
        raise ValueError(
            f"{OP}: scales must have data's rank {r}, got shape {s.shape} for data {d.shape}"
        )
    fits = all(
        n == want or (is_float and a != q and n == 1)
        for a, (n, want) in enumerate(zip(s.shape, full, strict=True))
    )
    if not fits:
        rule = f"{full}" + (" (or 1 on axes other than quantize_axis)" if is_float else "")
        raise ValueError(
            f"{OP}: scales must have shape {rule}: data's with the quantize axis "
            f"{q} cut in blocks of {effective}; got {s.shape}"
        )
    if z is not None:
        zfull = tuple(-(-n // per_byte) if a == q else n for a, n in enumerate(full))
        if z.shape != zfull:
            packed = f", {per_byte} per byte along the quantize axis" if per_byte > 1 else ""
            raise ValueError(
                f"{OP}: zero_points must have shape {zfull} (the scales'{packed}), got {z.shape}"
            )
        z = np.asarray(z, order="C").view(np.uint8)
    if s.shape != full:
        s = np.broadcast_to(s, full)  # only float codes broadcast
    values = None
    if is_float:
        values = np.arange(256, dtype=np.uint8).view(d.dtype).astype(np.float32)
    try:
        result: Array = _core.gather_block_quantized(
            np.asarray(d, order="C").view(np.uint8),
            shape,
            "table" if is_float else ("packed" if codes == "uint8" else codes),
            bits,
            values,
            _native(i),
            _native(s),
            z,
            g,
            q,
            effective,
            mode,
        )
    except IndexError as e:  # mode="raise": the one-shot gather's error, behind OP's name
        raise _opset._renamed(OP, e) from None
    return result
