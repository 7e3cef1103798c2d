"""AgentLoop: the public entry point; builds the configuration once and runs the driver."""

from __future__ import annotations

import copy
import functools
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Self, Unpack, final

import anyio
import sniffio
from anthropic.types import MessageParam

import boundloop._core as _core  # pyright reads `from .. import _core` as a private name

from .._base.cache import CacheMode, CacheSettings
from .._base.model_settings import ModelSettings
from .._base.price import Price
from .._core import (
    DEFAULT_BUFFER,
    EventHook,
    LoopConfig,
    Observers,
    ResumeOptions,
    RunOptions,
    RunStream,
    ToolRegistry,
    follow,
    stream_new,
    stream_resumed,
)
from ..checkpoint.store import CheckpointStore
from ..compaction import ContextManagement
from ..errors import EventLoopRunning
from ..events import Event
from ..metrics.instruments import BoundMetrics
from ..model import Model
from ..policy import Approver, Policy, SignalHandler, SuccessCheck
from ..redaction import Redaction, Redactor
from ..settings import LoopSpec, default
from ..state import Budget, LoopResult, LoopState, OutputT
from ..tools import DepsT, Handler, Tool
from ._contract import contract_wiring

if TYPE_CHECKING:
    from .._base.sdk_tools import SDKTool
    from ..contract import Contract
    from ..pools.pool import BudgetPool

__all__ = [
    "AgentLoop",
]


