"""JSON as the command prints or writes it: dollar amounts rounded to a millionth of a dollar.

A cost is a sum of token counts times prices per million tokens, so its float carries binary
noise (`0.038099999999999995`). The run's state keeps the exact sum (budgets compare against
it); what the command shows a person or a report is rounded.
"""

from __future__ import annotations

import json
from typing import Final, cast

from .._base.recorded import json_default

COST_DECIMALS: Final = 6
"""Decimals of a dollar amount in the command's JSON: a millionth of a dollar."""


def rounded_costs(value: object) -> object:
    """`value` with every float under a key ending in `_usd` (`cost_usd`, `max_cost_usd`) rounded.

    Args:
        value: JSON values: dicts, lists and scalars (anything else is returned as it is).

    Returns:
        A copy of the dicts and lists, with those floats rounded to `COST_DECIMALS`.
    """
    if isinstance(value, dict):
        return {
            key: round(item, COST_DECIMALS)
            if isinstance(key, str) and key.endswith("_usd") and isinstance(item, float)
            else rounded_costs(item)
            for key, item in cast(dict[object, object], value).items()
        }
    if isinstance(value, list):
        return [rounded_costs(item) for item in cast(list[object], value)]
    return value


def dumps(value: object) -> str:
    """`value` as indented JSON text, its costs rounded (see `rounded_costs`).

    Args:
        value: what to print: a result's or a report's `to_dict()` (SDK objects in it are
            written as the API sent them).

    Returns:
        The JSON text, indented by 2, without a final newline.
    """
    return json.dumps(rounded_costs(value), indent=2, default=json_default)
