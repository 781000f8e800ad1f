"""Each error class, its message content, and the deterministic first bad index."""

from __future__ import annotations

import re
from collections.abc import Callable

import ndgather
import numpy as np
import pytest
from helpers import run_child


def assert_pieces(msg: str, *pieces: str) -> None:
    """Every piece occurs in msg (numbers not followed or preceded by more digits)."""
    for p in pieces:
        pat = re.escape(p)
        if p[:1].isdigit() or p[:1] == "-":
            pat = r"(?<![\d-])" + pat
        if p[-1:].isdigit():
            pat = pat + r"(?!\d)"
        assert re.search(pat, msg), f"{p!r} not found in message {msg!r}"


# --------------------------------------------------------------------------- IndexError


def test_gather_nd_index_error_message_contract_example() -> None:
    data = np.zeros((2, 3))
    idx = np.array([[[0, 1]], [[0, 7]]])  # shape (2, 1, 2): the tuple at position [1, 0]
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, idx)
    msg = str(ei.value)
    assert_pieces(msg, "index 7", "axis 1", "size 3", "indices[1, 0]", "[0, 7]", "(2, 3)")
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, idx.reshape(2, 2))  # 2-d indices: the position is [1]
    assert_pieces(str(ei.value), "index 7", "axis 1", "size 3", "indices[1]", "[0, 7]")
    assert re.search(r"index 7\b.*\baxis 1\b.*\bsize 3\b", msg), msg


def test_gather_nd_index_error_negative_and_batch_dims() -> None:
    data = np.zeros((2, 3, 4), dtype=np.int8)
    idx = np.zeros((2, 2, 2), dtype=np.int64)
    idx[1, 1] = [2, -5]  # -5 on axis 1 + 1 = 2 of size 4
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, idx, batch_dims=1)
    msg = str(ei.value)
    assert_pieces(msg, "index -5", "axis 2", "size 4", "indices[1, 1]", "[2, -5]", "(2, 3, 4)")
    # same with the bad value on the first component: axis b + 0 = 1, size 3
    idx[1, 1] = [3, 0]
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, idx, batch_dims=1)
    assert_pieces(str(ei.value), "index 3", "axis 1", "size 3", "indices[1, 1]", "[3, 0]")


def test_gather_nd_index_error_batch_dims_two() -> None:
    data = np.zeros((2, 3, 5, 6))
    idx = np.zeros((2, 3, 4, 1), dtype=np.int32)
    idx[1, 2, 3, 0] = 5
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, idx, batch_dims=2)
    assert_pieces(
        str(ei.value), "index 5", "axis 2", "size 5", "indices[1, 2, 3]", "[5]", "(2, 3, 5, 6)"
    )


def test_gather_nd_index_error_huge_unsigned_value() -> None:
    data = np.zeros((3, 4))
    idx = np.array([[0, 0], [2**64 - 1, 1]], dtype=np.uint64)
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, idx)
    assert_pieces(str(ei.value), "index 18446744073709551615", "axis 0", "size 3", "indices[1]")
    idx = np.array([[0, -(2**63)]], dtype=np.int64)
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, idx)
    assert_pieces(str(ei.value), "index -9223372036854775808", "axis 1", "size 4")


def test_gather_index_error_message_contract_example() -> None:
    data = np.zeros((2, 3))
    idx = np.array([[0, 2], [7, 1]])
    with pytest.raises(IndexError) as ei:
        ndgather.gather(data, idx, axis=1)
    msg = str(ei.value)
    assert_pieces(msg, "index 7", "axis 1", "size 3", "indices[1, 0]", "(2, 3)")


def test_gather_index_error_negative_axis_and_batch() -> None:
    data = np.zeros((2, 4, 6), dtype=np.uint8)
    idx = np.zeros((2, 3), dtype=np.int16)
    idx[1, 2] = -7
    with pytest.raises(IndexError) as ei:
        ndgather.gather(data, idx, axis=-1, batch_dims=1)
    # the axis named is the normalised gather axis of data
    assert_pieces(str(ei.value), "index -7", "axis 2", "size 6", "indices[1, 2]", "(2, 4, 6)")


