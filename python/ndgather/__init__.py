"""ndgather: GatherND and Gather for N-dimensional NumPy arrays.

Bit-exact with the ONNX and OpenVINO operators, parallel, and safe: bad input
raises a Python exception, never a crash or a read out of bounds.
"""

from __future__ import annotations

from ndgather._core import (
    MAX_THREADS,
    PreparedGather,
    __version__,
    gather,
    gather_nd,
    get_num_threads,
    get_pool_limit,
    get_prefault,
    pool_bytes,
    prepare_gather,
    prepare_gather_nd,
    release_pool,
    set_num_threads,
    set_pool_limit,
    set_prefault,
)
from ndgather._environment import apply_environment
from ndgather._errors import GatherIndexError
from ndgather._safetensors import map_safetensors

__all__ = [
    "MAX_THREADS",
    "GatherIndexError",
    "PreparedGather",
    "__version__",
    "gather",
    "gather_nd",
    "get_num_threads",
    "get_pool_limit",
    "get_prefault",
    "map_safetensors",
    "pool_bytes",
    "prepare_gather",
    "prepare_gather_nd",
    "release_pool",
    "set_num_threads",
    "set_pool_limit",
    "set_prefault",
]

apply_environment()
