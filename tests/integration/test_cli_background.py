"""A background system (``pegasus start``) driven by the real ``pegasus`` script, end to end.

``start`` returns promptly with stdout on a pipe; ``submit`` (one task or a file of them), ``status``,
``list``, ``history``, ``stats`` and an attached ``run`` work on it; ``suspend``, ``resume``, ``cancel``,
``approve`` and ``stop`` too; ``run`` exits 1 when a tool step failed; task text never drives the
terminal; every process has a readable title.  Every failure exits 1 with exactly one stderr line
``pegasus: <reason>``.  Each system is stopped in a finalizer and every process seen of it must be gone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from actors.runtime.system import is_running, system_pids
from tests.support.cli import (ARITHMETIC, Pegasus, as_shown, assert_failure, assert_gone, make, plugins_env,
                               start_background, stop_and_check, transitions, waited)
from tests.support.hold import PLUGIN as HOLD_PLUGIN
from tests.support.hold import hold_request
from tests.support.processes import title
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pegasus, dict[str, Any]]]:
    """One background system (default settings) shared by the tests of this module."""
    pegasus = make(tmp_path_factory.mktemp("background"), "bg", **plugins_env(HOLD_PLUGIN))
    try:
        info = start_background(pegasus)
        yield pegasus, info
    finally:
        stop_and_check(pegasus)


@pytest.fixture
def manual(tmp_path: Path) -> Iterator[Pegasus]:
    """A Pegasus whose system (once started) needs ``approve`` and runs one task at a time."""
    pegasus = make(tmp_path, "manual", PEGASUS_RUNTIME__APPROVAL_POLICY="manual",
                    PEGASUS_RUNTIME__MAX_ACTIVE_TASKS="1", **plugins_env(HOLD_PLUGIN))
    try:
        yield pegasus
    finally:
        stop_and_check(pegasus)


def test_background_start_submit_status_list_history_stats(background: tuple[Pegasus, dict[str, Any]]) -> None:
    pegasus, info = background
    assert info["port"] == pegasus.port and Path(info["state_dir"]) == pegasus.home
    assert info["pid"] == pegasus.admin_pid() and procs.is_alive(info["pid"])
    assert is_running(pegasus.spec)
    assert list(pegasus.cwd.iterdir()) == []

    submitted = pegasus.ok("submit", ARITHMETIC).strip()
    assert re.fullmatch(r"[0-9a-f]{32}", submitted), submitted  # only the id, one line
    task = pegasus.wait_for(submitted, {"done", "failed", "canceled"})
    assert task["lifecycle_state"] == "done" and "14" in str(task["result"]) and task["source"] == "cli"

    status_text, listed, done_only, history, history_text, stats = pegasus.many(
        ["status", submitted], ["list", "--json"], ["list", "--state", "done", "--json"],
        ["history", submitted, "--json"], ["history", submitted], ["stats", "--json"])
    for result in (status_text, listed, done_only, history, history_text, stats):
        assert result.returncode == 0 and result.stderr == "", result
    assert submitted in status_text.stdout and re.search(r"result:.*\b14\b", status_text.stdout)

    rows = {row["task_id"]: row for row in json.loads(listed.stdout)["tasks"]}
    assert rows[submitted]["lifecycle_state"] == "done"
    assert all(row["lifecycle_state"] == "done" for row in json.loads(done_only.stdout)["tasks"])
    assert submitted in {row["task_id"] for row in json.loads(done_only.stdout)["tasks"]}

    record = json.loads(history.stdout)
    assert record["task_id"] == submitted
    assert [h["to_state"] for h in record["lifecycle"]][-3:] == ["verifying", "verified", "done"]
    assert [h["to_state"] for h in record["lifecycle"]][:4] == ["draft", "approved", "queued", "running"]
    assert record["cognitive"][0]["to_state"] == "perceiving" and record["cognitive"][-1]["to_state"] == "completed"
    # The text form lists the transitions in the order they happened.
    lines = transitions(history_text.stdout)
    lifecycle_text = [to for machine, _, to, _ in lines if machine == "lifecycle"]
    assert lifecycle_text == [h["to_state"] for h in record["lifecycle"]], history_text.stdout

    numbers = json.loads(stats.stdout)
    assert numbers["pools"]["llm"]["size"] == 3 and numbers["pools"]["tool"]["size"] == 3
    assert numbers["tasks"].get("done", 0) >= 1
    assert numbers["max_active_tasks"] == 1000

    # `run` attaches to the running system: no embedded one, same admin, still running after.
    admin = pegasus.admin_pid()
    pegasus.track()
    before = set(pegasus.seen)
    ran = pegasus("run", "echo hello")
    assert ran.returncode == 0, ran.stderr
    first = ran.stdout.splitlines()[0]
    assert "submitted" in first and "embedded" not in first
    assert re.search(r"^\s*result:\s*hello", ran.stdout, re.M)
    assert is_running(pegasus.spec) and pegasus.admin_pid() == admin and procs.is_alive(admin)
    with pegasus.client() as client:
        assert client.get(ran.stdout.split()[1])["lifecycle_state"] == "done"
    pegasus.track()
    assert set(pegasus.seen) == before, "run started processes of its own"

    # A run that outlasts --timeout (its step holds until released): one line, and the task goes on in the
    # background system.
    release = pegasus.cwd.parent / "release-run"
    timed_out = pegasus("run", f"call hold_until {json.dumps({'path': str(release), 'timeout_s': 25})}",
                        "--timeout", "0.3")
    release.touch()
    assert_failure(timed_out, "did not finish within 0.3s", "pegasus status")
    task_id = re.search(r"pegasus status (\S+)", timed_out.stderr).group(1)  # type: ignore[union-attr]
    assert pegasus.wait_for(task_id, {"done", "failed", "canceled"})["lifecycle_state"] == "done"
    assert list(pegasus.cwd.iterdir()) == []


def test_background_list_pages_newest_first_and_says_how_many(background: tuple[Pegasus, dict[str, Any]],
                                                             tmp_path: Path) -> None:
    """Issue 16: list showed the oldest 1,000 tasks and hid the rest; an unknown --state was an empty list."""
    pegasus, _ = background
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("".join(f"echo page {n}\n" for n in range(1, 6)))
    ids = pegasus.ok("submit", "--file", str(tasks)).split()
    first, second, everything = pegasus.many(["list", "--limit", "2"], ["list", "--limit", "2", "--offset", "2", "--json"],
                                             ["list", "--json"])
    total = json.loads(everything.stdout)["total"]
    assert total >= 5 and json.loads(everything.stdout)["limit"] == 50
    lines = first.stdout.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == [ids[4], ids[3]]  # newest first
    assert lines[-1] == f"showing 1-2 of {total}, newest first; next: --offset 2"
    page = json.loads(second.stdout)
    assert [row["task_id"] for row in page["tasks"]] == [ids[2], ids[1]]
    assert (page["total"], page["offset"], page["limit"]) == (total, 2, 2)
    unknown = pegasus("list", "--state", "finished")
    assert unknown.returncode == 2 and "invalid choice: 'finished'" in unknown.stderr and "'done'" in unknown.stderr


def test_background_task_text_cannot_drive_the_terminal(background: tuple[Pegasus, dict[str, Any]]) -> None:
    """Issue 16: an ANSI escape sequence in a task's text coloured the terminal of whoever listed it."""
    pegasus, _ = background
    ran = pegasus("run", "echo \x1b[31mred\x1b]0;owned\x07")
    assert ran.returncode == 0, ran.stderr
    task_id = ran.stdout.split()[1]
    status, listed, stats = pegasus.many(["status", task_id], ["list", "--limit", "1"], ["stats"])
    for result in (ran, status, listed):
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout, result.stdout
        assert "\\x1b[31mred" in result.stdout, result.stdout
    assert re.search(r"^\s*result:\s*\\x1b\[31mred", status.stdout, re.M), status.stdout
    assert pegasus.json("status", task_id)["input"] == "echo \x1b[31mred\x1b]0;owned\x07"  # JSON keeps the data
    # stats: text, not Python dicts
    assert stats.returncode == 0 and "{" not in stats.stdout and re.search(r"^tasks: .*\d+ done", stats.stdout, re.M)


