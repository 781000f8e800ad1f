"""Settings read from the environment once, at import.

``NDGATHER_NUM_THREADS`` sets the thread count and ``NDGATHER_POOL_BYTES`` the result pool's
limit. No value may break ``import ndgather``: one that cannot be used warns once, naming the
variable and the value, and the default stays.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable

from ndgather._core import MAX_THREADS, set_num_threads, set_pool_limit

# Sizes as people write them: "0", "268435456", "512MiB", "1 GiB", "1.5G", "800MB", "64Ki".
# K, M, G, T alone or with "i"/"iB" are powers of 1024; with "B" alone, powers of 1000.
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-z]*)", re.IGNORECASE)
_UNITS = {"": 1, "b": 1}
for _power, _letter in enumerate("kmgt", start=1):
    _UNITS.update(
        {
            _letter: 1024**_power,
            _letter + "i": 1024**_power,
            _letter + "ib": 1024**_power,
            _letter + "b": 1000**_power,
        }
    )

# The pool limit is kept in a pointer-sized integer.
_MAX_POOL_BYTES = 2**63 - 1


def parse_bytes(text: str) -> int:
    """The number of bytes ``text`` means; ``ValueError`` if it is not a size.

    >>> parse_bytes("512MiB"), parse_bytes("1GB"), parse_bytes("4k"), parse_bytes("0")
    (536870912, 1000000000, 4096, 0)
    """
    match = _SIZE.fullmatch(text.strip())
    scale = _UNITS.get(match["unit"].lower()) if match else None
    if match is None or scale is None:
        raise ValueError("not a size such as 0, 268435456, 512MiB or 1GiB")
    # Exact for integers of any length; a fraction is rounded down to a byte.
    whole, _, fraction = match["number"].partition(".")
    value = int(whole or "0") * scale
    if fraction:
        value += int(fraction) * scale // 10 ** len(fraction)
    return value


def parse_threads(text: str) -> int:
    """The thread count ``text`` means: an integer from 1 to ``MAX_THREADS``."""
    stripped = text.strip()
    if not stripped.isdigit() or not 1 <= int(stripped) <= MAX_THREADS:
        raise ValueError(f"not a whole number from 1 to {MAX_THREADS}")
    return int(stripped)


def _apply(
    variable: str, parse: Callable[[str], int], apply: Callable[[int], None], default: str
) -> None:
    text = os.environ.get(variable)
    if text is None or not text.strip():
        return
    try:
        apply(parse(text))
    except (ValueError, OverflowError) as error:
        warnings.warn(
            f"ignoring {variable}={text!r} ({error}); using {default}",
            RuntimeWarning,
            stacklevel=3,
        )


def _bounded_bytes(text: str) -> int:
    value = parse_bytes(text)
    if value > _MAX_POOL_BYTES:
        raise ValueError(f"more than {_MAX_POOL_BYTES} bytes")
    return value


def apply_environment() -> None:
    """Apply ``NDGATHER_NUM_THREADS`` and ``NDGATHER_POOL_BYTES``, warning about bad values."""
    _apply("NDGATHER_NUM_THREADS", parse_threads, set_num_threads, "every CPU")
    _apply("NDGATHER_POOL_BYTES", _bounded_bytes, set_pool_limit, "the default of 1 GiB")
