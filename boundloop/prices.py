"""Model prices, for cost tracking and cost budgets.

The default prices come from genai-prices (https://github.com/pydantic/genai-prices), the
maintained price database PydanticAI and Logfire use. It ships its data inside the package, so a
lookup never touches the network; the data is read on the first lookup (about 20 ms, once per
process), not at import. The caller's `prices={model: Price(...)}` entries win over it. A model
with no price in either warns once (`UnpricedModelWarning`) and its cost is not tracked.

On a platform other than the Claude API (`boundloop.platforms`) the platform's own entries in
genai-prices price its model ids first: Amazon Bedrock's (`anthropic.claude-sonnet-4-5-...-v1:0`
and the cross-region `us.`/`eu.`/... profiles at the regional price, `global.anthropic...` at the
global one: regional endpoints cost 10 % more on the newer models), Google Vertex AI's
(`claude-sonnet-4-5@20250929`) and Microsoft Foundry's (Azure's); a model the platform's entries
lack is priced as on the Claude API. Vertex AI's model ids do not say the endpoint, its client
does: on a regional Vertex endpoint (any `region` but `"global"`) a model costs what Bedrock's
entries say its regional endpoints cost over the global one (10 % more on the models that have
the premium, nothing more on the others). A model id in a platform's form is priced from that
platform's entries even where the platform is not known (`boundloop eval` reading a recorded run).

genai-prices gives each model its token rates (long-context tiers included), its web search
rate, and its fast-mode (`speed: "fast"`) and batch rates where it lists them; what a `Price`
does with a response's `usage` is in its own module's docstring (`boundloop._base.price`).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
import warnings
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Final, final

# At import, not at the first lookup: genai-prices' own import reads its package metadata, a
# blocking file read that must not happen on the event loop when a loop is built in async code.
from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import TieredPrices

from ._base.price import Price
from .errors import ConfigurationError
from .platforms import FEATURES, Platform

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot
    from genai_prices.types import ModelInfo, ModelPrice

__all__ = [
    "PRICES",
    "PROVIDER",
    "UnpricedModelWarning",
    "default_price",
    "from_genai_prices",
    "price_for",
    "regional_premium",
    "resolve_price",
    "warn_unpriced",
]

_DATED: Final = re.compile(r"\d{8}")
"""The date suffix of a model snapshot id."""

PROVIDER: Final = "anthropic"
"""The genai-prices provider whose prices apply: the Messages API's own."""


class UnpricedModelWarning(UserWarning):
    """A loop's model has no known price: its cost is not tracked.

    Issued once per model and process, at the `AgentLoop(...)` that names it. Give the model a
    price with `AgentLoop(prices={model: Price(...)})`, or silence it with
    `warnings.filterwarnings("ignore", category=UnpricedModelWarning)`.
    """


# -- the default prices: genai-prices ---------------------------------------------------


@final
class _Catalogue:
    """genai-prices' Anthropic prices as `Price`s, read from one data snapshot.

    The snapshot is the data bundled with genai-prices, or a newer one `genai_prices.UpdatePrices`
    fetched (opt-in, the caller's choice): a new snapshot gives a new catalogue. Prices that
    changed on a date are read as of the catalogue's first use.
    """

    __slots__ = ("by_id", "matches", "provider", "snapshot")

    def __init__(self, snapshot: DataSnapshot, provider_id: str = PROVIDER) -> None:
        self.snapshot = snapshot
        self.provider = provider_id
        now = datetime.now(tz=UTC)
        self.by_id: dict[str, Price] = {}
        for provider in snapshot.providers:
            if provider.id == provider_id:
                for model in provider.models:
                    price = _priced(model, now)
                    if price is not None:
                        self.by_id[model.id] = price
        self.matches: dict[str, str | None] = {}
        """Model name -> the genai-prices id it matches (None: none)."""

    def match(self, model: str) -> str | None:
        """The genai-prices id of the Claude model `model` names on this provider, or None."""
        if model in self.matches:
            return self.matches[model]
        try:
            _, info = self.snapshot.find_provider_model(model, None, self.provider, None)
        except LookupError:
            found = None
        else:
            found = info.id if info.id in self.by_id else None
        self.matches[model] = found
        return found


_catalogues: dict[str, _Catalogue] = {}
"""By genai-prices provider id: the catalogue of the current snapshot."""


def _current(provider: str = PROVIDER) -> _Catalogue:
    """The catalogue of genai-prices' current snapshot for `provider` (built again when the
    snapshot changes)."""
    snapshot = get_snapshot()
    catalogue = _catalogues.get(provider)
    if catalogue is None or catalogue.snapshot is not snapshot:
        catalogue = _catalogues[provider] = _Catalogue(snapshot, provider)
    return catalogue


_PLATFORM_FORMS: Final = (("aws", "anthropic."), ("google", "@"))
"""genai-prices provider -> what a model id in its platform's form holds (Bedrock's
`[geo.]anthropic.claude-...`, Vertex's `claude-...@date`)."""


