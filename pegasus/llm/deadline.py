"""The stage's deadline, as every model call inside the stage sees it.

A worker opens ``within(budget_s)`` around the stage and the client fits each attempt in what is
left, so retries cannot outlast the pool's stage deadline and a hung endpoint fails the stage with
the model's timeout named (docs/llm.md, "Time limits").  A ContextVar: each thread opens its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

MIN_ATTEMPT_S = 0.5  # less left than this: no retry is started (it could not be answered in time)
MIN_FIRST_S = 0.01  # a call's first attempt is made with whatever is left (a deadline under MIN_ATTEMPT_S works)


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic() seconds
    budget_s: float  # what the stage was given (for the error message)


_DEADLINE: ContextVar[Deadline | None] = ContextVar("pegasus_llm_deadline", default=None)


@contextmanager
def within(budget_s: float) -> Iterator[None]:
    """Model calls this thread makes inside the block end by ``budget_s`` from now (0: no deadline)."""
    token = _DEADLINE.set(Deadline(time.monotonic() + budget_s, budget_s) if budget_s > 0 else None)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def current() -> Deadline | None:
    return _DEADLINE.get()


def left_s() -> float | None:
    """Seconds left before the stage's deadline (None: no deadline)."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline.at - time.monotonic()
