"""docs/architecture.md is true: its floors, its seam table, its tables of the machine, the state
and the events are read from the document and held against the code, and each rule it states
names a test that exists."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import typing

import boundloop._core
from boundloop._core.driver import WORK
from boundloop.events import EVENT_KINDS, BaseEvent, Event
from boundloop.state import LoopState
from boundloop.statemachine.guards import GUARDS
from boundloop.statemachine.table import TRANSITIONS
from tests.test_structure import MODULES, PACKAGE, TYPE_GRAPH

ROOT = PACKAGE.parent
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")

GROUND, FLOOR_1, OBSERVERS, CORE, CALLERS, TOP = range(6)
FLOORS = {
    GROUND: (
        "_base",
        "_lazy",
        "errors",
        "events",
        "model",
        "records",
        "state",
        "statemachine",
        "transcript",
    ),
    FLOOR_1: (
        "_base.cache",
        "_base.field_schema",
        "_base.mcp_spec",
        "_base.model_settings",
        "_base.output",
        "_base.price",
        "_base.route",
        "_base.schemas",
        "_base.scripted_stream",
        "_base.simulated",
        "_base.sdk_tools",
        "_base.server_tools",
        "_base.tool_input",
        "_base.tool_output",
        "compaction",
        "contract",
        "platforms",
        "policy",
        "pools",
        "prices",
        "redaction",
        "settings",
        "signals",
        "testing",
        "tools",
    ),
    OBSERVERS: ("checkpoint", "metrics", "otel"),
    CORE: ("_core",),
    CALLERS: ("_replay", "evals", "integrations", "loop", "mcp"),
    TOP: ("__main__", "cli", "web"),
}
"""Each floor's modules and packages, as the layer drawing of docs/architecture.md shows them
(the longest name that matches wins: `_base` and its ground-floor helpers, such as
`_base.recorded`, are on the ground floor, the helpers of floor 1 are named)."""


def floor_of(module: str) -> int:
    """The floor of a module of the package (`boundloop` itself is the top)."""
    name = module.removeprefix("boundloop").removeprefix(".")
    if not name:
        return TOP
    found = [
        (len(prefix), floor)
        for floor, prefixes in FLOORS.items()
        for prefix in prefixes
        if name == prefix or name.startswith(prefix + ".")
    ]
    assert found, f"{module} is on no floor: add it to FLOORS and to the drawing in docs/architecture.md"
    return max(found)[1]


def floor_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that points up a floor. The observers stand beside the core on the two
    bottom floors: they import those floors and their own package only."""
    found: list[str] = []
    for name, targets in sorted(graph.items()):
        floor = floor_of(name)
        for target in sorted(targets - {"boundloop"}):
            target_floor = floor_of(target)
            if floor == OBSERVERS and target_floor == OBSERVERS:
                allowed = target.split(".")[1] == name.split(".")[1]
            else:
                allowed = target_floor <= (FLOOR_1 if floor == OBSERVERS else floor)
            if not allowed:
                found.append(f"{name} (floor {floor}) imports {target} (floor {target_floor})")
    return found


def test_each_floor_imports_only_its_own_floor_and_the_floors_below() -> None:
    """The drawing of the layers holds: no module imports a floor above its own (type-only
    imports count, except the one `errors.py` names), and the observers import neither the core,
    one another, nor anything above; every module is on a floor."""
    graph = {name: set(targets) for name, targets in TYPE_GRAPH.items()}
    assert floor_violations(graph) == []
    assert sorted({floor_of(name) for name in MODULES}) == list(range(6))


def test_the_floor_rule_finds_what_it_is_for() -> None:
    """The rule itself: a floor-1 module importing the core, an observer importing the core or
    another observer, and a ground module importing floor 1 are found; imports down are not."""
    graph = {
        "boundloop.tools": {"boundloop._core", "boundloop.errors"},
        "boundloop.metrics.observer": {"boundloop.otel", "boundloop._core", "boundloop.metrics._store"},
        "boundloop.state": {"boundloop._base.cache", "boundloop._base.finite"},
        "boundloop.loop": {"boundloop._core", "boundloop.mcp", "boundloop.tools"},
    }
    assert floor_violations(graph) == [
        "boundloop.metrics.observer (floor 2) imports boundloop._core (floor 3)",
        "boundloop.metrics.observer (floor 2) imports boundloop.otel (floor 2)",
        "boundloop.state (floor 0) imports boundloop._base.cache (floor 1)",
        "boundloop.tools (floor 1) imports boundloop._core (floor 3)",
    ]


