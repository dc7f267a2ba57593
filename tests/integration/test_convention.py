"""Several admins on one host (127.0.0.1, one free port each): placement by capability, losing a member.

A leader and members form a Thespian convention over loopback -- no network
namespaces needed: Thespian names an admin by (address, port), so admins on
one address differ by port.  Members run only stage workers; the supervisor,
pools and store stay on the leader.  Timing is lowered (conftest
FAST_CONVENTION) so a killed member is noticed in ~2-3 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from actors.client import Client
from actors.runtime import convention as conv, procs
from actors.runtime.lifecycle import System
from actors.runtime.system import SystemStartError, system_pids

from .conftest import FAST_CONVENTION, PROJECT_ROOT, Convention
from tests.support.tools import append_key_request, keys_in
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

LLM_STAGES = {"perceive", "think", "plan", "reflect", "reason"}




def placed(client: Any, pool: str, expected: dict[str, int]) -> Callable[[], dict[str, Any] | None]:
    """A predicate: the pool's ready workers per member are exactly ``expected`` (stats then)."""
    def check() -> dict[str, Any] | None:
        stats = client.stats()
        workers = stats["pools"][pool]["workers"]
        ready: dict[str, int] = {}
        for w in workers:
            if w["ready"]:
                ready[w["member"]] = ready.get(w["member"], 0) + 1
        check.last = [(w["member"], w["ready"], w.get("busy")) for w in workers]  # type: ignore[attr-defined]
        return stats if ready == expected and len(workers) == sum(expected.values()) else None
    return check