@final
class AgentLoop(Generic[OutputT, DepsT]):
    """A bounded agent loop: the model proposes, the loop validates, acts and decides.

    `AgentLoop[Output, Deps]`: `Output` is what `run()` returns in `result.output` (from
    `output_type`), `Deps` the type of the dependencies a run hands its tool functions
    (`run(goal, deps=...)`, read as `ToolContext[Deps].deps`); annotate the loop to check them
    (`loop: AgentLoop[str, Deps] = AgentLoop(...)`). Unparametrised: `str` and `object`.

    The settings that are data (`model`, `budget`, `policy`, `system`, `max_tokens`, `name`,
    `version`, `fallback_model`, `settings`, `cache`) are the `LoopSpec` fields of the same name,
    documented and defaulted there (`loop.spec`; a budget is required). `Budget` holds the
    run's limits with `max_tool_output_chars` and `count_tokens`; `Policy` the decisions with
    `on_tool_error` and the `signal_handlers` by stop_reason. The others:

    Args:
        client: `anthropic.AsyncAnthropic` or `ScriptedClient` (`messages.create`, `.stream`).
        tools: `@tool` functions, `Tool`s (`Tool.defined`: the memory tool, ...), the SDK's tool
            helpers, MCP servers (docs/mcp.md) and server tool definitions (docs/claude-api.md).
        output_type: structured output: a pydantic model class, a TypedDict or a JSON schema
            dict; `run()` returns `LoopResult[output_type]` (docs/claude-api.md).
        context: `ContextManagement(compaction=..., edits=...)`: server-side compaction and the
            API's clearing edits (`LoopSpec.compaction`, `LoopSpec.context_editing`; docs/cost.md).
        redaction: `Redaction(patterns=..., hook=..., checkpoints=...)`: your secrets' patterns
            and a hook applied after them to everything a run records; `checkpoints=True` saves
            checkpoints redacted too (`LoopSpec.redact_checkpoints`; docs/security.md).
        observers: `Observers(metrics=..., tracing=..., on_event=...)`: the `LoopMetrics` the
            runs count on (default: shared instruments on the default registry; None: none),
            their tracing (`TraceSettings`; default: the global provider, when one is set;
            None: no spans; docs/otel.md) and a hook called synchronously with every `Event`
            (`boundloop.events`) as it is recorded.
        prices: per-model prices merged over the built-in table (for `max_cost_usd`).
        store: where the state is checkpointed (`MemoryStore`, `SQLiteStore`, `PostgresStore`);
            `SignedStore(store, key)` signs every checkpoint (HMAC-SHA256) and refuses a row
            whose signature is missing or wrong (`CheckpointCorrupt`).
        pools: `BudgetPool`s every run of the loop reserves each model call from before it is
            sent: ceilings shared across runs, processes and periods (docs/pools.md).

    Raises:
        ConfigurationError: no budget, a bad tool, a duplicate tool name, a policy naming a
            tool that is not registered, a cost budget for a model without a price, settings
            the API documents as invalid together (the rule named).
    """

    def __init__(
        self,
        client: Model,
        *,
        model: str,
        tools: Iterable[Tool | Mapping[str, Any] | _core.Toolset | SDKTool] = (),
        budget: Budget | None = None,
        policy: Policy | None = None,
        system: str | None = default("system"),
        max_tokens: int = default("max_tokens"),
        name: str = default("name"),
        version: str | None = default("version"),
        fallback_model: str | Sequence[str] | None = default("fallback_model"),
        settings: ModelSettings | None = None,
        output_type: type[OutputT] | Mapping[str, Any] | None = None,
        context: ContextManagement = ContextManagement(),
        cache: CacheMode | CacheSettings = default("cache"),
        redaction: Redaction = Redaction(),
        observers: Observers = Observers(),
        prices: Mapping[str, Price] | None = None,
        store: CheckpointStore | None = None,
        pools: Sequence[BudgetPool] = (),
    ) -> None:
        _core.check_objects(budget=budget, policy=policy, redaction=redaction, context=context)
        wiring = _core.Wiring(
            client=client,
            tools=tools,
            output_type=output_type,
            store=store,
            observers=observers,
            redactor=Redactor(redaction.patterns, redaction.hook),
            prices=prices,
            pools=pools,
        )
        spec = LoopSpec.of(  # the declarations first: the settings are checked against the tools
            name=name,
            model=model,
            system=system,
            max_tokens=max_tokens,
            budget=budget,
            policy=policy,
            redact_checkpoints=redaction.checkpoints,
            settings=ModelSettings() if settings is None else settings,
            fallback_model=fallback_model,
            version=version,
            compaction=context.compaction,
            context_editing=context.edits,
            cache=cache,
            **_core.declarations(policy, wiring),
        )
        self._entered: _core.Entered | None = None
        self._wiring = wiring
        self._config: LoopConfig = _core.build_config(spec, wiring)

    @classmethod
    def from_spec(cls, spec: LoopSpec, wiring: _core.Wiring) -> AgentLoop[Any]:
        """The loop `spec` declares, run with `wiring` (`dataclasses.replace(loop.wiring, ...)`).

        Raises:
            ConfigurationError: the wiring does not fit the spec (see `AgentLoop`).
        """
        loop: AgentLoop[Any, Any] = AgentLoop.__new__(AgentLoop)
        loop._entered = None
        loop._wiring = wiring
        loop._config = _core.build_config(spec, wiring)
        return loop

    @property
    def spec(self) -> LoopSpec:
        """Every setting of the loop that is data, validated (its tools as declared)."""
        return self._config.spec

    @property
    def wiring(self) -> _core.Wiring:
        """What the loop was given that is not data: the client, the tools, the store, the hooks."""
        return self._wiring

    @property
    def config(self) -> LoopConfig:
        """The loop's frozen configuration, as every run reads it."""
        return self._config

    @property
    def client(self) -> Model:
        """The model client."""
        return self._config.client

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._config.spec.model

    @property
    def name(self) -> str:
        """The `loop` label on every metric."""
        return self._config.spec.name

    @property
    def tools(self) -> ToolRegistry:
        """The registered tools, by name."""
        return self._config.tools

    @property
    def budget(self) -> Budget:
        """The run's hard limits."""
        return self._config.spec.budget

    @property
    def policy(self) -> Policy:
        """What may run, what needs approval, what counts as done."""
        return self._config.spec.policy

    @property
    def system(self) -> str | None:
        """The system prompt."""
        return self._config.spec.system

    @property
    def store(self) -> CheckpointStore | None:
        """Where states are checkpointed, if anywhere (a `SignedStore` signs)."""
        return self._config.store

    @property
    def metrics(self) -> BoundMetrics | None:
        """The loop's metrics, bound to its `loop` label; None when off."""
        return self._config.metrics

    @classmethod
    def from_contract(
        cls,
        contract: str | Path | Mapping[str, Any] | Contract,
        *,
        handlers: Mapping[str, Handler],
        client: Model,
        policy: str | Path | None = None,
        allow_outside: bool = False,
        signal_handlers: Mapping[str, SignalHandler] | None = None,
        approve: Approver | None = None,
        success: SuccessCheck | None = None,
        observers: Observers = Observers(),
        prices: Mapping[str, Price] | None = None,
        store: CheckpointStore | None = None,
    ) -> AgentLoop[Any]:
        """Build the loop a contract declares (docs/contracts.md; a path is read here: in async
        code, `load_contract` in a thread and pass the `Contract`).

        Args:
            contract: a contract file, the contract as a JSON object, or a loaded `Contract`.
            handlers: the tool functions, by tool name: one for every declared tool, no more.
            client: the model client.
            policy: a policy file used instead of the contract's `policy`.
            allow_outside: read the files the contract names even when one is absolute or
                outside the contract's folder (by default a `file` problem: not read).
            signal_handlers: the contract's `custom_handlers`, by name.
            approve: `Policy.approve`, the in-process approver (code, not contract data):
                `async (ToolCall) -> bool | str`; only `True` approves.
            success: `Policy.success`, the extra completion check (code, not contract data).
            observers, prices, store: as for `AgentLoop` (a contract with metrics disabled
                turns them off).

        Raises:
            ContractError: the contract breaks its schema or the loop's rules (every problem
                listed, each with its rule and field).
            ConfigurationError: a declared tool has no tool function (or a function no tool), a
                custom signal handler or an MCP server's `mcp` extra is missing, or the loop is invalid.
        """
        from ..contract import Contract, load_contract  # the contract's parts load when used

        # A `Contract` built in code is checked too (its files are already inline).
        source = contract.to_dict() if isinstance(contract, Contract) else contract
        loaded = load_contract(source, policy=policy, allow_outside=allow_outside)
        wiring = _core.Wiring(client=client, store=store, observers=observers, prices=prices)
        spec, wiring = contract_wiring(
            loaded, wiring, handlers, signal_handlers, approve=approve, success=success
        )
        return cls.from_spec(spec, wiring)

    def to_contract(self) -> Contract:
        """The contract of this loop: `to_contract().to_dict()` is the JSON `boundloop check`
        accepts and `from_contract` builds the same loop from (the wiring passed again).

        Raises:
            ConfigurationError: a custom signal handler has no name a contract can hold.
        """
        return _core.contract_of(self._config)

    def with_store(self, store: CheckpointStore | None) -> AgentLoop[OutputT, DepsT]:
        """The same loop, checkpointing to `store` (e.g. the CLI's `--store PATH`; signed with its key)."""
        twin = copy.copy(self)
        twin._config = _core.with_store(self._config, store)
        return twin

    def as_tool(
        self,
        name: str,
        *,
        description: str,
        timeout_s: float | None = None,
        requires_approval: bool = False,
    ) -> Tool:
        """This loop as a tool of another loop: each call runs it on the call's `task` as a
        child of the calling run (docs/delegation.md).

        The call passes the calling loop's gate like any tool's (policy, approval, repeats,
        `timeout_s`, the tool-call budget); a child deeper than `Budget.max_depth` or past the
        caller's `Budget.max_children` is denied before it starts. The child is its own run
        (its task id, state, events, checkpoint in this loop's store), linked to its parent
        (`state.parent_task_id`, the parent's `state.children`), and draws on the tree's one
        ledger: cost, tokens and the deadline are shared across the tree (its own budget
        applies too), steps and tool calls stay its own. A completed child answers with its
        answer (its validated `output` as JSON); any other stop is an error result naming the
        stop reason and the child's task id. Its events reach the parent's `on_event` hooks and
        stream with its own `task_id`; the child's tool functions get the parent run's `deps`.

        Args:
            name: the tool's name (what the model calls).
            description: what the child does, for the model deciding to delegate.
            timeout_s: the call's time limit (default: the calling loop's `Budget.tool_timeout_s`).
            requires_approval: a human approves each delegation first.

        Raises:
            ConfigurationError: a name the API rejects, an empty description, a bad timeout.
        """
        return _core.delegation_tool(
            lambda: self._config, name, description, timeout_s=timeout_s, requires_approval=requires_approval
        )

    def __repr__(self) -> str:
        return f"AgentLoop(name={self.name!r}, model={self.model!r}, tools={list(self.tools)})"

    async def __aenter__(self) -> Self:
        """Connect the MCP servers in `tools=` once, for every run until exit (docs/mcp.md)."""
        self._config, self._entered = await _core.enter(self._config, self._entered)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Disconnect them."""
        self._config, self._entered = await _core.leave(self._entered) or self._config, None

    async def run(
        self,
        goal: str | None = None,
        *,
        task_id: str | None = None,
        trace_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        messages: Sequence[MessageParam] | None = None,
        cancel: anyio.Event | None = None,
        on_event: EventHook | None = None,
        settings: ModelSettings | None = None,
        deps: DepsT | None = None,
        pools: Sequence[BudgetPool] = (),
    ) -> LoopResult[OutputT]:
        """Run the loop on `goal` until it stops, and return the typed outcome.

        Args:
            goal: the task, sent as the last user message.
            task_id: the run's id (default: 32 random hex digits), in every idempotency key; one
                stored is refused (`resume` continues it), checked under a leasing store's lease.
            trace_id: an incoming trace id to carry (default: a new one; in a traced run, the
                OpenTelemetry trace id: of the caller's current span, else of the run's span).
            metadata: your own JSON values, kept in the state and in the trace's stop event.
            messages: a history to start from, before `goal` (without a goal: ending in a user turn).
            cancel: setting this event stops the run cooperatively with `cancelled`.
            on_event: called with every `Event` of this run, after the loop's own `on_event`.
            settings: this run's model settings: each field given (None too) replaces the
                loop's; the run records the result, and a resumed run sends it again.
            deps: this run's dependencies (a database pool, an HTTP client, the current user),
                given to its tool functions as `ToolContext.deps`: never checkpointed, recorded
                or traced (`resume` is given them again).
            pools: budget pools this run reserves from besides the loop's (docs/pools.md);
                not checkpointed: `resume` is given them again.

        Raises:
            ConfigurationError: no goal and no messages, a pool that is not a `BudgetPool` or
                shares another's name, an invalid history, metadata that is not
                JSON, an empty trace id, settings breaking a rule of the API; `InvalidTaskId`.
            TaskExists: the store already holds `task_id`.
            TaskBusy: another run, here or in another worker, holds the lease of `task_id`.
            UnhandledStop, SetupError: a stop_reason with no signal handler; no API key or no
                such model (`.result` holds the partial result).
            Exception: a tool's exception, with `on_tool_error="raise"` (the run is recorded
                as failed first). Any other exception (your callbacks, the store) ends the run
                `failed`, recorded in `state.errors`, and is not raised.
        """
        return await _core.start_new(
            self._config,
            goal,
            task_id=task_id,
            trace_id=trace_id,
            metadata=metadata,
            messages=messages,
            cancel=cancel,
            on_event=on_event,
            settings=settings,
            deps=deps,
            pools=pools,
        )

    def run_sync(
        self, goal: str | None = None, *, deps: DepsT | None = None, **options: Unpack[RunOptions]
    ) -> LoopResult[OutputT]:
        """`run(goal, deps=deps, **options)` from synchronous code (a script, a notebook without
        a running event loop): runs it in a new event loop (`anyio.run`) and returns its result.

        Raises:
            EventLoopRunning: called where an event loop is running (async code): there,
                `await loop.run(...)`.
            Exception: what `run` raises.
        """
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            return anyio.run(functools.partial(self.run, goal, deps=deps, **options))
        raise EventLoopRunning(library)

    def stream(
        self,
        goal: str | None = None,
        *,
        buffer: int = DEFAULT_BUFFER,
        deps: DepsT | None = None,
        **options: Unpack[RunOptions],
    ) -> RunStream[OutputT]:
        """`run(goal, deps=deps, **options)` as a `RunStream` of its events, deltas included
        (docs/streaming.md); at most `buffer` deltas wait for the reader, then the run waits for it."""
        return stream_new(self._config, goal, options, buffer, deps)

    async def resume(
        self,
        task_id: str,
        *,
        approvals: Mapping[str, bool | str] | None = None,
        reply: str | None = None,
        cancel: anyio.Event | None = None,
        on_event: EventHook | None = None,
        deps: DepsT | None = None,
        pools: Sequence[BudgetPool] = (),
        budget: Budget | None = None,
    ) -> LoopResult[OutputT]:
        """Continue a stored run from its last checkpoint, with the same task and trace id.

        A crashed run goes on where it was saved: calls with a recorded result never run
        again; intents without one run again under the same idempotency key. A run waiting for
        a human goes on with the decisions given. Budget counters and model settings carry over.

        Nothing from the checkpoint is taken on trust: each call about to run is validated
        again against this loop's tools, policy, approvals and budget (docs/security.md); the
        recorded model settings are checked again. Of two workers resuming one task, one runs it.

        Args:
            task_id: the stored run.
            approvals: for a run waiting on approval, `{tool_use_id: True | False | reason}`
                for every pending call: approved calls run (once validated again), denied ones
                are answered with an error the model sees (the reason included).
            reply: for a run stopped by the model's escalation tool, the human's answer.
            cancel: setting this event stops the run cooperatively with `cancelled`.
            on_event: called with every `Event` of this session as it is recorded.
            deps: the dependencies of this session's tool calls (`ToolContext.deps`): a
                checkpoint never holds them, so a resumed run is given them again.
            pools: budget pools this session reserves from besides the loop's (a run's own
                pools are not checkpointed: give them again).
            budget: this session's budget in place of the loop's: a run stopped at a ceiling
                (`result.resumable`) goes on with a higher one, where it stopped.

        Raises:
            ConfigurationError: the loop has no store; a bad pool or budget; `InvalidTaskId`, a bad `task_id`.
            TaskNotFound: the store does not hold `task_id`.
            TaskBusy: another run, here or in another worker, holds the lease of `task_id`.
            CheckpointCorrupt: the stored state is unreadable, inconsistent or badly signed.
            NotResumable: the run's stop is final (completed, a block, a budget after its final
                answer, ...).
            ApprovalMissing: a waiting call has no decision (the run keeps waiting).
            Exception: the store's own error reading the state (there is no run to record it in).
        """
        return await _core.resume_stored(
            self._config,
            task_id,
            approvals=approvals,
            reply=reply,
            cancel=cancel,
            on_event=on_event,
            deps=deps,
            pools=pools,
            budget=budget,
        )

    def stream_resume(
        self,
        task_id: str,
        *,
        buffer: int = DEFAULT_BUFFER,
        deps: DepsT | None = None,
        **options: Unpack[ResumeOptions],
    ) -> RunStream[OutputT]:
        """`resume(task_id, deps=deps, **options)` as a `RunStream`, like `stream` (raising what
        `resume` raises)."""
        return stream_resumed(self._config, task_id, options, buffer, deps)

    def events(self, task_id: str, *, after: int = -1) -> AsyncGenerator[Event]:
        """The task's events above `after` in the store's log, then live, to its `Stop` (streaming.md)."""
        return follow(self._config.store, task_id, after=after)

    async def _continue(self, state: LoopState, *, cancel: anyio.Event | None = None) -> LoopResult[OutputT]:
        """Continue a run from a checkpointed state, in its phase (`act` is validated again first)."""
        return await _core.drive(self._config, state, cancel=cancel)
