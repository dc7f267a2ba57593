"""The machine's MCP host: one copy of each ``scope = "machine"`` server per Thespian admin, shared by
its workers and task actors; a thin carrier over ``pegasus.tools.mcp.McpHost``.

Found by its global name (``MCP_HOST``, one per admin), it pushes listings to its subscribers and
answers ``McpCall``; an actor sends only from its own thread, so results from the sessions' loop
thread are collected on a short timer (POLL_S) while any is pending.  A host killed mid-call loses
its calls: waiting workers ask again and end them as of unknown outcome (pegasus/worker/host_calls.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher, WakeupMessage

from actors.runtime import procs, titles
from actors.messages import McpAnswer, McpCall, McpHeld, McpHeldAnswer, McpListing, McpSubscribe
from pegasus import logs
from pegasus.tools.plugins import mcp_specs
from pegasus.tools.registry import ToolError, ToolExecutionError

if TYPE_CHECKING:
    import concurrent.futures

    from pegasus.tools.mcp import McpHost

MCP_HOST = "pegasus-mcp-host"
POLL_S = 0.005  # while calls are in flight: what a call waits at most for its answer to be sent
IDLE_POLL_S = 0.2  # while a server starts or waits for its retry: how late a new listing may go out


class McpHostActor(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        procs.die_with_parent()
        self.host: McpHost | None = None
        self.subscribers: list[Any] = []
        self.pending: dict[concurrent.futures.Future[Any], tuple[Any, int, str]] = {}
        self.errors: dict[str, int] = {}  # server -> calls it failed (resets with this host)
        self.changed = False
        self.armed: float | None = None  # the delay of the timer armed (a shorter one may be armed too)
        self.log = logs.get("mcp_host")

    def receiveMsg_McpSubscribe(self, subscribe: McpSubscribe, sender: Any) -> None:
        if self.host is None:
            # Imported here: every process holds this module, only an MCP host the client stack (asyncio).
            from pegasus.tools.mcp import McpHost  # noqa: PLC0415

            logs.configure_from(subscribe.settings)
            titles.set_title("mcp host")
            specs = [spec for spec in mcp_specs(subscribe.settings) if spec.scope == "machine"]
            self.host = McpHost(specs, on_publish=self._published)
            self.host.begin()
            self.log.info("mcp_host_started", servers=[spec.name for spec in specs])
        if sender not in self.subscribers:
            self.subscribers.append(sender)
        self.send(sender, self._listing())
        self._arm()

    def receiveMsg_McpCall(self, call: McpCall, sender: Any) -> None:
        if self.host is None or call.server not in self.host.specs:
            name = f"{call.server}.{call.tool}"
            self.send(sender, McpAnswer(call.call, False, ToolExecutionError(
                name, f"{name}: no machine-scope MCP server {call.server!r} on this machine")))
            return
        self.pending[self.host.submit(call.server, call.tool, call.arguments, call.key)] = (sender, call.call,
                                                                                             call.server)
        self._arm()

    def receiveMsg_McpHeld(self, asked: McpHeld, sender: Any) -> None:
        # Answers go out in order after the calls they answer: a call answered already is the worker's.
        mine = {call for to, call, _ in self.pending.values() if to == sender}
        self.send(sender, McpHeldAnswer(asked.calls, tuple(call for call in asked.calls if call in mine)))

    def receiveMsg_WakeupMessage(self, wakeup: WakeupMessage, sender: Any) -> None:
        self.armed = None
        for future in [f for f in self.pending if f.done()]:
            to, call, server = self.pending.pop(future)
            error = future.exception()
            if error is None:
                self.send(to, McpAnswer(call, True, future.result()))
            else:
                self.errors[server] = self.errors.get(server, 0) + 1
                self.changed = True  # subscribers (the supervisor's stats) see the count
                if not isinstance(error, ToolError):
                    error = ToolExecutionError(None, f"MCP host: {type(error).__name__}: {error}")
                self.send(to, McpAnswer(call, False, error))
        if self.changed and self.host is not None:
            self.changed = False
            listing = self._listing()
            for subscriber in self.subscribers:
                self.send(subscriber, listing)
        self._arm()

    def receiveMsg_ActorExitRequest(self, request: ActorExitRequest, sender: Any) -> None:
        if self.host is not None:
            self.host.close()  # ends every server's process before this one goes

    def _listing(self) -> McpListing:
        assert self.host is not None
        return McpListing(dict(self.host.listing()), dict(self.errors))

    def _published(self) -> None:
        self.changed = True  # on the loop thread: the next wakeup sends it

    def _arm(self) -> None:
        if self.host is None:
            return
        settling = any(view.phase != "ready" for view in self.host.listing().values())
        delay = POLL_S if self.pending or self.changed else IDLE_POLL_S if settling else None
        if delay is not None and (self.armed is None or delay < self.armed):
            self.armed = delay
            self.wakeupAfter(timedelta(seconds=delay))
