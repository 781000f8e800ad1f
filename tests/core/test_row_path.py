"""The row path: ``gather(table, ids)`` and ``gather_nd(table, ids[..., None])`` with a short
list of native ``int32``/``int64`` ids (or ``gather_nd(table, tuples)`` with a short list of
index tuples), a C-contiguous table and ``mode="raise"`` or ``mode="clip"`` skip the planner
(src/rows.rs).
Whatever it takes, it must answer as the general path does: the same bytes as NumPy's
``take`` (or fancy indexing), the same errors with the same attributes, ``out`` untouched on
an error; and what it declines (long lists, large rows, other layouts and index types, an
``out`` over the inputs) must still be right."""

from __future__ import annotations

from typing import Any

import ndgather
import numpy as np
import pytest

Array = np.ndarray[Any, Any]

RNG = np.random.default_rng(20261124)


def table(shape: tuple[int, ...], dtype: Any = np.float32) -> Array:
    raw = RNG.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def same_bytes(got: Array, want: Array) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("count", [1, 2, 7, 8, 64, 255, 256, 257, 511, 512, 513, 600])
@pytest.mark.parametrize("row", [(), (1,), (3,), (15,), (128,), (4, 33)])
def test_rows_by_ids_equal_take(index_dtype: Any, count: int, row: tuple[int, ...]) -> None:
    data = table((50, *row))
    ids = RNG.integers(-50, 50, size=count).astype(index_dtype)
    want = np.take(data, ids, axis=0)
    same_bytes(ndgather.gather(data, ids), want)
    same_bytes(ndgather.gather_nd(data, ids[:, None]), want)
    out = np.full_like(want, 7)
    assert ndgather.gather(data, ids, out=out) is out
    same_bytes(out, want)
    out = np.full_like(want, 7)
    assert ndgather.gather_nd(data, ids[:, None], out=out) is out
    same_bytes(out, want)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("count", [1, 2, 8, 511, 512, 513])
@pytest.mark.parametrize(
    ("shape", "k"),
    [((6, 7), 2), ((6, 7, 3), 2), ((6, 7, 3), 3), ((4, 5, 6, 2), 3), ((2, 3, 4, 5, 6), 4)],
    ids=lambda v: str(v),
)
def test_tuples_equal_fancy_indexing(
    index_dtype: Any, count: int, shape: tuple[int, ...], k: int
) -> None:
    data = table(shape)
    lead = np.array(shape[:k])
    ids = RNG.integers(-lead, lead, size=(count, k)).astype(index_dtype)
    want = data[tuple(ids.T)]
    same_bytes(ndgather.gather_nd(data, ids), want)
    out = np.full_like(want, 7)
    assert ndgather.gather_nd(data, ids, out=out) is out
    same_bytes(out, want)
    # Leading axes of the ids lead the result.
    same_bytes(
        ndgather.gather_nd(data, ids[:1].reshape(1, 1, k)), want[:1].reshape(1, 1, *want.shape[1:])
    )


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize(
    ("bad", "axis"), [((0, 7), 1), ((0, -8), 1), ((6, 0), 0), ((-7, 0), 0), ((1, 2**31 - 1), 1)]
)
def test_a_tuple_index_outside_its_axis_raises_as_the_general_path_does(
    index_dtype: Any, bad: tuple[int, int], axis: int
) -> None:
    # (0, 7) names element 7 of the flattened (6, 7) table, which exists: each index is
    # checked against its own axis, not the tuple against the table.
    data = table((6, 7, 2))
    ids = np.zeros((40, 2), dtype=index_dtype)
    ids[17] = bad
    general = np.repeat(ids, 2, axis=0)[::2]  # strided: the general path takes it
    with pytest.raises(ndgather.GatherIndexError) as expected:
        ndgather.gather_nd(data, general)
    for out in (None, np.full((40, 2), 7, dtype=np.float32)):
        with pytest.raises(ndgather.GatherIndexError) as got:
            ndgather.gather_nd(data, ids, out=out)
        assert str(got.value) == str(expected.value)
        assert got.value.position == expected.value.position == (17, axis)
        assert got.value.value == bad[axis] and got.value.axis == axis
        assert out is None or (out == 7).all(), "out written before the error"


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize(
    ("shape", "b", "k", "per_batch"),
    [
        ((30, 2, 100, 35), 2, 1, 3),  # OpenVINO GatherND-8 example 2
        ((8, 50, 60, 3), 1, 2, 20),
        ((4, 5, 6, 7), 1, 3, 128),  # 512 tuples: the bound
        ((4, 5, 6, 7), 1, 3, 129),  # beyond it
        ((3, 4, 5), 2, 1, 1),
    ],
)
def test_batched_tuples_equal_a_loop_over_the_batches(
    index_dtype: Any, shape: tuple[int, ...], b: int, k: int, per_batch: int
) -> None:
    data = table(shape)
    batch, lead = shape[:b], np.array(shape[b : b + k])
    ids = RNG.integers(-lead, lead, size=(*batch, per_batch, k)).astype(index_dtype)
    want = np.stack([data[p][tuple(ids[p].reshape(-1, k).T)] for p in np.ndindex(*batch)]).reshape(
        *batch, per_batch, *shape[b + k :]
    )
    same_bytes(ndgather.gather_nd(data, ids, batch_dims=b), want)
    out = np.full_like(want, 7)
    assert ndgather.gather_nd(data, ids, batch_dims=b, out=out) is out
    same_bytes(out, want)
    # An index outside its axis in the last batch: the general path's error, out untouched.
    bad = ids.copy()
    bad[(*(n - 1 for n in batch), per_batch - 1, k - 1)] = shape[b + k - 1]
    with pytest.raises(ndgather.GatherIndexError) as expected:
        ndgather.gather_nd(data, np.repeat(bad, 2, axis=-1)[..., ::2], batch_dims=b)
    out = np.full_like(want, 7)
    with pytest.raises(ndgather.GatherIndexError) as got:
        ndgather.gather_nd(data, bad, batch_dims=b, out=out)
    assert str(got.value) == str(expected.value)
    assert got.value.position == expected.value.position
    assert (out == 7).all(), "out written before the error"


