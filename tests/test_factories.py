"""The events and records a run builds by position (for speed): one factory each, beside the
class, its fields in a pinned order; and a failing tool recorded as the tool's failure, not as a
human's decision."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from collections.abc import Callable, Collection, Iterator

import pytest

from boundloop import MemoryStore, tool
from boundloop.events import CallDecision, Proposal, ToolResult, ToolStarted, Transition, Validation
from boundloop.records import CallResult, ModelResponse, Observation, ToolCall, Turn
from tests.helpers import scripted_loop, text, tool_use
from tests.test_resume import TWO_REFUNDS, Ledger
from tests.test_resume import make_loop as refund_loop
from tests.test_structure import MODULES

HEADER = ["seq", "task_id", "at", "step"]

POSITIONAL_FIELDS: dict[type, list[str]] = {
    Transition: [*HEADER, "source", "dest", "trigger", "duration_s"],
    Proposal: [
        *HEADER,
        "stop_reason",
        "tools",
        "duration_s",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "server_tool_uses",
        "final_answer",
        "response",
    ],
    ToolResult: [
        *HEADER,
        "tool",
        "tool_use_id",
        "outcome",
        "is_error",
        "by_human",
        "reason",
        "attempts",
        "duration_s",
        "input",
        "content",
    ],
    Validation: [*HEADER, "decision", "stop_reason", "reason", "calls"],
    ToolStarted: [*HEADER, "calls"],
    CallDecision: ["tool", "tool_use_id", "decision", "reason"],
    ToolCall: ["id", "name", "input", "step"],
    CallResult: ["call", "outcome", "content", "duration_s", "attempts", "by_human", "reason"],
    Turn: [
        "calls",
        "keys",
        "answers",
        "decisions",
        "invoked",
        "same_as",
        "answered",
        "awaiting_human",
        "final",
    ],
    Observation: ["step", "tool_use_id", "tool", "input", "outcome", "content", "attempts", "by_human"],
    ModelResponse: [
        "id",
        "model",
        "stop_reason",
        "content_json",
        "usage_json",
        "stop_sequence",
        "extra_json",
    ],
}
"""Each positionally built class -> its fields that take a position, in order. Its factory (`of`)
passes them by position: a reordered declaration fails here before it swaps two values."""


@pytest.mark.parametrize("cls", list(POSITIONAL_FIELDS), ids=lambda cls: cls.__name__)
def test_the_field_order_of_a_positionally_built_class_is_pinned(cls: type) -> None:
    positional = [field.name for field in dataclasses.fields(cls) if field.init and not field.kw_only]
    assert positional == POSITIONAL_FIELDS[cls]


FACTORIES: list[Callable[..., object]] = [
    Transition.of,
    Proposal.of,
    ToolResult.of,
    Validation.of,
    ToolStarted.of,
    CallDecision.of,
    ToolCall.of,
    CallResult.of,
    Turn.of,
    ModelResponse.of,
]
"""The factories that take each field by name (Observation's takes a `CallResult`)."""


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda factory: factory.__qualname__)
def test_the_factory_puts_each_named_value_in_its_field(factory: Callable[..., object]) -> None:
    """Every parameter of a factory gets a value of its own (a distinct object), and the built
    object holds each in the field of that name: no two fields trade values."""
    values: dict[str, object] = {name: object() for name in inspect.signature(factory).parameters}
    if factory == Turn.of:
        values["calls"] = [object(), object()]
    built = factory(**values)
    assert [name for name, value in values.items() if getattr(built, name) is not value] == []
    if isinstance(built, Turn):
        assert built.answers == [None, None]  # one per call, none decided yet


async def test_a_failing_tool_and_a_humans_decisions_are_told_apart() -> None:
    """A tool that raises is recorded `is_error=True, by_human=False`; on resume, the call a human
    approved runs and is recorded as the tool's (`by_human=False`), the one a human denied is
    recorded `by_human=True` with the reason."""

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        raise RuntimeError(f"no {key}")

    run = await scripted_loop([tool_use(("lookup", {"key": "a"})), text("gave up")], [lookup]).run("Look.")
    [failed] = [event for event in run.events if isinstance(event, ToolResult)]
    assert (failed.outcome, failed.is_error, failed.by_human) == ("error", True, False)
    assert run.state.observations[0].by_human is False

    store = MemoryStore()
    await refund_loop([TWO_REFUNDS], store, Ledger()).run("Refund?", task_id="t")
    later = refund_loop([text("done")], store, Ledger())
    resumed = await later.resume("t", approvals={"toolu_r1": True, "toolu_r2": "over the limit"})
    results = {event.tool_use_id: event for event in resumed.events if isinstance(event, ToolResult)}
    approved, denied = results["toolu_r1"], results["toolu_r2"]
    assert (approved.outcome, approved.is_error, approved.by_human) == ("ok", False, False)
    assert (denied.outcome, denied.is_error, denied.by_human) == ("denied", True, True)
    assert denied.reason == "over the limit"


RECORDED = ("boundloop.events", "boundloop.records", "boundloop.state", "boundloop._core", "boundloop.pools")
"""The modules whose values a run records, checkpoints or spends by: its events and records,
the core's values, the pools' ledgers."""


def _positional_classes() -> dict[str, type]:
    """Every dataclass of `RECORDED`, by name, that takes two fields of one type by position:
    swapped, they pass the type checkers (fields of different types they catch)."""
    found: dict[str, type] = {}
    for module in (name for name in MODULES if name.startswith(RECORDED)):
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == module:
                types = [
                    str(field.type) for field in dataclasses.fields(value) if field.init and not field.kw_only
                ]
                if len(types) > len(set(types)):
                    found[value.__name__] = value
    return found


def _built_by_position(source: str, where: str, classes: Collection[str]) -> Iterator[str]:
    """Each call of one of `classes` with two or more positional arguments, outside the function
    named `of` of the class of that name (its factory)."""

    def visit(node: ast.AST, owner: str | None, function: str | None) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, child.name, None)
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(child, owner, child.name)
                continue
            if isinstance(child, ast.Call) and len(child.args) >= 2:
                func = child.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name in classes and not (function == "of" and owner == name):
                    yield f"{where}:{child.lineno} builds {name} by position"
            yield from visit(child, owner, function)

    yield from visit(ast.parse(source), None, None)


def test_only_a_classs_own_factory_builds_it_by_position() -> None:
    """A dataclass of the package that takes two fields of one type by position is built so only
    in its `of`, and each such factory's class is pinned above; everywhere else each value is
    named, so no reordering of the fields can swap two of them unseen."""
    classes = _positional_classes()
    built = [
        found
        for module, path in MODULES.items()
        for found in _built_by_position(path.read_text(encoding="utf-8"), module, classes)
    ]
    assert built == []
    assert {cls for cls in classes.values() if "of" in vars(cls)} - set(POSITIONAL_FIELDS) == set()


def test_the_positional_rule_finds_what_it_is_for() -> None:
    """The rule itself: a call by position outside the factory is found; the factory's own call,
    and calls by name or with one argument, are not."""
    source = (
        "class Held:\n"
        "    @classmethod\n"
        "    def of(cls, a, b):\n"
        "        return Held(a, b)\n"
        "def reserve(a, b):\n"
        "    return Held(a, b), Held(a=a, b=b), Held(a)\n"
    )
    assert list(_built_by_position(source, "pools.store", {"Held"})) == [
        "pools.store:6 builds Held by position"
    ]
