"""The loop's state machine: the transition table, its guards, and diagrams drawn from it."""

from __future__ import annotations

from ..trace import read_trace as read_trace
from .diagram import FORMATS as FORMATS
from .diagram import TracePath as TracePath
from .diagram import render as render
from .diagram import render_dot as render_dot
from .diagram import render_image as render_image
from .diagram import render_mermaid as render_mermaid
from .diagram import trace_path as trace_path
from .guards import GUARDS as GUARDS
from .table import STATES as STATES
from .table import TRANSITIONS as TRANSITIONS
from .table import Phase as Phase
from .table import TransitionRow as TransitionRow
from .table import Trigger as Trigger

__all__ = [
    "FORMATS",
    "GUARDS",
    "STATES",
    "TRANSITIONS",
    "Phase",
    "TracePath",
    "TransitionRow",
    "Trigger",
    "read_trace",
    "render",
    "render_dot",
    "render_image",
    "render_mermaid",
    "trace_path",
]