def test_gather_index_error_zero_d_indices() -> None:
    data = np.zeros((5, 2))
    with pytest.raises(IndexError) as ei:
        ndgather.gather(data, np.array(5))
    assert_pieces(str(ei.value), "index 5", "axis 0", "size 5", "indices[()]", "(5, 2)")
    with pytest.raises(IndexError) as ei:
        ndgather.gather(data, -3, axis=1)
    assert_pieces(str(ei.value), "index -3", "axis 1", "size 2", "indices[()]")


def test_first_bad_index_within_a_tuple_and_across_tuples() -> None:
    data = np.zeros((4, 5))
    # both components bad: the first in C order is component 0
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, [[0, 0], [9, 8]])
    assert_pieces(str(ei.value), "index 9", "axis 0", "size 4", "indices[1]", "[9, 8]")
    # a bad second component at an earlier tuple beats a bad first component later
    with pytest.raises(IndexError) as ei:
        ndgather.gather_nd(data, [[0, 6], [9, 0]])
    assert_pieces(str(ei.value), "index 6", "axis 1", "size 5", "indices[0]", "[0, 6]")
    with pytest.raises(IndexError) as ei:
        ndgather.gather(data, [[0, 1], [8, 4], [7, 9]])
    assert_pieces(str(ei.value), "index 8", "indices[1, 0]")


@pytest.mark.parametrize("threads", [1, 2])
def test_first_bad_index_is_deterministic_gather(threads: int) -> None:
    ndgather.set_num_threads(threads)
    assert ndgather.get_num_threads() == threads
    rng = np.random.default_rng(0)
    n = 4_000_000
    data = np.zeros((1000, 2), dtype=np.float32)
    base = rng.integers(0, 1000, size=n)
    cases = [
        ([3_900_000, 2_500_001, 1_000_003], 1_000_003),
        ([n - 1], n - 1),
        ([0, n - 1], 0),
        (list(range(2_000_000, n, 7)), 2_000_000),  # a whole tail of bad indices
        ([1_999_999, 2_000_000, 3_999_998], 1_999_999),
    ]
    for positions, first in cases:
        idx = base.copy()
        for k, p in enumerate(positions):
            idx[p] = 1000 + k
        idx[first] = 5555
        for _ in range(3):
            with pytest.raises(IndexError) as ei:
                ndgather.gather(data, idx)
            assert_pieces(str(ei.value), "index 5555", f"indices[{first}]", "size 1000")
        # the same with a 2-d view of the same indices
        idx2 = idx.reshape(2000, 2000)
        with pytest.raises(IndexError) as ei:
            ndgather.gather(data, idx2)
        assert_pieces(str(ei.value), "index 5555", f"indices[{first // 2000}, {first % 2000}]")


@pytest.mark.parametrize("threads", [1, 2])
def test_first_bad_index_is_deterministic_gather_nd(threads: int) -> None:
    ndgather.set_num_threads(threads)
    rng = np.random.default_rng(1)
    data = np.zeros((50, 60, 3), dtype=np.int16)
    idx = np.stack(
        [rng.integers(0, 50, (2000, 1000)), rng.integers(0, 60, (2000, 1000))], -1
    ).astype(np.int64)
    idx[1500, 3, 1] = 60
    idx[700, 999, 1] = -61
    idx[700, 999, 0] = 77  # same tuple: component 0 comes first
    idx[1999, 999, 0] = 50
    idx[701:1200:3, :, 0] = 99  # many more bad ones after
    for _ in range(3):
        with pytest.raises(IndexError) as ei:
            ndgather.gather_nd(data, idx)
        assert_pieces(
            str(ei.value), "index 77", "axis 0", "size 50", "indices[700, 999]", "[77, -61]"
        )
    # and with batch_dims=1 (the first axis of indices is the batch)
    data_b = np.zeros((2000, 60, 3), dtype=np.int16)
    ib = idx[:, :, 1:].copy()
    ib[ib == -61] = 0
    ib[1500, 3, 0] = 0
    ib[3, 500, 0] = -100
    ib[3, 600, 0] = 100
    ib[1000:, 7, 0] = 60
    for _ in range(3):
        with pytest.raises(IndexError) as ei:
            ndgather.gather_nd(data_b, ib, batch_dims=1)
        assert_pieces(str(ei.value), "index -100", "axis 1", "size 60", "indices[3, 500]")


