"""Checkpoint stores for `AgentLoop(store=...)`."""

from __future__ import annotations

from .store import CheckpointStore as CheckpointStore
from .store import MemoryStore as MemoryStore
from .store import SQLiteStore as SQLiteStore

__all__ = ["CheckpointStore", "MemoryStore", "SQLiteStore"]