def test_batch_axes_that_differ_are_refused_as_before() -> None:
    data = table((3, 4, 5))
    with pytest.raises(ValueError) as got:
        ndgather.gather_nd(data, np.zeros((2, 1, 1), dtype=np.int64), batch_dims=1)
    with pytest.raises(ValueError) as expected:
        ndgather.gather_nd(data, np.zeros((2, 1, 2), dtype=np.int64)[..., ::2], batch_dims=1)
    assert str(got.value) == str(expected.value)


def test_tuples_convert_on_their_way() -> None:
    data = table((9, 10, 4), np.float16)
    ids = np.array([[8, -1], [0, 0], [-9, 5]], dtype=np.int64)
    want = data[tuple(ids.T)].astype(np.float32)
    same_bytes(ndgather.gather_nd(data, ids, dtype=np.float32), want)
    out = np.full_like(want, 7)
    ndgather.gather_nd(data, ids, out=out, dtype=np.float32)
    same_bytes(out, want)


@pytest.mark.parametrize(
    "ids_shape", [(), (1,), (2, 3), (4, 1, 2), (0,), (3, 0)], ids=lambda s: f"ids{s}"
)
def test_the_ids_shape_leads_the_result(ids_shape: tuple[int, ...]) -> None:
    data = table((9, 2, 5), np.int16)
    ids = RNG.integers(-9, 9, size=ids_shape).astype(np.int64)
    same_bytes(ndgather.gather(data, ids), np.take(data, ids, axis=0))
    same_bytes(ndgather.gather_nd(data, ids[..., None]), np.take(data, ids, axis=0))


def numpy_max_dims() -> int:
    """NumPy's most axes an array may have: 64 from NumPy 2, 32 before."""
    try:
        np.empty((1,) * 64)
    except ValueError:
        return 32
    return 64


def test_a_result_of_more_axes_than_numpy_allows_is_refused() -> None:
    # One more axis than NumPy allows (ids of all but one, rows of two). The
    # row path builds the shape on the stack for at most 64 axes and leaves
    # the rest to the general path, which raises NumPy's own ValueError.
    most = numpy_max_dims()
    data = np.zeros((2, 1, 1), np.float32)
    ids = np.zeros((1,) * (most - 1), np.int64)
    with pytest.raises(ValueError, match="dimension"):
        ndgather.gather(data, ids, axis=0)
    with pytest.raises(ValueError, match="out has shape"):
        ndgather.gather(data, ids, axis=0, out=np.empty((1,) * most, np.float32))
    # Exactly as many axes as NumPy allows: taken.
    got = ndgather.gather(data, ids[..., 0], axis=0)
    assert got.shape == (1,) * most


