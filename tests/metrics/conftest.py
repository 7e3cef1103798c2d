"""Metrics tests run on asyncio; modules where the backend matters override `anyio_backend`."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """The event loop for the metrics tests: servers, subprocesses and Prometheus need only one."""
    return "asyncio"
