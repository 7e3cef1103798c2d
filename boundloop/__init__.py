"""boundloop: a bounded, explicit, observable agent loop for Claude.

The model proposes; the software decides. See `AgentLoop`.

`import boundloop` loads nothing but this module: each public name below is imported on first
use (PEP 562's module `__getattr__`), from its own module only. The command line's `--help`, a
program that only needs `boundloop.errors`, or a tools module that imports `tool`, `Budget` and
`Policy` do not pay for the Anthropic SDK: `AgentLoop` (whose job is to call it) loads it.

Each public name is written once, in the `TYPE_CHECKING` block: type checkers read it as
imports, and `_lazy.public_names` reads the same block from this file to build the map of
where each name is defined.
"""

from __future__ import annotations

import typing

from ._lazy import lazy_getattr as _lazy_getattr
from ._lazy import public_names as _public_names

if typing.TYPE_CHECKING:
    from ._base.cache import CacheSettings as CacheSettings
    from ._base.model_settings import ModelSettings as ModelSettings
    from ._base.price import Price as Price
    from ._core import Observers as Observers
    from ._core import RunStream as RunStream
    from ._core import StreamStatistics as StreamStatistics
    from ._replay import Divergence as Divergence
    from ._replay import ReplayReport as ReplayReport
    from ._replay import replay as replay
    from .checkpoint.sqlite import SQLiteStore as SQLiteStore
    from .checkpoint.store import CheckpointStore as CheckpointStore
    from .checkpoint.store import MemoryStore as MemoryStore
    from .checkpoint.store import StoredRun as StoredRun
    from .compaction import Compaction as Compaction
    from .compaction import ContextManagement as ContextManagement
    from .errors import ApprovalMissing as ApprovalMissing
    from .errors import BudgetExceeded as BudgetExceeded
    from .errors import CheckpointCorrupt as CheckpointCorrupt
    from .errors import ConfigurationError as ConfigurationError
    from .errors import ContextExceeded as ContextExceeded
    from .errors import ContractError as ContractError
    from .errors import EventExists as EventExists
    from .errors import EventLoopRunning as EventLoopRunning
    from .errors import EvidenceMissing as EvidenceMissing
    from .errors import FixtureError as FixtureError
    from .errors import GraphvizMissing as GraphvizMissing
    from .errors import InvalidOutput as InvalidOutput
    from .errors import InvalidRequest as InvalidRequest
    from .errors import InvalidTaskId as InvalidTaskId
    from .errors import LoopError as LoopError
    from .errors import NeedsHuman as NeedsHuman
    from .errors import NotResumable as NotResumable
    from .errors import PolicyBlocked as PolicyBlocked
    from .errors import Refused as Refused
    from .errors import RunCancelled as RunCancelled
    from .errors import RunError as RunError
    from .errors import RunFailed as RunFailed
    from .errors import ScriptExhausted as ScriptExhausted
    from .errors import SetupError as SetupError
    from .errors import TaskBusy as TaskBusy
    from .errors import TaskExists as TaskExists
    from .errors import TaskNotFound as TaskNotFound
    from .errors import ToolFailed as ToolFailed
    from .errors import Truncated as Truncated
    from .errors import UnhandledStop as UnhandledStop
    from .events import Event as Event
    from .loop import AgentLoop as AgentLoop
    from .metrics.instruments import LoopMetrics as LoopMetrics
    from .model import Model as Model
    from .policy import Policy as Policy
    from .policy import Route as Route
    from .policy import SignalContext as SignalContext
    from .policy import Verdict as Verdict
    from .pools.pool import BudgetPool as BudgetPool
    from .pools.pool import PoolStatus as PoolStatus
    from .pools.sqlite import SQLitePoolStore as SQLitePoolStore
    from .pools.store import MemoryPoolStore as MemoryPoolStore
    from .prices import UnpricedModelWarning as UnpricedModelWarning
    from .records import CallResult as CallResult
    from .records import StopReason as StopReason
    from .records import ToolCall as ToolCall
    from .records import Usage as Usage
    from .settings import LoopSpec as LoopSpec
    from .state import Budget as Budget
    from .state import LoopResult as LoopResult
    from .state import LoopState as LoopState
    from .testing import ScriptedClient as ScriptedClient
    from .tools import RetryableToolError as RetryableToolError
    from .tools import Tool as Tool
    from .tools import ToolContext as ToolContext
    from .tools import tool as tool

__version__ = "0.1.0"

_SOURCES: typing.Final[dict[str, str]] = _public_names(__file__)
"""Where each public name is defined, relative to the package: what `__getattr__` imports."""

__all__ = sorted(_SOURCES)  # pyright: ignore[reportUnsupportedDunderAll]

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__ = _lazy_getattr(__name__, globals(), _SOURCES)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