@pytest.mark.parametrize(
    "dtype",
    [np.bool_, np.int8, np.uint16, ">f4", "<c16", "V3", "S5", "U2", np.dtype("i1,>f8", align=True)],
    ids=str,
)
def test_every_plain_dtype_and_byte_order(dtype: Any) -> None:
    data = table((20, 3), dtype)
    ids = np.array([19, 0, -1, 7], dtype=np.int64)
    want = np.take(data, ids, axis=0)
    same_bytes(ndgather.gather(data, ids), want)
    assert ndgather.gather(data, ids).dtype == data.dtype


def test_objects_are_referenced_not_copied_as_bytes() -> None:
    items = [object() for _ in range(6)]
    data = np.empty(6, dtype=object)
    data[:] = items
    got = ndgather.gather(data, np.array([5, 5, 0], dtype=np.int64))
    assert [id(x) for x in got] == [id(items[5]), id(items[5]), id(items[0])]


@pytest.mark.parametrize(
    "make_ids",
    [
        lambda a: a.astype(np.int16),
        lambda a: a.astype(np.uint32),
        lambda a: a.astype(">i8"),
        lambda a: np.repeat(a, 2)[::2],  # strided
        lambda a: a.tolist(),
        lambda a: np.frombuffer(b"\0" + a.astype(np.int64).tobytes(), np.int64, offset=1),
    ],
    ids=["int16", "uint32", "big-endian", "strided", "list", "unaligned"],
)
def test_ids_the_path_declines_give_the_same_rows(make_ids: Any) -> None:
    data = table((30, 4))
    ids = np.array([3, 28, 29, 3, 0], dtype=np.int64)  # no negatives: uint32 is a case
    same_bytes(ndgather.gather(data, make_ids(ids)), np.take(data, ids, axis=0))


@pytest.mark.parametrize(
    "make_data",
    [
        lambda t: t[:, ::2],
        lambda t: t[::2],
        lambda t: np.asfortranarray(t),
        lambda t: t[::-1],
    ],
    ids=["strided-rows", "every-other-row", "fortran", "reversed"],
)
def test_tables_the_path_declines_give_the_same_rows(make_data: Any) -> None:
    data = make_data(table((40, 6)))
    ids = np.array([1, -1, 5, 19], dtype=np.int32)
    same_bytes(ndgather.gather(data, ids), np.take(data, ids, axis=0))


@pytest.mark.parametrize("bad_at", [0, 3, 511])
@pytest.mark.parametrize("bad", [30, -31, 2**31 - 1, -(2**31)])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_an_id_out_of_range_raises_as_the_general_path_does(
    bad_at: int, bad: int, index_dtype: Any
) -> None:
    data = table((30, 4))
    ids = np.zeros(512, dtype=index_dtype)
    ids[bad_at] = bad
    general = np.repeat(ids, 2)[::2]  # the same ids, strided: the general path takes them
    assert not general.flags.c_contiguous and (general == ids).all()
    for op, fast, slow in (
        (ndgather.gather, ids, general),
        (ndgather.gather_nd, ids[:, None], general[:, None]),
    ):
        with pytest.raises(ndgather.GatherIndexError) as expected:
            op(data, slow)
        for out in (None, np.full((512, 4), 7, dtype=np.float32)):
            with pytest.raises(ndgather.GatherIndexError) as got:
                op(data, fast, out=out)
            assert str(got.value) == str(expected.value)
            assert got.value.position == expected.value.position
            assert got.value.value == bad and got.value.axis == 0 and got.value.axis_size == 30
            assert got.value.position[0] == bad_at
            assert out is None or (out == 7).all(), "out written before the error"


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("count", [1, 8, 100, 512, 513])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_clip_clamps_every_index_of_ids_and_tuples(index_dtype: Any, count: int, k: int) -> None:
    # A (6, 5, 4, 3) table: tuples of k indices name its slices past their k axes. Each
    # index counts from the end when negative, then clamps into its own axis.
    data = table((6, 5, 4, 3))
    tuples = RNG.integers(-12, 12, size=(count, k)).astype(index_dtype)
    tuples[0, :] = np.iinfo(index_dtype).min
    tuples[-1, :] = np.iinfo(index_dtype).max
    sizes = np.array(data.shape[:k])
    wrapped = np.where(tuples < 0, tuples.astype(np.int64) + sizes, tuples)
    want = data[tuple(np.clip(wrapped, 0, sizes - 1).T)]
    same_bytes(ndgather.gather_nd(data, tuples, mode="clip"), want)
    out = np.full_like(want, 7)
    assert ndgather.gather_nd(data, tuples, mode="clip", out=out) is out
    same_bytes(out, want)
    if k == 1:
        same_bytes(ndgather.gather(data, tuples[:, 0], mode="clip"), want)
    # An empty axis has nothing to clamp into: the general path's error.
    with pytest.raises(IndexError):
        ndgather.gather_nd(np.zeros((0, 3), np.float32), tuples[:, :1], mode="clip")


