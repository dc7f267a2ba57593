"""The stage worker's core without an actor system: held jobs, the journal's go, answers, the streamed
stage, stops, MCP calls through the machine's host, pings and orphan checks, errors."""

from __future__ import annotations

from typing import Any

import pytest

from pegasus.config import Settings
from pegasus.levels import Level
from pegasus.tools.mcp_policy import ServerView
from pegasus.tools.registry import ToolOutcomeUnknown
from pegasus.worker.commands import (
    Adopt, Answer, Arm, CallHost, CloseStream, Delta, Exit, Free, Journal, Log, Pong, Prepare, Ready, Refused,
    Return, Run, SetUp, ShowListing, Stream,
)
from pegasus.worker.inputs import (
    ChildExited, Closing, Heard, HostAnswered, HostHolds, Journalled, Listed, ListingDue, OrphanDue, Pinged, Ran,
    StopAsked,
)
from tests.support.worker_core import IDENTITY, POOL, STREAMING, Result, Worker, of, plan_step

MCP: dict[str, Any] = {}  # the machine-scope servers come from the carrier (Loaded), not these settings


def kinds(commands: list[Any]) -> list[str]:
    return [type(c).__name__ for c in commands]


def streaming() -> Worker:
    return Worker(Settings().with_overrides(STREAMING))


def test_a_configured_worker_sets_up_then_reports_ready_with_its_process() -> None:
    worker = Worker()
    assert kinds(worker.started) == ["SetUp", "Ready"]
    assert worker.started[0] == SetUp(Settings(), "tool", 1, False)
    assert worker.started[1] == Ready(POOL, 1, IDENTITY["pid"], IDENTITY["host"])


def test_a_stage_is_answered_to_its_requester_first_then_the_pool_is_told_with_the_usage() -> None:
    worker = Worker(run=lambda request: Result("ok", {"usage": {"tokens": 7}, "context": "fits"}))
    worker.wall.now += 1.0
    out = worker.ask(3)
    assert kinds(out) == ["Run", "Answer", "Free"]
    answer = out[1]
    assert (answer.to, answer.job, answer.outcome) == ("requester", 3, Result("ok", answer.outcome.worker))
    assert answer.worker == {"usage": {"tokens": 7}, "context": "fits", **IDENTITY, "pool": "tool", "index": 1,
                             "started": 1_700_000_001.0, "finished": 1_700_000_001.0, "cpu_ms": 2.0}
    assert out[2] == Free(POOL, 3, {"usage": {"tokens": 7}})


def test_a_stage_whose_requester_shares_the_pools_process_is_answered_in_one_message_to_the_pool() -> None:
    """A home host's own request (pegasus.pool.home): the answer and the pool's accounting go together in the
    pool's WorkDone (Return), no Answer and Free: two messages a stage, not four."""
    worker = Worker(run=lambda request: Result("ok", {"usage": {"tokens": 7}, "context": "fits"}))
    out = worker.ask(3, through_pool=True)
    assert kinds(out) == ["Run", "Return"]
    done = out[1]
    assert (done.pool, done.job, done.pooled) == (POOL, 3, {"usage": {"tokens": 7}})
    assert done.worker["context"] == "fits" and "known" not in done.worker


KNOWN = (("endpoint-key", {"structured": "prompted", "tools": "prompted", "token_param": "", "temperature": False,
                           "reasoning_effort": False}),)


def test_what_the_pool_knows_of_endpoints_is_adopted_before_the_stage_runs_within_its_deadline() -> None:
    """Issue 29: the ladder's state is the pool's, handed with each job; the stage's model calls get the
    pool's deadline less a margin, so the model's timeout is named before the pool's."""
    out = Worker().ask(1, known=KNOWN, timeout_s=120.0)
    assert kinds(out)[:2] == ["Adopt", "Run"] and out[0] == Adopt(KNOWN)
    assert of(Run, out)[0].budget_s == 115.0  # a tenth, at most 5 s, to answer in
    assert of(Run, Worker().ask(1, timeout_s=6.0))[0].budget_s == pytest.approx(5.4)
    assert "Adopt" not in kinds(Worker().ask(1)) and of(Run, Worker().ask(1))[0].budget_s == 0.0


def test_a_stage_that_learnt_of_its_endpoint_is_answered_through_the_pool_and_keeps_it_out_of_the_task_record(
) -> None:
    """Told to both at once, the pool could read the requester's next request before what was learnt (two
    senders, no order between them) and hand it out to another worker without it: under load it did."""
    worker = Worker(run=lambda request: Result("ok", {"usage": {"tokens": 7}, "known": KNOWN}))
    out = worker.ask(3)
    assert kinds(out) == ["Run", "Return"]  # the pool takes it in, then forwards the answer
    [ret] = of(Return, out)
    assert (ret.pool, ret.job, ret.pooled) == (POOL, 3, {"usage": {"tokens": 7}, "known": KNOWN})
    assert "known" not in ret.worker


