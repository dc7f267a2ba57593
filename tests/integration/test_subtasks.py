"""sub_task steps on real multi-process systems: fan-out and fan-in under a cap of one, cancel,
suspend, resume and retry of a tree, every process killed while a parent waits, the CLI's tree,
and a model that plans a sub-task (tests/support/fake_openai.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from actors.runtime.system import system_pids
from pegasus.errors import PegasusError
from tests.support.cli import start_here
from tests.support.fake_openai import FakeOpenAI, completion
from tests.support.tools import keys_in
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PLUGIN = {"tools": {"plugins": ["tests.support.tools:register"]}}


def children_of(client: Any, task_id: str) -> list[dict[str, Any]]:
    return [client.get(child) for child in client.get(task_id)["children"]]


def waiting(client: Any, task_id: str, n: int) -> dict[str, Any] | None:
    task = client.get(task_id)
    return task if task["lifecycle_state"] == "blocked" and len(task["waiting_for"]) == n else None


def test_with_one_active_slot_a_parent_with_five_children_completes(pegasus) -> None:
    """The waiting parent holds no slot: its five children run one at a time under the cap of one,
    and the parent's answer combines theirs."""
    client = pegasus(runtime={"max_active_tasks": 1})
    parent = client.submit("in parallel: echo a; echo b; echo c; what is 2+2; echo e")["task_id"]
    final = client.wait(parent, timeout=60)
    assert final["lifecycle_state"] == "done", final["error"]
    assert final["result"].splitlines() == ["echo a: a", "echo b: b", "echo c: c", "what is 2+2: 2+2 = 4",
                                            "echo e: e"]
    children = children_of(client, parent)
    assert [(c["parent_id"], c["depth"], c["lifecycle_state"]) for c in children] == [(parent, 1, "done")] * 5
    assert final["waiting_for"] == [] and final["depth"] == 0 and final["parent_id"] is None
    lifecycle = [(t["from_state"], t["to_state"], t["reason"]) for t in client.history(parent)["lifecycle"]]
    assert ("running", "blocked", "waiting for 5 sub-task(s)") in lifecycle  # waited, holding nothing ...
    assert ("blocked", "queued", "its sub-tasks ended") in lifecycle  # ... then went on
    tree = client.tree(parent)
    assert [(c["step_index"], c["lifecycle_state"], c["state"]) for c in tree["children"]] == [
        (n, "done", "completed") for n in range(5)]


def test_cancel_of_a_waiting_parent_cancels_its_children_and_suspend_is_refused(pegasus) -> None:
    client = pegasus(runtime={"max_active_tasks": 4})
    parent = client.submit("in parallel: sleep 20; sleep 20; in parallel: sleep 20")["task_id"]
    wait_for(lambda: waiting(client, parent, 2), what="the parent waiting for its children")
    # Started: the first child runs its sleep; the second is itself a parent, soon blocked waiting for its own.
    wait_for(lambda: all(c["lifecycle_state"] in ("running", "blocked") for c in children_of(client, parent)),
             what="children started")
    with pytest.raises(PegasusError, match="waiting for its sub-tasks"):
        client.suspend(parent)
    client.cancel(parent, "enough")
    finals = [client.wait(child, timeout=60) for child in client.get(parent)["children"]]
    assert [f["lifecycle_state"] for f in finals] == ["canceled", "canceled"]
    assert client.get(parent)["lifecycle_state"] == "canceled"
    assert [c["lifecycle_state"] for c in client.tree(parent)["children"]] == ["canceled", "canceled"]
    assert client.stats()["active"] == 0  # nothing of the tree holds a slot


def test_a_reason_act_parent_reasons_over_its_childrens_answers(pegasus) -> None:
    """Seed 001's routing: a finished plan with sub_task steps goes back to REASONING (their results
    are to reason over), whose respond-only plan then completes the task."""
    client = pegasus()
    final = client.wait(client.submit("in parallel: what is 2+2; echo hi", machine="reason_act")["task_id"],
                        timeout=60)
    assert (final["lifecycle_state"], final["result"]) == ("done", "what is 2+2: 2+2 = 4\necho hi: hi")
    assert [s["stage"] for s in final["stages"]] == ["reason", "act", "reason", "act"]
    assert {(c["machine"], c["lifecycle_state"]) for c in children_of(client, final["task_id"])} == {
        ("reason_act", "done")}


