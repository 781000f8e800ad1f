"""``ndgather.prepare_gather_nd`` / ``prepare_gather``: a prepared gather equals the one-shot
function and the independent NumPy references on random shapes, dtypes, layouts, batch_dims,
axes and modes; it raises exactly the one-shot errors at prepare time; a call on data of
another shape is a ValueError; it owns its indices, runs from many threads at once, pickles
(also through dask.distributed), and fills ``out=`` by the one-shot rules."""

from __future__ import annotations

import math
import pickle
import sys
import threading
from typing import Any

import ndgather
import numpy as np
import pytest
from helpers import random_values as values
from hypothesis import given, settings
from reference import assert_same, gather_nd_fancy, gather_take
from test_properties import g_cases, nd_cases

Array = np.ndarray[Any, Any]


def outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", result) or ("error", (class, message, attributes))."""
    try:
        return "ok", fn(*args, **kwargs)
    except (IndexError, ValueError, TypeError) as e:
        attrs = {
            k: getattr(e, k, None)
            for k in ("value", "position", "axis", "axis_size", "data_shape", "index_tuple")
        }
        return "error", (type(e), str(e), attrs)


def relayouts(data: Array) -> list[Array]:
    """``data`` itself, and the same values C-contiguous, Fortran-ordered and reversed."""
    out = [data, np.ascontiguousarray(data), np.asfortranarray(data)]
    if data.ndim:
        store = np.ascontiguousarray(data[(slice(None, None, -1),) * data.ndim])
        out.append(store[(slice(None, None, -1),) * data.ndim])
    return out


def check_same_as_one_shot(one_shot: Any, prepare: Any, data: Array, reference: Any) -> None:
    """``prepare(shape)`` raises what ``one_shot(data)`` raises, or its calls on ``data`` in
    every layout equal the one-shot result (and the reference's, when it has one)."""
    kind, want = outcome(one_shot, data)
    got_kind, prepared = outcome(prepare, data.shape)
    if kind == "error":
        assert got_kind == "error" and prepared == want
        return
    assert got_kind == "ok", prepared
    assert prepared.shape == want.shape and prepared.data_shape == data.shape
    if reference is not None:
        assert_same(want, reference)
    for d in relayouts(data):
        assert_same(prepared(d), want)


@settings(max_examples=400, deadline=None)
@given(nd_cases())
def test_prepare_gather_nd_is_the_one_shot_gather_nd(case: Any) -> None:
    data, indices, b, mode = case
    try:
        ref = gather_nd_fancy(data, indices, b, mode)
    except (IndexError, ValueError):
        ref = None
    check_same_as_one_shot(
        lambda d: ndgather.gather_nd(d, indices, b, mode=mode),
        lambda s: ndgather.prepare_gather_nd(s, indices, b, mode=mode),
        data,
        ref,
    )


@settings(max_examples=400, deadline=None)
@given(g_cases())
def test_prepare_gather_is_the_one_shot_gather(case: Any) -> None:
    data, indices, axis, b, mode = case
    try:
        ref = gather_take(data, indices, axis, b, mode)
    except (IndexError, ValueError):
        ref = None
    check_same_as_one_shot(
        lambda d: ndgather.gather(d, indices, axis, b, mode=mode),
        lambda s: ndgather.prepare_gather(s, indices, axis, b, mode=mode),
        data,
        ref,
    )


# Past the thread split, and shaped for the address-order path (at least 2**15 rows of at most
# 8 elements) though smaller than it needs: the address order itself is taken only from arrays
# beyond the last-level cache, and src/prepared/prepared_tests.rs forces it on a small one.
LARGE = [
    ("gather_nd", (1024, 1024), 1, 40_000),  # points
    ("gather_nd", (256, 512, 8), 0, 50_000),  # 8-element slices, k = 2
    ("gather", (1 << 20,), 0, 70_000),  # elements of a vector
    ("gather_nd", (3000, 64), 0, 40_000),  # rows of 64: positions in row order
]


