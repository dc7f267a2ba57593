"""MCP servers from ``[[mcp.servers]]``, reached with the official ``mcp`` SDK over stdio (``command``)
or Streamable HTTP (``url``): the sessions of one process, carried out for the policy core.

``McpHost`` carries ``pegasus.tools.mcp_policy.McpPolicy`` on one event-loop thread per process (the
workers are synchronous, the SDK asyncio; the policy is stepped on that thread only, so no lock),
and every failure becomes a ToolError naming the server with its own reason.  A call whose outcome
is unknown fails ``ToolOutcomeUnknown`` when effectful, else is sent again with the same key
(``META_KEY``; docs/tools.md).  A caller that calls no server never waits (listings are cached).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import os
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from pegasus.tools import mcp_policy as p
from pegasus.tools.mcp_schema import args_model
from pegasus.tools.mcp_session import (
    CLOSE_TIMEOUT_S, McpServerSpec, Session, StartError, error_reason, first_attr, leaf_error, output_of,
)
from pegasus.tools.registry import EffectClass, ToolArgumentError, ToolError, ToolExecutionError, ToolOutcomeUnknown

__all__ = ["McpHost", "McpServerSpec", "close_all", "host_for"]

T = TypeVar("T")
CONNECTION_CLOSED = -32000  # the SDK's JSON-RPC code for "the server went away"
META_KEY = "pegasus/idempotency_key"  # the call's ``_meta`` entry that carries the step's idempotency key
MAX_SENDS = 3  # a pure or idempotent call whose outcome is unknown is sent at most this many times


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


# -- the host: the policy's carrier in this process ---------------------------------------------------


@dataclass
class _Call:
    server: str
    tool: str
    arguments: dict[str, Any]
    future: concurrent.futures.Future[Any]
    key: str | None = None  # the step's idempotency key, sent in the call's ``_meta`` (META_KEY)
    sends: int = 0  # how many times it was sent
    resend_until: float = 0.0  # (loop time) a re-send refused meanwhile (its server restarting) is asked again


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
        self._sessions: dict[str, Session] = {}
        self._ending: set[asyncio.Future[Any]] = set()  # sessions being closed: close() waits for them too
        self._starting: set[Session] = set()  # sessions not yet listed: close() ends them too
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

    def submit(self, server: str, tool: str, arguments: dict[str, Any],
               key: str | None = None) -> concurrent.futures.Future[Any]:
        """A future of the call's output; its exception is a ToolError naming ``<server>.<tool>`` once
        (ToolOutcomeUnknown: an effectful call sent whose outcome is unknown, never sent again)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        call = next(self._ids)
        self._calls[call] = _Call(server, tool, dict(arguments), future, key)
        _LOOP.soon(self._step, p.CallAsked(call, server))
        return future

    def call(self, server: str, tool: str, arguments: dict[str, Any], key: str | None = None) -> Any:
        spec = self.specs[server]
        future = self.submit(server, tool, arguments, key)
        try:  # the start and each send have their own timeouts: this only guards against a lost loop
            return future.result((spec.start_timeout_s + spec.timeout_s + CLOSE_TIMEOUT_S) * MAX_SENDS)
        except concurrent.futures.TimeoutError:
            name = f"{server}.{tool}"
            lost = ToolOutcomeUnknown if self.effect(server, tool) == "effectful" else ToolExecutionError
            raise lost(name, f"{name}: the MCP host did not answer") from None

    def effect(self, server: str, tool: str) -> EffectClass:
        """The tool's effect class: its override, else its listed annotations, else the server's."""
        spec = self.specs[server]
        listed = self.policy.listing()[server].tools
        entry = next((t for t in listed if t["name"] == tool), None)
        return p.tool_effect(entry["annotations"] if entry else None, dict(spec.tools).get(tool), spec.effect)

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
        call = self._calls.get(command.call)
        if call is not None and call.sends and asyncio.get_running_loop().time() < call.resend_until:
            # A re-send while its server starts again after a failed start: asked again on its back-off.
            delay = self.specs[call.server].backoff_s
            asyncio.get_running_loop().call_later(delay, self._step, p.CallAsked(command.call, call.server))
            return
        call = self._calls.pop(command.call, None)
        if call is not None and not call.future.done():
            name = f"{call.server}.{call.tool}"
            call.future.set_exception(ToolExecutionError(name, f"{name} is unavailable: {command.error}"))

    async def _start(self, server: str) -> None:
        spec = self.specs[server]
        old = self._sessions.pop(server, None)
        if old is not None:
            await old.close()
        if self._closed:  # closed meanwhile: a server started now would outlive its host
            return
        session = Session(spec)
        self._starting.add(session)
        try:
            tools = await session.start()
        except BaseException as exc:  # noqa: BLE001 - a server that cannot start is a clear tool error
            self._starting.discard(session)
            tail = session.stderr_tail()
            if isinstance(leaf_error(exc), (TimeoutError, asyncio.TimeoutError)):
                reason = f"it did not list its tools within {spec.start_timeout_s:g}s (mcp.start_timeout_s)"
            elif isinstance(exc, StartError) and "Connection closed" in str(exc) and not spec.url:
                reason = "it exited before it listed its tools"
            else:
                reason = str(exc) if isinstance(exc, StartError) else error_reason(exc)
            message = f"MCP server {server!r} ({spec.where()}) could not start: {reason}"
            if tail:
                message += f"; its stderr ends: {tail}"
            self._step(p.StartFailed(server, message))  # first: calls waiting for it fail now
            await self._closing(session.close(at_once=True))  # then its process goes (the SDK takes seconds)
            if not isinstance(exc, Exception):
                raise
            return
        self._starting.discard(session)
        if self._closed:  # listed after close() began: its process goes with the rest
            await self._closing(session.close())
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
        went_away, sent, unknown = False, False, ""
        try:
            _check(self.policy.listing()[call.server].tools, name, call.tool, call.arguments)
            if session is None or session.session is None:
                raise ConnectionError("no session")  # never sent: a plain failure
            meta = {META_KEY: call.key} if call.key else None
            call.sends, sent = call.sends + 1, True
            result = await asyncio.wait_for(session.session.call_tool(call.tool, call.arguments, meta=meta),
                                            spec.timeout_s)
            call.future.set_result(output_of(name, result))
        except ToolError as exc:
            call.future.set_exception(exc)
        except (asyncio.TimeoutError, TimeoutError):
            unknown = f"{name} did not answer within {spec.timeout_s:g}s (mcp server {call.server!r} timeout_s)"
        except Exception as exc:  # noqa: BLE001 - the server's failure becomes a tool error, never a crash
            if hasattr(exc, "error") and first_attr(exc, "code") != CONNECTION_CLOSED and session is not None \
                    and session.session is not None:
                # An MCP error answer (unknown tool, bad params): the server itself is fine.
                call.future.set_exception(ToolExecutionError(name, f"{name} failed: {exc}"))
            else:
                went_away = True
                tail = session.stderr_tail() if session is not None else ""
                unknown = (f"MCP server {call.server!r} went away during {name} ({error_reason(exc)})"
                           + (f"; its stderr ends: {tail}" if tail else "") + "; it is started again")
                if not sent:  # it died before this call was sent: the call is a plain failure
                    call.future.set_exception(ToolExecutionError(name, unknown))
                    unknown = ""
        if unknown:
            self._unknown(call_id, call, unknown)
        self._step(p.CallEnded(call_id, call.server, went_away))
        if call_id in self._calls:  # sent again (after the server's restart, when it went away)
            self._step(p.CallAsked(call_id, call.server))

    def _unknown(self, call_id: int, call: _Call, error: str) -> None:
        """A call sent whose outcome is unknown: an effectful one may have had its effect and is never
        sent again; a pure or idempotent one is sent again with the same key, up to MAX_SENDS times."""
        name, effect = f"{call.server}.{call.tool}", self.effect(call.server, call.tool)
        if effect == "effectful":
            call.future.set_exception(ToolOutcomeUnknown(name, f"{error}; {name} is effectful: not sent again"))
        elif call.sends >= MAX_SENDS:
            call.future.set_exception(ToolExecutionError(name, f"{error} (sent {call.sends} times)"))
        else:
            spec = self.specs[call.server]
            call.resend_until = asyncio.get_running_loop().time() + spec.start_timeout_s + spec.timeout_s
            self._calls[call_id] = call

    async def _closing(self, closing: Coroutine[Any, Any, None]) -> None:
        future = asyncio.ensure_future(closing)
        self._ending.add(future)
        try:
            await asyncio.shield(future)
        finally:
            self._ending.discard(future)

    async def _close_all(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        starting, self._starting = list(self._starting), set()
        await asyncio.gather(*(session.close() for session in sessions),
                             *(session.close(at_once=True) for session in starting), *self._ending,
                             return_exceptions=True)


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
