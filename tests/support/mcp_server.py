"""A real MCP server for the tests, over stdio, built with the mcp SDK.

Tools: ``reverse`` (text reversed), ``add`` (two integers), ``fail`` (an error
result), ``crash`` (the process exits at once, mid-call: a server that dies),
``big`` (n characters: the registry's output cap).  ``python tests/support/mcp_server.py`` serves
over stdio; ``... --http PORT`` over Streamable HTTP at ``http://127.0.0.1:PORT/mcp``.
``PEGASUS_TEST_MCP_START_DELAY_S`` in its environment: it sleeps that long first (a slow start).
"""

from __future__ import annotations

import os
import sys
import time

try:  # mcp 2: FastMCP is MCPServer
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # pragma: no cover - mcp 1
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef]

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


@app.tool()
def big(n: int) -> str:
    """Return n characters."""
    return "y" * n


if __name__ == "__main__":
    time.sleep(float(os.environ.get("PEGASUS_TEST_MCP_START_DELAY_S") or 0))
    if sys.argv[1:2] == ["--http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run("stdio")
