"""The task actor: a host of many tasks' runs, each kept as an object between messages (Orleans' virtual actors).

A thin carrier over ``pegasus.run.host.RunHost``, which keeps the held runs, their unanswered
requests and the pool addresses, and activates one run per message; this class turns messages
into its inputs and its commands into sends, and tells the core when a message was handled and a
batch of reports delivered (``pegasus.run.report_batch``).  Settings come once, in
``ConfigureTaskActor``.  A run's recall is answered here from the store's file, read-only
(``pegasus.memory.recall``), when it can be.  Which task actor a run goes to is ``pegasus.run.hosts``'s.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, PoisonMessage, WakeupMessage

from actors import messages as m
from actors.home_pools import HOME_MESSAGES, HomePoolsHost
from actors.mcp_host import MCP_HOST, McpHostActor
from actors.runtime import procs
from actors.wire.frames import refused_why
from actors.wire.leaving import send_with_callback, take_arrived_acks
from actors.wire.read_ahead import read_ahead
from pegasus import logs
from pegasus.config import Settings
from pegasus.memory.recall import LocalRecall
from pegasus.run import Answered, MemoriesRecalled, Started, Streamed, SuspendAsked
from pegasus.run import host as h
from pegasus.run.core import EffectOf
from pegasus.run.reflections import limit_for
from pegasus.tools.mcp_provider import RemoteSource
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import ToolError, ToolRegistry

_EFFECT_REGISTRIES: dict[str, ToolRegistry] = {}
# Machine-scope MCP servers' listings (their tools' effect classes), pushed by the admin's MCP host.
_MCP_LISTINGS = RemoteSource()


def effect_registry(settings: Settings) -> ToolRegistry:
    """The tools of ``settings``, for their effect classes only (a task actor never runs a tool).

    Built once per process and tools configuration.  The supervisor builds it
    before it forks task actors, so each inherits it (plugins imported, models
    built) instead of paying for it per task (measured: ~6% of a task actor's CPU).
    """
    key = settings.tools.model_dump_json() + settings.mcp.model_dump_json()
    if key not in _EFFECT_REGISTRIES:
        _EFFECT_REGISTRIES[key] = registry_for(settings, _MCP_LISTINGS)
    return _EFFECT_REGISTRIES[key]


class TaskActor(HomePoolsHost):
    """A thin carrier over ``pegasus.run.host.RunHost``: each message one input, each command one send;
    the home host of the pools when told a ``PoolConfig`` (actors/home_pools.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()
        self.host = h.RunHost(pid=os.getpid(), report_hold_s=h.REPORT_HOLD_S)
        self.registry: ToolRegistry | None = None
        self.settings: Settings | None = None  # from ConfigureTaskActor
        self.effect_of: EffectOf = _unknown
        self.recall: LocalRecall | None = None  # from ConfigureTaskActor's settings
        self.log = logs.get("task")
        self._home_init()
        self._inputs: deque[h.HostInput] = deque()  # inputs met while stepping (a delivery said during a send)
        self._stepping = False
        self._run_log: tuple[tuple[str, str, int] | None, Any] = (None, self.log)
        self._do: dict[type, Callable[[Any], None]] = {
            h.AskPool: self._ask_pool, h.Tell: self._tell, h.Report: self._report, h.Abandoned: self._abandoned,
            h.LogLine: self._log_line, h.WakeAfter: self._wake_after}

    def receiveMessage(self, message: Any, sender: Any) -> None:
        # The boundary: a run's own failure is the core's; nothing else raises into Thespian.
        try:
            if not self.home_message(message, sender):
                super().receiveMessage(message, sender)
        except Exception:
            self.log.exception("task_actor_error")
        self._step(h.Handled(self._more_read(), time.monotonic()))

    def _step(self, event: h.HostInput) -> None:
        """Step the core and carry its commands out; an input met meanwhile (a delivery said during a send,
        a recall answered here) waits for its turn, as if it had come in a message of its own."""
        self._inputs.append(event)
        if self._stepping:
            return
        self._stepping = True
        try:
            while self._inputs:
                self._carry(self._inputs.popleft())
        finally:
            self._stepping = False

    def _carry(self, event: h.HostInput) -> None:
        try:
            for command in self.host.step(event):
                self._do[type(command)](command)
        except Exception as exc:
            self.log.exception("task_actor_error")
            for command in self.host.step(h.CarryingFailed(f"{type(exc).__name__}: {exc}")):
                self._do[type(command)](command)

    def _more_read(self) -> bool:
        """Whether a message this actor handles is already read and waits (Thespian's queue): its
        handling ends with ``Handled`` too, so what is held then goes at the latest."""
        return any(type(message) in _HANDLED for message in read_ahead(self))

    # -- messages -> inputs --------------------------------------------------------------------
    def receiveMsg_ConfigureTaskActor(self, configure: m.ConfigureTaskActor, sender: Any) -> None:
        if self.settings is None:
            self.settings = configure.settings
            self.effect_of = self._set_up(configure.settings)

    def receiveMsg_StartTask(self, start: m.StartTask, sender: Any) -> None:
        task_id = start.task_id or str(getattr(start.snapshot, "task_id", ""))
        settings = self.settings
        if settings is None:  # the supervisor configures a task actor before its first run: never here
            self.log.error("task_actor_not_configured", task_id=task_id)
        snapshot = start.snapshot if settings is not None else None  # None: a run that cannot start, let go
        self._step(h.Start(task_id, snapshot, start.run, settings.runtime.max_iterations if settings else 0,
                           Started(start.resume_event, dict(start.resume_payload or {})), sender, start.llm_pool,
                           start.tool_pool, self.effect_of, start.generation, start.journal, start.inbox,
                           settings.memory.recall_k if settings else 0, start.identity,
                           limit_for(settings) if settings else 0, start.awaited))

    def receiveMsg_StartTasks(self, starts: m.StartTasks, sender: Any) -> None:
        for start in starts.starts:  # the supervisor's StartTasks of one commit, in order
            self.receiveMsg_StartTask(start, sender)

    def receiveMsg_StageResult(self, result: m.StageResult, sender: Any) -> None:
        self._step(Answered(result))

    def answer_here(self, result: m.StageResult) -> None:
        self._step(Answered(result))  # from a pool here: as if it had come in a message

    def receiveMsg_Recalled(self, answer: m.Recalled, sender: Any) -> None:
        self._step(MemoriesRecalled(answer))

    def receiveMsg_TextDelta(self, delta: m.TextDelta, sender: Any) -> None:
        self._step(Streamed(delta))

    def receiveMsg_SuspendTask(self, request: m.SuspendTask, sender: Any) -> None:
        self._step(SuspendAsked(request.task_id, request.reason))

    def receiveMsg_MessageTask(self, request: m.MessageTask, sender: Any) -> None:
        self._step(h.Messages(request.task_id, request.run, request.inbox))

    def receiveMsg_DropTask(self, drop: m.DropTask, sender: Any) -> None:
        self._step(h.Drop(drop.task_id, drop.run))

    def receiveMsg_PoolReplaced(self, replaced: m.PoolReplaced, sender: Any) -> None:
        self._step(h.PoolReplaced(replaced.name, replaced.address, replaced.dead, sender))

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        if isinstance(wakeup.payload, h.ReportsDue):  # (the pools' own timers are home_message's)
            self._step(wakeup.payload)

    def receiveMsg_PoisonMessage(self, poison: PoisonMessage, sender: Any) -> None:
        request, why = poison.poisonMessage, refused_why(poison)  # (a TaskReports refused: its send's callback)
        if isinstance(request, m.StageRequest) and why is not None:
            self._step(h.Unsent((), f"its {request.stage} request could not be sent: {why}",
                                ((request.task_id, request.run),)))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self._step(h.Closing())
        self.home_closing()
        if self.recall is not None:
            self.recall.close()

    def receiveMsg_McpListing(self, listing: m.McpListing, sender: Any) -> None:
        _MCP_LISTINGS.views = dict(listing.views)

    def _set_up(self, settings: Settings) -> EffectOf:
        """Once per process (its runs all come from one system's settings): logging, and the tools'
        effect classes (never a tool: effect_of answers from the configuration)."""
        logs.configure_from(settings)
        self.log = logs.get("task")
        self.host.debug = settings.logging.level == "debug"  # else the runs make no debug line
        self.host.frames(settings.system.max_frame_bytes)  # a larger batch of reports would be refused unsent
        if self.recall is None:
            self.recall = LocalRecall(settings)
        if self.registry is None:
            try:
                self.registry = effect_registry(settings)
            except ToolError as exc:
                self.log.error("tool_registry_unavailable", error=str(exc))
            if any(server.scope == "machine" for server in settings.mcp.servers):
                # Annotation-derived effect classes: until the first listing arrives, the config's.
                self.send(self.createActor(McpHostActor, globalName=MCP_HOST), m.McpSubscribe(settings))
        return self.registry.effect_of if self.registry is not None else _unknown

    # -- commands -> sends -----------------------------------------------------------------------
    def _ask_pool(self, command: h.AskPool) -> None:
        stage = command.stage
        request = m.StageRequest(
            stage.task_id, stage.token, stage.stage, stage.machine, stage.context, stage.step_index,
            idempotency_key=stage.idempotency_key, journal_to=command.journal_to, run=stage.run,
            tier=stage.tier, priority=stage.priority, pool=stage.pool)
        if self.home_ask(request):  # its pool runs here: no message
            return
        take_arrived_acks(self, command.to)  # the request before it acknowledged, unread: this one goes at once
        self.send(command.to, request)

    def _tell(self, command: h.Tell) -> None:
        ask = command.what
        if isinstance(ask, m.AskRecall) and self.recall is not None:
            answer = self.recall.answer(ask.query, ask.k)
            if answer is not None:
                self._step(MemoriesRecalled(m.Recalled(ask.task_id, ask.token, *answer)))
                return
        self.send(command.to, ask)

    def _report(self, command: h.Report) -> None:
        """Sent with a callback for its delivery: the core's ``Delivered`` (at once where there is no transport)."""
        reports = m.TaskReports(command.reports, time.process_time(), command.waited)
        send_with_callback(self, command.to, reports, self._delivered,
                           refused=lambda why: self._step(h.Unsent(command.reports,
                                                                   f"its reports could not be sent: {why}")))

    def _wake_after(self, command: h.WakeAfter) -> None:
        self.wakeupAfter(timedelta(seconds=command.seconds), payload=h.ReportsDue())

    def _delivered(self) -> None:
        self._step(h.Delivered(self._more_read(), time.monotonic()))

    def _abandoned(self, command: h.Abandoned) -> None:
        self.send(command.to, m.TaskAbandoned(command.task_id, command.run, command.reason))

    def _log_line(self, command: h.LogLine) -> None:
        who, log = self._run_log
        if command.run is None:
            log = self.log
        elif command.run != who:
            log = logs.get("task", task_id=command.run[0], machine=command.run[1], run=command.run[2])
            self._run_log = (command.run, log)
        line = command.line
        fields = line.fields if line.error is None else {**line.fields, "exc_info": line.error}
        logs.emit(log, line.level, line.event, **fields)


def _unknown(tool: str) -> None:
    return None


# What reaches receiveMessage (and so ends with Handled): a queued one of these holds the reports.
_HANDLED = frozenset({m.StartTask, m.StartTasks, m.StageResult, m.Recalled, m.TextDelta, m.SuspendTask, m.MessageTask,
                      m.DropTask, m.PoolReplaced, m.ConfigureTaskActor, m.McpListing, ActorExitRequest,
                      *HOME_MESSAGES})