@pytest.mark.parametrize("mode", ["raise", "zero", "clip"])
@pytest.mark.parametrize("case", LARGE, ids=lambda c: f"{c[0]}{c[1]}")
@pytest.mark.parametrize("threads", [1, 2])
def test_large_gathers_equal_numpy_in_any_layout(case: Any, mode: str, threads: int) -> None:
    op, shape, b_or_axis, n = case
    ndgather.set_num_threads(threads)
    rng = np.random.default_rng(7)
    data = rng.integers(0, 1 << 30, size=shape, dtype=np.int32)
    spread = 1 if mode == "raise" else 2  # out of range too, unless raising
    if op == "gather_nd":
        k = 2 if len(shape) == 3 or shape == (1024, 1024) else 1
        sizes = np.array(shape[:k])
        idx = rng.integers(-sizes * spread, sizes * spread, size=(n, k))
        p = ndgather.prepare_gather_nd(shape, idx, mode=mode)
        want = gather_nd_fancy(data, idx, 0, mode)
    else:
        idx = rng.integers(-shape[0] * spread, shape[0] * spread, size=n)
        p = ndgather.prepare_gather(shape, idx, b_or_axis, mode=mode)
        want = gather_take(data, idx, b_or_axis, 0, mode)
    for d in relayouts(data):
        assert_same(p(d), want)
    # Another dtype of the same shape: wider elements, same positions.
    wide = data.astype(np.complex128)
    assert_same(p(wide), want.astype(np.complex128))
    back = pickle.loads(pickle.dumps(p))
    assert back.nbytes == p.nbytes and back.shape == p.shape
    assert_same(back(data), want)


ERROR_CASES: list[tuple[str, tuple[int, ...], Any, dict[str, Any]]] = [
    ("gather_nd", (2, 3), [[0, 3]], {}),  # index out of range
    ("gather_nd", (2, 3), [[0, -3], [1, -7]], {}),
    ("gather_nd", (2, 3), [[0, 1, 1]], {}),  # k too large
    ("gather_nd", (2, 3), [[0]], {"batch_dims": 2}),
    ("gather_nd", (2, 3), [[0]], {"batch_dims": 2**70}),
    ("gather_nd", (2, 3), [[0.5]], {}),  # float indices
    ("gather_nd", (2, 3), [[0]], {"mode": "wrap"}),
    ("gather_nd", (2, 0), [[0, 0]], {"mode": "clip"}),  # clip into an empty axis
    ("gather_nd", (3, 2), np.zeros((2, 1), np.int64), {"batch_dims": 1}),  # batch mismatch
    ("gather", (2, 3), [0, 5], {"axis": 1}),
    ("gather", (2, 3), [0], {"axis": 2}),
    ("gather", (2, 3), [[0]], {"axis": 0, "batch_dims": 1}),
    ("gather", (2, 3), [[0]], {"axis": -(2**70)}),
    ("gather", (2, 3), ["a"], {}),
    ("gather", (0, 3), [5], {"axis": 1}),  # no row reads it, yet it is checked
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[str(i) for i in range(len(ERROR_CASES))])
def test_prepare_raises_the_one_shot_error(case: Any) -> None:
    op, shape, indices, kwargs = case
    data = np.zeros(shape, dtype=np.float32)
    if op == "gather_nd":
        want = outcome(ndgather.gather_nd, data, indices, **kwargs)
        got = outcome(ndgather.prepare_gather_nd, shape, indices, **kwargs)
    else:
        want = outcome(ndgather.gather, data, indices, **kwargs)
        got = outcome(ndgather.prepare_gather, shape, indices, **kwargs)
    assert want[0] == "error"
    assert got == want


def test_index_error_attributes_name_the_prepared_shape() -> None:
    with pytest.raises(ndgather.GatherIndexError) as info:
        ndgather.prepare_gather_nd((4, 5, 6), [[0, 1], [3, 9]])
    e = info.value
    assert (e.value, e.position, e.axis, e.axis_size, e.data_shape) == (9, (1, 1), 1, 5, (4, 5, 6))


@pytest.mark.parametrize("shape", [(-1, 3), (2**70,)])
def test_bad_shapes_are_value_errors(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="shape"):
        ndgather.prepare_gather(shape, [0])


def test_a_call_on_another_shape_is_a_value_error_naming_both() -> None:
    p = ndgather.prepare_gather((4, 3), [0, 1], axis=1)
    for data in [np.zeros((3, 4)), np.zeros((4, 3, 1)), np.zeros(12)]:
        with pytest.raises(ValueError) as info:
            p(data)
        assert str(info.value) == (
            f"data has shape {data.shape} but the gather was prepared for data of shape (4, 3)"
        )


def test_attributes_and_repr() -> None:
    idx = np.array([[0, 1], [2, 0], [1, 1]])
    p = ndgather.prepare_gather_nd((3, 2, 5), idx, mode="clip")
    assert p.shape == (3, 5) and p.data_shape == (3, 2, 5) and p.mode == "clip"
    # One 32-bit position per output row, and its shapes.
    assert 3 * 4 <= p.nbytes < 1024
    assert repr(p).startswith('PreparedGather(data_shape=(3, 2, 5), shape=(3, 5), mode="clip"')
    assert isinstance(p, ndgather.PreparedGather)
    g = ndgather.prepare_gather((2, 3, 4), np.zeros((2, 5), np.int8), axis=2, batch_dims=1)
    assert g.shape == (2, 3, 5)
    # The indices are not kept: 64k int64 indices, 4 bytes a row held.
    big = ndgather.prepare_gather((10,), np.zeros(1 << 16, np.int64))
    assert (1 << 16) * 4 <= big.nbytes < (1 << 16) * 4 + 1024


