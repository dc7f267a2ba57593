"""The pools' prefetch on real processes: a busy worker holds the next request.

Most tests give the llm pool one worker and slow stages, so one request runs,
one is held by the worker and the rest wait in the pool's queue; then the held
request meets a deadline, a worker death, a cancel.  The last one moves a held
tool step to a worker that frees while its holder's call still runs.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.support.hold import PLUGIN
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


@pytest.mark.parametrize("home_host", [False, True], ids=["pools-apart", "home-host"])
def test_a_held_tool_step_moves_to_a_worker_that_frees_while_its_holder_still_runs_and_runs_once(
        pegasus, tmp_path, home_host) -> None:
    """Regression (issue 33): two tool workers each run a step that holds until released; a third run's step is
    held by one of them (``tool_prefetch = 1``).  The other is released and frees with nothing queued: the held
    step runs there while its holder still runs (before, it waited for the hold's 20 s timeout).  Its holder, when
    its long call ends, asks its pool before it begins the held step and is told it is gone: the step ran once."""
    client = pegasus(tools={"plugins": [PLUGIN]}, memory=NO_REFLECTOR,
                     pools={"tool_workers": 2, "tool_prefetch": 1, "home_host": home_host},
                     runtime={"max_active_tasks": 3, "task_actors_max": 1})
    marks, releases = tmp_path / "marks", [tmp_path / f"release-{n}" for n in range(3)]

    def submit(n: int) -> str:
        args = {"path": str(marks), "tag": f"n{n}", "release": str(releases[n])}
        return client.submit(f"call mark_until {json.dumps(args)}")["task_id"]

    def marked() -> list[str]:
        return marks.read_text(encoding="utf-8").split() if marks.exists() else []

    first = [submit(0), submit(1)]
    wait_for(lambda: len(marked()) == 2, what="both tool workers running a run's step")
    third = submit(2)
    tool = wait_for(lambda: (p := client.stats()["pools"]["tool"]) and any(w["held"] for w in p["workers"]) and p,
                    what="the third run's step held by a busy tool worker")
    [holder] = [w for w in tool["workers"] if w["held"]]
    [other] = [w for w in tool["workers"] if w is not holder]
    assert holder["tasks"][1] == third
    releases[first.index(other["tasks"][0])].touch()
    wait_for(lambda: "n2" in marked(), what="the held step running on the freed worker")
    workers = {w["index"]: w for w in client.stats()["pools"]["tool"]["workers"]}
    assert workers[holder["index"]]["tasks"] == holder["tasks"][:1]  # its holder still runs its own step
    for release in releases:
        release.touch()
    assert all(client.wait(task_id, timeout=60)["lifecycle_state"] == "done" for task_id in [*first, third])
    wait_for(lambda: not client.stats()["pools"]["tool"]["busy"], what="the tool pool idle")
    acts = {task_id: [s["pid"] for s in client.get(task_id)["stages"] if s["stage"] == "act"]
            for task_id in (first[0], third)}
    assert acts[third][0] == other["pid"] and len(acts[third]) == len(acts[first[0]]), acts
    assert sorted(marked()) == ["n0", "n1", "n2"]  # each step ran once: the holder never began the moved one
