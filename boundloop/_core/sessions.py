"""The store's part of starting and resuming a run: the lease, the existence check, the load.

`AgentLoop.run` and `AgentLoop.resume` call these; the driver does the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from .._base.model_settings import ModelSettings, check_settings
from ..checkpoint.store import check_task_id, is_stored, lease_of
from ..compaction import ContextManagement
from ..errors import CheckpointCorrupt, ConfigurationError, TaskBusy, TaskExists, TaskNotFound
from ..pools.pool import BudgetPool, joined_pools
from ..redaction import Redaction
from ..state import Budget, LoopResult, LoopState
from .config import check_objects, run_settings
from .connect import connected
from .driver import execute
from .envelope import new_state
from .provenance import check_client
from .resume import Decision, prepare
from .tree import deciding, joins_tree, passed_down

if TYPE_CHECKING:
    from anthropic.types import MessageParam

    from ..checkpoint.store import CheckpointStore
    from .config import EventHook, LoopConfig
    from .context import Watch


async def start_new(
    config: LoopConfig,
    goal: str | None = None,
    *,
    task_id: str | None = None,
    trace_id: str | None = None,
    metadata: Mapping[str, object] | None = None,
    messages: Sequence[MessageParam] | None = None,
    cancel: anyio.Event | None = None,
    on_event: EventHook | None = None,
    settings: ModelSettings | None = None,
    watch: Watch | None = None,
    deps: object = None,
    pools: Sequence[BudgetPool] = (),
) -> LoopResult[Any]:
    """`AgentLoop.run`: the run's state built from its arguments, then `start`d (its toolsets
    connected for the run, unless the loop was entered)."""
    config = for_run(config, pools)
    async with connected(config) as config:
        model_settings, provenance = run_settings(config, settings)
        state = new_state(
            goal,
            task_id=task_id,
            trace_id=trace_id,
            metadata=metadata,
            messages=messages,
            provenance=provenance,
            model_settings=model_settings,
        )
        return await start(
            config,
            state,
            task_id=task_id,
            cancel=cancel,
            on_event=on_event,
            adopt_trace_id=trace_id is None,
            watch=watch,
            deps=deps,
        )


def start(
    config: LoopConfig,
    state: LoopState,
    *,
    task_id: str | None,
    cancel: anyio.Event | None,
    on_event: EventHook | None,
    adopt_trace_id: bool,
    watch: Watch | None = None,
    deps: object = None,
) -> Coroutine[Any, Any, LoopResult[Any]]:
    """Run a new state under its task's lease; a `task_id` given and already stored is refused
    (awaited).

    A store failing before the run starts (its lease, the existence check) ends the run
    `failed`, recorded and unsaved.

    Raises:
        TaskExists: the store already holds `task_id`.
        TaskBusy: the task's lease is held elsewhere.
    """
    store = config.store
    if store is None:  # no lease to hold, nothing stored to refuse: the run's own coroutine,
        # with no frame of this function (or exit stack) alive under it for the whole run
        return execute(
            config,
            state,
            cancel=cancel,
            on_event=on_event,
            adopt_trace_id=adopt_trace_id,
            watch=watch,
            deps=deps,
        )
    return _start_stored(config, store, state, task_id, cancel, on_event, adopt_trace_id, watch, deps)


async def _start_stored(
    config: LoopConfig,
    store: CheckpointStore,
    state: LoopState,
    task_id: str | None,
    cancel: anyio.Event | None,
    on_event: EventHook | None,
    adopt_trace_id: bool,
    watch: Watch | None,
    deps: object,
) -> LoopResult[Any]:
    """`start` with a store: under the task's lease, after the existence check."""
    async with contextlib.AsyncExitStack() as held:
        try:
            await held.enter_async_context(lease_of(store, state.task_id))
            exists = await is_stored(store, task_id)
        except TaskBusy:
            raise
        except Exception as exc:  # the store failed: the run fails, recorded, and saves nothing
            unsaved = dataclasses.replace(config, store=None)
            return await execute(
                unsaved, state, on_event=on_event, adopt_trace_id=adopt_trace_id, failure=exc, watch=watch
            )
        if exists:
            raise TaskExists(state.task_id)
        return await execute(
            config,
            state,
            cancel=cancel,
            on_event=on_event,
            adopt_trace_id=adopt_trace_id,
            watch=watch,
            deps=deps,
        )


