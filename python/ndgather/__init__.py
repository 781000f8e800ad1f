"""ndgather: GatherND and Gather for N-dimensional NumPy arrays.

Bit-exact with the ONNX and OpenVINO operators, parallel, and safe: bad input
raises a Python exception, never a crash or a read out of bounds.
"""

from __future__ import annotations

import os
import warnings

from ndgather._core import (
    __version__,
    gather,
    gather_nd,
    get_num_threads,
    set_num_threads,
)

__all__ = ["__version__", "gather", "gather_nd", "get_num_threads", "set_num_threads"]


def _threads_from_environment() -> None:
    value = os.environ.get("NDGATHER_NUM_THREADS")
    if not value:
        return
    try:
        set_num_threads(int(value))
    except ValueError:
        warnings.warn(
            f"NDGATHER_NUM_THREADS={value!r} is not an integer >= 1; using every CPU",
            RuntimeWarning,
            stacklevel=2,
        )


_threads_from_environment()
