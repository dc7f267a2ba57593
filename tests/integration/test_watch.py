"""``pegasus watch`` under a real pseudo-terminal (pexpect): it shows a submitted task change state live, and
Ctrl-C ends it with exit status 0 and the terminal restored (the alternate screen left, the cursor shown)."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support.hold import hold_request

pytestmark = pytest.mark.integration

PLUGIN = {"tools": {"plugins": ["tests.support.hold:register"]}}
ROOT = Path(__file__).resolve().parents[2]
LEAVE_ALTERNATE_SCREEN, SHOW_CURSOR = "\x1b[?1049l", "\x1b[?25h"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # an xdist worker ignores SIGINT, and a child inherits that


def test_watch_shows_a_task_change_state_and_ctrl_c_restores_the_terminal(
        pegasus: Any, state_dir: Path, tmp_path: Path) -> None:
    client = pegasus(**PLUGIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    env.update(PEGASUS_HOME=str(state_dir), TERM="xterm-256color", COLUMNS="160", LINES="40",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p))
    child = pexpect.spawn("pegasus", ["watch", "--port", str(client.spec.admin_port), "--interval", "0.2"],
                          env=env, cwd=str(tmp_path), dimensions=(40, 160), encoding="utf-8",
                          codec_errors="replace", timeout=30, preexec_fn=_default_sigint)
    try:
        child.expect("pegasus watch")
        child.expect("pools")
        release = tmp_path / "release"
        task_id = client.submit(hold_request(release))["task_id"]
        row = re.escape(task_id[:12]) + r"[^\n]*?"
        child.expect(row + "running[^\n]*?acting")  # its held step runs
        release.touch()
        child.expect(row + "done[^\n]*?completed")
        child.sendintr()
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, (child.exitstatus, child.signalstatus)
        tail = child.before
        assert LEAVE_ALTERNATE_SCREEN in tail and SHOW_CURSOR in tail, repr(tail[-300:])
        assert "Traceback" not in tail
    finally:
        if child.isalive():
            child.terminate(force=True)