def cli(conv_: Convention, home: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``pegasus`` command line (python -m actors.cli), with the fast convention timing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    env["PEGASUS_HOME"] = str(conv_.root / home)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    for key, value in FAST_CONVENTION.items():
        env[f"PEGASUS_CONVENTION__{key.upper()}"] = str(value)
    return subprocess.run([sys.executable, "-m", "actors.cli", *args], cwd=conv_.root, env=env,
                          capture_output=True, text=True, timeout=60)


def test_workers_land_where_their_capability_is_and_tasks_run_on_members(convention: Convention) -> None:
    """Leader with no local workers; member A offers llm workers only, member B (joined by the CLI) tool only."""
    client = convention.leader(convention={"local_workers": False})
    leader_name = client.spec.member_name
    started = time.monotonic()
    a = convention.join("a", llm_workers=2, tool_workers=0, zone="rack-1")
    b_settings = convention.member_settings("b")
    b_port = b_settings.system.admin_port
    joined = cli(convention, "b", "join", convention.leader_address, "--port", str(b_port),
                 "--key-file", str(convention.key_file), "--capability", "pegasus.llm_workers=0", "--capability", "pegasus.tool_workers=2", "--json")
    b = conv.member_spec(b_settings, convention.leader_address,
                         {"pegasus.llm_workers": 0, "pegasus.tool_workers": 2})
    convention.track(b)  # stopped at the end whatever happened
    assert joined.returncode == 0, joined.stderr
    assert json.loads(joined.stdout)["member"] == b.member_name == f"127.0.0.1:{b_port}"

    wait_for(placed(client, "llm", {a.member_name: 2}), what="2 llm workers on member a")
    stats = wait_for(placed(client, "tool", {b.member_name: 2}), what="2 tool workers on member b")
    print(f"\ntwo members joined and all 4 workers ready {time.monotonic() - started:.2f}s after the first join")
    convention.track(a)
    convention.track(b)

    members = {row["name"]: row for row in stats["members"]}
    assert set(members) == {leader_name, a.member_name, b.member_name}
    assert members[leader_name]["local"] and members[leader_name]["workers"] == {"llm": 0, "tool": 0}
    assert members[a.member_name]["workers"] == {"llm": 2, "tool": 0}
    assert members[a.member_name]["capabilities"]["pegasus.zone"] == "rack-1"
    assert members[b.member_name]["workers"] == {"llm": 0, "tool": 2}
    # Each worker is a process of the member it was placed on.
    for pool, member in (("llm", a), ("tool", b)):
        assert {w["pid"] for w in stats["pools"][pool]["workers"]} <= set(system_pids(member))

    tasks = [client.submit(f"what is {n} + {n}?", machine="reason_act" if n % 2 else "classic") for n in range(6)]
    done = [client.wait(t["task_id"], timeout=60) for t in tasks]
    assert [d["lifecycle_state"] for d in done] == ["done"] * 6
    stages = [s for d in done for s in d["stages"]]
    assert {(s["member"], s["admin_port"]) for s in stages if s["stage"] in LLM_STAGES} == {(a.member_name, a.admin_port)}
    assert {(s["member"], s["admin_port"]) for s in stages if s["stage"] == "act"} == {(b.member_name, b.admin_port)}

    # Every socket of every process of the three admins is on loopback.
    listening = procs.listening_sockets()
    for spec in (client.spec, a, b):
        for pid in system_pids(spec):
            assert all(host == "127.0.0.1" for host, _ in procs.listening_addresses(pid, listening)), (spec, pid)

    text = cli(convention, "leader", "stats", "--port", str(convention.leader_port))
    assert text.returncode == 0, text.stderr
    assert f"{a.member_name:<22} member  workers: llm 2, tool 0" in text.stdout
    assert f"{b.member_name:<22} member  workers: llm 0, tool 2" in text.stdout

    # A member that leaves (pegasus stop) takes its workers along; the pool shrinks at once.
    stopped = cli(convention, "b", "stop", "--port", str(b_port))
    assert stopped.returncode == 0, stopped.stderr
    wait_for(placed(client, "tool", {}), timeout=60, what="the tool pool to lose member b")

    # Deliberately the other order (the fixture stops members first): a leader that stops
    # tells its workers on members to exit, so none is left orphaned on member a.
    workers_on_a = {w["pid"] for w in client.stats()["pools"]["llm"]["workers"]}
    convention.leader_seen.update(procs.identities(system_pids(client.spec)))
    client.close()
    wait_for(lambda: not any(procs.is_alive(pid) for pid in workers_on_a), timeout=10, what="a's workers to exit")
    assert len(system_pids(a)) == 4  # its launcher, its watcher, admin and logger remain, until `pegasus stop`


def test_a_member_killed_mid_run_loses_no_task_and_the_pools_recover(convention: Convention) -> None:
    """SIGKILL every process of a member while its workers run steps: each task still ends; a new member refills."""
    client = convention.leader(pools={"llm_workers": 2, "tool_workers": 1}, runtime={"max_active_tasks": 6})
    me = client.spec.member_name
    b = convention.join("b", llm_workers=0, tool_workers=2)
    wait_for(placed(client, "tool", {me: 1, b.member_name: 2}), what="1 local + 2 member tool workers")
    convention.track(b)
    leader_pids = system_pids(client.spec)
    # What makes the pool's SIGKILL of an overrunning worker safe: a local worker is the
    # pool process's own child; a member's worker (same host, too) is its admin's child.
    for w in client.stats()["pools"]["tool"]["workers"]:
        parent = procs.read_stat(w["pid"]).ppid
        assert parent in (leader_pids if w["member"] == me else system_pids(b)), w

    tasks = [client.submit(f"sleep 1 and then what is {n} * 3?") for n in range(6)]

    def busy_on_b() -> bool:
        workers = client.stats()["pools"]["tool"]["workers"]
        return sum(1 for w in workers if w["busy"] and w["member"] == b.member_name) == 2

    wait_for(busy_on_b, what="both of b's tool workers busy")
    victims = system_pids(b)
    assert len(victims) >= 4  # launcher, admin, logger, 2 workers
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_for(placed(client, "tool", {me: 1}), timeout=60, what="the tool pool to shrink to the local worker")
    noticed = time.monotonic() - killed
    print(f"\nkilled member noticed after {noticed:.2f}s")
    assert not any(procs.is_alive(pid) for pid in victims)
    assert all(procs.is_alive(pid) for pid in leader_pids)  # nothing of the leader was touched

    joined = time.monotonic()
    c = convention.join("c", llm_workers=0, tool_workers=2)
    wait_for(placed(client, "tool", {me: 1, c.member_name: 2}), what="the pool to grow again")
    print(f"replacement member's workers ready {time.monotonic() - joined:.2f}s after join")
    convention.track(c)

    ended = [client.wait(t["task_id"], timeout=60) for t in tasks]
    assert all(t["lifecycle_state"] in ("done", "failed") for t in ended), [t["lifecycle_state"] for t in ended]
    lost = [s for t in ended for s in t["stages"] if s["stage"] == "act" and not s["ok"]]
    # Answered as failed like a worker crash: "convention member ... left" (or, when Thespian's
    # failed-creation notice beats the membership update, "stage worker died").
    assert len(lost) >= 2 and all(s["member"] == b.member_name for s in lost), lost
    assert all("left the convention" in s["error"] or "died" in s["error"] for s in lost), lost
    assert all(t["lifecycle_state"] == "done" for t in ended)  # a failed step is replanned: every task still ends well
    extra = client.wait(client.submit("sleep 0.2 and then what is 6 * 7?")["task_id"], timeout=60)
    assert extra["lifecycle_state"] == "done" and "42" in str(extra["result"])


@pytest.mark.parametrize("bind", ["10.11.12.13", "0.0.0.0"])
def test_leader_and_join_refuse_a_non_loopback_bind_without_the_setting(convention: Convention, bind: str) -> None:
    settings = convention.member_settings("m", system={"bind": bind})
    with pytest.raises(SystemStartError, match="refusing to bind"):
        System.member(settings, "127.0.0.1:19999", {}).join()
    with pytest.raises(SystemStartError, match="refusing to bind|needs \\[system\\] advertise"):
        Client.start_leader(settings, daemon=False)
    # One machine or several, not both: a loopback member cannot serve a leader elsewhere.
    with pytest.raises(SystemStartError, match="both must be loopback"):
        System.member(convention.member_settings("n"), "10.11.12.13:19999", {}).join()
    if bind == "10.11.12.13":  # the command line says the same, with a one-line reason
        port = str(settings.system.admin_port)
        env_bind = ["--config", str(_config(convention, bind))]
        joined = cli(convention, "m", "join", "127.0.0.1:19999", "--port", port, *env_bind)
        assert joined.returncode == 1 and "refusing to bind the actor system to 10.11.12.13" in joined.stderr
        led = cli(convention, "m", "start", "--leader", "--port", port, *env_bind)
        assert led.returncode == 1 and "refusing to bind" in led.stderr
    assert not (convention.root / "m" / "system.json").exists()  # nothing was started


def _config(convention: Convention, bind: str) -> Any:
    path = convention.root / "bind.toml"
    path.write_text(f'[system]\nbind = "{bind}"\n')
    return path


def test_the_commands_a_user_types(convention: Convention) -> None:
    """pegasus start --leader; pegasus join HOST:PORT --capability ...; stats; run; stop (member, then leader)."""
    leader_port = str(convention.leader_port)
    member = convention.member_settings("m")
    member_port = str(member.system.admin_port)
    leader_settings = convention.settings(convention.leader_port, "leader", convention={"lead": True})
    started = cli(convention, "leader", "start", "--leader", "--port", leader_port)
    convention.track_leader(conv.leader_spec(leader_settings))
    assert started.returncode == 0, started.stderr
    assert f"pegasus join 127.0.0.1:{leader_port}" in started.stdout
    joined = cli(convention, "m", "join", f"127.0.0.1:{leader_port}", "--port", member_port,
                 "--key-file", str(convention.key_file), "--capability", "pegasus.llm_workers=1", "--capability", "pegasus.tool_workers=1")
    convention.track(conv.member_spec(member, convention.leader_address, {}))
    assert joined.returncode == 0, joined.stderr
    assert f"member 127.0.0.1:{member_port}" in joined.stdout
    assert "offering pegasus.llm_workers=1, pegasus.tool_workers=1" in joined.stdout  # not a dict (issue 16)

    def member_ready() -> dict[str, Any] | None:
        stats = json.loads(cli(convention, "leader", "stats", "--port", leader_port, "--json").stdout)
        ready = [w for pool in stats["pools"].values() for w in pool["workers"]
                 if w["member"] == f"127.0.0.1:{member_port}" and w["ready"]]
        return stats if len(ready) == 2 else None

    stats = wait_for(member_ready, what="the member's workers")
    assert {row["name"] for row in stats["members"]} == {f"127.0.0.1:{leader_port}", f"127.0.0.1:{member_port}"}
    ran = cli(convention, "leader", "run", "what is 20 + 22?", "--port", leader_port)
    assert ran.returncode == 0 and "42" in ran.stdout, ran.stdout + ran.stderr
    for home, port in (("m", member_port), ("leader", leader_port)):  # members before the leader
        stopped = cli(convention, home, "stop", "--port", port)
        assert stopped.returncode == 0, stopped.stderr


def test_the_placement_check_names_one_member_and_needs_its_workers() -> None:
    """StageWorker.actorSystemCapabilityCheck: unplaced -> anywhere; placed -> only that member, if it offers the pool."""
    from actors.worker import StageWorker
    from pegasus.pool.placement import placement

    check = StageWorker.actorSystemCapabilityCheck
    a = {"pegasus.member": "10.0.0.2:19190", "pegasus.llm_workers": 4, "pegasus.tool_workers": 0}
    assert check(a, {}) and check({}, {})
    assert check(a, placement("10.0.0.2:19190", "llm"))
    assert not check(a, placement("10.0.0.2:19190", "tool"))  # offers no tool workers
    assert not check(a, placement("10.0.0.3:19190", "llm"))  # another member
    assert not check({**a, "pegasus.llm_workers": "many"}, placement("10.0.0.2:19190", "llm"))


def test_command_line_values_are_parsed_or_refused_with_the_reason() -> None:
    assert conv.parse_capability("pegasus.llm_workers=4") == ("pegasus.llm_workers", 4)
    assert conv.parse_capability("gpu=true") == ("gpu", True)
    assert conv.parse_capability("zone = rack-1") == ("zone", "rack-1")
    assert conv.parse_address("localhost:19190") == ("127.0.0.1", 19190)
    for bad in ("pegasus.tool_workers=-1", "pegasus.llm_workers=2.5", "=3", "novalue"):
        with pytest.raises(conv.ConventionError):
            conv.parse_capability(bad)
    for bad in ("19190", "host:", "host:99999"):
        with pytest.raises(conv.ConventionError, match="HOST:PORT"):
            conv.parse_address(bad)


def test_a_leader_without_workers_queues_until_a_member_joins(convention: Convention) -> None:
    """local_workers = false and no member yet: a stage waits; past its timeout it fails, never hangs.  The
    leader was alone until then (its admin's loop unbounded: thespian_patches quiet_admin): a member that
    then goes silent (stopped, its sockets open) is still noticed by its missed check-ins."""
    client = convention.leader(convention={"local_workers": False}, pools={"llm_timeout_s": 5.0})
    starved = client.wait(client.submit("what is 1 + 1?")["task_id"], timeout=60)
    assert starved["lifecycle_state"] == "failed" and "no llm worker" in starved["error"], starved
    waiting = client.submit("what is 2 + 2?")["task_id"]
    member = convention.join("a", llm_workers=1, tool_workers=1)  # joins within the waiting stage's timeout
    convention.track(member)
    # Not failed: still running, or (on a loaded machine, before this read) already through.
    assert client.get(waiting)["lifecycle_state"] in {"running", "verifying", "verified", "done"}
    done = client.wait(waiting, timeout=60)
    assert done["lifecycle_state"] == "done" and "4" in str(done["result"])
    silent = system_pids(member)
    for pid in silent:
        os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(placed(client, "llm", {}), timeout=60, what="the silent member's workers to be dropped")
    finally:
        for pid in silent:
            os.kill(pid, signal.SIGKILL)


def test_a_member_worker_journals_an_effectful_step_with_the_leaders_supervisor(convention: Convention,
                                                                                tmp_path) -> None:
    """An effectful step on a member's worker asks the leader's supervisor (StepStarting) before it runs."""
    client = convention.leader(convention={"local_workers": False},
                               tools={"plugins": ["tests.support.tools:register"]})
    member = convention.join("a", llm_workers=1, tool_workers=1)
    wait_for(placed(client, "tool", {member.member_name: 1}), what="a tool worker on the member")
    keys = tmp_path / "keys.txt"
    task_id = client.submit(append_key_request(keys, 0))["task_id"]
    done = client.wait(task_id, timeout=60)
    assert done["lifecycle_state"] == "done" and done["effects_unknown"] == [], done
    assert keys_in(keys) == [f"{task_id}/a1.0/i0/s0"]
    acts = [s for s in done["stages"] if s["stage"] == "act"]
    assert acts and {s["member"] for s in acts} == {member.member_name}
