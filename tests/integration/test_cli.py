"""The ``pegasus`` console script end to end, against real multiprocTCPBase systems.

Every command runs as a real subprocess (the installed ``pegasus`` script) in an
empty working directory, with ``$PEGASUS_HOME`` in a temporary directory and an
explicit ``--port`` (never 1900).  What is proven here:

* ``run`` with an embedded system prints every transition in order and the
  result, exits 0 / 3 (blocked, with the question), and leaves no process and
  nothing in the working directory behind; it exits 1 when a tool step failed,
  4 when an effect is unknown, and Ctrl-C stops its system at once;
* a background system (``start``) returns promptly with stdout on a pipe, and
  ``submit``/``status``/``list``/``history``/``stats``/``run`` (attached),
  ``suspend``/``resume``/``cancel``/``approve``/``stop`` work on it;
* every failure exits 1 with exactly one stderr line ``pegasus: <reason>``.

Every background system is stopped in a finalizer (``stop_daemon``) even when a
test fails, and every process seen of it must be gone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from actors.runtime.system import SystemSpec, is_running, stop_daemon, system_pids
from tests.support.hold import PLUGIN as HOLD_PLUGIN
from tests.support.hold import hold_request
from tests.support.hosts import PROJECT_ROOT
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

CLI_TIMEOUT = 60.0  # seconds for one command; they normally take well under 2 s
ARITHMETIC = "what is 2 + 3 * 4?"

# "05:21:38.620  lifecycle       draft -> approved   TASK_APPROVED"
TRANSITION = re.compile(r"^\d\d:\d\d:\d\d\.\d{3}\s+(\S+)\s+(\S+) -> (\S+)\s+(\S+)")




@dataclass
class Pegasus:
    """Runs the real ``pegasus`` script for one port and one state directory."""

    port: int
    home: Path
    cwd: Path
    env_extra: dict[str, str] = field(default_factory=dict)
    seen: dict[int, int] = field(default_factory=dict)  # pid -> start time of this system's processes

    @property
    def spec(self) -> SystemSpec:
        return SystemSpec(admin_port=self.port, state_dir=self.home)

    def env(self) -> dict[str, str]:
        # No PEGASUS_* setting of the caller's may leak in (a config file, another home).
        env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
        env["PEGASUS_HOME"] = str(self.home)
        env.update(self.env_extra)
        return env

    def argv(self, args: Sequence[str]) -> list[str]:
        return ["pegasus", *args, "--port", str(self.port)]

    def __call__(self, *args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(args), cwd=self.cwd, env=self.env(), capture_output=True,
                              text=True, timeout=timeout)

    def many(self, *commands: Sequence[str]) -> list[subprocess.CompletedProcess[str]]:
        """Run independent commands at once (each pays ~0.4 s of interpreter start-up)."""
        return _many([(self, c) for c in commands])

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.returncode == 0, f"pegasus {' '.join(args)}: {result.returncode}\n{result.stdout}{result.stderr}"
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def wait_for(self, task_id: str, states: set[str], timeout: float = 60.0) -> dict[str, Any]:
        """Poll ``status --json`` until the task's lifecycle state is one of states."""
        deadline = time.monotonic() + timeout
        while True:
            task = self.json("status", task_id)
            if task["lifecycle_state"] in states:
                return task
            assert time.monotonic() < deadline, f"task {task_id} still {task['lifecycle_state']}/{task['state']}"
            time.sleep(0.1)

    def track(self) -> None:
        """Remember the system's current processes (checked gone at the end)."""
        self.seen.update(procs.identities(system_pids(self.spec)))

    def admin_pid(self) -> int:
        record = json.loads(self.spec.pid_file.read_text())
        return int(record["admin"][0])


