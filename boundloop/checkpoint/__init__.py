"""Checkpoint stores for `AgentLoop(store=...)`, and the conformance suite every store passes.

`PostgresStore` is loaded on first use (PEP 562), so importing this package never imports
psycopg; without the `postgres` extra, using it raises an error saying what to install.
"""

from __future__ import annotations

import typing

from .sqlite import SQLiteStore as SQLiteStore
from .store import CheckpointStore as CheckpointStore
from .store import LeasingStore as LeasingStore
from .store import MemoryStore as MemoryStore
from .store import Status as Status
from .store import StoredRun as StoredRun

if typing.TYPE_CHECKING:
    from .postgres import PostgresStore as PostgresStore

# `PostgresStore` is not in `__all__`, so `from boundloop.checkpoint import *` works without
# the extra; `from boundloop.checkpoint import PostgresStore` is how it is imported.
__all__ = [
    "CheckpointStore",
    "LeasingStore",
    "MemoryStore",
    "SQLiteStore",
    "Status",
    "StoredRun",
]


def __getattr__(name: str) -> object:
    """`PostgresStore`, imported when first asked for (it needs the `postgres` extra)."""
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
