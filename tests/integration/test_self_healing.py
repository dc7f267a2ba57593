"""Self-healing with real SIGKILLs: no person involved, no task lost, no effectful step repeated.

* The supervisor alone: its guardian starts a new one, which restores every task
  from the store; clients find it through the guardian and go on waiting.
* The Thespian admin of a background system (``pegasus start``): the launcher
  notices, ends what is left of the system (its logger holds the port) and
  starts it again on the same port and state directory.
* A worker stopped with SIGSTOP is not dead: Thespian says nothing, and before,
  the requests it held waited for the whole stage timeout while other workers
  idled.  Each test that stops a worker ends that one pid itself (SIGKILL works
  on a stopped process) in case the pool did not.
* A stop with a worker busy in a long tool step is prompt and logs no error.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from thespian.actors import ActorAddress
from thespian.system.transport import TransmitIntent
from thespian.system.transport.IPBase import TCPv4ActorAddress

from actors import messages as m
from actors.runtime import procs
from actors.client import Client
from actors.runtime.system import SystemSpec, is_running, send, system_pids
from pegasus.config import Settings
from tests.support.tools import append_key_request, busy_tool_worker, keys_in
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PLUGIN = {"tools": {"plugins": ["tests.support.tools:register"]}}


def effect(path: Path, hold_s: float) -> str:
    return f"call append_key {json.dumps({'path': str(path), 'hold_s': hold_s})}"


def submit_effects(client: Client, keys: Path, count: int) -> list[str]:
    return [client.submit(f"{effect(keys, 0.3)} and then sleep 0.2 and what is {n} + 1?")["task_id"]
            for n in range(count)]


def assert_every_task_finished_and_no_key_twice(client: Client, tasks: list[str], keys: Path) -> None:
    """Every task ends: done, or -- when the crash cut an effectful step short -- failed with that effect
    named unknown (never done silently); no effect twice, every effect of a done task once."""
    finals = [client.wait(task, timeout=120) for task in tasks]
    for final in finals:
        unknown = final["lifecycle_state"] == "failed" and final["exit_reason"] == "unknown" and final["effects_unknown"]
        assert final["lifecycle_state"] == "done" or unknown, final
    repeated = {key: n for key, n in Counter(keys_in(keys)).items() if n > 1}
    assert repeated == {}, f"effectful steps repeated: {repeated}"
    done = [final["task_id"] for final in finals if final["lifecycle_state"] == "done"]
    assert {key.split("/")[0] for key in keys_in(keys)} >= set(done)
    assert len(done) >= len(tasks) - 4, f"only {len(done)} of {len(tasks)} done"  # at most the steps in flight


def test_a_killed_supervisor_is_replaced_and_every_task_finishes(pegasus, tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    client = pegasus(**PLUGIN, runtime={"max_active_tasks": 4})
    tasks = submit_effects(client, keys, 12)
    wait_for(lambda: len(keys_in(keys)) >= 3, what="some effects")
    first = client.stats()
    os.kill(first["supervisor_pid"], signal.SIGKILL)

    assert_every_task_finished_and_no_key_twice(client, tasks, keys)
    again = client.stats()
    assert again["supervisor_pid"] != first["supervisor_pid"] and client.generation == 2
    assert sum(again["tasks"].values()) == 12 and set(again["tasks"]) <= {"done", "failed"}
    # The old supervisor's task actors, pools and workers went with it: no orphan is left.
    alive = set(system_pids(client.spec))
    old = {w["pid"] for pool in first["pools"].values() for w in pool["workers"]}
    assert not old & alive, f"workers of the dead supervisor still run: {old & alive}"
    assert serves(client)


class DyingPeer:
    """A port whose process dies as a request reaches it: the request's connection is accepted (the kernel's
    backlog), then reset (``reset`` set) before the sender writes; after ``resets`` such connections the port
    refuses, as a dead process's does."""

    def __init__(self, resets: int = 1) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = ActorAddress(TCPv4ActorAddress("127.0.0.1", self.listener.getsockname()[1]))
        if not resets:
            self.listener.close()
        self.reset = threading.Event()
        self.thread = threading.Thread(target=self._die, args=(resets,), daemon=True)
        self.thread.start()

    def _die(self, resets: int) -> None:
        for left in range(resets, 0, -1):
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            if left == 1:
                self.listener.close()  # the next connect is refused
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # a reset, as the kernel sends for a dying process's connection
            self.reset.set()

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass  # closed already
        self.listener.close()
        self.thread.join(60)


