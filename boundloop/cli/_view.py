"""The live view of `demo`, `run` and `resume`: a readable terminal account of a run as it happens."""

from __future__ import annotations

import time
from typing import assert_never, cast

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from .. import AgentLoop, Budget, LoopResult, LoopState, StopReason, TraceEvent
from ..statemachine import Phase
from ._fields import Data, integer, number, records, shown, text, texts


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
        self.denied_by_human: set[str] = set()
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

    def __call__(self, event: TraceEvent) -> None:
        """Show one trace event.

        Args:
            event: the event, as the loop records it.
        """
        self._print_header()
        data: Data = event.data
        match event.kind:
            case "transition":
                self._transition(event)
            case "proposal":
                self._proposal(data)
            case "validation":
                self._validation(data)
            case "tool_call":
                self._tool_call(data)
            case "tool_result":
                self._tool_result(data)
            case "stop":
                self._stop(data)
            case "error":
                self._error(data)
            case "resume":
                self._resume(event, data)
            case _ as unknown:
                assert_never(unknown)

    def _print_header(self) -> None:
        if self._header is not None:
            self.console.print(self._header)
            self._header = None

    def _print(self, line: str) -> None:
        self.console.print(line)

    def _transition(self, event: TraceEvent) -> None:
        if event.source == Phase.ASSEMBLE and event.dest == Phase.PROPOSE:
            self.console.rule(f"step {event.step + 1}  [dim]{self._budget_left(event.step)}[/]", align="left")
        extra = ""
        if event.source == Phase.ACT and event.duration_s is not None and len(self.batch_durations) > 1:
            serial = sum(self.batch_durations)
            extra = (
                f"  [dim]{len(self.batch_durations)} tools took {_ms(event.duration_s)}"
                f" (one by one: {_ms(serial)})[/]"
            )
        if event.source == Phase.ACT:
            self.batch_durations = []
        trigger = f"  [dim]on {escape(event.trigger)}[/]" if event.trigger else ""
        self._print(f"  [cyan]{event.source}[/] → [cyan]{event.dest}[/]{trigger}{extra}")

    def _proposal(self, data: Data) -> None:
        tools = texts(data, "tools")
        what = f": {escape(', '.join(tools))}" if tools else ""
        tokens = ""
        input_tokens = integer(data, "input_tokens")
        if input_tokens is not None:
            tokens = f"  [dim]({input_tokens}+{_or_unknown(integer(data, 'output_tokens'))} tokens)[/]"
        self._print(f"    [bold]model[/] {escape(_or_unknown(text(data, 'stop_reason')))}{what}{tokens}")

    def _validation(self, data: Data) -> None:
        calls = records(data, "calls") or ([data] if "tool" in data else [])
        for call in calls:
            self._print("    " + _decision(call))
        stop_reason = text(data, "stop_reason")
        if not calls or stop_reason:
            reason = shown(data, "reason")
            because = f" ({escape(reason)})" if reason else ""
            outcome = escape(_or_unknown(text(data, "decision")))
            if stop_reason:
                outcome += f" → {escape(stop_reason)}"
            self._print(f"    [bold]validate[/] {outcome}{because}")

    def _tool_call(self, data: Data) -> None:
        calls = records(data, "calls")
        if calls is None:
            names = [_or_unknown(text(data, "tool"))]
        else:
            names = [_or_unknown(text(call, "tool")) for call in calls]
        if not names:
            self._print("    [bold]act[/] running no tools")
            return
        how = f"{len(names)} tools in parallel" if len(names) > 1 else "1 tool"
        self._print(f"    [bold]act[/] running {how}: {escape(', '.join(names))}")

    def _tool_result(self, data: Data) -> None:
        attempts = integer(data, "attempts")
        self.tool_calls += 1 if attempts is None else attempts
        outcome = _or_unknown(text(data, "outcome"))
        duration = number(data, "duration_s")
        if outcome == "ok":
            mark = "[green]✓[/]"
            if duration is not None:
                self.batch_durations.append(duration)
        elif outcome == "denied" and text(data, "tool_use_id") in self.denied_by_human:
            mark = "[red]⊘ human denied[/]"
        elif outcome == "denied":
            mark = "[red]⊘ blocked[/]"
        else:
            mark = f"[red]✗ {escape(outcome)}[/]"
        took = f"  [dim]{_ms(duration)}[/]" if duration else ""
        self._print(f"      {mark} {escape(_or_unknown(text(data, 'tool')))}{took}")

    def _stop(self, data: Data) -> None:
        reason = _or_unknown(text(data, "stop_reason"))
        colour = "green" if reason == StopReason.COMPLETED else "red"
        detail = shown(data, "detail")
        because = f" ({escape(detail)})" if detail else ""
        self._print(f"  [bold {colour}]stopped: {escape(reason)}[/]{because}")

    def _error(self, data: Data) -> None:
        parts = [part for part in (text(data, "kind"), text(data, "type")) if part]
        what = ": ".join([*parts, _or_unknown(shown(data, "message"))])
        self._print(f"    [red]error[/] {escape(what)}")

    def _resume(self, event: TraceEvent, data: Data) -> None:
        phase = text(data, "from_phase")
        step = integer(data, "step")
        where = f" from {escape(phase)}" if phase else ""
        where += f" at step {event.step if step is None else step}"
        self._print(f"  [bold]resumed[/]{where}")
        decisions = data.get("approvals")
        if isinstance(decisions, dict):
            for tool_use_id, decision in cast(dict[str, object], decisions).items():
                self._print("    " + self._approval(tool_use_id, decision))
        question = text(data, "escalation")
        if question is not None:
            self._print(f"    [bold]human[/] replied to {escape(question)}")

    def _approval(self, tool_use_id: str, decision: object) -> str:
        tool = self.tools_by_call.get(tool_use_id)
        if decision is not True:
            self.denied_by_human.add(tool_use_id)
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
            text(event.data, "tool_use_id")
            for event in result.trace
            if event.kind == "tool_result" and text(event.data, "outcome") == "denied"
        ]
        by_human = sum(1 for tool_use_id in denied if tool_use_id in self.denied_by_human)
        why = [f"{len(denied) - by_human} blocked by policy", f"{by_human} denied by a human"]
        why = [reason for reason in why if not reason.startswith("0 ")]
        if why:
            calls += f" ({', '.join(why)})"
        table.add_row("tool calls", calls)
        usage = result.usage
        table.add_row("tokens", f"{usage.input_tokens} in / {usage.output_tokens} out")
        cost = usage.cost_usd
        table.add_row("cost", "not tracked (no price for the model)" if cost is None else f"${cost:.4f}")
        stops = [event for event in result.trace if event.kind == "stop"]
        duration = number(stops[-1].data, "duration_s") if stops else None
        if duration is not None:
            table.add_row("duration", _ms(duration))
        self.console.print()
        self.console.print(table)
        if result.answer:
            self.console.print(Panel(escape(result.answer), title="answer", title_align="left"))


def _decision(call: Data) -> str:
    decision = _or_unknown(text(call, "decision"))
    tool = escape(_or_unknown(text(call, "tool")))
    reason = shown(call, "reason")
    because = f" [dim]({escape(reason)})[/]" if reason else ""
    if decision == "execute":
        return f"[bold]validate[/] [green]allow[/] {tool}"
    return f"[bold]validate[/] [red]{escape(decision)}[/] {tool}{because}"


def _or_unknown(value: object) -> str:
    return "?" if value is None else str(value)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"
