"""MCP servers from ``[[mcp.servers]]``, reached with the official ``mcp`` SDK over stdio (``command``)
or Streamable HTTP (``url``): the sessions of one process, carried out for the policy core.

What it owns: one background event-loop thread per process (started on first use) that
holds the process's MCP client sessions; ``McpHost``, the carrier of
``pegasus.tools.mcp_policy.McpPolicy`` (every decision -- start, retry, wait, refuse -- is
the core's; the host starts sessions, runs calls and arms timers on the loop); turning every
failure into a ToolError that names the server once, with the server's own reason (the tail
of its stderr) instead of the SDK's task-group wrapper.  Nothing here can take the process
down; sessions are closed at process exit (atexit), which ends the servers' processes.

What it must not do: block a caller that does not call a server (listings are read from the
host's cache, never from a server), or decide effect classes (``mcp_policy.tool_effect``).

Why a thread: the stage workers and actors are synchronous, the SDK is asyncio.  A session
lives in one long-running task (its context managers must be entered and left in the same
task); the policy is stepped on the loop thread only, so it needs no lock.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import os
import tempfile
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from pegasus.config import McpSettings
from pegasus.files import open_private
from pegasus.tools import mcp_policy as p
from pegasus.tools.mcp_schema import args_model
from pegasus.tools.registry import Effect, ToolArgumentError, ToolError, ToolExecutionError

T = TypeVar("T")
CLOSE_TIMEOUT_S = 5.0
CONNECTION_CLOSED = -32000  # the SDK's JSON-RPC code for "the server went away"
STDERR_TAIL_CHARS = 800


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
    errlog: str | None = None  # a file for the server's stderr; None: a temporary file (for its tail)
    url: str = ""
    tools: tuple[tuple[str, Effect], ...] = ()  # per-tool effect overrides
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

    def soon(self, func: Callable[..., Any], *args: Any) -> None:
        self.loop().call_soon_threadsafe(func, *args)

    def running(self) -> bool:
        return self._loop is not None and self._pid == os.getpid()


_LOOP = _LoopThread()


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    """The first attribute present (mcp 2 names fields in snake_case, mcp 1 in camelCase)."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups: the SDK wraps its errors in task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    leaf = _leaf(exc)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


# -- one session ------------------------------------------------------------------------------------


class _Session:
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
                    cursor = _attr(listed, "next_cursor", "nextCursor")
                    if not cursor:
                        break
                self.session = session
                if not ready.done():
                    ready.set_result(tuple(tools))
                await self.stop.wait()
        except BaseException as exc:
            if not ready.done() and isinstance(exc, Exception):
                ready.set_exception(_StartError(_reason(exc)))
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

        params = StdioServerParameters(command=self.spec.command, args=list(self.spec.args), env=dict(self.spec.env))
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


class _StartError(Exception):
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
    annotations = _attr(tool, "annotations")
    hints = {}
    if annotations is not None:
        for key, names in {"readOnlyHint": ("read_only_hint", "readOnlyHint"),
                           "idempotentHint": ("idempotent_hint", "idempotentHint"),
                           "destructiveHint": ("destructive_hint", "destructiveHint")}.items():
            value = _attr(annotations, *names)
            if value is not None:
                hints[key] = bool(value)
    return {"name": str(tool.name), "description": str(tool.description or ""),
            "input_schema": dict(_attr(tool, "input_schema", "inputSchema", default={})), "annotations": hints}


async def _list_page(session: Any, cursor: str) -> Any:
    from mcp_types import PaginatedRequestParams  # noqa: PLC0415

    return await session.list_tools(params=PaginatedRequestParams(cursor=cursor))


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


# -- the host: the policy's carrier in this process ---------------------------------------------------


@dataclass
class _Call:
    server: str
    tool: str
    arguments: dict[str, Any]
    future: concurrent.futures.Future[Any]