def test_background_processes_have_readable_titles(background: tuple[Pegasus, dict[str, Any]]) -> None:
    """Issue 16: every process of a system showed as ``python3 -P -c from actors.runtime.launcher import main; main()``."""
    pegasus, info = background
    assert pegasus("run", "echo titles").returncode == 0  # a run: a task actor is kept for the next
    pegasus.track()
    home = f"[{pegasus.home}]"
    titles = sorted(title(pid) or "" for pid in procs.identities(system_pids(pegasus.spec)))
    expected = {f"pegasus: {role} {home}" for role in (
        "launcher", "watcher", f"admin :{pegasus.port}", "logger", "guardian", "supervisor",
        "task actor", *(f"{pool} worker {n}" for pool in ("llm", "tool") for n in range(3)))}  # pools: in a task actor
    assert expected <= set(titles), titles
    assert all(title.startswith("pegasus: ") and title.endswith(home) for title in titles), titles
    assert title(info["pid"]) == f"pegasus: admin :{pegasus.port} {home}"


# Each fails its one tool step (twice: the offline processors retry it once).
FAILING_STEPS = {"list ./src": "list_dir", "read /nonexistent": "read_file", "what is 1/0": "arithmetic",
                 "call nosuchtool {}": "nosuchtool"}
REFUSED_STEPS = {"read /nonexistent", "call nosuchtool {}"}  # outside the workspace, an unknown tool: tried once


