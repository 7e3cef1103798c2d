"""The public surface: `__all__`, the README's imports, StopReason values, state JSON and unwrap()."""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest

import boundloop
import boundloop.errors
from boundloop import LoopResult, LoopState, Observers, StopReason, Usage
from boundloop.events import BaseEvent
from boundloop.records import ErrorRecord, Exceeded, ModelResponse, Observation, PendingApproval
from boundloop.testing import parse_message
from tests.helpers import assert_valid_transcript, text, tool_use

JSON = dict[str, Any]


# -- no deprecated names ----------------------------------------------------------------

REMOVED: dict[str, tuple[str, ...]] = {
    "boundloop": ("TraceEvent",),
    "boundloop.state": ("CallResult", "StopReason", "ToolCall", "Usage", "Observation", "Turn"),
    "boundloop.checkpoint": ("CheckpointStore", "MemoryStore", "SQLiteStore", "StoredRun"),
    "boundloop.metrics": ("LoopMetrics",),
    "boundloop.contract": ("ContractError",),
    "boundloop.evals": ("FixtureError",),
    "boundloop.statemachine": ("read_trace",),
}
"""Names an unreleased version re-exported at a second place: each has one home now."""


@pytest.mark.parametrize("module", sorted(REMOVED))
def test_a_name_has_no_second_place(module: str) -> None:
    """The names 0.1 never released at a second place are not there (nor warned about)."""
    imported = importlib.import_module(module)
    assert [name for name in REMOVED[module] if hasattr(imported, name)] == []


@pytest.mark.parametrize("module", ["boundloop.trace", "boundloop.handlers"])
def test_the_old_modules_are_gone(module: str) -> None:
    """`boundloop.trace` and `boundloop.handlers` were never released: `boundloop.events`,
    `boundloop.tools` and `boundloop.signals` are the modules."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)


def test_a_result_has_no_old_names() -> None:
    """`LoopResult.events` and `write_events`, not the unreleased `trace` and `write_trace`."""
    assert not hasattr(LoopResult, "trace")
    assert not hasattr(LoopResult, "write_trace")


# -- __all__ -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", boundloop.__all__)
def test_every_name_in_all_is_importable(name: str) -> None:
    """Each name in boundloop.__all__ is an attribute of the package, defined inside boundloop.

    A type alias (`Event`, an `Annotated` union) has no module of its own: every type it is
    made of must be boundloop's."""
    value = getattr(boundloop, name)
    assert value is not None
    if typing.get_origin(value) is typing.Annotated:
        union = typing.get_args(value)[0]
        members = typing.get_args(union)
        assert members, f"{name} is an alias of no union"
        assert all(member.__module__.startswith("boundloop.") for member in members)
    else:
        module = getattr(value, "__module__", "")
        assert module == "boundloop" or module.startswith("boundloop.")


def test_all_is_sorted_and_has_no_duplicates() -> None:
    """__all__ is in sorted order, each name once."""
    assert boundloop.__all__ == sorted(set(boundloop.__all__))


