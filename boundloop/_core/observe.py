"""Observe: after a tool round, check the circuit breaker, then the budget."""

from __future__ import annotations

from ..statemachine.table import Trigger
from .budget import breaker, spent, stop_at
from .context import RunContext


async def observe(ctx: RunContext) -> Trigger:
    """Check the circuit breaker, then the budget, after a tool round."""
    if ctx.state.stop_reason is not None:  # act decided it (a tool failed, on_tool_error="stop")
        return Trigger.OBSERVED
    exceeded = breaker(ctx) or spent(ctx)
    if exceeded is not None:
        stop_at(ctx, exceeded)
    return Trigger.OBSERVED
