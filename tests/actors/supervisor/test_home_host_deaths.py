"""The home host's death (actors/supervisor/children.py): it is both pools' death and a task actor's.  The pools
start again in one new home host, the supervisor's own requests go to it, the other task actors are told, its
runs are handed back (restarted from their checkpoints), and a death told twice is counted once."""

from __future__ import annotations

import itertools
from pathlib import Path

from thespian.actors import ChildActorExited

from actors import messages as m
from actors.supervisor import children
from actors.supervisor.context import Context
from actors.supervisor.task_actors import TaskActors
from pegasus import logs
from pegasus.config import Settings
from pegasus.store import Store


def test_the_home_hosts_death_starts_both_pools_again_in_one_new_home_and_gives_back_its_runs(tmp_path: Path) -> None:
    sent: list[tuple[object, object]] = []
    hosts = (f"task actor {n}" for n in itertools.count(1))
    task_actors = TaskActors(lambda: next(hosts), lambda to, message: sent.append((to, message)), lambda s: None)
    settings = Settings().with_overrides({"state": {"home": str(tmp_path)}})
    ctx = Context(send=lambda to, message: sent.append((to, message)), wake=lambda seconds, payload: None,
                  create=lambda kind: "a pool process", exit=lambda: None, task_actors=task_actors,
                  log=logs.get("supervisor"), settings=settings, store=Store(tmp_path / "pegasus.db"))
    try:
        for name in ("llm", "tool"):
            children.start_pool(ctx, name, m.PoolConfig(name, 3, 10, 60.0, settings))
        assert ctx.pools.address == {"llm": "task actor 1", "tool": "task actor 1"}
        assert ctx.pools.places() == ["task actor 1"]
        assert task_actors.take("t1", 1) == "task actor 1"  # the home takes runs
        other = task_actors.create()  # a second host, as the policy makes one under load
        task_actors.address[99] = other
        ctx.to_pool("llm", m.StageRequest("t9", 4, "post_reflect"))
        sent.clear()

        children.child_exited(ctx, ChildActorExited("task actor 1"), "task actor 1")
        assert ctx.pools.address == {"llm": "task actor 3", "tool": "task actor 3"}  # one new home for both
        configured = [(to, message.name) for to, message in sent if isinstance(message, m.PoolConfig)]
        assert configured == [("task actor 3", "llm"), ("task actor 3", "tool")]
        resent = [(to, message) for to, message in sent if isinstance(message, m.StageRequest)]
        assert [(to, r.task_id, r.pool) for to, r in resent] == [("task actor 3", "t9", "llm")]
        told = {(to, message.name) for to, message in sent if isinstance(message, m.PoolReplaced)}
        assert ("task actor 2", "llm") in told and ("task actor 2", "tool") in told
        assert task_actors.policy.host_of("t1") is None  # its run was handed back (Admission restarts it)
        assert ctx.supervision.children["llm"].count == 1 and ctx.supervision.children["tool"].count == 1

        children.child_exited(ctx, ChildActorExited("task actor 1"), "task actor 1")  # told again
        assert ctx.supervision.children["llm"].count == 1 and ctx.pools.address["llm"] == "task actor 3"
    finally:
        ctx.store.close()


def test_runs_that_crash_the_home_host_again_and_again_slow_its_pools_restarts_and_never_end_the_supervisor(
        tmp_path: Path) -> None:
    """A run can kill its process (out of memory, a native library); on the home host that is both pools' death
    too, and a pool past 5 deaths a minute escalated: two such tasks (3 restarts each) ended the supervisor."""
    sent: list[tuple[object, object]] = []
    wakes: list[object] = []
    hosts = (f"task actor {n}" for n in itertools.count(1))
    task_actors = TaskActors(lambda: next(hosts), lambda to, message: sent.append((to, message)), lambda s: None)
    settings = Settings().with_overrides({"state": {"home": str(tmp_path)}})
    ctx = Context(send=lambda to, message: sent.append((to, message)), wake=lambda seconds, payload: wakes.append(payload),
                  create=lambda kind: "a pool process", exit=lambda: None, task_actors=task_actors,
                  log=logs.get("supervisor"), settings=settings, store=Store(tmp_path / "pegasus.db"))
    try:
        for name in ("llm", "tool"):
            children.start_pool(ctx, name, m.PoolConfig(name, 3, 10, 60.0, settings))
        for _ in range(8):
            home = ctx.pools.address["llm"]
            children.child_exited(ctx, ChildActorExited(home), home)
            for due in [w for w in wakes if isinstance(w, m.PoolDue)]:
                children.pool_due(ctx, due)
            wakes.clear()
        assert not ctx.giving_up
        assert ctx.supervision.children["llm"].count == 8 and ctx.pools.address["llm"] == ctx.pools.address["tool"]
    finally:
        ctx.store.close()
