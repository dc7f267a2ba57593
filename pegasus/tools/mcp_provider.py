"""MCP servers' tools in the registry, as ``<server>.<tool>``: arguments checked against each tool's
JSON schema, effect classes from the annotations (``mcp_policy.tool_effect``), listings read
from a cache that never waits for a server.

A ``McpSource`` is a ``LocalSource`` (a host in this process: ``scope = "worker"`` servers,
``pegasus tools``) or a ``RemoteSource`` (the machine's MCP host actor, which pushes listings; the
worker asks it before an act stage and hands the answer over, ``prepare``, so a call never blocks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from pegasus.tools.mcp_policy import ServerView, tool_effect
from pegasus.tools.mcp_schema import args_model
from pegasus.tools.registry import EffectClass, Tool, ToolContext, ToolError, ToolExecutionError

if TYPE_CHECKING:  # the MCP client stack (asyncio) loads only where a server is configured (docs/memory.md)
    from pegasus.tools.mcp import McpHost, McpServerSpec


class McpSource(Protocol):
    def want(self) -> None: ...

    def view(self, server: str) -> ServerView | None: ...

    def settle(self, timeout: float) -> None: ...

    def call(self, server: str, tool: str, arguments: dict[str, Any], key: str | None = None) -> Any: ...


@dataclass
class LocalSource:
    """Servers run by a host in this process; started on first need (listing, call or settle)."""

    host: McpHost
    errors: dict[str, int] = field(default_factory=dict)  # server -> calls it failed or refused

    def want(self) -> None:
        self.host.begin()  # starts every server in the background, once

    def view(self, server: str) -> ServerView | None:
        return self.host.listing().get(server)

    def settle(self, timeout: float) -> None:
        self.host.settle(timeout)

    def call(self, server: str, tool: str, arguments: dict[str, Any], key: str | None = None) -> Any:
        self.host.begin()
        try:
            return self.host.call(server, tool, arguments, key)
        except Exception:
            self.errors[server] = self.errors.get(server, 0) + 1  # as the MCP host counts (/metrics)
            raise


@dataclass
class RemoteSource:
    """Servers run by the machine's MCP host actor: listings as it pushed them, answers as the worker
    received them (``prepare``) before the stage that makes the call."""

    views: dict[str, ServerView] = field(default_factory=dict)
    answers: dict[tuple[str, str, str], tuple[bool, Any]] = field(default_factory=dict)

    def want(self) -> None:
        return None  # the host actor starts its servers itself

    def view(self, server: str) -> ServerView | None:
        return self.views.get(server)

    def settle(self, timeout: float) -> None:
        return None  # the host pushes listings as they change: nothing to wait for here

    def prepare(self, server: str, tool: str, arguments: dict[str, Any], ok: bool, answer: Any) -> None:
        self.answers[(server, tool, _key(arguments))] = (ok, answer)

    def call(self, server: str, tool: str, arguments: dict[str, Any], key: str | None = None) -> Any:
        ok, answer = self.answers.pop((server, tool, _key(arguments)), (False, None))
        if ok:
            return answer
        if isinstance(answer, ToolError):
            raise answer
        name = f"{server}.{tool}"
        raise ToolExecutionError(name, f"{name}: no answer from the machine's MCP host")


def _key(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, default=str)


class McpProvider:
    """A registry tool provider: the tools of one server, named ``<server>.<tool>``, from its source's
    cached listing (built into Tools once per listing)."""

    def __init__(self, spec: McpServerSpec, source: McpSource) -> None:
        self.spec = spec
        self.source = source
        self._built: tuple[tuple[dict[str, Any], ...], dict[str, Tool]] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def effect(self) -> EffectClass:
        return self.spec.effect

    def view(self) -> ServerView:
        return self.source.view(self.name) or ServerView("idle", (), "")

    def settle(self, timeout: float) -> None:
        self.source.settle(timeout)

    def tools(self) -> dict[str, Tool]:
        """The server's tools by qualified name; ToolExecutionError (the server's own error) when it
        is not ready.  Never waits."""
        self.source.want()
        view = self.view()
        if view.phase != "ready":
            state = "failed" if view.phase == "failed" else "not started yet" if view.phase == "idle" else "starting"
            raise ToolExecutionError(None, view.error if view.phase == "failed"
                                     else f"MCP server {self.name!r} is {state}")
        if self._built is None or self._built[0] is not view.tools:
            self._built = (view.tools, {f"{self.name}.{entry['name']}": self._tool(entry) for entry in view.tools})
        return self._built[1]

    def known(self) -> list[str]:
        """Every tool name this server is known to have (its last listing), whatever its phase."""
        return [f"{self.name}.{entry['name']}" for entry in self.view().tools]

    def effect_of(self, name: str) -> EffectClass:
        """Override, else annotations (when listed), else the server's effect."""
        tool = name.partition(".")[2]
        overrides = dict(self.spec.tools)
        entry = next((t for t in self.view().tools if t["name"] == tool), None)
        return tool_effect(entry["annotations"] if entry else None, overrides.get(tool), self.spec.effect)

    def passthrough(self, name: str) -> Tool:
        """A tool not listed here (its server is starting, or failed): the source checks and answers."""
        self.source.want()
        return self._tool({"name": name.partition(".")[2], "description": f"{name} (MCP)",
                           "input_schema": {"type": "object"}, "annotations": {}})

    def _tool(self, entry: dict[str, Any]) -> Tool:
        qualified = f"{self.name}.{entry['name']}"
        source, server, tool = self.source, self.name, entry["name"]

        def call(args: BaseModel, ctx: ToolContext) -> Any:
            return source.call(server, tool, args.model_dump(), ctx.idempotency_key)

        return Tool(name=qualified, description=entry["description"] or f"{qualified} (MCP)",
                    args_model=args_model(qualified, entry["input_schema"]), effect=self.effect_of(qualified),
                    timeout_s=self.spec.timeout_s, func=call)


def local_servers(providers: list[Any]) -> dict[str, dict[str, Any]]:
    """The ``scope = "worker"`` servers this process runs, as the MCP host reports its own (/metrics): the
    phase, up (started and listed) and the calls each failed."""
    return {p.name: {"phase": (phase := p.view().phase), "up": phase == "ready",
                     "tool_errors": p.source.errors.get(p.name, 0)}
            for p in providers if isinstance(p, McpProvider) and isinstance(p.source, LocalSource)}
