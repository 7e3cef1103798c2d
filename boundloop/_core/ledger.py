"""The ledger of a delegation tree: every model call's worst case reserved before it is sent.

A run that delegates (`AgentLoop.as_tool`) shares its cost and token ceilings with the runs it
starts: they all draw on one `Ledger`. Before every model call anywhere in the tree, the call's
worst case (its input, estimated or counted, plus its `max_tokens` of output at its model's
price) is reserved, and `max_tokens` is clamped to what the ledger can still cover beside the
other reservations; the response settles the reservation with what was billed, an error or a
cancellation releases it. What is reserved is never spent twice, so concurrent runs together
never spend more than the tree has: a run whose call cannot be covered stops (`cost_budget`,
`token_budget`) without sending it.

`Ledger` is the protocol (`reserve`, `settle`, `release`: awaited, so a ledger kept in a store
can implement it with one atomic statement each: a `BudgetPool`, `boundloop/pools/`), and the
claim, the grant and the shortfall are its values (`boundloop/pools/ledger.py`); `TreeLedger`
is the in-memory one a tree uses. Each method of `TreeLedger` runs without a checkpoint between
its read and its write, which makes it atomic among the tasks of one event loop.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Final, final

from ..pools.ledger import Claim, Grant, Ledger, Shortfall, fit

if TYPE_CHECKING:
    from ..pools.pool import BudgetPool
    from ..records import Usage
    from ..state import LoopState

_IDS: Final = itertools.count(1)


@final
class TreeLedger:
    """The in-memory ledger of one delegation tree (a `Ledger`).

    Args:
        max_cost_usd: the tree's cost ceiling (None: cost is not limited).
        max_total_tokens: the tree's token ceiling (None: tokens are not limited).
        spent_usd, spent_tokens: what the tree has spent before the ledger was opened.
    """

    __slots__ = (
        "held",
        "max_cost_usd",
        "max_total_tokens",
        "reserved_tokens",
        "reserved_usd",
        "spent_tokens",
        "spent_usd",
    )

    def __init__(
        self,
        *,
        max_cost_usd: float | None,
        max_total_tokens: int | None,
        spent_usd: float = 0.0,
        spent_tokens: int = 0,
    ) -> None:
        self.max_cost_usd = max_cost_usd
        self.max_total_tokens = max_total_tokens
        self.spent_usd = spent_usd
        self.spent_tokens = spent_tokens
        self.reserved_usd = 0.0
        self.reserved_tokens = 0
        self.held: dict[int, Grant] = {}
        """The reservations not yet settled or released, by id."""

    async def reserve(self, claim: Claim) -> Grant | Shortfall:
        """Hold the claim's input and as much of its output as the ceilings leave (no
        checkpoint inside: atomic among the tree's tasks)."""
        input_usd = claim.input_tokens * claim.input_usd
        output = fit(
            claim.output_tokens,
            input_tokens=claim.input_tokens,
            input_cost=input_usd,
            output_cost=claim.output_usd,
            used_tokens=self.spent_tokens + self.reserved_tokens,
            used_cost=self.spent_usd + self.reserved_usd,
            max_tokens=self.max_total_tokens,
            max_cost=self.max_cost_usd,
        )
        if isinstance(output, Shortfall):
            return output
        grant = Grant(
            id=next(_IDS),
            output_tokens=output,
            tokens=claim.input_tokens + output,
            cost_usd=input_usd + output * claim.output_usd,
        )
        self.held[grant.id] = grant
        self.reserved_usd += grant.cost_usd
        self.reserved_tokens += grant.tokens
        return grant

    async def settle(self, grant: Grant, *, cost_usd: float, tokens: int) -> None:
        """Replace the grant's hold by what the call was billed."""
        if self._free(grant):
            self.spent_usd += cost_usd
            self.spent_tokens += tokens

    async def release(self, grant: Grant) -> None:
        """Free the grant's hold: nothing was billed."""
        self._free(grant)

    def _free(self, grant: Grant) -> bool:
        if self.held.pop(grant.id, None) is None:
            return False  # settled or released already
        self.reserved_usd -= grant.cost_usd
        self.reserved_tokens -= grant.tokens
        if not self.held:  # no drift of float sums between bursts
            self.reserved_usd = 0.0
            self.reserved_tokens = 0
        return True


@final
class Node:
    """A run's place in a delegation tree: the tree's ledger and deadline, its depth, the usage
    of the children it ran (each child's own tree total) and those waiting for a human."""

    __slots__ = (
        "children_usage",
        "deadline",
        "depth",
        "ledger",
        "max_depth",
        "parent_task_id",
        "pools",
        "waiting",
    )

    def __init__(
        self,
        *,
        ledger: Ledger,
        depth: int,
        max_depth: int | None,
        deadline: float | None,
        parent_task_id: str | None,
        pools: tuple[BudgetPool, ...] = (),
    ) -> None:
        self.ledger = ledger
        self.pools = pools
        """The root's budget pools: every run of the tree reserves from them too."""
        self.depth = depth
        """0 for the root, one more per delegation."""
        self.max_depth = max_depth
        """The deepest a run of this subtree may be: the tightest `Budget.max_depth` above it."""
        self.deadline = deadline
        """The tree's deadline on anyio's clock (the root's `timeout_s`), None: no limit."""
        self.parent_task_id = parent_task_id
        self.children_usage: Usage | None = None
        """The children's usage, summed as they stop (None: none stopped yet)."""
        self.waiting: dict[str, LoopState] = {}
        """The children of the current batch that stopped waiting for a human, by the tool_use_id
        of the call that ran them: the run stops `needs_human` after its batch."""
