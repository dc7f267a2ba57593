"""MCP tools: servers from ``[[mcp.servers]]`` started over stdio with the official ``mcp`` SDK,
their tools in the registry as ``<server>.<tool>``.

What it owns: one background event-loop thread per process (started on first
use) that holds every MCP client session of the process; starting a server when
one of its tools is first needed, listing its tools, checking arguments against
each tool's JSON schema before the call, and turning every failure (a server
that cannot start, dies, times out or reports an error) into a ToolError that
names the server.  A dead server is started again by a later call; nothing here
can take the process down.  Sessions are closed at process exit (atexit).

What it must not do: block the caller beyond the configured timeouts, or decide
effect classes (the server's config entry does: ``effect``, default effectful).

Why a thread: the stage workers are synchronous actors, the SDK is asyncio.  A
session lives in one long-running task (its context managers must be entered
and left in the same task); calls are submitted to the loop with
``asyncio.run_coroutine_threadsafe(...).result(timeout)``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import re
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from pegasus.config import McpSettings
from pegasus.files import open_private
from pegasus.tools.registry import Effect, Tool, ToolArgumentError, ToolContext, ToolExecutionError

T = TypeVar("T")
RESTART_BACKOFF_S = 2.0  # after a failed start, calls fail at once for this long instead of starting again
CLOSE_TIMEOUT_S = 5.0
CONNECTION_CLOSED = -32000  # the SDK's JSON-RPC code for "the server went away"


@dataclass(frozen=True)
class McpServerSpec:
    """One ``[[mcp.servers]]`` entry plus where its stderr goes."""

    name: str
    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    effect: Effect
    timeout_s: float
    start_timeout_s: float
    errlog: str | None = None  # a file for the server's stderr; None: discarded

    @classmethod
    def from_settings(cls, mcp: McpSettings, errlog_dir: Path | None = None) -> list[McpServerSpec]:
        return [cls(name=s.name, command=s.command, args=tuple(s.args), env=tuple(sorted(s.env.items())),
                    effect=s.effect, timeout_s=s.timeout_s, start_timeout_s=mcp.start_timeout_s,
                    errlog=str(errlog_dir / f"mcp-{s.name}.log") if errlog_dir is not None else None)
                for s in mcp.servers]


# -- the loop thread ------------------------------------------------------------------------------


class _LoopThread:
    """An asyncio loop running forever in a daemon thread; a forked child makes its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="pegasus-mcp", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop; TimeoutError (the coroutine cancelled) after ``timeout`` seconds."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g}s") from None

    def running(self) -> bool:
        return self._loop is not None and self._pid == os.getpid()


_LOOP = _LoopThread()


