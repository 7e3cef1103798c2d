"""From a contract to a loop's settings, and from a loop's settings back to its contract."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..contract import HANDLER_NAME, UNHANDLED, Contract, ContractTool
from ..errors import ConfigurationError
from ..policy import Approver, Policy, SuccessCheck
from ..signals import DEFAULT_HANDLERS, KNOWN_STOP_REASONS, SignalHandler
from ..state import Budget
from ..tools import Handler, Tool
from .config import escalation_tool

if TYPE_CHECKING:
    from .config import LoopConfig

_BUILTIN: dict[str, SignalHandler] = {handler.__name__: handler for handler in DEFAULT_HANDLERS.values()}


def loop_settings(
    contract: Contract,
    *,
    handlers: Mapping[str, Handler],
    signal_handlers: Mapping[str, SignalHandler] | None = None,
    approve: Approver | None = None,
    success: SuccessCheck | None = None,
) -> dict[str, Any]:
    """The `AgentLoop` keyword arguments a contract stands for (all but the client and wiring).

    Raises:
        ConfigurationError: a declared tool has no handler, a handler has no declared tool, or
            a custom signal handler is missing or undeclared.
    """
    _same_names("tool", {tool.name for tool in contract.tools}, handlers)
    custom = dict(signal_handlers or {})
    _same_names("signal", set(contract.custom_handlers), custom)
    routes: dict[str, SignalHandler | None] = {}
    for stop_reason, name in contract.signals.items():
        routes[stop_reason] = None if name == UNHANDLED else custom.get(name) or _BUILTIN[name]
    policy = dict(contract.policy)
    on_tool_error = policy.pop("on_tool_error", "report")
    settings: dict[str, Any] = {
        "model": contract.model,
        "tools": [declared_tool(tool, handlers[tool.name]) for tool in contract.tools],
        "budget": Budget(**contract.budget),
        "policy": Policy(**policy, approve=approve, success=success),
        "system": contract.system,
        "name": contract.name,
        "on_tool_error": on_tool_error,
        "signal_handlers": routes,
    }
    if contract.max_tokens is not None:
        settings["max_tokens"] = contract.max_tokens
    if contract.max_tool_output_chars is not None:
        settings["max_tool_output_chars"] = contract.max_tool_output_chars
    if not contract.metrics:
        settings["metrics"] = None
    return settings


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


def declared_tool(declared: ContractTool, handler: Handler) -> Tool:
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
    policy = config.policy
    return Contract(
        name=config.name,
        model=config.model,
        system=config.system,
        max_tokens=config.max_tokens,
        tools=tuple(
            ContractTool(
                name=tool.name,
                description=tool.description,
                input_schema=tool.input_schema,
                output_schema=tool.output_schema,
                side_effect=tool.side_effect,
                requires_approval=tool.requires_approval,
                timeout_s=tool.timeout_s,
            )
            for tool in config.tools.values()
            if not _synthesized(tool, policy)  # the loop adds it from the policy again
        ),
        signals=signals,
        custom_handlers=tuple(custom),
        budget={key: value for key, value in dataclasses.asdict(config.budget).items() if value is not None},
        policy=_policy(policy, config.on_tool_error),
        metrics=config.metrics is not None,
        max_tool_output_chars=config.max_tool_output_chars,
    )


def _synthesized(tool: Tool, policy: Policy) -> bool:
    """The escalation tool the loop made from `Policy.escalation_tool` (not one declared)."""
    if tool.name != policy.escalation_tool:
        return False
    made = escalation_tool(tool.name)
    return (tool.description, tool.input_schema) == (made.description, made.input_schema)


def _policy(policy: Policy, on_tool_error: str) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for field in ("allowed", "forbidden", "requires_approval", "required_evidence"):
        names: frozenset[str] | None = getattr(policy, field)
        if names is not None and (names or field == "allowed"):
            document[field] = sorted(names)
    if policy.escalation_tool is not None:
        document["escalation_tool"] = policy.escalation_tool
    for field in ("on_forbidden", "on_missing_evidence", "on_max_tokens", "max_continuations"):
        document[field] = getattr(policy, field)
    document["on_tool_error"] = on_tool_error
    return document


ToolHandlers = Mapping[str, Callable[..., object]]
"""Tool handlers by tool name, for `AgentLoop.from_contract`."""
