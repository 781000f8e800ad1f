"""`ndgather.map_safetensors`: a tensor of a .safetensors file, mapped read-only.

The files are written here from the format (an 8-byte little-endian header length, the JSON
header, the data), so these tests need no `safetensors` package; one test reads what that
package writes, where it is installed.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import struct
import sys
from pathlib import Path
from typing import Any

import ndgather
import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

# Every dtype of the format that maps to a NumPy dtype.
DTYPES: dict[str, Any] = {
    "BOOL": np.bool_,
    "U8": np.uint8,
    "I8": np.int8,
    "U16": np.uint16,
    "I16": np.int16,
    "U32": np.uint32,
    "I32": np.int32,
    "U64": np.uint64,
    "I64": np.int64,
    "F16": np.float16,
    "F32": np.float32,
    "F64": np.float64,
    "C64": np.complex64,
    "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn,
    "F8_E5M2": ml_dtypes.float8_e5m2,
    "F8_E8M0": getattr(ml_dtypes, "float8_e8m0fnu", None),  # ml_dtypes 0.5 and later
    "F8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "F8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
}
ML_DTYPES = ["BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"]


def write_file(path: Path, entries: dict[str, Any], data: bytes = b"", *, pad: int = 0) -> Path:
    """A .safetensors file from the format: `entries` as the JSON header (padded with `pad`
    spaces, as writers pad it to 8 bytes), then `data`."""
    header = (json.dumps(entries) + " " * pad).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def write_arrays(path: Path, arrays: dict[str, np.ndarray], **metadata: str) -> Path:
    """The arrays one after the other in a .safetensors file, little-endian, as the format
    stores them; `metadata` as the header's "__metadata__"."""
    codes = {np.dtype(t): code for code, t in DTYPES.items() if t is not None}
    entries: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    data = b""
    for name, array in arrays.items():
        little = array.astype(array.dtype.newbyteorder("<"))
        entries[name] = {
            "dtype": codes[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [len(data), len(data) + array.nbytes],
        }
        data += little.tobytes()
    return write_file(path, entries, data, pad=-len(json.dumps(entries)) % 8)


def values(dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Distinct values of `dtype`."""
    n = int(np.prod(shape))
    if np.dtype(dtype).kind == "b":
        return (np.arange(n) % 3 == 0).reshape(shape)
    if np.dtype(dtype).kind in "iu":
        # Wraps to negative values in the narrow signed types: every byte differs.
        return (np.arange(n) * 37 % 251 + 2**30 * np.arange(n)).astype(dtype).reshape(shape)
    return (np.arange(n) * 0.5 - 3).astype(dtype).reshape(shape)


# --------------------------------------------------------------------------- every dtype


@pytest.mark.parametrize("code", DTYPES)
def test_every_dtype_maps_to_its_values(tmp_path: Path, code: str) -> None:
    if DTYPES[code] is None:
        pytest.skip(f"this ml_dtypes has no type for {code}")
    dtype = np.dtype(DTYPES[code])
    if dtype.itemsize == 1 and dtype.kind not in "biu":
        # The float8s: every bit pattern, NaNs included, compared bit for bit.
        expected = np.arange(256, dtype=np.uint8).view(dtype).reshape(16, 16)
    else:
        expected = values(dtype, (5, 3))
    path = write_arrays(tmp_path / "t.safetensors", {"a": np.arange(3.0), "t": expected})
    got = ndgather.map_safetensors(path, "t")
    assert isinstance(got, np.memmap)
    assert got.dtype == dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()
    assert got.flags.c_contiguous and not got.flags.writeable


def test_dtypes_are_little_endian_as_stored(tmp_path: Path) -> None:
    # A value whose bytes differ when swapped: read as the file's little-endian, on any host.
    path = write_file(
        tmp_path / "t.safetensors",
        {"t": {"dtype": "U32", "shape": [1], "data_offsets": [0, 4]}},
        bytes([1, 2, 3, 4]),
    )
    got = ndgather.map_safetensors(path, "t")
    assert int(got[0]) == 0x04030201
    assert got.dtype.byteorder in ("<", "=") and got.dtype.newbyteorder("<") == got.dtype


def test_zero_d_tensor(tmp_path: Path) -> None:
    path = write_arrays(tmp_path / "t.safetensors", {"s": np.array(2.5, np.float32)})
    got = ndgather.map_safetensors(path, "s")
    assert got.shape == () and got.dtype == np.float32 and float(got) == 2.5
    assert not got.flags.writeable


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2)])
@pytest.mark.parametrize("code", ["F32", "BF16"])
def test_empty_tensor_is_an_empty_read_only_array(
    tmp_path: Path, shape: tuple[int, ...], code: str
) -> None:
    # No bytes to map (np.memmap refuses length 0): an empty array of the dtype and shape.
    path = write_arrays(
        tmp_path / "t.safetensors",
        {"before": np.ones(3, np.int64), "e": np.empty(shape, DTYPES[code])},
    )
    got = ndgather.map_safetensors(path, "e")
    assert got.shape == shape and got.dtype == np.dtype(DTYPES[code]) and got.size == 0
    assert not got.flags.writeable
    assert ndgather.gather(got, np.zeros(0, np.int64)).shape == (0,) + shape[1:]


def test_empty_tensor_at_the_end_of_the_file(tmp_path: Path) -> None:
    # begin == end == the data's length: nothing past the end is read.
    path = write_file(
        tmp_path / "t.safetensors",
        {
            "a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
            "e": {"dtype": "F64", "shape": [0, 7], "data_offsets": [2, 2]},
        },
        b"\x01\x02",
    )
    assert ndgather.map_safetensors(path, "e").shape == (0, 7)


def test_metadata_and_padding_and_path_types(tmp_path: Path) -> None:
    arrays = {"w": values(np.float32, (4, 6)), "b": values(np.int16, (6,))}
    path = write_arrays(tmp_path / "t.safetensors", arrays, format="np", note="x")
    for where in (path, str(path)):
        for name, array in arrays.items():
            np.testing.assert_array_equal(ndgather.map_safetensors(where, name), array)


def test_unaligned_offsets(tmp_path: Path) -> None:
    # Writers align the data; the format does not require it, and np.memmap maps any offset.
    data = b"\x07" + np.arange(6, dtype="<f8").tobytes()
    path = write_file(
        tmp_path / "t.safetensors",
        {
            "pad": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
            "t": {"dtype": "F64", "shape": [2, 3], "data_offsets": [1, 49]},
        },
        data,
    )
    got = ndgather.map_safetensors(path, "t")
    np.testing.assert_array_equal(got, np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(ndgather.gather(got, [1, 0, 1]), got[[1, 0, 1]])


# --------------------------------------------------------------------------- mapped, not read


def test_result_is_a_read_only_mapping_of_the_file(tmp_path: Path) -> None:
    table = values(np.float32, (50, 8))
    path = write_arrays(tmp_path / "t.safetensors", {"t": table})
    got = ndgather.map_safetensors(path, "t")
    assert isinstance(got, np.memmap) and got.mode == "r"
    assert Path(got.filename).resolve() == path.resolve()
    assert isinstance(got._mmap, mmap.mmap)  # the file's mapping, not a copy
    with pytest.raises(ValueError, match="read-only"):
        got[0, 0] = 1.0
    with pytest.raises(ValueError):
        got.flags.writeable = True
    # Writing to the file shows through the mapping: the array holds no copy of the data.
    with open(path, "r+b") as f:
        f.seek(-4, 2)
        f.write(np.float32(123.0).tobytes())
    assert got[-1, -1] == 123.0


def test_mapping_outlives_the_path(tmp_path: Path) -> None:
    table = values(np.int64, (10, 3))
    path = write_arrays(tmp_path / "t.safetensors", {"t": table})
    view = ndgather.map_safetensors(path, "t")[2:5]
    path.unlink()
    np.testing.assert_array_equal(view, table[2:5])
    np.testing.assert_array_equal(ndgather.gather(view, [2, 0]), table[[4, 2]])


def resident_bytes() -> int:
    """The process's resident memory now (file pages mapped in included)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="Linux's /proc")
def test_large_tensor_is_mapped_without_reading_it(tmp_path: Path) -> None:
    # An 8 GiB tensor in a sparse file: mapped at once, with the process's memory unchanged,
    # and a gather reads only the rows it picks.
    rows, width = 2**20, 2048
    nbytes = rows * width * 4
    header = json.dumps(
        {"t": {"dtype": "F32", "shape": [rows, width], "data_offsets": [0, nbytes]}}
    )
    header += " " * (-len(header) % 8)
    path = tmp_path / "big.safetensors"
    start = 8 + len(header)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode())
        f.truncate(start + nbytes)
        f.seek(start + 7 * width * 4)
        f.write(np.full(width, 7.0, np.float32).tobytes())
    if path.stat().st_blocks * 512 > 2**24:
        pytest.skip("this file system does not keep sparse files")
    before = resident_bytes()
    table = ndgather.map_safetensors(path, "t")
    rows_got = ndgather.gather(table, [7, 0, 7, rows - 1])
    assert table.shape == (rows, width) and isinstance(table, np.memmap)
    assert resident_bytes() - before < 2**26
    np.testing.assert_array_equal(rows_got[[0, 2]], 7.0)
    np.testing.assert_array_equal(rows_got[[1, 3]], 0.0)


def test_gather_on_the_mapping_equals_gather_in_memory(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    table = rng.random((300, 5, 4)).astype(ml_dtypes.bfloat16)
    path = write_arrays(tmp_path / "t.safetensors", {"emb": table})
    mapped = ndgather.map_safetensors(path, "emb")
    ids = rng.integers(-300, 300, (40, 2))
    in_memory = np.array(mapped)
    for got, expected in (
        (ndgather.gather(mapped, ids), ndgather.gather(in_memory, ids)),
        (ndgather.gather(mapped, ids, axis=0, dtype=np.float32), table[ids].astype(np.float32)),
        (ndgather.gather_nd(mapped, ids % 5), ndgather.gather_nd(in_memory, ids % 5)),
        (ndgather.prepare_gather(mapped.shape, ids)(mapped), ndgather.gather(table, ids)),
    ):
        assert got.tobytes() == expected.tobytes() and got.dtype == expected.dtype
        assert got.flags.writeable and not isinstance(got, np.memmap)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "0 bytes, too short"),
        (b"\x10\0\0\0\0\0\0", "7 bytes, too short"),
        (struct.pack("<Q", 100) + b"{}", "header length says 100 bytes, but only 2 follow"),
        (struct.pack("<Q", 2**64 - 1) + b"{}", "says 18446744073709551615 bytes"),
        (struct.pack("<Q", 4) + b"{no}", "not UTF-8 JSON"),
        (struct.pack("<Q", 2) + b"\xff\xfe", "not UTF-8 JSON"),
        (struct.pack("<Q", 7) + b"[1, 2] ", "JSON list, not an object"),
        (struct.pack("<Q", 4) + b"null", "JSON NoneType, not an object"),
    ],
)
def test_malformed_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        ndgather.map_safetensors(path, "t")
    assert str(path) in str(error.value)


