"""A real MCP server for the tests, over stdio, built with the mcp SDK.

Tools: ``reverse`` (text reversed), ``add`` (two integers), ``fail`` (an error
result), ``crash`` (the process exits at once, mid-call: a server that dies),
``big`` (n characters: the registry's output cap); ``record`` (effectful, unannotated) and
``touch`` (idempotentHint) append the call's idempotency key (its ``_meta``) to the file named by
``PEGASUS_TEST_MCP_RECORD`` and then, by ``mode``: answer (``ok``), ``hold`` (sleep: a call killed or
timed out mid-way) or ``exit`` (the process exits mid-call); ``touch`` does so only the first time it
sees a key, and answers every later call with it (a retry succeeds).  ``python tests/support/mcp_server.py`` serves
over stdio; ``... --http PORT`` over Streamable HTTP at ``http://127.0.0.1:PORT/mcp`` (or a copy of it forked from
one that imported it once: tests/support/mcp_fork.py).
``PEGASUS_TEST_MCP_START_DELAY_S`` in its environment: it sleeps that long first (a slow start).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

try:  # mcp 2: FastMCP is MCPServer
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # pragma: no cover - mcp 1
    from mcp.server.fastmcp import Context  # type: ignore[no-redef]
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef]
try:
    from mcp_types import ToolAnnotations
except ImportError:  # pragma: no cover - mcp 1
    from mcp.types import ToolAnnotations  # type: ignore[no-redef]

app = Server("pegasus-test")


@app.tool()
def reverse(text: str) -> str:
    """Reverse a text."""
    return text[::-1]


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def fail(reason: str = "asked to fail") -> str:
    """Always fail, with the reason."""
    raise ValueError(reason)


@app.tool()
def crash() -> str:
    """Exit the server process at once (a server that dies mid-call)."""
    os._exit(3)


def _recorded(ctx: Any) -> tuple[str, int]:
    """Append the call's key to the record file; (key, times it was recorded so far)."""
    key = str((ctx.request_context.meta or {}).get("pegasus/idempotency_key", "no-key"))
    path = os.environ["PEGASUS_TEST_MCP_RECORD"]
    with open(path, "a", encoding="utf-8") as record:
        record.write(key + "\n")
    with open(path, encoding="utf-8") as record:
        return key, record.read().split().count(key)


def _act(mode: str, key: str) -> str:
    if mode == "hold":  # until killed, or orphaned (its MCP host killed): never left behind
        parent, until = os.getppid(), time.monotonic() + 600
        while os.getppid() == parent and time.monotonic() < until:
            time.sleep(0.1)
        if os.getppid() != parent:
            os._exit(4)
    elif mode == "exit":
        os._exit(3)
    return f"recorded {key}"


@app.tool()
def record(mode: str, ctx: Context) -> str:
    """Record the call's idempotency key, then answer, hold or exit (an effectful tool)."""
    return _act(mode, _recorded(ctx)[0])


@app.tool(annotations=ToolAnnotations(idempotentHint=True))
def touch(mode: str, ctx: Context) -> str:
    """Record the call's idempotency key; the first time for a key, act as ``mode`` says."""
    key, times = _recorded(ctx)
    return _act(mode if times == 1 else "ok", key)


@app.tool()
def big(n: int) -> str:
    """Return n characters."""
    return "y" * n


def main(argv: list[str]) -> None:
    """Serve over stdio, or with ``--http PORT`` over Streamable HTTP (a copy forked by mcp_fork.py too)."""
    time.sleep(float(os.environ.get("PEGASUS_TEST_MCP_START_DELAY_S") or 0))
    if argv[:1] == ["--http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        app.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
