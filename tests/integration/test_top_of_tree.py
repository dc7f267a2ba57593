"""The top of the supervision tree under SIGKILL, with effectful tasks in flight (docs/architecture.md).

* Thespian's logger (``pegasus: logger``, the admin's child): the admin starts a new one on the
  same address and stays (same pid), embedded or in the background; actors created before the
  death log through it again (actors/wire/thespian_patches/robustness/logger_restart.py).
* The launcher of a background system: its watcher takes its place (same lock, never released),
  and a later admin death is recovered as before; a concurrent ``pegasus start`` is refused
  throughout, and ``pegasus stop`` still ends everything (actors/launcher.py), also a system its
  launcher is starting again as the stop comes (actors/runtime/system.py ``shutdown``).

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

from actors.runtime import procs
from actors.client import Client
from actors.runtime.system import SystemSpec, is_running, read_owner, system_pids
from pegasus.config import Settings
from tests.support.echo_actor import EchoActor
from tests.support.processes import titled
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
    assert client.stats()["tasks"]  # the admin answers as before
    tasks += submit_effects(client, keys, TASKS, 5)

    finals = assert_every_task_ended_and_no_key_twice(client, tasks, keys)
    assert all(final["lifecycle_state"] == "done" for final in finals)  # the admin never went: nothing cut short
    assert titled(spec, "admin") == [admin] and procs.is_alive(admin)
    assert client.asys.ask(echo, ("log", "marker-after"), 30) == "logged"
    wait_for(lambda: logged(spec, "marker-after"), what="an actor's log line after the restart")
    if daemon:
        assert "restarting the system" not in (spec.logs_dir / "daemon.log").read_text()


def test_a_killed_launcher_is_replaced_by_its_watcher_and_a_later_admin_death_is_recovered(tmp_path: Path) -> None:
    home, keys = tmp_path / "home", tmp_path / "keys.txt"
    port = procs.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]), PEGASUS_HOME=str(home),
               PEGASUS_TOOLS__PLUGINS='["tests.support.tools:register"]', PEGASUS_RUNTIME__MAX_ACTIVE_TASKS="8")
    spec = SystemSpec(admin_port=port, state_dir=home)

    def pegasus(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["pegasus", *args, "--port", str(port)], env=env, capture_output=True, text=True,
                              timeout=120)

    started = pegasus("start")
    assert started.returncode == 0, started.stderr
    seen = procs.identities(system_pids(spec))
    try:
        settings = Settings().with_overrides({"system": {"admin_port": port}, "state": {"home": str(home)}})
        client = Client.connect(settings)
        tasks = submit_effects(client, keys, 0, TASKS)
        wait_for(lambda: len(keys_in(keys)) >= 3, what="some effects")
        record = read_owner(spec)
        admin, launcher = record["admin"][0], record["daemon"][0]
        [first] = wait_for(lambda: titled(spec, "watcher"), what="the launcher's watcher")
        os.kill(first, signal.SIGKILL)  # a dead watcher: its launcher forks another
        [watcher] = wait_for(lambda: [pid for pid in titled(spec, "watcher") if pid != first], what="a new watcher")
        assert procs.read_stat(watcher).ppid == launcher
        seen.update(procs.identities(system_pids(spec)))

        os.kill(watcher, signal.SIGSTOP)  # holds the gap open: the launcher is dead, nobody has taken its place
        os.kill(launcher, signal.SIGKILL)
        wait_for(lambda: not procs.is_alive(launcher), what="the launcher gone")
        refused = pegasus("start")
        assert refused.returncode != 0 and "is in use by" in refused.stderr, refused.stderr
        os.kill(watcher, signal.SIGCONT)
        wait_for(lambda: read_owner(spec)["daemon"][0] == watcher, what="the watcher in the launcher's place")
        assert read_owner(spec)["admin"][0] == admin  # adopted, not restarted
        wait_for(lambda: [pid for pid in titled(spec, "watcher") if pid != watcher], what="the new launcher's watcher")
        seen.update(procs.identities(system_pids(spec)))

        os.kill(admin, signal.SIGKILL)  # not the new launcher's child: it watches it by identity
        wait_for(lambda: read_owner(spec)["admin"][0] != admin, what="the system started again")
        client.close()  # it may still hold the old supervisor: a request sent there is SupervisorReplaced
        client = Client.connect(settings)
        tasks += submit_effects(client, keys, TASKS, 5)
        finals = assert_every_task_ended_and_no_key_twice(client, tasks, keys)
        assert sum(final["lifecycle_state"] == "done" for final in finals) >= TASKS - 8  # at most those in flight
        assert read_owner(spec)["daemon"][0] == watcher
        assert "takes its place" in (spec.logs_dir / "daemon.log").read_text()
        client.close()
        seen.update(procs.identities(system_pids(spec)))
    finally:
        stopped = pegasus("stop")
        leftovers = procs.kill_all(seen, grace=5.0)
    assert stopped.returncode == 0, stopped.stderr
    assert leftovers == [] and not is_running(spec) and system_pids(spec) == []


def test_a_stop_while_the_launcher_restarts_the_system_ends_everything(tmp_path: Path) -> None:
    """Before, ``pegasus stop`` said "stopped" and an admin being started again (forked after its snapshots)
    lived on with its whole system, 12 processes, 4 times in 5."""
    home, port = tmp_path / "home", procs.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]), PEGASUS_HOME=str(home))
    spec = SystemSpec(admin_port=port, state_dir=home)

    def pegasus(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["pegasus", *args, "--port", str(port)], env=env, capture_output=True, text=True,
                              timeout=120)

    assert pegasus("start").returncode == 0
    seen = procs.identities(system_pids(spec))
    try:
        os.kill(read_owner(spec)["admin"][0], signal.SIGKILL)
        wait_for(lambda: "restarting the system" in (spec.logs_dir / "daemon.log").read_text(), what="a restart")
        seen.update(procs.identities(system_pids(spec)))
        stopped = pegasus("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert system_pids(spec) == [] and not is_running(spec)
    finally:
        seen.update(procs.identities(system_pids(spec)))
        leftovers = procs.kill_all(seen, grace=5.0)
    assert leftovers == []
