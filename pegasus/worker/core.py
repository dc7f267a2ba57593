"""A stage worker's decisions: which job is held, when a step may run, what a stop does, the streamed
stage's text, MCP calls through the machine's host, and whether its pool is gone.

``WorkerCore.step(input) -> [command]``, as for the pool: never raises, no I/O, clocks are parameters.
One stage at a time (a streamed one in its own thread, so a stop closes it at once).  Every job is
answered exactly once; an effectful step runs only on the journal's go for its job and key; the pool
is told a job is over only once its answer has left this process, so a worker killed with an answer
inside leaves the job to its pool, which fails it, never a task waiting for good (docs/architecture.md).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pegasus.cognitive.stages import LLM_STAGES
from pegasus.config import ConventionSettings, Settings
from pegasus.levels import Level
from pegasus.llm.listen import streams
from pegasus.pool.contact import PoolWatch, orphan_after_s
from pegasus.worker.commands import (
    Adopt, Answer, Arm, AskBegin, CloseStream, Delta, Exit, Free, Journal, Log, Pong, Prepare, Ready, Refused, Return,
    Run, SetUp, ShowListing, Stream, WorkerCommand,
)
from pegasus.worker.host_calls import Asked, HostCalls
from pegasus.worker.inputs import (
    AnswerLeft, BeginAnswered, ChildExited, Closing, Configured, Heard, HostAnswered, HostCheckDue, HostFound,
    HostHolds, Journalled, ListingDue, Listed, Loaded, OrphanDue, Outcome, Pinged, Ran, Requested, StopAsked, WorkAsk,
    WorkerInput,
)
from pegasus.worker.steps import machine_call, tool_of

Out = list[WorkerCommand]
STAGE_MARGIN_S = 5.0


@dataclass
class Job:
    """A job this worker took: the pool's work, the pool, and when it started (wall clock)."""

    work: WorkAsk
    pool: Any
    started: float

    @property
    def number(self) -> int:
        return self.work.job


@dataclass
class Streaming:
    """The streamed stage running now; ``stopped``: its text and answer go to nobody."""

    job: Job
    stopped: bool = False


