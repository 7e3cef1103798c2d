"""The live view of `demo`, `run` and `resume`: a readable terminal account of a run as it happens."""

from __future__ import annotations

import time
from typing import assert_never

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from .. import AgentLoop, Budget, LoopResult, LoopState, StopReason
from ..events import (
    ApprovalRequested,
    CallDecision,
    Compacted,
    Error,
    Event,
    ModelRequest,
    Proposal,
    Resumed,
    RunStarted,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolResult,
    ToolStarted,
    Transition,
    Validation,
)
from ..statemachine import Phase


class RunView:
    """A readable terminal view of a run as it happens, fed by `AgentLoop.run(on_event=...)`.

    Shows each transition, the model's proposal, the validation decisions, the tool calls
    running in parallel with their outcomes, and the budget left before every model call.
    """

    def __init__(self, console: Console) -> None:
        """Make a view that prints to `console`.

        Args:
            console: where the view goes (stdout for the command).
        """
        self.console = console
        self.budget: Budget | None = None
        self.started = time.perf_counter()
        self.tool_calls = 0
        self.batch_durations: list[float] = []
        self.tools_by_call: dict[str, str] = {}
        self._header: Panel | None = None

    def start(self, loop: AgentLoop, goal: str, *, resumed: LoopState | None = None) -> None:
        """Set the run's header (the loop, the model, the goal), printed with the first event.

        A run that fails before its first event (an undecided approval, say) prints no header.

        Args:
            loop: the loop about to run.
            goal: its task.
            resumed: the stored state a resume continues: the budget left counts what it spent.
        """
        self.budget = loop.budget
        self.started = time.perf_counter()
        lines = [
            f"[bold]{escape(goal)}[/]",
            f"[dim]loop[/]  {escape(loop.name)}    [dim]model[/]  {escape(loop.model)}",
            f"[dim]tools[/] {escape(', '.join(loop.tools))}",
        ]
        title = "boundloop"
        if resumed is not None:
            self.started -= resumed.elapsed_s
            self.tool_calls = resumed.tool_calls
            self.tools_by_call = {p.tool_use_id: p.tool for p in resumed.pending_approvals}
            if resumed.escalation is not None:
                self.tools_by_call[resumed.escalation.tool_use_id] = "question"
            lines.append(f"[dim]task[/]  {escape(resumed.task_id)} after step {resumed.step}")
            title = "boundloop resume"
        self._header = Panel("\n".join(lines), title=title, title_align="left")

    def __call__(self, event: Event) -> None:
        """Show one event.

        Args:
            event: the event, as the loop records it.
        """
        self._print_header()
        match event:
            case Transition():
                self._transition(event)
            case Proposal():
                self._proposal(event)
            case Validation():
                self._validation(event)
            case ToolStarted():
                self._tool_started(event)
            case ToolResult():
                self._tool_result(event)
            case Stop():
                self._stop(event)
            case Error():
                self._error(event)
            case Resumed():
                self._resumed(event)
            case ApprovalRequested() | RunStarted() | ModelRequest() | Compacted():
                pass
            case TextDelta() | ThinkingDelta() | ToolInputDelta():
                pass
            case _ as unknown:
                assert_never(unknown)

    def _print_header(self) -> None:
        if self._header is not None:
            self.console.print(self._header)
            self._header = None

    def _print(self, line: str) -> None:
        # Into a pipe or a file an event's line is never wrapped: one message, one line to grep.
        self.console.print(line, soft_wrap=not self.console.is_terminal)

    def _transition(self, event: Transition) -> None:
        if event.source == Phase.ASSEMBLE and event.dest == Phase.PROPOSE:
            self.console.rule(f"step {event.step + 1}  [dim]{self._budget_left(event.step)}[/]", align="left")
        extra = ""
        if event.source == Phase.ACT and len(self.batch_durations) > 1:
            serial = sum(self.batch_durations)
            extra = (
                f"  [dim]{len(self.batch_durations)} tools took {_ms(event.duration_s)}"
                f" (one by one: {_ms(serial)})[/]"
            )
        if event.source == Phase.ACT:
            self.batch_durations = []
        trigger = f"  [dim]on {escape(event.trigger)}[/]" if event.trigger else ""
        self._print(f"  [cyan]{event.source}[/] → [cyan]{event.dest}[/]{trigger}{extra}")

    def _proposal(self, event: Proposal) -> None:
        what = f": {escape(', '.join(event.tools))}" if event.tools else ""
        tokens = f"  [dim]({event.input_tokens}+{event.output_tokens} tokens)[/]"
        self._print(f"    [bold]model[/] {escape(_or_unknown(event.stop_reason))}{what}{tokens}")

    def _validation(self, event: Validation) -> None:
        for call in event.calls:
            self._print("    " + _decision(call))
        if not event.calls or event.stop_reason:
            because = f" ({escape(event.reason)})" if event.reason else ""
            outcome = escape(event.decision)
            if event.stop_reason:
                outcome += f" → {escape(event.stop_reason)}"
            self._print(f"    [bold]validate[/] {outcome}{because}")

    def _tool_started(self, event: ToolStarted) -> None:
        names = [call.tool for call in event.calls]
        if not names:
            self._print("    [bold]act[/] running no tools")
            return
        how = f"{len(names)} tools in parallel" if len(names) > 1 else "1 tool"
        self._print(f"    [bold]act[/] running {how}: {escape(', '.join(names))}")

    def _tool_result(self, event: ToolResult) -> None:
        self.tool_calls += event.attempts
        outcome = event.outcome
        duration = event.duration_s
        if outcome == "ok":
            mark = "[green]✓[/]"
            self.batch_durations.append(duration)
        elif outcome == "denied" and event.by_human:
            mark = "[red]⊘ human denied[/]"
        elif outcome == "denied":
            mark = "[red]⊘ blocked[/]"
        else:
            mark = f"[red]✗ {escape(outcome)}[/]"
        took = f"  [dim]{_ms(duration)}[/]" if duration else ""
        self._print(f"      {mark} {escape(event.tool)}{took}")

    def _stop(self, event: Stop) -> None:
        reason = event.stop_reason
        colour = "green" if reason == StopReason.COMPLETED else "red"
        because = f" ({escape(event.detail)})" if event.detail else ""
        self._print(f"  [bold {colour}]stopped: {escape(reason)}[/]{because}")

    def _error(self, event: Error) -> None:
        what = ": ".join([event.error_kind, event.type, event.message])
        self._print(f"    [red]error[/] {escape(what)}")

    def _resumed(self, event: Resumed) -> None:
        origin = "cancelled" if event.from_stop == "cancelled" else event.from_phase
        self._print(f"  [bold]resumed[/] from {escape(origin)} at step {event.step}")
        for tool_use_id, decision in event.approvals.items():
            self._print("    " + self._approval(tool_use_id, decision))
        if event.escalation is not None:
            self._print(f"    [bold]human[/] replied to {escape(event.escalation)}")

    def _approval(self, tool_use_id: str, decision: bool | str) -> str:
        tool = self.tools_by_call.get(tool_use_id)
        call = escape(f"{tool} {tool_use_id}" if tool else tool_use_id)
        if decision is True:
            return f"[bold]human[/] [green]approved[/] {call}"
        because = f" [dim]({escape(decision)})[/]" if isinstance(decision, str) else ""
        return f"[bold]human[/] [red]denied[/] {call}{because}"

    def _budget_left(self, steps_used: int) -> str:
        budget = self.budget
        if budget is None:
            return ""
        parts = [f"budget left: {budget.max_steps - steps_used}/{budget.max_steps} steps"]
        if budget.max_tool_calls is not None:
            parts.append(f"{budget.max_tool_calls - self.tool_calls}/{budget.max_tool_calls} tool calls")
        if budget.timeout_s is not None:
            left = budget.timeout_s - (time.perf_counter() - self.started)
            parts.append(f"{max(left, 0.0):.1f} s")
        return " · ".join(parts)

    def summary(self, result: LoopResult) -> None:
        """Print the stop reason, the answer and the run's totals.

        Args:
            result: what the run returned.
        """
        self._print_header()
        state = result.state
        colour = "green" if result.ok else "red"
        table = Table.grid(padding=(0, 2))
        table.add_row("[bold]stop reason[/]", f"[bold {colour}]{result.stop_reason}[/]")
        if state.stop_detail:
            table.add_row("detail", escape(state.stop_detail))
        steps = f"{state.step}" + (f" of {self.budget.max_steps}" if self.budget else "")
        table.add_row("model calls", steps)
        calls = f"{state.tool_calls}"
        if self.budget is not None and self.budget.max_tool_calls is not None:
            calls += f" of {self.budget.max_tool_calls}"
        denied = [
            event for event in result.events if isinstance(event, ToolResult) and event.outcome == "denied"
        ]
        by_human = sum(1 for event in denied if event.by_human)
        why = [f"{len(denied) - by_human} blocked by policy", f"{by_human} denied by a human"]
        why = [reason for reason in why if not reason.startswith("0 ")]
        if why:
            calls += f" ({', '.join(why)})"
        table.add_row("tool calls", calls)
        usage = result.usage
        table.add_row(
            "tokens",
            f"{usage.input_tokens} in / {usage.output_tokens} out · cache {usage.cache_read_input_tokens} "
            f"read / {usage.cache_creation_input_tokens} written",
        )
        cost, saved = usage.cost_usd, usage.cache_savings_usd
        table.add_row(
            "cost",
            "not tracked (no price for the model)"
            if cost is None
            else f"${cost:.4f}" + ("" if saved is None else f" · caching saved ${saved:.4f}"),
        )
        stops = [event for event in result.events if isinstance(event, Stop)]
        if stops:
            table.add_row("duration", _ms(stops[-1].duration_s))
        self.console.print()
        self.console.print(table)
        if result.answer:
            self.console.print(Panel(escape(result.answer), title="answer", title_align="left"))


def _decision(call: CallDecision) -> str:
    decision = call.decision
    tool = escape(call.tool)
    because = f" [dim]({escape(call.reason)})[/]" if call.reason else ""
    if decision == "execute":
        return f"[bold]validate[/] [green]allow[/] {tool}"
    return f"[bold]validate[/] [red]{escape(decision)}[/] {tool}{because}"


def _or_unknown(value: object) -> str:
    return "?" if value is None else str(value)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"
