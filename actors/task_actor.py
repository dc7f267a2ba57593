"""The task actor: the carrier of one task's run (``pegasus.run.TaskRun``) at a time.

Its mailbox serialises the task's transitions.  Each message becomes one call of
the core, and the core's commands become sends: a stage request goes to its pool
at once; the reports (transitions, the stop) go to the supervisor as one
TaskReports when the handler ends.  When the run stops (suspended, completed,
failed) the actor is free: the supervisor gives it the next run (any task's) or
retires it (passivation: a suspended task costs rows in the store, not a
process).  Reusing the process saves a fork, Thespian's start-up and exit
messages and new TCP connections to the supervisor, the pools and the workers:
measured ~23 ms of CPU per task of the 62 a task cost.  The actor carries nothing
from one run to the next but its request token, which only grows, so a late
answer to an earlier run's request is stale here too.

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
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher

from actors import messages as m
from actors import procs
from actors.mcp_host import MCP_HOST, McpHostActor
from pegasus import logs
from pegasus.config import Settings
from pegasus.run import Abandon, Command, Log, RunSnapshot, SendStage, TaskRun, TaskStopped, TaskTransitioned
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
    """Carries one task's run at a time; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()
        self.supervisor: Any = None
        self.registry: ToolRegistry | None = None
        self.token = 0  # never reset: a request of an earlier run stays stale
        self.task: TaskRun | None = None
        self.pools: dict[str, Any] = {}
        self.log = logs.get("task")

    def receiveMessage(self, message: Any, sender: Any) -> None:
        # The boundary: the core never raises; should carrying out its commands raise, the process
        # lets the run go (as when it cannot take one): the supervisor restarts it from its checkpoint.
        try:
            super().receiveMessage(message, sender)
        except Exception:  # noqa: BLE001
            self.log.exception("task_actor_error")
            self.send(self.myAddress, ActorExitRequest())

    def receiveMsg_StartTask(self, start: m.StartTask, sender: Any) -> None:
        if self.task is not None:
            return
        logs.configure_from(start.settings)
        self.supervisor, self.pools = sender, {PoolName.LLM: start.llm_pool, PoolName.TOOL: start.tool_pool}
        if self.registry is None:  # once per process: its runs all come from one system's settings
            try:
                # Effect classes only: effect_of answers from the configuration and never
                # starts an MCP server in this process.
                self.registry = effect_registry(start.settings)
            except ToolError as exc:
                self.log.error("tool_registry_unavailable", error=str(exc))
            if any(server.scope == "machine" for server in start.settings.mcp.servers):
                # Annotation-derived effect classes: until the first listing arrives, the config's.
                self.send(self.createActor(McpHostActor, globalName=MCP_HOST), m.McpSubscribe(start.settings))
        state = RunSnapshot(start.snapshot, start.run, start.settings.runtime.max_iterations, start.generation,
                            start.journal, self.token)
        effect_of = self.registry.effect_of if self.registry is not None else (lambda tool: None)
        self.task, commands = TaskRun.begin(state, resume_event=start.resume_event,
                                            resume_payload=start.resume_payload, effect_of=effect_of, pid=os.getpid())
        if self.task is not None:
            self.log = logs.get("task", task_id=self.task.task_id, machine=self.task.fsm.machine.name, run=start.run)
        self._carry_out(commands)

    def receiveMsg_McpListing(self, listing: m.McpListing, sender: Any) -> None:
        _MCP_LISTINGS.views = dict(listing.views)

    def receiveMsg_StageResult(self, result: m.StageResult, sender: Any) -> None:
        if self.task is None:
            self.log.info("stale_result_dropped", stage=result.stage, token=result.token, current=self.token)
        else:
            self._carry_out(self.task.on_result(result))

    def receiveMsg_TextDelta(self, delta: m.TextDelta, sender: Any) -> None:
        if self.task is not None:
            for forward in self.task.on_delta(delta):
                self.send(self.supervisor, forward)

    def receiveMsg_SuspendTask(self, request: m.SuspendTask, sender: Any) -> None:
        if self.task is not None:  # else a run that is over (the request crossed its TaskStopped)
            self._carry_out(self.task.suspend(request.task_id, request.reason))

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self.task = None

    # -- carrying out ------------------------------------------------------------------------
    def _carry_out(self, commands: list[Command]) -> None:
        for command in commands:  # stage requests first: the next stage waits for no log line
            if isinstance(command, SendStage):
                self._send_stage(command)
        reports: list[TaskTransitioned | TaskStopped] = []
        for command in commands:
            if isinstance(command, (TaskTransitioned, TaskStopped)):
                reports.append(command)
            elif isinstance(command, Log):
                fields = command.fields if command.error is None else {**command.fields, "exc_info": command.error}
                getattr(self.log, command.level)(command.event, **fields)
            elif isinstance(command, Abandon):
                self.send(self.myAddress, ActorExitRequest())
        if reports:
            self.send(self.supervisor, m.TaskReports(reports[0].task_id, reports[0].run, tuple(reports)))
        if self.task is not None and self.task.stopped:  # free for the next run
            self.token, self.task, self.log = self.task.token, None, logs.get("task")

    def _send_stage(self, command: SendStage) -> None:
        """An effectful step goes with the supervisor's address: its worker journals it as
        started there before it runs the tool (only these steps pay that round trip)."""
        self.send(self.pools[command.pool], m.StageRequest(
            command.task_id, command.token, command.stage, command.machine, command.context, command.step_index,
            idempotency_key=command.idempotency_key, journal_to=self.supervisor if command.journal else None,
            run=command.run))