class McpHost:
    """The copies of some servers in this process, started and called as ``McpPolicy`` decides.

    Thread-safe: every method may be called from any thread; the policy runs on the loop.
    ``on_publish`` is called (on the loop thread) after each change of a server's listing.
    """

    def __init__(self, specs: list[McpServerSpec], on_publish: Callable[[], None] | None = None, *,
                 retry: bool = True) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.retry = retry  # False: a failed server stays failed (``pegasus tools`` starts each server once)
        self.policy = p.McpPolicy({spec.name: spec.rule() for spec in specs})
        self.on_publish = on_publish
        self._views = self.policy.listing()  # replaced whole on each Publish: readers need no lock
        self._changed = threading.Condition()
        self._sessions: dict[str, _Session] = {}
        self._ending: set[asyncio.Future[Any]] = set()  # sessions being closed: close() waits for them too
        self._calls: dict[int, _Call] = {}
        self._ids = itertools.count(1)
        self._begun = False
        self._closed = False

    def begin(self) -> None:
        """Start every server in the background (once)."""
        if not self._begun:
            self._begun = True
            _LOOP.soon(self._step, p.Begin())

    def listing(self) -> dict[str, p.ServerView]:
        return self._views

    def settle(self, timeout: float) -> dict[str, p.ServerView]:
        """The listing once no server is starting any more (or after ``timeout`` seconds)."""
        self.begin()
        with self._changed:
            self._changed.wait_for(lambda: all(v.phase in ("ready", "failed") for v in self._views.values()),
                                   timeout)
        return self._views

    def submit(self, server: str, tool: str, arguments: dict[str, Any]) -> concurrent.futures.Future[Any]:
        """A future of the call's output; its exception is a ToolError naming ``<server>.<tool>`` once."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        call = next(self._ids)
        self._calls[call] = _Call(server, tool, dict(arguments), future)
        _LOOP.soon(self._step, p.CallAsked(call, server))
        return future

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        spec = self.specs[server]
        future = self.submit(server, tool, arguments)
        try:  # the start and the call each have their own timeout: this only guards against a lost loop
            return future.result(spec.start_timeout_s + spec.timeout_s + CLOSE_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            raise ToolExecutionError(f"{server}.{tool}", f"{server}.{tool}: the MCP host did not answer") from None

    def close(self) -> None:
        """End every session and its server process (waiting at most CLOSE_TIMEOUT_S)."""
        self._closed = True
        if not _LOOP.running():
            return
        try:
            _LOOP.run(self._close_all(), CLOSE_TIMEOUT_S)
        except (TimeoutError, RuntimeError):
            pass

    # -- carrying out the policy's commands (on the loop thread) -----------------------------------

    def _step(self, event: p.PolicyInput) -> None:
        for command in self.policy.step(event):
            if isinstance(command, p.Start):
                if not self._closed:
                    asyncio.ensure_future(self._start(command.server))
            elif isinstance(command, p.Run):
                asyncio.ensure_future(self._run(command.call))
            elif isinstance(command, p.Refuse):
                self._refuse(command)
            elif isinstance(command, p.Arm):
                if self.retry and not self._closed:
                    asyncio.get_running_loop().call_later(command.delay_s, self._step, p.RetryDue(command.server))
            elif isinstance(command, p.Publish):
                self._publish()
            elif isinstance(command, p.Stop):
                session = self._sessions.pop(command.server, None)
                if session is not None:
                    asyncio.ensure_future(self._closing(session.close()))

    def _publish(self) -> None:
        with self._changed:
            self._views = self.policy.listing()
            self._changed.notify_all()
        if self.on_publish is not None:
            self.on_publish()

    def _refuse(self, command: p.Refuse) -> None:
        call = self._calls.pop(command.call, None)
        if call is not None and not call.future.done():
            name = f"{call.server}.{call.tool}"
            call.future.set_exception(ToolExecutionError(name, f"{name} is unavailable: {command.error}"))

    async def _start(self, server: str) -> None:
        spec = self.specs[server]
        old = self._sessions.pop(server, None)
        if old is not None:
            await old.close()
        session = _Session(spec)
        try:
            tools = await session.start()
        except BaseException as exc:  # noqa: BLE001 - a server that cannot start is a clear tool error
            tail = session.stderr_tail()
            if isinstance(_leaf(exc), (TimeoutError, asyncio.TimeoutError)):
                reason = f"it did not list its tools within {spec.start_timeout_s:g}s (mcp.start_timeout_s)"
            elif isinstance(exc, _StartError) and "Connection closed" in str(exc) and not spec.url:
                reason = "it exited before it listed its tools"
            else:
                reason = str(exc) if isinstance(exc, _StartError) else _reason(exc)
            message = f"MCP server {server!r} ({spec.where()}) could not start: {reason}"
            if tail:
                message += f"; its stderr ends: {tail}"
            self._step(p.StartFailed(server, message))  # first: calls waiting for it fail now
            await self._closing(session.close(at_once=True))  # then its process goes (the SDK takes seconds)
            if not isinstance(exc, Exception):
                raise
            return
        self._sessions[server] = session
        import jsonschema  # type: ignore[import-untyped]  # noqa: F401, PLC0415 - now, not on the first call (~80 ms)

        self._step(p.Started(server, tools))

    async def _run(self, call_id: int) -> None:
        call = self._calls.pop(call_id, None)
        if call is None:
            return
        spec, name = self.specs[call.server], f"{call.server}.{call.tool}"
        session = self._sessions.get(call.server)
        went_away = False
        try:
            _check(self.policy.listing()[call.server].tools, name, call.tool, call.arguments)
            if session is None or session.session is None:
                raise ConnectionError("no session")
            result = await asyncio.wait_for(session.session.call_tool(call.tool, call.arguments), spec.timeout_s)
            call.future.set_result(_output(name, result))
        except ToolError as exc:
            call.future.set_exception(exc)
        except (asyncio.TimeoutError, TimeoutError):
            call.future.set_exception(ToolExecutionError(
                name, f"{name} did not answer within {spec.timeout_s:g}s (mcp server {call.server!r} timeout_s)"))
        except Exception as exc:  # noqa: BLE001 - the server's failure becomes a tool error, never a crash
            if hasattr(exc, "error") and _attr(exc, "code") != CONNECTION_CLOSED and session is not None \
                    and session.session is not None:
                # An MCP error answer (unknown tool, bad params): the server itself is fine.
                call.future.set_exception(ToolExecutionError(name, f"{name} failed: {exc}"))
            else:
                went_away = True
                tail = session.stderr_tail() if session is not None else ""
                call.future.set_exception(ToolExecutionError(
                    name, f"MCP server {call.server!r} went away during {name} ({_reason(exc)})"
                          + (f"; its stderr ends: {tail}" if tail else "") + "; it is started again"))
        self._step(p.CallEnded(call_id, call.server, went_away))

    async def _closing(self, closing: Coroutine[Any, Any, None]) -> None:
        future = asyncio.ensure_future(closing)
        self._ending.add(future)
        try:
            await asyncio.shield(future)
        finally:
            self._ending.discard(future)

    async def _close_all(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(session.close() for session in sessions), *self._ending, return_exceptions=True)


def _check(listed: tuple[dict[str, Any], ...], name: str, tool: str, arguments: dict[str, Any]) -> None:
    """The arguments against the listed schema (the host may be asked by a worker that could not check)."""
    entry = next((t for t in listed if t["name"] == tool), None)
    if entry is None:
        return  # the server answers an unknown tool itself
    try:
        args_model(name, entry["input_schema"]).model_validate(arguments)
    except ToolArgumentError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ToolArgumentError(name, ["<arguments>"], f"tool {name!r}: bad argument(s) {exc}") from None


# -- the process's hosts -----------------------------------------------------------------------------

_HOSTS: dict[tuple[McpServerSpec, ...], McpHost] = {}
_HOSTS_LOCK = threading.Lock()


def host_for(specs: list[McpServerSpec], *, retry: bool = True) -> McpHost:
    """The process's one host for these servers (registries built from the same settings share it)."""
    key = tuple(specs)
    with _HOSTS_LOCK:
        if key not in _HOSTS:
            _HOSTS[key] = McpHost(specs, retry=retry)
        return _HOSTS[key]


def close_all() -> None:
    """Close every session of this process (registered with atexit)."""
    with _HOSTS_LOCK:
        hosts = list(_HOSTS.values())
        _HOSTS.clear()
    for host in hosts:
        host.close()


atexit.register(close_all)
