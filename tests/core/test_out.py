"""The out= argument: filled and returned, strictly checked, untouched on error, overlap-safe."""

from __future__ import annotations

import ndgather
import numpy as np
import pytest
from reference import assert_same, gather_nd_fancy, gather_nd_loop, gather_take


def test_out_is_filled_and_returned() -> None:
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    out = np.full((3, 6), -1.0, dtype=np.float32)
    r = ndgather.gather(data, [3, 0, -1], out=out)
    assert r is out
    assert_same(out, gather_take(data, np.array([3, 0, -1]), 0))
    out2 = np.empty((4, 2), dtype=np.float32)
    r = ndgather.gather(data, [5, 1], axis=1, out=out2)
    assert r is out2
    assert_same(out2, data[:, [5, 1]])
    outnd = np.empty((2,), dtype=np.float32)
    r = ndgather.gather_nd(data, [[1, 2], [3, 5]], out=outnd)
    assert r is outnd
    assert_same(outnd, gather_nd_fancy(data, np.array([[1, 2], [3, 5]])))
    outb = np.empty((4, 2), dtype=np.float32)
    ib = np.array([[[1], [0]], [[5], [5]], [[0], [0]], [[2], [4]]])
    r = ndgather.gather_nd(data, ib, batch_dims=1, out=outb)
    assert r is outb
    assert_same(outb, gather_nd_loop(data, ib, 1))


def test_out_none_is_default() -> None:
    data = np.arange(5)
    assert_same(ndgather.gather(data, [1], out=None), np.array([1]))
    assert_same(ndgather.gather_nd(data, [[1]], out=None), np.array([1]))


def test_out_zero_d_and_zero_size() -> None:
    data = np.arange(5, dtype=np.int64)
    o = np.empty((), dtype=np.int64)
    assert ndgather.gather(data, 3, out=o) is o
    assert o[()] == 3
    o = np.empty((), dtype=np.int64)
    assert ndgather.gather_nd(data, [4], out=o) is o
    assert o[()] == 4
    e = np.empty((0, 5), dtype=np.int64)
    assert ndgather.gather(data.reshape(1, 5), np.zeros(0, np.int64), out=e) is e


@pytest.mark.parametrize("mode", ["raise", "zero", "clip"])
def test_out_modes_overwrite_everything(mode: str) -> None:
    data = np.arange(1, 13, dtype=np.int16).reshape(4, 3)
    idx = np.array([2, 0, 3]) if mode == "raise" else np.array([2, 7, -9, 3])
    out = np.full((idx.size, 3), 12345, dtype=np.int16)
    ndgather.gather(data, idx, mode=mode, out=out)
    assert_same(out, gather_take(data, idx, 0, 0, mode))


def test_out_unaligned_is_accepted() -> None:
    data = np.arange(20, dtype=np.float64).reshape(4, 5)
    buf = np.zeros(3 * 5 * 8 + 1, dtype=np.uint8)
    out = buf[1:].view(np.float64).reshape(3, 5)
    assert out.flags.c_contiguous and out.flags.writeable and not out.flags.aligned
    assert ndgather.gather(data, [3, 1, 0], out=out) is out
    assert_same(np.ascontiguousarray(out), data[[3, 1, 0]])


def test_out_large_parallel() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((5000, 100))
    idx = rng.integers(-5000, 5000, size=20_000)
    out = np.empty((20_000, 100))
    assert ndgather.gather(data, idx, out=out) is out
    assert_same(out, np.take(data, idx, axis=0))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("phase", [0, 4, 16, 48])
@pytest.mark.parametrize("row_bytes", [144, 256, 300, 512, 1040])
def test_out_of_an_l2_and_more_at_every_offset_in_a_line(
    row_bytes: int, phase: int, threads: int
) -> None:
    # Outputs of 2 MiB and more (a core's L2 on the Intel kind, where rows of
    # four lines and more are then stored on lines: copy::copy_to_lines),
    # starting on a line and 4, 16 or 48 bytes past one; every byte in
    # place and none written around them.
    width = row_bytes // 4
    rng = np.random.default_rng(row_bytes + phase)
    data = rng.standard_normal((4096, width)).astype(np.float32)
    n = (2 << 20) // row_bytes + 7
    idx = rng.integers(-4096, 4096, size=n)
    nbytes = n * row_bytes
    raw = np.full(nbytes + 192, 0xEE, dtype=np.uint8)
    at = (-raw.ctypes.data) % 64 + 64 + phase
    out = raw[at : at + nbytes].view(np.float32).reshape(n, width)
    ndgather.set_num_threads(threads)
    assert ndgather.gather(data, idx, out=out) is out
    assert_same(out, np.take(data, idx, axis=0))
    assert (raw[:at] == 0xEE).all() and (raw[at + nbytes :] == 0xEE).all()


