"""One MCP server's session, held open on the host's loop (``Session``), and how its answers read
as plain data: the SDK's sessions, transports and result types, for ``pegasus.tools.mcp.McpHost``.

Why a task per session: the SDK's context managers must be entered and left in the same task.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pegasus.config import McpSettings
from pegasus.files import open_private
from pegasus.tools import mcp_policy as p
from pegasus.tools.registry import EffectClass, ToolExecutionError

CLOSE_TIMEOUT_S = 5.0
EXEC = str(Path(__file__).with_name("mcp_exec.py"))  # runs a server that dies with this process (Linux)
STDERR_TAIL_CHARS = 800


@dataclass(frozen=True)
class McpServerSpec:
    """One ``[[mcp.servers]]`` entry plus where its stderr goes."""

    name: str
    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    effect: EffectClass
    timeout_s: float
    start_timeout_s: float
    errlog: str | None = None  # a file for the server's stderr; None: a temporary file (for its tail)
    url: str = ""
    tools: tuple[tuple[str, EffectClass], ...] = ()  # per-tool effect overrides
    scope: str = "machine"
    max_calls: int = 4
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0

    @classmethod
    def from_settings(cls, mcp: McpSettings, errlog_dir: Path | None = None) -> list[McpServerSpec]:
        return [cls(name=s.name, command=s.command, args=tuple(s.args), env=tuple(sorted(s.env.items())),
                    effect=s.effect, timeout_s=s.timeout_s, start_timeout_s=mcp.start_timeout_s,
                    errlog=str(errlog_dir / f"mcp-{s.name}.log") if errlog_dir is not None else None,
                    url=s.url, tools=tuple(sorted(s.tools.items())), scope=s.scope, max_calls=s.max_calls,
                    backoff_s=mcp.retry_backoff_s, backoff_max_s=mcp.retry_backoff_max_s)
                for s in mcp.servers]

    def where(self) -> str:
        return self.url or " ".join([self.command, *self.args])

    def rule(self) -> p.ServerRule:
        return p.ServerRule(self.max_calls, self.backoff_s, self.backoff_max_s)


# -- one session ---------------------------------------------------------------------------------------


def first_attr(obj: Any, *names: str, default: Any = None) -> Any:
    """The first attribute present (mcp 2 names fields in snake_case, mcp 1 in camelCase)."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


