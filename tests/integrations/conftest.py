"""Fixtures of the DBOS tests: a launched DBOS on a fresh database of the throwaway PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("dbos", reason="the dbos extra is not installed: pip install 'boundloop[dbos]'")

from dbos import DBOS, DBOSConfig

Launch = Callable[[], None]


def dbos_config(dsn: str, executor_id: str = "test") -> DBOSConfig:
    """A quiet DBOS configuration on `dsn`, polling fast (tests wait on queues and recoveries)."""
    return {
        "name": "boundloop-tests",
        "system_database_url": dsn,
        "executor_id": executor_id,
        "application_version": "boundloop-tests",
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.05,
    }


@pytest.fixture
def launch(postgres_dsn: str) -> Iterator[Launch]:
    """Launch DBOS on the test's database, once the test has built its `DurableLoop`s (workflows
    register before launch); destroyed, registry too, after the test."""

    def start() -> None:
        DBOS(config=dbos_config(postgres_dsn))
        DBOS.launch()

    yield start
    DBOS.destroy(destroy_registry=True)
    logging.getLogger("dbos").handlers.clear()


async def recorded_steps(task_id: str) -> list[tuple[str, int]]:
    """The workflow's recorded steps: (name, id), in id order."""
    return [
        (str(s["function_name"]), int(s["function_id"]))
        for s in await DBOS.list_workflow_steps_async(task_id)
    ]
