"""The stage pool's core without an actor system: queue, deadlines, prefetch, cancel, rate budget, stats."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from pegasus.config import Settings
from pegasus.levels import Level
from pegasus.pool.commands import Arm, Dispatch, EndWorker, Fail, Forward, Log, SendStats, SetUp, StartWorker
from pegasus.pool.core import PoolCore
from pegasus.pool.inputs import (
    BudgetDue, Canceled, Configured, Created, DeadlineDue, Exited, Finished, Reported, Requested, StatsAsked,
)
from tests.support.pool_core import ME, Ask, Pool, Spec, dispatched, of


def stats(pool: Pool) -> dict[str, Any]:
    [answer] = of(SendStats, pool.step(StatsAsked(1, "asker")))
    return answer.figures


def test_a_configured_pool_sets_up_logging_and_starts_its_local_workers() -> None:
    pool = Pool(size=3)
    assert isinstance(pool.started[0], SetUp)
    starts = of(StartWorker, pool.started)
    assert [(s.pool, s.index, s.requirements) for s in starts] == [("llm", 0, None), ("llm", 1, None), ("llm", 2, None)]
    figures = stats(pool)
    assert (figures["size"], figures["busy"], figures["queued"]) == (3, 0, 0)
    assert [w["ready"] for w in figures["workers"]] == [True] * 3  # a local worker is usable once created


def test_a_request_before_the_configuration_runs_once_the_pool_is_configured() -> None:
    """Regression: after a restart, a restored task's first request could reach a new pool before its
    PoolConfig (two senders, no order between them) and was answered "pool not configured": the step
    failed, and the reflection ran it again under a new key."""
    core = PoolCore()
    assert core.step(Requested(Ask("t1"), "r")) == [] and core.step(Requested(Ask("t2"), "r")) == []
    core.step(Canceled("t2"))  # canceled while it waited: never runs
    out = core.step(Configured(Spec(size=1), ME))
    [start] = [c for c in out if isinstance(c, StartWorker)]
    dispatched = [c for c in core.step(Created(start.index, "w1")) if isinstance(c, Dispatch)]
    assert [d.request.task_id for d in dispatched] == ["t1"]


def test_an_unconfigured_pool_answers_stats_with_nothing() -> None:
    core = PoolCore()
    [answer] = core.step(StatsAsked(3, "asker"))
    assert answer == SendStats("asker", 3, {"name": "?", "size": 0, "busy": 0, "queued": 0, "replaced": 0,
                                            "workers": [], "members": [], "budget": None, "ladder": {},
                                            "model_requests": None})
    assert core.step(DeadlineDue()) == []  # a timer before configuration: nothing to do


def test_requests_go_to_the_first_idle_worker_then_wait_in_fifo_order() -> None:
    pool = Pool(size=2)
    sent = pool.ask("a") + pool.ask("b") + pool.ask("c") + pool.ask("d")
    assert dispatched(sent) == [("a", "w1", 1), ("b", "w2", 2)]
    assert stats(pool)["queued"] == 2
    assert dispatched(pool.finish(2)) == [("c", "w2", 3)]  # the worker freed first takes the oldest waiting
    assert dispatched(pool.finish(1)) == [("d", "w1", 4)]
    assert of(Forward, pool.finish(3)) == []  # its worker answered the requester itself
    assert of(Forward, pool.finish(4, "the result")) == [Forward("requester-d", "the result")]


def test_past_its_queue_limit_a_busy_pool_refuses() -> None:
    pool = Pool(size=1, queue_limit=1)
    pool.ask("a")
    pool.ask("b")
    [fail] = of(Fail, pool.ask("c"))
    assert (fail.to, fail.kind, fail.error) == ("requester-c", "queue_full", "llm pool queue is full (1 waiting)")


def deadline_arms(commands: list[Any]) -> list[float]:
    return [a.delay_s for a in of(Arm, commands) if isinstance(a.timer, DeadlineDue)]


def test_one_deadline_timer_is_pending_for_the_earliest_running_job() -> None:
    pool = Pool(size=2)
    assert deadline_arms(pool.ask("a", timeout_s=5.0)) == [5.0]
    pool.clock.now += 1
    assert deadline_arms(pool.ask("b", timeout_s=10.0)) == []  # later than the pending one
    assert deadline_arms(pool.ask("c")) == []  # (queued)
    assert deadline_arms(pool.finish(1)) == []  # c starts on w1: due in 30 s, later still
    pool.finish(2)
    pool.finish(3)
    assert deadline_arms(pool.ask("d", timeout_s=1.0)) == [1.0]  # earlier than the one pending (a's)


def test_a_stage_past_its_deadline_fails_and_its_worker_is_killed_and_replaced() -> None:
    pool = Pool(size=1)
    pool.step(Reported(0, 4242, "host", "w1"))
    armed = pool.ask("a", timeout_s=5.0) + pool.ask("b")
    out = pool.fire(armed, DeadlineDue)
    [fail] = of(Fail, out)
    assert (fail.to, fail.kind, fail.error) == ("requester-a", "timeout", "think overran its 5s deadline")
    assert fail.worker == {"pool": "llm", "index": 0, "pid": 4242, "host": "host", "member": ME}
    assert of(EndWorker, out) == [EndWorker("w1", kill_pid=4242)]
    assert [(s.index, s.requirements) for s in of(StartWorker, out)] == [(0, None)]  # the same slot, again
    assert dispatched(out) == [("b", "w2", 2)]  # the replacement takes the next request at once
    assert deadline_arms(out) == [30.0]  # and the timer follows b's deadline
    assert stats(pool)["replaced"] == 1
    assert of(Fail, pool.finish(1)) == []  # a late answer of the ended worker changes nothing


def test_a_job_answered_in_time_is_forgotten_by_the_deadline_timer() -> None:
    pool = Pool(size=1)
    armed = pool.ask("a", timeout_s=5.0)
    pool.finish(1)
    assert pool.fire(armed, DeadlineDue) == []


def test_a_worker_that_dies_fails_its_running_stage_and_is_replaced() -> None:
    pool = Pool(size=1)
    pool.ask("a")
    out = pool.step(Exited("w1"))
    [fail] = of(Fail, out)
    assert (fail.kind, fail.error) == ("worker_died", "stage worker died")
    assert of(EndWorker, out) == []  # a local worker that exited: nothing to end
    assert len(of(StartWorker, out)) == 1 and stats(pool)["replaced"] == 1
    assert pool.step(Exited("w1")) == []  # told twice: already replaced


def prefetching() -> Pool:
    """One llm worker that holds one request besides the one it runs; a third request waits."""
    pool = Pool(size=1, prefetch=1)
    pool.step(Reported(0, 4242, "host", "w1"))
    assert dispatched(pool.ask("a", timeout_s=5.0) + pool.ask("b", timeout_s=5.0) + pool.ask("c")) == [
        ("a", "w1", 1), ("b", "w1", 2)]
    return pool


def test_a_busy_worker_holds_the_next_request_and_its_deadline_starts_when_it_runs() -> None:
    pool = prefetching()
    [worker] = stats(pool)["workers"]
    assert (worker["held"], worker["tasks"], stats(pool)["queued"]) == (1, ["a", "b"], 1)
    pool.clock.now += 4  # b waited 4 s in the worker: its 5 s start now
    out = pool.finish(1)
    assert dispatched(out) == [("c", "w1", 3)]  # room again: c is held next
    pool.clock.now += 4
    assert [f for f in of(Fail, pool.step(DeadlineDue()))] == []  # 8 s after b was handed over, 4 s after it began


def test_requests_held_by_a_worker_that_dies_go_back_first_in_line_not_failed() -> None:
    """Regression (prefetch on real processes): a held request never ran, so it runs on the replacement."""
    pool = prefetching()
    out = pool.step(Exited("w1"))
    assert [f.to for f in of(Fail, out)] == ["requester-a"]  # only the running stage fails
    assert dispatched(out) == [("b", "w2", 3), ("c", "w2", 4)]  # b before c, which had waited in the pool


def test_a_tool_step_held_by_a_worker_that_dies_goes_back_first_in_line() -> None:
    """As an llm stage: if it had begun (its worker sent the answer before it, unread), an effectful step
    asks the journal again under its key and is refused, never run twice (actors/supervisor/runs.py)."""
    pool = Pool(name="tool", size=1, prefetch=1)
    assert dispatched(pool.ask("a") + pool.ask("b") + pool.ask("c")) == [("a", "w1", 1), ("b", "w1", 2)]
    out = pool.step(Exited("w1"))
    assert [f.to for f in of(Fail, out)] == ["requester-a"]
    assert dispatched(out) == [("b", "w2", 3), ("c", "w2", 4)]


def test_an_effectful_tool_step_is_never_held_behind_another_it_waits_for_an_idle_worker() -> None:
    """Held behind b, effectful c would be cut off as an unknown effect by a cancel or deadline that kills the
    worker (b's), and reported unknown at a crash though it never ran: it waits in the queue instead."""
    pool = Pool(name="tool", size=1, prefetch=1)
    assert dispatched(pool.ask("b") + pool.ask("c", journal_to="supervisor") + pool.ask("d")) == [("b", "w1", 1)]
    assert stats(pool)["queued"] == 2  # c first in line, d behind it: the order holds
    assert dispatched(pool.finish(1)) == [("c", "w1", 2), ("d", "w1", 3)]  # idle: c runs; d, effect-free, held
    pool = Pool(name="tool", size=1, prefetch=1)
    assert dispatched(pool.ask("b") + pool.ask("d")) == [("b", "w1", 1), ("d", "w1", 2)]  # effect-free: held


def test_a_canceled_task_loses_its_queued_and_running_work_but_its_held_request_runs_on() -> None:
    pool = prefetching()
    out = pool.step(Canceled("b"))  # held behind a: not ended (a's result could be lost), never requeued
    assert of(EndWorker, out) == [] and of(Fail, out) == []
    assert dispatched(pool.step(Exited("w1"))) == [("c", "w2", 3)]  # b is not queued again

    pool = prefetching()
    out = pool.step(Canceled("a"))  # running: its worker is ended and replaced
    assert of(EndWorker, out) == [EndWorker("w1", kill_pid=4242)]
    assert [(f.to, f.error) for f in of(Fail, out)] == [("requester-a", "the task was canceled")]
    assert dispatched(out) == [("b", "w2", 3), ("c", "w2", 4)]

    pool = prefetching()
    assert pool.step(Canceled("c")) == [] and stats(pool)["queued"] == 0  # queued: dropped, nobody waits


def model_pool(**llm: Any) -> Pool:
    settings = Settings().with_overrides({"llm": {"provider": "openai", "model": "m", **llm}})
    return Pool(Spec(size=1, settings=settings, prefetch=1))


@dataclass(frozen=True)
class Result:
    worker: dict[str, Any] = field(default_factory=dict)


def test_a_rate_limited_call_waits_first_in_line_and_runs_again_after_retry_after() -> None:
    """Regression (429 on real processes): the pool pauses for Retry-After, then the same stage runs again."""
    pool = model_pool()
    pool.ask("a")
    assert stats(pool)["queued"] == 0
    pool.ask("b")  # no prefetch under a budget: b waits in the pool
    limited = Result({"retry_after_s": 2.0})
    out = pool.finish(1, limited)
    assert of(Forward, out) == []  # not answered: queued again, before b
    assert [log.event for log in of(Log, out)] == ["rate_limited"]
    assert dispatched(out) == [] and of(Arm, out) == [Arm(2.0, BudgetDue())]
    assert stats(pool)["queued"] == 2
    assert dispatched(pool.fire(out, BudgetDue)) == [("a", "w1", 2)]
    retries = Settings().llm.max_retries  # one layer of 429 retries, the pool's: [llm] max_retries of them
    for attempt in range(1, retries):
        out = pool.finish(attempt + 1, limited)
        pool.fire(out, BudgetDue)
    out = pool.finish(retries + 1, limited)  # patience used: it fails as rate-limited (exit_reason retry_exhausted)
    assert of(Forward, out) == [] and [(f.to, f.kind) for f in of(Fail, out)] == [("requester-a", "rate_limited")]
    assert of(Fail, out)[0].error.startswith("RateLimited: ") and f"sent {retries + 1} times" in of(Fail, out)[0].error


def test_what_a_worker_learnt_of_an_endpoint_goes_with_every_later_job() -> None:
    """Issue 29: the ladder's state is the pool's; a worker reports what it learnt, every dispatch carries it."""
    pool = model_pool()
    first = of(Dispatch, pool.ask("a"))[0]
    assert first.known == () and first.timeout_s > 0
    key = json.dumps(["http://127.0.0.1:8000/v1", "m", {}])
    shape = {"structured": "json_object", "tools": "native", "token_param": "max_tokens", "temperature": False,
             "reasoning_effort": False, "stream": True, "serial": False}
    pool.finish(1, usage={"total_tokens": 9}, known=((key, shape),))
    assert of(Dispatch, pool.ask("b"))[0].known == ((key, shape),)
    lower = {**shape, "tools": "prompted", "temperature": True}  # another worker learnt tools only
    pool.finish(2, known=((key, lower),))
    assert of(Dispatch, pool.ask("c"))[0].known == ((key, {**shape, "tools": "prompted"}),)  # each rung the lower
    assert stats(pool)["ladder"] == {"m at http://127.0.0.1:8000/v1": "structured_output=json_object, "
                                     "tool_calls=prompted, token_limit_param=max_tokens, temperature omitted"}


def test_a_worker_is_handed_what_the_pool_learnt_once_after_each_change_and_a_new_worker_again() -> None:
    """Its process keeps what it adopted (pegasus.llm.ladder): each Work need not carry it again."""
    pool = model_pool()
    key = json.dumps(["http://127.0.0.1:8000/v1", "m", {}])
    shape = {"structured": "json_object", "tools": "native", "token_param": "max_tokens", "temperature": False,
             "reasoning_effort": False, "stream": True, "serial": False}
    pool.ask("a")
    pool.finish(1, known=((key, shape),))
    assert of(Dispatch, pool.ask("b"))[0].known == ((key, shape),)
    pool.finish(2, known=((key, shape),))  # nothing new
    assert of(Dispatch, pool.ask("c"))[0].known == ()
    pool.step(Exited("w1"))  # c's worker died: its replacement knows nothing yet
    pool.step(Created(0, "w2"))
    assert [(d.worker, d.known) for d in of(Dispatch, pool.ask("d"))] == [("w2", ((key, shape),))]


def test_a_result_returned_with_what_its_worker_learnt_is_forwarded_after_the_pool_took_it_in() -> None:
    """A worker that learnt of its endpoint answers through the pool: the requester's next request can only
    come after the pool knows (worker record and learnt shape side by side, the record forwarded as it was)."""
    pool = model_pool()
    pool.ask("a")
    key = json.dumps(["http://127.0.0.1:8000/v1", "m", {}])
    shape = {"structured": "prompted", "tools": "prompted", "token_param": "", "temperature": False,
             "reasoning_effort": False, "stream": True, "serial": False}
    result = SimpleNamespace(ok=True, worker={"usage": {"total_tokens": 9}, "pid": 7})
    out = pool.step(Finished(1, result, {"usage": {"total_tokens": 9}, "known": ((key, shape),)}))
    assert [(f.to, f.result) for f in of(Forward, out)] == [("requester-a", result)]
    assert of(Dispatch, pool.ask("b"))[0].known == ((key, shape),)


def test_a_request_over_the_rate_budget_waits_for_it_with_one_timer() -> None:
    pool = model_pool(rpm=1)
    pool.ask("a")
    pool.finish(1, usage={"total_tokens": 9})
    out = pool.ask("b")
    assert dispatched(out) == [] and of(Arm, out) == [Arm(60.0, BudgetDue())]
    assert of(Arm, pool.ask("c")) == []  # one BudgetDue pending at a time
    assert dispatched(pool.fire(out, BudgetDue)) == [("b", "w1", 2)]


def test_stats_say_what_is_left_of_the_rate_budget() -> None:
    """The dashboard's pools page and pegasus stats show the budget left in the window."""
    assert stats(model_pool())["budget"] is None  # no rpm or tpm: nothing to show
    pool = model_pool(rpm=3)
    pool.ask("a")
    pool.finish(1, usage={"total_tokens": 9})
    budget = stats(pool)["budget"]
    assert budget == {"default": {"rpm": 3, "tpm": 0, "requests_left": 2, "tokens_left": None, "paused_s": 0.0}}
    assert stats(Pool(size=1))["budget"] is None  # a pool without a model


def test_a_broken_input_becomes_a_logged_error_and_a_failed_answer_never_an_exception() -> None:
    pool = Pool(size=1)
    out = pool.step(Requested(object(), "r"))  # type: ignore[arg-type]  # a request without its fields
    assert [log.level for log in of(Log, out)] == [Level.ERROR]
    assert [(f.to, f.kind) for f in of(Fail, out)] == [("r", "exception")]
    # The pool still works, and the broken request took no worker with it (it did before the pool's order).
    assert dispatched(pool.step(Requested(Ask("next"), "r2"))) == [("next", "w1", 1)]


def test_stats_list_every_worker_and_member() -> None:
    pool = Pool(size=2)
    pool.step(Reported(1, 77, "host", "w2"))
    pool.ask("a")
    figures = stats(pool)
    assert {k: figures[k] for k in ("name", "size", "busy", "queued", "replaced")} == {
        "name": "llm", "size": 2, "busy": 1, "queued": 0, "replaced": 0}
    assert figures["workers"][0] == {"index": 0, "pid": None, "host": None, "busy": True, "member": ME, "ready": True,
                                     "held": 0, "tasks": ["a"]}
    assert figures["workers"][1]["pid"] == 77
    [job] = [d.job for d in of(Dispatch, pool.ask("b"))]
    pool.finish(job, mcp={"fetch": {"up": True, "tool_errors": 2}})  # its scope = "worker" MCP servers (/metrics)
    assert stats(pool)["workers"][1]["mcp"] == {"fetch": {"up": True, "tool_errors": 2}}
    assert figures["members"] == [{"name": ME, "address": None, "local": True, "wanted": 2, "workers": 2,
                                   "capabilities": {}, "failed_placements": 0, "joined": 1_700_000_000.0,
                                   "contact": None}]


def test_the_same_inputs_give_the_same_commands() -> None:
    def run() -> list[Any]:
        pool = prefetching()
        return pool.step(Exited("w1")) + pool.finish(3) + pool.step(Canceled("c"))

    assert run() == run()
    assert all(isinstance(d, Dispatch) for d in of(Dispatch, run()))


def streaming_pool() -> Pool:
    """One llm worker of a streaming model provider, running task a's stage (job 1)."""
    settings = Settings().with_overrides({"llm": {"provider": "openai", "model": "m"}})
    pool = Pool(Spec(size=1, settings=settings))
    pool.step(Reported(0, 4242, "host", "w1"))
    assert dispatched(pool.ask("a", timeout_s=5.0)) == [("a", "w1", 1)]
    return pool


def test_a_canceled_streamed_stage_is_stopped_not_killed_and_its_worker_stays() -> None:
    """[llm] stream: the worker is told to stop (it closes the stream), nobody is answered, and the
    worker takes the next request once it reports the job done; it is ended only if it never does."""
    from pegasus.pool.commands import Stop

    pool = streaming_pool()
    out = pool.step(Canceled("a"))
    assert of(Stop, out) == [Stop("w1", 1)] and of(EndWorker, out) == [] and of(Fail, out) == []
    pool.ask("b")
    assert dispatched(pool.finish(1)) == [("b", "w1", 2)] and stats(pool)["replaced"] == 0

    stuck = streaming_pool()
    stuck.step(Canceled("a"))
    stuck.clock.now += 6.0  # past its deadline, still not stopped: ended like a hung worker
    assert of(EndWorker, stuck.step(DeadlineDue())) == [EndWorker("w1", kill_pid=4242)]


def test_a_streamed_stage_past_its_deadline_is_answered_timeout_and_stopped() -> None:
    from pegasus.pool.commands import Stop

    pool = streaming_pool()
    pool.clock.now += 5.0
    out = pool.step(DeadlineDue())

    assert of(Stop, out) == [Stop("w1", 1)] and of(EndWorker, out) == []
    assert [(f.to, f.kind) for f in of(Fail, out)] == [("requester-a", "timeout")]
    assert of(Forward, pool.finish(1)) == []  # its late answer goes nowhere


def test_a_worker_that_keeps_dying_is_replaced_with_a_growing_pause_and_said_to_loop() -> None:
    """Issue 28: every death forked a new worker at once, so a worker dying at start looped as fast as it forked."""
    from pegasus.pool.core import WORKER_SPEC
    from pegasus.pool.inputs import RespawnDue

    pool = Pool(size=1)
    address, pauses, logs = "w1", [], []
    for pid in range(WORKER_SPEC.intensity + 2):
        pool.step(Reported(0, 100 + pid, "host", address))
        out = pool.step(Exited(address))
        logs += [log.event for log in of(Log, out)]
        arms = [arm for arm in of(Arm, out) if isinstance(arm.timer, RespawnDue)]
        pauses.append(arms[0].delay_s if arms else 0.0)
        if arms:
            assert of(StartWorker, out) == []  # not yet
            out = pool.fire(out, RespawnDue)
        [start] = of(StartWorker, out)
        address = f"w{pid + 2}"
    assert pauses[:5] == [0.0, 0.5, 1.0, 2.0, 4.0] and pauses[-1] == WORKER_SPEC.max_s
    assert "worker_crash_loop" in logs and stats(pool)["size"] == 1
