"""Shared fixtures for the ndgather test suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

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
