"""A worker's calls to its machine's MCP host (actors/mcp_host.py): a part of ``WorkerCore``, pure.

The host is found by its global name before each call and check, so a dead one is replaced by the
first worker that needs it, never eagerly (one that exits with the system must not be made again).
While calls wait, every ``HOST_CHECK_S`` the worker asks which the host holds: one lost with its
host ends ToolOutcomeUnknown when effectful (never sent again), else is sent once more, same key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pegasus.config import Settings
from pegasus.tools.registry import ToolExecutionError, ToolOutcomeUnknown
from pegasus.worker.commands import Arm, AskHeld, CallHost, FindHost, WorkerCommand
from pegasus.worker.inputs import HostCheckDue

HOST_CHECK_S = 1.0
CHECK = None  # what waits for the host being found: the check (else a call's number)


@dataclass
class Asked:
    """One call waiting for its answer: the work it serves (opaque here) and the call itself."""

    work: Any
    call: tuple[str, str, dict[str, Any]]  # (server, tool, arguments)
    key: str | None
    effect: str  # as listed when it was asked (a new host lists nothing until its servers start)
    resent: bool = False

    @property
    def name(self) -> str:
        return f"{self.call[0]}.{self.call[1]}"


class HostCalls:
    def __init__(self) -> None:
        self.settings: Settings | None = None
        self.effect_of: Callable[[str], str | None] = lambda name: None
        self.host: Any = None
        self.asking: dict[int, Asked] = {}
        self.calls = 0
        self.checking = False  # a HostCheckDue is armed
        self._once_found: list[int | None] = []

    def start(self, settings: Settings, effect_of: Callable[[str], str | None], out: list[WorkerCommand]) -> None:
        self.settings, self.effect_of = settings, effect_of
        self._find(out)

    def ask(self, work: Any, call: tuple[str, str, dict[str, Any]], key: str | None,
            out: list[WorkerCommand]) -> None:
        self.calls += 1
        asked = Asked(work, call, key, "effectful")
        asked.effect = self.effect_of(asked.name) or "effectful"
        self.asking[self.calls] = asked
        self._find(out, self.calls)

    def _find(self, out: list[WorkerCommand], *then: int | None) -> None:
        if self.settings is None:
            raise RuntimeError("a machine-scope MCP call before the worker's settings")
        self._once_found.extend(then)
        out.append(FindHost(self.settings))

    def found(self, address: Any, out: list[WorkerCommand]) -> None:
        """(On HostFound.)  The host is at ``address``: send what waited for it."""
        self.host = address
        waiting, self._once_found = self._once_found, []
        for then in waiting:
            if then is CHECK:
                if self.asking:
                    out.append(AskHeld(self.host, tuple(self.asking)))
                    self._arm(out)
            elif then in self.asking:
                self._send(then, out)

    def _send(self, number: int, out: list[WorkerCommand]) -> None:
        asked = self.asking[number]
        out.append(CallHost(self.host, number, *asked.call, key=asked.key))
        self._arm(out)

    def _arm(self, out: list[WorkerCommand]) -> None:
        if not self.checking:
            self.checking = True
            out.append(Arm(HOST_CHECK_S, HostCheckDue()))

    def answered(self, call: int) -> Asked | None:
        """The call an answer is for, if it still waits."""
        return self.asking.pop(call, None)

    def check(self, out: list[WorkerCommand]) -> None:
        """(On HostCheckDue.)  Ask the host, found again, which of the waiting calls it holds."""
        self.checking = False
        if self.asking:
            self._find(out, CHECK)

    def host_exited(self, address: Any) -> bool:
        """(On ChildExited.)  Whether it is the host this worker found (the next need replaces it)."""
        return self.host is not None and address == self.host

    def lost(self, asked: tuple[int, ...], held: tuple[int, ...],
             out: list[WorkerCommand]) -> list[tuple[Asked, ToolExecutionError]]:
        """The calls asked about that the host does not hold, each with its error; a pure or
        idempotent one is sent again instead (once)."""
        ended: list[tuple[Asked, ToolExecutionError]] = []
        for number in [n for n in asked if n in self.asking and n not in held]:
            call = self.asking[number]
            effectful = call.effect == "effectful"
            if not effectful and not call.resent:
                call.resent = True
                self._send(number, out)
                continue
            del self.asking[number]
            name = call.name
            error = f"the machine's MCP host died during {name}"
            ended.append((call, ToolOutcomeUnknown(name, f"{error}; {name} is effectful: not sent again")
                          if effectful else ToolExecutionError(name, f"{error} (sent twice)")))
        return ended
