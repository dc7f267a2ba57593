"""What model calls cost: a call's usage priced by ``[llm.prices]``, and the sums a task and a system show.

Pure arithmetic on plain dicts.  A call without a price, or whose usage was estimated, has no cost,
never a cost of zero, and sums say how many such calls they hold (docs/llm.md, "Cost").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pegasus.config import ModelPrice

PER = 1_000_000  # prices are per million tokens
COST_DIGITS = 8  # rounding of sums: float noise gone, well below a millionth of a dollar


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def call_cost(usage: Mapping[str, Any], price: ModelPrice | None) -> float | None:
    """USD of one call (or of several calls' summed usage) at ``price``; None without a price."""
    if price is None or usage.get("estimated"):
        return None
    prompt = _int(usage.get("prompt_tokens"))
    cached = min(_int(usage.get("cached_tokens")), prompt)
    cached_rate = price.input if price.cached_input is None else price.cached_input
    total = (prompt - cached) * price.input + cached * cached_rate + _int(usage.get("completion_tokens")) * price.output
    return round(total / PER, COST_DIGITS)


USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens", "calls")


def usage_sum(usages: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The sum of stage usages (``UsageMeter.as_dict`` shapes): tokens and calls always; ``cached_tokens``
    when any reported some; ``cost_usd`` when any was priced, with ``unpriced_calls`` when others were not."""
    total: dict[str, Any] = dict.fromkeys(USAGE_KEYS, 0)
    cached, cost, priced, unpriced, estimated = None, None, False, 0, 0
    for usage in usages:
        if not usage:
            continue
        for key in USAGE_KEYS:
            total[key] += _int(usage.get(key))
        estimated += _int(usage.get("estimated_calls"))
        if "cached_tokens" in usage:
            cached = (cached or 0) + _int(usage["cached_tokens"])
        if isinstance(usage.get("cost_usd"), (int, float)):
            cost, priced = (cost or 0.0) + float(usage["cost_usd"]), True
        elif _int(usage.get("calls")):
            unpriced += _int(usage.get("calls"))
    if cached is not None:
        total["cached_tokens"] = cached
    if estimated:
        total["estimated_calls"] = estimated
    if priced:
        total["cost_usd"] = round(cost or 0.0, COST_DIGITS)
        if unpriced:
            total["unpriced_calls"] = unpriced
    return total


def cost_text(usage: Mapping[str, Any]) -> str:
    """``$0.001234`` (``+ 2 unpriced calls``), or "" when nothing was priced."""
    if not isinstance(usage.get("cost_usd"), (int, float)):
        return ""
    text = f"${usage['cost_usd']:.6f}"
    if usage.get("unpriced_calls"):
        text += f" (+ {usage['unpriced_calls']} unpriced calls)"
    return text
