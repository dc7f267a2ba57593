"""Self-healing with real SIGKILLs: no person involved, no task lost, no effectful step repeated.

* The supervisor alone: its guardian starts a new one, which restores every task
  from the store; clients find it through the guardian and go on waiting.
* The Thespian admin of a background system (``pegasus start``): the launcher
  notices, ends what is left of the system (its logger holds the port) and
  starts it again on the same port and state directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from actors import procs
from actors.client import Client
from actors.system import SystemSpec, is_running, system_pids
from pegasus.config import Settings
from tests.support.tools import keys_in
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PLUGIN = {"tools": {"plugins": ["tests.support.tools:register"]}}


def effect(path: Path, hold_s: float) -> str:
    return f"call append_key {json.dumps({'path': str(path), 'hold_s': hold_s})}"


def submit_effects(client: Client, keys: Path, count: int) -> list[str]:
    return [client.submit(f"{effect(keys, 0.3)} and then sleep 0.2 and what is {n} + 1?")["task_id"]
            for n in range(count)]


def assert_every_task_done_and_no_key_twice(client: Client, tasks: list[str], keys: Path) -> None:
    states = Counter(client.wait(task, timeout=120)["lifecycle_state"] for task in tasks)
    assert states == Counter({"done": len(tasks)}), states
    repeated = {key: n for key, n in Counter(keys_in(keys)).items() if n > 1}
    assert repeated == {}, f"effectful steps repeated: {repeated}"


def test_a_killed_supervisor_is_replaced_and_every_task_finishes(pegasus, tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    client = pegasus(**PLUGIN, runtime={"max_active_tasks": 4})
    tasks = submit_effects(client, keys, 12)
    wait_for(lambda: len(keys_in(keys)) >= 3, what="some effects")
    first = client.stats()
    os.kill(first["supervisor_pid"], signal.SIGKILL)

    assert_every_task_done_and_no_key_twice(client, tasks, keys)
    again = client.stats()
    assert again["supervisor_pid"] != first["supervisor_pid"] and client.generation == 2
    assert again["tasks"] == {"done": 12}
    # The old supervisor's task actors, pools and workers went with it: no orphan is left.
    alive = set(system_pids(client.spec))
    old = {w["pid"] for pool in first["pools"].values() for w in pool["workers"]}
    assert not old & alive, f"workers of the dead supervisor still run: {old & alive}"
    assert serves(client)


def serves(client: Client) -> bool:
    done = client.wait(client.submit("what is 6 * 7?")["task_id"], timeout=30)
    return done["lifecycle_state"] == "done" and "42" in str(done["result"])


def test_a_killed_admin_of_a_background_system_is_restarted(tmp_path: Path) -> None:
    home, keys = tmp_path / "home", tmp_path / "keys.txt"
    port = procs.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    env.update(PEGASUS_HOME=str(home), PEGASUS_TOOLS__PLUGINS='["tests.support.tools:register"]',
               PEGASUS_RUNTIME__MAX_ACTIVE_TASKS="4")
    spec = SystemSpec(admin_port=port, state_dir=home)
    started = subprocess.run(["pegasus", "start", "--port", str(port)], env=env, capture_output=True, text=True,
                             timeout=60)
    assert started.returncode == 0, started.stderr
    seen = procs.identities(system_pids(spec))
    try:
        settings = Settings().with_overrides({"system": {"admin_port": port}, "state": {"home": str(home)}})
        client = Client.connect(settings)
        tasks = submit_effects(client, keys, 10)
        wait_for(lambda: len(keys_in(keys)) >= 3, what="some effects")
        record = json.loads(spec.pid_file.read_text())
        admin, launcher = record["admin"][0], record["daemon"][0]
        os.kill(admin, signal.SIGKILL)

        assert_every_task_done_and_no_key_twice(client, tasks, keys)
        again = json.loads(spec.pid_file.read_text())
        assert again["admin"][0] != admin and again["daemon"][0] == launcher and again["admin_port"] == port
        assert "without a stop; restarting the system" in (home / "logs" / "daemon.log").read_text()
        assert serves(client)
        client.close()
        seen.update(procs.identities(system_pids(spec)))
    finally:
        stopped = subprocess.run(["pegasus", "stop", "--port", str(port)], env=env, capture_output=True, text=True,
                                 timeout=60)
        leftovers = procs.kill_all(seen, grace=5.0)
    assert stopped.returncode == 0, stopped.stderr
    assert leftovers == [] and not is_running(spec)  # a stop is not a crash: nothing was started again
