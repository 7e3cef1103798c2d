"""`DurableLoop`: an `AgentLoop` run as a DBOS workflow, one workflow per run."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast, final

from anthropic.types import MessageParam
from dbos import DBOS, DBOSClient, EnqueueOptions, SetWorkflowID, WorkflowHandleAsync

from ..._core import Decision, LoopConfig, ToolRegistry, new_state
from ..._core import drive as execute
from ...errors import TaskExists
from ...events import from_dict
from ...records import StopReason
from ...state import LoopResult, LoopState
from ._failures import StepFailure, WorkflowInterrupted
from ._steps import CURRENT, RunSteps, StepClient, durable_tool, stored
from ._wait import send_decision, wait_and_continue

if TYPE_CHECKING:
    from boundloop import AgentLoop

Request = dict[str, Any]
"""The workflow's one argument: `goal`, `trace_id`, `metadata`, `messages` (JSON values)."""


def result_of(output: str) -> LoopResult:
    """The `LoopResult` a run's workflow returned as JSON (`LoopResult.to_json()`)."""
    raw: dict[str, Any] = json.loads(output)
    return LoopResult(
        stop_reason=StopReason(raw["stop_reason"]),
        answer=raw["answer"],
        state=LoopState.from_json(json.dumps(raw["state"])),
        events=[from_dict(event) for event in raw["events"]],
    )


def request_of(
    goal: str | None,
    *,
    trace_id: str | None,
    metadata: Mapping[str, object] | None,
    messages: Sequence[MessageParam] | None,
) -> Request:
    """The workflow's argument. The trace id is drawn here, once: a recovered run keeps it."""
    return {
        "goal": goal,
        "trace_id": trace_id or os.urandom(16).hex(),
        "metadata": None if metadata is None else dict(metadata),
        "messages": None if messages is None else [dict(message) for message in messages],
    }


def _interruption(exc: BaseException) -> WorkflowInterrupted | None:
    """The `WorkflowInterrupted` in `exc`, also inside an exception group (a tool batch)."""
    if isinstance(exc, WorkflowInterrupted):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in cast(BaseExceptionGroup[BaseException], exc).exceptions:
            found = _interruption(inner)
            if found is not None:
                return found
    return None


@final
class DurableRun:
    """A run submitted to DBOS: its task id (the workflow id), its status and its result."""

    def __init__(self, handle: WorkflowHandleAsync[Any]) -> None:
        self._handle = handle

    @property
    def task_id(self) -> str:
        """The run's task id, which is its DBOS workflow id."""
        return self._handle.get_workflow_id()

    async def status(self) -> str:
        """The workflow's DBOS status: `ENQUEUED`, `PENDING`, `SUCCESS`, `ERROR`, `CANCELLED`, ..."""
        return (await self._handle.get_status()).status

    async def result(self, *, poll_s: float | None = None) -> LoopResult:
        """Wait for the run to stop; its result.

        Args:
            poll_s: how often to look for the result when DBOS polls the database for it (a run
                of another process, through a `DBOSClient`); default: DBOS's.

        Raises:
            Exception: what `AgentLoop.run` raises (`TaskExists`, `UnhandledStop`, a tool's exception
                with `on_tool_error="raise"`, ...), rebuilt from DBOS's record.
        """
        try:
            output = await (
                self._handle.get_result()
                if poll_s is None
                else self._handle.get_result(polling_interval_sec=poll_s)
            )
        except StepFailure as failure:
            raise failure.rebuilt() from None
        return result_of(cast(str, output))

    def __repr__(self) -> str:
        return f"DurableRun(task_id={self.task_id!r})"


