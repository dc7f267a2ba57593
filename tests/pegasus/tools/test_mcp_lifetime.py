"""No MCP server outlives the process that started it: a host closed while a server is still
starting ends it, and a host process SIGKILLed takes its servers with it (Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pegasus.tools import mcp
from tests.support.waiting import wait_for

HUNG = str(Path(__file__).resolve().parents[2] / "support" / "mcp_hung.py")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def hung_spec(pids: Path) -> mcp.McpServerSpec:
    # A start timeout no test reaches: only closing the host (or its death) may end the server.
    return mcp.McpServerSpec(name="hung", command=sys.executable, args=(HUNG, str(pids)), env=(),
                             effect="effectful", timeout_s=600.0, start_timeout_s=600.0)


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def started(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


@pytest.fixture
def pids(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "hung.pids"
    yield path
    for pid in started(path):  # only the servers this test started (their pids written by themselves)
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_host_closed_while_a_server_starts_ends_that_server(pids: Path) -> None:
    host = mcp.McpHost([hung_spec(pids)])
    host.begin()
    server = wait_for(lambda: started(pids), what="the hung server started")[0]
    host.close()
    wait_for(lambda: not running(server), what=f"server {server} ended with its host's close")
    assert started(pids) == [server]  # and no start after the close


def test_a_host_process_killed_takes_its_servers_with_it(pids: Path, tmp_path: Path) -> None:
    script = ("import sys, threading; from pegasus.tools import mcp; from tests.pegasus.tools.test_mcp_lifetime "
              "import hung_spec; from pathlib import Path; mcp.McpHost([hung_spec(Path(sys.argv[1]))]).begin(); "
              "threading.Event().wait()")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[3]),
                                                        os.environ.get("PYTHONPATH", "")])}
    host = subprocess.Popen([sys.executable, "-c", script, str(pids)], env=env, cwd=tmp_path)
    try:
        server = wait_for(lambda: started(pids), what="the hung server started")[0]
    finally:
        host.kill()  # no close, no atexit: only the kernel can end the server now
        host.wait()
    wait_for(lambda: not running(server), what=f"server {server} ended with the process that started it")