# --------------------------------------------------------------------------- ValueError


@pytest.mark.parametrize(
    "dshape,ishape,b,bad",
    [
        ((3, 4), (2, 2), -1, "-1"),  # negative batch_dims
        ((3, 4), (3, 1), 2, "2"),  # b >= min(q, r)
        ((3, 4, 5), (3, 1), 2, "2"),  # b >= q
        ((3, 4), (3, 4, 1), 2, "2"),  # b >= r
        ((3, 4), (2, 3), 0, "3"),  # k > r - b
        ((3, 4, 5), (3, 3), 1, "3"),  # k > r - b with batch
        ((3, 4), (2, 0), 0, "0"),  # k == 0
        ((3, 4, 5), (4, 2, 1), 1, "4"),  # batch dims differ
        ((3, 4, 5), (3, 2, 2, 1), 2, "2"),  # second batch dim differs
    ],
)
def test_gather_nd_value_errors(dshape, ishape, b, bad) -> None:
    data = np.zeros(dshape)
    idx = np.zeros(ishape, dtype=np.int64)
    with pytest.raises(ValueError) as ei:
        ndgather.gather_nd(data, idx, batch_dims=b)
    assert re.search(r"(?<!\d)" + re.escape(bad) + r"(?!\d)", str(ei.value)), str(ei.value)


def test_gather_nd_rank_value_errors() -> None:
    with pytest.raises(ValueError):
        ndgather.gather_nd(np.zeros((3, 4)), np.array(1))  # 0-d indices
    with pytest.raises(ValueError):
        ndgather.gather_nd(np.array(5.0), np.array([0]))  # 0-d data
    with pytest.raises(ValueError):
        ndgather.gather_nd(7, [0])


@pytest.mark.parametrize(
    "dshape,ishape,axis,b",
    [
        ((3, 4), (2,), 2, 0),  # axis >= r
        ((3, 4), (2,), -3, 0),  # axis < -r
        ((3, 4), (3, 2), 0, 1),  # batch_dims > axis
        ((3, 4, 5), (3,), 2, 2),  # batch_dims > q
        ((3, 4, 5), (3, 2), 2, -3),  # batch_dims < -q
        ((3, 4, 5), (4, 2), 1, 1),  # batch dims differ
        ((3, 4, 5), (3, 5, 2), 2, 2),  # second batch dim differs
        ((3, 4, 5), (3, 4, 2), -2, -1),  # normalised batch_dims 2 > axis 1
    ],
)
def test_gather_value_errors(dshape, ishape, axis, b) -> None:
    data = np.zeros(dshape)
    idx = np.zeros(ishape, dtype=np.int64)
    with pytest.raises(ValueError) as ei:
        ndgather.gather(data, idx, axis=axis, batch_dims=b)
    assert str(ei.value), "empty message"


def test_gather_zero_d_data_value_error() -> None:
    with pytest.raises(ValueError):
        ndgather.gather(np.array(3), 0)
    with pytest.raises(ValueError):
        ndgather.gather(3.5, [0])


