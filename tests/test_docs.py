"""The docs' code runs as written, their trace table names the kinds the code has, and their
relative links name files of the repository."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

import boundloop
import boundloop.testing
from boundloop.events import EVENT_KINDS
from scripts import module_map
from tests.docrun import python_blocks, runs_as_promised
from tests.sdk_scripted import SDKScripted

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TESTING = (DOCS / "testing.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("index", range(len(python_blocks(TESTING))))
def test_the_testing_guide_runs(index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each python block of docs/testing.md runs as a script and prints what its comments say."""
    runs_as_promised(python_blocks(TESTING)[index], tmp_path / f"testing_{index}.py", capsys)


TOOLS = (DOCS / "tools.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("index", range(len(python_blocks(TOOLS))))
def test_the_tools_guide_runs(index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each python block of docs/tools.md (docstrings, a tool called as its function, deps,
    run_sync) runs as a script and prints what its comments say."""
    runs_as_promised(python_blocks(TOOLS)[index], tmp_path / f"tools_{index}.py", capsys)


def test_the_tracing_guide_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/otel.md's python blocks run as scripts; its example prints the spans it says it does
    (the block after "prints"), a tool handler's own spans among them."""
    guide = (DOCS / "otel.md").read_text(encoding="utf-8")
    blocks = python_blocks(guide)
    assert len(blocks) == 2
    for index, source in enumerate(blocks):
        script = tmp_path / f"otel_{index}.py"
        script.write_text(source, encoding="utf-8")
        runpy.run_path(str(script), run_name="__main__")
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    promised = guide.split("\nprints\n\n```\n", 1)[1].split("```", 1)[0].splitlines()
    assert printed == promised
    assert "SELECT order O-1" in promised


def test_the_testing_guide_is_linked_from_the_readme() -> None:
    """Users find the ScriptedClient docs from the README."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/testing.md" in readme


def test_the_architecture_trace_table_lists_the_trace_kinds() -> None:
    """docs/architecture.md's table of events has a row per kind of EVENT_KINDS, no more."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = text.split("| kind | class | emitted by | fields |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE)
    assert sorted(rows) == sorted(EVENT_KINDS)


@pytest.mark.parametrize("doc", sorted(path.name for path in DOCS.glob("*.md")))
def test_relative_links_in_the_docs_name_files_that_exist(doc: str) -> None:
    """A relative link in docs/ resolves to a file or folder of the repository."""
    text = re.sub(
        r"^```.*?^```", "", (DOCS / doc).read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE
    )
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:|#", target):
            continue
        path = (DOCS / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{doc}: {target} does not exist"


def test_every_test_the_security_doc_names_exists() -> None:
    """docs/security.md backs each guarantee with `tests/path.py::test_name`: each names a test
    function defined in that file (read as text, not imported), and every row of its tables
    names at least one, so the document cannot drift from the suite."""
    text = (DOCS / "security.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\b(tests/[\w/]+\.py)::(test_\w+)", text))
    assert len(named) > 50
    missing: list[str] = []
    for path, name in sorted(named):
        file = ROOT / path
        source = file.read_text(encoding="utf-8") if file.is_file() else ""
        if not re.search(rf"^[ \t]*(?:async[ \t]+)?def {name}\(", source, flags=re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert missing == []
    rows = re.findall(r"^\| (?!guarantee \|)(?!---)(.*)$", text, flags=re.MULTILINE)
    assert rows
    assert [row for row in rows if "::test_" not in row] == []


def test_the_security_doc_is_linked_from_the_readme_and_the_architecture() -> None:
    """Users find what boundloop guarantees from the README and the map of the code."""
    assert "docs/security.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(security.md)" in (DOCS / "architecture.md").read_text(encoding="utf-8")


CLAUDE_API = (DOCS / "claude-api.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("index", range(len(python_blocks(CLAUDE_API))))
def test_the_claude_api_guide_runs(index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each python block of docs/claude-api.md runs as a script and prints what its comments say."""
    runs_as_promised(python_blocks(CLAUDE_API)[index], tmp_path / f"claude_api_{index}.py", capsys)


@pytest.mark.parametrize("index", range(len(python_blocks(CLAUDE_API))))
def test_the_claude_api_guide_runs_on_the_sdk(
    index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same blocks, with `ScriptedClient` replaced by the real `AsyncAnthropic` over a mock
    transport serving the same script (tests/sdk_scripted.py): each example holds through the SDK,
    its requests JSON-encoded and its responses parsed as the API's."""
    monkeypatch.setattr(boundloop, "ScriptedClient", SDKScripted)
    monkeypatch.setattr(boundloop.testing, "ScriptedClient", SDKScripted)
    runs_as_promised(python_blocks(CLAUDE_API)[index], tmp_path / f"claude_api_sdk_{index}.py", capsys)


def test_the_module_map_lists_every_module_with_its_docstring() -> None:
    """docs/architecture.md's module map is the one `scripts/module_map.py` generates from the
    package: a module added, moved or removed, or a docstring changed, without running it fails."""
    assert module_map.committed() == module_map.module_map()


@pytest.mark.parametrize("page", ["README.md", *sorted(f"docs/{path.name}" for path in DOCS.glob("*.md"))])
def test_no_page_says_an_event_kind_is_not_emitted(page: str) -> None:
    """Every kind of EVENT_KINDS is emitted (the deltas by `loop.stream`): the README, api.md
    and architecture.md once said the deltas were "not emitted yet" after they were."""
    words = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    said = re.findall(r"[^.]*\b(?:not (?:yet )?emitted|not emitted yet|never emitted)\b[^.]*", words, re.I)
    assert said == [], f"{page}: {said}"


@pytest.mark.parametrize(
    "index", range(len(python_blocks((DOCS / "contracts.md").read_text(encoding="utf-8"))))
)
def test_the_contracts_guide_runs(
    index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each python block of docs/contracts.md runs from the repository's root and prints what
    its comments say: a policy file's `on_tool_error` is `Policy(on_tool_error=...)` (the guide
    once said it sat in the policy when `Policy` had no such field)."""
    monkeypatch.chdir(ROOT)
    blocks = python_blocks((DOCS / "contracts.md").read_text(encoding="utf-8"))
    runs_as_promised(blocks[index], tmp_path / f"contracts_{index}.py", capsys)


DELEGATION = (DOCS / "delegation.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("index", range(len(python_blocks(DELEGATION))))
def test_the_delegation_guide_runs(index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each python block of docs/delegation.md runs as a script and prints what its comments say."""
    runs_as_promised(python_blocks(DELEGATION)[index], tmp_path / f"delegation_{index}.py", capsys)


def test_the_delegation_guide_names_the_test_that_proves_its_guarantee() -> None:
    """docs/delegation.md's guarantee names its proof: a test defined in tests/test_delegation.py."""
    (name,) = re.findall(r"tests/test_delegation\.py::(test_\w+)", DELEGATION)
    source = (ROOT / "tests" / "test_delegation.py").read_text(encoding="utf-8")
    assert f"async def {name}(" in source


POOLS = (DOCS / "pools.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("index", range(len(python_blocks(POOLS))))
def test_the_pools_guide_runs(index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each python block of docs/pools.md runs as a script and prints what its comments say."""
    runs_as_promised(python_blocks(POOLS)[index], tmp_path / f"pools_{index}.py", capsys)


def test_the_pools_guide_names_the_tests_that_prove_it() -> None:
    """docs/pools.md's guarantee and faults name their proofs: tests of tests/test_pool_processes.py."""
    names = re.findall(r"tests/test_pool_processes\.py::(test_\w+)", POOLS)
    assert len(names) == 2
    source = (ROOT / "tests" / "test_pool_processes.py").read_text(encoding="utf-8")
    for name in names:
        assert f"async def {name}(" in source
