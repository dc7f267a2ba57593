"""The supervision core: what a child's death means (restart, back-off, crash loop, escalation), clock passed in."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pegasus.supervision import (
    Alarm, ChildSpec, Dropped, Escalate, Exceeded, Exited, Removed, Restart, StartAgain, Started, Supervision,
)

POOL = ChildSpec(intensity=3, period_s=60.0, first_s=0.0, then_s=1.0, max_s=8.0, stable_s=30.0)
TOP = ChildSpec(intensity=3, period_s=60.0, when_exceeded=Exceeded.SLOW_DOWN, max_s=8.0)


def test_a_permanent_child_starts_again_at_once_then_with_a_doubling_pause() -> None:
    tree = Supervision({"pool": ChildSpec(intensity=100, max_s=8.0)})
    delays = []
    for second in range(6):
        tree.step(Started("llm", "pool", second * 10.0))
        [command] = tree.step(Exited("llm", second * 10.0 + 1.0, reason="SIGKILL"))
        assert isinstance(command, StartAgain) and command.child == "llm" and command.reason == "SIGKILL"
        delays.append(command.delay_s)
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_a_child_that_stayed_up_starts_over_from_the_first_pause() -> None:
    tree = Supervision({"pool": POOL})
    tree.step(Started("llm", "pool", 0.0))
    assert tree.step(Exited("llm", 1.0))[0].delay_s == 0.0
    tree.step(Started("llm", "pool", 1.0))
    assert tree.step(Exited("llm", 2.0))[0].delay_s == 1.0
    tree.step(Started("llm", "pool", 2.0))
    assert tree.step(Exited("llm", 100.0))[0].delay_s == 0.0


def test_more_deaths_than_the_intensity_within_the_period_escalate_once() -> None:
    tree = Supervision({"pool": POOL})
    for death in range(3):
        tree.step(Started("tool", "pool", death * 2.0))
        assert isinstance(tree.step(Exited("tool", death * 2.0 + 1.0))[0], StartAgain)
    tree.step(Started("tool", "pool", 7.0))
    commands = tree.step(Exited("tool", 8.0, reason="killed by signal 9"))
    assert commands == [Alarm("tool", "pool", 4, 60.0, "killed by signal 9"),
                        Escalate("tool", "pool", 4, 60.0, "killed by signal 9")]
    assert tree.view(8.0)["tool"]["status"] == "given_up"
    assert tree.step(Exited("tool", 9.0)) == []  # given up: the parent is ending


def test_deaths_spread_wider_than_the_period_never_escalate() -> None:
    tree = Supervision({"pool": POOL})
    for death in range(20):
        now = death * 30.0  # two deaths per 60 s window at most
        tree.step(Started("llm", "pool", now - 29.0))
        assert all(isinstance(c, StartAgain) for c in tree.step(Exited("llm", now)))


def test_the_top_of_a_tree_slows_down_and_says_so() -> None:
    tree = Supervision({"supervisor": TOP})
    tree.step(Started("supervisor", "supervisor", 0.0))
    commands = []
    for death in range(5):
        commands = tree.step(Exited("supervisor", float(death), reason="OverflowError: timestamp too large"))
    assert commands == [Alarm("supervisor", "supervisor", 5, 60.0, "OverflowError: timestamp too large"),
                        StartAgain("supervisor", "supervisor", 8.0, 5, "OverflowError: timestamp too large")]
    view = tree.view(5.0)["supervisor"]
    assert view["status"] == "crash_looping" and view["restarts"] == 5 and view["recent"] == 5
    assert view["last_reason"] == "OverflowError: timestamp too large"
    assert tree.view(100.0)["supervisor"]["status"] == "restarting"  # the window passed
    tree.step(Started("supervisor", "supervisor", 100.0))
    assert tree.view(100.0)["supervisor"]["status"] == "up"


def test_a_temporary_child_is_dropped_and_a_transient_one_only_when_it_ended_normally() -> None:
    tree = Supervision({"task_actor": ChildSpec(restart=Restart.TEMPORARY),
                        "gateway": ChildSpec(restart=Restart.TRANSIENT)})
    tree.step(Started("actor-1", "task_actor", 0.0))
    assert tree.step(Exited("actor-1", 1.0)) == [Dropped("actor-1", "task_actor", "exited unexpectedly")]
    assert tree.step(Exited("actor-1", 2.0)) == []  # forgotten
    tree.step(Started("gw", "gateway", 0.0))
    assert isinstance(tree.step(Exited("gw", 1.0))[0], StartAgain)
    tree.step(Started("gw", "gateway", 1.0))
    assert tree.step(Exited("gw", 2.0, normal=True)) == [Dropped("gw", "gateway", "ended")]


def test_unknown_children_and_kinds_and_removed_children_start_nothing() -> None:
    tree = Supervision({"pool": POOL})
    assert tree.step(Exited("nobody", 1.0)) == []
    tree.step(Started("x", "unlisted kind", 0.0))
    assert isinstance(tree.step(Exited("x", 1.0))[0], Dropped)  # a forgotten kind must not loop
    tree.step(Started("llm", "pool", 0.0))
    tree.step(Removed("llm"))
    assert tree.step(Exited("llm", 1.0)) == [] and "llm" not in tree.view(1.0)


@pytest.mark.parametrize("bad", [dict(intensity=-1), dict(period_s=float("inf")), dict(max_s=float("nan")),
                                 dict(first_s=5.0, max_s=1.0), dict(then_s=-1.0)])
def test_a_spec_with_impossible_figures_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        ChildSpec(**bad)


events = st.lists(st.tuples(st.sampled_from(["start", "die", "end", "remove"]), st.sampled_from(["a", "b"]),
                            st.floats(0.0, 5.0, allow_nan=False)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(events, st.integers(0, 6), st.floats(1.0, 100.0), st.sampled_from(list(Exceeded)))
def test_any_sequence_never_raises_and_keeps_to_the_spec(script, intensity, period, exceeded) -> None:
    spec = ChildSpec(intensity=intensity, period_s=period, when_exceeded=exceeded, then_s=0.5, max_s=10.0)
    tree = Supervision({"k": spec})
    now, deaths = 0.0, {"a": [], "b": []}
    escalated = set()
    for action, child, gap in script:
        now += gap
        if action == "start":
            commands = tree.step(Started(child, "k", now))
            escalated.discard(child)
        elif action == "remove":
            commands = tree.step(Removed(child))
            deaths[child] = []
            escalated.discard(child)
        else:
            known = child in tree.children
            commands = tree.step(Exited(child, now, normal=action == "end"))
            if not known:
                assert commands == []
                continue
            deaths[child].append(now)
        assert commands == [] or action in ("die", "end")
        for command in commands:
            assert command.child == child
            if isinstance(command, StartAgain):
                assert 0.0 <= command.delay_s <= spec.max_s
        if action in ("die", "end") and child in tree.children:
            window = [t for t in deaths[child] if t > now - period]
            over = len(window) > intensity
            kinds = [type(c) for c in commands]
            if child in escalated:
                assert commands == []
            elif over and exceeded == Exceeded.ESCALATE:
                assert kinds == [Alarm, Escalate]
                escalated.add(child)
            elif over:
                assert kinds == [Alarm, StartAgain] and commands[1].delay_s == spec.max_s
            else:
                assert kinds == [StartAgain]
        assert all(v["recent"] <= v["restarts"] for v in tree.view(now).values())
