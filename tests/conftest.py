"""Shared fixtures: the anyio backends, a fresh Prometheus registry per test."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from blockbuster import BlockBuster, blockbuster_ctx
from hypothesis import settings
from prometheus_client import CollectorRegistry

import boundloop.contract
import boundloop.loop
import boundloop.mcp
import boundloop.web  # noqa: F401  (see below)
from boundloop import LoopMetrics
from boundloop.contract import check_contract  # noqa: F401  (see below)
from tests.postgres import PostgresServer, running_server
from tests.sim_model import SimulatedModel, shipping_policy

# `boundloop` loads each public name on first use, so the anthropic SDK is first imported by
# whichever test first touches `AgentLoop`. Its import reads package metadata from disk, which
# blockbuster flags when that happens inside an async test: import it here, at collection (and
# `boundloop.mcp`, whose SDK does the same). The
# packages that load their names lazily (`boundloop.contract`, `boundloop.web`) read their own
# file once when imported: here too, and the contract checker, which reads the contract schemas
# as it loads (`AgentLoop.from_contract` in an async test loads it first when run alone).


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The one definition of the backends: every async test runs on asyncio and on trio."""
    return str(request.param)


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `asyncio_only` (DBOS, real servers, worker processes: one event loop is
    enough, or the only one they run on) runs on asyncio alone."""
    if "anyio_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("asyncio_only"):
        metafunc.parametrize("anyio_backend", ["asyncio"])


@pytest.fixture
def registry() -> CollectorRegistry:
    """A fresh registry, so tests never share time series."""
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> LoopMetrics:
    """Loop metrics on the test's own registry."""
    return LoopMetrics(registry=registry)


def require_binary(name: str, package: str) -> str:
    """The path of a system binary; skip locally, fail in CI (BOUNDLOOP_REQUIRE_INTEGRATION=1)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} not found: install the Debian package {package!r} (.ci/run does)"
        if os.environ.get("BOUNDLOOP_REQUIRE_INTEGRATION") or os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


# Hypothesis: no per-example deadline (CI machines are shared and slow to start threads) and
# no example database written into the checkout; `--hypothesis-profile=dev` keeps it local.
settings.register_profile("ci", deadline=None, database=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def no_blocking_calls() -> Iterator[BlockBuster]:
    """Fail any blocking call boundloop makes on the event loop thread (blockbuster).

    Scanned: the library. Exempt: `boundloop.cli`, a terminal program whose job on its own
    event loop is writing to the terminal and to the files it is asked for.
    """
    with blockbuster_ctx(scanned_modules=["boundloop"], excluded_modules=["boundloop.cli"]) as buster:
        yield buster


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the session (skips locally, fails in CI, if missing)."""
    with running_server() as server:
        yield server


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """The DSN of a new, empty database on the session's server."""
    return postgres_server.create_database()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimulatedModel]:
    """The simulated model (tests/sim_model.py) reading the delivery status as the seed eval case
    expects, served over HTTP: the real SDK client reaches it through ANTHROPIC_BASE_URL."""
    sim = SimulatedModel(shipping_policy(), seed=1)
    with sim.serve() as url:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-simulated")
        yield sim
