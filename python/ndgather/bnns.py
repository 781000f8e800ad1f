"""Apple Accelerate's BNNSGatherND."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ndgather import _opset
from ndgather._opset import Array

__all__ = ["gather_nd"]


def gather_nd(data: npt.ArrayLike, indices: npt.ArrayLike) -> Array:
    """BNNSGatherND: the last axis of ``indices`` holds lookup vectors; a
    vector shorter than ``data.ndim`` gathers a slice. Any integer indices;
    BNNS defines no negative indices, so they are an ``IndexError``.

    >>> data = np.array([[[10, 11], [12, 13]], [[20, 21], [22, 23]], [[30, 31], [32, 33]]])
    >>> gather_nd(data, np.array([1]))
    array([[20, 21],
           [22, 23]])
    >>> gather_nd(data, np.array([[1, 0]]))
    array([[20, 21]])
    >>> gather_nd(data, np.array([[[1, 1, 1]]]))
    array([[23]])
    """
    op = "BNNSGatherND"
    i = _opset.check_indices(op, indices, "integer")
    return _opset.gather_nd(op, np.asarray(data), i, 0, wrap_negative=False)
