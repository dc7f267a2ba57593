"""The supervisor's children -- the two stage pools and the task actors -- supervised (``pegasus.supervision``).

Every ``ChildActorExited`` comes here, whatever the child.  What a death means
is declared per kind (``SPECS``) and decided by the pure core; this carrier
pays its cost:

- a task actor (temporary): its runs restart from their checkpoints, placed anew;
- a pool (permanent): started again with the same configuration, at once, then
  with a doubling pause.  Every task actor is told its address
  (``PoolReplaced``) and sends again each request it sent the dead pool and had
  no answer to; so does the supervisor for its verification gates and post-task
  reflections.  A request sent again keeps its token: a model stage simply runs
  again; an effectful tool step asks the journal first (StepStarting), and one
  that started on the dead pool is refused and ends ``unknown``, never run twice.
  More than ``intensity`` pool deaths within ``period_s`` and the supervisor
  gives up: it tells the guardian why and ends, and the guardian starts a new
  one (which restores every task from the store).

A pool whose process is stopped (SIGSTOP, a debugger) is not dead and nothing
reports it; every ``POOL_CHECK_S`` the supervisor reads its /proc state, and
one seen stopped on two looks in a row is killed -- only when /proc shows it is
this process's own child -- and so replaced as above.  Stats never wait for a
pool more than ``STATS_WAIT_S``: one that has not answered is shown unresponsive.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, ChildActorExited

from actors import messages as m
from actors.runtime import procs
from actors.pool import StagePool
from pegasus.supervision import (
    Alarm, ChildSpec, Dropped, Escalate, Exited, Removed, Restart, StartAgain, Started, Supervision,
    SupervisionCommand,
)

SPECS = {
    "pool": ChildSpec(Restart.PERMANENT, intensity=5, period_s=60.0, first_s=0.0, then_s=0.5, max_s=5.0,
                      stable_s=30.0),
    "task_actor": ChildSpec(Restart.TEMPORARY),
}
POOL_CHECK_S = 2.5  # how often the pools' processes are looked at (two stopped looks: killed)
STATS_WAIT_S = 2.0  # stats answer without a pool that has not answered by then
STOPPED_STATES = frozenset({"T", "t"})
GIVE_UP_S = 5.0  # a supervisor giving up that has not ended by then ends itself
TROUBLE_EVERY_S = 1.0  # at most one handler error a second is told to the guardian


class Children:
    """The supervisor's handlers for its children (see the module docstring); a mixin of Supervisor."""

    settings: Any
    admission: Any
    pools: dict[str, Any]
    task_actors: Any
    pending_stats: dict[int, tuple[Any, str, dict[str, Any]]]
    log: Any
    send: Callable[[Any, Any], None]
    wakeupAfter: Callable[..., None]  # noqa: N815 - Thespian's name
    createActor: Callable[..., Any]  # noqa: N815 - Thespian's name
    myAddress: Any  # noqa: N815 - Thespian's name
    _carry_out: Callable[[list[Any]], None]
    _answer_suspends: Callable[[str], None]
    _answer_stats: Callable[[int], None]

    def _init_children(self) -> None:
        self.supervision = Supervision(SPECS)
        self.pool_pids: dict[str, int] = {}
        self.pool_stopped: dict[str, int] = {}  # pool -> stopped looks in a row
        self.pool_configs: dict[str, Any] = {}
        self.pool_requests: dict[tuple[str, str], tuple[str, m.StageRequest]] = {}  # (task, stage) -> the pool's
        self.parent: Any = None  # the guardian (it sent Configure)
        self.told_trouble_at = 0.0
        self.giving_up = False

    # -- starting --------------------------------------------------------------------------------
    def _start_pool(self, name: str, config: m.PoolConfig) -> Any:
        address = self.createActor(StagePool)
        self.send(address, config)
        self.pool_configs[name], self.pools[name] = config, address
        self.pool_stopped[name] = 0
        self.pool_pids.pop(name, None)
        self.supervision.step(Started(name, "pool", time.monotonic()))
        if len(self.pool_configs) == 1:
            self.wakeupAfter(timedelta(seconds=POOL_CHECK_S), payload=m.PoolsCheck())
        return address

    def task_actor_started(self, address: Any) -> Any:
        self.supervision.step(Started(_actor_name(address), "task_actor", time.monotonic()))
        return address

    def _to_pool(self, name: str, request: m.StageRequest) -> None:
        """The supervisor's own stage requests (gates, reflections): kept until answered, sent again to a new pool."""
        self.pool_requests[(request.task_id, request.stage)] = (name, request)
        self.send(self.pools[name], request)

    def _answered_by_pool(self, task_id: str, stage: str, token: int | None = None) -> None:
        held = self.pool_requests.get((task_id, stage))
        if held is not None and (token is None or held[1].token == token):
            del self.pool_requests[(task_id, stage)]

    def receiveMsg_PoolReady(self, ready: m.PoolReady, sender: Any) -> None:
        if self.pools.get(ready.name) == sender:
            self.pool_pids[ready.name] = ready.pid

    # -- deaths ----------------------------------------------------------------------------------
    def receiveMsg_ChildActorExited(self, exited: ChildActorExited, sender: Any) -> None:
        address = exited.childAddress
        name = next((pool for pool, known in self.pools.items() if known == address), None)
        if name is not None:
            self.pool_pids.pop(name, None)
            self.log.warning("pool_died", pool=name)
            self._supervise(self.supervision.step(Exited(name, time.monotonic(), f"the {name} pool died")))
            return
        lost = self.task_actors.exited(address)
        if lost is None:
            self.supervision.step(Removed(_actor_name(address)))
            return  # not a child of ours any more (a task actor retired, a pool replaced)
        self._supervise(self.supervision.step(Exited(_actor_name(address), time.monotonic(),
                                                     "the task actor exited unexpectedly")))
        if self.admission is None:
            return
        for task_id, run in lost:  # each restarted from its checkpoint, placed anew
            self.log.warning("task_actor_lost", task_id=task_id, run=run)
            self._carry_out(self.admission.on_run_lost(task_id, run, "the task actor exited unexpectedly"))
            self._answer_suspends(task_id)

    def _supervise(self, commands: list[SupervisionCommand]) -> None:
        for command in commands:
            if isinstance(command, StartAgain) and command.kind == "pool":
                if command.delay_s <= 0:
                    self._replace_pool(command.child)
                else:
                    self.log.warning("pool_restart_delayed", pool=command.child, restart_in_s=command.delay_s,
                                     deaths=command.deaths)
                    self.wakeupAfter(timedelta(seconds=command.delay_s), payload=m.PoolDue(command.child))
            elif isinstance(command, Alarm):
                self.log.error("child_crash_loop", child=command.child, kind=command.kind, deaths=command.deaths,
                               period_s=command.period_s, reason=command.reason)
            elif isinstance(command, Escalate):
                self._give_up(f"the {command.child} pool died {command.deaths} times within "
                              f"{command.period_s:g}s (last: {command.reason})")
            elif isinstance(command, Dropped) and command.kind != "task_actor":
                self.log.warning("child_dropped", child=command.child, kind=command.kind, reason=command.reason)

    def _replace_pool(self, name: str) -> None:
        config = self.pool_configs.get(name)
        if config is None or self.giving_up:
            return
        dead = self.pools[name]
        address = self._start_pool(name, config)
        resent = [request for pool, request in self.pool_requests.values() if pool == name]
        for request in resent:
            self.send(address, request)
        for host in self.task_actors.addresses():
            self.send(host, m.PoolReplaced(name, address, dead))
        self.log.warning("pool_restarted", pool=name, requests_sent_again=len(resent))

    def _give_up(self, reason: str) -> None:
        """Escalate: the guardian is told why, and starts a new supervisor once this one has ended.

        Ended for sure: should Thespian's orderly exit wait for a child that never answers (one
        killed before it had connected, say), the process ends itself after ``GIVE_UP_S``; its
        children die with it and the store needs no closing (each commit is whole)."""
        self.giving_up = True
        self.log.error("supervisor_giving_up", reason=reason)
        if self.parent is not None:
            self.send(self.parent, m.ChildTrouble(reason))
        self.send(self.myAddress, ActorExitRequest())
        ender = threading.Timer(GIVE_UP_S, os._exit, (70,))
        ender.daemon = True
        ender.start()

    def _tell_trouble(self, error: str) -> None:
        """A handler's error, told to the guardian (at most one a second): it names it if this process dies."""
        now = time.monotonic()
        if self.parent is not None and now - self.told_trouble_at >= TROUBLE_EVERY_S:
            self.told_trouble_at = now
            self.send(self.parent, m.ChildTrouble(error))

    # -- timers: a pool due again, stopped pools, stats that cannot wait ----------------------------
    def _pool_due(self, due: m.PoolDue) -> None:
        view = self.supervision.view(time.monotonic()).get(due.name)
        if view is not None and view["status"] == "restarting":
            self._replace_pool(due.name)

    def _check_pools(self) -> None:
        for name, pid in list(self.pool_pids.items()):
            stat = procs.read_stat(pid)
            stopped = stat is not None and stat.state in STOPPED_STATES
            self.pool_stopped[name] = self.pool_stopped.get(name, 0) + 1 if stopped else 0
            if self.pool_stopped[name] >= 2 and _kill_child(pid):
                self.log.error("pool_stopped_killed", pool=name, pid=pid)  # its ChildActorExited replaces it
                self.pool_stopped[name] = 0
        self.wakeupAfter(timedelta(seconds=POOL_CHECK_S), payload=m.PoolsCheck())

    def _stats_due(self, due: m.StatsDue) -> None:
        if due.ask_id in self.pending_stats:
            self._answer_stats(due.ask_id)

    def pools_view(self, parts: dict[str, Any]) -> dict[str, Any]:
        """Each pool's figures (those it sent), its supervision, and whether it answered in time."""
        supervised = self.supervision.view(time.monotonic())
        shown = {}
        for name in self.pools:
            answered = name in parts
            shown[name] = {**(parts.get(name) or {}), "responsive": answered, "pid": self.pool_pids.get(name),
                           "stopped": self.pool_stopped.get(name, 0) > 0,
                           "supervision": supervised.get(name)}
        return shown


def _actor_name(address: Any) -> str:
    return f"task-actor {address}"


def _kill_child(pid: int) -> bool:
    """SIGKILL ``pid`` only when /proc shows it is this process's own living child (never a reused pid)."""
    stat = procs.read_stat(pid)
    if pid == os.getpid() or stat is None or stat.ppid != os.getpid() or stat.is_zombie:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True

