"""Compaction and context editing: the API's server-side ways to keep a long run's context small.

`Compaction` turns on the API's `compact_20260112` context-management edit (beta
`compact-2026-01-12`): past `trigger_tokens` of input the API summarizes the conversation into
a `compaction` block, which later requests send back in place of what it summarizes.
`ContextEdit` is one of the API's clearing edits (`clear_tool_uses_20250919`,
`clear_thinking_20251015`, beta `context-management-2025-06-27`), the SDK's own param type.
`ContextManagement` holds both for `AgentLoop(context=...)`.
docs/cost.md ("Compaction and context editing") says how each shows in the budget, the events
and the state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, TypeAlias, cast, final

import pydantic
from anthropic.types.beta import (
    BetaClearThinking20251015EditParam,
    BetaClearToolUses20250919EditParam,
    BetaCompact20260112EditParam,
)
from pydantic import BaseModel, ConfigDict, Field

from .errors import ConfigurationError

__all__ = [
    "COMPACT_BETA",
    "CONTEXT_EDITING_BETA",
    "Compaction",
    "ContextEdit",
    "ContextEdits",
    "ContextManagement",
    "MIN_TRIGGER_TOKENS",
    "context_settings",
]

COMPACT_BETA: Final = "compact-2026-01-12"
CONTEXT_EDITING_BETA: Final = "context-management-2025-06-27"
MIN_TRIGGER_TOKENS: Final = 50_000
"""The smallest compaction trigger the API accepts (its default is 150,000)."""

ContextEdit: TypeAlias = BetaClearToolUses20250919EditParam | BetaClearThinking20251015EditParam
"""A clearing edit of the API: old tool results (`clear_tool_uses_20250919`) or old thinking
(`clear_thinking_20251015`), with its trigger and keep settings."""


@final
class Compaction(BaseModel):
    """Server-side compaction: past `trigger_tokens` of input the API summarizes the context.

    `instructions` replace the API's summarization prompt; `pause=True` makes the API stop
    after the summary (`stop_reason` "compaction"), and the loop continues the turn.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", title="compaction")

    trigger_tokens: int = Field(default=150_000, ge=MIN_TRIGGER_TOKENS, strict=True)
    instructions: str | None = Field(default=None, min_length=1)
    pause: bool = Field(default=False, strict=True)

    def edit(self, *, trigger_tokens: int | None = None) -> BetaCompact20260112EditParam:
        """The `compact_20260112` edit of the request (`trigger_tokens` in place of the own)."""
        edit: BetaCompact20260112EditParam = {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": trigger_tokens or self.trigger_tokens},
        }
        if self.instructions is not None:
            edit["instructions"] = self.instructions
        if self.pause:
            edit["pause_after_compaction"] = True
        return edit


def _one_of_each(edits: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    kinds = [str(edit.get("type")) for edit in edits]
    twice = sorted({kind for kind in kinds if kinds.count(kind) > 1})
    if twice:
        raise ValueError(f"one edit of each type, got {twice} more than once")
    return edits


ContextEdits: TypeAlias = Annotated[
    tuple[ContextEdit, ...],
    pydantic.AfterValidator(_one_of_each),
    pydantic.PlainSerializer(lambda edits: [dict(edit) for edit in edits]),
]
"""`LoopSpec.context_editing`: the clearing edits, one of each type."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ContextManagement:
    """What the API does to keep a run's context small: `AgentLoop(context=ContextManagement(...))`.

    Its fields are `LoopSpec.compaction` and `LoopSpec.context_editing`, checked there (docs/cost.md).

    Raises:
        ConfigurationError: `compaction` is not a `Compaction`, or `edits` not a sequence of edits.
    """

    compaction: Compaction | None = None
    """Server-side compaction (`Compaction(trigger_tokens=...)`); None: off."""
    edits: Sequence[ContextEdit] = ()
    """The API's clearing edits (old tool results, old thinking), one of each type."""

    def __post_init__(self) -> None:
        if self.compaction is not None and not isinstance(cast(object, self.compaction), Compaction):
            raise ConfigurationError(
                f"ContextManagement.compaction must be a Compaction or None, got {self.compaction!r}"
            )
        edits = cast(object, self.edits)
        if isinstance(edits, str | Mapping) or not isinstance(edits, Sequence):
            raise ConfigurationError(f"ContextManagement.edits must be a sequence of edits, got {edits!r}")
        object.__setattr__(self, "edits", tuple(cast(Sequence[ContextEdit], edits)))


def context_settings(
    settings: Mapping[str, Any],
    *,
    compaction: Compaction | None,
    context_editing: Sequence[Mapping[str, Any]] = (),
    trigger_tokens: int | None = None,
) -> dict[str, Any]:
    """The request settings (as JSON) with the loop's context-management edits and their betas.

    The edits join those of the settings' own `context_management`: thinking clearing first,
    then tool-result clearing, then compaction (the order the API requires); the betas join
    the settings' `betas`. `trigger_tokens`: this request's compaction trigger (a retry after
    a full context window compacts at the API's minimum).

    Raises:
        ConfigurationError: the settings already hold an edit of the same type.
    """
    ours: list[Mapping[str, Any]] = [dict(edit) for edit in context_editing]
    betas: list[str] = [CONTEXT_EDITING_BETA] if ours else []
    if compaction is not None:
        ours.append(cast(Mapping[str, Any], compaction.edit(trigger_tokens=trigger_tokens)))
        betas.append(COMPACT_BETA)
    if not ours:
        return dict(settings)
    management = cast(Mapping[str, Any], settings.get("context_management") or {})
    theirs = [cast(Mapping[str, Any], edit) for edit in management.get("edits") or ()]
    clash = sorted({str(edit["type"]) for edit in ours} & {str(edit.get("type")) for edit in theirs})
    if clash:
        raise ConfigurationError(
            f"ModelSettings.context_management already has the edits {clash}: set them there or "
            "with AgentLoop(context=ContextManagement(...)), not both"
        )
    edits = sorted([*theirs, *ours], key=lambda edit: _ORDER.get(str(edit.get("type")), 1))
    merged = dict(settings)
    merged["context_management"] = {**management, "edits": edits}
    known = list(cast(Sequence[str], settings.get("betas") or ()))
    merged["betas"] = known + [beta for beta in betas if beta not in known]
    return merged


_ORDER: Final = {"clear_thinking_20251015": 0, "clear_tool_uses_20250919": 1, "compact_20260112": 2}
"""Where each edit goes in `edits`: the API takes thinking clearing first."""
