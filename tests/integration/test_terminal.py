"""What the CLI draws on a terminal (a real pseudo-terminal, pexpect) and only there: ``run``'s spinner with the
stage and its elapsed time, ``submit --file``'s and ``wait``'s progress bars; piped, the plain lines only."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support.cli import Pegasus
from tests.support.hold import hold_request

pytestmark = pytest.mark.integration

PLUGIN = '["tests.support.hold:register"]'
ROOT = Path(__file__).resolve().parents[2]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # an xdist worker ignores SIGINT, and a child inherits that


def terminal(pegasus: Pegasus, *args: str) -> pexpect.spawn:
    """``pegasus ARGS`` on a pseudo-terminal (stdout and stderr both on it)."""
    env = {**pegasus.env(), "TERM": "xterm-256color", "PEGASUS_TOOLS__PLUGINS": PLUGIN,
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    argv = pegasus.argv(args)
    return pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(pegasus.cwd), dimensions=(30, 140), encoding="utf-8",
                         codec_errors="replace", timeout=60, preexec_fn=_default_sigint)


def finish(child: pexpect.spawn) -> str:
    child.expect(pexpect.EOF)
    child.close()
    return str(child.before)


def test_run_shows_the_stage_running_and_its_time_on_a_terminal(cli: Pegasus, tmp_path: Path) -> None:
    release = tmp_path / "release"
    child = terminal(cli, "run", hold_request(release))
    try:
        child.expect(r"acting\s+PLAN_DONE")  # the transition line, printed above the spinner
        child.expect(r"act \(acting\)\s+\d+\.\ds")  # the spinner: the stage its state runs, and for how long
        release.touch()
        rest = finish(child)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert child.exitstatus == 0, rest
    assert "result:" in rest and "released by" in rest


def test_submit_file_and_wait_show_progress_bars_on_a_terminal_and_plain_lines_when_piped(
        pegasus: Any, state_dir: Path, tmp_path: Path) -> None:
    client = pegasus(tools={"plugins": ["tests.support.hold:register"]})
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cli = Pegasus(port=client.spec.admin_port, home=state_dir, cwd=cwd)
    release = tmp_path / "release"
    lines = tmp_path / "tasks.txt"
    lines.write_text(f"{hold_request(release)}\necho two\necho three\n")

    child = terminal(cli, "submit", "--file", str(lines))
    out = finish(child)
    assert child.exitstatus == 0, out
    assert "tasks submitted" in out  # the bar (transient: erased once done)
    ids = re.findall(r"\b[0-9a-f]{32}\b", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out))  # escapes left out
    assert len(ids) == 3, out

    child = terminal(cli, "wait", *ids)
    try:
        child.expect(f"{ids[1]} done")
        child.expect("tasks ended")
        child.expect(r"2/3")  # the held one still going
        release.touch()
        child.expect(f"{ids[0]} done")
        out = finish(child)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert child.exitstatus == 0, out

    piped = cli("wait", *ids)  # not a terminal: exactly a line per task, nothing drawn
    assert piped.returncode == 0 and piped.stderr == ""
    assert sorted(piped.stdout.splitlines()) == sorted(f"{task_id} done" for task_id in ids)
    assert "\x1b" not in piped.stdout  # (submit --file piped: tests/integration/test_cli_background.py, unchanged)
    as_json = cli("wait", ids[1], "--json")
    assert [task["lifecycle_state"] for task in json.loads(as_json.stdout)] == ["done"]

    held = client.submit(hold_request(tmp_path / "never"))["task_id"]
    client.cancel(held)
    failed = cli("wait", ids[1], held)
    assert (failed.returncode, failed.stdout) == (1, f"{ids[1]} done\n{held} canceled\n")
    assert failed.stderr == f"pegasus: 1 of 2 tasks did not end done: {held}\n"
