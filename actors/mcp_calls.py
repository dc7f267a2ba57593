"""A worker's calls to its machine's MCP host (actors/mcp_host.py): asked by message, answered by
message, the worker's mailbox free meanwhile.

What it owns: the calls waiting for an answer, and finding out when the host died with them.
The host is found by its global name before each call and each check, so a host that died is
replaced by the first worker that needs it (Thespian creates a fresh one under the name), never
eagerly: a host that exits because the system stops must not be made again.
While calls wait, every HOST_CHECK_S the worker asks the host which of them it holds
(``McpHeld``): one it does not hold was lost with its host, and its outcome is unknown -- an
effectful call ends ToolOutcomeUnknown (never sent again), a pure or idempotent one is sent
once more to the new host, with the same idempotency key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from actors.mcp_host import MCP_HOST, McpHostActor
from actors.messages import McpAnswer, McpCall, McpHeld, McpHeldAnswer, McpSubscribe
from pegasus.config import Settings
from pegasus.tools.registry import Effect, ToolExecutionError, ToolOutcomeUnknown

HOST_CHECK = "mcp-host-check"  # the wakeup payload of the check
HOST_CHECK_S = 1.0


@dataclass
class Asked:
    """One call waiting for its answer: the work it serves (opaque here) and the call itself."""

    work: Any
    call: tuple[str, str, dict[str, Any]]  # (server, tool, arguments)
    key: str | None
    effect: Effect  # as listed when it was asked (a new host lists nothing until its servers start)
    resent: bool = False


class MachineCalls:
    """The calls of one worker (``actor``) to its machine's MCP host."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.settings: Settings | None = None
        self.effect_of: Callable[[str], Effect | None] = lambda name: None
        self.host: Any = None
        self.asking: dict[int, Asked] = {}
        self.calls = 0
        self.checking = False

    def start(self, settings: Settings, effect_of: Callable[[str], Effect | None]) -> None:
        self.settings, self.effect_of = settings, effect_of
        self._find_host()

    def _find_host(self) -> None:
        """The live host by its global name (a fresh one when it died); subscribed to its listings."""
        assert self.settings is not None
        self.host = self.actor.createActor(McpHostActor, globalName=MCP_HOST)
        self.actor.send(self.host, McpSubscribe(self.settings))

    def ask(self, work: Any, call: tuple[str, str, dict[str, Any]], key: str | None) -> None:
        self.calls += 1
        effect = self.effect_of("{}.{}".format(*call[:2])) or "effectful"
        self.asking[self.calls] = Asked(work, call, key, effect)
        self._find_host()
        self._send(self.calls)

    def _send(self, number: int) -> None:
        asked = self.asking[number]
        self.actor.send(self.host, McpCall(number, *asked.call, key=asked.key))
        if not self.checking:
            self.checking = True
            self.actor.wakeupAfter(timedelta(seconds=HOST_CHECK_S), payload=HOST_CHECK)

    def answered(self, answer: McpAnswer) -> tuple[Asked, bool, Any] | None:
        """(the call, ok, output) of an answer to a call still waiting; None for any other."""
        asked = self.asking.pop(answer.call, None)
        return None if asked is None else (asked, answer.ok, answer.output)

    def check(self) -> None:
        """(On HOST_CHECK.)  Ask the host, found again, which of the waiting calls it holds."""
        self.checking = False
        if self.asking:
            self._find_host()
            self.actor.send(self.host, McpHeld(tuple(self.asking)))
            self.checking = True
            self.actor.wakeupAfter(timedelta(seconds=HOST_CHECK_S), payload=HOST_CHECK)

    def host_exited(self, address: Any) -> bool:
        """(On ChildActorExited.)  Whether it is the host this worker made (the next need replaces it)."""
        return self.host is not None and address == self.host

    def lost(self, answer: McpHeldAnswer) -> list[tuple[Asked, ToolExecutionError]]:
        """The calls asked about that the host does not hold, each with its error; a pure or
        idempotent one is sent again instead (once)."""
        ended: list[tuple[Asked, ToolExecutionError]] = []
        for number in [n for n in answer.asked if n in self.asking and n not in answer.held]:
            asked = self.asking[number]
            name = "{}.{}".format(*asked.call[:2])
            effectful = asked.effect == "effectful"
            if not effectful and not asked.resent:
                asked.resent = True
                self._send(number)
                continue
            del self.asking[number]
            error = f"the machine's MCP host died during {name}"
            ended.append((asked, ToolOutcomeUnknown(name, f"{error}; {name} is effectful: not sent again")
                          if effectful else ToolExecutionError(name, f"{error} (sent twice)")))
        return ended
