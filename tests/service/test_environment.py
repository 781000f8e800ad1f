"""NDGATHER_NUM_THREADS, NDGATHER_POOL_BYTES, NDGATHER_PREFAULT, NDGATHER_LINGER_US,
NDGATHER_WAKE_US, NDGATHER_L2_BYTES and NDGATHER_LLC_BYTES: read at import, and no value
breaks it."""

from __future__ import annotations

import os
import subprocess
import sys

import ndgather
import numpy as np
import pytest
from ndgather._environment import apply_environment, parse_bytes


def _run_with(env_vars: dict[str, str], code: str) -> tuple[str, str]:
    """Run ``code`` in a child that imports ndgather with ``env_vars``; its stdout and
    stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NDGATHER_")}
    env.update(env_vars)
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import ndgather\n" + code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip(), proc.stderr


def _import_with(variable: str, value: str) -> tuple[str, str]:
    """Import ndgather in a child with ``variable=value``; its stdout and stderr."""
    code = (
        "from ndgather._core import _get_linger_us, _get_wake_us; "
        "print(ndgather.get_num_threads(), ndgather.get_pool_limit(), ndgather.get_prefault(), "
        "_get_linger_us(), _get_wake_us())"
    )
    return _run_with({variable: value}, code)


@pytest.mark.parametrize(
    "value", ["99999999999999999999", "0", "-2", "1025", "2.5", "four", "1e3", "0x10"]
)
def test_a_bad_thread_count_warns_once_and_falls_back(value: str) -> None:
    default, _ = _import_with("NDGATHER_POOL_BYTES", "1GiB")
    got, stderr = _import_with("NDGATHER_NUM_THREADS", value)
    assert got == default
    assert stderr.count("RuntimeWarning") == 1, stderr
    assert f"NDGATHER_NUM_THREADS={value!r}" in stderr


@pytest.mark.parametrize(
    ("value", "limit"),
    [
        ("0", 0),
        ("268435456", 268435456),
        ("512MiB", 512 << 20),
        ("1GiB", 1 << 30),
        ("1 gib", 1 << 30),
        ("64Ki", 64 << 10),
        ("1.5GiB", 3 << 29),
        ("1.5 gb", 1_500_000_000),
        ("800MB", 800_000_000),
        ("10kb", 10_000),
    ],
)
def test_pool_bytes_takes_sizes_with_units(value: str, limit: int) -> None:
    got, stderr = _import_with("NDGATHER_POOL_BYTES", value)
    assert got.split()[1] == str(limit)
    assert "Warning" not in stderr


@pytest.mark.parametrize(
    "value", ["-1", "lots", "1e9", "12 parsecs", "9" * 40, str(2**63), "GiB", "1iB", "1G", "64k"]
)
def test_a_bad_pool_size_warns_once_and_falls_back(value: str) -> None:
    got, stderr = _import_with("NDGATHER_POOL_BYTES", value)
    assert got.split()[1] == str(1 << 30)
    assert stderr.count("RuntimeWarning") == 1, stderr
    assert f"NDGATHER_POOL_BYTES={value!r}" in stderr


@pytest.mark.parametrize(
    ("value", "on"),
    [("0", False), ("off", False), (" No ", False), ("FALSE", False), ("1", True), ("on", True)],
)
def test_prefault_takes_a_switch(value: str, on: bool) -> None:
    got, stderr = _import_with("NDGATHER_PREFAULT", value)
    assert got.split()[2] == str(on)
    assert "Warning" not in stderr


@pytest.mark.parametrize("value", ["2", "maybe", "offf"])
def test_a_bad_prefault_switch_warns_once_and_stays_on(value: str) -> None:
    got, stderr = _import_with("NDGATHER_PREFAULT", value)
    assert got.split()[2] == "True"
    assert stderr.count("RuntimeWarning") == 1, stderr
    assert f"NDGATHER_PREFAULT={value!r}" in stderr


@pytest.mark.parametrize("value, us", [("0", 0), (" 50 ", 50), ("1000000", 1_000_000)])
def test_linger_takes_microseconds(value: str, us: int) -> None:
    got, stderr = _import_with("NDGATHER_LINGER_US", value)
    assert got.split()[3] == str(us)
    assert "Warning" not in stderr


@pytest.mark.parametrize("value", ["-1", "1000001", "1ms", "2.5"])
def test_a_bad_linger_warns_once_and_keeps_the_default(value: str) -> None:
    got, stderr = _import_with("NDGATHER_LINGER_US", value)
    assert got.split()[3] == "200"
    assert stderr.count("RuntimeWarning") == 1, stderr
    assert f"NDGATHER_LINGER_US={value!r}" in stderr


@pytest.mark.parametrize("value, us", [("0", 0), (" 45 ", 45), ("1000000", 1_000_000)])
def test_the_wake_up_time_takes_microseconds(value: str, us: int) -> None:
    got, stderr = _import_with("NDGATHER_WAKE_US", value)
    assert got.split()[4] == str(us)
    assert "Warning" not in stderr


@pytest.mark.parametrize("value", ["-1", "1000001", "45us"])
def test_a_bad_wake_up_time_warns_once_and_is_measured(value: str) -> None:
    got, stderr = _import_with("NDGATHER_WAKE_US", value)
    # Nothing was woken in the child yet: nothing measured.
    assert got.split()[4] == "0"
    assert stderr.count("RuntimeWarning") == 1, stderr
    assert f"NDGATHER_WAKE_US={value!r}" in stderr


def test_calls_are_exact_whatever_the_wake_up_time() -> None:
    """Split or not (a wake-up assumed free, or too slow for any call here), calls made
    back to back and after a pause give NumPy's result; the setting reads back and goes
    back to measuring."""
    from ndgather._core import _get_wake_us, _set_wake_us

    rng = np.random.default_rng(6)
    table = rng.random((1 << 16, 32), dtype=np.float32)
    threads = ndgather.get_num_threads()
    try:
        ndgather.set_num_threads(2)
        for us in (0, 1_000_000, None):
            _set_wake_us(us)
            if us is not None:
                assert _get_wake_us() == us
            for n in (600, 1024, 20_000):
                for _ in range(3):
                    ids = rng.integers(0, len(table), n)
                    np.testing.assert_array_equal(ndgather.gather(table, ids), table[ids])
                    out = np.empty((n, 32), np.float32)
                    ndgather.gather(table, ids, out=out)
                    np.testing.assert_array_equal(out, table[ids])
        with pytest.raises(ValueError, match="between 0 and 1000000"):
            _set_wake_us(-5)
    finally:
        _set_wake_us(None)
        ndgather.set_num_threads(threads)


def test_calls_are_exact_whatever_the_linger() -> None:
    from ndgather._core import _get_linger_us, _set_linger_us

    rng = np.random.default_rng(5)
    table = rng.random((1 << 16, 64), dtype=np.float32)
    ids = rng.integers(0, len(table), 20_000)
    before, threads = _get_linger_us(), ndgather.get_num_threads()
    try:
        ndgather.set_num_threads(2)
        for us in (0, 1_000_000, 200):
            _set_linger_us(us)
            for _ in range(3):
                np.testing.assert_array_equal(ndgather.gather(table, ids), table[ids])
        with pytest.raises(ValueError, match="between 0 and 1000000"):
            _set_linger_us(-5)
        assert _get_linger_us() == 200
    finally:
        _set_linger_us(before)
        ndgather.set_num_threads(threads)


def test_apply_environment_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    limit = ndgather.get_pool_limit()
    try:
        monkeypatch.setenv("NDGATHER_NUM_THREADS", " 3 ")
        monkeypatch.setenv("NDGATHER_POOL_BYTES", "2MiB")
        apply_environment()
        assert ndgather.get_num_threads() == 3
        assert ndgather.get_pool_limit() == 2 << 20
        monkeypatch.setenv("NDGATHER_NUM_THREADS", "many")
        with pytest.warns(RuntimeWarning, match="NDGATHER_NUM_THREADS='many'"):
            apply_environment()
        assert ndgather.get_num_threads() == 3
    finally:
        ndgather.set_pool_limit(limit)


def test_parse_bytes_is_exact_for_large_values() -> None:
    assert parse_bytes("8TiB") == 8 << 40
    assert parse_bytes(str(2**62)) == 2**62
    assert parse_bytes(".5Mi") == 1 << 19
    with pytest.raises(ValueError):
        parse_bytes("")


@pytest.mark.parametrize("letter", ["K", "k", "M", "G", "T"])
def test_a_bare_unit_letter_is_refused_as_ambiguous(letter: str) -> None:
    """dask reads "1G" as 10**9, other tools as 2**30: the message says what to write."""
    with pytest.raises(
        ValueError, match=f"'{letter}' alone is ambiguous: write {letter.upper()}iB or"
    ):
        parse_bytes(f"1{letter}")
    _, stderr = _import_with("NDGATHER_POOL_BYTES", f"2{letter}")
    assert stderr.count("RuntimeWarning") == 1, stderr
    assert "ambiguous" in stderr


@pytest.mark.parametrize(
    "value",
    ["0", "4096", "7 B", "1kB", "1KiB", "64Ki", "800MB", "512MiB", "1.5GB", "1 gib", "3TiB", "2tb"],
)
def test_every_size_accepted_means_what_it_means_to_dask(value: str) -> None:
    """ndgather.dask reads dask's array.chunk-size with dask's parser: no size means two things."""
    dask_utils = pytest.importorskip("dask.utils")
    assert parse_bytes(value) == dask_utils.parse_bytes(value)


_MODEL = "import json; print(json.dumps(ndgather._core._tuning()))"


def test_cache_sizes_from_the_environment_set_the_model() -> None:
    """The Intel Xeon VM's caches (2 MiB L2, 260 MiB L3) give its thresholds
    (docs/architecture.md) on any machine; one size alone keeps the other as reported."""
    import json

    reported = ndgather._core._tuning()
    assert reported["caches_from"] in ("sysfs", "default")
    got, stderr = _run_with({"NDGATHER_L2_BYTES": "2MiB", "NDGATHER_LLC_BYTES": "260MiB"}, _MODEL)
    model = json.loads(got)
    assert "Warning" not in stderr, stderr
    assert model["caches_from"] == "environment"
    assert (model["l2_bytes"], model["llc_bytes"]) == (2 << 20, 260 << 20)
    assert model["stream_min_out_bytes"] == 32 << 20
    assert model["far_min_data_bytes"] == 520 << 20
    assert model["prefetch_min_data_bytes"] == 8 << 20
    got, _ = _run_with({"NDGATHER_LLC_BYTES": "1 GiB"}, _MODEL)
    model = json.loads(got)
    assert (model["l2_bytes"], model["llc_bytes"]) == (reported["l2_bytes"], 1 << 30)
    assert model["stream_min_out_bytes"] == reported["stream_min_out_bytes"]
    assert model["far_min_data_bytes"] == 2 << 30


@pytest.mark.parametrize("value", ["0", "12M", "-1", "big", "1e30", str(2**64)])
def test_a_bad_cache_size_warns_once_and_keeps_what_the_machine_reports(value: str) -> None:
    import json

    reported = ndgather._core._tuning()
    got, stderr = _run_with({"NDGATHER_L2_BYTES": value}, _MODEL)
    assert json.loads(got) == reported
    assert stderr.count("RuntimeWarning") == 1, stderr
    assert f"NDGATHER_L2_BYTES={value!r}" in stderr


def test_the_cache_sizes_are_set_once_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    from ndgather._core import _set_caches, _tuning

    before = _tuning()
    with pytest.raises(ValueError, match="once, at import"):
        _set_caches(1 << 20, 32 << 20)
    with pytest.raises(ValueError, match="at least one byte|> 0"):
        _set_caches(0, None)
    monkeypatch.setenv("NDGATHER_LLC_BYTES", "64MiB")
    with pytest.warns(RuntimeWarning, match="NDGATHER_LLC_BYTES='64MiB'"):
        apply_environment()
    assert _tuning() == before


@pytest.mark.parametrize(
    "caches",
    [
        {"NDGATHER_L2_BYTES": "256KiB", "NDGATHER_LLC_BYTES": "2MiB"},  # everything streams
        {"NDGATHER_L2_BYTES": "64MiB", "NDGATHER_LLC_BYTES": "4GiB"},  # nothing does
    ],
)
def test_calls_are_exact_whatever_the_cache_sizes(caches: dict[str, str]) -> None:
    """The thresholds move which copy runs (streamed, prefetched far or near, or not at
    all); every one gives NumPy's result, new arrays and ``out=``, on two threads."""
    code = """
import numpy as np
ndgather.set_num_threads(2)
rng = np.random.default_rng(9)
for shape, n in (((1 << 16, 64), 1 << 16), ((1 << 18, 16), 5000), ((4096, 4096), 1 << 20)):
    table = rng.random(shape, dtype=np.float32)
    if shape[0] == 4096:
        ids = rng.integers(0, 4096, (n, 2))
        want = table[ids[:, 0], ids[:, 1]]
        got = ndgather.gather_nd(table, ids)
    else:
        ids = rng.integers(0, shape[0], n)
        want = table[ids]
        got = ndgather.gather(table, ids)
    np.testing.assert_array_equal(got, want)
    out = np.empty_like(want)
    if shape[0] == 4096:
        ndgather.gather_nd(table, ids, out=out)
    else:
        ndgather.gather(table, ids, out=out, mode="clip")
    np.testing.assert_array_equal(out, want)
print(ndgather._core._tuning()["caches_from"])
"""
    got, stderr = _run_with(caches, code)
    assert got == "environment", stderr
    assert "Warning" not in stderr, stderr
