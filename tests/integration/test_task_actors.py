"""Task actors on real processes: a free one runs the next task, until it is retired.

A task actor whose run stops (done, failed, suspended) is free; the supervisor
gives it the next run instead of forking a new process, keeps at most
``max_active_tasks`` free ones and retires one after ``task_actor_runs`` runs.
A canceled run's actor and a dead one are never given another run.
"""

from __future__ import annotations

import os
import signal

import pytest

from actors import procs
from actors.system import system_pids
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def _run_one(client) -> int:
    """Run a short task; the pid of its task actor (seen while it runs: a done task has none)."""
    task_id = client.submit("sleep 0.3 and what is 2 + 2?")["task_id"]
    pid = wait_for(lambda: client.get(task_id)["actor_pid"], what="the task actor")
    done = client.wait(task_id, timeout=30)
    assert done["lifecycle_state"] == "done" and done["runs"] == 1, done.get("error")
    return pid


def _actors(client) -> dict:
    return client.stats()["task_actors"]


def test_a_task_actor_runs_tasks_one_after_another_and_is_retired_after_its_runs(pegasus) -> None:
    client = pegasus(runtime={"max_active_tasks": 1, "task_actor_runs": 3})
    pids = [_run_one(client) for _ in range(7)]
    first, second, third = pids[0], pids[3], pids[6]
    assert pids == [first] * 3 + [second] * 3 + [third] and len({first, second, third}) == 3
    assert _actors(client) == {"running": 0, "free": 1, "created": 3}
    wait_for(lambda: not {first, second} & set(system_pids(client.spec)), what="the retired actors to exit")
    assert third in system_pids(client.spec)


def test_task_actor_runs_1_gives_every_run_its_own_process(pegasus) -> None:
    client = pegasus(runtime={"task_actor_runs": 1})
    pids = [_run_one(client) for _ in range(3)]
    assert len(set(pids)) == 3
    assert _actors(client) == {"running": 0, "free": 0, "created": 3}


def test_a_free_task_actor_that_dies_is_forgotten(pegasus) -> None:
    client = pegasus()
    victim = _run_one(client)
    assert _actors(client)["free"] == 1
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: _actors(client)["free"] == 0, what="the supervisor to forget the dead free actor")
    assert _run_one(client) != victim  # a new process, and no run lost
    assert _actors(client) == {"running": 0, "free": 1, "created": 2}


def test_a_canceled_task_s_actor_exits_and_is_not_given_another_run(pegasus) -> None:
    client = pegasus()
    task_id = client.submit("sleep 30")["task_id"]
    pid = wait_for(lambda: client.get(task_id)["actor_pid"], what="the task actor")
    assert client.cancel(task_id)["lifecycle_state"] == "canceled"
    assert procs.wait_gone(procs.identities([pid]), timeout=10) == []
    assert _actors(client)["free"] == 0
    assert _run_one(client) != pid


def test_a_suspended_task_holds_no_actor_and_resumes_on_a_free_one(pegasus) -> None:
    client = pegasus()
    task_id = client.submit("help me")["task_id"]
    blocked = wait_for(lambda: (t := client.get(task_id))["lifecycle_state"] == "blocked" and t,
                       what="the task to wait for an answer")
    assert _actors(client) == {"running": 0, "free": 1, "created": 1}  # passivated: its actor is free
    assert blocked["actor_pid"] in system_pids(client.spec)
    client.resume(task_id, "sleep 0.3 and what is 2 + 2?")
    resumed = wait_for(lambda: (t := client.get(task_id))["lifecycle_state"] == "running" and t["actor_pid"],
                       what="the resumed run's actor")
    assert resumed == blocked["actor_pid"]  # the free actor took the resumed run
    done = client.wait(task_id, timeout=30)
    assert done["lifecycle_state"] == "done", done.get("error")
    assert _actors(client)["created"] == 1