def test_the_workers_own_mcp_servers_go_to_the_pool_not_to_the_task_record() -> None:
    servers = {"fetch": {"up": True, "tool_errors": 1}}
    out = Worker(run=lambda request: Result("ok", {"mcp": servers})).ask(3)
    [free], [answer] = of(Free, out), of(Answer, out)
    assert free == Free(POOL, 3, {"mcp": servers}) and "mcp" not in answer.worker


def test_a_rate_limited_stage_or_one_without_a_requester_goes_back_through_the_pool() -> None:
    worker = Worker(run=lambda request: Result("429", {"retry_after_s": 2.0}))
    [ret] = of(Return, worker.ask(1))
    assert (ret.pool, ret.job, ret.worker["retry_after_s"]) == (POOL, 1, 2.0)
    worker = Worker()
    assert kinds(worker.ask(2, reply_to=None)) == ["Run", "Return"]


def test_an_effectful_step_runs_only_on_the_journals_go_for_its_job_and_key() -> None:
    worker = Worker()
    out = worker.ask(5, "t", idempotency_key="k5", journal_to="journal", run=2, step_index=4,
                     context=plan_step("shell", index=4))
    assert out == [Journal("journal", "k5", "t", 2, 4, "shell", 5)]
    assert worker.step(Journalled("other-key", 5, True)) == []  # not its key: still waits
    out = worker.step(Journalled("k5", 5, True))
    assert kinds(out) == ["Run", "Answer", "Free"]
    assert worker.step(Journalled("k5", 5, True)) == []  # a second go: it ran once


def test_a_step_the_journal_refuses_is_answered_not_started_with_the_row_it_has() -> None:
    worker = Worker()
    worker.ask(6, idempotency_key="k6", journal_to="journal")
    out = worker.step(Journalled("k6", 6, False, "already started", {"status": "started"}))
    assert kinds(out) == ["Log", "Answer", "Free"]
    answer = out[1]
    assert answer.outcome == Refused("not started: already started", "not_started", {"journal": {"status": "started"}})
    assert answer.worker["cpu_ms"] == 0.0


def test_a_streamed_stage_sends_its_text_as_it_comes_and_holds_the_next_until_it_ends() -> None:
    worker = streaming()
    assert worker.ask(1, stage="think") == [Stream(1, worker.core.streaming.job.work.request)]  # type: ignore[union-attr]
    assert worker.ask(2, stage="think") == []  # prefetched: held
    assert kinds(worker.ask(3, stage="act")) == ["Run", "Answer", "Free"]  # not streamed: runs beside it
    out = worker.step(Heard(((1, 1, "Hel"), (2, 1, "lo"))))
    assert [(d.to, d.seq, d.call, d.text) for d in of(Delta, out)] == [("requester", 1, 1, "Hel"),
                                                                       ("requester", 2, 1, "lo")]
    out = worker.step(Heard(((3, 2, "!"),), ended=True, result=Result("streamed"), cpu_s=0.5))
    assert kinds(out) == ["Delta", "Answer", "Free", "Stream"]  # the held one starts once it is answered
    assert of(Answer, out)[0].worker["cpu_ms"] == 500.0 and of(Stream, out)[0].job == 2


def test_a_stopped_streamed_stage_closes_its_stream_sends_no_more_text_and_answers_only_the_pool() -> None:
    worker = streaming()
    worker.ask(1, stage="think")
    worker.ask(2, stage="think")
    assert worker.step(StopAsked(9, POOL)) == []  # not a job it has
    out = worker.step(StopAsked(1, POOL))
    assert kinds(out) == ["Log", "CloseStream"]
    assert worker.step(Heard(((1, 1, "late"),))) == []
    out = worker.step(Heard((), ended=True, result=Result("cut short")))
    assert out[0] == Free(POOL, 1, {}) and kinds(out) == ["Free", "Stream"]


def test_a_held_job_that_is_stopped_is_dropped_and_the_pool_told() -> None:
    worker = streaming()
    worker.ask(1, stage="think")
    worker.ask(2, stage="think")
    assert worker.step(StopAsked(2, "the-pool")) == [Free("the-pool", 2, {})]
    assert worker.step(Heard((), ended=True, result=Result("r")))[-1] == Free(POOL, 1, {})
    assert not worker.core.held and worker.core.streaming is None


def test_closing_closes_a_running_stream_only() -> None:
    worker = streaming()
    assert worker.step(Closing()) == []
    worker.ask(1, stage="think")
    assert worker.step(Closing()) == [CloseStream()]


