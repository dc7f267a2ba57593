"""The llm pool's budget: admission, reconciliation, 429 pauses and the requeue limit."""

from __future__ import annotations

from pegasus.config import Settings
from pegasus.llm.budget import MAX_REQUEUES, LlmBudget
from pegasus.llm.ratelimit import RateLimiter
from pegasus.task import TaskContext


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_only_a_model_backed_llm_pool_has_a_budget() -> None:
    def settings(**llm: object) -> Settings:
        return Settings().with_overrides({"llm": llm})

    assert LlmBudget.for_pool("llm", settings(provider="offline")) is None
    assert LlmBudget.for_pool("tool", settings(provider="openai", model="m")) is None
    assert LlmBudget.for_pool("llm", settings(provider="openai", model="m", tpm=10)) is not None


def test_requests_per_minute_hold_the_next_call_until_the_window_moves() -> None:
    clock = Clock()
    budget = LlmBudget(RateLimiter(rpm=2), 100, clock)
    assert [budget.admit(TaskContext(), key) for key in (1, 2)] == [0.0, 0.0]
    assert budget.admit(TaskContext(), 3) == 60.0
    clock.now = 60.0
    assert budget.admit(TaskContext(), 3) == 0.0


def test_a_rate_limited_result_pauses_and_asks_to_be_queued_again_a_few_times() -> None:
    clock = Clock()
    budget = LlmBudget(RateLimiter(), 100, clock)
    assert budget.admit(TaskContext(), 1) == 0.0
    assert budget.settle(1, {"usage": {"total_tokens": 9}}, requeues=0) is False
    assert budget.settle(2, {"retry_after_s": 2.5}, requeues=0) is True
    assert budget.admit(TaskContext(), 3) == 2.5  # paused for Retry-After
    clock.now = 2.5
    assert budget.admit(TaskContext(), 3) == 0.0
    assert budget.settle(4, {"retry_after_s": None}, requeues=MAX_REQUEUES) is False  # patience used up
    assert budget.admit(TaskContext(), 5) == 5.0  # no Retry-After: the default pause


def test_reported_usage_replaces_the_estimate() -> None:
    clock = Clock()
    budget = LlmBudget(RateLimiter(tpm=1000), 500, clock)
    assert budget.admit(TaskContext(), 1) == 0.0
    held = budget.admit(TaskContext(), 2)
    assert held > 0  # two estimates (~900 each) do not fit in 1,000
    budget.settle(1, {"usage": {"total_tokens": 20}}, requeues=0)
    assert budget.admit(TaskContext(), 2) == 0.0
