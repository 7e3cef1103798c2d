"""The ledger's values: what a model call claims, what a ledger grants, and why it cannot.

Before every model call that runs under a shared ceiling (a delegation tree's, a budget
pool's), the call's worst case is claimed: its input and `max_tokens` of output at its model's
price. A ledger answers with a `Grant` (the call may be sent with the granted, possibly
clamped, `max_tokens`) or a `Shortfall` (not one output token can be covered: the call is not
sent). `fit` is the one rule that decides it, used by the in-memory tree ledger and by every
pool store between its read and its write.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, Protocol, final

__all__ = ["CeilingName", "Claim", "Grant", "Ledger", "Shortfall", "fit"]

CeilingName = Literal["max_total_tokens", "max_cost_usd"]


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """What one model call may cost at most: its input and `max_tokens` of output, at its price."""

    input_tokens: int
    """The request's input, counted (`Budget.count_tokens`) or estimated."""
    output_tokens: int
    """The `max_tokens` the call wants (already within its own run's budget)."""
    input_usd: float = 0.0
    """Dollars per input token at the call's model (0: no cost ceiling to keep)."""
    output_usd: float = 0.0
    """Dollars per output token at the call's model."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """A reservation: the call may be sent with `max_tokens=output_tokens`."""

    id: int
    output_tokens: int
    tokens: int
    """Tokens held: the input and all of the output."""
    cost_usd: float
    """Dollars held: the worst case at the call's price."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Shortfall:
    """The ledger cannot cover one output token of the call: it must not be sent."""

    limit: CeilingName
    value: float
    """The ceiling."""
    used: float
    """What is spent and reserved under it."""
    pool: str | None = None
    """The budget pool whose ceiling it is (None: a delegation tree's)."""


class Ledger(Protocol):
    """Ceilings many runs draw on at once: each model call reserved, then settled or released."""

    async def reserve(self, claim: Claim) -> Grant | Shortfall:
        """Hold the worst case of `claim`, its output clamped to what is left; or say why not."""
        ...

    async def settle(self, grant: Grant, *, cost_usd: float, tokens: int) -> None:
        """The call was billed: what it cost replaces what it held."""
        ...

    async def release(self, grant: Grant) -> None:
        """The call failed or was cancelled before a response: what it held is free again."""
        ...


def fit(
    output_tokens: int,
    *,
    input_tokens: int,
    input_cost: float,
    output_cost: float,
    used_tokens: int,
    used_cost: float,
    max_tokens: int | None,
    max_cost: float | None,
) -> int | Shortfall:
    """The output tokens a claim may hold beside what is used (spent and reserved), or the
    ceiling that cannot cover one: the claim's input and output must fit under both ceilings.

    Costs are in one unit throughout: dollars (floats, the tree's ledger) or whole nanodollars
    (ints, the pool stores, where the arithmetic is exact). `input_cost` is the whole input's,
    `output_cost` one output token's. A ceiling of None does not limit.
    """
    output = output_tokens
    if max_tokens is not None:
        output = min(output, max_tokens - used_tokens - input_tokens)
        if output < 1:
            return Shortfall(limit="max_total_tokens", value=max_tokens, used=used_tokens)
    if max_cost is not None:
        left = max_cost - used_cost - input_cost
        if output_cost > 0 and left >= 0:
            output = min(output, int(left // output_cost))
            # Float division may round up by one token: the held cost itself must fit.
            while output >= 1 and used_cost + input_cost + output * output_cost > max_cost:
                output -= 1
        if output < 1 or left < 0:
            return Shortfall(limit="max_cost_usd", value=max_cost, used=used_cost)
    return output
