"""com.microsoft GatherBlockQuantized-1 (``ndgather.onnx.ms_gather_block_quantized_1``).

* A randomized differential test against onnxruntime's CPU provider: thousands of seeded cases
  over every code type (uint8 with bits 2, 4 and 8; int4, uint4; the four float8 types and
  float4e2m1), float32 and float16 scales, int32 and int64 indices, every legal
  gather_axis / quantize_axis pair (negative spellings too), block sizes 16 to 128 (and 0 for
  float codes), broadcast scales (float codes), zero points present or absent, negative and
  out-of-range indices. Results must be bit-identical. Many cases run as the nodes of one
  model, so the whole test takes a few seconds. Skipped without onnxruntime.
* The same cases, and bfloat16 scales (onnxruntime's CPU provider has no bfloat16 kernel),
  against an independent NumPy reference that dequantises the whole table and then gathers.
* onnxruntime's own tests of the operator, ported: onnxruntime/test/contrib_ops/
  gather_block_quantized_op_test.cc at commit 07729e4a33bcbc827aabd2c45affb6b8589e8335
  (microsoft/onnxruntime), with the kernel of onnxruntime/contrib_ops/cpu/quantization/
  gather_block_quantized.cc at 09e18a5a81a4f70fccfff40667d661cb35ffa6cc.
* The error cases: types (TypeError), attributes and shapes (ValueError naming the operator
  and the rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import ndgather  # noqa: E402
import ndgather.onnx as nx  # noqa: E402

OP = "com.microsoft GatherBlockQuantized-1"
FLOAT_CODES = [
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float4_e2m1fn",
]
CODE_TYPES = ["uint8-2", "uint8-4", "uint8-8", "int4", "uint4", *FLOAT_CODES]


@dataclass
class Case:
    data: np.ndarray[Any, Any]
    indices: np.ndarray[Any, Any]
    scales: np.ndarray[Any, Any]
    zero_points: np.ndarray[Any, Any] | None
    attrs: dict[str, int] = field(default_factory=dict)

    def run(self) -> np.ndarray[Any, Any]:
        return nx.ms_gather_block_quantized_1(
            self.data, self.indices, self.scales, self.zero_points, **self.attrs
        )


def bits_of(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a.view(f"u{a.dtype.itemsize}")


def assert_bit_equal(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], what: str) -> None:
    assert got.dtype == want.dtype, what
    assert got.shape == want.shape, what
    assert np.array_equal(bits_of(got), bits_of(want)), what


# ------------------------------------------------------------------ the NumPy reference


def unpack_codes(data: np.ndarray[Any, Any], bits: int) -> np.ndarray[Any, Any]:
    """uint8 bytes holding ``8 // bits`` codes each (low bits first, along the last axis) as
    one int32 code per element."""
    per = 8 // bits
    shifts = np.arange(per, dtype=np.uint8) * bits
    codes = (data[..., None] >> shifts) & ((1 << bits) - 1)
    return codes.reshape(*data.shape[:-1], data.shape[-1] * per).astype(np.int32)


def reference(case: Case) -> np.ndarray[Any, Any]:
    """Dequantise the whole table in float32, round to the scales' dtype, then gather (an
    index outside [-s, s) gives zeros). Independent of ndgather."""
    a = {"gather_axis": 0, "quantize_axis": 1, "block_size": 128, "bits": 4, **case.attrs}
    d, s, z = case.data, case.scales, case.zero_points
    name = d.dtype.name
    r = d.ndim
    g, q = a["gather_axis"] % r, a["quantize_axis"] % r
    if name in FLOAT_CODES:
        values = d.astype(np.float32)
    elif name == "uint8":
        values = unpack_codes(d, a["bits"])
    else:
        values = d.astype(np.int32)
    bs = a["block_size"] or max(values.shape[q], 1)
    full = list(values.shape)
    full[q] = -(-full[q] // bs)
    scale = np.broadcast_to(s, full).astype(np.float32).repeat(bs, axis=q)
    scale = np.take(scale, np.arange(values.shape[q]), axis=q)
    if name in FLOAT_CODES:
        table = values * scale
    else:
        if z is None:
            zp = np.full(full, 1 << (a["bits"] - 1) if name == "uint8" else 0, np.int32)
        elif name == "uint8":
            zp = unpack_codes(z, a["bits"])[..., : full[-1]]
        else:
            zp = z.astype(np.int32)
        zp = np.take(zp.repeat(bs, axis=q), np.arange(values.shape[q]), axis=q)
        table = (values - zp).astype(np.float32) * scale
    with np.errstate(over="ignore", invalid="ignore"):  # float16 overflows to inf, as intended
        table = table.astype(s.dtype)
    size = table.shape[g]
    idx = case.indices.astype(np.int64)
    ok = (idx >= -size) & (idx < size)
    picked = np.take(table, np.where(ok, idx, 0), axis=g)
    shape_ok = (1,) * g + ok.shape + (1,) * (r - g - 1)
    return np.where(ok.reshape(shape_ok), picked, np.zeros((), table.dtype)).astype(s.dtype)


# ------------------------------------------------------------------ random cases


def random_case(rng: np.random.Generator, code_type: str, scale_type: str) -> Case:
    is_float = code_type in FLOAT_CODES
    if code_type.startswith("uint8"):
        bits = int(code_type.split("-")[1])
        r = int(rng.integers(2, 5))
        g, q = 0, r - 1
    else:
        bits = 4
        r = int(rng.integers(2, 5))
        g, q = int(rng.integers(0, r)), int(rng.integers(0, r))
    bs = int(rng.choice([16, 32, 64, 128]))
    if is_float and rng.random() < 0.2:
        bs = 0
    shape = [int(rng.integers(1, 5)) for _ in range(r)]
    shape[q] = int(rng.integers(1, 3 * max(bs, 16) + 2))
    per = 8 // bits if code_type.startswith("uint8") else 1
    if per > 1:
        shape[q] = -(-shape[q] // per) * per
    n_logical = int(np.prod(shape))
    if is_float:
        dtype = getattr(ml_dtypes, code_type)
        codes = rng.integers(0, 16 if code_type == "float4_e2m1fn" else 256, n_logical)
        # No NaN codes: NaN payloads are not part of the contract.
        data = codes.astype(np.uint8).view(dtype).reshape(shape)
        data = np.where(np.isnan(data.astype(np.float32)), np.zeros((), dtype), data)
    elif code_type == "int4":
        data = rng.integers(-8, 8, shape).astype(ml_dtypes.int4)
    elif code_type == "uint4":
        data = rng.integers(0, 16, shape).astype(ml_dtypes.uint4)
    else:
        packed = [*shape[:-1], shape[-1] // per]
        data = rng.integers(0, 256, packed).astype(np.uint8)
    blocks = -(-shape[q] // (bs or max(shape[q], 1)))
    sshape = [blocks if a == q else n for a, n in enumerate(shape)]
    if is_float:
        sshape = [1 if a != q and rng.random() < 0.3 else n for a, n in enumerate(sshape)]
    stype = ml_dtypes.bfloat16 if scale_type == "bfloat16" else np.dtype(scale_type)
    scales = (rng.standard_normal(sshape) * 2.0 ** rng.integers(-8, 4, sshape)).astype(stype)
    zero_points = None
    if not is_float and rng.random() < 0.5:
        if code_type == "int4":
            zero_points = rng.integers(-8, 8, sshape).astype(ml_dtypes.int4)
        elif code_type == "uint4":
            zero_points = rng.integers(0, 16, sshape).astype(ml_dtypes.uint4)
        else:
            zshape = [*sshape[:-1], -(-sshape[-1] // per)]
            zero_points = rng.integers(0, 256, zshape).astype(np.uint8)
    size = shape[g]
    ishape = tuple(int(n) for n in rng.integers(1, 4, int(rng.integers(0, 3))))
    indices = rng.integers(-size, size, ishape)
    if rng.random() < 0.2 and indices.size:
        indices.flat[0] = rng.choice([size, -size - 1, 2**31 - 1])
    indices = indices.astype(rng.choice([np.int32, np.int64]))
    attrs = {
        "gather_axis": g - r if rng.random() < 0.3 else g,
        "quantize_axis": q - r if rng.random() < 0.3 else q,
        "block_size": bs,
        "bits": bits,
    }
    return Case(data, indices, scales, zero_points, attrs)


def cases(seed: int, n: int, scale_types: list[str]) -> list[Case]:
    rng = np.random.default_rng(seed)
    return [
        random_case(rng, CODE_TYPES[k % len(CODE_TYPES)], scale_types[k % len(scale_types)])
        for k in range(n)
    ]


# ------------------------------------------------------------------ onnxruntime


def ort_run_many(batch: list[Case]) -> list[np.ndarray[Any, Any]]:
    """Every case as one node of one model (inputs as initializers, optimisations off)."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, outputs = [], [], []
    for k, c in enumerate(batch):
        names = [f"d{k}", f"i{k}", f"s{k}"] + ([f"z{k}"] if c.zero_points is not None else [])
        arrays = [c.data, c.indices, c.scales] + (
            [c.zero_points] if c.zero_points is not None else []
        )
        inits += [
            numpy_helper.from_array(np.asarray(a), n) for n, a in zip(names, arrays, strict=True)
        ]
        nodes.append(
            helper.make_node(
                "GatherBlockQuantized", names, [f"o{k}"], domain="com.microsoft", **c.attrs
            )
        )
        elem = TensorProto.FLOAT if c.scales.dtype == np.float32 else TensorProto.FLOAT16
        outputs.append(helper.make_tensor_value_info(f"o{k}", elem, None))
    graph = helper.make_graph(nodes, "g", [], outputs, initializer=inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
    )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return list(session.run(None, {}))