def _catalogue_for(model: str, platform: Platform) -> tuple[_Catalogue, str] | None:
    """The catalogue that prices `model` on `platform`, and the id it matched: the platform's
    entries, else the Claude API's; on the Claude API, an id in a platform's form goes to that
    platform's entries."""
    providers = [FEATURES[platform].prices]
    if platform == "anthropic":
        providers += [provider for provider, form in _PLATFORM_FORMS if form in model]
    elif providers[0] != PROVIDER:
        providers.append(PROVIDER)
    for provider in providers:
        catalogue = _current(provider)
        matched = catalogue.match(model) or _undated_on_bedrock(catalogue, model)
        if matched is not None:
            return catalogue, matched
    return None


def _undated_on_bedrock(catalogue: _Catalogue, model: str) -> str | None:
    """Bedrock's Messages API names a model without its date (`anthropic.claude-haiku-4-5`,
    `global.anthropic.claude-haiku-4-5`): the newest dated entry of that name in genai-prices'
    Bedrock entries, the global one for a `global.` id, else the regional one (the dearer: a cost
    budget never counts a regional call at the global price)."""
    if catalogue.provider != "aws" or _DATED.search(model):
        return None
    geography, marker, name = model.partition("anthropic.")
    if not marker or not name.startswith("claude-"):
        return None
    scope = "global." if geography == "global." else "regional."
    dated = re.compile(rf"{re.escape(scope)}anthropic\.{re.escape(name)}-\d{{8}}-v\d+:\d+")
    found = sorted(model_id for model_id in catalogue.by_id if dated.fullmatch(model_id))
    return found[-1] if found else None


_CONTEXTS: Final = {"fast": {"speed": "fast"}, "batch": {"processing": "batch"}}
"""`Price` field -> the genai-prices price context of its rates."""


def _priced(model: ModelInfo, now: datetime) -> Price | None:
    """A genai-prices model's `Price` today, with its fast and batch prices where it has them."""
    price = from_genai_prices(model.get_prices(now))
    if price is None:
        return None
    variants = {
        field
        for field, context in _CONTEXTS.items()
        if context in (v.when for v in model.price_variants or ())
    }

    def variant(field: str) -> Price | None:
        return from_genai_prices(model.get_prices(now, _CONTEXTS[field])) if field in variants else None

    return dataclasses.replace(price, fast=variant("fast"), batch=variant("batch"))


_RATES: Final = {
    "input_per_mtok": "input_mtok",
    "output_per_mtok": "output_mtok",
    "cache_read_per_mtok": "cache_read_mtok",
    "cache_write_per_mtok": "cache_write_mtok",
    "cache_write_1h_per_mtok": "cache_write_1h_mtok",
}
"""`Price` field -> genai-prices price key."""


def from_genai_prices(model_price: ModelPrice) -> Price | None:
    """A genai-prices `ModelPrice` as a `Price`, its long-context tiers and its web search rate
    included; None without an input or an output price. Prices per request are left out."""
    rates: dict[str, Decimal | TieredPrices | None] = {
        field: getattr(model_price, key, None) for field, key in _RATES.items()
    }
    if rates["input_per_mtok"] is None or rates["output_per_mtok"] is None:
        return None
    starts = sorted(
        {tier.start for rate in rates.values() if isinstance(rate, TieredPrices) for tier in rate.tiers}
    )

    def flat(above: int) -> dict[str, float | None]:
        """The rates of a request with more than `above` input tokens."""
        flat_rates: dict[str, float | None] = {}
        for field, rate in rates.items():
            if isinstance(rate, TieredPrices):
                applicable = rate.base
                for tier in sorted(rate.tiers, key=lambda tier: tier.start):
                    if tier.start <= above:
                        applicable = tier.price
                rate = applicable
            flat_rates[field] = None if rate is None else float(rate)
        return flat_rates

    def price(rates: dict[str, float | None], tiers: tuple[tuple[int, Price], ...] = ()) -> Price:
        # As genai-prices counts them: tokens of a kind without a price of its own are priced as
        # the kind they are part of (a 1-hour write as a write, a write or a read as input).
        base = rates["input_per_mtok"] or 0.0
        write = rates["cache_write_per_mtok"]
        write = base if write is None else write
        read = rates["cache_read_per_mtok"]
        write_1h = rates["cache_write_1h_per_mtok"]
        searches = getattr(model_price, "web_searches_kcount", None)
        return Price(
            input_per_mtok=base,
            output_per_mtok=rates["output_per_mtok"] or 0.0,
            cache_read_per_mtok=base if read is None else read,
            cache_write_per_mtok=write,
            cache_write_1h_per_mtok=write if write_1h is None else write_1h,
            # The published rate ($10 per 1,000) where genai-prices lists none: a cost errs high.
            web_search_per_1k=float(searches) if isinstance(searches, Decimal) else 10.0,
            tiers=tiers,
        )

    return price(flat(-1), tuple((start, price(flat(start))) for start in starts))