def test_run_exits_1_when_a_tool_step_failed(background: tuple[Pegasus, dict[str, Any]]) -> None:
    """Regression (issue 15): these four ended done and `run` exited 0.  Each runs as text; a refused and a retried
    one also with --json (the same failure, as JSON); every task's record is read through a client."""
    pegasus, _ = background
    as_json = ["read /nonexistent", "what is 1/0"]  # one refused, one retried
    results = pegasus.many(*(["run", text] for text in FAILING_STEPS), *(["run", text, "--json"] for text in as_json))
    with pegasus.client() as client:
        for (text, tool), result in zip(FAILING_STEPS.items(), results):
            assert_failure(result, "task failed: 1 tool step(s) failed", tool)
            assert re.search(r"^\s*lifecycle: failed\b", result.stdout, re.M), result.stdout
            assert re.search(r"^\s*result:\s*Could not", result.stdout, re.M), result.stdout  # the answer explains
            reason = "fatal_error" if text in REFUSED_STEPS else "retry_exhausted"
            assert f"(exit_reason: {reason})" in result.stdout
            task = client.get(result.stdout.split()[1])  # "task <id> submitted ..."
            assert (task["lifecycle_state"], task["state"], task["exit_reason"]) == ("failed", "failed", reason)
            assert task["effects_unknown"] == []
            # the step and respond, twice; a refusal once (issue 31: the same call is refused again)
            assert [s["stage"] for s in task["stages"]].count("act") == (2 if text in REFUSED_STEPS else 4)
    for text, result in zip(as_json, results[len(FAILING_STEPS):]):
        assert result.returncode == 1, result.stderr
        error = json.loads(result.stderr)["error"]  # --json: the failure is JSON too (issue 16)
        assert error["type"] == "TaskFailed" and error["message"].startswith("task failed: 1 tool step(s) failed")
        assert FAILING_STEPS[text] in error["message"]
        task = json.loads(result.stdout)["task"]
        assert error["task_id"] == task["task_id"] and task["input"] == text
        reason = "fatal_error" if text in REFUSED_STEPS else "retry_exhausted"
        assert (task["lifecycle_state"], task["state"], task["exit_reason"]) == ("failed", "failed", reason)
        assert task["effects_unknown"] == []