@pytest.mark.parametrize("seed", range(6))
def test_differential_onnxruntime(seed: int) -> None:
    """500 cases a seed, 3,000 in all, bit-identical to onnxruntime (and so is the NumPy
    reference, which the bfloat16 test below relies on)."""
    batch = cases(seed, 500, ["float32", "float16"])
    for k, (case, want) in enumerate(zip(batch, ort_run_many(batch), strict=True)):
        assert_bit_equal(case.run(), want, f"seed {seed} case {k}: {case.attrs}")
        assert_bit_equal(reference(case), want, f"reference, seed {seed} case {k}")


@pytest.mark.parametrize("seed", range(3))
def test_against_numpy_reference(seed: int) -> None:
    """Every scale type, bfloat16 included, against the whole-table reference."""
    for k, case in enumerate(cases(100 + seed, 400, ["float32", "float16", "bfloat16"])):
        assert_bit_equal(case.run(), reference(case), f"seed {seed} case {k}: {case.attrs}")


def test_threads_give_the_same_bits() -> None:
    """A large call (split over threads; an output of 16 MiB and more, written around the
    cache) equals the same call on one thread, and the reference."""
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, (2000, 2048)).astype(np.uint8)
    scales = rng.standard_normal((2000, 128)).astype(np.float32)
    ids = rng.integers(-2000, 2000, 1100)
    want = reference(Case(data, ids, scales, None, {"block_size": 32}))
    ndgather.set_num_threads(1)
    one = nx.ms_gather_block_quantized_1(data, ids, scales, block_size=32)
    ndgather.set_num_threads(4)
    four = nx.ms_gather_block_quantized_1(data, ids, scales, block_size=32)
    assert_bit_equal(one, want, "one thread")
    assert_bit_equal(four, want, "four threads")


