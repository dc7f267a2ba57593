"""The llm pool's prefetch on real processes: a busy worker holds the next request.

Each test gives the llm pool one worker and slow stages, so one request runs,
one is held by the worker and the rest wait in the pool's queue; then the held
request meets a deadline, a worker death, a cancel.
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
NO_REFLECTOR = {"reflector": False}  # the llm pool must be idle once the tasks are done: no post-task reflection


def _one_llm_worker(pegasus, latency_ms: float, tasks: int, **pools):
    """A system whose llm pool has one prefetching worker and stages of ``latency_ms``, and ``tasks`` submitted."""
    client = pegasus(memory=NO_REFLECTOR, pools={"llm_workers": 1, "llm_prefetch": 1, **pools}, cognition={"latency_ms": latency_ms})
    return client, [client.submit(f"what is {i} + 1?")["task_id"] for i in range(tasks)]


def _held(client) -> dict:
    """The llm pool's stats once its one worker runs a request and holds another, and its pid is known (a local
    worker takes work at once, before its WorkerReady says its pid)."""
    return wait_for(lambda: (p := client.stats()["pools"]["llm"]) and p["workers"][0]["held"] == 1
                    and p["workers"][0]["pid"] is not None and p, what="an llm worker holding a request")


def test_a_held_request_waits_in_its_worker_and_its_deadline_starts_when_it_runs(pegasus) -> None:
    # Each stage takes 0.4 s and must finish within 0.6 s: a held request whose clock
    # started when it was handed over (0.4 s of waiting + 0.4 s of running) would overrun.
    client, ids = _one_llm_worker(pegasus, 400, 3, llm_timeout_s=0.6)
    llm = _held(client)
    assert (llm["size"], llm["busy"]) == (1, 1)  # one worker, running one request and holding one
    assert len(llm["workers"][0]["tasks"]) == 2 and set(llm["workers"][0]["tasks"]) <= set(ids)
    for task_id in ids:
        done = client.wait(task_id, timeout=60)
        assert done["lifecycle_state"] == "done", done.get("error")
        assert all(stage["ok"] for stage in done["stages"])
    assert client.stats()["pools"]["llm"]["replaced"] == 0


def test_a_request_held_by_a_worker_that_dies_runs_on_its_replacement(pegasus) -> None:
    client, ids = _one_llm_worker(pegasus, 1000, 2)
    worker = _held(client)["workers"][0]
    running, held = worker["tasks"]
    os.kill(worker["pid"], signal.SIGKILL)
    # The running stage is answered as failed (the task decides); the held one never
    # started, so it is not failed: the replacement worker runs it.
    done = client.wait(held, timeout=60)
    assert done["lifecycle_state"] == "done" and all(stage["ok"] for stage in done["stages"])
    assert worker["pid"] not in {s.get("pid") for s in done["stages"]}
    stages = wait_for(lambda: (s := client.get(running)["stages"]) and any(not x["ok"] for x in s) and s,
                      what="the running stage answered as failed")
    assert any("died" in (s["error"] or "") for s in stages if not s["ok"])
    assert sorted(ids) == sorted([running, held])
    assert client.stats()["pools"]["llm"]["replaced"] == 1


def test_a_canceled_held_request_runs_but_changes_nothing(pegasus) -> None:
    client, ids = _one_llm_worker(pegasus, 600, 3)
    worker = _held(client)["workers"][0]
    running, held = worker["tasks"]
    assert client.cancel(held)["lifecycle_state"] == "canceled"
    seen = len(client.history(held)["cognitive"])
    for task_id in ids:
        if task_id != held:
            assert client.wait(task_id, timeout=60)["lifecycle_state"] == "done"
    # The worker was not ended for it (it had just answered another task, whose result a
    # SIGKILL could lose): the held request ran, and its answer was dropped.
    # The pool hears a job's end after its task does (the worker answers the task first): wait for it.
    wait_for(lambda: not client.stats()["pools"]["llm"]["busy"], what="the llm pool idle")
    stats = client.stats()
    llm = stats["pools"]["llm"]
    assert llm["replaced"] == 0 and llm["workers"][0]["pid"] == worker["pid"] and not llm["busy"], \
        (llm, stats["supervisor_pid"])
    assert client.get(held)["lifecycle_state"] == "canceled"
    assert len(client.history(held)["cognitive"]) == seen
