"""Model prices, for cost budgets: a built-in table the caller can extend or override."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Final, final

from anthropic.types import Usage as ApiUsage

from .errors import ConfigurationError

_DATED: Final = re.compile(r"\d{8}")
"""The date suffix of a model snapshot id."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """US dollars per million tokens of each kind."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    """Default: a tenth of the input price."""
    cache_write_per_mtok: float | None = None
    """Default: 1.25 x the input price (5-minute cache writes)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name.startswith("cache_"):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ConfigurationError(f"Price.{field.name} must be a number >= 0, got {value!r}")

    def cost(self, usage: ApiUsage) -> float:
        """The cost in USD of one response's usage."""
        cache_read = self.cache_read_per_mtok
        cache_write = self.cache_write_per_mtok
        return (
            usage.input_tokens * self.input_per_mtok
            + usage.output_tokens * self.output_per_mtok
            + (usage.cache_read_input_tokens or 0)
            * (self.input_per_mtok * 0.1 if cache_read is None else cache_read)
            + (usage.cache_creation_input_tokens or 0)
            * (self.input_per_mtok * 1.25 if cache_write is None else cache_write)
        ) / 1_000_000


def _p(input_per_mtok: float, output_per_mtok: float) -> Price:
    return Price(input_per_mtok=input_per_mtok, output_per_mtok=output_per_mtok)


PRICES: Final[Mapping[str, Price]] = {
    "claude-opus-4-6": _p(5, 25),
    "claude-sonnet-4-6": _p(3, 15),
    "claude-opus-4-5": _p(5, 25),
    "claude-sonnet-4-5": _p(3, 15),
    "claude-haiku-4-5": _p(1, 5),
    "claude-opus-4-1": _p(15, 75),
    "claude-opus-4-0": _p(15, 75),
    "claude-sonnet-4-0": _p(3, 15),
    "claude-3-7-sonnet-latest": _p(3, 15),
    "claude-3-5-haiku-latest": _p(0.8, 4),
}
"""List prices (USD per MTok) of current Claude models; dated snapshots match by prefix."""


def price_for(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of `model`: an exact entry, else the entry the dated id belongs to.

    A dated id (`claude-haiku-4-5-20251001`) finds its alias by the longest prefix, so
    `claude-sonnet-4-5-...` never takes a shorter entry's price. An alias ending in `-latest`
    or `-0` names the snapshots without that suffix (`claude-sonnet-4-0` prices
    `claude-sonnet-4-20250514`), but only for a date, never for another version.

    Raises:
        ConfigurationError: the entry found is not a `Price`.
    """
    if model in prices:
        return _checked(model, prices[model])
    best: tuple[int, Price] | None = None
    for name, price in prices.items():
        base = name.removesuffix("-latest")
        if not model.startswith(base + "-"):
            short = base.removesuffix("-0")
            if short == base or not _DATED.fullmatch(model.removeprefix(short + "-")):
                continue
            base = short
        if best is None or len(base) > best[0]:
            best = (len(base), price)
    return None if best is None else _checked(model, best[1])


def _checked(model: str, price: object) -> Price:
    """A caller's entry is checked where it is picked: at construction, never mid-run."""
    if not isinstance(price, Price):
        raise ConfigurationError(f"prices[{model!r}] must be a Price, got {price!r}")
    return price