class WorkerCore:
    def __init__(self, identity: Mapping[str, Any], clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.identity: dict[str, Any] = dict(identity)  # pid, host, member, admin_port; pool, index once told
        self.clock, self.wall_clock = clock, wall_clock
        self.settings: Settings | None = None
        self.machine_servers: frozenset[str] = frozenset()
        self.streams = False  # llm stages stream ([llm] stream with provider openai)
        self.held: deque[tuple[WorkAsk, Any]] = deque()  # (work, pool), in the order they came
        self.awaiting_listing = False  # machine-scope MCP servers not yet started or failed once
        self.starting: dict[int, Job] = {}  # effectful steps waiting for the journal's go, by job
        self.running: dict[int, Job] = {}  # handed to the carrier to run (Run), until it says Ran
        self.leaving: dict[int, Free] = {}  # answered jobs whose answer has not left the process yet: their Free
        self.streaming: Streaming | None = None
        self.asking: tuple[WorkAsk, Any] | None = None  # a held job whose pool is asked whether it may begin
        # The job its pool counts as this worker's running one: since when, as seen here (never before the pool's
        # own count began, less a message's transit), and how long the one before it ran.
        self.front_since = self.front_ran_s = 0.0
        self.calls = HostCalls()
        self.watch = PoolWatch(orphan_after_s(ConventionSettings()))  # a member's worker whose pool is gone exits
        self._handlers: dict[type, Callable[[Any, Out], None]] = {
            Configured: self._configure, Loaded: self._loaded, Requested: self._requested,
            Journalled: self._journalled, Ran: self._ran, AnswerLeft: self._answer_left, Heard: self._heard,
            StopAsked: self._stop,
            Pinged: self._pinged, Listed: self._listed, ListingDue: self._listing_due, HostFound: self._host_found,
            HostAnswered: self._host_answered, HostHolds: self._host_holds, HostCheckDue: self._host_check_due,
            ChildExited: self._child_exited, OrphanDue: self._orphan_due, Closing: self._closing,
            BeginAnswered: self._begin_answered,
        }

    def step(self, event: WorkerInput) -> Out:
        """Apply one input; the commands to carry out, in order.  Never raises."""
        out: Out = []
        handler = self._handlers.get(type(event))
        if handler is None:
            return out
        owed = None if isinstance(event, Requested) else self._owed(event)
        try:
            handler(event, out)
        except Exception as exc:  # noqa: BLE001 - a bug here must not become Thespian's PoisonMessage
            error = f"{type(exc).__name__}: {exc}"
            out.append(Log(Level.ERROR, "worker_error", {"input": type(event).__name__, "error": error}))
            if isinstance(event, Requested):
                owed = Job(event.work, event.pool, self.wall_clock())
            if owed is not None and not self._holds(owed.number) and not _answered(owed.number, out):
                try:
                    self._answer(owed, Refused(f"worker error: {error}", "exception", {}), 0.0, out)
                except Exception:  # noqa: BLE001 - the answer itself failed: the pool's deadline ends the job
                    pass
        return out

    # -- set-up --------------------------------------------------------------------------------
    def _configure(self, event: Configured, out: Out) -> None:
        self.settings = event.settings
        self.identity.update(pool=event.name, index=event.index)
        self.watch.orphan_after_s = orphan_after_s(event.settings.convention)
        self.streams = streams(event.settings)
        out.append(SetUp(event.settings, event.name, event.index, self.streams))
        out.append(Ready(event.pool, event.index, self.identity["pid"], self.identity["host"]))

    def _loaded(self, event: Loaded, out: Out) -> None:
        assert self.settings is not None
        self.machine_servers = event.machine_servers
        self.calls.effect_of = event.effect_of
        if self.machine_servers:
            self.calls.start(self.settings, event.effect_of, out)
            # Serve once the machine's servers have first started or failed (or after start_timeout_s):
            # the first stages of a new system list their tools too, and a hung server delays only these.
            self.awaiting_listing = True
            out.append(Arm(self.settings.mcp.start_timeout_s, ListingDue()))

    # -- jobs ----------------------------------------------------------------------------------
    def _requested(self, event: Requested, out: Out) -> None:
        self.watch.touch(self.clock())
        work = event.work
        if work.known:  # (shapes only step down: taking them before a held job runs is never wrong)
            out.append(Adopt(work.known))
        if not work.held:
            self.front_since = self.clock()  # the pool counts it running from its hand-out, just before
        self._begin(work, event.pool, out)

    def _begin(self, work: WorkAsk, pool: Any, out: Out, *, cleared: bool = False) -> None:
        """Begin a job now, or hold it (behind the answer before it, the job it was held behind, the pool's go)."""
        if self._waits(work):
            self.held.append((work, pool))  # (a prefetched job waits for the answer before it to leave)
            return
        if work.held and work.move_after_s and not cleared and self.front_ran_s >= work.move_after_s / 2:
            # After a long call its pool may have moved it to a worker that freed meanwhile: a second run would
            # pay its tool or model call twice.  Asked first; a short call, the common case, never asks.  Half:
            # a call the pool counted that long ran here at least that less a Work's and a WorkDone's transit.
            self.asking = (work, pool)
            out.append(AskBegin(pool, work.job))
            return
        job = Job(work, pool, self.wall_clock())
        request = work.request
        if self.streams and request.stage in LLM_STAGES:
            self.streaming = Streaming(job)
            out.append(Stream(work.job, request, stage_budget_s(work.timeout_s)))
        elif request.journal_to is None or request.idempotency_key is None:
            self._serve(job, out)
        else:
            # An effectful step counts as started only once the journal has committed it: ask first,
            # run on its go.  A step still queued at a crash, or whose worker dies before the go, never ran.
            self.starting[work.job] = job
            out.append(Journal(request.journal_to, request.idempotency_key, request.task_id, request.run,
                               request.step_index or 0, tool_of(request), work.job))

    def _waits(self, work: WorkAsk) -> bool:
        """Whether ``work`` must wait: a held one waits for the whole job before it (its pool's count of it)."""
        streamed = self.streams and work.request.stage in LLM_STAGES
        return bool(self.awaiting_listing or self.leaving or self.asking is not None
                    or ((streamed or work.held) and self.streaming is not None)
                    or (work.held and (self.starting or self.calls.asking)))

    def _begin_answered(self, event: BeginAnswered, out: Out) -> None:
        if self.asking is None or self.asking[0].job != event.job:
            return  # stopped meanwhile (answered then)
        work, pool = self.asking
        self.asking = None
        if event.go:
            self._begin(work, pool, out, cleared=True)
        else:  # moved (its new worker answers it), or its task canceled: this one never runs it
            out.append(Log(Level.INFO, "held_step_gone", {"task_id": work.request.task_id,
                                                      "stage": work.request.stage, "job": work.job}))
        self._serve_held(out)

    def _freed(self, pool: Any, job: int, out: Out) -> None:
        """Job ``job`` is over unanswered (nobody waits for it): its pool is told (Free)."""
        self._front_over()
        out.append(Free(pool, job, {}))

    def _front_over(self) -> None:
        """The pool is told a job is over: the one it holds next for this worker counts as running from now."""
        now = self.clock()
        self.front_ran_s, self.front_since = now - self.front_since, now

    def _journalled(self, event: Journalled, out: Out) -> None:
        job = self.starting.get(event.job)
        if job is None or job.work.request.idempotency_key != event.key:
            return  # not ours any more (the pool gave up on this job and replaced us), or answered already
        del self.starting[event.job]
        if event.go:
            self._serve(job, out)
            return
        request = job.work.request
        out.append(Log(Level.INFO, "step_not_started", {"task_id": request.task_id, "key": event.key,
                                                    "reason": event.reason}))
        self._answer(job, Refused(f"not started: {event.reason}", "not_started",
                                  {"journal": event.existing} if event.existing else {}), 0.0, out)

    def _serve(self, job: Job, out: Out, *, asked: bool = False) -> None:
        request = job.work.request
        call = None if asked else machine_call(request, self.machine_servers)
        if call is not None:
            # The machine's MCP host makes the call; the stage runs on its answer, the mailbox free meanwhile.
            self.calls.ask(job, call, request.idempotency_key, out)
            return
        self.running[job.number] = job
        out.append(Run(job.number, request, stage_budget_s(job.work.timeout_s)))

    def _ran(self, event: Ran, out: Out) -> None:
        job = self.running.pop(event.job, None)
        if job is not None:
            self._answer(job, event.result, event.cpu_s, out)
            self._serve_held(out)

    def _answer(self, job: Job, outcome: Outcome | Refused, cpu_s: float, out: Out) -> None:
        own = {} if isinstance(outcome, Refused) else outcome.worker
        worker = {**own, **self.identity, "started": job.started, "finished": self.wall_clock(),
                  "cpu_ms": round(cpu_s * 1000.0, 3)}
        self.watch.touch(self.clock())  # a long stage must not count as silence from the pool
        work = job.work
        if work.reply_to is None or "retry_after_s" in worker:
            # Rate-limited by the endpoint: the pool decides whether it runs again.
            self._returned(Return(job.pool, job.number, work.request, outcome, worker), out)
            return
        known = worker.pop("known", None)  # what the pool must know (the ladder), not the task's record
        mcp = worker.pop("mcp", None)  # and its own MCP servers' state (/metrics)
        pooled = {key: value for key, value in (("usage", worker.get("usage")), ("known", known), ("mcp", mcp))
                  if value}
        if not getattr(outcome, "ok", True):
            pooled["failed"] = True  # what the pool accounts for: the model requests' error count
        if known or work.through_pool:
            # Learnt something of its endpoint: answered through the pool, which takes it in before it forwards
            # the answer, so the requester's next request is handed out knowing it.  (Sent to both, the pool may
            # read the requester's next request first: two senders, two connections, no order between them.)
            # Or the requester lives in the pool's process (pegasus.pool.home): one message, not an answer and a Free.
            self._returned(Return(job.pool, job.number, work.request, outcome, worker, pooled), out)
            return
        # The pool forgets the job on its Free: sent before the answer has left, a death between them (the
        # answer waiting behind an unacknowledged one to the same requester) would lose the answer unseen.
        self.leaving[job.number] = Free(job.pool, job.number, pooled)
        out.append(Answer(work.reply_to, job.number, work.request, outcome, worker))

    def _returned(self, answer: Return, out: Out) -> None:
        """A job answered through its pool: the pool's count of it ends here, and with no answer left to wait for
        (AnswerLeft) a held job begins now, whatever answered (a Ran, a journal's refusal, an error)."""
        self._front_over()
        out.append(answer)
        self._serve_held(out)

    def _answer_left(self, event: AnswerLeft, out: Out) -> None:
        free = self.leaving.pop(event.job, None)
        if free is not None:
            self._front_over()
            out.append(free)
            self._serve_held(out)

    def _serve_held(self, out: Out) -> None:
        # One Run at a time: the next held job is served once the carrier says the running one Ran, and its
        # answer has left (a stage run meanwhile would keep the pool from hearing of it: its deadline passes).
        while self.held and self.streaming is None and not self.running and not self._waits(self.held[0][0]):
            self._begin(*self.held.popleft(), out)

    # -- the streamed stage --------------------------------------------------------------------
    def _heard(self, event: Heard, out: Out) -> None:
        streaming = self.streaming
        if streaming is None:
            return
        work = streaming.job.work
        if work.reply_to is not None and not streaming.stopped:
            out.extend(Delta(work.reply_to, work.request, seq, call, text) for seq, call, text in event.pieces)
        if not event.ended:
            return
        self.streaming = None
        if streaming.stopped or event.result is None:
            self._freed(streaming.job.pool, streaming.job.number, out)  # nobody waits for its answer
        else:
            self._answer(streaming.job, event.result, event.cpu_s, out)
        self._serve_held(out)

    def _stop(self, event: StopAsked, out: Out) -> None:
        streaming = self.streaming
        if streaming is not None and streaming.job.number == event.job:
            request = streaming.job.work.request
            out.append(Log(Level.INFO, "stage_stopped", {"task_id": request.task_id, "stage": request.stage}))
            streaming.stopped = True
            out.append(CloseStream())  # the thread's read ends; it reports done (Heard)
            return
        for held in [h for h in self.held if h[0].job == event.job]:
            self.held.remove(held)
            self._freed(event.pool, event.job, out)
        if self.asking is not None and self.asking[0].job == event.job:
            self.asking = None
            self._freed(event.pool, event.job, out)
            self._serve_held(out)

    def _closing(self, event: Closing, out: Out) -> None:
        if self.streaming is not None:
            out.append(CloseStream())  # close the connection: the process is going

    # -- machine-scope MCP calls ---------------------------------------------------------------
    def _listed(self, event: Listed, out: Out) -> None:
        out.append(ShowListing(event.views))
        if not any(view.first_start for view in event.views.values()):
            self._listing_due(ListingDue(), out)

    def _listing_due(self, event: ListingDue, out: Out) -> None:
        self.awaiting_listing = False
        self._serve_held(out)

    def _host_found(self, event: HostFound, out: Out) -> None:
        self.calls.found(event.address, out)

    def _host_check_due(self, event: HostCheckDue, out: Out) -> None:
        self.calls.check(out)

    def _host_answered(self, event: HostAnswered, out: Out) -> None:
        asked = self.calls.answered(event.call)
        if asked is not None:
            self._from_host(asked, event.ok, event.output, out)

    def _host_holds(self, event: HostHolds, out: Out) -> None:
        for asked, error in self.calls.lost(event.asked, event.held, out):  # lost with a host that died
            out.append(Log(Level.WARNING, "mcp_call_lost", {"task_id": asked.work.work.request.task_id,
                                                         "tool": error.tool}))
            self._from_host(asked, False, error, out)

    def _from_host(self, asked: Asked, ok: bool, output: Any, out: Out) -> None:
        server, tool, arguments = asked.call
        out.append(Prepare(server, tool, arguments, ok, output))  # the stage's tool call reads it
        self._serve(asked.work, out, asked=True)

    def _child_exited(self, event: ChildExited, out: Out) -> None:
        if self.calls.host_exited(event.address):
            out.append(Log(Level.WARNING, "mcp_host_exited", {"calls_waiting": len(self.calls.asking)}))

    # -- the pool's pings ----------------------------------------------------------------------
    def _pinged(self, event: Pinged, out: Out) -> None:
        out.append(Pong(event.pool, event.sent_at))
        if self.watch.pinged(self.clock()):
            out.append(Arm(self.watch.check_period_s, OrphanDue()))

    def _orphan_due(self, event: OrphanDue, out: Out) -> None:
        # Waiting only on its pool's answer (HeldGo), with what it holds behind that, is idle: that pool may be gone.
        idle = self.streaming is None and not ((self.held and self.asking is None) or self.starting or self.running
                                               or self.leaving or self.calls.asking)
        if self.watch.orphaned(self.clock(), idle):
            # Its leader died or was cut off (and declared this member gone): a new leader places its own
            # workers, so this one only takes room.
            out.append(Log(Level.WARNING, "worker_orphaned", {"unheard_s": self.watch.orphan_after_s}))
            out.append(Exit())
        else:
            out.append(Arm(self.watch.check_period_s, OrphanDue()))

    # -- what an error leaves owed -------------------------------------------------------------
    def _owed(self, event: WorkerInput) -> Job | None:
        """The job an input concerns (before it is handled), which an error must not leave unanswered."""
        if isinstance(event, Ran):
            return self.running.get(event.job)
        if isinstance(event, Journalled):
            return self.starting.get(event.job)
        if isinstance(event, HostAnswered) and (asked := self.calls.asking.get(event.call)) is not None:
            return asked.work  # type: ignore[no-any-return]
        if isinstance(event, Heard) and event.ended and self.streaming is not None:
            return self.streaming.job
        return None

    def _holds(self, job: int) -> bool:
        """Whether job ``job`` is still in the worker's hands (someone will answer it)."""
        return (any(work.job == job for work, _ in self.held) or job in self.starting or job in self.running
                or (self.asking is not None and self.asking[0].job == job)
                or (self.streaming is not None and self.streaming.job.number == job)
                or any(asked.work.number == job for asked in self.calls.asking.values()))


def stage_budget_s(timeout_s: float) -> float:
    """The time a stage's model calls may take: the pool's deadline less a margin to answer in (a tenth,
    at most 5 s), so the worker's own timeout, naming the model's, comes before the pool's."""
    return timeout_s - min(STAGE_MARGIN_S, timeout_s / 10) if timeout_s > 0 else 0.0


def _answered(job: int, out: Out) -> bool:
    return any(isinstance(c, (Answer, Return, Free)) and c.job == job for c in out)
