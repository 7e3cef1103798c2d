"""Checkpoint stores for `AgentLoop(store=...)`, and the conformance suite every store passes.

`CheckpointStore`, `MemoryStore`, `SQLiteStore` and `StoredRun` are imported from `boundloop`;
this package is the home of `EventLog`, `LeasingStore`, `Status` and `PostgresStore` (docs/api.md).

`PostgresStore` is loaded on first use (PEP 562), so importing this package never imports
psycopg; without the `postgres` extra, using it raises an error saying what to install.
"""

from __future__ import annotations

import typing

from .eventlog import EventLog as EventLog
from .store import LeasingStore as LeasingStore
from .store import Status as Status

if typing.TYPE_CHECKING:
    from .postgres import PostgresStore as PostgresStore

# `PostgresStore` is not in `__all__`, so `from boundloop.checkpoint import *` works without
# the extra; `from boundloop.checkpoint import PostgresStore` is how it is imported.
__all__ = ["EventLog", "LeasingStore", "Status"]


def _postgres(name: str) -> object:
    """`PostgresStore`, imported when first asked for (it needs the `postgres` extra)."""
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not typing.TYPE_CHECKING:  # type checkers see the import above
    __getattr__ = _postgres
