"""Settings read from the environment once, at import.

``NDGATHER_NUM_THREADS`` sets the thread count, ``NDGATHER_POOL_BYTES`` the result pool's
limit, ``NDGATHER_PREFAULT`` whether gathers from file mappings read their pages first and
``NDGATHER_LINGER_US`` how long worker threads stay awake after a split call,
``NDGATHER_WAKE_US`` how long a sleeping one takes to wake (unset: measured), and
``NDGATHER_L2_BYTES`` and ``NDGATHER_LLC_BYTES`` the cache sizes the copy's thresholds are
derived from (unset: what the machine reports). No value may break ``import ndgather``: one
that cannot be used warns once, naming the variable and the value, and the default stays.
This module only reads the text; the range checks are those of ``set_num_threads``,
``set_pool_limit``, ``_set_linger_us``, ``_set_wake_us`` and ``_set_caches``.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from functools import partial

from ndgather._core import (
    _set_caches,
    _set_linger_us,
    _set_wake_us,
    set_num_threads,
    set_pool_limit,
    set_prefault,
)

# Sizes as people write them: "0", "268435456", "512MiB", "1 GiB", "800MB", "64Ki".
# Only units that mean the same everywhere, dask's `parse_bytes` included: with "i"
# ("Ki", "KiB") powers of 1024, with "B" alone ("kB", "MB") powers of 1000. A bare
# "K", "M", "G" or "T" is refused: dask reads "1G" as 10**9, many tools as 2**30.
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-z]*)", re.IGNORECASE)
_UNITS = {"": 1, "b": 1}
# What to write instead of a bare letter: (powers of 1024, powers of 1000).
_AMBIGUOUS: dict[str, tuple[str, str]] = {}
for _power, _letter in enumerate("kmgt", start=1):
    _UNITS.update(
        {
            _letter + "i": 1024**_power,
            _letter + "ib": 1024**_power,
            _letter + "b": 1000**_power,
        }
    )
    _AMBIGUOUS[_letter] = (
        f"{_letter.upper()}iB",
        f"{_letter if _power == 1 else _letter.upper()}B",
    )


def parse_bytes(text: str) -> int:
    """The number of bytes ``text`` means; ``ValueError`` if it is not a size.

    >>> parse_bytes("512MiB"), parse_bytes("1GB"), parse_bytes("4KiB"), parse_bytes("0")
    (536870912, 1000000000, 4096, 0)
    """
    match = _SIZE.fullmatch(text.strip())
    unit = match["unit"] if match else ""
    if unit.lower() in _AMBIGUOUS:
        binary, decimal = _AMBIGUOUS[unit.lower()]
        raise ValueError(f"{unit!r} alone is ambiguous: write {binary} or {decimal}")
    scale = _UNITS.get(unit.lower())
    if match is None or scale is None:
        raise ValueError("not a size such as 0, 268435456, 512MiB or 1GB")
    # Exact for integers of any length; a fraction is rounded down to a byte.
    whole, _, fraction = match["number"].partition(".")
    value = int(whole or "0") * scale
    if fraction:
        value += int(fraction) * scale // 10 ** len(fraction)
    return value


def parse_whole(text: str) -> int:
    """The whole number ``text`` holds (the setter checks its range)."""
    stripped = text.strip()
    if not stripped.isdigit():
        raise ValueError("not a whole number")
    return int(stripped)


_SWITCH = {"1": 1, "on": 1, "true": 1, "yes": 1, "0": 0, "off": 0, "false": 0, "no": 0}


def parse_switch(text: str) -> int:
    """1 for ``1``/``on``/``true``/``yes``, 0 for ``0``/``off``/``false``/``no`` (any case)."""
    value = _SWITCH.get(text.strip().lower())
    if value is None:
        raise ValueError("not one of 1, 0, on, off, true, false, yes, no")
    return value


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


def apply_environment() -> None:
    """Apply ``NDGATHER_NUM_THREADS``, ``NDGATHER_POOL_BYTES``, ``NDGATHER_PREFAULT``,
    ``NDGATHER_LINGER_US``, ``NDGATHER_WAKE_US``, ``NDGATHER_L2_BYTES`` and
    ``NDGATHER_LLC_BYTES``, warning about bad values."""
    _apply("NDGATHER_NUM_THREADS", parse_whole, set_num_threads, "every CPU")
    _apply("NDGATHER_POOL_BYTES", parse_bytes, set_pool_limit, "the default of 1 GiB")
    _apply("NDGATHER_PREFAULT", parse_switch, lambda on: set_prefault(bool(on)), "on")
    _apply("NDGATHER_LINGER_US", parse_whole, _set_linger_us, "200 us")
    _apply("NDGATHER_WAKE_US", parse_whole, _set_wake_us, "the time measured")
    # Both sizes in one call (the model is set once, at import): each one that is unset or
    # cannot be used is what the machine reports.
    caches: dict[str, int] = {}
    for variable, key in (("NDGATHER_L2_BYTES", "l2"), ("NDGATHER_LLC_BYTES", "llc")):
        _apply(variable, parse_bytes, partial(_cache_size, caches, key), "what the machine reports")
    # Called at import even with neither size: the model is then fixed for the process.
    try:
        _set_caches(caches.get("l2"), caches.get("llc"))
    except ValueError as error:
        if caches:
            named = ", ".join(
                f"NDGATHER_{key.upper()}_BYTES={os.environ.get(f'NDGATHER_{key.upper()}_BYTES')!r}"
                for key in caches
            )
            warnings.warn(
                f"ignoring {named} ({error}); the cache sizes stay as they are",
                RuntimeWarning,
                stacklevel=2,
            )


def _cache_size(caches: dict[str, int], key: str, nbytes: int) -> None:
    """Keeps one cache size for ``_set_caches``; 0 is no cache size."""
    if nbytes <= 0:
        raise ValueError("a cache size must be at least one byte")
    caches[key] = nbytes
