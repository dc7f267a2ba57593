"""Scenario ``hosts`` (opt-in: ``--only hosts``, needs root): a convention between hosts against one stack.

A leader without workers and two members (2 llm + 2 tool workers each), in network namespaces
(tests/support/netns.py), then the same on 127.0.0.1: the hop and the llm pool's efficiency on both;
across namespaces also a member's link cut during a burst of effectful steps, and a leader SIGKILL and
restart.  The link has native latency (no ``netem``); stage times are each worker's ``time.time()`` (one
kernel, one clock).  docs/performance.md, "What each scenario measures"; figures: docs/deploy.md.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import check, stage_hops, summary_ms
from benchmarks.pool import efficiency

NAME = "hosts"
MACHINES = ("classic", "reason_act")
LLM_PER_MEMBER = 2


def _convention(root: Path, hosts: Any, latency_ms: float) -> Any:
    from tests.support.hosts import Machines

    machines = Machines(root, hosts)
    n = 2 * LLM_PER_MEMBER
    machines.start_leader(convention={"local_workers": False}, cognition={"latency_ms": latency_ms},
                          runtime={"max_active_tasks": 4 * n + 4},
                          tools={"plugins": ["tests.support.tools:register"]})
    for host in ("a", "b"):
        machines.join(host, llm=LLM_PER_MEMBER, tool=2)
    return machines


def _ready(driver: Any) -> dict[str, int]:
    found: dict[str, int] = {}
    for part in driver.call("stats")["pools"].values():
        for w in part["workers"]:
            if w["ready"]:
                found[w["member"]] = found.get(w["member"], 0) + 1
    return found


def _wait(predicate: Any, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def _hops_and_pool(machines: Any, tasks: int, burst: int, latency_ms: float) -> dict[str, Any]:
    driver = machines.driver()
    _wait(lambda: sum(_ready(driver).values()) == 8, 60, "8 workers on the members")
    figures: dict[str, Any] = {}
    for machine in MACHINES:
        driver.call("wait", driver.call("submit", "what is 2 + 3 * 4?", machine=machine)["task_id"], 60)  # warm-up
        hops: list[float] = []
        for _ in range(tasks):
            done = driver.call("wait", driver.call("submit", "what is 2 + 3 * 4?", machine=machine)["task_id"], 60)
            if done["lifecycle_state"] != "done":
                raise RuntimeError(f"{machine} task ended {done['lifecycle_state']}: {done.get('error')}")
            hops += stage_hops(done["stages"])
        figures[machine] = summary_ms(hops)
    ids = [t["task_id"] for t in driver.call("submit_many", [f"what is {i} + 1?" for i in range(burst)])]
    ended = [driver.call("wait", task_id, 120) for task_id in ids]
    llm = [s for e in ended for s in e["stages"] if s.get("pool") == "llm"]
    figures["pool"] = {"tasks": burst, "done": sum(e["lifecycle_state"] == "done" for e in ended),
                       **efficiency(llm, 2 * LLM_PER_MEMBER, latency_ms)}
    stats = driver.call("stats")
    figures["rtt"] = {row["name"]: row["contact"] for row in stats["members"] if row["contact"]}
    return figures


def _partition_and_restart(machines: Any, cut_s: float, tasks: int, keys: Path) -> dict[str, Any]:
    from tests.support.tools import append_key_request, keys_in

    driver = machines.driver()
    b = machines.specs["b"].member_name
    texts = [*(f"sleep 0.2 and then what is {n} * 3?" for n in range(tasks)),
             *(append_key_request(keys, 1.0) for _ in range(4))]
    ids = [t["task_id"] for t in driver.call("submit_many", texts)]
    time.sleep(1.0)
    machines.hosts.cut("b")
    cut = time.monotonic()
    detected = _wait(lambda: b not in _ready(driver), 60, "the cut member declared gone")
    time.sleep(max(0.0, cut_s - (time.monotonic() - cut)))
    machines.hosts.heal("b")
    rejoined = _wait(lambda: _ready(driver).get(b) == LLM_PER_MEMBER + 2, 60, "the cut member's workers back")
    ended = [driver.call("wait", task_id, 120) for task_id in ids]
    driver.close()
    more = [t["task_id"] for t in machines.driver().call("submit_many", texts[:tasks])]
    machines.kill("leader")
    down = time.monotonic()
    restarted = machines.pegasus("leader", "start", "--leader")
    if restarted.returncode != 0:
        raise RuntimeError(restarted.stderr)
    machines.pids("leader")
    started_s = time.monotonic() - down
    driver = machines.driver()
    _wait(lambda: len(_ready(driver)) == 2, 60, "both members serving the new leader")
    back = time.monotonic() - down
    ended += [driver.call("wait", task_id, 120) for task_id in more]
    made = keys_in(keys)
    return {"cut_s": cut_s, "detected_s": round(detected, 3), "rejoined_after_heal_s": round(rejoined, 3),
            "leader_restart_s": round(started_s, 3), "members_back_after_restart_s": round(back, 3),
            "tasks": len(ended), "done": sum(e["lifecycle_state"] == "done" for e in ended),
            "effects_unknown": sum(bool(e.get("effects_unknown")) for e in ended),
            "effects": len(made), "repeated_effects": len(made) - len(set(made))}


def run(quick: bool) -> dict[str, Any]:
    from tests.support import netns

    why = netns.unavailable()
    if why:
        raise RuntimeError(f"the hosts scenario needs network namespaces: {why}")
    latency_ms = 20.0 if quick else 50.0
    tasks, burst, cut_s = (5, 36, 6.0) if quick else (40, 180, 30.0)
    figures: dict[str, Any] = {"latency_ms": latency_ms, "llm_workers": 2 * LLM_PER_MEMBER}
    with tempfile.TemporaryDirectory(prefix="pegasus-bench-hosts-") as tmp:
        for label, hosts in (("namespaces", netns.Hosts(["leader", "a", "b"])),
                             ("one_stack", netns.Loopback(["leader", "a", "b"]))):
            root = Path(tmp) / label
            root.mkdir(mode=0o700)
            machines = None
            try:
                machines = _convention(root, hosts, latency_ms)
                figures[label] = _hops_and_pool(machines, tasks, burst, latency_ms)
                if label == "namespaces":
                    figures["faults"] = _partition_and_restart(machines, cut_s, tasks, root / "keys.txt")
            finally:
                if machines is not None:
                    machines.close()
                hosts.close()
    checks = []
    for label in ("namespaces", "one_stack"):
        for machine in MACHINES:
            checks.append(check(f"{label}: {machine} hop p50", figures[label][machine]["p50_ms"], "ms"))
            checks.append(check(f"{label}: {machine} hop p99", figures[label][machine]["p99_ms"], "ms"))
        pool = figures[label]["pool"]
        checks.append(check(f"{label}: pool efficiency, 4 llm workers on 2 members", pool["efficiency"], "x",
                            ">= 0.9", pool["efficiency"] >= 0.9))
        checks.append(check(f"{label}: worker idle between stages", pool["mean_worker_gap_ms"], "ms"))
    faults = figures["faults"]
    checks += [check(f"member cut {cut_s:g}s: declared gone after", faults["detected_s"], "s"),
               check("member's workers ready after the link is back", faults["rejoined_after_heal_s"], "s"),
               check("leader SIGKILL: pegasus start --leader took", faults["leader_restart_s"], "s"),
               check("members serving the restarted leader, from its SIGKILL", faults["members_back_after_restart_s"], "s"),
               check("tasks done / all", faults["done"] / faults["tasks"], "x", "1 (but effects unknown)",
                     faults["done"] + faults["effects_unknown"] >= faults["tasks"]),
               check("repeated effects", faults["repeated_effects"], "", "0", faults["repeated_effects"] == 0)]
    note = ("hosts: hop = next stage's worker start - previous stage's worker finish; with workers on members a "
            "hop crosses the link twice (the worker's result to the task actor on the leader, the leader's pool's "
            f"Work to the next worker); stage latency L = {latency_ms:g} ms; RTT from the pools' pings of idle "
            "workers.")
    return {"figures": figures, "checks": checks, "notes": [note]}
