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
from tests.support.cli import Pegasus, make, start_here, stop_and_check, assert_failure, \
    plugins_env
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
    echoed = ops.ok("submit", "echo zebra crossing").strip()
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
    # held until canceled (at most 25 s), not a sleep a loaded machine can outlast before the cancel
    release = ops.cwd.parent / "release"
    sleeping = ops.ok("submit", f"call hold_until {json.dumps({'path': str(release), 'timeout_s': 25})}").strip()
    ops.wait_for(sleeping, {"running"})
    assert_failure(ops("delete", sleeping), "not finished", sleeping)
    assert ops.json("status", sleeping)["lifecycle_state"] == "running"
    ops.ok("cancel", sleeping)
    ops.wait_for(sleeping, {"canceled"})
    deleted = ops.json("delete", sleeping)
    assert deleted["deleted"] == [sleeping]
    assert_failure(ops("status", sleeping), sleeping)
    assert ops.json("list", "--text", "hold_until")["tasks"] == []

    failed = ops.ok("submit", "what is 1/0").strip()  # a failed task is kept in the supervisor's memory for a retry
    assert ops.wait_for(failed, ENDED)["lifecycle_state"] == "failed"
    assert any(e["kind"] == "tool" and not e["success"] for e in ops.json("logs", failed)["entries"])
    assert ops.json("delete", failed)["deleted"] == [failed]
    assert_failure(ops("status", failed), failed)  # gone from memory too, not only from the store
    assert_failure(ops("retry", failed), failed)

    done = ops.ok("submit", "echo purge me").strip()
    ops.wait_for(done, ENDED)
    assert ops.json("purge", "--older-than", "1")["count"] == 0  # nothing a day old
    purged = ops.json("purge", "--older-than", "0", "--state", "done")
    assert done in purged["deleted"]
    assert all(row["lifecycle_state"] != "done" for row in ops.json("list")["tasks"])
    usage = ops("purge")
    assert usage.returncode == 2 and "--older-than" in usage.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
