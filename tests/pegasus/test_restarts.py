"""The restart policy: at once, then a doubling pause while the component keeps dying; calm resets it."""

from pegasus.restarts import Restarts


def test_first_death_restarts_at_once_then_the_pause_doubles_up_to_the_cap() -> None:
    policy = Restarts(first_s=0.0, then_s=1.0, max_s=8.0, stable_s=60.0)
    delays = []
    now = 0.0
    for _ in range(6):
        policy.started(now)
        now += 1.0  # dies a second after each start
        delays.append(policy.died(now))
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0, 8.0] and policy.count == 6


def test_a_component_that_stayed_up_starts_over() -> None:
    policy = Restarts(first_s=0.0, then_s=1.0, max_s=8.0, stable_s=60.0)
    policy.started(0.0)
    assert policy.died(1.0) == 0.0
    policy.started(1.0)
    assert policy.died(2.0) == 1.0
    policy.started(2.0)
    assert policy.died(100.0) == 0.0  # up 98 s: a fresh streak