def test_a_request_to_a_supervisor_dying_as_it_is_sent_is_asked_of_the_new_one_at_once(pegasus, monkeypatch) -> None:
    """Regression: a kept client waited 30-70 s after a supervisor's or an admin's SIGKILL (most runs beside three
    CPU spinners).  Three orders of events, each made explicit here:
    - the request's new connection was accepted by the dying process, then reset before it was written:
      Thespian tries that again only after 35 s x the attempt, past the client's 30 s timeout;
    - the kernel refused the connect at once, inside ``scheduleTransmit``: Thespian's transmit-only run, with
      nothing in flight, returned without telling the send, which took it as delivered (or, later, waited);
    - the send waited for every transmit of its process, so each later request waited for a stale one."""
    from thespian.system.transport.TCPTransport import TCPTransport

    client = pegasus()
    task = client.submit("echo hi")["task_id"]
    dying = DyingPeer()
    write = TCPTransport._next_XMIT_2

    def after_the_reset(transport: Any, intent: Any) -> Any:
        if intent.targetAddr == dying.address:
            dying.reset.wait(60)
        return write(transport, intent)

    monkeypatch.setattr(TCPTransport, "_next_XMIT_2", after_the_reset)
    try:
        client._supervisor = dying.address  # the request reaches the dying supervisor: reset, then refused
        assert client.get(task)["task_id"] == task  # asked again of the guardian's supervisor
        assert dying.reset.is_set()
    finally:
        dying.close()

    dead = DyingPeer(resets=0)  # closed: refused
    connect = socket.socket.connect

    def refused_at_once(sock: socket.socket, address: Any) -> Any:
        if address == dead.address.addressDetails.connectArgs[0]:
            raise ConnectionRefusedError(111, "Connection refused")  # as the kernel does when it has the reset
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", refused_at_once)
    client._supervisor = dead.address
    assert client.get(task)["task_id"] == task
    dead.close()

    broken = DyingPeer(resets=1000)  # a peer that resets every connection
    try:
        # A send its peer never acknowledged is not reported delivered (it was, at its timeout, before).
        assert send(client.asys, broken.address, m.Stats(), timeout=1.0) in ("Failed", "Timeout")
        # A transmit Thespian goes on trying is not waited for by the next request: a send waits for its own.
        client.asys._systemBase.transport.scheduleTransmit(None, TransmitIntent(broken.address, m.Stats()))
        assert client.get(task)["task_id"] == task
    finally:
        broken.close()


def serves(client: Client) -> bool:
    done = client.wait(client.submit("what is 6 * 7?")["task_id"], timeout=60)
    return done["lifecycle_state"] == "done" and "42" in str(done["result"])


def test_a_killed_admin_of_a_background_system_is_restarted(tmp_path: Path) -> None:
    home, keys = tmp_path / "home", tmp_path / "keys.txt"
    port = procs.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]),  # the test plugin, importable by the CLI too
               PEGASUS_HOME=str(home), PEGASUS_TOOLS__PLUGINS='["tests.support.tools:register"]',
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

        assert_every_task_finished_and_no_key_twice(client, tasks, keys)
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


# -- stage workers that stop answering, and a prompt stop ---------------------------------------


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """SIGSTOP one worker of the test's own system; SIGKILL exactly that pid afterwards if it lives."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if procs.is_alive(pid):
            os.kill(pid, signal.SIGKILL)


def pool_events(state_dir: Path, event: str) -> list[dict]:
    """The pools' log records named ``event`` (logs/pegasus.jsonl)."""
    lines = (state_dir / "logs" / "pegasus.jsonl").read_text().splitlines()
    return [record for record in map(json.loads, lines) if record.get("event") == event]


def ended_as_hung(state_dir: Path, pid: int) -> bool:
    """The pool ended ``pid`` for being stopped (its health check), not for overrunning a stage deadline."""
    return (any(r.get("pid") == pid for r in pool_events(state_dir, "worker_hung"))
            and pool_events(state_dir, "stage_deadline") == [])