def test_a_child_past_max_depth_is_refused_and_the_error_names_the_limit(pegasus) -> None:
    client = pegasus(subtasks={"max_depth": 1})
    parent = client.submit("in parallel: (in parallel: echo too deep); echo fine")["task_id"]
    final = client.wait(parent, timeout=60)
    assert final["lifecycle_state"] == "failed" and "echo fine: fine" in final["result"]
    [nested, fine] = children_of(client, parent)  # the failed child is not made again (issue 31: 21 of a 5-level)
    assert (nested["depth"], nested["lifecycle_state"], nested["children"]) == (1, "failed", [])
    assert "tried" not in nested["result"]  # the refusal is final: not retried
    assert "sub_task refused: the child would be at depth 2; [subtasks] max_depth is 1" in nested["error"]
    assert fine["lifecycle_state"] == "done"


def test_a_suspended_child_keeps_its_parent_waiting_until_it_is_resumed(pegasus) -> None:
    client = pegasus()
    parent = client.submit("in parallel: sleep 3 and then echo late; echo soon")["task_id"]
    # Not "waiting for 2": the echo child may end before a poll sees both (missed at load 9, polled every 0.1 s).
    slow = wait_for(lambda: (t := client.get(parent))["lifecycle_state"] == "blocked" and t["children"]
                    and t["children"][0] in t["waiting_for"] and t["children"][0], what="the parent waiting")
    client.suspend(slow, "hold on")
    wait_for(lambda: waiting(client, parent, 1), what="the quick child's end")
    assert client.get(slow)["state"] == "suspended" and client.get(parent)["lifecycle_state"] == "blocked"
    client.resume(slow)
    final = client.wait(parent, timeout=60)
    assert final["lifecycle_state"] == "done", final["error"]
    assert "late" in final["result"] and "echo soon: soon" in final["result"]


def test_following_a_parent_ends_when_a_child_asks_for_information(pegasus) -> None:
    """pegasus run follows a waiting parent, but not past a child that waits for a person."""
    client = pegasus()
    parent = client.submit("in parallel: help me; echo hi")["task_id"]
    list(client.follow(parent, timeout=60))  # returns: a timeout here would be the bug
    assert client.get(parent)["lifecycle_state"] == "blocked"
    # The echo child may still be finishing when the other one asks (a loaded machine): the parent then waits
    # for the one that asks only.
    wait_for(lambda: (t := client.get(parent))["lifecycle_state"] == "blocked" and len(t["waiting_for"]) == 1
                    and t, what="the parent waiting for the asking child only")
    [asking] = [c for c in client.tree(parent)["children"] if c["state"] == "suspended"]
    assert asking["input"] == "help me" and client.get(asking["task_id"])["question"]


def test_retry_of_a_failed_parent_starts_new_children(pegasus, tmp_path: Path) -> None:
    """A failed child is a failed step, not retried by the parent (the child had its own tries; issue 31),
    so the parent fails.  Retried, the parent's attempt 2 has new step keys, hence a new child."""
    client = pegasus()
    parent = client.submit(f"in parallel: read {tmp_path}/missing.txt")["task_id"]
    failed = client.wait(parent, timeout=60)
    assert (failed["lifecycle_state"], failed["exit_reason"]) == ("failed", "retry_exhausted")
    assert "sub-task" in failed["error"] and len(failed["children"]) == 1
    client.retry(parent)
    again = client.wait(parent, timeout=60)
    assert again["lifecycle_state"] == "failed" and len(again["children"]) == 2
    assert {c["lifecycle_state"] for c in children_of(client, parent)} == {"failed"}


