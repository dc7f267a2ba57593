"""Memory in a task's life on real systems (issue 19, part B): a fact remembered by one task answers the
next, the post-task reflector runs after done (never before it, never twice, across SIGKILLs of every
process), handed out by the task actor that saw the task done (by the supervisor once that actor is
gone), a failing reflector leaves the task done, a task on a convention member gets its memories, and a run
recalls from the store itself (its supervisor stopped)."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actors.runtime import procs
from actors.runtime.system import system_pids
from tests.support.fake_openai import FakeOpenAI, Reply, http_error
from tests.support.model_like import ModelLike
from tests.support.processes import paused, titled
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

REFLECTOR = "post-task reflector"  # in the reflector's system prompt (pegasus.llm.prompts.POST_REFLECT)


def reflection(client: Any, task_id: str, status: str = "complete") -> dict[str, Any]:
    """The task's post-reflection row once it has ``status``."""
    def row() -> dict[str, Any] | None:
        found = client.history(task_id)["post_reflection"]
        return found if found is not None and found["status"] == status else None
    return wait_for(row, timeout=60, what=f"the reflection of {task_id} to be {status}")


def audit_events(client: Any, task_id: str) -> list[str]:
    return [row["event_type"] for row in client.history(task_id)["audit"]]


def test_a_remembered_fact_answers_the_next_task_which_lists_the_memory_it_was_given(pegasus) -> None:
    client = pegasus()
    first = client.wait(client.submit("remember that the deploy key is in the vault")["task_id"], timeout=60)
    assert first["lifecycle_state"] == "done", first
    assert "Remembered (deploy-key): The deploy key is in the vault." in first["result"]
    kept = reflection(client, first["task_id"])["reflection"]
    assert kept["facts"] == [{"path": "deploy-key", "content": "The deploy key is in the vault."}]
    assert kept["episode"]["title"] == "remember that the deploy key is in the vault"

    second = client.wait(client.submit("where is the deploy key?", machine="reason_act")["task_id"], timeout=60)
    assert second["lifecycle_state"] == "done", second
    assert second["result"].startswith("From memory (deploy-key): The deploy key is in the vault.")
    [reason] = [s for s in second["stages"] if s["stage"] == "reason"]
    assert "fact:deploy-key@1" in reason["memories"]  # what `pegasus status --json` shows
    cognitive = client.history(second["task_id"])["cognitive"]
    assert any("fact:deploy-key@1" in row.get("memories", []) for row in cognitive)

    episode = reflection(client, second["task_id"])["reflection"]["episode"]
    again = client.wait(client.submit("where is the deploy key?", machine="reason_act")["task_id"], timeout=60)
    assert again["result"] == second["result"]  # the answer only (issue 31): the earlier episode is not appended
    [reason] = [s for s in again["stages"] if s["stage"] == "reason"]  # it is named in the stage's history
    assert reason["done_before"]["id"] == "episode:2" and reason["done_before"]["title"] == episode["title"]
    assert reflection(client, again["task_id"])["reflection"]["episode"] == episode  # same request and outcome
    assert len(client.memory_list()["episodes"]) == 2  # ... one episode: the repeat adds none


@pytest.fixture
def held_model() -> Iterator[tuple[FakeOpenAI, threading.Event]]:
    """A model that answers like a small one, but holds the post-task reflector's call until the event is set."""
    release = threading.Event()
    model = ModelLike()

    def respond(body: dict[str, Any]) -> Reply:
        if REFLECTOR in str(body["messages"][0]["content"]):
            release.wait(60)
        return model(body)

    with FakeOpenAI(responder=respond) as server:
        yield server, release
    release.set()


def llm(server: FakeOpenAI) -> dict[str, Any]:
    return {"provider": "openai", "base_url": server.url, "model": "test-model", "api_key_env": "", "max_retries": 0,
            "timeout_s": 60.0}


def reflector_calls(server: FakeOpenAI) -> int:
    return sum(REFLECTOR in str(body["messages"][0]["content"]) for body in list(server.requests))