def test_with_machine_scope_servers_jobs_wait_for_the_first_listing_then_run_one_at_a_time() -> None:
    worker = Worker(Settings().with_overrides(MCP), machine=frozenset({"m"}), runs=False)
    assert kinds(worker.started) == ["SetUp", "FindHost", "Arm", "Ready"]
    assert worker.started[2] == Arm(30.0, ListingDue())
    assert worker.ask(1) == [] and worker.ask(2) == []
    starting = {"m": ServerView("starting", (), "")}
    assert worker.step(Listed(starting)) == [ShowListing(starting)]  # still in its first start: held
    worker.wall.now += 5.0
    out = worker.step(Listed({"m": ServerView("ready", (), "")}))
    assert kinds(out) == ["ShowListing", "Run"] and out[1].job == 1
    worker.wall.now += 5.0
    out = worker.step(Ran(1, Result("one"), 0.0))
    assert kinds(out) == ["Answer", "Free", "Run"] and out[2].job == 2  # the next once the first is answered
    assert kinds(worker.step(Ran(2, Result("two"), 0.0))) == ["Answer", "Free"]
    assert worker.step(ListingDue()) == []  # the wait's timer after the listing: nothing held


def test_a_machine_mcp_call_goes_to_the_host_and_the_stage_runs_on_its_answer() -> None:
    worker = Worker(Settings().with_overrides(MCP), machine=frozenset({"m"}), effects={"m.echo": "pure"})
    worker.step(ListingDue())
    out = worker.ask(1, context=plan_step("m.echo", {"x": 1}), step_index=0, idempotency_key="k1")
    assert kinds(out) == ["FindHost", "CallHost", "Arm"]
    assert out[1] == CallHost("host-2", 1, "m", "echo", {"x": 1}, "k1")
    assert kinds(worker.ask(2, context=plan_step("local.tool"), step_index=0)) == ["Run", "Answer", "Free"]  # not the host's
    out = worker.step(HostAnswered(1, True, "echoed"))
    assert out[:2] == [Prepare("m", "echo", {"x": 1}, True, "echoed"), Run(1, out[1].request)]  # type: ignore[attr-defined]
    assert worker.step(HostAnswered(1, True, "again")) == []


def test_an_effectful_mcp_call_lost_with_its_host_runs_its_stage_on_an_unknown_outcome() -> None:
    worker = Worker(Settings().with_overrides(MCP), machine=frozenset({"m"}), effects={"m.pay": "effectful"})
    worker.step(ListingDue())
    worker.ask(1, context=plan_step("m.pay"), step_index=0)
    assert worker.step(ChildExited("host-2"))[0].event == "mcp_host_exited"  # type: ignore[union-attr]
    assert worker.step(ChildExited("someone-else")) == []
    out = worker.step(HostHolds((1,), ()))
    assert kinds(out) == ["Log", "Prepare", "Run", "Answer", "Free"]
    assert out[0].event == "mcp_call_lost" and isinstance(out[1].output, ToolOutcomeUnknown)  # type: ignore[union-attr]


def test_a_ping_is_answered_and_arms_one_orphan_check() -> None:
    worker = Worker()
    out = worker.step(Pinged(POOL, 5.0))
    assert out == [Pong(POOL, 5.0), Arm(9.0, OrphanDue())]
    assert worker.step(Pinged(POOL, 6.0)) == [Pong(POOL, 6.0)]  # armed already


def test_a_pinged_worker_unheard_of_while_idle_exits_and_one_never_pinged_stays() -> None:
    never = Worker()
    never.clock.now += 1000.0
    assert never.step(OrphanDue()) == [Arm(9.0, OrphanDue())]
    worker = streaming()
    worker.step(Pinged(POOL, 0.0))
    worker.ask(1, stage="think")  # busy: a long stage is not silence
    worker.clock.now += 100.0
    assert worker.step(OrphanDue()) == [Arm(9.0, OrphanDue())]
    worker.step(Heard((), ended=True, result=Result("r")))  # its answer counts as contact
    worker.clock.now += 27.0
    assert worker.step(OrphanDue()) == [Arm(9.0, OrphanDue())]
    worker.clock.now += 0.5
    out = worker.step(OrphanDue())
    assert kinds(out) == ["Log", "Exit"] and out[0] == Log(Level.WARNING, "worker_orphaned", {"unheard_s": 27.0})
    assert out[1] == Exit()


def test_an_error_in_the_core_is_logged_and_the_job_answered_once() -> None:
    class Broken:
        @property
        def plan(self) -> Any:
            raise ValueError("bad plan")

    worker = Worker(Settings().with_overrides(MCP), machine=frozenset({"m"}))
    worker.step(ListingDue())
    out = worker.ask(1, context=Broken())
    assert kinds(out) == ["Log", "Answer", "Free"]
    assert out[0].fields["error"] == "ValueError: bad plan"  # type: ignore[union-attr]
    assert out[1].outcome == Refused("worker error: ValueError: bad plan", "exception", {})  # type: ignore[union-attr]
    assert worker.step(object()) == []  # type: ignore[arg-type]  # not an input: nothing


def test_a_stage_is_answered_even_when_its_result_cannot_be_read() -> None:
    worker = Worker(run=lambda request: None)  # type: ignore[arg-type,return-value]
    out = worker.ask(1)
    assert kinds(out) == ["Run", "Log", "Answer", "Free"]
    assert worker.step(Ran(1, Result("late"), 0.0)) == []  # answered already
