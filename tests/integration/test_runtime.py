"""The actor runtime on real processes (multiprocTCPBase): limits, ordering, control, failures."""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest

from actors import messages as m
from actors.runtime import procs
from actors.client import Client, RequestError
from actors.runtime.system import system_pids
from pegasus.config import Settings
from pegasus.errors import InvalidRequest
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

LLM_STAGES = {"perceive", "think", "plan", "reflect", "reason"}


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (an end at t closes before a start at t)."""
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda p: (p[0], p[1]))
    current = best = 0
    for _, delta in points:
        current += delta
        best = max(best, current)
    return best


def running_intervals(client, task_ids: list[str]) -> list[tuple[float, float]]:
    intervals = []
    for task_id in task_ids:
        start = None
        for h in client.history(task_id)["lifecycle"]:
            if h["to_state"] == "running":
                start = _ts(h["timestamp"])
            elif h["from_state"] == "running" and start is not None:
                intervals.append((start, _ts(h["timestamp"])))
                start = None
    return intervals




def test_max_overlap_helper_counts_correctly() -> None:
    assert max_overlap([(0, 2), (1, 3), (2, 4)]) == 2
    assert max_overlap([(0, 1), (1, 2)]) == 1


def test_every_socket_of_a_pegasus_system_is_on_loopback(pegasus) -> None:
    client = pegasus()
    task = client.submit("sleep 1")
    wait_for(lambda: client.get(task["task_id"])["state"] == "acting", what="acting")
    pids = system_pids(client.spec)
    assert len(pids) >= 9  # admin, logger, supervisor, 2 pools, 6 workers, the task actor
    listening = procs.listening_sockets()
    addresses = {pid: procs.listening_addresses(pid, listening) for pid in pids}
    assert any(addresses.values())
    bad = {pid: a for pid, a in addresses.items() if any(host != "127.0.0.1" for host, _ in a)}
    assert bad == {}


def test_thirty_concurrent_tasks_all_complete(pegasus) -> None:
    client = pegasus()
    tasks = [client.submit(f"what is {n} + {n}?", machine="reason_act" if n % 2 else "classic") for n in range(30)]
    results = [client.wait(t["task_id"], timeout=60) for t in tasks]
    assert [r["lifecycle_state"] for r in results] == ["done"] * 30
    assert [str(2 * n) in str(r["result"]) for n, r in enumerate(results)] == [True] * 30


def test_pool_size_and_task_cap_are_the_limits(pegasus) -> None:
    """llm pool N=2, cap K=3: never more than 2 llm stages or 3 running tasks at once, and both reached."""
    client = pegasus(pools={"llm_workers": 2}, runtime={"max_active_tasks": 3}, cognition={"latency_ms": 40})
    tasks = [client.submit(f"what is {n} * 3?") for n in range(10)]
    for t in tasks:
        assert client.wait(t["task_id"], timeout=60)["lifecycle_state"] == "done"
    stages = [s for t in tasks for s in client.get(t["task_id"])["stages"]]
    llm = [(s["started"], s["finished"]) for s in stages if s["stage"] in LLM_STAGES]
    assert len(llm) == 10 * 4
    assert max_overlap(llm) == 2
    assert len({s["pid"] for s in stages if s["stage"] in LLM_STAGES}) == 2
    assert max_overlap(running_intervals(client, [t["task_id"] for t in tasks])) == 3


def test_stage_records_have_the_worker_threads_cpu_time(pegasus) -> None:
    """``cpu_ms``: a CPU-bound tool step shows its work, a sleeping one almost none; never above the wall time."""
    client = pegasus(tools={"plugins": ["benchmarks.tools:register"]})
    burn = client.submit('call burn {"rounds": 3000000}')
    sleep = client.submit("sleep 0.3")
    stages = {}
    for task in (burn, sleep):
        assert client.wait(task["task_id"], timeout=60)["lifecycle_state"] == "done"
        stages[task["input"].split()[0]] = client.get(task["task_id"])["stages"]
    for record in stages["call"] + stages["sleep"]:
        assert 0 <= record["cpu_ms"] <= (record["finished"] - record["started"]) * 1000 + 1, record
    burned, slept = stages["call"][3], stages["sleep"][3]
    assert (burned["stage"], slept["stage"]) == ("act", "act")
    assert burned["cpu_ms"] > 100  # ~250 ms of pure-Python work at this machine's slowest
    assert (slept["finished"] - slept["started"]) >= 0.3 and slept["cpu_ms"] < 100


def test_priority_order_lower_first_fifo_within(pegasus) -> None:
    client = pegasus(runtime={"max_active_tasks": 1})
    blocker = client.submit("sleep 0.5")
    wait_for(lambda: client.get(blocker["task_id"])["lifecycle_state"] == "running", what="blocker running")
    submitted = [client.submit(f"echo {name}", priority=p) for name, p in
                 (("low", 9), ("first", 1), ("mid", 5), ("second", 1))]
    for t in submitted:
        client.wait(t["task_id"], timeout=60)
    started = sorted(submitted, key=lambda t: running_intervals(client, [t["task_id"]])[0][0])
    assert [t["input"].split()[1] for t in started] == ["first", "second", "mid", "low"]


def test_suspend_then_resume_with_a_message(pegasus) -> None:
    client = pegasus()
    task = client.submit("sleep 1")
    task_id = task["task_id"]
    wait_for(lambda: client.get(task_id)["state"] == "acting", what="acting")
    suspended = client.suspend(task_id, reason="hold on")
    assert (suspended["lifecycle_state"], suspended["state"]) == ("blocked", "suspended")
    assert suspended["question"] is None and suspended["suspend_reason"] == "hold on"  # not a question
    assert client.stats()["active"] == 0  # a suspended task holds no slot
    resumed = client.resume(task_id, message="and what is 6 * 7?")
    assert resumed["lifecycle_state"] in ("queued", "running")
    done = client.wait(task_id, timeout=60)
    assert done["lifecycle_state"] == "done" and "42" in str(done["result"])
    events = [h["event"] for h in client.history(task_id)["cognitive"]]
    assert "TASK_SUSPENDED" in events and "MESSAGE_RECEIVED" in events


def test_need_more_info_suspends_and_a_message_completes_it(pegasus) -> None:
    client = pegasus()
    task = client.submit("help me")
    blocked = client.wait(task["task_id"], until=frozenset({"blocked"}))
    assert blocked["state"] == "suspended" and blocked["question"]
    done = client.resume(task["task_id"], message="what is 10 - 4?") and client.wait(task["task_id"])
    assert done["lifecycle_state"] == "done" and "6" in str(done["result"])


def test_cancel_while_a_stage_runs_ends_that_stage_and_changes_nothing_after(pegasus) -> None:
    client = pegasus()
    task_id = client.submit("sleep 30")["task_id"]
    wait_for(lambda: client.get(task_id)["state"] == "acting", what="acting")
    busy = wait_for(lambda: [w for w in client.stats()["pools"]["tool"]["workers"] if w["busy"] and w["pid"]],
                    what="the busy tool worker")
    canceled = client.cancel(task_id)
    assert canceled["lifecycle_state"] == "canceled"
    seen = len(client.history(task_id)["cognitive"])
    # The worker stuck in the 30 s step is ended and replaced, not left busy.
    tool = wait_for(lambda: (p := client.stats()["pools"]["tool"])["replaced"] == 1 and p["busy"] == 0 and p,
                    what="the tool worker replaced")
    assert busy[0]["pid"] not in {w["pid"] for w in tool["workers"]} and tool["size"] == 3
    after = client.get(task_id)
    assert after["lifecycle_state"] == "canceled" and after["state"] == "acting"
    assert len(client.history(task_id)["cognitive"]) == seen  # no late result was applied
    assert client.wait(client.submit("echo still serving")["task_id"])["lifecycle_state"] == "done"


def test_manual_approval_policy(pegasus) -> None:
    client = pegasus(runtime={"approval_policy": "manual"})
    task_id = client.submit("what is 1 + 1?")["task_id"]
    time.sleep(0.3)
    assert client.get(task_id)["lifecycle_state"] == "draft"
    assert client.approve(task_id)["lifecycle_state"] in ("queued", "running", "verifying", "verified", "done")
    assert client.wait(task_id)["lifecycle_state"] == "done"
    with pytest.raises(RequestError, match="only a draft"):
        client.approve(task_id)


def test_verification_gates_pass_and_fail(pegasus) -> None:
    gates = [{"name": "ok", "command": ["true"], "timeout_s": 10},
             {"name": "marker", "command": ["test", "-e", "/nonexistent/pegasus-marker"], "timeout_s": 10}]
    client = pegasus(verification={"gates": gates, "max_gate_retries": 1})
    task_id = client.submit("what is 2 + 2?")["task_id"]
    failed = client.wait(task_id, timeout=60)
    assert (failed["lifecycle_state"], failed["exit_reason"]) == ("failed", "gate_failed")
    assert failed["runs"] == 2  # the first gate failure sent it back to the queue once
    assert [(g["gate"], g["ok"]) for g in failed["gates"]] == [("ok", True), ("marker", False)] * 2
    lifecycle = [h["to_state"] for h in client.history(task_id)["lifecycle"]]
    assert lifecycle.count("verifying") == 2 and "queued" in lifecycle[lifecycle.index("verifying"):]


def test_stage_timeouts_fail_the_task_and_retry_is_bounded(pegasus) -> None:
    client = pegasus(pools={"llm_timeout_s": 0.3}, cognition={"latency_ms": 1500},
                     retry={"max_attempts": 2, "backoff_s": 0.2})
    task_id = client.submit("what is 1 + 2?")["task_id"]
    failed = client.wait(task_id, timeout=60)
    assert (failed["lifecycle_state"], failed["exit_reason"]) == ("failed", "timeout")
    assert "deadline" in failed["error"]
    retried = client.retry(task_id)
    assert retried["lifecycle_state"] == "queued" and retried["attempts"] == 2
    assert client.wait(task_id, timeout=60)["exit_reason"] == "timeout"
    with pytest.raises(RequestError, match="2 of 2 attempts"):
        client.retry(task_id)
    stats = client.stats()
    assert stats["pools"]["llm"]["size"] == 3 and stats["pools"]["llm"]["replaced"] >= 2


def test_sigkill_of_a_worker_mid_stage(pegasus) -> None:
    client = pegasus()
    task_id = client.submit("sleep 1 and then what is 3 * 3?")["task_id"]

    def busy_tool_worker():
        workers = client.stats()["pools"]["tool"]["workers"]
        return next((w for w in workers if w["busy"] and w["pid"]), None)

    victim = wait_for(busy_tool_worker, what="a busy tool worker")
    os.kill(victim["pid"], signal.SIGKILL)
    done = client.wait(task_id, timeout=60)
    assert done["lifecycle_state"] == "done" and "9" in str(done["result"])
    assert any(s["stage"] == "act" and not s["ok"] and "died" in (s["error"] or "") for s in done["stages"])
    tool = wait_for(lambda: (p := client.stats()["pools"]["tool"]) and all(w["pid"] for w in p["workers"]) and p)
    assert tool["size"] == 3 and tool["replaced"] == 1
    assert victim["pid"] not in {w["pid"] for w in tool["workers"]}


def test_bad_requests_get_clear_errors_and_the_system_keeps_serving(pegasus) -> None:
    client = pegasus(runtime={"max_input_bytes": 100})
    reply = client.asys.ask(client.supervisor, "hello", 10)
    assert isinstance(reply, m.Reply) and not reply.ok and reply.error_type == "UnknownRequest"
    bogus = m.Submit.model_construct(request_id="r1", text=123, machine="classic", priority=5, metadata={},
                                     source="x", follow=False)
    reply = client.asys.ask(client.supervisor, bogus, 10)
    assert not reply.ok and reply.error_type == "BadRequest" and "text" in reply.error
    with pytest.raises(RequestError, match="unknown task 'nope'"):
        client.get("nope")
    with pytest.raises(RequestError, match="101 bytes; the limit is 100"):
        client.submit("x" * 101)
    with pytest.raises(RequestError, match="machine"):
        client._ask(m.Submit.model_construct(request_id="", text="hi", machine="turing", priority=5,
                                             metadata={}, source="x", follow=False))
    done = client.wait(client.submit("what is 5 + 5?")["task_id"])
    assert done["lifecycle_state"] == "done"
    with pytest.raises(RequestError, match="only a suspended task can be resumed"):
        client.resume(done["task_id"], message="more")
    assert client.wait(client.submit("echo fine")["task_id"])["lifecycle_state"] == "done"


def test_submit_many_creates_every_task_in_order_or_none(pegasus) -> None:
    client = pegasus(runtime={"max_active_tasks": 1, "max_pending_tasks": 30, "max_message_bytes": 2048})
    texts = [f"what is {n} + 1?" for n in range(24)]
    items: list = [*texts[:22], {"text": texts[22], "machine": "reason_act", "metadata": {"k": 1}},
                   {"text": texts[23], "priority": 1}]
    submitted = client.submit_many(items, priority=3)
    assert [t["machine"] for t in submitted] == ["classic"] * 22 + ["reason_act", "classic"]
    assert [t["priority"] for t in submitted] == [3] * 23 + [1]
    assert len({t["task_id"] for t in submitted}) == 24
    done = [client.wait(t["task_id"], timeout=60) for t in submitted]
    assert [t["input"] for t in done] == texts and {t["lifecycle_state"] for t in done} == {"done"}
    assert [f"{n + 1}" in str(t["result"]) for n, t in enumerate(done)] == [True] * 24
    assert done[22]["metadata"] == {"k": 1}

    count = len(client.list())
    bogus = m.SubmitMany(tasks=[m.Submit(text="echo a"), m.Submit(text="echo b"),
                                m.Submit.model_construct(request_id="", text=123, machine=None, priority=5,
                                                         metadata={}, source="x", follow=False)])
    with pytest.raises(RequestError, match="task 3: malformed Submit: text"):
        client._ask(bogus)  # an item no client would build: the supervisor validates each
    with pytest.raises(RequestError, match="the limit of one request is 2048"):
        client.submit_many(["echo " + "y" * 100] * 20)  # 2,100 bytes together
    with pytest.raises(RequestError, match=r"\(31 submitted at once\); the limit is 30"):
        client.submit_many(["echo z"] * 31)
    too_many = m.SubmitMany.model_construct(request_id="", tasks=[m.Submit(text="echo")] * (m.MAX_BATCH + 1))
    with pytest.raises(RequestError, match="tasks"):
        client._ask(too_many)
    with pytest.raises(InvalidRequest, match="^tasks: List should have at least 1 item"):
        client.submit_many([])  # refused before it is sent
    assert len(client.list()) == count  # none of the refused batches created a task
    assert client.wait(client.submit_many(["echo after"])[0]["task_id"])["lifecycle_state"] == "done"


def _forks_of_this_process() -> dict[int, int]:
    """Live processes running this very command line (every actor is a fork of the test process)."""
    me = Path(f"/proc/{os.getpid()}/cmdline").read_bytes()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if (entry / "cmdline").read_bytes() == me:
                    found.append(int(entry.name))
            except OSError:
                continue
    return procs.identities(found)


def test_a_system_stopped_as_it_starts_leaves_no_process_behind(state_dir: Path) -> None:
    # Stopped a moment after start, the pools are still forking workers.  Such a worker used
    # to miss its ActorExitRequest and idle forever as an orphan of init, outside the
    # system's process tree (procs.die_with_parent ends it with its pool).
    before = _forks_of_this_process()
    try:
        for _ in range(3):
            settings = Settings().with_overrides({"system": {"admin_port": procs.free_port()},
                                                  "state": {"home": str(state_dir)}, "pools": {"llm_workers": 4}})
            Client.start(settings).close()
        wait_for(lambda: not (set(_forks_of_this_process()) - set(before)), timeout=10)
    finally:
        left = {pid: start for pid, start in _forks_of_this_process().items() if pid not in before}
        assert procs.kill_all(left, grace=0.0) == []
    assert not left, f"processes left behind: {sorted(left)}"
