"""Every example printed in the operators' specifications, through each wrapper its version fits,
and through the runtimes when they are installed (ONNX examples on onnxruntime, OpenVINO
examples on the OpenVINO CPU plugin).

The transcriptions of the examples live in ``reference.py`` (shared with the kernel tests);
the three BNNSGatherND examples are in ``test_bnns.py``.
"""

from __future__ import annotations

import math

import ndgather.onnx as nx
import ndgather.openvino as nov
import numpy as np
import pytest
from reference import (
    ONNX_GATHERND_EXAMPLES,
    OPENVINO_GATHER7_EXAMPLES,
    OPENVINO_GATHER7_XML,
    OPENVINO_GATHERND8_EXAMPLES,
    OPENVINO_GATHERND8_XML,
    assert_same,
    gather_nd_loop,
    gather_take,
)

ONNX_IDS = [e[0] for e in ONNX_GATHERND_EXAMPLES]
OV_ND_IDS = [e[0] for e in OPENVINO_GATHERND8_EXAMPLES]
OV_G_IDS = [e[0] for e in OPENVINO_GATHER7_EXAMPLES]

# Gather-1's printed examples in the ONNX operator documentation (Gather-11/13 repeat them).
ONNX_GATHER_EXAMPLES = [
    (
        "onnx-gather-1",
        [[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]],
        [[0, 1], [1, 2]],
        0,
        [[[1.0, 1.2], [2.3, 3.4]], [[2.3, 3.4], [4.5, 5.7]]],
    ),
    (
        "onnx-gather-2",
        [[1.0, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]],
        [[0, 2]],
        1,
        [[[1.0, 1.9]], [[2.3, 3.9]], [[4.5, 5.9]]],
    ),
]


def flat_batch(shape: tuple[int, ...], indices_shape: tuple[int, ...], b: int) -> tuple[int, ...]:
    """GatherND-5's shape: the b batch dimensions flattened into one (b >= 1)."""
    if b == 0:
        return shape
    return (math.prod(indices_shape[:b]),) + shape[b:]


# --------------------------------------------------------------------------- ONNX GatherND


@pytest.mark.parametrize("name,data,indices,b,expected,shape", ONNX_GATHERND_EXAMPLES, ids=ONNX_IDS)
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_onnx_gather_nd_examples(name, data, indices, b, expected, shape, dtype) -> None:
    d = np.array(data, dtype=dtype)
    i = np.array(indices, dtype=np.int64)
    want = np.array(expected, dtype=dtype)
    assert want.shape == shape
    assert_same(nx.gather_nd_12(d, i, b), want)
    assert_same(nx.gather_nd_13(d, i, batch_dims=b), want)
    assert_same(nx.gather_nd(d, i, b, opset=12), want)
    if b == 0:  # examples 1-4 are GatherND-11's and com.microsoft GatherND-1's too
        assert_same(nx.gather_nd_11(d, i), want)
        assert_same(nx.gather_nd(d, i, opset=11), want)
        assert_same(nx.ms_gather_nd_1(d, i), want)
        assert_same(nx.ms_gather_nd_1(d, i.astype(np.int32)), want)