def test_all_lists_every_public_member() -> None:
    """Every public attribute of the package that is not a submodule is in __all__ (httpx's check)."""
    members = {
        name
        for name, value in vars(boundloop).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert sorted(members) == boundloop.__all__


def test_star_import_gives_exactly_all() -> None:
    """`from boundloop import *` binds exactly the names of __all__."""
    namespace: JSON = {}
    exec("from boundloop import *", namespace)
    namespace.pop("__builtins__")
    assert sorted(namespace) == boundloop.__all__


def test_every_loop_exception_is_exported() -> None:
    """Every exception class of boundloop.errors, the documented ones too, is re-exported."""
    exceptions = {
        name
        for name, value in vars(boundloop.errors).items()
        if inspect.isclass(value) and issubclass(value, boundloop.LoopError)
    }
    assert exceptions >= {
        "LoopError",
        "ConfigurationError",
        "ScriptExhausted",
        "UnhandledStop",
        "RunError",
        "BudgetExceeded",
        "RunFailed",
        "Refused",
        "NeedsHuman",
        "RunCancelled",
        "PolicyBlocked",
        "EvidenceMissing",
        "Truncated",
        "ContextExceeded",
    }
    assert exceptions <= set(boundloop.__all__)
    for name in exceptions:
        assert getattr(boundloop, name) is getattr(boundloop.errors, name)


def test_every_warning_of_the_package_is_exported() -> None:
    """Each warning class the package defines (read from the source, so a new one is not missed)
    is re-exported, so `warnings.filterwarnings(..., category=boundloop.X)` needs no submodule."""
    package = Path(boundloop.__file__).parent
    defined = {
        (".".join(path.relative_to(package.parent).with_suffix("").parts), node.name)
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Warning") for b in node.bases)
    }
    assert ("boundloop.prices", "UnpricedModelWarning") in defined
    for module, name in defined:
        assert name in boundloop.__all__, name
        assert getattr(boundloop, name) is getattr(importlib.import_module(module), name)
    assert issubclass(boundloop.UnpricedModelWarning, UserWarning)


def test_the_exception_families_are_separate() -> None:
    """Misuse (ConfigurationError, a ValueError) and run outcomes (RunError) are separate LoopError kinds."""
    errors = boundloop.errors
    assert issubclass(errors.ConfigurationError, ValueError)
    assert not issubclass(errors.ConfigurationError, errors.RunError)
    assert not issubclass(errors.RunError, ValueError)
    for outcome in (errors.BudgetExceeded, errors.PolicyBlocked, errors.NeedsHuman, errors.Truncated):
        assert issubclass(outcome, errors.RunError)
    for root in (errors.UnhandledStop, errors.ScriptExhausted, errors.RunError, errors.ConfigurationError):
        assert issubclass(root, errors.LoopError)


# -- the documented API -----------------------------------------------------------------------


def test_the_design_documents_imports_work() -> None:
    """The names the README's public API uses import from where it says."""
    from boundloop import (  # noqa: F401 - importing them is the test
        AgentLoop,
        Budget,
        LoopMetrics,
        Policy,
        Price,
        RetryableToolError,
        ScriptedClient,
        StopReason,
        ToolContext,
        UnpricedModelWarning,
        tool,
    )
    from boundloop.errors import (  # noqa: F401 - importing them is the test
        BudgetExceeded,
        ConfigurationError,
        LoopError,
        UnhandledStop,
    )

    metrics = importlib.import_module("boundloop.metrics")
    assert callable(metrics.serve)
    assert callable(metrics.asgi_app)
    assert LoopMetrics.__module__ == "boundloop.metrics.instruments"


async def test_the_design_documents_example_runs() -> None:
    """The README's example, on a ScriptedClient, completes with every documented result attribute."""
    from boundloop import AgentLoop, Budget, Policy, ScriptedClient, StopReason, tool

    @tool
    async def read_order(order_id: str) -> dict[str, str]:
        """Read one order by id."""
        return {"id": order_id, "status": "delivered"}

    client = ScriptedClient(
        [tool_use(("read_order", {"order_id": "O-104"})), text("Evidence is sufficient.")]
    )
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[read_order],
        budget=Budget(max_steps=8, max_tool_calls=12, timeout_s=60),
        policy=Policy(forbidden={"issue_refund"}, required_evidence={"read_order"}),
        system="You investigate refund requests.",
        name="refund_investigation",
        observers=Observers(metrics=None),
    )
    result = await loop.run("Decide whether refund evidence is sufficient for order O-104.")
    assert result.stop_reason is StopReason.COMPLETED
    assert isinstance(result.stop_reason, str)
    assert result.stop_reason.value == "completed"
    assert result.answer == "Evidence is sufficient."
    assert result.unwrap() == "Evidence is sufficient."
    assert isinstance(result.state, LoopState)
    assert all(isinstance(event, BaseEvent) for event in result.events)
    assert [m["role"] for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert_valid_transcript(result.messages)
    system = "You investigate refund requests."  # one text block, with the cache breakpoint
    assert client.requests[0]["system"] == [
        {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
    ]
    assert [t["name"] for t in client.requests[0]["tools"]] == ["read_order"]


def test_stop_reason_values_are_exactly_the_designs_list() -> None:
    """StopReason is a str enum whose values are the documented list, in its order."""
    assert issubclass(StopReason, enum.StrEnum)
    assert [reason.value for reason in StopReason] == [
        "completed",
        "failed",
        "refused",
        "needs_human",
        "cancelled",
        "policy_blocked",
        "evidence_missing",
        "max_steps",
        "max_tool_calls",
        "timeout",
        "token_budget",
        "cost_budget",
        "truncated",
        "context_exceeded",
        "tool_failure",
        "invalid_output",
    ]
    assert StopReason("needs_human") is StopReason.NEEDS_HUMAN
    assert str(StopReason.POLICY_BLOCKED) == "policy_blocked"


# -- LoopState JSON ----------------------------------------------------------------------


def full_state() -> LoopState:
    """A state with every field set to something other than its default."""
    response = parse_message(
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "thinking", "thinking": "check first", "signature": "sig=="},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "a"}},
            ],
            "usage": {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 3},
        },
        model="claude-sonnet-4-6",
    )
    return LoopState(
        task_id="task-1",
        trace_id="trace-1",
        goal="Decide for O-104.",
        started_at=1_700_000_000.5,
        step=2,
        tool_calls=3,
        usage=Usage(
            input_tokens=12,
            output_tokens=7,
            cache_read_input_tokens=3,
            cache_creation_input_tokens=1,
            cost_usd=0.25,
        ),
        messages=[
            {"role": "user", "content": "Decide for O-104."},
            {"role": "assistant", "content": response.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "v", "is_error": True}
                ],
            },
        ],
        observations=[
            Observation(
                step=1, tool_use_id="toolu_1", tool="lookup", input={"key": "a"}, outcome="error", content="v"
            )
        ],
        errors=[ErrorRecord(kind="tool_error", step=1, tool="lookup", message="boom")],
        pending_approvals=[
            PendingApproval(tool_use_id="toolu_2", tool="refund", input={"id": "O-104"}, step=2)
        ],
        responses=[
            ModelResponse(
                id=response.id,
                model=response.model,
                stop_reason=response.stop_reason,
                content_json=[
                    block.model_dump(mode="json", exclude_unset=True) for block in response.content
                ],
                usage_json=response.usage.model_dump(mode="json", exclude_unset=True),
            )
        ],
        consecutive_tool_errors=1,
        repeated_calls=1,
        continuations=1,
        stop_reason=StopReason.NEEDS_HUMAN,
        stop_detail="approval required for refund",
        answer=None,
        exceeded=Exceeded(limit="max_steps", value=8, used=8),
    )


