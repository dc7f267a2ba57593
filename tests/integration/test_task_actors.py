"""Task actors on real processes: each holds many runs, passivated between their messages.

A run is placed on a task actor (``pegasus.run.hosts``): the cool one with the
fewest runs, a new one only when every one is busy, never more than
``task_actors_max``; a task actor retires after ``task_actor_runs`` runs (once it
holds none) or when it stayed idle above the floor.  A canceled run is dropped
by its task actor, which serves on; a task actor that dies has its runs
restarted from the store on another.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from actors.runtime.system import system_pids
from tests.support.processes import titled
from tests.support.tools import append_key_request, keys_in
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def _run_one(client) -> int:
    """Run a short task; the pid of its task actor (seen while it runs: a done task has none)."""
    task_id = client.submit("sleep 0.3 and what is 2 + 2?")["task_id"]
    pid = wait_for(lambda: client.get(task_id)["actor_pid"], what="the task actor")
    done = client.wait(task_id, timeout=60)
    assert done["lifecycle_state"] == "done" and done["runs"] == 1, done.get("error")
    return pid


def _actors(client) -> dict:
    return client.stats()["task_actors"]


# The home host (the pools' process, pegasus/pool/home.py) is never retired and is replaced as soon as it dies: the
# tests of a task actor's retirement and death run with the pools in processes of their own (HOME_OFF).
HOME_OFF = {"home_host": False}


def test_a_task_actor_runs_tasks_one_after_another_and_is_retired_after_its_runs(pegasus) -> None:
    client = pegasus(runtime={"max_active_tasks": 1, "task_actor_runs": 3}, pools=HOME_OFF)
    pids = [_run_one(client) for _ in range(7)]
    first, second, third = pids[0], pids[3], pids[6]
    assert pids == [first] * 3 + [second] * 3 + [third] and len({first, second, third}) == 3
    assert _actors(client) == {"running": 0, "free": 1, "created": 3, "hosts": 1, "died": 0}
    wait_for(lambda: not {first, second} & set(system_pids(client.spec)), what="the retired actors to exit")
    assert third in system_pids(client.spec)


def test_the_home_host_takes_runs_past_task_actor_runs_and_is_never_retired(pegasus) -> None:
    """The pools run in it: retired, they would die with it."""
    client = pegasus(runtime={"max_active_tasks": 1, "task_actor_runs": 2})
    home = wait_for(lambda: client.stats()["pools"]["llm"]["pid"], what="the home host's pid")
    assert [_run_one(client) for _ in range(4)] == [home] * 4
    assert _actors(client) == {"running": 0, "free": 1, "created": 1, "hosts": 1, "died": 0}


def test_task_actor_runs_1_gives_every_run_its_own_process(pegasus) -> None:
    client = pegasus(runtime={"task_actor_runs": 1}, pools=HOME_OFF)
    pids = [_run_one(client) for _ in range(3)]
    assert len(set(pids)) == 3
    assert _actors(client) == {"running": 0, "free": 0, "created": 3, "hosts": 0, "died": 0}


def test_a_free_task_actor_that_dies_is_forgotten(pegasus) -> None:
    client = pegasus(pools=HOME_OFF)
    victim = _run_one(client)
    assert _actors(client)["free"] == 1
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: _actors(client)["free"] == 0, what="the supervisor to forget the dead free actor")
    assert _run_one(client) != victim  # a new process, and no run lost
    assert _actors(client) == {"running": 0, "free": 1, "created": 2, "hosts": 1, "died": 1}


def test_a_canceled_run_is_dropped_and_its_task_actor_serves_on(pegasus) -> None:
    """Before, the canceled run's process exited (and a new one was forked for the next run);
    now its task actor holds other runs: it forgets this one and stays."""
    client = pegasus()
    task_id = client.submit("sleep 30")["task_id"]
    pid = wait_for(lambda: client.get(task_id)["actor_pid"], what="the task actor")
    assert client.cancel(task_id)["lifecycle_state"] == "canceled"
    assert _actors(client) == {"running": 0, "free": 1, "created": 1, "hosts": 1, "died": 0}
    assert _run_one(client) == pid and pid in system_pids(client.spec)


def test_a_suspended_task_holds_no_actor_and_resumes_on_a_free_one(pegasus) -> None:
    client = pegasus()
    task_id = client.submit("help me")["task_id"]
    blocked = wait_for(lambda: (t := client.get(task_id))["lifecycle_state"] == "blocked" and t,
                       what="the task to wait for an answer")
    assert _actors(client) == {"running": 0, "free": 1, "created": 1, "hosts": 1, "died": 0}  # passivated: its actor is free
    assert blocked["actor_pid"] in system_pids(client.spec)
    client.resume(task_id, "sleep 0.3 and what is 2 + 2?")
    resumed = wait_for(lambda: (t := client.get(task_id))["lifecycle_state"] == "running" and t["actor_pid"],
                       what="the resumed run's actor")
    assert resumed == blocked["actor_pid"]  # the free actor took the resumed run
    done = client.wait(task_id, timeout=60)
    assert done["lifecycle_state"] == "done", done.get("error")
    assert _actors(client)["created"] == 1


def test_200_tasks_in_flight_run_on_at_most_the_ceiling_of_task_actors(pegasus) -> None:
    """Issue 18: before, every running task held a process of its own (200 task actors here)."""
    client = pegasus(runtime={"max_active_tasks": 200, "task_actors_max": 3}, cognition={"latency_ms": 100},
                     pools={"llm_workers": 8, "tool_workers": 4})  # each a process: enough to finish in seconds
    tasks = [t["task_id"] for t in client.submit_many([f"what is {n} + 1?" for n in range(200)])]
    peak = in_flight = 0
    while True:
        peak = max(peak, len(titled(client.spec, "task actor")))
        in_flight = max(in_flight, client.stats()["active"])
        if all(client.get(task_id)["lifecycle_state"] == "done" for task_id in tasks[::20]):
            break
        time.sleep(0.2)
    finals = [client.wait(task_id, timeout=120) for task_id in tasks]
    assert all(final["lifecycle_state"] == "done" for final in finals)
    assert 1 <= peak <= 3, peak
    assert in_flight >= 100  # many running at once, on few processes
    assert 1 <= _actors(client)["created"] <= 3
    print(f"\n{in_flight} tasks in flight at most: at most {peak} task actor processes")


def test_a_killed_task_actor_s_runs_restart_elsewhere_no_task_lost_no_effect_twice(pegasus, tmp_path: Path) -> None:
    """A SIGKILL of a task actor holding many runs mid-step: each restarts from its checkpoint,
    on a new task actor; an effectful step is never repeated (reported unknown when it may have run)."""
    keys = tmp_path / "keys.txt"
    client = pegasus(tools={"plugins": ["tests.support.tools:register"]}, runtime={"max_active_tasks": 20},
                     pools={"tool_workers": 4})
    tasks = [t["task_id"] for t in client.submit_many(
        [f"{append_key_request(keys, 0.3)} and then sleep 0.3 and what is {n} + 1?" for n in range(20)])]
    wait_for(lambda: len(keys_in(keys)) >= 4, what="some effects")
    held = Counter(client.get(task_id)["actor_pid"] for task_id in tasks)
    victim = max(titled(client.spec, "task actor"), key=lambda pid: held[pid])  # the one holding most runs (all, here)
    os.kill(victim, signal.SIGKILL)
    finals = [client.wait(task_id, timeout=90) for task_id in tasks]
    counts = Counter(keys_in(keys))
    assert {key: n for key, n in counts.items() if n > 1} == {}
    restarted = 0
    for final in finals:
        key = f"{final['task_id']}/a1.0/i0/s0"
        restarted += final["runs"] == 2
        if final["effects_unknown"]:  # a worker had started it when the run was lost: never repeated
            assert (final["lifecycle_state"], final["exit_reason"]) == ("failed", "unknown"), final
            assert [e["key"] for e in final["effects_unknown"]] == [key]
        else:
            assert final["lifecycle_state"] == "done" and counts[key] == 1, final
    assert restarted >= 10  # most were still running on the killed task actor
    assert victim not in system_pids(client.spec) and titled(client.spec, "task actor")
    print(f"\n20 tasks, task actor killed: {restarted} runs restarted, "
          f"{sum(1 for f in finals if f['effects_unknown'])} effects reported unknown")
