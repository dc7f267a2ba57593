"""Copies of tests/support/mcp_server.py forked from one process that imported it: its imports (the mcp SDK's
models, most of a start's CPU) paid once a test, not at each start (a test that kills the server starts it often).

``Forks`` (a fixture's) runs ``python mcp_fork.py serve SOCKET``, which imports the server and waits.  The command a
test's system starts for its server is ``python mcp_fork.py SOCKET`` (stdio; ``--http PORT``: Streamable HTTP): it
hands its stdin, stdout, stderr and ``PEGASUS_TEST_MCP_*`` environment to a copy forked to serve on them, keeps
none of them, and lives as long as the copy does.  Killed, it takes the copy along (the copy reads its end of
their connection): killing it kills the server, as killing the server's own process did.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

PREFIX = "PEGASUS_TEST_MCP_"
LAUNCHER = str(Path(__file__).resolve())


def hand_over(path: str, argv: list[str]) -> None:
    """The server's command: its descriptors and environment to a new copy; returns when the copy has ended."""
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(path)
    env = {key: value for key, value in os.environ.items() if key.startswith(PREFIX)}
    socket.send_fds(conn, [json.dumps({"argv": argv, "env": env}).encode()], [0, 1, 2])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the copy alone holds the pipes: the system sees them close when it ends
        os.dup2(null, fd)
    while conn.recv(64):
        pass


def serve(path: str) -> None:
    """The fork server: the server's module imported, then a copy forked for each command that connects."""
    import anyio  # noqa: F401, PLC0415 - what the copies' run loads, loaded once here
    import uvicorn  # noqa: F401, PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.support import mcp_server  # noqa: PLC0415

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the copies are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)
    print("ready", flush=True)
    while True:
        if sys.stdin in select.select([listener, sys.stdin], [], [])[0]:  # the test writes nothing: its end closed
            os.killpg(0, signal.SIGKILL)  # the test's process is gone: so are the copies
        conn, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(conn, 65536, 3)
        if os.fork() == 0:
            listener.close()
            _copy(mcp_server, conn, json.loads(message), fds)
        conn.close()
        for fd in fds:
            os.close(fd)


def _copy(mcp_server: Any, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked copy: serve on the command's descriptors; exit when the command is gone."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.update(request["env"])

    def watch() -> None:
        while conn.recv(64):
            pass
        os._exit(4)  # the command was killed: the server with it

    threading.Thread(target=watch, daemon=True).start()
    try:
        mcp_server.main(request["argv"])
    finally:
        os._exit(0)


class Forks:
    """The fork server of one test: ``command(...)`` is a server's command line; ``close`` ends it and every copy."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.socket = str(directory / "mcp.sock")
        self.process = subprocess.Popen([sys.executable, LAUNCHER, "serve", self.socket], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != b"ready":
            self.close()
            raise RuntimeError("the MCP fork server did not start")

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-S", LAUNCHER, self.socket, *args]  # (-S: no site-packages, none needed)

    def __enter__(self) -> Forks:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """The fork server and its copies (its own process group) killed."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        hand_over(sys.argv[1], sys.argv[2:])