def _many(commands: Sequence[tuple[Pegasus, Sequence[str]]]) -> list[subprocess.CompletedProcess[str]]:
    """Run (pegasus, args) commands concurrently; their results in order."""
    running = [(p.argv(args), subprocess.Popen(p.argv(args), cwd=p.cwd, env=p.env(), text=True,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE))
               for p, args in commands]
    done = []
    try:
        for argv, proc in running:
            out, err = proc.communicate(timeout=CLI_TIMEOUT)
            done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    finally:
        for _, proc in running:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return done


def assert_failure(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 1, exactly one stderr line 'pegasus: <reason>' mentioning fragments, no stdout.

    (``run`` may have printed the transitions it saw before it failed.)
    """
    where = f"{' '.join(result.args)} -> {result.returncode}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.returncode == 1, where
    assert result.stdout == "" or result.args[1] == "run", where
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pegasus: "), where
    assert "Traceback" not in result.stderr, where
    for fragment in fragments:
        assert fragment in lines[0], where


def assert_gone(seen: dict[int, int], what: str) -> None:
    leftovers = procs.wait_gone(seen, 60.0)
    assert not leftovers, f"processes {leftovers} of {what} left behind"


def transitions(stdout: str) -> list[tuple[str, str, str, str]]:
    """(machine, from, to, event) of every transition line ``run`` printed, in order."""
    return [m.groups() for m in map(TRANSITION.match, stdout.splitlines()) if m]  # type: ignore[misc]


class Sampler:
    """Collects the processes of the specs' systems while short-lived commands run."""

    def __init__(self, *specs: SystemSpec) -> None:
        self.specs = specs
        self.seen: dict[int, dict[int, int]] = {spec.admin_port: {} for spec in specs}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for spec in self.specs:
                self.seen[spec.admin_port].update(procs.identities(system_pids(spec)))
            self._stop.wait(0.02)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --- fixtures -------------------------------------------------------------------------------


def plugins_env(*plugins: str) -> dict[str, str]:
    """The settings that load test plugins in a ``pegasus`` process, with the clone on its path: an editable
    install maps only ``actors`` and ``pegasus``, so ``tests`` imports only from the clone's root."""
    return {"PEGASUS_TOOLS__PLUGINS": json.dumps(list(plugins)), "PYTHONPATH": str(PROJECT_ROOT)}


def _make(tmp: Path, name: str, **env_extra: str) -> Pegasus:
    home, cwd = tmp / f"{name}-home", tmp / f"{name}-cwd"
    home.mkdir()
    cwd.mkdir()
    return Pegasus(port=procs.free_port(), home=home.resolve(), cwd=cwd.resolve(), env_extra=dict(env_extra))


def _stop_and_check(pegasus: Pegasus) -> None:
    """Finalizer: stop the system if it still runs; every process ever seen must be gone."""
    pegasus.track()
    try:
        if is_running(pegasus.spec):
            stop_daemon(pegasus.spec)
    finally:
        survivors = procs.kill_all(dict(pegasus.seen), grace=5.0)  # only our own pids, by identity
    assert not survivors, f"processes {survivors} survived SIGKILL"
    assert not is_running(pegasus.spec)


def _start_background(pegasus: Pegasus) -> dict[str, Any]:
    """``pegasus start --json`` with stdout/stderr on pipes returns while its system runs on.

    An admin that inherited the pipes would hold them open for its whole life: ``start`` would never see
    EOF (TimeoutExpired here).  Returning with the system still running is the fact, whatever the load.
    """
    result = pegasus("start", "--json")
    pegasus.track()
    assert result.returncode == 0, result.stderr
    assert is_running(pegasus.spec), "start returned, but its system is not running"
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pegasus, dict[str, Any]]]:
    """One background system (default settings) shared by the tests of this module."""
    pegasus = _make(tmp_path_factory.mktemp("background"), "bg", **plugins_env(HOLD_PLUGIN))
    try:
        info = _start_background(pegasus)
        yield pegasus, info
    finally:
        _stop_and_check(pegasus)


