"""The rate-budget admission component: pure, driven by a fake clock (no wall time anywhere)."""

from __future__ import annotations

import pytest

from pegasus.config import LLMSettings
from pegasus.llm.ratelimit import DEFAULT_OUTPUT_TOKENS, RateLimiter, RateLimiters, estimate_tokens
from pegasus.task.models import ActionResult, TaskContext


def drive(limiter: RateLimiter, calls: list[int], *, step: float = 0.5, until: float = 600.0) -> list[tuple[int, float]]:
    """A caller that retries each queued call (FIFO) after the wait it is told: (call, admitted at)."""
    admitted, now, queue = [], 0.0, list(enumerate(calls))
    while queue and now <= until:
        index, tokens = queue[0]
        wait = limiter.reserve(tokens, now, key=index)
        if wait == 0.0:
            admitted.append((index, now))
            queue.pop(0)
        else:
            assert wait > 0
            now += wait  # a real caller sleeps exactly this long: the fake clock jumps
    return admitted


def test_a_tokens_per_minute_budget_spaces_the_calls() -> None:
    """tpm 1000, calls of 400: two per minute, each pair admitted when the oldest leaves the window."""
    admitted = drive(RateLimiter(tpm=1000), [400] * 6)
    assert [index for index, _ in admitted] == [0, 1, 2, 3, 4, 5]  # FIFO order kept
    assert [at for _, at in admitted] == [0.0, 0.0, 60.0, 60.0, 120.0, 120.0]


def test_within_the_budget_nothing_waits() -> None:
    limiter = RateLimiter(tpm=10_000, rpm=10)
    assert [limiter.reserve(100, t) for t in (0.0, 1.0, 2.0)] == [0.0, 0.0, 0.0]
    assert limiter.used(2.0) == (3, 300)


def test_count_of_calls_admitted_in_any_minute_respects_both_budgets() -> None:
    limiter = RateLimiter(rpm=3, tpm=1000)
    admitted = drive(limiter, [100] * 10)
    times = [at for _, at in admitted]
    for start in times:
        in_window = [t for t in times if start <= t < start + 60.0]
        assert len(in_window) <= 3
    assert len(admitted) == 10 and times[:4] == [0.0, 0.0, 0.0, 60.0]


def test_reconcile_replaces_the_estimate_with_the_reported_usage() -> None:
    limiter = RateLimiter(tpm=1000)
    assert limiter.reserve(900, 0.0, key="a") == 0.0
    assert limiter.reserve(500, 1.0, key="b") == pytest.approx(59.0)  # the estimate fills the budget
    assert limiter.reconcile("a", 200) is True  # the call used far less
    assert limiter.reserve(500, 1.0, key="b") == 0.0
    assert limiter.used(1.0) == (2, 700)
    assert limiter.reconcile("gone", 10) is False


def test_usage_larger_than_estimated_delays_later_calls() -> None:
    limiter = RateLimiter(tpm=1000)
    limiter.reserve(100, 0.0, key="a")
    limiter.reconcile("a", 1000)
    assert limiter.reserve(100, 10.0) == pytest.approx(50.0)


def test_release_frees_a_call_that_never_ran() -> None:
    limiter = RateLimiter(rpm=1)
    limiter.reserve(10, 0.0, key="a")
    assert limiter.reserve(10, 1.0) > 0
    assert limiter.release("a") is True
    assert limiter.reserve(10, 1.0) == 0.0


def test_pause_until_stops_admission_then_resumes() -> None:
    """A 429 with Retry-After: 30 at t=5 pauses every call until t=35, whatever the budgets."""
    limiter = RateLimiter()  # unlimited budgets
    limiter.pause_until(35.0)
    assert limiter.reserve(10, 5.0) == pytest.approx(30.0)
    limiter.pause_until(20.0)  # an earlier pause does not shorten it
    assert limiter.reserve(10, 34.0) == pytest.approx(1.0)
    assert limiter.reserve(10, 35.0) == 0.0


def test_a_call_larger_than_the_budget_runs_alone() -> None:
    limiter = RateLimiter(tpm=100)
    assert limiter.reserve(500, 0.0) == 0.0  # empty window: admitted, the endpoint decides
    assert limiter.reserve(10, 1.0) == pytest.approx(59.0)
    assert limiter.reserve(500, 60.0) == 0.0


def test_unlimited_budgets_never_wait() -> None:
    limiter = RateLimiter(rpm=0, tpm=0)
    assert all(limiter.reserve(10**9, 0.0) == 0.0 for _ in range(1000))


def test_bad_budgets_are_refused() -> None:
    with pytest.raises(ValueError):
        RateLimiter(rpm=-1)


def test_one_limiter_per_model_from_settings() -> None:
    limiters = RateLimiters.from_settings(LLMSettings(rpm=1, tpm=0))
    assert limiters.for_model("a") is limiters.for_model("a")
    limiters.for_model("a").reserve(1, 0.0)
    assert limiters.for_model("a").reserve(1, 0.0) > 0
    assert limiters.for_model("b").reserve(1, 0.0) == 0.0


def test_estimate_grows_with_the_context_and_the_output_cap() -> None:
    small = estimate_tokens(TaskContext(input_text="hi"), 100)
    big = TaskContext(input_text="hi", actions_done=[
        ActionResult(step_index=0, tool="read_file", success=True, output="x" * 4000)])
    assert estimate_tokens(big, 100) >= small + 1000
    assert estimate_tokens(TaskContext(input_text="hi"), 500) == small + 400
    assert estimate_tokens(TaskContext(input_text="hi"), 0) == small - 100 + DEFAULT_OUTPUT_TOKENS