def test_special_scales_match_onnxruntime() -> None:
    """Infinite, NaN, zero, subnormal and overflowing scales: onnxruntime's bits, float16
    NaN as its 0x7e00 and float32 0 * inf as the CPU's default NaN."""
    special = np.array(
        [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, 3e38, 6e4, 1e-7, 65519.0], np.float32
    )
    data = np.arange(10 * 16, dtype=np.uint8).reshape(10, 16)
    batch = []
    for stype in (np.float32, np.float16):
        with np.errstate(over="ignore"):
            scales = special.astype(stype)[:, None]
        batch.append(Case(data, np.arange(-10, 10), scales, None, {"block_size": 32}))
    for case, want in zip(batch, ort_run_many(batch), strict=True):
        assert_bit_equal(case.run(), want, str(case.scales.dtype))


def test_zero_size_dimensions_match_onnxruntime() -> None:
    """An empty gather axis (every index out of range: zeros), no indices, an empty quantize
    axis (no blocks), and the indices' own shape kept."""
    i4 = ml_dtypes.int4
    batch = [
        Case(np.zeros((0, 16), np.uint8), np.array([0, -1]), np.ones((0, 1), np.float32), None),
        Case(np.zeros((3, 16), np.uint8), np.zeros(0, np.int64), np.ones((3, 1), np.float32), None),
        Case(np.zeros((3, 0), np.uint8), np.array([1]), np.ones((3, 0), np.float32), None),
        Case(np.zeros((3, 0, 4), i4), np.array([1]), np.ones((3, 0, 4), np.float32), None),
        Case(np.ones((3, 5), i4), np.array([[1, 2], [0, -3]]), np.ones((3, 1), np.float16), None),
    ]
    attrs = [
        {"block_size": 32},
        {"block_size": 32},
        {"block_size": 32},
        {"block_size": 16, "quantize_axis": 1},
        {"block_size": 16, "gather_axis": 1, "quantize_axis": 1},
    ]
    for case, a in zip(batch, attrs, strict=True):
        case.attrs = a
    for k, (case, want) in enumerate(zip(batch, ort_run_many(batch), strict=True)):
        assert_bit_equal(case.run(), want, f"case {k}")


# ------------------------------------------------------------------ onnxruntime's own tests
# The ported helpers mirror gather_block_quantized_op_test.cc: values are written unpacked
# (-8..7), uint8 data get the offset the file adds (8 for 4 bits, 128 for 8 bits) and are
# packed two per byte, and uint4 data get 8; zero points get the same treatment, so outputs
# are the same for every type.

