"""The llm pool's admission under a model's rate budgets and its 429 pauses.

``admit(request_context, key)`` says when a request may go to a worker (it waits first in the pool's
queue); ``settle(key, worker_report)`` replaces the estimate with the reported usage, and a 429
pauses admission for its Retry-After and queues the stage again, ``[llm] max_retries`` times at most
(docs/llm.md, "Rate budgets").  Pure: the clock is a parameter; no Thespian.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

from pegasus.config import DEFAULT_TIER, LLMSettings, Settings
from pegasus.llm.ratelimit import RateLimiter, RateLimiters, estimate_tokens
from pegasus.task.models import TaskContext
from pegasus.task.names import PoolName

MAX_REQUEUES = 3  # a stage rate-limited this often fails after all (without settings: [llm] max_retries)
DEFAULT_PAUSE_S = 5.0  # a 429 without Retry-After
MAX_PAUSE_S = 60.0  # a longer Retry-After is waited this long (the openai SDK's own ceiling)


class LlmBudget:
    """One RateLimiter per tier (``[llm.tiers]``; ``limiter`` is the default tier's, ``[llm]`` rpm/tpm):
    each tier's model has its own budget, a 429 pauses only the tier that got it."""

    def __init__(self, limiter: RateLimiter, max_output_tokens: int,
                 clock: Callable[[], float] = time.monotonic, *, llm: LLMSettings | None = None) -> None:
        self.limiter, self.max_output_tokens, self.clock, self.llm = limiter, max_output_tokens, clock, llm
        self.limiters: dict[str, RateLimiter] = {DEFAULT_TIER: limiter}
        self.max_requeues = llm.max_retries if llm is not None else MAX_REQUEUES  # one layer of 429 retries: ours
        self.settled: dict[tuple[str, str], int] = {}  # (tier, ok | error | rate_limited) -> stages settled
        self._tiers: dict[Hashable, str] = {}  # admitted call -> its tier
        # How many tiers stages and tasks can name: once that many refuse, no queued request can run.
        self.tier_count = len(llm.tier_names()) if llm is not None else 1

    @classmethod
    def for_pool(cls, pool: str, settings: Settings,
                 clock: Callable[[], float] = time.monotonic) -> LlmBudget | None:
        """The budget of the ``llm`` pool of a system that talks to a model; None otherwise."""
        llm = settings.llm
        if pool != PoolName.LLM or llm.provider == "offline":
            return None
        return cls(RateLimiters.from_settings(llm).for_model(llm.model), llm.max_output_tokens, clock, llm=llm)

    def tier_of(self, stage: str, task_tier: str | None = None) -> str:
        """The tier a call of ``stage`` runs on: its task's (``submit --tier``), else the stage's."""
        return self.llm.tier_of(stage, task_tier) if self.llm is not None and stage else DEFAULT_TIER

    def _limiter(self, tier: str) -> RateLimiter:
        if tier not in self.limiters:
            assert self.llm is not None  # (only a budget with tiers names one)
            config = self.llm.tier(tier)
            self.limiters[tier] = RateLimiter(config.rpm, config.tpm)
        return self.limiters[tier]

    def admit(self, context: TaskContext | None, key: Hashable, stage: str = "", tier: str | None = None) -> float:
        """0.0 when the call may start now (recorded under ``key``, on ``tier``, else on ``stage``'s); else the
        seconds to wait."""
        tier = tier or self.tier_of(stage)
        config = self.llm.tier(tier) if self.llm is not None else None
        output = config.max_output_tokens if config is not None else self.max_output_tokens
        tokens = estimate_tokens(context, output) if context is not None else 0
        if config is not None and config.context_window:
            tokens = min(tokens, config.context_window)  # the context budget keeps a call within its window
        wait = self._limiter(tier).reserve(tokens, self.clock(), key=key)
        if wait == 0.0:
            self._tiers[key] = tier
        return wait

    def settle(self, key: Hashable, worker: dict[str, Any], requeues: int, ok: bool = True) -> bool:
        """Account for a finished call; True when the request should be queued again (rate-limited)."""
        tier = self._tiers.pop(key, DEFAULT_TIER)
        status = "rate_limited" if "retry_after_s" in worker else "ok" if ok and not worker.get("failed") else "error"
        self.settled[(tier, status)] = self.settled.get((tier, status), 0) + 1
        limiter = self._limiter(tier)
        usage = worker.get("usage") or {}
        total = usage.get("total_tokens")
        if isinstance(total, int):
            limiter.reconcile(key, total)
        else:
            limiter.release(key)
        if "retry_after_s" not in worker:
            return False
        pause = worker.get("retry_after_s")
        pause_s = min(max(0.0, float(pause)), MAX_PAUSE_S) if pause is not None else DEFAULT_PAUSE_S
        limiter.pause_until(self.clock() + pause_s)
        return requeues < self.max_requeues

    def release(self, key: Hashable) -> None:
        """A call that never reported (its worker died or overran): forget its estimate."""
        self._limiter(self._tiers.pop(key, DEFAULT_TIER)).release(key)

    def counts(self) -> list[dict[str, Any]]:
        """Model stages settled since the pool started, per tier and status (``/metrics``; they reset with it)."""
        return [{"tier": tier, "status": status, "count": count}
                for (tier, status), count in sorted(self.settled.items())]

    def view(self) -> dict[str, dict[str, Any]] | None:
        """What is left of each limited tier's budget in the current window (``pegasus stats``, the
        dashboard's pools); None when no tier has a limit."""
        now = self.clock()
        out: dict[str, dict[str, Any]] = {}
        for tier, limiter in sorted(self.limiters.items()):
            if not (limiter.rpm or limiter.tpm):
                continue
            requests, tokens = limiter.used(now)
            out[tier] = {"rpm": limiter.rpm, "tpm": limiter.tpm,
                         "requests_left": max(0, limiter.rpm - requests) if limiter.rpm else None,
                         "tokens_left": max(0, limiter.tpm - tokens) if limiter.tpm else None,
                         "paused_s": round(max(0.0, limiter.paused_until - now), 3)}
        return out or None