@final
class _DefaultPrices(Mapping[str, Price]):
    """genai-prices' Claude models by their genai-prices id, at today's prices (read on first use)."""

    def __getitem__(self, model: str) -> Price:
        return _current().by_id[model]

    def __iter__(self) -> Iterator[str]:
        return iter(_current().by_id)

    def __len__(self) -> int:
        return len(_current().by_id)

    def __repr__(self) -> str:
        return f"PRICES({dict(self)!r})"


PRICES: Final[Mapping[str, Price]] = _DefaultPrices()
"""genai-prices' current list prices (USD per MTok) of Claude models, by genai-prices model id
(`claude-sonnet-4-6`, `claude-haiku-4-5`, ...); read-only."""


def default_price(model: str) -> Price | None:
    """genai-prices' current price of `model` on Anthropic's API, or None when it has none.

    genai-prices matches the names the API accepts: aliases, dated snapshots
    (`claude-haiku-4-5-20251001`), `-latest`; the price is the `PRICES` entry of the id matched.
    """
    catalogue = _current()
    found = catalogue.match(model)
    return None if found is None else catalogue.by_id[found]


def resolve_price(
    model: str,
    prices: Mapping[str, Price] | None = None,
    platform: Platform = "anthropic",
    region: str | None = None,
) -> Price | None:
    """The price a loop on `model` is costed at: the caller's entry, else genai-prices', else None.

    The caller's `prices` win. Their entries are matched exactly, then by the genai-prices id the
    model belongs to (so `{"claude-sonnet-4-5": ...}` prices `claude-sonnet-4-5-20250929` too),
    then as `price_for` matches dated ids. genai-prices' price is the platform's entry for the
    model, else the Claude API's (the module docstring).

    Args:
        model: the model the loop calls.
        prices: the caller's prices (`AgentLoop(prices=...)`), by model name.
        platform: where the loop's client runs (`boundloop.platforms.platform_of`).
        region: a Vertex AI client's region (`boundloop.platforms.vertex_region`): genai-prices'
            price is the global endpoint's, a regional endpoint's premium is added to it.

    Raises:
        ConfigurationError: the caller's entry found is not a `Price`.
    """
    if prices and model in prices:
        return _checked(model, prices[model])
    found = _catalogue_for(model, platform)
    if prices:
        if found is not None and found[1] in prices:
            return _checked(found[1], prices[found[1]])
        priced = price_for(model, prices)
        if priced is not None:
            return priced
    if found is None:
        return None
    price = found[0].by_id[found[1]]
    if platform == "vertex" and region not in (None, "global"):
        return price.scaled(regional_premium(model))
    return price


def regional_premium(model: str) -> float:
    """What a regional endpoint costs over the global one for `model` (a Vertex id such as
    `claude-sonnet-4-5@20250929` or `claude-sonnet-4-6`), as genai-prices' Amazon Bedrock entries
    price the same model's regional and `global.` profiles; 1.0 where they have no pair."""
    bedrock = _current("aws")
    name = model.replace("@", "-")
    regional, worldwide = bedrock.match(name), bedrock.match(f"global.anthropic.{name}")
    if regional is None or worldwide is None or not regional.startswith("regional."):
        return 1.0
    return bedrock.by_id[regional].input_per_mtok / bedrock.by_id[worldwide].input_per_mtok


_warned: set[str] = set()
"""Models warned about: a model is warned about once per process."""


def warn_unpriced(model: str) -> None:
    """Warn, once per model and process, that `model` has no price and its cost is not tracked,
    naming the closest id that has one (a misspelt `claude-sonet-4-5`: did you mean claude-sonnet-4-5?).

    The warning points at the first line outside boundloop: the `AgentLoop(...)` call.

    Warns:
        UnpricedModelWarning: the first time for this model (every time while warnings of this
            category are errors, since none was shown).
    """
    if model in _warned:
        return
    close = difflib.get_close_matches(model, list(_current().by_id), n=1, cutoff=0.8)
    hint = f"did you mean {close[0]}? If not, " if close else ""
    warnings.warn(
        f"no price known for model {model!r}: {hint}cost not tracked "
        f"(pass prices={{{model!r}: Price(...)}} to track it)",
        UnpricedModelWarning,
        stacklevel=_outside_boundloop(),
    )
    _warned.add(model)  # after the warning: one turned into an error leaves the model unwarned


def _outside_boundloop() -> int:
    """The `stacklevel` of the first frame outside this package, for a warning from `resolve_price`."""
    level = 1
    frame = inspect.currentframe()
    frame = None if frame is None else frame.f_back  # this function's caller: resolve_price
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name != "boundloop" and not name.startswith("boundloop."):
            break
        frame = frame.f_back
        level += 1
    return level


def price_for(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of `model` in the table `prices`: an exact entry, else the entry the dated id
    belongs to. Only the table is read; `resolve_price` adds genai-prices' prices.

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
