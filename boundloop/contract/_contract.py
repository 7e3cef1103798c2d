"""Loop contracts: read one (its policy and system prompt files too), check it, hold it typed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, cast, final

from .._lazy import claim
from ..errors import ContractError
from ..settings import LoopSpec
from ._check import CONTRACT_SCHEMA, Problem, loop_problems, prose_problems, schema_problems


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Contract:
    """A checked loop contract, its files read: what `AgentLoop.from_contract` builds from.

    Its settings are `spec`'s, the `LoopSpec` it declares (each field, default and doc written
    there once); `to_dict()` is the contract document.
    """

    spec: LoopSpec

    def to_dict(self) -> dict[str, Any]:
        """The contract as JSON, self-contained: the policy and the system prompt inline; a
        setting at its default left out."""
        return self.spec.document()


def check_contract(
    source: str | Path | Mapping[str, Any],
    *,
    policy: str | Path | None = None,
    allow_outside: bool = False,
) -> list[Problem]:
    """Every problem of a contract: its schema, its files, then the loop's rules.

    Args:
        source: the contract's file, or the contract as a parsed JSON object (its relative
            file names are then read from the current directory).
        policy: a policy file to use instead of the contract's own `policy`.
        allow_outside: read the files the contract names (its policy, its system prompt) even
            when one is an absolute path or resolves outside the contract's folder; by default
            that is a `file` problem of the field, and the file is not read.

    Returns:
        The problems, in order; empty when the contract is sound.
    """
    return _read(source, policy, allow_outside=allow_outside)[1]


def load_contract(
    source: str | Path | Mapping[str, Any],
    *,
    policy: str | Path | None = None,
    allow_outside: bool = False,
) -> Contract:
    """Read and check a contract (`check_contract` says what the arguments do).

    Raises:
        ContractError: the contract breaks a rule (every problem listed).
    """
    document, problems = _read(source, policy, allow_outside=allow_outside)
    if document is None or problems:
        raise ContractError(str(source) if isinstance(source, str | Path) else "contract", problems)
    return Contract(spec=LoopSpec.from_document(document))


def _read(
    source: str | Path | Mapping[str, Any], policy_file: str | Path | None, *, allow_outside: bool
) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The contract document, self-contained (its policy and system prompt read), when it is
    sound, and every problem."""
    base = Path(".")
    raw: object
    if isinstance(source, Mapping):
        raw = dict(source)
    else:
        path = Path(source)
        base = path.parent
        loaded = _json(path, "(contract)")
        if isinstance(loaded, Problem):
            return None, [loaded]
        raw = loaded
    problems = list(prose_problems(raw)) + schema_problems(raw)
    if not isinstance(raw, dict):
        return None, problems
    # Every problem at once: the loop's rules run on the fields the schema found sound.
    contract = cast(dict[str, Any], raw)
    folder = _Folder(base, allow_outside=allow_outside)
    broken = {problem.where.split("/", 1)[0] for problem in problems} | (_REQUIRED - contract.keys())
    policy: dict[str, Any] = {}
    policy_at = "policy/"
    if "policy" not in broken or policy_file is not None:
        policy, policy_at, policy_problems = _policy(contract.get("policy", {}), policy_file, folder)
        if policy_problems:
            broken.add("policy")
            problems += policy_problems
    system: str | None = None
    if "system" not in broken:
        system, system_problems = _system(contract.get("system"), folder)
        problems += system_problems
    sound = not problems  # the loop's rules are all that is left to break
    problems += loop_problems(contract, policy, policy_at, frozenset(broken))
    inline = {"system": None if system is None else {"text": system}, "policy": policy}
    return ({**contract, **inline} if sound else None), problems


_REQUIRED: Final = frozenset[str](CONTRACT_SCHEMA["required"])
"""The fields every contract has (the schema's `required`)."""


def _json(path: Path, where: str) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return Problem(rule="file", where=where, message=f"cannot read {path}: {exc}")
    except json.JSONDecodeError as exc:
        return Problem(rule="file", where=where, message=f"{path} is not JSON: {exc}")


@final
@dataclasses.dataclass(frozen=True, slots=True)
class _Folder:
    """The contract's folder: the files it names are read from under it."""

    base: Path
    allow_outside: bool

    def file(self, name: str, where: str) -> Path | Problem:
        """The file a contract names, relative to its folder (as the contract's own path is:
        problems name it so); a problem of the field `where` when it is absolute or, `..` and
        symlinks resolved, outside the folder (unless allowed)."""
        if self.allow_outside:
            return self.base / name
        fix = "name a file under the contract's folder, or allow files outside it (--allow-outside)"
        if Path(name).is_absolute():
            return Problem(rule="file-outside", where=where, message=f"{name!r} is an absolute path: {fix}")
        folder = self.base.resolve()
        if not (folder / name).resolve().is_relative_to(folder):
            return Problem(
                rule="file-outside",
                where=where,
                message=f"{name!r} resolves outside the contract's folder: {fix}",
            )
        return self.base / name


def _policy(
    inline: str | dict[str, Any], override: str | Path | None, folder: _Folder
) -> tuple[dict[str, Any], str, list[Problem]]:
    """The policy, its field prefix for problems, and what is wrong with it."""
    if override is None and isinstance(inline, dict):
        return _without_schema(inline), "policy/", []
    # `--policy` is the user's own choice of file; only a file the contract names is confined.
    path = Path(override) if override is not None else folder.file(cast(str, inline), "policy")
    if isinstance(path, Problem):
        return {}, "", [path]
    loaded = _json(path, "policy")
    if isinstance(loaded, Problem):
        return {}, "", [loaded]
    prefix = f"{path}: "
    problems = list(prose_problems(loaded, prefix)) + schema_problems(loaded, policy=True, prefix=prefix)
    return (_without_schema(cast(dict[str, Any], loaded)) if not problems else {}), prefix, problems


def _without_schema(policy: dict[str, Any]) -> dict[str, Any]:
    """The policy's fields (a `$schema` key is for editors)."""
    return {key: value for key, value in policy.items() if key != "$schema"}


def _system(reference: dict[str, str] | None, folder: _Folder) -> tuple[str | None, list[Problem]]:
    if reference is None:
        return None, []
    if "text" in reference:
        return reference["text"], []
    path = folder.file(reference["file"], "system/file")
    if isinstance(path, Problem):
        return None, [path]
    try:
        # A prompt file ends with a newline the prompt itself does not have.
        return path.read_text(encoding="utf-8").removesuffix("\n"), []
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(rule="file", where="system/file", message=f"cannot read {path}: {exc}")]


claim("boundloop.contract", Contract)  # reported at its public home