def kill_everything(client: Any) -> None:
    killed = procs.freeze_and_kill(lambda: system_pids(client.spec))  # the admin and every actor, at once
    assert procs.wait_gone(killed, timeout=60) == []
    client.closed = True


def test_the_reflector_runs_after_done_and_exactly_once_across_sigkills(pegasus, held_model) -> None:
    server, release = held_model
    client = pegasus(llm=llm(server))
    task_id = client.submit("what is 2 + 3?", machine="reason_act")["task_id"]
    done = client.wait(task_id, timeout=60)
    assert (done["lifecycle_state"], done["result"]) == ("done", "2 + 3 = 5")
    wait_for(lambda: reflector_calls(server) == 1, what="the reflector's call")
    assert reflection(client, task_id, "running")["attempts"] == 1  # done, its reflection still in flight

    kill_everything(client)  # before the reflection finished
    release.set()
    restarted = pegasus(llm=llm(server))
    row = reflection(restarted, task_id)
    assert (row["attempts"], reflector_calls(server)) == (2, 2)  # run once more after the restart
    assert row["reflection"]["facts"] == [{"path": "arithmetic/last", "content": "2 + 3 was computed"}]
    events = audit_events(restarted, task_id)
    assert events.count("REFLECTION_COMPLETE") == 1
    assert events.index("STATE_TRANSITION_DONE") < events.index("REFLECTION_COMPLETE")
    final = restarted.get(task_id)
    assert (final["lifecycle_state"], final["result"]) == ("done", "2 + 3 = 5")  # the outcome untouched

    kill_everything(restarted)  # after it finished
    again = pegasus(llm=llm(server))
    later = again.submit("what is 1 + 1?", machine="reason_act")["task_id"]
    assert again.wait(later, timeout=60)["result"] == "1 + 1 = 2"
    reflection(again, later)  # the new task's, handed out after the restart's pending ones
    assert reflector_calls(server) == 3  # the new task's only: the first's is not run again
    assert audit_events(again, task_id).count("REFLECTION_COMPLETE") == 1


def test_a_task_actor_hands_its_done_task_s_reflection_out_and_the_supervisor_writes_the_episode(pegasus) -> None:
    """Issue 33: the supervisor sends the pool no reflection of its own; the answer comes in the task actor's
    reports, and its episode and facts are written with them."""
    client = pegasus()
    task_id = client.submit("remember that the vault is in Paris")["task_id"]
    assert client.wait(task_id, timeout=60)["lifecycle_state"] == "done"
    row = reflection(client, task_id)
    assert row["attempts"] == 1 and row["reflection"]["facts"] == [{"path": "vault", "content": "The vault is in Paris."}]
    [episode] = client.memory_list()["episodes"]
    assert episode["task_id"] == task_id
    counts = client.stats()["reflections"]
    assert (counts["handed_out_by_task_actors"], counts["handed_out"], counts["held"]) == (1, 0, 0)


def test_a_reflection_lost_with_its_task_actor_is_handed_out_by_the_supervisor_once(pegasus, held_model) -> None:
    server, release = held_model
    client = pegasus(llm=llm(server))
    task_id = client.submit("what is 2 + 3?", machine="reason_act")["task_id"]
    assert client.wait(task_id, timeout=60)["lifecycle_state"] == "done"
    wait_for(lambda: reflector_calls(server) == 1, what="the reflector's call")
    assert client.stats()["reflections"]["held"] == 1  # out from the task actor, which waits for it
    [victim] = titled(client.spec, "task actor")
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: reflector_calls(server) == 2, what="the supervisor's hand-out")
    release.set()  # the first call answers the dead task actor: lost with it
    row = reflection(client, task_id)
    assert (row["attempts"], reflector_calls(server)) == (2, 2)
    assert audit_events(client, task_id).count("REFLECTION_COMPLETE") == 1
    counts = client.stats()["reflections"]
    assert (counts["handed_out_by_task_actors"], counts["handed_out"], counts["held"]) == (1, 1, 0)