@pytest.fixture
def manual(tmp_path: Path) -> Iterator[Pegasus]:
    """A Pegasus whose system (once started) needs ``approve`` and runs one task at a time."""
    pegasus = _make(tmp_path, "manual", PEGASUS_RUNTIME__APPROVAL_POLICY="manual",
                    PEGASUS_RUNTIME__MAX_ACTIVE_TASKS="1", **plugins_env(HOLD_PLUGIN))
    try:
        yield pegasus
    finally:
        _stop_and_check(pegasus)


# --- run with an embedded system --------------------------------------------------------------


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
    clis = {name: _make(tmp, name) for name in EMBEDDED_RUNS}
    try:
        with Sampler(*(c.spec for c in clis.values())) as sampler:
            results = dict(zip(EMBEDDED_RUNS, _many([(clis[n], args) for n, args in EMBEDDED_RUNS.items()])))
        for c in clis.values():
            c.seen.update(sampler.seen[c.port])
        yield {name: Run(clis[name], results[name], sampler.seen[clis[name].port]) for name in EMBEDDED_RUNS}
    finally:
        for c in clis.values():
            _stop_and_check(c)


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


# --- a background system -----------------------------------------------------------------------


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
    assert pegasus.json("status", ran.stdout.split()[1])["lifecycle_state"] == "done"
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