# --------------------------------------------------------------------------- bad out


def _calls(data: np.ndarray, out: object):
    """gather and gather_nd calls whose correct output shape is (2, 3) with data's dtype."""
    return [
        lambda: ndgather.gather(data, [1, 0], out=out),
        lambda: ndgather.gather_nd(data, [[1], [0]], out=out),
    ]


@pytest.mark.parametrize(
    "shape", [(3, 2), (2, 3, 1), (1, 2, 3), (6,), (2, 4), (), (2, 2), (0, 3)], ids=repr
)
def test_out_wrong_shape_value_error(shape) -> None:
    data = np.arange(9, dtype=np.int32).reshape(3, 3)
    out = np.full(shape, 7, dtype=np.int32)
    for call in _calls(data, out):
        with pytest.raises(ValueError):
            call()
        assert np.all(out == 7)


@pytest.mark.parametrize(
    "dtype", ["int64", "uint32", "float32", ">i4", "int16", "object", "V4", "S4", "U1"]
)
def test_out_wrong_dtype_type_error(dtype: str) -> None:
    data = np.arange(9, dtype="<i4").reshape(3, 3)
    out = np.zeros((2, 3), dtype=dtype)
    before = out.copy()
    for call in _calls(data, out):
        with pytest.raises(TypeError):
            call()
        if out.dtype.kind != "O":
            assert out.tobytes() == before.tobytes()


def test_out_not_an_ndarray_type_error() -> None:
    data = np.arange(9, dtype=np.int64).reshape(3, 3)
    for bad in ([[0, 0, 0], [0, 0, 0]], (1, 2), 5, "out", memoryview(bytearray(48))):
        for call in _calls(data, bad):
            with pytest.raises(TypeError):
                call()


def test_out_non_c_contiguous_value_error() -> None:
    data = np.arange(9, dtype=np.float64).reshape(3, 3)
    f = np.zeros((2, 3), dtype=np.float64, order="F")
    stepped = np.zeros((4, 3), dtype=np.float64)[::2]
    rev = np.zeros((2, 3), dtype=np.float64)[::-1]
    inner = np.zeros((2, 6), dtype=np.float64)[:, ::2]
    tr = np.zeros((3, 2), dtype=np.float64).T
    for out in (f, stepped, rev, inner, tr):
        assert out.shape == (2, 3) and not out.flags.c_contiguous
        for call in _calls(data, out):
            with pytest.raises(ValueError):
                call()
            assert not out.any()


def test_out_read_only_value_error() -> None:
    data = np.arange(9, dtype=np.float64).reshape(3, 3)
    out = np.zeros((2, 3))
    out.flags.writeable = False
    for call in _calls(data, out):
        with pytest.raises(ValueError):
            call()
    assert not out.any()
    bro = np.broadcast_to(np.zeros(3), (2, 3))
    for call in _calls(data, bro):
        with pytest.raises(ValueError):
            call()


# --------------------------------------------------------------------------- untouched on error