def test_a_request_held_by_a_stopped_worker_runs_on_another_within_seconds(pegasus, state_dir: Path) -> None:
    """Regression: with a 60 s stage timeout, the held and the running request waited 60 s.  Now the pool's
    health check ends the stopped worker (``worker_hung``) and both run again; no deadline is reached."""
    client = pegasus(pools={"llm_workers": 2, "llm_prefetch": 1, "llm_timeout_s": 60.0},
                     cognition={"latency_ms": 400})
    ids = [client.submit(f"what is {n} + 1?")["task_id"] for n in range(5)]
    holder = wait_for(lambda: next((w for w in client.stats()["pools"]["llm"]["workers"] if w["held"] == 1 and w["pid"]), None),
                      what="an llm worker holding a request")
    running, held = holder["tasks"]
    began = time.monotonic()
    with stopped(holder["pid"]):
        for task_id in (held, running):  # the held one never ran; the running one may run again (no effect)
            done = client.wait(task_id, timeout=60)
            assert done["lifecycle_state"] == "done", done
        elapsed = time.monotonic() - began
        wait_for(lambda: not procs.is_alive(holder["pid"]), what="the pool to end the stopped worker")
    assert ended_as_hung(state_dir, holder["pid"])  # not the 60 s stage timeout it waited before
    assert all(client.wait(task_id, timeout=60)["lifecycle_state"] == "done" for task_id in ids)
    llm = client.stats()["pools"]["llm"]
    assert llm["replaced"] == 1 and llm["size"] == 2
    print(f"\nheld and running requests of a stopped worker done {elapsed:.1f}s after the SIGSTOP")


def test_a_stopped_worker_mid_effectful_step_is_reported_not_repeated(pegasus, tmp_path: Path, state_dir: Path) -> None:
    """Regression: the task waited the step's 30 s timeout.  The effect had happened: unknown, once; the worker
    is ended by the pool's health check (``worker_hung``), no deadline reached."""
    keys = tmp_path / "keys.txt"
    client = pegasus(**PLUGIN)
    task_id = client.submit(append_key_request(keys, 20))["task_id"]
    wait_for(lambda: keys_in(keys), what="the effect")
    began = time.monotonic()
    with stopped(pid := busy_tool_worker(client)["pid"]):
        final = client.wait(task_id, timeout=60)
        elapsed = time.monotonic() - began
    assert (final["lifecycle_state"], final["exit_reason"]) == ("failed", "unknown")
    assert [e["key"] for e in final["effects_unknown"]] == [f"{task_id}/a1.0/i0/s0"]
    assert keys_in(keys) == [f"{task_id}/a1.0/i0/s0"]
    assert ended_as_hung(state_dir, pid)  # not the step's 30 s timeout it waited before
    print(f"\nan effectful step of a stopped worker reported {elapsed:.1f}s after the SIGSTOP")


def test_stop_with_a_worker_busy_in_a_long_tool_step_is_prompt_and_logs_no_error(pegasus, state_dir: Path) -> None:
    """Regression: stop took 12.4 s (the busy worker read its exit request only after its
    tool call) and logged `Cannot operate on a closed database`."""
    client = pegasus()
    task_id = client.submit("sleep 30")["task_id"]
    wait_for(lambda: client.get(task_id)["state"] == "acting"
             and any(w["busy"] for w in client.stats()["pools"]["tool"]["workers"]), what="the sleep to run")
    began = time.monotonic()
    client.close()
    elapsed = time.monotonic() - began
    logs = state_dir / "logs"
    errors = [line for line in (logs / "pegasus.jsonl").read_text().splitlines()
              if json.loads(line).get("level") in ("error", "critical")]
    assert errors == []
    thespian = logs / "thespian.log"
    # A child's exit notice sent to a parent that already exited at the stop is Thespian's line, not a fault.
    assert [line for line in (thespian.read_text().splitlines() if thespian.exists() else [])
            if " ERR " in line and "ChildActorExited" not in line] == []
    # How prompt is a figure (12.4 s before: the admin's 10 s give-up), printed, not a condition.
    print(f"\nstop with a worker busy in a 30 s tool step: {elapsed:.2f}s")


def test_a_request_to_an_address_that_is_no_longer_the_supervisor_is_noticed(pegasus) -> None:
    """Regression: after a whole-system restart the new guardian counts supervisors from 1 again, and a
    request that went to the old supervisor's address (another actor's now, which ignores it) waited
    the client's whole 30 s timeout.  The guardian's incarnation tells the client within one check."""
    from actors.client.client import WATCH_S
    from actors.client.errors import SupervisorReplaced

    client = pegasus()
    task = client.submit("echo hi")["task_id"]
    client._supervisor = client.guardian  # a live actor that answers no task request
    client._incarnation = ("a guardian of the system before its restart", client.generation)
    began = time.monotonic()
    with pytest.raises(SupervisorReplaced):  # raised by a check (every WATCH_S); the whole timeout raises another
        client.get(task)
    print(f"\na request to a replaced supervisor noticed in {time.monotonic() - began:.1f}s")
    assert client.get(task)["task_id"] == task and WATCH_S < client.timeout