def _title(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def test_background_processes_have_readable_titles(background: tuple[Pegasus, dict[str, Any]]) -> None:
    """Issue 16: every process of a system showed as ``python3 -P -c from actors.runtime.launcher import main; main()``."""
    pegasus, info = background
    assert pegasus("run", "echo titles").returncode == 0  # a run: a task actor is kept for the next
    pegasus.track()
    home = f"[{pegasus.home}]"
    titles = sorted(_title(pid) for pid in procs.identities(system_pids(pegasus.spec)))
    expected = {f"pegasus: {role} {home}" for role in (
        "launcher", "watcher", f"admin :{pegasus.port}", "logger", "guardian", "supervisor", "llm pool", "tool pool",
        "task actor", *(f"{pool} worker {n}" for pool in ("llm", "tool") for n in range(3)))}
    assert expected <= set(titles), titles
    assert all(title.startswith("pegasus: ") and title.endswith(home) for title in titles), titles
    assert _title(info["pid"]) == f"pegasus: admin :{pegasus.port} {home}"


# Each fails its one tool step (twice: the offline processors retry it once).
FAILING_STEPS = {"list ./src": "list_dir", "read /nonexistent": "read_file", "what is 1/0": "arithmetic",
                 "call nosuchtool {}": "nosuchtool"}
REFUSED_STEPS = {"read /nonexistent", "call nosuchtool {}"}  # outside the workspace, an unknown tool: tried once


def test_run_exits_1_when_a_tool_step_failed(background: tuple[Pegasus, dict[str, Any]]) -> None:
    """Regression (issue 15): these four ended done and `run` exited 0."""
    pegasus, _ = background
    results = pegasus.many(*(["run", text] for text in FAILING_STEPS),
                           *(["run", text, "--json"] for text in FAILING_STEPS))
    for (text, tool), result, as_json in zip(FAILING_STEPS.items(), results, results[len(FAILING_STEPS):]):
        assert_failure(result, "task failed: 1 tool step(s) failed", tool)
        assert re.search(r"^\s*lifecycle: failed\b", result.stdout, re.M), result.stdout
        assert re.search(r"^\s*result:\s*Could not", result.stdout, re.M), result.stdout  # the answer explains
        reason = "fatal_error" if text in REFUSED_STEPS else "retry_exhausted"
        assert f"(exit_reason: {reason})" in result.stdout
        assert as_json.returncode == 1, as_json.stderr
        error = json.loads(as_json.stderr)["error"]  # --json: the failure is JSON too (issue 16)
        assert error["type"] == "TaskFailed" and error["message"].startswith("task failed: 1 tool step(s) failed")
        task = json.loads(as_json.stdout)["task"]
        assert error["task_id"] == task["task_id"]
        assert (task["lifecycle_state"], task["state"], task["exit_reason"]) == ("failed", "failed", reason)
        assert task["effects_unknown"] == []
        # the step and respond, twice; a refusal once (issue 31: the same call is refused again)
        assert [s["stage"] for s in task["stages"]].count("act") == (2 if text in REFUSED_STEPS else 4)


def test_run_exits_4_when_an_effect_is_unknown(cli: Pegasus, tmp_path: Path) -> None:
    """Regression (issue 15): a task whose effectful step was interrupted ended done, exit 0, unmarked."""
    cli.env_extra.update(plugins_env("tests.support.tools:register"))
    keys = tmp_path / "keys.txt"
    argv = cli.argv(["run", f"call append_key {json.dumps({'path': str(keys), 'hold_s': 20})}"])
    running = subprocess.Popen(argv, cwd=cli.cwd, env=cli.env(), text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not keys.exists():  # the effect has happened; the worker now holds for 20 s
            assert time.monotonic() < deadline and running.poll() is None, running.communicate()
            time.sleep(0.05)
        cli.track()
        busy = [w for w in cli.json("stats")["pools"]["tool"]["workers"] if w["busy"]]
        assert len(busy) == 1
        os.kill(busy[0]["pid"], 9)  # a pid of the system this test started
        out, err = running.communicate(timeout=CLI_TIMEOUT)
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate()
    assert running.returncode == 4, out + err
    assert err.startswith("pegasus: task failed: 1 effectful tool step(s) were interrupted") and err.count("\n") == 1
    assert re.search(r"^\s*effect unknown: append_key \(step 0, key \S+/a1\.0/i0/s0\)$", out, re.M), out
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
        wait_for(lambda: any(w["busy"] for w in cli.json("stats")["pools"]["tool"]["workers"]),
                 what="a tool worker busy in the sleep")
        cli.track()
        began = time.monotonic()
        running.send_signal(2)  # SIGINT, as Ctrl-C
        out, err = running.communicate(timeout=CLI_TIMEOUT)
        elapsed = time.monotonic() - began
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate()
    assert running.returncode == 130 and err.strip() == "pegasus: interrupted", (running.returncode, err)
    assert "acting -> " not in out, out  # stopped inside the step, not after it (out: what followed "-> acting")
    assert_gone(cli.seen, "the embedded system")
    # How fast is a figure, not a condition (12.3 s before: the admin waited 10 s for the busy worker).
    print(f"\nCtrl-C with a worker busy in a 30 s tool step: exited in {elapsed:.2f}s")


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

    before = pegasus.json("list")["total"]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    too_long = tmp_path / "too_long.txt"
    too_long.write_text("echo fine\n" + "x" * 70000 + "\n")  # line 2 is over max_input_bytes
    both, blank, missing, bad = pegasus.many(["submit", "echo x", "--file", str(tasks)], ["submit", "--file", str(empty)],
                                             ["submit", "--file", str(tmp_path / "missing.txt")],
                                             ["submit", "--file", str(too_long)])
    assert_failure(both, "not both")
    assert_failure(blank, "holds no task")
    assert_failure(missing, "cannot read")
    assert_failure(bad, "none of the 2 tasks submitted", "task 2: task text is 70000 bytes")
    assert pegasus.json("list")["total"] == before  # a refused batch creates none of its tasks


def test_background_block_resume_suspend_cancel(background: tuple[Pegasus, dict[str, Any]]) -> None:
    pegasus, _ = background
    # Steps that hold until released (at most 25 s): the suspend and the cancel must reach them mid-step, and a
    # CLI call takes 2-3 s at a load of 10.
    release = pegasus.cwd.parent / "release"
    held = f"call hold_until {json.dumps({'path': str(release), 'timeout_s': 25})}"
    submits = pegasus.many(["submit", "help me"], ["submit", held], ["submit", held], ["submit", "echo finished"])
    assert all(r.returncode == 0 for r in submits), submits
    helpme, long_task, doomed, finished = (r.stdout.strip() for r in submits)

    # The long task is suspended while its sleep step runs, the other one is canceled.
    running = pegasus.wait_for(long_task, {"running"})
    deadline = time.monotonic() + 60
    while running["state"] != "acting":
        assert time.monotonic() < deadline, running
        running = pegasus.json("status", long_task)
    suspended, canceled = pegasus.many(["suspend", long_task, "--json"], ["cancel", doomed, "--json"])
    assert suspended.returncode == 0, suspended.stderr
    task = json.loads(suspended.stdout)
    assert (task["lifecycle_state"], task["state"]) == ("blocked", "suspended")
    assert canceled.returncode == 0, canceled.stderr
    assert json.loads(canceled.stdout)["lifecycle_state"] == "canceled"
    assert pegasus.json("status", doomed)["lifecycle_state"] == "canceled"
    assert pegasus.json("status", long_task)["lifecycle_state"] == "blocked"

    # The vague task waits for information and shows its question.
    task = pegasus.wait_for(helpme, {"blocked", "done", "failed"})
    assert (task["lifecycle_state"], task["state"]) == ("blocked", "suspended")
    assert task["question"]
    status = pegasus.ok("status", helpme)
    assert re.search(r"lifecycle: blocked\s+cognitive: suspended", status) and "question:" in status
    assert {helpme, long_task} <= {row["task_id"] for row in pegasus.json("list", "--state", "blocked")["tasks"]}
    assert pegasus.wait_for(finished, {"done", "failed"})["lifecycle_state"] == "done"

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
    events = [h["event"] for h in pegasus.json("history", long_task)["cognitive"]]
    assert "TASK_SUSPENDED" in events and "TASK_RESUMED" in events
    assert list(pegasus.cwd.iterdir()) == []
    pegasus.track()


def test_manual_approval_then_stop(manual: Pegasus, tmp_path: Path) -> None:
    _start_background(manual)
    release = tmp_path / "release"  # the slow task holds its slot until the test has queued and canceled
    submits = manual.many(["submit", ARITHMETIC], ["submit", hold_request(release)], ["submit", "echo queued"])
    assert all(r.returncode == 0 for r in submits), submits
    first, slow, waiting = (r.stdout.strip() for r in submits)
    assert re.search(r"lifecycle: draft\b", manual.ok("status", first))
    assert {manual.json("status", t)["lifecycle_state"] for t in (first, slow, waiting)} == {"draft"}, \
        "a task ran without approval"
    approved = manual.json("approve", first)
    assert approved["task_id"] == first and approved["lifecycle_state"] != "draft"
    task = manual.wait_for(first, {"done", "failed", "canceled"})
    assert task["lifecycle_state"] == "done" and "14" in str(task["result"])

    # One slot: the second approved task waits in the queue, where it is canceled.  The slow
    # task is left to finish (a canceled one's tool step would hold `stop` up until it ends).
    assert manual.json("approve", slow)["lifecycle_state"] == "running"
    assert manual.json("approve", waiting)["lifecycle_state"] == "queued"
    assert manual.json("cancel", waiting)["lifecycle_state"] == "canceled"
    release.touch()
    assert manual.wait_for(slow, {"done", "failed", "canceled"})["lifecycle_state"] == "done"
    assert [row["task_id"] for row in manual.json("list", "--state", "canceled")["tasks"]] == [waiting]

    manual.track()
    stopped = manual("stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"stopped": manual.port}
    assert not is_running(manual.spec) and system_pids(manual.spec) == []
    assert not manual.spec.pid_file.exists()
    assert_gone(manual.seen, "the stopped system")
    assert list(manual.cwd.iterdir()) == []


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
