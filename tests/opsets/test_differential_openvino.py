"""ndgather.openvino against the OpenVINO CPU plugin on seeded random inputs: same shape,
dtype and bytes (strings: same values).

Covered: GatherND-5, GatherND-8, Gather-1, Gather-7, Gather-8; every element type the plugin
runs that has a NumPy dtype (bf16 and f8 through ``ml_dtypes``; strings for Gather); int32
and int64 indices, and the other integer index types; batch_dims 0..3; negative indices
where the version allows them; negative ``axis``/``batch_dims``; zero-size dimensions for
GatherND; Gather-8's zero fill.

Where the CPU plugin departs from the OpenVINO specification, ndgather follows the
specification; each such place is an ``xfail(strict=True)`` parametrization or a
``test_divergence_*`` test that asserts what the plugin really does, and a row in
docs/semantics.md. The plugin is never given inputs on which it reads out of bounds
(out-of-range GatherND indices, out-of-range indices into 1-D Gather data) or crashes
(zero-size Gather inputs) in this process; the crashes are shown in subprocesses.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino_runtime

import ndgather.openvino as nov  # noqa: E402
from reference import gather_nd_loop  # noqa: E402
from runtimes import ov_compiled, ov_compiled_for, run_openvino  # noqa: E402
from wrapper_cases import (  # noqa: E402
    EIGHT_BYTE,
    OV_NUMERIC,
    Case,
    assert_same_values,
    dtype_of,
    random_data,
    random_gather_case,
    random_gather_nd_case,
    random_strings,
    seed_of,
)

CASES_PER_TEST = 4


@pytest.fixture(scope="module", autouse=True)
def _free_compiled_models() -> Iterator[None]:
    """Release the compiled models when the module is done."""
    yield
    ov_compiled.cache_clear()


NARROWING = (
    "the OpenVINO CPU plugin computes 8-byte element types in 4 bytes "
    "(i64/u64 keep the low 32 bits, sign-extended; f64 goes through f32)"
)

ND = {"GatherND-5": nov.gather_nd_5, "GatherND-8": nov.gather_nd_8}
G = {
    "Gather-1": lambda d, i, a, b: nov.gather_1(d, i, a),
    "Gather-7": nov.gather_7,
    "Gather-8": nov.gather_8,
}


def params(versions: list[str], dtypes: list[str], itypes: list[str]) -> list[object]:
    out = []
    for v in versions:
        for d in dtypes:
            for i in itypes:
                marks = (
                    [pytest.mark.xfail(strict=True, reason=NARROWING)] if d in EIGHT_BYTE else []
                )
                out.append(pytest.param(v, d, i, marks=marks, id=f"{v}-{d}-{i}"))
    return out


def compare(got: np.ndarray, runtime: np.ndarray, context: str) -> None:
    if got.dtype.kind in "OU":
        # the plugin hands strings back as a fixed-width ``U`` array of its own width
        assert got.shape == runtime.shape, f"{context}: shape {got.shape} != {runtime.shape}"
        assert got.tolist() == runtime.tolist(), f"{context}: {got!r} != {runtime!r}"
        return
    assert_same_values(got, runtime, context)


def static_plugin_crashes(version: str, case: Case) -> str:
    """Valid inputs on which the plugin's static-shape path kills the process (see the
    test_divergence_gather_static_* tests); "" when it is safe."""
    if version.startswith("GatherND"):
        return ""
    r, q = case.data.ndim, case.indices.ndim
    a = case.axis % r
    b = case.batch_dims + q if case.batch_dims < 0 else case.batch_dims
    if case.data.size == 0 or case.indices.size == 0:
        return "zero-size input"
    if b >= 1 and math.prod(case.data.shape[:a]) == 1:
        return "batch dimensions and the dimensions up to axis all 1"
    return ""


def check_against_plugin(version: str, case: Case) -> int:
    """The wrapper's result equals the plugin's, compiled for the case's static shapes, or
    for dynamic shapes where the static path would crash (see static_plugin_crashes).
    Returns 1 for a static run. (test_dynamic_shapes runs many shapes through one model.)"""
    if version in ND:
        got = ND[version](case.data, case.indices, case.batch_dims)
    else:
        got = G[version](case.data, case.indices, case.axis, case.batch_dims)
    dynamic = bool(static_plugin_crashes(version, case))
    runtime = run_openvino(
        version,
        case.data,
        case.indices,
        axis=case.axis,
        batch_dims=case.batch_dims,
        dynamic=dynamic,
    )
    compare(got, runtime, f"{version} {case!r} dynamic={dynamic}")
    return int(not dynamic)


# --------------------------------------------------------------------------- random cases


@pytest.mark.parametrize("version,dtype,itype", params(list(ND), OV_NUMERIC, ["int32", "int64"]))
def test_gather_nd(version: str, dtype: str, itype: str) -> None:
    rng = np.random.default_rng(seed_of("ov", version, dtype, itype))
    for n in range(CASES_PER_TEST):
        case = random_gather_nd_case(
            rng, dtype_of(dtype), itype, batch_dims=n % 4, zero_size=n % 3 == 2
        )
        check_against_plugin(version, case)


@pytest.mark.parametrize(
    "version,dtype,itype", params(list(G), OV_NUMERIC + ["string"], ["int32", "int64"])
)
def test_gather(version: str, dtype: str, itype: str) -> None:
    rng = np.random.default_rng(seed_of("ov", version, dtype, itype))
    static_runs = 0
    for n in range(CASES_PER_TEST):
        case = random_gather_case(
            rng,
            dtype_of(dtype),
            itype,
            batch_dims=0 if version == "Gather-1" else n % 4,
            negative=version == "Gather-8",
            zero_size=n % 3 == 2,
        )
        static_runs += check_against_plugin(version, case)
    assert static_runs >= 2


@pytest.mark.parametrize("version", list(ND) + list(G))
@pytest.mark.parametrize("itype", ["int8", "int16", "uint8", "uint16", "uint32", "uint64"])
def test_other_index_types(version: str, itype: str) -> None:
    rng = np.random.default_rng(seed_of("ov-itype", version, itype))
    negative = itype.startswith("int") and version in ("GatherND-5", "GatherND-8", "Gather-8")
    for n in range(3):
        if version in ND:
            case = random_gather_nd_case(rng, np.float32, itype, batch_dims=n, negative=negative)
        else:
            b = 0 if version == "Gather-1" else n
            case = random_gather_case(rng, np.float32, itype, batch_dims=b, negative=negative)
        check_against_plugin(version, case)


def draw_case(rng: np.random.Generator, version: str, dtype: str, zero_size: bool) -> Case:
    """A random case of fixed ranks and attributes (so one dynamic model serves them all):
    GatherND data rank 3, indices (n, m, 1), batch_dims 1; Gather data rank 3, indices
    rank 2, axis 2, batch_dims 1 (0 for Gather-1)."""
    while True:
        if version in ND:
            case = random_gather_nd_case(
                rng, dtype_of(dtype), "int32", batch_dims=1, zero_size=zero_size
            )
            if case.data.ndim == 3 and case.indices.shape[-1] == 1 and case.indices.ndim == 3:
                return case
        else:
            case = random_gather_case(
                rng,
                dtype_of(dtype),
                "int32",
                batch_dims=0 if version == "Gather-1" else 1,
                negative=version == "Gather-8",
                zero_size=zero_size,
                negative_attrs=False,
            )
            if case.data.ndim == 3 and case.indices.ndim == 2 and case.axis == 2:
                return case


@pytest.mark.parametrize(
    "version,dtype",
    [
        (v, d)
        for v in list(ND) + list(G)
        for d in ["int8", "float16", "float32", "bfloat16", "string"]
        if not (d == "string" and v in ND)  # no GatherND for strings in the plugin
    ],
)
def test_dynamic_shapes(version: str, dtype: str) -> None:
    """One model compiled for dynamic shapes (static ranks) runs many shapes, zero-size ones
    included, and agrees with the wrapper on each."""
    rng = np.random.default_rng(seed_of("ov-dyn", version, dtype))
    for n in range(12):
        case = draw_case(rng, version, dtype, zero_size=n % 4 == 3)
        if version in ND:
            got = ND[version](case.data, case.indices, case.batch_dims)
        else:
            got = G[version](case.data, case.indices, case.axis, case.batch_dims)
        runtime = run_openvino(
            version,
            case.data,
            case.indices,
            axis=case.axis,
            batch_dims=case.batch_dims,
            dynamic=True,
        )
        compare(got, runtime, f"{version} {case!r} dynamic")


@pytest.mark.parametrize("dtype", [d for d in OV_NUMERIC if d not in EIGHT_BYTE] + ["string"])
def test_gather_8_zero_fills_out_of_range(dtype: str) -> None:
    """Gather-8 defines an index outside [-s, s) to give zeros (2-D and higher data: the
    plugin's 1-D path reads out of bounds, see test_divergence_gather_8_1d_out_of_range)."""
    rng = np.random.default_rng(seed_of("ov-oob", dtype))
    for n in range(CASES_PER_TEST):
        case = random_gather_case(rng, dtype_of(dtype), "int32", batch_dims=n % 3)
        if case.data.ndim < 2:
            continue
        s = case.data.shape[case.axis % case.data.ndim]
        bad = rng.integers(0, 2, size=case.indices.shape).astype(bool)
        far = rng.choice(
            np.array([s, s + 1, -s - 1, 1000, -1000, 2**31 - 1, -(2**31)]), case.indices.shape
        )
        idx = np.where(bad, far, case.indices).astype(np.int32)
        data = case.data.astype(str) if dtype == "string" else case.data  # U: its zero is ""
        check_against_plugin("Gather-8", Case(data, idx, case.batch_dims, case.axis))


def test_gather_8_zero_fill_of_object_strings() -> None:
    """With ``object`` strings (ONNX's tensor(string) form) the zero of an out-of-range slot
    must still be what the runtime gives: the empty string."""
    data = random_strings(np.random.default_rng(3), (3, 4))
    idx = np.array([[0, 5, -1, -9]], dtype=np.int32)
    runtime = run_openvino("Gather-8", data, idx, axis=1)
    got = nov.gather_8(data, idx, 1)
    assert got.tolist() == runtime.tolist(), f"{got!r} != {runtime!r}"


def test_eight_byte_types_agree_when_values_fit_in_32_bits() -> None:
    """Where the narrowing changes nothing, 8-byte data go through the plugin intact."""
    rng = np.random.default_rng(11)
    for dtype in EIGHT_BYTE:
        for version in ("GatherND-5", "GatherND-8", "Gather-1", "Gather-7", "Gather-8"):
            for n in range(3):
                if version in ND:
                    case = random_gather_nd_case(rng, np.int16, "int32", batch_dims=n)
                else:
                    b = 0 if version == "Gather-1" else n
                    case = random_gather_case(
                        rng, np.int16, "int32", batch_dims=b, negative=version == "Gather-8"
                    )
                base = case.data.astype(np.int32)  # exact in int32 and in float32
                case.data = (np.abs(base) if dtype == "uint64" else base).astype(dtype)
                check_against_plugin(version, case)


# --------------------------------------------------------------------------- divergences


def narrowed(values: np.ndarray) -> np.ndarray:
    """What the plugin makes of 8-byte values: i64/u64 -> low 32 bits, sign-extended;
    f64 -> nearest f32 (finite values in f32 range; see the test for the rest)."""
    if values.dtype.kind in "iu":
        return values.astype(np.int32).astype(np.int64).astype(values.dtype)
    return values.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("dtype", EIGHT_BYTE)
@pytest.mark.parametrize(
    "version", ["GatherND-5", "GatherND-8", "Gather-1", "Gather-7", "Gather-8"]
)
def test_divergence_eight_byte_types_are_narrowed(version: str, dtype: str) -> None:
    rng = np.random.default_rng(seed_of("narrow", version, dtype))
    data = random_data(rng, (6, 5), np.dtype(dtype))
    if dtype == "float64":  # finite values inside float32's range
        data = rng.standard_normal((6, 5)) * 10.0 ** rng.integers(-30, 30, size=(6, 5))
    idx = np.array([4, 0, 5, 1], dtype=np.int32)
    if version in ND:
        got = ND[version](data, idx[:, None])
        runtime = run_openvino(version, data, idx[:, None])
    else:
        got = G[version](data, idx, 0, 0)
        runtime = run_openvino(version, data, idx, axis=0)
    assert_same_values(got, data[idx], "ndgather follows the spec")
    assert got.tobytes() != runtime.tobytes()
    assert_same_values(runtime, narrowed(data[idx]), "what the plugin does")


def test_divergence_float64_specials() -> None:
    """f64 through f32: infinities become +-FLT_MAX, subnormals 0, NaN payloads are lost."""
    bits = [0x7FF0000000000000, 0xFFF0000000000000, 0x0000000000000001, 0x7FF8000000000001]
    data = np.array(bits, dtype=np.uint64).view(np.float64)
    runtime = run_openvino("Gather-8", data.reshape(4, 1), np.array([0, 1, 2, 3]), axis=0)
    assert runtime.ravel().view(np.uint64).tolist() == [
        0x47EFFFFFE0000000,  # float32 max
        0xC7EFFFFFE0000000,
        0,
        0x7FF8000000000000,
    ]
    got = nov.gather_8(data.reshape(4, 1), np.array([0, 1, 2, 3]), 0)
    assert got.ravel().view(np.uint64).tolist() == bits


@pytest.mark.parametrize("version", ["GatherND-8", "Gather-8"])
def test_divergence_float16_signalling_nans_are_quieted(version: str) -> None:
    bits = [0x7C01, 0x7D55, 0xFC01, 0x7E01, 0x0001, 0x8000, 0x7C00, 0x3C00]
    data = np.array(bits, dtype=np.uint16).view(np.float16).reshape(8, 1)
    idx = np.arange(8, dtype=np.int32)
    if version == "GatherND-8":
        runtime = run_openvino(version, data, idx[:, None])
        got = nov.gather_nd_8(data, idx[:, None])
    else:
        runtime = run_openvino(version, data, idx, axis=0)
        got = nov.gather_8(data, idx, 0)
    assert got.view(np.uint16).ravel().tolist() == bits
    quieted = [0x7E01, 0x7F55, 0xFE01, 0x7E01, 0x0001, 0x8000, 0x7C00, 0x3C00]
    assert runtime.view(np.uint16).ravel().tolist() == quieted


@pytest.mark.parametrize("version", ["Gather-1", "Gather-7"])
def test_divergence_gather_1_7_negative_and_out_of_range_give_zeros(version: str) -> None:
    """Gather-1/7 take indices in [0, s-1]; the plugin turns a negative index (and one past
    the end) into a zero slice. ndgather raises IndexError."""
    data = np.arange(10, 22, dtype=np.float32).reshape(3, 4)
    for idx, axis, zero_rows in (
        ([-1, 0, -3], 0, [0, 2]),
        ([3, 1], 0, [0]),
        ([-1, 0, 4], 1, [0, 2]),
    ):
        i = np.array(idx, dtype=np.int32)
        runtime = run_openvino(version, data, i, axis=axis)
        expected = np.take(data, np.clip(i, 0, data.shape[axis] - 1), axis=axis)
        sl = [slice(None)] * 2
        sl[axis] = zero_rows
        expected[tuple(sl)] = 0
        assert_same_values(runtime, expected, "what the plugin does")
        with pytest.raises(IndexError, match="Gather"):
            G[version](data, i, axis, 0)


def test_divergence_gather_nd_has_no_string_kernel() -> None:
    """Strings are an OpenVINO type, but the CPU plugin compiles no GatherND for them."""
    data = np.array([["a", "bb"], ["ccc", ""]])
    idx = np.array([[1], [0]], dtype=np.int32)
    for version in ND:
        with pytest.raises(Exception, match="(?i)string|precision"):
            ov_compiled_for(version, data, idx)
        assert ND[version](data, idx).tolist() == [["ccc", ""], ["a", "bb"]]
        assert ND[version](data.astype(object), idx).tolist() == [["ccc", ""], ["a", "bb"]]


def outcome(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}, stdout {proc.stdout[-300:]!r}, stderr {proc.stderr[-300:]!r}"


def run_in_subprocess(body: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        """
        import numpy as np
        import openvino as ov
        import openvino.opset8 as op8

        def run(data, indices, axis, batch_dims=0):
            d = op8.parameter(list(data.shape), ov.Type.f32 if data.dtype == np.float32
                              else ov.Type.i32, name="data")
            i = op8.parameter(list(indices.shape), ov.Type.i32, name="indices")
            node = op8.gather(d, i, np.int64(axis), batch_dims)
            compiled = ov.Core().compile_model(ov.Model([node], [d, i]), "CPU")
            return compiled([data, indices])[0]
        """
    ) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def static_plugin_diverges(proc: subprocess.CompletedProcess[str], right: str) -> None:
    """Pass when the plugin run in ``proc`` died of a signal or printed values other than
    ``right``; skip when it printed ``right``.

    These are memory errors and arithmetic faults inside the plugin's CPU kernels, so whether
    they kill the process depends on the CPU the kernel was chosen for (and on what lies next
    to the data): on the AMD EPYC (AVX-512) machines of this project's sessions each one dies,
    and a CI machine once survived the batch-of-ones case. A run that survives with the right
    values shows nothing either way, so it is reported as a skip, not as a pass."""
    if proc.returncode < 0:
        return
    assert proc.returncode == 0, outcome(proc)
    printed = proc.stdout.strip().splitlines()[-1:]
    if printed == [f"survived {right}"]:
        pytest.skip(f"the static plugin gave the right values on this CPU: {outcome(proc)}")
    assert printed and printed[0].startswith("survived "), outcome(proc)


def test_divergence_gather_static_zero_size_kills_the_process() -> None:
    """A zero-size Gather input is valid (the result is empty); compiled for static shapes,
    the plugin dies with SIGFPE (with dynamic shapes it returns the empty result)."""
    data, idx = np.zeros((2, 3), np.float32), np.zeros((0, 2), np.int32)
    for version in G:
        runtime = run_openvino(version, data, idx, axis=1, dynamic=True)
        assert_same_values(G[version](data, idx, 1, 0), runtime)
        assert runtime.shape == (2, 0, 2)
    proc = run_in_subprocess(
        """
        out = run(np.zeros((2, 3), np.float32), np.zeros((0, 2), np.int32), axis=1)
        print("survived", out.shape)
        """
    )
    static_plugin_diverges(proc, "(2, 0, 2)")


def test_divergence_gather_static_batch_of_ones_kills_the_process() -> None:
    """Gather-7/8 with batch_dims >= 1 where every dimension before axis is 1 (a batch of
    one): compiled for static shapes, the plugin dies with SIGSEGV (dynamic shapes work)."""
    data, idx = np.arange(3, dtype=np.float32).reshape(1, 3), np.array([[0, 2]], np.int32)
    for version in ("Gather-7", "Gather-8"):
        runtime = run_openvino(version, data, idx, axis=1, batch_dims=1, dynamic=True)
        assert_same_values(runtime, np.array([[0.0, 2.0]], np.float32))
        assert_same_values(G[version](data, idx, 1, 1), runtime)
    proc = run_in_subprocess(
        """
        out = run(np.arange(3, dtype=np.float32).reshape(1, 3), np.array([[0, 2]], np.int32), 1, 1)
        print("survived", out.tolist())
        """
    )
    static_plugin_diverges(proc, "[[0.0, 2.0]]")


def test_divergence_gather_8_1d_out_of_range() -> None:
    """Gather-8 defines zeros for an out-of-range index; on 1-D data with few indices the
    plugin reads outside the data instead (here: far enough to be killed by SIGSEGV)."""
    got = nov.gather_8(np.arange(1, 6, dtype=np.int32), np.array([2**31 - 1, 0], np.int32), 0)
    assert got.tolist() == [0, 1]
    proc = run_in_subprocess(
        """
        out = run(np.arange(1, 6, dtype=np.int32), np.array([2**31 - 1, 0], np.int32), axis=0)
        print("survived", out.tolist())
        """
    )
    static_plugin_diverges(proc, "[0, 1]")


def test_gather_nd_5_wraps_negative_indices_like_the_plugin() -> None:
    """GatherND-5's text asks for [0, s-1]; the plugin (and ndgather, api.md) wrap."""
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[[1], [0], [-1]], [[-3], [2], [-2]]], dtype=np.int32)
    runtime = run_openvino("GatherND-5", data, idx, batch_dims=2)
    assert_same_values(nov.gather_nd_5(data, idx, 2), runtime)
    assert_same_values(runtime, gather_nd_loop(data, idx, 2).reshape(6))
