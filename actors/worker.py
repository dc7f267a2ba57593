"""A stage worker on Thespian: a thin carrier over ``pegasus.worker.core.WorkerCore``.

Each message becomes one input of the core and its commands are carried out in order: sends,
wakeups, and what only this process can do -- run a stage in the actor's thread (so the pool's size
is its concurrency limit), run a streamed stage in a thread of its own, build the tools and
processors, find the machine's MCP host.  The stream thread never touches Thespian: it gathers text
in a ``TextBuffer`` and wakes the loop through a pipe (``ThespianWatch``).  A worker never raises
into Thespian: an exception in a processor becomes a failed StageResult.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from thespian.actors import (
    ActorExitRequest, ActorTypeDispatcher, ChildActorExited, PoisonMessage, ThespianWatch, WakeupMessage, WatchMessage,
)

from actors import telemetry
from actors.runtime import procs, sharing, titles
from actors.wire.frames import refused_why
from actors.wire.leaving import send_then, take_arrived_acks
from actors.mcp_host import MCP_HOST, McpHostActor
from actors.messages import (
    HeldGo, HeldStart, McpAnswer, McpCall, McpHeld, McpHeldAnswer, McpListing, McpSubscribe, StageRequest, StageResult,
    StepGo, StepStarting, StopStage, TextDelta, Work, WorkDone, WorkerInit, WorkerPing, WorkerPong, WorkerReady,
)
from actors.messages.stage_work import ErrorKind
from pegasus import logs, tracing
from pegasus.cognitive.llm import ModelTimedOut, RateLimited
from pegasus.cognitive.stages import EMBED_STAGES, ProcessorSets, StageError, run_stage
from pegasus.config import LLMSettings, MemorySettings, Settings
from pegasus.llm import deadline, ladder
from pegasus.llm.stream import DeltaSink, TextBuffer, listening
from pegasus.memory.embeddings import embed_payload
from pegasus.pool.placement import MEMBER_CAPABILITY, POOL_REQUIREMENT, advertised_workers
from pegasus.task.models import deep_copy
from pegasus.task.names import StageName
from pegasus.tools.mcp_provider import RemoteSource, local_servers
from pegasus.tools.plugins import mcp_specs, registry_for
from pegasus.worker import commands as c
from pegasus.worker import inputs as i
from pegasus.worker.core import WorkerCore

GATE_OUTPUT_CHARS = 4000


@dataclass
class _Streamed:
    """The streamed stage's thread and what it leaves for the loop (see the module docstring)."""

    request: StageRequest
    wake: int  # the write end of the worker's pipe
    budget_s: float = 0.0
    buffer: TextBuffer = field(default_factory=TextBuffer)
    sink: DeltaSink | None = None
    result: StageResult | None = None
    cpu_s: float = 0.0
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

        Without requirements a worker runs where its pool asks (the pool's own admin).  With
        ``placement(member, pool)`` it runs only on the admin named ``member``, and only if that admin
        advertises workers for ``pool``: Thespian then forwards the creation to exactly that member (it
        does no load balancing of its own).
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
        ladder.forget()  # what it knows of endpoints comes from its own calls and its pool (Adopt)
        # Which admin runs this worker: the convention member's name and its admin port.
        self.core = WorkerCore({"pid": os.getpid(), "host": socket.gethostname(),
                                "member": (capabilities or {}).get(MEMBER_CAPABILITY),
                                "admin_port": (capabilities or {}).get("Admin Port")})
        self.processors: ProcessorSets | None = None  # from the settings WorkerInit brings (SetUp)
        self.settings: Settings | None = None
        self.pool, self.traced = "", False  # traced: [telemetry] on (the stage's calls are kept for its span)
        self.embedding: tuple[Any, Any] = (MemorySettings(), LLMSettings())  # likewise
        self.latency_s = 0.0
        self.cpu_started: float | None = None  # thread CPU clock when the stage's own work began
        self.remote = RemoteSource()  # machine-scope MCP servers: listings and answers from the admin's host
        self.providers: list[Any] = []  # the registry's: its scope = "worker" MCP servers are reported to the pool
        self.log = logs.get("worker")
        self.stream: _Streamed | None = None  # the streamed stage's thread, until the loop hears it ended
        self.wake_r, self.wake_w = -1, -1
        self._do = self._commands()

    def _commands(self) -> dict[type, Callable[[Any], None]]:
        """Command type -> what carries it out (one row per command of pegasus.worker.commands)."""
        return {
            c.SetUp: self._set_up, c.Ready: self._ready, c.Journal: self._journal, c.Run: self._run_now,
            c.Stream: self._stream, c.CloseStream: self._close_stream, c.Delta: self._delta, c.Answer: self._answer,
            c.Return: self._return, c.Free: self._free, c.FindHost: self._find_host, c.CallHost: self._call_host,
            c.AskHeld: self._ask_held, c.ShowListing: self._show_listing, c.Prepare: self._prepare,
            c.Pong: self._pong, c.Arm: self._arm, c.Exit: self._exit, c.Log: self._log, c.Adopt: self._adopt,
            c.AskBegin: self._ask_begin,
        }

    def _step(self, event: i.WorkerInput) -> None:
        for command in self.core.step(event):
            self._do[type(command)](command)

    def receiveMessage(self, message: Any, sender: Any) -> Any:
        super().receiveMessage(message, sender)
        # While a streamed stage runs, Thespian's loop also watches the pipe its thread wakes it by.
        return ThespianWatch([self.wake_r]) if self.stream is not None else None

    # -- messages -> inputs --------------------------------------------------------------------
    def receiveMsg_WorkerInit(self, init: WorkerInit, sender: Any) -> None:
        self._step(i.Configured(sender, init.pool, init.index, init.settings))

    def receiveMsg_Work(self, work: Work, sender: Any) -> None:
        self._step(i.Requested(work, sender))

    def receiveMsg_StepGo(self, answer: StepGo, sender: Any) -> None:
        self._step(i.Journalled(answer.key, answer.job, answer.go, answer.reason, answer.existing))

    def receiveMsg_HeldGo(self, answer: HeldGo, sender: Any) -> None:
        self._step(i.BeginAnswered(answer.job, answer.go))

    def receiveMsg_StopStage(self, stop: StopStage, sender: Any) -> None:
        self._step(i.StopAsked(stop.job, sender))

    def receiveMsg_WorkerPing(self, ping: WorkerPing, sender: Any) -> None:
        self._step(i.Pinged(sender, ping.sent_at))

    def receiveMsg_McpListing(self, listing: McpListing, sender: Any) -> None:
        self._step(i.Listed(listing.views))

    def receiveMsg_McpAnswer(self, answer: McpAnswer, sender: Any) -> None:
        self._step(i.HostAnswered(answer.call, answer.ok, answer.output))

    def receiveMsg_McpHeldAnswer(self, answer: McpHeldAnswer, sender: Any) -> None:
        self._step(i.HostHolds(answer.asked, answer.held))

    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        self._step(i.ChildExited(exited.childAddress))

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        self._step(wakeup.payload)  # a timer the core armed, handed back as it was

    def receiveMsg_PoisonMessage(self, poison: PoisonMessage, sender: Any) -> None:
        """An answer refused unsent (larger than a frame): its requester, or its pool, hears that instead."""
        message, why = poison.poisonMessage, refused_why(poison)
        if why is None:
            return
        if isinstance(message, StageResult):
            self.send(sender, _unsendable(message, why))
        elif isinstance(message, WorkDone) and message.result is not None:
            self.send(sender, WorkDone(message.job, _unsendable(message.result, why), worker=message.worker))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self._step(i.Closing())
        telemetry.flush()

    def receiveMsg_WatchMessage(self, message: WatchMessage, sender: Any) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass
        stream = self.stream
        if stream is None:
            return
        ended = stream.done.is_set()  # read first: every piece of an ended stage is in the buffer then
        pieces = []
        while (piece := stream.buffer.take()) is not None:
            pieces.append(piece)
        if ended:
            self.stream = None
        self._step(i.Heard(tuple(pieces), ended, stream.result, stream.cpu_s))

    # -- commands ------------------------------------------------------------------------------
    def _set_up(self, command: c.SetUp) -> None:
        settings = self.settings = command.settings
        self.pool, self.traced = command.pool, settings.telemetry.enabled
        logs.configure_from(settings)
        machine = frozenset(s.name for s in mcp_specs(settings) if s.scope == "machine")
        tools = registry_for(settings, self.remote)
        tools.load_providers(0.0)  # scope = "worker" servers start now, in the background
        self.providers = tools.providers()
        self.processors = ProcessorSets(settings, tools)  # offline or llm, by [llm] provider; by task tier
        self.embedding = (settings.memory, settings.llm)  # the embed stages' endpoint
        titles.set_title(f"{command.pool} worker {command.index}")
        self.latency_s = settings.cognition.latency_ms / 1000.0
        if command.streams and self.wake_r < 0:
            self.wake_r, self.wake_w = os.pipe()
            os.set_blocking(self.wake_r, False)
            os.set_blocking(self.wake_w, False)
        self.log = logs.get("worker", pool=command.pool, index=command.index)
        self._step(i.Loaded(machine, tools.effect_of))

    def _ready(self, command: c.Ready) -> None:
        self.send(command.to, WorkerReady(command.index, command.pid, command.host))

    def _journal(self, command: c.Journal) -> None:
        self.send(command.to, StepStarting(command.key, command.task_id, command.run, command.step_index,
                                           command.tool, command.job))

    def _ask_begin(self, command: c.AskBegin) -> None:
        self.send(command.pool, HeldStart(command.job))

    def _run_now(self, command: c.Run) -> None:
        request: StageRequest = command.request  # type: ignore[assignment]
        self.cpu_started = None
        try:
            result = self._run(request, command.budget_s)
        except Exception as exc:  # noqa: BLE001 - the boundary: an error becomes a message
            result = StageResult(request.task_id, request.token, request.stage, ok=False,
                                 error=f"{type(exc).__name__}: {exc}", error_kind="exception")
        cpu_s = time.thread_time() - self.cpu_started if self.cpu_started is not None else 0.0
        self.cpu_started = None
        # Acknowledgements that came during the stage: read now, the answer and the pool's WorkDone leave at once.
        take_arrived_acks(self)
        self._step(i.Ran(command.job, result, cpu_s))

    def _stream(self, command: c.Stream) -> None:
        stream = self.stream = _Streamed(command.request, self.wake_w, command.budget_s)  # type: ignore[arg-type]
        stream.sink = DeltaSink(stream.on_text)
        threading.Thread(target=self._stream_thread, args=(stream,), daemon=True,
                         name=f"stage-{command.job}").start()

    def _stream_thread(self, stream: _Streamed) -> None:
        """(Its own thread.)  Run the stage with its text going to the buffer; never raises."""
        assert stream.sink is not None
        cpu = time.thread_time()
        try:
            with listening(stream.sink):
                stream.result = self._run(stream.request, stream.budget_s)
        except Exception as exc:  # noqa: BLE001 - the boundary: an error becomes a message
            request = stream.request
            stream.result = StageResult(request.task_id, request.token, request.stage, ok=False,
                                        error=f"{type(exc).__name__}: {exc}", error_kind="exception")
        stream.cpu_s = time.thread_time() - cpu
        stream.done.set()
        stream.signal()

    def _close_stream(self, command: c.CloseStream) -> None:
        if self.stream is not None and self.stream.sink is not None:
            self.stream.sink.close()  # the thread's read ends; it reports done through the pipe

    def _delta(self, command: c.Delta) -> None:
        request = command.request
        self.send(command.to, TextDelta(request.task_id, request.token, request.stage, command.seq, command.text,
                                        request.run, command.call))

    def _answer(self, command: c.Answer) -> None:
        job = command.job  # its pool hears the job is over once the answer has left (pegasus.worker.core)
        send_then(self, command.to, _result(command.request, command.outcome, command.worker),
                  lambda: self._left(job))

    def _left(self, job: int) -> None:
        """(Maybe Thespian's send callback, in its loop: nothing may raise into it.)"""
        try:
            self._step(i.AnswerLeft(job))
        except Exception:  # noqa: BLE001 - the pool's deadline ends the job
            self.log.exception("worker_error", input="AnswerLeft", job=job)

    def _return(self, command: c.Return) -> None:
        self.send(command.pool, WorkDone(command.job, _result(command.request, command.outcome, command.worker),
                                         worker=command.pooled or {}))

    def _free(self, command: c.Free) -> None:
        self.send(command.pool, WorkDone(command.job, worker=command.worker))

    def _find_host(self, command: c.FindHost) -> None:
        """The live host by its global name (a fresh one when it died); subscribed to its listings."""
        host = self.createActor(McpHostActor, globalName=MCP_HOST)
        self.send(host, McpSubscribe(command.settings))
        self._step(i.HostFound(host))

    def _call_host(self, command: c.CallHost) -> None:
        self.send(command.host, McpCall(command.number, command.server, command.tool, command.arguments,
                                        key=command.key))

    def _ask_held(self, command: c.AskHeld) -> None:
        self.send(command.host, McpHeld(command.numbers))

    def _show_listing(self, command: c.ShowListing) -> None:
        self.remote.views = dict(command.views)

    def _prepare(self, command: c.Prepare) -> None:
        self.remote.prepare(command.server, command.tool, command.arguments, command.ok, command.output)

    def _pong(self, command: c.Pong) -> None:
        self.send(command.to, WorkerPong(command.sent_at))

    def _arm(self, command: c.Arm) -> None:
        self.wakeupAfter(timedelta(seconds=command.delay_s), payload=command.timer)

    def _exit(self, command: c.Exit) -> None:
        self.send(self.myAddress, ActorExitRequest())

    def _log(self, command: c.Log) -> None:
        logs.emit(self.log, command.level, command.event, **command.fields)

    def _adopt(self, command: c.Adopt) -> None:
        ladder.adopt(command.known)

    # -- running a stage -----------------------------------------------------------------------
    def _run(self, request: StageRequest, budget_s: float = 0.0) -> StageResult:
        """The stage's result, with what this process learnt of its endpoint meanwhile (for the pool);
        its span and its calls' sent when tracing is on (actors/telemetry.py)."""
        started, result = time.time_ns(), None
        calls: list[tracing.Call] = []
        try:
            with deadline.within(budget_s), (tracing.recording() if self.traced else nullcontext(calls)) as calls:
                result = self._run_stage(request)
        finally:
            telemetry.stage_span(self.settings, request, self.pool, started, time.time_ns(), result, calls)
        learned = {"known": ladder.learned(), "mcp": local_servers(self.providers)}  # for the pool's view
        learned = {key: value for key, value in learned.items() if value}
        return replace(result, worker={**result.worker, **learned}) if learned else result

    def _run_stage(self, request: StageRequest) -> StageResult:
        if request.stage == StageName.GATE:
            self.cpu_started = time.thread_time()
            return _run_gate(request)
        if request.stage in EMBED_STAGES:
            self.cpu_started = time.thread_time()
            payload, error = embed_payload(list(request.texts), *self.embedding)
            return StageResult(request.task_id, request.token, request.stage, ok=error is None, payload=payload,
                               error=error, error_kind="exception" if error else "")
        if self.processors is None:
            raise RuntimeError("stage worker received work before WorkerInit")
        if self.latency_s:
            _simulated_latency(self.latency_s)
        # The CPU clock starts after the simulated latency: reading it is a system call,
        # where the process may be preempted, and one before the sleep delayed the
        # whole stage.
        if self.stream is None:
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
            outcome = run_stage(self.processors.of(context.tier, request.stage), request.stage, context,
                                machine=request.machine, step_index=request.step_index)
        except StageError as exc:
            self.log.warning("stage_failed", task_id=request.task_id, stage=request.stage, error=str(exc))
            # The model calls made before the failure (the pool's rate limiter reconciles them too),
            # and for a 429 the endpoint's Retry-After: the pool decides when to try again.
            extra: dict[str, Any] = {"usage": getattr(exc, "usage", None)} if getattr(exc, "usage", None) else {}
            if isinstance(exc, RateLimited):
                extra["retry_after_s"] = exc.retry_after_s
            kind: ErrorKind = "rate_limited" if isinstance(exc, RateLimited) else \
                "timeout" if isinstance(exc, ModelTimedOut) else "exception"
            return StageResult(request.task_id, request.token, request.stage, ok=False,
                               # The message alone: the result names the stage, the task says it once.
                               error=exc.message, error_kind=kind, worker=extra)
        reported: dict[str, Any] = {"usage": outcome.usage} if outcome.usage else {}
        if outcome.context:
            reported["context"] = outcome.context  # the context budget's fits: the task's history shows them
        return StageResult(request.task_id, request.token, request.stage, ok=True,
                           event_type=str(outcome.event_type), payload=outcome.payload, worker=reported)


def _simulated_latency(seconds: float) -> None:
    """[cognition] latency_ms: the model's wait, in the stage's thread (a frame of its own, so that a profile
    of the process tells it from work: benchmarks/spyprof.py)."""
    time.sleep(seconds)


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


def _result(request: Any, outcome: Any, worker: dict[str, Any]) -> StageResult:
    """The stage's result with ``worker`` as its worker record; a refusal made a failed result."""
    if isinstance(outcome, c.Refused):
        return StageResult(request.task_id, request.token, request.stage, ok=False, error=outcome.error,
                           error_kind=outcome.kind, payload=dict(outcome.payload), worker=worker)  # type: ignore[arg-type]
    return replace(outcome, worker=worker)


def _unsendable(result: StageResult, why: str) -> StageResult:
    return StageResult(result.task_id, result.token, result.stage, ok=False, error_kind="too_large",
                       error=f"its result could not be sent: {why}", worker=result.worker)
