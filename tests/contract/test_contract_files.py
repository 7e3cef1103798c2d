"""The files a contract names are read only from under its folder, unless the user allows more."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boundloop import AgentLoop, ContractError, ScriptedClient
from boundloop.cli import main
from boundloop.contract import check_contract, load_contract
from tests.contract.test_contract import contract, lookup

SECRET = "the secret outside the contract's folder"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A contract folder, and next to it a folder with a prompt and a policy the contract must not read."""
    folder = tmp_path / "contract"
    outside = tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (outside / "prompt.md").write_text(SECRET + "\n", encoding="utf-8")
    (outside / "policy.json").write_text(json.dumps({"required_evidence": ["lookup"]}), encoding="utf-8")
    return folder, outside


def write(folder: Path, **fields: Any) -> Path:
    path = folder / "loop.json"
    path.write_text(json.dumps(contract(**fields)), encoding="utf-8")
    return path


def outside_references(folder: Path, outside: Path) -> list[tuple[str, dict[str, Any]]]:
    """(field, contract fields) naming a file outside `folder` in each way there is."""
    (folder / "link.md").symlink_to(outside / "prompt.md")
    return [
        ("system/file", {"system": {"file": str(outside / "prompt.md")}}),
        ("system/file", {"system": {"file": "../outside/prompt.md"}}),
        ("system/file", {"system": {"file": "link.md"}}),
        ("policy", {"policy": str(outside / "policy.json")}),
        ("policy", {"policy": "sub/../../outside/policy.json"}),
    ]


def test_a_file_outside_the_contracts_folder_is_a_problem_of_its_field(layout: tuple[Path, Path]) -> None:
    """Absolute, `..` and a symlink out: each a `file` problem naming the field; nothing is read."""
    folder, outside = layout
    for field, fields in outside_references(folder, outside):
        problems = check_contract(write(folder, **fields))
        assert [(p.rule, p.where) for p in problems] == [("file-outside", field)], fields
        assert "--allow-outside" in problems[0].message
        assert SECRET not in str(problems[0])
        with pytest.raises(ContractError, match=field):
            load_contract(folder / "loop.json")
        with pytest.raises(ContractError, match=field):
            AgentLoop.from_contract(
                folder / "loop.json", handlers={"lookup": lookup}, client=ScriptedClient([])
            )


def test_allow_outside_reads_them(layout: tuple[Path, Path]) -> None:
    folder, outside = layout
    path = write(folder, system={"file": str(outside / "prompt.md")}, policy=str(outside / "policy.json"))
    loaded = load_contract(path, allow_outside=True)
    assert loaded.spec.system == SECRET
    assert loaded.spec.policy.required_evidence == {"lookup"}
    built = AgentLoop.from_contract(
        path, handlers={"lookup": lookup}, client=ScriptedClient([]), allow_outside=True
    )
    assert built.to_contract().spec.system == SECRET


def test_files_under_the_folder_are_read(layout: tuple[Path, Path]) -> None:
    """A relative name, in a subfolder, through `..` that stays inside, or a symlink inside."""
    folder, _outside = layout
    (folder / "prompts").mkdir()
    (folder / "prompts" / "system.md").write_text("inside\n", encoding="utf-8")
    (folder / "inside.md").symlink_to(folder / "prompts" / "system.md")
    for name in ("prompts/system.md", "prompts/../prompts/system.md", "inside.md"):
        assert load_contract(write(folder, system={"file": name})).spec.system == "inside"


def test_compile_refuses_a_file_outside_and_inlines_nothing(
    layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`boundloop compile` would inline the file into the module and the report: it does not, unless
    --allow-outside."""
    folder, outside = layout
    path = write(folder, system={"file": str(outside / "prompt.md")})
    module, report = folder / "loop.py", folder / "loop.md"
    arguments = ["compile", str(path), "-o", str(module), "--report", str(report)]
    assert main(arguments) == 1
    assert f"{path}: file-outside: system/file: " in capsys.readouterr().out
    assert not module.exists()
    assert not report.exists()
    assert main(["check", str(path)]) == 1
    assert main(["check", str(path), "--allow-outside"]) == 0
    assert main([*arguments, "--allow-outside"]) == 0
    assert SECRET in module.read_text(encoding="utf-8")
