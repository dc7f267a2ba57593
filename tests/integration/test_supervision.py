"""Supervision across processes: a child that keeps dying is said to, named with what it died of, and escalated.

* A pool process killed over and over: restarted with a growing pause, and after more
  than 5 deaths in 60 s the supervisor gives up on it (OTP's escalation): it tells the
  guardian why and ends, the guardian starts a new one, and ``stats`` says why.
* The home host (the pools in a task actor, the default) killed over and over: a run can
  do that, so its pools crash-loop slowly instead, and the same supervisor serves on.

The guardian's own policy for a supervisor that keeps dying (slow down, say it
crash-loops) is the same core's, unit-tested in tests/pegasus/test_supervision.py.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from actors.runtime import procs
from actors.client import Client
from pegasus.errors import PegasusError
from tests.support.processes import titled
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

# Pauses of 0, 0.05, 0.1, 0.2, 0.4 s, then 0.5 s (5 s at the defaults): the deaths, the escalation and the
# slow-down counted the same, without waiting out the back-off.
FAST_RESTARTS = {"restart_pause_max_s": 0.5}


def stats(client: Client) -> dict | None:
    """Stats, or None while a supervisor is being replaced (the client says so rather than wait)."""
    try:
        return client.stats()
    except PegasusError:
        return None


def serves(client: Client) -> bool:
    done = client.wait(client.submit("what is 6 * 7?")["task_id"], timeout=60)
    return done["lifecycle_state"] == "done" and "42" in str(done["result"])


def _events(state_dir: Path) -> str:
    """The supervision events of the system's log, to say what happened when a wait fails."""
    lines = (state_dir / "logs" / "pegasus.jsonl").read_text().splitlines()
    return "\n".join(line[:300] for line in lines if any(word in line for word in ("pool_", "supervisor_", "crash")))


def llm_pool_pid(client: Client) -> int | None:
    now = stats(client)
    return now["pools"]["llm"]["pid"] if now else None


def next_pools_process(client: Client, role: str, killed: list[int]) -> int:
    """The pid of the pools' process the supervisor started after ``killed``, as ``stats`` reports it.  Its
    title is seen first: a ``stats`` asked while the pools' process is dead waits out STATS_WAIT_S for it."""
    wait_for(lambda: [pid for pid in titled(client.spec, role, parent="supervisor") if pid not in killed],
             what=f"a new {role}")
    return wait_for(lambda: (pid := llm_pool_pid(client)) not in killed and pid, what=f"the new {role} serving")


def test_a_pool_that_keeps_dying_is_escalated_and_the_guardian_says_why(pegasus, state_dir: Path) -> None:
    port = procs.free_port()
    # A short reply timeout: a request that reached the supervisor as it gave up is asked again soon.
    client = Client.connect(pegasus(http={"enabled": True, "port": port},
                                    pools={"home_host": False, **FAST_RESTARTS}).settings, timeout=5.0)
    first = client.stats()["supervisor_pid"]
    killed: list[int] = []
    for _ in range(6):  # intensity 5 within 60 s: the 6th death is one too many
        pool = next_pools_process(client, "llm pool", killed)
        os.kill(pool, signal.SIGKILL)
        killed.append(pool)
    try:
        now = wait_for(lambda: (s := stats(client)) and s["supervisor_pid"] != first and s, timeout=120,
                       what="a new supervisor")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_events(state_dir)}") from None
    supervisor = now["supervision"]["supervisor"]
    assert supervisor["restarts"] == 1 and client.generation == 2
    assert supervisor["last_reason"].startswith("the llm pool died 6 times within 60s"), supervisor
    assert serves(client)
    health = wait_for(lambda: _healthz(port), what="/healthz")  # the gateway's view is the guardian's too
    assert health["supervision"]["supervisor"]["restarts"] == 1 and health["crash_looping"] == []
    client.close()


def test_a_home_host_that_keeps_dying_slows_its_pools_restarts_and_the_supervisor_serves_on(pegasus) -> None:
    client = Client.connect(pegasus(pools=FAST_RESTARTS).settings, timeout=5.0)
    first = client.stats()["supervisor_pid"]
    killed: list[int] = []
    for _ in range(6):  # one death more than the pools' intensity
        home = next_pools_process(client, "task actor", killed)  # the home host: idle, the only task actor
        os.kill(home, signal.SIGKILL)
        killed.append(home)
    looping = wait_for(lambda: (s := stats(client)) and s["pools"]["llm"]["supervision"]["status"] == "crash_looping"
                       and s["pools"]["llm"]["supervision"], what="the llm pool crash-looping")
    assert looping["kind"] == "hosted_pool" and client.stats()["supervisor_pid"] == first
    done = client.wait(client.submit("what is 6 * 7?")["task_id"], timeout=60)  # after the pause, in a new home
    assert done["lifecycle_state"] == "done" and "42" in str(done["result"]), (done.get("exit_reason"), done.get("error"), done.get("stages"))
    assert client.stats()["supervisor_pid"] == first and llm_pool_pid(client) not in killed
    client.close()


def _healthz(port: int) -> dict | None:
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    except httpx.TransportError:
        return None
    return response.json() if response.status_code == 200 else None
