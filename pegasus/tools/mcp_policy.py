"""The policy of an MCP host: when each server starts, which calls run, wait or fail, and the
effect class of each tool.  Pure: one input (with the clock) in, commands out, never raising.

Per server: its phase (``idle`` -> ``starting`` -> ``ready``, or ``failed`` until its retry), the
cached listing, the retry back-off and ``max_calls`` in flight.  A call waits for a server's first
start (or its start after it went away), but fails at once with the server's own error while it is
``failed``: retries run in the background, never on a call; listings never wait.  Its carriers
(``McpHost``, actors/mcp_host.py) do the I/O and arm its timers (docs/tools.md, "MCP servers").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from pegasus.tools.registry import EffectClass

Phase = Literal["idle", "starting", "ready", "failed"]


def tool_effect(annotations: dict[str, Any] | None, override: EffectClass | None,
                default: EffectClass | None) -> EffectClass:
    """A tool's effect class: its ``[mcp.servers.tools]`` override, else what its annotations say,
    else the server's ``effect``, else effectful.

    ``readOnlyHint`` -> pure; else ``idempotentHint`` -> idempotent; annotations that set
    either hint (to anything) but neither true -> effectful.  A tool without either hint
    takes the server's setting: the server's author said nothing about it.
    """
    if override is not None:
        return override
    hints = annotations or {}
    read_only, idempotent = hints.get("readOnlyHint"), hints.get("idempotentHint")
    if read_only is True:
        return "pure"
    if idempotent is True:
        return "idempotent"
    if read_only is not None or idempotent is not None:
        return "effectful"
    return default or "effectful"


# -- inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Begin:
    """The host starts: every server is started (in the background)."""


@dataclass(frozen=True)
class Started:
    server: str
    tools: tuple[dict[str, Any], ...]  # [{name, description, input_schema, annotations}]


@dataclass(frozen=True)
class StartFailed:
    server: str
    error: str


@dataclass(frozen=True)
class CallAsked:
    call: int
    server: str


@dataclass(frozen=True)
class CallEnded:
    call: int
    server: str
    went_away: bool = False  # the server died or the session broke during the call


@dataclass(frozen=True)
class RetryDue:
    server: str


PolicyInput = Begin | Started | StartFailed | CallAsked | CallEnded | RetryDue


# -- commands ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    server: str


@dataclass(frozen=True)
class Run:
    call: int
    server: str


@dataclass(frozen=True)
class Refuse:
    call: int
    server: str
    error: str


@dataclass(frozen=True)
class Arm:
    server: str
    delay_s: float  # then RetryDue(server)


@dataclass(frozen=True)
class Publish:
    """The server's listing changed: tell whoever reads listings (``McpPolicy.listing``)."""

    server: str


@dataclass(frozen=True)
class Stop:
    """End the server's session (it went away: whatever is left of it goes too)."""

    server: str


PolicyCommand = Start | Run | Refuse | Arm | Publish | Stop


# -- the core ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerRule:
    max_calls: int = 4
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0


@dataclass
class ServerState:
    rule: ServerRule
    phase: Phase = "idle"
    tools: tuple[dict[str, Any], ...] = ()  # the last listing (kept while it restarts)
    error: str = ""
    failures: int = 0  # starts failed in a row
    in_flight: set[int] = field(default_factory=set)
    waiting: deque[int] = field(default_factory=deque)


@dataclass(frozen=True)
class ServerView:
    """What a listing shows of one server."""

    phase: Phase
    tools: tuple[dict[str, Any], ...]
    error: str

    @property
    def first_start(self) -> bool:
        """Not yet started nor failed even once (a retry after a failure carries its error)."""
        return self.phase in ("idle", "starting") and not self.error


class McpPolicy:
    """Every configured server's state; ``step`` takes one input and returns the commands."""

    def __init__(self, rules: dict[str, ServerRule]) -> None:
        self.servers = {name: ServerState(rule) for name, rule in rules.items()}

    def listing(self) -> dict[str, ServerView]:
        return {name: ServerView(s.phase, s.tools, s.error) for name, s in self.servers.items()}

    def backoff(self, server: str) -> float:
        """The wait before the next start of a server whose starts failed ``failures`` times in a row."""
        state = self.servers[server]
        rule = state.rule
        return float(min(rule.backoff_max_s, rule.backoff_s * 2 ** max(0, state.failures - 1)))

    def step(self, event: PolicyInput) -> list[PolicyCommand]:
        if isinstance(event, Begin):
            return [command for name in self.servers for command in self._start(name)]
        state = self.servers.get(event.server)
        if state is None:
            return [Refuse(event.call, event.server, f"no MCP server named {event.server!r}")] \
                if isinstance(event, CallAsked) else []
        if isinstance(event, CallAsked):
            return self._asked(event, state)
        if isinstance(event, CallEnded):
            return self._ended(event, state)
        if isinstance(event, Started):
            if state.phase != "starting":
                return []
            state.phase, state.tools, state.error, state.failures = "ready", event.tools, "", 0
            return [Publish(event.server), *self._drain(event.server, state)]
        if isinstance(event, StartFailed):
            if state.phase != "starting":
                return []
            state.phase, state.error = "failed", event.error
            state.failures += 1
            refused: list[PolicyCommand] = [Refuse(call, event.server, event.error) for call in state.waiting]
            state.waiting.clear()
            return [*refused, Publish(event.server), Arm(event.server, self.backoff(event.server))]
        if isinstance(event, RetryDue):
            return self._start(event.server) if state.phase == "failed" else []
        return []

    def _start(self, server: str) -> list[PolicyCommand]:
        state = self.servers[server]
        if state.phase in ("starting", "ready"):
            return []
        state.phase = "starting"
        return [Start(server), Publish(server)]

    def _asked(self, event: CallAsked, state: ServerState) -> list[PolicyCommand]:
        if state.phase == "failed" or (state.phase == "starting" and state.failures):
            # A retry in the background: the last failure answers now, the call never waits for it.
            return [Refuse(event.call, event.server, state.error)]
        state.waiting.append(event.call)
        if state.phase == "idle":
            return self._start(event.server)
        return self._drain(event.server, state)

    def _ended(self, event: CallEnded, state: ServerState) -> list[PolicyCommand]:
        if event.call not in state.in_flight:
            return []
        state.in_flight.discard(event.call)
        if event.went_away and state.phase == "ready":
            # The calls still in flight on the dead session end with errors of their own.
            state.phase, state.failures = "idle", 0
            return [Stop(event.server), *self._start(event.server)]
        return self._drain(event.server, state)

    def _drain(self, server: str, state: ServerState) -> list[PolicyCommand]:
        if state.phase != "ready":
            return []
        runs: list[PolicyCommand] = []
        while state.waiting and len(state.in_flight) < state.rule.max_calls:
            call = state.waiting.popleft()
            state.in_flight.add(call)
            runs.append(Run(call, server))
        return runs