def test_background_submit_a_file_of_tasks(background: tuple[Pegasus, dict[str, Any]], tmp_path: Path) -> None:
    pegasus, _ = background
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("what is 1 + 1?\n\n   echo batch  \nwhat is 2 * 3?\n")
    ids = pegasus.ok("submit", "--file", str(tasks), "--priority", "2").split()
    assert len(ids) == 3 and len(set(ids)) == 3
    done = [pegasus.wait_for(task_id, {"done", "failed", "canceled"}) for task_id in ids]
    assert [t["lifecycle_state"] for t in done] == ["done"] * 3
    assert [t["input"] for t in done] == ["what is 1 + 1?", "echo batch", "what is 2 * 3?"]  # in file order
    assert {t["priority"] for t in done} == {2} and {t["source"] for t in done} == {"cli"}
    assert "6" in str(done[2]["result"])

    with pegasus.client() as client:  # the count of tasks, before and after: a check, not the command tested
        before = client.list_page(limit=1)["total"]
        empty = tmp_path / "empty.txt"
        empty.write_text("\n  \n")
        too_long = tmp_path / "too_long.txt"
        too_long.write_text("echo fine\n" + "x" * 70000 + "\n")  # line 2 is over max_input_bytes
        both, blank, missing, bad = pegasus.many(
            ["submit", "echo x", "--file", str(tasks)], ["submit", "--file", str(empty)],
            ["submit", "--file", str(tmp_path / "missing.txt")], ["submit", "--file", str(too_long)])
        assert_failure(both, "not both")
        assert_failure(blank, "holds no task")
        assert_failure(missing, "cannot read")
        assert_failure(bad, "none of the 2 tasks submitted", "task 2: task text is 70000 bytes")
        assert client.list_page(limit=1)["total"] == before  # a refused batch creates none of its tasks


