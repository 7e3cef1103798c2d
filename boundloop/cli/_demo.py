"""`boundloop demo`: the refund investigation, offline on its script or `--live` on the real API."""

from __future__ import annotations

import argparse
import os

from .. import AgentLoop, Model
from . import demo
from ._errors import CommandError
from ._runner import Cleanup, RunOptions, execute, run_goal


def demo_command(args: argparse.Namespace) -> int:
    """Run the demo loop on its goal, with the shared run options.

    Args:
        args: the parsed arguments of `boundloop demo`.

    Returns:
        The exit code: 0 when the run completed, 1 otherwise.

    Raises:
        CommandError: `--live` without ANTHROPIC_API_KEY, or the run failed.
    """
    model: str = args.model
    live: bool = args.live
    client: Model | None = None
    cleanup: Cleanup | None = None
    if live:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise CommandError(
                "--live needs an API key: set ANTHROPIC_API_KEY (or run the demo without --live)"
            )
        from anthropic import AsyncAnthropic

        anthropic_client = AsyncAnthropic()
        client, cleanup = anthropic_client, anthropic_client.close

    async def build() -> AgentLoop:
        return demo.demo_loop(client, model=model)

    return execute(RunOptions.from_args(args), build, run_goal(demo.GOAL), cleanup=cleanup)
