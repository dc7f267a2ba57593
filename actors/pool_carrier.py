"""A pool core's commands carried out on Thespian, for whichever actor runs the core.

A pool process (actors/pool.py) runs one ``PoolCore``; a home host (actors/home_pools.py) runs one per pool
inside a task actor.  Both turn messages into the core's inputs the same way (``pool_input``) and carry its
commands out here: sends, worker creation (placed by Thespian's capability check), wakeups, member
notifications, and what only a process can do: read a worker's /proc state, SIGKILL its own child.  An
answer for ``HERE`` (a run in the same process) is handed to ``here`` instead of sent.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from thespian.actors import (
    ActorExitRequest, ActorSystemConventionUpdate, ActorTypeDispatcher, ChildActorExited, PoisonMessage,
    WakeupMessage,
)

from actors.messages import (
    CancelTask, HeldGo, HeldStart, PoolStats, PoolStatsRequest, StageRequest, StageResult, StopStage, Work, WorkDone,
    WorkerInit, WorkerPing, WorkerPong, WorkerReady,
)
from actors.runtime import procs, sharing
from actors.wire.frames import refused_why
from actors.worker import StageWorker
from pegasus import logs
from pegasus.pool import commands as c
from pegasus.pool import inputs as i
from pegasus.pool.home import HERE

# Message -> the pool core's input (a timer comes back as it was armed).
POOL_INPUTS: dict[type, Callable[[Any, Any], Any]] = {
    StageRequest: lambda request, sender: i.Requested(request, sender),
    WorkDone: lambda done, sender: i.Finished(done.job, done.result, done.worker),
    WorkerReady: lambda ready, sender: i.Reported(ready.index, ready.pid, ready.host, sender),
    WorkerPong: lambda pong, sender: i.Pong(sender, pong.sent_at),
    HeldStart: lambda ask, sender: i.HeldAsked(ask.job, sender),
    # For a worker on a member, the member's admin (its surrogate parent) forwards this.
    ChildActorExited: lambda exited, sender: i.Exited(exited.childAddress),
    ActorSystemConventionUpdate: lambda update, sender: i.MemberChanged(
        update.remoteAdded, update.remoteAdminAddress, update.remoteCapabilities),
    CancelTask: lambda cancel, sender: i.Canceled(cancel.task_id),
    PoolStatsRequest: lambda ask, sender: i.StatsAsked(ask.ask_id, sender),
    WakeupMessage: lambda wakeup, sender: wakeup.payload,
    ActorExitRequest: lambda request, sender: i.Closing(),
}


def refused_work(poison: PoisonMessage) -> i.Finished | None:
    """A ``Work`` Thespian refused to send, being larger than a frame: its job ends, failed and saying so (else its
    deadline would end it as a hung worker's); None for any other poison."""
    work, why = poison.poisonMessage, refused_why(poison)
    if not isinstance(work, Work) or why is None:
        return None
    request = work.request
    return i.Finished(work.job, StageResult(request.task_id, request.token, request.stage, ok=False,
                                            error=f"its {request.stage} request could not be sent: {why}",
                                            error_kind="too_large"))


class PoolCarrier:
    """Carries out one pool core's commands for ``actor``; ``step`` hands an input back to that core,
    ``here`` takes an answer for ``HERE``, ``timer`` wraps a timer before it is armed."""

    def __init__(self, actor: ActorTypeDispatcher, step: Callable[[Any], None], *,
                 here: Callable[[StageResult], None] | None = None, timer: Callable[[Any], Any] = lambda t: t) -> None:
        self.actor, self.step, self.here, self.timer = actor, step, here, timer
        self.log = logs.get("pool")
        self._do: dict[type, Callable[[Any], None]] = {
            c.Dispatch: self._dispatch, c.Forward: self._forward, c.Fail: self._fail, c.StartWorker: self._start,
            c.EndWorker: self._end, c.Arm: self._arm, c.Inspect: self._inspect, c.Watch: self._watch,
            c.SendStats: self._send_stats, c.Log: self._log, c.SetUp: self._set_up, c.Stop: self._stop,
            c.Ping: self._ping, c.AnswerHeld: self._answer_held,
        }

    def do(self, command: c.PoolCommand) -> None:
        self._do[type(command)](command)

    def _dispatch(self, command: c.Dispatch) -> None:
        requester = self.actor.myAddress if command.requester is HERE else command.requester
        self.actor.send(command.worker, Work(command.job, command.request, requester,  # type: ignore[arg-type]
                                             command.timeout_s, command.known, command.through_pool, command.held,
                                             command.move_after_s))

    def _answer_held(self, command: c.AnswerHeld) -> None:
        self.actor.send(command.worker, HeldGo(command.job, command.go))

    def _answer(self, to: Any, result: StageResult) -> None:
        if to is HERE and self.here is not None:
            self.here(result)
        else:
            self.actor.send(to, result)

    def _forward(self, command: c.Forward) -> None:
        self._answer(command.to, command.result)

    def _fail(self, command: c.Fail) -> None:
        request = command.request
        self._answer(command.to, StageResult(task_id=request.task_id, token=request.token, stage=request.stage,
                                             ok=False, error=command.error, error_kind=command.kind,  # type: ignore[arg-type]
                                             worker=command.worker or {}))

    def _ping(self, command: c.Ping) -> None:
        self.actor.send(command.worker, WorkerPing(command.sent_at))

    def _stop(self, command: c.Stop) -> None:
        self.actor.send(command.worker, StopStage(command.job))

    def _start(self, command: c.StartWorker) -> None:
        address = self.actor.createActor(StageWorker, targetActorRequirements=command.requirements)
        self.actor.send(address, WorkerInit(command.pool, command.index, command.settings))
        self.step(i.Created(command.index, address))

    def _end(self, command: c.EndWorker) -> None:
        if command.kill_pid is not None and procs.kill_own_child(command.kill_pid) and command.shutdown:
            # Told at once rather than at its SIGCHLD: the exit shutdown waits for comes sooner.
            # (A killed child is announced either way: Thespian patch child_exits.)
            self.actor.send(self.actor.myAddress, ChildActorExited(command.address))
            return
        self.actor.send(command.address, ActorExitRequest())

    def _arm(self, command: c.Arm) -> None:
        self.actor.wakeupAfter(timedelta(seconds=command.delay_s), payload=self.timer(command.timer))

    def _inspect(self, command: c.Inspect) -> None:
        stats = {pid: procs.read_stat(pid) for pid in command.pids}
        self.step(i.Looked({pid: stat.state if stat is not None else None for pid, stat in stats.items()}))

    def _watch(self, command: c.Watch) -> None:
        self.actor.notifyOnSystemRegistrationChanges(command.on)

    def _send_stats(self, command: c.SendStats) -> None:
        self.actor.send(command.to, PoolStats(command.ask_id, **command.figures))

    def _log(self, command: c.Log) -> None:
        logs.emit(self.log, command.level, command.event, **command.fields)

    def _set_up(self, command: c.SetUp) -> None:
        logs.configure_from(command.settings)
        self.log = logs.get("pool", pool=command.pool)
        sharing.before_forking(command.settings, command.pool)  # its workers are forked next
