"""``pegasus message`` on a real background system (issue 20): a task in a slow stage takes the message
after that stage (SUSPENDED, then MESSAGE_RECEIVED -> thinking) and its conversation holds it; a queued
task starts with it; a suspended one resumes with it; a finished one refuses it (exit 1, or --json's error)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from actors.runtime.system import system_pids
from tests.support.cli import Pegasus, assert_failure
from tests.support.hold import hold_request
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PLUGIN = {"tools": {"plugins": ["tests.support.hold:register"]}}


def the_cli(client: Any, state_dir: Path, tmp_path: Path) -> Pegasus:
    """The ``pegasus`` command against the test's system."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return Pegasus(port=client.spec.admin_port, home=state_dir, cwd=cwd)


def conversation(task: dict[str, Any]) -> list[str]:
    return [m["content"] for m in task["messages"]]


def test_messages_reach_running_queued_and_suspended_tasks_and_a_finished_one_refuses(
        pegasus: Any, state_dir: Path, tmp_path: Path) -> None:
    client = pegasus(**PLUGIN, runtime={"max_active_tasks": 1})  # one task at a time: a second one waits
    cli = the_cli(client, state_dir, tmp_path)
    release = tmp_path / "release"
    slow, queued = (client.submit(text)["task_id"] for text in (hold_request(release), "echo second"))
    wait_for(lambda: client.get(slow)["state"] == "acting", what="the held step")  # held until the file exists
    to_slow, to_queued = cli.many(["message", slow, "echo from the user", "--json"],
                                  ["message", queued, "echo for the queued one", "--json"])
    assert to_queued.returncode == 0 and to_slow.returncode == 0, (to_queued.stderr, to_slow.stderr)
    assert json.loads(to_queued.stdout)["message"] == {"number": 1, "delivery": "when it starts"}
    sent = json.loads(to_slow.stdout)
    assert (sent["message"], sent["state"]) == ({"number": 1, "delivery": "at its next transition"}, "acting")
    assert client.get(slow)["messages_waiting"] == 1
    release.touch()

    task = client.wait(slow, timeout=60)
    assert task["lifecycle_state"] == "done", task
    assert conversation(task) == ["echo from the user"] and "from the user" in json.dumps(task["result"])
    moves = [(h["from_state"], h["to_state"], h["event"]) for h in client.history(slow)["cognitive"]]
    taken = moves.index(("acting", "suspended", "TASK_SUSPENDED"))
    assert moves[taken - 1][2] == "TOOL_CALL_COMPLETED"  # the held step ended first: nothing cut short
    assert moves[taken + 1] == ("suspended", "thinking", "MESSAGE_RECEIVED")

    task = client.wait(queued, timeout=60)
    assert conversation(task) == ["echo for the queued one"] and "for the queued one" in json.dumps(task["result"])

    vague = client.submit("help me")["task_id"]
    assert client.wait(vague, timeout=60, until=frozenset({"blocked"}))["state"] == "suspended"
    told, history, refused, refused_json = cli.many(
        ["message", vague, "echo resumed by a message"], ["history", slow], ["message", slow, "too late"],
        ["message", slow, "too late", "--json"])
    assert told.returncode == 0 and "taken resumed with it" in told.stdout, told.stderr
    assert "suspended -> thinking   MESSAGE_RECEIVED" in history.stdout
    assert_failure(refused, f"task {slow} has finished its work (done)")
    assert refused_json.returncode == 1
    assert json.loads(refused_json.stderr)["error"]["type"] == "InvalidStateTransition"
    task = client.wait(vague, timeout=60)
    assert task["lifecycle_state"] == "done" and "resumed by a message" in json.dumps(task["result"])
    assert conversation(task) == ["echo resumed by a message"]


def test_accepted_messages_survive_a_sigkill_of_every_process(pegasus: Any, tmp_path: Path) -> None:
    """Each message answered ok is taken once after the whole system is SIGKILLed and restarted: by the
    running task (its run restarted from its checkpoint), the queued one and the suspended one."""
    settings = {**PLUGIN, "runtime": {"max_active_tasks": 1}}
    release = tmp_path / "release"
    client = pegasus(**settings)
    vague = client.submit("help me")["task_id"]
    assert client.wait(vague, timeout=60, until=frozenset({"blocked"}))["state"] == "suspended"
    running, queued = (client.submit(text)["task_id"] for text in (hold_request(release), "echo second"))
    wait_for(lambda: client.get(running)["state"] == "acting", what="the held step")
    sent = {task_id: client.message(task_id, f"echo note for {name}")["message"]["delivery"]
            for name, task_id in (("running", running), ("queued", queued), ("vague", vague))}
    assert sent == {running: "at its next transition", queued: "when it starts", vague: "resumed with it"}
    spec = client.spec
    killed = procs.freeze_and_kill(lambda: system_pids(spec))  # the admin and every actor, at once
    assert procs.wait_gone(killed, timeout=60) == []
    client.closed = True

    restarted = pegasus(**settings)
    release.touch()  # the restarted run's step (pure: sent again) ends now
    for name, task_id in (("running", running), ("queued", queued), ("vague", vague)):
        task = restarted.wait(task_id, timeout=60)
        assert task["lifecycle_state"] == "done", task
        assert conversation(task) == [f"echo note for {name}"], task  # taken, and once
        assert f"note for {name}" in json.dumps(task["result"])
