"""From a contract to a loop's settings, and from a loop's settings back to its contract."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..contract import HANDLER_NAME, UNHANDLED, Contract
from ..errors import ConfigurationError
from ..policy import Approver, Policy, SignalHandler, SuccessCheck
from ..settings import LoopSpec, ToolSpec
from ..signals import DEFAULT_HANDLERS, KNOWN_STOP_REASONS
from ..tools import Handler, Tool
from .config import escalation_tool

if TYPE_CHECKING:
    from .config import LoopConfig

_BUILTIN: dict[str, SignalHandler] = {handler.__name__: handler for handler in DEFAULT_HANDLERS.values()}


def contract_parts(
    contract: Contract,
    *,
    handlers: Mapping[str, Handler],
    signal_handlers: Mapping[str, SignalHandler] | None = None,
    approve: Approver | None = None,
    success: SuccessCheck | None = None,
) -> tuple[LoopSpec, list[Tool]]:
    """The spec a contract declares (its policy with the code's hooks: `approve`, `success` and
    the signal handlers by stop_reason) and its tools bound to `handlers`.

    Raises:
        ConfigurationError: a declared tool has no handler, a handler has no declared tool, or
            a custom signal handler is missing or undeclared.
    """
    spec = contract.spec
    _same_names("tool", {tool.name for tool in spec.tools}, handlers)
    custom = dict(signal_handlers or {})
    _same_names("signal", set(spec.custom_handlers), custom)
    routes: dict[str, SignalHandler | None] = {}
    for stop_reason, name in spec.signals.items():
        routes[stop_reason] = None if name == UNHANDLED else custom.get(name) or _BUILTIN[name]
    hooks = dataclasses.replace(spec.policy, approve=approve, success=success, signal_handlers=routes)
    spec = spec.model_copy(update={"policy": hooks})
    return spec, [declared_tool(tool, handlers[tool.name]) for tool in spec.tools]


def _same_names(kind: str, declared: set[str], given: Mapping[str, object]) -> None:
    missing = sorted(declared - set(given))
    extra = sorted(set(given) - declared)
    problems: list[str] = []
    if missing:
        problems.append(f"no {kind} handler for {', '.join(missing)}, which the contract declares")
    if extra:
        problems.append(f"{kind} handlers for {', '.join(extra)}, which the contract does not declare")
    if problems:
        raise ConfigurationError("from_contract: " + "; ".join(problems))


def declared_tool(declared: ToolSpec, handler: Handler) -> Tool:
    """The `Tool` a declaration stands for, running `handler`."""
    return Tool(
        name=declared.name,
        description=declared.description,
        input_schema=declared.input_schema,
        handler=handler,
        side_effect=declared.side_effect,
        requires_approval=declared.requires_approval,
        timeout_s=declared.timeout_s,
        output_schema=declared.output_schema,
    )


def contract_of(config: LoopConfig) -> Contract:
    """The contract of a loop built in code: what `AgentLoop.to_contract()` returns.

    Raises:
        ConfigurationError: a custom signal handler has no name a contract can hold (a lambda).
    """
    signals: dict[str, str] = {}
    custom: dict[str, SignalHandler] = {}
    for stop_reason, handler in config.signal_handlers.items():
        name = getattr(handler, "__name__", "")
        if _BUILTIN.get(name) is not handler:
            if not HANDLER_NAME.fullmatch(name) or name in _BUILTIN or name == UNHANDLED:
                raise ConfigurationError(
                    f"the signal handler for {stop_reason!r} has no name a contract can hold "
                    f"({name!r}): give it a def named with 1-64 ASCII letters, digits and _, "
                    "not a built-in handler's name"
                )
            if custom.setdefault(name, handler) is not handler:
                raise ConfigurationError(
                    f"two different signal handlers are both named {name!r}: a contract names each once"
                )
        signals[stop_reason] = name
    for stop_reason in sorted(KNOWN_STOP_REASONS - set(signals)):
        signals[stop_reason] = UNHANDLED
    return Contract(spec=spec_of(config, signals, tuple(custom)))


def spec_of(config: LoopConfig, signals: Mapping[str, str], custom_handlers: tuple[str, ...]) -> LoopSpec:
    """The spec of a loop's configuration, its signal handlers by name, without the code:
    the policy's hooks and the escalation tool the loop makes from the policy again."""
    spec = config.spec
    policy = dataclasses.replace(spec.policy, approve=None, success=None, signal_handlers={})
    return LoopSpec.of(
        **{
            **dict(spec),
            "tools": [tool for tool in spec.tools if not _synthesized(tool, policy)],
            "signals": signals,
            "custom_handlers": custom_handlers,
            "policy": policy,
        }
    )


def _synthesized(tool: ToolSpec, policy: Policy) -> bool:
    """The escalation tool the loop made from `Policy.escalation_tool` (not one declared)."""
    if tool.name != policy.escalation_tool:
        return False
    made = escalation_tool(tool.name)
    return (tool.description, tool.input_schema) == (made.description, made.input_schema)
