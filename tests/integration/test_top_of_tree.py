"""The top of the supervision tree under SIGKILL, with effectful tasks in flight (docs/architecture.md).

* Thespian's logger (``pegasus: logger``, the admin's child): the admin starts a new one on the
  same address and stays (same pid), embedded or in the background; actors created before the
  death log through it again (actors/thespian_patches/speed/logger_restart.py).
* The launcher of a background system: its watcher takes its place (same lock, never released),
  and a later admin death is recovered as before; a concurrent ``pegasus start`` is refused
  throughout, and ``pegasus stop`` still ends everything (actors/_daemon.py).

Each checks what the fault matrix checks: every task ends without a person, no effect key is
written twice, and a task whose key was never written is reported ``unknown``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from actors import procs
from actors.client import Client
from actors.system import SystemSpec, is_running, read_owner, system_pids
from pegasus.config import Settings
from tests.support.echo_actor import EchoActor
from tests.support.tools import keys_in
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PLUGIN = {"tools": {"plugins": ["tests.support.tools:register"]}}
TASKS = 50


def submit_effects(client: Client, keys: Path, first: int, count: int) -> list[str]:
    call = json.dumps({"path": str(keys), "hold_s": 0.05})
    return [client.submit(f"call append_key {call} and then what is {n} + 1?")["task_id"]
            for n in range(first, first + count)]


def assert_every_task_ended_and_no_key_twice(client: Client, tasks: list[str], keys: Path) -> list[dict]:
    """Every task ends by itself; no key twice; a task whose key was never written is ``unknown``."""
    finals = [client.wait(task, timeout=180) for task in tasks]
    written = Counter(key.split("/")[0] for key in keys_in(keys))
    assert {key: n for key, n in Counter(keys_in(keys)).items() if n > 1} == {}, "an effect ran twice"
    for final in finals:
        unknown = final["lifecycle_state"] == "failed" and final["exit_reason"] == "unknown"
        assert final["lifecycle_state"] == "done" or unknown, final
        assert written[final["task_id"]] == 1 or unknown, final
    return finals


def titled(spec: SystemSpec, role: str) -> list[int]:
    """The system's processes titled ``pegasus: <role>``."""
    found = []
    for pid in system_pids(spec):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if title.startswith(f"pegasus: {role}"):
            found.append(pid)
    return found


def logged(spec: SystemSpec, marker: str) -> bool:
    path = spec.logs_dir / "actors.log"
    return path.exists() and marker in path.read_text(errors="replace")


@pytest.mark.parametrize("daemon", [False, True], ids=["embedded", "background"])
def test_a_killed_logger_is_replaced_and_the_admin_stays(pegasus, tmp_path: Path, daemon: bool) -> None:
    keys = tmp_path / "keys.txt"
    client = pegasus(daemon=daemon, **PLUGIN, runtime={"max_active_tasks": 8})
    spec = client.spec
    echo = client.asys.createActor(EchoActor)  # forwards its log lines to the logger it was created with
    assert client.asys.ask(echo, ("log", "marker-before"), 30) == "logged"
    wait_for(lambda: logged(spec, "marker-before"), what="the first logger to write")
    [admin], [logger] = titled(spec, "admin"), titled(spec, "logger")
    tasks = submit_effects(client, keys, 0, TASKS)
    wait_for(lambda: len(keys_in(keys)) >= 3, what="some effects")

    os.kill(logger, signal.SIGKILL)
    new = wait_for(lambda: [pid for pid in titled(spec, "logger") if pid != logger], what="a new logger")
    assert procs.read_stat(new[0]).ppid == admin
    tasks += submit_effects(client, keys, TASKS, 5)

    finals = assert_every_task_ended_and_no_key_twice(client, tasks, keys)
    assert all(final["lifecycle_state"] == "done" for final in finals)  # the admin never went: nothing cut short
    assert titled(spec, "admin") == [admin] and procs.is_alive(admin)
    assert client.asys.ask(echo, ("log", "marker-after"), 30) == "logged"
    wait_for(lambda: logged(spec, "marker-after"), what="an actor's log line after the restart")
    if daemon:
        assert "restarting the system" not in (spec.logs_dir / "daemon.log").read_text()