@pytest.mark.parametrize("threads", [1, 2])
def test_out_untouched_after_index_error(threads: int) -> None:
    ndgather.set_num_threads(threads)
    rng = np.random.default_rng(1)
    data = rng.standard_normal((1000, 16)).astype(np.float32)
    n = 300_000
    idx = rng.integers(0, 1000, size=n)
    for bad_pos in (n - 1, n // 2, 0):
        bad = idx.copy()
        bad[bad_pos] = 1000
        out = np.full((n, 16), 42.0, dtype=np.float32)
        with pytest.raises(IndexError):
            ndgather.gather(data, bad, out=out)
        assert np.all(out == 42.0), f"out was written before the bad index at {bad_pos}"
        outnd = np.full((n, 16), 42.0, dtype=np.float32)
        with pytest.raises(IndexError):
            ndgather.gather_nd(data, bad[:, None], out=outnd)
        assert np.all(outnd == 42.0)
    # element gather_nd, bad index in the second component only
    pts = np.stack([rng.integers(0, 1000, n), rng.integers(0, 16, n)], -1)
    pts[n - 2, 1] = -17
    o = np.full(n, 7.0, dtype=np.float32)
    with pytest.raises(IndexError):
        ndgather.gather_nd(data, pts, out=o)
    assert np.all(o == 7.0)


@pytest.mark.parametrize("threads", [1, 2])
def test_element_lookups_into_out_after_earlier_calls_are_exact_or_untouched(threads: int) -> None:
    # OpenVINO GatherND-8's third example (batch_dims=3, one element a batch: 8 bytes of index
    # a 4-byte element), at sizes around the few rows kept on the stack and up to buffers
    # larger than a thread keeps: each call works in its thread's buffer, which holds the last
    # call's bytes, so a good call must still give the reference and a bad one leave `out` as
    # it was.
    ndgather.set_num_threads(threads)
    rng = np.random.default_rng(9)
    data = rng.standard_normal((1, 64, 64, 320)).astype(np.float32)
    flat = data.reshape(4096, 320)
    for batches in (4096, 32, 33, 1000, 4096):
        rows = flat[:batches]
        for _ in range(2):
            idx = rng.integers(0, 320, (batches, 1))
            want = np.take_along_axis(rows, idx, axis=1)[:, 0]
            out = np.full(batches, 5.0, dtype=np.float32)
            assert ndgather.gather_nd(rows, idx, batch_dims=1, out=out) is out
            np.testing.assert_array_equal(out, want)
            bad = idx.copy()
            bad[rng.integers(0, batches), 0] = 320
            kept = np.full(batches, 3.0, dtype=np.float32)
            with pytest.raises(IndexError):
                ndgather.gather_nd(rows, bad, batch_dims=1, out=kept)
            assert np.all(kept == 3.0)
    # Points by int64 pairs whose output is larger than what a thread keeps (400 KB).
    pts = np.stack([rng.integers(0, 4096, 100_000), rng.integers(0, 320, 100_000)], -1)
    out = np.full(100_000, 5.0, dtype=np.float32)
    ndgather.gather_nd(flat, pts, out=out)
    np.testing.assert_array_equal(out, flat[pts[:, 0], pts[:, 1]])
    pts[-1, 1] = 320
    out[:] = 3.0
    with pytest.raises(IndexError):
        ndgather.gather_nd(flat, pts, out=out)
    assert np.all(out == 3.0)


def test_out_untouched_after_other_errors() -> None:
    data = np.arange(12, dtype=np.int64).reshape(3, 4)
    out = np.full((2, 4), 9, dtype=np.int64)
    with pytest.raises(ValueError):
        ndgather.gather(data, [0, 1], mode="wrap", out=out)
    with pytest.raises(TypeError):
        ndgather.gather(data, np.array([0.0, 1.0]), out=out)
    with pytest.raises(ValueError):
        ndgather.gather(data, [0, 1], axis=5, out=out)
    with pytest.raises(ValueError):
        ndgather.gather_nd(data, [[0], [1]], batch_dims=1, out=out)
    assert np.all(out == 9)


# --------------------------------------------------------------------------- overlap


def _check_overlap(call, expected: np.ndarray, out: np.ndarray, snapshot: np.ndarray) -> None:
    """Either the right answer in out, or ValueError with out unchanged."""
    try:
        r = call()
    except ValueError:
        assert out.tobytes() == snapshot.tobytes(), "out changed although ValueError was raised"
        return
    assert r is out
    assert_same(np.ascontiguousarray(out), expected)


def test_out_is_data() -> None:
    data = np.arange(10, dtype=np.float64)
    idx = np.arange(10)[::-1].copy()
    expected = data[idx].copy()
    _check_overlap(lambda: ndgather.gather(data, idx, out=data), expected, data, data.copy())


def test_out_is_data_rows_gather_nd() -> None:
    data = np.arange(32, dtype=np.int32).reshape(8, 4)
    out = data[2:6]  # C-contiguous rows inside data
    idx = np.array([[0], [1], [2], [3]])
    expected = data[[0, 1, 2, 3]].copy()
    snap = out.copy()
    _check_overlap(lambda: ndgather.gather_nd(data, idx, out=out), expected, out, snap)


def test_out_partially_overlaps_data() -> None:
    buf = np.arange(40, dtype=np.int16)
    data = buf[:20]
    out = buf[10:30]
    idx = np.arange(20)[::-1].copy()
    expected = data[idx].copy()
    snap = out.copy()
    _check_overlap(lambda: ndgather.gather(data, idx, out=out), expected, out, snap)


def test_out_overlaps_strided_data() -> None:
    buf = np.arange(24, dtype=np.float32)
    data = buf[::2]  # (12,) stride 8
    out = buf[6:18].reshape(12)  # contiguous, interleaved with data
    idx = (np.arange(12) * 5) % 12
    expected = data[idx].copy()
    snap = out.copy()
    _check_overlap(lambda: ndgather.gather(data, idx, out=out), expected, out, snap)


def test_out_is_indices() -> None:
    data = np.arange(100, dtype=np.int64) * 3 - 150
    idx = np.array([5, 99, 0, -1, 50, 5, 7, 8], dtype=np.int64)
    expected = data[idx].copy()
    _check_overlap(lambda: ndgather.gather(data, idx, out=idx), expected, idx, idx.copy())
    # gather_nd: out is the first column block of the indices' memory
    data2 = (np.arange(64, dtype=np.int64) % 8).reshape(8, 8)
    idx2 = np.array([[1, 2], [3, 4], [7, 7], [0, 6]], dtype=np.int64)
    out2 = idx2.reshape(-1)[:4]
    expected2 = gather_nd_fancy(data2, idx2)
    snap = out2.copy()
    _check_overlap(lambda: ndgather.gather_nd(data2, idx2, out=out2), expected2, out2, snap)


def test_out_overlaps_indices_of_other_dtype() -> None:
    """out's bytes alias int32 indices: writing out before reading all indices is wrong."""
    data = np.arange(1, 21, dtype=np.int64)
    raw = np.zeros(8 * 8, dtype=np.uint8)
    out = raw.view(np.int64)  # 8 int64 = 64 bytes
    idx = raw.view(np.int32)[:8]  # the first 32 bytes, i.e. out[0:4]
    idx[...] = [19, 0, 5, 5, 18, 1, 2, 3]
    expected = data[idx.astype(np.int64)].copy()
    snap = out.copy()
    _check_overlap(lambda: ndgather.gather(data, idx, out=out), expected, out, snap)


def test_out_is_data_large() -> None:
    rng = np.random.default_rng(2)
    data = rng.standard_normal(1_000_000)
    idx = rng.permutation(1_000_000)
    expected = data[idx].copy()
    _check_overlap(lambda: ndgather.gather(data, idx, out=data), expected, data, data.copy())


def test_out_is_data_object() -> None:
    words = ["".join(["w", str(i)]) for i in range(6)]
    data = np.empty(6, dtype=object)
    for i, w in enumerate(words):
        data[i] = w
    idx = np.array([5, 4, 3, 2, 1, 0])
    expected = data[idx].copy()
    snap = data.copy()
    try:
        r = ndgather.gather(data, idx, out=data)
    except ValueError:
        assert data.tolist() == snap.tolist()
        return
    assert r is data
    assert data.tolist() == expected.tolist()
    assert all(a is b for a, b in zip(data, expected, strict=True))


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype([("a", "u1"), ("b", "<i8")], align=True),
        np.dtype({"names": ["a", "b"], "formats": ["<i2", "<i2"], "offsets": [0, 5]}),
        np.dtype("longdouble"),
        np.dtype("<f4"),
    ],
    ids=["rec-aligned-16", "rec-offsets-gap", "longdouble", "f4"],
)
def test_out_is_data_every_byte_copied(dtype: np.dtype) -> None:
    """Overlapping out gets whole elements, the bytes between record fields included."""
    rng = np.random.default_rng(11)
    raw = rng.integers(0, 256, 40 * dtype.itemsize, dtype=np.uint8)
    data = raw.view(dtype)
    void = data.view(f"V{dtype.itemsize}")
    idx = rng.permutation(40)
    expected = void[idx].tobytes()
    assert ndgather.gather(data, idx, out=data) is data
    assert data.tobytes() == expected
    # a 0-d out inside data
    data = rng.integers(0, 256, 3 * dtype.itemsize, dtype=np.uint8).view(dtype)
    expected = data[2:3].tobytes()
    out = data[0:1].reshape(())
    assert ndgather.gather_nd(data, [2], out=out) is out
    assert data[0:1].tobytes() == expected