def entry(dtype: Any = "F32", shape: Any = (2, 2), offsets: Any = (0, 16)) -> dict[str, Any]:
    return {
        "dtype": dtype,
        "shape": list(shape) if isinstance(shape, tuple) else shape,
        "data_offsets": list(offsets) if isinstance(offsets, tuple) else offsets,
    }


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([1, 2], "not an object with"),
        ({"dtype": "F32", "shape": [4]}, "not an object with"),
        (entry(dtype=7), "has dtype 7, not a string"),
        (entry(shape=(2, -2)), "shape [2, -2], not a list of integers >= 0"),
        (entry(shape=(2, 2.0)), "not a list of integers >= 0"),
        (entry(shape=(True, 2)), "not a list of integers >= 0"),
        (entry(shape="22"), "not a list of integers >= 0"),
        (entry(offsets=(0,)), "data_offsets [0], not two integers >= 0"),
        (entry(offsets=(0, 8, 16)), "not two integers >= 0"),
        (entry(offsets=(0, 16.0)), "not two integers >= 0"),
        (entry(offsets=(-4, 12)), "not two integers >= 0"),
        (entry(offsets={"a": 1}), "not two integers >= 0"),
        (entry(offsets=(16, 0)), "[16, 0]: the end is before the beginning"),
        (entry(offsets=(0, 12)), "F32 of shape [2, 2], takes 16 bytes, but its data_offsets"),
        (entry(shape=(3, 2)), "takes 24 bytes, but its data_offsets [0, 16] span 16 bytes"),
        (entry(shape=(), offsets=(0, 0)), "takes 4 bytes"),
        (entry("F4", (3,), (0, 2)), "takes part of a byte"),
        (entry(offsets=(8, 24)), "ends at byte"),
        (entry(shape=(2**40, 2**30), offsets=(0, 2**72)), "(truncated?)"),
    ],
)
def test_malformed_entries(tmp_path: Path, bad: Any, message: str) -> None:
    path = write_file(tmp_path / "bad.safetensors", {"t": bad, "ok": entry()}, b"\0" * 16)
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        ndgather.map_safetensors(path, "t")
    assert str(path) in str(error.value) and "'t'" in str(error.value)
    ndgather.map_safetensors(path, "ok")  # only the named entry is checked


