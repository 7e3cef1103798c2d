"""The runtime, private: the driver, the per-run context, the work of each state, request
building, the response boundary, dispatch and budgets.

This module is the one way in: `AgentLoop`, `replay`, the DBOS integration, the evals and the
CLI use the names below and nothing else of the core (`tests/test_structure.py` checks it).

Each name is imported on first use, from its own module (as `boundloop`'s are): building an
`AgentLoop` loads its configuration; the driver and the work of each state load with the first
run.
"""

from __future__ import annotations

import typing

from .._lazy import lazy_getattr as _lazy_getattr
from .._lazy import public_names as _public_names

if typing.TYPE_CHECKING:
    from .config import Cut as Cut
    from .config import LoopConfig as LoopConfig
    from .config import ToolErrors as ToolErrors
    from .config import Wiring as Wiring
    from .config import build_config as build_config
    from .config import check_objects as check_objects
    from .config import declarations as declarations
    from .config import escalation_tool as escalation_tool
    from .config import other_models as other_models
    from .config import run_settings as run_settings
    from .config import with_store as with_store
    from .connect import Entered as Entered
    from .connect import connected as connected
    from .connect import enter as enter
    from .connect import leave as leave
    from .context import Watch as Watch
    from .contracts import contract_of as contract_of
    from .contracts import contract_parts as contract_parts
    from .contracts import declared_tool as declared_tool
    from .delegation import delegation_tool as delegation_tool
    from .driver import execute as drive  # noqa: F401  # pyright: ignore[reportUnusedImport]  (a renamed export)
    from .envelope import new_state as new_state
    from .eventlog import event_log_of as event_log_of
    from .follower import follow as follow
    from .observers import EventHook as EventHook
    from .observers import Observers as Observers
    from .provenance import field_text as field_text
    from .registry import ToolRegistry as ToolRegistry
    from .resume import Decision as Decision
    from .resume import prepare as prepare
    from .sessions import resume as resume_stored  # noqa: F401  # pyright: ignore[reportUnusedImport]  (a renamed export)
    from .sessions import start as start
    from .sessions import start_new as start_new
    from .stream import DEFAULT_BUFFER as DEFAULT_BUFFER
    from .stream import ResumeOptions as ResumeOptions
    from .stream import RunOptions as RunOptions
    from .stream import RunStream as RunStream
    from .stream import StreamStatistics as StreamStatistics
    from .stream import stream_new as stream_new
    from .stream import stream_resumed as stream_resumed
    from .toolset import ToolList as ToolList
    from .toolset import Toolset as Toolset
    from .toolset import lone as lone
    from .tree import deciding as deciding
    from .tree import passed_down as passed_down

_SOURCES: typing.Final[dict[str, str]] = _public_names(__file__)
"""Where each name is defined, relative to the package: what `__getattr__` imports."""

__all__ = sorted(_SOURCES)  # pyright: ignore[reportUnsupportedDunderAll]

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__ = _lazy_getattr(__name__, globals(), _SOURCES)
