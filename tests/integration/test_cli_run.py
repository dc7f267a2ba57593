"""``pegasus run`` with an embedded system, and commands without a system, end to end.

Every command runs as a real subprocess (the installed ``pegasus`` script, tests/support/cli.py) in an
empty working directory.  Proven here: ``run`` prints every transition in order and the result, exits
0 / 3 (blocked, with the question), and leaves no process and nothing in the working directory behind;
it exits 4 when an effect is unknown, and Ctrl-C stops its system at once; without a system every
command but ``run``/``start`` fails with exactly one stderr line ``pegasus: <reason>``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.runtime import procs
from actors.runtime.system import is_running, system_pids
from tests.support.cli import (ARITHMETIC, CLI_TIMEOUT, Pegasus, Sampler, assert_failure, assert_gone, at_once, make,
                               plugins_env, stop_and_check, stop_unread, transitions)
from tests.support.hold import PLUGIN as HOLD_PLUGIN
from tests.support.hold import append_key_until_request
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@dataclass
class Run:
    pegasus: Pegasus
    result: subprocess.CompletedProcess[str]
    seen: dict[int, int]  # the processes its embedded system had


EMBEDDED_RUNS = {
    "text": ["run", ARITHMETIC],
    "json": ["run", ARITHMETIC, "--json"],
    "reason_act": ["run", ARITHMETIC, "--machine", "reason_act"],
    "blocked": ["run", "help me"],
}


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """The runs of EMBEDDED_RUNS, at once, each with its own port, home and empty cwd.

    Concurrently, because shutting an embedded system down now and then takes seconds.
    """
    tmp = tmp_path_factory.mktemp("embedded")
    clis = {name: make(tmp, name) for name in EMBEDDED_RUNS}
    try:
        with Sampler(*(c.spec for c in clis.values())) as sampler:
            results = dict(zip(EMBEDDED_RUNS, at_once([(clis[n], args) for n, args in EMBEDDED_RUNS.items()])))
        for c in clis.values():
            c.seen.update(sampler.seen[c.port])
        yield {name: Run(clis[name], results[name], sampler.seen[clis[name].port]) for name in EMBEDDED_RUNS}
    finally:
        for c in clis.values():
            stop_and_check(c)


def _assert_cleaned_up(run: Run) -> None:
    """The embedded system is gone (every process, its port, its pid file); cwd untouched; logs kept."""
    # Every actor process logs its pid: those, and what the sampler saw (the admin and
    # Thespian's logger too, when it caught them), must all be gone.
    logged = {json.loads(line).get("pid") for line in
              (run.pegasus.home / "logs" / "pegasus.jsonl").read_text().splitlines() if line.strip()}
    assert len(logged - {None}) >= 3, "the embedded system's actors did not log"
    assert [pid for pid in logged - {None} if procs.is_alive(pid) and pid not in run.seen] == []
    assert_gone(run.seen, "the embedded system")
    assert not is_running(run.pegasus.spec) and system_pids(run.pegasus.spec) == []
    assert not run.pegasus.spec.pid_file.exists()
    assert list(run.pegasus.cwd.iterdir()) == []
    logs = run.pegasus.home / "logs"
    assert (logs / "pegasus.jsonl").stat().st_size > 0
    assert (logs / "actors.log").exists()


def test_run_embedded_prints_transitions_and_result(embedded: dict[str, Run]) -> None:
    result = embedded["text"].result
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert "embedded system" in out.splitlines()[0]
    seen = transitions(out)
    lifecycle = [(f, t) for machine, f, t, _ in seen if machine == "lifecycle"]
    assert lifecycle == [("-", "draft"), ("draft", "approved"), ("approved", "queued"), ("queued", "running"),
                         ("running", "verifying"), ("verifying", "verified"), ("verified", "done")]
    classic = [(f, t) for machine, f, t, _ in seen if machine == "classic"]
    assert classic[0] == ("idle", "perceiving") and classic[-1] == ("reflecting", "completed")
    assert [t for _, t in classic][:3] == ["perceiving", "thinking", "planning"]
    # The cognitive run happens between lifecycle running and verifying, in print order.
    order = [(machine, t) for machine, _, t, _ in seen]
    assert (order.index(("lifecycle", "running")) < order.index(("classic", "perceiving"))
            < order.index(("classic", "completed")) < order.index(("lifecycle", "verifying")))
    assert re.search(r"^\s*result:.*\b14\b", out, re.M), out
    assert re.search(r"^\s*lifecycle: done\b", out, re.M), out
    _assert_cleaned_up(embedded["text"])


def test_run_embedded_json(embedded: dict[str, Run]) -> None:
    run = embedded["json"]
    assert run.result.returncode == 0, run.result.stderr
    data = json.loads(run.result.stdout)  # nothing but the JSON document on stdout
    task = data["task"]
    assert task["lifecycle_state"] == "done" and task["state"] == "completed" and task["machine"] == "classic"
    assert "14" in str(task["result"]) and task["input"] == ARITHMETIC
    assert task["metadata"]["workspace"] == str(run.pegasus.cwd)
    steps = [(t["machine"], t["from_state"], t["to_state"]) for t in data["transitions"]]
    assert steps[0] == ("lifecycle", "-", "draft") and steps[-1] == ("lifecycle", "verified", "done")
    assert ("classic", "reflecting", "completed") in steps
    assert all(t["task_id"] == task["task_id"] for t in data["transitions"])
    _assert_cleaned_up(run)


def test_run_embedded_reason_act(embedded: dict[str, Run]) -> None:
    run = embedded["reason_act"]
    assert run.result.returncode == 0, run.result.stderr
    seen = transitions(run.result.stdout)
    assert {machine for machine, *_ in seen} == {"lifecycle", "reason_act"}
    assert seen[-1][:3] == ("lifecycle", "verified", "done")
    assert any(machine == "reason_act" and to == "completed" for machine, _, to, _ in seen)
    assert re.search(r"^\s*result:.*\b14\b", run.result.stdout, re.M)
    _assert_cleaned_up(run)


def test_run_blocked_exits_3_with_the_question(embedded: dict[str, Run]) -> None:
    run = embedded["blocked"]
    result = run.result
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr == ""
    assert ("classic", "thinking", "suspended", "NEED_MORE_INFO") in transitions(result.stdout)
    assert ("lifecycle", "running", "blocked", "TASK_BLOCKED") in transitions(result.stdout)
    question = re.search(r"^\s*question:\s*(.+)$", result.stdout, re.M)
    assert question and "What should I do?" in question.group(1), result.stdout
    assert re.search(r"^\s*lifecycle: blocked\b", result.stdout, re.M)
    _assert_cleaned_up(run)


def test_run_exits_4_when_an_effect_is_unknown(cli: Pegasus, tmp_path: Path) -> None:
    """Regression (issue 15): a task whose effectful step was interrupted ended done, exit 0, unmarked."""
    cli.env_extra.update(plugins_env(HOLD_PLUGIN))
    keys = tmp_path / "keys.txt"
    # The worker holds after the effect until released (never, here): with a 20 s hold, `stats` at a load of
    # 40 answered after the step had ended, and no worker was busy.
    argv = cli.argv(["run", append_key_until_request(keys, tmp_path / "never-released")])
    running = subprocess.Popen(argv, cwd=cli.cwd, env=cli.env(), text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not keys.exists():  # the effect has happened; the worker now holds
            assert time.monotonic() < deadline and running.poll() is None, running.communicate()
            time.sleep(0.05)
        cli.track()
        with cli.client() as client:  # the worker to kill, found through a client: the command tested is run
            busy = [w for w in client.stats()["pools"]["tool"]["workers"] if w["busy"]]
        assert len(busy) == 1
        os.kill(busy[0]["pid"], 9)  # a pid of the system this test started
        out, err = running.communicate(timeout=CLI_TIMEOUT)
    finally:
        stop_unread(running)  # killed, its system's processes would hold its pipes open: never read to their end
    assert running.returncode == 4, out + err
    assert err.startswith("pegasus: task failed: 1 effectful tool step(s) were interrupted") and err.count("\n") == 1
    assert re.search(r"^\s*effect unknown: append_key_until \(step 0, key \S+/a1\.0/i0/s0\)$", out, re.M), out
    assert "(exit_reason: unknown)" in out
    assert len(keys.read_text().split()) == 1  # never repeated


def test_ctrl_c_on_run_stops_the_embedded_system_at_once(cli: Pegasus) -> None:
    """Regression (issue 15): Ctrl-C with a worker busy in a tool step took 12.3 s."""
    # (A pytest-xdist worker ignores SIGINT, and an ignored signal is inherited: give the child the default.)
    running = subprocess.Popen(cli.argv(["run", "sleep 30"]), cwd=cli.cwd, env=cli.env(), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert running.stdout is not None
        for line in running.stdout:  # the transitions, live: wait for the tool step
            if "-> acting" in line:
                break
        with cli.client() as client:  # polled through a client, not a stats command each time
            wait_for(lambda: any(w["busy"] for w in client.stats()["pools"]["tool"]["workers"]),
                     what="a tool worker busy in the sleep")
        cli.track()
        began = time.monotonic()
        running.send_signal(2)  # SIGINT, as Ctrl-C
        out, err = running.communicate(timeout=CLI_TIMEOUT)
        elapsed = time.monotonic() - began
    finally:
        stop_unread(running)
    assert running.returncode == 130 and err.strip() == "pegasus: interrupted", (running.returncode, err)
    assert "acting -> " not in out, out  # stopped inside the step, not after it (out: what followed "-> acting")
    assert_gone(cli.seen, "the embedded system")
    # How fast is a figure, not a condition (12.3 s before: the admin waited 10 s for the busy worker).
    print(f"\nCtrl-C with a worker busy in a 30 s tool step: exited in {elapsed:.2f}s")


# --- failures without a system ---------------------------------------------------------------------


def test_commands_without_a_system_fail_with_one_line(cli: Pegasus) -> None:
    commands = [["status", "x"], ["stop"], ["list"], ["submit", "echo hi"], ["resume", "x", "--message", "m"],
                ["stats"], ["history", "x"]]
    for result in cli.many(*commands):
        assert_failure(result, str(cli.port))
    assert not is_running(cli.spec), "a command other than run/start started a system"
    assert list(cli.cwd.iterdir()) == []
    assert_failure(cli("status", "x", "--config", str(cli.home / "missing.toml")), "missing.toml")
    for result in cli.many(["status", "x", "--json"], ["stats", "--json"], ["stop", "--json"]):
        # Issue 16: with --json an error is JSON too, on stderr, with the same exit status.
        assert result.returncode == 1 and result.stdout == "", result
        error = json.loads(result.stderr)["error"]
        assert error["type"] == "SystemNotRunningError" and str(cli.port) in error["message"], error
