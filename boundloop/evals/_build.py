"""From fixtures to loops: read the case files, and build the `AgentLoop` a case runs on."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

from anthropic.types import Message

from .._core import Observers, declared_tool
from ..checkpoint.store import MemoryStore
from ..errors import ConfigurationError, FixtureError
from ..loop import AgentLoop
from ..model import Model
from ..policy import Policy
from ..testing import Request, ScriptedClient
from ._app import app_loop
from ._fixture import Case, read_case
from ._mocks import DEFAULT_TIMEOUT_S, Mocks

STATE_SUFFIX = ".state.json"
"""A saved `LoopState` next to the fixtures: not a case itself."""


def build_loop(
    case: Case,
    mocks: Mocks | None = None,
    *,
    client: Model | None = None,
    model: str | None = None,
    app: AgentLoop[Any] | None = None,
) -> AgentLoop[Any]:
    """The loop a case runs on: the scripted model, its mocked tools, budget and policy.

    Each call builds a fresh loop, with its own `ScriptedClient` and `MemoryStore` and
    no metrics, so cases run side by side without sharing anything.

    Args:
        case: the case.
        mocks: the mocked results its tools hand out (fresh ones when None).
        client: a live model (an `AsyncAnthropic`) in place of the case's script.
        model: the model's name (default: the case's `model_name`; with `app`, the app's).
        app: the application's loop: the case runs through a copy of it (its model, prompt,
            tools, policy, budget, settings), the fixture's mocks replacing the tools they name
            and the fixture's script (if any) the model (`boundloop eval --loop`).

    Raises:
        ConfigurationError: the case's tools, budget or policy do not make a valid loop.
    """
    mocks = mocks if mocks is not None else Mocks(case.mocked, case.names)
    script = _script(case, mocks)
    if app is not None:
        serving = ScriptedClient(script, model=model or app.model)
        built = app_loop(app, case, mocks, serving if client is None else client, model)
        mocks.redact = built.config.redactor
        return built
    tools = [
        declared_tool(
            spec
            if spec.timeout_s is not None
            else spec.model_copy(update={"timeout_s": _timeout(case, spec.name)}),
            mocks.handler(spec.name),
        )
        for spec in case.tools
    ]
    name = case.model_name if model is None else model
    scripted = ScriptedClient(script, model=name)
    loop = AgentLoop(
        scripted if client is None else client,
        model=name,
        tools=tools,
        budget=case.budget,
        policy=Policy(**case.policy),
        system=case.system,
        name="eval",
        observers=Observers(metrics=None),
        store=MemoryStore(),
    )
    mocks.redact = loop.config.redactor
    return loop


def _script(case: Case, mocks: Mocks) -> list[Callable[[Request], Message | Awaitable[Message]]]:
    """The case's turns, then (with a cut) the call that cuts the run, as the recorded one was."""
    script: list[Callable[[Request], Message | Awaitable[Message]]] = [
        _serving(mocks, turn) for turn in case.turns
    ]
    cut = mocks.cut
    if cut is not None:

        async def reached(_: Request) -> Message:
            await cut.reached()

        script.append(reached)
    return script


def _serving(mocks: Mocks, turn: Message) -> Callable[[Request], Message]:
    """A scripted turn that tells the mocks which calls it holds when it is served."""
    return lambda _: mocks.serve(turn)


def _timeout(case: Case, tool: str) -> float | None:
    """A mocked `timeout` needs a deadline to end: the budget's, else a short default."""
    if case.budget.tool_timeout_s is not None:
        return None
    times_out = any(result["status"] == "timeout" for result in case.mocked.get(tool, ()))
    return DEFAULT_TIMEOUT_S if times_out else None


def parse_case(raw: object, *, source: Path | None = None) -> Case:
    """Check one fixture (a parsed JSON object) and build its `Case`.

    Args:
        raw: the fixture.
        source: the file it came from; a relative `state` path is read from its folder.

    Raises:
        FixtureError: the fixture does not match the schema, two tool names map to one API
            name, a model turn is not a valid response, or its tools, budget or policy do
            not make a valid loop.
    """
    case = read_case(raw, source=source)
    try:
        build_loop(case)
    except ConfigurationError as exc:
        raise FixtureError([str(exc)]) from None
    return case


def load_cases(*paths: str | Path) -> list[Case]:
    """Read every case in these files and folders.

    A folder holds its `*.json` files, recursively, except saved states (`*.state.json`),
    which cases name in their `state` field.

    Raises:
        FixtureError: a file is missing or not JSON, a case is invalid, or two share an id;
            every problem is listed, each with its file and field.
    """
    problems: list[str] = []
    unreadable: list[str] = []
    cases: list[Case] = []
    seen: dict[str, Path] = {}
    for path in _files(paths, problems):
        try:
            raw: object = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            unreadable.append(f"{path} is not JSON: {exc}")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            unreadable.append(f"cannot read {path}: {exc}")
            continue
        items = cast(list[object], raw) if isinstance(raw, list) else [raw]
        for index, item in enumerate(items):
            where = f"{path}" if not isinstance(raw, list) else f"{path}[{index}]"
            try:
                case = parse_case(item, source=path)
            except FixtureError as exc:
                problems += [f"{where}: {problem}" for problem in exc.problems]
                continue
            if case.case_id in seen:
                problems.append(f"{where}: case_id {case.case_id!r} is already used by {seen[case.case_id]}")
                continue
            seen[case.case_id] = path
            cases.append(case)
    if problems or unreadable:
        raise FixtureError(unreadable + problems, unreadable=unreadable)
    return cases


def _files(paths: Iterable[str | Path], problems: list[str]) -> Iterator[Path]:
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(file for file in path.rglob("*.json") if not file.name.endswith(STATE_SUFFIX))
            if not found:
                problems.append(f"{path}: no *.json fixtures in this folder")
            yield from found
        elif path.is_file():
            yield path
        else:
            problems.append(f"{path}: no such file or folder")
