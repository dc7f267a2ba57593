"""A pool's death told twice (its goodbye and SIGCHLD's announcement can both come while its restart waits)
is one death: counted once, one restart timer (actors/supervisor/children.py)."""

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


def test_a_pool_death_told_twice_while_its_restart_waits_is_counted_once(tmp_path: Path) -> None:
    sent: list[tuple[object, object]] = []
    wakes: list[object] = []
    addresses = (f"llm pool {n}" for n in itertools.count(1))
    # A pool in its own process (a home host's death is a task actor's too: test_home_host_deaths.py).
    settings = Settings().with_overrides({"state": {"home": str(tmp_path)}, "pools": {"home_host": False}})
    ctx = Context(send=lambda to, message: sent.append((to, message)),
                  wake=lambda seconds, payload: wakes.append(payload), create=lambda kind: next(addresses),
                  exit=lambda: None, task_actors=TaskActors(None, None, None), log=logs.get("supervisor"),
                  settings=settings, store=Store(tmp_path / "pegasus.db"))
    try:
        children.start_pool(ctx, "llm", m.PoolConfig("llm", 3, 10, 60.0, settings))
        children.child_exited(ctx, ChildActorExited("llm pool 1"), "llm pool 1")  # restarted at once
        assert ctx.pools.address["llm"] == "llm pool 2" and wakes == []
        children.child_exited(ctx, ChildActorExited("llm pool 2"), "llm pool 2")  # again soon: its restart waits
        assert len(wakes) == 1
        children.child_exited(ctx, ChildActorExited("llm pool 2"), "llm pool 2")  # the same death, told again
        assert ctx.supervision.children["llm"].count == 2 and len(wakes) == 1  # before: 3 deaths, 2 timers
    finally:
        ctx.store.close()
