"""The supervisor's children -- the two stage pools and the task actors -- supervised (``pegasus.supervision``).

Every ``ChildActorExited`` comes here; what a death means is declared per kind (``context.SPECS``)
and decided by the pure core, and this module pays its cost: a task actor's runs restart from their
checkpoints; a dead pool is started again and what it had not answered is sent again, token and all
(an effectful step asks the journal first); past the intensity the supervisor ends and the guardian
starts a new one.  A pool seen stopped while work is in flight is killed (``pegasus.pool.looks``),
only when /proc shows it is our own child (docs/architecture.md, "Supervision").
"""

from __future__ import annotations

import os
import threading
import time

from thespian.actors import ActorAddress, ChildActorExited

from actors import messages as m
from actors.runtime import procs
from actors.pool import StagePool
from actors.supervisor import memory
from actors.supervisor.commands import admit
from actors.supervisor.context import Context
from actors.supervisor.views import answer_suspends
from pegasus import logs
from pegasus.admission.inputs import RunLost
from pegasus.pool.core import STOPPED_STATES
from pegasus.pool.looks import EndPool, Look, PoolStarted
from pegasus.supervision import (
    Alarm, Dropped, Escalate, Exited, Removed, StartAgain, Started, SupervisionCommand,
)

GIVE_UP_S = 5.0  # a supervisor giving up that has not ended by then ends itself
TROUBLE_EVERY_S = 1.0  # at most one handler error a second is told to the guardian


# -- starting --------------------------------------------------------------------------------------
def start_pool(ctx: Context, name: str, config: m.PoolConfig) -> ActorAddress:
    """Pool ``name`` started: in the home host (a task actor, made now if there is none) by default, else in a
    process of its own (``[pools] home_host = false``)."""
    pools = ctx.pools
    address = ctx.task_actors.home() if config.settings.pools.home_host else ctx.create(StagePool)
    ctx.send(address, config)
    pools.config[name], pools.address[name] = config, address
    logs.emitted(ctx.log, pools.looks.step(PoolStarted(name)))
    pools.pid.pop(name, None)
    ctx.supervision.step(Started(name, "hosted_pool" if config.settings.pools.home_host else "pool", time.monotonic()))
    return address


def task_actor_started(ctx: Context, address: ActorAddress) -> ActorAddress:
    """A task actor was created: supervised, and given the settings once, before its first run."""
    ctx.supervision.step(Started(_actor_name(address), "task_actor", time.monotonic()))
    if ctx.settings is not None:  # task actors are created for runs: only once configured
        ctx.send(address, m.ConfigureTaskActor(ctx.settings))
    return address


def pool_ready(ctx: Context, ready: m.PoolReady, sender: ActorAddress) -> None:
    if ctx.pools.address.get(ready.name) == sender:
        ctx.pools.pid[ready.name] = ready.pid


# -- deaths ----------------------------------------------------------------------------------------
def child_exited(ctx: Context, exited: ChildActorExited, sender: ActorAddress) -> None:
    """A child died: a pool (started again), a task actor (its runs restarted), or both, the home host."""
    address = exited.childAddress
    names = [pool for pool, known in ctx.pools.address.items() if known == address]
    # First: a dead home host is no home any more, so its pools start again in a new one.
    lost = ctx.task_actors.exited(address)
    for name in names:
        if ctx.pools.dead.get(name) == address or ctx.giving_up:
            continue  # told twice (its goodbye and SIGCHLD's): one death; or the first pool's ended the supervisor
        ctx.pools.dead[name] = address
        ctx.pools.pid.pop(name, None)
        ctx.log.warning("pool_died", pool=name)
        _supervise(ctx, ctx.supervision.step(Exited(name, time.monotonic(), f"the {name} pool died")))
    if names and lost is None:
        return
    if lost is None:  # not a child of ours any more (a task actor retired, a pool replaced)
        ctx.supervision.step(Removed(_actor_name(address)))
    else:
        _supervise(ctx, ctx.supervision.step(Exited(_actor_name(address), time.monotonic(),
                                                    "the task actor exited unexpectedly")))
        for task_id, run in lost if ctx.admission is not None else ():  # each restarted from its checkpoint
            ctx.log.warning("task_actor_lost", task_id=task_id, run=run)
            admit(ctx, RunLost(task_id, run, "the task actor exited unexpectedly"))
            answer_suspends(ctx, task_id)
    memory.task_actor_gone(ctx, address)  # the reflections it held: handed out from here (last: it writes)


