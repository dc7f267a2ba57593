"""The home host's pools without an actor system (pegasus/pool/home.py): a stage asked in the home's own
process is handed out to be answered through the pool (one message back), a request from elsewhere as by a
pool process, and each pool's policy (worker death, cancel, deadlines, stats) is its own core's."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pegasus.pool.commands import Arm, Dispatch, EndWorker, Fail, Forward, Log, PoolCommand, SendStats, StartWorker
from pegasus.pool.home import HERE, ForPool, HomePools, PoolTimer
from pegasus.pool.inputs import Canceled, Closing, Created, DeadlineDue, Exited, Finished, StatsAsked
from tests.support.pool_core import ME, Ask, Clock, Spec


@dataclass(frozen=True)
class HomeAsk(Ask):
    pool: str = "llm"


class Home:
    """``step`` answers each StartWorker with Created at ``<pool>-w1``, ``<pool>-w2``... as the carrier does."""

    def __init__(self, llm: int = 1, tool: int = 1, prefetch: int = 0, address: Callable[[str], Any] = str) -> None:
        self.clock = Clock()
        self.home = HomePools(self.clock, wall_clock=lambda: 1_700_000_000.0)
        self.addresses = {pool: map(address, map(f"{pool}-w{{}}".format, itertools.count(1))) for pool in ("llm", "tool")}
        self.started = self.carry(self.home.configure(Spec("llm", llm, prefetch=prefetch), ME))
        self.started += self.carry(self.home.configure(Spec("tool", tool), ME))

    def carry(self, out: list[ForPool]) -> list[ForPool]:
        done: list[ForPool] = []
        for marked in out:
            done.append(marked)
            if isinstance(marked.command, StartWorker):
                address = next(self.addresses[marked.pool])
                done += self.carry(self.home.to_pool(marked.pool, Created(marked.command.index, address)))
        return done

    def ask(self, task_id: str, pool: str = "llm", requester: Any = HERE, **fields: Any) -> list[ForPool]:
        return self.carry(self.home.ask(HomeAsk(task_id, pool=pool, **fields), requester))

    def take(self, event: Any, sender: Any = None) -> list[ForPool]:
        return self.carry(self.home.take(event, sender))


def commands(out: list[ForPool], kind: type) -> list[tuple[str, PoolCommand]]:
    return [(marked.pool, marked.command) for marked in out if isinstance(marked.command, kind)]


def test_a_stage_asked_here_is_answered_through_its_pool_in_the_workers_one_message() -> None:
    """Two messages a stage: the hand-out (Dispatch -> Work) and the worker's WorkDone carrying the answer,
    which the pool hands to the run here (Forward to HERE: no message).  Before: four (request, hand-out,
    answer, the worker's "free")."""
    home = Home()
    [(pool, dispatch)] = commands(home.ask("t1", stage="think"), Dispatch)
    assert (pool, dispatch.worker, dispatch.requester, dispatch.through_pool) == ("llm", "llm-w1", HERE, True)
    out = home.take(Finished(dispatch.job, "the result", {"usage": {"tokens": 3}}), sender="llm-w1")
    assert commands(out, Forward) == [("llm", Forward(HERE, "the result"))]
    [(pool, act)] = commands(home.ask("t1", pool="tool", stage="act"), Dispatch)
    assert (pool, act.worker, act.through_pool) == ("tool", "tool-w1", True)


def test_a_freed_worker_gets_its_next_job_before_the_run_here_takes_its_answer() -> None:
    """The answer's transition runs in the home's own process: carried out first, the next hand-out would wait
    for it, and with many tasks in flight every freed worker would (docs/performance.md)."""
    home = Home()
    [(_, first)] = commands(home.ask("t1"), Dispatch)
    home.ask("t2")  # waits for the one llm worker
    out = home.take(Finished(first.job, "t1's result"), sender="llm-w1")
    assert [type(marked.command).__name__ for marked in out if isinstance(marked.command, (Dispatch, Forward))] \
        == ["Dispatch", "Forward"]


class Address:
    """A runtime address as Thespian's: compared (each comparison counted, and not cheap there), never hashed."""

    compared = 0
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        Address.compared += 1
        return isinstance(other, Address) and other.name == self.name


def test_a_workers_answer_finds_its_pool_by_its_job_not_by_comparing_its_address_with_each_worker() -> None:
    """Each WorkDone's sender was compared with the home's workers in turn (Thespian's address comparison,
    ~3 a stage: ~7% of the home host's handler time at L = 50 ms).  The home's pools number their jobs from one
    counter, so a job names its pool and its worker (one comparison, with that worker alone); an answer whose job
    no pool has (answered already) still goes to its worker's pool, which drops it."""
    home = Home(llm=3, tool=3, address=Address)
    handed = commands(home.ask("t1") + home.ask("t2") + home.ask("t3"), Dispatch) + \
        commands(home.ask("t4", pool="tool") + home.ask("t5", pool="tool") + home.ask("t6", pool="tool"), Dispatch)
    assert len({dispatch.job for _, dispatch in handed}) == 6  # one number, one job of one pool
    Address.compared = 0
    for pool, dispatch in reversed(handed):
        sender = Address(dispatch.worker.name)  # as a message's sender: equal, not the same object
        out = home.take(Finished(dispatch.job, f"{dispatch.request.task_id}'s result"), sender=sender)
        assert commands(out, Forward) == [(pool, Forward(HERE, f"{dispatch.request.task_id}'s result"))]
    assert Address.compared == len(handed)  # each answer's sender with its job's worker only
    pool, dispatch = handed[-1]
    [(dropped_by, log)] = commands(home.take(Finished(dispatch.job, "late"), sender=Address(dispatch.worker.name)),
                                   Log)
    assert (dropped_by, log.event, log.fields["pool"]) == ("tool", "stale_result_dropped", "tool")


def test_a_request_from_elsewhere_is_served_as_by_a_pool_process_of_its_own() -> None:
    """Another task actor's, or the supervisor's: its worker answers it directly and frees itself apart."""
    home = Home()
    [(_, dispatch)] = commands(home.ask("t2", requester="other task actor"), Dispatch)
    assert (dispatch.requester, dispatch.through_pool) == ("other task actor", False)
    assert commands(home.take(Finished(dispatch.job), sender="llm-w1"), Forward) == []  # answered already


def test_each_pool_keeps_its_own_policy_queue_worker_death_and_replacement() -> None:
    """A worker's death fails its running stage to the run here (never run again: a tool step's outcome is
    unknown) and starts a new worker in that pool only; the other pool's queue is untouched."""
    home = Home()
    home.ask("t1", pool="tool", stage="act")
    assert commands(home.ask("t2", pool="tool", stage="act"), Dispatch) == []  # waits: one tool worker
    [(_, llm)] = commands(home.ask("t3"), Dispatch)
    out = home.take(Exited("tool-w1"))
    [(pool, fail)] = commands(out, Fail)
    assert (pool, fail.to, fail.request.task_id, fail.kind) == ("tool", HERE, "t1", "worker_died")
    assert [(p, s.pool) for p, s in commands(out, StartWorker)] == [("tool", "tool")]
    [(_, next_act)] = commands(out, Dispatch)  # the new worker takes the waiting one
    assert (next_act.request.task_id, next_act.worker) == ("t2", "tool-w2")
    assert commands(home.take(Finished(llm.job, "r"), sender="llm-w1"), Forward) == [("llm", Forward(HERE, "r"))]
    assert home.take(Exited("tool-w1")) == []  # told twice, or not a worker of this home: nothing


def test_cancel_stats_and_closing_reach_every_pool_and_a_timer_its_own() -> None:
    home = Home()
    home.ask("t1", pool="tool", stage="act")
    out = home.take(Canceled("t1"))  # its running tool step: the worker is ended and replaced
    assert [(p, e.address) for p, e in commands(out, EndWorker)] == [("tool", "tool-w1")]
    answers = commands(home.take(StatsAsked(7, "supervisor")), SendStats)
    assert sorted((p, a.figures["name"], a.to) for p, a in answers) == [("llm", "llm", "supervisor"),
                                                                      ("tool", "tool", "supervisor")]
    out = home.ask("t2", timeout_s=5.0)
    [(pool, arm)] = [(p, a) for p, a in commands(out, Arm) if isinstance(a.timer, DeadlineDue)]
    home.clock.now += arm.delay_s
    fired = home.take(PoolTimer(pool, arm.timer))
    [(_, fail)] = commands(fired, Fail)  # the llm pool's deadline, in the llm pool
    assert (fail.request.task_id, fail.kind, fail.to) == ("t2", "timeout", HERE)
    assert home.take(PoolTimer("memory", DeadlineDue())) == []  # not a pool of this home
    assert {p for p, _ in commands(home.take(Closing()), EndWorker)} == {"llm", "tool"}  # each ends its workers


def test_a_request_for_a_pool_the_home_does_not_run_is_answered_failed() -> None:
    home = Home()
    [(_, fail)] = commands(home.ask("t1", pool="memory", requester="someone"), Fail)
    assert (fail.to, fail.kind) == ("someone", "exception") and "no memory pool" in fail.error


def test_a_request_that_reaches_a_new_home_before_its_pools_configuration_waits_for_it() -> None:
    """After the home host died, a task actor told of the new one (PoolReplaced) may ask it before the
    supervisor's PoolConfig arrives: it was failed ("no llm pool in the home host"), and its task with it."""
    home = HomePools(Clock(), wall_clock=lambda: 1_700_000_000.0)
    assert home.ask(HomeAsk("t1", pool="llm"), "a task actor") == []  # held, not failed
    assert home.ask(HomeAsk("t2", pool="llm"), "a task actor") == []
    assert home.take(Canceled("t2")) == []  # a held request of a canceled task is dropped
    out = home.configure(Spec("llm", 1), ME)
    [created] = [m for m in out if isinstance(m.command, StartWorker)]
    out = home.to_pool("llm", Created(created.command.index, "llm-w1"))
    [(pool, dispatch)] = commands(out, Dispatch)
    assert (pool, dispatch.request.task_id, dispatch.requester) == ("llm", "t1", "a task actor")
    [(_, fail)] = commands(home.ask(HomeAsk("t3", pool="memory"), "someone"), Fail)  # never a home's: at once
    assert fail.kind == "exception"


def test_an_answer_from_a_worker_this_home_never_had_does_not_take_a_live_jobs_place() -> None:
    """A replaced home numbers its jobs from 1 again: a late answer of the old home's worker (a remote one still
    running) naming job 1 must not end the new home's job 1, whose real answer would then be dropped."""
    home = Home(llm=1, tool=0)
    [(_, live)] = commands(home.ask("t-new"), Dispatch)
    assert live.job == 1
    assert commands(home.take(Finished(1, "t-old's result"), sender="old-home's worker"), Forward) == []
    real = home.take(Finished(1, "t-new's result"), sender=live.worker)
    assert commands(real, Forward) == [("llm", Forward(HERE, "t-new's result"))]
