"""Property tests (hypothesis) of the worker core: whatever the pool, the journal, the MCP host and the
stream thread say, in whatever order, every job is answered exactly once, a journalled step runs only
after its go and at most once, and an effectful MCP call is never sent twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pegasus.config import Settings
from pegasus.tools.mcp_policy import ServerView
from pegasus.worker.commands import Answer, CallHost, Free, Return, Run, Stream, WorkerCommand
from pegasus.worker.inputs import (
    Closing, Heard, HostAnswered, HostCheckDue, HostHolds, Journalled, Listed, ListingDue, OrphanDue, Pinged,
    StopAsked, WorkerInput,
)
from tests.support.worker_core import POOL, STREAMING, Result, Worker, plan_step

KINDS = ("plain", "journalled", "streamed", "mcp_pure", "mcp_effectful", "no_requester")
moves = st.lists(st.one_of(
    st.tuples(st.just("job"), st.sampled_from(KINDS)),
    st.tuples(st.sampled_from(("go", "no_go", "stop", "answer", "lost", "held")), st.integers(0, 11)),
    st.tuples(st.sampled_from(("text", "end", "listing", "listed", "check", "orphan", "ping", "closing")),
              st.just(0)),
), max_size=40)


class Scenario:
    """One worker under a sequence of moves, with every command it returned."""

    def __init__(self) -> None:
        self.worker = Worker(Settings().with_overrides(STREAMING), machine=frozenset({"m"}),
                             effects={"m.pure": "pure", "m.pay": "effectful"})
        self.out: list[WorkerCommand] = list(self.worker.started)
        self.kinds: dict[int, str] = {}
        self.gone: set[int] = set()  # journalled jobs the journal said go for
        self.calls: dict[int, int] = {}  # host call number -> job

    def step(self, event: WorkerInput) -> None:
        out = self.worker.step(event)
        for command in out:
            if isinstance(command, Run) and self.kinds.get(command.job) == "journalled":
                assert command.job in self.gone, f"job {command.job} ran without its go"
            if isinstance(command, CallHost):
                self.calls[command.number] = command.arguments["job"]
        self.out += out

    def job(self, kind: str) -> None:
        number = len(self.kinds) + 1
        self.kinds[number] = kind
        fields: dict[str, Any] = {"stage": "think" if kind == "streamed" else "act"}
        if kind == "journalled":
            fields.update(idempotency_key=f"k{number}", journal_to="journal")
        if kind.startswith("mcp_"):
            tool = "m.pure" if kind == "mcp_pure" else "m.pay"
            fields.update(context=plan_step(tool, {"job": number}), step_index=0)
        if kind == "no_requester":
            fields["reply_to"] = None
        self.out += self.worker.ask(number, **fields)

    def move(self, name: str, arg: Any) -> None:
        jobs = sorted(self.kinds)
        job = jobs[arg % len(jobs)] if jobs and isinstance(arg, int) else 0
        calls = [n for n, j in self.calls.items() if j == job]
        if name == "job":
            self.job(arg)
        elif name in ("go", "no_go"):
            if name == "go":
                self.gone.add(job)
            self.step(Journalled(f"k{job}", job, name == "go", "refused"))
        elif name == "stop":
            self.step(StopAsked(job, POOL))
        elif name == "answer" and calls:
            self.step(HostAnswered(calls[-1], True, "out"))
        elif name == "lost" and calls:
            self.step(HostHolds(tuple(calls), ()))
        elif name == "held" and calls:
            self.step(HostHolds(tuple(calls), tuple(calls)))
        elif name in ("text", "end"):
            self.step(Heard(((1, 1, "x"),), ended=name == "end", result=Result("streamed")))
        else:
            self.step({"listing": ListingDue(), "listed": Listed({"m": ServerView("ready", (), "")}),
                       "check": HostCheckDue(), "orphan": OrphanDue(), "ping": Pinged(POOL, 1.0),
                       "closing": Closing()}.get(name, ListingDue()))

    def drain(self) -> None:
        """Everyone answers what is still asked: the listing, the journal, the host, the stream."""
        core = self.worker.core
        self.step(ListingDue())
        for _ in range(len(self.kinds) + 1):
            for job in list(core.starting):
                self.gone.add(job)
                self.step(Journalled(f"k{job}", job, True))
            for number in list(core.calls.asking):
                self.step(HostAnswered(number, True, "out"))
            if core.streaming is not None:
                self.step(Heard((), ended=True, result=Result("streamed")))


@settings(max_examples=300, deadline=None)
@given(moves)
def test_every_job_is_answered_exactly_once_and_journalled_steps_run_only_on_their_go(plan: list[Any]) -> None:
    run = Scenario()
    for name, arg in plan:
        run.move(name, arg)
    run.drain()
    core = run.worker.core
    assert not (core.held or core.starting or core.running or core.streaming or core.calls.asking)
    told = Counter(c.job for c in run.out if isinstance(c, (Free, Return)))
    answered = Counter(c.job for c in run.out if isinstance(c, Answer))
    started = Counter(c.job for c in run.out if isinstance(c, (Run, Stream)))
    for job, kind in run.kinds.items():
        assert told[job] == 1, f"{kind} job {job} told to the pool {told[job]} times"
        assert answered[job] <= 1 and started[job] <= 1
        if kind == "no_requester":
            assert answered[job] == 0
    sent = Counter(c.number for c in run.out if isinstance(c, CallHost))
    for number, job in run.calls.items():
        assert sent[number] <= (1 if run.kinds[job] == "mcp_effectful" else 2)
