"""``pegasus logs``, ``delete``, ``purge`` and ``list --text/--meta`` end to end (issue 31): the real script against
one real running system (multiprocTCPBase), stopped in a finalizer, every process checked gone."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from actors.client import Client
from pegasus.config import Settings
from tests.support.cli import Pegasus, assert_failure, make, plugins_env, start_here, stop_and_check, waited
from tests.support.hold import PLUGIN as HOLD_PLUGIN

pytestmark = pytest.mark.integration
ENDED = {"done", "failed", "canceled"}


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pegasus]:
    pegasus = make(tmp_path_factory.mktemp("ops"), "ops", **plugins_env(HOLD_PLUGIN))
    try:
        start_here(pegasus)
        yield pegasus
    finally:
        stop_and_check(pegasus)


def client_of(pegasus: Pegasus) -> Client:
    return Client.connect(Settings().with_overrides({"system": {"admin_port": pegasus.port},
                                                     "state": {"home": str(pegasus.home)}}))


def test_logs_follow_and_search(ops: Pegasus) -> None:
    """A task's log has its transitions and tool output in order; --follow prints until it ends; list finds tasks
    by the words of their input and result, and by metadata, on the server."""
    with client_of(ops) as client:
        tagged = client.submit("echo zebra tagged", metadata={"team": "ops"})["task_id"]
        echoed = client.submit("echo zebra crossing")["task_id"]
    follow = subprocess.Popen(ops.argv(["logs", echoed, "--follow"]), cwd=ops.cwd, env=ops.env(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    followed, errors = follow.communicate(timeout=120)
    assert follow.returncode == 0, errors
    assert ops.wait_for(tagged, ENDED)["lifecycle_state"] == "done"

    log = ops.json("logs", echoed)
    kinds = [entry["kind"] for entry in log["entries"]]
    events = [entry.get("event") for entry in log["entries"] if entry["kind"] == "transition"]
    assert events[0] == "TASK_CREATED" and events[-1] == "TASK_DONE" and log["finished"]
    tools = [entry for entry in log["entries"] if entry["kind"] == "tool"]
    assert tools and "zebra crossing" in str(tools[0]["output"]) and kinds.index("tool") < len(kinds) - 1
    assert "TASK_DONE" in followed and "zebra crossing" in followed, followed
    text = ops.ok("logs", echoed)
    assert text.splitlines()[0].split()[1:4] == ["lifecycle", "-", "->"] and "tool      step 0" in text

    found = ops.json("list", "--text", "zebra crossing")
    assert [row["task_id"] for row in found["tasks"]] == [echoed] and found["total"] == 1
    assert [row["task_id"] for row in ops.json("list", "--text", "zebra")["tasks"]] == [echoed, tagged]
    assert [row["task_id"] for row in ops.json("list", "--meta", "team=ops")["tasks"]] == [tagged]
    assert ops.json("list", "--meta", "team=dash")["tasks"] == []


def test_delete_refuses_a_running_task_and_purge_deletes_old_ones(ops: Pegasus) -> None:
    """delete and purge are the commands here; the tasks are set up and checked through a client (a command is an
    interpreter's start and its imports), and a deleted task's ``status`` and ``retry`` still fail as commands."""
    # held until canceled (at most 25 s), not a sleep a loaded machine can outlast before the cancel
    release = ops.cwd.parent / "release"
    with client_of(ops) as client:
        sleeping = client.submit(f"call hold_until {json.dumps({'path': str(release), 'timeout_s': 25})}")["task_id"]
        waited(client, sleeping, {"running"})
        assert_failure(ops("delete", sleeping), "not finished", sleeping)
        assert client.get(sleeping)["lifecycle_state"] == "running"
        client.cancel(sleeping)
        waited(client, sleeping, {"canceled"})
        deleted = ops.json("delete", sleeping)
        assert deleted["deleted"] == [sleeping]
        assert_failure(ops("status", sleeping), sleeping)
        assert client.list(text="hold_until") == []

        failed = client.submit("what is 1/0")["task_id"]  # a failed task is kept in the supervisor's memory for a retry
        assert waited(client, failed, ENDED)["lifecycle_state"] == "failed"
        assert any(e["kind"] == "tool" and not e["success"] for e in client.logs(failed)["entries"])
        assert ops.json("delete", failed)["deleted"] == [failed]
        gone, no_retry = ops.many(["status", failed], ["retry", failed])
        assert_failure(gone, failed)  # gone from memory too, not only from the store
        assert_failure(no_retry, failed)

        done = client.submit("echo purge me")["task_id"]
        waited(client, done, ENDED)
        assert ops.json("purge", "--older-than", "1")["count"] == 0  # nothing a day old
        purged = ops.json("purge", "--older-than", "0", "--state", "done")
        assert done in purged["deleted"]
        assert all(row["lifecycle_state"] != "done" for row in client.list())
    usage = ops("purge")
    assert usage.returncode == 2 and "--older-than" in usage.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
