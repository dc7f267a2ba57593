"""A convention between hosts: a leader and two members, each in its own network namespace (needs root).

Each host is a namespace with its own veth and address on a bridge
(tests/support/netns.py); each admin binds its own non-loopback address
(``allow_non_loopback``), members hold the leader's system key by file, and
every frame between them is authenticated.  Failure detection is lowered
(conftest FAST_CONVENTION: a member missing 2 check-ins of 1 s is dead).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import netns
from tests.support.waiting import wait_for

from .hosts import Driver, Machines, listening_on

pytestmark = pytest.mark.integration

UNAVAILABLE = netns.unavailable()


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[Machines]:
    if UNAVAILABLE:
        pytest.skip(f"no network namespaces here: {UNAVAILABLE}")
    hosts = netns.Hosts(["leader", "a", "b"])
    machines = Machines(tmp_path, hosts)
    try:
        yield machines
    finally:
        machines.close()


def ready_workers(driver: Driver) -> dict[str, dict[str, int]]:
    """Per pool, the ready workers per member."""
    found: dict[str, dict[str, int]] = {}
    for pool, part in driver.call("stats")["pools"].items():
        for w in part["workers"]:
            if w["ready"]:
                found.setdefault(pool, {}).setdefault(w["member"], 0)
                found[pool][w["member"]] += 1
    return found


def test_a_hundred_tasks_run_on_two_members_each_on_its_own_host(machines: Machines) -> None:
    """Leader without workers; members a and b each offer 2 llm + 1 tool workers: 100 tasks use both."""
    leader = machines.start_leader(convention={"local_workers": False})
    a = machines.join("a", llm=2, tool=1)
    b = machines.join("b", llm=2, tool=1)
    driver = machines.driver()
    want = {"llm": {a.member_name: 2, b.member_name: 2}, "tool": {a.member_name: 1, b.member_name: 1}}
    wait_for(lambda: ready_workers(driver) == want, what="2 + 1 workers on each member")
    started = time.monotonic()
    ids = [t["task_id"] for t in driver.call("submit_many", [f"what is {n} + {n}?" for n in range(100)])]
    done = [driver.call("wait", task_id, 60) for task_id in ids]
    elapsed = time.monotonic() - started
    print(f"\n100 tasks across 2 member hosts in {elapsed:.2f}s")
    assert [d["lifecycle_state"] for d in done] == ["done"] * 100
    members = {s["member"] for d in done for s in d["stages"]}
    assert members == {a.member_name, b.member_name}
    # Each admin's every process listens on its own host's address only, never on loopback.
    for host, spec in (("leader", leader), ("a", a), ("b", b)):
        for pid in machines.pids(host):
            assert listening_on(pid) <= {machines.hosts.address(host)}, (host, pid, listening_on(pid))
