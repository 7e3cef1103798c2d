"""Start-up: `import boundloop`, `boundloop --help` and the names a tools module imports load no SDK.

Structural checks, in fresh interpreters, of which modules get imported (timings vary by machine;
what is imported does not). The public names are loaded on first use, each from its own module
(`boundloop.__getattr__`): the checks below also hold that laziness to the eager imports it
replaced.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import boundloop

ROOT = Path(__file__).resolve().parents[1]

SDK = {"anthropic", "httpx", "httpx2"}
"""The Anthropic SDK and the HTTP client under it."""

HEAVY = SDK | {
    "pydantic",
    "pydantic_core",
    "jsonschema",
    "prometheus_client",
    "transitions",
    "graphviz",
    "rich",
    "anyio",
    "psycopg",
    "psycopg_pool",
}
"""What a plain import or `--help` need not load (psycopg: only a `--store postgresql://...`)."""


def loaded(code: str, *args: str) -> set[str]:
    """The top-level packages among `HEAVY` a fresh interpreter has imported after `code`."""
    probe = f"{code}\nimport sys\nprint(sorted({{m.split('.')[0] for m in sys.modules}}))"
    ran = subprocess.run(
        [sys.executable, "-c", probe, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert ran.returncode == 0, ran.stderr
    modules: list[str] = ast.literal_eval(ran.stdout.strip().splitlines()[-1])
    return set(modules) & HEAVY


def test_import_boundloop_loads_no_sdk() -> None:
    """`import boundloop` imports neither the SDK nor pydantic, jsonschema, prometheus_client, graphviz,
    transitions, rich or anyio."""
    assert loaded("import boundloop") == set()
    script = (
        "import boundloop, sys; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'anthropic','httpx','httpx2'}))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout == "[]\n"


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], ["demo", "--help"], ["run", "--help"], ["eval", "--help"], ["nope"]],
    ids=["help", "version", "demo-help", "run-help", "eval-help", "usage-error"],
)
def test_the_commands_help_loads_no_sdk(argv: list[str]) -> None:
    """`boundloop --help`, a command's `--help` and a usage error build the parser and stop: no
    subcommand is imported, nor the SDK or a heavy library."""
    code = "import sys\nfrom boundloop.cli import main\nmain(sys.argv[1:])"
    assert loaded(code, *argv) == set()


def test_the_console_script_loads_no_sdk() -> None:
    """`boundloop --help` as installed (the console script), read from `-X importtime`."""
    script = Path(sys.executable).with_name("boundloop")
    ran = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("usage: boundloop")
    imported = {line.rpartition("|")[2].strip().split(".")[0] for line in ran.stderr.splitlines()}
    assert "boundloop" in imported
    assert imported & HEAVY == set()


def test_the_records_and_the_state_load_no_sdk() -> None:
    """The state, its records, the model protocol and the scripted client import the SDK's types
    for type checking only; a state is still read and written through pydantic with the SDK's
    `Message` rebuilt on first use. (The events are pydantic models: they load pydantic.)"""
    modules = "boundloop.state, boundloop.records, boundloop.model, boundloop.testing"
    assert loaded(f"import {modules}") & (SDK | {"pydantic"}) == set()


TOOLS_MODULE_NAMES = "tool, Tool, Budget, Policy, LoopState, Event, MemoryStore, SQLiteStore"
"""What a user's tools module or a store script imports from the package."""

DRIVE_A_LOOP = {
    "AgentLoop",
    "RunStream",
    "StreamStatistics",
    "Divergence",
    "ReplayReport",
    "replay",
    "LoopSpec",
    "ModelSettings",
    "Compaction",
    "ContextManagement",
}
"""The public names whose modules call the SDK (`replay` drives a loop), and the spec of a loop,
whose `ModelSettings` and `Compaction` edits are typed with the SDK's own param types: the only
ones that load it."""


def test_the_names_of_a_tools_module_load_no_sdk() -> None:
    """`from boundloop import tool, Budget, Policy, ...` does not import the SDK: its types are
    imported for type checking only on that path, and `AgentLoop` is not loaded with them."""
    assert loaded(f"from boundloop import {TOOLS_MODULE_NAMES}") & SDK == set()


def test_the_state_and_the_policy_load_no_heavy_library() -> None:
    """The limits, the state and the policy load neither pydantic nor the state machine's
    diagrams (`transitions`' graph extension and graphviz)."""
    assert loaded("from boundloop import Budget, LoopState, Policy") == set()


def test_only_the_names_that_drive_a_loop_load_the_sdk() -> None:
    """Each public name but `AgentLoop` and replay's is used in turn in one fresh interpreter, and
    the SDK is still not imported after any of them; then `AgentLoop` imports it."""
    light = sorted(set(boundloop.__all__) - DRIVE_A_LOOP)
    code = f"""
import sys
import boundloop
for name in {light!r}:
    getattr(boundloop, name)
    assert "anthropic" not in sys.modules, f"boundloop.{{name}} imported the SDK"
boundloop.AgentLoop
assert "anthropic" in sys.modules
"""
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert ran.returncode == 0, ran.stderr


AGENT_LOOP_MODULES = 60
"""At most this many of the package's modules load with `from boundloop import AgentLoop`."""

NOT_FOR_A_LOOP = (
    "boundloop.contract._lint",
    "boundloop.contract._lint_rules",
    "boundloop.contract._compile",
    "boundloop.contract._review",
    "boundloop.contract._rules",
    "boundloop.statemachine.diagram",
    "boundloop.metrics.exposition",
    "boundloop._core.driver",
    "graphviz",
)
"""What a loop's import does not load: the linter, the compiler, the contract review, the
diagrams and graphviz, the metrics' servers, and the runtime (loaded with the first run)."""