def test_the_drawing_names_every_module_of_the_root() -> None:
    """The layer drawing names each module and package at the root of the package (`tools.py`,
    `cli/`), so a new one is drawn on its floor."""
    drawing = ARCHITECTURE.split("## The layers", 1)[1].split("```", 2)[1]
    entries = [
        f"{path.stem}.py" if path.is_file() else f"{path.name}/"
        for path in sorted(PACKAGE.iterdir())
        if path.suffix == ".py" or (path / "__init__.py").is_file()
    ]
    assert [entry for entry in entries if not re.search(rf"(?<![\w/]){re.escape(entry)}", drawing)] == []


def test_records_import_nothing_of_the_package() -> None:
    """`records.py`, the typed records of a run, imports nothing of ours, even for type checking."""
    assert TYPE_GRAPH["boundloop.records"] == set()


def table(heading: str) -> list[list[str]]:
    """The rows of the document's table whose header row is `heading`, as lists of cells."""
    block = ARCHITECTURE.split(heading + "\n", 1)[1].split("\n\n", 1)[0]
    return [
        [cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in block.splitlines()[1:]
    ]


def _unit(path: str) -> str:
    """A module's file (`loop/_contract.py`) as the seam table names its caller: its top folder
    (`loop/`, `integrations/dbos/`), or the file at the root (`_replay.py`)."""
    parts = path.split("/")
    if len(parts) == 1:
        return path
    return "integrations/dbos/" if parts[0] == "integrations" else parts[0] + "/"


def core_callers() -> dict[str, set[str]]:
    """Who outside the core uses each name `boundloop._core` exports: `from .._core import x`,
    or `_core.x` on the imported seam."""
    names = set(boundloop._core.__all__)
    callers: dict[str, set[str]] = {name: set() for name in names}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("_core/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            used: list[str] = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_core"):
                used = [alias.name for alias in node.names]
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "_core"
            ):
                used = [node.attr]
            for name in used:
                if name in names:
                    callers[name].add(_unit(relative))
    return callers


def test_the_seam_table_is_what_the_core_exports_and_who_uses_it() -> None:
    """Every name `boundloop._core` exports has a row of the seam table, no row names another,
    and each row's "used by" names exactly the callers of its names (by folder)."""
    callers = core_callers()
    rows = table("| name | what | used by |")
    listed = [name for row in rows for name in re.findall(r"`(\w+)`", row[0])]
    assert sorted(listed) == sorted(boundloop._core.__all__)
    for row in rows:
        names = re.findall(r"`(\w+)`", row[0])
        cited = {_unit(path) for path in re.findall(r"`([\w/]+(?:/|\.py))`", row[2])}
        assert cited == set().union(*(callers[name] for name in names)), row[0]


def test_every_rule_of_the_architecture_names_a_test_that_exists() -> None:
    """Each row of the rules table names at least one test, and each test it names is a
    function (or a file) of the suite: `test_x` alone is in tests/test_structure.py."""
    rows = table("| rule | test |")
    assert len(rows) >= 10
    missing: list[str] = []
    for rule, tests in rows:
        named = re.findall(r"`((?:tests/[\w/]+\.py)?(?:::)?(?:test_\w+)?)`", tests)
        named = [name for name in named if name]
        assert named, f"the rule names no test: {rule}"
        for name in named:
            path, _, function = name.rpartition("::") if "::" in name else ("", "", name)
            if name.startswith("tests/") and "::" not in name:
                path, function = name, ""
            file = ROOT / (path or "tests/test_structure.py")
            source = file.read_text(encoding="utf-8") if file.is_file() else ""
            if not source or (function and not re.search(rf"^def {function}\(", source, flags=re.MULTILINE)):
                missing.append(name)
    assert missing == []


def test_only_the_machine_and_the_diagram_import_transitions() -> None:
    """`transitions` is the engine and the drawing: `statemachine/machine.py` and
    `statemachine/diagram.py` import it, no other module of the package does."""
    importers = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(
                alias.name.split(".")[0] == "transitions" for alias in node.names
            ):
                importers.append(name)
            elif (
                isinstance(node, ast.ImportFrom)
                and not node.level
                and (node.module or "").split(".")[0] == "transitions"
            ):
                importers.append(name)
    assert sorted(set(importers)) == ["boundloop.statemachine.diagram", "boundloop.statemachine.machine"]


def test_the_edge_table_is_the_transition_table() -> None:
    """The table of edges lists `TRANSITIONS` row for row, in order, and `halt` from every state."""
    rows = table("| trigger | source | dest | guard |")
    documented = [
        (trigger, source, dest, guard) for trigger, source, dest, guard in rows if trigger != "`halt`"
    ]
    assert documented == [
        (
            f"`{row['trigger']}`",
            f"`{row['source']}`",
            f"`{row['dest']}`",
            " ".join(f"`{guard}`" for guard in row["conditions"]),
        )
        for row in TRANSITIONS
        if row["trigger"] != "halt"
    ]
    assert [row for row in rows if row[0] == "`halt`"] == [
        ["`halt`", "every state but `stopped`", "`stopped`", ""]
    ]


