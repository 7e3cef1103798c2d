"""`boundloop.testing.SimulatedClient`: a seeded simulated model behind the real `AsyncAnthropic`,
and `eval --live --model sim` / `demo --live --model sim` on it, offline and with no key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import anthropic
import pydantic

from boundloop import AgentLoop, Budget, StopReason, tool
from boundloop.cli import demo
from boundloop.testing import SimulatedClient

ROOT = Path(__file__).resolve().parents[1]
EVALS = ROOT / "examples" / "evals"


def offline_env() -> dict[str, str]:
    """The environment of a newcomer's shell: no key, and an API address nothing answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"  # the discard port: a real call would fail
    return env


def boundloop(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "boundloop", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env=offline_env(),
    )


async def demo_stops(seed: int) -> tuple[StopReason | None, list[str]]:
    client = SimulatedClient(seed=seed)
    result = await demo.demo_loop(client).run(demo.GOAL)
    return result.stop_reason, client.states


def test_it_is_the_sdk_client_and_needs_no_key() -> None:
    """The loop talks to the SDK's own AsyncAnthropic, which carries no real credential."""
    client = SimulatedClient(seed=3)
    assert isinstance(client, anthropic.AsyncAnthropic)
    assert client.seed == 3
    assert type(client).__module__ == "boundloop.testing"


async def test_the_same_seed_takes_the_same_path_and_seeds_differ() -> None:
    """A seed replays its trajectory exactly; over 20 seeds the demo stops in more than one way,
    each run reading its tools with the id taken from the goal."""
    assert await demo_stops(7) == await demo_stops(7)
    stops = Counter([(await demo_stops(seed))[0] for seed in range(20)])
    assert len(stops) >= 2, stops
    assert stops[StopReason.COMPLETED] >= 5, stops


async def test_tool_inputs_come_from_the_schema_and_the_transcript() -> None:
    """An id parameter takes the id of the goal (its letter first); others a value of their type."""
    seen: list[dict[str, object]] = []

    @tool
    async def read_order(order_id: str, verbose: bool, limit: int) -> str:
        """Read an order."""
        seen.append({"order_id": order_id, "verbose": verbose, "limit": limit})
        return "order C-7 of customer K-2"

    loop = AgentLoop(SimulatedClient(seed=1), model="claude-sonnet-4-5", tools=[read_order],
                     budget=Budget(max_steps=6))  # fmt: skip
    result = await loop.run("Look at order O-104 for customer K-9.")
    assert seen
    assert seen[0] == {"order_id": "O-104", "verbose": True, "limit": 1}
    assert result.stop_reason is StopReason.COMPLETED


class Verdict(pydantic.BaseModel):
    sufficient: bool
    reason: str


async def test_a_structured_answer_follows_its_schema() -> None:
    """With `output_type`, the answer is JSON generated from the schema, validated by the loop."""
    loop = AgentLoop(SimulatedClient(seed=0), model="claude-sonnet-4-5", output_type=Verdict,
                     budget=Budget(max_steps=2))  # fmt: skip
    result = await loop.run("Is the evidence sufficient?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == Verdict(sufficient=True, reason="the reason")


async def test_a_streamed_run_gets_the_api_s_events() -> None:
    """`loop.stream()` over the simulated model: the SDK parses its server-sent events."""
    loop = demo.demo_loop(SimulatedClient(seed=1))
    async with loop.stream(demo.GOAL) as run:
        kinds = Counter([event.kind async for event in run])
    assert kinds["text_delta"] > 0
    assert kinds["tool_input_delta"] > 0
    assert run.result is not None
    assert run.result.stop_reason is StopReason.COMPLETED


def test_eval_live_on_the_simulated_model_gives_seeded_rates(tmp_path: Path) -> None:
    """`eval --live --model sim` without a key: the live case runs its trials with rates and
    intervals; the same seed gives the same figures, another seed others."""
    case = str(EVALS / "shipping_lookup_repeated_failure.json")

    def rates(seed: str) -> tuple[int, dict[str, int]]:
        out = tmp_path / f"r{seed}.json"
        ran = boundloop("eval", case, "--live", "--model", "sim", "--trials", "20", "--seed", seed,
                        "--min-pass-rate", "0.5", "--json", str(out))  # fmt: skip
        assert ran.returncode in (0, 1), ran.stderr
        assert "pass rate" in ran.stdout
        assert "95% CI" in ran.stdout
        live = json.loads(out.read_text())["live"]
        assert live["model"] == "sim"
        return ran.returncode, live["rates"]["passed"]

    code, passed = rates("0")
    assert code == 0
    assert 0 < passed["count"] < passed["total"] == 20  # varied: neither all nor none
    assert rates("0") == (code, passed)
    assert rates("1")[1] != passed


def test_demo_live_on_the_simulated_model_needs_no_key() -> None:
    """`demo --live --model sim` runs the demo's tools on the simulated model, offline."""
    ran = boundloop("demo", "--live", "--model", "sim")
    assert ran.returncode in (0, 1), ran.stderr
    assert "stop reason" in ran.stdout
    assert "read_order" in ran.stdout
    assert "ANTHROPIC_API_KEY" not in ran.stderr
