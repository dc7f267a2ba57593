"""MCP tools in a real system: a task calls a tool of a real MCP server subprocess
(tests/support/mcp_server.py, each start a copy forked from one process that imported it:
tests/support/mcp_fork.py) on a tool worker; the server dying mid-task is a clear tool
failure (its outcome unknown: never sent again), and the system keeps serving (a later call starts the server again)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.runtime.system import system_pids
from tests.support.mcp_fork import LAUNCHER, Forks

pytestmark = pytest.mark.integration



def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _mcp_server_pids(client) -> list[int]:
    """The server's processes: its command's (whose copy ends with it)."""
    return [pid for pid in system_pids(client.spec) if LAUNCHER in _cmdline(pid)]


@pytest.fixture
def forks(tmp_path: Path, subprocess_env: dict[str, str]) -> Iterator[Forks]:
    with Forks(tmp_path, subprocess_env) as server:
        yield server


def test_a_task_calls_an_mcp_tool_and_survives_the_server_dying(forks: Forks, pegasus) -> None:
    command, *args = forks.command()
    client = pegasus(mcp={"servers": [{"name": "demo", "command": command, "args": args, "timeout_s": 20.0}]},
                     pools={"tool_workers": 1})  # one tool worker: one server process to watch

    done = client.wait(client.submit('call demo.reverse {"text": "abc"}')["task_id"], timeout=60)
    assert done["lifecycle_state"] == "done", done.get("error")
    assert done["result"] == "demo.reverse 'abc': cba"
    first = _mcp_server_pids(client)
    assert len(first) == 1  # started by the tool worker, on first need

    crashed = client.wait(client.submit("call demo.crash {}")["task_id"], timeout=60)
    # demo.crash is effectful (not annotated): it may have had its effect, so it is never sent again (issue 28).
    assert (crashed["lifecycle_state"], crashed["exit_reason"]) == ("failed", "unknown")
    assert "MCP server 'demo' went away during demo.crash" in crashed["result"]
    assert [e["tool"] for e in crashed["effects_unknown"]] == ["demo.crash"]
    assert "tried" not in crashed["result"]

    again = client.wait(client.submit('call demo.reverse {"text": "xyz"}')["task_id"], timeout=60)
    assert again["result"] == "demo.reverse 'xyz': zyx"
    assert _mcp_server_pids(client) and set(_mcp_server_pids(client)).isdisjoint(first)

    bad = client.wait(client.submit('call demo.reverse {"txt": "abc"}')["task_id"], timeout=60)
    assert "'text' is a required property" in bad["result"] and bad["lifecycle_state"] == "failed"
