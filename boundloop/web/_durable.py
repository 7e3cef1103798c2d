"""Decisions for runs waiting for a human inside their DBOS workflow (docs/dbos.md).

Such a run holds its store lease while its workflow waits, so the inspector cannot resume it
itself: it sends the decision to the workflow (`boundloop.integrations.dbos.decide`), which
continues the run there. Imported only when the inspector is given a `DurableLoop` or a
`DBOSClient` (it needs the `dbos` extra).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dbos import DBOSClient

from .. import AgentLoop, ConfigurationError
from .._core import Decision
from ..integrations.dbos import DurableLoop, decide

ANSWER_S: Final = 30.0
"""How long the inspector waits for the workflow to answer a decision (its worker may be down)."""


class Durable:
    """Sends decisions to waiting workflows: through this process's DBOS (a `DurableLoop`), or a
    `DBOSClient`."""

    def __init__(self, sender: DurableLoop | DBOSClient, answer_s: float = ANSWER_S) -> None:
        self.sender = sender
        self.answer_s = answer_s

    async def decide(self, task_id: str, approvals: Mapping[str, Decision], reply: str | None) -> None:
        """Send the decision; return once the workflow accepted it.

        Raises:
            NotResumable: the workflow waits for no decision now (or the run is no DBOS workflow).
            ApprovalMissing: the workflow refused the decision; the run keeps waiting.
            TimeoutError: no answer within `answer_s`; the decision is delivered.
        """
        if isinstance(self.sender, DurableLoop):
            await self.sender.decide(task_id, approvals=approvals, reply=reply, timeout_s=self.answer_s)
        else:
            await decide(self.sender, task_id, approvals=approvals, reply=reply, timeout_s=self.answer_s)


def split(
    loop: AgentLoop[Any] | DurableLoop | None, dbos_client: DBOSClient | None
) -> tuple[AgentLoop[Any] | None, Durable | None]:
    """The loop that resumes runs outside DBOS, and the sender of decisions to waiting workflows:
    for a `DurableLoop`, its loop and this process's DBOS (launched); else `dbos_client`'s."""
    if isinstance(loop, DurableLoop):
        return loop.loop, Durable(loop if dbos_client is None else dbos_client)
    if loop is not None and not isinstance(loop, AgentLoop):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError(f"the inspector's loop must be an AgentLoop or a DurableLoop, not {loop!r}")
    return loop, None if dbos_client is None else Durable(dbos_client)
