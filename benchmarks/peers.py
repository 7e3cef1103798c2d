"""Optional: the per-turn workload on other agent frameworks, next to boundloop (run by hand).

Usage::

    .venv/bin/python benchmarks/peers.py [--turns 50] [--repeat 20] [--reinstall] [--write]

The first run creates `benchmarks/.peers-venv` (git-ignored) and pip-installs the peers into it:
the Anthropic SDK (its beta tool runner), LangGraph, PydanticAI (slim) and the OpenAI Agents SDK.
Each framework then runs in that venv (`benchmarks/_peers_worker.py`), interleaved with the
hand-written `asyncio.gather` floor in the same process, on a zero-latency model serving a
pre-built script: `turns` turns of 3 instant tool calls, then an answer. boundloop runs here,
against the same floor. The comparable figure is each one's ratio to the floor of its own process.

The Anthropic tool runner's model seam is the SDK's HTTP client, so it runs over the real
`AsyncAnthropic` and an in-process `httpx2.MockTransport`, against the floor driven through the same
client; boundloop's SDK-path row (workload 5 of the suite) is the one to compare it with.

CPU time is this thread's (`time.thread_time`): frameworks that hand work to other threads
(LangGraph's callbacks, PydanticAI) show more wall than CPU time; their wall figure is the fair one.
`--write` also writes `benchmarks/PEERS.md`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any, Final

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._fixtures import instant, script
from benchmarks._harness import Timing, compare, machine, settle
from benchmarks.suite import ANYIO, DUMPED, GATHER, METRICS, NO_METRICS, sdk_variants, standard_variants

HERE: Final = Path(__file__).resolve().parent
VENV: Final = HERE / ".peers-venv"
PYTHON: Final = VENV / "bin" / "python"
WORKER: Final = HERE / "_peers_worker.py"
PACKAGES: Final = ("anthropic", "httpx2", "langgraph", "langchain-core", "pydantic-ai-slim", "openai-agents")
FRAMEWORKS: Final = ("anthropic-tool-runner", "pydantic-ai", "langgraph", "openai-agents")
INSTALL_TIMEOUT_S: Final = 900
RUN_TIMEOUT_S: Final = 600


def install(reinstall: bool) -> str | None:
    """Create the peers' venv and install them; None when ready, else why not."""
    if PYTHON.exists() and not reinstall:
        return None
    print(f"creating {VENV} and installing {', '.join(PACKAGES)} ...", file=sys.stderr, flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    try:
        subprocess.run(
            [str(PYTHON), "-m", "pip", "install", "--quiet", "--upgrade", *PACKAGES],
            check=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        return f"installing the peers failed: {exc}"
    return None


def run_peer(framework: str, turns: int, repeat: int) -> dict[str, Any]:
    """One framework in the peers' venv: its JSON figures, or an `error`."""
    try:
        done = subprocess.run(
            [
                str(PYTHON),
                "-W",
                "ignore",
                str(WORKER),
                framework,
                "--turns",
                str(turns),
                "--repeat",
                str(repeat),
            ],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"framework": framework, "error": f"timed out after {RUN_TIMEOUT_S} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"framework": framework, "error": f"exit {done.returncode}: {last}"}
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def spread(figure: dict[str, float]) -> str:
    """`median [min-max]` from a worker's JSON."""
    return f"{figure['median']:,.1f} [{figure['low']:,.1f}-{figure['high']:,.1f}]"


async def boundloop_figures(turns: int, repeat: int) -> tuple[dict[str, Timing], dict[str, Timing]]:
    """boundloop and the floors here: zero-latency, and through the SDK client."""
    variants = standard_variants(script(turns, 3), instant, 3)
    settle()
    zero = await compare(variants, repeat=repeat, factor=1e6 / turns)
    sdk = await compare(sdk_variants(turns), repeat=repeat, factor=1e6 / turns, warmup=2)
    return zero, sdk


def rows(turns: int, repeat: int, peers: list[dict[str, Any]]) -> list[list[str]]:
    """The table: boundloop's rows measured here, then every peer's from its own process."""
    zero, sdk = anyio.run(boundloop_figures, turns, repeat)
    table: list[list[str]] = []
    for label, figures, names in (
        ("zero-latency", zero, (GATHER, ANYIO, METRICS, NO_METRICS)),
        ("SDK path", sdk, (GATHER, DUMPED, METRICS)),
    ):
        floor = figures[GATHER]
        for name in names:
            timing = figures[name]
            cpu, wall = timing.ratio(floor)
            table.append(
                [
                    f"{name} ({label})",
                    "this repo",
                    timing.cpu.show(),
                    timing.wall.show(),
                    f"{cpu:.2f} / {wall:.2f}",
                    f"{floor.cpu.median:,.1f} / {floor.wall.median:,.1f}",
                ]
            )
    for peer in peers:
        if "error" in peer:
            table.append([peer["framework"], "—", "not run", peer["error"], "—", "—"])
            continue
        label = "SDK path" if peer["framework"] == "anthropic-tool-runner" else "zero-latency"
        mine, floor = peer["peer"], peer["floor"]
        table.append(
            [
                f"{peer['framework']} ({label})",
                peer["version"],
                spread(mine["cpu"]),
                spread(mine["wall"]),
                f"{mine['cpu']['median'] / floor['cpu']['median']:.2f} / "
                f"{mine['wall']['median'] / floor['wall']['median']:.2f}",
                f"{floor['cpu']['median']:,.1f} / {floor['wall']['median']:,.1f}",
            ]
        )
    return table


def main() -> None:
    """Install the peers if needed, measure everything, print the table (and write PEERS.md)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--reinstall", action="store_true", help="recreate benchmarks/.peers-venv")
    parser.add_argument("--write", action="store_true", help="also write benchmarks/PEERS.md")
    args = parser.parse_args()
    started = time.perf_counter()
    problem = install(args.reinstall)
    if problem is not None:
        sys.exit(problem)
    peers = [run_peer(framework, args.turns, args.repeat) for framework in FRAMEWORKS]
    table = rows(args.turns, args.repeat, peers)
    header = [
        "variant",
        "version",
        "CPU µs / turn",
        "wall µs / turn",
        "x own gather floor (CPU / wall)",
        "floor µs",
    ]
    lines = [
        "# Peers: the per-turn workload on other agent frameworks",
        "",
        f"Written by `.venv/bin/python benchmarks/peers.py --turns {args.turns} --repeat {args.repeat} "
        f"--write` ({time.perf_counter() - started:.0f} s). {args.turns} turns x 3 instant tools, then an "
        f"answer; µs per turn, median [min-max] of {args.repeat} interleaved repeats, each against the "
        "hand-written `asyncio.gather` floor measured in its own process (zero-latency rows: pre-parsed "
        "responses; SDK-path rows: the real `AsyncAnthropic` over `httpx2.MockTransport`). CPU is this "
        "thread's only: a framework that uses worker threads shows more wall than CPU time.",
        "",
        *(f"- **{key}**: {value}" for key, value in machine().items()),
        "",
        "| " + " | ".join(header) + " |",
        "|---|---|" + "---:|" * (len(header) - 2),
        *("| " + " | ".join(row) + " |" for row in table),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        (HERE / "PEERS.md").write_text(text, encoding="utf-8")
        print(f"wrote {HERE / 'PEERS.md'}")


if __name__ == "__main__":
    main()
