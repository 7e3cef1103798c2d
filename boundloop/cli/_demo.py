"""`boundloop demo`: the refund investigation, offline on its script or `--live` on the real API
(or, with `--model sim`, on the simulated model behind the real SDK client)."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, final

import anyio

from .. import AgentLoop, LoopResult, Model, StopReason
from ..platforms import FEATURES, Platform, platform_of
from . import demo
from ._defaults import DEMO_MODEL, SIMULATED_MODEL
from ._errors import EXIT_NOT_COMPLETED, EXIT_USAGE, CommandError
from ._platform import live_model, platform_client
from ._runner import Cleanup, EventHook, RunOptions, Start, execute, run_goal
from ._view import RunView

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message


def demo_command(args: argparse.Namespace) -> int:
    """Run the demo loop on its goal, with the shared run options.

    Args:
        args: the parsed arguments of `boundloop demo`.

    Returns:
        The exit code: 0 when the run completed, 1 otherwise.

    Raises:
        CommandError: `--live` without ANTHROPIC_API_KEY (`--live --model sim` needs none: the
            simulated model), the API out of reach, or the run failed.
    """
    model: str = args.model
    live: bool = args.live
    client: Model | None = None
    cleanup: Cleanup | None = None
    start = run_goal(demo.GOAL)
    if live and model == SIMULATED_MODEL:  # offline: the real SDK client, the simulated model behind it
        from ..testing import SimulatedClient

        simulated = SimulatedClient(seed=0)
        client, cleanup, model = simulated, simulated.close, demo.MODEL
    elif live:
        platform: Platform = args.platform
        if platform == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
            raise CommandError(
                "--live needs an API key: set ANTHROPIC_API_KEY (or run the demo without --live)"
            )
        anthropic_client = live_client() if platform == "anthropic" else platform_client(platform)
        model = live_model(platform, model, DEMO_MODEL)
        reach = Reach(anthropic_client)
        client, cleanup, start = reach, anthropic_client.close, reach.watch(start)

    async def build() -> AgentLoop:
        return demo.demo_loop(client, model=model, scenario=args.scenario)

    return execute(RunOptions.from_args(args), build, start, cleanup=cleanup)


def live_client() -> AsyncAnthropic:
    """The client of `--live`: `AsyncAnthropic()`, configured from the environment.

    Returns:
        The client (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, the SDK's retries and timeouts).
    """
    from anthropic import AsyncAnthropic

    return AsyncAnthropic()


@final
class Reach:
    """The live client as the loop's model, noting whether the API could be reached.

    The loop records a failed model call and stops the run as `failed`; this keeps what the
    record loses, the network's own reason (refused, unknown host, timed out), so the command
    can say in one sentence that the API was out of reach.
    """

    def __init__(self, client: AsyncAnthropic) -> None:
        """Watch the calls made through `client`.

        Args:
            client: the live client (of any platform: `platform` says which).
        """
        self._client = client
        self.platform: Platform = platform_of(client)
        """The client's platform: the loop takes this wrapper for a client of it."""
        self._create: Callable[..., Awaitable[Message]] = client.messages.create
        self.unreachable: str | None = None
        """Why the latest call found no API (None once a call got an answer)."""
        self.answered = False
        """Whether any call got an answer from the API."""

    @property
    def messages(self) -> Reach:
        """The `messages` resource the loop calls: this object's `create`."""
        return self

    async def create(self, **request: Any) -> Message:
        """`client.messages.create`, noting a connection failure or a timeout.

        Args:
            request: the Messages API request.

        Returns:
            The response.
        """
        import anthropic

        try:
            response = await self._create(**request)
        except anthropic.APITimeoutError:
            self.unreachable = "the request timed out"
            raise
        except anthropic.APIConnectionError as exc:
            self.unreachable = _reason(exc)
            raise
        self.unreachable = None
        self.answered = True
        return response

    def watch(self, start: Start) -> Start:
        """`start`, then a run stopped by an unreachable API is a one-sentence error.

        Args:
            start: how the loop is started (`run_goal`).

        Returns:
            The same start, raising `CommandError` for that run instead of returning it: code 2
            when the API never answered (a setup problem), 1 when it stopped answering mid-run.
        """

        async def watched(
            loop: AgentLoop, view: RunView | None, on_event: EventHook, cancel: anyio.Event
        ) -> LoopResult:
            result = await start(loop, view, on_event, cancel)
            if result.stop_reason is StopReason.FAILED and self.unreachable is not None:
                where = "the Anthropic API" if self.platform == "anthropic" else FEATURES[self.platform].title
                raise CommandError(
                    f"could not reach {where} at {self._client.base_url}: {self.unreachable}",
                    EXIT_NOT_COMPLETED if self.answered else EXIT_USAGE,
                )
            return result

        return watched


def _reason(exc: BaseException) -> str:
    """What the network said, from the innermost exception under the SDK's `Connection error.`."""
    seen: set[int] = set()
    innermost = exc
    while (cause := innermost.__cause__ or innermost.__context__) is not None and id(cause) not in seen:
        seen.add(id(innermost))
        innermost = cause
    if isinstance(innermost, TimeoutError):
        return "the connection timed out"
    if isinstance(innermost, socket.gaierror):
        return f"cannot resolve the host ({innermost.strerror})"
    if isinstance(innermost, OSError) and innermost.errno is not None and innermost.errno > 0:
        return os.strerror(innermost.errno).lower()
    return str(innermost) or str(exc) or type(innermost).__name__