# -- one server ------------------------------------------------------------------------------------


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    """The first attribute present (mcp 2 names fields in snake_case, mcp 1 in camelCase)."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


@dataclass
class McpConnection:
    """The session with one server in this process: started on demand, restarted after it died."""

    spec: McpServerSpec
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _session: Any = None
    _stop: asyncio.Event | None = None
    _task: asyncio.Task[None] | None = None
    _tools: list[dict[str, Any]] = field(default_factory=list)
    _failed: tuple[float, str] | None = None  # when the last start failed, and why

    def alive(self) -> bool:
        return self._session is not None and self._task is not None and not self._task.done()

    def tools(self) -> list[dict[str, Any]]:
        """``[{name, description, input_schema}]`` as the server lists them (starting it if need be)."""
        self._ensure()
        return list(self._tools)

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The tool's output (text, or structured content); ToolExecutionError on any failure."""
        qualified = f"{self.spec.name}.{tool}"
        session = self._ensure()
        try:
            result = _LOOP.run(session.call_tool(tool, arguments), self.spec.timeout_s)
        except TimeoutError:
            raise ToolExecutionError(qualified, f"{qualified} did not answer within {self.spec.timeout_s:g}s "
                                                f"(mcp server {self.spec.name!r} timeout_s)") from None
        except Exception as exc:  # noqa: BLE001 - the server's failure becomes a tool error, never a crash
            if hasattr(exc, "error") and _attr(exc, "code") != CONNECTION_CLOSED and self.alive():
                # An MCP error answer (unknown tool, bad params): the server itself is fine.
                raise ToolExecutionError(qualified, f"{qualified} failed: {exc}") from None
            self.close(wait=False)  # the server went away: the next call starts a new one
            raise ToolExecutionError(qualified, f"MCP server {self.spec.name!r} went away during {qualified} "
                                                f"({type(exc).__name__}: {exc}); it is started again on the next "
                                                f"call") from None
        return _output(qualified, result)

    def close(self, *, wait: bool = True) -> None:
        """End the session and the server process (waiting at most CLOSE_TIMEOUT_S, or not at all)."""
        with self._lock:
            stop, task = self._stop, self._task
            self._session = self._stop = self._task = None
        if stop is None or task is None or not _LOOP.running():
            return
        if not wait:
            asyncio.run_coroutine_threadsafe(_close(stop, task), _LOOP.loop())
            return
        try:
            _LOOP.run(_close(stop, task), CLOSE_TIMEOUT_S)
        except (TimeoutError, RuntimeError):
            pass

    # -- internals ------------------------------------------------------------------------------

    def _ensure(self) -> Any:
        with self._lock:
            if self.alive():
                return self._session
            if self._failed is not None and time.monotonic() - self._failed[0] < RESTART_BACKOFF_S:
                raise ToolExecutionError(None, self._failed[1])
            try:
                self._session, self._stop, self._task, self._tools = _LOOP.run(
                    self._start(), self.spec.start_timeout_s)
            except Exception as exc:  # noqa: BLE001 - a server that cannot start is a clear tool error
                reason = "it did not list its tools" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
                if isinstance(exc, TimeoutError):
                    reason += f" within {self.spec.start_timeout_s:g}s (mcp.start_timeout_s)"
                message = (f"MCP server {self.spec.name!r} ({' '.join([self.spec.command, *self.spec.args])}) "
                           f"could not start: {reason}")
                self._failed = (time.monotonic(), message)
                raise ToolExecutionError(None, message) from None
            self._failed = None
            return self._session

    async def _start(self) -> tuple[Any, asyncio.Event, asyncio.Task[None], list[dict[str, Any]]]:
        ready: asyncio.Future[tuple[Any, list[dict[str, Any]]]] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        task = asyncio.create_task(_serve(self.spec, ready, stop), name=f"mcp-{self.spec.name}")
        try:
            session, tools = await asyncio.shield(ready)
        except BaseException:
            stop.set()
            task.cancel()
            raise
        return session, stop, task, tools


async def _serve(spec: McpServerSpec, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
    """The session's task: start the server, list its tools, then hold the session until told to stop."""
    from mcp import ClientSession, StdioServerParameters  # noqa: PLC0415 - only MCP users load the SDK
    from mcp.client.stdio import get_default_environment, stdio_client  # noqa: PLC0415

    env = {**get_default_environment(), **dict(spec.env)}
    params = StdioServerParameters(command=spec.command, args=list(spec.args), env=env)
    # The server's stderr may quote tool output: its log is private (0600) like every log.
    errlog = (os.fdopen(open_private(spec.errlog), "a", encoding="utf-8") if spec.errlog
              else open(os.devnull, "w"))  # noqa: SIM115
    try:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools, cursor = [], None
            while True:
                listed = await (session.list_tools() if cursor is None else _list_page(session, cursor))
                tools += [{"name": str(t.name), "description": str(t.description or ""),
                           "input_schema": dict(_attr(t, "input_schema", "inputSchema", default={}))}
                          for t in listed.tools]
                cursor = _attr(listed, "next_cursor", "nextCursor")
                if not cursor:
                    break
            if not ready.done():
                ready.set_result((session, tools))
            await stop.wait()
    except BaseException as exc:
        if not ready.done():
            ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(f"stopped: {exc!r}"))
        if not isinstance(exc, Exception):
            raise
    finally:
        errlog.close()


async def _list_page(session: Any, cursor: str) -> Any:
    from mcp_types import PaginatedRequestParams  # noqa: PLC0415

    return await session.list_tools(params=PaginatedRequestParams(cursor=cursor))


