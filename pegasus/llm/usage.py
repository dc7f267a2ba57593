"""Token usage of the model calls one stage makes, collected without changing the processor interfaces.

``run_stage`` opens a meter around a stage; the llm processors ``record`` each
call's reported usage into whichever meter is open (a context variable: one per
thread, so concurrent stages in one process never mix).  Outside a meter,
``record`` does nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass
class UsageMeter:
    """The sums of one stage's calls: prompt/completion/total tokens, the number of calls, the model;
    cached prompt tokens when the server reported them, the cost when the model has a price, the tier
    when it is not the default one."""

    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_FIELDS, 0))
    calls: int = 0
    model: str = ""
    ladder: list[str] = field(default_factory=list)  # what the endpoint refused and what was sent instead
    cached_tokens: int | None = None  # None: the server never said
    cost_usd: float | None = None  # None: no call was priced
    unpriced: int = 0
    tier: str | None = None
    estimated: int = 0  # calls whose usage the server did not report (estimated from the text)
    degraded: list[str] = field(default_factory=list)  # replies read in a lesser way (prose where JSON was asked)

    def add(self, usage: Mapping[str, Any], model: str, cost_usd: float | None = None,
            tier: str | None = None) -> None:
        self.calls += 1
        for key in _FIELDS:
            self.totals[key] += int(usage.get(key) or 0)
        if not self.totals["total_tokens"] and (self.totals["prompt_tokens"] or self.totals["completion_tokens"]):
            self.totals["total_tokens"] = self.totals["prompt_tokens"] + self.totals["completion_tokens"]
        if usage.get("estimated"):
            self.estimated += 1
        if "cached_tokens" in usage:
            self.cached_tokens = (self.cached_tokens or 0) + int(usage.get("cached_tokens") or 0)
        if cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd = (self.cost_usd or 0.0) + cost_usd
        self.model = model or self.model
        self.tier = tier or self.tier

    def as_dict(self) -> dict[str, Any] | None:
        """``{prompt_tokens, completion_tokens, total_tokens, calls, model}`` (and ``cached_tokens``,
        ``cost_usd``, ``unpriced_calls``, ``tier``, ``ladder``: the steps taken when the endpoint
        refused a parameter, ``estimated_calls``: calls whose tokens are estimated, ``degraded``: how
        a reply that did not fit was read, when they apply), or None when nothing was called."""
        if not self.calls:
            return None
        out: dict[str, Any] = {**self.totals, "calls": self.calls, "model": self.model}
        if self.cached_tokens is not None:
            out["cached_tokens"] = self.cached_tokens
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 8)
            if self.unpriced:
                out["unpriced_calls"] = self.unpriced
        if self.tier:
            out["tier"] = self.tier
        if self.ladder:
            out["ladder"] = list(self.ladder)
        if self.estimated:
            out["estimated_calls"] = self.estimated
        if self.degraded:
            out["degraded"] = list(self.degraded)
        return out


_CURRENT: ContextVar[UsageMeter | None] = ContextVar("pegasus_usage_meter", default=None)


@contextmanager
def metering() -> Iterator[UsageMeter]:
    """Collect the usage recorded inside the block."""
    meter = UsageMeter()
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def record(usage: Mapping[str, Any], model: str, cost_usd: float | None = None, tier: str | None = None) -> None:
    """Add one call's usage (its cost, the tier it ran on) to the open meter, if any."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.add(usage, model, cost_usd, tier)


def step(change: str) -> None:
    """Note a step down the capability ladder (pegasus.llm.ladder) in the open meter, if any."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.ladder.append(change)


def degraded(note: str) -> None:
    """Note in the open meter, if any, that a reply was read in a lesser way (prose where JSON was asked)."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.degraded.append(note)


def current() -> dict[str, Any] | None:
    """The open meter's usage so far (None outside a meter or before any call)."""
    meter = _CURRENT.get()
    return None if meter is None else meter.as_dict()