def leaf_error(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups: the SDK wraps its errors in task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def error_reason(exc: BaseException) -> str:
    leaf = leaf_error(exc)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


class Session:
    """One running copy of a server: its SDK session, held open by a task until told to stop."""

    def __init__(self, spec: McpServerSpec) -> None:
        self.spec = spec
        self.session: Any = None
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.errlog: TextIO = (os.fdopen(open_private(spec.errlog), "a", encoding="utf-8") if spec.errlog
                                else tempfile.TemporaryFile("w+", encoding="utf-8"))
        self.errlog_from = self.errlog.tell()
        self._tail = ""

    def stderr_tail(self) -> str:
        """What the server wrote on stderr since this copy started (its end), for error messages."""
        if self.errlog.closed:
            return self._tail
        try:
            self.errlog.flush()
            source: Any = self.spec.errlog or self.errlog.fileno()  # the log is opened write-only
            with open(source, encoding="utf-8", errors="replace", closefd=not isinstance(source, int)) as reader:
                reader.seek(self.errlog_from)
                text = reader.read()
        except (OSError, ValueError):
            return ""
        text = text.strip()
        return text if len(text) <= STDERR_TAIL_CHARS else "..." + text[-STDERR_TAIL_CHARS:]

    async def start(self) -> tuple[dict[str, Any], ...]:
        ready: asyncio.Future[tuple[dict[str, Any], ...]] = asyncio.get_running_loop().create_future()
        self.task = asyncio.create_task(self._serve(ready), name=f"mcp-{self.spec.name}")
        return await asyncio.wait_for(asyncio.shield(ready), self.spec.start_timeout_s)  # the caller closes

    async def _serve(self, ready: asyncio.Future[tuple[dict[str, Any], ...]]) -> None:
        from mcp import ClientSession  # noqa: PLC0415 - only MCP users load the SDK

        try:
            async with self._transport() as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                tools, cursor = [], None
                while True:
                    listed = await (session.list_tools() if cursor is None else _list_page(session, cursor))
                    tools += [_listed(t) for t in listed.tools]
                    cursor = first_attr(listed, "next_cursor", "nextCursor")
                    if not cursor:
                        break
                self.session = session
                if not ready.done():
                    ready.set_result(tuple(tools))
                await self.stop.wait()
        except BaseException as exc:
            if not ready.done() and isinstance(exc, Exception):
                ready.set_exception(StartError(error_reason(exc)))
                ready.exception()  # retrieved: the start may have timed out already
            if not isinstance(exc, Exception):
                raise
        finally:
            self.session = None

    def _transport(self) -> Any:
        if self.spec.url:
            from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

            return _two(streamable_http_client(self.spec.url))
        from mcp import StdioServerParameters  # noqa: PLC0415
        from mcp.client.stdio import stdio_client  # noqa: PLC0415

        command, args = self.spec.command, list(self.spec.args)
        if sys.platform.startswith("linux"):
            command, args = sys.executable, ["-I", "-S", EXEC, str(os.getpid()), command, *args]
        params = StdioServerParameters(command=command, args=args, env=dict(self.spec.env))
        return stdio_client(params, errlog=self.errlog)

    async def close(self, *, at_once: bool = False) -> None:
        """End the session; ``at_once``: cancel it (a server stuck at start never reads a stop).
        Either way the SDK ends the server's process tree before this returns."""
        self.stop.set()
        task = self.task
        if task is not None and not task.done():
            if at_once:
                task.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_S)
            except (asyncio.TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - nothing to report
                task.cancel()
        if not self.errlog.closed:
            self._tail = self.stderr_tail()  # the server is gone: what it said is all there is
            self.errlog.close()


class StartError(Exception):
    """Why a server's start failed, already worded (the SDK's own error, unwrapped)."""


class _two:  # noqa: N801 - an async context manager adapter
    """The first two streams of a transport (Streamable HTTP yields a third: the session id getter)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __aenter__(self) -> tuple[Any, Any]:
        streams = await self.inner.__aenter__()
        return streams[0], streams[1]

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.inner.__aexit__(*exc)


def _listed(tool: Any) -> dict[str, Any]:
    annotations = first_attr(tool, "annotations")
    hints = {}
    if annotations is not None:
        for key, names in {"readOnlyHint": ("read_only_hint", "readOnlyHint"),
                           "idempotentHint": ("idempotent_hint", "idempotentHint"),
                           "destructiveHint": ("destructive_hint", "destructiveHint")}.items():
            value = first_attr(annotations, *names)
            if value is not None:
                hints[key] = bool(value)
    return {"name": str(tool.name), "description": str(tool.description or ""),
            "input_schema": dict(first_attr(tool, "input_schema", "inputSchema", default={})), "annotations": hints}


async def _list_page(session: Any, cursor: str) -> Any:
    from mcp_types import PaginatedRequestParams  # noqa: PLC0415

    return await session.list_tools(params=PaginatedRequestParams(cursor=cursor))


def output_of(qualified: str, result: Any) -> Any:
    """A CallToolResult as plain data: its text, else its structured content; an error result raises."""
    parts = []
    for item in first_attr(result, "content", default=[]) or []:
        if getattr(item, "type", None) == "text":
            parts.append(str(item.text))
        else:
            kind = getattr(item, "mime_type", None) or getattr(item, "mimeType", None) or getattr(item, "type", "?")
            parts.append(f"[{kind} content]")
    text = "\n".join(parts)
    if first_attr(result, "is_error", "isError", default=False):
        raise ToolExecutionError(qualified, f"{qualified} failed: {text or 'the server reported an error'}")
    structured = first_attr(result, "structured_content", "structuredContent")
    if parts:
        return text
    return structured if structured is not None else ""


