"""The llm pool's admission under a model's rate budgets and its 429 pauses.

The pool asks ``admit(request_context, key)`` before it hands a request to a
worker (0.0: go; otherwise the seconds to wait, while the request stays first
in the pool's queue), and ``settle(key, worker_report)`` when the result comes
back: the estimate is replaced by the reported usage, and a stage that the
endpoint rate-limited (a 429 beyond the SDK's own retries) pauses admission for
its Retry-After and asks to be queued again instead of failing its task, a few
times at most.  Pure: the clock is a parameter; no Thespian.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

from pegasus.config import Settings
from pegasus.llm.ratelimit import RateLimiter, RateLimiters, estimate_tokens
from pegasus.task.models import TaskContext
from pegasus.task.names import PoolName

MAX_REQUEUES = 3  # a stage rate-limited this often fails after all
DEFAULT_PAUSE_S = 5.0  # a 429 without Retry-After


class LlmBudget:
    def __init__(self, limiter: RateLimiter, max_output_tokens: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limiter, self.max_output_tokens, self.clock = limiter, max_output_tokens, clock

    @classmethod
    def for_pool(cls, pool: str, settings: Settings,
                 clock: Callable[[], float] = time.monotonic) -> LlmBudget | None:
        """The budget of the ``llm`` pool of a system that talks to a model; None otherwise."""
        llm = settings.llm
        if pool != PoolName.LLM or llm.provider == "offline":
            return None
        return cls(RateLimiters.from_settings(llm).for_model(llm.model), llm.max_output_tokens, clock)

    def admit(self, context: TaskContext | None, key: Hashable) -> float:
        """0.0 when the call may start now (recorded under ``key``); else the seconds to wait."""
        tokens = estimate_tokens(context, self.max_output_tokens) if context is not None else 0
        return self.limiter.reserve(tokens, self.clock(), key=key)

    def settle(self, key: Hashable, worker: dict[str, Any], requeues: int) -> bool:
        """Account for a finished call; True when the request should be queued again (rate-limited)."""
        usage = worker.get("usage") or {}
        total = usage.get("total_tokens")
        if isinstance(total, int):
            self.limiter.reconcile(key, total)
        else:
            self.limiter.release(key)
        if "retry_after_s" not in worker:
            return False
        pause = worker.get("retry_after_s")
        self.limiter.pause_until(self.clock() + (float(pause) if pause is not None else DEFAULT_PAUSE_S))
        return requeues < MAX_REQUEUES

    def release(self, key: Hashable) -> None:
        """A call that never reported (its worker died or overran): forget its estimate."""
        self.limiter.release(key)
