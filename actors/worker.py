"""A stage worker: runs one stage (or one verification gate) at a time.

Workers are plain synchronous actors: while a stage runs, the worker's mailbox
waits, which is exactly what makes the pool size the concurrency limit.  A
worker never raises into Thespian: every outcome, including an exception in a
processor, becomes a StageResult.

Streamed llm stages (``[llm] stream``, provider openai) are the exception: the
stage runs in a thread of its own while the worker's loop stays free, so the
text the model writes goes to the task actor as it comes (TextDelta, batched by
``TextBuffer``) and a StopStage from the pool (the task was canceled, the stage
overran) closes the stream at once and leaves the worker free.  The thread never
touches Thespian: it wakes the loop through a pipe the loop watches (Thespian's
``ThespianWatch``), and the loop sends.  Requests held meanwhile (prefetch) wait
in order: still one stage at a time.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from thespian.actors import (
    ActorExitRequest, ActorTypeDispatcher, ChildActorExited, ThespianWatch, WakeupMessage, WatchMessage,
)

from actors import procs, sharing, titles
from actors.mcp_calls import HOST_CHECK, MachineCalls
from actors.messages import (
    McpAnswer, McpHeldAnswer, McpListing, StageRequest, StageResult, StepGo, StepStarting, StopStage,
    TextDelta, Work, WorkDone, WorkerInit, WorkerPing, WorkerPong, WorkerReady,
)
from pegasus import logs
from pegasus.cognitive.llm import RateLimited
from pegasus.cognitive.stages import LLM_STAGES, Processors, StageError, processors_for, run_stage
from pegasus.config import ConventionSettings
from pegasus.llm.listen import streams
from pegasus.llm.stream import DeltaSink, TextBuffer, listening
from pegasus.pool.contact import PoolWatch, orphan_after_s
from pegasus.pool.placement import MEMBER_CAPABILITY, POOL_REQUIREMENT, advertised_workers
from pegasus.task.models import deep_copy
from pegasus.task.names import StageName
from pegasus.tools.mcp_provider import RemoteSource
from pegasus.tools.plugins import mcp_specs, registry_for

GATE_OUTPUT_CHARS = 4000
LISTING_WAIT = "mcp-listing"  # the wakeup that ends the wait for the machine's first MCP listing
ORPHAN_CHECK = "orphan-check"  # the wakeup of a member's worker: is its pool still there?


@dataclass
class _Streamed:
    """One llm stage running in its own thread (see the module docstring)."""

    work: Work
    pool: Any
    started: float
    wake: int  # the write end of the worker's pipe
    buffer: TextBuffer = field(default_factory=TextBuffer)
    sink: DeltaSink | None = None
    result: StageResult | None = None
    cpu_s: float = 0.0
    stopped: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    timer: threading.Timer | None = None

    def on_text(self, text: str) -> None:
        """(The stream thread.)  Keep the text; wake the loop when it is due, else when it will be."""
        if self.buffer.add(text, self.sink.calls if self.sink is not None else 1):
            self.signal()
        elif self.timer is None or not self.timer.is_alive():
            self.timer = threading.Timer(self.buffer.due_in() or 0.0, self.signal)
            self.timer.daemon = True
            self.timer.start()

    def signal(self) -> None:
        try:
            os.write(self.wake, b"w")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (the loop will read it) or closed (the worker is exiting)


class StageWorker(ActorTypeDispatcher):
    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:  # noqa: N802
        """Thespian's placement test (thespian.system.utilis.checkActorCapabilities).

        Without requirements a worker runs where its pool asks (the pool's own
        admin: a single system, or the leader's local workers).  With
        ``placement(member, pool)`` it runs only on the admin named ``member``,
        and only if that admin advertises workers for ``pool``: Thespian then
        forwards the creation from the leader to exactly that member (it does
        no load balancing of its own).
        """
        member = (requirements or {}).get(MEMBER_CAPABILITY)
        if member is None:
            return True
        return (capabilities.get(MEMBER_CAPABILITY) == member
                and advertised_workers(capabilities, str(requirements.get(POOL_REQUIREMENT))) > 0)

    def __init__(self, capabilities: dict[str, Any] | None = None) -> None:
        # Thespian passes its admin's ``capabilities`` because a positional parameter has
        # that name (withPossibleInitArgs reads getfullargspec().args: not keyword-only ones).
        super().__init__()
        sharing.after_fork()
        procs.die_with_parent()
        self.identity: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname()}
        # Which admin runs this worker: the convention member's name and its admin port.
        self.identity.update(member=(capabilities or {}).get(MEMBER_CAPABILITY),
                             admin_port=(capabilities or {}).get("Admin Port"))
        self.processors: Processors | None = None  # from the settings WorkerInit brings
        self.latency_s = 0.0
        self.cpu_started: float | None = None  # thread CPU clock when the stage's own work began
        self.starting: dict[int, tuple[Work, Any, float]] = {}  # effectful steps waiting for their StepGo
        # Machine-scope MCP servers: their listings and answers come from the admin's MCP host.
        self.remote = RemoteSource()
        self.machine_servers: frozenset[str] = frozenset()
        self.mcp = MachineCalls(self)  # calls to the machine's MCP host: work is (Work, pool, started)
        self.log = logs.get("worker")
        self.streams = False  # llm stages stream ([llm] stream with provider openai)
        self.streamed: _Streamed | None = None  # the streamed stage running now
        # Requests that came while a streamed stage runs (prefetch) or before the first MCP listing.
        self.held: deque[tuple[Work, Any]] = deque()
        self.wake_r, self.wake_w = -1, -1
        self.awaiting_listing = False  # machine-scope MCP servers not yet started or failed once
        self.pool_watch = PoolWatch(orphan_after_s(ConventionSettings()))  # a member's worker whose pool is gone exits

    def receiveMessage(self, message: Any, sender: Any) -> Any:
        super().receiveMessage(message, sender)
        # While a streamed stage runs, Thespian's loop also watches the pipe its thread wakes it by.
        return ThespianWatch([self.wake_r]) if self.streamed is not None else None

    def receiveMsg_WorkerInit(self, init: WorkerInit, sender: Any) -> None:
        logs.configure_from(init.settings)
        self.machine_servers = frozenset(s.name for s in mcp_specs(init.settings) if s.scope == "machine")
        tools = registry_for(init.settings, self.remote)
        tools.load_providers(0.0)  # scope = "worker" servers start now, in the background
        self.processors = processors_for(init.settings, tools)  # offline or llm, by [llm] provider
        if self.machine_servers:
            self.mcp.start(init.settings, tools.effect_of)
        self.identity.update(pool=init.pool, index=init.index)
        titles.set_title(f"{init.pool} worker {init.index}")
        self.latency_s = init.settings.cognition.latency_ms / 1000.0
        self.pool_watch.orphan_after_s = orphan_after_s(init.settings.convention)
        self.streams = streams(init.settings)
        if self.streams and self.wake_r < 0:
            self.wake_r, self.wake_w = os.pipe()
            os.set_blocking(self.wake_r, False)
            os.set_blocking(self.wake_w, False)
        self.log = logs.get("worker", pool=init.pool, index=init.index)
        if self.machine_servers:
            # Serve once the machine's servers have first started or failed (or after start_timeout_s):
            # the first stages of a new system list their tools too, and a hung server delays only these.
            self.awaiting_listing = True
            self.wakeupAfter(timedelta(seconds=init.settings.mcp.start_timeout_s), payload=LISTING_WAIT)
        self.send(sender, WorkerReady(init.index, os.getpid(), self.identity["host"]))

    def _listed(self) -> None:
        self.awaiting_listing = False
        self._serve_held()

    def _serve_held(self) -> None:
        while self.held and not self.awaiting_listing and self.streamed is None:
            self.receiveMsg_Work(*self.held.popleft())

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        if wakeup.payload == LISTING_WAIT:
            self._listed()
        elif wakeup.payload == HOST_CHECK:
            self.mcp.check()
        elif wakeup.payload == ORPHAN_CHECK:
            idle = self.streamed is None and not (self.held or self.starting or self.mcp.asking)
            if self.pool_watch.orphaned(time.monotonic(), idle):
                # Its leader died or was cut off (and declared this member gone): a new leader places
                # its own workers, so this one only takes room.
                self.log.warning("worker_orphaned", unheard_s=self.pool_watch.orphan_after_s)
                self.send(self.myAddress, ActorExitRequest())
            else:
                self.wakeupAfter(timedelta(seconds=self.pool_watch.check_period_s), payload=ORPHAN_CHECK)

    def receiveMsg_WorkerPing(self, ping: WorkerPing, sender: Any) -> None:
        self.send(sender, WorkerPong(ping.sent_at))
        if self.pool_watch.pinged(time.monotonic()):
            self.wakeupAfter(timedelta(seconds=self.pool_watch.check_period_s), payload=ORPHAN_CHECK)

    def receiveMsg_Work(self, work: Work, sender: Any) -> None:
        self.pool_watch.touch(time.monotonic())
        request = work.request
        streamed = self.streams and request.stage in LLM_STAGES
        if self.awaiting_listing or (streamed and self.streamed is not None):
            self.held.append((work, sender))
            return
        if streamed:
            self._stream(work, sender)
            return
        if request.journal_to is None or request.idempotency_key is None:
            self._serve(work, sender, time.time())
            return
        # An effectful step counts as started only once the supervisor has committed it:
        # ask first, run on its go (receiveMsg_StepGo).  A step still queued at a crash,
        # or whose worker dies before the go, provably never ran.
        self.starting[work.job] = (work, sender, time.time())
        self.send(request.journal_to, StepStarting(request.idempotency_key, request.task_id, request.run,
                                                   request.step_index or 0, _tool(request), work.job))

    def receiveMsg_StepGo(self, answer: StepGo, sender: Any) -> None:
        waiting = self.starting.pop(answer.job, None)
        if waiting is None or waiting[0].request.idempotency_key != answer.key:
            return  # not ours any more (the pool gave up on this job and replaced us)
        work, pool, started = waiting
        if answer.go:
            self._serve(work, pool, started)
            return
        request = work.request
        self.log.info("step_not_started", task_id=request.task_id, key=answer.key, reason=answer.reason)
        refused = StageResult(request.task_id, request.token, request.stage, ok=False, error_kind="not_started",
                              error=f"not started: {answer.reason}",
                              payload={"journal": answer.existing} if answer.existing else {})
        self._answer(work, pool, refused, started)

    # -- streamed llm stages -------------------------------------------------------------------
    def _stream(self, work: Work, sender: Any) -> None:
        streamed = self.streamed = _Streamed(work, sender, time.time(), self.wake_w)
        streamed.sink = DeltaSink(streamed.on_text)
        threading.Thread(target=self._stream_thread, args=(streamed,), daemon=True,
                         name=f"stage-{work.job}").start()

    def _stream_thread(self, streamed: _Streamed) -> None:
        """(Its own thread.)  Run the stage with its text going to the buffer; never raises."""
        assert streamed.sink is not None
        cpu = time.thread_time()
        try:
            with listening(streamed.sink):
                streamed.result = self._run(streamed.work.request)
        except Exception as exc:  # noqa: BLE001 - the boundary: an error becomes a message
            request = streamed.work.request
            streamed.result = StageResult(request.task_id, request.token, request.stage, ok=False,
                                          error=f"{type(exc).__name__}: {exc}", error_kind="exception")
        streamed.cpu_s = time.thread_time() - cpu
        streamed.done.set()
        streamed.signal()

    def receiveMsg_WatchMessage(self, message: WatchMessage, sender: Any) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass
        streamed = self.streamed
        if streamed is None:
            return
        self._send_text(streamed)
        if not streamed.done.is_set():
            return
        self.streamed = None
        if streamed.stopped or streamed.result is None:
            self.send(streamed.pool, WorkDone(streamed.work.job))  # nobody waits for its answer
        else:
            self._answer(streamed.work, streamed.pool, streamed.result, streamed.started, cpu_s=streamed.cpu_s)
        self._serve_held()

    def _send_text(self, streamed: _Streamed) -> None:
        request, to = streamed.work.request, streamed.work.reply_to
        while (piece := streamed.buffer.take()) is not None:
            if to is not None and not streamed.stopped:
                seq, call, text = piece
                self.send(to, TextDelta(request.task_id, request.token, request.stage, seq, text, request.run, call))

    def receiveMsg_StopStage(self, stop: StopStage, sender: Any) -> None:
        streamed = self.streamed
        if streamed is not None and streamed.work.job == stop.job:
            self.log.info("stage_stopped", task_id=streamed.work.request.task_id, stage=streamed.work.request.stage)
            streamed.stopped = True
            if streamed.sink is not None:
                streamed.sink.close()  # the thread's read ends; it reports done through the pipe
            return
        for held in list(self.held):
            if held[0].job == stop.job:
                self.held.remove(held)
                self.send(sender, WorkDone(stop.job))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        if self.streamed is not None and self.streamed.sink is not None:
            self.streamed.sink.close()  # close the connection: the process is going

    # -- machine-scope MCP calls ---------------------------------------------------------------
    def receiveMsg_McpListing(self, listing: McpListing, sender: Any) -> None:
        self.remote.views = dict(listing.views)
        if not any(view.first_start for view in listing.views.values()):
            self._listed()

    def receiveMsg_McpAnswer(self, answer: McpAnswer, sender: Any) -> None:
        answered = self.mcp.answered(answer)
        if answered is not None:
            self._mcp_answered(*answered)

    def receiveMsg_McpHeldAnswer(self, answer: McpHeldAnswer, sender: Any) -> None:
        for asked, error in self.mcp.lost(answer):  # lost with a host that died: their outcome is unknown
            self.log.warning("mcp_call_lost", task_id=asked.work[0].request.task_id, tool=error.tool)
            self._mcp_answered(asked, False, error)

    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        if self.mcp.host_exited(exited.childAddress):
            self.log.warning("mcp_host_exited", calls_waiting=len(self.mcp.asking))

    def _mcp_answered(self, asked: Any, ok: bool, output: Any) -> None:
        work, pool, started = asked.work
        server, tool, arguments = asked.call
        self.remote.prepare(server, tool, arguments, ok, output)
        self._serve(work, pool, started, asked=True)

    def _serve(self, work: Work, sender: Any, started: float, *, asked: bool = False) -> None:
        call = None if asked else self._machine_call(work.request)
        if call is not None:
            # The machine's MCP host makes the call; the stage runs on its answer (receiveMsg_McpAnswer),
            # and the mailbox stays free meanwhile.
            self.mcp.ask((work, sender, started), call, work.request.idempotency_key)
            return
        self.cpu_started = None
        try:
            result = self._run(work.request)
        except Exception as exc:  # noqa: BLE001 - the boundary: an error becomes a message
            result = StageResult(work.request.task_id, work.request.token, work.request.stage, ok=False,
                                 error=f"{type(exc).__name__}: {exc}", error_kind="exception")
        self._answer(work, sender, result, started)

    def _answer(self, work: Work, sender: Any, result: StageResult, started: float,
                cpu_s: float | None = None) -> None:
        finished = time.time()
        if cpu_s is None:
            cpu_s = time.thread_time() - self.cpu_started if self.cpu_started is not None else 0.0
        self.cpu_started = None
        worker = {**result.worker, **self.identity, "started": started, "finished": finished,
                  "cpu_ms": round(cpu_s * 1000.0, 3)}
        result = _with_worker(result, worker)
        self.pool_watch.touch(time.monotonic())
        if work.reply_to is None or "retry_after_s" in worker:
            # Rate-limited by the endpoint: the pool decides whether it runs again.
            self.send(sender, WorkDone(work.job, result))
            return
        self.send(work.reply_to, result)  # the requester first: it is waiting for this
        self.send(sender, WorkDone(work.job, worker={"usage": worker["usage"]} if "usage" in worker else {}))

    def _run(self, request: StageRequest) -> StageResult:
        if request.stage == StageName.GATE:
            self.cpu_started = time.thread_time()
            return _run_gate(request)
        if self.processors is None:
            raise RuntimeError("stage worker received work before WorkerInit")
        if self.latency_s:
            time.sleep(self.latency_s)
        # The CPU clock starts after the simulated latency: reading it is a system call,
        # where the process may be preempted, and one before the sleep delayed the
        # whole stage (measured: +0.5 ms of every 50 ms stage with a pool of one).
        if self.streamed is None:
            self.cpu_started = time.thread_time()
        context = request.context
        if request.idempotency_key and context.plan is not None and request.step_index is not None:
            # The step runner hands the key to the tool (ToolContext.idempotency_key).
            # Copy first: on simpleSystemBase the request is shared with its sender.
            context = deep_copy(context)
            for step in context.plan.steps:
                if step.index == request.step_index:
                    step.action_params["idempotency_key"] = request.idempotency_key
        try:
            outcome = run_stage(self.processors, request.stage, context,
                                machine=request.machine, step_index=request.step_index)
        except StageError as exc:
            self.log.warning("stage_failed", task_id=request.task_id, stage=request.stage, error=str(exc))
            # The model calls made before the failure (the pool's rate limiter reconciles them too),
            # and for a 429 the endpoint's Retry-After: the pool decides when to try again.
            extra: dict[str, Any] = {"usage": getattr(exc, "usage", None)} if getattr(exc, "usage", None) else {}
            if isinstance(exc, RateLimited):
                extra["retry_after_s"] = exc.retry_after_s
            return StageResult(request.task_id, request.token, request.stage, ok=False,
                               # The message alone: the result names the stage, the task says it once.
                               error=exc.message, error_kind="exception", worker=extra)
        reported: dict[str, Any] = {"usage": outcome.usage} if outcome.usage else {}
        if outcome.context:
            reported["context"] = outcome.context  # the context budget's fits: the task's history shows them
        return StageResult(request.task_id, request.token, request.stage, ok=True,
                           event_type=str(outcome.event_type), payload=outcome.payload, worker=reported)


    def _machine_call(self, request: StageRequest) -> tuple[str, str, dict[str, Any]] | None:
        """(server, tool, arguments) when the request is an act step calling a machine-scope MCP tool."""
        if request.stage != StageName.ACT or not self.machine_servers or request.context is None:
            return None
        plan = request.context.plan
        step = next((s for s in plan.steps if s.index == request.step_index), None) if plan else None
        if step is None or step.action_type != "tool_call":
            return None
        server, dot, tool = str(step.action_params.get("tool")).partition(".")
        arguments = step.action_params.get("args", {})
        if not dot or server not in self.machine_servers or not isinstance(arguments, dict):
            return None
        return server, tool, dict(arguments)


def _run_gate(request: StageRequest) -> StageResult:
    """Run a verification gate command; its exit status decides."""
    gate = request.gate
    assert gate is not None  # a gate request always names its gate
    try:
        done = subprocess.run(gate.command, capture_output=True, text=True, timeout=gate.timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return StageResult(request.task_id, request.token, request.stage, ok=False, error_kind="timeout",
                           error=f"gate {gate.name!r} timed out after {gate.timeout_s:g}s")
    except OSError as exc:
        return StageResult(request.task_id, request.token, request.stage, ok=False, error_kind="exception",
                           error=f"gate {gate.name!r} could not run: {exc}")
    payload = {"gate": gate.name, "returncode": done.returncode,
               "output": (done.stdout + done.stderr)[-GATE_OUTPUT_CHARS:]}
    if done.returncode != 0:
        return StageResult(request.task_id, request.token, request.stage, ok=False, payload=payload, error_kind="tool",
                           error=f"gate {gate.name!r} failed with exit status {done.returncode}")
    return StageResult(request.task_id, request.token, request.stage, ok=True, payload=payload)


def _tool(request: StageRequest) -> str | None:
    plan = request.context.plan if request.context is not None else None
    step = next((s for s in plan.steps if s.index == request.step_index), None) if plan else None
    return None if step is None else str(step.action_params.get("tool"))


def _with_worker(result: StageResult, worker: dict[str, Any]) -> StageResult:
    return replace(result, worker=worker)
