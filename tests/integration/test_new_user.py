"""What surprised a new user (issue 31), on real systems and the real CLI: ids by unique prefix, and reading
a task with no system running."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from actors.client import RequestError
from actors.runtime import procs
from actors.runtime.ownership import is_running
from pegasus.store.task_ids import SHOWN
from tests.support.cli import Pegasus, make, start_background, start_here, stop_and_check, assert_failure

pytestmark = pytest.mark.integration


def test_ids_by_unique_prefix_and_an_ambiguous_prefix_lists_its_matches(pegasus) -> None:
    client = pegasus()
    ids = [t["task_id"] for t in client.submit_many([f"echo {n}" for n in range(17)])]
    assert client.wait(ids[0][:8], timeout=60)["task_id"] == ids[0]  # wait and get by prefix
    assert client.history(ids[0][:8])["task_id"] == ids[0]
    assert client.tree(ids[0][:8])["task_id"] == ids[0]
    by_first: dict[str, list[str]] = defaultdict(list)
    for task_id in ids:  # 17 ids, 16 hex digits: two share their first (time-ordered ids: all of them)
        by_first[task_id[0]].append(task_id)
    first, shared = next((c, same) for c, same in by_first.items() if len(same) > 1)
    with pytest.raises(RequestError, match="is ambiguous: it matches") as ambiguous:
        client.get(first)
    assert all(task_id in str(ambiguous.value) for task_id in sorted(shared)[:SHOWN])  # the first SHOWN, in order
    slow = client.submit("sleep 0.5")["task_id"]
    followed = [notice.task_id for notice in client.follow(slow[:8], timeout=60)]  # notices carry the whole id
    assert followed and set(followed) == {slow} and client.get(slow)["lifecycle_state"] == "done"


def test_status_history_tree_and_list_read_the_store_when_no_system_runs(cli: Pegasus) -> None:
    ran = cli("run", "in parallel: echo hi; what is 2+2", "--json")  # an embedded system, stopped after
    assert ran.returncode == 0, ran.stderr
    task_id = json.loads(ran.stdout)["task"]["task_id"]
    short = task_id[:8]
    status, history, tree, listed, log, followed, found = cli.many(
        ["status", short, "--json"], ["history", short, "--json"], ["tree", short], ["list", "--json"],
        ["logs", short, "--json"], ["logs", short, "--follow"], ["list", "--text", "echo", "--json"])
    for result in (status, history, tree, listed, log, followed, found):
        assert result.returncode == 0 and result.stderr == "", result
    view: dict[str, Any] = json.loads(status.stdout)
    assert (view["task_id"], view["lifecycle_state"], view["from_store"]) == (task_id, "done", True)
    assert len(view["children"]) == 2 and "2+2 = 4" in view["result"]
    assert json.loads(history.stdout)["lifecycle"][-1]["to_state"] == "done"
    assert tree.stdout.startswith(task_id) and tree.stdout.count("done/completed") == 3
    assert json.loads(listed.stdout)["total"] == 3
    entries = json.loads(log.stdout)["entries"]  # the task's own log, from the store
    assert (entries[-1]["kind"], entries[-1]["to_state"]) == ("transition", "done")
    assert "verified -> done" in followed.stdout.splitlines()[-1]  # --follow: the stored log (nothing will come)
    assert {t["input"] for t in json.loads(found.stdout)["tasks"]} == {"in parallel: echo hi; what is 2+2", "echo hi"}
    assert_failure(cli("cancel", short), "no Pegasus system is running")  # a write needs the system

    # With a system running: a command whose own settings would change its task refuses, naming them.
    start_here(cli)
    openai = dataclasses.replace(cli, env_extra={"PEGASUS_LLM__PROVIDER": "openai", "PEGASUS_LLM__MODEL": "m"})
    for refused in (openai("run", "what is 17 * 23?"), openai("submit", "what is 17 * 23?")):
        assert_failure(refused, "llm.provider is 'openai' here, 'offline' in the system", "pegasus stop")
    assert json.loads(cli.ok("list", "--json"))["total"] == 3  # nothing was submitted
    assert cli.ok("status", short).startswith(f"task {task_id}")  # the running system takes the prefix too


def test_join_to_a_system_not_started_as_leader_fails_and_start_http_says_what_runs(cli: Pegasus,
                                                                                   tmp_path: Path) -> None:
    """Issue 31: join printed "pegasus joined", exit 0, and the member never appeared; start --http P on the
    home's own running system said the port was "used by another program"."""
    start_background(cli)
    http = procs.free_port()
    assert_failure(cli("start", "--http", str(http)), f"{cli.home} is already running (admin port {cli.port}, "
                   f"no HTTP API): to serve HTTP on port {http}, stop it (pegasus stop)")
    member = make(tmp_path, "member")
    try:
        joined = member("join", f"127.0.0.1:{cli.port}", "--key-file", str(cli.home / "system.key"))
        assert_failure(joined, f"the system at 127.0.0.1:{cli.port} is no convention leader",
                       "pegasus start --leader")
        member.track()
        assert not is_running(member.spec)
    finally:
        stop_and_check(member)


def test_run_under_manual_approval_says_how_to_approve(tmp_path: Path) -> None:
    """Issue 31: `pegasus run` showed only "draft 3.4s", no hint to approve."""
    manual = make(tmp_path, "manual", PEGASUS_RUNTIME__APPROVAL_POLICY="manual")
    try:
        start_here(manual)
        ran = manual("run", "echo hi", "--timeout", "1")
        task_id = ran.stdout.split()[1]
        assert f"waiting for approval ([runtime] approval_policy = \"manual\"): pegasus approve {task_id[:8]}" in (
            ran.stdout), ran.stdout
        manual.ok("approve", task_id[:8])
        assert manual.wait_for(task_id, {"done"})["lifecycle_state"] == "done"
    finally:
        stop_and_check(manual)
