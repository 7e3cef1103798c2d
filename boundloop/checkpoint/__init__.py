"""Checkpoint stores for `AgentLoop(store=...)`, and the conformance suite every store passes."""

from __future__ import annotations

from .store import CheckpointStore as CheckpointStore
from .store import MemoryStore as MemoryStore
from .store import SQLiteStore as SQLiteStore
from .store import Status as Status
from .store import StoredRun as StoredRun

__all__ = ["CheckpointStore", "MemoryStore", "SQLiteStore", "Status", "StoredRun"]