@pytest.mark.parametrize("mode", ["wrap", "", "RAISE", "Zero", "clamp", "fill", "raise "])
def test_invalid_mode_value_error(mode: str) -> None:
    data = np.arange(6).reshape(2, 3)
    with pytest.raises(ValueError) as ei:
        ndgather.gather(data, [0], mode=mode)
    assert mode.strip() in str(ei.value) or mode == "" or "mode" in str(ei.value)
    with pytest.raises(ValueError):
        ndgather.gather_nd(data, [[0]], mode=mode)


@pytest.mark.parametrize("mode", [None, 1, b"raise", ["raise"]], ids=repr)
def test_invalid_mode_non_string(mode) -> None:
    data = np.arange(6).reshape(2, 3)
    with pytest.raises((ValueError, TypeError)):
        ndgather.gather(data, [0], mode=mode)
    with pytest.raises((ValueError, TypeError)):
        ndgather.gather_nd(data, [[0]], mode=mode)


def test_mode_is_checked_even_without_bad_indices_and_when_empty() -> None:
    with pytest.raises(ValueError):
        ndgather.gather(np.zeros((0, 3)), np.zeros(0, np.int64), mode="nope")
    with pytest.raises(ValueError):
        ndgather.gather_nd(np.zeros((0, 3)), np.zeros((0, 1), np.int64), mode="nope")


@pytest.mark.parametrize("n", [0, -1, -8])
def test_set_num_threads_invalid(n: int) -> None:
    before = ndgather.get_num_threads()
    with pytest.raises(ValueError):
        ndgather.set_num_threads(n)
    assert ndgather.get_num_threads() == before


BEYOND_INT64 = [2**63, -(2**63) - 1, 2**64, 2**100, -(2**100), np.uint64(2**64 - 1)]


def _core_calls(v: object) -> dict[str, tuple[str, Callable[[], object]]]:
    """Each function of the core, public or the opset wrappers' way in, given `v` for
    one integer argument: name -> (parameter, call)."""
    from ndgather import _core

    d, i, i_nd = np.zeros((2, 3)), np.array([0, 1]), np.array([[0], [1]])
    return {
        "gather axis": ("axis", lambda: ndgather.gather(d, i, axis=v)),
        "gather batch_dims": ("batch_dims", lambda: ndgather.gather(d, i, batch_dims=v)),
        "gather_nd batch_dims": ("batch_dims", lambda: ndgather.gather_nd(d, i_nd, v)),
        "gather_with_rules axis": (
            "axis",
            lambda: _core.gather_with_rules(d, i, v, 0, "raise", True),
        ),
        "gather_with_rules batch_dims": (
            "batch_dims",
            lambda: _core.gather_with_rules(d, i, 0, v, "raise", False),
        ),
        "gather_with_rules (GatherND) batch_dims": (
            "batch_dims",
            lambda: _core.gather_with_rules(d, i_nd, None, v, "zero", True),
        ),
        "set_num_threads": ("n", lambda: ndgather.set_num_threads(v)),
    }


@pytest.mark.parametrize("value", BEYOND_INT64, ids=repr)
@pytest.mark.parametrize("call", list(_core_calls(0)))
def test_integer_arguments_beyond_int64_are_value_errors(call: str, value: int) -> None:
    """Not PyO3's OverflowError: a ValueError naming the parameter and the exact value."""
    threads = ndgather.get_num_threads()
    param, fn = _core_calls(value)[call]
    with pytest.raises(ValueError) as ei:
        fn()
    assert not isinstance(ei.value, OverflowError)
    assert f"{param}={int(value)}" in str(ei.value), str(ei.value)
    assert ndgather.get_num_threads() == threads


# --------------------------------------------------------------------------- TypeError


