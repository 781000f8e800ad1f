"""Shared fixtures for the ndgather test suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from helpers import UNDER_ASAN

try:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ndgather",
        deadline=None,
        max_examples=150,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ndgather"))
except ImportError:  # pragma: no cover - hypothesis is a test extra
    pass


@pytest.fixture(autouse=True)
def _restore_num_threads() -> Iterator[None]:
    """Every test leaves the worker-thread count as it found it."""
    import ndgather

    before = ndgather.get_num_threads()
    yield
    if ndgather.get_num_threads() != before:
        ndgather.set_num_threads(before)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under AddressSanitizer (`make asan`) the OpenVINO CPU plugin cannot run in-process: it
    dlopens TBB with RTLD_DEEPBIND, which the sanitizer runtime refuses (it aborts)."""
    if not UNDER_ASAN:
        return
    skip = pytest.mark.skip(reason="OpenVINO cannot load under ASan (RTLD_DEEPBIND)")
    for item in items:
        if item.get_closest_marker("openvino_runtime"):
            item.add_marker(skip)
