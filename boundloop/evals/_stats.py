"""The statistics of live trials: rates with Wilson intervals, means with t intervals, percentiles.

A live case runs a handful of trials, so every figure is given with its 95 % confidence
interval: for a rate the Wilson score interval (it stays inside [0, 1] and is not zero-wide
at 0 % or 100 %, as the normal approximation is), for a mean Student's t interval.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Final, final

Z_95: Final = 1.959963984540054
"""The standard normal quantile of 0.975: a two-sided 95 % interval."""

_T_95: Final = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
"""Student's t quantile of 0.975 for 1 to 30 degrees of freedom (beyond: the normal's)."""


def wilson(count: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of `count` successes in `total` trials.

    Raises:
        ValueError: `total` is below 1, or `count` is outside 0..total.
    """
    if total < 1 or not 0 <= count <= total:
        raise ValueError(f"a rate needs 0 <= count <= total and total >= 1, got {count}/{total}")
    p = count / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total))
    low = 0.0 if count == 0 else centre - half
    high = 1.0 if count == total else centre + half
    return low, high


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """`count` of `total`, with its Wilson 95 % interval (`value` None when nothing was counted)."""

    count: int
    total: int

    @property
    def value(self) -> float | None:
        """count / total."""
        return None if self.total == 0 else self.count / self.total

    @property
    def interval(self) -> tuple[float, float] | None:
        """The Wilson 95 % interval."""
        return None if self.total == 0 else wilson(self.count, self.total)

    def __str__(self) -> str:
        interval = self.interval
        if interval is None:
            return "n/a"
        low, high = interval
        return f"{self.count / self.total:.0%} ({self.count}/{self.total}, 95% CI {low:.0%}-{high:.0%})"

    def to_dict(self) -> dict[str, object]:
        """The rate as a JSON object."""
        interval = self.interval
        return {
            "count": self.count,
            "total": self.total,
            "value": self.value,
            "ci95": None if interval is None else list(interval),
        }


def t_quantile(degrees: int) -> float:
    """Student's t quantile of 0.975 (the normal's past 30 degrees of freedom)."""
    return _T_95[degrees - 1] if degrees <= len(_T_95) else Z_95


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Spread:
    """Per-trial values of a measure: their total, mean, 95 % t interval of the mean, p50, p95."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The spread of these values."""
        return cls(values=tuple(values))

    @property
    def total(self) -> float:
        """The sum."""
        return math.fsum(self.values)

    @property
    def mean(self) -> float | None:
        """The mean (None without values)."""
        return statistics.fmean(self.values) if self.values else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The mean's 95 % Student's t interval (None with fewer than two values)."""
        if len(self.values) < 2:
            return None
        mean = statistics.fmean(self.values)
        half = t_quantile(len(self.values) - 1) * statistics.stdev(self.values) / math.sqrt(len(self.values))
        return mean - half, mean + half

    def percentile(self, p: int) -> float | None:
        """The `p`th percentile (linear between the closest ranks; None without values)."""
        if not self.values:
            return None
        if len(self.values) == 1:
            return self.values[0]
        return statistics.quantiles(self.values, n=100, method="inclusive")[p - 1]

    def to_dict(self) -> dict[str, object]:
        """The spread as a JSON object (without the values)."""
        interval = self.interval
        return {
            "total": self.total,
            "mean": self.mean,
            "ci95": None if interval is None else list(interval),
            "p50": self.percentile(50),
            "p95": self.percentile(95),
        }
