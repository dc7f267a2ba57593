"""Crash tests with real SIGKILLs: no task lost, no effectful step repeated.

The effectful test tool (tests/support/tools.py) appends its idempotency key to
a file and then holds its worker, so each kill lands after the effect and
before the result is recorded: the worst moment for a runtime that re-runs
what it cannot prove finished.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from actors import procs
from actors.system import system_pids
from tests.support.tools import keys_in
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PLUGIN = {"tools": {"plugins": ["tests.support.tools:register"]}}
TERMINAL = {"done", "failed", "canceled"}


def effect(path: Path, hold_s: float) -> str:
    return f"call append_key {json.dumps({'path': str(path), 'hold_s': hold_s})}"




def assert_no_key_twice(path: Path) -> list[str]:
    keys = keys_in(path)
    repeated = {key: n for key, n in Counter(keys).items() if n > 1}
    assert repeated == {}, f"effectful steps repeated: {repeated}"
    return keys


def test_worker_killed_mid_effectful_step(pegasus, tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    client = pegasus(**PLUGIN)
    task_id = client.submit(f"{effect(keys, 3)} and what is 2 * 21?")["task_id"]
    wait_for(lambda: keys_in(keys), what="the effect")
    busy = [w for w in client.stats()["pools"]["tool"]["workers"] if w["busy"]]
    assert len(busy) == 1
    os.kill(busy[0]["pid"], signal.SIGKILL)
    done = client.wait(task_id, timeout=30)
    assert done["lifecycle_state"] == "done"
    assert "interrupted; not repeated" in done["result"] and "42" in done["result"]
    assert assert_no_key_twice(keys) == [f"{task_id}/a1.0/i0/s0"]
    assert client.stats()["pools"]["tool"]["replaced"] == 1


def test_task_actor_killed_mid_task(pegasus, tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    client = pegasus(**PLUGIN)
    # Step 0 finishes (journalled, checkpointed), step 1 is in flight when the actor dies.
    task_id = client.submit(f"{effect(keys, 0)} and then {effect(tmp_path / 'second.txt', 2)}")["task_id"]
    wait_for(lambda: keys_in(tmp_path / "second.txt"), what="the second effect")
    victim = client.get(task_id)["actor_pid"]
    assert victim and victim in system_pids(client.spec)
    os.kill(victim, signal.SIGKILL)
    done = client.wait(task_id, timeout=30)
    assert done["lifecycle_state"] == "done" and done["runs"] == 2  # restarted from its checkpoint
    assert "interrupted; not repeated" in done["result"]
    assert assert_no_key_twice(keys) == [f"{task_id}/a1.0/i0/s0"]  # the finished step did not run again
    assert assert_no_key_twice(tmp_path / "second.txt") == [f"{task_id}/a1.0/i0/s1"]
    runs = {h["run"] for h in client.history(task_id)["cognitive"]}
    assert runs == {1, 2}  # the first actor's transitions, then its replacement's


def test_whole_system_killed_with_tasks_in_flight_then_restarted(pegasus, tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    settings = {**PLUGIN, "runtime": {"max_active_tasks": 8}, "pools": {"tool_workers": 4}}
    client = pegasus(**settings)
    tasks = []
    for n in range(60):
        text = f"{effect(keys, 0.2)} and then sleep 0.2 and what is {n} + 1?"
        tasks.append(client.submit(text, priority=n % 3)["task_id"])
    suspended = client.submit("help me")["task_id"]
    wait_for(lambda: len(keys_in(keys)) >= 10, what="some effects")
    spec = client.spec
    killed = procs.freeze_and_kill(lambda: system_pids(spec))  # the admin and every actor, at once
    assert len(killed) >= 10
    assert procs.wait_gone(killed, timeout=10) == []
    client.closed = True  # nothing left to shut down
    before = len(keys_in(keys))

    restarted = pegasus(**settings)
    states = {}
    for task_id in tasks:
        states[task_id] = restarted.wait(task_id, timeout=90)["lifecycle_state"]
    assert set(states.values()) <= TERMINAL and len(states) == 60  # none lost
    assert Counter(states.values())["done"] == 60
    assert restarted.get(suspended)["lifecycle_state"] == "blocked"  # still waiting for its answer
    all_keys = assert_no_key_twice(keys)
    assert len(all_keys) <= 60 and len(all_keys) >= before
    interrupted = [t for t in tasks if "interrupted" in str(restarted.get(t)["result"])]
    print(f"\n60 tasks: {before} effects before the kill, {len(all_keys)} after; "
          f"{len(interrupted)} steps reported interrupted instead of repeated")
    assert len(all_keys) + len(interrupted) >= 60  # every effect ran once or was reported, never twice


def test_history_status_and_resume_after_a_clean_restart(pegasus) -> None:
    client = pegasus()
    done_id = client.submit("what is 6 * 7?")["task_id"]
    assert client.wait(done_id)["lifecycle_state"] == "done"
    waiting = client.submit("help me")["task_id"]
    client.wait(waiting, until=frozenset({"blocked"}))
    client.close()  # a clean shutdown this time

    again = pegasus()
    status = again.get(done_id)
    assert (status["lifecycle_state"], status["state"], status["result"]) == ("done", "completed", "6 * 7 = 42")
    history = again.history(done_id)
    assert [h["to_state"] for h in history["lifecycle"]][-3:] == ["verifying", "verified", "done"]
    assert history["cognitive"][-1]["to_state"] == "completed"
    assert [a["event_type"] for a in history["audit"]][:2] == ["TASK_CREATED", "STATE_TRANSITION_APPROVED"]
    again.resume(waiting, message="what is 1 + 1?")  # passivated: it comes back from the store
    assert "2" in again.wait(waiting)["result"]
