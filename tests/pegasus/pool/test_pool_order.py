"""The pool's order (pegasus.pool.order): priority first, first come within it moved by a share of the task's age,
reflections beside a reserve, a bound."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pegasus.config import Settings
from pegasus.pool.commands import Dispatch
from pegasus.pool.order import AGE_SHARE, BYPASS_ROUNDS, TASKS_REMEMBERED, Waiting, WaitQueue
from pegasus.task.names import StageName
from tests.support import pool_sim
from tests.support.pool_core import Ask, Pool, dispatched, of

LOW = StageName.POST_REFLECT


def test_a_task_of_a_lower_priority_number_goes_first_and_first_come_within_a_priority() -> None:
    """Admission's order (DESIGN.md: lower number first, FIFO within a priority) holds in the pool too."""
    pool = Pool(size=1)
    pool.ask("running")
    pool.ask("late5a")
    pool.ask("late9", priority=9)
    pool.ask("urgent1", priority=1)
    pool.ask("late5b")
    order = [dispatched(pool.finish(job))[0][0] for job in range(1, 5)]
    assert order == ["urgent1", "late5a", "late5b", "late9"]


def test_a_reflection_leaves_half_the_pools_workers_idle_for_task_stages() -> None:
    pool = Pool(size=4)
    sent = [pool.ask(f"r{n}", stage=LOW) for n in range(4)]
    assert [len(dispatched(commands)) for commands in sent] == [1, 1, 0, 0]  # a third would leave 1 idle, not 2
    assert dispatched(pool.ask("a") + pool.ask("b")) == [("a", "w3", 3), ("b", "w4", 4)]  # taken at once
    assert dispatched(pool.finish(3) + pool.finish(4)) == []  # 2 idle: one more would leave 1
    assert dispatched(pool.finish(1)) == [("r2", "w3", 5)]  # 3 idle: it leaves 2


def test_a_task_served_before_goes_ahead_of_the_requests_that_came_a_little_before_its_own() -> None:
    """Its place is its arrival less ``AGE_SHARE`` of the arrivals since its task's first request here."""
    pool = Pool(size=1, queue_limit=20)
    pool.ask("old")  # seq 0, handed out
    for n in range(1, 10):
        pool.ask(f"n{n}")  # seq 1..9
    assert dispatched(pool.finish(1)) == [("n1", "w1", 2)]
    pool.ask("old")  # seq 10: its place 10 - 0.3 x 10 = 7, behind n7 (7) and ahead of n8
    assert AGE_SHARE == 0.3
    order = [dispatched(pool.finish(job))[0][0] for job in range(2, 11)]
    assert order == ["n2", "n3", "n4", "n5", "n6", "n7", "old", "n8", "n9"]


def test_a_pool_remembers_a_bounded_number_of_tasks_and_forgets_a_dropped_one() -> None:
    queue = WaitQueue()
    for seq in range(TASKS_REMEMBERED + 10):
        queue.add(Waiting(seq, Ask(f"t{seq}"), "requester"))
        queue.take(queue.get(seq))
    assert len(queue._first_seen) == TASKS_REMEMBERED and "t0" not in queue._first_seen
    queue.drop_task(f"t{TASKS_REMEMBERED + 9}")
    assert f"t{TASKS_REMEMBERED + 9}" not in queue._first_seen


def test_tasks_in_flight_feed_the_next_pool_from_the_start() -> None:
    """Simulated: classic tasks all in flight, 2 s stages, bound 48 s (llm).  First come alone moved them in
    lockstep: every plan ended in the last quarter, the tool pool got its 24 s of work only then, and the
    tasks ended at 0.889 (60 on 10 + 10 workers) and 0.918 (600 on 100 + 100) of the bound; now 0.95."""
    for tasks, workers in ((60, 10), (600, 100)):
        assert 48.0 / pool_sim.run(tasks, workers=workers).completion_s >= 0.95, tasks


def test_answers_read_late_by_a_busy_home_host_leave_no_tool_worker_waiting_for_them() -> None:
    """Simulated, with one step held per worker in both pools (``tool_prefetch = 1``): 600 tasks submitted at once (as a home host gets them), every
    answer reaching its pool 0.5 s after its stage ended.  A tool worker that held no next job waited that
    long between steps, so the tool pool ran behind and the tasks ended at 0.862 of the bound (0.947 now)."""
    pools = Settings().pools
    outcome = pool_sim.run(600, workers=100, submit_s=0.0, answer_lag_s=0.5, llm_prefetch=pools.llm_prefetch,
                           tool_prefetch=1)
    assert 48.0 / outcome.completion_s >= 0.92


def test_reflections_in_flight_delay_no_task_at_the_tail() -> None:
    """Simulated (real pool cores, a clock moved by hand): 60 classic tasks on 10 llm and 10 tool workers end
    no later than with the reflector off.  When reflections took every idle llm worker at the tail, the last
    tasks' reflect stages waited behind them: 54.1 s against 52.25 s."""
    with_reflections = pool_sim.run(60, workers=10).completion_s
    assert with_reflections <= pool_sim.run(60, workers=10, reflect=False).completion_s
    assert len(pool_sim.run(60, workers=10).reflected) == 60  # and every reflection ran after


# One pool worker; each action: a task stage of a priority (1-9), a reflection, or a finished job.
ACTIONS = st.lists(st.one_of(st.integers(1, 9), st.just(0), st.just(-1)), min_size=1, max_size=300)


@settings(max_examples=60, deadline=None)
@example(actions=[5, 0] + [5, -1] * 80, workers=1)  # a reflection behind a stream of stages
@example(actions=[5, 9] + [5, -1] * 80, workers=1)  # a priority-9 task's stage behind a stream of priority 5
@given(actions=ACTIONS, workers=st.integers(1, 2))
def test_no_request_waits_longer_than_the_bound_whatever_keeps_arriving(actions: list[int], workers: int) -> None:
    """A request is handed out within ``BYPASS_ROUNDS`` x workers hand-outs after it came, plus one for each
    request already waiting then: a reflection or a low-priority task's stage is never starved by a stream of
    others."""
    pool = Pool(size=workers, queue_limit=10_000)
    limit = BYPASS_ROUNDS * workers
    came: dict[str, tuple[int, int]] = {}  # request -> (hand-outs when it came, requests waiting then)
    waiting: set[str] = set()
    running: list[int] = []
    handouts = 0

    def note(commands: list) -> None:
        nonlocal handouts
        for dispatch in of(Dispatch, commands):
            handouts += 1
            name = dispatch.request.task_id
            began, ahead = came[name]
            assert handouts - 1 - began <= limit + ahead, name
            waiting.discard(name)
            running.append(dispatch.job)

    for n, action in enumerate(actions):
        if action == -1:
            if running:
                note(pool.finish(running.pop(0)))
            continue
        name = f"t{n}"
        came[name] = (handouts, len(waiting))
        waiting.add(name)
        note(pool.ask(name, stage=LOW) if action == 0 else pool.ask(name, priority=action))
    while running:
        note(pool.finish(running.pop(0)))
    assert not waiting