DATA_2x3x4 = [-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, -4, -3, -2, -1]


def ported(
    t1: str,
    t2: Any,
    tind: Any,
    data: list[int],
    data_shape: list[int],
    indices: list[int],
    indices_shape: list[int],
    scales: list[float],
    scales_shape: list[int],
    zero_points: list[int],
    gather_axis: int,
    quantize_axis: int,
    block_size: int,
    bits: int,
) -> Case:
    def typed(values: list[int], shape: list[int]) -> np.ndarray[Any, Any]:
        v = np.array(values, np.int64).reshape(shape)
        if t1 == "int4":
            return v.astype(ml_dtypes.int4)
        if t1 == "uint4":
            return (v + 8).astype(ml_dtypes.uint4)
        if bits == 8:
            return (v + 128).astype(np.uint8)
        v = (v + 8) & 0xF
        if v.shape[-1] % 2:
            v = np.concatenate([v, np.zeros((*v.shape[:-1], 1), np.int64)], axis=-1)
        return (v[..., 0::2] | (v[..., 1::2] << 4)).astype(np.uint8)

    return Case(
        typed(data, data_shape),
        np.array(indices, tind).reshape(indices_shape),
        np.array(scales, np.float32).astype(t2).reshape(scales_shape),
        typed(zero_points, scales_shape) if zero_points else None,
        {
            "gather_axis": gather_axis,
            "quantize_axis": quantize_axis,
            "block_size": block_size,
            "bits": bits,
        },
    )


def expect(case: Case, output: list[float], shape: list[int]) -> None:
    want = np.array(output, np.float32).astype(case.scales.dtype).reshape(shape)
    assert_bit_equal(case.run(), want, str(case.attrs))


def fail(case: Case, error: type[Exception]) -> None:
    with pytest.raises(error, match=OP):
        case.run()


TYPES_4 = [
    (t1, t2, ti)
    for t1 in ("uint4", "int4")
    for t2 in (np.float32, np.float16)
    for ti in (np.int32, np.int64)
]


@pytest.mark.parametrize("t1, t2, tind", TYPES_4)
def test_ort_gather_axis0_with_zero_points(t1: str, t2: Any, tind: Any) -> None:
    data = [-8, -7, -6, -5] * 4 + [-8] + [-4, -3, -2, -1] * 4 + [-4]
    data += [0, 1, 2, 3] * 4 + [0] + [4, 5, 6, 7] * 4 + [4]
    data += [4, 5, 6, 7] * 4 + [4] + [-4, -3, -2, -1] * 4 + [-4]
    scales = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0, 2.0, 1.0]
    zps = [-1, 1, 0, 0, 1, -1, 1, -1, 1, 0, -1, 1]
    out = [6, 8, 10, 12] * 4 + [10] + [3, 4, 5, 6] * 4 + [4] + [-6, -4, -2, 0] * 4 + [-5]
    for g, q in ((0, 2), (-3, -1)):
        c = ported(t1, t2, tind, data, [2, 3, 17], [1], [1], scales, [2, 3, 2], zps, g, q, 16, 4)
        expect(c, out, [1, 3, 17])


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("t2, tind", [(np.float32, np.int32), (np.float16, np.int64)])
def test_ort_gather_axis0_with_zero_points_uint8(bits: int, t2: Any, tind: Any) -> None:
    rows = [[-8, -7, -6, -5], [-4, -3, -2, -1], [0, 1, 2, 3], [4, 5, 6, 7], [4, 5, 6, 7]]
    rows.append([-4, -3, -2, -1])
    data = [v for r in rows for v in r * 4 + [r[0], 0]]
    scales = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0, 2.0, 1.0]
    zps = [-1, 1, 0, 0, 1, -1, 1, -1, 1, 0, -1, 1]
    out = [6, 8, 10, 12] * 4 + [10, 2] + [3, 4, 5, 6] * 4 + [4, 0]
    out += [-6, -4, -2, 0] * 4 + [-5, -1]
    for g, q in ((0, 2), (-3, -1)):
        c = ported(
            "uint8", t2, tind, data, [2, 3, 18], [1], [1], scales, [2, 3, 2], zps, g, q, 16, bits
        )
        expect(c, out, [1, 3, 18])


@pytest.mark.parametrize(
    "t1, bits",
    [("int4", 4), ("uint8", 4), ("uint8", 8)],
)
@pytest.mark.parametrize("t2, tind", [(np.float32, np.int32), (np.float16, np.int64)])
def test_ort_gather_axis0_no_zero_points(t1: str, bits: int, t2: Any, tind: Any) -> None:
    scales = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]
    out = [8.0, 10.0, 12.0, 14.0, 4.0, 5.0, 6.0, 7.0, -8.0, -6.0, -4.0, -2.0]
    for g, q in ((0, 2), (-3, -1)):
        c = ported(
            t1, t2, tind, DATA_2x3x4, [2, 3, 4], [1], [1], scales, [2, 3, 1], [], g, q, 16, bits
        )
        expect(c, out, [1, 3, 4])


