"""Stage pools on Thespian: a thin carrier over ``pegasus.pool.core.PoolCore``.

Each message becomes one input of the core and its commands are carried out in order: sends,
worker creation (placed by Thespian's capability check), wakeups, member notifications, and what
only a process can do: read a worker's /proc state, SIGKILL a worker that is its own child.  Every
decision is the core's (docs/architecture.md, "The pool").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from thespian.actors import (
    ActorExitRequest, ActorSystemConventionUpdate, ActorTypeDispatcher, ChildActorExited, WakeupMessage,
)

from actors.runtime import procs, sharing, titles
from actors.messages import (
    CancelTask, PoolConfig, PoolReady, PoolStats, PoolStatsRequest, StageRequest, StageResult, StopStage, Work, WorkDone,
    WorkerInit, WorkerPing, WorkerPong, WorkerReady,
)
from actors.runtime.system import member_name
from actors.worker import StageWorker
from pegasus import logs
from pegasus.pool import commands as c
from pegasus.pool import inputs as i
from pegasus.pool.core import PoolCore


class StagePool(ActorTypeDispatcher):
    """One pool (``llm`` or ``tool``).  Configure it with a PoolConfig first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        sharing.after_fork()
        procs.die_with_parent()
        self.core = PoolCore()
        self.log = logs.get("pool")
        self._do: dict[type, Callable[[Any], None]] = {
            c.Dispatch: self._dispatch, c.Forward: self._forward, c.Fail: self._fail, c.StartWorker: self._start,
            c.EndWorker: self._end, c.Arm: self._arm, c.Inspect: self._inspect, c.Watch: self._watch,
            c.SendStats: self._send_stats, c.Log: self._log, c.SetUp: self._set_up, c.Stop: self._stop,
            c.Ping: self._ping,
        }

    def _step(self, event: i.PoolInput) -> None:
        for command in self.core.step(event):
            self._do[type(command)](command)

    # -- messages -> inputs --------------------------------------------------------------------
    def receiveMsg_PoolConfig(self, config: PoolConfig, sender: Any) -> None:
        system = config.settings.system
        titles.set_title(f"{config.name} pool")
        self._step(i.Configured(config, member_name(system.advertise, system.bind, system.admin_port)))
        self.send(sender, PoolReady(config.name, os.getpid()))  # the supervisor watches this process

    def receiveMsg_StageRequest(self, request: StageRequest, sender: Any) -> None:
        self._step(i.Requested(request, sender))

    def receiveMsg_WorkDone(self, done: WorkDone, sender: Any) -> None:
        self._step(i.Finished(done.job, done.result, done.worker))

    def receiveMsg_WorkerReady(self, ready: WorkerReady, sender: Any) -> None:
        self._step(i.Reported(ready.index, ready.pid, ready.host, sender))

    def receiveMsg_WorkerPong(self, pong: WorkerPong, sender: Any) -> None:
        self._step(i.Pong(sender, pong.sent_at))

    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        # For a worker on a member, the member's admin (its surrogate parent) forwards this.
        self._step(i.Exited(exited.childAddress))

    def receiveMsg_ActorSystemConventionUpdate(self, update: ActorSystemConventionUpdate, sender: Any) -> None:
        self._step(i.MemberChanged(update.remoteAdded, update.remoteAdminAddress, update.remoteCapabilities))

    def receiveMsg_CancelTask(self, cancel: CancelTask, sender: Any) -> None:
        self._step(i.Canceled(cancel.task_id))

    def receiveMsg_PoolStatsRequest(self, ask: PoolStatsRequest, sender: Any) -> None:
        self._step(i.StatsAsked(ask.ask_id, sender))

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        self._step(wakeup.payload)  # a timer the core armed, handed back as it was

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        self._step(i.Closing())

    # -- commands ------------------------------------------------------------------------------
    def _dispatch(self, command: c.Dispatch) -> None:
        self.send(command.worker, Work(command.job, command.request, command.requester,  # type: ignore[arg-type]
                                       command.timeout_s, command.known))

    def _forward(self, command: c.Forward) -> None:
        self.send(command.to, command.result)

    def _fail(self, command: c.Fail) -> None:
        request = command.request
        self.send(command.to, StageResult(task_id=request.task_id, token=request.token, stage=request.stage, ok=False,
                                          error=command.error, error_kind=command.kind,  # type: ignore[arg-type]
                                          worker=command.worker or {}))

    def _ping(self, command: c.Ping) -> None:
        self.send(command.worker, WorkerPing(command.sent_at))

    def _stop(self, command: c.Stop) -> None:
        self.send(command.worker, StopStage(command.job))

    def _start(self, command: c.StartWorker) -> None:
        address = self.createActor(StageWorker, targetActorRequirements=command.requirements)
        self.send(address, WorkerInit(command.pool, command.index, command.settings))
        self._step(i.Created(command.index, address))

    def _end(self, command: c.EndWorker) -> None:
        if command.kill_pid is not None and procs.kill_own_child(command.kill_pid) and command.shutdown:
            # Told at once rather than at its SIGCHLD: the exit shutdown waits for comes sooner.
            # (A killed child is announced either way: Thespian patch child_exits.)
            self.send(self.myAddress, ChildActorExited(command.address))
            return
        self.send(command.address, ActorExitRequest())

    def _arm(self, command: c.Arm) -> None:
        self.wakeupAfter(timedelta(seconds=command.delay_s), payload=command.timer)

    def _inspect(self, command: c.Inspect) -> None:
        stats = {pid: procs.read_stat(pid) for pid in command.pids}
        self._step(i.Looked({pid: stat.state if stat is not None else None for pid, stat in stats.items()}))

    def _watch(self, command: c.Watch) -> None:
        self.notifyOnSystemRegistrationChanges(command.on)

    def _send_stats(self, command: c.SendStats) -> None:
        self.send(command.to, PoolStats(command.ask_id, **command.figures))

    def _log(self, command: c.Log) -> None:
        logs.emit(self.log, command.level, command.event, **command.fields)

    def _set_up(self, command: c.SetUp) -> None:
        logs.configure_from(command.settings)
        self.log = logs.get("pool", pool=command.pool)
        sharing.before_forking(command.settings, command.pool)  # its workers are forked next
