"""Timing, statistics and the machine: what every workload's figures are made of.

A sample is one call of a variant, timed on two clocks at once: `time.thread_time()` (CPU time
of this thread; time spent waiting for a CPU on a busy machine does not count, which makes it
the steadier figure) and `time.perf_counter()` (wall time). Variants run interleaved, the order
reversed on every other repeat, so drift in CPU frequency or load hits all of them alike.
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib import metadata

Runner = Callable[[], Awaitable[object]]
"""One sample's work: a full run (or a batch of them) of one variant."""


@dataclasses.dataclass(frozen=True, slots=True)
class Spread:
    """Median, min and max of one quantity over the repeats."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The spread of `values` (at least one)."""
        return cls(statistics.median(values), min(values), max(values))

    def scaled(self, factor: float) -> Spread:
        """The same spread in another unit."""
        return Spread(self.median * factor, self.low * factor, self.high * factor)

    def show(self, digits: int = 1) -> str:
        """`median [min-max]`."""
        return f"{self.median:,.{digits}f} [{self.low:,.{digits}f}-{self.high:,.{digits}f}]"


@dataclasses.dataclass(frozen=True, slots=True)
class Timing:
    """CPU and wall time of one variant, each as a spread over the repeats."""

    cpu: Spread
    wall: Spread

    @classmethod
    def of(cls, samples: Sequence[tuple[float, float]], factor: float = 1.0) -> Timing:
        """From `(cpu_s, wall_s)` samples, each multiplied by `factor` (a unit, a per-turn divisor)."""
        return cls(
            Spread.of([cpu * factor for cpu, _ in samples]),
            Spread.of([wall * factor for _, wall in samples]),
        )

    def ratio(self, floor: Timing) -> tuple[float, float]:
        """Ratio of the medians to a floor's, CPU and wall."""
        return self.cpu.median / floor.cpu.median, self.wall.median / floor.wall.median


def settle() -> None:
    """Collect, then freeze what survives: later collections then walk only new objects.

    Called once after the imports and warm-ups, so a sample's own `gc.collect()` (before its
    clock starts) is cheap and a collection of the interpreter's import-time heap never lands
    on a sample's clock.
    """
    gc.collect()
    gc.freeze()


async def sample(run: Runner) -> tuple[float, float]:
    """CPU and wall seconds of one call of `run`, after a collection of earlier garbage."""
    gc.collect()
    cpu = time.thread_time()
    wall = time.perf_counter()
    await run()
    return time.thread_time() - cpu, time.perf_counter() - wall


async def compare(
    variants: Mapping[str, Runner], *, repeat: int, factor: float = 1.0, warmup: int = 1
) -> dict[str, Timing]:
    """Time every variant `repeat` times, interleaved, after `warmup` untimed calls of each."""
    for run in variants.values():
        for _ in range(warmup):
            await run()
    names = list(variants)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for index in range(repeat):
        for name in names if index % 2 == 0 else reversed(names):
            samples[name].append(await sample(variants[name]))
    return {name: Timing.of(values, factor) for name, values in samples.items()}


def version(package: str) -> str:
    """The installed version of `package`, or `-`."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": f"{os.cpu_count()} logical ({platform.processor() or platform.machine()})",
        "load average": ", ".join(f"{value:.2f}" for value in os.getloadavg()),
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "platform": platform.platform(),
        "packages": ", ".join(
            f"{name} {version(name)}"
            for name in ("boundloop", "anyio", "anthropic", "httpx2", "transitions", "prometheus-client")
        ),
    }
