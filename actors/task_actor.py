"""The task actor: a host of many tasks' runs (``pegasus.run.TaskRun``), each passivated between messages.

A virtual actor in the manner of Orleans: a task is always addressable (its
stage requests name this actor as the one to answer), but between two messages
its run is held as its ``RunSnapshot`` (a few KB), not as a process.  A message
for a task activates its run -- restored from the snapshot, ~20 us -- hands it
to the core, carries out the commands, and passivates it again.  The process's
one mailbox serialises every transition of every task it holds, so a task has
exactly one activation at a time.  How many task actors there are, and which
one a new run goes to, is ``pegasus.run.hosts``'s (the supervisor's) decision;
a run stays on its task actor until it stops.

A stage request goes to its pool at once; the reports (transitions, the stop) go
to the supervisor as one TaskReports when the handler ends, with this process's
CPU time (its load).  A run that stops (suspended, completed, failed) is
forgotten here; so is one the supervisor drops (canceled).  A run that cannot go
on (unreadable snapshot, a command that raised) is forgotten and reported
abandoned: the supervisor restarts it from its checkpoint, as when a task actor
dies.  Tokens: a new run starts past the highest token this process has issued,
so an answer to an earlier run's request is stale here too.

Reports are never held back for a later handler: with a slow stage, ``get``
would show a state one stage old.  (Holding them back at most 20 ms with a
``wakeupAfter`` timer was tried: two 1,500-task runs each left 2-4 tasks whose
later reports never reached the supervisor -- Thespian issue #26 describes sends
made from a wakeup handler stalling in the transmit queue.  Without the timer,
none.)  The next stage request goes before the reports and the log lines: a hop
does not wait for them (measured: ~1 ms of each hop on this machine for the reports).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher

from actors import messages as m
from actors.runtime import procs
from actors.mcp_host import MCP_HOST, McpHostActor
from pegasus import logs
from pegasus.config import Settings
from pegasus.run import (
    Abandon, AskRecall, Command, Log, RunSnapshot, SendStage, TaskRun, TaskStopped, TaskTransitioned, current,
    delta_of,
)
from pegasus.run import inputs as i
from pegasus.streaming import TextDelta
from pegasus.task.names import PoolName
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


class TaskActor(ActorTypeDispatcher):
    """Holds many tasks' runs, passivated; activates one per message.  See the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()
        self.supervisor: Any = None
        self.registry: ToolRegistry | None = None
        self.token = 0  # the highest token issued here: a run starts past it, so an earlier run's answers stay stale
        self.runs: dict[str, RunSnapshot] = {}  # task -> its run, passivated
        self.pools: dict[str, Any] = {}
        self.dead_pools: list[Any] = []  # replaced pools' addresses: a StartTask sent before may still name one
        self.asked: dict[str, tuple[str, m.StageRequest]] = {}  # task -> its unanswered stage request and its pool
        self.log = logs.get("task")
        # Commands -> sends.  Stage requests go first: the next stage waits for no report or log line.
        self._first: dict[type, Callable[[Any], None]] = {
            SendStage: self._send_stage, AskRecall: self._to_supervisor, TextDelta: self._to_supervisor}
        self._then: dict[type, Callable[[Any], None]] = {
            TaskTransitioned: self._report, TaskStopped: self._report, Log: self._log, Abandon: self._abandon}
        self._reports: list[TaskTransitioned | TaskStopped] = []
        self._abandoned: str | None = None
        self._active: TaskRun | None = None  # the run being activated: its log lines name it
        self._run_log: Any = None

    def receiveMessage(self, message: Any, sender: Any) -> None:
        # The boundary: a run's own failure is handled in _activate; nothing else raises into Thespian.
        try:
            super().receiveMessage(message, sender)
        except Exception:  # noqa: BLE001
            self.log.exception("task_actor_error")

    # -- messages -> inputs --------------------------------------------------------------------
    def receiveMsg_StartTask(self, start: m.StartTask, sender: Any) -> None:
        self._configure(start, sender)
        task_id = start.task_id or str(getattr(start.snapshot, "task_id", ""))
        self.runs.pop(task_id, None)  # an earlier run of the task held here is over: the supervisor started this one
        self.asked.pop(task_id, None)
        state = RunSnapshot(start.snapshot, start.run, start.settings.runtime.max_iterations, start.generation,
                            start.journal, self.token, inbox=start.inbox, recall_k=start.settings.memory.recall_k,
                            identity=start.identity)
        self._activate(task_id, state, i.Started(start.resume_event, dict(start.resume_payload or {})))

    def receiveMsg_StageResult(self, result: m.StageResult, sender: Any) -> None:
        held = self._current(result.task_id, result.token, "stale_result_dropped", stage=result.stage)
        if held is not None:
            self.asked.pop(result.task_id, None)
            self._activate(result.task_id, held, i.Answered(result))

    def receiveMsg_Recalled(self, answer: m.Recalled, sender: Any) -> None:
        held = self._current(answer.task_id, answer.token, "stale_recall_dropped")
        if held is not None:
            self._activate(answer.task_id, held, i.MemoriesRecalled(answer))

    def receiveMsg_TextDelta(self, delta: m.TextDelta, sender: Any) -> None:
        held = self.runs.get(delta.task_id)
        if held is not None:  # passed on without activating the run
            self._active = None
            self._carry_out(delta_of(held, delta))

    def receiveMsg_SuspendTask(self, request: m.SuspendTask, sender: Any) -> None:
        held = self.runs.get(request.task_id)
        if held is not None:  # else a run that is over (the request crossed its TaskStopped)
            self._activate(request.task_id, held, i.SuspendAsked(request.task_id, request.reason))

    def receiveMsg_MessageTask(self, request: m.MessageTask, sender: Any) -> None:
        held = self.runs.get(request.task_id)
        if held is not None and held.run == request.run:  # else over: the supervisor gives them to the next
            self._activate(request.task_id, held, i.MessagesSent(request.task_id, request.inbox))

    def receiveMsg_McpListing(self, listing: m.McpListing, sender: Any) -> None:
        _MCP_LISTINGS.views = dict(listing.views)

    def receiveMsg_DropTask(self, drop: m.DropTask, sender: Any) -> None:
        held = self.runs.get(drop.task_id)
        if held is not None and held.run == drop.run:
            self._forget(drop.task_id)

    def receiveMsg_PoolReplaced(self, replaced: m.PoolReplaced, sender: Any) -> None:
        """A pool died and was started again: what it was asked and never answered is asked of the new one,
        token and all (a model stage runs again; an effectful step asks the journal first: never twice)."""
        if sender != self.supervisor:
            return
        self.dead_pools = [*self.dead_pools[-7:], replaced.dead]
        self.pools[replaced.name] = replaced.address
        again = 0
        for task_id, (pool, request) in list(self.asked.items()):
            held = self.runs.get(task_id)
            if pool != replaced.name or held is None or not current(held, task_id, request.token):
                continue
            self.send(replaced.address, request)
            again += 1
        self.log.warning("pool_replaced", pool=replaced.name, requests_sent_again=again)

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self.runs.clear()
        self.asked.clear()

    # -- activation ----------------------------------------------------------------------------
    def _configure(self, start: m.StartTask, sender: Any) -> None:
        """The supervisor's pools and the tools' effect classes, from the StartTask in hand."""
        if self.supervisor is None:  # once per process: its runs all come from one system's settings
            logs.configure_from(start.settings)
            self.log = logs.get("task")
        # Memory steps run where the store is: the supervisor (actors/supervisor/memory.py).
        known, self.supervisor = self.pools, sender
        self.pools = {PoolName.LLM: start.llm_pool, PoolName.TOOL: start.tool_pool, PoolName.MEMORY: sender}
        for name in (PoolName.LLM, PoolName.TOOL):  # sent before a pool was replaced: it names the dead one
            if self.pools[name] in self.dead_pools and name in known:
                self.pools[name] = known[name]
        if self.registry is not None:
            return
        try:
            # Effect classes only: effect_of answers from the configuration and never
            # starts an MCP server in this process.
            self.registry = effect_registry(start.settings)
        except ToolError as exc:
            self.log.error("tool_registry_unavailable", error=str(exc))
        if any(server.scope == "machine" for server in start.settings.mcp.servers):
            # Annotation-derived effect classes: until the first listing arrives, the config's.
            self.send(self.createActor(McpHostActor, globalName=MCP_HOST), m.McpSubscribe(start.settings))

    def _current(self, task_id: str, token: int, stale: str, **fields: Any) -> RunSnapshot | None:
        """The run an answer is for, or None (logged) when it is for no run held here, or a stale one."""
        held = self.runs.get(task_id)
        if held is None or not current(held, task_id, token):
            self.log.info(stale, task_id=task_id, token=token, current=held.token if held is not None else None,
                          **fields)
            return None
        return held

    def _activate(self, task_id: str, held: RunSnapshot, event: i.RunInput) -> None:
        """One activation: the run restored, one input stepped, its commands carried out, the run
        passivated again -- or forgotten when it stopped or cannot go on."""
        effect_of = self.registry.effect_of if self.registry is not None else _unknown
        try:
            run = TaskRun(held, effect_of=effect_of, pid=os.getpid())
            self._active, self._run_log = run, None
            commands = run.step(event)
            self.token = max(self.token, run.token)
            abandon = self._carry_out(commands)
        except Exception as exc:  # noqa: BLE001 - a command that raised: this run cannot go on; the others can
            self.log.exception("task_actor_error", task_id=task_id)
            abandon, run = f"{type(exc).__name__}: {exc}", None
        if abandon is not None or run is None or run.stopped:
            self._forget(task_id)
            if abandon is not None and self.supervisor is not None:
                self.send(self.supervisor, m.TaskAbandoned(task_id, held.run, abandon))
        else:
            self.runs[task_id] = run.snapshot()

    def _carry_out(self, commands: list[Command]) -> str | None:
        """Each command to its send, the first table before the second; the reports go as one
        TaskReports.  Answers why the run is abandoned, if it is."""
        self._reports, self._abandoned = [], None
        for command in commands:
            if type(command) in self._first:
                self._first[type(command)](command)
        for command in commands:
            if type(command) in self._then:
                self._then[type(command)](command)
        if self._reports:
            first = self._reports[0]
            self.send(self.supervisor, m.TaskReports(first.task_id, first.run, tuple(self._reports),
                                                     time.process_time()))
        return self._abandoned

    def _forget(self, task_id: str) -> None:
        self.runs.pop(task_id, None)
        self.asked.pop(task_id, None)

    # -- commands ------------------------------------------------------------------------------
    def _send_stage(self, command: SendStage) -> None:
        """An effectful step goes with the supervisor's address: its worker journals it as
        started there before it runs the tool (only these steps pay that round trip)."""
        request = m.StageRequest(
            command.task_id, command.token, command.stage, command.machine, command.context, command.step_index,
            idempotency_key=command.idempotency_key, journal_to=self.supervisor if command.journal else None,
            run=command.run, tier=command.context.tier)
        self.asked[command.task_id] = (command.pool, request)  # sent again should its pool die unanswered
        self.send(self.pools[command.pool], request)

    def _to_supervisor(self, command: AskRecall | TextDelta) -> None:
        self.send(self.supervisor, command)  # recall: the store is the supervisor's (it answers Recalled)

    def _report(self, command: TaskTransitioned | TaskStopped) -> None:
        self._reports.append(command)

    def _log(self, command: Log) -> None:
        run = self._active
        if self._run_log is None and run is not None and run.unreadable is None:
            self._run_log = logs.get("task", task_id=run.task_id, machine=run.fsm.machine.name, run=run.run)
        log = self._run_log or self.log
        fields = command.fields if command.error is None else {**command.fields, "exc_info": command.error}
        getattr(log, command.level)(command.event, **fields)

    def _abandon(self, command: Abandon) -> None:
        self._abandoned = command.reason


def _unknown(tool: str) -> None:
    return None