def test_agent_loop_loads_a_bounded_part_of_the_package() -> None:
    """`from boundloop import AgentLoop` in a fresh interpreter loads at most 60 of the package's
    modules and none of `NOT_FOR_A_LOOP`; building a loop from a contract and running it then load
    what they use (the contract's parts, the driver)."""
    code = f"""
import sys
from boundloop import AgentLoop
print(sorted(m for m in sys.modules if m == "boundloop" or m.startswith("boundloop.")))
print(sorted(m for m in {NOT_FOR_A_LOOP!r} if m in sys.modules))
"""
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert ran.returncode == 0, ran.stderr
    modules, absent = (ast.literal_eval(line) for line in ran.stdout.strip().splitlines())
    assert len(modules) <= AGENT_LOOP_MODULES, modules
    assert absent == []


def test_a_run_loads_the_runtime_on_first_use() -> None:
    """The runtime the import left out loads with the first run, and the run completes."""
    code = """
import sys
import anyio
from boundloop import AgentLoop, Budget, Observers, ScriptedClient
assert "boundloop._core.driver" not in sys.modules
answer = {"stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}]}
client = ScriptedClient([answer])
loop = AgentLoop(client, model="claude-sonnet-4-6", budget=Budget(max_steps=2),
                 observers=Observers(metrics=None))
assert anyio.run(loop.run, "go").answer == "done"
assert "boundloop._core.driver" in sys.modules
"""
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert ran.returncode == 0, ran.stderr


def test_a_state_round_trips_in_a_fresh_process() -> None:
    """The adapter built lazily still reads the responses back, each building its SDK `Message`."""
    code = """
from boundloop.state import LoopState
from boundloop.testing import parse_message
from anthropic.types import Message
from boundloop.records import ModelResponse
response = parse_message({"stop_reason": "end_turn", "content": [{"type": "text", "text": "hi"}]})
state = LoopState(task_id="t", trace_id="r", goal="g", started_at=0.0,
                  messages=[{"role": "user", "content": "g"}], responses=[response])
again = LoopState.from_json(state.to_json())
assert isinstance(again.responses[0], ModelResponse), again.responses
assert isinstance(again.responses[0].message(), Message)
import json
assert json.loads(again.to_json()) == json.loads(state.to_json())  # the same JSON (keys in its own order)
"""
    assert "anthropic" in loaded(code)


# -- the lazy public names ---------------------------------------------------------------


def _typing_imports() -> dict[str, str]:
    """`{name: module}` of the imports under `if typing.TYPE_CHECKING:` in boundloop/__init__.py."""
    tree = ast.parse((ROOT / "boundloop" / "__init__.py").read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "typing.TYPE_CHECKING"
    )
    found: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.unparse(node)
        for alias in node.names:
            assert alias.asname == alias.name, "a re-export is spelled `import X as X`"
            found[alias.name] = "." * node.level + (node.module or "")
    return found


def test_type_checkers_and_the_runtime_see_the_same_names() -> None:
    """The imports type checkers read, the names loaded at run time and `__all__` agree."""
    sources: dict[str, str] = vars(boundloop)["_SOURCES"]
    assert _typing_imports() == sources
    assert sorted(sources) == boundloop.__all__


@pytest.mark.parametrize("name", boundloop.__all__)
def test_each_name_is_its_modules_own(name: str) -> None:
    """`boundloop.X` is the very object its module defines."""
    module = importlib.import_module(vars(boundloop)["_SOURCES"][name], "boundloop")
    assert getattr(boundloop, name) is getattr(module, name)


def test_submodules_and_unknown_names() -> None:
    """A submodule is an attribute even before it is imported (as when everything was imported
    eagerly); an unknown name is an AttributeError; `dir()` lists the public names."""
    code = """
import boundloop
assert boundloop.errors.LoopError is boundloop.LoopError
assert boundloop.replay.__module__ == "boundloop._replay" and callable(boundloop.replay)
assert not hasattr(boundloop, "nope")
assert not hasattr(boundloop, "__nope__")
assert {"AgentLoop", "tool", "__version__"} <= set(dir(boundloop))
"""
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize(
    "first",
    ["import boundloop.evals", "from boundloop import Divergence", "import boundloop._replay"],
    ids=["a-module-importing-replay", "another-name-of-replay", "its-module"],
)
def test_replay_stays_the_function_whatever_imports_its_module(first: str) -> None:
    """`boundloop.replay` is the function, whatever imported its module (`_replay`) first."""
    code = f"""
{first}
import boundloop
from boundloop import replay
assert callable(boundloop.replay) and boundloop.replay is replay, boundloop.replay
assert replay.__module__ == "boundloop._replay"
"""
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr


def test_the_state_machine_package_loads_its_diagrams_on_first_use() -> None:
    """`boundloop.statemachine`'s diagram names are the diagram module's own, its submodules are
    attributes, and an unknown name is an AttributeError."""
    import boundloop.statemachine as machine
    from boundloop.statemachine import diagram

    assert machine.render is diagram.render
    assert machine.trace_path is diagram.trace_path
    assert machine.FORMATS is diagram.FORMATS
    assert vars(machine)["render"] is diagram.render  # bound: the next use is a plain lookup
    assert machine.diagram is diagram
    assert machine.guards.GUARDS is machine.GUARDS
    assert sorted(machine.__all__) == sorted(set(dir(machine)) & set(machine.__all__))
    for name in ("nope", "__nope__"):
        with pytest.raises(AttributeError):
            getattr(machine, name)