def test_mode_and_attributes_other_than_the_plain_call_keep_their_meaning() -> None:
    data = table((10, 3))
    ids = np.array([12, -11, 4], dtype=np.int64)
    clipped = np.take(data, np.clip(np.where(ids < 0, ids + 10, ids), 0, 9), axis=0)
    same_bytes(ndgather.gather(data, ids, mode="clip"), clipped)
    zero = ndgather.gather(data, ids, mode="zero")
    assert (zero[:2] == 0).all() and (zero[2] == data[4]).all()
    same_bytes(ndgather.gather(data, ids[:1] % 3, axis=1), np.take(data, ids[:1] % 3, axis=1))
    same_bytes(ndgather.gather(data, ids % 10, axis=-2), np.take(data, ids % 10, axis=0))
    with pytest.raises(ValueError):
        ndgather.gather(data, ids % 10, batch_dims=1)
    pairs = np.array([[1, 2], [9, 0]], dtype=np.int64)
    same_bytes(ndgather.gather_nd(data, pairs), data[pairs[:, 0], pairs[:, 1]])


def test_an_out_over_the_table_or_the_ids_gets_the_rows_read_before_writing() -> None:
    data = np.arange(48, dtype=np.int64).reshape(12, 4)
    ids = np.array([11, 10, 9], dtype=np.int64)
    want = np.take(data, ids, axis=0)
    ndgather.gather(data, ids, out=data[:3])  # out is rows 0..2 of data itself
    same_bytes(data[:3], want)
    flat = np.arange(8, dtype=np.int64)
    ids = flat[:2]  # ids are the first two elements of both table and out
    ndgather.gather(flat, ids, out=flat[:2])
    same_bytes(flat[:2], np.array([0, 1]))


@pytest.mark.parametrize(
    ("bad_out", "error"),
    [
        (np.empty((3, 4), np.float64), TypeError),
        (np.empty((4, 4), np.float32), ValueError),
        (np.empty((4, 3), np.float32).T, ValueError),
        ([[0.0] * 4] * 3, TypeError),
    ],
    ids=["dtype", "shape", "layout", "list"],
)
def test_a_wrong_out_is_refused_as_before(bad_out: Any, error: type[Exception]) -> None:
    data = table((10, 4))
    with pytest.raises(error):
        ndgather.gather(data, np.array([1, 2, 3], dtype=np.int64), out=bad_out)
    readonly = np.empty((3, 4), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        ndgather.gather(data, np.array([1, 2, 3], dtype=np.int64), out=readonly)


def test_an_empty_table_and_empty_rows() -> None:
    with pytest.raises(ndgather.GatherIndexError):
        ndgather.gather(np.empty((0, 3), np.float32), np.array([0], dtype=np.int64))
    same_bytes(
        ndgather.gather(np.empty((5, 0), np.float32), np.array([4, -5], dtype=np.int64)),
        np.empty((2, 0), np.float32),
    )
    with pytest.raises(ndgather.GatherIndexError):
        ndgather.gather(np.empty((5, 0), np.float32), np.array([5], dtype=np.int64))


@pytest.mark.parametrize("row", [(8,), (32,), (128,)])
def test_back_to_back_calls_on_two_threads_equal_take(row: tuple[int, ...]) -> None:
    # Calls close together keep a helper awake, and from
    # `_core._tuning()["row_split_min_lines"]` lines of rows of a table beyond four times the
    # L2 (64 MiB here) the row path splits its copy with it (on Intel cores and AMD's without
    # AVX-512): every call must still give NumPy's rows, and a bad id anywhere must raise with
    # `out` untouched.
    data = table(((64 << 20) // (4 * row[0]), *row))
    before = ndgather.get_num_threads()
    ndgather.set_num_threads(2)
    try:
        for count in (64, 256, 512, 64, 512):
            for _ in range(20):
                ids = RNG.integers(-len(data), len(data), count)
                same_bytes(ndgather.gather(data, ids), np.take(data, ids, axis=0))
                out = np.empty((count, *row), data.dtype)
                ndgather.gather(data, ids.astype(np.int32), out=out, mode="clip")
                same_bytes(out, np.take(data, ids, axis=0))
            ids[count // 2] = len(data)
            out.fill(7)
            with pytest.raises(IndexError):
                ndgather.gather(data, ids, out=out)
            assert (out == 7).all()
    finally:
        ndgather.set_num_threads(before)