@pytest.mark.parametrize(
    "idx",
    [
        np.array([0, 1], dtype=bool),
        np.array([0.0, 1.0], dtype=np.float16),
        np.array([0.0, 1.0], dtype=np.float32),
        np.array([0.0, 1.0], dtype=np.float64),
        np.array([0, 1], dtype=np.complex64),
        np.array([0, 1], dtype=object),
        np.array(["0", "1"]),
        np.array([0, 1], dtype="M8[s]"),
        np.array([0, 1], dtype="m8[s]"),
        [0.0, 1.0],
        [True, False],
        np.array(True),
        np.float64(1.0),
    ],
    ids=lambda a: str(np.asarray(a).dtype) + ("-0d" if np.ndim(a) == 0 else ""),
)
def test_non_integer_indices_type_error(idx) -> None:
    data = np.arange(12).reshape(3, 4)
    with pytest.raises(TypeError):
        ndgather.gather(data, idx)
    nd_idx = np.reshape(np.asarray(idx), (-1, 1)) if np.ndim(idx) else idx
    with pytest.raises((TypeError, ValueError) if np.ndim(idx) == 0 else TypeError):
        ndgather.gather_nd(data, nd_idx)


def test_bool_indices_type_error_even_for_bool_data_and_zero_size() -> None:
    with pytest.raises(TypeError):
        ndgather.gather(np.array([True, False]), np.zeros(0, dtype=bool))
    with pytest.raises(TypeError):
        ndgather.gather_nd(np.zeros((3, 4)), np.zeros((0, 2), dtype=bool))


# --------------------------------------------------------------------------- overflow / memory


def test_shape_overflow_is_value_error() -> None:
    out = run_child(
        """
        i8 = np.zeros((), np.int8)
        f8 = np.zeros((), np.float64)
        z = np.zeros((), np.int64)
        res = []
        # gather: element count 2**64
        d = np.broadcast_to(i8, (2**31, 1, 2**31))
        res.append(kind(lambda: ndgather.gather(d, np.zeros(4, np.int64), axis=1)))
        # gather: element count 2**61 fits, byte count 2**64 does not
        d = np.broadcast_to(f8, (2**30, 1, 2**29))
        res.append(kind(lambda: ndgather.gather(d, np.zeros(4, np.int64), axis=1)))
        # gather_nd: element count 2**64
        d = np.broadcast_to(i8, (2, 2**61))
        res.append(kind(lambda: ndgather.gather_nd(d, np.zeros((8, 1), np.int64))))
        # gather_nd: byte count 2**64
        d = np.broadcast_to(f8, (2, 2**58))
        res.append(kind(lambda: ndgather.gather_nd(d, np.zeros((8, 1), np.int64))))
        # gather_nd, element count far past 2**64 via many zero-stride tuples
        d = np.broadcast_to(i8, (2**31, 2**31))
        i = np.broadcast_to(z, (2**34, 1))
        res.append(kind(lambda: ndgather.gather_nd(d, i)))
        print(" ".join(res))
        """
    )
    assert out.split() == ["ValueError"] * 5, out


def test_outputs_too_large_to_allocate_are_memory_errors() -> None:
    out = run_child(
        """
        i8 = np.zeros((), np.int8)
        d = np.broadcast_to(i8, (2, 2**50))  # output 2**51 bytes: cannot be allocated
        a = kind(lambda: ndgather.gather(d, np.zeros(2, np.int64), axis=0))
        b = kind(lambda: ndgather.gather_nd(d, np.zeros((2, 1), np.int64)))
        d = np.broadcast_to(i8, (2, 2**61))  # output 2**63 bytes: past isize
        c = kind(lambda: ndgather.gather(d, np.zeros(2, np.int64), axis=0))
        print(a, b, c)
        """
    )
    a, b, c = out.split()
    assert a == "MemoryError", out
    assert b == "MemoryError", out
    # 2**63 bytes fit in a 64-bit size, so they are an allocation NumPy refuses, like the others.
    assert c == "MemoryError", out


def test_errors_never_crash_on_object_data() -> None:
    data = np.array(["a", "b", "c"], dtype=object)
    with pytest.raises(IndexError):
        ndgather.gather(data, [3])
    with pytest.raises(ValueError):
        ndgather.gather(data, [0], axis=1)
    with pytest.raises(TypeError):
        ndgather.gather(data, [0.5])
