"""The loop's state machine: the transition table, its guards, and diagrams drawn from it.

The diagram names (`render`, `trace_path`, ...) are imported on first use (PEP 562's module
`__getattr__`): the diagrams need `transitions`' graph extension, which a run, or a program
that only reads `Phase` through `boundloop.state`, does not.
"""

from __future__ import annotations

import typing

from .guards import GUARDS as GUARDS
from .table import STATES as STATES
from .table import TRANSITIONS as TRANSITIONS
from .table import Phase as Phase
from .table import TransitionRow as TransitionRow
from .table import Trigger as Trigger

if typing.TYPE_CHECKING:
    from .diagram import FORMATS as FORMATS
    from .diagram import TracePath as TracePath
    from .diagram import render as render
    from .diagram import render_dot as render_dot
    from .diagram import render_image as render_image
    from .diagram import render_mermaid as render_mermaid
    from .diagram import trace_path as trace_path

__all__ = [
    "FORMATS",
    "GUARDS",
    "STATES",
    "TRANSITIONS",
    "Phase",
    "TracePath",
    "TransitionRow",
    "Trigger",
    "render",
    "render_dot",
    "render_image",
    "render_mermaid",
    "trace_path",
]

_DIAGRAM: typing.Final = frozenset(
    {"FORMATS", "TracePath", "render", "render_dot", "render_image", "render_mermaid", "trace_path"}
)
"""The names `boundloop.statemachine.diagram` defines, imported on first use."""

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error

    def __getattr__(name: str) -> object:
        if name in _DIAGRAM:
            from . import diagram

            value = getattr(diagram, name)
            globals()[name] = value  # bound: the next use is a plain lookup
            return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