def test_loop_state_round_trips_through_json() -> None:
    """from_json(to_json()) rebuilds every field: typed stop reason, usage, SDK responses, approvals."""
    state = full_state()
    restored = LoopState.from_json(state.to_json())
    assert restored.to_dict() == state.to_dict()
    assert restored.stop_reason is StopReason.NEEDS_HUMAN
    assert restored.usage == state.usage
    assert isinstance(restored.responses[0], ModelResponse)
    assert restored.responses[0].content == state.responses[0].content
    assert restored.pending_approvals == state.pending_approvals
    assert restored.exceeded == Exceeded(limit="max_steps", value=8, used=8)
    assert restored.observations == state.observations
    assert restored.errors == state.errors
    assert LoopState.from_json(restored.to_json()).to_json() == restored.to_json()


def test_loop_state_json_is_plain_json() -> None:
    """to_json() writes SDK blocks as the API's dicts and the stop reason as its string."""
    raw = json.loads(full_state().to_json())
    assert raw["stop_reason"] == "needs_human"
    assert raw["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "check first", "signature": "sig=="},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "a"}},
    ]
    assert raw["usage"]["cost_usd"] == 0.25


def test_loop_state_from_json_rejects_a_non_object() -> None:
    """A JSON document that is not an object is not a state."""
    with pytest.raises(ValueError, match="LoopState JSON must be an object"):
        LoopState.from_json("[1, 2]")


# -- LoopResult.unwrap -------------------------------------------------------------------