def _supervise(ctx: Context, commands: list[SupervisionCommand]) -> None:
    for command in commands:
        if isinstance(command, StartAgain) and command.kind in ("pool", "hosted_pool"):
            if command.delay_s <= 0:
                _replace_pool(ctx, command.child)
            else:
                ctx.log.warning("pool_restart_delayed", pool=command.child, restart_in_s=command.delay_s,
                                deaths=command.deaths)
                ctx.wake(command.delay_s, m.PoolDue(command.child))
        elif isinstance(command, Alarm):
            ctx.log.error("child_crash_loop", child=command.child, kind=command.kind, deaths=command.deaths,
                          period_s=command.period_s, reason=command.reason)
        elif isinstance(command, Escalate):
            _give_up(ctx, f"the {command.child} pool died {command.deaths} times within "
                          f"{command.period_s:g}s (last: {command.reason})")
        elif isinstance(command, Dropped) and command.kind != "task_actor":
            ctx.log.warning("child_dropped", child=command.child, kind=command.kind, reason=command.reason)


def _replace_pool(ctx: Context, name: str) -> None:
    config = ctx.pools.config.get(name)
    if config is None or ctx.giving_up:
        return
    dead = ctx.pools.address[name]
    address = start_pool(ctx, name, config)
    resent = [request for pool, request in ctx.pools.requests.values() if pool == name]
    for request in resent:
        ctx.send(address, request)
    for host in ctx.task_actors.addresses():
        ctx.send(host, m.PoolReplaced(name, address, dead))
    ctx.log.warning("pool_restarted", pool=name, requests_sent_again=len(resent))


def _give_up(ctx: Context, reason: str) -> None:
    """Escalate: the guardian is told why, and starts a new supervisor once this one has ended.

    Ended for sure: should Thespian's orderly exit wait for a child that never answers (one
    killed before it had connected, say), the process ends itself after ``GIVE_UP_S``; its
    children die with it and the store needs no closing (each commit is whole)."""
    ctx.giving_up = True
    ctx.log.error("supervisor_giving_up", reason=reason)
    if ctx.parent is not None:
        ctx.send(ctx.parent, m.ChildTrouble(reason))
    ctx.exit()
    ender = threading.Timer(GIVE_UP_S, os._exit, (70,))
    ender.daemon = True
    ender.start()


def tell_trouble(ctx: Context, error: str) -> None:
    """A handler's error, told to the guardian (at most one a second): it names it if this process dies."""
    now = time.monotonic()
    if ctx.parent is not None and now - ctx.told_trouble_at >= TROUBLE_EVERY_S:
        ctx.told_trouble_at = now
        ctx.send(ctx.parent, m.ChildTrouble(error))


# -- timers: a pool due again, stopped pools --------------------------------------------------------
def pool_due(ctx: Context, due: m.PoolDue) -> None:
    view = ctx.supervision.view(time.monotonic()).get(due.name)
    dead = ctx.pools.dead.get(due.name)
    if dead is not None and dead == ctx.pools.address.get(due.name) and view is not None and \
            view["status"] in ("restarting", "crash_looping"):  # crash_looping: slowed down, not ended
        _replace_pool(ctx, due.name)


def check_pools(ctx: Context, check: m.PoolsCheck) -> None:
    pools = ctx.pools
    stopped = {name: _is_stopped(pid) for name, pid in pools.pid.items()}
    busy = bool(pools.requests) or bool(ctx.task_actors.policy.placed)  # work a stopped pool holds up
    for command in logs.emitted(ctx.log, pools.looks.step(Look(stopped, busy))):
        if isinstance(command, EndPool):
            pid = pools.pid.get(command.name)
            if pid is not None and procs.kill_own_child(pid):
                ctx.log.error("pool_stopped_killed", pool=command.name, pid=pid)  # its ChildActorExited replaces it
        else:
            ctx.wake(command.seconds, m.PoolsCheck())


def _is_stopped(pid: int) -> bool:
    stat = procs.read_stat(pid)
    return stat is not None and stat.state in STOPPED_STATES


def pools_view(ctx: Context, parts: dict[str, dict[str, object]]) -> dict[str, object]:
    """Each pool's figures (those it sent), its supervision, and whether it answered in time."""
    supervised = ctx.supervision.view(time.monotonic())
    pools = ctx.pools
    return {name: {**(parts.get(name) or {}), "responsive": name in parts, "pid": pools.pid.get(name),
                   "stopped": pools.looks.seen_stopped(name), "supervision": supervised.get(name)}
            for name in pools.address}


def _actor_name(address: ActorAddress) -> str:
    return f"task-actor {address}"
