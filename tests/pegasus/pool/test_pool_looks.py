"""The supervisor's looks for a stopped pool (pegasus/pool/looks.py), a core of the one shape (``step(input) ->
[command]``): armed by work, ended when idle, and a pool stopped on two looks in a row is ended whatever happens
around it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pegasus.pool.looks import EVERY_S, EndPool, Look, LookIn, PoolLooks, PoolStarted, Work

RUNNING = {"llm": False, "tool": False}


def test_an_idle_system_is_not_looked_at_and_work_arms_one_timer() -> None:
    looks = PoolLooks()
    assert looks.step(Look(RUNNING, busy=False)) == []  # a look due from before: the last one
    assert looks.step(Work()) == [LookIn(EVERY_S)]
    assert looks.step(Work()) == []  # armed already: one timer, not one per run
    assert looks.step(Look(RUNNING, busy=True)) == [LookIn(EVERY_S)]
    assert looks.step(Look(RUNNING, busy=False)) == []  # the work is over: no timer
    assert looks.step(Work()) == [LookIn(EVERY_S)]  # the next work arms it again


def test_a_pool_stopped_while_idle_is_ended_two_looks_after_work_begins() -> None:
    looks = PoolLooks()
    stopped = {"llm": False, "tool": True}
    assert looks.step(Work()) == [LookIn(EVERY_S)]
    assert looks.step(Look(stopped, busy=True)) == [LookIn(EVERY_S)]
    assert looks.seen_stopped("tool") and not looks.seen_stopped("llm")
    assert looks.step(Look(stopped, busy=True)) == [EndPool("tool"), LookIn(EVERY_S)]
    assert looks.step(PoolStarted("tool")) == []  # its death replaced it
    assert not looks.seen_stopped("tool")


def test_a_pool_seen_stopped_keeps_the_looks_going_after_the_work_is_over() -> None:
    looks = PoolLooks()
    looks.step(Work())
    assert looks.step(Look({"tool": True}, busy=False)) == [LookIn(EVERY_S)]
    assert looks.step(Look({"tool": True}, busy=False)) == [EndPool("tool")]  # ended; nothing in flight: no timer
    assert not looks.armed


def test_an_input_it_cannot_take_decides_nothing_and_raises_nothing() -> None:
    looks = PoolLooks()
    [error] = looks.step(Look(None, busy=True))  # type: ignore[arg-type]  # nothing decided, but said
    assert error.event == "pool_looks_error" and error.fields["input_type"] == "Look"
    assert looks.step("a look") == []  # type: ignore[arg-type]


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), max_size=40))
def test_timers_armed_match_the_looks_and_two_stopped_looks_in_a_row_end_the_pool(
        steps: list[tuple[bool, bool, bool]]) -> None:
    """Whatever interleaving of work and looks: at most one timer is pending, a look that arms none leaves
    the looks disarmed, and a pool is ended exactly on its second stopped look in a row (counted afresh after)."""
    looks, pending, in_row = PoolLooks(), 0, 0
    for work, stopped, busy in steps:
        if work:
            pending += len(looks.step(Work()))
        if pending == 0:
            continue  # no timer: no look
        pending -= 1
        commands = looks.step(Look({"tool": stopped}, busy))
        in_row = in_row + 1 if stopped else 0
        ended = EndPool("tool") in commands
        assert ended == (in_row == 2)
        if ended:
            in_row = 0
        pending += sum(isinstance(c, LookIn) for c in commands)
        assert pending == int(looks.armed) <= 1
        assert looks.armed == (busy or in_row > 0)
