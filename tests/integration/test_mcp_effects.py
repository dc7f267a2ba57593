"""An MCP call whose outcome is unknown is never sent again (issue 28), over stdio and over
Streamable HTTP: a real FastMCP server (tests/support/mcp_server.py, each start a copy forked from
one process that imported it: tests/support/mcp_fork.py) records each call's idempotency key (sent
in the call's ``_meta``), then holds or exits mid-call.

For each transport, the server killed mid-call, exiting mid-call, or not answering within its
``timeout_s``: the effectful ``record`` step ends ``unknown`` (in ``effects_unknown``, the task
failed with exit_reason unknown) and its key is written once; the idempotent ``touch`` is sent
again with the same key and the task is done.  Over stdio also: SIGKILL of the MCP host actor
mid-call is ``unknown`` too (``touch`` sent again to the new host), and the new host serves
the next call; so is SIGKILL of the tool worker waiting for the call."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from actors.runtime.system import system_pids
from tests.support.mcp_fork import LAUNCHER, Forks
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

TIMEOUT_S = 2.0  # the server's timeout_s: a held call that is not killed ends by it


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class HttpServer:
    """The test server over Streamable HTTP on a fixed port, started again after it dies."""

    def __init__(self, port: int, env: dict[str, str], forks: Forks) -> None:
        self.port, self.env, self.forks = port, env, forks
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.forks.command("--http", str(self.port)), env=self.env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._listening, what="the HTTP MCP server listening")

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        """The server killed (its command, which takes its copy along) and its port closed."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            wait_for(lambda: not self._listening(), what="the killed HTTP MCP server's port closed")


@pytest.fixture
def forks(tmp_path: Path, subprocess_env: dict[str, str]) -> Iterator[Forks]:
    with Forks(tmp_path, subprocess_env) as server:
        yield server


@pytest.fixture
def http_server(tmp_path: Path, subprocess_env: dict[str, str], forks: Forks) -> Iterator[HttpServer]:
    server = HttpServer(procs.free_port(), {**subprocess_env, "PEGASUS_TEST_MCP_RECORD": str(tmp_path / "record")},
                        forks)
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_mcp_call_whose_outcome_is_unknown_is_never_sent_again(transport: str, forks: Forks,
                                                                  pegasus: Callable[..., Any], tmp_path: Path,
                                                                  request: Any) -> None:
    # (forks before pegasus: the system is shut down before its server's fork server.)
    record = tmp_path / "record"
    server: dict[str, Any] = {"name": "m", "timeout_s": TIMEOUT_S}
    web: HttpServer | None = None
    if transport == "stdio":
        command, *args = forks.command()
        server.update(command=command, args=args, env={"PEGASUS_TEST_MCP_RECORD": str(record)})
    else:
        web = request.getfixturevalue("http_server")
        server["url"] = f"http://127.0.0.1:{web.port}/mcp"
    client = pegasus(mcp={"servers": [server], "retry_backoff_s": 0.2, "retry_backoff_max_s": 0.5},
                     pools={"tool_workers": 1})

    def keys() -> list[str]:
        return record.read_text().split() if record.exists() else []

    def ready() -> None:  # the server (started again) answers: the next case starts from a live session
        wait_for(lambda: client.wait(client.submit('call m.reverse {"text": "ab"}')["task_id"])["lifecycle_state"]
                 == "done", what="the server answering again")

    def kill_server() -> None:
        if web is not None:
            web.stop()
            web.start()
        else:
            pids = wait_for(lambda: [p for p in system_pids(client.spec) if LAUNCHER in _cmdline(p)],
                            what="the server's process")  # its command: its copy ends with it
            for pid in pids:
                os.kill(pid, signal.SIGKILL)

    def kill(title: str) -> Callable[[], None]:
        def kill_process() -> None:
            found = wait_for(lambda: [p for p in system_pids(client.spec) if f"pegasus: {title}" in _cmdline(p)],
                             what=f"the {title}'s process")
            os.kill(found[0], signal.SIGKILL)
        kill_process.__name__ = f"kill {title}"
        return kill_process

    kill_host, kill_worker = kill("mcp host"), kill("tool worker")

    def run(tool: str, mode: str, then: Callable[[], None] | None = None) -> tuple[dict[str, Any], list[str]]:
        before = len(keys())
        task_id = client.submit(f'call m.{tool} {{"mode": "{mode}"}}')["task_id"]
        # At the first pace: a kill must land inside the server's TIMEOUT_S, and reading a file costs nothing.
        wait_for(lambda: len(keys()) > before, what=f"m.{tool} {mode} called", poll_max_s=0.02)
        if then is not None:
            then()
        if mode == "exit" and web is not None:
            wait_for(lambda: web.process is not None and web.process.poll() is not None, what="the server exited")
            web.start()
        final = client.wait(task_id, timeout=60)
        return final, keys()[before:]

    ready()
    went_away = "MCP server 'm' went away during m.record"
    cases: list[tuple[str, Callable[[], None] | None, str]] = [
        ("hold", kill_server, went_away), ("exit", None, went_away),
        ("hold", None, f"m.record did not answer within {TIMEOUT_S:g}s")]
    if transport == "stdio":
        cases += [("hold", kill_host, "the machine's MCP host died during m.record"),
                  ("hold", kill_worker, "m.record: interrupted; not repeated")]
    for mode, then, why in cases:
        what = f"{mode} {then.__name__ if then else ''}"
        final, sent = run("record", mode, then)
        assert (final["lifecycle_state"], final["exit_reason"]) == ("failed", "unknown"), (what, final["result"])
        assert why in final["result"] and "interrupted; not repeated" in final["result"], (what, final["result"])
        assert [(e["tool"], e["key"]) for e in final["effects_unknown"]] == [("m.record", sent[0])], what
        assert len(sent) == 1 and sent[0].startswith(final["task_id"]), (what, sent)  # sent once, with its key
        ready()
        if then is kill_worker:
            continue  # the built-in path (the journal's started row), where idempotent steps are replanned
        final, sent = run("touch", mode, then)
        assert final["lifecycle_state"] == "done", (what, final["result"])
        assert len(sent) == 2 and sent[0] == sent[1], (what, sent)  # sent again, with the same key
        assert final["effects_unknown"] == []
        ready()
