"""``map_safetensors``: one tensor of a ``.safetensors`` file as a read-only mapped array.

Written from the format, not from the ``safetensors`` package (which ndgather does not need):
a little-endian ``u64`` header length ``N``; ``N`` bytes of UTF-8 JSON, an object from each
tensor's name to ``{"dtype": ..., "shape": [...], "data_offsets": [begin, end]}`` (offsets
counted from the first byte after the header), and an optional ``"__metadata__"`` entry;
then the data, little-endian and C-ordered. Only the header is read: the tensor's bytes are
mapped, so a table larger than memory opens at once and a gather reads only its rows.
"""

from __future__ import annotations

import importlib
import math
import os
import struct
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # numpy.typing costs `import ndgather` half a millisecond
    import numpy.typing as npt

# Every dtype of the format (safetensors' `Dtype`): its bits per element, then its NumPy
# dtype: a NumPy type string ("<" because the format is little-endian, so that a big-endian
# host gets the right values), the name of an ml_dtypes type, or None for the types packed
# below a byte, which no NumPy dtype holds.
_DTYPES: dict[str, tuple[int, str | None]] = {
    "BOOL": (8, "|b1"),
    "U8": (8, "|u1"),
    "I8": (8, "|i1"),
    "U16": (16, "<u2"),
    "I16": (16, "<i2"),
    "U32": (32, "<u4"),
    "I32": (32, "<i4"),
    "U64": (64, "<u8"),
    "I64": (64, "<i8"),
    "F16": (16, "<f2"),
    "F32": (32, "<f4"),
    "F64": (64, "<f8"),
    "C64": (64, "<c8"),
    "BF16": (16, "bfloat16"),
    "F8_E4M3": (8, "float8_e4m3fn"),
    "F8_E5M2": (8, "float8_e5m2"),
    "F8_E8M0": (8, "float8_e8m0fnu"),
    "F8_E4M3FNUZ": (8, "float8_e4m3fnuz"),
    "F8_E5M2FNUZ": (8, "float8_e5m2fnuz"),
    "F4": (4, None),
    "F6_E2M3": (6, None),
    "F6_E3M2": (6, None),
}
_METADATA = "__metadata__"
# How many of the file's tensor names an unknown name's KeyError shows.
_NAMES_SHOWN = 5


def map_safetensors(path: str | os.PathLike[str], name: str) -> npt.NDArray[Any]:
    """Maps the tensor `name` of the ``.safetensors`` file at `path`, without reading it.

    Returns a read-only ``numpy.memmap`` of the tensor's dtype and shape over its bytes in
    the file (a read-only empty array for a tensor of no elements, which has no bytes to
    map); the mapping stays open as long as the array or a view of it lives. Only the header
    is read. bfloat16 and float8 tensors need ``ml_dtypes``. Errors: ``KeyError`` (no tensor
    of that name), ``TypeError`` (a dtype NumPy cannot hold, ``ml_dtypes`` missing), and
    ``ValueError`` for a malformed file, naming the file.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    where = os.fspath(path)
    # One open file for the header and the mapping: a file replaced between the two cannot
    # give a mapping that the header's checks did not see.
    with open(where, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        data_start, header = _read_header(file, size, where)
        entry = _entry(header, name, where)
        code = entry["dtype"]
        shape = _shape(entry["shape"], name, where)
        begin, end = _offsets(entry["data_offsets"], name, where)
        bits = _DTYPES[code][0]
        count = math.prod(shape)
        if count * bits != (end - begin) * 8:
            need = f"{count * bits // 8} bytes" if count * bits % 8 == 0 else "part of a byte"
            raise ValueError(
                f"{where}: tensor {name!r}, {code} of shape {list(shape)}, takes {need}, but "
                f"its data_offsets [{begin}, {end}] span {end - begin} bytes"
            )
        if data_start + end > size:
            raise ValueError(
                f"{where}: tensor {name!r} ends at byte {data_start + end} of the file, "
                f"which has {size} bytes (truncated?)"
            )
        at = f"at byte {data_start + begin}, {end - begin} bytes"
        dtype = _numpy_dtype(code, f"{where}: tensor {name!r}", at)
        if count == 0:
            # np.memmap refuses to map no bytes (a length-0 mmap means the whole file).
            empty = np.empty(shape, dtype)
            empty.flags.writeable = False
            return empty
        # Mode "r" maps with PROT_READ: the array is read-only and writing to it raises.
        return np.memmap(file, dtype=dtype, mode="r", offset=data_start + begin, shape=shape)


def _read_header(file: IO[bytes], size: int, where: str) -> tuple[int, dict[str, Any]]:
    """The header, parsed, and the offset of the data section in the file."""
    if size < 8:
        raise ValueError(
            f"{where}: {size} bytes, too short for a safetensors file (it starts with "
            "an 8-byte header length)"
        )
    (length,) = struct.unpack("<Q", file.read(8))
    # Compared with the file's size before reading, so that a corrupt length never asks for
    # more memory than the file holds.
    if length > size - 8:
        raise ValueError(
            f"{where}: the header length says {length} bytes, but only {size - 8} follow it "
            "(not a safetensors file, or truncated)"
        )
    raw = file.read(length)
    if len(raw) != length:
        raise ValueError(f"{where}: the file ended while reading its {length}-byte header")
    # Imported here, not with ndgather: json costs `import ndgather` over a millisecond.
    import json

    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError as error:  # UnicodeDecodeError and JSONDecodeError both
        raise ValueError(f"{where}: the header is not UTF-8 JSON: {error}") from None
    if not isinstance(header, dict):
        raise ValueError(
            f"{where}: the header is JSON {type(header).__name__}, not an object of tensors"
        )
    return 8 + length, header


def _entry(header: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    """The header's entry for `name`, with its three fields, and a dtype of the format."""
    entry = header.get(name) if name != _METADATA else None
    if entry is None:
        import difflib  # only for this message, not with every `import ndgather`

        names = [n for n in header if n != _METADATA]
        # The nearest names first (a typo), else the file's first ones.
        shown = difflib.get_close_matches(name, names, n=_NAMES_SHOWN) or names[:_NAMES_SHOWN]
        listed = ", ".join(repr(n) for n in shown)
        more = f" (and {len(names) - len(shown)} more)" if len(names) > len(shown) else ""
        raise KeyError(
            f"{where} has no tensor {name!r}; it holds {len(names)}: {listed}{more}"
            if names
            else f"{where} has no tensor {name!r}; it holds none"
        )
    fields = ("dtype", "shape", "data_offsets")
    if not isinstance(entry, dict) or any(field not in entry for field in fields):
        raise ValueError(
            f"{where}: the header's entry for {name!r} is not an object with "
            f'"dtype", "shape" and "data_offsets": {entry!r}'
        )
    code = entry["dtype"]
    if not isinstance(code, str):
        raise ValueError(f"{where}: tensor {name!r} has dtype {code!r}, not a string")
    if code not in _DTYPES:
        raise TypeError(
            f"{where}: tensor {name!r} has dtype {code!r}, which is not a safetensors dtype "
            f"ndgather knows ({', '.join(_DTYPES)})"
        )
    return entry