@final
class DurableLoop:
    """An `AgentLoop` run as a DBOS workflow: each model call and each tool call a DBOS step.

    Build it before `DBOS.launch()`, in every process that runs the loop's workflows (each
    worker): it registers the workflow under `name`. A run's workflow id is its task id, so a
    task submitted twice runs once. A workflow recovered after a crash replays the model calls
    and tool calls DBOS recorded, without calling the model or the tools again, and runs the
    rest. See docs/dbos.md.

    Args:
        loop: the loop to run; its store, trace, metrics and tracing work as in `loop.run`.
        name: the DBOS workflow name; default `boundloop.{loop.name}`. Submitters name it.
        human_wait_s: how long a run stopped `needs_human` waits inside its workflow for a
            decision (`decide`) before its workflow ends with the `needs_human` result (then
            `loop.resume` continues it outside DBOS); 0 ends it at once. Default: one day.
    """

    def __init__(self, loop: AgentLoop, *, name: str | None = None, human_wait_s: float = 86_400.0) -> None:
        if not human_wait_s >= 0:
            raise ValueError(f"human_wait_s must be a number of seconds >= 0, not {human_wait_s!r}")
        config = loop.config
        self._loop = loop
        self._human_wait_s = float(human_wait_s)
        self._name = f"boundloop.{loop.name}" if name is None else name
        self._config: LoopConfig = dataclasses.replace(
            config,
            client=StepClient(config.client),
            tools=ToolRegistry(
                [
                    *(
                        durable_tool(tool, config.spec.budget.tool_timeout_s)
                        for tool in config.tools.values()
                    ),
                    *config.tools.server,
                ]
            ),
        )

        async def workflow(request: Request) -> str:
            return await self._execute(request)

        workflow.__qualname__ = workflow.__name__ = self._name
        self._workflow = DBOS.workflow(name=self._name)(workflow)

    @property
    def name(self) -> str:
        """The DBOS workflow name."""
        return self._name

    @property
    def loop(self) -> AgentLoop:
        """The loop this runs."""
        return self._loop

    def __repr__(self) -> str:
        return f"DurableLoop(name={self._name!r}, loop={self._loop!r})"

    def _request(
        self,
        goal: str | None,
        task_id: str | None,
        trace_id: str | None,
        metadata: Mapping[str, object] | None,
        messages: Sequence[MessageParam] | None,
    ) -> tuple[str, Request]:
        """The task id and the workflow's argument, checked as `run` checks them (before DBOS)."""
        state = new_state(
            goal,
            task_id=task_id,
            trace_id=trace_id,
            metadata=metadata,
            messages=messages,
            provenance=self._config.provenance,
        )
        return state.task_id, request_of(goal, trace_id=trace_id, metadata=metadata, messages=messages)

    async def run(
        self,
        goal: str | None = None,
        *,
        task_id: str | None = None,
        trace_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        messages: Sequence[MessageParam] | None = None,
    ) -> LoopResult:
        """Run the loop as a workflow in this process; wait for it and return its result.

        Args are those of `AgentLoop.run`. With a `task_id` whose workflow exists already
        (running, or done), this waits for that workflow and returns its result: the arguments
        given now are not used.

        Raises:
            ConfigurationError: as `AgentLoop.run`, before any workflow starts.
            TaskExists: the loop's store holds `task_id` from a run outside DBOS.
            Exception: what the run raised (see `DurableRun.result`).
        """
        task, request = self._request(goal, task_id, trace_id, metadata, messages)
        with SetWorkflowID(task):
            handle = await DBOS.start_workflow_async(self._workflow, request)
        return await DurableRun(handle).result()

    async def enqueue(
        self,
        queue: str,
        goal: str | None = None,
        *,
        task_id: str | None = None,
        trace_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        messages: Sequence[MessageParam] | None = None,
    ) -> DurableRun:
        """Put a run on the DBOS queue `queue`; a worker listening to it runs it.

        A `task_id` already submitted returns that run (the arguments given now are not used).
        From a process without this loop (no DBOS launched), use `submit` with a `DBOSClient`.
        """
        task, request = self._request(goal, task_id, trace_id, metadata, messages)
        with SetWorkflowID(task):
            handle = await DBOS.enqueue_workflow_async(queue, self._workflow, request)
        return DurableRun(handle)

    async def retrieve(self, task_id: str) -> DurableRun:
        """The run of `task_id`, to wait for its result or read its status."""
        return DurableRun(await DBOS.retrieve_workflow_async(task_id))

    async def decide(
        self,
        task_id: str,
        *,
        approvals: Mapping[str, Decision] | None = None,
        reply: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        """Send a human's decision to the workflow of `task_id`, waiting inside it for one.

        The workflow continues the run with it, as `loop.resume(task_id, approvals=..., reply=...)`
        would; wait for the run's end with `(await retrieve(task_id)).result()`. From a process
        without DBOS launched, use the module's `decide` with a `DBOSClient`.

        Raises:
            NotResumable: the workflow waits for no decision now (still running, its wait ran
                out, or ended): `loop.resume` continues a run whose workflow ended.
            ApprovalMissing: the workflow refused the decision (an unknown call id, a call left
                undecided, no reply to the model's question); the run keeps waiting.
            TimeoutError: the workflow did not answer within `timeout_s` (its worker is down):
                the decision is delivered, and applied if the workflow takes it in time.
        """
        await send_decision(DBOS, task_id, approvals, reply, timeout_s)

    async def recover(self, executor_id: str, *, queue: str | None = None) -> list[str]:
        """Re-enqueue this loop's runs that the worker `executor_id` left `PENDING` when it died.

        DBOS recovers a worker's runs when a worker with the same executor id starts again; this
        hands them to the workers alive now instead (`DBOS.resume_workflow`): they continue from
        their last recorded step. Call it only for a worker known to be dead: a live one's
        execution would be fenced off and parked by DBOS, its calls in flight wasted.

        Args:
            executor_id: the dead worker's DBOS `executor_id`.
            queue: the queue to put them on (default: DBOS's internal queue, served by every
                worker).

        Returns:
            The task ids handed over.

        Raises:
            ValueError: `executor_id` is this process's own.
        """
        if executor_id == DBOS.executor_id:
            raise ValueError(
                f"executor {executor_id!r} is this process: only a dead worker's runs are recovered"
            )
        pending = await DBOS.list_workflows_async(
            status="PENDING", executor_id=executor_id, name=self._name, load_input=False, load_output=False
        )
        task_ids = [workflow.workflow_id for workflow in pending]
        for task_id in task_ids:
            await DBOS.resume_workflow_async(task_id, queue_name=queue)
        return task_ids

    async def _execute(self, request: Request) -> str:
        """The workflow's body: the run, its store's existence check a step; its result as JSON."""
        task_id = DBOS.workflow_id
        assert task_id is not None  # a workflow's body
        config = self._config
        token = CURRENT.set(RunSteps(1 + config.spec.budget.max_tool_retries))
        try:
            state = new_state(
                request.get("goal"),
                task_id=task_id,
                trace_id=request.get("trace_id"),
                metadata=request.get("metadata"),
                messages=request.get("messages"),
                provenance=config.provenance,
            )
            store = config.store
            if store is not None and await stored(store, task_id):
                raise TaskExists(task_id)
            result = await execute(config, state)
            result = await wait_and_continue(config, result, self._human_wait_s)
        except BaseException as exc:
            interrupted = _interruption(exc)
            if interrupted is not None:
                raise interrupted.error from None  # DBOS's own: cancelled, fenced off, database down
            if isinstance(exc, Exception):
                raise StepFailure.of(exc) from exc  # recorded so that it can be rebuilt for the caller
            raise
        finally:
            CURRENT.reset(token)
        return result.to_json()


async def submit(
    client: DBOSClient,
    *,
    workflow: str,
    queue: str,
    goal: str | None = None,
    task_id: str | None = None,
    trace_id: str | None = None,
    metadata: Mapping[str, object] | None = None,
    messages: Sequence[MessageParam] | None = None,
) -> DurableRun:
    """Put a run on a queue from a process that does not run the loop (a submitter, an API).

    Args:
        client: a `DBOSClient` on the workers' system database.
        workflow: the `DurableLoop`'s name (`boundloop.{loop.name}` by default).
        queue: the queue the workers listen to.
        goal, task_id, trace_id, metadata, messages: as for `AgentLoop.run`; `task_id` defaults to
            a new id, and a `task_id` already submitted returns that run. The arguments are checked
            by the worker: a bad one makes the run's `result()` raise.
    """
    options: EnqueueOptions = {"workflow_name": workflow, "queue_name": queue}
    options["workflow_id"] = task_id or os.urandom(16).hex()
    request = request_of(goal, trace_id=trace_id, metadata=metadata, messages=messages)
    return DurableRun(await client.enqueue_async(options, request))


async def retrieve(client: DBOSClient, task_id: str) -> DurableRun:
    """The run of `task_id`, through a `DBOSClient`."""
    return DurableRun(await client.retrieve_workflow_async(task_id))


async def decide(
    client: DBOSClient,
    task_id: str,
    *,
    approvals: Mapping[str, Decision] | None = None,
    reply: str | None = None,
    timeout_s: float = 30.0,
) -> None:
    """`DurableLoop.decide` through a `DBOSClient`, from a process that does not run the loop."""
    await send_decision(client, task_id, approvals, reply, timeout_s)