def test_a_failing_reflector_leaves_the_task_done_with_the_failure_recorded(pegasus) -> None:
    model = ModelLike()

    def respond(body: dict[str, Any]) -> Reply:
        if REFLECTOR in str(body["messages"][0]["content"]):
            return http_error(500, "the model server broke")
        return model(body)

    with FakeOpenAI(responder=respond) as server:
        client = pegasus(llm=llm(server))
        task_id = client.submit("what is 4 * 5?", machine="reason_act")["task_id"]
        assert client.wait(task_id, timeout=60)["result"] == "4 * 5 = 20"
        row = reflection(client, task_id, "failed")
        assert "the model server broke" in row["error"] and row["attempts"] == 1
        assert audit_events(client, task_id)[-1] == "REFLECTION_FAILED"
        final = client.get(task_id)
        assert (final["lifecycle_state"], final["result"], final["post_reflection"]["status"]) == (
            "done", "4 * 5 = 20", "failed")
        assert reflector_calls(server) == 1  # not retried forever


def test_with_the_reflector_off_nothing_is_reflected(pegasus) -> None:
    client = pegasus(memory={"reflector": False})
    task_id = client.wait(client.submit("echo hi")["task_id"], timeout=60)["task_id"]
    assert reflection(client, task_id, "skipped")["error"] == "[memory] reflector is off"


def test_a_task_whose_stages_run_on_a_convention_member_gets_its_memories(convention) -> None:
    """The leader has no workers: the member's run every stage.  The memories come from the leader's
    supervisor (where the store is); the member never opens a database."""
    client = convention.leader(convention={"local_workers": False})
    member = convention.join("m", llm_workers=1, tool_workers=1)

    def ready() -> bool:
        pools = client.stats()["pools"]
        return all(sum(w["ready"] for w in pools[name]["workers"]) == 1 for name in ("llm", "tool"))

    wait_for(ready, timeout=60, what="the member's workers")
    first = client.wait(client.submit("remember that the deploy key is in the vault")["task_id"], timeout=60)
    assert first["lifecycle_state"] == "done", first
    reflection(client, first["task_id"])
    task = client.wait(client.submit("where is the deploy key?", machine="reason_act")["task_id"], timeout=60)
    assert task["result"].startswith("From memory (deploy-key): The deploy key is in the vault."), task
    [reason] = [s for s in task["stages"] if s["stage"] == "reason"]
    assert (reason["member"], reason["admin_port"]) == (member.member_name, member.admin_port)
    assert "fact:deploy-key@1" in reason["memories"]
    assert not list((convention.root / "m").rglob("pegasus.db"))  # the member holds no store


def test_a_run_recalls_from_the_store_with_its_supervisor_stopped(pegasus) -> None:
    """Issue 33: a task actor answers its runs' recalls from the store's file, read-only (the supervisor handled an
    AskRecall per task).  The supervisor is stopped (SIGSTOP) from the end of perceive until think has asked the
    model: think's request carries the fact all the same.  Before, the run waited for the supervisor's answer."""
    perceiving, go = threading.Event(), threading.Event()
    model = ModelLike()

    def respond(body: dict[str, Any]) -> Reply:
        if "perception stage" in str(body["messages"][0]["content"]):
            perceiving.set()
            go.wait(60)
        return model(body)

    def think_request() -> dict[str, Any] | None:
        return next((body for body in list(server.requests)
                     if "thinking stage" in str(body["messages"][0]["content"])), None)

    with FakeOpenAI(responder=respond) as server:
        client = pegasus(llm=llm(server))
        client.memory_write("deploy-key", "The deploy key is in the vault.")
        supervisor = client.stats()["supervisor_pid"]
        task_id = client.submit("where is the deploy key? what is 2 + 3?")["task_id"]
        wait_for(perceiving.is_set, timeout=60, what="the perceive stage's call")
        with paused(supervisor):
            go.set()
            think = wait_for(think_request, timeout=60, what="think's call with the supervisor stopped")
        assert "[fact:deploy-key@1] deploy-key: The deploy key is in the vault." in json.dumps(think["messages"])
        assert client.wait(task_id, timeout=60)["lifecycle_state"] == "done"