async def resume(
    config: LoopConfig,
    task_id: str,
    *,
    approvals: Mapping[str, Decision] | None,
    reply: str | None,
    cancel: anyio.Event | None,
    on_event: EventHook | None,
    watch: Watch | None = None,
    deps: object = None,
    pools: Sequence[BudgetPool] = (),
    budget: Budget | None = None,
) -> LoopResult[Any]:
    """Load a stored run under its task's lease, apply the decisions and drive it on.

    Raises:
        See `AgentLoop.resume`.
    """
    check_task_id(task_id)
    config = for_run(config, pools, budget)
    store = config.store
    if store is None:
        raise ConfigurationError("resume needs a store: AgentLoop(..., store=SQLiteStore('runs.db'))")
    async with connected(config) as config, lease_of(store, task_id):
        state = await store.load(task_id)
        if state is None:
            raise TaskNotFound(task_id)
        check_resumed_settings(config, state)
        if not joins_tree():  # a delegated run's pools are its tree's, given by its root
            check_pools(config, state)
        below = passed_down(state, approvals, reply)
        resumed = prepare(state, approvals, reply)
        with deciding(below):  # the decisions for delegated runs' calls, for their delegations
            return await execute(
                config, state, cancel=cancel, on_event=on_event, resumed=resumed, watch=watch, deps=deps
            )


def for_run(config: LoopConfig, pools: Sequence[BudgetPool], budget: Budget | None = None) -> LoopConfig:
    """The configuration one run (or one resume) uses: the loop's pools and `pools`, and
    `budget` in place of the loop's when given.

    Raises:
        ConfigurationError: a pool is not one, two share a name, `budget` is not a `Budget`, a
            cost ceiling (the budget's, a pool's) for a loop whose model has no price.
    """
    if pools:
        config = dataclasses.replace(config, pools=joined_pools(config.pools, pools))
    if budget is not None:
        check_objects(budget=budget, policy=None, redaction=Redaction(), context=ContextManagement())
        config = dataclasses.replace(config, spec=config.spec.model_copy(update={"budget": budget}))
    costed = config.spec.budget.max_cost_usd is not None or any(
        pool.max_cost_usd is not None for pool in config.pools
    )
    if costed and config.price is None:
        raise ConfigurationError(
            f"max_cost_usd needs a price for model {config.spec.model!r}: "
            f"pass prices={{{config.spec.model!r}: Price(...)}}"
        )
    return config


def check_pools(config: LoopConfig, state: LoopState) -> None:
    """A resumed run reserves from every pool it reserved from before: fail closed, never on.

    Raises:
        ConfigurationError: a pool the run was under is not given (`resume(task_id, pools=...)`).
    """
    given = {pool.name for pool in config.pools}
    missing = [name for name in state.pools if name not in given]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        raise ConfigurationError(
            f"task {state.task_id!r} ran under the budget pools {names}: give them again, "
            "resume(task_id, pools=[...])"
        )


def check_resumed_settings(config: LoopConfig, state: LoopState) -> None:
    """The settings a stored run sends again: valid, and sendable by this loop.

    Raises:
        CheckpointCorrupt: they are not valid `ModelSettings`.
        ConfigurationError: they break a rule with this loop's `max_tokens` and tools, or need
            a beta client it does not have.
    """
    try:
        ModelSettings.model_validate(state.model_settings)
    except ValueError as exc:
        raise CheckpointCorrupt(state.task_id, str(exc).splitlines()[0], field="model_settings") from None
    check_settings(state.model_settings, max_tokens=config.spec.max_tokens, tools=config.tools)
    check_client(config.client, state.model_settings)