def test_onnx_code_examples() -> None:
    """The ``_int32``, ``_float32`` and ``_int32_batchdim_1`` code examples of the ONNX page
    (and of the com.microsoft page, whose third one uses an attribute that operator lacks)."""
    d = np.array([[0, 1], [2, 3]], dtype=np.int32)
    i = np.array([[0, 0], [1, 1]], dtype=np.int64)
    for fn in (nx.gather_nd_11, nx.gather_nd_12, nx.gather_nd_13, nx.ms_gather_nd_1):
        assert_same(fn(d, i), np.array([0, 3], dtype=np.int32))
    d = np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], dtype=np.float32)
    i = np.array([[[0, 1]], [[1, 0]]], dtype=np.int64)
    for fn in (nx.gather_nd_11, nx.gather_nd_12, nx.gather_nd_13, nx.ms_gather_nd_1):
        assert_same(fn(d, i), np.array([[[2, 3]], [[4, 5]]], dtype=np.float32))
    d = np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], dtype=np.int32)
    i = np.array([[1], [0]], dtype=np.int64)
    for fn in (nx.gather_nd_12, nx.gather_nd_13):
        assert_same(fn(d, i, batch_dims=1), np.array([[2, 3], [4, 5]], dtype=np.int32))
    with pytest.raises(TypeError):  # com.microsoft GatherND-1 has no batch_dims
        nx.ms_gather_nd_1(d, i, batch_dims=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("name,data,indices,axis,expected", ONNX_GATHER_EXAMPLES)
def test_onnx_gather_examples(name, data, indices, axis, expected) -> None:
    for dtype in ("float32", "float64"):
        d = np.array(data, dtype=dtype)
        want = np.array(expected, dtype=dtype)
        for itype in ("int32", "int64"):
            i = np.array(indices, dtype=itype)
            for fn in (nx.gather_1, nx.gather_11, nx.gather_13):
                assert_same(fn(d, i, axis), want)
                assert_same(fn(d, i, axis - d.ndim), want)


# --------------------------------------------------------------------------- OpenVINO


@pytest.mark.parametrize(
    "name,data,indices,b,expected,shape", OPENVINO_GATHERND8_EXAMPLES, ids=OV_ND_IDS
)
@pytest.mark.parametrize("itype", ["int32", "int64", "int8", "uint16"])
def test_openvino_gather_nd_examples(name, data, indices, b, expected, shape, itype) -> None:
    d = np.array(data, dtype=np.int32)
    i = np.array(indices, dtype=itype)
    want = np.array(expected, dtype=np.int32)
    assert want.shape == shape
    assert_same(nov.gather_nd_8(d, i, b), want)
    got5 = nov.gather_nd_5(d, i, b)
    assert got5.shape == flat_batch(shape, i.shape, b)
    assert_same(got5, want.reshape(got5.shape))


@pytest.mark.parametrize("dshape,ishape,b,oshape", OPENVINO_GATHERND8_XML)
def test_openvino_gather_nd_xml_examples(dshape, ishape, b, oshape) -> None:
    data = aliased_data(dshape)
    rng = np.random.default_rng(5)
    k = ishape[-1]
    idx = np.stack(
        [rng.integers(0, dshape[b + j], size=ishape[:-1]) for j in range(k)], axis=-1
    ).astype(np.int32)
    got = nov.gather_nd_8(data, idx, b)
    assert got.shape == oshape
    assert_same(
        got, gather_nd_loop(data, idx, b) if got.size < 100_000 else oracle_nd(data, idx, b)
    )
    got5 = nov.gather_nd_5(data, idx, b)
    assert got5.shape == flat_batch(oshape, ishape, b)
    assert_same(got5, got.reshape(got5.shape))


@pytest.mark.parametrize(
    "name,data,indices,axis,b,expected,shape", OPENVINO_GATHER7_EXAMPLES, ids=OV_G_IDS
)
@pytest.mark.parametrize("itype", ["int32", "int64", "uint8"])
def test_openvino_gather_examples(name, data, indices, axis, b, expected, shape, itype) -> None:
    d = np.array(data, dtype=np.float32)
    i = np.array(indices, dtype=itype)
    want = np.array(expected, dtype=np.float32)
    assert want.shape == shape
    assert_same(nov.gather_7(d, i, axis, b), want)
    assert_same(nov.gather_7(d, i, axis - d.ndim, batch_dims=b), want)
    assert_same(nov.gather_8(d, i, axis, b), want)
    if b == 0:
        assert_same(nov.gather_1(d, i, axis), want)


def test_openvino_gather_xml_example() -> None:
    dshape, ishape, axis, b, oshape = OPENVINO_GATHER7_XML
    rng = np.random.default_rng(6)
    data = rng.standard_normal(dshape).astype(np.float32)
    idx = rng.integers(0, dshape[axis], size=ishape).astype(np.int32)
    for fn in (nov.gather_7, nov.gather_8):
        got = fn(data, idx, axis, b)
        assert got.shape == oshape
        assert_same(got, gather_take(data, idx, axis, b))


# --------------------------------------------------------------------------- helpers


def aliased_data(shape: tuple[int, ...]) -> np.ndarray:
    """A large int32 array of ``shape`` as a strided view of a small buffer (strides chosen
    so most index tuples still address different values)."""
    steps = [7, 3, 15, 1][-len(shape) :] if len(shape) <= 4 else [1] * len(shape)
    size = sum((n - 1) * s for n, s in zip(shape, steps, strict=True)) + 1
    buf = np.arange(size, dtype=np.int32)
    return np.lib.stride_tricks.as_strided(
        buf, shape=shape, strides=[s * 4 for s in steps], writeable=False
    )


def oracle_nd(data: np.ndarray, idx: np.ndarray, b: int) -> np.ndarray:
    """GatherND by NumPy fancy indexing (for the outputs too big for the loop oracle)."""
    nb = math.prod(idx.shape[:b])
    flat_i = idx.reshape((nb, -1, idx.shape[-1]))
    flat_d = data.reshape((nb,) + data.shape[b:]) if b else data[np.newaxis]
    rows = np.arange(nb)[:, None]
    out = flat_d[(rows, *[flat_i[..., j] for j in range(idx.shape[-1])])]
    return np.ascontiguousarray(out).reshape(idx.shape[:-1] + data.shape[b + idx.shape[-1] :])


# --------------------------------------------------------------------------- on the runtimes


@pytest.mark.parametrize("name,data,indices,b,expected,shape", ONNX_GATHERND_EXAMPLES, ids=ONNX_IDS)
def test_onnx_examples_on_onnxruntime(name, data, indices, b, expected, shape) -> None:
    pytest.importorskip("onnxruntime")
    from runtimes import ONNX_OPS, run_onnxruntime

    d = np.array(data, dtype=np.float32)
    i = np.array(indices, dtype=np.int64)
    want = np.array(expected, dtype=np.float32)
    versions = ["GatherND-12", "GatherND-13"] + (["GatherND-11", "ms.GatherND-1"] if b == 0 else [])
    for v in versions:
        attrs = {"batch_dims": b} if b else {}
        assert_same(run_onnxruntime(ONNX_OPS[v], d, i, **attrs), want)


@pytest.mark.parametrize("name,data,indices,axis,expected", ONNX_GATHER_EXAMPLES)
def test_onnx_gather_examples_on_onnxruntime(name, data, indices, axis, expected) -> None:
    pytest.importorskip("onnxruntime")
    from runtimes import ONNX_OPS, run_onnxruntime

    d = np.array(data, dtype=np.float32)
    for v in ("Gather-1", "Gather-11", "Gather-13"):
        got = run_onnxruntime(ONNX_OPS[v], d, np.array(indices, dtype=np.int32), axis=axis)
        assert_same(got, np.array(expected, dtype=np.float32))


@pytest.mark.parametrize(
    "name,data,indices,b,expected,shape", OPENVINO_GATHERND8_EXAMPLES, ids=OV_ND_IDS
)
@pytest.mark.openvino_runtime
def test_openvino_gather_nd_examples_on_openvino(name, data, indices, b, expected, shape) -> None:
    pytest.importorskip("openvino")
    from runtimes import run_openvino

    d = np.array(data, dtype=np.int32)
    i = np.array(indices, dtype=np.int32)
    want = np.array(expected, dtype=np.int32)
    assert_same(run_openvino("GatherND-8", d, i, batch_dims=b), want)
    got5 = run_openvino("GatherND-5", d, i, batch_dims=b)
    assert_same(got5, want.reshape(flat_batch(shape, i.shape, b)))
    assert_same(nov.gather_nd_5(d, i, b), got5)


@pytest.mark.parametrize("dshape,ishape,b,oshape", OPENVINO_GATHERND8_XML)
@pytest.mark.openvino_runtime
def test_openvino_gather_nd_xml_examples_on_openvino(dshape, ishape, b, oshape) -> None:
    pytest.importorskip("openvino")
    from runtimes import run_openvino

    data = np.ascontiguousarray(aliased_data(dshape).astype(np.uint8))
    rng = np.random.default_rng(7)
    idx = np.stack(
        [rng.integers(0, dshape[b + j], size=ishape[:-1]) for j in range(ishape[-1])], axis=-1
    ).astype(np.int32)
    for name, fn in (("GatherND-8", nov.gather_nd_8), ("GatherND-5", nov.gather_nd_5)):
        ov = run_openvino(name, data, idx, batch_dims=b)
        assert ov.shape == (oshape if name == "GatherND-8" else flat_batch(oshape, ishape, b))
        assert_same(fn(data, idx, b), ov)


@pytest.mark.parametrize(
    "name,data,indices,axis,b,expected,shape", OPENVINO_GATHER7_EXAMPLES, ids=OV_G_IDS
)
@pytest.mark.openvino_runtime
def test_openvino_gather_examples_on_openvino(
    name, data, indices, axis, b, expected, shape
) -> None:
    pytest.importorskip("openvino")
    from runtimes import run_openvino

    d = np.array(data, dtype=np.float32)
    i = np.array(indices, dtype=np.int32)
    want = np.array(expected, dtype=np.float32)
    for op in ("Gather-7", "Gather-8") + (("Gather-1",) if b == 0 else ()):
        assert_same(run_openvino(op, d, i, axis=axis, batch_dims=b), want)


@pytest.mark.openvino_runtime
def test_openvino_gather_xml_example_on_openvino() -> None:
    pytest.importorskip("openvino")
    from runtimes import run_openvino

    dshape, ishape, axis, b, oshape = OPENVINO_GATHER7_XML
    rng = np.random.default_rng(8)
    data = rng.standard_normal(dshape).astype(np.float32)
    idx = rng.integers(0, dshape[axis], size=ishape).astype(np.int32)
    for op, fn in (("Gather-7", nov.gather_7), ("Gather-8", nov.gather_8)):
        ov = run_openvino(op, data, idx, axis=axis, batch_dims=b)
        assert ov.shape == oshape
        assert_same(fn(data, idx, axis, b), ov)