def test_data_past_the_end_of_the_file(tmp_path: Path) -> None:
    path = write_file(tmp_path / "t.safetensors", {"t": entry()}, b"\0" * 15)
    with pytest.raises(ValueError, match=r"ends at byte \d+ of the file, which has \d+ bytes"):
        ndgather.map_safetensors(path, "t")


def test_unknown_names(tmp_path: Path) -> None:
    names = [f"layer.{i}.weight" for i in range(9)]
    path = write_file(
        tmp_path / "t.safetensors",
        {"__metadata__": {"k": "v"}} | {n: entry(offsets=(0, 16)) for n in names},
        b"\0" * 16,
    )
    with pytest.raises(KeyError, match=r"no tensor 'layer\.3\.weigth'; it holds 9: 'layer\.3"):
        ndgather.map_safetensors(path, "layer.3.weigth")
    with pytest.raises(KeyError, match=r"'zzz'; it holds 9: 'layer\.0\.weight', .*4 more"):
        ndgather.map_safetensors(path, "zzz")
    with pytest.raises(KeyError, match="__metadata__"):
        ndgather.map_safetensors(path, "__metadata__")
    empty = write_file(tmp_path / "empty.safetensors", {"__metadata__": {}})
    with pytest.raises(KeyError, match="it holds none"):
        ndgather.map_safetensors(empty, "t")
    with pytest.raises(TypeError, match="name must be a str, not int"):
        ndgather.map_safetensors(path, 3)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        ndgather.map_safetensors(tmp_path / "missing.safetensors", "t")


