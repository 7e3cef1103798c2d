"""boundloop: a bounded, explicit, observable agent loop for Claude.

The model proposes; the software decides. See `AgentLoop`.
"""

from __future__ import annotations

from ._records import CallResult as CallResult
from ._records import ToolCall as ToolCall
from .checkpoint.store import CheckpointStore as CheckpointStore
from .checkpoint.store import MemoryStore as MemoryStore
from .checkpoint.store import SQLiteStore as SQLiteStore
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
from .errors import LoopError as LoopError
from .errors import NeedsHuman as NeedsHuman
from .errors import NotResumable as NotResumable
from .errors import PolicyBlocked as PolicyBlocked
from .errors import Refused as Refused
from .errors import RunCancelled as RunCancelled
from .errors import RunError as RunError
from .errors import RunFailed as RunFailed
from .errors import ScriptExhausted as ScriptExhausted
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
    "TaskExists",
    "TaskNotFound",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolFailed",
    "TraceEvent",
    "Truncated",
    "UnhandledStop",
    "Usage",
    "Verdict",
    "replay",
    "tool",
]