@pytest.mark.parametrize("t1, t2, tind", TYPES_4)
def test_ort_gather_axis1(t1: str, t2: Any, tind: Any) -> None:
    scales = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]
    zps = [-1, 1, 0, 0, 1, -1, 0, 0]
    out = [1, 0, 2, 6, -7, -16, -6, -10, 1, 0, 2, 6, -5, -4, -2, -2, 3, 12, 6, 14, -5, -4, -2, -2]
    for g, q in ((1, 1), (-2, -2)):
        c = ported(
            t1,
            t2,
            tind,
            DATA_2x3x4,
            [2, 3, 4],
            [2, -3, 2],
            [1, 3],
            scales,
            [2, 1, 4],
            zps,
            g,
            q,
            16,
            4,
        )
        expect(c, out, [2, 1, 3, 4])


@pytest.mark.parametrize("t1, t2, tind", TYPES_4)
def test_ort_gather_axis2(t1: str, t2: Any, tind: Any) -> None:
    scales = [1.0, 2.0, 1.0, 2.0] * 3
    zps = [-1, 1, 0, 0, 1, -1, 0, 0, 0, 0, 1, -1]
    out = [-6, -7, -2, -5, 1, 0, 6, 5, 6, 3, -3, -4]
    for g, q in ((2, 0), (-1, -3)):
        c = ported(
            t1,
            t2,
            tind,
            DATA_2x3x4,
            [2, 3, 4],
            [-2, 0],
            [2, 1],
            scales,
            [1, 3, 4],
            zps,
            g,
            q,
            16,
            4,
        )
        expect(c, out, [2, 3, 2, 1])


WITH_ZP = ([1.0, 2.0, 1.0, 2.0, 1.0, 2.0], [2, 3, 1], [-1, 1, 0, 0, 1, -1])


def failing(t1: str, gather_axis: int, quantize_axis: int, block_size: int, bits: int = 4) -> Case:
    scales, sshape, zps = WITH_ZP
    return ported(
        t1, np.float32, np.int32, DATA_2x3x4, [2, 3, 4], [1], [1], scales, sshape, zps,
        gather_axis, quantize_axis, block_size, bits,
    )  # fmt: skip