@pytest.mark.parametrize("code", ["F12", "f32", "", "BF8"])
def test_unknown_dtype_is_a_type_error_naming_it(tmp_path: Path, code: str) -> None:
    path = write_file(tmp_path / "t.safetensors", {"t": entry(dtype=code)}, b"\0" * 16)
    with pytest.raises(TypeError, match=f"has dtype {re.escape(repr(code))}, which is not"):
        ndgather.map_safetensors(path, "t")


@pytest.mark.parametrize(("code", "count", "nbytes"), [("F4", 8, 4), ("F6_E2M3", 4, 3)])
def test_packed_dtypes_are_a_type_error(tmp_path: Path, code: str, count: int, nbytes: int) -> None:
    path = write_file(
        tmp_path / "t.safetensors",
        {"t": entry(code, (count,), (8, 8 + nbytes)), "a": entry("U8", (8,), (0, 8))},
        b"\0" * (8 + nbytes),
    )
    with pytest.raises(TypeError, match=rf"'t' is {code}, \d bits an element .* {nbytes} bytes"):
        ndgather.map_safetensors(path, "t")


@pytest.mark.parametrize("code", ML_DTYPES)
def test_ml_dtypes_missing_is_a_type_error_naming_the_dtype(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    path = write_file(
        tmp_path / "t.safetensors",
        {"t": entry(code, (2,), (0, 4 if code == "BF16" else 2))},
        b"\0" * 4,
    )
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` fails
    with pytest.raises(
        TypeError, match=rf"'t' is {code} \(ml_dtypes\.\w+\).*install ml_dtypes"
    ) as e:
        ndgather.map_safetensors(path, "t")
    assert str(e.value).startswith(f"{path}: tensor 't'")
    # Other dtypes do not need it.
    write_file(path, {"t": entry("I16", (2,), (0, 4))}, b"\0" * 4)
    assert ndgather.map_safetensors(path, "t").dtype == np.int16


def test_ml_dtypes_without_the_type_is_a_type_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_file(tmp_path / "t.safetensors", {"t": entry("F8_E8M0", (2,), (0, 2))}, b"\0\0")
    monkeypatch.delattr(ml_dtypes, "float8_e8m0fnu", raising=False)
    with pytest.raises(TypeError, match=r"F8_E8M0, but ml_dtypes .* has no float8_e8m0fnu"):
        ndgather.map_safetensors(path, "t")


# --------------------------------------------------------------------------- the package


def test_reads_what_the_safetensors_package_writes(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    safetensors = pytest.importorskip("safetensors")
    rng = np.random.default_rng(5)
    arrays = {
        "embed.weight": rng.random((64, 16)).astype(np.float32),
        "ids": rng.integers(-(2**40), 2**40, (7, 3)),
        "half": rng.random(9).astype(np.float16),
        "mask": rng.random((4, 4)) < 0.5,
        "bytes": rng.integers(0, 256, 33, dtype=np.uint8),
        "c": (rng.random(5) + 1j * rng.random(5)).astype(np.complex64),
        "scalar": np.array(7, np.int32),
        "empty": np.zeros((0, 3), np.float64),
        "bf16": rng.random((6, 5)).astype(ml_dtypes.bfloat16),
        "f8": rng.random((3, 8)).astype(ml_dtypes.float8_e4m3fn),
        "f8_e5m2": rng.random(10).astype(ml_dtypes.float8_e5m2),
    }
    path = tmp_path / "model.safetensors"
    st.save_file(arrays, str(path), metadata={"format": "np"})
    with safetensors.safe_open(str(path), framework="np") as f:
        assert set(f.keys()) == set(arrays)
        for name, array in arrays.items():
            got = ndgather.map_safetensors(path, name)
            assert got.dtype == array.dtype and got.shape == array.shape, name
            assert got.tobytes() == array.tobytes(), name
            assert not got.flags.writeable
            if array.dtype.type in (
                ml_dtypes.bfloat16,
                ml_dtypes.float8_e4m3fn,
                ml_dtypes.float8_e5m2,
            ):
                continue  # safetensors' NumPy reader has no dtype for these
            theirs = f.get_tensor(name)
            assert theirs.dtype == got.dtype and theirs.tobytes() == got.tobytes(), name
    ids = [3, 0, 63, -1]
    np.testing.assert_array_equal(
        ndgather.gather(ndgather.map_safetensors(path, "embed.weight"), ids),
        arrays["embed.weight"][ids],
    )


def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Tables on disk", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert code, "no example in the README's section on tables on disk"
    monkeypatch.chdir(tmp_path)
    np.save("table.npy", values(np.float32, (10, 4)))
    write_arrays(tmp_path / "model.safetensors", {"embed": values(np.float32, (10, 4))})
    exec(compile(code[0], "README.md", "exec"), {})
