"""Admission under a model's rate budgets: requests and tokens per minute over a sliding window.

It decides whether one more call may start now or how long to wait, replaces an estimate with the
reported usage, and pauses after a 429.  It must not sleep, read a clock or send messages: the
caller passes ``now`` and keeps its own queue.  A call larger than the whole token budget is
admitted once the window is empty (otherwise it could never run).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from itertools import count

from pegasus.config import LLMSettings
from pegasus.task.models import TaskContext

WINDOW_S = 60.0
CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text and JSON
PROMPT_OVERHEAD_TOKENS = 400  # the system prompt and tool schemas of one stage call
DEFAULT_OUTPUT_TOKENS = 1024  # assumed when no output cap is configured


@dataclass
class _Admitted:
    key: Hashable
    at: float
    tokens: int


class RateLimiter:
    """A sliding one-minute window of admitted calls, checked against ``rpm`` and ``tpm`` (0 = unlimited).

    ``reserve(tokens, now, key=...)`` returns the seconds to wait; 0.0 means the
    call is admitted and recorded under ``key`` (pass the key to ``reconcile``
    once the endpoint reports the real usage).
    """

    def __init__(self, rpm: int = 0, tpm: int = 0, *, window_s: float = WINDOW_S) -> None:
        if rpm < 0 or tpm < 0 or window_s <= 0:
            raise ValueError("rpm and tpm must be >= 0 and window_s > 0")
        self.rpm, self.tpm, self.window_s = rpm, tpm, window_s
        self.paused_until = float("-inf")
        self._admitted: deque[_Admitted] = deque()
        self._keys = count()

    # -- queries ---------------------------------------------------------------------------

    def used(self, now: float) -> tuple[int, int]:
        """(requests, tokens) admitted in the window ending at ``now``."""
        self._expire(now)
        return len(self._admitted), sum(entry.tokens for entry in self._admitted)

    def wait_s(self, estimated_tokens: int, now: float) -> float:
        """Seconds until a call of ``estimated_tokens`` would be admitted (0.0: now); records nothing."""
        self._expire(now)
        waits = [self.paused_until - now]
        if self.rpm and len(self._admitted) >= self.rpm:
            # The oldest calls must leave the window until one request slot is free.
            waits.append(self._admitted[len(self._admitted) - self.rpm].at + self.window_s - now)
        if self.tpm:
            waits.append(self._tokens_wait(max(0, estimated_tokens), now))
        return max(0.0, *waits)

    # -- changes ---------------------------------------------------------------------------

    def reserve(self, estimated_tokens: int, now: float, *, key: Hashable | None = None) -> float:
        """0.0 and the call recorded (under ``key``) when it may start now; else the seconds to wait."""
        wait = self.wait_s(estimated_tokens, now)
        if wait > 0:
            return wait
        self._admitted.append(_Admitted(next(self._keys) if key is None else key, now, max(0, estimated_tokens)))
        return 0.0

    def reconcile(self, key: Hashable, actual_tokens: int) -> bool:
        """Replace the estimate of the call recorded under ``key`` by its reported usage.

        False when no such call is in the window any more (it has expired, or was
        never admitted): then there is nothing left to correct.
        """
        for entry in self._admitted:
            if entry.key == key:
                entry.tokens = max(0, int(actual_tokens))
                return True
        return False

    def release(self, key: Hashable) -> bool:
        """Forget an admitted call that never reached the endpoint (it frees its request and tokens)."""
        for entry in self._admitted:
            if entry.key == key:
                self._admitted.remove(entry)
                return True
        return False

    def pause_until(self, t: float) -> None:
        """Admit nothing before ``t`` (a 429's Retry-After); a later pause extends, an earlier one is ignored."""
        self.paused_until = max(self.paused_until, t)

    # -- internals -------------------------------------------------------------------------

    def _expire(self, now: float) -> None:
        while self._admitted and self._admitted[0].at + self.window_s <= now:
            self._admitted.popleft()

    def _tokens_wait(self, estimated: int, now: float) -> float:
        used = sum(entry.tokens for entry in self._admitted)
        if used + estimated <= self.tpm or not self._admitted:
            return 0.0
        # Let the oldest calls leave the window until the new one fits (or the window is empty).
        for entry in self._admitted:
            used -= entry.tokens
            if used + estimated <= self.tpm or used == 0:
                return entry.at + self.window_s - now
        return self._admitted[-1].at + self.window_s - now  # unreachable: used reaches 0 at the end


class RateLimiters:
    """One RateLimiter per model, all with the same budgets (``[llm] rpm`` and ``tpm``)."""

    def __init__(self, rpm: int = 0, tpm: int = 0, *, window_s: float = WINDOW_S) -> None:
        self.rpm, self.tpm, self.window_s = rpm, tpm, window_s
        self._limiters: dict[str, RateLimiter] = {}

    @classmethod
    def from_settings(cls, llm: LLMSettings) -> RateLimiters:
        return cls(llm.rpm, llm.tpm)

    def for_model(self, model: str) -> RateLimiter:
        if model not in self._limiters:
            self._limiters[model] = RateLimiter(self.rpm, self.tpm, window_s=self.window_s)
        return self._limiters[model]


def estimate_tokens(context: TaskContext, max_output_tokens: int = DEFAULT_OUTPUT_TOKENS) -> int:
    """A cautious guess of one stage call's tokens: the context as text / 4, the prompt, the output cap.

    The prompt a stage sends is built from the same fields (input, messages,
    perception, reasoning, plan, tool results), so their JSON text bounds it.
    """
    fields = context.model_dump(mode="json", include={"input_text", "messages", "perception", "reasoning",
                                                      "plan", "actions_done", "reflections"})
    chars = len(json.dumps(fields, ensure_ascii=False, default=str))
    output = max_output_tokens if max_output_tokens > 0 else DEFAULT_OUTPUT_TOKENS
    return PROMPT_OVERHEAD_TOKENS + -(-chars // CHARS_PER_TOKEN) + output