async def _close(stop: asyncio.Event, task: asyncio.Task[None]) -> None:
    stop.set()
    try:
        await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_S - 0.5)
    except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - closing a broken session: nothing to report
        task.cancel()


def _output(qualified: str, result: Any) -> Any:
    """A CallToolResult as plain data: its text, else its structured content; an error result raises."""
    parts = []
    for item in _attr(result, "content", default=[]) or []:
        if getattr(item, "type", None) == "text":
            parts.append(str(item.text))
        else:
            kind = getattr(item, "mime_type", None) or getattr(item, "mimeType", None) or getattr(item, "type", "?")
            parts.append(f"[{kind} content]")
    text = "\n".join(parts)
    if _attr(result, "is_error", "isError", default=False):
        raise ToolExecutionError(qualified, f"{qualified} failed: {text or 'the server reported an error'}")
    structured = _attr(result, "structured_content", "structuredContent")
    if parts:
        return text
    return structured if structured is not None else ""


# -- the registry side ---------------------------------------------------------------------------------

_CONNECTIONS: dict[McpServerSpec, McpConnection] = {}
_CONNECTIONS_LOCK = threading.Lock()


def connection_for(spec: McpServerSpec) -> McpConnection:
    """The process's one connection for ``spec`` (registries built from the same settings share it)."""
    with _CONNECTIONS_LOCK:
        if spec not in _CONNECTIONS:
            _CONNECTIONS[spec] = McpConnection(spec)
        return _CONNECTIONS[spec]


def close_all() -> None:
    """Close every session of this process (registered with atexit)."""
    with _CONNECTIONS_LOCK:
        connections = list(_CONNECTIONS.values())
    for connection in connections:
        connection.close()


atexit.register(close_all)


def _problems(schema: dict[str, Any], data: Any) -> list[tuple[str, str]]:
    """(field, message) for each way ``data`` breaks ``schema`` (jsonschema; the mcp SDK depends on it)."""
    import jsonschema  # type: ignore[import-untyped]  # noqa: PLC0415 - no stubs; the mcp SDK brings it

    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        validator.check_schema(schema)
    except jsonschema.SchemaError:
        validator = jsonschema.Draft202012Validator({"type": "object"})
    found = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(part) for part in error.absolute_path)
        if not where and error.validator == "required":
            missing = re.match(r"'([^']+)'", error.message)
            where = missing.group(1) if missing else ""
        found.append((where or "<arguments>", error.message))
    return found


def args_model(tool: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that checks arguments against ``schema`` and reports that schema as its own."""
    schema = dict(schema or {"type": "object"})
    schema.setdefault("type", "object")

    class McpArguments(BaseModel):
        model_config = ConfigDict(extra="allow", frozen=True)

        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            problems = _problems(schema, data)
            if problems:
                raise ToolArgumentError(tool, [f for f, _ in problems],
                                        f"tool {tool!r}: bad argument(s) " + "; ".join(f"{f}: {m}" for f, m in problems))
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return json.loads(json.dumps(schema))

    McpArguments.__name__ = McpArguments.__qualname__ = re.sub(r"\W", "_", f"{tool}_arguments")
    return McpArguments


@dataclass(frozen=True)
class McpProvider:
    """A registry tool provider: the tools of one server, named ``<server>.<tool>``, listed on first need."""

    spec: McpServerSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def effect(self) -> Effect:
        return self.spec.effect

    def tools(self) -> list[Tool]:
        connection = connection_for(self.spec)
        found = []
        for listed in connection.tools():
            qualified = f"{self.spec.name}.{listed['name']}"
            found.append(Tool(name=qualified, description=listed["description"] or f"{qualified} (MCP)",
                              args_model=args_model(qualified, listed["input_schema"]), effect=self.spec.effect,
                              timeout_s=self.spec.timeout_s, func=_caller(connection, listed["name"])))
        return found


def _caller(connection: McpConnection, tool: str) -> Any:
    def call(args: BaseModel, ctx: ToolContext) -> Any:
        return connection.call(tool, args.model_dump())
    return call