def test_background_block_resume_suspend_cancel(background: tuple[Pegasus, dict[str, Any]]) -> None:
    pegasus, _ = background
    # Steps that hold until released (at most 25 s): the suspend and the cancel must reach them mid-step, and a
    # CLI call takes 2-3 s at a load of 10.
    release = pegasus.cwd.parent / "release"
    held = f"call hold_until {json.dumps({'path': str(release), 'timeout_s': 25})}"
    # The tasks are set up, checked and waited for through a client (each command is an interpreter's start and
    # its imports): what runs as a command is what this test proves of it.
    with pegasus.client() as client:
        helpme, long_task, doomed, finished = (t["task_id"] for t in client.submit_many(
            ["help me", held, held, "echo finished"]))
        # The long task is suspended while its sleep step runs, the other one is canceled.
        wait_for(lambda: client.get(long_task)["state"] == "acting", what="the long task in its held step")
        suspended, canceled = pegasus.many(["suspend", long_task, "--json"], ["cancel", doomed, "--json"])
        assert suspended.returncode == 0, suspended.stderr
        task = json.loads(suspended.stdout)
        assert (task["lifecycle_state"], task["state"]) == ("blocked", "suspended")
        assert canceled.returncode == 0, canceled.stderr
        assert json.loads(canceled.stdout)["lifecycle_state"] == "canceled"
        assert client.get(doomed)["lifecycle_state"] == "canceled"
        assert client.get(long_task)["lifecycle_state"] == "blocked"

        # The vague task waits for information and shows its question.
        task = waited(client, helpme, {"blocked", "done", "failed"})
        assert (task["lifecycle_state"], task["state"]) == ("blocked", "suspended")
        assert task["question"]
        status = pegasus.ok("status", helpme)
        assert re.search(r"lifecycle: blocked\s+cognitive: suspended", status) and "question:" in status
        assert {helpme, long_task} <= {row["task_id"] for row in client.list(state="blocked")}
        assert waited(client, finished, {"done", "failed"})["lifecycle_state"] == "done"

    resumed_long, resumed_help = pegasus.many(["resume", long_task], ["resume", helpme, "--message", "what is 6*7?"])
    assert resumed_long.returncode == 0 and resumed_help.returncode == 0, (resumed_long, resumed_help)
    assert re.search(r"lifecycle: running\b", resumed_long.stdout), resumed_long.stdout

    # Refusals while the system runs (the long task holds again): one line, exit 1.
    unknown, resume_done, approve_running, retry_done, cancel_canceled, start_again = pegasus.many(
        ["status", "no-such-task"], ["resume", finished], ["approve", long_task], ["retry", finished],
        ["cancel", doomed], ["start"])
    assert_failure(unknown, "no-such-task")
    assert_failure(resume_done, "done")
    # Refused in one line whatever state the resumed task reached meanwhile (on a loaded machine these six
    # commands can outlast its 25 s hold: it may be done already).
    assert_failure(approve_running)
    assert re.search(r"'(running|done)'", approve_running.stderr), approve_running.stderr
    assert_failure(retry_done, "done")
    assert_failure(cancel_canceled, "canceled")
    assert_failure(start_again, str(pegasus.port))
    assert is_running(pegasus.spec)

    # Given the information, the vague task completes; the resumed long one finishes too, once released.
    release.touch()
    task = pegasus.wait_for(helpme, {"done", "failed", "canceled"})
    assert task["lifecycle_state"] == "done" and "42" in str(task["result"]), task
    task = pegasus.wait_for(long_task, {"done", "failed", "canceled"})
    assert task["lifecycle_state"] == "done" and task["runs"] >= 2, task
    with pegasus.client() as client:
        events = [h["event"] for h in as_shown(client.history(long_task))["cognitive"]]
    assert "TASK_SUSPENDED" in events and "TASK_RESUMED" in events
    assert list(pegasus.cwd.iterdir()) == []
    pegasus.track()


def test_manual_approval_then_stop(manual: Pegasus, tmp_path: Path) -> None:
    start_background(manual)
    release = tmp_path / "release"  # the slow task holds its slot until the test has queued and canceled
    with manual.client() as client:  # set up and checked through a client: approve, cancel and stop are the commands
        first, slow, waiting = (t["task_id"] for t in client.submit_many(
            [ARITHMETIC, hold_request(release), "echo queued"]))
        assert re.search(r"lifecycle: draft\b", manual.ok("status", first))
        assert {client.get(t)["lifecycle_state"] for t in (first, slow, waiting)} == {"draft"}, \
            "a task ran without approval"
        approved = manual.json("approve", first)
        assert approved["task_id"] == first and approved["lifecycle_state"] != "draft"
        task = waited(client, first, {"done", "failed", "canceled"})
        assert task["lifecycle_state"] == "done" and "14" in str(task["result"])

        # One slot: the second approved task waits in the queue, where it is canceled.  The slow
        # task is left to finish (a canceled one's tool step would hold `stop` up until it ends).
        assert manual.json("approve", slow)["lifecycle_state"] == "running"
        assert manual.json("approve", waiting)["lifecycle_state"] == "queued"
        assert manual.json("cancel", waiting)["lifecycle_state"] == "canceled"
        release.touch()
        assert waited(client, slow, {"done", "failed", "canceled"})["lifecycle_state"] == "done"
        assert [row["task_id"] for row in client.list(state="canceled")] == [waiting]

    manual.track()
    stopped = manual("stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"stopped": manual.port}
    assert not is_running(manual.spec) and system_pids(manual.spec) == []
    assert not manual.spec.pid_file.exists()
    assert_gone(manual.seen, "the stopped system")
    assert list(manual.cwd.iterdir()) == []