def test_ort_unsupported_types() -> None:
    case = failing("int4", 0, 2, 16)
    for dtype in (np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        bad = Case(case.data.astype(dtype), case.indices, case.scales, None, case.attrs)
        fail(bad, TypeError)
    for t1 in ("int4", "uint4", "uint8"):
        c = failing(t1, 0, 2, 16)
        fail(Case(c.data, c.indices.astype(np.int16), c.scales, None, c.attrs), TypeError)
    c = failing("int4", 0, 2, 16)
    fail(Case(c.data, c.indices, c.scales.astype(np.float64), None, c.attrs), TypeError)


def test_ort_unsupported_uint8_gather_axis() -> None:
    c = failing("uint8", 1, 2, 16)
    fail(Case(c.data, c.indices, c.scales, None, c.attrs), ValueError)


@pytest.mark.parametrize("t1, block_size", [("uint4", 8), ("int4", 17), ("uint8", 17)])
def test_ort_invalid_block_size(t1: str, block_size: int) -> None:
    fail(failing(t1, 0, 2, block_size), ValueError)


@pytest.mark.parametrize("t1, gather_axis", [("uint4", 3), ("int4", -4), ("uint8", -4)])
def test_ort_invalid_gather_axis(t1: str, gather_axis: int) -> None:
    fail(failing(t1, gather_axis, 2, 16), ValueError)


@pytest.mark.parametrize("t1, quantize_axis", [("uint4", 3), ("int4", -4), ("uint8", -4)])
def test_ort_invalid_quantize_axis(t1: str, quantize_axis: int) -> None:
    fail(failing(t1, 0, quantize_axis, 16), ValueError)


@pytest.mark.parametrize("bits", [1, 2, 3, 5, 6, 7])
def test_ort_not_supported_bits(bits: int) -> None:
    fail(failing("uint4", 0, 2, 16, bits), ValueError)


@pytest.mark.parametrize("t1", ["uint4", "int4", "uint8"])
def test_ort_shape_mismatch(t1: str) -> None:
    c = ported(
        t1, np.float32, np.int32, DATA_2x3x4, [2, 3, 4], [1], [1], [1.0, 2.0, 1.0, 2.0],
        [2, 2, 1], [-1, 1, 0, 0], 0, 2, 16, 4,
    )  # fmt: skip
    fail(c, ValueError)


@pytest.mark.parametrize("t1", ["uint4", "int4", "uint8"])
def test_ort_invalid_indices_give_zeros(t1: str) -> None:
    """onnxruntime's InvalidIndices test expects a failure, but only on its WebGPU provider;
    the schema and the CPU kernel give zeros for an index outside [-s, s) (docs/semantics.md)."""
    c = failing(t1, 0, 2, 16)
    c.indices = np.array([2], np.int32)
    expect(c, [0.0] * 12, [1, 3, 4])


# ------------------------------------------------------------------ error cases


def small(**attrs: int) -> Case:
    data = np.arange(4 * 16, dtype=np.uint8).reshape(4, 16)
    return Case(data, np.array([0]), np.ones((4, 1), np.float32), None, attrs)


@pytest.mark.parametrize(
    "change, rule",
    [
        ({"bits": 3}, "bits must be 2, 4 or 8"),
        ({"block_size": 0}, "block_size must be a power of 2 >= 16"),
        ({"block_size": 48}, "block_size must be a power of 2 >= 16"),
        ({"quantize_axis": 0}, "quantize_axis must be the last axis"),
        ({"gather_axis": 1}, "gather_axis must be 0"),
        ({"gather_axis": 2}, r"attribute gather_axis must be in \[-2, 1\], got 2"),
        ({"quantize_axis": -3}, r"attribute quantize_axis must be in \[-2, 1\], got -3"),
    ],
)
def test_attribute_errors(change: dict[str, int], rule: str) -> None:
    case = small(**{"block_size": 32, **change})
    with pytest.raises(ValueError, match=f"^{OP}: {rule}"):
        case.run()


@pytest.mark.parametrize("name", ["gather_axis", "quantize_axis", "block_size", "bits"])
@pytest.mark.parametrize("value", [2**63, 2**64, -(2**63) - 1])
def test_attributes_beyond_int64_are_value_errors(name: str, value: int) -> None:
    """ONNX attributes are int64: beyond it, a ValueError naming the operator, the attribute
    and the rule (once a bare OverflowError for block_size=2**64, a power of two), whatever
    the codes."""
    for case in [small(block_size=32), float_case(block_size=32)]:
        case.attrs[name] = value
        with pytest.raises(ValueError, match=f"^{OP}: attribute {name} must fit in a signed 64"):
            case.run()


def float_case(**attrs: int) -> Case:
    data = np.arange(4 * 32, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).reshape(4, 32)
    return Case(data, np.array([3, -4, 9]), np.full((4, 1), 0.5, np.float32), None, attrs)


@pytest.mark.parametrize("bits", [-4, 0, 3, 2**40, 2**63 - 1, -(2**63)])
def test_bits_is_ignored_for_float_codes(bits: int) -> None:
    """docs/api.md: with float codes `bits` is ignored, any int64 (once an OverflowError for
    bits=-4 or 2**40); onnxruntime accepts such a model and ignores it too."""
    want = float_case(block_size=32).run()
    case = float_case(block_size=32, bits=bits)
    assert_bit_equal(case.run(), want, f"bits={bits}")
    if bits in (-4, 2**40):
        assert_bit_equal(ort_run_many([case])[0], want, f"onnxruntime, bits={bits}")


def test_largest_int64_block_size_is_one_block() -> None:
    data = np.arange(4 * 16, dtype=np.uint8).reshape(4, 16)
    want = Case(data, np.array([2, 0]), np.full((4, 1), 2.0, np.float32), None, {"block_size": 32})
    huge = Case(want.data, want.indices, want.scales, None, {"block_size": 2**62})
    assert_bit_equal(huge.run(), want.run(), "block_size=2**62")


def test_shape_errors() -> None:
    data = np.zeros((4, 16), np.uint8)  # 32 codes a row: 2 blocks of 16
    ok = nx.ms_gather_block_quantized_1(data, [0], np.ones((4, 2), np.float32), block_size=16)
    assert ok.shape == (1, 32)
    with pytest.raises(ValueError, match=rf"^{OP}: scales must have shape \(4, 2\)"):
        nx.ms_gather_block_quantized_1(data, [0], np.ones((4, 1), np.float32), block_size=16)
    with pytest.raises(ValueError, match=f"^{OP}: scales must have data's rank 2"):
        nx.ms_gather_block_quantized_1(data, [0], np.ones(4, np.float32), block_size=16)
    with pytest.raises(ValueError, match=rf"^{OP}: zero_points must have shape \(4, 1\)"):
        nx.ms_gather_block_quantized_1(
            data, [0], np.ones((4, 2), np.float32), np.zeros((4, 2), np.uint8), block_size=16
        )
    with pytest.raises(ValueError, match=f"^{OP}: data must have rank >= 2"):
        nx.ms_gather_block_quantized_1(
            np.zeros(16, ml_dtypes.int4), [0], np.ones(1, np.float32), quantize_axis=0
        )
    with pytest.raises(ValueError, match=f"^{OP}: zero_points must not be given"):
        nx.ms_gather_block_quantized_1(
            np.zeros((2, 16), ml_dtypes.float8_e4m3fn),
            [0],
            np.ones((2, 1), np.float32),
            np.zeros((2, 1), ml_dtypes.float8_e4m3fn),
            block_size=16,
        )
    with pytest.raises(ValueError, match=f"^{OP}: bits must be 4 for int4 data"):
        nx.ms_gather_block_quantized_1(
            np.zeros((2, 16), ml_dtypes.int4), [0], np.ones((2, 1), np.float32), bits=8,
            block_size=16,
        )  # fmt: skip


def test_type_errors() -> None:
    data = np.zeros((4, 16), np.uint8)
    scales = np.ones((4, 1), np.float32)
    with pytest.raises(TypeError, match=f"^{OP}: zero_points must have data's dtype"):
        nx.ms_gather_block_quantized_1(data, [0], scales, np.zeros((4, 1), np.int8), block_size=32)
    with pytest.raises(TypeError, match=f"^{OP}: indices must be int32/int64"):
        nx.ms_gather_block_quantized_1(data, np.array([0], np.uint32), scales, block_size=32)
    with pytest.raises(TypeError, match=f"^{OP}: attribute block_size must be an integer"):
        nx.ms_gather_block_quantized_1(data, [0], scales, block_size=32.0)  # type: ignore[arg-type]


def test_out_of_range_and_negative_indices() -> None:
    """Negative indices count from the end; outside [-s, s) the slice is zeros, per the
    schema ("Unlike ONNX Gather, an out-of-range index produces zeros")."""
    data = np.array([[0x98, 0xBA], [0x10, 0x32]], dtype=np.uint8)
    scales = np.array([[0.5], [2.0]], np.float32)
    got = nx.ms_gather_block_quantized_1(data, np.array([[-1, 2], [-3, 1]]), scales, block_size=16)
    row0 = [0.0, 0.5, 1.0, 1.5]
    row1 = [-16.0, -14.0, -12.0, -10.0]
    zeros = [0.0] * 4
    assert got.tolist() == [[row1, zeros], [zeros, row1]]
    got = nx.ms_gather_block_quantized_1(data, np.int64(-2), scales, block_size=16)
    assert got.tolist() == row0


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_mode_raise_names_the_first_index_out_of_range(index_dtype: Any) -> None:
    """``mode="raise"``: a ``GatherIndexError`` (an ``IndexError``) with the same
    attributes and wording as every other gather's, behind the operator's name; in range,
    the same bits as the default mode."""
    data = np.array([[0x98, 0xBA], [0x10, 0x32], [0x76, 0x54]], dtype=np.uint8)
    scales = np.array([[0.5], [2.0], [1.0]], np.float32)
    ok = np.array([[-1, 2], [-3, 1]], dtype=index_dtype)
    same = nx.ms_gather_block_quantized_1(data, ok, scales, block_size=16, mode="raise")
    assert (
        same.tobytes() == nx.ms_gather_block_quantized_1(data, ok, scales, block_size=16).tobytes()
    )
    bad = np.array([[0, 2], [-4, 3]], dtype=index_dtype)
    with pytest.raises(ndgather.GatherIndexError) as e:
        nx.ms_gather_block_quantized_1(data, bad, scales, block_size=16, mode="raise")
    assert isinstance(e.value, IndexError)
    assert (e.value.value, e.value.position, e.value.axis, e.value.axis_size) == (-4, (1, 0), 0, 3)
    assert e.value.data_shape == (3, 2)
    assert str(e.value).startswith("com.microsoft GatherBlockQuantized-1: ")
    # The same wording as a plain gather's, after the operator's name.
    with pytest.raises(ndgather.GatherIndexError) as plain:
        ndgather.gather(np.zeros((3, 2)), bad)
    assert str(e.value).endswith(str(plain.value))
    with pytest.raises(ValueError, match="mode"):
        nx.ms_gather_block_quantized_1(data, ok, scales, block_size=16, mode="clip")  # type: ignore[arg-type]


def test_reference_evaluator() -> None:
    """The class in ndgather.onnx.reference_ops runs the node in onnx's ReferenceEvaluator."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node(
        "GatherBlockQuantized",
        ["d", "i", "s", "z"],
        ["o"],
        domain="com.microsoft",
        gather_axis=1,
        quantize_axis=0,
        block_size=16,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("d", TensorProto.INT4, None),
            helper.make_tensor_value_info("i", TensorProto.INT64, None),
            helper.make_tensor_value_info("s", TensorProto.FLOAT16, None),
            helper.make_tensor_value_info("z", TensorProto.INT4, None),
        ],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT16, None)],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
    )
    rng = np.random.default_rng(3)
    data = rng.integers(-8, 8, (20, 5)).astype(ml_dtypes.int4)
    scales = rng.standard_normal((2, 5)).astype(np.float16)
    zps = rng.integers(-8, 8, (2, 5)).astype(ml_dtypes.int4)
    idx = np.array([[4, -1], [0, 9]])
    session = ReferenceEvaluator(model, new_ops=nx.reference_ops)
    (got,) = session.run(None, {"d": data, "i": idx, "s": scales, "z": zps})
    case = Case(data, idx, scales, zps, {"gather_axis": 1, "quantize_axis": 0, "block_size": 16})
    assert_bit_equal(np.asarray(got), reference(case), "evaluator")


# ------------------------------------------------------------------ where onnxruntime departs


def test_divergence_no_bfloat16_kernel() -> None:
    """The schema allows bfloat16 scales (T2); the CPU provider has no kernel for them, so the
    session cannot be created. ndgather computes them as the float32 product rounded to
    bfloat16 (checked against the NumPy reference above)."""
    data = np.zeros((2, 16), np.uint8)
    case = Case(data, np.array([0]), np.ones((2, 1), ml_dtypes.bfloat16), None, {"block_size": 32})
    ort = pytest.importorskip("onnxruntime")
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.NotImplemented):
        ort_run_many_bf16(case)
    assert_bit_equal(case.run(), reference(case), "bfloat16")


def ort_run_many_bf16(case: Case) -> Any:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    inits = [
        numpy_helper.from_array(np.asarray(a), n)
        for n, a in zip("dis", [case.data, case.indices, case.scales], strict=True)
    ]
    node = helper.make_node(
        "GatherBlockQuantized", list("dis"), ["o"], domain="com.microsoft", **case.attrs
    )
    out = helper.make_tensor_value_info("o", TensorProto.BFLOAT16, None)
    graph = helper.make_graph([node], "g", [], [out], initializer=inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
    )
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_divergence_rank_1_refused() -> None:
    """The schema's text says data has "rank r >= 1", but its shape inference refuses rank 1
    ("data tensor must have rank > 1"), so no model with it loads; ndgather refuses it too."""
    case = Case(
        np.zeros(32, ml_dtypes.int4),
        np.array([0]),
        np.ones(1, np.float32),
        None,
        {"quantize_axis": 0, "block_size": 32},
    )
    pytest.importorskip("onnxruntime")
    with pytest.raises(Exception, match="rank > 1"):
        ort_run_many([case])
    with pytest.raises(ValueError, match=f"^{OP}: data must have rank >= 2"):
        case.run()


def test_another_python_thread_runs_while_it_dequantises() -> None:
    """The GIL is released while a large call runs: a pure-Python thread makes progress in
    the middle half of the call (as tests/service/test_threads.py checks for the gathers)."""
    import threading
    import time

    ndgather.set_num_threads(1)  # leave the second core to the Python thread
    rng = np.random.default_rng(5)
    # int4 quantised along axis 0, gathered along axis 1: a scale and zero point per element.
    data = rng.integers(-8, 8, (64, 4096)).astype(ml_dtypes.int4)
    scales = rng.standard_normal((4, 4096)).astype(np.float16)
    zps = rng.integers(-8, 8, (4, 4096)).astype(ml_dtypes.int4)
    n = 100_000
    while True:
        ids = rng.integers(0, 4096, n)

        def run(ids: np.ndarray[Any, Any] = ids) -> None:
            nx.ms_gather_block_quantized_1(
                data, ids, scales, zps, gather_axis=1, quantize_axis=0, block_size=16
            )

        run()
        stamps: list[float] = []
        done = threading.Event()

        def watch(stamps: list[float] = stamps, done: threading.Event = done) -> None:
            while not done.is_set():
                stamps.append(time.perf_counter())
                time.sleep(0)  # offer the GIL back; a held GIL keeps this thread out

        watcher = threading.Thread(target=watch)
        watcher.start()
        while not stamps:
            time.sleep(0.001)
        start = time.perf_counter()
        run()
        end = time.perf_counter()
        done.set()
        watcher.join()
        if end - start >= 0.1 or n >= 800_000:  # at most 400 MB of float16
            break
        n *= 2
    quarter = (end - start) / 4
    middle = [s for s in stamps if start + quarter < s < end - quarter]
    assert middle, f"no Python thread ran during the middle of a {end - start:.3f} s call"
