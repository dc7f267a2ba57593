"""Workers and task actors with their machine's MCP host (actors/mcp_host.py): listings pushed,
tool calls asked and answered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pegasus.config import Settings
from pegasus.tools.mcp_policy import ServerView


@dataclass(frozen=True)
class McpSubscribe:
    """A worker or task actor -> the host: send me every listing (the first one configures the host)."""

    settings: Settings


@dataclass(frozen=True)
class McpListing:
    """The host -> subscribers: every machine-scope server's phase, tools and error, after each change;
    the calls each server failed so far (``errors``: for /metrics, through the supervisor's stats)."""

    views: dict[str, ServerView] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class McpCall:
    """A worker -> the host: call ``<server>.<tool>`` with ``arguments`` (checked by the host)."""

    call: int
    server: str
    tool: str
    arguments: dict[str, Any]
    key: str | None = None  # the step's idempotency key: the server gets it in the call's ``_meta``


@dataclass(frozen=True)
class McpAnswer:
    """The host -> the worker: the call's output (``ok``) or its ToolError."""

    call: int
    ok: bool
    output: Any = None


@dataclass(frozen=True)
class McpHeld:
    """A worker -> the host, while it waits for answers: which of these calls do you hold?  (A host
    that was replaced holds none: their outcome is unknown.)"""

    calls: tuple[int, ...]


@dataclass(frozen=True)
class McpHeldAnswer:
    """The host -> the worker: of the calls ``asked`` about, those it holds (not yet answered)."""

    asked: tuple[int, ...]
    held: tuple[int, ...]