def _is_int(value: object) -> bool:
    # JSON's true and false arrive as bool, a subclass of int.
    return isinstance(value, int) and not isinstance(value, bool)


def _shape(shape: object, name: str, where: str) -> tuple[int, ...]:
    if not isinstance(shape, list) or not all(_is_int(n) and n >= 0 for n in shape):
        raise ValueError(
            f"{where}: tensor {name!r} has shape {shape!r}, not a list of integers >= 0"
        )
    return tuple(shape)


def _offsets(offsets: object, name: str, where: str) -> tuple[int, int]:
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(n) and n >= 0 for n in offsets)
    ):
        raise ValueError(
            f"{where}: tensor {name!r} has data_offsets {offsets!r}, not two integers >= 0"
        )
    begin, end = offsets
    if end < begin:
        raise ValueError(
            f"{where}: tensor {name!r} has data_offsets [{begin}, {end}]: the end is before "
            "the beginning"
        )
    return begin, end


def _numpy_dtype(code: str, tensor: str, bytes_at: str) -> np.dtype[Any]:
    """The NumPy dtype of the format's `code`, or the TypeError saying why there is none
    (`tensor` names the file and the tensor, `bytes_at` where its bytes are)."""
    numpy_name = _DTYPES[code][1]
    if numpy_name is None:
        raise TypeError(
            f"{tensor} is {code}, {_DTYPES[code][0]} bits an element packed in bytes, "
            f"which no NumPy dtype holds; its bytes are {bytes_at} of the file (numpy.memmap "
            "them as uint8)"
        )
    if numpy_name[0] in "<|":
        return np.dtype(numpy_name)
    try:
        ml_dtypes = importlib.import_module("ml_dtypes")
    except ImportError:
        raise TypeError(
            f"{tensor} is {code} (ml_dtypes.{numpy_name}), which NumPy has no dtype "
            "for: install ml_dtypes (pip install ml_dtypes) to map it"
        ) from None
    scalar_type = getattr(ml_dtypes, numpy_name, None)
    if scalar_type is None:
        version = getattr(ml_dtypes, "__version__", "?")
        raise TypeError(
            f"{tensor} is {code}, but ml_dtypes {version} has no {numpy_name}: "
            "upgrade ml_dtypes to map it"
        )
    # The format is little-endian; on a little-endian host this is the native dtype.
    dtype: np.dtype[Any] = np.dtype(scalar_type).newbyteorder("<")
    return dtype