def test_the_guard_table_names_every_guard() -> None:
    """The guard table has one row per guard of `statemachine/guards.py`, no more."""
    assert sorted(row[0].strip("`") for row in table("| guard | true when |")) == sorted(GUARDS)


def test_the_work_table_names_each_states_work_and_its_module() -> None:
    """The table of a run's states names, for each, the function the driver awaits (`WORK`) and
    the module it is defined in."""
    rows = table("| state | work (module) | what it does | facts it records | guards that read them |")
    documented = {row[0].strip("`"): row[1] for row in rows}
    actual = {
        str(phase): f"`{work.__name__}` (`{work.__module__.removeprefix('boundloop.').replace('.', '/')}.py`)"
        for phase, work in WORK.items()
    }
    assert documented == actual


def named(text: str) -> set[str]:
    """The names a table cell or a list item gives as fields: backticked, outside parentheses
    (which explain) and before a colon (after which a field's value is described)."""
    text = re.sub(r"\([^()]*(?:\([^()]*\)[^()]*)*\)", "", text).split(": ", 1)[0]
    return set(re.findall(r"`(\w+)`", text))


def test_the_state_groups_list_every_field_of_the_loop_state() -> None:
    """The list of `LoopState`'s fields by group names every field, and only those."""
    heading = "scratch, all of which a continued run rebuilds. The fields, by group:\n"
    groups = ARCHITECTURE.split(heading, 1)[1].strip("\n").split("\n\n", 1)[0]
    bullets = [bullet.split(":", 1)[1] for bullet in groups.removeprefix("- ").split("\n- ")]
    listed = {name for bullet in bullets for name in named(bullet)}
    fields = {field.name for field in dataclasses.fields(LoopState)}
    assert sorted(fields - listed) == []
    assert sorted(listed - fields) == []


def test_the_event_table_lists_each_kinds_own_fields() -> None:
    """Each row of the events table names the kind's class and exactly the fields it adds to the
    common ones (`kind`, `seq`, `task_id`, `at`, `step`)."""
    common = {field.name for field in dataclasses.fields(BaseEvent)} | {"kind"}
    rows = table("| kind | class | emitted by | fields |")
    union = typing.get_args(typing.get_args(Event)[0])
    kinds = {field.default: cls for cls in union for field in dataclasses.fields(cls) if field.name == "kind"}
    assert sorted(row[0].strip("`") for row in rows) == sorted(EVENT_KINDS)
    for kind, name, _, fields in rows:
        cls = kinds[kind.strip("`")]
        assert name == f"`{cls.__name__}`"
        assert "__slots__" in vars(cls), kind  # a slotted dataclass (`dataclasses.fields` reads it below)
        assert named(fields) == {field.name for field in dataclasses.fields(cls)} - common, kind


def test_the_run_context_holds_at_most_twenty_slots_each_saying_why_it_is_not_state() -> None:
    """`RunContext` keeps the session's wiring apart from one turn's scratch: at most 20 slots,
    and each is set in `__init__` with a docstring right below it (why it is not part of the
    `LoopState`), as docs/architecture.md says; its paragraph on the `RunContext` names each."""
    from boundloop._core.context import RunContext, Scratch

    for cls, most in ((RunContext, 20), (Scratch, 12)):
        assert len(cls.__slots__) <= most, (cls.__name__, len(cls.__slots__))
        init = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__))).body[0]
        assert isinstance(init, ast.FunctionDef)
        documented: set[str] = set()
        for statement, following in zip(init.body, init.body[1:], strict=False):
            targets = statement.targets if isinstance(statement, ast.Assign) else []
            if isinstance(statement, ast.AnnAssign):
                targets = [statement.target]
            docstring = (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            )
            for target in targets:
                if isinstance(target, ast.Attribute) and docstring:
                    documented.add(target.attr)
        assert set(cls.__slots__) <= documented, set(cls.__slots__) - documented
    start = ARCHITECTURE.index("`RunContext` (`_core/context.py`), its ")
    paragraph = ARCHITECTURE[start : ARCHITECTURE.index("Each field's docstring says why", start)]
    assert [slot for slot in RunContext.__slots__ if f"`{slot}`" not in paragraph] == []


def test_the_event_table_names_every_kind_of_error_the_core_records() -> None:
    """The `error` row lists exactly the `error_kind`s the core passes `RunContext.error`."""
    recorded: set[str] = set()
    for path in sorted((ROOT / "boundloop" / "_core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "error"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                recorded.add(node.args[0].value)
    [row] = [row for row in table("| kind | class | emitted by | fields |") if row[0] == "`error`"]
    listed = re.search(r"`error_kind` \(([^)]*)\)", row[3])
    assert listed is not None
    assert named(listed.group(1)) == recorded
