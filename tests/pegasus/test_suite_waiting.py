"""The suite's polling (tests/support/waiting.py) on a simulated clock: a long wait polls a few times a
second, not fifty, and still sees a condition within 0.1 s of its holding, and gives up at its timeout."""

from __future__ import annotations

import itertools

import pytest

from tests.support import waiting
from tests.support.clock import FakeTime as Clock


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(waiting, "time", clock)
    return clock


def test_a_wait_of_ten_seconds_polls_about_a_hundred_times_and_sees_the_condition_within_a_tenth(clock: Clock):
    polls: list[float] = []
    holds_at = clock.now + 10.0

    def predicate() -> bool:
        polls.append(clock.now)
        return clock.now >= holds_at

    assert waiting.wait_for(predicate) is True
    assert len(polls) <= 110  # every 20 ms it was 500
    assert polls[0] == 1000.0 and polls[1] - polls[0] == pytest.approx(0.02)  # a quick condition is seen at once
    assert max(b - a for a, b in itertools.pairwise(polls)) <= 0.1 + 1e-9
    assert polls[-1] - holds_at <= 0.1 + 1e-9


def test_a_condition_that_never_holds_fails_at_the_timeout_naming_it(clock: Clock) -> None:
    with pytest.raises(AssertionError, match="timed out after 5s waiting for the answer"):
        waiting.wait_for(lambda: None, timeout=5, what="the answer")
    assert 1005.0 <= clock.now <= 1005.1


def test_a_cheap_predicate_may_keep_the_first_pace(clock: Clock) -> None:
    polls: list[float] = []
    waiting.wait_for(lambda: polls.append(clock.now) or len(polls) > 50, poll_max_s=0.02)
    assert max(b - a for a, b in itertools.pairwise(polls)) == pytest.approx(0.02)