def test_every_process_killed_while_a_parent_waits_then_restarted(pegasus, tmp_path: Path) -> None:
    """SIGKILL of the whole system with two children done and two mid-sleep: after the restart each
    child ends once, none is created twice, no effect repeats, and the parent has all four results."""
    keys = tmp_path / "keys.txt"

    def child(sleep: float) -> str:  # each text its own (the offline perceiver folds repeated requests)
        return f"sleep {sleep} and then call append_key {json.dumps({'path': f'{keys}', 'hold_s': 0})}"

    settings = {**PLUGIN, "runtime": {"max_active_tasks": 8}, "pools": {"tool_workers": 4}}
    client = pegasus(**settings)
    parent = client.submit("in parallel: " + "; ".join(child(s) for s in (0.1, 0.2, 3, 3.1)))["task_id"]
    wait_for(lambda: len(keys_in(keys)) >= 2, what="the quick children's effects")
    assert client.get(parent)["lifecycle_state"] == "blocked"
    spec = client.spec
    killed = procs.freeze_and_kill(lambda: system_pids(spec))  # the admin and every actor, at once
    assert procs.wait_gone(killed, timeout=60) == []
    client.closed = True
    restarted = pegasus(**settings)
    final = restarted.wait(parent, timeout=60)
    assert final["lifecycle_state"] == "done", final["error"]
    children = children_of(restarted, parent)
    assert len(children) == 4 and {c["lifecycle_state"] for c in children} == {"done"}
    counts = Counter(keys_in(keys))
    assert sorted(counts.values()) == [1, 1, 1, 1]  # each child's effect once, none repeated
    assert {f"{c['task_id']}/a1.0/i0/s1" for c in children} == set(counts)
    assert final["result"].count("appended ") == 4


def test_the_cli_shows_the_tree_and_status_shows_parent_and_children(cli) -> None:
    start_here(cli)
    # run follows the parent past its wait for the children (blocked, but not for a person) to its end.
    final = cli.json("run", "in parallel: echo one; echo two")["task"]
    assert final["lifecycle_state"] == "done" and len(final["children"]) == 2
    assert final["result"] == "echo one: one\necho two: two"
    parent = final["task_id"]
    tree = cli.json("tree", parent)
    assert [c["input"] for c in tree["children"]] == ["echo one", "echo two"]
    text = cli.ok("tree", parent).splitlines()
    assert text[0].startswith(f"{parent}  done/completed") and text[1].startswith("├─ step 0: ")
    assert text[2].startswith("└─ step 1: ") and "done/completed  echo two" in text[2]
    child = cli.ok("status", tree["children"][0]["task_id"])
    assert f"parent:    {parent} (depth 1)" in child
    assert "children:  2 (pegasus tree" in cli.ok("status", parent)


def test_a_model_plans_a_sub_task_and_its_answer_comes_back(pegasus) -> None:
    """classic on a model endpoint: the plan's sub_task step (JSON plan) makes a child, which the model
    also runs; the limits are in the planning prompt."""
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system.startswith("You are the perception"):
            return completion({"task_type": "t", "intents": ["x"], "entities": {}, "summary": "s"})
        if system.startswith("You are the thinking"):
            return completion({"need_more_info": False, "approach": "delegate"})
        if system.startswith("You are the planning"):
            if user.startswith("the parent"):
                return completion({"goal": "g", "steps": [{"action_type": "sub_task", "text": "the child: say hi"},
                                                          {"action_type": "respond"}]})
            return completion({"goal": "g", "steps": [{"action_type": "respond", "text": "hi from the child"}]})
        return completion({"verdict": "complete", "assessment": "ok"})

    with FakeOpenAI(responder=respond) as server:
        client = pegasus(llm={"provider": "openai", "base_url": server.url, "model": "m", "api_key_env": "",
                              "max_retries": 0, "stream": False})
        parent = client.submit("the parent: ask a child to say hi", machine="classic")["task_id"]
        final = client.wait(parent, timeout=60)
        assert final["lifecycle_state"] == "done", final["error"]
        assert final["result"] == "the child: say hi: hi from the child"
        [child] = children_of(client, parent)
        assert (child["input"], child["result"], child["machine"]) == ("the child: say hi", "hi from the child",
                                                                       "classic")
        plan_prompt = next(r["messages"][0]["content"] for r in server.requests
                           if r["messages"][0]["content"].startswith("You are the planning"))
        assert "at most 16 sub-tasks per task, nested at most 3 deep" in plan_prompt
