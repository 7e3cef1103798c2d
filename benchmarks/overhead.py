"""Per-turn overhead of AgentLoop against hand-written minimal loops, in one process.

Run by hand: `.venv/bin/python benchmarks/overhead.py [--turns 50] [--repeat 30]`.

Workload 1 of the suite (`python -m benchmarks`) on its own, with 3 tools per batch: a
zero-latency model serving pre-parsed `Message`s, `turns` responses of 3 instant tool calls
each, then a final `end_turn`. Variants run interleaved; the median over repeats is reported
as µs per turn (CPU and wall) and as ratios to the hand-written floors.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._fixtures import instant, script
from benchmarks._harness import Timing, compare, settle
from benchmarks.suite import ANYIO, GATHER, METRICS, NO_METRICS, standard_variants


async def measure(turns: int, repeat: int) -> dict[str, Timing]:
    """Every variant's µs per turn, interleaved."""
    variants = standard_variants(script(turns, 3), instant, 3)
    settle()
    return await compare(variants, repeat=repeat, factor=1e6 / turns)


def main() -> None:
    """Parse the arguments, measure, print µs per turn and the ratios to both floors."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    figures = anyio.run(measure, args.turns, args.repeat)
    print(f"{args.turns} turns x 3 instant tools, median of {args.repeat} runs, µs per turn (CPU / wall)")
    for name, timing in figures.items():
        gather_cpu, gather_wall = timing.ratio(figures[GATHER])
        anyio_cpu, anyio_wall = timing.ratio(figures[ANYIO])
        print(
            f"  {name:32s} {timing.cpu.median:7.1f} / {timing.wall.median:7.1f} µs"
            f"   x gather {gather_cpu:5.2f} / {gather_wall:5.2f}"
            f"   x anyio {anyio_cpu:5.2f} / {anyio_wall:5.2f}"
        )
    cpu, wall = figures[METRICS].ratio(figures[NO_METRICS])
    print(f"  metrics cost: {100 * (cpu - 1):+.1f} % CPU, {100 * (wall - 1):+.1f} % wall per turn")


if __name__ == "__main__":
    main()