def result_for(
    reason: StopReason, *, exceeded: Exceeded | None = None, answer: str | None = None
) -> LoopResult:
    """A LoopResult built directly for one stop reason."""
    state = LoopState(
        task_id="t",
        trace_id="tr",
        goal="g",
        started_at=0.0,
        stop_reason=reason,
        stop_detail=f"detail of {reason}",
        answer=answer,
        exceeded=exceeded,
    )
    return LoopResult(stop_reason=reason, answer=answer, state=state, events=[])


UNWRAP_ERRORS: dict[StopReason, type[boundloop.RunError]] = {
    StopReason.FAILED: boundloop.RunFailed,
    StopReason.REFUSED: boundloop.Refused,
    StopReason.NEEDS_HUMAN: boundloop.NeedsHuman,
    StopReason.CANCELLED: boundloop.RunCancelled,
    StopReason.POLICY_BLOCKED: boundloop.PolicyBlocked,
    StopReason.EVIDENCE_MISSING: boundloop.EvidenceMissing,
    StopReason.TRUNCATED: boundloop.Truncated,
    StopReason.CONTEXT_EXCEEDED: boundloop.ContextExceeded,
    StopReason.MAX_STEPS: boundloop.BudgetExceeded,
    StopReason.MAX_TOOL_CALLS: boundloop.BudgetExceeded,
    StopReason.TIMEOUT: boundloop.BudgetExceeded,
    StopReason.TOKEN_BUDGET: boundloop.BudgetExceeded,
    StopReason.COST_BUDGET: boundloop.BudgetExceeded,
    StopReason.TOOL_FAILURE: boundloop.ToolFailed,
    StopReason.INVALID_OUTPUT: boundloop.InvalidOutput,
}


def test_unwrap_covers_every_non_completed_stop_reason() -> None:
    """The table below names an exception for every stop reason but completed."""
    assert set(UNWRAP_ERRORS) == set(StopReason) - {StopReason.COMPLETED}


@pytest.mark.parametrize(
    ("reason", "error"), list(UNWRAP_ERRORS.items()), ids=[str(r) for r in UNWRAP_ERRORS]
)
def test_unwrap_raises_the_typed_exception_for_each_stop_reason(
    reason: StopReason, error: type[boundloop.RunError]
) -> None:
    """unwrap() raises exactly the reason's exception, holding the result and naming reason and detail."""
    result = result_for(reason)
    with pytest.raises(boundloop.RunError) as caught:
        result.unwrap()
    assert type(caught.value) is error
    assert caught.value.result is result
    assert str(caught.value) == f"run stopped: {reason} (detail of {reason})"
    assert result.ok is False


@pytest.mark.parametrize(
    ("reason", "limit"),
    [
        (StopReason.MAX_STEPS, "max_steps"),
        (StopReason.MAX_TOOL_CALLS, "max_tool_calls"),
        (StopReason.TIMEOUT, "timeout_s"),
        (StopReason.TOKEN_BUDGET, "max_total_tokens"),
        (StopReason.COST_BUDGET, "max_cost_usd"),
    ],
)
def test_budget_exceeded_names_the_budget_field(reason: StopReason, limit: str) -> None:
    """BudgetExceeded.limit is the Budget field's name, with value and used from the state when recorded."""
    with pytest.raises(boundloop.BudgetExceeded) as recorded:
        result_for(reason, exceeded=Exceeded(limit=limit, value=5, used=6)).unwrap()
    assert (recorded.value.limit, recorded.value.value, recorded.value.used) == (limit, 5, 6)
    with pytest.raises(boundloop.BudgetExceeded) as unrecorded:
        result_for(reason).unwrap()
    assert (unrecorded.value.limit, unrecorded.value.value, unrecorded.value.used) == (limit, None, None)


def test_unwrap_of_a_completed_result_returns_the_answer() -> None:
    """A completed result unwraps to its answer, or to '' when the model gave no text."""
    assert result_for(StopReason.COMPLETED, answer="yes").unwrap() == "yes"
    assert result_for(StopReason.COMPLETED).unwrap() == ""
    assert result_for(StopReason.COMPLETED).ok is True
