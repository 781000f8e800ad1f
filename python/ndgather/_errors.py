"""The exception of an out-of-range index, with what the message says as attributes.

Defined in Python (the extension imports it when it is itself imported) so that it is an
ordinary class: typed, documented and picklable. Its message is made by the core, never
here: callers read the attributes, not the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class GatherIndexError(IndexError):
    """An index outside its axis of ``data`` (``mode="raise"``; with ``mode="clip"``, any
    index into an empty axis).

    A subclass of :class:`IndexError` whose message is the one of docs/api.md section 4.1,
    with its parts as attributes:

    - ``value``: the bad index, as stored in ``indices``;
    - ``position``: where it is in ``indices`` as passed (``indices[position] == value``;
      for ``gather_nd`` the last coordinate is its place in the index tuple); when several
      are bad, the first in C order;
    - ``axis``: the axis of ``data`` it addresses, and ``axis_size`` that axis' size;
    - ``data_shape``: the shape of ``data``.
    """

    value: int
    position: tuple[int, ...]
    axis: int
    axis_size: int
    data_shape: tuple[int, ...]

    def __init__(
        self,
        message: str,
        *,
        value: int,
        position: Sequence[int],
        axis: int,
        axis_size: int,
        data_shape: Sequence[int],
        index_tuple: Sequence[int] | None = None,
        negatives_allowed: bool = True,
    ) -> None:
        super().__init__(message)
        self.value = int(value)
        self.position = tuple(int(p) for p in position)
        self.axis = int(axis)
        self.axis_size = int(axis_size)
        self.data_shape = tuple(int(s) for s in data_shape)
        # What else the core's message shows; not public.
        self._index_tuple = None if index_tuple is None else tuple(int(v) for v in index_tuple)
        self._negatives_allowed = bool(negatives_allowed)

    def __reduce__(self) -> tuple[Any, ...]:
        # The default (`type(self)(*self.args)`) cannot pass the keyword-only attributes.
        return (_restore, (type(self), self.args, self.__dict__.copy()))

    def _with_message(self, message: str) -> GatherIndexError:
        """The same error under another message (an operator's prefix)."""
        return _restore(type(self), (message,), self.__dict__.copy())


def _restore(
    cls: type[GatherIndexError], args: tuple[Any, ...], state: dict[str, Any]
) -> GatherIndexError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


# Shown, and pickled, under the name users import it by.
GatherIndexError.__module__ = "ndgather"