def test_later_writes_to_the_indices_change_nothing() -> None:
    data = np.arange(20.0).reshape(5, 4)
    idx = np.array([[4], [0], [2]])
    p = ndgather.prepare_gather_nd(data.shape, idx)
    want = ndgather.gather_nd(data, idx)
    idx[:] = 99  # now out of range: a one-shot call would raise
    assert_same(p(data), want)
    with pytest.raises(IndexError):
        ndgather.gather_nd(data, idx)


def test_concurrent_calls_from_many_threads() -> None:
    rng = np.random.default_rng(3)
    shape = (2048, 64)
    idx = rng.integers(-2048, 2048, size=(100_000, 1))
    p = ndgather.prepare_gather_nd(shape, idx, mode="zero")
    arrays = [rng.random(shape, dtype=np.float32) for _ in range(4)]
    wants = [ndgather.gather_nd(a, idx, mode="zero") for a in arrays]
    failures: list[str] = []

    def work(t: int) -> None:
        for i in range(12):
            j = (t + i) % len(arrays)
            if not np.array_equal(p(arrays[j]), wants[j]):
                failures.append(f"thread {t} call {i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_pickle_round_trip_of_every_kind() -> None:
    rng = np.random.default_rng(5)
    data = rng.random((3, 40, 7))
    for p in [
        ndgather.prepare_gather_nd(data.shape, rng.integers(-3, 3, (9, 1))),
        ndgather.prepare_gather_nd(data.shape, [[[1, 2]], [[0, 9]], [[39, -1]]], 1, mode="zero"),
        ndgather.prepare_gather(data.shape, rng.integers(-90, 90, (4, 2)), 1, mode="zero"),
        ndgather.prepare_gather(data.shape, np.array([5], np.uint8), -1, mode="clip"),
        ndgather.prepare_gather((0, 40), [1, 2], axis=1),
    ]:
        back = pickle.loads(pickle.dumps(p))
        assert (back.shape, back.data_shape, back.mode, back.nbytes, repr(back)) == (
            p.shape,
            p.data_shape,
            p.mode,
            p.nbytes,
            repr(p),
        )
        d = data if p.data_shape == data.shape else np.zeros(p.data_shape)
        assert_same(back(d), p(d))


def test_a_forged_pickle_is_refused() -> None:
    p = ndgather.prepare_gather((5, 3), [4, 0])
    restore, state = p.__reduce__()
    assert restore is ndgather._core._prepared_from_state
    positions = state[8]
    assert restore(*state)(np.ones((5, 3))).shape == (2, 3)
    bad_position = (4).to_bytes(4, "little") * 1 + (5).to_bytes(4, "little")
    for forged in [
        state[:8] + (bad_position, None),  # a position past the shape's rows
        state[:8] + (positions[:-1], None),  # a partial position
        state[:8] + (positions[:4], None),  # a row missing
        state[:7] + (3,) + state[8:],  # an unknown width
        ("scatter",) + state[1:],
    ]:
        with pytest.raises(ValueError, match="state"):
            restore(*forged)
    # Malformed parts of every kind are the same ValueError, naming the part: once an
    # OverflowError (a width of -4 or 2**64, an index-type size of -8), a TypeError (a part of
    # the wrong type, a wrong number of parts) or a UnicodeEncodeError (a lone surrogate).
    for forged, part in [
        (state[:7] + (-4,) + state[8:], "width"),
        (state[:7] + (2**64,) + state[8:], "width"),
        (state[:7] + ("4",) + state[8:], "width"),
        (state[:3] + (("i", -8),) + state[4:], "index_type"),
        (state[:3] + (("i", 2**64),) + state[4:], "index_type"),
        (state[:3] + (("i",),) + state[4:], "index_type"),
        (state[:3] + ("i8",) + state[4:], "index_type"),
        (state[:3] + (("ii", 8),) + state[4:], "index_type"),
        (state[:6] + ("ra\udcffise",) + state[7:], "mode"),
        (state[:6] + (b"raise",) + state[7:], "mode"),
        (("gather\udcff",) + state[1:], "kind"),
        ((None,) + state[1:], "kind"),
        (state[:1] + ([5, 3],) + state[2:], "shape"),
        (state[:1] + ((5, -3),) + state[2:], "shape"),
        (state[:1] + ((5, 2**64),) + state[2:], "shape"),
        (state[:1] + ((5, 3.0),) + state[2:], "shape"),
        (state[:2] + ((np.int64(2),),) + state[3:], "index_shape"),
        (state[:4] + ("0",) + state[5:], "axis"),
        (state[:5] + (2**63,) + state[6:], "batch_dims"),
        (state[:8] + (bytearray(positions), None), "positions"),
        (state[:8] + (positions, "order"), "order"),
        (state[:9], "9 parts, not 10"),
        (state + (None,), "11 parts, not 10"),
        ((), "0 parts, not 10"),
    ]:
        with pytest.raises(ValueError, match=f"^not a prepared gather's state: {part}"):
            restore(*forged)
    # The zero-fill mark is only valid in mode "zero".
    mark = (2**32 - 1).to_bytes(4, "little") * 2
    with pytest.raises(ValueError):
        restore(*(state[:8] + (mark, None)))
    zero = state[:6] + ("zero",) + state[7:8] + (mark, None)
    assert_same(restore(*zero)(np.ones((5, 3))), np.zeros((2, 3)))


def test_distributed_ships_a_prepared_gather() -> None:
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            memory_limit="1GiB",
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        rng = np.random.default_rng(8)
        data = rng.random((500, 4), dtype=np.float32)
        idx = rng.integers(-500, 500, 300)
        p = ndgather.prepare_gather(data.shape, idx)
        got = client.submit(p, data).result(timeout=60)
        assert_same(got, ndgather.gather(data, idx))


def test_out_follows_the_one_shot_rules() -> None:
    data = np.arange(24, dtype=np.int16).reshape(4, 6)
    idx = np.array([3, 0, 3])
    p = ndgather.prepare_gather(data.shape, idx)
    out = np.full((3, 6), -1, np.int16)
    assert p(data, out=out) is out
    assert_same(out, data[idx])
    for bad in [
        np.empty((3, 6), np.int32),
        np.empty((3, 5), np.int16),
        np.empty((6, 3), np.int16).T,
        [[0] * 6] * 3,
    ]:
        want = outcome(ndgather.gather, data, idx, out=bad)
        assert want[0] == "error"
        assert outcome(p, data, out=bad) == want
    # out overlapping data: gathered aside first, as a one-shot call does.
    store = np.arange(48, dtype=np.int16).reshape(8, 6)
    view, target = store[:4], store[1:4]
    want = ndgather.gather(view.copy(), idx)
    assert p(view, out=target) is target
    assert_same(target, want)


def test_objects_are_referenced_and_zero_rows_are_none() -> None:
    marker = object()
    data = np.empty((3, 2), dtype=object)
    data[:] = marker
    before = sys.getrefcount(marker)
    p = ndgather.prepare_gather(data.shape, [0, 7, 2], mode="zero")
    got = p(data)
    assert got[1].tolist() == [None, None] and got[0, 0] is marker
    assert sys.getrefcount(marker) == before + 4
    out = np.empty((3, 2), dtype=object)
    p(data, out=out)
    assert sys.getrefcount(marker) == before + 8
    del got, out
    assert sys.getrefcount(marker) == before


def test_string_dtype_is_refused_at_call_time() -> None:
    if not hasattr(np, "dtypes") or not hasattr(np.dtypes, "StringDType"):
        pytest.skip("NumPy without StringDType")
    p = ndgather.prepare_gather((2,), [1])
    want = outcome(ndgather.gather, np.array(["a", "b"], dtype=np.dtypes.StringDType()), [1])
    assert want[0] == "error"
    assert outcome(p, np.array(["a", "b"], dtype=np.dtypes.StringDType())) == want


def test_broadcast_indices_and_empty_outputs() -> None:
    data = np.arange(30).reshape(5, 6)
    idx = np.broadcast_to(np.array([[1], [4]]), (2, 10**6))  # 2 stored values
    with pytest.raises(IndexError):
        ndgather.prepare_gather((5, 6), np.broadcast_to([7], (10**6,)))
    p = ndgather.prepare_gather(data.shape[:1] + (0,), idx)
    assert p.shape == (2, 10**6, 0) and p.nbytes < 1024
    assert p(np.zeros((5, 0))).shape == (2, 10**6, 0)
    small = ndgather.prepare_gather(data.shape, idx[:, :3], axis=0)
    assert_same(small(data), data[np.asarray(idx[:, :3])])
    assert math.prod(small.shape) == 2 * 3 * 6


# dtype= on a prepared call: the one-shot call's casts, refusals and error order.
CAST_PAIRS = [
    ("float16", "float32"),
    ("int8", "float32"),
    ("uint8", "float64"),
    ("int16", "int64"),
    ("float32", "float64"),
    (">f2", "<f4"),  # byte-swapped data
    ("float32", "float32"),  # no conversion: the data's dtype kept
]


@pytest.mark.parametrize("pair", CAST_PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("mode", ["raise", "zero", "clip"])
def test_dtype_is_the_one_shot_cast(pair: tuple[str, str], mode: str) -> None:
    src, dst = pair
    data = values((40, 6, 5), src)
    idx = np.array([[3, 1], [39, 5], [0, 0], [7, 2]])
    if mode != "raise":
        idx = np.concatenate([idx, [[40, 1], [-41, 2]]])
    p = ndgather.prepare_gather_nd(data.shape, idx, mode=mode)
    want = ndgather.gather_nd(data, idx, mode=mode, dtype=np.dtype(dst))
    assert_same(want, ndgather.gather_nd(data, idx, mode=mode).astype(dst))
    for d in relayouts(data):
        assert_same(p(d, dtype=np.dtype(dst)), want)
        assert_same(p(d, dtype=dst), want)  # a name, resolved as NumPy does
    out = np.full(want.shape, 7, want.dtype)
    assert p(data, out=out, dtype=dst) is out
    assert_same(out, want)


def test_dtype_bfloat16_widens_as_ml_dtypes_does() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data = values((64, 16), np.float32).astype(ml_dtypes.bfloat16)
    idx = np.array([63, 0, 5, 5])
    p = ndgather.prepare_gather(data.shape, idx)
    for dst in (np.float32, np.float64):
        assert_same(p(data, dtype=dst), data[idx].astype(dst))


@pytest.mark.parametrize("case", LARGE, ids=lambda c: f"{c[0]}{c[1]}")
@pytest.mark.parametrize("threads", [1, 2])
def test_dtype_on_large_gathers_and_address_order(case: Any, threads: int) -> None:
    # Point lookups prepared in address order convert too (through the scatter buffer).
    op, shape, b_or_axis, n = case
    ndgather.set_num_threads(threads)
    rng = np.random.default_rng(11)
    data = rng.integers(-(1 << 15), 1 << 15, size=shape).astype(np.int16)
    if op == "gather_nd":
        k = 2 if len(shape) == 3 or shape == (1024, 1024) else 1
        idx = rng.integers(0, np.array(shape[:k]), size=(n, k))
        p = ndgather.prepare_gather_nd(shape, idx)
        want = gather_nd_fancy(data, idx, 0, "raise")
    else:
        idx = rng.integers(0, shape[0], size=n)
        p = ndgather.prepare_gather(shape, idx, b_or_axis)
        want = gather_take(data, idx, b_or_axis, 0, "raise")
    assert_same(p(data, dtype=np.float32), want.astype(np.float32))
    assert_same(p(data, dtype=np.int64), want.astype(np.int64))


def test_dtype_refusals_are_the_one_shot_type_errors() -> None:
    data = values((10, 4), np.float32)
    p = ndgather.prepare_gather(data.shape, [1, 2])
    for bad in (np.float16, np.int32, "U4", object):
        with pytest.raises(TypeError) as one_shot:
            ndgather.gather(data, [1, 2], dtype=bad)
        with pytest.raises(TypeError) as prepared:
            p(data, dtype=bad)
        assert str(prepared.value) == str(one_shot.value)
    # The cast is refused before the shape is checked, as the one-shot call refuses it
    # before planning.
    with pytest.raises(TypeError, match="cannot gather data of dtype float32 as dtype float16"):
        p(values((3, 3), np.float32), dtype=np.float16)
    # A dtype NumPy cannot read is NumPy's TypeError, after data's own errors.
    with pytest.raises(TypeError):
        p(data, dtype="no such dtype")
    with pytest.raises(ValueError, match="has shape"):
        p(values((3, 3), np.float32), dtype=np.float64)
    # out= of the cast's dtype only.
    with pytest.raises(TypeError):
        p(data, out=np.empty((2, 4), np.float32), dtype=np.float64)


def test_dtype_on_objects_and_strings_is_refused_or_kept() -> None:
    data = np.array([["a", "bb"], ["ccc", "d"]], dtype=object)
    p = ndgather.prepare_gather(data.shape, [1, 0])
    assert_same(p(data, dtype=object), data[[1, 0]])
    with pytest.raises(TypeError):
        p(data, dtype=np.float64)
