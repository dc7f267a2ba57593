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
    """The sums of one stage's calls: prompt/completion/total tokens, the number of calls, the model."""

    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_FIELDS, 0))
    calls: int = 0
    model: str = ""
    ladder: list[str] = field(default_factory=list)  # what the endpoint refused and what was sent instead

    def add(self, usage: Mapping[str, Any], model: str) -> None:
        self.calls += 1
        for key in _FIELDS:
            self.totals[key] += int(usage.get(key) or 0)
        if not self.totals["total_tokens"] and (self.totals["prompt_tokens"] or self.totals["completion_tokens"]):
            self.totals["total_tokens"] = self.totals["prompt_tokens"] + self.totals["completion_tokens"]
        self.model = model or self.model

    def as_dict(self) -> dict[str, Any] | None:
        """``{prompt_tokens, completion_tokens, total_tokens, calls, model}`` (and ``ladder``, the steps
        taken, when the endpoint refused a parameter), or None when nothing was called."""
        if not self.calls:
            return None
        steps = {"ladder": list(self.ladder)} if self.ladder else {}
        return {**self.totals, "calls": self.calls, "model": self.model, **steps}


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


def record(usage: Mapping[str, Any], model: str) -> None:
    """Add one call's usage to the open meter, if any."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.add(usage, model)


def step(change: str) -> None:
    """Note a step down the capability ladder (pegasus.llm.ladder) in the open meter, if any."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.ladder.append(change)


def current() -> dict[str, Any] | None:
    """The open meter's usage so far (None outside a meter or before any call)."""
    meter = _CURRENT.get()
    return None if meter is None else meter.as_dict()
