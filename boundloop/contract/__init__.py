"""Loop contracts: a loop declared in JSON, checked, compiled; and a lint for hand-written loops.

A contract (`loop-contract.schema.json`) names the model, the system prompt, the tools, the
stop_reason -> signal handler map, the budget, the policy (inline or a `loop-policy.json` file) and
the metrics. `check_contract` applies the schemas and the loop's rules;
`AgentLoop.from_contract` builds the loop; `AgentLoop.to_contract` writes one back.

Each name below is imported on first use, from its own module (as `boundloop`'s are): a loop that
reads a contract does not load the linter, the compiler or the review's diagrams.
"""

from __future__ import annotations

import typing

from .._lazy import lazy_getattr as _lazy_getattr
from .._lazy import public_names as _public_names

if typing.TYPE_CHECKING:
    from ._check import BUILTIN_HANDLERS as BUILTIN_HANDLERS
    from ._check import CONTRACT_SCHEMA as CONTRACT_SCHEMA
    from ._check import HANDLER_NAME as HANDLER_NAME
    from ._check import POLICY_SCHEMA as POLICY_SCHEMA
    from ._check import UNHANDLED as UNHANDLED
    from ._check import Problem as Problem
    from ._compile import compile_module as compile_module
    from ._contract import Contract as Contract
    from ._contract import check_contract as check_contract
    from ._contract import load_contract as load_contract
    from ._lint import RULES as LINT_RULES  # noqa: F401  # pyright: ignore[reportUnusedImport]  (a renamed export)
    from ._lint import Finding as Finding
    from ._lint import lint_paths as lint_paths
    from ._lint import lint_source as lint_source
    from ._review import compile_report as compile_report
    from ._rules import RULES as RULES

_SOURCES: typing.Final[dict[str, str]] = _public_names(__file__)
"""Where each public name is defined, relative to the package: what `__getattr__` imports."""

__all__ = sorted(_SOURCES)  # pyright: ignore[reportUnsupportedDunderAll]

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__ = _lazy_getattr(__name__, globals(), _SOURCES)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
