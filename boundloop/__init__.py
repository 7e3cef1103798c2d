"""boundloop: a bounded, explicit, observable agent loop for Claude.

The model proposes; the software decides. See `AgentLoop`.

`import boundloop` loads nothing but this module: each public name below is imported on first
use (PEP 562's module `__getattr__`), from its own module only. The command line's `--help`, a
program that only needs `boundloop.errors`, or a tools module that imports `tool`, `Budget` and
`Policy` do not pay for the Anthropic SDK: `AgentLoop` (whose job is to call it) loads it.
Type checkers read the imports under `TYPE_CHECKING`, which are the same names from the same
modules.
"""

from __future__ import annotations

import sys
import types
import typing

from ._lazy import lazy_getattr as _lazy_getattr

if typing.TYPE_CHECKING:
    from ._records import CallResult as CallResult
    from ._records import ToolCall as ToolCall
    from .checkpoint.sqlite import SQLiteStore as SQLiteStore
    from .checkpoint.store import CheckpointStore as CheckpointStore
    from .checkpoint.store import MemoryStore as MemoryStore
    from .checkpoint.store import StoredRun as StoredRun
    from .errors import ApprovalMissing as ApprovalMissing
    from .errors import BudgetExceeded as BudgetExceeded
    from .errors import CheckpointCorrupt as CheckpointCorrupt
    from .errors import ConfigurationError as ConfigurationError
    from .errors import ContextExceeded as ContextExceeded
    from .errors import ContractError as ContractError
    from .errors import EvidenceMissing as EvidenceMissing
    from .errors import FixtureError as FixtureError
    from .errors import GraphvizMissing as GraphvizMissing
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
    from .errors import TaskBusy as TaskBusy
    from .errors import TaskExists as TaskExists
    from .errors import TaskNotFound as TaskNotFound
    from .errors import ToolFailed as ToolFailed
    from .errors import Truncated as Truncated
    from .errors import UnhandledStop as UnhandledStop
    from .handlers.stops import Route as Route
    from .handlers.stops import SignalContext as SignalContext
    from .handlers.stops import Verdict as Verdict
    from .handlers.tools import RetryableToolError as RetryableToolError
    from .handlers.tools import Tool as Tool
    from .handlers.tools import ToolContext as ToolContext
    from .handlers.tools import tool as tool
    from .loop import AgentLoop as AgentLoop
    from .metrics.instruments import LoopMetrics as LoopMetrics
    from .model import Model as Model
    from .policy import Policy as Policy
    from .prices import Price as Price
    from .prices import UnpricedModelWarning as UnpricedModelWarning
    from .replay import Divergence as Divergence
    from .replay import ReplayReport as ReplayReport
    from .replay import replay as replay
    from .state import Budget as Budget
    from .state import LoopResult as LoopResult
    from .state import LoopState as LoopState
    from .state import StopReason as StopReason
    from .state import Usage as Usage
    from .testing import ScriptedClient as ScriptedClient
    from .trace import TraceEvent as TraceEvent

__version__ = "0.1.0"

__all__ = [
    "AgentLoop",
    "ApprovalMissing",
    "Budget",
    "BudgetExceeded",
    "CallResult",
    "CheckpointCorrupt",
    "CheckpointStore",
    "ConfigurationError",
    "ContextExceeded",
    "ContractError",
    "Divergence",
    "EvidenceMissing",
    "FixtureError",
    "GraphvizMissing",
    "InvalidTaskId",
    "LoopError",
    "LoopMetrics",
    "LoopResult",
    "LoopState",
    "MemoryStore",
    "Model",
    "NeedsHuman",
    "NotResumable",
    "Policy",
    "PolicyBlocked",
    "Price",
    "Refused",
    "ReplayReport",
    "RetryableToolError",
    "Route",
    "RunCancelled",
    "RunError",
    "RunFailed",
    "SQLiteStore",
    "ScriptExhausted",
    "ScriptedClient",
    "SignalContext",
    "StopReason",
    "StoredRun",
    "TaskBusy",
    "TaskExists",
    "TaskNotFound",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolFailed",
    "TraceEvent",
    "Truncated",
    "UnhandledStop",
    "UnpricedModelWarning",
    "Usage",
    "Verdict",
    "replay",
    "tool",
]

_SOURCES: typing.Final[dict[str, str]] = {
    "CallResult": "._records",
    "ToolCall": "._records",
    "CheckpointStore": ".checkpoint.store",
    "MemoryStore": ".checkpoint.store",
    "SQLiteStore": ".checkpoint.sqlite",
    "StoredRun": ".checkpoint.store",
    "ApprovalMissing": ".errors",
    "BudgetExceeded": ".errors",
    "CheckpointCorrupt": ".errors",
    "ConfigurationError": ".errors",
    "ContextExceeded": ".errors",
    "ContractError": ".errors",
    "EvidenceMissing": ".errors",
    "FixtureError": ".errors",
    "GraphvizMissing": ".errors",
    "InvalidTaskId": ".errors",
    "LoopError": ".errors",
    "NeedsHuman": ".errors",
    "NotResumable": ".errors",
    "PolicyBlocked": ".errors",
    "Refused": ".errors",
    "RunCancelled": ".errors",
    "RunError": ".errors",
    "RunFailed": ".errors",
    "ScriptExhausted": ".errors",
    "TaskBusy": ".errors",
    "TaskExists": ".errors",
    "TaskNotFound": ".errors",
    "ToolFailed": ".errors",
    "Truncated": ".errors",
    "UnhandledStop": ".errors",
    "Route": ".handlers.stops",
    "SignalContext": ".handlers.stops",
    "Verdict": ".handlers.stops",
    "RetryableToolError": ".handlers.tools",
    "Tool": ".handlers.tools",
    "ToolContext": ".handlers.tools",
    "tool": ".handlers.tools",
    "AgentLoop": ".loop",
    "LoopMetrics": ".metrics.instruments",
    "Model": ".model",
    "Policy": ".policy",
    "Price": ".prices",
    "UnpricedModelWarning": ".prices",
    "Divergence": ".replay",
    "ReplayReport": ".replay",
    "replay": ".replay",
    "Budget": ".state",
    "LoopResult": ".state",
    "LoopState": ".state",
    "StopReason": ".state",
    "Usage": ".state",
    "ScriptedClient": ".testing",
    "TraceEvent": ".trace",
}
"""Where each public name is defined, relative to the package: what `__getattr__` imports."""


class _Package(types.ModuleType):
    """The package's module type: a public name that is also a submodule's (`replay`) stays the name.

    Importing `boundloop.replay` binds the submodule on the package, over the `replay` function
    when that was loaded first, and hides it when it was not (`__getattr__` no longer runs).
    Whenever the submodule is imported, the package keeps the function, as the eager imports did.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if (
            name in _SOURCES
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


if not typing.TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__ = _lazy_getattr(__name__, globals(), _SOURCES)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
