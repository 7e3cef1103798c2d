"""Loop contracts: read one (its policy and system prompt files too), check it, hold it typed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, cast, final

from anthropic.types import MessageParam

from .._lazy import claim
from ..errors import ContractError
from ._check import CONTRACT_SCHEMA, Problem, loop_problems, prose_problems, schema_problems


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ContractTool:
    """A tool as the contract declares it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    side_effect: bool = False
    requires_approval: bool = False
    timeout_s: float | None = None


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Contract:
    """A checked loop contract, its files read: what `AgentLoop.from_contract` builds from."""

    name: str
    model: str
    tools: tuple[ContractTool, ...]
    signals: Mapping[str, str]
    """API stop_reason -> handler name."""
    budget: Mapping[str, Any]
    policy: Mapping[str, Any]
    """The policy, read from its file when the contract names one."""
    description: str = ""
    system: str | None = None
    max_tokens: int | None = None
    custom_handlers: tuple[str, ...] = ()
    metrics: bool = True
    max_tool_output_chars: int | None = None
    history: tuple[MessageParam, ...] = ()
    redact_checkpoints: bool = False
    count_tokens: bool = False
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict[str, Any])
    """The Messages API request settings (`ModelSettings`) as JSON."""
    output_schema: Mapping[str, Any] | None = None
    """Structured output: the JSON schema of the final answer."""
    server_tools: tuple[Mapping[str, Any], ...] = ()
    """Server tool definitions (the API runs them), sent after `tools`."""
    mcp_servers: tuple[Mapping[str, Any], ...] = ()
    """MCP servers (`MCPServerSpec` as JSON), connected when a run starts; their tools after `tools`."""
    fallback_model: str | tuple[str, ...] | None = None
    """The model route: the model, or the models in order, a refused request is retried on (once each)."""
    version: str | None = None
    """The loop's version: in provenance, on `RunStarted` and on spans (`gen_ai.agent.version`)."""
    compaction: Mapping[str, Any] | None = None
    """Server-side compaction (`Compaction`) as JSON; None: off."""
    context_editing: tuple[Mapping[str, Any], ...] = ()
    """The API's clearing edits."""
    cache: str | Mapping[str, Any] = "auto"
    """Prompt caching: "auto", "off", or `CacheSettings` as JSON."""

    def to_dict(self) -> dict[str, Any]:
        """The contract as JSON, self-contained: the policy and the system prompt inline."""
        document: dict[str, Any] = {"name": self.name}
        if self.description:
            document["description"] = self.description
        document["model"] = self.model
        if self.system is not None:
            document["system"] = {"text": self.system}
        if self.max_tokens is not None:
            document["max_tokens"] = self.max_tokens
        document["tools"] = [
            {
                key: value
                for key, value in dataclasses.asdict(tool).items()
                if value is not None and (key not in ("side_effect", "requires_approval") or value)
            }
            for tool in self.tools
        ]
        if self.server_tools:
            document["server_tools"] = [dict(definition) for definition in self.server_tools]
        if self.mcp_servers:
            document["mcp_servers"] = [dict(server) for server in self.mcp_servers]
        document["signals"] = dict(self.signals)
        if self.custom_handlers:
            document["custom_handlers"] = list(self.custom_handlers)
        document["budget"] = dict(self.budget)
        document["policy"] = dict(self.policy)
        document["metrics"] = {"enabled": self.metrics}
        if self.max_tool_output_chars is not None:
            document["max_tool_output_chars"] = self.max_tool_output_chars
        if self.history:
            document["history"] = [dict(message) for message in self.history]
        for field in ("redact_checkpoints", "count_tokens"):
            if getattr(self, field):
                document[field] = True
        optional = {
            "settings": dict(self.settings) if self.settings else None,
            "output_schema": None if self.output_schema is None else dict(self.output_schema),
            "fallback_model": list(self.fallback_model)
            if isinstance(self.fallback_model, tuple)
            else self.fallback_model,
            "version": self.version,
            "compaction": None if self.compaction is None else dict(self.compaction),
            "context_editing": [dict(edit) for edit in self.context_editing] or None,
            "cache": None if self.cache == "auto" else self.cache,
        }
        document.update({key: value for key, value in optional.items() if value is not None})
        return document


def _route(raw: object) -> str | tuple[str, ...] | None:
    """A contract's `fallback_model`: one name, or the names in order (checked by the schema)."""
    return tuple(cast(list[str], raw)) if isinstance(raw, list) else cast(str | None, raw)


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
    contract, problems = _read(source, policy, allow_outside=allow_outside)
    if contract is None or problems:
        raise ContractError(str(source) if isinstance(source, str | Path) else "contract", problems)
    return contract


def _read(
    source: str | Path | Mapping[str, Any], policy_file: str | Path | None, *, allow_outside: bool
) -> tuple[Contract | None, list[Problem]]:
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
    return (_contract(contract, policy, system) if sound else None), problems


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


def _contract(raw: Mapping[str, Any], policy: Mapping[str, Any], system: str | None) -> Contract:
    return Contract(
        name=raw["name"],
        description=raw.get("description", ""),
        model=raw["model"],
        system=system,
        max_tokens=raw.get("max_tokens"),
        tools=tuple(ContractTool(**tool) for tool in raw["tools"]),
        signals=dict(raw["signals"]),
        custom_handlers=tuple(raw.get("custom_handlers", ())),
        budget=dict(raw["budget"]),
        policy=dict(policy),
        metrics=raw.get("metrics", {}).get("enabled", True),
        max_tool_output_chars=raw.get("max_tool_output_chars"),
        history=tuple(cast(list[MessageParam], raw.get("history", []))),
        redact_checkpoints=raw.get("redact_checkpoints", False),
        count_tokens=raw.get("count_tokens", False),
        settings=dict(raw.get("settings", {})),
        output_schema=raw.get("output_schema"),
        server_tools=tuple(dict(definition) for definition in raw.get("server_tools", ())),
        mcp_servers=tuple(dict(server) for server in raw.get("mcp_servers", ())),
        fallback_model=_route(raw.get("fallback_model")),
        version=raw.get("version"),
        compaction=raw.get("compaction"),
        context_editing=tuple(dict(edit) for edit in raw.get("context_editing", ())),
        cache=raw.get("cache", "auto"),
    )


claim("boundloop.contract", Contract, ContractTool)  # reported at its public home
